// What the dashboard needs beyond the resource routes: GET /api/v1/whoami (who the token is, so
// the page can hide what the role may not do) and GET /api/v1/heatmap (one field of every GPU
// of a cluster, packed: the heatmap of 10,000 GPUs in one small reply).

#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>

#include "alerting/eval.h"
#include "api/json_util.h"
#include "api/peers.h"
#include "api/scope.h"

namespace json = boost::json;

namespace gpufleet::api {
namespace {

// A heatmap field: a telemetry field as stored, or one derived for the heatmap.
struct HeatField {
  std::string name;
  std::string label;
  std::string unit;
  std::optional<Field> field;  // a stored field; absent for health and memory
  double scale = 1;            // stored value x scale = shown value (mW -> W)
  double min = 0, max = NAN;   // the colour scale's bounds; NaN: the data's maximum
};

std::optional<HeatField> ParseHeatField(const std::string& name) {
  if (name == "health") return HeatField{"health", "Health", "", std::nullopt, 1, 0, 2};
  if (name == "allocation") {
    return HeatField{"allocation", "Allocation", "", std::nullopt, 1, 0, 1};
  }
  if (name == "memory") return HeatField{"memory", "Memory used", "%", std::nullopt, 1, 0, 100};
  if (name == "gpu_util" || name.empty()) {
    return HeatField{"gpu_util", "Utilization", "%", Field::kGpuUtil, 1, 0, 100};
  }
  if (name == "gpu_temp") {
    return HeatField{"gpu_temp", "Temperature", "°C", Field::kGpuTemp, 1, 20, 95};
  }
  if (name == "power_usage") {
    return HeatField{"power_usage", "Power", "W", Field::kPowerUsage, 0.001, 0, NAN};
  }
  auto f = ParseField(name);
  if (!f) return std::nullopt;
  const FieldInfo& info = Info(*f);
  return HeatField{name, name, std::string(info.unit), *f, 1, 0, NAN};
}

struct HeatNode {
  std::string name, pool, model, state;
  bool simulated = false;
  std::vector<std::string> uuids;  // by GPU position in the node
};

// The cluster and pool asked for, within the token's clusters (a cluster it may not see is
// not found).
Result<NodeFilter> HeatFilter(ApiContext& ctx, const Request& req, const Principal& who) {
  NodeFilter filter;
  filter.cluster = req.Param("cluster");
  filter.pool = req.Param("pool");
  filter.clusters = who.clusters;
  if (!filter.cluster.empty()) {
    auto clusters = ctx.fleet.Clusters();
    if (!clusters.ok()) return clusters.error();
    bool known = std::any_of(clusters->begin(), clusters->end(), [&](const Cluster& c) {
      return c.name == filter.cluster && who.CanSeeCluster(c.name);
    });
    if (!known) {
      return MakeError(ErrorCode::kNotFound, "no cluster '" + filter.cluster + "'");
    }
  }
  return filter;
}

// The nodes, grouped by pool, then by name: the rows a person scans.
std::vector<HeatNode> HeatNodes(ApiContext& ctx, const NodeFilter& filter) {
  std::vector<HeatNode> nodes;
  ctx.fleet.ForEachNode(filter, [&](const Node& n) {
    HeatNode h{n.name,
               n.pool,
               n.gpus.empty() ? "" : n.gpus.front().model,
               std::string(ToString(n.state)),
               n.simulated,
               {}};
    for (const auto& g : n.gpus) h.uuids.push_back(g.uuid);
    nodes.push_back(std::move(h));
  });
  std::stable_sort(nodes.begin(), nodes.end(), [](const HeatNode& a, const HeatNode& b) {
    return a.pool != b.pool ? a.pool < b.pool : a.name < b.name;
  });

  return nodes;
}

// One value per GPU, in node order (NaN: none).
Result<std::vector<double>> HeatValues(ApiContext& ctx, const HeatField& field,
                                       const NodeFilter& filter,
                                       const std::vector<HeatNode>& nodes) {
  std::vector<const std::string*> uuids;
  for (const auto& n : nodes) {
    for (const auto& u : n.uuids) uuids.push_back(&u);
  }
  std::vector<double> values(uuids.size(), NAN);
  if (field.name == "allocation") {
    if (!ctx.jobs) return MakeError(ErrorCode::kUnavailable, "jobs are not running");
    auto allocation = ctx.jobs->Allocation();  // node -> job id per GPU index
    size_t v = 0;
    for (const auto& n : nodes) {
      auto it = allocation.find(n.name);
      for (size_t i = 0; i < n.uuids.size(); ++i, ++v) {
        bool held = it != allocation.end() && i < it->second.size() && it->second[i] != 0;
        values[v] = held ? 1 : 0;
      }
    }
  } else if (field.name == "health") {
    if (!ctx.health) {
      return MakeError(ErrorCode::kUnavailable, "the health model is not running");
    }
    std::map<std::string, double> level;  // by UUID
    for (const auto& n : ctx.health->Reports(filter)) {
      for (const auto& g : n.gpus) level[g.uuid] = static_cast<double>(g.level);
    }
    for (size_t i = 0; i < uuids.size(); ++i) {
      auto it = level.find(*uuids[i]);
      if (it != level.end()) values[i] = it->second;
    }
  } else {
    std::vector<TelemetryStore::GpuHandle> handles;
    ctx.telemetry.Handles(uuids, handles);
    std::vector<std::optional<tsdb::Sample>> latest;
    // Older samples count as absent, as in alert rules (Prometheus's lookback).
    int64_t stale_before = ctx.clock->NowMs() - alerting::kStalenessMs;
    auto fresh = [&](const std::optional<tsdb::Sample>& s) {
      return s && s->t >= stale_before && std::isfinite(s->v);
    };
    if (field.name == "memory") {
      std::vector<std::optional<tsdb::Sample>> free;
      ctx.telemetry.LatestMany(uuids, handles, Field::kFbUsed, latest);
      ctx.telemetry.LatestMany(uuids, handles, Field::kFbFree, free);
      for (size_t i = 0; i < uuids.size(); ++i) {
        if (fresh(latest[i]) && fresh(free[i]) && latest[i]->v + free[i]->v > 0) {
          values[i] = 100 * latest[i]->v / (latest[i]->v + free[i]->v);
        }
      }
    } else {
      ctx.telemetry.LatestMany(uuids, handles, *field.field, latest);
      for (size_t i = 0; i < uuids.size(); ++i) {
        if (fresh(latest[i])) values[i] = latest[i]->v * field.scale;
      }
    }
  }
  return values;
}

// Several controllers: the telemetry of the GPUs whose agents are connected to another one,
// from its own heatmap (local=1): a GPU without a value here takes the other's.
void FillFromPeers(ApiContext& ctx, const Request& req, const std::vector<HeatNode>& nodes,
                   std::vector<double>& values) {
  if (std::all_of(values.begin(), values.end(), [](double v) { return std::isfinite(v); })) return;
  std::map<std::pair<std::string, size_t>, double> far;  // (node, GPU index) -> value
  for (const auto& body : AskPeers(ctx, req, "/api/v1/heatmap").bodies) {
    const auto* o = body.if_object();
    const auto* rows = o ? o->if_contains("nodes") : nullptr;
    const auto* vals = o ? o->if_contains("values") : nullptr;
    if (!rows || !rows->is_array() || !vals || !vals->is_array()) continue;
    size_t at = 0;
    for (const auto& row : rows->as_array()) {
      const auto* r = row.if_array();
      if (!r || r->size() < 4 || !(*r)[0].is_string() || !(*r)[3].is_int64()) break;
      const std::string name((*r)[0].as_string());
      const auto gpus = static_cast<size_t>(std::max<int64_t>(0, (*r)[3].as_int64()));
      for (size_t i = 0; i < gpus && at < vals->as_array().size(); ++i, ++at) {
        const auto& v = vals->as_array()[at];
        if (v.is_number()) far[{name, i}] = v.to_number<double>();
      }
    }
  }
  size_t at = 0;
  for (const auto& n : nodes) {
    for (size_t i = 0; i < n.uuids.size(); ++i, ++at) {
      if (std::isfinite(values[at])) continue;
      if (auto it = far.find({n.name, i}); it != far.end()) values[at] = it->second;
    }
  }
}

// The GPUs the health model finds warning (1) or failed (2), as (place in node order, level):
// marked on the heatmap whatever field colours it.
std::vector<std::pair<size_t, int>> Unhealthy(ApiContext& ctx, const NodeFilter& filter,
                                              const std::vector<HeatNode>& nodes) {
  std::vector<std::pair<size_t, int>> out;
  if (!ctx.health) return out;
  std::unordered_map<std::string, int> level;  // by UUID, the unhealthy ones
  for (const auto& n : ctx.health->Reports(filter)) {
    for (const auto& g : n.gpus) {
      if (g.level != health::Level::kHealthy) level[g.uuid] = static_cast<int>(g.level);
    }
  }
  if (level.empty()) return out;
  size_t at = 0;
  for (const auto& n : nodes) {
    for (const auto& u : n.uuids) {
      if (auto it = level.find(u); it != level.end()) out.emplace_back(at, it->second);
      ++at;
    }
  }
  return out;
}

// The same, from the health colouring's own values (its levels): the reports are read once.
std::vector<std::pair<size_t, int>> UnhealthyFromLevels(const std::vector<double>& levels) {
  std::vector<std::pair<size_t, int>> out;
  for (size_t i = 0; i < levels.size(); ++i) {
    if (std::isfinite(levels[i]) && levels[i] >= 1)
      out.emplace_back(i, static_cast<int>(levels[i]));
  }
  return out;
}

// Written as text: pools and models once, each node as a short array, then one number per GPU
// (rounded: a colour cell needs no more), in node order, and the unhealthy GPUs' places.
std::string HeatmapJson(ApiContext& ctx, const HeatField& field, const NodeFilter& filter,
                        const std::vector<HeatNode>& nodes, const std::vector<double>& values,
                        const std::vector<std::pair<size_t, int>>& unhealthy) {
  double max = field.max;
  if (std::isnan(max)) {
    max = 1;
    for (double v : values) {
      if (std::isfinite(v)) max = std::max(max, v);
    }
  }

  std::vector<std::string> pools, models;
  auto index_of = [](std::vector<std::string>& names, const std::string& name) {
    auto it = std::find(names.begin(), names.end(), name);
    if (it != names.end()) return static_cast<int>(it - names.begin());
    names.push_back(name);
    return static_cast<int>(names.size() - 1);
  };
  std::string node_rows;
  node_rows.reserve(nodes.size() * 48);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const HeatNode& n = nodes[i];
    node_rows += i ? ",[" : "[";
    AppendJsonString(node_rows, n.name);
    node_rows += ',' + std::to_string(index_of(pools, n.pool));
    node_rows += ',' + std::to_string(index_of(models, n.model));
    node_rows += ',' + std::to_string(n.uuids.size()) + ',';
    AppendJsonString(node_rows, n.state);
    node_rows += n.simulated ? ",1]" : ",0]";
  }
  std::string out;
  out.reserve(512 + node_rows.size() + values.size() * 4);
  out += "{\"cluster\":";
  AppendJsonString(out, filter.cluster);
  out += ",\"field\":";
  AppendJsonString(out, field.name);
  out += ",\"label\":";
  AppendJsonString(out, field.label);
  out += ",\"unit\":";
  AppendJsonString(out, field.unit);
  out += ",\"min\":";
  AppendNumber(out, field.min);
  out += ",\"max\":";
  AppendNumber(out, std::round(max));
  out += ",\"time_ms\":" + std::to_string(ctx.clock->NowMs());
  out += ",\"pools\":[";
  for (size_t i = 0; i < pools.size(); ++i) {
    if (i) out += ',';
    AppendJsonString(out, pools[i]);
  }
  out += "],\"models\":[";
  for (size_t i = 0; i < models.size(); ++i) {
    if (i) out += ',';
    AppendJsonString(out, models[i]);
  }
  out += "],\"node_columns\":[\"name\",\"pool\",\"model\",\"gpus\",\"state\",\"simulated\"]";
  out += ",\"nodes\":[" + node_rows + "],\"values\":[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) out += ',';
    if (std::isfinite(values[i])) {
      AppendNumber(out, std::round(values[i]));
    } else {
      out += "null";
    }
  }
  out += "],\"unhealthy\":[";
  for (size_t i = 0; i < unhealthy.size(); ++i) {
    out += i ? ",[" : "[";
    out += std::to_string(unhealthy[i].first) + ',' + std::to_string(unhealthy[i].second) + ']';
  }
  out += "]}";
  return out;
}

Response Heatmap(ApiContext& ctx, const Request& req, const Principal& who) {
  auto hf = ParseHeatField(req.Param("field"));
  if (!hf) {
    std::string known = "health, allocation, memory";
    for (const auto& f : Fields()) known += ", " + std::string(f.name);
    return ErrorResponse(
        MakeError(ErrorCode::kInvalidArgument,
                  "unknown field '" + req.Param("field") + "' (known: " + known + ")"));
  }
  auto filter = HeatFilter(ctx, req, who);
  if (!filter.ok()) return ErrorResponse(filter.error());
  std::vector<HeatNode> nodes = HeatNodes(ctx, filter.value());
  auto values = HeatValues(ctx, *hf, filter.value(), nodes);
  if (!values.ok()) return ErrorResponse(values.error());
  if (hf->name != "health" && hf->name != "allocation") FillFromPeers(ctx, req, nodes, *values);
  auto unhealthy = hf->name == "health" ? UnhealthyFromLevels(values.value())
                                        : Unhealthy(ctx, filter.value(), nodes);
  return JsonResponse(200, HeatmapJson(ctx, *hf, filter.value(), nodes, values.value(), unhealthy));
}

}  // namespace

void AddDashboardRoutes(Router& router, ApiContext& ctx) {
  router.Add("GET", "/api/v1/whoami", Role::kViewer, [](const Request&, const Principal& who) {
    json::array clusters;
    for (const auto& c : who.clusters) clusters.push_back(json::value(c));
    return ObjectResponse(
        200, {{"name", who.name}, {"role", ToString(who.role)}, {"clusters", std::move(clusters)}});
  });
  router.Scoped(Scope::kAny);
  router.Add("GET", "/api/v1/heatmap", Role::kViewer,
             [&ctx](const Request& req, const Principal& who) { return Heatmap(ctx, req, who); });
  router.Scoped(Scope::kClusters);
}

}  // namespace gpufleet::api
