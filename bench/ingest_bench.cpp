// The controller's own telemetry ingest path without a simulator: pre-encoded agent batches
// (the JSON text the WebSocket delivers) are decoded and stored through TelemetryStore, write-
// ahead log included, as AgentRouter does for every batch. Reports samples per second.

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "bench_gpu.h"
#include "proto/proto.h"
#include "telemetry/telemetry.h"

namespace gpufleet {
namespace {

// Where the benchmark's 16 values go among the agent's fields.
constexpr Field kMap[bench::kBenchFields] = {
    Field::kGpuUtil,     Field::kMemCopyUtil, Field::kFbUsed,         Field::kFbFree,
    Field::kGpuTemp,     Field::kMemoryTemp,  Field::kPowerUsage,     Field::kPowerLimit,
    Field::kTotalEnergy, Field::kSmClock,     Field::kMemClock,       Field::kPcieTx,
    Field::kPcieRx,      Field::kPcieReplay,  Field::kEccSbeVolatile, Field::kEccDbeVolatile};

// NODES 8-GPU nodes, SECONDS one-second batches each, encoded up front.
void BM_ControllerIngestPath(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  const int seconds = static_cast<int>(state.range(1));
  constexpr int kGpus = 8;
  std::vector<std::vector<std::string>> uuids(nodes);
  std::vector<bench::GpuModel> models;
  for (int n = 0; n < nodes; ++n) {
    for (int g = 0; g < kGpus; ++g) {
      uuids[n].push_back("GPU-" + std::to_string(n) + "-" + std::to_string(g));
      models.emplace_back(n * kGpus + g + 1);
    }
  }
  std::vector<std::string> batches;  // second-major: every node's batch for t, then t+1
  int64_t t0 = 1'764'430'000'000;
  double v[bench::kBenchFields];
  for (int s = 0; s < seconds; ++s) {
    for (int n = 0; n < nodes; ++n) {
      proto::Samples batch;
      batch.seq = s + 1;
      for (int g = 0; g < kGpus; ++g) {
        models[n * kGpus + g].Next(v);
        proto::SampleRow row;
        row.time_ms = t0 + 1000LL * s;
        row.gpu = g;
        for (int f = 0; f < bench::kBenchFields; ++f) row.set(kMap[f], v[f]);
        batch.rows.push_back(row);
      }
      batches.push_back(proto::Encode(batch));
    }
  }
  size_t bytes = 0;
  for (const auto& b : batches) bytes += b.size();
  uint64_t stored = 0;
  for (auto _ : state) {
    state.PauseTiming();
    std::string dir = "/tmp/gpufleet-ingest-bench-" + std::to_string(::getpid());
    std::filesystem::remove_all(dir);
    auto store = TelemetryStore::Open({dir, {}});
    if (!store.ok()) {
      state.SkipWithError(store.error().message.c_str());
      return;
    }
    state.ResumeTiming();
    for (size_t i = 0; i < batches.size(); ++i) {
      auto message = proto::Decode(batches[i]);
      const auto& samples = std::get<proto::Samples>(message.value());
      auto result = (*store)->Ingest(uuids[i % nodes], samples);
      stored += result->stored;
    }
    state.PauseTiming();
    store->reset();
    std::filesystem::remove_all(dir);
    state.ResumeTiming();
  }
  state.SetItemsProcessed(static_cast<int64_t>(stored));
  state.counters["batch_bytes"] = static_cast<double>(bytes) / static_cast<double>(batches.size());
  state.counters["samples_per_batch"] = kGpus * bench::kBenchFields;
}
BENCHMARK(BM_ControllerIngestPath)
    ->Args({125, 120})  // 1,000 GPUs x 16 fields for two minutes: 1.92 M samples
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->Repetitions(3)
    ->ReportAggregatesOnly(true);

}  // namespace
}  // namespace gpufleet
