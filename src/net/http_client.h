#pragma once
// One HTTP/1.1 request to a URL with a single deadline covering resolve, connect, send and
// read: how the controller scrapes exporters and delivers notifications. An https:// URL is
// TLS with the server's certificate and name verified (the call's context, else the system's
// store or $GPUFLEET_CA_FILE); nothing is sent when the handshake fails.

#include <cstdint>
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

}  // namespace gpufleet::net
