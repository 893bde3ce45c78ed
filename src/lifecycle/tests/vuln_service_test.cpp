// The vulnerability status of a fleet registry's nodes (their reported driver and Container
// Toolkit against the built-in bulletins, on 2026-12-02), the filters, the fix of a pool, and a
// CSAF import that survives a restart (a bad one changes nothing).

#include "lifecycle/vuln_service.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <set>

#include "lifecycle/tests/lifecycle_fixture.h"
#include "tests/support/fixtures.h"

namespace gpufleet::lifecycle {
namespace {

const std::string kFleet = ::gpufleet::testing::FleetFixture("vulns");  // tests/fixtures/fleets/

std::string ReadFixture(const std::string& name) {
  std::ifstream in(std::string(GPUFLEET_SOURCE_DIR) + "/tests/fixtures/csaf/" + name);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class VulnServiceTest : public LifecycleFixture {
 protected:
  VulnServiceTest() : LifecycleFixture(kFleet) {}
  void SetUp() override {
    LifecycleFixture::SetUp();
    // The hand-computed fixture fleet of model/tests/bulletins_test.cpp, as agents report it.
    Join("serve", "serve-0", "580.159.03", "1.19.1");    // clean
    Join("serve", "serve-1", "580.95.05", "");           // 13 CVEs, max 8.8, toolkit unknown
    Join("serve", "serve-2", "580.159.03", "1.17.3");    // 4 toolkit CVEs, max 9.0
    Join("stores", "stores-0", "535.309.01", "1.19.1");  // R535 ended 2026-06: no CVE open
    Join("stores", "stores-1", "570.133.20", "1.19.1");  // R570 ended 2026-02: 20 CVEs
  }
  void StartService() override {
    vulns_ = std::make_unique<VulnService>(*fleet_, *compat_, *store_.settings, clock_);
    ASSERT_TRUE(vulns_->Load().ok());
  }
  void StopService() override { vulns_.reset(); }
  std::map<std::string, NodeVulns> ByNode(const VulnFilter& f = {}) {
    std::map<std::string, NodeVulns> out;
    for (auto& n : vulns_->Nodes(f)) out.emplace(n.node, n);
    return out;
  }

  std::unique_ptr<VulnService> vulns_;
};

TEST_F(VulnServiceTest, EachNodeIsJudgedFromTheVersionsItsAgentReports) {
  auto all = ByNode();
  ASSERT_EQ(all.size(), 5u);
  EXPECT_EQ(all.at("serve-0").verdict->status, "ok");
  EXPECT_TRUE(all.at("serve-0").verdict->cves.empty());
  EXPECT_EQ(all.at("serve-1").verdict->status, "exposed");
  EXPECT_EQ(all.at("serve-1").verdict->cves.size(), 13u);
  EXPECT_DOUBLE_EQ(all.at("serve-1").verdict->max_cvss, 8.8);
  EXPECT_EQ(all.at("serve-1").verdict->fix, "driver 580.159.03");
  EXPECT_EQ(all.at("serve-2").verdict->status, "exposed");
  EXPECT_EQ(all.at("serve-2").verdict->cves.size(), 4u);
  EXPECT_EQ(all.at("serve-2").verdict->fix, "container-toolkit 1.19.1");
  EXPECT_EQ(all.at("stores-0").verdict->status, "unsupported_branch");
  EXPECT_TRUE(all.at("stores-0").verdict->cves.empty());
  EXPECT_EQ(all.at("stores-1").verdict->status, "unsupported_branch");
  EXPECT_EQ(all.at("stores-1").verdict->cves.size(), 20u);
  EXPECT_EQ(all.at("stores-1").cluster, "edge");

  // The alert rule's input: the highest score of each node that has a CVE.
  auto cvss = vulns_->MaxCvss();
  EXPECT_EQ(cvss.size(), 3u);
  EXPECT_DOUBLE_EQ(cvss.at("serve-2"), 9.0);
  EXPECT_EQ(cvss.count("serve-0"), 0u);

  // Five nodes, four distinct versions: the verdicts are cached per versions.
  auto before = vulns_->stats();
  (void)vulns_->Nodes(VulnFilter{});
  EXPECT_EQ(vulns_->stats().judged, before.judged);
  EXPECT_EQ(vulns_->stats().cached, before.cached + 5);
  // A new day judges again (end of life is a matter of dates).
  clock_->Advance(86'400'000);
  (void)vulns_->Nodes(VulnFilter{});
  EXPECT_EQ(vulns_->stats().judged, before.judged + 5);
}

TEST_F(VulnServiceTest, FiltersSelectNodesAndCves) {
  auto critical = vulns_->Nodes({.min_cvss = 9.0});
  ASSERT_EQ(critical.size(), 1u);
  EXPECT_EQ(critical[0].node, "serve-2");
  ASSERT_EQ(critical[0].verdict->cves.size(), 1u);  // only the CVEs at or above the score
  EXPECT_EQ(critical[0].verdict->cves[0].cve, "CVE-2025-23266");
  EXPECT_EQ(vulns_->Nodes({.pool = "stores"}).size(), 2u);
  EXPECT_EQ(vulns_->Nodes({.cluster = "prod", .status = "exposed"}).size(), 2u);
  EXPECT_EQ(vulns_->Nodes({.node = "serve-1"}).size(), 1u);
  EXPECT_EQ(vulns_->Nodes({.clusters = {"edge"}}).size(), 2u);  // a scoped token
}

TEST_F(VulnServiceTest, TheFixOfAPoolIsItsBranchsLatestFixedDriver) {
  // serve pins R580: 580.159.03 fixes serve-1; serve-2 needs only a toolkit.
  auto serve = vulns_->ProposeFix("serve");
  ASSERT_TRUE(serve.ok()) << serve.error().message;
  EXPECT_EQ(serve->target.target, "580.159.03");
  EXPECT_EQ(serve->target.why, "the pool pins R580");
  EXPECT_EQ(serve->nodes, std::vector<std::string>{"serve-1"});
  // stores runs end-of-life branches: the newest supported long-term branch, for both nodes.
  auto stores = vulns_->ProposeFix("stores");
  ASSERT_TRUE(stores.ok()) << stores.error().message;
  EXPECT_EQ(stores->target.branch, "R580");
  EXPECT_EQ(stores->target.target, "580.159.03");
  EXPECT_EQ(stores->nodes, (std::vector<std::string>{"stores-0", "stores-1"}));
  EXPECT_EQ(vulns_->ProposeFix("nope").error().code, ErrorCode::kNotFound);
}

TEST_F(VulnServiceTest, AnImportedCsafDocumentReplacesItsBulletinAndSurvivesARestart) {
  // A node before 5703's R580 fix (580.95.05) has all six of the built-in 5703's CVEs.
  Join("serve", "serve-3", "580.82.07", "1.19.1");
  auto of_5703 = [&] {
    std::set<std::string> ids;
    auto nodes = vulns_->Nodes({.node = "serve-3"});
    for (const auto& e : nodes.at(0).verdict->cves) {
      if (e.bulletin == "5703") ids.insert(e.cve);
    }
    return ids;
  };
  EXPECT_EQ(of_5703().size(), 6u);

  // A malformed document is refused with its JSON path; nothing is kept.
  std::string bad = ReadFixture("5703.json");
  bad.replace(bad.find("\"baseScore\": 7.0"), 16, "\"baseScore\": \"x\"");
  auto refused = vulns_->Import(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("$.vulnerabilities[0].scores[0].cvss_v3.baseScore"),
            std::string::npos)
      << refused.error().message;
  EXPECT_EQ(vulns_->bulletins()->Find("5703")->origin, "builtin");
  EXPECT_FALSE(store_.settings->GetSetting("bulletins").value().has_value());

  // The fixture carries two of 5703's CVEs: once imported, those two are what 5703 says.
  auto imported = vulns_->Import(ReadFixture("5703.json"));
  ASSERT_TRUE(imported.ok()) << imported.error().message;
  EXPECT_EQ(imported->id, "5703");
  EXPECT_EQ(vulns_->bulletins()->Find("5703")->origin, "imported");
  EXPECT_EQ(of_5703(), (std::set<std::string>{"CVE-2025-23280", "CVE-2025-23300"}));
  Start();  // a restarted controller reads it back
  EXPECT_EQ(vulns_->bulletins()->Find("5703")->origin, "imported");
  EXPECT_EQ(of_5703(), (std::set<std::string>{"CVE-2025-23280", "CVE-2025-23300"}));
}

}  // namespace
}  // namespace gpufleet::lifecycle
