#pragma once
// Versioned agent <-> controller messages, carried as JSON text frames over the WebSocket at
// /api/v1/agent. Every message has "v" (protocol version) and "type". Readers accept every
// version up to kProtoVersion and refuse newer ones with a clear error.
//
//   agent -> controller: hello (first frame), heartbeat, inventory (when GPUs change)
//   controller -> agent: welcome (reply to hello), error (then close)

#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/result.h"
#include "model/types.h"

namespace gpufleet::proto {

inline constexpr int kProtoVersion = 1;

struct Hello {
  std::string join_token;  // first join of a node into a pool
  std::string node_token;  // the credential returned in a previous Welcome
  NodeFacts facts;
  std::vector<Gpu> gpus;
  bool simulated = false;
};

struct Welcome {
  std::string node;
  std::string cluster;
  std::string pool;
  std::string node_token;  // set when newly issued; the agent keeps it for reconnects
  int heartbeat_interval_ms = 5000;
};

struct Heartbeat {
  int64_t seq = 0;
  int64_t time_ms = 0;
};

struct Inventory {
  std::vector<Gpu> gpus;
};

struct ErrorMessage {
  std::string code;
  std::string message;
};

using Message = std::variant<Hello, Welcome, Heartbeat, Inventory, ErrorMessage>;

std::string Encode(const Message& message);
Result<Message> Decode(std::string_view text);

}  // namespace gpufleet::proto
