#pragma once
// The demo workload that `gpufleet up` and `gpufleet sim` run by default: several teams submitting
// jobs to every pool, with a daily rhythm (busiest at 15:00 UTC, quietest at 03:00) and quieter
// weekends, so that demand, queueing, allocation and autoscaling show on the dashboard. Demand at
// the peak is above each pool's starting size: unscaled pools queue, scaled ones grow.
//
// Arrivals are Poisson at the rate that keeps the pool's demand (GPUs running and queued) near
//   target(t) = capacity x (0.3 + 0.8 x rhythm(t))
// by Little's law; the first tick fills each pool to its target at once (jobs part-way through
// their run), so the picture is there from the start. Deterministic for a seed. Jobs are the
// teams' (one of each team's projects), mostly the pool's owning team's. Fine-tuning and sweep
// projects' jobs are movable, so consolidation shows too. On simulated pools each job has a
// profile: a training cluster's mostly train, an inference cluster's serve with the day, a
// development cluster's work in bursts, and about one job in ten holds its GPUs and does
// nothing (what the idle-allocation advice finds).

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "workload/jobs.h"

namespace gpufleet::workload {

struct GeneratedPool {
  std::string pool;
  int gpus_per_node = 8;
  int capacity_gpus = 0;  // what the target is a share of (the pool's starting size)
  std::string team;       // its owner, whose jobs it mostly runs; empty: none
  // Its nodes are simulated: each job says how its GPUs behave (JobSpec::sim_profile), mixed by
  // the cluster's type (training, inference, development, edge; else training's mix).
  bool simulated = false;
  std::string cluster_type;
};

struct DemoTeam {
  std::string name;
  std::vector<std::string> projects;  // a team without one submits nothing
};

class WorkloadGenerator {
 public:
  // `submit` queues one job: JobService::Submit in the controller, POST /api/v1/jobs in
  // `gpufleet sim`.
  using Submit = std::function<Status(JobSpec)>;
  // Submits nothing without a team that has a project.
  WorkloadGenerator(Submit submit, std::vector<GeneratedPool> pools, std::vector<DemoTeam> teams,
                    uint64_t seed = 1);
  // Submits the jobs that have arrived by `now_ms`; returns how many.
  int Tick(int64_t now_ms);
  // The daily and weekly rhythm in [0, 1].
  static double Rhythm(int64_t t_ms);
  static double Target(const GeneratedPool& p, int64_t t_ms);

 private:
  struct State {
    GeneratedPool pool;
    double next_s = -1;  // the next arrival (not yet submitted); < 0: not started
  };
  Status SubmitOne(const GeneratedPool& p, double duration_scale);
  double MeanGpus(const GeneratedPool& p) const;
  int DrawGpus(const GeneratedPool& p);
  double Gap(const GeneratedPool& p, double t_s);  // seconds to the next arrival

  Submit submit_;
  std::vector<DemoTeam> teams_;
  std::vector<State> pools_;
  std::mt19937_64 rng_;
  std::mt19937_64 profile_rng_;  // apart, so profiles leave the other draws as they were
};

}  // namespace gpufleet::workload
