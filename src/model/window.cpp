#include "model/window.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>

namespace gpufleet {
namespace {

constexpr std::array<std::string_view, 7> kShort{"sun", "mon", "tue", "wed", "thu", "fri", "sat"};
constexpr std::array<std::string_view, 7> kLong{"sunday",   "monday", "tuesday", "wednesday",
                                                "thursday", "friday", "saturday"};

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Whether window `w` (its zone `zone`) is open at `utc_s`, and if so when it closes.
bool OpenAt(const MaintenanceWindow& w, const TimeZone& zone, int64_t utc_s, int64_t& closes_s) {
  LocalTime local = ToLocal(utc_s, zone);
  int64_t len = w.LengthMinutes();
  for (int day : w.days) {
    // Minutes since this window's opening on `day` of this week or the last.
    int64_t since = (local.weekday - day + 7) % 7 * 1440 + local.minute_of_day - w.from_minute;
    if (since < 0) since += 7 * 1440;
    if (since < len) {
      // Local minutes to the close, as elapsed time (a DST change inside a window shifts the
      // close by the change, which is what a wall clock in that zone shows).
      closes_s = utc_s - utc_s % 60 + (len - since) * 60;
      return true;
    }
  }
  return false;
}

}  // namespace

int64_t MaintenanceWindow::LengthMinutes() const {
  return to_minute > from_minute ? to_minute - from_minute : 1440 - from_minute + to_minute;
}

int ParseWeekday(std::string_view text) {
  std::string t = Lower(text);
  for (int i = 0; i < 7; ++i) {
    if (t == kShort[i] || t == kLong[i]) return i;
  }
  return -1;
}

std::string_view WeekdayName(int day) { return day >= 0 && day < 7 ? kShort[day] : "?"; }

int ParseClock(std::string_view text, bool allow_24) {
  if (text.size() != 5 || text[2] != ':') return -1;
  for (size_t i : {0, 1, 3, 4}) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) return -1;
  }
  int h = (text[0] - '0') * 10 + (text[1] - '0');
  int m = (text[3] - '0') * 10 + (text[4] - '0');
  if (m > 59) return -1;
  if (h == 24 && m == 0 && allow_24) return 1440;
  if (h > 23) return -1;
  return h * 60 + m;
}

std::string FormatClock(int minute) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%02d:%02d", minute / 60, minute % 60);
  return buf;
}

Result<MaintenanceWindow> MakeWindow(const std::vector<std::string>& days, const std::string& from,
                                     const std::string& to, const std::string& timezone,
                                     const std::string& zoneinfo) {
  MaintenanceWindow w;
  if (days.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "days: must list at least one day, e.g. [sat]");
  }
  for (const auto& d : days) {
    int day = ParseWeekday(d);
    if (day < 0) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "days: '" + d + "' is not a day (mon, tue, wed, thu, fri, sat, sun)");
    }
    if (std::find(w.days.begin(), w.days.end(), day) != w.days.end()) {
      return MakeError(ErrorCode::kInvalidArgument, "days: '" + d + "' is listed twice");
    }
    w.days.push_back(day);
  }
  std::sort(w.days.begin(), w.days.end());
  w.from_minute = ParseClock(from, false);
  if (w.from_minute < 0) {
    return MakeError(ErrorCode::kInvalidArgument, "from: '" + from + "' is not a time HH:MM");
  }
  w.to_minute = ParseClock(to, true);
  if (w.to_minute < 0) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "to: '" + to + "' is not a time HH:MM (24:00 for midnight)");
  }
  if (w.to_minute == w.from_minute) {
    return MakeError(ErrorCode::kInvalidArgument, "to: the window must not be empty");
  }
  w.timezone = timezone.empty() ? "UTC" : timezone;
  if (auto zone = TimeZone::Load(w.timezone, zoneinfo); !zone.ok()) {
    return MakeError(ErrorCode::kInvalidArgument, "timezone: " + zone.error().message);
  }
  return w;
}

WindowState EvaluateWindows(const std::vector<MaintenanceWindow>& windows,
                            const std::vector<TimeZone>& zones, int64_t now_s) {
  WindowState st;
  if (windows.empty()) {
    st.always = st.open = true;
    return st;
  }
  int64_t closes = -1;
  for (size_t i = 0; i < windows.size() && i < zones.size(); ++i) {
    int64_t c = -1;
    if (OpenAt(windows[i], zones[i], now_s, c)) closes = std::max(closes, c);
  }
  if (closes >= 0) {
    st.open = true;
    st.closes_s = closes;
    return st;
  }
  // The next opening: windows open on whole local minutes, and every zone's offset is whole
  // minutes, so stepping minute by minute over 8 days finds it (11,520 steps at most).
  int64_t t = now_s - now_s % 60 + 60;
  for (int step = 0; step < 8 * 1440; ++step, t += 60) {
    for (size_t i = 0; i < windows.size() && i < zones.size(); ++i) {
      int64_t c = -1;
      if (OpenAt(windows[i], zones[i], t, c)) {
        st.next_open_s = t;
        return st;
      }
    }
  }
  return st;
}

}  // namespace gpufleet
