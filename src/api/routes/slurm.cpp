// Slurm: GET /api/v1/slurm, how the bridge to each Slurm-scheduled cluster is doing
// (src/slurm/bridge.h).

#include "slurm/slurm.h"

#include "api/json_util.h"
#include "api/scope.h"
#include "model/json.h"
#include "slurm/bridge.h"

namespace json = boost::json;

namespace gpufleet::api {
namespace {

json::object StatusJson(const Cluster& c, const slurm::ClusterStatus& st) {
  auto time = [](int64_t ms) { return ms ? json::value(FormatTime(ms)) : json::value(nullptr); };
  json::array nodes;
  for (const auto& n : st.nodes) {
    json::array flags;
    for (const auto& f : n.flags) flags.emplace_back(f);
    nodes.push_back(json::object{
        {"slurm_name", n.slurm_name},
        {"node", n.node.empty() ? json::value(nullptr) : json::value(n.node)},
        {"state", n.state},
        {"flags", std::move(flags)},
        {"reason", n.reason},
        {"drained", n.drained},
        {"drained_by", n.reason.empty()                             ? json::value(nullptr)
                       : n.reason.starts_with(slurm::kReasonPrefix) ? json::value("gpufleet")
                                                                    : json::value("slurm")}});
  }
  json::array unknown;
  for (const auto& n : st.unknown_nodes) unknown.emplace_back(n);
  return {
      {"cluster", c.name},
      {"scheduler", ToJson(c.scheduler)},
      {"state", st.state},
      {"error", st.error.empty() ? json::value(nullptr) : json::value(st.error)},
      {"last_poll_at", time(st.last_poll_ms)},
      {"last_ok_at", time(st.last_ok_ms)},
      {"poll_duration_s", static_cast<double>(st.poll_duration_ms) / 1000},
      {"polls", st.polls},
      {"poll_failures", st.failures},
      {"jobs_running", st.jobs_running},
      {"jobs_pending", st.jobs_pending},
      {"nodes", std::move(nodes)},
      {"unknown_nodes", std::move(unknown)},
      {"commands", st.commands},
      {"command_failures", st.command_failures},
      {"last_command_error",
       st.last_command_error.empty() ? json::value(nullptr) : json::value(st.last_command_error)}};
}

// GET /api/v1/slurm
Response GetSlurm(ApiContext& ctx, const Request& req, const Principal& who) {
  auto clusters = ctx.fleet.Clusters();
  if (!clusters.ok()) return ErrorResponse(clusters.error());
  std::map<std::string, slurm::ClusterStatus> status;
  if (ctx.slurm) {
    for (auto& st : ctx.slurm->Clusters()) status[st.cluster] = std::move(st);
  }
  json::array items;
  for (const auto& c : clusters.value()) {
    if (c.scheduler.type != "slurm" || !who.CanSeeCluster(c.name)) continue;
    slurm::ClusterStatus st;
    if (auto it = status.find(c.name); it != status.end()) st = it->second;
    items.push_back(StatusJson(c, st));
  }
  json::object o{{"items", std::move(items)}};
  return ObjectResponse(200, o);
}

}  // namespace

void AddSlurmRoutes(Router& router, ApiContext& ctx) {
  router.Add("GET", "/api/v1/slurm", Role::kViewer,
             [&ctx](const Request& req, const Principal& who) { return GetSlurm(ctx, req, who); });
  router.Scoped(Scope::kClusters);
}

}  // namespace gpufleet::api
