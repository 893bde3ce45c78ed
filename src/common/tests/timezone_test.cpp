// Time zones read from the tz database (tzdata): transitions, the footer's rule after them, the
// southern hemisphere, zones without daylight time, and clear errors.

#include "common/timezone.h"

#include <gtest/gtest.h>

namespace gpufleet {
namespace {

int64_t Offset(const std::string& zone, int64_t utc_s) {
  auto z = TimeZone::Load(zone);
  EXPECT_TRUE(z.ok()) << (z.ok() ? "" : z.error().message);
  return z.ok() ? z->OffsetAt(utc_s) : -1;
}

TEST(TimeZone, OffsetsFollowTheTransitionsToTheSecond) {
  EXPECT_EQ(Offset("UTC", 1768435200), 0);
  EXPECT_EQ(Offset("Europe/Berlin", 1768435200), 3600);  // 2026-01-15
  EXPECT_EQ(Offset("Europe/Berlin", 1782864000), 7200);  // 2026-07-01
  // 2026-03-29 01:00 UTC: 02:00 CET becomes 03:00 CEST; 2026-10-25 01:00 UTC: back.
  EXPECT_EQ(Offset("Europe/Berlin", 1774746000 - 1), 3600);
  EXPECT_EQ(Offset("Europe/Berlin", 1774746000), 7200);
  EXPECT_EQ(Offset("Europe/Berlin", 1792890000 - 1), 7200);
  EXPECT_EQ(Offset("Europe/Berlin", 1792890000), 3600);
  EXPECT_EQ(Offset("America/New_York", 1772953200 - 1), -18000);  // 2026-03-08 07:00 UTC
  EXPECT_EQ(Offset("America/New_York", 1772953200), -14400);
  EXPECT_EQ(Offset("Australia/Sydney", 1768435200), 39600);  // January: daylight time
  EXPECT_EQ(Offset("Australia/Sydney", 1782864000), 36000);
  EXPECT_EQ(Offset("Asia/Kolkata", 1782864000), 19800);
  // 2040: past the transitions of a slim file, the footer's rule decides.
  EXPECT_EQ(Offset("Europe/Berlin", 2224713600), 7200);
  EXPECT_EQ(Offset("Australia/Sydney", 2208988800), 39600);
  EXPECT_EQ(Offset("Australia/Sydney", 2222121600), 36000);
}

TEST(TimeZone, PosixRulesCoverBothHemispheres) {
  auto eu = ParsePosixTz("CET-1CEST,M3.5.0,M10.5.0/3");
  ASSERT_TRUE(eu.ok()) << eu.error().message;
  EXPECT_EQ(eu->std_offset_s, 3600);
  EXPECT_EQ(eu->dst_offset_s, 7200);
  EXPECT_EQ(eu->OffsetAt(2224713600), 7200);
  auto au = ParsePosixTz("AEST-10AEDT,M10.1.0,M4.1.0/3");
  ASSERT_TRUE(au.ok());
  EXPECT_EQ(au->OffsetAt(2208988800), 39600);
  EXPECT_EQ(au->OffsetAt(2222121600), 36000);
  auto india = ParsePosixTz("IST-5:30");
  ASSERT_TRUE(india.ok());
  EXPECT_EQ(india->OffsetAt(0), 19800);
  EXPECT_EQ(ParsePosixTz("<+0330>-3:30")->OffsetAt(0), 12600);
  auto julian = ParsePosixTz("CET-1CEST,J60,J300");
  ASSERT_FALSE(julian.ok());
  EXPECT_NE(julian.error().message.find("Mm.w.d"), std::string::npos);
}

TEST(TimeZone, LocalTimeGivesTheWeekdayAndMinute) {
  // 2026-12-05 02:30 UTC is a Saturday: 03:30 in Berlin, Friday 21:30 in New York.
  auto utc = ToLocal(1796437800, TimeZone::Load("UTC").value());
  EXPECT_EQ(utc.weekday, 6);
  EXPECT_EQ(utc.minute_of_day, 150);
  auto berlin = ToLocal(1796437800, TimeZone::Load("Europe/Berlin").value());
  EXPECT_EQ(berlin.weekday, 6);
  EXPECT_EQ(berlin.minute_of_day, 210);
  auto ny = ToLocal(1796437800, TimeZone::Load("America/New_York").value());
  EXPECT_EQ(ny.weekday, 5);
  EXPECT_EQ(ny.minute_of_day, 21 * 60 + 30);
  int64_t y = 0;
  int m = 0, d = 0;
  CivilFromDays(DaysFromCivil(2028, 2, 29), y, m, d);
  EXPECT_EQ(y * 10000 + m * 100 + d, 20280229);
}

TEST(TimeZone, BadNamesAndFilesAreClearErrors) {
  auto traversal = TimeZone::Load("../../etc/passwd");
  ASSERT_FALSE(traversal.ok());
  EXPECT_EQ(traversal.error().message,
            "time zone '../../etc/passwd': not a time zone name such as Europe/Berlin");
  auto unknown = TimeZone::Load("Mars/Olympus_Mons");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("apt-get install tzdata"), std::string::npos);
  auto garbage = TimeZone::Parse("x", "not a tzif file at all, but long enough to read a header");
  ASSERT_FALSE(garbage.ok());
  EXPECT_EQ(garbage.error().message, "time zone 'x': not a TZif file");
  std::string cut = "TZif2";
  cut.resize(44, '\0');
  cut[20 + 3 * 4 + 3] = 5;  // five transitions, and no bytes for them
  EXPECT_FALSE(TimeZone::Parse("cut", cut).ok());
}

}  // namespace
}  // namespace gpufleet
