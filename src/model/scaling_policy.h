#pragma once
// A pool's autoscaling as a value: its policy (bounds, steps, cooldowns, lead time, the mode and
// its forecast margin, a schedule of minimums), how its nodes are started and stopped, and its
// tuning schedule; and their JSON, one parser for the API, the stored document and a fleet
// file's `scaling:` block (config turns its YAML into JSON), so the three accept the same
// fields and say the same things about bad ones. The decisions over these values are sched/
// (autoscaler.h).
//
//   {"mode": "predictive", "min_nodes": 2, "max_nodes": 40, "target_share": 0.8,
//    "step_up": 10, "step_down": 5, "up_cooldown": "0s", "down_cooldown": "5m",
//    "lead_time": "10m", "idle_before_remove": "10m", "interval": "1m", "enabled": true,
//    "schedule": [{"nodes": 8, "from": 8, "to": 18, "weekdays": true}],
//    "actuator": {"type": "command", "provision": "...", "deprovision": "...", "timeout": "5m"}}
//
// Durations are strings ("90s", "5m", "2h") or numbers of seconds. Every field is optional and
// takes its default (ScalePolicy's); unknown fields are errors.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace gpufleet {

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

// On an error, `field` (when given) is set to the offending field's path, e.g. "actuator.type"
// or "schedule[1].to", and the message starts with it.
Result<PoolScaling> ParsePoolScaling(std::string_view json, std::string* field = nullptr);
std::string PoolScalingJson(const PoolScaling& s);  // durations as strings, e.g. "10m"
std::string FormatSeconds(double s);                // 600 -> "10m", 90 -> "90s", 0.5 -> "500ms"

}  // namespace gpufleet
