// The Prometheus query API end to end, against real peers on loopback: Debian's promtool reads
// gpufleet at /prometheus with the token as the basic-auth password, and Debian's Prometheus
// scrapes the same controller's /metrics so that the same PromQL can be run on both.

#include <sys/wait.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "cli/client.h"
#include "common/clock.h"
#include "fixture.h"

namespace gpufleet::e2e {
namespace {

const char* kPrometheus = "/usr/bin/prometheus";
const char* kPromtool = "/usr/bin/promtool";

class Prometheus : public E2E {
 protected:
  // Two H100 nodes of 8 GPUs in train, one L4 node in edge.
  void StartFleet() {
    Apply();
    Sim(JoinToken("h100"), "pm", 2, "H100-SXM5-80GB", 8);
    Sim(JoinToken("l4"), "pe", 1, "L4", 1);
    ASSERT_TRUE(WaitState("pm-0001", "ready"));
    ASSERT_TRUE(WaitState("pe-0000", "ready"));
    // Values for every GPU, and a health cycle's view of them.
    ASSERT_TRUE(WaitFor([&] { return Count("count(DCGM_FI_DEV_GPU_TEMP)") == 17; }, 20000));
    ready_ms_ = NowMs();
  }
  int64_t ready_ms_ = 0;  // when every GPU had values
  // The single value of a query's answer; -1 when it has none.
  double Count(const std::string& query, const std::string* token = nullptr) {
    auto [s, v] = Query(query, token);
    if (s != 200 || v.at("data").at("result").as_array().size() != 1) return -1;
    return std::stod(std::string(v.at("data").at("result").at(0).at("value").at(1).as_string()));
  }
  std::pair<int, json::value> Query(const std::string& query, const std::string* token = nullptr) {
    return controller_->Call("GET", "/prometheus/api/v1/query?query=" + cli::UrlEncode(query), "",
                             token);
  }
  // Runs a shell command; its exit code and output.
  std::pair<int, std::string> Shell(const std::string& command) {
    std::string out = dir_ + "/shell.txt";
    int rc = std::system((command + " > " + out + " 2>&1").c_str());
    return {rc == -1 ? -1 : WEXITSTATUS(rc), ReadFile(out)};
  }
  std::string PromtoolUrl() {
    return "http://viewer:" + controller_->admin_token() + "@" + controller_->address() +
           "/prometheus";
  }
};

std::string Base64(const std::string& in) {
  static const char* kDigits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : in) {
    acc = (acc << 8) | c;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out += kDigits[(acc >> bits) & 63];
    }
  }
  if (bits > 0) out += kDigits[(acc << (6 - bits)) & 63];
  while (out.size() % 4) out += '=';
  return out;
}

// labels (less Prometheus's instance and job) -> value, of a vector answer.
std::map<std::string, double> Vector(const json::value& v) {
  std::map<std::string, double> out;
  for (const auto& r : v.at("data").at("result").as_array()) {
    std::string key;
    for (const auto& [k, val] : r.at("metric").as_object()) {
      if (k == "instance" || k == "job") continue;
      key += std::string(k) + "=" + std::string(val.as_string()) + ",";
    }
    out[key] = std::stod(std::string(r.at("value").at(1).as_string()));
  }
  return out;
}

TEST_F(Prometheus, PromtoolAndPrometheusGetTheSameSeriesAndValues) {
  for (const char* bin : {kPrometheus, kPromtool}) {
    if (!std::filesystem::exists(bin)) {
      GTEST_SKIP() << "needs Debian's prometheus (scripts/deps.sh --test installs it)";
    }
  }
  StartFleet();
  // Grafana's "Save & test": 1+1, a scalar.
  auto [s, two] = Query("1+1");
  ASSERT_EQ(s, 200) << two;
  EXPECT_EQ(two.at("data").at("resultType").as_string(), "scalar");
  EXPECT_EQ(two.at("data").at("result").at(1).as_string(), "2");
  EXPECT_EQ(two.at("status").as_string(), "success");

  // promtool, the token as the basic-auth password in the URL.
  auto instant = Shell(std::string(kPromtool) + " query instant '" + PromtoolUrl() +
                       "' 'avg by (Hostname) (DCGM_FI_DEV_GPU_UTIL{Hostname=~\"pm-.*\"})'");
  ASSERT_EQ(instant.first, 0) << instant.second;
  EXPECT_NE(instant.second.find("{Hostname=\"pm-0000\"} => "), std::string::npos) << instant.second;
  EXPECT_NE(instant.second.find("{Hostname=\"pm-0001\"} => "), std::string::npos);
  EXPECT_EQ(instant.second.find("pe-0000"), std::string::npos);
  auto range = Shell(std::string(kPromtool) + " query range --start=$(($(date +%s) - 30)) " +
                     "--end=$(date +%s) --step=5s '" + PromtoolUrl() +
                     "' 'sum by (cluster) (DCGM_FI_DEV_POWER_USAGE)'");
  ASSERT_EQ(range.first, 0) << range.second;
  EXPECT_NE(range.second.find("{cluster=\"train\"} =>"), std::string::npos) << range.second;
  EXPECT_NE(range.second.find("{cluster=\"edge\"} =>"), std::string::npos) << range.second;
  auto labels = Shell(std::string(kPromtool) + " query labels '" + PromtoolUrl() + "' modelName");
  ASSERT_EQ(labels.first, 0) << labels.second;
  EXPECT_EQ(labels.second, "NVIDIA H100 80GB HBM3\nNVIDIA L4\n");
  auto series = Shell(std::string(kPromtool) + " query series --match='DCGM_FI_DEV_GPU_TEMP{" +
                      "pool=\"l4\"}' '" + PromtoolUrl() + "'");
  ASSERT_EQ(series.first, 0) << series.second;
  EXPECT_NE(series.second.find("Hostname=\"pe-0000\""), std::string::npos) << series.second;
  EXPECT_NE(series.second.find("pci_bus_id=\""), std::string::npos) << series.second;
  auto refused = Shell(std::string(kPromtool) + " query instant 'http://viewer:nope@" +
                       controller_->address() + "/prometheus' '1+1'");
  EXPECT_NE(refused.first, 0);
  EXPECT_NE(refused.second.find("401"), std::string::npos) << refused.second;

  // Debian's Prometheus scrapes the same controller each second.
  unsigned short port;
  {
    PageServer probe("");
    port = probe.port();
  }
  std::string prom = "127.0.0.1:" + std::to_string(port);
  std::ofstream(dir_ + "/token") << controller_->admin_token();
  std::ofstream(dir_ + "/prometheus.yml") << "global: {scrape_interval: 1s}\n"
                                             "scrape_configs:\n"
                                             "  - job_name: gpufleet\n"
                                             "    authorization: {credentials_file: " +
                                                 dir_ +
                                                 "/token}\n"
                                                 "    static_configs: [{targets: ['" +
                                                 controller_->address() + "']}]\n";
  Process prometheus(
      {kPrometheus, "--config.file=" + dir_ + "/prometheus.yml",
       "--storage.tsdb.path=" + dir_ + "/prom", "--web.listen-address=" + prom, "--log.level=warn"},
      {}, dir_ + "/prometheus.log");
  cli::HttpClient client(prom, "");
  auto prom_query = [&](const std::string& q, const std::string& time) -> json::value {
    auto r = client.Send("GET", "/api/v1/query?query=" + cli::UrlEncode(q) + "&time=" + time);
    if (!r.ok() || r->status != 200) return nullptr;
    return json::parse(r->body);
  };
  ASSERT_TRUE(WaitFor(
      [&] {
        auto v = prom_query("count(DCGM_FI_DEV_GPU_TEMP)", std::to_string(NowMs() / 1000));
        return !v.is_null() && !v.at("data").at("result").as_array().empty() &&
               v.at("data").at("result").at(0).at("value").at(1).as_string() == "17";
      },
      30000))
      << ReadFile(dir_ + "/prometheus.log");
  std::this_thread::sleep_for(std::chrono::seconds(65));  // a minute of history on both

  // The same PromQL at the same time on both. Prometheus's samples are its scrapes (each
  // second, of the newest value gpufleet had), gpufleet's the agents' (each second): a value
  // may be a second apart, so values agree within 5% (or 1 for near-zero ones); the series
  // (labels less Prometheus's instance and job) are the same.
  const std::string at = std::to_string(NowMs() / 1000 - 2);
  const std::vector<std::string> queries = {
      "DCGM_FI_DEV_GPU_TEMP{Hostname=~\"pm-.*\", gpu=~\".*\"}",
      "avg by (Hostname) (DCGM_FI_DEV_GPU_UTIL)",
      "sum(DCGM_FI_DEV_POWER_USAGE)",
      "sum by (cluster, pool) (DCGM_FI_DEV_FB_FREE + DCGM_FI_DEV_FB_USED)",
      "DCGM_FI_DEV_FB_USED / (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE) * 100",
      "max by (modelName) (DCGM_FI_DEV_SM_CLOCK * 1000000)",
      "count without (UUID, gpu, pci_bus_id, device) (DCGM_FI_DEV_MEMORY_TEMP > bool 0)",
      "avg_over_time(DCGM_FI_DEV_GPU_TEMP{pool=\"l4\"}[30s])",
      "max_over_time(DCGM_FI_DEV_POWER_USAGE[1m] offset 5s)",
      "clamp_max(DCGM_FI_DEV_GPU_UTIL, 50)",
      "round(DCGM_FI_DEV_FB_FREE / 1000, 0.5)",
      "topk(1, DCGM_FI_DEV_FB_FREE)",
      "DCGM_FI_DEV_GPU_TEMP{pool=\"l4\"} > 0 or DCGM_FI_DEV_GPU_TEMP{pool=\"h100\"} > 0",
  };
  // The example dashboard's panels and variables answer, every variable at "All".
  json::value dashboard =
      json::parse(ReadFile(std::string(GPUFLEET_SOURCE_DIR) + "/examples/grafana-dashboard.json"));
  int panels = 0;
  for (const auto& panel : dashboard.at("panels").as_array()) {
    std::string expr(panel.at("targets").at(0).at("expr").as_string());
    for (const char* var : {"$cluster", "$pool", "$node", "$gpu"}) {
      for (size_t i = expr.find(var); i != std::string::npos; i = expr.find(var)) {
        expr.replace(i, std::string(var).size(), ".*");
      }
    }
    auto [st, v] =
        controller_->Call("GET", "/prometheus/api/v1/query_range?query=" + cli::UrlEncode(expr) +
                                     "&start=" + std::to_string(NowMs() / 1000 - 60) +
                                     "&end=" + std::to_string(NowMs() / 1000) + "&step=15");
    ASSERT_EQ(st, 200) << expr << ": " << v;
    if (expr.find("XID") == std::string::npos) {  // no XID has happened
      EXPECT_FALSE(v.at("data").at("result").as_array().empty()) << expr;
    }
    ++panels;
  }
  EXPECT_EQ(panels, 10);
  for (const char* label : {"cluster", "pool", "Hostname", "gpu"}) {
    auto [st, v] = controller_->Call("GET", std::string("/prometheus/api/v1/label/") + label +
                                                "/values?match[]=DCGM_FI_DEV_GPU_UTIL");
    ASSERT_EQ(st, 200);
    EXPECT_FALSE(v.at("data").as_array().empty()) << label;
  }

  for (const auto& q : queries) {
    auto theirs = prom_query(q, at);
    ASSERT_FALSE(theirs.is_null()) << q;
    auto [status, ours] = controller_->Call(
        "GET", "/prometheus/api/v1/query?query=" + cli::UrlEncode(q) + "&time=" + at);
    ASSERT_EQ(status, 200) << q << ": " << ours;
    auto a = Vector(ours), b = Vector(theirs);
    ASSERT_FALSE(a.empty()) << q;
    std::set<std::string> ka, kb;
    for (const auto& [k, v] : a) ka.insert(k);
    for (const auto& [k, v] : b) kb.insert(k);
    if (q.rfind("topk", 0) == 0) {  // equal values may tie differently
      EXPECT_EQ(a.size(), b.size()) << q;
      EXPECT_NEAR(a.begin()->second, b.begin()->second, 1) << q;
      continue;
    }
    EXPECT_EQ(ka, kb) << q;
    for (const auto& [k, v] : a) {
      if (!b.count(k)) continue;
      EXPECT_NEAR(v, b[k], std::max(1.0, 0.05 * std::fabs(b[k]))) << q << " " << k;
    }
  }
}

TEST_F(Prometheus, ErrorsLimitsFormsAndClusterScopedTokens) {
  StartFleet();
  auto [bad, why] = Query("DCGM_FI_DEV_GPU_TEMP + on(Hostname) DCGM_FI_DEV_GPU_UTIL");
  EXPECT_EQ(bad, 400);
  EXPECT_EQ(why.at("status").as_string(), "error");
  EXPECT_EQ(why.at("errorType").as_string(), "bad_data");
  EXPECT_EQ(why.at("error").as_string(),
            "invalid parameter \"query\": expr: at 24: 'on' is not supported");
  EXPECT_EQ(Query("histogram_quantile(0.9, DCGM_FI_DEV_GPU_TEMP)").second.at("error").as_string(),
            "invalid parameter \"query\": expr: at 1: histogram_quantile() is not supported");
  EXPECT_EQ(Query("").first, 400);
  // The CLI's form of the same API.
  auto cli = Cli({"metrics", "promql", "count by (pool) (DCGM_FI_DEV_GPU_TEMP)"});
  ASSERT_EQ(cli.exit_code, 0) << cli.err;
  EXPECT_NE(cli.out.find("{pool=h100}"), std::string::npos) << cli.out;
  EXPECT_NE(cli.out.find("16"), std::string::npos) << cli.out;
  EXPECT_EQ(Cli({"metrics", "promql", "1+1"}).out, "2\n");
  auto cli_bad = Cli({"metrics", "promql", "DCGM_FI_DEV_GPU_TEMP[5m:1m]"});
  EXPECT_EQ(cli_bad.exit_code, 1);
  EXPECT_EQ(cli_bad.err,
            "error: invalid parameter \"query\": expr: at 24: subqueries ([5m:1m]) are not "
            "supported (HTTP 400)\n");
  EXPECT_EQ(controller_->Call("GET", "/prometheus/api/v1/query?query=1&time=yesterday").first, 400);
  // 11,000 points per series at most, as Prometheus.
  auto [wide, wide_why] = controller_->Call(
      "GET", "/prometheus/api/v1/query_range?query=DCGM_FI_DEV_GPU_TEMP&start=0&end=11000&step=1");
  EXPECT_EQ(wide, 400);
  EXPECT_NE(wide_why.at("error").as_string().find("11,000 points"), std::string::npos);
  EXPECT_EQ(
      controller_->Call("GET", "/prometheus/api/v1/query_range?query=1&start=0&end=10999&step=1")
          .first,
      200);
  EXPECT_EQ(controller_->Call("GET", "/prometheus/api/v1/query_range?query=1&start=10&end=0&step=1")
                .first,
            400);

  // A form-encoded POST, as Grafana sends by default; RFC 3339 times; a range's matrix.
  while (NowMs() < ready_ms_ + 11'000) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto [posted, form] =
      controller_->Call("POST", "/prometheus/api/v1/query_range",
                        "query=" + cli::UrlEncode("sum by (pool) (DCGM_FI_DEV_GPU_TEMP)") +
                            "&start=" + cli::UrlEncode(FormatTime(ready_ms_)) +
                            "&end=" + cli::UrlEncode(FormatTime(ready_ms_ + 10'000)) + "&step=5s",
                        nullptr, "application/x-www-form-urlencoded");
  ASSERT_EQ(posted, 200) << form;
  EXPECT_EQ(form.at("data").at("resultType").as_string(), "matrix");
  ASSERT_EQ(form.at("data").at("result").as_array().size(), 2u) << form;
  EXPECT_EQ(form.at("data").at("result").at(0).at("values").as_array().size(), 3u) << form;
  EXPECT_EQ(controller_->Call("POST", "/prometheus/api/v1/query", "{\"query\": \"1\"}").first, 400)
      << "a POST takes a form";

  // A token of one cluster sees that cluster's series only, in every route.
  auto scoped =
      controller_->Call("POST", "/api/v1/api-tokens",
                        R"({"name": "edge-only", "role": "viewer", "clusters": ["edge"]})");
  ASSERT_EQ(scoped.first, 201) << scoped.second;
  std::string edge(scoped.second.at("token").as_string());
  EXPECT_EQ(Count("count(DCGM_FI_DEV_GPU_TEMP)", &edge), 1);
  EXPECT_EQ(Count("count(DCGM_FI_DEV_GPU_TEMP)"), 17);
  auto values = controller_->Call("GET", "/prometheus/api/v1/label/Hostname/values", "", &edge);
  ASSERT_EQ(values.first, 200);
  EXPECT_EQ(json::serialize(values.second.at("data")), R"(["pe-0000"])");
  auto series = controller_->Call(
      "GET", "/prometheus/api/v1/series?match[]=" + cli::UrlEncode("DCGM_FI_DEV_GPU_UTIL"), "",
      &edge);
  ASSERT_EQ(series.first, 200);
  EXPECT_EQ(series.second.at("data").as_array().size(), 1u);
  auto all = controller_->Call("GET", "/prometheus/api/v1/series?match[]=" +
                                          cli::UrlEncode("DCGM_FI_DEV_GPU_UTIL") + "&limit=2");
  EXPECT_EQ(all.second.at("data").as_array().size(), 2u);
  EXPECT_EQ(controller_->Call("GET", "/prometheus/api/v1/series").first, 400) << "no match[]";
  // Basic auth is taken on these routes only.
  auto basic =
      RawHttp(controller_->address(),
              "GET /api/v1/nodes HTTP/1.1\r\nHost: x\r\nAuthorization: Basic " +
                  Base64("viewer:" + controller_->admin_token()) + "\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(basic.rfind("HTTP/1.1 401", 0), 0u) << basic;
  auto prom_basic = RawHttp(controller_->address(),
                            "GET /prometheus/api/v1/query?query=1 HTTP/1.1\r\nHost: x\r\n"
                            "Authorization: Basic " +
                                Base64("viewer:" + edge) + "\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(prom_basic.rfind("HTTP/1.1 200", 0), 0u) << prom_basic;
  // The empty answers Grafana asks for, and the build info it reads.
  for (const char* path : {"metadata", "query_exemplars", "rules", "alerts", "status/buildinfo"}) {
    auto [st, v] = controller_->Call("GET", std::string("/prometheus/api/v1/") + path);
    EXPECT_EQ(st, 200) << path;
    EXPECT_EQ(v.at("status").as_string(), "success") << path;
  }
}

}  // namespace
}  // namespace gpufleet::e2e
