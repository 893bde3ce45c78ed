#include "controller/cycle_event.h"

#include <algorithm>
#include <cstdio>
#include <functional>

namespace gpufleet {

void AddPoolInputs(alerting::Snapshot& snap, FleetService& fleet,
                   const workload::JobService& jobs) {
  auto pools = fleet.Pools();
  auto clusters = fleet.Clusters();
  if (!pools.ok() || !clusters.ok()) return;
  std::map<std::string, std::string> cluster_team;
  for (const auto& c : clusters.value()) cluster_team[c.name] = c.team;
  auto demand = jobs.Demand();
  std::vector<alerting::PoolInput> inputs;
  for (const auto& p : pools.value()) {
    const workload::PoolDemand& d = demand[p.name];
    inputs.push_back({p.name, p.cluster, p.team.empty() ? cluster_team[p.cluster] : p.team,
                      d.queued_jobs, static_cast<double>(d.queue_wait_p95_ms) / 1000.0});
  }
  alerting::AddPools(snap, inputs, jobs.Allocation());
}

std::map<std::string, int64_t> LastXidByNode(FleetService& fleet, health::HealthService& health) {
  std::map<std::string, std::string> node_of;  // GPU UUID -> node
  fleet.ForEachNode({}, [&](const Node& n) {
    for (const auto& g : n.gpus) node_of[g.uuid] = n.name;
  });
  std::map<std::string, int64_t> out;
  for (const auto& [uuid, seen] : health.RecentXids()) {
    auto node = node_of.find(uuid);
    if (node == node_of.end()) continue;
    for (const auto& x : seen) out[node->second] = std::max(out[node->second], x.time_ms);
  }
  return out;
}

std::string CycleEvent(int64_t now, const std::vector<health::NodeHealth>& reports,
                       const std::vector<alerting::Alert>& alerts) {
  size_t health = 0, firing = 0;
  auto mix = [](size_t& h, size_t v) { h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2); };
  std::hash<std::string> text;
  for (const auto& n : reports) {
    mix(health, text(n.node));
    mix(health, static_cast<size_t>(n.health) * 31 + static_cast<size_t>(n.state));
    for (const auto& g : n.gpus) mix(health, static_cast<size_t>(g.level));
  }
  for (const auto& a : alerts) {
    mix(firing, text(a.fingerprint));
    mix(firing, static_cast<size_t>(a.state));
  }
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "{\"type\":\"cycle\",\"time_ms\":%lld,\"health\":\"%zx\",\"alerts\":\"%zx\"}",
                static_cast<long long>(now), health, firing);
  return buf;
}

}  // namespace gpufleet
