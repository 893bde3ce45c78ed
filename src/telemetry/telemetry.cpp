#include "telemetry/telemetry.h"

#include <algorithm>

namespace gpufleet {

namespace {

// Under the store's lock: `handle` when it names an interned GPU, else the GPU's by its UUID
// (kNoGpu: not ingested since start-up). The reads by name pass kNoGpu, so that they take the
// lock once.
TelemetryStore::GpuHandle Resolve(
    const std::unordered_map<std::string, TelemetryStore::GpuHandle>& ids, size_t interned,
    const std::string& uuid, TelemetryStore::GpuHandle handle) {
  if (handle != TelemetryStore::kNoGpu && handle < interned) return handle;
  auto it = ids.find(uuid);
  return it == ids.end() ? TelemetryStore::kNoGpu : it->second;
}

}  // namespace

Result<std::unique_ptr<TelemetryStore>> TelemetryStore::Open(TelemetryOptions options) {
  tsdb::EngineOptions eo;
  eo.dir = options.dir;
  eo.retention = options.retention;
  auto engine = tsdb::Engine::Open(eo);
  if (!engine.ok()) return engine.error();
  return std::unique_ptr<TelemetryStore>(new TelemetryStore(std::move(engine.value())));
}

Result<TelemetryStore::GpuSeries*> TelemetryStore::IdsFor(const std::string& uuid) {
  std::lock_guard lock(mu_);
  auto it = ids_.find(uuid);
  if (it != ids_.end()) return &gpus_[it->second];
  std::vector<std::string> keys;
  for (const auto& f : Fields()) keys.push_back(uuid + "/" + std::string(f.name));
  auto ids = engine_->InternAll(std::vector<std::string_view>(keys.begin(), keys.end()));
  if (!ids.ok()) return ids.error();
  GpuSeries& gpu = gpus_.emplace_back();
  std::copy(ids->begin(), ids->end(), gpu.ids.begin());
  for (auto& s : gpu.latest) s = {kNoTime, 0};
  gpu.handle = static_cast<GpuHandle>(gpus_.size() - 1);
  ids_.emplace(uuid, gpu.handle);
  return &gpu;
}

Result<IngestResult> TelemetryStore::Ingest(const std::vector<std::string>& gpu_uuids,
                                            const proto::Samples& samples) {
  IngestResult result;
  std::vector<tsdb::Point> points;
  points.reserve(samples.rows.size() * kFieldCount);
  // Each GPU the batch names is resolved once, the known ones under one lock (at 100,000 GPUs a
  // lookup and a lock per row were a sixth of the controller's CPU); a GPU new since start-up
  // is interned after.
  std::vector<GpuSeries*> by_gpu(gpu_uuids.size(), nullptr);
  std::vector<char> named(gpu_uuids.size(), 0);
  auto in_range = [&](int gpu) { return gpu >= 0 && gpu < static_cast<int>(gpu_uuids.size()); };
  for (const auto& row : samples.rows) {
    if (in_range(row.gpu)) named[row.gpu] = 1;
  }
  for (const auto& e : samples.events) {
    if (e.kind == "xid" && in_range(e.gpu)) named[e.gpu] = 1;
  }
  {
    std::lock_guard lock(mu_);
    for (size_t g = 0; g < gpu_uuids.size(); ++g) {
      if (!named[g]) continue;
      auto it = ids_.find(gpu_uuids[g]);
      if (it != ids_.end()) by_gpu[g] = &gpus_[it->second];
    }
  }
  for (size_t g = 0; g < gpu_uuids.size(); ++g) {
    if (named[g] && !by_gpu[g]) GF_TRY_ASSIGN(by_gpu[g], IdsFor(gpu_uuids[g]));
  }
  std::vector<GpuSeries*> row_gpus(samples.rows.size(), nullptr);
  for (size_t r = 0; r < samples.rows.size(); ++r) {
    const auto& row = samples.rows[r];
    if (!in_range(row.gpu)) {
      ++result.unknown_gpus;
      continue;
    }
    row_gpus[r] = by_gpu[row.gpu];
    const Ids& ids = row_gpus[r]->ids;
    for (size_t f = 0; f < kFieldCount; ++f) {
      if (row.present & (1u << f)) points.push_back({ids[f], row.time_ms, row.values[f]});
    }
  }
  // The batch's XID events set each GPU's "last XID" gauge, in the same append as its rows.
  const size_t xid = static_cast<size_t>(Field::kXidLast);
  std::vector<std::pair<GpuSeries*, tsdb::Sample>> xids;
  for (const auto& e : samples.events) {
    if (e.kind != "xid" || !in_range(e.gpu)) continue;
    GpuSeries* gpu = by_gpu[e.gpu];
    double value = static_cast<double>(e.value);
    points.push_back({gpu->ids[xid], e.time_ms, value});
    xids.push_back({gpu, {e.time_ms, value}});
  }
  if (points.empty()) return result;
  std::vector<char> stored;
  auto batch = engine_->Append(points, tap_ ? &stored : nullptr);
  if (!batch.ok()) return batch.error();
  if (tap_ && batch->stored > 0) HandOn(gpu_uuids, by_gpu, samples, stored);
  result.stored = batch->stored;
  result.refused = batch->refused;
  std::lock_guard lock(mu_);
  ingested_ += batch->stored;
  // Refused points are older than (or the same as) what the series has, so the newest time
  // wins. Entries keep their addresses: ids_ never erases a GPU once interned.
  for (size_t r = 0; r < samples.rows.size(); ++r) {
    if (!row_gpus[r]) continue;
    const auto& row = samples.rows[r];
    for (size_t f = 0; f < kFieldCount; ++f) {
      auto& latest = row_gpus[r]->latest[f];
      if ((row.present & (1u << f)) && row.time_ms > latest.t)
        latest = {row.time_ms, row.values[f]};
    }
  }
  for (const auto& [gpu, sample] : xids) {
    if (sample.t > gpu->latest[xid].t) gpu->latest[xid] = sample;
  }
  return result;
}

// The points of Ingest's append, in its order (rows, each one's fields, then XID events), that
// the engine stored.
void TelemetryStore::HandOn(const std::vector<std::string>& gpu_uuids,
                            const std::vector<GpuSeries*>& by_gpu, const proto::Samples& samples,
                            const std::vector<char>& stored) {
  std::vector<StoredPoint> out;
  out.reserve(stored.size());
  size_t i = 0;
  auto in_range = [&](int gpu) { return gpu >= 0 && gpu < static_cast<int>(gpu_uuids.size()); };
  for (const auto& row : samples.rows) {
    if (!in_range(row.gpu)) continue;
    for (size_t f = 0; f < kFieldCount; ++f) {
      if (!(row.present & (1u << f))) continue;
      if (stored[i++]) {
        out.push_back(
            {static_cast<uint32_t>(row.gpu), static_cast<Field>(f), row.time_ms, row.values[f]});
      }
    }
  }
  for (const auto& e : samples.events) {
    if (e.kind != "xid" || !in_range(e.gpu)) continue;
    if (stored[i++]) {
      out.push_back(
          {static_cast<uint32_t>(e.gpu), Field::kXidLast, e.time_ms, static_cast<double>(e.value)});
    }
  }
  std::vector<uint32_t> handles(gpu_uuids.size(), kNoGpu);
  for (size_t g = 0; g < by_gpu.size(); ++g) {
    if (by_gpu[g]) handles[g] = by_gpu[g]->handle;
  }
  tap_(gpu_uuids, handles, out);
}

std::optional<tsdb::SeriesId> TelemetryStore::SeriesOf(const std::string& gpu_uuid,
                                                       Field field) const {
  return SeriesOf(gpu_uuid, kNoGpu, field);
}

std::optional<tsdb::SeriesId> TelemetryStore::SeriesOf(const std::string& gpu_uuid,
                                                       GpuHandle handle, Field field) const {
  {
    std::lock_guard lock(mu_);
    handle = Resolve(ids_, gpus_.size(), gpu_uuid, handle);
    if (handle != kNoGpu && gpus_[handle].ids[static_cast<size_t>(field)] != kNone) {
      return gpus_[handle].ids[static_cast<size_t>(field)];
    }
  }
  // Not ingested since start-up: the series may still be in the checkpoint or the log.
  return engine_->db().Find(gpu_uuid + "/" + std::string(Info(field).name));
}

std::optional<tsdb::Sample> TelemetryStore::Latest(const std::string& gpu_uuid, Field field) const {
  {
    std::lock_guard lock(mu_);
    auto it = ids_.find(gpu_uuid);
    if (it != ids_.end()) {
      const tsdb::Sample& s = gpus_[it->second].latest[static_cast<size_t>(field)];
      if (s.t != kNoTime) return s;
    }
  }
  auto id = SeriesOf(gpu_uuid, field);
  if (!id) return std::nullopt;
  return engine_->db().Latest(*id);
}

std::array<std::optional<tsdb::Sample>, kFieldCount> TelemetryStore::LatestAll(
    const std::string& gpu_uuid) const {
  return LatestAll(gpu_uuid, kNoGpu);
}

std::array<std::optional<tsdb::Sample>, kFieldCount> TelemetryStore::LatestAll(
    const std::string& gpu_uuid, GpuHandle handle) const {
  std::array<std::optional<tsdb::Sample>, kFieldCount> out;
  Ids ids;
  std::array<tsdb::Sample, kFieldCount> latest;
  bool known = false;
  {
    std::lock_guard lock(mu_);
    handle = Resolve(ids_, gpus_.size(), gpu_uuid, handle);
    if (handle != kNoGpu) {
      ids = gpus_[handle].ids;
      latest = gpus_[handle].latest;
      known = true;
    }
  }
  if (!known) {
    // Not ingested since start-up (Latest looks in the checkpoint and log); outside mu_, which
    // Latest takes.
    for (size_t f = 0; f < kFieldCount; ++f) out[f] = Latest(gpu_uuid, Fields()[f].field);
    return out;
  }
  for (size_t f = 0; f < kFieldCount; ++f) {
    out[f] = latest[f].t != kNoTime ? std::optional(latest[f]) : engine_->db().Latest(ids[f]);
  }
  return out;
}

void TelemetryStore::Handles(const std::vector<const std::string*>& uuids,
                             std::vector<GpuHandle>& out) const {
  out.assign(uuids.size(), kNoGpu);
  std::lock_guard lock(mu_);
  for (size_t i = 0; i < uuids.size(); ++i) {
    auto it = ids_.find(*uuids[i]);
    if (it != ids_.end()) out[i] = it->second;
  }
}

void TelemetryStore::LatestMany(const std::vector<const std::string*>& uuids,
                                const std::vector<GpuHandle>& handles, Field field,
                                std::vector<std::optional<tsdb::Sample>>& out) const {
  auto f = static_cast<size_t>(field);
  std::vector<tsdb::SeriesId> ids(uuids.size(), kNone);
  std::vector<char> cached(uuids.size(), 0);
  out.assign(uuids.size(), std::nullopt);
  {
    std::lock_guard lock(mu_);
    for (size_t i = 0; i < uuids.size(); ++i) {
      if (handles[i] == kNoGpu || handles[i] >= gpus_.size()) continue;
      const GpuSeries& gpu = gpus_[handles[i]];
      if (gpu.latest[f].t != kNoTime) {
        out[i] = gpu.latest[f];
        cached[i] = 1;
      } else {
        ids[i] = gpu.ids[f];
      }
    }
  }
  for (size_t i = 0; i < uuids.size(); ++i) {
    if (cached[i]) continue;
    std::optional<tsdb::SeriesId> id;
    if (ids[i] != kNone) {
      id = ids[i];
    } else {  // not ingested since start-up: look in what the checkpoint and log restored
      id = engine_->db().Find(*uuids[i] + "/" + std::string(Info(field).name));
    }
    if (id) out[i] = engine_->db().Latest(*id);
  }
}

void TelemetryStore::Raw(const std::string& gpu_uuid, GpuHandle handle, Field field, int64_t start,
                         int64_t end, std::vector<tsdb::Sample>& out) const {
  out.clear();
  auto id = SeriesOf(gpu_uuid, handle, field);
  if (id) engine_->db().RawInto(*id, start, end, out);
}

std::vector<tsdb::Bucket> TelemetryStore::Range(const std::string& gpu_uuid, Field field,
                                                tsdb::Resolution resolution, int64_t start,
                                                int64_t end) const {
  return Range(gpu_uuid, kNoGpu, field, resolution, start, end);
}

std::vector<tsdb::Bucket> TelemetryStore::Range(const std::string& gpu_uuid, GpuHandle handle,
                                                Field field, tsdb::Resolution resolution,
                                                int64_t start, int64_t end) const {
  auto id = SeriesOf(gpu_uuid, handle, field);
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
