#include "fleet/fleet.h"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/json.hpp>
#include <condition_variable>
#include <filesystem>
#include <set>
#include <thread>

#include "fleet/teams.h"
#include "tests/support/fixtures.h"
#include "tests/support/temp_dir.h"

namespace gpufleet {
namespace {

const std::string kFleet = ::gpufleet::testing::FleetFixture("registry");  // tests/fixtures/fleets/

class FleetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Start();
    auto spec = ParseFleetSpec(kFleet, "fleet.yaml", *GpuCatalog::Builtin());
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    auto counts = fleet_->Apply(spec.value());
    ASSERT_TRUE(counts.ok()) << counts.error().message;
    EXPECT_EQ(counts->clusters_created, 2);
    EXPECT_EQ(counts->pools_created, 2);
    auto token = fleet_->CreateJoinToken("h100", 3'600'000, "test");
    ASSERT_TRUE(token.ok());
    join_ = token->secret;
  }
  void TearDown() override {
    fleet_.reset();
    store_ = {};
  }
  void Start() {
    fleet_.reset();
    store_ = {};
    store_ = store::Open("sqlite:" + (dir_ / "db").string()).value();
    FleetOptions o;
    o.heartbeat_interval_ms = 1000;
    o.heartbeat_timeout_ms = 5000;
    fleet_ = std::make_unique<FleetService>(*store_.fleet, *store_.tokens, GpuCatalog::Builtin(),
                                            clock_, o);
    ASSERT_TRUE(fleet_->Load().ok());
  }

  proto::Hello Hello(const std::string& host, int gpus, const std::string& name) {
    proto::Hello h;
    h.join_token = join_;
    h.facts.hostname = host;
    for (int i = 0; i < gpus; ++i) {
      Gpu g;
      g.index = i;
      g.uuid = host + "-" + std::to_string(i);
      g.name = name;
      h.gpus.push_back(g);
    }
    return h;
  }

  testing::TempDir tmp_{"gf-fleet"};  // removed with everything in it after the test
  std::filesystem::path dir_ = tmp_.path();
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  store::Stores store_;
  std::unique_ptr<FleetService> fleet_;
  std::string join_;
};

TEST_F(FleetTest, MatchingNodeRegistersReady) {
  auto w = fleet_->OnHello(Hello("gpu-a", 8, "NVIDIA H100 80GB HBM3"), "10.0.0.1");
  ASSERT_TRUE(w.ok()) << w.error().message;
  EXPECT_EQ(w->pool, "h100");
  EXPECT_EQ(w->cluster, "train");
  EXPECT_FALSE(w->node_token.empty());
  auto n = fleet_->GetNode("gpu-a");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->state, NodeState::kReady);
  EXPECT_EQ(n->gpus.at(0).model, "H100-SXM5-80GB");
  auto events = fleet_->Events("gpu-a", 10);
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ(events->at(1).to, "joining");
  EXPECT_EQ(events->at(0).to, "ready");
}

TEST_F(FleetTest, WrongModelOrCountIsDegradedWithReason) {
  ASSERT_TRUE(fleet_->OnHello(Hello("gpu-b", 8, "NVIDIA L4"), "x").ok());
  auto n = fleet_->GetNode("gpu-b");
  EXPECT_EQ(n->state, NodeState::kDegraded);
  EXPECT_EQ(n->reason, "pool h100 expects 8 x H100-SXM5-80GB, found 8 x L4");
  ASSERT_TRUE(fleet_->OnHello(Hello("gpu-c", 4, "NVIDIA H100 80GB HBM3"), "x").ok());
  EXPECT_EQ(fleet_->GetNode("gpu-c")->reason,
            "pool h100 expects 8 x H100-SXM5-80GB, found 4 x H100-SXM5-80GB");
}

TEST_F(FleetTest, LostGpuMakesNodeUnhealthy) {
  auto h = Hello("gpu-d", 8, "NVIDIA H100 80GB HBM3");
  h.gpus[3].error = "GPU_IS_LOST";
  ASSERT_TRUE(fleet_->OnHello(h, "x").ok());
  auto n = fleet_->GetNode("gpu-d");
  EXPECT_EQ(n->state, NodeState::kUnhealthy);
  EXPECT_EQ(n->reason, "GPU 3: GPU_IS_LOST");
  // The GPU comes back in a later inventory: the node is ready again.
  h.gpus[3].error.clear();
  fleet_->OnMessage("gpu-d", proto::Inventory{h.gpus, std::nullopt});
  EXPECT_EQ(fleet_->GetNode("gpu-d")->state, NodeState::kReady);
}

TEST_F(FleetTest, BadTokensAreRefused) {
  auto h = Hello("gpu-e", 8, "NVIDIA H100 80GB HBM3");
  h.join_token = "gfj_wrong";
  EXPECT_EQ(fleet_->OnHello(h, "x").error().code, ErrorCode::kUnauthenticated);
  h.join_token.clear();
  EXPECT_EQ(fleet_->OnHello(h, "x").error().code, ErrorCode::kUnauthenticated);
  auto expiring = fleet_->CreateJoinToken("h100", 1000, "test");
  clock_->Advance(2000);
  h.join_token = expiring->secret;
  auto refused = fleet_->OnHello(h, "x");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("expired"), std::string::npos);
  auto revoked = fleet_->CreateJoinToken("h100", 0, "test");
  ASSERT_TRUE(store_.tokens->RevokeJoinToken(revoked->token.id).ok());
  h.join_token = revoked->secret;
  EXPECT_NE(fleet_->OnHello(h, "x").error().message.find("revoked"), std::string::npos);
  EXPECT_FALSE(fleet_->GetNode("gpu-e").ok());
  EXPECT_EQ(fleet_->CreateJoinToken("nope", 0, "t").error().code, ErrorCode::kNotFound);
}

TEST_F(FleetTest, NodeTokenReconnectsWithoutJoinToken) {
  auto w = fleet_->OnHello(Hello("gpu-f", 8, "NVIDIA H100 80GB HBM3"), "x");
  auto h = Hello("gpu-f", 8, "NVIDIA H100 80GB HBM3");
  h.join_token.clear();
  h.node_token = w->node_token;
  auto again = fleet_->OnHello(h, "x");
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_TRUE(again->node_token.empty());  // the credential stays the same
  h.node_token = "gfn_forged";
  EXPECT_EQ(fleet_->OnHello(h, "x").error().code, ErrorCode::kUnauthenticated);
}

// A join token admits a name not registered yet: another pool's token (or the same pool's)
// cannot move a node, take its node token or its commands. An admin's reset of its identity
// lets the next join token take the name; a node provisioned for a pool is joined by that
// pool's token only.
TEST_F(FleetTest, AJoinTokenCannotTakeARegisteredName) {
  // A welcome lost on the way: the agent never got its node token and never spoke, so the same
  // pool's join token registers the name again (a new node token), and only until it speaks.
  auto lost = fleet_->OnHello(Hello("gpu-t", 8, "NVIDIA H100 80GB HBM3"), "10.0.0.1");
  ASSERT_TRUE(lost.ok());
  auto w = fleet_->OnHello(Hello("gpu-t", 8, "NVIDIA H100 80GB HBM3"), "10.0.0.1");
  ASSERT_TRUE(w.ok()) << w.error().message;
  EXPECT_NE(w->node_token, lost->node_token);
  fleet_->OnMessage("gpu-t", proto::Heartbeat{1, 0});  // it has its token now
  auto l4 = fleet_->CreateJoinToken("l4", 3'600'000, "test");
  ASSERT_TRUE(l4.ok());
  auto h = Hello("gpu-t", 1, "NVIDIA L4");
  for (const std::string& token : {l4->secret, join_}) {
    h.join_token = token;
    auto refused = fleet_->OnHello(h, "10.9.9.9");
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().code, ErrorCode::kPermissionDenied);
    EXPECT_NE(refused.error().message.find("already registered (cluster train)"), std::string::npos)
        << refused.error().message;
  }
  auto n = fleet_->GetNode("gpu-t");
  EXPECT_EQ(n->pool, "h100");
  EXPECT_EQ(n->gpus.size(), 8u);
  // Its own token still works; a hostname in another case is the same name.
  h = Hello("GPU-T", 8, "NVIDIA H100 80GB HBM3");
  h.join_token.clear();
  h.node_token = w->node_token;
  EXPECT_TRUE(fleet_->OnHello(h, "10.0.0.1").ok());
  // The admin clears the identity: the next join token, of any pool, takes the name.
  auto reset = fleet_->ResetIdentity("gpu-t", "admin");
  ASSERT_TRUE(reset.ok()) << reset.error().message;
  h = Hello("gpu-t", 1, "NVIDIA L4");
  h.join_token = l4->secret;
  auto taken = fleet_->OnHello(h, "10.0.0.2");
  ASSERT_TRUE(taken.ok()) << taken.error().message;
  EXPECT_EQ(taken->pool, "l4");
  EXPECT_FALSE(taken->node_token.empty());
  // and the old node token is no longer the node's.
  h.join_token.clear();
  h.node_token = w->node_token;
  EXPECT_EQ(fleet_->OnHello(h, "x").error().code, ErrorCode::kUnauthenticated);
  EXPECT_EQ(fleet_->ResetIdentity("nope", "admin").error().code, ErrorCode::kNotFound);
  fleet_->OnMessage("gpu-t", proto::Heartbeat{2, 0});
  // Provisioned for l4 (as the autoscaler does): l4's token joins it, h100's does not.
  ASSERT_TRUE(fleet_->Provision("l4", "gpu-p", true, "scale up", "scaler").ok());
  auto p = Hello("gpu-p", 1, "NVIDIA L4");
  EXPECT_EQ(fleet_->OnHello(p, "x").error().code, ErrorCode::kPermissionDenied);
  p.join_token = l4->secret;
  EXPECT_TRUE(fleet_->OnHello(p, "x").ok());
}

TEST_F(FleetTest, SilentNodeTurnsUnreachableAndComesBack) {
  ASSERT_TRUE(fleet_->OnHello(Hello("gpu-g", 8, "NVIDIA H100 80GB HBM3"), "x").ok());
  clock_->Advance(4000);
  fleet_->OnMessage("gpu-g", proto::Heartbeat{1, 0});
  clock_->Advance(4000);
  EXPECT_EQ(fleet_->CheckHeartbeats(), 0);  // 4 s since the heartbeat: within the timeout
  clock_->Advance(2000);
  EXPECT_EQ(fleet_->CheckHeartbeats(), 1);
  auto n = fleet_->GetNode("gpu-g");
  EXPECT_EQ(n->state, NodeState::kUnreachable);
  EXPECT_NE(n->reason.find("no heartbeat for 6s"), std::string::npos) << n->reason;
  fleet_->OnMessage("gpu-g", proto::Heartbeat{2, 0});
  EXPECT_EQ(fleet_->GetNode("gpu-g")->state, NodeState::kReady);
}

// A node taken out (cordoned by remediation) keeps why while its health verdict changes: the
// remediation finds the nodes it took out by that reason, to reset their failed GPUs.
TEST_F(FleetTest, ACordonedNodeKeepsItsReasonWhenItsHealthChanges) {
  ASSERT_TRUE(fleet_->OnHello(Hello("gpu-c", 8, "NVIDIA H100 80GB HBM3"), "x").ok());
  ASSERT_TRUE(fleet_->SetHealth("gpu-c", NodeState::kUnhealthy, "GPU 5: XID 79").ok());
  EXPECT_EQ(fleet_->GetNode("gpu-c")->reason, "GPU 5: XID 79");
  ASSERT_TRUE(fleet_->Act("gpu-c", NodeAction::kCordon, "remediation").ok());
  ASSERT_TRUE(fleet_->SetHealth("gpu-c", NodeState::kUnhealthy, "GPU 2: ECC; GPU 5: XID 79").ok());
  auto n = fleet_->GetNode("gpu-c");
  EXPECT_EQ(n->state, NodeState::kCordoned);
  EXPECT_EQ(n->reason, "cordon by remediation");
}

// A decommissioning node's agent going away is what decommissioning leads to: the node stays
// decommissioning (out of alerts and remote write, deletable), disconnected, said once.
TEST_F(FleetTest, ADecommissioningNodeWhoseAgentGoesStaysDecommissioning) {
  ASSERT_TRUE(fleet_->OnHello(Hello("gpu-d", 8, "NVIDIA H100 80GB HBM3"), "x").ok());
  ASSERT_TRUE(fleet_->Act("gpu-d", NodeAction::kDecommission, "admin").ok());
  clock_->Advance(10'000);
  EXPECT_EQ(fleet_->CheckHeartbeats(), 1);  // disconnected
  auto n = fleet_->GetNode("gpu-d");
  EXPECT_EQ(n->state, NodeState::kDecommissioning);
  EXPECT_FALSE(n->connected);
  clock_->Advance(10'000);
  EXPECT_EQ(fleet_->CheckHeartbeats(), 0);  // nothing more to say
  EXPECT_TRUE(fleet_->Delete("gpu-d").ok());
}

// A node whose agent's frame waits to be handled (the controller behind on its agents, as in a
// registration storm) is not silent: it stays as it is until the frame is handled or stops
// waiting with nothing after it.
TEST_F(FleetTest, ANodeWithAFrameWaitingIsNotDeclaredUnreachable) {
  ASSERT_TRUE(fleet_->OnHello(Hello("gpu-w", 8, "NVIDIA H100 80GB HBM3"), "x").ok());
  ASSERT_TRUE(fleet_->OnHello(Hello("gpu-s", 8, "NVIDIA H100 80GB HBM3"), "x").ok());
  bool waiting = true;
  fleet_->set_frame_waiting([&](const std::string& node) { return node == "gpu-w" && waiting; });
  clock_->Advance(10'000);
  EXPECT_EQ(fleet_->CheckHeartbeats(), 1);
  EXPECT_EQ(fleet_->GetNode("gpu-s")->state, NodeState::kUnreachable);
  EXPECT_EQ(fleet_->GetNode("gpu-w")->state, NodeState::kReady);
  waiting = false;  // nothing waits any more, and nothing was heard: silent after all
  EXPECT_EQ(fleet_->CheckHeartbeats(), 1);
  EXPECT_EQ(fleet_->GetNode("gpu-w")->state, NodeState::kUnreachable);
  fleet_->set_frame_waiting(nullptr);
}

// With several controllers, a node loaded from the store whose agent never reached this
// controller is another controller's to judge; one that did is judged here as always.
TEST_F(FleetTest, NodesNeverHeardHereAreLeftToTheirControllerWhenAsked) {
  ASSERT_TRUE(fleet_->OnHello(Hello("gpu-x", 8, "NVIDIA H100 80GB HBM3"), "x").ok());
  ASSERT_TRUE(fleet_->OnHello(Hello("gpu-y", 8, "NVIDIA H100 80GB HBM3"), "x").ok());
  fleet_->OnMessage("gpu-x", proto::Heartbeat{1, 0});
  Start();  // another controller's view: both nodes loaded, neither heard here
  fleet_->OnMessage("gpu-x", proto::Heartbeat{2, 0});
  clock_->Advance(10'000);
  EXPECT_EQ(fleet_->CheckHeartbeats(false), 1);
  EXPECT_EQ(fleet_->GetNode("gpu-x")->state, NodeState::kUnreachable);
  EXPECT_NE(fleet_->GetNode("gpu-y")->state, NodeState::kUnreachable);
  // Alone now (the others went): their nodes' agents get a full timeout to come here first.
  EXPECT_EQ(fleet_->CheckHeartbeats(true), 0);
  clock_->Advance(4'000);
  EXPECT_EQ(fleet_->CheckHeartbeats(true), 0);
  clock_->Advance(2'000);
  EXPECT_EQ(fleet_->CheckHeartbeats(true), 1);  // a lone controller judges every node
  EXPECT_EQ(fleet_->GetNode("gpu-y")->state, NodeState::kUnreachable);
}

// Two controllers on one store: each takes what the other wrote when told the nodes changed. A
// node registered through one is known to the other (its agent may fail over there with its
// node token); a cordon made through the other reaches the controller its agent is connected
// to, which keeps its connection and what the agent said; a node deleted elsewhere goes.
TEST_F(FleetTest, AnotherControllersChangesAreTakenOnRefresh) {
  FleetOptions o;
  o.heartbeat_interval_ms = 1000;
  o.heartbeat_timeout_ms = 5000;
  FleetService other(*store_.fleet, *store_.tokens, GpuCatalog::Builtin(), clock_, o);
  ASSERT_TRUE(other.Load().ok());
  auto w = fleet_->OnHello(Hello("gpu-r", 8, "NVIDIA H100 80GB HBM3"), "x");
  ASSERT_TRUE(w.ok());
  uint64_t conn = fleet_->OnConnected("gpu-r");
  fleet_->OnMessage("gpu-r", proto::Heartbeat{1, 0});
  EXPECT_EQ(other.Refresh().value(), 1);
  EXPECT_EQ(other.Refresh().value(), 0);  // nothing new
  ASSERT_TRUE(other.GetNode("gpu-r").ok());
  EXPECT_EQ(other.GetNode("gpu-r")->gpus.size(), 8u);
  EXPECT_TRUE(other.GetNode("gpu-r")->connected);  // to the first one
  EXPECT_EQ(other.GetNode("gpu-r")->connected_ms, clock_->NowMs());

  // The agent leaves the first controller: it is not connected, for the first, until it says
  // hello to one.
  fleet_->OnClosed("gpu-r", conn);
  ASSERT_TRUE(fleet_->Refresh().ok());
  EXPECT_FALSE(fleet_->GetNode("gpu-r")->connected);
  // It fails over to the other controller with its node token.
  clock_->Advance(1500);
  auto back = Hello("gpu-r", 8, "NVIDIA H100 80GB HBM3");
  back.join_token.clear();
  back.node_token = w->node_token;
  ASSERT_TRUE(other.OnHello(back, "x").ok());
  ASSERT_TRUE(fleet_->Refresh().ok());
  EXPECT_TRUE(fleet_->GetNode("gpu-r")->connected);  // served by the other one now
  EXPECT_EQ(fleet_->GetNode("gpu-r")->connected_ms, clock_->NowMs());
  // The other controller judges it; here it is as recent as can be told (no false "late").
  clock_->Advance(20'000);
  EXPECT_EQ(fleet_->CheckHeartbeats(false), 0);
  EXPECT_EQ(fleet_->GetNode("gpu-r")->last_seen_ms, clock_->NowMs());

  // Cordoned through the first: the one its agent is on takes it and stays connected.
  other.OnConnected("gpu-r");
  ASSERT_TRUE(fleet_->Act("gpu-r", NodeAction::kCordon, "alice").ok());
  EXPECT_EQ(other.Refresh().value(), 1);
  auto seen = other.GetNode("gpu-r");
  EXPECT_EQ(seen->state, NodeState::kCordoned);
  EXPECT_TRUE(seen->connected);
  ASSERT_TRUE(other.Act("gpu-r", NodeAction::kUncordon, "bob").ok());
  ASSERT_TRUE(fleet_->Refresh().ok());
  EXPECT_EQ(fleet_->GetNode("gpu-r")->state, NodeState::kReady);

  // Retired and deleted through one: the other forgets it, unless its agent is connected there.
  ASSERT_TRUE(fleet_->OnHello(Hello("gpu-s", 8, "NVIDIA H100 80GB HBM3"), "x").ok());
  ASSERT_TRUE(other.Refresh().ok());
  ASSERT_TRUE(fleet_->Retire("gpu-s", "scaled down", "autoscaler").ok());
  ASSERT_TRUE(fleet_->Delete("gpu-s").ok());
  EXPECT_EQ(other.Refresh().value(), 1);
  EXPECT_FALSE(other.GetNode("gpu-s").ok());
}

// Teams read back from the store (a restart, another controller's change) keep their names:
// each is its own team.
TEST_F(FleetTest, TeamsReadBackFromTheStoreAreEachTheirOwn) {
  TeamService teams(*store_.teams, clock_);
  ASSERT_TRUE(teams.Load().ok());
  for (const char* name : {"nlp", "vision", "speech"}) {
    Team t;
    t.name = name;
    t.projects.push_back(Project{"main"});
    ASSERT_TRUE(teams.Create(t).ok()) << name;
  }
  TeamService again(*store_.teams, clock_);
  ASSERT_TRUE(again.Load().ok());
  auto listed = again.List();
  ASSERT_EQ(listed.size(), 3u);
  EXPECT_EQ(listed[0].name, "nlp");
  EXPECT_EQ(listed[2].name, "vision");
  EXPECT_TRUE(again.CheckJob("speech", "main").ok());
}

TEST_F(FleetTest, CordonSurvivesAnOutage) {
  auto w = fleet_->OnHello(Hello("gpu-h", 8, "NVIDIA H100 80GB HBM3"), "x");
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(fleet_->Act("gpu-h", NodeAction::kCordon, "alice").ok());
  clock_->Advance(10'000);
  fleet_->CheckHeartbeats();
  EXPECT_EQ(fleet_->GetNode("gpu-h")->state, NodeState::kUnreachable);
  auto back = Hello("gpu-h", 8, "NVIDIA H100 80GB HBM3");
  back.node_token = w->node_token;  // the agent comes back with its own credential
  ASSERT_TRUE(fleet_->OnHello(back, "x").ok());
  EXPECT_EQ(fleet_->GetNode("gpu-h")->state, NodeState::kCordoned);
  auto drained = fleet_->Act("gpu-h", NodeAction::kDrain, "alice");
  ASSERT_TRUE(drained.ok());
  EXPECT_EQ(drained->state, NodeState::kDrained);
  EXPECT_EQ(fleet_->Act("nope", NodeAction::kCordon, "a").error().code, ErrorCode::kNotFound);
}

// The SQLite store's fleet tables behind a switch that makes writes of nodes fail, as a
// database that went away would.
class SwitchedFleetStore : public store::FleetStore {
 public:
  explicit SwitchedFleetStore(store::FleetStore& real) : real_(real) {}
  bool down = false;
  Status ApplyFleet(const std::vector<Cluster>& c, const std::vector<Pool>& p) override {
    return real_.ApplyFleet(c, p);
  }
  Status DeleteFleet(const std::vector<std::string>& p,
                     const std::vector<std::string>& c) override {
    return real_.DeleteFleet(p, c);
  }
  Result<std::vector<Cluster>> ListClusters() override { return real_.ListClusters(); }
  Result<std::vector<Pool>> ListPools() override { return real_.ListPools(); }
  Status SaveNode(const Node& n, const std::vector<NodeEvent>& e) override {
    if (down) return MakeError(ErrorCode::kUnavailable, "store: the database is away");
    return real_.SaveNode(n, e);
  }
  Result<std::vector<Node>> LoadNodes() override { return real_.LoadNodes(); }
  Status DeleteNode(const std::string& n) override { return real_.DeleteNode(n); }
  Result<std::vector<NodeEvent>> ListNodeEvents(const std::string& n, int limit) override {
    return real_.ListNodeEvents(n, limit);
  }
  Status AppendGpuEvents(const std::vector<GpuEventRecord>& e) override {
    return real_.AppendGpuEvents(e);
  }
  Result<std::vector<GpuEventRecord>> ListGpuEvents(const std::string& n, const std::string& k,
                                                    int limit) override {
    return real_.ListGpuEvents(n, k, limit);
  }

 private:
  store::FleetStore& real_;
};

TEST_F(FleetTest, AChangeWhoseWriteFailedIsWrittenWhenTheStoreReturns) {
  SwitchedFleetStore switched(*store_.fleet);
  FleetOptions o;
  o.heartbeat_interval_ms = 1000;
  o.heartbeat_timeout_ms = 5000;
  FleetService fleet(switched, *store_.tokens, GpuCatalog::Builtin(), clock_, o);
  ASSERT_TRUE(fleet.Load().ok());
  ASSERT_TRUE(fleet.OnHello(Hello("gpu-r", 8, "NVIDIA H100 80GB HBM3"), "x").ok());
  switched.down = true;
  // A change that is refused (503) is undone, and leaves no event to be written later.
  EXPECT_EQ(fleet.Act("gpu-r", NodeAction::kCordon, "alice").error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(fleet.GetNode("gpu-r")->state, NodeState::kReady);
  clock_->Advance(10'000);
  EXPECT_EQ(fleet.CheckHeartbeats(), 1);
  EXPECT_EQ(fleet.GetNode("gpu-r")->state, NodeState::kUnreachable);     // in memory at once
  EXPECT_EQ(store_.fleet->LoadNodes()->at(0).state, NodeState::kReady);  // not yet stored
  // A new node is refused while its registration cannot be stored, and not retried later.
  EXPECT_EQ(fleet.OnHello(Hello("gpu-s", 8, "NVIDIA H100 80GB HBM3"), "x").error().code,
            ErrorCode::kUnavailable);
  EXPECT_FALSE(fleet.GetNode("gpu-s").ok());
  fleet.CheckHeartbeats();  // still away: kept
  switched.down = false;
  fleet.CheckHeartbeats();  // back: written, with the event of the change
  auto stored = store_.fleet->LoadNodes();
  ASSERT_EQ(stored->size(), 1u);
  EXPECT_EQ(stored->at(0).state, NodeState::kUnreachable);
  auto events = store_.fleet->ListNodeEvents("gpu-r", 10);
  ASSERT_EQ(events->size(), 3u);  // joining, ready, unreachable
  EXPECT_EQ(events->at(0).to, "unreachable");
  EXPECT_NE(events->at(0).reason.find("no heartbeat"), std::string::npos);
}

TEST_F(FleetTest, RestartKeepsNodesAndGivesThemTimeToReconnect) {
  ASSERT_TRUE(fleet_->OnHello(Hello("gpu-i", 8, "NVIDIA H100 80GB HBM3"), "x").ok());
  clock_->Advance(60'000);  // the controller was down a minute
  Start();
  auto n = fleet_->GetNode("gpu-i");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->gpus.size(), 8u);
  EXPECT_FALSE(n->connected);
  EXPECT_EQ(fleet_->CheckHeartbeats(), 0);
  clock_->Advance(6000);
  EXPECT_EQ(fleet_->CheckHeartbeats(), 1);
}

TEST_F(FleetTest, ChangingThePoolProfileJudgesItsNodesAgain) {
  ASSERT_TRUE(fleet_->OnHello(Hello("gpu-j", 8, "NVIDIA H100 80GB HBM3"), "x").ok());
  std::string changed = kFleet;
  changed.replace(changed.find("gpus_per_node: 8"), 16, "gpus_per_node: 4");
  auto spec = ParseFleetSpec(changed, "fleet.yaml", *GpuCatalog::Builtin());
  auto counts = fleet_->Apply(spec.value());
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->pools_updated, 1);
  EXPECT_EQ(counts->pools_unchanged, 1);
  EXPECT_EQ(fleet_->GetNode("gpu-j")->state, NodeState::kDegraded);
}

TEST_F(FleetTest, PoolsCannotMoveBetweenClusters) {
  std::string moved = kFleet;
  moved.replace(moved.find("{name: l4"), 9, "{name: h100");
  moved.replace(moved.find("{name: h100, gpu_model: H100"), 11, "{name: h1xx");
  auto spec = ParseFleetSpec(moved, "fleet.yaml", *GpuCatalog::Builtin());
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  auto r = fleet_->Apply(spec.value());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kConflict);
  EXPECT_EQ(fleet_->Pools()->size(), 2u);  // nothing was written
}

TEST_F(FleetTest, FiltersNodes) {
  ASSERT_TRUE(fleet_->OnHello(Hello("gpu-k", 8, "NVIDIA H100 80GB HBM3"), "x").ok());
  ASSERT_TRUE(fleet_->OnHello(Hello("gpu-l", 8, "NVIDIA L4"), "x").ok());
  NodeFilter f;
  f.state = "degraded";
  EXPECT_EQ(fleet_->Nodes(f).size(), 1u);
  f = {};
  f.model = "H100-SXM5-80GB";
  EXPECT_EQ(fleet_->Nodes(f).at(0).name, "gpu-k");
  f = {};
  f.clusters = {"edge"};
  EXPECT_TRUE(fleet_->Nodes(f).empty());
}

TEST_F(FleetTest, NodeListJsonFollowsEveryChange) {
  ASSERT_TRUE(fleet_->OnHello(Hello("gpu-m", 8, "NVIDIA H100 80GB HBM3"), "x").ok());
  ASSERT_TRUE(fleet_->OnHello(Hello("gpu-n", 8, "NVIDIA H100 80GB HBM3"), "x").ok());
  auto items = [&](size_t offset, size_t limit) {
    NodeList list = fleet_->NodesJson({}, offset, limit);
    return std::make_pair(boost::json::parse("[" + list.items + "]").as_array(), list.total);
  };
  auto [all, total] = items(0, 10);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(total, 2u);
  EXPECT_EQ(all[0].at("state").as_string(), "ready");
  EXPECT_EQ(all[0].at("gpu_count").as_int64(), 8);
  std::string seen(all[0].at("last_seen_at").as_string());

  ASSERT_TRUE(fleet_->Act("gpu-m", NodeAction::kCordon, "alice").ok());
  clock_->Advance(1000);
  fleet_->OnMessage("gpu-m", proto::Heartbeat{1, 0});  // no write, still visible
  auto [after, _] = items(0, 10);
  EXPECT_EQ(after[0].at("state").as_string(), "cordoned");
  EXPECT_NE(after[0].at("last_seen_at").as_string(), seen);
  EXPECT_EQ(after[1].at("state").as_string(), "ready");

  auto [page, page_total] = items(1, 1);
  ASSERT_EQ(page.size(), 1u);
  EXPECT_EQ(page[0].at("name").as_string(), "gpu-n");
  EXPECT_EQ(page_total, 2u);
}

constexpr char kH100[] = "NVIDIA H100 80GB HBM3";

// A FleetStore that holds SaveNode of chosen nodes until released, and records the states it
// was given in order: what the registration's write outside the lock is tested with.
class GatedStore : public store::FleetStore {
 public:
  explicit GatedStore(store::FleetStore& real) : real_(real) {}
  void Hold(const std::string& node) {
    std::lock_guard lock(mu_);
    held_.insert(node);
  }
  void Release() {
    std::lock_guard lock(mu_);
    held_.clear();
    cv_.notify_all();
  }
  // Waits until `n` writes are being held.
  bool WaitHolding(size_t n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return holding_ >= n; });
  }
  std::vector<std::string> saves() {
    std::lock_guard lock(mu_);
    return saves_;
  }

  Status SaveNode(const Node& n, const std::vector<NodeEvent>& events) override {
    {
      std::unique_lock lock(mu_);
      saves_.push_back(n.name + ":" + std::string(ToString(n.state)));
      if (held_.count(n.name)) {
        ++holding_;
        cv_.notify_all();
        cv_.wait(lock, [&] { return !held_.count(n.name); });
        --holding_;
      }
    }
    return real_.SaveNode(n, events);
  }
  Status ApplyFleet(const std::vector<Cluster>& c, const std::vector<Pool>& p) override {
    return real_.ApplyFleet(c, p);
  }
  Status DeleteFleet(const std::vector<std::string>& p,
                     const std::vector<std::string>& c) override {
    return real_.DeleteFleet(p, c);
  }
  Result<std::vector<Cluster>> ListClusters() override { return real_.ListClusters(); }
  Result<std::vector<Pool>> ListPools() override { return real_.ListPools(); }
  Result<std::vector<Node>> LoadNodes() override { return real_.LoadNodes(); }
  Status DeleteNode(const std::string& n) override { return real_.DeleteNode(n); }
  Result<std::vector<NodeEvent>> ListNodeEvents(const std::string& node, int limit) override {
    return real_.ListNodeEvents(node, limit);
  }
  Status AppendGpuEvents(const std::vector<GpuEventRecord>& events) override {
    return real_.AppendGpuEvents(events);
  }
  Result<std::vector<GpuEventRecord>> ListGpuEvents(const std::string& node,
                                                    const std::string& kind, int limit) override {
    return real_.ListGpuEvents(node, kind, limit);
  }

 private:
  store::FleetStore& real_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::set<std::string> held_;
  size_t holding_ = 0;
  std::vector<std::string> saves_;
};

class GatedFleetTest : public FleetTest {
 protected:
  void SetUp() override {
    FleetTest::SetUp();
    gated_ = std::make_unique<GatedStore>(*store_.fleet);
    FleetOptions o;
    o.heartbeat_interval_ms = 1000;
    o.heartbeat_timeout_ms = 5000;
    fleet_ =
        std::make_unique<FleetService>(*gated_, *store_.tokens, GpuCatalog::Builtin(), clock_, o);
    ASSERT_TRUE(fleet_->Load().ok());
  }
  void TearDown() override {
    gated_->Release();
    fleet_.reset();
    FleetTest::TearDown();
  }
  std::unique_ptr<GatedStore> gated_;
};

// Registrations write outside the registry's lock: two of them are in the store at once (on
// PostgreSQL, a storm goes at the database's pace instead of one commit at a time).
TEST_F(GatedFleetTest, TwoRegistrationsWriteAtTheSameTime) {
  gated_->Hold("gpu-a");
  gated_->Hold("gpu-b");
  std::thread a([&] { EXPECT_TRUE(fleet_->OnHello(Hello("gpu-a", 8, kH100), "x").ok()); });
  std::thread b([&] { EXPECT_TRUE(fleet_->OnHello(Hello("gpu-b", 8, kH100), "x").ok()); });
  EXPECT_TRUE(gated_->WaitHolding(2));
  // Meanwhile the registry answers.
  EXPECT_EQ(fleet_->Nodes(NodeFilter{}).size(), 2u);
  gated_->Release();
  a.join();
  b.join();
  EXPECT_EQ(fleet_->GetNode("gpu-a")->state, NodeState::kReady);
  EXPECT_EQ(store_.fleet->LoadNodes()->size(), 2u);
}

// Any other change of a node waits for its registration's write, so the store gets the node's
// changes in the order they were made.
TEST_F(GatedFleetTest, AChangeOfANodeWaitsForItsRegistrationsWrite) {
  gated_->Hold("gpu-a");
  std::thread a([&] { EXPECT_TRUE(fleet_->OnHello(Hello("gpu-a", 8, kH100), "x").ok()); });
  ASSERT_TRUE(gated_->WaitHolding(1));
  std::atomic<bool> cordoned = false;
  std::thread b([&] {
    EXPECT_TRUE(fleet_->Act("gpu-a", NodeAction::kCordon, "alice").ok());
    cordoned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(cordoned);
  EXPECT_EQ(gated_->saves(), std::vector<std::string>{"gpu-a:ready"});
  gated_->Release();
  a.join();
  b.join();
  EXPECT_EQ(gated_->saves(), (std::vector<std::string>{"gpu-a:ready", "gpu-a:cordoned"}));
  EXPECT_EQ(store_.fleet->LoadNodes()->at(0).state, NodeState::kCordoned);
}

}  // namespace
}  // namespace gpufleet
