#include "tsdb/store.h"

namespace gpufleet::tsdb {

namespace {
// Timestamps are milliseconds since 1970 up to 2^53 (the year 285,000): within it a chunk's
// deltas and their differences cannot overflow. Outside, from an agent's clock or a damaged
// log, a point is refused.
constexpr int64_t kMaxTime = int64_t{1} << 53;
}  // namespace

SeriesId Tsdb::Intern(std::string_view key) {
  {
    std::shared_lock lock(registry_mu_);
    if (auto it = ids_.find(key); it != ids_.end()) return it->second;
  }
  std::unique_lock lock(registry_mu_);
  if (auto it = ids_.find(key); it != ids_.end()) return it->second;
  auto id = static_cast<SeriesId>(entries_.size());
  entries_.push_back(std::make_unique<Entry>(Entry{std::string(key), Series{}}));
  ids_.emplace(std::string_view(entries_.back()->key), id);
  return id;
}

std::optional<SeriesId> Tsdb::Find(std::string_view key) const {
  std::shared_lock lock(registry_mu_);
  auto it = ids_.find(key);
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

std::string Tsdb::Key(SeriesId id) const {
  Entry* e = Get(id);
  return e ? e->key : std::string();
}

Tsdb::Entry* Tsdb::Get(SeriesId id) const {
  std::shared_lock lock(registry_mu_);
  return id < entries_.size() ? entries_[id].get() : nullptr;
}

Status Tsdb::Append(SeriesId id, int64_t t, double v) {
  if (t < 0 || t > kMaxTime) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "timestamp " + std::to_string(t) + " ms is out of range (0 to 2^53)");
  }
  Entry* e = Get(id);
  if (!e) return MakeError(ErrorCode::kNotFound, "no series " + std::to_string(id));
  std::lock_guard lock(shards_[id % kShards]);
  return e->series.Append(t, v);
}

std::vector<Sample> Tsdb::Raw(SeriesId id, int64_t start, int64_t end) const {
  Entry* e = Get(id);
  if (!e) return {};
  std::lock_guard lock(shards_[id % kShards]);
  return e->series.Raw(start, end);
}

void Tsdb::RawInto(SeriesId id, int64_t start, int64_t end, std::vector<Sample>& out) const {
  Entry* e = Get(id);
  if (!e) return;
  std::lock_guard lock(shards_[id % kShards]);
  e->series.RawInto(start, end, out);
}

std::vector<Bucket> Tsdb::Rollup(SeriesId id, Resolution r, int64_t start, int64_t end) const {
  Entry* e = Get(id);
  if (!e) return {};
  std::lock_guard lock(shards_[id % kShards]);
  if (r == Resolution::kHour) return e->series.hour().Range(start, end);
  if (r == Resolution::kMinute) return e->series.minute().Range(start, end);
  std::vector<Bucket> out;
  for (const Sample& s : e->series.Raw(start, end)) out.push_back({s.t, s.v, s.v, s.v, 1});
  return out;
}

std::optional<Sample> Tsdb::Latest(SeriesId id) const {
  Entry* e = Get(id);
  if (!e) return std::nullopt;
  std::lock_guard lock(shards_[id % kShards]);
  return e->series.latest();
}

void Tsdb::SaveSeries(SeriesId id, Encoder& e) const {
  Entry* entry = Get(id);
  if (!entry) return;
  std::lock_guard lock(shards_[id % kShards]);
  entry->series.Save(e);
}

bool Tsdb::LoadSeries(SeriesId id, Decoder& d, bool legacy_rollups) {
  Entry* entry = Get(id);
  if (!entry) return false;
  std::lock_guard lock(shards_[id % kShards]);
  return entry->series.Load(d, legacy_rollups);
}

void Tsdb::Retain(int64_t now) {
  size_t n;
  {
    std::shared_lock lock(registry_mu_);
    n = entries_.size();
  }
  for (SeriesId id = 0; id < n; ++id) {
    Entry* e = Get(id);
    std::lock_guard lock(shards_[id % kShards]);
    e->series.Retain(now, retention_);
  }
}

TsdbStats Tsdb::Stats() const {
  TsdbStats s;
  std::shared_lock lock(registry_mu_);
  s.series = entries_.size();
  for (SeriesId id = 0; id < entries_.size(); ++id) {
    std::lock_guard shard(shards_[id % kShards]);
    const Series& series = entries_[id]->series;
    s.raw_samples += series.raw_samples();
    s.raw_bytes += series.raw_bytes();
    s.total_bytes += series.bytes();
  }
  return s;
}

}  // namespace gpufleet::tsdb
