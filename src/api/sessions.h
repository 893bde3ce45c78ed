// The server's two WebSocket sessions, apart from its HTTP loop (server.cpp): an agent's
// connection (/api/v1/agent) and the dashboard's live stream (/api/v1/stream). Private to the
// API library: it brings in Beast.

#pragma once

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "net/stream.h"
#include "proto/agent_handler.h"
#include "proto/proto.h"
#include "store/store.h"

namespace gpufleet::api {

struct AgentConn;

// The live agent connections, by node: what SendToAgent reaches.
class AgentRegistry {
 public:
  // Queues a message for the node's agent; an error when its agent is not connected.
  Status Send(const std::string& node, const proto::Message& message);
  bool Has(const std::string& node);  // whether the node's agent is connected
  // Whether a frame from the node's agent has been read and waits to be handled.
  bool FrameWaiting(const std::string& node);
  // The node's new connection, replacing any older one.
  std::shared_ptr<AgentConn> Register(const std::string& node, boost::asio::any_io_executor ex);
  // Forgets `conn` if it is still the node's connection (a newer one may have replaced it).
  void Unregister(const std::string& node, const std::shared_ptr<AgentConn>& conn);

 private:
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<AgentConn>> conns_;
};

// The dashboard's live stream: what the controller publishes (one JSON object a cycle), kept
// for the stream connections to pick up. A connection that falls further behind gets the last
// kKeep only: each message is a whole summary, not a delta, so nothing is lost by skipping.
class EventHub {
 public:
  static constexpr size_t kKeep = 16;
  void Publish(std::string json);
  // The messages after `seq`, oldest first; returns the newest seq.
  uint64_t Since(uint64_t seq, std::vector<std::string>& out) const;

 private:
  mutable std::mutex mu_;
  std::deque<std::pair<uint64_t, std::string>> recent_;
  uint64_t seq_ = 0;
};

using UpgradeRequest = boost::beast::http::request<boost::beast::http::string_body>;

class Authenticator;  // context.h
class SignInLimiter;  // context.h
class HttpMetrics;    // http_metrics.h

// The failed sign-in limit of the HTTP routes, applied to the WebSocket hellos too: a dashboard
// stream's token and an agent's join token or node token (or a hello that is no hello) count
// against the same address. A valid credential always passes.
struct SignInGate {
  SignInLimiter& limiter;
  HttpMetrics& metrics;
  Clock& clock;
  // How long a WebSocket has, from its upgrade, to send its first message (the hello or the
  // stream's token), pings or not: the server's header deadline.
  int first_message_ms = 30'000;
  // Counts a refused sign-in from `remote`: 0, or the seconds until the address may try an
  // unknown credential again (counted as a refusal; the answer is then "too many").
  int64_t Failed(const std::string& remote);
  // "too many failed sign-ins from ADDRESS: try again in N s"
  static std::string Message(const std::string& remote, int64_t wait_s);
};

// WebSockets that have not signed in yet (no hello, no token), per source address: at most
// `limit` at once from one address, so connections that never say who they are cannot take
// the server's connection limit. Thread-safe.
class UnsignedConnections {
 public:
  explicit UnsignedConnections(int limit) : limit_(limit) {}
  // A slot for one connection from `remote`, released when the returned guard goes (or by its
  // Release()); an empty guard when the address already holds `limit`.
  class Slot {
   public:
    Slot() = default;
    Slot(UnsignedConnections* owner, std::string remote)
        : owner_(owner), remote_(std::move(remote)) {}
    Slot(Slot&& o) noexcept : owner_(std::exchange(o.owner_, nullptr)), remote_(o.remote_) {}
    Slot& operator=(Slot&& o) noexcept {
      Release();
      owner_ = std::exchange(o.owner_, nullptr);
      remote_ = o.remote_;
      return *this;
    }
    ~Slot() { Release(); }
    explicit operator bool() const { return owner_ != nullptr; }
    void Release();

   private:
    UnsignedConnections* owner_ = nullptr;
    std::string remote_;
  };
  Slot Acquire(const std::string& remote);
  int limit() const { return limit_; }

 private:
  const int limit_;
  std::mutex mu_;
  std::map<std::string, int> open_;  // guarded by mu_
};

// An agent's WebSocket from its hello until it closes: registered in `registry` while open,
// its messages handed to `agents`. The hello, which writes the node to the store, runs on
// `registrar` rather than on the I/O thread, so that a storm of registrations (a fleet that
// starts, a controller that restarts) does not hold up the heartbeats of the nodes already in;
// every later message is decoded and handled on `ingest`, so that the I/O threads stay free
// for the API however much telemetry arrives.
// `slot` is the connection's place among those not signed in, released once the hello is read.
boost::asio::awaitable<void> ServeAgent(net::Stream stream, UpgradeRequest req, std::string remote,
                                        proto::AgentHandler& agents, AgentRegistry& registry,
                                        SignInGate gate, UnsignedConnections::Slot slot,
                                        boost::asio::any_io_executor registrar,
                                        boost::asio::any_io_executor ingest);

// The dashboard's live stream, authenticated by its first message, then fed from `hub`.
boost::asio::awaitable<void> ServeStream(net::Stream stream, UpgradeRequest req, std::string remote,
                                         Authenticator& auth, const EventHub& hub, SignInGate gate,
                                         UnsignedConnections::Slot slot);

}  // namespace gpufleet::api
