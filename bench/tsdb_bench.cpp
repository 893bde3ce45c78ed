// Time-series store benchmarks on simulated GPU telemetry with realistic noise: 16 fields per
// GPU at 1 Hz on a 1-second grid, the values NVML gives (integers: %, MiB, degC, MHz, mW,
// mJ, KB/s, counts). Reports append throughput and bytes per raw sample.

#include <benchmark/benchmark.h>

#include <random>
#include <string>

#include "tsdb/store.h"

namespace gpufleet::tsdb {
namespace {

constexpr int kFields = 16;

// One GPU's telemetry: busy and idle phases of ~10 minutes; power follows utilisation up to
// TDP with sensor noise, temperature follows power with lag, memory steps with jobs.
class GpuModel {
 public:
  explicit GpuModel(uint64_t seed) : rng_(seed) {}
  void Next(double out[kFields]) {
    if (rng_() % 600 == 0) busy_ = !busy_, fb_ = busy_ ? 20'000 + rng_() % 60'000 : 0;
    util_ = busy_ ? std::clamp(util_ + Noise(3), 70.0, 100.0) : (rng_() % 20 == 0 ? 1 : 0);
    double power_mw = 70'000 + util_ * 6'300 + Noise(2'500);
    temp_ += (30 + power_mw / 10'000 - temp_) * 0.02;
    energy_ += static_cast<int64_t>(power_mw);
    out[0] = util_;                                           // gpu util %
    out[1] = busy_ ? std::round(util_ * 0.6 + Noise(2)) : 0;  // memory util %
    out[2] = fb_;                                             // fb used MiB
    out[3] = 81'559 - fb_;                                    // fb free MiB
    out[4] = std::round(temp_);                               // gpu temp
    out[5] = std::round(temp_ + 6);                           // memory temp
    out[6] = std::round(power_mw);                            // power mW
    out[7] = 700'000;                                         // enforced limit mW
    out[8] = static_cast<double>(energy_);                    // total energy mJ
    out[9] = busy_ ? (rng_() % 50 == 0 ? 1755 : 1980) : 345;  // SM clock MHz
    out[10] = busy_ ? 2619 : 1593;                            // memory clock MHz
    out[11] = busy_ ? std::round(12'000 + Noise(800)) : 2;    // PCIe TX KB/s
    out[12] = busy_ ? std::round(48'000 + Noise(3'000)) : 3;  // PCIe RX KB/s
    out[13] = 0;                                              // PCIe replays
    out[14] = sbe_ += (rng_() % 100'000 == 0);                // ECC SBE volatile
    out[15] = 0;                                              // ECC DBE volatile
  }

 private:
  double Noise(double amplitude) {
    return std::round((static_cast<double>(rng_() % 2001) / 1000.0 - 1.0) * amplitude);
  }
  std::mt19937_64 rng_;
  bool busy_ = false;
  double util_ = 0, fb_ = 0, temp_ = 35, sbe_ = 0;
  int64_t energy_ = 4'000'000'000;
};

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
