// Live autoscaling on a real controller (`gpufleet serve`, whose `sim` actuator starts simulated
// agents that connect like any other): jobs beyond the pool's capacity make it grow, idle nodes
// are removed again, a busy node never is; manual scaling and the policy API from the CLI.

#include <set>

#include "fixture.h"
#include "tests/support/fixtures.h"

namespace gpufleet::e2e {
namespace {

const std::string kScaledFleet =
    ::gpufleet::testing::FleetFixture("e2e-scaling");  // tests/fixtures/fleets/

class Scaling : public E2E {
 protected:
  std::map<std::string, int> States() {
    std::map<std::string, int> out;
    auto v = controller_->Call("GET", "/api/v1/nodes?pool=b200").second;
    for (const auto& n : v.at("items").as_array()) ++out[std::string(n.at("state").as_string())];
    return out;
  }
  json::array Events() {
    return controller_->Call("GET", "/api/v1/pools/b200/scaling/events?limit=100")
        .second.at("items")
        .as_array();
  }
  int Count(const std::string& kind, const std::string& reason) {
    int n = 0;
    for (const auto& e : Events()) {
      n += e.at("kind") == kind.c_str() && e.at("reason") == reason.c_str();
    }
    return n;
  }
};

TEST_F(Scaling, JobsBeyondCapacityGrowASimPoolAndIdleNodesShrinkItBack) {
  auto applied = ApplyText("scaled.yaml", kScaledFleet);
  ASSERT_EQ(applied.exit_code, 0) << applied.err;
  EXPECT_NE(applied.out.find("scaling: 1 set, 0 unchanged"), std::string::npos) << applied.out;

  // An empty pool is brought to min_nodes by the autoscaler itself.
  ASSERT_TRUE(WaitFor([&] { return States()["ready"] == 1; }, 20000)) << States().size();
  auto first = Node("b200-0000");
  EXPECT_EQ(first.at("simulated"), true);
  EXPECT_EQ(Count("scale_up", "bound"), 1);

  // 4 whole-node jobs: one runs, three wait; the pool grows to 4 nodes ("queue") and they run.
  for (int i = 0; i < 4; ++i) {
    auto r = Cli({"jobs", "submit", "--team", "t" + std::to_string(i), "--project", "main",
                  "--pool", "b200", "--gpus", "8"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  ASSERT_TRUE(WaitFor([&] { return States()["ready"] == 4; }, 30000)) << States()["ready"];
  EXPECT_GE(Count("scale_up", "queue"), 1);
  ASSERT_TRUE(WaitFor(
      [&] {
        auto v = controller_->Call("GET", "/api/v1/jobs?state=running").second;
        return v.at("total").as_int64() == 4;
      },
      15000));
  auto status = controller_->Call("GET", "/api/v1/pools/b200/scaling").second;
  EXPECT_EQ(status.at("nodes").at("ready"), 4) << status;
  EXPECT_EQ(status.at("demand").at("running"), 32) << status;
  // Seconds in, no forecast has been scored (a step is 5 minutes): no shortfall to plan with.
  EXPECT_EQ(status.at("forecast").at("scored"), 0) << status;
  EXPECT_TRUE(status.at("forecast").at("shortfall_gpus").is_null()) << status;
  auto list = Cli({"scaling", "list"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_NE(list.out.find("b200"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("predictive, sim"), std::string::npos) << list.out;

  // Three jobs end; their nodes go once idle for 4 s, the busy one stays.
  std::string busy;
  auto job1 = controller_->Call("GET", "/api/v1/jobs/1").second;
  busy = std::string(job1.at("placement").at(0).at("node").as_string());
  for (const char* id : {"2", "3", "4"}) ASSERT_EQ(Cli({"jobs", "cancel", id}).exit_code, 0);
  ASSERT_TRUE(WaitFor([&] { return States()["retired"] == 3; }, 30000)) << States()["ready"];
  EXPECT_EQ(States()["ready"], 1);
  EXPECT_EQ(State(busy), "ready") << "the node with a running job is never removed";
  int idle_removed = 0;
  for (const auto& e : Events()) {
    if (e.at("kind") != "scale_down") continue;
    EXPECT_EQ(e.at("reason"), "idle") << e;
    for (const auto& n : e.at("nodes").as_array()) {
      EXPECT_NE(n.as_string(), busy);
      ++idle_removed;
    }
  }
  EXPECT_EQ(idle_removed, 3);
  // The retired nodes' agents were stopped: they stay retired, disconnected.
  auto retired = controller_->Call("GET", "/api/v1/nodes?pool=b200&state=retired").second;
  for (const auto& n : retired.at("items").as_array()) {
    EXPECT_EQ(n.at("connected"), false) << n;
  }

  // Manual scaling: within bounds, from the CLI; bad input changes nothing.
  auto up = Cli({"pools", "scale", "b200", "--by", "+1", "--keep", "1h"});
  ASSERT_EQ(up.exit_code, 0) << up.err;
  EXPECT_NE(up.out.find("scale_up 1 -> 2 nodes"), std::string::npos) << up.out;
  EXPECT_NE(up.out.find("kept for 1h"), std::string::npos) << up.out;
  auto kept = controller_->Call("GET", "/api/v1/pools/b200/scaling").second;
  EXPECT_EQ(kept.at("keep").at("min_nodes"), 2) << kept;
  EXPECT_TRUE(kept.at("keep").at("max_nodes").is_null()) << kept;
  EXPECT_EQ(kept.at("keep").at("by"), "bootstrap-admin") << kept;
  auto show = Cli({"scaling", "show", "b200"});
  EXPECT_NE(show.out.find("Kept:     at least 2 nodes until "), std::string::npos) << show.out;
  EXPECT_NE(show.out.find(", shortfall - GPUs, 0 forecasts scored"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("\nPolicy:\n  mode: "), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("\n  max_nodes: 5\n"), std::string::npos) << show.out;
  auto bad_keep =
      controller_->Call("POST", "/api/v1/pools/b200/scale", R"({"target": 2, "keep": "soon"})");
  EXPECT_EQ(bad_keep.first, 400);
  EXPECT_EQ(bad_keep.second.at("error").at("message"),
            "'keep' must be a duration such as 30m or 2h");
  auto bad = Cli({"pools", "scale", "b200", "--to", "9"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("target 9 is outside the policy's bounds 1..5"), std::string::npos)
      << bad.err;
  auto negative = Cli({"pools", "scale", "b200", "--to", "-1"});
  EXPECT_EQ(negative.exit_code, 2);
  EXPECT_EQ(negative.err, "error: --to takes a node count of 0 or more, not -1\n");
  auto nothing = Cli({"pools", "scale", "b200"});
  EXPECT_EQ(nothing.exit_code, 2);
  EXPECT_EQ(nothing.err, "error: give --to N or --by +/-N\n");
  auto neither = controller_->Call("POST", "/api/v1/pools/b200/scale", R"({"size": 3})");
  EXPECT_EQ(neither.first, 400);
  auto policy = controller_->Call("PUT", "/api/v1/pools/b200/scaling",
                                  R"({"mode": "reactive", "max_nodes": 0, "min_nodes": 1})");
  EXPECT_EQ(policy.first, 400);
  EXPECT_EQ(policy.second.at("error").at("message"), "max_nodes must be at least min_nodes");
  ASSERT_TRUE(WaitFor([&] { return States()["ready"] == 2; }, 20000));

  // The audit log has the autoscaler's actions and the manual one.
  auto audit = controller_->Call("GET", "/api/v1/audit?limit=200").second;
  std::set<std::string> actors;
  for (const auto& r : audit.at("items").as_array()) {
    if (std::string(r.at("target").as_string()) == "pool/b200") {
      actors.insert(std::string(r.at("actor").as_string()));
    }
  }
  EXPECT_TRUE(actors.count("autoscaler")) << audit;
  EXPECT_TRUE(actors.count("bootstrap-admin")) << audit;

  // History for the dashboard: one sample per decision.
  auto history = controller_->Call("GET", "/api/v1/pools/b200/scaling/history?window=1h").second;
  EXPECT_GE(history.at("time_ms").as_array().size(), 5u) << history;
  EXPECT_EQ(history.at("time_ms").as_array().size(), history.at("ready").as_array().size());
  EXPECT_EQ(controller_->Call("GET", "/api/v1/pools/b200/scaling/history?window=9d").first, 400);
}

// Consolidation on a real controller: a node that runs only a small movable job, which fits on
// the other busy node, is emptied (the job moves, from the CLI's point of view too) and removed.
TEST_F(Scaling, ALightlyUsedNodesMovableJobMovesAndTheNodeIsRemoved) {
  auto applied = ApplyText("scaled.yaml", kScaledFleet);
  ASSERT_EQ(applied.exit_code, 0) << applied.err;
  ASSERT_TRUE(WaitFor([&] { return States()["ready"] == 1; }, 20000)) << States().size();
  auto submit = [&](const char* gpus, bool movable) {
    std::vector<std::string> args{"jobs", "submit", "--team", "t",      "--project",
                                  "main", "--pool", "b200",   "--gpus", gpus};
    if (movable) args.push_back("--movable");
    auto r = Cli(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
  };
  submit("6", false);  // 1: stays on b200-0000
  submit("2", false);  // 2: fills it
  submit("2", true);   // 3: waits for a second node
  ASSERT_TRUE(WaitFor([&] { return States()["ready"] == 2; }, 30000)) << States()["ready"];
  ASSERT_TRUE(WaitFor(
      [&] { return controller_->Call("GET", "/api/v1/jobs/3").second.at("state") == "running"; },
      15000));
  auto job = controller_->Call("GET", "/api/v1/jobs/3").second;
  EXPECT_EQ(job.at("placement").at(0).at("node"), "b200-0001") << job;
  ASSERT_EQ(Cli({"jobs", "cancel", "2"}).exit_code, 0);
  // Light for idle_before_remove (4 s): job 3 moves to b200-0000 and b200-0001 goes.
  ASSERT_TRUE(WaitFor([&] { return States()["retired"] == 1; }, 30000)) << States()["ready"];
  EXPECT_EQ(Count("consolidate", "consolidate"), 1);
  job = controller_->Call("GET", "/api/v1/jobs/3").second;
  EXPECT_EQ(job.at("state"), "running") << job;
  EXPECT_EQ(job.at("moves"), 1) << job;
  EXPECT_EQ(job.at("placement").at(0).at("node"), "b200-0000") << job;
  EXPECT_EQ(job.at("reason"), "moved from b200-0001 to b200-0000 (consolidation)");
  EXPECT_EQ(State("b200-0001"), "retired");
  auto events = Cli({"scaling", "events", "b200"});
  EXPECT_NE(events.out.find("consolidate"), std::string::npos) << events.out;
  EXPECT_NE(events.out.find("job 3 b200-0001 -> b200-0000"), std::string::npos) << events.out;
}

// `scaling tune` on a live pool: its own finished jobs replayed under the grid; the cheapest
// setting within the objective is shown, then applied (with an audit record); bad input is
// refused and changes nothing.
TEST_F(Scaling, TuneReplaysThePoolsOwnJobsAndAppliesTheCheapestSetting) {
  auto applied = ApplyText("scaled.yaml", kScaledFleet);
  ASSERT_EQ(applied.exit_code, 0) << applied.err;
  ASSERT_TRUE(WaitFor([&] { return States()["ready"] == 1; }, 20000)) << States().size();
  auto few = Cli({"scaling", "tune", "b200"});
  EXPECT_EQ(few.exit_code, 1);
  EXPECT_EQ(few.err,
            "error: pool 'b200' has 0 jobs to replay in its history; tuning needs at least 20 "
            "(HTTP 409)\n");
  // A roomy share: 24 one-GPU jobs at once get 5 nodes where 3 would do.
  auto policy = controller_->Call("GET", "/api/v1/pools/b200/scaling").second.at("policy");
  policy.as_object()["target_share"] = 0.6;
  ASSERT_EQ(controller_->Call("PUT", "/api/v1/pools/b200/scaling", json::serialize(policy)).first,
            200);
  for (int i = 0; i < 24; ++i) {
    auto r = controller_->Call(
        "POST", "/api/v1/jobs",
        R"({"team": "t", "project": "main", "pool": "b200", "gpus": 1, "duration": "3s"})");
    ASSERT_EQ(r.first, 201) << r.second;
  }
  ASSERT_TRUE(WaitFor(
      [&] {
        return controller_->Call("GET", "/api/v1/jobs?state=completed").second.at("total") == 24;
      },
      30000));
  auto dry = Cli({"scaling", "tune", "b200", "--wait-p95", "30s"});
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_NE(dry.out.find("pool b200, predictive: 24 jobs over "), std::string::npos) << dry.out;
  EXPECT_NE(dry.out.find("replayed under 199 settings"), std::string::npos) << dry.out;
  EXPECT_NE(dry.out.find("cheapest within objective"), std::string::npos) << dry.out;
  EXPECT_NE(dry.out.find("not applied: gpufleet scaling tune b200 --apply"), std::string::npos)
      << dry.out;
  auto json_dry =
      controller_->Call("POST", "/api/v1/pools/b200/scaling/tune", R"({"wait_p95": 30})").second;
  EXPECT_EQ(json_dry.at("jobs"), 24) << json_dry;
  EXPECT_EQ(json_dry.at("applied"), false);
  EXPECT_EQ(json_dry.at("grid").as_array().size(), 198u);
  ASSERT_TRUE(json_dry.at("chosen").is_object()) << json_dry;
  const auto& c = json_dry.at("chosen");

  // Bad input: a clear error, the policy unchanged.
  auto before = controller_->Call("GET", "/api/v1/pools/b200/scaling").second.at("policy");
  auto bad = Cli({"scaling", "tune", "b200", "--wait-p95", "soon", "--apply"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_EQ(bad.err, "error: 'wait_p95' must be a duration such as 60s or 7d (HTTP 400)\n");
  auto unknown = controller_->Call("POST", "/api/v1/pools/b200/scaling/tune", R"({"goal": 1})");
  EXPECT_EQ(unknown.first, 400);
  EXPECT_EQ(controller_->Call("POST", "/api/v1/pools/nowhere/scaling/tune", "{}").first, 404);
  EXPECT_EQ(controller_->Call("GET", "/api/v1/pools/b200/scaling").second.at("policy"), before);

  auto apply = Cli({"scaling", "tune", "b200", "--wait-p95", "30s", "--apply"});
  ASSERT_EQ(apply.exit_code, 0) << apply.err;
  EXPECT_NE(apply.out.find("applied: the policy of pool b200 now has it"), std::string::npos)
      << apply.out;
  auto after = controller_->Call("GET", "/api/v1/pools/b200/scaling").second.at("policy");
  EXPECT_GT(c.at("target_share").to_number<double>(), 0.6) << json_dry;
  EXPECT_EQ(after.at("target_share"), c.at("target_share")) << after;
  EXPECT_EQ(after.at("forecast_margin"), c.at("forecast_margin")) << after;
  auto audit = controller_->Call("GET", "/api/v1/audit?limit=50").second;
  bool found = false;
  for (const auto& r : audit.at("items").as_array()) {
    found |= r.at("action") == "POST /api/v1/pools/b200/scaling/tune" &&
             r.at("target") == "pool/b200/scaling" && r.as_object().contains("after");
  }
  EXPECT_TRUE(found) << audit;
}

// `gpufleet sim` drives the demo workload by default, through the API with the token it finds
// like the CLI does; without one it says so and runs no workload.
using SimWorkload = E2E;

TEST_F(SimWorkload, SimSubmitsTheDemoWorkloadThroughTheApi) {
  Apply();
  std::string token = JoinToken("h100");
  Process with({GPUFLEET_BIN, "--data-dir", controller_->data_dir(), "sim", "--controller",
                controller_->address(), "--join-token", token, "--prefix", "h100", "--nodes", "2",
                "--gpus-per-node", "8"},
               {}, dir_ + "/sim-workload.log");
  ASSERT_TRUE(WaitFor(
      [&] {
        auto v = controller_->Call("GET", "/api/v1/jobs?pool=h100&limit=1").second;
        return v.at("total").as_int64() > 0;
      },
      30000))
      << ReadFile(dir_ + "/sim-workload.log");
  auto jobs = controller_->Call("GET", "/api/v1/jobs?pool=h100").second;
  std::set<std::string> teams;
  for (const auto& j : jobs.at("items").as_array()) {
    teams.insert(std::string(j.at("team").as_string()));
    EXPECT_GT(j.at("duration_s").as_int64(), 0) << j;
  }
  EXPECT_FALSE(teams.empty());
  EXPECT_NE(ReadFile(dir_ + "/sim-workload.log").find("sim: demo workload on pool h100"),
            std::string::npos);

  Process without(
      {GPUFLEET_BIN, "--data-dir", dir_ + "/nowhere", "sim", "--controller", controller_->address(),
       "--join-token", token, "--prefix", "other", "--nodes", "1", "--gpus-per-node", "8"},
      {{"GPUFLEET_TOKEN", ""}}, dir_ + "/sim-none.log");
  ASSERT_TRUE(WaitFor(
      [&] { return ReadFile(dir_ + "/sim-none.log").find("no workload") != std::string::npos; },
      20000))
      << ReadFile(dir_ + "/sim-none.log");
}

}  // namespace
}  // namespace gpufleet::e2e
