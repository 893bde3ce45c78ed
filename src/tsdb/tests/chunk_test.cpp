#include "tsdb/chunk.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "tsdb/codec.h"
#include "tsdb/series.h"

namespace gpufleet::tsdb {
namespace {

// Appends every sample through a ChunkList (which cuts chunks and switches modes as needed)
// and checks that decoding gives back exactly the same bits.
void ExpectRoundTrip(const std::vector<Sample>& in) {
  ChunkList list;
  for (const Sample& s : in) ASSERT_EQ(list.Append(s.t, s.v), AppendResult::kOk) << s.t;
  auto out = list.Range(INT64_MIN, INT64_MAX);
  ASSERT_EQ(out.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    ASSERT_EQ(out[i], in[i]) << "sample " << i << ": t " << in[i].t << " v " << in[i].v
                             << " came back as t " << out[i].t << " v " << out[i].v;
  }
}

TEST(Chunk, EdgeValuesRoundTrip) {
  const double kEdge[] = {0.0,
                          -0.0,
                          1.0,
                          -1.0,
                          0.1,
                          std::numeric_limits<double>::quiet_NaN(),
                          std::numeric_limits<double>::infinity(),
                          -std::numeric_limits<double>::infinity(),
                          std::numeric_limits<double>::max(),
                          std::numeric_limits<double>::lowest(),
                          std::numeric_limits<double>::denorm_min(),
                          std::numeric_limits<double>::epsilon(),
                          9007199254740992.0,
                          -9007199254740992.0,
                          9007199254740993.0,
                          1e300,
                          42.0};
  std::vector<Sample> in;
  int64_t t = 1'700'000'000'000;
  for (int round = 0; round < 3; ++round) {
    for (double v : kEdge) in.push_back({t += 1000, v});
  }
  ExpectRoundTrip(in);
}

TEST(Chunk, TimestampEdgesRoundTrip) {
  std::vector<Sample> in;
  int64_t t = -5'000;  // before the epoch
  const int64_t kSteps[] = {1,      1000,   1000,      999, 1001,      8192, 8193, 65536,     65537,
                            524288, 524289, 1LL << 40, 1,   3'600'000, 1000, 1000, 1LL << 50, 7};
  for (int64_t step : kSteps) in.push_back({t += step, static_cast<double>(step % 97)});
  ExpectRoundTrip(in);
}

TEST(Chunk, RandomSequencesRoundTrip) {
  std::mt19937_64 rng(12345);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<Sample> in;
    int64_t t = static_cast<int64_t>(rng() % (1ULL << 42));
    int n = 1 + static_cast<int>(rng() % 1000);
    double level = static_cast<double>(rng() % 1000);
    for (int i = 0; i < n; ++i) {
      switch (rng() % 4) {
        case 0:
          t += 1000;
          break;
        case 1:
          t += 1 + static_cast<int64_t>(rng() % 5000);
          break;
        case 2:
          t += 1000 + static_cast<int64_t>(rng() % 21) - 10;
          break;
        default:
          t += 1 + static_cast<int64_t>(rng() % (1ULL << 33));
          break;
      }
      double v;
      switch (rng() % 6) {
        case 0:
          v = level;
          break;  // unchanged
        case 1:
          v = level += static_cast<double>(static_cast<int>(rng() % 7) - 3);
          break;  // integer walk
        case 2:
          v = std::bit_cast<double>(rng());
          break;  // any bits at all
        case 3:
          v = static_cast<double>(rng() % 100000) / 100.0;
          break;  // decimals
        case 4:
          v = static_cast<double>(static_cast<int64_t>(rng()) >> 8);
          break;  // big integers
        default:
          v = std::nan("");
          break;
      }
      in.push_back({t, v});
    }
    ExpectRoundTrip(in);
  }
}

TEST(Chunk, OutOfOrderAndDuplicateTimestampsAreRefused) {
  Series s;
  ASSERT_TRUE(s.Append(2000, 1).ok());
  auto dup = s.Append(2000, 2);
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(dup.error().message,
            "out-of-order sample: t=2000 is not after the series' last t=2000");
  EXPECT_FALSE(s.Append(1000, 3).ok());
  EXPECT_TRUE(s.Append(3000, 4).ok());
  EXPECT_EQ(s.raw_samples(), 2u);  // the refused ones left nothing behind
}

// A checkpoint's chunk whose count claims more samples than its bits hold (a damaged file that
// still parses): decoding stops where the bits end, with the samples before it, and never reads
// past its bytes (the sanitizers would say so).
TEST(Chunk, ADamagedChunkDecodesWhatItHoldsAndStops) {
  for (bool integer : {false, true}) {
    Chunk c(integer);
    for (int i = 0; i < 50; ++i) {
      ASSERT_EQ(c.Append(1000LL * i, integer ? i * 3 : i * 0.37), AppendResult::kOk);
    }
    Encoder e;
    c.Save(e);
    std::string bytes = e.out();
    bytes[1] = static_cast<char>(0xff);  // the count (u16 after the flags): 50 -> 767
    bytes[2] = static_cast<char>(0x02);
    Decoder d(bytes);
    auto loaded = Chunk::Load(d);
    ASSERT_TRUE(loaded.has_value()) << integer;
    auto out = loaded->Decode();
    ASSERT_GE(out.size(), 50u) << integer;
    EXPECT_LT(out.size(), 60u) << integer << ": the rest of the last byte at most";
    EXPECT_EQ(out[49].t, 49'000) << integer;
    // Every truncation of the saved chunk is refused whole.
    for (size_t n = 0; n < e.out().size(); ++n) {
      Decoder cut(std::string_view(e.out()).substr(0, n));
      EXPECT_FALSE(Chunk::Load(cut).has_value()) << integer << " " << n;
    }
  }
}

TEST(Chunk, IntegerChunksSwitchToFloatWhenNeeded) {
  ChunkList list;
  ASSERT_EQ(list.Append(1000, 5), AppendResult::kOk);
  ASSERT_EQ(list.Append(2000, 5.5), AppendResult::kOk);  // cuts a float chunk
  ASSERT_EQ(list.Append(3000, 6), AppendResult::kOk);
  auto out = list.Range(0, 10'000);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[1].v, 5.5);
}

TEST(Chunk, SteadySeriesCostUnderTwoBitsPerSample) {
  ChunkList list;
  for (int i = 0; i < 24'000; ++i) ASSERT_EQ(list.Append(1000LL * i, 65), AppendResult::kOk);
  // A constant value at a fixed interval: one bit for the timestamp and one for the value
  // (0.25 bytes), plus each chunk's 16-byte header and its in-memory bookkeeping.
  double bytes_per_sample = static_cast<double>(list.bytes()) / 24'000;
  EXPECT_LT(bytes_per_sample, 0.55) << bytes_per_sample;
  EXPECT_GT(bytes_per_sample, 0.25) << "counts every byte it holds";
}

TEST(Chunk, CountersCostLittle) {
  ChunkList list;
  int64_t energy = 1'000'000'000'000;  // mJ since boot
  std::mt19937_64 rng(3);
  for (int i = 0; i < 4800; ++i) {
    energy += 350'000 + static_cast<int64_t>(rng() % 100) - 50;  // ~350 W, a little noise
    ASSERT_EQ(list.Append(1000LL * i, static_cast<double>(energy)), AppendResult::kOk);
  }
  auto out = list.Range(0, INT64_MAX);
  ASSERT_EQ(out.size(), 4800u);
  EXPECT_EQ(out.back().v, static_cast<double>(energy));
  // Delta-of-delta within +-100 takes 11 bits a sample (plus bookkeeping), where plain deltas
  // of ~350,000 would take 36.
  EXPECT_LT(static_cast<double>(list.bytes()) / 4800, 1.65);
}

TEST(Chunk, RangeSelectsByTime) {
  ChunkList list;
  for (int i = 0; i < 3000; ++i) ASSERT_EQ(list.Append(1000LL * i, i), AppendResult::kOk);
  auto out = list.Range(250'000, 260'000);
  ASSERT_EQ(out.size(), 10u);
  EXPECT_EQ(out.front().t, 250'000);
  EXPECT_EQ(out.back().t, 259'000);
  list.DropBefore(2'000'000);  // whole chunks of 960 samples: the first two go
  EXPECT_TRUE(list.Range(0, 1'920'000).empty());
  EXPECT_EQ(list.Range(0, INT64_MAX).front().t, 1'920'000);
  EXPECT_EQ(list.Range(0, INT64_MAX).back().v, 2999);
}

}  // namespace
}  // namespace gpufleet::tsdb
