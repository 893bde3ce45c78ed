#include "runtime/command_bus.h"

#include <gtest/gtest.h>

#include "proto/proto.h"

namespace gpufleet::runtime {
namespace {

struct Recorder : CommandOwner {
  std::vector<std::pair<std::string, int64_t>> answers;
  void OnResult(const std::string& node, const proto::CommandResult& r) override {
    answers.emplace_back(node, r.id);
  }
};

proto::CommandResult Answer(int64_t id) {
  proto::CommandResult r;
  r.id = id;
  r.action = "reset_gpu";
  r.ok = true;
  return r;
}

// One id space for every sender, each answer to the one that sent the command, once.
TEST(CommandBus, RoutesEachAnswerByIdToItsSenderOnce) {
  auto clock = std::make_shared<ManualClock>(1'700'000'000'000);
  CommandBus bus(clock);
  std::vector<std::pair<std::string, int64_t>> sent;
  bus.set_transport([&](const std::string& node, const proto::Command& c) {
    sent.emplace_back(node, c.id);
    return Status{};
  });
  Recorder health, drift;
  proto::Command a, b, c;
  ASSERT_TRUE(bus.Send("n1", a, &health).ok());
  ASSERT_TRUE(bus.Send("n2", b, &drift).ok());
  ASSERT_TRUE(bus.Send("n3", c, nullptr).ok());  // nobody waits for this one
  EXPECT_NE(a.id, b.id);
  EXPECT_NE(b.id, c.id);
  ASSERT_EQ(sent.size(), 3u);
  EXPECT_EQ(sent[1], (std::pair<std::string, int64_t>{"n2", b.id}));
  EXPECT_EQ(bus.pending(), 2u);

  bus.OnResult("n2", Answer(b.id));
  bus.OnResult("n1", Answer(a.id));
  bus.OnResult("n1", Answer(a.id));  // a repeat goes nowhere
  bus.OnResult("n3", Answer(c.id));
  bus.OnResult("n9", Answer(12345));  // an id never issued
  EXPECT_EQ(health.answers, (std::vector<std::pair<std::string, int64_t>>{{"n1", a.id}}));
  EXPECT_EQ(drift.answers, (std::vector<std::pair<std::string, int64_t>>{{"n2", b.id}}));
  EXPECT_EQ(bus.pending(), 0u);
}

// A controller started again issues ids after every id of the one before, and an owner that
// kept a command across the restart claims its answer.
TEST(CommandBus, IdsDoNotRepeatAcrossARestartAndClaimedAnswersArrive) {
  auto clock = std::make_shared<ManualClock>(1'700'000'000'000);
  int64_t before = 0;
  {
    CommandBus bus(clock);
    for (int i = 0; i < 1000; ++i) before = bus.Issue(nullptr);
  }
  clock->Advance(1);  // a restart takes at least a millisecond
  CommandBus again(clock);
  Recorder rollouts;
  again.Claim(before, &rollouts);
  EXPECT_GT(again.Issue(nullptr), before);
  again.OnResult("n1", Answer(before));
  EXPECT_EQ(rollouts.answers.size(), 1u);
}

TEST(CommandBus, WithoutATransportASendFailsAndTheTransportsErrorComesBack) {
  CommandBus bus(std::make_shared<ManualClock>());
  proto::Command cmd;
  EXPECT_EQ(bus.Send("n1", cmd, nullptr).error().code, ErrorCode::kUnavailable);
  bus.set_transport([](const std::string& node, const proto::Command&) -> Status {
    return MakeError(ErrorCode::kConflict, node + " is not connected");
  });
  auto s = bus.Send("n1", cmd, nullptr);
  EXPECT_EQ(s.error().code, ErrorCode::kConflict);
  EXPECT_EQ(s.error().message, "n1 is not connected");
}

// Routes for commands never answered (an agent that went away) do not pile up.
TEST(CommandBus, ForgetsCommandsNeverAnsweredAfterAWeek) {
  auto clock = std::make_shared<ManualClock>(1'700'000'000'000);
  CommandBus bus(clock);
  Recorder owner;
  int64_t old = bus.Issue(&owner);
  bus.Issue(&owner);
  clock->Advance(CommandBus::kPendingMs + 1);
  int64_t fresh = bus.Issue(&owner);
  EXPECT_EQ(bus.pending(), 1u);
  bus.OnResult("n", Answer(old));
  bus.OnResult("n", Answer(fresh));
  EXPECT_EQ(owner.answers.size(), 1u);
}

}  // namespace
}  // namespace gpufleet::runtime
