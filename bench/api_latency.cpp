// api_latency SERVER TOKEN PATH COUNT [METHOD BODY RATE]: sends COUNT requests over one
// keep-alive connection and prints the latency percentiles (ms) and the reply size. GET by
// default, back to back. With METHOD (POST...), BODY (JSON) and RATE (requests a second, 0:
// back to back) it measures a mutating call at a steady rate; PATH may hold several paths
// separated by '|', sent in turn (e.g. a node's cordon and uncordon).

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "cli/client.h"

int main(int argc, char** argv) {
  if (argc != 5 && argc != 8) {
    std::fprintf(stderr, "usage: api_latency SERVER TOKEN PATH COUNT [METHOD BODY RATE]\n");
    return 2;
  }
  gpufleet::cli::HttpClient client(argv[1], argv[2]);
  std::vector<std::string> paths;
  for (std::string rest = argv[3];;) {
    auto bar = rest.find('|');
    paths.push_back(rest.substr(0, bar));
    if (bar == std::string::npos) break;
    rest = rest.substr(bar + 1);
  }
  int count = std::stoi(argv[4]);
  std::string method = argc == 8 ? argv[5] : "GET";
  std::string body = argc == 8 ? argv[6] : "";
  double rate = argc == 8 ? std::stod(argv[7]) : 0;
  const bool mutating = method != "GET";
  const int warm = mutating ? 0 : 10;  // the first ten GETs warm the connection and caches
  std::vector<double> ms;
  size_t bytes = 0;
  auto next = std::chrono::steady_clock::now();
  for (int i = 0; i < count + warm; ++i) {
    if (rate > 0) {
      std::this_thread::sleep_until(next);
      next += std::chrono::microseconds(static_cast<int64_t>(1e6 / rate));
    }
    auto start = std::chrono::steady_clock::now();
    auto reply = client.Send(method, paths[i % paths.size()], body);
    double took =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (!reply.ok() || reply->status >= 300) {
      std::fprintf(
          stderr, "request failed: %s %s\n",
          reply.ok() ? std::to_string(reply->status).c_str() : reply.error().message.c_str(),
          reply.ok() ? reply->body.c_str() : "");
      return 1;
    }
    bytes = reply->body.size();
    if (i >= warm) ms.push_back(took);
  }
  std::sort(ms.begin(), ms.end());
  auto pct = [&](double p) {
    return ms[std::min(ms.size() - 1, static_cast<size_t>(p * ms.size()))];
  };
  std::printf("requests=%d bytes=%zu p50_ms=%.2f p90_ms=%.2f p99_ms=%.2f max_ms=%.2f\n", count,
              bytes, pct(0.50), pct(0.90), pct(0.99), ms.back());
  return 0;
}
