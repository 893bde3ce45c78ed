// The notifier over a real SQLite store: what each channel's outbox gets for one evaluation,
// by its route and its grouping.

#include "alerting/notifier.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <filesystem>

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
  auto dir = std::filesystem::temp_directory_path() / ("gf-notifier-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
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
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpufleet::alerting
