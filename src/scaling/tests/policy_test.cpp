// Policies as JSON (the API's and the fleet file's one parser) and the pool's past as a tune's
// replay trace, and a policy error in a fleet file: pure functions, no service.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "scaling/scaling.h"
#include "scaling/tests/scaling_fixture.h"  // kFleet
#include "sched/policy_json.h"
#include "sched/replay.h"

namespace gpufleet::scaling {
namespace {

TEST(PolicyJson, FieldsDefaultsErrorsAndRoundTrip) {
  auto s = sched::ParsePoolScaling(R"({"min_nodes": 2, "max_nodes": 10, "lead_time": "5m",
      "interval": 30, "forecast_margin": 1.5, "margin_by": "hour", "consolidate_below": 0.25,
      "schedule": [{"nodes": 4, "from": 8, "to": 18, "weekdays": true}],
      "tune": {"every": "1d", "wait_p95": "2m"}})");
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->tune.every_s, 86400);
  EXPECT_EQ(s->tune.wait_p95_s, 120);
  EXPECT_EQ(s->tune.window_s, 7 * 86400) << "the default";
  EXPECT_EQ(sched::ParsePoolScaling("{}")->tune.every_s, 0) << "never, unless asked";
  EXPECT_EQ(s->policy.lead_time_s, 300);
  EXPECT_EQ(s->policy.interval_s, 30);
  EXPECT_EQ(s->policy.mode, sched::ScaleMode::kPredictive);
  EXPECT_EQ(s->policy.forecast_margin, 1.5);
  EXPECT_EQ(sched::ParsePoolScaling("{}")->policy.forecast_margin, 4) << "the default";
  EXPECT_TRUE(s->policy.margin_by_hour);
  EXPECT_FALSE(sched::ParsePoolScaling("{}")->policy.margin_by_hour) << "recent, by default";
  // The target share's default follows the mode: predictive plans its headroom with the
  // forecast's margin, reactive keeps a fifth of the pool free.
  EXPECT_EQ(s->policy.target_share, 1) << "predictive's default";
  EXPECT_EQ(sched::ParsePoolScaling(R"({"mode": "reactive"})")->policy.target_share, 0.8);
  EXPECT_EQ(
      sched::ParsePoolScaling(R"({"mode": "reactive", "target_share": 0.9})")->policy.target_share,
      0.9);
  EXPECT_EQ(sched::ParsePoolScaling(R"({"target_share": 0.7})")->policy.target_share, 0.7);
  EXPECT_EQ(s->policy.consolidate_below, 0.25);
  EXPECT_EQ(sched::ParsePoolScaling("{}")->policy.consolidate_below, 0.5) << "the default";
  EXPECT_EQ(s->actuator.type, "sim");
  auto again = sched::ParsePoolScaling(sched::PoolScalingJson(s.value()));
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(sched::PoolScalingJson(again.value()), sched::PoolScalingJson(s.value()));
  EXPECT_EQ(sched::FormatSeconds(300), "5m");
  EXPECT_EQ(sched::FormatSeconds(90), "90s");
  EXPECT_EQ(sched::FormatSeconds(0.25), "250ms");

  struct Bad {
    const char* json;
    const char* field;
    const char* message;
  } bad[] = {
      {R"({"max_nodes": "ten"})", "max_nodes", "max_nodes: must be an integer"},
      {R"({"min_nodes": 5, "max_nodes": 2})", "max_nodes", "max_nodes must be at least min_nodes"},
      {R"({"mode": "oracle"})", "mode", "mode: 'oracle' is not reactive or predictive"},
      {R"({"lead_time": "soon"})", "lead_time", "lead_time: 'soon' is not a duration"},
      {R"({"schedule": [{"nodes": 1, "from": 9, "to": 5}]})", "schedule[0].to",
       "schedule[0].to: must be an hour after 'from', at most 24 (UTC)"},
      {R"({"actuator": {"type": "cloud"}})", "actuator.type",
       "actuator.type must be sim or command"},
      {R"({"actuator": {"type": "command", "provision": "x"}})", "actuator",
       "actuator: a command actuator needs both provision and deprovision"},
      {R"({"max": 3})", "max",
       "max: unknown field (known: pool, updated_ms, mode, min_nodes, "
       "max_nodes, target_share, step_up, step_down, up_cooldown, "
       "down_cooldown, lead_time, idle_before_remove, forecast_margin, margin_by, "
       "consolidate_below, interval, enabled, schedule, actuator, tune)"},
      {R"({"tune": {"every": "10s"}})", "tune.every",
       "tune.every must be 0 (never) or at least 1m"},
      {R"({"tune": {"window": "60d"}})", "tune.window",
       "tune.window must be positive and at most 30d"},
      {R"({"tune": {"often": true}})", "tune.often",
       "tune.often: unknown field (known: every, wait_p95, window)"},
      {R"({"forecast_margin": 12})", "forecast_margin", "forecast_margin must be in [0, 10]"},
      {R"({"margin_by": "day"})", "margin_by", "margin_by: 'day' is not recent or hour"},
      {R"({"consolidate_below": 1.5})", "consolidate_below",
       "consolidate_below must be in [0, 1] (0: never)"},
      {"garbage", "", "malformed JSON: syntax error"},  // no parser internals in the message
  };
  for (const auto& b : bad) {
    std::string field;
    auto r = sched::ParsePoolScaling(b.json, &field);
    ASSERT_FALSE(r.ok()) << b.json;
    EXPECT_EQ(r.error().message, b.message) << b.json;
    EXPECT_EQ(field, b.field) << b.json;
  }
}

// The pool's past as a replay trace: what ran, for as long as it ran; queued jobs for their
// expected duration; nothing whose run time is not known.
TEST(HistoryTrace, RunTimesFromWhatRanAndNothingUnknown) {
  auto job = [](int64_t submit_ms, workload::JobState state, int gpus) {
    workload::Job j;
    j.submit_ms = submit_ms;
    j.state = state;
    j.spec.gpus = gpus;
    j.spec.team = "nlp";
    return j;
  };
  std::vector<workload::Job> jobs;
  jobs.push_back(job(500, workload::JobState::kCompleted, 4));  // before the window
  jobs.back().gpu_hours = 1;
  jobs.push_back(job(1'000, workload::JobState::kCompleted, 2));
  jobs.back().gpu_hours = 2;  // 1 h on 2 GPUs, over all its starts
  jobs.back().spec.movable = true;
  jobs.push_back(job(2'000, workload::JobState::kRunning, 8));
  jobs.back().spec.gpus_per_node = 4;  // spread over 2 nodes
  jobs.back().start_ms = 50'000;
  jobs.back().done_ms = 20'000;  // moved once, 20 s done before
  jobs.push_back(job(3'000, workload::JobState::kQueued, 1));
  jobs.back().spec.duration_ms = 90'000;
  jobs.push_back(job(3'500, workload::JobState::kRunning, 1));
  jobs.back().start_ms = 99'000;
  jobs.back().spec.duration_ms = 600'000;  // just started: it runs for its duration
  jobs.push_back(job(4'000, workload::JobState::kQueued, 1));     // no duration: unknown
  jobs.push_back(job(5'000, workload::JobState::kCancelled, 1));  // never ran
  jobs.push_back(job(6'000, workload::JobState::kQueued, 1));
  jobs.back().spec.duration_ms = 3'600'000LL * 99'999;  // stored before durations were bounded
  auto t = HistoryTrace(jobs, 1'000, 100'000);
  ASSERT_EQ(t.size(), 5u);
  EXPECT_DOUBLE_EQ(t[4].duration_s, sched::kMaxReplaySpanS) << "what a replay can take";
  EXPECT_DOUBLE_EQ(t[0].submit_s, 1) << "epoch seconds, as the live clock";
  EXPECT_DOUBLE_EQ(t[0].duration_s, 3600);
  EXPECT_EQ(t[0].gpus, 2);
  EXPECT_EQ(t[0].movable, 1);
  EXPECT_EQ(t[0].team, "nlp");
  EXPECT_DOUBLE_EQ(t[1].submit_s, 2);
  EXPECT_DOUBLE_EQ(t[1].duration_s, 70);  // 20 s before, 50 s since its last start
  EXPECT_EQ(t[1].movable, 0);
  EXPECT_EQ(t[1].gpus_per_node, 4);
  EXPECT_EQ(t[0].gpus_per_node, 0);
  EXPECT_DOUBLE_EQ(t[2].duration_s, 90);
  EXPECT_DOUBLE_EQ(t[3].duration_s, 600);
}

TEST(PolicyYaml, ErrorsPointAtTheFieldsLine) {
  std::string yaml = kFleet;
  yaml.replace(yaml.find("max_nodes: 4"), 12, "max_nodes: x");
  auto spec = ParseFleetSpec(yaml, "fleet.yaml", *GpuCatalog::Builtin());
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.error().message,
            "fleet.yaml:14: clusters[0].pools[0].scaling.max_nodes: must be an integer");
}

}  // namespace
}  // namespace gpufleet::scaling
