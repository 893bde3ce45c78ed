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
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "fleet/fleet.h"
#include "model/profile.h"
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

class DriftService {
 public:
  DriftService(FleetService& fleet, store::DriftStore& store, std::shared_ptr<Clock> clock);
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
  Result<DriftFinding> Get(int64_t id) const;
  // Per node, its open findings' highest severity rank (the alert rules' node_drift_severity).
  std::map<std::string, int> NodeSeverity() const;
  // The profile in effect for a pool: its cluster's with the pool's over it.
  Result<Profile> PoolProfile(const std::string& pool) const;

 private:
  FleetService& fleet_;
  store::DriftStore& store_;
  std::shared_ptr<Clock> clock_;
  std::function<std::map<std::string, std::string>()> rollout_targets_;
  mutable std::mutex mu_;
  std::vector<DriftFinding> findings_;  // by id
  int64_t next_id_ = 1;
};

}  // namespace gpufleet::lifecycle
