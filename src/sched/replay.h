#pragma once
// `gpufleet replay`: a job trace replayed as a discrete-event simulation in virtual time (no
// sleeping) through the same queue, allocator, forecaster and scaling decision as the live
// controller, for one pool of identical nodes.
//
// Trace format (CSV with a header; rows in any order): submit_time,duration_s,gpus (seconds)
// and optionally gpus_per_node (the job's GPUs on each of its nodes: it divides gpus; empty or
// absent: one node, or whole nodes beyond a node's GPUs), team, gpu_model (ignored: a replay is
// one pool), movable (1 or 0, true or false). The Alibaba 2023 GPU trace (openb_pod_list_*.csv)
// is read with ParseOpenbTrace.

#include <atomic>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"
#include "sched/autoscaler.h"
#include "sched/pool.h"

namespace gpufleet::sched {

struct TraceJob {
  double submit_s = 0;
  double duration_s = 0;
  int gpus = 1;
  std::string team;
  int movable = -1;       // the trace's movable column: 1 or 0; -1: not given
  int gpus_per_node = 0;  // the trace's gpus_per_node column (spread over nodes); 0: not given
};

// Errors name the file, the line and the column.
Result<std::vector<TraceJob>> ParseTrace(std::string_view text, const std::string& name);
// What one replay takes, so that a trace (or its scaling) cannot make it run for ever: a job's
// run time and the span of the submissions, after --time-scale, and the jobs after
// --size-scale.
constexpr double kMaxReplaySpanS = 366 * 86400.0;
constexpr double kMaxReplayJobs = 10'000'000;
constexpr double kMaxSizeScale = 1000;
// Submit times beyond this many seconds (epoch milliseconds?) are refused: far enough out, a
// second no longer changes a double, and the replay's clock would stand still.
constexpr double kMaxSubmitS = 1e11;
// openb: name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,
// deletion_time,scheduled_time. Pods without GPUs or without a deletion time are skipped; a
// shared fraction of a GPU (gpu_milli < 1000) counts as one GPU (the allocator hands out whole
// GPUs); the run time is deletion minus scheduled time (creation when never scheduled); the
// team is the qos class.
Result<std::vector<TraceJob>> ParseOpenbTrace(std::string_view text, const std::string& name);

struct ReplayOptions {
  int gpus_per_node = 8;
  ScalePolicy policy;
  double time_scale = 1;         // arrivals this many times denser (submit times divided)
  double size_scale = 1;         // each job this many times (fractions: some jobs once more)
  double forecast_step_s = 300;  // the forecaster's step
  // What moving a job (consolidation) costs: its GPUs run this long without progress, on the
  // new node (a restart from its last checkpoint). Every trace job is taken as movable.
  double move_cost_s = 300;
  // The share of jobs without a movable column that are movable, chosen deterministically.
  double movable_share = 1;
  // How long a job that does not fit waits before nodes are kept for it (sched::Queue).
  double reserve_after_s = Queue::kDefaultReserveAfterS;
  // Nodes ready when the first job arrives (within the policy's bounds then); -1: its minimum.
  // A live pool's tune starts from the nodes it had.
  int initial_nodes = -1;
  // Demand (seconds, GPUs asked for) seen before the first job, oldest first: the forecaster
  // learns from it before the replay starts, as a live pool's forecaster had (a live tune
  // passes the pool's samples from before its window). Points at or after the first job's
  // submission are ignored. The forecast's MAPE and bias reported count the replay only.
  std::vector<std::pair<double, double>> demand_before;
  // When it turns true the replay stops and fails with kUnavailable (a controller stopping
  // while a tune runs). Null: never.
  const std::atomic<bool>* cancel = nullptr;
};

struct ReplayResult {
  std::string policy;
  size_t jobs = 0;                   // replayed (after size scaling)
  size_t unplaceable = 0;            // larger than the pool at max_nodes: left out, counted here
  double gpu_hours_provisioned = 0;  // nodes from the request to their removal
  double gpu_hours_busy = 0;
  double gpu_hours_idle = 0;
  // Where the idle hours went: nodes asked for and not ready yet, ready nodes running no job,
  // free GPUs of nodes running some job (fragmentation), and moved jobs restarting (their GPUs
  // are held but do no work: counted as idle, not busy).
  double gpu_hours_starting = 0, gpu_hours_empty = 0, gpu_hours_fragmented = 0;
  double gpu_hours_moving = 0;
  size_t jobs_moved = 0;  // moves by consolidation (a job may move more than once)
  size_t nodes_consolidated = 0;
  double wait_p50_s = 0, wait_p95_s = 0, wait_p99_s = 0, wait_mean_s = 0;
  size_t jobs_waited_over_lead_time = 0;
  size_t scale_events = 0;
  double forecast_mape = 0;  // NaN: not applicable (reactive, oracle)
  double forecast_bias = 0;
  std::string forecast_model;
  int peak_nodes = 0;
  double span_s = 0;  // virtual time simulated
};

Result<ReplayResult> Replay(std::vector<TraceJob> jobs, const ReplayOptions& options);

}  // namespace gpufleet::sched
