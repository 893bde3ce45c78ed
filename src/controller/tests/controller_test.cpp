// The controller's wiring: what Start() starts and what it leaves to its caller.

#include "controller/controller.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <boost/json.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <thread>

#include "net/http_client.h"
#include "store/store.h"
#include "tests/support/temp_dir.h"

namespace gpufleet {
namespace {

// The pool b200 with the given lines of its scaling block.
std::string Fleet(const std::string& scaling) {
  return R"(apiVersion: gpufleet/v1
kind: Fleet
teams:
  - {name: t0, projects: [main]}
  - {name: t1, projects: [main]}
  - {name: t2, projects: [main]}
clusters:
  - name: burst
    type: training
    site: lab
    pools:
      - name: b200
        gpu_model: H100-SXM5-80GB
        gpus_per_node: 8
        scaling:
)" + scaling +
         R"(          actuator: {type: command, provision: "true", deprovision: "true"}
)";
}

// The pool's scale events' kinds, newest first, read from the controller's own SQLite file.
std::vector<std::string> EventKinds(const std::string& dir) {
  auto db = store::Open("sqlite:" + dir + "/gpufleet.db");
  EXPECT_TRUE(db.ok()) << db.error().message;
  std::vector<std::string> kinds;
  if (!db.ok()) return kinds;
  auto events = db.value().scaling->ListScaleEvents("b200", 100);
  EXPECT_TRUE(events.ok());
  for (const auto& e : events.value()) {
    kinds.emplace_back(boost::json::parse(e.doc).at("kind").as_string());
  }
  return kinds;
}

// `gpufleet up` sets its pools' policies before their nodes register. With defer_scaling no
// decision is made until StartScaling(): a decision before it would see an empty pool and ask
// for nodes the pool already has. Here the pool has no nodes at all, so the first decision
// asks for its minimum of 2 at once.
TEST(Controller, DeferredScalingDecidesNothingUntilStartScaling) {
  const gpufleet::testing::TempDir dir_tmp("gpufleet-controller-test");
  const std::string dir = dir_tmp.path();
  ControllerOptions o;
  o.data_dir = dir;
  o.listen = "127.0.0.1:0";
  o.heartbeat_timeout_ms = 400;  // the monitor, which makes the decisions, runs every 100 ms
  o.defer_scaling = true;
  {
    Controller c(o);
    ASSERT_TRUE(c.Start().ok());
    ASSERT_TRUE(
        c.ApplyFleetYaml(
             Fleet("          min_nodes: 2\n          max_nodes: 4\n          interval: 1s\n"),
             "fleet.yaml")
            .ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // 15 monitor passes
    EXPECT_EQ(EventKinds(dir), std::vector<std::string>{"policy"}) << "no decision yet";
    c.StartScaling();
    std::vector<std::string> kinds;
    for (int i = 0; i < 100 && kinds.size() < 2; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      kinds = EventKinds(dir);
    }
    ASSERT_EQ(kinds.size(), 2u);
    EXPECT_EQ(kinds[0], "scale_up") << "the first decision, once started";
    c.Stop();
  }
}

// A tune replays the pool's past under 199 settings, which takes seconds on a long history. It
// runs on the server's worker thread, not on an I/O thread: with a single I/O thread, a health
// check sent while a tune runs is still answered at once. And a stop does not wait for it.
TEST(Controller, ATuneRunsOffTheIoThreadAndAStopCancelsIt) {
  const gpufleet::testing::TempDir dir_tmp("gpufleet-controller-tune");
  const std::string dir = dir_tmp.path();
  ControllerOptions o;
  o.data_dir = dir;
  o.listen = "127.0.0.1:0";
  o.threads = 1;
  o.defer_scaling = true;  // no nodes asked for: the jobs stay queued
  Controller c(o);
  ASSERT_TRUE(c.Start().ok());
  // A decision a minute, as the policy's default: the replay's ticks are a minute apart.
  ASSERT_TRUE(c.ApplyFleetYaml(Fleet("          max_nodes: 100\n"), "fleet.yaml").ok());
  std::ifstream token_file(c.admin_token_path());
  std::string token;
  std::getline(token_file, token);
  auto call = [&](const std::string& method, const std::string& path, const std::string& body,
                  int64_t timeout_ms = 120'000) {
    net::HttpCall h;
    h.method = method;
    h.url = "http://" + c.address() + path;
    h.body = body;
    h.headers = {{"Authorization", "Bearer " + token}, {"Content-Type", "application/json"}};
    h.timeout_ms = timeout_ms;
    return net::Send(h);
  };
  // Queued jobs with a duration: each counts in the replay with it.
  constexpr int kJobs = 400;
  auto submitting = std::chrono::steady_clock::now();
  for (int i = 0; i < kJobs; ++i) {
    char body[160];
    std::snprintf(
        body, sizeof body,
        R"({"team": "t%d", "project": "main", "pool": "b200", "gpus": %d, "duration": "%dm"})",
        i % 3, 1 << (i % 3), 5 + i % 90);
    auto r = call("POST", "/api/v1/jobs", body);
    ASSERT_TRUE(r.ok()) << r.error().message;
    ASSERT_EQ(r->status, 201) << r->body;
  }
  std::chrono::duration<double> submitted = std::chrono::steady_clock::now() - submitting;
  std::atomic<bool> tuned{false};
  auto started = std::chrono::steady_clock::now();
  auto tune = std::async(std::launch::async, [&] {
    auto r = call("POST", "/api/v1/pools/b200/scaling/tune", "{}");
    tuned = true;
    return r;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the tune has been read
  ASSERT_FALSE(tuned) << "the tune took under 100 ms: too short a history to tell";
  auto health = call("GET", "/healthz", "");
  ASSERT_TRUE(health.ok()) << health.error().message;
  EXPECT_EQ(health->status, 200);
  EXPECT_FALSE(tuned) << "the health check waited for the tune";
  auto t = tune.get();
  std::chrono::duration<double> took = std::chrono::steady_clock::now() - started;
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(t->status, 200) << t->body;
  EXPECT_EQ(boost::json::parse(t->body).at("jobs"), kJobs) << t->body;
  std::printf("%d jobs submitted in %.2f s; their tune took %.2f s\n", kJobs, submitted.count(),
              took.count());

  // Stopping the controller cancels a tune under way rather than waiting for it.
  auto again = std::async(std::launch::async, [&] {
    return call("POST", "/api/v1/pools/b200/scaling/tune", "{}", 5000);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto stopping = std::chrono::steady_clock::now();
  c.Stop();
  std::chrono::duration<double> stop_took = std::chrono::steady_clock::now() - stopping;
  EXPECT_LT(stop_took.count(), took.count() / 2) << "the stop waited for the tune";
  auto cut = again.get();
  // A request under way is answered before the server stops: the cancelled tune's 503.
  ASSERT_TRUE(cut.ok()) << "no answer: " << cut.error().message;
  EXPECT_EQ(cut->status, 503) << cut->body;
  // A stopped controller refuses a new connection at once.
  auto refused_at = std::chrono::steady_clock::now();
  auto refused = call("GET", "/healthz", "", 3000);
  std::chrono::duration<double> refused_took = std::chrono::steady_clock::now() - refused_at;
  EXPECT_FALSE(refused.ok()) << refused->status;
  EXPECT_LT(refused_took.count(), 1.0) << "the connection waited in the listen backlog";
}

// A data directory and a SQLite file each serve one controller: a second is refused at start
// with a message that says why and what to do, and the first goes on. Once the first stops,
// the same directory starts again.
TEST(Controller, ASecondControllerOnOneDataDirOrSqliteFileIsRefused) {
  const gpufleet::testing::TempDir dir_tmp("gpufleet-controller-lock");
  const std::string dir = dir_tmp.path();
  ControllerOptions o;
  o.data_dir = dir;
  o.listen = "127.0.0.1:0";
  Controller first(o);
  ASSERT_TRUE(first.Start().ok());

  Controller same_dir(o);
  Status s = same_dir.Start();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kConflict);
  EXPECT_NE(s.error().message.find("another controller is running on the data directory " + dir),
            std::string::npos)
      << s.error().message;
  EXPECT_NE(s.error().message.find("in use by process " + std::to_string(::getpid())),
            std::string::npos)
      << s.error().message;

  ControllerOptions other = o;
  other.data_dir = dir + "/other";
  other.store_url = "sqlite:" + dir + "/gpufleet.db";  // the first one's store
  Controller same_db(other);
  s = same_db.Start();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("another controller is running on the SQLite store " + dir +
                                   "/gpufleet.db: SQLite serves one controller"),
            std::string::npos)
      << s.error().message;

  net::HttpCall h;
  h.method = "GET";
  h.url = "http://" + first.address() + "/healthz";
  auto alive = net::Send(h);
  ASSERT_TRUE(alive.ok());
  EXPECT_EQ(alive->status, 200) << "the first controller goes on";

  first.Stop();
  Controller again(o);
  EXPECT_TRUE(again.Start().ok()) << "a stopped controller's locks are free";
  again.Stop();
}

}  // namespace
}  // namespace gpufleet
