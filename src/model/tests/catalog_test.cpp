#include "model/catalog.h"

#include <gtest/gtest.h>

namespace gpufleet {
namespace {

TEST(Catalog, BuiltinHasTheCurrentDataCentreParts) {
  auto catalog = GpuCatalog::Builtin();
  for (const char* id : {"B200", "H200-SXM-141GB", "H100-SXM5-80GB", "H100-PCIE-80GB",
                         "A100-SXM4-40GB", "A100-SXM4-80GB", "L40S", "L4", "A10", "T4"}) {
    const GpuModelSpec* m = catalog->Find(id);
    ASSERT_NE(m, nullptr) << id;
    EXPECT_GT(m->memory_gib, 0) << id;
    EXPECT_GT(m->tdp_w, 0) << id;
    EXPECT_GT(m->max_operating_temp_c, 0) << id;
    EXPECT_FALSE(m->architecture.empty()) << id;
    EXPECT_FALSE(m->nvml_names.empty()) << id;
    EXPECT_EQ(m->mig_supported, !m->mig_profiles.empty()) << id;
  }
  const GpuModelSpec* h100 = catalog->Find("H100-SXM5-80GB");
  EXPECT_EQ(h100->tdp_w, 700);
  EXPECT_EQ(h100->nvlink_generation, 4);
  EXPECT_EQ(h100->nvlink_bandwidth_gbps, 900);
  EXPECT_EQ(h100->mig_max_instances, 7);
  EXPECT_FALSE(catalog->Find("L4")->mig_supported);
}

TEST(Catalog, MatchesDriverNamesCaseInsensitively) {
  auto catalog = GpuCatalog::Builtin();
  ASSERT_NE(catalog->MatchDeviceName("NVIDIA H100 80GB HBM3"), nullptr);
  EXPECT_EQ(catalog->MatchDeviceName("nvidia h100 80gb hbm3")->id, "H100-SXM5-80GB");
  EXPECT_EQ(catalog->MatchDeviceName("Tesla T4")->id, "T4");
  EXPECT_EQ(catalog->MatchDeviceName("NVIDIA GeForce RTX 4090"), nullptr);
}

TEST(Catalog, RejectsBadFilesWithTheLine) {
  auto bad = GpuCatalog::Parse("version: 1\nmodels:\n  - id: X\n    tdp_w: 5\n", "cat.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("cat.yaml:3"), std::string::npos) << bad.error().message;
  auto dup = GpuCatalog::Parse(
      "models:\n  - {id: A, nvml_names: [a], memory_gib: 1, tdp_w: 1}\n"
      "  - {id: A, nvml_names: [b], memory_gib: 1, tdp_w: 1}\n",
      "cat.yaml");
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.error().message.find("duplicate"), std::string::npos);
  EXPECT_FALSE(GpuCatalog::Parse("models: [", "cat.yaml").ok());
}

}  // namespace
}  // namespace gpufleet
