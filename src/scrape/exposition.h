#pragma once
// A strict reader of the Prometheus text exposition format, version 0.0.4: what dcgm-exporter
// serves. Every line is either blank, a comment (# HELP / # TYPE are checked), or a sample
// `name{label="value",...} value [timestamp]`, and the page ends with a newline (a page cut short
// is refused, not half-read). Anything else is refused with the line number and
// the reason; the reader never reads past the text, and its cost is linear in the text's size.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"

namespace gpufleet::scrape {

struct ExpoSample {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;  // in the text's order
  double value = 0;
  std::optional<int64_t> timestamp_ms;

  // The value of label `key`, or empty.
  std::string_view Label(std::string_view key) const;
};

struct ExpoLimits {
  size_t max_line_bytes = 64 << 10;
  size_t max_samples = 1'000'000;
  size_t max_labels = 64;
};

// Errors read "line 12: <reason>".
Result<std::vector<ExpoSample>> ParseExposition(std::string_view text,
                                                const ExpoLimits& limits = {});

}  // namespace gpufleet::scrape
