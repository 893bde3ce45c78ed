// Requests to the API as any token holder sends them: a real controller on loopback (SQLite in
// a temporary directory, a fleet of two clusters and three simulated nodes), and one request
// per input. The input's first line is "METHOD PATH [TOKEN]", TOKEN one of `admin` (the
// default: the fleet-wide admin), `edge-admin` and `edge-operator` (scoped to the cluster
// `edge`); the rest is the body, sent as JSON, or as text/csv when it does not start with '{'
// or '['. The controller must answer every request, never with a 500, and every 4xx carries
// an error with a message.
//
// A body that could set a scaling policy's `command` actuator is not sent: its provision and
// deprovision commands run in a shell, and the fuzzer must not run what it writes on the
// machine. Without a backslash, neither JSON nor YAML can spell the key but as "actuator".

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "controller/controller.h"
#include "fuzz.h"
#include "model/catalog.h"
#include "net/http_client.h"
#include "sim/sim.h"

using namespace gpufleet;
namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

constexpr std::string_view kFleet = R"(apiVersion: gpufleet/v1
kind: Fleet
teams:
  - {name: nlp, projects: [main]}
  - {name: vision, projects: [main]}
clusters:
  - name: train
    type: training
    site: lab-a
    team: nlp
    pools:
      - {name: h100, gpu_model: H100-SXM5-80GB, gpus_per_node: 8, size: 2}
  - name: edge
    type: edge
    site: lab-b
    team: vision
    pools:
      - {name: l4, gpu_model: L4, gpus_per_node: 1, size: 1}
)";

struct Fleet {
  fs::path dir;
  std::unique_ptr<Controller> controller;
  std::unique_ptr<SimFleet> sim;
  std::thread sim_thread;
  std::string url;
  std::map<std::string, std::string> tokens;  // admin, edge-admin, edge-operator

  net::HttpResult Call(const std::string& method, const std::string& path, const std::string& token,
                       const std::string& body,
                       const std::string& content_type = "application/json") {
    net::HttpCall call;
    call.method = method;
    call.url = url + path;
    call.body = body;
    call.timeout_ms = 60'000;
    call.headers = {{"Authorization", "Bearer " + token}, {"Content-Type", content_type}};
    auto r = net::Send(call);
    if (!r.ok())
      fuzz::Fail("the controller did not answer", method + " " + path + ": " + r.error().message);
    return *r;
  }

  void Start() {
    spdlog::set_level(spdlog::level::err);
    dir = fs::temp_directory_path() / ("gpufleet-fuzz-api-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    ControllerOptions options;
    options.listen = "127.0.0.1:0";
    options.data_dir = dir.string();
    controller = std::make_unique<Controller>(options);
    if (auto s = controller->Start(); !s.ok()) fuzz::Fail("start", s.error().message);
    if (auto s = controller->ApplyFleetYaml(std::string(kFleet), "fuzz-fleet.yaml"); !s.ok()) {
      fuzz::Fail("apply", s.error().message);
    }
    url = controller->url();
    std::ifstream in(controller->admin_token_path());
    std::getline(in, tokens["admin"]);
    sim = std::make_unique<SimFleet>(GpuCatalog::Builtin());
    for (auto [pool, model, nodes, gpus] :
         {std::tuple{"h100", "H100-SXM5-80GB", 2, 8}, std::tuple{"l4", "L4", 1, 1}}) {
      auto join = controller->IssueJoinToken(pool);
      if (!join.ok()) fuzz::Fail("join token", join.error().message);
      SimPoolOptions o;
      o.controller = url;
      o.join_token = *join;
      o.name_prefix = pool;
      o.nodes = nodes;
      o.gpus_per_node = gpus;
      o.model = model;
      if (auto s = sim->AddPool(o); !s.ok()) fuzz::Fail("sim", s.error().message);
    }
    sim_thread = std::thread([this] { sim->Run(1); });
    for (auto [name, role] : {std::pair{"edge-admin", "admin"}, {"edge-operator", "operator"}}) {
      json::object body{{"name", name}, {"role", role}, {"clusters", json::array{"edge"}}};
      auto r = Call("POST", "/api/v1/api-tokens", tokens["admin"], json::serialize(body));
      if (r.status != 201) fuzz::Fail("token", r.body);
      tokens[name] = json::parse(r.body).as_object().at("token").as_string().c_str();
    }
    for (int i = 0; i < 600; ++i) {  // the three nodes registered, within a minute
      auto r = Call("GET", "/api/v1/nodes", tokens["admin"], "");
      if (r.status == 200 && json::parse(r.body).as_object().at("total").to_number<int>() >= 3) {
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    fuzz::Fail("the simulated nodes did not register");
  }

  void Stop() {
    if (sim) sim->Stop();
    if (sim_thread.joinable()) sim_thread.join();
    if (controller) controller->Stop();
    controller.reset();
    sim.reset();
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

Fleet* fleet = nullptr;

bool Printable(std::string_view s) {
  for (char c : s) {
    if (c <= ' ' || c > '~') return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (!fleet) {
    fleet = new Fleet;
    fleet->Start();
    std::atexit([] { fleet->Stop(); });
  }
  const std::string_view input = fuzz::Text(data, size);
  const size_t eol = input.find('\n');
  const std::string_view line = input.substr(0, eol);
  const std::string body(eol == std::string_view::npos ? "" : input.substr(eol + 1));
  const size_t sp1 = line.find(' ');
  if (sp1 == std::string_view::npos) return 0;
  const std::string method(line.substr(0, sp1));
  std::string_view rest = line.substr(sp1 + 1);
  const size_t sp2 = rest.find(' ');
  const std::string path(rest.substr(0, sp2));
  const std::string who(sp2 == std::string_view::npos ? "admin" : rest.substr(sp2 + 1));
  if (method != "GET" && method != "POST" && method != "PUT" && method != "PATCH" &&
      method != "DELETE") {
    return 0;
  }
  // The HTTP layer is not what this target is for: a request line the client can send.
  if (path.empty() || path[0] != '/' || path.size() > 1024 || !Printable(path)) return 0;
  if (body.find("actuator") != std::string::npos || body.find('\\') != std::string::npos) {
    return 0;
  }
  auto token = fleet->tokens.find(who);
  if (token == fleet->tokens.end()) return 0;
  const bool json_body = body.empty() || body[0] == '{' || body[0] == '[';
  auto r =
      fleet->Call(method, path, token->second, body, json_body ? "application/json" : "text/csv");
  static const bool verbose = std::getenv("GPUFLEET_FUZZ_VERBOSE") != nullptr;
  if (verbose)
    std::fprintf(stderr, "  %s %s as %s -> %d %.200s\n", method.c_str(), path.c_str(), who.c_str(),
                 r.status, r.body.c_str());
  if (r.status >= 500 && r.status != 503) {
    fuzz::Fail("a server error",
               method + " " + path + " -> " + std::to_string(r.status) + " " + r.body);
  }
  if (r.status >= 400 && r.status < 500) {
    boost::system::error_code ec;
    auto v = json::parse(r.body, ec);
    const json::object* o = v.if_object();
    const json::value* e = o ? o->if_contains("error") : nullptr;
    if (!e || !e->is_object() || !e->as_object().contains("message")) {
      fuzz::Fail("a 4xx without an error message", method + " " + path + " -> " + r.body);
    }
  }
  return 0;
}
