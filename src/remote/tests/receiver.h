#pragma once
// A remote-write receiver for the writer's unit tests: it decodes each request with protobuf's
// generated code (remote.proto) and snappy, checks the protocol's headers, keeps what it was
// sent, and answers the status codes a test scripts (204 when none). The real receivers,
// VictoriaMetrics and Prometheus, are in tests/e2e/remote_write_test.cpp.

#include <atomic>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace gpufleet::remote::testing {

struct Received {
  std::map<std::string, std::string> labels;
  int64_t t = 0;
  double v = 0;
};

class Receiver {
 public:
  Receiver();
  ~Receiver();
  std::string url() const;
  // The next requests' answers, in order.
  void Script(std::vector<int> codes);
  // Samples taken (answered 2xx), in arrival order; and every request's problems with the
  // protocol ("" when none).
  std::vector<Received> Taken();
  std::vector<std::string> Problems();
  int requests() const { return requests_; }
  std::string last_authorization();

 private:
  void Serve();
  void Handle(int fd);
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
  std::thread thread_;
  std::mutex mu_;
  std::deque<int> script_;
  std::vector<Received> taken_;
  std::vector<std::string> problems_;
  std::string authorization_;
};

}  // namespace gpufleet::remote::testing
