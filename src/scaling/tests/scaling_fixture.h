#pragma once
// The fixture of the live autoscaling tests (scaling_test.cpp, consolidate_tune_test.cpp): the
// real fleet, jobs and SQLite store with a manual clock, one reactive `sim` pool of 1 to 4
// 8-GPU nodes, and an actuator that registers the nodes it is asked for the way their agents
// would (a hello with the join token it was handed).

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "config/fleet_spec.h"
#include "scaling/scaling.h"
#include "tests/support/fixtures.h"
#include "tests/support/temp_dir.h"

namespace gpufleet::scaling {

namespace json = boost::json;

inline const std::string kFleet =
    ::gpufleet::testing::FleetFixture("scaling");  // tests/fixtures/fleets/

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
      // Started again (after a restart), a node presents the token it was given, as an agent
      // that kept it does: a join token admits only names not registered yet.
      if (auto t = tokens.find(n); t != tokens.end()) h.node_token = t->second;
      auto w = fleet_->OnHello(h, "test");
      if (!w.ok()) return w.error();
      if (!w->node_token.empty()) tokens[n] = w->node_token;
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
  std::map<std::string, std::string> tokens;  // node -> the node token it was given

 private:
  FleetService*& fleet_;
};

class ScalingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Start();
    auto spec = ParseFleetSpec(kFleet, "fleet.yaml", *GpuCatalog::Builtin());
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    ASSERT_TRUE(fleet_->Apply(spec.value()).ok());
    ASSERT_EQ(spec->scaling.size(), 1u);
    auto set = scaling_->SetPolicy(spec->scaling[0], "test");
    ASSERT_TRUE(set.ok()) << set.error().message;
  }
  void TearDown() override { Shut(); }
  void Shut() {
    if (scaling_) scaling_->Stop();
    scaling_.reset();
    jobs_.reset();
    fleet_ptr_ = nullptr;
    fleet_.reset();
    store_ = {};
  }
  void Start() {
    store_ = store::Open("sqlite:" + (dir_ / "db").string()).value();
    fleet_ = std::make_unique<FleetService>(*store_.fleet, *store_.tokens, GpuCatalog::Builtin(),
                                            clock_, FleetOptions{});
    ASSERT_TRUE(fleet_->Load().ok());
    fleet_ptr_ = fleet_.get();
    jobs_ = std::make_unique<workload::JobService>(*fleet_, *store_.jobs, clock_);
    ASSERT_TRUE(jobs_->Load().ok());
    fleet_->set_busy_check([j = jobs_.get()](const std::string& n) { return j->Busy(n); });
    ScalingOptions o;
    o.controller_url = "http://127.0.0.1:1";
    o.sim = actuator_;
    scaling_ = std::make_unique<ScalingService>(*fleet_, *jobs_, *store_.scaling, *store_.audit,
                                                clock_, o);
    ASSERT_TRUE(scaling_->Load().ok());
    scaling_->Start();
  }
  // The actuator runs on the service's worker: wait for it (real time, bounded; 30 s, as a
  // loaded CI machine with the sanitizers once took more than the 5 s this was).
  template <class F>
  bool WaitFor(F f) {
    for (int i = 0; i < 3000; ++i) {
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

  testing::TempDir tmp_{"gf-scaling"};  // removed with everything in it after the test
  std::filesystem::path dir_ = tmp_.path();
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  FleetService* fleet_ptr_ = nullptr;
  std::shared_ptr<JoiningActuator> actuator_ = std::make_shared<JoiningActuator>(fleet_ptr_);
  store::Stores store_;
  std::unique_ptr<FleetService> fleet_;
  std::unique_ptr<workload::JobService> jobs_;
  std::unique_ptr<ScalingService> scaling_;
};

}  // namespace gpufleet::scaling
