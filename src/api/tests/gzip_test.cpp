#include "api/gzip.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <string>

namespace gpufleet::api {
namespace {

std::string Gunzip(const std::string& in) {
  z_stream z{};
  EXPECT_EQ(inflateInit2(&z, 15 + 16), Z_OK);
  std::string out(1 << 20, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(inflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(out.size() - z.avail_out);
  inflateEnd(&z);
  return out;
}

TEST(Gzip, AcceptEncodingAdmitsGzipUnlessItsQualityIsZero) {
  EXPECT_TRUE(AcceptsGzip("gzip"));
  EXPECT_TRUE(AcceptsGzip("gzip, deflate, br, zstd"));  // Chromium's
  EXPECT_TRUE(AcceptsGzip("br;q=1.0, gzip;q=0.8"));
  EXPECT_TRUE(AcceptsGzip("*"));
  EXPECT_FALSE(AcceptsGzip(""));
  EXPECT_FALSE(AcceptsGzip("br, deflate"));
  EXPECT_FALSE(AcceptsGzip("gzip;q=0"));
  EXPECT_FALSE(AcceptsGzip("gzip;q=0.000, br"));
  EXPECT_FALSE(AcceptsGzip("x-gzip"));
}

TEST(Gzip, RoundTripsAndShrinksRepetitiveJson) {
  std::string json = "{\"values\":[";
  for (int i = 0; i < 10000; ++i) json += std::to_string(i % 100) + ",";
  json += "0]}";
  std::string packed = Gzip(json);
  ASSERT_FALSE(packed.empty());
  EXPECT_LT(packed.size(), json.size() / 4);
  EXPECT_EQ(static_cast<unsigned char>(packed[0]), 0x1f);  // the gzip magic
  EXPECT_EQ(static_cast<unsigned char>(packed[1]), 0x8b);
  EXPECT_EQ(Gunzip(packed), json);
  EXPECT_EQ(Gunzip(Gzip("")), "");
}

}  // namespace
}  // namespace gpufleet::api
