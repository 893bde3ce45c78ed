// api_latency SERVER TOKEN PATH COUNT: sends COUNT sequential GETs of PATH over one keep-alive
// connection and prints the latency percentiles (ms) and the reply size.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/client.h"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: api_latency SERVER TOKEN PATH COUNT\n");
    return 2;
  }
  gpufleet::cli::HttpClient client(argv[1], argv[2]);
  int count = std::stoi(argv[4]);
  std::vector<double> ms;
  size_t bytes = 0;
  for (int i = 0; i < count + 10; ++i) {
    auto start = std::chrono::steady_clock::now();
    auto reply = client.Send("GET", argv[3]);
    double took =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (!reply.ok() || reply->status != 200) {
      std::fprintf(
          stderr, "request failed: %s\n",
          reply.ok() ? std::to_string(reply->status).c_str() : reply.error().message.c_str());
      return 1;
    }
    bytes = reply->body.size();
    if (i >= 10) ms.push_back(took);  // the first ten warm the connection and caches
  }
  std::sort(ms.begin(), ms.end());
  auto pct = [&](double p) {
    return ms[std::min(ms.size() - 1, static_cast<size_t>(p * ms.size()))];
  };
  std::printf("requests=%d bytes=%zu p50_ms=%.2f p90_ms=%.2f p99_ms=%.2f max_ms=%.2f\n", count,
              bytes, pct(0.50), pct(0.90), pct(0.99), ms.back());
  return 0;
}
