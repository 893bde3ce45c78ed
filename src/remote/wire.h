#pragma once
// Remote write 1.0's wire format: a prometheus.WriteRequest (protobuf), snappy block-encoded.
// A series' labels are encoded once (EncodeLabels, in pieces a GPU's series share) and copied
// into each request that carries it; the samples are appended after them.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/types.h"

namespace gpufleet::remote {

// Prometheus's staleness marker: the NaN that says "this series has ended".
inline constexpr uint64_t kStaleNaNBits = 0x7ff0000000000002ull;
double StaleNaN();
bool IsStaleNaN(double v);

// The TimeSeries' `labels` fields (label names in byte order, as the specification requires;
// `labels` is a sorted map), encoded.
std::string EncodeLabels(const Labels& labels);

struct WireSample {
  int64_t t = 0;
  double v = 0;
};
struct WireSeries {
  // EncodeLabels' bytes, in pieces written one after another (a GPU's labels before __name__,
  // the __name__ label, the GPU's labels after it): together, the labels in order.
  std::array<std::string_view, 3> labels;
  const WireSample* samples = nullptr;  // oldest first
  size_t count = 0;
};

// The WriteRequest, serialized (not compressed) into `out`, whose buffer is reused.
void EncodeWriteRequest(const std::vector<WireSeries>& series, std::string& out);
// Snappy's block format, as Content-Encoding: snappy means in remote write, into `out`.
void Compress(std::string_view data, std::string& out);

}  // namespace gpufleet::remote
