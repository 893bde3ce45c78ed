// One poll of 10,000 Slurm jobs (issue 48: parsed and reconciled in under 200 ms). The squeue
// document is made from the jobs Debian's Slurm 22.05 printed (tests/fixtures/slurm/
// squeue.json): its running job and its pending job, each copied with its own id, 7,000
// running over 1,250 8-GPU nodes (up to 8 jobs of 1 GPU each, its GPU index from gres_detail)
// and 3,000 pending, about 34 MB of JSON as squeue writes it. On SQLite's jobs store:
//   BM_SlurmParse10k:        ParseSqueue (the document read);
//   BM_SlurmPollSteady10k:   a whole poll when nothing changed: parse, map to gpufleet jobs
//                            (team, project, pool, placement), JobService::SyncExternal;
//   BM_SlurmPollChurn10k:    the same with 100 jobs ended and 100 started since the last poll
//                            (their stored documents written);
//   BM_SlurmPollFirst10k:    the first poll after the bridge starts: all 10,000 added and stored.

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "config/fleet_spec.h"
#include "slurm/bridge.h"
#include "slurm/slurm.h"
#include "workload/jobs.h"

namespace json = boost::json;

namespace gpufleet {
namespace {

constexpr int kNodes = 1250, kRunning = 7000, kPending = 3000;

std::string Recorded() {
  std::ifstream in(std::string(GPUFLEET_SOURCE_DIR) + "/tests/fixtures/slurm/squeue.json");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The recorded document with its jobs copied; `ended` running jobs left out and as many new
// ones added past the others (a poll later).
std::string Document(int ended = 0) {
  json::object doc = json::parse(Recorded()).as_object();
  json::array recorded = doc.at("jobs").as_array();
  json::object running = recorded.at(0).as_object(), pending = recorded.at(3).as_object();
  json::array jobs;
  int id = 1000;
  for (int i = ended; i < kRunning + ended; ++i) {
    json::object j = running;
    const int node = (i / 8) % kNodes, gpu = i % 8;
    j["job_id"] = id + i;
    j["nodes"] = "gpu" + std::to_string(node);
    j["gres_detail"] = json::array{"gpu:h100:1(IDX:" + std::to_string(gpu) + ")"};
    j["tres_per_node"] = "gres:gpu:1";
    j["account"] = i % 3 ? "physics" : "bio";
    jobs.push_back(std::move(j));
  }
  for (int i = 0; i < kPending; ++i) {
    json::object j = pending;
    j["job_id"] = 100'000 + i;
    jobs.push_back(std::move(j));
  }
  doc["jobs"] = std::move(jobs);
  return json::serialize(doc);
}

class Cluster {
 public:
  Cluster() {
    dir_ =
        std::filesystem::temp_directory_path() / ("gf-slurm-bench-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    clock_->Set(1'796'475'100'000);
    store_ = store::Open("sqlite:" + (dir_ / "db").string()).value();
    fleet_ = std::make_unique<FleetService>(*store_.fleet, *store_.tokens, GpuCatalog::Builtin(),
                                            clock_, FleetOptions{});
    const std::string yaml =
        "apiVersion: gpufleet/v1\nkind: Fleet\nclusters:\n  - name: hpc\n    type: training\n"
        "    site: s\n    scheduler: {type: slurm}\n    pools:\n"
        "      - {name: gpu, gpu_model: H100-SXM5-80GB, gpus_per_node: 8}\n";
    (void)fleet_->Apply(ParseFleetSpec(yaml, "bench.yaml", *GpuCatalog::Builtin()).value());
    jobs_ = std::make_unique<workload::JobService>(*fleet_, *store_.jobs, clock_);
    scheduler_ = fleet_->Clusters().value().at(0).scheduler;
    pools_ = fleet_->Pools().value();
    for (int n = 0; n < kNodes; ++n) {
      const std::string name = "gpu" + std::to_string(n);
      nodes_[name] = name;
      pool_of_[name] = "gpu";
    }
  }
  ~Cluster() {
    jobs_.reset();
    fleet_.reset();
    store_ = {};
    std::filesystem::remove_all(dir_);
  }
  // One poll: the document read, mapped and reconciled.
  workload::JobService::SyncCounts Poll(const std::string& doc) {
    auto parsed = slurm::ParseSqueue(doc);
    auto seen =
        slurm::ToExternalJobs(parsed.value(), scheduler_, nodes_, pool_of_, pools_, nullptr);
    return jobs_->SyncExternal("slurm", "hpc", seen);
  }

  std::filesystem::path dir_;
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  store::Stores store_;
  std::unique_ptr<FleetService> fleet_;
  std::unique_ptr<workload::JobService> jobs_;
  Scheduler scheduler_;
  std::vector<Pool> pools_;
  std::map<std::string, std::string> nodes_, pool_of_;
};

void BM_SlurmParse10k(benchmark::State& state) {
  const std::string doc = Document();
  for (auto _ : state) benchmark::DoNotOptimize(slurm::ParseSqueue(doc));
  state.counters["MB"] = static_cast<double>(doc.size()) / 1e6;
}
BENCHMARK(BM_SlurmParse10k)->Unit(benchmark::kMillisecond);

void BM_SlurmPollSteady10k(benchmark::State& state) {
  Cluster c;
  const std::string doc = Document();
  c.Poll(doc);
  for (auto _ : state) {
    auto counts = c.Poll(doc);
    if (counts.added + counts.ended + counts.started) state.SkipWithError("a steady poll changed");
  }
}
BENCHMARK(BM_SlurmPollSteady10k)->Unit(benchmark::kMillisecond);

void BM_SlurmPollChurn10k(benchmark::State& state) {
  Cluster c;
  constexpr int kPolls = 5;
  std::vector<std::string> docs;  // each poll: 100 more ended and 100 more started
  for (int k = 0; k <= kPolls; ++k) docs.push_back(Document(100 * k));
  c.Poll(docs[0]);
  int k = 0;
  for (auto _ : state) {
    auto counts = c.Poll(docs[static_cast<size_t>(++k)]);
    if (counts.ended != 100 || counts.added != 100) state.SkipWithError("not 100 in, 100 out");
  }
}
BENCHMARK(BM_SlurmPollChurn10k)->Unit(benchmark::kMillisecond)->Iterations(5);

void BM_SlurmPollFirst10k(benchmark::State& state) {
  const std::string doc = Document();
  for (auto _ : state) {
    state.PauseTiming();
    auto c = std::make_unique<Cluster>();
    state.ResumeTiming();
    auto counts = c->Poll(doc);
    if (counts.added != kRunning + kPending) state.SkipWithError("not every job was added");
    state.PauseTiming();
    c.reset();
    state.ResumeTiming();
  }
}
BENCHMARK(BM_SlurmPollFirst10k)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace
}  // namespace gpufleet
