#include "alerting/expr.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include "alerting/metrics.h"
#include "common/clock.h"
#include "common/pattern.h"
#include "common/strings.h"

namespace gpufleet::alerting {
namespace {

constexpr int64_t kMaxRangeMs = 24 * 3'600'000;  // the raw tier's retention
constexpr size_t kMaxDepth = 64;

const std::set<std::string, std::less<>> kRangeFunctions = {
    "avg_over_time",  "min_over_time", "max_over_time", "sum_over_time", "count_over_time",
    "last_over_time", "rate",          "increase",      "delta"};
const std::set<std::string, std::less<>> kInstantFunctions = {"abs"};
const std::set<std::string, std::less<>> kAggregations = {"sum", "avg", "min", "max", "count"};

struct Token {
  enum class Type { kEnd, kIdent, kNumber, kString, kDuration, kPunct };
  Type type = Type::kEnd;
  std::string text;
  double number = 0;
  size_t pos = 0;
};

std::string_view OpText(Op op) {
  switch (op) {
    case Op::kAdd:
      return "+";
    case Op::kSub:
      return "-";
    case Op::kMul:
      return "*";
    case Op::kDiv:
      return "/";
    case Op::kEq:
      return "==";
    case Op::kNe:
      return "!=";
    case Op::kGt:
      return ">";
    case Op::kLt:
      return "<";
    case Op::kGe:
      return ">=";
    case Op::kLe:
      return "<=";
    case Op::kAnd:
      return "and";
    case Op::kOr:
      return "or";
    case Op::kUnless:
      return "unless";
  }
  return "?";
}

std::string NumberText(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Result<std::unique_ptr<Expr>> Run() {
    if (auto s = Lex(); !s.ok()) return s.error();
    auto e = Or(0);
    if (!e.ok()) return e;
    if (Peek().type != Token::Type::kEnd)
      return Fail(Peek().pos, "unexpected '" + Peek().text + "'");
    if (!e.value()->vector) {
      return Fail(0, "the expression gives a number, not a series: an alert needs a series");
    }
    return e;
  }

 private:
  Error Fail(size_t pos, const std::string& why) const {
    return MakeError(ErrorCode::kInvalidArgument,
                     "expr: at " + std::to_string(pos + 1) + ": " + why);
  }

  Status Lex() {
    size_t i = 0;
    while (i < text_.size()) {
      char c = text_[i];
      if (std::isspace(static_cast<unsigned char>(c))) {
        ++i;
        continue;
      }
      Token t;
      t.pos = i;
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t j = i;
        while (j < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[j])) ||
                                    text_[j] == '_' || text_[j] == ':')) {
          ++j;
        }
        t.type = Token::Type::kIdent;
        t.text = std::string(text_.substr(i, j - i));
        i = j;
      } else if (std::isdigit(static_cast<unsigned char>(c)) ||
                 (c == '.' && i + 1 < text_.size() &&
                  std::isdigit(static_cast<unsigned char>(text_[i + 1])))) {
        size_t j = i;
        while (j < text_.size() &&
               (std::isalnum(static_cast<unsigned char>(text_[j])) || text_[j] == '.' ||
                ((text_[j] == '+' || text_[j] == '-') && j > i &&
                 (text_[j - 1] == 'e' || text_[j - 1] == 'E')))) {
          ++j;
        }
        std::string word(text_.substr(i, j - i));
        // Inside brackets a number with a unit is a duration ("5m"); elsewhere a number.
        if (in_brackets_) {
          t.type = Token::Type::kDuration;
          t.text = word;
        } else {
          char* end = nullptr;
          t.number = std::strtod(word.c_str(), &end);
          if (end != word.c_str() + word.size() || !std::isfinite(t.number)) {
            return Fail(i, "'" + word + "' is not a number");
          }
          t.type = Token::Type::kNumber;
          t.text = word;
        }
        i = j;
      } else if (c == '"' || c == '\'') {
        std::string value;
        size_t j = i + 1;
        for (; j < text_.size() && text_[j] != c; ++j) {
          if (text_[j] == '\\' && j + 1 < text_.size()) ++j;
          value += text_[j];
        }
        if (j >= text_.size()) return Fail(i, "a string is not closed");
        t.type = Token::Type::kString;
        t.text = value;
        i = j + 1;
      } else {
        static const char* kTwo[] = {"==", "!=", ">=", "<=", "=~", "!~"};
        t.type = Token::Type::kPunct;
        t.text = std::string(1, c);
        for (const char* two : kTwo) {
          if (text_.substr(i, 2) == two) t.text = two;
        }
        if (std::string_view("(){}[],=<>+-*/!").find(c) == std::string_view::npos) {
          return Fail(i, std::string("unexpected character '") + c + "'");
        }
        if (t.text == "!") return Fail(i, "unexpected '!'");
        if (c == '[') in_brackets_ = true;
        if (c == ']') in_brackets_ = false;
        i += t.text.size();
      }
      tokens_.push_back(std::move(t));
    }
    Token end;
    end.pos = text_.size();
    tokens_.push_back(end);
    return {};
  }

  const Token& Peek() const { return tokens_[at_]; }
  const Token& Next() { return tokens_[at_ < tokens_.size() - 1 ? at_++ : at_]; }
  bool IsPunct(std::string_view p) const {
    return Peek().type == Token::Type::kPunct && Peek().text == p;
  }
  bool IsWord(std::string_view w) const {
    return Peek().type == Token::Type::kIdent && Peek().text == w;
  }
  Status Expect(std::string_view p) {
    if (!IsPunct(p)) {
      return Fail(Peek().pos,
                  "expected '" + std::string(p) + "'" +
                      (Peek().type == Token::Type::kEnd ? std::string(" at the end")
                                                        : ", found '" + Peek().text + "'"));
    }
    Next();
    return {};
  }

  using Ptr = std::unique_ptr<Expr>;

  Result<Ptr> Binary(Ptr left, Op op, Ptr right, size_t pos) {
    bool set_op = op == Op::kAnd || op == Op::kOr || op == Op::kUnless;
    if (set_op && (!left->vector || !right->vector)) {
      return Fail(pos, "'" + std::string(OpText(op)) + "' needs a series on both sides");
    }
    auto e = std::make_unique<Expr>();
    e->kind = Expr::Kind::kBinary;
    e->op = op;
    e->vector = left->vector || right->vector;
    e->key = "(" + left->key + " " + std::string(OpText(op)) + " " + right->key + ")";
    if (!e->vector) {  // fold numbers: "1024 * 1024"
      double a = left->number, b = right->number, v = 0;
      switch (op) {
        case Op::kAdd:
          v = a + b;
          break;
        case Op::kSub:
          v = a - b;
          break;
        case Op::kMul:
          v = a * b;
          break;
        case Op::kDiv:
          v = a / b;
          break;
        default:
          return Fail(pos, "a comparison of two numbers: compare a series");
      }
      // Literals are finite, so the canonical text (the cache key) never holds inf or nan.
      if (!std::isfinite(v)) return Fail(pos, "numbers that make no finite number (1/0?)");
      e->kind = Expr::Kind::kNumber;
      e->number = v;
      e->key = NumberText(v);
      return e;
    }
    e->args.push_back(std::move(left));
    e->args.push_back(std::move(right));
    return e;
  }

  // Precedence, lowest first: or; and, unless; comparisons; + -; * /.
  Result<Ptr> Or(size_t depth) {
    auto left = And(depth);
    if (!left.ok()) return left;
    while (IsWord("or")) {
      size_t pos = Next().pos;
      auto right = And(depth);
      if (!right.ok()) return right;
      left = Binary(std::move(left.value()), Op::kOr, std::move(right.value()), pos);
      if (!left.ok()) return left;
    }
    return left;
  }

  Result<Ptr> And(size_t depth) {
    auto left = Compare(depth);
    if (!left.ok()) return left;
    while (IsWord("and") || IsWord("unless")) {
      Op op = Peek().text == "and" ? Op::kAnd : Op::kUnless;
      size_t pos = Next().pos;
      auto right = Compare(depth);
      if (!right.ok()) return right;
      left = Binary(std::move(left.value()), op, std::move(right.value()), pos);
      if (!left.ok()) return left;
    }
    return left;
  }

  Result<Ptr> Compare(size_t depth) {
    auto left = Sum(depth);
    if (!left.ok()) return left;
    while (true) {
      static const std::pair<std::string_view, Op> kOps[] = {{"==", Op::kEq}, {"!=", Op::kNe},
                                                             {">", Op::kGt},  {"<", Op::kLt},
                                                             {">=", Op::kGe}, {"<=", Op::kLe}};
      const Op* op = nullptr;
      for (const auto& [text, o] : kOps) {
        if (IsPunct(text)) op = &o;
      }
      if (!op) return left;
      Op o = *op;
      size_t pos = Next().pos;
      if (IsWord("bool"))
        return Fail(Peek().pos, "'bool' is not supported: an alert needs a filter");
      auto right = Sum(depth);
      if (!right.ok()) return right;
      left = Binary(std::move(left.value()), o, std::move(right.value()), pos);
      if (!left.ok()) return left;
    }
  }

  Result<Ptr> Sum(size_t depth) {
    auto left = Product(depth);
    if (!left.ok()) return left;
    while (IsPunct("+") || IsPunct("-")) {
      Op op = Peek().text == "+" ? Op::kAdd : Op::kSub;
      size_t pos = Next().pos;
      auto right = Product(depth);
      if (!right.ok()) return right;
      left = Binary(std::move(left.value()), op, std::move(right.value()), pos);
      if (!left.ok()) return left;
    }
    return left;
  }

  Result<Ptr> Product(size_t depth) {
    auto left = Unary(depth);
    if (!left.ok()) return left;
    while (IsPunct("*") || IsPunct("/")) {
      Op op = Peek().text == "*" ? Op::kMul : Op::kDiv;
      size_t pos = Next().pos;
      auto right = Unary(depth);
      if (!right.ok()) return right;
      left = Binary(std::move(left.value()), op, std::move(right.value()), pos);
      if (!left.ok()) return left;
    }
    return left;
  }

  Result<Ptr> Unary(size_t depth) {
    if (depth > kMaxDepth) return Fail(Peek().pos, "the expression is nested too deeply");
    if (IsPunct("-")) {
      Next();
      auto inner = Unary(depth + 1);
      if (!inner.ok()) return inner;
      Ptr x = std::move(inner.value());
      if (!x->vector) {
        x->number = -x->number;
        x->key = NumberText(x->number);
        return x;
      }
      auto e = std::make_unique<Expr>();
      e->kind = Expr::Kind::kNegate;
      e->vector = true;
      e->key = "-" + x->key;
      e->args.push_back(std::move(x));
      return e;
    }
    if (IsPunct("+")) {
      Next();
      return Unary(depth + 1);
    }
    return Primary(depth);
  }

  Result<Ptr> Primary(size_t depth) {
    const Token& t = Peek();
    if (t.type == Token::Type::kNumber) {
      Next();
      auto e = std::make_unique<Expr>();
      e->kind = Expr::Kind::kNumber;
      e->number = t.number;
      e->key = NumberText(t.number);
      return e;
    }
    if (IsPunct("(")) {
      Next();
      auto e = Or(depth + 1);
      if (!e.ok()) return e;
      GF_TRY(Expect(")"));
      return e;
    }
    if (t.type != Token::Type::kIdent) {
      return Fail(t.pos, t.type == Token::Type::kEnd ? "the expression ends too early"
                                                     : "unexpected '" + t.text + "'");
    }
    if (kAggregations.count(t.text)) return Aggregate(depth);
    if (kRangeFunctions.count(t.text) || kInstantFunctions.count(t.text)) return Call(depth);
    if (tokens_[at_ + 1].type == Token::Type::kPunct && tokens_[at_ + 1].text == "(") {
      return Fail(t.pos, "unknown function '" + t.text + "'");
    }
    return Selector();
  }

  Result<std::vector<std::string>> ByLabels() {
    Next();  // "by"
    GF_TRY(Expect("("));
    std::vector<std::string> by;
    while (!IsPunct(")")) {
      const Token& t = Peek();
      if (t.type != Token::Type::kIdent) return Fail(t.pos, "expected a label name");
      std::string name = t.text == "node" ? "Hostname" : t.text;
      const auto& gpu_labels = RowLabels(RowKind::kGpu);
      if (std::find(gpu_labels.begin(), gpu_labels.end(), name) == gpu_labels.end()) {
        return Fail(t.pos,
                    "'" + t.text +
                        "' is not a label to group by: Hostname (or node), UUID, cluster, gpu, "
                        "modelName, pool, team");
      }
      by.push_back(name);
      Next();
      if (IsPunct(",")) Next();
    }
    Next();
    std::sort(by.begin(), by.end());
    by.erase(std::unique(by.begin(), by.end()), by.end());
    return by;
  }

  Result<Ptr> Aggregate(size_t depth) {
    auto e = std::make_unique<Expr>();
    e->kind = Expr::Kind::kAggregate;
    e->name = Next().text;
    e->vector = true;
    bool grouped = false;
    if (IsWord("by")) {
      GF_TRY_ASSIGN(e->by, ByLabels());
      grouped = true;
    } else if (IsWord("without")) {
      return Fail(Peek().pos, "'without' is not supported: use 'by'");
    }
    GF_TRY(Expect("("));
    size_t pos = Peek().pos;
    auto arg = Or(depth + 1);
    if (!arg.ok()) return arg;
    GF_TRY(Expect(")"));
    if (!grouped && IsWord("by")) GF_TRY_ASSIGN(e->by, ByLabels());
    if (!arg.value()->vector) return Fail(pos, e->name + "() needs a series, not a number");
    std::string by;
    for (const auto& l : e->by) by += (by.empty() ? "" : ",") + l;
    e->key = e->name + " by (" + by + ") (" + arg.value()->key + ")";
    e->args.push_back(std::move(arg.value()));
    return e;
  }

  Result<Ptr> Call(size_t depth) {
    auto e = std::make_unique<Expr>();
    e->kind = Expr::Kind::kCall;
    e->name = Next().text;
    e->vector = true;
    GF_TRY(Expect("("));
    size_t pos = Peek().pos;
    auto arg = Or(depth + 1);
    if (!arg.ok()) return arg;
    GF_TRY(Expect(")"));
    const Expr& a = *arg.value();
    bool range_arg = a.kind == Expr::Kind::kSelector && a.range_ms > 0;
    if (kRangeFunctions.count(e->name) && !range_arg) {
      return Fail(pos, e->name + "() needs a range, e.g. " + e->name + "(gpu_temp[5m])");
    }
    if (kInstantFunctions.count(e->name) && (range_arg || !a.vector)) {
      return Fail(pos, e->name + "() needs a series without a range");
    }
    if (a.kind == Expr::Kind::kSelector && a.name == "xid_events" && e->name != "count_over_time") {
      return Fail(pos, "xid_events are events: count them with count_over_time()");
    }
    e->key = e->name + "(" + a.key + ")";
    e->args.push_back(std::move(arg.value()));
    return e;
  }

  Result<Ptr> Selector() {
    const Token& t = Next();
    auto metric = FindMetric(t.text);
    if (!metric) {
      return Fail(t.pos,
                  "unknown metric '" + t.text + "' (see `gpufleet rules metrics` for the names)");
    }
    auto e = std::make_unique<Expr>();
    e->kind = Expr::Kind::kSelector;
    e->name = t.text;
    e->vector = true;
    if (IsPunct("{")) {
      Next();
      while (!IsPunct("}")) {
        const Token& name = Peek();
        if (name.type != Token::Type::kIdent) return Fail(name.pos, "expected a label name");
        Next();
        Matcher m;
        m.name = name.text == "node" ? "Hostname" : name.text;
        const Token& op = Next();
        if (op.type != Token::Type::kPunct ||
            (op.text != "=" && op.text != "!=" && op.text != "=~" && op.text != "!~")) {
          return Fail(op.pos, "expected =, !=, =~ or !~ after '" + name.text + "'");
        }
        m.is_equal = op.text == "=" || op.text == "=~";
        m.is_regex = op.text == "=~" || op.text == "!~";
        const Token& value = Next();
        if (value.type != Token::Type::kString) {
          return Fail(value.pos, "the value of '" + name.text + "' must be a quoted string");
        }
        m.value = value.text;
        GF_TRY(CheckLabel(*metric, m, name.pos));
        e->matchers.push_back(std::move(m));
        if (IsPunct(",")) Next();
      }
      Next();
    }
    if (IsPunct("[")) {
      size_t pos = Next().pos;
      const Token& d = Next();
      int64_t ms = d.type == Token::Type::kDuration ? ParseDurationMs(d.text) : -1;
      if (ms <= 0) return Fail(d.pos, "expected a duration such as 30s, 5m or 1h");
      if (ms > kMaxRangeMs) return Fail(d.pos, "a range is at most 24h (the raw tier's retention)");
      GF_TRY(Expect("]"));
      if (metric->rows != RowKind::kGpu ||
          (metric->special != Special::kNone && metric->special != Special::kXidEvents)) {
        return Fail(pos, "'" + e->name + "' has no history: it has no range");
      }
      e->range_ms = ms;
    } else if (metric->special == Special::kXidEvents) {
      return Fail(t.pos, "xid_events needs a range, e.g. count_over_time(xid_events[10m])");
    }
    std::sort(e->matchers.begin(), e->matchers.end(), [](const Matcher& a, const Matcher& b) {
      return std::tie(a.name, a.value, a.is_equal, a.is_regex) <
             std::tie(b.name, b.value, b.is_equal, b.is_regex);
    });
    e->key = e->name + "{";
    for (const auto& m : e->matchers) {
      e->key += m.name + (m.is_equal ? (m.is_regex ? "=~" : "=") : (m.is_regex ? "!~" : "!=")) +
                Quote(m.value) + ",";
    }
    e->key += "}";
    if (e->range_ms) e->key += "[" + std::to_string(e->range_ms) + "ms]";
    return e;
  }

  Status CheckLabel(const MetricDef& metric, const Matcher& m, size_t pos) {
    const auto& labels = RowLabels(metric.rows);
    bool known = std::find(labels.begin(), labels.end(), m.name) != labels.end();
    if (metric.special == Special::kXidEvents &&
        (m.name == "xid" || m.name == "severity" || m.name == "action")) {
      known = true;
    }
    if (!known) {
      std::string list;
      for (auto l : labels) list += (list.empty() ? "" : ", ") + std::string(l);
      if (metric.special == Special::kXidEvents) list += ", xid, severity, action";
      return Fail(pos, "'" + std::string(metric.name) + "' has no label '" + m.name + "'" +
                           (list.empty() ? "" : " (it has " + list + ")"));
    }
    if (m.is_regex) {
      if (auto p = Pattern::Compile(m.value); !p.ok()) {
        return Fail(pos, "'" + Printable(m.value, 80) + "': " + p.error().message);
      }
    }
    return {};
  }

  std::string_view text_;
  std::vector<Token> tokens_;
  size_t at_ = 0;
  bool in_brackets_ = false;
};

}  // namespace

bool IsComparison(Op op) {
  return op == Op::kEq || op == Op::kNe || op == Op::kGt || op == Op::kLt || op == Op::kGe ||
         op == Op::kLe;
}

Result<std::unique_ptr<Expr>> ParseExpr(std::string_view text) {
  if (text.size() > 4096) {
    return MakeError(ErrorCode::kInvalidArgument, "expr: longer than 4096 characters");
  }
  return Parser(text).Run();
}

}  // namespace gpufleet::alerting
