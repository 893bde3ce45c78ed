// gpufleet diff and apply --prune: what a fleet file would change against the store, and the
// deletion of the pools and clusters it no longer names.

#include <algorithm>
#include <boost/json.hpp>
#include <map>
#include <set>

#include "common/json_text.h"
#include "fleet/fleet.h"
#include "model/json.h"

namespace json = boost::json;

namespace gpufleet {
namespace {

// Every leaf of `v` by its dotted path ("lifecycle.requires.cuda"); arrays are leaves, kept
// whole as JSON text. The times the store sets are left out: a file cannot change them.
void Flatten(const json::value& v, const std::string& at, std::map<std::string, std::string>& out) {
  if (const auto* o = v.if_object()) {
    for (const auto& [key, value] : *o) {
      const std::string path = at.empty() ? std::string(key) : at + "." + std::string(key);
      if (path == "created_at" || path == "updated_at" || path == "updated_ms") continue;
      Flatten(value, path, out);
    }
    // An empty object (labels: {}) is a leaf, so that gaining its first key shows as a change.
    if (o->empty() && !at.empty()) out[at] = "{}";
    return;
  }
  out[at] = JsonText(v);
}

std::vector<FleetChange::Field> Fields(const json::object& before, const json::object& after) {
  std::map<std::string, std::string> a, b;
  Flatten(before, "", a);
  Flatten(after, "", b);
  std::set<std::string> keys;
  for (const auto& [k, _] : a) keys.insert(k);
  for (const auto& [k, _] : b) keys.insert(k);
  std::vector<FleetChange::Field> out;
  for (const auto& k : keys) {
    auto x = a.find(k), y = b.find(k);
    std::string from = x == a.end() ? "" : x->second, to = y == b.end() ? "" : y->second;
    if (from != to) out.push_back({k, from, to});
  }
  return out;
}

// One kind's changes: `have` by name against `want` in the file.
template <class T>
void DiffKind(const std::string& kind, const std::vector<T>& have, const std::vector<T>& want,
              std::vector<FleetChange>& out) {
  std::map<std::string, const T*> old;
  for (const auto& h : have) old[h.name] = &h;
  std::set<std::string> named;
  std::vector<FleetChange> changes;
  for (const auto& w : want) {
    named.insert(w.name);
    auto it = old.find(w.name);
    if (it == old.end()) {
      changes.push_back({kind, w.name, "create", Fields({}, ToJson(w))});
      continue;
    }
    auto fields = Fields(ToJson(*it->second), ToJson(w));
    if (!fields.empty()) changes.push_back({kind, w.name, "update", std::move(fields)});
  }
  for (const auto& [name, h] : old) {
    if (!named.count(name)) changes.push_back({kind, name, "delete", Fields(ToJson(*h), {})});
  }
  std::sort(changes.begin(), changes.end(),
            [](const FleetChange& a, const FleetChange& b) { return a.name < b.name; });
  out.insert(out.end(), changes.begin(), changes.end());
}

}  // namespace

std::vector<FleetChange> DiffFleet(const std::vector<Cluster>& clusters,
                                   const std::vector<Pool>& pools, const FleetSpec& spec) {
  std::vector<FleetChange> out;
  DiffKind("cluster", clusters, spec.clusters, out);
  DiffKind("pool", pools, spec.pools, out);
  return out;
}

std::vector<FleetChange::Field> DiffJson(const std::string& before, const std::string& after) {
  auto object = [](const std::string& text) {
    boost::system::error_code ec;
    json::value v = text.empty() ? json::value(json::object()) : json::parse(text, ec);
    return v.is_object() ? v.as_object() : json::object();
  };
  return Fields(object(before), object(after));
}

std::vector<FleetChange> DiffScaling(const std::vector<PoolScaling>& have, const FleetSpec& spec) {
  auto object = [](const PoolScaling& s) {
    boost::system::error_code ec;
    json::value v = json::parse(PoolScalingJson(s), ec);
    return v.is_object() ? v.as_object() : json::object();
  };
  std::map<std::string, const PoolScaling*> old;
  for (const auto& h : have) old[h.pool] = &h;
  std::set<std::string> named;
  for (const auto& p : spec.pools) named.insert(p.name);
  std::vector<FleetChange> out;
  for (const auto& w : spec.scaling) {
    auto it = old.find(w.pool);
    if (it == old.end()) {
      out.push_back({"scaling", w.pool, "create", Fields({}, object(w))});
      continue;
    }
    auto fields = Fields(object(*it->second), object(w));
    if (!fields.empty()) out.push_back({"scaling", w.pool, "update", std::move(fields)});
  }
  // A policy goes with its pool (apply --prune); a pool the file names without a scaling block
  // keeps the one it has.
  for (const auto& [pool, h] : old) {
    if (!named.count(pool)) out.push_back({"scaling", pool, "delete", Fields(object(*h), {})});
  }
  std::sort(out.begin(), out.end(),
            [](const FleetChange& a, const FleetChange& b) { return a.name < b.name; });
  return out;
}

Result<std::vector<FleetChange>> FleetService::Diff(const FleetSpec& spec) {
  auto clusters = store_.ListClusters();
  if (!clusters.ok()) return clusters.error();
  auto pools = store_.ListPools();
  if (!pools.ok()) return pools.error();
  return DiffFleet(clusters.value(), pools.value(), spec);
}

Result<PrunePlan> FleetService::PlanPrune(const FleetSpec& spec) {
  PrunePlan plan;
  auto changes = Diff(spec);
  if (!changes.ok()) return changes.error();
  for (const auto& c : changes.value()) {
    if (c.action != "delete") continue;
    (c.kind == "pool" ? plan.pools : plan.clusters).push_back(c.name);
  }
  std::map<std::string, int> nodes;
  {
    std::lock_guard lock(mu_);
    for (const auto& [_, e] : nodes_) {
      if (std::find(plan.pools.begin(), plan.pools.end(), e.node.pool) != plan.pools.end()) {
        ++nodes[e.node.pool];
      }
    }
  }
  if (!nodes.empty()) {
    std::string why;
    for (const auto& [pool, n] : nodes) {
      why += (why.empty() ? "" : "; ") + std::string("pool ") + pool + " has " + std::to_string(n) +
             " node(s)";
    }
    return MakeError(ErrorCode::kConflict,
                     "cannot prune: " + why +
                         " (decommission and delete them first, or keep the pool in the file)");
  }
  return plan;
}

Status FleetService::Prune(const PrunePlan& plan) {
  if (plan.pools.empty() && plan.clusters.empty()) return {};
  std::lock_guard lock(mu_);  // no node registers into a pool while it goes
  for (const auto& [_, e] : nodes_) {
    if (std::find(plan.pools.begin(), plan.pools.end(), e.node.pool) != plan.pools.end()) {
      return MakeError(ErrorCode::kConflict, "cannot prune: pool " + e.node.pool + " gained node " +
                                                 e.node.name + " meanwhile");
    }
  }
  std::lock_guard topology(topology_mu_);
  GF_TRY(store_.DeleteFleet(plan.pools, plan.clusters));
  topology_.reset();
  return {};
}

}  // namespace gpufleet
