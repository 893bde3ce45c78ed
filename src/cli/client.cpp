#include "cli/client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <optional>

#include "common/url.h"
#include "net/stream.h"

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace gpufleet::cli {

struct HttpClient::Impl {
  std::string host, port, token;
  std::string bad_server;  // why --server could not be used; empty when it can
  net::TlsClientOptions tls_options;
  bool use_tls = false;
  net::TlsContext tls;  // made on the first call
  asio::io_context io;
  std::optional<net::Stream> stream;
  beast::flat_buffer buffer;

  // Runs one asynchronous step to its end under a deadline (the stream's timer closes the
  // socket when it passes), so that a server that accepts and never answers cannot hang the
  // CLI. `start` begins the operation with the handler it is given.
  template <class Start>
  beast::error_code Step(std::chrono::seconds deadline, Start start) {
    beast::error_code result;
    stream->next_layer().expires_after(deadline);
    start([&result](beast::error_code ec, auto&&...) { result = ec; });
    io.restart();
    io.run();
    stream->next_layer().expires_never();
    return result;
  }

  std::string Where() const { return (use_tls ? "https://" : "") + host + ":" + port; }

  // Returns an error (with nothing sent) when the connection, the TLS context or the
  // handshake fails.
  Status Connect() {
    if (use_tls && !tls) {
      auto made = net::MakeClientContext(tls_options);
      if (!made.ok()) return made.error();
      tls = made.value();
    }
    tcp::resolver resolver(io);
    beast::error_code ec;
    auto endpoints = resolver.resolve(host, port, ec);
    if (ec) {
      return MakeError(ErrorCode::kUnavailable,
                       "cannot reach the controller at " + Where() + ": " + ec.message());
    }
    stream.emplace(beast::tcp_stream(io), tls);
    buffer.clear();
    ec = Step(std::chrono::seconds(10),
              [&](auto handler) { stream->next_layer().async_connect(endpoints, handler); });
    if (ec) {
      stream.reset();
      return MakeError(ErrorCode::kUnavailable,
                       "cannot reach the controller at " + Where() + ": " + ec.message());
    }
    if (!use_tls) return {};
    std::string why;
    if (!net::PrepareClient(*stream, host, why)) {
      stream.reset();
      return MakeError(ErrorCode::kInvalidArgument, Where() + ": " + why);
    }
    ec = Step(std::chrono::seconds(10), [&](auto handler) {
      stream->tls_stream().async_handshake(asio::ssl::stream_base::client, handler);
    });
    if (ec) {
      std::string what = ec == beast::error::timeout ? "no TLS handshake within 10 s"
                                                     : net::DescribeTlsError(*stream, ec);
      stream.reset();
      return MakeError(
          ErrorCode::kUnavailable,
          Where() + ": TLS: " + what +
              (tls_options.ca_file.empty() ? "" : " (CA file " + tls_options.ca_file + ")"));
    }
    return {};
  }
};

HttpClient::HttpClient(std::string server, std::string token, net::TlsClientOptions tls)
    : impl_(std::make_unique<Impl>()) {
  auto url = ParseHttpUrl(server, "8080");
  impl_->tls_options = std::move(tls);
  if (url.ok()) {
    impl_->host = url->host;
    impl_->port = url->port;
    impl_->use_tls = url->tls();
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
    bool reused = impl_->stream.has_value();
    if (!reused) {
      if (auto s = impl_->Connect(); !s.ok()) return s.error();
    }
    // A server may answer early (413) and stop reading: the reply can still be there, so a
    // failed write is not the end.
    impl_->Step(std::chrono::seconds(60),
                [&](auto handler) { http::async_write(*impl_->stream, req, handler); });
    http::response_parser<http::string_body> parser;
    parser.body_limit(256 << 20);
    beast::error_code ec = impl_->Step(std::chrono::seconds(300), [&](auto handler) {
      http::async_read(*impl_->stream, impl_->buffer, parser, handler);
    });
    if (!ec) {
      auto res = parser.release();
      HttpReply reply{static_cast<int>(res.result_int()), std::move(res.body())};
      if (!res.keep_alive()) impl_->stream.reset();
      return reply;
    }
    impl_->stream.reset();
    if (!reused || attempt == 1) {
      std::string what = ec == beast::error::timeout ? "no answer within 300 s" : ec.message();
      return MakeError(ErrorCode::kUnavailable,
                       "cannot reach the controller at " + impl_->Where() + ": " + what);
    }
  }
  return MakeError(ErrorCode::kUnavailable, "unreachable");
}

std::string UrlEncode(const std::string& value) { return PercentEncode(value); }

}  // namespace gpufleet::cli
