#include "alerting/expr.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <tuple>

#include "alerting/expr_lex.h"
#include "alerting/metrics.h"
#include "common/clock.h"
#include "common/pattern.h"
#include "common/strings.h"

namespace gpufleet::alerting {
namespace {

using detail::FindInstant;
using detail::InstantFn;
using detail::kAggregations;
using detail::kRangeFunctions;
using detail::kUnsupported;
using detail::NumberText;
using detail::OpText;
using detail::Quote;
using detail::Token;

constexpr int64_t kMaxRangeMs = 24 * 3'600'000;  // the raw tier's retention
constexpr int64_t kMaxOffsetMs = 400LL * 24 * 3'600'000;
constexpr size_t kMaxDepth = 64;

class Parser {
 public:
  Parser(std::string_view text, bool query) : text_(text), query_(query) {}

  Result<std::unique_ptr<Expr>> Run() {
    GF_TRY_ASSIGN(tokens_, detail::Lex(text_));
    auto e = Or(0);
    if (!e.ok()) return e;
    if (Peek().type != Token::Type::kEnd)
      return Fail(Peek().pos, "unexpected '" + Peek().text + "'");
    if (!query_ && !e.value()->vector) {
      return Fail(0, "the expression gives a number, not a series: an alert needs a series");
    }
    return e;
  }

 private:
  Error Fail(size_t pos, const std::string& why) const { return detail::ExprError(pos, why); }

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

  // After a binary operator: the vector-matching modifiers this engine does not have.
  Status NoMatching() {
    for (const char* w : {"on", "ignoring", "group_left", "group_right"}) {
      if (IsWord(w)) return Fail(Peek().pos, "'" + std::string(w) + "' is not supported");
    }
    return {};
  }

  Result<Ptr> Binary(Ptr left, Op op, Ptr right, size_t pos, bool return_bool = false) {
    bool set_op = op == Op::kAnd || op == Op::kOr || op == Op::kUnless;
    if (set_op && (!left->vector || !right->vector)) {
      return Fail(pos, "'" + std::string(OpText(op)) + "' needs a series on both sides");
    }
    auto e = std::make_unique<Expr>();
    e->kind = Expr::Kind::kBinary;
    e->op = op;
    e->return_bool = return_bool;
    e->vector = left->vector || right->vector;
    e->key = "(" + left->key + " " + std::string(OpText(op)) + (return_bool ? " bool " : " ") +
             right->key + ")";
    if (!e->vector) {  // fold numbers: "1024 * 1024", "1 > bool 0"
      if (IsComparison(op) && !return_bool) {
        return Fail(pos, query_ ? "a comparison of two numbers needs 'bool'"
                                : "a comparison of two numbers: compare a series");
      }
      double v = detail::Fold(op, left->number, right->number);
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
      GF_TRY(NoMatching());
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
      GF_TRY(NoMatching());
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
      bool return_bool = IsWord("bool");
      if (return_bool) Next();
      GF_TRY(NoMatching());
      auto right = Sum(depth);
      if (!right.ok()) return right;
      left = Binary(std::move(left.value()), o, std::move(right.value()), pos, return_bool);
      if (!left.ok()) return left;
    }
  }

  Result<Ptr> Sum(size_t depth) {
    auto left = Product(depth);
    if (!left.ok()) return left;
    while (IsPunct("+") || IsPunct("-")) {
      Op op = Peek().text == "+" ? Op::kAdd : Op::kSub;
      size_t pos = Next().pos;
      GF_TRY(NoMatching());
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
      GF_TRY(NoMatching());
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
    if (query_ && IsPunct("{")) return Selector();
    if (t.type != Token::Type::kIdent) {
      return Fail(t.pos, t.type == Token::Type::kEnd ? "the expression ends too early"
                                                     : "unexpected '" + t.text + "'");
    }
    if (kAggregations.count(t.text)) return Aggregate(depth);
    if (kRangeFunctions.count(t.text) || FindInstant(t.text) || t.text == "label_replace" ||
        t.text == "vector") {
      return Call(depth);
    }
    if (tokens_[at_ + 1].type == Token::Type::kPunct && tokens_[at_ + 1].text == "(") {
      if (kUnsupported.count(t.text)) return Fail(t.pos, t.text + "() is not supported");
      return Fail(t.pos, "unknown function '" + t.text + "'");
    }
    return Selector();
  }

  Result<std::vector<std::string>> ByLabels() {
    Next();  // "by" or "without"
    GF_TRY(Expect("("));
    std::vector<std::string> by;
    while (!IsPunct(")")) {
      const Token& t = Peek();
      if (t.type != Token::Type::kIdent) return Fail(t.pos, "expected a label name");
      std::string name = t.text == "node" ? "Hostname" : t.text;
      const auto& gpu_labels = RowLabels(RowKind::kGpu);
      if (!query_ && std::find(gpu_labels.begin(), gpu_labels.end(), name) == gpu_labels.end()) {
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

  Status Grouping(Expr& e, bool& grouped) {
    if (grouped || !(IsWord("by") || IsWord("without"))) return {};
    e.without = IsWord("without");
    GF_TRY_ASSIGN(e.by, ByLabels());
    grouped = true;
    return {};
  }

  // A number argument: a literal or folded numbers.
  Result<double> NumberArg(size_t depth, const std::string& fn) {
    size_t pos = Peek().pos;
    auto n = Sum(depth + 1);
    if (!n.ok()) return n.error();
    if (n.value()->vector) return Fail(pos, fn + "() takes a number here, not a series");
    return n.value()->number;
  }

  Result<Ptr> Aggregate(size_t depth) {
    auto e = std::make_unique<Expr>();
    e->kind = Expr::Kind::kAggregate;
    e->name = Next().text;
    e->vector = true;
    bool grouped = false;
    GF_TRY(Grouping(*e, grouped));
    GF_TRY(Expect("("));
    if (e->name == "topk" || e->name == "bottomk" || e->name == "quantile") {
      size_t ppos = Peek().pos;
      double p = 0;
      GF_TRY_ASSIGN(p, NumberArg(depth, e->name));
      if (e->name != "quantile" && (p < 0 || p > 1e6 || p != std::floor(p))) {
        return Fail(ppos, e->name + "() takes a whole number of series");
      }
      e->params.push_back(p);
      GF_TRY(Expect(","));
    }
    size_t pos = Peek().pos;
    auto arg = Or(depth + 1);
    if (!arg.ok()) return arg;
    GF_TRY(Expect(")"));
    GF_TRY(Grouping(*e, grouped));
    if (!arg.value()->vector) return Fail(pos, e->name + "() needs a series, not a number");
    std::string by;
    for (const auto& l : e->by) by += (by.empty() ? "" : ",") + l;
    std::string params;
    for (double p : e->params) params += NumberText(p) + ", ";
    e->key = e->name + (e->without ? " without (" : " by (") + by + ") (" + params +
             arg.value()->key + ")";
    e->args.push_back(std::move(arg.value()));
    return e;
  }

  Result<Ptr> Call(size_t depth) {
    auto e = std::make_unique<Expr>();
    e->kind = Expr::Kind::kCall;
    size_t fpos = Peek().pos;
    e->name = Next().text;
    e->vector = true;
    GF_TRY(Expect("("));
    if (e->name == "vector") {  // vector(number): one series without labels
      double v = 0;
      GF_TRY_ASSIGN(v, NumberArg(depth, e->name));
      GF_TRY(Expect(")"));
      e->params.push_back(v);
      e->key = "vector(" + NumberText(v) + ")";
      return e;
    }
    size_t pos = Peek().pos;
    auto arg = Or(depth + 1);
    if (!arg.ok()) return arg;
    const Expr& a = *arg.value();
    const InstantFn* instant = FindInstant(e->name);
    if (instant) {
      for (size_t i = 0; i < instant->params; ++i) {
        if (i >= instant->params - instant->optional && IsPunct(")")) break;
        GF_TRY(Expect(","));
        double p = 0;
        GF_TRY_ASSIGN(p, NumberArg(depth, e->name));
        e->params.push_back(p);
      }
    } else if (e->name == "label_replace") {
      for (int i = 0; i < 4; ++i) {
        GF_TRY(Expect(","));
        if (Peek().type != Token::Type::kString) {
          return Fail(Peek().pos, "label_replace() takes quoted strings after the series");
        }
        e->strings.push_back(Next().text);
      }
      if (auto re = Pattern::Compile(e->strings[3]); !re.ok()) {
        return Fail(
            fpos, "label_replace(): '" + Printable(e->strings[3], 80) + "': " + re.error().message);
      }
    }
    GF_TRY(Expect(")"));
    bool range_arg = a.kind == Expr::Kind::kSelector && a.range_ms > 0;
    if (kRangeFunctions.count(e->name) && !range_arg) {
      return Fail(pos, e->name + "() needs a range, e.g. " + e->name + "(gpu_temp[5m])");
    }
    if (!kRangeFunctions.count(e->name) && (range_arg || !a.vector)) {
      return Fail(pos, e->name + "() needs a series without a range");
    }
    if (a.kind == Expr::Kind::kSelector && a.name == "xid_events" && e->name != "count_over_time") {
      return Fail(pos, "xid_events are events: count them with count_over_time()");
    }
    e->key = e->name + "(" + a.key;
    for (double p : e->params) e->key += ", " + NumberText(p);
    for (const auto& str : e->strings) e->key += ", " + Quote(str);
    e->key += ")";
    e->args.push_back(std::move(arg.value()));
    return e;
  }

  Result<Matcher> ParseMatcher(const MetricDef* metric) {
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
    if (metric) GF_TRY(CheckLabel(*metric, m, name.pos));
    return m;
  }

  Result<Ptr> Selector() {
    auto e = std::make_unique<Expr>();
    e->kind = Expr::Kind::kSelector;
    e->vector = true;
    size_t name_pos = Peek().pos;
    std::optional<MetricDef> metric;
    if (!IsPunct("{")) {
      const Token& t = Next();
      metric = FindMetric(t.text);
      if (!metric) {
        return Fail(t.pos,
                    "unknown metric '" + t.text + "' (see `gpufleet rules metrics` for the names)");
      }
      e->name = t.text;
    }
    if (IsPunct("{")) {
      Next();
      while (!IsPunct("}")) {
        Matcher m;
        GF_TRY_ASSIGN(m, ParseMatcher(metric ? &*metric : nullptr));
        if (m.name == "__name__") {  // {__name__="DCGM_FI_DEV_GPU_UTIL"}: the metric's name
          if (metric || !m.is_equal || m.is_regex) {
            return Fail(name_pos, "a selector names one metric: __name__ takes = and a name");
          }
          metric = FindMetric(m.value);
          if (!metric) return Fail(name_pos, "unknown metric '" + Printable(m.value, 80) + "'");
          e->name = m.value;
        } else {
          e->matchers.push_back(std::move(m));
        }
        if (IsPunct(",")) Next();
      }
      Next();
    }
    if (!metric) return Fail(name_pos, "a selector needs a metric name");
    for (const auto& m : e->matchers) GF_TRY(CheckLabel(*metric, m, name_pos));
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
      return Fail(name_pos, "xid_events needs a range, e.g. count_over_time(xid_events[10m])");
    }
    if (IsWord("offset")) {
      Next();
      const Token& d = Next();
      int64_t ms = d.type == Token::Type::kDuration ? ParseDurationMs(d.text) : -1;
      if (ms <= 0 || ms > kMaxOffsetMs) {
        return Fail(d.pos, "offset takes a duration such as 5m or 1d, up to 400d");
      }
      e->offset_ms = ms;
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
    if (e->offset_ms) e->key += " offset " + std::to_string(e->offset_ms) + "ms";
    return e;
  }

  Status CheckLabel(const MetricDef& metric, const Matcher& m, size_t pos) {
    const auto& labels = RowLabels(metric.rows);
    bool known = query_ || std::find(labels.begin(), labels.end(), m.name) != labels.end();
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
  bool query_ = false;
  std::vector<Token> tokens_;
  size_t at_ = 0;
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
  return Parser(text, false).Run();
}

Result<std::unique_ptr<Expr>> ParseQuery(std::string_view text) {
  if (text.size() > 4096) {
    return MakeError(ErrorCode::kInvalidArgument, "expr: longer than 4096 characters");
  }
  return Parser(text, true).Run();
}

}  // namespace gpufleet::alerting
