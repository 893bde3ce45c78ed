#include "telemetry/telemetry.h"

#include <algorithm>

namespace gpufleet {

Result<std::unique_ptr<TelemetryStore>> TelemetryStore::Open(TelemetryOptions options) {
  tsdb::EngineOptions eo;
  eo.dir = options.dir;
  eo.retention = options.retention;
  auto engine = tsdb::Engine::Open(eo);
  if (!engine.ok()) return engine.error();
  return std::unique_ptr<TelemetryStore>(new TelemetryStore(std::move(engine.value())));
}

Result<const TelemetryStore::Ids*> TelemetryStore::IdsFor(const std::string& uuid) {
  std::lock_guard lock(mu_);
  auto [it, fresh] = ids_.try_emplace(uuid);
  if (fresh) {
    std::vector<std::string> keys;
    for (const auto& f : Fields()) keys.push_back(uuid + "/" + std::string(f.name));
    auto ids = engine_->InternAll(std::vector<std::string_view>(keys.begin(), keys.end()));
    if (!ids.ok()) {
      ids_.erase(it);
      return ids.error();
    }
    std::copy(ids->begin(), ids->end(), it->second.begin());
  }
  return &it->second;  // unordered_map nodes are stable
}

Result<IngestResult> TelemetryStore::Ingest(const std::vector<std::string>& gpu_uuids,
                                            const proto::Samples& samples) {
  IngestResult result;
  std::vector<tsdb::Point> points;
  points.reserve(samples.rows.size() * kFieldCount);
  for (const auto& row : samples.rows) {
    if (row.gpu < 0 || row.gpu >= static_cast<int>(gpu_uuids.size())) {
      ++result.unknown_gpus;
      continue;
    }
    const Ids* ids = nullptr;
    GF_TRY_ASSIGN(ids, IdsFor(gpu_uuids[row.gpu]));
    for (size_t f = 0; f < kFieldCount; ++f) {
      if (row.present & (1u << f)) points.push_back({(*ids)[f], row.time_ms, row.values[f]});
    }
  }
  if (points.empty()) return result;
  auto batch = engine_->Append(points);
  if (!batch.ok()) return batch.error();
  result.stored = batch->stored;
  result.refused = batch->refused;
  std::lock_guard lock(mu_);
  ingested_ += batch->stored;
  return result;
}

std::optional<tsdb::SeriesId> TelemetryStore::SeriesOf(const std::string& gpu_uuid,
                                                       Field field) const {
  {
    std::lock_guard lock(mu_);
    auto it = ids_.find(gpu_uuid);
    if (it != ids_.end() && it->second[static_cast<size_t>(field)] != kNone) {
      return it->second[static_cast<size_t>(field)];
    }
  }
  // Not ingested since start-up: the series may still be in the checkpoint or the log.
  return engine_->db().Find(gpu_uuid + "/" + std::string(Info(field).name));
}

std::optional<tsdb::Sample> TelemetryStore::Latest(const std::string& gpu_uuid, Field field) const {
  auto id = SeriesOf(gpu_uuid, field);
  if (!id) return std::nullopt;
  return engine_->db().Latest(*id);
}

std::array<std::optional<tsdb::Sample>, kFieldCount> TelemetryStore::LatestAll(
    const std::string& gpu_uuid) const {
  std::array<std::optional<tsdb::Sample>, kFieldCount> out;
  Ids ids;
  bool known = false;
  {
    std::lock_guard lock(mu_);
    auto it = ids_.find(gpu_uuid);
    if (it != ids_.end()) {
      ids = it->second;
      known = true;
    }
  }
  if (!known) {
    // Not ingested since start-up (Latest looks in the checkpoint and log); outside mu_, which
    // Latest takes.
    for (size_t f = 0; f < kFieldCount; ++f) out[f] = Latest(gpu_uuid, Fields()[f].field);
    return out;
  }
  for (size_t f = 0; f < kFieldCount; ++f) out[f] = engine_->db().Latest(ids[f]);
  return out;
}

std::vector<tsdb::Bucket> TelemetryStore::Range(const std::string& gpu_uuid, Field field,
                                                tsdb::Resolution resolution, int64_t start,
                                                int64_t end) const {
  auto id = SeriesOf(gpu_uuid, field);
  if (!id) return {};
  return engine_->db().Rollup(*id, resolution, start, end);
}

void TelemetryStore::Retain(int64_t now) { engine_->Retain(now); }

tsdb::TsdbStats TelemetryStore::Stats() const {
  auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(mu_);
    if (stats_at_.time_since_epoch().count() != 0 && now - stats_at_ < std::chrono::seconds(5)) {
      return stats_;
    }
  }
  tsdb::TsdbStats fresh = engine_->db().Stats();
  std::lock_guard lock(mu_);
  stats_ = fresh;
  stats_at_ = now;
  return fresh;
}

uint64_t TelemetryStore::samples_ingested() const {
  std::lock_guard lock(mu_);
  return ingested_;
}

}  // namespace gpufleet
