// Drift from the golden profiles (fleet file `profile:`):
//   GET /api/v1/drift[?node=&pool=&cluster=&state=&severity=]  findings, unresolved first, and
//                                            the unresolved ones grouped by cause (`causes`)
//   GET /api/v1/drift/{id}                   one finding, with the profile in effect for its pool
//                                            ({} when the pool is gone)
//   GET /api/v1/drift/{id}/remediation       how it is fixed: the rollout request that fixes a
//                                            driver or firmware difference, or why it is manual

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <tuple>

#include "api/json_util.h"
#include "common/clock.h"
#include "common/json_text.h"

namespace json = boost::json;

namespace gpufleet::api {
namespace {

Response Unavailable() {
  return ErrorResponse(MakeError(ErrorCode::kUnavailable, "drift detection is not running"));
}

json::value TimeOrNull(int64_t ms) { return ms > 0 ? json::value(FormatTime(ms)) : json::value(); }

json::object FindingJson(const DriftFinding& f) {
  return {{"id", f.id},
          {"node", f.node},
          {"pool", f.pool},
          {"cluster", f.cluster},
          {"gpu", f.gpu >= 0 ? json::value(f.gpu) : json::value()},
          {"fact", f.fact},
          {"expected", f.expected},
          {"actual", f.actual},
          {"severity", f.severity},
          {"remediation", f.remediation},
          {"state", f.state},
          {"note", f.note},
          {"first_seen", TimeOrNull(f.first_seen_ms)},
          {"last_seen", TimeOrNull(f.last_seen_ms)},
          {"resolved_at", TimeOrNull(f.resolved_ms)}};
}

Result<int64_t> IdOf(const Request& req) {
  const std::string& text = req.params.at("id");
  char* end = nullptr;
  long long id = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end || id <= 0) {
    return MakeError(ErrorCode::kInvalidArgument, "'" + text + "' is not a drift finding id");
  }
  return static_cast<int64_t>(id);
}

// The finding `req` names, if the caller may see its cluster.
Result<DriftFinding> Find(ApiContext& ctx, const Request& req, const Principal& who) {
  auto id = IdOf(req);
  if (!id.ok()) return id.error();
  auto f = ctx.drift->Get(id.value());
  if (!f.ok() || !who.CanSeeCluster(f->cluster)) {
    return MakeError(ErrorCode::kNotFound, "no drift finding " + std::to_string(id.value()));
  }
  return f;
}

// The rollout that puts the profile's version on the finding's node, or why there is none.
Result<json::object> Remediation(const DriftFinding& f, const Profile& profile) {
  auto manual = [&](const std::string& why) -> Result<json::object> {
    return json::object{{"remediation", "manual"}, {"request", nullptr}, {"why", why}};
  };
  if (f.state == "resolved") return manual("resolved: the node matches its profile");
  if (f.actual == "unknown") {
    return manual("the node does not report its " + f.fact +
                  ": check its agent (the finding resolves when it reports the profile's value)");
  }
  if (f.remediation != "rollout") {
    return manual("fix " + f.fact + " on the node (expected " + f.expected + ", it has " +
                  f.actual + "); the finding resolves when the node reports it");
  }
  std::string kind, target;
  if (f.fact == "vbios") {
    kind = "gpu-firmware";
    target = f.expected;
  } else if (f.fact == "driver_version") {
    kind = "driver";
    target = f.expected;
  } else {  // cuda_driver, gsp_firmware: they come with the driver
    if (profile.driver_version.empty()) {
      return manual("the " + f.fact +
                    " comes with the driver: give the profile a driver_version to roll out");
    }
    kind = "driver";
    target = profile.driver_version;
  }
  json::object request{
      {"kind", kind},
      {"target", target},
      {"selector",
       {{"pools", json::array{json::value(f.pool)}}, {"nodes", json::array{json::value(f.node)}}}}};
  return json::object{{"remediation", "rollout"},
                      {"request", std::move(request)},
                      {"why", "a " + kind + " rollout of " + f.node + " to " + target}};
}

// The unresolved findings grouped by cause: one row per (fact, expected, actual), with the
// nodes and pools it is on and what fixes them all ("14 nodes on 580.95.05 → one rollout"), the
// most severe first, then the most nodes.
json::array CausesJson(const std::vector<DriftFinding>& all) {
  struct Cause {
    std::string severity, remediation;
    std::set<std::string> nodes, pools;
    int64_t findings = 0;
  };
  std::map<std::tuple<std::string, std::string, std::string>, Cause> causes;
  for (const auto& f : all) {
    if (f.state == "resolved") continue;
    Cause& c = causes[{f.fact, f.expected, f.actual}];
    if (lifecycle::SeverityRank(f.severity) > lifecycle::SeverityRank(c.severity)) {
      c.severity = f.severity;
    }
    c.remediation = f.remediation;
    c.nodes.insert(f.node);
    c.pools.insert(f.pool);
    ++c.findings;
  }
  std::vector<std::pair<const std::tuple<std::string, std::string, std::string>*, const Cause*>>
      order;
  for (const auto& [key, c] : causes) order.emplace_back(&key, &c);
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    const int ra = lifecycle::SeverityRank(a.second->severity);
    const int rb = lifecycle::SeverityRank(b.second->severity);
    return ra != rb ? ra > rb : a.second->nodes.size() > b.second->nodes.size();
  });
  json::array out;
  for (const auto& [key, c] : order) {
    const auto& [fact, expected, actual] = *key;
    const size_t n = c->nodes.size();
    const std::string nodes = std::to_string(n) + (n == 1 ? " node" : " nodes");
    std::string fix = c->remediation == "auto"      ? "set by the agents (auto remediation)"
                      : c->remediation != "rollout" ? "by hand on each node"
                      : fact == "driver_version" ? "one driver rollout to " + expected + " per pool"
                      : fact == "vbios" ? "one GPU firmware rollout to " + expected + " per pool"
                                        : "comes with the driver: one driver rollout per pool";
    json::array names, pools;
    for (const auto& node : c->nodes) {
      if (names.size() == 20) break;
      names.emplace_back(node);
    }
    for (const auto& pool : c->pools) pools.emplace_back(pool);
    out.push_back(json::object{
        {"fact", fact},
        {"expected", expected},
        {"actual", actual},
        {"severity", c->severity},
        {"remediation", c->remediation},
        {"nodes", static_cast<int64_t>(n)},
        {"findings", c->findings},
        {"pools", std::move(pools)},
        {"node_names", std::move(names)},
        {"summary", nodes + " with " + fact + " " + (actual.empty() ? "unset" : actual) +
                        " (profile: " + expected + ") → " + fix}});
  }
  return out;
}

// GET /api/v1/drift
Response GetDrift(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.drift) return Unavailable();
  auto page = ParsePage(req);
  if (!page.ok()) return ErrorResponse(page.error());
  lifecycle::DriftFilter filter;
  filter.node = req.Param("node");
  filter.pool = req.Param("pool");
  filter.cluster = req.Param("cluster");
  filter.clusters = who.clusters;
  filter.state = req.Param("state");
  filter.severity = req.Param("severity");
  if (!filter.state.empty() && filter.state != "open" && filter.state != "remediating" &&
      filter.state != "resolved") {
    return ErrorResponse(
        MakeError(ErrorCode::kInvalidArgument, "'state' must be open, remediating or resolved"));
  }
  if (!filter.severity.empty() && lifecycle::SeverityRank(filter.severity) == 0) {
    return ErrorResponse(
        MakeError(ErrorCode::kInvalidArgument, "'severity' must be critical, high, medium or low"));
  }
  auto all = ctx.drift->List(filter);
  std::map<std::string, int64_t> states{{"open", 0}, {"remediating", 0}, {"resolved", 0}};
  std::map<std::string, int64_t> severities{
      {"critical", 0}, {"high", 0}, {"medium", 0}, {"low", 0}};
  std::map<std::string, bool> drifted;
  for (const auto& f : all) {
    ++states[f.state];
    if (f.state == "resolved") continue;
    ++severities[f.severity];
    drifted[f.node] = true;
  }
  json::array items;
  const size_t end = std::min(all.size(), page->offset + page->limit);
  for (size_t i = page->offset; i < end; ++i) items.push_back(FindingJson(all[i]));
  json::object summary{{"nodes_drifted", static_cast<int64_t>(drifted.size())}};
  for (const auto& [s, n] : states) summary[s] = n;
  json::object by_severity;
  for (const auto& [s, n] : severities) by_severity[s] = n;
  summary["by_severity"] = std::move(by_severity);
  return ObjectResponse(200, {{"items", std::move(items)},
                              {"total", static_cast<int64_t>(all.size())},
                              {"limit", page->limit},
                              {"offset", page->offset},
                              {"summary", std::move(summary)},
                              {"causes", CausesJson(all)}});
}

// GET /api/v1/drift/{id}
Response GetDriftId(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.drift) return Unavailable();
  auto f = Find(ctx, req, who);
  if (!f.ok()) return ErrorResponse(f.error());
  json::object o = FindingJson(f.value());
  auto p = ctx.drift->NodeProfile(f->node, f->pool);  // none: the pool is gone
  o["profile"] = json::parse(ProfileJson(p.ok() ? p.value() : Profile{}));
  return ObjectResponse(200, o);
}

// GET /api/v1/drift/{id}/remediation
Response GetDriftIdRemediation(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.drift) return Unavailable();
  auto f = Find(ctx, req, who);
  if (!f.ok()) return ErrorResponse(f.error());
  auto p = ctx.drift->NodeProfile(f->node, f->pool);
  auto r = Remediation(f.value(), p.ok() ? p.value() : Profile{});
  if (!r.ok()) return ErrorResponse(r.error());
  json::object o = std::move(r).value();
  o["finding"] = FindingJson(f.value());
  return ObjectResponse(200, o);
}

}  // namespace

void AddDriftRoutes(Router& router, ApiContext& ctx) {
  router.Add("GET", "/api/v1/drift", Role::kViewer,
             [&ctx](const Request& req, const Principal& who) { return GetDrift(ctx, req, who); });
  router.Scoped(Scope::kClusters);

  router.Add(
      "GET", "/api/v1/drift/{id}", Role::kViewer,
      [&ctx](const Request& req, const Principal& who) { return GetDriftId(ctx, req, who); });
  router.Scoped(Scope::kClusters);

  router.Add("GET", "/api/v1/drift/{id}/remediation", Role::kViewer,
             [&ctx](const Request& req, const Principal& who) {
               return GetDriftIdRemediation(ctx, req, who);
             });
  router.Scoped(Scope::kClusters);
}

}  // namespace gpufleet::api
