// The reports on a fixture ledger and fixture pool hours, against answers worked out by hand:
// utilization (allocated against effective, by team, node and GPU), cost (OpenCost's idle cost
// shared by cost, or apart), energy (idle share), queue percentiles per day, peaks by hour of
// the week; the prices and their precedence.

#include "usage/reports.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "tests/support/temp_dir.h"
#include "usage/usage.h"

namespace gpufleet::usage {
namespace {

constexpr int64_t kH = 3'600'000;
constexpr int64_t kT0 = 1'793'577'600'000;  // Monday 2026-11-02 00:00 UTC
constexpr int64_t kTo = kT0 + 48 * kH;      // two days

store::UsageRecord Rec(std::string team, std::string project, std::string pool, std::string cluster,
                       std::string model, int gpus, int64_t start, int64_t end, int64_t util_milli,
                       int64_t energy_j, int64_t wait_ms, std::string placement,
                       std::string outcome = "completed") {
  store::UsageRecord r;
  r.team = std::move(team);
  r.project = std::move(project);
  r.pool = std::move(pool);
  r.cluster = std::move(cluster);
  r.start_ms = start;
  r.end_ms = end;
  r.figures.gpu_model = std::move(model);
  r.figures.gpus = gpus;
  r.figures.util_milli = util_milli;
  r.figures.energy_j = energy_j;
  r.figures.wait_ms = wait_ms;
  r.figures.placement = std::move(placement);
  r.figures.outcome = std::move(outcome);
  return r;
}

// r1: nlp trains on 8 H100s for 2 h at 90% (600 W each); r2: vision holds 2 H100s for 2 h and
// does nothing (2%, 70 W); r3: vision on an L4 at the edge from an hour before the period to an
// hour into it (50%, 40 W); r4: an nlp job moved, 1 GPU for an hour, no samples.
std::vector<store::UsageRecord> Ledger() {
  return {Rec("nlp", "llm", "h100", "train", "H100-SXM5-80GB", 8, kT0 + kH, kT0 + 3 * kH, 90'000,
              8 * 600 * 7200, 600'000, "n1:0,1,2,3,4,5,6,7"),
          Rec("vision", "cam", "h100", "train", "H100-SXM5-80GB", 2, kT0 + 2 * kH, kT0 + 4 * kH,
              2'000, 2 * 70 * 7200, 0, "n2:0,1"),
          Rec("vision", "cam", "l4", "edge", "L4", 1, kT0 - kH, kT0 + kH, 50'000, 40 * 7200,
              1'200'000, "e1:0"),
          Rec("nlp", "llm", "h100", "train", "H100-SXM5-80GB", 1, kT0 + 5 * kH, kT0 + 6 * kH, -1, 0,
              0, "n3:5", "moved")};
}

store::PoolHour Hour(std::string pool, std::string cluster, std::string model, int64_t hour,
                     double installed, double held, double queued, int64_t energy,
                     int64_t free_energy, int64_t idle_energy) {
  store::PoolHour h{std::move(pool), std::move(cluster), std::move(model), hour, kH};
  h.gpu_ms = static_cast<int64_t>(installed * kH);
  h.alloc_gpu_ms = static_cast<int64_t>(held * kH);
  h.queued_gpu_ms = static_cast<int64_t>(queued * kH);
  h.energy_j = energy;
  h.free_energy_j = free_energy;
  h.idle_energy_j = idle_energy;
  return h;
}

// h100 (16 GPUs): at 01:00 r1's 8 held (600 W), 8 free (70 W), 4 queued; at 02:00 r1 and r2's
// 10 held (r2's 2 idle at 70 W), 6 free. l4 (4 GPUs) at 00:00: r3's one held, 3 free, 40 W.
std::vector<store::PoolHour> Hours() {
  return {Hour("l4", "edge", "L4", kT0, 4, 1, 0, 4 * 40 * 3600, 3 * 40 * 3600, 0),
          Hour("h100", "train", "H100-SXM5-80GB", kT0 + kH, 16, 8, 4,
               8 * 600 * 3600 + 8 * 70 * 3600, 8 * 70 * 3600, 0),
          Hour("h100", "train", "H100-SXM5-80GB", kT0 + 2 * kH, 16, 10, 0,
               8 * 600 * 3600 + 8 * 70 * 3600, 6 * 70 * 3600, 2 * 70 * 3600)};
}

ReportContext Context() {
  ReportContext c;
  c.cluster_site = {{"train", "s1"}, {"edge", "s2"}};
  c.team_budget = {{"nlp", 3043.75}};  // 200 over the two days
  c.rates.energy_kwh = 0.20;
  c.rates.gpu_hour = {{"L4", "s2", 0.50}};
  return c;
}

// The report's rows by key, as column -> number (NaN for null or text).
std::map<std::string, std::map<std::string, double>> Build(
    ReportKind kind, const std::string& by, bool share_idle = true,
    std::vector<store::UsageRecord> ledger = Ledger()) {
  auto b = ReportBuilder::Make({kind, kT0, kTo, by, share_idle}, Context());
  EXPECT_TRUE(b.ok()) << b.error().message;
  if (b.value()->wants_records()) {
    for (const auto& r : ledger) b.value()->Add(r);
  }
  if (b.value()->wants_hours()) {
    for (const auto& h : Hours()) b.value()->AddHour(h);
  }
  Report report = b.value()->Finish();
  std::map<std::string, std::map<std::string, double>> out;
  for (const auto& row : report.rows) {
    std::string key = std::get<std::string>(row[0]);
    if (kind == ReportKind::kQueue || kind == ReportKind::kPeaks) {
      key += " " + std::get<std::string>(row[1]);
    }
    for (size_t i = 1; i < row.size(); ++i) {
      const double* d = std::get_if<double>(&row[i]);
      out[key][report.columns[i]] = d ? *d : NAN;
    }
  }
  return out;
}

TEST(Reports, UtilizationIsAllocatedAgainstEffective) {
  auto t = Build(ReportKind::kUtilization, "team");
  ASSERT_EQ(t.size(), 2u);
  // nlp: 16 GPU-h at 90% and 1 unmeasured (the mean stands for it): 17 allocated, 15.3 used.
  EXPECT_DOUBLE_EQ(t["nlp"]["gpu_hours_allocated"], 17);
  EXPECT_DOUBLE_EQ(t["nlp"]["util_mean"], 90);
  EXPECT_NEAR(t["nlp"]["gpu_hours_effective"], 15.3, 1e-9);
  EXPECT_NEAR(t["nlp"]["gpu_hours_unused"], 1.7, 1e-9);
  EXPECT_NEAR(t["nlp"]["idle_share"], 0.1, 1e-9);
  // vision: 4 GPU-h at 2% and half of r3's 2 hours (1 GPU-h) at 50%: (8 + 50) / 5 = 11.6%.
  EXPECT_DOUBLE_EQ(t["vision"]["gpu_hours_allocated"], 5);
  EXPECT_NEAR(t["vision"]["util_mean"], 11.6, 1e-9);
  EXPECT_NEAR(t["vision"]["gpu_hours_effective"], 0.58, 1e-9);
  EXPECT_TRUE(std::isnan(t["vision"]["gpu_hours_installed"])) << "a team installs nothing";

  auto nodes = Build(ReportKind::kUtilization, "node");
  EXPECT_DOUBLE_EQ(nodes["n1"]["gpu_hours_allocated"], 16);
  EXPECT_DOUBLE_EQ(nodes["n2"]["util_mean"], 2);
  EXPECT_DOUBLE_EQ(nodes["e1"]["gpu_hours_allocated"], 1);
  EXPECT_TRUE(std::isnan(nodes["n3"]["util_mean"]));
  auto gpus = Build(ReportKind::kUtilization, "gpu");
  EXPECT_EQ(gpus.size(), 8u + 2 + 1 + 1);
  EXPECT_DOUBLE_EQ(gpus["n1:7"]["gpu_hours_allocated"], 2);
  EXPECT_DOUBLE_EQ(gpus["n3:5"]["gpu_hours_allocated"], 1);

  // By pool, the installed GPU-hours and the share of them jobs held (the pools' hours).
  auto pools = Build(ReportKind::kUtilization, "pool");
  EXPECT_DOUBLE_EQ(pools["h100"]["gpu_hours_allocated"], 21);
  EXPECT_DOUBLE_EQ(pools["h100"]["gpu_hours_installed"], 32);
  EXPECT_DOUBLE_EQ(pools["h100"]["allocated_share"], 18.0 / 32);
  EXPECT_DOUBLE_EQ(pools["l4"]["allocated_share"], 0.25);
}

TEST(Reports, CostChargesAllocationAndSharesIdleCostByCost) {
  auto t = Build(ReportKind::kCost, "team");
  // nlp: 17 H100 GPU-hours at the catalogue's 6.88; vision: 4 of them and 1 L4 GPU-hour at the
  // edge site's own rate, 0.50.
  EXPECT_NEAR(t["nlp"]["cost"], 17 * 6.88, 1e-9);
  EXPECT_NEAR(t["vision"]["cost"], 4 * 6.88 + 0.5, 1e-9);
  // Idle: h100 had 32 GPU-h installed and 18 held: 14 x 6.88 = 96.32, shared 116.96 : 27.52;
  // l4 had 4 installed and 1 held: 3 x 0.50, all vision's (the only user).
  const double h100_idle = 14 * 6.88, nlp_cost = 17 * 6.88, vision_h100 = 4 * 6.88;
  EXPECT_NEAR(t["nlp"]["idle_cost"], h100_idle * nlp_cost / (nlp_cost + vision_h100), 1e-9);
  EXPECT_NEAR(t["vision"]["idle_cost"], h100_idle * vision_h100 / (nlp_cost + vision_h100) + 1.5,
              1e-9);
  EXPECT_NEAR(t["nlp"]["total_cost"], t["nlp"]["cost"] + t["nlp"]["idle_cost"], 1e-9);
  // The budget over two days of a month of 30.4375: 200.
  EXPECT_NEAR(t["nlp"]["budget"], 200, 1e-9);
  EXPECT_NEAR(t["nlp"]["budget_used"], t["nlp"]["total_cost"] / 200, 1e-9);
  EXPECT_TRUE(std::isnan(t["vision"]["budget"]));
  EXPECT_EQ(t.count("__idle__"), 0u);

  // Not shared: the idle cost is an item of its own, as OpenCost shows it.
  auto apart = Build(ReportKind::kCost, "team", false);
  EXPECT_DOUBLE_EQ(apart["nlp"]["idle_cost"], 0);
  EXPECT_NEAR(apart["__idle__"]["idle_cost"], h100_idle + 1.5, 1e-9);
  EXPECT_DOUBLE_EQ(apart["__idle__"]["gpu_hours"], 0);

  auto pools = Build(ReportKind::kCost, "pool");
  EXPECT_NEAR(pools["h100"]["cost"], 21 * 6.88, 1e-9);
  EXPECT_NEAR(pools["h100"]["idle_cost"], h100_idle, 1e-9);
  EXPECT_NEAR(pools["l4"]["idle_cost"], 1.5, 1e-9);
}

TEST(Reports, EnergyCountsKwhCostAndTheIdleShare) {
  auto t = Build(ReportKind::kEnergy, "team");
  // nlp: r1's 8 x 600 W x 2 h = 9.6 kWh; r4 none.
  EXPECT_NEAR(t["nlp"]["kwh"], 9.6, 1e-9);
  EXPECT_NEAR(t["nlp"]["cost"], 9.6 * 0.20, 1e-9);
  EXPECT_NEAR(t["nlp"]["gpu_hours_per_kwh"], 17 / 9.6, 1e-9);
  EXPECT_DOUBLE_EQ(t["nlp"]["idle_share"], 0);
  // vision: r2 idle, 1.008 MJ; half of r3's 288 kJ: 1.152 MJ, 87.5% of it idle.
  EXPECT_NEAR(t["vision"]["kwh"], 1'152'000 / 3.6e6, 1e-9);
  EXPECT_NEAR(t["vision"]["idle_share"], 0.875, 1e-9);
  // GPUs no job held: nobody's, the idle item: 8 and 6 H100s at 70 W, 3 L4s at 40 W, an hour.
  EXPECT_NEAR(t["__idle__"]["kwh"], (8 * 70 + 6 * 70 + 3 * 40) * 3600 / 3.6e6, 1e-9);
  EXPECT_DOUBLE_EQ(t["__idle__"]["idle_share"], 1);

  auto pools = Build(ReportKind::kEnergy, "pool");
  const double h100_j = 2 * (8 * 600 + 8 * 70) * 3600.0;
  EXPECT_NEAR(pools["h100"]["kwh"], h100_j / 3.6e6, 1e-9);
  EXPECT_NEAR(pools["h100"]["gpu_hours"], 18, 1e-9);
  EXPECT_NEAR(pools["h100"]["idle_share"], (8 * 70 + 6 * 70 + 2 * 70) * 3600 / h100_j, 1e-9);
}

TEST(Reports, QueueWaitsArePercentilesPerDayAndMovesAreNotWaits) {
  auto ledger = Ledger();
  ledger.push_back(Rec("nlp", "llm", "h100", "train", "H100-SXM5-80GB", 1, kT0 + 26 * kH,
                       kT0 + 27 * kH, 60'000, 0, 30'000, "n1:0"));
  auto q = Build(ReportKind::kQueue, "pool", true, ledger);
  ASSERT_EQ(q.size(), 2u) << "r3 started before the period, r4 is a move";
  // Monday: r1 waited 600 s, r2 nothing: p50 (nearest rank 1 of 2) 0, p95 600.
  EXPECT_DOUBLE_EQ(q["h100 2026-11-02"]["starts"], 2);
  EXPECT_DOUBLE_EQ(q["h100 2026-11-02"]["wait_p50_s"], 0);
  EXPECT_DOUBLE_EQ(q["h100 2026-11-02"]["wait_p95_s"], 600);
  EXPECT_DOUBLE_EQ(q["h100 2026-11-03"]["wait_max_s"], 30);
  auto teams = Build(ReportKind::kQueue, "team", true, ledger);
  EXPECT_DOUBLE_EQ(teams["vision 2026-11-02"]["wait_p95_s"], 0);
  EXPECT_DOUBLE_EQ(teams["nlp 2026-11-02"]["wait_p95_s"], 600);
}

TEST(Reports, PeaksAreDemandByHourOfTheWeek) {
  auto p = Build(ReportKind::kPeaks, "fleet");
  EXPECT_DOUBLE_EQ(p["fleet mon 01:00"]["gpus_allocated"], 8);
  EXPECT_DOUBLE_EQ(p["fleet mon 01:00"]["gpus_queued"], 4);
  EXPECT_DOUBLE_EQ(p["fleet mon 01:00"]["gpus_demand"], 12);
  EXPECT_DOUBLE_EQ(p["fleet mon 02:00"]["gpus_allocated"], 10);
  EXPECT_DOUBLE_EQ(p["fleet mon 00:00"]["gpus_installed"], 4);
  auto pools = Build(ReportKind::kPeaks, "pool");
  EXPECT_DOUBLE_EQ(pools["h100 mon 02:00"]["gpus_installed"], 16);
  EXPECT_DOUBLE_EQ(pools["h100 mon 02:00"]["hours"], 1);
  // Over four weeks: Monday 01:00 a week later with 4 GPUs held, and half of that hour
  // recorded (the controller started at 01:30): the mean of the hours with data, each hour's
  // GPUs over its recorded part: (8 + 4) / 2.
  auto b = ReportBuilder::Make({ReportKind::kPeaks, kT0, kT0 + 28 * 24 * kH, "fleet"}, Context());
  ASSERT_TRUE(b.ok());
  for (const auto& h : Hours()) b.value()->AddHour(h);
  auto later = Hour("h100", "train", "H100-SXM5-80GB", kT0 + 7 * 24 * kH + kH, 8, 2, 0, 0, 0, 0);
  later.covered_ms = kH / 2;
  b.value()->AddHour(later);
  auto r = b.value()->Finish();
  ASSERT_EQ(std::get<std::string>(r.rows.at(1)[1]), "mon 01:00");
  EXPECT_DOUBLE_EQ(std::get<double>(r.rows.at(1)[2]), 6);
  EXPECT_DOUBLE_EQ(std::get<double>(r.rows.at(1)[5]), 16);
  EXPECT_DOUBLE_EQ(std::get<double>(r.rows.at(1)[6]), 2);
}

TEST(Reports, ByIsCheckedAndCsvHasAHeaderAndQuotedText) {
  auto bad = ReportBuilder::Make({ReportKind::kCost, kT0, kTo, "gpu"}, Context());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message,
            "'by' must be one of team, project, pool, cluster, model, not 'gpu'");
  Report r;
  r.columns = {"key", "kwh"};
  r.rows = {{std::string("a,b"), 1.5}, {std::string("c"), Cell()}};
  EXPECT_EQ(ReportCsv(r), "key,kwh\n\"a,b\",1.5\nc,\n");
}

TEST(Reports, RatesTakeTheSiteThenTheModelThenTheCatalogue) {
  auto catalog = GpuCatalog::Builtin();
  auto rates = ParseRates(
      R"({"currency": "EUR", "energy_kwh": 0.3, "gpu_hour": [
            {"model": "H100-SXM5-80GB", "price": 2.5},
            {"model": "H100-SXM5-80GB", "site": "eu-west-1", "price": 2.1}]})",
      *catalog);
  ASSERT_TRUE(rates.ok()) << rates.error().message;
  EXPECT_DOUBLE_EQ(rates->GpuHour(*catalog, "H100-SXM5-80GB", "eu-west-1"), 2.1);
  EXPECT_DOUBLE_EQ(rates->GpuHour(*catalog, "H100-SXM5-80GB", "us-east-1"), 2.5);
  EXPECT_DOUBLE_EQ(rates->GpuHour(*catalog, "H200-SXM-141GB", ""), 7.91);  // the catalogue's
  EXPECT_DOUBLE_EQ(rates->GpuHour(*catalog, "A100-PCIE-80GB", ""), 0.95);  // OpenCost's default
  auto back = ParseRates(RatesJson(rates.value()), *catalog);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->gpu_hour, rates->gpu_hour);
  EXPECT_EQ(back->currency, "EUR");
  for (const auto& [text, error] : std::vector<std::pair<const char*, const char*>>{
           {R"({"gpu_hour": [{"model": "H1000", "price": 1}]})",
            "gpu_hour[0].model: unknown GPU model 'H1000'"},
           {R"({"gpu_hour": [{"model": "L4"}]})", "gpu_hour[0].price: is required"},
           {R"({"energy_kwh": -1})", "energy_kwh: must be a price, 0 or more"},
           {R"({"gpu_hour": [{"model": "L4", "price": 1}, {"model": "L4", "price": 2}]})",
            "gpu_hour[1]: L4 is priced twice"},
           {R"({"gpu": 1})",
            "gpu: unknown field (known: currency, energy_kwh, default_gpu_hour, gpu_hour)"},
           {R"({"currency": ""})", "currency: must be a short code such as USD"}}) {
    auto r = ParseRates(text, *catalog);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.error().message, error);
  }
}

// A record stored before the figures had columns is read from its document.
TEST(Reports, ARecordFromBeforeTheColumnsIsReadFromItsDocument) {
  Entry e;
  e.allocation = {7, "vision",         "cam", "train",  "h100", "H100-SXM5-80GB",
                  2, {{"n1", {0, 1}}}, kT0,   kT0 + kH, 5000,   "completed"};
  e.effective.util_mean = 41.5;
  e.effective.energy_j = 1234;
  store::UsageRecord r{1, 7, "vision", "cam", "h100", "train", kT0, kT0 + kH, EntryDoc(e)};
  store::UsageFigures f = FiguresOf(r);
  EXPECT_EQ(f.gpus, 2);
  EXPECT_EQ(f.util_milli, 41'500);
  EXPECT_EQ(f.energy_j, 1234);
  EXPECT_EQ(f.placement, "n1:0,1");
  EXPECT_EQ(f.gpu_model, "H100-SXM5-80GB");
}

// RunReport reads the store's daily sums for the whole days of a period and only the records
// at its ends: over a SQLite ledger of jobs up to three days long (some without samples, some
// idle, one from before the figure columns), each utilization, cost and energy report of an
// aligned, a ragged, a within-a-day and an across-midnight period, whole or of one cluster,
// is the report of every record fed to the builder one by one.
TEST(Reports, TheDailySumsGiveWhatEveryRecordGives) {
  const gpufleet::testing::TempDir dir_tmp("gf-report-days");
  const std::filesystem::path dir = dir_tmp.path();
  auto stores = store::Open("sqlite:" + (dir / "db").string());
  ASSERT_TRUE(stores.ok()) << stores.error().message;
  store::UsageStore& st = *stores->usage;
  const int64_t day = store::kUsageDayMs;
  std::vector<store::UsageRecord> ledger;
  const char* teams[] = {"nlp", "vision", "speech"};
  const char* pools[][3] = {{"h100", "train", "H100-SXM5-80GB"}, {"l4", "edge", "L4"}};
  for (int i = 0; i < 300; ++i) {
    const auto* p = pools[i % 2];
    const int64_t start = kT0 + (i * 7'919'000LL) % (10 * day);
    const int64_t length = 60'000 + (i * 3'571'000LL) % (3 * day);
    const int64_t util = i % 7 == 0 ? -1 : (i % 5 == 0 ? 1'500 : (i * 13'000) % 100'000);
    ledger.push_back(Rec(teams[i % 3], std::string("p") + std::to_string(i % 4), p[0], p[1], p[2],
                         1 + i % 8, start, start + length, util, 1 + i * 12'345, 0, "n1:0"));
    ledger.back().job = i;
  }
  Entry e;
  e.allocation = {999,       "vision",           "cam", "h100",
                  "train",   "H100-SXM5-80GB",   2,     {{"n1", {0, 1}}},
                  kT0 + day, kT0 + 2 * day + kH, 0,     "completed"};
  e.effective.util_mean = 3;
  e.effective.energy_j = 50'000;
  ledger.push_back(
      {0, 999, "vision", "cam", "h100", "train", kT0 + day, kT0 + 2 * day + kH, EntryDoc(e)});
  ASSERT_TRUE(st.AppendUsage(ledger).ok());

  struct Period {
    int64_t from, to;
  };
  const Period periods[] = {{kT0 + day, kT0 + 5 * day},
                            {kT0 + day + 3 * kH + 17 * 60'000, kT0 + 7 * day + 5 * kH},
                            {kT0 + 2 * day + kH, kT0 + 2 * day + 9 * kH},
                            {kT0 + 3 * day + 20 * kH, kT0 + 4 * day + 2 * kH},
                            {kT0 - 5 * day, kT0 + 20 * day}};
  for (ReportKind kind : {ReportKind::kUtilization, ReportKind::kCost, ReportKind::kEnergy}) {
    for (const std::string by : {"team", "project", "pool", "cluster", "model"}) {
      for (const auto& period : periods) {
        for (const std::string cluster : {"", "edge"}) {
          SCOPED_TRACE(by + " " + std::to_string(period.from - kT0) + ".." +
                       std::to_string(period.to - kT0) + " " + cluster);
          const ReportRequest req{kind, period.from, period.to, by};
          auto got = RunReport(st, req, Context(), cluster);
          ASSERT_TRUE(got.ok()) << got.error().message;
          auto b = ReportBuilder::Make(req, Context()).value();
          for (const auto& r : ledger) {
            if (b->wants_records() && (cluster.empty() || r.cluster == cluster)) b->Add(r);
          }
          const Report want = b->Finish();
          ASSERT_EQ(got->rows.size(), want.rows.size());
          for (size_t i = 0; i < want.rows.size(); ++i) {
            for (size_t c = 0; c < want.columns.size(); ++c) {
              const Cell &g = got->rows[i][c], &w = want.rows[i][c];
              ASSERT_EQ(g.index(), w.index()) << want.columns[c];
              if (const double* d = std::get_if<double>(&w)) {
                EXPECT_NEAR(std::get<double>(g), *d, 1e-6 * std::max(1.0, std::abs(*d)))
                    << want.columns[c];
              } else {
                EXPECT_EQ(g, w) << want.columns[c];
              }
            }
          }
        }
      }
    }
  }
  stores = store::Stores{};
}

}  // namespace
}  // namespace gpufleet::usage
