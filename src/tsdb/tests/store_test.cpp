#include "tsdb/store.h"

#include <gtest/gtest.h>

#include <thread>

namespace gpufleet::tsdb {
namespace {

TEST(Tsdb, InternsAppendsAndReads) {
  Tsdb db;
  SeriesId a = db.Intern("GPU-1/gpu_util");
  SeriesId b = db.Intern("GPU-1/gpu_temp");
  EXPECT_NE(a, b);
  EXPECT_EQ(db.Intern("GPU-1/gpu_util"), a);
  EXPECT_EQ(db.Find("GPU-1/gpu_temp"), b);
  EXPECT_FALSE(db.Find("GPU-2/gpu_temp").has_value());
  EXPECT_EQ(db.Key(b), "GPU-1/gpu_temp");
  ASSERT_TRUE(db.Append(a, 1000, 50).ok());
  ASSERT_TRUE(db.Append(a, 2000, 70).ok());
  EXPECT_FALSE(db.Append(a, 1500, 60).ok());
  EXPECT_EQ(db.Append(999, 1, 1).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(db.Latest(a)->v, 70);
  EXPECT_FALSE(db.Latest(b).has_value());
  EXPECT_EQ(db.Raw(a, 0, 10'000).size(), 2u);
  auto minute = db.Rollup(a, Resolution::kMinute, 0, 120'000);
  ASSERT_EQ(minute.size(), 1u);
  EXPECT_EQ(minute[0].sum, 120);
  EXPECT_EQ(db.Rollup(a, Resolution::kRaw, 0, 10'000).size(), 2u);
  auto stats = db.Stats();
  EXPECT_EQ(stats.series, 2u);
  EXPECT_EQ(stats.raw_samples, 2u);
}

// The WAL replay fuzzer's find: a damaged log (or an agent's clock) with timestamps far apart
// overflowed a chunk's delta arithmetic. Points outside 0 to 2^53 ms are refused.
// The registry's own index through its growths: every key finds its id, none is interned
// twice, and a key that differs by one character (or is a prefix) finds nothing.
TEST(Tsdb, ManyKeysKeepTheirIdsThroughTheIndexsGrowth) {
  Tsdb db;
  const int n = 100'000;
  auto key = [](int i) {
    return "GPU-" + std::to_string(i / 28) + "/field_" + std::to_string(i % 28);
  };
  for (int i = 0; i < n; ++i) ASSERT_EQ(db.Intern(key(i)), static_cast<SeriesId>(i));
  for (int i = 0; i < n; i += 7) {
    EXPECT_EQ(db.Intern(key(i)), static_cast<SeriesId>(i));
    EXPECT_EQ(db.Find(key(i)), static_cast<SeriesId>(i));
    EXPECT_EQ(db.Key(static_cast<SeriesId>(i)), key(i));
    EXPECT_FALSE(db.Find(key(i) + "x").has_value());
    EXPECT_FALSE(db.Find(key(i).substr(0, key(i).size() - 1) + "~").has_value());
  }
  EXPECT_FALSE(db.Find("").has_value());
  EXPECT_EQ(db.Stats().series, static_cast<size_t>(n));
}

TEST(Tsdb, TimestampsOutsideTheirRangeAreRefused) {
  Tsdb db;
  SeriesId a = db.Intern("GPU-1/gpu_temp");
  EXPECT_EQ(db.Append(a, -2954361355555045376, 1).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(db.Append(a, 7343252733147873280, 1).error().code, ErrorCode::kInvalidArgument);
  ASSERT_TRUE(db.Append(a, 0, 1).ok());
  ASSERT_TRUE(db.Append(a, int64_t{1} << 53, 2).ok());  // the largest delta there can be
  EXPECT_EQ(db.Raw(a, 0, (int64_t{1} << 53) + 1).size(), 2u);
  EXPECT_EQ(db.Latest(a)->v, 2);
}

TEST(Tsdb, ConcurrentWritersAndReaders) {
  Tsdb db;
  constexpr int kThreads = 4, kSeries = 50, kSamples = 400;
  std::vector<std::thread> threads;
  for (int w = 0; w < kThreads; ++w) {
    threads.emplace_back([&, w] {
      for (int s = 0; s < kSeries; ++s) {
        SeriesId id = db.Intern("w" + std::to_string(w) + "/s" + std::to_string(s));
        for (int i = 0; i < kSamples; ++i) ASSERT_TRUE(db.Append(id, 1000LL * i, i).ok());
        (void)db.Stats();
      }
    });
  }
  for (auto& t : threads) t.join();
  auto stats = db.Stats();
  EXPECT_EQ(stats.series, static_cast<size_t>(kThreads * kSeries));
  EXPECT_EQ(stats.raw_samples, static_cast<size_t>(kThreads * kSeries * kSamples));
}

}  // namespace
}  // namespace gpufleet::tsdb
