#include "scrape/dcgm.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace gpufleet::scrape {
namespace {

Result<DcgmReading> Read(const std::string& text) {
  auto samples = ParseExposition(text);
  if (!samples.ok()) return samples.error();
  return ReadDcgm(samples.value());
}

std::string Fixture(const std::string& name) {
  std::ifstream in(std::string(DCGM_FIXTURES) + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

double Value(const SampleRow& row, Field f) {
  EXPECT_TRUE(row.has(f)) << Info(f).name;
  return row.values[static_cast<size_t>(f)];
}

TEST(ReadDcgm, GpusFactsAndValuesInGpufleetUnits) {
  auto r = Read(Fixture("a100-2gpu.prom"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->facts.hostname, "dgx-a100-017");
  EXPECT_EQ(r->facts.driver_version, "535.183.01");
  ASSERT_EQ(r->gpus.size(), 2u);
  const Gpu& g0 = r->gpus[0];
  EXPECT_EQ(g0.index, 0);
  EXPECT_EQ(g0.uuid, "GPU-5f1c2a7e-93b4-4c8d-a1e2-7d6c5b4a3f01");
  EXPECT_EQ(g0.name, "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(g0.pci_bus_id, "00000000:07:00.0");
  // No FB_TOTAL on the page: used + free + reserved.
  EXPECT_EQ(g0.memory_total_bytes, uint64_t{3901 + 76618 + 636} << 20);
  const auto& row0 = r->rows[0];
  EXPECT_EQ(Value(row0, Field::kGpuUtil), 97);
  EXPECT_EQ(Value(row0, Field::kPowerUsage), 312447);  // W -> mW, exactly
  EXPECT_EQ(Value(row0, Field::kTotalEnergy), 4418838213.0);
  EXPECT_EQ(Value(row0, Field::kMemoryTemp), 47);
  EXPECT_EQ(Value(row0, Field::kFbUsed), 76618);
  EXPECT_EQ(Value(row0, Field::kPcieTx), 51200);  // bytes/s -> KiB/s
  EXPECT_EQ(Value(row0, Field::kXidLast), 0);
  EXPECT_EQ(Value(r->rows[1], Field::kRemappedCorrectable), 2);
  // GPU 1's memory temperature is DCGM's "not supported" sentinel: skipped, not a number.
  EXPECT_FALSE(r->rows[1].has(Field::kMemoryTemp));
  EXPECT_EQ(r->skipped, 1u);
  EXPECT_EQ(Value(row0, Field::kSmClock), 1410);
  // 17 of the page's 25 families are fields gpufleet keeps; the others (encoder and decoder
  // use, vGPU licence, engine activity ratios, NVLink byte counter) are passed over.
  EXPECT_EQ(r->samples, 2u * 17 - 1);
}

TEST(ReadDcgm, OlderExporter) {
  auto r = Read(Fixture("t4-legacy.prom"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->gpus.size(), 1u);
  EXPECT_EQ(r->gpus[0].name, "Tesla T4");
  EXPECT_EQ(r->gpus[0].pci_bus_id, "");
  EXPECT_EQ(r->facts.hostname, "edge-t4-03");
  EXPECT_EQ(Value(r->rows[0], Field::kPowerUsage), 27562);
  EXPECT_FALSE(r->rows[0].has(Field::kMemoryTemp));  // the fp64 blank
  EXPECT_EQ(r->skipped, 1u);
}

TEST(ReadDcgm, CudaVersionAndMigInstances) {
  auto r = Read(
      "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-a\",modelName=\"NVIDIA H100 80GB HBM3\","
      "DCGM_FI_CUDA_DRIVER_VERSION=\"12040\"} 5\n"
      "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-a\",GPU_I_ID=\"1\",GPU_I_PROFILE=\"1g.10gb\"} 99\n"
      "DCGM_FI_DEV_FB_TOTAL{gpu=\"0\",UUID=\"GPU-a\"} 81559\n"
      "go_goroutines 12\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->facts.cuda_driver_version, "12.4");
  EXPECT_EQ(Value(r->rows[0], Field::kGpuUtil), 5);  // the GPU's, not the MIG instance's
  EXPECT_EQ(r->gpus[0].memory_total_bytes, uint64_t{81559} << 20);
}

TEST(ReadDcgm, RefusesPagesThatAreNotAGpuNode) {
  auto none = Read("go_goroutines 12\nprocess_cpu_seconds_total 3.5\n");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("no GPU series"), std::string::npos);
  auto bad_index = Read("DCGM_FI_DEV_GPU_UTIL{gpu=\"zero\",UUID=\"GPU-a\"} 1\n");
  ASSERT_FALSE(bad_index.ok());
  EXPECT_NE(bad_index.error().message.find("gpu=\"zero\""), std::string::npos);
  auto two_uuids = Read(
      "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-a\"} 1\n"
      "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",UUID=\"GPU-b\"} 1\n");
  ASSERT_FALSE(two_uuids.ok());
  EXPECT_NE(two_uuids.error().message.find("two UUIDs"), std::string::npos);
  auto no_uuid = Read("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 1\n");
  ASSERT_FALSE(no_uuid.ok());
  EXPECT_NE(no_uuid.error().message.find("no UUID"), std::string::npos);
}

}  // namespace
}  // namespace gpufleet::scrape
