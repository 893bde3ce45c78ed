#pragma once
// Fleet as code: parses and validates a fleet YAML file (apiVersion gpufleet/v1, kind Fleet)
// into clusters and pools. Validation is strict (unknown fields are errors) and every error names
// the file, the line and the field path, e.g. "fleet.yaml:12: clusters[1].pools[0].gpu_model: ...".
// A pool's `scaling:` block is read by the policy's parser (src/model/scaling_policy.h), the one
// the API's scaling objects go through.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "model/catalog.h"
#include "model/scaling_policy.h"
#include "model/team.h"
#include "model/types.h"

namespace gpufleet {

// An alert channel of the file's `channels:` list, as the JSON object POST /api/v1/channels
// takes ({name, type, url, secret, matchers, group_by}); the API checks the rest of it.
struct ChannelEntry {
  std::string name;
  std::string json;
  int line = 0;  // where the file has it, for the API's errors
};

struct FleetSpec {
  std::vector<Cluster> clusters;
  std::vector<Pool> pools;
  std::vector<PoolScaling> scaling;  // the pools with a `scaling:` block
  // The file's `channels:`; none: the file says nothing of channels (an apply leaves them).
  std::optional<std::vector<ChannelEntry>> channels;
  // The file's `teams:` (before the clusters in the file); none: the file says nothing of
  // teams (an apply leaves them). Clusters and pools name their team by `team:`.
  std::optional<std::vector<Team>> teams;
};

Result<FleetSpec> ParseFleetSpec(std::string_view yaml, std::string_view filename,
                                 const GpuCatalog& catalog);

// The fleet file of `spec` (gpufleet export): each cluster with its pools nested under it, in
// the order given, and each pool's scaling block; fields at their defaults are left out, and
// values are written in JSON's flow syntax (which is YAML) so that none reads back as another
// type; then the channels, when `spec` has some. ParseFleetSpec of it gives `spec` back, so
// export, apply and export again is the same text.
std::string WriteFleetSpec(const FleetSpec& spec);

// The fleet as an Ansible inventory in YAML (gpufleet export --format ansible): groups per site
// (site_*), GPU model (model_*), cluster (cluster_*) and pool (pool_*), names with anything but
// letters, digits and '_' as '_'; pool variables its profile (GPU model, tier, pinned driver
// branch, requirements, labels), host variables what each node reports (state, driver, CUDA,
// container toolkit, kernel, OS, GPU count and serials; ansible_host its hostname). Nodes of a
// pool not in `spec` are left out.
std::string WriteAnsibleInventory(const FleetSpec& spec, const std::vector<Node>& nodes);

// The REST forms of one cluster and one pool (POST, PUT and PATCH on /api/v1/clusters and
// /api/v1/pools): a JSON object with the fleet file's fields, a cluster's without `pools`, a
// pool's with the `cluster` it belongs to. They are validated by the fleet file's rules with its
// messages, the field named from the object's root ("type: 'gpu' is not one of ...").
Result<Cluster> ParseClusterObject(std::string_view json, const GpuCatalog& catalog);
struct PoolObject {
  Pool pool;
  std::optional<PoolScaling> scaling;  // its `scaling` block, when the object has one
};
Result<PoolObject> ParsePoolObject(std::string_view json, const GpuCatalog& catalog);
// The objects above of what is stored, as JSON text (the fields at their defaults left out, as
// export writes them): what a PATCH is merged into.
std::string ClusterObject(const Cluster& cluster);
std::string PoolObjectText(const Pool& pool, const PoolScaling* scaling);

}  // namespace gpufleet
