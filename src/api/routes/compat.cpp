// The compatibility matrix: GET /api/v1/compat (the matrix in effect, each branch's status
// today), PUT /api/v1/compat (an admin replaces it with a YAML file like data/compat.yaml),
// DELETE /api/v1/compat (back to the built-in one), GET /api/v1/compat/yaml ({"origin",
// "yaml"}: its text), and
// GET /api/v1/compat/check?pool=P&driver=V[&cuda=C] (every rule, failed and passed).

#include "api/json_util.h"
#include "api/scope.h"
#include "common/json_text.h"
#include "lifecycle/target_warnings.h"
#include "model/json.h"

namespace json = boost::json;

namespace gpufleet::api {
namespace {

Response CompatUnavailable() {
  return ErrorResponse(
      MakeError(ErrorCode::kUnavailable, "the compatibility matrix is not loaded"));
}

json::array RulesJson(const std::vector<CompatRule>& rules) {
  json::array out;
  for (const auto& r : rules) {
    out.push_back(json::object{{"rule", r.rule}, {"reason", r.reason}, {"source", r.source}});
  }
  return out;
}

// A branch today: "supported", "end_of_life" or "new_feature" (no end of life: not for
// production).
std::string BranchStatus(const CompatBranch& b, const std::string& today) {
  if (b.EndOfLife(today)) return "end_of_life";
  if (b.type == "nfb") return "new_feature";
  return "supported";
}

json::object MatrixJson(const lifecycle::MatrixInEffect& in, const std::string& today) {
  const CompatMatrix& m = *in.matrix;
  json::array branches, cuda, archs, models, operators;
  for (const auto& b : m.branches()) {
    branches.push_back(json::object{{"branch", b.branch},
                                    {"type", b.type},
                                    {"eol", b.eol_undated   ? json::value("yes")
                                            : b.eol.empty() ? json::value(nullptr)
                                                            : json::value(b.eol)},
                                    {"cuda_major", b.cuda_major},
                                    {"status", BranchStatus(b, today)}});
  }
  for (const auto& c : m.cuda()) {
    cuda.push_back(json::object{{"cuda", c.cuda}, {"min_driver", c.min_driver}});
  }
  for (const auto& a : m.architectures()) {
    archs.push_back(json::object{{"architecture", a.architecture},
                                 {"min_driver", a.min_driver},
                                 {"last_branch", a.last_branch}});
  }
  for (const auto& mo : m.models()) {
    models.push_back(json::object{{"model", mo.model},
                                  {"min_driver", mo.min_driver},
                                  {"min_vbios", mo.min_vbios},
                                  {"min_inforom", mo.min_inforom}});
  }
  for (const auto& o : m.operators()) {
    json::array drivers;
    for (const auto& d : o.drivers) drivers.push_back(json::value(d));
    operators.push_back(json::object{{"version", o.version},
                                     {"drivers", std::move(drivers)},
                                     {"container_toolkit", o.container_toolkit},
                                     {"kubernetes_min", o.kubernetes_min},
                                     {"kubernetes_max", o.kubernetes_max}});
  }
  json::object sources;
  for (const char* t : {"branches", "cuda", "architectures", "models", "gpu_operator"}) {
    sources[t] = m.source(t);
  }
  return {{"origin", in.applied ? "applied" : "builtin"},
          {"today", today},
          {"branches", std::move(branches)},
          {"cuda", std::move(cuda)},
          {"architectures", std::move(archs)},
          {"models", std::move(models)},
          {"gpu_operator", std::move(operators)},
          {"sources", std::move(sources)}};
}

// The summary kept in the audit log for a change: not the whole file.
std::string AuditSummary(const lifecycle::MatrixInEffect& in) {
  return JsonText(json::object{{"origin", in.applied ? "applied" : "builtin"},
                               {"branches", in.matrix->branches().size()},
                               {"cuda", in.matrix->cuda().size()},
                               {"gpu_operator", in.matrix->operators().size()}});
}

// GET /api/v1/compat/check
Response GetCompatCheck(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.compat) return CompatUnavailable();
  const std::string pool = req.Param("pool"), driver = req.Param("driver");
  if (pool.empty() || driver.empty()) {
    return ErrorResponse(MakeError(ErrorCode::kInvalidArgument,
                                   "give ?pool=POOL&driver=VERSION (and &cuda=VERSION to "
                                   "check another CUDA than the pool's)"));
  }
  auto found = ctx.fleet.FindPool(pool);
  if (!found.ok() || !who.CanSeeCluster(found->cluster)) {
    return ErrorResponse(MakeError(ErrorCode::kNotFound, "no pool '" + pool + "'"));
  }
  const std::string cuda = req.Param("cuda");
  if (!cuda.empty()) {
    CompatNeeds needs;
    needs.cuda = cuda;
    if (std::string why = ValidateNeeds(needs); !why.empty()) {
      return ErrorResponse(MakeError(ErrorCode::kInvalidArgument,
                                     "cuda: '" + cuda + "' must be a version such as 12.8"));
    }
  }
  auto result = ctx.compat->Check(pool, driver, cuda);
  if (!result.ok()) return ErrorResponse(result.error());
  // The pool's nodes and the drivers they run, for the warnings.
  std::vector<std::pair<std::string, std::string>> runs;
  NodeFilter in_pool;
  in_pool.pool = pool;
  ctx.fleet.ForEachNode(in_pool, [&](const Node& n) {
    if (!LeftFleet(n.state)) runs.emplace_back(n.name, n.facts.driver_version);
  });
  return ObjectResponse(200, {{"ok", result->ok},
                              {"pool", pool},
                              {"driver", driver},
                              {"failed", RulesJson(result->failed)},
                              {"passed", RulesJson(result->passed)},
                              {"warnings", WarningsJson(ctx, "driver", driver, runs)}});
}

}  // namespace

json::array WarningsJson(ApiContext& ctx, std::string_view kind, const std::string& target,
                         const std::vector<std::pair<std::string, std::string>>& runs) {
  json::array out;
  if (!ctx.compat) return out;
  auto matrix = ctx.compat->current().matrix;
  auto bulletins = ctx.vulns ? ctx.vulns->bulletins() : nullptr;
  for (const auto& w : lifecycle::TargetWarnings(kind, target, runs, bulletins.get(), *matrix,
                                                 ctx.compat->today())) {
    json::array nodes;
    for (const auto& n : w.nodes) nodes.push_back(json::value(n));
    out.push_back(json::object{{"kind", w.kind}, {"message", w.message}, {"nodes", nodes}});
  }
  return out;
}

void AddCompatRoutes(Router& router, ApiContext& ctx) {
  auto today = [&ctx] { return ctx.compat->today(); };  // called once ctx.compat is checked
  router.Add("GET", "/api/v1/compat", Role::kViewer,
             [&ctx, today](const Request&, const Principal&) {
               if (!ctx.compat) return CompatUnavailable();
               return ObjectResponse(200, MatrixJson(ctx.compat->current(), today()));
             });
  router.Scoped(Scope::kAny);
  router.Add("GET", "/api/v1/compat/yaml", Role::kViewer, [&ctx](const Request&, const Principal&) {
    if (!ctx.compat) return CompatUnavailable();
    auto in = ctx.compat->current();
    return ObjectResponse(200, {{"origin", in.applied ? "applied" : "builtin"}, {"yaml", in.yaml}});
  });
  router.Scoped(Scope::kAny);
  // A change of the matrix (`change` applies it): the new matrix, and in the audit log the
  // tables' sizes before and after.
  auto changed = [&ctx, today](const std::function<Status()>& change) {
    Response r = [&] {
      if (!ctx.compat) return CompatUnavailable();
      auto before = ctx.compat->current();
      if (auto s = change(); !s.ok()) return ErrorResponse(s.error());
      auto after = ctx.compat->current();
      Response done = ObjectResponse(200, MatrixJson(after, today()));
      done.audit_before = AuditSummary(before);
      done.audit_after = AuditSummary(after);
      return done;
    }();
    r.audit_target = "compat";
    return r;
  };
  router.Add("PUT", "/api/v1/compat", Role::kAdmin,
             [&ctx, changed](const Request& req, const Principal&) {
               return changed([&]() -> Status {
                 if (req.body.empty()) {
                   return MakeError(ErrorCode::kInvalidArgument,
                                    "empty body: send a compatibility matrix YAML file like "
                                    "data/compat.yaml");
                 }
                 std::string filename = req.Param("filename");
                 return ctx.compat->Apply(req.body, filename.empty() ? "request" : filename);
               });
             });
  router.TakesYaml();
  router.Scoped(Scope::kFleet);
  router.Add("DELETE", "/api/v1/compat", Role::kAdmin,
             [&ctx, changed](const Request&, const Principal&) {
               return changed([&] { return ctx.compat->Reset(); });
             });
  router.Scoped(Scope::kFleet);
  router.Add(
      "GET", "/api/v1/compat/check", Role::kViewer,
      [&ctx](const Request& req, const Principal& who) { return GetCompatCheck(ctx, req, who); });
  router.Scoped(Scope::kClusters);
}

}  // namespace gpufleet::api
