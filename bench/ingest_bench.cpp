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

constexpr int kGpus = 8;

// NODES 8-GPU nodes' agent batches for SECONDS one-second steps, encoded: second-major (every
// node's batch for t, then t+1), and each GPU's uuid.
struct Batches {
  std::vector<std::vector<std::string>> uuids;
  std::vector<std::string> encoded;
};

Batches Encode(int nodes, int seconds) {
  Batches b;
  b.uuids.resize(static_cast<size_t>(nodes));
  std::vector<bench::GpuModel> models;
  for (int n = 0; n < nodes; ++n) {
    for (int g = 0; g < kGpus; ++g) {
      b.uuids[n].push_back("GPU-" + std::to_string(n) + "-" + std::to_string(g));
      models.emplace_back(n * kGpus + g + 1);
    }
  }
  int64_t t0 = 1'764'430'000'000;
  double v[bench::kBenchFields];
  for (int s = 0; s < seconds; ++s) {
    for (int n = 0; n < nodes; ++n) {
      proto::Samples batch;
      batch.seq = s + 1;
      for (int g = 0; g < kGpus; ++g) {
        models[n * kGpus + g].Next(v);
        SampleRow row;
        row.time_ms = t0 + 1000LL * s;
        row.gpu = g;
        for (int f = 0; f < bench::kBenchFields; ++f) row.set(kMap[f], v[f]);
        batch.rows.push_back(row);
      }
      b.encoded.push_back(proto::Encode(batch));
    }
  }
  return b;
}

// Decodes and stores every batch; returns the samples stored.
uint64_t IngestAll(TelemetryStore& store, const Batches& b) {
  uint64_t stored = 0;
  const size_t nodes = b.uuids.size();
  for (size_t i = 0; i < b.encoded.size(); ++i) {
    auto message = proto::Decode(b.encoded[i]);
    const auto& samples = std::get<proto::Samples>(message.value());
    auto result = store.Ingest(b.uuids[i % nodes], samples);
    stored += result->stored;
  }
  return stored;
}

std::string BenchDir(const char* name) {
  return std::string("/tmp/gpufleet-") + name + "-" + std::to_string(::getpid());
}

// NODES 8-GPU nodes, SECONDS one-second batches each, encoded up front.
void BM_ControllerIngestPath(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  const int seconds = static_cast<int>(state.range(1));
  const Batches b = Encode(nodes, seconds);
  size_t bytes = 0;
  for (const auto& e : b.encoded) bytes += e.size();
  uint64_t stored = 0;
  for (auto _ : state) {
    state.PauseTiming();
    std::string dir = BenchDir("ingest-bench");
    std::filesystem::remove_all(dir);
    auto store = TelemetryStore::Open({dir, {}});
    if (!store.ok()) {
      state.SkipWithError(store.error().message.c_str());
      return;
    }
    state.ResumeTiming();
    stored += IngestAll(**store, b);
    state.PauseTiming();
    store->reset();
    std::filesystem::remove_all(dir);
    state.ResumeTiming();
  }
  state.SetItemsProcessed(static_cast<int64_t>(stored));
  state.counters["batch_bytes"] =
      static_cast<double>(bytes) / static_cast<double>(b.encoded.size());
  state.counters["samples_per_batch"] = kGpus * bench::kBenchFields;
}
BENCHMARK(BM_ControllerIngestPath)
    ->Args({125, 120})  // 1,000 GPUs x 16 fields for two minutes: 1.92 M samples
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->Repetitions(3)
    ->ReportAggregatesOnly(true);

// The telemetry snapshot the controller writes every 10 minutes and when it stops, of a fleet
// of NODES 8-GPU nodes after SECONDS of telemetry: one series per GPU and field.
void BM_Checkpoint(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  const Batches b = Encode(nodes, static_cast<int>(state.range(1)));
  std::string dir = BenchDir("checkpoint-bench");
  std::filesystem::remove_all(dir);
  auto store = TelemetryStore::Open({dir, {}});
  if (!store.ok()) {
    state.SkipWithError(store.error().message.c_str());
    return;
  }
  IngestAll(**store, b);
  for (auto _ : state) {
    if (auto s = (*store)->Checkpoint(); !s.ok()) state.SkipWithError(s.error().message.c_str());
  }
  uintmax_t bytes = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().filename().string().starts_with("checkpoint-")) bytes += e.file_size();
  }
  state.counters["series"] = nodes * kGpus * bench::kBenchFields;
  state.counters["checkpoint_MiB"] = static_cast<double>(bytes) / (1 << 20);
  store->reset();
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_Checkpoint)
    ->Args({1250, 30})   // 10,000 GPUs x 16 fields, 30 s of telemetry each
    ->Args({1250, 300})  // ... and five minutes
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);

}  // namespace
}  // namespace gpufleet
