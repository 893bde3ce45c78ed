#include "common/clock.h"

#include <gtest/gtest.h>

namespace gpufleet {
namespace {

TEST(ParseDurationMs, UnitsBadInputAndOverflow) {
  EXPECT_EQ(ParseDurationMs("250ms"), 250);
  EXPECT_EQ(ParseDurationMs("90"), 90'000);
  EXPECT_EQ(ParseDurationMs("30s"), 30'000);
  EXPECT_EQ(ParseDurationMs("5m"), 300'000);
  EXPECT_EQ(ParseDurationMs("2h"), 7'200'000);
  EXPECT_EQ(ParseDurationMs("7d"), 604'800'000);
  EXPECT_EQ(ParseDurationMs("99999999999h"), 99'999'999'999LL * 3'600'000);
  for (const char* bad : {"", "m", "-5m", "5x", "1.5h", "5 m", "1234567890123s"}) {
    EXPECT_EQ(ParseDurationMs(bad), -1) << bad;
  }
  // 999,999,999,999 days is more milliseconds than int64 holds: rejected, not wrapped.
  EXPECT_EQ(ParseDurationMs("999999999999d"), -1);
  EXPECT_EQ(ParseDurationMs("999999999999h"), 999'999'999'999LL * 3'600'000);
}

}  // namespace
}  // namespace gpufleet
