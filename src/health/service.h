#pragma once
// HealthService: keeps each GPU's recent XID errors (fed as they arrive, loaded from the store
// at start), gathers the inputs of the health model from the fleet and the telemetry store,
// answers health reads, and hands each node's verdict to the fleet so that its state follows.
// Thread-safe.

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/clock.h"
#include "fleet/fleet.h"
#include "health/health.h"
#include "model/catalog.h"
#include "model/xid_catalog.h"
#include "store/store.h"
#include "telemetry/telemetry.h"

namespace gpufleet::health {

class HealthService {
 public:
  HealthService(FleetService& fleet, TelemetryStore& telemetry, Store& store,
                std::shared_ptr<const GpuCatalog> gpus, std::shared_ptr<const XidCatalog> xids,
                std::shared_ptr<Clock> clock, Thresholds thresholds = {});

  // Loads the XIDs still within their hold from the store.
  Status Load();
  void OnXid(const std::string& uuid, int64_t time_ms, int xid);
  // Each GPU's XIDs of the last 24 hours (at most 256 each), by UUID: what alert rules count.
  std::map<std::string, std::vector<XidSeen>> RecentXids() const;

  // Every matching node's health, in name order.
  std::vector<NodeHealth> Evaluate(const NodeFilter& filter) const;
  // Evaluates the whole fleet and gives each node's verdict to the fleet, then applies each
  // cluster's remediation policy; returns how many verdicts changed.
  int Apply(std::vector<NodeHealth>* reports = nullptr);

  // The remediation policy: cordons (or drains) unhealthy nodes of clusters that ask for it, as
  // actor "remediation", each action a node event and an audit record. The circuit breaker
  // holds while the cluster's nodes taken out by remediation reach its max_share (at least
  // one node may always be taken), and at most kMaxActionsPerCycle act per cycle fleet-wide.
  // Returns the actions taken.
  int Remediate();
  static constexpr int kMaxActionsPerCycle = 10;

  const XidCatalog& xid_catalog() const { return *xids_; }
  // Clusters whose remediation circuit breaker held an action back in the last cycle.
  std::map<std::string, bool> Breakers() const;

 private:
  FleetService& fleet_;
  TelemetryStore& telemetry_;
  Store& store_;
  std::shared_ptr<const GpuCatalog> gpus_;
  std::shared_ptr<const XidCatalog> xids_;
  std::shared_ptr<Clock> clock_;
  Thresholds thresholds_;
  int64_t max_hold_ms_ = 0;
  mutable std::mutex mu_;
  std::map<std::string, std::vector<XidSeen>> recent_;  // by GPU UUID; guarded by mu_
  std::map<std::string, bool> breaker_open_;            // by cluster; guarded by mu_
};

}  // namespace gpufleet::health
