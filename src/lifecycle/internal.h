#pragma once
// What rollout_service.cpp, rollout_plan.cpp and node_actions.cpp share (internal to the
// lifecycle component).

#include <map>
#include <string>
#include <utility>

#include "lifecycle/rollout_engine.h"
#include "lifecycle/rollout_service.h"

namespace gpufleet::lifecycle {

// What a tick knows: the engine's facts, and the pools and clusters (their windows, their
// compatibility rules).
struct RolloutService::Snapshot : RolloutFacts {
  std::map<std::string, Pool> pools;
  std::map<std::string, Cluster> clusters;
  std::map<std::string, std::pair<bool, std::string>> windows;  // by pool, this tick
};

inline bool InService(NodeState s) { return s == NodeState::kReady || s == NodeState::kDegraded; }
// Counted in a pool's size: not retired or on the way out.
inline bool Counted(NodeState s) {
  return s != NodeState::kRetired && s != NodeState::kDecommissioning;
}

}  // namespace gpufleet::lifecycle
