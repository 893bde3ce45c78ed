#include "remote/wire.h"

#include <gtest/gtest.h>
#include <snappy.h>

#include <cmath>

#include "remote.pb.h"

namespace gpufleet::remote {
namespace {

// What gpufleet writes by hand with protobuf's CodedOutputStream, protobuf's generated code for
// the specification's messages reads back.
TEST(Wire, AWriteRequestDecodesWithTheSpecificationsMessages) {
  std::string a = EncodeLabels({{"__name__", "DCGM_FI_DEV_GPU_UTIL"},
                                {"Hostname", "n1"},
                                {"UUID", "GPU-1"},
                                {"cluster", std::string(300, 'c')}});
  std::string b = EncodeLabels({{"__name__", "DCGM_FI_DEV_POWER_USAGE"}, {"gpu", "0"}});
  const std::vector<WireSample> sa = {{1700000000000, 42}, {1700000001000, 43.5}};
  const std::vector<WireSample> sb = {{-5, 0.001}, {1700000000000, StaleNaN()}};
  // A series' labels in pieces, as a GPU's series carry them: before __name__, it, after it.
  const std::string a1 = EncodeLabels({{"Hostname", "n1"}, {"UUID", "GPU-1"}}),
                    a2 = EncodeLabels({{"__name__", "DCGM_FI_DEV_GPU_UTIL"}}),
                    a3 = EncodeLabels({{"cluster", std::string(300, 'c')}});
  EXPECT_EQ(a1 + a2 + a3, a);
  std::vector<WireSeries> series = {{{a1, a2, a3}, sa.data(), sa.size()},
                                    {{b, {}, {}}, sb.data(), sb.size()}};
  // The buffers hold an earlier, longer request: what is written replaces it.
  std::string encoded(100'000, 'x'), compressed(100'000, 'y'), raw;
  EncodeWriteRequest(series, encoded);
  Compress(encoded, compressed);
  ASSERT_TRUE(snappy::Uncompress(compressed.data(), compressed.size(), &raw));
  EXPECT_EQ(raw, encoded);
  prometheus::WriteRequest req;
  ASSERT_TRUE(req.ParseFromString(raw));
  ASSERT_EQ(req.timeseries_size(), 2);
  const auto& s0 = req.timeseries(0);
  ASSERT_EQ(s0.labels_size(), 4);
  // Byte order: upper case, then "__name__", then lower case.
  EXPECT_EQ(s0.labels(0).name(), "Hostname");
  EXPECT_EQ(s0.labels(1).name(), "UUID");
  EXPECT_EQ(s0.labels(2).name(), "__name__");
  EXPECT_EQ(s0.labels(2).value(), "DCGM_FI_DEV_GPU_UTIL");
  EXPECT_EQ(s0.labels(3).value(), std::string(300, 'c'));
  ASSERT_EQ(s0.samples_size(), 2);
  EXPECT_EQ(s0.samples(1).timestamp(), 1700000001000);
  EXPECT_EQ(s0.samples(1).value(), 43.5);
  const auto& s1 = req.timeseries(1);
  EXPECT_EQ(s1.samples(0).timestamp(), -5);
  EXPECT_EQ(s1.samples(0).value(), 0.001);
  EXPECT_TRUE(IsStaleNaN(s1.samples(1).value()));
  EXPECT_FALSE(IsStaleNaN(std::nan("")));
}

}  // namespace
}  // namespace gpufleet::remote
