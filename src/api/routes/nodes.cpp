// Nodes, their GPUs and events, the operator actions cordon, uncordon and drain, and an
// admin's reset of a node's identity.

#include "api/json_util.h"
#include "api/scope.h"
#include "common/clock.h"
#include "common/json_text.h"
#include "lifecycle/rollout.h"
#include "model/json.h"

namespace json = boost::json;

namespace gpufleet::api {
namespace {

Result<NodeFilter> FilterFrom(const Request& req, const Principal& who) {
  NodeFilter f;
  f.cluster = req.Param("cluster");
  f.pool = req.Param("pool");
  f.state = req.Param("state");
  f.model = req.Param("model");
  f.clusters = who.clusters;
  if (!f.state.empty() && !ParseNodeState(f.state)) {
    return MakeError(ErrorCode::kInvalidArgument, "unknown state '" + f.state + "'");
  }
  return f;
}

Response Action(ApiContext& ctx, const Request& req, const Principal& who, NodeAction action) {
  const std::string& name = req.params.at("name");
  auto before = ctx.fleet.GetNode(name);
  if (!before.ok() || !who.CanSeeCluster(before->cluster)) {
    return ErrorResponse(MakeError(ErrorCode::kNotFound, "no node '" + name + "'"));
  }
  auto after = ctx.fleet.Act(name, action, who.name);
  Response r =
      after.ok() ? ObjectResponse(200, ToJson(after.value(), true)) : ErrorResponse(after.error());
  r.audit_target = "node/" + name;
  r.audit_before = JsonText(json::object{{"state", ToString(before->state)}});
  if (after.ok()) r.audit_after = JsonText(json::object{{"state", ToString(after->state)}});
  return r;
}

std::string Time(int64_t ms) { return ms > 0 ? FormatTime(ms) : ""; }

Response RolloutsUnavailable() {
  return ErrorResponse(MakeError(ErrorCode::kUnavailable, "rollouts are not running"));
}

}  // namespace

Result<Node> VisibleNode(ApiContext& ctx, const Request& req, const Principal& who) {
  const std::string& name = req.params.at("name");
  auto node = ctx.fleet.GetNode(name);
  if (!node.ok() || !who.CanSeeCluster(node->cluster)) {
    return MakeError(ErrorCode::kNotFound, "no node '" + name + "'");
  }
  return node;
}

namespace {

// GET /api/v1/nodes
Response GetNodes(ApiContext& ctx, const Request& req, const Principal& who) {
  auto page = ParsePage(req);
  if (!page.ok()) return ErrorResponse(page.error());
  auto filter = FilterFrom(req, who);
  if (!filter.ok()) return ErrorResponse(filter.error());
  NodeList list = ctx.fleet.NodesJson(filter.value(), page->offset, page->limit);
  std::string body;
  body.reserve(list.items.size() + 96);
  body += "{\"items\":[";
  body += list.items;
  body += "],\"total\":" + std::to_string(list.total) +
          ",\"limit\":" + std::to_string(page->limit) +
          ",\"offset\":" + std::to_string(page->offset) + "}";
  return JsonResponse(200, std::move(body));
}

// GET /api/v1/nodes/{name}/events
Response GetNodesNameEvents(ApiContext& ctx, const Request& req, const Principal& who) {
  auto page = ParsePage(req);
  if (!page.ok()) return ErrorResponse(page.error());
  auto node = ctx.fleet.GetNode(req.params.at("name"));
  if (!node.ok() || !who.CanSeeCluster(node->cluster)) {
    return ErrorResponse(
        MakeError(ErrorCode::kNotFound, "no node '" + req.params.at("name") + "'"));
  }
  auto events = ctx.fleet.Events(node->name, static_cast<int>(page->limit));
  if (!events.ok()) return ErrorResponse(events.error());
  json::array items;
  for (const auto& e : events.value()) items.push_back(ToJson(e));
  return ListResponse(std::move(items), Page{page->limit, 0});
}

// POST /api/v1/nodes/{name}/reset-identity
Response PostNodesNameResetIdentity(ApiContext& ctx, const Request& req, const Principal& who) {
  const std::string& name = req.params.at("name");
  auto before = ctx.fleet.GetNode(name);
  if (!before.ok() || !who.CanSeeCluster(before->cluster)) {
    return ErrorResponse(MakeError(ErrorCode::kNotFound, "no node '" + name + "'"));
  }
  auto after = ctx.fleet.ResetIdentity(name, who.name);
  Response r =
      after.ok() ? ObjectResponse(200, ToJson(after.value(), true)) : ErrorResponse(after.error());
  r.audit_target = "node/" + name;
  r.audit_after = JsonText(json::object{{"identity", "cleared"}});
  return r;
}

// GET /api/v1/gpus
Response GetGpus(ApiContext& ctx, const Request& req, const Principal& who) {
  auto page = ParsePage(req);
  if (!page.ok()) return ErrorResponse(page.error());
  auto filter = FilterFrom(req, who);
  if (!filter.ok()) return ErrorResponse(filter.error());
  auto node_filter = req.query.find("node");
  json::array items;
  for (const auto& n : ctx.fleet.Nodes(filter.value())) {
    if (node_filter != req.query.end() && node_filter->second != n.name) continue;
    for (const auto& g : n.gpus) {
      if (!filter->model.empty() && g.model != filter->model && g.name != filter->model) continue;
      json::object o = ToJson(g);
      o["node"] = n.name;
      o["cluster"] = n.cluster;
      o["pool"] = n.pool;
      o["simulated"] = n.simulated;
      items.push_back(std::move(o));
    }
  }
  return ListResponse(std::move(items), page.value());
}

// GET /api/v1/nodes/{name}/versions
Response GetNodesNameVersions(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.rollouts) return RolloutsUnavailable();
  const std::string& name = req.params.at("name");
  auto node = VisibleNode(ctx, req, who);
  if (!node.ok()) return ErrorResponse(node.error());
  json::array items;
  for (const auto& h : ctx.rollouts->History(name)) {
    items.push_back(json::object{{"rollout", h.rollout},
                                 {"kind", lifecycle::ToString(h.kind)},
                                 {"from", h.node.from},
                                 {"to", h.node.to},
                                 {"state", lifecycle::ToString(h.node.state)},
                                 {"started_at", Time(h.node.started_ms)},
                                 {"ended_at", Time(h.node.ended_ms)},
                                 {"message", h.node.message}});
  }
  json::object out{{"cuda_driver", node->facts.cuda_driver_version}};
  for (const auto& kind : lifecycle::RolloutKinds()) {
    out[kind.fact] = kind.running(node.value());  // driver, vbios, nic_firmware
  }
  out["history"] = std::move(items);
  return ObjectResponse(200, std::move(out));
}

// DELETE /api/v1/nodes/{name}
Response DeleteNodesName(ApiContext& ctx, const Request& req, const Principal& who) {
  const std::string& name = req.params.at("name");
  Response r = [&]() -> Response {
    auto node = VisibleNode(ctx, req, who);
    if (!node.ok()) return ErrorResponse(node.error());
    if (auto s = ctx.fleet.Delete(name); !s.ok()) return ErrorResponse(s.error());
    Response done = ObjectResponse(200, {{"deleted", name}});
    done.audit_before = JsonText(json::object{{"state", ToString(node->state)}});
    return done;
  }();
  r.audit_target = "node/" + name;
  return r;
}

}  // namespace

void AddNodeRoutes(Router& router, ApiContext& ctx) {
  router.Add("GET", "/api/v1/nodes", Role::kViewer,
             [&ctx](const Request& req, const Principal& who) { return GetNodes(ctx, req, who); });
  router.Scoped(Scope::kClusters);

  router.Add("GET", "/api/v1/nodes/{name}", Role::kViewer,
             [&ctx](const Request& req, const Principal& who) {
               auto node = ctx.fleet.GetNode(req.params.at("name"));
               if (!node.ok() || !who.CanSeeCluster(node->cluster)) {
                 return ErrorResponse(
                     MakeError(ErrorCode::kNotFound, "no node '" + req.params.at("name") + "'"));
               }
               return ObjectResponse(200, ToJson(node.value(), true));
             });
  router.Scoped(Scope::kClusters, ScopeObject::kNode);

  router.Add("GET", "/api/v1/nodes/{name}/events", Role::kViewer,
             [&ctx](const Request& req, const Principal& who) {
               return GetNodesNameEvents(ctx, req, who);
             });
  router.Scoped(Scope::kClusters, ScopeObject::kNode);

  router.Add("POST", "/api/v1/nodes/{name}/cordon", Role::kOperator,
             [&ctx](const Request& req, const Principal& who) {
               return Action(ctx, req, who, NodeAction::kCordon);
             });
  router.Scoped(Scope::kClusters, ScopeObject::kNode);
  router.Add("POST", "/api/v1/nodes/{name}/uncordon", Role::kOperator,
             [&ctx](const Request& req, const Principal& who) {
               return Action(ctx, req, who, NodeAction::kUncordon);
             });
  router.Scoped(Scope::kClusters, ScopeObject::kNode);
  router.Add("POST", "/api/v1/nodes/{name}/drain", Role::kOperator,
             [&ctx](const Request& req, const Principal& who) {
               return Action(ctx, req, who, NodeAction::kDrain);
             });
  router.Scoped(Scope::kClusters, ScopeObject::kNode);

  // Clears a node's identity, so that an agent with a join token may take the name again (a
  // machine reinstalled without its node token). Admin only: it hands the name to whoever
  // holds a join token next.
  router.Add("POST", "/api/v1/nodes/{name}/reset-identity", Role::kAdmin,
             [&ctx](const Request& req, const Principal& who) {
               return PostNodesNameResetIdentity(ctx, req, who);
             });
  router.Scoped(Scope::kClusters, ScopeObject::kNode);

  router.Add("GET", "/api/v1/gpus", Role::kViewer,
             [&ctx](const Request& req, const Principal& who) { return GetGpus(ctx, req, who); });
  router.Scoped(Scope::kClusters);

  router.Add("GET", "/api/v1/nodes/{name}/versions", Role::kViewer,
             [&ctx](const Request& req, const Principal& who) {
               return GetNodesNameVersions(ctx, req, who);
             });
  router.Scoped(Scope::kClusters, ScopeObject::kNode);

  router.Add(
      "DELETE", "/api/v1/nodes/{name}", Role::kAdmin,
      [&ctx](const Request& req, const Principal& who) { return DeleteNodesName(ctx, req, who); });
  router.Scoped(Scope::kClusters, ScopeObject::kNode);
}

}  // namespace gpufleet::api
