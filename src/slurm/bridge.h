#pragma once
// The bridge to Slurm for the clusters whose fleet file says `scheduler: {type: slurm}`
// (docs/slurm.md). A poller thread runs Slurm's own clients (sinfo --json, squeue --json,
// scontrol update), without a shell and with a deadline; the controller's ticker calls Sync(),
// which turns the last polls into gpufleet jobs (workload::JobService::SyncExternal) and node
// states, and asks Slurm to drain the nodes gpufleet takes out of service and to resume the
// ones it drained once they are back. A drain that someone else set is never resumed by
// gpufleet: the node shows as cordoned by `slurm`.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "model/types.h"
#include "workload/jobs.h"

namespace gpufleet::slurm {

struct Job;
struct Node;

// One Slurm node as the last poll saw it.
struct NodeView {
  std::string slurm_name;
  std::string node;  // the gpufleet node it is; empty when none
  std::string state;
  std::vector<std::string> flags;
  std::string reason;
  bool drained = false;  // DRAIN set and no job left
};

// How the bridge to one cluster's Slurm is doing (GET /api/v1/slurm, gpufleet slurm status).
struct ClusterStatus {
  std::string cluster;
  std::string state = "waiting";  // "ok", "error", "waiting" (not polled yet)
  std::string error;              // the last failure, as the client said it
  int64_t last_poll_ms = 0, last_ok_ms = 0;
  int64_t poll_duration_ms = 0;  // the last successful poll's
  int64_t polls = 0, failures = 0;
  int jobs_running = 0, jobs_pending = 0;
  std::vector<NodeView> nodes;
  std::vector<std::string> unknown_nodes;  // the cluster's gpufleet nodes that Slurm has not
  int64_t commands = 0, command_failures = 0;
  std::string last_command_error;
};

// One poll's jobs and nodes turned into what gpufleet keeps, for a cluster: pure, so the
// benchmark and the unit tests call it on recorded output. `nodes` maps Slurm's node names to
// gpufleet's; `pools` are the cluster's (the first is the default for pending jobs).
// `pool_of` maps gpufleet nodes to their pools.
std::vector<workload::ExternalJob> ToExternalJobs(const std::vector<Job>& jobs,
                                                  const Scheduler& scheduler,
                                                  const std::map<std::string, std::string>& nodes,
                                                  const std::map<std::string, std::string>& pool_of,
                                                  const std::vector<Pool>& pools,
                                                  const TeamService* teams);
// Slurm's job state as gpufleet's: PENDING -> queued, RUNNING and the like -> running,
// CANCELLED -> cancelled, every other end -> completed.
workload::JobState ToJobState(const std::string& slurm_state, bool has_nodes);

// The clients a Slurm cluster of `clusters` names (scontrol, squeue, sinfo in its bin_dir, its
// conf file) are there: else kInvalidArgument "FILE: clusters[i].scheduler.bin_dir: ...".
Status CheckClients(const std::vector<Cluster>& clusters, const std::string& file);

class Bridge {
 public:
  Bridge(FleetService& fleet, workload::JobService& jobs, const TeamService* teams,
         std::shared_ptr<Clock> clock);
  ~Bridge();
  Bridge(const Bridge&) = delete;
  Bridge& operator=(const Bridge&) = delete;

  void Start();  // the poller thread
  void Stop();

  // The ticker's step (the leader's): the polls that arrived into jobs and node states; the
  // drains and resumes that gpufleet's node states ask of Slurm, handed to the poller.
  Status Sync();
  // Whether a draining node must wait for Slurm: it is a node of a Slurm cluster and Slurm has
  // not said it is drained (an unreachable Slurm holds it: no reboot under a running job).
  // Called under the fleet's lock: takes only the bridge's own.
  bool Holds(const std::string& node) const;
  std::vector<ClusterStatus> Clusters() const;
  // The bridge's series for /metrics (gpufleet_slurm_*).
  std::string MetricsText() const;
  // How long a client may take before it is killed.
  static constexpr int kClientTimeoutMs = 15'000;

 private:
  struct Poll;  // one cluster's poll: its parsed output or its error
  struct Command {
    std::string cluster, node, slurm_name;
    Scheduler scheduler;
    std::vector<std::string> args;
    std::string what;  // "drain", "resume"
  };
  void Run();
  void PollCluster(const Cluster& cluster);
  void RunCommand(const Command& c);
  void Apply(const Cluster& cluster, Poll& poll);
  void FollowForeignDrains(const std::vector<NodeView>& views,
                           std::map<std::string, gpufleet::Node>& nodes);
  // The drains and resumes this cluster's node states ask for.
  void Reconcile(const Cluster& cluster);

  FleetService& fleet_;
  workload::JobService& jobs_;
  const TeamService* teams_;
  std::shared_ptr<Clock> clock_;

  mutable std::mutex mu_;  // never held while calling the fleet or the jobs
  std::condition_variable wake_;
  bool stop_ = false;
  std::atomic<bool> stopping_{false};  // Stop() was called: a client running is killed
  std::thread thread_;
  std::map<std::string, std::unique_ptr<Poll>> polled_;  // cluster -> last poll not yet synced
  std::map<std::string, int64_t> next_poll_ms_;          // cluster -> when to poll next
  std::deque<Command> commands_;
  std::map<std::string, ClusterStatus> status_;  // by cluster
  // gpufleet node -> its Slurm node's last view, and which nodes belong to Slurm clusters.
  std::map<std::string, NodeView> views_;
  std::set<std::string> members_;
  // gpufleet node -> when a drain or resume was last asked of Slurm, and which.
  std::map<std::string, std::pair<std::string, int64_t>> asked_;
  std::set<std::string> down_;     // gpufleet nodes Slurm says are DOWN or FAILed
  std::set<std::string> unknown_;  // gpufleet nodes a Slurm that answered does not know
};

}  // namespace gpufleet::slurm
