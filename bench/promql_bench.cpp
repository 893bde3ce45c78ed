// The Prometheus query API's evaluation (alerting/history.h, the code behind
// /prometheus/api/v1/query_range and query) over the real telemetry store: 1,000 GPUs (125
// 8-GPU nodes in 5 pools) with 24 hours of DCGM_FI_DEV_GPU_UTIL at 1 Hz (86.4 M samples).
// Issue 50's target: `sum by (pool)` over the 24 hours at a 1-minute step under 300 ms.
// Rendering the JSON answer is not included (5 series x 1,441 points here).

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>

#include "alerting/eval.h"
#include "alerting/expr.h"
#include "alerting/history.h"
#include "common/clock.h"
#include "telemetry/telemetry.h"

namespace gpufleet {
namespace {

constexpr int kNodes = 125, kGpus = 8, kPools = 5;
constexpr int64_t kDayMs = 24 * 3'600'000;

class Fleet {
 public:
  Fleet() {
    dir_ = "/tmp/gpufleet-promql-bench-" + std::to_string(::getpid());
    std::filesystem::remove_all(dir_);
    telemetry_ = std::move(TelemetryStore::Open({dir_ + "/tsdb", {}}).value());
    now_ = RealClock()->NowMs() / 60'000 * 60'000;
    snap_.generation = 1;
    snap_.now_ms = now_;
    snap_.clusters = {"train"};
    snap_.models = {"NVIDIA H100 80GB HBM3"};
    for (int p = 0; p < kPools; ++p) snap_.pools.push_back("p" + std::to_string(p));
    for (int n = 0; n < kNodes; ++n) {
      snap_.nodes.push_back({"node-" + std::to_string(1000 + n), 0,
                             static_cast<uint32_t>(n % kPools), true, 0, false, now_});
      std::vector<std::string> uuids;
      for (int g = 0; g < kGpus; ++g) {
        std::string uuid = "GPU-" + std::to_string(n) + "-" + std::to_string(g) + "-7e2d";
        uuids.push_back(uuid);
        snap_.gpus.push_back(
            {static_cast<uint32_t>(n), std::to_string(g), uuid, 0, 0, "00000000:18:00.0", ""});
      }
      // An hour per batch: 28,800 rows.
      for (int64_t hour = 0; hour < 24; ++hour) {
        proto::Samples batch;
        for (int64_t s = 0; s < 3600; ++s) {
          int64_t t = now_ - kDayMs + (hour * 3600 + s) * 1000;
          for (int g = 0; g < kGpus; ++g) {
            SampleRow row;
            row.time_ms = t;
            row.gpu = g;
            row.set(Field::kGpuUtil, static_cast<double>((n * 31 + g * 7 + t / 10'000) % 100));
            batch.rows.push_back(row);
          }
        }
        (void)telemetry_->Ingest(uuids, batch);
      }
    }
  }
  ~Fleet() { std::filesystem::remove_all(dir_); }

  std::string dir_;
  int64_t now_ = 0;
  std::unique_ptr<TelemetryStore> telemetry_;
  alerting::Snapshot snap_;
};

Fleet& Shared() {
  static Fleet fleet;
  return fleet;
}

// One range query as the API runs it: a reader over the span, an evaluator, every step.
void RunRange(benchmark::State& state, const char* text, int64_t span_ms, int64_t step_ms,
              int64_t rollup_ms) {
  Fleet& f = Shared();
  auto expr = alerting::ParseQuery(text).value();
  const int64_t end = f.now_, start = end - span_ms;
  size_t points = 0, loaded = 0;
  for (auto _ : state) {
    auto reader =
        alerting::MakeHistoryReader(*f.telemetry_, start - 5 * 60'000, end, 10'000'000, rollup_ms);
    alerting::Evaluator ev(f.snap_, *reader, {true});
    auto series =
        alerting::EvaluateRange(ev, *reader, *expr, start, end, step_ms, 5'000'000,
                                std::chrono::steady_clock::now() + std::chrono::minutes(2));
    if (!series.ok()) {
      state.SkipWithError(series.error().message.c_str());
      return;
    }
    points = 0;
    for (const auto& s : series.value()) points += s.points.size();
    loaded = reader->loaded();
    benchmark::DoNotOptimize(points);
  }
  state.counters["points"] = static_cast<double>(points);
  state.counters["loaded"] = static_cast<double>(loaded);
}

// The case: a pool's utilization over a day, a point a minute (minute rollups).
void BM_QueryRange24hSumByPool1m(benchmark::State& state) {
  RunRange(state, "sum by (pool) (DCGM_FI_DEV_GPU_UTIL)", kDayMs, 60'000, 60'000);
}
BENCHMARK(BM_QueryRange24hSumByPool1m)->Unit(benchmark::kMillisecond)->MinTime(2);

// An hour per node at 15 s from raw samples (3.6 M loaded).
void BM_QueryRange1hAvgByNode15s(benchmark::State& state) {
  RunRange(state, "avg by (Hostname) (DCGM_FI_DEV_GPU_UTIL)", 3'600'000, 15'000, 0);
}
BENCHMARK(BM_QueryRange1hAvgByNode15s)->Unit(benchmark::kMillisecond)->MinTime(2);

// A window function over an hour at 1 m: each step's 5-minute window from the raw samples.
void BM_QueryRange1hMaxOverTime5m(benchmark::State& state) {
  RunRange(state, "max by (pool) (max_over_time(DCGM_FI_DEV_GPU_UTIL[5m]))", 3'600'000, 60'000,
           60'000);
}
BENCHMARK(BM_QueryRange1hMaxOverTime5m)->Unit(benchmark::kMillisecond)->MinTime(2);

// An instant query now: each GPU's newest sample from memory.
void BM_QueryNowAvgByPool(benchmark::State& state) {
  Fleet& f = Shared();
  auto expr = alerting::ParseQuery("avg by (pool) (DCGM_FI_DEV_GPU_UTIL)").value();
  for (auto _ : state) {
    auto reader =
        alerting::MakeHistoryReader(*f.telemetry_, f.now_ - 5 * 60'000, f.now_, 10'000'000);
    alerting::Evaluator ev(f.snap_, *reader, {true});
    ev.SetTime(f.now_);
    auto out = ev.Run(*expr);
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK(BM_QueryNowAvgByPool)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace gpufleet
