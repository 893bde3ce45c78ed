#pragma once
// A compressed chunk of one series' samples, Gorilla-style: timestamps (milliseconds) as
// delta-of-delta with Prometheus's buckets, values either XOR-encoded doubles or, while every
// value is an integer (what NVML mostly returns), integer deltas in small buckets.
// Single writer; decoding is const and may run while no append is in progress.

#include <cstdint>
#include <optional>
#include <vector>

#include "tsdb/bitstream.h"
#include "tsdb/codec.h"

namespace gpufleet::tsdb {

struct Sample {
  int64_t t;  // milliseconds since the epoch
  double v;
  bool operator==(const Sample& o) const;  // bitwise on v, so NaN == NaN
};

enum class AppendResult {
  kOk,
  kFull,        // start a new chunk
  kWrongMode,   // a non-integer value for an integer chunk: start a new (float) chunk
  kOutOfOrder,  // t is not after the last sample: refused
};

class Chunk {
 public:
  // 16 minutes at 1 Hz: long enough that the header and bookkeeping amortise (about 0.1 byte
  // a sample), short enough that a query decodes little it does not need.
  static constexpr int kMaxSamples = 960;

  // `integer` chunks take only integral values with |v| <= 2^53.
  explicit Chunk(bool integer) : integer_(integer) {}
  static bool FitsInteger(double v);

  AppendResult Append(int64_t t, double v);
  std::vector<Sample> Decode() const;
  // Appends the samples with start <= t < end to `out`, stopping at the first at or after end.
  void DecodeInto(int64_t start, int64_t end, std::vector<Sample>& out) const;

  int count() const { return count_; }
  Sample last() const;  // the newest sample; count() must be > 0
  bool integer() const { return integer_; }
  int64_t min_time() const { return min_time_; }
  int64_t max_time() const { return last_t_; }
  size_t bytes() const { return (bits_.bit_size() + 7) / 8; }
  void Shrink() { bits_.Shrink(); }

  // Checkpoint form: the encoded bits and the encoder's state.
  void Save(Encoder& e) const;
  static std::optional<Chunk> Load(Decoder& d);

 private:
  void WriteTimestamp(int64_t t);
  void WriteFloat(double v);
  void WriteInteger(int64_t v);

  // Ordered to pack: a sealed chunk's bookkeeping is most of its cost per sample.
  BitWriter bits_;
  int64_t min_time_ = 0;
  int64_t last_t_ = 0;
  int64_t last_delta_ = 0;
  uint64_t last_bits_ = 0;  // float mode: the previous value's bits
  int64_t last_int_ = 0;    // integer mode: the previous value
  int64_t last_int_delta_ = 0;
  uint16_t count_ = 0;
  int8_t leading_ = -1;  // float mode: the previous XOR window, -1 when none yet
  int8_t trailing_ = 0;
  bool integer_;
  bool counter_ = false;  // integer mode: values coded as delta-of-delta (set at sample 2)
};

}  // namespace gpufleet::tsdb
