// Every route of the router's own table (GET /api/v1/routes), called with no token, a bad
// token, a viewer, an operator, an operator scoped to another cluster and an admin: each answer
// is checked against the route's declared role and scope, and each refused change is shown to
// have changed nothing (the state read before and after) but for its own audit record. Then each
// POST, PUT and PATCH route gets a body that is not JSON, one of the wrong shape and one over the
// size limit: a 4xx with a message each, and nothing changed. Both walks run twice: over plain
// HTTP and over HTTPS, so the TLS path is tested as a whole.

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <map>

#include "fixture.h"

namespace gpufleet::e2e {
namespace {

namespace asio = boost::asio;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

// One request from the source address `from` (127.0.0.N), so that the refusals of the walk
// spread over addresses and stay under the failed sign-in limit of each. `address` is
// "127.0.0.1:PORT" or "https://127.0.0.1:PORT", whose certificate `ca_file` verifies.
int RawStatus(std::string address, const std::string& ca_file, const std::string& from,
              const std::string& method, const std::string& path,
              const std::string& authorization) {
  const bool tls = address.rfind("https://", 0) == 0;
  if (tls) address = address.substr(8);
  asio::io_context io;
  ssl::context context(ssl::context::tls_client);
  if (tls) {
    context.load_verify_file(ca_file);
    context.set_verify_mode(ssl::verify_peer);
  }
  ssl::stream<tcp::socket> stream(io, context);
  tcp::socket& socket = stream.next_layer();
  const size_t colon = address.rfind(':');
  socket.open(tcp::v4());
  socket.bind({asio::ip::make_address(from), 0});
  socket.connect({asio::ip::make_address(address.substr(0, colon)),
                  static_cast<unsigned short>(std::stoi(address.substr(colon + 1)))});
  std::string request = method + " " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n";
  if (!authorization.empty()) request += "Authorization: " + authorization + "\r\n";
  request += "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}";
  std::string out;
  auto exchange = [&](auto& s) {
    boost::system::error_code ec;
    asio::write(s, asio::buffer(request));
    asio::read(s, asio::dynamic_buffer(out), ec);  // to the close
  };
  if (tls) {
    stream.handshake(ssl::stream_base::client);
    exchange(stream);
  } else {
    exchange(socket);
  }
  if (out.rfind("HTTP/1.1 ", 0) != 0) return 0;
  return std::stoi(out.substr(9, 3));
}

// A route's pattern with values for its parameters: the walk's node, cluster train, pool h100
// and its GPU 0; made-up ids elsewhere (answered 404 to those allowed).
std::string Fill(std::string path, const std::string& node) {
  auto set = [&](const std::string& param, const std::string& value) {
    for (size_t at; (at = path.find(param)) != std::string::npos;) {
      path.replace(at, param.size(), value);
    }
  };
  if (path.rfind("/api/v1/clusters/", 0) == 0) set("{name}", "train");
  if (path.rfind("/api/v1/pools/", 0) == 0) set("{name}", "h100");
  if (path.rfind("/api/v1/nodes/", 0) == 0) set("{name}", node);
  set("{pool}", "h100");
  set("{index}", "0");
  set("{file}", "app.js");
  set("{team}", "none");
  set("{project}", "none");
  set("{name}", "none");
  set("{id}", "none");
  return path;
}

// The parameter: whether the controller serves HTTPS (a certificate from `gpufleet tls init`).
class Routes : public E2E, public ::testing::WithParamInterface<bool> {
 protected:
  std::vector<std::string> ControllerFlags() override {
    std::vector<std::string> flags{"--max-body", "65536"};
    if (!GetParam()) return flags;
    const std::string tls = dir_ + "/data/tls";
    auto r = RunGpufleet({"tls", "init", "--dir", tls, "--host", "127.0.0.1"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    flags.insert(flags.end(),
                 {"--tls-cert", tls + "/controller.pem", "--tls-key", tls + "/controller.key"});
    return flags;
  }
  std::string Ca() const { return controller_->data_dir() + "/tls/ca.pem"; }

  std::string Token(const std::string& role, const std::string& name,
                    const std::string& cluster = "") {
    std::vector<std::string> args{"tokens", "create", "--role", role, "--name", name};
    if (!cluster.empty()) args.insert(args.end(), {"--cluster", cluster});
    auto r = Cli(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out.substr(0, r.out.find('\n'));
  }

  // What a refused call must leave as it was.
  std::string State() {
    std::string out;
    for (const char* path :
         {"/api/v1/clusters", "/api/v1/pools", "/api/v1/nodes", "/api/v1/gpus", "/api/v1/jobs",
          "/api/v1/join-tokens", "/api/v1/channels", "/api/v1/silences", "/api/v1/alert-rules",
          "/api/v1/scaling", "/api/v1/teams"}) {
      auto [status, v] = controller_->Call("GET", path);
      if (std::string_view(path) == "/api/v1/nodes") {
        for (auto& n : v.at("items").as_array()) n.as_object().erase("last_seen_at");
      }
      if (std::string_view(path) == "/api/v1/gpus") {
        for (auto& g : v.at("items").as_array()) g.as_object().erase("health");
      }
      if (std::string_view(path) == "/api/v1/scaling") {  // the policies, not the live figures
        for (auto& p : v.at("items").as_array()) p = p.at("policy");
      }
      if (std::string_view(path) == "/api/v1/alert-rules") {  // the rules' last evaluation
        for (auto& r : v.at("items").as_array()) r.as_object().erase("last_run");
      }
      out += std::string(path) + " " + std::to_string(status) + " " + json::serialize(v) + "\n";
    }
    auto tokens = controller_->Call("GET", "/api/v1/api-tokens").second;
    for (auto& t : tokens.at("items").as_array()) t.as_object().erase("last_used_at");
    return out + json::serialize(tokens);
  }
  int64_t NewestAudit() {
    auto items = controller_->Call("GET", "/api/v1/audit?limit=1").second.at("items").as_array();
    return items.empty() ? 0 : items[0].at("id").as_int64();
  }
};

TEST_P(Routes, EveryRouteAnswersEachRoleAsDeclaredAndARefusalChangesNothing) {
  Apply();
  Sim(JoinToken("h100"), "walk", 1, "H100-SXM5-80GB", 8);
  ASSERT_TRUE(WaitState("walk-0000", "ready"));
  const std::string viewer = Token("viewer", "walk-viewer");
  const std::string op = Token("operator", "walk-operator");
  const std::string other = Token("operator", "walk-edge-operator", "edge");
  const std::string admin = controller_->admin_token();
  auto [status, table] = controller_->Call("GET", "/api/v1/routes");
  ASSERT_EQ(status, 200);
  const auto& routes = table.at("items").as_array();
  ASSERT_GE(routes.size(), 60u);
  const std::string host = controller_->address();
  ASSERT_EQ(host.rfind("https://", 0) == 0, GetParam()) << host;
  int source = 2, raw_calls = 0;
  auto from = [&] {  // ten refusals per address at most, under the limit of twenty a minute
    if (++raw_calls % 10 == 0) ++source;
    return "127.0.0." + std::to_string(source);
  };
  int checked = 0;
  for (const auto& r : routes) {
    std::string method(r.at("method").as_string()), path(r.at("path").as_string());
    bool mutating = method != "GET" && method != "HEAD";
    path = Fill(path, "walk-0000");
    ASSERT_EQ(path.find('{'), std::string::npos) << "no value for a parameter of " << path;
    if (path == "/api/v1/jobs/none/events") continue;
    const std::string what = method + " " + path;
    int need = r.at("role") == "admin" ? 2 : r.at("role") == "operator" ? 1 : 0;
    bool is_public = r.at("public").as_bool();
    // A refusal changes nothing but the audit log, which gains its record.
    auto refused = [&](const std::string& who, const std::function<int()>& call,
                       std::set<int> statuses) {
      std::string before = mutating ? State() : "";
      int64_t audit = NewestAudit();
      int got = call();
      EXPECT_TRUE(statuses.count(got)) << what << " as " << who << ": " << got;
      if (!mutating) return;
      EXPECT_EQ(State(), before) << what << " as " << who << " changed the state";
      auto newest = controller_->Call("GET", "/api/v1/audit?limit=2").second.at("items");
      EXPECT_EQ(newest.at(0).at("id").as_int64(), audit + 1) << what << " as " << who;
      EXPECT_EQ(newest.at(0).at("status").as_int64(), got) << what << " as " << who;
    };
    auto as = [&](const std::string& token) {
      return [&, token] { return controller_->Call(method, path, "{}", &token).first; };
    };
    if (is_public) {
      EXPECT_NE(RawStatus(host, Ca(), from(), method, path, ""), 401) << what;
    } else {
      refused("nobody", [&] { return RawStatus(host, Ca(), from(), method, path, ""); }, {401});
      refused("a bad token",
              [&] { return RawStatus(host, Ca(), from(), method, path, "Bearer gfa_not_a_token"); },
              {401});
      if (need > 0) refused("a viewer", as(viewer), {403});
      if (need > 1) {
        refused("an operator", as(op), {403});
        refused("an operator of edge", as(other), {403});
      }
    }
    // Scope: an operator of edge may not touch train's nodes, pools or cluster.
    bool trains = path.find("walk-0000") != std::string::npos ||
                  path.find("/train") != std::string::npos ||
                  path.find("/h100") != std::string::npos;
    if (!is_public && need <= 1 && trains && path != "/api/v1/clusters/train/heatmap") {
      int got = controller_->Call(method, path, "{}", &other).first;
      EXPECT_TRUE(got == 403 || got == 404) << what << " as an operator of edge: " << got;
    }
    // Allowed: whatever the answer (400, 404, 409 for these made-up values), not a refusal.
    for (const auto* token : {&viewer, &op, &admin}) {
      int role = token == &viewer ? 0 : token == &op ? 1 : 2;
      if (role < need || (is_public && role > 0)) continue;
      int got = controller_->Call(method, path, "{}", token).first;
      EXPECT_TRUE(got != 401 && got != 403 && got != 0)
          << what << " as role " << role << ": " << got;
    }
    ++checked;
  }
  EXPECT_GE(checked, 60);
}

// Every route states its scope, and holds it: an admin token scoped to cluster train calls
// every route against cluster edge's objects (in the path, or in the bodies that name them).
// A fleet-wide route refuses it (403); a cluster route answers 403 or 404, or answers without
// a word of edge's nodes, pools or cluster; a refused change changes nothing.
TEST_P(Routes, EveryRouteKeepsAScopedTokenInItsClusters) {
  Apply();
  Sim(JoinToken("h100"), "walk", 1, "H100-SXM5-80GB", 8);
  Sim(JoinToken("l4"), "edge", 1, "L4", 1);
  ASSERT_TRUE(WaitState("walk-0000", "ready"));
  ASSERT_TRUE(WaitState("edge-0000", "ready"));
  const std::string scoped = Token("admin", "walk-train-admin", "train");
  auto [status, table] = controller_->Call("GET", "/api/v1/routes");
  ASSERT_EQ(status, 200);
  // Bodies that reach edge's objects, for the routes whose objects are in the body.
  const std::map<std::string, std::string> bodies = {
      {"POST /api/v1/rollouts",
       R"({"kind":"driver","target":"580.95.05","selector":{"pools":["l4"]}})"},
      {"POST /api/v1/rollouts/plan",
       R"({"kind":"driver","target":"580.95.05","selector":{"nodes":["edge-0000"]}})"},
      {"POST /api/v1/silences",
       R"({"matchers":[{"name":"alertname","value":".+","isRegex":true}],"duration":"30d",)"
       R"("comment":"all of them"})"},
      {"POST /api/v1/api-tokens", R"({"name":"escape","role":"admin"})"},
      {"POST /api/v1/join-tokens", R"({"pool":"l4"})"},
      {"POST /api/v1/jobs",
       R"({"pool":"l4","gpus":1,"team":"nlp","project":"main","duration":"1m"})"},
      {"POST /api/v1/pools",
       R"({"name":"l4-more","cluster":"edge","gpu_model":"L4","gpus_per_node":1})"},
      {"POST /api/v1/clusters", R"({"name":"edge","type":"edge","site":"lab-b"})"},
  };
  auto mentions_edge = [](const std::string& body) {
    return body.find("edge-0000") != std::string::npos ||
           body.find(R"("l4")") != std::string::npos ||
           body.find(R"("cluster":"edge")") != std::string::npos;
  };
  int fleet = 0, clusters = 0;
  for (const auto& r : table.at("items").as_array()) {
    std::string method(r.at("method").as_string()), pattern(r.at("path").as_string());
    const std::string scope(r.at("scope").as_string());
    EXPECT_NE(scope, "undeclared") << method << " " << pattern << " states no scope";
    if (r.at("public").as_bool() || scope == "any") continue;
    std::string path = pattern;
    auto set = [&](const std::string& param, const std::string& value) {
      for (size_t at; (at = path.find(param)) != std::string::npos;) {
        path.replace(at, param.size(), value);
      }
    };
    if (path.rfind("/api/v1/clusters/", 0) == 0) set("{name}", "edge");
    if (path.rfind("/api/v1/pools/", 0) == 0) set("{name}", "l4");
    if (path.rfind("/api/v1/nodes/", 0) == 0) set("{name}", "edge-0000");
    set("{pool}", "l4");
    set("{index}", "0");
    set("{team}", "nlp");
    set("{project}", "main");
    set("{name}", "none");
    set("{id}", "none");
    const std::string what = method + " " + path;
    const bool mutating = method != "GET" && method != "HEAD";
    auto body = bodies.count(method + " " + pattern) ? bodies.at(method + " " + pattern) : "{}";
    std::string before = mutating ? State() : "";
    auto [got, reply] = controller_->Call(method, path, body, &scoped);
    const std::string text =
        reply.is_string() ? std::string(reply.as_string()) : json::serialize(reply);
    if (scope == "fleet") {
      ++fleet;
      EXPECT_EQ(got, 403) << what << ": " << text.substr(0, 300);
    } else {
      ++clusters;
      EXPECT_NE(got, 0) << what;
      if (got < 300) {
        EXPECT_FALSE(mentions_edge(text))
            << what << " showed edge's objects: " << text.substr(0, 600);
      }
      if (mutating &&
          (path.find("edge") != std::string::npos || path.find("/l4") != std::string::npos ||
           bodies.count(method + " " + pattern))) {
        EXPECT_TRUE(got == 403 || got == 404) << what << ": " << got << " " << text.substr(0, 300);
      }
    }
    if (mutating && got >= 400) {
      EXPECT_EQ(State(), before) << what << " changed the state";
    }
  }
  EXPECT_GE(fleet, 15);
  EXPECT_GE(clusters, 60);
  // The same token within its own cluster: it works there.
  EXPECT_EQ(controller_->Call("GET", "/api/v1/nodes/walk-0000", "", &scoped).first, 200);
  auto [made, token] =
      controller_->Call("POST", "/api/v1/api-tokens",
                        R"({"name":"train-viewer","role":"viewer","clusters":["train"]})", &scoped);
  EXPECT_EQ(made, 201) << token;
}

TEST_P(Routes, EveryBodyTakingRouteRefusesABadBodyWithAMessageAndChangesNothing) {
  Apply();
  Sim(JoinToken("h100"), "body", 1, "H100-SXM5-80GB", 8);
  ASSERT_TRUE(WaitState("body-0000", "ready"));
  auto [status, table] = controller_->Call("GET", "/api/v1/routes");
  ASSERT_EQ(status, 200);
  const std::string big(70'000, ' ');
  int checked = 0;
  for (const auto& r : table.at("items").as_array()) {
    std::string method(r.at("method").as_string()), path(r.at("path").as_string());
    if (method != "POST" && method != "PUT" && method != "PATCH") continue;
    path = Fill(path, "body-0000");
    const std::string what = method + " " + path;
    std::string before = State();
    for (const auto& [body, expect] : std::vector<std::pair<std::string, int>>{
             {"{not json", 400}, {"[1, 2]", 400}, {"\"yes\"", 400}, {"{" + big + "}", 413}}) {
      auto [got, v] = controller_->Call(method, path, body);
      EXPECT_EQ(got, expect) << what << " with " << body.substr(0, 12) << ": " << v;
      if (got >= 400 && got < 500 && v.is_object()) {
        // The Prometheus API's errors are Prometheus's: {"status", "errorType", "error"}.
        const auto& error = v.at("error");
        EXPECT_FALSE((error.is_string() ? error : error.at("message")).as_string().empty()) << what;
      }
    }
    EXPECT_EQ(State(), before) << what << " changed the state";
    ++checked;
  }
  EXPECT_GE(checked, 15);
}

INSTANTIATE_TEST_SUITE_P(Http, Routes, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Https" : "Plain"; });

}  // namespace
}  // namespace gpufleet::e2e
