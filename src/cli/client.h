#pragma once
// A small HTTP/1.1 client for the REST API (keep-alive, one connection, one thread at a time).
// Asio/Beast stay behind the pimpl.

#include <memory>
#include <string>

#include "common/result.h"

namespace gpufleet::cli {

struct HttpReply {
  int status = 0;
  std::string body;
};

class HttpClient {
 public:
  // server: "http://host:port" or "host:port".
  HttpClient(std::string server, std::string token);
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
