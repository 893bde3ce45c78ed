#pragma once
// A small HTTP/1.1 client for the REST API (keep-alive, one connection, one thread at a time).
// Asio/Beast stay behind the pimpl.

#include <memory>
#include <string>

#include "common/result.h"
#include "net/tls.h"

namespace gpufleet::cli {

struct HttpReply {
  int status = 0;
  std::string body;
};

class HttpClient {
 public:
  // server: "http://host:port", "host:port" or "https://host:port"; for https, `tls` says whom
  // to trust. Nothing is sent before the server's certificate and name have been checked.
  HttpClient(std::string server, std::string token, net::TlsClientOptions tls = {});
  ~HttpClient();
  Result<HttpReply> Send(const std::string& method, const std::string& target,
                         const std::string& body = "",
                         const std::string& content_type = "application/json");

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Percent-encodes a query value.
std::string UrlEncode(const std::string& value);

}  // namespace gpufleet::cli
