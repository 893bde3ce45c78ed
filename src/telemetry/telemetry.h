#pragma once
// The telemetry component: ingests agents' sample batches into the durable time-series engine
// (series "<GPU UUID>/<field>") and answers the reads the API needs: the latest value of a
// field per GPU, and ranges at a resolution. Thread-safe.

#include <array>
#include <chrono>
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

class TelemetryStore {
 public:
  static Result<std::unique_ptr<TelemetryStore>> Open(TelemetryOptions options);

  // `gpu_uuids[i]` is the UUID of the node's GPU with index i. Returns once the batch is in the
  // write-ahead log (safe to acknowledge).
  Result<IngestResult> Ingest(const std::vector<std::string>& gpu_uuids,
                              const proto::Samples& samples);

  std::optional<tsdb::Sample> Latest(const std::string& gpu_uuid, Field field) const;
  // Every field's latest sample for one GPU (what /metrics and heatmaps read).
  std::array<std::optional<tsdb::Sample>, kFieldCount> LatestAll(const std::string& gpu_uuid) const;
  std::vector<tsdb::Bucket> Range(const std::string& gpu_uuid, Field field,
                                  tsdb::Resolution resolution, int64_t start, int64_t end) const;

  Status Checkpoint() { return engine_->Checkpoint(); }
  void Retain(int64_t now);
  // Recomputed at most every 5 s: it walks every series (280,000 for 10,000 GPUs).
  tsdb::TsdbStats Stats() const;
  uint64_t wal_bytes() const { return engine_->wal_bytes(); }
  uint64_t samples_ingested() const;
  const tsdb::ReplayStats& replay() const { return engine_->replay(); }

 private:
  explicit TelemetryStore(std::unique_ptr<tsdb::Engine> engine) : engine_(std::move(engine)) {}
  using Ids = std::array<tsdb::SeriesId, kFieldCount>;
  static constexpr tsdb::SeriesId kNone = ~tsdb::SeriesId{0};
  Result<const Ids*> IdsFor(const std::string& uuid);
  // The series of a GPU's field: from ids_ when it was ingested since start-up, else by name.
  std::optional<tsdb::SeriesId> SeriesOf(const std::string& gpu_uuid, Field field) const;

  std::unique_ptr<tsdb::Engine> engine_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Ids> ids_;  // guarded by mu_; kNone until first interned
  uint64_t ingested_ = 0;                     // guarded by mu_
  mutable tsdb::TsdbStats stats_;             // guarded by mu_, like stats_at_
  mutable std::chrono::steady_clock::time_point stats_at_;
};

}  // namespace gpufleet
