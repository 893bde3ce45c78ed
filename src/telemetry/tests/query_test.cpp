// QueryRange over a real telemetry store: step buckets, each aggregation, group-by, and the
// limits, with values computed by hand.

#include "telemetry/query.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "tests/support/temp_dir.h"

namespace gpufleet {
namespace {

class QueryRangeTest : public ::testing::Test {
 protected:
  // Four GPUs: a0, a1 on node na (pool pa), b0 on node nb (pool pb), c0 on nc (pool pb), all in
  // cluster c. GPU i reports gpu_util = 10 * (i + 1) + t for t = 0..5 s (one sample a second
  // from kT0), so in 2 s steps GPU i's means are 10(i+1) + 0.5, + 2.5, + 4.5.
  void SetUp() override {
    store_ = std::move(TelemetryStore::Open({dir_.string(), {}}).value());
    for (int i = 0; i < 4; ++i) {
      proto::Samples s;
      for (int t = 0; t < 6; ++t) {
        SampleRow r;
        r.time_ms = kT0 + 1000 * t;
        r.gpu = 0;
        r.set(Field::kGpuUtil, 10 * (i + 1) + t);
        s.rows.push_back(r);
      }
      ASSERT_TRUE(store_->Ingest({gpus_[i].uuid}, s).ok());
    }
  }
  void TearDown() override { store_.reset(); }
  RangeResult Query(RangeAgg agg, RangeBy by, int64_t step = 2000) {
    auto r = QueryRange(*store_, {Field::kGpuUtil, kT0, kT0 + 6000, step, agg, by}, gpus_);
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok() ? r.value() : RangeResult{};
  }
  static std::vector<double> Values(const RangeSeries& s) {
    std::vector<double> v;
    for (const auto& [_, x] : s.points) v.push_back(x);
    return v;
  }

  static constexpr int64_t kT0 = 1'800'000'000'000;
  testing::TempDir tmp_{"gf-query"};  // removed with everything in it after the test
  std::filesystem::path dir_ = tmp_.path();
  std::unique_ptr<TelemetryStore> store_;
  std::vector<RangeGpu> gpus_ = {{"na", "c", "pa", "GPU-a0", 0},
                                 {"na", "c", "pa", "GPU-a1", 1},
                                 {"nb", "c", "pb", "GPU-b0", 0},
                                 {"nc", "c", "pb", "GPU-c0", 0}};
};

TEST_F(QueryRangeTest, PerGpuStepsFromTheRawTier) {
  auto r = Query(RangeAgg::kAvg, RangeBy::kGpu);
  EXPECT_EQ(r.tier, tsdb::Resolution::kRaw);
  ASSERT_EQ(r.series.size(), 4u);
  EXPECT_EQ(r.series[1].labels.uuid, "GPU-a1");
  ASSERT_EQ(r.series[1].points.size(), 3u);
  EXPECT_EQ(r.series[1].points[0].first, kT0);
  EXPECT_EQ(r.series[1].points[2].first, kT0 + 4000);
  EXPECT_EQ(Values(r.series[1]), (std::vector<double>{20.5, 22.5, 24.5}));
  EXPECT_EQ(Values(Query(RangeAgg::kMin, RangeBy::kGpu).series[0]),
            (std::vector<double>{10, 12, 14}));
  EXPECT_EQ(Values(Query(RangeAgg::kMax, RangeBy::kGpu).series[0]),
            (std::vector<double>{11, 13, 15}));
  EXPECT_EQ(Values(Query(RangeAgg::kSum, RangeBy::kGpu).series[0]),
            (std::vector<double>{21, 25, 29}));
}

TEST_F(QueryRangeTest, GroupsReduceEachGpuThenAggregateAcrossThem) {
  // Pool pb: b0 and c0, means 30.5 and 40.5 in the first step.
  auto sum = Query(RangeAgg::kSum, RangeBy::kPool);
  ASSERT_EQ(sum.series.size(), 2u);
  EXPECT_EQ(sum.series[1].labels.pool, "pb");
  EXPECT_EQ(sum.series[1].labels.cluster, "c");
  EXPECT_EQ(sum.series[1].labels.node, "");
  EXPECT_EQ(sum.series[1].gpus, 2);
  EXPECT_EQ(Values(sum.series[1]), (std::vector<double>{71, 75, 79}));
  // max: each GPU's max first (31 and 41), then the max across.
  EXPECT_EQ(Values(Query(RangeAgg::kMax, RangeBy::kPool).series[1]),
            (std::vector<double>{41, 43, 45}));
  auto nodes = Query(RangeAgg::kAvg, RangeBy::kNode);
  ASSERT_EQ(nodes.series.size(), 3u);
  EXPECT_EQ(nodes.series[0].labels.node, "na");
  EXPECT_EQ(nodes.series[0].gpus, 2);
  EXPECT_EQ(Values(nodes.series[0]), (std::vector<double>{15.5, 17.5, 19.5}));
  auto cluster = Query(RangeAgg::kAvg, RangeBy::kCluster);
  ASSERT_EQ(cluster.series.size(), 1u);
  EXPECT_EQ(cluster.series[0].gpus, 4);
  EXPECT_EQ(cluster.series[0].labels.pool, "");
  EXPECT_EQ(Values(cluster.series[0]), (std::vector<double>{25.5, 27.5, 29.5}));
}

// Several controllers: a GPU whose agent is another controller's has its steps from there; a
// GPU's step held here stays as it is; groups reduce over both.
TEST_F(QueryRangeTest, StepsHeldElsewhereFillTheStepsNotHeldHere) {
  std::vector<RangeGpu> gpus = gpus_;
  gpus.push_back({"nd", "c", "pb", "GPU-d0", 0});  // its agent is another controller's
  RangeElsewhere elsewhere = {{"GPU-d0", {{kT0, 50}, {kT0 + 2000, 52}, {kT0 + 4000, 54}}},
                              // b0's step at kT0 is held here: what is held here counts; one before
                              // the window and one off the step's grid are ignored.
                              {"GPU-b0", {{kT0, 99}, {kT0 - 2000, 99}, {kT0 + 3000, 99}}}};
  auto per_gpu =
      QueryRange(*store_, {Field::kGpuUtil, kT0, kT0 + 6000, 2000, RangeAgg::kAvg, RangeBy::kGpu},
                 gpus, &elsewhere);
  ASSERT_TRUE(per_gpu.ok()) << per_gpu.error().message;
  ASSERT_EQ(per_gpu->series.size(), 5u);
  EXPECT_EQ(Values(per_gpu->series[2]), (std::vector<double>{30.5, 32.5, 34.5}));
  EXPECT_EQ(per_gpu->series[4].labels.uuid, "GPU-d0");
  EXPECT_EQ(Values(per_gpu->series[4]), (std::vector<double>{50, 52, 54}));
  EXPECT_EQ(per_gpu->series[4].points[1].first, kT0 + 2000);
  // Pool pb: b0, c0 and d0 (30.5, 40.5 and 50 in the first step).
  auto pool =
      QueryRange(*store_, {Field::kGpuUtil, kT0, kT0 + 6000, 2000, RangeAgg::kSum, RangeBy::kPool},
                 gpus, &elsewhere);
  ASSERT_TRUE(pool.ok());
  EXPECT_EQ(pool->series[1].gpus, 3);
  EXPECT_EQ(Values(pool->series[1]), (std::vector<double>{121, 127, 133}));
}

TEST_F(QueryRangeTest, P95IsTheNearestRankAcrossTheGroup) {
  // Four GPU means per step; rank ceil(0.95 * 4) = 4: the largest.
  EXPECT_EQ(Values(Query(RangeAgg::kP95, RangeBy::kCluster).series[0]),
            (std::vector<double>{40.5, 42.5, 44.5}));
  // One GPU's raw samples in a 6 s step: six values, rank 6: the largest.
  EXPECT_EQ(Values(Query(RangeAgg::kP95, RangeBy::kGpu, 6000).series[0]),
            (std::vector<double>{15}));
}

TEST_F(QueryRangeTest, TheTierFollowsTheStepAndBadWindowsAreRefused) {
  auto minute = QueryRange(*store_, {Field::kGpuUtil, kT0, kT0 + 3'600'000, 60'000}, gpus_);
  ASSERT_TRUE(minute.ok());
  EXPECT_EQ(minute->tier, tsdb::Resolution::kMinute);
  auto hour = QueryRange(*store_, {Field::kGpuUtil, kT0, kT0 + 7'200'000, 3'600'000}, gpus_);
  EXPECT_EQ(hour->tier, tsdb::Resolution::kHour);
  auto bad_step = QueryRange(*store_, {Field::kGpuUtil, kT0, kT0 + 6000, -1}, gpus_);
  EXPECT_EQ(bad_step.error().message, "'step' must be a duration such as 1s, 1m, 1h");
  auto backwards = QueryRange(*store_, {Field::kGpuUtil, kT0, kT0, 1000}, gpus_);
  EXPECT_EQ(backwards.error().message, "'start' must be before 'end'");
  auto fine = QueryRange(*store_, {Field::kGpuUtil, kT0, kT0 + 12'000'000, 1000}, gpus_);
  EXPECT_EQ(fine.error().code, ErrorCode::kInvalidArgument);
  // 10,000 steps for 200 GPUs is 2,000,000 points: the 201st GPU is refused.
  std::vector<RangeGpu> many(201, gpus_[0]);
  auto wide = QueryRange(*store_, {Field::kGpuUtil, kT0, kT0 + 10'000'000, 1000}, many);
  ASSERT_FALSE(wide.ok());
  EXPECT_NE(wide.error().message.find("at most 2000000 series x steps"), std::string::npos);
  EXPECT_TRUE(QueryRange(*store_, {Field::kGpuUtil, kT0, kT0 + 10'000'000, 1000},
                         std::vector<RangeGpu>(200, gpus_[0]))
                  .ok());
  EXPECT_EQ(ParseRangeAgg("p95"), RangeAgg::kP95);
  EXPECT_FALSE(ParseRangeAgg("median"));
  EXPECT_EQ(ParseRangeBy("pool"), RangeBy::kPool);
  EXPECT_FALSE(ParseRangeBy("rack"));
}

}  // namespace
}  // namespace gpufleet
