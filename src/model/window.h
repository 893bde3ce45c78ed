#pragma once
// Maintenance windows: weekly spans of local time in a named zone ("Saturday 02:00-06:00
// Europe/Berlin") when disruptive work (firmware flashes, driver installs) may start on a
// cluster's or a pool's nodes. A window whose end is not after its start runs past midnight
// into the next day (sat 22:00-02:00 ends Sunday 02:00).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "common/timezone.h"

namespace gpufleet {

struct MaintenanceWindow {
  std::vector<int> days;  // weekdays it starts on, Sunday 0 .. Saturday 6, ascending
  int from_minute = 0;    // local minute of the day it opens, 0..1439
  int to_minute = 0;      // local minute it closes, 1..1440; <= from_minute: the next day
  std::string timezone = "UTC";
  bool operator==(const MaintenanceWindow&) const = default;
  int64_t LengthMinutes() const;
};

// "sat", "saturday" (any case) -> 6; -1 for anything else.
int ParseWeekday(std::string_view text);
std::string_view WeekdayName(int day);  // "sat"
// "02:00" -> 120; "24:00" -> 1440 (only when allow_24); -1 for anything else.
int ParseClock(std::string_view text, bool allow_24);
std::string FormatClock(int minute);  // 120 -> "02:00"

// A window from its parts, checked: days known and not repeated, times HH:MM, the zone one
// the tz database has (loaded through `zoneinfo`). kInvalidArgument naming the field
// ("days", "from", "to", "timezone") first, then ": " and why.
Result<MaintenanceWindow> MakeWindow(const std::vector<std::string>& days, const std::string& from,
                                     const std::string& to, const std::string& timezone,
                                     const std::string& zoneinfo = "/usr/share/zoneinfo");

// Whether a set of windows is open at an instant and when that changes, all in UTC seconds.
// No windows at all means always open (`always` true, no next times).
struct WindowState {
  bool always = false;
  bool open = false;
  int64_t closes_s = -1;     // while open: when the open window ends
  int64_t next_open_s = -1;  // while closed: when the next one opens (within 8 days), else -1
};
// `zones` holds one loaded zone per window, in the same order (the caller caches them).
WindowState EvaluateWindows(const std::vector<MaintenanceWindow>& windows,
                            const std::vector<TimeZone>& zones, int64_t now_s);

}  // namespace gpufleet
