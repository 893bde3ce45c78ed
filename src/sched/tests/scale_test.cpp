#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <tuple>

#include "sched/autoscaler.h"
#include "sched/forecast.h"
#include "sched/pool.h"

namespace gpufleet::sched {
namespace {

ScalePolicy Policy() {
  ScalePolicy p;
  p.min_nodes = 2;
  p.max_nodes = 10;
  p.target_share = 0.5;
  p.step_up = 3;
  p.step_down = 2;
  p.up_cooldown_s = 60;
  p.down_cooldown_s = 300;
  p.mode = ScaleMode::kReactive;
  return p;
}

TEST(Autoscaler, BoundsStepsAndCooldowns) {
  ScalePolicy p = Policy();
  ScaleInput in;
  in.gpus_per_node = 8;
  in.ready = 2;
  in.demand_gpus = 40;  // needs 40 / (8 x 0.5) = 10 nodes
  auto d = Decide(p, in);
  EXPECT_EQ(d.target, 10);
  EXPECT_EQ(d.delta, 3) << "at most step_up";
  EXPECT_EQ(d.reason, "queue");
  in.demand_gpus = 400;
  d = Decide(p, in);
  EXPECT_EQ(d.target, 10) << "never above max_nodes";
  EXPECT_EQ(d.reason, "bound");
  in.now_s = 30;
  in.last_up_s = 0;
  d = Decide(p, in);
  EXPECT_EQ(d.delta, 0);
  EXPECT_EQ(d.reason, "cooldown");
  // Down: never below min_nodes, at most step_down, only idle nodes, after the cooldown.
  in = ScaleInput{};
  in.now_s = 1000;
  in.gpus_per_node = 8;
  in.ready = 8;
  in.demand_gpus = 0;
  in.idle_removable = 8;
  d = Decide(p, in);
  EXPECT_EQ(d.target, 2);
  EXPECT_EQ(d.delta, -2);
  in.idle_removable = 1;
  EXPECT_EQ(Decide(p, in).delta, -1) << "only idle nodes go";
  in.idle_removable = 0;
  d = Decide(p, in);
  EXPECT_EQ(d.delta, 0) << "a node with a running job is never removed";
  EXPECT_EQ(d.reason, "steady");
  in.idle_removable = 8;
  in.last_down_s = 900;
  EXPECT_EQ(Decide(p, in).reason, "cooldown");
  // Predictive: the forecast peak (its margin included by the caller) raises the target ahead
  // of the demand; target_share keeps headroom over today's demand only.
  p.mode = ScaleMode::kPredictive;
  in = ScaleInput{};
  in.gpus_per_node = 8;
  in.ready = 2;
  in.demand_gpus = 4;
  in.peak_forecast_gpus = 40;
  d = Decide(p, in);
  EXPECT_EQ(d.target, 5);
  EXPECT_EQ(d.delta, 3);
  EXPECT_EQ(d.reason, "forecast");
  in.peak_forecast_gpus = 12;  // 2 nodes' worth, but today's 4 GPUs at share 0.5 need 1
  EXPECT_EQ(Decide(p, in).target, 2);
  EXPECT_EQ(p.Validate(), "");
  p.target_share = 0;
  EXPECT_EQ(p.Validate(), "target_share must be in (0, 1]");
  // Bounds that keep a decision loop (and a replay's clock) moving.
  for (auto [field, value, message] :
       {std::tuple{&ScalePolicy::interval_s, 0.5, "interval must be 1s to 1d"},
        {&ScalePolicy::interval_s, 86'401.0, "interval must be 1s to 1d"},
        {&ScalePolicy::lead_time_s, 86'401.0, "lead_time must be 0 to 1d"}}) {
    ScalePolicy q = Policy();
    q.*field = value;
    EXPECT_EQ(q.Validate(), message);
  }
  ScalePolicy q = Policy();
  q.max_nodes = 100'001;
  EXPECT_EQ(q.Validate(), "max_nodes must be at most 100000");
  q = Policy();
  q.schedule.push_back({.nodes = q.max_nodes + 1, .from_hour = 8, .to_hour = 18});
  EXPECT_EQ(q.Validate(), "schedule: nodes must be at most max_nodes");
}

TEST(Autoscaler, AQueuedWholeNodeJobGetsANodeEvenWhenFreeGpusAddUp) {
  // Two ready nodes of 8, each running a 1-GPU job: 14 GPUs are free, but an 8-GPU job waits.
  EXPECT_EQ(QueueNodes(2, {{8, 1}}, 8), 3);
  EXPECT_EQ(QueueNodes(2, {{1, 3}, {4, 2}}, 8), 4) << "11 GPUs of small jobs pack into 2 nodes";
  EXPECT_EQ(QueueNodes(1, {{16, 1}}, 8), 3);
  EXPECT_EQ(QueueNodes(5, {}, 8), 0) << "nothing queued: nothing needed for the queue";
  ScalePolicy p;
  p.target_share = 1;
  p.mode = ScaleMode::kReactive;
  ScaleInput in;
  in.gpus_per_node = 8;
  in.ready = 2;
  in.demand_gpus = 10;
  EXPECT_EQ(Decide(p, in).delta, 0) << "by demand alone 10 GPUs fit in 2 nodes";
  in.queue_nodes = QueueNodes(2, {{8, 1}}, 8);
  auto d = Decide(p, in);
  EXPECT_EQ(d.delta, 1);
  EXPECT_EQ(d.reason, "queue");
}

TEST(Autoscaler, ScheduledMinimumHoldsOnWeekdayHours) {
  ScalePolicy p = Policy();
  p.schedule.push_back({.nodes = 6, .from_hour = 8, .to_hour = 18, .weekdays_only = true});
  const double monday = 4 * 86400;  // 1970-01-05 was a Monday
  EXPECT_EQ(p.MinimumAt(monday + 9 * 3600), 6);
  EXPECT_EQ(p.MinimumAt(monday + 19 * 3600), 2);
  EXPECT_EQ(p.MinimumAt(monday + 5 * 86400 + 9 * 3600), 2) << "Saturday";
  ScaleInput in;
  in.now_s = monday + 9 * 3600;
  in.ready = 2;
  auto d = Decide(p, in);
  EXPECT_EQ(d.delta, 3);
  EXPECT_EQ(d.reason, "schedule");
}

// A daily pattern (5-minute steps) with noise: after a week of learning, the forecast one hour
// ahead is within 10% MAPE; a flat series is forecast exactly.
TEST(Forecaster, LearnsADailySeasonWithinTenPercent) {
  Forecaster f(300, 12);
  std::mt19937 rng(3);
  std::normal_distribution<double> noise(0, 2);
  auto demand = [&](int step) {
    double hour = (step % 288) / 12.0;
    return 100 + 60 * std::sin((hour - 8) / 24 * 2 * M_PI) + noise(rng);
  };
  for (int s = 0; s < 288 * 7; ++s) f.Observe(demand(s));
  Forecaster g(300, 12);  // scored from day 8 on only
  for (int s = 0; s < 288 * 7; ++s) g.Observe(demand(s));
  auto before = g.stats();
  for (int s = 288 * 7; s < 288 * 10; ++s) g.Observe(demand(s));
  auto after = g.stats();
  double mape = (after.mape * after.scored - before.mape * before.scored) /
                static_cast<double>(after.scored - before.scored);
  EXPECT_LT(mape, 0.10) << "model " << after.model;
  std::printf("days 8-10: MAPE %.4f, model %s\n", mape, after.model.c_str());
  EXPECT_NE(after.model, "last") << "a seasonal model should win on a seasonal series";
  // The peak over the next hour at the trough's end foresees the morning rise.
  EXPECT_GT(f.Peak(12), f.Forecast(1) - 1e-9);
  Forecaster flat(300, 3);
  for (int s = 0; s < 100; ++s) flat.Observe(50);
  EXPECT_DOUBLE_EQ(flat.Forecast(3), 50);
  EXPECT_NEAR(flat.stats().mape, 0, 1e-12);
}

// The margin's unit: the recent mean shortfall counts only forecasts that came out too low.
// By hand, the last-value model one step ahead on 10, 20, 10, 20: three forecasts are scored,
// 10 for 20 (short by 10), 20 for 10 (too high: short by 0), 10 for 20 (short by 10). The
// exponentially weighted means (weight 0.02, the first one taken as it is) are
// shortfall 10, 0.98 x 10 = 9.8, 0.98 x 9.8 + 0.02 x 10 = 9.804, and absolute error 10.
TEST(Forecaster, ShortfallCountsOnlyForecastsThatCameOutTooLow) {
  Forecaster f(300, 1);
  for (double v : {10.0, 20.0, 10.0, 20.0}) f.Observe(v);
  EXPECT_EQ(f.stats().scored, 3u);
  EXPECT_NEAR(f.shortfall(), 9.804, 1e-9);
  EXPECT_NEAR(f.error(), 10, 1e-9);
  EXPECT_NEAR(f.stats().shortfall, 9.804, 1e-9);
  // Demand that only falls is always over-forecast: no shortfall, so no margin, however large
  // the error.
  Forecaster falling(300, 2);
  for (int s = 0; s < 50; ++s) falling.Observe(500 - 5 * s);
  EXPECT_NEAR(falling.error(), 10, 1e-9);
  EXPECT_DOUBLE_EQ(falling.shortfall(), 0);
}

// What a decision plans for: the forecast's peak over the lead time and one interval, plus the
// policy's forecast_margin times the forecast's recent mean shortfall.
TEST(DemandTracker, PlansForThePeakPlusTheMarginInShortfalls) {
  DemandTracker t(300, 540, 60);  // 600 s ahead: 2 steps
  EXPECT_EQ(t.horizon(), 2);
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> demand(10, 30);
  for (int m = 0; m < 1000; ++m) t.Observe(m * 60.0, demand(rng));  // a decision a minute
  double shortfall = t.forecaster().shortfall();
  EXPECT_GT(shortfall, 1) << "noise is not forecast exactly";
  EXPECT_LT(shortfall, t.forecaster().error()) << "over-forecasts count in the error only";
  EXPECT_DOUBLE_EQ(t.PlanningPeak(0), t.forecaster().Peak(2));
  EXPECT_DOUBLE_EQ(t.PlanningPeak(1.5), t.forecaster().Peak(2) + 1.5 * shortfall);
  EXPECT_GE(t.PlanningPeak(0), 10);
  EXPECT_LE(t.PlanningPeak(0), 30);
}

// A working day that starts at 09:00 UTC with a jump of 40 to 100 GPUs (a different one each
// day) over a noisy 10: the forecast in use (`last`) is short by the jump for the lead time
// every morning. The recent shortfall has forgotten yesterday's by 08:40; that of the hour of
// 09:00 has not, so a margin by hour plans for the jump before it comes, and at night is the
// noise only.
TEST(DemandTracker, AMarginByHourPlansForTheRiseThatComesAtTheSameHourEveryDay) {
  DemandTracker t(300, 1740, 60);  // 30 minutes ahead: 6 steps
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> noise(0, 4), jump(40, 100);
  double size = 0;
  auto observe_until = [&](double from, double to) {
    for (double at = from; at < to; at += 60) {
      double hour = std::fmod(at, 86400) / 3600;
      if (std::fmod(at, 86400) == 0) size = jump(rng);
      t.Observe(at, 10 + noise(rng) + (hour >= 9 && hour < 17 ? size : 0));
    }
  };
  const double day = 86400;
  observe_until(6 * 3600, 6 * day + 8 * 3600 + 40 * 60);  // to 08:40 on day 6
  const Forecaster& f = t.forecaster();
  EXPECT_EQ(f.stats().model, "last");
  EXPECT_GT(f.HourShortfall(), 15) << "short by the jump at 09:00 on the past days";
  EXPECT_LT(f.shortfall(), 3) << "the last few hours had the noise only";
  EXPECT_GT(t.PlanningPeak(2, true), t.PlanningPeak(2, false) + 30);
  observe_until(6 * day + 8 * 3600 + 40 * 60, 7 * day + 3 * 3600);  // to 03:00 on day 7
  EXPECT_LT(f.HourShortfall(), 3) << "at night, the noise only";
}

// A hand-computed case: one 8-GPU node from the start, lead time 100 s, reactive, share 1.
//   t=0   job A (8 GPUs, 300 s) starts at once on the node        wait 0
//   t=10  job B (8 GPUs, 100 s) queues; the tick at t=60 asks for a node, ready at t=160
//   t=160 B starts                                                 wait 150
//   t=20  job C (4 GPUs, 50 s) queues behind B; at t=160 no room (B took the new node);
//         B ends at t=260 and C takes its node                    wait 240
//   A ends at 300, C at 310: the replay ends there.

}  // namespace
}  // namespace gpufleet::sched
