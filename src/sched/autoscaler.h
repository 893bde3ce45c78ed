#pragma once
// The scaling decision for one pool, as a pure function of what the pool looks like now, what
// it is asked for, and (predictive) what it will be asked for within the provisioning lead time.
//
//   need_now  = ceil(demand now / (gpus per node x target share)), and at least the nodes the
//               queue needs as the pool is packed now (QueueNodes: a queued whole-node job
//               waits for a whole node even when the pool's free GPUs add up to more)
//   need      = need_now                                         (reactive)
//             = max(need_now, ceil(peak forecast / gpus per node))  (predictive, oracle)
// where the peak forecast covers the next lead time + interval and includes the forecast's
// margin (the oracle's is exact): it is what will be asked for, so it gets no headroom.
// clamped to [min, max] (and to the schedule's minimum). Up: at most step_up nodes, after the
// up cooldown. Down: at most step_down nodes, after the down cooldown, and only nodes that have
// run no job for idle_before_remove: a node with a running job is never removed (consolidation
// first moves a lightly used node's movable jobs elsewhere: sched/consolidate.h).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/scaling_policy.h"

namespace gpufleet::sched {

// The policy's value types (model/scaling_policy.h), as sched has always named them.
using gpufleet::ActuatorSpec;
using gpufleet::PoolScaling;
using gpufleet::ScaleMode;
using gpufleet::ScalePolicy;
using gpufleet::ScheduledMinimum;
using gpufleet::ToString;
using gpufleet::TuneSchedule;

struct ScaleInput {
  double now_s = 0;
  int gpus_per_node = 8;
  int ready = 0, provisioning = 0;
  double demand_gpus = 0;          // running + queued now
  int queue_nodes = -1;            // QueueNodes(); < 0: not known
  double peak_forecast_gpus = -1;  // over the next lead time + interval; < 0: none
  int idle_removable = 0;          // ready nodes idle for at least idle_before_remove
  double last_up_s = -1e18, last_down_s = -1e18;
};

struct ScaleDecision {
  int delta = 0;       // > 0: add nodes; < 0: remove idle nodes
  int target = 0;      // nodes wanted (after bounds)
  std::string reason;  // queue, forecast, bound, schedule, idle, cooldown, steady
};

ScaleDecision Decide(const ScalePolicy& policy, const ScaleInput& in);

// The nodes a pool needs for its queue to fit as it is packed now: the ready nodes running jobs,
// plus the queued jobs of up to a node packed into whole nodes, plus whole nodes for the larger
// ones. `queued_by_size`: GPUs per job -> jobs still queued after a scheduling pass (so none of
// them fits where there is room now). 0 when nothing is queued.
int QueueNodes(int busy_nodes, const std::map<int, int>& queued_by_size, int gpus_per_node);
// A queued job's key in that map: its GPUs; a job spread over m nodes (a `gpus_per_node` below
// its GPUs and the node's) counts as m whole nodes, m x the node's GPUs: it needs m distinct
// nodes, which m new empty ones always are.
int QueueSize(int gpus, int job_gpus_per_node, int gpus_per_node);

}  // namespace gpufleet::sched
