#pragma once
// Live autoscaling of pools: each pool with a scaling policy gets a decision every policy
// interval from the same demand tracker and decision function as `gpufleet replay`
// (src/sched), fed by the jobs the workload component runs and queues. Nodes are started by
// the pool's actuator (`sim`: simulated agents inside the controller; `command`: the operator's
// provision and deprovision programs), recorded as `provisioning` until their agents register,
// and removed only when idle: drained first (so no job lands on them), then deprovisioned and
// retired. Every action, and every change of what holds a pool back, is a scale event with its
// reason, stored with an audit record; one sample per decision is kept as the pool's history.
//
// Thread-safe. Actuator calls run on the service's own worker thread (a command may run for its
// timeout); Tick runs on the controller's monitor thread.

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "fleet/fleet.h"
#include "sched/autoscaler.h"
#include "sched/forecast.h"
#include "sched/tune.h"
#include "store/store.h"
#include "workload/jobs.h"

namespace gpufleet::scaling {

// The actor of what the autoscaler does by itself (events, audit records, drains).
inline constexpr const char* kAutoscaler = "autoscaler";

// What an actuator is asked to do: start or stop these nodes of this pool.
struct ActuatorRequest {
  std::string pool, cluster, gpu_model;
  int gpus_per_node = 8;
  std::vector<std::string> nodes;
  std::string controller;  // the URL agents connect to
  std::string join_token;  // provision only: the new nodes register with it
  double lead_time_s = 0;
  sched::ActuatorSpec spec;
};

// Starts and stops nodes. Calls may block (a command runs up to its timeout); a returned error
// is reported as a scale event and the nodes are retired (provision) or left drained
// (deprovision) for an operator to look at.
class Actuator {
 public:
  virtual ~Actuator() = default;
  virtual Status Provision(const ActuatorRequest& request) = 0;
  virtual Status Deprovision(const ActuatorRequest& request) = 0;
};

// Runs the spec's provision and deprovision commands (see sched::ActuatorSpec).
std::unique_ptr<Actuator> MakeCommandActuator();

struct ScalingOptions {
  std::string controller_url;             // told to actuators, for the new nodes' agents
  std::shared_ptr<Actuator> sim;          // the `sim` actuator; null: pools may not use it
  double forecast_step_s = 300;           // the forecaster's step (as `gpufleet replay`'s)
  int64_t history_ms = 8 * 86'400'000LL;  // samples kept: a week for the weekly model, and a day
};

// One decision's picture of a pool, as kept in its history (and shown by the API).
struct Sample {
  int64_t time_ms = 0;
  int ready = 0, provisioning = 0, other = 0;  // other: live nodes that are neither
  int target = 0;                              // nodes the decision wanted
  double demand_gpus = 0, running_gpus = 0, queued_gpus = 0;
  double forecast_gpus = -1;  // the planning peak; < 0: none (reactive, or still learning)
  double oldest_wait_s = 0;   // the longest-waiting queued job's wait so far
};

// A manual scale kept for a while: the autoscaler keeps at least (after a scale-up) or at most
// (after a scale-down) the manual target until `until_ms`.
struct ManualKeep {
  int min_nodes = -1, max_nodes = -1;  // < 0: no such bound
  int64_t until_ms = 0;                // 0: none
  std::string actor;
};

struct PoolStatus {
  sched::PoolScaling scaling;
  ManualKeep keep;
  int gpus_per_node = 8;
  Sample now;                     // the last decision's, with the node counts as they are now
  sched::ScaleDecision decision;  // the last one
  int64_t last_up_ms = 0, last_down_ms = 0;
  sched::ForecastStats forecast;
  size_t forecast_steps = 0;  // steps the forecaster has seen
  std::string last_error;     // the last actuator failure, until an action succeeds
};

// Tuning a pool's policy on its own past (sched/tune.h): the pool's jobs of the last `window_ms`
// replayed under the grid, with the pool's node size and every other policy field as set.
struct TuneRequest {
  double wait_p95_s = 60;                // the objective
  int64_t window_ms = 7 * 86'400'000LL;  // how far back (jobs are kept 7 days unless told)
  bool apply = false;                    // set the chosen share (and margin) on the policy
};

struct TuneReport {
  std::string pool;
  int gpus_per_node = 8;
  size_t jobs = 0;                 // replayed
  int64_t from_ms = 0, to_ms = 0;  // the first job's submission, and now
  sched::TuneResult result;
  bool applied = false;
  std::string not_applied;           // why, when asked to apply and it was not
  sched::PoolScaling before, after;  // after == before unless applied
};

// The pool's history as a replay trace, in epoch seconds (so that a replay applies the policy's
// hour-based minimums at the hours they hold): every job submitted at or after `from_ms`, with
// its run time: an ended job's over all its starts; a running or queued job's expected
// duration where it gives one (it ends after it), else a running job's run time so far. Queued
// jobs without a duration, and jobs that ended without running, are left out: there is no run
// time to replay. A job's movable flag and GPUs per node are kept.
std::vector<sched::TraceJob> HistoryTrace(const std::vector<workload::Job>& jobs, int64_t from_ms,
                                          int64_t now_ms);

// Nodes started or stopped by name (ScalingService::StartNodes, StopNodes).
struct NamedScale {
  std::vector<std::string> acted;    // handed to the actuator
  std::vector<std::string> already;  // running or starting (start), gone or stopping (stop)
};

struct ScaleRequest {
  std::optional<int> target;  // nodes wanted
  std::optional<int> delta;   // or nodes to add (> 0) or remove (< 0)
  int64_t keep_ms = 0;        // > 0: the autoscaler keeps the target this long (ManualKeep)
};

class ScalingService {
 public:
  ScalingService(FleetService& fleet, workload::JobService& jobs, store::ScalingStore& store,
                 store::AuditLog& audit, std::shared_ptr<Clock> clock, ScalingOptions options);
  ~ScalingService();

  Status Load();  // the policies, and each pool's history into its forecaster
  // The policies another controller set since (newer than the one held): taken, each pool's
  // history kept.
  Status ReloadPolicies();
  // The actuator worker; and the simulated nodes the autoscaler had started before a restart
  // (sim actuator, still recorded, not connected) are started again.
  void Start();
  // The URL new nodes' agents connect to (known once the API listens); before Start.
  void set_controller_url(std::string url) { options_.controller_url = std::move(url); }
  void Stop();  // waits for the actuator call in flight; a tune under way is cancelled

  // Policies. Set checks the pool exists and the policy is valid (kInvalidArgument naming the
  // field); the `sim` actuator only where the controller has one.
  // Check is Set's validation without the pool lookup (an apply checks before it creates pools).
  // `replaces`: the policy this one replaces must still be that one (kConflict otherwise),
  // checked under the same lock as the set, so a change made meanwhile is not overwritten.
  Status Check(const sched::PoolScaling& scaling) const;
  Result<sched::PoolScaling> SetPolicy(sched::PoolScaling scaling, const std::string& actor,
                                       bool* changed = nullptr,
                                       const sched::PoolScaling* replaces = nullptr);
  Status DeletePolicy(const std::string& pool, const std::string& actor);
  std::vector<sched::PoolScaling> Policies() const;

  std::vector<PoolStatus> Pools() const;
  Result<PoolStatus> Get(const std::string& pool) const;
  // Manual scaling, within the policy's bounds; scale-down takes idle nodes only (a busy pool
  // shrinks by what is idle, and the event says so). Without keep_ms the autoscaler goes on
  // deciding (a surplus goes once idle); with it, the target is a floor (up) or a ceiling
  // (down) until then. A later manual scale replaces the keep. Returns the event.
  Result<std::string> Scale(const std::string& pool, const ScaleRequest& request,
                            const std::string& actor);
  // Slurm's power saving (ResumeProgram and SuspendProgram call `gpufleet slurm resume|suspend`):
  // nodes started or stopped by name through their pool's actuator, whatever the policy would
  // decide (Slurm decides: keep the policy disabled so that the two do not both scale; its
  // bounds do not apply). Idempotent, as Slurm may call twice: a node running or starting is not
  // started again, nor a retired, unknown or stopping one stopped. A node gpufleet does not know,
  // or `pool` when given, starts in `pool`. Everything is checked before anything is done:
  // kInvalidArgument an unknown node and no pool; kNotFound no such pool; kConflict a pool
  // without a scaling policy (its actuator) or whose actuator this controller lacks. Each pool's
  // nodes are one scale event, reason "slurm".
  Result<NamedScale> StartNodes(const std::vector<std::string>& names, const std::string& pool,
                                const std::string& actor);
  Result<NamedScale> StopNodes(const std::vector<std::string>& names, const std::string& actor);
  Result<std::vector<ScaleEventRecord>> Events(const std::string& pool, int limit) const;
  std::vector<Sample> History(const std::string& pool, int64_t since_ms) const;

  // Replays the pool's history under a grid of shares (and margins) and, when asked and one
  // meets the objective with fewer idle GPU-hours than the policy as it is, applies the cheapest (a
  // policy event and, through the API, an audit record). kNotFound: no policy; kConflict: fewer
  // than 20 jobs to replay, another tune running, or the policy changed while tuning. Runs the
  // replays on its own threads; one at a time.
  Result<TuneReport> Tune(const std::string& pool, const TuneRequest& request,
                          const std::string& actor);

  // Decisions that are due, and nodes that never registered. Called by the monitor loop.
  void Tick();

 private:
  struct PoolState {
    sched::PoolScaling scaling;
    std::unique_ptr<sched::DemandTracker> tracker;
    std::deque<Sample> history;  // the last history_ms, oldest first
    sched::ScaleDecision decision;
    Sample now;
    int64_t next_decision_ms = 0;
    int64_t last_up_ms = 0, last_down_ms = 0;
    std::string held;  // the last recorded "held back" decision (reason/target): not repeated
    std::string last_error;
    ManualKeep keep;
    int64_t next_tune_ms = 0;  // the policy's tune.every: when the next is due; 0: not planned
  };
  struct Work {
    std::string tune;  // a pool to tune on schedule (AutoTune) instead of an actuator call
    bool provision = true;
    ActuatorRequest request{};
    std::string actor{};
  };
  struct Counts {
    int ready = 0, provisioning = 0, other = 0;
    std::vector<std::pair<std::string, int64_t>> provisioning_since;
  };

  Counts CountLocked(const std::string& pool) const;
  PoolStatus StatusLocked(const std::string& name, const PoolState& st, int gpus_per_node) const;
  void DecideLocked(PoolState& st, const Pool& pool, const Counts& counts,
                    const workload::PoolDemand& demand, int64_t now);
  // Adds `n` nodes to the `have` ready and starting: recorded as provisioning, then handed to
  // the worker. Returns how many.
  int ProvisionLocked(PoolState& st, const Pool& pool, int have, int n, const std::string& reason,
                      const std::string& detail, const std::string& actor, std::string& event);
  // `names`, recorded as provisioning, get a join token and go to the worker with a scale_up
  // event (else the nodes are retired and st.last_error says why). False when no token.
  bool LaunchLocked(PoolState& st, const Pool& pool, const std::vector<std::string>& names,
                    int have, const std::string& reason, const std::string& detail,
                    const std::string& actor, std::string& event);
  // The pools StartNodes and StopNodes act on, each with a policy and an actuator here: all of
  // them, or the first that is not.
  struct NamedPool {
    PoolState* state = nullptr;
    Pool pool;
  };
  Result<std::map<std::string, NamedPool>> NamedPoolsLocked(
      const std::map<std::string, std::vector<std::string>>& by_pool);
  // Drains up to `n` idle nodes and hands them to the worker. Returns how many.
  int RemoveLocked(PoolState& st, const Pool& pool, int have, int n, const std::string& reason,
                   const std::string& detail, const std::string& actor, std::string& event);
  // Consolidation after a decision (sched/consolidate.h): with a surplus over the target,
  // nothing queued or starting and the down cooldown over, empties lightly used nodes by moving
  // their movable jobs and removes them; otherwise only keeps the nodes' light times.
  void ConsolidateLocked(PoolState& st, const Pool& pool, int have, int provisioning,
                         const sched::ScaleDecision& decision, const workload::PoolDemand& demand,
                         int64_t now);
  // Queues an actuator call for `nodes` of `pool`.
  void Enqueue(bool provision, const Pool& pool, const PoolState& st,
               std::vector<std::string> nodes, std::string join_token, double lead_time_s,
               const std::string& actor);
  std::string RecordEvent(const std::string& pool, const std::string& kind, int delta, int from,
                          int to, const std::string& reason, const std::string& detail,
                          const std::vector<std::string>& nodes, const std::string& actor,
                          const ManualKeep* keep = nullptr);
  Actuator* ActuatorFor(const sched::ActuatorSpec& spec);
  void NewTracker(PoolState& st) const;
  void Worker();
  // A scheduled tune (the policy's tune.every), on the worker: Tune with apply, as the
  // autoscaler, and a `tune` event that says what it found.
  Result<TuneReport> ApplyTuned(TuneReport rep, const TuneRequest& req, const std::string& actor);
  void AutoTune(const std::string& pool);
  void Resume();
  void Run(const Work& w);

  FleetService& fleet_;
  workload::JobService& jobs_;
  store::ScalingStore& store_;
  store::AuditLog& audit_;
  std::shared_ptr<Clock> clock_;
  ScalingOptions options_;
  std::unique_ptr<Actuator> command_;

  std::mutex tune_mu_;     // held by the one tune running (try_lock: not waited for)
  mutable std::mutex mu_;  // taken before the jobs' and the fleet's locks, never after
  std::map<std::string, PoolState> pools_;
  std::set<std::string> named_stops_;  // StopNodes' nodes until their actuator call returns
  int64_t next_retain_ms_ = 0;

  std::mutex work_mu_;  // taken last
  std::condition_variable work_cv_;
  std::deque<Work> work_;
  bool stopping_ = false;
  std::atomic<bool> cancel_tunes_{false};  // set by Stop(): a tune under way gives up
  std::thread worker_;
};

}  // namespace gpufleet::scaling
