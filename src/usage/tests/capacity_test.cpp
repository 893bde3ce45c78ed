// The capacity planner on fixture ledgers and pool hours: the trend, the operator's growth and
// new demand, the replays that find the nodes to order, and by when.

#include "usage/capacity.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "store/store.h"
#include "tests/support/temp_dir.h"

namespace gpufleet::usage {
namespace {

constexpr int64_t kDay = 86'400'000;
constexpr int64_t kNow = 20'000 * kDay;  // 2024-10-04, a day's start

CapacityPool Pool(int nodes) {
  CapacityPool p;
  p.name = "h100";
  p.cluster = "train";
  p.gpu_model = "H100-SXM5-80GB";
  p.gpus_per_node = 8;
  p.nodes = nodes;
  p.gpu_price = 30'000;
  return p;
}

// A job of `gpus` GPUs every hour for an hour, over the last 30 days, of team `team`.
std::vector<store::UsageRecord> Hourly(int gpus, const std::string& team = "nlp") {
  std::vector<store::UsageRecord> out;
  for (int64_t t = kNow - 30 * kDay; t < kNow; t += 3'600'000) {
    store::UsageRecord r{0, t, team, "p", "h100", "train", t, t + 3'600'000, ""};
    r.figures.gpus = gpus;
    r.figures.gpu_model = "H100-SXM5-80GB";
    out.push_back(r);
  }
  return out;
}

// A day's busiest hour for the last `days` days: from `first` GPUs to `last`, linearly.
std::vector<store::PoolHour> Peaks(int days, double first, double last) {
  std::vector<store::PoolHour> out;
  for (int d = 0; d < days; ++d) {
    double gpus = first + (last - first) * d / (days - 1);
    store::PoolHour h{"h100", "train", "H100-SXM5-80GB", kNow - (days - d) * kDay + 3'600'000};
    h.covered_ms = 3'600'000;
    h.alloc_gpu_ms = static_cast<int64_t>(gpus * 3'600'000);
    out.push_back(h);
  }
  return out;
}

CapacityRequest Request() {
  CapacityRequest r;
  r.now_ms = kNow;
  r.horizon_days = 180;
  r.lead_time_days = 90;
  r.wait_p95_s = 600;
  return r;
}

TEST(Capacity, AFlatDemandThatFitsNeedsNoOrder) {
  auto plan = PlanPool(Pool(1), Hourly(4), Peaks(30, 4, 4), {}, Request());
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_EQ(plan->history_jobs, 30 * 24);
  EXPECT_NEAR(plan->factor, 1, 1e-9);
  EXPECT_NEAR(plan->peak_demand_now, 4, 1e-9);
  EXPECT_EQ(plan->wait_p95_now_s, 0);
  EXPECT_EQ(plan->wait_p95_horizon_s, 0);
  EXPECT_EQ(plan->order_nodes, 0);
  EXPECT_TRUE(plan->need_by.empty());
  EXPECT_EQ(plan->summary, "no order: 1 nodes keep the p95 queue wait under 10 min to 2025-04-02");
  // Under a year of hours: no season, and it says so.
  ASSERT_FALSE(plan->notes.empty());
  EXPECT_NE(plan->notes[0].find("season: pool hours of a year or more needed (30 days"),
            std::string::npos)
      << plan->notes[0];
}

// The busiest hour rose from 2 to 6 GPUs over 60 days: 2 GPUs a month more, so twice today's
// 6 in 90 days.
TEST(Capacity, TheTrendIsTheLineThroughTheDailyPeaks) {
  CapacityRequest r = Request();
  r.horizon_days = 90;
  auto plan = PlanPool(Pool(1), Hourly(2), Peaks(61, 2, 6), {}, r);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_EQ(plan->trend_days_recorded, 61);
  EXPECT_NEAR(plan->trend_gpus_per_month, 2, 1e-6);
  // The line's value today: a day past the last point, 6 + 1/15.
  EXPECT_NEAR(plan->peak_demand_now, 6 + 4.0 / 60, 1e-6);
  EXPECT_NEAR(plan->factor_trend, (6 + 4.0 / 60 + 6) / (6 + 4.0 / 60), 1e-6);
  EXPECT_EQ(plan->factor_season, 1);
}

// nlp, all of the pool's demand, doubles every quarter: 4 GPUs an hour become ~16 in 180 days,
// two nodes' worth. The one node stops keeping up in the fourth month or so.
TEST(Capacity, ATeamsPlannedGrowthIsReplayedToTheNodesToOrder) {
  CapacityGrowth g;
  g.teams.push_back({"nlp", 1.0});
  g.teams.push_back({"vision", 5.0});  // runs nothing here: no effect
  auto plan = PlanPool(Pool(1), Hourly(4), Peaks(30, 4, 4), g, Request());
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_NEAR(plan->factor_planned, std::pow(2.0, 180 / 91.3125), 1e-9);
  EXPECT_GT(plan->wait_p95_horizon_s, 600);
  EXPECT_EQ(plan->nodes_needed, 2);
  EXPECT_EQ(plan->order_nodes, 1);
  EXPECT_EQ(plan->order_gpus, 8);
  ASSERT_TRUE(plan->cost);
  EXPECT_EQ(*plan->cost, 8 * 30'000);
  // Needed between the third month and the horizon; ordered the lead time before.
  ASSERT_FALSE(plan->need_by.empty());
  EXPECT_GT(plan->need_by, IsoDate(20'000 + 60));
  EXPECT_LE(plan->need_by, IsoDate(20'000 + 180));
  EXPECT_GE(plan->order_by, IsoDate(20'000));
  EXPECT_EQ(
      plan->summary.rfind("order 1 x 8 H100-SXM5-80GB (8 GPUs) by " + plan->order_by + ",", 0), 0u)
      << plan->summary;
  EXPECT_NE(plan->summary.find("cost 240,000 USD, to keep the p95 queue wait under 10 min"),
            std::string::npos)
      << plan->summary;
}

// A new model needing 16 GPUs from a date: two whole nodes more, from then.
TEST(Capacity, NewDemandFromADateNeedsItsNodesFromThen) {
  CapacityGrowth g;
  g.demands.push_back({"llm-v2", "h100", 16, IsoDate(20'000 + 100)});
  g.demands.push_back({"elsewhere", "a100", 64, IsoDate(20'000 + 10)});  // another pool's
  CapacityPool p = Pool(1);
  p.gpu_price.reset();
  auto plan = PlanPool(p, Hourly(4), Peaks(30, 4, 4), g, Request());
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_EQ(plan->planned_gpus, 16);
  EXPECT_EQ(plan->nodes_needed, 3);
  // The month in which it comes: from its start, ordered the lead time before.
  EXPECT_EQ(plan->need_by, IsoDate(20'000 + 91));
  EXPECT_EQ(plan->order_by, IsoDate(20'000 + 1));
  EXPECT_FALSE(plan->cost);
  bool says_no_price = false;
  for (const auto& n : plan->notes)
    says_no_price |= n.find("no purchase price") != std::string::npos;
  EXPECT_TRUE(says_no_price);
}

// Demand already over the pool: needed today, and the lead time has passed.
TEST(Capacity, DemandOverThePoolNowIsLate) {
  auto plan = PlanPool(Pool(1), Hourly(12), Peaks(30, 12, 12), {}, Request());
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_EQ(plan->wait_p95_now_s, std::numeric_limits<double>::infinity());  // 12 > 8: cannot fit
  EXPECT_EQ(plan->nodes_needed, 2);
  EXPECT_EQ(plan->need_by, IsoDate(20'000));
  EXPECT_EQ(plan->order_by, IsoDate(20'000));
  bool late = false;
  for (const auto& n : plan->notes)
    late |= n.rfind("late: ordered today, the GPUs arrive 90 days", 0) == 0;
  EXPECT_TRUE(late);
}

// The same queue over the pool with three days of pool hours: what the replay needs is told,
// and no order is recommended until a trend can be fitted.
TEST(Capacity, TooLittleHistoryRecommendsNoOrder) {
  for (int days : {0, 3, 13}) {
    auto plan = PlanPool(Pool(1), Hourly(12), Peaks(days, 12, 12), {}, Request());
    ASSERT_TRUE(plan.ok()) << plan.error().message;
    EXPECT_TRUE(plan->history_short);
    EXPECT_EQ(plan->nodes_needed, 2);
    EXPECT_EQ(plan->need_by, IsoDate(20'000));
    EXPECT_EQ(plan->order_nodes, 0);
    EXPECT_EQ(plan->order_gpus, 0);
    EXPECT_TRUE(plan->order_by.empty());
    EXPECT_FALSE(plan->cost);
    EXPECT_EQ(plan->summary, "no order recommended: " + std::to_string(days) +
                                 " days of pool hours recorded, 14 needed; the replay of what "
                                 "was recorded needs 2 nodes (1 installed) from " +
                                 IsoDate(20'000))
        << days;
  }
  auto enough = PlanPool(Pool(1), Hourly(12), Peaks(14, 12, 12), {}, Request());
  ASSERT_TRUE(enough.ok());
  EXPECT_FALSE(enough->history_short);
  EXPECT_EQ(enough->order_nodes, 1);
}

// PlanCapacity over a SQLite store: the pool planned from its stored records and hours, and
// its order counted against the budget.
TEST(Capacity, AnOrderIsCountedAgainstTheBudget) {
  const gpufleet::testing::TempDir dir("gf-capacity");
  auto stores = store::Open("sqlite:" + (std::filesystem::path(dir.path()) / "db").string());
  ASSERT_TRUE(stores.ok()) << stores.error().message;
  auto ledger = Hourly(12);
  for (size_t i = 0; i < ledger.size(); ++i) ledger[i].job = static_cast<int64_t>(i + 1);
  ASSERT_TRUE(stores->usage->AppendUsage(ledger).ok());
  ASSERT_TRUE(stores->usage->AddPoolHours(Peaks(30, 12, 12)).ok());
  CapacityRequest r = Request();
  r.budget = 100'000;
  auto over = PlanCapacity(*stores->usage, {Pool(1)}, {}, r);
  ASSERT_TRUE(over.ok()) << over.error().message;
  ASSERT_EQ(over->pools.size(), 1u);
  EXPECT_EQ(over->pools[0].history_jobs, static_cast<int>(ledger.size()));
  EXPECT_EQ(over->pools[0].order_gpus, 8);
  EXPECT_FALSE(over->pools[0].within_budget);
  EXPECT_EQ(over->total_cost, 240'000);
  r.budget = 240'000;
  auto within = PlanCapacity(*stores->usage, {Pool(1)}, {}, r);
  ASSERT_TRUE(within.ok());
  EXPECT_TRUE(within->pools[0].within_budget);
}

TEST(Capacity, GrowthIsParsedStrictly) {
  auto g = ParseCapacityGrowth(
      R"({"teams":[{"team":"nlp","quarterly":0.2}],"demands":[{"name":"x","pool":"h100","gpus":8,"from":"2027-03-01"}]})");
  ASSERT_TRUE(g.ok()) << g.error().message;
  auto back = ParseCapacityGrowth(CapacityGrowthJson(g.value()));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(CapacityGrowthJson(back.value()), CapacityGrowthJson(g.value()));
  for (const auto& [text, error] : std::vector<std::pair<std::string, std::string>>{
           {R"({"team":[]})", "team: unknown field (known: teams, demands)"},
           {R"({"teams":[{"team":"a","quarterly":-2}]})", "teams[0].quarterly: must be over -1"},
           {R"({"teams":[{"team":"a","quarterly":0.1},{"team":"a","quarterly":0.2}]})",
            "teams[1].team: 'a' is listed twice"},
           {R"({"demands":[{"name":"x","pool":"p","gpus":8,"from":"2027-02-30"}]})",
            "demands[0].from: '2027-02-30' is not a date (YYYY-MM-DD)"},
           {R"({"demands":[{"name":"x","pool":"p","gpus":0,"from":"2027-02-01"}]})",
            "demands[0].gpus: is required"},
       }) {
    auto bad = ParseCapacityGrowth(text);
    ASSERT_FALSE(bad.ok()) << text;
    EXPECT_EQ(bad.error().message.substr(0, error.size()), error) << bad.error().message;
  }
}

}  // namespace
}  // namespace gpufleet::usage
