// The NVML backend against the fake libnvidia-ml.so.1 (tests/fake_nvml): the real dlopen,
// dlsym and calling code, with scripted GPUs and errors.

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "agent/gpu_backend.h"

namespace gpufleet {
namespace {

std::string Fixture(const char* name) {
  return std::string(GPUFLEET_SOURCE_DIR) + "/tests/fixtures/nvml/" + name;
}

TEST(NvmlBackend, ReadsExactlyTheScriptedGpus) {
  setenv("FAKE_NVML_SCRIPT", Fixture("l4x1.json").c_str(), 1);
  auto backend = OpenNvmlBackend(FAKE_NVML_PATH);
  ASSERT_TRUE(backend.ok()) << backend.error().message;
  EXPECT_EQ(backend.value()->Name(), "nvml");
  EXPECT_FALSE(backend.value()->Simulated());
  auto driver = backend.value()->Driver();
  ASSERT_TRUE(driver.ok());
  EXPECT_EQ(driver->driver_version, "535.104.05");
  EXPECT_EQ(driver->cuda_driver_version, "12.2");
  auto gpus = backend.value()->Inventory();
  ASSERT_TRUE(gpus.ok()) << gpus.error().message;
  ASSERT_EQ(gpus->size(), 1u);
  const Gpu& g = gpus->at(0);
  EXPECT_EQ(g.index, 0);
  EXPECT_EQ(g.uuid, "GPU-aaaabbbb-cccc-dddd-eeee-ffff00001111");
  EXPECT_EQ(g.name, "NVIDIA L4");
  EXPECT_EQ(g.serial, "1324021012345");
  EXPECT_EQ(g.pci_bus_id, "00000000:01:00.0");
  EXPECT_EQ(g.minor_number, 3);  // /dev/nvidia3: NVML's number, not the index
  EXPECT_EQ(g.memory_total_bytes, 24152899584ull);
  EXPECT_EQ(g.vbios_version, "95.04.5C.00.01");
  EXPECT_EQ(g.inforom_version, "G193.0200.00.01");
  EXPECT_EQ(g.inforom_oem, "2.1");
  EXPECT_EQ(g.inforom_ecc, "6.16");
  EXPECT_EQ(g.inforom_power, "");  // NOT_SUPPORTED: unknown, not an error
  EXPECT_EQ(g.gsp_firmware_version, "535.104.05");
  EXPECT_EQ(g.mig_mode, -1);  // NOT_SUPPORTED is "no MIG", not an error
  EXPECT_EQ(g.error, "");
}

TEST(NvmlBackend, ReadsTheSettingsAndSetsThemThroughNvmlsSetters) {
  setenv("FAKE_NVML_SCRIPT", Fixture("l4x1.json").c_str(), 1);
  const std::string log = ::testing::TempDir() + "/nvml-setters.log";
  std::remove(log.c_str());
  setenv("FAKE_NVML_SETTERS", log.c_str(), 1);
  auto backend = OpenNvmlBackend(FAKE_NVML_PATH);
  ASSERT_TRUE(backend.ok()) << backend.error().message;
  GpuBackend& b = *backend.value();
  auto gpus = b.Inventory();
  ASSERT_TRUE(gpus.ok());
  const GpuSettings& s = gpus->at(0).settings;
  EXPECT_EQ(s.persistence_mode, 1);
  EXPECT_EQ(s.ecc_mode, 1);
  EXPECT_EQ(s.ecc_pending, 1);
  EXPECT_EQ(s.compute_mode, "default");
  EXPECT_EQ(s.power_limit_w, 72);  // 72000 mW
  EXPECT_EQ(s.app_clock_graphics_mhz, 2040);
  EXPECT_EQ(s.app_clock_mem_mhz, 6251);

  auto set = b.ApplySetting(0, "power_limit_w", "60");
  ASSERT_TRUE(set.ok()) << set.error().message;
  EXPECT_EQ(set.value(), "GPU 0: power_limit_w set to 60");
  ASSERT_TRUE(b.ApplySetting(0, "application_clocks", "1500/6251").ok());
  ASSERT_TRUE(b.ApplySetting(0, "persistence_mode", "disabled").ok());
  auto ecc = b.ApplySetting(0, "ecc_mode", "disabled");
  ASSERT_TRUE(ecc.ok());
  EXPECT_NE(ecc->find("after the GPU is reset"), std::string::npos) << ecc.value();
  // The fixture refuses the compute mode as a non-root agent would be refused.
  auto refused = b.ApplySetting(0, "compute_mode", "exclusive_process");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kPermissionDenied);
  EXPECT_NE(refused.error().message.find("NVML_ERROR_NO_PERMISSION"), std::string::npos);
  // A value the setting cannot take never reaches NVML.
  EXPECT_FALSE(b.ApplySetting(0, "power_limit_w", "lots").ok());
  EXPECT_FALSE(b.ApplySetting(0, "fan_speed", "50").ok());

  std::ifstream in(log);
  std::stringstream calls;
  calls << in.rdbuf();
  EXPECT_EQ(calls.str(),
            "nvmlDeviceSetPowerManagementLimit 0 60000\n"
            "nvmlDeviceSetApplicationsClocks 0 6251 1500\n"  // memory first, as nvml.h has it
            "nvmlDeviceSetPersistenceMode 0 0\n"
            "nvmlDeviceSetEccMode 0 0\n"
            "nvmlDeviceSetComputeMode 0 3\n");
  // What was set is what is read back; ECC stays current until a reset, pending changes.
  gpus = b.Inventory();
  ASSERT_TRUE(gpus.ok());
  EXPECT_EQ(gpus->at(0).settings.power_limit_w, 60);
  EXPECT_EQ(gpus->at(0).settings.app_clock_graphics_mhz, 1500);
  EXPECT_EQ(gpus->at(0).settings.persistence_mode, 0);
  EXPECT_EQ(gpus->at(0).settings.ecc_mode, 1);
  EXPECT_EQ(gpus->at(0).settings.ecc_pending, 0);
  EXPECT_EQ(gpus->at(0).settings.compute_mode, "default");
  unsetenv("FAKE_NVML_SETTERS");
}

TEST(NvmlBackend, SamplesExactlyTheScriptedTelemetryAndLeavesTheRestAbsent) {
  setenv("FAKE_NVML_SCRIPT", Fixture("l4x1.json").c_str(), 1);
  auto backend = OpenNvmlBackend(FAKE_NVML_PATH);
  ASSERT_TRUE(backend.ok()) << backend.error().message;
  SampleRow row = backend.value()->Sample(0, 5000);
  EXPECT_EQ(row.time_ms, 5000);
  auto v = [&](Field f) { return row.values[static_cast<size_t>(f)]; };
  EXPECT_EQ(v(Field::kGpuUtil), 87);
  EXPECT_EQ(v(Field::kMemCopyUtil), 41);
  EXPECT_EQ(v(Field::kFbUsed), 0);      // the fixture's memory is all free
  EXPECT_EQ(v(Field::kFbFree), 23034);  // 24152899584 bytes, in MiB
  EXPECT_EQ(v(Field::kGpuTemp), 66);
  EXPECT_EQ(v(Field::kPowerUsage), 61234);
  EXPECT_EQ(v(Field::kPowerLimit), 72000);
  EXPECT_EQ(v(Field::kTotalEnergy), 987654321);
  EXPECT_EQ(v(Field::kSmClock), 2040);
  EXPECT_EQ(v(Field::kMemClock), 6251);
  EXPECT_EQ(v(Field::kPcieTx), 1200);
  EXPECT_EQ(v(Field::kPcieRx), 34000);
  EXPECT_EQ(v(Field::kPcieReplay), 3);
  EXPECT_EQ(v(Field::kEccSbeVolatile), 2);
  EXPECT_EQ(v(Field::kEccSbeAggregate), 17);
  EXPECT_EQ(v(Field::kRemappedCorrectable), 1);
  EXPECT_TRUE(row.has(Field::kClocksEventReasons));
  // Not supported on this GPU: absent, never zero.
  EXPECT_FALSE(row.has(Field::kMemoryTemp));
  EXPECT_FALSE(row.has(Field::kNvlinkLinksDown));
  EXPECT_FALSE(row.has(Field::kRetiredSbe));
  EXPECT_FALSE(row.has(Field::kRetiredPending));
  // The scripted XID 43 arrives once through the NVML event set.
  auto events = backend.value()->Events(7000);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].gpu, 0);
  EXPECT_EQ(events[0].kind, "xid");
  EXPECT_EQ(events[0].value, 43);
  EXPECT_EQ(events[0].time_ms, 7000);
  EXPECT_TRUE(backend.value()->Events(8000).empty());
  proto::Injection xid;
  xid.xid = 79;
  EXPECT_EQ(backend.value()->Inject(0, xid).error().code, ErrorCode::kConflict);  // real GPUs
}

TEST(NvmlBackend, ALostGpuIsReportedWithItsErrorAndTheOthersAreIntact) {
  setenv("FAKE_NVML_SCRIPT", Fixture("h100x4-lost.json").c_str(), 1);
  auto backend = OpenNvmlBackend(FAKE_NVML_PATH);
  ASSERT_TRUE(backend.ok()) << backend.error().message;
  auto gpus = backend.value()->Inventory();
  ASSERT_TRUE(gpus.ok());
  ASSERT_EQ(gpus->size(), 4u);
  EXPECT_EQ(gpus->at(0).mig_mode, 0);
  EXPECT_EQ(gpus->at(1).mig_mode, 1);
  EXPECT_EQ(gpus->at(2).error, "GPU_IS_LOST");
  // MIG: off is no instances; GPU 1's instances counted by profile through
  // nvmlDeviceGetGpuInstanceProfileInfoV (nvml.h's struct version) and nvmlDeviceGetGpuInstances;
  // GPU 3 has no MIG at all (unknown).
  EXPECT_EQ(gpus->at(0).mig_layout, (std::map<std::string, int>{}));
  EXPECT_EQ(gpus->at(1).mig_layout,
            (std::map<std::string, int>{{"1g.10gb", 2}, {"2g.20gb", 1}, {"3g.40gb", 1}}));
  EXPECT_EQ(gpus->at(3).mig_mode, -1);
  EXPECT_FALSE(gpus->at(3).mig_layout.has_value());
  EXPECT_EQ(gpus->at(2).uuid, "GPU-0f0e0d0c-0000-1111-2222-333344445552");
  EXPECT_EQ(gpus->at(2).memory_total_bytes, 0u);  // unreadable, not invented
  EXPECT_EQ(gpus->at(2).serial, "");
  EXPECT_EQ(gpus->at(3).error, "");
  EXPECT_EQ(gpus->at(3).serial, "1652223000004");
  EXPECT_EQ(gpus->at(3).memory_total_bytes, 85520809984ull);
  // Telemetry: GPU 0 has one NVLink down of 18; the lost GPU gives nothing at all.
  auto row = backend.value()->Sample(0, 1000);
  EXPECT_EQ(row.values[static_cast<size_t>(Field::kNvlinkLinksDown)], 1);
  EXPECT_EQ(row.values[static_cast<size_t>(Field::kClocksEventReasons)], 4);
  EXPECT_EQ(backend.value()->Sample(2, 1000).present, 0u);
}

TEST(NvmlBackend, AMigLayoutTheDriverWillNotListIsUnknownNotEmpty) {
  std::ifstream in(Fixture("h100x4-lost.json"));
  std::stringstream text;
  text << in.rdbuf();
  std::string script = text.str();
  const std::string at = "\"mig_profiles\"";
  ASSERT_NE(script.find(at), std::string::npos);
  script.insert(script.find(at),
                "\"errors\": {\"nvmlDeviceGetGpuInstances\": 4},\n");  // NO_PERMISSION
  const std::string path = ::testing::TempDir() + "/nvml-mig-no-permission.json";
  std::ofstream(path) << script;
  setenv("FAKE_NVML_SCRIPT", path.c_str(), 1);
  auto backend = OpenNvmlBackend(FAKE_NVML_PATH);
  ASSERT_TRUE(backend.ok()) << backend.error().message;
  auto gpus = backend.value()->Inventory();
  ASSERT_TRUE(gpus.ok());
  EXPECT_EQ(gpus->at(1).mig_mode, 1);
  EXPECT_FALSE(gpus->at(1).mig_layout.has_value());
}

TEST(NvmlBackend, InitFailureIsOneClearError) {
  setenv("FAKE_NVML_SCRIPT", Fixture("no-driver.json").c_str(), 1);
  auto backend = OpenNvmlBackend(FAKE_NVML_PATH);
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(backend.error().message.find("NVML_ERROR_DRIVER_NOT_LOADED"), std::string::npos)
      << backend.error().message;
}

TEST(NvmlBackend, MissingLibraryNamesItAndWhatToDo) {
  auto backend = OpenNvmlBackend("/nonexistent/libnvidia-ml.so.1");
  ASSERT_FALSE(backend.ok());
  const std::string& m = backend.error().message;
  EXPECT_NE(m.find("/nonexistent/libnvidia-ml.so.1"), std::string::npos) << m;
  EXPECT_NE(m.find("install the NVIDIA driver"), std::string::npos) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << "one line";
}

TEST(NvmlBackend, ALibraryThatIsNotNvmlIsRefused) {
  auto backend = OpenNvmlBackend("libm.so.6");
  ASSERT_FALSE(backend.ok());
  EXPECT_NE(backend.error().message.find("lacks the NVML entry points"), std::string::npos);
}

}  // namespace
}  // namespace gpufleet
