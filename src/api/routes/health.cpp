// GPU and node health: GET /api/v1/health (fleet and per-cluster counts, and each node's
// verdict with its GPUs' reasons) and GET /api/v1/xids (the XID catalogue).

#include <map>

#include "api/json_util.h"

namespace json = boost::json;

namespace gpufleet::api {
namespace {

json::object CountsJson(const health::HealthCounts& c) {
  return {{"nodes", c.nodes},          {"starting", c.starting},    {"ready", c.ready},
          {"degraded", c.degraded},    {"unhealthy", c.unhealthy},  {"gpus", c.gpus},
          {"gpus_healthy", c.healthy}, {"gpus_warning", c.warning}, {"gpus_failed", c.failed}};
}

json::object NodeJson(const health::NodeHealth& n) {
  json::array gpus;
  for (const auto& g : n.gpus) {
    json::array reasons;
    for (const auto& r : g.reasons) {
      reasons.push_back(json::object{{"check", r.check},
                                     {"level", health::ToString(r.level)},
                                     {"message", r.message},
                                     {"action", r.action}});
    }
    gpus.push_back(json::object{{"index", g.index},
                                {"uuid", g.uuid},
                                {"health", health::ToString(g.level)},
                                {"reasons", std::move(reasons)}});
  }
  json::array reasons;
  for (const auto& r : n.reasons) reasons.push_back(json::value(r));
  return {{"node", n.node},
          {"cluster", n.cluster},
          {"pool", n.pool},
          {"health", ToString(n.health)},
          {"reasons", std::move(reasons)},
          {"simulated", n.simulated},
          {"gpus", std::move(gpus)}};
}

// GET /api/v1/health
Response GetHealth(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.health) {
    return ErrorResponse(MakeError(ErrorCode::kUnavailable, "the health model is not running"));
  }
  auto page = ParsePage(req);
  if (!page.ok()) return ErrorResponse(page.error());
  std::string show = req.Param("show").empty() ? "problems" : req.Param("show");
  if (show != "problems" && show != "all") {
    return ErrorResponse(MakeError(ErrorCode::kInvalidArgument, "'show' must be problems or all"));
  }
  NodeFilter filter;
  filter.cluster = req.Param("cluster");
  filter.pool = req.Param("pool");
  filter.name = req.Param("node");
  filter.clusters = who.clusters;
  health::HealthCounts fleet;
  std::map<std::string, health::HealthCounts> clusters;
  // Only the page's nodes are rendered: at 100,000 GPUs `show=all` is 12,500 of them.
  int64_t evaluated_ms = 0;
  size_t total = 0;
  json::array paged;
  for (const auto& n : ctx.health->Reports(filter, &evaluated_ms)) {
    fleet.Add(n);
    clusters[n.cluster].Add(n);
    if (show == "all" || n.health != NodeState::kReady) {
      if (total >= page->offset && paged.size() < page->limit) paged.push_back(NodeJson(n));
      ++total;
    }
  }
  json::array by_cluster;
  auto breakers = ctx.health->Breakers();
  for (const auto& [name, c] : clusters) {
    json::object o = CountsJson(c);
    o["cluster"] = name;
    auto b = breakers.find(name);
    o["remediation_breaker_open"] = b != breakers.end() && b->second;
    by_cluster.push_back(std::move(o));
  }
  return ObjectResponse(200, {{"summary", CountsJson(fleet)},
                              {"clusters", std::move(by_cluster)},
                              {"items", std::move(paged)},
                              {"total", total},
                              {"show", show},
                              {"evaluated_at", FormatTime(evaluated_ms)}});
}

// GET /api/v1/xids
Response GetXids(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.health) {
    return ErrorResponse(MakeError(ErrorCode::kUnavailable, "the health model is not running"));
  }
  json::array items;
  for (const auto& x : ctx.health->xid_catalog().all()) {
    items.push_back(json::object{{"xid", x.xid},
                                 {"name", x.name},
                                 {"description", x.description},
                                 {"severity", ToString(x.severity)},
                                 {"action", x.action},
                                 {"hold_ms", x.hold_ms}});
  }
  auto page = ParsePage(req);
  if (!page.ok()) return ErrorResponse(page.error());
  return ListResponse(std::move(items), page.value());
}

}  // namespace

void AddHealthRoutes(Router& router, ApiContext& ctx) {
  router.Add("GET", "/api/v1/health", Role::kViewer,
             [&ctx](const Request& req, const Principal& who) { return GetHealth(ctx, req, who); });
  router.Scoped(Scope::kClusters);

  router.Add("GET", "/api/v1/xids", Role::kViewer,
             [&ctx](const Request& req, const Principal& who) { return GetXids(ctx, req, who); });
  router.Scoped(Scope::kAny);
}

}  // namespace gpufleet::api
