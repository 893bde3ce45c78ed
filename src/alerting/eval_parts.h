#pragma once
// What eval.cpp and eval_functions.cpp share (internal to alerting): the row spaces, the
// dense vector, and matching a label value.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "alerting/eval.h"
#include "common/pattern.h"

namespace gpufleet::alerting {

inline constexpr int kGpuSpace = -1;
inline constexpr int kNodeSpace = -2;
inline constexpr int kControllerSpace = -3;
inline constexpr int kPoolSpace = -4;

struct Evaluator::Vec {
  int space = kGpuSpace;
  std::vector<double> v;  // NaN: no value for the row
  std::string name;       // the metric's name while PromQL keeps it (__name__); empty when dropped
};

struct Evaluator::Space {
  std::vector<std::string> by;
  std::vector<Labels> groups;
};

inline bool Matches(const Matcher& m, const Pattern* re, std::string_view value) {
  bool hit = re ? re->FullMatch(value) : value == m.value;
  return hit == m.is_equal;
}

// A matcher's pattern (checked when the expression was parsed); none for a literal matcher.
inline std::optional<Pattern> PatternOf(const Matcher& m) {
  if (!m.is_regex) return std::nullopt;
  auto p = Pattern::Compile(m.value);
  // Parsing refused patterns RE2 does not take; one that still fails matches nothing.
  return p.ok() ? std::move(p).value() : Pattern::Compile("[^\\s\\S]").value();
}

}  // namespace gpufleet::alerting
