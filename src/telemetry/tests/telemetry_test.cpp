#include "telemetry/telemetry.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "tests/support/temp_dir.h"

namespace gpufleet {
namespace {

TEST(Telemetry, IngestsRowsAndReadsThemBack) {
  const gpufleet::testing::TempDir dir_tmp("gf-telemetry");
  const std::filesystem::path dir = dir_tmp.path();
  {
    auto store = TelemetryStore::Open({dir.string(), {}});
    ASSERT_TRUE(store.ok()) << store.error().message;
    proto::Samples s;
    s.seq = 1;
    for (int t = 0; t < 3; ++t) {
      for (int gpu = 0; gpu < 2; ++gpu) {
        SampleRow r;
        r.time_ms = 1'000'000 + 1000 * t;
        r.gpu = gpu;
        r.set(Field::kGpuUtil, 10 * t + gpu);
        r.set(Field::kPowerUsage, 300'000 + t);
        s.rows.push_back(r);
      }
    }
    SampleRow stray;
    stray.gpu = 7;  // the node has no GPU 7
    stray.set(Field::kGpuUtil, 1);
    s.rows.push_back(stray);
    auto r = store.value()->Ingest({"GPU-a", "GPU-b"}, s);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->stored, 12u);
    EXPECT_EQ(r->unknown_gpus, 1u);
    auto again = store.value()->Ingest({"GPU-a", "GPU-b"}, s);  // a re-sent batch
    EXPECT_EQ(again->stored, 0u);
    EXPECT_EQ(again->refused, 12u);
    EXPECT_EQ(store.value()->Latest("GPU-b", Field::kGpuUtil)->v, 21);
    EXPECT_FALSE(store.value()->Latest("GPU-b", Field::kGpuTemp).has_value());  // never sent
    EXPECT_FALSE(store.value()->Latest("GPU-z", Field::kGpuUtil).has_value());
    EXPECT_EQ(store.value()->samples_ingested(), 12u);
  }
  auto reopened = TelemetryStore::Open({dir.string(), {}});
  ASSERT_TRUE(reopened.ok());
  auto range =
      reopened.value()->Range("GPU-a", Field::kPowerUsage, tsdb::Resolution::kRaw, 0, INT64_MAX);
  ASSERT_EQ(range.size(), 3u);
  EXPECT_EQ(range[2].max, 300'002);
  // After a restart, before the GPU reports again, its latest values come from the log.
  auto all = reopened.value()->LatestAll("GPU-b");
  ASSERT_TRUE(all[static_cast<size_t>(Field::kGpuUtil)].has_value());
  EXPECT_EQ(all[static_cast<size_t>(Field::kGpuUtil)]->v, 21);
  EXPECT_FALSE(all[static_cast<size_t>(Field::kGpuTemp)].has_value());
  EXPECT_EQ(reopened.value()->Latest("GPU-b", Field::kGpuUtil)->v, 21);
}

}  // namespace
}  // namespace gpufleet
