#pragma once
// The rollout engine: how a rollout moves from one tick to the next, as a function of the
// rollout, the facts of its nodes and the time, with no thread, clock, store or connection of
// its own. What it does to the world (drain, cordon, send a command) goes through
// RolloutEffects, which RolloutService implements and tests record; the states and steps are
// the enums of rollout.h. Like sched::Decide, it is tested on its own (rollout_engine_test).

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/result.h"
#include "lifecycle/rollout.h"
#include "model/state_machine.h"
#include "proto/proto.h"
#include "store/store.h"

namespace gpufleet::lifecycle {

// What a tick knows of a node: read once, under the fleet's lock, for every rollout.
struct NodeFacts {
  NodeState state = NodeState::kReady;
  NodeState effective = NodeState::kReady;  // the resume state of an unreachable node
  bool connected = false, simulated = false;
  int64_t connected_ms = 0;
  int64_t state_since_ms = 0;
  std::string pool, cluster, reason;
  std::array<std::string, kRolloutKinds> version;  // by RolloutKind, for the kinds asked for
  int gpus = 0;
};

// The fleet as one tick sees it. Step keeps it current as it goes: a node it drains counts as
// out of service for the next rollout of the same tick, a node it takes is held.
struct RolloutFacts {
  std::unordered_map<std::string, NodeFacts> nodes;
  std::map<std::string, int> pool_size, pool_down, cluster_size, cluster_down;
  std::map<std::string, int64_t> last_xid;        // the gates: each node's newest XID
  std::map<std::string, std::string> alerting;    // the gates: a firing alert, by node
  std::map<std::string, int64_t> holders;         // node -> the rollout working it
  std::map<std::string, std::string> operations;  // node -> "operation 3 (reboot)" under way
  int64_t loaded_ms = 0;  // when the rollouts were read back (the agents reconnect after it)
};

// A node as the fleet has it at this moment (a node restored earlier in the tick differs from
// the tick's facts).
struct LiveNode {
  NodeState state = NodeState::kReady;
  NodeState resume_state = NodeState::kReady;
  bool connected = false;
  std::string running;  // the version of the rollout's kind it runs
};

// What Step asks of the world, answered at once.
class RolloutEffects {
 public:
  virtual ~RolloutEffects() = default;
  virtual std::optional<LiveNode> Live(const std::string& node, RolloutKind kind) = 0;
  // drain, cordon, uncordon, by `actor` ("rollout 7").
  virtual Status Act(const std::string& node, NodeAction action, const std::string& actor) = 0;
  virtual bool RunsJobs(const std::string& node) = 0;
  // The node's jobs are requeued when its drain has waited `timeout_ms` for them.
  virtual void DrainTimeout(const std::string& node, int64_t timeout_ms) = 0;
  // Whether the pool's maintenance windows are open at `now`; else why not.
  virtual bool WindowOpen(const std::string& pool, int64_t now, std::string* why) = 0;
  virtual int64_t NewCommand() = 0;  // an id for a command to an agent (0: none can be sent)
  // Writes node `i`'s step down: called before its command is sent, so that a controller killed
  // in between waits for an answer rather than running the action twice.
  virtual void Save(const Rollout& r, size_t i) = 0;
  // Sends node `i`'s command to its agent (`facts`: the node as the tick saw it).
  virtual Status Send(const Rollout& r, size_t i, const NodeFacts& facts,
                      const proto::Command& cmd) = 0;
  // A command sent again under its own id to an agent that reconnected during the step: the
  // connection (its connected_ms) it was last sent again on, 0 for none. Kept across reloads
  // of the rollouts, not stored: a new leader asks once more.
  virtual int64_t AskedAgain(int64_t command) = 0;
  virtual void SetAskedAgain(int64_t command, int64_t connected_ms) = 0;
};

// How long a controller that just read its rollouts back waits for an agent to reconnect
// before a command to it counts as failed.
inline constexpr int64_t kReconnectGraceMs = 60'000;

// Moves the rollout one tick: the steps in flight (whatever the rollout's state: a paused,
// halted or aborted rollout lets a node finish the step it is in), the gates on the updated
// nodes, the failure threshold, the stages (confidence period, approvals, maintenance windows,
// max_unavailable) and the rollback. Appends the events; returns the indices of the nodes whose
// state, step, message or command changed. Sets r.updated_ms when anything changed.
std::vector<size_t> Step(Rollout& r, RolloutFacts& facts, int64_t now, RolloutEffects& effects,
                         std::vector<store::RolloutEventRecord>& events);

// An operator's control (pause, resume, abort, approve, rollback): kConflict when the rollout's
// state does not allow it (with why), kInvalidArgument for an unknown control
// (rollout_control.cpp).
Status Control(Rollout& r, std::string_view control, const std::string& actor, int64_t now);

// "test", "canary", "batch 2/7": the stage the rollout works.
std::string StageName(const Rollout& r);

// What node `n`'s step sends its agent (install or flash with the version and package, reboot,
// validate), without an id (rollout_control.cpp).
proto::Command StepCommand(const Rollout& r, const RolloutNode& n, RolloutStep step);

}  // namespace gpufleet::lifecycle
