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

namespace gpufleet::sched {

enum class ScaleMode { kReactive, kPredictive, kOracle };
const char* ToString(ScaleMode m);

// A minimum that holds on some hours (UTC): e.g. 8 nodes from 08:00 to 18:00 on weekdays.
struct ScheduledMinimum {
  int nodes = 0;
  int from_hour = 0, to_hour = 24;  // [from, to)
  bool weekdays_only = false;
};

struct ScalePolicy {
  int min_nodes = 0;
  int max_nodes = 100;
  // GPUs asked for / GPUs provisioned that scaling aims at: the headroom over what is asked
  // for now. Its default depends on the mode (DefaultShare): reactive 0.8, the Cluster
  // Autoscaler's way of keeping room for the next lead time; predictive 1, as the forecast's
  // margin is its headroom. A share below 1 under a forecast keeps both, and on the bench's
  // traces makes predictive no better than reactive.
  double target_share = DefaultShare(ScaleMode::kPredictive);  // as `mode` below
  int step_up = 10;
  int step_down = 5;
  double up_cooldown_s = 0;
  double down_cooldown_s = 300;
  double lead_time_s = 600;  // from asking for a node to its being ready
  double idle_before_remove_s = 600;
  // predictive: what is planned for is the forecast's peak plus this many times its recent mean
  // shortfall (Forecaster::shortfall); lower trades queue wait for idle GPUs
  double forecast_margin = 4;
  // predictive: which shortfall the margin counts. false: the recent one, over the last few
  // hours whatever their time of day. true: that of the same hour of the day on the past days,
  // so that a rise that comes at the same hour every day (a working day's start) is planned
  // for before it comes, and the margin is small in the hours that have none.
  bool margin_by_hour = false;
  // Consolidation (sched/consolidate.h): a node using at most this share of its GPUs for
  // idle_before_remove, whose jobs are all movable and fit on other busy nodes, is emptied and
  // removed when the pool has more nodes than it needs. 0: never. The Cluster Autoscaler's
  // default threshold is 0.5.
  double consolidate_below = 0.5;
  double interval_s = 60;  // how often the autoscaler decides
  ScaleMode mode = ScaleMode::kPredictive;
  std::vector<ScheduledMinimum> schedule;
  static double DefaultShare(ScaleMode m) { return m == ScaleMode::kReactive ? 0.8 : 1.0; }
  // Checks the bounds; the message names the field.
  std::string Validate() const;
  int MinimumAt(double t_s) const;  // min_nodes or the schedule's, whichever is larger
};

// How a pool's nodes are started and stopped.
//   sim      simulated nodes, started (after the lead time) and stopped inside the controller;
//   command  programs the operator configures, like Slurm's ResumeProgram and SuspendProgram:
//            {pool} and {nodes} (space-separated) are replaced in the command line, and the
//            environment has GPUFLEET_POOL, GPUFLEET_CLUSTER, GPUFLEET_NODES, GPUFLEET_CONTROLLER
//            and (provision only) GPUFLEET_JOIN_TOKEN, a join token for the new nodes.
struct ActuatorSpec {
  std::string type = "sim";
  std::string provision;    // command
  std::string deprovision;  // command
  double timeout_s = 300;   // a command that runs longer is killed and reported as failed
};

// Tuning on a schedule (`gpufleet scaling tune --apply`, by the autoscaler): every `every_s` the
// pool's jobs of the last `window_s` are replayed under the grid of target shares (and forecast
// margins), and the cheapest setting whose p95 queue wait is within `wait_p95_s` is applied when
// it is cheaper than the policy's. every_s 0: never (the default).
struct TuneSchedule {
  double every_s = 0;
  double wait_p95_s = 60;
  double window_s = 7 * 86400;
};

// A pool's autoscaling: the policy, how it acts, and whether it acts at all.
struct PoolScaling {
  std::string pool;
  ScalePolicy policy;
  ActuatorSpec actuator;
  TuneSchedule tune;
  bool enabled = true;  // false: decisions are made and shown, nothing is done
  int64_t updated_ms = 0;
  std::string Validate() const;  // the policy's and the actuator's checks
};

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
