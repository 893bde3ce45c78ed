#pragma once
// gzip for reply bodies (internal to the api component): the dashboard's heatmap data and
// scripts, /metrics and large JSON replies shrink several times on the wire.

#include <string>
#include <string_view>

namespace gpufleet::api {

// Whether an Accept-Encoding header value admits gzip ("gzip", "gzip, deflate, br"; not
// "gzip;q=0").
bool AcceptsGzip(std::string_view accept_encoding);

// `in` as one gzip member, at a fast compression level. Empty on failure (never expected).
std::string Gzip(std::string_view in);

// Bodies smaller than this are sent as they are: the header costs more than it saves.
inline constexpr size_t kGzipMinBytes = 1024;

}  // namespace gpufleet::api
