// A list command's fleet filters checked against the fleet: a filter that names nothing is a
// mistake to say, not an empty table.

#include <cstdio>
#include <set>

#include "cli/output.h"

namespace gpufleet::cli {
namespace {

std::string Joined(const std::set<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}

bool Refuse(Globals& g, const std::string& line) {
  std::fprintf(stderr, "error: %s\n", line.c_str());
  g.exit_code = 1;
  return false;
}

}  // namespace

bool KnownFilters(Globals& g, const FleetFilter& f) {
  if (!f.cluster.empty() || !f.pool.empty() || !f.model.empty()) {
    auto pools = Call(g, "GET", "/api/v1/pools?limit=5000");
    if (!pools) return false;
    std::set<std::string> clusters, names, models;
    for (const auto& p : pools->at("items").as_array()) {
      clusters.insert(Str(p.at("cluster")));
      names.insert(Str(p.at("name")));
      models.insert(Str(p.at("gpu_model")));
    }
    if (!f.cluster.empty() && !clusters.count(f.cluster)) {
      // A cluster without pools is a cluster too.
      auto all = Call(g, "GET", "/api/v1/clusters?limit=5000");
      if (!all) return false;
      for (const auto& c : all->at("items").as_array()) clusters.insert(Str(c.at("name")));
      if (!clusters.count(f.cluster))
        return Refuse(g, "no cluster '" + f.cluster + "' (known: " + Joined(clusters) + ")");
    }
    if (!f.pool.empty() && !names.count(f.pool))
      return Refuse(g, "no pool '" + f.pool + "' (known: " + Joined(names) + ")");
    if (!f.model.empty() && !models.count(f.model))
      return Refuse(g, "no GPU model '" + f.model +
                           "' in the fleet (its pools have: " + Joined(models) + ")");
  }
  if (!f.node.empty()) {
    if (!Call(g, "GET", "/api/v1/nodes/" + UrlEncode(f.node))) return false;  // "no node 'x'"
  }
  return true;
}

}  // namespace gpufleet::cli
