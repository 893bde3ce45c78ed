// Reports: every /api/v1/reports/* route is registered here (AddReportRoutes); the handlers
// of the usage and capacity reports are in usage.cpp and capacity.cpp (routes/reports.h).
//   GET /api/v1/reports/{utilization,cost,energy,queue,peaks}, GET|PUT /api/v1/reports/rates
//   GET /api/v1/reports/capacity, GET|PUT /api/v1/reports/capacity/growth
//   GET /api/v1/reports/compliance[?cluster=&days=30&format=csv]   the posture now, per cluster
//       and for the fleet, and the daily series; CSV: one row per day and scope
//   GET /api/v1/reports/compliance/nodes[?cluster=&pool=&check=&failing=true&format=csv]
//       each node's checks and why it fails them

#include "api/routes/reports.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "api/json_util.h"
#include "common/clock.h"
#include "common/json_text.h"
#include "lifecycle/compliance_service.h"
#include "usage/reports.h"

namespace json = boost::json;

namespace gpufleet::api {
namespace {

Response Unavailable() {
  return ErrorResponse(MakeError(ErrorCode::kUnavailable, "the compliance posture is not running"));
}

// count / nodes, to four places; a scope without nodes has nothing out of compliance.
double Share(int64_t count, int64_t nodes) {
  return nodes == 0 ? 1.0 : std::round(10000.0 * count / nodes) / 10000.0;
}

json::object SharesJson(const lifecycle::ComplianceCounts& c, bool audit_verified) {
  return {{"nodes", c.nodes},
          {"supported_branch", Share(c.supported_branch, c.nodes)},
          {"drift_free", Share(c.drift_free, c.nodes)},
          {"cve_free", Share(c.cve_free, c.nodes)},
          {"firmware_at_profile", Share(c.firmware_at_profile, c.nodes)},
          {"audit_chain_verified", audit_verified ? 1.0 : 0.0},
          {"compliant", Share(c.compliant, c.nodes)},
          {"counts",
           {{"supported_branch", c.supported_branch},
            {"drift_free", c.drift_free},
            {"cve_free", c.cve_free},
            {"firmware_at_profile", c.firmware_at_profile},
            {"compliant", c.compliant}}}};
}

// A CSV field: quoted when it holds a comma, a quote or a line break.
std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string CsvShares(const lifecycle::ComplianceCounts& c, bool audit_verified) {
  char row[256];
  std::snprintf(
      row, sizeof row, "%lld,%.4f,%.4f,%.4f,%.4f,%d,%.4f\n", static_cast<long long>(c.nodes),
      Share(c.supported_branch, c.nodes), Share(c.drift_free, c.nodes), Share(c.cve_free, c.nodes),
      Share(c.firmware_at_profile, c.nodes), audit_verified ? 1 : 0, Share(c.compliant, c.nodes));
  return row;
}

Response Csv(std::string body) {
  Response r;
  r.content_type = "text/csv; charset=utf-8";
  r.body = std::move(body);
  return r;
}

// ?format= is json (the default) or csv.
Result<bool> WantsCsv(const Request& req) {
  const std::string f = req.Param("format");
  if (f.empty() || f == "json") return false;
  if (f == "csv") return true;
  return MakeError(ErrorCode::kInvalidArgument, "'format' must be json or csv, not '" + f + "'");
}

Result<lifecycle::ComplianceFilter> FilterOf(ApiContext& ctx, const Request& req,
                                             const Principal& who) {
  lifecycle::ComplianceFilter f;
  f.cluster = req.Param("cluster");
  f.pool = req.Param("pool");
  f.clusters = who.clusters;
  if (!f.cluster.empty()) {
    bool known = false;
    if (auto cs = ctx.fleet.Clusters(); cs.ok()) {
      for (const auto& c : cs.value()) known = known || c.name == f.cluster;
    }
    if (!known || !who.CanSeeCluster(f.cluster)) {
      return MakeError(ErrorCode::kNotFound, "no cluster '" + f.cluster + "'");
    }
  }
  if (!f.pool.empty()) {
    auto p = ctx.fleet.FindPool(f.pool);
    if (!p.ok() || !who.CanSeeCluster(p->cluster)) {
      return MakeError(ErrorCode::kNotFound, "no pool '" + f.pool + "'");
    }
  }
  f.check = req.Param("check");
  if (!f.check.empty()) {
    bool known = false;
    for (const char* c : lifecycle::kComplianceChecks) known = known || f.check == c;
    if (!known) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "'check' must be supported_branch, drift_free, cve_free or "
                       "firmware_at_profile, not '" +
                           f.check + "'");
    }
  }
  const std::string failing = req.Param("failing");
  if (failing == "true" || failing == "1") {
    f.failing = true;
  } else if (!failing.empty() && failing != "false" && failing != "0") {
    return MakeError(ErrorCode::kInvalidArgument, "'failing' must be true or false");
  }
  return f;
}

Result<int> DaysOf(const Request& req) {
  const std::string text = req.Param("days");
  if (text.empty()) return 30;
  char* end = nullptr;
  long days = std::strtol(text.c_str(), &end, 10);
  if (*end || days < 1 || days > lifecycle::kComplianceRetentionDays) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "'days' must be a whole number from 1 to " +
                         std::to_string(lifecycle::kComplianceRetentionDays) + ", not '" + text +
                         "'");
  }
  return static_cast<int>(days);
}

// GET /api/v1/reports/compliance
Response GetReportsCompliance(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.compliance) return Unavailable();
  auto csv = WantsCsv(req);
  if (!csv.ok()) return ErrorResponse(csv.error());
  auto filter = FilterOf(ctx, req, who);
  if (!filter.ok()) return ErrorResponse(filter.error());
  if (!filter->pool.empty() || !filter->check.empty() || filter->failing) {
    return ErrorResponse(
        MakeError(ErrorCode::kInvalidArgument,
                  "pool, check and failing filter /api/v1/reports/compliance/nodes; this report "
                  "takes cluster and days"));
  }
  auto days = DaysOf(req);
  if (!days.ok()) return ErrorResponse(days.error());
  auto report = ctx.compliance->Report(filter.value(), days.value());
  if (!report.ok()) return ErrorResponse(report.error());
  if (csv.value()) {
    std::string body =
        "day,scope,nodes,supported_branch,drift_free,cve_free,firmware_at_profile,"
        "audit_chain_verified,compliant\n";
    for (const auto& day : report->series) {
      body += day.day + ",fleet," + CsvShares(day.Fleet(), day.audit_verified);
      for (const auto& [name, c] : day.clusters) {
        body += day.day + "," + CsvField(name) + "," + CsvShares(c, day.audit_verified);
      }
    }
    return Csv(std::move(body));
  }
  const auto& now = report->now;
  json::array clusters;
  for (const auto& [name, c] : now.clusters) {
    json::object o{{"name", name}};
    for (auto& [k, v] : SharesJson(c, now.audit_verified)) o[k] = v;
    clusters.push_back(std::move(o));
  }
  json::array series;
  for (const auto& day : report->series) {
    json::object o{{"day", day.day}};
    for (auto& [k, v] : SharesJson(day.Fleet(), day.audit_verified)) o[k] = v;
    series.push_back(std::move(o));
  }
  const auto& a = report->audit;
  return ObjectResponse(200,
                        {{"day", now.day},
                         {"measured_at", FormatTime(now.measured_ms)},
                         {"fleet", SharesJson(now.Fleet(), now.audit_verified)},
                         {"clusters", std::move(clusters)},
                         {"series", std::move(series)},
                         {"audit",
                          {{"verified", a.verified},
                           {"records", a.records},
                           {"problem", a.problem.empty() ? json::value() : json::value(a.problem)},
                           {"checked_at", FormatTime(a.checked_ms)}}}});
}

// GET /api/v1/reports/compliance/nodes
Response GetReportsComplianceNodes(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.compliance) return Unavailable();
  auto csv = WantsCsv(req);
  if (!csv.ok()) return ErrorResponse(csv.error());
  auto filter = FilterOf(ctx, req, who);
  if (!filter.ok()) return ErrorResponse(filter.error());
  auto page = ParsePage(req);
  if (!page.ok()) return ErrorResponse(page.error());
  const bool audit = ctx.compliance->Audit().verified;
  auto nodes = ctx.compliance->Nodes(filter.value());
  if (csv.value()) {
    std::string body =
        "node,cluster,pool,compliant,supported_branch,drift_free,cve_free,"
        "firmware_at_profile,reasons\n";
    auto b = [](bool v) { return v ? "1," : "0,"; };
    for (const auto& n : nodes) {
      std::string reasons;
      for (const auto& r : n.reasons) reasons += (reasons.empty() ? "" : "; ") + r;
      body += CsvField(n.node) + "," + CsvField(n.cluster) + "," + CsvField(n.pool) + "," +
              b(n.NodeChecksPass() && audit) + b(n.supported_branch) + b(n.drift_free) +
              b(n.cve_free) + b(n.firmware_at_profile) + CsvField(reasons) + "\n";
    }
    return Csv(std::move(body));
  }
  json::array items;
  const size_t end = std::min(nodes.size(), page->offset + page->limit);
  for (size_t i = page->offset; i < end; ++i) {
    const auto& n = nodes[i];
    json::array reasons;
    for (const auto& r : n.reasons) reasons.emplace_back(r);
    items.push_back(json::object{{"node", n.node},
                                 {"cluster", n.cluster},
                                 {"pool", n.pool},
                                 {"compliant", n.NodeChecksPass() && audit},
                                 {"supported_branch", n.supported_branch},
                                 {"drift_free", n.drift_free},
                                 {"cve_free", n.cve_free},
                                 {"firmware_at_profile", n.firmware_at_profile},
                                 {"reasons", std::move(reasons)}});
  }
  return PageResponse(std::move(items), nodes.size(), page.value());
}

}  // namespace

void AddReportRoutes(Router& router, ApiContext& ctx) {
  // The usage reports read up to 13 months of the ledger: off the I/O threads.
  for (const char* name : {"utilization", "cost", "energy", "queue", "peaks"}) {
    const usage::ReportKind kind = *usage::ParseReportKind(name);
    router.AddSlow("GET", std::string("/api/v1/reports/") + name, Role::kViewer,
                   [&ctx, kind](const Request& req, const Principal& who) {
                     return UsageReport(ctx, req, who, kind);
                   });
    router.Scoped(Scope::kClusters);
  }
  router.Add("GET", "/api/v1/reports/rates", Role::kViewer,
             [&ctx](const Request&, const Principal&) { return GetRates(ctx); });
  router.Scoped(Scope::kAny);
  router.Add("PUT", "/api/v1/reports/rates", Role::kOperator,
             [&ctx](const Request& req, const Principal&) { return PutRates(ctx, req); });
  router.Scoped(Scope::kFleet);

  router.AddSlow(
      "GET", "/api/v1/reports/capacity", Role::kViewer,
      [&ctx](const Request& req, const Principal& who) { return CapacityReport(ctx, req, who); });
  router.Scoped(Scope::kClusters);
  router.Add("GET", "/api/v1/reports/capacity/growth", Role::kViewer,
             [&ctx](const Request&, const Principal&) { return GetCapacityGrowth(ctx); });
  router.Scoped(Scope::kFleet);
  router.Add("PUT", "/api/v1/reports/capacity/growth", Role::kOperator,
             [&ctx](const Request& req, const Principal& who) {
               return PutCapacityGrowth(ctx, req, who);
             });
  router.Scoped(Scope::kFleet);

  router.Add("GET", "/api/v1/reports/compliance", Role::kViewer,
             [&ctx](const Request& req, const Principal& who) {
               return GetReportsCompliance(ctx, req, who);
             });
  router.Scoped(Scope::kClusters);

  router.Add("GET", "/api/v1/reports/compliance/nodes", Role::kViewer,
             [&ctx](const Request& req, const Principal& who) {
               return GetReportsComplianceNodes(ctx, req, who);
             });
  router.Scoped(Scope::kClusters);
}

}  // namespace gpufleet::api
