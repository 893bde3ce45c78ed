#pragma once
// Little-endian binary encoding for the write-ahead log and checkpoints, and CRC-32C.

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace gpufleet::tsdb {

// CRC-32C (Castagnoli), with the CPU's CRC instruction where it has one.
uint32_t Crc32c(std::string_view data);
// The same, a byte at a time from a table: where the CPU has no CRC instruction, and for tests.
uint32_t Crc32cBytewise(std::string_view data);

class Encoder {
 public:
  void U8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void U16(uint16_t v) { Raw(&v, 2); }
  void U32(uint32_t v) { Raw(&v, 4); }
  void U64(uint64_t v) { Raw(&v, 8); }
  void I64(int64_t v) { Raw(&v, 8); }
  void F64(double v) { Raw(&v, 8); }
  void Varint(uint64_t v) {
    while (v >= 0x80) {
      out_.push_back(static_cast<char>((v & 0x7f) | 0x80));
      v >>= 7;
    }
    out_.push_back(static_cast<char>(v));
  }
  void Zigzag(int64_t v) {
    Varint((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63));
  }
  void Str(std::string_view s) {
    U32(static_cast<uint32_t>(s.size()));
    out_.append(s);
  }
  std::string& out() { return out_; }

 private:
  void Raw(const void* p, size_t n) {
    out_.append(static_cast<const char*>(p), n);
  }  // x86-64 and arm64 are little-endian
  std::string out_;
};

class Decoder {
 public:
  explicit Decoder(std::string_view in) : in_(in) {}
  template <class T>
  std::optional<T> Get() {
    if (in_.size() < sizeof(T)) return std::nullopt;
    T v;
    std::memcpy(&v, in_.data(), sizeof(T));
    in_.remove_prefix(sizeof(T));
    return v;
  }
  std::optional<uint64_t> Varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (in_.empty()) return std::nullopt;
      auto b = static_cast<uint8_t>(in_.front());
      in_.remove_prefix(1);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    return std::nullopt;
  }
  std::optional<int64_t> Zigzag() {
    auto v = Varint();
    if (!v) return std::nullopt;
    return static_cast<int64_t>((*v >> 1) ^ (~(*v & 1) + 1));
  }
  std::optional<std::string_view> Str() {
    auto n = Get<uint32_t>();
    if (!n || in_.size() < *n) return std::nullopt;
    std::string_view s = in_.substr(0, *n);
    in_.remove_prefix(*n);
    return s;
  }
  bool empty() const { return in_.empty(); }

 private:
  std::string_view in_;
};

}  // namespace gpufleet::tsdb
