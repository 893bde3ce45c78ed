// The drift service against a real fleet registry and store: a node that differs from its
// pool's profile opens a finding, the same difference seen again updates it, a node that comes
// back to the profile resolves it, a profile applied later is picked up on the next tick, and
// the findings survive a restart.

#include "lifecycle/drift_service.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "config/fleet_spec.h"
#include "tests/support/temp_dir.h"

namespace gpufleet::lifecycle {
namespace {

std::string FleetWith(const std::string& pool_profile) {
  return R"(apiVersion: gpufleet/v1
kind: Fleet
clusters:
  - name: c1
    type: training
    site: s1
    profile: {driver_version: "580.159.03"}
    pools:
      - {name: p1, gpu_model: L4, gpus_per_node: 1)" +
         pool_profile + "}\n";
}

class DriftTest : public ::testing::Test {
 protected:
  void SetUp() override {
    clock_->Set(1'796'169'600'000);
    store_ = store::Open("sqlite:" + (dir_ / "db").string()).value();
    fleet_ = std::make_unique<FleetService>(*store_.fleet, *store_.tokens, GpuCatalog::Builtin(),
                                            clock_, FleetOptions{});
    ASSERT_TRUE(fleet_->Load().ok());
    Apply("");
    join_ = fleet_->CreateJoinToken("p1", 3'600'000, "test")->secret;
    drift_ = std::make_unique<DriftService>(*fleet_, *store_.drift, clock_);
    ASSERT_TRUE(drift_->Load().ok());
  }
  void TearDown() override {
    drift_.reset();
    fleet_.reset();
    store_ = {};
  }
  void Apply(const std::string& pool_profile) {
    auto spec = ParseFleetSpec(FleetWith(pool_profile), "fleet.yaml", *GpuCatalog::Builtin());
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    ASSERT_TRUE(fleet_->Apply(spec.value()).ok());
  }
  // A node's hello with these versions (again: its facts change).
  void Hello(const std::string& name, const std::string& driver, const std::string& vbios,
             int power_limit_w = 72) {
    proto::Hello h;
    h.join_token = join_;
    h.facts.hostname = name;
    h.facts.driver_version = driver;
    Gpu g;
    g.uuid = "GPU-" + name;
    g.name = "NVIDIA L4";
    g.vbios_version = vbios;
    g.settings.power_limit_w = power_limit_w;
    h.gpus.push_back(g);
    if (auto t = node_tokens_.find(name); t != node_tokens_.end()) {
      h.join_token.clear();  // a registered node comes back with its own credential
      h.node_token = t->second;
    }
    auto w = fleet_->OnHello(h, "127.0.0.1");
    ASSERT_TRUE(w.ok()) << w.error().message;
    if (!w->node_token.empty()) node_tokens_[name] = w->node_token;
  }
  std::vector<DriftFinding> Open() { return drift_->List({.state = "open"}); }
  std::map<std::string, std::string> node_tokens_;

  testing::TempDir tmp_{"gf-drift"};  // removed with everything in it after the test
  std::filesystem::path dir_ = tmp_.path();
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  runtime::CommandBus bus_{clock_};  // the answers go to the service that sent the command
  store::Stores store_;
  std::unique_ptr<FleetService> fleet_;
  std::unique_ptr<DriftService> drift_;
  std::string join_;
};

TEST_F(DriftTest, FindingsOpenUpdateAndResolveAsTheFactsAndTheProfileChange) {
  Hello("n1", "580.159.03", "95.04.00.00.01");
  Hello("n2", "580.95.05", "95.04.00.00.01");
  ASSERT_TRUE(drift_->Tick().ok());
  auto open = Open();
  ASSERT_EQ(open.size(), 1u);
  EXPECT_EQ(open[0].node, "n2");
  EXPECT_EQ(open[0].fact, "driver_version");
  EXPECT_EQ(open[0].actual, "580.95.05");
  EXPECT_EQ(open[0].first_seen_ms, clock_->NowMs());
  const int64_t id = open[0].id, first = clock_->NowMs();

  // Seen again later: the same finding, nothing written for it yet (its last seen time is
  // written every ten minutes, or when it changes).
  clock_->Advance(60'000);
  EXPECT_EQ(drift_->Tick().value(), 0);
  // The node moves to another wrong version: the same finding, its actual value changes.
  Hello("n2", "570.86.10", "95.04.00.00.01");
  EXPECT_EQ(drift_->Tick().value(), 1);
  open = Open();
  ASSERT_EQ(open.size(), 1u);
  EXPECT_EQ(open[0].id, id);
  EXPECT_EQ(open[0].actual, "570.86.10");
  EXPECT_EQ(open[0].first_seen_ms, first);
  EXPECT_EQ(open[0].last_seen_ms, clock_->NowMs());

  // A profile applied to the pool: its VBIOS is now asked for, and n1 differs.
  Apply(R"(, profile: {firmware: {L4: {vbios: "95.04.5A.00.01"}}})");
  ASSERT_TRUE(drift_->Tick().ok());
  open = Open();
  ASSERT_EQ(open.size(), 3u);
  int vbios = 0;
  for (const auto& f : open) {
    if (f.fact == "vbios") {
      ++vbios;
      EXPECT_EQ(f.gpu, 0);
      EXPECT_EQ(f.remediation, "rollout");
    }
  }
  EXPECT_EQ(vbios, 2);
  EXPECT_EQ(drift_->NodeSeverity().at("n2"), SeverityRank("high"));

  // n2 comes back to the profile's driver: its driver finding is resolved, and stays listed.
  clock_->Advance(1000);
  Hello("n2", "580.159.03", "95.04.00.00.01");
  ASSERT_TRUE(drift_->Tick().ok());
  auto resolved = drift_->Get(id);
  ASSERT_TRUE(resolved.ok());
  EXPECT_EQ(resolved->state, "resolved");
  EXPECT_EQ(resolved->resolved_ms, clock_->NowMs());
  EXPECT_EQ(Open().size(), 2u);
  EXPECT_EQ(drift_->List({.node = "n2", .severity = "high"}).size(), 1u) << "the resolved one";

  // A restart reads them back.
  drift_ = std::make_unique<DriftService>(*fleet_, *store_.drift, clock_);
  ASSERT_TRUE(drift_->Load().ok());
  EXPECT_EQ(Open().size(), 2u);
  EXPECT_EQ(drift_->Get(id)->state, "resolved");
  // And a new finding after it gets a new id.
  Hello("n3", "580.95.05", "95.04.5A.00.01");
  ASSERT_TRUE(drift_->Tick().ok());
  auto n3 = drift_->List({.node = "n3"});
  ASSERT_EQ(n3.size(), 1u);
  EXPECT_GT(n3[0].id, id);
}

// A driver finding whose node a rollout is taking to the profile's version is remediating
// while it does, and open again if the rollout is to something else or ends with it unchanged.
TEST_F(DriftTest, AFindingIsRemediatingWhileARolloutTakesItsNodeToTheProfile) {
  std::map<std::string, std::string> targets;
  drift_->set_rollout_targets([&] { return targets; });
  Hello("n1", "580.95.05", "95.04.00.00.01");
  ASSERT_TRUE(drift_->Tick().ok());
  ASSERT_EQ(drift_->List({.node = "n1"}).at(0).state, "open");
  targets["n1"] = "driver 580.159.03";
  EXPECT_EQ(drift_->Tick().value(), 1);
  EXPECT_EQ(drift_->List({.node = "n1"}).at(0).state, "remediating");
  targets["n1"] = "driver 580.126.09";  // not the profile's
  ASSERT_TRUE(drift_->Tick().ok());
  EXPECT_EQ(drift_->List({.node = "n1"}).at(0).state, "open");
  targets.clear();
  Hello("n1", "580.159.03", "95.04.00.00.01");
  ASSERT_TRUE(drift_->Tick().ok());
  EXPECT_EQ(drift_->List({.node = "n1"}).at(0).state, "resolved");
}

// Remediation "auto": the service asks the node's agent to set the profile's value, audits the
// attempt, shows the finding remediating, and the next facts resolve it. A failed attempt is
// retried a minute later, three at most; the circuit breaker holds the cluster's other nodes
// while its share of nodes being changed is reached.
TEST_F(DriftTest, AnAutoFindingIsSetByTheAgentRetriedAndBoundedByTheBreaker) {
  drift_ = std::make_unique<DriftService>(*fleet_, *store_.drift, clock_, store_.audit.get());
  ASSERT_TRUE(drift_->Load().ok());
  std::vector<std::pair<std::string, proto::Command>> sent;
  bus_.set_transport([&](const std::string& node, const proto::Command& cmd) {
    sent.emplace_back(node, cmd);
    return Status{};
  });
  drift_->set_commands(&bus_);
  Apply(", profile: {power_limit_w: 72}");
  Hello("n1", "580.159.03", "95.04.00.00.01", 60);
  Hello("n2", "580.159.03", "95.04.00.00.01", 50);
  ASSERT_TRUE(drift_->Tick().ok());
  // Two nodes, max_share 0.1: one node at a time.
  ASSERT_EQ(sent.size(), 1u);
  const std::string first = sent[0].first;
  EXPECT_EQ(sent[0].second.action, proto::kApplySettingAction);
  EXPECT_EQ(sent[0].second.gpu, 0);
  EXPECT_EQ(sent[0].second.args, (std::vector<std::string>{"power_limit_w", "72"}));
  auto f = drift_->List({.node = first}).at(0);
  EXPECT_EQ(f.fact, "power_limit_w");
  EXPECT_EQ(f.remediation, "auto");
  EXPECT_EQ(f.state, "remediating");
  const std::string other = first == "n1" ? "n2" : "n1";
  EXPECT_EQ(drift_->List({.node = other}).at(0).state, "open") << "held by the breaker";

  // The agent refuses: the finding is open again with why, and retried a minute later.
  bus_.OnResult(first, proto::CommandResult{sent[0].second.id, 0, sent[0].second.action, false,
                                            "NVML_ERROR_NO_PERMISSION", -1, 5});
  f = drift_->Get(f.id).value();
  EXPECT_EQ(f.state, "open");
  EXPECT_NE(f.note.find("attempt 1: failed: NVML_ERROR_NO_PERMISSION"), std::string::npos)
      << f.note;
  ASSERT_TRUE(drift_->Tick().ok());
  // The breaker is free again: the other node is asked now, the first waits for its minute.
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[1].first, other);
  for (int attempt = 2; attempt <= 3; ++attempt) {
    bus_.OnResult(other,
                  proto::CommandResult{sent[1].second.id, 0, "apply-setting", true, "set", 0, 5});
    clock_->Advance(kAutoRetryMs);
    size_t before = sent.size();
    ASSERT_TRUE(drift_->Tick().ok());
    ASSERT_GT(sent.size(), before);
    EXPECT_EQ(sent.back().first, first) << "attempt " << attempt;
    bus_.OnResult(first, proto::CommandResult{sent.back().second.id, 0, "apply-setting", false,
                                              "refused", -1, 5});
  }
  // Three attempts: the first node's finding is left for an operator, open with why.
  clock_->Advance(kAutoRetryMs);
  size_t before = sent.size();
  ASSERT_TRUE(drift_->Tick().ok());
  for (size_t i = before; i < sent.size(); ++i) EXPECT_NE(sent[i].first, first);
  f = drift_->Get(f.id).value();
  EXPECT_EQ(f.state, "open");
  EXPECT_NE(f.note.find("stopped after 3 attempts"), std::string::npos) << f.note;

  // The other node's agent did it: its next facts resolve the finding.
  Hello(other, "580.159.03", "95.04.00.00.01", 72);
  ASSERT_TRUE(drift_->Tick().ok());
  EXPECT_EQ(drift_->List({.node = other}).at(0).state, "resolved");

  // Every attempt and answer is in the audit log.
  store::AuditFilter filter;
  filter.limit = 100;
  auto audit = store_.audit->QueryAudit(filter);
  ASSERT_TRUE(audit.ok());
  int asked = 0, answers = 0;
  for (const auto& a : audit.value()) {
    if (a.actor != "drift") continue;
    asked += a.action.rfind("drift auto remediation: set power_limit_w to 72", 0) == 0;
    answers += a.action.rfind("drift auto remediation result", 0) == 0;
  }
  // Three for the first node; two for the other: its agent's first "done" left the value as it
  // was, so it was asked again a minute later.
  EXPECT_EQ(asked, 5);
  EXPECT_EQ(answers, 4);  // the first node's three, the other's first
}

// ECC and MIG modes need a GPU reset: auto waits for the pool's maintenance window.
TEST_F(DriftTest, AnEccChangeWaitsForTheMaintenanceWindow) {
  std::vector<proto::Command> sent;
  bus_.set_transport([&](const std::string&, const proto::Command& cmd) {
    sent.push_back(cmd);
    return Status{};
  });
  drift_->set_commands(&bus_);
  // Sundays 02:00-04:00 UTC; the clock is a Wednesday (2026-12-02 00:00 UTC).
  Apply(
      ", profile: {ecc_mode: true, remediation: {ecc_mode: auto}}, maintenance_windows: "
      "[{days: [sun], from: \"02:00\", to: \"04:00\", timezone: UTC}]");
  proto::Hello h;
  h.join_token = join_;
  h.facts.hostname = "n1";
  h.facts.driver_version = "580.159.03";
  Gpu g;
  g.uuid = "GPU-n1";
  g.name = "NVIDIA L4";
  g.settings.ecc_mode = 0;
  h.gpus.push_back(g);
  ASSERT_TRUE(fleet_->OnHello(h, "127.0.0.1").ok());
  ASSERT_TRUE(drift_->Tick().ok());
  EXPECT_TRUE(sent.empty());
  auto f = drift_->List({.node = "n1"}).at(0);
  EXPECT_EQ(f.fact, "ecc_mode");
  EXPECT_EQ(f.remediation, "auto");
  EXPECT_NE(f.note.find("maintenance window"), std::string::npos) << f.note;
  clock_->Set(1'796'169'600'000 + (4 * 24 + 2) * 3'600'000LL + 60'000);  // Sunday 02:01
  ASSERT_TRUE(drift_->Tick().ok());
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].args, (std::vector<std::string>{"ecc_mode", "enabled"}));
}

}  // namespace
}  // namespace gpufleet::lifecycle
