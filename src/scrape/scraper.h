#pragma once
// Scrape mode: fetches the Prometheus page of every node that runs dcgm-exporter instead of the
// gpufleet agent, at its pool's interval, reads it (ParseExposition, ReadDcgm) and hands the
// reading to a sink, which registers the node and stores the samples like an agent's. A few
// worker threads share the targets; a slow or dead exporter holds one worker for at most its
// timeout, never the others.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "scrape/dcgm.h"

namespace gpufleet::scrape {

struct ScrapeTarget {
  std::string node;
  std::string pool;
  std::string url;
  int64_t interval_ms = 15'000;
  bool operator==(const ScrapeTarget&) const = default;
};

struct TargetStatus {
  ScrapeTarget target;
  bool up = false;         // the last scrape succeeded
  int64_t last_ms = 0;     // when the last scrape started; 0 before the first
  int64_t last_ok_ms = 0;  // when one last succeeded
  double duration_ms = 0;  // of the last scrape
  size_t samples = 0;      // values taken from the last page
  uint64_t scrapes = 0;
  uint64_t failures = 0;
  std::string error;  // why the last scrape failed; empty when up
};

struct ScraperOptions {
  int threads = 4;
  int64_t timeout_ms = 10'000;       // per scrape, capped at the target's interval
  size_t max_body_bytes = 32 << 20;  // a page larger than this is refused
};

class Scraper {
 public:
  // Called on a worker thread for every page that was read; an error is recorded on the target.
  using Sink = std::function<Status(const ScrapeTarget&, int64_t time_ms, const DcgmReading&)>;

  Scraper(std::shared_ptr<Clock> clock, Sink sink, ScraperOptions options = {});
  ~Scraper();
  Scraper(const Scraper&) = delete;
  Scraper& operator=(const Scraper&) = delete;

  // Replaces the target list; targets that stay keep their status and schedule.
  void SetTargets(std::vector<ScrapeTarget> targets);
  std::vector<TargetStatus> Targets() const;
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One HTTP GET with a deadline; the body of a 200 reply, or why not. Public for tests.
Result<std::string> FetchPage(const std::string& url, int64_t timeout_ms, size_t max_body_bytes);

}  // namespace gpufleet::scrape
