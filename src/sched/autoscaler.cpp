#include "sched/autoscaler.h"

#include <algorithm>
#include <cmath>

namespace gpufleet::sched {

const char* ToString(ScaleMode m) {
  switch (m) {
    case ScaleMode::kReactive:
      return "reactive";
    case ScaleMode::kPredictive:
      return "predictive";
    case ScaleMode::kOracle:
      return "oracle";
  }
  return "?";
}

std::string ScalePolicy::Validate() const {
  if (min_nodes < 0) return "min_nodes must be 0 or more";
  if (max_nodes < min_nodes) return "max_nodes must be at least min_nodes";
  if (max_nodes > 100'000) return "max_nodes must be at most 100000";
  if (!(target_share > 0 && target_share <= 1)) return "target_share must be in (0, 1]";
  if (step_up < 1) return "step_up must be at least 1";
  if (step_down < 1) return "step_down must be at least 1";
  if (up_cooldown_s < 0 || down_cooldown_s < 0) return "cooldowns must not be negative";
  if (!(lead_time_s >= 0 && lead_time_s <= 86'400)) return "lead_time must be 0 to 1d";
  if (idle_before_remove_s < 0) return "idle_before_remove must not be negative";
  if (!(interval_s >= 1 && interval_s <= 86'400)) return "interval must be 1s to 1d";
  if (!(forecast_margin >= 0 && forecast_margin <= 10)) return "forecast_margin must be in [0, 10]";
  if (!(consolidate_below >= 0 && consolidate_below <= 1)) {
    return "consolidate_below must be in [0, 1] (0: never)";
  }
  for (const auto& s : schedule) {
    if (s.nodes < 0 || s.from_hour < 0 || s.to_hour > 24 || s.from_hour >= s.to_hour) {
      return "schedule: nodes >= 0 and 0 <= from < to <= 24";
    }
    if (s.nodes > max_nodes) return "schedule: nodes must be at most max_nodes";
  }
  return "";
}

std::string PoolScaling::Validate() const {
  if (policy.mode == ScaleMode::kOracle)
    return "mode must be reactive or predictive (oracle is for replays)";
  if (auto e = policy.Validate(); !e.empty()) return e;
  if (actuator.type == "command") {
    if (actuator.provision.empty() || actuator.deprovision.empty()) {
      return "actuator: a command actuator needs both provision and deprovision";
    }
  } else if (actuator.type != "sim") {
    return "actuator.type must be sim or command";
  }
  if (!(actuator.timeout_s > 0)) return "actuator.timeout must be positive";
  if (!(tune.every_s == 0 || tune.every_s >= 60)) {
    return "tune.every must be 0 (never) or at least 1m";
  }
  if (!(tune.wait_p95_s >= 0)) return "tune.wait_p95 must be 0 or more";
  if (!(tune.window_s > 0 && tune.window_s <= 30 * 86400)) {
    return "tune.window must be positive and at most 30d";
  }
  return "";
}

int ScalePolicy::MinimumAt(double t_s) const {
  int m = min_nodes;
  auto secs = static_cast<int64_t>(std::floor(t_s));
  int hour = static_cast<int>((secs / 3600) % 24);
  // Day 0 of the epoch (1970-01-01) was a Thursday: 0 = Monday.
  int weekday = static_cast<int>((secs / 86400 + 3) % 7);
  for (const auto& s : schedule) {
    if (hour < s.from_hour || hour >= s.to_hour) continue;
    if (s.weekdays_only && weekday >= 5) continue;
    m = std::max(m, s.nodes);
  }
  return std::min(m, max_nodes);
}

int QueueNodes(int busy_nodes, const std::map<int, int>& queued_by_size, int gpus_per_node) {
  if (queued_by_size.empty() || gpus_per_node <= 0) return 0;
  int64_t small = 0, whole = 0;
  for (auto [gpus, jobs] : queued_by_size) {
    if (gpus <= gpus_per_node) {
      small += static_cast<int64_t>(gpus) * jobs;
    } else {
      whole += static_cast<int64_t>((gpus + gpus_per_node - 1) / gpus_per_node) * jobs;
    }
  }
  int64_t n = busy_nodes + (small + gpus_per_node - 1) / gpus_per_node + whole;
  return static_cast<int>(std::min<int64_t>(n, 1'000'000));
}

int QueueSize(int gpus, int k, int g) {
  if (k > 0 && k < g && k < gpus) return (gpus + k - 1) / k * g;
  return gpus;
}

ScaleDecision Decide(const ScalePolicy& p, const ScaleInput& in) {
  ScaleDecision d;
  const double per_node = in.gpus_per_node * p.target_share;
  int need_now = static_cast<int>(std::ceil(std::max(0.0, in.demand_gpus) / per_node - 1e-9));
  need_now = std::max(need_now, in.queue_nodes);
  int need = need_now;
  std::string why = "queue";
  if (p.mode != ScaleMode::kReactive && in.peak_forecast_gpus >= 0) {
    // The forecast (with its error margin) is what will be asked for: it needs no headroom of
    // its own; target_share keeps headroom over what is asked for now.
    int ahead = static_cast<int>(std::ceil(in.peak_forecast_gpus / in.gpus_per_node - 1e-9));
    if (ahead > need) {
      need = ahead;
      why = "forecast";
    }
  }
  int floor = p.MinimumAt(in.now_s);
  if (need < floor) {
    need = floor;
    why = floor > p.min_nodes ? "schedule" : "bound";
  }
  if (need > p.max_nodes) {
    need = p.max_nodes;
    why = "bound";
  }
  d.target = need;
  int have = in.ready + in.provisioning;
  if (need > have) {
    if (in.now_s - in.last_up_s < p.up_cooldown_s) {
      d.reason = "cooldown";
      return d;
    }
    d.delta = std::min(need - have, p.step_up);
    d.reason = why;
    return d;
  }
  if (need < have) {
    int removable = std::min({have - need, p.step_down, in.idle_removable});
    if (removable <= 0) {
      d.reason = "steady";  // the surplus is busy or not idle long enough
      return d;
    }
    if (in.now_s - in.last_down_s < p.down_cooldown_s) {
      d.reason = "cooldown";
      return d;
    }
    d.delta = -removable;
    d.reason = "idle";
    return d;
  }
  d.reason = "steady";
  return d;
}

}  // namespace gpufleet::sched
