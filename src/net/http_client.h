#pragma once
// One HTTP/1.1 request to a URL with a single deadline covering resolve, connect, send and
// read: how the controller scrapes exporters and delivers notifications (Send), or many to one
// server over a connection kept open (HttpSession). An https:// URL is
// TLS with the server's certificate and name verified (the call's context, else the system's
// store or $GPUFLEET_CA_FILE); nothing is sent when the handshake fails.

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"
#include "net/tls.h"

namespace gpufleet::net {

struct HttpResult {
  int status = 0;
  std::string body;
};

struct HttpCall {
  std::string method = "GET";
  std::string url;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  int64_t timeout_ms = 10'000;
  size_t max_body_bytes = 32 << 20;
  TlsContext tls;  // for https://; null: DefaultClientContext()
};

// Any HTTP status is a result; errors are failures to get one (with the stage: resolve,
// connect, tls, send, read).
Result<HttpResult> Send(const HttpCall& call);

// Requests to one server over a connection kept open between them (HTTP/1.1 keep-alive), each
// as Send with its own deadline: what a sender of many requests to one place (remote write)
// uses, so that each request costs no connect and no TLS handshake. The connection is opened
// again for a call to another scheme, host, port or TLS context, after any failure, and when
// the server answers `Connection: close`. A request on a kept connection that ends without any
// answer (the server closed it while idle) is sent once more on a new one. One call at a time.
class HttpSession {
 public:
  HttpSession();
  ~HttpSession();
  HttpSession(const HttpSession&) = delete;
  HttpSession& operator=(const HttpSession&) = delete;
  Result<HttpResult> Send(const HttpCall& call);
  uint64_t connections() const { return connections_; }  // opened so far

 private:
  struct Connection;
  std::unique_ptr<Connection> conn_;
  uint64_t connections_ = 0;
};

}  // namespace gpufleet::net
