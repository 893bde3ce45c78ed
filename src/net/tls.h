#pragma once
// TLS settings for both ends, behind a forward declaration so that this header stays light: the
// controller's server context (certificate, key, optional client CA; re-read on SIGHUP) and the
// clients' context (the system's CA store or a CA file, host names always checked, verification
// off only when asked by name). OpenSSL through Boost.Asio's ssl; stream.h has the stream.

#include <memory>
#include <string>

#include "common/result.h"

namespace boost::asio::ssl {
class context;
}

namespace gpufleet::net {

using TlsContext = std::shared_ptr<boost::asio::ssl::context>;

// The environment variable every client reads when it is given no --ca-file.
inline constexpr const char* kCaFileEnv = "GPUFLEET_CA_FILE";

struct TlsClientOptions {
  std::string ca_file;  // PEM bundle to trust instead of the system's store; empty: the system's
  bool insecure_skip_verify = false;  // accept any certificate and name (never the default)
  std::string cert_file;              // a client certificate to present (agents, --client-ca)
  std::string key_file;
};

// TLS 1.2 or newer; the server's certificate is verified against the CA (file or system store)
// unless insecure_skip_verify. Errors name the file that could not be used.
Result<TlsContext> MakeClientContext(const TlsClientOptions& options);

// The client context of calls given none (the controller's scraper and notifier): the one
// SetDefaultClientOptions made, else the system's store or $GPUFLEET_CA_FILE when set. Made once;
// an unusable $GPUFLEET_CA_FILE is an error on every call that needs it.
Result<TlsContext> DefaultClientContext();
// `gpufleet --ca-file F serve`: the scraper and the notifier trust F. Call before any client
// starts; an unusable file is an error here, at start.
Status SetDefaultClientOptions(const TlsClientOptions& options);

// The client options from a --ca-file flag, falling back to $GPUFLEET_CA_FILE.
TlsClientOptions ClientOptionsFromEnv(std::string ca_file, bool insecure_skip_verify);

struct TlsServerOptions {
  std::string cert_file;  // PEM: the certificate, then any intermediates
  std::string key_file;   // PEM private key
  std::string client_ca;  // when set, clients are asked for a certificate signed by it
  bool enabled() const { return !cert_file.empty(); }
};

// TLS 1.2 or newer with OpenSSL's default ciphers. Reads the files now: call again to reload.
Result<TlsContext> MakeServerContext(const TlsServerOptions& options);

// Whether a client context checks the server (false only with insecure_skip_verify).
bool Verifies(const TlsContext& context);

}  // namespace gpufleet::net
