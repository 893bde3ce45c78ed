// Live consolidation (light nodes emptied, their movable jobs moved) and tuning on the pool's
// own past, on demand and on a schedule, with the fixture of scaling_fixture.h.

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "scaling/tests/scaling_fixture.h"

namespace gpufleet::scaling {
namespace {

namespace json = boost::json;

// Node 0 runs A (6 GPUs, not movable) and T (2); M (2, movable) waits for a second node, node 1.
// T ends. Node 0 is not lightly used (6 of 8); node 1 is (2 of 8, movable), and after
// idle_before_remove (60 s) its job fits node 0: M moves there, keeping its progress, and node 1
// is drained and removed. Then U (4, not movable) gets a node of its own and A ends: node
// 0 runs only M and is light, node 1 runs U and is light too but cannot be emptied; M moves to
// node 1 and node 0 goes.
TEST_F(ScalingTest, ConsolidationMovesMovableJobsOffALightNodeAndRemovesIt) {
  scaling_->Tick();
  ASSERT_TRUE(WaitFor([&] { return Ready() == 1; }));
  auto submit = [&](int gpus, bool movable, int64_t duration_ms = 0) {
    workload::JobSpec s;
    s.team = "vision";
    s.pool = "h100";
    s.gpus = gpus;
    s.movable = movable;
    s.duration_ms = duration_ms;
    auto j = jobs_->Submit(s);
    EXPECT_TRUE(j.ok()) << j.error().message;
    return j.value();
  };
  auto a = submit(6, false);
  auto t = submit(2, false);
  auto m = submit(2, true, 3'600'000);
  EXPECT_EQ(m.state, workload::JobState::kQueued);
  Decide();
  ASSERT_TRUE(WaitFor([&] { return Ready() == 2; }));
  jobs_->Tick();
  int64_t m_started = jobs_->Get(m.id)->start_ms;
  EXPECT_EQ(jobs_->Get(m.id)->placement.at(0).node, "h100-0001");
  ASSERT_TRUE(jobs_->Cancel(t.id).ok());
  Decide();  // light from here on
  for (int i = 0; i < 5; ++i) Decide();
  EXPECT_EQ(jobs_->Get(m.id)->moves, 0) << "light for 50 s: not yet";
  Decide();
  auto ev = LastEvent();
  EXPECT_EQ(ev.at("kind"), "consolidate") << ev;
  EXPECT_EQ(ev.at("reason"), "consolidate");
  EXPECT_EQ(ev.at("delta"), -1);
  EXPECT_EQ(ev.at("nodes"), json::parse(R"(["h100-0001"])"));
  EXPECT_NE(ev.at("detail").as_string().find(
                "1 node(s) used at most 50% of their GPUs for 1m emptied; 1 wanted, 2 ready: job " +
                std::to_string(m.id) + " h100-0001 -> h100-0000"),
            std::string::npos)
      << ev;
  auto moved = jobs_->Get(m.id).value();
  EXPECT_EQ(moved.state, workload::JobState::kRunning);
  EXPECT_EQ(moved.moves, 1);
  EXPECT_EQ(moved.placement.at(0).node, "h100-0000");
  EXPECT_EQ(moved.placement.at(0).gpus, (std::vector<int>{6, 7})) << "the GPUs A left free";
  EXPECT_EQ(moved.reason, "moved from h100-0001 to h100-0000 (consolidation)");
  ASSERT_TRUE(WaitFor([&] { return States()["retired"] == 1; })) << Ready();
  EXPECT_EQ(jobs_->Get(a.id)->placement.at(0).node, "h100-0000") << "A never moves";
  // M keeps the run time it had: it ends an hour after its first start, not after its move.
  clock_->Set(m_started + 3'600'000 - 1000);
  jobs_->Tick();
  EXPECT_EQ(jobs_->Get(m.id)->state, workload::JobState::kRunning);
  clock_->Advance(1000);
  jobs_->Tick();
  EXPECT_EQ(jobs_->Get(m.id)->state, workload::JobState::kCompleted);
  EXPECT_NEAR(jobs_->Get(m.id)->gpu_hours, 2.0, 1e-9);

  // Now only a job that is not movable is on a light node: it stays.
  auto m2 = submit(2, true);
  auto u = submit(4, false);
  Decide();
  ASSERT_TRUE(WaitFor([&] { return Ready() == 2; }));
  jobs_->Tick();
  std::string u_node = jobs_->Get(u.id)->placement.at(0).node;
  EXPECT_NE(u_node, "h100-0000");
  ASSERT_TRUE(jobs_->Cancel(a.id).ok());
  for (int i = 0; i < 8; ++i) Decide();
  ev = LastEvent();
  EXPECT_EQ(ev.at("kind"), "consolidate") << ev;
  EXPECT_EQ(ev.at("nodes"), json::parse(R"(["h100-0000"])"));
  EXPECT_EQ(jobs_->Get(m2.id)->placement.at(0).node, u_node);
  EXPECT_EQ(jobs_->Get(u.id)->placement.at(0).node, u_node);
  EXPECT_EQ(jobs_->Get(u.id)->moves, 0);
}

// A node consolidation has emptied but whose drain does not complete (here the fleet is told
// the node still runs something) is not removed, and an event says so.
TEST_F(ScalingTest, AConsolidatedNodeThatDoesNotDrainIsKeptAndSaysWhy) {
  scaling_->Tick();
  ASSERT_TRUE(WaitFor([&] { return Ready() == 1; }));
  auto submit = [&](int gpus, bool movable) {
    workload::JobSpec s;
    s.team = "vision";
    s.pool = "h100";
    s.gpus = gpus;
    s.movable = movable;
    auto j = jobs_->Submit(s);
    EXPECT_TRUE(j.ok()) << j.error().message;
    return j.value();
  };
  submit(6, false);
  auto t = submit(2, false);
  auto m = submit(2, true);
  Decide();
  ASSERT_TRUE(WaitFor([&] { return Ready() == 2; }));
  jobs_->Tick();
  ASSERT_EQ(jobs_->Get(m.id)->placement.at(0).node, "h100-0001");
  ASSERT_TRUE(jobs_->Cancel(t.id).ok());
  fleet_->set_busy_check([](const std::string& n) { return n == "h100-0001"; });
  for (int i = 0; i < 7; ++i) Decide();
  auto ev = LastEvent();
  EXPECT_EQ(ev.at("kind"), "consolidate_failed") << ev;
  EXPECT_EQ(ev.at("delta"), 0);
  EXPECT_EQ(json::value_to<std::string>(ev.at("detail")),
            "h100-0001 emptied, not removed: it is draining: drain by autoscaler: waiting for its "
            "jobs to end; moved: job " +
                std::to_string(m.id) + " h100-0001 -> h100-0000")
      << ev;
  EXPECT_EQ(jobs_->Get(m.id)->placement.at(0).node, "h100-0000");
  EXPECT_EQ(States()["draining"], 1);
  EXPECT_EQ(States()["retired"], 0) << "not removed";
}

// Tuning on the pool's own jobs: refused with too few of them; then the cheapest setting within
// the objective is applied to the policy, with a policy event that names it.
TEST_F(ScalingTest, TuneReplaysThePoolsJobsAndAppliesTheCheapestSetting) {
  EXPECT_EQ(scaling_->Tune("nowhere", {}, "test").error().code, ErrorCode::kNotFound);
  auto roomy = scaling_->Get("h100")->scaling;
  roomy.policy.target_share = 0.6;
  ASSERT_TRUE(scaling_->SetPolicy(roomy, "test").ok());
  for (int i = 0; i < 40; ++i) {
    workload::JobSpec s;
    s.team = i % 2 ? "vision" : "nlp";
    s.pool = "h100";
    s.gpus = 1 + i % 4;
    s.duration_ms = (20 + 7 * (i % 5)) * 60'000;
    ASSERT_TRUE(jobs_->Submit(s).ok());
    if (i == 9) {
      auto few = scaling_->Tune("h100", {}, "test");
      ASSERT_FALSE(few.ok());
      EXPECT_EQ(few.error().code, ErrorCode::kConflict);
      EXPECT_EQ(few.error().message,
                "pool 'h100' has 10 jobs to replay in its history; tuning needs at least 20");
    }
    for (int k = 0; k < 30; ++k) {  // 5 minutes between submissions
      Decide();
      jobs_->Tick();
    }
  }
  TuneRequest req;
  req.wait_p95_s = 600;
  auto dry = scaling_->Tune("h100", req, "test");
  ASSERT_TRUE(dry.ok()) << dry.error().message;
  EXPECT_EQ(dry->jobs, 40u);
  EXPECT_FALSE(dry->applied);
  EXPECT_EQ(dry->result.grid.size(), 17u) << "reactive: shares 0.2 to 1.0 only";
  ASSERT_GE(dry->result.chosen, 0);
  EXPECT_DOUBLE_EQ(dry->result.current.target_share, 0.6);
  const auto& cheapest = dry->result.grid[static_cast<size_t>(dry->result.chosen)];
  EXPECT_GT(cheapest.target_share, 0.6) << "fewer nodes for the same jobs";
  EXPECT_LT(cheapest.result.gpu_hours_idle, dry->result.current.result.gpu_hours_idle);
  EXPECT_DOUBLE_EQ(scaling_->Get("h100")->scaling.policy.target_share, 0.6) << "a dry run";

  req.apply = true;
  auto applied = scaling_->Tune("h100", req, "alice");
  ASSERT_TRUE(applied.ok()) << applied.error().message;
  EXPECT_TRUE(applied->applied);
  const auto& best = applied->result.grid[static_cast<size_t>(applied->result.chosen)];
  EXPECT_DOUBLE_EQ(applied->after.policy.target_share, best.target_share);
  EXPECT_DOUBLE_EQ(scaling_->Get("h100")->scaling.policy.target_share, best.target_share);
  auto e = LastEvent();
  EXPECT_EQ(e.at("kind").as_string(), "policy");
  EXPECT_EQ(e.at("actor").as_string(), "alice");
  char share[32];
  std::snprintf(share, sizeof share, "target share %.2f", best.target_share);
  EXPECT_NE(std::string(e.at("detail").as_string()).find(share), std::string::npos)
      << e.at("detail").as_string();

  // Again: the policy has the cheapest setting already, so nothing changes and no event.
  size_t events = scaling_->Events("h100", 1000)->size();
  auto again = scaling_->Tune("h100", req, "bob");
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_FALSE(again->applied);
  EXPECT_EQ(again->not_applied, "");
  EXPECT_EQ(again->result.chosen, applied->result.chosen);
  EXPECT_EQ(scaling_->Events("h100", 1000)->size(), events);
}

// The replay of a tune runs on the live clock's time: a minimum the policy's schedule holds at
// the hour the jobs came is applied, one at another hour is not.
TEST_F(ScalingTest, TuneAppliesTheScheduledMinimumAtTheHoursItHolds) {
  clock_->Set(1'796'047'200'000);  // Monday 2026-11-30, 14:00 UTC
  for (int i = 0; i < 20; ++i) {
    workload::JobSpec s;
    s.team = "vision";
    s.pool = "h100";
    s.gpus = 1;
    s.duration_ms = 10 * 60'000;
    ASSERT_TRUE(jobs_->Submit(s).ok());
    clock_->Advance(60'000);
  }
  auto peak = [&](int from_hour) {
    auto sc = scaling_->Get("h100")->scaling;
    sc.policy.schedule = {{4, from_hour, from_hour + 1, true}};
    EXPECT_TRUE(scaling_->SetPolicy(sc, "test").ok());
    auto t = scaling_->Tune("h100", {}, "test");
    EXPECT_TRUE(t.ok()) << t.error().message;
    return t.ok() ? t->result.current.result.peak_nodes : -1;
  };
  EXPECT_EQ(peak(14), 4) << "4 nodes from 14:00 on weekdays: the jobs came then";
  EXPECT_LT(peak(2), 4) << "from 02:00: not when the jobs came";
}

// tune.every: the autoscaler tunes the pool on its own past on schedule, from the worker: with
// too few jobs it says so; with enough, it applies the cheaper share and says what it found.
TEST_F(ScalingTest, ScheduledTuneAppliesTheCheaperSettingAndSaysWhatItFound) {
  auto sc = scaling_->Get("h100")->scaling;
  sc.policy.target_share = 0.6;
  sc.tune.every_s = 3600;
  sc.tune.wait_p95_s = 600;
  ASSERT_TRUE(scaling_->SetPolicy(sc, "test").ok());
  auto tunes = [&] {
    std::vector<std::string> out;
    for (const auto& e : scaling_->Events("h100", 1000).value()) {
      auto o = json::parse(e.doc).as_object();
      if (o.at("kind") == "tune") out.emplace_back(o.at("detail").as_string());
    }
    return out;  // newest first
  };
  // A job every 5 minutes for 150 minutes; a tune is due an hour after the first decision that
  // sees the schedule, and every hour after.
  for (int i = 0; i < 30; ++i) {
    workload::JobSpec s;
    s.team = "vision";
    s.pool = "h100";
    s.gpus = 1 + i % 4;
    s.duration_ms = (20 + 7 * (i % 5)) * 60'000;
    ASSERT_TRUE(jobs_->Submit(s).ok());
    for (int k = 0; k < 30; ++k) {
      Decide();
      jobs_->Tick();
    }
    if (i == 12) {  // 65 minutes in, 13 jobs
      ASSERT_TRUE(WaitFor([&] { return tunes().size() == 1; }));
      EXPECT_EQ(tunes()[0],
                "not tuned: pool 'h100' has 13 jobs to replay in its history; tuning needs at "
                "least 20");
    }
  }
  ASSERT_TRUE(WaitFor([&] { return tunes().size() == 2; })) << tunes().size();
  std::string applied = tunes()[0];
  EXPECT_EQ(applied.rfind("25 jobs of the last 7d replayed, objective p95 wait <= 600 s: share 0.6 "
                          "-> share ",
                          0),
            0u)
      << applied;
  double share = scaling_->Get("h100")->scaling.policy.target_share;
  EXPECT_GT(share, 0.6);
  char want[32];
  std::snprintf(want, sizeof want, "-> share %g: ", share);
  EXPECT_NE(applied.find(want), std::string::npos) << applied;
  EXPECT_EQ(scaling_->Get("h100")->scaling.tune.every_s, 3600) << "the schedule stays";
  // The change is audited as the autoscaler's.
  auto audit = store_.audit->ListAudit(0, 1000);
  ASSERT_TRUE(audit.ok());
  bool found = false;
  for (const auto& a : audit.value()) found |= a.actor == "autoscaler" && a.action == "tune 0";
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace gpufleet::scaling
