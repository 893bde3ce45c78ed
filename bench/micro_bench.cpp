// Micro-benchmarks of the controller's hot paths: decoding an agent's hello, judging a node
// against its pool, and listing 1,000 nodes (what GET /api/v1/nodes does before serialising).

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>
#include <memory>

#include "common/json_text.h"
#include "fleet/fleet.h"
#include "model/json.h"
#include "proto/proto.h"
#include "workload/jobs.h"

namespace gpufleet {
namespace {

proto::Hello MakeHello(const std::string& host) {
  proto::Hello h;
  h.join_token = "gfj_0123456789abcdef0123456789abcdef0123456789abcdef";
  h.facts.hostname = host;
  h.facts.driver_version = "550.54.15";
  h.facts.cuda_driver_version = "12.4";
  for (int i = 0; i < 8; ++i) {
    Gpu g;
    g.index = i;
    g.uuid = "GPU-0f0e0d0c-0000-1111-2222-33334444555" + std::to_string(i);
    g.name = "NVIDIA H100 80GB HBM3";
    g.serial = "165222300000" + std::to_string(i);
    g.pci_bus_id = "00000000:18:00.0";
    g.memory_total_bytes = 85520809984ull;
    g.vbios_version = "96.00.74.00.01";
    g.inforom_version = "G520.0200.00.05";
    g.mig_mode = 0;
    h.gpus.push_back(g);
  }
  return h;
}

void BM_DecodeHello(benchmark::State& state) {
  std::string wire = proto::Encode(MakeHello("node-0001"));
  for (auto _ : state) benchmark::DoNotOptimize(proto::Decode(wire));
  state.SetBytesProcessed(state.iterations() * wire.size());
}
BENCHMARK(BM_DecodeHello);

class Fixture {
 public:
  Fixture() {
    dir_ = std::filesystem::temp_directory_path() / ("gf-bench-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    store_ = store::Open("sqlite:" + (dir_ / "db").string()).value();
    fleet_ = std::make_unique<FleetService>(*store_.fleet, *store_.tokens, GpuCatalog::Builtin(),
                                            RealClock(), FleetOptions{});
    auto spec = ParseFleetSpec(
        "apiVersion: gpufleet/v1\nkind: Fleet\nclusters:\n  - name: c\n    type: training\n"
        "    site: s\n    pools:\n      - {name: p, gpu_model: H100-SXM5-80GB}\n",
        "bench.yaml", *GpuCatalog::Builtin());
    (void)fleet_->Apply(spec.value());
    auto token = fleet_->CreateJoinToken("p", 0, "bench").value().secret;
    for (int i = 0; i < 1000; ++i) {
      auto h = MakeHello("node-" + std::to_string(i));
      h.join_token = token;
      for (auto& g : h.gpus) g.uuid += "-" + std::to_string(i);
      (void)fleet_->OnHello(h, "127.0.0.1");
    }
  }
  ~Fixture() { std::filesystem::remove_all(dir_); }
  FleetService& fleet() { return *fleet_; }
  store::JobStore& jobs_store() { return *store_.jobs; }

 private:
  std::filesystem::path dir_;
  store::Stores store_;
  std::unique_ptr<FleetService> fleet_;
};

Fixture& Shared() {
  static Fixture f;
  return f;
}

void BM_ListAndSerialise1000Nodes(benchmark::State& state) {
  auto& fleet = Shared().fleet();
  for (auto _ : state) {
    boost::json::array items;
    for (const auto& n : fleet.Nodes({})) items.push_back(ToJson(n, false));
    benchmark::DoNotOptimize(JsonText(boost::json::object{{"items", std::move(items)}}));
  }
}
BENCHMARK(BM_ListAndSerialise1000Nodes)->Unit(benchmark::kMillisecond);

// What GET /api/v1/nodes does: the per-node JSON cache, after the first call warmed it.
void BM_NodesJson1000(benchmark::State& state) {
  auto& fleet = Shared().fleet();
  for (auto _ : state) benchmark::DoNotOptimize(fleet.NodesJson({}, 0, 5000));
}
BENCHMARK(BM_NodesJson1000)->Unit(benchmark::kMillisecond);

void BM_JudgeNode(benchmark::State& state) {
  auto& fleet = Shared().fleet();
  Pool pool{"p", "c", "H100-SXM5-80GB", 8, 0, {}, 0, 0};
  auto gpus = MakeHello("x").gpus;
  for (auto _ : state) benchmark::DoNotOptimize(fleet.Judge(pool, gpus));
}
BENCHMARK(BM_JudgeNode);

void BM_Heartbeat(benchmark::State& state) {
  auto& fleet = Shared().fleet();
  proto::Message hb = proto::Heartbeat{1, 0};
  for (auto _ : state) fleet.OnMessage("node-500", hb);
}
BENCHMARK(BM_Heartbeat);

}  // namespace
}  // namespace gpufleet
namespace gpufleet {
namespace {
void BM_CopyNodes(benchmark::State& state) {
  auto& fleet = Shared().fleet();
  for (auto _ : state) benchmark::DoNotOptimize(fleet.Nodes({}));
}
BENCHMARK(BM_CopyNodes)->Unit(benchmark::kMillisecond);
}  // namespace
}  // namespace gpufleet
namespace gpufleet {
namespace {
void BM_FormatTime(benchmark::State& state) {
  int64_t t = 1'764'430'000'123;
  for (auto _ : state) benchmark::DoNotOptimize(FormatTime(++t));
}
BENCHMARK(BM_FormatTime);
}  // namespace
}  // namespace gpufleet
namespace gpufleet {
namespace {
// The controller's jobs pass (ends, requeues, placements; every second) on the 1,000 8-GPU
// nodes above, all busy with 1,000 running 8-GPU jobs and 100 queued, while the service keeps
// ENDED jobs that ended within the retention time (7 days; a fleet starting a job a second
// keeps 600,000).
// Stores `ended` completed jobs of pool p, as a week of retention keeps them.
Status SeedEndedJobs(int ended, int64_t now) {
  std::vector<JobRecord> records;
  for (int i = 1; i <= ended; ++i) {
    boost::json::object doc{{"team", "t" + std::to_string(i % 8)},
                            {"project", ""},
                            {"cluster", "c"},
                            {"pool", "p"},
                            {"gpu_model", "H100-SXM5-80GB"},
                            {"gpus", 1},
                            {"priority", 0},
                            {"duration_ms", 60'000},
                            {"submit_ms", now - 120'000},
                            {"queued_ms", now - 120'000},
                            {"start_ms", now - 60'000},
                            {"end_ms", now},
                            {"wait_ms", 60'000},
                            {"gpu_hours", 1.0 / 60},
                            {"requeues", 0},
                            {"reason", "ran its duration"},
                            {"placement", boost::json::array{}}};
    records.push_back({i, "completed", JsonText(doc), now});
  }
  return Shared().jobs_store().SaveJobs(records);
}

// A jobs service over the store with `ended` completed jobs seeded (null and an error set on
// state when seeding or loading fails).
std::unique_ptr<workload::JobService> JobsWithEnded(benchmark::State& state, int ended,
                                                    int64_t now) {
  auto& f = Shared();
  if (auto s = SeedEndedJobs(ended, now); !s.ok()) {
    state.SkipWithError("seeding jobs");
    return nullptr;
  }
  auto jobs = std::make_unique<workload::JobService>(f.fleet(), f.jobs_store(), RealClock(),
                                                     600'000, 7 * 86'400'000LL);
  if (auto s = jobs->Load(); !s.ok()) {
    state.SkipWithError(s.error().message.c_str());
    return nullptr;
  }
  return jobs;
}

void BM_JobsTick(benchmark::State& state) {
  auto& f = Shared();
  const int ended = static_cast<int>(state.range(0));
  const int64_t now = RealClock()->NowMs();
  auto service = JobsWithEnded(state, ended, now);
  if (!service) return;
  workload::JobService& jobs = *service;
  workload::JobSpec spec;
  spec.team = "t";
  spec.pool = "p";
  spec.gpus = 8;
  for (int i = 0; i < 1100; ++i) (void)jobs.Submit(spec);
  for (auto _ : state) jobs.Tick();
  state.counters["jobs_kept"] = static_cast<double>(jobs.List({}).size());
  for (const auto& j : jobs.List({})) (void)jobs.Cancel(j.id);  // the next run starts empty
  (void)f.jobs_store().DeleteEndedJobsBefore(now + 86'400'000LL);
}
BENCHMARK(BM_JobsTick)->Arg(0)->Arg(100'000)->Unit(benchmark::kMillisecond);

// GET /api/v1/jobs's work in the service: the first page (50) of a pool's jobs, newest first,
// and how many there are, while a week of ended jobs is kept. It holds the jobs' lock, so the
// jobs pass waits on it.
void BM_JobsListPage(benchmark::State& state) {
  auto& f = Shared();
  const int ended = static_cast<int>(state.range(0));
  const int64_t now = RealClock()->NowMs();
  auto jobs = JobsWithEnded(state, ended, now);
  if (!jobs) return;
  workload::JobFilter filter;
  filter.pool = "p";
  size_t total = 0;
  for (auto _ : state) {
    auto page = jobs->List(filter, 0, 50, total);
    benchmark::DoNotOptimize(page);
  }
  state.counters["jobs_kept"] = static_cast<double>(total);
  (void)f.jobs_store().DeleteEndedJobsBefore(now + 86'400'000LL);
}
BENCHMARK(BM_JobsListPage)->Arg(100'000)->Unit(benchmark::kMillisecond);
}  // namespace
}  // namespace gpufleet
