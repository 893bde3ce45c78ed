// Rollouts end to end: the real controller, simulated agents whose actions take seconds, and
// the API, the CLI and the stored events as a user sees them. A driver rollout over three
// clusters within max_unavailable, computed from the nodes' own events; a faulty target whose
// canary raises XIDs, halts, rolls back and fires an alert; a controller killed mid-batch that
// resumes without repeating an action (counted from the agents' own action log); an install
// whose answer went to a controller that died before reading it, asked again; compatibility
// refusals and an admin's forced override in the audit log; node actions.

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "fixture.h"
#include "tests/support/fixtures.h"

namespace gpufleet::e2e {
namespace {

const std::string kFleet3 =
    ::gpufleet::testing::FleetFixture("e2e-rollouts");  // tests/fixtures/fleets/

constexpr char kOld[] = "550.54.15";
constexpr char kNew[] = "580.95.05";

class Rollouts : public E2E {
 protected:
  void StartPools(int per_pool, const std::string& install_time = "1s") {
    auto applied = ApplyText("fleet.yaml", kFleet3);
    ASSERT_EQ(applied.exit_code, 0) << applied.err;
    for (const char* pool : {"p1", "p2", "p3"}) {
      std::vector<std::string> args{GPUFLEET_BIN,
                                    "sim",
                                    "--controller",
                                    controller_->address(),
                                    "--join-token",
                                    JoinToken(pool),
                                    "--prefix",
                                    pool,
                                    "--workload",
                                    "off",
                                    "--nodes",
                                    std::to_string(per_pool),
                                    "--model",
                                    "L4",
                                    "--gpus-per-node",
                                    "1",
                                    "--sim-install-time",
                                    install_time,
                                    "--sim-reboot-time",
                                    "2s",
                                    "--sim-validate-time",
                                    "1s",
                                    "--action-log",
                                    dir_ + "/actions.jsonl"};
      agents_.push_back(std::make_unique<Process>(args, std::map<std::string, std::string>{},
                                                  dir_ + "/sim-" + pool + ".log"));
    }
    ASSERT_TRUE(WaitFor(
        [&] {
          auto [s, v] = controller_->Call("GET", "/api/v1/nodes?state=ready&limit=1");
          return s == 200 && v.at("total").as_int64() == 3 * per_pool;
        },
        std::max(60000, 3 * per_pool * 500)))
        << "the simulated nodes did not all register";
  }

  json::value Rollout(int64_t id) {
    return controller_->Call("GET", "/api/v1/rollouts/" + std::to_string(id)).second;
  }

  // Waits until the rollout is in one of `states`; returns it.
  json::value WaitRollout(int64_t id, std::set<std::string> states, int timeout_ms) {
    json::value r;
    WaitFor(
        [&] {
          r = Rollout(id);
          return r.is_object() && states.count(std::string(r.at("state").as_string()));
        },
        timeout_ms);
    return r;
  }

  // Each (node, action) the agents ran, from their own log.
  std::map<std::pair<std::string, std::string>, int> ActionsRun() {
    std::map<std::pair<std::string, std::string>, int> out;
    std::ifstream in(dir_ + "/actions.jsonl");
    std::string line;
    while (std::getline(in, line)) {
      auto v = json::parse(line);
      ++out[{std::string(v.at("node").as_string()), std::string(v.at("action").as_string())}];
    }
    return out;
  }

  // The most nodes of one pool out of service (not ready or degraded) at any instant since
  // `since`, replayed from the nodes' stored state changes.
  int MaxOutOfService(const std::vector<std::string>& nodes, const std::string& since) {
    std::vector<std::tuple<std::string, std::string, std::string>> changes;  // time, node, to
    for (const auto& n : nodes) {
      auto [s, ev] = controller_->Call("GET", "/api/v1/nodes/" + n + "/events?limit=1000");
      EXPECT_EQ(s, 200);
      for (const auto& e : ev.at("items").as_array()) {
        std::string t(e.at("time").as_string());
        if (t >= since) changes.emplace_back(t, n, std::string(e.at("to").as_string()));
      }
    }
    std::sort(changes.begin(), changes.end());
    std::map<std::string, bool> out;
    int most = 0;
    for (const auto& [t, node, to] : changes) {
      out[node] = to != "ready" && to != "degraded";
      int now = 0;
      for (const auto& [name, o] : out) now += o;
      most = std::max(most, now);
    }
    return most;
  }
};

// 3 clusters of 10 nodes at 20% by default; GPUFLEET_E2E_ROLLOUT_NODES (a multiple of 3) and
// GPUFLEET_E2E_ROLLOUT_UNAVAILABLE ("10%") run the issue's 500 nodes at 10% by hand.
TEST_F(Rollouts, ADriverRolloutStaysWithinMaxUnavailableAndEveryNodeEndsOnTheTarget) {
  const char* nodes_env = std::getenv("GPUFLEET_E2E_ROLLOUT_NODES");
  const char* share_env = std::getenv("GPUFLEET_E2E_ROLLOUT_UNAVAILABLE");
  const int per_pool = nodes_env ? std::atoi(nodes_env) / 3 : 10;
  const std::string share = share_env ? share_env : "20%";
  const int bound = std::max(1, per_pool * std::atoi(share.c_str()) / 100);
  const int total = 3 * per_pool;
  StartPools(per_pool);
  const std::vector<std::string> request{"--target",          kNew, "--clusters",     "c1,c2,c3",
                                         "--canary",          "1",  "--confidence",   "5s",
                                         "--batch-size",      "2",  "--batch-growth", "exponential",
                                         "--max-unavailable", share};
  // The plan first: it changes nothing.
  std::vector<std::string> plan_args{"rollouts", "plan"};
  plan_args.insert(plan_args.end(), request.begin(), request.end());
  auto plan = Cli(plan_args);
  EXPECT_EQ(plan.exit_code, 0) << plan.err << plan.out;
  EXPECT_NE(plan.out.find(std::to_string(total) + " node(s), expected"), std::string::npos)
      << plan.out;
  EXPECT_NE(plan.out.find("canary"), std::string::npos) << plan.out;
  auto [ls, none] = controller_->Call("GET", "/api/v1/rollouts");
  ASSERT_EQ(ls, 200);
  EXPECT_EQ(none.at("total"), 0) << "a plan starts nothing";

  std::vector<std::string> start_args{"rollouts", "start"};
  start_args.insert(start_args.end(), request.begin(), request.end());
  auto start = Cli(start_args);
  ASSERT_EQ(start.exit_code, 0) << start.err;
  EXPECT_NE(start.out.find("rollout 1: driver 580.95.05"), std::string::npos) << start.out;
  auto began_at = std::chrono::steady_clock::now();
  json::value r =
      WaitRollout(1, {"completed", "halted", "rolled_back", "aborted"}, 240000 + total * 2000);
  ASSERT_EQ(r.at("state"), "completed") << r;
  EXPECT_EQ(r.at("counts").at("updated"), total) << r;
  std::printf("rollout of %d nodes at %s unavailable: %.1f s\n", total, share.c_str(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - began_at).count());
  std::vector<std::string> nodes;
  for (const auto& n : r.at("nodes").as_array()) {
    EXPECT_EQ(n.at("from"), kOld);
    EXPECT_EQ(n.at("to"), kNew);
    nodes.emplace_back(n.at("node").as_string());
  }
  // Every node reports the target and is back in service.
  auto [ns, list] = controller_->Call("GET", "/api/v1/nodes?limit=100");
  for (const auto& n : list.at("items").as_array()) {
    EXPECT_EQ(n.at("state"), "ready") << n;
    auto node = Node(std::string(n.at("name").as_string()));
    EXPECT_EQ(node.at("facts").at("driver_version"), kNew) << n;
    EXPECT_EQ(node.at("facts").at("cuda_driver_version"), "13.0");
  }
  // The share of each pool (and cluster: one pool each), from the nodes' own state changes.
  std::string began(r.at("started_at").as_string());
  for (const char* pool : {"p1", "p2", "p3"}) {
    std::vector<std::string> of_pool;
    for (const auto& n : nodes) {
      if (n.rfind(std::string(pool) + "-", 0) == 0) of_pool.push_back(n);
    }
    int most = MaxOutOfService(of_pool, began);
    std::printf("pool %s: at most %d of %d out of service at once (bound %d)\n", pool, most,
                per_pool, bound);
    EXPECT_LE(most, bound) << pool;
    EXPECT_GE(most, 1) << pool;
  }
  // Each node ran its install and its reboot once.
  for (const auto& n : nodes) {
    EXPECT_EQ((ActionsRun()[{n, "install-driver"}]), 1) << n;
    EXPECT_EQ((ActionsRun()[{n, "reboot"}]), 1) << n;
  }
  // The CLI's status and the node's version history.
  auto status = Cli({"rollouts", "status", "1"});
  EXPECT_EQ(status.exit_code, 0);
  EXPECT_NE(status.out.find("completed"), std::string::npos) << status.out;
  auto versions = controller_->Call("GET", "/api/v1/nodes/p1-0000/versions").second;
  EXPECT_EQ(versions.at("driver"), kNew);
  ASSERT_EQ(versions.at("history").as_array().size(), 1u) << versions;
  EXPECT_EQ(versions.at("history").at(0).at("from"), kOld);
  // Every step is an event.
  auto events = controller_->Call("GET", "/api/v1/rollouts/1/events?limit=1000").second;
  EXPECT_GE(events.at("items").as_array().size(), 30u * 4);
}

TEST_F(Rollouts, AFaultyTargetHaltsAtTheCanariesRollsBackAndFiresAnAlert) {
  StartPools(4);
  auto [fs, faulty] = controller_->Call("POST", "/api/v1/sim/faulty-versions",
                                        R"({"kind":"driver","version":"580.95.05"})");
  ASSERT_EQ(fs, 200) << faulty;
  auto cli = Cli({"sim", "faulty-version", "--kind", "gpu-firmware", "96.00.99.00.01"});
  EXPECT_EQ(cli.exit_code, 0) << cli.err;
  EXPECT_EQ(
      controller_->Call("GET", "/api/v1/sim/faulty-versions").second.at("items").as_array().size(),
      2u);
  auto [s, r] = controller_->Call("POST", "/api/v1/rollouts", R"({"kind":"driver",
      "target":"580.95.05","selector":{"pools":["p2","p3"]},"strategy":{"canary":1,
      "confidence":"40s","max_unavailable":1,"max_failed_nodes":1,"rollback":"automatic"}})");
  ASSERT_EQ(s, 201) << r;
  int64_t id = r.at("id").as_int64();
  json::value done = WaitRollout(id, {"rolled_back", "completed", "halted"}, 180000);
  ASSERT_EQ(done.at("state"), "rolled_back") << done;
  // The injected XID trips two gates: the XID gate itself, and the alert gate once GpuXidWarning
  // fires for the node; which one sees it first is a race, and either is a right reason.
  const std::string reason(done.at("reason").as_string());
  EXPECT_TRUE(reason.find("XID after its update") != std::string::npos ||
              reason.find("alert GpuXid") != std::string::npos)
      << done;
  int rolled = 0;
  for (const auto& n : done.at("nodes").as_array()) {
    std::string state(n.at("state").as_string());
    EXPECT_TRUE(state == "rolled_back" || state == "skipped") << n;
    rolled += state == "rolled_back";
  }
  EXPECT_GE(rolled, 1);
  for (const char* node : {"p2-0000", "p2-0001", "p3-0000", "p3-0001"}) {
    EXPECT_EQ(Node(node).at("facts").at("driver_version"), kOld) << node;
  }
  // The built-in alert fires.
  EXPECT_TRUE(WaitFor(
      [&] {
        auto [as, alerts] = controller_->Call("GET", "/api/v1/alerts?state=firing&limit=1000");
        for (const auto& a : alerts.at("items").as_array()) {
          if (a.at("alertname") == "RolloutHalted") return true;
        }
        return false;
      },
      20000));
}

TEST_F(Rollouts, AControllerKilledMidBatchResumesAndNoActionRunsTwice) {
  StartPools(6);
  auto [s, r] = controller_->Call("POST", "/api/v1/rollouts", R"({"kind":"driver",
      "target":"580.95.05","selector":{"clusters":["c2","c3"]},"strategy":{"canary":0,
      "batch":{"size":6},"max_unavailable":2}})");
  ASSERT_EQ(s, 201) << r;
  // Mid-batch: some nodes done, others in flight.
  ASSERT_TRUE(WaitFor(
      [&] {
        auto v = Rollout(1);
        return v.at("counts").at("updated").as_int64() >= 2 &&
               v.at("counts").at("updated").as_int64() < 10;
      },
      120000));
  controller_->Kill();
  std::this_thread::sleep_for(std::chrono::seconds(2));  // the agents carry on meanwhile
  controller_->Start();
  json::value done = WaitRollout(1, {"completed", "halted", "rolled_back"}, 180000);
  ASSERT_EQ(done.at("state"), "completed") << done;
  auto ran = ActionsRun();
  for (const auto& n : done.at("nodes").as_array()) {
    std::string node(n.at("node").as_string());
    EXPECT_EQ((ran[{node, "install-driver"}]), 1) << node;
    EXPECT_EQ((ran[{node, "reboot"}]), 1) << node;
    EXPECT_EQ(Node(node).at("facts").at("driver_version"), kNew) << node;
  }
}

// The agent's answer to an install is written into the connection of a controller that never
// reads it (stopped, then killed): the restarted controller asks again under the same id once
// the agent is back, the agent answers from its record, and the install ran once.
TEST_F(Rollouts, AnInstallWhoseAnswerWasLostWithItsControllerIsAskedAgainNotRunTwice) {
  StartPools(1, "3s");
  auto [s, r] = controller_->Call("POST", "/api/v1/rollouts", R"({"kind":"driver",
      "target":"580.95.05","selector":{"clusters":["c2"]},"strategy":{"canary":0,
      "batch":{"size":1}}})");
  ASSERT_EQ(s, 201) << r;
  ASSERT_TRUE(WaitFor([&] { return Rollout(1).at("nodes").at(0).at("step") == "install"; }, 60000))
      << Rollout(1);
  controller_->Signal(SIGSTOP);
  // The install takes 3 s; its answer goes into the stopped controller's socket.
  std::this_thread::sleep_for(std::chrono::seconds(5));
  controller_->Kill();
  controller_->Start();
  json::value done = WaitRollout(1, {"completed", "halted", "rolled_back"}, 120000);
  ASSERT_EQ(done.at("state"), "completed") << done;
  std::string node(done.at("nodes").at(0).at("node").as_string());
  auto ran = ActionsRun();
  EXPECT_EQ((ran[{node, "install-driver"}]), 1);
  EXPECT_EQ((ran[{node, "reboot"}]), 1);
  auto events = controller_->Call("GET", "/api/v1/rollouts/1/events?limit=100").second;
  int asked = 0;
  for (const auto& e : events.at("items").as_array()) {
    asked += std::string(e.at("message").as_string()).find("asked again") != std::string::npos;
  }
  EXPECT_EQ(asked, 1) << events;
  EXPECT_NE(ReadFile(dir_ + "/sim-p2.log").find("asked again: answered as before"),
            std::string::npos);
}

TEST_F(Rollouts, AnIncompatibleTargetIsRefusedWithTheRulesUnlessAnAdminForcesIt) {
  StartPools(1);
  // Pool p1 needs CUDA 12.4: 470.256.02 is too old and end of life.
  auto [s, refused] = controller_->Call("POST", "/api/v1/rollouts",
                                        R"({"kind":"driver","target":"470.256.02",
      "selector":{"pools":["p1"]}})");
  ASSERT_EQ(s, 409) << refused;
  std::string rules;
  for (const auto& f : refused.at("failed").as_array()) {
    rules += std::string(f.at("rule").as_string()) + " ";
    EXPECT_EQ(f.at("pool"), "p1");
    EXPECT_FALSE(f.at("source").as_string().empty());
  }
  EXPECT_NE(rules.find("cuda"), std::string::npos) << refused;
  EXPECT_NE(rules.find("branch-eol"), std::string::npos) << refused;
  EXPECT_EQ(controller_->Call("GET", "/api/v1/rollouts").second.at("total"), 0);
  // The CLI says why and exits 1.
  auto cli = Cli({"rollouts", "start", "--target", "470.256.02", "--pools", "p1"});
  EXPECT_EQ(cli.exit_code, 1);
  EXPECT_NE(cli.err.find("compatibility rule"), std::string::npos) << cli.err;
  // A force needs a reason; with one an admin starts it, and the audit log keeps the reason.
  auto [s2, no_reason] = controller_->Call(
      "POST", "/api/v1/rollouts",
      R"({"kind":"driver","target":"470.256.02","selector":{"pools":["p1"]},"force":true})");
  EXPECT_EQ(s2, 400) << no_reason;
  auto [s3, forced] = controller_->Call("POST", "/api/v1/rollouts",
                                        R"({"kind":"driver","target":"470.256.02",
      "selector":{"pools":["p1"]},"force":true,"reason":"vendor image pinned, ticket OPS-1"})");
  ASSERT_EQ(s3, 201) << forced;
  EXPECT_EQ(forced.at("forced"), "vendor image pinned, ticket OPS-1");
  auto [as, audit] = controller_->Call("GET", "/api/v1/audit?limit=20");
  bool found = false;
  for (const auto& a : audit.at("items").as_array()) {
    found |= a.at("target") == "rollout/1" &&
             json::serialize(a.at("after")).find("ticket OPS-1") != std::string::npos;
  }
  EXPECT_TRUE(found) << audit;
  // A bad request names the field; an unknown one too.
  auto [s4, bad] = controller_->Call("POST", "/api/v1/rollouts",
                                     R"({"kind":"driver","target":"580.95.05",
      "selector":{"pools":["p1"]},"strategy":{"max_unavailabel":"10%"}})");
  EXPECT_EQ(s4, 400);
  EXPECT_NE(std::string(bad.at("error").at("message").as_string())
                .find("strategy.max_unavailabel: unknown field"),
            std::string::npos)
      << bad;
}

TEST_F(Rollouts, NodeActionsRebootAndResetThroughTheAgentAndRefuseWhatCannotBe) {
  StartPools(1);
  auto [s, op] =
      controller_->Call("POST", "/api/v1/nodes/p1-0000/actions", R"({"action":"reboot"})");
  ASSERT_EQ(s, 202) << op;
  EXPECT_TRUE(WaitFor(
      [&] {
        auto ops = controller_->Call("GET", "/api/v1/nodes/p1-0000/actions").second;
        return ops.at("items").at(0).at("state") == "succeeded";
      },
      30000));
  EXPECT_EQ(State("p1-0000"), "ready");
  EXPECT_EQ((ActionsRun()[{"p1-0000", "reboot"}]), 1);
  auto reset = Cli({"nodes", "reset-gpu", "p2-0000", "0"});
  EXPECT_EQ(reset.exit_code, 0) << reset.err;
  EXPECT_TRUE(WaitFor(
      [&] {
        auto ops = controller_->Call("GET", "/api/v1/nodes/p2-0000/actions").second;
        return ops.at("items").at(0).at("state") == "succeeded";
      },
      30000));
  auto bad = Cli({"nodes", "reset-gpu", "p2-0000", "5"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("has no GPU 5"), std::string::npos) << bad.err;
  auto [ds, del] = controller_->Call("DELETE", "/api/v1/nodes/p3-0000");
  EXPECT_EQ(ds, 409) << del;
  auto maintenance = Cli({"nodes", "maintenance", "p3-0000", "enter"});
  EXPECT_EQ(maintenance.exit_code, 0) << maintenance.err;
  EXPECT_TRUE(WaitState("p3-0000", "maintenance"));
  EXPECT_EQ(Cli({"nodes", "maintenance", "p3-0000", "leave"}).exit_code, 0);
  EXPECT_TRUE(WaitState("p3-0000", "ready"));
}

// A real agent (the fake NVML library) carries node actions out through the programs of its
// --action-dir, with the arguments sent and the exit code back; a program it does not have is
// a refusal, and the node is left drained for an operator.
TEST_F(E2E, ARealAgentRunsItsActionProgramsAndRefusesAMissingOne) {
  Apply();
  std::string actions = dir_ + "/actions";
  std::filesystem::create_directories(actions);
  {
    std::ofstream script(actions + "/reset-gpu");
    script << "#!/bin/sh\necho \"reset $1\" >> " << dir_ << "/ran.txt\necho resetting GPU $1\n";
  }
  std::filesystem::permissions(actions + "/reset-gpu", std::filesystem::perms::owner_all);
  std::vector<std::string> args{
      GPUFLEET_BIN,     "agent",         "--controller", controller_->address(),
      "--join-token",   JoinToken("l4"), "--backend",    "nvml",
      "--nvml-library", FAKE_NVML_PATH,  "--hostname",   "real-l4",
      "--action-dir",   actions};
  agents_.push_back(std::make_unique<Process>(
      args, std::map<std::string, std::string>{{"FAKE_NVML_SCRIPT", kNvmlFixtures + "l4x1.json"}},
      dir_ + "/agent.log"));
  ASSERT_TRUE(WaitState("real-l4", "ready")) << ReadFile(dir_ + "/agent.log");
  auto last = [&] {
    return controller_->Call("GET", "/api/v1/nodes/real-l4/actions").second.at("items").at(0);
  };
  auto [s, op] = controller_->Call("POST", "/api/v1/nodes/real-l4/actions",
                                   R"({"action":"reset-gpu","gpu":0})");
  ASSERT_EQ(s, 202) << op;
  ASSERT_TRUE(WaitFor(
      [&] { return last().at("state") != "waiting_for_jobs" && last().at("state") != "running"; },
      20000));
  EXPECT_EQ(last().at("state"), "succeeded") << last();
  EXPECT_EQ(ReadFile(dir_ + "/ran.txt"), "reset 0\n");
  EXPECT_TRUE(WaitState("real-l4", "ready"));
  // No reboot program: refused, and the node stays drained.
  auto [s2, op2] =
      controller_->Call("POST", "/api/v1/nodes/real-l4/actions", R"({"action":"reboot"})");
  ASSERT_EQ(s2, 202) << op2;
  ASSERT_TRUE(WaitFor([&] { return last().at("state") == "failed"; }, 20000)) << last();
  std::string message(last().at("message").as_string());
  EXPECT_NE(message.find("refused: " + actions + "/reboot"), std::string::npos) << message;
  EXPECT_EQ(State("real-l4"), "drained");
  // The audit log has both outcomes.
  auto audit = controller_->Call("GET", "/api/v1/audit?limit=50").second;
  int outcomes = 0;
  for (const auto& a : audit.at("items").as_array()) {
    outcomes += a.at("target") == "node/real-l4" &&
                std::string(a.at("action").as_string()).find("(operation") != std::string::npos;
  }
  EXPECT_EQ(outcomes, 2) << audit;
}

}  // namespace
}  // namespace gpufleet::e2e
