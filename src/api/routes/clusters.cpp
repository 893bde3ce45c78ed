// Clusters, pools and the GPU model catalogue (read-only; they change through /apply).

#include "api/json_util.h"
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

}  // namespace

void AddClusterRoutes(Router& router, ApiContext& ctx) {
  // Public: says whether this controller can serve, not what it holds. A store that does not
  // answer makes it 503, so a load balancer or a supervisor sees it.
  router.Add(
      "GET", "/healthz", Role::kViewer,
      [&ctx](const Request&, const Principal&) {
        json::object o;
        json::object store{{"backend", ctx.store.database->backend()}};
        auto ping = ctx.store.database->Ping();
        store["ok"] = ping.ok();
        // Not the error itself: it names the database's host, and this route is public.
        if (!ping.ok()) store["error"] = "the store does not answer";
        o["status"] = ping.ok() ? "ok" : "unavailable";
        o["store"] = std::move(store);
        return JsonResponse(ping.ok() ? 200 : 503, json::serialize(o));
      },
      /*public_route=*/true);

  router.Add("GET", "/api/v1/clusters", Role::kViewer,
             [&ctx](const Request& req, const Principal& who) {
               auto page = ParsePage(req);
               if (!page.ok()) return ErrorResponse(page.error());
               auto clusters = ctx.fleet.Clusters();
               if (!clusters.ok()) return ErrorResponse(clusters.error());
               auto counts = CountBy(ctx, ctx.fleet.Nodes({}), false);
               json::array items;
               for (const auto& c : clusters.value()) {
                 if (!who.CanSeeCluster(c.name)) continue;
                 if (auto t = req.query.find("type");
                     t != req.query.end() && t->second != ToString(c.type))
                   continue;
                 items.push_back(WithCounts(ToJson(c), counts[c.name]));
               }
               return ListResponse(std::move(items), page.value());
             });

  router.Add("GET", "/api/v1/clusters/{name}", Role::kViewer,
             [&ctx](const Request& req, const Principal& who) {
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
             });

  router.Add("GET", "/api/v1/pools", Role::kViewer,
             [&ctx](const Request& req, const Principal& who) {
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
             });

  router.Add("GET", "/api/v1/pools/{name}", Role::kViewer,
             [&ctx](const Request& req, const Principal& who) {
               auto pool = ctx.fleet.FindPool(req.params.at("name"));
               if (!pool.ok() || !who.CanSeeCluster(pool->cluster)) {
                 return ErrorResponse(
                     MakeError(ErrorCode::kNotFound, "no pool '" + req.params.at("name") + "'"));
               }
               NodeFilter f;
               f.pool = pool->name;
               auto counts = CountBy(ctx, ctx.fleet.Nodes(f), true);
               return ObjectResponse(200, WithCounts(ToJson(pool.value()), counts[pool->name]));
             });

  router.Add("GET", "/api/v1/gpu-models", Role::kViewer,
             [&ctx](const Request& req, const Principal&) {
               auto page = ParsePage(req);
               if (!page.ok()) return ErrorResponse(page.error());
               json::array items;
               for (const auto& m : ctx.catalog.models()) items.push_back(ToJson(m));
               return ListResponse(std::move(items), page.value());
             });

  router.Add("GET", "/api/v1/gpu-models/{id}", Role::kViewer,
             [&ctx](const Request& req, const Principal&) {
               const GpuModelSpec* m = ctx.catalog.Find(req.params.at("id"));
               if (!m)
                 return ErrorResponse(
                     MakeError(ErrorCode::kNotFound, "no GPU model '" + req.params.at("id") + "'"));
               return ObjectResponse(200, ToJson(*m));
             });
}

}  // namespace gpufleet::api
