#pragma once
// Jobs (GPU requests) on the live fleet: submitted through the API, queued per pool, placed on
// the GPUs of ready nodes by the same queue and allocator as `gpufleet replay` (src/sched),
// released when they end, and requeued when their node stops being able to run them.
// Every change is stored (a JSON document per job), so jobs survive a controller restart.
// Ended jobs (completed, cancelled) are kept for a retention time, 7 days unless told, and then
// dropped from memory and from the store, so a controller that runs for months stays small.

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "fleet/fleet.h"
#include "fleet/teams.h"
#include "store/store.h"

namespace gpufleet::workload {

struct JobSpec {
  std::string team;
  std::string project;
  std::string cluster;  // the pool is chosen in it when `pool` is empty
  std::string pool;
  std::string gpu_model;  // a catalogue id; narrows the pool when choosing one
  int gpus = 1;
  // GPUs on each node: a job spread over gpus / gpus_per_node distinct nodes (it must divide
  // gpus and be at most the pool's node size). 0: the default, one node up to a node's GPUs,
  // whole nodes beyond (its GPUs a multiple of the node's). Stored as 0 where it asks for what
  // the default gives.
  int gpus_per_node = 0;
  int priority = 0;         // higher first
  int64_t duration_ms = 0;  // expected; the job ends after it. 0: runs until cancelled
  // It may be moved to another node of its pool (it checkpoints, or restarts cheaply), so that
  // consolidation can empty a lightly used node; a moved job keeps the run time it has done.
  bool movable = false;
  // On a simulated pool: how its GPUs behave (model/sim_profile.h); empty: "training".
  // Refused on a pool with real nodes.
  std::string sim_profile;
};

enum class JobState { kQueued, kRunning, kCompleted, kCancelled };
std::string_view ToString(JobState s);

struct Placement {
  std::string node;
  std::vector<int> gpus;  // GPU indices on the node
};

struct Job {
  int64_t id = 0;
  JobSpec spec;  // spec.pool is the pool it was given to
  JobState state = JobState::kQueued;
  int64_t submit_ms = 0;  // entered the queue (first time)
  int64_t queued_ms = 0;  // entered the queue (last time: after a requeue)
  int64_t start_ms = 0;   // last start
  int64_t end_ms = 0;
  int64_t wait_ms = 0;   // queue wait over all its starts
  double gpu_hours = 0;  // GPU-hours run, over all its starts
  int requeues = 0;
  int moves = 0;              // moved by consolidation
  int64_t done_ms = 0;        // run time done before its last start (a moved job's progress)
  int64_t alloc_wait_ms = 0;  // the queue wait before its current allocation (0 after a move)
  std::string reason;         // why it is in its state
  std::vector<Placement> placement;
  // A job another scheduler runs (SyncExternal): "slurm" and that scheduler's job id and user.
  // Empty source: gpufleet's own queue placed it.
  std::string source;
  std::string external_id;
  std::string user;
};

// A job as another scheduler (Slurm) shows it on one poll, for SyncExternal.
struct ExternalJob {
  std::string id;  // the scheduler's job id
  JobSpec spec;    // team, project, pool (in the cluster synced), gpus, gpus_per_node
  std::string user;
  JobState state = JobState::kQueued;
  int64_t submit_ms = 0, start_ms = 0, end_ms = 0;  // 0: not known (now is taken)
  std::vector<Placement> placement;                 // when running
  std::string reason;                               // why it waits, or how it ended
};

// One allocation that ended: a job's GPUs from one start (or move) to its end, requeue or
// move. The usage ledger (src/usage) adds what the GPUs did in that time.
struct EndedAllocation {
  int64_t job = 0;
  std::string team, project, cluster, pool, gpu_model;
  int gpus = 0;
  std::vector<Placement> placement;
  int64_t start_ms = 0, end_ms = 0, wait_ms = 0;
  std::string outcome;              // "completed", "cancelled", "requeued", "moved"
  std::string source, external_id;  // Job::source and external_id
};

struct JobFilter {
  std::string state, team, pool, cluster;
  std::string source;                 // "gpufleet" (its own queue's), "slurm"; empty: any
  std::vector<std::string> clusters;  // a scoped token's clusters; empty: all
};

// What a pool is asked for now, for the autoscaler.
struct PoolDemand {
  int running_gpus = 0;
  int queued_gpus = 0;
  int queued_jobs = 0;
  int64_t oldest_queued_ms = 0;       // when the longest-waiting job entered the queue; 0: none
  int busy_nodes = 0;                 // nodes running at least one of the pool's jobs
  std::map<int, int> queued_by_size;  // GPUs per job -> queued jobs (sched::QueueNodes)
  std::map<int, int> queued_gpus_by_size;  // the same GPUs per job -> those jobs' GPUs
  // The 95th percentile of the queue waits of the last hour: each start's wait in the last
  // hour, and each queued job's wait so far (so a queue that starts nothing shows). 0: none.
  int64_t queue_wait_p95_ms = 0;
};

class JobService {
 public:
  // `drain_timeout_ms`: how long a drain waits for a node's jobs before requeueing them;
  // `retention_ms`: how long an ended job is kept after its end; `reserve_after_ms`: how long
  // a job that does not fit waits before nodes are kept for it (sched::Queue).
  JobService(FleetService& fleet, store::JobStore& store, std::shared_ptr<Clock> clock,
             int64_t drain_timeout_ms = 10 * 60'000, int64_t retention_ms = kDefaultRetentionMs,
             int64_t reserve_after_ms = kDefaultReserveAfterMs);
  static constexpr int64_t kDefaultRetentionMs = 7 * 86'400'000LL;
  static constexpr int64_t kDefaultReserveAfterMs = 10 * 60'000;
  int64_t reserve_after_ms() const { return reserve_after_ms_; }
  static constexpr int64_t kMaxDurationMs = 365 * 86'400'000LL;  // a job's `duration`
  static constexpr int64_t kWaitWindowMs = 3'600'000;            // PoolDemand::queue_wait_p95_ms

  Status Load();  // the stored jobs; running ones keep their GPUs
  // Several controllers: the leader alone submits, places and ends jobs (the others' API hands
  // it the requests); the others call Follow when the jobs table changes, and take each job
  // stored since their last call (updated_ms, less a few seconds for writes still committing)
  // over what they have; ended ones past the retention time go as they would on the leader.
  // Not while this controller leads: its jobs are the ones being stored.
  Status Follow();
  static constexpr int64_t kFollowOverlapMs = 5'000;
  // Where each job's allocation is recorded (queued, started on its nodes and GPUs, requeued,
  // ended), with "scheduler" as the actor; none when null. Set before Tick runs.
  void set_audit(store::AuditLog* audit) { audit_ = audit; }
  // The teams a job must name (with one of the team's projects); none checked when null. Set
  // before Submit is called.
  void set_teams(const TeamService* teams) { teams_ = teams; }
  // Checks the request (a known pool, GPUs that fit the pool's nodes), queues it and tries to
  // place it at once.
  Result<Job> Submit(JobSpec spec);
  // A queued job leaves the queue; a running one frees its GPUs. kConflict when it has ended.
  Result<Job> Cancel(int64_t id);
  Result<Job> Get(int64_t id) const;
  std::vector<Job> List(const JobFilter& filter) const;
  // The jobs `filter` matches, newest first: `limit` of them from `offset`, and in `total` how
  // many match in all. Only the page is copied: the jobs' lock is held while it walks a week
  // of ended jobs, and the jobs pass waits on it.
  std::vector<Job> List(const JobFilter& filter, size_t offset, size_t limit, size_t& total) const;
  // Ends jobs whose duration has passed, requeues jobs on nodes that can no longer run them
  // (unhealthy, unreachable, drained and the like; a cordoned node keeps its jobs, a draining
  // one until its drain times out), finishes the drains of nodes whose jobs are gone, and
  // places queued jobs; once a minute, drops the jobs that ended more than the retention time
  // ago. Returns how many jobs changed state.
  int Tick();
  // Another scheduler's jobs: `seen` is every job of `source` in `cluster` that the scheduler
  // shows now. Jobs not known are added (ended ones are not), known ones follow their state
  // (a start, a requeue, an end, other nodes), and known live ones it no longer shows have
  // ended now. gpufleet never places, requeues or ends them itself; their nodes are busy while
  // they run, their pool's demand counts them, and their ended allocations go to the ledger.
  // Not audited: they are the scheduler's record, not gpufleet's changes.
  struct SyncCounts {
    int added = 0, started = 0, ended = 0, changed = 0;
  };
  SyncCounts SyncExternal(const std::string& source, const std::string& cluster,
                          const std::vector<ExternalJob>& seen);
  // The allocations that ended since the last call, oldest first (at most 100,000 are kept
  // between calls; older ones are dropped with a warning).
  std::vector<EndedAllocation> TakeEnded();
  // Each node's GPUs by index: the running job's id, 0 when free.
  std::map<std::string, std::vector<int64_t>> Allocation() const;
  // What each running job's GPUs should show on a simulated node, by node: the GPU, the job,
  // its profile (the default resolved) and its start.
  struct GpuLoad {
    int gpu = 0;
    int64_t job = 0;
    std::string profile;
    int64_t since_ms = 0;
  };
  std::map<std::string, std::vector<GpuLoad>> Loads() const;
  // Whether a node runs a job (what the fleet asks before completing a drain). Reads a set kept
  // apart from the jobs, so the fleet may call it under its own lock.
  bool Busy(const std::string& node) const;
  // Whether a draining node must wait for something besides its jobs before it is drained (the
  // Slurm bridge: until Slurm says it is drained). Set before Tick runs; must not call back
  // into the fleet or the jobs.
  void set_drain_hold(std::function<bool(const std::string& node)> hold) {
    hold_ = std::move(hold);
  }
  // The next drain of `node` requeues its jobs after `timeout_ms` instead of the service's
  // drain timeout (a rollout's strategy.drain_timeout); forgotten once the drain is over.
  void SetDrainTimeout(const std::string& node, int64_t timeout_ms);

  // Autoscaling. Demand per pool (pools with no jobs are absent).
  std::map<std::string, PoolDemand> Demand() const;
  // The pool's ready nodes that have run no job for at least `idle_ms` (a node that has never
  // run one counts from when it became ready), the longest idle first.
  std::vector<std::string> IdleNodes(const std::string& pool, int64_t idle_ms) const;
  // Drains up to `n` of those, so that no job is placed on them while they are removed;
  // returns the nodes drained (idle, so drained at once).
  std::vector<std::string> DrainIdle(const std::string& pool, int n, int64_t idle_ms,
                                     const std::string& actor);

  // Consolidation (sched/consolidate.h). Keeps, for each ready node of the pool, since when it
  // has been lightly used: at most `below` of its GPUs in use, by movable jobs on it alone.
  // Then empties up to `max_nodes` of those light for at least `light_ms` whose jobs fit on the
  // pool's other busy nodes: moves the jobs there and drains the emptied nodes (at once: they
  // are idle). max_nodes 0: keeps the times only.
  struct Consolidation {
    std::vector<std::string> nodes;  // emptied and drained
    std::string detail;              // which job went where
    // Nodes emptied whose drain failed or did not complete at once (so not removed), and why.
    std::string failed;
  };
  Consolidation Consolidate(const std::string& pool, int gpus_per_node, double below,
                            int64_t light_ms, int max_nodes, const std::string& actor);

 private:
  int ScheduleLocked(int64_t now, std::vector<int64_t>& changed);
  void TakeLocked(const JobRecord& r);  // a stored job into jobs_ (Load, Follow)
  int PruneLocked(int64_t now);         // ends retained past retention_ms_ leave; how many
  void UpdateBusyLocked(int64_t now);
  std::vector<std::string> IdleLocked(const std::string& pool, int64_t idle_ms, int64_t now) const;
  // Saves these jobs and any whose earlier save failed; a failure keeps them all for the next.
  void Persist(const std::vector<int64_t>& ids);
  void EndLocked(Job& job, JobState state, int64_t now, const std::string& reason);
  // Records the end of a running job's current allocation (before its placement changes).
  void RecordEndLocked(const Job& job, int64_t now, const char* outcome);
  void RequeueLocked(Job& job, int64_t now, const std::string& why);
  void MoveLocked(Job& job, Placement to, const std::string& from, int64_t now);
  // SyncExternal's step for one known job; whether it changed.
  bool FollowLocked(Job& job, const ExternalJob& seen, int64_t now, SyncCounts& counts);

  FleetService& fleet_;
  store::JobStore& store_;
  std::shared_ptr<Clock> clock_;
  mutable std::mutex mu_;
  int64_t drain_timeout_ms_;
  std::map<std::string, int64_t> drain_timeouts_;  // by node; guarded by mu_
  int64_t retention_ms_;
  int64_t reserve_after_ms_;
  int64_t last_prune_ms_ = 0;    // guarded by mu_
  int64_t followed_ms_ = 0;      // the newest updated_ms taken from the store; guarded by mu_
  std::map<int64_t, Job> jobs_;  // guarded by mu_
  // Each start of the last hour: when, in which pool, after how long a wait (PoolDemand).
  struct Start {
    int64_t time_ms;
    std::string pool;
    int64_t wait_ms;
  };
  std::deque<Start> starts_;            // guarded by mu_; oldest first
  std::vector<EndedAllocation> ended_;  // guarded by mu_; TakeEnded
  // The queued and running ones of jobs_, by id: what every pass walks. Ended jobs stay in
  // jobs_ for the retention time (a week: hundreds of thousands on a busy fleet).
  std::map<int64_t, Job*> live_;  // guarded by mu_
  int64_t next_id_ = 1;           // guarded by mu_
  // Other schedulers' jobs kept in jobs_, by "source/cluster/external id"; guarded by mu_.
  std::map<std::string, int64_t> external_;
  std::set<int64_t> unsaved_;  // jobs whose last save failed; guarded by mu_
  store::AuditLog* audit_ = nullptr;
  const TeamService* teams_ = nullptr;
  std::function<bool(const std::string&)> hold_;
  // What was last audited of each live job: its state and placement.
  std::map<int64_t, std::string> audited_;         // guarded by mu_
  std::map<std::string, int64_t> last_busy_ms_;    // node -> last seen running a job; mu_
  std::map<std::string, int64_t> light_since_ms_;  // node -> lightly used since; mu_
  mutable std::mutex busy_mu_;                     // taken last, never while calling out
  std::set<std::string> busy_;                     // nodes running jobs; guarded by busy_mu_
};

}  // namespace gpufleet::workload
