#include "tsdb/series.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

namespace gpufleet::tsdb {
namespace {

// The naive reference: aggregate the raw samples per bucket directly.
std::map<int64_t, Bucket> Naive(const std::vector<Sample>& samples, int64_t width) {
  std::map<int64_t, Bucket> out;
  for (const Sample& s : samples) {
    if (std::isnan(s.v)) continue;
    int64_t start = s.t - ((s.t % width) + width) % width;
    auto [it, fresh] = out.try_emplace(start, Bucket{start, s.v, s.v, 0, 0});
    Bucket& b = it->second;
    b.min = std::min(b.min, s.v);
    b.max = std::max(b.max, s.v);
    b.sum += s.v;
    b.count += 1;
  }
  return out;
}

void ExpectSame(const std::vector<Bucket>& got, const std::map<int64_t, Bucket>& want) {
  ASSERT_EQ(got.size(), want.size());
  size_t i = 0;
  for (const auto& [start, w] : want) {
    const Bucket& g = got[i++];
    EXPECT_EQ(g.start, start);
    EXPECT_EQ(g.min, w.min) << start;
    EXPECT_EQ(g.max, w.max) << start;
    EXPECT_EQ(g.sum, w.sum) << start;  // same additions in the same order: exact
    EXPECT_EQ(g.count, w.count) << start;
  }
}

TEST(Series, RollupsMatchANaiveReferenceExactly) {
  std::mt19937_64 rng(7);
  Series series;
  std::vector<Sample> all;
  int64_t t = 1'700'000'000'000 - 1'700'000'000'000 % 3'600'000 + 1234;
  double temp = 40;
  for (int i = 0; i < 4 * 3600; ++i) {  // four hours at ~1 Hz, with gaps, NaNs and fractions
    t += 1000 + static_cast<int64_t>(rng() % 3) - 1;
    if (rng() % 200 == 0) t += 90'000;  // an outage: empty buckets
    temp += static_cast<double>(static_cast<int>(rng() % 3) - 1);
    double v = rng() % 500 == 0 ? std::nan("") : (rng() % 10 == 0 ? temp + 0.25 : temp);
    ASSERT_TRUE(series.Append(t, v).ok());
    all.push_back({t, v});
  }
  ExpectSame(series.minute().Range(INT64_MIN, INT64_MAX), Naive(all, 60'000));
  ExpectSame(series.hour().Range(INT64_MIN, INT64_MAX), Naive(all, 3'600'000));
  // A window in the middle.
  int64_t from = all[5000].t, to = all[9000].t;
  auto want = Naive(all, 60'000);
  std::map<int64_t, Bucket> window;
  for (auto& [s, b] : want) {
    if (s >= from && s < to) window[s] = b;
  }
  ExpectSame(series.minute().Range(from, to), window);
}

TEST(Series, RetentionDropsEachTierOnItsOwnClock) {
  Series series;
  const int64_t kHour = 3'600'000;
  for (int64_t t = 0; t < 48 * kHour; t += 10'000) ASSERT_TRUE(series.Append(t, 1).ok());
  Retention r;
  r.raw_ms = 2 * kHour;
  r.minute_ms = 12 * kHour;
  r.hour_ms = 100 * kHour;
  int64_t now = 48 * kHour;
  series.Retain(now, r);
  auto raw = series.Raw(INT64_MIN, INT64_MAX);
  ASSERT_FALSE(raw.empty());
  // Whole chunks go, so a little older data may stay, never less than asked for.
  EXPECT_LE(raw.front().t, now - r.raw_ms);
  EXPECT_GT(raw.front().t, now - r.raw_ms - 3 * kHour);
  auto minutes = series.minute().Range(INT64_MIN, INT64_MAX);
  EXPECT_LE(minutes.front().start, now - r.minute_ms);
  EXPECT_GT(minutes.front().start, now - 2 * r.minute_ms);
  EXPECT_EQ(series.hour().Range(INT64_MIN, INT64_MAX).front().start, 0);
  EXPECT_EQ(series.hour().Range(INT64_MIN, INT64_MAX).back().count, 360);
}

}  // namespace
}  // namespace gpufleet::tsdb
