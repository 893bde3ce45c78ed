#include "net/tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509err.h>

#include <boost/asio/ip/address.hpp>
#include <cstdlib>
#include <mutex>
#include <optional>

#include "net/stream.h"

namespace ssl = boost::asio::ssl;

namespace gpufleet::net {
namespace {

Status Use(const std::string& what, const std::string& file, auto&& load) {
  boost::system::error_code ec;
  load(ec);
  if (ec) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "cannot use " + what + " " + file + ": " + ec.message());
  }
  return Status();
}

}  // namespace

Result<TlsContext> MakeClientContext(const TlsClientOptions& options) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
  SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
  if (options.insecure_skip_verify) {
    ctx->set_verify_mode(ssl::verify_none);
  } else {
    ctx->set_verify_mode(ssl::verify_peer);
    if (!options.ca_file.empty()) {
      auto s = Use("the CA file", options.ca_file,
                   [&](auto& ec) { ctx->load_verify_file(options.ca_file, ec); });
      if (!s.ok()) return s.error();
    } else {
      boost::system::error_code ec;
      ctx->set_default_verify_paths(ec);
      if (ec) {
        return MakeError(ErrorCode::kInvalidArgument,
                         "cannot load the system's CA store: " + ec.message());
      }
    }
  }
  if (!options.cert_file.empty() || !options.key_file.empty()) {
    if (options.cert_file.empty() || options.key_file.empty()) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "a client certificate needs both its certificate and its key file");
    }
    auto s = Use("the client certificate", options.cert_file,
                 [&](auto& ec) { ctx->use_certificate_chain_file(options.cert_file, ec); });
    if (!s.ok()) return s.error();
    s = Use("the client key", options.key_file,
            [&](auto& ec) { ctx->use_private_key_file(options.key_file, ssl::context::pem, ec); });
    if (!s.ok()) return s.error();
  }
  return ctx;
}

TlsClientOptions ClientOptionsFromEnv(std::string ca_file, bool insecure_skip_verify) {
  TlsClientOptions o;
  o.ca_file = std::move(ca_file);
  if (o.ca_file.empty()) {
    if (const char* env = std::getenv(kCaFileEnv)) o.ca_file = env;
  }
  o.insecure_skip_verify = insecure_skip_verify;
  return o;
}

namespace {
std::mutex default_mu;
std::optional<Result<TlsContext>> default_context;  // guarded by default_mu
}  // namespace

Result<TlsContext> DefaultClientContext() {
  std::lock_guard lock(default_mu);
  if (!default_context) default_context = MakeClientContext(ClientOptionsFromEnv("", false));
  return *default_context;
}

Status SetDefaultClientOptions(const TlsClientOptions& options) {
  auto context = MakeClientContext(options);
  if (!context.ok()) return context.error();
  std::lock_guard lock(default_mu);
  default_context = std::move(context);
  return {};
}

Result<TlsContext> MakeServerContext(const TlsServerOptions& options) {
  if (options.cert_file.empty() || options.key_file.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "TLS needs both --tls-cert and --tls-key");
  }
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
  ctx->set_options(ssl::context::default_workarounds | ssl::context::single_dh_use);
  auto s = Use("--tls-cert", options.cert_file,
               [&](auto& ec) { ctx->use_certificate_chain_file(options.cert_file, ec); });
  if (!s.ok()) return s.error();
  boost::system::error_code key_ec;
  ctx->use_private_key_file(options.key_file, ssl::context::pem, key_ec);
  bool mismatch = key_ec && ERR_GET_REASON(static_cast<unsigned long>(key_ec.value())) ==
                                X509_R_KEY_VALUES_MISMATCH;
  if (key_ec && !mismatch) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "cannot use --tls-key " + options.key_file + ": " + key_ec.message());
  }
  if (mismatch || SSL_CTX_check_private_key(ctx->native_handle()) != 1) {
    ERR_clear_error();
    return MakeError(
        ErrorCode::kInvalidArgument,
        "--tls-key " + options.key_file + " does not match --tls-cert " + options.cert_file);
  }
  if (!options.client_ca.empty()) {
    s = Use("--client-ca", options.client_ca,
            [&](auto& ec) { ctx->load_verify_file(options.client_ca, ec); });
    if (!s.ok()) return s.error();
    // Asked for, not required, at the handshake: the dashboard and the CLI connect without
    // one. The agent channel refuses a connection whose certificate did not verify.
    ctx->set_verify_mode(ssl::verify_peer);
    if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(options.client_ca.c_str())) {
      SSL_CTX_set_client_CA_list(ctx->native_handle(), names);
    }
    static const unsigned char kSessionContext[] = "gpufleet";
    SSL_CTX_set_session_id_context(ctx->native_handle(), kSessionContext,
                                   sizeof(kSessionContext) - 1);
  }
  return ctx;
}

bool Verifies(const TlsContext& context) {
  return context && SSL_CTX_get_verify_mode(context->native_handle()) != SSL_VERIFY_NONE;
}

bool PrepareClient(Stream& stream, const std::string& host, std::string& why) {
  SSL* handle = stream.tls_stream().native_handle();
  boost::system::error_code ec;
  boost::asio::ip::make_address(host, ec);
  bool is_ip = !ec;
  // SNI takes a DNS name only; the certificate is checked against either.
  if (!is_ip && SSL_set_tlsext_host_name(handle, host.c_str()) != 1) {
    ERR_clear_error();
    why = "cannot send the server name '" + host + "'";
    return false;
  }
  if (SSL_get_verify_mode(handle) != SSL_VERIFY_NONE && SSL_set1_host(handle, host.c_str()) != 1) {
    ERR_clear_error();
    why = "cannot check the certificate against '" + host + "'";
    return false;
  }
  return true;
}

std::string DescribeTlsError(Stream& stream, const boost::system::error_code& ec) {
  if (ec == ssl::error::stream_truncated || ec == boost::asio::error::eof) {
    return "the server closed the connection during the TLS handshake";
  }
  if (ec.category() == boost::asio::error::get_ssl_category()) {
    int reason = ERR_GET_REASON(static_cast<unsigned long>(ec.value()));
    if (reason == SSL_R_CERTIFICATE_VERIFY_FAILED && stream.tls()) {
      long result = SSL_get_verify_result(stream.tls_stream().native_handle());
      return std::string("certificate verify failed: ") + X509_verify_cert_error_string(result);
    }
    if (reason == SSL_R_WRONG_VERSION_NUMBER || reason == SSL_R_PACKET_LENGTH_TOO_LONG ||
        reason == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
      return "the server does not speak TLS (" + ec.message() + "); is it plain http://?";
    }
  }
  return ec.message();
}

bool PeerVerified(Stream& stream) {
  if (!stream.tls()) return false;
  SSL* handle = stream.tls_stream().native_handle();
  return SSL_get0_peer_certificate(handle) != nullptr && SSL_get_verify_result(handle) == X509_V_OK;
}

}  // namespace gpufleet::net
