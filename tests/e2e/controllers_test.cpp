// Several controllers on one PostgreSQL: one leads (runs the engines), the others serve; the
// leader killed, or paused past its lease, another takes over and the old one does not act.

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <thread>

#include "harness.h"
#include "tests/support/postgres.h"

namespace gpufleet::e2e {
namespace {

namespace json = boost::json;

// The value of the /metrics line that starts with `series` ("name{labels}" or "name"); -1 when
// there is none.
double Metric(ControllerProcess& c, const std::string& series) {
  auto [status, v] = c.Call("GET", "/metrics");
  if (status != 200) return -1;
  std::string text(v.as_string());
  auto at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + series.size() + 2));
}

// The id of the controller `c` lists as the leader ("" for none), and its epoch.
std::pair<std::string, int64_t> Leader(ControllerProcess& c) {
  auto [status, v] = c.Call("GET", "/api/v1/controllers");
  if (status != 200) return {"", 0};
  for (const auto& item : v.at("items").as_array()) {
    if (item.at("leader").as_bool()) {
      return {std::string(item.at("id").as_string()), item.at("epoch").as_int64()};
    }
  }
  return {"", 0};
}

std::string Id(ControllerProcess& c) {
  std::string id = ReadFile(c.data_dir() + "/controller.id");
  while (!id.empty() && id.back() == '\n') id.pop_back();
  return id;
}

class Controllers : public ::testing::Test {
 protected:
  void SetUp() override {
    auto& pg = testing::SharedPostgres();
    ASSERT_TRUE(pg.ok()) << pg.error();
    url_ = pg.CreateDatabase("e2e_controllers");
    ASSERT_FALSE(url_.empty()) << pg.error();
    dir_ = TempDir("controllers");
    a_ =
        std::make_unique<ControllerProcess>(dir_ + "/a", std::vector<std::string>{"--store", url_});
    b_ =
        std::make_unique<ControllerProcess>(dir_ + "/b", std::vector<std::string>{"--store", url_});
    std::filesystem::create_directories(dir_ + "/a");
    a_->Start();
    // The second controller shares the first one's secret.key (the secrets the database keeps
    // are sealed under it) and uses its admin token.
    std::filesystem::create_directories(dir_ + "/b");
    for (const char* f : {"/secret.key", "/admin.token"}) {
      std::filesystem::copy_file(dir_ + "/a" + f, dir_ + "/b" + f);
    }
    b_->Start();
  }
  void TearDown() override {
    b_->Signal(SIGCONT);
    a_->Signal(SIGCONT);
    a_->Kill();
    b_->Kill();
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }
  std::string url_, dir_;
  std::unique_ptr<ControllerProcess> a_, b_;
};

TEST_F(Controllers, OneLeadsAndAnotherTakesOverWithinTwentySecondsOfAKill) {
  const std::string a = Id(*a_), b = Id(*b_);
  ASSERT_NE(a, b);
  // Both are listed, by either; the first one started leads, at epoch 1.
  ASSERT_TRUE(WaitFor(
      [&] {
        auto [s, v] = b_->Call("GET", "/api/v1/controllers");
        return s == 200 && v.at("items").as_array().size() == 2;
      },
      10'000));
  auto [status, v] = b_->Call("GET", "/api/v1/controllers");
  ASSERT_EQ(status, 200) << v;
  for (const auto& item : v.at("items").as_array()) {
    bool is_a = item.at("id").as_string() == a;
    EXPECT_EQ(item.at("leader").as_bool(), is_a) << item;
    EXPECT_EQ(item.at("epoch").as_int64(), is_a ? 1 : 0) << item;
    EXPECT_EQ(item.at("self").as_bool(), !is_a) << item;
    EXPECT_TRUE(item.at("live").as_bool()) << item;
    EXPECT_EQ(item.at("url").as_string(), "http://" + (is_a ? a_ : b_)->address()) << item;
    EXPECT_EQ(item.at("agents").as_int64(), 0) << item;
  }
  EXPECT_EQ(Leader(*a_), (std::pair<std::string, int64_t>{a, 1}));
  EXPECT_EQ(Metric(*a_, "gpufleet_leader{epoch=\"1\"}"), 1);
  EXPECT_EQ(Metric(*b_, "gpufleet_leader{epoch=\"1\"}"), 0);
  // The engines run on the leader only.
  ASSERT_TRUE(
      WaitFor([&] { return Metric(*a_, "gpufleet_task_runs_total{task=\"health\"}") > 0; }, 5'000));
  EXPECT_EQ(Metric(*b_, "gpufleet_task_runs_total{task=\"health\"}"), 0);
  auto cli = RunGpufleet({"--data-dir", b_->data_dir(), "controllers", "list"});
  ASSERT_EQ(cli.exit_code, 0) << cli.err;
  EXPECT_NE(cli.out.find(b + " (this one)"), std::string::npos) << cli.out;
  EXPECT_NE(cli.out.find("leader"), std::string::npos) << cli.out;
  // A write through the leader, acknowledged, then the leader dies.
  auto [made, token] =
      a_->Call("POST", "/api/v1/api-tokens", R"({"name": "kept", "role": "viewer"})");
  ASSERT_EQ(made, 201) << token;
  a_->Kill();
  auto killed = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitFor([&] { return Leader(*b_).first == b; }, 25'000, 200));
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  std::printf("new leader %.1f s after the leader's kill -9\n", took);
  EXPECT_LT(took, 20.0);
  EXPECT_EQ(Leader(*b_).second, 2);
  EXPECT_EQ(Metric(*b_, "gpufleet_leader{epoch=\"2\"}"), 1);
  EXPECT_EQ(Metric(*b_, "gpufleet_leader_changes_total"), 1);
  ASSERT_TRUE(
      WaitFor([&] { return Metric(*b_, "gpufleet_task_runs_total{task=\"health\"}") > 0; }, 5'000));
  auto [listed, tokens] = b_->Call("GET", "/api/v1/api-tokens");
  ASSERT_EQ(listed, 200);
  EXPECT_NE(json::serialize(tokens).find("\"kept\""), std::string::npos) << tokens;
  // The dead one is still listed, not live, until it has been silent for a day.
  ASSERT_TRUE(WaitFor(
      [&] {
        auto [s, list] = b_->Call("GET", "/api/v1/controllers");
        for (const auto& item : list.at("items").as_array()) {
          if (item.at("id").as_string() == a) return !item.at("live").as_bool();
        }
        return false;
      },
      20'000, 500));
}

// A leader paused (SIGSTOP) past its lease, then resumed, acts no more: by its own clock it
// knows its lease is over before any engine runs; it rejoins as a follower.
TEST_F(Controllers, ALeaderPausedPastItsLeaseStepsDownWithoutActing) {
  const std::string a = Id(*a_), b = Id(*b_);
  ASSERT_TRUE(WaitFor([&] { return Leader(*b_).first == a; }, 10'000));
  ASSERT_TRUE(
      WaitFor([&] { return Metric(*a_, "gpufleet_task_runs_total{task=\"health\"}") > 0; }, 5'000));
  a_->Signal(SIGSTOP);
  auto stopped = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitFor([&] { return Leader(*b_).first == b; }, 25'000, 200));
  std::printf("new leader %.1f s after the leader's SIGSTOP\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped).count());
  // b's engines run before a resumes.
  ASSERT_TRUE(
      WaitFor([&] { return Metric(*b_, "gpufleet_task_runs_total{task=\"health\"}") > 0; }, 5'000));
  a_->Signal(SIGCONT);
  // a answers, knows it does not lead, and its engines ran no more after it resumed.
  ASSERT_TRUE(WaitFor([&] { return Metric(*a_, "gpufleet_leader{epoch=\"2\"}") == 0; }, 10'000));
  double runs = Metric(*a_, "gpufleet_task_runs_total{task=\"health\"}");
  double rollouts = Metric(*a_, "gpufleet_task_runs_total{task=\"rollouts\"}");
  std::this_thread::sleep_for(std::chrono::seconds(3));
  EXPECT_EQ(Metric(*a_, "gpufleet_task_runs_total{task=\"health\"}"), runs);
  EXPECT_EQ(Metric(*a_, "gpufleet_task_runs_total{task=\"rollouts\"}"), rollouts);
  EXPECT_EQ(Leader(*a_), (std::pair<std::string, int64_t>{b, 2}));
  EXPECT_EQ(Metric(*a_, "gpufleet_leader_changes_total"), 1);
  EXPECT_NE(ReadFile(a_->data_dir() + "/controller-1.log").find("no longer leads"),
            std::string::npos);
}

// Agents given both controllers fail over to the live one: two simulators, each with its own
// first choice, spread the nodes over the two; each controller answers for every node (the
// change feed carries one's registrations and cordons to the other); the first one killed,
// its agents come to the second with their node tokens and go on sending telemetry there,
// and no node turns unreachable on the way.
TEST_F(Controllers, AgentsGivenBothFailOverWhenTheirControllerDies) {
  auto cli = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"--data-dir", a_->data_dir()});
    return RunGpufleet(args);
  };
  auto applied =
      cli({"apply", "-f", std::string(GPUFLEET_SOURCE_DIR) + "/tests/fixtures/e2e-fleet.yaml"});
  ASSERT_EQ(applied.exit_code, 0) << applied.err;
  auto made = cli({"tokens", "create", "--pool", "h100-quad"});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const std::string token = made.out.substr(0, made.out.find('\n'));
  const std::string url_a = "http://" + a_->address(), url_b = "http://" + b_->address();
  const int kEach = 10;
  auto sim = [&](const std::string& prefix, const std::string& controllers) {
    return std::make_unique<Process>(
        std::vector<std::string>{GPUFLEET_BIN, "sim", "--controller", controllers, "--join-token",
                                 token, "--prefix", prefix, "--workload", "off", "--nodes",
                                 std::to_string(kEach), "--model", "H100-SXM5-80GB",
                                 "--gpus-per-node", "4"},
        std::map<std::string, std::string>{}, dir_ + "/sim-" + prefix + ".log");
  };
  auto first_a = sim("fa", url_a + "," + url_b);
  auto first_b = sim("fb", url_b + "," + url_a);
  auto ready_on = [&](ControllerProcess& c) {
    auto [s, v] = c.Call("GET", "/api/v1/nodes?state=ready&limit=100");
    return s == 200 ? v.at("total").to_number<int64_t>() : -1;
  };
  // Each answers for all twenty: its own ten, and the other's from the store.
  ASSERT_TRUE(WaitFor([&] { return ready_on(*a_) == 2 * kEach && ready_on(*b_) == 2 * kEach; },
                      30'000, 200));
  EXPECT_EQ(Metric(*a_, "gpufleet_agents_connected"), kEach);
  EXPECT_EQ(Metric(*b_, "gpufleet_agents_connected"), kEach);

  // A cordon through a reaches b, whose agent the node's is, within a second or two.
  auto [cordoned, node] = a_->Call("POST", "/api/v1/nodes/fb-0001/cordon", R"({"reason":"x"})");
  ASSERT_EQ(cordoned, 200) << node;
  auto asked = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitFor(
      [&] {
        return b_->Call("GET", "/api/v1/nodes/fb-0001").second.at("state").as_string() ==
               "cordoned";
      },
      5'000, 20));
  std::printf(
      "a cordon through one controller seen by the other after %.0f ms\n",
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - asked).count());

  a_->Kill();
  auto killed = std::chrono::steady_clock::now();
  ASSERT_TRUE(
      WaitFor([&] { return Metric(*b_, "gpufleet_agents_connected") == 2 * kEach; }, 30'000, 200));
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  std::printf("%d agents of the killed controller reconnected to the other in %.1f s\n", kEach,
              took);
  EXPECT_LT(took, 30.0);
  // Their telemetry goes on there, and none of the nodes was declared unreachable.
  const int64_t after = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
  ASSERT_TRUE(WaitFor(
      [&] {
        auto [s, v] =
            b_->Call("GET", "/api/v1/query_range?metric=gpu_temp&node=fa-0003&start=-1m&step=1s");
        if (s != 200 || v.at("series").as_array().empty()) return false;
        auto& points = v.at("series").at(0).at("points").as_array();
        return !points.empty() && points.back().at(0).as_int64() > after;
      },
      15'000, 200));
  auto [listed, nodes] = b_->Call("GET", "/api/v1/nodes?limit=100");
  ASSERT_EQ(listed, 200);
  for (const auto& n : nodes.at("items").as_array()) {
    EXPECT_NE(n.at("state").as_string(), "unreachable") << n;
  }
  auto [events, history] = b_->Call("GET", "/api/v1/nodes/fa-0003/events");
  ASSERT_EQ(events, 200);
  EXPECT_EQ(json::serialize(history).find("unreachable"), std::string::npos) << history;
  EXPECT_EQ(b_->Call("GET", "/api/v1/nodes/fb-0001").second.at("state").as_string(), "cordoned");
}

}  // namespace
}  // namespace gpufleet::e2e
