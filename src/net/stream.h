#pragma once
// One stream type for plain TCP and TLS, so that the HTTP and WebSocket code is written once:
// net::Stream forwards reads and writes to a beast::tcp_stream or to an OpenSSL stream over one.
// Heavy (Asio's ssl, Beast): include it from .cpp files only.

#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <boost/beast/websocket/teardown.hpp>
#include <optional>
#include <string>

#include "net/tls.h"

namespace gpufleet::net {

class Stream {
 public:
  using executor_type = boost::beast::tcp_stream::executor_type;
  using next_layer_type = boost::beast::tcp_stream;
  using TlsStream = boost::asio::ssl::stream<boost::beast::tcp_stream>;

  // Plain when `context` is null. The context is kept alive by the stream.
  Stream(boost::beast::tcp_stream tcp, TlsContext context) : context_(std::move(context)) {
    if (context_) {
      tls_.emplace(std::move(tcp), *context_);
    } else {
      plain_.emplace(std::move(tcp));
    }
  }

  bool tls() const { return tls_.has_value(); }
  TlsStream& tls_stream() { return *tls_; }
  boost::beast::tcp_stream& next_layer() { return tls_ ? tls_->next_layer() : *plain_; }
  executor_type get_executor() { return next_layer().get_executor(); }

  template <class Buffers, class Token>
  auto async_read_some(const Buffers& buffers, Token&& token) {
    if (tls_) return tls_->async_read_some(buffers, std::forward<Token>(token));
    return plain_->async_read_some(buffers, std::forward<Token>(token));
  }
  template <class Buffers, class Token>
  auto async_write_some(const Buffers& buffers, Token&& token) {
    if (tls_) return tls_->async_write_some(buffers, std::forward<Token>(token));
    return plain_->async_write_some(buffers, std::forward<Token>(token));
  }
  template <class Buffers>
  size_t read_some(const Buffers& buffers, boost::system::error_code& ec) {
    return tls_ ? tls_->read_some(buffers, ec) : plain_->read_some(buffers, ec);
  }
  template <class Buffers>
  size_t read_some(const Buffers& buffers) {
    return tls_ ? tls_->read_some(buffers) : plain_->read_some(buffers);
  }
  template <class Buffers>
  size_t write_some(const Buffers& buffers, boost::system::error_code& ec) {
    return tls_ ? tls_->write_some(buffers, ec) : plain_->write_some(buffers, ec);
  }
  template <class Buffers>
  size_t write_some(const Buffers& buffers) {
    return tls_ ? tls_->write_some(buffers) : plain_->write_some(buffers);
  }

 private:
  TlsContext context_;
  std::optional<boost::beast::tcp_stream> plain_;
  std::optional<TlsStream> tls_;
};

// Before a client's handshake: the name to send (SNI) and to check the certificate against.
// Returns false (with `why`) when OpenSSL refuses the name.
bool PrepareClient(Stream& stream, const std::string& host, std::string& why);

// One line for a failed handshake or TLS read: the certificate check's own words when that was
// the failure ("certificate has expired", "hostname mismatch"), and a plain-HTTP server named.
std::string DescribeTlsError(Stream& stream, const boost::system::error_code& ec);

// Whether the peer presented a certificate that verified (the server's view of a client).
bool PeerVerified(Stream& stream);

// WebSocket close for a net::Stream: found by argument-dependent lookup from Beast.
inline void teardown(boost::beast::role_type role, Stream& stream, boost::system::error_code& ec) {
  if (stream.tls()) {
    boost::beast::teardown(role, stream.tls_stream(), ec);
  } else {
    boost::beast::teardown(role, stream.next_layer(), ec);
  }
}

template <class Handler>
void async_teardown(boost::beast::role_type role, Stream& stream, Handler&& handler) {
  if (stream.tls()) {
    boost::beast::async_teardown(role, stream.tls_stream(), std::forward<Handler>(handler));
  } else {
    boost::beast::async_teardown(role, stream.next_layer(), std::forward<Handler>(handler));
  }
}

}  // namespace gpufleet::net
