// Maintenance windows: parsing with the field in errors, open and closed instants in UTC and in
// a zone with daylight time, windows past midnight, and when the next one opens.

#include "model/window.h"

#include <gtest/gtest.h>

namespace gpufleet {
namespace {

constexpr int64_t kSat0200 = 1796436000;  // 2026-12-05 02:00 UTC, a Saturday

struct Windows {
  std::vector<MaintenanceWindow> list;
  std::vector<TimeZone> zones;
  void Add(std::vector<std::string> days, std::string from, std::string to, std::string zone) {
    auto w = MakeWindow(days, from, to, zone);
    ASSERT_TRUE(w.ok()) << w.error().message;
    list.push_back(w.value());
    zones.push_back(TimeZone::Load(w->timezone).value());
  }
  WindowState At(int64_t t) const { return EvaluateWindows(list, zones, t); }
};

TEST(MaintenanceWindow, ReadsDaysAndTimesAndNamesTheFieldThatIsWrong) {
  auto w = MakeWindow({"Sat", "sunday"}, "02:00", "06:00", "");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->days, (std::vector<int>{0, 6}));
  EXPECT_EQ(w->from_minute, 120);
  EXPECT_EQ(w->to_minute, 360);
  EXPECT_EQ(w->timezone, "UTC");
  EXPECT_EQ(w->LengthMinutes(), 240);
  EXPECT_EQ(MakeWindow({"sat"}, "22:00", "02:00", "UTC")->LengthMinutes(), 240);
  EXPECT_EQ(MakeWindow({"sat"}, "00:00", "24:00", "UTC")->LengthMinutes(), 1440);

  auto starts = [](const Result<MaintenanceWindow>& r, const std::string& prefix) {
    return !r.ok() && r.error().message.rfind(prefix, 0) == 0;
  };
  EXPECT_TRUE(starts(MakeWindow({}, "02:00", "06:00", "UTC"), "days: "));
  EXPECT_TRUE(starts(MakeWindow({"caturday"}, "02:00", "06:00", "UTC"), "days: 'caturday'"));
  EXPECT_TRUE(starts(MakeWindow({"sat", "SAT"}, "02:00", "06:00", "UTC"), "days: 'SAT' is listed"));
  EXPECT_TRUE(starts(MakeWindow({"sat"}, "2am", "06:00", "UTC"), "from: '2am'"));
  EXPECT_TRUE(starts(MakeWindow({"sat"}, "24:00", "06:00", "UTC"), "from: "));
  EXPECT_TRUE(starts(MakeWindow({"sat"}, "02:00", "06:60", "UTC"), "to: "));
  EXPECT_TRUE(starts(MakeWindow({"sat"}, "02:00", "02:00", "UTC"), "to: "));
  EXPECT_TRUE(starts(MakeWindow({"sat"}, "02:00", "06:00", "Mars/Olympus"), "timezone: "));
  EXPECT_TRUE(starts(MakeWindow({"sat"}, "02:00", "06:00", "../etc/passwd"), "timezone: "));
}

TEST(MaintenanceWindow, IsOpenFromItsStartUntilItsEndAndSaysWhenItCloses) {
  Windows w;
  w.Add({"sat"}, "02:00", "06:00", "UTC");
  WindowState before = w.At(kSat0200 - 60);
  EXPECT_FALSE(before.open);
  EXPECT_EQ(before.next_open_s, kSat0200);
  WindowState start = w.At(kSat0200);
  EXPECT_TRUE(start.open);
  EXPECT_EQ(start.closes_s, kSat0200 + 4 * 3600);
  EXPECT_TRUE(w.At(kSat0200 + 4 * 3600 - 1).open);
  WindowState after = w.At(kSat0200 + 4 * 3600);
  EXPECT_FALSE(after.open);
  EXPECT_EQ(after.next_open_s, kSat0200 + 7 * 86400);  // next Saturday
  EXPECT_FALSE(w.At(kSat0200 + 86400).open);           // Sunday 02:00
}

TEST(MaintenanceWindow, NoWindowsMeansAlwaysOpen) {
  WindowState st = EvaluateWindows({}, {}, kSat0200);
  EXPECT_TRUE(st.always);
  EXPECT_TRUE(st.open);
}

TEST(MaintenanceWindow, AWindowPastMidnightEndsOnTheNextDay) {
  Windows w;
  w.Add({"sat"}, "22:00", "02:00", "UTC");
  EXPECT_FALSE(w.At(kSat0200).open);                       // Saturday 02:00: not yet
  EXPECT_TRUE(w.At(kSat0200 + 20 * 3600).open);            // Saturday 22:00
  EXPECT_TRUE(w.At(kSat0200 + 23 * 3600 + 30 * 60).open);  // Sunday 01:30
  EXPECT_EQ(w.At(kSat0200 + 23 * 3600).closes_s, kSat0200 + 24 * 3600);
  EXPECT_FALSE(w.At(kSat0200 + 24 * 3600).open);  // Sunday 02:00
}

TEST(MaintenanceWindow, FollowsTheZonesLocalTimeAcrossDaylightTime) {
  Windows w;
  w.Add({"sat"}, "02:00", "06:00", "Europe/Berlin");
  // In December Berlin is UTC+1: 02:00 local is 01:00 UTC.
  EXPECT_TRUE(w.At(kSat0200 - 3600).open);
  EXPECT_FALSE(w.At(kSat0200 - 3600 - 60).open);
  EXPECT_EQ(w.At(kSat0200 - 3600 - 60).next_open_s, kSat0200 - 3600);
  // 2026-07-04, a Saturday in summer time (UTC+2): 02:00 local is 00:00 UTC.
  const int64_t july_sat_0030 = 1783125000;
  EXPECT_TRUE(w.At(july_sat_0030).open);
  EXPECT_EQ(w.At(july_sat_0030).closes_s, july_sat_0030 - 30 * 60 + 4 * 3600);
}

TEST(MaintenanceWindow, TheSoonestOfSeveralWindowsOpensNext) {
  Windows w;
  w.Add({"sun"}, "03:00", "04:00", "UTC");
  w.Add({"sat"}, "04:00", "05:00", "UTC");
  EXPECT_EQ(w.At(kSat0200).next_open_s, kSat0200 + 2 * 3600);
  EXPECT_EQ(w.At(kSat0200 + 3 * 3600).next_open_s, kSat0200 + 25 * 3600);
}

}  // namespace
}  // namespace gpufleet
