#include "model/bulletins.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <set>

namespace gpufleet {
namespace {

// A CSAF 2.0 advisory in the structure of NVIDIA's `<id>.json` documents (product tree of
// vendor / product_family / architecture / product_version branches, product ids such as
// linuxr580_tesla_580_95_05, product_status.fixed and known_affected, cvss_v3 scores), written
// for this test with the figures of bulletin 5703 (October 2025): CVE-2025-23280 (7.0) and
// CVE-2025-23300 (5.5), fixed in 580.95.05, 570.195.03 and 535.274.02, plus Windows, GeForce
// and vGPU rows that the importer must skip.
// (tests/fixtures/csaf/5703.json, shared with the service's and the end-to-end tests.)
const std::string kCsaf5703 = [] {
  std::ifstream in(std::string(GPUFLEET_SOURCE_DIR) + "/tests/fixtures/csaf/5703.json");
  return std::string(std::istreambuf_iterator<char>(in), {});
}();

// The structure of bulletin 5670 (July 2025): CVE-2025-23277 (7.3) is a Linux vGPU guest
// driver CVE only, scored with CVSS v4 here to show that v4 is read where v3 is absent.
constexpr char kCsafVgpuOnly[] = R"json({
  "document": {"category": "csaf_security_advisory", "csaf_version": "2.0",
    "title": "Security Bulletin: NVIDIA GPU Display Driver - July 2025",
    "tracking": {"id": "5670", "initial_release_date": "2025-07-24T00:00:00Z"}},
  "product_tree": {"branches": [{"category": "architecture", "name": "Linux(R570 vGPU 18)",
    "branches": [{"category": "product_version", "name": "Guest driver",
      "product": {"name": "570.172.08(vGPU 18.4)",
                  "product_id": "linuxr570_vgpu_18_guest_driver_570_172_08vgpu_18_4"}}]}]},
  "vulnerabilities": [{"cve": "CVE-2025-23277",
    "product_status": {"fixed": ["linuxr570_vgpu_18_guest_driver_570_172_08vgpu_18_4"]},
    "scores": [{"cvss_v4": {"baseScore": 7.3}, "products": []}]}]
})json";

const BulletinCve* FindCve(const Bulletin& b, std::string_view id) {
  for (const auto& c : b.cves) {
    if (c.id == id) return &c;
  }
  return nullptr;
}

std::set<std::string> CveIds(const VulnVerdict& v, std::string_view fixed_in = "") {
  std::set<std::string> out;
  for (const auto& e : v.cves) {
    if (fixed_in.empty() || e.fixed_in == fixed_in) out.insert(e.cve);
  }
  return out;
}

TEST(Bulletins, TheBuiltInFileParsesWithEveryPublishedRow) {
  auto set = BulletinSet::Builtin();
  ASSERT_NE(set, nullptr);
  EXPECT_EQ(set->bulletins().size(), 15u);
  const Bulletin* b = set->Find("5821");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->published, "2026-05-19");
  const BulletinCve* c = FindCve(*b, "CVE-2026-24187");
  ASSERT_NE(c, nullptr);
  EXPECT_DOUBLE_EQ(c->cvss, 8.8);
  EXPECT_EQ(c->fixes, (std::vector<BulletinFix>{{"driver", "R535", "535.309.01"},
                                                {"driver", "R580", "580.159.03"},
                                                {"driver", "R595", "595.71.05"}}));
  const BulletinCve* toolkit = FindCve(*set->Find("5659"), "CVE-2025-23266");
  ASSERT_NE(toolkit, nullptr);
  EXPECT_DOUBLE_EQ(toolkit->cvss, 9.0);
  EXPECT_EQ(toolkit->fixes[0], (BulletinFix{"container-toolkit", "", "1.17.8"}));
  // Ordered by publication.
  EXPECT_EQ(set->bulletins().front().id, "5520");
  EXPECT_TRUE(std::is_sorted(
      set->bulletins().begin(), set->bulletins().end(),
      [](const Bulletin& a, const Bulletin& b) { return a.published < b.published; }));
}

TEST(Bulletins, ABadFileIsRefusedWithItsLineAndField) {
  auto bad = BulletinSet::Parse(R"(version: 1
bulletins:
  - id: "1"
    product: x
    published: "2026-01-01"
    cves:
      - {id: CVE-2026-1, cvss: 7}
)",
                                "b.yaml");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message, "b.yaml:7: bulletins[0].cves[0].id: not a CVE id: CVE-2026-1");

  bad = BulletinSet::Parse(R"(version: 1
bulletins:
  - id: "1"
    product: x
    published: "2026-01-01"
    cves:
      - {id: CVE-2026-1234, cvss: 7, fixes: [{component: driver, branch: R580, fixed: 570.1}]}
)",
                           "b.yaml");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("bulletins[0].cves[0].fixes[0].fixed: 570.1 is not on "
                                     "branch R580"),
            std::string::npos)
      << bad.error().message;

  bad = BulletinSet::Parse(
      "version: 1\nbulletins:\n  - {id: '1', product: x, published: "
      "'2026-01-01', cves: [], colour: red}\n",
      "b.yaml");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("bulletins[0].colour: unknown field"), std::string::npos);
}

TEST(Csaf, NvidiasAdvisoryIsReadAsPublished) {
  auto b = ParseCsafAdvisory(kCsaf5703);
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_EQ(b->id, "5703");
  EXPECT_EQ(b->published, "2025-10-09");
  EXPECT_EQ(b->product, "NVIDIA GPU Display Driver");
  EXPECT_EQ(b->origin, "imported");
  // CVE-2025-23309 has only a Windows row: nothing a data-center Linux node runs.
  ASSERT_EQ(b->cves.size(), 2u);
  const BulletinCve* c = FindCve(*b, "CVE-2025-23280");
  ASSERT_NE(c, nullptr);
  EXPECT_DOUBLE_EQ(c->cvss, 7.0);
  EXPECT_EQ(c->cwe, 416);
  EXPECT_EQ(c->summary, "use-after-free");
  EXPECT_EQ(c->platform, "bare-metal");
  // GeForce, Windows and vGPU rows are skipped; the Tesla rows give one fix per branch.
  EXPECT_EQ(c->fixes, (std::vector<BulletinFix>{{"driver", "R580", "580.95.05"},
                                                {"driver", "R570", "570.195.03"},
                                                {"driver", "R535", "535.274.02"}}));
}

TEST(Csaf, AVgpuOnlyCveIsKeptAsVgpuAndV4IsReadWithoutV3) {
  auto b = ParseCsafAdvisory(kCsafVgpuOnly);
  ASSERT_TRUE(b) << b.error().message;
  ASSERT_EQ(b->cves.size(), 1u);
  EXPECT_EQ(b->cves[0].platform, "vgpu");
  EXPECT_TRUE(b->cves[0].fixes.empty());
  EXPECT_DOUBLE_EQ(b->cves[0].cvss, 7.3);
  // And a bare-metal node never matches it.
  BulletinSet set;
  set.Put(*b);
  auto v = JudgeNode(set, *CompatMatrix::Builtin(), {"570.133.20", ""}, "2025-08-01");
  EXPECT_TRUE(v.cves.empty());
}

TEST(Csaf, AMalformedAdvisoryIsRefusedWithTheJsonPath) {
  auto replace = [](std::string text, const std::string& from, const std::string& to) {
    const auto at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return text.replace(at, from.size(), to);
  };
  struct Case {
    std::string from, to, message;
  };
  const std::vector<Case> cases = {
      {R"("baseScore": 5.5)", R"("baseScore": "5.5")",
       "CSAF $.vulnerabilities[1].scores[0].cvss_v3.baseScore: not a number"},
      {R"("csaf_version": "2.0")", R"("csaf_version": "1.2")",
       "CSAF $.document.csaf_version: expected 2.0, not 1.2"},
      {R"("linuxr535_tesla_535_274_02"]})", R"("linuxr999_tesla_nope"]})",
       "CSAF $.vulnerabilities[1].product_status.fixed[2]: product linuxr999_tesla_nope is not "
       "in the product tree"},
      {R"({"cve": "CVE-2025-23300")", R"({"cve": 23300)",
       "CSAF $.vulnerabilities[1].cve: expected a string"},
      {R"("product": {"name": "570.195.03")", R"("product": {"name": "580.1")",
       "CSAF $.vulnerabilities[0].product_status.fixed[2]: 580.1 is not on branch R570"},
      {R"("initial_release_date": "2025-10-09T00:00:00Z")", R"("initial_release_date": "soon")",
       "CSAF $.document.tracking.initial_release_date: not a date: soon"},
  };
  for (const auto& c : cases) {
    auto b = ParseCsafAdvisory(replace(kCsaf5703, c.from, c.to));
    ASSERT_FALSE(b) << c.from;
    EXPECT_EQ(b.error().message, c.message);
  }
  EXPECT_FALSE(ParseCsafAdvisory("{not json"));
  // Ids become keys and parts of URLs: bounded and plain. A CVE id of 100,000 digits once
  // crashed the controller through std::regex's recursion.
  auto long_cve =
      ParseCsafAdvisory(replace(kCsaf5703, R"({"cve": "CVE-2025-23300")",
                                R"({"cve": "CVE-2025-)" + std::string(100'000, '1') + "\""));
  ASSERT_FALSE(long_cve);
  EXPECT_NE(long_cve.error().message.find("not a CVE id"), std::string::npos);
  EXPECT_LT(long_cve.error().message.size(), 300u);
  for (const std::string& id :
       std::vector<std::string>{"../../etc", std::string(70, '5'), "a b", ""}) {
    auto bad_id =
        ParseCsafAdvisory(replace(kCsaf5703, R"("id": "5703")", R"("id": ")" + id + "\""));
    ASSERT_FALSE(bad_id) << id;
    EXPECT_NE(bad_id.error().message.find("$.document.tracking.id"), std::string::npos)
        << bad_id.error().message;
  }
  auto none = ParseCsafAdvisory(
      replace(kCsaf5703, R"("vulnerabilities": [)", R"("vulnerabilities": [], "unused": [)"));
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message.find("$.vulnerabilities: no CVE"), std::string::npos);
}

// A fixture fleet judged against the built-in bulletins on 2026-12-02, by hand from
// data/security-bulletins.yaml and data/compat.yaml's branch table.
TEST(JudgeNode, AFixtureFleetMatchesTheHandComputedTable) {
  const auto& set = *BulletinSet::Builtin();
  const auto& matrix = *CompatMatrix::Builtin();
  const std::string today = "2026-12-02";

  // R580 (LTSB to 2028-06) at the May 2026 fix, toolkit at the June 2026 fix: clean.
  auto a = JudgeNode(set, matrix, {"580.159.03", "1.19.1"}, today);
  EXPECT_EQ(a.status, "ok");
  EXPECT_TRUE(a.cves.empty());
  EXPECT_EQ(a.fix, "");

  // 580.95.05: fixed for 5703, open to 5747's two and 5821's eleven R580 rows.
  auto b = JudgeNode(set, matrix, {"580.95.05", ""}, today);
  EXPECT_EQ(b.status, "exposed");
  EXPECT_EQ(b.branch, "R580");
  EXPECT_EQ(CveIds(b), (std::set<std::string>{"CVE-2025-33219", "CVE-2025-33220", "CVE-2026-24187",
                                              "CVE-2026-24190", "CVE-2026-24192", "CVE-2026-24193",
                                              "CVE-2026-24194", "CVE-2026-24196", "CVE-2026-24182",
                                              "CVE-2026-24197", "CVE-2026-24198", "CVE-2026-24199",
                                              "CVE-2025-33221"}));
  EXPECT_EQ(b.cves.front().cve, "CVE-2026-24187");  // highest CVSS first
  EXPECT_DOUBLE_EQ(b.max_cvss, 8.8);
  EXPECT_EQ(b.fix, "driver 580.159.03");
  EXPECT_EQ(b.fixed_driver, "580.159.03");

  // R535 at its last fix: no open CVE, but the branch ended in 2026-06.
  auto c = JudgeNode(set, matrix, {"535.309.01", ""}, today);
  EXPECT_EQ(c.status, "unsupported_branch");
  EXPECT_TRUE(c.cves.empty());
  EXPECT_EQ(c.fix, kMoveBranch);

  // R570 (end of life 2026-02) at 570.133.20: its rows in 5670, 5703 and 5747, and the eleven
  // CVEs of 5821 (published after the branch ended) with "move to a supported branch".
  auto d = JudgeNode(set, matrix, {"570.133.20", ""}, today);
  EXPECT_EQ(d.status, "unsupported_branch");
  EXPECT_EQ(d.cves.size(), 20u);
  EXPECT_EQ(CveIds(d, kMoveBranch).size(), 11u);
  EXPECT_TRUE(CveIds(d, kMoveBranch).count("CVE-2026-24187"));
  EXPECT_EQ(CveIds(d, "570.172.08"), (std::set<std::string>{"CVE-2025-23279"}));
  EXPECT_EQ(CveIds(d, "570.211.01"), (std::set<std::string>{"CVE-2025-33219", "CVE-2025-33220"}));
  EXPECT_EQ(CveIds(d, "570.195.03").size(), 6u);
  EXPECT_FALSE(CveIds(d).count("CVE-2025-23244"));  // fixed in 570.133.07
  EXPECT_EQ(d.fixed_driver, "570.211.01");
  EXPECT_EQ(d.fix, kMoveBranch);

  // Toolkit 1.17.3 on a clean driver: 5616, both of 5659 and 5850; 9.0 is the highest.
  auto e = JudgeNode(set, matrix, {"580.159.03", "1.17.3"}, today);
  EXPECT_EQ(e.status, "exposed");
  EXPECT_EQ(CveIds(e), (std::set<std::string>{"CVE-2025-23359", "CVE-2025-23266", "CVE-2025-23267",
                                              "CVE-2026-24260"}));
  EXPECT_DOUBLE_EQ(e.max_cvss, 9.0);
  EXPECT_EQ(e.fix, "container-toolkit 1.19.1");

  // An unknown driver is judged on nothing; a branch the matrix does not know is unsupported.
  EXPECT_EQ(JudgeNode(set, matrix, {"", ""}, today).status, "ok");
  EXPECT_EQ(JudgeNode(set, matrix, {"999.1.2", ""}, today).status, "unsupported_branch");
}

TEST(JudgeNode, AnImportedBulletinReplacesTheOneOfTheSameId) {
  BulletinSet set = *BulletinSet::Builtin();
  auto b = ParseCsafAdvisory(kCsaf5703);
  ASSERT_TRUE(b);
  set.Put(*b);
  EXPECT_EQ(set.bulletins().size(), 15u);
  EXPECT_EQ(set.Find("5703")->origin, "imported");
  EXPECT_EQ(set.Find("5703")->cves.size(), 2u);
}

}  // namespace
}  // namespace gpufleet

namespace gpufleet {
namespace {

// The newest fixed release per branch in the built-in file, read off it by hand: R580's last
// fix is 580.159.03 (bulletin 5821), R535's 535.309.01; R620 has no row.
TEST(FixTarget, TheLatestFixOfABranchIsItsNewestFixedRelease) {
  const BulletinSet& set = *BulletinSet::Builtin();
  EXPECT_EQ(LatestFixedDriver(set, "R580"), "580.159.03");
  EXPECT_EQ(LatestFixedDriver(set, "R535"), "535.309.01");
  EXPECT_EQ(LatestFixedDriver(set, "R620"), "");
}

TEST(FixTarget, APinnedBranchWinsAnEndOfLifeBranchMovesToTheNewestLongTermOne) {
  const BulletinSet& set = *BulletinSet::Builtin();
  const CompatMatrix& matrix = *CompatMatrix::Builtin();
  const std::string today = "2026-12-02";
  auto pinned = ChooseFixTarget(set, matrix, "R580", "R570", today);
  EXPECT_EQ(pinned.branch, "R580");
  EXPECT_EQ(pinned.target, "580.159.03");
  EXPECT_EQ(pinned.why, "the pool pins R580");
  // Unpinned, on a supported branch: stay on it.
  auto same = ChooseFixTarget(set, matrix, "", "R595", today);
  EXPECT_EQ(same.target, "595.71.05");
  // R535 ended in June 2026: the newest supported LTSB with a fix is R580 (R620 has none yet).
  auto eol = ChooseFixTarget(set, matrix, "", "R535", today);
  EXPECT_EQ(eol.branch, "R580");
  EXPECT_EQ(eol.target, "580.159.03");
  EXPECT_EQ(eol.why, "R535 is end of life: the newest supported long-term branch");
  // Before R535's end it was still its own fix.
  EXPECT_EQ(ChooseFixTarget(set, matrix, "", "R535", "2026-05-01").target, "535.309.01");
}

}  // namespace
}  // namespace gpufleet
