#include "api/gzip.h"

#include <zlib.h>

#include <cctype>

namespace gpufleet::api {

bool AcceptsGzip(std::string_view header) {
  size_t pos = 0;
  while (pos < header.size()) {
    size_t comma = header.find(',', pos);
    if (comma == std::string_view::npos) comma = header.size();
    std::string_view item = header.substr(pos, comma - pos);
    pos = comma + 1;
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.front()))) {
      item.remove_prefix(1);
    }
    std::string_view coding = item.substr(0, item.find(';'));
    while (!coding.empty() && std::isspace(static_cast<unsigned char>(coding.back()))) {
      coding.remove_suffix(1);
    }
    if (coding != "gzip" && coding != "*") continue;
    size_t q = item.find("q=");
    if (q == std::string_view::npos) return true;
    std::string_view qv = item.substr(q + 2);
    // q=0, q=0.0, q=0.000: refused; anything else admits it.
    bool zero = !qv.empty() && qv.front() == '0';
    for (size_t i = 1; zero && i < qv.size(); ++i) {
      char c = qv[i];
      if (c == ' ' || c == ';') break;
      if (c != '.' && c != '0') zero = false;
    }
    return !zero;
  }
  return false;
}

std::string Gzip(std::string_view in) {
  z_stream z{};
  // 15 window bits + 16: a gzip header and trailer; level 1 (the fastest) already gets most of
  // what JSON and JavaScript give.
  if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return {};
  std::string out;
  out.resize(deflateBound(&z, static_cast<uLong>(in.size())) + 32);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  int rc = deflate(&z, Z_FINISH);
  size_t written = out.size() - z.avail_out;
  deflateEnd(&z);
  if (rc != Z_STREAM_END) return {};
  out.resize(written);
  return out;
}

}  // namespace gpufleet::api
