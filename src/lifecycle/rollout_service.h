#pragma once
// RolloutService: staged rollouts of drivers and firmware (test nodes and validation, canaries
// per pool, a confidence period watched by gates, rolling batches within max_unavailable and
// the maintenance windows, a failure threshold that halts, rollback), and operators' node
// actions (reboot, reset a GPU, maintenance, decommission), both carried out by the nodes'
// agents (proto::kNodeActions). Tick() moves everything along; every node's step is written to
// the store as it happens, so a restarted controller resumes where it was, and a node's
// reported version (not a script's exit code) decides whether its update is done.
// Thread-safe.

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/timezone.h"
#include "fleet/fleet.h"
#include "lifecycle/compat_service.h"
#include "lifecycle/rollout.h"
#include "lifecycle/sim_faults.h"
#include "proto/proto.h"
#include "runtime/command_bus.h"
#include "store/store.h"

namespace gpufleet::lifecycle {

// What the rollouts need of the rest of the controller, set before serving.
struct RolloutHooks {
  // Commands to the nodes' agents; their answers come back to OnResult. None: every command
  // fails as if the agent could not be reached.
  runtime::CommandBus* commands = nullptr;
  // Whether a node runs jobs, and: a drain of this node requeues its jobs after `timeout_ms`.
  std::function<bool(const std::string& node)> busy;
  std::function<void(const std::string& node, int64_t timeout_ms)> drain_timeout;
  // The time of each node's newest XID (of the last day), by node.
  std::function<std::map<std::string, int64_t>()> last_xid;
  // Nodes with a firing alert, each with the alert's name.
  std::function<std::map<std::string, std::string>()> alerting;
  // A GPU reset ended well: its earlier XIDs no longer count (the health model's hold).
  std::function<void(const std::string& node, int gpu)> gpu_reset;
};

// A failed compatibility rule of one pool the rollout touches.
struct Refusal {
  std::string pool;
  CompatRule rule;
};

// The dry run of a request (POST /api/v1/rollouts/plan).
struct PlanStage {
  std::string name;  // "test", "canary", "batch 1", ...
  std::vector<std::string> nodes;
  int64_t expected_ms = 0;
};
struct PlanWindow {
  std::string pool;
  bool open = true;
  bool always = true;
  int64_t next_open_ms = 0;
  int64_t closes_ms = 0;
};
struct RolloutPlan {
  std::vector<PlanStage> stages;
  std::vector<PlanWindow> windows;
  std::vector<std::string> skipped;  // selected nodes that have nothing to update (with why)
  // Each node to update with the version it runs now ("" unknown): for TargetWarnings.
  std::vector<std::pair<std::string, std::string>> runs;
  int64_t expected_ms = 0;  // the stages and the confidence period
  int nodes = 0;
};

// An operator's node action (POST /api/v1/nodes/{name}/actions).
struct NodeActionRequest {
  std::string action;  // reboot, reset-gpu, maintenance, decommission
  int gpu = -1;        // reset-gpu
  std::string mode;    // maintenance: enter or leave
};
struct NodeOperation {
  int64_t id = 0;
  std::string node, action;
  int gpu = -1;
  std::string mode;
  // waiting_for_jobs, running, succeeded, failed
  std::string state = "waiting_for_jobs";
  std::string message;
  std::string actor;
  int64_t created_ms = 0, ended_ms = 0;
  // internal
  std::string step;  // drain, act, reboot, restore
  int64_t step_ms = 0;
  int64_t command = 0;
  std::string result;
  std::string resume;
};

class RolloutService : public runtime::CommandOwner {
 public:
  RolloutService(FleetService& fleet, CompatService* compat, store::RolloutStore& store,
                 store::AuditLog& audit, std::shared_ptr<Clock> clock,
                 std::string zoneinfo = "/usr/share/zoneinfo");
  // After Load(): the loaded rollouts' commands still awaiting an answer are claimed on the bus.
  void set_hooks(RolloutHooks hooks);

  // Reads the rollouts from the store; the unfinished go on from the step each node was at.
  Status Load();

  // The compatibility rules the target fails on the pools of the selected nodes (drivers only;
  // firmware has no rules yet). kInvalidArgument for a selector that names what does not exist
  // or selects nothing.
  Result<std::vector<Refusal>> Check(const RolloutRequest& request);
  // Starts a rollout (state running, or waiting_window). The caller has checked and, where
  // forced, audited; `forced` is the admin's reason.
  Result<Rollout> Create(const RolloutRequest& request, const std::string& actor,
                         const std::string& forced);
  Result<RolloutPlan> Plan(const RolloutRequest& request);
  std::vector<Rollout> List() const;  // newest first, without nodes
  Result<Rollout> Get(int64_t id) const;
  // pause, resume, abort, approve, rollback. kConflict when the rollout's state does not allow
  // it (with why), kNotFound for no such rollout.
  Result<Rollout> Control(int64_t id, const std::string& control, const std::string& actor);
  Result<std::vector<store::RolloutEventRecord>> Events(int64_t id, int64_t after, int limit);
  // A node's versions over time: its part in each rollout that touched it, newest first.
  struct VersionChange {
    int64_t rollout = 0;
    RolloutKind kind = RolloutKind::kDriver;
    RolloutNode node;
  };
  std::vector<VersionChange> History(const std::string& node) const;

  // Node actions. kNotFound for no such node, kInvalidArgument for a bad request, kConflict
  // when the node's state does not allow it or another operation or a rollout holds it.
  Result<NodeOperation> StartAction(const std::string& node, const NodeActionRequest& request,
                                    const std::string& actor);
  std::vector<NodeOperation> Operations(const std::string& node) const;  // newest first

  // An agent's answer to a node action (through hooks.commands, by the command's id).
  void OnResult(const std::string& node, const proto::CommandResult& result) override;

  // Moves every rollout and operation along; returns how many node steps changed.
  int Tick();

  // The simulator's faulty versions (POST /api/v1/sim/faulty-versions).
  void MarkFaulty(RolloutKind kind, const std::string& version, bool faulty);
  std::vector<std::pair<RolloutKind, std::string>> Faulty() const;

  // Rollouts halted, rolling back, or rolled back within the hour (the RolloutHalted rule).
  struct Alarm {
    int64_t id = 0;
    std::string kind, target, state, reason;
  };
  std::vector<Alarm> Alarms() const;
  // Nodes that failed their update in a rollout not ended, or ended within the hour.
  std::set<std::string> FailedNodes() const;
  // The nodes that a rollout not ended is to put a version on (pending or in progress, not
  // rolling back): node -> "KIND TARGET" ("driver 580.159.03"). What drift calls remediating.
  std::map<std::string, std::string> ActiveTargets() const;

 private:
  struct Snapshot;
  class TickEffects;
  Snapshot Take(const std::set<RolloutKind>& kinds) const;
  Result<std::vector<RolloutNode>> Select(const RolloutRequest& request, const Snapshot& snap,
                                          std::vector<std::string>& skipped) const;
  void Assign(const RolloutRequest& request, std::vector<RolloutNode>& nodes, int& batches) const;
  bool WindowOpen(const std::string& pool, int64_t now, Snapshot& snap, std::string* why);
  const TimeZone* Zone(const std::string& name);
  void Persist(const Rollout& r, const std::vector<size_t>& changed);
  void Audit(const std::string& actor, const std::string& action, const std::string& target,
             int status, const std::string& result);
  void AdvanceOperations(Snapshot& snap, int64_t now);

  FleetService& fleet_;
  CompatService* compat_;
  store::RolloutStore& store_;
  store::AuditLog& audit_;
  std::shared_ptr<Clock> clock_;
  std::string zoneinfo_;
  mutable std::mutex mu_;
  RolloutHooks hooks_;                           // guarded by mu_
  std::map<int64_t, Rollout> rollouts_;          // guarded by mu_
  std::map<std::string, int64_t> node_holder_;   // node -> the rollout working it; guarded by mu_
  std::map<int64_t, NodeOperation> operations_;  // guarded by mu_
  int64_t next_operation_ = 1;                   // guarded by mu_
  // When Load read the rollouts back: the agents reconnect after it. Guarded by mu_.
  int64_t loaded_ms_ = 0;
  // Commands sent again to a reconnected agent: id -> the connection's connected_ms (not
  // stored: a new leader asks once more). Guarded by mu_.
  std::map<int64_t, int64_t> asked_again_;
  FaultyVersions faulty_;
  std::map<std::string, TimeZone> zones_;  // guarded by mu_
};

}  // namespace gpufleet::lifecycle
