// One cluster or pool of the fleet file as a JSON object (the API's /clusters and /pools
// bodies), read by the same rules as the file.

#include <yaml-cpp/yaml.h>

#include <cctype>

#include "common/strings.h"
#include "config/fleet_spec.h"
#include "config/fleet_yaml.h"
#include "model/yaml_input.h"

namespace gpufleet {

namespace {

constexpr std::string_view kBody = "body";

// "body:1: clusters[0].pools[0].size: 9 is out of range" -> "size: 9 is out of range": an
// object's errors name its fields from its root, and its one line is no help.
Error FromObjectRoot(const Error& e, std::string_view prefix) {
  std::string m = e.message;
  if (m.rfind(kBody, 0) == 0) {
    size_t at = kBody.size();
    if (at < m.size() && m[at] == ':') ++at;
    while (at < m.size() && std::isdigit(static_cast<unsigned char>(m[at]))) ++at;
    if (at < m.size() && m[at] == ':') ++at;
    if (at < m.size() && m[at] == ' ') ++at;
    m = m.substr(at);
  }
  std::string p(prefix);
  if (m.rfind(p + ".", 0) == 0) {
    m = m.substr(p.size() + 1);
  } else if (m.rfind(p + ": ", 0) == 0) {
    m = m.substr(p.size() + 2);
  }
  return MakeError(e.code, m);
}

Result<YAML::Node> LoadObject(std::string_view json) {
  auto loaded = LoadYamlInput(json, kBody);
  if (!loaded.ok()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "the body is not a JSON object: " + loaded.error().message);
  }
  YAML::Node n = std::move(loaded).value();
  if (!n.IsMap()) return MakeError(ErrorCode::kInvalidArgument, "the body must be a JSON object");
  return n;
}

YAML::Node FleetOf(const YAML::Node& cluster) {
  YAML::Node root;
  root["apiVersion"] = "gpufleet/v1";
  root["kind"] = "Fleet";
  root["clusters"].push_back(cluster);
  return root;
}

// The YAML of WriteFleetSpec back as JSON text, at `path` ("clusters" [0], then "pools" [0]).
std::string ObjectText(const FleetSpec& spec, bool pool) {
  YAML::Node n = YAML::Load(WriteFleetSpec(spec))["clusters"][0];
  if (pool) {
    n = n["pools"][0];
  } else {
    n.remove("pools");
  }
  std::string out;
  YamlToJson(n, out);
  return out;
}

}  // namespace

Result<Cluster> ParseClusterObject(std::string_view json, const GpuCatalog& catalog) {
  YAML::Node obj;
  GF_TRY_ASSIGN(obj, LoadObject(json));
  if (obj["pools"]) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "pools: a cluster's pools are created through /api/v1/pools");
  }
  auto spec = ParseFleetRoot(FleetOf(obj), kBody, catalog);
  if (!spec.ok()) return FromObjectRoot(spec.error(), "clusters[0]");
  return std::move(spec->clusters.front());
}

Result<PoolObject> ParsePoolObject(std::string_view json, const GpuCatalog& catalog) {
  YAML::Node obj;
  GF_TRY_ASSIGN(obj, LoadObject(json));
  auto c = obj["cluster"];
  if (!c) return MakeError(ErrorCode::kInvalidArgument, "cluster: is required");
  if (!c.IsScalar()) return MakeError(ErrorCode::kInvalidArgument, "cluster: must be a string");
  std::string cluster = c.as<std::string>();
  obj.remove("cluster");
  // The pool inside a stand-in cluster of that name: only the pool is kept.
  YAML::Node holder;
  holder["name"] = cluster;
  holder["type"] = "training";
  holder["site"] = "-";
  holder["pools"].push_back(obj);
  auto spec = ParseFleetRoot(FleetOf(holder), kBody, catalog);
  if (!spec.ok()) {
    Error e = FromObjectRoot(spec.error(), "clusters[0].pools[0]");
    if (e.message.rfind("clusters[0].name", 0) == 0) {
      e.message = "cluster" + e.message.substr(16);
    }
    return e;
  }
  PoolObject out;
  out.pool = std::move(spec->pools.front());
  if (!spec->scaling.empty()) out.scaling = std::move(spec->scaling.front());
  return out;
}

std::string ClusterObject(const Cluster& cluster) {
  FleetSpec spec;
  spec.clusters.push_back(cluster);
  return ObjectText(spec, false);
}

std::string PoolObjectText(const Pool& pool, const PoolScaling* scaling) {
  FleetSpec spec;
  Cluster holder;
  holder.name = pool.cluster;
  spec.clusters.push_back(holder);
  spec.pools.push_back(pool);
  if (scaling) spec.scaling.push_back(*scaling);
  std::string out = ObjectText(spec, true);
  // With the cluster it belongs to, first: the REST form of a pool names it.
  return "{\"cluster\":" + [&] {
    std::string q;
    AppendJsonString(q, pool.cluster);
    return q;
  }() + (out.size() > 2 ? "," + out.substr(1) : "}");
}

}  // namespace gpufleet
