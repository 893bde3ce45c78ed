#include "sched/tune.h"

#include <algorithm>
#include <atomic>
#include <boost/json.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>

namespace gpufleet::sched {
namespace {

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// Headroom is all reactive has against a rise within the lead time, and a steep one (a
// working day that starts at once) can need twice the demand, so its shares go down to 0.2.
std::vector<double> DefaultShares(ScaleMode mode) {
  int lowest = mode == ScaleMode::kReactive ? 20 : 60;
  std::vector<double> out;
  for (int pct = lowest; pct <= 100; pct += 5) out.push_back(pct / 100.0);
  return out;
}

namespace json = boost::json;

json::object CandidateJson(const TuneCandidate& c, ScaleMode mode) {
  const auto& r = c.result;
  return {{"target_share", c.target_share},
          {"forecast_margin",
           mode == ScaleMode::kPredictive ? json::value(c.forecast_margin) : json::value(nullptr)},
          {"margin_by", mode == ScaleMode::kPredictive
                            ? json::value(c.margin_by_hour ? "hour" : "recent")
                            : json::value(nullptr)},
          {"gpu_hours_provisioned", r.gpu_hours_provisioned},
          {"gpu_hours_idle", r.gpu_hours_idle},
          {"wait_p95_s", r.wait_p95_s},
          {"wait_p99_s", r.wait_p99_s},
          {"jobs_waited_over_lead_time", r.jobs_waited_over_lead_time},
          {"scale_events", r.scale_events},
          {"meets", c.meets}};
}

}  // namespace

std::string TuneJson(const TuneResult& r, ScaleMode mode, double wait_p95_s) {
  auto pick = [&](int i) {
    return i < 0 ? json::value(nullptr)
                 : json::value(CandidateJson(r.grid[static_cast<size_t>(i)], mode));
  };
  json::array grid;
  for (const auto& c : r.grid) grid.push_back(CandidateJson(c, mode));
  double now_idle = r.current.result.gpu_hours_idle;
  json::value saving = nullptr;
  if (r.chosen >= 0 && now_idle > 0) {
    saving = 1 - r.grid[static_cast<size_t>(r.chosen)].result.gpu_hours_idle / now_idle;
  }
  return json::serialize(json::object{{"mode", ToString(mode)},
                                      {"jobs", r.current.result.jobs},
                                      {"simulated_hours", r.current.result.span_s / 3600},
                                      {"objective", {{"wait_p95_s", wait_p95_s}}},
                                      {"current", CandidateJson(r.current, mode)},
                                      {"chosen", pick(r.chosen)},
                                      {"closest", pick(r.closest)},
                                      {"saving", saving},
                                      {"grid", std::move(grid)},
                                      {"replay_seconds", r.replay_seconds}});
}

Result<TuneResult> Tune(const std::vector<TraceJob>& jobs, const TuneOptions& o) {
  if (!(o.wait_p95_s >= 0) || !std::isfinite(o.wait_p95_s)) {
    return MakeError(ErrorCode::kInvalidArgument, "the p95 wait objective must be 0 or more s");
  }
  std::vector<double> shares = o.shares.empty() ? DefaultShares(o.replay.policy.mode) : o.shares;
  std::vector<double> margins = o.margins;
  std::vector<bool> by_hour = o.margin_by_hour;
  if (o.replay.policy.mode != ScaleMode::kPredictive) {
    margins = {o.replay.policy.forecast_margin};  // not used: one column
    by_hour = {o.replay.policy.margin_by_hour};
  } else {
    if (margins.empty()) margins = {0.5, 0.75, 1, 1.5, 2, 2.5, 3, 4, 5, 6, 8};
    if (by_hour.empty()) by_hour = {false, true};
  }
  for (double s : shares) {
    if (!(s > 0 && s <= 1)) {
      return MakeError(ErrorCode::kInvalidArgument, "target share " + Num(s) + " is not in (0, 1]");
    }
  }
  for (double m : margins) {
    if (!(m >= 0) || !std::isfinite(m)) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "forecast margin " + Num(m) + " is not 0 or more");
    }
  }

  TuneResult out;
  out.current.target_share = o.replay.policy.target_share;
  out.current.forecast_margin = o.replay.policy.forecast_margin;
  out.current.margin_by_hour = o.replay.policy.margin_by_hour;
  for (double s : shares) {
    for (double m : margins) {
      for (bool h : by_hour) {
        TuneCandidate c;
        c.target_share = s;
        c.forecast_margin = m;
        c.margin_by_hour = h;
        out.grid.push_back(std::move(c));
      }
    }
  }

  // One list of work: the current policy first, then the grid. Each replay is independent and
  // deterministic, so running them on several threads changes nothing but the wall time.
  std::vector<TuneCandidate*> work{&out.current};
  for (auto& c : out.grid) work.push_back(&c);
  std::vector<Status> errors(work.size());
  std::atomic<size_t> next{0};
  auto run = [&] {
    for (size_t i = next++; i < work.size(); i = next++) {
      if (o.replay.cancel && o.replay.cancel->load()) {
        errors[i] = MakeError(ErrorCode::kUnavailable, "the replay was cancelled");
        continue;
      }
      ReplayOptions ro = o.replay;
      ro.policy.target_share = work[i]->target_share;
      ro.policy.forecast_margin = work[i]->forecast_margin;
      ro.policy.margin_by_hour = work[i]->margin_by_hour;
      auto r = Replay(jobs, ro);
      if (!r.ok()) {
        errors[i] = r.error();
        continue;
      }
      work[i]->result = std::move(r).value();
      work[i]->meets = work[i]->result.wait_p95_s <= o.wait_p95_s;
    }
  };
  auto started = std::chrono::steady_clock::now();
  int threads = o.threads > 0
                    ? o.threads
                    : std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, 8);
  threads = std::min<int>(threads, static_cast<int>(work.size()));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(run);
  run();
  for (auto& t : pool) t.join();
  out.replay_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  for (const auto& e : errors) {
    if (!e.ok()) return e.error();
  }

  // Fewer idle GPU-hours, then a lower p95, then the least change from the policy as it is (a
  // margin that made no difference, e.g. before the forecast is scored, is left alone).
  auto change = [&](const TuneCandidate& c) {
    return std::fabs(c.target_share - out.current.target_share) +
           std::fabs(c.forecast_margin - out.current.forecast_margin) / 8 +
           (c.margin_by_hour != out.current.margin_by_hour ? 0.01 : 0);
  };
  auto cheaper = [&](const TuneCandidate& a, const TuneCandidate& b) {
    const auto &x = a.result, &y = b.result;
    if (x.gpu_hours_idle != y.gpu_hours_idle) return x.gpu_hours_idle < y.gpu_hours_idle;
    if (x.wait_p95_s != y.wait_p95_s) return x.wait_p95_s < y.wait_p95_s;
    return change(a) < change(b);
  };
  for (size_t i = 0; i < out.grid.size(); ++i) {
    const auto& c = out.grid[i];
    if (c.meets && (out.chosen < 0 || cheaper(c, out.grid[static_cast<size_t>(out.chosen)]))) {
      out.chosen = static_cast<int>(i);
    }
    if (out.closest < 0) {
      out.closest = static_cast<int>(i);
      continue;
    }
    const auto& b = out.grid[static_cast<size_t>(out.closest)];
    if (c.result.wait_p95_s < b.result.wait_p95_s ||
        (c.result.wait_p95_s == b.result.wait_p95_s && cheaper(c, b))) {
      out.closest = static_cast<int>(i);
    }
  }
  if (out.chosen >= 0) out.closest = -1;
  return out;
}

}  // namespace gpufleet::sched
