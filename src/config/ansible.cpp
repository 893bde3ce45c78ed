// gpufleet export --format ansible: the fleet as an Ansible inventory in YAML.

#include <boost/json.hpp>
#include <map>
#include <set>

#include "config/fleet_spec.h"
#include "model/compat.h"

namespace json = boost::json;

namespace gpufleet {
namespace {

// Ansible's group names are letters, digits and underscores: "train-use1" -> "train_use1".
std::string Group(const std::string& prefix, const std::string& name) {
  std::string out = prefix + "_";
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    out += ok ? static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c) : '_';
  }
  return out;
}

// One mapping on one line, in JSON's flow syntax (which is YAML): no value reads back as
// another type.
std::string Flow(const json::object& o) { return json::serialize(o); }

void Children(std::string& out, const std::set<std::string>& groups) {
  out += "      children:\n";
  for (const auto& g : groups) out += "        " + g + ":\n";
}

// A host's variables: what its agent reports.
json::object HostVars(const Node& n) {
  json::object h;
  if (!n.facts.hostname.empty()) h["ansible_host"] = n.facts.hostname;
  h["gpufleet_state"] = std::string(ToString(n.state));
  h["gpufleet_simulated"] = n.simulated;
  h["gpufleet_gpu_count"] = n.gpus.size();
  h["gpufleet_driver"] = n.facts.driver_version;
  h["gpufleet_cuda_driver"] = n.facts.cuda_driver_version;
  h["gpufleet_container_toolkit"] = n.facts.container_toolkit;
  h["gpufleet_kernel"] = n.facts.kernel;
  h["gpufleet_os"] = n.facts.os;
  if (!n.facts.labels.empty()) {
    json::object labels;
    for (const auto& [k, v] : n.facts.labels) labels[k] = v;
    h["gpufleet_node_labels"] = std::move(labels);
  }
  json::array serials;
  for (const auto& g : n.gpus) serials.push_back(json::string(g.serial));
  h["gpufleet_gpu_serials"] = std::move(serials);
  return h;
}

}  // namespace

std::string WriteAnsibleInventory(const FleetSpec& spec, const std::vector<Node>& nodes) {
  std::map<std::string, const Cluster*> clusters;
  for (const auto& c : spec.clusters) clusters[c.name] = &c;
  std::map<std::string, std::set<std::string>> sites, models;
  std::map<std::string, std::set<std::string>> cluster_pools;
  for (const auto& p : spec.pools) {
    auto c = clusters.find(p.cluster);
    if (c == clusters.end()) continue;
    cluster_pools[p.cluster].insert(Group("pool", p.name));
    models[Group("model", p.gpu_model)].insert(Group("pool", p.name));
  }
  for (const auto& c : spec.clusters) sites[Group("site", c.site)].insert(Group("cluster", c.name));

  std::string out =
      "# The gpufleet inventory (gpufleet export --format ansible): a group per site, cluster,\n"
      "# pool and GPU model; host variables gpufleet_* are what each node's agent reports, pool\n"
      "# variables its profile.\n"
      "all:\n  children:\n";
  for (const auto& [site, members] : sites) {
    out += "    " + site + ":\n";
    Children(out, members);
  }
  for (const auto& [model, members] : models) {
    out += "    " + model + ":\n";
    Children(out, members);
  }
  for (const auto& c : spec.clusters) {
    out += "    " + Group("cluster", c.name) + ":\n";
    out += "      vars: " +
           Flow({{"gpufleet_cluster", c.name},
                 {"gpufleet_cluster_type", std::string(ToString(c.type))},
                 {"gpufleet_site", c.site}}) +
           "\n";
    if (auto p = cluster_pools.find(c.name); p != cluster_pools.end()) Children(out, p->second);
  }
  std::map<std::string, std::vector<const Node*>> by_pool;
  for (const auto& n : nodes) by_pool[n.pool].push_back(&n);
  for (const auto& p : spec.pools) {
    auto c = clusters.find(p.cluster);
    if (c == clusters.end()) continue;
    CompatNeeds needs = EffectiveNeeds(*c->second, p);
    json::object vars{{"gpufleet_pool", p.name},
                      {"gpufleet_gpu_model", p.gpu_model},
                      {"gpufleet_gpus_per_node", p.gpus_per_node},
                      {"gpufleet_tier", needs.tier}};
    if (!needs.driver_branch.empty()) vars["gpufleet_driver_branch"] = needs.driver_branch;
    if (!needs.cuda.empty()) vars["gpufleet_cuda_required"] = needs.cuda;
    if (!needs.gpu_operator.empty()) vars["gpufleet_gpu_operator"] = needs.gpu_operator;
    if (!needs.kubernetes.empty()) vars["gpufleet_kubernetes"] = needs.kubernetes;
    if (!p.labels.empty()) {
      json::object labels;
      for (const auto& [k, v] : p.labels) labels[k] = v;
      vars["gpufleet_labels"] = std::move(labels);
    }
    out += "    " + Group("pool", p.name) + ":\n";
    out += "      vars: " + Flow(vars) + "\n";
    auto hosts = by_pool.find(p.name);
    if (hosts == by_pool.end()) continue;
    out += "      hosts:\n";
    for (const Node* n : hosts->second) {
      out += "        " + n->name + ": " + Flow(HostVars(*n)) + "\n";
    }
  }
  return out;
}

}  // namespace gpufleet
