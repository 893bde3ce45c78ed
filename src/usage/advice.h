#pragma once
// Optimization advice from the usage ledger, the pools' hours and the jobs running now: each
// recommendation with its evidence (the jobs, nodes or pools it rests on, and the figures) and
// what it would save in GPU-hours, money and energy over the period it looked at.
//
//   idle_allocation  a job whose GPUs computed nothing (mean utilization under 5%) for at least
//                    `min_idle` (1 h): running now, or an allocation that ended
//   right_size       a team's project whose one-GPU jobs all fit a MIG slice of their model
//                    (peak memory with a tenth to spare, p95 utilization within the slice's
//                    share of the GPU)
//   mig              an inference pool of MIG-capable GPUs used under 30% on average: packed
//                    onto slices it needs util/60% of its GPU-hours
//   time_slicing     a development pool used under 20%: several jobs could share a GPU
//   spot             a project whose jobs are movable (consolidation moved them) and waited in
//                    the queue (p50 over 10 minutes): fit for spot or preemptible capacity (no
//                    saving is given: spot prices are not known here)
//   shrink_pool      a pool whose peak demand (held and queued GPUs) in any hour stayed under
//                    70% of its GPUs over at least six recorded hours: whole nodes it could do
//                    without, with 20% headroom, never its last

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "usage/reports.h"

namespace gpufleet::usage {

struct Recommendation {
  std::string kind;
  std::string target;    // "job 59", "pool a10-dev", "project vision/detector"
  std::string cluster;   // where it applies (a scoped token sees its own clusters')
  std::string summary;   // one line a person reads
  std::string evidence;  // JSON object text: the jobs, nodes or pools and the figures
  double gpu_hours_saved = 0;
  double cost_saved = NAN;  // NaN: not known (spot)
  double kwh_saved = 0;
};

// A job running now, measured over its current allocation.
struct RunningJob {
  int64_t job = 0;
  std::string team, project, pool, cluster, gpu_model;
  int gpus = 0;
  std::vector<std::string> nodes;
  int64_t start_ms = 0;
  double util_mean = NAN;  // over its allocation so far
  double energy_j = 0;
  std::string external;  // another scheduler's name for it ("slurm job 4132"); empty: none
};

struct AdviceRequest {
  int64_t from_ms = 0, to_ms = 0;
  int64_t min_idle_ms = 3'600'000;
};

// What the advice needs of the fleet beyond the report context: each pool's cluster type and
// GPUs per node.
struct PoolFacts {
  std::string cluster_type;  // training, inference, development, edge
  int gpus_per_node = 8;
};

class AdviceBuilder {
 public:
  AdviceBuilder(AdviceRequest request, ReportContext context,
                std::map<std::string, PoolFacts> pools);
  void Add(const store::UsageRecord& record);
  void AddHour(const store::PoolHour& hour);
  void AddRunning(const RunningJob& job);
  // The recommendations, the largest GPU-hour saving first.
  std::vector<Recommendation> Finish();

 private:
  struct PoolAcc {
    std::string model, cluster;
    double alloc_h = 0, measured_h = 0, util_h = 0, energy_j = 0;  // the ledger's
    double installed_ms = 0, covered_ms = 0, free_energy_j = 0, free_gpu_ms = 0;
    double peak_demand = 0;  // the most GPUs held and queued for in an hour
    std::vector<int64_t> jobs;
  };
  struct ProjectAcc {
    std::string team, project, pool, model, cluster;
    int allocations = 0;
    bool all_single = true, all_measured = true;
    double max_mem_mib = 0, max_p95 = 0, gpu_h = 0, energy_j = 0;
    int moved = 0;
    std::vector<double> waits_s;
    std::vector<int64_t> jobs;
  };
  struct IdleAcc {
    std::string team, project, pool, cluster, model;
    double gpu_h = 0, energy_j = 0, util_h = 0, hours = 0;
    std::vector<std::string> nodes;
    std::string external;  // "slurm job 4132": where it must be ended
    bool running = false;
  };
  double Rate(const std::string& model, const std::string& cluster) const;

  AdviceRequest req_;
  ReportContext ctx_;
  std::map<std::string, PoolFacts> facts_;
  std::map<std::string, PoolAcc> pools_;
  std::map<std::string, ProjectAcc> projects_;  // team/project/pool
  std::map<int64_t, IdleAcc> idle_;             // by job
};

// The advice over the store's ledger and pools' hours and the running jobs given.
Result<std::vector<Recommendation>> RunAdvice(store::UsageStore& store,
                                              const AdviceRequest& request, ReportContext context,
                                              std::map<std::string, PoolFacts> pools,
                                              const std::vector<RunningJob>& running);

}  // namespace gpufleet::usage
