#include "api/http_metrics.h"

#include <charconv>
#include <cmath>

namespace gpufleet::api {

void HttpMetrics::Observe(const std::string& method, const std::string& route, double seconds) {
  std::lock_guard lock(mu_);
  Histogram& h = by_route_[{method, route}];
  for (size_t i = 0; i < kBuckets.size(); ++i) {
    if (seconds <= kBuckets[i]) {
      ++h.buckets[i];
      ++recent_.buckets[i];
    }
  }
  for (Histogram* x : {&h, &recent_}) {
    ++x->count;
    x->sum += seconds;
  }
}

double HttpMetrics::TakeRecentQuantile(double q) {
  Histogram h;
  {
    std::lock_guard lock(mu_);
    h = recent_;
    recent_ = {};
  }
  if (h.count == 0) return NAN;
  double rank = q * static_cast<double>(h.count);
  double lower = 0, below = 0;
  for (size_t i = 0; i < kBuckets.size(); ++i) {
    auto in = static_cast<double>(h.buckets[i]);  // cumulative
    if (in >= rank) {
      double width = in - below;
      return width > 0 ? lower + (kBuckets[i] - lower) * (rank - below) / width : kBuckets[i];
    }
    lower = kBuckets[i];
    below = in;
  }
  return kBuckets.back();  // in the +Inf bucket: the highest bound, as histogram_quantile
}

void HttpMetrics::Render(std::string& out) const {
  auto num = [&](double v) {
    char buf[32];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, ec == std::errc() ? end : buf);
  };
  auto counter = [&](const char* name, const char* help, const std::atomic<uint64_t>& value) {
    out +=
        std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " counter\n" + name + " ";
    num(static_cast<double>(value.load(std::memory_order_relaxed)));
    out += '\n';
  };
  counter("gpufleet_http_sign_in_failures_total",
          "Requests whose token was missing, malformed, unknown, revoked or expired.",
          sign_in_failures_);
  counter("gpufleet_http_sign_in_refused_total",
          "Requests refused (429) because their address failed to sign in too often.",
          sign_in_refused_);
  counter("gpufleet_http_connections_refused_total",
          "Connections closed at once because --max-connections were open.", connections_refused_);
  counter("gpufleet_http_header_timeouts_total",
          "Connections closed because no request header arrived within --header-timeout.",
          header_timeouts_);
  out +=
      "# HELP gpufleet_http_connections_open Open connections: HTTP, agents, dashboards.\n"
      "# TYPE gpufleet_http_connections_open gauge\ngpufleet_http_connections_open ";
  num(open_connections_.load(std::memory_order_relaxed));
  out += '\n';
  const char* name = "gpufleet_http_request_duration_seconds";
  out += "# HELP gpufleet_http_request_duration_seconds Time to answer an API request, by route.\n";
  out += "# TYPE gpufleet_http_request_duration_seconds histogram\n";
  std::lock_guard lock(mu_);
  for (const auto& [key, h] : by_route_) {
    std::string labels = "method=\"" + key.first + "\",route=\"" + key.second + "\"";
    for (size_t i = 0; i < kBuckets.size(); ++i) {
      out += std::string(name) + "_bucket{" + labels + ",le=\"";
      num(kBuckets[i]);
      out += "\"} " + std::to_string(h.buckets[i]) + "\n";
    }
    out +=
        std::string(name) + "_bucket{" + labels + ",le=\"+Inf\"} " + std::to_string(h.count) + "\n";
    out += std::string(name) + "_sum{" + labels + "} ";
    num(h.sum);
    out += "\n" + std::string(name) + "_count{" + labels + "} " + std::to_string(h.count) + "\n";
  }
}

}  // namespace gpufleet::api
