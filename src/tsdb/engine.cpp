#include "tsdb/engine.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "tsdb/chunk.h"
#include "tsdb/codec.h"

namespace fs = std::filesystem;

namespace gpufleet::tsdb {
namespace {

constexpr uint8_t kSeriesRecord = 1;
constexpr uint8_t kPointsRecord = 2;    // version 1: fixed 20 bytes a point (still read)
constexpr uint8_t kPointsRecordV2 = 5;  // deltas and varints: about 5 bytes a point
constexpr uint8_t kCheckpointHeader = 3;
constexpr uint8_t kCheckpointSeries = 4;    // rollups as four chunk lists (still read)
constexpr uint8_t kCheckpointSeriesV2 = 6;  // rollups as BucketChunks
constexpr uint32_t kMaxRecord = 256u << 20;

std::string SegmentName(uint64_t n) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016llu.log", static_cast<unsigned long long>(n));
  return buf;
}

// Appends a frame to `out`: the body's length and CRC-32C (little-endian u32s), then the body
// (the type byte and the payload).
void AppendFrame(std::string& out, uint8_t type, const std::string& payload) {
  const size_t at = out.size();
  out.append(8, '\0');
  out.push_back(static_cast<char>(type));
  out += payload;
  std::string_view body(out.data() + at + 8, payload.size() + 1);
  const uint32_t head[2] = {static_cast<uint32_t>(body.size()), Crc32c(body)};
  for (size_t k = 0; k < 8; ++k) out[at + k] = static_cast<char>(head[k / 4] >> (8 * (k % 4)));
}

// Deltas between points' ids and times, and their sums at replay, modulo 2^64: a batch may hold
// any int64 timestamps (an agent's clock; the store refuses what is out of range when it
// applies them), and a damaged log any deltas, and neither may overflow.
int64_t WrapSub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
int64_t WrapAdd(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}

std::string Frame(uint8_t type, const std::string& payload) {
  std::string out;
  AppendFrame(out, type, payload);
  return out;
}

struct Record {
  uint8_t type;
  std::string_view payload;
};

constexpr bool KnownType(uint8_t t) {
  return t == kSeriesRecord || t == kPointsRecord || t == kPointsRecordV2 ||
         t == kCheckpointHeader || t == kCheckpointSeries || t == kCheckpointSeriesV2;
}

// The frame at `pos`, when one is whole and its CRC holds.
std::optional<Record> FrameAt(std::string_view data, size_t pos) {
  if (data.size() - pos < 8) return std::nullopt;
  uint32_t len, crc;
  std::memcpy(&len, data.data() + pos, 4);
  std::memcpy(&crc, data.data() + pos + 4, 4);
  if (len == 0 || len > kMaxRecord || data.size() - pos - 8 < len) return std::nullopt;
  std::string_view body = data.substr(pos + 8, len);
  if (!KnownType(static_cast<uint8_t>(body[0])) || Crc32c(body) != crc) return std::nullopt;
  return Record{static_cast<uint8_t>(body[0]), body.substr(1)};
}

struct Frames {
  std::vector<Record> records;
  size_t good = 0;     // the end of the last good frame
  size_t skipped = 0;  // torn or corrupt bytes between good frames
};

// Reads framed records from `data`. A torn or corrupt frame is skipped to the next good one
// (a write that failed half way, with frames appended after it, loses only itself); what
// follows the last good frame is not counted as good.
Frames ReadRecords(std::string_view data) {
  Frames out;
  size_t pos = 0;
  size_t resync_budget = 8 * data.size() + (1 << 20);
  while (pos < data.size()) {
    if (auto r = FrameAt(data, pos)) {
      out.records.push_back(*r);
      pos += 8 + r->payload.size() + 1;
      out.good = pos;
      continue;
    }
    // Resynchronising costs a CRC for each candidate whose header looks right: bounded, so a
    // segment of garbage cannot keep a start busy for long (past it, the rest counts as torn).
    size_t next = pos + 1;
    while (next < data.size() && resync_budget > 0) {
      if (data.size() - next > 8) {  // a CRC is computed only where the header fits
        uint32_t len;
        std::memcpy(&len, data.data() + next, 4);
        if (len > 0 && len <= data.size() - next - 8 &&
            KnownType(static_cast<uint8_t>(data[next + 8]))) {
          resync_budget -= std::min<size_t>(resync_budget, len);
        }
      }
      if (FrameAt(data, next)) break;
      ++next;
    }
    if (next >= data.size() || resync_budget == 0) break;
    out.skipped += next - pos;
    pos = next;
  }
  return out;
}

Result<std::string> ReadWhole(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return MakeError(ErrorCode::kUnavailable, "cannot read " + p.string());
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

Error Io(const std::string& what) {
  return MakeError(ErrorCode::kUnavailable, what + ": " + std::strerror(errno));
}

uint64_t NumberOf(const fs::path& p, std::string_view prefix) {
  std::string name = p.filename().string().substr(prefix.size());
  return std::strtoull(name.c_str(), nullptr, 10);
}

}  // namespace

Engine::Engine(EngineOptions options) : options_(std::move(options)), db_(options_.retention) {}

Engine::~Engine() {
  if (fd_ >= 0) ::close(fd_);
}

Result<std::unique_ptr<Engine>> Engine::Open(EngineOptions options) {
  std::error_code ec;
  fs::create_directories(fs::path(options.dir) / "wal", ec);
  if (ec)
    return MakeError(ErrorCode::kUnavailable, "cannot create " + options.dir + ": " + ec.message());
  std::unique_ptr<Engine> engine(new Engine(std::move(options)));
  GF_TRY(engine->Replay());
  return engine;
}

// Loads the newest checkpoint, if any; returns the first log segment it does not cover.
Result<uint64_t> Engine::LoadCheckpoint() {
  fs::path dir(options_.dir);
  uint64_t first_segment = 0;
  std::vector<fs::path> checkpoints;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string n = e.path().filename().string();
    if (n.rfind("checkpoint-", 0) == 0 && n.size() > 15 && n.substr(n.size() - 4) == ".bin") {
      checkpoints.push_back(e.path());
    }
  }
  std::sort(checkpoints.begin(), checkpoints.end());
  if (!checkpoints.empty()) {
    std::string data;
    GF_TRY_ASSIGN(data, ReadWhole(checkpoints.back()));
    auto [records, good, skipped] = ReadRecords(data);
    if (good != data.size() || skipped > 0 || records.empty() ||
        records[0].type != kCheckpointHeader) {
      return MakeError(ErrorCode::kInternal,
                       "checkpoint " + checkpoints.back().string() +
                           " is damaged; move it aside to start from the log");
    }
    Decoder h(records[0].payload);
    first_segment = h.Get<uint64_t>().value_or(0);
    for (size_t i = 1; i < records.size(); ++i) {
      Decoder d(records[i].payload);
      auto id = d.Get<uint32_t>();
      auto key = d.Str();
      const uint8_t type = records[i].type;
      if ((type != kCheckpointSeries && type != kCheckpointSeriesV2) || !id || !key ||
          db_.Intern(*key) != *id) {
        return MakeError(ErrorCode::kInternal,
                         "checkpoint series record " + std::to_string(i) + " is damaged");
      }
      if (!db_.LoadSeries(*id, d, type == kCheckpointSeries)) {
        return MakeError(ErrorCode::kInternal,
                         "checkpoint data of series '" + std::string(*key) + "' is damaged");
      }
    }
    replay_.checkpoint_series = records.size() - 1;
  }
  return first_segment;
}

Status Engine::Replay() {
  fs::path dir(options_.dir);
  // The newest checkpoint, and the first log segment it does not cover.
  uint64_t first_segment = 0;
  GF_TRY_ASSIGN(first_segment, LoadCheckpoint());
  std::vector<fs::path> segments;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir / "wal", ec)) {
    if (e.path().extension() == ".log" && NumberOf(e.path(), "") >= first_segment)
      segments.push_back(e.path());
  }
  std::sort(segments.begin(), segments.end());
  uint64_t next = first_segment;
  for (const auto& seg : segments) {
    std::string data;
    GF_TRY_ASSIGN(data, ReadWhole(seg));
    auto [records, good, skipped] = ReadRecords(data);
    replay_.skipped_bytes += skipped;
    for (const Record& r : records) {
      ++replay_.wal_records;
      Decoder d(r.payload);
      if (r.type == kSeriesRecord) {
        auto id = d.Get<uint32_t>();
        auto key = d.Str();
        if (!id || !key || db_.Intern(*key) != *id) {
          return MakeError(ErrorCode::kInternal,
                           "log " + seg.string() + ": series ids out of step");
        }
      } else if (r.type == kPointsRecordV2) {
        auto n = d.Varint().value_or(0);
        int64_t id = 0, t = 0;
        for (uint64_t i = 0; i < n; ++i) {
          auto did = d.Zigzag(), dt = d.Zigzag();
          auto tag = d.Get<uint8_t>();
          if (!tag) break;
          std::optional<double> v;
          if (*tag == 0) {
            if (auto iv = d.Zigzag()) v = static_cast<double>(*iv);
          } else {
            v = d.Get<double>();
          }
          if (!did || !dt || !v) break;
          id = WrapAdd(id, *did);
          t = WrapAdd(t, *dt);
          if (db_.Append(static_cast<SeriesId>(id), t, *v).ok()) ++replay_.wal_points;
        }
      } else if (r.type == kPointsRecord) {
        auto n = d.Get<uint32_t>().value_or(0);
        for (uint32_t i = 0; i < n; ++i) {
          auto id = d.Get<uint32_t>();
          auto t = d.Get<int64_t>();
          auto v = d.Get<double>();
          if (!v) break;
          if (db_.Append(*id, *t, *v).ok()) ++replay_.wal_points;
        }
      }
    }
    if (good < data.size()) {
      // An interrupted write at the end of a segment: cut it off so the log stays well formed.
      replay_.torn_bytes += data.size() - good;
      fs::resize_file(seg, good, ec);
      if (ec)
        return MakeError(ErrorCode::kUnavailable,
                         "cannot cut the torn tail of " + seg.string() + ": " + ec.message());
    }
    older_segments_bytes_ += good;
    next = NumberOf(seg, "") + 1;
  }
  std::lock_guard lock(wal_mu_);
  return OpenSegment(std::max<uint64_t>(next, 1));
}

Status Engine::OpenSegment(uint64_t number) {
  if (fd_ >= 0) {
    ::fsync(fd_);
    ::close(fd_);
    older_segments_bytes_ += segment_size_;
  }
  fs::path p = fs::path(options_.dir) / "wal" / SegmentName(number);
  fd_ = ::open(p.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd_ < 0) return Io("cannot open " + p.string());
  segment_ = number;
  segment_size_ = 0;
  return {};
}

Status Engine::WriteRecord(uint8_t type, const std::string& payload) {
  return WriteFrames(Frame(type, payload));
}

Status Engine::WriteFrames(const std::string& frames) {
  // Series records that could not be logged before go first: their ids are in use in memory,
  // and the log must hold them before any point of theirs, in id order.
  std::string joined;
  const std::string* out = &frames;
  if (!unlogged_series_.empty()) {
    joined = unlogged_series_ + frames;
    out = &joined;
  }
  if (cut_failed_ || fd_ < 0) {
    // The last segment may end in a torn frame that could not be cut off (or could not be
    // opened): go on in a new one (replay cuts the torn tail of the old one and reads on).
    GF_TRY(Failing(OpenSegment(segment_ + 1)));
    cut_failed_ = false;
  } else if (segment_size_ > 0 && segment_size_ + out->size() > options_.segment_bytes) {
    GF_TRY(Failing(OpenSegment(segment_ + 1)));
  }
  const char* p = out->data();
  size_t left = out->size();
  while (left > 0) {
    ssize_t n = ::write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      Error e = Io("write-ahead log");
      // Nothing after a torn frame: the segment is cut back to its last whole frame before
      // anything else is appended, or the next write starts a new segment.
      if (out->size() != left && ::ftruncate(fd_, static_cast<off_t>(segment_size_)) != 0) {
        cut_failed_ = true;
      }
      return Failing(e);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  segment_size_ += out->size();
  unlogged_series_.clear();
  if (options_.fsync_each_append && ::fdatasync(fd_) != 0) return Failing(Io("fdatasync"));
  std::lock_guard lock(health_mu_);
  write_error_.clear();
  return {};
}

Status Engine::Failing(Status s) {
  if (!s.ok()) {
    std::lock_guard lock(health_mu_);
    write_error_ = s.error().message;
  }
  return s;
}

std::string Engine::write_error() const {
  std::lock_guard lock(health_mu_);
  return write_error_;
}

Result<SeriesId> Engine::Intern(std::string_view key) {
  std::vector<SeriesId> ids;
  GF_TRY_ASSIGN(ids, InternAll({key}));
  return ids[0];
}

Result<std::vector<SeriesId>> Engine::InternAll(const std::vector<std::string_view>& keys) {
  std::vector<SeriesId> ids;
  ids.reserve(keys.size());
  for (auto key : keys) {
    auto id = db_.Find(key);
    if (!id) break;
    ids.push_back(*id);
  }
  if (ids.size() == keys.size()) return ids;  // all known: no log write
  ids.clear();
  std::shared_lock apply(apply_mu_);
  std::lock_guard lock(wal_mu_);
  // New series are logged together, in id order, in one write.
  std::string frames;
  for (auto key : keys) {
    if (auto id = db_.Find(key)) {
      ids.push_back(*id);
      continue;
    }
    SeriesId id = db_.Intern(key);
    Encoder e;
    e.U32(id);
    e.Str(key);
    AppendFrame(frames, kSeriesRecord, e.out());
    ids.push_back(id);
  }
  if (!frames.empty()) {
    if (Status s = WriteFrames(frames); !s.ok()) {
      // The series exist in memory from now on: their records are logged before the next
      // frame that is (WriteFrames), so the log's ids stay in step.
      unlogged_series_ += frames;
      return s.error();
    }
  }
  return ids;
}

Result<BatchResult> Engine::Append(const std::vector<Point>& points, std::vector<char>* stored) {
  std::shared_lock apply(apply_mu_);
  {
    // Points of a batch run in series order at few distinct times, and NVML's values are
    // integers: deltas and varints take about a quarter of the fixed form.
    Encoder e;
    e.Varint(points.size());
    int64_t id = 0, t = 0;
    for (const Point& p : points) {
      e.Zigzag(static_cast<int64_t>(p.id) - id);
      e.Zigzag(WrapSub(p.t, t));
      id = p.id;
      t = p.t;
      if (Chunk::FitsInteger(p.v)) {
        e.U8(0);
        e.Zigzag(static_cast<int64_t>(p.v));
      } else {
        e.U8(1);
        e.F64(p.v);
      }
    }
    std::lock_guard lock(wal_mu_);
    GF_TRY(WriteRecord(kPointsRecordV2, e.out()));
  }
  BatchResult r;
  if (stored) stored->assign(points.size(), 0);
  for (size_t i = 0; i < points.size(); ++i) {
    const Point& p = points[i];
    Status s = db_.Append(p.id, p.t, p.v);
    if (s.ok()) {
      ++r.stored;
      if (stored) (*stored)[i] = 1;
    } else {
      if (r.refused++ == 0) r.first_error = s.error().message;
    }
  }
  return r;
}

Status Engine::Sync() {
  std::lock_guard lock(wal_mu_);
  if (::fdatasync(fd_) != 0) return Io("fdatasync");
  return {};
}

Status Engine::Checkpoint() {
  std::lock_guard one(checkpoint_mu_);
  uint64_t covered_up_to;
  {
    // Everything logged so far is applied once no append holds apply_mu_; the log continues in
    // a fresh segment that the checkpoint does not cover.
    std::unique_lock apply(apply_mu_);
    std::lock_guard lock(wal_mu_);
    GF_TRY(OpenSegment(segment_ + 1));
    covered_up_to = segment_;
  }
  fs::path dir(options_.dir);
  fs::path tmp = dir / "checkpoint.tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Io("cannot write " + tmp.string());
  auto write_all = [&](const std::string& s) {
    return ::write(fd, s.data(), s.size()) == static_cast<ssize_t>(s.size());
  };
  // Frames go out in writes of a few MiB: one write per series (280,000 at 10,000 GPUs) made
  // the snapshot taken at shutdown take seconds.
  constexpr size_t kWriteBytes = 4 << 20;
  std::string out;
  out.reserve(kWriteBytes + (64 << 10));
  Encoder h;
  h.U64(covered_up_to);
  AppendFrame(out, kCheckpointHeader, h.out());
  bool ok = true;
  size_t n = db_.Stats().series;
  for (SeriesId id = 0; ok && id < n; ++id) {
    Encoder e;
    e.U32(id);
    e.Str(db_.Key(id));
    db_.SaveSeries(id, e);
    AppendFrame(out, kCheckpointSeriesV2, e.out());
    if (out.size() >= kWriteBytes) {
      ok = write_all(out);
      out.clear();
    }
  }
  ok = ok && write_all(out) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok) return Io("checkpoint write");
  fs::path final_path =
      dir /
      ("checkpoint-" + std::to_string(1'000'000'000'000ULL + covered_up_to).substr(1) + ".bin");
  std::error_code ec;
  fs::rename(tmp, final_path, ec);
  if (ec) return MakeError(ErrorCode::kUnavailable, "checkpoint rename: " + ec.message());
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  // Now the older checkpoints and the segments this one covers can go.
  uint64_t removed = 0;
  // Filesystem calls take error codes: a failure here must not take the controller down.
  for (const auto& e : fs::directory_iterator(dir / "wal", ec)) {
    if (e.path().extension() == ".log" && NumberOf(e.path(), "") < covered_up_to) {
      removed += fs::file_size(e.path(), ec);
      fs::remove(e.path(), ec);
    }
  }
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind("checkpoint-", 0) == 0 && e.path() != final_path) fs::remove(e.path(), ec);
  }
  std::lock_guard lock(wal_mu_);
  older_segments_bytes_ = older_segments_bytes_ > removed ? older_segments_bytes_ - removed : 0;
  return {};
}

uint64_t Engine::wal_bytes() const {
  std::lock_guard lock(wal_mu_);
  return older_segments_bytes_ + segment_size_;
}

}  // namespace gpufleet::tsdb
