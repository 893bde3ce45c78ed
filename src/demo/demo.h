#pragma once
// What `gpufleet up`'s demo adds to a controller: a workload of jobs on the pools, the simulated
// nodes' GPUs following those jobs, and the asset records an operator's import would add.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "proto/proto.h"
#include "workload/generator.h"

namespace gpufleet {
class FleetService;
class TeamService;
namespace workload {
class JobService;
}
namespace runtime {
class CommandBus;
struct Services;
}  // namespace runtime
}  // namespace gpufleet

namespace gpufleet::demo {

// The demo workload over the pools that have a size, for the teams that have projects (null
// while there are none of either).
std::unique_ptr<workload::WorkloadGenerator> DemoWorkload(FleetService& fleet,
                                                          const TeamService& teams,
                                                          workload::JobService& jobs);

// The simulated nodes' GPUs follow their jobs: each node is told which of its GPUs jobs hold
// (proto::kSimLoadAction) when that changes, when its agent registers again (it starts with
// every GPU free), and every five minutes anyway. Real nodes are never told. One caller.
class SimLoadPusher {
 public:
  void Push(FleetService& fleet, const workload::JobService& jobs, runtime::CommandBus& commands,
            int64_t now);

 private:
  struct Sent {
    std::vector<proto::GpuLoad> loads;
    int64_t connected_ms = 0;
    int64_t at_ms = 0;
  };
  std::map<std::string, Sent> sent_;
};

// The demo's asset records: what an operator's import would add to the simulated fleet's
// discovered assets (purchase dates, street prices, warranties, racks), a few spare GPUs and one
// in RMA; and a capacity growth plan (a team's growth, a new model's GPUs from three months on).
// Audited as the actor "demo". The register must have observed the fleet first.
Status SeedDemoAssets(const runtime::Services& services);

}  // namespace gpufleet::demo
