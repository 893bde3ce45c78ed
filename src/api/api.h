#pragma once
// The api component's public header: the REST API under /api/v1, the agent WebSocket at
// /api/v1/agent, /healthz and the dashboard's static files, on one listening socket.

#include <functional>
#include <memory>
#include <string>

#include "common/result.h"
#include "net/tls.h"
#include "runtime/services.h"

namespace gpufleet::proto {
struct Command;
}
namespace gpufleet::store {
class TokenStore;
}

namespace gpufleet::api {

struct ApiOptions {
  std::string listen = "127.0.0.1:8080";  // host:port; port 0 picks a free one
  size_t max_body_bytes = 4 << 20;        // larger bodies get 413
  int threads = 2;
  // Threads that decode and store agents' frames, apart from the I/O threads; 0: one per core,
  // at least 2.
  int ingest_threads = 0;
  // HTTPS and WSS on the one port when set; re-read by ReloadTls().
  net::TlsServerOptions tls;
  // Plain HTTP on an address that is not loopback, which Start() otherwise refuses.
  bool insecure_plaintext = false;
  // Connections beyond this many are closed as soon as they are accepted.
  int max_connections = 16384;
  // A connection must send a request's headers (and, for TLS, its handshake) within this long
  // of opening or of its previous answer, else it is closed: idle keep-alive connections and
  // clients that send nothing do not hold sockets. The body then has body_timeout_ms.
  int header_timeout_ms = 30'000;
  int body_timeout_ms = 60'000;
};

// Owns its I/O threads. Start() binds and serves; Stop() closes and joins. Thread-safe.
class ApiServer {
 public:
  // What it serves: the services all outlive it.
  ApiServer(ApiOptions options, const runtime::Services& services);
  ~ApiServer();
  // Returns the bound address, "127.0.0.1:43121". Refuses plain HTTP on an address that is
  // not loopback unless ApiOptions::insecure_plaintext.
  Result<std::string> Start();
  // Re-reads the TLS certificate and key (SIGHUP): new connections get them, open ones keep
  // theirs. On an error the old ones stay in use.
  Status ReloadTls();
  bool tls() const;
  // Writes the API tokens' last-use times gathered in memory (the controller does it each
  // minute and at stop; a token list does it first).
  void FlushTokenUse();
  void Stop();
  // The API's p99 request duration since the last call, in seconds; NaN without requests.
  double TakeRecentP99();
  // A command to a node's agent over its live connection; kUnavailable when not connected.
  // (The command bus's transport: everything else sends through the bus.)
  Status SendToAgent(const std::string& node, const proto::Command& command);
  bool HasAgent(const std::string& node);  // whether the node's agent is connected here
  // An event for the dashboard's live stream (/api/v1/stream): one JSON object, sent as it is
  // to every connected browser.
  void Publish(std::string json);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Writes a new admin token to `path` (mode 0600) when the store holds no API token yet.
// Returns whether it wrote one.
Result<bool> BootstrapAdminToken(store::TokenStore& store, Clock& clock, const std::string& path);

}  // namespace gpufleet::api
