// Configuration as code end to end: `gpufleet diff -f` shows what an apply would create, change
// and delete and changes nothing; `apply --prune` deletes what the file no longer names, and
// refuses (changing nothing at all) while a pool it would delete still has a node.

#include "fixture.h"

namespace gpufleet::e2e {
namespace {

constexpr char kApplied[] = R"(apiVersion: gpufleet/v1
kind: Fleet
clusters:
  - name: train
    type: training
    site: lab-a
    pools:
      - {name: h100, gpu_model: H100-SXM5-80GB, gpus_per_node: 8, size: 1}
      - {name: spare, gpu_model: L4, gpus_per_node: 1}
  - name: edge
    type: edge
    site: shop-1
    pools:
      - {name: l4, gpu_model: L4, gpus_per_node: 1}
)";

// h100 grows, spare and the edge cluster are gone, a100 is new.
constexpr char kNext[] = R"(apiVersion: gpufleet/v1
kind: Fleet
clusters:
  - name: train
    type: training
    site: lab-a
    pools:
      - {name: h100, gpu_model: H100-SXM5-80GB, gpus_per_node: 8, size: 2}
      - {name: a100, gpu_model: A100-SXM4-80GB, gpus_per_node: 8}
)";

// The same, without h100, which has a node.
constexpr char kWithoutBusy[] = R"(apiVersion: gpufleet/v1
kind: Fleet
clusters:
  - name: train
    type: training
    site: lab-b
    pools:
      - {name: a100, gpu_model: A100-SXM4-80GB, gpus_per_node: 8}
)";

class Config : public E2E {
 protected:
  std::string Pools() {
    std::string names;
    const json::value pools = controller_->Call("GET", "/api/v1/pools").second;
    for (const auto& p : pools.at("items").as_array()) {
      names += std::string(p.at("name").as_string()) + " " +
               std::to_string(p.at("size").as_int64()) + "\n";
    }
    return names;
  }
};

TEST_F(Config, DiffShowsTheChangesAndPruneDeletesWhatTheFileNoLongerNames) {
  ASSERT_EQ(ApplyText("fleet.yaml", kApplied).exit_code, 0);
  Sim(JoinToken("h100"), "busy", 1, "H100-SXM5-80GB", 8);
  ASSERT_TRUE(WaitState("busy-0000", "ready"));
  const std::string before = Pools();

  // The same file: nothing to do, exit 0.
  std::ofstream(dir_ + "/same.yaml") << kApplied;
  auto same = Cli({"diff", "-f", dir_ + "/same.yaml"});
  EXPECT_EQ(same.exit_code, 0) << same.err;
  EXPECT_EQ(same.out, "no changes\n");

  std::ofstream(dir_ + "/next.yaml") << kNext;
  auto diff = Cli({"diff", "-f", dir_ + "/next.yaml"});
  EXPECT_EQ(diff.exit_code, 1) << diff.err;  // as kubectl diff: there are differences
  EXPECT_EQ(diff.out,
            "- cluster edge (not in the file: apply --prune deletes it)\n"
            "+ pool a100\n"
            "~ pool h100\n"
            "    size: 1 -> 2\n"
            "- pool l4 (not in the file: apply --prune deletes it)\n"
            "- pool spare (not in the file: apply --prune deletes it)\n");
  EXPECT_EQ(Pools(), before);  // a diff changes nothing

  // A pool with a node is not pruned, and nothing else of the file is applied either.
  std::ofstream(dir_ + "/busy.yaml") << kWithoutBusy;
  auto refused = Cli({"apply", "--prune", "-f", dir_ + "/busy.yaml"});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_EQ(refused.err,
            "error: cannot prune: pool h100 has 1 node(s) (decommission and delete them first, or "
            "keep the pool in the file) (HTTP 409)\n");
  EXPECT_EQ(Pools(), before);
  EXPECT_EQ(controller_->Call("GET", "/api/v1/clusters/train").second.at("site"), "lab-a");
  auto [status, body] = controller_->Call("POST", "/api/v1/apply?prune=true", kWithoutBusy);
  EXPECT_EQ(status, 409) << body;

  // Without --prune, an apply keeps what the file does not name.
  auto kept = Cli({"apply", "-f", dir_ + "/next.yaml"});
  EXPECT_EQ(kept.exit_code, 0) << kept.err;
  EXPECT_EQ(Pools(), "l4 0\na100 0\nh100 2\nspare 0\n");  // by cluster, then name
  auto pruned = Cli({"apply", "--prune", "-f", dir_ + "/next.yaml"});
  EXPECT_EQ(pruned.exit_code, 0) << pruned.err;
  EXPECT_NE(pruned.out.find("deleted cluster edge\ndeleted pool l4\ndeleted pool spare\n"),
            std::string::npos)
      << pruned.out;
  EXPECT_EQ(Pools(), "a100 0\nh100 2\n");
  EXPECT_EQ(controller_->Call("GET", "/api/v1/clusters/edge").first, 404);
  EXPECT_EQ(Cli({"diff", "-f", dir_ + "/next.yaml"}).out, "no changes\n");
  // The node stayed where it was, and the apply is in the audit log with what it deleted.
  EXPECT_EQ(State("busy-0000"), "ready");
  auto audit = Cli({"-o", "json", "audit", "list"});
  EXPECT_NE(audit.out.find("\"spare\""), std::string::npos) << audit.out;
}

// The live configuration exported, applied to a fresh controller and exported again: the same
// text, and a diff of it against the first controller shows nothing.
TEST_F(Config, AnExportAppliedToAFreshControllerExportsTheSameText) {
  auto applied = Cli({"apply", "-f", std::string(GPUFLEET_SOURCE_DIR) + "/examples/fleet.yaml"});
  ASSERT_EQ(applied.exit_code, 0) << applied.err;
  auto first = Cli({"export"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(first.out.rfind("apiVersion: gpufleet/v1\nkind: Fleet\nclusters:\n", 0), 0u);
  EXPECT_NE(first.out.find("scaling: {\"mode\": \"predictive\""), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("\"timezone\": \"America/New_York\""), std::string::npos);
  auto [status, body] = controller_->Call("GET", "/api/v1/export");
  EXPECT_EQ(status, 200);
  std::ofstream(dir_ + "/export.yaml") << first.out;
  EXPECT_EQ(Cli({"diff", "-f", dir_ + "/export.yaml"}).out, "no changes\n");

  std::filesystem::create_directories(dir_ + "/fresh");
  ControllerProcess fresh(dir_ + "/fresh", {});
  fresh.Start();
  auto on_fresh = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"--data-dir", fresh.data_dir()});
    return RunGpufleet(args);
  };
  auto again = on_fresh({"apply", "-f", dir_ + "/export.yaml"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("clusters: 5 created"), std::string::npos) << again.out;
  auto second = on_fresh({"export"});
  EXPECT_EQ(second.out, first.out);
  fresh.Stop();
}

}  // namespace
}  // namespace gpufleet::e2e
