// End to end: the real controller, simulated and fake-NVML agents, and the CLI, on loopback.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <cctype>
#include <filesystem>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "fixture.h"
#include "proto/proto.h"
#include "tests/support/postgres.h"

namespace gpufleet::e2e {
namespace {

TEST_F(E2E, NodesRegisterAndMatchTheirPoolAndAMismatchIsFlagged) {
  Apply();
  std::string token = JoinToken("h100");
  Sim(token, "good", 3, "H100-SXM5-80GB", 8);
  Sim(token, "wrong", 1, "L4", 8);
  ASSERT_TRUE(WaitFor(
      [&] {
        auto [s, v] = controller_->Call("GET", "/api/v1/nodes?pool=h100");
        return s == 200 && v.at("total").as_int64() == 4;
      },
      20000));
  for (const char* n : {"good-0000", "good-0001", "good-0002"}) {
    ASSERT_TRUE(WaitState(n, "ready")) << n;
    EXPECT_TRUE(Node(n).at("simulated").as_bool());
  }
  ASSERT_TRUE(WaitState("wrong-0000", "degraded"));
  EXPECT_EQ(Node("wrong-0000").at("reason").as_string(),
            "pool h100 expects 8 x H100-SXM5-80GB, found 8 x L4");

  auto [status, gpus] = controller_->Call("GET", "/api/v1/gpus?pool=h100&limit=5000");
  ASSERT_EQ(status, 200);
  EXPECT_EQ(gpus.at("total").as_int64(), 32);
  std::set<std::string> uuids;
  for (const auto& g : gpus.at("items").as_array())
    uuids.insert(std::string(g.at("uuid").as_string()));
  EXPECT_EQ(uuids.size(), 32u);

  auto [fs, filtered] = controller_->Call("GET", "/api/v1/nodes?state=degraded");
  EXPECT_EQ(filtered.at("total").as_int64(), 1);
  auto paged = controller_->Call("GET", "/api/v1/nodes?limit=2&offset=1").second;
  EXPECT_EQ(paged.at("items").as_array().size(), 2u);
  EXPECT_EQ(paged.at("total").as_int64(), 4);

  auto list = Cli({"nodes", "list", "--state", "ready"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_NE(list.out.find("good-0002 (sim)"), std::string::npos) << list.out;
  EXPECT_EQ(list.out.find("wrong-0000"), std::string::npos);
  auto as_json = Cli({"-o", "json", "clusters", "list"});
  ASSERT_EQ(as_json.exit_code, 0);
  EXPECT_EQ(json::parse(as_json.out).at("items").as_array().size(), 2u);
}

TEST_F(E2E, AStoppedAgentTurnsUnreachableAndReadyAgain) {
  Apply();
  std::string token = JoinToken("h100");
  Process& sim = Sim(token, "flaky", 1, "H100-SXM5-80GB", 8);
  ASSERT_TRUE(WaitState("flaky-0000", "ready"));
  sim.Signal(SIGTERM);
  EXPECT_EQ(sim.Wait(10000), 0);
  ASSERT_TRUE(WaitState("flaky-0000", "unreachable", controller_->heartbeat_timeout_ms() + 5000));
  EXPECT_FALSE(Node("flaky-0000").at("connected").as_bool());
  Sim(token, "flaky", 1, "H100-SXM5-80GB", 8);
  ASSERT_TRUE(WaitState("flaky-0000", "ready"));
  auto events =
      controller_->Call("GET", "/api/v1/nodes/flaky-0000/events").second.at("items").as_array();
  ASSERT_GE(events.size(), 4u);
  EXPECT_EQ(events[0].at("from").as_string(), "unreachable");
  EXPECT_EQ(events[0].at("to").as_string(), "ready");
  EXPECT_EQ(events[1].at("to").as_string(), "unreachable");
  EXPECT_NE(std::string(events[1].at("reason").as_string()).find("no heartbeat"),
            std::string::npos);
}

// The tests that must hold on either store: SQLite in the data directory, or a new database on
// the test binary's PostgreSQL server (tests/support/postgres.h).
class Backends : public E2E, public ::testing::WithParamInterface<std::string> {
 protected:
  std::vector<std::string> ControllerFlags() override {
    if (GetParam() != "postgresql") return {};
    auto& pg = testing::SharedPostgres();
    EXPECT_TRUE(pg.ok()) << pg.error();
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    name = "e2e_" + name.substr(0, name.find('/'));
    for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? std::tolower(c) : '_';
    std::string url = pg.CreateDatabase(name.substr(0, 60));
    EXPECT_FALSE(url.empty()) << pg.error();
    return {"--store", url};
  }
};

TEST_P(Backends, ControllerRestartKeepsNodesGpusJobsTokensEventsAndAudit) {
  Apply();
  std::string token = JoinToken("h100");
  Sim(token, "keep", 2, "H100-SXM5-80GB", 8);
  ASSERT_TRUE(WaitState("keep-0001", "ready"));
  ASSERT_EQ(Cli({"nodes", "cordon", "keep-0000"}).exit_code, 0);
  auto gpus_before = controller_->Call("GET", "/api/v1/gpus?node=keep-0001").second.at("items");
  auto audit_before =
      controller_->Call("GET", "/api/v1/audit").second.at("items").as_array().size();
  auto [js, job] = controller_->Call(
      "POST", "/api/v1/jobs", R"({"team": "nlp", "project": "main", "pool": "h100", "gpus": 8})");
  ASSERT_EQ(js, 201) << job;
  auto [ts, viewer] =
      controller_->Call("POST", "/api/v1/api-tokens", R"({"name": "dash", "role": "viewer"})");
  ASSERT_EQ(ts, 201) << viewer;
  auto events_before = controller_->Call("GET", "/api/v1/nodes/keep-0000/events").second;
  // Without last_used_at, which each call moves on.
  auto tokens = [&] {
    auto items = controller_->Call("GET", "/api/v1/api-tokens").second.at("items");
    for (auto& t : items.as_array()) t.as_object().erase("last_used_at");
    return items;
  };
  auto tokens_before = tokens();
  audit_before = controller_->Call("GET", "/api/v1/audit").second.at("items").as_array().size();
  ASSERT_GE(audit_before, 5u);  // apply, join token, cordon, job, API token

  controller_->Stop();
  controller_->Start();
  // Newest first; the agent may already have reconnected, adding one: the old ones end the list.
  auto before = events_before.at("items").as_array();
  auto after =
      controller_->Call("GET", "/api/v1/nodes/keep-0000/events").second.at("items").as_array();
  ASSERT_GE(after.size(), before.size());
  ASSERT_FALSE(before.empty());
  EXPECT_TRUE(std::equal(before.begin(), before.end(), after.end() - before.size()));
  EXPECT_EQ(tokens(), tokens_before);
  auto kept = controller_->Call("GET", "/api/v1/jobs/" + std::to_string(job.at("id").as_int64()));
  EXPECT_EQ(kept.first, 200);
  EXPECT_EQ(kept.second.at("team"), "nlp");
  std::string vt(viewer.at("token").as_string());
  EXPECT_EQ(controller_->Call("GET", "/api/v1/nodes", "", &vt).first, 200);
  // Kept; or, when its agent is not back within the heartbeat timeout (1.5 s here; a loaded CI
  // machine once took longer), unreachable until it is, and cordoned again then (below).
  const std::string kept_state = State("keep-0000");
  EXPECT_TRUE(kept_state == "cordoned" || kept_state == "unreachable") << kept_state;
  EXPECT_EQ(controller_->Call("GET", "/api/v1/gpus?node=keep-0001").second.at("items"),
            gpus_before);
  auto audit = controller_->Call("GET", "/api/v1/audit").second.at("items").as_array();
  EXPECT_EQ(audit.size(), audit_before);
  bool saw_cordon = false;
  for (const auto& a : audit) {
    if (a.at("action").as_string() == "POST /api/v1/nodes/keep-0000/cordon") {
      saw_cordon = true;
      EXPECT_EQ(a.at("actor").as_string(), "bootstrap-admin");
      EXPECT_EQ(a.at("before").at("state").as_string(), "ready");
      EXPECT_EQ(a.at("after").at("state").as_string(), "cordoned");
    }
  }
  EXPECT_TRUE(saw_cordon);
  // The agents reconnect to the new controller with their node tokens.
  ASSERT_TRUE(WaitFor([&] { return Node("keep-0001").at("connected").as_bool(); }, 20000));
  EXPECT_EQ(State("keep-0001"), "ready");
  EXPECT_TRUE(WaitFor([&] { return State("keep-0000") == "cordoned"; }, 20000))
      << State("keep-0000");
}

TEST_P(Backends, ApiRefusesBadRequestsWithClearErrors) {
  Apply();
  std::string none;
  auto [s401, e401] = controller_->Call("GET", "/api/v1/nodes", "", &none);
  EXPECT_EQ(s401, 401);
  EXPECT_EQ(e401.at("error").at("code").as_string(), "unauthenticated");
  std::string wrong = "gfa_wrong";
  EXPECT_EQ(controller_->Call("GET", "/api/v1/nodes", "", &wrong).first, 401);
  EXPECT_EQ(controller_->Call("GET", "/healthz", "", &none).first, 200);

  auto [sv, viewer] =
      controller_->Call("POST", "/api/v1/api-tokens", R"({"name": "dash", "role": "viewer"})");
  ASSERT_EQ(sv, 201);
  std::string vt(viewer.at("token").as_string());
  EXPECT_EQ(controller_->Call("GET", "/api/v1/nodes", "", &vt).first, 200);
  auto [s403, e403] = controller_->Call("POST", "/api/v1/join-tokens", R"({"pool": "h100"})", &vt);
  EXPECT_EQ(s403, 403);
  EXPECT_NE(std::string(e403.at("error").at("message").as_string()).find("operator"),
            std::string::npos);
  EXPECT_EQ(controller_->Call("GET", "/api/v1/audit", "", &vt).first, 403);

  auto [s400, e400] = controller_->Call("POST", "/api/v1/join-tokens", R"({"pool": )");
  EXPECT_EQ(s400, 400);
  EXPECT_NE(std::string(e400.at("error").at("message").as_string()).find("malformed JSON"),
            std::string::npos);
  auto [st, et] = controller_->Call("POST", "/api/v1/join-tokens", R"({"pool": 42})");
  EXPECT_EQ(st, 400);
  EXPECT_EQ(et.at("error").at("message").as_string(), "field 'pool' must be a string");
  EXPECT_EQ(
      controller_->Call("POST", "/api/v1/join-tokens", R"({"pool": "h100", "colour": 1})").first,
      400);
  EXPECT_EQ(
      controller_->Call("POST", "/api/v1/api-tokens", R"({"name": "x", "role": "god"})").first,
      400);
  EXPECT_EQ(
      controller_->Call("POST", "/api/v1/join-tokens", R"({"pool": "h100", "ttl": "soon"})").first,
      400);
  EXPECT_EQ(controller_->Call("POST", "/api/v1/join-tokens", R"({"pool": "nope"})").first, 404);
  EXPECT_EQ(controller_->Call("GET", "/api/v1/nodes?limit=x").first, 400);
  EXPECT_EQ(controller_->Call("GET", "/api/v1/nodes?state=sleepy").first, 400);
  EXPECT_EQ(controller_->Call("GET", "/api/v1/nodes/ghost").first, 404);
  EXPECT_EQ(controller_->Call("POST", "/api/v1/nodes/ghost/cordon", "{}").first, 404);
  EXPECT_EQ(controller_->Call("DELETE", "/api/v1/nodes").first, 405);

  std::string big(5 << 20, 'x');
  auto [s413, e413] = controller_->Call("POST", "/api/v1/apply", big, nullptr, "application/yaml");
  EXPECT_EQ(s413, 413);
  EXPECT_EQ(e413.at("error").at("code").as_string(), "too_large");
  // The server is still fine after all of that.
  EXPECT_EQ(controller_->Call("GET", "/api/v1/clusters").first, 200);
  // Refused mutations by an authenticated caller are audited too.
  auto audit = controller_->Call("GET", "/api/v1/audit?limit=100").second.at("items").as_array();
  bool saw_403 = false;
  for (const auto& a : audit)
    saw_403 = saw_403 || (a.at("status").as_int64() == 403 && a.at("actor").as_string() == "dash");
  EXPECT_TRUE(saw_403);
}

INSTANTIATE_TEST_SUITE_P(Store, Backends, ::testing::Values("sqlite", "postgresql"),
                         [](const auto& info) { return info.param; });

TEST_F(E2E, BadFleetFileIsRefusedWholeAndChangesNothing) {
  Apply();
  std::string bad = dir_ + "/bad.yaml";
  std::string text = ReadFile(kFleet);
  text.replace(text.find("site: lab-b"), 11, "site: lab-c");      // a valid change...
  text.replace(text.find("gpu_model: L4"), 13, "gpu_model: L5");  // ...and an invalid one
  FILE* f = std::fopen(bad.c_str(), "w");
  std::fputs(text.c_str(), f);
  std::fclose(f);
  auto r = Cli({"apply", "-f", bad});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("bad.yaml:20: clusters[1].pools[0].gpu_model: unknown GPU model 'L5'"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line: " << r.err;
  EXPECT_EQ(controller_->Call("GET", "/api/v1/clusters/edge").second.at("site").as_string(),
            "lab-b");
  auto missing = Cli({"apply", "-f", dir_ + "/missing.yaml"});
  EXPECT_NE(missing.exit_code, 0);
  auto unknown = Cli({"nodes", "show", "ghost"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_EQ(unknown.err, "error: no node 'ghost' (HTTP 404)\n");
  auto usage = Cli({"nodes", "frobnicate"});
  EXPECT_EQ(usage.exit_code, 2);
  EXPECT_EQ(usage.err,
            "error: unknown command 'frobnicate' for 'gpufleet nodes' (see gpufleet "
            "nodes --help)\n");
  // A mistyped command or verb: the nearest one, exit 2 and one line; options and their values
  // before it are passed over.
  auto typo = Cli({"-o", "json", "nods", "list"});
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_EQ(typo.err,
            "error: unknown command 'nods' for 'gpufleet': did you mean 'nodes'? (see "
            "gpufleet --help)\n");
  auto verb = Cli({"alerts", "lst"});
  EXPECT_EQ(verb.exit_code, 2);
  EXPECT_NE(verb.err.find("did you mean 'list'? (see gpufleet alerts --help)"), std::string::npos)
      << verb.err;
  // A filter that names nothing in the fleet is an error that lists what there is.
  auto cluster = Cli({"nodes", "list", "--cluster", "nosuch"});
  EXPECT_EQ(cluster.exit_code, 1);
  EXPECT_EQ(cluster.err, "error: no cluster 'nosuch' (known: edge, train)\n");
  auto model = Cli({"gpus", "list", "--model", "H100"});
  EXPECT_EQ(model.exit_code, 1);
  EXPECT_EQ(model.err,
            "error: no GPU model 'H100' in the fleet (its pools have: H100-SXM5-80GB, "
            "L4)\n");
  EXPECT_EQ(Cli({"gpus", "list", "--pool", "h100", "--node", "ghost"}).err,
            "error: no node 'ghost' (HTTP 404)\n");
  EXPECT_EQ(Cli({"nodes", "list", "--pool", "h100-quad"}).exit_code, 0);  // known, if empty
  // Any other usage error points to the subcommand's help.
  auto value = Cli({"nodes", "list", "--cluster"});
  EXPECT_EQ(value.exit_code, 2);
  EXPECT_NE(value.err.find("(see gpufleet nodes list --help)"), std::string::npos) << value.err;
}

TEST_F(E2E, FakeNvmlAgentReportsExactlyTheScriptedGpusAndSurvivesALostGpu) {
  Apply();
  std::string token = JoinToken("h100-quad");
  std::string state_dir = dir_ + "/agent-state";
  std::vector<std::string> args{
      GPUFLEET_BIN,     "agent",
      "--controller",   controller_->address(),
      "--join-token",   token,
      "--backend",      "nvml",
      "--nvml-library", FAKE_NVML_PATH,
      "--hostname",     "dgx-07",
      "--state-dir",    state_dir,
      "--root",         std::string(GPUFLEET_SOURCE_DIR) + "/tests/fixtures/root"};
  std::map<std::string, std::string> env{{"FAKE_NVML_SCRIPT", kNvmlFixtures + "h100x4-lost.json"}};
  agents_.push_back(std::make_unique<Process>(args, env, dir_ + "/agent.log"));
  ASSERT_TRUE(WaitState("dgx-07", "unhealthy")) << ReadFile(dir_ + "/agent.log");
  auto node = Node("dgx-07");
  // The inventory's verdict comes first; the health cycle may already have added its reason.
  std::string reason(node.at("reason").as_string());
  EXPECT_EQ(reason.rfind("GPU 2: GPU_IS_LOST", 0), 0u) << reason;
  EXPECT_FALSE(node.at("simulated").as_bool());
  EXPECT_EQ(node.at("facts").at("backend").as_string(), "nvml");
  EXPECT_EQ(node.at("facts").at("driver_version").as_string(), "550.54.15");
  EXPECT_EQ(node.at("facts").at("cuda_driver_version").as_string(), "12.4");
  // From the fixture tree's var/lib/dpkg/status: 1.17.3-1, its upstream version.
  EXPECT_EQ(node.at("facts").at("container_toolkit").as_string(), "1.17.3");
  const auto& gpus = node.at("gpus").as_array();
  ASSERT_EQ(gpus.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(gpus[i].at("uuid").as_string(),
              "GPU-0f0e0d0c-0000-1111-2222-33334444555" + std::to_string(i));
    EXPECT_EQ(gpus[i].at("pci_bus_id").as_string().size(), 16u);
    EXPECT_EQ(gpus[i].at("model").as_string(), "H100-SXM5-80GB");
  }
  EXPECT_EQ(gpus[0].at("serial").as_string(), "1652223000001");
  EXPECT_EQ(gpus[1].at("mig_mode").as_string(), "enabled");
  EXPECT_TRUE(gpus[3].at("mig_mode").is_null());
  EXPECT_EQ(gpus[2].at("error").as_string(), "GPU_IS_LOST");
  EXPECT_EQ(gpus[2].at("memory_total_bytes").as_int64(), 0);

  // The agent carries on: still heartbeating well past the timeout.
  std::this_thread::sleep_for(
      std::chrono::milliseconds(controller_->heartbeat_timeout_ms() + 1000));
  EXPECT_TRUE(agents_.back()->running());
  EXPECT_EQ(State("dgx-07"), "unhealthy");
  EXPECT_TRUE(Node("dgx-07").at("connected").as_bool());

  // It kept its node credential: a restart without the join token gets back in.
  ASSERT_TRUE(std::filesystem::exists(state_dir + "/node.token"));
  agents_.back()->Signal(SIGTERM);
  EXPECT_EQ(agents_.back()->Wait(10000), 0);
  ASSERT_EQ(Cli({"tokens", "revoke",
                 controller_->Call("GET", "/api/v1/join-tokens")
                     .second.at("items")
                     .at(0)
                     .at("id")
                     .as_string()
                     .c_str()})
                .exit_code,
            0);
  std::vector<std::string> again{GPUFLEET_BIN, "agent",  "--controller",   controller_->address(),
                                 "--backend",  "nvml",   "--nvml-library", FAKE_NVML_PATH,
                                 "--hostname", "dgx-07", "--state-dir",    state_dir};
  std::map<std::string, std::string> healthy{{"FAKE_NVML_SCRIPT", kNvmlFixtures + "l4x1.json"}};
  agents_.push_back(std::make_unique<Process>(again, healthy, dir_ + "/agent2.log"));
  ASSERT_TRUE(WaitFor(
      [&] {
        auto n = Node("dgx-07");
        return n.at("gpus").as_array().size() == 1 && n.at("connected").as_bool();
      },
      15000))
      << ReadFile(dir_ + "/agent2.log");
  // One L4 in a pool of four H100s; the lost GPU's verdict clears at the next health cycle.
  EXPECT_TRUE(WaitState("dgx-07", "degraded", 5000)) << State("dgx-07");
}

TEST_F(E2E, AgentWithoutNvmlExitsWithOneClearLine) {
  auto r = RunGpufleet({"agent", "--controller", controller_->address(), "--join-token", "x",
                        "--nvml-library", "/nonexistent/libnvidia-ml.so.1"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("error: cannot load NVML (/nonexistent/libnvidia-ml.so.1)"),
            std::string::npos)
      << r.err;
}

// Twenty failed sign-ins from one address within a minute, and its unknown tokens are refused
// (429 with Retry-After) for the rest of the minute, while a valid token from the same address
// (behind the same NAT) always passes; both are counted. The scheme is case-insensitive, and
// the failures reach the audit log as one record per address with their count.
TEST_F(E2E, FailedSignInsAreRateLimitedPerAddressButValidTokensPass) {
  const std::string bad = "gfa_not-a-token";
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(controller_->Call("GET", "/api/v1/nodes", "", &bad).first, 401);
  }
  auto [status, metrics] = controller_->Call("GET", "/metrics");
  ASSERT_EQ(status, 200);
  EXPECT_NE(metrics.as_string().find("gpufleet_http_sign_in_failures_total 5\n"),
            std::string::npos);
  for (int i = 0; i < 15; ++i) {
    EXPECT_EQ(controller_->Call("GET", "/api/v1/nodes", "", &bad).first, 401);
  }
  std::string reply = RawHttp(controller_->address(),
                              "GET /api/v1/nodes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                              "gfa_still-wrong\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(reply.rfind("HTTP/1.1 429", 0), 0u) << reply;
  EXPECT_NE(reply.find("Retry-After: "), std::string::npos) << reply;
  EXPECT_NE(reply.find("too many failed sign-ins from 127.0.0.1"), std::string::npos) << reply;
  // A valid token is never refused, with the scheme in any case.
  EXPECT_EQ(controller_->Call("GET", "/api/v1/clusters").first, 200);
  reply = RawHttp(controller_->address(),
                  "GET /api/v1/clusters HTTP/1.1\r\nHost: x\r\nAuthorization: bearer  " +
                      controller_->admin_token() + "\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(reply.rfind("HTTP/1.1 200", 0), 0u) << reply;
  reply = RawHttp(controller_->address(),
                  "GET /api/v1/clusters HTTP/1.1\r\nHost: x\r\nAuthorization: BEARER " +
                      controller_->admin_token() + "\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(reply.rfind("HTTP/1.1 200", 0), 0u) << reply;
  auto [refused, body] = controller_->Call("GET", "/api/v1/clusters", "", &bad);
  EXPECT_EQ(refused, 429);
  EXPECT_EQ(body.at("error").at("code"), "too_many_requests");
  // Public routes are not refused.
  EXPECT_EQ(controller_->Call("GET", "/healthz").first, 200);
  // The failures are in the audit log once the minute's flush has run: at most one record
  // per address, with the count (listing the tokens runs it now).
  ASSERT_EQ(controller_->Call("GET", "/api/v1/api-tokens").first, 200);
  auto [astatus, audit] = controller_->Call("GET", "/api/v1/audit?action=sign-in&limit=100");
  ASSERT_EQ(astatus, 200) << audit;
  int records = 0;
  int64_t failures = 0;
  for (const auto& r : audit.at("items").as_array()) {
    if (r.at("action") != "sign-in failed") continue;
    ++records;
    EXPECT_EQ(r.at("target"), "sign-in/127.0.0.1");
    auto result = boost::json::parse(std::string(r.at("result").as_string()));
    failures += result.at("failures").as_int64();
  }
  EXPECT_EQ(records, 1) << audit;
  EXPECT_EQ(failures, 22) << audit;
}

// The first reply of a WebSocket at `target` of the plain controller at "127.0.0.1:PORT" to
// the message `text`.
std::string WebSocketReply(const std::string& address, const std::string& target,
                           const std::string& text) {
  namespace asio = boost::asio;
  namespace websocket = boost::beast::websocket;
  asio::io_context io;
  websocket::stream<asio::ip::tcp::socket> ws(io);
  const size_t colon = address.rfind(':');
  ws.next_layer().connect({asio::ip::make_address(address.substr(0, colon)),
                           static_cast<unsigned short>(std::stoi(address.substr(colon + 1)))});
  ws.handshake(address, target);
  ws.text(true);
  ws.write(asio::buffer(text));
  boost::beast::flat_buffer buf;
  ws.read(buf);
  return boost::beast::buffers_to_string(buf.data());
}

// The dashboard stream's token and an agent's join token count against the same per-address
// limit as the API's tokens: failures of all add up, then unknown credentials are refused on
// all three, while valid ones still pass.
TEST_F(E2E, WebSocketSignInsShareTheFailedSignInLimit) {
  Apply();
  const std::string join = JoinToken("h100");
  proto::Hello hello;
  hello.facts.hostname = "limited";
  hello.simulated = true;
  auto agent_hello = [&](const std::string& token) {
    hello.join_token = token;
    return WebSocketReply(controller_->address(), "/api/v1/agent", proto::Encode(hello));
  };
  const std::string addr = controller_->address();
  for (int i = 0; i < 10; ++i) {
    std::string reply = WebSocketReply(addr, "/api/v1/stream", R"({"token": "gfa_wrong"})");
    ASSERT_NE(reply.find(R"("type":"error")"), std::string::npos) << reply;
    if (i == 9) {
      auto [status, metrics] = controller_->Call("GET", "/metrics");
      ASSERT_EQ(status, 200);
      EXPECT_NE(metrics.as_string().find("gpufleet_http_sign_in_failures_total 19\n"),
                std::string::npos);
    }
    reply = agent_hello("gfj_wrong");
    ASSERT_NE(reply.find("unknown join token"), std::string::npos) << reply;
  }
  const std::string bad = "gfa_wrong";
  EXPECT_EQ(controller_->Call("GET", "/api/v1/clusters", "", &bad).first, 429);
  std::string reply = WebSocketReply(addr, "/api/v1/stream", R"({"token": "gfa_wrong"})");
  EXPECT_NE(reply.find("too many failed sign-ins from 127.0.0.1"), std::string::npos) << reply;
  reply = agent_hello("gfj_wrong");
  EXPECT_NE(reply.find("too_many_requests"), std::string::npos) << reply;
  // Valid credentials from the same address pass: the API's, the stream's, an agent's.
  EXPECT_EQ(controller_->Call("GET", "/api/v1/clusters").first, 200);
  reply = WebSocketReply(addr, "/api/v1/stream",
                         R"({"token": ")" + controller_->admin_token() + R"("})");
  EXPECT_NE(reply.find(R"("type":"hello")"), std::string::npos) << reply;
  reply = agent_hello(join);
  EXPECT_NE(reply.find(R"("type":"welcome")"), std::string::npos) << reply;
}

// A client given an https:// URL must not speak plain HTTP to it with the token in clear (it
// once did: the scheme was accepted and ignored). Here the URL leads to a plain listener, which
// records what each connection sends first and closes it: a TLS ClientHello, never a request.
TEST(Clients, AnHttpsUrlToAPlainListenerSendsNoCredential) {
  namespace asio = boost::asio;
  using tcp = asio::ip::tcp;
  asio::io_context io;
  tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), 0});
  std::mutex mu;
  std::vector<std::string> received;
  std::atomic<bool> closing{false};
  std::thread sink([&] {
    while (!closing) {
      tcp::socket socket(io);
      boost::system::error_code ec;
      acceptor.accept(socket, ec);
      if (ec || closing) continue;
      std::string first(16 * 1024, '\0');
      size_t n = socket.read_some(asio::buffer(first), ec);
      std::lock_guard lock(mu);
      received.push_back(first.substr(0, n));
    }
  });
  const std::string url = "https://127.0.0.1:" + std::to_string(acceptor.local_endpoint().port());
  std::string dir = TempDir("https-to-plain");
  RunResult cli = RunGpufleet({"--server", url, "nodes", "list"}, {{"GPUFLEET_TOKEN", "gfa_x"}});
  EXPECT_EQ(cli.exit_code, 1);
  EXPECT_NE(cli.err.find(url + ": TLS: the server closed the connection during the TLS handshake"),
            std::string::npos)
      << cli.err;
  EXPECT_EQ(std::count(cli.err.begin(), cli.err.end(), '\n'), 1) << cli.err;
  {
    Process agent({GPUFLEET_BIN, "agent", "--backend", "sim", "--controller", url, "--join-token",
                   "gfj_x", "--hostname", "n1"},
                  {}, dir + "/agent.log");
    Process sim({GPUFLEET_BIN, "sim", "--controller", url, "--join-token", "gfj_y", "--nodes", "1",
                 "--log-level", "info"},
                {}, dir + "/sim.log");
    for (const char* log : {"/agent.log", "/sim.log"}) {
      EXPECT_TRUE(WaitFor(
          [&] { return ReadFile(dir + log).find(": TLS: the server closed") != std::string::npos; },
          10000))
          << log << ": " << ReadFile(dir + log);
    }
  }
  closing = true;
  {
    tcp::socket wake(io);  // unblocks accept()
    boost::system::error_code ec;
    wake.connect(acceptor.local_endpoint(), ec);
  }
  sink.join();
  std::lock_guard lock(mu);
  EXPECT_GE(received.size(), 3u);
  for (const auto& bytes : received) {
    EXPECT_EQ(bytes.find("gfa_x"), std::string::npos);
    EXPECT_EQ(bytes.find("gfj_"), std::string::npos);
    EXPECT_EQ(bytes.find("GET "), std::string::npos);
    // A TLS handshake record, 0x16, or nothing (the wake-up connection).
    if (!bytes.empty()) {
      EXPECT_EQ(bytes[0], '\x16');
    }
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpufleet::e2e

namespace gpufleet::e2e {
namespace {

// The README's main job: `gpufleet up` loads examples/fleet.yaml, brings every simulated node
// to ready, runs the demo workload and the h200-sxm pool's autoscaler, prints where to look,
// and stops cleanly on Ctrl-C.
TEST(Up, RunsTheExampleFleetAndStopsOnCtrlC) {
  std::string dir = TempDir("up");
  Process up({GPUFLEET_BIN, "--data-dir", dir, "up", "--listen", "127.0.0.1:0", "--fleet",
              std::string(GPUFLEET_SOURCE_DIR) + "/examples/fleet.yaml", "--log-level", "warn"},
             {}, dir + "/up.log");
  ASSERT_TRUE(WaitFor(
      [&] { return ReadFile(dir + "/up.log").find("Press Ctrl-C") != std::string::npos; }, 30000))
      << ReadFile(dir + "/up.log");
  std::string log = ReadFile(dir + "/up.log");
  std::string addr = ReadFile(dir + "/controller.addr");
  addr.pop_back();
  EXPECT_NE(log.find("Dashboard and API:  http://" + addr + "/"), std::string::npos) << log;
  EXPECT_NE(log.find("Admin token:        " + dir + "/admin.token"), std::string::npos) << log;
  EXPECT_NE(log.find("94 simulated nodes with 492 GPUs"), std::string::npos) << log;
  EXPECT_NE(log.find("Grafana, promtool:  http://" + addr + "/prometheus"), std::string::npos);
  std::string token = ReadFile(dir + "/admin.token");
  token.pop_back();
  cli::HttpClient client(addr, token);
  // The Prometheus data source it prints answers Grafana's "Save & test".
  auto test = client.Send("GET", "/prometheus/api/v1/query?query=1%2B1");
  ASSERT_TRUE(test.ok());
  EXPECT_EQ(json::parse(test->body).at("data").at("result").at(1), "2") << test->body;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto r = client.Send("GET", "/api/v1/nodes?state=ready&limit=1");
        return r.ok() && json::parse(r->body).at("total").as_int64() == 94;
      },
      60000));
  auto clusters = json::parse(client.Send("GET", "/api/v1/clusters")->body);
  EXPECT_EQ(clusters.at("total").as_int64(), 5);
  // The demo workload runs by default: teams' jobs on the pools; h200-sxm is autoscaled.
  ASSERT_TRUE(WaitFor(
      [&] {
        auto r = client.Send("GET", "/api/v1/jobs?state=running&limit=1");
        return r.ok() && json::parse(r->body).at("total").as_int64() > 0;
      },
      30000));
  EXPECT_NE(log.find("Workload:           teams submit jobs"), std::string::npos) << log;
  auto scaled = json::parse(client.Send("GET", "/api/v1/scaling")->body);
  ASSERT_EQ(scaled.at("total").as_int64(), 1) << scaled;
  EXPECT_EQ(scaled.at("items").at(0).at("pool"), "h200-sxm");
  EXPECT_EQ(scaled.at("items").at(0).at("simulated"), true);
  // Autoscaling started once the pool's own 8 nodes had registered, so no decision saw an
  // empty pool and asked for nodes under their names (on a slow machine one did).
  auto events = json::parse(client.Send("GET", "/api/v1/pools/h200-sxm/scaling/events")->body);
  for (const auto& e : events.at("items").as_array()) {
    if (e.at("kind") != "scale_up") continue;
    for (const auto& n : e.at("nodes").as_array()) {
      EXPECT_GE(std::string(n.as_string()), "h200-sxm-0008") << e;
    }
  }
  auto page = client.Send("GET", "/");
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->status, 200);
  EXPECT_NE(page->body.find("input name=\"token\""), std::string::npos);
  up.Signal(SIGINT);
  EXPECT_EQ(up.Wait(15000), 0) << ReadFile(dir + "/up.log");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpufleet::e2e

namespace gpufleet::e2e {
namespace {

// The audit log through the CLI: filters, an export for a SIEM, the chain verified and pruned,
// failed sign-ins recorded; API tokens show a prefix and their last use, and rotate.
TEST_F(E2E, AuditIsFilteredExportedAndVerifiedAndTokensRotate) {
  Apply();
  JoinToken("h100");
  EXPECT_EQ(Cli({"tokens", "revoke", "tok-none"}).exit_code, 1);  // a refused change
  auto bad = RunGpufleet(
      {"--server", controller_->address(), "--token", "gfa_wrong", "nodes", "cordon", "n1"});
  EXPECT_EQ(bad.exit_code, 1);
  // Failed sign-ins reach the audit log a minute at a time, one record per address; listing
  // the tokens writes what is gathered (with the tokens' last use).
  ASSERT_EQ(Cli({"tokens", "list", "--api"}).exit_code, 0);

  auto errors = Cli({"-o", "json", "audit", "list", "--result", "error"});
  ASSERT_EQ(errors.exit_code, 0) << errors.err;
  auto items = json::parse(errors.out).at("items").as_array();
  ASSERT_EQ(items.size(), 2u) << errors.out;
  EXPECT_EQ(items[0].at("actor"), "unauthenticated");  // newest first
  EXPECT_EQ(items[0].at("target").as_string().rfind("sign-in/", 0), 0u);
  EXPECT_EQ(items[1].at("action"), "DELETE /api/v1/api-tokens/tok-none");
  auto applies = Cli({"-o", "json", "audit", "list", "--action", "APPLY", "--since", "-1h"});
  EXPECT_EQ(json::parse(applies.out).at("items").as_array().size(), 1u) << applies.out;
  EXPECT_EQ(Cli({"audit", "list", "--since", "yesterday"}).exit_code, 1);

  auto exported = Cli({"audit", "export"});
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  std::istringstream lines(exported.out);
  std::string line;
  int64_t last = 0, n = 0;
  while (std::getline(lines, line)) {
    auto record = json::parse(line);
    EXPECT_GT(record.at("id").to_number<int64_t>(), last);  // oldest first
    EXPECT_EQ(record.at("hash").as_string().size(), 64u);
    last = record.at("id").to_number<int64_t>();
    ++n;
  }
  EXPECT_GE(n, 4);

  auto verified = Cli({"audit", "verify"});
  EXPECT_EQ(verified.exit_code, 0) << verified.err;
  EXPECT_NE(verified.out.find("audit log verified: " + std::to_string(n) + " records chained"),
            std::string::npos)
      << verified.out;
  auto pruned = Cli({"audit", "prune", "--older-than", "1d"});
  EXPECT_EQ(pruned.exit_code, 0) << pruned.err;
  EXPECT_NE(pruned.out.find("pruned 0 records"), std::string::npos) << pruned.out;
  EXPECT_EQ(Cli({"audit", "prune", "--older-than", "1h"}).exit_code, 1);  // under a day
  EXPECT_EQ(Cli({"audit", "verify"}).exit_code, 0);

  // An API token: its prefix and last use in the list, and a rotation without grace.
  auto created = Cli({"tokens", "create", "--role", "viewer", "--name", "ci"});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  std::string secret = created.out.substr(0, created.out.find('\n'));
  auto as_ci = [&](const std::string& token) {
    return RunGpufleet({"--server", controller_->address(), "--token", token, "clusters", "list"})
        .exit_code;
  };
  EXPECT_EQ(as_ci(secret), 0);
  auto listed = Cli({"tokens", "list", "--api"});
  EXPECT_NE(listed.out.find(secret.substr(0, 8) + "…"), std::string::npos) << listed.out;
  EXPECT_EQ(listed.out.find(secret), std::string::npos);  // never the secret itself
  auto tokens = json::parse(Cli({"-o", "json", "tokens", "list", "--api"}).out);
  std::string id;
  for (const auto& t : tokens.at("items").as_array()) {
    if (t.at("name") == "ci") {
      id = std::string(t.at("id").as_string());
      EXPECT_FALSE(t.at("last_used_at").as_string().empty()) << t;
    }
  }
  ASSERT_FALSE(id.empty());
  auto rotated = Cli({"tokens", "rotate", id, "--grace", "0s"});
  ASSERT_EQ(rotated.exit_code, 0) << rotated.err;
  std::string fresh = rotated.out.substr(0, rotated.out.find('\n'));
  EXPECT_NE(rotated.err.find("the old secret no longer works"), std::string::npos) << rotated.err;
  EXPECT_EQ(as_ci(secret), 1);
  EXPECT_EQ(as_ci(fresh), 0);
  EXPECT_EQ(Cli({"tokens", "rotate", id, "--grace", "soon"}).exit_code, 1);
  // The same through the API, each answer checked against docs/openapi.yaml.
  auto [vs, v] = controller_->Call("GET", "/api/v1/audit/verify");
  EXPECT_EQ(vs, 200);
  EXPECT_TRUE(v.at("ok").as_bool()) << v;
  auto [rs, r] =
      controller_->Call("POST", "/api/v1/api-tokens/" + id + "/rotate", R"({"grace": "10m"})");
  EXPECT_EQ(rs, 200) << r;
  EXPECT_FALSE(r.at("previous_valid_until").as_string().empty());
  EXPECT_EQ(controller_->Call("GET", "/api/v1/api-tokens").first, 200);
  EXPECT_EQ(
      controller_->Call("GET", "/api/v1/audit?order=asc&after=1&target=token/&result=ok").first,
      200);
  EXPECT_EQ(controller_->Call("GET", "/api/v1/audit?order=asc&before=5").first, 400);
  EXPECT_EQ(controller_->Call("POST", "/api/v1/audit/prune", R"({"older_than": "400d"})").first,
            200);
}

}  // namespace
}  // namespace gpufleet::e2e

namespace gpufleet::e2e {
namespace {

// Opens `n` TCP connections to `address` ("127.0.0.1:PORT") that send nothing.
std::vector<boost::asio::ip::tcp::socket> IdleConnections(boost::asio::io_context& io,
                                                          const std::string& address, int n) {
  using tcp = boost::asio::ip::tcp;
  const size_t colon = address.rfind(':');
  tcp::endpoint at(boost::asio::ip::make_address(address.substr(0, colon)),
                   static_cast<unsigned short>(std::stoi(address.substr(colon + 1))));
  std::vector<tcp::socket> out;
  for (int i = 0; i < n; ++i) {
    out.emplace_back(io);
    out.back().connect(at);
    out.back().non_blocking(true);
  }
  return out;
}

// How many of `sockets` the other end has closed (a read says end of file, or reset).
int ClosedByServer(std::vector<boost::asio::ip::tcp::socket>& sockets) {
  int closed = 0;
  for (auto& s : sockets) {
    char byte;
    boost::system::error_code ec;
    s.read_some(boost::asio::buffer(&byte, 1), ec);
    if (ec && ec != boost::asio::error::would_block) ++closed;
  }
  return closed;
}

int64_t Metric(ControllerProcess& c, const std::string& name) {
  std::string page(c.Call("GET", "/metrics").second.as_string());
  auto at = page.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::stoll(page.substr(at + name.size() + 2));
}

// A thousand clients that connect and send nothing are closed by the header deadline, the API
// answering all the while; past --max-connections a new connection is closed at once.
TEST(Connections, IdleOnesAreClosedByTheHeaderDeadlineAndTheCapHolds) {
  rlimit lim{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &lim), 0);
  lim.rlim_cur = lim.rlim_max;
  setrlimit(RLIMIT_NOFILE, &lim);
  ASSERT_GE(lim.rlim_cur, 2500u);
  std::string dir = TempDir("connections");
  ControllerProcess c(dir, {"--header-timeout", "2s", "--max-connections", "1100"});
  c.Start();
  boost::asio::io_context io;
  auto idle = IdleConnections(io, c.address(), 1000);
  EXPECT_TRUE(WaitFor([&] { return Metric(c, "gpufleet_http_connections_open") >= 1000; }, 5000));
  EXPECT_EQ(c.Call("GET", "/api/v1/clusters").first, 200);  // served beside them
  EXPECT_TRUE(WaitFor([&] { return ClosedByServer(idle) == 1000; }, 10000))
      << ClosedByServer(idle) << " of 1000 closed";
  EXPECT_GE(Metric(c, "gpufleet_http_header_timeouts_total"), 1000);
  EXPECT_EQ(c.Call("GET", "/api/v1/clusters").first, 200);
  idle.clear();

  // Full: 1100 open, the next one is closed without an answer, then the deadline frees them.
  ASSERT_TRUE(WaitFor([&] { return Metric(c, "gpufleet_http_connections_open") <= 1; }, 5000));
  auto full = IdleConnections(io, c.address(), 1100);
  auto extra = IdleConnections(io, c.address(), 1);
  EXPECT_TRUE(WaitFor([&] { return ClosedByServer(extra) == 1; }, 1000));
  EXPECT_TRUE(WaitFor([&] { return ClosedByServer(full) == 1100; }, 10000));
  EXPECT_GE(Metric(c, "gpufleet_http_connections_refused_total"), 1);
  c.Stop();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpufleet::e2e
