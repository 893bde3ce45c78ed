#pragma once
// Engine: the durable time-series store. Every interned series and every batch of points is
// written to a write-ahead log before it is applied and acknowledged; Checkpoint() snapshots all
// series (compressed chunks and encoder state) and drops the log it covers. Open() loads the
// newest checkpoint and replays the log after it, skipping a torn frame to the next good one and
// cutting a torn tail. A write that fails half way is cut back to the last whole frame (or the
// log goes on in a new segment) before anything else is appended. Replaying a point
// the series already has is skipped (timestamps only move forward), so nothing is stored twice.
//
// Durability: a point is in the log (the kernel's page cache) when Append returns, so a killed
// process loses nothing acknowledged; with `fsync_each_append` it also survives power loss.
// Thread-safe.

#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "common/result.h"
#include "tsdb/store.h"

namespace gpufleet::tsdb {

struct EngineOptions {
  std::string dir;  // created if missing; holds wal/ and checkpoint-*.bin
  Retention retention;
  bool fsync_each_append = false;
  size_t segment_bytes = 64 << 20;
};

struct Point {
  SeriesId id;
  int64_t t;
  double v;
};

struct BatchResult {
  size_t stored = 0;
  size_t refused = 0;       // out of order or already stored
  std::string first_error;  // why the first refused point was refused
};

struct ReplayStats {
  size_t checkpoint_series = 0;
  size_t wal_records = 0;
  size_t wal_points = 0;
  size_t torn_bytes = 0;     // cut from the end of a segment (an interrupted write)
  size_t skipped_bytes = 0;  // torn frames skipped between good ones
};

class Engine {
 public:
  static Result<std::unique_ptr<Engine>> Open(EngineOptions options);
  ~Engine();

  Result<SeriesId> Intern(std::string_view key);
  // Many at once: the new ones cost one log write between them.
  Result<std::vector<SeriesId>> InternAll(const std::vector<std::string_view>& keys);
  // Logs the batch, then applies it. Fails only if the log cannot be written (nothing applied).
  // `stored`, when given, gets one entry per point: 1 when it was stored, 0 when refused.
  Result<BatchResult> Append(const std::vector<Point>& points, std::vector<char>* stored = nullptr);
  Status Checkpoint();
  Status Sync();

  const Tsdb& db() const { return db_; }
  // Applies retention (not logged: a restart restores what the last checkpoint had, and the
  // next pass drops it again).
  void Retain(int64_t now) { db_.Retain(now); }
  uint64_t wal_bytes() const;
  const ReplayStats& replay() const { return replay_; }
  // Why the last write to the log failed, until a write succeeds again; empty when it can
  // write. What /healthz reports.
  std::string write_error() const;

 private:
  explicit Engine(EngineOptions options);
  Status Replay();
  Result<uint64_t> LoadCheckpoint();
  Status OpenSegment(uint64_t number);
  Status WriteRecord(uint8_t type, const std::string& payload);  // caller holds wal_mu_
  Status WriteFrames(const std::string& frames);                 // caller holds wal_mu_
  Status Failing(Status s);  // records a failed write for write_error()

  EngineOptions options_;
  Tsdb db_;
  ReplayStats replay_;
  std::shared_mutex apply_mu_;  // appends hold it shared; checkpoint's log rotation exclusive
  mutable std::mutex wal_mu_;
  int fd_ = -1;                        // guarded by wal_mu_
  uint64_t segment_ = 0;               // guarded by wal_mu_
  uint64_t segment_size_ = 0;          // guarded by wal_mu_
  uint64_t older_segments_bytes_ = 0;  // guarded by wal_mu_
  // Series records interned in memory whose write failed; written first by the next write.
  std::string unlogged_series_;  // guarded by wal_mu_
  bool cut_failed_ = false;      // a torn frame could not be cut off; guarded by wal_mu_
  mutable std::mutex health_mu_;
  std::string write_error_;   // guarded by health_mu_
  std::mutex checkpoint_mu_;  // one checkpoint at a time
};

}  // namespace gpufleet::tsdb
