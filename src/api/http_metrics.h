#pragma once
// Request latency histograms per route, rendered as gpufleet_http_request_duration_seconds
// (Prometheus histogram, default buckets). Thread-safe.

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace gpufleet::api {

class HttpMetrics {
 public:
  static constexpr std::array<double, 11> kBuckets = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                      0.5,   1,    2.5,   5,    10};
  void Observe(const std::string& method, const std::string& route, double seconds);
  void Render(std::string& out) const;
  // The q-quantile of every request since the last call (interpolated within the histogram's
  // buckets, as histogram_quantile does), then starts over; NaN when there was no request.
  double TakeRecentQuantile(double q);
  // Failed sign-ins, and requests refused because their address failed too often.
  void CountSignInFailure() { sign_in_failures_.fetch_add(1, std::memory_order_relaxed); }
  void CountSignInRefused() { sign_in_refused_.fetch_add(1, std::memory_order_relaxed); }
  void CountConnectionRefused() { connections_refused_.fetch_add(1, std::memory_order_relaxed); }
  void CountHeaderTimeout() { header_timeouts_.fetch_add(1, std::memory_order_relaxed); }
  // Open connections (HTTP, agents' and the dashboard's WebSockets), kept by the server.
  std::atomic<int>& open_connections() { return open_connections_; }

 private:
  struct Histogram {
    std::array<uint64_t, kBuckets.size()> buckets{};
    uint64_t count = 0;
    double sum = 0;
  };
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, Histogram> by_route_;  // guarded by mu_
  Histogram recent_;                                                   // guarded by mu_
  std::atomic<uint64_t> sign_in_failures_{0};
  std::atomic<uint64_t> sign_in_refused_{0};
  std::atomic<uint64_t> connections_refused_{0};
  std::atomic<uint64_t> header_timeouts_{0};
  std::atomic<int> open_connections_{0};
};

}  // namespace gpufleet::api
