// Ingest over the real fleet, store, telemetry store and health model: what an agent's batch
// and a scraped page leave in each.

#include "ingest/ingest.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "config/fleet_spec.h"
#include "tests/support/temp_dir.h"

namespace gpufleet::ingest {
namespace {

class IngestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = store::Open("sqlite:" + (dir_ / "db").string()).value();
    fleet_ = std::make_unique<FleetService>(*store_.fleet, *store_.tokens, GpuCatalog::Builtin(),
                                            clock_, FleetOptions{});
    ASSERT_TRUE(fleet_->Load().ok());
    auto spec = ParseFleetSpec(R"(apiVersion: gpufleet/v1
kind: Fleet
clusters:
  - name: train
    type: training
    site: s1
    pools:
      - {name: h100, gpu_model: H100-SXM5-80GB, gpus_per_node: 2}
)",
                               "fleet.yaml", *GpuCatalog::Builtin());
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    ASSERT_TRUE(fleet_->Apply(spec.value()).ok());
    telemetry_ = std::move(TelemetryStore::Open({(dir_ / "tsdb").string(), {}}).value());
    health_ = std::make_unique<health::HealthService>(*fleet_, *telemetry_, *store_.fleet,
                                                      *store_.audit, GpuCatalog::Builtin(),
                                                      XidCatalog::Builtin(), clock_);
    ingest_ = std::make_unique<Ingest>(*fleet_, *telemetry_, *store_.fleet, *health_, *store_.audit,
                                       commands_);
    proto::Hello h;
    h.join_token = fleet_->CreateJoinToken("h100", 3'600'000, "test")->secret;
    h.facts.hostname = "n1";
    for (int i = 0; i < 2; ++i) {
      Gpu g;
      g.index = i;
      g.uuid = "GPU-n1-" + std::to_string(i);
      g.name = "NVIDIA H100 80GB HBM3";
      h.gpus.push_back(g);
    }
    ASSERT_TRUE(ingest_->OnHello(h, "10.0.0.1").ok());
  }
  void TearDown() override {
    ingest_.reset();
    health_.reset();
    telemetry_.reset();
    fleet_.reset();
    store_ = {};
  }

  testing::TempDir tmp_{"gf-ingest"};  // removed with everything in it after the test
  std::filesystem::path dir_ = tmp_.path();
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>(1'800'000'000'000);
  runtime::CommandBus commands_{clock_};
  store::Stores store_;
  std::unique_ptr<FleetService> fleet_;
  std::unique_ptr<TelemetryStore> telemetry_;
  std::unique_ptr<health::HealthService> health_;
  std::unique_ptr<Ingest> ingest_;
};

TEST_F(IngestTest, ABatchWithAnXidIsStoredOnceEverywhereAndAcknowledged) {
  const int64_t t = clock_->NowMs();
  proto::Samples batch;
  batch.seq = 7;
  for (int gpu = 0; gpu < 2; ++gpu) {
    SampleRow row;
    row.time_ms = t;
    row.gpu = gpu;
    row.set(Field::kGpuUtil, 50 + gpu);
    batch.rows.push_back(row);
  }
  batch.events.push_back({t + 1, 1, "xid", 79});
  uint64_t before = telemetry_->samples_ingested();
  auto reply = ingest_->OnMessage("n1", proto::Message(batch));
  ASSERT_TRUE(reply.has_value());
  ASSERT_TRUE(std::holds_alternative<proto::Ack>(*reply));
  EXPECT_EQ(std::get<proto::Ack>(*reply).seq, 7);
  // Two utilisation points and one XID gauge point, in one append.
  EXPECT_EQ(telemetry_->samples_ingested() - before, 3u);
  auto gauge = telemetry_->Latest("GPU-n1-1", Field::kXidLast);
  ASSERT_TRUE(gauge.has_value());
  EXPECT_EQ(gauge->v, 79);
  EXPECT_EQ(gauge->t, t + 1);
  EXPECT_FALSE(telemetry_->Latest("GPU-n1-0", Field::kXidLast).has_value());
  auto events = store_.fleet->ListGpuEvents("n1", "xid", 10);
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ(events->at(0).uuid, "GPU-n1-1");
  EXPECT_EQ(events->at(0).value, 79);
  auto seen = health_->RecentXids();
  ASSERT_EQ(seen["GPU-n1-1"].size(), 1u);
  EXPECT_EQ(seen["GPU-n1-1"][0].xid, 79);
  // The agent sends the batch again (its ack was lost): nothing is stored twice.
  ASSERT_TRUE(ingest_->OnMessage("n1", proto::Message(batch)).has_value());
  EXPECT_EQ(telemetry_->samples_ingested() - before, 3u);
  EXPECT_EQ(store_.fleet->ListGpuEvents("n1", "xid", 10)->size(), 1u);
}

// Two controllers on one store: n1's agent is connected to this one (its telemetry is here).
// The other, the leader, takes its XIDs from the store (once, however often it reads them),
// judges its GPUs on them, and leaves the node's verdict to this one, whose reasons from the
// telemetry it holds stand there.
TEST_F(IngestTest, TheLeaderSeesAnotherControllersXidsAndTakesItsVerdicts) {
  FleetService leader_fleet(*store_.fleet, *store_.tokens, GpuCatalog::Builtin(), clock_,
                            FleetOptions{});
  ASSERT_TRUE(leader_fleet.Load().ok());
  auto leader_tsdb = std::move(TelemetryStore::Open({(dir_ / "tsdb-2").string(), {}}).value());
  health::HealthService leader(leader_fleet, *leader_tsdb, *store_.fleet, *store_.audit,
                               GpuCatalog::Builtin(), XidCatalog::Builtin(), clock_);
  ASSERT_TRUE(leader.Load().ok());
  ASSERT_TRUE(leader_fleet.Refresh().ok());  // as the change feed does when it starts
  EXPECT_EQ(leader_fleet.HeldElsewhere(), std::set<std::string>{"n1"});
  EXPECT_TRUE(fleet_->HeldElsewhere().empty());

  // Too hot on GPU 0: a warning from telemetry only this controller holds. The leader gives no
  // verdict on a node held elsewhere (it would call it ready); this one does (no remediation:
  // it does not lead), and the leader takes it.
  const int64_t t = clock_->NowMs();
  proto::Samples batch;
  batch.seq = 1;
  SampleRow row;
  row.time_ms = t;
  row.gpu = 0;
  row.set(Field::kGpuTemp, GpuCatalog::Builtin()->Find("H100-SXM5-80GB")->max_operating_temp_c - 2);
  batch.rows.push_back(row);
  ASSERT_TRUE(ingest_->OnMessage("n1", proto::Message(batch)).has_value());
  EXPECT_EQ(leader.Apply(nullptr, false), 0);
  EXPECT_EQ(health_->Apply(nullptr, false), 1);
  ASSERT_TRUE(leader_fleet.Refresh().ok());
  EXPECT_EQ(leader_fleet.GetNode("n1")->state, NodeState::kDegraded);
  auto seen = leader.Evaluate({});
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].health, NodeState::kDegraded);
  ASSERT_FALSE(seen[0].reasons.empty());
  EXPECT_NE(seen[0].reasons.back().find("C within 5 C of the model's limit"), std::string::npos)
      << seen[0].reasons.back();
  EXPECT_EQ(seen[0].gpus[0].level, health::Level::kHealthy);  // its own reading: none
  EXPECT_EQ(leader.Apply(nullptr, false), 0);
  EXPECT_EQ(leader_fleet.GetNode("n1")->state, NodeState::kDegraded);

  // XID 79 on GPU 1: the leader reads it from the store, once however often it reads, and
  // judges the GPU failed itself.
  batch.seq = 2;
  batch.rows.clear();
  batch.events.push_back({t + 1, 1, "xid", 79});
  ASSERT_TRUE(ingest_->OnMessage("n1", proto::Message(batch)).has_value());
  ASSERT_TRUE(leader.TakeEvents().ok());
  ASSERT_TRUE(leader.TakeEvents().ok());
  auto xids = leader.RecentXids();
  ASSERT_EQ(xids["GPU-n1-1"].size(), 1u);
  EXPECT_EQ(xids["GPU-n1-1"][0].xid, 79);
  seen = leader.Evaluate({});
  EXPECT_EQ(seen[0].health, NodeState::kUnhealthy);
  EXPECT_EQ(seen[0].gpus[1].level, health::Level::kFailed);

  // A reset recorded by either controller ends what the XIDs before it meant, for both.
  clock_->Advance(1000);
  health_->OnReset("n1", 1);
  ASSERT_TRUE(leader.TakeEvents().ok());
  EXPECT_TRUE(leader.RecentXids()["GPU-n1-1"].empty());
}

TEST_F(IngestTest, AScrapedXidChangeIsOneEventAndTheGaugeComesFromThePage) {
  scrape::ScrapeTarget target{"legacy-1", "h100", "http://127.0.0.1:9/metrics", 15'000};
  scrape::DcgmReading reading;
  reading.facts.hostname = "legacy-1";
  for (int i = 0; i < 2; ++i) {
    Gpu g;
    g.index = i;
    g.uuid = "GPU-legacy-" + std::to_string(i);
    g.name = "NVIDIA H100 80GB HBM3";
    reading.gpus.push_back(g);
    SampleRow row;
    row.gpu = i;
    row.set(Field::kXidLast, i == 0 ? 0 : 48);
    reading.rows.push_back(row);
  }
  const int64_t t = clock_->NowMs();
  ASSERT_TRUE(ingest_->OnScrape(target, t, reading).ok());
  ASSERT_TRUE(ingest_->OnScrape(target, t + 15'000, reading).ok());  // the same XID: no event
  auto events = store_.fleet->ListGpuEvents("legacy-1", "xid", 10);
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ(events->at(0).value, 48);
  EXPECT_EQ(telemetry_->Latest("GPU-legacy-1", Field::kXidLast)->v, 48);
  EXPECT_EQ(fleet_->GetNode("legacy-1")->pool, "h100");
}

TEST(ScrapeTargets, ComeFromEveryPoolsExporters) {
  const gpufleet::testing::TempDir dir_tmp("gf-ingest-t");
  const std::filesystem::path dir = dir_tmp.path();
  auto stores = store::Open("sqlite:" + (dir / "db").string()).value();
  FleetService fleet(*stores.fleet, *stores.tokens, GpuCatalog::Builtin(),
                     std::make_shared<ManualClock>(), FleetOptions{});
  auto spec = ParseFleetSpec(R"(apiVersion: gpufleet/v1
kind: Fleet
clusters:
  - name: c
    type: inference
    site: s
    pools:
      - name: l4
        gpu_model: L4
        gpus_per_node: 1
        scrape_interval: 30s
        exporters: [{node: a, url: "http://10.0.0.1:9400/metrics"}]
)",
                             "fleet.yaml", *GpuCatalog::Builtin());
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  ASSERT_TRUE(fleet.Apply(spec.value()).ok());
  auto targets = ScrapeTargets(fleet);
  ASSERT_EQ(targets.size(), 1u);
  EXPECT_EQ(targets[0].node, "a");
  EXPECT_EQ(targets[0].pool, "l4");
  EXPECT_EQ(targets[0].interval_ms, 30'000);
}

// Health reads answer from the health task's last evaluation while it is current, and afresh
// once it is too old or an XID or a node record has changed since; with no age set, always
// afresh.
TEST_F(IngestTest, HealthReadsComeFromTheLastEvaluationWhileItIsCurrent) {
  auto hot = [&](double celsius) {
    static int seq = 0;
    proto::Samples batch;
    batch.seq = ++seq;
    clock_->Advance(1);  // each sample after the last
    SampleRow row;
    row.time_ms = clock_->NowMs();
    row.gpu = 0;
    row.set(Field::kGpuTemp, celsius);
    batch.rows.push_back(row);
    ASSERT_TRUE(ingest_->OnMessage("n1", proto::Message(batch)).has_value());
  };
  auto level = [&](int64_t* at = nullptr) { return health_->Reports({}, at).at(0).gpus[0].level; };
  const double limit = GpuCatalog::Builtin()->Find("H100-SXM5-80GB")->max_operating_temp_c;
  hot(40);
  health_->Apply(nullptr, false);
  hot(limit + 5);
  EXPECT_EQ(level(), health::Level::kFailed) << "no age set: afresh";

  health_->set_max_answer_age(10'000);
  hot(40);
  health_->Apply(nullptr, false);
  const int64_t evaluated = clock_->NowMs();
  clock_->Advance(1000);
  hot(limit + 5);  // telemetry alone: the last evaluation still answers
  int64_t at = 0;
  EXPECT_EQ(level(&at), health::Level::kHealthy);
  EXPECT_EQ(at, evaluated);
  NodeFilter other_cluster, other_scope, by_name;
  other_cluster.cluster = "nosuch";
  other_scope.clusters = {"nosuch"};
  by_name.name = "n1";
  EXPECT_EQ(health_->Reports(other_cluster).size(), 0u);
  EXPECT_EQ(health_->Reports(other_scope).size(), 0u);
  EXPECT_EQ(health_->Reports(by_name).size(), 1u);
  clock_->Advance(9'001);  // too old
  EXPECT_EQ(level(&at), health::Level::kFailed);
  EXPECT_EQ(at, clock_->NowMs());

  hot(40);
  health_->Apply(nullptr, false);
  EXPECT_EQ(level(), health::Level::kHealthy);
  health_->OnXid("GPU-n1-0", clock_->NowMs(), 79);  // an XID: afresh at once
  EXPECT_EQ(level(), health::Level::kFailed);

  health_->Apply(nullptr, false);
  EXPECT_EQ(level(), health::Level::kFailed);
  health_->OnReset("n1", 0);  // the XIDs before no longer count
  EXPECT_EQ(level(), health::Level::kHealthy);

  health_->Apply(nullptr, false);  // healthy again: its verdict changed the node's record,
  clock_->Advance(3);
  EXPECT_EQ(level(&at), health::Level::kHealthy);
  EXPECT_EQ(at, clock_->NowMs()) << "so that evaluation is not current";
  health_->Apply(nullptr, false);  // the next one, which changes nothing, is
  const int64_t applied = clock_->NowMs();
  clock_->Advance(5);
  EXPECT_EQ(level(&at), health::Level::kHealthy);
  EXPECT_EQ(at, applied);
  ASSERT_TRUE(fleet_->Act("n1", NodeAction::kCordon, "test").ok());  // a node record changed
  EXPECT_EQ(level(&at), health::Level::kHealthy);
  EXPECT_EQ(at, clock_->NowMs()) << "evaluated afresh";
  const uint64_t changes = fleet_->changes();
  health_->Apply(nullptr, false);
  EXPECT_EQ(fleet_->changes(), changes) << "an evaluation that changes nothing writes nothing";
}

}  // namespace
}  // namespace gpufleet::ingest
