#include "lifecycle/target_warnings.h"

#include <gtest/gtest.h>

namespace gpufleet::lifecycle {
namespace {

constexpr std::string_view kToday = "2026-12-07";

// The example of the issue: a pool on 580.95.05 asked to go to an older R580 driver that the
// matrix allows. Both are said: the downgrade (by the versions nodes run, newest first) and the
// known CVEs of the target (from the built-in bulletins), with the version that fixes them.
TEST(TargetWarnings, ADowngradeNamesTheNewerVersionsAndACveTheTargetsKnownOnes) {
  auto bulletins = BulletinSet::Builtin();
  auto matrix = CompatMatrix::Builtin();
  auto w = TargetWarnings(
      "driver", "580.65.06",
      {{"a", "580.95.05"}, {"b", "580.159.03"}, {"c", "580.65.06"}, {"d", ""}, {"e", "580.95.05"}},
      bulletins.get(), *matrix, kToday);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].kind, "downgrade");
  EXPECT_EQ(w[0].nodes, (std::vector<std::string>{"a", "b", "e"}));
  EXPECT_EQ(w[0].message,
            "driver 580.65.06 is a downgrade: 3 of the nodes run a newer one: 580.159.03 (1 node), "
            "580.95.05 (2 nodes)");
  EXPECT_EQ(w[1].kind, "cve");
  EXPECT_EQ(w[1].nodes.size(), 5u);
  EXPECT_EQ(w[1].message.rfind("driver 580.65.06 has ", 0), 0u) << w[1].message;
  EXPECT_NE(w[1].message.find("known CVEs: CVE-"), std::string::npos) << w[1].message;
  EXPECT_NE(w[1].message.find("more; 580.159.03 fixes them"), std::string::npos) << w[1].message;
}

TEST(TargetWarnings, TheLatestFixForwardSaysNothingAndFirmwareOnlyDowngrades) {
  auto bulletins = BulletinSet::Builtin();
  auto matrix = CompatMatrix::Builtin();
  EXPECT_TRUE(
      TargetWarnings("driver", "580.159.03", {{"a", "580.95.05"}}, bulletins.get(), *matrix, kToday)
          .empty());
  // Without bulletins, no CVE warning; a firmware downgrade is still one.
  EXPECT_TRUE(TargetWarnings("driver", "580.65.06", {{"a", "580.65.06"}}, nullptr, *matrix, kToday)
                  .empty());
  auto fw = TargetWarnings("gpu-firmware", "96.00.5E.00.01", {{"a", "96.00.89.00.01"}},
                           bulletins.get(), *matrix, kToday);
  ASSERT_EQ(fw.size(), 1u);
  EXPECT_EQ(fw[0].kind, "downgrade");
  EXPECT_EQ(fw[0].nodes, std::vector<std::string>{"a"});
}

}  // namespace
}  // namespace gpufleet::lifecycle
