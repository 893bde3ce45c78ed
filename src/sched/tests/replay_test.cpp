#include "sched/replay.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <random>
#include <set>

#include "sched/autoscaler.h"
#include "sched/consolidate.h"
#include "sched/forecast.h"
#include "sched/tune.h"

namespace gpufleet::sched {
namespace {

TEST(Replay, SmallTraceGivesTheHandComputedWaits) {
  auto trace = ParseTrace("submit_time,duration_s,gpus\n0,300,8\n10,100,8\n20,50,4\n", "t.csv");
  ASSERT_TRUE(trace.ok()) << trace.error().message;
  ReplayOptions o;
  o.gpus_per_node = 8;
  o.policy.mode = ScaleMode::kReactive;
  o.policy.min_nodes = 1;
  o.policy.max_nodes = 2;
  o.policy.target_share = 1;
  o.policy.lead_time_s = 100;
  o.policy.interval_s = 60;
  o.policy.idle_before_remove_s = 1e9;  // keep nodes: the waits are the point here
  auto r = Replay(trace.value(), o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->jobs, 3u);
  // Waits 0, 150, 240: p50 is 150, p95 and p99 are 240 (nearest rank).
  EXPECT_DOUBLE_EQ(r->wait_p50_s, 150);
  EXPECT_DOUBLE_EQ(r->wait_p95_s, 240);
  EXPECT_DOUBLE_EQ(r->wait_p99_s, 240);
  EXPECT_EQ(r->jobs_waited_over_lead_time, 2u);
  EXPECT_EQ(r->scale_events, 1u);
  EXPECT_EQ(r->peak_nodes, 2);
  // Busy: A 8x300 + B 8x100 + C 4x50 GPU-seconds. Provisioned: node 1 from 0 to 310 (C ends),
  // node 2 from its request at 60 to 310: 8 x (310 + 250).
  EXPECT_NEAR(r->gpu_hours_busy * 3600, 8 * 300 + 8 * 100 + 4 * 50, 1e-6);
  EXPECT_NEAR(r->gpu_hours_provisioned * 3600, 8 * (310 + 250), 1e-6);
  // Idle, 1080 GPU-seconds: node 2 starting from 60 to 160 (8 x 100); node 1 empty from A's
  // end at 300 to 310 (8 x 10); node 2 half used by C from 260 to 310 (4 x 50). Node 2 is never
  // empty: C takes it the moment B ends.
  EXPECT_NEAR(r->gpu_hours_starting * 3600, 800, 1e-6);
  EXPECT_NEAR(r->gpu_hours_empty * 3600, 80, 1e-6);
  EXPECT_NEAR(r->gpu_hours_fragmented * 3600, 200, 1e-6);
  EXPECT_NEAR(r->gpu_hours_idle * 3600, 1080, 1e-6);
  EXPECT_DOUBLE_EQ(r->span_s, 310);
  EXPECT_TRUE(std::isnan(r->forecast_mape)) << "reactive has no forecast";
}

// A hand case and a property: the least used candidate goes first, its jobs go best fit to busy
// nodes, and over random pools nothing is over-allocated, nothing goes to an empty node or to
// a node being emptied, and a node that takes jobs is not emptied.
// The same end to end through the replay: a fixed pool of 4 nodes kept 90 % busy by 1-GPU
// jobs for 6 hours, and one 16-GPU job at the first hour. Backfill alone started it only after
// the small jobs stopped coming (over 2 hours); with nodes kept for it, no job waits half an
// hour.
TEST(Replay, AWideJobIsNotStarvedByAStreamOfSmallOnes) {
  std::mt19937 rng(1);
  std::exponential_distribution<double> gap(32 * 0.9 / 600), run(1.0 / 600);
  std::vector<TraceJob> trace;
  for (double t = gap(rng); t < 6 * 3600; t += gap(rng)) {
    trace.push_back({t, run(rng), 1, "small", -1});
  }
  trace.push_back({3600, 1800, 16, "big", -1});
  ReplayOptions o;
  o.gpus_per_node = 8;
  o.policy.mode = ScaleMode::kReactive;
  o.policy.min_nodes = o.policy.max_nodes = 4;
  o.policy.consolidate_below = 0;
  o.policy.lead_time_s = 1800;  // "waited over the lead time": over half an hour
  auto r = Replay(trace, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->jobs, trace.size());
  EXPECT_EQ(r->jobs_waited_over_lead_time, 0u);
  EXPECT_GT(r->wait_p99_s, 0) << "the pool is busy enough that small jobs wait too";
}

// A live tune hands the replay the pool's demand from before its window (`--window 1d` of 8
// days' samples: a week of it), so that its forecaster starts as the live one did, knowing
// the day's shape, not from nothing: here a working day's jump from 10 to 70 GPUs at 09:00.
TEST(Replay, DemandBeforeTheTraceWarmsTheForecaster) {
  auto demand = [](double t) {
    double hour = std::fmod(std::fmod(t, 86400) + 86400, 86400) / 3600;
    return hour >= 9 && hour < 17 ? 70.0 : 10.0;
  };
  std::vector<TraceJob> trace;  // a day: 1-GPU jobs of 5 minutes, as many as the shape says
  for (double t = 0; t < 86400; t += 300) {
    for (int i = 0; i < static_cast<int>(demand(t)); ++i) trace.push_back({t, 299, 1, "", -1});
  }
  ReplayOptions o;
  o.gpus_per_node = 8;
  o.policy.mode = ScaleMode::kPredictive;
  o.policy.max_nodes = 50;
  auto cold = Replay(trace, o);
  ASSERT_TRUE(cold.ok()) << cold.error().message;
  for (double t = -3 * 86400; t < 0; t += 60) o.demand_before.emplace_back(t, demand(t));
  o.demand_before.emplace_back(10, 1000);  // at or after the first job: ignored
  auto warm = Replay(trace, o);
  ASSERT_TRUE(warm.ok()) << warm.error().message;
  EXPECT_EQ(warm->jobs, cold->jobs);
  // Measured: cold, model `last`, MAPE 11.0 %, p99 wait 300 s; warm, `daily`, 1.2 %, 0 s.
  EXPECT_LT(warm->forecast_mape, cold->forecast_mape / 2)
      << cold->forecast_model << " " << cold->forecast_mape << " " << warm->forecast_model << " "
      << warm->forecast_mape;
  EXPECT_LT(warm->wait_p99_s, cold->wait_p99_s) << "the jump at 09:00 was seen coming";
}

TEST(Consolidation, EmptiesTheLeastUsedNodesWhoseJobsFitOnOtherBusyNodes) {
  std::vector<NodeLoad> nodes(5);
  nodes[0] = {.free = 6, .running = true, .candidate = true, .jobs = {2}};
  nodes[1] = {.free = 3, .running = true, .candidate = false, .jobs = {}};   // 5 unmovable GPUs
  nodes[2] = {.free = 8, .running = false, .candidate = false, .jobs = {}};  // empty: no target
  nodes[3] = {.free = 4, .running = true, .candidate = true, .jobs = {1, 3}};
  nodes[4] = {.free = 1, .running = true, .candidate = false, .jobs = {}};
  auto plan = PlanConsolidation(nodes, 5);
  // Node 0 (2 GPUs used) first: its job to node 1 (3 free; node 3's 4 free is a worse fit, and
  // node 4's 1 is too few). Then node 3: its 3-GPU job to node 1? only 1 left there; to node 0?
  // being emptied. So it stays.
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].node, 0);
  EXPECT_EQ(plan[0].to, std::vector<int>{1});
  EXPECT_TRUE(PlanConsolidation(nodes, 0).empty());
  // With room on node 4, node 3 empties too: its 3-GPU job to node 4, its 1-GPU job to node 1.
  nodes[4].free = 3;
  plan = PlanConsolidation(nodes, 5);
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[1].node, 3);
  EXPECT_EQ(plan[1].to, (std::vector<int>{1, 4}));
  EXPECT_EQ(PlanConsolidation(nodes, 1).size(), 1u) << "at most max_nodes";
  EXPECT_TRUE(LightlyUsed(4, 8, 0.5));
  EXPECT_FALSE(LightlyUsed(5, 8, 0.5));
  EXPECT_FALSE(LightlyUsed(0, 8, 0.5)) << "an empty node is removed as idle, not consolidated";
  EXPECT_FALSE(LightlyUsed(1, 8, 0)) << "0: never";

  std::mt19937 rng(11);
  for (int round = 0; round < 2000; ++round) {
    const int g = 8;
    std::vector<NodeLoad> pool(1 + rng() % 12);
    for (auto& n : pool) {
      int used = static_cast<int>(rng() % (g + 1));
      n.running = used > 0;
      n.free = g - used;
      n.candidate = n.running && rng() % 2;
      for (int left = used; n.candidate && left > 0;) {
        int j = 1 + static_cast<int>(rng() % static_cast<unsigned>(left));
        n.jobs.push_back(j);
        left -= j;
      }
    }
    int max_nodes = static_cast<int>(rng() % 4);
    auto moves = PlanConsolidation(pool, max_nodes);
    ASSERT_LE(static_cast<int>(moves.size()), max_nodes);
    std::vector<int> free(pool.size());
    std::set<int> emptied, targets;
    for (size_t i = 0; i < pool.size(); ++i) free[i] = pool[i].free;
    for (const auto& m : moves) {
      ASSERT_TRUE(pool[static_cast<size_t>(m.node)].candidate);
      ASSERT_FALSE(targets.count(m.node)) << "a node that took jobs is emptied";
      emptied.insert(m.node);
      ASSERT_EQ(m.to.size(), pool[static_cast<size_t>(m.node)].jobs.size());
      for (size_t k = 0; k < m.to.size(); ++k) {
        auto to = static_cast<size_t>(m.to[k]);
        ASSERT_TRUE(pool[to].running) << "moved to a node running nothing";
        ASSERT_FALSE(emptied.count(m.to[k])) << "moved to a node being emptied";
        free[to] -= pool[static_cast<size_t>(m.node)].jobs[k];
        ASSERT_GE(free[to], 0) << "over-allocated node " << to;
        targets.insert(m.to[k]);
      }
    }
  }
}

// Consolidation in the replay, by hand. One node at first (min 1); J0 (4 GPUs, 100 s) and J1
// (4 GPUs, 1000 s) fill it at 0; J2 (2 GPUs, 1000 s) arrives at 1 and waits for a second node,
// asked for at the tick at 60 (lead time 0): it runs there from 60. J0 ends at 100. From the
// tick at 120 both nodes are lightly used (4 and 2 of 8); at 240 they have been for
// idle_before_remove (120 s), the pool wants 1 node for 6 GPUs, so the less used node 1 is
// emptied: J2 moves to node 0 with 820 s left, plus the 30 s move cost, and ends at 1090.
TEST(Replay, ConsolidationMovesAJobAndRemovesItsNodeByHand) {
  auto trace = ParseTrace("submit_time,duration_s,gpus\n0,100,4\n0,1000,4\n1,1000,2\n", "t.csv");
  ASSERT_TRUE(trace.ok()) << trace.error().message;
  ReplayOptions o;
  o.policy.mode = ScaleMode::kReactive;
  o.policy.min_nodes = 1;
  o.policy.max_nodes = 2;
  o.policy.target_share = 1;
  o.policy.lead_time_s = 0;
  o.policy.interval_s = 60;
  o.policy.idle_before_remove_s = 120;
  o.policy.down_cooldown_s = 0;
  o.move_cost_s = 30;
  auto r = Replay(trace.value(), o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->jobs_moved, 1u);
  EXPECT_EQ(r->nodes_consolidated, 1u);
  EXPECT_DOUBLE_EQ(r->span_s, 1090);
  // Provisioned: node 0 from 0 to 1090, node 1 from 60 to 240. Work: 400 + 4000 + 2000.
  EXPECT_NEAR(r->gpu_hours_provisioned * 3600, 8 * 1090 + 8 * 180, 1e-6);
  EXPECT_NEAR(r->gpu_hours_busy * 3600, 6400, 1e-6);
  EXPECT_NEAR(r->gpu_hours_idle * 3600, 3760, 1e-6);
  EXPECT_NEAR(r->gpu_hours_moving * 3600, 60, 1e-6) << "2 GPUs for the 30 s move cost";
  // Free GPUs of busy nodes: node 0 4 x 140 (100..240), 2 x 760, 6 x 90; node 1 6 x 180.
  EXPECT_NEAR(r->gpu_hours_fragmented * 3600, 560 + 1520 + 540 + 1080, 1e-6);
  EXPECT_NEAR(r->gpu_hours_empty * 3600, 0, 1e-6);

  // Without consolidation node 1 runs J2 to its end at 1060: 8 x 1000 more GPU-seconds.
  o.policy.consolidate_below = 0;
  auto off = Replay(trace.value(), o);
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->jobs_moved, 0u);
  EXPECT_NEAR(off->gpu_hours_idle * 3600, 16480 - 6400, 1e-6);
  // A free move: J2 ends when it would have, once (its first finish event is not counted).
  o.policy.consolidate_below = 0.5;
  o.move_cost_s = 0;
  auto free_move = Replay(trace.value(), o);
  ASSERT_TRUE(free_move.ok());
  EXPECT_EQ(free_move->jobs_moved, 1u);
  EXPECT_DOUBLE_EQ(free_move->span_s, 1060);
  EXPECT_NEAR(free_move->gpu_hours_busy * 3600, 6400, 1e-6);
  EXPECT_NEAR(free_move->gpu_hours_provisioned * 3600, 8 * 1060 + 8 * 180, 1e-6);
  // J2 not movable (the trace's column): node 1 stays, and node 0 goes instead, its J1 moving
  // to node 1 at 240 with 760 s left; it ends at 1030, J2 at 1060.
  o.move_cost_s = 30;
  auto fixed = ParseTrace(
      "submit_time,duration_s,gpus,movable\n0,100,4,true\n0,1000,4,1\n1,1000,2,0\n", "t.csv");
  ASSERT_TRUE(fixed.ok()) << fixed.error().message;
  auto other = Replay(fixed.value(), o);
  EXPECT_EQ(other->jobs_moved, 1u);
  EXPECT_DOUBLE_EQ(other->span_s, 1060);
  EXPECT_NEAR(other->gpu_hours_provisioned * 3600, 8 * 240 + 8 * 1000, 1e-6);
  // No job movable (--movable-share 0): nothing moves.
  o.movable_share = 0;
  EXPECT_EQ(Replay(trace.value(), o)->jobs_moved, 0u);
  EXPECT_EQ(
      ParseTrace("submit_time,duration_s,gpus,movable\n0,1,1,maybe\n", "t.csv").error().message,
      "t.csv:2: movable 'maybe' is not 1, 0, true or false");
  o.movable_share = 2;
  EXPECT_EQ(Replay(trace.value(), o).error().message, "--movable-share must be in [0, 1]");
  o.movable_share = 1;
  o.move_cost_s = -1;
  EXPECT_EQ(Replay(trace.value(), o).error().message, "--move-cost must be 0 or more seconds");
}

// A trace's gpus_per_node column spreads a job as the live allocator does; a value that does
// not divide its GPUs is an error naming the line; one wider than the pool's nodes is left out.
TEST(Replay, TheTracesGpusPerNodeSpreadsAJob) {
  auto trace = ParseTrace(
      "submit_time,duration_s,gpus,gpus_per_node\n0,100,4,\n0,100,12,4\n0,100,16,16\n", "t.csv");
  ASSERT_TRUE(trace.ok()) << trace.error().message;
  EXPECT_EQ((*trace)[0].gpus_per_node, 0);
  EXPECT_EQ((*trace)[1].gpus_per_node, 4);
  ReplayOptions o;
  o.gpus_per_node = 8;
  o.policy.mode = ScaleMode::kReactive;
  o.policy.min_nodes = 2;
  o.policy.max_nodes = 2;
  o.policy.target_share = 1;
  o.policy.idle_before_remove_s = 1e9;
  auto r = Replay(trace.value(), o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  // 16 GPUs per node on 8-GPU nodes, and 3 shares of 4 on a pool of at most 2 nodes: left out.
  EXPECT_EQ(r->unplaceable, 2u);
  EXPECT_EQ(r->jobs, 1u);
  o.policy.max_nodes = 3;
  o.policy.min_nodes = 3;
  r = Replay(trace.value(), o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->jobs, 2u);
  EXPECT_EQ(r->unplaceable, 1u);
  EXPECT_EQ(r->wait_p95_s, 0) << "both start at once: 4 + 4 on one node, 4 on two others";
  EXPECT_NEAR(r->gpu_hours_busy * 3600, 16 * 100, 1e-6);
  EXPECT_EQ(
      ParseTrace("submit_time,duration_s,gpus,gpus_per_node\n0,1,6,4\n", "t.csv").error().message,
      "t.csv:2: gpus_per_node '4' is not a whole number that divides gpus");
}

TEST(Replay, TraceErrorsNameTheLineAndNothingRuns) {
  auto bad = ParseTrace("submit_time,duration_s,gpus\n0,300,8\n10,abc,8\n", "t.csv");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message, "t.csv:3: duration_s 'abc' is not seconds >= 0");
  EXPECT_FALSE(ParseTrace("a,b\n1,2\n", "x.csv").ok());
  EXPECT_EQ(ParseTrace("submit_time,duration_s,gpus\n1,2\n", "x.csv").error().message,
            "x.csv:2: 2 columns, the header has 3");
  auto openb = ParseOpenbTrace(
      "name,num_gpu,gpu_milli,qos,creation_time,deletion_time,scheduled_time\n"
      "p0,1,460,LS,100,700,160\np1,0,0,BE,0,10,0\np2,2,1000,BE,5,,5\n",
      "o.csv");
  ASSERT_TRUE(openb.ok()) << openb.error().message;
  ASSERT_EQ(openb->size(), 1u) << "no GPU, or never deleted: skipped";
  EXPECT_EQ((*openb)[0].gpus, 1);
  EXPECT_DOUBLE_EQ((*openb)[0].duration_s, 540);
  EXPECT_EQ((*openb)[0].team, "LS");
  ReplayOptions o;
  o.policy.target_share = 2;
  EXPECT_EQ(Replay({}, o).error().message, "policy: target_share must be in (0, 1]");
  o = ReplayOptions{};
  o.reserve_after_s = -1;
  EXPECT_EQ(Replay({}, o).error().message, "--reserve-after must be 0 or more seconds");
}

// What would make a replay run for ever, or for hours, is refused before it starts: far-off
// submit times (a second no longer moves the clock), runs or spans over 366 days, a time
// scale that spreads the trace beyond that, too many jobs, too many decisions.
TEST(Replay, BoundsKeepEveryReplayShort) {
  const std::string head = "submit_time,duration_s,gpus\n";
  EXPECT_EQ(ParseTrace(head + "1e308,10,1\n", "t.csv").error().message,
            "t.csv:2: submit_time '1e308' is more than 1e11 seconds (milliseconds?)");
  EXPECT_EQ(ParseTrace(head + "0,31700000,1\n", "t.csv").error().message,
            "t.csv:2: duration_s '31700000' is more than 366 days");
  EXPECT_FALSE(ParseOpenbTrace("num_gpu,creation_time,deletion_time\n1,0,1e12\n", "o.csv").ok());
  std::vector<TraceJob> one(1), two(2);
  one[0].duration_s = two[0].duration_s = two[1].duration_s = 10;
  two[1].submit_s = 86400 * 200;
  ReplayOptions o;
  o.time_scale = 1e-9;
  EXPECT_EQ(Replay(one, o).error().message,
            "--time-scale must be 0.001 to 1000000 and --size-scale more than 0");
  o.time_scale = 0.5;  // 200 days become 400
  EXPECT_EQ(Replay(two, o).error().message,
            "the jobs are submitted over 400 days at --time-scale 0.5; at most 366 days are "
            "replayed");
  o = ReplayOptions{};
  o.size_scale = 1e9;
  EXPECT_NE(Replay(one, o).error().message.find("--size-scale must be at most 1000"),
            std::string::npos);
  o = ReplayOptions{};
  o.policy.interval_s = 1;  // 200 days of 1 s decisions
  EXPECT_EQ(Replay(two, o).error().message,
            "17280010 decisions at --interval 1 s; at most 10,000,000 are replayed (a longer "
            "--interval)");
  o.policy.interval_s = 2;
  EXPECT_TRUE(Replay(two, o).ok());
  o.gpus_per_node = 1000;
  EXPECT_EQ(Replay(one, o).error().message, "--pool-gpus-per-node must be 1 to 64");
}

// Three days of jobs whose arrivals follow the time of day, from a fixed seed.
std::vector<TraceJob> DailyTrace(unsigned seed) {
  std::mt19937 rng(seed);
  std::exponential_distribution<double> run(1.0 / 3600);
  std::uniform_int_distribution<int> size(0, 3);
  std::vector<TraceJob> out;
  for (double t = 0; t < 3 * 86400;) {
    double rate = 1.0 / 120 * (1.2 + std::sin(2 * M_PI * t / 86400));  // jobs a second
    t += std::exponential_distribution<double>(rate)(rng);
    TraceJob j;
    j.submit_s = t;
    j.duration_s = 60 + run(rng);
    j.gpus = 1 << size(rng);
    out.push_back(j);
  }
  return out;
}

// Every setting of the grid is replayed as it is (the same figures as a replay of it alone);
// the one chosen is the cheapest within the objective; threads change nothing.
TEST(Tune, ChoosesTheCheapestSettingWithinTheObjective) {
  auto trace = DailyTrace(7);
  TuneOptions o;
  o.replay.policy.mode = ScaleMode::kPredictive;
  o.replay.policy.max_nodes = 200;
  o.replay.policy.target_share = 0.8;
  o.replay.policy.forecast_margin = 4;
  o.wait_p95_s = 30;
  o.shares = {0.7, 0.85, 1.0};
  o.margins = {0.5, 2, 6};
  o.threads = 3;
  auto t = Tune(trace, o);
  ASSERT_TRUE(t.ok()) << t.error().message;
  ASSERT_EQ(t->grid.size(), 18u);  // each margin recent and by hour of the day
  EXPECT_EQ(t->grid[1].target_share, 0.7);
  EXPECT_EQ(t->grid[1].forecast_margin, 0.5);
  EXPECT_TRUE(t->grid[1].margin_by_hour);
  EXPECT_EQ(t->grid[2].forecast_margin, 2);
  EXPECT_FALSE(t->grid[2].margin_by_hour);
  auto alone = [&](double share, double margin, bool by_hour = false) {
    ReplayOptions ro = o.replay;
    ro.policy.target_share = share;
    ro.policy.forecast_margin = margin;
    ro.policy.margin_by_hour = by_hour;
    auto r = Replay(trace, ro);
    EXPECT_TRUE(r.ok());
    return r.value();
  };
  auto cur = alone(0.8, 4);
  EXPECT_DOUBLE_EQ(t->current.result.gpu_hours_idle, cur.gpu_hours_idle);
  EXPECT_DOUBLE_EQ(t->current.result.wait_p95_s, cur.wait_p95_s);
  int within = 0;
  for (const auto& c : t->grid) {
    auto r = alone(c.target_share, c.forecast_margin, c.margin_by_hour);
    EXPECT_DOUBLE_EQ(c.result.gpu_hours_idle, r.gpu_hours_idle);
    EXPECT_DOUBLE_EQ(c.result.wait_p95_s, r.wait_p95_s);
    EXPECT_EQ(c.meets, r.wait_p95_s <= 30);
    within += c.meets;
  }
  // The grid spans both sides of the objective, or the choice would prove nothing.
  ASSERT_GT(within, 0);
  ASSERT_LT(within, 18);
  ASSERT_GE(t->chosen, 0);
  EXPECT_EQ(t->closest, -1);
  const auto& best = t->grid[static_cast<size_t>(t->chosen)];
  EXPECT_TRUE(best.meets);
  for (const auto& c : t->grid) {
    if (c.meets) {
      EXPECT_GE(c.result.gpu_hours_idle, best.result.gpu_hours_idle);
    }
  }
  // A share of 1 with the smallest margin is the cheapest setting of all, and over the objective.
  EXPECT_FALSE(t->grid[12].meets);
  EXPECT_LT(t->grid[12].result.gpu_hours_idle, best.result.gpu_hours_idle);

  o.threads = 1;
  auto one = Tune(trace, o);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->chosen, t->chosen);
  for (size_t i = 0; i < t->grid.size(); ++i) {
    EXPECT_DOUBLE_EQ(one->grid[i].result.gpu_hours_idle, t->grid[i].result.gpu_hours_idle);
  }

  // JSON: the chosen setting and its saving against the current one.
  auto text = TuneJson(t.value(), o.replay.policy.mode, 30);
  EXPECT_NE(text.find("\"objective\":{\"wait_p95_s\":3E1}"), std::string::npos) << text;
  EXPECT_NE(text.find("\"chosen\":{\"target_share\":"), std::string::npos) << text;
  EXPECT_NE(text.find("\"closest\":null"), std::string::npos) << text;
}

// Out of reach: every job of a burst waits for its node, whatever the share. No setting is
// chosen; the lowest p95 is named instead. Bad grid values are refused.
TEST(Tune, NoSettingWithinTheObjectiveNamesTheLowestP95) {
  std::vector<TraceJob> trace;
  for (int burst = 0; burst < 5; ++burst) {
    for (int i = 0; i < 10; ++i) trace.push_back({burst * 20000.0 + i, 600, 8, "", -1});
  }
  TuneOptions o;
  o.replay.policy.mode = ScaleMode::kReactive;
  o.replay.policy.lead_time_s = 300;
  o.wait_p95_s = 10;
  auto t = Tune(trace, o);
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(t->grid.size(), 17u) << "shares 0.2 to 1.0; reactive has no margins";
  EXPECT_EQ(t->chosen, -1);
  ASSERT_GE(t->closest, 0);
  for (const auto& c : t->grid) {
    EXPECT_FALSE(c.meets);
    EXPECT_GE(c.result.wait_p95_s, 300);
    EXPECT_GE(c.result.wait_p95_s, t->grid[static_cast<size_t>(t->closest)].result.wait_p95_s);
  }
  EXPECT_NE(TuneJson(t.value(), ScaleMode::kReactive, 10).find("\"chosen\":null"),
            std::string::npos);

  o.shares = {0.5, 1.5};
  EXPECT_EQ(Tune(trace, o).error().message, "target share 1.5 is not in (0, 1]");
  o.shares = {};
  o.wait_p95_s = -1;
  EXPECT_FALSE(Tune(trace, o).ok());

  // Cancelled (a controller stopping): the replays stop, and the tune fails.
  o.wait_p95_s = 10;
  std::atomic<bool> cancel{true};
  o.replay.cancel = &cancel;
  auto cancelled = Tune(trace, o);
  ASSERT_FALSE(cancelled.ok());
  EXPECT_EQ(cancelled.error().code, ErrorCode::kUnavailable);
  std::vector<TraceJob> long_trace;  // long enough for the replay to look at the flag
  for (int i = 0; i < 5000; ++i) long_trace.push_back({i * 60.0, 600, 1, "", -1});
  EXPECT_EQ(Replay(long_trace, o.replay).error().code, ErrorCode::kUnavailable);
  cancel = false;
  EXPECT_TRUE(Replay(long_trace, o.replay).ok());
}

// A rise within the lead time that only headroom can meet: half the load arrives at once, every
// few hours. Reactive keeps that headroom only at a share of 0.5 or so, so its grid goes below
// 0.6, and the tune finds the share there.
TEST(Tune, AReactivePoolFacingASteepRiseIsOfferedAShareUnder0Point6) {
  std::vector<TraceJob> trace;
  for (int i = 0; i < 4; ++i) trace.push_back({double(i), 50000, 8, "", -1});  // the base
  for (int burst = 1; burst <= 4; ++burst) {
    for (int i = 0; i < 4; ++i) trace.push_back({burst * 10000.0 + i, 1200, 8, "", -1});
  }
  TuneOptions o;
  o.replay.policy.mode = ScaleMode::kReactive;
  o.replay.policy.lead_time_s = 300;
  o.replay.initial_nodes = 4;
  o.wait_p95_s = 60;
  auto t = Tune(trace, o);
  ASSERT_TRUE(t.ok()) << t.error().message;
  ASSERT_EQ(t->grid.size(), 17u);
  for (const auto& c : t->grid) {
    if (c.target_share >= 0.6) {
      EXPECT_FALSE(c.meets) << c.target_share << ": p95 " << c.result.wait_p95_s;
    }
  }
  ASSERT_GE(t->chosen, 0) << "no share met the objective";
  const auto& chosen = t->grid[static_cast<size_t>(t->chosen)];
  EXPECT_LT(chosen.target_share, 0.6);
  EXPECT_GE(chosen.target_share, 0.45) << "lower shares keep more nodes than the rise needs";
  EXPECT_LE(chosen.result.wait_p95_s, 60);
}

}  // namespace
}  // namespace gpufleet::sched
