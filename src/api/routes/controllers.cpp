// GET /api/v1/controllers: the controllers that share this one's database, which of them leads
// (runs the engines) and at what epoch (runtime/leadership.h).

#include "api/json_util.h"
#include "runtime/leadership.h"

namespace json = boost::json;

namespace gpufleet::api {

namespace {

Response GetControllers(ApiContext& ctx, const Request& req) {
  auto page = ParsePage(req);
  if (!page.ok()) return ErrorResponse(page.error());
  if (!ctx.leadership) {
    return ErrorResponse(MakeError(ErrorCode::kUnavailable, "the controller is starting"));
  }
  auto list = ctx.leadership->Controllers();
  if (!list.ok()) return ErrorResponse(list.error());
  json::array items;
  for (const auto& c : list.value()) {
    items.push_back(json::object{{"id", c.record.id},
                                 {"url", c.record.url},
                                 {"leader", c.leader},
                                 {"epoch", c.epoch},
                                 {"started_at", FormatTime(c.record.started_ms)},
                                 {"last_seen", FormatTime(c.record.last_seen_ms)},
                                 {"seen_ago_s", c.seen_ago_ms / 1000},
                                 {"live", c.live},
                                 {"self", c.record.id == ctx.leadership->options().id},
                                 {"agents", c.record.agents}});
  }
  return ListResponse(std::move(items), page.value());
}

}  // namespace

void AddControllerRoutes(Router& router, ApiContext& ctx) {
  router.Add("GET", "/api/v1/controllers", Role::kViewer,
             [&ctx](const Request& req, const Principal&) { return GetControllers(ctx, req); });
  router.Scoped(Scope::kFleet);
}

}  // namespace gpufleet::api
