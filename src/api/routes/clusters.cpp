// Clusters, pools and the GPU model catalogue. Clusters and pools change through /apply (a
// whole fleet file) or one at a time here: POST, PUT, PATCH and DELETE take an object with the
// fleet file's fields (config/fleet_spec.h), validated by its rules and messages, and store it
// through the same FleetService::Apply.

#include "api/json_util.h"
#include "api/scope.h"
#include "config/fleet_spec.h"
#include "model/json.h"

namespace json = boost::json;

namespace gpufleet::api {
namespace {

struct Counts {
  int nodes = 0, gpus = 0, ready = 0, allocated = 0;
  std::map<std::string, int> by_state;
};

// `ctx.jobs`' allocation: GPUs running jobs count as allocated.
std::map<std::string, Counts> CountBy(ApiContext& ctx, const std::vector<Node>& nodes,
                                      bool by_pool) {
  std::map<std::string, Counts> out;
  std::map<std::string, std::vector<int64_t>> allocation;
  if (ctx.jobs) allocation = ctx.jobs->Allocation();
  for (const auto& n : nodes) {
    auto& c = out[by_pool ? n.pool : n.cluster];
    if (auto a = allocation.find(n.name); a != allocation.end()) {
      for (int64_t job : a->second) c.allocated += job != 0;
    }
    ++c.nodes;
    c.gpus += static_cast<int>(n.gpus.size());
    c.ready += n.state == NodeState::kReady ? 1 : 0;
    ++c.by_state[std::string(ToString(n.state))];
  }
  return out;
}

json::object WithCounts(json::object o, const Counts& c) {
  o["nodes"] = c.nodes;
  o["gpus"] = c.gpus;
  o["nodes_ready"] = c.ready;
  o["gpus_allocated"] = c.allocated;
  json::object states;
  for (const auto& [s, n] : c.by_state) states[s] = n;
  o["nodes_by_state"] = std::move(states);
  return o;
}

// RFC 7386: each member of `patch` replaces the target's, null removes it, and objects merge.
json::value MergePatch(json::value target, const json::value& patch) {
  if (!patch.is_object()) return patch;
  if (!target.is_object()) target = json::object();
  auto& t = target.as_object();
  for (const auto& [key, v] : patch.as_object()) {
    if (v.is_null()) {
      t.erase(key);
    } else {
      json::value current = t.contains(key) ? t.at(key) : json::value(nullptr);
      t[key] = MergePatch(std::move(current), v);
    }
  }
  return target;
}

Result<json::object> BodyObject(const Request& req) {
  boost::system::error_code ec;
  json::value v = json::parse(req.body, ec);
  if (ec || !v.is_object()) {
    return MakeError(ErrorCode::kInvalidArgument, "the body must be a JSON object");
  }
  return std::move(v.as_object());
}

// PUT's body names the object of its path (or leaves the name to it): nothing is renamed.
Status NameFromPath(json::object& body, const std::string& name, const char* kind) {
  if (auto it = body.find("name"); it != body.end()) {
    if (!it->value().is_string() || it->value().as_string() != name) {
      return MakeError(ErrorCode::kInvalidArgument, std::string("name: must be '") + name +
                                                        "', the " + kind + " of the path (a " +
                                                        kind + " is not renamed)");
    }
  } else {
    body["name"] = name;
  }
  return {};
}

Result<Cluster> FindCluster(ApiContext& ctx, const Principal& who, const std::string& name) {
  auto clusters = ctx.fleet.Clusters();
  if (!clusters.ok()) return clusters.error();
  for (auto& c : clusters.value()) {
    if (c.name == name && who.CanSeeCluster(name)) return std::move(c);
  }
  return MakeError(ErrorCode::kNotFound, "no cluster '" + name + "'");
}

Response ClusterReply(ApiContext& ctx, int status, const std::string& name) {
  auto clusters = ctx.fleet.Clusters();
  if (!clusters.ok()) return ErrorResponse(clusters.error());
  NodeFilter f;
  f.cluster = name;
  auto counts = CountBy(ctx, ctx.fleet.Nodes(f), false);
  for (const auto& c : clusters.value()) {
    if (c.name == name) return ObjectResponse(status, WithCounts(ToJson(c), counts[name]));
  }
  return ErrorResponse(MakeError(ErrorCode::kNotFound, "no cluster '" + name + "'"));
}

Response PoolReply(ApiContext& ctx, int status, const std::string& name) {
  auto pool = ctx.fleet.FindPool(name);
  if (!pool.ok()) return ErrorResponse(pool.error());
  NodeFilter f;
  f.pool = name;
  auto counts = CountBy(ctx, ctx.fleet.Nodes(f), true);
  return ObjectResponse(status, WithCounts(ToJson(pool.value()), counts[name]));
}

// A cluster's or pool's `team`, when it names one, is a known team.
Status CheckTeam(ApiContext& ctx, const std::string& team) {
  if (team.empty() || !ctx.teams || ctx.teams->Get(team).ok()) return {};
  return MakeError(ErrorCode::kInvalidArgument,
                   "team: no team '" + team + "' (create it first: gpufleet teams create)");
}

// Validates and stores one cluster: `create` refuses one that exists (409), otherwise it is
// created or replaced. 201 when created, else 200.
Response PutCluster(ApiContext& ctx, const Principal& who, const json::object& body, bool create) {
  auto cluster = ParseClusterObject(json::serialize(body), *ctx.catalog);
  if (!cluster.ok()) return ErrorResponse(cluster.error());
  if (!who.CanSeeCluster(cluster->name)) {
    return ErrorResponse(
        MakeError(ErrorCode::kPermissionDenied,
                  "token '" + who.name + "' may not change cluster '" + cluster->name + "'"));
  }
  if (auto s = CheckTeam(ctx, cluster->team); !s.ok()) return ErrorResponse(s.error());
  bool exists = FindCluster(ctx, who, cluster->name).ok();
  if (create && exists) {
    return ErrorResponse(
        MakeError(ErrorCode::kConflict, "cluster '" + cluster->name + "' exists (PUT or PATCH " +
                                            "/api/v1/clusters/" + cluster->name + " changes it)"));
  }
  FleetSpec spec;
  spec.clusters.push_back(cluster.value());
  if (auto done = ctx.fleet.Apply(spec); !done.ok()) return ErrorResponse(done.error());
  return ClusterReply(ctx, exists ? 200 : 201, cluster->name);
}

const sched::PoolScaling* PolicyOf(const std::vector<scaling::PoolStatus>& pools,
                                   const std::string& pool) {
  for (const auto& s : pools) {
    if (s.scaling.pool == pool) return &s.scaling;
  }
  return nullptr;
}

// The pool counterpart: its cluster must exist and be the caller's; its scaling block, when
// given, is checked before anything is stored and set after. `drop_scaling`: a PATCH that
// removed the block deletes the pool's policy.
Response PutPool(ApiContext& ctx, const Principal& who, const json::object& body, bool create,
                 bool drop_scaling) {
  auto parsed = ParsePoolObject(json::serialize(body), *ctx.catalog);
  if (!parsed.ok()) return ErrorResponse(parsed.error());
  const Pool& pool = parsed->pool;
  // A cluster the token cannot see is one that does not exist for it (the scope policy).
  if (auto s = ScopeCluster(who, pool.cluster); !s.ok()) return ErrorResponse(s.error());
  auto cluster = FindCluster(ctx, who, pool.cluster);
  if (!cluster.ok()) {
    return ErrorResponse(MakeError(ErrorCode::kInvalidArgument,
                                   "cluster: no cluster '" + pool.cluster + "' (create it first)"));
  }
  if (auto s = CheckTeam(ctx, pool.team); !s.ok()) return ErrorResponse(s.error());
  bool exists = false;
  if (auto old = ctx.fleet.FindPool(pool.name); old.ok()) {
    exists = true;
    if (create) {
      return ErrorResponse(
          MakeError(ErrorCode::kConflict, "pool '" + pool.name + "' exists (PUT or PATCH " +
                                              "/api/v1/pools/" + pool.name + " changes it)"));
    }
    if (!who.CanSeeCluster(old->cluster)) {
      return ErrorResponse(
          MakeError(ErrorCode::kConflict, "pool '" + pool.name + "' belongs to another cluster"));
    }
  }
  if (parsed->scaling) {
    if (!ctx.scaling) {
      return ErrorResponse(
          MakeError(ErrorCode::kUnavailable, "autoscaling is not running: no scaling block"));
    }
    if (auto s = ctx.scaling->Check(*parsed->scaling); !s.ok()) {
      return ErrorResponse(MakeError(ErrorCode::kInvalidArgument, "scaling." + s.error().message));
    }
  }
  FleetSpec spec;
  spec.clusters.push_back(std::move(cluster.value()));
  spec.pools.push_back(pool);
  if (auto done = ctx.fleet.Apply(spec); !done.ok()) return ErrorResponse(done.error());
  if (parsed->scaling) {
    if (auto s = ctx.scaling->SetPolicy(*parsed->scaling, who.name); !s.ok()) {
      return ErrorResponse(s.error());
    }
  } else if (drop_scaling && ctx.scaling) {
    (void)ctx.scaling->DeletePolicy(pool.name, who.name);  // none: fine
  }
  return PoolReply(ctx, exists ? 200 : 201, pool.name);
}

// GET /api/v1/clusters
Response GetClusters(ApiContext& ctx, const Request& req, const Principal& who) {
  auto page = ParsePage(req);
  if (!page.ok()) return ErrorResponse(page.error());
  auto clusters = ctx.fleet.Clusters();
  if (!clusters.ok()) return ErrorResponse(clusters.error());
  auto counts = CountBy(ctx, ctx.fleet.Nodes({}), false);
  json::array items;
  for (const auto& c : clusters.value()) {
    if (!who.CanSeeCluster(c.name)) continue;
    if (auto t = req.query.find("type"); t != req.query.end() && t->second != ToString(c.type))
      continue;
    items.push_back(WithCounts(ToJson(c), counts[c.name]));
  }
  return ListResponse(std::move(items), page.value());
}

// GET /api/v1/clusters/{name}
Response GetClustersName(ApiContext& ctx, const Request& req, const Principal& who) {
  auto clusters = ctx.fleet.Clusters();
  if (!clusters.ok()) return ErrorResponse(clusters.error());
  const std::string& name = req.params.at("name");
  for (const auto& c : clusters.value()) {
    if (c.name != name || !who.CanSeeCluster(c.name)) continue;
    NodeFilter f;
    f.cluster = name;
    auto counts = CountBy(ctx, ctx.fleet.Nodes(f), false);
    return ObjectResponse(200, WithCounts(ToJson(c), counts[name]));
  }
  return ErrorResponse(MakeError(ErrorCode::kNotFound, "no cluster '" + name + "'"));
}

// GET /api/v1/pools
Response GetPools(ApiContext& ctx, const Request& req, const Principal& who) {
  auto page = ParsePage(req);
  if (!page.ok()) return ErrorResponse(page.error());
  auto pools = ctx.fleet.Pools();
  if (!pools.ok()) return ErrorResponse(pools.error());
  auto counts = CountBy(ctx, ctx.fleet.Nodes({}), true);
  auto cluster = req.query.find("cluster");
  json::array items;
  for (const auto& p : pools.value()) {
    if (!who.CanSeeCluster(p.cluster)) continue;
    if (cluster != req.query.end() && cluster->second != p.cluster) continue;
    items.push_back(WithCounts(ToJson(p), counts[p.name]));
  }
  return ListResponse(std::move(items), page.value());
}

// GET /api/v1/pools/{name}
Response GetPoolsName(ApiContext& ctx, const Request& req, const Principal& who) {
  auto pool = ctx.fleet.FindPool(req.params.at("name"));
  if (!pool.ok() || !who.CanSeeCluster(pool->cluster)) {
    return ErrorResponse(
        MakeError(ErrorCode::kNotFound, "no pool '" + req.params.at("name") + "'"));
  }
  NodeFilter f;
  f.pool = pool->name;
  auto counts = CountBy(ctx, ctx.fleet.Nodes(f), true);
  return ObjectResponse(200, WithCounts(ToJson(pool.value()), counts[pool->name]));
}

// POST /api/v1/clusters
Response PostClusters(ApiContext& ctx, const Request& req, const Principal& who) {
  auto body = BodyObject(req);
  Response r = body.ok() ? PutCluster(ctx, who, body.value(), true) : ErrorResponse(body.error());
  if (body.ok() && body->contains("name") && body->at("name").is_string()) {
    r.audit_target = "cluster/" + std::string(body->at("name").as_string());
  }
  if (r.status < 300) r.audit_after = r.body;
  return r;
}

// DELETE /api/v1/clusters/{name}
Response DeleteClustersName(ApiContext& ctx, const Request& req, const Principal& who) {
  const std::string& name = req.params.at("name");
  auto before = FindCluster(ctx, who, name);
  Response r = [&] {
    if (!before.ok()) return ErrorResponse(before.error());
    auto pools = ctx.fleet.Pools();
    if (!pools.ok()) return ErrorResponse(pools.error());
    std::string held;
    for (const auto& p : pools.value()) {
      if (p.cluster == name) held += (held.empty() ? "" : ", ") + p.name;
    }
    if (!held.empty()) {
      return ErrorResponse(MakeError(ErrorCode::kConflict, "cluster '" + name + "' has pools (" +
                                                               held + "): delete them first"));
    }
    if (auto s = ctx.fleet.Prune({{}, {name}}); !s.ok()) return ErrorResponse(s.error());
    return ObjectResponse(200, {{"name", name}, {"deleted", true}});
  }();
  r.audit_target = "cluster/" + name;
  if (before.ok()) r.audit_before = ClusterObject(before.value());
  return r;
}

// POST /api/v1/pools
Response PostPools(ApiContext& ctx, const Request& req, const Principal& who) {
  auto body = BodyObject(req);
  Response r =
      body.ok() ? PutPool(ctx, who, body.value(), true, false) : ErrorResponse(body.error());
  if (body.ok() && body->contains("name") && body->at("name").is_string()) {
    r.audit_target = "pool/" + std::string(body->at("name").as_string());
  }
  if (r.status < 300) r.audit_after = r.body;
  return r;
}

}  // namespace

// A pool can be deleted (by DELETE or an apply --prune) only with no job queued or running.
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

namespace {

// PUT replaces a cluster with the body; PATCH merges the body into the one stored (404 when
// there is none). Both then go through PutCluster.
Response WriteCluster(ApiContext& ctx, const Request& req, const Principal& who, bool patch) {
  const std::string& name = req.params.at("name");
  auto before = FindCluster(ctx, who, name);
  Response r = [&] {
    if (patch && !before.ok()) return ErrorResponse(before.error());
    if (!who.CanSeeCluster(name)) {
      return ErrorResponse(
          MakeError(ErrorCode::kPermissionDenied,
                    "token '" + who.name + "' may not change cluster '" + name + "'"));
    }
    auto body = BodyObject(req);
    if (!body.ok()) return ErrorResponse(body.error());
    json::value object = patch ? MergePatch(json::parse(ClusterObject(*before)), *body)
                               : json::value(std::move(*body));
    if (auto s = NameFromPath(object.as_object(), name, "cluster"); !s.ok()) {
      return ErrorResponse(s.error());
    }
    return PutCluster(ctx, who, object.as_object(), false);
  }();
  r.audit_target = "cluster/" + name;
  if (before.ok()) r.audit_before = ClusterObject(before.value());
  if (r.status < 300) r.audit_after = r.body;
  return r;
}

// The pool as it is stored, in its REST form, with its scaling block; "" when there is none.
std::string PoolObject(ApiContext& ctx, const Principal& who, const std::string& name) {
  auto pool = ctx.fleet.FindPool(name);
  if (!pool.ok() || !who.CanSeeCluster(pool->cluster)) return "";
  std::vector<scaling::PoolStatus> policies;
  if (ctx.scaling) policies = ctx.scaling->Pools();
  return PoolObjectText(pool.value(), PolicyOf(policies, name));
}

// PUT replaces a pool with the body; PATCH merges the body into the one stored (404 when there
// is none), where "scaling": null deletes its policy. Both then go through PutPool.
Response WritePool(ApiContext& ctx, const Request& req, const Principal& who, bool patch) {
  const std::string& name = req.params.at("name");
  std::string before = PoolObject(ctx, who, name);
  Response r = [&] {
    // Empty: none, or one of a cluster the token may not see.
    if (before.empty() && (patch || ctx.fleet.FindPool(name).ok())) {
      return ErrorResponse(MakeError(ErrorCode::kNotFound, "no pool '" + name + "'"));
    }
    auto body = BodyObject(req);
    if (!body.ok()) return ErrorResponse(body.error());
    bool drop = patch && body->contains("scaling") && body->at("scaling").is_null();
    json::value object =
        patch ? MergePatch(json::parse(before), *body) : json::value(std::move(*body));
    if (auto s = NameFromPath(object.as_object(), name, "pool"); !s.ok()) {
      return ErrorResponse(s.error());
    }
    return PutPool(ctx, who, object.as_object(), false, drop);
  }();
  r.audit_target = "pool/" + name;
  r.audit_before = before;
  if (r.status < 300) r.audit_after = r.body;
  return r;
}

// DELETE /api/v1/pools/{name}
Response DeletePool(ApiContext& ctx, const Request& req, const Principal& who) {
  const std::string& name = req.params.at("name");
  std::string before = PoolObject(ctx, who, name);
  Response r = [&] {
    if (before.empty()) {
      return ErrorResponse(MakeError(ErrorCode::kNotFound, "no pool '" + name + "'"));
    }
    NodeFilter f;
    f.pool = name;
    if (size_t n = ctx.fleet.Nodes(f).size(); n > 0) {
      return ErrorResponse(MakeError(
          ErrorCode::kConflict, "cannot delete pool " + name + ": it has " + std::to_string(n) +
                                    " node(s) (decommission and delete them first)"));
    }
    if (auto s = RequirePoolsIdle(ctx, {name}); !s.ok()) {
      return ErrorResponse(s.error());
    }
    if (auto s = ctx.fleet.Prune({{name}, {}}); !s.ok()) {
      return ErrorResponse(s.error());
    }
    if (ctx.scaling) (void)ctx.scaling->DeletePolicy(name, who.name);  // none: fine
    return ObjectResponse(200, {{"name", name}, {"deleted", true}});
  }();
  r.audit_target = "pool/" + name;
  r.audit_before = before;
  return r;
}

}  // namespace

void AddClusterRoutes(Router& router, ApiContext& ctx) {
  router.Add(
      "GET", "/api/v1/clusters", Role::kViewer,
      [&ctx](const Request& req, const Principal& who) { return GetClusters(ctx, req, who); });
  router.Scoped(Scope::kClusters);

  router.Add(
      "GET", "/api/v1/clusters/{name}", Role::kViewer,
      [&ctx](const Request& req, const Principal& who) { return GetClustersName(ctx, req, who); });
  router.Scoped(Scope::kClusters, ScopeObject::kCluster);

  router.Add("GET", "/api/v1/pools", Role::kViewer,
             [&ctx](const Request& req, const Principal& who) { return GetPools(ctx, req, who); });
  router.Scoped(Scope::kClusters);

  router.Add(
      "GET", "/api/v1/pools/{name}", Role::kViewer,
      [&ctx](const Request& req, const Principal& who) { return GetPoolsName(ctx, req, who); });
  router.Scoped(Scope::kClusters, ScopeObject::kPool);

  router.Add(
      "POST", "/api/v1/clusters", Role::kOperator,
      [&ctx](const Request& req, const Principal& who) { return PostClusters(ctx, req, who); });
  router.Scoped(Scope::kClusters);

  router.Add("PUT", "/api/v1/clusters/{name}", Role::kOperator,
             [&ctx](const Request& req, const Principal& who) {
               return WriteCluster(ctx, req, who, false);
             });
  router.Scoped(Scope::kClusters, ScopeObject::kCluster);
  router.Add("PATCH", "/api/v1/clusters/{name}", Role::kOperator,
             [&ctx](const Request& req, const Principal& who) {
               return WriteCluster(ctx, req, who, true);
             });
  router.Scoped(Scope::kClusters, ScopeObject::kCluster);

  router.Add("DELETE", "/api/v1/clusters/{name}", Role::kOperator,
             [&ctx](const Request& req, const Principal& who) {
               return DeleteClustersName(ctx, req, who);
             });
  router.Scoped(Scope::kClusters, ScopeObject::kCluster);

  router.Add("POST", "/api/v1/pools", Role::kOperator,
             [&ctx](const Request& req, const Principal& who) { return PostPools(ctx, req, who); });
  router.Scoped(Scope::kClusters);

  router.Add(
      "PUT", "/api/v1/pools/{name}", Role::kOperator,
      [&ctx](const Request& req, const Principal& who) { return WritePool(ctx, req, who, false); });
  router.Scoped(Scope::kClusters);
  router.Add(
      "PATCH", "/api/v1/pools/{name}", Role::kOperator,
      [&ctx](const Request& req, const Principal& who) { return WritePool(ctx, req, who, true); });
  router.Scoped(Scope::kClusters, ScopeObject::kPool);

  router.Add(
      "DELETE", "/api/v1/pools/{name}", Role::kOperator,
      [&ctx](const Request& req, const Principal& who) { return DeletePool(ctx, req, who); });
  router.Scoped(Scope::kClusters, ScopeObject::kPool);

  router.Add("GET", "/api/v1/gpu-models", Role::kViewer,
             [&ctx](const Request& req, const Principal&) {
               auto page = ParsePage(req);
               if (!page.ok()) return ErrorResponse(page.error());
               json::array items;
               for (const auto& m : ctx.catalog->models()) items.push_back(ToJson(m));
               return ListResponse(std::move(items), page.value());
             });
  router.Scoped(Scope::kAny);

  router.Add("GET", "/api/v1/gpu-models/{id}", Role::kViewer,
             [&ctx](const Request& req, const Principal&) {
               const GpuModelSpec* m = ctx.catalog->Find(req.params.at("id"));
               if (!m)
                 return ErrorResponse(
                     MakeError(ErrorCode::kNotFound, "no GPU model '" + req.params.at("id") + "'"));
               return ObjectResponse(200, ToJson(*m));
             });
  router.Scoped(Scope::kAny);
}

}  // namespace gpufleet::api
