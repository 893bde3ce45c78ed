#pragma once
// What rollout_service.cpp and node_actions.cpp share (internal to the lifecycle component).

#include <map>
#include <string>
#include <unordered_map>
#include <utility>

#include "lifecycle/rollout_service.h"

namespace gpufleet::lifecycle {

// What a tick knows of a node: read once, under the fleet's lock, for every rollout.
struct RolloutService::NodeView {
  NodeState state = NodeState::kReady;
  NodeState effective = NodeState::kReady;  // the resume state of an unreachable node
  bool connected = false, simulated = false;
  int64_t connected_ms = 0;
  int64_t state_since_ms = 0;
  std::string pool, cluster, reason;
  std::string version[3];  // by RolloutKind, for the kinds asked for
  int gpus = 0;
};

struct RolloutService::Snapshot {
  std::unordered_map<std::string, NodeView> nodes;
  std::map<std::string, int> pool_size, pool_down, cluster_size, cluster_down;
  std::map<std::string, Pool> pools;
  std::map<std::string, Cluster> clusters;
  std::map<std::string, int64_t> last_xid;
  std::map<std::string, std::string> alerting;
  std::map<std::string, std::pair<bool, std::string>> windows;  // by pool, this tick
};

}  // namespace gpufleet::lifecycle
