// Reading a request and writing an answer over Beast, private to src/api (server.cpp): the
// body check, the headers every answer carries, plain and streamed answers, a lingering close.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/beast/http.hpp>
#include <string>

#include "api/buffer_pool.h"
#include "api/http.h"
#include "common/result.h"
#include "net/stream.h"

namespace gpufleet::api {

// A POST, PUT or PATCH body is a JSON object unless the route takes its body raw (YAML, CSV).
Status CheckBody(const Request& req, bool raw_route);
Request ToRequest(const boost::beast::http::request<boost::beast::http::string_body>& in,
                  const std::string& remote);
void SetHeaders(boost::beast::http::fields& res, const Response& r);
// Gzipped when the client takes it and the body is large; the body's buffer goes back to
// `buffers` (may be null) once written.
boost::asio::awaitable<void> WriteSimple(net::Stream& stream, Response r, unsigned version,
                                         bool keep_alive, bool gzip_ok, BufferPool* buffers);
// A Response with `more`, part by part. False: the connection is to be closed.
boost::asio::awaitable<bool> WriteStream(net::Stream& stream, Response r, unsigned version,
                                         bool keep_alive, int body_timeout_ms);
boost::asio::awaitable<void> DrainAndClose(net::Stream& stream);

}  // namespace gpufleet::api
