// Live autoscaling against the real fleet, jobs and SQLite store, with a manual clock
// (scaling_fixture.h): decisions, manual scaling, cooldowns, failed and late nodes, and the
// command actuator, which runs real shell scripts.

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "scaling/tests/scaling_fixture.h"

namespace gpufleet::scaling {
namespace {

namespace json = boost::json;

TEST_F(ScalingTest, GrowsForTheQueueAndShrinksIdleNodesButNeverABusyOne) {
  // An empty pool is brought to min_nodes ("bound").
  scaling_->Tick();
  ASSERT_TRUE(WaitFor([&] { return Ready() == 1; })) << States().size();
  EXPECT_EQ(LastEvent().at("kind"), "scale_up");
  EXPECT_EQ(LastEvent().at("reason"), "bound");

  // 3 whole-node jobs: one runs, two queue; the decision asks for 3 nodes ("queue").
  auto a = Submit(8);
  Submit(8, "nlp");
  Submit(8, "speech");
  EXPECT_EQ(jobs_->Demand()["h100"].queued_gpus, 16);
  Decide();
  auto up = LastEvent();
  EXPECT_EQ(up.at("kind"), "scale_up") << up;
  EXPECT_EQ(up.at("reason"), "queue");
  EXPECT_EQ(up.at("delta"), 2);
  EXPECT_EQ(up.at("nodes"), json::parse(R"(["h100-0001","h100-0002"])"));
  EXPECT_NE(up.at("detail").as_string().find("demand 24 GPUs (8 running, 16 queued in 2 jobs)"),
            std::string::npos)
      << up;
  ASSERT_TRUE(WaitFor([&] { return Ready() == 3; }));
  jobs_->Tick();
  EXPECT_EQ(jobs_->Demand()["h100"].running_gpus, 24);
  auto node = fleet_->GetNode("h100-0001");
  ASSERT_TRUE(node.ok());
  EXPECT_TRUE(node->simulated);

  // Steady while busy; at max_nodes a larger demand is bounded.
  Decide();
  EXPECT_EQ(LastEvent().at("kind"), "scale_up");  // nothing new
  auto status = scaling_->Get("h100");
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->decision.reason, "steady");
  EXPECT_EQ(status->now.ready, 3);
  EXPECT_EQ(status->now.demand_gpus, 24);

  // Two jobs end: their nodes are idle, but not for idle_before_remove (60 s) yet.
  ASSERT_TRUE(jobs_->Cancel(2).ok());
  ASSERT_TRUE(jobs_->Cancel(3).ok());
  Decide();
  EXPECT_EQ(scaling_->Get("h100")->decision.delta, 0);
  EXPECT_EQ(Ready(), 3);
  // After it: down to min_nodes, but job 1's node is busy and stays.
  for (int i = 0; i < 6; ++i) Decide();
  ASSERT_TRUE(WaitFor([&] { return States()["retired"] == 2; })) << Ready();
  auto down = LastEvent();
  EXPECT_EQ(down.at("kind"), "scale_down") << down;
  EXPECT_EQ(down.at("reason"), "idle");
  EXPECT_EQ(down.at("delta"), -2);
  std::string busy = jobs_->Get(a.id)->placement.at(0).node;
  EXPECT_EQ(fleet_->GetNode(busy)->state, NodeState::kReady);
  for (const auto& n : down.at("nodes").as_array()) {
    EXPECT_NE(n.as_string(), busy);
    EXPECT_EQ(fleet_->GetNode(std::string(n.as_string()))->state, NodeState::kRetired);
  }
  {
    std::lock_guard lock(actuator_->mu_);
    EXPECT_EQ(actuator_->stopped.size(), 2u);
  }
  // The autoscaler's actions are audited.
  auto audit = store_.audit->ListAudit(0, 10);
  ASSERT_TRUE(audit.ok());
  int by_autoscaler = 0;
  for (const auto& r : audit.value()) by_autoscaler += r.actor == "autoscaler";
  EXPECT_EQ(by_autoscaler, 3);

  // A scale-up brings a retired node back under its name.
  Submit(8);
  Decide();
  ASSERT_TRUE(WaitFor([&] { return Ready() == 2; }));
  EXPECT_EQ(LastEvent().at("nodes"), json::parse(R"(["h100-0001"])"));

  // History: one sample per decision, restored with the policy after a restart.
  size_t samples = scaling_->History("h100", 0).size();
  EXPECT_GE(samples, 10u);
  int provisions = 0;
  {
    std::lock_guard lock(actuator_->mu_);
    provisions = actuator_->provisions;
  }
  Shut();
  Start();
  EXPECT_EQ(scaling_->History("h100", 0).size(), samples);
  EXPECT_EQ(scaling_->Policies().at(0).policy.max_nodes, 4);
  // The simulated nodes it had started (and not removed) are started again: they register.
  auto resumed = LastEvent();
  EXPECT_EQ(resumed.at("kind"), "resume") << resumed;
  EXPECT_EQ(resumed.at("nodes").as_array().size(), 2u) << resumed;
  ASSERT_TRUE(WaitFor([&] {
    std::lock_guard lock(actuator_->mu_);
    return actuator_->provisions == provisions + 1;
  }));
  ASSERT_TRUE(WaitFor([&] {
    for (const auto& n : fleet_->Nodes({})) {
      if (n.state != NodeState::kRetired && !n.connected) return false;
    }
    return true;
  }));
}

TEST_F(ScalingTest, ManualScaleWithinBoundsAndOnlyIdleNodesDown) {
  scaling_->Tick();
  ASSERT_TRUE(WaitFor([&] { return Ready() == 1; }));
  auto bad = scaling_->Scale("h100", {9, std::nullopt}, "ops");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message, "target 9 is outside the policy's bounds 1..4");
  EXPECT_FALSE(scaling_->Scale("h100", {2, 1}, "ops").ok());
  EXPECT_EQ(scaling_->Scale("nope", {2, std::nullopt}, "ops").error().code, ErrorCode::kNotFound);
  auto up = scaling_->Scale("h100", {std::nullopt, 2}, "ops");
  ASSERT_TRUE(up.ok()) << up.error().message;
  auto ev = json::parse(up.value()).as_object();
  EXPECT_EQ(ev.at("reason"), "manual");
  EXPECT_EQ(ev.at("actor"), "ops");
  EXPECT_EQ(ev.at("to"), 3);
  ASSERT_TRUE(WaitFor([&] { return Ready() == 3; }));
  // Every node busy: nothing to remove, and nothing changes.
  Submit(8);
  Submit(8);
  Submit(8);
  auto refused = scaling_->Scale("h100", {1, std::nullopt}, "ops");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kConflict);
  EXPECT_EQ(Ready(), 3);
  ASSERT_TRUE(jobs_->Cancel(3).ok());
  auto down = scaling_->Scale("h100", {1, std::nullopt}, "ops");
  ASSERT_TRUE(down.ok());
  EXPECT_EQ(json::parse(down.value()).at("delta"), -1) << "only the idle node";
  ASSERT_TRUE(WaitFor([&] { return Ready() == 2 && States()["retired"] == 1; }));
}

// A manual scale with keep_ms: up, the target is a floor the autoscaler keeps (idle nodes stay);
// down, a ceiling (queued jobs do not grow the pool); it survives a restart, ends on time with
// an event, and a later manual scale replaces it.
TEST_F(ScalingTest, AKeptManualScaleIsAFloorOrACeilingUntilItEnds) {
  ScaleRequest up{3, std::nullopt, 10 * 60'000};
  auto made = scaling_->Scale("h100", up, "ops");
  ASSERT_TRUE(made.ok()) << made.error().message;
  ASSERT_TRUE(WaitFor([&] { return Ready() == 3; }));
  auto keep = LastEvent();
  EXPECT_EQ(keep.at("kind"), "keep") << keep;
  EXPECT_EQ(keep.at("keep_min"), 3);
  EXPECT_EQ(keep.at("actor"), "ops");
  EXPECT_EQ(scaling_->Get("h100")->keep.min_nodes, 3);
  EXPECT_EQ(scaling_->Scale("h100", {3, std::nullopt, 31 * 86'400'000LL}, "ops").error().message,
            "'keep' must be a duration of at most 30d");
  for (int i = 0; i < 12; ++i) Decide();  // 2 minutes, all 3 nodes idle (idle_before_remove 60s)
  EXPECT_EQ(Ready(), 3) << "kept: the idle nodes stay";
  EXPECT_EQ(scaling_->Get("h100")->decision.reason, "manual");
  EXPECT_EQ(scaling_->Get("h100")->decision.target, 3);

  Shut();
  Start();
  ASSERT_TRUE(WaitFor([&] { return Ready() == 3; }));
  EXPECT_EQ(scaling_->Get("h100")->keep.min_nodes, 3) << "the keep survives a restart";
  EXPECT_EQ(scaling_->Get("h100")->keep.actor, "ops");
  for (int i = 0; i < 50; ++i) Decide();  // past the 10 minutes
  EXPECT_FALSE(scaling_->Get("h100")->keep.until_ms);
  auto events = scaling_->Events("h100", 50);
  ASSERT_TRUE(events.ok());
  bool ended = false;
  for (const auto& e : events.value()) {
    ended = ended || json::parse(e.doc).at("kind") == "keep_end";
  }
  EXPECT_TRUE(ended);
  // The surplus goes through the actuator's worker, whose deprovisioning waits on this test's
  // clock: keep deciding (and so advancing the clock) while waiting, or a worker that lagged
  // behind the loop above waits for a clock that no longer moves.
  ASSERT_TRUE(WaitFor([&] {
    Decide();
    return Ready() == 1;
  })) << "then the idle surplus goes";

  // Down, kept: a ceiling. Two 8-GPU jobs on a pool kept at 1 node: one waits, nothing grows.
  ASSERT_TRUE(scaling_->Scale("h100", {2, std::nullopt}, "ops").ok());
  ASSERT_TRUE(WaitFor([&] { return Ready() == 2; }));
  ASSERT_TRUE(scaling_->Scale("h100", {1, std::nullopt, 3'600'000}, "ops").ok());
  ASSERT_TRUE(WaitFor([&] { return Ready() == 1; }));
  EXPECT_EQ(scaling_->Get("h100")->keep.max_nodes, 1);
  Submit(8);
  auto waiting = Submit(8);
  Decide();
  EXPECT_EQ(scaling_->Get("h100")->decision.reason, "manual");
  EXPECT_EQ(scaling_->Get("h100")->decision.delta, 0);
  EXPECT_EQ(jobs_->Get(waiting.id)->state, workload::JobState::kQueued);
  // A manual scale without keep replaces it: the queue grows the pool again.
  ASSERT_TRUE(scaling_->Scale("h100", {std::nullopt, 0}, "ops").ok());
  EXPECT_FALSE(scaling_->Get("h100")->keep.until_ms);
  Decide();
  EXPECT_EQ(LastEvent().at("reason"), "queue");
  ASSERT_TRUE(WaitFor([&] { return Ready() == 2; }));
}

TEST_F(ScalingTest, AWholeNodeJobWaitingOnFragmentedGpusGetsANode) {
  ASSERT_TRUE(scaling_->Scale("h100", {2, std::nullopt}, "ops").ok());
  ASSERT_TRUE(WaitFor([&] { return Ready() == 2; }));
  // 4 + 4 GPUs fill one node (best fit), 4 more go on the other; cancelling the first leaves 4
  // free GPUs on each node: 8 free, but an 8-GPU job cannot start.
  auto first = Submit(4);
  Submit(4);
  Submit(4);
  ASSERT_TRUE(jobs_->Cancel(first.id).ok());
  auto big = Submit(8);
  EXPECT_EQ(jobs_->Get(big.id)->state, workload::JobState::kQueued);
  EXPECT_EQ(jobs_->Demand()["h100"].running_gpus + jobs_->Demand()["h100"].queued_gpus, 16)
      << "by demand alone the 2 nodes are enough";
  Decide();
  auto up = LastEvent();
  EXPECT_EQ(up.at("kind"), "scale_up") << up;
  EXPECT_EQ(up.at("reason"), "queue");
  EXPECT_EQ(up.at("delta"), 1);
  ASSERT_TRUE(WaitFor([&] { return Ready() == 3; }));
  jobs_->Tick();
  EXPECT_EQ(jobs_->Get(big.id)->state, workload::JobState::kRunning);
}

// A queued job larger than the pool at max_nodes cannot run however far the pool grows: it is
// left out of the demand, so it does not hold the pool at its maximum; the detail says so.
TEST_F(ScalingTest, AJobLargerThanMaxNodesIsLeftOutOfTheDemand) {
  scaling_->Tick();
  ASSERT_TRUE(WaitFor([&] { return Ready() == 1; }));
  Submit(8);
  auto huge = Submit(40);  // 5 nodes; max_nodes is 4
  Submit(8, "nlp");
  EXPECT_EQ(jobs_->Demand()["h100"].queued_gpus, 48);
  Decide();
  auto up = LastEvent();
  EXPECT_EQ(up.at("kind"), "scale_up") << up;
  EXPECT_EQ(up.at("delta"), 1) << "for the 8-GPU job only, not to the maximum";
  const std::string detail(up.at("detail").as_string());
  EXPECT_NE(detail.find("demand 16 GPUs (8 running, 8 queued in 1 jobs)"), std::string::npos)
      << detail;
  EXPECT_NE(detail.find("; 1 queued job(s) larger than 4 nodes left out"), std::string::npos)
      << detail;
  EXPECT_EQ(jobs_->Get(huge.id)->state, workload::JobState::kQueued) << "still queued";
}

TEST_F(ScalingTest, CooldownHoldsAreRecordedOnceAndDisabledPoliciesOnlyDecide) {
  auto p = scaling_->Policies().at(0);
  p.policy.up_cooldown_s = 3600;
  ASSERT_TRUE(scaling_->SetPolicy(p, "test").ok());
  scaling_->Tick();  // min_nodes: up
  ASSERT_TRUE(WaitFor([&] { return Ready() == 1; }));
  Submit(8);
  Submit(8);
  Decide();
  Decide();
  Decide();
  auto events = scaling_->Events("h100", 10);
  ASSERT_TRUE(events.ok());
  int holds = 0;
  for (const auto& e : events.value()) holds += json::parse(e.doc).at("kind") == "hold";
  EXPECT_EQ(holds, 1);
  EXPECT_EQ(LastEvent().at("reason"), "cooldown");
  EXPECT_EQ(Ready(), 1);

  p.policy.up_cooldown_s = 0;
  p.enabled = false;
  ASSERT_TRUE(scaling_->SetPolicy(p, "test").ok());
  Decide();
  EXPECT_EQ(LastEvent().at("reason"), "disabled");
  EXPECT_EQ(Ready(), 1);
  EXPECT_EQ(scaling_->Get("h100")->decision.delta, 1) << "the decision is still made and shown";
}

// What a tune's apply relies on: a set over a policy that has changed since it was read fails
// and leaves the newer policy as it is.
TEST_F(ScalingTest, ASetOverAStalePolicyIsRefusedAndChangesNothing) {
  auto read = scaling_->Policies().at(0);
  auto meanwhile = read;
  meanwhile.policy.max_nodes = 3;
  clock_->Advance(1000);
  ASSERT_TRUE(scaling_->SetPolicy(meanwhile, "someone").ok());
  auto mine = read;
  mine.policy.target_share = 0.7;
  auto stale = scaling_->SetPolicy(mine, "tune", nullptr, &read);
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.error().code, ErrorCode::kConflict);
  EXPECT_NE(stale.error().message.find("changed meanwhile"), std::string::npos);
  auto now = scaling_->Policies().at(0);
  EXPECT_EQ(now.policy.max_nodes, 3);
  EXPECT_EQ(now.policy.target_share, 1);

  auto current = now;  // over the policy as it is, the set goes through
  mine = now;
  mine.policy.target_share = 0.7;
  auto fresh = scaling_->SetPolicy(mine, "tune", nullptr, &current);
  ASSERT_TRUE(fresh.ok()) << fresh.error().message;
  EXPECT_EQ(scaling_->Policies().at(0).policy.target_share, 0.7);
  EXPECT_EQ(scaling_->Policies().at(0).policy.max_nodes, 3);
}

TEST_F(ScalingTest, FailedProvisionRetiresTheNodesAndSaysWhy) {
  {
    std::lock_guard lock(actuator_->mu_);
    actuator_->fail = true;
  }
  scaling_->Tick();
  ASSERT_TRUE(WaitFor([&] { return States()["retired"] == 1; }));
  ASSERT_TRUE(WaitFor([&] { return LastEvent().at("kind") == "provision_failed"; }));
  EXPECT_EQ(LastEvent().at("detail"), "no capacity in the zone; the nodes were retired");
  EXPECT_EQ(scaling_->Get("h100")->last_error, "no capacity in the zone");
  EXPECT_EQ(fleet_->GetNode("h100-0000")->reason, "provision failed: no capacity in the zone");
}

TEST_F(ScalingTest, NodesThatNeverRegisterAreRetiredAfterTwiceTheLeadTime) {
  {
    std::lock_guard lock(actuator_->mu_);
    actuator_->join = false;
  }
  scaling_->Tick();
  ASSERT_TRUE(WaitFor([&] { return States()["provisioning"] == 1; }));
  clock_->Advance(59'000);
  scaling_->Tick();
  EXPECT_EQ(States()["provisioning"], 1);
  clock_->Advance(2'000);  // 2 x 0 s lead time + 60 s
  scaling_->Tick();
  EXPECT_EQ(States()["retired"], 1);
  ASSERT_TRUE(WaitFor([&] {
    auto e = scaling_->Events("h100", 5);
    for (const auto& r : e.value()) {
      if (json::parse(r.doc).at("kind") == "join_timeout") return true;
    }
    return false;
  }));
}

TEST_F(ScalingTest, CommandActuatorRunsTheProgramsWithPoolNodesAndJoinToken) {
  std::string log = (dir_ / "calls").string();
  auto p = scaling_->Policies().at(0);
  p.actuator.type = "command";
  p.actuator.provision =
      "echo up {pool} {nodes} $GPUFLEET_CLUSTER ${#GPUFLEET_JOIN_TOKEN} >> " + log;
  p.actuator.deprovision = "echo 'quota exceeded' >&2; exit 4";
  ASSERT_TRUE(scaling_->SetPolicy(p, "test").ok());
  scaling_->Tick();
  // The shell creates the file before echo writes to it: wait for the whole line.
  std::string line;
  ASSERT_TRUE(WaitFor([&] {
    std::ifstream in(log);
    std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (all.empty() || all.back() != '\n') return false;
    line = all.substr(0, all.find('\n'));
    return true;
  }));
  EXPECT_EQ(line, "up h100 h100-0000 train 52") << "gfj_ and 48 hex digits";
  EXPECT_EQ(States()["provisioning"], 1) << "until its agent registers";
  auto ok = scaling_->Scale("h100", {std::nullopt, 1}, "ops");
  ASSERT_TRUE(ok.ok());

  // A failing deprovision is reported and leaves the nodes drained.
  auto q = p;
  q.actuator.provision = "sleep 5";
  q.actuator.timeout_s = 0.2;
  ASSERT_TRUE(scaling_->SetPolicy(q, "test").ok());
  auto slow = scaling_->Scale("h100", {3, std::nullopt}, "ops");
  ASSERT_TRUE(slow.ok());
  ASSERT_TRUE(WaitFor([&] { return LastEvent().at("kind") == "provision_failed"; }));
  EXPECT_EQ(LastEvent().at("detail"),
            "provision command timed out after 200ms; the nodes were retired");
}

// Slurm's ResumeProgram and SuspendProgram: nodes by name through the pool's actuator, checked
// first, idempotent (Slurm may call twice), a retired node back in its pool.
TEST_F(ScalingTest, NodesStartAndStopByNameForSlurmAndTwiceIsOnce) {
  auto unknown = scaling_->StartNodes({"gpu01", "gpu02"}, "", "slurm");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(unknown.error().message,
            "node 'gpu01' is not known to gpufleet: name the pool it starts in");
  EXPECT_EQ(scaling_->StartNodes({"gpu01"}, "nope", "slurm").error().code, ErrorCode::kNotFound);
  EXPECT_TRUE(States().empty()) << "nothing recorded by a refused call";

  auto up = scaling_->StartNodes({"gpu01", "gpu02"}, "h100", "slurm");
  ASSERT_TRUE(up.ok()) << up.error().message;
  EXPECT_EQ(up->acted, (std::vector<std::string>{"gpu01", "gpu02"}));
  EXPECT_TRUE(up->already.empty());
  ASSERT_TRUE(WaitFor([&] { return Ready() == 2; }));
  auto ev = LastEvent();
  EXPECT_EQ(ev.at("kind"), "scale_up");
  EXPECT_EQ(ev.at("reason"), "slurm");
  EXPECT_EQ(ev.at("detail"), "slurm resume by slurm");
  auto again = scaling_->StartNodes({"gpu01", "gpu02"}, "h100", "slurm");
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->acted.empty());
  EXPECT_EQ(again->already.size(), 2u);
  {
    std::lock_guard lock(actuator_->mu_);
    EXPECT_EQ(actuator_->provisions, 1);
  }

  auto down = scaling_->StopNodes({"gpu01", "nosuch"}, "slurm");
  ASSERT_TRUE(down.ok()) << down.error().message;
  EXPECT_EQ(down->acted, std::vector<std::string>{"gpu01"});
  EXPECT_EQ(down->already, std::vector<std::string>{"nosuch"});
  ASSERT_TRUE(WaitFor([&] { return States()["retired"] == 1 && Ready() == 1; }));
  EXPECT_EQ(fleet_->GetNode("gpu01")->state, NodeState::kRetired);
  EXPECT_EQ(LastEvent().at("reason"), "slurm");
  auto twice = scaling_->StopNodes({"gpu01"}, "slurm");
  ASSERT_TRUE(twice.ok());
  EXPECT_TRUE(twice->acted.empty());
  {
    std::lock_guard lock(actuator_->mu_);
    EXPECT_EQ(actuator_->stopped, std::vector<std::string>{"gpu01"});
  }
  // Retired, it comes back in its own pool without being told which.
  auto back = scaling_->StartNodes({"gpu01"}, "", "slurm");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->acted, std::vector<std::string>{"gpu01"});
  ASSERT_TRUE(WaitFor([&] { return Ready() == 2; }));
}

}  // namespace
}  // namespace gpufleet::scaling
