#include "lifecycle/rollout_engine.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "common/clock.h"
#include "common/strings.h"

namespace gpufleet::lifecycle {
namespace {

using P = NodeProgress;
using S = RolloutState;
using Events = std::vector<store::RolloutEventRecord>;

bool InService(NodeState s) { return s == NodeState::kReady || s == NodeState::kDegraded; }
bool Counted(NodeState s) { return s != NodeState::kRetired && s != NodeState::kDecommissioning; }

std::string Duration(int64_t ms) {
  if (ms >= 3'600'000 && ms % 3'600'000 == 0) return std::to_string(ms / 3'600'000) + "h";
  if (ms >= 60'000 && ms % 60'000 == 0) return std::to_string(ms / 60'000) + "m";
  return std::to_string(ms / 1000) + "s";
}

std::string Text(std::string_view v) { return std::string(v); }

// One tick of one rollout.
class Engine {
 public:
  Engine(Rollout& r, RolloutFacts& facts, int64_t now, RolloutEffects& fx, Events& events)
      : r_(r), f_(facts), now_(now), fx_(fx), events_(events), actor_("rollout " + Str(r.id)) {}

  void Run();

 private:
  static std::string Str(int64_t v) { return std::to_string(v); }
  const std::string& Version(const NodeFacts& v) const {
    return v.version[static_cast<size_t>(r_.kind)];
  }
  void Event(const std::string& node, const std::string& what, const std::string& text) {
    events_.push_back({0, r_.id, now_, node, what, text});
  }
  int BusyCount() const {
    return static_cast<int>(std::count_if(r_.nodes.begin(), r_.nodes.end(),
                                          [](const RolloutNode& n) { return n.Busy(); }));
  }
  // The room max_unavailable leaves in the node's pool and cluster.
  bool Room(const RolloutNode& n) const {
    return r_.strategy.max_unavailable.Of(f_.pool_size[n.pool]) - f_.pool_down[n.pool] > 0 &&
           r_.strategy.max_unavailable.Of(f_.cluster_size[n.cluster]) - f_.cluster_down[n.cluster] >
               0;
  }

  void StepNode(size_t i);
  void StepDrain(size_t i, const NodeFacts& v);
  void AfterVersion(size_t i, const NodeFacts& v);
  bool Begin(size_t i);
  bool Send(size_t i, RolloutStep step, const NodeFacts& v);
  void AskAgain(size_t i, const NodeFacts& v);
  void Fail(RolloutNode& n, const std::string& why);
  void Restore(RolloutNode& n);
  void Gates();
  std::string GateXid(const RolloutNode& n);
  void Threshold();
  void Stages();
  bool NextStage();  // false: held (confidence, approval)
  void StartNodes();
  void Rollback();

  Rollout& r_;
  RolloutFacts& f_;
  const int64_t now_;
  RolloutEffects& fx_;
  Events& events_;
  const std::string actor_;
  // The gates' count of the nodes not updated, by pool: with XIDs since the rollout began, all.
  std::optional<std::map<std::string, std::pair<int, int>>> pool_xids_;
};

void Engine::Run() {
  for (size_t i = 0; i < r_.nodes.size(); ++i) {
    if (r_.nodes[i].Busy()) StepNode(i);
  }
  if (r_.state == S::kRunning || r_.state == S::kWaitingWindow ||
      r_.state == S::kAwaitingApproval) {
    Gates();
    Threshold();
  }
  if (r_.state == S::kRunning || r_.state == S::kWaitingWindow) Stages();
  if (r_.state == S::kRollingBack) Rollback();
  if (r_.state == S::kAborted && BusyCount() == 0) r_.stage = "";
}

// A node in a step: its drain finished, its command answered, it came back, or time ran out.
void Engine::StepNode(size_t i) {
  RolloutNode& n = r_.nodes[i];
  auto it = f_.nodes.find(n.node);
  if (it == f_.nodes.end()) return Fail(n, "the node is gone");
  const NodeFacts& v = it->second;
  const std::string& wanted = n.rollback ? n.from : n.to;
  const std::string& running = Version(v);
  const std::string action(InstallAction(r_.kind));
  bool back = v.connected && v.connected_ms > n.step_ms;  // reconnected since the step began
  bool late = now_ - n.step_ms > r_.strategy.action_timeout_ms + 60'000;
  switch (n.step) {
    case RolloutStep::kNone:
      return;
    case RolloutStep::kDrain:
      return StepDrain(i, v);
    case RolloutStep::kInstall:
      if (n.result == "ok") {
        if (!n.rollback) n.state = P::kRebooting;
        Send(i, RolloutStep::kReboot, v);
      } else if (!n.result.empty()) {
        Fail(n, action + " failed: " + n.result);
      } else if (back && running == wanted) {
        AfterVersion(i, v);  // answered while this controller was away, and rebooted
      } else if (back && fx_.AskedAgain(n.command) < v.connected_ms) {
        AskAgain(i, v);
      } else if (late) {
        Fail(n, "no answer to " + action + " within " + Duration(r_.strategy.action_timeout_ms));
      }
      return;
    case RolloutStep::kReboot:
      if (!n.result.empty() && n.result != "ok") {
        Fail(n, "reboot failed: " + n.result);
      } else if (back && running == wanted) {
        if (!n.rollback) n.state = P::kValidating;
        AfterVersion(i, v);
      } else if (back) {
        Fail(n, "came back running " + (running.empty() ? "an unknown version" : running) +
                    ", not " + wanted);
      } else if (now_ - n.step_ms > r_.strategy.boot_timeout_ms) {
        Fail(n, "did not come back reporting " + wanted + " within " +
                    Duration(r_.strategy.boot_timeout_ms));
      }
      return;
    case RolloutStep::kValidate:
      if (n.result == "ok") {
        Restore(n);
      } else if (!n.result.empty()) {
        Fail(n, "validation failed: " + n.result);
      } else if (back && fx_.AskedAgain(n.command) < v.connected_ms) {
        AskAgain(i, v);
      } else if (late) {
        Fail(n, "no answer to validate within " + Duration(r_.strategy.action_timeout_ms));
      }
      return;
  }
}

void Engine::StepDrain(size_t i, const NodeFacts& v) {
  RolloutNode& n = r_.nodes[i];
  const std::string& wanted = n.rollback ? n.from : n.to;
  if (v.effective == NodeState::kDrained || v.effective == NodeState::kMaintenance) {
    if (Version(v) == wanted) return Restore(n);  // nothing to do: it runs it already
    n.state = n.rollback ? P::kRollingBack : P::kInstalling;
    Send(i, RolloutStep::kInstall, v);
  } else if (now_ - n.step_ms > r_.strategy.drain_timeout_ms + 5 * 60'000) {
    Fail(n,
         "its drain did not finish within " + Duration(r_.strategy.drain_timeout_ms + 5 * 60'000));
  }
}

// The node runs the wanted version: the test nodes validate it, the others are done.
void Engine::AfterVersion(size_t i, const NodeFacts& v) {
  RolloutNode& n = r_.nodes[i];
  if (!n.rollback && n.stage < 0 && r_.strategy.validate) {
    Send(i, RolloutStep::kValidate, v);
  } else {
    Restore(n);
  }
}

bool Engine::Send(size_t i, RolloutStep step, const NodeFacts& v) {
  RolloutNode& n = r_.nodes[i];
  // A controller that just started has not heard from its agents yet: one not connected in
  // the first minute after the load is waited for (the step stays, so the next tick sends
  // again) rather than failed. Later, a node that cannot be reached fails at once.
  if (!v.connected &&
      now_ - f_.loaded_ms < std::min<int64_t>(kReconnectGraceMs, r_.strategy.boot_timeout_ms)) {
    n.message = "waits for its agent to reconnect to this controller";
    return false;
  }
  proto::Command cmd = StepCommand(r_, n, step);
  cmd.id = fx_.NewCommand();
  std::string what = cmd.action + (cmd.args.empty() ? "" : " " + cmd.args[0]);
  n.command = cmd.id;
  n.result.clear();
  n.step = step;
  n.step_ms = now_;
  n.message = (n.rollback ? "rollback: " : "") + what;  // what it does now
  r_.updated_ms = now_;
  fx_.Save(r_, i);
  Status sent =
      cmd.id ? fx_.Send(r_, i, v, cmd) : MakeError(ErrorCode::kUnavailable, "no agent connections");
  Event(n.node, Text(ToString(step)), what + (sent.ok() ? "" : ": " + sent.error().message));
  if (!sent.ok()) {
    Fail(n, "cannot reach its agent for " + cmd.action + ": " + sent.error().message);
    return false;
  }
  return true;
}

// The agent reconnected during an install or validation: its answer may have been lost with the
// old connection, so the command goes again under its id, once per connection. The agent
// answers one it ran from its record, one it runs when done: nothing runs twice.
void Engine::AskAgain(size_t i, const NodeFacts& v) {
  RolloutNode& n = r_.nodes[i];
  proto::Command cmd = StepCommand(r_, n, n.step);
  cmd.id = n.command;
  std::string what = cmd.action + (cmd.args.empty() ? "" : " " + cmd.args[0]);
  Status sent = fx_.Send(r_, i, v, cmd);
  if (!sent.ok()) {  // tried again on the next tick, without an event each time
    spdlog::debug("rollout {}: {} of node {} not sent again: {}", r_.id, what, n.node,
                  sent.error().message);
    return;
  }
  fx_.SetAskedAgain(n.command, v.connected_ms);
  Event(n.node, Text(ToString(n.step)), what + ": asked again (its agent reconnected)");
}

void Engine::Fail(RolloutNode& n, const std::string& why) {
  n.state = P::kFailed;
  n.message = (n.rollback ? "rollback: " : "") + why;
  n.step = RolloutStep::kNone;
  n.ended_ms = now_;
  f_.holders.erase(n.node);
  // Set aside: out of the rollout. One that still runs what it ran before (its install failed,
  // say) goes back to work as it was; one that changed stays out for an operator.
  if (!n.rollback && !n.from.empty()) {
    auto live = fx_.Live(n.node, r_.kind);
    if (live && live->connected && live->running == n.from &&
        (live->state == NodeState::kDrained || live->state == NodeState::kDraining) &&
        fx_.Act(n.node, NodeAction::kUncordon, actor_).ok()) {
      if (n.resume == "cordoned") (void)fx_.Act(n.node, NodeAction::kCordon, actor_);
      n.message += " (it still runs " + n.from + ": back in service)";
    }
  }
  Event(n.node, "failed", n.message);
  spdlog::error("rollout {}: node {} failed: {}", r_.id, n.node, Printable(n.message, 400));
}

// Done with the node: back in service as it was before the rollout took it.
void Engine::Restore(RolloutNode& n) {
  if (auto live = fx_.Live(n.node, r_.kind)) {
    NodeState s = live->state == NodeState::kUnreachable ? live->resume_state : live->state;
    if (s == NodeState::kDrained || s == NodeState::kMaintenance || s == NodeState::kCordoned) {
      if (auto done = fx_.Act(n.node, NodeAction::kUncordon, actor_); !done.ok()) {
        spdlog::warn("rollout {}: uncordon {}: {}", r_.id, n.node, done.error().message);
      }
    }
    if (n.resume == "cordoned") (void)fx_.Act(n.node, NodeAction::kCordon, actor_);
  }
  n.state = n.rollback ? P::kRolledBack : P::kUpdated;
  n.message = n.rollback ? "back on " + n.from : "runs " + n.to;
  n.step = RolloutStep::kNone;
  n.result.clear();
  n.ended_ms = now_;
  f_.holders.erase(n.node);
  Event(n.node, Text(ToString(n.state)), n.message);
}

// Takes a pending node: drains it (or finds it drained). False when it cannot start now.
bool Engine::Begin(size_t i) {
  RolloutNode& n = r_.nodes[i];
  auto v = f_.nodes.find(n.node);
  if (v == f_.nodes.end()) {
    n.state = P::kSkipped;
    n.message = "the node is gone";
    return false;
  }
  const std::string running = Version(v->second);
  if (!n.rollback) {
    if (running == n.to) {
      n.state = P::kUpdated;
      n.message = "already runs " + n.to;
      n.started_ms = n.ended_ms = now_;
      Event(n.node, "updated", n.message);
      return false;
    }
    if (running.empty() || running == "mixed") {
      Fail(n, running.empty() ? "cannot tell which version it runs"
                              : "its GPUs or NICs run different versions");
      return false;
    }
    n.from = running;
  }
  if (auto h = f_.holders.find(n.node); h != f_.holders.end() && h->second != r_.id) {
    n.message = "waits for rollout " + Str(h->second) + ", which is updating it";
    return false;
  }
  if (auto op = f_.operations.find(n.node); op != f_.operations.end()) {
    n.message = "waits for " + op->second;
    return false;
  }
  // The node's state now, not the tick's facts: a node restored earlier in this tick (its
  // update just finished, and the rollout now rolls it back) was uncordoned since.
  if (auto live = fx_.Live(n.node, r_.kind)) {
    v->second.state = live->state;
    v->second.effective = live->state == NodeState::kUnreachable ? live->resume_state : live->state;
  }
  NodeState s = v->second.effective;
  bool out = s == NodeState::kDrained || s == NodeState::kMaintenance;
  bool jobs = !out && fx_.RunsJobs(n.node);
  if (jobs && r_.strategy.busy == "skip") {
    n.message = "runs jobs: left for later (on_busy: skip)";
    return false;
  }
  if (!n.rollback) n.resume = Text(ToString(s));  // a rollback puts it back as it was
  n.started_ms = now_;
  n.state = n.rollback ? P::kRollingBack : P::kDraining;
  n.step = RolloutStep::kDrain;
  n.step_ms = now_;
  n.result.clear();
  n.message = n.rollback ? "putting " + n.from + " back" : "draining";
  // A node whose jobs run on waits for them, up to the drain timeout: the rollout says so.
  if (jobs && !n.rollback) {
    n.message = "draining: waiting for its jobs to end (requeued after " +
                Duration(r_.strategy.drain_timeout_ms) + ")";
  }
  f_.holders[n.node] = r_.id;
  if (!out) {
    fx_.DrainTimeout(n.node, r_.strategy.drain_timeout_ms);
    if (auto drained = fx_.Act(n.node, NodeAction::kDrain, actor_); !drained.ok()) {
      Fail(n, "drain refused: " + drained.error().message);
      return false;
    }
  }
  if (InService(v->second.state)) {
    ++f_.pool_down[n.pool];
    ++f_.cluster_down[n.cluster];
  }
  v->second.state = v->second.effective = out ? s : NodeState::kDraining;
  Event(n.node, "drain", n.message);
  return true;
}

// The gates on the updated nodes: the health model's verdict, XIDs since the update (unless the
// rest of the pool has them as much), alerts firing, each against the node alone. A node that
// fails one is cordoned and counts as failed.
void Engine::Gates() {
  for (auto& n : r_.nodes) {
    if (n.state != P::kUpdated || n.rollback || n.ended_ms == 0) continue;
    auto v = f_.nodes.find(n.node);
    if (v == f_.nodes.end()) continue;
    std::string why;
    if (v->second.state == NodeState::kUnhealthy) {
      why = "unhealthy since its update: " + v->second.reason;
    } else if (auto x = f_.last_xid.find(n.node);
               x != f_.last_xid.end() && x->second > n.ended_ms) {
      why = GateXid(n);
    } else if (auto a = f_.alerting.find(n.node); a != f_.alerting.end()) {
      why = "alert " + a->second + " firing since its update";
    }
    if (why.empty()) continue;
    (void)fx_.Act(n.node, NodeAction::kCordon, actor_);
    n.rollback = false;
    Fail(n, why);
  }
}

// An XID on an updated node fails it unless half the rest of its pool had XIDs too since the
// rollout began (then the version is not what causes them).
std::string Engine::GateXid(const RolloutNode& n) {
  if (!pool_xids_) {
    std::set<std::string> updated;
    for (const auto& m : r_.nodes) {
      if (m.state == P::kUpdated || m.state == P::kFailed) updated.insert(m.node);
    }
    auto& pools = pool_xids_.emplace();
    for (const auto& [name, view] : f_.nodes) {
      if (updated.count(name) || !Counted(view.state)) continue;
      auto& [with, all] = pools[view.pool];
      ++all;
      auto x = f_.last_xid.find(name);
      with += x != f_.last_xid.end() && x->second > r_.started_ms;
    }
  }
  auto [with, all] = (*pool_xids_)[n.pool];
  if (all != 0 && with * 2 >= all) return "";
  return "XID after its update (the rest of pool " + n.pool + ": " + Str(with) + " of " + Str(all) +
         " nodes with XIDs since the rollout began)";
}

// The failure threshold (or a failed test stage) halts the rollout, or rolls it back.
void Engine::Threshold() {
  int failed = 0;
  std::string first;
  bool test_failed = false;
  for (const auto& n : r_.nodes) {
    if (n.state == P::kFailed && !n.rollback) {
      if (first.empty()) first = n.node + ": " + n.message;
      ++failed;
    }
    test_failed |= n.stage < 0 && n.state == P::kFailed;
  }
  int limit = r_.strategy.max_failed_nodes.Of(static_cast<int>(r_.nodes.size()));
  if (failed < limit && !test_failed) return;
  r_.reason = (test_failed ? std::string("the test stage failed")
                           : Str(failed) + " node(s) failed (max_failed_nodes " +
                                 r_.strategy.max_failed_nodes.Text() + ")") +
              "; first: " + first;
  r_.state = r_.strategy.rollback == "automatic" ? S::kRollingBack : S::kHalted;
  if (r_.state == S::kHalted) r_.reason += "; roll back or resume it";
  Event("", "halted", r_.reason);
  spdlog::error("rollout {} halted: {}", r_.id, r_.reason);
}

// Through the stages: the one being worked starts its pending nodes; a finished one hands over
// to the next after the confidence period (the canaries) and an approval where asked.
void Engine::Stages() {
  if (!NextStage()) return;
  if (r_.current > r_.batches) {
    int failed =
        static_cast<int>(std::count_if(r_.nodes.begin(), r_.nodes.end(),
                                       [](const RolloutNode& n) { return n.state == P::kFailed; }));
    r_.state = S::kCompleted;
    r_.stage = "";
    r_.ended_ms = now_;
    r_.reason = failed ? Str(failed) + " node(s) failed and were set aside"
                       : "every node runs " + r_.target;
    Event("", "completed", r_.reason);
    spdlog::info("rollout {} completed: {}", r_.id, r_.reason);
    return;
  }
  StartNodes();
}

bool Engine::NextStage() {
  auto has_stage = [&](int s) {
    return std::any_of(r_.nodes.begin(), r_.nodes.end(),
                       [s](const RolloutNode& n) { return n.stage == s; });
  };
  auto stage_done = [&](int s) {
    return std::none_of(r_.nodes.begin(), r_.nodes.end(),
                        [s](const RolloutNode& n) { return n.stage == s && !n.Done(); });
  };
  while (r_.current <= r_.batches) {
    if (!has_stage(r_.current)) {
      ++r_.current;
      continue;
    }
    if (!stage_done(r_.current)) return true;
    if (r_.current == 0 && r_.strategy.confidence_ms > 0) {
      if (r_.confidence_until_ms == 0) {
        r_.confidence_until_ms = now_ + r_.strategy.confidence_ms;
        Event("", "confidence",
              "the canaries run " + r_.target + ": watching them for " +
                  Duration(r_.strategy.confidence_ms));
      }
      if (now_ < r_.confidence_until_ms) {
        r_.stage = "confidence";
        r_.reason = "confidence period: watching the updated nodes until " +
                    FormatTime(r_.confidence_until_ms);
        return false;
      }
    }
    bool more = std::any_of(r_.nodes.begin(), r_.nodes.end(),
                            [&](const RolloutNode& n) { return n.stage > r_.current; });
    if (r_.strategy.approve_between_stages && r_.current <= 0 && r_.approved < r_.current && more) {
      r_.state = S::kAwaitingApproval;
      r_.reason = "the " + StageName(r_) + " stage passed: approve to go on";
      Event("", "awaiting_approval", r_.reason);
      return false;
    }
    ++r_.current;
    if (r_.current <= r_.batches && has_stage(r_.current)) {
      Event("", "stage", "stage " + StageName(r_) + " begins");
    }
  }
  return true;
}

// Starts the stage's pending nodes that the windows and max_unavailable allow.
void Engine::StartNodes() {
  r_.stage = StageName(r_);
  int started = 0, closed = 0;
  std::string window_why, room_why;
  for (size_t i = 0; i < r_.nodes.size(); ++i) {
    RolloutNode& n = r_.nodes[i];
    if (n.stage != r_.current || n.state != P::kPending) continue;
    auto v = f_.nodes.find(n.node);
    if (v == f_.nodes.end() || !Counted(v->second.state)) {
      n.state = P::kSkipped;
      n.message = "the node is gone or retired";
      continue;
    }
    if (!v->second.connected) {
      // Waited for (a controller that restarted sees its agents come back one by one); one
      // unreachable for longer than boot_timeout is left for another rollout.
      if (v->second.state == NodeState::kUnreachable &&
          now_ - v->second.state_since_ms > r_.strategy.boot_timeout_ms) {
        n.state = P::kSkipped;
        n.message = "unreachable for more than " + Duration(r_.strategy.boot_timeout_ms) +
                    " when its turn came";
        n.ended_ms = now_;
        Event(n.node, "skipped", n.message);
      } else {
        n.message = "waiting for its agent to connect";
      }
      continue;
    }
    if (r_.strategy.RespectsWindows(r_.kind) && !fx_.WindowOpen(n.pool, now_, &window_why)) {
      ++closed;
      continue;
    }
    if (InService(v->second.state) && !Room(n)) {
      bool pool_full =
          r_.strategy.max_unavailable.Of(f_.pool_size[n.pool]) - f_.pool_down[n.pool] <= 0;
      room_why = (pool_full ? "pool " + n.pool : "cluster " + n.cluster) + " has " +
                 Str(pool_full ? f_.pool_down[n.pool] : f_.cluster_down[n.cluster]) +
                 " node(s) out of service (max_unavailable " + r_.strategy.max_unavailable.Text() +
                 ")";
      continue;
    }
    started += Begin(i);
  }
  int busy = BusyCount();
  if (busy == 0 && started == 0 && closed > 0) {
    r_.state = S::kWaitingWindow;
    r_.reason = "waiting for a maintenance window: " + window_why;
  } else if (r_.state == S::kWaitingWindow) {
    r_.state = S::kRunning;
    r_.reason = "the maintenance window is open";
  } else if (busy > 0) {
    r_.reason = Str(busy) + " node(s) in progress in " + r_.stage;
  } else if (!room_why.empty()) {
    r_.reason = "waiting: " + room_why;
  }
}

// Puts the previous version back on every node the rollout changed, within max_unavailable.
void Engine::Rollback() {
  r_.stage = "rollback";
  int waiting = 0;
  for (size_t i = 0; i < r_.nodes.size(); ++i) {
    RolloutNode& n = r_.nodes[i];
    if (n.state == P::kPending) {
      n.state = P::kSkipped;
      n.message = "the rollout rolled back before its turn";
      continue;
    }
    if (n.rollback || n.Busy() || (n.state != P::kUpdated && n.state != P::kFailed)) continue;
    auto v = f_.nodes.find(n.node);
    if (v == f_.nodes.end()) continue;
    if (n.from.empty() || Version(v->second) == n.from) {
      // Never changed (its install failed, say): back in service, nothing to undo.
      n.rollback = true;
      Restore(n);
      continue;
    }
    ++waiting;
    if (InService(v->second.state) && !Room(n)) continue;
    n.rollback = true;
    Begin(i);
  }
  int busy = BusyCount();
  if (busy == 0 && waiting == 0) {
    r_.state = S::kRolledBack;
    r_.ended_ms = now_;
    int failed =
        static_cast<int>(std::count_if(r_.nodes.begin(), r_.nodes.end(),
                                       [](const RolloutNode& n) { return n.state == P::kFailed; }));
    r_.reason += failed ? "; rolled back, " + Str(failed) + " node(s) could not be"
                        : "; every touched node runs its previous version again";
    Event("", "rolled_back", r_.reason);
    spdlog::warn("rollout {} rolled back", r_.id);
  } else {
    r_.reason = r_.reason.substr(0, r_.reason.find("; rolling back")) + "; rolling back " +
                Str(busy + waiting) + " node(s)";
  }
}

}  // namespace

std::vector<size_t> Step(Rollout& r, RolloutFacts& facts, int64_t now, RolloutEffects& effects,
                         Events& events) {
  auto node_key = [&](size_t i) {
    const RolloutNode& n = r.nodes[i];
    return std::make_tuple(n.state, n.step, n.message, n.command);
  };
  auto rollout_key = [&] { return std::make_tuple(r.state, r.stage, r.reason); };
  std::vector<decltype(node_key(0))> before;
  for (size_t i = 0; i < r.nodes.size(); ++i) before.push_back(node_key(i));
  auto state_before = rollout_key();

  Engine(r, facts, now, effects, events).Run();

  std::vector<size_t> changed;
  for (size_t i = 0; i < r.nodes.size(); ++i) {
    if (node_key(i) != before[i]) changed.push_back(i);
  }
  if (!changed.empty() || rollout_key() != state_before) r.updated_ms = now;
  return changed;
}

}  // namespace gpufleet::lifecycle
