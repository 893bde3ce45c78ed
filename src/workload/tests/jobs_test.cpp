// Jobs against the real fleet and SQLite store, with a manual clock: how long ended jobs are
// kept (in memory and in the store), and that no job id comes back after they are dropped.

#include "workload/jobs.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "config/fleet_spec.h"
#include "tests/support/fixtures.h"
#include "tests/support/temp_dir.h"

namespace gpufleet::workload {
namespace {

const std::string kFleet = ::gpufleet::testing::FleetFixture("jobs");  // tests/fixtures/fleets/

constexpr int64_t kHour = 3'600'000;

// The SQLite store's jobs behind a switch that makes it unavailable, as a database that went
// away would; every JobsTest goes through it (up, it only forwards).
class SwitchedJobStore : public store::JobStore {
 public:
  explicit SwitchedJobStore(store::JobStore& real) : real_(real) {}
  bool down = false;
  Status SaveJobs(const std::vector<JobRecord>& jobs) override {
    if (down) return MakeError(ErrorCode::kUnavailable, "store: the database is away");
    return real_.SaveJobs(jobs);
  }
  Result<std::vector<JobRecord>> ListJobs() override { return real_.ListJobs(); }
  Status DeleteEndedJobsBefore(int64_t t) override { return real_.DeleteEndedJobsBefore(t); }

 private:
  store::JobStore& real_;
};

class JobsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Open();
    auto spec = ParseFleetSpec(kFleet, "fleet.yaml", *GpuCatalog::Builtin());
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    ASSERT_TRUE(fleet_->Apply(spec.value()).ok());
  }
  void TearDown() override { Close(); }
  // A controller (re)start: the store, the fleet and the jobs loaded from it.
  void Open() {
    store_ = store::Open("sqlite:" + (dir_ / "db").string()).value();
    fleet_ = std::make_unique<FleetService>(*store_.fleet, *store_.tokens, GpuCatalog::Builtin(),
                                            clock_, FleetOptions{});
    ASSERT_TRUE(fleet_->Load().ok());
    switched_ = std::make_unique<SwitchedJobStore>(*store_.jobs);
    jobs_ = std::make_unique<JobService>(*fleet_, *switched_, clock_, 10 * 60'000, kHour);
    ASSERT_TRUE(jobs_->Load().ok());
  }
  void Close() {
    jobs_.reset();
    switched_.reset();
    fleet_.reset();
    store_ = {};
  }
  // A job for the pool, which has no nodes: it stays queued until cancelled.
  // A job of `gpus` on pool h100, for team llm beyond a node's GPUs, else vision.
  Job Submit(int gpus, int64_t duration_ms = 0) {
    JobSpec s;
    s.team = gpus > 8 ? "llm" : "vision";
    s.pool = "h100";
    s.gpus = gpus;
    s.duration_ms = duration_ms;
    auto j = jobs_->Submit(s);
    EXPECT_TRUE(j.ok()) << j.error().message;
    return j.ok() ? j.value() : Job{};
  }
  int64_t Submit() { return Submit(2).id; }
  std::vector<int64_t> Stored() {
    std::vector<int64_t> ids;
    for (const auto& r : store_.jobs->ListJobs().value()) ids.push_back(r.id);
    return ids;
  }

  // Registers 8-GPU H100 nodes of pool h100 under these names (simulated ones, or real).
  void AddNodes(std::initializer_list<const char*> names, bool simulated = false) {
    auto token = fleet_->CreateJoinToken("h100", kHour, "test");
    ASSERT_TRUE(token.ok()) << token.error().message;
    for (const char* name : names) {
      proto::Hello h;
      h.join_token = token->secret;
      h.facts.hostname = name;
      h.simulated = simulated;
      for (int i = 0; i < 8; ++i) {
        Gpu g;
        g.index = i;
        g.uuid = std::string(name) + "-" + std::to_string(i);
        g.name = "NVIDIA H100 80GB HBM3";
        h.gpus.push_back(g);
      }
      ASSERT_TRUE(fleet_->OnHello(h, "test").ok());
    }
  }

  testing::TempDir tmp_{"gf-jobs"};  // removed with everything in it after the test
  std::filesystem::path dir_ = tmp_.path();
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  store::Stores store_;
  std::unique_ptr<FleetService> fleet_;
  std::unique_ptr<SwitchedJobStore> switched_;
  std::unique_ptr<JobService> jobs_;
};

TEST_F(JobsTest, AStoreOutageRefusesNewJobsAndKeepsOtherChangesUntilItReturns) {
  AddNodes({"n1"});
  switched_->down = true;
  JobSpec s;
  s.team = "vision";
  s.pool = "h100";
  s.gpus = 2;
  auto refused = jobs_->Submit(s);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kUnavailable);  // the API's 503
  EXPECT_EQ(refused.error().message.rfind("job not submitted: ", 0), 0u);
  EXPECT_TRUE(Stored().empty());
  switched_->down = false;
  Job a = Submit(2);  // stored before it is acknowledged, then placed
  EXPECT_EQ(a.state, JobState::kRunning);
  EXPECT_FALSE(jobs_->Get(a.id - 1).ok());  // the refused one was never queued
  switched_->down = true;
  ASSERT_TRUE(jobs_->Cancel(a.id).ok());  // applied; its write fails and is kept
  jobs_->Tick();                          // still away
  switched_->down = false;
  jobs_->Tick();  // written now
  Close();
  Open();
  EXPECT_EQ(jobs_->Get(a.id)->state, JobState::kCancelled);
}

// Live, the same queue keeps nodes for a job that has waited long (sched::Queue): its reason
// names them, a small job submitted then waits instead of landing there, and the wide job
// starts when the kept nodes' jobs end.
TEST_F(JobsTest, AWideJobThatWaitedLongHasNodesKeptForIt) {
  AddNodes({"n0", "n1"});
  auto a = Submit(4), b = Submit(2);
  ASSERT_EQ(a.state, JobState::kRunning);
  ASSERT_EQ(a.placement.at(0).node, "n0");
  ASSERT_EQ(b.placement.at(0).node, "n0") << "best fit";
  auto c = Submit(1);
  auto big = Submit(16);
  EXPECT_EQ(big.state, JobState::kQueued);
  EXPECT_EQ(big.reason, "waiting for 16 free GPUs");
  clock_->Advance(10 * 60'000);
  jobs_->Tick();
  EXPECT_EQ(jobs_->Get(big.id)->reason,
            "waiting for 16 free GPUs; waited over 10m, so n1, n0 take no other job until it fits");
  auto d = Submit(1);
  EXPECT_EQ(d.state, JobState::kQueued) << "n0 and n1 are kept for the 16-GPU job";
  ASSERT_TRUE(jobs_->Cancel(a.id).ok());
  ASSERT_TRUE(jobs_->Cancel(b.id).ok());
  EXPECT_EQ(jobs_->Get(d.id)->state, JobState::kQueued);
  ASSERT_TRUE(jobs_->Cancel(c.id).ok());
  auto ran = jobs_->Get(big.id).value();
  EXPECT_EQ(ran.state, JobState::kRunning) << ran.reason;
  EXPECT_EQ(ran.placement.size(), 2u);
  EXPECT_EQ(ran.reason, "running on 2 node(s)");
  EXPECT_EQ(jobs_->Get(d.id)->reason, "waiting for 1 free GPU");
}

// Jobs with a duration: the kept nodes still take a job expected to end before their running
// jobs do (backfill), since it does not delay the wide job; the reason says until when.
TEST_F(JobsTest, KeptNodesStillTakeJobsThatEndBeforeTheWideJobCanStart) {
  AddNodes({"n0", "n1"});
  const int64_t t0 = clock_->NowMs();
  auto a = Submit(4, kHour / 2), b = Submit(2, kHour / 3);
  ASSERT_EQ(a.placement.at(0).node, "n0");
  auto big = Submit(16, kHour);
  clock_->Advance(10 * 60'000);
  jobs_->Tick();
  EXPECT_EQ(jobs_->Get(big.id)->reason,
            "waiting for 16 free GPUs; waited over 10m, so n1, n0 take no other job until it "
            "fits, but one expected to end by " +
                FormatTime(t0 + kHour / 2));
  auto fits = Submit(1, 20 * 60'000);  // ends at t0 + 30m
  EXPECT_EQ(fits.state, JobState::kRunning) << fits.reason;
  auto late = Submit(1, 20 * 60'000 + 1000);
  EXPECT_EQ(late.state, JobState::kQueued);
  auto endless = Submit(1, 0);
  EXPECT_EQ(endless.state, JobState::kQueued);
}

// A job larger than the pool's ready and starting nodes gets no nodes kept, however long it
// waits, so the jobs behind it still run; its reason says why it waits. Once a node on its
// way makes the pool large enough, it gets them.
TEST_F(JobsTest, AJobLargerThanThePoolKeepsNoNodesFromOtherJobs) {
  AddNodes({"n0", "n1"});
  auto a = Submit(4);
  auto huge = Submit(24);  // three whole nodes
  EXPECT_EQ(huge.reason,
            "waiting for 24 free GPUs; more than the pool's 2 ready or starting nodes of 8 GPUs "
            "hold");
  clock_->Advance(10 * 60'000);
  jobs_->Tick();
  EXPECT_EQ(jobs_->Get(huge.id)->reason,
            "waiting for 24 free GPUs; more than the pool's 2 ready or starting nodes of 8 GPUs "
            "hold");
  auto small = Submit(1);
  EXPECT_EQ(small.state, JobState::kRunning) << small.reason;
  auto whole = Submit(8);
  EXPECT_EQ(whole.state, JobState::kRunning) << "n1 is not kept";
  auto d = jobs_->Demand();
  EXPECT_EQ(d["h100"].queued_gpus_by_size[24], 24);

  ASSERT_TRUE(fleet_->Provision("h100", "n2", true, "test", "test").ok());
  clock_->Advance(1000);
  jobs_->Tick();
  EXPECT_EQ(jobs_->Get(huge.id)->reason,
            "waiting for 24 free GPUs; waited over 10m, so n0, n1 take no other job until it fits");
  EXPECT_EQ(Submit(1).state, JobState::kQueued) << "both ready nodes are kept now";
}

// The wait before nodes are kept is the controller's (--reserve-after), and the reason says it.
TEST_F(JobsTest, TheWaitBeforeNodesAreKeptIsTheControllers) {
  jobs_ =
      std::make_unique<JobService>(*fleet_, *store_.jobs, clock_, 10 * 60'000, kHour, 2 * 60'000);
  ASSERT_TRUE(jobs_->Load().ok());
  AddNodes({"n0", "n1"});
  Submit(4);
  auto big = Submit(16);
  clock_->Advance(2 * 60'000);
  jobs_->Tick();
  EXPECT_EQ(jobs_->Get(big.id)->reason,
            "waiting for 16 free GPUs; waited over 2m, so n1, n0 take no other job until it fits");
}

// A page of the list: newest first, `limit` from `offset`, with the count of all that match;
// a queued or running filter walks only the live jobs and gives the same as the whole list.
TEST_F(JobsTest, ListGivesAPageAndTheTotal) {
  AddNodes({"n0"});
  std::vector<int64_t> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(Submit(2).id);  // 4 run, the fifth queues
  ASSERT_TRUE(jobs_->Cancel(ids[1]).ok());
  size_t total = 0;
  auto page = jobs_->List({}, 1, 2, total);
  EXPECT_EQ(total, 5u);
  ASSERT_EQ(page.size(), 2u);
  EXPECT_EQ(page[0].id, ids[3]);
  EXPECT_EQ(page[1].id, ids[2]);
  EXPECT_TRUE(jobs_->List({}, 9, 2, total).empty());
  EXPECT_EQ(total, 5u);
  for (const char* state : {"queued", "running", "cancelled"}) {
    JobFilter f;
    f.state = state;
    auto all = jobs_->List(f);
    page = jobs_->List(f, 0, 100, total);
    EXPECT_EQ(total, all.size()) << state;
    ASSERT_EQ(page.size(), all.size()) << state;
    for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(page[i].id, all[i].id) << state;
  }
  JobFilter running;
  running.state = "running";
  EXPECT_EQ(jobs_->List(running).size(), 4u) << "the fifth started when the cancel freed GPUs";
}

// A duration over a year is refused and queues nothing; a year is accepted.
// A job's sim_profile is for simulated pools only; a running job's GPUs get its profile (the
// default resolved) and its start, for the simulated nodes to follow; it survives a restart.
TEST_F(JobsTest, SimProfilesAreForSimulatedPoolsAndGoToTheJobsGpus) {
  AddNodes({"sim-0"}, true);
  JobSpec s;
  s.team = "nlp";
  s.pool = "h100";
  s.gpus = 2;
  s.sim_profile = "idle";
  auto idle = jobs_->Submit(s);
  ASSERT_TRUE(idle.ok()) << idle.error().message;
  s.gpus = 4;
  s.sim_profile = "";
  clock_->Advance(1000);
  auto train = jobs_->Submit(s);
  ASSERT_TRUE(train.ok()) << train.error().message;
  ASSERT_EQ(train->state, JobState::kRunning);
  auto loads = jobs_->Loads();
  ASSERT_EQ(loads.size(), 1u);
  int idle_gpus = 0, train_gpus = 0;
  for (const auto& l : loads["sim-0"]) {
    if (l.job == idle->id && l.profile == "idle" && l.since_ms == idle->start_ms) ++idle_gpus;
    if (l.job == train->id && l.profile == "training" && l.since_ms == train->start_ms) {
      ++train_gpus;
    }
  }
  EXPECT_EQ(idle_gpus, 2);
  EXPECT_EQ(train_gpus, 4);
  s.sim_profile = "gaming";
  EXPECT_EQ(jobs_->Submit(s).error().message,
            "'sim_profile' must be training, inference, bursty or idle, not 'gaming'");
  // A real node in the pool: its GPUs cannot be told how to behave.
  AddNodes({"real-0"});
  s.sim_profile = "bursty";
  EXPECT_EQ(jobs_->Submit(s).error().message,
            "'sim_profile' is for simulated pools: pool 'h100' has real nodes");
  EXPECT_EQ(jobs_->List({}).size(), 2u) << "nothing queued by the refusals";
  ASSERT_TRUE(jobs_->Cancel(train->id).ok());
  EXPECT_EQ(jobs_->Loads()["sim-0"].size(), 2u);
  Close();
  Open();
  EXPECT_EQ(jobs_->Get(idle->id)->spec.sim_profile, "idle");
}

TEST_F(JobsTest, ADurationOverAYearIsRefused) {
  JobSpec s;
  s.team = "nlp";
  s.pool = "h100";
  s.duration_ms = JobService::kMaxDurationMs + 1;
  EXPECT_EQ(jobs_->Submit(s).error().message,
            "'duration' must be at most 365d; leave it out for a job that runs until cancelled");
  EXPECT_EQ(jobs_->Demand()["h100"].queued_jobs, 0);
  s.duration_ms = JobService::kMaxDurationMs;
  EXPECT_TRUE(jobs_->Submit(s).ok());
}

// gpus_per_node is checked against the pool and kept across a restart; asking for what the
// default placement gives is stored as the default.
TEST_F(JobsTest, GpusPerNodeIsCheckedAndSurvivesARestart) {
  JobSpec s;
  s.team = "nlp";
  s.pool = "h100";
  s.gpus = 12;
  s.gpus_per_node = 4;
  auto j = jobs_->Submit(s);
  ASSERT_TRUE(j.ok()) << j.error().message;
  EXPECT_EQ(j->spec.gpus_per_node, 4);
  EXPECT_EQ(j->reason, "waiting for 12 free GPUs; the pool has no ready or starting node");
  s.gpus_per_node = 8;
  s.gpus = 16;
  EXPECT_EQ(jobs_->Submit(s)->spec.gpus_per_node, 0) << "whole nodes: the default";
  s.gpus_per_node = 3;
  EXPECT_EQ(jobs_->Submit(s).error().message,
            "'gpus_per_node' 3 does not divide 'gpus' 16: the job takes the same on each node");
  s.gpus_per_node = 9;
  s.gpus = 18;
  EXPECT_EQ(jobs_->Submit(s).error().message,
            "'gpus_per_node' must be 1 to 8 (pool 'h100' has 8 GPUs per node)");
  s.gpus_per_node = -1;
  EXPECT_FALSE(jobs_->Submit(s).ok());
  // Queued (the pool has no nodes), counted for the autoscaler as three whole nodes.
  auto d = jobs_->Demand();
  EXPECT_EQ(d["h100"].queued_by_size[24], 1) << "12 GPUs over 3 nodes";
  EXPECT_EQ(d["h100"].queued_by_size[16], 1);
  Close();
  Open();
  EXPECT_EQ(jobs_->Get(j->id)->spec.gpus_per_node, 4);
  EXPECT_EQ(jobs_->List({}).size(), 2u);
}

// Passes walk only queued and running jobs: several ending in one pass all end, the queued
// one behind them starts in the same pass, and after a restart the running ones keep their
// GPUs and the queue goes on.
TEST_F(JobsTest, JobsEndingTogetherAllEndAndTheQueueGoesOnAfterARestart) {
  AddNodes({"n0"});
  std::vector<int64_t> ids;
  for (int64_t minutes : {10, 10, 10, 20}) ids.push_back(Submit(2, minutes * 60'000).id);
  ids.push_back(Submit(6).id);
  EXPECT_EQ(jobs_->Get(ids[4])->state, JobState::kQueued);
  clock_->Advance(10 * 60'000);
  EXPECT_EQ(jobs_->Tick(), 4) << "three ended and one started";
  for (size_t i : {0, 1, 2}) EXPECT_EQ(jobs_->Get(ids[i])->state, JobState::kCompleted);
  EXPECT_EQ(jobs_->Get(ids[3])->state, JobState::kRunning);
  EXPECT_EQ(jobs_->Get(ids[4])->state, JobState::kRunning);
  EXPECT_EQ(jobs_->Allocation().at("n0"),
            (std::vector<int64_t>{ids[4], ids[4], ids[4], ids[4], ids[4], ids[4], ids[3], ids[3]}));
  Close();
  Open();
  EXPECT_EQ(jobs_->Allocation().at("n0").size(), 8u);
  clock_->Advance(10 * 60'000);
  EXPECT_EQ(jobs_->Tick(), 1);
  EXPECT_EQ(jobs_->Get(ids[3])->state, JobState::kCompleted);
  int64_t next = Submit();
  EXPECT_EQ(jobs_->Get(next)->state, JobState::kRunning) << "on the GPUs the ended job freed";
}

TEST_F(JobsTest, EndedJobsAreDroppedAfterTheRetentionAndIdsAreNotReused) {
  int64_t a = Submit(), b = Submit(), c = Submit();
  ASSERT_EQ(std::vector<int64_t>({1, 2, 3}), std::vector<int64_t>({a, b, c}));
  ASSERT_TRUE(jobs_->Cancel(a).ok());  // ends now
  clock_->Advance(kHour / 2);
  ASSERT_TRUE(jobs_->Cancel(b).ok());  // ends half an hour later
  jobs_->Tick();
  EXPECT_EQ(jobs_->List({}).size(), 3u) << "nothing has ended an hour ago yet";

  // An hour and a minute after a ended: a goes, from memory and from the store; b (ended 31
  // minutes ago) and the queued c stay.
  clock_->Advance(kHour / 2 + 60'000);
  jobs_->Tick();
  EXPECT_EQ(jobs_->Get(a).error().code, ErrorCode::kNotFound);
  EXPECT_TRUE(jobs_->Get(b).ok());
  EXPECT_EQ(jobs_->Get(c)->state, JobState::kQueued);
  EXPECT_EQ(Stored(), std::vector<int64_t>({2, 3}));

  // A queued job is never dropped, however old; b goes in its turn.
  clock_->Advance(10 * kHour);
  jobs_->Tick();
  EXPECT_EQ(jobs_->List({}).size(), 1u);
  EXPECT_EQ(jobs_->Get(c)->state, JobState::kQueued);
  EXPECT_EQ(Stored(), std::vector<int64_t>({3}));

  // c ends and, a day later, is dropped from memory; the store keeps it as the highest id, so
  // after a restart the next job is 4, not 1.
  ASSERT_TRUE(jobs_->Cancel(c).ok());
  clock_->Advance(24 * kHour);
  jobs_->Tick();
  EXPECT_TRUE(jobs_->List({}).empty());
  EXPECT_EQ(Stored(), std::vector<int64_t>({3}));
  Close();
  Open();
  jobs_->Tick();
  EXPECT_TRUE(jobs_->List({}).empty()) << "loaded, then dropped: it ended a day ago";
  EXPECT_EQ(Submit(), 4);
  EXPECT_EQ(Stored(), std::vector<int64_t>({3, 4}));
}

// Several controllers: one that does not lead follows what the leader stores: new jobs, their
// placements and ends (only what was stored since its last read), and drops ended ones after
// the retention time as the leader does.
TEST_F(JobsTest, AControllerThatDoesNotLeadFollowsTheLeadersJobs) {
  AddNodes({"n0"});
  JobService follower(*fleet_, *store_.jobs, clock_, 10 * 60'000, kHour);
  ASSERT_TRUE(follower.Load().ok());
  auto a = Submit(8, 10 * 60'000), b = Submit(8);
  ASSERT_TRUE(follower.Follow().ok());
  ASSERT_EQ(follower.List({}).size(), 2u);
  EXPECT_EQ(follower.Get(a.id)->state, JobState::kRunning);
  EXPECT_EQ(follower.Get(a.id)->placement.at(0).node, "n0");
  EXPECT_EQ(follower.Get(b.id)->state, JobState::kQueued);
  EXPECT_EQ(follower.Demand()["h100"].queued_jobs, 1);
  EXPECT_TRUE(follower.Busy("n0"));

  // a runs its ten minutes; b starts on its GPUs.
  clock_->Advance(10 * 60'000);
  jobs_->Tick();
  ASSERT_TRUE(follower.Follow().ok());
  EXPECT_EQ(follower.Get(a.id)->state, JobState::kCompleted);
  EXPECT_EQ(follower.Get(b.id)->state, JobState::kRunning);
  EXPECT_EQ(follower.Demand()["h100"].queued_jobs, 0);
  // A follower reads only what was stored since its last read (less a few seconds).
  ASSERT_TRUE(store_.jobs->ListJobsUpdatedSince(clock_->NowMs() + 1)->empty());
  ASSERT_EQ(store_.jobs->ListJobsUpdatedSince(clock_->NowMs())->size(), 2u);

  ASSERT_TRUE(jobs_->Cancel(b.id).ok());
  ASSERT_TRUE(follower.Follow().ok());
  EXPECT_EQ(follower.Get(b.id)->state, JobState::kCancelled);
  EXPECT_FALSE(follower.Busy("n0"));
  clock_->Advance(kHour + 60'000);
  ASSERT_TRUE(follower.Follow().ok());
  EXPECT_TRUE(follower.List({}).empty());  // both ended over an hour ago
}

}  // namespace
}  // namespace gpufleet::workload
