#pragma once
// Tsdb: the registry of series, keyed by name ("GPU-…/gpu_util"), each a compressed Series.
// Thread-safe: interning takes an exclusive lock on the registry; appends and reads lock only
// the series' shard, so ingest threads and queries on different series do not contend.

#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "tsdb/series.h"

namespace gpufleet::tsdb {

using SeriesId = uint32_t;

enum class Resolution { kRaw, kMinute, kHour };

struct TsdbStats {
  size_t series = 0;
  size_t raw_samples = 0;
  size_t raw_bytes = 0;    // compressed raw chunks and their bookkeeping
  size_t total_bytes = 0;  // raw plus rollups
  double raw_bytes_per_sample() const {
    return raw_samples ? static_cast<double>(raw_bytes) / static_cast<double>(raw_samples) : 0;
  }
};

class Tsdb {
 public:
  explicit Tsdb(Retention retention = {}) : retention_(retention) {}

  SeriesId Intern(std::string_view key);
  std::optional<SeriesId> Find(std::string_view key) const;
  std::string Key(SeriesId id) const;

  Status Append(SeriesId id, int64_t t, double v);
  std::vector<Sample> Raw(SeriesId id, int64_t start, int64_t end) const;
  void RawInto(SeriesId id, int64_t start, int64_t end, std::vector<Sample>& out) const;
  std::vector<Bucket> Rollup(SeriesId id, Resolution r, int64_t start, int64_t end) const;
  std::optional<Sample> Latest(SeriesId id) const;

  // Checkpoint support: a series' whole state, and its restoration into an interned id.
  void SaveSeries(SeriesId id, Encoder& e) const;
  // `legacy_rollups`: a series record written before the rollups' BucketChunks.
  bool LoadSeries(SeriesId id, Decoder& d, bool legacy_rollups = false);

  // Drops what each tier's retention no longer covers.
  void Retain(int64_t now);
  TsdbStats Stats() const;

 private:
  static constexpr size_t kShards = 64;
  // A series and its key, in one allocation: the key's characters follow the entry (no string
  // object and no second allocation a series).
  struct Entry {
    Series series;  // guarded by shards_[id % kShards]
    uint32_t key_size = 0;
    std::string_view key() const { return {reinterpret_cast<const char*>(this + 1), key_size}; }
  };
  struct FreeEntry {
    void operator()(Entry* e) const;
  };
  using EntryPtr = std::unique_ptr<Entry, FreeEntry>;
  static EntryPtr MakeEntry(std::string_view key);
  Entry* Get(SeriesId id) const;

  // The ids by their entries' keys: open addressing, linear probing, at most three quarters
  // full, each slot the key's 32-bit hash and the id (8 bytes a slot: 11 to 21 a series, where
  // a node-based map took about 56). Each key is held once, in its entry; a lookup allocates
  // nothing.
  class KeyIndex {
   public:
    SeriesId Find(std::string_view key, uint32_t hash, const Tsdb& db) const;  // kNone: none
    void Insert(SeriesId id, uint32_t hash);  // a key not there yet
    static constexpr SeriesId kNone = UINT32_MAX;

   private:
    struct Slot {
      uint32_t hash = 0;
      SeriesId id = kNone;
    };
    std::vector<Slot> slots_;
    size_t size_ = 0;
  };
  static uint32_t Hash(std::string_view key);

  Retention retention_;
  mutable std::shared_mutex registry_mu_;
  KeyIndex ids_;                   // guarded by registry_mu_
  std::vector<EntryPtr> entries_;  // guarded by registry_mu_; entries stable
  mutable std::mutex shards_[kShards];
};

}  // namespace gpufleet::tsdb
