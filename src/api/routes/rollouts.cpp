// Rollouts and node actions:
//   POST /api/v1/rollouts (409 with the failing compatibility rules, unless an admin forces it
//   with a reason), POST /api/v1/rollouts/plan (a dry run), GET /api/v1/rollouts[/{id}],
//   GET /api/v1/rollouts/{id}/events, POST /api/v1/rollouts/{id}/{pause,resume,abort,approve,
//   rollback};
//   POST /api/v1/nodes/{name}/actions (reboot, reset-gpu, maintenance, decommission),
//   GET /api/v1/nodes/{name}/actions, GET /api/v1/nodes/{name}/versions, DELETE
//   /api/v1/nodes/{name} (a retired node);
//   GET and POST /api/v1/sim/faulty-versions (the simulator's faulty versions).

#include "api/json_util.h"
#include "api/scope.h"
#include "common/clock.h"
#include "common/json_text.h"
#include "model/json.h"

namespace json = boost::json;

namespace gpufleet::api {
namespace {

Response Unavailable() {
  return ErrorResponse(MakeError(ErrorCode::kUnavailable, "rollouts are not running"));
}

std::string Time(int64_t ms) { return ms > 0 ? FormatTime(ms) : ""; }

json::object OperationJson(const lifecycle::NodeOperation& op) {
  json::object o{{"id", op.id},
                 {"node", op.node},
                 {"action", op.action},
                 {"state", op.state},
                 {"message", op.message},
                 {"actor", op.actor},
                 {"created_at", Time(op.created_ms)},
                 {"ended_at", Time(op.ended_ms)}};
  if (op.gpu >= 0) o["gpu"] = op.gpu;
  if (!op.mode.empty()) o["mode"] = op.mode;
  return o;
}

json::object PlanJson(const lifecycle::RolloutPlan& p) {
  json::array stages, windows, skipped;
  for (const auto& s : p.stages) {
    json::array nodes;
    for (const auto& n : s.nodes) nodes.emplace_back(n);
    stages.push_back(json::object{{"name", s.name},
                                  {"nodes", std::move(nodes)},
                                  {"count", static_cast<int64_t>(s.nodes.size())},
                                  {"expected_s", s.expected_ms / 1000}});
  }
  for (const auto& w : p.windows) {
    windows.push_back(json::object{{"pool", w.pool},
                                   {"always", w.always},
                                   {"open", w.open},
                                   {"next_open", Time(w.next_open_ms)},
                                   {"closes", Time(w.closes_ms)}});
  }
  for (const auto& s : p.skipped) skipped.emplace_back(s);
  return {{"nodes", p.nodes},
          {"stages", std::move(stages)},
          {"windows", std::move(windows)},
          {"skipped", std::move(skipped)},
          {"expected_s", p.expected_ms / 1000}};
}

json::array FailedJson(const std::vector<lifecycle::Refusal>& refusals) {
  json::array failed;
  for (const auto& f : refusals) {
    failed.push_back(json::object{{"pool", f.pool},
                                  {"rule", f.rule.rule},
                                  {"reason", f.rule.reason},
                                  {"source", f.rule.source}});
  }
  return failed;
}

Result<int64_t> IdOf(const Request& req) {
  const std::string& text = req.params.at("id");
  char* end = nullptr;
  long long id = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end || id <= 0) {
    return MakeError(ErrorCode::kInvalidArgument, "'" + text + "' is not a rollout id");
  }
  return static_cast<int64_t>(id);
}

// The nodes a principal scoped to some clusters may not see make a rollout invisible to it.
bool Visible(const lifecycle::Rollout& r, const Principal& who) {
  if (who.clusters.empty()) return true;
  return std::all_of(r.nodes.begin(), r.nodes.end(),
                     [&](const lifecycle::RolloutNode& n) { return who.CanSeeCluster(n.cluster); });
}

// The scope policy for a rollout's request: for a token limited to some clusters, what the
// selector and the strategy name must lie in them (404 as if absent otherwise), and a
// selection by labels alone, or none, is narrowed to them.
Status ScopeRollout(ApiContext& ctx, const Principal& who, lifecycle::RolloutRequest& req) {
  if (who.clusters.empty()) return {};
  auto& sel = req.selector;
  for (const auto& c : sel.clusters) GF_TRY(ScopeCluster(who, c));
  for (const auto& p : sel.pools) GF_TRY(ScopePool(ctx, who, p));
  for (const auto& n : sel.nodes) GF_TRY(ScopeNode(ctx, who, n));
  for (const auto& n : req.strategy.test_nodes) GF_TRY(ScopeNode(ctx, who, n));
  if (!req.strategy.test_pool.empty()) GF_TRY(ScopePool(ctx, who, req.strategy.test_pool));
  if (sel.clusters.empty()) sel.clusters = who.clusters;
  return {};
}

// POST /api/v1/rollouts
Response PostRollouts(ApiContext& ctx, const Request& req, const Principal& who) {
  Response r = [&]() -> Response {
    if (!ctx.rollouts) return Unavailable();
    auto parsed = lifecycle::ParseRolloutRequest(req.body);
    if (!parsed.ok()) return ErrorResponse(parsed.error());
    if (auto s = ScopeRollout(ctx, who, parsed.value()); !s.ok()) {
      return ErrorResponse(s.error());
    }
    if (parsed->force && who.role != Role::kAdmin) {
      return ErrorResponse(
          MakeError(ErrorCode::kPermissionDenied, "only an admin may force a rollout"));
    }
    auto refusals = ctx.rollouts->Check(parsed.value());
    if (!refusals.ok()) return ErrorResponse(refusals.error());
    if (!refusals->empty() && !parsed->force) {
      json::array failed = FailedJson(refusals.value());
      std::string first = refusals->front().rule.reason;
      json::object body{{"error",
                         {{"code", "conflict"},
                          {"message", "the target fails " + std::to_string(refusals->size()) +
                                          " compatibility rule(s), first: " + first +
                                          " (an admin may force it with a reason)"}}},
                        {"failed", std::move(failed)}};
      return JsonResponse(409, JsonText(body));
    }
    std::string forced = parsed->force && !refusals->empty() ? parsed->reason : "";
    auto created = ctx.rollouts->Create(parsed.value(), who.name, forced);
    if (!created.ok()) return ErrorResponse(created.error());
    Response done = ObjectResponse(201, lifecycle::ToJson(created.value(), true));
    done.audit_target = "rollout/" + std::to_string(created->id);
    json::object after{{"kind", lifecycle::ToString(created->kind)},
                       {"target", created->target},
                       {"nodes", static_cast<int64_t>(created->nodes.size())}};
    if (!forced.empty()) {
      json::array rules;
      for (const auto& f : refusals.value()) rules.emplace_back(f.rule.reason);
      after["forced"] = forced;
      after["overridden"] = std::move(rules);
    }
    done.audit_after = JsonText(after);
    return done;
  }();
  if (r.audit_target.empty()) r.audit_target = "rollouts";
  return r;
}

// POST /api/v1/rollouts/plan
Response PostRolloutsPlan(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.rollouts) return Unavailable();
  auto parsed = lifecycle::ParseRolloutRequest(req.body);
  if (!parsed.ok()) return ErrorResponse(parsed.error());
  if (auto s = ScopeRollout(ctx, who, parsed.value()); !s.ok()) {
    return ErrorResponse(s.error());
  }
  auto plan = ctx.rollouts->Plan(parsed.value());
  if (!plan.ok()) return ErrorResponse(plan.error());
  json::object o = PlanJson(plan.value());
  auto refusals = ctx.rollouts->Check(parsed.value());
  o["failed"] = refusals.ok() ? FailedJson(refusals.value()) : json::array();
  o["warnings"] = WarningsJson(ctx, lifecycle::ToString(parsed->kind), parsed->target, plan->runs);
  return ObjectResponse(200, o);
}

// GET /api/v1/rollouts
Response GetRollouts(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.rollouts) return Unavailable();
  auto page = ParsePage(req);
  if (!page.ok()) return ErrorResponse(page.error());
  std::string state = req.Param("state");
  json::array items;
  for (const auto& r : ctx.rollouts->List()) {
    if (!Visible(r, who) || (!state.empty() && lifecycle::ToString(r.state) != state)) continue;
    items.push_back(lifecycle::ToJson(r, false));
  }
  return ListResponse(std::move(items), page.value());
}

// GET /api/v1/rollouts/{id}
Response GetRolloutsId(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.rollouts) return Unavailable();
  auto id = IdOf(req);
  if (!id.ok()) return ErrorResponse(id.error());
  auto r = ctx.rollouts->Get(id.value());
  if (!r.ok() || !Visible(r.value(), who)) {
    return ErrorResponse(
        MakeError(ErrorCode::kNotFound, "no rollout " + std::to_string(id.value())));
  }
  return ObjectResponse(200, lifecycle::ToJson(r.value(), true));
}

// GET /api/v1/rollouts/{id}/events
Response GetRolloutsIdEvents(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.rollouts) return Unavailable();
  auto id = IdOf(req);
  if (!id.ok()) return ErrorResponse(id.error());
  if (!who.clusters.empty()) {
    auto r = ctx.rollouts->Get(id.value());
    if (!r.ok() || !Visible(r.value(), who)) {
      return ErrorResponse(
          MakeError(ErrorCode::kNotFound, "no rollout " + std::to_string(id.value())));
    }
  }
  int64_t after = std::atoll(req.Param("after").c_str());
  int limit = std::clamp(std::atoi(req.Param("limit").c_str()), 0, 1000);
  auto events = ctx.rollouts->Events(id.value(), after, limit ? limit : 200);
  if (!events.ok()) return ErrorResponse(events.error());
  json::array items;
  for (const auto& e : events.value()) {
    items.push_back(json::object{{"id", e.id},
                                 {"time", FormatTime(e.time_ms)},
                                 {"node", e.node},
                                 {"kind", e.kind},
                                 {"message", e.message}});
  }
  return ObjectResponse(200, {{"items", std::move(items)}});
}

// POST /api/v1/nodes/{name}/actions
Response PostNodesNameActions(ApiContext& ctx, const Request& req, const Principal& who) {
  const std::string& name = req.params.at("name");
  Response r = [&]() -> Response {
    if (!ctx.rollouts) return Unavailable();
    auto node = VisibleNode(ctx, req, who);
    if (!node.ok()) return ErrorResponse(node.error());
    auto body = ParseObject(req.body);
    if (!body.ok()) return ErrorResponse(body.error());
    if (auto s = OnlyFields(body.value(), {"action", "gpu", "mode"}); !s.ok()) {
      return ErrorResponse(s.error());
    }
    lifecycle::NodeActionRequest a;
    auto action = GetString(body.value(), "action");
    if (!action.ok()) return ErrorResponse(action.error());
    a.action = action.value();
    auto gpu = GetInt(body.value(), "gpu", -1);
    if (!gpu.ok()) return ErrorResponse(gpu.error());
    a.gpu = static_cast<int>(std::clamp<int64_t>(gpu.value(), -1, 1 << 20));
    auto mode = GetString(body.value(), "mode", "");
    if (!mode.ok()) return ErrorResponse(mode.error());
    a.mode = mode.value();
    auto op = ctx.rollouts->StartAction(name, a, who.name);
    if (!op.ok()) return ErrorResponse(op.error());
    Response done = ObjectResponse(202, OperationJson(op.value()));
    done.audit_before = JsonText(json::object{{"state", ToString(node->state)}});
    done.audit_after = JsonText(OperationJson(op.value()));
    return done;
  }();
  r.audit_target = "node/" + name;
  return r;
}

// GET /api/v1/nodes/{name}/actions
Response GetNodesNameActions(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.rollouts) return Unavailable();
  const std::string& name = req.params.at("name");
  auto node = VisibleNode(ctx, req, who);
  if (!node.ok()) return ErrorResponse(node.error());
  json::array items;
  for (const auto& op : ctx.rollouts->Operations(name)) {
    items.push_back(OperationJson(op));
  }
  return ObjectResponse(200, {{"items", std::move(items)}});
}

// POST /api/v1/sim/faulty-versions
Response PostSimFaultyVersions(ApiContext& ctx, const Request& req, const Principal& who) {
  Response r = [&]() -> Response {
    if (!ctx.rollouts) return Unavailable();
    auto body = ParseObject(req.body);
    if (!body.ok()) return ErrorResponse(body.error());
    if (auto s = OnlyFields(body.value(), {"kind", "version", "faulty"}); !s.ok()) {
      return ErrorResponse(s.error());
    }
    auto kind_text = GetString(body.value(), "kind");
    if (!kind_text.ok()) return ErrorResponse(kind_text.error());
    auto kind = lifecycle::ParseRolloutKind(kind_text.value());
    if (!kind) {
      return ErrorResponse(
          MakeError(ErrorCode::kInvalidArgument,
                    "kind: '" + kind_text.value() + "' must be " + lifecycle::RolloutKindNames()));
    }
    auto version = GetString(body.value(), "version");
    if (!version.ok() || version->empty()) {
      return ErrorResponse(MakeError(ErrorCode::kInvalidArgument, "version: is required"));
    }
    auto faulty = GetBool(body.value(), "faulty", true);
    if (!faulty.ok()) return ErrorResponse(faulty.error());
    ctx.rollouts->MarkFaulty(*kind, version.value(), faulty.value());
    json::object o{{"kind", kind_text.value()},
                   {"version", version.value()},
                   {"faulty", faulty.value()},
                   {"simulated", true}};
    Response done = ObjectResponse(200, o);
    done.audit_after = JsonText(o);
    return done;
  }();
  r.audit_target = "sim/faulty-versions";
  return r;
}

// A rollout's control (pause, resume, abort, approve, rollback); one route each.
Response PostRolloutControl(ApiContext& ctx, const Request& req, const Principal& who,
                            const std::string& control) {
  Response r = [&]() -> Response {
    if (!ctx.rollouts) return Unavailable();
    auto id = IdOf(req);
    if (!id.ok()) return ErrorResponse(id.error());
    auto before = ctx.rollouts->Get(id.value());
    if (!before.ok() || !Visible(before.value(), who)) {
      return ErrorResponse(
          MakeError(ErrorCode::kNotFound, "no rollout " + std::to_string(id.value())));
    }
    auto after = ctx.rollouts->Control(id.value(), control, who.name);
    if (!after.ok()) return ErrorResponse(after.error());
    Response done = ObjectResponse(200, lifecycle::ToJson(after.value(), true));
    done.audit_before = JsonText(json::object{{"state", lifecycle::ToString(before->state)}});
    done.audit_after = JsonText(json::object{{"state", lifecycle::ToString(after->state)}});
    return done;
  }();
  r.audit_target = "rollout/" + req.params.at("id");
  return r;
}

}  // namespace

void AddRolloutRoutes(Router& router, ApiContext& ctx) {
  router.Add(
      "POST", "/api/v1/rollouts", Role::kOperator,
      [&ctx](const Request& req, const Principal& who) { return PostRollouts(ctx, req, who); });
  router.Scoped(Scope::kClusters);

  router.Add(
      "POST", "/api/v1/rollouts/plan", Role::kViewer,
      [&ctx](const Request& req, const Principal& who) { return PostRolloutsPlan(ctx, req, who); });
  router.Scoped(Scope::kClusters);

  router.Add(
      "GET", "/api/v1/rollouts", Role::kViewer,
      [&ctx](const Request& req, const Principal& who) { return GetRollouts(ctx, req, who); });
  router.Scoped(Scope::kClusters);

  router.Add(
      "GET", "/api/v1/rollouts/{id}", Role::kViewer,
      [&ctx](const Request& req, const Principal& who) { return GetRolloutsId(ctx, req, who); });
  router.Scoped(Scope::kClusters);

  router.Add("GET", "/api/v1/rollouts/{id}/events", Role::kViewer,
             [&ctx](const Request& req, const Principal& who) {
               return GetRolloutsIdEvents(ctx, req, who);
             });
  router.Scoped(Scope::kClusters);

  // The controls, each its own route (one path each in docs/openapi.yaml).
  auto control = [&ctx](std::string control) -> Handler {
    return [&ctx, control](const Request& req, const Principal& who) {
      return PostRolloutControl(ctx, req, who, control);
    };
  };
  router.Add("POST", "/api/v1/rollouts/{id}/pause", Role::kOperator, control("pause"));
  router.Scoped(Scope::kClusters);
  router.Add("POST", "/api/v1/rollouts/{id}/resume", Role::kOperator, control("resume"));
  router.Scoped(Scope::kClusters);
  router.Add("POST", "/api/v1/rollouts/{id}/abort", Role::kOperator, control("abort"));
  router.Scoped(Scope::kClusters);
  router.Add("POST", "/api/v1/rollouts/{id}/approve", Role::kOperator, control("approve"));
  router.Scoped(Scope::kClusters);
  router.Add("POST", "/api/v1/rollouts/{id}/rollback", Role::kOperator, control("rollback"));
  router.Scoped(Scope::kClusters);

  router.Add("POST", "/api/v1/nodes/{name}/actions", Role::kOperator,
             [&ctx](const Request& req, const Principal& who) {
               return PostNodesNameActions(ctx, req, who);
             });
  router.Scoped(Scope::kClusters, ScopeObject::kNode);

  router.Add("GET", "/api/v1/nodes/{name}/actions", Role::kViewer,
             [&ctx](const Request& req, const Principal& who) {
               return GetNodesNameActions(ctx, req, who);
             });
  router.Scoped(Scope::kClusters, ScopeObject::kNode);

  router.Add(
      "GET", "/api/v1/sim/faulty-versions", Role::kViewer,
      [&ctx](const Request&, const Principal&) {
        if (!ctx.rollouts) return Unavailable();
        json::array items;
        for (const auto& [kind, version] : ctx.rollouts->Faulty()) {
          items.push_back(json::object{{"kind", lifecycle::ToString(kind)}, {"version", version}});
        }
        return ObjectResponse(200, {{"items", std::move(items)}, {"simulated", true}});
      });
  router.Scoped(Scope::kFleet);
  router.Add("POST", "/api/v1/sim/faulty-versions", Role::kOperator,
             [&ctx](const Request& req, const Principal& who) {
               return PostSimFaultyVersions(ctx, req, who);
             });
  router.Scoped(Scope::kFleet);
}

}  // namespace gpufleet::api
