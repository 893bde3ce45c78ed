// The optimization advice on a fixture ledger, pool hours and running jobs, against savings
// worked out by hand: an idle allocation (ended and running), right-sizing to a MIG slice, MIG
// for an inference pool, time-slicing for a development pool, spot for a patient movable
// project, and a pool to shrink; and what is not advised.

#include "usage/advice.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>

namespace gpufleet::usage {
namespace {

constexpr int64_t kH = 3'600'000;
constexpr int64_t kT0 = 1'793'577'600'000;  // Monday 2026-11-02 00:00 UTC
constexpr int64_t kTo = kT0 + 24 * kH;

store::UsageRecord Rec(int64_t job, std::string team, std::string project, std::string pool,
                       std::string cluster, std::string model, int gpus, int64_t start,
                       int64_t hours, int64_t util_milli, int64_t p95_milli, int64_t mem_mib,
                       int64_t energy_j, int64_t wait_ms = 0, std::string outcome = "completed") {
  store::UsageRecord r;
  r.job = job;
  r.team = std::move(team);
  r.project = std::move(project);
  r.pool = std::move(pool);
  r.cluster = std::move(cluster);
  r.start_ms = start;
  r.end_ms = start + hours * kH;
  r.figures = {std::move(model), gpus,     wait_ms, util_milli,        p95_milli,
               mem_mib,          energy_j, "n1:0",  std::move(outcome)};
  return r;
}

std::vector<Recommendation> Advise() {
  ReportContext c;
  c.cluster_site = {{"train", "s1"}, {"serve", "s1"}, {"dev", "s2"}};
  AdviceBuilder b(
      {kT0, kTo, kH},  // idle: an hour or more under 5%
      c, {{"h100", {"training", 8}}, {"h100i", {"inference", 8}}, {"a10", {"development", 2}}});
  const char* h100 = "H100-SXM5-80GB";
  // An ended allocation that did nothing: 2 GPUs for 2 h at 1%.
  b.Add(Rec(11, "vision", "cam", "h100", "train", h100, 2, kT0, 2, 1'000, 3'000, 2'000,
            2 * 70 * 7200));
  // One-GPU inference jobs that peak at 8,000 MiB and 12%: a 1g.10gb slice (10 GiB, 1/7).
  b.Add(Rec(21, "nlp", "infer", "h100i", "serve", h100, 1, kT0, 1, 10'000, 12'000, 8'000, 0));
  b.Add(Rec(22, "nlp", "infer", "h100i", "serve", h100, 1, kT0 + kH, 1, 10'000, 12'000, 8'000, 0));
  // A development job at 8%: not idle, time-slicing.
  b.Add(Rec(31, "research", "explore", "a10", "dev", "A10", 1, kT0, 4, 8'000, 30'000, 4'000, 0));
  // A movable sweep that waits 20 and 30 minutes for its 8 GPUs.
  b.Add(Rec(41, "research", "sweep", "h100", "train", h100, 8, kT0 + 3 * kH, 1, 90'000, 99'000,
            70'000, 0, 0, "moved"));
  b.Add(Rec(42, "research", "sweep", "h100", "train", h100, 8, kT0 + 4 * kH, 1, 90'000, 99'000,
            70'000, 0, 1'200'000));
  b.Add(Rec(43, "research", "sweep", "h100", "train", h100, 8, kT0 + 5 * kH, 1, 90'000, 99'000,
            70'000, 0, 1'800'000));
  // Pool h100: 32 GPUs for 10 hours, never more than 10 held, the 22 free at 70 W.
  for (int h = 0; h < 10; ++h) {
    store::PoolHour ph{"h100",  "train", h100, kT0 + h * kH,  kH, 32 * kH,
                       10 * kH, 0,       0,    22 * 70 * 3600};
    b.AddHour(ph);
  }
  // Pool h200: 16 GPUs, nothing held for 8 hours: all but its last node could go. Pool l4: the
  // same for 3 hours only: too little to judge.
  for (int h = 0; h < 8; ++h) {
    b.AddHour({"h200", "train", "H200-SXM-141GB", kT0 + h * kH, kH, 16 * kH, 0, 0, 0, 0});
    if (h < 3) b.AddHour({"l4", "edge", "L4", kT0 + h * kH, kH, 16 * kH, 0, 0, 0, 0});
  }
  // Running: 3 GPUs idle for 2 h (advised), one busy, one idle for only 10 minutes.
  b.AddRunning(
      {51, "speech", "asr", "h100", "train", h100, 3, {"n7"}, kTo - 2 * kH, 2, 3 * 70 * 7200});
  b.AddRunning({52, "speech", "asr", "h100", "train", h100, 1, {"n8"}, kTo - 2 * kH, 50, 0});
  b.AddRunning({53, "speech", "asr", "h100", "train", h100, 1, {"n9"}, kTo - kH / 6, 1, 0});
  return b.Finish();
}

TEST(Advice, EachKindWithItsEvidenceAndSavingsLargestFirst) {
  auto recs = Advise();
  std::vector<std::string> got;
  for (const auto& r : recs) got.push_back(r.kind + " " + r.target);
  EXPECT_EQ(got, (std::vector<std::string>{"shrink_pool pool h100", "shrink_pool pool h200",
                                           "idle_allocation job 51", "idle_allocation job 11",
                                           "time_slicing pool a10", "right_size project nlp/infer",
                                           "mig pool h100i", "spot project research/sweep"}));
  ASSERT_EQ(recs.size(), 8u);
  // Shrink: peak 10 of 32 GPUs; 32 - ceil(12) = 20 spare, 2 whole nodes of 8: 16 GPUs x 10 h,
  // at 6.88 and, idle, 70 W each.
  EXPECT_DOUBLE_EQ(recs[0].gpu_hours_saved, 160);
  EXPECT_NEAR(recs[0].cost_saved, 160 * 6.88, 1e-9);
  EXPECT_NEAR(recs[0].kwh_saved, 16 * 70 * 10 / 1000.0, 1e-9);
  EXPECT_EQ(recs[0].cluster, "train");
  // h200 keeps its last node: one of its two goes, 8 GPUs x 8 h.
  EXPECT_DOUBLE_EQ(recs[1].gpu_hours_saved, 64);
  EXPECT_EQ(boost::json::parse(recs[1].evidence).at("nodes_to_remove"), 1);
  recs.erase(recs.begin() + 1);
  // The running idle job: 3 GPUs x 2 h, its energy.
  EXPECT_DOUBLE_EQ(recs[1].gpu_hours_saved, 6);
  EXPECT_NEAR(recs[1].kwh_saved, 3 * 70 * 7200 / 3.6e6, 1e-9);
  auto evidence = boost::json::parse(recs[1].evidence).as_object();
  EXPECT_EQ(evidence.at("jobs"), boost::json::parse("[51]"));
  EXPECT_EQ(evidence.at("nodes"), boost::json::parse(R"(["n7"])"));
  EXPECT_EQ(evidence.at("running"), true);
  EXPECT_NE(recs[1].summary.find("for 2.0 h at 2.0% utilization"), std::string::npos)
      << recs[1].summary;
  // The ended one: 2 GPUs x 2 h.
  EXPECT_DOUBLE_EQ(recs[2].gpu_hours_saved, 4);
  EXPECT_NEAR(recs[2].cost_saved, 4 * 6.88, 1e-9);
  // Time-slicing at 8%: a quarter of the 4 GPU-hours is kept.
  EXPECT_DOUBLE_EQ(recs[3].gpu_hours_saved, 3);
  EXPECT_NEAR(recs[3].cost_saved, 3 * 1.01, 1e-9);
  // Right-size: 1g.10gb keeps 1/7 of 2 GPU-hours.
  EXPECT_NEAR(recs[4].gpu_hours_saved, 2 * 6.0 / 7, 1e-9);
  EXPECT_EQ(boost::json::parse(recs[4].evidence).at("mig_profile"), "1g.10gb");
  EXPECT_EQ(boost::json::parse(recs[4].evidence).at("jobs"), boost::json::parse("[21, 22]"));
  // MIG for the inference pool at 10%: it needs 10/60 of its 2 GPU-hours.
  EXPECT_NEAR(recs[5].gpu_hours_saved, 2 * (1 - 10.0 / 60), 1e-9);
  // Spot: no saving is claimed (spot prices are not known).
  EXPECT_EQ(recs[6].gpu_hours_saved, 0);
  EXPECT_TRUE(std::isnan(recs[6].cost_saved));
  EXPECT_EQ(boost::json::parse(recs[6].evidence).at("wait_p50_s").to_number<double>(), 1200);
}

}  // namespace
}  // namespace gpufleet::usage
