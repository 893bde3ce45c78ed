#pragma once
// Clock is the only place that reads the real time. Times are milliseconds since the Unix epoch.

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

namespace gpufleet {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t NowMs() const = 0;
};

// The system clock. Thread-safe.
std::shared_ptr<Clock> RealClock();

// A clock that moves only when told to; for tests. Thread-safe.
class ManualClock : public Clock {
 public:
  explicit ManualClock(int64_t start_ms = 1'700'000'000'000) : now_(start_ms) {}
  int64_t NowMs() const override { return now_.load(); }
  void Advance(int64_t ms) { now_ += ms; }
  void Set(int64_t ms) { now_ = ms; }

 private:
  std::atomic<int64_t> now_;
};

// RFC 3339 in UTC with milliseconds, e.g. "2026-11-29T16:40:00.123Z".
std::string FormatTime(int64_t ms);

// Parses "30s", "5m", "24h", "7d", "250ms" into milliseconds; -1 on bad input.
int64_t ParseDurationMs(const std::string& text);

}  // namespace gpufleet
