#include "store/store.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace gpufleet {
namespace {

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("gf-store-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    Reopen();
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Reopen() {
    store_.reset();
    auto s = OpenStore("sqlite:" + (dir_ / "db").string());
    ASSERT_TRUE(s.ok()) << s.error().message;
    store_ = std::move(s.value());
  }

  std::filesystem::path dir_;
  std::unique_ptr<Store> store_;
};

Node MakeNode(const std::string& name, int gpus) {
  Node n;
  n.name = name;
  n.cluster = "c1";
  n.pool = "p1";
  n.state = NodeState::kReady;
  n.reason = "ok";
  n.facts.hostname = name;
  n.facts.driver_version = "550.54.15";
  n.simulated = true;
  n.registered_ms = 1000;
  n.token_hash = "abc";
  for (int i = 0; i < gpus; ++i) {
    Gpu g;
    g.index = i;
    g.uuid = name + "-gpu-" + std::to_string(i);
    g.name = "NVIDIA L4";
    g.memory_total_bytes = 24ull << 30;
    g.mig_mode = -1;
    n.gpus.push_back(g);
  }
  return n;
}

TEST_F(StoreTest, FleetApplyUpsertsAndSurvivesReopen) {
  Cluster c{"c1", ClusterType::kEdge, "s1", {{"team", "a"}}, 1, 1};
  Pool p{"p1", "c1", "L4", 1, 4, {}, 1, 1};
  ASSERT_TRUE(store_->ApplyFleet({c}, {p}).ok());
  c.site = "s2";
  p.size = 8;
  p.exporters = {{"legacy-01", "http://10.0.0.5:9400/metrics"}};
  p.scrape_interval_ms = 30'000;
  ASSERT_TRUE(store_->ApplyFleet({c}, {p}).ok());
  Reopen();
  auto clusters = store_->ListClusters();
  ASSERT_TRUE(clusters.ok());
  ASSERT_EQ(clusters->size(), 1u);
  EXPECT_EQ(clusters->at(0).site, "s2");
  EXPECT_EQ(clusters->at(0).labels.at("team"), "a");
  EXPECT_EQ(clusters->at(0).type, ClusterType::kEdge);
  auto pools = store_->ListPools();
  ASSERT_EQ(pools->size(), 1u);
  EXPECT_EQ(pools->at(0).size, 8);
  ASSERT_EQ(pools->at(0).exporters.size(), 1u);
  EXPECT_EQ(pools->at(0).exporters[0].node, "legacy-01");
  EXPECT_EQ(pools->at(0).exporters[0].url, "http://10.0.0.5:9400/metrics");
  EXPECT_EQ(pools->at(0).scrape_interval_ms, 30'000);
}

TEST_F(StoreTest, PoolNeedsItsCluster) {
  Pool p{"p1", "nowhere", "L4", 1, 4, {}, 1, 1};
  EXPECT_FALSE(store_->ApplyFleet({}, {p}).ok());
  EXPECT_TRUE(store_->ListPools()->empty());  // the transaction left nothing behind
}

TEST_F(StoreTest, NodesWithGpusAndEventsPersist) {
  Node n = MakeNode("n1", 2);
  NodeEvent e{0, "n1", 5, "joining", "ready", "2 x L4", "agent"};
  ASSERT_TRUE(store_->SaveNode(n, {e}).ok());
  n.gpus.pop_back();
  n.state = NodeState::kDegraded;
  ASSERT_TRUE(
      store_->SaveNode(n, {NodeEvent{0, "n1", 6, "ready", "degraded", "lost one", "agent"}}).ok());
  Reopen();
  auto nodes = store_->LoadNodes();
  ASSERT_TRUE(nodes.ok()) << nodes.error().message;
  ASSERT_EQ(nodes->size(), 1u);
  EXPECT_EQ(nodes->at(0).state, NodeState::kDegraded);
  EXPECT_EQ(nodes->at(0).facts.driver_version, "550.54.15");
  EXPECT_EQ(nodes->at(0).token_hash, "abc");
  ASSERT_EQ(nodes->at(0).gpus.size(), 1u);
  EXPECT_EQ(nodes->at(0).gpus[0].memory_total_bytes, 24ull << 30);
  EXPECT_EQ(nodes->at(0).gpus[0].mig_mode, -1);
  auto events = store_->ListNodeEvents("n1", 10);
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ(events->at(0).to, "degraded");  // newest first
  EXPECT_EQ(events->at(1).to, "ready");
}

TEST_F(StoreTest, GpuMovingBetweenNodesKeepsOneRow) {
  Node a = MakeNode("a", 1);
  Node b = MakeNode("b", 0);
  ASSERT_TRUE(store_->SaveNode(a, {}).ok());
  b.gpus = a.gpus;  // the card was moved
  ASSERT_TRUE(store_->SaveNode(b, {}).ok());
  auto nodes = store_->LoadNodes();
  size_t total = 0;
  for (const auto& n : nodes.value()) total += n.gpus.size();
  EXPECT_EQ(total, 1u);
}

TEST_F(StoreTest, TokensAreFoundByHashAndRevoked) {
  ASSERT_TRUE(store_->CreateJoinToken({"jt-1", "p1", "h1", "me", 1, 0, false}).ok());
  ApiToken t;
  t.id = "tok-1";
  t.name = "ops";
  t.role = Role::kOperator;
  t.clusters = {"c1", "c2"};
  t.hash = "h2";
  ASSERT_TRUE(store_->CreateApiToken(t).ok());
  EXPECT_EQ(store_->FindJoinToken("h1")->pool, "p1");
  EXPECT_EQ(store_->FindJoinToken("nope").error().code, ErrorCode::kNotFound);
  auto api = store_->FindApiToken("h2");
  ASSERT_TRUE(api.ok());
  EXPECT_EQ(api->role, Role::kOperator);
  EXPECT_EQ(api->clusters, (std::vector<std::string>{"c1", "c2"}));
  EXPECT_EQ(store_->ListJoinTokens()->size(), 1u);
  ASSERT_TRUE(store_->RevokeJoinToken("jt-1").ok());
  EXPECT_TRUE(store_->FindJoinToken("h1")->revoked);
  EXPECT_EQ(store_->RevokeApiToken("tok-nope").error().code, ErrorCode::kNotFound);
  // A second token with the same hash is a conflict, not a crash.
  EXPECT_EQ(store_->CreateJoinToken({"jt-2", "p1", "h1", "me", 1, 0, false}).error().code,
            ErrorCode::kConflict);
}

TEST_F(StoreTest, AuditPagesNewestFirst) {
  for (int i = 0; i < 5; ++i) {
    AuditRecord r;
    r.time_ms = i;
    r.actor = "admin";
    r.action = "POST /x/" + std::to_string(i);
    r.status = 200;
    r.result = "ok";
    ASSERT_TRUE(store_->AppendAudit(r).ok());
  }
  Reopen();
  auto first = store_->ListAudit(0, 2);
  ASSERT_EQ(first->size(), 2u);
  EXPECT_EQ(first->at(0).action, "POST /x/4");
  auto next = store_->ListAudit(first->back().id, 10);
  ASSERT_EQ(next->size(), 3u);
  EXPECT_EQ(next->at(0).action, "POST /x/2");
}

TEST_F(StoreTest, GpuEventsAreKeptOnceAndListedNewestFirst) {
  GpuEventRecord a{0, 1000, "n1", 2, "GPU-x", "xid", 79};
  GpuEventRecord b{0, 2000, "n1", 2, "GPU-x", "xid", 48};
  GpuEventRecord c{0, 3000, "n2", 0, "GPU-y", "xid", 13};
  ASSERT_TRUE(store_->AppendGpuEvents({a, b}).ok());
  ASSERT_TRUE(store_->AppendGpuEvents({b, c}).ok());  // b again: a re-sent batch
  Reopen();
  auto all = store_->ListGpuEvents("", "", 10);
  ASSERT_TRUE(all.ok()) << all.error().message;
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ(all->at(0).value, 13);
  auto n1 = store_->ListGpuEvents("n1", "xid", 10);
  ASSERT_EQ(n1->size(), 2u);
  EXPECT_EQ(n1->at(0).value, 48);
  EXPECT_EQ(n1->at(1).uuid, "GPU-x");
  EXPECT_TRUE(store_->ListGpuEvents("n3", "", 10)->empty());
}

TEST(StoreOpen, RefusesWhatItCannotOpen) {
  EXPECT_EQ(OpenStore("postgresql://x").error().code, ErrorCode::kInvalidArgument);
  EXPECT_FALSE(OpenStore("sqlite:/nonexistent-dir/sub/db").ok());
}

}  // namespace
}  // namespace gpufleet
