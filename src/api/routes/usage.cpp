// The usage ledger (src/usage):
//   GET /api/v1/usage[?from=&to=&team=&project=&pool=&cluster=&limit=&offset=&format=csv]
//   GET /api/v1/usage/export[?from=&to=&team=&project=&pool=&cluster=]   all of it, CSV, streamed
// the allocations that ended in [from, to) (default: the last 30 days), newest end first:
// who, where, when, the wait, and what the GPUs did (utilization, memory, energy).
//   GET /api/v1/reports/{utilization,cost,energy,queue,peaks}[?from=&to=&by=&cluster=
//       &share_idle=false&format=csv]   the reports over it and the pools' hours (usage/reports.h)
//   GET /api/v1/reports/rates, PUT /api/v1/reports/rates   the prices the reports use
// (the /reports/* routes are registered in reports.cpp, their handlers are here)
//   GET /api/v1/recommendations[?from=&to=&min_idle=1h]   optimization advice (usage/advice.h)

#include <cmath>
#include <variant>

#include "api/json_util.h"
#include "api/routes/reports.h"
#include "common/clock.h"

namespace json = boost::json;

namespace gpufleet::api {
namespace {

json::value NumberOrNull(double v) { return std::isnan(v) ? json::value(nullptr) : json::value(v); }

json::object EntryJson(const usage::Entry& e) {
  const auto& a = e.allocation;
  json::array nodes;
  for (const auto& p : a.placement) {
    nodes.push_back(json::object{{"node", p.node}, {"gpus", json::value_from(p.gpus)}});
  }
  return {
      {"id", e.id},
      {"job", a.job},
      {"team", a.team},
      {"project", a.project},
      {"cluster", a.cluster},
      {"pool", a.pool},
      {"gpu_model", a.gpu_model},
      {"gpus", a.gpus},
      {"nodes", std::move(nodes)},
      {"start", FormatTime(a.start_ms)},
      {"end", FormatTime(a.end_ms)},
      {"wait_s", static_cast<double>(a.wait_ms) / 1000.0},
      {"outcome", a.outcome},
      {"source", a.source.empty() ? "gpufleet" : a.source},
      {"external_id", a.external_id.empty() ? json::value(nullptr) : json::value(a.external_id)},
      {"gpu_hours", e.gpu_hours()},
      {"util_mean", NumberOrNull(e.effective.util_mean)},
      {"util_p95", NumberOrNull(e.effective.util_p95)},
      {"mem_mean_bytes", NumberOrNull(e.effective.mem_mean_bytes)},
      {"mem_peak_bytes", NumberOrNull(e.effective.mem_peak_bytes)},
      {"energy_j", e.effective.energy_j}};
}

Response NoLedger() {
  return ErrorResponse(MakeError(ErrorCode::kUnavailable, "the usage ledger is not running"));
}

// A report's period: `from` and `to` as the API takes times, default the last 30 days.
Result<std::pair<int64_t, int64_t>> Period(const Request& req, int64_t now) {
  auto from = TimeParam(req, "from", now, now - 30 * 86'400'000LL);
  if (!from.ok()) return from.error();
  auto to = TimeParam(req, "to", now, now + 1);
  if (!to.ok()) return to.error();
  if (to.value() <= from.value()) {
    return MakeError(ErrorCode::kInvalidArgument, "'to' must be after 'from'");
  }
  return std::pair{from.value(), to.value()};
}

// A token scoped to clusters reads one of them: `cluster=` (implied when it has one).
Result<std::string> ScopedCluster(const Request& req, const Principal& who, const char* what) {
  std::string cluster = req.Param("cluster");
  if (!who.clusters.empty()) {
    if (cluster.empty() && who.clusters.size() == 1) cluster = who.clusters[0];
    if (!who.CanSeeCluster(cluster)) {
      return MakeError(ErrorCode::kPermissionDenied, "token '" + who.name + "' may read the " +
                                                         what +
                                                         " of its own cluster only: give cluster=");
    }
  }
  return cluster;
}

Result<std::string> Format(const Request& req) {
  const std::string format = req.Param("format");
  if (!format.empty() && format != "json" && format != "csv") {
    return MakeError(ErrorCode::kInvalidArgument, "'format' must be json or csv");
  }
  return format;
}

json::value CellJson(const usage::Cell& c) {
  if (const auto* d = std::get_if<double>(&c)) return *d;
  if (const auto* s = std::get_if<std::string>(&c)) return json::string(*s);
  return nullptr;
}

// The fleet's sites and the teams' budgets, and the prices, for the reports and the advice.
Result<usage::ReportContext> Context(ApiContext& ctx) {
  usage::ReportContext c;
  c.catalog = ctx.catalog.get();
  auto rates = ctx.usage->GetRates(*ctx.catalog);
  if (!rates.ok()) return rates.error();
  c.rates = rates.value();
  if (auto clusters = ctx.fleet.Clusters(); clusters.ok()) {
    for (const auto& cl : clusters.value()) c.cluster_site[cl.name] = cl.site;
  }
  if (ctx.teams) {
    for (const auto& t : ctx.teams->List()) c.team_budget[t.name] = t.budget_monthly;
  }
  return c;
}

Response AdviceResponse(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.usage) return NoLedger();
  const int64_t now = ctx.clock->NowMs();
  auto period = Period(req, now);
  if (!period.ok()) return ErrorResponse(period.error());
  usage::AdviceRequest r;
  r.from_ms = period->first;
  r.to_ms = std::min(period->second, now);
  if (r.to_ms <= r.from_ms) r.to_ms = period->second;
  if (const std::string idle = req.Param("min_idle"); !idle.empty()) {
    r.min_idle_ms = ParseDurationMs(idle);
    if (r.min_idle_ms <= 0) {
      return ErrorResponse(
          MakeError(ErrorCode::kInvalidArgument, "'min_idle' must be a duration such as 1h"));
    }
  }
  auto c = Context(ctx);
  if (!c.ok()) return ErrorResponse(c.error());
  std::map<std::string, usage::PoolFacts> pools;
  if (auto clusters = ctx.fleet.Clusters(); clusters.ok()) {
    std::map<std::string, std::string> type;
    for (const auto& cl : clusters.value()) type[cl.name] = std::string(ToString(cl.type));
    if (auto list = ctx.fleet.Pools(); list.ok()) {
      for (const auto& p : list.value()) pools[p.name] = {type[p.cluster], p.gpus_per_node};
    }
  }
  const std::string currency = c->rates.currency;
  auto advice = ctx.usage->Advise(r, std::move(c).value(), std::move(pools));
  if (!advice.ok()) return ErrorResponse(advice.error());
  json::array items;
  for (const auto& a : advice.value()) {
    if (!who.CanSeeCluster(a.cluster)) continue;
    items.push_back(json::object{{"kind", a.kind},
                                 {"target", a.target},
                                 {"cluster", a.cluster},
                                 {"summary", a.summary},
                                 {"evidence", json::parse(a.evidence)},
                                 {"gpu_hours_saved", a.gpu_hours_saved},
                                 {"cost_saved", NumberOrNull(a.cost_saved)},
                                 {"kwh_saved", a.kwh_saved}});
  }
  return ObjectResponse(200, json::object{{"from", FormatTime(r.from_ms)},
                                          {"to", FormatTime(r.to_ms)},
                                          {"currency", currency},
                                          {"items", std::move(items)}});
}

// A report on less history than its period says so: `recorded_from`, the first day of the
// period the ledger has records of (null: none), and a `note` when that leaves days of the
// period without any ("the ledger has records from 2026-12-07 on: 1 of the 30 days asked").
void SayWhatWasRecorded(ApiContext& ctx, int64_t from_ms, int64_t to_ms, const std::string& cluster,
                        json::object& reply) {
  const int64_t day = store::kUsageDayMs;
  auto days = ctx.store.usage->ListUsageDays(from_ms - from_ms % day, to_ms, cluster);
  const int64_t asked = std::max<int64_t>(1, (to_ms - from_ms + day - 1) / day);
  if (!days.ok() || days->empty()) {
    reply["recorded_from"] = nullptr;
    reply["note"] = "the ledger has no record in this period (a job is recorded when it ends)";
    return;
  }
  const int64_t first = std::max(days->front().day_ms, from_ms);
  reply["recorded_from"] = FormatTime(first);
  const int64_t covered = std::max<int64_t>(1, (to_ms - first + day - 1) / day);
  if (covered < asked) {
    reply["note"] = "the ledger has records from " + FormatTime(first).substr(0, 10) +
                    " on: " + std::to_string(covered) + " of the " + std::to_string(asked) +
                    " days asked";
  }
}

Response ReportResponse(ApiContext& ctx, const Request& req, const Principal& who,
                        usage::ReportKind kind) {
  if (!ctx.usage) return NoLedger();
  const int64_t now = ctx.clock->NowMs();
  auto period = Period(req, now);
  if (!period.ok()) return ErrorResponse(period.error());
  auto cluster = ScopedCluster(req, who, "reports");
  if (!cluster.ok()) return ErrorResponse(cluster.error());
  auto format = Format(req);
  if (!format.ok()) return ErrorResponse(format.error());
  usage::ReportRequest r;
  r.kind = kind;
  r.from_ms = period->first;
  r.to_ms = std::min(period->second, now);
  if (r.to_ms <= r.from_ms) r.to_ms = period->second;
  r.by = req.Param("by");
  const std::string share = req.Param("share_idle");
  if (!share.empty() && share != "true" && share != "false") {
    return ErrorResponse(
        MakeError(ErrorCode::kInvalidArgument, "'share_idle' must be true or false"));
  }
  r.share_idle = share != "false";
  auto c = Context(ctx);
  if (!c.ok()) return ErrorResponse(c.error());
  auto report = ctx.usage->Run(r, std::move(c).value(), cluster.value());
  if (!report.ok()) return ErrorResponse(report.error());
  if (format.value() == "csv") {
    Response out;
    out.content_type = "text/csv; charset=utf-8";
    out.body = usage::ReportCsv(report.value());
    return out;
  }
  json::array items;
  for (const auto& row : report->rows) {
    json::object item;
    for (size_t i = 0; i < row.size() && i < report->columns.size(); ++i) {
      item[report->columns[i]] = CellJson(row[i]);
    }
    items.push_back(std::move(item));
  }
  json::object reply{{"from", FormatTime(r.from_ms)},
                     {"to", FormatTime(r.to_ms)},
                     {"by", report->by},
                     {"items", std::move(items)}};
  if (!report->currency.empty()) reply["currency"] = report->currency;
  if (!cluster->empty()) reply["cluster"] = cluster.value();
  // Peaks come from the pools' hours, the others from the ledger's records.
  if (kind != usage::ReportKind::kPeaks) {
    SayWhatWasRecorded(ctx, r.from_ms, r.to_ms, cluster.value(), reply);
  }
  return ObjectResponse(200, reply);
}

// The ledger's records a call asks for: from, to (default the last 30 days), team, project,
// pool and cluster (a scoped token's own).
Result<store::UsageQuery> LedgerQuery(const Request& req, const Principal& who, int64_t now) {
  store::UsageQuery q;
  GF_TRY_ASSIGN(q.from_ms, TimeParam(req, "from", now, now - 30 * 86'400'000LL));
  GF_TRY_ASSIGN(q.to_ms, TimeParam(req, "to", now, now + 1));
  if (q.to_ms <= q.from_ms) {
    return MakeError(ErrorCode::kInvalidArgument, "'to' must be after 'from'");
  }
  q.team = req.Param("team");
  q.project = req.Param("project");
  q.pool = req.Param("pool");
  GF_TRY_ASSIGN(q.cluster, ScopedCluster(req, who, "usage"));
  return q;
}

// GET /api/v1/usage/export: every record of the period as CSV, streamed a page at a time (each
// page one short store read, so that a slow client holds no database session).
Response LedgerExport(ApiContext& ctx, store::UsageQuery q) {
  auto parts = std::make_shared<usage::LedgerExport>(*ctx.store.usage, std::move(q));
  Response r;
  r.content_type = "text/csv; charset=utf-8";
  r.more = [parts] { return parts->Next(); };
  return r;
}

std::string Cell(double v) {
  if (std::isnan(v)) return "";
  std::string out;
  AppendNumber(out, v);
  return out;
}

}  // namespace

Response UsageReport(ApiContext& ctx, const Request& req, const Principal& who,
                     usage::ReportKind kind) {
  return ReportResponse(ctx, req, who, kind);
}

Response GetRates(ApiContext& ctx) {
  if (!ctx.usage) return NoLedger();
  auto rates = ctx.usage->GetRates(*ctx.catalog);
  if (!rates.ok()) return ErrorResponse(rates.error());
  // What each catalogue model costs now, where no rate says otherwise.
  json::array models;
  for (const auto& m : ctx.catalog->models()) {
    models.push_back(
        json::object{{"model", m.id}, {"price", rates->GpuHour(*ctx.catalog, m.id, "")}});
  }
  auto reply = json::parse(usage::RatesJson(rates.value())).as_object();
  reply["models"] = std::move(models);
  return ObjectResponse(200, reply);
}

Response PutRates(ApiContext& ctx, const Request& req) {
  std::string before;
  Response r = [&] {
    if (!ctx.usage) return NoLedger();
    if (auto old = ctx.usage->GetRates(*ctx.catalog); old.ok()) {
      before = usage::RatesJson(old.value());
    }
    auto rates = usage::ParseRates(req.body, *ctx.catalog);
    if (!rates.ok()) return ErrorResponse(rates.error());
    if (auto s = ctx.usage->SetRates(rates.value()); !s.ok()) return ErrorResponse(s.error());
    return JsonResponse(200, usage::RatesJson(rates.value()));
  }();
  r.audit_target = "reports/rates";
  r.audit_before = before;
  r.audit_after = req.body;
  return r;
}

namespace {

// GET /api/v1/usage
Response GetUsage(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.usage) {
    return ErrorResponse(MakeError(ErrorCode::kUnavailable, "the usage ledger is not running"));
  }
  const int64_t now = ctx.clock->NowMs();
  auto query = LedgerQuery(req, who, now);
  if (!query.ok()) return ErrorResponse(query.error());
  store::UsageQuery& q = query.value();
  const std::string format = req.Param("format");
  if (!format.empty() && format != "json" && format != "csv") {
    return ErrorResponse(MakeError(ErrorCode::kInvalidArgument, "'format' must be json or csv"));
  }
  auto page = ParsePage(req);
  if (!page.ok()) return ErrorResponse(page.error());
  q.limit = static_cast<int64_t>(page->limit);
  q.offset = static_cast<int64_t>(page->offset);
  int64_t total = 0;
  auto entries = ctx.usage->List(q, &total);
  if (!entries.ok()) return ErrorResponse(entries.error());
  if (format == "csv") {
    std::string body =
        "id,job,team,project,cluster,pool,gpu_model,gpus,nodes,start,end,wait_s,outcome,"
        "gpu_hours,util_mean,util_p95,mem_mean_bytes,mem_peak_bytes,energy_j,source,external_id\n";
    for (const auto& e : entries.value()) {
      const auto& a = e.allocation;
      std::string nodes;
      for (const auto& p : a.placement) {
        nodes += (nodes.empty() ? "" : " ") + p.node + ":";
        for (size_t i = 0; i < p.gpus.size(); ++i) {
          nodes += (i ? "," : "") + std::to_string(p.gpus[i]);
        }
      }
      body += std::to_string(e.id) + "," + std::to_string(a.job) + "," + a.team + "," + a.project +
              "," + a.cluster + "," + a.pool + "," + a.gpu_model + "," + std::to_string(a.gpus) +
              ",\"" + nodes + "\"," + FormatTime(a.start_ms) + "," + FormatTime(a.end_ms) + "," +
              Cell(static_cast<double>(a.wait_ms) / 1000.0) + "," + a.outcome + "," +
              Cell(e.gpu_hours()) + "," + Cell(e.effective.util_mean) + "," +
              Cell(e.effective.util_p95) + "," + Cell(e.effective.mem_mean_bytes) + "," +
              Cell(e.effective.mem_peak_bytes) + "," + Cell(e.effective.energy_j) + "," +
              (a.source.empty() ? "gpufleet" : a.source) + "," + a.external_id + "\n";
    }
    Response r;
    r.content_type = "text/csv; charset=utf-8";
    r.body = std::move(body);
    return r;
  }
  json::array items;
  for (const auto& e : entries.value()) items.push_back(EntryJson(e));
  json::object reply{{"from", FormatTime(q.from_ms)},
                     {"to", FormatTime(std::min(q.to_ms, now))},
                     {"retention_days", ctx.usage->retention_ms() / 86'400'000},
                     {"items", std::move(items)},
                     {"total", total},
                     {"limit", page->limit},
                     {"offset", page->offset}};
  return ObjectResponse(200, reply);
}

// GET /api/v1/usage/export
Response GetUsageExport(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.usage) {
    return ErrorResponse(MakeError(ErrorCode::kUnavailable, "the usage ledger is not running"));
  }
  auto query = LedgerQuery(req, who, ctx.clock->NowMs());
  if (!query.ok()) return ErrorResponse(query.error());
  return LedgerExport(ctx, std::move(query).value());
}

}  // namespace

void AddUsageRoutes(Router& router, ApiContext& ctx) {
  router.Add("GET", "/api/v1/usage", Role::kViewer,
             [&ctx](const Request& req, const Principal& who) { return GetUsage(ctx, req, who); });
  router.Scoped(Scope::kClusters);

  router.Add(
      "GET", "/api/v1/usage/export", Role::kViewer,
      [&ctx](const Request& req, const Principal& who) { return GetUsageExport(ctx, req, who); });
  router.Scoped(Scope::kClusters);

  router.AddSlow(
      "GET", "/api/v1/recommendations", Role::kViewer,
      [&ctx](const Request& req, const Principal& who) { return AdviceResponse(ctx, req, who); });
  router.Scoped(Scope::kClusters);
}

}  // namespace gpufleet::api
