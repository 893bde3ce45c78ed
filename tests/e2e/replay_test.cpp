// `gpufleet replay` as a user runs it: the binary, a trace file, the JSON figures.

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <filesystem>
#include <fstream>

#include "harness.h"

namespace gpufleet::e2e {
namespace {

namespace json = boost::json;

TEST(Replay, PrintsTheHandComputedFiguresAsJsonAndRefusesBadInput) {
  std::string dir = TempDir("replay");
  std::string trace = dir + "/t.csv";
  // Rows in any order. sched_test's SmallTraceGivesTheHandComputedWaits with teams: when the
  // second node is ready at t=160, team b (running nothing) goes before team a (running A), so
  // C starts at 160 (wait 140) and B when C ends at 210 (wait 200). Everything ends at 310.
  std::ofstream(trace) << "submit_time,duration_s,gpus,team\n20,50,4,b\n0,300,8,a\n10,100,8,a\n";
  auto r = RunGpufleet({"-o",       "json",
                        "replay",   "--trace",
                        trace,      "--pool-gpus-per-node",
                        "8",        "--policy",
                        "reactive", "--lead-time",
                        "100",      "--min-nodes",
                        "1",        "--max-nodes",
                        "2",        "--target-share",
                        "1",        "--interval",
                        "60",       "--idle-before-remove",
                        "1000000"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto v = json::parse(r.out).as_object();
  for (const char* key :
       {"gpu_hours_provisioned", "gpu_hours_idle", "wait_p50_s", "wait_p95_s", "wait_p99_s",
        "jobs_waited_over_lead_time", "scale_events", "forecast_mape", "jobs", "policy"}) {
    EXPECT_TRUE(v.contains(key)) << key;
  }
  EXPECT_EQ(v.at("policy").as_string(), "reactive");
  EXPECT_EQ(v.at("jobs").to_number<int>(), 3);
  EXPECT_DOUBLE_EQ(v.at("wait_p50_s").to_number<double>(), 140);
  EXPECT_DOUBLE_EQ(v.at("wait_p95_s").to_number<double>(), 200);
  EXPECT_EQ(v.at("jobs_waited_over_lead_time").to_number<int>(), 2);
  EXPECT_EQ(v.at("scale_events").to_number<int>(), 1);
  EXPECT_NEAR(v.at("gpu_hours_provisioned").to_number<double>(), 8.0 * 560 / 3600, 1e-9);
  EXPECT_NEAR(v.at("gpu_hours_idle").to_number<double>(), (8.0 * 560 - 3400) / 3600, 1e-9);
  EXPECT_TRUE(v.at("forecast_mape").is_null());
  // The idle hours' split adds up to them (sched_test has a hand-computed split).
  double split = 0;
  for (const char* key : {"gpu_hours_idle_starting", "gpu_hours_idle_empty",
                          "gpu_hours_idle_fragmented", "gpu_hours_idle_moving"}) {
    EXPECT_GE(v.at(key).to_number<double>(), 0) << key;
    split += v.at(key).to_number<double>();
  }
  EXPECT_NEAR(split, v.at("gpu_hours_idle").to_number<double>(), 1e-9);

  auto predictive =
      RunGpufleet({"-o", "json", "replay", "--trace", trace, "--policy", "predictive"});
  ASSERT_EQ(predictive.exit_code, 0) << predictive.err;
  EXPECT_EQ(json::parse(predictive.out).at("policy").as_string(), "predictive");

  // Without --target-share, the share follows the policy, as a policy file's does: 0.8 for
  // reactive, 1 for predictive and oracle (their forecast's margin is their headroom).
  auto idle = [&](const char* policy, const char* share) {
    std::vector<std::string> args = {"-o",  "json",        "replay", "--trace",
                                     trace, "--policy",    policy,   "--min-nodes",
                                     "1",   "--lead-time", "100"};
    if (share) args.insert(args.end(), {"--target-share", share});
    auto run = RunGpufleet(args);
    EXPECT_EQ(run.exit_code, 0) << run.err;
    return json::parse(run.out).at("gpu_hours_idle").to_number<double>();
  };
  EXPECT_EQ(idle("reactive", nullptr), idle("reactive", "0.8"));
  EXPECT_NE(idle("reactive", nullptr), idle("reactive", "1"));
  EXPECT_EQ(idle("predictive", nullptr), idle("predictive", "1"));
  EXPECT_NE(idle("predictive", nullptr), idle("predictive", "0.8"));
  EXPECT_EQ(idle("oracle", nullptr), idle("oracle", "1"));
  // ... and the output says which share, margin and lead time were used.
  auto used = json::parse(predictive.out).as_object();
  EXPECT_EQ(used.at("target_share").to_number<double>(), 1);
  EXPECT_EQ(used.at("forecast_margin").to_number<double>(), 4);
  EXPECT_EQ(used.at("lead_time_s").to_number<double>(), 600);
  EXPECT_EQ(v.at("target_share").to_number<double>(), 1) << "the first run's --target-share 1";
  EXPECT_TRUE(v.at("forecast_margin").is_null()) << "reactive plans with no forecast";
  auto table = RunGpufleet({"replay", "--trace", trace, "--policy", "reactive"});
  EXPECT_NE(table.out.find("policy: target share 0.8, no forecast, lead time 600 s\n"),
            std::string::npos)
      << table.out;

  // The table form, and the real trace through the openb converter.
  auto openb =
      RunGpufleet({"replay", "--trace",
                   std::string(GPUFLEET_SOURCE_DIR) + "/data/traces/openb_pod_list_default.csv",
                   "--format", "openb", "--policy", "oracle", "--time-scale", "10"});
  ASSERT_EQ(openb.exit_code, 0) << openb.err;
  EXPECT_NE(openb.out.find("oracle  7064"), std::string::npos) << openb.out;
  EXPECT_NE(openb.out.find("idle GPU-hours: "), std::string::npos) << openb.out;
  EXPECT_NE(openb.out.find("consolidation: "), std::string::npos) << openb.out;
  // Consolidation, on by default, moves jobs on the real trace; off, it moves none.
  auto moves = [&](const char* below) {
    auto run = RunGpufleet(
        {"-o", "json", "replay", "--trace",
         std::string(GPUFLEET_SOURCE_DIR) + "/data/traces/openb_pod_list_default.csv", "--format",
         "openb", "--policy", "reactive", "--time-scale", "10", "--consolidate-below", below});
    EXPECT_EQ(run.exit_code, 0) << run.err;
    return json::parse(run.out).at("jobs_moved").to_number<int>();
  };
  EXPECT_GT(moves("0.5"), 0);
  EXPECT_EQ(moves("0"), 0);

  std::ofstream(dir + "/bad.csv") << "submit_time,duration_s,gpus\n0,10,2\n5,-1,2\n";
  auto bad = RunGpufleet({"replay", "--trace", dir + "/bad.csv"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_EQ(bad.err, "error: " + dir + "/bad.csv:3: duration_s '-1' is not seconds >= 0\n");
  auto missing = RunGpufleet({"replay", "--trace", dir + "/none.csv"});
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.err.find("cannot read"), std::string::npos) << missing.err;
  auto share = RunGpufleet({"replay", "--trace", trace, "--target-share", "0"});
  EXPECT_EQ(share.exit_code, 2);
  EXPECT_EQ(share.err, "error: policy: target_share must be in (0, 1]\n");
  auto margin = RunGpufleet({"replay", "--trace", trace, "--forecast-margin", "11"});
  EXPECT_EQ(margin.exit_code, 2);
  EXPECT_EQ(margin.err, "error: policy: forecast_margin must be in [0, 10]\n");
  auto below = RunGpufleet({"replay", "--trace", trace, "--consolidate-below", "2"});
  EXPECT_EQ(below.exit_code, 2);
  EXPECT_EQ(below.err, "error: policy: consolidate_below must be in [0, 1] (0: never)\n");
  auto movable = RunGpufleet({"replay", "--trace", trace, "--movable-share", "-1"});
  EXPECT_EQ(movable.exit_code, 2);
  EXPECT_EQ(movable.err, "error: --movable-share must be in [0, 1]\n");

  // --schedule: a minimum by hour of the trace's clock, as a policy's schedule. Three nodes
  // from 00:00 to 02:00 are kept (ready at 100 s, removed after 02:00) for one small job; the
  // overlapping minimum of five from 01:00 raises the peak. Bad values change nothing.
  std::ofstream(dir + "/night.csv") << "submit_time,duration_s,gpus\n0,60,1\n9000,60,1\n";
  auto night = [&](std::vector<std::string> more) {
    std::vector<std::string> args = {
        "-o",       "json",     "replay",      "--trace", dir + "/night.csv",
        "--policy", "reactive", "--lead-time", "100",     "--target-share",
        "1"};
    args.insert(args.end(), more.begin(), more.end());
    auto run = RunGpufleet(args);
    EXPECT_EQ(run.exit_code, 0) << run.err;
    return json::parse(run.out).as_object();
  };
  auto plain = night({});
  EXPECT_EQ(plain.at("peak_nodes").to_number<int>(), 1);
  EXPECT_LT(plain.at("gpu_hours_provisioned").to_number<double>(), 3);
  auto kept = night({"--schedule", "3@0-2"});
  EXPECT_EQ(kept.at("peak_nodes").to_number<int>(), 3);
  EXPECT_GE(kept.at("gpu_hours_provisioned").to_number<double>(), 3 * 8 * (7200 - 100) / 3600.0);
  EXPECT_LE(kept.at("gpu_hours_provisioned").to_number<double>(), 3 * 8 * 8000 / 3600.0);
  EXPECT_EQ(night({"--schedule", "3@0-2", "--schedule", "5@1-2"}).at("peak_nodes").to_number<int>(),
            5);
  for (const char* bad_schedule : {"3@0", "3@2-1", "-1@0-2", "3@0-25", "3@0-2x"}) {
    auto refused = RunGpufleet({"replay", "--trace", trace, "--schedule", bad_schedule});
    EXPECT_EQ(refused.exit_code, 2) << bad_schedule;
    EXPECT_EQ(refused.err.rfind(std::string("error: --schedule '") + bad_schedule + "'", 0), 0u)
        << refused.err;
  }
  std::filesystem::remove_all(dir);
}

// --tune: the grid's cheapest setting within the objective, with the same figures as a plain
// replay of that setting; the table names it as a fleet file would.
TEST(Replay, TuneFindsTheCheapestSettingWithinTheObjective) {
  std::string dir = TempDir("replay-tune");
  std::string trace = dir + "/t.csv";
  {
    std::ofstream f(trace);
    f << "submit_time,duration_s,gpus\n";
    for (int i = 0; i < 400; ++i) {  // bursts every 2 hours over 2 days, run times 10-60 min
      f << (i / 20) * 7200 + (i % 20) * 30 << "," << 600 + (i * 7919) % 3000 << ","
        << (1 << (i % 4)) << "\n";
    }
  }
  std::vector<std::string> base = {"replay",   "--trace",     trace, "--policy",
                                   "reactive", "--lead-time", "300"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> args = base;
    args.insert(args.end(), more.begin(), more.end());
    return RunGpufleet(args);
  };
  auto r = with({"--tune", "--wait-p95", "400", "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto v = json::parse(r.out).as_object();
  EXPECT_EQ(v.at("mode"), "reactive");
  EXPECT_EQ(v.at("jobs"), 400);
  EXPECT_EQ(v.at("grid").as_array().size(), 17u);  // reactive: shares 0.2 to 1.0
  EXPECT_DOUBLE_EQ(v.at("current").at("target_share").to_number<double>(), 0.8);
  ASSERT_TRUE(v.at("chosen").is_object()) << r.out;
  const auto& c = v.at("chosen").as_object();
  EXPECT_EQ(c.at("meets"), true);
  EXPECT_LE(c.at("wait_p95_s").to_number<double>(), 400);
  for (const auto& g : v.at("grid").as_array()) {
    if (g.at("meets").as_bool()) {
      EXPECT_GE(g.at("gpu_hours_idle").to_number<double>(),
                c.at("gpu_hours_idle").to_number<double>());
    }
  }
  char share[16];
  std::snprintf(share, sizeof share, "%g", c.at("target_share").to_number<double>());
  auto plain = with({"--target-share", share, "-o", "json"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  auto p = json::parse(plain.out).as_object();
  EXPECT_DOUBLE_EQ(p.at("gpu_hours_idle").to_number<double>(),
                   c.at("gpu_hours_idle").to_number<double>());
  EXPECT_DOUBLE_EQ(p.at("wait_p95_s").to_number<double>(), c.at("wait_p95_s").to_number<double>());

  auto table = with({"--tune", "--wait-p95", "400", "--all"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("reactive: 400 jobs over "), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("replayed under 18 settings"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("cheapest within objective"), std::string::npos) << table.out;
  EXPECT_NE(
      table.out.find(std::string("in a pool's scaling: block: target_share: ") + share + "\n"),
      std::string::npos)
      << table.out;

  // Out of reach: every burst's first jobs wait for a node to start.
  auto none = with({"--tune", "--wait-p95", "0"});
  ASSERT_EQ(none.exit_code, 0) << none.err;
  EXPECT_NE(none.out.find("lowest p95 (none within)"), std::string::npos) << none.out;
  EXPECT_NE(none.out.find("no setting kept the p95 wait within 0 s"), std::string::npos)
      << none.out;
  auto bad = with({"--tune", "--wait-p95", "-5"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(bad.err, "error: the p95 wait objective must be 0 or more s\n");
}

}  // namespace
}  // namespace gpufleet::e2e
