#include "runtime/ticker.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace gpufleet::runtime {
namespace {

struct Fixture {
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>(1'000'000);
  Ticker ticker{clock, 100};
  std::vector<std::string> ran;
  void Add(std::string name, int64_t every, bool leader_only = false, int64_t first = -1,
           Status result = {}) {
    ticker.Add({name, every,
                [this, name, result] {
                  ran.push_back(name);
                  return result;
                },
                leader_only, first, nullptr});
  }
};

// Tasks run when due, in the order added, each at its own period from its own first run.
TEST(Ticker, RunsEachDueTaskInTableOrderAtItsPeriod) {
  Fixture g;
  g.Add("every-tick", 100);
  g.Add("five-s", 5000);
  g.Add("soon", 60'000, false, 0);
  g.ticker.Arm(1'000'000);  // as Start() at that time, without its thread
  g.ran.clear();
  g.ticker.RunDue(1'000'000);
  EXPECT_EQ(g.ran, (std::vector<std::string>{"soon"}));
  g.ran.clear();
  g.ticker.RunDue(1'000'100);
  EXPECT_EQ(g.ran, (std::vector<std::string>{"every-tick"}));
  g.ran.clear();
  g.ticker.RunDue(1'005'000);
  EXPECT_EQ(g.ran, (std::vector<std::string>{"every-tick", "five-s"}));
  g.ran.clear();
  g.ticker.RunDue(1'009'000);
  EXPECT_EQ(g.ran, (std::vector<std::string>{"every-tick"}));
  g.ran.clear();
  g.ticker.RunDue(1'010'000);
  EXPECT_EQ(g.ran, (std::vector<std::string>{"every-tick", "five-s"}));
}

TEST(Ticker, LeaderOnlyTasksRunOnlyWhileLeading) {
  Fixture f;
  f.Add("engine", 100, true);
  f.Add("local", 100, false);
  f.ticker.Arm(1'000'000);
  f.ticker.set_leader(false);
  f.ticker.RunDue(1'000'100);
  EXPECT_EQ(f.ran, (std::vector<std::string>{"local"}));
  f.ran.clear();
  f.ticker.set_leader(true);
  f.ticker.RunDue(1'000'200);
  EXPECT_EQ(f.ran, (std::vector<std::string>{"engine", "local"}));
}

// The gate (the controller's fence) wraps leader-only tasks alone; what it refuses is not run
// and not counted.
TEST(Ticker, TheGateWrapsLeaderOnlyTasksAndMayRefuseThem) {
  Fixture f;
  f.Add("engine", 100, true);
  f.Add("local", 100, false);
  bool open = true;
  std::vector<std::string> inside;
  f.ticker.set_leader_gate([&](const std::function<void()>& fn) {
    if (!open) return false;
    inside.push_back("enter");
    fn();
    inside.push_back("leave");
    return true;
  });
  f.ticker.Arm(1'000'000);
  f.ticker.RunDue(1'000'100);
  EXPECT_EQ(f.ran, (std::vector<std::string>{"engine", "local"}));
  EXPECT_EQ(inside, (std::vector<std::string>{"enter", "leave"}));
  open = false;
  f.ran.clear();
  f.ticker.RunDue(1'000'200);
  EXPECT_EQ(f.ran, (std::vector<std::string>{"local"}));
  auto figures = f.ticker.Figures();
  EXPECT_EQ(figures[0].runs, 1);
  EXPECT_EQ(figures[1].runs, 2);
}

TEST(Ticker, CountsRunsAndErrorsAndKeepsTheLastError) {
  Fixture f;
  f.Add("good", 100);
  f.Add("bad", 100, false, -1, MakeError(ErrorCode::kUnavailable, "the disk is full"));
  f.ticker.Arm(1'000'000);
  f.ticker.RunDue(1'000'100);
  f.ticker.RunDue(1'000'200);
  auto figures = f.ticker.Figures();
  ASSERT_EQ(figures.size(), 2u);
  EXPECT_EQ(figures[0].name, "good");
  EXPECT_EQ(figures[0].runs, 2);
  EXPECT_EQ(figures[0].errors, 0);
  EXPECT_EQ(figures[0].last_run_ms, 1'000'200);
  EXPECT_EQ(figures[1].runs, 2);
  EXPECT_EQ(figures[1].errors, 2);
  EXPECT_EQ(figures[1].last_error, "the disk is full");
  EXPECT_GE(figures[1].total_duration_s, figures[1].last_duration_s);
}

TEST(Ticker, AnEarlyConditionRunsATaskBeforeItsTime) {
  Fixture f;
  bool big = false;
  int runs = 0;
  f.ticker.Add({"checkpoint", 60'000,
                [&] {
                  ++runs;
                  return Status{};
                },
                false, -1, [&] { return big; }});
  f.ticker.Arm(1'000'000);
  f.ticker.RunDue(1'000'100);
  EXPECT_EQ(runs, 0);
  big = true;
  f.ticker.RunDue(1'000'200);
  EXPECT_EQ(runs, 1);
  big = false;
  f.ticker.RunDue(1'030'000);
  EXPECT_EQ(runs, 1);  // the period counts from the early run
  f.ticker.RunDue(1'060'200);
  EXPECT_EQ(runs, 2);
}

// The thread runs the table on real time until Stop(), which waits for the task running.
TEST(Ticker, ItsThreadRunsTheTasksUntilStopped) {
  std::atomic<int> runs{0};
  Ticker ticker(RealClock(), 5);
  ticker.Add({"count", 1,
              [&] {
                ++runs;
                return Status{};
              },
              false, 0, nullptr});
  ticker.Start();
  for (int i = 0; i < 2000 && runs < 3; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ticker.Stop();
  int after = runs;
  EXPECT_GE(after, 3);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(runs, after);
}

}  // namespace
}  // namespace gpufleet::runtime
