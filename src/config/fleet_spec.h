#pragma once
// Fleet as code: parses and validates a fleet YAML file (apiVersion gpufleet/v1, kind Fleet)
// into clusters and pools. Validation is strict (unknown fields are errors) and every error names
// the file, the line and the field path, e.g. "fleet.yaml:12: clusters[1].pools[0].gpu_model: ...".
// A pool's `scaling:` block is read by the policy's parser (src/model/scaling_policy.h), the one
// the API's scaling objects go through.

#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "model/catalog.h"
#include "model/scaling_policy.h"
#include "model/types.h"

namespace gpufleet {

struct FleetSpec {
  std::vector<Cluster> clusters;
  std::vector<Pool> pools;
  std::vector<PoolScaling> scaling;  // the pools with a `scaling:` block
};

Result<FleetSpec> ParseFleetSpec(std::string_view yaml, std::string_view filename,
                                 const GpuCatalog& catalog);

}  // namespace gpufleet
