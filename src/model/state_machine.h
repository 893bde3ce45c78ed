#pragma once
// The node state machine (DESIGN.md): provisioning -> joining -> ready <-> degraded -> unhealthy;
// cordoned; draining -> drained -> maintenance; unreachable; decommissioning -> retired.
// Health states (ready/degraded/unhealthy) follow what the node reports; admin states
// (cordoned, draining, drained, maintenance, decommissioning, retired) are set by operators and
// survive health changes and outages. Pure functions; the caller records each change as an event.

#include "common/result.h"
#include "model/types.h"

namespace gpufleet {

enum class NodeAction {
  kCordon,
  kUncordon,
  kDrain,
  kDrainDone,
  kMaintenance,
  kDecommission,
  kRetire
};
std::string_view ToString(NodeAction action);

struct NodeStatus {
  NodeState state;
  NodeState resume;  // meaningful while state == kUnreachable
  bool operator==(const NodeStatus&) const = default;
};

bool IsHealthState(NodeState s);  // ready, degraded, unhealthy
bool IsAdminState(NodeState s);

// An operator action. `health` is what the node's own reports say (ready/degraded/unhealthy);
// it is where uncordon lands. A refused action is kConflict with the reason.
Result<NodeStatus> ApplyAction(NodeStatus current, NodeAction action, NodeState health);

// The node reported (or re-reported) its inventory and it was judged `health`.
NodeStatus OnHealth(NodeStatus current, NodeState health);

// Heartbeats stopped past the timeout: unreachable, remembering where to return; a node not in
// service (provisioning, decommissioning, retired) stays as it is.
NodeStatus OnLost(NodeStatus current);

// The agent is back; `health` is the verdict on what it reports now.
NodeStatus OnBack(NodeStatus current, NodeState health);

}  // namespace gpufleet
