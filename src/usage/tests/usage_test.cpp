#include "usage/usage.h"

#include <gtest/gtest.h>

namespace gpufleet::usage {
namespace {

// Hand-computed: utilization over both GPUs' samples in the window (one after it is left
// out), p95 the nearest rank, memory in bytes, energy as each power sample held until the next.
TEST(Usage, SummarizeGivesTheHandComputedFigures) {
  std::vector<std::vector<tsdb::Sample>> util = {{{0, 10}, {1000, 20}, {2000, 30}},
                                                 {{500, 90}, {3000, 50}}};
  std::vector<std::vector<tsdb::Sample>> mem = {{{0, 1024}, {2000, 2048}}};
  std::vector<std::vector<tsdb::Sample>> power = {{{-5000, 50'000}, {0, 100'000}, {1000, 200'000}}};
  Effective e = Summarize(util, mem, power, 0, 3000);
  EXPECT_EQ(e.samples, 4);
  EXPECT_DOUBLE_EQ(e.util_mean, 37.5);  // (10 + 20 + 30 + 90) / 4
  EXPECT_DOUBLE_EQ(e.util_p95, 90);     // the 4th of 4
  EXPECT_DOUBLE_EQ(e.mem_mean_bytes, 1536.0 * 1048576);
  EXPECT_DOUBLE_EQ(e.mem_peak_bytes, 2048.0 * 1048576);
  EXPECT_DOUBLE_EQ(e.energy_j, 500);  // 100 W for 1 s, then 200 W for 2 s
  // A power sample counts for a minute at most: a GPU that stopped reporting adds no more.
  EXPECT_DOUBLE_EQ(Summarize({}, {}, {{{0, 100'000}}}, 0, 600'000).energy_j, 6000);
  Effective none = Summarize({{}}, {{}}, {{}}, 0, 1000);
  EXPECT_TRUE(std::isnan(none.util_mean));
  EXPECT_EQ(none.energy_j, 0);
}

TEST(Usage, AnEntryReadsBackFromItsRecord) {
  Entry e;
  e.allocation = {7, "vision",          "detector", "train",   "h100", "H100-SXM5-80GB",
                  2, {{"n-1", {0, 1}}}, 1000,       3'601'000, 5000,   "completed"};
  e.effective.util_mean = 41.5;
  e.effective.energy_j = 1.5e6;
  store::UsageRecord r{3, 7, "vision", "detector", "h100", "train", 1000, 3'601'000, EntryDoc(e)};
  auto back = EntryFromRecord(r);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->id, 3);
  EXPECT_EQ(back->allocation.placement[0].gpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(back->allocation.outcome, "completed");
  EXPECT_EQ(back->allocation.wait_ms, 5000);
  EXPECT_DOUBLE_EQ(back->effective.util_mean, 41.5);
  EXPECT_TRUE(std::isnan(back->effective.util_p95));
  EXPECT_DOUBLE_EQ(back->gpu_hours(), 2.0);
}

}  // namespace
}  // namespace gpufleet::usage
