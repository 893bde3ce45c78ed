// Commands relayed through the database to the controller that has the agent: two controllers'
// relays and buses on one store (SQLite here: the relay's statements are the same on both).

#include "controller/relay.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <vector>

#include "proto/proto.h"
#include "store/lease.h"
#include "store/store.h"
#include "tests/support/temp_dir.h"

namespace gpufleet {
namespace {

// One controller: its bus, its relay, the agents connected to it and what it sent them.
struct Ctl : runtime::CommandOwner {
  Ctl(const std::string& id, std::shared_ptr<store::Coordination> db,
      std::shared_ptr<ManualClock> clock)
      : bus(clock) {
    CommandRelay::Hooks hooks{[this](const std::string& node, const proto::Command& c) -> Status {
                                if (!agents.count(node))
                                  return MakeError(ErrorCode::kConflict, node + " not here");
                                sent.push_back({node, c.id});
                                return {};
                              },
                              [this](const std::string& node) { return agents.count(node) > 0; },
                              [this] { return alone; }, [this] { return leading; }};
    relay = std::make_unique<CommandRelay>(id, db, bus, clock, std::move(hooks));
    bus.set_transport(
        [this](const std::string& node, const proto::Command& c) { return relay->Send(node, c); });
    bus.set_unrouted([this](const std::string& node, const proto::CommandResult& r) {
      relay->OnUnrouted(node, r);
    });
  }
  void OnResult(const std::string& node, const proto::CommandResult& r) override {
    answers.push_back({node, r});
  }
  runtime::CommandBus bus;
  std::unique_ptr<CommandRelay> relay;
  std::set<std::string> agents;
  std::vector<std::pair<std::string, int64_t>> sent;
  std::vector<std::pair<std::string, proto::CommandResult>> answers;
  bool alone = false, leading = false;
};

class RelayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = store::Open("sqlite:" + dir_.path() + "/s.db");
    ASSERT_TRUE(opened.ok()) << opened.error().message;
    stores_ = std::move(opened.value());
    db_ = store::CoordinationOf(stores_.database);
    clock_->Set(1'000'000);
  }
  proto::Command Install(const std::string& version) {
    proto::Command c;
    c.action = "install-driver";
    c.args = {version};
    return c;
  }
  testing::TempDir dir_;
  store::Stores stores_;
  std::shared_ptr<store::Coordination> db_;
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
};

TEST_F(RelayTest, ACommandReachesTheAgentOnAnotherControllerAndItsAnswerComesBack) {
  Ctl leader("a", db_, clock_), follower("b", db_, clock_), third("c", db_, clock_);
  leader.leading = true;
  leader.agents = {"n1"};
  follower.agents = {"n2"};
  auto here = Install("580.95.05");
  ASSERT_TRUE(leader.bus.Send("n1", here, &leader).ok());
  EXPECT_EQ(leader.sent.size(), 1u);  // its own agent: straight there
  auto there = Install("580.95.05");
  ASSERT_TRUE(leader.bus.Send("n2", there, &leader).ok());
  third.relay->Poll();  // not its agent: left alone
  EXPECT_TRUE(third.sent.empty());
  follower.relay->Poll();
  ASSERT_EQ(follower.sent.size(), 1u);
  EXPECT_EQ(follower.sent[0], std::make_pair(std::string("n2"), there.id));
  follower.relay->Poll();  // sent once
  EXPECT_EQ(follower.sent.size(), 1u);
  leader.relay->Poll();
  EXPECT_TRUE(leader.answers.empty());  // not answered yet
  // The agent answers the controller it is connected to; the answer goes to the issuer.
  follower.bus.OnResult("n2", {there.id, 0, "install-driver", true, "installed", 0, 1200});
  leader.relay->Poll();
  ASSERT_EQ(leader.answers.size(), 1u);
  EXPECT_EQ(leader.answers[0].first, "n2");
  EXPECT_EQ(leader.answers[0].second.id, there.id);
  EXPECT_TRUE(leader.answers[0].second.ok);
  EXPECT_EQ(leader.answers[0].second.message, "installed");
  EXPECT_EQ(leader.answers[0].second.duration_ms, 1200);
  EXPECT_TRUE(db_->RelayedCommands("a", true)->empty());  // forgotten once read
}

TEST_F(RelayTest, AloneTheLocalErrorStandsAndACommandNobodyTakesFailsAfterThirtySeconds) {
  Ctl leader("a", db_, clock_), follower("b", db_, clock_);
  leader.alone = true;
  auto c = Install("580.95.05");
  auto sent = leader.bus.Send("n9", c, &leader);
  ASSERT_FALSE(sent.ok());  // alone: nobody else could have the agent
  EXPECT_EQ(sent.error().code, ErrorCode::kConflict);
  EXPECT_TRUE(db_->RelayedCommands("a", true)->empty());
  leader.alone = false;
  auto posted = Install("580.95.05");
  ASSERT_TRUE(leader.bus.Send("n9", posted, &leader).ok());
  follower.relay->Poll();
  clock_->Advance(CommandRelay::kTakeMs - 1);
  leader.relay->Poll();
  EXPECT_TRUE(leader.answers.empty());
  clock_->Advance(2);
  leader.relay->Poll();
  ASSERT_EQ(leader.answers.size(), 1u);
  EXPECT_FALSE(leader.answers[0].second.ok);
  EXPECT_EQ(leader.answers[0].second.message, "no controller has the agent of node n9 connected");
  EXPECT_TRUE(db_->RelayedCommands("a", true)->empty());
  follower.agents = {"n9"};  // too late: withdrawn
  follower.relay->Poll();
  EXPECT_TRUE(follower.sent.empty());
}

// The leader dies after its command was sent: the next leader, which claimed the command's id
// when it read the rollouts back, gets the answer.
TEST_F(RelayTest, ANewLeaderGetsTheAnswerToADeadLeadersCommand) {
  int64_t id = 0;
  Ctl follower("b", db_, clock_), next("c", db_, clock_);
  follower.agents = {"n2"};
  {
    Ctl dead("a", db_, clock_);
    dead.leading = true;
    auto c = Install("580.95.05");
    ASSERT_TRUE(dead.bus.Send("n2", c, &dead).ok());
    id = c.id;
  }
  follower.relay->Poll();
  ASSERT_EQ(follower.sent.size(), 1u);
  follower.bus.OnResult("n2", {id, 0, "install-driver", true, "installed", 0, 900});
  next.bus.Claim(id, &next);
  next.relay->Poll();  // a follower reads its own answers only
  EXPECT_TRUE(next.answers.empty());
  next.leading = true;
  next.relay->Poll();
  ASSERT_EQ(next.answers.size(), 1u);
  EXPECT_EQ(next.answers[0].second.id, id);
}

// The agent left the controller that took the command before it was sent: a failed answer.
TEST_F(RelayTest, AnAgentGoneBeforeTheSendIsAFailedAnswer) {
  Ctl leader("a", db_, clock_), follower("b", db_, clock_);
  follower.agents = {"n2"};
  auto c = Install("580.95.05");
  ASSERT_TRUE(leader.bus.Send("n2", c, &leader).ok());
  CommandRelay::Hooks hooks{
      [](const std::string& node, const proto::Command&) -> Status {
        return MakeError(ErrorCode::kConflict, "the agent of node '" + node + "' is not connected");
      },
      [](const std::string&) { return true; }, [] { return false; }, [] { return false; }};
  runtime::CommandBus bus(clock_);
  CommandRelay leaving("b2", db_, bus, clock_, std::move(hooks));
  leaving.Poll();
  leader.relay->Poll();
  ASSERT_EQ(leader.answers.size(), 1u);
  EXPECT_FALSE(leader.answers[0].second.ok);
  EXPECT_EQ(leader.answers[0].second.message, "the agent of node 'n2' is not connected");
  follower.relay->Poll();
  EXPECT_TRUE(follower.sent.empty());
}

// The agent of a dead leader's command fails over and answers a controller that does not wait
// for it: the next leader, which claimed the command when it read its rollouts back, gets it.
TEST_F(RelayTest, AnAnswerNobodyHereWaitsForGoesToTheLeader) {
  Ctl follower("b", db_, clock_), next("c", db_, clock_);
  next.bus.Claim(77, &next);
  follower.bus.OnResult("n2", {77, 0, "install-driver", true, "installed", 0, 500});
  follower.bus.OnResult("n2", {78, 0, "sim-load", true, "", 0, 0});  // not a node action
  EXPECT_EQ(db_->RelayedCommands("x", true)->size(), 1u);
  next.relay->Poll();
  EXPECT_TRUE(next.answers.empty());  // not leading yet
  next.leading = true;
  next.relay->Poll();
  ASSERT_EQ(next.answers.size(), 1u);
  EXPECT_EQ(next.answers[0].second.id, 77);
  EXPECT_EQ(next.answers[0].second.message, "installed");
  // A leader, or a controller alone, has nobody else to keep it for.
  follower.alone = true;
  follower.bus.OnResult("n2", {79, 0, "reboot", true, "", 0, 0});
  next.bus.OnResult("n2", {80, 0, "reboot", true, "", 0, 0});
  EXPECT_TRUE(db_->RelayedCommands("x", true)->empty());
}

}  // namespace
}  // namespace gpufleet
