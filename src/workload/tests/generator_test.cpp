// The demo workload's jobs on simulated pools say how their GPUs behave, mixed by the cluster's
// type; on real pools they say nothing (a real pool refuses a profile).

#include "workload/generator.h"

#include <gtest/gtest.h>

#include <map>

namespace gpufleet::workload {
namespace {

std::map<std::string, int> Profiles(GeneratedPool pool) {
  std::map<std::string, int> seen;
  WorkloadGenerator g(
      [&](JobSpec spec) -> Status {
        ++seen[spec.sim_profile];
        return {};
      },
      {std::move(pool)}, {{"nlp", {"llm"}}}, 7);
  const int64_t day = 1'764'547'200'000;  // 2025-12-01, a Monday
  for (int64_t t = day; t < day + 86'400'000; t += 60'000) g.Tick(t);
  return seen;
}

TEST(Generator, SimulatedPoolsJobsHaveProfilesByTheirClustersType) {
  auto training = Profiles({"h100", 8, 256, "nlp", true, "training"});
  int total = 0;
  for (const auto& [p, n] : training) total += n;
  ASSERT_GT(total, 200);
  EXPECT_EQ(training.count(""), 0u);
  EXPECT_GT(training["training"], total * 7 / 10);
  EXPECT_GT(training["idle"], 0) << "some jobs hold GPUs and do nothing";
  EXPECT_EQ(training["inference"], 0);
  auto inference = Profiles({"l40s", 4, 64, "recsys", true, "inference"});
  EXPECT_GT(inference["inference"], inference["training"] + inference["idle"]);
  auto dev = Profiles({"a10", 2, 32, "research", true, "development"});
  EXPECT_GT(dev["bursty"], dev["training"] + dev["inference"]);
  auto real = Profiles({"h100", 8, 256, "nlp", false, "training"});
  EXPECT_EQ(real.size(), 1u);
  EXPECT_GT(real[""], 200) << "a real pool's jobs say nothing";
}

}  // namespace
}  // namespace gpufleet::workload
