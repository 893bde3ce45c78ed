#include "model/xid_catalog.h"

#include <gtest/gtest.h>

namespace gpufleet {
namespace {

TEST(XidCatalog, BuiltinCoversTheXidsOperatorsMeet) {
  auto c = XidCatalog::Builtin();
  for (int xid : {13, 31, 43, 45, 48, 61, 62, 63, 64, 68, 69, 74, 79, 92, 94, 95, 109, 119, 120}) {
    EXPECT_NE(c->Find(xid).description, "not in the XID catalogue") << xid;
  }
  EXPECT_EQ(c->Find(79).name, "GPU_HAS_FALLEN_OFF_THE_BUS");
  EXPECT_EQ(c->Find(79).severity, XidSeverity::kCritical);
  EXPECT_EQ(c->Find(79).action, "reboot_node");
  EXPECT_EQ(c->Find(79).hold_ms, 24 * 3'600'000);
  EXPECT_EQ(c->Find(48).action, "reset_gpu");
  EXPECT_EQ(c->Find(48).hold_ms, 3'600'000);
  EXPECT_EQ(c->Find(74).action, "check_nvlink");
  EXPECT_EQ(c->Find(13).severity, XidSeverity::kWarning);
  EXPECT_EQ(c->Find(13).action, "restart_application");
  EXPECT_EQ(c->Find(43).severity, XidSeverity::kInfo);
  EXPECT_EQ(c->Find(43).hold_ms, 0);
}

TEST(XidCatalog, UnknownXidsAreWarnings) {
  XidInfo x = XidCatalog::Builtin()->Find(999);
  EXPECT_EQ(x.name, "XID_999");
  EXPECT_EQ(x.severity, XidSeverity::kWarning);
  EXPECT_EQ(x.action, "none");
}

TEST(XidCatalog, BadFilesNameTheLineAndField) {
  struct Case {
    const char* yaml;
    const char* says;
  } cases[] = {
      {"foo: 1\n", "'xids' must be a list"},
      {"xids:\n  - {xid: 5}\n", "t.yaml:2: xids[0]: needs xid and severity"},
      {"xids:\n  - {xid: 5, severity: dire}\n", "xids[0].severity: 'dire' is not"},
      {"xids:\n  - {xid: 5, severity: info, action: panic}\n", "unknown action 'panic'"},
      {"xids:\n  - {xid: 5, severity: info}\n  - {xid: 5, severity: info}\n", "listed twice"},
      {"xids:\n  - {xid: 5, severity: info, hold: soon}\n", "hold: not a duration"},
      {"xids:\n  - {xid: 0, severity: info}\n", "out of range"},
  };
  for (const auto& c : cases) {
    auto r = XidCatalog::Parse(c.yaml, "t.yaml");
    ASSERT_FALSE(r.ok()) << c.yaml;
    EXPECT_NE(r.error().message.find(c.says), std::string::npos) << r.error().message;
  }
}

}  // namespace
}  // namespace gpufleet
