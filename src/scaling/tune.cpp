// Tuning a pool's policy on its own past (ScalingService::Tune, and AutoTune for the policy's
// tune.every): the pool's jobs as a replay trace, sched::Tune over them, and the result applied
// through SetPolicy when asked.

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "scaling/scaling.h"
#include "sched/policy_json.h"

namespace gpufleet::scaling {

std::vector<sched::TraceJob> HistoryTrace(const std::vector<workload::Job>& jobs, int64_t from_ms,
                                          int64_t now_ms) {
  std::vector<sched::TraceJob> out;
  for (const auto& j : jobs) {
    if (j.submit_ms < from_ms || j.spec.gpus < 1) continue;
    bool ended =
        j.state == workload::JobState::kCompleted || j.state == workload::JobState::kCancelled;
    double run_s = j.gpu_hours * 3600 / j.spec.gpus;  // what it ran, over all its starts
    if (!ended && j.spec.duration_ms > 0) {
      run_s = static_cast<double>(j.spec.duration_ms) / 1000;  // it ends after that
    } else if (j.state == workload::JobState::kRunning) {
      run_s = static_cast<double>(j.done_ms + (now_ms - j.start_ms)) / 1000;  // so far
    }
    if (!(run_s > 0)) continue;  // never ran, and no duration to go by
    sched::TraceJob t;
    // In epoch seconds, as the live autoscaler's clock: the policy's hour-based minimums and
    // the forecaster's days fall where they did.
    t.submit_s = static_cast<double>(j.submit_ms) / 1000;
    // A job stored before durations were bounded may expect to run for ages: the replay's
    // bound is as long as any replay can tell apart.
    t.duration_s = std::min(run_s, sched::kMaxReplaySpanS);
    t.gpus = j.spec.gpus;
    t.gpus_per_node = j.spec.gpus_per_node;  // a spread job is replayed spread
    t.team = j.spec.team;
    t.movable = j.spec.movable ? 1 : 0;
    out.push_back(std::move(t));
  }
  return out;
}

Result<TuneReport> ScalingService::Tune(const std::string& pool_name, const TuneRequest& req,
                                        const std::string& actor) {
  constexpr size_t kMinJobs = 20;
  auto pool = fleet_.FindPool(pool_name);
  if (!pool.ok()) return pool.error();
  if (!(req.wait_p95_s >= 0) || req.window_ms <= 0) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "the p95 wait objective must be 0 or more, and the window positive");
  }
  std::unique_lock running(tune_mu_, std::try_to_lock);
  if (!running.owns_lock()) {
    return MakeError(ErrorCode::kConflict, "a tune is already running; try again when it ends");
  }
  TuneReport rep;
  std::vector<Sample> history;
  int ready_now = 0;
  {
    std::lock_guard lock(mu_);
    auto it = pools_.find(pool_name);
    if (it == pools_.end()) {
      return MakeError(ErrorCode::kNotFound, "pool '" + pool_name + "' has no scaling policy");
    }
    rep.before = rep.after = it->second.scaling;
    history.assign(it->second.history.begin(), it->second.history.end());
    ready_now = CountLocked(pool_name).ready;
  }
  rep.pool = pool_name;
  rep.gpus_per_node = pool->gpus_per_node;
  rep.to_ms = clock_->NowMs();
  workload::JobFilter filter;
  filter.pool = pool_name;
  auto trace = HistoryTrace(jobs_.List(filter), rep.to_ms - req.window_ms, rep.to_ms);
  if (trace.size() < kMinJobs) {
    return MakeError(ErrorCode::kConflict,
                     "pool '" + pool_name + "' has " + std::to_string(trace.size()) +
                         " jobs to replay in its history; tuning needs at least " +
                         std::to_string(kMinJobs));
  }
  // The replay starts at the first job's submission.
  double first = trace.front().submit_s;
  for (const auto& t : trace) first = std::min(first, t.submit_s);
  rep.from_ms = static_cast<int64_t>(std::llround(first * 1000));
  rep.jobs = trace.size();

  sched::TuneOptions o;
  o.replay.gpus_per_node = pool->gpus_per_node;
  o.replay.policy = rep.before.policy;
  o.replay.forecast_step_s = options_.forecast_step_s;
  o.replay.reserve_after_s = static_cast<double>(jobs_.reserve_after_ms()) / 1000;  // as live
  // The replay starts with the nodes the pool had ready then: the last decision before, or,
  // when none came before (jobs submitted before autoscaling started), those ready now.
  o.replay.initial_nodes = ready_now;
  for (const auto& s : history) {
    if (s.time_ms > rep.from_ms) break;
    o.replay.initial_nodes = s.ready;
    // The forecaster learns from what the pool was asked for before, as the live one did.
    o.replay.demand_before.emplace_back(static_cast<double>(s.time_ms) / 1000, s.demand_gpus);
  }
  o.wait_p95_s = req.wait_p95_s;
  o.replay.cancel = &cancel_tunes_;
  o.threads = 2;  // leave the machine's other cores to the fleet
  auto result = sched::Tune(trace, o);
  if (!result.ok()) {
    if (cancel_tunes_) {
      return MakeError(ErrorCode::kUnavailable, "the controller is stopping: tune cancelled");
    }
    return result.error();
  }
  rep.result = std::move(result).value();
  if (!req.apply) return rep;
  return ApplyTuned(std::move(rep), req, actor);
}

// The cheapest setting within the objective (--apply), where it is cheaper than the policy.
Result<TuneReport> ScalingService::ApplyTuned(TuneReport rep, const TuneRequest& req,
                                              const std::string& actor) {
  const std::string& pool_name = rep.pool;
  if (rep.result.chosen < 0) {
    char why[160];
    std::snprintf(why, sizeof why, "no setting kept the p95 wait within %g s; nothing applied",
                  req.wait_p95_s);
    rep.not_applied = why;
    return rep;
  }
  const auto& c = rep.result.grid[static_cast<size_t>(rep.result.chosen)];
  if (!(c.result.gpu_hours_idle < rep.result.current.result.gpu_hours_idle)) {
    return rep;  // no cheaper than the policy as it is: nothing to change
  }
  auto next = rep.before;
  next.policy.target_share = c.target_share;
  next.policy.forecast_margin = c.forecast_margin;
  next.policy.margin_by_hour = c.margin_by_hour;
  // Only over the policy the replay was of: a change made while tuning is not overwritten.
  auto set = SetPolicy(next, actor, nullptr, &rep.before);
  if (!set.ok()) {
    if (set.error().code != ErrorCode::kConflict) return set.error();
    return MakeError(ErrorCode::kConflict, "the policy of pool '" + pool_name +
                                               "' changed while tuning; nothing applied");
  }
  rep.after = set.value();
  rep.applied = true;
  return rep;
}

void ScalingService::AutoTune(const std::string& pool) {
  TuneRequest req;
  {
    std::lock_guard lock(mu_);
    auto it = pools_.find(pool);
    if (it == pools_.end()) return;
    const auto& t = it->second.scaling.tune;
    req.wait_p95_s = t.wait_p95_s;
    req.window_ms = static_cast<int64_t>(t.window_s * 1000);
  }
  req.apply = true;
  auto rep = Tune(pool, req, kAutoscaler);
  std::string detail;
  auto setting = [](const sched::TuneCandidate& c, sched::ScaleMode m) {
    char buf[80];
    if (m == sched::ScaleMode::kPredictive) {
      std::snprintf(buf, sizeof buf, "share %g, margin %g%s", c.target_share, c.forecast_margin,
                    c.margin_by_hour ? " by hour" : "");
    } else {
      std::snprintf(buf, sizeof buf, "share %g", c.target_share);
    }
    return std::string(buf);
  };
  if (!rep.ok()) {
    detail = "not tuned: " + rep.error().message;
  } else {
    const auto& r = rep->result;
    auto mode = rep->before.policy.mode;
    char head[160];
    std::snprintf(head, sizeof head,
                  "%zu jobs of the last %s replayed, objective p95 wait <= %g s: ", rep->jobs,
                  sched::FormatSeconds(static_cast<double>(req.window_ms) / 1000).c_str(),
                  req.wait_p95_s);
    char body[256];
    if (r.chosen < 0) {
      const auto& c = r.grid[static_cast<size_t>(r.closest)];
      std::snprintf(body, sizeof body,
                    "no setting is within it (the lowest: %.0f s at %s); unchanged",
                    c.result.wait_p95_s, setting(c, mode).c_str());
    } else if (!rep->applied) {
      std::snprintf(body, sizeof body, "%s is as cheap as any within it; unchanged",
                    setting(r.current, mode).c_str());
    } else {
      const auto& c = r.grid[static_cast<size_t>(r.chosen)];
      std::snprintf(body, sizeof body,
                    "%s -> %s: %.1f -> %.1f idle GPU-hours in the replay, p95 wait %.0f s",
                    setting(r.current, mode).c_str(), setting(c, mode).c_str(),
                    r.current.result.gpu_hours_idle, c.result.gpu_hours_idle, c.result.wait_p95_s);
    }
    detail = std::string(head) + body;
  }
  RecordEvent(pool, "tune", 0, 0, 0, "tune", detail, {}, kAutoscaler);
}

}  // namespace gpufleet::scaling
