// End to end on PostgreSQL: the demo, a database that goes away under load, and moving an
// installation from SQLite with `gpufleet store copy`. (The restart and bad-request tests run on
// both stores in e2e_test.cpp.)

#include "tests/support/postgres.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "fixture.h"

namespace gpufleet::e2e {
namespace {

testing::TestPostgres& Server() {
  auto& pg = testing::SharedPostgres();
  EXPECT_TRUE(pg.ok()) << pg.error();
  return pg;
}

class OnPostgres : public E2E {
 protected:
  std::vector<std::string> ControllerFlags() override {
    url_ = Server().CreateDatabase("e2e_outage");
    EXPECT_FALSE(url_.empty()) << Server().error();
    return {"--store", url_};
  }
  std::string url_;
};

TEST_F(OnPostgres, StoppingTheDatabaseForTenSecondsLosesNothingAcknowledged) {
  Apply();
  Sim(JoinToken("h100"), "pg", 2, "H100-SXM5-80GB", 8);
  ASSERT_TRUE(WaitState("pg-0001", "ready"));
  auto& pg = Server();
  std::vector<int64_t> acknowledged;
  int refused = 0, healthz_503 = 0;
  auto start = std::chrono::steady_clock::now();
  bool stopped = false, started = false;
  // Jobs are submitted four times a second for 16 s; the database is away from 2 s to 12 s.
  while (std::chrono::steady_clock::now() - start < std::chrono::seconds(16)) {
    auto t = std::chrono::steady_clock::now() - start;
    if (!stopped && t > std::chrono::seconds(2)) {
      ASSERT_TRUE(pg.Stop()) << pg.error();
      stopped = true;
    }
    if (stopped && !started && t > std::chrono::seconds(12)) {
      ASSERT_TRUE(pg.Start()) << pg.error();
      started = true;
    }
    auto [status, v] = controller_->Call(
        "POST", "/api/v1/jobs", R"({"team": "nlp", "project": "main", "pool": "h100", "gpus": 1})");
    if (status == 201) {
      acknowledged.push_back(v.at("id").as_int64());
    } else {
      EXPECT_EQ(status, 503) << v;  // not acknowledged, and said why
      EXPECT_NE(std::string(v.at("error").at("message").as_string()).find("job not submitted"),
                std::string::npos)
          << v;
      ++refused;
    }
    if (stopped && !started) {
      if (controller_->Call("GET", "/healthz").first == 503) ++healthz_503;
      // Reads go on from memory: the node registry, the pools, the token's last lookup.
      EXPECT_EQ(controller_->Call("GET", "/api/v1/nodes").first, 200);
      EXPECT_EQ(controller_->Call("GET", "/api/v1/pools").first, 200);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  ASSERT_TRUE(started);
  EXPECT_GT(refused, 10);  // the outage was seen ...
  EXPECT_GT(healthz_503, 0);
  EXPECT_GT(acknowledged.size(), 5u);  // ... and so was the recovery, without a restart
  EXPECT_EQ(controller_->Call("GET", "/healthz").first, 200);
  // Every acknowledged job survives a restart of the controller.
  ASSERT_TRUE(WaitFor([&] { return controller_->Call("GET", "/healthz").first == 200; }, 5000));
  std::this_thread::sleep_for(std::chrono::seconds(2));  // the retried writes of placements
  controller_->Stop();
  controller_->Start();
  for (int64_t id : acknowledged) {
    EXPECT_EQ(controller_->Call("GET", "/api/v1/jobs/" + std::to_string(id)).first, 200) << id;
  }
  EXPECT_TRUE(WaitState("pg-0001", "ready", 20000));
}

// What an installation looks like through the API, for comparing two stores.
std::map<std::string, json::value> Answers(ControllerProcess& c) {
  std::map<std::string, json::value> out;
  for (const char* path :
       {"/api/v1/clusters", "/api/v1/pools", "/api/v1/nodes", "/api/v1/gpus", "/api/v1/jobs",
        "/api/v1/audit?limit=500", "/api/v1/api-tokens", "/api/v1/join-tokens",
        "/api/v1/nodes/copy-0000/events", "/api/v1/events", "/api/v1/channels"}) {
    auto [status, v] = c.Call("GET", path);
    EXPECT_EQ(status, 200) << path << " " << v;
    // A loaded node's last_seen_at is the controller's start (a full heartbeat timeout to come
    // back in), not something the store kept.
    if (std::string_view(path) == "/api/v1/nodes") {
      for (auto& n : v.at("items").as_array()) n.as_object().erase("last_seen_at");
    }
    // A queued job's wait counts on until it starts: the time asked, not the store's.
    if (std::string_view(path) == "/api/v1/jobs") {
      for (auto& j : v.at("items").as_array()) {
        if (j.at("state") == "queued") j.as_object().erase("wait_s");
      }
    }
    // Each token list records the use of the token that asked for it.
    if (std::string_view(path) == "/api/v1/api-tokens") {
      for (auto& t : v.at("items").as_array()) t.as_object().erase("last_used_at");
    }
    out[path] = v;
  }
  return out;
}

TEST(StoreCopy, ADemoDatabaseMovedToPostgresGivesTheSameAnswers) {
  std::string dir = TempDir("store-copy");
  {
    ControllerProcess c(dir + "/data");
    c.Start();
    RunResult r = RunGpufleet({"--data-dir", dir + "/data", "apply", "-f", kFleet});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = RunGpufleet({"--data-dir", dir + "/data", "tokens", "create", "--pool", "h100"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::string token = r.out.substr(0, r.out.find('\n'));
    {
      Process sim({GPUFLEET_BIN, "sim", "--controller", c.address(), "--join-token", token,
                   "--prefix", "copy", "--workload", "off", "--nodes", "2", "--model",
                   "H100-SXM5-80GB", "--gpus-per-node", "8"},
                  {}, dir + "/sim.log");
      ASSERT_TRUE(WaitFor(
          [&] {
            auto [s, v] = c.Call("GET", "/api/v1/nodes?state=ready");
            return s == 200 && v.at("total").as_int64() == 2;
          },
          20000));
      ASSERT_EQ(c.Call("POST", "/api/v1/nodes/copy-0000/cordon", "{}").first, 200);
      ASSERT_EQ(c.Call("POST", "/api/v1/jobs",
                       R"({"team": "nlp", "project": "main", "pool": "h100", "gpus": 8})")
                    .first,
                201);
      ASSERT_EQ(c.Call("POST", "/api/v1/channels",
                       R"({"name": "ops", "type": "webhook", "url": "http://127.0.0.1:9/x"})")
                    .first,
                201);
    }
    // The agents are gone: once both nodes are unreachable, nothing changes by itself.
    ASSERT_TRUE(WaitFor(
        [&] {
          auto [s, v] = c.Call("GET", "/api/v1/nodes?state=unreachable");
          return s == 200 && v.at("total").as_int64() == 2;
        },
        20000));
    c.Stop();
  }
  std::string to = Server().CreateDatabase("e2e_copy");
  RunResult copy = RunGpufleet({"--data-dir", dir + "/data", "store", "copy", "--to", to});
  ASSERT_EQ(copy.exit_code, 0) << copy.err;
  EXPECT_NE(copy.out.find("counts verified"), std::string::npos) << copy.out;
  EXPECT_NE(copy.out.find("nodes                       2 rows"), std::string::npos) << copy.out;

  std::map<std::string, json::value> on_sqlite, on_postgres;
  {
    ControllerProcess c(dir + "/data");
    c.Start();
    on_sqlite = Answers(c);
    c.Stop();
  }
  {
    ControllerProcess c(dir + "/data", {"--store", to});
    c.Start();
    on_postgres = Answers(c);
    c.Stop();
  }
  for (const auto& [path, v] : on_sqlite) EXPECT_EQ(on_postgres[path], v) << path;
  EXPECT_EQ(on_postgres["/api/v1/nodes"].at("total").as_int64(), 2);

  // A second copy into the same database is refused, with one line, and changes nothing.
  RunResult again = RunGpufleet({"--data-dir", dir + "/data", "store", "copy", "--to", to});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.err.find("error: the target is not empty"), std::string::npos) << again.err;
  std::filesystem::remove_all(dir);
}

TEST(StoreCopy, ServeAndCopyRefuseADatabaseTheyCannotReach) {
  std::string dir = TempDir("store-unreachable");
  std::string bad = "postgresql://gpufleet@/nowhere?host=/nonexistent-socket-dir";
  RunResult serve =
      RunGpufleet({"--data-dir", dir, "serve", "--listen", "127.0.0.1:0", "--store", bad});
  EXPECT_NE(serve.exit_code, 0);
  EXPECT_EQ(serve.err.rfind("error: cannot open store postgresql://gpufleet@/nowhere", 0), 0u)
      << serve.err;
  EXPECT_EQ(std::count(serve.err.begin(), serve.err.end(), '\n'), 1) << serve.err;  // one line
  RunResult copy = RunGpufleet({"--data-dir", dir, "store", "copy", "--to", bad});
  EXPECT_EQ(copy.exit_code, 1);
  EXPECT_NE(copy.err.find("error: cannot open store"), std::string::npos) << copy.err;
  RunResult typo = RunGpufleet({"--data-dir", dir, "serve", "--store", "mysql://x/y"});
  EXPECT_NE(typo.exit_code, 0);
  EXPECT_NE(typo.err.find("unknown store URL"), std::string::npos) << typo.err;
  std::filesystem::remove_all(dir);
}

TEST(StoreCopy, AWrongPasswordIsOneLineThatDoesNotShowIt) {
  using testing::TestPostgres;
  std::string dir = TempDir("store-password");
  ASSERT_TRUE(Server().Sql(
      "postgres", std::string("CREATE DATABASE e2e_password OWNER ") + TestPostgres::kPasswordUser))
      << Server().error();
  const std::string user = TestPostgres::kPasswordUser;
  RunResult wrong = RunGpufleet({"--data-dir", dir, "serve", "--listen", "127.0.0.1:0", "--store",
                                 Server().Url("e2e_password", user + ":not-it")});
  EXPECT_NE(wrong.exit_code, 0);
  EXPECT_EQ(wrong.err.rfind("error: cannot open store postgresql://" + user + ":***@/", 0), 0u)
      << wrong.err;
  EXPECT_NE(wrong.err.find("password authentication failed"), std::string::npos) << wrong.err;
  EXPECT_EQ(wrong.err.find("not-it"), std::string::npos) << wrong.err;
  EXPECT_EQ(std::count(wrong.err.begin(), wrong.err.end(), '\n'), 1) << wrong.err;

  // The right one opens it.
  ControllerProcess c(
      dir + "/data",
      {"--store", Server().Url("e2e_password", user + ":" + TestPostgres::kPassword)});
  std::filesystem::create_directories(dir + "/data");
  c.Start();
  EXPECT_EQ(c.Call("GET", "/healthz").first, 200);
  c.Stop();
  std::filesystem::remove_all(dir);
}

TEST(Up, RunsTheExampleFleetOnPostgres) {
  std::string dir = TempDir("up-postgres");
  std::string url = Server().CreateDatabase("e2e_up");
  Process up({GPUFLEET_BIN, "--data-dir", dir, "up", "--listen", "127.0.0.1:0", "--fleet",
              std::string(GPUFLEET_SOURCE_DIR) + "/examples/fleet.yaml", "--log-level", "warn",
              "--store", url},
             {}, dir + "/up.log");
  ASSERT_TRUE(WaitFor(
      [&] { return ReadFile(dir + "/up.log").find("Press Ctrl-C") != std::string::npos; }, 30000))
      << ReadFile(dir + "/up.log");
  std::string addr = ReadFile(dir + "/controller.addr");
  addr.pop_back();
  std::string token = ReadFile(dir + "/admin.token");
  token.pop_back();
  cli::HttpClient client(addr, token);
  ASSERT_TRUE(WaitFor(
      [&] {
        auto r = client.Send("GET", "/api/v1/nodes?state=ready&limit=1");
        return r.ok() && json::parse(r->body).at("total").as_int64() == 94;
      },
      60000));
  auto health = client.Send("GET", "/healthz");
  ASSERT_TRUE(health.ok());
  EXPECT_EQ(json::parse(health->body).at("store").at("backend"), "postgresql");
  up.Signal(SIGINT);
  EXPECT_EQ(up.Wait(15000), 0) << ReadFile(dir + "/up.log");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpufleet::e2e
