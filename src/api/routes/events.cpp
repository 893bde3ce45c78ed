// GPU events (XID errors) and injection on simulated nodes: GPU faults, settings, facts.

#include <atomic>
#include <optional>

#include "api/json_util.h"
#include "model/json.h"

namespace json = boost::json;

namespace gpufleet::api {

namespace {

// Whether `node` takes an injection: 409 when it is not simulated; with `gpu` (its index as
// text), 404 when that is not one of its GPUs. Returns the GPU's index, -1 when none is asked.
Result<int> Injectable(const Node& node, const std::optional<std::string>& gpu) {
  if (!node.simulated) {
    return MakeError(ErrorCode::kConflict, "node '" + node.name +
                                               "' is not simulated: injection is only for "
                                               "simulated nodes");
  }
  if (!gpu) return -1;
  for (const auto& g : node.gpus) {
    if (std::to_string(g.index) == *gpu) return g.index;
  }
  return MakeError(ErrorCode::kNotFound, "node '" + node.name + "' has no GPU " + *gpu);
}

// An injection for a simulated node's agent; nobody waits for its answer (the node's telemetry
// and facts show what it did).
Status SendToAgent(ApiContext& ctx, const std::string& node, proto::Command& cmd) {
  if (!ctx.commands) return MakeError(ErrorCode::kUnavailable, "no agent connections");
  return ctx.commands->Send(node, cmd, nullptr);
}

// GET /api/v1/events
Response GetEvents(ApiContext& ctx, const Request& req, const Principal& who) {
  auto page = ParsePage(req);
  if (!page.ok()) return ErrorResponse(page.error());
  auto events = ctx.store.fleet->ListGpuEvents(req.Param("node"), req.Param("kind"),
                                               static_cast<int>(page->limit));
  if (!events.ok()) return ErrorResponse(events.error());
  json::array items;
  for (const auto& e : events.value()) {
    auto node = ctx.fleet.GetNode(e.node);
    if (node.ok() && !who.CanSeeCluster(node->cluster)) continue;
    items.push_back(json::object{{"id", e.id},
                                 {"time", FormatTime(e.time_ms)},
                                 {"node", e.node},
                                 {"gpu", e.gpu},
                                 {"uuid", e.uuid},
                                 {"kind", e.kind},
                                 {"value", e.value}});
  }
  return ListResponse(std::move(items), Page{page->limit, 0});
}

// POST /api/v1/nodes/{name}/gpus/{index}/inject
Response PostNodesNameGpusIndexInject(ApiContext& ctx, const Request& req, const Principal& who) {
  const std::string& name = req.params.at("name");
  const std::string& index = req.params.at("index");
  Response r = [&] {
    // The node first: a caller who may not see it learns nothing from the body.
    auto node = ctx.fleet.GetNode(name);
    if (!node.ok() || !who.CanSeeCluster(node->cluster)) {
      return ErrorResponse(MakeError(ErrorCode::kNotFound, "no node '" + name + "'"));
    }
    auto body = ParseObject(req.body);
    if (!body.ok()) return ErrorResponse(body.error());
    auto inject = proto::InjectionFromJson(body.value());
    if (!inject.ok()) return ErrorResponse(inject.error());
    auto gpu = Injectable(node.value(), index);
    if (!gpu.ok()) return ErrorResponse(gpu.error());
    proto::Command cmd{0, gpu.value(), inject.value(), "", {}, 0, false};
    if (auto s = SendToAgent(ctx, name, cmd); !s.ok()) return ErrorResponse(s.error());
    return ObjectResponse(202, {{"queued", true}, {"command", cmd.id}});
  }();
  r.audit_target = "node/" + name + "/gpu/" + index;
  r.audit_after = req.body;
  return r;
}

// POST /api/v1/nodes/{name}/inject
Response PostNodesNameInject(ApiContext& ctx, const Request& req, const Principal& who) {
  const std::string& name = req.params.at("name");
  Response r = [&] {
    auto node = ctx.fleet.GetNode(name);
    if (!node.ok() || !who.CanSeeCluster(node->cluster)) {
      return ErrorResponse(MakeError(ErrorCode::kNotFound, "no node '" + name + "'"));
    }
    auto body = ParseObject(req.body);
    if (!body.ok()) return ErrorResponse(body.error());
    int gpu = -1;
    if (const auto* g = body->if_contains("gpu")) {
      if (!g->is_int64() || g->as_int64() < 0 || g->as_int64() > 1024) {
        return ErrorResponse(
            MakeError(ErrorCode::kInvalidArgument, "'gpu' must be a GPU index, 0 or more"));
      }
      gpu = static_cast<int>(g->as_int64());
      body->erase("gpu");
    }
    auto inject = proto::InjectionFromJson(body.value());
    if (!inject.ok()) return ErrorResponse(inject.error());
    if (inject->gpu_part() && gpu < 0) {
      return ErrorResponse(MakeError(ErrorCode::kInvalidArgument,
                                     "a GPU setting or fault needs the GPU: \"gpu\": 0"));
    }
    auto found =
        Injectable(node.value(), gpu < 0 ? std::nullopt : std::optional(std::to_string(gpu)));
    if (!found.ok()) return ErrorResponse(found.error());
    proto::Command cmd{0, std::max(gpu, 0), inject.value(), "", {}, 0, false};
    if (auto s = SendToAgent(ctx, name, cmd); !s.ok()) return ErrorResponse(s.error());
    return ObjectResponse(202, {{"queued", true}, {"command", cmd.id}});
  }();
  r.audit_target = "node/" + name;
  r.audit_after = req.body;
  return r;
}

}  // namespace

void AddEventRoutes(Router& router, ApiContext& ctx) {
  router.Add("GET", "/api/v1/events", Role::kViewer,
             [&ctx](const Request& req, const Principal& who) { return GetEvents(ctx, req, who); });
  router.Scoped(Scope::kClusters);

  router.Add("POST", "/api/v1/nodes/{name}/gpus/{index}/inject", Role::kOperator,
             [&ctx](const Request& req, const Principal& who) {
               return PostNodesNameGpusIndexInject(ctx, req, who);
             });
  router.Scoped(Scope::kClusters, ScopeObject::kNode);

  // A simulated node's facts, packages or a GPU's settings changed as if by hand: what drift
  // detection must find. {"facts": {...}}, {"packages": {"add": [...], "remove": [...]}},
  // {"gpu": 0, "power_limit_w": 250}; GPU faults (xid, ...) need "gpu" too.
  router.Add("POST", "/api/v1/nodes/{name}/inject", Role::kOperator,
             [&ctx](const Request& req, const Principal& who) {
               return PostNodesNameInject(ctx, req, who);
             });
  router.Scoped(Scope::kClusters, ScopeObject::kNode);
}

}  // namespace gpufleet::api
