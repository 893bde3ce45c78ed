// Golden profiles: the strict reader's messages, the merge of a pool's over its cluster's,
// patterns, and the drift of a node, where a fact the node did not report is never a match.

#include "model/profile.h"

#include <gtest/gtest.h>

#include <map>

namespace gpufleet {
namespace {

Node H100Node() {
  Node n;
  n.name = "n1";
  n.pool = "p1";
  n.cluster = "c1";
  n.facts.driver_version = "580.95.05";
  n.facts.cuda_driver_version = "13.0";
  n.facts.kernel = "6.1.0-28-amd64";
  n.facts.os = "Debian GNU/Linux 12 (bookworm)";
  n.facts.container_toolkit = "";  // not installed, or the package database unreadable
  for (int i = 0; i < 2; ++i) {
    Gpu g;
    g.index = i;
    g.model = "H100-SXM5-80GB";
    g.vbios_version = i == 0 ? "96.00.99.00.01" : "96.00.A5.00.01";
    g.mig_mode = 0;
    n.gpus.push_back(g);
  }
  return n;
}

TEST(Profile, ReadsBackWhatItWritesAndNamesTheFieldOfAnError) {
  auto p = ParseProfile(R"({"driver_version":"580.159.03","kernel":"6.1.0-*-amd64",
      "firmware":{"H100-SXM5-80GB":{"vbios":"96.00.A5.00.01"}},"mig_mode":false,
      "remediation":{"vbios":"manual"}})");
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->firmware.at("H100-SXM5-80GB").vbios, "96.00.A5.00.01");
  auto back = ParseProfile(ProfileJson(p.value()));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back.value(), p.value());
  EXPECT_EQ(ProfileJson(Profile{}), "{}");

  EXPECT_EQ(ParseProfile(R"({"drivr":"1"})").error().message.substr(0, 22),
            "drivr: unknown field (");
  EXPECT_EQ(ParseProfile(R"({"cuda_driver":13.0})").error().message,
            "cuda_driver: must be a non-empty string");
  EXPECT_EQ(ParseProfile(R"({"firmware":{"H100-SXM5-80GB":{"vbios":""}}})").error().message,
            "firmware.H100-SXM5-80GB.vbios: must be a non-empty string");
  EXPECT_EQ(ParseProfile(R"({"mig_mode":"yes"})").error().message,
            "mig_mode: must be true or false");
  EXPECT_EQ(ParseProfile(R"({"remediation":{"kernel":"rollout"}})").error().message,
            "remediation.kernel: a rollout cannot change it: manual only");
  EXPECT_EQ(ParseProfile(R"({"remediation":{"color":"manual"}})").error().message,
            "remediation.color: not a fact a profile checks");
}

TEST(Profile, APoolsFieldsGoOverItsClustersAndTheRestIsInherited) {
  Profile cluster, pool;
  cluster.driver_version = "580.159.03";
  cluster.kernel = "6.1.0-*";
  cluster.firmware["H100-SXM5-80GB"] = {"96.00.A5.00.01", "G520.0200.00.05"};
  pool.kernel = "6.12.*";
  pool.firmware["H100-SXM5-80GB"].vbios = "96.00.B0.00.01";
  pool.mig_mode = true;
  Profile m = Merge(cluster, pool);
  EXPECT_EQ(m.driver_version, "580.159.03");
  EXPECT_EQ(m.kernel, "6.12.*");
  EXPECT_EQ(m.firmware.at("H100-SXM5-80GB").vbios, "96.00.B0.00.01");
  EXPECT_EQ(m.firmware.at("H100-SXM5-80GB").inforom, "G520.0200.00.05");
  EXPECT_EQ(m.mig_mode, std::optional<bool>(true));
}

TEST(Profile, PatternsMatchAnyRunAndOneCharacter) {
  EXPECT_TRUE(GlobMatch("6.1.0-*-amd64", "6.1.0-28-amd64"));
  EXPECT_TRUE(GlobMatch("6.1.0-2?-amd64", "6.1.0-28-amd64"));
  EXPECT_TRUE(GlobMatch("*", ""));
  EXPECT_TRUE(GlobMatch("6.1.0-28-amd64", "6.1.0-28-amd64"));
  EXPECT_FALSE(GlobMatch("6.1.0-*-amd64", "6.12.0-28-amd64"));
  EXPECT_FALSE(GlobMatch("6.1.0-2?-amd64", "6.1.0-2-amd64"));
  EXPECT_FALSE(GlobMatch("6.1", "6.1.0"));
  EXPECT_TRUE(GlobMatch("a*b*c", "aXXbYYbc"));
}

TEST(Profile, ANodeDriftsFieldByFieldAndAnUnknownFactIsNeverAMatch) {
  Profile p;
  p.driver_version = "580.159.03";
  p.cuda_driver = "13.0";                                 // matches
  p.kernel = "6.1.0-*-amd64";                             // matches
  p.container_toolkit = "1.19.1";                         // not reported: unknown
  p.firmware["H100-SXM5-80GB"].vbios = "96.00.A5.00.01";  // GPU 0 differs
  p.firmware["A100-SXM4-80GB"].vbios = "92.00.00.00.01";  // no such GPU here
  p.mig_mode = false;                                     // matches
  auto found = EvaluateDrift(p, H100Node());
  ASSERT_EQ(found.size(), 3u);
  EXPECT_EQ(found[0].fact, "driver_version");
  EXPECT_EQ(found[0].expected, "580.159.03");
  EXPECT_EQ(found[0].actual, "580.95.05");
  EXPECT_EQ(found[0].severity, "high");
  EXPECT_EQ(found[0].remediation, "rollout");
  EXPECT_EQ(found[0].gpu, -1);
  EXPECT_EQ(found[1].fact, "container_toolkit");
  EXPECT_EQ(found[1].actual, "unknown");
  EXPECT_EQ(found[1].remediation, "manual");
  EXPECT_EQ(found[2].fact, "vbios");
  EXPECT_EQ(found[2].gpu, 0);
  EXPECT_EQ(found[2].actual, "96.00.99.00.01");
  EXPECT_EQ(found[2].remediation, "rollout");

  // The profile's remediation overrides the fact's; a kernel outside the pattern is found.
  p.remediation["vbios"] = "manual";
  p.kernel = "6.12.*";
  Node n = H100Node();
  n.gpus[1].mig_mode = -1;  // cannot tell: reported as such, not as a match
  found = EvaluateDrift(p, n);
  ASSERT_EQ(found.size(), 5u);
  EXPECT_EQ(found[1].fact, "kernel");
  EXPECT_EQ(found[3].fact, "vbios");
  EXPECT_EQ(found[3].remediation, "manual");
  EXPECT_EQ(found[4].fact, "mig_mode");
  EXPECT_EQ(found[4].gpu, 1);
  EXPECT_EQ(found[4].actual, "not supported");

  EXPECT_TRUE(EvaluateDrift(Profile{}, n).empty()) << "an empty profile asks for nothing";
}

// Settings, the OS image, InfiniBand partition keys and device files: each GPU's setting
// against the profile's (auto where the agent can set it), the most specific port pattern,
// device files others may open; what a node cannot tell is unknown and manual.
TEST(Profile, SettingsImagePartitionKeysAndDeviceFilesDrift) {
  auto p = ParseProfile(R"({"image_id":"dgx-os-7.*","persistence_mode":true,"ecc_mode":true,
      "compute_mode":"exclusive_process","power_limit_w":700,
      "application_clocks":{"graphics_mhz":1980,"memory_mhz":2619},
      "ib_pkeys":{"*":["0xffff"],"mlx5_1/1":["0xffff","0x8001"]},
      "device_files":{"mode":"660","group":"video"},"remediation":{"ecc_mode":"auto"}})");
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->device_mode, "0660");
  EXPECT_EQ(ParseProfile(ProfileJson(p.value())).value(), p.value()) << "round trip";
  Node n = H100Node();
  n.facts.image_id = "dgx-os-7.1:2026.10";                     // matches
  n.facts.nics = {{"mlx5_0", "", "", "", {{1, {"0xffff"}}}},   // matches "*"
                  {"mlx5_1", "", "", "", {{1, {"0xffff"}}}}};  // lacks 0x8001
  n.facts.device_files = std::vector<DeviceFile>{{"/dev/nvidia0", "0666", "root"},
                                                 {"/dev/nvidiactl", "0660", "video"}};
  n.gpus[0].settings = {1, 1, 1, "exclusive_process", 700, 1980, 2619};  // matches
  n.gpus[1].settings = {0, 0, 1, "default", 500, -1, -1};
  Profile want = p.value();
  want.driver_version.clear();
  auto found = EvaluateDrift(want, n);
  std::map<std::string, DriftFinding> by;
  for (const auto& f : found) by[f.fact + "/" + std::to_string(f.gpu)] = f;
  ASSERT_EQ(found.size(), 7u);
  EXPECT_EQ(by.at("ecc_mode/1").remediation, "auto");  // the profile's choice
  EXPECT_EQ(by.at("ecc_mode/1").actual, "disabled");
  EXPECT_EQ(by.at("persistence_mode/1").remediation, "auto");
  EXPECT_EQ(by.at("persistence_mode/1").severity, "low");
  EXPECT_EQ(by.at("compute_mode/1").expected, "exclusive_process");
  EXPECT_EQ(by.at("power_limit_w/1").expected, "700");
  EXPECT_EQ(by.at("power_limit_w/1").actual, "500");
  EXPECT_EQ(by.at("application_clocks/1").actual, "unknown");  // the GPU did not tell
  EXPECT_EQ(by.at("application_clocks/1").remediation, "manual");
  EXPECT_EQ(by.at("ib_pkeys:mlx5_1/1/-1").expected, "0x8001 0xffff");
  EXPECT_EQ(by.at("ib_pkeys:mlx5_1/1/-1").actual, "0xffff");
  EXPECT_EQ(by.at("device_files/-1").expected, "mode 0660, group video");
  EXPECT_EQ(by.at("device_files/-1").actual, "/dev/nvidia0 0666 root");
  EXPECT_EQ(by.at("device_files/-1").severity, "high");
  // No readable port, no device list, no image id: unknown, never a match.
  n.facts.nics.clear();
  n.facts.device_files.reset();
  n.facts.image_id.clear();
  n.gpus.resize(1);
  found = EvaluateDrift(want, n);
  ASSERT_EQ(found.size(), 3u);
  for (const auto& f : found) EXPECT_EQ(f.actual, "unknown") << f.fact;

  // auto only where the agent can set it; rollout only for what a rollout installs.
  EXPECT_EQ(ParseProfile(R"({"remediation":{"kernel":"auto"}})").error().message,
            "remediation.kernel: the agent cannot set it: manual only");
  EXPECT_EQ(ParseProfile(R"({"remediation":{"power_limit_w":"rollout"}})").error().message,
            "remediation.power_limit_w: a rollout cannot change it: auto or manual");
  EXPECT_EQ(ParseProfile(R"({"compute_mode":"shared"})").error().message,
            "compute_mode: must be default, exclusive_process or prohibited");
  EXPECT_EQ(ParseProfile(R"({"ib_pkeys":{"*":["0x1ffff"]}})").error().message,
            "ib_pkeys.*[0]: must be a partition key, 0x0000 to 0xffff");
  EXPECT_EQ(ParseProfile(R"({"device_files":{"mode":"rw"}})").error().message,
            "device_files.mode: must be octal bits, \"0660\"");
  EXPECT_EQ(ParseProfile(R"({"application_clocks":{"graphics_mhz":1980}})").error().message,
            "application_clocks: needs both graphics_mhz and memory_mhz");
  // The setting values the agent's command takes.
  EXPECT_EQ(ParseGpuSetting("application_clocks", "1980/2619")->second, 2619);
  EXPECT_EQ(ParseGpuSetting("compute_mode", "exclusive_process")->number, 3);  // NVML's value
  EXPECT_FALSE(ParseGpuSetting("power_limit_w", "0").ok());
}

// Software: a required package missing or at another version, a forbidden one present, one
// outside the allowlist; a node that cannot read its package database is one finding.
TEST(Profile, PackagesRequiredForbiddenAndAllowed) {
  auto p = ParseProfile(R"({"packages":{"required":["datacenter-gpu-manager=3.3.9","rdma-core"],
      "forbidden":["xmrig"],"allowed":["nvidia-*","datacenter-gpu-manager","openssh-server"]}})");
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(ParseProfile(ProfileJson(p.value())).value(), p.value());
  EXPECT_EQ(ParseProfile(R"({"packages":{"allowed":["curl=8"]}})").error().message,
            "packages.allowed[0]: the allowlist names packages, not versions");
  EXPECT_EQ(ParseProfile(R"({"packages":{"denied":[]}})").error().message,
            "packages.denied: unknown field (known: required, forbidden, allowed)");
  Node n = H100Node();
  n.facts.packages = std::map<std::string, std::string>{
      {"datacenter-gpu-manager", "1:3.3.9"},  // an epoch: still 3.3.9
      {"nvidia-container-toolkit", "1.19.1-1"},
      {"openssh-server", "1:9.2p1-2"},
      {"xmrig", "6.21.0"}};
  auto found = EvaluateDrift(p.value(), n);
  std::map<std::string, DriftFinding> by_fact;
  for (const auto& f : found) by_fact[f.fact] = f;
  ASSERT_EQ(found.size(), 2u) << "rdma-core missing; xmrig forbidden (once, not again as "
                                 "outside the allowlist)";
  EXPECT_EQ(by_fact.at("package:rdma-core").actual, "not installed");
  EXPECT_EQ(by_fact.at("package:rdma-core").severity, "medium");
  EXPECT_EQ(found[1].fact, "package:xmrig");
  EXPECT_EQ(found[1].severity, "critical");  // a security finding
  EXPECT_EQ(found[1].expected, "not installed");
  EXPECT_EQ(found[1].remediation, "manual");
  (*n.facts.packages)["curl"] = "7.88.1-10";
  found = EvaluateDrift(p.value(), n);
  ASSERT_EQ(found.size(), 3u);
  EXPECT_EQ(found[2].fact, "package:curl");
  EXPECT_EQ(found[2].expected, "not installed (not in the allowlist)");
  n.facts.packages.reset();
  found = EvaluateDrift(p.value(), n);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].fact, "packages");
  EXPECT_EQ(found[0].actual, "unknown");
}

TEST(Profile, AStoredFindingReadsBack) {
  DriftFinding f;
  f.id = 7;
  f.node = "n1";
  f.gpu = 3;
  f.fact = "vbios";
  f.state = "resolved";
  f.first_seen_ms = 10;
  f.resolved_ms = 30;
  auto back = ParseDriftFinding(DriftFindingJson(f));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->gpu, 3);
  EXPECT_EQ(back->resolved_ms, 30);
  EXPECT_TRUE(back->SameAs(f));
}

TEST(Profile, AMigLayoutIsCheckedOnEveryMigEnabledGpu) {
  auto p = ParseProfile(R"({"mig_mode":true,"mig_layout":{"3g.40gb":1,"1g.10gb":4}})");
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(ParseProfile(ProfileJson(p.value())).value(), p.value());
  EXPECT_EQ(ParseProfile(R"({"mig_layout":{"big":1}})").error().message,
            "mig_layout.big: not a GPU instance profile such as 1g.10gb or 3g.40gb");
  EXPECT_EQ(ParseProfile(R"({"mig_layout":{"1g.10gb":0}})").error().message,
            "mig_layout.1g.10gb: must be a count of instances, 1 to 8");
  EXPECT_TRUE(ParseProfile(R"({"mig_layout":{"1g.10gb+me":1,"1g.20gb":2}})").ok());

  Node n = H100Node();
  n.gpus[0].mig_mode = 1;
  n.gpus[0].mig_layout = std::map<std::string, int>{{"1g.10gb", 4}, {"3g.40gb", 1}};  // matches
  n.gpus[1].mig_mode = 1;
  n.gpus[1].mig_layout = std::map<std::string, int>{{"7g.80gb", 1}};
  auto found = EvaluateDrift(p.value(), n);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].fact, "mig_layout");
  EXPECT_EQ(found[0].gpu, 1);
  EXPECT_EQ(found[0].expected, "1g.10gb x4, 3g.40gb x1");
  EXPECT_EQ(found[0].actual, "7g.80gb x1");
  EXPECT_EQ(found[0].remediation, "manual");

  // A layout the driver would not list is unknown; MIG off is the mig_mode finding alone, and
  // without a mig_mode in the profile the layout's own.
  n.gpus[1].mig_layout.reset();
  n.gpus[0].mig_mode = 0;
  found = EvaluateDrift(p.value(), n);
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].fact, "mig_mode");
  EXPECT_EQ(found[0].gpu, 0);
  EXPECT_EQ(found[1].fact, "mig_layout");
  EXPECT_EQ(found[1].gpu, 1);
  EXPECT_EQ(found[1].actual, "unknown");
  p->mig_mode.reset();
  found = EvaluateDrift(p.value(), n);
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].actual, "MIG disabled");
}

TEST(Profile, OverridesSelectedByNodeLabelsGoOverThePoolsFields) {
  auto cluster = ParseProfile(R"({"power_limit_w":700,"overrides":[
      {"labels":{"rack":"r1*"},"power_limit_w":600},
      {"labels":{"rack":"r12","cooling":"air"},"power_limit_w":500,"kernel":"6.12.*"}]})");
  ASSERT_TRUE(cluster.ok()) << cluster.error().message;
  EXPECT_EQ(ParseProfile(ProfileJson(cluster.value())).value(), cluster.value());
  auto pool = ParseProfile(R"({"driver_version":"580.159.03","overrides":[
      {"labels":{"canary":"yes"},"driver_version":"580.126.09"}]})");
  ASSERT_TRUE(pool.ok());
  Profile merged = Merge(cluster.value(), pool.value());
  ASSERT_EQ(merged.overrides.size(), 3u);  // the cluster's, then the pool's

  Profile plain = ForNode(merged, {{"rack", "r2"}});
  EXPECT_EQ(plain.power_limit_w, 700);
  EXPECT_EQ(plain.driver_version, "580.159.03");
  EXPECT_TRUE(plain.overrides.empty());
  Profile r12 = ForNode(merged, {{"rack", "r12"}, {"cooling", "air"}, {"canary", "yes"}});
  EXPECT_EQ(r12.power_limit_w, 500);  // both matched, the later over the earlier
  EXPECT_EQ(r12.kernel, "6.12.*");
  EXPECT_EQ(r12.driver_version, "580.126.09");
  EXPECT_EQ(ForNode(merged, {{"rack", "r12"}}).power_limit_w, 600);  // needs every label

  // The node's own profile is what it is judged by.
  Node n = H100Node();
  n.facts.labels = {{"canary", "yes"}};
  Profile mine = ForNode(merged, n.facts.labels);
  auto found = EvaluateDrift(mine, n);
  ASSERT_FALSE(found.empty());
  EXPECT_EQ(found[0].fact, "driver_version");
  EXPECT_EQ(found[0].expected, "580.126.09");

  EXPECT_EQ(ParseProfile(R"({"overrides":[{"power_limit_w":1}]})").error().message,
            "overrides[0].labels: must be a mapping of node label to value (or pattern)");
  EXPECT_EQ(ParseProfile(R"({"overrides":[{"labels":{"a":"b"}}]})").error().message,
            "overrides[0]: sets no field");
  EXPECT_EQ(
      ParseProfile(R"({"overrides":[{"labels":{"a":"b"},"power_limit_w":"x"}]})").error().message,
      "overrides[0].power_limit_w: must be a whole number of watts, 1 to 10000");
  EXPECT_EQ(ParseProfile(R"({"overrides":[{"labels":{"a":"b"},"overrides":[]}]})")
                .error()
                .message.substr(0, 35),
            "overrides[0].overrides: unknown fie");
}

TEST(Profile, NodeLabelsAreKeyEqualsValue) {
  auto labels = ParseLabelArgs({"rack=r12", "topology.kubernetes.io/zone=us-east-1a", "spare="});
  ASSERT_TRUE(labels.ok()) << labels.error().message;
  EXPECT_EQ(labels->at("topology.kubernetes.io/zone"), "us-east-1a");
  EXPECT_EQ(labels->at("spare"), "");
  EXPECT_FALSE(ParseLabelArgs({"rack"}).ok());
  EXPECT_FALSE(ParseLabelArgs({"=r1"}).ok());
  EXPECT_FALSE(ParseLabelArgs({"rack=r 1"}).ok());
  EXPECT_EQ(ParseLabelArgs({"rack=r1", "rack=r2"}).error().message, "label 'rack' is given twice");
}

}  // namespace
}  // namespace gpufleet
