// The compliance posture of a hand-built fleet on 2026-12-02: each node's four checks with
// their reasons, the counts per cluster and for the fleet, a scoped view, the audit chain's
// verdict counted against every node, and the daily series kept in the store.

#include "lifecycle/compliance_service.h"

#include <gtest/gtest.h>

#include "lifecycle/tests/lifecycle_fixture.h"
#include "tests/support/fixtures.h"

namespace gpufleet::lifecycle {
namespace {

const std::string kFleet =
    ::gpufleet::testing::FleetFixture("compliance");  // tests/fixtures/fleets/

constexpr char kVbios[] = "95.04.5A.00.01";
constexpr char kToolkit[] = "1.19.1";
const std::string kKey(64, 'a');

class ComplianceTest : public LifecycleFixture {
 protected:
  ComplianceTest() : LifecycleFixture(kFleet) {}
  void SetUp() override {
    LifecycleFixture::SetUp();
    // What each node is, and so what it should fail (hand-checked against data/compat.yaml and
    // data/security-bulletins.yaml):
    // Container Toolkit 1.19.1 everywhere: no toolkit CVE.
    Join("train", "train-0", "580.159.03", kToolkit, kVbios);  // passes all four
    Join("train", "train-1", "580.95.05", kToolkit, kVbios);   // drift (driver), CVEs to 8.8
    // A new feature branch in production, drift, and the wrong VBIOS.
    Join("train", "train-2", "590.44.01", kToolkit, "95.04.00.00.01");
    Join("play", "play-0", "590.44.01", kToolkit);   // NFB is fine for development; no profile
    Join("play", "play-1", "535.309.01", kToolkit);  // R535 ended 2026-06
    ASSERT_TRUE(drift_->Tick().ok());
  }
  void StartService() override {
    vulns_ = std::make_unique<VulnService>(*fleet_, *compat_, *store_.settings, clock_);
    ASSERT_TRUE(vulns_->Load().ok());
    drift_ = std::make_unique<DriftService>(*fleet_, *store_.drift, clock_);
    ASSERT_TRUE(drift_->Load().ok());
    compliance_ = std::make_unique<ComplianceService>(
        *fleet_, *compat_, *vulns_, *drift_, *store_.compliance, *store_.audit, kKey, clock_);
  }
  void StopService() override {
    compliance_.reset();
    drift_.reset();
    vulns_.reset();
  }
  std::map<std::string, NodeCompliance> ByNode(const ComplianceFilter& f = {}) {
    std::map<std::string, NodeCompliance> out;
    for (auto& n : compliance_->Nodes(f)) out.emplace(n.node, n);
    return out;
  }

  std::unique_ptr<VulnService> vulns_;
  std::unique_ptr<DriftService> drift_;
  std::unique_ptr<ComplianceService> compliance_;
};

std::string Joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += s + "\n";
  return out;
}

TEST_F(ComplianceTest, EachNodePassesOrFailsEachCheckWithItsReason) {
  auto nodes = ByNode();
  ASSERT_EQ(nodes.size(), 5u);
  const auto& ok = nodes["train-0"];
  EXPECT_TRUE(ok.NodeChecksPass()) << Joined(ok.reasons);
  EXPECT_TRUE(ok.reasons.empty());

  const auto& old = nodes["train-1"];
  EXPECT_TRUE(old.supported_branch);
  EXPECT_FALSE(old.drift_free);
  EXPECT_FALSE(old.cve_free);
  EXPECT_TRUE(old.firmware_at_profile);
  ASSERT_EQ(old.reasons.size(), 2u) << Joined(old.reasons);
  EXPECT_EQ(old.reasons[0], "drift_free: driver_version");
  EXPECT_EQ(old.reasons[1].rfind("cve_free: ", 0), 0u) << old.reasons[1];
  EXPECT_NE(old.reasons[1].find("(8.8)"), std::string::npos) << old.reasons[1];

  const auto& nfb = nodes["train-2"];
  EXPECT_FALSE(nfb.supported_branch);
  EXPECT_FALSE(nfb.drift_free);
  EXPECT_FALSE(nfb.firmware_at_profile);
  ASSERT_GE(nfb.reasons.size(), 3u) << Joined(nfb.reasons);
  EXPECT_EQ(nfb.reasons[0], "supported_branch: R590 is a new feature branch, in a production pool");
  EXPECT_EQ(nfb.reasons[1], "drift_free: driver_version vbios");
  EXPECT_EQ(nfb.reasons.back(),
            "firmware_at_profile: vbios GPU 0 95.04.00.00.01, profile 95.04.5A.00.01");

  // The same branch where the tier is development: supported.
  EXPECT_TRUE(nodes["play-0"].supported_branch) << Joined(nodes["play-0"].reasons);
  EXPECT_TRUE(nodes["play-0"].drift_free);
  const auto& eol = nodes["play-1"];
  EXPECT_FALSE(eol.supported_branch);
  EXPECT_EQ(eol.reasons[0], "supported_branch: R535 is end of life (2026-06)");
  EXPECT_TRUE(eol.drift_free);
  EXPECT_TRUE(eol.firmware_at_profile);

  // Filters: the nodes failing one check, those failing any, a scoped token's.
  auto fw = ByNode({.check = "firmware_at_profile"});
  ASSERT_EQ(fw.size(), 1u);
  EXPECT_TRUE(fw.count("train-2"));
  auto failing = ByNode({.failing = true});
  EXPECT_EQ(failing.count("train-0"), 0u);
  EXPECT_EQ(failing.count("train-1"), 1u);
  EXPECT_EQ(ByNode({.clusters = {"dev"}}).size(), 2u);
}

TEST_F(ComplianceTest, TheFleetAndEachClusterCountTheirNodesAndTheSeriesIsKeptDaily) {
  auto report = compliance_->Report({}, 30);
  ASSERT_TRUE(report.ok()) << report.error().message;
  EXPECT_TRUE(report->audit.verified) << report->audit.problem;
  const auto& prod = report->now.clusters.at("prod");
  EXPECT_EQ(prod.nodes, 3);
  EXPECT_EQ(prod.supported_branch, 2);
  EXPECT_EQ(prod.drift_free, 1);
  EXPECT_EQ(prod.firmware_at_profile, 2);
  EXPECT_EQ(prod.compliant, 1);
  const auto& dev = report->now.clusters.at("dev");
  EXPECT_EQ(dev.nodes, 2);
  EXPECT_EQ(dev.supported_branch, 1);
  EXPECT_EQ(dev.drift_free, 2);
  EXPECT_EQ(dev.firmware_at_profile, 2);
  auto fleet = report->now.Fleet();
  EXPECT_EQ(fleet.nodes, 5);
  EXPECT_EQ(fleet.supported_branch, 3);
  EXPECT_EQ(fleet.cve_free, prod.cve_free + dev.cve_free);
  // Without a stored day, the series is now alone.
  ASSERT_EQ(report->series.size(), 1u);
  EXPECT_EQ(report->series[0].day, "2026-12-02");

  // Two days recorded; on the third, the series has both and now, and a scoped view only its
  // cluster's figures, on each day.
  ASSERT_TRUE(compliance_->Record().ok());
  clock_->Advance(86'400'000);
  Join("train", "train-1", "580.159.03", kToolkit, kVbios);  // brought up to date
  ASSERT_TRUE(drift_->Tick().ok());
  ASSERT_TRUE(compliance_->Record().ok());
  ASSERT_TRUE(compliance_->Record().ok());  // again the same day: replaces it
  clock_->Advance(86'400'000);
  report = compliance_->Report({}, 30);
  ASSERT_TRUE(report.ok()) << report.error().message;
  ASSERT_EQ(report->series.size(), 3u);
  EXPECT_EQ(report->series[0].day, "2026-12-02");
  EXPECT_EQ(report->series[1].day, "2026-12-03");
  EXPECT_EQ(report->series[2].day, "2026-12-04");
  EXPECT_EQ(report->series[0].clusters.at("prod").drift_free, 1);
  EXPECT_EQ(report->series[1].clusters.at("prod").drift_free, 2);
  EXPECT_EQ(report->series[0].Fleet().nodes, 5);
  auto scoped = compliance_->Report({.clusters = {"dev"}}, 30);
  ASSERT_TRUE(scoped.ok());
  for (const auto& day : scoped->series) {
    ASSERT_EQ(day.clusters.size(), 1u) << day.day;
    EXPECT_EQ(day.clusters.begin()->first, "dev");
  }
  // Only the days asked for.
  EXPECT_EQ(compliance_->Report({}, 2)->series.size(), 2u);
  // The stored days survive a restart.
  Start();
  EXPECT_EQ(compliance_->Report({}, 30)->series.size(), 3u);
}

TEST_F(ComplianceTest, AnAuditChainThatDoesNotVerifyLeavesNoNodeCompliant) {
  AuditRecord r;
  r.time_ms = clock_->NowMs() - 1000;
  r.actor = "admin";
  r.action = "POST /api/v1/apply";
  r.target = "fleet";
  r.status = 200;
  r.result = "ok";
  ASSERT_TRUE(store_.audit->AppendAudit(r).ok());
  ASSERT_TRUE(store_.audit->AppendAudit(r).ok());
  // Pruned under another secret key: the anchor's signature does not check out with ours.
  ASSERT_TRUE(store_.audit->PruneAudit(clock_->NowMs(), std::string(64, 'b')).ok());
  auto report = compliance_->Report({}, 1);
  ASSERT_TRUE(report.ok());
  EXPECT_FALSE(report->audit.verified);
  EXPECT_FALSE(report->audit.problem.empty());
  EXPECT_EQ(report->now.Fleet().compliant, 0);
  EXPECT_EQ(report->now.Fleet().supported_branch, 3);  // the node checks stand
}

TEST(ComplianceDay, TheStoredFormReadsBackAndABadOneNamesItsField) {
  ComplianceDayCounts day;
  day.day = "2026-12-02";
  day.measured_ms = 5;
  day.audit_verified = true;
  day.clusters["a"] = {4, 3, 2, 1, 4, 1};
  day.clusters["empty"] = {};
  auto back = ParseComplianceDay(day.day, ComplianceDayJson(day));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->clusters, day.clusters);
  EXPECT_TRUE(back->audit_verified);
  EXPECT_EQ(back->measured_ms, 5);
  auto bad = ParseComplianceDay(
      "2026-12-01", R"({"measured_ms":1,"audit_verified":true,"clusters":{"a":{"nodes":"x"}}})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message,
            "compliance day 2026-12-01: clusters.a.nodes is not a whole number");
}

}  // namespace
}  // namespace gpufleet::lifecycle
