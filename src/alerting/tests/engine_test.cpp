#include "alerting/engine.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace gpufleet::alerting {
namespace {

constexpr int64_t kMin = 60'000;

Rule HealthRule(const std::string& name, const std::string& check, int64_t for_ms,
                int64_t keep_ms) {
  Rule r;
  r.name = name;
  r.check = check;
  r.level = "failed";
  r.severity = "critical";
  r.for_ms = for_ms;
  r.keep_firing_for_ms = keep_ms;
  r.annotations = {{"summary", "{{ $value }}"}};
  return r;
}

Signal Hot(const std::string& gpu = "0") {
  return {"Hot", {{"Hostname", "n1"}, {"gpu", gpu}}, "97 C", "check_hardware"};
}

// The example Prometheus documents and promtool confirms for `for: 2m, keep_firing_for: 5m`
// over a condition that holds for the first 5 minutes, evaluated every minute: not firing at
// 1m, firing at 3m, still firing at 9m, gone at 12m.
TEST(Engine, ForAndKeepFiringForAsPrometheus) {
  Engine engine({HealthRule("Hot", "temperature", 2 * kMin, 5 * kMin)});
  std::map<int, std::string> state;
  std::vector<std::pair<int, std::string>> changes;
  for (int m = 0; m <= 13; ++m) {
    std::vector<Signal> signals;
    if (m <= 5) signals.push_back(Hot());
    for (const auto& a : engine.Evaluate(m * kMin, signals)) {
      changes.push_back({m, std::string(ToString(a.state))});
    }
    auto alerts = engine.Alerts();
    state[m] = alerts.empty() ? "inactive" : std::string(ToString(alerts[0].state));
  }
  EXPECT_EQ(state[0], "pending");
  EXPECT_EQ(state[1], "pending");
  EXPECT_EQ(state[2], "firing");
  EXPECT_EQ(state[3], "firing");
  EXPECT_EQ(state[9], "firing");
  EXPECT_EQ(state[11], "resolved");
  EXPECT_EQ(state[12], "resolved");
  // Exactly two notifications: firing once, resolved once.
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0], std::make_pair(2, std::string("firing")));
  EXPECT_EQ(changes[1], std::make_pair(11, std::string("resolved")));
}

TEST(Engine, PendingThatClearsIsNeverNotifiedAndWithoutForFiresAtOnce) {
  Engine engine({HealthRule("Hot", "temperature", 2 * kMin, 0), HealthRule("Now", "xid", 0, 0)});
  EXPECT_TRUE(engine.Evaluate(0, {Hot()}).empty());
  EXPECT_TRUE(engine.Evaluate(kMin, {}).empty());
  EXPECT_TRUE(engine.Alerts().empty());
  auto fired = engine.Evaluate(2 * kMin, {{"Now", {{"gpu", "1"}}, "XID 79", "reboot_node"}});
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(fired[0].state, State::kFiring);
  EXPECT_EQ(fired[0].labels.at("alertname"), "Now");
  EXPECT_EQ(fired[0].labels.at("severity"), "critical");
  auto resolved = engine.Evaluate(3 * kMin, {});
  ASSERT_EQ(resolved.size(), 1u);
  EXPECT_EQ(resolved[0].state, State::kResolved);
  // It fires again, as a new alert, when the condition comes back.
  auto again = engine.Evaluate(4 * kMin, {{"Now", {{"gpu", "1"}}, "XID 79", "reboot_node"}});
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].fired_ms, 4 * kMin);
}

TEST(Engine, EachLabelSetIsItsOwnAlertAndRestoreKeepsState) {
  Engine engine({HealthRule("Hot", "temperature", 0, 0)});
  EXPECT_EQ(engine.Evaluate(0, {Hot("0"), Hot("1")}).size(), 2u);
  EXPECT_EQ(engine.Evaluate(kMin, {Hot("0"), Hot("1")}).size(), 0u);  // already firing
  Engine restarted({HealthRule("Hot", "temperature", 0, 0)});
  restarted.Restore(engine.Alerts());
  EXPECT_EQ(restarted.Evaluate(2 * kMin, {Hot("0"), Hot("1")}).size(), 0u);  // nothing twice
  EXPECT_EQ(restarted.Evaluate(3 * kMin, {Hot("0")}).size(), 1u);            // GPU 1 resolved
}

TEST(Engine, AlertsReadFiringFirstThenBySeverityThenLongestActive) {
  auto alert = [](std::string fp, State state, std::string severity, int64_t since,
                  int64_t resolved = 0) {
    Alert a;
    a.fingerprint = std::move(fp);
    a.state = state;
    if (!severity.empty()) a.labels["severity"] = severity;
    a.active_since_ms = since;
    a.resolved_ms = resolved;
    return a;
  };
  // As an evaluation might list them: drift first, the XID last.
  std::vector<Alert> alerts = {
      alert("pending-warning", State::kPending, "warning", 100),
      alert("resolved-old", State::kResolved, "warning", 10, 200),
      alert("firing-warning", State::kFiring, "warning", 50),
      alert("resolved-new", State::kResolved, "warning", 10, 300),
      alert("firing-info", State::kFiring, "info", 10),
      alert("firing-critical-new", State::kFiring, "critical", 400),
      alert("firing-none", State::kFiring, "", 1),
      alert("firing-critical-old", State::kFiring, "critical", 300),
      alert("pending-critical", State::kPending, "critical", 500),
  };
  std::sort(alerts.begin(), alerts.end(), ReadBefore);
  std::vector<std::string> order;
  for (const auto& a : alerts) order.push_back(a.fingerprint);
  EXPECT_EQ(order, (std::vector<std::string>{"firing-critical-old", "firing-critical-new",
                                             "firing-warning", "firing-info", "firing-none",
                                             "pending-critical", "pending-warning", "resolved-new",
                                             "resolved-old"}));
}

TEST(Render, LabelsValueAndUnknowns) {
  Labels l{{"Hostname", "dgx-7"}, {"gpu", "3"}};
  EXPECT_EQ(Render("{{ $labels.Hostname }} GPU {{$labels.gpu}}: {{ $value }}", l, "XID 79"),
            "dgx-7 GPU 3: XID 79");
  EXPECT_EQ(Render("[{{ $labels.nope }}]", l, ""), "[]");
  EXPECT_EQ(Render("{{ weird }} {{ unclosed", l, ""), "{{ weird }} {{ unclosed");
}

TEST(Signals, HealthReasonsBecomeSignalsWithGpuLabels) {
  health::NodeHealth n;
  n.node = "dgx-7";
  n.cluster = "train";
  n.pool = "h100";
  n.gpus.push_back(
      {3,
       "GPU-abc",
       "",
       health::Level::kFailed,
       {{"xid", health::Level::kFailed, "XID 79 GPU_HAS_FALLEN_OFF_THE_BUS", "reboot_node"}}});
  n.gpus.push_back({4,
                    "GPU-def",
                    "",
                    health::Level::kWarning,
                    {{"throttle", health::Level::kWarning, "HW slowdown", "check_hardware"}}});
  n.reasons.push_back("unreachable: no heartbeat for 40s");
  n.reachable = false;
  auto signals = Signals({n}, BuiltinRules());
  std::map<std::string, Signal> by_rule;
  for (const auto& s : signals) by_rule[s.rule] = s;
  ASSERT_TRUE(by_rule.count("GpuXidCritical"));
  EXPECT_EQ(by_rule["GpuXidCritical"].labels.at("UUID"), "GPU-abc");
  EXPECT_EQ(by_rule["GpuXidCritical"].labels.at("gpu"), "3");
  EXPECT_EQ(by_rule["GpuXidCritical"].labels.at("cluster"), "train");
  EXPECT_EQ(by_rule["GpuXidCritical"].action, "reboot_node");
  EXPECT_TRUE(by_rule.count("GpuThrottled"));
  EXPECT_TRUE(by_rule.count("NodeUnreachable"));
  EXPECT_FALSE(by_rule.count("GpuXidWarning"));
}

}  // namespace
}  // namespace gpufleet::alerting
