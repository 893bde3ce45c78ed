// Capacity planning (usage/capacity.h):
//   GET /api/v1/reports/capacity[?pool=&horizon=180d&lead_time=90d&wait_p95=10m&history=30d
//       &budget=]   per pool: the demand trend, season and planned growth at the horizon, the
//                   replays on the nodes installed and on more, and the order that keeps the
//                   p95 queue wait under the target (nodes, by when, cost)
//   GET /api/v1/reports/capacity/growth, PUT /api/v1/reports/capacity/growth
//       {"teams": [{"team", "quarterly"}], "demands": [{"name", "pool", "gpus", "from"}]}
//                   what the operator plans beyond the trend (a setting, audited)
// (the /reports/* routes are registered in reports.cpp, their handlers are here)

#include "usage/capacity.h"

#include <cmath>
#include <set>

#include "api/json_util.h"
#include "api/routes/reports.h"
#include "common/clock.h"

namespace json = boost::json;

namespace gpufleet::api {
namespace {

using usage::kCapacityGrowthSetting;

json::value Finite(double v) { return std::isfinite(v) ? json::value(v) : json::value(nullptr); }
json::value TextOrNull(const std::string& s) {
  return s.empty() ? json::value(nullptr) : json::value(s);
}

Result<usage::CapacityGrowth> StoredGrowth(ApiContext& ctx) {
  auto doc = ctx.store.settings->GetSetting(kCapacityGrowthSetting);
  if (!doc.ok()) return doc.error();
  if (!doc.value()) return usage::CapacityGrowth{};
  return usage::ParseCapacityGrowth(*doc.value());
}

// A duration parameter in whole days, `lo` to `hi`.
Result<int> DaysParam(const Request& req, const char* key, int dflt, int lo, int hi) {
  std::string v = req.Param(key);
  if (v.empty()) return dflt;
  int64_t ms = ParseDurationMs(v);
  if (ms < 0 || ms % 86'400'000 != 0 || ms / 86'400'000 < lo || ms / 86'400'000 > hi) {
    return MakeError(ErrorCode::kInvalidArgument,
                     std::string("'") + key + "' is a number of days such as 90d, " +
                         std::to_string(lo) + "d to " + std::to_string(hi) + "d");
  }
  return static_cast<int>(ms / 86'400'000);
}

// The query's horizon, lead time, history, wait target and budget.
Result<usage::CapacityRequest> PlanRequest(ApiContext& ctx, const Request& req) {
  usage::CapacityRequest r;
  r.now_ms = ctx.clock->NowMs();
  for (auto [key, into, dflt, lo, hi] : {std::tuple{"horizon", &r.horizon_days, 180, 30, 730},
                                         std::tuple{"lead_time", &r.lead_time_days, 90, 0, 730},
                                         std::tuple{"history", &r.history_days, 30, 1, 90}}) {
    auto d = DaysParam(req, key, dflt, lo, hi);
    if (!d.ok()) return d.error();
    *into = d.value();
  }
  if (std::string w = req.Param("wait_p95"); !w.empty()) {
    int64_t ms = ParseDurationMs(w);
    if (ms < 0 || ms > 7 * 86'400'000LL) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "'wait_p95' is a duration such as 10m, at most 7d");
    }
    r.wait_p95_s = static_cast<double>(ms) / 1000.0;
  }
  if (std::string b = req.Param("budget"); !b.empty()) {
    char* end = nullptr;
    double v = std::strtod(b.c_str(), &end);
    if (*end || !std::isfinite(v) || v < 0) {
      return MakeError(ErrorCode::kInvalidArgument, "'budget' must be a number, not negative");
    }
    r.budget = v;
  }
  return r;
}

// The pools the token may see (or the one asked for), with their node counts.
Result<std::map<std::string, usage::CapacityPool>> PlanPools(ApiContext& ctx, const Request& req,
                                                             const Principal& who) {
  auto pools = ctx.fleet.Pools();
  if (!pools.ok()) return pools.error();
  const std::string only = req.Param("pool");
  std::map<std::string, usage::CapacityPool> by_name;
  for (const auto& p : pools.value()) {
    if ((!only.empty() && p.name != only) || !who.CanSeeCluster(p.cluster)) continue;
    usage::CapacityPool c;
    c.name = p.name;
    c.cluster = p.cluster;
    c.gpu_model = p.gpu_model;
    c.gpus_per_node = p.gpus_per_node;
    by_name[p.name] = c;
  }
  if (!only.empty() && by_name.empty()) {
    return MakeError(ErrorCode::kNotFound, "no pool '" + only + "'");
  }
  return by_name;
}

// Each pool's nodes, and what the asset register knows of their GPUs.
void AddNodesAndAssets(ApiContext& ctx, const usage::CapacityRequest& r,
                       std::map<std::string, usage::CapacityPool>& by_name) {
  std::map<std::string, std::string> node_pool;
  ctx.fleet.ForEachNode({}, [&](const Node& n) {
    node_pool[n.name] = n.pool;
    if (auto it = by_name.find(n.pool); it != by_name.end()) ++it->second.nodes;
  });
  // What the asset register knows: warranties ending before the horizon, purchase prices.
  if (ctx.assets) {
    const std::string horizon = usage::IsoDate(r.now_ms / 86'400'000 + r.horizon_days);
    std::map<std::string, std::pair<double, int>> prices;  // model -> sum, count
    AssetFilter gpus;
    gpus.kind = "gpu";
    for (const auto& a : ctx.assets->List(gpus)) {
      if (a.purchase_price) {
        auto& p = prices[a.model];
        p.first += *a.purchase_price;
        ++p.second;
      }
      auto pool = node_pool.find(a.node);
      if (pool == node_pool.end()) continue;
      auto it = by_name.find(pool->second);
      if (it != by_name.end() && !a.warranty_end.empty() && a.warranty_end < horizon) {
        ++it->second.gpus_leaving_warranty;
      }
    }
    for (auto& [name, c] : by_name) {
      if (auto p = prices.find(c.gpu_model); p != prices.end()) {
        c.gpu_price = p->second.first / p->second.second;
      }
    }
  }
}

// The jobs running and queued now, as ledger records that end when their duration says.
void AddLiveJobs(ApiContext& ctx, const usage::CapacityRequest& r,
                 std::map<std::string, usage::CapacityPool>& by_name) {
  // The jobs running and queued now, ending when their duration says (or holding their GPUs
  // through the history window).
  if (ctx.jobs) {
    const int64_t now = r.now_ms, window = int64_t{r.history_days} * 86'400'000;
    for (const char* state : {"running", "queued"}) {
      workload::JobFilter f;
      f.state = state;
      for (const auto& j : ctx.jobs->List(f)) {
        auto it = by_name.find(j.spec.pool);
        if (it == by_name.end()) continue;
        const bool running = j.state == workload::JobState::kRunning;
        const int64_t start = running ? j.start_ms : now;
        int64_t left = window;
        if (j.spec.duration_ms > 0) {
          left = std::max<int64_t>(
              j.spec.duration_ms - j.done_ms - (running ? now - j.start_ms : 0), 60'000);
        }
        store::UsageRecord rec{
            0,     j.id,       j.spec.team, j.spec.project, j.spec.pool, it->second.cluster,
            start, now + left, ""};
        rec.figures.gpus = j.spec.gpus;
        rec.figures.wait_ms = running ? j.alloc_wait_ms : now - j.queued_ms;
        it->second.live.push_back(std::move(rec));
      }
    }
  }
}

json::object PoolPlanJson(const usage::PoolCapacityPlan& p) {
  json::array notes;
  for (const auto& n : p.notes) notes.emplace_back(n);
  return json::object{
      {"pool", p.pool.name},
      {"cluster", p.pool.cluster},
      {"gpu_model", p.pool.gpu_model},
      {"gpus_per_node", p.pool.gpus_per_node},
      {"nodes", p.pool.nodes},
      {"gpus_installed", p.pool.nodes * p.pool.gpus_per_node},
      {"gpus_leaving_warranty", p.pool.gpus_leaving_warranty},
      {"gpu_price", p.pool.gpu_price ? json::value(*p.pool.gpu_price) : json::value(nullptr)},
      {"history_jobs", p.history_jobs},
      {"trend_days_recorded", p.trend_days_recorded},
      {"trend_days_needed", usage::kTrendDaysNeeded},
      {"history_short", p.history_short},
      {"peak_demand_now", p.peak_demand_now},
      {"trend_gpus_per_month", p.trend_gpus_per_month},
      {"factor", p.factor},
      {"factor_trend", p.factor_trend},
      {"factor_season", p.factor_season},
      {"factor_planned", p.factor_planned},
      {"planned_gpus", p.planned_gpus},
      {"wait_p95_now_s", Finite(p.wait_p95_now_s)},
      {"wait_p95_horizon_s", Finite(p.wait_p95_horizon_s)},
      {"nodes_needed", p.nodes_needed},
      {"need_by", TextOrNull(p.need_by)},
      {"order_by", TextOrNull(p.order_by)},
      {"order_nodes", p.order_nodes},
      {"order_gpus", p.order_gpus},
      {"cost", p.cost ? json::value(*p.cost) : json::value(nullptr)},
      {"within_budget", p.within_budget},
      {"summary", p.summary},
      {"notes", std::move(notes)},
      {"replays", p.replays}};
}

Response Plan(ApiContext& ctx, const Request& req, const Principal& who) {
  auto parsed = PlanRequest(ctx, req);
  if (!parsed.ok()) return ErrorResponse(parsed.error());
  usage::CapacityRequest& r = parsed.value();
  auto rates = ctx.usage->GetRates(*ctx.catalog);
  if (!rates.ok()) return ErrorResponse(rates.error());
  r.currency = rates->currency;
  auto growth = StoredGrowth(ctx);
  if (!growth.ok()) return ErrorResponse(growth.error());
  auto by_name = PlanPools(ctx, req, who);
  if (!by_name.ok()) return ErrorResponse(by_name.error());
  AddNodesAndAssets(ctx, r, by_name.value());
  AddLiveJobs(ctx, r, by_name.value());
  std::vector<usage::CapacityPool> list;
  for (auto& [name, c] : by_name.value()) list.push_back(c);
  auto plan = usage::PlanCapacity(*ctx.store.usage, list, growth.value(), r);
  if (!plan.ok()) return ErrorResponse(plan.error());
  json::array items;
  for (const auto& p : plan->pools) items.push_back(PoolPlanJson(p));
  return ObjectResponse(200, {{"horizon_days", r.horizon_days},
                              {"lead_time_days", r.lead_time_days},
                              {"history_days", r.history_days},
                              {"wait_p95_s", r.wait_p95_s},
                              {"budget", r.budget ? json::value(*r.budget) : json::value(nullptr)},
                              {"currency", r.currency},
                              {"total_cost", plan->total_cost},
                              {"growth", json::parse(usage::CapacityGrowthJson(growth.value()))},
                              {"items", std::move(items)}});
}

}  // namespace

Response CapacityReport(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.usage) {
    return ErrorResponse(MakeError(ErrorCode::kUnavailable, "the usage ledger is not running"));
  }
  return Plan(ctx, req, who);
}

Response GetCapacityGrowth(ApiContext& ctx) {
  auto g = StoredGrowth(ctx);
  if (!g.ok()) return ErrorResponse(g.error());
  return ObjectResponse(200, json::parse(usage::CapacityGrowthJson(g.value())).as_object());
}

Response PutCapacityGrowth(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!who.clusters.empty()) {
    return ErrorResponse(
        MakeError(ErrorCode::kPermissionDenied,
                  "token '" + who.name + "' is limited to clusters; the plan is fleet-wide"));
  }
  auto g = usage::ParseCapacityGrowth(req.body);
  if (!g.ok()) return ErrorResponse(g.error());
  // Teams and pools it names exist.
  std::set<std::string> teams, pools;
  if (ctx.teams) {
    for (const auto& t : ctx.teams->List()) teams.insert(t.name);
  }
  if (auto ps = ctx.fleet.Pools(); ps.ok()) {
    for (const auto& p : ps.value()) pools.insert(p.name);
  }
  for (size_t i = 0; i < g->teams.size(); ++i) {
    if (!teams.count(g->teams[i].team)) {
      return ErrorResponse(
          MakeError(ErrorCode::kInvalidArgument,
                    "teams[" + std::to_string(i) + "].team: no team '" + g->teams[i].team + "'"));
    }
  }
  for (size_t i = 0; i < g->demands.size(); ++i) {
    if (!pools.count(g->demands[i].pool)) {
      return ErrorResponse(MakeError(
          ErrorCode::kInvalidArgument,
          "demands[" + std::to_string(i) + "].pool: no pool '" + g->demands[i].pool + "'"));
    }
  }
  auto before = StoredGrowth(ctx);
  std::string doc = usage::CapacityGrowthJson(g.value());
  if (auto s = ctx.store.settings->PutSetting(kCapacityGrowthSetting, doc, ctx.clock->NowMs());
      !s.ok()) {
    return ErrorResponse(s.error());
  }
  Response out = ObjectResponse(200, json::parse(doc).as_object());
  out.audit_target = "reports/capacity/growth";
  out.audit_before = before.ok() ? usage::CapacityGrowthJson(before.value()) : "";
  out.audit_after = doc;
  return out;
}

}  // namespace gpufleet::api
