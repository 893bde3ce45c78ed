// The rollout engine at 10,000 nodes (issue 26): the plan of a driver rollout at 10%
// unavailable with 5-minute actions, a virtual-time run of the same rollout that checks the
// plan's total (scripted agents answer after the action times; the clock is a manual one), and
// the engine's tick over 10,000 nodes with 5 running rollouts (the target: under 50 ms).

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>

#include "bench_fleet.h"
#include "lifecycle/rollout_service.h"

namespace gpufleet {
namespace {

constexpr int64_t kActionMs = 5 * 60'000;

// 10,000 one-GPU nodes in 10 pools of 1,000, in 5 clusters of 2 pools.
class Fleet10k : public BenchFleet10k {
 public:
  Fleet10k() : BenchFleet10k("gf-rollout-bench") {
    for (int p = 0; p < kPools; ++p) {
      std::string pool = "p" + std::to_string(p);
      std::string token = fleet_->CreateJoinToken(pool, 0, "bench").value().secret;
      for (int i = 0; i < kPerPool; ++i) {
        std::string name = pool + "-" + std::to_string(i);
        nodes_[name].join = token;
        Hello(name, "550.54.15");
      }
    }
    rollouts_ = std::make_unique<lifecycle::RolloutService>(*fleet_, nullptr, *store_.rollouts,
                                                            *store_.audit, clock_);
    lifecycle::RolloutHooks hooks;
    hooks.send = [this](const std::string& node, const proto::Command& cmd) {
      // An install answers after its 5 minutes; a reboot begins at once (Agents()).
      pending_.emplace(clock_->NowMs() + (cmd.action == "install-driver" ? kActionMs : 0),
                       std::make_pair(node, cmd));
      return Status{};
    };
    hooks.busy = [](const std::string&) { return false; };
    rollouts_->set_hooks(hooks);
  }
  ~Fleet10k() { rollouts_.reset(); }

  void Hello(const std::string& name, const std::string& driver) {
    Agent& a = nodes_[name];
    proto::Hello h;
    h.join_token = a.token.empty() ? a.join : "";
    h.node_token = a.token;
    h.facts.hostname = name;
    h.facts.driver_version = driver;
    Gpu g;
    g.uuid = "GPU-" + name;
    g.name = "NVIDIA L4";
    h.gpus.push_back(g);
    auto w = fleet_->OnHello(h, "127.0.0.1");
    if (w.ok() && !w->node_token.empty()) a.token = w->node_token;
    a.connection = fleet_->OnConnected(name);
  }

  // The scripted agents: an install answers after 5 minutes; a reboot takes the node away for
  // 5 minutes, and it comes back running what was installed.
  void Agents() {
    int64_t now = clock_->NowMs();
    while (!pending_.empty() && pending_.begin()->first <= now) {
      auto [node, cmd] = pending_.begin()->second;
      pending_.erase(pending_.begin());
      Agent& a = nodes_[node];
      if (cmd.action == "reboot") {
        fleet_->OnClosed(node, a.connection);
        back_.emplace(now + kActionMs, node);
        continue;
      }
      if (cmd.action == "install-driver") a.installed = cmd.args.at(0);
      rollouts_->OnCommandResult(node, {cmd.id, 0, cmd.action, true, "ok", 0, kActionMs});
    }
    while (!back_.empty() && back_.begin()->first <= now) {
      std::string node = back_.begin()->second;
      back_.erase(back_.begin());
      Hello(node, nodes_[node].installed);
    }
  }

  struct Agent {
    std::string join, token, installed = "550.54.15";
    uint64_t connection = 0;
  };
  std::unique_ptr<lifecycle::RolloutService> rollouts_;
  std::map<std::string, Agent> nodes_;
  std::multimap<int64_t, std::pair<std::string, proto::Command>> pending_;
  std::multimap<int64_t, std::string> back_;
};

lifecycle::RolloutRequest Request(const std::string& selector) {
  return lifecycle::ParseRolloutRequest(
             R"({"kind":"driver","target":"580.95.05","selector":)" + selector +
             R"(,"strategy":{"canary":"1%","confidence":"10m","batch":{"size":100,
             "growth":"exponential"},"max_unavailable":"10%"},
             "expect":{"drain":"0s","install":"5m","reboot":"5m"}})")
      .value();
}

// The plan of the whole fleet, and the virtual-time run it is checked against (counters in
// seconds: plan_s, run_s and their ratio).
void BM_RolloutPlan10k(benchmark::State& state) {
  Fleet10k f;
  auto req = Request(R"({"clusters":["c0","c1","c2","c3","c4"]})");
  lifecycle::RolloutPlan plan;
  for (auto _ : state) {
    plan = f.rollouts_->Plan(req).value();
    benchmark::DoNotOptimize(plan);
  }
  state.counters["nodes"] = plan.nodes;
  state.counters["stages"] = static_cast<double>(plan.stages.size());
  state.counters["plan_s"] = static_cast<double>(plan.expected_ms) / 1000.0;
  // The same rollout, run: a tick every 5 virtual seconds until it completes.
  auto r = f.rollouts_->Create(req, "bench", "").value();
  int64_t start = f.clock_->NowMs();
  for (int t = 0; t < 100'000; ++t) {
    f.rollouts_->Tick();
    f.Agents();
    auto now = f.rollouts_->Get(r.id).value();
    if (now.state == "completed" || now.state == "halted") break;
    f.clock_->Advance(5000);
  }
  auto done = f.rollouts_->Get(r.id).value();
  double run_s = static_cast<double>(done.ended_ms - start) / 1000.0;
  state.counters["run_s"] = run_s;
  state.counters["run_over_plan"] = run_s / (static_cast<double>(plan.expected_ms) / 1000.0);
  state.counters["completed"] = done.state == "completed" ? 1 : 0;
}
BENCHMARK(BM_RolloutPlan10k)->Unit(benchmark::kMillisecond)->Iterations(5);

// The tick with 5 rollouts of 2,000 nodes each under way (their first nodes in flight, waiting
// for answers), over the 10,000 nodes: what the controller pays every second.
void BM_RolloutTick10kFiveRollouts(benchmark::State& state) {
  Fleet10k f;
  for (int c = 0; c < 5; ++c) {
    (void)f.rollouts_->Create(Request(R"({"clusters":["c)" + std::to_string(c) + R"("]})"), "bench",
                              "");
  }
  for (int i = 0; i < 3; ++i) f.rollouts_->Tick();  // drains, installs sent
  for (auto _ : state) benchmark::DoNotOptimize(f.rollouts_->Tick());
}
BENCHMARK(BM_RolloutTick10kFiveRollouts)->Unit(benchmark::kMillisecond)->MinTime(2);

}  // namespace
}  // namespace gpufleet
