#include "remote/wire.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <snappy.h>

#include <cstring>

namespace gpufleet::remote {

namespace {

using google::protobuf::io::CodedOutputStream;
using google::protobuf::io::StringOutputStream;

// Field tags: (number << 3) | wire type (0 varint, 1 64-bit, 2 length-delimited).
constexpr uint32_t kLenDelimited = 2;
constexpr uint32_t Tag(uint32_t field, uint32_t type) { return (field << 3) | type; }

// Sample { double value = 1; int64 timestamp = 2; }
size_t SampleSize(const WireSample& s) {
  return 1 + 8 + 1 + CodedOutputStream::VarintSize64(static_cast<uint64_t>(s.t));
}

// The bytes of one TimeSeries message (without its tag and length).
size_t SeriesSize(const WireSeries& s) {
  size_t n = 0;
  for (const auto& piece : s.labels) n += piece.size();
  for (size_t i = 0; i < s.count; ++i) n += 2 + SampleSize(s.samples[i]);
  return n;
}

}  // namespace

double StaleNaN() {
  double v;
  std::memcpy(&v, &kStaleNaNBits, sizeof v);
  return v;
}

bool IsStaleNaN(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return bits == kStaleNaNBits;
}

std::string EncodeLabels(const Labels& labels) {
  std::string out;
  {
    StringOutputStream stream(&out);
    CodedOutputStream coded(&stream);
    for (const auto& [name, value] : labels) {
      // TimeSeries.labels = 1: Label { string name = 1; string value = 2; }
      size_t inner =
          1 + CodedOutputStream::VarintSize32(static_cast<uint32_t>(name.size())) + name.size() +
          1 + CodedOutputStream::VarintSize32(static_cast<uint32_t>(value.size())) + value.size();
      coded.WriteTag(Tag(1, kLenDelimited));
      coded.WriteVarint32(static_cast<uint32_t>(inner));
      coded.WriteTag(Tag(1, kLenDelimited));
      coded.WriteVarint32(static_cast<uint32_t>(name.size()));
      coded.WriteRaw(name.data(), static_cast<int>(name.size()));
      coded.WriteTag(Tag(2, kLenDelimited));
      coded.WriteVarint32(static_cast<uint32_t>(value.size()));
      coded.WriteRaw(value.data(), static_cast<int>(value.size()));
    }
  }
  return out;
}

void EncodeWriteRequest(const std::vector<WireSeries>& series, std::string& out) {
  // Sized first, then written straight into the buffer: no stream, no copy.
  thread_local std::vector<uint32_t> sizes;
  sizes.clear();
  size_t total = 0;
  for (const auto& s : series) {
    size_t inner = SeriesSize(s);
    sizes.push_back(static_cast<uint32_t>(inner));
    total += 1 + CodedOutputStream::VarintSize32(static_cast<uint32_t>(inner)) + inner;
  }
  out.resize(total);
  auto* p = reinterpret_cast<uint8_t*>(out.data());
  for (size_t k = 0; k < series.size(); ++k) {
    const WireSeries& s = series[k];
    // WriteRequest.timeseries = 1: TimeSeries { labels = 1; samples = 2; }
    p = CodedOutputStream::WriteTagToArray(Tag(1, kLenDelimited), p);
    p = CodedOutputStream::WriteVarint32ToArray(sizes[k], p);
    for (const auto& piece : s.labels) {
      if (piece.empty()) continue;  // its data() may be null
      std::memcpy(p, piece.data(), piece.size());
      p += piece.size();
    }
    for (size_t i = 0; i < s.count; ++i) {
      const WireSample& x = s.samples[i];
      p = CodedOutputStream::WriteTagToArray(Tag(2, kLenDelimited), p);
      p = CodedOutputStream::WriteVarint32ToArray(static_cast<uint32_t>(SampleSize(x)), p);
      p = CodedOutputStream::WriteTagToArray(Tag(1, 1), p);  // value: 64-bit
      uint64_t bits;
      std::memcpy(&bits, &x.v, sizeof bits);
      p = CodedOutputStream::WriteLittleEndian64ToArray(bits, p);
      // timestamp: varint (int64, so a negative one is 10 bytes)
      p = CodedOutputStream::WriteTagToArray(Tag(2, 0), p);
      p = CodedOutputStream::WriteVarint64ToArray(static_cast<uint64_t>(x.t), p);
    }
  }
}

void Compress(std::string_view data, std::string& out) {
  snappy::Compress(data.data(), data.size(), &out);
}

}  // namespace gpufleet::remote
