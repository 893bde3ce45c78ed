// Remote write end to end, into real receivers on loopback: Debian's VictoriaMetrics and
// Prometheus (--web.enable-remote-write-receiver). Every sample gpufleet stores reaches both,
// through a receiver outage and a controller killed mid-stream, with no batch refused; a node
// decommissioned (out of the fleet) ends its series with staleness markers.

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "cli/client.h"
#include "fixture.h"
#include "model/telemetry.h"

namespace gpufleet::e2e {
namespace {

const char* kVictoriaMetrics = "/usr/bin/victoria-metrics";
const char* kPrometheus = "/usr/bin/prometheus";

unsigned short FreePort() {
  PageServer probe("");
  return probe.port();
}

// A Prometheus-compatible query API's vector answer: labels (sorted, less instance and job) ->
// value.
std::map<std::string, double> Vector(const json::value& v) {
  std::map<std::string, double> out;
  if (v.is_null()) return out;
  for (const auto& s : v.at("data").at("result").as_array()) {
    std::map<std::string, std::string> labels;
    for (const auto& [k, l] : s.at("metric").as_object()) {
      if (k != "instance" && k != "job") labels[std::string(k)] = std::string(l.as_string());
    }
    std::string key;
    for (const auto& [k, l] : labels) key += k + "=" + l + ",";
    out[key] = std::stod(std::string(s.at("value").at(1).as_string()));
  }
  return out;
}

class RemoteWrite : public E2E {
 protected:
  void SetUp() override {
    for (const char* bin : {kVictoriaMetrics, kPrometheus}) {
      if (!std::filesystem::exists(bin)) GTEST_SKIP() << bin << " is not installed";
    }
    work_ = TempDir("remote-write");
    vm_ = "127.0.0.1:" + std::to_string(FreePort());
    prom_ = "127.0.0.1:" + std::to_string(FreePort());
    StartVictoriaMetrics();
    std::ofstream(work_ + "/prometheus.yml") << "global: {scrape_interval: 1h}\n";
    prometheus_ = std::make_unique<Process>(
        std::vector<std::string>{kPrometheus, "--config.file=" + work_ + "/prometheus.yml",
                                 "--storage.tsdb.path=" + work_ + "/prom",
                                 "--web.listen-address=" + prom_,
                                 "--web.enable-remote-write-receiver", "--log.level=warn"},
        std::map<std::string, std::string>{}, work_ + "/prometheus.log");
    // Prometheus's receiver from the configuration file (with a name and basic auth, which it
    // ignores), VictoriaMetrics's from --remote-write.
    std::ofstream(work_ + "/controller.yaml")
        << "remote_write:\n"
           "  - url: http://" +
               prom_ +
               "/api/v1/write\n"
               "    name: prometheus\n"
               "    basic_auth: {username: gpufleet, password: not-checked}\n";
    E2E::SetUp();
  }
  void TearDown() override {
    E2E::TearDown();
    vm_process_.reset();
    prometheus_.reset();
    if (!HasFailure()) std::filesystem::remove_all(work_);
  }
  std::vector<std::string> ControllerFlags() override {
    return {"--remote-write", "http://" + vm_ + "/api/v1/write", "--config",
            work_ + "/controller.yaml"};
  }
  void StartVictoriaMetrics() {
    vm_process_ = std::make_unique<Process>(
        std::vector<std::string>{kVictoriaMetrics, "-httpListenAddr=" + vm_,
                                 "-storageDataPath=" + work_ + "/vm", "-retentionPeriod=100y",
                                 "-search.latencyOffset=0s", "-loggerLevel=WARN"},
        std::map<std::string, std::string>{}, work_ + "/vm.log");
  }
  // A query's answer from a receiver at `time` (Unix seconds); null when it fails.
  json::value Ask(const std::string& server, const std::string& query, int64_t time) {
    cli::HttpClient client(server, "");
    auto r = client.Send(
        "GET", "/api/v1/query?query=" + cli::UrlEncode(query) + "&time=" + std::to_string(time));
    if (!r.ok() || r->status != 200) return nullptr;
    return json::parse(r->body);
  }
  json::value Ours(const std::string& query, int64_t time) {
    auto [s, v] =
        controller_->Call("GET", "/prometheus/api/v1/query?query=" + cli::UrlEncode(query) +
                                     "&time=" + std::to_string(time));
    return s == 200 ? v : json::value(nullptr);
  }
  // Each receiver's state, by name.
  std::map<std::string, json::object> Receivers() {
    std::map<std::string, json::object> out;
    auto [s, v] = controller_->Call("GET", "/api/v1/remote-write");
    if (s != 200) return out;
    for (const auto& r : v.at("items").as_array()) {
      out[std::string(r.at("name").as_string())] = r.as_object();
    }
    return out;
  }
  // Every receiver has at most `pending` samples to send (those of the next read, taken every
  // 5 s, while agents stream; 0 once they stop).
  bool AllSent(int64_t pending = 0) {
    auto r = Receivers();
    if (r.size() != 2) return false;
    for (const auto& [name, o] : r) {
      if (o.at("samples_pending").as_int64() > pending) return false;
    }
    return true;
  }
  int64_t Dropped() {
    int64_t n = 0;
    for (const auto& [name, o] : Receivers()) n += o.at("samples_dropped").as_int64();
    return n;
  }
  std::string work_, vm_, prom_;
  std::unique_ptr<Process> vm_process_, prometheus_;
};

TEST_F(RemoteWrite, EverySampleReachesVictoriaMetricsAndPrometheusThroughAnOutageAndARestart) {
  const int64_t start_s = NowMs() / 1000;
  Apply();
  Sim(JoinToken("h100"), "rw", 2, "H100-SXM5-80GB", 8);
  Sim(JoinToken("l4"), "rl", 1, "L4", 1);
  ASSERT_TRUE(WaitState("rw-0001", "ready"));
  ASSERT_TRUE(WaitState("rl-0000", "ready"));
  auto count_in = [&](const std::string& server) {
    auto v = Vector(Ask(server, "count(DCGM_FI_DEV_GPU_TEMP)", NowMs() / 1000));
    return v.empty() ? 0.0 : v.begin()->second;
  };
  ASSERT_TRUE(WaitFor([&] { return count_in(vm_) == 17 && count_in(prom_) == 17; }, 30000))
      << ReadFile(work_ + "/vm.log") << ReadFile(work_ + "/prometheus.log");
  auto receivers = Receivers();
  ASSERT_EQ(receivers.size(), 2u);
  EXPECT_EQ(receivers["prometheus"].at("url").as_string(), "http://" + prom_ + "/api/v1/write");
  EXPECT_TRUE(receivers.count(vm_ + "/api/v1/write"));
  std::this_thread::sleep_for(std::chrono::seconds(20));

  // VictoriaMetrics stops for 30 s: the samples wait in the queue, sent again with backoff.
  vm_process_->Signal(SIGTERM);
  ASSERT_GE(vm_process_->Wait(20000), 0);
  std::this_thread::sleep_for(std::chrono::seconds(30));
  auto during = Receivers()[vm_ + "/api/v1/write"];
  EXPECT_EQ(during.at("state").as_string(), "retrying");
  EXPECT_GT(during.at("samples_pending").as_int64(), 30 * 17 * 15);  // 30 s of 17 GPUs
  EXPECT_NE(during.at("last_error").as_string(), "");
  auto [ms, metrics] = controller_->Call("GET", "/metrics");
  ASSERT_EQ(ms, 200);
  EXPECT_NE(metrics.as_string().find("gpufleet_remote_write_samples_pending{receiver=\"" + vm_),
            std::string::npos);
  StartVictoriaMetrics();
  // Caught up: less than 7 s of 17 GPUs' 27 fields left.
  ASSERT_TRUE(WaitFor([&] { return AllSent(7 * 17 * 27); }, 60000)) << ReadFile(work_ + "/vm.log");
  EXPECT_EQ(Dropped(), 0);
  std::this_thread::sleep_for(std::chrono::seconds(10));

  // The controller killed mid-stream and started again: it goes on from each receiver's
  // cursor, and the agents send what it had not acknowledged.
  controller_->Kill();
  std::this_thread::sleep_for(std::chrono::seconds(3));
  controller_->Start();
  ASSERT_TRUE(WaitFor([&] { return Receivers().size() == 2; }, 20000));
  std::this_thread::sleep_for(std::chrono::seconds(25));

  // A node is decommissioned: it leaves the fleet, and its series end with staleness markers.
  auto [ds, dv] =
      controller_->Call("POST", "/api/v1/nodes/rl-0000/actions", R"({"action": "decommission"})");
  ASSERT_EQ(ds / 100, 2) << dv;
  ASSERT_TRUE(WaitFor(
      [&] { return State("rl-0000") == "decommissioning" || State("rl-0000") == "retired"; },
      30000))
      << State("rl-0000");
  std::this_thread::sleep_for(std::chrono::seconds(8));  // the writer reads the fleet each 5 s
  // Every agent stops, so that every store holds the same samples.
  for (auto& a : agents_) a->Signal(SIGTERM);
  for (auto& a : agents_) a->Wait(10000);
  ASSERT_TRUE(WaitFor([&] { return AllSent(); }, 60000));
  EXPECT_EQ(Dropped(), 0);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const int64_t at = NowMs() / 1000;
  const std::string window = "[" + std::to_string(at - start_s + 60) + "s]";

  // Every field, every series: the same number of samples in gpufleet and in each receiver. The
  // decommissioned node has left the fleet, whose series gpufleet's API shows: each receiver
  // keeps what was sent of it before it left.
  double samples = 0, series_compared = 0;
  auto compare = [&](const std::string& q, const std::string& receiver, const std::string& who) {
    auto ours = Vector(Ours(q, at)), theirs = Vector(Ask(receiver, q, at));
    size_t departed = 0;
    for (const auto& [series, n] : theirs) {
      if (series.find("Hostname=rl-0000,") == std::string::npos) continue;
      EXPECT_EQ(ours.count(series), 0u) << who << ": " << q << " " << series;
      EXPECT_GT(n, 30) << who << ": " << q << " " << series;
      ++departed;
    }
    for (const auto& [series, n] : ours) samples += n;
    series_compared += static_cast<double>(ours.size());
    EXPECT_EQ(ours.size() + departed, theirs.size()) << who << ": " << q;
    for (const auto& [series, n] : ours) {
      EXPECT_EQ(theirs[series], n) << who << ": " << q << " " << series;
    }
    return ours.size();
  };
  int fields = 0;
  for (const auto& f : Fields()) {
    std::string name =
        f.dcgm_name.empty() ? "gpufleet_gpu_" + std::string(f.name) : std::string(f.dcgm_name);
    std::string q = "count_over_time(" + name + window + ")";
    if (compare(q, vm_, "VictoriaMetrics") == 0) continue;  // not reported by simulated GPUs
    compare(q, prom_, "Prometheus");
    ++fields;
  }
  EXPECT_GE(fields, 15);
  std::printf("remote write: %.0f samples of %.0f series compared (each receiver), %s of history\n",
              samples / 2, series_compared / 2, window.c_str());
  auto util = Vector(Ours("count_over_time(DCGM_FI_DEV_GPU_UTIL" + window + ")", at));
  ASSERT_EQ(util.size(), 16u);  // rw-0000 and rw-0001's, rl-0000 having left
  for (const auto& [series, n] : util) EXPECT_GT(n, 60) << series;  // over a minute each

  // Prometheus refused no batch (a 400 is what an out-of-order or duplicate sample costs).
  cli::HttpClient prom(prom_, "");
  auto pm = prom.Send("GET", "/metrics");
  ASSERT_TRUE(pm.ok());
  EXPECT_EQ(pm->body.find("code=\"400\",handler=\"/api/v1/write\""), std::string::npos);
  EXPECT_NE(pm->body.find("code=\"204\",handler=\"/api/v1/write\""), std::string::npos);

  // The decommissioned node's series ended: Prometheus answers nothing for it now, though its
  // samples are there (counted above).
  auto gone = Ask(prom_, "DCGM_FI_DEV_GPU_TEMP{Hostname=\"rl-0000\"}", at - 1);
  ASSERT_FALSE(gone.is_null());
  EXPECT_TRUE(gone.at("data").at("result").as_array().empty()) << gone;
  auto kept = Ask(prom_, "count(DCGM_FI_DEV_GPU_TEMP{Hostname=~\"rw-.*\"})", at - 1);
  EXPECT_EQ(Vector(kept).begin()->second, 16);
}

}  // namespace
}  // namespace gpufleet::e2e
