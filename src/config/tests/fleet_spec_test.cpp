#include "config/fleet_spec.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace gpufleet {
namespace {

namespace fs = std::filesystem;

std::string Read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

TEST(FleetSpec, ExampleFleetIsValidAndRealistic) {
  auto spec = ParseFleetSpec(Read(fs::path(GPUFLEET_SOURCE_DIR) / "examples/fleet.yaml"),
                             "fleet.yaml", *GpuCatalog::Builtin());
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  std::set<ClusterType> types;
  std::set<std::string> sites, models;
  for (const auto& c : spec->clusters) {
    types.insert(c.type);
    sites.insert(c.site);
  }
  int nodes = 0, gpus = 0;
  for (const auto& p : spec->pools) {
    nodes += p.size;
    gpus += p.size * p.gpus_per_node;
    models.insert(p.gpu_model);
  }
  EXPECT_GE(spec->clusters.size(), 4u);
  EXPECT_EQ(types.size(), 4u) << "one cluster of each type";
  EXPECT_GE(sites.size(), 2u);
  EXPECT_GE(nodes, 64);
  EXPECT_GE(gpus, 400);
  EXPECT_GE(models.size(), 3u);
}

// What export writes reads back as the same spec: clusters, pools (with their windows, needs,
// labels and exporters) and scaling policies, and writing that again gives the same text.
TEST(FleetSpec, AWrittenSpecReadsBackTheSame) {
  auto spec = ParseFleetSpec(Read(fs::path(GPUFLEET_SOURCE_DIR) / "examples/fleet.yaml"),
                             "fleet.yaml", *GpuCatalog::Builtin());
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  spec->pools[0].exporters = {{"legacy-01", "http://10.0.0.5:9400/metrics"}};
  spec->pools[0].scrape_interval_ms = 1500;
  spec->clusters[0].remediation.drain_unhealthy = true;
  spec->clusters[0].labels["note"] = "true";  // a string that looks like a boolean stays one
  spec->pools[0].lifecycle.profile.kernel = "6.1.0-*-amd64";
  spec->pools[0].lifecycle.profile.firmware["H100-SXM5-80GB"].vbios = "96.00.A5.00.01";
  spec->pools[0].lifecycle.profile.mig_mode = false;
  const std::string text = WriteFleetSpec(spec.value());
  auto back = ParseFleetSpec(text, "export.yaml", *GpuCatalog::Builtin());
  ASSERT_TRUE(back.ok()) << back.error().message << "\n" << text;
  ASSERT_EQ(back->clusters.size(), spec->clusters.size());
  for (size_t i = 0; i < spec->clusters.size(); ++i) {
    EXPECT_EQ(back->clusters[i].labels, spec->clusters[i].labels);
    EXPECT_EQ(back->clusters[i].remediation, spec->clusters[i].remediation);
    EXPECT_EQ(back->clusters[i].lifecycle, spec->clusters[i].lifecycle);
  }
  ASSERT_EQ(back->pools.size(), spec->pools.size());
  EXPECT_EQ(back->pools[0].exporters, spec->pools[0].exporters);
  EXPECT_EQ(back->pools[0].scrape_interval_ms, 1500);
  EXPECT_EQ(back->pools[0].lifecycle.profile, spec->pools[0].lifecycle.profile);
  EXPECT_FALSE(back->clusters[0].lifecycle.profile.empty()) << "the example has profiles";
  ASSERT_EQ(back->scaling.size(), 1u);
  EXPECT_EQ(PoolScalingJson(back->scaling[0]), PoolScalingJson(spec->scaling[0]));
  // The teams, and the owners of clusters and pools.
  ASSERT_TRUE(back->teams);
  EXPECT_EQ(*back->teams, *spec->teams);
  EXPECT_EQ(back->teams->size(), 5u);
  EXPECT_EQ(back->clusters[0].team, "nlp");
  for (size_t i = 0; i < spec->pools.size(); ++i)
    EXPECT_EQ(back->pools[i].team, spec->pools[i].team);
  EXPECT_EQ(WriteFleetSpec(back.value()), text);
}

// The file's alert channels: each kept as the JSON the API checks, with its line; written back
// after the clusters; a file without `channels:` says nothing of them (none, not an empty list).
TEST(FleetSpec, ChannelsAreReadAsTheApiTakesThemAndWrittenBack) {
  const std::string head = R"(apiVersion: gpufleet/v1
kind: Fleet
clusters:
  - {name: c1, type: edge, site: s, pools: [{name: p1, gpu_model: L4, gpus_per_node: 1}]}
)";
  auto none = ParseFleetSpec(head, "f.yaml", *GpuCatalog::Builtin());
  ASSERT_TRUE(none.ok()) << none.error().message;
  EXPECT_FALSE(none->channels.has_value());
  auto spec = ParseFleetSpec(head + R"(channels:
  - name: ops
    type: webhook
    url: https://hooks.example.com/gpu
    matchers: [{name: severity, value: critical, isRegex: false, isEqual: true}]
    group_by: [alertname, cluster]
  - {name: am, type: alertmanager, url: "http://127.0.0.1:9093"}
)",
                             "f.yaml", *GpuCatalog::Builtin());
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  ASSERT_EQ(spec->channels->size(), 2u);
  EXPECT_EQ(spec->channels->at(0).name, "ops");
  EXPECT_EQ(spec->channels->at(0).line, 6);
  EXPECT_EQ(spec->channels->at(0).json,
            R"({"name":"ops","type":"webhook","url":"https://hooks.example.com/gpu",)"
            R"("matchers":[{"name":"severity","value":"critical","isRegex":false,"isEqual":true}],)"
            R"("group_by":["alertname","cluster"]})");
  const std::string text = WriteFleetSpec(spec.value());
  EXPECT_NE(text.find("channels:\n  - {\"name\": \"ops\", \"type\": \"webhook\""),
            std::string::npos)
      << text;
  auto back = ParseFleetSpec(text, "export.yaml", *GpuCatalog::Builtin());
  ASSERT_TRUE(back.ok()) << back.error().message << "\n" << text;
  EXPECT_EQ(back->channels->at(1).json, spec->channels->at(1).json);
  EXPECT_EQ(WriteFleetSpec(back.value()), text);

  auto error = [&](const std::string& channels) {
    auto r = ParseFleetSpec(head + channels, "f.yaml", *GpuCatalog::Builtin());
    return r.ok() ? "(parsed)" : r.error().message;
  };
  EXPECT_EQ(error("channels: {name: x}\n"), "f.yaml:5: channels: must be a list");
  EXPECT_EQ(error("channels:\n  - {name: a, type: webhook, url: 'http://x', colour: red}\n"),
            "f.yaml:6: channels[0].colour: unknown field");
  EXPECT_EQ(error("channels:\n  - {name: a, url: 'http://x'}\n  - {name: a, url: 'http://y'}\n"),
            "f.yaml:7: channels[1].name: duplicate channel 'a'");
}

TEST(FleetSpec, MinimalFileParses) {
  auto spec =
      ParseFleetSpec(Read(fs::path(GPUFLEET_SOURCE_DIR) / "tests/fixtures/fleet/good-minimal.yaml"),
                     "f.yaml", *GpuCatalog::Builtin());
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_EQ(spec->clusters.at(0).type, ClusterType::kDevelopment);
  EXPECT_TRUE(spec->pools.empty());
}

// Each bad-*.yaml fixture starts with "# expect: <text>"; the error must contain that text,
// which names the file, the line and the field.
TEST(FleetSpec, BadFilesAreRefusedWithFileLineAndField) {
  int checked = 0;
  for (const auto& entry :
       fs::directory_iterator(fs::path(GPUFLEET_SOURCE_DIR) / "tests/fixtures/fleet")) {
    std::string name = entry.path().filename().string();
    if (name.rfind("bad-", 0) != 0) continue;
    std::string text = Read(entry.path());
    std::string first = text.substr(0, text.find('\n'));
    ASSERT_EQ(first.rfind("# expect: ", 0), 0u) << name;
    std::string expect = first.substr(10);
    auto spec = ParseFleetSpec(text, name, *GpuCatalog::Builtin());
    ASSERT_FALSE(spec.ok()) << name << " was accepted";
    EXPECT_EQ(spec.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(spec.error().message.find(expect), std::string::npos)
        << name << ": got '" << spec.error().message << "', want '" << expect << "'";
    ++checked;
  }
  EXPECT_GE(checked, 10);
}

}  // namespace
}  // namespace gpufleet

namespace gpufleet {
namespace {

// A profile's error names the file, the line and the field inside the profile.
TEST(FleetSpec, AProfilesErrorNamesItsField) {
  auto spec = ParseFleetSpec(R"(apiVersion: gpufleet/v1
kind: Fleet
clusters:
  - name: c1
    type: training
    site: s1
    profile:
      driver_version: "580.159.03"
      firmware:
        H100-SXM5-80GB: {vbios: 96}
)",
                             "f.yaml", *GpuCatalog::Builtin());
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.error().message.find("clusters[0].profile.firmware.H100-SXM5-80GB.vbios"),
            std::string::npos)
      << spec.error().message;
  EXPECT_NE(spec.error().message.find("must be a non-empty string"), std::string::npos);
  EXPECT_NE(spec.error().message.find(":10"), std::string::npos) << spec.error().message;
}

}  // namespace
}  // namespace gpufleet

namespace gpufleet {
namespace {

// A Slurm cluster's scheduler block and a team's Slurm accounts are written back as read; the
// defaults are left out.
TEST(FleetSpec, ASchedulerAndSlurmAccountsRoundTrip) {
  const std::string text = R"(apiVersion: gpufleet/v1
kind: Fleet
teams:
  - name: physics
    slurm_accounts: [phys, physics_hpc]
clusters:
  - name: hpc
    type: training
    site: lab
    scheduler: {type: slurm, conf: /etc/slurm/slurm.conf, partitions: [gpu, debug], poll: 30s, node_name: "gpu-{hostname}"}
  - name: plain
    type: training
    site: lab
    scheduler: {type: slurm}
)";
  auto spec = ParseFleetSpec(text, "f.yaml", *GpuCatalog::Builtin());
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  const Scheduler& s = spec->clusters.at(0).scheduler;
  EXPECT_EQ(s.type, "slurm");
  EXPECT_EQ(s.bin_dir, "/usr/bin");
  EXPECT_EQ(s.conf, "/etc/slurm/slurm.conf");
  EXPECT_EQ(s.partitions, (std::vector<std::string>{"gpu", "debug"}));
  EXPECT_EQ(s.poll_ms, 30'000);
  EXPECT_EQ(SchedulerNodeName(s.node_name, "n7.lab.example"), "gpu-n7");
  EXPECT_EQ(SchedulerNodeName("{name}", "n7.lab.example"), "n7.lab.example");
  EXPECT_EQ(spec->teams->at(0).slurm_accounts, (std::vector<std::string>{"phys", "physics_hpc"}));
  const std::string written = WriteFleetSpec(spec.value());
  EXPECT_NE(written.find("scheduler: {\"type\": \"slurm\"}"), std::string::npos) << written;
  auto back = ParseFleetSpec(written, "written.yaml", *GpuCatalog::Builtin());
  ASSERT_TRUE(back.ok()) << back.error().message << "\n" << written;
  EXPECT_EQ(back->clusters.at(0).scheduler, s);
  EXPECT_EQ(back->clusters.at(1).scheduler, spec->clusters.at(1).scheduler);
  EXPECT_EQ(back->teams->at(0).slurm_accounts, spec->teams->at(0).slurm_accounts);
  EXPECT_EQ(WriteFleetSpec(back.value()), written);
}

}  // namespace
}  // namespace gpufleet
