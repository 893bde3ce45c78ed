#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

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

double V(const SampleRow& row, Field f) {
  EXPECT_TRUE(row.has(f));
  return row.values[static_cast<size_t>(f)];
}

// Samples GPU `gpu` every 10 s over [from, to): the field's values.
std::vector<double> Series(GpuBackend& b, int gpu, Field f, int64_t from, int64_t to) {
  std::vector<double> out;
  for (int64_t t = from; t < to; t += 10'000) out.push_back(V(b.Sample(gpu, t), f));
  return out;
}
double Mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return sum / static_cast<double>(v.size());
}

TEST(SimBackend, GpusFollowTheirJobsProfileAndFreeOnesIdle) {
  auto catalog = GpuCatalog::Builtin();
  SimNodeSpec spec;
  spec.hostname = "sim-0001";
  spec.model = catalog->Find("H100-SXM5-80GB");  // 700 W, 80 GiB
  auto b = MakeSimBackend(spec);
  const double total_mib = 80 * 1024, tdp_mw = 700'000;
  const int64_t day = 1'764'547'200'000;    // 2025-12-01T00:00:00Z
  const int64_t t0 = day + 15 * 3'600'000;  // 15:00 UTC, inference's peak
  ASSERT_TRUE(b->SetLoads({{0, 7, "training", t0},
                           {1, 8, "inference", t0},
                           {2, 9, "bursty", t0},
                           {3, 9, "bursty", t0},
                           {4, 10, "idle", t0}})
                  .ok());
  const int64_t t1 = t0 + 20 * 60'000;  // 20 minutes: no training checkpoint yet
  // Training: steady near full, most of the memory, power near the TDP.
  auto train = Series(*b, 0, Field::kGpuUtil, t0, t1);
  EXPECT_GT(*std::min_element(train.begin(), train.end()), 80);
  EXPECT_GT(V(b->Sample(0, t1), Field::kFbUsed), total_mib * 0.69);
  EXPECT_GT(V(b->Sample(0, t1 + 10'000), Field::kPowerUsage), tdp_mw * 0.8);
  // Idle: holds the GPU (a context in memory), computes nothing, draws idle power.
  auto idle = Series(*b, 4, Field::kGpuUtil, t0, t1);
  EXPECT_LE(*std::max_element(idle.begin(), idle.end()), 1);
  const double idle_fb = V(b->Sample(4, t1), Field::kFbUsed);
  EXPECT_GT(idle_fb, 0);
  EXPECT_LT(idle_fb, total_mib * 0.09);
  EXPECT_LT(V(b->Sample(4, t1 + 10'000), Field::kPowerUsage), tdp_mw * 0.12);
  // Free: nothing in memory, idle power.
  EXPECT_EQ(V(b->Sample(5, t1), Field::kFbUsed), 0);
  EXPECT_LT(V(b->Sample(5, t1 + 10'000), Field::kPowerUsage), tdp_mw * 0.12);
  EXPECT_LE(Mean(Series(*b, 5, Field::kGpuUtil, t0, t1)), 1);
  // Inference follows the day: busier at 15:00 than at 03:00.
  const double peak = Mean(Series(*b, 1, Field::kGpuUtil, t0, t1));
  const double night =
      Mean(Series(*b, 1, Field::kGpuUtil, day + 3 * 3'600'000, day + 3 * 3'600'000 + 20 * 60'000));
  EXPECT_GT(peak, 50);
  EXPECT_LT(night, 20);
  // Bursty: busy spells between idle ones, the same spells on both of the job's GPUs.
  auto a = Series(*b, 2, Field::kGpuUtil, t1, t1 + 3'600'000);
  auto c = Series(*b, 3, Field::kGpuUtil, t1, t1 + 3'600'000);
  int busy = 0, together = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    busy += a[i] > 40;
    together += (a[i] > 40) == (c[i] > 40);
  }
  EXPECT_GT(busy, 0);
  EXPECT_LT(busy, static_cast<int>(a.size()) / 2);
  EXPECT_EQ(together, static_cast<int>(a.size()));
  // The job ends: its GPU is free again.
  ASSERT_TRUE(b->SetLoads({}).ok());
  EXPECT_EQ(V(b->Sample(0, t1 + 3'700'000), Field::kFbUsed), 0);
  EXPECT_LE(V(b->Sample(0, t1 + 3'710'000), Field::kGpuUtil), 1);
  // A GPU the node does not have: refused, nothing changed.
  EXPECT_FALSE(b->SetLoads({{0, 7, "training", t0}, {8, 7, "training", t0}}).ok());
  EXPECT_EQ(V(b->Sample(0, t1 + 3'720'000), Field::kFbUsed), 0);
}

}  // namespace
}  // namespace gpufleet
