#include "sim/sim.h"

#include <cstdio>

namespace gpufleet {

SimFleet::SimFleet(std::shared_ptr<const GpuCatalog> catalog) : catalog_(std::move(catalog)) {}

Status SimFleet::AddPool(const SimPoolOptions& o) {
  const GpuModelSpec* model = catalog_->Find(o.model);
  if (!model) return MakeError(ErrorCode::kInvalidArgument, "unknown GPU model '" + o.model + "'");
  if (o.nodes < 0 || o.nodes > 100000) {
    return MakeError(ErrorCode::kInvalidArgument, "--nodes must be 0..100000");
  }
  if (o.gpus_per_node < 0 || o.gpus_per_node > 16) {
    return MakeError(ErrorCode::kInvalidArgument, "--gpus-per-node must be 0..16");
  }
  for (int i = 0; i < o.nodes; ++i) {
    char name[128];
    std::snprintf(name, sizeof name, "%s-%04d", o.name_prefix.c_str(), o.first_index + i);
    SimNodeSpec spec;
    spec.hostname = name;
    spec.model = model;
    spec.gpu_count = o.gpus_per_node;
    AgentOptions ao;
    ao.controller = o.controller;
    ao.join_token = o.join_token;
    ao.hostname = name;
    runner_.Add(std::move(ao), MakeSimBackend(spec));
    ++nodes_;
  }
  return {};
}

void SimFleet::Run(int threads) { runner_.Run(threads); }
void SimFleet::Stop() { runner_.Stop(); }

}  // namespace gpufleet
