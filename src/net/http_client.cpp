#include "net/http_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>

#include "common/url.h"
#include "net/stream.h"

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace gpufleet::net {

namespace {

// For https: the call's TLS context, else one that trusts the system's roots; none for http.
Result<TlsContext> ClientContext(const std::string& scheme, const TlsContext& given) {
  if (scheme != "https") return TlsContext();
  if (given) return given;
  return DefaultClientContext();
}

http::request<http::string_body> MakeRequest(const HttpCall& call, const HttpUrl& url) {
  http::request<http::string_body> req{http::string_to_verb(call.method), url.target, 11};
  req.set(http::field::host, url.host + ":" + url.port);
  req.set(http::field::user_agent, "gpufleet");
  for (const auto& [k, v] : call.headers) req.set(k, v);
  req.body() = call.body;
  req.prepare_payload();
  return req;
}

// Why an exchange failed, in words that name the URL and the stage it got to ({}: it did not).
Status Outcome(const HttpCall& call, bool finished, const std::string& stage,
               const std::string& tls_failure, const beast::error_code& failure) {
  const std::string& url = call.url;
  if (!finished) {
    return MakeError(
        ErrorCode::kUnavailable,
        url + ": no answer within " + std::to_string(call.timeout_ms) + " ms (" + stage + ")");
  }
  if (!tls_failure.empty()) {
    return MakeError(ErrorCode::kUnavailable, url + ": TLS: " + tls_failure);
  }
  if (failure) {
    std::string what = failure == beast::error::timeout
                           ? "timed out after " + std::to_string(call.timeout_ms) + " ms"
                           : failure.message();
    return MakeError(ErrorCode::kUnavailable, url + ": " + stage + ": " + what);
  }
  return {};
}

}  // namespace

Result<HttpResult> Send(const HttpCall& call) {
  const std::string& url = call.url;
  auto parsed = ParseHttpUrl(url, "80");
  if (!parsed.ok()) return parsed.error();
  if (parsed->scheme != "http" && parsed->scheme != "https") {
    return MakeError(ErrorCode::kInvalidArgument,
                     url + ": only http:// and https:// are supported");
  }
  auto context = ClientContext(parsed->scheme, call.tls);
  if (!context.ok()) return context.error();
  TlsContext tls = context.value();
  // Asynchronous operations on a private context so that one deadline covers every stage.
  asio::io_context io;
  tcp::resolver resolver(io);
  Stream stream(beast::tcp_stream(io), tls);
  auto& tcp_stream = stream.next_layer();
  beast::flat_buffer buffer;
  auto req = MakeRequest(call, *parsed);
  http::response_parser<http::string_body> parser;
  parser.body_limit(call.max_body_bytes);
  beast::error_code failure;
  std::string tls_failure;  // a handshake's failure in words
  std::string stage = "resolve";
  auto deadline = std::chrono::milliseconds(call.timeout_ms);
  tcp_stream.expires_after(deadline);
  resolver.async_resolve(parsed->host, parsed->port, [&](beast::error_code ec, auto results) {
    if (ec) {
      failure = ec;
      return;
    }
    stage = "connect";
    tcp_stream.async_connect(results, [&](beast::error_code ec, const tcp::endpoint&) {
      if (ec) {
        failure = ec;
        return;
      }
      auto send = [&] {
        stage = "send";
        http::async_write(stream, req, [&](beast::error_code ec, size_t) {
          if (ec) {
            failure = ec;
            return;
          }
          stage = "read";
          http::async_read(stream, buffer, parser,
                           [&](beast::error_code ec, size_t) { failure = ec; });
        });
      };
      if (!stream.tls()) return send();
      stage = "tls";
      if (!PrepareClient(stream, parsed->host, tls_failure)) return;
      stream.tls_stream().async_handshake(asio::ssl::stream_base::client,
                                          [&, send](beast::error_code ec) {
                                            if (ec) {
                                              failure = ec;
                                              tls_failure = DescribeTlsError(stream, ec);
                                              return;
                                            }
                                            send();
                                          });
    });
  });
  // The resolver has no deadline of its own; the stream's timer covers the rest.
  io.run_for(deadline + std::chrono::milliseconds(100));
  GF_TRY(Outcome(call, io.stopped(), stage, tls_failure, failure));
  beast::error_code ignored;
  tcp_stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  auto& res = parser.get();
  return HttpResult{static_cast<int>(res.result_int()), std::move(res.body())};
}

}  // namespace gpufleet::net
