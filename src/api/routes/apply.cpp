// GET /api/v1/export: the live clusters and pools (those the token may see) with their scaling
// policies, as the fleet file that `apply` takes back with no change (config/fleet_spec.h), or
// with ?format=ansible as an Ansible inventory of them and their nodes.
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

json::array ChangesJson(const std::vector<FleetChange>& changes) {
  json::array out;
  for (const auto& c : changes) {
    json::array fields;
    for (const auto& f : c.fields) {
      fields.push_back(json::object{{"field", f.field}, {"from", f.from}, {"to", f.to}});
    }
    out.push_back(json::object{
        {"kind", c.kind}, {"name", c.name}, {"action", c.action}, {"fields", std::move(fields)}});
  }
  return out;
}

// What --prune deletes, checked before anything changes: no pool with nodes (the registry
// refuses those), queued or running jobs; the whole fleet's to see, so a scoped token may not.
Result<PrunePlan> PlanPrune(ApiContext& ctx, const Principal& who, const FleetSpec& spec) {
  GF_TRY(RequireFleetWide(who));
  PrunePlan plan;
  GF_TRY_ASSIGN(plan, ctx.fleet.PlanPrune(spec));
  GF_TRY(RequirePoolsIdle(ctx, plan.pools));
  return plan;
}

}  // namespace

Status RequirePoolsIdle(ApiContext& ctx, const std::vector<std::string>& pools) {
  if (!ctx.jobs) return {};
  auto demand = ctx.jobs->Demand();
  for (const auto& pool : pools) {
    auto it = demand.find(pool);
    if (it != demand.end() && (it->second.queued_jobs > 0 || it->second.running_gpus > 0)) {
      return MakeError(ErrorCode::kConflict, "cannot delete pool " + pool + ": it has " +
                                                 std::to_string(it->second.queued_jobs) +
                                                 " queued job(s) and " +
                                                 std::to_string(it->second.running_gpus) +
                                                 " GPU(s) running jobs (cancel them first)");
    }
  }
  return {};
}

void AddApplyRoutes(Router& router, ApiContext& ctx) {
  router.Add(
      "POST", "/api/v1/apply", Role::kOperator, [&ctx](const Request& req, const Principal& who) {
        std::string filename = "request";
        if (auto it = req.query.find("filename"); it != req.query.end() && !it->second.empty()) {
          filename = it->second;
        }
        auto dry = req.query.find("dry_run");
        bool dry_run = dry != req.query.end() && (dry->second == "true" || dry->second == "1");
        auto pr = req.query.find("prune");
        bool prune = pr != req.query.end() && (pr->second == "true" || pr->second == "1");
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
          PrunePlan plan;
          if (prune) {
            auto planned = PlanPrune(ctx, who, spec.value());
            if (!planned.ok()) return ErrorResponse(planned.error());
            plan = std::move(planned.value());
          }
          if (dry_run) {
            auto changes = ctx.fleet.Diff(spec.value());
            if (!changes.ok()) return ErrorResponse(changes.error());
            return ObjectResponse(200, {{"dry_run", true},
                                        {"clusters", spec->clusters.size()},
                                        {"pools", spec->pools.size()},
                                        {"scaling", spec->scaling.size()},
                                        {"changes", ChangesJson(changes.value())}});
          }
          auto counts = ctx.fleet.Apply(spec.value());
          if (!counts.ok()) return ErrorResponse(counts.error());
          if (auto s = ctx.fleet.Prune(plan); !s.ok()) return ErrorResponse(s.error());
          for (const auto& pool : plan.pools) {
            if (ctx.scaling) (void)ctx.scaling->DeletePolicy(pool, who.name);  // none: fine
          }
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
                                      {"scaling", {{"set", set}, {"unchanged", unchanged}}},
                                      {"deleted",
                                       {{"clusters", json::value_from(plan.clusters)},
                                        {"pools", json::value_from(plan.pools)}}}});
        }();
        r.audit_target = "fleet/" + filename;
        if (r.status == 200) r.audit_after = r.body;
        return r;
      });
  router.TakesYaml();  // a fleet or rule file, as YAML

  router.Add(
      "GET", "/api/v1/export", Role::kViewer, [&ctx](const Request& req, const Principal& who) {
        std::string format = "fleet";
        if (auto f = req.query.find("format"); f != req.query.end() && !f->second.empty()) {
          format = f->second;
        }
        if (format != "fleet" && format != "ansible") {
          return ErrorResponse(MakeError(ErrorCode::kInvalidArgument,
                                         "format: '" + format + "' is not one of fleet, ansible"));
        }
        auto clusters = ctx.fleet.Clusters();
        if (!clusters.ok()) return ErrorResponse(clusters.error());
        auto pools = ctx.fleet.Pools();
        if (!pools.ok()) return ErrorResponse(pools.error());
        FleetSpec spec;
        for (auto& c : clusters.value()) {
          if (who.CanSeeCluster(c.name)) spec.clusters.push_back(std::move(c));
        }
        std::map<std::string, PoolScaling> policies;
        if (ctx.scaling) {
          for (auto& s : ctx.scaling->Pools()) policies[s.scaling.pool] = std::move(s.scaling);
        }
        for (auto& p : pools.value()) {
          if (!who.CanSeeCluster(p.cluster)) continue;
          if (auto it = policies.find(p.name); it != policies.end())
            spec.scaling.push_back(it->second);
          spec.pools.push_back(std::move(p));
        }
        Response r;
        r.content_type = "application/yaml";
        if (format == "ansible") {
          std::vector<Node> nodes;
          for (auto& n : ctx.fleet.Nodes({})) {
            if (who.CanSeeCluster(n.cluster)) nodes.push_back(std::move(n));
          }
          r.body = WriteAnsibleInventory(spec, nodes);
        } else {
          r.body = WriteFleetSpec(spec);
        }
        return r;
      });
}

}  // namespace gpufleet::api
