// Live autoscaling against the real fleet, jobs and SQLite store, with a manual clock. The
// actuator here registers the nodes it is asked for the way their agents would (a hello with
// the join token it was handed); the command actuator runs real shell scripts.

#include "scaling/scaling.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "config/fleet_spec.h"
#include "sched/policy_json.h"

namespace gpufleet::scaling {
namespace {

namespace json = boost::json;

constexpr char kFleet[] = R"(apiVersion: gpufleet/v1
kind: Fleet
clusters:
  - name: train
    type: training
    site: s1
    pools:
      - name: h100
        gpu_model: H100-SXM5-80GB
        gpus_per_node: 8
        scaling:
          mode: reactive
          min_nodes: 1
          max_nodes: 4
          target_share: 1
          interval: 10s
          lead_time: 0s
          idle_before_remove: 60s
          down_cooldown: 0s
          actuator: {type: sim}
)";

// Registers the nodes it is asked to start, as their agents would; stops nothing (a node it
// deprovisions is retired by the service).
class JoiningActuator : public Actuator {
 public:
  explicit JoiningActuator(FleetService*& fleet) : fleet_(fleet) {}
  Status Provision(const ActuatorRequest& r) override {
    std::lock_guard lock(mu_);
    ++provisions;
    if (fail) return MakeError(ErrorCode::kUnavailable, "no capacity in the zone");
    if (!join) return {};
    for (const auto& n : r.nodes) {
      proto::Hello h;
      h.join_token = r.join_token;
      h.facts.hostname = n;
      h.simulated = true;
      for (int i = 0; i < r.gpus_per_node; ++i) {
        Gpu g;
        g.index = i;
        g.uuid = n + "-" + std::to_string(i);
        g.name = "NVIDIA H100 80GB HBM3";
        h.gpus.push_back(g);
      }
      auto w = fleet_->OnHello(h, "test");
      if (!w.ok()) return w.error();
      started.push_back(n);
    }
    return {};
  }
  Status Deprovision(const ActuatorRequest& r) override {
    std::lock_guard lock(mu_);
    stopped.insert(stopped.end(), r.nodes.begin(), r.nodes.end());
    return {};
  }
  std::mutex mu_;
  int provisions = 0;
  bool fail = false, join = true;
  std::vector<std::string> started, stopped;

 private:
  FleetService*& fleet_;
};

class ScalingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("gf-scaling-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    Start();
    auto spec = ParseFleetSpec(kFleet, "fleet.yaml", *GpuCatalog::Builtin());
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    ASSERT_TRUE(fleet_->Apply(spec.value()).ok());
    ASSERT_EQ(spec->scaling.size(), 1u);
    auto set = scaling_->SetPolicy(spec->scaling[0], "test");
    ASSERT_TRUE(set.ok()) << set.error().message;
  }
  void TearDown() override {
    Shut();
    std::filesystem::remove_all(dir_);
  }
  void Shut() {
    if (scaling_) scaling_->Stop();
    scaling_.reset();
    jobs_.reset();
    fleet_ptr_ = nullptr;
    fleet_.reset();
    store_.reset();
  }
  void Start() {
    store_ = std::move(OpenStore("sqlite:" + (dir_ / "db").string()).value());
    fleet_ = std::make_unique<FleetService>(*store_, GpuCatalog::Builtin(), clock_, FleetOptions{});
    ASSERT_TRUE(fleet_->Load().ok());
    fleet_ptr_ = fleet_.get();
    jobs_ = std::make_unique<workload::JobService>(*fleet_, *store_, clock_);
    ASSERT_TRUE(jobs_->Load().ok());
    fleet_->set_busy_check([j = jobs_.get()](const std::string& n) { return j->Busy(n); });
    ScalingOptions o;
    o.controller_url = "http://127.0.0.1:1";
    o.sim = actuator_;
    scaling_ = std::make_unique<ScalingService>(*fleet_, *jobs_, *store_, clock_, o);
    ASSERT_TRUE(scaling_->Load().ok());
    scaling_->Start();
  }
  // The actuator runs on the service's worker: wait for it (real time, bounded).
  template <class F>
  bool WaitFor(F f) {
    for (int i = 0; i < 500; ++i) {
      if (f()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return f();
  }
  std::map<std::string, int> States() {
    std::map<std::string, int> out;
    NodeFilter f;
    f.pool = "h100";
    for (const auto& n : fleet_->Nodes(f)) ++out[std::string(ToString(n.state))];
    return out;
  }
  int Ready() { return States()["ready"]; }
  json::object LastEvent() {
    auto e = scaling_->Events("h100", 1);
    EXPECT_TRUE(e.ok() && !e->empty());
    return json::parse(e->front().doc).as_object();
  }
  workload::Job Submit(int gpus, const std::string& team = "vision") {
    workload::JobSpec s;
    s.team = team;
    s.pool = "h100";
    s.gpus = gpus;
    auto j = jobs_->Submit(s);
    EXPECT_TRUE(j.ok()) << j.error().message;
    return j.value();
  }
  void Decide() {
    clock_->Advance(10'000);
    scaling_->Tick();
  }

  std::filesystem::path dir_;
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  FleetService* fleet_ptr_ = nullptr;
  std::shared_ptr<JoiningActuator> actuator_ = std::make_shared<JoiningActuator>(fleet_ptr_);
  std::unique_ptr<Store> store_;
  std::unique_ptr<FleetService> fleet_;
  std::unique_ptr<workload::JobService> jobs_;
  std::unique_ptr<ScalingService> scaling_;
};

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
  auto audit = store_->ListAudit(0, 10);
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
  ASSERT_TRUE(WaitFor([&] { return Ready() == 1; })) << "then the idle surplus goes";

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
  ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(log); }));
  std::ifstream in(log);
  std::string line;
  std::getline(in, line);
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

// Node 0 runs A (6 GPUs, not movable) and T (2); M (2, movable) waits for a second node, node 1.
// T ends. Node 0 is not lightly used (6 of 8); node 1 is (2 of 8, movable), and after
// idle_before_remove (60 s) its job fits node 0: M moves there, keeping its progress, and node 1
// is drained and removed. Then U (4, not movable) gets a node of its own and A ends: node
// 0 runs only M and is light, node 1 runs U and is light too but cannot be emptied; M moves to
// node 1 and node 0 goes.
TEST_F(ScalingTest, ConsolidationMovesMovableJobsOffALightNodeAndRemovesIt) {
  scaling_->Tick();
  ASSERT_TRUE(WaitFor([&] { return Ready() == 1; }));
  auto submit = [&](int gpus, bool movable, int64_t duration_ms = 0) {
    workload::JobSpec s;
    s.team = "vision";
    s.pool = "h100";
    s.gpus = gpus;
    s.movable = movable;
    s.duration_ms = duration_ms;
    auto j = jobs_->Submit(s);
    EXPECT_TRUE(j.ok()) << j.error().message;
    return j.value();
  };
  auto a = submit(6, false);
  auto t = submit(2, false);
  auto m = submit(2, true, 3'600'000);
  EXPECT_EQ(m.state, workload::JobState::kQueued);
  Decide();
  ASSERT_TRUE(WaitFor([&] { return Ready() == 2; }));
  jobs_->Tick();
  int64_t m_started = jobs_->Get(m.id)->start_ms;
  EXPECT_EQ(jobs_->Get(m.id)->placement.at(0).node, "h100-0001");
  ASSERT_TRUE(jobs_->Cancel(t.id).ok());
  Decide();  // light from here on
  for (int i = 0; i < 5; ++i) Decide();
  EXPECT_EQ(jobs_->Get(m.id)->moves, 0) << "light for 50 s: not yet";
  Decide();
  auto ev = LastEvent();
  EXPECT_EQ(ev.at("kind"), "consolidate") << ev;
  EXPECT_EQ(ev.at("reason"), "consolidate");
  EXPECT_EQ(ev.at("delta"), -1);
  EXPECT_EQ(ev.at("nodes"), json::parse(R"(["h100-0001"])"));
  EXPECT_NE(ev.at("detail").as_string().find(
                "1 node(s) used at most 50% of their GPUs for 1m emptied; 1 wanted, 2 ready: job " +
                std::to_string(m.id) + " h100-0001 -> h100-0000"),
            std::string::npos)
      << ev;
  auto moved = jobs_->Get(m.id).value();
  EXPECT_EQ(moved.state, workload::JobState::kRunning);
  EXPECT_EQ(moved.moves, 1);
  EXPECT_EQ(moved.placement.at(0).node, "h100-0000");
  EXPECT_EQ(moved.placement.at(0).gpus, (std::vector<int>{6, 7})) << "the GPUs A left free";
  EXPECT_EQ(moved.reason, "moved from h100-0001 to h100-0000 (consolidation)");
  ASSERT_TRUE(WaitFor([&] { return States()["retired"] == 1; })) << Ready();
  EXPECT_EQ(jobs_->Get(a.id)->placement.at(0).node, "h100-0000") << "A never moves";
  // M keeps the run time it had: it ends an hour after its first start, not after its move.
  clock_->Set(m_started + 3'600'000 - 1000);
  jobs_->Tick();
  EXPECT_EQ(jobs_->Get(m.id)->state, workload::JobState::kRunning);
  clock_->Advance(1000);
  jobs_->Tick();
  EXPECT_EQ(jobs_->Get(m.id)->state, workload::JobState::kCompleted);
  EXPECT_NEAR(jobs_->Get(m.id)->gpu_hours, 2.0, 1e-9);

  // Now only a job that is not movable is on a light node: it stays.
  auto m2 = submit(2, true);
  auto u = submit(4, false);
  Decide();
  ASSERT_TRUE(WaitFor([&] { return Ready() == 2; }));
  jobs_->Tick();
  std::string u_node = jobs_->Get(u.id)->placement.at(0).node;
  EXPECT_NE(u_node, "h100-0000");
  ASSERT_TRUE(jobs_->Cancel(a.id).ok());
  for (int i = 0; i < 8; ++i) Decide();
  ev = LastEvent();
  EXPECT_EQ(ev.at("kind"), "consolidate") << ev;
  EXPECT_EQ(ev.at("nodes"), json::parse(R"(["h100-0000"])"));
  EXPECT_EQ(jobs_->Get(m2.id)->placement.at(0).node, u_node);
  EXPECT_EQ(jobs_->Get(u.id)->placement.at(0).node, u_node);
  EXPECT_EQ(jobs_->Get(u.id)->moves, 0);
}

// A node consolidation has emptied but whose drain does not complete (here the fleet is told
// the node still runs something) is not removed, and an event says so.
TEST_F(ScalingTest, AConsolidatedNodeThatDoesNotDrainIsKeptAndSaysWhy) {
  scaling_->Tick();
  ASSERT_TRUE(WaitFor([&] { return Ready() == 1; }));
  auto submit = [&](int gpus, bool movable) {
    workload::JobSpec s;
    s.team = "vision";
    s.pool = "h100";
    s.gpus = gpus;
    s.movable = movable;
    auto j = jobs_->Submit(s);
    EXPECT_TRUE(j.ok()) << j.error().message;
    return j.value();
  };
  submit(6, false);
  auto t = submit(2, false);
  auto m = submit(2, true);
  Decide();
  ASSERT_TRUE(WaitFor([&] { return Ready() == 2; }));
  jobs_->Tick();
  ASSERT_EQ(jobs_->Get(m.id)->placement.at(0).node, "h100-0001");
  ASSERT_TRUE(jobs_->Cancel(t.id).ok());
  fleet_->set_busy_check([](const std::string& n) { return n == "h100-0001"; });
  for (int i = 0; i < 7; ++i) Decide();
  auto ev = LastEvent();
  EXPECT_EQ(ev.at("kind"), "consolidate_failed") << ev;
  EXPECT_EQ(ev.at("delta"), 0);
  EXPECT_EQ(json::value_to<std::string>(ev.at("detail")),
            "h100-0001 emptied, not removed: it is draining: drain by autoscaler: waiting for its "
            "jobs to end; moved: job " +
                std::to_string(m.id) + " h100-0001 -> h100-0000")
      << ev;
  EXPECT_EQ(jobs_->Get(m.id)->placement.at(0).node, "h100-0000");
  EXPECT_EQ(States()["draining"], 1);
  EXPECT_EQ(States()["retired"], 0) << "not removed";
}

// Tuning on the pool's own jobs: refused with too few of them; then the cheapest setting within
// the objective is applied to the policy, with a policy event that names it.
TEST_F(ScalingTest, TuneReplaysThePoolsJobsAndAppliesTheCheapestSetting) {
  EXPECT_EQ(scaling_->Tune("nowhere", {}, "test").error().code, ErrorCode::kNotFound);
  auto roomy = scaling_->Get("h100")->scaling;
  roomy.policy.target_share = 0.6;
  ASSERT_TRUE(scaling_->SetPolicy(roomy, "test").ok());
  for (int i = 0; i < 40; ++i) {
    workload::JobSpec s;
    s.team = i % 2 ? "vision" : "nlp";
    s.pool = "h100";
    s.gpus = 1 + i % 4;
    s.duration_ms = (20 + 7 * (i % 5)) * 60'000;
    ASSERT_TRUE(jobs_->Submit(s).ok());
    if (i == 9) {
      auto few = scaling_->Tune("h100", {}, "test");
      ASSERT_FALSE(few.ok());
      EXPECT_EQ(few.error().code, ErrorCode::kConflict);
      EXPECT_EQ(few.error().message,
                "pool 'h100' has 10 jobs to replay in its history; tuning needs at least 20");
    }
    for (int k = 0; k < 30; ++k) {  // 5 minutes between submissions
      Decide();
      jobs_->Tick();
    }
  }
  TuneRequest req;
  req.wait_p95_s = 600;
  auto dry = scaling_->Tune("h100", req, "test");
  ASSERT_TRUE(dry.ok()) << dry.error().message;
  EXPECT_EQ(dry->jobs, 40u);
  EXPECT_FALSE(dry->applied);
  EXPECT_EQ(dry->result.grid.size(), 9u) << "reactive: shares only";
  ASSERT_GE(dry->result.chosen, 0);
  EXPECT_DOUBLE_EQ(dry->result.current.target_share, 0.6);
  const auto& cheapest = dry->result.grid[static_cast<size_t>(dry->result.chosen)];
  EXPECT_GT(cheapest.target_share, 0.6) << "fewer nodes for the same jobs";
  EXPECT_LT(cheapest.result.gpu_hours_idle, dry->result.current.result.gpu_hours_idle);
  EXPECT_DOUBLE_EQ(scaling_->Get("h100")->scaling.policy.target_share, 0.6) << "a dry run";

  req.apply = true;
  auto applied = scaling_->Tune("h100", req, "alice");
  ASSERT_TRUE(applied.ok()) << applied.error().message;
  EXPECT_TRUE(applied->applied);
  const auto& best = applied->result.grid[static_cast<size_t>(applied->result.chosen)];
  EXPECT_DOUBLE_EQ(applied->after.policy.target_share, best.target_share);
  EXPECT_DOUBLE_EQ(scaling_->Get("h100")->scaling.policy.target_share, best.target_share);
  auto e = LastEvent();
  EXPECT_EQ(e.at("kind").as_string(), "policy");
  EXPECT_EQ(e.at("actor").as_string(), "alice");
  char share[32];
  std::snprintf(share, sizeof share, "target share %.2f", best.target_share);
  EXPECT_NE(std::string(e.at("detail").as_string()).find(share), std::string::npos)
      << e.at("detail").as_string();

  // Again: the policy has the cheapest setting already, so nothing changes and no event.
  size_t events = scaling_->Events("h100", 1000)->size();
  auto again = scaling_->Tune("h100", req, "bob");
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_FALSE(again->applied);
  EXPECT_EQ(again->not_applied, "");
  EXPECT_EQ(again->result.chosen, applied->result.chosen);
  EXPECT_EQ(scaling_->Events("h100", 1000)->size(), events);
}

// The replay of a tune runs on the live clock's time: a minimum the policy's schedule holds at
// the hour the jobs came is applied, one at another hour is not.
TEST_F(ScalingTest, TuneAppliesTheScheduledMinimumAtTheHoursItHolds) {
  clock_->Set(1'796'047'200'000);  // Monday 2026-11-30, 14:00 UTC
  for (int i = 0; i < 20; ++i) {
    workload::JobSpec s;
    s.team = "vision";
    s.pool = "h100";
    s.gpus = 1;
    s.duration_ms = 10 * 60'000;
    ASSERT_TRUE(jobs_->Submit(s).ok());
    clock_->Advance(60'000);
  }
  auto peak = [&](int from_hour) {
    auto sc = scaling_->Get("h100")->scaling;
    sc.policy.schedule = {{4, from_hour, from_hour + 1, true}};
    EXPECT_TRUE(scaling_->SetPolicy(sc, "test").ok());
    auto t = scaling_->Tune("h100", {}, "test");
    EXPECT_TRUE(t.ok()) << t.error().message;
    return t.ok() ? t->result.current.result.peak_nodes : -1;
  };
  EXPECT_EQ(peak(14), 4) << "4 nodes from 14:00 on weekdays: the jobs came then";
  EXPECT_LT(peak(2), 4) << "from 02:00: not when the jobs came";
}

// tune.every: the autoscaler tunes the pool on its own past on schedule, from the worker: with
// too few jobs it says so; with enough, it applies the cheaper share and says what it found.
TEST_F(ScalingTest, ScheduledTuneAppliesTheCheaperSettingAndSaysWhatItFound) {
  auto sc = scaling_->Get("h100")->scaling;
  sc.policy.target_share = 0.6;
  sc.tune.every_s = 3600;
  sc.tune.wait_p95_s = 600;
  ASSERT_TRUE(scaling_->SetPolicy(sc, "test").ok());
  auto tunes = [&] {
    std::vector<std::string> out;
    for (const auto& e : scaling_->Events("h100", 1000).value()) {
      auto o = json::parse(e.doc).as_object();
      if (o.at("kind") == "tune") out.emplace_back(o.at("detail").as_string());
    }
    return out;  // newest first
  };
  // A job every 5 minutes for 150 minutes; a tune is due an hour after the first decision that
  // sees the schedule, and every hour after.
  for (int i = 0; i < 30; ++i) {
    workload::JobSpec s;
    s.team = "vision";
    s.pool = "h100";
    s.gpus = 1 + i % 4;
    s.duration_ms = (20 + 7 * (i % 5)) * 60'000;
    ASSERT_TRUE(jobs_->Submit(s).ok());
    for (int k = 0; k < 30; ++k) {
      Decide();
      jobs_->Tick();
    }
    if (i == 12) {  // 65 minutes in, 13 jobs
      ASSERT_TRUE(WaitFor([&] { return tunes().size() == 1; }));
      EXPECT_EQ(tunes()[0],
                "not tuned: pool 'h100' has 13 jobs to replay in its history; tuning needs at "
                "least 20");
    }
  }
  ASSERT_TRUE(WaitFor([&] { return tunes().size() == 2; })) << tunes().size();
  std::string applied = tunes()[0];
  EXPECT_EQ(applied.rfind("25 jobs of the last 7d replayed, objective p95 wait <= 600 s: share 0.6 "
                          "-> share ",
                          0),
            0u)
      << applied;
  double share = scaling_->Get("h100")->scaling.policy.target_share;
  EXPECT_GT(share, 0.6);
  char want[32];
  std::snprintf(want, sizeof want, "-> share %g: ", share);
  EXPECT_NE(applied.find(want), std::string::npos) << applied;
  EXPECT_EQ(scaling_->Get("h100")->scaling.tune.every_s, 3600) << "the schedule stays";
  // The change is audited as the autoscaler's.
  auto audit = store_->ListAudit(0, 1000);
  ASSERT_TRUE(audit.ok());
  bool found = false;
  for (const auto& a : audit.value()) found |= a.actor == "autoscaler" && a.action == "tune 0";
  EXPECT_TRUE(found);
}

TEST(PolicyYaml, ErrorsPointAtTheFieldsLine) {
  std::string yaml = kFleet;
  yaml.replace(yaml.find("max_nodes: 4"), 12, "max_nodes: x");
  auto spec = ParseFleetSpec(yaml, "fleet.yaml", *GpuCatalog::Builtin());
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.error().message,
            "fleet.yaml:14: clusters[0].pools[0].scaling.max_nodes: must be an integer");
}

}  // namespace
}  // namespace gpufleet::scaling
