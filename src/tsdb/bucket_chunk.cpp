#include "tsdb/bucket_chunk.h"

#include <cmath>

#include "tsdb/ladder.h"

namespace gpufleet::tsdb {
namespace {

double Column(const Bucket& b, int c) {
  switch (c) {
    case 0:
      return b.min;
    case 1:
      return b.max;
    case 2:
      return b.sum;
    default:
      return b.count;
  }
}

void SetColumn(Bucket& b, int c, double v) {
  switch (c) {
    case 0:
      b.min = v;
      break;
    case 1:
      b.max = v;
      break;
    case 2:
      b.sum = v;
      break;
    default:
      b.count = v;
  }
}

}  // namespace

BucketChunk::BucketChunk(const Bucket& first) {
  for (int c = 0; c < kColumns; ++c) {
    if (Chunk::FitsInteger(Column(first, c))) integer_ |= static_cast<uint8_t>(1u << c);
  }
}

AppendResult BucketChunk::Append(const Bucket& b) {
  if (count_ > 0 && b.start <= last_t_) return AppendResult::kOutOfOrder;
  if (count_ >= kMaxBuckets) return AppendResult::kFull;
  for (int c = 0; c < kColumns; ++c) {
    if (Integer(c) && !Chunk::FitsInteger(Column(b, c))) return AppendResult::kWrongMode;
  }
  if (count_ == 0) {
    bits_.Write(static_cast<uint64_t>(b.start), 64);
    min_time_ = b.start;
  } else {
    int64_t delta = b.start - last_t_;
    WriteLadder(bits_, delta - last_delta_, kTimeLadder);
    last_delta_ = delta;
  }
  last_t_ = b.start;
  for (int c = 0; c < kColumns; ++c) {
    double v = Column(b, c);
    uint64_t now = Integer(c) ? static_cast<uint64_t>(static_cast<int64_t>(v)) : Bits(v);
    if (count_ == 0) {
      bits_.Write(now, 64);
    } else if (Integer(c)) {
      WriteLadder(bits_, static_cast<int64_t>(now - last_[c]), kIntLadder);
    } else {
      WriteXor(bits_, now ^ last_[c], leading_[c], trailing_[c]);
    }
    last_[c] = now;
  }
  ++count_;
  return AppendResult::kOk;
}

void BucketChunk::DecodeInto(int64_t start, int64_t end, std::vector<Bucket>& out) const {
  std::vector<uint8_t> data = bits_.Bytes();
  BitReader r(data.data(), bits_.bit_size());
  int64_t t = 0, delta = 0;
  uint64_t value[kColumns] = {};
  int leading[kColumns] = {}, trailing[kColumns] = {};
  for (int i = 0; i < count_; ++i) {
    if (i == 0) {
      auto first = r.Read(64);
      if (!first) return;
      t = static_cast<int64_t>(*first);
    } else {
      auto dod = ReadLadder(r, kTimeLadder);
      if (!dod) return;
      delta += *dod;
      t += delta;
    }
    Bucket b{t, 0, 0, 0, 0};
    for (int c = 0; c < kColumns; ++c) {
      if (i == 0) {
        auto first = r.Read(64);
        if (!first) return;
        value[c] = *first;
      } else if (Integer(c)) {
        auto d = ReadLadder(r, kIntLadder);
        if (!d) return;
        value[c] += static_cast<uint64_t>(*d);
      } else {
        auto x = ReadXor(r, leading[c], trailing[c]);
        if (!x) return;
        value[c] ^= *x;
      }
      SetColumn(
          b, c,
          Integer(c) ? static_cast<double>(static_cast<int64_t>(value[c])) : FromBits(value[c]));
    }
    if (t >= end) return;
    if (t >= start) out.push_back(b);
  }
}

void BucketChunk::Save(Encoder& e) const {
  e.U8(integer_);
  e.U16(count_);
  e.I64(min_time_);
  e.I64(last_t_);
  e.I64(last_delta_);
  for (int c = 0; c < kColumns; ++c) {
    e.U64(last_[c]);
    e.U8(static_cast<uint8_t>(leading_[c]));
    e.U8(static_cast<uint8_t>(trailing_[c]));
  }
  e.U8(bits_.acc());
  e.U8(bits_.pending());
  const auto& bytes = bits_.whole_bytes();
  e.Str(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

std::optional<BucketChunk> BucketChunk::Load(Decoder& d) {
  BucketChunk b;
  auto integer = d.Get<uint8_t>();
  auto count = d.Get<uint16_t>();
  auto min_time = d.Get<int64_t>(), last_t = d.Get<int64_t>(), last_delta = d.Get<int64_t>();
  if (!integer || !count || !min_time || !last_t || !last_delta || *count > kMaxBuckets) {
    return std::nullopt;
  }
  for (int c = 0; c < kColumns; ++c) {
    auto last = d.Get<uint64_t>();
    auto leading = d.Get<uint8_t>(), trailing = d.Get<uint8_t>();
    if (!last || !leading || !trailing) return std::nullopt;
    b.last_[c] = *last;
    b.leading_[c] = static_cast<int8_t>(*leading);
    b.trailing_[c] = static_cast<int8_t>(*trailing);
  }
  auto acc = d.Get<uint8_t>(), pending = d.Get<uint8_t>();
  auto bytes = d.Str();
  if (!acc || !pending || !bytes || *pending > 7) return std::nullopt;
  b.integer_ = *integer;
  b.count_ = *count;
  b.min_time_ = *min_time;
  b.last_t_ = *last_t;
  b.last_delta_ = *last_delta;
  b.bits_.Restore(std::vector<uint8_t>(bytes->begin(), bytes->end()), *acc, *pending);
  return b;
}

}  // namespace gpufleet::tsdb
