#include "model/asset.h"

#include <gtest/gtest.h>

namespace gpufleet {
namespace {

TEST(Assets, NetboxStatusesMapToTheFourStatesAndBack) {
  EXPECT_EQ(FromNetboxStatus("active"), AssetState::kInService);
  EXPECT_EQ(FromNetboxStatus("inventory"), AssetState::kSpare);
  EXPECT_EQ(FromNetboxStatus("planned"), AssetState::kSpare);
  EXPECT_EQ(FromNetboxStatus("staged"), AssetState::kSpare);
  EXPECT_EQ(FromNetboxStatus("failed"), AssetState::kRma);
  EXPECT_EQ(FromNetboxStatus("offline"), AssetState::kRetired);
  EXPECT_EQ(FromNetboxStatus("decommissioning"), AssetState::kRetired);
  EXPECT_FALSE(FromNetboxStatus("in_service"));
  for (auto s :
       {AssetState::kInService, AssetState::kSpare, AssetState::kRma, AssetState::kRetired}) {
    EXPECT_EQ(FromNetboxStatus(NetboxStatus(s)), s);
    EXPECT_EQ(ParseAssetState(ToString(s)), s);
  }
}

TEST(Assets, DatesAreCheckedAsCalendarDates) {
  EXPECT_EQ(ParseIsoDate("1970-01-02"), 1);
  EXPECT_EQ(ParseIsoDate("2024-02-29"), ParseIsoDate("2024-02-28").value() + 1);
  EXPECT_FALSE(ParseIsoDate("2027-02-29"));
  EXPECT_FALSE(ParseIsoDate("2027-13-01"));
  EXPECT_FALSE(ParseIsoDate("2027-1-01"));
  EXPECT_FALSE(ParseIsoDate("27-01-01x"));
}

constexpr const char* kCsv =
    "serial,name,asset_tag,status,site,location,rack,position,model,purchase_date,"
    "purchase_price,warranty_end\n"
    "1652223001234,,GPU-0042,inventory,fra1,hall-2,r07,,H100-SXM5-80GB,2024-03-01,30000,"
    "2027-03-01\n"
    "1652223001235,\"spare, top shelf\",,failed,fra1,,,,H100-SXM5-80GB,,,\n";

TEST(Assets, CsvRowsBecomePatchesOfTheColumnsGiven) {
  auto rows = ParseAssetsCsv(kCsv);
  ASSERT_TRUE(rows.ok()) << rows.error().message;
  ASSERT_EQ(rows->size(), 2u);
  const AssetPatch& p = rows.value()[0];
  EXPECT_EQ(p.where, "line 2");
  EXPECT_EQ(p.kind, "gpu");
  EXPECT_EQ(p.key, "1652223001234");
  EXPECT_EQ(p.set.at("purchase_price"), "30000");
  EXPECT_FALSE(p.set.count("comments"));  // not a column of the file: left as it is
  Asset a;
  a.serial = "1652223001234";
  a.comments = "kept";
  auto changed = ApplyPatch(p, a);
  EXPECT_EQ(a.state, AssetState::kSpare);
  EXPECT_EQ(a.asset_tag, "GPU-0042");
  EXPECT_EQ(a.purchase_price, 30000);
  EXPECT_EQ(a.comments, "kept");
  EXPECT_EQ(changed,
            (std::vector<std::string>{"asset_tag", "status", "site", "location", "rack", "model",
                                      "purchase_date", "purchase_price", "warranty_end"}));
  Asset b;
  ApplyPatch(rows.value()[1], b);
  EXPECT_EQ(b.name, "spare, top shelf");
  EXPECT_EQ(b.state, AssetState::kRma);
  EXPECT_TRUE(ApplyPatch(rows.value()[1], b).empty());  // the same row again changes nothing
}

// Each bad file is refused whole, with the line and the field.
TEST(Assets, BadRowsAreRefusedWithTheirLineAndField) {
  struct Case {
    std::string csv, error;
  };
  const std::string h = "serial,status,warranty_end,purchase_date\n";
  for (const auto& c : std::vector<Case>{
           {"serial,colour\n1,red\n", "line 1, field 'colour': unknown column (known: name,"},
           {"serial,serial\n1,2\n", "line 1, field 'serial': the column is there twice"},
           {"status\nactive\n", "line 1: the header needs a 'serial' column"},
           {h + "1,active,2027-01-01,2024-01-01\n2,bought,,\n",
            "line 3, field 'status': 'bought' is not a NetBox status (offline, active, planned, "
            "staged, failed, inventory, decommissioning)"},
           {h + "1,active,2027-02-30,\n",
            "line 2, field 'warranty_end': '2027-02-30' is not a "
            "date (YYYY-MM-DD)"},
           {h + "1,active,2023-01-01,2024-01-01\n",
            "line 2, field 'warranty_end': '2023-01-01' is before the purchase date 2024-01-01"},
           {h + ",active,,\n", "line 2, field 'serial': a GPU is known by its serial"},
           {h + "1,active,,\n\n1,failed,,\n", "line 4, field 'serial': '1' is also on line 2"},
           {h + "1,active\n", "line 2: 2 fields where the header has 4"},
           {"serial,purchase_price\n1,-3\n",
            "line 2, field 'purchase_price': '-3' must be a number, not negative"},
           {"serial,gpu_uuid\n1,nvidia-0\n", "line 2, field 'gpu_uuid': 'nvidia-0' is not a GPU"},
           {"kind,name,gpu_uuid\nnode,n1,GPU-1234\n",
            "line 2, field 'gpu_uuid': a node has no GPU UUID"},
           {"kind,name\nrack,n1\n", "line 2, field 'kind': 'rack' must be gpu or node"},
           {"serial,asset_tag\n1,T1\n2,T1\n",
            "line 3, field 'asset_tag': 'T1' is also on line 2 (asset tags are unique)"},
       }) {
    auto rows = ParseAssetsCsv(c.csv);
    ASSERT_FALSE(rows.ok()) << c.csv;
    EXPECT_EQ(rows.error().message.substr(0, c.error.size()), c.error) << rows.error().message;
  }
}

TEST(Assets, JsonImportsNameTheItemAndField) {
  auto ok = ParseAssetsJson(
      R"({"items":[{"kind":"node","name":"n1","rack":"r1","position":12},
                   {"serial":"9","purchase_price":null}]})");
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(ok.value()[0].key, "n1");
  EXPECT_EQ(ok.value()[0].set.at("position"), "12");
  EXPECT_EQ(ok.value()[1].set.at("purchase_price"), "");  // null clears
  auto bad = ParseAssetsJson(R"([{"serial":"9"},{"serial":"8","warranty_end":"soon"}])");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message, "items[1].warranty_end: 'soon' is not a date (YYYY-MM-DD)");
  auto unknown = ParseAssetsJson(R"({"items":[{"serial":"9","owner":"x"}]})");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("items[0].owner: unknown field"), std::string::npos);
}

// What an export writes, an import reads back to the same assets.
TEST(Assets, ExportsReadBackToTheSameAssets) {
  Asset gpu;
  gpu.serial = "1652223001234";
  gpu.name = "n1/gpu3";
  gpu.asset_tag = "GPU-0042";
  gpu.state = AssetState::kRma;
  gpu.site = "fra1";
  gpu.rack = "r07";
  gpu.gpu_uuid = "GPU-8c0d4a1e-23f1-4b5e-9a17-0f2c7d1e5a90";
  gpu.model = "H100-SXM5-80GB";
  gpu.purchase_date = "2024-03-01";
  gpu.purchase_price = 30250.5;
  gpu.warranty_end = "2027-03-01";
  gpu.comments = "RMA-7, \"row remap\"";
  Asset node;
  node.kind = "node";
  node.name = "n1";
  node.serial = "SN-991";
  node.position = "12";
  node.state = AssetState::kRetired;
  for (const auto& parsed :
       {ParseAssetsCsv(AssetsCsv({gpu, node})), ParseAssetsJson(AssetsExportJson({gpu, node}))}) {
    ASSERT_TRUE(parsed.ok()) << parsed.error().message;
    ASSERT_EQ(parsed->size(), 2u);
    std::vector<Asset> back(2);
    for (size_t i = 0; i < 2; ++i) ApplyPatch(parsed.value()[i], back[i]);
    EXPECT_EQ(AssetDoc(back[0]), AssetDoc(gpu));
    EXPECT_EQ(AssetDoc(back[1]), AssetDoc(node));
    EXPECT_EQ(back[1].id(), "n1");
  }
  auto doc = ParseAssetDoc(AssetDoc(gpu));
  ASSERT_TRUE(doc.ok());
  EXPECT_EQ(AssetDoc(doc.value()), AssetDoc(gpu));
}

}  // namespace
}  // namespace gpufleet
