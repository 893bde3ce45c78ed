#include "model/state_machine.h"

#include <string>

namespace gpufleet {

std::string_view ToString(NodeAction action) {
  switch (action) {
    case NodeAction::kCordon:
      return "cordon";
    case NodeAction::kUncordon:
      return "uncordon";
    case NodeAction::kDrain:
      return "drain";
    case NodeAction::kDrainDone:
      return "drain-done";
    case NodeAction::kMaintenance:
      return "maintenance";
    case NodeAction::kDecommission:
      return "decommission";
    case NodeAction::kRetire:
      return "retire";
  }
  return "unknown";
}

bool IsHealthState(NodeState s) {
  return s == NodeState::kReady || s == NodeState::kDegraded || s == NodeState::kUnhealthy;
}

bool IsAdminState(NodeState s) {
  switch (s) {
    case NodeState::kCordoned:
    case NodeState::kDraining:
    case NodeState::kDrained:
    case NodeState::kMaintenance:
    case NodeState::kDecommissioning:
    case NodeState::kRetired:
      return true;
    default:
      return false;
  }
}

namespace {
// Which states each action may start from (the node's effective state: its resume state while
// unreachable).
bool Allowed(NodeState from, NodeAction action) {
  bool active =
      IsHealthState(from) || from == NodeState::kJoining || from == NodeState::kProvisioning;
  switch (action) {
    case NodeAction::kCordon:
      return active;
    case NodeAction::kUncordon:
      return from == NodeState::kCordoned || from == NodeState::kDrained ||
             from == NodeState::kMaintenance;
    case NodeAction::kDrain:
      return active || from == NodeState::kCordoned;
    case NodeAction::kDrainDone:
      return from == NodeState::kDraining;
    case NodeAction::kMaintenance:
      return from == NodeState::kDrained || from == NodeState::kCordoned;
    case NodeAction::kDecommission:
      return from != NodeState::kRetired && from != NodeState::kDecommissioning;
    case NodeAction::kRetire:
      return from == NodeState::kDecommissioning;
  }
  return false;
}

NodeState Target(NodeAction action, NodeState health) {
  switch (action) {
    case NodeAction::kCordon:
      return NodeState::kCordoned;
    case NodeAction::kUncordon:
      return health;
    case NodeAction::kDrain:
      return NodeState::kDraining;
    case NodeAction::kDrainDone:
      return NodeState::kDrained;
    case NodeAction::kMaintenance:
      return NodeState::kMaintenance;
    case NodeAction::kDecommission:
      return NodeState::kDecommissioning;
    case NodeAction::kRetire:
      return NodeState::kRetired;
  }
  return health;
}
}  // namespace

Result<NodeStatus> ApplyAction(NodeStatus current, NodeAction action, NodeState health) {
  bool unreachable = current.state == NodeState::kUnreachable;
  NodeState effective = unreachable ? current.resume : current.state;
  if (!Allowed(effective, action)) {
    return MakeError(ErrorCode::kConflict, "cannot " + std::string(ToString(action)) +
                                               " a node that is " +
                                               std::string(ToString(effective)));
  }
  NodeState to = Target(action, health);
  if (unreachable && to != NodeState::kDecommissioning && to != NodeState::kRetired) {
    return NodeStatus{NodeState::kUnreachable, to};  // applies when the node returns
  }
  return NodeStatus{to, to};
}

NodeStatus OnHealth(NodeStatus current, NodeState health) {
  if (current.state == NodeState::kUnreachable) {
    if (!IsAdminState(current.resume)) current.resume = health;
    return current;
  }
  if (IsAdminState(current.state)) return current;
  return NodeStatus{health, health};
}

NodeStatus OnLost(NodeStatus current) {
  // A decommissioning node's agent going away is what decommissioning leads to: it stays
  // decommissioning (out of the fleet, deletable), not unreachable, which would bring it back
  // among the nodes that alerts, remote write and rollouts see.
  if (current.state == NodeState::kUnreachable || current.state == NodeState::kRetired ||
      current.state == NodeState::kProvisioning || current.state == NodeState::kDecommissioning) {
    return current;
  }
  return NodeStatus{NodeState::kUnreachable, current.state};
}

NodeStatus OnBack(NodeStatus current, NodeState health) {
  NodeState base = current.state == NodeState::kUnreachable ? current.resume : current.state;
  if (IsAdminState(base)) return NodeStatus{base, base};
  return NodeStatus{health, health};
}

}  // namespace gpufleet
