#include "store/store.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>
#include <sqlite3.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <thread>

#include "store/lease.h"
#include "store/migrations/migrations.h"
#include "tests/support/postgres.h"
#include "tests/support/temp_dir.h"

// Records and filters are written as aggregates here, naming only the fields a test sets.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace gpufleet {
namespace {

// Each test runs on both backends: a new SQLite file, or a new database on the test binary's
// PostgreSQL server (tests/support/postgres.h).
class StoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? std::tolower(c) : '_';
    if (GetParam() == "postgresql") {
      auto& pg = testing::SharedPostgres();
      ASSERT_TRUE(pg.ok()) << pg.error();
      url_ = pg.CreateDatabase("t_" + name.substr(0, 50));
      ASSERT_FALSE(url_.empty()) << pg.error();
    } else {
      url_ = "sqlite:" + (dir_ / "db").string();
    }
    Reopen();
  }
  void TearDown() override { store_ = {}; }
  void Reopen() {
    store_ = {};
    auto s = store::Open(url_);
    ASSERT_TRUE(s.ok()) << s.error().message;
    store_ = std::move(s.value());
  }

  testing::TempDir tmp_{"gf-store"};  // removed with everything in it after the test
  std::filesystem::path dir_ = tmp_.path();
  std::string url_;
  store::Stores store_;
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

TEST_P(StoreTest, FleetApplyUpsertsAndSurvivesReopen) {
  Cluster c{"c1", ClusterType::kEdge, "s1", {{"team", "a"}}, 1, 1};
  Pool p{"p1", "c1", "L4", 1, 4, {}, 1, 1};
  ASSERT_TRUE(store_.fleet->ApplyFleet({c}, {p}).ok());
  c.site = "s2";
  p.size = 8;
  p.exporters = {{"legacy-01", "http://10.0.0.5:9400/metrics"}};
  p.scrape_interval_ms = 30'000;
  c.lifecycle.tier = "staging";
  p.lifecycle = {"", "12.8", "v25.10.1", "1.33", "R580", {}};
  p.lifecycle.windows = {MakeWindow({"sat", "sun"}, "22:00", "02:00", "Europe/Berlin").value()};
  ASSERT_TRUE(store_.fleet->ApplyFleet({c}, {p}).ok());
  Reopen();
  auto clusters = store_.fleet->ListClusters();
  ASSERT_TRUE(clusters.ok());
  ASSERT_EQ(clusters->size(), 1u);
  EXPECT_EQ(clusters->at(0).site, "s2");
  EXPECT_EQ(clusters->at(0).labels.at("team"), "a");
  EXPECT_EQ(clusters->at(0).type, ClusterType::kEdge);
  auto pools = store_.fleet->ListPools();
  ASSERT_EQ(pools->size(), 1u);
  EXPECT_EQ(pools->at(0).size, 8);
  ASSERT_EQ(pools->at(0).exporters.size(), 1u);
  EXPECT_EQ(pools->at(0).exporters[0].node, "legacy-01");
  EXPECT_EQ(pools->at(0).exporters[0].url, "http://10.0.0.5:9400/metrics");
  EXPECT_EQ(pools->at(0).scrape_interval_ms, 30'000);
  EXPECT_EQ(clusters->at(0).lifecycle.tier, "staging");
  EXPECT_EQ(pools->at(0).lifecycle, p.lifecycle);
}

TEST_P(StoreTest, FleetDeleteRemovesPoolsThenTheirClusters) {
  Cluster a{"a", ClusterType::kTraining, "s1", {}, 1, 1},
      b{"b", ClusterType::kEdge, "s2", {}, 1, 1};
  Pool a1{"a1", "a", "L4", 1, 1, {}, 1, 1}, a2{"a2", "a", "L4", 1, 1, {}, 1, 1},
      b1{"b1", "b", "T4", 1, 1, {}, 1, 1};
  ASSERT_TRUE(store_.fleet->ApplyFleet({a, b}, {a1, a2, b1}).ok());
  // Cluster b with its only pool, and one of a's two pools, in one transaction.
  ASSERT_TRUE(store_.fleet->DeleteFleet({"a2", "b1"}, {"b"}).ok());
  Reopen();
  auto clusters = store_.fleet->ListClusters();
  ASSERT_EQ(clusters->size(), 1u);
  EXPECT_EQ(clusters->at(0).name, "a");
  auto pools = store_.fleet->ListPools();
  ASSERT_EQ(pools->size(), 1u);
  EXPECT_EQ(pools->at(0).name, "a1");
}

TEST_P(StoreTest, SettingsAreReplacedWholeAndSurviveReopen) {
  auto none = store_.settings->GetSetting("compat");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  ASSERT_TRUE(store_.settings->PutSetting("compat", "version: 1", 1).ok());
  ASSERT_TRUE(store_.settings->PutSetting("compat", "version: 1\nbranches: {}", 2).ok());
  Reopen();
  EXPECT_EQ(store_.settings->GetSetting("compat")->value_or(""), "version: 1\nbranches: {}");
  ASSERT_TRUE(store_.settings->DeleteSetting("compat").ok());
  ASSERT_TRUE(store_.settings->DeleteSetting("compat").ok());  // none: not an error
  EXPECT_FALSE(store_.settings->GetSetting("compat")->has_value());
}

// A rollout's record and its nodes' steps are written together and come back after a
// restart, which is what lets a killed controller resume it; its events list in order.
TEST_P(StoreTest, RolloutsTheirNodesAndEventsSurviveReopen) {
  store::RolloutRecord r{0, "planned", R"({"kind":"driver"})", 10, 10};
  auto id = store_.rollouts->CreateRollout(r);
  ASSERT_TRUE(id.ok()) << id.error().message;
  auto second = store_.rollouts->CreateRollout(r);
  ASSERT_TRUE(second.ok());
  EXPECT_GT(second.value(), id.value());
  r.id = id.value();
  r.state = "running";
  r.updated_ms = 20;
  ASSERT_TRUE(store_.rollouts
                  ->SaveRolloutNodes(r, {{"n-0001", R"({"state":"draining"})", 20},
                                         {"n-0000", R"({"state":"pending"})", 20}})
                  .ok());
  ASSERT_TRUE(
      store_.rollouts->SaveRolloutNodes(r, {{"n-0001", R"({"state":"installing"})", 21}}).ok());
  ASSERT_TRUE(store_.rollouts
                  ->AppendRolloutEvents({{0, r.id, 20, "n-0001", "drain", "draining"},
                                         {0, r.id, 21, "n-0001", "install", "installing"},
                                         {0, second.value(), 22, "", "started", "other"}})
                  .ok());
  Reopen();
  auto all = store_.rollouts->ListRollouts();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ(all->at(0).state, "running");
  EXPECT_EQ(all->at(0).updated_ms, 20);
  EXPECT_EQ(all->at(1).state, "planned");
  auto nodes = store_.rollouts->ListRolloutNodes(r.id);
  ASSERT_TRUE(nodes.ok());
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ(nodes->at(0).node, "n-0000");
  EXPECT_EQ(nodes->at(1).doc, R"({"state":"installing"})");
  EXPECT_EQ(nodes->at(1).updated_ms, 21);
  auto events = store_.rollouts->ListRolloutEvents(r.id, 0, 10);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ(events->at(1).kind, "install");
  auto after = store_.rollouts->ListRolloutEvents(r.id, events->at(0).id, 10);
  ASSERT_EQ(after->size(), 1u);
  store::RolloutRecord missing{999, "running", "{}", 1, 1};
  EXPECT_EQ(store_.rollouts->UpdateRollout(missing).error().code, ErrorCode::kNotFound);
}

// Drift findings are upserted by the id the drift service gives them, survive a restart, and
// only resolved ones older than the cut are pruned.
TEST_P(StoreTest, DriftFindingsAreUpsertedAndOnlyOldResolvedOnesPruned) {
  ASSERT_TRUE(store_.drift
                  ->SaveDriftFindings({{1, "n1", "open", R"({"fact":"kernel"})", 10},
                                       {2, "n1", "resolved", R"({"fact":"os"})", 10},
                                       {3, "n2", "resolved", R"({"fact":"os"})", 50}})
                  .ok());
  ASSERT_TRUE(store_.drift->SaveDriftFindings({{1, "n1", "remediating", R"({"x":1})", 20}}).ok());
  Reopen();
  auto all = store_.drift->ListDriftFindings();
  ASSERT_TRUE(all.ok()) << all.error().message;
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ(all->at(0).state, "remediating");
  EXPECT_EQ(all->at(0).doc, R"({"x":1})");
  EXPECT_EQ(all->at(0).updated_ms, 20);
  auto pruned = store_.drift->DeleteResolvedDriftBefore(30);
  ASSERT_TRUE(pruned.ok());
  EXPECT_EQ(pruned.value(), 1);  // id 2: resolved at 10; id 1 is not resolved, id 3 is newer
  all = store_.drift->ListDriftFindings();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ(all->at(1).id, 3);
}

// Assets are upserted by id and their events kept in order, the newest `limit` of them; both
// in one transaction.
TEST_P(StoreTest, AssetsAreUpsertedAndTheirEventsReadOldestFirst) {
  auto& a = *store_.assets;
  ASSERT_TRUE(
      a.SaveAssets({{"S1", "gpu", "in_service", R"({"v":1})", 10},
                    {"n1", "node", "in_service", R"({"v":2})", 10}},
                   {{0, "S1", 10, R"({"e":"discovered"})"}, {0, "n1", 10, R"({"e":"discovered"})"}})
          .ok());
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(a.SaveAssets({{"S1", "gpu", "spare", R"({"v":3})", 20 + i}},
                             {{0, "S1", 20 + i, "{\"e\":" + std::to_string(i) + "}"}})
                    .ok());
  }
  Reopen();
  auto& b = *store_.assets;
  auto all = b.ListAssets();
  ASSERT_TRUE(all.ok()) << all.error().message;
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ(all->at(0).id, "S1");
  EXPECT_EQ(all->at(0).state, "spare");
  EXPECT_EQ(all->at(0).doc, R"({"v":3})");
  EXPECT_EQ(all->at(0).updated_ms, 24);
  auto events = b.ListAssetEvents("S1", 3);
  ASSERT_TRUE(events.ok()) << events.error().message;
  ASSERT_EQ(events->size(), 3u);
  EXPECT_EQ(events->at(0).doc, R"({"e":2})");
  EXPECT_EQ(events->at(2).doc, R"({"e":4})");
  EXPECT_LT(events->at(0).id, events->at(2).id);
  EXPECT_EQ(b.ListAssetEvents("", 100)->size(), 7u);
  EXPECT_EQ(b.ListAssetEvents("n1", 100)->size(), 1u);
}

// The compliance posture keeps one document a day: a later measurement replaces the day's, a
// range is read oldest first with both ends included, and old days are pruned.
TEST_P(StoreTest, ComplianceDaysAreUpsertedByDayListedByRangeAndPruned) {
  auto& c = *store_.compliance;
  ASSERT_TRUE(c.PutComplianceDay({"2026-12-02", R"({"a":1})", 10}).ok());
  ASSERT_TRUE(c.PutComplianceDay({"2026-11-30", R"({"a":0})", 5}).ok());
  ASSERT_TRUE(c.PutComplianceDay({"2026-12-02", R"({"a":2})", 20}).ok());
  ASSERT_TRUE(c.PutComplianceDay({"2026-12-03", R"({"a":3})", 30}).ok());
  Reopen();
  auto days = store_.compliance->ListComplianceDays("2026-12-01", "2026-12-03");
  ASSERT_TRUE(days.ok()) << days.error().message;
  ASSERT_EQ(days->size(), 2u);
  EXPECT_EQ(days->at(0).day, "2026-12-02");
  EXPECT_EQ(days->at(0).doc, R"({"a":2})");
  EXPECT_EQ(days->at(0).updated_ms, 20);
  EXPECT_EQ(days->at(1).day, "2026-12-03");
  auto pruned = store_.compliance->DeleteComplianceDaysBefore("2026-12-02");
  ASSERT_TRUE(pruned.ok());
  EXPECT_EQ(pruned.value(), 1);
  EXPECT_EQ(store_.compliance->ListComplianceDays("2000-01-01", "2999-12-31")->size(), 2u);
}

// Teams are one document each, upserted and deleted by name; clusters and pools keep the team
// that owns them.
TEST_P(StoreTest, TeamsAreUpsertedByNameAndClustersAndPoolsKeepTheirOwner) {
  auto& t = *store_.teams;
  ASSERT_TRUE(t.PutTeam({"vision", R"({"name":"vision"})", 1}).ok());
  ASSERT_TRUE(t.PutTeam({"nlp", R"({"name":"nlp"})", 2}).ok());
  ASSERT_TRUE(t.PutTeam({"vision", R"({"name":"vision","budget_monthly":5})", 3}).ok());
  Cluster c{"train", ClusterType::kTraining, "lab", {}, 1, 1};
  c.team = "nlp";
  Pool p{"h100", "train", "H100-SXM5-80GB", 8, 2, {}, 1, 1};
  p.team = "vision";
  ASSERT_TRUE(store_.fleet->ApplyFleet({c}, {p}).ok());
  Reopen();
  auto teams = store_.teams->ListTeams();
  ASSERT_TRUE(teams.ok()) << teams.error().message;
  ASSERT_EQ(teams->size(), 2u);
  EXPECT_EQ(teams->at(0).name, "nlp");
  EXPECT_EQ(teams->at(1).doc, R"({"name":"vision","budget_monthly":5})");
  EXPECT_EQ(teams->at(1).updated_ms, 3);
  EXPECT_EQ(store_.fleet->ListClusters()->at(0).team, "nlp");
  EXPECT_EQ(store_.fleet->ListPools()->at(0).team, "vision");
  ASSERT_TRUE(store_.teams->DeleteTeam("nlp").ok());
  ASSERT_TRUE(store_.teams->DeleteTeam("none").ok());
  EXPECT_EQ(store_.teams->ListTeams()->size(), 1u);
}

// The usage ledger: appended in one transaction, read newest end first by the allocations that
// overlap a time range and by team, project, pool and cluster, a page at a time with the total,
// and pruned by end.
TEST_P(StoreTest, UsageRecordsAreFilteredByTimePagedAndPruned) {
  auto& u = *store_.usage;
  std::vector<store::UsageRecord> records;
  for (int i = 0; i < 5; ++i) {
    records.push_back({0, 100 + i, i % 2 ? "nlp" : "vision", "p" + std::to_string(i % 2), "h100",
                       "train", i * 1000, i * 1000 + 500, "{\"i\":" + std::to_string(i) + "}"});
  }
  ASSERT_TRUE(u.AppendUsage(records).ok());
  Reopen();
  int64_t total = 0;
  store::UsageQuery q;
  auto all = store_.usage->ListUsage(q, &total);
  ASSERT_TRUE(all.ok()) << all.error().message;
  EXPECT_EQ(total, 5);
  ASSERT_EQ(all->size(), 5u);
  EXPECT_EQ(all->at(0).job, 104);  // the newest end first
  EXPECT_EQ(all->at(0).doc, R"({"i":4})");
  EXPECT_GT(all->at(0).id, 0);
  q.team = "vision";
  q.from_ms = 600;  // ended at or after: 2000-2500 and 4000-4500 (0-500 ended before)
  q.to_ms = 4000;   // started before: not 4000-4500
  auto some = store_.usage->ListUsage(q, &total);
  ASSERT_TRUE(some.ok());
  ASSERT_EQ(some->size(), 1u);
  EXPECT_EQ(some->at(0).job, 102);
  EXPECT_EQ(total, 1);
  store::UsageQuery page;
  page.limit = 2;
  page.offset = 2;
  auto second = store_.usage->ListUsage(page, &total);
  ASSERT_EQ(second->size(), 2u);
  EXPECT_EQ(second->at(0).job, 102);
  EXPECT_EQ(total, 5);
  EXPECT_EQ(store_.usage->DeleteUsageBefore(2500).value(), 2);  // ended at 500 and 1500
  EXPECT_EQ(store_.usage->ListUsage({}, &total)->size(), 3u);
}

// The reports' reads: a scan of every record a query matches with its figures (the document
// only for a record from before them), and the pools' hours, added to and read by hour.
TEST_P(StoreTest, UsageScansCarryTheFiguresAndPoolHoursAddUp) {
  auto& u = *store_.usage;
  std::vector<store::UsageRecord> records;
  for (int i = 0; i < 10'000; ++i) {  // more than a batch
    store::UsageRecord r{
        0, i, i % 2 ? "nlp" : "vision", "p", "h100", "train", i * 10, i * 10 + 5, "{\"doc\":1}"};
    r.figures = {"H100-SXM5-80GB",     8,          1000 + i, 90'500, 88'000, 70'000, 3'600 + i,
                 "n1:0,1,2,3,4,5,6,7", "completed"};
    records.push_back(std::move(r));
  }
  records.push_back({0, 99'999, "vision", "old", "h100", "train", 0, 1, R"({"gpus":2})"});
  ASSERT_TRUE(u.AppendUsage(records).ok());
  Reopen();
  int64_t count = 0, energy = 0;
  store::UsageRecord old, last;
  auto scanned = store_.usage->ScanUsage({}, [&](const store::UsageRecord& r) {
    ++count;
    if (r.job == 99'999) {
      old = r;
      return;
    }
    energy += r.figures.energy_j;
    EXPECT_TRUE(r.doc.empty());
    if (r.job == 9'999) last = r;
  });
  ASSERT_TRUE(scanned.ok()) << scanned.error().message;
  EXPECT_EQ(count, 10'001);
  EXPECT_EQ(energy, 3'600LL * 10'000 + 9'999LL * 10'000 / 2);
  EXPECT_EQ(last.team, "nlp");
  EXPECT_EQ(last.end_ms, 99'995);
  EXPECT_EQ(last.figures.gpu_model, "H100-SXM5-80GB");
  EXPECT_EQ(last.figures.wait_ms, 10'999);
  EXPECT_EQ(last.figures.util_milli, 90'500);
  EXPECT_EQ(last.figures.mem_peak_mib, 70'000);
  EXPECT_EQ(last.figures.placement, "n1:0,1,2,3,4,5,6,7");
  EXPECT_EQ(old.figures.gpus, 0);
  EXPECT_EQ(old.doc, R"({"gpus":2})") << "a record from before the figures: its document";
  store::UsageQuery q;
  q.team = "vision";
  q.from_ms = 50'000;
  count = 0;
  ASSERT_TRUE(store_.usage->ScanUsage(q, [&](const store::UsageRecord&) { ++count; }).ok());
  EXPECT_EQ(count, 2'500);  // the even jobs from 5,000

  const int64_t h = 3'600'000;
  store::PoolHour a{"h100", "train", "H100-SXM5-80GB", 10 * h, 40, 100, 50, 10, 1000, 300, 20};
  ASSERT_TRUE(store_.usage->AddPoolHours({a, a, {"l4", "edge", "L4", 11 * h, 1, 7}}).ok());
  ASSERT_TRUE(store_.usage->AddPoolHours({a}).ok());
  auto hours = store_.usage->ListPoolHours(10 * h, 12 * h);
  ASSERT_TRUE(hours.ok()) << hours.error().message;
  ASSERT_EQ(hours->size(), 2u);
  EXPECT_EQ(hours->at(0).pool, "h100");
  EXPECT_EQ(hours->at(0).covered_ms, 120);
  EXPECT_EQ(hours->at(0).gpu_ms, 300);
  EXPECT_EQ(hours->at(0).alloc_gpu_ms, 150);
  EXPECT_EQ(hours->at(0).queued_gpu_ms, 30);
  EXPECT_EQ(hours->at(0).energy_j, 3000);
  EXPECT_EQ(hours->at(0).free_energy_j, 900);
  EXPECT_EQ(hours->at(0).idle_energy_j, 60);
  EXPECT_EQ(hours->at(1).gpu_model, "L4");
  EXPECT_EQ(store_.usage->ListPoolHours(11 * h, 12 * h)->size(), 1u);
  EXPECT_EQ(store_.usage->DeletePoolHoursBefore(11 * h).value(), 1);
  EXPECT_EQ(store_.usage->ListPoolHours(0, 12 * h)->size(), 1u);
}

TEST_P(StoreTest, PoolNeedsItsCluster) {
  Pool p{"p1", "nowhere", "L4", 1, 4, {}, 1, 1};
  EXPECT_FALSE(store_.fleet->ApplyFleet({}, {p}).ok());
  EXPECT_TRUE(store_.fleet->ListPools()->empty());  // the transaction left nothing behind
}

TEST_P(StoreTest, NodesWithGpusAndEventsPersist) {
  Node n = MakeNode("n1", 2);
  NodeEvent e{0, "n1", 5, "joining", "ready", "2 x L4", "agent"};
  ASSERT_TRUE(store_.fleet->SaveNode(n, {e}).ok());
  n.gpus.pop_back();
  n.state = NodeState::kDegraded;
  n.gpus[0].inforom_oem = "2.1";
  n.gpus[0].gsp_firmware_version = "550.54.15";
  n.facts.nics = {{"mlx5_0", "28.41.1000", "MT_0000000834", "MT4129"}};
  ASSERT_TRUE(
      store_.fleet->SaveNode(n, {NodeEvent{0, "n1", 6, "ready", "degraded", "lost one", "agent"}})
          .ok());
  Reopen();
  auto nodes = store_.fleet->LoadNodes();
  ASSERT_TRUE(nodes.ok()) << nodes.error().message;
  ASSERT_EQ(nodes->size(), 1u);
  EXPECT_EQ(nodes->at(0).state, NodeState::kDegraded);
  EXPECT_EQ(nodes->at(0).facts.driver_version, "550.54.15");
  EXPECT_EQ(nodes->at(0).token_hash, "abc");
  ASSERT_EQ(nodes->at(0).gpus.size(), 1u);
  EXPECT_EQ(nodes->at(0).gpus[0].memory_total_bytes, 24ull << 30);
  EXPECT_EQ(nodes->at(0).gpus[0].mig_mode, -1);
  EXPECT_EQ(nodes->at(0).gpus[0].inforom_oem, "2.1");
  EXPECT_EQ(nodes->at(0).gpus[0].inforom_ecc, "");
  EXPECT_EQ(nodes->at(0).gpus[0].gsp_firmware_version, "550.54.15");
  EXPECT_EQ(nodes->at(0).facts.nics, n.facts.nics);
  auto events = store_.fleet->ListNodeEvents("n1", 10);
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ(events->at(0).to, "degraded");  // newest first
  EXPECT_EQ(events->at(1).to, "ready");
}

TEST_P(StoreTest, GpuMovingBetweenNodesKeepsOneRow) {
  Node a = MakeNode("a", 1);
  Node b = MakeNode("b", 0);
  ASSERT_TRUE(store_.fleet->SaveNode(a, {}).ok());
  b.gpus = a.gpus;  // the card was moved
  ASSERT_TRUE(store_.fleet->SaveNode(b, {}).ok());
  auto nodes = store_.fleet->LoadNodes();
  size_t total = 0;
  for (const auto& n : nodes.value()) total += n.gpus.size();
  EXPECT_EQ(total, 1u);
}

TEST_P(StoreTest, ManyGpusAreWrittenInChunksAndReplacedWhole) {
  Node n = MakeNode("big", 130);  // three statements of at most 64 GPUs
  ASSERT_TRUE(store_.fleet->SaveNode(n, {}).ok());
  Reopen();
  auto nodes = store_.fleet->LoadNodes();
  ASSERT_EQ(nodes->at(0).gpus.size(), 130u);
  EXPECT_EQ(nodes->at(0).gpus[129].uuid, "big-gpu-129");
  EXPECT_EQ(nodes->at(0).gpus[129].index, 129);
  n.gpus.resize(1);
  ASSERT_TRUE(store_.fleet->SaveNode(n, {}).ok());
  EXPECT_EQ(store_.fleet->LoadNodes()->at(0).gpus.size(), 1u);
  n.gpus.clear();
  ASSERT_TRUE(store_.fleet->SaveNode(n, {}).ok());
  EXPECT_TRUE(store_.fleet->LoadNodes()->at(0).gpus.empty());
}

// Past one statement's parameter limits (SQLite's chunks of 64; PostgreSQL's one-statement
// save falls back to the transaction): a node of 1,100 GPUs with 150 events kept from an outage.
TEST_P(StoreTest, ASaveOfAnySizeFitsTheStatementLimits) {
  Node n = MakeNode("huge", 1100);
  std::vector<NodeEvent> events;
  for (int i = 0; i < 150; ++i) {
    events.push_back(
        NodeEvent{0, "huge", i, "ready", "degraded", "flap " + std::to_string(i), "controller"});
  }
  ASSERT_TRUE(store_.fleet->SaveNode(n, events).ok());
  EXPECT_EQ(store_.fleet->LoadNodes()->at(0).gpus.size(), 1100u);
  auto listed = store_.fleet->ListNodeEvents("huge", 500);
  ASSERT_EQ(listed->size(), 150u);
  EXPECT_EQ(listed->at(0).reason, "flap 149");  // newest first
}

TEST_P(StoreTest, TokensAreFoundByHashAndRevoked) {
  ASSERT_TRUE(store_.tokens->CreateJoinToken({"jt-1", "p1", "h1", "me", 1, 0, false}).ok());
  ApiToken t;
  t.id = "tok-1";
  t.name = "ops";
  t.role = Role::kOperator;
  t.clusters = {"c1", "c2"};
  t.hash = "h2";
  ASSERT_TRUE(store_.tokens->CreateApiToken(t).ok());
  EXPECT_EQ(store_.tokens->FindJoinToken("h1")->pool, "p1");
  EXPECT_EQ(store_.tokens->FindJoinToken("nope").error().code, ErrorCode::kNotFound);
  auto api = store_.tokens->FindApiToken("h2");
  ASSERT_TRUE(api.ok());
  EXPECT_EQ(api->role, Role::kOperator);
  EXPECT_EQ(api->clusters, (std::vector<std::string>{"c1", "c2"}));
  EXPECT_EQ(store_.tokens->ListJoinTokens()->size(), 1u);
  ASSERT_TRUE(store_.tokens->RevokeJoinToken("jt-1").ok());
  EXPECT_TRUE(store_.tokens->FindJoinToken("h1")->revoked);
  EXPECT_EQ(store_.tokens->RevokeApiToken("tok-nope").error().code, ErrorCode::kNotFound);
  // A second token with the same hash is a conflict, not a crash.
  EXPECT_EQ(store_.tokens->CreateJoinToken({"jt-2", "p1", "h1", "me", 1, 0, false}).error().code,
            ErrorCode::kConflict);
}

TEST_P(StoreTest, AuditPagesNewestFirst) {
  for (int i = 0; i < 5; ++i) {
    AuditRecord r;
    r.time_ms = i;
    r.actor = "admin";
    r.action = "POST /x/" + std::to_string(i);
    r.status = 200;
    r.result = "ok";
    ASSERT_TRUE(store_.audit->AppendAudit(r).ok());
  }
  Reopen();
  auto first = store_.audit->ListAudit(0, 2);
  ASSERT_EQ(first->size(), 2u);
  EXPECT_EQ(first->at(0).action, "POST /x/4");
  auto next = store_.audit->ListAudit(first->back().id, 10);
  ASSERT_EQ(next->size(), 3u);
  EXPECT_EQ(next->at(0).action, "POST /x/2");
}

TEST_P(StoreTest, GpuEventsAreKeptOnceAndListedNewestFirst) {
  GpuEventRecord a{0, 1000, "n1", 2, "GPU-x", "xid", 79};
  GpuEventRecord b{0, 2000, "n1", 2, "GPU-x", "xid", 48};
  GpuEventRecord c{0, 3000, "n2", 0, "GPU-y", "xid", 13};
  ASSERT_TRUE(store_.fleet->AppendGpuEvents({a, b}).ok());
  ASSERT_TRUE(store_.fleet->AppendGpuEvents({b, c}).ok());  // b again: a re-sent batch
  Reopen();
  auto all = store_.fleet->ListGpuEvents("", "", 10);
  ASSERT_TRUE(all.ok()) << all.error().message;
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ(all->at(0).value, 13);
  auto n1 = store_.fleet->ListGpuEvents("n1", "xid", 10);
  ASSERT_EQ(n1->size(), 2u);
  EXPECT_EQ(n1->at(0).value, 48);
  EXPECT_EQ(n1->at(1).uuid, "GPU-x");
  EXPECT_TRUE(store_.fleet->ListGpuEvents("n3", "", 10)->empty());
}

TEST_P(StoreTest, AlertingChannelsOutboxAndAlertStates) {
  ASSERT_TRUE(
      store_.alerting
          ->CreateChannel({"hook", "webhook", "http://127.0.0.1:9/x", "key", 1, "[]", "alertname"})
          .ok());
  EXPECT_EQ(
      store_.alerting->CreateChannel({"hook", "webhook", "http://x", "", 1, "", ""}).error().code,
      ErrorCode::kConflict);
  ASSERT_TRUE(store_.alerting
                  ->RecordAlertChanges({{"fp1", R"({"state":"firing"})"}},
                                       {Notification{0, "hook", "fp1", "body-1", 5, 0, 5, ""}})
                  .ok());
  Reopen();
  auto channels = store_.alerting->ListChannels();
  ASSERT_EQ(channels->size(), 1u);
  EXPECT_EQ(channels->at(0).secret, "key");
  EXPECT_EQ(channels->at(0).group_by, "alertname");
  // An update changes everything but the name and creation time; an unknown name is kNotFound.
  ASSERT_TRUE(store_.alerting
                  ->UpdateChannel({"hook", "webhook", "https://y", "", 7, R"([{"name":"a"}])", ""})
                  .ok());
  EXPECT_EQ(
      store_.alerting->UpdateChannel({"nope", "webhook", "http://x", "", 1, "", ""}).error().code,
      ErrorCode::kNotFound);
  channels = store_.alerting->ListChannels();
  EXPECT_EQ(channels->at(0).url, "https://y");
  EXPECT_EQ(channels->at(0).secret, "");
  EXPECT_EQ(channels->at(0).matchers, R"([{"name":"a"}])");
  EXPECT_EQ(channels->at(0).created_ms, 1);
  EXPECT_EQ(store_.alerting->LoadAlertDocs().value(),
            (std::vector<std::string>{R"({"state":"firing"})"}));
  auto due = store_.alerting->DueNotifications(10, 10);
  ASSERT_EQ(due->size(), 1u);
  EXPECT_EQ(due->at(0).body, "body-1");
  ASSERT_TRUE(store_.alerting->DeferNotification(due->at(0).id, 100, "refused").ok());
  EXPECT_TRUE(store_.alerting->DueNotifications(10, 10)->empty());
  auto later = store_.alerting->DueNotifications(100, 10);
  ASSERT_EQ(later->size(), 1u);
  EXPECT_EQ(later->at(0).attempts, 1);
  auto counts = store_.alerting->OutboxCounts();
  ASSERT_EQ(counts->size(), 1u);
  EXPECT_EQ(counts->at(0).pending, 1);
  EXPECT_EQ(counts->at(0).oldest_ms, 5);
  EXPECT_EQ(counts->at(0).last_error, "refused");
  ASSERT_TRUE(store_.alerting->AckNotification(later->at(0).id).ok());
  EXPECT_TRUE(store_.alerting->DueNotifications(1000, 10)->empty());
  ASSERT_TRUE(store_.alerting->DeleteAlertDoc("fp1").ok());
  EXPECT_TRUE(store_.alerting->LoadAlertDocs()->empty());
  // Deleting a channel drops what was queued for it.
  ASSERT_TRUE(store_.alerting
                  ->RecordAlertChanges({}, {Notification{0, "hook", "fp2", "body-2", 6, 0, 6, ""}})
                  .ok());
  ASSERT_TRUE(store_.alerting->DeleteChannel("hook").ok());
  EXPECT_TRUE(store_.alerting->DueNotifications(1000, 10)->empty());
  EXPECT_EQ(store_.alerting->DeleteChannel("hook").error().code, ErrorCode::kNotFound);
}

TEST_P(StoreTest, ErrorsAndLogsNameNoBoundValue) {
  auto sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(16);
  spdlog::default_logger()->sinks().push_back(sink);
  auto level = spdlog::get_level();
  spdlog::set_level(spdlog::level::debug);
  Channel c{"hook", "webhook", "http://x", "hunter2-webhook-key", 1, "", ""};
  ASSERT_TRUE(store_.alerting->CreateChannel(c).ok());
  auto again = store_.alerting->CreateChannel(c);
  spdlog::set_level(level);
  auto& sinks = spdlog::default_logger()->sinks();
  sinks.erase(std::find(sinks.begin(), sinks.end(), sink));
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code, ErrorCode::kConflict);
  EXPECT_EQ(again.error().message.find("hunter2"), std::string::npos) << again.error().message;
  EXPECT_EQ(again.error().message.find("INSERT"), std::string::npos) << again.error().message;
  bool logged = false;
  for (const auto& line : sink->last_formatted()) {
    EXPECT_EQ(line.find("hunter2"), std::string::npos) << line;
    logged = logged || line.find("INSERT INTO channels") != std::string::npos;
  }
  EXPECT_TRUE(logged);  // the statement is logged, for the operator
}

TEST_P(StoreTest, RulesAndSilences) {
  ASSERT_TRUE(store_.alerting->SaveRules({{"r2", "g", "{}", 1}, {"r1", "g", "{}", 1}}, {}).ok());
  ASSERT_TRUE(store_.alerting->SaveRules({{"r1", "g2", R"({"x":1})", 2}}, {"r2"}).ok());
  Reopen();
  auto rules = store_.alerting->ListRules();
  ASSERT_EQ(rules->size(), 1u);
  EXPECT_EQ(rules->at(0).group, "g2");
  EXPECT_EQ(rules->at(0).doc, R"({"x":1})");
  ASSERT_TRUE(store_.alerting->CreateSilence({"s1", "[]", 0, 1000, "me", "one", 1}).ok());
  ASSERT_TRUE(store_.alerting->CreateSilence({"s2", "[]", 0, 1000, "me", "two", 2}).ok());
  ASSERT_TRUE(store_.alerting->ExpireSilence("s1", 50).ok());
  auto silences = store_.alerting->ListSilences();
  ASSERT_EQ(silences->size(), 2u);
  EXPECT_EQ(silences->at(0).id, "s2");  // newest first
  EXPECT_EQ(silences->at(1).ends_ms, 50);
  EXPECT_EQ(store_.alerting->ExpireSilence("nope", 50).error().code, ErrorCode::kNotFound);
}

TEST_P(StoreTest, JobsUpsertAndPruneKeepingTheHighestId) {
  ASSERT_TRUE(
      store_.jobs
          ->SaveJobs(
              {{1, "queued", "{}", 10}, {2, "completed", "{}", 10}, {3, "cancelled", "{}", 10}})
          .ok());
  ASSERT_TRUE(store_.jobs->SaveJobs({{1, "running", R"({"v":2})", 20}}).ok());
  Reopen();
  auto jobs = store_.jobs->ListJobs();
  ASSERT_EQ(jobs->size(), 3u);
  EXPECT_EQ(jobs->at(0).state, "running");
  EXPECT_EQ(jobs->at(0).doc, R"({"v":2})");
  ASSERT_TRUE(store_.jobs->DeleteEndedJobsBefore(15).ok());
  std::vector<int64_t> ids;
  for (const auto& j : store_.jobs->ListJobs().value()) ids.push_back(j.id);
  EXPECT_EQ(ids, (std::vector<int64_t>{1, 3}));
}

TEST_P(StoreTest, ScalingPoliciesEventsAndSamples) {
  ASSERT_TRUE(store_.scaling->SaveScalingPolicy({"p1", "{}", 1}).ok());
  ASSERT_TRUE(store_.scaling->SaveScalingPolicy({"p1", R"({"min":2})", 2}).ok());
  ASSERT_TRUE(store_.scaling->SaveScalingPolicy({"p0", "{}", 1}).ok());
  auto policies = store_.scaling->ListScalingPolicies();
  ASSERT_EQ(policies->size(), 2u);
  EXPECT_EQ(policies->at(1).doc, R"({"min":2})");
  ASSERT_TRUE(store_.scaling->DeleteScalingPolicy("p0").ok());
  EXPECT_EQ(store_.scaling->DeleteScalingPolicy("p0").error().code, ErrorCode::kNotFound);
  auto a = store_.scaling->AppendScaleEvent({0, 10, "p1", "a"});
  auto b = store_.scaling->AppendScaleEvent({0, 20, "p2", "b"});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_LT(a.value(), b.value());
  Reopen();
  auto p1 = store_.scaling->ListScaleEvents("p1", 10);
  ASSERT_EQ(p1->size(), 1u);
  EXPECT_EQ(p1->at(0).id, a.value());
  EXPECT_EQ(store_.scaling->ListScaleEvents("", 10)->at(0).doc, "b");  // newest first
  for (int64_t t : {100, 200, 300}) {
    ASSERT_TRUE(store_.scaling->AppendScalingSample({"p1", t, "s"}).ok());
  }
  ASSERT_TRUE(store_.scaling->AppendScalingSample({"p1", 200, "s2"}).ok());  // upsert
  auto samples = store_.scaling->ListScalingSamples("p1", 150);
  ASSERT_EQ(samples->size(), 2u);
  EXPECT_EQ(samples->at(0).doc, "s2");
  ASSERT_TRUE(store_.scaling->DeleteScalingSamplesBefore(250).ok());
  EXPECT_EQ(store_.scaling->ListScalingSamples("p1", 0)->size(), 1u);
}

TEST_P(StoreTest, ListsSortByBytesOnEveryBackend) {
  std::vector<Cluster> clusters;
  for (const char* name : {"b", "a-c", "B", "ab"}) {
    clusters.push_back({name, ClusterType::kEdge, "s", {}, 1, 1});
  }
  ASSERT_TRUE(store_.fleet->ApplyFleet(clusters, {}).ok());
  std::vector<std::string> names;
  for (const auto& c : store_.fleet->ListClusters().value()) names.push_back(c.name);
  EXPECT_EQ(names, (std::vector<std::string>{"B", "a-c", "ab", "b"}));
}

TEST_P(StoreTest, DatabaseSaysWhatItIs) {
  EXPECT_EQ(store_.database->backend(), GetParam());
  EXPECT_TRUE(store_.database->Ping().ok());
  EXPECT_EQ(store_.database->SchemaVersion().value(), store::KnownSchemaVersion());
  EXPECT_EQ(store_.database->location().find("postgresql://gpufleet@/"),
            GetParam() == "postgresql" ? 0u : std::string::npos);
}

// The leader's lease: taken when free or expired, renewed by its holder at the same epoch, a
// new epoch for each new holder; released, it is free at once.
TEST_P(StoreTest, TheLeaseHasOneHolderAndANewEpochForEachNewOne) {
  auto co = store::CoordinationOf(store_.database);
  ASSERT_TRUE(co);
  auto a = co->TakeLease("engines", "ctl-a", 15'000);
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_TRUE(a->held);
  EXPECT_EQ(a->epoch, 1);
  EXPECT_NEAR(static_cast<double>(a->expires_ms - a->now_ms), 15'000, 1'000);
  auto b = co->TakeLease("engines", "ctl-b", 15'000);
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_FALSE(b->held);
  EXPECT_EQ(b->holder, "ctl-a");
  EXPECT_EQ(b->epoch, 1);
  auto renewed = co->TakeLease("engines", "ctl-a", 15'000);
  EXPECT_TRUE(renewed->held);
  EXPECT_EQ(renewed->epoch, 1);
  ASSERT_TRUE(co->ReleaseLease("engines", "ctl-b").ok());  // not b's: nothing happens
  EXPECT_FALSE(co->TakeLease("engines", "ctl-b", 15'000)->held);
  ASSERT_TRUE(co->ReleaseLease("engines", "ctl-a").ok());
  b = co->TakeLease("engines", "ctl-b", 200);
  EXPECT_TRUE(b->held);
  EXPECT_EQ(b->epoch, 2);
  // Expired (on the database's clock), it goes to whoever asks next.
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  a = co->TakeLease("engines", "ctl-a", 15'000);
  EXPECT_TRUE(a->held);
  EXPECT_EQ(a->epoch, 3);
  EXPECT_EQ(co->ReadLease("engines")->holder, "ctl-a");
  EXPECT_EQ(co->ReadLease("other")->epoch, 0);  // a lease nobody took
}

// A leader's calls are fenced: after another controller took the lease, the old leader's
// write fails, writes nothing and tells it so; a method with its own transaction is fenced as
// well. SQLite serves one controller and has nothing to fence.
TEST_P(StoreTest, AFencedWriteOfALeaderThatLostTheLeaseFails) {
  auto co = store::CoordinationOf(store_.database);
  auto a = co->TakeLease("engines", "ctl-a", 300);
  ASSERT_TRUE(a.ok() && a->held);
  int lost = 0;
  store::Fence fence{"engines", "ctl-a", a->epoch, [&] { ++lost; }};
  {
    store::FenceScope scope(&fence);
    ASSERT_TRUE(store_.settings->PutSetting("x", "{\"v\":1}", 1).ok());
    Cluster c;
    c.name = "c1";
    ASSERT_TRUE(store_.fleet->ApplyFleet({c}, {}).ok());  // its own transaction inside
  }
  EXPECT_EQ(store_.fleet->ListClusters()->size(), 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ASSERT_TRUE(co->TakeLease("engines", "ctl-b", 15'000)->held);
  {
    store::FenceScope scope(&fence);
    auto put = store_.settings->PutSetting("x", "{\"v\":2}", 2);
    if (GetParam() == "postgresql") {
      ASSERT_FALSE(put.ok());
      EXPECT_EQ(put.error().code, ErrorCode::kConflict);
      EXPECT_NE(put.error().message.find("no longer leads"), std::string::npos);
      EXPECT_EQ(lost, 1);
    } else {
      EXPECT_TRUE(put.ok());
    }
  }
  // Outside the scope the same store writes as before.
  EXPECT_EQ(store_.settings->GetSetting("x")->value_or(""),
            GetParam() == "postgresql" ? "{\"v\":1}" : "{\"v\":2}");
  ASSERT_TRUE(store_.settings->PutSetting("x", "{\"v\":3}", 3).ok());
  EXPECT_EQ(store_.settings->GetSetting("x")->value_or(""), "{\"v\":3}");
}

TEST_P(StoreTest, ControllersAreSeenOnTheDatabasesClockAndForgotten) {
  auto co = store::CoordinationOf(store_.database);
  ASSERT_TRUE(co->SeeController({"ctl-b", "https://b:8080", 5, 0, 7}).ok());
  ASSERT_TRUE(co->SeeController({"ctl-a", "https://a:8080", 4, 0, 0}).ok());
  ASSERT_TRUE(co->SeeController({"ctl-b", "https://b2:8080", 6, 0, 9}).ok());
  auto list = co->ListControllers();
  ASSERT_TRUE(list.ok()) << list.error().message;
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ(list->at(0).id, "ctl-a");
  EXPECT_EQ(list->at(1).url, "https://b2:8080");
  EXPECT_EQ(list->at(1).started_ms, 6);
  EXPECT_EQ(list->at(1).agents, 9);
  int64_t now = co->ReadLease("engines")->now_ms;
  EXPECT_NEAR(static_cast<double>(list->at(0).last_seen_ms), static_cast<double>(now), 5'000);
  ASSERT_TRUE(co->ForgetController("ctl-a", 0).ok());
  EXPECT_EQ(co->ListControllers()->size(), 1u);
  ASSERT_TRUE(co->ForgetController("", now + 10'000).ok());  // every one not seen since
  EXPECT_TRUE(co->ListControllers()->empty());
}

// The change feed tells a controller what another one committed to a table it keeps in memory,
// and not its own writes; at first every watched table. One controller is all SQLite has: no
// feed.
TEST_P(StoreTest, TheChangeFeedTellsOfAnotherControllersWritesOnly) {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::vector<std::string>> batches;
  auto feed = store::WatchChanges(store_.database, [&](const std::vector<std::string>& tables) {
    std::lock_guard lock(mu);
    batches.push_back(tables);
    cv.notify_all();
  });
  if (GetParam() == "sqlite") {
    EXPECT_EQ(feed, nullptr);
    return;
  }
  ASSERT_NE(feed, nullptr);
  auto await = [&](size_t n) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(10), [&] { return batches.size() >= n; });
  };
  ASSERT_TRUE(await(1));  // connected: everything may have changed
  EXPECT_EQ(batches[0], store::WatchedTables());
  ASSERT_TRUE(store_.teams->PutTeam({"mine", "{}", 1}).ok());  // this store's own write
  auto other = store::Open(url_);
  ASSERT_TRUE(other.ok()) << other.error().message;
  ASSERT_TRUE(other->teams->PutTeam({"theirs", "{}", 2}).ok());
  ASSERT_TRUE(await(2));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // anything else would be here
  std::lock_guard lock(mu);
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[1], std::vector<std::string>{"teams"});
}

// A command relayed to the controller that has the agent: one controller takes it, the answer
// goes back to the issuer (or, asked for every answer, to a new leader), and it is forgotten.
TEST_P(StoreTest, ARelayedCommandIsTakenOnceAndItsAnswerReadByItsIssuer) {
  auto db = store::CoordinationOf(store_.database);
  ASSERT_NE(db, nullptr);
  store::RelayedCommand c{41, "n1", "ctl-a", R"({"type":"command"})", "", "", 1000};
  ASSERT_TRUE(db->PostCommand(c).ok());
  EXPECT_FALSE(db->PostCommand(c).ok());  // an id is posted once
  auto seen = db->RelayedCommands("ctl-b", false);
  ASSERT_TRUE(seen.ok()) << seen.error().message;
  ASSERT_EQ(seen->size(), 1u);  // not taken: every controller sees it
  EXPECT_EQ(seen->at(0).node, "n1");
  EXPECT_EQ(seen->at(0).issuer, "ctl-a");
  EXPECT_EQ(seen->at(0).command, c.command);
  EXPECT_EQ(seen->at(0).created_ms, 1000);
  EXPECT_TRUE(db->TakeCommand(41, "ctl-b").value());
  EXPECT_FALSE(db->TakeCommand(41, "ctl-c").value());  // taken once
  EXPECT_FALSE(db->TakeCommand(99, "ctl-c").value());
  EXPECT_TRUE(db->RelayedCommands("ctl-c", false)->empty());
  EXPECT_TRUE(db->RelayedCommands("ctl-c", true)->empty());  // not answered yet
  ASSERT_TRUE(db->AnswerCommand(41, R"({"type":"command_result"})").ok());
  auto mine = db->RelayedCommands("ctl-a", false);
  ASSERT_EQ(mine->size(), 1u);
  EXPECT_EQ(mine->at(0).taken_by, "ctl-b");
  EXPECT_EQ(mine->at(0).result, R"({"type":"command_result"})");
  EXPECT_EQ(db->RelayedCommands("ctl-c", true)->size(), 1u);  // a leader reads every answer
  EXPECT_FALSE(db->ForgetCommand(41, true).value());          // taken: not withdrawn
  EXPECT_TRUE(db->ForgetCommand(41, false).value());
  EXPECT_TRUE(db->RelayedCommands("ctl-a", true)->empty());
}

// Runs SQL outside the store, as an older gpufleet or an operator would have.
bool RawSql(const std::string& url, const std::string& sql) {
  if (url.rfind("sqlite:", 0) == 0) {
    sqlite3* db = nullptr;
    bool ok = sqlite3_open(url.substr(7).c_str(), &db) == SQLITE_OK &&
              sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK;
    sqlite3_close(db);
    return ok;
  }
  std::string name = url.substr(url.find("@/") + 2);
  return testing::SharedPostgres().Sql(name.substr(0, name.find('?')), sql);
}

// The ledger's daily sums: a record split at midnight, added to its day's row with the others
// of its key, filled by migration 20 from the records already there, gone with the days that
// retention ends; and the scans the reports make around them.
TEST_P(StoreTest, UsageDaysSplitRecordsAtMidnightAndTheMigrationFillsThem) {
  const int64_t day = store::kUsageDayMs, h = 3'600'000;
  auto record = [](int64_t job, const char* team, const char* pool, const char* cluster,
                   int64_t start, int64_t end, store::UsageFigures f) {
    store::UsageRecord r{0, job, team, "p", pool, cluster, start, end, "{}"};
    r.figures = std::move(f);
    return r;
  };
  ASSERT_TRUE(
      store_.usage
          ->AppendUsage(
              {record(1, "nlp", "h100", "train", day - 6 * h, day + 12 * h,
                      {"H100-SXM5-80GB", 2, 0, 50'000, 60'000, 1, 1'800, "n1:0,1", "completed"}),
               record(2, "nlp", "h100", "train", day + h, day + 2 * h,
                      {"H100-SXM5-80GB", 1, 0, 2'000, 3'000, 1, 100, "n1:2", "completed"}),
               record(3, "vision", "l4", "edge", 2 * day, 2 * day + 3 * h,
                      {"L4", 4, 0, -1, -1, -1, 300, "e1:0,1,2,3", "completed"}),
               {0, 4, "vision", "old", "l4", "edge", 0, 1, R"({"gpus":2})"}})
          .ok());
  auto check = [&](const char* when) {
    SCOPED_TRACE(when);
    auto days = store_.usage->ListUsageDays(0, 3 * day, "");
    ASSERT_TRUE(days.ok()) << days.error().message;
    ASSERT_EQ(days->size(), 3u);
    const store::UsageDay &d0 = days->at(0), &d1 = days->at(1), &d2 = days->at(2);
    EXPECT_EQ(d0.day_ms, 0);
    EXPECT_EQ(d0.team, "nlp");
    EXPECT_EQ(d0.gpu_model, "H100-SXM5-80GB");
    EXPECT_DOUBLE_EQ(d0.gpu_ms, 2.0 * 6 * h);
    EXPECT_DOUBLE_EQ(d0.effective_gpu_ms, 6.0 * h);  // 50% of it
    EXPECT_DOUBLE_EQ(d0.energy_j, 600);              // 6 of its 18 hours
    EXPECT_EQ(d0.max_span_ms, 18 * h);
    EXPECT_EQ(d1.day_ms, day);  // the rest of job 1 and all of job 2, one row
    EXPECT_DOUBLE_EQ(d1.gpu_ms, 2.0 * 12 * h + 1.0 * h);
    EXPECT_DOUBLE_EQ(d1.measured_gpu_ms, 25.0 * h);
    EXPECT_DOUBLE_EQ(d1.effective_gpu_ms, 12.0 * h + 0.02 * h);
    EXPECT_DOUBLE_EQ(d1.energy_j, 1'200 + 100);
    EXPECT_DOUBLE_EQ(d1.idle_energy_j, 100);  // job 2, under 5%
    EXPECT_EQ(d1.max_span_ms, 18 * h);
    EXPECT_EQ(d2.cluster, "edge");
    EXPECT_DOUBLE_EQ(d2.gpu_ms, 12.0 * h);
    EXPECT_DOUBLE_EQ(d2.measured_gpu_ms, 0);  // no samples
    EXPECT_DOUBLE_EQ(d2.energy_j, 300);
  };
  check("appended");
  EXPECT_EQ(store_.usage->ListUsageDays(day, 2 * day, "edge")->size(), 0u);
  EXPECT_EQ(store_.usage->ListUsageDays(0, 3 * day, "edge")->size(), 1u);
  EXPECT_EQ(store_.usage->MaxUsageSpan(day, 2 * day).value(), 18 * h);
  EXPECT_EQ(store_.usage->MaxUsageSpan(2 * day, 3 * day).value(), 3 * h);
  EXPECT_EQ(store_.usage->MaxUsageSpan(5 * day, 6 * day).value(), 0);

  auto scan = [&](store::UsageQuery q) {
    std::vector<int64_t> jobs;
    EXPECT_TRUE(store_.usage
                    ->ScanUsage(q,
                                [&](const store::UsageRecord& r) {
                                  if (!(q.columns & store::UsageQuery::kPlacement)) {
                                    EXPECT_EQ(r.figures.placement, "");
                                    EXPECT_EQ(r.project, "");
                                  }
                                  jobs.push_back(r.job);
                                })
                    .ok());
    std::sort(jobs.begin(), jobs.end());
    return jobs;
  };
  store::UsageQuery q;
  q.rows = store::UsageQuery::Rows::kWithFigures;
  q.columns = store::UsageQuery::kTeam;
  EXPECT_EQ(scan(q), (std::vector<int64_t>{1, 2, 3}));
  q.end_before_ms = day + 12 * h;
  EXPECT_EQ(scan(q), (std::vector<int64_t>{2}));
  q = {};
  q.rows = store::UsageQuery::Rows::kDocumentOnly;
  EXPECT_EQ(scan(q), (std::vector<int64_t>{4}));
  // By pages (the export): by id, each page after the last one's id.
  q = {};
  q.page = 3;
  std::vector<std::vector<int64_t>> pages;
  for (int i = 0; i < 4; ++i) {
    pages.emplace_back();
    ASSERT_TRUE(store_.usage
                    ->ScanUsage(q,
                                [&](const store::UsageRecord& r) {
                                  pages.back().push_back(r.job);
                                  q.after_id = r.id;
                                })
                    .ok());
    if (pages.back().empty()) break;
  }
  EXPECT_EQ(pages, (std::vector<std::vector<int64_t>>{{1, 2, 3}, {4}, {}}));

  // As a store from before migration 20 had it: the records without their sums.
  ASSERT_TRUE(RawSql(url_, "DROP TABLE usage_days"));
  ASSERT_TRUE(RawSql(url_, "DROP INDEX usage_records_unfigured"));
  ASSERT_TRUE(RawSql(url_, "DELETE FROM schema_migrations WHERE version = 20"));
  // ... and without what came after it.
  for (const char* column : {"clusters DROP COLUMN scheduler", "usage_records DROP COLUMN source",
                             "usage_records DROP COLUMN external_id"}) {
    ASSERT_TRUE(RawSql(url_, std::string("ALTER TABLE ") + column)) << column;
  }
  ASSERT_TRUE(RawSql(url_, "DELETE FROM schema_migrations WHERE version = 21"));
  ASSERT_TRUE(RawSql(url_, "DROP TABLE leader"));
  ASSERT_TRUE(RawSql(url_, "DROP TABLE controllers"));
  ASSERT_TRUE(RawSql(url_, "DROP TABLE agent_commands"));
  ASSERT_TRUE(RawSql(url_, "ALTER TABLE nodes DROP COLUMN connected_ms"));
  ASSERT_TRUE(RawSql(url_, "DELETE FROM schema_migrations WHERE version IN (22, 23, 24, 25)"));
  Reopen();
  check("migrated");

  EXPECT_EQ(store_.usage->DeleteUsageBefore(day + 13 * h).value(), 3);
  auto days = store_.usage->ListUsageDays(0, 3 * day, "");
  ASSERT_EQ(days->size(), 2u);
  EXPECT_EQ(days->at(0).day_ms, day);
}

// Five chained records at times 1000 .. 5000 with ids ascending; returns their ids.
std::vector<int64_t> AppendFive(store::AuditLog& audit) {
  for (int i = 1; i <= 5; ++i) {
    AuditRecord r;
    r.time_ms = i * 1000;
    r.actor = i % 2 ? "alice" : "bob";
    r.action = i == 3 ? "POST /api/v1/nodes/n3/cordon" : "POST /api/v1/jobs";
    r.target = "node/n" + std::to_string(i);
    r.status = i == 4 ? 409 : 200;
    r.result = i == 4 ? "conflict" : "ok";
    EXPECT_TRUE(audit.AppendAudit(r).ok());
  }
  std::vector<int64_t> ids;
  store::AuditFilter all;
  all.ascending = true;
  for (const auto& r : audit.QueryAudit(all).value()) ids.push_back(r.id);
  return ids;
}

TEST_P(StoreTest, TheAuditChainVerifiesAndNamesTheFirstTamperedRecord) {
  const std::string key(64, 'a');
  auto ids = AppendFive(*store_.audit);
  ASSERT_EQ(ids.size(), 5u);
  auto v = store::VerifyAudit(*store_.audit, key);
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_TRUE(v->ok) << v->problem;
  EXPECT_EQ(v->verified, 5);
  // Reopened, the store continues the chain from the newest record.
  Reopen();
  ASSERT_TRUE(
      store_.audit->AppendAudit({0, 6000, "alice", "DELETE /x", "x", 200, "ok", "", ""}).ok());
  EXPECT_EQ(store::VerifyAudit(*store_.audit, key)->verified, 6);
  // An edited record.
  store_ = {};
  ASSERT_TRUE(
      RawSql(url_, "UPDATE audit SET result = 'fine' WHERE id = " + std::to_string(ids[3])));
  Reopen();
  v = store::VerifyAudit(*store_.audit, key);
  EXPECT_FALSE(v->ok);
  EXPECT_EQ(v->first_bad_id, ids[3]);
  EXPECT_NE(v->problem.find("was edited"), std::string::npos) << v->problem;
  // A deleted one (the edit undone first).
  store_ = {};
  ASSERT_TRUE(
      RawSql(url_, "UPDATE audit SET result = 'conflict' WHERE id = " + std::to_string(ids[3])));
  ASSERT_TRUE(RawSql(url_, "DELETE FROM audit WHERE id = " + std::to_string(ids[1])));
  Reopen();
  v = store::VerifyAudit(*store_.audit, key);
  EXPECT_FALSE(v->ok);
  EXPECT_EQ(v->first_bad_id, ids[2]);
  EXPECT_NE(v->problem.find("does not follow record " + std::to_string(ids[0])), std::string::npos)
      << v->problem;
  // One put in another's place, with a hash of its own that chains to the record before it.
  store_ = {};
  ASSERT_TRUE(RawSql(url_, "DELETE FROM audit"));
  Reopen();
  ids = AppendFive(*store_.audit);
  auto third = store_.audit->QueryAudit({.ascending = true, .after_id = ids[1], .limit = 1});
  AuditRecord forged{0, 3000, "mallory", "POST /x", "x", 200, "ok", "", ""};
  forged.prev_hash = third->at(0).prev_hash;
  forged.hash = store::AuditHash(forged, forged.prev_hash);
  store_ = {};
  const std::string id = std::to_string(ids[2]);
  ASSERT_TRUE(RawSql(url_, "DELETE FROM audit WHERE id = " + id));
  ASSERT_TRUE(RawSql(url_,
                     "INSERT INTO audit (id, time_ms, actor, action, target, status, result, "
                     "before_doc, after_doc, prev_hash, hash) VALUES (" +
                         id + ", 3000, 'mallory', 'POST /x', 'x', 200, 'ok', '', '', '" +
                         forged.prev_hash + "', '" + forged.hash + "')"));
  Reopen();
  v = store::VerifyAudit(*store_.audit, key);
  EXPECT_FALSE(v->ok);
  EXPECT_EQ(v->first_bad_id, ids[3]);
  EXPECT_NE(v->problem.find("a record between them was deleted or inserted"), std::string::npos)
      << v->problem;
}

TEST_P(StoreTest, AuditFiltersByActorActionTargetResultAndTime) {
  auto ids = AppendFive(*store_.audit);
  auto count = [&](store::AuditFilter f) {
    auto r = store_.audit->QueryAudit(f);
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok() ? r->size() : 0u;
  };
  EXPECT_EQ(count({.actor = "alice"}), 3u);
  EXPECT_EQ(count({.action = "CORDON"}), 1u);  // a substring, whatever the case
  EXPECT_EQ(count({.action = "%"}), 0u);       // LIKE's wildcards are literal
  EXPECT_EQ(count({.target = "node/n2"}), 1u);
  EXPECT_EQ(count({.target = "node/"}), 5u);  // a prefix
  EXPECT_EQ(count({.target = "node"}), 0u);
  EXPECT_EQ(count({.result = "error"}), 1u);
  EXPECT_EQ(count({.result = "ok"}), 4u);
  EXPECT_EQ(count({.since_ms = 2000, .until_ms = 4000}), 2u);
  auto newest = store_.audit->QueryAudit({.limit = 2}).value();
  ASSERT_EQ(newest.size(), 2u);
  EXPECT_EQ(newest[0].id, ids[4]);
  auto oldest =
      store_.audit->QueryAudit({.ascending = true, .after_id = ids[1], .limit = 2}).value();
  ASSERT_EQ(oldest.size(), 2u);
  EXPECT_EQ(oldest[0].id, ids[2]);
}

TEST_P(StoreTest, PruningFromTheStartLeavesASignedAnchorTheRestVerifiesFrom) {
  const std::string key(64, 'b');
  auto ids = AppendFive(*store_.audit);
  EXPECT_EQ(store_.audit->FindAuditAnchor().error().code, ErrorCode::kNotFound);
  auto pruned = store_.audit->PruneAudit(3000, key);  // the records at 1000 and 2000
  ASSERT_TRUE(pruned.ok()) << pruned.error().message;
  EXPECT_EQ(pruned.value(), 2);
  auto anchor = store_.audit->FindAuditAnchor();
  ASSERT_TRUE(anchor.ok());
  EXPECT_EQ(anchor->last_id, ids[1]);
  EXPECT_EQ(anchor->pruned, 2);
  auto v = store::VerifyAudit(*store_.audit, key);
  EXPECT_TRUE(v->ok) << v->problem;
  EXPECT_EQ(v->verified, 3);
  EXPECT_EQ(v->anchor_id, ids[1]);
  // Appends go on from the chain's head; a second prune adds to the count.
  ASSERT_TRUE(store_.audit->AppendAudit({0, 9000, "a", "b", "c", 200, "ok", "", ""}).ok());
  EXPECT_EQ(store_.audit->PruneAudit(4000, key).value(), 1);
  EXPECT_EQ(store_.audit->FindAuditAnchor()->pruned, 3);
  EXPECT_TRUE(store::VerifyAudit(*store_.audit, key)->ok);
  EXPECT_EQ(store_.audit->PruneAudit(1, key).value(), 0);  // nothing that old
  // Another key (a database copied to a controller with its own secret.key) or an edited
  // anchor does not verify.
  EXPECT_FALSE(store::VerifyAudit(*store_.audit, std::string(64, 'c'))->ok);
  store_ = {};
  ASSERT_TRUE(RawSql(url_, "UPDATE audit_anchor SET pruned = 1"));
  Reopen();
  v = store::VerifyAudit(*store_.audit, key);
  EXPECT_FALSE(v->ok);
  EXPECT_NE(v->problem.find("anchor"), std::string::npos) << v->problem;
}

TEST_P(StoreTest, RefusesASchemaNewerThanItKnows) {
  store_ = {};
  ASSERT_TRUE(RawSql(url_, "INSERT INTO schema_migrations (version) VALUES (999)"));
  auto s = store::Open(url_);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("schema version 999, newer than this gpufleet knows"),
            std::string::npos)
      << s.error().message;
}

TEST_P(StoreTest, MigratesAVersionOneDatabaseKeepingItsRows) {
  store_ = {};
  std::string fresh =
      GetParam() == "postgresql"
          ? testing::SharedPostgres().CreateDatabase("t_v1_" + std::to_string(::getpid()))
          : "sqlite:" + (dir_ / "v1.db").string();
  std::string v1(migrations::All().front().sql);
  const char* id =
      GetParam() == "postgresql" ? "BIGSERIAL PRIMARY KEY" : "INTEGER PRIMARY KEY AUTOINCREMENT";
  for (size_t pos; (pos = v1.find("{ID}")) != std::string::npos;) v1.replace(pos, 4, id);
  ASSERT_TRUE(
      RawSql(fresh, v1 + ";\nCREATE TABLE schema_migrations (version BIGINT PRIMARY KEY);\n"
                         "INSERT INTO schema_migrations (version) VALUES (1);\n"
                         "INSERT INTO clusters VALUES ('c1', 'edge', 's1', '{}', 1, 1);\n"
                         "INSERT INTO pools VALUES ('p1', 'c1', 'L4', 1, 2, '{}', 1, 1);\n"
                         "INSERT INTO audit (time_ms, actor, action, target, status, result, "
                         "before_doc, after_doc) VALUES (1, 'a', 'b', 'c', 200, 'ok', '', '');"));
  auto s = store::Open(fresh);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->database->SchemaVersion().value(), store::KnownSchemaVersion());
  auto pools = s->fleet->ListPools();
  ASSERT_EQ(pools->size(), 1u);
  EXPECT_EQ(pools->at(0).scrape_interval_ms, 15000);  // migration 3's default
  EXPECT_EQ(s->audit->ListAudit(0, 10)->size(), 1u);
  // The id sequence of a version-1 table goes on after its rows.
  ASSERT_TRUE(s->audit->AppendAudit({0, 2, "a", "b", "c", 200, "ok", "", ""}).ok());
  auto audit = s->audit->ListAudit(0, 10);
  ASSERT_EQ(audit->size(), 2u);
  EXPECT_GT(audit->at(0).id, audit->at(1).id);
}

TEST_P(StoreTest, ConnectsAgainWhenTheServerComesBack) {
  if (GetParam() != "postgresql") GTEST_SKIP() << "an embedded file has no server to lose";
  auto& pg = testing::SharedPostgres();
  Cluster c{"c1", ClusterType::kEdge, "s1", {}, 1, 1};
  ASSERT_TRUE(store_.fleet->ApplyFleet({c}, {}).ok());
  ASSERT_TRUE(pg.Stop()) << pg.error();
  c.name = "c2";
  auto down = store_.fleet->ApplyFleet({c}, {});
  ASSERT_FALSE(down.ok());
  EXPECT_EQ(down.error().code, ErrorCode::kUnavailable);  // the API's 503
  EXPECT_FALSE(store_.database->Ping().ok());
  ASSERT_TRUE(pg.Start()) << pg.error();
  // The first call after the server returns succeeds: its session connects again.
  ASSERT_TRUE(store_.fleet->ApplyFleet({c}, {}).ok());
  EXPECT_EQ(store_.fleet->ListClusters()->size(), 2u);
  EXPECT_TRUE(store_.database->Ping().ok());
}

INSTANTIATE_TEST_SUITE_P(Backends, StoreTest, ::testing::Values("sqlite", "postgresql"),
                         [](const auto& info) { return info.param; });

TEST(StoreOpen, RefusesWhatItCannotOpen) {
  EXPECT_FALSE(store::Open("sqlite:/nonexistent-dir/sub/db").ok());
  EXPECT_EQ(store::Open("mysql://x/y").error().code, ErrorCode::kInvalidArgument);
  auto& pg = testing::SharedPostgres();
  ASSERT_TRUE(pg.ok()) << pg.error();
  auto missing = store::Open(pg.Url("no_such_db"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(missing.error().message.find("cannot open store postgresql://"), std::string::npos);
  EXPECT_NE(missing.error().message.find("no_such_db"), std::string::npos);
  auto nobody = store::Open("postgresql://nobody@/postgres?host=/nonexistent-socket-dir");
  ASSERT_FALSE(nobody.ok());
  EXPECT_EQ(nobody.error().code, ErrorCode::kUnavailable);
}

TEST(StoreOpen, RedactsPasswords) {
  EXPECT_EQ(store::RedactUrl("postgresql://u:secret@db:5432/x?password=p2&sslmode=require"),
            "postgresql://u:***@db:5432/x?password=***&sslmode=require");
  EXPECT_EQ(store::RedactUrl("postgresql://u@db/x"), "postgresql://u@db/x");
  EXPECT_EQ(store::RedactUrl("sqlite:/var/lib/a:b@c"), "sqlite:/var/lib/a:b@c");
}

// Every table a SQLite database has, from its catalogue.
std::vector<std::string> SqliteTables(const std::string& path) {
  std::vector<std::string> out;
  sqlite3* db = nullptr;
  sqlite3_open(path.c_str(), &db);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db,
                     "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT IN "
                     "('schema_migrations', 'sqlite_sequence') ORDER BY name",
                     -1, &st, nullptr);
  while (sqlite3_step(st) == SQLITE_ROW) {
    out.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)));
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

TEST(StoreCopy, MovesEveryTableToAnEmptyDatabaseAndRefusesAFullOne) {
  const gpufleet::testing::TempDir dir_tmp("gf-copy");
  const std::filesystem::path dir = dir_tmp.path();
  std::string from = "sqlite:" + (dir / "db").string();
  {
    auto s = store::Open(from).value();
    ASSERT_TRUE(s.fleet
                    ->ApplyFleet({{"c1", ClusterType::kEdge, "s1", {{"team", "a"}}, 1, 1}},
                                 {{"p1", "c1", "L4", 1, 4, {}, 1, 1}})
                    .ok());
    ASSERT_TRUE(
        s.fleet->SaveNode(MakeNode("n1", 2), {{0, "n1", 5, "joining", "ready", "ok", "a"}}).ok());
    auto gpu_events = s.fleet->AppendGpuEvents({{0, 1000, "n1", 1, "n1-gpu-1", "xid", 79}});
    ASSERT_TRUE(gpu_events.ok()) << gpu_events.error().message;
    ASSERT_TRUE(s.tokens->CreateJoinToken({"jt-1", "p1", "h1", "me", 1, 0, false}).ok());
    ApiToken t;
    t.id = "tok-1";
    t.name = "ops";
    t.hash = "h2";
    ASSERT_TRUE(s.tokens->CreateApiToken(t).ok());
    for (int i = 0; i < 4; ++i) {
      ASSERT_TRUE(s.audit->AppendAudit({0, i, "a", "POST /x", "x", 200, "ok", "", ""}).ok());
    }
    ASSERT_EQ(s.audit->PruneAudit(1, std::string(64, 'k')).value(), 1);  // an anchor to copy
    ASSERT_TRUE(s.alerting->CreateChannel({"hook", "webhook", "http://x", "k", 1, "", ""}).ok());
    ASSERT_TRUE(
        s.alerting->RecordAlertChanges({{"fp", "{}"}}, {{0, "hook", "fp", "body", 1, 0, 1, ""}})
            .ok());
    ASSERT_TRUE(s.alerting->SaveRules({{"r1", "g", "{}", 1}}, {}).ok());
    ASSERT_TRUE(s.alerting->CreateSilence({"s1", "[]", 0, 9, "me", "c", 1}).ok());
    ASSERT_TRUE(s.jobs->SaveJobs({{7, "queued", "{}", 1}}).ok());
    ASSERT_TRUE(s.scaling->SaveScalingPolicy({"p1", "{}", 1}).ok());
    ASSERT_TRUE(s.scaling->AppendScaleEvent({0, 1, "p1", "e"}).ok());
    ASSERT_TRUE(s.scaling->AppendScalingSample({"p1", 1, "s"}).ok());
    ASSERT_TRUE(s.settings->PutSetting("compat", "version: 1", 1).ok());
    auto rollout = s.rollouts->CreateRollout({0, "running", "{}", 1, 1});
    ASSERT_TRUE(rollout.ok());
    ASSERT_TRUE(
        s.rollouts->SaveRolloutNodes({rollout.value(), "running", "{}", 1, 2}, {{"n1", "{}", 2}})
            .ok());
    ASSERT_TRUE(
        s.rollouts->AppendRolloutEvents({{0, rollout.value(), 2, "n1", "drain", "x"}}).ok());
    ASSERT_TRUE(s.drift->SaveDriftFindings({{1, "n1", "open", "{}", 2}}).ok());
    ASSERT_TRUE(s.compliance->PutComplianceDay({"2026-12-03", "{}", 2}).ok());
    ASSERT_TRUE(s.teams->PutTeam({"vision", R"({"name":"vision"})", 2}).ok());
    ASSERT_TRUE(s.usage
                    ->AppendUsage({{0, 7, "vision", "p", "h100", "train", 1, 2, "{}",
                                    store::UsageFigures{"H100-SXM5-80GB", 1}}})
                    .ok());
    ASSERT_TRUE(s.usage->AddPoolHours({{"h100", "train", "H100-SXM5-80GB", 3'600'000, 5, 5}}).ok());
    ASSERT_TRUE(s.assets->SaveAssets({{"S1", "gpu", "spare", "{}", 1}}, {{0, "S1", 1, "{}"}}).ok());
  }
  auto& pg = testing::SharedPostgres();
  ASSERT_TRUE(pg.ok()) << pg.error();
  std::string to = pg.CreateDatabase("t_copy");
  auto copied = store::Copy(from, to);
  ASSERT_TRUE(copied.ok()) << copied.error().message;
  std::vector<std::string> names;
  for (const auto& c : copied.value()) {
    names.push_back(c.table);
    // Every table had rows, but the outbox has its one and alerts theirs.
    EXPECT_GT(c.rows, 0) << c.table;
  }
  std::sort(names.begin(), names.end());
  // No table left behind but those that describe running controllers (store/lease.h).
  auto tables = SqliteTables((dir / "db").string());
  std::erase_if(tables, [](const std::string& t) {
    return t == "leader" || t == "controllers" || t == "agent_commands";
  });
  EXPECT_EQ(names, tables);

  auto a = store::Open(from).value();
  auto b = store::Open(to).value();
  auto na = a.fleet->LoadNodes().value(), nb = b.fleet->LoadNodes().value();
  ASSERT_EQ(nb.size(), 1u);
  EXPECT_EQ(nb[0].gpus.size(), 2u);
  EXPECT_EQ(nb[0].facts.driver_version, na[0].facts.driver_version);
  EXPECT_EQ(b.fleet->ListNodeEvents("n1", 10)->size(), 1u);
  EXPECT_EQ(b.tokens->FindApiToken("h2")->name, "ops");
  EXPECT_EQ(b.alerting->ListChannels()->at(0).secret, "k");
  auto audit = b.audit->ListAudit(0, 10).value();
  ASSERT_EQ(audit.size(), 3u);
  // The chain and its anchor came along: the copy verifies with the same secret.key.
  auto verified = store::VerifyAudit(*b.audit, std::string(64, 'k'));
  EXPECT_TRUE(verified->ok) << verified->problem;
  EXPECT_EQ(verified->verified, 3);
  EXPECT_EQ(audit[0].id, a.audit->ListAudit(0, 1)->at(0).id);
  // New rows on the target get ids after the copied ones.
  ASSERT_TRUE(b.audit->AppendAudit({0, 9, "a", "POST /y", "y", 200, "ok", "", ""}).ok());
  EXPECT_GT(b.audit->ListAudit(0, 1)->at(0).id, audit[0].id);
  auto event = b.scaling->AppendScaleEvent({0, 2, "p1", "f"});
  ASSERT_TRUE(event.ok()) << event.error().message;
  EXPECT_EQ(b.scaling->ListScaleEvents("p1", 10)->size(), 2u);

  auto again = store::Copy(from, to);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code, ErrorCode::kConflict);
  EXPECT_NE(again.error().message.find("not empty"), std::string::npos);
}

}  // namespace
}  // namespace gpufleet
