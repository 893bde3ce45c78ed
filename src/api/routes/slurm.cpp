// Slurm: GET /api/v1/slurm, how the bridge to each Slurm-scheduled cluster is doing
// (src/slurm/bridge.h); GET /api/v1/nodes/{name}/gres-conf, a node's gres.conf lines
// (src/slurm/gres.h); POST /api/v1/slurm/resume and /suspend, Slurm's power saving through the
// pools' actuators (ScalingService::StartNodes, StopNodes).

#include "slurm/slurm.h"

#include "api/json_util.h"
#include "api/scope.h"
#include "common/strings.h"
#include "model/json.h"
#include "slurm/bridge.h"
#include "slurm/gres.h"

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

// The Slurm-scheduled cluster a power-saving call is about: the one it names, else the only one
// the caller sees.
Result<Cluster> PowerCluster(ApiContext& ctx, const std::string& name, const Principal& who) {
  auto clusters = ctx.fleet.Clusters();
  if (!clusters.ok()) return clusters.error();
  std::vector<Cluster> slurm;
  for (auto& c : clusters.value()) {
    if (!who.CanSeeCluster(c.name)) continue;
    if (!name.empty() && c.name == name) {
      if (c.scheduler.type != "slurm") {
        return MakeError(ErrorCode::kInvalidArgument,
                         "cluster '" + name + "' is not scheduled by slurm");
      }
      return c;
    }
    if (c.scheduler.type == "slurm") slurm.push_back(std::move(c));
  }
  if (!name.empty()) return MakeError(ErrorCode::kNotFound, "no cluster '" + name + "'");
  if (slurm.size() != 1) {
    return MakeError(ErrorCode::kInvalidArgument,
                     slurm.empty() ? "no cluster is scheduled by slurm"
                                   : "give 'cluster': " + std::to_string(slurm.size()) +
                                         " clusters are scheduled by slurm");
  }
  return slurm.front();
}

// The gpufleet nodes that Slurm's hostlist names in cluster `c`: the node whose Slurm name it is,
// else the name the cluster's node_name template gives back. A node of another cluster is an
// error.
Result<std::vector<std::string>> NodesForHostlist(ApiContext& ctx, const Cluster& c,
                                                  const std::string& hostlist) {
  auto names = slurm::ExpandHostlist(hostlist, 10'000);
  if (!names.ok()) return MakeError(ErrorCode::kInvalidArgument, "nodes: " + names.error().message);
  std::map<std::string, std::string> known;  // Slurm name -> gpufleet node, in this cluster
  NodeFilter filter;
  filter.cluster = c.name;
  ctx.fleet.ForEachNode(filter, [&](const Node& n) {
    known[SchedulerNodeName(c.scheduler.node_name, n.name)] = n.name;
  });
  std::vector<std::string> out;
  for (const auto& s : names.value()) {
    if (auto it = known.find(s); it != known.end()) {
      out.push_back(it->second);
      continue;
    }
    std::string node = slurm::NodeForSlurmName(c.scheduler.node_name, s);
    if (!node.empty() && !IsValidName(node)) {  // it may reach a command actuator's shell line
      return MakeError(ErrorCode::kInvalidArgument,
                       "nodes: '" + Printable(node, 80) +
                           "' is not a valid node name (lower-case letters, digits, '-', '.')");
    }
    if (node.empty()) {
      return MakeError(ErrorCode::kInvalidArgument, "nodes: '" + s +
                                                        "' does not fit the cluster's node_name '" +
                                                        c.scheduler.node_name + "'");
    }
    if (auto other = ctx.fleet.GetNode(node); other.ok() && other->cluster != c.name) {
      return MakeError(ErrorCode::kInvalidArgument, "nodes: '" + node + "' is a node of cluster '" +
                                                        other->cluster + "', not '" + c.name + "'");
    }
    out.push_back(node);
  }
  return out;
}

// POST /api/v1/slurm/resume {"nodes": "gpu[01-02]", "cluster"?, "pool"?} and
// POST /api/v1/slurm/suspend {"nodes", "cluster"?}
Response PostSlurmPower(ApiContext& ctx, const Request& req, const Principal& who, bool resume) {
  if (!ctx.scaling) {
    return ErrorResponse(MakeError(ErrorCode::kUnavailable, "autoscaling is not running"));
  }
  auto body = ParseObject(req.body);
  if (!body.ok()) return ErrorResponse(body.error());
  auto only = resume ? OnlyFields(*body, {"nodes", "cluster", "pool"})
                     : OnlyFields(*body, {"nodes", "cluster"});
  if (!only.ok()) return ErrorResponse(only.error());
  auto hostlist = GetString(*body, "nodes", std::string());
  auto cluster_name = GetString(*body, "cluster", std::string());
  auto pool = GetString(*body, "pool", std::string());
  for (const auto* r : {&hostlist, &cluster_name, &pool}) {
    if (!r->ok()) return ErrorResponse(r->error());
  }
  if (hostlist->empty()) {
    return ErrorResponse(MakeError(ErrorCode::kInvalidArgument,
                                   "'nodes' is required: Slurm's hostlist, such as gpu[01-04]"));
  }
  auto cluster = PowerCluster(ctx, cluster_name.value(), who);
  if (!cluster.ok()) return ErrorResponse(cluster.error());
  if (!pool->empty()) {
    auto p = ctx.fleet.FindPool(pool.value());
    if (!p.ok() || p->cluster != cluster->name) {
      return ErrorResponse(
          MakeError(ErrorCode::kInvalidArgument,
                    "pool: cluster '" + cluster->name + "' has no pool '" + pool.value() + "'"));
    }
  }
  auto names = NodesForHostlist(ctx, cluster.value(), hostlist.value());
  if (!names.ok()) return ErrorResponse(names.error());
  auto done = resume ? ctx.scaling->StartNodes(names.value(), pool.value(), who.name)
                     : ctx.scaling->StopNodes(names.value(), who.name);
  if (!done.ok()) return ErrorResponse(done.error());
  auto list = [](const std::vector<std::string>& v) {
    json::array a;
    for (const auto& s : v) a.emplace_back(s);
    return a;
  };
  json::object o{{"cluster", cluster->name},
                 {resume ? "started" : "stopped", list(done->acted)},
                 {"already", list(done->already)}};
  Response r = ObjectResponse(200, o);
  r.audit_target = "cluster/" + cluster->name;
  r.audit_after = r.body;
  return r;
}

// GET /api/v1/nodes/{name}/gres-conf[?type=]
Response GetGresConf(ApiContext& ctx, const Request& req, const Principal& who) {
  auto node = VisibleNode(ctx, req, who);
  if (!node.ok()) return ErrorResponse(node.error());
  auto clusters = ctx.fleet.Clusters();
  if (!clusters.ok()) return ErrorResponse(clusters.error());
  const Scheduler* scheduler = nullptr;
  for (const auto& c : clusters.value()) {
    if (c.name == node->cluster) scheduler = &c.scheduler;
  }
  auto conf = slurm::MakeGresConf(node.value(), scheduler, req.Param("type"));
  if (!conf.ok()) return ErrorResponse(conf.error());
  json::array lines;
  for (const auto& l : conf->lines) lines.emplace_back(l);
  json::object o{{"node", conf->node},
                 {"slurm_node", conf->slurm_node},
                 {"gres", conf->gres},
                 {"lines", std::move(lines)}};
  return ObjectResponse(200, o);
}

}  // namespace

void AddSlurmRoutes(Router& router, ApiContext& ctx) {
  router.Add("GET", "/api/v1/slurm", Role::kViewer,
             [&ctx](const Request& req, const Principal& who) { return GetSlurm(ctx, req, who); });
  router.Scoped(Scope::kClusters);
  router.Add(
      "GET", "/api/v1/nodes/{name}/gres-conf", Role::kViewer,
      [&ctx](const Request& req, const Principal& who) { return GetGresConf(ctx, req, who); });
  router.Scoped(Scope::kClusters, ScopeObject::kNode);
  // Slurm's ResumeProgram and SuspendProgram (gpufleet slurm resume|suspend): operators, as a
  // pool's scale is.
  for (bool resume : {true, false}) {
    router.Add("POST", resume ? "/api/v1/slurm/resume" : "/api/v1/slurm/suspend", Role::kOperator,
               [&ctx, resume](const Request& req, const Principal& who) {
                 return PostSlurmPower(ctx, req, who, resume);
               });
    router.Scoped(Scope::kClusters);
  }
}

}  // namespace gpufleet::api
