#include "tsdb/chunk.h"

#include <bit>
#include <cmath>
#include <cstring>

#include "tsdb/ladder.h"

namespace gpufleet::tsdb {
bool Sample::operator==(const Sample& o) const { return t == o.t && Bits(v) == Bits(o.v); }

Sample Chunk::last() const {
  return {last_t_, integer_ ? static_cast<double>(last_int_) : FromBits(last_bits_)};
}

bool Chunk::FitsInteger(double v) {
  constexpr double kMax = 9007199254740992.0;  // 2^53: every integer up to it is exact
  return std::isfinite(v) && v == std::trunc(v) && std::fabs(v) <= kMax &&
         !(v == 0 && std::signbit(v));  // -0.0 would come back as +0
}

AppendResult Chunk::Append(int64_t t, double v) {
  if (count_ > 0 && t <= last_t_) return AppendResult::kOutOfOrder;
  if (count_ >= kMaxSamples) return AppendResult::kFull;
  if (integer_ && !FitsInteger(v)) return AppendResult::kWrongMode;
  WriteTimestamp(t);
  if (integer_) {
    WriteInteger(static_cast<int64_t>(v));
  } else {
    WriteFloat(v);
  }
  if (count_ == 0) min_time_ = t;
  last_t_ = t;
  ++count_;
  return AppendResult::kOk;
}

void Chunk::WriteTimestamp(int64_t t) {
  if (count_ == 0) {
    bits_.Write(static_cast<uint64_t>(t), 64);
    return;
  }
  int64_t delta = t - last_t_;
  WriteLadder(bits_, delta - last_delta_, kTimeLadder);
  last_delta_ = delta;
}

void Chunk::WriteInteger(int64_t v) {
  int64_t delta = v - last_int_;
  if (count_ == 0) {
    bits_.Write(static_cast<uint64_t>(v), 64);
    delta = 0;
  } else if (count_ == 1) {
    // Counters (energy, bytes) climb by large, steady steps: for them the difference of
    // deltas is small; gauges wander by small steps: for them the delta is. The second
    // sample decides, and one bit records which.
    counter_ = delta > 127 || delta < -127;
    bits_.WriteBit(counter_);
    WriteLadder(bits_, delta, kIntLadder);
  } else {
    WriteLadder(bits_, counter_ ? delta - last_int_delta_ : delta, kIntLadder);
  }
  last_int_ = v;
  last_int_delta_ = delta;
}

void Chunk::WriteFloat(double v) {
  uint64_t b = Bits(v);
  if (count_ == 0) {
    bits_.Write(b, 64);
    last_bits_ = b;
    return;
  }
  uint64_t x = b ^ last_bits_;
  last_bits_ = b;
  WriteXor(bits_, x, leading_, trailing_);
}

void Chunk::Save(Encoder& e) const {
  e.U8(static_cast<uint8_t>((integer_ ? 1 : 0) | (counter_ ? 2 : 0)));
  e.U16(count_);
  e.I64(min_time_);
  e.I64(last_t_);
  e.I64(last_delta_);
  e.U64(last_bits_);
  e.I64(last_int_);
  e.I64(last_int_delta_);
  e.U8(static_cast<uint8_t>(leading_));
  e.U8(static_cast<uint8_t>(trailing_));
  e.U8(bits_.acc());
  e.U8(bits_.pending());
  const auto& bytes = bits_.whole_bytes();
  e.Str(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

std::optional<Chunk> Chunk::Load(Decoder& d) {
  auto flags = d.Get<uint8_t>();
  if (!flags) return std::nullopt;
  Chunk c((*flags & 1) != 0);
  c.counter_ = (*flags & 2) != 0;
  auto count = d.Get<uint16_t>();
  auto min_time = d.Get<int64_t>(), last_t = d.Get<int64_t>(), last_delta = d.Get<int64_t>();
  auto last_bits = d.Get<uint64_t>();
  auto last_int = d.Get<int64_t>(), last_int_delta = d.Get<int64_t>();
  auto leading = d.Get<uint8_t>(), trailing = d.Get<uint8_t>(), acc = d.Get<uint8_t>(),
       pending = d.Get<uint8_t>();
  auto bytes = d.Str();
  if (!count || !min_time || !last_t || !last_delta || !last_bits || !last_int || !last_int_delta ||
      !leading || !trailing || !acc || !pending || !bytes || *pending > 7 || *count > kMaxSamples) {
    return std::nullopt;
  }
  c.count_ = *count;
  c.min_time_ = *min_time;
  c.last_t_ = *last_t;
  c.last_delta_ = *last_delta;
  c.last_bits_ = *last_bits;
  c.last_int_ = *last_int;
  c.last_int_delta_ = *last_int_delta;
  c.leading_ = static_cast<int8_t>(*leading);
  c.trailing_ = static_cast<int8_t>(*trailing);
  c.bits_.Restore(std::vector<uint8_t>(bytes->begin(), bytes->end()), *acc, *pending);
  return c;
}

std::vector<Sample> Chunk::Decode() const {
  std::vector<Sample> out;
  out.reserve(count_);
  DecodeInto(INT64_MIN, INT64_MAX, out);
  return out;
}

namespace {

// The integer chunks' decoder, on its own for speed (windowed alert rules decode millions of
// samples a cycle): both ladders of a sample are read from 64-bit windows of the stream,
// without optionals. Same format as ReadLadder's.
class FastBits {
 public:
  FastBits(const uint8_t* data, size_t bits) : data_(data), bytes_((bits + 7) >> 3), bits_(bits) {}
  uint64_t Window() const {
    size_t byte = pos_ >> 3;
    uint64_t w = 0;
    if (byte + 8 <= bytes_) {
      std::memcpy(&w, data_ + byte, 8);
      w = __builtin_bswap64(w);
    } else {
      for (size_t i = 0; i < 8; ++i) w = (w << 8) | (byte + i < bytes_ ? data_[byte + i] : 0);
    }
    return w << (pos_ & 7);
  }
  bool Raw64(uint64_t& out) {
    if (pos_ + 64 > bits_) return false;
    uint64_t high = Window() >> 32;
    pos_ += 32;
    out = (high << 32) | (Window() >> 32);
    pos_ += 32;
    return true;
  }
  bool Bit(bool& out) {
    if (pos_ >= bits_) return false;
    out = (data_[pos_ >> 3] >> (7 - (pos_ & 7))) & 1;
    ++pos_;
    return true;
  }
  bool Ladder(const Ladder& l, int64_t& out) {
    uint64_t w = Window();
    int ones = std::min(4, std::countl_one(w));
    if (ones == 0) {
      if (pos_ + 1 > bits_) return false;
      ++pos_;
      out = 0;
      return true;
    }
    if (ones < 4) {
      int n = l.widths[ones - 1];
      size_t used = static_cast<size_t>(ones + 1 + n);
      if (pos_ + used > bits_) return false;
      out = SignExtend((w << (ones + 1)) >> (64 - n), n);
      pos_ += used;
      return true;
    }
    pos_ += 4;
    uint64_t raw = 0;
    if (!Raw64(raw)) return false;
    out = static_cast<int64_t>(raw);
    return true;
  }

 private:
  const uint8_t* data_;
  size_t bytes_, bits_;
  size_t pos_ = 0;
};

}  // namespace

void Chunk::DecodeInto(int64_t start, int64_t end, std::vector<Sample>& out) const {
  std::vector<uint8_t> data = bits_.Bytes();
  if (integer_) {
    FastBits r(data.data(), bits_.bit_size());
    uint64_t raw = 0;
    if (count_ == 0 || !r.Raw64(raw)) return;
    int64_t t = static_cast<int64_t>(raw), delta = 0, idelta = 0;
    if (!r.Raw64(raw)) return;
    int64_t iv = static_cast<int64_t>(raw);
    bool counter = false;
    for (int i = 0;;) {
      if (t >= end) return;
      if (t >= start) out.push_back({t, static_cast<double>(iv)});
      if (++i >= count_) return;
      int64_t dod = 0, d = 0;
      if (!r.Ladder(kTimeLadder, dod)) return;
      delta += dod;
      t += delta;
      if (i == 1 && !r.Bit(counter)) return;
      if (!r.Ladder(kIntLadder, d)) return;
      idelta = (counter && i > 1) ? idelta + d : d;
      iv += idelta;
    }
  }
  // Floats: XOR'd doubles, read with the same checked readers as Load's (a damaged chunk
  // ends the decode where it stops making sense, never reads past its bytes).
  BitReader r(data.data(), bits_.bit_size());
  int64_t t = 0, delta = 0;
  uint64_t vb = 0;
  int leading = 0, trailing = 0;
  for (int i = 0; i < count_; ++i) {
    if (i == 0) {
      auto first_t = r.Read(64), first_v = r.Read(64);
      if (!first_t || !first_v) return;
      t = static_cast<int64_t>(*first_t);
      vb = *first_v;
    } else {
      auto dod = ReadLadder(r, kTimeLadder);
      if (!dod) return;
      delta += *dod;
      t += delta;
      auto x = ReadXor(r, leading, trailing);
      if (!x) return;
      vb ^= *x;
    }
    if (t >= end) return;
    if (t >= start) out.push_back({t, FromBits(vb)});
  }
}

}  // namespace gpufleet::tsdb
