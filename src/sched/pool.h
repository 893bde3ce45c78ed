#pragma once
// A pool's GPUs as the scheduler sees them, the job queue and the allocator: pure logic, no
// I/O, no clock of its own (times are passed in), so the live controller and `gpufleet replay`
// run the same code.
//
// Placement rules: a job of up to one node's GPUs goes on one node (best fit: the node with the
// fewest free GPUs that still fits, which keeps whole nodes free for large jobs and for
// scale-down); a larger job takes whole free nodes. A job that asks for `gpus_per_node` fewer
// than its GPUs and than a node's is spread: gpus / gpus_per_node distinct nodes with that
// many GPUs each, again the nodes with the fewest free GPUs that fit. Only ready nodes
// (healthy, not cordoned, not draining) take jobs.

#include <cstdint>
#include <deque>
#include <limits>
#include <string>
#include <vector>

namespace gpufleet::sched {

struct Job {
  int64_t id = 0;
  std::string team{};
  int gpus = 1;
  int priority = 0;       // higher first
  double submit_s = 0;    // when it entered the queue
  double duration_s = 0;  // how long it runs (the replay knows; live jobs: expected or 0)
  bool movable = true;    // consolidation may move it (the replay; live jobs say so)
  // GPUs on each node it spans (it divides `gpus`); 0: the default rule (one node, or whole
  // nodes beyond a node's GPUs).
  int gpus_per_node = 0;
  // Set by the scheduler:
  double start_s = -1;       // -1: not started
  std::vector<int> nodes{};  // where it runs: node indices, one per whole node or the one node
};

enum class NodeState { kProvisioning, kReady, kUnavailable, kRemoved };

struct PoolNode {
  NodeState state = NodeState::kProvisioning;
  int free = 0;             // free GPUs (ready nodes)
  int jobs = 0;             // jobs running on it
  double ready_at_s = 0;    // provisioning: when it becomes ready
  double idle_since_s = 0;  // when its last job ended (or it became ready)
  double added_s = 0;       // when it was asked for (it costs from then on)
  bool reserved = false;    // kept for a job that has waited long: no other job goes here
  // When its running jobs are expected to have ended: the latest of their expected ends,
  // infinity when one has none (it runs until cancelled), 0 when it runs none. Only grows
  // while it runs jobs, so it is a bound, not an estimate.
  double busy_until_s = 0;
};

class Pool {
 public:
  explicit Pool(int gpus_per_node) : gpus_per_node_(gpus_per_node) {}
  int gpus_per_node() const { return gpus_per_node_; }

  int AddNode(double now, double ready_at);  // a provisioning node; returns its index
  void MarkReady(int node, double now);
  // A node that failed or was cordoned: takes no new jobs. The caller requeues its jobs.
  void MarkUnavailable(int node);
  // Removes an idle ready node; false (and nothing changes) when it runs a job.
  bool Remove(int node);

  // Marks `gpus` of a ready node as in use by a job placed earlier (a live pool rebuilt from the
  // fleet) that is expected to end at `until_s`; false when the node has fewer free.
  bool Take(int node, int gpus, double until_s = kNoEnd);
  static constexpr double kNoEnd = 1e300;  // a job without an expected end
  // Places `job` at `now` (sets job.nodes) and returns true, or returns false and changes
  // nothing. A reserved node takes only a job expected to end by backfill_until_s().
  bool Place(Job& job, double now);
  // Whether the ready and provisioning nodes are enough for `job` once their jobs end.
  bool CanHold(const Job& job) const;
  // Reserves for `job` the ready nodes it will run on once enough of their jobs end: those
  // whose jobs are expected to end first, then those with the most free GPUs (then the lowest
  // index), as many as it needs. Returns them. Reserves nothing for a job the pool cannot
  // hold (CanHold): it would keep those nodes from every other job until the pool grew.
  std::vector<int> Reserve(const Job& job);
  void ClearReservations();
  // Until when a job placed on reserved nodes leaves the reserved job's start where it is
  // (Slurm's backfill): when the reserved nodes' jobs are expected to have ended, and, where
  // too few nodes are ready, when enough provisioning nodes are to be ready. Only for a job
  // that takes whole nodes: one that takes part of a node may start before all of its jobs
  // end, so that bound is no guarantee. -1: none (no reservation, or an end not known).
  double backfill_until_s() const { return backfill_until_s_; }
  // `job`, placed, is expected to end at `until_s` (kNoEnd: not known): its nodes' busy_until_s.
  void ExpectEnd(const Job& job, double until_s);
  // Frees what `job` held.
  void Release(const Job& job, double now);
  // The GPUs `job` takes on each of its nodes, and how many nodes it takes.
  int PerNode(const Job& job) const;
  int NodesFor(const Job& job) const;

  const std::vector<PoolNode>& nodes() const { return nodes_; }
  int ready_nodes() const { return ready_; }
  int provisioning_nodes() const { return provisioning_; }
  int free_gpus() const { return free_; }
  int busy_gpus() const { return ready_ * gpus_per_node_ - free_; }
  int empty_nodes() const { return whole_free_; }  // ready nodes running no job
  // Ready nodes with no job that have been idle since at least `since`, longest idle first
  // (then the lowest index), at most `at_most` of them; not those kept for a waiting job
  // (scale-down would take them from under it).
  std::vector<int> IdleNodes(double idle_since_at_most,
                             size_t at_most = std::numeric_limits<size_t>::max()) const;
  // How many IdleNodes() would give without a bound: one walk, no sorting.
  int IdleNodeCount(double idle_since_at_most) const;

 private:
  int gpus_per_node_;
  std::vector<PoolNode> nodes_;
  int ready_ = 0, provisioning_ = 0, free_ = 0, whole_free_ = 0;
  double backfill_until_s_ = -1;
  // `n` takes `job` at `now`: not reserved, or `job` ends by backfill_until_s_.
  bool Open(const PoolNode& n, const Job& job, double now) const;
  bool Idle(const PoolNode& n, double idle_since_at_most) const {
    return n.state == NodeState::kReady && n.jobs == 0 && !n.reserved &&
           n.idle_since_s <= idle_since_at_most;
  }
};

// The queue: highest priority first; within a priority, the team with the fewest GPUs running
// goes first (fair share), then the oldest job. Schedule() starts every job that fits, in that
// order (a job that does not fit does not block smaller ones behind it: backfill).
// Backfill alone starves a wide job on a busy pool: small jobs keep taking the GPUs that end
// before a whole node is free. So the first job in that order that does not fit, has waited
// `reserve_after_s`, and that the pool can hold, gets nodes reserved (Pool::Reserve): jobs
// after it in the order are placed there only when they are expected to end before it can
// start (backfill_until_s), and it starts once their running jobs end.
class Queue {
 public:
  static constexpr double kDefaultReserveAfterS = 600;
  explicit Queue(double reserve_after_s = kDefaultReserveAfterS)
      : reserve_after_s_(reserve_after_s) {}
  void Push(Job* job) { jobs_.push_back(job); }
  size_t size() const { return jobs_.size(); }
  bool empty() const { return jobs_.empty(); }
  int64_t queued_gpus() const;
  // Starts what fits at `now`; returns the started jobs. `team_gpus` is each team's running
  // GPUs, updated as jobs start.
  std::vector<Job*> Schedule(Pool& pool, double now);
  void OnFinished(const Job& job);  // the team's running GPUs go down
  // A job already running (a live queue rebuilt each pass): counts for its team's share.
  void AddRunning(const std::string& team, int64_t gpus) { TeamGpus(team) += gpus; }
  bool Remove(int64_t id);  // a cancelled job
  const std::deque<Job*>& jobs() const { return jobs_; }
  // The job the last Schedule() reserved nodes for (null when none, or removed since), and
  // which nodes.
  const Job* reserved_for() const { return reserved_for_; }
  const std::vector<int>& reserved_nodes() const { return reserved_nodes_; }

 private:
  double reserve_after_s_;
  std::deque<Job*> jobs_;
  const Job* reserved_for_ = nullptr;
  std::vector<int> reserved_nodes_;
  std::vector<std::pair<std::string, int64_t>> team_gpus_;  // few teams: a flat list
  int64_t& TeamGpus(const std::string& team);
};

}  // namespace gpufleet::sched
