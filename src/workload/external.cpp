// Jobs that another scheduler runs (Slurm): followed from its polls, never placed by gpufleet.

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "workload/internal.h"
#include "workload/jobs.h"

namespace gpufleet::workload {
namespace {

std::string ExternalKey(const std::string& source, const std::string& cluster,
                        const std::string& id) {
  return source + "/" + cluster + "/" + id;
}

bool SamePlacement(const std::vector<Placement>& a, const std::vector<Placement>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].node != b[i].node || a[i].gpus != b[i].gpus) return false;
  }
  return true;
}

bool Ended(JobState s) { return s == JobState::kCompleted || s == JobState::kCancelled; }

}  // namespace

bool JobService::FollowLocked(Job& j, const ExternalJob& e, int64_t now, SyncCounts& counts) {
  const int64_t start = e.start_ms > 0 ? std::min(e.start_ms, now) : now;
  if (Ended(e.state)) {
    int64_t end = e.end_ms > 0 ? std::min(e.end_ms, now) : now;
    if (j.state == JobState::kRunning) end = std::max(end, j.start_ms);
    EndLocked(j, e.state, end, e.reason);
    ++counts.ended;
    return true;
  }
  if (e.state == JobState::kQueued) {
    if (j.state == JobState::kRunning) {
      RequeueLocked(j, now, "requeued by " + j.source);
      j.reason = e.reason;
      return true;
    }
    bool changed = j.reason != e.reason || j.spec.gpus != e.spec.gpus;
    j.reason = e.reason;
    j.spec.gpus = e.spec.gpus;
    return changed;
  }
  if (j.state == JobState::kQueued) {  // started
    j.state = JobState::kRunning;
    j.start_ms = std::max(start, j.queued_ms);
    j.alloc_wait_ms = j.start_ms - j.queued_ms;
    j.wait_ms += j.alloc_wait_ms;
    starts_.push_back({now, j.spec.pool, j.alloc_wait_ms});
    j.placement = e.placement;
    j.reason = e.reason;
    ++counts.started;
    return true;
  }
  if (!SamePlacement(j.placement, e.placement)) {  // other nodes or GPUs: a new allocation
    RecordEndLocked(j, now, "moved");
    j.gpu_hours += internal::RunHours(j, now);
    j.start_ms = now;
    j.alloc_wait_ms = 0;
    j.placement = e.placement;
    return true;
  }
  return false;
}

JobService::SyncCounts JobService::SyncExternal(const std::string& source,
                                                const std::string& cluster,
                                                const std::vector<ExternalJob>& seen) {
  const int64_t now = clock_->NowMs();
  SyncCounts counts;
  std::vector<int64_t> changed;
  {
    std::lock_guard lock(mu_);
    std::set<int64_t> shown;
    for (const auto& e : seen) {
      const std::string key = ExternalKey(source, cluster, e.id);
      auto known = external_.find(key);
      auto it = known == external_.end() ? jobs_.end() : jobs_.find(known->second);
      if (it != jobs_.end()) {
        Job& j = it->second;
        shown.insert(j.id);
        if (Ended(j.state)) continue;  // shown ended until the scheduler forgets it
        if (FollowLocked(j, e, now, counts)) {
          ++counts.changed;
          changed.push_back(j.id);
        }
        continue;
      }
      if (Ended(e.state)) continue;  // ended before gpufleet saw it
      Job j;
      j.id = next_id_++;
      j.spec = e.spec;
      j.spec.cluster = cluster;
      j.source = source;
      j.external_id = e.id;
      j.user = e.user;
      j.submit_ms = j.queued_ms = e.submit_ms > 0 ? std::min(e.submit_ms, now) : now;
      j.reason = e.reason;
      if (e.state == JobState::kRunning) {
        j.state = JobState::kRunning;
        j.start_ms = e.start_ms > 0 ? std::clamp(e.start_ms, j.queued_ms, now) : now;
        j.alloc_wait_ms = j.wait_ms = j.start_ms - j.queued_ms;
        j.placement = e.placement;
      }
      const int64_t id = j.id;
      external_[key] = id;
      live_[id] = &(jobs_[id] = std::move(j));
      shown.insert(id);
      changed.push_back(id);
      ++counts.added;
    }
    // Live jobs of this scheduler and cluster that it no longer shows: ended.
    for (auto it = live_.begin(); it != live_.end();) {
      Job& j = *(it++)->second;  // EndLocked takes j out of live_
      if (j.source != source || j.spec.cluster != cluster || shown.count(j.id)) continue;
      EndLocked(j, JobState::kCompleted, now, "ended: no longer in " + source + "'s queue");
      changed.push_back(j.id);
      ++counts.ended;
    }
    UpdateBusyLocked(now);
  }
  Persist(changed);
  return counts;
}

}  // namespace gpufleet::workload
