#include "common/timezone.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

namespace gpufleet {

// Howard Hinnant's days_from_civil / civil_from_days.
int64_t DaysFromCivil(int64_t y, int m, int d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

void CivilFromDays(int64_t z, int64_t& y, int& m, int& d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const int64_t doe = z - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  d = static_cast<int>(doy - (153 * mp + 2) / 5 + 1);
  m = static_cast<int>(mp < 10 ? mp + 3 : mp - 9);
  y = yoe + era * 400 + (m <= 2);
}

namespace {

int64_t FloorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

// Local seconds since the epoch at which rule day Mm.w.d of `year` begins, plus `time_s`.
int64_t RuleLocal(int64_t year, int month, int week, int weekday, int64_t time_s) {
  int64_t first = DaysFromCivil(year, month, 1);
  int first_weekday = static_cast<int>(((first % 7) + 11) % 7);  // 1970-01-01 was a Thursday
  int64_t day = first + (weekday - first_weekday + 7) % 7 + (week - 1) * 7;
  int next_month = month == 12 ? 1 : month + 1;
  int64_t next = DaysFromCivil(month == 12 ? year + 1 : year, next_month, 1);
  while (day >= next) day -= 7;  // week 5: the last such weekday of the month
  return day * 86400 + time_s;
}

class TzReader {
 public:
  explicit TzReader(const std::string& s) : s_(s) {}
  bool done() const { return i_ >= s_.size(); }
  char peek() const { return done() ? '\0' : s_[i_]; }

  // A zone abbreviation: letters, or <...> quoted.
  bool Name() {
    if (peek() == '<') {
      size_t end = s_.find('>', i_);
      if (end == std::string::npos) return false;
      i_ = end + 1;
      return true;
    }
    size_t start = i_;
    while (std::isalpha(static_cast<unsigned char>(peek()))) ++i_;
    return i_ - start >= 3;
  }
  // [+-]hh[:mm[:ss]] as seconds.
  bool Time(int64_t& out, bool allow_sign = true) {
    int sign = 1;
    if (allow_sign && (peek() == '+' || peek() == '-')) sign = s_[i_++] == '-' ? -1 : 1;
    int64_t parts[3] = {0, 0, 0};
    for (int k = 0; k < 3; ++k) {
      if (!std::isdigit(static_cast<unsigned char>(peek()))) return k > 0;
      int64_t v = 0;
      while (std::isdigit(static_cast<unsigned char>(peek()))) v = v * 10 + (s_[i_++] - '0');
      parts[k] = v;
      out = sign * (parts[0] * 3600 + parts[1] * 60 + parts[2]);
      if (peek() != ':') return true;
      ++i_;
    }
    return true;
  }
  bool Int(int& out) {
    if (!std::isdigit(static_cast<unsigned char>(peek()))) return false;
    out = 0;
    while (std::isdigit(static_cast<unsigned char>(peek()))) out = out * 10 + (s_[i_++] - '0');
    return true;
  }
  bool Eat(char c) {
    if (peek() != c) return false;
    ++i_;
    return true;
  }

 private:
  const std::string& s_;
  size_t i_ = 0;
};

Error Bad(const std::string& name, const std::string& why) {
  return MakeError(ErrorCode::kInvalidArgument, "time zone '" + name + "': " + why);
}

int64_t BigEndian(const std::string& b, size_t at, int bytes) {
  uint64_t v = 0;
  for (int k = 0; k < bytes; ++k) v = (v << 8) | static_cast<unsigned char>(b[at + k]);
  if (bytes == 4) return static_cast<int32_t>(static_cast<uint32_t>(v));
  return static_cast<int64_t>(v);
}

}  // namespace

Result<PosixTzRule> ParsePosixTz(const std::string& text) {
  PosixTzRule r;
  TzReader in(text);
  int64_t west = 0;
  if (!in.Name() || !in.Time(west)) return Bad(text, "not a POSIX TZ rule such as CET-1CEST");
  r.std_offset_s = -west;  // POSIX counts west of UTC
  if (in.done()) return r;
  if (!in.Name()) return Bad(text, "bad daylight-time name");
  r.dst = true;
  r.dst_offset_s = r.std_offset_s + 3600;
  if (in.peek() != ',') {
    int64_t dst_west = 0;
    if (!in.Time(dst_west)) return Bad(text, "bad daylight-time offset");
    r.dst_offset_s = -dst_west;
  }
  auto date = [&](int& month, int& week, int& day, int64_t& time) {
    if (!in.Eat(',') || !in.Eat('M')) return false;
    if (!in.Int(month) || !in.Eat('.') || !in.Int(week) || !in.Eat('.') || !in.Int(day)) {
      return false;
    }
    if (month < 1 || month > 12 || week < 1 || week > 5 || day < 0 || day > 6) return false;
    if (in.Eat('/') && !in.Time(time)) return false;  // may be negative or over 24h (v3)
    return true;
  };
  if (!date(r.start_month, r.start_week, r.start_day, r.start_time_s) ||
      !date(r.end_month, r.end_week, r.end_day, r.end_time_s) || !in.done()) {
    return Bad(text, "only the Mm.w.d form of daylight-time rules is supported");
  }
  return r;
}

int64_t PosixTzRule::OffsetAt(int64_t utc_s) const {
  if (!dst) return std_offset_s;
  int64_t year = 0;
  int month = 0, day = 0;
  CivilFromDays(FloorDiv(utc_s + std_offset_s, 86400), year, month, day);
  // Daylight time starts at a local standard time and ends at a local daylight time.
  auto in_dst = [&](int64_t y) {
    int64_t start = RuleLocal(y, start_month, start_week, start_day, start_time_s) - std_offset_s;
    int64_t end = RuleLocal(y, end_month, end_week, end_day, end_time_s) - dst_offset_s;
    if (start < end) return utc_s >= start && utc_s < end;
    return utc_s < end || utc_s >= start;  // the southern hemisphere: over the new year
  };
  return in_dst(year) ? dst_offset_s : std_offset_s;
}

Result<TimeZone> TimeZone::Load(const std::string& name, const std::string& zoneinfo) {
  if (name == "UTC" || name == "Etc/UTC") {
    TimeZone z;
    z.name_ = name;
    return z;
  }
  bool ok = !name.empty() && name.front() != '/' && name.find("..") == std::string::npos &&
            std::all_of(name.begin(), name.end(), [](unsigned char c) {
              return std::isalnum(c) || c == '_' || c == '-' || c == '+' || c == '/';
            });
  if (!ok) return Bad(name, "not a time zone name such as Europe/Berlin");
  std::ifstream f(zoneinfo + "/" + name, std::ios::binary);
  if (!f) {
    return Bad(name, "unknown (no " + zoneinfo + "/" + name +
                         "; is the tz database installed? Debian: apt-get install tzdata)");
  }
  std::ostringstream bytes;
  bytes << f.rdbuf();
  return Parse(name, bytes.str());
}

Result<TimeZone> TimeZone::Parse(const std::string& name, const std::string& b) {
  auto header = [&](size_t at, int64_t counts[6]) {
    if (b.size() < at + 44 || b.compare(at, 4, "TZif") != 0) return false;
    for (int k = 0; k < 6; ++k) counts[k] = BigEndian(b, at + 20 + 4 * k, 4);
    return true;
  };
  // counts: isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt
  int64_t c[6];
  if (!header(0, c)) return Bad(name, "not a TZif file");
  const char version = b[4];
  size_t at = 44;
  int width = 4;
  if (version >= '2') {  // skip the 32-bit block; the 64-bit one follows with its own header
    at += c[3] * 5 + c[4] * 6 + c[5] + c[2] * 8 + c[1] + c[0];
    if (!header(at, c)) return Bad(name, "truncated TZif file");
    at += 44;
    width = 8;
  }
  const int64_t timecnt = c[3], typecnt = c[4];
  const size_t need =
      at + timecnt * (width + 1) + typecnt * 6 + c[5] + c[2] * (width + 4) + c[1] + c[0];
  if (typecnt < 1 || b.size() < need) return Bad(name, "truncated TZif file");
  TimeZone z;
  z.name_ = name;
  for (int64_t k = 0; k < timecnt; ++k)
    z.transitions_.push_back(BigEndian(b, at + k * width, width));
  at += timecnt * width;
  for (int64_t k = 0; k < timecnt; ++k) {
    uint8_t t = static_cast<uint8_t>(b[at + k]);
    if (t >= typecnt) return Bad(name, "bad transition type");
    z.types_.push_back(t);
  }
  at += timecnt;
  for (int64_t k = 0; k < typecnt; ++k) z.offsets_.push_back(BigEndian(b, at + k * 6, 4));
  z.first_offset_s_ = z.offsets_[0];
  at = need;
  if (version >= '2' && at < b.size() && b[at] == '\n') {
    size_t end = b.find('\n', at + 1);
    std::string footer = b.substr(at + 1, end == std::string::npos ? end : end - at - 1);
    if (!footer.empty()) {
      auto rule = ParsePosixTz(footer);
      if (rule.ok()) {
        z.rule_ = rule.value();
        z.has_rule_ = true;
      }
    }
  }
  return z;
}

int64_t TimeZone::OffsetAt(int64_t utc_s) const {
  if (transitions_.empty()) return has_rule_ ? rule_.OffsetAt(utc_s) : first_offset_s_;
  if (utc_s < transitions_.front()) return first_offset_s_;
  if (utc_s >= transitions_.back() && has_rule_) return rule_.OffsetAt(utc_s);
  auto it = std::upper_bound(transitions_.begin(), transitions_.end(), utc_s);
  return offsets_[types_[static_cast<size_t>(it - transitions_.begin()) - 1]];
}

LocalTime ToLocal(int64_t utc_s, const TimeZone& zone) {
  int64_t local = utc_s + zone.OffsetAt(utc_s);
  int64_t days = FloorDiv(local, 86400);
  LocalTime t;
  t.weekday = static_cast<int>(((days % 7) + 11) % 7);
  t.minute_of_day = static_cast<int>((local - days * 86400) / 60);
  return t;
}

}  // namespace gpufleet
