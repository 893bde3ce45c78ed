#include "tsdb/engine.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/support/temp_dir.h"

namespace gpufleet::tsdb {
namespace {

namespace fs = std::filesystem;

class EngineTest : public ::testing::Test {
 protected:
  std::unique_ptr<Engine> Open() {
    auto e = Engine::Open({dir_.string(), {}, false, 4096});
    EXPECT_TRUE(e.ok()) << e.error().message;
    return std::move(e.value());
  }
  testing::TempDir tmp_{"gf-tsdb"};  // removed with everything in it after the test
  fs::path dir_ = tmp_.path();
};

// Writes `batches` batches of 3 series x 10 points, one second apart.
void Fill(Engine& e, int first_batch, int batches) {
  SeriesId a = e.Intern("GPU-a/util").value(), b = e.Intern("GPU-a/temp").value(),
           c = e.Intern("GPU-b/power").value();
  for (int i = first_batch; i < first_batch + batches; ++i) {
    std::vector<Point> pts;
    for (int k = 0; k < 10; ++k) {
      int64_t t = 1000LL * (i * 10 + k);
      pts.push_back({a, t, static_cast<double>(k)});
      pts.push_back({b, t, 40.5 + k});
      pts.push_back({c, t, 350'000.0 + i});
    }
    auto r = e.Append(pts);
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->stored, 30u);
  }
}

TEST_F(EngineTest, ReopenReplaysTheLog) {
  {
    auto e = Open();
    Fill(*e, 0, 50);
  }
  auto e = Open();
  EXPECT_EQ(e->replay().wal_points, 1500u);
  EXPECT_EQ(e->replay().torn_bytes, 0u);
  SeriesId b = *e->db().Find("GPU-a/temp");
  auto raw = e->db().Raw(b, 0, INT64_MAX);
  ASSERT_EQ(raw.size(), 500u);
  EXPECT_EQ(raw.back().v, 49.5);
  EXPECT_EQ(e->db().Rollup(b, Resolution::kMinute, 0, INT64_MAX).size(), 9u);
  Fill(*e, 50, 1);  // and it carries on
  EXPECT_EQ(e->db().Raw(b, 0, INT64_MAX).size(), 510u);
}

// The WAL replay fuzzer's finds: timestamps far apart in one batch (an agent's clock may say
// anything) overflowed the log's deltas when written and their sums when replayed. They are
// logged modulo 2^64, refused by the store, and the points around them kept.
TEST_F(EngineTest, TimestampsFarApartAreLoggedAndRefusedWithoutOverflow) {
  {
    auto e = Open();
    SeriesId a = e->Intern("GPU-a/temp").value();
    auto r = e->Append({{a, 1000, 40}, {a, INT64_MIN, 41}, {a, INT64_MAX, 42}, {a, 2000, 43}});
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->stored, 2u);
    EXPECT_EQ(r->refused, 2u);
  }
  auto e = Open();
  EXPECT_EQ(e->replay().wal_points, 2u);
  auto raw = e->db().Raw(*e->db().Find("GPU-a/temp"), 0, INT64_MAX);
  ASSERT_EQ(raw.size(), 2u);
  EXPECT_EQ(raw[1].t, 2000);
  EXPECT_EQ(raw[1].v, 43);
}

TEST_F(EngineTest, CheckpointCoversTheLogAndDropsIt) {
  auto e = Open();
  Fill(*e, 0, 100);
  uint64_t before = e->wal_bytes();
  ASSERT_TRUE(e->Checkpoint().ok());
  EXPECT_LT(e->wal_bytes(), before / 10);
  Fill(*e, 100, 10);
  e.reset();
  e = Open();
  EXPECT_EQ(e->replay().checkpoint_series, 3u);
  EXPECT_EQ(e->replay().wal_points, 300u);  // only what came after the checkpoint
  SeriesId c = *e->db().Find("GPU-b/power");
  auto raw = e->db().Raw(c, 0, INT64_MAX);
  ASSERT_EQ(raw.size(), 1100u);
  EXPECT_EQ(raw.back().v, 350'109.0);
  // A second checkpoint replaces the first.
  ASSERT_TRUE(e->Checkpoint().ok());
  int checkpoints = 0;
  for (const auto& f : fs::directory_iterator(dir_)) {
    checkpoints += f.path().filename().string().rfind("checkpoint-", 0) == 0;
  }
  EXPECT_EQ(checkpoints, 1);
}

// A checkpoint larger than one write (4 MiB) reads back whole: every series, every point.
TEST_F(EngineTest, ACheckpointOfManyWritesReadsBackWhole) {
  auto e = Open();
  std::vector<std::string> keys;
  for (int i = 0; i < 40'000; ++i) keys.push_back("GPU-" + std::to_string(i) + "/util");
  std::vector<std::string_view> views(keys.begin(), keys.end());
  auto ids = e->InternAll(views);
  ASSERT_TRUE(ids.ok()) << ids.error().message;
  for (int k = 0; k < 3; ++k) {
    std::vector<Point> pts;
    for (size_t i = 0; i < ids->size(); ++i) {
      pts.push_back({(*ids)[i], 1000LL * k, static_cast<double>(i % 101 + k)});
    }
    ASSERT_EQ(e->Append(pts)->stored, ids->size());
  }
  ASSERT_TRUE(e->Checkpoint().ok());
  uintmax_t bytes = 0;
  for (const auto& f : fs::directory_iterator(dir_)) {
    if (f.path().filename().string().starts_with("checkpoint-")) bytes += f.file_size();
  }
  EXPECT_GT(bytes, 4u << 20) << "the case needs more than one write";
  e.reset();
  e = Open();
  EXPECT_EQ(e->replay().checkpoint_series, 40'000u);
  EXPECT_EQ(e->replay().wal_points, 0u);
  for (int i : {0, 12'345, 39'999}) {
    auto raw = e->db().Raw(*e->db().Find(keys[static_cast<size_t>(i)]), 0, INT64_MAX);
    ASSERT_EQ(raw.size(), 3u) << keys[static_cast<size_t>(i)];
    EXPECT_EQ(raw[2].v, i % 101 + 2);
  }
}

// The CPU's CRC instruction and the table give the same CRC-32C, at every length and offset.
TEST(Crc32c, TheInstructionAndTheTableAgree) {
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);  // the standard check value
  EXPECT_EQ(Crc32cBytewise("123456789"), 0xE3069283u);
  EXPECT_EQ(Crc32c(""), 0u);
  std::string data;
  for (int i = 0; i < 300; ++i) data.push_back(static_cast<char>(i * 37 + (i >> 3)));
  for (size_t offset = 0; offset < 8; ++offset) {
    for (size_t n = 0; n + offset <= data.size(); n += 7) {
      std::string_view v(data.data() + offset, n);
      ASSERT_EQ(Crc32c(v), Crc32cBytewise(v)) << "offset " << offset << ", " << n << " bytes";
    }
  }
}

TEST_F(EngineTest, ATornTailIsCutAndTheRestKept) {
  {
    auto e = Open();
    Fill(*e, 0, 5);
  }
  fs::path last;
  for (const auto& f : fs::directory_iterator(dir_ / "wal")) last = std::max(last, f.path());
  {
    std::ofstream out(last, std::ios::app | std::ios::binary);
    out << std::string("\x40\x00\x00\x00garbage", 11);  // half a record
  }
  auto e = Open();
  EXPECT_EQ(e->replay().torn_bytes, 11u);
  EXPECT_EQ(e->replay().wal_points, 150u);
  Fill(*e, 5, 1);
  e.reset();
  e = Open();
  EXPECT_EQ(e->replay().torn_bytes, 0u);
  EXPECT_EQ(e->db().Raw(*e->db().Find("GPU-a/util"), 0, INT64_MAX).size(), 60u);
}

TEST_F(EngineTest, InternAllLogsNewSeriesTogetherAndSurvivesReopen) {
  std::vector<std::string_view> keys{"a", "b", "c"};
  {
    auto e = Open();
    ASSERT_EQ(e->Intern("b").value(), 0u);
    auto ids = e->InternAll(keys);
    ASSERT_TRUE(ids.ok());
    EXPECT_EQ(ids.value(), (std::vector<SeriesId>{1, 0, 2}));
    EXPECT_EQ(e->InternAll(keys).value(), ids.value());  // all known now
  }
  auto e = Open();
  EXPECT_EQ(e->db().Find("a"), 1u);
  EXPECT_EQ(e->db().Find("c"), 2u);
  EXPECT_EQ(e->replay().wal_records, 3u);
}

TEST_F(EngineTest, ARepeatedBatchIsStoredOnce) {
  auto e = Open();
  SeriesId a = e->Intern("x").value();
  std::vector<Point> pts{{a, 1000, 1}, {a, 2000, 2}};
  EXPECT_EQ(e->Append(pts)->stored, 2u);
  auto again = e->Append(pts);  // an agent re-sending a batch it saw no ack for
  EXPECT_EQ(again->stored, 0u);
  EXPECT_EQ(again->refused, 2u);
  EXPECT_NE(again->first_error.find("out-of-order"), std::string::npos);
  e.reset();
  e = Open();
  EXPECT_EQ(e->db().Raw(a, 0, INT64_MAX).size(), 2u);
}

// A checkpoint whose directory has gone (a disk unmounted, an operator's rm) is an error the
// controller logs, not a crash.
TEST_F(EngineTest, CheckpointIntoAVanishedDirectoryFailsCleanly) {
  auto e = Open();
  Fill(*e, 0, 2);
  fs::remove_all(dir_);
  Status s = e->Checkpoint();
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kUnavailable);
}

// Logs written by the first version (fixed 20-byte points) still replay.
TEST_F(EngineTest, ReadsVersionOnePointRecords) {
  fs::create_directories(dir_ / "wal");
  auto frame = [](uint8_t type, const std::string& payload) {
    std::string body(1, static_cast<char>(type));
    body += payload;
    Encoder e;
    e.U32(static_cast<uint32_t>(body.size()));
    e.U32(Crc32c(body));
    return e.out() + body;
  };
  Encoder series;
  series.U32(0);
  series.Str("GPU-old/gpu_util");
  Encoder points;
  points.U32(2);
  for (int i = 0; i < 2; ++i) {
    points.U32(0);
    points.I64(1000 * (i + 1));
    points.F64(50.5 + i);
  }
  std::ofstream(dir_ / "wal" / "0000000000000001.log", std::ios::binary)
      << frame(1, series.out()) << frame(2, points.out());
  auto e = Open();
  auto raw = e->db().Raw(*e->db().Find("GPU-old/gpu_util"), 0, INT64_MAX);
  ASSERT_EQ(raw.size(), 2u);
  EXPECT_EQ(raw[1].v, 51.5);
}

// A child process appends batches, reporting each acknowledged one on a pipe, checkpointing now
// and then; the parent kills it with SIGKILL mid-stream, reopens, and finds every acknowledged
// point.
TEST_F(EngineTest, KillNineLosesNothingAcknowledged) {
  int pipefd[2];
  ASSERT_EQ(::pipe(pipefd), 0);
  pid_t child = ::fork();
  if (child == 0) {
    ::close(pipefd[0]);
    auto e = Engine::Open({dir_.string(), {}, false, 1 << 16});
    if (!e.ok()) ::_exit(3);
    SeriesId id[8];
    for (int s = 0; s < 8; ++s)
      id[s] = e.value()->Intern("GPU-" + std::to_string(s) + "/util").value();
    for (int32_t batch = 0;; ++batch) {
      std::vector<Point> pts;
      for (int s = 0; s < 8; ++s)
        pts.push_back({id[s], 1000LL * batch, static_cast<double>(batch % 101)});
      if (!e.value()->Append(pts).ok()) ::_exit(4);
      if (batch % 500 == 499 && !e.value()->Checkpoint().ok()) ::_exit(5);
      if (::write(pipefd[1], &batch, sizeof batch) != sizeof batch) ::_exit(6);
    }
  }
  ::close(pipefd[1]);
  int32_t acked = -1, got = 0;
  while (acked < 2200 && ::read(pipefd[0], &got, sizeof got) == sizeof got) acked = got;
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  while (::read(pipefd[0], &got, sizeof got) == sizeof got) acked = got;  // acks already sent
  ::close(pipefd[0]);
  ASSERT_TRUE(WIFSIGNALED(status)) << "child exited with " << WEXITSTATUS(status);
  auto e = Open();
  for (int s = 0; s < 8; ++s) {
    auto id = e->db().Find("GPU-" + std::to_string(s) + "/util");
    ASSERT_TRUE(id.has_value());
    auto raw = e->db().Raw(*id, 0, INT64_MAX);
    ASSERT_GE(raw.size(), static_cast<size_t>(acked + 1)) << "series " << s;
    for (int32_t b = 0; b <= acked; ++b) {
      ASSERT_EQ(raw[b].t, 1000LL * b);
      ASSERT_EQ(raw[b].v, b % 101);
    }
  }
}

// Files may not grow past `bytes` while it lives (RLIMIT_FSIZE): a write that crosses the limit
// is cut short and the next fails with EFBIG, as on a disk that fills up. SIGXFSZ is ignored,
// as the controller ignores it.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &old_);
    old_handler_ = ::signal(SIGXFSZ, SIG_IGN);
    rlimit lim = old_;
    lim.rlim_cur = bytes;
    ::setrlimit(RLIMIT_FSIZE, &lim);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &old_);
    ::signal(SIGXFSZ, old_handler_);
  }

 private:
  rlimit old_{};
  sighandler_t old_handler_ = SIG_DFL;
};

fs::path LastSegment(const fs::path& dir) {
  fs::path last;
  for (const auto& f : fs::directory_iterator(dir / "wal")) last = std::max(last, f.path());
  return last;
}

// The disk fills up half way through a frame: the torn frame is cut off before anything else
// is appended, the engine says why it cannot write, the series interned meanwhile are logged
// before their points, and a reopen finds every acknowledged point and no torn byte.
TEST_F(EngineTest, AFullDiskLosesNothingAcknowledgedAndLeavesNoTornFrame) {
  // A series whose record does not fit in what is left of the disk.
  const std::string kLateKey = "GPU-c/" + std::string(200, 'u');
  auto open = [&] {
    auto e = Engine::Open({dir_.string(), {}, false, 1 << 20});
    EXPECT_TRUE(e.ok()) << e.error().message;
    return std::move(e.value());
  };
  auto e = open();
  Fill(*e, 0, 5);  // 150 points acknowledged
  SeriesId a = *e->db().Find("GPU-a/util");
  EXPECT_EQ(e->write_error(), "");
  size_t refused = 0;
  SeriesId late = 0;
  {
    FileSizeLimit full(fs::file_size(LastSegment(dir_)) + 40);
    for (int i = 5; i < 10; ++i) {
      std::vector<Point> pts;
      for (int k = 0; k < 10; ++k) pts.push_back({a, 1000LL * (i * 10 + k), 1.0 * k});
      auto r = e->Append(pts);
      EXPECT_FALSE(r.ok());  // not acknowledged
      refused += r.ok() ? 0 : 1;
    }
    EXPECT_NE(e->write_error(), "");
    auto c = e->Intern(kLateKey);  // in memory, not in the log
    EXPECT_FALSE(c.ok());
    late = *e->db().Find(kLateKey);
  }
  EXPECT_EQ(refused, 5u);
  // The disk has room again: the agent sends the refused batches again, and new ones.
  auto c = e->Intern(kLateKey);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, late);
  for (int i = 5; i < 12; ++i) {
    std::vector<Point> pts;
    for (int k = 0; k < 10; ++k) {
      pts.push_back({a, 1000LL * (i * 10 + k), 1.0 * k});
      pts.push_back({*c, 1000LL * (i * 10 + k), 2.0 * k});
    }
    auto r = e->Append(pts);
    ASSERT_TRUE(r.ok()) << r.error().message;
  }
  EXPECT_EQ(e->write_error(), "");
  e.reset();
  e = open();
  EXPECT_EQ(e->replay().torn_bytes, 0u);
  EXPECT_EQ(e->replay().skipped_bytes, 0u);
  EXPECT_EQ(e->db().Raw(*e->db().Find("GPU-a/util"), 0, INT64_MAX).size(), 120u);
  ASSERT_TRUE(e->db().Find(kLateKey).has_value());
  EXPECT_EQ(*e->db().Find(kLateKey), late);
  EXPECT_EQ(e->db().Raw(late, 0, INT64_MAX).size(), 70u);
}

// A log written before torn frames were cut back: frames after a torn one are read, not lost.
TEST_F(EngineTest, ReplaySkipsATornFrameToTheNextGoodOne) {
  std::string before;
  {
    auto e = Engine::Open({dir_.string(), {}, false, 1 << 20});
    ASSERT_TRUE(e.ok());
    Fill(*e.value(), 0, 3);
    std::ifstream in(LastSegment(dir_), std::ios::binary);
    before.assign(std::istreambuf_iterator<char>(in), {});
    Fill(*e.value(), 3, 2);
  }
  fs::path seg = LastSegment(dir_);
  std::string all;
  {
    std::ifstream in(seg, std::ios::binary);
    all.assign(std::istreambuf_iterator<char>(in), {});
  }
  ASSERT_GT(all.size(), before.size());
  {
    std::ofstream out(seg, std::ios::binary | std::ios::trunc);
    out << before << std::string("\x40\x00\x00\x00garbage", 11) << all.substr(before.size());
  }
  auto e = Engine::Open({dir_.string(), {}, false, 1 << 20});
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e.value()->replay().skipped_bytes, 11u);
  EXPECT_EQ(e.value()->replay().torn_bytes, 0u);
  EXPECT_EQ(e.value()->replay().wal_points, 150u);
}

}  // namespace
}  // namespace gpufleet::tsdb
