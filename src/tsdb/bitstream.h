#pragma once
// Bit-level writer and reader for the compressed chunks (most significant bit first).
// Not thread-safe; owned by one chunk.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

namespace gpufleet::tsdb {

class BitWriter {
 public:
  // Appends the low `nbits` (0..64) bits of `value`.
  void Write(uint64_t value, int nbits) {
    if (nbits > 32) {
      Write(value >> 32, nbits - 32);
      value &= 0xffffffffULL;
      nbits = 32;
    }
    if (nbits == 0) return;
    uint64_t acc = (static_cast<uint64_t>(acc_) << nbits) | (value & ((1ULL << nbits) - 1));
    int pending = pending_ + nbits;
    while (pending >= 8) {
      pending -= 8;
      if (bytes_.size() == bytes_.capacity()) Grow();
      bytes_.push_back(static_cast<uint8_t>(acc >> pending));
    }
    acc_ = static_cast<uint8_t>(acc & ((1u << pending) - 1));
    pending_ = static_cast<uint8_t>(pending);
  }
  void WriteBit(bool bit) { Write(bit ? 1 : 0, 1); }
  size_t bit_size() const { return bytes_.size() * 8 + pending_; }
  // The bytes written so far, the last partial byte padded with zeros.
  std::vector<uint8_t> Bytes() const {
    std::vector<uint8_t> out = bytes_;
    if (pending_) out.push_back(static_cast<uint8_t>(acc_ << (8 - pending_)));
    return out;
  }
  void Shrink() { bytes_.shrink_to_fit(); }

  // The whole state, for checkpoints: restoring it continues the stream exactly.
  const std::vector<uint8_t>& whole_bytes() const { return bytes_; }
  uint8_t acc() const { return acc_; }
  uint8_t pending() const { return pending_; }
  void Restore(std::vector<uint8_t> bytes, uint8_t acc, uint8_t pending) {
    bytes_ = std::move(bytes);
    acc_ = acc;
    pending_ = pending;
  }

 private:
  // By a quarter (at least 16 bytes), to a size malloc's 16-byte chunks hold whole, rather than
  // twice: a chunk stays open for minutes, and millions are open at once.
  void Grow() {
    size_t want = bytes_.capacity() + std::max<size_t>(16, bytes_.capacity() / 4);
    bytes_.reserve(((want + 8 + 15) & ~size_t{15}) - 8);
  }

  std::vector<uint8_t> bytes_;
  uint8_t acc_ = 0;  // the last `pending_` (< 8) bits not yet in bytes_
  uint8_t pending_ = 0;
};

class BitReader {
 public:
  BitReader(const uint8_t* data, size_t bits) : data_(data), bits_(bits) {}
  // The next `nbits` (0..64) bits, or nullopt past the end.
  std::optional<uint64_t> Read(int nbits) {
    if (pos_ + static_cast<size_t>(nbits) > bits_) return std::nullopt;
    if (nbits == 0) return 0;
    if (nbits > 56) {  // wider than one window: two reads
      uint64_t high = *Read(nbits - 32);
      return (high << 32) | *Read(32);
    }
    uint64_t window = Window();
    pos_ += static_cast<size_t>(nbits);
    return window >> (64 - nbits);
  }
  // The next `nbits` (1..56) bits without consuming them; zeros past the end.
  uint64_t Peek(int nbits) const { return Window() >> (64 - nbits); }
  bool Skip(int nbits) {
    if (pos_ + static_cast<size_t>(nbits) > bits_) return false;
    pos_ += static_cast<size_t>(nbits);
    return true;
  }
  std::optional<bool> ReadBit() {
    if (pos_ >= bits_) return std::nullopt;
    bool bit = (data_[pos_ >> 3] >> (7 - (pos_ & 7))) & 1;
    ++pos_;
    return bit;
  }

 private:
  // The 64 bits from pos_, most significant first: at least 57 of them are the stream's
  // (the rest, and anything past its end, are zeros).
  uint64_t Window() const {
    size_t byte = pos_ >> 3;
    size_t bytes = (bits_ + 7) >> 3;
    uint64_t window = 0;
    if (byte + 8 <= bytes) {
      std::memcpy(&window, data_ + byte, 8);
      window = __builtin_bswap64(window);  // the stream is big-endian; x86 and ARM are not
    } else {
      for (size_t i = 0; i < 8; ++i) {
        window = (window << 8) | (byte + i < bytes ? data_[byte + i] : 0);
      }
    }
    return window << (pos_ & 7);
  }

  const uint8_t* data_;
  size_t bits_;
  size_t pos_ = 0;
};

}  // namespace gpufleet::tsdb
