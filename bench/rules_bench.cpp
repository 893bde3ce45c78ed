// Alert rule evaluation: 500 rules over 100,000 GPU series (10,000 GPUs x 10 fields, sampled
// at 1 Hz for the last 5 minutes) read from the real telemetry store, one cycle as the
// controller runs it: the snapshot from the health reports, every rule's expression, and the
// engine's state changes.
//
// The mixes (each 500 rules; thresholds vary so that rules do not collapse into one):
//   /0: 300 instant comparisons (10 fields x 10 clusters x 3), 100 aggregations by pool, node
//       or cluster, 100 over health, nodes and XID events;
//   /1: the same with 100 of the instant comparisons replaced by windowed functions
//       (max/avg_over_time, increase, rate over [5m]) per cluster, 40 distinct windows.

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>

#include "alerting/engine.h"
#include "alerting/eval.h"
#include "common/clock.h"
#include "telemetry/telemetry.h"

namespace gpufleet {
namespace {

constexpr int kClusters = 10, kPoolsPerCluster = 5, kNodes = 1250, kGpus = 8;
constexpr int kHistory = 300;  // seconds at 1 Hz
const Field kBenchFields[] = {Field::kGpuUtil,    Field::kMemCopyUtil, Field::kFbUsed,
                              Field::kFbFree,     Field::kGpuTemp,     Field::kMemoryTemp,
                              Field::kPowerUsage, Field::kSmClock,     Field::kEccSbeVolatile,
                              Field::kPcieReplay};

class Fleet {
 public:
  Fleet() {
    dir_ = "/tmp/gpufleet-rules-bench-" + std::to_string(::getpid());
    std::filesystem::remove_all(dir_);
    telemetry_ = std::move(TelemetryStore::Open({dir_ + "/tsdb", {}}).value());
    now_ = RealClock()->NowMs();
    for (int n = 0; n < kNodes; ++n) {
      health::NodeHealth node;
      node.node = "n-" + std::to_string(10000 + n);
      node.cluster = "c" + std::to_string(n % kClusters);
      node.pool = node.cluster + "-p" + std::to_string(n / kClusters % kPoolsPerCluster);
      node.state = NodeState::kReady;
      node.last_seen_ms = now_ - 1000;
      node.reachable = n % 500 != 7;
      std::vector<std::string> uuids;
      proto::Samples batch;
      for (int g = 0; g < kGpus; ++g) {
        health::GpuHealth gpu;
        gpu.index = g;
        gpu.uuid = "GPU-" + std::to_string(n) + "-" + std::to_string(g) + "-5f1c2a7e-93b4-4c8d";
        gpu.model = "H100-SXM5-80GB";
        gpu.level = (n * kGpus + g) % 97 == 0 ? health::Level::kFailed : health::Level::kHealthy;
        uuids.push_back(gpu.uuid);
        node.gpus.push_back(gpu);
        if ((n * kGpus + g) % 113 == 0) xids_[gpu.uuid].push_back({now_ - 60'000, 79});
      }
      for (int s = kHistory; s > 0; --s) {
        for (int g = 0; g < kGpus; ++g) {
          SampleRow row;
          row.time_ms = now_ - s * 1000;
          row.gpu = g;
          double phase = (n * 31 + g * 7 + s / 10) % 100;
          row.set(Field::kGpuUtil, phase);
          row.set(Field::kMemCopyUtil, phase / 2);
          row.set(Field::kFbUsed, 20'000 + phase * 500);
          row.set(Field::kFbFree, 61'559 - phase * 500);
          row.set(Field::kGpuTemp, 40 + phase / 3);
          row.set(Field::kMemoryTemp, 46 + phase / 3);
          row.set(Field::kPowerUsage, 100'000 + phase * 6'000);
          row.set(Field::kSmClock, phase > 50 ? 1980 : 345);
          row.set(Field::kEccSbeVolatile, (kHistory - s) / 60);
          row.set(Field::kPcieReplay, (kHistory - s) / 100);
          batch.rows.push_back(row);
        }
      }
      (void)telemetry_->Ingest(uuids, batch);
      reports_.push_back(std::move(node));
    }
    reader_ = alerting::MakeTelemetryReader(*telemetry_);
  }
  ~Fleet() { std::filesystem::remove_all(dir_); }

  std::string dir_;
  int64_t now_ = 0;
  std::unique_ptr<TelemetryStore> telemetry_;
  std::vector<health::NodeHealth> reports_;
  std::map<std::string, std::vector<health::XidSeen>> xids_;
  std::unique_ptr<alerting::SeriesReader> reader_;
};

Fleet& Shared() {
  static Fleet fleet;
  return fleet;
}

std::vector<alerting::Rule> Rules(bool windowed) {
  std::vector<std::string> exprs;
  auto cluster = [](int i) { return "cluster=\"c" + std::to_string(i % kClusters) + "\""; };
  int instant = windowed ? 200 : 300;
  for (int i = 0; i < instant; ++i) {
    // gpu_temp's thresholds catch its hottest GPUs; the others' catch none (a healthy fleet).
    Field f = kBenchFields[i % 10];
    std::string threshold =
        f == Field::kGpuTemp ? std::to_string(72 + i % 3) : std::to_string(1e7 + i);
    exprs.push_back(std::string(Info(f).name) + "{" + cluster(i / 10) + "} > " + threshold);
  }
  if (windowed) {
    const char* fns[] = {"max_over_time(gpu_temp", "avg_over_time(gpu_util",
                         "increase(ecc_sbe_volatile", "rate(pcie_replay"};
    for (int i = 0; i < 100; ++i) {
      exprs.push_back(std::string(fns[i % 4]) + "{" + cluster(i / 4) + "}[5m]) > " +
                      std::to_string(90 + i / 40));
    }
  }
  const char* aggs[] = {"avg by (cluster, pool) (gpu_util{", "max by (Hostname) (gpu_temp{",
                        "sum by (cluster) (power_usage{", "min by (cluster, pool) (sm_clock{"};
  for (int i = 0; i < 100; ++i) {
    exprs.push_back(std::string(aggs[i % 4]) + cluster(i / 4) + "}) > " + std::to_string(1e9 + i));
  }
  const char* health[] = {"gpu_health{%s} == 2", "sum by (cluster, pool) (gpu_available{%s}) < %d",
                          "count_over_time(xid_events{xid=\"79\",%s}[10m]) > %d",
                          "node_up{%s} == 0", "avg by (pool) (gpu_healthy{%s}) < 0.%d"};
  for (int i = 0; i < 100; ++i) {
    char buf[200];
    std::snprintf(buf, sizeof buf, health[i % 5], cluster(i / 5).c_str(), 1 + i / 50);
    exprs.push_back(buf);
  }
  std::vector<alerting::Rule> rules;
  for (size_t i = 0; i < exprs.size(); ++i) {
    alerting::Rule r;
    r.name = "Rule" + std::to_string(i);
    r.group = "bench";
    r.expr = exprs[i];
    r.for_ms = 60'000;
    if (auto s = alerting::CheckRule(r); !s.ok()) {
      std::fprintf(stderr, "%s: %s\n", exprs[i].c_str(), s.error().message.c_str());
      std::abort();
    }
    rules.push_back(std::move(r));
  }
  return rules;
}

void BM_RulesCycle(benchmark::State& state) {
  auto& fleet = Shared();
  auto rules = Rules(state.range(0) == 1);
  alerting::Engine engine(rules);
  size_t signals = 0;
  for (auto _ : state) {
    auto snap = alerting::MakeSnapshot(fleet.reports_, fleet.xids_, *XidCatalog::Builtin(),
                                       fleet.now_, NAN);
    alerting::Evaluator evaluator(snap, *fleet.reader_);
    auto s = alerting::ExprSignals(engine.rules(), evaluator, nullptr);
    signals = s.size();
    engine.Evaluate(fleet.now_, s);
  }
  state.counters["rules"] = static_cast<double>(rules.size());
  state.counters["series"] = kNodes * kGpus * 10;
  state.counters["signals"] = static_cast<double>(signals);
}
BENCHMARK(BM_RulesCycle)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->MinTime(2);

// The parts of a cycle on their own: the snapshot from 1,250 nodes' health reports, and the
// latest value of the 10 fields for every GPU.
void BM_SnapshotOnly(benchmark::State& state) {
  auto& fleet = Shared();
  for (auto _ : state) {
    auto snap = alerting::MakeSnapshot(fleet.reports_, fleet.xids_, *XidCatalog::Builtin(),
                                       fleet.now_, NAN);
    benchmark::DoNotOptimize(snap);
  }
}
BENCHMARK(BM_SnapshotOnly)->Unit(benchmark::kMillisecond);

void BM_LatestOnly(benchmark::State& state) {
  auto& fleet = Shared();
  auto snap =
      alerting::MakeSnapshot(fleet.reports_, fleet.xids_, *XidCatalog::Builtin(), fleet.now_, NAN);
  std::vector<double> out;
  for (auto _ : state) {
    for (Field f : kBenchFields) fleet.reader_->Latest(snap, f, 0, out);
  }
}
BENCHMARK(BM_LatestOnly)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace gpufleet
