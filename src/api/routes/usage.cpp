// The usage ledger (src/usage):
//   GET /api/v1/usage[?from=&to=&team=&project=&pool=&cluster=&limit=&offset=&format=csv]
// the allocations that ended in [from, to) (default: the last 30 days), newest end first:
// who, where, when, the wait, and what the GPUs did (utilization, memory, energy).

#include <cmath>

#include "api/json_util.h"
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
  return {{"id", e.id},
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
          {"gpu_hours", e.gpu_hours()},
          {"util_mean", NumberOrNull(e.effective.util_mean)},
          {"util_p95", NumberOrNull(e.effective.util_p95)},
          {"mem_mean_bytes", NumberOrNull(e.effective.mem_mean_bytes)},
          {"mem_peak_bytes", NumberOrNull(e.effective.mem_peak_bytes)},
          {"energy_j", e.effective.energy_j}};
}

std::string Cell(double v) {
  if (std::isnan(v)) return "";
  std::string out;
  AppendNumber(out, v);
  return out;
}

}  // namespace

void AddUsageRoutes(Router& router, ApiContext& ctx) {
  router.Add(
      "GET", "/api/v1/usage", Role::kViewer, [&ctx](const Request& req, const Principal& who) {
        if (!ctx.usage) {
          return ErrorResponse(
              MakeError(ErrorCode::kUnavailable, "the usage ledger is not running"));
        }
        const int64_t now = ctx.clock.NowMs();
        store::UsageQuery q;
        auto from = TimeParam(req, "from", now, now - 30 * 86'400'000LL);
        if (!from.ok()) return ErrorResponse(from.error());
        auto to = TimeParam(req, "to", now, now + 1);
        if (!to.ok()) return ErrorResponse(to.error());
        if (to.value() <= from.value()) {
          return ErrorResponse(MakeError(ErrorCode::kInvalidArgument, "'to' must be after 'from'"));
        }
        q.from_ms = from.value();
        q.to_ms = to.value();
        q.team = req.Param("team");
        q.project = req.Param("project");
        q.pool = req.Param("pool");
        q.cluster = req.Param("cluster");
        if (!who.clusters.empty()) {
          if (q.cluster.empty() && who.clusters.size() == 1) q.cluster = who.clusters[0];
          if (!who.CanSeeCluster(q.cluster)) {
            return ErrorResponse(
                MakeError(ErrorCode::kPermissionDenied, "token '" + who.name +
                                                            "' may read the usage of its own "
                                                            "cluster only: give cluster="));
          }
        }
        const std::string format = req.Param("format");
        if (!format.empty() && format != "json" && format != "csv") {
          return ErrorResponse(
              MakeError(ErrorCode::kInvalidArgument, "'format' must be json or csv"));
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
              "gpu_hours,util_mean,util_p95,mem_mean_bytes,mem_peak_bytes,energy_j\n";
          for (const auto& e : entries.value()) {
            const auto& a = e.allocation;
            std::string nodes;
            for (const auto& p : a.placement) {
              nodes += (nodes.empty() ? "" : " ") + p.node + ":";
              for (size_t i = 0; i < p.gpus.size(); ++i) {
                nodes += (i ? "," : "") + std::to_string(p.gpus[i]);
              }
            }
            body += std::to_string(e.id) + "," + std::to_string(a.job) + "," + a.team + "," +
                    a.project + "," + a.cluster + "," + a.pool + "," + a.gpu_model + "," +
                    std::to_string(a.gpus) + ",\"" + nodes + "\"," + FormatTime(a.start_ms) + "," +
                    FormatTime(a.end_ms) + "," + Cell(static_cast<double>(a.wait_ms) / 1000.0) +
                    "," + a.outcome + "," + Cell(e.gpu_hours()) + "," +
                    Cell(e.effective.util_mean) + "," + Cell(e.effective.util_p95) + "," +
                    Cell(e.effective.mem_mean_bytes) + "," + Cell(e.effective.mem_peak_bytes) +
                    "," + Cell(e.effective.energy_j) + "\n";
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
      });
}

}  // namespace gpufleet::api
