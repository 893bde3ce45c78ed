// The bridge to Slurm against a real Slurm 22.05 on loopback (tests/support/slurm-cluster.sh:
// munged, slurmctld and a slurmd per node, fake GPU device files) and simulated gpufleet agents
// with the Slurm node names: Slurm's jobs as gpufleet's, drains that Slurm honours, a drain by
// hand left alone, remediation through Slurm, the ledger, the queue as demand, and a Slurm that
// stops answering. Needs root (slurmd); skipped, saying so, where Slurm is not installed.

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <thread>

#include "fixture.h"
#include "tests/support/fixtures.h"

namespace gpufleet::e2e {
namespace {

const std::string kScript = std::string(GPUFLEET_SOURCE_DIR) + "/tests/support/slurm-cluster.sh";

class Slurm : public E2E {
 protected:
  void SetUp() override {
    if (::geteuid() != 0 || !std::filesystem::exists("/usr/sbin/slurmctld") ||
        !std::filesystem::exists("/usr/sbin/munged")) {
      GTEST_SKIP() << "needs root and Slurm (slurmctld, slurmd, slurm-client, munge)";
    }
    E2E::SetUp();
    slurm_dir_ = dir_ + "/slurm";
    port_ = 20000 + static_cast<int>(::getpid() % 5000) * 4;
    auto started = Run({kScript, "start", slurm_dir_, std::to_string(port_), "sl-0001", "sl-0002"});
    ASSERT_EQ(started.first, 0) << started.second;
    const std::string fleet = ::gpufleet::testing::FleetFixture("slurm-e2e");
    auto applied =
        ApplyText("fleet.yaml", Replace(fleet, "SLURM_CONF", slurm_dir_ + "/slurm.conf"));
    ASSERT_EQ(applied.exit_code, 0) << applied.err << applied.out;
    Sim(JoinToken("gpu"), "sl", 2, "H100-SXM5-80GB", 2, {"--first-index", "1"});
    ASSERT_TRUE(
        WaitFor([&] { return State("sl-0001") == "ready" && State("sl-0002") == "ready"; }, 30000))
        << "the simulated nodes did not register";
  }
  // As E2E's, with Slurm stopped after the controller and before its directory goes.
  void TearDown() override {
    if (!controller_) return;  // skipped
    agents_.clear();
    controller_->Stop();
    if (!slurm_dir_.empty()) Run({kScript, "stop", slurm_dir_});
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }

  static std::string Replace(std::string text, const std::string& from, const std::string& to) {
    for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at)) {
      text.replace(at, from.size(), to);
    }
    return text;
  }
  // A command's exit status and output (stdout and stderr).
  std::pair<int, std::string> Run(const std::vector<std::string>& args) {
    std::string cmd = "SLURM_CONF='" + slurm_dir_ + "/slurm.conf'";
    for (const auto& a : args) cmd += " '" + a + "'";
    cmd += " 2>&1";
    std::string out;
    FILE* p = ::popen(cmd.c_str(), "r");
    if (!p) return {-1, "popen failed"};
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    int status = ::pclose(p);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
  }
  // sbatch in the test's directory; returns the job id.
  std::string Sbatch(const std::vector<std::string>& args) {
    std::vector<std::string> full{"/usr/bin/sbatch", "--parsable", "-D",
                                  slurm_dir_,        "-o",         "/dev/null"};
    full.insert(full.end(), args.begin(), args.end());
    auto [rc, out] = Run(full);
    EXPECT_EQ(rc, 0) << out;
    return out.substr(0, out.find_first_of(";\n"));
  }
  // Slurm's own view of a node: "State=... Reason=...".
  std::string ScontrolNode(const std::string& node) {
    return Run({"/usr/bin/scontrol", "show", "node", node}).second;
  }
  json::value SlurmJob(const std::string& id) {
    auto [s, v] = controller_->Call("GET", "/api/v1/jobs?source=slurm");
    if (s != 200) return nullptr;
    for (const auto& j : v.at("items").as_array()) {
      if (j.at("external_id") == json::value(id)) return j;
    }
    return nullptr;
  }

  std::string slurm_dir_;
  int port_ = 0;
};

TEST_F(Slurm, JobsDrainsAndTheLedgerGoThroughSlurm) {
  // A job started with sbatch shows in gpufleet with its account, node and GPUs within two
  // polls (1 s each here).
  const std::string id = Sbatch({"-A", "physics", "--wckey=llm", "--gres=gpu:2", "-J", "train",
                                 "-w", "sl-0001", "--wrap", "sleep 12"});
  json::value job;
  ASSERT_TRUE(WaitFor(
      [&] {
        job = SlurmJob(id);
        return job.is_object() && job.at("state") == "running";
      },
      10000))
      << "slurm job " << id << " did not show as running";
  EXPECT_EQ(job.at("team"), "physics");
  EXPECT_EQ(job.at("project"), "llm");
  EXPECT_EQ(job.at("user"), "root");
  EXPECT_EQ(job.at("pool"), "gpu");
  ASSERT_EQ(job.at("placement").as_array().size(), 1u);
  EXPECT_EQ(job.at("placement").at(0).at("node"), "sl-0001");
  EXPECT_EQ(json::serialize(job.at("placement").at(0).at("gpus")), "[0,1]");
  auto listed = Cli({"jobs", "list", "--source", "slurm"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_NE(listed.out.find("slurm " + id), std::string::npos) << listed.out;
  // gpufleet does not queue jobs on a Slurm cluster.
  auto [refused, why] = controller_->Call(
      "POST", "/api/v1/jobs", R"({"team": "physics", "project": "llm", "pool": "gpu", "gpus": 1})");
  EXPECT_EQ(refused, 409);
  EXPECT_NE(json::serialize(why).find("scheduled by slurm"), std::string::npos) << why;

  // A reboot (a node action: drain, reboot, back) drains the node in Slurm, waits for the job
  // to end there, and resumes it after.
  auto [acted, op] =
      controller_->Call("POST", "/api/v1/nodes/sl-0001/actions", R"({"action":"reboot"})");
  ASSERT_EQ(acted, 202) << op;
  ASSERT_TRUE(WaitFor(
      [&] { return ScontrolNode("sl-0001").find("Reason=gpufleet:") != std::string::npos; }, 10000))
      << ScontrolNode("sl-0001");
  EXPECT_NE(ScontrolNode("sl-0001").find("DRAIN"), std::string::npos);
  EXPECT_EQ(State("sl-0001"), "draining") << "the job still runs in Slurm";
  // Slurm starts nothing new there: a job for that node waits.
  const std::string waiting =
      Sbatch({"-A", "bio", "--gres=gpu:2", "-J", "next", "-w", "sl-0001", "--wrap", "sleep 1"});
  ASSERT_TRUE(WaitFor([&] { return SlurmJob(waiting).is_object(); }, 10000));
  EXPECT_EQ(SlurmJob(waiting).at("state"), "queued");
  // Pending Slurm jobs are the pool's demand (as the autoscaler's next decision sees it).
  json::value demand;
  EXPECT_TRUE(WaitFor(
      [&] {
        demand = controller_->Call("GET", "/api/v1/pools/gpu/scaling").second;
        return demand.is_object() && demand.at("demand").at("queued") == json::value(2);
      },
      10000))
      << demand;
  // The job ends (12 s): the node drains, reboots and comes back, resumed in Slurm.
  ASSERT_TRUE(WaitFor([&] { return SlurmJob(id).at("state") == "completed"; }, 30000));
  ASSERT_TRUE(WaitFor([&] { return State("sl-0001") == "ready"; }, 60000)) << State("sl-0001");
  ASSERT_TRUE(
      WaitFor([&] { return ScontrolNode("sl-0001").find("DRAIN") == std::string::npos; }, 15000))
      << ScontrolNode("sl-0001");
  // The ended job is a ledger record with its account as the team and its Slurm id.
  json::value record;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto [s, v] = controller_->Call("GET", "/api/v1/usage?team=physics&from=-1h");
        if (s != 200) return false;
        for (const auto& r : v.at("items").as_array()) {
          if (r.at("external_id") == json::value(id)) record = r;
        }
        return record.is_object();
      },
      20000));
  EXPECT_EQ(record.at("source"), "slurm");
  EXPECT_EQ(record.at("project"), "llm");
  EXPECT_EQ(record.at("outcome"), "completed");
  EXPECT_GT(record.at("gpu_hours").to_number<double>(), 0);
}

TEST_F(Slurm, ADrainByHandIsLeftAloneAndRemediationDrainsThroughSlurm) {
  // Drained by an administrator in Slurm: cordoned in gpufleet by `slurm`, never resumed.
  auto [rc, out] =
      Run({"/usr/bin/scontrol", "update", "NodeName=sl-0002", "State=DRAIN", "Reason=disk swap"});
  ASSERT_EQ(rc, 0) << out;
  ASSERT_TRUE(WaitState("sl-0002", "cordoned", 10000)) << State("sl-0002");
  EXPECT_NE(json::serialize(Node("sl-0002").at("reason")).find("disk swap"), std::string::npos)
      << Node("sl-0002");
  std::this_thread::sleep_for(std::chrono::seconds(4));  // a few polls
  EXPECT_NE(ScontrolNode("sl-0002").find("Reason=disk swap"), std::string::npos)
      << ScontrolNode("sl-0002");
  // Resumed in Slurm: back in gpufleet.
  ASSERT_EQ(Run({"/usr/bin/scontrol", "update", "NodeName=sl-0002", "State=RESUME"}).first, 0);
  ASSERT_TRUE(WaitState("sl-0002", "ready", 10000)) << State("sl-0002");

  // An XID 79 with remediation on: the node is drained in Slurm with gpufleet's reason.
  ASSERT_EQ(
      controller_->Call("POST", "/api/v1/nodes/sl-0002/gpus/1/inject", R"({"xid": 79})").first,
      202);
  ASSERT_TRUE(WaitFor(
      [&] { return ScontrolNode("sl-0002").find("Reason=gpufleet:") != std::string::npos; }, 20000))
      << ScontrolNode("sl-0002") << Node("sl-0002");
  auto status = Cli({"slurm", "status"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_NE(status.out.find("sl-0002"), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("gpufleet"), std::string::npos) << status.out;

  // Slurm stops answering: a clear status and a metric; gpufleet goes on.
  Run({kScript, "stop", slurm_dir_});
  json::value cluster;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto [s, v] = controller_->Call("GET", "/api/v1/slurm");
        if (s != 200 || v.at("items").as_array().empty()) return false;
        cluster = v.at("items").at(0);
        return cluster.at("state") == "error";
      },
      30000));
  EXPECT_FALSE(cluster.at("error").as_string().empty()) << cluster;
  const std::string metrics = RawHttp(
      controller_->address(), "GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                                  controller_->admin_token() + "\r\nConnection: close\r\n\r\n");
  EXPECT_NE(metrics.find("gpufleet_slurm_up{cluster=\"hpc\"} 0"), std::string::npos) << metrics;
  EXPECT_EQ(metrics.find("gpufleet_slurm_poll_failures_total{cluster=\"hpc\"} 0\n"),
            std::string::npos);
  EXPECT_EQ(controller_->Call("GET", "/healthz").first, 200);
  EXPECT_EQ(controller_->Call("GET", "/api/v1/nodes").first, 200);
}

// gres.conf from what the agents found; Slurm's ResumeProgram and SuspendProgram (`gpufleet slurm
// resume|suspend HOSTLIST`) run the pool's actuator programs with the nodes, once however often
// Slurm calls.
TEST_F(Slurm, GresConfAndPowerSavingThroughThePoolsActuator) {
  auto gres = Cli({"slurm", "gres-conf", "--node", "sl-0001"});
  ASSERT_EQ(gres.exit_code, 0) << gres.err;
  EXPECT_NE(
      gres.out.find("# slurm.conf: NodeName=sl-0001 Gres=gpu:nvidia_h100_80gb_hbm3:2\n"
                    "NodeName=sl-0001 Name=gpu Type=nvidia_h100_80gb_hbm3 File=/dev/nvidia0\n"
                    "NodeName=sl-0001 Name=gpu Type=nvidia_h100_80gb_hbm3 File=/dev/nvidia1\n"),
      std::string::npos)
      << gres.out;
  auto typed = Cli({"slurm", "gres-conf", "--node", "sl-0002", "--type", "h100"});
  ASSERT_EQ(typed.exit_code, 0) << typed.err;
  EXPECT_NE(typed.out.find("NodeName=sl-0002 Name=gpu Type=h100 File=/dev/nvidia1"),
            std::string::npos)
      << typed.out;
  auto none = Cli({"slurm", "gres-conf", "--node", "nosuch"});
  EXPECT_NE(none.exit_code, 0);
  EXPECT_NE(none.err.find("no node 'nosuch'"), std::string::npos) << none.err;

  // The pool's actuator: programs that write down what they were asked.
  const std::string log = dir_ + "/actuator.log";
  const std::string policy =
      R"({"mode": "reactive", "enabled": false, "min_nodes": 2, "max_nodes": 4, "interval": "1s",
          "actuator": {"type": "command", "provision": "echo provision {nodes} >> )" +
      log + R"(", "deprovision": "echo deprovision {nodes} >> )" + log + R"("}})";
  auto put = controller_->Call("PUT", "/api/v1/pools/gpu/scaling", policy);
  ASSERT_EQ(put.first, 200) << put.second;
  auto unknown = Cli({"slurm", "resume", "sl-[0003-0004]"});
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_NE(unknown.err.find("node 'sl-0003' is not known to gpufleet"), std::string::npos)
      << unknown.err;
  for (int i = 0; i < 2; ++i) {  // Slurm may call twice
    auto up = Cli({"slurm", "resume", "sl-[0002-0004]", "--pool", "gpu"});
    ASSERT_EQ(up.exit_code, 0) << up.err;
    EXPECT_EQ(up.out, i == 0 ? "cluster hpc: started sl-0003 sl-0004; already up: sl-0002\n"
                             : "cluster hpc: started none; already up: sl-0002 sl-0003 sl-0004\n");
  }
  EXPECT_EQ(State("sl-0003"), "provisioning");
  auto down = Cli({"slurm", "suspend", "sl-[0003-0004],sl-0009"});
  ASSERT_EQ(down.exit_code, 0) << down.err;
  EXPECT_EQ(down.out, "cluster hpc: stopped sl-0003 sl-0004; already down: sl-0009\n");
  ASSERT_TRUE(WaitState("sl-0004", "retired", 10000)) << State("sl-0004");
  auto again = Cli({"slurm", "suspend", "sl-[0003-0004]"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.out, "cluster hpc: stopped none; already down: sl-0003 sl-0004\n");
  std::string text;
  ASSERT_TRUE(WaitFor(
      [&] {
        std::ifstream in(log);
        text.assign(std::istreambuf_iterator<char>(in), {});
        return text.find("deprovision") != std::string::npos;
      },
      10000));
  EXPECT_EQ(text, "provision sl-0003 sl-0004\ndeprovision sl-0003 sl-0004\n");
  auto events = controller_->Call("GET", "/api/v1/pools/gpu/scaling/events");
  ASSERT_EQ(events.first, 200);
  EXPECT_NE(json::serialize(events.second).find("slurm resume by bootstrap-admin"),
            std::string::npos)
      << events.second;
  auto audit = controller_->Call("GET", "/api/v1/audit");
  ASSERT_EQ(audit.first, 200);
  EXPECT_NE(json::serialize(audit.second).find("/api/v1/slurm/suspend"), std::string::npos)
      << audit.second;
  // A viewer may not start nodes.
  auto [ts, token] =
      controller_->Call("POST", "/api/v1/api-tokens", R"({"name": "v", "role": "viewer"})");
  ASSERT_EQ(ts, 201) << token;
  const std::string viewer(token.at("token").as_string());
  EXPECT_EQ(
      controller_->Call("POST", "/api/v1/slurm/resume", R"({"nodes": "sl-0003"})", &viewer).first,
      403);
}

}  // namespace
}  // namespace gpufleet::e2e
