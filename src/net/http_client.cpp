#include "net/http_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>

#include "common/url.h"

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace gpufleet::net {

Result<HttpResult> Send(const HttpCall& call) {
  const std::string& url = call.url;
  auto parsed = ParseHttpUrl(url, "80");
  if (!parsed.ok()) return parsed.error();
  if (parsed->scheme != "http") {
    return MakeError(ErrorCode::kInvalidArgument, url + ": only http:// is supported");
  }
  // Asynchronous operations on a private context so that one deadline covers every stage.
  asio::io_context io;
  tcp::resolver resolver(io);
  beast::tcp_stream stream(io);
  beast::flat_buffer buffer;
  http::request<http::string_body> req{http::string_to_verb(call.method), parsed->target, 11};
  req.set(http::field::host, parsed->host + ":" + parsed->port);
  req.set(http::field::user_agent, "gpufleet");
  for (const auto& [k, v] : call.headers) req.set(k, v);
  req.body() = call.body;
  req.prepare_payload();
  http::response_parser<http::string_body> parser;
  parser.body_limit(call.max_body_bytes);
  beast::error_code failure;
  std::string stage = "resolve";
  auto deadline = std::chrono::milliseconds(call.timeout_ms);
  stream.expires_after(deadline);
  resolver.async_resolve(parsed->host, parsed->port, [&](beast::error_code ec, auto results) {
    if (ec) {
      failure = ec;
      return;
    }
    stage = "connect";
    stream.async_connect(results, [&](beast::error_code ec, const tcp::endpoint&) {
      if (ec) {
        failure = ec;
        return;
      }
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
    });
  });
  // The resolver has no deadline of its own; the stream's timer covers the rest.
  io.run_for(deadline + std::chrono::milliseconds(100));
  if (!io.stopped()) {
    return MakeError(
        ErrorCode::kUnavailable,
        url + ": no answer within " + std::to_string(call.timeout_ms) + " ms (" + stage + ")");
  }
  if (failure) {
    std::string what = failure == beast::error::timeout
                           ? "timed out after " + std::to_string(call.timeout_ms) + " ms"
                           : failure.message();
    return MakeError(ErrorCode::kUnavailable, url + ": " + stage + ": " + what);
  }
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  auto& res = parser.get();
  return HttpResult{static_cast<int>(res.result_int()), std::move(res.body())};
}

}  // namespace gpufleet::net
