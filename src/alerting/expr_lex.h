#pragma once
// The expression lexer and the canonical-text helpers the parser shares (internal to
// alerting).

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "alerting/expr.h"
#include "common/result.h"

namespace gpufleet::alerting::detail {

struct Token {
  enum class Type { kEnd, kIdent, kNumber, kString, kDuration, kPunct };
  Type type = Type::kEnd;
  std::string text;
  double number = 0;
  size_t pos = 0;
};

// "expr: at 14: why" (pos is 0-based).
Error ExprError(size_t pos, const std::string& why);
// The tokens of `text`, the last one kEnd. A number with a unit inside brackets, or after
// `offset`, is a duration ("5m").
Result<std::vector<Token>> Lex(std::string_view text);

// The functions and aggregations the parser knows, and PromQL's others (named as unsupported).
extern const std::set<std::string, std::less<>> kRangeFunctions, kAggregations, kUnsupported;
// An instant function: its name, the numbers it takes after the series, how many are optional.
struct InstantFn {
  std::string_view name;
  size_t params = 0, optional = 0;
};
const InstantFn* FindInstant(std::string_view name);
// Two numbers folded: arithmetic, or a comparison's 1 or 0 (`1 > bool 0`).
double Fold(Op op, double a, double b);

std::string_view OpText(Op op);
std::string NumberText(double v);
std::string Quote(const std::string& s);

}  // namespace gpufleet::alerting::detail
