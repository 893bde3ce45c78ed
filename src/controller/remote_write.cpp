#include "controller/remote_write.h"

#include <map>
#include <mutex>

namespace gpufleet {

remote::LabelSource FleetLabels(FleetService& fleet) {
  // The last labels made, and what they were made from: while no node record changed and the
  // pools' teams are the same, they are handed out again (the writer asks every 5 s, and a
  // walk of 10,000 GPUs' labels is not free).
  struct Made {
    std::mutex mu;
    uint64_t changes = 0;
    std::map<std::string, std::string> teams;
    std::shared_ptr<const remote::GpuLabels> labels;
  };
  auto made = std::make_shared<Made>();
  return [&fleet, made]() -> std::shared_ptr<const remote::GpuLabels> {
    std::map<std::string, std::string> team_of_pool, team_of_cluster;
    if (auto clusters = fleet.Clusters(); clusters.ok()) {
      for (const auto& c : clusters.value()) team_of_cluster[c.name] = c.team;
    }
    if (auto pools = fleet.Pools(); pools.ok()) {
      for (const auto& p : pools.value()) {
        team_of_pool[p.name] = p.team.empty() ? team_of_cluster[p.cluster] : p.team;
      }
    }
    const uint64_t changes = fleet.changes();  // before the walk: a change during it counts next
    std::lock_guard lock(made->mu);
    if (made->labels && made->changes == changes && made->teams == team_of_pool) {
      return made->labels;
    }
    auto out = std::make_shared<remote::GpuLabels>();
    fleet.ForEachNode({}, [&](const Node& n) {
      if (LeftFleet(n.state)) return;
      const std::string& team = team_of_pool[n.pool];
      for (const auto& g : n.gpus) {
        Labels l{
            {"Hostname", n.name},
            {"UUID", g.uuid},
            {"cluster", n.cluster},
            {"device", "nvidia" + std::to_string(g.minor_number >= 0 ? g.minor_number : g.index)},
            {"gpu", std::to_string(g.index)},
            {"modelName", g.name.empty() ? g.model : g.name},
            {"pool", n.pool}};
        if (!g.pci_bus_id.empty()) l["pci_bus_id"] = g.pci_bus_id;
        if (!team.empty()) l["team"] = team;
        (*out)[g.uuid] = std::move(l);
      }
    });
    made->changes = changes;
    made->teams = std::move(team_of_pool);
    made->labels = out;
    return out;
  };
}

Result<std::unique_ptr<remote::RemoteWriter>> OpenRemoteWrite(const ControllerOptions& options,
                                                              FleetService& fleet,
                                                              TelemetryStore& telemetry) {
  if (options.remote_write.empty()) return std::unique_ptr<remote::RemoteWriter>();
  remote::RemoteWriteOptions o;
  o.dir = options.data_dir + "/remote-write";
  o.window_bytes = options.remote_write_window_bytes;
  o.receivers = options.remote_write;
  auto writer = remote::RemoteWriter::Open(std::move(o), FleetLabels(fleet));
  if (!writer.ok()) return writer.error();
  remote::RemoteWriter* w = writer.value().get();
  telemetry.SetTap(
      [w](const std::vector<std::string>& uuids, const std::vector<uint32_t>& handles,
          const std::vector<StoredPoint>& points) { w->Stored(uuids, handles, points); });
  return std::move(writer.value());
}

}  // namespace gpufleet
