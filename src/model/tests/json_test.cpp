#include "model/json.h"

#include <gtest/gtest.h>

namespace gpufleet {
namespace {

TEST(ModelJson, GpuRoundTrips) {
  Gpu g;
  g.index = 3;
  g.uuid = "GPU-1";
  g.serial = "1652";
  g.name = "NVIDIA L4";
  g.pci_bus_id = "00000000:3A:00.0";
  g.memory_total_bytes = 24ull << 30;
  g.vbios_version = "95.04";
  g.inforom_version = "G1";
  g.mig_mode = 0;
  g.error = "GPU_IS_LOST";
  auto back = GpuFromJson(ToJson(g));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->index, 3);
  EXPECT_EQ(back->uuid, "GPU-1");
  EXPECT_EQ(back->memory_total_bytes, 24ull << 30);
  EXPECT_EQ(back->mig_mode, 0);
  EXPECT_EQ(back->error, "GPU_IS_LOST");
  g.mig_mode = -1;
  EXPECT_EQ(GpuFromJson(ToJson(g))->mig_mode, -1);
}

TEST(ModelJson, ReadersNameTheFieldAndType) {
  auto o = ParseObject(R"({"name": 5, "count": "x", "ok": 1})");
  ASSERT_TRUE(o.ok());
  auto name = GetString(o.value(), "name");
  ASSERT_FALSE(name.ok());
  EXPECT_EQ(name.error().message, "field 'name' must be a string");
  EXPECT_EQ(GetInt(o.value(), "count").error().message, "field 'count' must be an integer");
  EXPECT_EQ(GetBool(o.value(), "ok").error().message, "field 'ok' must be true or false");
  EXPECT_EQ(GetString(o.value(), "missing").error().message, "field 'missing' is required");
  EXPECT_EQ(GetString(o.value(), "missing", "dflt").value(), "dflt");
}

TEST(ModelJson, ParseObjectRefusesNonObjects) {
  EXPECT_EQ(ParseObject("[1]").error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(ParseObject("{").error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(ParseObject("{").error().message.find("malformed JSON"), std::string::npos);
}

}  // namespace
}  // namespace gpufleet
