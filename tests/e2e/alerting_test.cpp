// Alerting end to end: the built-in rules fire on the health model, and notifications reach a
// real Alertmanager (Debian's prometheus-alertmanager on a loopback port) and a webhook that
// is down, across a controller restart, exactly once per state change.

#include <filesystem>
#include <fstream>
#include <thread>

#include "common/crypto.h"
#include "common/json_text.h"
#include "fixture.h"

namespace gpufleet::e2e {
namespace {

const char* kAlertmanager = "/usr/bin/prometheus-alertmanager";

class Alerting : public E2E {
 protected:
  void StartSim() {
    Apply();
    Sim(JoinToken("h100"), "al", 1, "H100-SXM5-80GB", 8);
    ASSERT_TRUE(WaitState("al-0000", "ready"));
  }
  int Inject(int gpu, const std::string& body) {
    return controller_
        ->Call("POST", "/api/v1/nodes/al-0000/gpus/" + std::to_string(gpu) + "/inject", body)
        .first;
  }
  int CreateChannel(const std::string& body) {
    auto [s, v] = controller_->Call("POST", "/api/v1/channels", body);
    EXPECT_EQ(s, 201) << v;
    return s;
  }
};

// GET on a plain HTTP server, without a token.
std::pair<int, json::value> Get(const std::string& addr, const std::string& target) {
  cli::HttpClient client(addr, "");
  auto r = client.Send("GET", target);
  if (!r.ok()) return {0, nullptr};
  boost::system::error_code ec;
  auto v = json::parse(r->body, ec);
  return {r->status, ec ? json::value(r->body) : v};
}

TEST_F(Alerting, AnXid79ReachesAlertmanagerWithItsLabelsAndALostGpuResolvesThere) {
  if (!std::filesystem::exists(kAlertmanager)) {
    GTEST_SKIP() << "needs Debian's prometheus-alertmanager (scripts/deps.sh --test installs it)";
  }
  // Alertmanager on a free loopback port, clustering off.
  unsigned short port;
  {
    PageServer probe("");
    port = probe.port();
  }
  std::string am = "127.0.0.1:" + std::to_string(port);
  std::ofstream(dir_ + "/am.yml") << "route: {receiver: default, group_wait: 1s}\n"
                                     "receivers: [{name: default}]\n";
  Process alertmanager(
      {kAlertmanager, "--config.file=" + dir_ + "/am.yml", "--storage.path=" + dir_ + "/am",
       "--web.listen-address=" + am, "--cluster.listen-address=", "--log.level=warn"},
      {}, dir_ + "/alertmanager.log");
  ASSERT_TRUE(WaitFor([&] { return Get(am, "/-/ready").first == 200; }, 15000))
      << ReadFile(dir_ + "/alertmanager.log");

  StartSim();
  CreateChannel(R"({"name": "am", "type": "alertmanager", "url": "http://)" + am + R"("})");
  auto channels = Cli({"channels", "list"});
  EXPECT_NE(channels.out.find("alertmanager"), std::string::npos) << channels.out;

  ASSERT_EQ(Inject(2, R"({"xid": 79})"), 202);
  auto find = [&](const std::string& alertname) -> json::value {
    auto [s, v] = Get(am, "/api/v2/alerts");
    if (s != 200 || !v.is_array()) return nullptr;
    for (const auto& a : v.as_array()) {
      if (a.at("labels").at("alertname").as_string() == alertname) return a;
    }
    return nullptr;
  };
  // The health cycle is 500 ms here and the rule has no `for`: well within 10 s.
  ASSERT_TRUE(WaitFor([&] { return !find("GpuXidCritical").is_null(); }, 10000))
      << ReadFile(dir_ + "/alertmanager.log");
  auto labels = find("GpuXidCritical").at("labels");
  EXPECT_EQ(labels.at("Hostname").as_string(), "al-0000");
  EXPECT_EQ(labels.at("gpu").as_string(), "2");
  EXPECT_EQ(labels.at("cluster").as_string(), "train");
  EXPECT_EQ(labels.at("severity").as_string(), "critical");
  std::string uuid(Node("al-0000").at("gpus").at(2).at("uuid").as_string());
  EXPECT_EQ(labels.at("UUID").as_string(), uuid);
  EXPECT_NE(std::string(find("GpuXidCritical").at("annotations").at("summary").as_string())
                .find("XID 79"),
            std::string::npos);
  auto listed = Cli({"alerts", "list", "--state", "firing"});
  EXPECT_NE(listed.out.find("GpuXidCritical"), std::string::npos) << listed.out;
  auto firing = controller_->Call("GET", "/api/v1/alerts?state=firing").second;
  std::string fp(firing.at("items").at(0).at("fingerprint").as_string());
  auto shown = Cli({"alerts", "show", fp});
  EXPECT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_NE(shown.out.find("  UUID: " + uuid), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("  action: reboot_node"), std::string::npos) << shown.out;
  EXPECT_EQ(Cli({"alerts", "show", "0000000000000000"}).exit_code, 1);
  EXPECT_NE(Cli({"rules", "list"}).out.find("GpuXidCritical"), std::string::npos);

  // A lost GPU fires GpuLost; clearing it resolves the alert in Alertmanager.
  ASSERT_EQ(Inject(6, R"({"lost": true})"), 202);
  ASSERT_TRUE(WaitFor([&] { return !find("GpuLost").is_null(); }, 10000));
  ASSERT_EQ(Inject(6, R"({"clear": true})"), 202);
  ASSERT_TRUE(WaitFor([&] { return find("GpuLost").is_null(); }, 15000)) << find("GpuLost");
  EXPECT_FALSE(find("GpuXidCritical").is_null());  // still firing: XID 79 holds for 24 h
  auto resolved = controller_->Call("GET", "/api/v1/alerts?state=resolved").second;
  ASSERT_EQ(resolved.at("items").as_array().size(), 1u) << resolved;
  EXPECT_EQ(resolved.at("items").at(0).at("alertname").as_string(), "GpuLost");
}

// A webhook that is down while an alert fires, through a controller restart, until after the
// alert resolved: when it comes back it receives each state change exactly once, signed.
TEST_F(Alerting, AWebhookThatWasDownGetsEveryStateChangeOnceAcrossARestart) {
  unsigned short port;
  {
    PageServer probe("");
    port = probe.port();  // free again once the probe closes: the receiver is down
  }
  StartSim();
  CreateChannel(R"({"name": "ops", "type": "webhook", "url": "http://127.0.0.1:)" +
                std::to_string(port) + R"(/hook", "secret": "s3cret"})");
  {  // Sealed at rest: neither the database nor its log holds the secret in clear.
    std::string db = ReadFile(controller_->data_dir() + "/gpufleet.db") +
                     ReadFile(controller_->data_dir() + "/gpufleet.db-wal");
    EXPECT_NE(db.find("enc:v1:"), std::string::npos);
    EXPECT_EQ(db.find("s3cret"), std::string::npos);
  }
  ASSERT_EQ(Inject(1, R"({"lost": true})"), 202);
  auto pending = [&] {
    auto v = controller_->Call("GET", "/api/v1/channels").second;
    return v.at("items").at(0).at("pending").as_int64();
  };
  ASSERT_TRUE(WaitFor([&] { return pending() >= 1; }, 10000));
  ASSERT_TRUE(WaitFor(
      [&] {
        auto v = controller_->Call("GET", "/api/v1/channels").second;
        return !v.at("items").at(0).at("last_error").as_string().empty();
      },
      10000));

  controller_->Stop();
  controller_->Start();
  ASSERT_TRUE(WaitFor([&] { return Node("al-0000").at("connected").as_bool(); }, 20000));
  ASSERT_EQ(Inject(1, R"({"clear": true})"), 202);
  ASSERT_TRUE(WaitFor([&] { return pending() >= 2; }, 15000));

  PageServer receiver("", port);
  ASSERT_TRUE(WaitFor([&] { return pending() == 0; }, 40000)) << pending();
  std::this_thread::sleep_for(std::chrono::seconds(2));  // nothing more arrives
  std::map<std::string, int> seen;
  auto heads = receiver.heads();
  auto bodies = receiver.bodies();
  ASSERT_EQ(heads.size(), bodies.size());
  for (size_t i = 0; i < bodies.size(); ++i) {
    const std::string& body = bodies[i];
    // Signed with the channel's secret: HMAC-SHA256 of the body.
    EXPECT_NE(heads[i].find("X-Gpufleet-Signature: sha256=" + HmacSha256Hex("s3cret", body)),
              std::string::npos)
        << heads[i];
    auto v = json::parse(body);
    EXPECT_EQ(v.at("version").as_string(), "4");
    for (const auto& a : v.at("alerts").as_array()) {
      ++seen[std::string(a.at("labels").at("alertname").as_string()) + "/" +
             std::string(a.at("status").as_string())];
    }
  }
  std::string metrics(controller_->Call("GET", "/metrics").second.as_string());
  EXPECT_NE(metrics.find("gpufleet_notifications_pending{channel=\"ops\"} 0\n"), std::string::npos);
  EXPECT_NE(metrics.find("gpufleet_alerts{state=\"resolved\"} 1\n"), std::string::npos);
  EXPECT_EQ(seen["GpuLost/firing"], 1);
  EXPECT_EQ(seen["GpuLost/resolved"], 1);
  for (const auto& [k, n] : seen) EXPECT_EQ(n, 1) << k;
}

// A silence made with the CLI mutes the alerts it matches, and only those.
TEST_F(Alerting, ASilenceMutesTheAlertsItMatches) {
  PageServer receiver("");
  StartSim();
  CreateChannel(R"({"name": "ops", "type": "webhook", "url": "http://127.0.0.1:)" +
                std::to_string(receiver.port()) + R"(/hook"})");
  auto made = Cli({"silences", "create", "--match", "alertname=GpuLost", "--match",
                   "Hostname=~al-.*", "--duration", "1h", "--comment", "replacing the riser"});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  std::string id = made.out.substr(0, made.out.find(' '));
  auto listed = Cli({"silences", "list"});
  EXPECT_NE(listed.out.find("alertname=GpuLost,Hostname=~al-.*"), std::string::npos) << listed.out;
  EXPECT_NE(listed.out.find("active"), std::string::npos);

  ASSERT_EQ(Inject(4, R"({"lost": true})"), 202);
  auto alert = [&](const std::string& name) -> json::value {
    auto v = controller_->Call("GET", "/api/v1/alerts?state=firing").second;
    for (const auto& a : v.at("items").as_array()) {
      if (a.at("alertname").as_string() == name) return a;
    }
    return nullptr;
  };
  ASSERT_TRUE(WaitFor([&] { return !alert("GpuLost").is_null(); }, 10000));
  EXPECT_EQ(alert("GpuLost").at("silenced_by").at(0).as_string(), id);
  // Not silenced: an XID on another GPU goes out.
  ASSERT_EQ(Inject(0, R"({"xid": 79})"), 202);
  ASSERT_TRUE(WaitFor([&] { return receiver.bodies().size() >= 1; }, 10000));
  std::this_thread::sleep_for(std::chrono::seconds(1));
  auto bodies = receiver.bodies();
  ASSERT_EQ(bodies.size(), 1u);
  EXPECT_NE(bodies[0].find("GpuXidCritical"), std::string::npos);
  EXPECT_EQ(bodies[0].find("GpuLost"), std::string::npos);

  EXPECT_EQ(Cli({"silences", "expire", id}).exit_code, 0);
  EXPECT_NE(Cli({"silences", "list"}).out.find("expired"), std::string::npos);
  EXPECT_EQ(Cli({"silences", "expire", "sil-none"}).exit_code, 1);
  auto bad = Cli({"silences", "create", "--match", "nolabel", "--comment", "x"});
  EXPECT_EQ(bad.exit_code, 2);
  auto [s, v] = controller_->Call("POST", "/api/v1/silences",
                                  R"({"matchers": [{"name": "a", "value": "b"}]})");
  EXPECT_EQ(s, 400);
  EXPECT_NE(JsonText(v).find("comment"), std::string::npos);
}

// A user rule file through `gpufleet apply`: its expression rules fire on the simulator's data
// and on an injected XID, with the file's labels and rendered annotations; a channel's route
// gets only the alerts it matches; `rules test` shows what a rule would do without activating
// it; a bad file changes nothing; deleting a rule resolves its alerts.
TEST_F(Alerting, UserRulesFireOnLiveDataAndRoutesChooseTheChannel) {
  PageServer critical(""), everything("");
  StartSim();
  CreateChannel(R"({"name": "pager", "type": "webhook", "url": "http://127.0.0.1:)" +
                std::to_string(critical.port()) +
                R"(/hook", "matchers": [{"name": "severity", "value": "critical"}]})");
  CreateChannel(R"({"name": "all", "type": "webhook", "url": "http://127.0.0.1:)" +
                std::to_string(everything.port()) + R"(/hook"})");
  auto applied = ApplyText("rules.yaml", R"(groups:
  - name: gpu
    rules:
      - alert: GpuZeroIsWarm
        expr: gpu_temp{gpu="0"} > 0
        labels: {severity: info, team: infra}
        annotations:
          summary: "{{ $labels.Hostname }} GPU {{ $labels.gpu }} at {{ $value }} C"
      - alert: GpuXid79Seen
        expr: count_over_time(xid_events{xid="79"}[10m]) > 0
        labels: {severity: critical}
)");
  ASSERT_EQ(applied.exit_code, 0) << applied.err;
  EXPECT_NE(applied.out.find("rules: 2 created"), std::string::npos) << applied.out;

  auto firing = [&](const std::string& name) -> json::value {
    auto v = controller_->Call("GET", "/api/v1/alerts?state=firing").second;
    for (const auto& a : v.at("items").as_array()) {
      if (a.at("alertname").as_string() == name) return a;
    }
    return nullptr;
  };
  ASSERT_TRUE(WaitFor([&] { return !firing("GpuZeroIsWarm").is_null(); }, 10000));
  auto warm = firing("GpuZeroIsWarm");
  EXPECT_EQ(warm.at("labels").at("team").as_string(), "infra");
  EXPECT_EQ(warm.at("labels").at("severity").as_string(), "info");
  EXPECT_EQ(std::string(warm.at("labels").at("UUID").as_string()).substr(0, 4), "GPU-");
  std::string summary(warm.at("annotations").at("summary").as_string());
  EXPECT_EQ(summary.rfind("al-0000 GPU 0 at ", 0), 0u) << summary;

  ASSERT_EQ(Inject(3, R"({"xid": 79})"), 202);
  ASSERT_TRUE(WaitFor([&] { return !firing("GpuXid79Seen").is_null(); }, 10000));
  EXPECT_EQ(firing("GpuXid79Seen").at("labels").at("gpu").as_string(), "3");
  ASSERT_TRUE(WaitFor([&] { return critical.bodies().size() >= 2; }, 10000));
  ASSERT_TRUE(WaitFor([&] { return everything.bodies().size() >= 3; }, 10000));
  std::this_thread::sleep_for(std::chrono::seconds(1));
  std::string paged, all;
  for (const auto& b : critical.bodies()) paged += b;
  for (const auto& b : everything.bodies()) all += b;
  EXPECT_NE(paged.find("GpuXid79Seen"), std::string::npos);
  EXPECT_NE(paged.find("GpuXidCritical"), std::string::npos);
  EXPECT_EQ(paged.find("GpuZeroIsWarm"), std::string::npos);  // info: not routed to the pager
  EXPECT_NE(all.find("GpuZeroIsWarm"), std::string::npos);
  EXPECT_NE(all.find("GpuXid79Seen"), std::string::npos);

  // rules test: what an expression gives now, activating nothing.
  auto tested = Cli({"rules", "test", "--expr", "gpu_temp{gpu=~\"[0-3]\"} > 0"});
  ASSERT_EQ(tested.exit_code, 0) << tested.err;
  EXPECT_NE(tested.out.find("Test: 4 series"), std::string::npos) << tested.out;
  EXPECT_TRUE(firing("Test").is_null());
  auto listed = Cli({"rules", "list"});
  EXPECT_NE(listed.out.find("GpuXid79Seen"), std::string::npos);
  EXPECT_NE(listed.out.find("1 series"), std::string::npos) << listed.out;

  // A bad file: a one-line error naming the line and the field, and nothing changes.
  auto bad = ApplyText("bad.yaml",
                       "groups:\n  - name: gpu\n    rules:\n      - alert: X\n"
                       "        expr: avg_over_time(gpu_temp) > 1\n");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("bad.yaml:5: groups[0].rules[0].expr: at 15: avg_over_time() needs a "
                         "range"),
            std::string::npos)
      << bad.err;
  EXPECT_NE(Cli({"rules", "list"}).out.find("GpuZeroIsWarm"), std::string::npos);
  auto [s, v] = controller_->Call("POST", "/api/v1/alert-rules",
                                  R"({"alert": "Y", "expr": "node_up[5m] == 0"})");
  EXPECT_EQ(s, 400);
  EXPECT_NE(JsonText(v).find("has no history"), std::string::npos) << v;

  // Deleting a rule resolves its alerts.
  EXPECT_EQ(Cli({"rules", "delete", "GpuZeroIsWarm"}).exit_code, 0);
  ASSERT_TRUE(WaitFor([&] { return firing("GpuZeroIsWarm").is_null(); }, 10000));
  EXPECT_EQ(Cli({"rules", "delete", "GpuZeroIsWarm"}).exit_code, 1);

  // The shipped example applies; its group `gpu` replaces this test's, whose remaining rule
  // goes.
  auto example = Cli({"apply", "-f", std::string(GPUFLEET_SOURCE_DIR) + "/examples/rules.yaml"});
  EXPECT_EQ(example.exit_code, 0) << example.err;
  EXPECT_NE(example.out.find("rules: 6 created, 0 updated, 0 unchanged, 1 deleted"),
            std::string::npos)
      << example.out;
  EXPECT_EQ(Cli({"rules", "list"}).out.find("GpuXid79Seen"), std::string::npos);
}

TEST_F(Alerting, BadChannelsAreRefusedWithTheReason) {
  auto bad = [&](const std::string& body, const std::string& says) {
    auto [s, v] = controller_->Call("POST", "/api/v1/channels", body);
    EXPECT_EQ(s, 400) << body;
    EXPECT_NE(JsonText(v).find(says), std::string::npos) << JsonText(v);
  };
  bad(R"({"name": "x", "type": "pager", "url": "http://a"})", "'type' must be");
  bad(R"({"name": "x", "type": "webhook", "url": "ftp://a"})", "scheme 'ftp'");
  bad(R"({"name": "X Y", "type": "webhook", "url": "http://a"})", "'name' must be");
  bad(R"({"name": "x", "type": "webhook", "url": "http://a", "colour": 1})", "unknown field");
  bad(R"({"type": "webhook", "url": "http://a"})", "name");
  // No scheme, or a URL past 2 KiB: refused, not taken.
  bad(R"({"name": "x", "type": "webhook", "url": ")" + std::string(70'000, 'A') + R"("})",
      "'url' must start with http:// or https:// and be at most 2048 bytes");
  bad(R"({"name": "x", "type": "webhook", "url": "http://a/)" + std::string(3000, 'a') + R"("})",
      "at most 2048 bytes");
  EXPECT_EQ(controller_->Call("GET", "/api/v1/channels").second.at("items").as_array().size(), 0u);
  EXPECT_EQ(controller_->Call("DELETE", "/api/v1/channels/none").first, 404);
  EXPECT_EQ(controller_->Call("GET", "/api/v1/alerts?state=sleeping").first, 400);
}

}  // namespace
}  // namespace gpufleet::e2e
