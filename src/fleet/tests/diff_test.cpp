// DiffFleet: what a fleet file would create, change (each field, as the API's JSON names it,
// with its old and new value) and delete, against the clusters and pools held.

#include <gtest/gtest.h>

#include "config/fleet_spec.h"
#include "fleet/fleet.h"

namespace gpufleet {
namespace {

FleetSpec Spec(const std::string& yaml) {
  auto spec = ParseFleetSpec(yaml, "fleet.yaml", *GpuCatalog::Builtin());
  EXPECT_TRUE(spec.ok()) << spec.error().message;
  return spec.ok() ? spec.value() : FleetSpec{};
}

constexpr char kBefore[] = R"(apiVersion: gpufleet/v1
kind: Fleet
clusters:
  - name: train
    type: training
    site: lab-a
    labels: {team: ml}
    pools:
      - {name: h100, gpu_model: H100-SXM5-80GB, gpus_per_node: 8, size: 4}
      - {name: old, gpu_model: L4, gpus_per_node: 1}
  - name: edge
    type: edge
    site: shop-1
    pools:
      - {name: l4, gpu_model: L4, gpus_per_node: 1}
)";

TEST(DiffFleet, CreatesChangesAndDeletesWithTheirFields) {
  FleetSpec before = Spec(kBefore);
  FleetSpec after = Spec(R"(apiVersion: gpufleet/v1
kind: Fleet
clusters:
  - name: train
    type: training
    site: lab-b
    labels: {team: ml, tier: production}
    driver_branch: R580
    pools:
      - {name: h100, gpu_model: H100-SXM5-80GB, gpus_per_node: 8, size: 6}
      - {name: h200, gpu_model: H200-SXM-141GB, gpus_per_node: 8}
)");
  auto changes = DiffFleet(before.clusters, before.pools, after);
  ASSERT_EQ(changes.size(), 6u);
  // Clusters first, by name: edge is not in the file; train changed three fields.
  EXPECT_EQ(changes[0].kind, "cluster");
  EXPECT_EQ(changes[0].name, "edge");
  EXPECT_EQ(changes[0].action, "delete");
  EXPECT_EQ(changes[1].name, "train");
  EXPECT_EQ(changes[1].action, "update");
  std::vector<std::string> fields;
  for (const auto& f : changes[1].fields) fields.push_back(f.field + ": " + f.from + " -> " + f.to);
  EXPECT_EQ(fields, (std::vector<std::string>{"labels.tier:  -> \"production\"",
                                              "lifecycle.driver_branch: \"\" -> \"R580\"",
                                              "site: \"lab-a\" -> \"lab-b\""}));
  // Pools, by name: h100's size, h200 new, l4 and old gone.
  EXPECT_EQ(changes[2].name, "h100");
  EXPECT_EQ(changes[2].action, "update");
  ASSERT_EQ(changes[2].fields.size(), 1u);
  EXPECT_EQ(changes[2].fields[0].field, "size");
  EXPECT_EQ(changes[2].fields[0].from, "4");
  EXPECT_EQ(changes[2].fields[0].to, "6");
  EXPECT_EQ(changes[3].name, "h200");
  EXPECT_EQ(changes[3].action, "create");
  EXPECT_EQ(changes[4].action, "delete");
  EXPECT_EQ(changes[4].name, "l4");
  EXPECT_EQ(changes[5].action, "delete");
  EXPECT_EQ(changes[5].name, "old");
}

TEST(DiffFleet, TheSameFileIsNoChange) {
  FleetSpec spec = Spec(kBefore);
  EXPECT_TRUE(DiffFleet(spec.clusters, spec.pools, spec).empty());
}

}  // namespace
}  // namespace gpufleet
