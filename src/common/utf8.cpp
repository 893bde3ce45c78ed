#include "common/utf8.h"

namespace gpufleet {

size_t InvalidUtf8At(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    unsigned lo = 0x80, hi = 0xbf;  // the second byte's range (RFC 3629's table)
    if (c >= 0xc2 && c <= 0xdf) {
      len = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
      len = 3;
      if (c == 0xe0) lo = 0xa0;  // no overlong forms
      if (c == 0xed) hi = 0x9f;  // no surrogates
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4;
      if (c == 0xf0) lo = 0x90;  // no overlong forms
      if (c == 0xf4) hi = 0x8f;  // nothing past U+10FFFF
    } else {
      return i;
    }
    if (i + len > n || s[i + 1] < lo || s[i + 1] > hi) return i;
    for (size_t k = 2; k < len; ++k) {
      if (s[i + k] < 0x80 || s[i + k] > 0xbf) return i;
    }
    i += len;
  }
  return std::string_view::npos;
}

std::string ToUtf8(std::string_view text) {
  std::string out;
  for (size_t at = InvalidUtf8At(text); at != std::string_view::npos; at = InvalidUtf8At(text)) {
    out.append(text.substr(0, at));
    out += "\xEF\xBF\xBD";
    text.remove_prefix(at + 1);
  }
  out.append(text);
  return out;
}

}  // namespace gpufleet
