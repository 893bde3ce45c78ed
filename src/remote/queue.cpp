#include "remote/queue.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <optional>

#include "tsdb/codec.h"

namespace gpufleet::remote {

namespace fs = std::filesystem;

namespace {

constexpr size_t kHeader = 8;               // payload length, CRC-32 of the payload
constexpr uint32_t kMaxFrame = 256u << 20;  // a longer length is a torn or damaged frame

Status Io(const std::string& what, const std::string& path) {
  return MakeError(ErrorCode::kInternal,
                   "remote-write queue: " + what + " " + path + ": " + std::strerror(errno));
}

uint32_t Crc(std::string_view s) {
  return static_cast<uint32_t>(
      crc32(0, reinterpret_cast<const Bytef*>(s.data()), static_cast<uInt>(s.size())));
}

// Exactly `n` bytes at `offset` into `buf` (short reads and EINTR retried): false at the end of
// the file or on an error.
bool ReadAt(int fd, uint64_t offset, char* buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::pread(fd, buf + got, n - got, static_cast<off_t>(offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    got += static_cast<size_t>(r);
  }
  return true;
}

bool ReadAt(int fd, uint64_t offset, size_t n, std::string& out) {
  out.resize(n);
  return ReadAt(fd, offset, out.data(), n);
}

// The frames of a segment read in blocks: one pread brings many frames (a frame is a batch, a
// few KiB), not two a frame.
class BlockReader {
 public:
  BlockReader(int fd, uint64_t limit) : fd_(fd), limit_(limit) {}
  // The payload of the whole, intact frame at `offset`, valid until the next call; nothing when
  // there is none there.
  std::optional<std::string_view> FrameAt(uint64_t offset) {
    if (offset + kHeader > limit_ || !Have(offset, kHeader)) return std::nullopt;
    uint32_t len = 0, crc = 0;
    std::memcpy(&len, At(offset), 4);
    std::memcpy(&crc, At(offset) + 4, 4);
    if (len > kMaxFrame || offset + kHeader + len > limit_ || !Have(offset, kHeader + len))
      return std::nullopt;
    std::string_view payload(At(offset) + kHeader, len);
    if (Crc(payload) != crc) return std::nullopt;
    return payload;
  }

 private:
  static constexpr size_t kBlock = 1 << 20;
  const char* At(uint64_t offset) const { return buf_.data() + (offset - start_); }
  // [offset, offset + n) in the buffer, reading from `offset` when it is not.
  bool Have(uint64_t offset, size_t n) {
    if (offset >= start_ && offset + n <= start_ + buf_.size()) return true;
    size_t want = std::max<size_t>(n, std::min<uint64_t>(kBlock, limit_ - offset));
    start_ = offset;
    if (!ReadAt(fd_, offset, want, buf_)) {
      buf_.clear();
      return false;
    }
    return true;
  }
  int fd_;
  uint64_t limit_;
  uint64_t start_ = 0;
  std::string buf_;
};

// A payload's first sample number and sample count.
bool Peek(std::string_view payload, uint64_t& first_seq, uint64_t& count) {
  tsdb::Decoder d(payload);
  auto seq = d.Get<uint64_t>();
  auto n_uuids = d.Varint();
  if (!seq || !n_uuids) return false;
  for (uint64_t i = 0; i < *n_uuids; ++i) {
    if (!d.Str()) return false;
  }
  auto n = d.Varint();
  if (!n) return false;
  first_seq = *seq;
  count = *n;
  return true;
}

bool Decode(std::string_view payload, QueueRead& out) {
  tsdb::Decoder d(payload);
  auto seq = d.Get<uint64_t>();
  auto n_uuids = d.Varint();
  if (!seq || !n_uuids || *n_uuids > payload.size()) return false;
  auto base = static_cast<uint32_t>(out.uuids.size());
  for (uint64_t i = 0; i < *n_uuids; ++i) {
    auto s = d.Str();
    if (!s) return false;
    out.uuids.emplace_back(*s);
  }
  auto n = d.Varint();
  if (!n || *n > payload.size()) return false;
  int64_t t = 0;
  for (uint64_t i = 0; i < *n; ++i) {
    auto gpu = d.Varint();
    auto field = d.Get<uint8_t>();
    auto dt = d.Zigzag();
    auto kind = d.Get<uint8_t>();
    if (!gpu || !field || !dt || !kind || *gpu >= *n_uuids || *field >= kFieldCount) return false;
    t += *dt;
    double v = 0;
    if (*kind == 0) {
      auto iv = d.Zigzag();
      if (!iv) return false;
      v = static_cast<double>(*iv);
    } else {
      auto fv = d.Get<double>();
      if (!fv) return false;
      v = *fv;
    }
    out.samples.push_back(
        {base + static_cast<uint32_t>(*gpu), static_cast<Field>(*field), t, v, *seq + i});
  }
  return true;
}

}  // namespace

Result<std::unique_ptr<Queue>> Queue::Open(QueueOptions options) {
  std::error_code ec;
  fs::create_directories(options.dir, ec);
  if (ec) {
    return MakeError(ErrorCode::kInternal,
                     "remote-write queue: cannot create " + options.dir + ": " + ec.message());
  }
  std::unique_ptr<Queue> q(new Queue(std::move(options)));
  GF_TRY(q->Recover());
  return q;
}

Queue::~Queue() {
  if (fd_ >= 0) ::close(fd_);
}

std::string Queue::PathOf(uint64_t segment) const {
  char name[32];
  std::snprintf(name, sizeof name, "%016llu.seg", static_cast<unsigned long long>(segment));
  return (fs::path(options_.dir) / name).string();
}

// Segments in order; each one's first sample number from its first frame, the last one scanned
// to its last whole frame and cut there.
Status Queue::Recover() {
  std::vector<uint64_t> numbers;
  for (const auto& e : fs::directory_iterator(options_.dir)) {
    const auto name = e.path().filename().string();
    if (e.path().extension() != ".seg" || name.size() != 20) continue;
    numbers.push_back(std::strtoull(name.c_str(), nullptr, 10));
  }
  std::sort(numbers.begin(), numbers.end());
  uint64_t seq = 0;
  for (size_t i = 0; i < numbers.size(); ++i) {
    const std::string path = PathOf(numbers[i]);
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Io("cannot open", path);
    uint64_t size = static_cast<uint64_t>(::lseek(fd, 0, SEEK_END));
    Segment seg{numbers[i], size, seq};
    uint64_t first = 0, count = 0;
    BlockReader frames(fd, size);
    if (auto f = frames.FrameAt(0); f && Peek(*f, first, count)) seg.first_seq = first;
    if (i + 1 == numbers.size()) {
      // The last one: its whole frames, and the sequence they reach.
      uint64_t offset = 0;
      seq = seg.first_seq;
      while (auto f = frames.FrameAt(offset)) {
        if (!Peek(*f, first, count)) break;
        seq = first + count;
        offset += kHeader + f->size();
      }
      if (offset != size) {
        ::close(fd);
        if (::truncate(path.c_str(), static_cast<off_t>(offset)) != 0)
          return Io("cannot cut", path);
        seg.bytes = offset;
      }
    }
    ::close(fd);
    segments_.push_back(seg);
    bytes_ += seg.bytes;
    if (i + 1 < numbers.size()) seq = seg.first_seq;  // the next one's first frame says more
  }
  next_seq_ = seq;
  std::lock_guard lock(mu_);
  if (segments_.empty()) return StartSegment(1);
  const std::string path = PathOf(segments_.back().number);
  fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd_ < 0) return Io("cannot open", path);
  return {};
}

Status Queue::StartSegment(uint64_t number) {
  const std::string path = PathOf(number);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return Io("cannot create", path);
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
  segments_.push_back({number, 0, next_seq_});
  return {};
}

Status Queue::Append(const std::vector<std::string>& uuids,
                     const std::vector<StoredPoint>& points) {
  if (points.empty()) return {};
  std::lock_guard lock(mu_);
  // The frame in one reused buffer: its header's place first, filled in once the payload is.
  tsdb::Encoder& e = frame_;
  std::string& frame = e.out();
  frame.assign(kHeader, '\0');
  e.U64(next_seq_);
  e.Varint(uuids.size());
  for (const auto& u : uuids) e.Str(u);
  e.Varint(points.size());
  int64_t t = 0;
  for (const auto& p : points) {
    e.Varint(p.gpu);
    e.U8(static_cast<uint8_t>(p.field));
    e.Zigzag(static_cast<int64_t>(static_cast<uint64_t>(p.t) - static_cast<uint64_t>(t)));
    t = p.t;
    if (std::isfinite(p.v) && p.v == static_cast<double>(static_cast<int64_t>(p.v)) &&
        std::abs(p.v) < 9e15) {
      e.U8(0);
      e.Zigzag(static_cast<int64_t>(p.v));
    } else {
      e.U8(1);
      e.F64(p.v);
    }
  }
  const std::string_view payload(frame.data() + kHeader, frame.size() - kHeader);
  auto len = static_cast<uint32_t>(payload.size());
  uint32_t crc = Crc(payload);
  std::memcpy(frame.data(), &len, 4);
  std::memcpy(frame.data() + 4, &crc, 4);
  if (segments_.back().bytes > 0 &&
      segments_.back().bytes + frame.size() > options_.segment_bytes) {
    GF_TRY(StartSegment(segments_.back().number + 1));
  }
  size_t done = 0;
  while (done < frame.size()) {
    ssize_t w = ::write(fd_, frame.data() + done, frame.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      // Cut back to the last whole frame so that the next append follows one.
      Status s = Io("cannot write", PathOf(segments_.back().number));
      if (::ftruncate(fd_, static_cast<off_t>(segments_.back().bytes)) != 0) {
        (void)StartSegment(segments_.back().number + 1);
      }
      return s;
    }
    done += static_cast<size_t>(w);
  }
  segments_.back().bytes += frame.size();
  bytes_ += frame.size();
  next_seq_ += points.size();
  // The window: the oldest segments go while the rest are over it (never the one written).
  while (segments_.size() > 1 && bytes_ > options_.window_bytes) {
    std::error_code ec;
    fs::remove(PathOf(segments_.front().number), ec);
    bytes_ -= segments_.front().bytes;
    segments_.pop_front();
  }
  return {};
}

Position Queue::End() const {
  std::lock_guard lock(mu_);
  return {segments_.back().number, segments_.back().bytes, next_seq_};
}

uint64_t Queue::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

Result<QueueRead> Queue::Read(Position at, size_t max_samples, uint64_t until) const {
  QueueRead out;
  GF_TRY(Read(at, max_samples, until, out));
  return out;
}

Status Queue::Read(Position at, size_t max_samples, uint64_t until, QueueRead& out) const {
  std::deque<Segment> segments;
  uint64_t end_seq = 0;
  {
    std::lock_guard lock(mu_);
    segments = segments_;
    end_seq = next_seq_;
  }
  out.uuids.clear();
  out.samples.clear();  // its capacity stays: a receiver reads into the same one each time
  out.lost = 0;
  const Segment& oldest = segments.front();
  if (at.seq > end_seq || at.segment > segments.back().number) {
    // Past the end: the queue was deleted or replaced under this cursor.
    out.end = {segments.back().number, segments.back().bytes, end_seq};
    return {};
  }
  if (at.segment < oldest.number || at.seq < oldest.first_seq) {
    out.lost = oldest.first_seq > at.seq ? oldest.first_seq - at.seq : 0;
    at = {oldest.number, 0, oldest.first_seq};
  }
  auto it = std::find_if(segments.begin(), segments.end(),
                         [&](const Segment& s) { return s.number == at.segment; });
  auto more = [&] { return out.samples.size() < max_samples && at.seq < until; };
  while (it != segments.end() && more()) {
    const std::string path = PathOf(it->number);
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    bool next = fd < 0;  // deleted by the window since: go on with the next one
    BlockReader frames(fd, it->bytes);
    while (!next && more()) {
      auto payload = frames.FrameAt(at.offset);
      if (!payload) {
        next = true;
        break;
      }
      uint64_t first = 0, count = 0;
      if (!Peek(*payload, first, count) || !Decode(*payload, out)) {
        next = true;  // damaged: the rest of this segment cannot be read
        break;
      }
      at.offset += kHeader + payload->size();
      at.seq = first + count;
    }
    if (fd >= 0) ::close(fd);
    if (!next) break;
    auto following = std::next(it);
    if (following == segments.end()) break;  // the end: `at` stays where writing goes on
    if (following->first_seq > at.seq) out.lost += following->first_seq - at.seq;
    at = {following->number, 0, following->first_seq};
    it = following;
  }
  out.end = at;
  return {};
}

}  // namespace gpufleet::remote
