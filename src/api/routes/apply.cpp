// POST /api/v1/apply: fleet as code. The body is the YAML file itself (the CLI sends it as is,
// with ?filename= so errors name the file): a fleet file (kind Fleet), or an alert rule file
// (Prometheus's format, top-level `groups`). The whole file is validated before anything is
// written, and a bad file changes nothing.

#include "alerting/rules.h"
#include "api/json_util.h"
#include "config/fleet_spec.h"

namespace json = boost::json;

namespace gpufleet::api {

namespace {

Response ApplyRules(ApiContext& ctx, const Principal& who, const std::string& body,
                    const std::string& filename, bool dry_run) {
  if (!ctx.alerts) return AlertingUnavailable();
  if (auto s = RequireFleetWide(who); !s.ok()) return ErrorResponse(s.error());
  auto file = alerting::ParseRuleFile(body, filename);
  if (!file.ok()) return ErrorResponse(file.error());
  if (dry_run) {
    return ObjectResponse(
        200, {{"dry_run", true}, {"groups", file->groups.size()}, {"rules", file->rules.size()}});
  }
  auto changes = ctx.alerts->ApplyRuleFile(file.value());
  if (!changes.ok()) return ErrorResponse(changes.error());
  const auto& c = changes.value();
  return ObjectResponse(200, {{"rules",
                               {{"created", c.created},
                                {"updated", c.updated},
                                {"unchanged", c.unchanged},
                                {"deleted", c.deleted}}}});
}

}  // namespace

void AddApplyRoutes(Router& router, ApiContext& ctx) {
  router.Add(
      "POST", "/api/v1/apply", Role::kOperator, [&ctx](const Request& req, const Principal& who) {
        std::string filename = "request";
        if (auto it = req.query.find("filename"); it != req.query.end() && !it->second.empty()) {
          filename = it->second;
        }
        auto dry = req.query.find("dry_run");
        bool dry_run = dry != req.query.end() && (dry->second == "true" || dry->second == "1");
        Response r = [&] {
          if (req.body.empty()) {
            return ErrorResponse(
                MakeError(ErrorCode::kInvalidArgument, "empty body: send a fleet YAML file"));
          }
          if (alerting::IsRuleFile(req.body))
            return ApplyRules(ctx, who, req.body, filename, dry_run);
          auto spec = ParseFleetSpec(req.body, filename, ctx.catalog);
          if (!spec.ok()) return ErrorResponse(spec.error());
          for (const auto& c : spec->clusters) {
            if (!who.CanSeeCluster(c.name)) {
              return ErrorResponse(
                  MakeError(ErrorCode::kPermissionDenied,
                            "token '" + who.name + "' may not change cluster '" + c.name + "'"));
            }
          }
          // Scaling policies are checked before anything changes.
          if (!spec->scaling.empty() && !ctx.scaling) {
            return ErrorResponse(MakeError(ErrorCode::kUnavailable,
                                           "autoscaling is not running: no scaling blocks"));
          }
          for (const auto& sc : spec->scaling) {
            if (auto s = ctx.scaling->Check(sc); !s.ok()) {
              return ErrorResponse(
                  MakeError(ErrorCode::kInvalidArgument,
                            filename + ": pool " + sc.pool + ": scaling." + s.error().message));
            }
          }
          if (dry_run) {
            return ObjectResponse(200, {{"dry_run", true},
                                        {"clusters", spec->clusters.size()},
                                        {"pools", spec->pools.size()},
                                        {"scaling", spec->scaling.size()}});
          }
          auto counts = ctx.fleet.Apply(spec.value());
          if (!counts.ok()) return ErrorResponse(counts.error());
          int set = 0, unchanged = 0;
          for (const auto& sc : spec->scaling) {
            bool changed = false;
            auto r = ctx.scaling->SetPolicy(sc, who.name, &changed);
            if (!r.ok()) return ErrorResponse(r.error());
            ++(changed ? set : unchanged);
          }
          const auto& c = counts.value();
          return ObjectResponse(200, {{"clusters",
                                       {{"created", c.clusters_created},
                                        {"updated", c.clusters_updated},
                                        {"unchanged", c.clusters_unchanged}}},
                                      {"pools",
                                       {{"created", c.pools_created},
                                        {"updated", c.pools_updated},
                                        {"unchanged", c.pools_unchanged}}},
                                      {"scaling", {{"set", set}, {"unchanged", unchanged}}}});
        }();
        r.audit_target = "fleet/" + filename;
        if (r.status == 200) r.audit_after = r.body;
        return r;
      });
  router.TakesYaml();  // a fleet or rule file, as YAML
}

}  // namespace gpufleet::api
