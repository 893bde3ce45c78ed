#pragma once
// A compressed chunk of one rollup tier's buckets: each bucket's start once, coded as raw
// chunks code timestamps (delta-of-delta), then its min, max, sum and count, each column coded
// as raw chunks code values (integer deltas while the column's values are integers, else the
// XOR of doubles). One chunk for the four columns, where there were four chunks: the start is
// held once and the bookkeeping is about a quarter (issue 49: at 100,000 GPUs the rollups'
// chunks were most of a new series' memory).
// Single writer; decoding is const and may run while no append is in progress.
#include <cstdint>
#include <optional>
#include <vector>

#include "tsdb/bitstream.h"
#include "tsdb/chunk.h"
#include "tsdb/codec.h"

namespace gpufleet::tsdb {

struct Bucket {
  int64_t start;  // aligned to the tier's width
  double min;
  double max;
  double sum;
  double count;
};

class BucketChunk {
 public:
  // Four hours of minute buckets, ten days of hour buckets.
  static constexpr int kMaxBuckets = 240;
  static constexpr int kColumns = 4;  // min, max, sum, count
  // The columns' modes: integer where the first bucket's value is one.
  explicit BucketChunk(const Bucket& first);
  // kWrongMode: a non-integer value in an integer column (start a new chunk).
  AppendResult Append(const Bucket& b);
  // Appends the buckets with start <= b.start < end to `out`, in time order.
  void DecodeInto(int64_t start, int64_t end, std::vector<Bucket>& out) const;
  int count() const { return count_; }
  int64_t min_time() const { return min_time_; }
  int64_t max_time() const { return last_t_; }
  size_t bytes() const { return (bits_.bit_size() + 7) / 8; }
  void Shrink() { bits_.Shrink(); }
  void Save(Encoder& e) const;
  static std::optional<BucketChunk> Load(Decoder& d);

 private:
  BucketChunk() = default;
  bool Integer(int c) const { return (integer_ >> c) & 1; }

  BitWriter bits_;
  int64_t min_time_ = 0;
  int64_t last_t_ = 0;
  int64_t last_delta_ = 0;
  // Per column, the previous value: an integer column's as an int64, a float column's bits.
  uint64_t last_[kColumns] = {};
  uint16_t count_ = 0;
  int8_t leading_[kColumns] = {-1, -1, -1, -1};  // float columns' XOR windows
  int8_t trailing_[kColumns] = {};
  uint8_t integer_ = 0;  // bit c: column c codes integers
};

}  // namespace gpufleet::tsdb
