#include "workload/generator.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

namespace gpufleet::workload {
namespace {

constexpr double kPi = 3.14159265358979323846;
// Run times: log-normal, median 20 minutes, most between 6 minutes and an hour; at most 4 h.
constexpr double kMedianS = 1200, kSigma = 0.8, kMaxS = 4 * 3600, kMinS = 60;

double MeanDurationS() { return std::min(kMaxS, kMedianS * std::exp(kSigma * kSigma / 2)); }

// Job sizes: powers of two up to a node, and (for 8-GPU nodes) some two-node jobs.
std::vector<std::pair<int, double>> Sizes(int g) {
  if (g >= 8) return {{1, 0.25}, {2, 0.2}, {4, 0.25}, {8, 0.25}, {2 * g, 0.05}};
  std::vector<std::pair<int, double>> out;
  for (int s = 1; s <= g; s *= 2) out.emplace_back(s, 1.0);
  return out;
}

// A simulated job's profile, by its cluster's type: {training, inference, bursty, idle} weights.
const char* DrawProfile(const std::string& cluster_type, std::mt19937_64& rng) {
  static constexpr const char* kNames[] = {"training", "inference", "bursty", "idle"};
  std::vector<double> w{0.85, 0.0, 0.05, 0.10};  // training
  if (cluster_type == "inference" || cluster_type == "edge") w = {0.05, 0.85, 0.0, 0.10};
  if (cluster_type == "development") w = {0.05, 0.0, 0.70, 0.25};
  std::discrete_distribution<size_t> pick(w.begin(), w.end());
  return kNames[pick(rng)];
}

}  // namespace

WorkloadGenerator::WorkloadGenerator(Submit submit, std::vector<GeneratedPool> pools,
                                     std::vector<DemoTeam> teams, uint64_t seed)
    : submit_(std::move(submit)), rng_(seed), profile_rng_(seed ^ 0x5157ULL) {
  for (auto& t : teams) {
    if (!t.projects.empty()) teams_.push_back(std::move(t));
  }
  for (auto& p : pools) {
    if (p.capacity_gpus > 0 && p.gpus_per_node > 0 && !teams_.empty()) {
      pools_.push_back({std::move(p), -1});
    }
  }
}

double WorkloadGenerator::Rhythm(int64_t t_ms) {
  double day_s = std::fmod(static_cast<double>(t_ms) / 1000.0, 86400.0);
  double hour = day_s / 3600.0;
  double daily = 0.5 * (1 - std::cos(2 * kPi * (hour - 3) / 24));  // 0 at 03:00, 1 at 15:00
  int weekday = static_cast<int>((t_ms / 86'400'000 + 3) % 7);     // 0 = Monday
  return weekday >= 5 ? 0.55 * daily : daily;
}

double WorkloadGenerator::Target(const GeneratedPool& p, int64_t t_ms) {
  return p.capacity_gpus * (0.3 + 0.8 * Rhythm(t_ms));
}

double WorkloadGenerator::MeanGpus(const GeneratedPool& p) const {
  double sum = 0, weight = 0;
  for (auto [gpus, w] : Sizes(p.gpus_per_node)) {
    sum += gpus * w;
    weight += w;
  }
  return sum / weight;
}

int WorkloadGenerator::DrawGpus(const GeneratedPool& p) {
  auto sizes = Sizes(p.gpus_per_node);
  std::vector<double> w;
  for (const auto& s : sizes) w.push_back(s.second);
  std::discrete_distribution<size_t> pick(w.begin(), w.end());
  int gpus = sizes[pick(rng_)].first;
  // A job never asks for more than the pool's starting size.
  return std::min(gpus, std::max(1, p.capacity_gpus / p.gpus_per_node) * p.gpus_per_node);
}

Status WorkloadGenerator::SubmitOne(const GeneratedPool& p, double duration_scale) {
  std::lognormal_distribution<double> duration(std::log(kMedianS), kSigma);
  std::bernoulli_distribution urgent(0.1), owners(0.6);
  // Mostly the pool's own team; the others borrow it.
  const DemoTeam* team = nullptr;
  if (!p.team.empty() && owners(rng_)) {
    for (const auto& t : teams_) {
      if (t.name == p.team) team = &t;
    }
  }
  if (!team) {
    std::uniform_int_distribution<size_t> any(0, teams_.size() - 1);
    team = &teams_[any(rng_)];
  }
  std::uniform_int_distribution<size_t> project(0, team->projects.size() - 1);
  JobSpec s;
  s.team = team->name;
  s.project = team->projects[project(rng_)];
  s.pool = p.pool;
  s.gpus = DrawGpus(p);
  s.priority = urgent(rng_) ? 10 : 0;
  // Fine-tuning and sweep jobs checkpoint often: they may be moved (consolidation).
  s.movable = s.project.find("finetune") != std::string::npos ||
              s.project.find("sweep") != std::string::npos;
  if (p.simulated) s.sim_profile = DrawProfile(p.cluster_type, profile_rng_);
  double d = std::clamp(duration(rng_), kMinS, kMaxS) * duration_scale;
  s.duration_ms = std::max<int64_t>(60'000, static_cast<int64_t>(d * 1000));
  return submit_(std::move(s));
}

// Poisson arrivals at the rate that holds the target (Little's law), taken at each arrival:
// the rhythm changes over hours, arrivals come every few seconds to minutes.
double WorkloadGenerator::Gap(const GeneratedPool& p, double t_s) {
  double rate = Target(p, static_cast<int64_t>(t_s * 1000)) / (MeanGpus(p) * MeanDurationS());
  std::exponential_distribution<double> gap(std::max(rate, 1e-6));
  return gap(rng_);
}

int WorkloadGenerator::Tick(int64_t now_ms) {
  double now_s = static_cast<double>(now_ms) / 1000.0;
  int submitted = 0;
  for (auto& st : pools_) {
    const GeneratedPool& p = st.pool;
    if (st.next_s < 0) {
      // Warm start: the pool's target of jobs, each part-way through its run.
      double target = Target(p, now_ms), gpus = 0;
      std::uniform_real_distribution<double> left(0.05, 1.0);
      while (gpus < target) {
        if (auto s = SubmitOne(p, left(rng_)); !s.ok()) {
          spdlog::warn("demo workload: pool {}: {}", p.pool, s.error().message);
          break;
        }
        gpus += MeanGpus(p);
        ++submitted;
      }
      st.next_s = now_s + Gap(p, now_s);
    }
    if (now_s - st.next_s > 3600) st.next_s = now_s;  // after a long stop: no burst
    while (st.next_s <= now_s) {
      if (auto s = SubmitOne(p, 1.0); !s.ok()) {
        spdlog::warn("demo workload: pool {}: {}", p.pool, s.error().message);
      } else {
        ++submitted;
      }
      st.next_s += Gap(p, st.next_s);
    }
  }
  return submitted;
}

}  // namespace gpufleet::workload
