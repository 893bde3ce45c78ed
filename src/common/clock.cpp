#include "common/clock.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <limits>

namespace gpufleet {
namespace {
class SystemClock : public Clock {
 public:
  int64_t NowMs() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};
}  // namespace

std::shared_ptr<Clock> RealClock() {
  static auto clock = std::make_shared<SystemClock>();
  return clock;
}

std::string FormatTime(int64_t ms) {
  if (ms <= 0) return "";
  std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(ms % 1000));
  return buf;
}

int64_t ParseDurationMs(const std::string& text) {
  if (text.empty()) return -1;
  size_t pos = 0;
  while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') ++pos;
  if (pos == 0 || pos > 12) return -1;
  int64_t n = std::stoll(text.substr(0, pos));
  std::string unit = text.substr(pos);
  int64_t ms_per = 0;
  if (unit == "ms") ms_per = 1;
  if (unit == "s" || unit.empty()) ms_per = 1000;
  if (unit == "m") ms_per = 60'000;
  if (unit == "h") ms_per = 3'600'000;
  if (unit == "d") ms_per = 86'400'000;
  // 12 digits of days overflow int64 milliseconds: out of range is bad input too.
  if (ms_per == 0 || n > std::numeric_limits<int64_t>::max() / ms_per) return -1;
  return n * ms_per;
}

}  // namespace gpufleet
