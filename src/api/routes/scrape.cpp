// Scrape mode: GET /api/v1/scrape/targets, the dcgm-exporter endpoints the controller reads and
// how their last scrape went (what Prometheus shows on its targets page).

#include "api/json_util.h"
#include "model/json.h"

namespace json = boost::json;

namespace gpufleet::api {

namespace {

// GET /api/v1/scrape/targets
Response GetScrapeTargets(ApiContext& ctx, const Request& req, const Principal& who) {
  auto page = ParsePage(req);
  if (!page.ok()) return ErrorResponse(page.error());
  std::string pool = req.Param("pool");
  json::array items;
  for (const auto& t : ctx.scrape_targets()) {
    if (!pool.empty() && t.target.pool != pool) continue;
    auto p = ctx.fleet.FindPool(t.target.pool);
    if (p.ok() && !who.CanSeeCluster(p->cluster)) continue;
    items.push_back(json::object{
        {"node", t.target.node},
        {"pool", t.target.pool},
        {"cluster", p.ok() ? p->cluster : ""},
        {"url", t.target.url},
        {"interval_ms", t.target.interval_ms},
        {"health", t.scrapes == 0 ? "unknown"
                   : t.up         ? "up"
                                  : "down"},
        {"last_scrape", t.last_ms ? json::value(FormatTime(t.last_ms)) : nullptr},
        {"last_success", t.last_ok_ms ? json::value(FormatTime(t.last_ok_ms)) : nullptr},
        {"duration_ms", t.duration_ms},
        {"samples", t.samples},
        {"scrapes", t.scrapes},
        {"failures", t.failures},
        {"error", t.error}});
  }
  return ListResponse(std::move(items), page.value());
}

}  // namespace

void AddScrapeRoutes(Router& router, ApiContext& ctx) {
  router.Add(
      "GET", "/api/v1/scrape/targets", Role::kViewer,
      [&ctx](const Request& req, const Principal& who) { return GetScrapeTargets(ctx, req, who); });
  router.Scoped(Scope::kClusters);
}

}  // namespace gpufleet::api
