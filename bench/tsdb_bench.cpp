// Time-series store benchmarks on simulated GPU telemetry with realistic noise: 16 fields per
// GPU at 1 Hz on a 1-second grid, the values NVML gives (integers: %, MiB, degC, MHz, mW,
// mJ, KB/s, counts). Reports append throughput and bytes per raw sample.

#include <benchmark/benchmark.h>

#include <string>

#include "bench_gpu.h"
#include "tsdb/store.h"

namespace gpufleet::tsdb {
namespace {

using bench::GpuModel;

constexpr int kFields = bench::kBenchFields;

// Appends `gpus` x 16 fields x `seconds` samples; reports throughput and bytes per sample.
void BM_AppendRealisticTelemetry(benchmark::State& state) {
  const int gpus = static_cast<int>(state.range(0));
  const int seconds = static_cast<int>(state.range(1));
  TsdbStats stats;
  for (auto _ : state) {
    state.PauseTiming();
    Tsdb db;
    std::vector<GpuModel> models;
    std::vector<SeriesId> ids;
    for (int g = 0; g < gpus; ++g) {
      models.emplace_back(g + 1);
      for (int f = 0; f < kFields; ++f)
        ids.push_back(db.Intern("GPU-" + std::to_string(g) + "/" + std::to_string(f)));
    }
    std::vector<double> values(static_cast<size_t>(gpus) * kFields);
    state.ResumeTiming();
    int64_t t = 1'764'430'000'000;
    for (int s = 0; s < seconds; ++s, t += 1000) {
      state.PauseTiming();
      for (int g = 0; g < gpus; ++g) models[g].Next(&values[static_cast<size_t>(g) * kFields]);
      state.ResumeTiming();
      for (size_t i = 0; i < ids.size(); ++i) (void)db.Append(ids[i], t, values[i]);
    }
    state.PauseTiming();
    stats = db.Stats();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * gpus * kFields * seconds);
  state.counters["raw_bytes_per_sample"] = stats.raw_bytes_per_sample();
  state.counters["bytes_per_gpu_hour_raw"] =
      static_cast<double>(stats.raw_bytes) / gpus * 3600.0 / seconds;
  state.counters["all_tiers_bytes_per_sample"] =
      static_cast<double>(stats.total_bytes) / static_cast<double>(stats.raw_samples);
}
BENCHMARK(BM_AppendRealisticTelemetry)
    ->Args({100, 3600})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

void BM_QueryOneHourRaw(benchmark::State& state) {
  Tsdb db;
  GpuModel model(1);
  std::vector<SeriesId> ids;
  for (int f = 0; f < kFields; ++f) ids.push_back(db.Intern("GPU-0/" + std::to_string(f)));
  double v[kFields];
  int64_t t0 = 1'764'430'000'000;
  for (int s = 0; s < 24 * 3600; ++s) {
    model.Next(v);
    for (int f = 0; f < kFields; ++f) (void)db.Append(ids[f], t0 + 1000LL * s, v[f]);
  }
  for (auto _ : state) benchmark::DoNotOptimize(db.Raw(ids[6], t0 + 3'600'000, t0 + 7'200'000));
}
BENCHMARK(BM_QueryOneHourRaw)->Unit(benchmark::kMicrosecond);

void BM_QueryDayOfMinutes(benchmark::State& state) {
  Tsdb db;
  GpuModel model(1);
  SeriesId id = db.Intern("GPU-0/power");
  double v[kFields];
  int64_t t0 = 1'764'430'000'000;
  for (int s = 0; s < 24 * 3600; ++s) {
    model.Next(v);
    (void)db.Append(id, t0 + 1000LL * s, v[6]);
  }
  for (auto _ : state) {
    benchmark::DoNotOptimize(db.Rollup(id, Resolution::kMinute, t0, t0 + 24 * 3'600'000));
  }
}
BENCHMARK(BM_QueryDayOfMinutes)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace gpufleet::tsdb
