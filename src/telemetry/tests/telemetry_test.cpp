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

// A batch's XID event for a GPU that sent no row in it (and is new since start-up) sets that
// GPU's XID gauge; reads by handle answer as reads by name, and a GPU with no handle (not
// ingested since start-up) is read by name from what the log restored.
// The tap (remote write's queue) gets exactly what was stored, in order: not the stray row, not
// a re-sent batch, not the points of one that overlaps what is stored; with each GPU's handle
// (the same as Handles gives, and none for a GPU the batch has no points of).
TEST(Telemetry, TheTapGetsOnlyThePointsStored) {
  const gpufleet::testing::TempDir dir("gf-telemetry");
  auto store = TelemetryStore::Open({dir.path(), {}});
  ASSERT_TRUE(store.ok());
  std::vector<std::pair<std::string, StoredPoint>> tapped;
  std::vector<uint32_t> handles;
  store.value()->SetTap([&](const std::vector<std::string>& uuids,
                            const std::vector<uint32_t>& gpu_handles,
                            const std::vector<StoredPoint>& points) {
    for (const auto& p : points) tapped.push_back({uuids.at(p.gpu), p});
    handles = gpu_handles;
  });
  auto batch = [](int64_t from, int64_t to) {
    proto::Samples s;
    for (int64_t t = from; t < to; t += 1000) {
      SampleRow r;
      r.time_ms = t;
      r.gpu = 1;
      r.set(Field::kGpuUtil, 50);
      r.set(Field::kGpuTemp, static_cast<double>(t / 1000));
      s.rows.push_back(r);
    }
    SampleRow stray;
    stray.gpu = 9;
    stray.set(Field::kGpuUtil, 1);
    s.rows.push_back(stray);
    s.events.push_back({to - 1, 1, "xid", 79});
    return s;
  };
  ASSERT_TRUE(store.value()->Ingest({"GPU-a", "GPU-b"}, batch(1000, 3000)).ok());
  ASSERT_EQ(tapped.size(), 5u);  // 2 rows x 2 fields, and the XID
  EXPECT_EQ(tapped[0].first, "GPU-b");
  EXPECT_EQ(tapped[1].second.field, Field::kGpuTemp);
  EXPECT_EQ(tapped[3].second.t, 2000);
  EXPECT_EQ(tapped[4].second.field, Field::kXidLast);
  EXPECT_EQ(tapped[4].second.v, 79);
  const std::string b = "GPU-b", a = "GPU-a";
  std::vector<TelemetryStore::GpuHandle> known;
  store.value()->Handles({&a, &b}, known);
  ASSERT_EQ(handles.size(), 2u);
  EXPECT_EQ(handles[0], TelemetryStore::kNoGpu);  // GPU-a: no points in the batch
  EXPECT_EQ(handles[1], known[1]);
  EXPECT_NE(handles[1], TelemetryStore::kNoGpu);
  tapped.clear();
  ASSERT_TRUE(store.value()->Ingest({"GPU-a", "GPU-b"}, batch(1000, 3000)).ok());  // again
  EXPECT_TRUE(tapped.empty());
  ASSERT_TRUE(store.value()->Ingest({"GPU-a", "GPU-b"}, batch(2000, 5000)).ok());  // overlaps
  ASSERT_EQ(tapped.size(), 5u);  // 3000 and 4000 of both fields, and the XID at 4999
  EXPECT_EQ(tapped[0].second.t, 3000);
  EXPECT_EQ(tapped[4].second.t, 4999);
}

TEST(Telemetry, EventsOfGpusWithoutRowsAndReadsByHandle) {
  const gpufleet::testing::TempDir dir_tmp("gf-telemetry-handles");
  const std::filesystem::path dir = dir_tmp.path();
  const std::vector<std::string> uuids{"GPU-a", "GPU-b", "GPU-c"};
  {
    auto store = TelemetryStore::Open({dir.string(), {}});
    ASSERT_TRUE(store.ok()) << store.error().message;
    proto::Samples s;
    for (int t = 0; t < 2; ++t) {
      SampleRow r;
      r.time_ms = 2'000'000 + 1000 * t;
      r.gpu = 0;
      r.set(Field::kGpuUtil, 40 + t);
      s.rows.push_back(r);
    }
    s.events.push_back({2'000'500, 2, "xid", 79});
    s.events.push_back({2'000'600, 9, "xid", 48});  // no GPU 9: ignored
    auto r = store.value()->Ingest(uuids, s);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->stored, 3u);
    EXPECT_EQ(store.value()->Latest("GPU-c", Field::kXidLast)->v, 79);
    EXPECT_FALSE(store.value()->Latest("GPU-b", Field::kXidLast).has_value());

    std::vector<const std::string*> names{&uuids[0], &uuids[2], &uuids[1]};
    std::vector<TelemetryStore::GpuHandle> handles;
    store.value()->Handles(names, handles);
    ASSERT_EQ(handles.size(), 3u);
    EXPECT_NE(handles[0], TelemetryStore::kNoGpu);
    EXPECT_NE(handles[1], TelemetryStore::kNoGpu);
    EXPECT_EQ(handles[2], TelemetryStore::kNoGpu);  // GPU-b: nothing stored
    auto a = store.value()->LatestAll("GPU-a", handles[0]);
    EXPECT_EQ(a[static_cast<size_t>(Field::kGpuUtil)]->v, 41);
    EXPECT_EQ(
        store.value()->LatestAll("GPU-c", handles[1])[static_cast<size_t>(Field::kXidLast)]->v, 79);
    auto by_handle = store.value()->Range("GPU-a", handles[0], Field::kGpuUtil,
                                          tsdb::Resolution::kRaw, 0, INT64_MAX);
    auto by_name =
        store.value()->Range("GPU-a", Field::kGpuUtil, tsdb::Resolution::kRaw, 0, INT64_MAX);
    ASSERT_EQ(by_handle.size(), 2u);
    ASSERT_EQ(by_name.size(), 2u);
    EXPECT_EQ(by_handle[1].max, by_name[1].max);
  }
  auto reopened = TelemetryStore::Open({dir.string(), {}});
  ASSERT_TRUE(reopened.ok());
  auto all = reopened.value()->LatestAll("GPU-a", TelemetryStore::kNoGpu);
  ASSERT_TRUE(all[static_cast<size_t>(Field::kGpuUtil)].has_value());
  EXPECT_EQ(all[static_cast<size_t>(Field::kGpuUtil)]->v, 41);
  EXPECT_EQ(reopened.value()
                ->Range("GPU-c", TelemetryStore::kNoGpu, Field::kXidLast, tsdb::Resolution::kRaw, 0,
                        INT64_MAX)
                .size(),
            1u);
}

}  // namespace
}  // namespace gpufleet
