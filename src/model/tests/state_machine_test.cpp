#include "model/state_machine.h"

#include <gtest/gtest.h>

namespace gpufleet {
namespace {

constexpr NodeState kReady = NodeState::kReady;
constexpr NodeState kDegraded = NodeState::kDegraded;

TEST(StateMachine, HealthMovesActiveNodes) {
  EXPECT_EQ(OnHealth({kReady, kReady}, kDegraded), (NodeStatus{kDegraded, kDegraded}));
  EXPECT_EQ(OnHealth({kDegraded, kDegraded}, kReady), (NodeStatus{kReady, kReady}));
  EXPECT_EQ(OnHealth({NodeState::kJoining, NodeState::kJoining}, kReady),
            (NodeStatus{kReady, kReady}));
}

TEST(StateMachine, HealthDoesNotOverrideAdminStates) {
  for (NodeState admin : {NodeState::kCordoned, NodeState::kDrained, NodeState::kMaintenance,
                          NodeState::kDecommissioning}) {
    EXPECT_EQ(OnHealth({admin, admin}, kDegraded).state, admin) << ToString(admin);
  }
}

TEST(StateMachine, CordonAndUncordonLandOnHealth) {
  auto cordoned = ApplyAction({kReady, kReady}, NodeAction::kCordon, kReady);
  ASSERT_TRUE(cordoned.ok());
  EXPECT_EQ(cordoned->state, NodeState::kCordoned);
  auto again = ApplyAction(cordoned.value(), NodeAction::kCordon, kReady);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code, ErrorCode::kConflict);
  EXPECT_NE(again.error().message.find("cordoned"), std::string::npos);
  auto back = ApplyAction(cordoned.value(), NodeAction::kUncordon, kDegraded);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->state, kDegraded);  // uncordon returns to what the node's reports say
}

TEST(StateMachine, DrainGoesThroughDrainingToDrained) {
  auto draining = ApplyAction({kReady, kReady}, NodeAction::kDrain, kReady);
  ASSERT_TRUE(draining.ok());
  EXPECT_EQ(draining->state, NodeState::kDraining);
  EXPECT_FALSE(ApplyAction(draining.value(), NodeAction::kCordon, kReady).ok());
  auto drained = ApplyAction(draining.value(), NodeAction::kDrainDone, kReady);
  ASSERT_TRUE(drained.ok());
  EXPECT_EQ(drained->state, NodeState::kDrained);
  auto maintenance = ApplyAction(drained.value(), NodeAction::kMaintenance, kReady);
  ASSERT_TRUE(maintenance.ok());
  EXPECT_EQ(maintenance->state, NodeState::kMaintenance);
  EXPECT_FALSE(ApplyAction({kReady, kReady}, NodeAction::kDrainDone, kReady).ok());
}

TEST(StateMachine, UnreachableRemembersWhereToReturn) {
  NodeStatus lost = OnLost({kReady, kReady});
  EXPECT_EQ(lost.state, NodeState::kUnreachable);
  EXPECT_EQ(OnBack(lost, kReady), (NodeStatus{kReady, kReady}));
  EXPECT_EQ(OnBack(lost, kDegraded), (NodeStatus{kDegraded, kDegraded}));
  NodeStatus lost_cordoned = OnLost({NodeState::kCordoned, NodeState::kCordoned});
  EXPECT_EQ(OnBack(lost_cordoned, kReady).state, NodeState::kCordoned);
  EXPECT_EQ(OnLost(lost), lost);  // losing an unreachable node again changes nothing
}

TEST(StateMachine, ActionsOnUnreachableNodesApplyOnReturn) {
  NodeStatus lost = OnLost({kReady, kReady});
  auto cordoned = ApplyAction(lost, NodeAction::kCordon, kReady);
  ASSERT_TRUE(cordoned.ok());
  EXPECT_EQ(cordoned->state, NodeState::kUnreachable);
  EXPECT_EQ(OnBack(cordoned.value(), kReady).state, NodeState::kCordoned);
}

TEST(StateMachine, RetireOnlyAfterDecommission) {
  EXPECT_FALSE(ApplyAction({kReady, kReady}, NodeAction::kRetire, kReady).ok());
  auto d = ApplyAction({kReady, kReady}, NodeAction::kDecommission, kReady);
  ASSERT_TRUE(d.ok());
  auto r = ApplyAction(d.value(), NodeAction::kRetire, kReady);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->state, NodeState::kRetired);
  EXPECT_EQ(OnLost(r.value()).state, NodeState::kRetired);
  // A decommissioning node whose agent goes away stays out of the fleet, not unreachable.
  EXPECT_EQ(OnLost(d.value()), d.value());
}

TEST(StateMachine, NamesRoundTrip) {
  for (int i = 0; i <= static_cast<int>(NodeState::kRetired); ++i) {
    auto s = static_cast<NodeState>(i);
    EXPECT_EQ(ParseNodeState(ToString(s)), s);
  }
  EXPECT_FALSE(ParseNodeState("sleeping").has_value());
}

}  // namespace
}  // namespace gpufleet
