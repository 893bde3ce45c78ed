// End to end, telemetry: samples, /metrics, buffering across outages, events, fault injection.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <filesystem>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "common/json_text.h"
#include "fixture.h"

namespace gpufleet::e2e {
namespace {

class Telemetry : public E2E {};

TEST_F(Telemetry, FakeNvmlValuesReachTheQueryApiAndMetricsUnderDcgmNames) {
  Apply();
  std::string token = JoinToken("l4");
  std::vector<std::string> args{
      GPUFLEET_BIN, "agent", "--controller",   controller_->address(), "--join-token", token,
      "--backend",  "nvml",  "--nvml-library", FAKE_NVML_PATH,         "--hostname",   "fake-l4"};
  agents_.push_back(std::make_unique<Process>(
      args, std::map<std::string, std::string>{{"FAKE_NVML_SCRIPT", kNvmlFixtures + "l4x1.json"}},
      dir_ + "/agent.log"));
  auto value = [&](const std::string& metric) {
    auto [s, v] = controller_->Call("GET", "/api/v1/query?metric=" + metric + "&node=fake-l4");
    if (s != 200 || v.at("items").as_array().empty()) return json::value(nullptr);
    return v.at("items").at(0).at("value");
  };
  ASSERT_TRUE(WaitFor([&] { return !value("gpu_util").is_null(); }, 15000))
      << ReadFile(dir_ + "/agent.log");
  EXPECT_EQ(value("gpu_util").as_int64(), 87);
  EXPECT_EQ(value("power_usage").as_int64(), 61234);
  EXPECT_EQ(value("total_energy").as_int64(), 987654321);
  EXPECT_EQ(value("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL").as_int64(), 17);
  EXPECT_TRUE(value("memory_temp").is_null());  // not supported: absent, not zero
  EXPECT_EQ(controller_->Call("GET", "/api/v1/query?metric=warp_drive").first, 400);
  auto cli = Cli({"metrics", "query", "power_usage", "--node", "fake-l4"});
  ASSERT_EQ(cli.exit_code, 0) << cli.err;
  // In watts, as the dashboard shows it (the API answers dcgm-exporter's mW).
  EXPECT_NE(cli.out.find("fake-l4  0    L4     61.2   W"), std::string::npos) << cli.out;
  auto top = Cli({"top", "--once"});
  ASSERT_EQ(top.exit_code, 0) << top.err;
  EXPECT_NE(top.out.find("fake-l4"), std::string::npos) << top.out;
  EXPECT_NE(top.out.find("61.2"), std::string::npos) << top.out;  // watts
  EXPECT_EQ(Cli({"metrics", "query", "warp_drive"}).exit_code, 1);
  {
    // Refreshing into a file (not a terminal): plain screens, no escape codes.
    const std::string log = dir_ + "/top.log";
    Process live(
        {GPUFLEET_BIN, "--data-dir", controller_->data_dir(), "top", "--interval", "200ms"}, {},
        log);
    ASSERT_TRUE(WaitFor(
        [&] {
          std::string text = ReadFile(log);
          return text.find("fake-l4") != text.rfind("fake-l4");  // two screens
        },
        10000))
        << ReadFile(log);
    live.Signal(SIGTERM);
    live.Wait(5000);
    EXPECT_EQ(ReadFile(log).find('\033'), std::string::npos) << ReadFile(log);
  }
  auto bad = Cli({"top", "--interval", "soon"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(bad.err, "error: --interval must be a duration such as 500ms, 2s or 1m\n");

  auto metrics = controller_->Call("GET", "/metrics").second;
  std::string text(metrics.as_string());
  // device: the GPU's device file, /dev/nvidia3 by NVML's minor number, not its index 0.
  std::string labels =
      R"({gpu="0",UUID="GPU-aaaabbbb-cccc-dddd-eeee-ffff00001111",pci_bus_id="00000000:01:00.0",)"
      R"(device="nvidia3",modelName="NVIDIA L4",Hostname="fake-l4",cluster="edge",pool="l4"})";
  EXPECT_NE(text.find("# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n"), std::string::npos);
  EXPECT_NE(text.find("DCGM_FI_DEV_POWER_USAGE" + labels + " 61.234\n"), std::string::npos) << text;
  EXPECT_NE(text.find("DCGM_FI_DEV_GPU_UTIL" + labels + " 87\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n"), std::string::npos);
  EXPECT_EQ(text.find("DCGM_FI_DEV_MEMORY_TEMP" + labels), std::string::npos);
  EXPECT_NE(text.find("gpufleet_agents_connected 1\n"), std::string::npos);
  EXPECT_NE(text.find("gpufleet_http_request_duration_seconds_count{method=\"GET\","
                      "route=\"/api/v1/query\"}"),
            std::string::npos);
  // The controller's periodic tasks: each one's runs, errors and last duration.
  EXPECT_NE(text.find("# TYPE gpufleet_task_duration_seconds gauge\n"), std::string::npos);
  for (const char* task : {"heartbeats", "jobs", "rollouts", "health", "checkpoint"}) {
    EXPECT_NE(text.find("gpufleet_task_runs_total{task=\"" + std::string(task) + "\"} "),
              std::string::npos)
        << task;
  }
  EXPECT_NE(text.find("gpufleet_task_errors_total{task=\"heartbeats\"} 0\n"), std::string::npos);
  // ?cluster= narrows the page, and a token scoped to another cluster sees none of these GPUs.
  auto page_of = [&](const std::string& target, const std::string* token = nullptr) {
    return std::string(controller_->Call("GET", target, "", token).second.as_string());
  };
  EXPECT_NE(page_of("/metrics?cluster=edge").find("Hostname=\"fake-l4\""), std::string::npos);
  EXPECT_EQ(page_of("/metrics?cluster=train").find("Hostname=\"fake-l4\""), std::string::npos);
  auto scoped =
      controller_->Call("POST", "/api/v1/api-tokens",
                        R"({"name": "train-only", "role": "viewer", "clusters": ["train"]})");
  ASSERT_EQ(scoped.first, 201) << scoped.second;
  std::string train_token(scoped.second.at("token").as_string());
  std::string scoped_page = page_of("/metrics", &train_token);
  EXPECT_EQ(scoped_page.find("Hostname=\"fake-l4\""), std::string::npos);
  EXPECT_NE(scoped_page.find("gpufleet_agents_connected"), std::string::npos);

  // promtool (Debian's prometheus package) must parse the page. Its only complaints may be the
  // lint rules that dcgm-exporter's own names break (camelCase labels, counters without
  // _total), which existing dashboards depend on; the controller's own metrics must be clean.
  std::string page = dir_ + "/metrics.txt";
  FILE* f = std::fopen(page.c_str(), "w");
  std::fputs(text.c_str(), f);
  std::fclose(f);
  std::string report = dir_ + "/promtool.txt";
  int rc = std::system(("promtool check metrics < " + page + " > " + report + " 2>&1").c_str());
  ASSERT_NE(rc, -1);
  int code = WEXITSTATUS(rc);
  EXPECT_TRUE(code == 0 || code == 3) << "promtool failed to parse /metrics: " << ReadFile(report);
  std::regex allowed(
      R"(^(DCGM_FI_\w+|gpufleet_gpu_\w+) (label names should be written in 'snake_case' not )"
      R"('camelCase'|counter metrics should have "_total" suffix|metric name should not )"
      R"(include type 'counter')$)");
  std::istringstream lines(ReadFile(report));
  int findings = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    ++findings;
    EXPECT_TRUE(std::regex_match(line, allowed)) << "promtool: " << line;
  }
  EXPECT_GT(findings, 0) << "promtool ran and linted the DCGM names";
  std::string none;
  EXPECT_EQ(controller_->Call("GET", "/metrics", "", &none).first, 401);
}

// The agent buffers samples while the controller is down and replays them when it is back:
// every second of the outage is stored, once.
TEST_F(Telemetry, AgentReplaysItsBufferAfterAControllerOutage) {
  Apply();
  std::string token = JoinToken("l4");
  Sim(token, "edge", 1, "L4", 1);
  auto points = [&] { return SecondPoints("edge-0000"); };
  ASSERT_TRUE(WaitFor([&] { return points().size() >= 2; }, 15000));
  controller_->Stop();
  const int64_t stopped_at = NowMs();
  std::this_thread::sleep_for(std::chrono::seconds(4));
  controller_->Start();
  const int64_t started_at = NowMs();
  ASSERT_TRUE(WaitFor([&] { return Node("edge-0000").at("connected").as_bool(); }, 20000));
  // The seconds run without a gap from before the stop to after the start.
  ASSERT_TRUE(WaitPointAfter("edge-0000", started_at + 1000));
  auto all = points();
  ASSERT_FALSE(all.empty());
  EXPECT_LT(all.front().at(0).as_int64(), stopped_at - 1000);
  EXPECT_GE(all.size(), 6u) << "four seconds down and the seconds around them";
  ExpectEverySecond(all);
}

}  // namespace
}  // namespace gpufleet::e2e

namespace gpufleet::e2e {
namespace {

TEST_F(Telemetry, InjectedFaultsShowOnSimulatedGpusAndRealOnesRefuse) {
  Apply();
  std::string token = JoinToken("h100");
  Sim(token, "inj", 1, "H100-SXM5-80GB", 8);
  ASSERT_TRUE(WaitState("inj-0000", "ready"));
  auto inject = [&](int gpu, const std::string& body) {
    return controller_->Call(
        "POST", "/api/v1/nodes/inj-0000/gpus/" + std::to_string(gpu) + "/inject", body);
  };
  // An XID 79 becomes a stored event, the GPU's last-XID gauge and DCGM_FI_DEV_XID_ERRORS.
  auto [s1, r1] = inject(3, R"({"xid": 79})");
  ASSERT_EQ(s1, 202) << JsonText(r1);
  ASSERT_TRUE(WaitFor(
      [&] {
        auto ev = controller_->Call("GET", "/api/v1/events?node=inj-0000").second;
        return ev.at("items").as_array().size() == 1;
      },
      10000));
  auto ev = controller_->Call("GET", "/api/v1/events?node=inj-0000").second.at("items").at(0);
  EXPECT_EQ(ev.at("gpu").as_int64(), 3);
  EXPECT_EQ(ev.at("kind").as_string(), "xid");
  EXPECT_EQ(ev.at("value").as_int64(), 79);
  ASSERT_TRUE(WaitFor(
      [&] {
        auto q =
            controller_->Call("GET", "/api/v1/query?metric=xid_last&node=inj-0000&gpu=3").second;
        return !q.at("items").at(0).at("value").is_null();
      },
      5000));
  std::string text(controller_->Call("GET", "/metrics").second.as_string());
  EXPECT_NE(text.find("# TYPE DCGM_FI_DEV_XID_ERRORS gauge"), std::string::npos);

  // The same through the CLI.
  auto cli = Cli({"sim", "inject", "inj-0000", "2", "--xid", "48"});
  ASSERT_EQ(cli.exit_code, 0) << cli.err;
  EXPECT_EQ(cli.out, "queued for inj-0000 GPU 2\n");
  EXPECT_EQ(Cli({"sim", "inject", "inj-0000", "2"}).exit_code, 1);  // nothing to inject: 400
  ASSERT_TRUE(WaitFor(
      [&] {
        auto all = controller_->Call("GET", "/api/v1/events?node=inj-0000").second;
        return all.at("items").as_array().size() == 2;
      },
      10000));

  // A lost GPU makes the node unhealthy; clearing it brings it back. (The XID 79 above is on
  // the node too: the health model holds it failed, so this runs on a node of its own.)
  Sim(token, "lost", 1, "H100-SXM5-80GB", 8);
  ASSERT_TRUE(WaitState("lost-0000", "ready"));
  ASSERT_EQ(
      controller_->Call("POST", "/api/v1/nodes/lost-0000/gpus/5/inject", R"({"lost": true})").first,
      202);
  ASSERT_TRUE(WaitState("lost-0000", "unhealthy"));
  EXPECT_NE(std::string(Node("lost-0000").at("reason").as_string()).find("GPU 5: GPU_IS_LOST"),
            std::string::npos);
  auto [sc, rc] =
      controller_->Call("POST", "/api/v1/nodes/lost-0000/gpus/5/inject", R"({"clear": true})");
  ASSERT_EQ(sc, 202) << JsonText(rc);
  ASSERT_TRUE(WaitState("lost-0000", "ready"));

  // Temperature and double-bit ECC errors show in the telemetry.
  ASSERT_EQ(inject(1, R"({"temperature_c": 97, "ecc_dbe": 2})").first, 202);
  auto value = [&](const char* metric, int gpu) {
    auto q = controller_
                 ->Call("GET", std::string("/api/v1/query?metric=") + metric +
                                   "&node=inj-0000&gpu=" + std::to_string(gpu))
                 .second;
    return q.at("items").at(0).at("value");
  };
  ASSERT_TRUE(WaitFor(
      [&] { return value("gpu_temp", 1).is_int64() && value("gpu_temp", 1).as_int64() == 97; },
      5000));
  EXPECT_EQ(value("ecc_dbe_volatile", 1).as_int64(), 2);

  // Bad requests change nothing.
  EXPECT_EQ(inject(3, R"({"xid": "seventy-nine"})").first, 400);
  EXPECT_EQ(inject(3, R"({"xid": 0})").first, 400);
  EXPECT_EQ(inject(3, R"({"meltdown": true})").first, 400);
  EXPECT_EQ(inject(3, R"({})").first, 400);
  EXPECT_EQ(inject(12, R"({"xid": 79})").first, 404);
  EXPECT_EQ(controller_->Call("POST", "/api/v1/nodes/ghost/gpus/0/inject", R"({"xid": 79})").first,
            404);
}

TEST_F(Telemetry, RealGpusRefuseInjectionAndReportTheirOwnXids) {
  Apply();
  std::string token = JoinToken("l4");
  std::vector<std::string> args{
      GPUFLEET_BIN, "agent", "--controller",   controller_->address(), "--join-token", token,
      "--backend",  "nvml",  "--nvml-library", FAKE_NVML_PATH,         "--hostname",   "real-l4"};
  agents_.push_back(std::make_unique<Process>(
      args, std::map<std::string, std::string>{{"FAKE_NVML_SCRIPT", kNvmlFixtures + "l4x1.json"}},
      dir_ + "/agent.log"));
  ASSERT_TRUE(WaitState("real-l4", "ready"));
  auto [s, e] = controller_->Call("POST", "/api/v1/nodes/real-l4/gpus/0/inject", R"({"xid": 79})");
  EXPECT_EQ(s, 409);
  EXPECT_NE(std::string(e.at("error").at("message").as_string()).find("not simulated"),
            std::string::npos);
  // The XID 43 the fake driver reports arrives through NVML's event set.
  ASSERT_TRUE(WaitFor(
      [&] {
        auto ev = controller_->Call("GET", "/api/v1/events?node=real-l4&kind=xid").second;
        return ev.at("items").as_array().size() == 1 &&
               ev.at("items").at(0).at("value").as_int64() == 43;
      },
      10000));
}

}  // namespace
}  // namespace gpufleet::e2e

namespace gpufleet::e2e {
namespace {

// A driver, VBIOS, NIC firmware and Container Toolkit upgraded outside gpufleet: the node's next
// registration reports other versions, and the audit log records the change with the node as
// the actor.
TEST_F(E2E, ANodesNewDriverAndVbiosAreAuditedWithTheNodeAsActor) {
  Apply();
  std::string token = JoinToken("l4");
  auto start = [&](const std::string& script, const std::string& sysfs, const std::string& root) {
    agents_.push_back(std::make_unique<Process>(
        std::vector<std::string>{GPUFLEET_BIN, "agent", "--controller", controller_->address(),
                                 "--join-token", token, "--backend", "nvml", "--nvml-library",
                                 FAKE_NVML_PATH, "--hostname", "up-l4", "--state-dir",
                                 dir_ + "/agent-state", "--sysfs-root", sysfs, "--root", root},
        std::map<std::string, std::string>{{"FAKE_NVML_SCRIPT", script}},
        dir_ + "/agent-" + std::to_string(agents_.size()) + ".log"));
  };
  const std::string sysfs = std::string(GPUFLEET_SOURCE_DIR) + "/tests/fixtures/sysfs";
  const std::string root = std::string(GPUFLEET_SOURCE_DIR) + "/tests/fixtures/root";
  start(kNvmlFixtures + "l4x1.json", sysfs, root);
  ASSERT_TRUE(WaitState("up-l4", "ready"));
  // What a rollout acts on: the GPU's firmware and the node's NICs.
  auto node = Node("up-l4");
  const auto& gpu = node.at("gpus").at(0);
  EXPECT_EQ(gpu.at("inforom_oem"), "2.1");
  EXPECT_EQ(gpu.at("inforom_ecc"), "6.16");
  EXPECT_EQ(gpu.at("inforom_power"), "");
  EXPECT_EQ(gpu.at("gsp_firmware_version"), "535.104.05");
  const auto& nics = node.at("facts").at("nics").as_array();
  ASSERT_EQ(nics.size(), 2u) << node;
  EXPECT_EQ(nics[0].at("name"), "mlx5_0");
  EXPECT_EQ(nics[0].at("fw_version"), "28.41.1000");
  EXPECT_EQ(nics[0].at("board_id"), "MT_0000000834");
  EXPECT_EQ(nics[1].at("board_id"), "");
  agents_.clear();  // the agent stops; the node is upgraded
  std::string script = ReadFile(kNvmlFixtures + "l4x1.json");
  for (auto [from, to] :
       {std::pair{"535.104.05", "550.90.07"}, std::pair{"535.104.05", "550.90.07"},
        std::pair{"95.04.5C.00.01", "95.04.6A.00.02"}}) {
    script.replace(script.find(from), std::string(from).size(), to);
  }
  std::ofstream(dir_ + "/upgraded.json") << script;
  const std::string flashed = dir_ + "/sysfs";
  std::filesystem::copy(sysfs, flashed, std::filesystem::copy_options::recursive);
  std::ofstream(flashed + "/class/infiniband/mlx5_0/fw_ver") << "28.42.1000\n";
  const std::string upgraded = dir_ + "/root";
  std::filesystem::copy(root, upgraded, std::filesystem::copy_options::recursive);
  std::string status = ReadFile(root + "/var/lib/dpkg/status");
  for (size_t at; (at = status.find("1.17.3-1")) != std::string::npos;) {
    status.replace(at, 8, "1.17.8-1");
  }
  std::ofstream(upgraded + "/var/lib/dpkg/status") << status;
  start(dir_ + "/upgraded.json", flashed, upgraded);
  ASSERT_TRUE(WaitFor([&] { return Node("up-l4").at("facts").at("driver_version") == "550.90.07"; },
                      15000));
  auto r = Cli({"-o", "json", "audit", "list", "--actor", "node/up-l4"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto items = json::parse(r.out).at("items").as_array();
  ASSERT_EQ(items.size(), 1u) << r.out;
  EXPECT_EQ(items[0].at("action"), "versions changed");
  EXPECT_EQ(items[0].at("before").at("driver"), "535.104.05");
  EXPECT_EQ(items[0].at("after").at("driver"), "550.90.07");
  EXPECT_EQ(items[0].at("after").at("GPU-aaaabbbb-cccc-dddd-eeee-ffff00001111 vbios"),
            "95.04.6A.00.02");
  EXPECT_EQ(items[0].at("after").at("GPU-aaaabbbb-cccc-dddd-eeee-ffff00001111 gsp"), "550.90.07");
  EXPECT_EQ(items[0].at("before").at("nic mlx5_0 firmware"), "28.41.1000");
  EXPECT_EQ(items[0].at("after").at("nic mlx5_0 firmware"), "28.42.1000");
  EXPECT_FALSE(items[0].at("before").as_object().contains("nic mlx5_1 firmware"));  // unchanged
  EXPECT_FALSE(items[0].at("before").as_object().contains("cuda_driver"));          // unchanged
  EXPECT_EQ(items[0].at("before").at("container_toolkit"), "1.17.3");
  EXPECT_EQ(items[0].at("after").at("container_toolkit"), "1.17.8");
}

}  // namespace
}  // namespace gpufleet::e2e
