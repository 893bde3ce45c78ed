#pragma once
// Helpers for end-to-end tests: child processes of the real binary, a controller on a data
// directory of its own, and JSON over HTTP.

#include <sys/types.h>

#include <boost/json.hpp>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cli/client.h"

namespace gpufleet::e2e {

// A child process; killed (SIGKILL) on destruction if still running.
class Process {
 public:
  Process(std::vector<std::string> args, std::map<std::string, std::string> env,
          const std::string& log_path);
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  void Signal(int sig);
  // Waits up to timeout_ms; returns the exit status, or -1 on timeout (the process keeps running).
  int Wait(int timeout_ms);
  bool running();
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int status_ = -1;
};

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};
// Runs the gpufleet binary to completion (at most 60 s).
RunResult RunGpufleet(std::vector<std::string> args, std::map<std::string, std::string> env = {});

bool WaitFor(const std::function<bool()>& condition, int timeout_ms, int poll_ms = 50);

std::string TempDir(const std::string& name);
std::string ReadFile(const std::string& path);

// Plays a node's dcgm-exporter (serves one page at any path) or a webhook receiver (records
// each request's body): one request per connection, on a loopback port of its own (or `port`),
// until closed.
class PageServer {
 public:
  explicit PageServer(std::string page, unsigned short port = 0);
  std::vector<std::string> bodies();  // of the requests received, in order
  std::vector<std::string> heads();   // their request lines and headers
  unsigned short port() const;
  ~PageServer();
  PageServer(const PageServer&) = delete;
  PageServer& operator=(const PageServer&) = delete;
  void Set(std::string page, int status = 200);
  void Close();
  std::string url() const;  // "http://127.0.0.1:PORT/metrics"
  int requests();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Sends `request` (a whole HTTP/1.1 request, with Connection: close) to address "host:port" and
// returns everything the server answered, head and body: for tests that read headers.
std::string RawHttp(const std::string& address, const std::string& request);

// A recorded dcgm-exporter page from tests/fixtures/dcgm/.
std::string DcgmPage(const std::string& name);

// `gpufleet serve` on 127.0.0.1:0 with a short heartbeat timeout.
class ControllerProcess {
 public:
  explicit ControllerProcess(std::string data_dir, std::vector<std::string> extra = {});
  void Start();
  void Stop();  // SIGTERM and wait; throws unless it exits 0
  void Kill();  // SIGKILL and wait: a crash, for tests of what survives one
  void Signal(int sig) {
    if (process_) process_->Signal(sig);
  }
  pid_t pid() const { return process_ ? process_->pid() : -1; }
  // "127.0.0.1:PORT", or "https://127.0.0.1:PORT" when it serves TLS (Call() then trusts
  // DATA_DIR/tls/ca.pem, where `gpufleet tls init --dir DATA_DIR/tls` writes it).
  const std::string& address() const { return address_; }
  const std::string& data_dir() const { return data_dir_; }
  const std::string& admin_token() const { return admin_token_; }
  // JSON request with `token` (default: the admin token). Returns status and parsed body.
  std::pair<int, boost::json::value> Call(const std::string& method, const std::string& target,
                                          const std::string& body = "",
                                          const std::string* token = nullptr,
                                          const std::string& content_type = "application/json");
  int heartbeat_timeout_ms() const { return 1500; }

 private:
  std::string data_dir_;
  std::vector<std::string> extra_;
  std::unique_ptr<Process> process_;
  std::string address_;
  std::string admin_token_;
  int starts_ = 0;
};

}  // namespace gpufleet::e2e
