// The autoscaler's decisions for a pool (DecideLocked, from Tick): the demand and forecast
// against the policy, and what follows from them: nodes provisioned, idle nodes drained and
// removed, lightly used nodes consolidated, a history sample and the event of each change.

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cmath>
#include <cstdio>

#include "common/json_text.h"
#include "common/strings.h"
#include "scaling/scaling.h"
#include "sched/policy_json.h"  // FormatSeconds

namespace gpufleet::scaling {
namespace {

namespace json = boost::json;

// Leaves out of `d` the queued jobs that need more than `cap_gpus` (the pool at max_nodes):
// they cannot run however far the pool grows, so they must neither hold it at its maximum nor
// stop consolidation (the Cluster Autoscaler does not scale up for a pod that would not fit on
// a new node either). They stay queued. Returns how many were left out.
int LeaveOutTooLarge(workload::PoolDemand& d, int cap_gpus) {
  int left_out = 0;
  for (auto it = d.queued_by_size.upper_bound(cap_gpus); it != d.queued_by_size.end();) {
    left_out += it->second;
    d.queued_jobs -= it->second;
    d.queued_gpus -= d.queued_gpus_by_size[it->first];
    d.queued_gpus_by_size.erase(it->first);
    it = d.queued_by_size.erase(it);
  }
  return left_out;
}

std::string SampleDoc(const Sample& s) {
  return JsonText(json::object{{"ready", s.ready},
                               {"provisioning", s.provisioning},
                               {"other", s.other},
                               {"target", s.target},
                               {"demand", s.demand_gpus},
                               {"running", s.running_gpus},
                               {"queued", s.queued_gpus},
                               {"forecast", s.forecast_gpus},
                               {"oldest_wait_s", s.oldest_wait_s}});
}

}  // namespace

int ScalingService::ProvisionLocked(PoolState& st, const Pool& pool, int have, int n,
                                    const std::string& reason, const std::string& detail,
                                    const std::string& actor, std::string& event) {
  Actuator* actuator = ActuatorFor(st.scaling.actuator);
  if (!actuator) {
    st.last_error = "no " + st.scaling.actuator.type + " actuator in this controller";
    return 0;
  }
  std::vector<std::string> names;
  // <pool>-NNNN, the lowest numbers first: a retired node of this pool comes back under its
  // name; a name that any other node has is skipped.
  for (int i = 0; static_cast<int>(names.size()) < n && i < 1'000'000; ++i) {
    char name[96];
    std::snprintf(name, sizeof name, "%s-%04d", pool.name.c_str(), i);
    auto existing = fleet_.GetNode(name);
    if (existing.ok() && (existing->pool != pool.name || existing->state != NodeState::kRetired)) {
      continue;
    }
    auto made = fleet_.Provision(pool.name, name, st.scaling.actuator.type == "sim",
                                 "scale up (" + reason + ") by " + actor, actor);
    if (!made.ok()) {
      spdlog::error("scaling {}: cannot record node {}: {}", pool.name, name, made.error().message);
      break;
    }
    names.push_back(name);
  }
  if (names.empty()) return 0;
  if (!LaunchLocked(st, pool, names, have, reason, detail, actor, event)) return 0;
  return static_cast<int>(names.size());
}

bool ScalingService::LaunchLocked(PoolState& st, const Pool& pool,
                                  const std::vector<std::string>& names, int have,
                                  const std::string& reason, const std::string& detail,
                                  const std::string& actor, std::string& event) {
  const auto& p = st.scaling.policy;
  double ttl_s = 2 * (p.lead_time_s + st.scaling.actuator.timeout_s) + 600;
  auto token = fleet_.CreateJoinToken(pool.name, static_cast<int64_t>(ttl_s * 1000), actor);
  if (!token.ok()) {
    for (const auto& name : names) {
      (void)fleet_.Retire(name, "provision failed: no join token: " + token.error().message, actor);
    }
    st.last_error = "no join token: " + token.error().message;
    return false;
  }
  int after = have + static_cast<int>(names.size());
  event = RecordEvent(pool.name, "scale_up", static_cast<int>(names.size()), have, after, reason,
                      detail, names, actor);
  Enqueue(true, pool, st, names, token->secret, p.lead_time_s, actor);
  return true;
}

int ScalingService::RemoveLocked(PoolState& st, const Pool& pool, int have, int n,
                                 const std::string& reason, const std::string& detail,
                                 const std::string& actor, std::string& event) {
  if (!ActuatorFor(st.scaling.actuator)) {
    st.last_error = "no " + st.scaling.actuator.type + " actuator in this controller";
    return 0;
  }
  int64_t idle_ms = actor == kAutoscaler
                        ? static_cast<int64_t>(st.scaling.policy.idle_before_remove_s * 1000)
                        : 0;
  auto names = jobs_.DrainIdle(pool.name, n, idle_ms, actor);
  if (names.empty()) return 0;
  int after = have - static_cast<int>(names.size());
  event = RecordEvent(pool.name, "scale_down", -static_cast<int>(names.size()), have, after, reason,
                      detail, names, actor);
  Enqueue(false, pool, st, names, "", st.scaling.policy.lead_time_s, actor);
  return static_cast<int>(names.size());
}

void ScalingService::ConsolidateLocked(PoolState& st, const Pool& pool, int have, int provisioning,
                                       const sched::ScaleDecision& decision,
                                       const workload::PoolDemand& demand, int64_t now) {
  const sched::ScalePolicy& p = st.scaling.policy;
  if (p.consolidate_below <= 0) return;
  int surplus = have - decision.target;
  bool may = st.scaling.enabled && decision.delta <= 0 && surplus > 0 && provisioning == 0 &&
             demand.queued_jobs == 0 &&
             (!st.last_down_ms || now - st.last_down_ms >= p.down_cooldown_s * 1000) &&
             ActuatorFor(st.scaling.actuator);
  auto done = jobs_.Consolidate(pool.name, std::max(1, pool.gpus_per_node), p.consolidate_below,
                                static_cast<int64_t>(p.idle_before_remove_s * 1000),
                                may ? std::min(surplus, p.step_down) : 0, kAutoscaler);
  if (!done.failed.empty()) {
    RecordEvent(pool.name, "consolidate_failed", 0, have, have, "consolidate",
                done.failed + (done.nodes.empty() ? "; moved: " + done.detail : ""), {},
                kAutoscaler);
  }
  if (done.nodes.empty()) return;
  int n = static_cast<int>(done.nodes.size());
  char head[160];
  std::snprintf(head, sizeof head,
                "%d node(s) used at most %d%% of their GPUs for %s emptied; %d wanted, %d "
                "ready: ",
                n, static_cast<int>(p.consolidate_below * 100 + 0.5),
                sched::FormatSeconds(p.idle_before_remove_s).c_str(), decision.target, have);
  RecordEvent(pool.name, "consolidate", -n, have, have - n, "consolidate", head + done.detail,
              done.nodes, kAutoscaler);
  Enqueue(false, pool, st, done.nodes, "", p.lead_time_s, kAutoscaler);
  st.last_down_ms = now;
}

void ScalingService::DecideLocked(PoolState& st, const Pool& pool, const Counts& c,
                                  const workload::PoolDemand& asked, int64_t now) {
  const sched::ScalePolicy& policy = st.scaling.policy;
  workload::PoolDemand demand = asked;
  const int too_large =
      LeaveOutTooLarge(demand, policy.max_nodes * std::max(1, pool.gpus_per_node));
  double d = demand.running_gpus + demand.queued_gpus;
  st.tracker->Observe(now / 1000.0, d);
  sched::ScaleInput in;
  in.now_s = now / 1000.0;
  in.gpus_per_node = std::max(1, pool.gpus_per_node);
  in.ready = c.ready;
  in.provisioning = c.provisioning;
  in.demand_gpus = d;
  in.queue_nodes = sched::QueueNodes(demand.busy_nodes, demand.queued_by_size, in.gpus_per_node);
  if (policy.mode == sched::ScaleMode::kPredictive && st.tracker->forecaster().observed() > 0) {
    in.peak_forecast_gpus = st.tracker->PlanningPeak(policy.forecast_margin, policy.margin_by_hour);
  }
  auto idle = jobs_.IdleNodes(pool.name, static_cast<int64_t>(policy.idle_before_remove_s * 1000));
  in.idle_removable = static_cast<int>(idle.size());
  in.last_up_s = st.last_up_ms ? st.last_up_ms / 1000.0 : -1e18;
  in.last_down_s = st.last_down_ms ? st.last_down_ms / 1000.0 : -1e18;
  // Nodes that are neither ready nor starting (unhealthy, cordoned, draining...) still count
  // against max_nodes.
  sched::ScalePolicy bounded = policy;
  bounded.max_nodes = std::max(0, policy.max_nodes - c.other);
  bounded.min_nodes = std::min(bounded.min_nodes, bounded.max_nodes);
  const sched::ScalePolicy unkept = bounded;
  std::string kept;  // the detail's notes: a manual keep, jobs left out
  if (st.keep.until_ms && now >= st.keep.until_ms) {
    int have = c.ready + c.provisioning;
    RecordEvent(pool.name, "keep_end", 0, have, have, "manual",
                "the manual target set by " + st.keep.actor + " is no longer kept", {},
                kAutoscaler);
    st.keep = ManualKeep{};
  }
  if (st.keep.until_ms) {
    if (st.keep.max_nodes >= 0) bounded.max_nodes = std::min(bounded.max_nodes, st.keep.max_nodes);
    if (st.keep.min_nodes >= 0) bounded.min_nodes = std::max(bounded.min_nodes, st.keep.min_nodes);
    kept = std::string("; kept at ") + (st.keep.min_nodes >= 0 ? "least " : "most ") +
           std::to_string(std::max(st.keep.min_nodes, st.keep.max_nodes)) + " by " + st.keep.actor +
           " until " + FormatTime(st.keep.until_ms);
  }
  bounded.min_nodes = std::min(bounded.min_nodes, bounded.max_nodes);
  if (too_large > 0) {
    kept += "; " + std::to_string(too_large) + " queued job(s) larger than " +
            std::to_string(policy.max_nodes) + " nodes left out";
  }
  sched::ScaleDecision decision = sched::Decide(bounded, in);
  if (st.keep.until_ms && sched::Decide(unkept, in).target != decision.target) {
    decision.reason = "manual";  // the keep made the difference
  }
  st.decision = decision;

  Sample s;
  s.time_ms = now;
  s.ready = c.ready;
  s.provisioning = c.provisioning;
  s.other = c.other;
  s.target = decision.target;
  s.demand_gpus = d;
  s.running_gpus = demand.running_gpus;
  s.queued_gpus = demand.queued_gpus;
  s.forecast_gpus = in.peak_forecast_gpus;
  s.oldest_wait_s = demand.oldest_queued_ms ? (now - demand.oldest_queued_ms) / 1000.0 : 0;
  st.now = s;
  st.history.push_back(s);
  while (!st.history.empty() && st.history.front().time_ms < now - options_.history_ms) {
    st.history.pop_front();
  }
  if (auto stored = store_.AppendScalingSample({pool.name, now, SampleDoc(s)}); !stored.ok()) {
    spdlog::error("scaling: sample of pool {} not stored: {}", pool.name, stored.error().message);
  }

  char detail[512];
  auto stats = st.tracker->forecaster().stats();
  std::string forecast =
      in.peak_forecast_gpus >= 0
          ? "forecast peak " + std::to_string(static_cast<int>(std::ceil(in.peak_forecast_gpus))) +
                " GPUs over the next " +
                sched::FormatSeconds(policy.lead_time_s + policy.interval_s) + " (" + stats.model +
                (stats.scored
                     ? ", MAPE " + std::to_string(static_cast<int>(stats.mape * 100 + 0.5)) + "%"
                     : "") +
                ")"
          : std::string(policy.mode == sched::ScaleMode::kReactive ? "reactive"
                                                                   : "no forecast yet");
  std::snprintf(detail, sizeof detail,
                "demand %d GPUs (%d running, %d queued in %d jobs); %s; %d ready + %d starting "
                "nodes of %d GPUs; wants %d (bounds %d..%d)%s",
                static_cast<int>(d), demand.running_gpus, demand.queued_gpus, demand.queued_jobs,
                forecast.c_str(), c.ready, c.provisioning, in.gpus_per_node, decision.target,
                bounded.MinimumAt(in.now_s), bounded.max_nodes, kept.c_str());
  int have = c.ready + c.provisioning;
  std::string event;
  if (decision.delta != 0 && st.scaling.enabled) {
    st.held.clear();
    if (decision.delta > 0) {
      if (ProvisionLocked(st, pool, have, decision.delta, decision.reason, detail, kAutoscaler,
                          event)) {
        st.last_up_ms = now;
      }
      return;
    }
    int removed =
        RemoveLocked(st, pool, have, -decision.delta, decision.reason, detail, kAutoscaler, event);
    if (removed) st.last_down_ms = now;
    ConsolidateLocked(st, pool, have - removed, c.provisioning, decision, demand, now);
    return;
  }
  ConsolidateLocked(st, pool, have, c.provisioning, decision, demand, now);
  // Held back: recorded once per (reason, target), not every interval.
  std::string reason = decision.delta != 0 ? "disabled" : decision.reason;
  if (decision.target == have) st.held.clear();
  if (decision.target == have || (reason != "cooldown" && reason != "disabled")) return;
  std::string key = reason + "/" + std::to_string(decision.target);
  if (key == st.held) return;
  st.held = key;
  RecordEvent(pool.name, "hold", 0, have, decision.target, reason, detail, {}, kAutoscaler);
}

void ScalingService::Tick() {
  int64_t now = clock_->NowMs();
  {
    std::lock_guard lock(mu_);
    bool due = false;
    for (const auto& [name, st] : pools_) due = due || now >= st.next_decision_ms;
    if (!due && now < next_retain_ms_) return;
  }
  auto pools = fleet_.Pools();
  if (!pools.ok()) return;
  std::lock_guard lock(mu_);
  std::map<std::string, workload::PoolDemand> demand;  // every pool's, from one pass over jobs
  bool counted = false;
  for (auto& [name, st] : pools_) {
    auto pool = std::find_if(pools->begin(), pools->end(),
                             [&name = name](const Pool& p) { return p.name == name; });
    if (pool == pools->end()) continue;
    // Nodes that never registered: retired, and their actuator told to stop them.
    const auto& p = st.scaling.policy;
    int64_t deadline_ms = static_cast<int64_t>((2 * p.lead_time_s + 60) * 1000);
    Counts c = CountLocked(name);
    std::vector<std::string> late;
    for (const auto& [node, since] : c.provisioning_since) {
      if (now - since > deadline_ms) late.push_back(node);
    }
    if (!late.empty()) {
      std::string why = "did not register within " + sched::FormatSeconds(deadline_ms / 1000.0);
      for (const auto& node : late) (void)fleet_.Retire(node, why, kAutoscaler);
      RecordEvent(name, "join_timeout", -static_cast<int>(late.size()), 0, 0, "timeout", why, late,
                  kAutoscaler);
      st.last_error = Join(late, ", ") + " " + why;
      if (ActuatorFor(st.scaling.actuator)) {
        Enqueue(false, *pool, st, late, "", p.lead_time_s, kAutoscaler);
      }
      c = CountLocked(name);  // without the nodes just retired
    }
    if (const auto& t = st.scaling.tune; t.every_s > 0) {
      int64_t every_ms = static_cast<int64_t>(t.every_s * 1000);
      if (st.next_tune_ms == 0) {
        st.next_tune_ms = now + every_ms;
      } else if (now >= st.next_tune_ms) {
        st.next_tune_ms = now + every_ms;
        std::lock_guard work(work_mu_);
        work_.push_back(Work{.tune = name});
        work_cv_.notify_one();
      }
    } else {
      st.next_tune_ms = 0;
    }
    if (now >= st.next_decision_ms) {
      st.next_decision_ms = now + static_cast<int64_t>(p.interval_s * 1000);
      if (!counted) {
        demand = jobs_.Demand();
        counted = true;
      }
      DecideLocked(st, *pool, c, demand[name], now);
    }
  }
  if (now >= next_retain_ms_) {
    next_retain_ms_ = now + 60'000;
    if (auto s = store_.DeleteScalingSamplesBefore(now - options_.history_ms); !s.ok()) {
      spdlog::error("scaling: old samples not removed: {}", s.error().message);
    }
  }
}

}  // namespace gpufleet::scaling
