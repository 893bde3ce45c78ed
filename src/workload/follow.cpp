// Several controllers: a controller that does not lead follows the jobs the leader stores.

#include <spdlog/spdlog.h>

#include "workload/jobs.h"

namespace gpufleet::workload {

Status JobService::Follow() {
  int64_t since = 0;
  {
    std::lock_guard lock(mu_);
    since = followed_ms_ - kFollowOverlapMs;
  }
  auto records = since > 0 ? store_.ListJobsUpdatedSince(since) : store_.ListJobs();
  if (!records.ok()) return records.error();
  int64_t now = clock_->NowMs();
  std::lock_guard lock(mu_);
  for (const auto& r : records.value()) TakeLocked(r);
  if (now - last_prune_ms_ >= 60'000) PruneLocked(now);
  UpdateBusyLocked(now);
  return {};
}

int JobService::PruneLocked(int64_t now) {
  last_prune_ms_ = now;
  const int64_t before = now - retention_ms_;
  size_t dropped = std::erase_if(jobs_, [&](const auto& e) {
    const Job& j = e.second;
    return (j.state == JobState::kCompleted || j.state == JobState::kCancelled) &&
           j.end_ms < before;
  });
  std::erase_if(external_, [&](const auto& e) { return !jobs_.count(e.second); });
  if (dropped) {
    spdlog::info("jobs: dropped {} job(s) that ended over the retention time ago", dropped);
  }
  return static_cast<int>(dropped);
}

}  // namespace gpufleet::workload
