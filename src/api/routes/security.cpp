// Vulnerability status and security bulletins:
//   GET  /api/v1/vulnerabilities[?node=&pool=&cluster=&min_cvss=&status=]  one item per node,
//        with the pools, the CVEs and the nodes needing a fix grouped by cause
//   GET  /api/v1/vulnerabilities/fix?pool=P   the driver that fixes a pool, as a rollout request
//   GET  /api/v1/bulletins, GET /api/v1/bulletins/{id}
//   POST /api/v1/bulletins/import             an admin loads one of NVIDIA's CSAF documents

#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <tuple>

#include "api/json_util.h"
#include "common/json_text.h"

namespace json = boost::json;

namespace gpufleet::api {
namespace {

Response Unavailable() {
  return ErrorResponse(
      MakeError(ErrorCode::kUnavailable, "the vulnerability status is not running"));
}

json::object NodeJson(const lifecycle::NodeVulns& n) {
  json::array cves;
  for (const auto& e : n.verdict->cves) {
    cves.push_back(json::object{{"id", e.cve},
                                {"cvss", e.cvss},
                                {"component", e.component},
                                {"bulletin", e.bulletin},
                                {"fixed_in", e.fixed_in}});
  }
  auto or_null = [](const std::string& s) { return s.empty() ? json::value() : json::value(s); };
  return {{"node", n.node},
          {"cluster", n.cluster},
          {"pool", n.pool},
          {"driver", or_null(n.software.driver)},
          {"branch", or_null(n.verdict->branch)},
          {"container_toolkit", or_null(n.software.container_toolkit)},
          {"status", n.verdict->status},
          {"max_cvss", n.verdict->max_cvss},
          {"cves", std::move(cves)},
          {"fix", n.verdict->fix},
          {"fixed_driver", or_null(n.verdict->fixed_driver)},
          {"simulated", n.simulated}};
}

// Each pool of the nodes listed: how many are exposed or on an unsupported branch, the worst
// score; worst first.
json::array PoolSummary(const std::vector<lifecycle::NodeVulns>& nodes) {
  struct Pool {
    std::string cluster;
    int64_t nodes = 0, exposed = 0, unsupported = 0;
    double max_cvss = 0;
  };
  std::map<std::string, Pool> by_name;
  for (const auto& n : nodes) {
    Pool& p = by_name[n.pool];
    p.cluster = n.cluster;
    ++p.nodes;
    p.exposed += n.verdict->status == "exposed";
    p.unsupported += n.verdict->status == "unsupported_branch";
    p.max_cvss = std::max(p.max_cvss, n.verdict->max_cvss);
  }
  std::vector<std::pair<std::string, Pool>> sorted(by_name.begin(), by_name.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return a.second.max_cvss > b.second.max_cvss;
  });
  json::array out;
  for (const auto& [name, p] : sorted) {
    out.push_back(json::object{{"pool", name},
                               {"cluster", p.cluster},
                               {"nodes", p.nodes},
                               {"exposed", p.exposed},
                               {"unsupported_branch", p.unsupported},
                               {"max_cvss", p.max_cvss}});
  }
  return out;
}

// The nodes that need something, grouped by cause: the same driver, toolkit and verdict share a
// fix ("14 nodes on driver 580.95.05: 13 CVEs, max CVSS 8.8 → driver 580.159.03: one driver
// rollout per pool (h100-sxm)"), the worst first, then the most nodes.
json::array CauseSummary(const std::vector<lifecycle::NodeVulns>& nodes) {
  struct Cause {
    const lifecycle::NodeVulns* first = nullptr;
    int64_t nodes = 0;
    std::set<std::string> pools;
  };
  std::map<std::tuple<std::string, std::string, std::string>, Cause> causes;
  for (const auto& n : nodes) {
    if (n.verdict->status == "ok") continue;
    Cause& c = causes[{n.software.driver, n.software.container_toolkit, n.verdict->status}];
    if (!c.first) c.first = &n;
    ++c.nodes;
    c.pools.insert(n.pool);
  }
  std::vector<const Cause*> sorted;
  for (const auto& [key, c] : causes) sorted.push_back(&c);
  std::stable_sort(sorted.begin(), sorted.end(), [](const Cause* a, const Cause* b) {
    const double x = a->first->verdict->max_cvss, y = b->first->verdict->max_cvss;
    return x != y ? x > y : a->nodes > b->nodes;
  });
  json::array out;
  for (const Cause* c : sorted) {
    const auto& n = *c->first;
    const auto& v = *n.verdict;
    json::array pools;
    std::string pool_list;
    for (const auto& p : c->pools) {
      pools.emplace_back(p);
      pool_list += (pool_list.empty() ? "" : ", ") + p;
    }
    char cvss[16];
    std::snprintf(cvss, sizeof cvss, "%.1f", v.max_cvss);
    std::string summary = std::to_string(c->nodes) + (c->nodes == 1 ? " node" : " nodes") +
                          " on driver " +
                          (n.software.driver.empty() ? "unknown" : n.software.driver);
    if (!n.software.container_toolkit.empty()) {
      summary += ", toolkit " + n.software.container_toolkit;
    }
    summary += v.status == "unsupported_branch" ? " (unsupported branch)" : "";
    summary += ": " + std::to_string(v.cves.size()) + " CVEs, max CVSS " + cvss;
    if (v.fix.starts_with("driver ")) {
      summary += " → " + v.fix + ": one driver rollout per pool (" + pool_list + ")";
    } else if (!v.fix.empty()) {
      summary += " → " + v.fix + " (pools: " + pool_list + ")";
    }
    out.push_back(json::object{{"driver", n.software.driver},
                               {"container_toolkit", n.software.container_toolkit},
                               {"branch", v.branch},
                               {"status", v.status},
                               {"nodes", c->nodes},
                               {"pools", std::move(pools)},
                               {"cve_count", static_cast<int64_t>(v.cves.size())},
                               {"max_cvss", v.max_cvss},
                               {"fix", v.fix},
                               {"summary", std::move(summary)}});
  }
  return out;
}

// The fleet's CVEs across the nodes listed: each with its score and how many nodes it reaches.
json::array CveSummary(const std::vector<lifecycle::NodeVulns>& nodes,
                       const BulletinSet& bulletins) {
  struct Seen {
    double cvss = 0;
    std::string component, bulletin;
    int nodes = 0;
  };
  std::map<std::string, Seen> by_id;
  for (const auto& n : nodes) {
    for (const auto& e : n.verdict->cves) {
      Seen& s = by_id[e.cve];
      s.cvss = e.cvss;
      s.component = e.component;
      s.bulletin = e.bulletin;
      ++s.nodes;
    }
  }
  std::vector<std::pair<std::string, Seen>> sorted(by_id.begin(), by_id.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return a.second.cvss != b.second.cvss ? a.second.cvss > b.second.cvss
                                          : a.second.nodes > b.second.nodes;
  });
  json::array out;
  for (const auto& [id, s] : sorted) {
    std::string summary;
    if (const Bulletin* b = bulletins.Find(s.bulletin)) {
      for (const auto& c : b->cves) {
        if (c.id == id) summary = c.summary;
      }
    }
    out.push_back(json::object{{"id", id},
                               {"cvss", s.cvss},
                               {"component", s.component},
                               {"bulletin", s.bulletin},
                               {"summary", summary},
                               {"nodes", s.nodes}});
  }
  return out;
}

json::object BulletinJson(const Bulletin& b, bool with_cves) {
  double max_cvss = 0;
  json::array cves;
  for (const auto& c : b.cves) {
    max_cvss = std::max(max_cvss, c.cvss);
    if (!with_cves) continue;
    json::array fixes;
    for (const auto& f : c.fixes) {
      fixes.push_back(
          json::object{{"component", f.component}, {"branch", f.branch}, {"fixed", f.fixed}});
    }
    cves.push_back(json::object{{"id", c.id},
                                {"cvss", c.cvss},
                                {"cwe", c.cwe},
                                {"summary", c.summary},
                                {"platform", c.platform},
                                {"fixes", std::move(fixes)}});
  }
  json::object o{{"id", b.id},
                 {"product", b.product},
                 {"published", b.published},
                 {"origin", b.origin},
                 {"cve_count", static_cast<int64_t>(b.cves.size())},
                 {"max_cvss", max_cvss}};
  if (with_cves) o["cves"] = std::move(cves);
  return o;
}

Result<lifecycle::VulnFilter> FilterOf(const Request& req, const Principal& who) {
  lifecycle::VulnFilter f;
  f.node = req.Param("node");
  f.pool = req.Param("pool");
  f.cluster = req.Param("cluster");
  f.clusters = who.clusters;
  f.status = req.Param("status");
  if (!f.status.empty() && f.status != "ok" && f.status != "exposed" &&
      f.status != "unsupported_branch") {
    return MakeError(ErrorCode::kInvalidArgument,
                     "'status' must be ok, exposed or unsupported_branch");
  }
  if (std::string v = req.Param("min_cvss"); !v.empty()) {
    char* end = nullptr;
    f.min_cvss = std::strtod(v.c_str(), &end);
    if (end != v.c_str() + v.size() || !(f.min_cvss >= 0 && f.min_cvss <= 10)) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "'min_cvss' must be a number from 0 to 10, not '" + v + "'");
    }
  }
  return f;
}

// GET /api/v1/vulnerabilities
Response GetVulnerabilities(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.vulns) return Unavailable();
  auto page = ParsePage(req);
  if (!page.ok()) return ErrorResponse(page.error());
  auto filter = FilterOf(req, who);
  if (!filter.ok()) return ErrorResponse(filter.error());
  auto nodes = ctx.vulns->Nodes(filter.value());
  std::map<std::string, int64_t> counts{{"ok", 0}, {"exposed", 0}, {"unsupported_branch", 0}};
  int64_t critical = 0;
  json::array items;
  for (const auto& n : nodes) {
    ++counts[n.verdict->status];
    if (n.verdict->max_cvss >= 9) ++critical;
  }
  const size_t end = std::min(nodes.size(), page->offset + page->limit);
  for (size_t i = page->offset; i < end; ++i) items.push_back(NodeJson(nodes[i]));
  json::object summary{{"nodes", static_cast<int64_t>(nodes.size())}, {"critical", critical}};
  for (const auto& [status, count] : counts) summary[status] = count;
  json::object o{{"items", std::move(items)},
                 {"total", static_cast<int64_t>(nodes.size())},
                 {"limit", page->limit},
                 {"offset", page->offset},
                 {"summary", std::move(summary)},
                 {"pools", PoolSummary(nodes)},
                 {"causes", CauseSummary(nodes)},
                 {"cves", CveSummary(nodes, *ctx.vulns->bulletins())},
                 {"today", ctx.compat ? ctx.compat->today() : ""}};
  return ObjectResponse(200, o);
}

// GET /api/v1/vulnerabilities/fix
Response GetVulnerabilitiesFix(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.vulns) return Unavailable();
  const std::string pool = req.Param("pool");
  if (pool.empty()) {
    return ErrorResponse(MakeError(ErrorCode::kInvalidArgument, "give ?pool=POOL"));
  }
  auto p = ctx.fleet.FindPool(pool);
  if (!p.ok() || !who.CanSeeCluster(p->cluster)) {
    return ErrorResponse(MakeError(ErrorCode::kNotFound, "no pool '" + pool + "'"));
  }
  auto fix = ctx.vulns->ProposeFix(pool);
  if (!fix.ok()) return ErrorResponse(fix.error());
  json::array nodes;
  for (const auto& n : fix->nodes) nodes.emplace_back(n);
  // The pool's nodes that need it, and only those (a selector's fields must all
  // match).
  json::object request{{"kind", "driver"},
                       {"target", fix->target.target},
                       {"selector", {{"pools", json::array{json::value(pool)}}, {"nodes", nodes}}}};
  return ObjectResponse(200, {{"pool", pool},
                              {"branch", fix->target.branch},
                              {"target", fix->target.target},
                              {"why", fix->target.why},
                              {"nodes", std::move(nodes)},
                              {"request", std::move(request)}});
}

// GET /api/v1/bulletins
Response GetBulletins(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.vulns) return Unavailable();
  auto page = ParsePage(req);
  if (!page.ok()) return ErrorResponse(page.error());
  json::array all;
  auto set = ctx.vulns->bulletins();
  // Newest first.
  for (auto it = set->bulletins().rbegin(); it != set->bulletins().rend(); ++it) {
    all.push_back(BulletinJson(*it, false));
  }
  return ListResponse(std::move(all), page.value());
}

// GET /api/v1/bulletins/{id}
Response GetBulletinsId(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.vulns) return Unavailable();
  auto set = ctx.vulns->bulletins();
  const Bulletin* b = set->Find(req.params.at("id"));
  if (b == nullptr) {
    return ErrorResponse(
        MakeError(ErrorCode::kNotFound, "no bulletin '" + req.params.at("id") + "'"));
  }
  return ObjectResponse(200, BulletinJson(*b, true));
}

// POST /api/v1/bulletins/import
Response PostBulletinsImport(ApiContext& ctx, const Request& req, const Principal& who) {
  Response r = [&]() -> Response {
    if (!ctx.vulns) return Unavailable();
    auto set = ctx.vulns->bulletins();
    auto b = ctx.vulns->Import(req.body);
    if (!b.ok()) return ErrorResponse(b.error());
    const Bulletin* before = set->Find(b->id);
    Response done = ObjectResponse(before ? 200 : 201, BulletinJson(b.value(), true));
    if (before) done.audit_before = JsonText(BulletinJson(*before, false));
    done.audit_after = JsonText(BulletinJson(b.value(), false));
    done.audit_target = "bulletin/" + b->id;
    return done;
  }();
  if (r.audit_target.empty()) r.audit_target = "bulletins";
  return r;
}

}  // namespace

void AddSecurityRoutes(Router& router, ApiContext& ctx) {
  router.Add("GET", "/api/v1/vulnerabilities", Role::kViewer,
             [&ctx](const Request& req, const Principal& who) {
               return GetVulnerabilities(ctx, req, who);
             });
  router.Scoped(Scope::kClusters);

  router.Add("GET", "/api/v1/vulnerabilities/fix", Role::kViewer,
             [&ctx](const Request& req, const Principal& who) {
               return GetVulnerabilitiesFix(ctx, req, who);
             });
  router.Scoped(Scope::kClusters);

  router.Add(
      "GET", "/api/v1/bulletins", Role::kViewer,
      [&ctx](const Request& req, const Principal& who) { return GetBulletins(ctx, req, who); });
  router.Scoped(Scope::kAny);

  router.Add(
      "GET", "/api/v1/bulletins/{id}", Role::kViewer,
      [&ctx](const Request& req, const Principal& who) { return GetBulletinsId(ctx, req, who); });
  router.Scoped(Scope::kAny);

  router.Add("POST", "/api/v1/bulletins/import", Role::kAdmin,
             [&ctx](const Request& req, const Principal& who) {
               return PostBulletinsImport(ctx, req, who);
             });
  router.Scoped(Scope::kFleet);
}

}  // namespace gpufleet::api
