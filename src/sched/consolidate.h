#pragma once
// Consolidation: empty a few lightly used nodes by moving their jobs onto the free GPUs of other
// busy nodes, so that the pool can shrink. The Kubernetes Cluster Autoscaler does this for a
// node below 50 % use for 10 minutes whose pods fit elsewhere, and Karpenter calls it
// consolidation. Without it a pool keeps every node that runs any job, and on the Alibaba trace
// most idle GPU-hours are free GPUs of such nodes (docs/scaling.md).
//
// Pure logic, like the rest of sched: the caller says which nodes may be emptied (ready, in use
// at most `consolidate_below` of their GPUs for long enough, every job on them movable and on
// that node alone) and the plan says where each of their jobs goes.

#include <vector>

namespace gpufleet::sched {

struct NodeLoad {
  int free = 0;            // free GPUs; a node that is not ready has 0 and runs no jobs here
  bool running = false;    // runs some job: only such nodes take moved jobs (an empty node
                           // would not let the pool shrink)
  bool candidate = false;  // may be emptied
  std::vector<int> jobs;   // a candidate's jobs: GPUs of each
};

struct NodeMoves {
  int node = 0;         // the node emptied
  std::vector<int> to;  // to[i]: the node that takes its jobs[i]
};

// Empties up to `max_nodes` candidates, the least used first; a job goes to the node with the
// fewest free GPUs that fit it (best fit, as placement does), never to a node being emptied.
// A node that takes moved jobs is no longer emptied itself. Nothing is over-allocated.
std::vector<NodeMoves> PlanConsolidation(const std::vector<NodeLoad>& nodes, int max_nodes);

// Whether a node with `used` of its `gpus_per_node` GPUs in use is lightly used enough.
inline bool LightlyUsed(int used, int gpus_per_node, double consolidate_below) {
  return consolidate_below > 0 && used > 0 && used <= consolidate_below * gpus_per_node + 1e-9;
}

}  // namespace gpufleet::sched
