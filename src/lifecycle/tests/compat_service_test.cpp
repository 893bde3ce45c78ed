// The compatibility matrix in effect and the check of a pool: its needs with its cluster's from
// the fleet file, its GPUs' architectures, an applied matrix that survives a restart.

#include "lifecycle/compat_service.h"

#include <gtest/gtest.h>

#include "lifecycle/tests/lifecycle_fixture.h"
#include "tests/support/fixtures.h"

namespace gpufleet::lifecycle {
namespace {

const std::string kFleet = ::gpufleet::testing::FleetFixture("compat");  // tests/fixtures/fleets/

class CompatServiceTest : public LifecycleFixture {
 protected:
  CompatServiceTest() : LifecycleFixture(kFleet) {}
  static std::string Failed(const CompatResult& r) {
    std::string out;
    for (const auto& f : r.failed) out += f.rule + ": " + f.reason + "\n";
    return out;
  }
};

TEST_F(CompatServiceTest, APoolInheritsItsClustersNeedsAndOverridesThem) {
  auto pools = fleet_->Pools();
  ASSERT_TRUE(pools.ok());
  EXPECT_EQ(pools->at(1).name, "h100");
  EXPECT_EQ(pools->at(1).lifecycle.driver_branch, "");  // stored as written: inherited
  auto h100 = compat_->Check("h100", "580.95.05", "");
  ASSERT_TRUE(h100.ok());
  EXPECT_TRUE(h100->ok) << Failed(h100.value());
  // The cluster's pin (kept as R580) and CUDA 12.8 apply to h100.
  auto old = compat_->Check("h100", "550.54.15", "");
  EXPECT_EQ(Failed(old.value()),
            "branch-eol: R550 is end of life\n"
            "pin: the pool is pinned to R580, 550.54.15 is R550\n"
            "cuda: CUDA 12.8 needs >= 570.26, 550.54.15 is older\n");
  // dev: its own tier, pin and CUDA; R610 is a new-feature branch, fine for development, and
  // end of life in August 2026.
  auto dev = compat_->Check("dev", "610.57.04", "");
  EXPECT_EQ(Failed(dev.value()), "branch-eol: R610 is end of life (2026-08)\n");
  // ?cuda= stands in for the pool's.
  auto cuda = compat_->Check("h100", "580.95.05", "13.1");
  EXPECT_EQ(Failed(cuda.value()), "cuda: CUDA 13.1 needs >= 590.44.01, 580.95.05 is older\n");
  auto none = compat_->Check("nowhere", "580.95.05", "");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code, ErrorCode::kNotFound);
}

TEST_F(CompatServiceTest, TheNodesRealGpusAreCheckedBesideThePoolsModel) {
  auto token = fleet_->CreateJoinToken("dev", 3'600'000, "test");
  ASSERT_TRUE(token.ok());
  proto::Hello h;
  h.join_token = token->secret;
  h.facts.hostname = "dev-b200";
  Gpu g;
  g.uuid = "GPU-1";
  g.name = "NVIDIA B200";  // not what the pool expects: the node is degraded, and counted
  h.gpus.push_back(g);
  ASSERT_TRUE(fleet_->OnHello(h, "10.0.0.9").ok());
  CompatNeeds needs;
  auto r = compat_->Check("dev", "565.57.01", "12.6");
  ASSERT_TRUE(r.ok());
  EXPECT_NE(
      Failed(r.value()).find("architecture: blackwell GPUs need >= 570.26, 565.57.01 is older"),
      std::string::npos)
      << Failed(r.value());
}

TEST_F(CompatServiceTest, AnAppliedMatrixReplacesTheBuiltInOneAcrossARestart) {
  EXPECT_FALSE(compat_->current().applied);
  std::string yaml(CompatMatrix::BuiltinText());
  // R580's end of life moved forward in a local copy: the check follows it.
  yaml.replace(yaml.find("{branch: R580, type: ltsb, eol: \"2028-06\""),
               std::string("{branch: R580, type: ltsb, eol: \"2028-06\"").size(),
               "{branch: R580, type: ltsb, eol: \"2026-01\"");
  ASSERT_TRUE(compat_->Apply(yaml, "mine.yaml").ok());
  EXPECT_TRUE(compat_->current().applied);
  Start();
  EXPECT_TRUE(compat_->current().applied);
  EXPECT_EQ(Failed(compat_->Check("h100", "580.95.05", "").value()),
            "branch-eol: R580 is end of life (2026-01)\n");
  // A bad file changes nothing.
  auto bad = compat_->Apply("version: 1\nbranches: []\n", "bad.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message, "bad.yaml:2: branches: must be a mapping with source and rows");
  EXPECT_TRUE(compat_->current().applied);
  ASSERT_TRUE(compat_->Reset().ok());
  Start();
  EXPECT_FALSE(compat_->current().applied);
  EXPECT_TRUE(compat_->Check("h100", "580.95.05", "")->ok);
}

TEST(CompatFleetFile, NeedsAreCheckedWithTheirLineAndField) {
  auto bad = [](const std::string& pool_fields) {
    std::string yaml = std::string("apiVersion: gpufleet/v1\nkind: Fleet\nclusters:\n") +
                       "  - name: c\n    type: training\n    site: s\n    pools:\n" +
                       "      - name: p\n        gpu_model: L4\n" + pool_fields;
    auto spec = ParseFleetSpec(yaml, "f.yaml", *GpuCatalog::Builtin());
    return spec.ok() ? std::string("ok") : spec.error().message;
  };
  EXPECT_EQ(bad("        tier: prod\n"),
            "f.yaml:10: clusters[0].pools[0].tier: 'prod' is not one of production, staging, "
            "development");
  EXPECT_EQ(bad("        requires: {cuda: twelve}\n"),
            "f.yaml:10: clusters[0].pools[0].requires.cuda: 'twelve' must be a CUDA version such "
            "as 12.8");
  EXPECT_EQ(bad("        requires: {rocm: 6}\n"),
            "f.yaml:10: clusters[0].pools[0].requires.rocm: unknown field");
  EXPECT_EQ(
      bad("        driver_branch: latest\n"),
      "f.yaml:10: clusters[0].pools[0].driver_branch: 'latest' must be a branch such as R580");
  EXPECT_EQ(bad("        requires: {gpu_operator: v25.10.1, kubernetes: \"1.33\"}\n"), "ok");
}

}  // namespace
}  // namespace gpufleet::lifecycle
