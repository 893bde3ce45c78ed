#pragma once
// The controller's side of the agent protocol, as the transport (api's WebSocket endpoint) sees
// it. The fleet component implements it; the transport calls it from its registrar and ingest
// threads (never its I/O threads), so implementations are thread-safe.

#include <optional>
#include <string>

#include "common/result.h"
#include "proto/proto.h"

namespace gpufleet::proto {

class AgentHandler {
 public:
  virtual ~AgentHandler() = default;
  // A hello: registers (or re-attaches) the node. The error's message goes back to the agent.
  virtual Result<Welcome> OnHello(const Hello& hello, const std::string& remote) = 0;
  // Any later message from the registered node `node`; a returned message (an ack) is sent back.
  // A returned ErrorMessage also closes the connection: what the agent sent was not kept, and
  // it sends again what was not acknowledged when it reconnects.
  virtual std::optional<Message> OnMessage(const std::string& node, const Message& message) = 0;
  // The connection of `node` closed (the node may be back on a new one already).
  virtual void OnClosed(const std::string& node, uint64_t connection) = 0;
  // Ties the connection id to the node, so a late close of an old connection is ignored.
  virtual uint64_t OnConnected(const std::string& node) = 0;
};

}  // namespace gpufleet::proto
