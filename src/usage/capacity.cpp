#include "usage/capacity.h"

#include <algorithm>
#include <boost/json.hpp>
#include <cmath>
#include <limits>
#include <map>

#include "common/json_fields.h"
#include "common/timezone.h"
#include "model/asset.h"
#include "sched/replay.h"
#include "usage/reports.h"

namespace json = boost::json;

namespace gpufleet::usage {
namespace {

constexpr int64_t kDayMs = 86'400'000;
constexpr double kQuarterDays = 91.3125;
constexpr double kInf = std::numeric_limits<double>::infinity();

int MonthOf(int64_t days) {
  int64_t y = 0;
  int m = 0, d = 0;
  CivilFromDays(days, y, m, d);
  return m;
}

std::string Minutes(double s) {
  char buf[32];
  if (s < 120) {
    std::snprintf(buf, sizeof buf, "%.0f s", s);
  } else {
    std::snprintf(buf, sizeof buf, "%.0f min", s / 60);
  }
  return buf;
}

std::string Money(double v, const std::string& currency) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.0f", v);
  std::string digits = buf, out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0 && digits[i - 1] != '-') out += ',';
    out += digits[i];
  }
  return out + " " + currency;
}

}  // namespace

std::string IsoDate(int64_t days) {
  int64_t y = 0;
  int m = 0, d = 0;
  CivilFromDays(days, y, m, d);
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04lld-%02d-%02d", static_cast<long long>(y), m, d);
  return buf;
}

Result<CapacityGrowth> ParseCapacityGrowth(std::string_view text) {
  boost::system::error_code ec;
  json::value doc = json::parse(text, ec);
  if (ec) return MakeError(ErrorCode::kInvalidArgument, "malformed JSON: " + ec.message());
  if (!doc.is_object()) return MakeError(ErrorCode::kInvalidArgument, "expected an object");
  auto bad = [](const std::string& at, const std::string& why) {
    return MakeError(ErrorCode::kInvalidArgument, at + ": " + why);
  };
  const json::object& o = doc.as_object();
  GF_TRY(JsonFields(o).Only({"teams", "demands"}));
  CapacityGrowth g;
  auto list = [&](const char* key) -> Result<const json::array*> {
    const json::value* v = o.if_contains(key);
    if (!v) return static_cast<const json::array*>(nullptr);
    if (!v->is_array()) return bad(key, "must be a list");
    return &v->as_array();
  };
  auto text_of = [&](const json::object& item, const std::string& at, const char* key,
                     std::string& out) -> Status {
    const json::value* v = item.if_contains(key);
    if (!v || !v->is_string() || v->as_string().empty()) {
      return bad(at + "." + key, "is required: a string");
    }
    out = std::string(v->as_string());
    return {};
  };
  auto teams = list("teams");
  if (!teams.ok()) return teams.error();
  for (size_t i = 0; teams.value() && i < teams.value()->size(); ++i) {
    std::string at = "teams[" + std::to_string(i) + "]";
    const json::object* t = (*teams.value())[i].if_object();
    if (!t) return bad(at, "must be an object {team, quarterly}");
    GF_TRY(JsonFields(*t, at).Only({"team", "quarterly"}));
    CapacityGrowth::TeamGrowth tg;
    GF_TRY(text_of(*t, at, "team", tg.team));
    const json::value* q = t->if_contains("quarterly");
    if (!q || !q->is_number()) return bad(at + ".quarterly", "is required: a number (0.2: +20%)");
    tg.quarterly = q->to_number<double>();
    if (!(tg.quarterly > -1 && tg.quarterly <= 10)) {
      return bad(at + ".quarterly", "must be over -1 and at most 10 (0.2: +20% a quarter)");
    }
    for (const auto& other : g.teams) {
      if (other.team == tg.team) return bad(at + ".team", "'" + tg.team + "' is listed twice");
    }
    g.teams.push_back(std::move(tg));
  }
  auto demands = list("demands");
  if (!demands.ok()) return demands.error();
  for (size_t i = 0; demands.value() && i < demands.value()->size(); ++i) {
    std::string at = "demands[" + std::to_string(i) + "]";
    const json::object* d = (*demands.value())[i].if_object();
    if (!d) return bad(at, "must be an object {name, pool, gpus, from}");
    GF_TRY(JsonFields(*d, at).Only({"name", "pool", "gpus", "from"}));
    CapacityGrowth::NewDemand nd;
    GF_TRY(text_of(*d, at, "name", nd.name));
    GF_TRY(text_of(*d, at, "pool", nd.pool));
    GF_TRY(text_of(*d, at, "from", nd.from));
    if (!ParseIsoDate(nd.from))
      return bad(at + ".from", "'" + nd.from + "' is not a date (YYYY-MM-DD)");
    const json::value* n = d->if_contains("gpus");
    if (!n || !n->is_int64() || n->as_int64() < 1 || n->as_int64() > 100'000) {
      return bad(at + ".gpus", "is required: a whole number of GPUs, 1 to 100000");
    }
    nd.gpus = static_cast<int>(n->as_int64());
    g.demands.push_back(std::move(nd));
  }
  return g;
}

std::string CapacityGrowthJson(const CapacityGrowth& g) {
  json::array teams, demands;
  for (const auto& t : g.teams) teams.push_back({{"team", t.team}, {"quarterly", t.quarterly}});
  for (const auto& d : g.demands) {
    demands.push_back({{"name", d.name}, {"pool", d.pool}, {"gpus", d.gpus}, {"from", d.from}});
  }
  return json::serialize(
      json::object{{"teams", std::move(teams)}, {"demands", std::move(demands)}});
}

// Too little history for a trend: the plan tells what the replay of what was recorded needs,
// and recommends no order (a few hours of a busy queue would otherwise order GPUs for months).
PoolCapacityPlan WithoutOrder(PoolCapacityPlan plan) {
  const int days = plan.trend_days_recorded;
  plan.summary = "no order recommended: " + std::to_string(days) + (days == 1 ? " day" : " days") +
                 " of pool hours recorded, " + std::to_string(kTrendDaysNeeded) +
                 " needed; the replay of what was recorded needs " +
                 std::to_string(plan.nodes_needed) +
                 (plan.nodes_needed == 1 ? " node (" : " nodes (") +
                 std::to_string(plan.pool.nodes) + " installed) from " + plan.need_by;
  return plan;
}

Result<PoolCapacityPlan> PlanPool(const CapacityPool& pool,
                                  const std::vector<store::UsageRecord>& records,
                                  const std::vector<store::PoolHour>& hours,
                                  const CapacityGrowth& growth, const CapacityRequest& req) {
  PoolCapacityPlan plan;
  plan.pool = pool;
  const int64_t today = req.now_ms / kDayMs;
  const int gpn = std::max(1, pool.gpus_per_node);

  // The trend: each day's busiest hour of GPUs held and asked for, fitted by a line.
  std::map<int64_t, double> peaks;  // day -> GPUs
  for (const auto& h : hours) {
    if (h.pool != pool.name || h.covered_ms <= 0) continue;
    double demand = static_cast<double>(h.alloc_gpu_ms + h.queued_gpu_ms) / h.covered_ms;
    double& p = peaks[h.hour_ms / kDayMs];
    p = std::max(p, demand);
  }
  plan.trend_days_recorded = static_cast<int>(peaks.size());
  plan.history_short = plan.trend_days_recorded < kTrendDaysNeeded;
  double a = 0, b = 0;  // peak = a + b * (day - today)
  if (!peaks.empty()) {
    double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (const auto& [day, p] : peaks) {
      double x = static_cast<double>(day - today);
      n += 1;
      sx += x;
      sy += p;
      sxx += x * x;
      sxy += x * p;
    }
    a = sy / n;
    if (static_cast<int>(peaks.size()) >= kTrendDaysNeeded && n * sxx - sx * sx > 0) {
      b = (n * sxy - sx * sy) / (n * sxx - sx * sx);
      a = (sy - b * sx) / n;
    } else {
      plan.notes.push_back("trend: " + std::to_string(peaks.size()) +
                           " days of pool hours recorded, " + std::to_string(kTrendDaysNeeded) +
                           " needed; demand taken as flat");
    }
  } else {
    plan.notes.push_back("trend: no pool hours recorded; demand taken as flat");
  }
  plan.peak_demand_now = std::max(0.0, a);
  plan.trend_gpus_per_month = b * 30;
  auto trend_at = [&](int64_t d) {
    if (a <= 0.01) return 1.0;
    return std::clamp((a + b * static_cast<double>(d)) / a, 0.1, 10.0);
  };
  // The season: the mean daily peak of each calendar month, over a year or more of hours.
  std::map<int, std::pair<double, int>> months;
  for (const auto& [day, p] : peaks) {
    auto& m = months[MonthOf(day)];
    m.first += p;
    ++m.second;
  }
  bool seasonal = !peaks.empty() && peaks.rbegin()->first - peaks.begin()->first >= 360;
  if (!seasonal && !peaks.empty()) {
    plan.notes.push_back("season: pool hours of a year or more needed (" +
                         std::to_string(peaks.rbegin()->first - peaks.begin()->first + 1) +
                         " days recorded); none applied");
  }
  auto season_at = [&](int64_t d) {
    if (!seasonal) return 1.0;
    auto now = months.find(MonthOf(today)), then = months.find(MonthOf(today + d));
    if (now == months.end() || then == months.end() || now->second.first <= 0) return 1.0;
    return (then->second.first / then->second.second) / (now->second.first / now->second.second);
  };
  // The operator's growth: each growing team's share of the pool's GPU-hours, compounded.
  std::map<std::string, double> team_hours;
  double all_hours = 0;
  for (const auto& r : records) {
    store::UsageFigures scratch;
    const auto& f = FiguresOf(r, scratch);
    double h = static_cast<double>(f.gpus) * static_cast<double>(r.end_ms - r.start_ms) / 3.6e6;
    team_hours[r.team] += h;
    all_hours += h;
  }
  auto planned_at = [&](int64_t d) {
    if (all_hours <= 0) return 1.0;
    double f = 1;
    for (const auto& t : growth.teams) {
      double share = team_hours.count(t.team) ? team_hours[t.team] / all_hours : 0;
      f += share * (std::pow(1 + t.quarterly, static_cast<double>(d) / kQuarterDays) - 1);
    }
    return std::max(f, 0.0);
  };
  auto factor_at = [&](int64_t d) { return trend_at(d) * season_at(d) * planned_at(d); };
  const int64_t horizon = req.horizon_days;
  plan.factor_trend = trend_at(horizon);
  plan.factor_season = season_at(horizon);
  plan.factor_planned = planned_at(horizon);
  plan.factor = factor_at(horizon);

  // The jobs replayed: the history window's allocations, as they were submitted.
  std::vector<sched::TraceJob> jobs;
  int64_t t0 = req.now_ms - static_cast<int64_t>(req.history_days) * kDayMs;
  for (const auto& r : records) {
    store::UsageFigures scratch;
    const auto& f = FiguresOf(r, scratch);
    if (f.gpus <= 0 || r.end_ms <= r.start_ms) continue;
    sched::TraceJob j;
    j.submit_s = std::max<double>(0, static_cast<double>(r.start_ms - f.wait_ms - t0) / 1000.0);
    j.duration_s = static_cast<double>(r.end_ms - r.start_ms) / 1000.0;
    j.gpus = static_cast<int>(f.gpus);
    j.team = r.team;
    jobs.push_back(j);
  }
  plan.history_jobs = static_cast<int>(jobs.size());
  if (jobs.empty()) {
    plan.notes.push_back("no allocation of this pool in the last " +
                         std::to_string(req.history_days) + " days to replay");
  }
  // New demand holds its GPUs from the start of the replay to past the last job's end.
  double span_s = static_cast<double>(req.history_days) * 86400.0;
  for (const auto& j : jobs) span_s = std::max(span_s, j.submit_s + j.duration_s);
  span_s = std::min(span_s + 86400.0, sched::kMaxReplaySpanS);
  // New demand from its date on: held all the time, on whole nodes beyond one node's GPUs.
  auto with_planned = [&](int64_t d, int* gpus) {
    std::vector<sched::TraceJob> out = jobs;
    for (const auto& n : growth.demands) {
      if (n.pool != pool.name) continue;
      auto from = ParseIsoDate(n.from);
      if (!from || *from > today + d) continue;
      int g = n.gpus <= gpn ? n.gpus : (n.gpus + gpn - 1) / gpn * gpn;
      if (gpus) *gpus += g;
      sched::TraceJob j;
      j.submit_s = 0;
      j.duration_s = span_s;
      j.gpus = g;
      j.team = "planned:" + n.name;
      out.push_back(j);
    }
    return out;
  };
  // The p95 wait of `trace` at `scale` on a fixed pool of `nodes` nodes; infinite when a job
  // cannot fit.
  auto replay = [&](std::vector<sched::TraceJob> trace, int nodes, double scale) -> Result<double> {
    if (trace.empty()) return 0.0;
    if (nodes <= 0) return kInf;
    sched::ReplayOptions o;
    o.gpus_per_node = gpn;
    o.policy.mode = ScaleMode::kReactive;
    o.policy.min_nodes = o.policy.max_nodes = nodes;
    o.policy.consolidate_below = 0;
    // No scaling to decide, no forecast to keep (a decision a day, a forecast step of a day
    // keep the replay to its jobs).
    o.policy.interval_s = 86'400;
    o.forecast_step_s = 86'400;
    o.initial_nodes = nodes;
    o.size_scale = std::clamp(scale, 0.01, sched::kMaxSizeScale);
    ++plan.replays;
    auto r = sched::Replay(std::move(trace), o);
    if (!r.ok()) return r.error();
    return r->unplaceable ? kInf : r->wait_p95_s;
  };
  // The demand `d` days ahead, planned demand included.
  auto wait_at = [&](int nodes, int64_t d) {
    return replay(with_planned(d, nullptr), nodes, factor_at(d));
  };
  auto meets = [&](double w) { return w <= req.wait_p95_s; };

  // As it was: the history at factor 1 (the planned demand left out).
  auto now_as_was = replay(jobs, pool.nodes, 1.0);
  if (!now_as_was.ok()) return now_as_was.error();
  plan.wait_p95_now_s = now_as_was.value();
  with_planned(horizon, &plan.planned_gpus);
  auto at_horizon = wait_at(pool.nodes, horizon);
  if (!at_horizon.ok()) return at_horizon.error();
  plan.wait_p95_horizon_s = at_horizon.value();
  plan.nodes_needed = pool.nodes;
  const std::string target = Minutes(req.wait_p95_s);
  const std::string horizon_date = IsoDate(today + horizon);
  if (meets(plan.wait_p95_horizon_s)) {
    plan.summary = "no order: " + std::to_string(pool.nodes) +
                   " nodes keep the p95 queue wait under " + target + " to " + horizon_date;
    return plan;
  }
  // The fewest nodes that meet the target at the horizon: doubling the added nodes, then
  // halving the gap (the wait falls as nodes are added).
  int low = std::max(pool.nodes, 0), high = std::max(pool.nodes, 1);
  for (int add = 1;; add *= 2) {
    high = std::max(pool.nodes, 0) + add;
    auto w = wait_at(high, horizon);
    if (!w.ok()) return w.error();
    if (meets(w.value())) break;
    low = high;
    if (add >= 4096) {
      plan.notes.push_back("no pool of up to " + std::to_string(high) +
                           " nodes keeps the p95 under the target");
      plan.summary = "no order meets the target: even " + std::to_string(high) +
                     " nodes leave the p95 queue wait over " + target;
      return plan;
    }
  }
  while (high - low > 1) {
    int mid = low + (high - low) / 2;
    auto w = wait_at(mid, horizon);
    if (!w.ok()) return w.error();
    (meets(w.value()) ? high : low) = mid;
  }
  plan.nodes_needed = high;
  // When the installed nodes stop meeting it: the first 30-day step at whose end they fail
  // (demand grows with time, so the steps before it pass).
  const int64_t steps = std::max<int64_t>(1, (horizon + 29) / 30);
  int64_t need_day = horizon;
  auto now_wait = wait_at(pool.nodes, 0);
  if (!now_wait.ok()) return now_wait.error();
  if (!meets(now_wait.value())) {
    need_day = 0;
  } else {
    int64_t ok = 0, fails = steps;  // month indices; `fails` is the horizon's
    while (fails - ok > 1) {
      int64_t mid = (ok + fails) / 2;
      auto w = wait_at(pool.nodes, std::min<int64_t>(mid * 30, horizon));
      if (!w.ok()) return w.error();
      (meets(w.value()) ? ok : fails) = mid;
    }
    // The start of that month: ordering by its end would be late by up to a month.
    need_day = std::min<int64_t>((fails - 1) * 30 + 1, horizon);
  }
  plan.need_by = IsoDate(today + need_day);
  if (plan.history_short) return WithoutOrder(std::move(plan));
  int64_t order_day = need_day - req.lead_time_days;
  if (order_day < 0) {
    plan.notes.push_back("late: ordered today, the GPUs arrive " + std::to_string(-order_day) +
                         " days after they are needed");
    order_day = 0;
  }
  plan.order_by = IsoDate(today + order_day);
  plan.order_nodes = plan.nodes_needed - pool.nodes;
  plan.order_gpus = plan.order_nodes * gpn;
  if (pool.gpu_price) {
    plan.cost = *pool.gpu_price * plan.order_gpus;
  } else {
    plan.notes.push_back("cost: no purchase price of a " + pool.gpu_model +
                         " in the asset register (gpufleet assets import)");
  }
  plan.summary = "order " + std::to_string(plan.order_nodes) + " x " + std::to_string(gpn) + " " +
                 pool.gpu_model + " (" + std::to_string(plan.order_gpus) + " GPUs) by " +
                 plan.order_by +
                 (plan.cost ? ", cost " + Money(*plan.cost, req.currency) : std::string()) +
                 ", to keep the p95 queue wait under " + target + " to " + horizon_date +
                 " (needed from " + plan.need_by + ")";
  return plan;
}

Result<CapacityPlan> PlanCapacity(store::UsageStore& store, const std::vector<CapacityPool>& pools,
                                  const CapacityGrowth& growth, const CapacityRequest& req) {
  CapacityPlan out;
  out.request = req;
  auto hours =
      store.ListPoolHours(req.now_ms - static_cast<int64_t>(req.trend_days) * kDayMs, req.now_ms);
  if (!hours.ok()) return hours.error();
  for (const auto& pool : pools) {
    std::vector<store::UsageRecord> records;
    store::UsageQuery q;
    q.from_ms = req.now_ms - static_cast<int64_t>(req.history_days) * kDayMs;
    q.to_ms = req.now_ms;
    q.pool = pool.name;
    GF_TRY(store.ScanUsage(q, [&](const store::UsageRecord& r) { records.push_back(r); }));
    records.insert(records.end(), pool.live.begin(), pool.live.end());
    auto plan = PlanPool(pool, records, hours.value(), growth, req);
    if (!plan.ok()) return plan.error();
    out.pools.push_back(std::move(plan).value());
  }
  // The soonest order first; then the pools without one.
  std::stable_sort(out.pools.begin(), out.pools.end(),
                   [](const PoolCapacityPlan& x, const PoolCapacityPlan& y) {
                     if (x.order_by.empty() != y.order_by.empty()) return y.order_by.empty();
                     return x.order_by < y.order_by;
                   });
  double spent = 0;
  for (auto& p : out.pools) {
    if (!p.cost) continue;
    spent += *p.cost;
    p.within_budget = !req.budget || spent <= *req.budget;
  }
  out.total_cost = spent;
  return out;
}

}  // namespace gpufleet::usage
