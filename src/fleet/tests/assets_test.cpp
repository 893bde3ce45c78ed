// The asset register over a real (SQLite) store: discovery, moves, imports, lifecycle steps.

#include "fleet/assets.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "tests/support/temp_dir.h"

namespace gpufleet {
namespace {

class AssetServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    clock_->Set(1'800'000'000'000);  // 2027-01-15
    Reopen();
  }
  void TearDown() override {
    assets_.reset();
    store_ = {};
  }
  void Reopen() {
    assets_.reset();
    store_ = {};
    store_ = store::Open("sqlite:" + (dir_ / "db").string()).value();
    assets_ = std::make_unique<AssetService>(*store_.assets, clock_);
    ASSERT_TRUE(assets_->Load().ok());
  }
  static NodeSighting Node(const std::string& name, std::vector<std::string> serials,
                           int64_t seen = 1) {
    NodeSighting n{name, "train", seen, {}};
    for (size_t i = 0; i < serials.size(); ++i) {
      n.gpus.push_back({static_cast<int>(i), serials[i], "GPU-" + serials[i], "H100-SXM5-80GB"});
    }
    return n;
  }
  void Observe(const std::vector<NodeSighting>& nodes) {
    clock_->Advance(1000);
    ASSERT_TRUE(assets_->Observe(nodes, {{"train", "fra1"}}).ok());
  }
  std::vector<std::string> History(const std::string& id) {
    auto h = assets_->History(id, 100);
    EXPECT_TRUE(h.ok());
    std::vector<std::string> out;
    for (const auto& e : h.value()) {
      out.push_back(e.kind + " " + e.from + ">" + e.to + (e.note.empty() ? "" : " " + e.note));
    }
    return out;
  }
  Result<AssetImport> Import(const std::string& csv, bool dry = false) {
    auto rows = ParseAssetsCsv(csv);
    if (!rows.ok()) return rows.error();
    return assets_->Import(rows.value(), "ops", dry);
  }

  testing::TempDir tmp_{"gf-assets"};  // removed with everything in it after the test
  std::filesystem::path dir_ = tmp_.path();
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  store::Stores store_;
  std::unique_ptr<AssetService> assets_;
};

// A GPU pulled from one node and put in another is the same asset, with both moves in its
// history; it survives a restart of the controller.
TEST_F(AssetServiceTest, AGpuMovedBetweenNodesKeepsItsHistory) {
  Observe({Node("a", {"S1", "S2"}), Node("b", {"S3"})});
  EXPECT_EQ(assets_->List({}).size(), 5u);  // two nodes, three GPUs
  auto s2 = assets_->Get("S2");
  ASSERT_TRUE(s2.ok());
  EXPECT_EQ(s2->node, "a");
  EXPECT_EQ(s2->gpu_index, 1);
  EXPECT_EQ(s2->site, "fra1");
  EXPECT_EQ(s2->state, AssetState::kInService);
  // Out of a: a spare on the shelf.
  Observe({Node("a", {"S1"}), Node("b", {"S3"})});
  EXPECT_EQ(assets_->Get("S2")->state, AssetState::kSpare);
  EXPECT_EQ(assets_->Get("S2")->last_node, "a:1");
  Reopen();
  // Into b's second slot: in service again.
  Observe({Node("a", {"S1"}), Node("b", {"S3", "S2"})});
  s2 = assets_->Get("S2");
  EXPECT_EQ(s2->node, "b");
  EXPECT_EQ(s2->gpu_index, 1);
  EXPECT_EQ(s2->name, "b/gpu1");
  EXPECT_EQ(s2->state, AssetState::kInService);
  // Put in a while b is down: b still lists it, so it stays in b until b reports again without
  // it (two reports of one serial never make it flap between nodes).
  Observe({Node("a", {"S1", "S2"}, 5), Node("b", {"S3", "S2"}, 2)});
  EXPECT_EQ(assets_->Get("S2")->node, "b");
  Observe({Node("a", {"S1", "S2"}, 5), Node("b", {"S3"}, 6)});
  EXPECT_EQ(assets_->Get("S2")->node, "a");
  EXPECT_EQ(History("S2"),
            (std::vector<std::string>{"discovered >a:1", "removed a:1>",
                                      "state in_service>spare no node reports it", "moved a:1>b:1",
                                      "state spare>in_service found in b:1", "moved b:1>a:1"}));
  // Nothing changed: nothing written.
  Observe({Node("a", {"S1", "S2"}, 5), Node("b", {"S3"}, 6)});
  Observe({Node("a", {"S1", "S2"}, 7), Node("b", {"S3", "S2"}, 8)});
  EXPECT_EQ(History("S2").size(), 6u);
  EXPECT_EQ(History("S1"), (std::vector<std::string>{"discovered >a:0"}));
}

// An operator's RMA of an installed GPU stands while it stays installed; a node that leaves
// the fleet becomes a spare.
TEST_F(AssetServiceTest, LifecycleStepsAreRecordedAndDiscoveryDoesNotUndoThem) {
  Observe({Node("a", {"S1"})});
  auto rma = assets_->SetState("S1", AssetState::kRma, "RMA-2291", "ops");
  ASSERT_TRUE(rma.ok());
  Observe({Node("a", {"S1"})});
  EXPECT_EQ(assets_->Get("S1")->state, AssetState::kRma);
  // Pulled, repaired, back on the shelf.
  Observe({Node("a", {})});
  ASSERT_TRUE(assets_->SetState("S1", AssetState::kSpare, "repaired: new HBM", "ops").ok());
  EXPECT_EQ(History("S1"),
            (std::vector<std::string>{"discovered >a:0", "rma in_service>rma RMA-2291",
                                      "removed a:0>", "repaired rma>spare repaired: new HBM"}));
  EXPECT_FALSE(assets_->SetState("nope", AssetState::kSpare, "", "ops").ok());
  Observe({});
  EXPECT_EQ(assets_->Get("a")->state, AssetState::kSpare);
}

TEST_F(AssetServiceTest, ImportsApplyEveryRowOrNone) {
  Observe({Node("a", {"S1"})});
  auto done = Import(
      "serial,asset_tag,purchase_date,warranty_end,status\n"
      "S1,T-1,2024-01-10,2027-01-10,active\n"
      "S9,T-9,2026-06-01,2029-06-01,\n");
  ASSERT_TRUE(done.ok()) << done.error().message;
  EXPECT_EQ(done->created, 1);
  EXPECT_EQ(done->updated, 1);
  EXPECT_EQ(done->applied, 2);
  EXPECT_EQ(assets_->Get("S9")->state, AssetState::kSpare);  // new, no status: on the shelf
  EXPECT_EQ(assets_->Get("S1")->state, AssetState::kInService);
  EXPECT_EQ(History("S1").back(), "edited >asset_tag, purchase_date, warranty_end line 2");
  // The same file again changes nothing.
  auto again = Import("serial,asset_tag\nS1,T-1\nS9,T-9\n");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->unchanged, 2);
  EXPECT_EQ(again->applied, 0);
  // A tag another asset has: refused, and the good row before it not applied either.
  auto clash = Import("serial,rack,asset_tag\nS9,r1,\nS5,,T-1\n");
  ASSERT_FALSE(clash.ok());
  EXPECT_EQ(clash.error().message,
            "line 3, field 'asset_tag': 'T-1' is the asset tag of 'S1' (asset tags are unique)");
  EXPECT_EQ(assets_->Get("S9")->rack, "");
  // Moving a tag from one asset to another in one file is fine.
  ASSERT_TRUE(Import("serial,asset_tag\nS9,\nS1,T-9\n").ok());
  // A node's name given as a GPU's serial.
  auto kind = Import("serial\na\n");
  ASSERT_FALSE(kind.ok());
  EXPECT_EQ(kind.error().message,
            "line 2, field 'serial': 'a' is a node in the register, not a gpu");
  // A dry run counts and applies nothing.
  auto dry = Import("serial,rack\nS1,r5\nS10,\n", true);
  ASSERT_TRUE(dry.ok());
  EXPECT_EQ(dry->applied, 2);
  EXPECT_EQ(assets_->Get("S1")->rack, "");
  EXPECT_FALSE(assets_->Get("S10").ok());
  // The summary: warranty over for S1 (2027-01-10 < 2027-01-15); S9's ends in 2029.
  AssetSummary s = assets_->Summary(90);
  EXPECT_EQ(s.gpus.total, 2);
  EXPECT_EQ(s.nodes.total, 1);
  EXPECT_EQ(s.gpus.by_state.at("in_service"), 1);
  EXPECT_EQ(s.gpus.by_state.at("spare"), 1);
  EXPECT_EQ(s.warranty_expired, 1);
  EXPECT_TRUE(s.warranty_expiring.empty());
  EXPECT_EQ(s.gpu_age.at("3-4y"), 1);  // 2024-01-10 to 2027-01-15
  EXPECT_EQ(s.gpu_age.at("<1y"), 1);
  EXPECT_EQ(assets_->Summary(2000).warranty_expiring.size(), 1u);
}

}  // namespace
}  // namespace gpufleet
