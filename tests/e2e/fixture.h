#pragma once
// The shared fixture of the end-to-end tests: a controller of its own per test, the fleet in
// tests/fixtures/e2e-fleet.yaml, and helpers to run the CLI and simulated agents.

#include <gtest/gtest.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "harness.h"

namespace gpufleet::e2e {

namespace json = boost::json;

inline const std::string kFleet =
    std::string(GPUFLEET_SOURCE_DIR) + "/tests/fixtures/e2e-fleet.yaml";
inline const std::string kNvmlFixtures = std::string(GPUFLEET_SOURCE_DIR) + "/tests/fixtures/nvml/";

// Today's date (UTC) and days from it, "YYYY-MM-DD", as the API writes dates.
inline std::string UtcDate(int64_t days_from_today = 0) {
  auto t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now() +
                                                std::chrono::hours(24 * days_from_today));
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&t));
  return buf;
}

class E2E : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    for (char& c : name) c = c == '/' ? '-' : c;  // a parameterised test's "Name/param"
    dir_ = TempDir(name);
    controller_ = std::make_unique<ControllerProcess>(dir_ + "/data", ControllerFlags());
    std::filesystem::create_directories(dir_ + "/data");
    controller_->Start();
  }
  void TearDown() override {
    agents_.clear();
    controller_->Stop();
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }

  // The controller's extra flags: a store (none: SQLite in its data directory), TLS.
  virtual std::vector<std::string> ControllerFlags() { return {}; }

  RunResult Cli(std::vector<std::string> args) {
    std::vector<std::string> full{"--data-dir", controller_->data_dir()};
    full.insert(full.end(), args.begin(), args.end());
    return RunGpufleet(full);
  }

  void Apply() {
    auto r = Cli({"apply", "-f", kFleet});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("clusters: 2 created"), std::string::npos) << r.out;
  }

  // Writes `yaml` to <test dir>/<name> and runs `gpufleet apply -f` on it.
  RunResult ApplyText(const std::string& name, const std::string& yaml) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path) << yaml;
    return Cli({"apply", "-f", path});
  }

  std::string JoinToken(const std::string& pool) {
    auto r = Cli({"tokens", "create", "--pool", pool});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::string token = r.out.substr(0, r.out.find('\n'));
    EXPECT_EQ(token.rfind("gfj_", 0), 0u) << r.out;
    return token;
  }

  // `extra`: more flags of `gpufleet sim` (--driver, --container-toolkit, ...).
  Process& Sim(const std::string& token, const std::string& prefix, int nodes,
               const std::string& model, int gpus, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args{GPUFLEET_BIN};
    if (std::filesystem::exists(controller_->data_dir() + "/tls/ca.pem")) {
      args.insert(args.end(), {"--ca-file", controller_->data_dir() + "/tls/ca.pem"});
    }
    args.insert(args.end(),
                {"sim", "--controller", controller_->address(), "--join-token", token, "--prefix",
                 prefix, "--workload", "off", "--nodes", std::to_string(nodes), "--model", model,
                 "--gpus-per-node", std::to_string(gpus),
                 // node tokens kept: a simulator started again rejoins as the same nodes
                 "--state-dir", dir_ + "/sim-state"});
    args.insert(args.end(), extra.begin(), extra.end());
    agents_.push_back(std::make_unique<Process>(args, std::map<std::string, std::string>{},
                                                dir_ + "/sim-" + prefix + ".log"));
    return *agents_.back();
  }

  // A node's first GPU's `metric`, one point a second over the last ten minutes (the maximum
  // of each second), oldest first; none while nothing is stored.
  json::array SecondPoints(const std::string& node, const std::string& metric = "gpu_temp") {
    auto [s, v] = controller_->Call("GET", "/api/v1/query_range?metric=" + metric +
                                               "&node=" + node + "&start=-10m&step=1s&agg=max");
    return s == 200 && !v.at("series").as_array().empty()
               ? v.at("series").at(0).at("points").as_array()
               : json::array{};
  }
  static int64_t NowMs() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  // Waits until the node has a stored second later than `after_ms`.
  bool WaitPointAfter(const std::string& node, int64_t after_ms, int timeout_ms = 30000) {
    return WaitFor(
        [&] {
          auto p = SecondPoints(node);
          return !p.empty() && p.back().at(0).as_int64() > after_ms;
        },
        timeout_ms);
  }
  // Every second once: no point missing between the first and the last, none twice.
  static void ExpectEverySecond(const json::array& points) {
    for (size_t i = 1; i < points.size(); ++i) {
      int64_t gap = points[i].at(0).as_int64() - points[i - 1].at(0).as_int64();
      EXPECT_EQ(gap, 1000) << "a second is missing or doubled at point " << i;
    }
  }

  json::value Node(const std::string& name) {
    return controller_->Call("GET", "/api/v1/nodes/" + name).second;
  }
  std::string State(const std::string& name) {
    auto [status, v] = controller_->Call("GET", "/api/v1/nodes/" + name);
    return status == 200 ? std::string(v.at("state").as_string()) : "absent";
  }
  bool WaitState(const std::string& node, const std::string& state, int timeout_ms = 15000) {
    return WaitFor([&] { return State(node) == state; }, timeout_ms);
  }

  std::string dir_;
  std::unique_ptr<ControllerProcess> controller_;
  std::vector<std::unique_ptr<Process>> agents_;
};

}  // namespace gpufleet::e2e
