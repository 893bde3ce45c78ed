#pragma once
// Time zones from the system's tz database: the TZif files under /usr/share/zoneinfo (RFC 8536,
// versions 1 to 4), their transitions and the POSIX TZ rule of their footer for times after the
// last transition. For what is local time in a cluster's zone (maintenance windows). GCC 12 has
// no std::chrono tzdb, and setenv("TZ") with localtime_r would change the whole process.

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"

namespace gpufleet {

// A POSIX TZ rule, "CET-1CEST,M3.5.0,M10.5.0/3": standard and daylight offsets east of UTC in
// seconds, and when daylight time starts and ends (month, week 1-5 (5: the last), weekday 0-6
// (Sunday 0), at seconds of local time). No daylight part: `dst` is false.
struct PosixTzRule {
  int64_t std_offset_s = 0;
  bool dst = false;
  int64_t dst_offset_s = 0;
  int start_month = 0, start_week = 0, start_day = 0;
  int64_t start_time_s = 7200;
  int end_month = 0, end_week = 0, end_day = 0;
  int64_t end_time_s = 7200;
  int64_t OffsetAt(int64_t utc_s) const;
};
// kInvalidArgument for a rule it cannot read (the Jn and n day forms are not supported).
Result<PosixTzRule> ParsePosixTz(const std::string& text);

class TimeZone {
 public:
  // "UTC" (also "Etc/UTC") needs no file. Any other name is read from zoneinfo/NAME; the name
  // must look like one ("Europe/Berlin": letters, digits, '_', '-', '+', '/'; no "..").
  static Result<TimeZone> Load(const std::string& name,
                               const std::string& zoneinfo = "/usr/share/zoneinfo");
  // A TZif file's bytes; `name` is for messages.
  static Result<TimeZone> Parse(const std::string& name, const std::string& bytes);

  const std::string& name() const { return name_; }
  // Seconds east of UTC at the instant `utc_s` (seconds since the epoch).
  int64_t OffsetAt(int64_t utc_s) const;

 private:
  std::string name_;
  std::vector<int64_t> transitions_;  // UTC seconds, ascending
  std::vector<uint8_t> types_;        // the type each transition starts
  std::vector<int64_t> offsets_;      // each type's offset
  int64_t first_offset_s_ = 0;        // before the first transition
  bool has_rule_ = false;             // the footer, after the last transition
  PosixTzRule rule_;
};

// The local calendar of an instant: weekday (Sunday 0) and minute of the day.
struct LocalTime {
  int weekday = 0;
  int minute_of_day = 0;
};
LocalTime ToLocal(int64_t utc_s, const TimeZone& zone);

// Days since 1970-01-01 of a proleptic Gregorian date, and back (month 1-12).
int64_t DaysFromCivil(int64_t year, int month, int day);
void CivilFromDays(int64_t days, int64_t& year, int& month, int& day);

}  // namespace gpufleet
