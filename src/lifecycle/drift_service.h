#pragma once
// Drift from the golden profiles: every node compared with its pool's profile (its cluster's
// with the pool's own fields over it, model/profile.h) on each Tick, which the controller calls
// every few seconds, so a fact that changes and a profile that is applied are both seen within
// one. Findings are kept in memory and in the store: a new difference opens one, the same one
// seen again updates its actual value and last seen time, one no longer seen is resolved.
// Thread-safe; its lock is taken before the fleet registry's, never after.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "fleet/fleet.h"
#include "model/profile.h"
#include "model/window.h"
#include "proto/proto.h"
#include "runtime/command_bus.h"
#include "store/store.h"

namespace gpufleet::lifecycle {

struct DriftFilter {
  std::string node, pool, cluster;
  std::vector<std::string> clusters;  // a scoped token's clusters; empty: all
  std::string state;                  // "open", "remediating", "resolved"; empty: any
  std::string severity;               // at least this severity; empty: any
};

// Severity's rank: critical 4, high 3, medium 2, low 1, anything else 0.
int SeverityRank(const std::string& severity);

// Remediation "auto": a GPU setting that differs is set by the node's agent (an apply-setting
// command: NVML's setter on a real GPU), each attempt audited. Bounded like the health
// model's remediation: at most max(1, max_share x the cluster's nodes) nodes of a cluster are
// being changed at once (the circuit breaker), three attempts a finding a minute apart, then it
// is left open for an operator; ECC and MIG modes, which need a GPU reset, only inside the
// pool's maintenance window.
inline constexpr int kAutoAttempts = 3;
inline constexpr int64_t kAutoRetryMs = 60'000;

class DriftService : public runtime::CommandOwner {
 public:
  DriftService(FleetService& fleet, store::DriftStore& store, std::shared_ptr<Clock> clock,
               store::AuditLog* audit = nullptr, std::string zoneinfo = "/usr/share/zoneinfo");
  // Where apply-setting commands go (the agents' connections); none: nothing is set.
  void set_commands(runtime::CommandBus* commands);
  // An agent's answer to an apply-setting command.
  void OnResult(const std::string& node, const proto::CommandResult& result) override;
  // The nodes a rollout is updating: node -> "KIND TARGET" (RolloutService::ActiveTargets). A
  // rollout finding whose node is on its way to the profile's version is "remediating".
  void set_rollout_targets(std::function<std::map<std::string, std::string>()> fn) {
    rollout_targets_ = std::move(fn);
  }
  Status Load();  // the stored findings
  // Compares every node with its profile; writes what changed. Returns how many findings
  // opened, changed or resolved.
  Result<int> Tick();
  // Unresolved first, then by severity, then newest first.
  std::vector<DriftFinding> List(const DriftFilter& filter) const;
  // Calls `fn` with each unresolved finding in `filter`'s scope, in no order, under this
  // service's lock (`fn` must not call back into it): nothing copied, nothing sorted.
  void ForEachUnresolved(const DriftFilter& filter,
                         const std::function<void(const DriftFinding&)>& fn) const;
  Result<DriftFinding> Get(int64_t id) const;
  // Per node, its open findings' highest severity rank (the alert rules' node_drift_severity).
  std::map<std::string, int> NodeSeverity() const;
  // The profile in effect for a pool: its cluster's with the pool's over it.
  Result<Profile> PoolProfile(const std::string& pool) const;
  // The profile in effect for a node of `pool`: the pool's with the overrides the node's labels
  // select (a node that is gone: none of them).
  Result<Profile> NodeProfile(const std::string& node, const std::string& pool) const;

 private:
  struct AutoAttempt {
    int attempts = 0;
    int64_t last_ms = 0;
    int64_t command = 0;  // in flight; 0: none
    std::string node;
  };
  struct Dispatch {
    DriftFinding finding;
    proto::Command command;
  };
  // The auto findings to act on now (under mu_); marks them remediating.
  std::map<std::string, std::set<std::string>> TrackAttempts(int64_t now);
  std::vector<Dispatch> PlanAuto(int64_t now, const std::map<std::string, Cluster>& clusters,
                                 const std::map<std::string, Pool>& pools,
                                 const std::map<std::string, int>& cluster_nodes,
                                 const std::set<std::string>& connected,
                                 std::vector<store::DriftRecord>& changed);
  bool WindowOpen(const Pool& pool, const Cluster* cluster, int64_t now);
  void Audit(const std::string& action, const std::string& target, int status,
             const std::string& result);

  FleetService& fleet_;
  store::DriftStore& store_;
  std::shared_ptr<Clock> clock_;
  store::AuditLog* audit_;
  std::string zoneinfo_;
  runtime::CommandBus* commands_ = nullptr;  // guarded by mu_
  std::map<int64_t, AutoAttempt> auto_;      // by finding id; guarded by mu_
  std::map<std::string, TimeZone> zones_;
  std::set<std::string> breaker_open_;  // clusters whose auto remediation is held
  std::function<std::map<std::string, std::string>()> rollout_targets_;
  mutable std::mutex mu_;
  std::vector<DriftFinding> findings_;  // by id
  int64_t next_id_ = 1;
};

}  // namespace gpufleet::lifecycle
