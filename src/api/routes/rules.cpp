// Alert rules: GET /api/v1/alert-rules (built-in and user rules with their last run), POST to
// create or replace one, DELETE /api/v1/alert-rules/{name}, POST /api/v1/alert-rules/test
// (a rule file evaluated now, activating nothing), and GET /api/v1/alert-rules/metrics (the
// names expressions can use). Rule files also go through POST /api/v1/apply.

#include "alerting/rules.h"

#include "alerting/metrics.h"
#include "api/json_util.h"
#include "model/json.h"

namespace json = boost::json;

namespace gpufleet::api {
namespace {

json::value RunJson(const alerting::RuleRun& run) {
  return json::object{
      {"error", run.error}, {"duration_ms", run.duration_ms}, {"series", run.series}};
}

json::object RuleObject(const alerting::Rule& r) {
  boost::system::error_code ec;
  json::value v = json::parse(alerting::RuleJson(r), ec);
  json::object o = v.is_object() ? v.as_object() : json::object();
  o["builtin"] = r.builtin;
  o["kind"] = r.check.empty() ? "expr" : "health";
  if (!r.check.empty()) {
    o["check"] = r.check;
    o["level"] = r.level;
  }
  return o;
}

}  // namespace

// A rule test's bounds: the rules of one request, and the alerts listed per rule (the rest are
// counted in "alerts_total").
constexpr size_t kMaxTestRules = 50;
constexpr size_t kMaxTestAlerts = 200;

namespace {

// GET /api/v1/alert-rules
Response GetAlertRules(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.alerts) return AlertingUnavailable();
  auto page = ParsePage(req);
  if (!page.ok()) return ErrorResponse(page.error());
  json::array items;
  for (const auto& view : ctx.alerts->Rules()) {
    json::object o = RuleObject(view.rule);
    o["status"] = view.status;
    o["last_run"] = view.run ? RunJson(*view.run) : json::value(nullptr);
    items.push_back(std::move(o));
  }
  return ListResponse(std::move(items), page.value());
}

// POST /api/v1/alert-rules
Response PostAlertRules(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.alerts) return AlertingUnavailable();
  if (auto s = RequireFleetWide(who); !s.ok()) return ErrorResponse(s.error());
  auto rule = alerting::RuleFromJson(req.body);
  if (!rule.ok()) return ErrorResponse(rule.error());
  bool existed = false;
  for (const auto& v : ctx.alerts->Rules()) {
    existed = existed || (!v.rule.builtin && v.rule.name == rule->name);
  }
  if (auto s = ctx.alerts->PutRule(rule.value()); !s.ok()) {
    return ErrorResponse(s.error());
  }
  Response r = ObjectResponse(existed ? 200 : 201, RuleObject(rule.value()));
  r.audit_target = "alert-rule/" + rule->name;
  r.audit_after = r.body;
  return r;
}

// DELETE /api/v1/alert-rules/{name}
Response DeleteAlertRulesName(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.alerts) return AlertingUnavailable();
  if (auto s = RequireFleetWide(who); !s.ok()) return ErrorResponse(s.error());
  const std::string& name = req.params.at("name");
  if (auto s = ctx.alerts->DeleteRule(name); !s.ok()) {
    return ErrorResponse(s.error());
  }
  Response r = ObjectResponse(200, {{"deleted", name}});
  r.audit_target = "alert-rule/" + name;
  return r;
}

// POST /api/v1/alert-rules/test
Response PostAlertRulesTest(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.alerts) return AlertingUnavailable();
  std::string filename = req.Param("filename");
  auto file = alerting::ParseRuleFile(req.body, filename.empty() ? "request" : filename);
  if (!file.ok()) return ErrorResponse(file.error());
  // Bounded work and answer: a test is for a few rules, not a fleet's file.
  if (file->rules.size() > kMaxTestRules) {
    return ErrorResponse(MakeError(ErrorCode::kInvalidArgument,
                                   "a test takes at most " + std::to_string(kMaxTestRules) +
                                       " rules; this has " + std::to_string(file->rules.size()) +
                                       ": test them in parts"));
  }
  auto reader = alerting::MakeTelemetryReader(ctx.telemetry);
  auto tests = ctx.alerts->TestRules(file->rules, *reader);
  if (!tests.ok()) return ErrorResponse(tests.error());
  json::array items;
  for (const auto& t : tests.value()) {
    json::array alerts;
    size_t visible = 0;
    for (const auto& a : t.alerts) {
      auto cluster = a.labels.find("cluster");
      if (cluster != a.labels.end() && !who.CanSeeCluster(cluster->second)) continue;
      if (++visible > kMaxTestAlerts) continue;
      alerts.push_back(json::object{{"state", alerting::ToString(a.state)},
                                    {"value", a.value},
                                    {"labels", ToJson(a.labels)},
                                    {"annotations", ToJson(a.annotations)}});
    }
    json::object o = RuleObject(t.rule);
    o["run"] = RunJson(t.run);
    o["alerts"] = std::move(alerts);
    o["alerts_total"] = visible;  // the list holds kMaxTestAlerts at most
    items.push_back(std::move(o));
  }
  Page all;
  all.limit = 1000;
  return ListResponse(std::move(items), all);
}

}  // namespace

void AddRuleRoutes(Router& router, ApiContext& ctx) {
  router.Add(
      "GET", "/api/v1/alert-rules", Role::kViewer,
      [&ctx](const Request& req, const Principal& who) { return GetAlertRules(ctx, req, who); });
  router.Scoped(Scope::kAny);

  router.Add(
      "GET", "/api/v1/alert-rules/metrics", Role::kViewer,
      [](const Request& req, const Principal&) {
        auto page = ParsePage(req);
        if (!page.ok()) return ErrorResponse(page.error());
        json::array items;
        for (const auto& m : alerting::AllMetrics()) {
          const char* rows = m.rows == alerting::RowKind::kGpu    ? "gpu"
                             : m.rows == alerting::RowKind::kNode ? "node"
                             : m.rows == alerting::RowKind::kPool ? "pool"
                                                                  : "controller";
          json::array labels;
          for (auto l : alerting::RowLabels(m.rows)) labels.push_back(json::string(l));
          items.push_back(json::object{
              {"name", m.name}, {"rows", rows}, {"labels", std::move(labels)}, {"help", m.help}});
        }
        return ListResponse(std::move(items), page.value());
      });
  router.Scoped(Scope::kAny);

  router.Add(
      "POST", "/api/v1/alert-rules", Role::kOperator,
      [&ctx](const Request& req, const Principal& who) { return PostAlertRules(ctx, req, who); });
  router.Scoped(Scope::kFleet);

  router.Add("DELETE", "/api/v1/alert-rules/{name}", Role::kOperator,
             [&ctx](const Request& req, const Principal& who) {
               return DeleteAlertRulesName(ctx, req, who);
             });
  router.Scoped(Scope::kFleet);

  router.Add("POST", "/api/v1/alert-rules/test", Role::kViewer,
             [&ctx](const Request& req, const Principal& who) {
               return PostAlertRulesTest(ctx, req, who);
             });
  router.TakesYaml();
  router.Scoped(Scope::kClusters);  // a rule file
}

}  // namespace gpufleet::api
