#include "tsdb/store.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <new>

namespace gpufleet::tsdb {

namespace {
// Timestamps are milliseconds since 1970 up to 2^53 (the year 285,000): within it a chunk's
// deltas and their differences cannot overflow. Outside, from an agent's clock or a damaged
// log, a point is refused.
constexpr int64_t kMaxTime = int64_t{1} << 53;
}  // namespace

uint32_t Tsdb::Hash(std::string_view key) {
  uint64_t h = std::hash<std::string_view>{}(key);
  return static_cast<uint32_t>(h ^ (h >> 32));
}

SeriesId Tsdb::KeyIndex::Find(std::string_view key, uint32_t hash, const Tsdb& db) const {
  if (slots_.empty()) return kNone;
  const size_t mask = slots_.size() - 1;
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.id == kNone) return kNone;
    if (s.hash == hash && db.entries_[s.id]->key() == key) return s.id;
  }
}

void Tsdb::KeyIndex::Insert(SeriesId id, uint32_t hash) {
  if ((size_ + 1) * 4 > slots_.size() * 3) {  // grow: twice the slots, every id placed again
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(std::max<size_t>(64, old.size() * 2), Slot{});
    size_ = 0;
    for (const Slot& s : old) {
      if (s.id != kNone) Insert(s.id, s.hash);
    }
  }
  const size_t mask = slots_.size() - 1;
  size_t i = hash & mask;
  while (slots_[i].id != kNone) i = (i + 1) & mask;
  slots_[i] = Slot{hash, id};
  ++size_;
}

Tsdb::EntryPtr Tsdb::MakeEntry(std::string_view key) {
  void* raw = ::operator new(sizeof(Entry) + key.size());
  auto* e = new (raw) Entry{};
  e->key_size = static_cast<uint32_t>(key.size());
  if (!key.empty()) std::memcpy(static_cast<char*>(raw) + sizeof(Entry), key.data(), key.size());
  return EntryPtr(e);
}

void Tsdb::FreeEntry::operator()(Entry* e) const {
  e->~Entry();
  ::operator delete(e);
}

SeriesId Tsdb::Intern(std::string_view key) {
  const uint32_t hash = Hash(key);
  {
    std::shared_lock lock(registry_mu_);
    if (SeriesId id = ids_.Find(key, hash, *this); id != KeyIndex::kNone) return id;
  }
  std::unique_lock lock(registry_mu_);
  if (SeriesId id = ids_.Find(key, hash, *this); id != KeyIndex::kNone) return id;
  auto id = static_cast<SeriesId>(entries_.size());
  entries_.push_back(MakeEntry(key));
  ids_.Insert(id, hash);
  return id;
}

std::optional<SeriesId> Tsdb::Find(std::string_view key) const {
  std::shared_lock lock(registry_mu_);
  SeriesId id = ids_.Find(key, Hash(key), *this);
  if (id == KeyIndex::kNone) return std::nullopt;
  return id;
}

std::string Tsdb::Key(SeriesId id) const {
  Entry* e = Get(id);
  return e ? std::string(e->key()) : std::string();
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
