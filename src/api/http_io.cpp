#include "api/http_io.h"

#include <spdlog/spdlog.h>

#include <array>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/json.hpp>
#include <boost/url/parse.hpp>
#include <chrono>

#include "api/gzip.h"
#include "common/json_keys.h"

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace gpufleet::api {

// A body sent with POST, PUT or PATCH is a JSON object, or YAML or CSV where the route takes
// it (apply, rule files, asset imports: Router::TakesYaml, TakesCsv): an action that ignores
// its body must not take garbage as a yes.
Status CheckBody(const Request& req, bool raw_route) {
  if (req.body.empty() || raw_route ||
      (req.method != "POST" && req.method != "PUT" && req.method != "PATCH")) {
    return {};
  }
  boost::system::error_code ec;
  auto v = boost::json::parse(req.body, ec);
  if (ec) return MakeError(ErrorCode::kInvalidArgument, "malformed JSON: " + ec.message());
  GF_TRY(CheckJsonKeys(req.body));  // one meaning: no key given twice
  if (!v.is_object()) {
    return MakeError(ErrorCode::kInvalidArgument, "the body must be a JSON object");
  }
  return {};
}

Request ToRequest(const http::request<http::string_body>& in, const std::string& remote) {
  Request req;
  req.method = std::string(in.method_string());
  req.remote = remote;
  auto url = boost::urls::parse_origin_form(in.target());
  std::string target;  // the url views it
  if (!url) {          // curl sends match[] unescaped, as Prometheus takes it
    target = std::string(in.target());
    for (size_t i = target.find_first_of("[]"); i != std::string::npos;
         i = target.find_first_of("[]", i)) {
      target.replace(i, 1, target[i] == '[' ? "%5B" : "%5D");
    }
    url = boost::urls::parse_origin_form(target);
  }
  if (url) {
    req.path = std::string(url->path());
    for (auto p : url->params()) {
      req.query[std::string(p.key)] = std::string(p.value);
      req.query_list.emplace_back(std::string(p.key), std::string(p.value));
    }
  } else {
    req.path = std::string(in.target());
  }
  req.body = in.body();
  req.content_type = std::string(in[http::field::content_type]);
  req.authorization = std::string(in[http::field::authorization]);
  return req;
}

// The headers every answer carries.
void SetHeaders(http::fields& res, const Response& r) {
  res.set(http::field::server, "gpufleet");
  res.set(http::field::content_type, r.content_type);
  res.set(http::field::cache_control, "no-store");
  // On every answer, the dashboard's pages above all: scripts only from this server (the
  // dashboard has no inline script; its markup has inline styles), no framing, no sniffing,
  // no referrer (no URL carries a token, but none needs to leave either).
  res.set("Content-Security-Policy",
          "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
          "img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; "
          "form-action 'self'; frame-ancestors 'none'");
  res.set("X-Content-Type-Options", "nosniff");
  res.set("X-Frame-Options", "DENY");
  res.set("Referrer-Policy", "no-referrer");
  if (r.status == 401) res.set(http::field::www_authenticate, "Bearer");
  if (r.retry_after_s > 0) res.set(http::field::retry_after, std::to_string(r.retry_after_s));
}

asio::awaitable<void> WriteSimple(net::Stream& stream, Response r, unsigned version,
                                  bool keep_alive, bool gzip_ok, BufferPool* buffers) {
  http::response<http::string_body> res{static_cast<http::status>(r.status), version};
  SetHeaders(res, r);
  res.keep_alive(keep_alive);
  if (r.body.size() >= kGzipMinBytes) {
    res.set(http::field::vary, "Accept-Encoding");
    if (gzip_ok) {
      std::string packed = Gzip(r.body);
      if (!packed.empty()) {
        if (buffers) buffers->Give(std::move(r.body));
        r.body = std::move(packed);
        res.set(http::field::content_encoding, "gzip");
      }
    }
  }
  res.body() = std::move(r.body);
  res.prepare_payload();
  co_await http::async_write(stream, res, asio::as_tuple(asio::use_awaitable));
  if (buffers) buffers->Give(std::move(res.body()));
}

// A Response with `more`: the headers, then each part as a chunk as the client takes it
// (memory: one part), then the last chunk; to an HTTP/1.0 client, which knows no chunks, the
// parts as they are and then the close. False: the connection is to be closed (that, the
// client went away, or a part failed and the answer is cut short).
asio::awaitable<bool> WriteStream(net::Stream& stream, Response r, unsigned version,
                                  bool keep_alive, int body_timeout_ms) {
  http::response<http::empty_body> res{static_cast<http::status>(r.status), version};
  SetHeaders(res, r);
  const bool chunked = version >= 11;
  res.keep_alive(chunked && keep_alive);
  res.chunked(chunked);
  http::response_serializer<http::empty_body> head{res};
  // Each write within the body timeout: a client that stops reading is let go, one that
  // reads slowly is not (the request's deadline would cut a long answer short).
  auto deadline = [&] {
    stream.next_layer().expires_after(std::chrono::milliseconds(body_timeout_ms));
  };
  deadline();
  auto [ec, n] =
      co_await http::async_write_header(stream, head, asio::as_tuple(asio::use_awaitable));
  if (ec) co_return false;
  // Buffers named, not temporaries inside co_await: see Send() in agent.cpp (a GCC 12 bug).
  for (;;) {
    Result<std::string> part = r.more();
    if (!part.ok()) {
      spdlog::warn("api: an answer was cut short: {}", part.error().message);
      co_return false;
    }
    if (part->empty()) break;
    deadline();
    boost::system::error_code wec;
    if (chunked) {
      auto chunk = http::make_chunk(asio::buffer(*part));
      std::tie(wec, n) =
          co_await asio::async_write(stream, chunk, asio::as_tuple(asio::use_awaitable));
    } else {
      auto bytes = asio::buffer(*part);
      std::tie(wec, n) =
          co_await asio::async_write(stream, bytes, asio::as_tuple(asio::use_awaitable));
    }
    if (wec) co_return false;
  }
  if (!chunked) co_return false;
  auto last = http::make_chunk_last();
  deadline();
  std::tie(ec, n) = co_await asio::async_write(stream, last, asio::as_tuple(asio::use_awaitable));
  co_return !ec;
}

// A lingering close: after an early reply (413), read and drop what the client still sends
// for a moment, so the kernel does not reset the connection before it reads our reply.
asio::awaitable<void> DrainAndClose(net::Stream& stream) {
  beast::error_code ec;
  auto& tcp_stream = stream.next_layer();
  tcp_stream.socket().shutdown(tcp::socket::shutdown_send, ec);
  std::array<char, 64 * 1024> sink;
  size_t total = 0;
  tcp_stream.expires_after(std::chrono::seconds(2));
  while (total < (64u << 20)) {
    auto [rec, n] =
        co_await stream.async_read_some(asio::buffer(sink), asio::as_tuple(asio::use_awaitable));
    if (rec) break;
    total += n;
  }
  tcp_stream.socket().close(ec);
}

}  // namespace gpufleet::api
