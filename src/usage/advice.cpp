#include "usage/advice.h"

#include <algorithm>
#include <boost/json.hpp>
#include <cstdio>
#include <cstdlib>

#include "common/json_text.h"

namespace json = boost::json;

namespace gpufleet::usage {
namespace {

constexpr double kHourMs = 3.6e6;
constexpr int64_t kIdleUtilMilli = 5'000;
constexpr size_t kMaxJobs = 20;                       // jobs named in one recommendation's evidence
constexpr double kMinShrinkEvidenceMs = 6 * kHourMs;  // a pool's hours before it is shrunk

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// "2.5 h", or "25 min" under an hour.
std::string Duration(double hours) {
  if (hours >= 1) return Fixed(hours, 1) + " h";
  return Fixed(hours * 60, 0) + " min";
}

// "3g.40gb" -> {3, 40}; {0, 0} when it is not of that form.
std::pair<int, double> MigProfile(const std::string& name) {
  const size_t g = name.find("g.");
  if (g == std::string::npos) return {0, 0};
  return {std::atoi(name.c_str()), std::atof(name.c_str() + g + 2)};
}

json::array Jobs(const std::vector<int64_t>& jobs) {
  json::array out;
  for (size_t i = 0; i < jobs.size() && i < kMaxJobs; ++i) out.push_back(jobs[i]);
  return out;
}

void Note(std::vector<int64_t>& jobs, int64_t job) {
  if (jobs.size() < kMaxJobs && std::find(jobs.begin(), jobs.end(), job) == jobs.end()) {
    jobs.push_back(job);
  }
}

}  // namespace

AdviceBuilder::AdviceBuilder(AdviceRequest request, ReportContext context,
                             std::map<std::string, PoolFacts> pools)
    : req_(request), ctx_(std::move(context)), facts_(std::move(pools)) {
  if (!ctx_.catalog) ctx_.catalog = GpuCatalog::Builtin().get();
}

double AdviceBuilder::Rate(const std::string& model, const std::string& cluster) const {
  auto site = ctx_.cluster_site.find(cluster);
  return ctx_.rates.GpuHour(*ctx_.catalog, model,
                            site == ctx_.cluster_site.end() ? std::string() : site->second);
}

void AdviceBuilder::Add(const store::UsageRecord& r) {
  store::UsageFigures scratch;
  const store::UsageFigures& f = FiguresOf(r, scratch);
  const int64_t a = std::max(r.start_ms, req_.from_ms), b = std::min(r.end_ms, req_.to_ms);
  if (f.gpus <= 0 || b <= a || r.end_ms <= r.start_ms) return;
  const double share = static_cast<double>(b - a) / static_cast<double>(r.end_ms - r.start_ms);
  const double gpu_h = static_cast<double>(f.gpus) * static_cast<double>(b - a) / kHourMs;
  const double energy = static_cast<double>(f.energy_j) * share;
  const bool measured = f.util_milli >= 0;
  const double util = static_cast<double>(f.util_milli) / 1000.0;

  PoolAcc& p = pools_[r.pool];
  p.model = f.gpu_model;
  p.cluster = r.cluster;
  p.alloc_h += gpu_h;
  p.energy_j += energy;
  if (measured) {
    p.measured_h += gpu_h;
    p.util_h += gpu_h * util;
  }
  Note(p.jobs, r.job);

  if (measured && f.util_milli < kIdleUtilMilli && r.end_ms - r.start_ms >= req_.min_idle_ms) {
    IdleAcc& i = idle_[r.job];
    i.team = r.team;
    i.project = r.project;
    i.pool = r.pool;
    i.cluster = r.cluster;
    i.model = f.gpu_model;
    i.gpu_h += gpu_h;
    i.energy_j += energy;
    i.util_h += gpu_h * util;
    i.hours += static_cast<double>(r.end_ms - r.start_ms) / kHourMs;
    if (!f.source.empty()) i.external = f.source + " job " + f.external_id;
    for (auto& [node, gpus] : ParsePlacement(f.placement)) {
      if (std::find(i.nodes.begin(), i.nodes.end(), node) == i.nodes.end()) i.nodes.push_back(node);
    }
  }

  ProjectAcc& j = projects_[r.team + "/" + r.project + "/" + r.pool];
  j.team = r.team;
  j.project = r.project;
  j.pool = r.pool;
  j.model = f.gpu_model;
  j.cluster = r.cluster;
  ++j.allocations;
  j.all_single = j.all_single && f.gpus == 1;
  j.all_measured = j.all_measured && f.mem_peak_mib >= 0 && f.util_p95_milli >= 0;
  j.max_mem_mib = std::max(j.max_mem_mib, static_cast<double>(f.mem_peak_mib));
  j.max_p95 = std::max(j.max_p95, static_cast<double>(f.util_p95_milli) / 1000.0);
  j.gpu_h += gpu_h;
  j.energy_j += energy;
  if (f.outcome == "moved") {
    ++j.moved;
  } else {
    j.waits_s.push_back(static_cast<double>(f.wait_ms) / 1000.0);
  }
  Note(j.jobs, r.job);
}

void AdviceBuilder::AddHour(const store::PoolHour& h) {
  PoolAcc& p = pools_[h.pool];
  p.model = h.gpu_model;
  p.cluster = h.cluster;
  p.installed_ms += static_cast<double>(h.gpu_ms);
  p.covered_ms += static_cast<double>(h.covered_ms);
  p.free_energy_j += static_cast<double>(h.free_energy_j);
  p.free_gpu_ms += static_cast<double>(h.gpu_ms - h.alloc_gpu_ms);
  if (h.covered_ms > 0) {
    p.peak_demand = std::max(p.peak_demand, static_cast<double>(h.alloc_gpu_ms + h.queued_gpu_ms) /
                                                static_cast<double>(h.covered_ms));
  }
}

void AdviceBuilder::AddRunning(const RunningJob& job) {
  const int64_t ran = req_.to_ms - job.start_ms;
  if (std::isnan(job.util_mean) || job.util_mean >= kIdleUtilMilli / 1000.0 ||
      ran < req_.min_idle_ms) {
    return;
  }
  IdleAcc& i = idle_[job.job];
  i = {job.team, job.project, job.pool, job.cluster, job.gpu_model};
  i.gpu_h = job.gpus * static_cast<double>(ran) / kHourMs;
  i.energy_j = job.energy_j;
  i.util_h = i.gpu_h * job.util_mean;
  i.hours = static_cast<double>(ran) / kHourMs;
  i.nodes = job.nodes;
  i.external = job.external;
  i.running = true;
}

std::vector<Recommendation> AdviceBuilder::Finish() {
  std::vector<Recommendation> out;
  std::string cluster;  // of the recommendation being added
  auto add = [&](std::string kind, std::string target, std::string summary, json::object evidence,
                 double gpu_h, double cost, double kwh) {
    out.push_back({std::move(kind), std::move(target), cluster, std::move(summary),
                   JsonText(evidence), gpu_h, cost, kwh});
  };

  for (const auto& [job, i] : idle_) {
    const double util = i.gpu_h > 0 ? i.util_h / i.gpu_h : 0;
    cluster = i.cluster;
    json::array nodes;
    for (const auto& n : i.nodes) nodes.emplace_back(n);
    const std::string named =
        "job " + std::to_string(job) + (i.external.empty() ? "" : ", " + i.external);
    add("idle_allocation", "job " + std::to_string(job),
        named + " (" + i.team + "/" + i.project + ") " + (i.running ? "has held" : "held") +
            " its GPUs of pool " + i.pool + " for " + Duration(i.hours) + " at " + Fixed(util, 1) +
            "% utilization: give them back (cancel it, or end it when its work is done)",
        {{"jobs", json::array{job}},
         {"team", i.team},
         {"project", i.project},
         {"pool", i.pool},
         {"nodes", std::move(nodes)},
         {"util_mean", util},
         {"hours", i.hours},
         {"running", i.running},
         {"external", i.external.empty() ? json::value(nullptr) : json::value(i.external)}},
        i.gpu_h, i.gpu_h * Rate(i.model, i.cluster), i.energy_j / 3.6e6);
  }

  for (const auto& [key, j] : projects_) {
    cluster = j.cluster;
    // right_size: every allocation one GPU, measured, fitting a slice of its model.
    const GpuModelSpec* spec = ctx_.catalog->Find(j.model);
    if (j.all_single && j.all_measured && spec && spec->mig_supported &&
        spec->mig_max_instances > 0) {
      std::string best;
      int best_g = spec->mig_max_instances;
      for (const auto& profile : spec->mig_profiles) {
        auto [g, gib] = MigProfile(profile);
        const double share = 100.0 * g / spec->mig_max_instances;
        if (g > 0 && g < best_g && gib * 1024 >= j.max_mem_mib * 1.1 && j.max_p95 <= share) {
          best = profile;
          best_g = g;
        }
      }
      if (!best.empty()) {
        const double keep = static_cast<double>(best_g) / spec->mig_max_instances;
        add("right_size", "project " + j.team + "/" + j.project,
            j.team + "/" + j.project + "'s one-GPU jobs on " + j.pool + " peaked at " +
                Fixed(j.max_mem_mib / 1024, 1) + " GiB and " + Fixed(j.max_p95, 0) +
                "% utilization (p95): a " + best + " MIG slice fits them",
            {{"jobs", Jobs(j.jobs)},
             {"pool", j.pool},
             {"allocations", j.allocations},
             {"mem_peak_gib", j.max_mem_mib / 1024},
             {"util_p95_max", j.max_p95},
             {"mig_profile", best}},
            j.gpu_h * (1 - keep), j.gpu_h * (1 - keep) * Rate(j.model, j.cluster),
            j.energy_j / 3.6e6 * (1 - keep));
      }
    }
    // spot: movable (consolidation moved them) and patient (a long median wait).
    if (j.moved > 0 && !j.waits_s.empty()) {
      std::vector<double> w = j.waits_s;
      std::nth_element(w.begin(), w.begin() + static_cast<long>((w.size() - 1) / 2), w.end());
      const double p50 = w[(w.size() - 1) / 2];
      if (p50 > 600) {
        add("spot", "project " + j.team + "/" + j.project,
            j.team + "/" + j.project + "'s jobs on " + j.pool + " are movable and wait a median " +
                Fixed(p50 / 60, 0) + " min anyway: run them on spot or preemptible capacity",
            {{"jobs", Jobs(j.jobs)},
             {"pool", j.pool},
             {"moves", j.moved},
             {"wait_p50_s", p50},
             {"gpu_hours", j.gpu_h}},
            0, NAN, 0);
      }
    }
  }

  for (const auto& [name, p] : pools_) {
    cluster = p.cluster;
    auto fact = facts_.find(name);
    const std::string type = fact == facts_.end() ? "" : fact->second.cluster_type;
    const double util = p.measured_h > 0 ? p.util_h / p.measured_h : NAN;
    const GpuModelSpec* spec = ctx_.catalog->Find(p.model);
    const double rate = Rate(p.model, p.cluster);
    if (type == "inference" && spec && spec->mig_supported && !std::isnan(util) && util < 30) {
      const double saved = p.alloc_h * (1 - util / 60);
      add("mig", "pool " + name,
          "inference pool " + name + " ran at " + Fixed(util, 1) +
              "% utilization: MIG slices would serve it with " + Fixed(100 * util / 60, 0) +
              "% of its GPU-hours",
          {{"pool", name}, {"jobs", Jobs(p.jobs)}, {"util_mean", util}, {"gpu_hours", p.alloc_h}},
          saved, saved * rate, p.alloc_h > 0 ? p.energy_j / 3.6e6 * saved / p.alloc_h : 0);
    }
    if (type == "development" && !std::isnan(util) && util < 20) {
      const double keep = std::max(util / 50, 0.25);  // up to four jobs on a GPU
      const double saved = p.alloc_h * (1 - keep);
      add("time_slicing", "pool " + name,
          "development pool " + name + " ran at " + Fixed(util, 1) +
              "% utilization: time-slicing (up to 4 jobs a GPU) would need " +
              Fixed(100 * keep, 0) + "% of its GPU-hours",
          {{"pool", name}, {"jobs", Jobs(p.jobs)}, {"util_mean", util}, {"gpu_hours", p.alloc_h}},
          saved, saved * rate, p.alloc_h > 0 ? p.energy_j / 3.6e6 * saved / p.alloc_h : 0);
    }
    // Only with six hours recorded, and never the pool's last node.
    if (p.covered_ms >= kMinShrinkEvidenceMs) {
      const double installed = p.installed_ms / p.covered_ms;
      const int per_node = fact == facts_.end() ? 8 : std::max(1, fact->second.gpus_per_node);
      const double spare = installed - std::ceil(p.peak_demand * 1.2);
      const int nodes = std::min(static_cast<int>(std::floor(spare / per_node)),
                                 static_cast<int>(std::floor(installed / per_node)) - 1);
      if (p.peak_demand < 0.7 * installed && nodes >= 1) {
        const double gpus = nodes * per_node, hours = p.covered_ms / kHourMs;
        const double free_w = p.free_gpu_ms > 0 ? p.free_energy_j / (p.free_gpu_ms / 1000) : 0;
        add("shrink_pool", "pool " + name,
            "pool " + name + " peaked at " + Fixed(p.peak_demand, 1) + " of " +
                Fixed(installed, 0) + " GPUs held or queued for: " + std::to_string(nodes) +
                " node(s) fewer keep 20% headroom",
            {{"pool", name},
             {"gpus_installed", installed},
             {"peak_demand_gpus", p.peak_demand},
             {"nodes_to_remove", nodes},
             {"hours", hours}},
            gpus * hours, gpus * hours * rate, gpus * free_w * hours / 1000);
      }
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const Recommendation& a, const Recommendation& b) {
    return a.gpu_hours_saved > b.gpu_hours_saved;
  });
  return out;
}

Result<std::vector<Recommendation>> RunAdvice(store::UsageStore& store,
                                              const AdviceRequest& request, ReportContext context,
                                              std::map<std::string, PoolFacts> pools,
                                              const std::vector<RunningJob>& running) {
  AdviceBuilder b(request, std::move(context), std::move(pools));
  store::UsageQuery q;
  q.from_ms = request.from_ms;
  q.to_ms = request.to_ms;
  GF_TRY(store.ScanUsage(q, [&](const store::UsageRecord& r) { b.Add(r); }));
  auto hours = store.ListPoolHours(request.from_ms / 3'600'000 * 3'600'000, request.to_ms);
  if (!hours.ok()) return hours.error();
  for (const auto& h : hours.value()) b.AddHour(h);
  for (const auto& j : running) b.AddRunning(j);
  return b.Finish();
}

}  // namespace gpufleet::usage
