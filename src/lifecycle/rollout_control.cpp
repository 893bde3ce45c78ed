// An operator's controls of a rollout (the transitions they make and the states they refuse),
// the name of its stage, and the command of a node's step.

#include "lifecycle/rollout_engine.h"

namespace gpufleet::lifecycle {

using P = NodeProgress;
using S = RolloutState;

Status Control(Rollout& r, std::string_view control, const std::string& actor, int64_t now) {
  auto refuse = [&](const std::string& why) {
    return MakeError(ErrorCode::kConflict, "cannot " + std::string(control) + " rollout " +
                                               std::to_string(r.id) + ": it is " +
                                               std::string(ToString(r.state)) +
                                               (why.empty() ? "" : " (" + why + ")"));
  };
  if (control == "pause") {
    if (r.state != S::kRunning && r.state != S::kWaitingWindow && r.state != S::kAwaitingApproval) {
      return refuse("");
    }
    r.state = S::kPaused;
    r.reason = "paused by " + actor + ": nodes in progress finish, no new one starts";
  } else if (control == "resume") {
    if (r.state != S::kPaused && r.state != S::kHalted)
      return refuse("only a paused or halted one");
    r.state = S::kRunning;
    r.reason = "resumed by " + actor;
  } else if (control == "approve") {
    if (r.state != S::kAwaitingApproval) return refuse("nothing waits for an approval");
    r.approved = r.current;
    r.state = S::kRunning;
    r.reason = "approved by " + actor;
  } else if (control == "abort") {
    if (r.Ended() || r.state == S::kRollingBack) return refuse("");
    r.state = S::kAborted;
    r.ended_ms = now;
    r.reason = "aborted by " + actor + ": nodes in progress finish their step";
    for (auto& n : r.nodes) {
      if (n.state == P::kPending) {
        n.state = P::kSkipped;
        n.message = "the rollout was aborted";
      }
    }
  } else if (control == "rollback") {
    if (r.state == S::kRolledBack || r.state == S::kRollingBack) return refuse("");
    r.state = S::kRollingBack;
    r.ended_ms = 0;
    r.reason = "rollback asked by " + actor;
  } else {
    return MakeError(ErrorCode::kInvalidArgument, "unknown control '" + std::string(control) +
                                                      "': pause, resume, abort, approve, rollback");
  }
  r.updated_ms = now;
  return {};
}

std::string StageName(const Rollout& r) {
  if (r.current < 0) return "test";
  if (r.current == 0) return "canary";
  return "batch " + std::to_string(r.current) + "/" + std::to_string(r.batches);
}

proto::Command StepCommand(const Rollout& r, const RolloutNode& n, RolloutStep step) {
  proto::Command cmd;
  cmd.timeout_ms = r.strategy.action_timeout_ms;
  switch (step) {
    case RolloutStep::kInstall:
      cmd.action = std::string(InstallAction(r.kind));
      cmd.args = {n.rollback ? n.from : n.to};
      if (!r.package.empty() && !n.rollback) cmd.args.push_back(r.package);
      break;
    case RolloutStep::kReboot:
      cmd.action = "reboot";
      break;
    case RolloutStep::kValidate:
      cmd.action = "validate";
      cmd.args = {n.to};
      break;
    case RolloutStep::kNone:
    case RolloutStep::kDrain:
      break;
  }
  return cmd;
}

}  // namespace gpufleet::lifecycle
