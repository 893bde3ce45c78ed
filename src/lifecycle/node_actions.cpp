// Operators' node actions: reboot, reset a GPU, maintenance (enter, leave), decommission. Each
// first drains the node the way a drain does (its jobs end, or are requeued at the drain
// timeout), then asks its agent, then puts it back as it was.

#include <spdlog/spdlog.h>

#include "common/strings.h"
#include "lifecycle/internal.h"
#include "lifecycle/rollout_service.h"

namespace gpufleet::lifecycle {
namespace {

constexpr int64_t kOperationTimeoutMs = 30 * 60'000;  // an answer, or the node back

bool Active(const NodeOperation& op) {
  return op.state == "waiting_for_jobs" || op.state == "running";
}

}  // namespace

Result<NodeOperation> RolloutService::StartAction(const std::string& name,
                                                  const NodeActionRequest& req,
                                                  const std::string& actor) {
  auto node = fleet_.GetNode(name);
  if (!node.ok()) return node.error();
  const std::string& a = req.action;
  if (a != "reboot" && a != "reset-gpu" && a != "maintenance" && a != "decommission") {
    return MakeError(ErrorCode::kInvalidArgument,
                     "action: '" + a + "' must be reboot, reset-gpu, maintenance or decommission");
  }
  if (a == "reset-gpu") {
    bool known = false;
    for (const auto& g : node->gpus) known |= g.index == req.gpu;
    if (req.gpu < 0 || !known) {
      return MakeError(ErrorCode::kInvalidArgument, "gpu: node " + name + " has no GPU " +
                                                        std::to_string(req.gpu) + " (it has " +
                                                        std::to_string(node->gpus.size()) + ")");
    }
  }
  if (a == "maintenance" && req.mode != "enter" && req.mode != "leave") {
    return MakeError(ErrorCode::kInvalidArgument, "mode: must be enter or leave");
  }
  NodeState s = node->state == NodeState::kUnreachable ? node->resume_state : node->state;
  if ((a == "reboot" || a == "reset-gpu") && !node->connected) {
    return MakeError(ErrorCode::kConflict,
                     "node " + name + " is not connected: its agent cannot be asked to " + a);
  }
  if (s == NodeState::kRetired || s == NodeState::kDecommissioning) {
    return MakeError(ErrorCode::kConflict, "node " + name + " is " + std::string(ToString(s)));
  }
  int64_t now = clock_->NowMs();
  std::lock_guard lock(mu_);
  if (auto h = node_holder_.find(name); h != node_holder_.end()) {
    return MakeError(ErrorCode::kConflict,
                     "node " + name + " is being updated by rollout " + std::to_string(h->second));
  }
  for (const auto& [id, op] : operations_) {
    if (op.node == name && Active(op)) {
      return MakeError(ErrorCode::kConflict, "node " + name + " is already in operation " +
                                                 std::to_string(id) + " (" + op.action + ")");
    }
  }
  NodeOperation op;
  op.id = next_operation_++;
  op.node = name;
  op.action = a;
  op.gpu = req.gpu;
  op.mode = req.mode;
  op.actor = actor;
  op.created_ms = now;
  op.resume = std::string(ToString(s));
  std::string who = "operation " + std::to_string(op.id) + " by " + actor;
  if (a == "maintenance" && req.mode == "leave") {
    if (s != NodeState::kMaintenance) {
      return MakeError(ErrorCode::kConflict,
                       "node " + name + " is " + std::string(ToString(s)) + ", not in maintenance");
    }
    auto done = fleet_.Act(name, NodeAction::kUncordon, who);
    if (!done.ok()) return done.error();
    op.state = "succeeded";
    op.message = "left maintenance: " + std::string(ToString(done->state));
    op.ended_ms = now;
  } else {
    bool out = s == NodeState::kDrained || s == NodeState::kMaintenance;
    if (a == "maintenance" && s == NodeState::kMaintenance) {
      return MakeError(ErrorCode::kConflict, "node " + name + " is already in maintenance");
    }
    if (!out) {
      auto drained = fleet_.Act(name, NodeAction::kDrain, who);
      if (!drained.ok()) return drained.error();
    }
    op.step = "drain";
    op.step_ms = now;
    op.message = "draining: waiting for its jobs";
  }
  operations_[op.id] = op;
  spdlog::info("node {}: {} {} by {}", name, a, a == "maintenance" ? req.mode : "", actor);
  return op;
}

std::vector<NodeOperation> RolloutService::Operations(const std::string& node) const {
  std::lock_guard lock(mu_);
  std::vector<NodeOperation> out;
  for (auto it = operations_.rbegin(); it != operations_.rend(); ++it) {
    if (node.empty() || it->second.node == node) out.push_back(it->second);
  }
  return out;
}

// Caller holds mu_.
void RolloutService::AdvanceOperations(Snapshot& snap, int64_t now) {
  for (auto& entry : operations_) {
    const auto id = entry.first;  // not a structured binding: lambdas below capture them
    NodeOperation& op = entry.second;
    if (!Active(op)) continue;
    std::string who = "operation " + std::to_string(id) + " by " + op.actor;
    auto end = [&](bool ok, const std::string& message) {
      op.state = ok ? "succeeded" : "failed";
      op.message = message;
      op.step.clear();
      op.ended_ms = now;
      Audit(op.actor,
            op.action + (op.action == "reset-gpu" ? " GPU " + std::to_string(op.gpu) : "") +
                (op.mode.empty() ? "" : " " + op.mode) + " (operation " + std::to_string(id) + ")",
            "node/" + op.node, ok ? 200 : 500, message);
      if (ok) {
        spdlog::info("node {}: {} done: {}", op.node, op.action, Printable(message, 400));
      } else {
        spdlog::error("node {}: {} failed: {}", op.node, op.action, Printable(message, 400));
      }
    };
    auto restore = [&] {
      if (auto n = fleet_.GetNode(op.node); n.ok()) {
        NodeState s = n->state == NodeState::kUnreachable ? n->resume_state : n->state;
        if (s == NodeState::kDrained) (void)fleet_.Act(op.node, NodeAction::kUncordon, who);
        if (op.resume == "cordoned") (void)fleet_.Act(op.node, NodeAction::kCordon, who);
        if (op.resume == "maintenance") (void)fleet_.Act(op.node, NodeAction::kMaintenance, who);
      }
    };
    auto v = snap.nodes.find(op.node);
    if (v == snap.nodes.end()) {
      end(false, "the node is gone");
      continue;
    }
    const NodeFacts& view = v->second;
    if (op.step == "drain") {
      bool out = view.effective == NodeState::kDrained || view.effective == NodeState::kMaintenance;
      if (!out) {
        if (view.effective != NodeState::kDraining) end(false, "the drain was undone");
        continue;  // the job service finishes the drain, or requeues at its timeout
      }
      op.state = "running";
      if (op.action == "maintenance") {
        if (view.effective != NodeState::kMaintenance) {
          auto done = fleet_.Act(op.node, NodeAction::kMaintenance, who);
          if (!done.ok()) {
            end(false, done.error().message);
            continue;
          }
        }
        end(true, "in maintenance");
        continue;
      }
      if (op.action == "decommission") {
        auto done = fleet_.Act(op.node, NodeAction::kDecommission, who);
        end(done.ok(),
            done.ok() ? "decommissioning: delete it once it is retired" : done.error().message);
        continue;
      }
      proto::Command cmd;
      cmd.id = hooks_.commands ? hooks_.commands->Issue(this) : 0;
      cmd.action = op.action;
      cmd.gpu = std::max(0, op.gpu);
      if (op.action == "reset-gpu") cmd.args = {std::to_string(op.gpu)};
      cmd.timeout_ms = kOperationTimeoutMs;
      op.command = cmd.id;
      op.step = op.action == "reboot" ? "reboot" : "act";
      op.step_ms = now;
      op.message = op.action == "reboot" ? "rebooting" : "resetting GPU " + std::to_string(op.gpu);
      Status sent = hooks_.commands ? hooks_.commands->Send(op.node, cmd)
                                    : MakeError(ErrorCode::kUnavailable, "no agent connections");
      if (!sent.ok()) {
        end(false, "cannot reach its agent: " + sent.error().message + " (left drained)");
      }
      continue;
    }
    if (op.step == "act") {
      if (op.result == "ok") {
        if (op.action == "reset-gpu" && hooks_.gpu_reset) hooks_.gpu_reset(op.node, op.gpu);
        restore();
        end(true, "GPU " + std::to_string(op.gpu) + " reset; back " + op.resume);
      } else if (!op.result.empty()) {
        end(false, op.action + " failed: " + op.result + " (left drained)");
      } else if (now - op.step_ms > kOperationTimeoutMs) {
        end(false, "no answer from its agent within 30m (left drained)");
      }
      continue;
    }
    if (op.step == "reboot") {
      if (!op.result.empty() && op.result != "ok") {
        end(false, "reboot failed: " + op.result + " (left drained)");
      } else if (view.connected && view.connected_ms > op.step_ms) {
        if (hooks_.gpu_reset) hooks_.gpu_reset(op.node, -1);  // every GPU came back reset
        restore();
        end(true, "rebooted: its agent is back; back " + op.resume);
      } else if (now - op.step_ms > kOperationTimeoutMs) {
        end(false, "did not come back within 30m (left drained)");
      }
    }
  }
  // The last 200 ended operations are kept.
  size_t ended = 0;
  for (auto it = operations_.rbegin(); it != operations_.rend();) {
    if (!Active(it->second) && ++ended > 200) {
      it = decltype(it)(operations_.erase(std::next(it).base()));
    } else {
      ++it;
    }
  }
}

}  // namespace gpufleet::lifecycle
