#pragma once
// The bit codings that raw chunks (chunk.cpp) and rollup chunks (bucket_chunk.cpp) share:
// Prometheus's bucket ladders for deltas and Gorilla's XOR of a double with the previous one.
// Internal to tsdb/.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <optional>

#include "tsdb/bitstream.h"

namespace gpufleet::tsdb {

inline uint64_t Bits(double v) { return std::bit_cast<uint64_t>(v); }
inline double FromBits(uint64_t b) { return std::bit_cast<double>(b); }

// Signed value in `n` bits, range [-(2^(n-1) - 1), 2^(n-1)], as Prometheus's bitRange.
inline bool InRange(int64_t x, int n) {
  return -((1LL << (n - 1)) - 1) <= x && x <= (1LL << (n - 1));
}
inline int64_t SignExtend(uint64_t bits, int n) {
  int64_t v = static_cast<int64_t>(bits);
  if (v > (1LL << (n - 1))) v -= 1LL << n;
  return v;
}

// One of the shared bucket ladders: prefix '0' for zero, then '10', '110', '1110' with the
// given widths, and '1111' + 64 bits for anything else.
struct Ladder {
  int widths[3];
};
constexpr Ladder kTimeLadder{{14, 17, 20}};
constexpr Ladder kIntLadder{{8, 16, 32}};

inline void WriteLadder(BitWriter& w, int64_t x, const Ladder& l) {
  if (x == 0) {
    w.Write(0b0, 1);
  } else if (InRange(x, l.widths[0])) {
    w.Write(0b10, 2);
    w.Write(static_cast<uint64_t>(x), l.widths[0]);
  } else if (InRange(x, l.widths[1])) {
    w.Write(0b110, 3);
    w.Write(static_cast<uint64_t>(x), l.widths[1]);
  } else if (InRange(x, l.widths[2])) {
    w.Write(0b1110, 4);
    w.Write(static_cast<uint64_t>(x), l.widths[2]);
  } else {
    w.Write(0b1111, 4);
    w.Write(static_cast<uint64_t>(x), 64);
  }
}

inline std::optional<int64_t> ReadLadder(BitReader& r, const Ladder& l) {
  // The prefix: up to four 1 bits, ended by a 0 unless there are four. A short rung (at most
  // 3 + 1 + 32 bits) is read from one 57-bit window.
  uint64_t w = r.Peek(56) << 8;
  int ones = std::min(4, std::countl_one(w));
  if (ones > 0 && ones < 4) {
    int n = l.widths[ones - 1];
    if (!r.Skip(ones + 1 + n)) return std::nullopt;
    return SignExtend((w << (ones + 1)) >> (64 - n), n);
  }
  if (!r.Skip(ones == 4 ? 4 : 1)) return std::nullopt;
  if (ones == 0) return 0;
  if (ones == 4) {
    auto raw = r.Read(64);
    if (!raw) return std::nullopt;
    return static_cast<int64_t>(*raw);
  }
  int n = l.widths[ones - 1];
  auto raw = r.Read(n);
  if (!raw) return std::nullopt;
  return SignExtend(*raw, n);
}

// A double after the first, as the XOR `x` with the previous one's bits: '0' when equal, '10'
// and the meaningful bits inside the previous window (`leading`, `trailing`; leading -1: none
// yet), else '11', a new window and its bits.
inline void WriteXor(BitWriter& w, uint64_t x, int8_t& leading, int8_t& trailing) {
  if (x == 0) {
    w.Write(0b0, 1);
    return;
  }
  int8_t lead = static_cast<int8_t>(std::min(std::countl_zero(x), 31));
  int8_t trail = static_cast<int8_t>(std::countr_zero(x));
  if (leading >= 0 && lead >= leading && trail >= trailing) {
    w.Write(0b10, 2);
    w.Write(x >> trailing, 64 - leading - trailing);
    return;
  }
  int sig = 64 - lead - trail;
  w.Write(0b11, 2);
  w.Write(static_cast<uint64_t>(lead), 5);
  w.Write(static_cast<uint64_t>(sig == 64 ? 0 : sig), 6);
  w.Write(x >> trail, sig);
  leading = lead;
  trailing = trail;
}

// The XOR that WriteXor wrote, with the reader's own window; nullopt past the end.
inline std::optional<uint64_t> ReadXor(BitReader& r, int& leading, int& trailing) {
  auto changed = r.ReadBit();
  if (!changed) return std::nullopt;
  if (!*changed) return 0;
  auto fresh = r.ReadBit();
  if (!fresh) return std::nullopt;
  if (*fresh) {
    auto lead = r.Read(5), sig = r.Read(6);
    if (!sig) return std::nullopt;
    leading = static_cast<int>(*lead);
    trailing = 64 - leading - (*sig == 0 ? 64 : static_cast<int>(*sig));
    if (trailing < 0) return std::nullopt;  // a damaged window
  }
  auto bits = r.Read(64 - leading - trailing);
  if (!bits) return std::nullopt;
  return *bits << trailing;
}

}  // namespace gpufleet::tsdb
