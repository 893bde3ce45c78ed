// The driver lifecycle end to end: a fleet file's tier, requires and pinned branch, the
// compatibility check through the API and the CLI, and an applied matrix (admin only, audited,
// kept across a restart).

#include "fixture.h"
#include "tests/support/fixtures.h"

namespace gpufleet::e2e {
namespace {

const std::string kFleet =
    ::gpufleet::testing::FleetFixture("e2e-lifecycle");  // tests/fixtures/fleets/

class Lifecycle : public E2E {};

TEST_F(Lifecycle, ACompatibilityCheckListsEveryFailedRuleWithItsSource) {
  auto applied = ApplyText("fleet.yaml", kFleet);
  ASSERT_EQ(applied.exit_code, 0) << applied.err;
  // The pool carries what the file said; the inherited fields stay empty on it.
  auto [ps, pool] = controller_->Call("GET", "/api/v1/pools/h100");
  ASSERT_EQ(ps, 200);
  EXPECT_EQ(pool.at("lifecycle").at("driver_branch"), "");
  auto [cs, cluster] = controller_->Call("GET", "/api/v1/clusters/train");
  EXPECT_EQ(cluster.at("lifecycle").at("requires").at("cuda"), "12.8");

  auto [status, ok] = controller_->Call("GET", "/api/v1/compat/check?pool=h100&driver=580.95.05");
  ASSERT_EQ(status, 200) << ok;
  EXPECT_TRUE(ok.at("ok").as_bool()) << ok;
  EXPECT_TRUE(ok.at("failed").as_array().empty());
  EXPECT_GE(ok.at("passed").as_array().size(), 7u);

  auto [s2, bad] = controller_->Call("GET", "/api/v1/compat/check?pool=h100&driver=550.54.15");
  ASSERT_EQ(s2, 200);
  EXPECT_FALSE(bad.at("ok").as_bool());
  std::string reasons;
  for (const auto& f : bad.at("failed").as_array()) {
    reasons += std::string(f.at("reason").as_string()) + "\n";
    EXPECT_FALSE(f.at("source").as_string().empty());
  }
  EXPECT_EQ(reasons,
            "R550 is end of life\n"
            "the pool is pinned to R580, 550.54.15 is R550\n"
            "CUDA 12.8 needs >= 570.26, 550.54.15 is older\n");

  // The CLI: a table of every rule and exit 1 when one fails; 0 when none does.
  auto cli = Cli({"compat", "check", "--pool", "h100", "--driver", "550.54.15"});
  EXPECT_EQ(cli.exit_code, 1);
  EXPECT_NE(cli.out.find("FAIL    cuda"), std::string::npos) << cli.out;
  EXPECT_NE(cli.out.find("550.54.15 on pool h100: 3 rule(s) failed"), std::string::npos) << cli.out;
  auto good = Cli({"compat", "check", "--pool", "dev", "--driver", "610.57.04", "--cuda", "13.0"});
  EXPECT_EQ(good.exit_code, 1) << good.out;  // R610 ended in August 2026
  EXPECT_NE(good.out.find("R610 is end of life (2026-08)"), std::string::npos) << good.out;
  EXPECT_EQ(Cli({"compat", "check", "--pool", "h100", "--driver", "580.95.05"}).exit_code, 0);

  // Bad input: a clear 4xx.
  EXPECT_EQ(controller_->Call("GET", "/api/v1/compat/check?pool=h100").first, 400);
  EXPECT_EQ(controller_->Call("GET", "/api/v1/compat/check?pool=none&driver=580.95.05").first, 404);
  auto [s3, e3] =
      controller_->Call("GET", "/api/v1/compat/check?pool=h100&driver=580.95.05&cuda=x");
  EXPECT_EQ(s3, 400) << e3;
  auto unknown = Cli({"compat", "check", "--pool", "nowhere", "--driver", "580.95.05"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_EQ(unknown.err, "error: no pool 'nowhere' (HTTP 404)\n");
}

TEST_F(Lifecycle, AnAdminAppliesAMatrixThatIsAuditedAndKeptAcrossARestart) {
  ASSERT_EQ(ApplyText("fleet.yaml", kFleet).exit_code, 0);
  auto shown = Cli({"compat", "show"});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_NE(shown.out.find("matrix: builtin"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("R550"), std::string::npos);
  auto exported = Cli({"compat", "export"});
  ASSERT_EQ(exported.exit_code, 0);
  std::string yaml = exported.out;
  const std::string from = "{branch: R580, type: ltsb, eol: \"2028-06\"";
  ASSERT_NE(yaml.find(from), std::string::npos);
  yaml.replace(yaml.find(from), from.size(), "{branch: R580, type: ltsb, eol: \"2026-01\"");
  std::ofstream(dir_ + "/mine.yaml") << yaml;

  // A viewer may not; a bad file is refused with its line and changes nothing.
  auto viewer = Cli({"tokens", "create", "--role", "viewer", "--name", "v"});
  std::string vt = viewer.out.substr(0, viewer.out.find('\n'));
  auto refused = RunGpufleet({"--data-dir", controller_->data_dir(), "--token", vt, "compat",
                              "apply", "-f", dir_ + "/mine.yaml"});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("HTTP 403"), std::string::npos) << refused.err;
  std::ofstream(dir_ + "/bad.yaml") << "version: 1\nbranches: {source: s, rows: [{branch: R1}]}\n";
  auto bad = Cli({"compat", "apply", "-f", dir_ + "/bad.yaml"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find(dir_ + "/bad.yaml:2: branches.rows[0].type: is required"),
            std::string::npos)
      << bad.err;

  auto put = Cli({"compat", "apply", "-f", dir_ + "/mine.yaml"});
  ASSERT_EQ(put.exit_code, 0) << put.err;
  EXPECT_NE(put.out.find("compatibility matrix applied"), std::string::npos);
  controller_->Stop();
  controller_->Start();
  auto [s, m] = controller_->Call("GET", "/api/v1/compat");
  EXPECT_EQ(m.at("origin"), "applied");
  auto check = controller_->Call("GET", "/api/v1/compat/check?pool=h100&driver=580.95.05").second;
  EXPECT_FALSE(check.at("ok").as_bool());
  EXPECT_EQ(check.at("failed").at(0).at("reason"), "R580 is end of life (2026-01)");
  auto audit = controller_->Call("GET", "/api/v1/audit?target=compat").second.at("items");
  ASSERT_GE(audit.as_array().size(), 2u);  // the refused apply and the applied one
  EXPECT_EQ(audit.at(0).at("status"), 200);
  EXPECT_EQ(audit.at(0).at("after").at("origin"), "applied") << audit.at(0);
  EXPECT_EQ(audit.at(0).at("before").at("origin"), "builtin") << audit.at(0);

  ASSERT_EQ(Cli({"compat", "reset"}).exit_code, 0);
  EXPECT_EQ(controller_->Call("GET", "/api/v1/compat").second.at("origin"), "builtin");
  EXPECT_TRUE(controller_->Call("GET", "/api/v1/compat/check?pool=h100&driver=580.95.05")
                  .second.at("ok")
                  .as_bool());
}

}  // namespace
}  // namespace gpufleet::e2e
