// Scrape mode end to end: a node that runs dcgm-exporter (played by a small HTTP server that
// serves a recorded page) is listed in the fleet file; the controller scrapes it, registers the
// node, stores its samples and XIDs, and turns it unreachable when the exporter goes away.

#include "fixture.h"

namespace gpufleet::e2e {
namespace {

class Scrape : public E2E {
 protected:
  void ApplyExporterFleet(const std::string& url) {
    auto r = ApplyText("exporters.yaml",
                       "apiVersion: gpufleet/v1\n"
                       "kind: Fleet\n"
                       "clusters:\n"
                       "  - name: legacy\n"
                       "    type: training\n"
                       "    site: lab\n"
                       "    pools:\n"
                       "      - name: a100-dcgm\n"
                       "        gpu_model: A100-SXM4-80GB\n"
                       "        gpus_per_node: 2\n"
                       "        scrape_interval: 1s\n"
                       "        exporters:\n"
                       "          - node: dgx-a100-017\n"
                       "            url: " +
                           url + "\n");
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  json::value Query(const std::string& metric, int gpu) {
    auto [s, v] = controller_->Call(
        "GET", "/api/v1/query?metric=" + metric + "&node=dgx-a100-017&gpu=" + std::to_string(gpu));
    if (s != 200 || v.at("items").as_array().empty()) return nullptr;
    return v.at("items").at(0).at("value");
  }
  json::value Target() {
    auto [s, v] = controller_->Call("GET", "/api/v1/scrape/targets");
    if (s != 200 || v.at("items").as_array().empty()) return nullptr;
    return v.at("items").at(0);
  }
};

TEST_F(Scrape, AnExporterNodeJoinsReportsAndGoesUnreachableWhenItStops) {
  PageServer exporter(DcgmPage("a100-2gpu.prom"));
  ApplyExporterFleet(exporter.url());

  // Registered from its page and judged against its pool like an agent's node.
  ASSERT_TRUE(WaitState("dgx-a100-017", "ready"))
      << ReadFile(controller_->data_dir() + "/controller-1.log");
  json::value node = Node("dgx-a100-017");
  EXPECT_EQ(node.at("pool").as_string(), "a100-dcgm");
  EXPECT_EQ(node.at("facts").at("backend").as_string(), "dcgm-exporter");
  EXPECT_EQ(node.at("facts").at("driver_version").as_string(), "535.183.01");
  EXPECT_FALSE(node.at("simulated").as_bool());
  ASSERT_EQ(node.at("gpus").as_array().size(), 2u);
  EXPECT_EQ(node.at("gpus").at(1).at("uuid").as_string(),
            "GPU-0b9e8d7c-6a5f-4e3d-b2c1-a0f9e8d7c602");
  EXPECT_EQ(node.at("gpus").at(0).at("model").as_string(), "A100-SXM4-80GB");

  // Its values, in gpufleet's units; DCGM's "not supported" stays absent.
  ASSERT_TRUE(WaitFor([&] { return !Query("gpu_util", 0).is_null(); }, 10000));
  EXPECT_EQ(Query("gpu_util", 0).as_int64(), 97);
  EXPECT_EQ(Query("power_usage", 0).as_int64(), 312447);
  EXPECT_TRUE(Query("memory_temp", 1).is_null());
  json::value target = Target();
  EXPECT_EQ(target.at("health").as_string(), "up");
  EXPECT_EQ(target.at("samples").as_int64(), 33);
  auto cli = Cli({"scrape", "targets"});
  EXPECT_EQ(cli.exit_code, 0) << cli.err;
  EXPECT_NE(cli.out.find("dgx-a100-017"), std::string::npos) << cli.out;
  EXPECT_NE(cli.out.find(" up "), std::string::npos) << cli.out;

  // An XID shows on the page as the GPU's last XID: recorded once, however often it is read.
  std::string page = DcgmPage("a100-2gpu.prom");
  std::string line = "DCGM_FI_DEV_XID_ERRORS{gpu=\"1\"";
  size_t at = page.find(line);
  ASSERT_NE(at, std::string::npos);
  size_t end = page.find('\n', at);
  page.replace(end - 1, 1, "79");  // the value "0" at the end of the line
  exporter.Set(page);
  auto xids = [&] {
    auto [s, v] = controller_->Call("GET", "/api/v1/events?node=dgx-a100-017&kind=xid");
    return s == 200 ? v.at("items").as_array() : json::array();
  };
  ASSERT_TRUE(WaitFor([&] { return xids().size() == 1; }, 10000));
  EXPECT_EQ(xids().at(0).at("value").as_int64(), 79);
  EXPECT_EQ(xids().at(0).at("gpu").as_int64(), 1);
  int seen = exporter.requests();
  ASSERT_TRUE(WaitFor([&] { return exporter.requests() >= seen + 3; }, 10000));
  EXPECT_EQ(xids().size(), 1u);

  // A page that is not Prometheus text: the target is down with the line and the reason.
  exporter.Set("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\" 97\n");
  ASSERT_TRUE(WaitFor([&] { return Target().at("health").as_string() == "down"; }, 10000));
  EXPECT_NE(std::string(Target().at("error").as_string()).find("not a Prometheus page: line 1"),
            std::string::npos)
      << Target();

  // The exporter goes away: three missed intervals and some slack later, unreachable.
  exporter.Close();
  ASSERT_TRUE(WaitState("dgx-a100-017", "unreachable", 20000));
  EXPECT_NE(std::string(Node("dgx-a100-017").at("reason").as_string()).find("no successful scrape"),
            std::string::npos);
}

// query_range's grouping, on the exporter's fixed values (GPU 0 at 97 %, GPU 1 at 0 %): each
// GPU is reduced per step, then aggregated across the group.
TEST_F(Scrape, QueryRangeGroupsGpusAndTakesPercentiles) {
  PageServer exporter(DcgmPage("a100-2gpu.prom"));
  ApplyExporterFleet(exporter.url());
  ASSERT_TRUE(WaitFor([&] { return exporter.requests() >= 2; }, 10000));
  auto range = [&](const std::string& params) {
    auto [s, v] = controller_->Call(
        "GET", "/api/v1/query_range?metric=gpu_util&start=-10m&step=10m" + params);
    EXPECT_EQ(s, 200) << v;
    return v;
  };
  auto only = [&](const std::string& params) {
    auto v = range(params);
    EXPECT_EQ(v.at("series").as_array().size(), 1u) << v;
    const auto& points = v.at("series").at(0).at("points").as_array();
    EXPECT_EQ(points.size(), 1u) << v;
    return points.at(0).at(1).to_number<double>();
  };
  ASSERT_TRUE(WaitFor(
      [&] { return !range("&by=gpu").at("series").at(0).at("points").as_array().empty(); }, 10000));
  auto per_gpu = range("&by=gpu");
  EXPECT_EQ(per_gpu.at("by").as_string(), "gpu");
  ASSERT_EQ(per_gpu.at("series").as_array().size(), 2u);
  EXPECT_EQ(only("&gpu=0&agg=p95"), 97);
  EXPECT_EQ(only("&by=node&agg=avg"), 48.5);
  EXPECT_EQ(only("&by=node&agg=sum"), 97);
  EXPECT_EQ(only("&by=node&agg=min"), 0);
  EXPECT_EQ(only("&by=node&agg=max"), 97);
  EXPECT_EQ(only("&by=node&agg=p95"), 97);
  auto pool = range("&by=pool");
  EXPECT_EQ(pool.at("series").at(0).at("pool").as_string(), "a100-dcgm");
  EXPECT_EQ(pool.at("series").at(0).at("gpus").as_int64(), 2);
  auto cluster = range("&by=cluster&agg=max");
  EXPECT_EQ(cluster.at("series").at(0).at("cluster").as_string(), "legacy");
  EXPECT_FALSE(cluster.at("series").at(0).as_object().contains("node"));
  auto bad = controller_->Call("GET", "/api/v1/query_range?metric=gpu_util&by=rack");
  EXPECT_EQ(bad.first, 400);
  EXPECT_NE(bad.second.at("error").at("message").as_string().find("'by' must be"),
            std::string::npos);
  EXPECT_EQ(controller_->Call("GET", "/api/v1/query_range?metric=gpu_util&agg=p99").first, 400);
}

TEST_F(Scrape, BadExporterEntriesAreRefusedWithTheField) {
  auto r = ApplyText("bad.yaml",
                     "apiVersion: gpufleet/v1\nkind: Fleet\nclusters:\n"
                     "  - name: legacy\n    type: training\n    site: lab\n    pools:\n"
                     "      - name: p\n        gpu_model: T4\n        exporters:\n"
                     "          - node: n1\n            url: ftp://10.0.0.1:9400/metrics\n");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("bad.yaml:12: clusters[0].pools[0].exporters[0].url"), std::string::npos)
      << r.err;
  EXPECT_EQ(controller_->Call("GET", "/api/v1/pools").second.at("items").as_array().size(), 0u);
}

}  // namespace
}  // namespace gpufleet::e2e
