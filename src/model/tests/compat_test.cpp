// The compatibility matrix: the shipped file parses, versions compare numerically, and a check
// names every rule that fails with its reason and source.

#include "model/compat.h"

#include <gtest/gtest.h>

namespace gpufleet {
namespace {

CompatQuery Query(std::string driver, CompatNeeds needs = {}) {
  CompatQuery q;
  q.driver = std::move(driver);
  q.needs = std::move(needs);
  q.architectures = {"hopper"};
  q.models = {"H100-SXM5-80GB"};
  q.today = "2026-12-02";
  return q;
}

std::string Failed(const CompatResult& r) {
  std::string out;
  for (const auto& f : r.failed) out += f.rule + ": " + f.reason + "\n";
  return out;
}

TEST(CompatTest, VersionsCompareFieldByFieldNumerically) {
  EXPECT_GT(CompareVersions("570.133.20", "570.133.07"), 0);
  EXPECT_LT(CompareVersions("570.26", "570.124.06"), 0);
  EXPECT_EQ(CompareVersions("580.95.05", "580.95.5"), 0);
  EXPECT_EQ(CompareVersions("12.8", "12.8.0"), 0);
  EXPECT_LT(CompareVersions("9.0", "10.0"), 0);
  EXPECT_GT(CompareVersions("96.00.A5.00.01", "96.00.51.00.0E"), 0);  // hex-looking VBIOS fields
  EXPECT_EQ(DriverBranch("580.95.05"), "R580");
  EXPECT_EQ(DriverBranch("x.1"), "");
  EXPECT_EQ(NormalizeBranch("r580"), "R580");
  EXPECT_EQ(NormalizeBranch("580"), "R580");
  EXPECT_EQ(NormalizeBranch("R58a"), "");
}

TEST(CompatTest, TheShippedMatrixParsesWithASourcePerTable) {
  auto m = CompatMatrix::Builtin();
  EXPECT_GE(m->branches().size(), 20u);
  EXPECT_GE(m->cuda().size(), 30u);
  for (const char* t : {"branches", "cuda", "architectures", "models", "gpu_operator"}) {
    EXPECT_FALSE(m->source(t).empty()) << t;
  }
  EXPECT_EQ(m->FindBranch("R580")->eol, "2028-06");
  EXPECT_EQ(m->FindCuda("12.8")->min_driver, "570.26");
  EXPECT_EQ(m->FindCuda("12.8.9")->min_driver, "570.26");  // an update with no row: its GA's
  EXPECT_EQ(m->FindCuda("14.0"), nullptr);
  EXPECT_EQ(m->FindOperator("25.10.1")->version, "v25.10.1");
}

TEST(CompatTest, ACurrentLtsDriverPassesEveryRule) {
  CompatNeeds needs;
  needs.cuda = "12.8";
  needs.gpu_operator = "v25.10.1";
  needs.kubernetes = "1.33";
  needs.driver_branch = "R580";
  auto r = CompatMatrix::Builtin()->Check(Query("580.95.05", needs));
  EXPECT_TRUE(r.ok) << Failed(r);
  std::set<std::string> rules;
  for (const auto& p : r.passed) {
    rules.insert(p.rule);
    EXPECT_FALSE(p.source.empty()) << p.rule;
  }
  EXPECT_EQ(rules, (std::set<std::string>{"branch-known", "branch-eol", "branch-type", "pin",
                                          "cuda", "architecture", "gpu-operator", "kubernetes"}));
}

TEST(CompatTest, EachFailingRuleIsListedWithItsReason) {
  CompatNeeds needs;
  needs.cuda = "12.8";
  auto old = CompatMatrix::Builtin()->Check(Query("550.54.15", needs));
  EXPECT_FALSE(old.ok);
  EXPECT_EQ(Failed(old),
            "branch-eol: R550 is end of life\n"
            "cuda: CUDA 12.8 needs >= 570.26, 550.54.15 is older\n");
  EXPECT_NE(old.failed[1].source.find("Table 3"), std::string::npos);

  // Dated end of life: R535's was 2026-06, so it is over in December 2026, not in June.
  auto lts = Query("535.274.02");
  EXPECT_EQ(Failed(CompatMatrix::Builtin()->Check(lts)),
            "branch-eol: R535 is end of life (2026-06)\n");
  lts.today = "2026-06-30";
  EXPECT_TRUE(CompatMatrix::Builtin()->Check(lts).ok);

  // A new-feature branch: not for production, fine for development.
  auto nfb = Query("610.57.04");
  nfb.today = "2026-07-01";
  EXPECT_EQ(Failed(CompatMatrix::Builtin()->Check(nfb)),
            "branch-type: R610 is a new-feature branch: not for tier production\n");
  nfb.needs.tier = "development";
  EXPECT_TRUE(CompatMatrix::Builtin()->Check(nfb).ok);

  // Pinned, architecture, operator and Kubernetes.
  CompatNeeds pinned;
  pinned.driver_branch = "R580";
  pinned.gpu_operator = "v25.10.0";
  pinned.kubernetes = "1.29";
  auto q = Query("595.71.05", pinned);
  q.architectures = {"hopper", "volta"};
  EXPECT_EQ(Failed(CompatMatrix::Builtin()->Check(q)),
            "pin: the pool is pinned to R580, 595.71.05 is R595\n"
            "architecture: R595 does not support volta GPUs (R580 is the last)\n"
            "gpu-operator: GPU Operator v25.10.0 lists no R595 driver (it lists R580, R575, R570, "
            "R550, R535)\n"
            "kubernetes: GPU Operator v25.10.0 supports Kubernetes 1.30 to 1.34, not 1.29\n");
  auto blackwell = Query("565.57.01");
  blackwell.architectures = {"blackwell"};
  auto r = CompatMatrix::Builtin()->Check(blackwell);
  EXPECT_NE(Failed(r).find("architecture: blackwell GPUs need >= 570.26, 565.57.01 is older"),
            std::string::npos)
      << Failed(r);

  // What the matrix does not know is a failure, never a pass.
  CompatNeeds unknown;
  unknown.cuda = "14.0";
  unknown.gpu_operator = "v99.1";
  EXPECT_EQ(Failed(CompatMatrix::Builtin()->Check(Query("999.1", unknown))),
            "branch-known: R999 is not in the compatibility matrix\n"
            "cuda: CUDA 14.0 is not in the compatibility matrix\n"
            "gpu-operator: GPU Operator v99.1 is not in the compatibility matrix\n");
  EXPECT_EQ(Failed(CompatMatrix::Builtin()->Check(Query("latest"))),
            "driver: 'latest' is not a driver version such as 580.95.05\n");
}

TEST(CompatTest, AModelMinimumAppliesToThatModel) {
  auto q = Query("570.195.03");
  q.today = "2026-01-01";
  q.models = {"RTX-PRO-6000-BSE"};
  q.architectures = {"blackwell"};
  EXPECT_EQ(Failed(CompatMatrix::Builtin()->Check(q)),
            "model: RTX-PRO-6000-BSE needs >= 575.57.08, 570.195.03 is older\n");
}

TEST(CompatTest, AReplacementFileIsCheckedStrictlyWithLineAndField) {
  const std::string good = R"(version: 1
branches: {source: s, rows: [{branch: R580, type: ltsb, eol: "2028-06"}]}
cuda: {source: s, rows: [{cuda: "13.0", min_driver: 580.65.06}]}
architectures: {source: s, rows: []}
models: {source: s, rows: [{model: H100-SXM5-80GB, min_vbios: 96.00.A5.00.01}]}
gpu_operator: {source: s, rows: []}
)";
  auto m = CompatMatrix::Parse(good, "mine.yaml");
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m.value()->models()[0].min_vbios, "96.00.A5.00.01");
  for (const auto& [from, to, message] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"type: ltsb", "type: lts",
            "mine.yaml:2: branches.rows[0].type: 'lts' is not one of pb, ltsb, nfb"},
           {"eol: \"2028-06\"", "eol: June",
            "mine.yaml:2: branches.rows[0].eol: 'June' must be YYYY-MM or true"},
           {"min_driver: 580.65.06", "min_driver: new",
            "mine.yaml:3: cuda.rows[0].min_driver: 'new' must be a version such as 580.95.05"},
           {"min_vbios", "min_bios", "mine.yaml:5: models.rows[0].min_bios: unknown field"},
           {"gpu_operator: {source: s, rows: []}\n", "",
            "mine.yaml:1: gpu_operator: is required"}}) {
    std::string text = good;
    text.replace(text.find(from), from.size(), to);
    auto bad = CompatMatrix::Parse(text, "mine.yaml");
    ASSERT_FALSE(bad.ok()) << to;
    EXPECT_EQ(bad.error().message, message);
  }
}

TEST(CompatTest, NeedsAreCheckedForForm) {
  CompatNeeds n;
  EXPECT_EQ(ValidateNeeds(n), "");
  n.tier = "prod";
  EXPECT_EQ(ValidateNeeds(n), "tier: 'prod' is not one of production, staging, development");
  n.tier = "staging";
  n.cuda = "12.x";
  EXPECT_EQ(ValidateNeeds(n), "requires.cuda: '12.x' must be a CUDA version such as 12.8");
  n.cuda = "12.8";
  n.driver_branch = "580-open";
  EXPECT_EQ(ValidateNeeds(n), "driver_branch: '580-open' must be a branch such as R580");
  n.driver_branch = "580";
  n.gpu_operator = "latest";
  EXPECT_NE(ValidateNeeds(n).find("requires.gpu_operator"), std::string::npos);
}

}  // namespace
}  // namespace gpufleet
