#include "health/health.h"

#include <gtest/gtest.h>

namespace gpufleet::health {
namespace {

constexpr int64_t kNow = 1'764'430'000'000;

GpuInputs Gpu0() {
  GpuInputs in;
  in.gpu.index = 0;
  in.gpu.uuid = "GPU-0";
  in.max_temp_c = 85;
  return in;
}

void Set(GpuInputs& in, Field f, double v) { in.latest[static_cast<size_t>(f)] = {kNow, v}; }

GpuHealth Eval(const GpuInputs& in) { return EvaluateGpu(in, *XidCatalog::Builtin(), kNow); }

bool Has(const GpuHealth& h, const std::string& check, Level level, const std::string& action) {
  for (const auto& r : h.reasons) {
    if (r.check == check && r.level == level && r.action == action) return true;
  }
  return false;
}

TEST(EvaluateGpu, HealthyWithNormalReadings) {
  GpuInputs in = Gpu0();
  Set(in, Field::kGpuTemp, 60);
  Set(in, Field::kEccDbeVolatile, 0);
  Set(in, Field::kClocksEventReasons, 0x1);  // GPU idle: not a fault
  Set(in, Field::kPowerUsage, 300'000);
  Set(in, Field::kPowerLimit, 700'000);
  auto h = Eval(in);
  EXPECT_EQ(h.level, Level::kHealthy);
  EXPECT_TRUE(h.reasons.empty());
}

TEST(EvaluateGpu, XidsFollowTheCatalogueAndExpireAfterTheirHold) {
  GpuInputs in = Gpu0();
  in.xids = {{kNow - 60'000, 79}};
  auto h = Eval(in);
  EXPECT_EQ(h.level, Level::kFailed);
  EXPECT_TRUE(Has(h, "xid", Level::kFailed, "reboot_node"));
  EXPECT_NE(h.reasons[0].message.find("XID 79 GPU_HAS_FALLEN_OFF_THE_BUS"), std::string::npos);
  in.xids = {{kNow - 25 * 3'600'000LL, 79}};  // past its 24 h hold
  EXPECT_EQ(Eval(in).level, Level::kHealthy);
  in.xids = {{kNow - 60'000, 13}};  // an application's fault: a warning
  EXPECT_TRUE(Has(Eval(in), "xid", Level::kWarning, "restart_application"));
  in.xids = {{kNow - 60'000, 43}};  // informational only
  EXPECT_EQ(Eval(in).level, Level::kHealthy);
  in.xids = {{kNow - 120'000, 48}, {kNow - 60'000, 48}, {kNow - 30'000, 63}};
  auto repeated = Eval(in);
  EXPECT_EQ(repeated.reasons.size(), 1u);  // the newest 48 only; 63 is info
}

TEST(EvaluateGpu, MemoryErrors) {
  GpuInputs in = Gpu0();
  Set(in, Field::kEccDbeVolatile, 2);
  EXPECT_TRUE(Has(Eval(in), "ecc_dbe", Level::kFailed, "reset_gpu"));
  in = Gpu0();
  Set(in, Field::kRemapFailure, 1);
  EXPECT_TRUE(Has(Eval(in), "row_remap", Level::kFailed, "rma_candidate"));
  in = Gpu0();
  Set(in, Field::kRemapPending, 1);
  EXPECT_TRUE(Has(Eval(in), "row_remap", Level::kWarning, "reset_gpu"));
  in = Gpu0();
  in.sbe_per_hour = 500;
  EXPECT_TRUE(Has(Eval(in), "ecc_sbe", Level::kWarning, "none"));
}

TEST(EvaluateGpu, TemperatureAgainstTheModelsLimit) {
  GpuInputs in = Gpu0();
  Set(in, Field::kGpuTemp, 81);
  EXPECT_TRUE(Has(Eval(in), "temperature", Level::kWarning, "check_hardware"));
  Set(in, Field::kGpuTemp, 85);
  EXPECT_TRUE(Has(Eval(in), "temperature", Level::kFailed, "check_hardware"));
  in.max_temp_c = 0;  // unknown model: no temperature verdict
  EXPECT_EQ(Eval(in).level, Level::kHealthy);
}

TEST(EvaluateGpu, ThrottlePowerNvlinkPcieAndLostGpus) {
  GpuInputs in = Gpu0();
  Set(in, Field::kClocksEventReasons, 0x40 | 0x80);
  auto h = Eval(in);
  ASSERT_TRUE(Has(h, "throttle", Level::kWarning, "check_hardware"));
  EXPECT_NE(h.reasons[0].message.find("HW thermal slowdown, HW power brake"), std::string::npos);
  in = Gpu0();
  Set(in, Field::kPowerUsage, 760'000);
  Set(in, Field::kPowerLimit, 700'000);
  EXPECT_TRUE(Has(Eval(in), "power", Level::kWarning, "check_hardware"));
  in = Gpu0();
  Set(in, Field::kNvlinkLinksDown, 2);
  EXPECT_TRUE(Has(Eval(in), "nvlink", Level::kFailed, "check_nvlink"));
  in = Gpu0();
  in.pcie_replays_per_min = 50;
  EXPECT_TRUE(Has(Eval(in), "pcie", Level::kWarning, "check_hardware"));
  in = Gpu0();
  in.gpu.error = "GPU_IS_LOST";
  EXPECT_TRUE(Has(Eval(in), "nvml", Level::kFailed, "reboot_node"));
}

TEST(RollUp, NodeTakesItsWorstGpuAndUnreachableIsUnhealthy) {
  Node node;
  node.name = "n1";
  GpuHealth ok{0, "a", "", Level::kHealthy, {}};
  GpuHealth warn{
      1, "b", "", Level::kWarning, {{"throttle", Level::kWarning, "hot", "check_hardware"}}};
  GpuHealth failed{2, "c", "", Level::kFailed, {{"xid", Level::kFailed, "XID 79", "reboot_node"}}};
  EXPECT_EQ(RollUp(node, {ok}, true).health, NodeState::kReady);
  auto degraded = RollUp(node, {ok, warn}, true);
  EXPECT_EQ(degraded.health, NodeState::kDegraded);
  ASSERT_EQ(degraded.reasons.size(), 1u);
  EXPECT_EQ(degraded.reasons[0], "GPU 1 warning: hot");
  EXPECT_EQ(RollUp(node, {ok, warn, failed}, true).health, NodeState::kUnhealthy);
  EXPECT_EQ(RollUp(node, {ok}, false).health, NodeState::kUnhealthy);
}

// A node asked for and not registered yet has nothing against it, but it is not ready either.
TEST(HealthCounts, AProvisioningNodeIsStartingNotReady) {
  Node node;
  node.name = "n1";
  GpuHealth ok{0, "a", "", Level::kHealthy, {}};
  GpuHealth failed{1, "b", "", Level::kFailed, {{"xid", Level::kFailed, "XID 79", "reboot_node"}}};
  HealthCounts c;
  node.state = NodeState::kReady;
  c.Add(RollUp(node, {ok, failed}, true));
  node.state = NodeState::kProvisioning;
  c.Add(RollUp(node, {}, true));
  node.state = NodeState::kJoining;
  c.Add(RollUp(node, {}, true));
  node.state = NodeState::kCordoned;  // the verdict counts, whatever the operator did
  c.Add(RollUp(node, {ok}, true));
  EXPECT_EQ(c.nodes, 4);
  EXPECT_EQ(c.starting, 2);
  EXPECT_EQ(c.ready, 1);
  EXPECT_EQ(c.unhealthy, 1);
  EXPECT_EQ(c.degraded, 0);
  EXPECT_EQ(c.gpus, 3);
  EXPECT_EQ(c.healthy, 2);
  EXPECT_EQ(c.failed, 1);
}

}  // namespace
}  // namespace gpufleet::health
