#pragma once
// A remote-write receiver's `match:` selectors (internal to the remote component): PromQL
// series selectors, parsed by the query engine (alerting/expr.h) and matched against a series'
// metric name and labels.

#include <optional>
#include <string>
#include <vector>

#include "common/pattern.h"
#include "common/result.h"
#include "model/types.h"

namespace gpufleet::remote {

struct Filter {
  std::string name;  // empty: any metric
  struct Term {
    std::string label;
    bool equal = true;
    std::optional<Pattern> regex;
    std::string value;
  };
  std::vector<Term> terms;
  bool Matches(const std::string& metric, const Labels& labels) const;
};

// `DCGM_FI_DEV_GPU_UTIL{pool="a"}` or `{cluster="train"}` (any metric); an error names what is
// wrong (not a selector, an unknown metric, a bad pattern).
Result<Filter> CompileFilter(const std::string& text);

}  // namespace gpufleet::remote
