// The controller's wiring: what Start() starts and what it leaves to its caller.

#include "controller/controller.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "store/store.h"

namespace gpufleet {
namespace {

constexpr char kFleet[] = R"(apiVersion: gpufleet/v1
kind: Fleet
clusters:
  - name: burst
    type: training
    site: lab
    pools:
      - name: b200
        gpu_model: H100-SXM5-80GB
        gpus_per_node: 8
        scaling:
          min_nodes: 2
          max_nodes: 4
          interval: 1s
          actuator: {type: command, provision: "true", deprovision: "true"}
)";

// The pool's scale events' kinds, newest first, read from the controller's own SQLite file.
std::vector<std::string> EventKinds(const std::string& dir) {
  auto store = OpenStore("sqlite:" + dir + "/gpufleet.db");
  EXPECT_TRUE(store.ok()) << store.error().message;
  std::vector<std::string> kinds;
  if (!store.ok()) return kinds;
  auto events = store.value()->ListScaleEvents("b200", 100);
  EXPECT_TRUE(events.ok());
  for (const auto& e : events.value()) {
    kinds.emplace_back(boost::json::parse(e.doc).at("kind").as_string());
  }
  return kinds;
}

// `gpufleet up` sets its pools' policies before their nodes register. With defer_scaling no
// decision is made until StartScaling(): a decision before it would see an empty pool and ask
// for nodes the pool already has. Here the pool has no nodes at all, so the first decision
// asks for its minimum of 2 at once.
TEST(Controller, DeferredScalingDecidesNothingUntilStartScaling) {
  std::string dir = std::filesystem::temp_directory_path() /
                    ("gpufleet-controller-test-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  ControllerOptions o;
  o.data_dir = dir;
  o.listen = "127.0.0.1:0";
  o.heartbeat_timeout_ms = 400;  // the monitor, which makes the decisions, runs every 100 ms
  o.defer_scaling = true;
  {
    Controller c(o);
    ASSERT_TRUE(c.Start().ok());
    ASSERT_TRUE(c.ApplyFleetYaml(kFleet, "fleet.yaml").ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // 15 monitor passes
    EXPECT_EQ(EventKinds(dir), std::vector<std::string>{"policy"}) << "no decision yet";
    c.StartScaling();
    std::vector<std::string> kinds;
    for (int i = 0; i < 100 && kinds.size() < 2; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      kinds = EventKinds(dir);
    }
    ASSERT_EQ(kinds.size(), 2u);
    EXPECT_EQ(kinds[0], "scale_up") << "the first decision, once started";
    c.Stop();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpufleet
