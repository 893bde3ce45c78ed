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

std::string EncodeWriteRequest(const std::vector<WireSeries>& series) {
  std::string out;
  {
    StringOutputStream stream(&out);
    CodedOutputStream coded(&stream);
    for (const auto& s : series) {
      // WriteRequest.timeseries = 1: TimeSeries { labels = 1; samples = 2; }
      size_t inner = s.labels->size();
      for (const auto& x : s.samples) inner += 1 + 1 + SampleSize(x);
      coded.WriteTag(Tag(1, kLenDelimited));
      coded.WriteVarint32(static_cast<uint32_t>(inner));
      coded.WriteRaw(s.labels->data(), static_cast<int>(s.labels->size()));
      for (const auto& x : s.samples) {
        coded.WriteTag(Tag(2, kLenDelimited));
        coded.WriteVarint32(static_cast<uint32_t>(SampleSize(x)));
        coded.WriteTag(Tag(1, 1));  // value: 64-bit
        uint64_t bits;
        std::memcpy(&bits, &x.v, sizeof bits);
        coded.WriteLittleEndian64(bits);
        coded.WriteTag(Tag(2, 0));  // timestamp: varint (int64, so negative is 10 bytes)
        coded.WriteVarint64(static_cast<uint64_t>(x.t));
      }
    }
  }
  return out;
}

std::string Compress(std::string_view data) {
  std::string out;
  snappy::Compress(data.data(), data.size(), &out);
  return out;
}

}  // namespace gpufleet::remote
