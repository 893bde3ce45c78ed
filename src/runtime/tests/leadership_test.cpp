#include "runtime/leadership.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "store/store.h"
#include "tests/support/postgres.h"
#include "tests/support/temp_dir.h"

namespace gpufleet::runtime {
namespace {

struct Member {
  Member(store::Stores& stores, const std::string& id, int64_t lease_ms)
      : leadership(
            store::CoordinationOf(stores.database),
            LeadershipOptions{id, "https://" + id + ":8080", 1000, lease_ms, lease_ms / 3, 100},
            [] { return int64_t{3}; }, [this](bool leading) { changes.push_back(leading); }) {}
  bool Runs() {
    bool ran = false;
    bool opened = leadership.Gate([&] { ran = true; });
    EXPECT_EQ(opened, ran);
    return ran;
  }
  Leadership leadership;
  std::vector<bool> changes;  // what on_change was told, in order
};

// Two controllers on one PostgreSQL: one leads and its engines run; the other's do not. When
// the leader stops renewing (paused, or its database gone), it stops running engines by its
// own clock, and the other takes the lease once it expired, at the next epoch.
TEST(Leadership, OneOfTwoLeadsAndTheOtherTakesOverWhenTheLeaseRunsOut) {
  auto& pg = testing::SharedPostgres();
  ASSERT_TRUE(pg.ok()) << pg.error();
  auto url = pg.CreateDatabase("leadership_two");
  auto stores = store::Open(url);
  ASSERT_TRUE(stores.ok()) << stores.error().message;
  Member a(stores.value(), "ctl-a", 1'500), b(stores.value(), "ctl-b", 1'500);
  a.leadership.Round();
  b.leadership.Round();
  EXPECT_TRUE(a.leadership.leading());
  EXPECT_FALSE(b.leadership.leading());
  EXPECT_EQ(a.changes, std::vector<bool>{true});
  EXPECT_TRUE(b.changes.empty());
  EXPECT_TRUE(a.Runs());
  EXPECT_FALSE(b.Runs());
  EXPECT_EQ(a.leadership.epoch(), 1);
  EXPECT_EQ(b.leadership.epoch(), 1);  // the leader's, as b saw it
  EXPECT_FALSE(b.leadership.alone());
  auto list = b.leadership.Controllers();
  ASSERT_TRUE(list.ok()) << list.error().message;
  ASSERT_EQ(list->size(), 2u);
  EXPECT_TRUE(list->at(0).leader);
  EXPECT_EQ(list->at(0).epoch, 1);
  EXPECT_EQ(list->at(0).record.url, "https://ctl-a:8080");
  EXPECT_EQ(list->at(0).record.agents, 3);
  EXPECT_FALSE(list->at(1).leader);
  EXPECT_TRUE(list->at(1).live);

  // a renews no more (as if paused): after 0.5 s it still leads, after the lease less a
  // second's margin it runs nothing, by its own clock, before anyone took over.
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  EXPECT_TRUE(a.Runs());
  b.leadership.Round();
  EXPECT_FALSE(b.leadership.leading());  // not yet expired
  std::this_thread::sleep_for(std::chrono::milliseconds(1'000));
  EXPECT_FALSE(a.Runs());
  EXPECT_EQ(a.changes, (std::vector<bool>{true, false}));
  b.leadership.Round();
  EXPECT_TRUE(b.leadership.leading());
  EXPECT_EQ(b.leadership.epoch(), 2);
  EXPECT_EQ(b.leadership.changes(), 1);
  EXPECT_TRUE(b.Runs());
  // a comes back: it sees b lead and does not take over.
  a.leadership.Round();
  EXPECT_FALSE(a.leadership.leading());
  EXPECT_FALSE(a.Runs());
  EXPECT_EQ(a.leadership.changes(), 1);
  // b stops cleanly: the lease is given up and a takes it at its next round, epoch 3.
  b.leadership.Stop();
  a.leadership.Round();
  EXPECT_TRUE(a.leadership.leading());
  EXPECT_EQ(a.leadership.epoch(), 3);
  EXPECT_EQ(a.leadership.Controllers()->size(), 1u);  // b left the table
}

// SQLite: one controller, which leads from its first round.
TEST(Leadership, ALoneControllerOnSqliteLeads) {
  gpufleet::testing::TempDir dir("gf-lead");
  auto stores = store::Open("sqlite:" + dir.path() + "/db");
  ASSERT_TRUE(stores.ok()) << stores.error().message;
  Member a(stores.value(), "ctl-a", 15'000);
  a.leadership.Start();
  EXPECT_TRUE(a.leadership.leading());
  EXPECT_TRUE(a.leadership.alone());
  EXPECT_TRUE(a.Runs());
  a.leadership.Stop();
  EXPECT_FALSE(a.Runs());
}

}  // namespace
}  // namespace gpufleet::runtime
