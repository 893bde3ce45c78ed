#include "remote/queue.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "tests/support/temp_dir.h"

namespace gpufleet::remote {
namespace {

std::vector<StoredPoint> Points(int64_t t, int n, double v = 1.5) {
  std::vector<StoredPoint> out;
  for (int i = 0; i < n; ++i)
    out.push_back({static_cast<uint32_t>(i % 2), Field::kGpuUtil, t + i, v + i});
  return out;
}

TEST(Queue, ReadsWhatWasAppendedInOrderWithSequenceNumbers) {
  testing::TempDir dir;
  auto q = Queue::Open({dir.path()}).value();
  Position start = q->End();
  EXPECT_EQ(start.seq, 0u);
  ASSERT_TRUE(q->Append({"GPU-a", "GPU-b"}, Points(1000, 3)).ok());
  ASSERT_TRUE(q->Append({"GPU-c"}, {{0, Field::kPowerUsage, 2000, 123456.0}}).ok());
  auto r = q->Read(start, 100).value();
  ASSERT_EQ(r.samples.size(), 4u);
  EXPECT_EQ(r.uuids[r.samples[0].uuid], "GPU-a");
  EXPECT_EQ(r.uuids[r.samples[1].uuid], "GPU-b");
  EXPECT_EQ(r.samples[2].t, 1002);
  EXPECT_DOUBLE_EQ(r.samples[2].v, 3.5);
  EXPECT_EQ(r.uuids[r.samples[3].uuid], "GPU-c");
  EXPECT_EQ(r.samples[3].field, Field::kPowerUsage);
  EXPECT_EQ(r.samples[3].v, 123456.0);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(r.samples[i].seq, i);
  EXPECT_EQ(r.end, q->End());
  EXPECT_EQ(r.lost, 0u);
  // Read in whole frames: a limit of 1 still returns the first frame's 3.
  auto first = q->Read(start, 1).value();
  EXPECT_EQ(first.samples.size(), 3u);
  EXPECT_EQ(first.end.seq, 3u);
  auto rest = q->Read(first.end, 100).value();
  ASSERT_EQ(rest.samples.size(), 1u);
  EXPECT_EQ(rest.samples[0].seq, 3u);
  EXPECT_TRUE(q->Read(rest.end, 100)->samples.empty());
}

// Frames are read in blocks of 1 MiB: frames across a block's end, and one larger than a block,
// read whole; reopening scans them the same way.
TEST(Queue, FramesAcrossAndLargerThanAReadBlock) {
  testing::TempDir dir;
  uint64_t appended = 0;
  {
    auto q = Queue::Open({dir.path()}).value();
    for (int i = 0; i < 600; ++i) {
      const int n = i == 300 ? 400'000 : 1'000 + i;  // about 7 bytes a point
      ASSERT_TRUE(q->Append({"GPU-a", "GPU-b"}, Points(1'000'000 * i, n)).ok());
      appended += static_cast<uint64_t>(n);
    }
    ASSERT_GT(q->bytes(), 6u << 20);
  }
  auto q = Queue::Open({dir.path()}).value();
  EXPECT_EQ(q->End().seq, appended);
  Position at = {1, 0, 0};
  uint64_t read = 0;
  int64_t last_t = -1;
  for (int reads = 0; at.seq < appended && reads < 100; ++reads) {
    auto r = q->Read(at, 50'000).value();
    for (const auto& s : r.samples) {
      ASSERT_EQ(s.seq, read++);
      ASSERT_GT(s.t, last_t);
      last_t = s.t;
    }
    at = r.end;
  }
  EXPECT_EQ(read, appended);
  EXPECT_EQ(at, q->End());
}

TEST(Queue, KeepsExactBitsOfNaNsAndFractions) {
  testing::TempDir dir;
  auto q = Queue::Open({dir.path()}).value();
  double stale;
  uint64_t bits = 0x7ff0000000000002ull;
  std::memcpy(&stale, &bits, 8);
  ASSERT_TRUE(q->Append({"GPU-a"}, {{0, Field::kGpuUtil, 5, stale},
                                    {0, Field::kGpuTemp, 5, 0.25},
                                    {0, Field::kFbUsed, 6, -7}})
                  .ok());
  auto r = q->Read({1, 0, 0}, 10).value();
  ASSERT_EQ(r.samples.size(), 3u);
  uint64_t got;
  std::memcpy(&got, &r.samples[0].v, 8);
  EXPECT_EQ(got, bits);
  EXPECT_EQ(r.samples[1].v, 0.25);
  EXPECT_EQ(r.samples[2].v, -7);
}

TEST(Queue, ReopensAfterATornWriteAndGoesOnNumbering) {
  testing::TempDir dir;
  {
    auto q = Queue::Open({dir.path()}).value();
    ASSERT_TRUE(q->Append({"GPU-a", "GPU-b"}, Points(1000, 4)).ok());
  }
  // A killed process: half a frame at the end.
  auto seg = dir / "0000000000000001.seg";
  auto size = std::filesystem::file_size(seg);
  {
    std::FILE* f = std::fopen(seg.c_str(), "ab");
    std::fwrite("\x40\0\0\0garbage", 1, 11, f);
    std::fclose(f);
  }
  auto q = Queue::Open({dir.path()}).value();
  EXPECT_EQ(std::filesystem::file_size(seg), size);
  EXPECT_EQ(q->End().seq, 4u);
  ASSERT_TRUE(q->Append({"GPU-a"}, Points(2000, 1)).ok());
  auto r = q->Read({1, 0, 0}, 100).value();
  ASSERT_EQ(r.samples.size(), 5u);
  EXPECT_EQ(r.samples[4].seq, 4u);
  EXPECT_EQ(r.samples[4].t, 2000);
}

TEST(Queue, TheWindowDeletesOldSegmentsAndACursorInThemCountsWhatItLost) {
  testing::TempDir dir;
  QueueOptions o{dir.path(), /*window_bytes=*/3000, /*segment_bytes=*/1000};
  auto q = Queue::Open(o).value();
  Position start = q->End();
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(q->Append({"GPU-a", "GPU-b"}, Points(i * 100, 10)).ok());
  EXPECT_LE(q->bytes(), 3000u + 1000u);
  size_t files = 0;
  for (auto& e : std::filesystem::directory_iterator(dir.path()))
    files += e.path().extension() == ".seg";
  EXPECT_LE(files, 4u);
  auto r = q->Read(start, 1'000'000).value();
  EXPECT_GT(r.lost, 0u);
  EXPECT_EQ(r.lost + r.samples.size(), 400u);
  EXPECT_EQ(r.samples.back().seq, 399u);
  EXPECT_EQ(r.samples.front().seq, r.lost);
  // Across a restart, numbering and the oldest kept segment are found again.
  q.reset();
  q = Queue::Open(o).value();
  EXPECT_EQ(q->End().seq, 400u);
  auto again = q->Read(start, 1'000'000).value();
  EXPECT_EQ(again.lost, r.lost);
  EXPECT_EQ(again.samples.size(), r.samples.size());
}

TEST(Queue, ACursorPastTheEndMovesToTheEnd) {
  testing::TempDir dir;
  auto q = Queue::Open({dir.path()}).value();
  ASSERT_TRUE(q->Append({"GPU-a", "GPU-b"}, Points(1, 2)).ok());
  auto r = q->Read({9, 0, 500}, 10).value();
  EXPECT_TRUE(r.samples.empty());
  EXPECT_EQ(r.end, q->End());
}

}  // namespace
}  // namespace gpufleet::remote
