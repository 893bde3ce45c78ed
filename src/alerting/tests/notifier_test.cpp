// The notifier over a real SQLite store: what each channel's outbox gets for one evaluation,
// by its route and its grouping.

#include "alerting/notifier.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <filesystem>
#include <set>

#include "tests/support/temp_dir.h"

namespace gpufleet::alerting {
namespace {

class NoSeries : public SeriesReader {
 public:
  void Latest(const Snapshot& snap, Field, int64_t, std::vector<double>& out) override {
    out.assign(snap.gpus.size(), NAN);
  }
  void Window(const Snapshot&, size_t, Field, int64_t, int64_t,
              std::vector<tsdb::Sample>& out) override {
    out.clear();
  }
};

TEST(Notifier, AGroupingWebhookGetsOneNotificationPerGroupAndRoutesFilter) {
  const gpufleet::testing::TempDir dir_tmp("gf-notifier");
  const std::filesystem::path dir = dir_tmp.path();
  auto db = store::Open("sqlite:" + (dir / "db").string()).value();
  auto clock = std::make_shared<ManualClock>(1'800'000'000'000);
  ASSERT_TRUE(db.alerting
                  ->CreateChannel(
                      {"grouped", "webhook", "http://127.0.0.1:9", "", 0, "", "alertname,cluster"})
                  .ok());
  ASSERT_TRUE(
      db.alerting->CreateChannel({"each", "webhook", "http://127.0.0.1:9", "", 0, "", ""}).ok());
  ASSERT_TRUE(db.alerting
                  ->CreateChannel({"other", "webhook", "http://127.0.0.1:9", "", 0,
                                   R"([{"name":"cluster","value":"infer"}])", ""})
                  .ok());
  Notifier notifier(*db.alerting, clock, "http://ctl");
  ASSERT_TRUE(notifier.Load().ok());

  health::NodeHealth n;
  n.node = "dgx-1";
  n.cluster = "train";
  n.pool = "h100";
  for (int g = 0; g < 3; ++g) {
    n.gpus.push_back({g,
                      "GPU-" + std::to_string(g),
                      "",
                      health::Level::kFailed,
                      {{"xid", health::Level::kFailed, "XID 79", "reboot_node"}}});
  }
  auto snap = std::make_shared<const Snapshot>(
      MakeSnapshot({n}, {}, *XidCatalog::Builtin(), clock->NowMs(), NAN));
  NoSeries reader;
  ASSERT_TRUE(notifier.Cycle({n}, snap, reader).ok());

  auto due = db.alerting->DueNotifications(clock->NowMs(), 100);
  ASSERT_TRUE(due.ok());
  std::map<std::string, std::vector<std::string>> bodies;
  for (const auto& d : due.value()) bodies[d.channel].push_back(d.body);
  ASSERT_EQ(bodies["grouped"].size(), 1u);
  auto v = boost::json::parse(bodies["grouped"][0]);
  EXPECT_EQ(v.at("alerts").as_array().size(), 3u);
  EXPECT_EQ(v.at("groupLabels").at("alertname").as_string(), "GpuXidCritical");
  EXPECT_EQ(v.at("groupLabels").at("cluster").as_string(), "train");
  EXPECT_EQ(v.at("commonLabels").at("Hostname").as_string(), "dgx-1");
  EXPECT_FALSE(v.at("commonLabels").as_object().contains("gpu"));  // differs between them
  EXPECT_EQ(v.at("groupKey").as_string(),
            "grouped:{alertname=\"GpuXidCritical\",cluster=\"train\",}");
  EXPECT_EQ(bodies["each"].size(), 3u);
  EXPECT_EQ(boost::json::parse(bodies["each"][0]).at("alerts").as_array().size(), 1u);
  EXPECT_EQ(bodies["other"].size(), 0u);  // its route wants cluster infer
}

// A node that is decommissioning or retired raises no alert, whatever it reports (a retired
// node's agent may still run); a drifted node raises one drift alert, at its highest severity.
TEST(Notifier, NodesThatLeftTheFleetRaiseNoAlertAndDriftRaisesOnePerNode) {
  const gpufleet::testing::TempDir dir_tmp("gf-notifier-left");
  auto db =
      store::Open("sqlite:" + (std::filesystem::path(dir_tmp.path()) / "db").string()).value();
  auto clock = std::make_shared<ManualClock>(1'800'000'000'000);
  Notifier notifier(*db.alerting, clock, "http://ctl");
  ASSERT_TRUE(notifier.Load().ok());
  auto node = [](const char* name, NodeState state) {
    health::NodeHealth n;
    n.node = name;
    n.cluster = "train";
    n.pool = "h100";
    n.state = state;
    n.health = NodeState::kUnhealthy;
    n.reachable = false;
    n.reasons = {"no heartbeat for 120 s"};
    n.last_seen_ms = 1'799'999'000'000;
    n.gpus.push_back({0,
                      std::string("GPU-") + name,
                      "",
                      health::Level::kFailed,
                      {{"xid", health::Level::kFailed, "XID 79", "reboot_node"}}});
    return n;
  };
  std::vector<health::NodeHealth> nodes = {node("retired-1", NodeState::kRetired),
                                           node("leaving-1", NodeState::kDecommissioning)};
  health::NodeHealth drifted;
  drifted.node = "drifted-1";
  drifted.cluster = "train";
  drifted.pool = "h100";
  drifted.last_seen_ms = 1'800'000'000'000;
  drifted.gpus.push_back({0, "GPU-drifted", "", health::Level::kHealthy, {}});
  nodes.push_back(drifted);
  NoSeries reader;
  for (int minute = 0; minute <= 31; ++minute) {
    nodes[2].last_seen_ms = clock->NowMs();  // it reports
    Snapshot s = MakeSnapshot(nodes, {}, *XidCatalog::Builtin(), clock->NowMs(), NAN);
    EXPECT_EQ(s.nodes.size(), 1u);  // the nodes that left have no series
    s.node_inputs["node_drift_severity"] = {{"drifted-1", 4}, {"retired-1", 4}, {"leaving-1", 2}};
    ASSERT_TRUE(notifier.Cycle(nodes, std::make_shared<const Snapshot>(std::move(s)), reader).ok());
    clock->Advance(60'000);
  }
  std::vector<std::string> alerts;
  for (const auto& a : notifier.Alerts())
    alerts.push_back(a.rule + " " + a.labels.at("Hostname") + " " + std::string(ToString(a.state)));
  EXPECT_EQ(alerts, std::vector<std::string>{"NodeDriftHigh drifted-1 firing"});
}

// Alerts about a team's pools carry its `team` label and go to its channels: a channel that only
// teams name gets only theirs, one with a route of its own gets its route's and the teams'.
// The pools' rows count allocation: PoolNoFreeGpus fires (after its 15 minutes) on a pool whose
// GPUs jobs hold while others wait, and the free pool stays quiet.
TEST(Notifier, ATeamsAlertsGoToItsChannelsAndPoolRowsCountAllocation) {
  const gpufleet::testing::TempDir dir_tmp("gf-notifier-team");
  const std::filesystem::path dir = dir_tmp.path();
  auto db = store::Open("sqlite:" + (dir / "db").string()).value();
  auto clock = std::make_shared<ManualClock>(1'800'000'000'000);
  auto channel = [&](const char* name, const char* route) {
    ASSERT_TRUE(
        db.alerting->CreateChannel({name, "webhook", "http://127.0.0.1:9", "", 0, route, ""}).ok());
  };
  channel("vision-pager", "");                                      // vision's only
  channel("infer-ops", R"([{"name":"cluster","value":"infer"}])");  // a route, and nlp's
  channel("everything", "");                                        // no team: every alert
  Notifier notifier(*db.alerting, clock, "http://ctl");
  ASSERT_TRUE(notifier.Load().ok());
  notifier.set_team_channels([] {
    return std::map<std::string, std::vector<std::string>>{{"vision", {"vision-pager"}},
                                                           {"nlp", {"infer-ops"}}};
  });

  auto node = [](const char* name, const char* cluster, const char* pool) {
    health::NodeHealth n;
    n.node = name;
    n.cluster = cluster;
    n.pool = pool;
    n.state = n.health = NodeState::kReady;
    n.reachable = true;
    n.gpus.push_back({0, std::string("GPU-") + name + "-0", "", health::Level::kHealthy, {}});
    n.gpus.push_back({1, std::string("GPU-") + name + "-1", "", health::Level::kHealthy, {}});
    return n;
  };
  std::vector<health::NodeHealth> nodes = {node("v-1", "train", "vision-h100"),
                                           node("n-1", "train", "nlp-h100")};
  nodes[0].gpus[1].level = health::Level::kFailed;
  nodes[0].gpus[1].reasons = {{"xid", health::Level::kFailed, "XID 79", "reboot_node"}};
  auto snapshot = [&] {
    Snapshot s = MakeSnapshot(nodes, {}, *XidCatalog::Builtin(), clock->NowMs(), NAN);
    // vision-h100: one GPU held, the other failed, two jobs queued; nlp-h100: all free.
    AddPools(s, {{"vision-h100", "train", "vision", 2, 1200}, {"nlp-h100", "train", "nlp", 0, 0}},
             {{"v-1", {7, 0}}});
    return std::make_shared<const Snapshot>(std::move(s));
  };
  auto snap = snapshot();
  ASSERT_EQ(snap->pool_rows.size(), 2u);
  EXPECT_EQ(snap->pool_rows[0].allocated_gpus, 1);
  EXPECT_EQ(snap->pool_rows[0].free_gpus, 0);  // the other is failed
  EXPECT_EQ(snap->pool_rows[1].free_gpus, 2);
  EXPECT_EQ(TeamOf(*snap, "nlp-h100"), "nlp");
  NoSeries reader;
  ASSERT_TRUE(notifier.Cycle(nodes, snap, reader).ok());
  clock->Advance(16 * 60'000);
  ASSERT_TRUE(notifier.Cycle(nodes, snapshot(), reader).ok());

  std::map<std::string, std::set<std::string>> got;  // channel -> alertname/team
  auto due = db.alerting->DueNotifications(clock->NowMs(), 100);
  ASSERT_TRUE(due.ok());
  for (const auto& d : due.value()) {
    auto v = boost::json::parse(d.body);
    for (const auto& a : v.at("alerts").as_array()) {
      const auto& l = a.at("labels").as_object();
      got[d.channel].insert(std::string(l.at("alertname").as_string()) + "/" +
                            (l.contains("team") ? std::string(l.at("team").as_string()) : "-"));
    }
  }
  EXPECT_EQ(got["vision-pager"],
            (std::set<std::string>{"GpuXidCritical/vision", "PoolDegraded/vision",
                                   "PoolNoFreeGpus/vision"}));
  EXPECT_EQ(got["everything"], got["vision-pager"]);
  EXPECT_TRUE(got["infer-ops"].empty());  // nlp has no alert, and nothing is in cluster infer
}

}  // namespace
}  // namespace gpufleet::alerting
