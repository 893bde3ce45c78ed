#include "tsdb/bucket_chunk.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "tsdb/series.h"

namespace gpufleet::tsdb {
namespace {

bool SameBits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

void ExpectSame(const std::vector<Bucket>& got, const std::vector<Bucket>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].start, want[i].start) << i;
    EXPECT_TRUE(SameBits(got[i].min, want[i].min)) << i << ": " << got[i].min;
    EXPECT_TRUE(SameBits(got[i].max, want[i].max)) << i << ": " << got[i].max;
    EXPECT_TRUE(SameBits(got[i].sum, want[i].sum)) << i << ": " << got[i].sum;
    EXPECT_TRUE(SameBits(got[i].count, want[i].count)) << i << ": " << got[i].count;
  }
}

// Appends through chunks as a Rollup does (a new chunk when one is full or a column changes
// mode) and decodes them back.
std::vector<Bucket> RoundTrip(const std::vector<Bucket>& in, size_t* chunks = nullptr) {
  std::vector<BucketChunk> list;
  for (const Bucket& b : in) {
    if (list.empty() || list.back().Append(b) != AppendResult::kOk) {
      list.emplace_back(b);
      EXPECT_EQ(list.back().Append(b), AppendResult::kOk);
    }
  }
  std::vector<Bucket> out;
  for (const auto& c : list) c.DecodeInto(INT64_MIN, INT64_MAX, out);
  if (chunks) *chunks = list.size();
  return out;
}

TEST(BucketChunk, IntegerAndFloatColumnsRoundTripExactly) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int> util(0, 100);
  std::normal_distribution<double> watts(350, 40);
  std::vector<Bucket> ints, floats;
  for (int i = 0; i < 1000; ++i) {
    int64_t start = 1'700'000'000'000 + i * 60'000;
    double a = util(rng), b = util(rng);
    ints.push_back({start, std::min(a, b), std::max(a, b), a * 60 + b, 60});
    double w = watts(rng);
    floats.push_back({start, w - 12.5, w + 0.1, w * 59.7, 59});
  }
  size_t chunks = 0;
  ExpectSame(RoundTrip(ints, &chunks), ints);
  EXPECT_EQ(chunks, (1000 + BucketChunk::kMaxBuckets - 1) / BucketChunk::kMaxBuckets);
  ExpectSame(RoundTrip(floats), floats);
}

TEST(BucketChunk, EdgeValuesAndAModeChangeRoundTrip) {
  const double kEdge[] = {0.0,
                          -0.0,
                          0.1,
                          -1.0,
                          std::numeric_limits<double>::infinity(),
                          -std::numeric_limits<double>::infinity(),
                          std::numeric_limits<double>::max(),
                          std::numeric_limits<double>::lowest(),
                          std::numeric_limits<double>::denorm_min(),
                          9007199254740992.0,
                          -9007199254740992.0,
                          9007199254740994.0,
                          4.5e15};
  std::vector<Bucket> in;
  int64_t start = -120'000;  // before the epoch, through it
  for (double v : kEdge) {
    for (double w : kEdge) {
      in.push_back({start, v, w, v, 1});
      start += 60'000;
    }
  }
  // An integer column that meets a fraction: a new chunk, nothing lost.
  in.push_back({start, 1, 2, 3, 4});
  in.push_back({start + 60'000, 1, 2, 3.5, 4});
  ExpectSame(RoundTrip(in), in);
}

TEST(BucketChunk, RefusesABucketNotAfterTheLastAndDecodesOnlyTheWindow) {
  BucketChunk c(Bucket{60'000, 1, 2, 3, 1});
  ASSERT_EQ(c.Append({60'000, 1, 2, 3, 1}), AppendResult::kOk);
  EXPECT_EQ(c.Append({60'000, 1, 2, 3, 1}), AppendResult::kOutOfOrder);
  EXPECT_EQ(c.Append({0, 1, 2, 3, 1}), AppendResult::kOutOfOrder);
  for (int i = 2; i <= 5; ++i) ASSERT_EQ(c.Append({i * 60'000, 1, 2, 3, 1}), AppendResult::kOk);
  std::vector<Bucket> out;
  c.DecodeInto(120'000, 240'000, out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].start, 120'000);
  EXPECT_EQ(out[1].start, 180'000);
  EXPECT_EQ(c.min_time(), 60'000);
  EXPECT_EQ(c.max_time(), 300'000);
}

TEST(BucketChunk, SavedAndLoadedItGoesOnAsIfNeverStopped) {
  std::vector<Bucket> in;
  for (int i = 0; i < 100; ++i) {
    in.push_back({i * 60'000LL, i * 0.5 + 0.25, i * 0.5 + 3.5, i * 61.25 + 0.5, 60});
  }
  BucketChunk c(in[0]);
  for (int i = 0; i < 50; ++i) ASSERT_EQ(c.Append(in[i]), AppendResult::kOk);
  Encoder e;
  c.Save(e);
  Decoder d(e.out());
  auto loaded = BucketChunk::Load(d);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_TRUE(d.empty());
  for (int i = 50; i < 100; ++i) ASSERT_EQ(loaded->Append(in[i]), AppendResult::kOk);
  std::vector<Bucket> out;
  loaded->DecodeInto(INT64_MIN, INT64_MAX, out);
  ExpectSame(out, in);
  // A record cut short anywhere is refused, never read past its end.
  for (size_t n = 0; n < e.out().size(); ++n) {
    Decoder cut(std::string_view(e.out()).substr(0, n));
    EXPECT_FALSE(BucketChunk::Load(cut).has_value()) << n;
  }
}

// A minute of gpu_util at 1 Hz a bucket: the tier's memory per bucket, held once for the four
// columns, stays a few bytes.
TEST(BucketChunk, AMinuteTierOfAGaugeTakesAFewBytesABucket) {
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int> step(-2, 2);
  std::vector<Bucket> in;
  int v = 50;
  for (int i = 0; i < BucketChunk::kMaxBuckets; ++i) {
    int lo = v, hi = v;
    double sum = 0;
    for (int s = 0; s < 60; ++s) {
      v = std::clamp(v + step(rng), 0, 100);
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      sum += v;
    }
    in.push_back({i * 60'000LL, double(lo), double(hi), sum, 60});
  }
  BucketChunk c(in[0]);
  for (const auto& b : in) ASSERT_EQ(c.Append(b), AppendResult::kOk);
  double per_bucket = static_cast<double>(c.bytes()) / BucketChunk::kMaxBuckets;
  EXPECT_LT(per_bucket, 6.0);
  EXPECT_LT(sizeof(BucketChunk), 4 * sizeof(Chunk) / 2);
}

// A checkpoint written before BucketChunk (each rollup as four chunk lists, one a column)
// loads into the same buckets.
TEST(Series, ALegacyCheckpointsRollupsLoadIntoTheSameBuckets) {
  Series s;
  for (int64_t t = 0; t < 600'000; t += 1'000) ASSERT_TRUE(s.Append(t, double(t / 7'000)).ok());
  auto minute = s.minute().Range(INT64_MIN, INT64_MAX);
  ASSERT_EQ(minute.size(), 10u);  // nine closed, one open
  Encoder e;
  ChunkList raw;
  for (int64_t t = 0; t < 600'000; t += 1'000) raw.Append(t, double(t / 7'000));
  raw.Save(e);
  auto legacy_rollup = [&](const std::vector<Bucket>& closed, const Bucket& open, bool is_open) {
    ChunkList cols[4];
    for (const Bucket& b : closed) {
      cols[0].Append(b.start, b.min);
      cols[1].Append(b.start, b.max);
      cols[2].Append(b.start, b.sum);
      cols[3].Append(b.start, b.count);
    }
    for (const auto& c : cols) c.Save(e);
    e.U8(is_open ? 1 : 0);
    e.I64(open.start);
    e.F64(open.min);
    e.F64(open.max);
    e.F64(open.sum);
    e.F64(open.count);
  };
  legacy_rollup(std::vector<Bucket>(minute.begin(), minute.end() - 1), minute.back(), true);
  auto hour = s.hour().Range(INT64_MIN, INT64_MAX);
  ASSERT_EQ(hour.size(), 1u);
  legacy_rollup({}, hour[0], true);
  Series loaded;
  Decoder d(e.out());
  ASSERT_TRUE(loaded.Load(d, /*legacy_rollups=*/true));
  EXPECT_TRUE(d.empty());
  ExpectSame(loaded.minute().Range(INT64_MIN, INT64_MAX), minute);
  ExpectSame(loaded.hour().Range(INT64_MIN, INT64_MAX), hour);
  // And it goes on: the next minute closes the open bucket into the new chunks.
  ASSERT_TRUE(loaded.Append(600'000, 1).ok());
  EXPECT_EQ(loaded.minute().Range(INT64_MIN, INT64_MAX).size(), 11u);
}

}  // namespace
}  // namespace gpufleet::tsdb
