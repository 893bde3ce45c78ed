#pragma once
// The telemetry component: ingests agents' sample batches into the durable time-series engine
// (series "<GPU UUID>/<field>") and answers the reads the API needs: the latest value of a
// field per GPU, and ranges at a resolution. Thread-safe.

#include <array>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/result.h"
#include "model/telemetry.h"
#include "proto/proto.h"
#include "tsdb/engine.h"

namespace gpufleet {

struct TelemetryOptions {
  std::string dir;  // <data-dir>/tsdb
  tsdb::Retention retention;
};

struct IngestResult {
  size_t stored = 0;
  size_t refused = 0;  // duplicates of stored points (a re-sent batch) or out of order
  size_t unknown_gpus = 0;
};

// What one Ingest stored, for whoever forwards it (remote write): the point's GPU (an index into
// the batch's UUIDs), field, time and value, in the batch's order. With them, each of the batch's
// GPUs' handle in the store (TelemetryStore::GpuHandle: small, dense, never reused for another
// GPU), so that a forwarder can keep per-GPU state in an array rather than look UUIDs up.
struct StoredPoint {
  uint32_t gpu = 0;
  Field field = Field::kGpuUtil;
  int64_t t = 0;
  double v = 0;
};
using IngestTap = std::function<void(const std::vector<std::string>& gpu_uuids,
                                     const std::vector<uint32_t>& gpu_handles,
                                     const std::vector<StoredPoint>& points)>;

class TelemetryStore {
 public:
  static Result<std::unique_ptr<TelemetryStore>> Open(TelemetryOptions options);

  // `gpu_uuids[i]` is the UUID of the node's GPU with index i. The batch's XID events set the
  // GPUs' kXidLast gauge (in the same append). Returns once the batch is in the write-ahead log
  // (safe to acknowledge).
  Result<IngestResult> Ingest(const std::vector<std::string>& gpu_uuids,
                              const proto::Samples& samples);

  // Called by each Ingest that stored something, with only the points it stored (not the
  // refused ones), before Ingest returns: an acknowledged batch has been handed on. Set it
  // before ingest starts.
  void SetTap(IngestTap tap) { tap_ = std::move(tap); }

  std::optional<tsdb::Sample> Latest(const std::string& gpu_uuid, Field field) const;
  // Fleet-wide reads (what alert rules and the health task make each cycle): resolve the GPUs
  // once, then read by handle. kNoGpu: a GPU not ingested since start-up (read by name).
  using GpuHandle = uint32_t;
  static constexpr GpuHandle kNoGpu = ~GpuHandle{0};
  void Handles(const std::vector<const std::string*>& uuids, std::vector<GpuHandle>& out) const;
  // Every field's latest sample for one GPU (what /metrics and heatmaps read).
  std::array<std::optional<tsdb::Sample>, kFieldCount> LatestAll(const std::string& gpu_uuid) const;
  std::array<std::optional<tsdb::Sample>, kFieldCount> LatestAll(const std::string& gpu_uuid,
                                                                 GpuHandle handle) const;
  // out[i] is the field's latest sample of uuids[i], whose handle is handles[i].
  void LatestMany(const std::vector<const std::string*>& uuids,
                  const std::vector<GpuHandle>& handles, Field field,
                  std::vector<std::optional<tsdb::Sample>>& out) const;
  // A field's raw samples in [start, end) into `out` (cleared first), by handle when the GPU
  // has one.
  void Raw(const std::string& gpu_uuid, GpuHandle handle, Field field, int64_t start, int64_t end,
           std::vector<tsdb::Sample>& out) const;
  std::vector<tsdb::Bucket> Range(const std::string& gpu_uuid, Field field,
                                  tsdb::Resolution resolution, int64_t start, int64_t end) const;
  std::vector<tsdb::Bucket> Range(const std::string& gpu_uuid, GpuHandle handle, Field field,
                                  tsdb::Resolution resolution, int64_t start, int64_t end) const;

  Status Checkpoint() { return engine_->Checkpoint(); }
  void Retain(int64_t now);
  // Recomputed at most every 5 s: it walks every series (280,000 for 10,000 GPUs).
  tsdb::TsdbStats Stats() const;
  uint64_t wal_bytes() const { return engine_->wal_bytes(); }
  // Why the telemetry log cannot be written now; empty when it can (tsdb::Engine::write_error).
  std::string write_error() const { return engine_->write_error(); }
  uint64_t samples_ingested() const;
  const tsdb::ReplayStats& replay() const { return engine_->replay(); }

 private:
  explicit TelemetryStore(std::unique_ptr<tsdb::Engine> engine) : engine_(std::move(engine)) {}
  using Ids = std::array<tsdb::SeriesId, kFieldCount>;
  static constexpr tsdb::SeriesId kNone = ~tsdb::SeriesId{0};
  static constexpr int64_t kNoTime = INT64_MIN;
  struct GpuSeries {
    Ids ids;                    // immutable once interned
    GpuHandle handle = kNoGpu;  // its index in gpus_
    // Each field's newest sample stored since start-up (t == kNoTime: none yet), so that
    // fleet-wide latest reads cost one lookup instead of a walk to each series.
    std::array<tsdb::Sample, kFieldCount> latest;
  };
  Result<GpuSeries*> IdsFor(const std::string& uuid);
  // The points of a batch that the engine stored (stored[i] != 0), to the tap.
  void HandOn(const std::vector<std::string>& gpu_uuids, const std::vector<GpuSeries*>& by_gpu,
              const proto::Samples& samples, const std::vector<char>& stored);
  // The series of a GPU's field: from its handle or ids_ when it was ingested since start-up,
  // else by name.
  std::optional<tsdb::SeriesId> SeriesOf(const std::string& gpu_uuid, Field field) const;
  std::optional<tsdb::SeriesId> SeriesOf(const std::string& gpu_uuid, GpuHandle handle,
                                         Field field) const;

  std::unique_ptr<tsdb::Engine> engine_;
  IngestTap tap_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, GpuHandle> ids_;  // guarded by mu_: index into gpus_
  std::deque<GpuSeries> gpus_;     // guarded by mu_; grows only, so addresses are stable
  uint64_t ingested_ = 0;          // guarded by mu_
  mutable tsdb::TsdbStats stats_;  // guarded by mu_, like stats_at_
  mutable std::chrono::steady_clock::time_point stats_at_;
};

}  // namespace gpufleet
