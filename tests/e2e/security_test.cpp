// Vulnerability status end to end: simulated nodes report the driver and Container Toolkit they
// run, the API and the CLI judge them against the bulletins, a node at CVSS 9.0 fires the
// NodeCriticalCve alert, the fix of a pool is proposed and started as a rollout, and one of
// NVIDIA's CSAF documents is imported (a malformed one is refused with its JSON path).

#include "fixture.h"
#include "tests/support/fixtures.h"

namespace gpufleet::e2e {
namespace {

const std::string kFleet =
    ::gpufleet::testing::FleetFixture("e2e-security");  // tests/fixtures/fleets/

const std::string kCsaf = std::string(GPUFLEET_SOURCE_DIR) + "/tests/fixtures/csaf/5703.json";

class Security : public E2E {
 protected:
  // sec-0000 runs 580.159.03 with toolkit 1.19.1 (clean), sec-0001 580.95.05 with 1.17.3
  // (13 driver CVEs up to 8.8, and CVE-2025-23266 at 9.0 in the toolkit), sec-0002 the same
  // as sec-0000.
  void StartFleet() {
    auto applied = ApplyText("fleet.yaml", kFleet);
    ASSERT_EQ(applied.exit_code, 0) << applied.err;
    Sim(JoinToken("l4"), "sec", 3, "L4", 1,
        {"--driver", "580.159.03,580.95.05", "--container-toolkit", "1.19.1,1.17.3"});
    for (const char* n : {"sec-0000", "sec-0001", "sec-0002"}) ASSERT_TRUE(WaitState(n, "ready"));
  }
};

TEST_F(Security, NodesAreJudgedFromWhatTheyReportAndACriticalCveFiresAnAlert) {
  StartFleet();
  EXPECT_EQ(Node("sec-0001").at("facts").at("container_toolkit").as_string(), "1.17.3");
  EXPECT_EQ(Node("sec-0001").at("facts").at("cuda_driver_version").as_string(), "13.0");

  auto [status, all] = controller_->Call("GET", "/api/v1/vulnerabilities");
  ASSERT_EQ(status, 200) << all;
  const auto& items = all.at("items").as_array();
  ASSERT_EQ(items.size(), 3u);
  EXPECT_EQ(items[0].at("node"), "sec-0000");
  EXPECT_EQ(items[0].at("status"), "ok");
  EXPECT_EQ(items[0].at("driver"), "580.159.03");
  EXPECT_EQ(items[0].at("branch"), "R580");
  EXPECT_TRUE(items[0].at("cves").as_array().empty());
  const auto& bad = items[1];
  EXPECT_EQ(bad.at("node"), "sec-0001");
  EXPECT_EQ(bad.at("status"), "exposed");
  EXPECT_EQ(bad.at("cves").as_array().size(), 17u);  // 13 of the driver, 4 of the toolkit
  EXPECT_EQ(bad.at("cves").at(0).at("id"), "CVE-2025-23266");
  EXPECT_EQ(bad.at("cves").at(0).at("cvss").to_number<double>(), 9.0);
  EXPECT_EQ(bad.at("cves").at(0).at("component"), "container-toolkit");
  EXPECT_EQ(bad.at("cves").at(0).at("fixed_in"), "1.17.8");
  EXPECT_EQ(bad.at("fix"), "container-toolkit 1.19.1, driver 580.159.03");
  EXPECT_TRUE(bad.at("simulated").as_bool());
  EXPECT_EQ(all.at("summary").at("exposed").as_int64(), 1);
  EXPECT_EQ(all.at("summary").at("critical").as_int64(), 1);

  auto [s2, critical] = controller_->Call("GET", "/api/v1/vulnerabilities?min_cvss=9");
  ASSERT_EQ(s2, 200);
  ASSERT_EQ(critical.at("items").as_array().size(), 1u);
  EXPECT_EQ(critical.at("items").at(0).at("cves").as_array().size(), 1u);
  EXPECT_EQ(controller_->Call("GET", "/api/v1/vulnerabilities?min_cvss=high").first, 400);
  EXPECT_EQ(controller_->Call("GET", "/api/v1/vulnerabilities?status=bad").first, 400);

  // The built-in rule: CVSS 9.0 or more, no `for`.
  auto firing = [&] {
    auto [s, v] = controller_->Call("GET", "/api/v1/alerts?state=firing");
    for (const auto& a : v.at("items").as_array()) {
      if (a.at("labels").at("alertname") == "NodeCriticalCve") return a;
    }
    return json::value();
  };
  ASSERT_TRUE(WaitFor([&] { return !firing().is_null(); }, 15000));
  EXPECT_EQ(firing().at("labels").at("Hostname"), "sec-0001");
  EXPECT_EQ(firing().at("labels").at("severity"), "critical");

  // The CLI.
  auto list = Cli({"vulns", "list"});
  EXPECT_EQ(list.exit_code, 0) << list.err;
  EXPECT_NE(list.out.find("sec-0001 (sim)"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("3 node(s): 2 ok, 1 exposed, 0 on an unsupported branch; 1 at CVSS 9.0"),
            std::string::npos)
      << list.out;
  // Grouped by cause: the exposed node's versions, and the rollout that fixes them.
  EXPECT_NE(list.out.find("by cause:\n  1 node on driver "), std::string::npos) << list.out;
  EXPECT_NE(list.out.find(", toolkit 1.17.3: "), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("→ container-toolkit 1.19.1, driver 580.159.03 (pools: l4)\n"),
            std::string::npos)
      << list.out;
  auto show = Cli({"vulns", "show", "sec-0001"});
  EXPECT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("CVE-2026-24187"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("580.159.03"), std::string::npos) << show.out;
  auto none = Cli({"vulns", "show", "nope"});
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_EQ(none.err, "error: no node 'nope'\n");
  auto wrong = Cli({"vulns", "list", "--min-cvss", "11"});
  EXPECT_NE(wrong.exit_code, 0);
  EXPECT_NE(wrong.err.find("'min_cvss' must be a number from 0 to 10"), std::string::npos)
      << wrong.err;
}

TEST_F(Security, TheFixOfAPoolIsProposedThenStartedAsARollout) {
  StartFleet();
  auto [status, fix] = controller_->Call("GET", "/api/v1/vulnerabilities/fix?pool=l4");
  ASSERT_EQ(status, 200) << fix;
  EXPECT_EQ(fix.at("target"), "580.159.03");
  EXPECT_EQ(fix.at("why"), "the pool pins R580");
  EXPECT_EQ(fix.at("nodes"), json::parse(R"(["sec-0001"])"));
  EXPECT_EQ(controller_->Call("GET", "/api/v1/vulnerabilities/fix?pool=nope").first, 404);
  EXPECT_EQ(controller_->Call("GET", "/api/v1/vulnerabilities/fix").first, 400);

  auto plan = Cli({"vulns", "fix", "--pool", "l4"});
  EXPECT_EQ(plan.exit_code, 0) << plan.err;
  EXPECT_NE(plan.out.find("pool l4: driver 580.159.03 (R580, the pool pins R580) fixes 1 node(s):"
                          " sec-0001"),
            std::string::npos)
      << plan.out;
  EXPECT_EQ(controller_->Call("GET", "/api/v1/rollouts").second.at("total").as_int64(), 0);
  auto start = Cli({"vulns", "fix", "--pool", "l4", "--start"});
  EXPECT_EQ(start.exit_code, 0) << start.err;
  EXPECT_NE(start.out.find("rollout 1 started: driver to 580.159.03"), std::string::npos)
      << start.out;
  auto [rs, rollout] = controller_->Call("GET", "/api/v1/rollouts/1");
  ASSERT_EQ(rs, 200);
  EXPECT_EQ(rollout.at("target"), "580.159.03");
  // Only the node that needs it: the others already run the target.
  ASSERT_EQ(rollout.at("nodes").as_array().size(), 1u);
  EXPECT_EQ(rollout.at("nodes").at(0).at("node"), "sec-0001");
}

// The compliance posture of the same three nodes: sec-0001's CVEs (up to 9.0) make it the one
// node that fails, through the API, its CSV and the CLI; bad parameters are refused.
TEST_F(Security, TheCompliancePostureCountsTheExposedNodeAndNamesWhy) {
  StartFleet();
  auto [status, report] = controller_->Call("GET", "/api/v1/reports/compliance");
  ASSERT_EQ(status, 200) << report;
  const auto& fleet = report.at("fleet");
  EXPECT_EQ(fleet.at("nodes").as_int64(), 3);
  EXPECT_EQ(fleet.at("supported_branch").to_number<double>(), 1.0);
  EXPECT_EQ(fleet.at("drift_free").to_number<double>(), 1.0);  // no profile: nothing to differ
  EXPECT_EQ(fleet.at("cve_free").to_number<double>(), 0.6667);
  EXPECT_EQ(fleet.at("firmware_at_profile").to_number<double>(), 1.0);
  EXPECT_EQ(fleet.at("audit_chain_verified").to_number<double>(), 1.0);
  EXPECT_EQ(fleet.at("compliant").to_number<double>(), 0.6667);
  EXPECT_EQ(fleet.at("counts").at("compliant").as_int64(), 2);
  ASSERT_EQ(report.at("clusters").as_array().size(), 1u);
  EXPECT_EQ(report.at("clusters").at(0).at("name"), "serve");
  EXPECT_EQ(report.at("clusters").at(0).at("cve_free").to_number<double>(), 0.6667);
  EXPECT_TRUE(report.at("audit").at("verified").as_bool());
  // A new controller has one day: today, measured now.
  ASSERT_EQ(report.at("series").as_array().size(), 1u);
  const std::string today = std::string(report.at("day").as_string());
  EXPECT_EQ(report.at("series").at(0).at("day").as_string(), today);
  EXPECT_EQ(report.at("series").at(0).at("compliant").to_number<double>(), 0.6667);

  auto [ns, nodes] = controller_->Call("GET", "/api/v1/reports/compliance/nodes?failing=true");
  ASSERT_EQ(ns, 200) << nodes;
  ASSERT_EQ(nodes.at("items").as_array().size(), 1u);
  const auto& n = nodes.at("items").at(0);
  EXPECT_EQ(n.at("node"), "sec-0001");
  EXPECT_FALSE(n.at("compliant").as_bool());
  EXPECT_FALSE(n.at("cve_free").as_bool());
  EXPECT_TRUE(n.at("supported_branch").as_bool());
  ASSERT_EQ(n.at("reasons").as_array().size(), 1u);
  const std::string why(n.at("reasons").at(0).as_string());
  EXPECT_EQ(why.rfind("cve_free: ", 0), 0u) << why;
  EXPECT_NE(why.find("CVE-2025-23266 (9.0)"), std::string::npos) << why;
  auto [as, all] = controller_->Call("GET", "/api/v1/reports/compliance/nodes");
  EXPECT_EQ(all.at("total").as_int64(), 3);

  for (const char* bad :
       {"/api/v1/reports/compliance?days=0", "/api/v1/reports/compliance?format=xml",
        "/api/v1/reports/compliance?check=cve_free", "/api/v1/reports/compliance/nodes?check=nope",
        "/api/v1/reports/compliance/nodes?failing=maybe"}) {
    auto [s, body] = controller_->Call("GET", bad);
    EXPECT_EQ(s, 400) << bad << " " << body;
    EXPECT_FALSE(body.at("error").at("message").as_string().empty()) << bad;
  }
  EXPECT_EQ(controller_->Call("GET", "/api/v1/reports/compliance?cluster=nope").first, 404);

  auto table = Cli({"reports", "compliance"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("audit chain: verified"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("cluster serve"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("66.7%"), std::string::npos) << table.out;
  auto csv = Cli({"reports", "compliance", "--csv"});
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  EXPECT_EQ(csv.out,
            "day,scope,nodes,supported_branch,drift_free,cve_free,firmware_at_profile,"
            "audit_chain_verified,compliant\n" +
                today + ",fleet,3,1.0000,1.0000,0.6667,1.0000,1,0.6667\n" + today +
                ",serve,3,1.0000,1.0000,0.6667,1.0000,1,0.6667\n");
  auto failing = Cli({"reports", "compliance", "--nodes", "--check", "cve_free"});
  ASSERT_EQ(failing.exit_code, 0) << failing.err;
  EXPECT_NE(failing.out.find("sec-0001"), std::string::npos) << failing.out;
  EXPECT_EQ(failing.out.find("sec-0000"), std::string::npos) << failing.out;
  auto nodes_csv = Cli({"reports", "compliance", "--nodes", "--csv"});
  ASSERT_EQ(nodes_csv.exit_code, 0) << nodes_csv.err;
  EXPECT_NE(nodes_csv.out.find("\nsec-0000,serve,l4,1,1,1,1,1,\n"), std::string::npos)
      << nodes_csv.out;
  auto misuse = Cli({"reports", "compliance", "--check", "cve_free"});
  EXPECT_EQ(misuse.exit_code, 2);
  EXPECT_NE(misuse.err.find("go with --nodes"), std::string::npos) << misuse.err;
  auto wrong = Cli({"reports", "compliance", "--days", "500"});
  EXPECT_NE(wrong.exit_code, 0);
  EXPECT_NE(wrong.err.find("'days' must be a whole number from 1 to 400"), std::string::npos)
      << wrong.err;
}

TEST_F(Security, ACsafDocumentIsImportedAndAMalformedOneChangesNothing) {
  auto before = Cli({"bulletins", "show", "5703"});
  EXPECT_EQ(before.exit_code, 0) << before.err;
  EXPECT_NE(before.out.find("(builtin)"), std::string::npos) << before.out;
  EXPECT_NE(before.out.find("CVE-2025-23345"), std::string::npos) << before.out;

  // A malformed copy: refused with the JSON path, and 5703 stays the built-in one.
  std::string text = ReadFile(kCsaf);
  const std::string score = "\"baseScore\": 7.0";
  ASSERT_NE(text.find(score), std::string::npos);
  std::string broken = text;
  broken.replace(broken.find(score), score.size(), "\"baseScore\": \"7\"");
  std::ofstream(dir_ + "/broken.json") << broken;
  auto refused = Cli({"bulletins", "import", dir_ + "/broken.json"});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("$.vulnerabilities[0].scores[0].cvss_v3.baseScore: not a number"),
            std::string::npos)
      << refused.err;
  EXPECT_EQ(controller_->Call("GET", "/api/v1/bulletins/5703").second.at("origin"), "builtin");

  auto imported = Cli({"bulletins", "import", kCsaf});
  EXPECT_EQ(imported.exit_code, 0) << imported.err;
  EXPECT_EQ(imported.out,
            "imported bulletin 5703 (NVIDIA GPU Display Driver, published 2025-10-09): 2 CVE(s)\n");
  auto [s, b] = controller_->Call("GET", "/api/v1/bulletins/5703");
  ASSERT_EQ(s, 200);
  EXPECT_EQ(b.at("origin"), "imported");
  EXPECT_EQ(b.at("cves").as_array().size(), 2u);
  auto audit = Cli({"-o", "json", "audit", "list"});
  EXPECT_NE(audit.out.find("bulletin/5703"), std::string::npos) << audit.out;
  auto list = Cli({"bulletins", "list"});
  EXPECT_NE(list.out.find("imported"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("5821"), std::string::npos) << list.out;
}

}  // namespace
}  // namespace gpufleet::e2e
