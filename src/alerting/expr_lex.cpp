#include "alerting/expr_lex.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace gpufleet::alerting::detail {

Error ExprError(size_t pos, const std::string& why) {
  return MakeError(ErrorCode::kInvalidArgument, "expr: at " + std::to_string(pos + 1) + ": " + why);
}

namespace {

bool IsAlpha(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsDigit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }
bool IsAlnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

}  // namespace

Result<std::vector<Token>> Lex(std::string_view text) {
  std::vector<Token> tokens;
  bool in_brackets = false;
  size_t i = 0;
  while (i < text.size()) {
    char c = text[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
      continue;
    }
    Token t;
    t.pos = i;
    if (IsAlpha(c)) {
      size_t j = i;
      while (j < text.size() && (IsAlnum(text[j]) || text[j] == '_' || text[j] == ':')) ++j;
      t.type = Token::Type::kIdent;
      t.text = std::string(text.substr(i, j - i));
      i = j;
    } else if (IsDigit(c) || (c == '.' && i + 1 < text.size() && IsDigit(text[i + 1]))) {
      size_t j = i;
      while (j < text.size() && (IsAlnum(text[j]) || text[j] == '.' ||
                                 ((text[j] == '+' || text[j] == '-') && j > i &&
                                  (text[j - 1] == 'e' || text[j - 1] == 'E')))) {
        ++j;
      }
      std::string word(text.substr(i, j - i));
      bool after_offset = !tokens.empty() && tokens.back().type == Token::Type::kIdent &&
                          tokens.back().text == "offset";
      if (in_brackets || after_offset) {
        t.type = Token::Type::kDuration;
        t.text = word;
      } else {
        char* end = nullptr;
        t.number = std::strtod(word.c_str(), &end);
        if (end != word.c_str() + word.size() || !std::isfinite(t.number)) {
          return ExprError(i, "'" + word + "' is not a number");
        }
        t.type = Token::Type::kNumber;
        t.text = word;
      }
      i = j;
    } else if (c == '"' || c == '\'') {
      std::string value;
      size_t j = i + 1;
      for (; j < text.size() && text[j] != c; ++j) {
        if (text[j] == '\\' && j + 1 < text.size()) ++j;
        value += text[j];
      }
      if (j >= text.size()) return ExprError(i, "a string is not closed");
      t.type = Token::Type::kString;
      t.text = value;
      i = j + 1;
    } else {
      static const char* kTwo[] = {"==", "!=", ">=", "<=", "=~", "!~"};
      t.type = Token::Type::kPunct;
      t.text = std::string(1, c);
      for (const char* two : kTwo) {
        if (text.substr(i, 2) == two) t.text = two;
      }
      if (c == ':' && in_brackets) return ExprError(i, "subqueries ([5m:1m]) are not supported");
      if (c == '@') return ExprError(i, "the @ modifier is not supported");
      if (c == '%' || c == '^') {
        return ExprError(i, std::string("the '") + c + "' operator is not supported");
      }
      if (std::string_view("(){}[],=<>+-*/!").find(c) == std::string_view::npos) {
        return ExprError(i, std::string("unexpected character '") + c + "'");
      }
      if (t.text == "!") return ExprError(i, "unexpected '!'");
      if (c == '[') in_brackets = true;
      if (c == ']') in_brackets = false;
      i += t.text.size();
    }
    tokens.push_back(std::move(t));
  }
  Token end;
  end.pos = text.size();
  tokens.push_back(end);
  return tokens;
}

const std::set<std::string, std::less<>> kRangeFunctions = {"avg_over_time",
                                                            "min_over_time",
                                                            "max_over_time",
                                                            "sum_over_time",
                                                            "count_over_time",
                                                            "last_over_time",
                                                            "rate",
                                                            "irate",
                                                            "increase",
                                                            "delta",
                                                            "idelta",
                                                            "stddev_over_time",
                                                            "stdvar_over_time",
                                                            "present_over_time"};
constexpr InstantFn kInstantFunctions[] = {{"abs"},
                                           {"ceil"},
                                           {"floor"},
                                           {"sqrt"},
                                           {"exp"},
                                           {"ln"},
                                           {"log2"},
                                           {"log10"},
                                           {"round", 1, 1},
                                           {"clamp_min", 1, 0},
                                           {"clamp_max", 1, 0},
                                           {"clamp", 2, 0}};
const std::set<std::string, std::less<>> kAggregations = {"sum",   "avg",     "min",     "max",
                                                          "count", "group",   "stddev",  "stdvar",
                                                          "topk",  "bottomk", "quantile"};
// PromQL's other functions: named as unsupported rather than unknown.
const std::set<std::string, std::less<>> kUnsupported = {"absent",
                                                         "absent_over_time",
                                                         "changes",
                                                         "count_values",
                                                         "day_of_month",
                                                         "day_of_week",
                                                         "days_in_month",
                                                         "deriv",
                                                         "histogram_quantile",
                                                         "holt_winters",
                                                         "hour",
                                                         "label_join",
                                                         "minute",
                                                         "month",
                                                         "predict_linear",
                                                         "quantile_over_time",
                                                         "resets",
                                                         "scalar",
                                                         "sgn",
                                                         "sort",
                                                         "sort_desc",
                                                         "time",
                                                         "timestamp",
                                                         "year",
                                                         "limitk"};

const InstantFn* FindInstant(std::string_view name) {
  for (const auto& f : kInstantFunctions) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

double Fold(Op op, double a, double b) {
  switch (op) {
    case Op::kAdd:
      return a + b;
    case Op::kSub:
      return a - b;
    case Op::kMul:
      return a * b;
    case Op::kDiv:
      return a / b;
    case Op::kEq:
      return a == b ? 1.0 : 0.0;
    case Op::kNe:
      return a != b ? 1.0 : 0.0;
    case Op::kGt:
      return a > b ? 1.0 : 0.0;
    case Op::kLt:
      return a < b ? 1.0 : 0.0;
    case Op::kGe:
      return a >= b ? 1.0 : 0.0;
    case Op::kLe:
      return a <= b ? 1.0 : 0.0;
    default:
      return 0.0;
  }
}

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

}  // namespace gpufleet::alerting::detail
