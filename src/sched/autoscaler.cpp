#include "sched/autoscaler.h"

#include <algorithm>
#include <cmath>

namespace gpufleet::sched {

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
