#include "tsdb/series.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace gpufleet::tsdb {

AppendResult ChunkList::Append(int64_t t, double v) {
  if (!chunks_.empty()) {
    AppendResult r = chunks_.back().Append(t, v);
    if (r == AppendResult::kOk || r == AppendResult::kOutOfOrder) return r;
    chunks_.back().Shrink();
  }
  chunks_.emplace_back(Chunk::FitsInteger(v));
  return chunks_.back().Append(t, v);
}

std::vector<Sample> ChunkList::Range(int64_t start, int64_t end) const {
  std::vector<Sample> out;
  RangeInto(start, end, out);
  return out;
}

void ChunkList::RangeInto(int64_t start, int64_t end, std::vector<Sample>& out) const {
  auto first = std::partition_point(chunks_.begin(), chunks_.end(),
                                    [&](const Chunk& c) { return c.max_time() < start; });
  for (auto it = first; it != chunks_.end() && it->min_time() < end; ++it) {
    it->DecodeInto(start, end, out);
  }
}

void ChunkList::DropBefore(int64_t t) {
  auto keep = std::partition_point(chunks_.begin(), chunks_.end(),
                                   [&](const Chunk& c) { return c.max_time() < t; });
  chunks_.erase(chunks_.begin(), keep);
}

size_t ChunkList::bytes() const {
  size_t n = 0;
  for (const auto& c : chunks_) n += c.bytes() + sizeof(Chunk);
  return n;
}

size_t ChunkList::samples() const {
  size_t n = 0;
  for (const auto& c : chunks_) n += c.count();
  return n;
}

void Rollup::Add(int64_t t, double v) {
  if (std::isnan(v)) return;
  const int64_t w = width_;
  int64_t start = t - ((t % w) + w) % w;
  if (open_ && start != current_.start) Close();
  if (!open_) {
    current_ = Bucket{start, v, v, 0, 0};
    open_ = true;
  }
  current_.min = std::min(current_.min, v);
  current_.max = std::max(current_.max, v);
  current_.sum += v;
  current_.count += 1;
}

void Rollup::Close() {
  AppendBucket(current_);
  open_ = false;
}

void Rollup::AppendBucket(const Bucket& b) {
  if (!chunks_.empty()) {
    AppendResult r = chunks_.back().Append(b);
    if (r == AppendResult::kOk || r == AppendResult::kOutOfOrder) return;
    chunks_.back().Shrink();
  }
  chunks_.emplace_back(b);
  chunks_.back().Append(b);
}

std::vector<Bucket> Rollup::Range(int64_t start, int64_t end) const {
  std::vector<Bucket> out;
  auto first = std::partition_point(chunks_.begin(), chunks_.end(),
                                    [&](const BucketChunk& c) { return c.max_time() < start; });
  for (auto it = first; it != chunks_.end() && it->min_time() < end; ++it) {
    it->DecodeInto(start, end, out);
  }
  if (open_ && current_.start >= start && current_.start < end) out.push_back(current_);
  return out;
}

void Rollup::DropBefore(int64_t t) {
  auto keep = std::partition_point(chunks_.begin(), chunks_.end(),
                                   [&](const BucketChunk& c) { return c.max_time() < t; });
  chunks_.erase(chunks_.begin(), keep);
}

size_t Rollup::bytes() const {
  size_t n = 0;
  for (const auto& c : chunks_) n += c.bytes() + sizeof(BucketChunk);
  return n;
}

Status Series::Append(int64_t t, double v) {
  AppendResult r = raw_.Append(t, v);
  if (r == AppendResult::kOutOfOrder) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "out-of-order sample: t=" + std::to_string(t) +
                         " is not after the series' last t=" + std::to_string(raw_.last_time()));
  }
  minute_.Add(t, v);
  hour_.Add(t, v);
  return {};
}

void Series::Retain(int64_t now, const Retention& r) {
  raw_.DropBefore(now - r.raw_ms);
  minute_.DropBefore(now - r.minute_ms);
  hour_.DropBefore(now - r.hour_ms);
}

}  // namespace gpufleet::tsdb

namespace gpufleet::tsdb {

void ChunkList::Save(Encoder& e) const {
  e.U32(static_cast<uint32_t>(chunks_.size()));
  for (const auto& c : chunks_) c.Save(e);
}

bool ChunkList::Load(Decoder& d) {
  auto n = d.Get<uint32_t>();
  if (!n) return false;
  chunks_.clear();
  for (uint32_t i = 0; i < *n; ++i) {
    auto c = Chunk::Load(d);
    if (!c) return false;
    chunks_.push_back(std::move(*c));
  }
  return true;
}

void Rollup::Save(Encoder& e) const {
  e.U32(static_cast<uint32_t>(chunks_.size()));
  for (const auto& c : chunks_) c.Save(e);
  e.U8(open_ ? 1 : 0);
  e.I64(current_.start);
  e.F64(current_.min);
  e.F64(current_.max);
  e.F64(current_.sum);
  e.F64(current_.count);
}

bool Rollup::Load(Decoder& d, bool legacy) {
  chunks_.clear();
  if (legacy) {
    // Four columns, each its own chunk list, holding the same bucket times except where
    // retention dropped a chunk of one column before another's: only the times all four
    // still have are kept.
    ChunkList columns[4];
    for (auto& c : columns) {
      if (!c.Load(d)) return false;
    }
    auto mins = columns[0].Range(INT64_MIN, INT64_MAX),
         maxs = columns[1].Range(INT64_MIN, INT64_MAX),
         sums = columns[2].Range(INT64_MIN, INT64_MAX),
         counts = columns[3].Range(INT64_MIN, INT64_MAX);
    size_t a = 0, b = 0, c = 0;
    for (const Sample& n : counts) {
      while (a < mins.size() && mins[a].t < n.t) ++a;
      while (b < maxs.size() && maxs[b].t < n.t) ++b;
      while (c < sums.size() && sums[c].t < n.t) ++c;
      if (a < mins.size() && b < maxs.size() && c < sums.size() && mins[a].t == n.t &&
          maxs[b].t == n.t && sums[c].t == n.t) {
        AppendBucket(Bucket{n.t, mins[a].v, maxs[b].v, sums[c].v, n.v});
      }
    }
  } else {
    auto n = d.Get<uint32_t>();
    if (!n) return false;
    for (uint32_t i = 0; i < *n; ++i) {
      auto c = BucketChunk::Load(d);
      if (!c) return false;
      chunks_.push_back(std::move(*c));
    }
  }
  auto open = d.Get<uint8_t>();
  auto start = d.Get<int64_t>();
  auto mn = d.Get<double>(), mx = d.Get<double>(), sum = d.Get<double>(), count = d.Get<double>();
  if (!open || !start || !mn || !mx || !sum || !count) return false;
  open_ = *open != 0;
  current_ = Bucket{*start, *mn, *mx, *sum, *count};
  return true;
}

void Series::Save(Encoder& e) const {
  raw_.Save(e);
  minute_.Save(e);
  hour_.Save(e);
}

bool Series::Load(Decoder& d, bool legacy_rollups) {
  return raw_.Load(d) && minute_.Load(d, legacy_rollups) && hour_.Load(d, legacy_rollups);
}

}  // namespace gpufleet::tsdb
