// Rule expressions: parsing and checking, and evaluation over a small fleet whose series an
// in-memory reader serves (the reader over the real telemetry store is exercised by the
// alerting end-to-end test).

#include "alerting/expr.h"

#include <gtest/gtest.h>

#include "alerting/eval.h"
#include "alerting/rules.h"

namespace gpufleet::alerting {
namespace {

constexpr int64_t kNow = 1'800'000'000'000;
constexpr int64_t kMin = 60'000;

std::string ParseError(const std::string& text) {
  auto e = ParseExpr(text);
  return e.ok() ? "(parsed)" : e.error().message;
}

TEST(Expr, ErrorsNameThePositionAndTheReason) {
  EXPECT_EQ(ParseError("gpu_tmp > 80"),
            "expr: at 1: unknown metric 'gpu_tmp' (see `gpufleet rules metrics` for the names)");
  EXPECT_EQ(ParseError("avg_ovr_time(gpu_temp[5m]) > 1"),
            "expr: at 1: unknown function 'avg_ovr_time'");
  EXPECT_EQ(ParseError("avg_over_time(gpu_temp) > 1"),
            "expr: at 15: avg_over_time() needs a range, e.g. avg_over_time(gpu_temp[5m])");
  EXPECT_EQ(ParseError("node_up[5m] == 0"),
            "expr: at 8: 'node_up' has no history: it has no range");
  EXPECT_EQ(
      ParseError("avg by (rack) (gpu_temp)"),
      "expr: at 9: 'rack' is not a label to group by: Hostname (or node), UUID, cluster, gpu, "
      "modelName, pool, team");
  EXPECT_EQ(ParseError("gpu_temp{pool=~\"(\"} > 1"),
            "expr: at 10: '(': not a regular expression RE2 accepts: missing ): (");
  // An expression (and so its patterns) is bounded before it is parsed.
  EXPECT_EQ(ParseError("gpu_temp{pool=~\"" + std::string(5000, 'a') + "\"} > 1"),
            "expr: longer than 4096 characters");
  EXPECT_EQ(ParseError("node_up{gpu=\"0\"}"),
            "expr: at 9: 'node_up' has no label 'gpu' (it has Hostname, cluster, pool, team)");
  EXPECT_EQ(ParseError("1 > 2"), "expr: at 3: a comparison of two numbers: compare a series");
  EXPECT_EQ(ParseError("2 * 3"),
            "expr: at 1: the expression gives a number, not a series: an alert needs a series");
  EXPECT_EQ(ParseError("gpu_temp > "), "expr: at 12: the expression ends too early");
  EXPECT_EQ(ParseError("gpu_temp{pool=\"a} > 1"), "expr: at 15: a string is not closed");
  EXPECT_EQ(ParseError("(gpu_temp > 1"), "expr: at 14: expected ')' at the end");
  EXPECT_EQ(ParseError("rate(xid_events[5m]) > 0"),
            "expr: at 6: xid_events are events: count them with count_over_time()");
  EXPECT_EQ(ParseError("gpu_temp[25h]"),
            "expr: at 10: a range is at most 24h (the raw tier's retention)");
  EXPECT_EQ(ParseError("gpu_temp > bool 1"), "(parsed)") << "PromQL's: 0 or 1 for every GPU";
  EXPECT_EQ(ParseError("gpu_temp # 1"), "expr: at 10: unexpected character '#'");
  EXPECT_EQ(ParseError(std::string(5000, 'a')), "expr: longer than 4096 characters");
}

TEST(Expr, EqualExpressionsShareTheirKeyAndNumbersFold) {
  auto a = ParseExpr("gpu_temp{pool=\"a\", cluster=\"b\"} > 80");
  auto b = ParseExpr("gpu_temp{cluster='b',pool='a'}>(40*2)");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a.value()->key, b.value()->key);
  auto c = ParseExpr("avg by (node, pool) (gpu_util)");
  auto d = ParseExpr("avg(gpu_util) by (pool, Hostname)");
  ASSERT_TRUE(c.ok() && d.ok());
  EXPECT_EQ(c.value()->key, d.value()->key);
  // Folding stays finite, so that every key parses again (the fuzzer's 7/0 once gave "inf").
  for (const char* bad : {"gpu_util > 7/0", "gpu_util > 0/0", "gpu_util > 1e308*10"}) {
    auto e = ParseExpr(bad);
    ASSERT_FALSE(e.ok()) << bad << " -> " << e.value()->key;
    EXPECT_NE(e.error().message.find("no finite number"), std::string::npos) << e.error().message;
  }
}

// Two nodes in two pools, two GPUs each.
Snapshot Fleet() {
  Snapshot s;
  s.now_ms = kNow;
  s.clusters = {"train"};
  s.pools = {"a", "b"};
  s.models = {"h100"};
  s.nodes = {{"n1", 0, 0, true, 0, false, kNow - 1000},
             {"n2", 0, 1, false, 2, true, kNow - 45'000}};
  s.gpus = {{0, "0", "GPU-10", 0, 0},
            {0, "1", "GPU-11", 0, 1},
            {1, "0", "GPU-20", 0, 2},
            {1, "1", "GPU-21", 0, 0}};
  s.xids[2] = {{kNow - 2 * kMin, 79, "critical", "reboot_node"},
               {kNow - 20 * kMin, 79, "critical", "reboot_node"},
               {kNow - kMin, 13, "warning", "restart_application"}};
  s.api_p99_s = 0.25;
  return s;
}

class MemoryReader : public SeriesReader {
 public:
  std::map<std::pair<std::string, Field>, std::vector<tsdb::Sample>> series;
  void Add(const std::string& uuid, Field f, std::vector<tsdb::Sample> samples) {
    series[{uuid, f}] = std::move(samples);
  }
  void Latest(const Snapshot& snap, Field field, int64_t since_ms,
              std::vector<double>& out) override {
    ++latest_calls;
    out.assign(snap.gpus.size(), NAN);
    for (size_t i = 0; i < snap.gpus.size(); ++i) {
      auto it = series.find({snap.gpus[i].uuid, field});
      if (it != series.end() && !it->second.empty() && it->second.back().t >= since_ms) {
        out[i] = it->second.back().v;
      }
    }
  }
  void Window(const Snapshot& snap, size_t row, Field field, int64_t start_ms, int64_t end_ms,
              std::vector<tsdb::Sample>& out) override {
    out.clear();
    auto it = series.find({snap.gpus[row].uuid, field});
    if (it == series.end()) return;
    for (const auto& s : it->second) {
      if (s.t >= start_ms && s.t <= end_ms) out.push_back(s);
    }
  }
  int latest_calls = 0;
};

MemoryReader Data() {
  MemoryReader r;
  r.Add("GPU-10", Field::kGpuTemp, {{kNow - 3 * kMin, 91}, {kNow - 1000, 70}});
  r.Add("GPU-11", Field::kGpuTemp, {{kNow - 1000, 85}});
  r.Add("GPU-20", Field::kGpuTemp, {{kNow - 10 * kMin, 99}});  // stale: older than 5 minutes
  r.Add("GPU-21", Field::kGpuTemp, {{kNow - 1000, 60}});
  r.Add("GPU-10", Field::kPowerUsage, {{kNow - 1000, 350'000}});
  r.Add("GPU-11", Field::kPowerUsage, {{kNow - 1000, 250'000}});
  r.Add("GPU-10", Field::kFbUsed, {{kNow - 1000, 79'000}});
  r.Add("GPU-10", Field::kFbFree, {{kNow - 1000, 1'000}});
  r.Add("GPU-11", Field::kFbUsed, {{kNow - 1000, 10'000}});
  r.Add("GPU-11", Field::kFbFree, {{kNow - 1000, 70'000}});
  // A counter that resets (driver reload) in the window: 5 -> 8, reset, 0 -> 4.
  r.Add("GPU-10", Field::kEccSbeVolatile,
        {{kNow - 12 * kMin, 1},
         {kNow - 8 * kMin, 5},
         {kNow - 6 * kMin, 8},
         {kNow - 4 * kMin, 2},
         {kNow - 2 * kMin, 4}});
  return r;
}

// "label=value,..." of each output sample, with its value: compact to compare.
std::map<std::string, double> Results(const std::string& text, const Snapshot& snap,
                                      SeriesReader& reader) {
  auto expr = ParseExpr(text);
  EXPECT_TRUE(expr.ok()) << text << ": " << (expr.ok() ? "" : expr.error().message);
  if (!expr.ok()) return {};
  Evaluator ev(snap, reader);
  auto out = ev.Run(*expr.value());
  EXPECT_TRUE(out.ok()) << text << ": " << (out.ok() ? "" : out.error().message);
  std::map<std::string, double> m;
  for (const auto& s : out.value()) {
    std::string k;
    for (const auto& [name, v] : s.labels) {
      if (name == "Hostname" || name == "gpu" || name == "pool" || name == "cluster") {
        k += (k.empty() ? "" : ",") + name + "=" + v;
      }
    }
    m[k] = s.value;
  }
  return m;
}

TEST(Eval, ComparisonsKeepTheMatchingGpusWithTheirLabelsAndStaleSamplesAreAbsent) {
  auto snap = Fleet();
  auto reader = Data();
  auto hot = Results("gpu_temp > 65", snap, reader);
  EXPECT_EQ(hot, (std::map<std::string, double>{{"Hostname=n1,cluster=train,gpu=0,pool=a", 70},
                                                {"Hostname=n1,cluster=train,gpu=1,pool=a", 85}}));
  auto expr = ParseExpr("gpu_temp > 80");
  Evaluator ev(snap, reader);
  auto out = ev.Run(*expr.value());
  ASSERT_TRUE(out.ok());
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ(out->at(0).labels.at("UUID"), "GPU-11");
  EXPECT_EQ(out->at(0).labels.at("modelName"), "h100");
  // Number on the left: the series' value is kept, as in PromQL.
  EXPECT_EQ(Results("80 < gpu_temp", snap, reader).begin()->second, 85);
}

TEST(Eval, DcgmNamesUseDcgmUnitsAndMatchersSelect) {
  auto snap = Fleet();
  auto reader = Data();
  EXPECT_EQ(Results("DCGM_FI_DEV_POWER_USAGE > 300", snap, reader),
            (std::map<std::string, double>{{"Hostname=n1,cluster=train,gpu=0,pool=a", 350}}));
  EXPECT_EQ(Results("gpu_temp{gpu!=\"0\", pool=~\"a|b\"}", snap, reader).size(), 2u);
  EXPECT_EQ(Results("gpu_temp{node=\"n2\"}", snap, reader).size(), 1u);  // GPU-20's is stale
}

TEST(Eval, ArithmeticAggregationAndWindows) {
  auto snap = Fleet();
  auto reader = Data();
  auto share = Results("fb_used / (fb_used + fb_free) > 0.9", snap, reader);
  ASSERT_EQ(share.size(), 1u);
  EXPECT_NEAR(share.begin()->second, 79.0 / 80.0, 1e-12);
  EXPECT_EQ(Results("avg by (pool) (gpu_temp)", snap, reader),
            (std::map<std::string, double>{{"pool=a", 77.5}, {"pool=b", 60}}));
  EXPECT_EQ(Results("max by (node) (gpu_temp) - min by (node) (gpu_temp) > 10", snap, reader),
            (std::map<std::string, double>{{"Hostname=n1", 15}}));
  EXPECT_EQ(Results("count(gpu_temp)", snap, reader), (std::map<std::string, double>{{"", 3}}));
  EXPECT_EQ(Results("max_over_time(gpu_temp{gpu=\"0\"}[5m])", snap, reader),
            (std::map<std::string, double>{{"Hostname=n1,cluster=train,gpu=0,pool=a", 91}}));
  EXPECT_EQ(
      Results("avg_over_time(gpu_temp{node=\"n1\",gpu=\"0\"}[5m])", snap, reader).begin()->second,
      80.5);
  // Increase counts across the reset: (5-1)+(8-5)+2+(4-2) = 11 over 12 minutes and 1 s.
  EXPECT_EQ(Results("increase(ecc_sbe_volatile[13m])", snap, reader).begin()->second, 11);
  EXPECT_EQ(Results("increase(ecc_sbe_volatile[7m])", snap, reader).begin()->second, 4);  // 8, 2, 4
  EXPECT_NEAR(Results("rate(ecc_sbe_volatile[13m])", snap, reader).begin()->second, 11.0 / 780,
              1e-12);
  EXPECT_EQ(Results("delta(gpu_temp[5m])", snap, reader).begin()->second, -21);
  EXPECT_EQ(Results("count_over_time(gpu_temp[5m]) > 1", snap, reader).size(), 1u);
}

TEST(Eval, HealthNodesEventsAndTheController) {
  auto snap = Fleet();
  auto reader = Data();
  EXPECT_EQ(Results("gpu_health == 2", snap, reader).size(), 1u);
  // n2 is down and cordoned: its GPUs are not available, whatever their health.
  EXPECT_EQ(
      Results("sum by (cluster, pool) (gpu_available)", snap, reader),
      (std::map<std::string, double>{{"cluster=train,pool=a", 1}, {"cluster=train,pool=b", 0}}));
  EXPECT_EQ(Results("sum by (cluster, pool) (gpu_available) == 0", snap, reader).size(), 1u);
  EXPECT_EQ(Results("avg by (pool) (gpu_healthy) < 0.9", snap, reader),
            (std::map<std::string, double>{{"pool=a", 0.5}, {"pool=b", 0.5}}));
  EXPECT_EQ(Results("node_up == 0", snap, reader),
            (std::map<std::string, double>{{"Hostname=n2,cluster=train,pool=b", 0}}));
  EXPECT_EQ(Results("node_report_age_seconds > 10", snap, reader).begin()->second, 45);
  EXPECT_EQ(Results("node_report_age_seconds > 10 and node_up == 1", snap, reader).size(), 0u);
  EXPECT_EQ(Results("node_cordoned unless node_up == 0", snap, reader).size(), 1u);  // n1's 0
  // The drift service contributes it by name.
  AlertInputs inputs;
  ASSERT_TRUE(inputs
                  .AddNode("node_drift_severity",
                           [&] {
                             return std::map<std::string, double>{{snap.nodes[1].name, 3}};
                           })
                  .ok());
  EXPECT_FALSE(inputs.AddNode("node_drift_severity", nullptr).ok()) << "taken";
  EXPECT_FALSE(inputs.AddNode("gpu_temp", nullptr).ok()) << "not a contributed input";
  EXPECT_FALSE(inputs.AddController("node_cve_max_cvss", nullptr).ok()) << "a node input";
  inputs.Fill(snap);
  EXPECT_EQ(Results("node_drift_severity >= 3", snap, reader),
            (std::map<std::string, double>{{"Hostname=n2,cluster=train,pool=b", 3}}));
  EXPECT_EQ(Results("node_drift_severity", snap, reader).size(), 2u);  // n1's 0 too
  EXPECT_EQ(Results("count_over_time(xid_events{xid=\"79\"}[10m])", snap, reader),
            (std::map<std::string, double>{{"Hostname=n2,cluster=train,gpu=0,pool=b", 1}}));
  EXPECT_EQ(Results("count_over_time(xid_events{xid=\"79\"}[1h])", snap, reader).begin()->second,
            2);
  EXPECT_EQ(Results("count_over_time(xid_events{action=~\"reboot_node|restart_application\"}[10m])",
                    snap, reader)
                .begin()
                ->second,
            2);
  EXPECT_EQ(Results("count_over_time(xid_events{pool=\"a\"}[1h])", snap, reader).size(), 0u);
  EXPECT_EQ(Results("api_request_duration_p99_seconds > 0.1", snap, reader),
            (std::map<std::string, double>{{"", 0.25}}));
  // Series from different spaces match on their labels: per node, GPUs hotter than 80 on
  // nodes that are up.
  EXPECT_EQ(
      Results("max by (Hostname, cluster, pool) (gpu_temp) > 80 and node_up == 1", snap, reader),
      (std::map<std::string, double>{{"Hostname=n1,cluster=train,pool=a", 85}}));
}

TEST(Eval, EachFieldIsReadOncePerEvaluator) {
  auto snap = Fleet();
  auto reader = Data();
  Evaluator ev(snap, reader);
  for (const char* text : {"gpu_temp > 80", "gpu_temp > 90", "avg by (pool) (gpu_temp) > 1",
                           "gpu_temp{pool=\"a\"} > 50"}) {
    auto e = ParseExpr(text);
    ASSERT_TRUE(e.ok());
    ASSERT_TRUE(ev.Run(*e.value()).ok());
  }
  EXPECT_EQ(reader.latest_calls, 1);
}

TEST(Eval, OrAcrossDifferentLabelsIsAnErrorAtEvaluation) {
  auto snap = Fleet();
  auto reader = Data();
  auto e = ParseExpr("node_up == 0 or gpu_health == 2");
  ASSERT_TRUE(e.ok());
  Evaluator ev(snap, reader);
  auto out = ev.Run(*e.value());
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().message,
            "expr: both sides of 'or' must have the same labels: group them alike");
}

// An expression rule through the engine: `for` counts from the first evaluation at which the
// expression gave the series; labels and annotations are the rule's, rendered.
TEST(ExprRules, PendingThenFiringWithRenderedAnnotations) {
  Rule rule;
  rule.name = "GpuHot";
  rule.group = "test";
  rule.expr = "gpu_temp > 80";
  rule.for_ms = 2 * kMin;
  rule.labels = {{"severity", "critical"}, {"team", "infra"}};
  rule.annotations = {{"summary", "{{ $labels.Hostname }}/{{ $labels.gpu }} at {{ $value }} C"}};
  ASSERT_TRUE(CheckRule(rule).ok());
  EXPECT_EQ(rule.severity, "critical");
  Engine engine({rule});
  auto reader = Data();
  std::vector<std::string> states;
  for (int m = 0; m <= 3; ++m) {
    auto snap = Fleet();
    snap.now_ms = kNow + m * kMin;
    // The GPU keeps reporting 85 C.
    reader.Add("GPU-11", Field::kGpuTemp, {{snap.now_ms - 1000, 85}});
    Evaluator ev(snap, reader);
    std::map<std::string, RuleRun> runs;
    auto changed = engine.Evaluate(snap.now_ms, ExprSignals(engine.rules(), ev, &runs));
    EXPECT_EQ(runs["GpuHot"].series, 1u);
    EXPECT_TRUE(runs["GpuHot"].error.empty());
    states.push_back(std::string(ToString(engine.Alerts().at(0).state)) +
                     (changed.empty() ? "" : "*"));
  }
  EXPECT_EQ(states, (std::vector<std::string>{"pending", "pending", "firing*", "firing"}));
  auto a = engine.Alerts().at(0);
  EXPECT_EQ(a.labels.at("team"), "infra");
  EXPECT_EQ(a.labels.at("severity"), "critical");
  EXPECT_EQ(a.labels.at("alertname"), "GpuHot");
  EXPECT_EQ(a.annotations.at("summary"), "n1/1 at 85 C");
  EXPECT_FALSE(a.annotations.count("action"));
}

TEST(RuleFile, ParsesPrometheusFormat) {
  auto file = ParseRuleFile(R"(groups:
  - name: gpu
    rules:
      - alert: GpuHot
        expr: max_over_time(gpu_temp[5m]) > 85
        for: 2m
        keep_firing_for: 5m
        labels: {severity: critical, team: infra}
        annotations:
          summary: "{{ $labels.Hostname }} GPU {{ $labels.gpu }} at {{ $value }} C"
      - alert: GpuThrottled
        enabled: false
  - name: capacity
    rules:
      - alert: PoolFull
        expr: sum by (pool) (gpu_available) < 2
)",
                            "rules.yaml");
  ASSERT_TRUE(file.ok()) << file.error().message;
  EXPECT_EQ(file->groups, (std::vector<std::string>{"gpu", "capacity"}));
  ASSERT_EQ(file->rules.size(), 3u);
  EXPECT_EQ(file->rules[0].for_ms, 2 * kMin);
  EXPECT_EQ(file->rules[0].keep_firing_for_ms, 5 * kMin);
  EXPECT_EQ(file->rules[0].severity, "critical");
  EXPECT_FALSE(file->rules[1].enabled);
  EXPECT_EQ(file->rules[2].severity, "warning");  // the default
  EXPECT_EQ(file->rules[2].annotations.at("summary"), "PoolFull: {{ $value }}");
  // The built-in GpuThrottled is switched off, the others stay.
  auto merged = MergeRules(BuiltinRules(), file->rules);
  EXPECT_EQ(merged.size(), BuiltinRules().size() - 1 + 2);
  EXPECT_TRUE(std::none_of(merged.begin(), merged.end(),
                           [](const Rule& r) { return r.name == "GpuThrottled"; }));
  // A rule as JSON comes back the same.
  auto back = RuleFromJson(RuleJson(file->rules[0]));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(RuleJson(back.value()), RuleJson(file->rules[0]));
  EXPECT_TRUE(IsRuleFile("groups: []"));
  EXPECT_FALSE(IsRuleFile("apiVersion: gpufleet/v1\nkind: Fleet\n"));
}

// gpufleet export writes the user rules back as a rule file: read again, it is the same rules,
// and written again the same text (a quote, a newline and a template survive it).
TEST(RuleFile, AWrittenFileReadsBackTheSameRules) {
  auto file = ParseRuleFile(R"(groups:
  - name: gpu
    rules:
      - alert: GpuHot
        expr: max_over_time(gpu_temp[5m]) > 85
        for: 2m
        labels: {severity: critical, team: "infra: \"gpu\""}
        annotations:
          summary: "{{ $labels.Hostname }} at {{ $value }} C\nsee the runbook"
      - alert: GpuThrottled
        enabled: false
  - name: capacity
    rules:
      - alert: PoolFull
        expr: sum by (pool) (gpu_available) < 2
        keep_firing_for: 10m
)",
                            "rules.yaml");
  ASSERT_TRUE(file.ok()) << file.error().message;
  const std::string text = WriteRuleFile(file->rules);
  auto back = ParseRuleFile(text, "export.yaml");
  ASSERT_TRUE(back.ok()) << back.error().message << "\n" << text;
  EXPECT_EQ(back->groups, file->groups);
  ASSERT_EQ(back->rules.size(), file->rules.size());
  for (size_t i = 0; i < file->rules.size(); ++i) {
    EXPECT_EQ(RuleJson(back->rules[i]), RuleJson(file->rules[i]));
  }
  EXPECT_EQ(WriteRuleFile(back->rules), text);
  EXPECT_EQ(
      text.rfind("groups:\n  - name: \"gpu\"\n    rules:\n      - {\"alert\": \"GpuHot\", ", 0), 0u)
      << text;
  EXPECT_EQ(WriteRuleFile({}), "groups: []\n");
}

std::string FileError(const std::string& rule_lines) {
  auto file =
      ParseRuleFile("groups:\n  - name: g\n    rules:\n      - alert: R\n" + rule_lines, "r.yaml");
  return file.ok() ? "(parsed)" : file.error().message;
}

TEST(RuleFile, ErrorsNameTheLineAndTheField) {
  EXPECT_EQ(FileError("        expr: gpu_tmp > 1\n"),
            "r.yaml:5: groups[0].rules[0].expr: at 1: unknown metric 'gpu_tmp' (see `gpufleet "
            "rules metrics` for the names)");
  EXPECT_EQ(FileError("        expr: gpu_temp > 1\n        labels: {severity: page}\n"),
            "r.yaml:6: groups[0].rules[0].labels.severity: 'page' is not critical, warning or "
            "info");
  EXPECT_EQ(
      FileError("        expr: gpu_temp > 1\n        annotations: {summary: '{{ .Value }}'}\n"),
      "r.yaml:6: groups[0].rules[0].annotations.summary: '{{ .Value }}' is not a template "
      "gpufleet knows ({{ $value }} or {{ $labels.NAME }})");
  EXPECT_EQ(FileError("        expr: gpu_temp > 1\n        fr: 5m\n"),
            "r.yaml:6: groups[0].rules[0].fr: unknown field");
  EXPECT_EQ(FileError("        expr: gpu_temp > 1\n        for: soon\n"),
            "r.yaml:6: groups[0].rules[0].for: must be a duration such as 30s, 5m or 1h");
  EXPECT_EQ(FileError("        for: 1m\n"), "r.yaml:4: groups[0].rules[0].expr: is required");
  EXPECT_EQ(FileError("        expr: gpu_temp > 1\n      - alert: R\n        expr: node_up == 0\n"),
            "r.yaml:6: groups[0].rules[1].alert: duplicate rule 'R'");
  EXPECT_EQ(FileError("        record: x\n"),
            "r.yaml:5: groups[0].rules[0].record: recording rules are not supported");
  auto bad = ParseRuleFile("groups:\n  - name: g\n    interval: 1m\n", "r.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message,
            "r.yaml:3: groups[0].interval: rules are evaluated every health cycle "
            "(--health-interval); remove it");
  auto json_bad = RuleFromJson(R"({"alert": "X", "expr": "gpu_temp > 1", "severity": "x"})");
  ASSERT_FALSE(json_bad.ok());
  EXPECT_EQ(json_bad.error().message,
            "severity: unknown field (known: alert, group, enabled, expr, for, keep_firing_for, "
            "labels, annotations)");
}

TEST(RuleFile, FormatDuration) {
  EXPECT_EQ(FormatDuration(0), "0s");
  EXPECT_EQ(FormatDuration(300'000), "5m");
  EXPECT_EQ(FormatDuration(90'000), "90s");
  EXPECT_EQ(FormatDuration(7'200'000), "2h");
  EXPECT_EQ(FormatDuration(1500), "1500ms");
}

TEST(BuiltinRules, AllCheckAndExpressionOnesParse) {
  for (auto r : BuiltinRules()) {
    if (r.expr.empty()) continue;
    EXPECT_TRUE(r.parsed) << r.name;
    EXPECT_TRUE(CheckRule(r).ok()) << r.name;
  }
}

}  // namespace
}  // namespace gpufleet::alerting
