#pragma once
// The remote-write queue: what the telemetry store stored, in order, in an append-only log of
// segment files under <data-dir>/remote-write/queue, which every receiver reads from its own
// cursor. It is fed by the telemetry store's tap in the same Ingest that logs the points, so a
// batch an agent has been told is stored is in the queue too. The queue keeps at most
// `window_bytes` of segments: the oldest is deleted once the rest pass it, and a receiver whose
// cursor was in it loses those samples (counted). Every sample has a sequence number, so a
// cursor also says how many samples are pending. A torn frame at the end (a killed process) is
// cut off at open. Thread-safe: one writer at a time, any number of readers.

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/result.h"
#include "telemetry/telemetry.h"
#include "tsdb/codec.h"

namespace gpufleet::remote {

struct Position {
  uint64_t segment = 0;
  uint64_t offset = 0;
  uint64_t seq = 0;  // the number of the next sample
  bool operator==(const Position&) const = default;
};

// What one read returns: the samples of whole frames, each with its GPU's UUID (an index into
// `uuids`) and its sequence number.
struct QueuedSample {
  uint32_t uuid = 0;
  Field field = Field::kGpuUtil;
  int64_t t = 0;
  double v = 0;
  uint64_t seq = 0;
};
struct QueueRead {
  std::vector<std::string> uuids;
  std::vector<QueuedSample> samples;
  Position end;       // where the next read starts
  uint64_t lost = 0;  // samples the window deleted before this cursor read them
};

struct QueueOptions {
  std::string dir;
  uint64_t window_bytes = 1ull << 30;
  uint64_t segment_bytes = 64ull << 20;
};

class Queue {
 public:
  static Result<std::unique_ptr<Queue>> Open(QueueOptions options);
  ~Queue();

  // One frame: the points, each naming its GPU by an index into `uuids`.
  Status Append(const std::vector<std::string>& uuids, const std::vector<StoredPoint>& points);
  Position End() const;
  // Whole frames from `at` until at least `max_samples` are read or the end is reached. A
  // position before the oldest segment moves to it (the samples in between are `lost`); one
  // past the end (a queue deleted under its cursor) moves to the end.
  // With `until`, it stops at that sample number (a read done before, done again).
  Result<QueueRead> Read(Position at, size_t max_samples, uint64_t until = UINT64_MAX) const;
  // The same into `out`, whose buffers are reused.
  Status Read(Position at, size_t max_samples, uint64_t until, QueueRead& out) const;
  uint64_t bytes() const;

 private:
  explicit Queue(QueueOptions options) : options_(std::move(options)) {}
  Status Recover();
  Status StartSegment(uint64_t number);  // caller holds mu_
  std::string PathOf(uint64_t segment) const;

  struct Segment {
    uint64_t number = 0;
    uint64_t bytes = 0;
    uint64_t first_seq = 0;  // its first sample's number
  };

  QueueOptions options_;
  mutable std::mutex mu_;
  int fd_ = -1;                   // guarded by mu_: the last segment, being written
  std::deque<Segment> segments_;  // guarded by mu_: oldest first; never empty after Open
  uint64_t next_seq_ = 0;         // guarded by mu_
  uint64_t bytes_ = 0;            // guarded by mu_: all segments together
  tsdb::Encoder frame_;           // guarded by mu_: the frame being appended (its buffer reused)
};

}  // namespace gpufleet::remote
