#pragma once
// HealthService: keeps each GPU's recent XID errors (fed as they arrive, loaded from the store
// at start), gathers the inputs of the health model from the fleet and the telemetry store,
// answers health reads, and hands each node's verdict to the fleet so that its state follows.
// Thread-safe.

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"
#include "fleet/fleet.h"
#include "health/health.h"
#include "model/catalog.h"
#include "model/xid_catalog.h"
#include "runtime/command_bus.h"
#include "store/store.h"
#include "telemetry/telemetry.h"

namespace gpufleet::health {

class HealthService : public runtime::CommandOwner {
 public:
  HealthService(FleetService& fleet, TelemetryStore& telemetry, store::FleetStore& store,
                store::AuditLog& audit, std::shared_ptr<const GpuCatalog> gpus,
                std::shared_ptr<const XidCatalog> xids, std::shared_ptr<Clock> clock,
                Thresholds thresholds = {});

  // Loads the XIDs still within their hold from the store.
  Status Load();
  void OnXid(const std::string& uuid, int64_t time_ms, int xid);
  // Several controllers: the XIDs and resets recorded since the last call, whichever
  // controller's agents reported them (the change feed calls it when gpu_events changes), so
  // that the leader's health model and alert rules see every GPU's. An XID already known (this
  // controller's own agent reported it) is not counted twice.
  Status TakeEvents();
  // Each GPU's XIDs of the last 24 hours (at most 256 each), by UUID: what alert rules count.
  std::map<std::string, std::vector<XidSeen>> RecentXids() const;

  // Every matching node's health, in name order. A node whose agent is connected to another
  // controller is judged there, where its telemetry is: its GPUs are judged here on their XIDs
  // alone, and the verdict that controller gave it (its state, unhealthy or degraded, and the
  // reason) stands when it is worse.
  std::vector<NodeHealth> Evaluate(const NodeFilter& filter) const;
  // What health reads answer (the API, the heatmap's health colouring): the matching nodes of
  // the last whole-fleet evaluation (Apply's) while it is current: at most max_answer_age old,
  // and no XID, GPU reset or node record has changed since it began. Else evaluated afresh
  // (Evaluate). At 100,000 GPUs an evaluation takes seconds; a read of the last one, a copy.
  // `evaluated_ms`, when given, is set to when the answer was evaluated.
  std::vector<NodeHealth> Reports(const NodeFilter& filter, int64_t* evaluated_ms = nullptr) const;
  // 0 (the default): every read evaluates afresh. The controller sets two health intervals:
  // a telemetry-only change (a GPU heating up) shows in reads within that.
  void set_max_answer_age(int64_t ms) { max_answer_age_ms_.store(ms); }
  // Evaluates the whole fleet and gives each node's verdict to the fleet (but the nodes whose
  // agents are connected to another controller: that one's to give), then, with `remediate`,
  // applies each cluster's remediation policy; returns how many verdicts changed.
  int Apply(std::vector<NodeHealth>* reports = nullptr, bool remediate = true);

  // The remediation policy: cordons (or drains) unhealthy nodes of clusters that ask for it, as
  // actor "remediation", each action a node event and an audit record. The circuit breaker
  // holds while the cluster's nodes taken out by remediation reach its max_share (at least
  // one node may always be taken), and at most kMaxActionsPerCycle act per cycle fleet-wide.
  // Returns the actions taken.
  // Where the cluster's policy also allows it (reset_gpu, reboot_node), a node that remediation
  // took out gets its failed GPUs' recommended action asked of its agent: at most once an hour
  // per GPU (per node for a reboot), within the same per-cycle limit, each request an audit
  // record; the agent's answer comes back through the bus (OnResult).
  int Remediate(const std::vector<NodeHealth>& reports = {});
  static constexpr int kMaxActionsPerCycle = 10;
  // Where the remediation's commands go; none: nothing is asked of agents.
  void set_commands(runtime::CommandBus* commands);
  // The agent's answer: an audit record; a GPU that was reset (or a node rebooted) is judged
  // afresh: the XIDs it had before no longer count against it.
  void OnResult(const std::string& node, const proto::CommandResult& result) override;
  // A GPU (`gpu` -1: every GPU of the node, a reboot) was reset by other means (an operator's
  // node action): the XIDs it had before no longer count against it.
  void OnReset(const std::string& node, int gpu);

  const XidCatalog& xid_catalog() const { return *xids_; }
  // Clusters whose remediation circuit breaker held an action back in the last cycle.
  std::map<std::string, bool> Breakers() const;

 private:
  FleetService& fleet_;
  TelemetryStore& telemetry_;
  store::FleetStore& store_;  // GPU events
  store::AuditLog& audit_;
  std::shared_ptr<const GpuCatalog> gpus_;
  std::shared_ptr<const XidCatalog> xids_;
  std::shared_ptr<Clock> clock_;
  Thresholds thresholds_;
  int64_t max_hold_ms_ = 0;
  mutable std::mutex mu_;
  int AskAgent(const Cluster& cluster, const Node& node, const NodeHealth& report, int budget);
  void AddXidLocked(const std::string& uuid, int64_t time_ms, int xid);
  void ForgetXidsLocked(const std::string& uuid, int64_t until_ms);
  std::map<std::string, std::vector<XidSeen>> recent_;  // by GPU UUID; guarded by mu_
  uint64_t xid_changes_ = 0;  // counts changes to recent_ (Reports' check); guarded by mu_
  // Apply's last evaluation of the whole fleet, with what it was made from.
  struct LastEvaluation {
    std::vector<NodeHealth> nodes;
    int64_t at_ms = 0;
    uint64_t fleet_changes = 0;  // FleetService::changes() before it began
    uint64_t xid_changes = 0;    // xid_changes_ before it began
  };
  std::shared_ptr<const LastEvaluation> last_;  // guarded by mu_
  std::atomic<int64_t> max_answer_age_ms_{0};
  std::vector<NodeHealth> Evaluate(const NodeFilter& filter,
                                   const std::set<std::string>& away) const;
  int64_t last_event_id_ = 0;                 // TakeEvents' mark; guarded by mu_
  std::map<std::string, bool> breaker_open_;  // by cluster; guarded by mu_
  std::map<std::string, int64_t> asked_;      // GPU UUID or node -> last request; guarded by mu_
  runtime::CommandBus* commands_ = nullptr;   // guarded by mu_
};

}  // namespace gpufleet::health
