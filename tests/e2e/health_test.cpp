// The health model end to end: faults injected into simulated GPUs turn them failed or warning
// with the catalogue's reason and action, the node's state follows, and the API and CLI show it.

#include <thread>

#include "fixture.h"

namespace gpufleet::e2e {
namespace {

using Health = E2E;

TEST_F(Health, AnXid79FailsTheGpuAndTheNodeWithTheCataloguesAction) {
  Apply();
  Sim(JoinToken("h100"), "hl", 2, "H100-SXM5-80GB", 8);
  ASSERT_TRUE(WaitState("hl-0000", "ready"));
  ASSERT_TRUE(WaitState("hl-0001", "ready"));
  auto [s, v] = controller_->Call("GET", "/api/v1/health");
  ASSERT_EQ(s, 200) << v;
  EXPECT_EQ(v.at("summary").at("gpus").as_int64(), 16);
  EXPECT_EQ(v.at("summary").at("gpus_failed").as_int64(), 0);
  EXPECT_EQ(v.at("items").as_array().size(), 0u);  // problems only, and there are none

  ASSERT_EQ(
      controller_->Call("POST", "/api/v1/nodes/hl-0001/gpus/5/inject", R"({"xid": 79})").first,
      202);
  ASSERT_TRUE(WaitState("hl-0001", "unhealthy", 15000));
  EXPECT_NE(std::string(Node("hl-0001").at("reason").as_string()).find("XID 79"),
            std::string::npos);
  EXPECT_EQ(State("hl-0000"), "ready");
  auto h = controller_->Call("GET", "/api/v1/health").second;
  EXPECT_EQ(h.at("summary").at("gpus_failed").as_int64(), 1);
  EXPECT_EQ(h.at("summary").at("unhealthy").as_int64(), 1);
  ASSERT_EQ(h.at("items").as_array().size(), 1u);
  const auto& node = h.at("items").at(0);
  EXPECT_EQ(node.at("node").as_string(), "hl-0001");
  EXPECT_EQ(node.at("health").as_string(), "unhealthy");
  const auto& gpu = node.at("gpus").at(5);
  EXPECT_EQ(gpu.at("health").as_string(), "failed");
  EXPECT_EQ(gpu.at("reasons").at(0).at("check").as_string(), "xid");
  EXPECT_EQ(gpu.at("reasons").at(0).at("action").as_string(), "reboot_node");
  EXPECT_EQ(node.at("gpus").at(4).at("health").as_string(), "healthy");

  auto cli = Cli({"health"});
  EXPECT_EQ(cli.exit_code, 0) << cli.err;
  EXPECT_NE(cli.out.find("hl-0001"), std::string::npos) << cli.out;
  EXPECT_NE(cli.out.find("reboot_node"), std::string::npos) << cli.out;
  EXPECT_NE(cli.out.find("GPU_HAS_FALLEN_OFF_THE_BUS"), std::string::npos) << cli.out;

  // An operator's cordon holds; the health verdict waits underneath it.
  ASSERT_EQ(controller_->Call("POST", "/api/v1/nodes/hl-0001/cordon").first, 200);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_EQ(State("hl-0001"), "cordoned");
  auto xids = Cli({"xids", "list"});
  EXPECT_NE(xids.out.find("GPU_HAS_FALLEN_OFF_THE_BUS"), std::string::npos);
  EXPECT_EQ(controller_->Call("GET", "/api/v1/health?show=some").first, 400);
}

TEST_F(Health, AnOverheatedGpuFailsTheNodeUntilItCools) {
  Apply();
  Sim(JoinToken("l4"), "hot", 1, "L4", 1);
  ASSERT_TRUE(WaitState("hot-0000", "ready"));
  // The L4's limit in the catalogue is below 97 C: failed on the temperature check.
  ASSERT_EQ(
      controller_->Call("POST", "/api/v1/nodes/hot-0000/gpus/0/inject", R"({"temperature_c": 97})")
          .first,
      202);
  ASSERT_TRUE(WaitState("hot-0000", "unhealthy", 15000));
  auto h = controller_->Call("GET", "/api/v1/health?node=hot-0000").second;
  EXPECT_EQ(h.at("items").at(0).at("gpus").at(0).at("reasons").at(0).at("check").as_string(),
            "temperature");
  ASSERT_EQ(
      controller_->Call("POST", "/api/v1/nodes/hot-0000/gpus/0/inject", R"({"clear": true})").first,
      202);
  ASSERT_TRUE(WaitState("hot-0000", "ready", 30000));
}

// The remediation policy cordons an unhealthy node by itself, and its circuit breaker stops at
// the cluster's max_share: a second unhealthy node is left for an operator.
TEST_F(Health, RemediationCordonsUnhealthyNodesUntilTheCircuitBreakerHolds) {
  auto applied = ApplyText("remediation.yaml",
                           "apiVersion: gpufleet/v1\nkind: Fleet\nclusters:\n"
                           "  - name: rem\n    type: training\n    site: lab\n"
                           "    remediation: {cordon_unhealthy: true, max_share: 0.34}\n"
                           "    pools:\n      - {name: rem-h100, gpu_model: H100-SXM5-80GB}\n");
  ASSERT_EQ(applied.exit_code, 0) << applied.err;
  auto cluster = controller_->Call("GET", "/api/v1/clusters/rem").second;
  EXPECT_TRUE(cluster.at("remediation").at("cordon_unhealthy").as_bool()) << cluster;
  Sim(JoinToken("rem-h100"), "rem", 3, "H100-SXM5-80GB", 8);
  for (const char* n : {"rem-0000", "rem-0001", "rem-0002"}) ASSERT_TRUE(WaitState(n, "ready"));

  auto inject = [&](const std::string& node) {
    return controller_->Call("POST", "/api/v1/nodes/" + node + "/gpus/0/inject", R"({"xid": 79})")
        .first;
  };
  ASSERT_EQ(inject("rem-0000"), 202);
  ASSERT_TRUE(WaitState("rem-0000", "cordoned", 15000)) << State("rem-0000");
  EXPECT_NE(std::string(Node("rem-0000").at("reason").as_string()).find("cordon by remediation"),
            std::string::npos);
  auto audit = controller_->Call("GET", "/api/v1/audit").second;
  bool recorded = false;
  for (const auto& a : audit.at("items").as_array()) {
    recorded = recorded || (a.at("actor").as_string() == "remediation" &&
                            a.at("target").as_string() == "node/rem-0000");
  }
  EXPECT_TRUE(recorded) << audit;

  // One of three nodes is the limit (max_share 0.34): the next one stays unhealthy.
  ASSERT_EQ(inject("rem-0001"), 202);
  ASSERT_TRUE(WaitState("rem-0001", "unhealthy", 15000));
  ASSERT_TRUE(WaitFor(
      [&] {
        auto h = controller_->Call("GET", "/api/v1/health?cluster=rem").second;
        return h.at("clusters").at(0).at("remediation_breaker_open").as_bool();
      },
      10000));
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_EQ(State("rem-0001"), "unhealthy");
  EXPECT_EQ(State("rem-0002"), "ready");
}

// With reset_gpu allowed, a node that remediation cordoned gets its failed GPU reset by its
// agent (the simulator's GPU comes back clean), both steps are audited, and the GPU is healthy
// again while the node stays cordoned for an operator. A reboot the policy does not allow is
// not asked for.
TEST_F(Health, RemediationAsksTheAgentToResetAFailedGpu) {
  auto applied = ApplyText("reset.yaml",
                           "apiVersion: gpufleet/v1\nkind: Fleet\nclusters:\n"
                           "  - name: rst\n    type: training\n    site: lab\n"
                           "    remediation: {cordon_unhealthy: true, max_share: 1,"
                           " reset_gpu: true}\n"
                           "    pools:\n      - {name: rst-h100, gpu_model: H100-SXM5-80GB}\n");
  ASSERT_EQ(applied.exit_code, 0) << applied.err;
  Sim(JoinToken("rst-h100"), "rst", 1, "H100-SXM5-80GB", 8);
  ASSERT_TRUE(WaitState("rst-0000", "ready"));
  auto gpu_level = [&](int index) {
    auto h = controller_->Call("GET", "/api/v1/health?node=rst-0000&show=all").second;
    for (const auto& g : h.at("items").at(0).at("gpus").as_array()) {
      if (g.at("index").as_int64() == index) return std::string(g.at("health").as_string());
    }
    return std::string("?");
  };
  ASSERT_EQ(
      controller_->Call("POST", "/api/v1/nodes/rst-0000/gpus/5/inject", R"({"xid": 79})").first,
      202);
  ASSERT_EQ(
      controller_->Call("POST", "/api/v1/nodes/rst-0000/gpus/2/inject", R"({"ecc_dbe": 2})").first,
      202);
  ASSERT_TRUE(WaitState("rst-0000", "cordoned", 15000)) << State("rst-0000");
  auto audited = [&](const std::string& actor, const std::string& action_prefix) -> json::value {
    auto audit = controller_->Call("GET", "/api/v1/audit?limit=100").second;
    for (const auto& a : audit.at("items").as_array()) {
      std::string action(a.at("action").as_string());
      if (a.at("actor").as_string() == actor && action.rfind(action_prefix, 0) == 0) return a;
    }
    return nullptr;
  };
  ASSERT_TRUE(WaitFor([&] { return !audited("agent", "reset_gpu GPU 2").is_null(); }, 15000));
  EXPECT_NE(std::string(audited("agent", "reset_gpu GPU 2").at("result").as_string())
                .find("ok: simulated reset of GPU 2"),
            std::string::npos);
  EXPECT_FALSE(audited("remediation", "reset_gpu GPU 2").is_null());
  ASSERT_TRUE(WaitFor([&] { return gpu_level(2) == "healthy"; }, 15000)) << gpu_level(2);
  // The reset is a GPU event too (what ends the hold of its earlier XIDs across restarts).
  auto resets = controller_->Call("GET", "/api/v1/events?kind=reset&node=rst-0000").second;
  ASSERT_EQ(resets.at("items").as_array().size(), 1u) << resets;
  EXPECT_EQ(resets.at("items").at(0).at("gpu").as_int64(), 2);
  EXPECT_EQ(gpu_level(5), "failed");  // XID 79 wants a reboot, which the policy does not allow
  EXPECT_TRUE(audited("remediation", "reboot_node").is_null());
  EXPECT_EQ(State("rst-0000"), "cordoned");
}

}  // namespace
}  // namespace gpufleet::e2e
