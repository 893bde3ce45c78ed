// Slurm's own output (recorded from Debian 12's Slurm 22.05, tests/fixtures/slurm/) read into
// jobs and nodes, and those jobs followed by the job service: added, started, ended into the
// ledger's allocations, never placed by gpufleet.

#include "slurm/slurm.h"

#include <gtest/gtest.h>

#include "config/fleet_spec.h"
#include "fleet/teams.h"
#include "slurm/bridge.h"
#include "slurm/gres.h"
#include "store/store.h"
#include "tests/support/fixtures.h"
#include "tests/support/temp_dir.h"

namespace gpufleet::slurm {
namespace {

using ::gpufleet::testing::FixtureText;

TEST(Hostlist, ExpandsRangesKeepingZeroPadding) {
  auto a = ExpandHostlist("n[1-3],gpu[08-10,12],login");
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_EQ(a.value(), (std::vector<std::string>{"n1", "n2", "n3", "gpu08", "gpu09", "gpu10",
                                                 "gpu12", "login"}));
  EXPECT_EQ(ExpandHostlist("").value(), std::vector<std::string>{});
  EXPECT_FALSE(ExpandHostlist("n[1-3").ok());
  EXPECT_FALSE(ExpandHostlist("n[3-1]").ok());
  EXPECT_FALSE(ExpandHostlist("n[a-b]").ok());
  auto huge = ExpandHostlist("n[0-999999999]", 1000);
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.error().message.find("more than 1000"), std::string::npos);
}

TEST(Gres, IndicesAndRequests) {
  EXPECT_EQ(GpuIndices("gpu:h100:2(IDX:0-1)"), (std::vector<int>{0, 1}));
  EXPECT_EQ(GpuIndices("gpu:4(IDX:0,2-3),mps:100(IDX:0)"), (std::vector<int>{0, 2, 3}));
  EXPECT_EQ(GpuIndices("gpu:h100:0(IDX:N/A)"), std::vector<int>{});
  EXPECT_EQ(GpusInTres("gres:gpu:2"), 2);
  EXPECT_EQ(GpusInTres("gres:gpu:h100:4,gres:shard:1"), 4);
  EXPECT_EQ(GpusInTres("gres/gpu=8"), 8);
  EXPECT_EQ(GpusInTres("cpu=1,mem=1000M"), 0);
}

TEST(Squeue, ReadsTheRecordedJobs) {
  auto jobs = ParseSqueue(FixtureText("slurm/squeue.json"));
  ASSERT_TRUE(jobs.ok()) << jobs.error().message;
  ASSERT_EQ(jobs->size(), 4u);
  const Job& running = jobs->at(0);
  EXPECT_EQ(running.id, "1");
  EXPECT_EQ(running.state, "RUNNING");
  EXPECT_EQ(running.account, "physics");
  EXPECT_EQ(running.wckey, "llm");
  EXPECT_EQ(running.user, "root");
  EXPECT_EQ(running.nodes, std::vector<std::string>{"n1"});
  ASSERT_EQ(running.gpus.size(), 1u);
  EXPECT_EQ(running.gpus[0], (std::vector<int>{0, 1}));
  EXPECT_EQ(running.gpus_requested, 2);
  EXPECT_GT(running.start_s, 1'700'000'000);
  EXPECT_EQ(jobs->at(1).state, "CANCELLED");
  const Job& pending = jobs->at(3);
  EXPECT_EQ(pending.state, "PENDING");
  EXPECT_TRUE(pending.nodes.empty());
  EXPECT_EQ(pending.gpus_requested, 2);  // one GPU on each of two nodes
  EXPECT_EQ(pending.wckey, "fold");
}

TEST(Squeue, SlurmErrorsAndBadDocumentsAreErrors) {
  auto refused = ParseSqueue(
      R"({"meta":{},"errors":[{"error":"Unable to contact slurm controller"}],"jobs":[]})");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("Unable to contact slurm controller"), std::string::npos);
  EXPECT_FALSE(ParseSqueue("{\"jobs\": 3}").ok());
  EXPECT_FALSE(ParseSqueue("not json").ok());
  EXPECT_FALSE(ParseSinfo("[]").ok());
}

TEST(Sinfo, ReadsDrainsAndTheirReasons) {
  auto nodes = ParseSinfo(FixtureText("slurm/sinfo.json"));
  ASSERT_TRUE(nodes.ok()) << nodes.error().message;
  ASSERT_EQ(nodes->size(), 2u);
  const Node& n1 = nodes->at(0);
  EXPECT_EQ(n1.name, "n1");
  EXPECT_TRUE(n1.Draining());
  EXPECT_FALSE(n1.Drained());  // job 1 still runs there
  EXPECT_TRUE(n1.reason.starts_with(kReasonPrefix));
  EXPECT_EQ(n1.partitions, std::vector<std::string>{"gpu"});
  const Node& n2 = nodes->at(1);
  EXPECT_FALSE(n2.Draining());
  Node idle_drained;
  idle_drained.state = "idle";
  idle_drained.flags = {"DRAIN"};
  EXPECT_TRUE(idle_drained.Drained());
  Node down;
  down.state = "down";
  EXPECT_TRUE(down.Down());
}

TEST(States, SlurmStatesAsGpufleets) {
  using workload::JobState;
  EXPECT_EQ(ToJobState("PENDING", false), JobState::kQueued);
  EXPECT_EQ(ToJobState("RUNNING", true), JobState::kRunning);
  EXPECT_EQ(ToJobState("COMPLETING", true), JobState::kRunning);
  EXPECT_EQ(ToJobState("CANCELLED", true), JobState::kCancelled);
  EXPECT_EQ(ToJobState("TIMEOUT", true), JobState::kCompleted);
  EXPECT_EQ(ToJobState("NODE_FAIL", true), JobState::kCompleted);
}

TEST(NodeNames, TheTemplateTakenOffASlurmName) {
  EXPECT_EQ(NodeForSlurmName("{name}", "gpu01"), "gpu01");
  EXPECT_EQ(NodeForSlurmName("gpu-{hostname}", "gpu-a01"), "a01");
  EXPECT_EQ(NodeForSlurmName("{name}.ib", "a01.ib"), "a01");
  EXPECT_EQ(NodeForSlurmName("gpu-{hostname}", "cpu-a01"), "") << "does not fit";
  EXPECT_EQ(NodeForSlurmName("gpu-{hostname}", "gpu-"), "") << "nothing left";
  EXPECT_EQ(NodeForSlurmName("{name}-{hostname}", "a-b"), "") << "two placeholders";
}

// gres.conf from what the agent found: by device file (NVML's minor number, not the index),
// the node's Slurm name, Slurm's AutoDetect type or the site's; what cannot be written is said.
TEST(GresConf, LinesByDeviceFileWithSlurmsNamesAndTypes) {
  EXPECT_EQ(GresType("NVIDIA H100 80GB HBM3"), "nvidia_h100_80gb_hbm3");
  gpufleet::Node n;
  n.name = "a01.dc1";
  for (int i = 0; i < 3; ++i) {
    Gpu g;
    g.index = i;
    g.minor_number = 2 - i;  // the driver numbered them the other way round
    g.name = i == 2 ? "NVIDIA L4" : "NVIDIA H100 80GB HBM3";
    n.gpus.push_back(g);
  }
  Scheduler s;
  s.type = "slurm";
  s.node_name = "gpu-{hostname}";
  auto conf = MakeGresConf(n, &s, "");
  ASSERT_TRUE(conf.ok()) << conf.error().message;
  EXPECT_EQ(conf->slurm_node, "gpu-a01");
  EXPECT_EQ(conf->lines,
            (std::vector<std::string>{
                "NodeName=gpu-a01 Name=gpu Type=nvidia_l4 File=/dev/nvidia0",
                "NodeName=gpu-a01 Name=gpu Type=nvidia_h100_80gb_hbm3 File=/dev/nvidia1",
                "NodeName=gpu-a01 Name=gpu Type=nvidia_h100_80gb_hbm3 File=/dev/nvidia2"}));
  EXPECT_EQ(conf->gres, "gpu:nvidia_l4:1,gpu:nvidia_h100_80gb_hbm3:2");
  auto typed = MakeGresConf(n, nullptr, "h100");
  ASSERT_TRUE(typed.ok());
  EXPECT_EQ(typed->slurm_node, "a01.dc1") << "no scheduler: the node's own name";
  EXPECT_EQ(typed->lines.front(), "NodeName=a01.dc1 Name=gpu Type=h100 File=/dev/nvidia0");
  EXPECT_EQ(typed->gres, "gpu:h100:3");

  EXPECT_EQ(MakeGresConf(n, &s, "h 100").error().code, ErrorCode::kInvalidArgument);
  n.gpus[1].mig_mode = 1;
  auto mig = MakeGresConf(n, &s, "");
  ASSERT_FALSE(mig.ok());
  EXPECT_NE(mig.error().message.find("GPU 1 of node 'a01.dc1' has MIG enabled"), std::string::npos);
  n.gpus[1].mig_mode = 0;
  n.gpus[2].minor_number = -1;
  auto unknown = MakeGresConf(n, &s, "");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code, ErrorCode::kConflict);
  EXPECT_NE(unknown.error().message.find("GPU 2 of node 'a01.dc1': its device file"),
            std::string::npos);
  n.gpus.clear();
  EXPECT_EQ(MakeGresConf(n, &s, "").error().message,
            "node 'a01.dc1' has no GPUs (has its agent registered?)");
}

class SlurmJobsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = store::Open("sqlite:" + (dir_ / "db")).value();
    fleet_ = std::make_unique<FleetService>(*store_.fleet, *store_.tokens, GpuCatalog::Builtin(),
                                            clock_, FleetOptions{});
    ASSERT_TRUE(fleet_->Load().ok());
    auto spec = ParseFleetSpec(::gpufleet::testing::FleetFixture("slurm"), "slurm.yaml",
                               *GpuCatalog::Builtin());
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    ASSERT_TRUE(fleet_->Apply(spec.value()).ok());
    teams_ = std::make_unique<TeamService>(*store_.teams, clock_);
    ASSERT_TRUE(teams_->Load().ok());
    for (const auto& t : *spec->teams) ASSERT_TRUE(teams_->Create(t).ok());
    jobs_ = std::make_unique<workload::JobService>(*fleet_, *store_.jobs, clock_);
    ASSERT_TRUE(jobs_->Load().ok());
    pools_ = fleet_->Pools().value();
    scheduler_ = fleet_->Clusters().value().at(0).scheduler;
  }
  std::vector<workload::ExternalJob> Read(const std::string& squeue) {
    auto parsed = ParseSqueue(squeue);
    EXPECT_TRUE(parsed.ok()) << parsed.error().message;
    return ToExternalJobs(parsed.value(), scheduler_, {{"n1", "n1"}, {"n2", "n2"}},
                          {{"n1", "gpu"}, {"n2", "gpu"}}, pools_, teams_.get());
  }
  ::gpufleet::testing::TempDir dir_;
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>(1'796'475'100'000);
  store::Stores store_;
  std::unique_ptr<FleetService> fleet_;
  std::unique_ptr<TeamService> teams_;
  std::unique_ptr<workload::JobService> jobs_;
  std::vector<Pool> pools_;
  Scheduler scheduler_;
};

TEST_F(SlurmJobsTest, RecordedJobsBecomeJobsWithTheirTeamsNodesAndGpus) {
  auto seen = Read(FixtureText("slurm/squeue.json"));
  ASSERT_EQ(seen.size(), 4u);
  auto counts = jobs_->SyncExternal("slurm", "hpc", seen);
  EXPECT_EQ(counts.added, 3);  // the cancelled one ended before gpufleet saw it
  workload::JobFilter slurm;
  slurm.source = "slurm";
  auto jobs = jobs_->List(slurm);
  ASSERT_EQ(jobs.size(), 3u);
  std::map<std::string, workload::Job> by_id;
  for (const auto& j : jobs) by_id[j.external_id] = j;
  const workload::Job& one = by_id.at("1");
  EXPECT_EQ(one.source, "slurm");
  EXPECT_EQ(one.state, workload::JobState::kRunning);
  EXPECT_EQ(one.spec.team, "physics");  // account physics is listed by team physics
  EXPECT_EQ(one.spec.project, "llm");   // the wckey
  EXPECT_EQ(one.spec.cluster, "hpc");
  EXPECT_EQ(one.spec.pool, "gpu");
  EXPECT_EQ(one.user, "root");
  ASSERT_EQ(one.placement.size(), 1u);
  EXPECT_EQ(one.placement[0].node, "n1");
  EXPECT_EQ(one.placement[0].gpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(by_id.at("3").spec.team, "bio");
  EXPECT_EQ(by_id.at("3").spec.project, "pend");  // no wckey: the job name
  EXPECT_EQ(by_id.at("4").state, workload::JobState::kQueued);
  EXPECT_TRUE(jobs_->Busy("n1"));
  // Pending Slurm jobs are the pool's demand, as gpufleet's own queue is.
  auto demand = jobs_->Demand();
  EXPECT_EQ(demand["gpu"].queued_gpus, 2);
  EXPECT_EQ(demand["gpu"].queued_jobs, 1);
  EXPECT_EQ(demand["gpu"].running_gpus, 4);
  // gpufleet neither places nor cancels them.
  jobs_->Tick();
  EXPECT_EQ(jobs_->Get(by_id.at("4").id)->state, workload::JobState::kQueued);
  auto cancel = jobs_->Cancel(one.id);
  ASSERT_FALSE(cancel.ok());
  EXPECT_EQ(cancel.error().code, ErrorCode::kConflict);
  EXPECT_NE(cancel.error().message.find("cancel it in slurm"), std::string::npos);
  // The same poll again changes nothing.
  auto again = jobs_->SyncExternal("slurm", "hpc", seen);
  EXPECT_EQ(again.added + again.started + again.ended + again.changed, 0);
}

TEST_F(SlurmJobsTest, AJobThatLeavesTheQueueEndsIntoTheLedgerWithItsSlurmId) {
  auto seen = Read(FixtureText("slurm/squeue.json"));
  jobs_->SyncExternal("slurm", "hpc", seen);
  (void)jobs_->TakeEnded();
  clock_->Advance(3'600'000);
  // Job 1 ends (COMPLETED, still shown), job 3 is gone from squeue, job 4 starts on n1.
  seen[0].state = workload::JobState::kCompleted;
  seen[0].end_ms = clock_->NowMs() - 60'000;
  seen.erase(seen.begin() + 2);
  seen.back().state = workload::JobState::kRunning;
  seen.back().placement = {{"n1", {0}}, {"n2", {1}}};
  auto counts = jobs_->SyncExternal("slurm", "hpc", seen);
  EXPECT_EQ(counts.ended, 2);
  EXPECT_EQ(counts.started, 1);
  auto ended = jobs_->TakeEnded();
  ASSERT_EQ(ended.size(), 2u);
  std::map<std::string, workload::EndedAllocation> by_id;
  for (const auto& e : ended) by_id[e.external_id] = e;
  const auto& one = by_id.at("1");
  EXPECT_EQ(one.source, "slurm");
  EXPECT_EQ(one.team, "physics");
  EXPECT_EQ(one.outcome, "completed");
  EXPECT_EQ(one.end_ms, clock_->NowMs() - 60'000);   // Slurm's end time
  EXPECT_EQ(by_id.at("3").end_ms, clock_->NowMs());  // gone: ended when noticed
  workload::JobFilter running;
  running.state = "running";
  running.source = "slurm";
  auto now_running = jobs_->List(running);
  ASSERT_EQ(now_running.size(), 1u);
  EXPECT_EQ(now_running[0].external_id, "4");
  EXPECT_EQ(now_running[0].placement.size(), 2u);
}

TEST_F(SlurmJobsTest, SlurmJobsSurviveARestartAndAreNotAddedTwice) {
  jobs_->SyncExternal("slurm", "hpc", Read(FixtureText("slurm/squeue.json")));
  jobs_ = std::make_unique<workload::JobService>(*fleet_, *store_.jobs, clock_);
  ASSERT_TRUE(jobs_->Load().ok());
  auto counts = jobs_->SyncExternal("slurm", "hpc", Read(FixtureText("slurm/squeue.json")));
  EXPECT_EQ(counts.added, 0);
  workload::JobFilter own;
  own.source = "gpufleet";
  EXPECT_TRUE(jobs_->List(own).empty());
}

TEST_F(SlurmJobsTest, PartitionsOutsideTheClustersListAreNotRead) {
  scheduler_.partitions = {"debug"};
  EXPECT_TRUE(Read(FixtureText("slurm/squeue.json")).empty());
}

}  // namespace
}  // namespace gpufleet::slurm
