// Autoscaling: GET /api/v1/scaling (every scaled pool), GET/PUT/DELETE
// /api/v1/pools/{pool}/scaling (the policy and where the pool stands), POST
// /api/v1/pools/{pool}/scale (manual), GET /api/v1/pools/{pool}/scaling/history and /events,
// POST /api/v1/pools/{pool}/scaling/tune (the policy tuned on the pool's own past).

#include <cmath>

#include "api/json_util.h"
#include "api/scope.h"
#include "model/json.h"
#include "sched/policy_json.h"
#include "sched/tune.h"

namespace json = boost::json;

namespace gpufleet::api {
namespace {

Response ScalingUnavailable() {
  return ErrorResponse(MakeError(ErrorCode::kUnavailable, "autoscaling is not running"));
}

int64_t Whole(double v) { return static_cast<int64_t>(std::llround(v)); }

json::value Time(int64_t ms) { return ms ? json::value(FormatTime(ms)) : json::value(nullptr); }

// A kept manual scale: its one bound (the other null), until when and by whom; null when none.
json::value KeepJson(const scaling::ManualKeep& k) {
  if (!k.until_ms) return nullptr;
  auto bound = [](int n) { return n >= 0 ? json::value(n) : json::value(nullptr); };
  return json::object{{"min_nodes", bound(k.min_nodes)},
                      {"max_nodes", bound(k.max_nodes)},
                      {"until", FormatTime(k.until_ms)},
                      {"by", k.actor}};
}

json::object StatusJson(const scaling::PoolStatus& s, const std::string& cluster) {
  const auto& f = s.forecast;
  const auto& n = s.now;
  bool forecasting = n.forecast_gpus >= 0;
  return {
      {"pool", s.scaling.pool},
      {"cluster", cluster},
      {"simulated", s.scaling.actuator.type == "sim"},
      {"policy", json::parse(sched::PoolScalingJson(s.scaling))},
      {"gpus_per_node", s.gpus_per_node},
      {"nodes",
       {{"ready", n.ready},
        {"provisioning", n.provisioning},
        {"other", n.other},
        {"target", n.target}}},
      {"demand",
       {{"gpus", Whole(n.demand_gpus)},
        {"running", Whole(n.running_gpus)},
        {"queued", Whole(n.queued_gpus)},
        {"oldest_wait_s", n.oldest_wait_s}}},
      {"forecast",
       {{"gpus", forecasting ? json::value(n.forecast_gpus) : json::value(nullptr)},
        {"model", f.model},
        {"mape", f.scored ? json::value(f.mape) : json::value(nullptr)},
        {"bias", f.scored ? json::value(f.bias) : json::value(nullptr)},
        {"shortfall_gpus", f.scored ? json::value(f.shortfall) : json::value(nullptr)},
        {"scored", f.scored},
        {"steps_seen", s.forecast_steps}}},
      {"decision",
       {{"delta", s.decision.delta}, {"target", s.decision.target}, {"reason", s.decision.reason}}},
      {"decided_at", Time(n.time_ms)},
      {"last_scale_up_at", Time(s.last_up_ms)},
      {"last_scale_down_at", Time(s.last_down_ms)},
      {"last_error", s.last_error},
      {"keep", KeepJson(s.keep)}};
}

// The pool (404 when it does not exist or is outside the token's clusters) and its cluster.
Result<Pool> VisiblePool(ApiContext& ctx, const Request& req, const Principal& who) {
  const std::string& name = req.params.at("pool");
  auto pool = ctx.fleet.FindPool(name);
  if (!pool.ok() || !who.CanSeeCluster(pool->cluster)) {
    return MakeError(ErrorCode::kNotFound, "no pool '" + name + "'");
  }
  return pool;
}

json::object EventJson(const ScaleEventRecord& r) {
  auto o = json::parse(r.doc).as_object();
  o["id"] = r.id;
  o["time"] = FormatTime(r.time_ms);
  return o;
}

// The tune's figures (sched::TuneJson) with the pool's: its name, node size, the span of its
// history, and whether the result was applied and the policy as it stands.
json::object TuneJson(const scaling::TuneReport& t, double objective_s) {
  auto o = json::parse(sched::TuneJson(t.result, t.before.policy.mode, objective_s)).as_object();
  o["pool"] = t.pool;
  o["gpus_per_node"] = t.gpus_per_node;
  o["from"] = FormatTime(t.from_ms);
  o["to"] = FormatTime(t.to_ms);
  o["applied"] = t.applied;
  o["not_applied"] = t.not_applied.empty() ? json::value(nullptr) : json::value(t.not_applied);
  o["policy"] = json::parse(sched::PoolScalingJson(t.after));
  return o;
}

// A duration field: a string such as "90s" or "7d", or a number of seconds; `fallback` when
// absent.
Result<int64_t> DurationField(const json::object& o, const char* key, int64_t fallback) {
  auto it = o.find(key);
  if (it == o.end()) return fallback;
  int64_t ms = -1;
  if (it->value().is_string()) {
    ms = ParseDurationMs(std::string(it->value().as_string()));
  } else if (it->value().is_number()) {
    double s = it->value().to_number<double>();
    if (s >= 0 && s < 1e9) ms = static_cast<int64_t>(std::llround(s * 1000));
  }
  if (ms < 0) {
    return MakeError(ErrorCode::kInvalidArgument,
                     std::string("'") + key + "' must be a duration such as 60s or 7d");
  }
  return ms;
}

// GET /api/v1/scaling
Response GetScaling(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.scaling) return ScalingUnavailable();
  auto page = ParsePage(req);
  if (!page.ok()) return ErrorResponse(page.error());
  std::map<std::string, std::string> cluster_of;
  if (auto pools = ctx.fleet.Pools(); pools.ok()) {
    for (const auto& p : pools.value()) cluster_of[p.name] = p.cluster;
  }
  std::string cluster = req.Param("cluster");
  json::array items;
  for (const auto& s : ctx.scaling->Pools()) {
    const std::string& c = cluster_of[s.scaling.pool];
    if (!who.CanSeeCluster(c) || (!cluster.empty() && c != cluster)) continue;
    items.push_back(StatusJson(s, c));
  }
  return ListResponse(std::move(items), page.value());
}

// PUT /api/v1/pools/{pool}/scaling
Response PutPoolsPoolScaling(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.scaling) return ScalingUnavailable();
  auto pool = VisiblePool(ctx, req, who);
  if (!pool.ok()) return ErrorResponse(pool.error());
  auto parsed = sched::ParsePoolScaling(req.body);
  if (!parsed.ok()) return ErrorResponse(parsed.error());
  if (!parsed->pool.empty() && parsed->pool != pool->name) {
    return ErrorResponse(
        MakeError(ErrorCode::kInvalidArgument,
                  "pool: the body names '" + parsed->pool + "', the path '" + pool->name + "'"));
  }
  parsed->pool = pool->name;
  auto before = ctx.scaling->Get(pool->name);
  auto allowed = ScopeActuator(who, pool->name, before.ok() ? &before->scaling.actuator : nullptr,
                               parsed->actuator);
  if (!allowed.ok()) return ErrorResponse(allowed.error());
  auto set = ctx.scaling->SetPolicy(std::move(parsed).value(), who.name);
  if (!set.ok()) return ErrorResponse(set.error());
  auto now = ctx.scaling->Get(pool->name);
  if (!now.ok()) return ErrorResponse(now.error());
  Response r = ObjectResponse(200, StatusJson(now.value(), pool->cluster));
  r.audit_target = "pool/" + pool->name + "/scaling";
  if (before.ok()) r.audit_before = sched::PoolScalingJson(before->scaling);
  r.audit_after = sched::PoolScalingJson(set.value());
  return r;
}

// DELETE /api/v1/pools/{pool}/scaling
Response DeletePoolsPoolScaling(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.scaling) return ScalingUnavailable();
  auto pool = VisiblePool(ctx, req, who);
  if (!pool.ok()) return ErrorResponse(pool.error());
  auto before = ctx.scaling->Get(pool->name);
  if (!before.ok()) return ErrorResponse(before.error());
  if (auto s = ctx.scaling->DeletePolicy(pool->name, who.name); !s.ok()) {
    return ErrorResponse(s.error());
  }
  Response r = ObjectResponse(200, {{"pool", pool->name}, {"deleted", true}});
  r.audit_target = "pool/" + pool->name + "/scaling";
  r.audit_before = sched::PoolScalingJson(before->scaling);
  return r;
}

// POST /api/v1/pools/{pool}/scale
Response PostPoolsPoolScale(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.scaling) return ScalingUnavailable();
  auto pool = VisiblePool(ctx, req, who);
  if (!pool.ok()) return ErrorResponse(pool.error());
  auto body = ParseObject(req.body);
  if (!body.ok()) return ErrorResponse(body.error());
  if (auto s = OnlyFields(*body, {"target", "delta", "keep"}); !s.ok()) {
    return ErrorResponse(s.error());
  }
  scaling::ScaleRequest sr;
  for (auto [key, out] :
       {std::pair<const char*, std::optional<int>*>{"target", &sr.target}, {"delta", &sr.delta}}) {
    if (!body->contains(key)) continue;
    auto v = GetInt(*body, key, 0);
    if (!v.ok()) return ErrorResponse(v.error());
    if (v.value() < -100'000 || v.value() > 100'000) {
      return ErrorResponse(
          MakeError(ErrorCode::kInvalidArgument, std::string("'") + key + "' is out of range"));
    }
    *out = static_cast<int>(v.value());
  }
  if (sr.target.has_value() == sr.delta.has_value()) {
    return ErrorResponse(
        MakeError(ErrorCode::kInvalidArgument, "give 'target' (nodes) or 'delta' (+/- nodes)"));
  }
  auto keep = GetString(*body, "keep", std::string());
  if (!keep.ok()) return ErrorResponse(keep.error());
  if (!keep->empty()) {
    sr.keep_ms = ParseDurationMs(keep.value());
    if (sr.keep_ms <= 0) {
      return ErrorResponse(
          MakeError(ErrorCode::kInvalidArgument, "'keep' must be a duration such as 30m or 2h"));
    }
  }
  auto event = ctx.scaling->Scale(pool->name, sr, who.name);
  if (!event.ok()) return ErrorResponse(event.error());
  Response r = ObjectResponse(200, json::parse(event.value()).as_object());
  r.audit_target = "pool/" + pool->name;
  r.audit_after = r.body;
  return r;
}

// POST /api/v1/pools/{pool}/scaling/tune
Response PostPoolsPoolScalingTune(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.scaling) return ScalingUnavailable();
  auto pool = VisiblePool(ctx, req, who);
  if (!pool.ok()) return ErrorResponse(pool.error());
  auto body = ParseObject(req.body.empty() ? std::string("{}") : req.body);
  if (!body.ok()) return ErrorResponse(body.error());
  if (auto s = OnlyFields(*body, {"wait_p95", "window", "apply"}); !s.ok()) {
    return ErrorResponse(s.error());
  }
  scaling::TuneRequest tr;
  auto wait = DurationField(*body, "wait_p95", 60'000);
  if (!wait.ok()) return ErrorResponse(wait.error());
  auto window = DurationField(*body, "window", tr.window_ms);
  if (!window.ok()) return ErrorResponse(window.error());
  if (window.value() <= 0 || window.value() > 30 * 86'400'000LL) {
    return ErrorResponse(MakeError(ErrorCode::kInvalidArgument,
                                   "'window' must be a duration up to 30d, such as 7d"));
  }
  auto apply = GetBool(*body, "apply", false);
  if (!apply.ok()) return ErrorResponse(apply.error());
  tr.wait_p95_s = static_cast<double>(wait.value()) / 1000;
  tr.window_ms = window.value();
  tr.apply = apply.value();
  auto t = ctx.scaling->Tune(pool->name, tr, who.name);
  if (!t.ok()) return ErrorResponse(t.error());
  Response r = ObjectResponse(200, TuneJson(t.value(), tr.wait_p95_s));
  r.audit_target = "pool/" + pool->name + "/scaling";
  if (t->applied) {
    r.audit_before = sched::PoolScalingJson(t->before);
    r.audit_after = sched::PoolScalingJson(t->after);
  }
  return r;
}

// GET /api/v1/pools/{pool}/scaling/events
Response GetPoolsPoolScalingEvents(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.scaling) return ScalingUnavailable();
  auto pool = VisiblePool(ctx, req, who);
  if (!pool.ok()) return ErrorResponse(pool.error());
  auto page = ParsePage(req);
  if (!page.ok()) return ErrorResponse(page.error());
  auto events = ctx.scaling->Events(pool->name, static_cast<int>(page->limit + page->offset));
  if (!events.ok()) return ErrorResponse(events.error());
  json::array items;
  for (const auto& e : events.value()) items.push_back(EventJson(e));
  return ListResponse(std::move(items), page.value());
}

// GET /api/v1/pools/{pool}/scaling/history
Response GetPoolsPoolScalingHistory(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.scaling) return ScalingUnavailable();
  auto pool = VisiblePool(ctx, req, who);
  if (!pool.ok()) return ErrorResponse(pool.error());
  std::string window = req.Param("window");
  int64_t window_ms = window.empty() ? 6 * 3'600'000LL : ParseDurationMs(window);
  if (window_ms <= 0 || window_ms > 8 * 86'400'000LL) {
    return ErrorResponse(
        MakeError(ErrorCode::kInvalidArgument, "'window' must be a duration up to 8d, such as 6h"));
  }
  auto samples = ctx.scaling->History(pool->name, ctx.clock->NowMs() - window_ms);
  json::array t, ready, prov, other, target, demand, running, queued, forecast, wait;
  for (const auto& s : samples) {
    t.push_back(s.time_ms);
    ready.push_back(s.ready);
    prov.push_back(s.provisioning);
    other.push_back(s.other);
    target.push_back(s.target);
    demand.push_back(Whole(s.demand_gpus));
    running.push_back(Whole(s.running_gpus));
    queued.push_back(Whole(s.queued_gpus));
    forecast.push_back(s.forecast_gpus >= 0 ? json::value(s.forecast_gpus) : json::value(nullptr));
    wait.push_back(s.oldest_wait_s);
  }
  return ObjectResponse(200, {{"pool", pool->name},
                              {"gpus_per_node", pool->gpus_per_node},
                              {"time_ms", std::move(t)},
                              {"ready", std::move(ready)},
                              {"provisioning", std::move(prov)},
                              {"other", std::move(other)},
                              {"target", std::move(target)},
                              {"demand", std::move(demand)},
                              {"running", std::move(running)},
                              {"queued", std::move(queued)},
                              {"forecast", std::move(forecast)},
                              {"oldest_wait_s", std::move(wait)}});
}

}  // namespace

void AddScalingRoutes(Router& router, ApiContext& ctx) {
  router.Add(
      "GET", "/api/v1/scaling", Role::kViewer,
      [&ctx](const Request& req, const Principal& who) { return GetScaling(ctx, req, who); });
  router.Scoped(Scope::kClusters);

  router.Add("GET", "/api/v1/pools/{pool}/scaling", Role::kViewer,
             [&ctx](const Request& req, const Principal& who) {
               if (!ctx.scaling) return ScalingUnavailable();
               auto pool = VisiblePool(ctx, req, who);
               if (!pool.ok()) return ErrorResponse(pool.error());
               auto s = ctx.scaling->Get(pool->name);
               if (!s.ok()) return ErrorResponse(s.error());
               return ObjectResponse(200, StatusJson(s.value(), pool->cluster));
             });
  router.Scoped(Scope::kClusters, ScopeObject::kPool, "pool");

  router.Add("PUT", "/api/v1/pools/{pool}/scaling", Role::kOperator,
             [&ctx](const Request& req, const Principal& who) {
               return PutPoolsPoolScaling(ctx, req, who);
             });
  router.Scoped(Scope::kClusters, ScopeObject::kPool, "pool");

  router.Add("DELETE", "/api/v1/pools/{pool}/scaling", Role::kOperator,
             [&ctx](const Request& req, const Principal& who) {
               return DeletePoolsPoolScaling(ctx, req, who);
             });
  router.Scoped(Scope::kClusters, ScopeObject::kPool, "pool");

  router.Add("POST", "/api/v1/pools/{pool}/scale", Role::kOperator,
             [&ctx](const Request& req, const Principal& who) {
               return PostPoolsPoolScale(ctx, req, who);
             });
  router.Scoped(Scope::kClusters, ScopeObject::kPool, "pool");

  // Replays the pool's past under a grid of settings; {"wait_p95": "60s", "window": "7d",
  // "apply": false}. Operator: it takes CPU (seconds), and may change the policy. Slow: it runs
  // off the I/O threads.
  router.AddSlow("POST", "/api/v1/pools/{pool}/scaling/tune", Role::kOperator,
                 [&ctx](const Request& req, const Principal& who) {
                   return PostPoolsPoolScalingTune(ctx, req, who);
                 });
  router.Scoped(Scope::kClusters, ScopeObject::kPool, "pool");

  router.Add("GET", "/api/v1/pools/{pool}/scaling/events", Role::kViewer,
             [&ctx](const Request& req, const Principal& who) {
               return GetPoolsPoolScalingEvents(ctx, req, who);
             });
  router.Scoped(Scope::kClusters, ScopeObject::kPool, "pool");

  // Columns, oldest first: time_ms, ready, provisioning, other, target, demand, running,
  // queued, forecast (null where none), oldest_wait_s. `window`: how far back (default 6h).
  router.Add("GET", "/api/v1/pools/{pool}/scaling/history", Role::kViewer,
             [&ctx](const Request& req, const Principal& who) {
               return GetPoolsPoolScalingHistory(ctx, req, who);
             });
  router.Scoped(Scope::kClusters, ScopeObject::kPool, "pool");
}

}  // namespace gpufleet::api
