// The rollout engine on its own: Step over hand-written facts and a recording RolloutEffects,
// no fleet, store, thread or clock. Each test drives a rollout through the ticks that matter
// and checks the states, steps, commands and fleet actions that came out.

#include "lifecycle/rollout_engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace gpufleet::lifecycle {
namespace {

constexpr int64_t kT0 = 1'796'169'600'000;

// Records what the engine does; answers from scripted node states.
class Recorder : public RolloutEffects {
 public:
  std::map<std::string, LiveNode> live;
  std::vector<std::string> acts;     // "drain n1", "uncordon n1"
  std::vector<proto::Command> sent;  // in order
  std::vector<std::string> saved;    // node names, as saved before each send
  std::set<std::string> jobs;        // nodes running jobs
  std::string refuse_drain;          // a drain of this node is refused
  bool reachable = true;
  bool window_open = true;
  int64_t next_command = 100;

  std::optional<LiveNode> Live(const std::string& node, RolloutKind) override {
    auto it = live.find(node);
    if (it == live.end()) return std::nullopt;
    return it->second;
  }
  Status Act(const std::string& node, NodeAction action, const std::string& actor) override {
    if (action == NodeAction::kDrain && node == refuse_drain) {
      return MakeError(ErrorCode::kConflict, "node is retired");
    }
    acts.push_back(std::string(ToString(action)) + " " + node);
    return {};
  }
  bool RunsJobs(const std::string& node) override { return jobs.count(node) > 0; }
  void DrainTimeout(const std::string& node, int64_t) override {}
  bool WindowOpen(const std::string& pool, int64_t, std::string* why) override {
    if (!window_open) *why = "closed for " + pool;
    return window_open;
  }
  int64_t NewCommand() override { return next_command++; }
  void Save(const Rollout& r, size_t i) override { saved.push_back(r.nodes[i].node); }
  Status Send(const Rollout&, size_t, const NodeFacts&, const proto::Command& cmd) override {
    if (!reachable) return MakeError(ErrorCode::kUnavailable, "not connected");
    sent.push_back(cmd);
    return {};
  }
  int64_t AskedAgain(int64_t command) override {
    auto it = asked_again.find(command);
    return it == asked_again.end() ? 0 : it->second;
  }
  void SetAskedAgain(int64_t command, int64_t connected_ms) override {
    asked_again[command] = connected_ms;
  }
  std::map<int64_t, int64_t> asked_again;
};

class EngineTest : public ::testing::Test {
 protected:
  // `count` ready nodes n0.. in pool p of cluster c, running 550.54.15, in a rollout to 580.
  void SetUp() override {
    r_.id = 7;
    r_.kind = RolloutKind::kDriver;
    r_.target = "580.95.05";
    r_.state = RolloutState::kRunning;
    r_.current = 0;
    r_.strategy.confidence_ms = 0;
    r_.strategy.max_unavailable = {1, false};
    r_.strategy.max_failed_nodes = {1, false};
  }
  void AddNode(const std::string& name, int stage) {
    NodeFacts v;
    v.connected = true;
    v.pool = "p";
    v.cluster = "c";
    v.version[0] = "550.54.15";
    facts_.nodes[name] = v;
    ++facts_.pool_size["p"];
    ++facts_.cluster_size["c"];
    fx_.live[name] = {NodeState::kReady, NodeState::kReady, true, "550.54.15"};
    RolloutNode n;
    n.node = name;
    n.pool = "p";
    n.cluster = "c";
    n.to = r_.target;
    n.stage = stage;
    r_.nodes.push_back(n);
    r_.batches = std::max(r_.batches, stage);
  }
  std::vector<size_t> Tick() {
    now_ += 1000;
    return Step(r_, facts_, now_, fx_, events_);
  }
  // The node as its agent would leave it: drained, or back from a reboot on `version`.
  void Drained(const std::string& name) {
    facts_.nodes[name].state = facts_.nodes[name].effective = NodeState::kDrained;
    fx_.live[name].state = NodeState::kDrained;
  }
  void Rebooted(const std::string& name, const std::string& version) {
    facts_.nodes[name].connected_ms = now_ + 1;
    facts_.nodes[name].version[0] = version;
    fx_.live[name].running = version;
  }
  void Answer(size_t i, const std::string& result) { r_.nodes[i].result = result; }

  Rollout r_;
  RolloutFacts facts_;
  Recorder fx_;
  std::vector<store::RolloutEventRecord> events_;
  int64_t now_ = kT0;
};

TEST_F(EngineTest, ACanaryGoesThroughDrainInstallRebootAndIsPutBackInService) {
  AddNode("n0", 0);
  EXPECT_EQ(Tick(), std::vector<size_t>{0});
  EXPECT_EQ(r_.nodes[0].state, NodeProgress::kDraining);
  EXPECT_EQ(r_.nodes[0].step, RolloutStep::kDrain);
  EXPECT_EQ(r_.nodes[0].from, "550.54.15");
  EXPECT_EQ(fx_.acts, std::vector<std::string>{"drain n0"});
  EXPECT_EQ(facts_.holders.at("n0"), 7);
  EXPECT_EQ(facts_.pool_down["p"], 1) << "counted out of service for the rest of the tick";

  Drained("n0");
  Tick();
  ASSERT_EQ(fx_.sent.size(), 1u);
  EXPECT_EQ(fx_.sent[0].action, "install-driver");
  EXPECT_EQ(fx_.sent[0].args, std::vector<std::string>{"580.95.05"});
  EXPECT_EQ(fx_.saved, std::vector<std::string>{"n0"}) << "saved before it was sent";
  EXPECT_EQ(r_.nodes[0].command, fx_.sent[0].id);
  EXPECT_EQ(r_.nodes[0].state, NodeProgress::kInstalling);

  Answer(0, "ok");
  Tick();
  ASSERT_EQ(fx_.sent.size(), 2u);
  EXPECT_EQ(fx_.sent[1].action, "reboot");
  EXPECT_EQ(r_.nodes[0].state, NodeProgress::kRebooting);

  Tick();  // not back yet: nothing changes
  EXPECT_EQ(r_.nodes[0].step, RolloutStep::kReboot);

  Rebooted("n0", "580.95.05");
  Tick();
  EXPECT_EQ(r_.nodes[0].state, NodeProgress::kUpdated);
  EXPECT_EQ(r_.nodes[0].step, RolloutStep::kNone);
  EXPECT_EQ(fx_.acts.back(), "uncordon n0");
  EXPECT_EQ(facts_.holders.count("n0"), 0u);
  Tick();
  EXPECT_EQ(r_.state, RolloutState::kCompleted) << r_.reason;
  EXPECT_EQ(r_.reason, "every node runs 580.95.05");
  EXPECT_EQ(events_.back().kind, "completed");
}

// The answer to an install was lost with the agent's connection (its controller was killed as
// the agent wrote it): once the agent is back, the same command goes again under the same id,
// once per connection; the validation likewise. The answer that then comes is taken.
TEST_F(EngineTest, AnInstallOrValidationWhoseAgentReconnectedIsAskedAgainUnderItsOwnId) {
  r_.strategy.validate = true;
  AddNode("n0", -1);  // a test node: validated after its reboot
  r_.current = -1;
  Tick();
  Drained("n0");
  Tick();
  ASSERT_EQ(fx_.sent.size(), 1u);
  const proto::Command install = fx_.sent[0];
  ASSERT_EQ(install.action, "install-driver");

  Tick();  // still connected on the connection it was sent on: nothing is sent again
  EXPECT_EQ(fx_.sent.size(), 1u);

  facts_.nodes["n0"].connected_ms = now_ + 1;  // the agent reconnected, on the old version
  Tick();
  ASSERT_EQ(fx_.sent.size(), 2u);
  EXPECT_EQ(fx_.sent[1].id, install.id) << "the same id: the agent answers it from its record";
  EXPECT_EQ(fx_.sent[1].action, install.action);
  EXPECT_EQ(fx_.sent[1].args, install.args);
  EXPECT_EQ(r_.nodes[0].command, install.id);
  EXPECT_EQ(r_.nodes[0].step, RolloutStep::kInstall);
  EXPECT_EQ(events_.back().message,
            "install-driver 580.95.05: asked again (its agent reconnected)");
  Tick();
  Tick();
  EXPECT_EQ(fx_.sent.size(), 2u) << "once per connection";

  facts_.nodes["n0"].connected_ms = now_ + 1;  // and once more on the next connection
  Tick();
  ASSERT_EQ(fx_.sent.size(), 3u);
  EXPECT_EQ(fx_.sent[2].id, install.id);

  Answer(0, "ok");
  Tick();
  ASSERT_EQ(fx_.sent.size(), 4u);
  EXPECT_EQ(fx_.sent[3].action, "reboot");
  Rebooted("n0", "580.95.05");
  Tick();
  ASSERT_EQ(fx_.sent.size(), 5u);
  const proto::Command validate = fx_.sent[4];
  ASSERT_EQ(validate.action, "validate");
  Tick();
  EXPECT_EQ(fx_.sent.size(), 5u) << "the reboot's connection is older than the validation";

  facts_.nodes["n0"].connected_ms = now_ + 1;
  Tick();
  ASSERT_EQ(fx_.sent.size(), 6u);
  EXPECT_EQ(fx_.sent[5].id, validate.id);
  EXPECT_EQ(fx_.sent[5].args, std::vector<std::string>{"580.95.05"});

  // Sent again but not reachable: no failure, and it is tried on the next tick.
  facts_.nodes["n0"].connected_ms = now_ + 1;
  fx_.reachable = false;
  size_t events = events_.size();
  Tick();
  Tick();
  EXPECT_EQ(r_.nodes[0].step, RolloutStep::kValidate);
  EXPECT_EQ(events_.size(), events) << "no event for each failed try";
  fx_.reachable = true;
  Tick();
  ASSERT_EQ(fx_.sent.size(), 7u);
  EXPECT_EQ(fx_.sent[6].id, validate.id);

  Answer(0, "ok");
  Tick();
  EXPECT_EQ(r_.nodes[0].state, NodeProgress::kUpdated);
}

TEST_F(EngineTest, ANodeThatComesBackOnTheWrongVersionFailsAndHaltsTheRollout) {
  r_.strategy.rollback = "manual";
  AddNode("n0", 0);
  AddNode("n1", 1);
  Tick();
  Drained("n0");
  Tick();
  Answer(0, "ok");
  Tick();
  Rebooted("n0", "550.54.15");
  Tick();
  EXPECT_EQ(r_.nodes[0].state, NodeProgress::kFailed);
  EXPECT_EQ(r_.nodes[0].message,
            "came back running 550.54.15, not 580.95.05 (it still runs "
            "550.54.15: back in service)");
  EXPECT_EQ(r_.state, RolloutState::kHalted);
  EXPECT_NE(r_.reason.find("1 node(s) failed (max_failed_nodes 1)"), std::string::npos)
      << r_.reason;
  Tick();
  EXPECT_EQ(r_.nodes[1].state, NodeProgress::kPending) << "a halted rollout starts nothing";
}

TEST_F(EngineTest, AnUpdatedNodeThatTurnsUnhealthyIsCordonedAndTheRolloutRollsBack) {
  AddNode("n0", 0);
  r_.nodes[0].state = NodeProgress::kUpdated;
  r_.nodes[0].from = "550.54.15";
  r_.nodes[0].ended_ms = now_;
  facts_.nodes["n0"].version[0] = "580.95.05";
  facts_.nodes["n0"].state = NodeState::kUnhealthy;
  facts_.nodes["n0"].reason = "XID 79";
  AddNode("n1", 1);
  Tick();
  auto failed = std::find_if(events_.begin(), events_.end(),
                             [](const auto& e) { return e.kind == "failed"; });
  ASSERT_NE(failed, events_.end());
  EXPECT_EQ(failed->message, "unhealthy since its update: XID 79");
  EXPECT_EQ(fx_.acts.front(), "cordon n0");
  EXPECT_EQ(r_.state, RolloutState::kRollingBack);
  EXPECT_EQ(r_.nodes[1].state, NodeProgress::kSkipped);
  // Its rollback began in the same tick.
  EXPECT_TRUE(r_.nodes[0].rollback);
  EXPECT_EQ(r_.nodes[0].state, NodeProgress::kRollingBack);
  EXPECT_EQ(r_.nodes[0].message, "putting 550.54.15 back");
}

TEST_F(EngineTest, MaxUnavailableCountsWhatIsAlreadyDown) {
  AddNode("n0", 0);
  AddNode("n1", 0);
  facts_.pool_down["p"] = 1;  // another node of the pool is out already
  facts_.cluster_down["c"] = 1;
  Tick();
  EXPECT_EQ(r_.nodes[0].state, NodeProgress::kPending);
  EXPECT_EQ(r_.reason, "waiting: pool p has 1 node(s) out of service (max_unavailable 1)");
  EXPECT_TRUE(fx_.acts.empty());
}

TEST_F(EngineTest, AClosedWindowWaitsAndAnOpenOneGoesOn) {
  r_.kind = RolloutKind::kGpuFirmware;  // kept to the windows by default
  AddNode("n0", 0);
  facts_.nodes["n0"].version[1] = "95.04.00";
  fx_.window_open = false;
  Tick();
  EXPECT_EQ(r_.state, RolloutState::kWaitingWindow);
  EXPECT_EQ(r_.reason, "waiting for a maintenance window: closed for p");
  fx_.window_open = true;
  Tick();
  EXPECT_EQ(r_.state, RolloutState::kRunning);
  EXPECT_EQ(r_.nodes[0].state, NodeProgress::kDraining);
}

TEST_F(EngineTest, AnUnreachableAgentFailsTheNodeAndARefusedDrainToo) {
  AddNode("n0", 0);
  AddNode("n1", 0);
  r_.strategy.max_unavailable = {2, false};
  r_.strategy.max_failed_nodes = {3, false};
  fx_.refuse_drain = "n1";
  Tick();
  EXPECT_EQ(r_.nodes[1].state, NodeProgress::kFailed);
  EXPECT_EQ(r_.nodes[1].message, "drain refused: node is retired");
  Drained("n0");
  fx_.reachable = false;
  Tick();
  EXPECT_EQ(r_.nodes[0].state, NodeProgress::kFailed);
  EXPECT_EQ(r_.nodes[0].message,
            "cannot reach its agent for install-driver: not connected (it still runs 550.54.15: "
            "back in service)");
  EXPECT_EQ(fx_.acts.back(), "uncordon n0");
}

TEST_F(EngineTest, AStepInFlightFinishesInAnAbortedRollout) {
  AddNode("n0", 0);
  AddNode("n1", 0);
  Tick();
  ASSERT_TRUE(Control(r_, "abort", "ops", now_).ok());
  EXPECT_EQ(r_.nodes[1].state, NodeProgress::kSkipped);
  Drained("n0");
  Tick();
  EXPECT_EQ(r_.nodes[0].step, RolloutStep::kInstall) << "the drained node goes on";
  Answer(0, "exit 1: no package");
  Tick();
  EXPECT_EQ(r_.nodes[0].state, NodeProgress::kFailed);
  EXPECT_EQ(r_.stage, "");
  EXPECT_EQ(r_.state, RolloutState::kAborted);
}

TEST_F(EngineTest, ControlRefusesWhatTheStateDoesNotAllow) {
  AddNode("n0", 0);
  auto resume = Control(r_, "resume", "ops", now_);
  ASSERT_FALSE(resume.ok());
  EXPECT_EQ(resume.error().code, ErrorCode::kConflict);
  EXPECT_EQ(resume.error().message,
            "cannot resume rollout 7: it is running (only a paused or halted one)");
  ASSERT_TRUE(Control(r_, "pause", "ops", now_).ok());
  EXPECT_EQ(r_.state, RolloutState::kPaused);
  Tick();
  EXPECT_EQ(r_.nodes[0].state, NodeProgress::kPending) << "a paused rollout starts nothing";
  EXPECT_EQ(Control(r_, "jump", "ops", now_).error().code, ErrorCode::kInvalidArgument);
}

TEST(RolloutKinds, EachKindHasItsRowAndTheNamesReadBack) {
  for (const auto& k : RolloutKinds()) {
    EXPECT_EQ(Spec(k.kind).name, k.name);
    EXPECT_EQ(ParseRolloutKind(k.name), k.kind);
    EXPECT_FALSE(k.action.empty());
  }
  EXPECT_EQ(RolloutKindNames(), "driver, gpu-firmware or nic-firmware");
  for (int i = 0; i <= static_cast<int>(RolloutState::kAborted); ++i) {
    auto s = static_cast<RolloutState>(i);
    EXPECT_EQ(ParseRolloutState(ToString(s)), s);
  }
  EXPECT_EQ(ParseNodeProgress("rolled_back"), NodeProgress::kRolledBack);
  EXPECT_EQ(ParseRolloutStep(""), RolloutStep::kNone);
  EXPECT_FALSE(ParseRolloutState("done"));
}

}  // namespace
}  // namespace gpufleet::lifecycle
