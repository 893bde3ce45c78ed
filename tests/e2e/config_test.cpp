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
  // examples/fleet.yaml and examples/rules.yaml (6 rules), and a signed webhook with a route.
  void ApplyExamplesAndAChannel() {
    for (const char* file : {"/examples/fleet.yaml", "/examples/rules.yaml"}) {
      auto r = Cli({"apply", "-f", std::string(GPUFLEET_SOURCE_DIR) + file});
      ASSERT_EQ(r.exit_code, 0) << r.err;
    }
    auto hook = Cli({"channels", "create", "--name", "ops-hook", "--type", "webhook", "--url",
                     "https://hooks.example.com/gpu", "--secret", "hunter2-signing-key", "--match",
                     "severity=critical", "--group-by", "alertname,cluster"});
    ASSERT_EQ(hook.exit_code, 0) << hook.err;
  }
  std::string Pools() {
    std::string names;
    const json::value pools = controller_->Call("GET", "/api/v1/pools").second;
    for (const auto& p : pools.at("items").as_array()) {
      names += std::string(p.at("name").as_string()) + " " +
               std::to_string(p.at("size").as_int64()) + "\n";
    }
    return names;
  }
  // A real agent on the fake NVML library with the L4 script, joined to `pool`; `env` adds to
  // the library's variables (FAKE_NVML_SETTERS, FAKE_NVML_RESETS).
  void NvmlAgent(const std::string& name, const std::string& pool,
                 const std::vector<std::string>& extra = {},
                 std::map<std::string, std::string> env = {}) {
    std::vector<std::string> args{
        GPUFLEET_BIN,     "agent",         "--controller", controller_->address(),
        "--join-token",   JoinToken(pool), "--backend",    "nvml",
        "--nvml-library", FAKE_NVML_PATH,  "--hostname",   name};
    args.insert(args.end(), extra.begin(), extra.end());
    env["FAKE_NVML_SCRIPT"] = kNvmlFixtures + "l4x1.json";
    agents_.push_back(
        std::make_unique<Process>(args, std::move(env), dir_ + "/agent-" + name + ".log"));
  }
  // The node's finding of `fact` (any state), or null.
  json::value Finding(const std::string& node, const std::string& fact) {
    const json::value list = controller_->Call("GET", "/api/v1/drift?node=" + node).second;
    for (const auto& f : list.at("items").as_array()) {
      if (f.at("fact") == json::value(fact)) return f;
    }
    return nullptr;
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

  // Scaling blocks are in the diff too: a new one, then a changed one; a policy whose pool the
  // file drops goes with it.
  const std::string with_scaling =
      std::string(kApplied).replace(std::string(kApplied).find("size: 1}"), 8,
                                    "size: 1,\n          scaling: {mode: reactive, enabled: false, "
                                    "min_nodes: 1, max_nodes: 4, actuator: "
                                    "{type: sim}}}");
  std::ofstream(dir_ + "/scaled.yaml") << with_scaling;
  auto scaled = Cli({"diff", "-f", dir_ + "/scaled.yaml"});
  EXPECT_EQ(scaled.exit_code, 1) << scaled.err;
  EXPECT_EQ(scaled.out, "+ scaling h100\n") << scaled.out;
  ASSERT_EQ(Cli({"apply", "-f", dir_ + "/scaled.yaml"}).exit_code, 0);
  EXPECT_EQ(Cli({"diff", "-f", dir_ + "/scaled.yaml"}).out, "no changes\n");
  std::string bigger = with_scaling;
  bigger.replace(bigger.find("max_nodes: 4"), 12, "max_nodes: 6");
  std::ofstream(dir_ + "/bigger.yaml") << bigger;
  EXPECT_EQ(Cli({"diff", "-f", dir_ + "/bigger.yaml"}).out,
            "~ scaling h100\n    max_nodes: 4 -> 6\n");
  // kNext names h100 without a block: it keeps its policy, so the diff is as before.
  EXPECT_EQ(Cli({"diff", "-f", dir_ + "/next.yaml"}).out, diff.out);
  ASSERT_EQ(controller_->Call("DELETE", "/api/v1/pools/h100/scaling").first, 200);

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

// The live configuration (clusters, pools, scaling, channels, rules) exported, applied to a
// fresh controller and exported again: the same text, and a diff of it against the first
// controller shows nothing.
TEST_F(Config, AnExportAppliedToAFreshControllerExportsTheSameText) {
  ApplyExamplesAndAChannel();
  auto first = Cli({"export"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(
      first.out.rfind("apiVersion: gpufleet/v1\nkind: Fleet\nteams:\n  - {\"name\": \"nlp\"", 0),
      0u)
      << first.out;
  EXPECT_NE(first.out.find("\nclusters:\n"), std::string::npos);
  EXPECT_NE(first.out.find("scaling: {\"mode\": \"predictive\""), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("\"timezone\": \"America/New_York\""), std::string::npos);
  // The channels (never a secret) and, as a second document, the user rules.
  EXPECT_NE(first.out.find("channels:\n  - {\"name\": \"ops-hook\", \"type\": \"webhook\", "
                           "\"url\": \"https://hooks.example.com/gpu\", \"matchers\": "),
            std::string::npos)
      << first.out;
  EXPECT_EQ(first.out.find("hunter2"), std::string::npos);  // sealed or not
  EXPECT_EQ(first.out.find("secret"), std::string::npos);
  EXPECT_NE(first.out.find("\n---\ngroups:\n  - name: \"gpu\"\n"), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("\"alert\": \"GpuHotForFiveMinutes\""), std::string::npos);
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
  EXPECT_NE(again.out.find("channels: 1 created, 0 updated, 0 unchanged\n"), std::string::npos)
      << again.out;
  EXPECT_NE(again.out.find("rules: 6 created, 0 updated, 0 unchanged, 0 deleted\n"),
            std::string::npos)
      << again.out;
  auto second = on_fresh({"export"});
  EXPECT_EQ(second.out, first.out);
  // The channel is there with its route, unsigned: its secret was never exported.
  auto [cs, channels] = fresh.Call("GET", "/api/v1/channels");
  ASSERT_EQ(channels.at("items").as_array().size(), 1u);
  EXPECT_FALSE(channels.at("items").at(0).at("signed").as_bool());
  EXPECT_EQ(channels.at("items").at(0).at("group_by"), json::parse(R"(["alertname","cluster"])"));
  fresh.Stop();
}

// Channels and rules in the file: diff shows a changed channel and rule and one the file no
// longer names; only an admin may change channels; an apply keeps a channel's secret, --prune
// deletes the channel the file does not name; a bad channel names its line.
TEST_F(Config, ChangedChannelsAndRulesAreDiffedAndOnlyAnAdminAppliesChannels) {
  ApplyExamplesAndAChannel();
  auto first = Cli({"export"});
  ASSERT_EQ(first.exit_code, 0) << first.err;

  // A changed URL and a changed rule, and a channel the file no longer names.
  std::string next = first.out;
  next.replace(next.find("https://hooks.example.com/gpu"), 29, "https://hooks.example.com/gpu2");
  next.replace(next.find("min_over_time(gpu_temp[5m]) > 83"), 32,
               "min_over_time(gpu_temp[5m]) > 85");
  ASSERT_EQ(Cli({"channels", "create", "--name", "old-hook", "--type", "webhook", "--url",
                 "http://127.0.0.1:9/x"})
                .exit_code,
            0);
  std::ofstream(dir_ + "/next.yaml") << next;
  auto diff = Cli({"diff", "-f", dir_ + "/next.yaml"});
  EXPECT_EQ(diff.exit_code, 1) << diff.err;
  EXPECT_EQ(diff.out,
            "- channel old-hook (not in the file: apply --prune deletes it)\n"
            "~ channel ops-hook\n"
            "    url: \"https://hooks.example.com/gpu\" -> \"https://hooks.example.com/gpu2\"\n"
            "~ rule GpuHotForFiveMinutes\n"
            "    expr: \"min_over_time(gpu_temp[5m]) > 83\" -> \"min_over_time(gpu_temp[5m]) > "
            "85\"\n");
  // An operator may apply clusters and rules, not channels: refused whole.
  auto op = Cli({"tokens", "create", "--role", "operator", "--name", "ops"});
  ASSERT_EQ(op.exit_code, 0) << op.err;
  const std::string op_token = op.out.substr(0, op.out.find('\n'));
  auto refused = Cli({"--token", op_token, "apply", "-f", dir_ + "/next.yaml"});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find("the file's channels need an admin token (HTTP 403)"),
            std::string::npos)
      << refused.err;
  EXPECT_EQ(controller_->Call("GET", "/api/v1/channels").second.at("items").at(1).at("url"),
            "https://hooks.example.com/gpu");
  // The admin's apply keeps the secret of the updated channel; --prune drops the other.
  auto applied = Cli({"apply", "--prune", "-f", dir_ + "/next.yaml"});
  ASSERT_EQ(applied.exit_code, 0) << applied.err;
  EXPECT_NE(applied.out.find("channels: 0 created, 1 updated, 0 unchanged\ndeleted channel "
                             "old-hook\nrules: 0 created, 1 updated, 5 unchanged, 0 deleted\n"),
            std::string::npos)
      << applied.out;
  auto after = controller_->Call("GET", "/api/v1/channels").second;
  ASSERT_EQ(after.at("items").as_array().size(), 1u);
  EXPECT_EQ(after.at("items").at(0).at("url"), "https://hooks.example.com/gpu2");
  EXPECT_TRUE(after.at("items").at(0).at("signed").as_bool());
  EXPECT_EQ(Cli({"diff", "-f", dir_ + "/next.yaml"}).out, "no changes\n");
  // A bad channel names its line; nothing of the file is applied.
  std::string bad = next;
  bad.replace(bad.find("\"type\": \"webhook\""), 17, "\"type\": \"pager\"");
  std::ofstream(dir_ + "/bad.yaml") << bad;
  auto wrong = Cli({"apply", "-f", dir_ + "/bad.yaml"});
  EXPECT_NE(wrong.exit_code, 0);
  EXPECT_NE(wrong.err.find("bad.yaml:"), std::string::npos) << wrong.err;
  EXPECT_NE(wrong.err.find(": channels[0]: 'type' must be alertmanager or webhook"),
            std::string::npos)
      << wrong.err;
}

// One cluster and one pool at a time: POST creates, PUT replaces, PATCH merges, DELETE removes,
// each checked by the fleet file's rules with its messages; a refused call changes nothing.
TEST_F(Config, ClustersAndPoolsChangeOneAtATimeThroughRest) {
  auto call = [&](const char* method, const std::string& path, const std::string& body = "") {
    return controller_->Call(method, path, body);
  };
  auto [created, cluster] =
      call("POST", "/api/v1/clusters", R"({"name": "lab", "type": "training", "site": "a"})");
  ASSERT_EQ(created, 201) << cluster;
  EXPECT_EQ(cluster.at("site"), "a");
  EXPECT_EQ(cluster.at("nodes"), 0);
  EXPECT_EQ(
      call("POST", "/api/v1/clusters", R"({"name": "lab", "type": "edge", "site": "b"})").first,
      409);
  // The fleet file's messages, the field named from the object's root.
  auto [bad, why] =
      call("POST", "/api/v1/clusters", R"({"name": "x", "type": "gpu", "site": "a"})");
  EXPECT_EQ(bad, 400);
  EXPECT_EQ(why.at("error").at("message"),
            "type: 'gpu' is not one of training, inference, development, edge");
  EXPECT_EQ(call("POST", "/api/v1/clusters", R"({"name": "x", "type": "edge"})")
                .second.at("error")
                .at("message"),
            "site: is required");
  EXPECT_EQ(call("POST", "/api/v1/clusters", R"({"name": "x", "type": "edge", "site": "a",
                                                 "sight": 1})")
                .second.at("error")
                .at("message"),
            "sight: unknown field");
  EXPECT_EQ(call("GET", "/api/v1/clusters/x").first, 404);

  // Pools: in an existing cluster, with the catalogue's models, and a scaling block.
  auto [pool_status, pool] =
      call("POST", "/api/v1/pools",
           R"({"name": "h100", "cluster": "lab", "gpu_model": "H100-SXM5-80GB", "size": 2})");
  ASSERT_EQ(pool_status, 201) << pool;
  EXPECT_EQ(pool.at("gpus_per_node"), 8);  // the fleet file's default
  EXPECT_EQ(
      call("POST", "/api/v1/pools", R"({"name": "p", "cluster": "nowhere", "gpu_model": "L4"})")
          .second.at("error")
          .at("message"),
      "cluster: no cluster 'nowhere' (create it first)");
  auto [bad_model, model_why] =
      call("POST", "/api/v1/pools", R"({"name": "p", "cluster": "lab", "gpu_model": "Z9"})");
  EXPECT_EQ(bad_model, 400);
  EXPECT_EQ(std::string(model_why.at("error").at("message").as_string())
                .rfind("gpu_model: unknown GPU model 'Z9' (known: ", 0),
            0u)
      << model_why;
  EXPECT_EQ(
      call("PATCH", "/api/v1/pools/h100", R"({"size": 100001})").second.at("error").at("message"),
      "size: 100001 is out of range 0..100000");

  // PATCH merges into what is stored; null removes a field (back to its default).
  auto [patched, after] =
      call("PATCH", "/api/v1/pools/h100", R"({"size": 4, "labels": {"team": "vision"}})");
  ASSERT_EQ(patched, 200) << after;
  EXPECT_EQ(after.at("size"), 4);
  EXPECT_EQ(after.at("gpu_model"), "H100-SXM5-80GB");
  EXPECT_EQ(after.at("labels").at("team"), "vision");
  auto cleared = call("PATCH", "/api/v1/pools/h100", R"({"labels": null})").second;
  EXPECT_TRUE(cleared.at("labels").as_object().empty()) << cleared;
  EXPECT_EQ(call("PATCH", "/api/v1/pools/h100", R"({"name": "renamed"})").first, 400);
  EXPECT_EQ(call("PATCH", "/api/v1/pools/none", R"({"size": 1})").first, 404);

  // PUT replaces: what the body leaves out goes back to its default; 201 when it creates.
  auto [put, replaced] =
      call("PUT", "/api/v1/clusters/lab", R"({"type": "inference", "site": "b"})");
  EXPECT_EQ(put, 200) << replaced;
  EXPECT_EQ(replaced.at("type"), "inference");
  EXPECT_EQ(call("PUT", "/api/v1/clusters/edge", R"({"type": "edge", "site": "shop"})").first, 201);
  EXPECT_EQ(call("PUT", "/api/v1/clusters/edge", R"({"name": "other", "type": "edge",
                                                     "site": "shop"})")
                .second.at("error")
                .at("message"),
            "name: must be 'edge', the cluster of the path (a cluster is not renamed)");

  // A scaling block sets the pool's policy, checked first; "scaling": null deletes it.
  EXPECT_EQ(call("PATCH", "/api/v1/pools/h100",
                 R"({"scaling": {"mode": "reactive", "min_nodes": 3, "max_nodes": 1}})")
                .first,
            400);
  EXPECT_EQ(call("GET", "/api/v1/pools/h100/scaling").first, 404);
  auto [scaled, with_policy] =
      call("PATCH", "/api/v1/pools/h100", R"({"scaling": {"mode": "reactive", "max_nodes": 2}})");
  EXPECT_EQ(scaled, 200) << with_policy;
  EXPECT_EQ(call("GET", "/api/v1/pools/h100/scaling").second.at("policy").at("max_nodes"), 2);
  EXPECT_EQ(call("PATCH", "/api/v1/pools/h100", R"({"scaling": null})").first, 200);
  EXPECT_EQ(call("GET", "/api/v1/pools/h100/scaling").first, 404);

  // The CLI: set (a merge patch of FIELD=VALUE) and delete.
  auto set = Cli({"pools", "set", "h100", "size=3", "labels.team=infer"});
  EXPECT_EQ(set.exit_code, 0) << set.err;
  EXPECT_EQ(call("GET", "/api/v1/pools/h100").second.at("labels").at("team"), "infer");
  auto bad_set = Cli({"pools", "set", "h100", "size"});
  EXPECT_EQ(bad_set.exit_code, 2);
  EXPECT_EQ(bad_set.err, "error: 'size' must be FIELD=VALUE (a nested field as a.b=VALUE)\n");

  // DELETE: a cluster with pools, a pool with a node are refused with why.
  EXPECT_EQ(Cli({"clusters", "delete", "lab"}).err,
            "error: cluster 'lab' has pools (h100): delete them first (HTTP 409)\n");
  Sim(JoinToken("h100"), "busy", 1, "H100-SXM5-80GB", 8);
  ASSERT_TRUE(WaitState("busy-0000", "ready"));
  auto refused = call("DELETE", "/api/v1/pools/h100");
  EXPECT_EQ(refused.first, 409);
  EXPECT_EQ(refused.second.at("error").at("message"),
            "cannot delete pool h100: it has 1 node(s) (decommission and delete them first)");
  EXPECT_EQ(call("GET", "/api/v1/pools/h100").first, 200);
  auto gone = Cli({"clusters", "delete", "edge"});
  EXPECT_EQ(gone.exit_code, 0) << gone.err;
  EXPECT_EQ(gone.out, "cluster edge deleted\n");
  EXPECT_EQ(call("GET", "/api/v1/clusters/edge").first, 404);
  EXPECT_EQ(call("DELETE", "/api/v1/clusters/edge").first, 404);

  // Every change is in the audit log, with the object before it.
  auto audit = Cli({"-o", "json", "audit", "list"});
  EXPECT_NE(audit.out.find("\"pool/h100\""), std::string::npos) << audit.out;
  EXPECT_NE(audit.out.find("\"cluster/edge\""), std::string::npos) << audit.out;
}

// The inventory is read by Ansible itself (ansible-inventory, Debian's ansible-core): groups per
// site, cluster, pool and GPU model, the pool's profile and each node's facts as variables.
TEST_F(Config, TheAnsibleInventoryIsWhatAnsibleReads) {
  auto applied = Cli({"apply", "-f", std::string(GPUFLEET_SOURCE_DIR) + "/examples/fleet.yaml"});
  ASSERT_EQ(applied.exit_code, 0) << applied.err;
  Sim(JoinToken("h100-sxm"), "gpu", 2, "H100-SXM5-80GB", 8, {"--driver", "580.95.05"});
  ASSERT_TRUE(WaitState("gpu-0001", "ready"));
  auto inventory = Cli({"export", "--format", "ansible"});
  ASSERT_EQ(inventory.exit_code, 0) << inventory.err;
  std::ofstream(dir_ + "/inventory.yaml") << inventory.out;
  const std::string listed = dir_ + "/listed.json";
  int rc = std::system(("ANSIBLE_INVENTORY_UNPARSED_FAILED=true ansible-inventory -i " + dir_ +
                        "/inventory.yaml --list > " + listed + " 2> " + dir_ + "/ansible.err")
                           .c_str());
  ASSERT_EQ(rc, 0) << ReadFile(dir_ + "/ansible.err") << inventory.out;
  const json::value v = json::parse(ReadFile(listed));
  auto members = [&](const char* group, const char* kind) {
    std::string out;
    for (const auto& m : v.at(group).at(kind).as_array()) out += std::string(m.as_string()) + " ";
    return out;
  };
  EXPECT_EQ(members("pool_h100_sxm", "hosts"), "gpu-0000 gpu-0001 ");
  EXPECT_EQ(members("cluster_train_use1", "children"), "pool_h100_sxm pool_h200_sxm ");
  EXPECT_NE(members("site_us_east_1", "children").find("cluster_train_use1"), std::string::npos);
  EXPECT_NE(members("model_h100_sxm5_80gb", "children").find("pool_h100_sxm"), std::string::npos);
  // A host's variables: its own facts, its pool's profile and its cluster's, as Ansible merges
  // them.
  const auto& host = v.at("_meta").at("hostvars").at("gpu-0000");
  EXPECT_EQ(host.at("gpufleet_driver"), "580.95.05");
  EXPECT_EQ(host.at("gpufleet_gpu_count"), 8);
  EXPECT_EQ(host.at("gpufleet_simulated"), true);
  EXPECT_EQ(host.at("gpufleet_state"), "ready");
  EXPECT_EQ(host.at("gpufleet_gpu_serials").as_array().size(), 8u);
  EXPECT_EQ(host.at("gpufleet_gpu_model"), "H100-SXM5-80GB");
  EXPECT_EQ(host.at("gpufleet_driver_branch"), "R580");  // the cluster's pin, inherited
  EXPECT_EQ(host.at("gpufleet_cluster"), "train-use1");
  EXPECT_EQ(host.at("gpufleet_site"), "us-east-1");
  auto bad = controller_->Call("GET", "/api/v1/export?format=puppet");
  EXPECT_EQ(bad.first, 400);
  EXPECT_EQ(bad.second.at("error").at("message"), "format: 'puppet' is not one of fleet, ansible");
}

// Drift from a golden profile: nodes on another driver than their cluster's profile are
// findings with the contract's fields, listed by the API and the CLI, with the rollout that
// fixes them; a profile changed through REST to what they run resolves them, and a bad profile
// is refused with the field named.
TEST_F(Config, NodesThatDifferFromTheirProfileAreFindingsUntilTheyMatch) {
  ASSERT_EQ(ApplyText("fleet.yaml", R"(apiVersion: gpufleet/v1
kind: Fleet
clusters:
  - name: lab
    type: training
    site: lab-a
    profile: {driver_version: "580.159.03"}
    pools:
      - {name: l4, gpu_model: L4, gpus_per_node: 1}
)")
                .exit_code,
            0);
  Sim(JoinToken("l4"), "old", 2, "L4", 1, {"--driver", "580.95.05"});
  auto drift = [&](const std::string& query) {
    return controller_->Call("GET", "/api/v1/drift" + query).second;
  };
  ASSERT_TRUE(WaitFor([&] { return drift("?state=open").at("total") == 2; }, 60000)) << drift("");
  const json::value list = drift("?pool=l4&severity=high");
  ASSERT_EQ(list.at("total"), 2) << list;
  EXPECT_EQ(list.at("summary").at("nodes_drifted"), 2);
  EXPECT_EQ(list.at("summary").at("by_severity").at("high"), 2);
  const json::value f = list.at("items").at(0);
  EXPECT_EQ(f.at("fact"), "driver_version");
  EXPECT_EQ(f.at("expected"), "580.159.03");
  EXPECT_EQ(f.at("actual"), "580.95.05");
  EXPECT_TRUE(f.at("gpu").is_null());
  EXPECT_EQ(f.at("severity"), "high");
  EXPECT_EQ(f.at("remediation"), "rollout");
  EXPECT_EQ(f.at("state"), "open");
  EXPECT_TRUE(f.at("first_seen").is_string());
  EXPECT_TRUE(f.at("last_seen").is_string());
  EXPECT_TRUE(f.at("resolved_at").is_null());
  const std::string id = std::to_string(f.at("id").as_int64());
  const std::string node(f.at("node").as_string());

  auto one = controller_->Call("GET", "/api/v1/drift/" + id);
  ASSERT_EQ(one.first, 200);
  EXPECT_EQ(one.second.at("profile").at("driver_version"), "580.159.03");
  auto fix = controller_->Call("GET", "/api/v1/drift/" + id + "/remediation");
  ASSERT_EQ(fix.first, 200);
  EXPECT_EQ(fix.second.at("request").at("kind"), "driver");
  EXPECT_EQ(fix.second.at("request").at("target"), "580.159.03");
  EXPECT_EQ(fix.second.at("request").at("selector").at("nodes").at(0).as_string(), node);
  EXPECT_EQ(controller_->Call("GET", "/api/v1/drift?state=gone").first, 400);
  EXPECT_EQ(controller_->Call("GET", "/api/v1/drift/x").first, 400);
  EXPECT_EQ(controller_->Call("GET", "/api/v1/drift/99999").first, 404);

  auto cli = Cli({"drift", "list", "--node", node});
  EXPECT_EQ(cli.exit_code, 0) << cli.err;
  EXPECT_NE(cli.out.find("driver_version  580.159.03  580.95.05"), std::string::npos) << cli.out;
  EXPECT_NE(cli.out.find("by cause:\n"), std::string::npos) << cli.out;
  EXPECT_NE(cli.out.find("  high      1 node with driver_version 580.95.05 (profile: 580.159.03) → "
                         "one driver rollout to 580.159.03 per pool\n"),
            std::string::npos)
      << cli.out;
  auto plan = Cli({"drift", "remediate", id});
  EXPECT_EQ(plan.exit_code, 0) << plan.err;
  EXPECT_NE(plan.out.find("a driver rollout of " + node + " to 580.159.03"), std::string::npos)
      << plan.out;
  auto missing = Cli({"drift", "show", "99999"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(missing.err, "error: no drift finding 99999 (HTTP 404)\n");

  // A bad profile changes nothing; the profile changed to what the nodes run resolves them.
  auto bad = controller_->Call("PATCH", "/api/v1/clusters/lab", R"({"profile":{"mig_mode":1}})");
  EXPECT_EQ(bad.first, 400);
  EXPECT_EQ(bad.second.at("error").at("message"), "profile.mig_mode: must be true or false")
      << bad.second;
  auto good = controller_->Call("PATCH", "/api/v1/clusters/lab",
                                R"({"profile":{"driver_version":"580.95.05"}})");
  ASSERT_EQ(good.first, 200) << good.second;
  EXPECT_EQ(good.second.at("profile").at("driver_version"), "580.95.05");
  ASSERT_TRUE(WaitFor([&] { return drift("?state=resolved").at("total") == 2; }, 30000))
      << drift("");
  EXPECT_EQ(drift("?state=open").at("total"), 0);
  EXPECT_TRUE(drift("?node=" + node).at("items").at(0).at("resolved_at").is_string());
}

// Software drift: the agent reports its packages (a simulated node's base ones and one staged
// with --package), a package the profile forbids is a high finding on that node only, and the
// node's API form says how many packages it has without listing them.
TEST_F(Config, AForbiddenPackageIsAFindingOnTheNodeThatHasIt) {
  ASSERT_EQ(ApplyText("fleet.yaml", R"(apiVersion: gpufleet/v1
kind: Fleet
clusters:
  - name: lab
    type: training
    site: lab-a
    profile: {packages: {required: [datacenter-gpu-manager], forbidden: [xmrig]}}
    pools:
      - {name: l4, gpu_model: L4, gpus_per_node: 1}
)")
                .exit_code,
            0);
  Sim(JoinToken("l4"), "pkg", 2, "L4", 1, {"--package", "-,xmrig=6.21.0"});
  auto open = [&] { return controller_->Call("GET", "/api/v1/drift?state=open").second; };
  ASSERT_TRUE(WaitFor([&] { return open().at("total") == 1; }, 60000)) << open();
  const json::value f = open().at("items").at(0);
  EXPECT_EQ(f.at("node"), "pkg-0001");
  EXPECT_EQ(f.at("fact"), "package:xmrig");
  EXPECT_EQ(f.at("expected"), "not installed");
  EXPECT_EQ(f.at("actual"), "6.21.0");
  EXPECT_EQ(f.at("severity"), "critical");  // a security finding
  EXPECT_EQ(f.at("remediation"), "manual");
  auto fix = controller_->Call(
      "GET", "/api/v1/drift/" + std::to_string(f.at("id").as_int64()) + "/remediation");
  ASSERT_EQ(fix.first, 200);
  EXPECT_TRUE(fix.second.at("request").is_null());
  EXPECT_NE(std::string(fix.second.at("why").as_string()).find("package:xmrig"), std::string::npos)
      << fix.second;
  const json::value node = controller_->Call("GET", "/api/v1/nodes/pkg-0001").second;
  EXPECT_EQ(node.at("facts").at("package_count"), 5) << node;  // 3 base, the toolkit, xmrig
  EXPECT_FALSE(node.at("facts").as_object().contains("packages"));
}

// Drift injected through the simulator's API is found within one report interval; a GPU setting
// the profile marks auto is set back by the agent and resolved, a manual fact stays open. On a
// real node (the fake NVML library) the agent calls NVML's setter, which the library records;
// a setter the driver refuses leaves the finding open with why; injection is refused (409).
TEST_F(Config, InjectedDriftIsFoundAutoSettingsAreSetBackManualOnesStayOpen) {
  ASSERT_EQ(ApplyText("fleet.yaml", R"(apiVersion: gpufleet/v1
kind: Fleet
clusters:
  - name: lab
    type: training
    site: lab-a
    remediation: {max_share: 1}
    profile:
      image_id: "gpufleet-sim-node:*"
      packages: {forbidden: [xmrig]}
    pools:
      - name: l4
        gpu_model: L4
        gpus_per_node: 1
        profile: {power_limit_w: 70}
      - name: real
        gpu_model: L4
        gpus_per_node: 1
        profile: {power_limit_w: 60, compute_mode: exclusive_process, image_id: "*"}
)")
                .exit_code,
            0);
  auto drift = [&](const std::string& query) {
    return controller_->Call("GET", "/api/v1/drift" + query).second;
  };
  // The simulated L4s start at their 72 W TDP: the agent sets 70 W, the finding resolves.
  Sim(JoinToken("l4"), "inj", 2, "L4", 1);
  ASSERT_TRUE(WaitFor([&] { return drift("?pool=l4&state=resolved").at("total") == 2; }, 60000))
      << drift("?pool=l4");
  json::value first = drift("?node=inj-0000").at("items").at(0);
  EXPECT_EQ(first.at("fact"), "power_limit_w");
  EXPECT_EQ(first.at("expected"), "70");
  EXPECT_EQ(first.at("actual"), "72");
  EXPECT_EQ(first.at("remediation"), "auto");
  EXPECT_NE(std::string(first.at("note").as_string()).find("attempt 1: done"), std::string::npos)
      << first;
  EXPECT_EQ(Node("inj-0000").at("gpus").at(0).at("settings").at("power_limit_w"), 70);

  // Someone sets 50 W by hand: found, set back, resolved.
  auto inject = [&](const std::string& node, const std::string& body) {
    return controller_->Call("POST", "/api/v1/nodes/" + node + "/inject", body);
  };
  ASSERT_EQ(inject("inj-0001", R"({"gpu": 0, "power_limit_w": 50})").first, 202);
  ASSERT_TRUE(WaitFor(
      [&] {
        const json::value list = drift("?node=inj-0001");
        for (const auto& f : list.at("items").as_array()) {
          if (f.at("actual") == "50") return true;
        }
        return false;
      },
      15000))
      << "found within one report interval: " << drift("?node=inj-0001");
  ASSERT_TRUE(
      WaitFor([&] { return drift("?node=inj-0001&state=resolved").at("total") == 2; }, 30000))
      << drift("?node=inj-0001");
  // A hand-built image and a forbidden package: manual, found and left open.
  ASSERT_EQ(inject("inj-0001", R"({"facts": {"image_id": "hand-built:1"}})").first, 202);
  ASSERT_EQ(inject("inj-0001", R"({"packages": {"add": ["xmrig=6.21.0"]}})").first, 202);
  ASSERT_TRUE(WaitFor([&] { return drift("?node=inj-0001&state=open").at("total") == 2; }, 15000))
      << drift("?node=inj-0001");
  const json::value list = drift("?node=inj-0001&state=open");
  for (const auto& f : list.at("items").as_array()) {
    EXPECT_EQ(f.at("remediation"), "manual") << f;
    EXPECT_TRUE(f.at("fact") == "image_id" || f.at("fact") == "package:xmrig") << f;
  }
  // Taken away again (through the CLI): resolved.
  auto removed = Cli({"sim", "drift", "inj-0001", "--package-remove", "xmrig"});
  ASSERT_EQ(removed.exit_code, 0) << removed.err;
  EXPECT_EQ(Cli({"sim", "drift", "inj-0001", "--fact", "kernel"}).exit_code, 2);
  ASSERT_TRUE(WaitFor([&] { return drift("?node=inj-0001&state=open").at("total") == 1; }, 15000))
      << drift("?node=inj-0001");
  // Bad input changes nothing.
  EXPECT_EQ(inject("inj-0001", R"({"power_limit_w": 50})").first, 400);  // which GPU?
  EXPECT_EQ(inject("inj-0001", R"({"facts": {"driver_version": "1"}})").first, 400);
  EXPECT_EQ(inject("inj-0001", R"({"packages": {"add": ["xmrig"]}})").first, 400);
  EXPECT_EQ(inject("inj-0001", R"({"gpu": 3, "power_limit_w": 50})").first, 404);
  EXPECT_EQ(inject("ghost", R"({"facts": {"kernel": "6.1"}})").first, 404);

  // A real node: NVML's setter, recorded by the fake library; the compute mode is refused.
  const std::string setters = dir_ + "/nvml-setters.log";
  NvmlAgent("real-l4", "real", {}, {{"FAKE_NVML_SETTERS", setters}});
  ASSERT_TRUE(WaitFor(
      [&] {
        const json::value list = drift("?node=real-l4");
        for (const auto& f : list.at("items").as_array()) {
          if (f.at("fact") == "power_limit_w" && f.at("state") == "resolved") return true;
        }
        return false;
      },
      60000))
      << drift("?node=real-l4");
  ASSERT_TRUE(WaitFor(
      [&] {
        const json::value list = drift("?node=real-l4");
        for (const auto& f : list.at("items").as_array()) {
          if (f.at("fact") == "compute_mode" &&
              std::string(f.at("note").as_string()).find("failed") != std::string::npos) {
            EXPECT_EQ(f.at("state"), "open");
            return true;
          }
        }
        return false;
      },
      30000))
      << drift("?node=real-l4");
  std::string calls = ReadFile(setters);
  EXPECT_NE(calls.find("nvmlDeviceSetPowerManagementLimit 0 60000\n"), std::string::npos) << calls;
  EXPECT_NE(calls.find("nvmlDeviceSetComputeMode 0 3\n"), std::string::npos) << calls;
  auto refused = inject("real-l4", R"({"gpu": 0, "power_limit_w": 50})");
  EXPECT_EQ(refused.first, 409);
  // Each attempt is audited, with the drift service as the actor.
  auto audit = controller_->Call("GET", "/api/v1/audit?actor=drift&limit=100").second;
  EXPECT_GE(audit.at("items").as_array().size(), 4u) << audit;
}

// A profile's overrides follow the node's labels (a simulated node's from `gpufleet sim
// --labels`, a real one's from `gpufleet agent --label`), and a MIG-enabled GPU's instances
// are compared with the profile's layout (a manual finding); a bad label is one line.
TEST_F(Config, OverridesFollowNodeLabelsAndAMigLayoutIsCompared) {
  auto applied = ApplyText("fleet.yaml", R"(apiVersion: gpufleet/v1
kind: Fleet
clusters:
  - name: lab
    type: training
    site: lab-a
    remediation: {max_share: 1}
    pools:
      - name: l4
        gpu_model: L4
        gpus_per_node: 1
        profile:
          power_limit_w: 70
          overrides:
            - {labels: {rack: "r2*"}, power_limit_w: 60}
      - name: h100
        gpu_model: H100-SXM5-80GB
        gpus_per_node: 1
        profile: {mig_layout: {"3g.40gb": 2}}
)");
  ASSERT_EQ(applied.exit_code, 0) << applied.err;
  auto drift = [&](const std::string& query) {
    return controller_->Call("GET", "/api/v1/drift" + query).second;
  };
  // The labelled node is set to the override's 60 W, the other to the pool's 70 W.
  Sim(JoinToken("l4"), "lbl", 2, "L4", 1, {"--labels", "-,rack=r21;zone=b"});
  ASSERT_TRUE(WaitFor([&] { return drift("?pool=l4&state=resolved").at("total") == 2; }, 60000))
      << drift("?pool=l4");
  EXPECT_EQ(Finding("lbl-0000", "power_limit_w").at("expected"), "70");
  EXPECT_EQ(Finding("lbl-0001", "power_limit_w").at("expected"), "60");
  const json::value labelled = Node("lbl-0001");
  EXPECT_EQ(labelled.at("facts").at("labels"), (json::object{{"rack", "r21"}, {"zone", "b"}}));
  EXPECT_EQ(labelled.at("gpus").at(0).at("settings").at("power_limit_w"), 60);
  EXPECT_EQ(Node("lbl-0000").at("facts").at("labels"), json::object());
  // A finding's detail shows the profile of its node, the override merged in.
  const auto id = Finding("lbl-0001", "power_limit_w").at("id").as_int64();
  EXPECT_EQ(controller_->Call("GET", "/api/v1/drift/" + std::to_string(id))
                .second.at("profile")
                .at("power_limit_w"),
            60);

  // MIG: off is a finding of the layout; turned on (by hand), a simulated H100 is split into
  // seven 1g.10gb instances, another layout than the profile's.
  Sim(JoinToken("h100"), "mig", 1, "H100-SXM5-80GB", 1);
  ASSERT_TRUE(WaitFor([&] { return Finding("mig-0000", "mig_layout").is_object(); }, 30000))
      << drift("?node=mig-0000");
  EXPECT_EQ(Finding("mig-0000", "mig_layout").at("actual"), "MIG disabled");
  ASSERT_EQ(
      controller_
          ->Call("POST", "/api/v1/nodes/mig-0000/inject", R"({"gpu": 0, "mig_mode": "enabled"})")
          .first,
      202);
  ASSERT_TRUE(WaitFor(
      [&] {
        const json::value f = Finding("mig-0000", "mig_layout");
        return f.is_object() && f.at("actual") == "1g.10gb x7";
      },
      15000))
      << drift("?node=mig-0000");
  const json::value mig = Finding("mig-0000", "mig_layout");
  EXPECT_EQ(mig.at("expected"), "3g.40gb x2");
  EXPECT_EQ(mig.at("remediation"), "manual");
  EXPECT_EQ(mig.at("state"), "open");
  EXPECT_EQ(Node("mig-0000").at("gpus").at(0).at("mig_layout"), (json::object{{"1g.10gb", 7}}));
  auto shown = Cli({"nodes", "show", "mig-0000"});
  EXPECT_NE(shown.out.find("enabled: 1g.10gb x7"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("Labels:    none"), std::string::npos) << shown.out;

  // A real agent's --label; a bad one is refused before anything starts.
  NvmlAgent("real-r2", "l4", {"--label", "rack=r22"});
  ASSERT_TRUE(WaitFor([&] { return Finding("real-r2", "power_limit_w").is_object(); }, 30000))
      << drift("?node=real-r2");
  EXPECT_EQ(Finding("real-r2", "power_limit_w").at("expected"), "60");
  EXPECT_EQ(Node("real-r2").at("facts").at("labels"), (json::object{{"rack", "r22"}}));
  auto bad = Cli(
      {"agent", "--controller", controller_->address(), "--join-token", "x", "--label", "rack r2"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("label 'rack r2' must be KEY=VALUE"), std::string::npos) << bad.err;
  // An override without labels is refused with its line.
  auto refused = ApplyText("bad.yaml", R"(apiVersion: gpufleet/v1
kind: Fleet
clusters:
  - name: lab
    type: training
    site: lab-a
    profile:
      overrides:
        - {power_limit_w: 60}
)");
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find("clusters[0].profile.overrides[0].labels"), std::string::npos)
      << refused.err;
}

// An ECC mode set through NVML is pending until the GPU is reset: an agent with a
// --reset-gpu-command runs it (the fake library takes the reset from the file it writes, as a
// real GPU would after `nvidia-smi --gpu-reset`) and the finding resolves; an agent without one
// says the change is pending, and the finding stays open.
TEST_F(Config, AnAutoEccChangeIsCompletedByAGpuResetWhereTheAgentMayResetOne) {
  auto applied = ApplyText("fleet.yaml", R"(apiVersion: gpufleet/v1
kind: Fleet
clusters:
  - name: lab
    type: training
    site: lab-a
    remediation: {max_share: 1}
    pools:
      - name: real
        gpu_model: L4
        gpus_per_node: 1
        profile: {ecc_mode: false, remediation: {ecc_mode: auto}}
)");
  ASSERT_EQ(applied.exit_code, 0) << applied.err;
  const std::string resets = dir_ + "/resets", setters = dir_ + "/setters.log";
  NvmlAgent("resets", "real", {"--reset-gpu-command", "echo {index} >> " + resets},
            {{"FAKE_NVML_SETTERS", setters}, {"FAKE_NVML_RESETS", resets}});
  NvmlAgent("cannot", "real", {}, {{"FAKE_NVML_SETTERS", setters}});
  auto ecc = [&](const std::string& node) { return Finding(node, "ecc_mode"); };
  ASSERT_TRUE(WaitFor(
      [&] {
        const json::value f = ecc("resets");
        return f.is_object() && f.at("state") == "resolved";
      },
      60000))
      << ecc("resets");
  EXPECT_NE(std::string(ecc("resets").at("note").as_string()).find("exit 0"), std::string::npos)
      << ecc("resets");
  EXPECT_EQ(Node("resets").at("gpus").at(0).at("settings").at("ecc_mode"), "disabled");
  ASSERT_TRUE(WaitFor(
      [&] {
        const json::value f = ecc("cannot");
        return f.is_object() &&
               std::string(f.at("note").as_string()).find("pending until the GPU is reset") !=
                   std::string::npos;
      },
      60000))
      << ecc("cannot");
  EXPECT_NE(ecc("cannot").at("state"), "resolved");
  EXPECT_EQ(Node("cannot").at("gpus").at(0).at("settings").at("ecc_mode"), "enabled");
  const std::string calls = ReadFile(setters);
  EXPECT_NE(calls.find("nvmlDeviceSetEccMode 0 0\n"), std::string::npos) << calls;
}

}  // namespace
}  // namespace gpufleet::e2e
