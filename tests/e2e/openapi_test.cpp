// The response check itself (openapi.h): it must be able to fail, or the end-to-end run proves
// nothing about docs/openapi.yaml.

#include "openapi.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "fixture.h"

namespace gpufleet::e2e {
namespace {

namespace json = boost::json;

TEST(OpenApiCheck, AcceptsWhatTheSchemaDescribes) {
  json::value health = json::parse(
      R"({"status":"ok","store":{"backend":"sqlite","ok":true},"telemetry":{"ok":true}})");
  EXPECT_TRUE(CheckResponse("GET", "/healthz", 200, &health).empty());
  json::value error = json::parse(R"({"error":{"code":"not_found","message":"no node 'x'"}})");
  EXPECT_TRUE(CheckResponse("GET", "/api/v1/nodes/x?verbose=1", 404, &error).empty());
}

TEST(OpenApiCheck, RefusesWhatItDoesNot) {
  auto one = [](const std::string& schema, const std::string& text) {
    auto problems = CheckSchema(schema, json::parse(text));
    return problems.empty() ? std::string() : problems.front();
  };
  EXPECT_EQ(one("Health", R"({"status":"ok"})"), "Health: required property 'store' is missing");
  EXPECT_EQ(
      one("Health",
          R"({"status":"fine","store":{"backend":"sqlite","ok":true},"telemetry":{"ok":true}})"),
      "Health.status: 'fine' is not in the schema's enum");
  EXPECT_EQ(one("Health",
                R"({"status":"ok","store":{"backend":"sqlite","ok":1},"telemetry":{"ok":true}})"),
            "Health.store.ok: integer, the schema says boolean");
  EXPECT_EQ(
      one("Health",
          R"({"status":"ok","store":{"backend":"sqlite","ok":true},"telemetry":{"ok":true},"x":1})"),
      "Health: property 'x' is not in the schema");
  EXPECT_EQ(one("Node", R"({"state_since":"yesterday"})"),
            "Node.state_since: 'yesterday' is not an RFC 3339 date-time");
  EXPECT_EQ(one("Node", R"({"gpus":[{"index":"0"}]})"),
            "Node.gpus[0].index: string, the schema says integer");

  json::value health = json::parse(R"({"status":"ok","store":{"backend":"sqlite","ok":true}})");
  auto problems = CheckResponse("GET", "/healthz", 418, &health);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0], "GET /healthz: status 418 is not documented for GET /healthz");
  problems = CheckResponse("GET", "/api/v1/no-such-thing", 200, nullptr);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0], "GET /api/v1/no-such-thing: no path of docs/openapi.yaml matches");
  problems = CheckResponse("PATCH", "/api/v1/nodes", 200, nullptr);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0], "PATCH /api/v1/nodes: /api/v1/nodes has no patch in docs/openapi.yaml");
  // What the router itself answers is not an operation's.
  EXPECT_TRUE(CheckResponse("GET", "/api/v1/no-such-thing", 404, nullptr).empty());
  EXPECT_TRUE(CheckResponse("DELETE", "/api/v1/nodes", 405, nullptr).empty());
}

}  // namespace
}  // namespace gpufleet::e2e

namespace gpufleet::e2e {
namespace {

// The read routes that the other end-to-end tests do not call, with something in each list, so
// that every response schema of docs/openapi.yaml is checked against a real answer (Call
// checks each one; a mismatch fails this test).
TEST_F(E2E, EveryReadRouteAnswersAsDocsOpenapiYamlSays) {
  Apply();
  Sim(JoinToken("h100"), "oa", 2, "H100-SXM5-80GB", 8);
  ASSERT_TRUE(WaitState("oa-0000", "ready"));
  ASSERT_TRUE(WaitState("oa-0001", "ready"));
  auto call = [&](const std::string& method, const std::string& target,
                  const std::string& body = "") {
    auto [status, v] = controller_->Call(method, target, body);
    EXPECT_LT(status, 300) << method << " " << target << ": " << json::serialize(v);
    return v;
  };
  call("POST", "/api/v1/jobs",
       R"({"team": "vision", "project": "main", "pool": "h100", "gpus": 2})");
  call("POST", "/api/v1/api-tokens", R"({"name": "reader", "role": "viewer"})");
  call("POST", "/api/v1/channels",
       R"({"name": "ops", "type": "webhook", "url": "http://127.0.0.1:9/hook",
           "matchers": [{"name": "severity", "value": "critical"}]})");
  call("POST", "/api/v1/silences",
       R"({"matchers": [{"name": "cluster", "value": "edge"}], "duration": "1h",
           "comment": "lab move"})");
  call("POST", "/api/v1/nodes/oa-0000/gpus/1/inject", R"({"xid": 79})");
  ASSERT_TRUE(WaitFor([&] { return !call("GET", "/api/v1/alerts").at("items").as_array().empty(); },
                      15000));
  call("PUT", "/api/v1/pools/h100/scaling", R"({"mode": "reactive", "min_nodes": 1,
       "max_nodes": 3})");
  for (const char* target : {"/api/v1/clusters",
                             "/api/v1/clusters/train",
                             "/api/v1/pools",
                             "/api/v1/pools/h100",
                             "/api/v1/nodes",
                             "/api/v1/nodes/oa-0000",
                             "/api/v1/nodes/oa-0000/events",
                             "/api/v1/gpus",
                             "/api/v1/gpu-models",
                             "/api/v1/gpu-models/H100-SXM5-80GB",
                             "/api/v1/join-tokens",
                             "/api/v1/api-tokens",
                             "/api/v1/audit",
                             "/api/v1/events",
                             "/api/v1/scrape/targets",
                             "/api/v1/xids",
                             "/api/v1/health?show=all",
                             "/api/v1/alerts",
                             "/api/v1/alert-rules",
                             "/api/v1/alert-rules/metrics",
                             "/api/v1/channels",
                             "/api/v1/silences",
                             "/api/v1/jobs",
                             "/api/v1/jobs/1",
                             "/api/v1/scaling",
                             "/api/v1/pools/h100/scaling",
                             "/api/v1/pools/h100/scaling/events",
                             "/api/v1/pools/h100/scaling/history",
                             "/api/v1/whoami",
                             "/api/v1/heatmap?cluster=train",
                             "/api/v1/query?metric=gpu_temp",
                             "/api/v1/query_range?metric=gpu_temp&by=node",
                             "/healthz"}) {
    call("GET", target);
  }
  call("POST", "/api/v1/alert-rules/test",
       "groups:\n  - name: t\n    rules:\n      - alert: Hot\n        expr: gpu_temp > 0\n");
}

}  // namespace
}  // namespace gpufleet::e2e
