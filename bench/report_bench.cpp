// The reports over 13 months of a ledger of 1,000,000 allocations (issue 28: under 1 s), on
// SQLite: 5 teams, 20 projects, 10 pools of 5 models in 4 clusters, allocations of 1 to 16 GPUs
// spread evenly over 400 days, each with its document as the ledger writes it (about 400
// bytes), and each pool's 9,600 hours.
//   BM_Report/KIND/BY:  one report over the whole period less a few hours at each end, so that
//                       the records at its ends are read too (usage::RunReport, what
//                       GET /api/v1/reports/KIND does after its checks);
//   BM_LedgerCsv:       the ledger's CSV export (usage::LedgerExport, what
//                       GET /api/v1/usage/export streams) of every record, its parts written to
//                       /dev/null; the counter rss_growth_mib is how much the process's
//                       resident memory grew while it ran, sampled every 12 parts (constant
//                       memory: about a part's, not the ledger's).
// The database is built once per run under $TMPDIR (a few minutes); REPORT_BENCH_REUSE=1 takes
// the one a previous run left there.

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "store/store.h"
#include "usage/reports.h"
#include "usage/usage.h"

namespace gpufleet {
namespace {

constexpr int64_t kRecords = 1'000'000;
constexpr int64_t kDayMs = 86'400'000;
constexpr int64_t kHourMs = 3'600'000;
constexpr int64_t kStart = 1'764'547'200'000;  // 2025-12-01
constexpr int64_t kEnd = kStart + 400 * kDayMs;

struct PoolSpec {
  const char* pool;
  const char* cluster;
  const char* model;
};
constexpr PoolSpec kPools[] = {{"h100-a", "train-1", "H100-SXM5-80GB"},
                               {"h100-b", "train-1", "H100-SXM5-80GB"},
                               {"h200", "train-1", "H200-SXM-141GB"},
                               {"a100-a", "train-2", "A100-SXM4-80GB"},
                               {"a100-b", "train-2", "A100-SXM4-80GB"},
                               {"l40s-a", "infer", "L40S"},
                               {"l40s-b", "infer", "L40S"},
                               {"l4-a", "edge", "L4"},
                               {"l4-b", "edge", "L4"},
                               {"l4-c", "edge", "L4"}};
constexpr const char* kTeams[] = {"nlp", "vision", "speech", "recsys", "research"};

class Ledger {
 public:
  static Ledger& Get() {
    static Ledger ledger;
    return ledger;
  }
  store::UsageStore& usage() { return *stores_.usage; }
  usage::ReportContext Context() const {
    usage::ReportContext c;
    c.cluster_site = {{"train-1", "us-east-1"},
                      {"train-2", "eu-west-1"},
                      {"infer", "us-east-1"},
                      {"edge", "us-central"}};
    for (const char* t : kTeams) c.team_budget[t] = 100'000;
    return c;
  }

 private:
  Ledger() {
    dir_ = std::filesystem::temp_directory_path() / "gf-report-bench";
    const bool reuse =
        std::getenv("REPORT_BENCH_REUSE") && std::filesystem::exists(dir_ / "complete");
    if (!reuse) {
      std::filesystem::remove_all(dir_);
      std::filesystem::create_directories(dir_);
    }
    stores_ = store::Open("sqlite:" + (dir_ / "db").string()).value();
    if (!reuse) Fill();
    std::ofstream(dir_ / "complete") << "1\n";
  }
  void Fill() {
    std::vector<store::UsageRecord> batch;
    const int64_t step = (kEnd - kStart) / kRecords;
    for (int64_t i = 0; i < kRecords; ++i) {
      const PoolSpec& p = kPools[i % std::size(kPools)];
      store::UsageRecord r;
      r.job = i + 1;
      r.team = kTeams[i % std::size(kTeams)];
      r.project = r.team + "-p" + std::to_string(i % 4);
      r.pool = p.pool;
      r.cluster = p.cluster;
      r.start_ms = kStart + i * step;
      r.end_ms = r.start_ms + 600'000 + (i % 37) * 120'000;
      const int gpus = 1 << (i % 5);  // 1 to 16
      std::string placement = "n" + std::to_string(i % 500) + ":";
      workload::Placement node{"n" + std::to_string(i % 500), {}};
      for (int g = 0; g < std::min(gpus, 8); ++g) {
        placement += (g ? "," : "") + std::to_string(g);
        node.gpus.push_back(g);
      }
      usage::Entry e;
      e.allocation = {r.job,
                      r.team,
                      r.project,
                      p.cluster,
                      p.pool,
                      p.model,
                      gpus,
                      {node},
                      r.start_ms,
                      r.end_ms,
                      (i % 61) * 10'000,
                      i % 50 == 0 ? "moved" : "completed"};
      e.effective = {static_cast<double>(i % 100),
                     static_cast<double>(i % 100) + 5,
                     40e9,
                     40e9,
                     static_cast<double>(gpus * 300 * 1200),
                     120};
      r.doc = usage::EntryDoc(e);
      r.figures = {p.model,
                   gpus,
                   (i % 61) * 10'000,
                   (i % 100) * 1000,
                   (i % 100) * 1000 + 5'000,
                   40'000,
                   gpus * 300 * 1200,
                   placement,
                   i % 50 == 0 ? "moved" : "completed"};
      batch.push_back(std::move(r));
      if (batch.size() == 20'000) {
        (void)stores_.usage->AppendUsage(batch);
        batch.clear();
      }
    }
    std::vector<store::PoolHour> hours;
    for (int64_t h = kStart; h < kEnd; h += kHourMs) {
      for (const auto& p : kPools) {
        hours.push_back({p.pool, p.cluster, p.model, h, kHourMs, 64 * kHourMs, 40 * kHourMs,
                         4 * kHourMs, 64 * 300 * 3600, 24 * 70 * 3600, 4 * 70 * 3600});
      }
      if (hours.size() >= 20'000) {
        (void)stores_.usage->AddPoolHours(hours);
        hours.clear();
      }
    }
    (void)stores_.usage->AddPoolHours(hours);
  }
  std::filesystem::path dir_;
  store::Stores stores_;
};

void BM_Report(benchmark::State& state, usage::ReportKind kind, const char* by) {
  Ledger& l = Ledger::Get();
  usage::ReportRequest req{kind, kStart + 5 * kHourMs + 17 * 60'000, kEnd - 3 * kHourMs - 11'000,
                           by};
  size_t rows = 0;
  for (auto _ : state) {
    auto r = usage::RunReport(l.usage(), req, l.Context());
    if (!r.ok()) {
      state.SkipWithError(r.error().message.c_str());
      return;
    }
    rows = r->rows.size();
    benchmark::DoNotOptimize(rows);
  }
  state.counters["records"] = static_cast<double>(kRecords);
  state.counters["rows"] = static_cast<double>(rows);
}
BENCHMARK_CAPTURE(BM_Report, utilization_team, usage::ReportKind::kUtilization, "team")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_Report, utilization_node, usage::ReportKind::kUtilization, "node")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_Report, utilization_gpu, usage::ReportKind::kUtilization, "gpu")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_Report, cost_team, usage::ReportKind::kCost, "team")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_Report, energy_team, usage::ReportKind::kEnergy, "team")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_Report, energy_pool, usage::ReportKind::kEnergy, "pool")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_Report, queue_pool, usage::ReportKind::kQueue, "pool")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_Report, peaks_fleet, usage::ReportKind::kPeaks, "fleet")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

// The process's resident memory now (/proc/self/statm), in KiB.
long RssKib() {
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

void BM_LedgerCsv(benchmark::State& state) {
  Ledger& l = Ledger::Get();
  const long before = RssKib();
  long most = before;
  int64_t bytes = 0, parts = 0;
  for (auto _ : state) {
    FILE* out = std::fopen("/dev/null", "w");
    usage::LedgerExport ledger(l.usage(), {});
    bytes = parts = 0;
    for (;;) {
      auto part = ledger.Next();
      if (!part.ok()) {
        std::fclose(out);
        state.SkipWithError(part.error().message.c_str());
        return;
      }
      if (part->empty()) break;
      std::fwrite(part->data(), 1, part->size(), out);
      bytes += static_cast<int64_t>(part->size());
      if (++parts % 12 == 0) most = std::max(most, RssKib());
    }
    std::fclose(out);
  }
  state.counters["mib"] = static_cast<double>(bytes) / 1048576.0;
  state.counters["parts"] = static_cast<double>(parts);
  state.counters["rss_growth_mib"] = static_cast<double>(most - before) / 1024.0;
}
BENCHMARK(BM_LedgerCsv)->Unit(benchmark::kMillisecond)->Iterations(2);

}  // namespace
}  // namespace gpufleet
