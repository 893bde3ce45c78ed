#include <gtest/gtest.h>

#include <set>

#include "agent/gpu_backend.h"

namespace gpufleet {
namespace {

TEST(SimBackend, GpusFollowTheCatalogueAndAreUniqueAndStable) {
  auto catalog = GpuCatalog::Builtin();
  std::set<std::string> uuids, serials;
  for (int n = 0; n < 50; ++n) {
    SimNodeSpec spec;
    spec.hostname = "node-" + std::to_string(n);
    spec.model = catalog->Find("H200-SXM-141GB");
    auto backend = MakeSimBackend(spec);
    EXPECT_TRUE(backend->Simulated());
    auto gpus = backend->Inventory();
    ASSERT_EQ(gpus->size(), 8u);
    for (const auto& g : gpus.value()) {
      EXPECT_EQ(g.name, "NVIDIA H200");
      EXPECT_EQ(g.memory_total_bytes, 141ull << 30);
      EXPECT_EQ(g.mig_mode, 0);
      EXPECT_EQ(g.uuid.rfind("GPU-", 0), 0u);
      uuids.insert(g.uuid);
      serials.insert(g.serial);
    }
    EXPECT_EQ(MakeSimBackend(spec)->Inventory()->at(5).uuid, gpus->at(5).uuid);
  }
  EXPECT_EQ(uuids.size(), 400u);
  EXPECT_EQ(serials.size(), 400u);
}

}  // namespace
}  // namespace gpufleet
