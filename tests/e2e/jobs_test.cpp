// Jobs on a live (simulated) fleet: placement on ready nodes' GPUs, the queue, completion,
// cancel, requeue when a node fails, and the heatmap's allocation field.

#include <chrono>
#include <regex>
#include <set>
#include <thread>

#include "common/json_text.h"
#include "fixture.h"

namespace gpufleet::e2e {
namespace {

class Jobs : public E2E {
 protected:
  json::value Submit(const std::string& body, int want_status = 201) {
    auto [status, v] = controller_->Call("POST", "/api/v1/jobs", body);
    EXPECT_EQ(status, want_status) << body << " -> " << v;
    return v;
  }
  json::value Job(int64_t id) {
    return controller_->Call("GET", "/api/v1/jobs/" + std::to_string(id)).second;
  }
  std::string JobState(int64_t id) { return std::string(Job(id).at("state").as_string()); }
};

// Each allocation is in the audit log, the scheduler its actor: started on its node's GPUs,
// and ended (here cancelled), with the job's document after each change.
TEST_F(Jobs, EveryAllocationIsAuditedWithItsNodesAndGpus) {
  Apply();
  Sim(JoinToken("h100"), "aud", 1, "H100-SXM5-80GB", 8);
  ASSERT_TRUE(WaitState("aud-0000", "ready"));
  auto job = Submit(R"({"team": "nlp", "project": "main", "pool": "h100", "gpus": 4})");
  std::string id = std::to_string(job.at("id").as_int64());
  ASSERT_TRUE(WaitFor([&] { return JobState(job.at("id").as_int64()) == "running"; }, 10000));
  EXPECT_EQ(controller_->Call("DELETE", "/api/v1/jobs/" + id).first, 200);
  json::array items;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto r =
            Cli({"-o", "json", "audit", "list", "--actor", "scheduler", "--target", "job/" + id});
        items = json::parse(r.out).at("items").as_array();
        return items.size() >= 2;
      },
      10000));
  ASSERT_EQ(items.size(), 2u) << json::serialize(items);
  EXPECT_EQ(items[1].at("action"), "job started");  // newest first
  const auto& placement = items[1].at("after").at("placement").as_array();
  ASSERT_EQ(placement.size(), 1u);
  EXPECT_EQ(placement[0].at("node"), "aud-0000");
  EXPECT_EQ(placement[0].at("gpus").as_array().size(), 4u);
  EXPECT_EQ(items[0].at("action"), "job ended");
  EXPECT_EQ(items[0].at("after").at("state"), "cancelled");
}

TEST_F(Jobs, PlacedOnReadyGpusQueuedReleasedCancelledAndRequeuedWhenTheNodeFails) {
  Apply();
  Sim(JoinToken("h100"), "h100", 2, "H100-SXM5-80GB", 8);
  ASSERT_TRUE(WaitState("h100-0000", "ready"));
  ASSERT_TRUE(WaitState("h100-0001", "ready"));

  // 4 GPUs on one node; 8 take the other, whole node (best fit keeps it free for them); 4 more
  // fill the first node.
  auto r = Cli({"jobs", "submit", "--team", "vision", "--project", "main", "--pool", "h100",
                "--gpus", "4", "--movable"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("running"), std::string::npos) << r.out;
  auto a = Job(1);
  EXPECT_EQ(a.at("movable"), true) << a;
  EXPECT_EQ(a.at("moves"), 0) << a;
  ASSERT_EQ(a.at("placement").as_array().size(), 1u) << a;
  std::string first = std::string(a.at("placement").at(0).at("node").as_string());
  EXPECT_EQ(a.at("placement").at(0).at("gpus"), json::parse("[0,1,2,3]"));
  auto b = Submit(
      R"({"team": "nlp", "project": "main", "cluster": "train", "gpu_model": "H100-SXM5-80GB", "gpus": 8})");
  EXPECT_EQ(b.at("state"), "running") << b;
  EXPECT_EQ(b.at("pool"), "h100") << "the cluster's pool with that model was chosen";
  EXPECT_EQ(b.at("movable"), false) << "not unless asked";
  std::string second = std::string(b.at("placement").at(0).at("node").as_string());
  EXPECT_NE(second, first);
  auto c = Submit(R"({"team": "vision", "project": "main", "pool": "h100", "gpus": 4})");
  EXPECT_EQ(c.at("placement").at(0).at("node").as_string(), first) << c;
  EXPECT_EQ(c.at("placement").at(0).at("gpus"), json::parse("[4,5,6,7]"));

  // Full: the next job queues, and says why.
  auto d = Submit(
      R"({"team": "speech", "project": "main", "pool": "h100", "gpus": 2, "duration": "2s"})");
  EXPECT_EQ(d.at("state"), "queued") << d;
  EXPECT_EQ(d.at("reason"), "waiting for 2 free GPUs");
  // Its wait so far counts while it waits (not 0 until it starts).
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  EXPECT_GE(Job(4).at("wait_s").to_number<double>(), 1) << Job(4);
  auto heat = controller_->Call("GET", "/api/v1/heatmap?cluster=train&field=allocation").second;
  int allocated = 0;
  for (const auto& v : heat.at("values").as_array())
    allocated += v.is_null() ? 0 : v.to_number<int>();
  EXPECT_EQ(allocated, 16) << heat;

  // Bad requests change nothing.
  EXPECT_EQ(Submit(R"({"team": "x", "project": "main", "pool": "h100", "gpus": 12})", 400)
                .at("error")
                .at("message"),
            "a job of more than 8 GPUs takes whole nodes of pool 'h100': ask for a multiple of 8, "
            "or spread it with gpus_per_node");
  EXPECT_EQ(
      Submit(R"({"team": "x", "project": "main", "pool": "nope"})", 404).at("error").at("message"),
      "no pool 'nope'");
  EXPECT_EQ(Submit(R"({"pool": "h100"})", 400).at("error").at("message"),
            "'team' is required: whose job it is");
  EXPECT_EQ(Submit(R"({"team": "x", "project": "main", "pool": "h100", "gpus": "two"})", 400)
                .at("error")
                .at("code"),
            "invalid_argument");
  EXPECT_EQ(Submit(R"({"team": "x", "project": "main", "pool": "h100", "movable": "yes"})", 400)
                .at("error")
                .at("message"),
            "field 'movable' must be true or false");
  auto bad = Cli({"jobs", "cancel", "999"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("no job 999"), std::string::npos) << bad.err;

  // Cancelling the third job frees its GPUs: the queued one starts there, then ends after its
  // 2 s duration with its GPU-hours recorded.
  auto cancelled = Cli({"jobs", "cancel", "3"});
  ASSERT_EQ(cancelled.exit_code, 0) << cancelled.err;
  EXPECT_NE(cancelled.out.find("cancelled"), std::string::npos) << cancelled.out;
  auto started = Job(4);
  EXPECT_EQ(started.at("state"), "running") << started;
  EXPECT_EQ(started.at("placement").at(0).at("node").as_string(), first);
  ASSERT_TRUE(WaitFor([&] { return JobState(4) == "completed"; }, 10000)) << Job(4);
  // Its run time is its 2 s duration (ended by a tick, at most a second late), its GPU-hours
  // those 2 GPUs for that long.
  double run_s = Job(4).at("run_s").to_number<double>();
  EXPECT_GE(run_s, 2) << Job(4);
  EXPECT_LE(run_s, 5) << Job(4);
  EXPECT_NEAR(Job(4).at("gpu_hours").to_number<double>(), 2 * run_s / 3600, 1e-9);
  EXPECT_GT(Job(4).at("wait_s").to_number<double>(), 0);
  EXPECT_EQ(controller_->Call("DELETE", "/api/v1/jobs/4").first, 409);
  // The list shows its wait, run time and GPU-hours, each under its header.
  auto done = Cli({"jobs", "list", "--state", "completed"});
  ASSERT_EQ(done.exit_code, 0) << done.err;
  EXPECT_TRUE(std::regex_search(done.out, std::regex("STATE +WAIT +RUN +GPU-H +WHERE")))
      << done.out;
  EXPECT_TRUE(std::regex_search(done.out, std::regex(R"(completed +[0-9]+s +[2-5]s +0\.00[1-3] )")))
      << done.out;
  // A page of the list, newest first, with the total.
  auto page = controller_->Call("GET", "/api/v1/jobs?limit=2&offset=1").second;
  EXPECT_EQ(page.at("total"), 4) << page;
  ASSERT_EQ(page.at("items").as_array().size(), 2u) << page;
  EXPECT_EQ(page.at("items").at(0).at("id"), 3) << page;
  EXPECT_EQ(page.at("items").at(1).at("id"), 2) << page;

  // The 8-GPU job's node fails: the job goes back to the queue and says why.
  ASSERT_EQ(
      controller_->Call("POST", "/api/v1/nodes/" + second + "/gpus/0/inject", R"({"xid": 79})")
          .first,
      202);
  ASSERT_TRUE(WaitFor([&] { return JobState(2) == "queued"; }, 20000)) << Job(2);
  auto requeued = Job(2);
  EXPECT_EQ(requeued.at("requeues"), 1);
  EXPECT_EQ(requeued.at("reason").as_string(), "requeued: node " + second + " is unhealthy")
      << requeued;
  EXPECT_TRUE(requeued.at("placement").as_array().empty());

  auto list = Cli({"jobs", "list", "--state", "running"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_NE(list.out.find("vision"), std::string::npos) << list.out;
  EXPECT_EQ(list.out.find("nlp"), std::string::npos) << list.out;
  auto audit = controller_->Call("GET", "/api/v1/audit").second;
  EXPECT_NE(JsonText(audit).find("job/3"), std::string::npos);

  // A drain waits for the node's jobs: the node stays draining while job 1 runs, and is
  // drained once it ends.
  auto drain = Cli({"nodes", "drain", first});
  ASSERT_EQ(drain.exit_code, 0) << drain.err;
  EXPECT_EQ(State(first), "draining");
  EXPECT_NE(std::string(Node(first).at("reason").as_string()).find("waiting for its jobs"),
            std::string::npos)
      << Node(first);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(State(first), "draining");
  EXPECT_EQ(JobState(1), "running");
  ASSERT_EQ(controller_->Call("DELETE", "/api/v1/jobs/1").first, 200);
  ASSERT_TRUE(WaitState(first, "drained", 10000)) << Node(first);

  // Jobs are stored: after a controller restart they are all there, in their states.
  agents_.clear();
  controller_->Stop();
  controller_->Start();
  EXPECT_EQ(JobState(1), "cancelled");
  EXPECT_EQ(JobState(2), "queued");
  EXPECT_EQ(JobState(3), "cancelled");
  EXPECT_EQ(JobState(4), "completed");
  EXPECT_EQ(Job(2).at("requeues"), 1);
}

// gpus_per_node: a job spread over distinct nodes, that many GPUs on each, on the nodes with the
// fewest free GPUs that fit; bad requests are refused and change nothing.
TEST_F(Jobs, ASpreadJobTakesItsShareOnEachOfDistinctNodes) {
  Apply();
  Sim(JoinToken("h100"), "h100", 3, "H100-SXM5-80GB", 8);
  for (const char* n : {"h100-0000", "h100-0001", "h100-0002"}) ASSERT_TRUE(WaitState(n, "ready"));
  auto a = Submit(R"({"team": "vision", "project": "main", "pool": "h100", "gpus": 4})");
  std::string first = std::string(a.at("placement").at(0).at("node").as_string());
  EXPECT_TRUE(a.at("gpus_per_node").is_null()) << a;

  auto r = Cli({"jobs", "submit", "--team", "nlp", "--project", "main", "--pool", "h100", "--gpus",
                "12", "--gpus-per-node", "4"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("12 (4/node)"), std::string::npos) << r.out;
  auto b = Job(2);
  EXPECT_EQ(b.at("state"), "running") << b;
  EXPECT_EQ(b.at("gpus_per_node"), 4) << b;
  std::set<std::string> nodes;
  for (const auto& p : b.at("placement").as_array()) {
    nodes.insert(std::string(p.at("node").as_string()));
    EXPECT_EQ(p.at("gpus").as_array().size(), 4u) << b;
  }
  EXPECT_EQ(nodes.size(), 3u) << "three distinct nodes: " << b;
  EXPECT_TRUE(nodes.count(first)) << "the half-used node is the best fit for one share: " << b;
  EXPECT_EQ(b.at("placement").at(0).at("node").as_string(), first) << b;

  // Whole or one-node asks are the default placement, and are shown as such.
  auto c =
      Submit(R"({"team": "x", "project": "main", "pool": "h100", "gpus": 4, "gpus_per_node": 4})");
  EXPECT_TRUE(c.at("gpus_per_node").is_null()) << c;
  EXPECT_EQ(c.at("placement").as_array().size(), 1u) << c;

  EXPECT_EQ(
      Submit(R"({"team": "x", "project": "main", "pool": "h100", "gpus": 12, "gpus_per_node": 5})",
             400)
          .at("error")
          .at("message"),
      "'gpus_per_node' 5 does not divide 'gpus' 12: the job takes the same on each node");
  EXPECT_EQ(
      Submit(R"({"team": "x", "project": "main", "pool": "h100", "gpus": 16, "gpus_per_node": 16})",
             400)
          .at("error")
          .at("message"),
      "'gpus_per_node' must be 1 to 8 (pool 'h100' has 8 GPUs per node)");
  auto bad = Cli({"jobs", "submit", "--team", "x", "--project", "main", "--pool", "h100", "--gpus",
                  "6", "--gpus-per-node", "4"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_EQ(controller_->Call("GET", "/api/v1/jobs").second.at("total"), 3) << "nothing added";
}

// A drain that outlasts --drain-timeout requeues the node's jobs and completes.
class JobsDrainTimeout : public Jobs {
 protected:
  void SetUp() override {
    dir_ = TempDir("JobsDrainTimeout");
    std::filesystem::create_directories(dir_ + "/data");
    controller_ = std::make_unique<ControllerProcess>(
        dir_ + "/data", std::vector<std::string>{"--drain-timeout", "2s"});
    controller_->Start();
  }
};

TEST_F(JobsDrainTimeout, RequeuesTheJobsOfANodeThatDoesNotFinishDraining) {
  Apply();
  Sim(JoinToken("h100"), "h100", 1, "H100-SXM5-80GB", 8);
  ASSERT_TRUE(WaitState("h100-0000", "ready"));
  auto job = Submit(R"({"team": "vision", "project": "main", "pool": "h100", "gpus": 8})");
  ASSERT_EQ(job.at("state"), "running") << job;
  ASSERT_EQ(controller_->Call("POST", "/api/v1/nodes/h100-0000/drain").first, 200);
  EXPECT_EQ(State("h100-0000"), "draining");
  ASSERT_TRUE(WaitState("h100-0000", "drained", 10000)) << Node("h100-0000");
  auto requeued = Job(1);
  EXPECT_EQ(requeued.at("state"), "queued") << requeued;
  EXPECT_EQ(requeued.at("reason").as_string(),
            "requeued: node h100-0000 did not finish draining within 2 s");
}

}  // namespace
}  // namespace gpufleet::e2e
