#include "cli/client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <optional>

#include "common/url.h"

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace gpufleet::cli {

struct HttpClient::Impl {
  std::string host, port, token;
  std::string bad_server;  // why --server could not be used; empty when it can
  asio::io_context io;
  std::optional<beast::tcp_stream> stream;
  beast::flat_buffer buffer;

  void Connect() {
    tcp::resolver resolver(io);
    stream.emplace(io);
    stream->expires_after(std::chrono::seconds(10));
    stream->connect(resolver.resolve(host, port));
    buffer.clear();
  }
};

HttpClient::HttpClient(std::string server, std::string token) : impl_(std::make_unique<Impl>()) {
  auto url = ParsePlainUrl(server, "8080");
  if (url.ok()) {
    impl_->host = url->host;
    impl_->port = url->port;
  } else {
    impl_->bad_server = url.error().message;
  }
  impl_->token = std::move(token);
}

HttpClient::~HttpClient() = default;

Result<HttpReply> HttpClient::Send(const std::string& method, const std::string& target,
                                   const std::string& body, const std::string& content_type) {
  if (!impl_->bad_server.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "--server " + impl_->bad_server);
  }
  http::request<http::string_body> req{http::string_to_verb(method), target, 11};
  req.set(http::field::host, impl_->host + ":" + impl_->port);
  req.set(http::field::user_agent, "gpufleet-cli");
  if (!impl_->token.empty()) req.set(http::field::authorization, "Bearer " + impl_->token);
  if (!body.empty()) req.set(http::field::content_type, content_type);
  req.keep_alive(true);
  req.body() = body;
  req.prepare_payload();
  // One retry on a fresh connection: the server may have closed an idle keep-alive one.
  for (int attempt = 0; attempt < 2; ++attempt) {
    try {
      if (!impl_->stream) impl_->Connect();
      impl_->stream->expires_after(std::chrono::seconds(60));
      beast::error_code write_error;
      http::write(*impl_->stream, req, write_error);
      // A server may answer early (413) and stop reading: the reply can still be there.
      http::response_parser<http::string_body> parser;
      parser.body_limit(256 << 20);
      http::read(*impl_->stream, impl_->buffer, parser);
      auto res = parser.release();
      HttpReply reply{static_cast<int>(res.result_int()), std::move(res.body())};
      if (!res.keep_alive()) impl_->stream.reset();
      return reply;
    } catch (const boost::system::system_error& e) {
      impl_->stream.reset();
      if (attempt == 1) {
        return MakeError(ErrorCode::kUnavailable, "cannot reach the controller at " + impl_->host +
                                                      ":" + impl_->port + ": " +
                                                      e.code().message());
      }
    }
  }
  return MakeError(ErrorCode::kUnavailable, "unreachable");
}

std::string UrlEncode(const std::string& value) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : value) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace gpufleet::cli
