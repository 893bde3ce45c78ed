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

// A connection and what it runs on: destroyed whole when an exchange fails or times out (the
// io_context's pending handlers go with it, uncalled).
struct HttpSession::Connection {
  asio::io_context io;
  tcp::resolver resolver{io};
  Stream stream;
  std::string origin;  // scheme://host:port
  TlsContext tls;
  bool open = false;  // connected (and TLS established): the next exchange goes straight on
  beast::flat_buffer buffer;
  explicit Connection(TlsContext context) : stream(beast::tcp_stream(io), context), tls(context) {}
  ~Connection() {
    beast::error_code ignored;
    stream.next_layer().socket().shutdown(tcp::socket::shutdown_both, ignored);
  }
};

HttpSession::HttpSession() = default;
HttpSession::~HttpSession() = default;

Result<HttpResult> HttpSession::Send(const HttpCall& call) {
  const std::string& url = call.url;
  auto parsed = ParseHttpUrl(url, "80");
  if (!parsed.ok()) return parsed.error();
  if (parsed->scheme != "http" && parsed->scheme != "https") {
    return MakeError(ErrorCode::kInvalidArgument,
                     url + ": only http:// and https:// are supported");
  }
  auto context = ClientContext(parsed->scheme, call.tls);
  if (!context.ok()) return context.error();
  const std::string origin = parsed->scheme + "://" + parsed->host + ":" + parsed->port;
  if (conn_ && (conn_->origin != origin || conn_->tls != context.value())) conn_.reset();
  const auto req = MakeRequest(call, *parsed);
  for (;;) {
    const bool reused = conn_ && conn_->open;
    if (!conn_) {
      conn_ = std::make_unique<Connection>(context.value());
      conn_->origin = origin;
    }
    Connection& c = *conn_;
    Stream& stream = c.stream;
    auto& tcp_stream = stream.next_layer();
    http::response_parser<http::string_body> parser;
    parser.body_limit(call.max_body_bytes);
    beast::error_code failure;
    std::string tls_failure;  // a handshake's failure in words
    std::string stage = "send";
    const auto deadline = std::chrono::milliseconds(call.timeout_ms);
    tcp_stream.expires_after(deadline);
    auto send = [&] {
      c.open = true;
      stage = "send";
      http::async_write(stream, req, [&](beast::error_code ec, size_t) {
        if (ec) {
          failure = ec;
          return;
        }
        stage = "read";
        http::async_read(stream, c.buffer, parser,
                         [&](beast::error_code ec, size_t) { failure = ec; });
      });
    };
    if (reused) {
      send();
    } else {
      ++connections_;
      stage = "resolve";
      c.resolver.async_resolve(parsed->host, parsed->port, [&](beast::error_code ec, auto results) {
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
          if (!stream.tls()) return send();
          stage = "tls";
          if (!PrepareClient(stream, parsed->host, tls_failure)) return;
          stream.tls_stream().async_handshake(asio::ssl::stream_base::client,
                                              [&](beast::error_code ec) {
                                                if (ec) {
                                                  failure = ec;
                                                  tls_failure = DescribeTlsError(stream, ec);
                                                  return;
                                                }
                                                send();
                                              });
        });
      });
    }
    // The resolver has no deadline of its own; the stream's timer covers the rest.
    c.io.restart();
    c.io.run_for(deadline + std::chrono::milliseconds(100));
    const bool finished = c.io.stopped();
    if (finished && !failure && tls_failure.empty()) {
      auto& res = parser.get();
      const bool keep = res.keep_alive();
      HttpResult out{static_cast<int>(res.result_int()), std::move(res.body())};
      if (!keep) conn_.reset();
      return out;
    }
    const bool got_some = parser.got_some();
    conn_.reset();  // whatever it was in the middle of goes with it
    // A kept connection the server had closed: nothing came back. Once more on a new one.
    if (reused && finished && !got_some && tls_failure.empty()) continue;
    GF_TRY(Outcome(call, finished, stage, tls_failure, failure));
    return MakeError(ErrorCode::kUnavailable, url + ": " + stage + " failed");
  }
}

Result<HttpResult> Send(const HttpCall& call) {
  HttpSession session;
  return session.Send(call);
}

}  // namespace gpufleet::net
