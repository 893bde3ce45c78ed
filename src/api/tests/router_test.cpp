#include <gtest/gtest.h>

#include "api/http.h"

namespace gpufleet::api {
namespace {

Handler Named(std::string name) {
  return [name](const Request&, const Principal&) { return JsonResponse(200, name); };
}

TEST(Router, MatchesPatternsAndExtractsParams) {
  Router r;
  r.Add("GET", "/api/v1/nodes", Role::kViewer, Named("list"));
  r.Add("GET", "/api/v1/nodes/{name}", Role::kViewer, Named("get"));
  r.Add("POST", "/api/v1/nodes/{name}/cordon", Role::kOperator, Named("cordon"));
  auto m = r.Find("POST", "/api/v1/nodes/n-1/cordon");
  ASSERT_NE(m.handler, nullptr);
  EXPECT_EQ(m.params.at("name"), "n-1");
  EXPECT_EQ(m.min_role, Role::kOperator);
  EXPECT_EQ((*m.handler)(Request{}, Principal{}).body, "cordon");
  EXPECT_EQ((*r.Find("GET", "/api/v1/nodes").handler)(Request{}, Principal{}).body, "list");
  EXPECT_FALSE(m.slow);
  r.AddSlow("POST", "/api/v1/pools/{pool}/scaling/tune", Role::kOperator, Named("tune"));
  auto slow = r.Find("POST", "/api/v1/pools/p/scaling/tune");
  ASSERT_NE(slow.handler, nullptr);
  EXPECT_TRUE(slow.slow);  // the server runs it off its I/O threads
  EXPECT_EQ(slow.min_role, Role::kOperator);
  EXPECT_EQ(slow.params.at("pool"), "p");
}

TEST(Router, DistinguishesUnknownPathFromWrongMethod) {
  Router r;
  r.Add("GET", "/api/v1/nodes/{name}", Role::kViewer, Named("get"));
  auto wrong_method = r.Find("DELETE", "/api/v1/nodes/x");
  EXPECT_EQ(wrong_method.handler, nullptr);
  EXPECT_TRUE(wrong_method.path_known);
  auto unknown = r.Find("GET", "/api/v1/nodes/x/y");
  EXPECT_EQ(unknown.handler, nullptr);
  EXPECT_FALSE(unknown.path_known);
  EXPECT_EQ(r.Find("GET", "/api/v1/nodes/").handler, nullptr);  // empty parameter
}

TEST(Router, ErrorResponsesCarryCodeAndStatus) {
  auto r = ErrorResponse(MakeError(ErrorCode::kConflict, "busy"));
  EXPECT_EQ(r.status, 409);
  EXPECT_EQ(r.body, R"({"error":{"code":"conflict","message":"busy"}})");
  EXPECT_EQ(ErrorResponse(MakeError(ErrorCode::kTooLarge, "x")).status, 413);
  EXPECT_EQ(ErrorResponse(MakeError(ErrorCode::kUnauthenticated, "x")).status, 401);
  EXPECT_EQ(ErrorResponse(MakeError(ErrorCode::kPermissionDenied, "x")).status, 403);
}

TEST(Principal, ClusterScope) {
  Principal all{"a", Role::kAdmin, {}};
  Principal scoped{"b", Role::kViewer, {"c1"}};
  EXPECT_TRUE(all.CanSeeCluster("anything"));
  EXPECT_TRUE(scoped.CanSeeCluster("c1"));
  EXPECT_FALSE(scoped.CanSeeCluster("c2"));
}

}  // namespace
}  // namespace gpufleet::api
