// The rollout engine against a real fleet registry and store, with scripted agents: the
// unavailability bound at every tick, stages in order, a failing canary that halts and rolls
// back, a restart mid-rollout that repeats no action, maintenance windows, the failure
// threshold, and requests refused with the field named.

#include "lifecycle/rollout_service.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "config/fleet_spec.h"
#include "tests/support/fixtures.h"
#include "tests/support/temp_dir.h"

namespace gpufleet::lifecycle {
namespace {

const std::string kFleet = ::gpufleet::testing::FleetFixture("rollouts");  // tests/fixtures/fleets/

constexpr int64_t kWed = 1'796'169'600'000;      // 2026-12-02 00:00 UTC, a Wednesday
constexpr int64_t kSat0200 = 1'796'436'000'000;  // 2026-12-05 02:00 UTC

// A node's agent as the engine sees it: it answers commands, and a reboot takes it away and
// brings it back with what was installed.
struct FakeNode {
  std::string name, pool, token, driver = "550.54.15", pending;
  uint64_t connection = 0;
  bool connected = true;
  int64_t back_at = 0;             // rebooting until then
  std::map<std::string, int> ran;  // action -> times run
};

class RolloutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    clock_->Set(kWed);
    store_ = store::Open("sqlite:" + (dir_ / "db").string()).value();
    fleet_ = std::make_unique<FleetService>(*store_.fleet, *store_.tokens, GpuCatalog::Builtin(),
                                            clock_, FleetOptions{});
    ASSERT_TRUE(fleet_->Load().ok());
    auto spec = ParseFleetSpec(kFleet, "fleet.yaml", *GpuCatalog::Builtin());
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    ASSERT_TRUE(fleet_->Apply(spec.value()).ok());
    for (const char* pool : {"p1", "p2", "e1"}) {
      join_[pool] = fleet_->CreateJoinToken(pool, 3'600'000, "test")->secret;
    }
    StartService();
  }
  void TearDown() override {
    rollouts_.reset();
    fleet_.reset();
    store_ = {};
  }

  void StartService() {
    rollouts_ =
        std::make_unique<RolloutService>(*fleet_, nullptr, *store_.rollouts, *store_.audit, clock_);
    ASSERT_TRUE(rollouts_->Load().ok());
    // A restarted controller has a new bus: the service claims the answers it still waits for.
    bus_ = std::make_unique<runtime::CommandBus>(clock_);
    bus_->set_transport([this](const std::string& node, const proto::Command& cmd) -> Status {
      auto it = nodes_.find(node);
      if (it == nodes_.end() || !it->second.connected) {
        return MakeError(ErrorCode::kConflict, node + " is not connected");
      }
      sent_.emplace_back(node, cmd);
      return {};
    });
    RolloutHooks hooks;
    hooks.commands = bus_.get();
    hooks.busy = [this](const std::string& node) { return busy_.count(node) > 0; };
    hooks.last_xid = [this] { return xids_; };
    rollouts_->set_hooks(hooks);
  }

  void AddNodes(const std::string& pool, int n) {
    for (int i = 0; i < n; ++i) {
      FakeNode node;
      node.name = pool + "-" + std::to_string(i);
      node.pool = pool;
      nodes_[node.name] = node;
      Hello(nodes_[node.name]);
    }
  }
  void Hello(FakeNode& n) {
    proto::Hello h;
    h.join_token = n.token.empty() ? join_[n.pool] : "";
    h.node_token = n.token;
    h.facts.hostname = n.name;
    h.facts.driver_version = n.driver;
    Gpu g;
    g.uuid = "GPU-" + n.name;
    g.name = "NVIDIA L4";
    g.vbios_version = "95.04.00.00.01";
    h.gpus.push_back(g);
    auto w = fleet_->OnHello(h, "127.0.0.1");
    ASSERT_TRUE(w.ok()) << w.error().message;
    if (!w->node_token.empty()) n.token = w->node_token;
    n.connection = fleet_->OnConnected(n.name);
    n.connected = true;
  }

  // The agents' side: answer what was sent; a reboot comes back after `reboot_ms`.
  void Agents(int64_t reboot_ms = 10'000) {
    auto sent = std::move(sent_);
    sent_.clear();
    for (auto& [name, cmd] : sent) {
      FakeNode& n = nodes_[name];
      ++n.ran[cmd.action];
      proto::CommandResult r{cmd.id, cmd.gpu, cmd.action, true, "done", 0, 100};
      if (cmd.action == "install-driver") {
        if (fail_install_.count(name)) {
          r.ok = false;
          r.exit_code = 2;
          r.message = "dpkg: error processing package";
        } else {
          n.pending = cmd.args.at(0);
        }
      }
      if (cmd.action == "validate" && fail_validate_) {
        r.ok = false;
        r.exit_code = 1;
        r.message = "dcgmi diag: FAIL";
      }
      bus_->OnResult(name, r);
      if (cmd.action == "reboot") {
        fleet_->OnClosed(name, n.connection);
        n.connected = false;
        n.back_at = clock_->NowMs() + reboot_ms;
      }
    }
    for (auto& [name, n] : nodes_) {
      if (!n.connected && n.back_at && clock_->NowMs() >= n.back_at) {
        n.back_at = 0;
        if (!n.pending.empty()) n.driver = std::exchange(n.pending, "");
        Hello(n);
      }
    }
  }

  // Drained or draining nodes per pool, now.
  std::map<std::string, int> Down() const {
    std::map<std::string, int> out;
    for (const auto& n : fleet_->Nodes({})) {
      if (n.state != NodeState::kReady && n.state != NodeState::kDegraded) ++out[n.pool];
    }
    return out;
  }

  // Runs until the rollout ends (or `max_ticks`), a tick a second; checks the bound each tick.
  Rollout Run(int64_t id, int max_down_per_pool, int max_ticks = 2000) {
    for (int t = 0; t < max_ticks; ++t) {
      rollouts_->Tick();
      for (const auto& [pool, down] : Down()) {
        EXPECT_LE(down, max_down_per_pool) << "pool " << pool << " at tick " << t;
        max_seen_ = std::max(max_seen_, down);
      }
      Agents();
      clock_->Advance(1000);
      auto r = rollouts_->Get(id);
      if (r->Ended() && std::none_of(r->nodes.begin(), r->nodes.end(),
                                     [](const RolloutNode& n) { return n.Busy(); })) {
        return r.value();
      }
    }
    return rollouts_->Get(id).value();
  }

  Result<Rollout> Start(const std::string& body) {
    auto req = ParseRolloutRequest(body);
    if (!req.ok()) return req.error();
    return rollouts_->Create(req.value(), "test", "");
  }

  testing::TempDir tmp_{"gf-rollouts"};  // removed with everything in it after the test
  std::filesystem::path dir_ = tmp_.path();
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  store::Stores store_;
  std::unique_ptr<FleetService> fleet_;
  std::unique_ptr<RolloutService> rollouts_;
  std::unique_ptr<runtime::CommandBus> bus_;
  std::map<std::string, std::string> join_;
  std::map<std::string, FakeNode> nodes_;
  std::vector<std::pair<std::string, proto::Command>> sent_;
  std::map<std::string, int64_t> xids_;
  std::set<std::string> fail_install_;
  std::set<std::string> busy_;  // nodes that run jobs
  bool fail_validate_ = false;
  int max_seen_ = 0;
};

TEST_F(RolloutTest, RollsEveryNodeWithinMaxUnavailableAndTheNodesReportTheTarget) {
  AddNodes("p1", 10);
  AddNodes("p2", 10);
  auto r = Start(R"({"kind":"driver","target":"580.95.05","selector":{"clusters":["train"]},
      "strategy":{"test_nodes":["p1-0"],"canary":1,"confidence":"30s","batch":{"size":2,
      "growth":"linear"},"max_unavailable":"20%","max_failed_nodes":1}})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->nodes.size(), 20u);
  EXPECT_EQ(r->nodes.front().node, "p1-0");
  EXPECT_EQ(r->nodes.front().stage, -1);
  Rollout done = Run(r->id, 2);
  EXPECT_EQ(ToString(done.state), "completed") << done.reason;
  EXPECT_EQ(max_seen_, 2) << "20% of 10 nodes is 2 at once";
  for (const auto& n : fleet_->Nodes({})) {
    EXPECT_EQ(n.facts.driver_version, "580.95.05") << n.name;
    EXPECT_EQ(n.state, NodeState::kReady) << n.name;
  }
  for (const auto& [name, n] : nodes_) {
    EXPECT_EQ(n.ran.at("install-driver"), 1) << name;
    EXPECT_EQ(n.ran.at("reboot"), 1) << name;
  }
  EXPECT_EQ(nodes_["p1-0"].ran.count("validate"), 1u) << "test nodes are validated";
  EXPECT_EQ(nodes_["p2-5"].ran.count("validate"), 0u);
  // Every node's from and to, and the events in order: the test node first.
  for (const auto& n : done.nodes) {
    EXPECT_EQ(n.from, "550.54.15");
    EXPECT_EQ(ToString(n.state), "updated");
  }
  auto events = rollouts_->Events(r->id, 0, 1000);
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(events->front().kind, "started");
  EXPECT_EQ(events->at(1).node, "p1-0");
  EXPECT_EQ(events->back().kind, "completed");
}

// A node that runs jobs drains only as they end (or at the drain timeout, when they are
// requeued): its message says what it waits for, not only "draining".
TEST_F(RolloutTest, ANodeThatRunsJobsSaysItsDrainWaitsForThem) {
  AddNodes("p1", 2);
  busy_ = {"p1-0"};
  auto r = Start(R"({"kind":"driver","target":"580.95.05","selector":{"pools":["p1"]},
      "strategy":{"canary":1,"confidence":"30s","drain_timeout":"15m"}})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  rollouts_->Tick();
  auto now = rollouts_->Get(r->id);
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(now->nodes.at(0).node, "p1-0");
  EXPECT_EQ(now->nodes.at(0).message, "draining: waiting for its jobs to end (requeued after 15m)");
  busy_.clear();
  Rollout done = Run(r->id, 1);
  EXPECT_EQ(ToString(done.state), "completed") << done.reason;
}

TEST_F(RolloutTest, AFaultyCanaryHaltsTheRolloutAndEveryTouchedNodeGoesBack) {
  AddNodes("p1", 6);
  auto r = Start(R"({"kind":"driver","target":"580.95.05","selector":{"pools":["p1"]},
      "strategy":{"canary":2,"confidence":"2m","max_unavailable":2,"max_failed_nodes":1}})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  // Until the canaries run the target and the confidence period begins.
  for (int t = 0; t < 200 && rollouts_->Get(r->id)->stage != "confidence"; ++t) {
    rollouts_->Tick();
    Agents();
    clock_->Advance(1000);
  }
  ASSERT_EQ(rollouts_->Get(r->id)->stage, "confidence");
  xids_["p1-0"] = clock_->NowMs();  // a canary raises an XID
  Rollout done = Run(r->id, 2);
  EXPECT_EQ(ToString(done.state), "rolled_back") << done.reason;
  EXPECT_NE(done.reason.find("XID after its update"), std::string::npos) << done.reason;
  for (const auto& n : fleet_->Nodes({})) {
    EXPECT_EQ(n.facts.driver_version, "550.54.15") << n.name;
    EXPECT_EQ(n.state, NodeState::kReady) << n.name << ": back in service as it was";
  }
  EXPECT_EQ(nodes_["p1-0"].ran.at("install-driver"), 2) << "the target, then the previous one";
  EXPECT_EQ(nodes_["p1-5"].ran.count("install-driver"), 0u) << "never reached";
  int skipped = 0;
  for (const auto& n : done.nodes) skipped += n.state == NodeProgress::kSkipped;
  EXPECT_EQ(skipped, 4);
  auto alarms = rollouts_->Alarms();
  ASSERT_EQ(alarms.size(), 1u);
  EXPECT_EQ(alarms[0].state, "rolled_back");
}

// A canary that comes back from its reboot in the very tick another canary trips a gate is
// restored (uncordoned) and then rolled back in that tick: its rollback drains it again rather
// than trusting the tick's snapshot, which still shows it drained (CI saw it wait for ever).
TEST_F(RolloutTest, ACanaryRestoredInTheTickTheRolloutHaltsIsDrainedForItsRollback) {
  AddNodes("p1", 4);
  auto r = Start(R"({"kind":"driver","target":"580.95.05","selector":{"pools":["p1"]},
      "strategy":{"canary":2,"confidence":"2m","max_unavailable":2,"max_failed_nodes":1}})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  auto state_of = [&](const std::string& node) {
    Rollout now = rollouts_->Get(r->id).value();
    for (const auto& n : now.nodes) {
      if (n.node == node) return std::string(ToString(n.state));
    }
    return std::string();
  };
  // p1-1 stays away after its reboot until p1-0 has finished.
  for (int t = 0; t < 200 && !(state_of("p1-0") == "updated" && nodes_["p1-1"].back_at); ++t) {
    rollouts_->Tick();
    Agents();
    if (nodes_["p1-1"].back_at) nodes_["p1-1"].back_at = kWed * 2;
    clock_->Advance(1000);
  }
  ASSERT_EQ(state_of("p1-0"), "updated");
  ASSERT_NE(nodes_["p1-1"].back_at, 0);
  xids_["p1-0"] = clock_->NowMs();  // the finished canary raises an XID ...
  nodes_["p1-1"].back_at = kWed;    // ... as the other one comes back
  Agents();
  Rollout done = Run(r->id, 2);
  EXPECT_EQ(ToString(done.state), "rolled_back") << done.reason;
  EXPECT_EQ(state_of("p1-1"), "rolled_back") << done.reason;
  for (const auto& n : fleet_->Nodes({})) {
    EXPECT_EQ(n.facts.driver_version, "550.54.15") << n.name;
    EXPECT_EQ(n.state, NodeState::kReady) << n.name;
  }
  EXPECT_EQ(nodes_["p1-1"].ran.at("install-driver"), 2) << "the target, then the previous one";
}

// An aborted rollout lets a node finish the step it is in: the agent's answer to the command
// sent before the abort still reaches the node's step.
TEST_F(RolloutTest, AnAbortedRolloutsNodeStillGetsTheAnswerToItsStep) {
  AddNodes("p1", 2);
  auto r = Start(R"({"kind":"driver","target":"580.95.05","selector":{"pools":["p1"]},
      "strategy":{"canary":1,"confidence":"30s"}})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  for (int t = 0; t < 50 && sent_.empty(); ++t) {
    rollouts_->Tick();
    clock_->Advance(1000);
  }
  ASSERT_EQ(sent_.size(), 1u);
  ASSERT_EQ(sent_[0].second.action, "install-driver");
  ASSERT_TRUE(rollouts_->Control(r->id, "abort", "test").ok());
  Agents();  // the install's answer comes after the abort
  auto now = rollouts_->Get(r->id).value();
  EXPECT_EQ(ToString(now.state), "aborted");
  EXPECT_EQ(now.nodes.at(0).result, "ok");
  EXPECT_EQ(ToString(now.nodes.at(0).step), "install");
}

TEST_F(RolloutTest, AControllerRestartedMidBatchResumesAndRepeatsNoAction) {
  AddNodes("p1", 8);
  auto r = Start(R"({"kind":"driver","target":"580.95.05","selector":{"pools":["p1"]},
      "strategy":{"canary":0,"batch":{"size":4},"max_unavailable":3}})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  // Mid-batch: installs sent, some answered, a reboot in flight.
  for (int t = 0; t < 4; ++t) {
    rollouts_->Tick();
    Agents();
    clock_->Advance(1000);
  }
  rollouts_->Tick();  // sends what the answers allow; not yet answered
  StartService();     // a new controller's service, from the store
  Rollout done = Run(r->id, 3);
  EXPECT_EQ(ToString(done.state), "completed") << done.reason;
  for (const auto& [name, n] : nodes_) {
    EXPECT_EQ(n.ran.at("install-driver"), 1) << name;
    EXPECT_EQ(n.ran.at("reboot"), 1) << name;
    EXPECT_EQ(n.driver, "580.95.05");
  }
}

TEST_F(RolloutTest, AFirmwareRolloutWaitsForItsWindowAndStartsWhenItOpens) {
  AddNodes("e1", 2);
  auto r = Start(R"({"kind":"gpu-firmware","target":"95.04.5E.00.02","selector":{"pools":["e1"]},
      "strategy":{"canary":0,"max_unavailable":1}})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  rollouts_->Tick();
  auto waiting = rollouts_->Get(r->id);
  EXPECT_EQ(ToString(waiting->state), "waiting_window");
  EXPECT_NE(waiting->reason.find("cluster edge"), std::string::npos) << waiting->reason;
  EXPECT_NE(waiting->reason.find("2026-12-05T02:00:00"), std::string::npos) << waiting->reason;
  EXPECT_TRUE(sent_.empty());
  clock_->Set(kSat0200);
  rollouts_->Tick();
  auto running = rollouts_->Get(r->id);
  EXPECT_EQ(ToString(running->state), "running");
  EXPECT_EQ(Down()["e1"], 1);
}

TEST_F(RolloutTest, AFailedNodeBelowTheThresholdIsSetAsideAndTheRestFinish) {
  AddNodes("p1", 5);
  fail_install_.insert("p1-2");
  auto r = Start(R"({"kind":"driver","target":"580.95.05","selector":{"pools":["p1"]},
      "strategy":{"canary":0,"max_unavailable":1,"max_failed_nodes":2,"rollback":"manual"}})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  Rollout done = Run(r->id, 1);
  EXPECT_EQ(ToString(done.state), "completed") << done.reason;
  EXPECT_EQ(done.reason, "1 node(s) failed and were set aside");
  for (const auto& n : done.nodes) {
    if (n.node == "p1-2") {
      EXPECT_EQ(ToString(n.state), "failed");
      EXPECT_NE(n.message.find("exit 2: dpkg: error"), std::string::npos) << n.message;
      EXPECT_NE(n.message.find("still runs 550.54.15: back in service"), std::string::npos)
          << n.message;
    } else {
      EXPECT_EQ(ToString(n.state), "updated") << n.node;
    }
  }
  EXPECT_EQ(fleet_->GetNode("p1-2")->state, NodeState::kReady) << "unchanged, so back at work";
}

TEST_F(RolloutTest, ANodeDownForAnyReasonCountsAgainstMaxUnavailable) {
  AddNodes("p1", 3);
  ASSERT_TRUE(fleet_->Act("p1-0", NodeAction::kCordon, "ops").ok());
  auto r = Start(R"({"kind":"driver","target":"580.95.05","selector":{"nodes":["p1-1","p1-2"]},
      "strategy":{"canary":0,"max_unavailable":1}})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  rollouts_->Tick();
  auto waiting = rollouts_->Get(r->id);
  EXPECT_EQ(waiting->reason, "waiting: pool p1 has 1 node(s) out of service (max_unavailable 1)");
  EXPECT_TRUE(sent_.empty());
  EXPECT_EQ(Down()["p1"], 1);
  ASSERT_TRUE(fleet_->Act("p1-0", NodeAction::kUncordon, "ops").ok());
  EXPECT_EQ(ToString(Run(r->id, 1).state), "completed");
}

TEST_F(RolloutTest, AFailedValidationOfTheTestNodesHaltsBeforeTheCanaries) {
  AddNodes("p1", 4);
  fail_validate_ = true;
  auto r = Start(R"({"kind":"driver","target":"580.95.05","selector":{"pools":["p1"]},
      "strategy":{"test_nodes":["p1-3"],"max_failed_nodes":3,"rollback":"manual"}})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  for (int t = 0; t < 100 && rollouts_->Get(r->id)->state == RolloutState::kRunning; ++t) {
    rollouts_->Tick();
    Agents();
    clock_->Advance(1000);
  }
  auto halted = rollouts_->Get(r->id);
  EXPECT_EQ(halted->state, RolloutState::kHalted);
  EXPECT_NE(halted->reason.find("the test stage failed"), std::string::npos) << halted->reason;
  EXPECT_NE(halted->reason.find("dcgmi diag: FAIL"), std::string::npos) << halted->reason;
  EXPECT_EQ(nodes_["p1-0"].ran.count("install-driver"), 0u);
  // An operator rolls it back by hand.
  ASSERT_TRUE(rollouts_->Control(r->id, "rollback", "ops").ok());
  Rollout done = Run(r->id, 2);
  EXPECT_EQ(ToString(done.state), "rolled_back");
  EXPECT_EQ(nodes_["p1-3"].driver, "550.54.15");
}

TEST_F(RolloutTest, ApprovalBetweenStagesWaitsForAnOperator) {
  AddNodes("p1", 3);
  auto r = Start(R"({"kind":"driver","target":"580.95.05","selector":{"pools":["p1"]},
      "strategy":{"canary":1,"confidence":"0s","approve_between_stages":true}})");
  ASSERT_TRUE(r.ok());
  for (int t = 0; t < 100 && rollouts_->Get(r->id)->state == RolloutState::kRunning; ++t) {
    rollouts_->Tick();
    Agents();
    clock_->Advance(1000);
  }
  EXPECT_EQ(ToString(rollouts_->Get(r->id)->state), "awaiting_approval");
  EXPECT_EQ(rollouts_->Control(r->id, "resume", "ops").error().code, ErrorCode::kConflict);
  ASSERT_TRUE(rollouts_->Control(r->id, "approve", "ops").ok());
  EXPECT_EQ(ToString(Run(r->id, 1).state), "completed");
}

TEST_F(RolloutTest, RequestsAreCheckedWithTheFieldNamed) {
  AddNodes("p1", 1);
  auto bad = [](const std::string& body) {
    auto r = ParseRolloutRequest(body);
    return r.ok() ? std::string("accepted") : r.error().message;
  };
  EXPECT_EQ(bad(R"({"kind":"driver","target":"580.95.05","selector":{"pools":["p1"]},
      "strategy":{"canaries":2}})")
                .rfind("strategy.canaries: unknown field", 0),
            0u);
  EXPECT_EQ(bad(R"({"kind":"bios","target":"1","selector":{"pools":["p1"]}})").rfind("kind: ", 0),
            0u);
  EXPECT_EQ(bad(R"({"kind":"driver","target":"580; rm -rf /","selector":{"pools":["p1"]}})")
                .rfind("target: ", 0),
            0u);
  EXPECT_EQ(bad(R"({"kind":"driver","target":"1","selector":{}})").rfind("selector: ", 0), 0u);
  EXPECT_EQ(bad(R"({"kind":"driver","target":"1","selector":{"pools":["p1"]},"force":true})")
                .rfind("reason: ", 0),
            0u);
  EXPECT_EQ(bad(R"({"kind":"driver","target":"1","selector":{"pools":["p1"]},
      "strategy":{"max_unavailable":"150%"}})")
                .rfind("strategy.max_unavailable: ", 0),
            0u);
  auto unknown = Start(R"({"kind":"driver","target":"1","selector":{"pools":["nope"]}})");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().message, "selector.pools: no pool 'nope'");
  auto none = Start(R"({"kind":"nic-firmware","target":"28.41.1000","selector":{"pools":["p1"]}})");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("no InfiniBand or RoCE adapter"), std::string::npos);
}

TEST_F(RolloutTest, ThePlanListsTheStagesAndTheTimeTheyTake) {
  AddNodes("p1", 10);
  AddNodes("p2", 10);
  auto req = ParseRolloutRequest(R"({"kind":"driver","target":"580.95.05",
      "selector":{"clusters":["train"]},"strategy":{"canary":1,"confidence":"10m",
      "batch":{"size":6},"max_unavailable":"20%"},
      "expect":{"drain":"0s","install":"5m","reboot":"5m"}})");
  ASSERT_TRUE(req.ok()) << req.error().message;
  auto plan = rollouts_->Plan(req.value());
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  ASSERT_EQ(plan->stages.size(), 4u);  // canary, 3 batches of 6
  EXPECT_EQ(plan->stages[0].name, "canary");
  EXPECT_EQ(plan->stages[0].nodes, (std::vector<std::string>{"p1-0", "p2-0"}));
  EXPECT_EQ(plan->stages[1].nodes.size(), 6u);
  // 6 nodes over two pools at 2 per pool: two rounds of 10 minutes.
  EXPECT_EQ(plan->stages[1].expected_ms, 20 * 60'000);
  EXPECT_EQ(plan->expected_ms, 10 * 60'000 + 10 * 60'000 + 3 * 20 * 60'000);
  EXPECT_TRUE(rollouts_->List().empty()) << "a plan changes nothing";
}

TEST_F(RolloutTest, NodeActionsDrainActAndPutTheNodeBack) {
  AddNodes("p1", 2);
  auto bad = rollouts_->StartAction("p1-0", {"reset-gpu", 7, ""}, "ops");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message.rfind("gpu: node p1-0 has no GPU 7", 0), 0u);
  auto op = rollouts_->StartAction("p1-0", {"reboot", -1, ""}, "ops");
  ASSERT_TRUE(op.ok()) << op.error().message;
  EXPECT_EQ(rollouts_->StartAction("p1-0", {"reboot", -1, ""}, "ops").error().code,
            ErrorCode::kConflict);
  for (int t = 0; t < 30; ++t) {
    rollouts_->Tick();
    Agents(3000);
    clock_->Advance(1000);
  }
  auto ops = rollouts_->Operations("p1-0");
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].state, "succeeded") << ops[0].message;
  EXPECT_EQ(nodes_["p1-0"].ran.at("reboot"), 1);
  EXPECT_EQ(fleet_->GetNode("p1-0")->state, NodeState::kReady);
  // Maintenance: in after a drain, out on leave; decommission, then delete.
  ASSERT_TRUE(rollouts_->StartAction("p1-1", {"maintenance", -1, "enter"}, "ops").ok());
  rollouts_->Tick();
  EXPECT_EQ(fleet_->GetNode("p1-1")->state, NodeState::kMaintenance);
  ASSERT_TRUE(rollouts_->StartAction("p1-1", {"maintenance", -1, "leave"}, "ops").ok());
  EXPECT_EQ(fleet_->GetNode("p1-1")->state, NodeState::kReady);
  EXPECT_EQ(fleet_->Delete("p1-1").error().code, ErrorCode::kConflict);
  ASSERT_TRUE(rollouts_->StartAction("p1-1", {"decommission", -1, ""}, "ops").ok());
  rollouts_->Tick();
  EXPECT_EQ(fleet_->GetNode("p1-1")->state, NodeState::kDecommissioning);
  fleet_->OnClosed("p1-1", nodes_["p1-1"].connection);
  ASSERT_TRUE(fleet_->Delete("p1-1").ok());
  EXPECT_FALSE(fleet_->GetNode("p1-1").ok());
}

}  // namespace
}  // namespace gpufleet::lifecycle
