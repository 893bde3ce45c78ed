#pragma once
// Tuning a pool's policy by replaying what it was asked for: the same jobs (a trace, or the
// pool's own job history on the live controller) replayed under a grid of target shares (and,
// predictive, forecast margins), everything else as the policy has it. The cheapest setting,
// by idle GPU-hours, whose p95 queue wait stays within an objective is the one proposed. This
// is what bench/replay.sh does after the fact; here an operator does it on the pool's past and
// applies it to its future (docs/scaling.md measures how well that carries over).

#include <string>
#include <vector>

#include "common/result.h"
#include "sched/replay.h"

namespace gpufleet::sched {

struct TuneOptions {
  ReplayOptions replay;    // the policy as it is; its share and margin are what is varied
  double wait_p95_s = 60;  // the objective
  // The grid. Empty: shares 0.6 to 1.0 in steps of 0.05 (reactive: 0.2 to 1.0); margins
  // (predictive only) 0.5, 0.75, 1, 1.5, 2, 2.5, 3, 4, 5, 6 and 8 mean shortfalls, each recent
  // and by hour of the day (margin_by_hour: false and true).
  std::vector<double> shares, margins;
  std::vector<bool> margin_by_hour;
  int threads = 0;  // replays at once; 0: one per core, at most 8
};

struct TuneCandidate {
  double target_share = 1;
  double forecast_margin = 0;   // the policy's, where the mode has no forecast
  bool margin_by_hour = false;  // likewise
  ReplayResult result;
  bool meets = false;  // p95 wait within the objective
};

struct TuneResult {
  TuneCandidate current;            // the policy as it is
  std::vector<TuneCandidate> grid;  // share-major, margins within, recent before by hour
  // The cheapest that meets the objective (ties: the lower p95, then the least change from the
  // current setting); -1: none does.
  int chosen = -1;
  int closest = -1;           // none does: the lowest p95 (then the cheapest)
  double replay_seconds = 0;  // wall time, all replays
};

// As JSON: {"mode", "jobs", "simulated_hours", "objective": {"wait_p95_s"}, "current",
// "chosen" and "closest" (null where none), "saving" (the chosen's idle GPU-hours under the
// current's, as a fraction; null where none), "grid", "replay_seconds"}; a candidate is
// {"target_share", "forecast_margin" and "margin_by" (recent or hour; both null but for
// predictive), "gpu_hours_provisioned",
// "gpu_hours_idle", "wait_p95_s", "wait_p99_s", "jobs_waited_over_lead_time", "scale_events",
// "meets"}. The API adds the pool's fields to the same object.
std::string TuneJson(const TuneResult& result, ScaleMode mode, double wait_p95_s);

// kInvalidArgument for a bad policy, objective or grid value (naming it). The jobs are copied
// into each replay.
Result<TuneResult> Tune(const std::vector<TraceJob>& jobs, const TuneOptions& options);

}  // namespace gpufleet::sched
