#pragma once
// One series' history: raw samples in compressed chunks, and rollup tiers (1-minute and 1-hour
// by default) that keep min, max, sum and count per bucket, each column compressed the same way.
// Retention is per tier. Single writer; external synchronisation (Tsdb holds the locks).

#include <cstdint>
#include <optional>
#include <vector>

#include "common/result.h"
#include "tsdb/bucket_chunk.h"
#include "tsdb/chunk.h"

namespace gpufleet::tsdb {

// An append-only list of chunks of one column; cuts a new chunk when one is full or when a
// non-integer value arrives for an integer chunk.
class ChunkList {
 public:
  AppendResult Append(int64_t t, double v);
  // Samples with start <= t < end, in time order.
  std::vector<Sample> Range(int64_t start, int64_t end) const;
  void RangeInto(int64_t start, int64_t end, std::vector<Sample>& out) const;  // appends
  // Drops whole chunks that end before t.
  void DropBefore(int64_t t);
  size_t bytes() const;
  size_t samples() const;
  int64_t last_time() const { return chunks_.empty() ? INT64_MIN : chunks_.back().max_time(); }
  std::optional<Sample> last() const {
    if (chunks_.empty()) return std::nullopt;
    return chunks_.back().last();
  }
  void Save(Encoder& e) const;
  bool Load(Decoder& d);

 private:
  std::vector<Chunk> chunks_;
};

// One resolution of aggregates: closed buckets in BucketChunks, and the open one. NaN samples
// are kept raw but not aggregated.
class Rollup {
 public:
  explicit Rollup(int32_t width_ms) : width_(width_ms) {}
  void Add(int64_t t, double v);
  // Buckets whose start is in [start, end), the still-open one included.
  std::vector<Bucket> Range(int64_t start, int64_t end) const;
  void DropBefore(int64_t t);
  int64_t width() const { return width_; }
  size_t bytes() const;
  void Save(Encoder& e) const;
  // `legacy`: the form before BucketChunk (four chunk lists, one a column), read and converted.
  bool Load(Decoder& d, bool legacy = false);

 private:
  void Close();
  void AppendBucket(const Bucket& b);

  // Ordered to pack (72 bytes): a Series has two, and there are millions of series.
  std::vector<BucketChunk> chunks_;
  int32_t width_;
  bool open_ = false;
  Bucket current_{};
};

struct Retention {
  int64_t raw_ms = 24LL * 3600 * 1000;
  int64_t minute_ms = 30LL * 24 * 3600 * 1000;
  int64_t hour_ms = 365LL * 24 * 3600 * 1000;
};

class Series {
 public:
  // Appends one sample; a timestamp not after the last one is refused with the reason.
  Status Append(int64_t t, double v);
  std::vector<Sample> Raw(int64_t start, int64_t end) const { return raw_.Range(start, end); }
  void RawInto(int64_t start, int64_t end, std::vector<Sample>& out) const {
    raw_.RangeInto(start, end, out);
  }
  const Rollup& minute() const { return minute_; }
  const Rollup& hour() const { return hour_; }
  void Retain(int64_t now, const Retention& r);
  size_t bytes() const { return raw_.bytes() + minute_.bytes() + hour_.bytes(); }
  size_t raw_bytes() const { return raw_.bytes(); }
  size_t raw_samples() const { return raw_.samples(); }
  int64_t last_time() const { return raw_.last_time(); }
  std::optional<Sample> latest() const { return raw_.last(); }
  // Checkpoint form of everything above; Load returns false on a malformed record.
  void Save(Encoder& e) const;
  // `legacy_rollups`: a checkpoint written before the rollups' BucketChunks.
  bool Load(Decoder& d, bool legacy_rollups = false);

 private:
  ChunkList raw_;
  Rollup minute_{60'000};
  Rollup hour_{3'600'000};
};

}  // namespace gpufleet::tsdb
