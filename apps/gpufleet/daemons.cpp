// Wiring for serve, sim and up (the agent's is agent_command.cpp): parse flags, build the pieces
// from src/, wait for a signal, stop cleanly.

#include "apps/gpufleet/daemons.h"

#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "agent/agent.h"
#include "apps/gpufleet/agent_command.h"
#include "apps/gpufleet/process.h"
#include "apps/gpufleet/sim_actuator.h"
#include "cli/cli.h"
#include "cli/client.h"
#include "cli/output.h"
#include "common/clock.h"
#include "common/json_text.h"
#include "common/paths.h"
#include "common/url.h"
#include "config/fleet_spec.h"
#include "controller/controller.h"
#include "net/certs.h"
#include "remote/config.h"
#include "sim/sim.h"
#include "workload/generator.h"

namespace gpufleet {
namespace embedded {
std::string_view example_fleet();
}

namespace app {
namespace {

// Until SIGINT or SIGTERM; each SIGHUP re-reads the controller's TLS certificate and key.
int WaitForStop(const sigset_t& set, Controller& controller) {
  for (;;) {
    int sig = 0;
    sigwait(&set, &sig);
    if (sig != SIGHUP) return sig;
    if (auto s = controller.ReloadTls(); s.ok()) {
      spdlog::info("SIGHUP: TLS certificate and key re-read; new connections use them");
    } else {
      spdlog::error("SIGHUP: {}; the certificate in use stays", s.error().message);
    }
  }
}

struct ServeFlags {
  ControllerOptions options;
  std::string heartbeat_interval = "5s";
  std::string heartbeat_timeout = "30s";
  std::string health_interval = "5s";
  std::string drain_timeout = "10m";
  std::string job_retention = "7d";
  std::string usage_retention = "400d";
  std::string usage_interval = "1m";
  std::string reserve_after = "10m";
  std::string header_timeout = "30s";
  std::string log_level = "info";
  std::vector<std::string> remote_write;  // receivers' URLs
  std::string config_file;                // remote_write: receivers with settings
  uint64_t remote_write_window_mib = 1024;
};

void AddControllerFlags(CLI::App* cmd, ServeFlags& f) {
  cmd->add_option("--listen", f.options.listen, "HOST:PORT to serve on (port 0: any free one)");
  cmd->add_option("--store", f.options.store_url,
                  "store URL: sqlite:PATH (default sqlite:DATA_DIR/gpufleet.db) or "
                  "postgresql://USER@HOST:PORT/DB (libpq's URI)");
  cmd->add_option("--advertise-url", f.options.advertise_url,
                  "where the other controllers and people reach this one, e.g. "
                  "https://ctl-2:8080 (several controllers on one PostgreSQL; default: the "
                  "--listen URL)");
  cmd->add_option("--store-connections", f.options.store_connections,
                  "PostgreSQL: connections in the pool (default 8)")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--gpu-catalog", f.options.gpu_catalog, "GPU catalogue YAML (default: built in)");
  cmd->add_option("--xid-catalog", f.options.xid_catalog,
                  "XID catalogue YAML (default: built in, data/xid-catalog.yaml)");
  cmd->add_option("--heartbeat-interval", f.heartbeat_interval, "agents heartbeat this often");
  cmd->add_option("--heartbeat-timeout", f.heartbeat_timeout, "silent this long: unreachable");
  cmd->add_option("--health-interval", f.health_interval,
                  "re-evaluate GPU and node health this often (default 5s)");
  cmd->add_option("--drain-timeout", f.drain_timeout,
                  "a drain waits this long for a node's jobs, then requeues them (default 10m)");
  cmd->add_option("--job-retention", f.job_retention,
                  "ended jobs are kept this long, then dropped (default 7d)");
  cmd->add_option("--usage-retention", f.usage_retention,
                  "how long the usage ledger keeps an allocation after its end (default 400d: "
                  "13 months and more, for year-on-year reports)");
  cmd->add_option("--usage-interval", f.usage_interval,
                  "how often each pool's hour is added to: GPUs installed, held and queued for, "
                  "energy (default 1m)");
  cmd->add_option("--reserve-after", f.reserve_after,
                  "a job that does not fit waits this long, then nodes are kept for it so that "
                  "smaller jobs cannot starve it (default 10m; 0s: at once)");
  cmd->add_option("--threads", f.options.threads, "API I/O threads");
  cmd->add_option("--ingest-threads", f.options.ingest_threads,
                  "threads that decode and store agents' telemetry, apart from the API's "
                  "(default: one per core, at least 2)")
      ->check(CLI::Range(0, 256));
  cmd->add_option("--max-body", f.options.max_body_bytes, "largest request body in bytes");
  cmd->add_option("--log-level", f.log_level, "trace, debug, info, warn, error");
  cmd->add_option("--tls-cert", f.options.tls.cert_file,
                  "PEM certificate (and chain): serve HTTPS and WSS; re-read on SIGHUP");
  cmd->add_option("--tls-key", f.options.tls.key_file, "PEM private key of --tls-cert");
  cmd->add_option("--client-ca", f.options.tls.client_ca,
                  "PEM CA: agents must present a client certificate signed by it");
  cmd->add_flag("--insecure-plaintext", f.options.insecure_plaintext,
                "allow plain HTTP on an address that is not loopback (tokens in clear)");
  cmd->add_option("--max-connections", f.options.max_connections,
                  "open connections at most; more are closed at once (default 16384)")
      ->check(CLI::Range(1, 1'000'000));
  cmd->add_option("--header-timeout", f.header_timeout,
                  "a connection that sends no request headers this long is closed (default 30s)");
  cmd->add_option("--remote-write", f.remote_write,
                  "send every sample to this Prometheus remote-write URL (repeat for several), "
                  "e.g. http://127.0.0.1:8428/api/v1/write");
  cmd->add_option("--config", f.config_file,
                  "controller configuration YAML: a remote_write: list with credentials, CA and "
                  "series selectors (docs/configuration.md)");
  cmd->add_option("--remote-write-window", f.remote_write_window_mib,
                  "MiB of queued samples kept on disk for receivers that are behind (default 1024)")
      ->check(CLI::Range(16, 1 << 20));
}

// --remote-write URLs, then the configuration file's remote_write: list.
Status ReadRemoteWrite(ServeFlags& f) {
  for (const auto& url : f.remote_write) {
    auto r = remote::ReceiverFromUrl(url);
    if (!r.ok())
      return MakeError(ErrorCode::kInvalidArgument, "--remote-write " + r.error().message);
    f.options.remote_write.push_back(std::move(r.value()));
  }
  if (!f.config_file.empty()) {
    std::ifstream in(f.config_file);
    if (!in)
      return MakeError(ErrorCode::kInvalidArgument, "--config: cannot read " + f.config_file);
    std::stringstream text;
    text << in.rdbuf();
    auto list = remote::ParseReceivers(text.str(), f.config_file);
    if (!list.ok()) return list.error();
    for (auto& r : list.value()) f.options.remote_write.push_back(std::move(r));
  }
  f.options.remote_write_window_bytes = f.remote_write_window_mib << 20;
  return {};
}

Status Finish(ServeFlags& f, const cli::Globals& g) {
  f.options.data_dir = g.data_dir.empty() ? DefaultDataDir() : g.data_dir;
  if (!f.options.advertise_url.empty()) {
    auto u = ParseHttpUrl(f.options.advertise_url, "8080");
    if (!u.ok())
      return MakeError(ErrorCode::kInvalidArgument, "--advertise-url " + u.error().message);
  }
  f.options.heartbeat_interval_ms = static_cast<int>(ParseDurationMs(f.heartbeat_interval));
  f.options.heartbeat_timeout_ms = static_cast<int>(ParseDurationMs(f.heartbeat_timeout));
  if (f.options.heartbeat_interval_ms <= 0 || f.options.heartbeat_timeout_ms <= 0) {
    return MakeError(ErrorCode::kInvalidArgument, "heartbeat durations look like 500ms, 5s, 1m");
  }
  f.options.health_interval_ms = static_cast<int>(ParseDurationMs(f.health_interval));
  if (f.options.health_interval_ms < 100) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "--health-interval must be a duration of at least 100ms, e.g. 5s");
  }
  f.options.drain_timeout_ms = ParseDurationMs(f.drain_timeout);
  if (f.options.drain_timeout_ms <= 0) {
    return MakeError(ErrorCode::kInvalidArgument, "--drain-timeout must be a duration, e.g. 10m");
  }
  f.options.job_retention_ms = ParseDurationMs(f.job_retention);
  if (f.options.job_retention_ms <= 0) {
    return MakeError(ErrorCode::kInvalidArgument, "--job-retention must be a duration, e.g. 7d");
  }
  f.options.usage_retention_ms = ParseDurationMs(f.usage_retention);
  if (f.options.usage_retention_ms < 86'400'000LL) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "--usage-retention must be a duration of a day or more, e.g. 400d");
  }
  f.options.usage_interval_ms = ParseDurationMs(f.usage_interval);
  if (f.options.usage_interval_ms < 1000 || f.options.usage_interval_ms > 3'600'000) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "--usage-interval must be a duration from 1s to 1h, e.g. 1m");
  }
  f.options.header_timeout_ms = static_cast<int>(ParseDurationMs(f.header_timeout));
  if (f.options.header_timeout_ms < 100 || f.options.header_timeout_ms > 3'600'000) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "--header-timeout must be a duration from 100ms to 1h, e.g. 30s");
  }
  f.options.reserve_after_ms = ParseDurationMs(f.reserve_after);
  if (f.options.reserve_after_ms < 0) {
    return MakeError(ErrorCode::kInvalidArgument, "--reserve-after must be a duration, e.g. 10m");
  }
  if (f.options.heartbeat_timeout_ms <= f.options.heartbeat_interval_ms) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "--heartbeat-timeout must be longer than --heartbeat-interval");
  }
  GF_TRY(ReadRemoteWrite(f));
  SetLogLevel(f.log_level);
  return {};
}

int RunServe(ServeFlags& f, const cli::Globals& g) {
  if (auto s = Finish(f, g); !s.ok()) return Fail(s.error());
  // What the scraper and the notifier trust: --ca-file, else $GPUFLEET_CA_FILE or the system's.
  if (!g.ca_file.empty() || g.insecure_skip_verify) {
    if (g.insecure_skip_verify) {
      spdlog::warn(
          "--insecure-skip-verify: the certificates of exporters and channels are not "
          "checked");
    }
    auto trust = net::ClientOptionsFromEnv(g.ca_file, g.insecure_skip_verify);
    if (auto s = net::SetDefaultClientOptions(trust); !s.ok()) return Fail(s.error());
  }
  sigset_t set = BlockStopSignals(true);
  // Pools whose scaling policy says `actuator: {type: sim}` get simulated nodes from here.
  SimFleet sim(GpuCatalog::Builtin());
  std::thread io([&] { sim.Run(1); });
  int rc = 0;
  {
    ControllerOptions options = f.options;  // destroyed before `sim`, with its actuator
    // Each simulated node's token kept in the data directory: started again after a restart,
    // it rejoins as itself.
    options.sim_actuator = MakeSimActuator(sim, nullptr, "", options.data_dir + "/sim-agents");
    Controller controller(options);
    if (auto s = controller.Start(); !s.ok()) {
      rc = Fail(s.error());
    } else {
      int sig = WaitForStop(set, controller);
      spdlog::info("signal {}: stopping", sig);
    }
    controller.Stop();
  }
  sim.Stop();
  io.join();
  return rc;
}

struct SimFlags {
  SimPoolOptions pool;
  SimActionFlags actions;
  int threads = 1;
  std::string log_level = "warn";
  std::string workload = "on";
};

// The demo workload on the simulated pool, through the API (POST /api/v1/jobs) with `token`:
// the pool is the first node's, its capacity the simulated nodes' GPUs. Runs until `done`.
void SimWorkload(const SimFlags& f, const std::string& token, const cli::Globals& g,
                 const std::atomic<bool>& done) {
  cli::HttpClient client(SplitUrlList(f.pool.controller).front(), token, cli::ClientTls(g, false));
  char first[128];
  std::snprintf(first, sizeof first, "%s-%04d", f.pool.name_prefix.c_str(), f.pool.first_index);
  auto node = client.Send("GET", "/api/v1/nodes/" + std::string(first));
  std::string pool;
  if (node.ok() && node->status == 200) {
    boost::system::error_code ec;
    auto v = boost::json::parse(node->body, ec);
    if (!ec && v.is_object() && v.as_object().contains("pool")) {
      pool = std::string(v.at("pool").as_string());
    }
  }
  if (pool.empty()) {
    std::printf("sim: no workload: cannot read node %s with that token (%s)\n", first,
                node.ok() ? ("HTTP " + std::to_string(node->status)).c_str()
                          : node.error().message.c_str());
    std::fflush(stdout);
    return;
  }
  // The teams' projects, and the pool's owner, from the controller.
  std::vector<workload::DemoTeam> teams;
  std::string owner;
  if (auto r = client.Send("GET", "/api/v1/teams?limit=1000"); r.ok() && r->status == 200) {
    boost::system::error_code ec;
    auto v = boost::json::parse(r->body, ec);
    if (!ec && v.is_object() && v.as_object().contains("items")) {
      for (const auto& t : v.at("items").as_array()) {
        workload::DemoTeam d{std::string(t.at("name").as_string()), {}};
        for (const auto& p : t.at("projects").as_array()) {
          d.projects.emplace_back(p.at("name").as_string());
        }
        for (const auto& p : t.at("pools").as_array()) {
          if (p.as_string() == pool) owner = d.name;
        }
        if (!d.projects.empty()) teams.push_back(std::move(d));
      }
    }
  }
  if (teams.empty()) {
    std::printf(
        "sim: no workload: no team has a project (gpufleet teams create NAME "
        "--project P)\n");
    std::fflush(stdout);
    return;
  }
  workload::WorkloadGenerator generator(
      [&client](workload::JobSpec spec) -> Status {
        boost::json::object body{
            {"team", spec.team},         {"project", spec.project},
            {"pool", spec.pool},         {"gpus", spec.gpus},
            {"priority", spec.priority}, {"duration", std::to_string(spec.duration_ms) + "ms"}};
        if (!spec.sim_profile.empty()) body["sim_profile"] = spec.sim_profile;
        auto r = client.Send("POST", "/api/v1/jobs", JsonText(body));
        if (!r.ok()) return r.error();
        if (r->status >= 400) {
          return MakeError(ErrorCode::kUnavailable,
                           "POST /api/v1/jobs: HTTP " + std::to_string(r->status) + " " + r->body);
        }
        return {};
      },
      {{pool, f.pool.gpus_per_node, f.pool.nodes * f.pool.gpus_per_node, owner, true, ""}},
      std::move(teams));
  std::printf("sim: demo workload on pool %s (--workload off: none)\n", pool.c_str());
  std::fflush(stdout);
  auto clock = RealClock();
  while (!done) {
    generator.Tick(clock->NowMs());
    for (int i = 0; i < 10 && !done; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

int RunSim(SimFlags& f, const cli::Globals& g) {
  SetLogLevel(f.log_level);
  auto tls = ClientContext(f.pool.controller, g);
  if (!tls.ok()) return Fail(tls.error());
  f.pool.tls = tls.value();
  sigset_t set = BlockStopSignals();
  SimFleet fleet(GpuCatalog::Builtin());
  auto times = f.actions.Times();
  if (!times.ok()) return Fail(times.error());
  fleet.SetActions(times.value(), f.actions.action_log);
  if (auto s = fleet.AddPool(f.pool); !s.ok()) return Fail(s.error());
  auto clock = RealClock();
  int64_t start = clock->NowMs();
  std::thread io([&] { fleet.Run(f.threads); });
  std::atomic<bool> done{false};
  std::thread progress([&] {
    bool reported = false;
    while (!done) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      int connected = fleet.stats().connected.load();
      if (!reported && connected >= fleet.nodes()) {
        std::printf("sim: %d/%d nodes registered in %.2f s\n", connected, fleet.nodes(),
                    (clock->NowMs() - start) / 1000.0);
        std::fflush(stdout);
        reported = true;
        if (f.workload == "on") {
          std::string token = cli::ResolveToken(g);
          if (token.empty()) {
            std::printf("sim: no API token (--token, GPUFLEET_TOKEN or --data-dir): no workload\n");
            std::fflush(stdout);
          } else {
            SimWorkload(f, token, g, done);
          }
        }
      }
    }
  });
  WaitForSignal(set);
  done = true;
  progress.join();
  fleet.Stop();
  io.join();
  return 0;
}

struct UpFlags {
  ServeFlags serve;
  SimActionFlags actions;
  std::string fleet_file;
  std::string workload = "on";
  bool tls = false;
};

// `up --tls`: the data directory's own CA and certificate (made on the first run, kept after),
// served by the controller and trusted by the simulated agents.
Result<net::TlsContext> UpTls(ServeFlags& f) {
  std::string dir = f.options.data_dir + "/tls";
  auto files = net::TlsFiles::In(dir);
  if (!std::filesystem::exists(files.cert)) {
    std::vector<std::string> hosts{"localhost", "127.0.0.1", "::1"};
    std::string name = HostFacts().hostname;
    if (!name.empty() && name != "localhost") hosts.push_back(name);
    auto made = net::InitTls(dir, hosts, true);
    if (!made.ok()) return made.error();
  }
  f.options.tls.cert_file = files.cert;
  f.options.tls.key_file = files.key;
  net::TlsClientOptions trust;
  trust.ca_file = files.ca_cert;
  return net::MakeClientContext(trust);
}

// The demo's staged software, so that the Security page has something true to judge
// (docs/security.md): nodes run R580's current release, 580.159.03, except every fourth node
// of a training or inference pool and all of the development pools, on 580.95.05 (published
// CVEs, fixed in 580.159.03); the first node of each edge pool runs 535.247.01 (R535 ended in
// June 2026); the second node of the first inference pool has Container Toolkit 1.17.3
// (CVE-2025-23266, CVSS 9.0: a critical alert); the third node of the first training pool has
// a package its profile forbids and its fifth node GPUs at a 500 W power limit, where the profile
// asks for 700 W (remediated by the agent: docs/configuration.md, "Golden profiles and drift");
// the second half of each edge pool is labelled enclosure=fanless, and the first of those starts
// at its GPU's TDP where the profile's override for them asks for 60 W (remediated too).
void StageDemoSoftware(const FleetSpec& spec, const Pool& pool, bool first_inference,
                       bool first_training, SimPoolOptions& o) {
  constexpr char kCurrent[] = "580.159.03", kOlder[] = "580.95.05", kEol[] = "535.247.01";
  auto cluster = std::find_if(spec.clusters.begin(), spec.clusters.end(),
                              [&](const Cluster& c) { return c.name == pool.cluster; });
  const ClusterType type = cluster != spec.clusters.end() ? cluster->type : ClusterType::kTraining;
  switch (type) {
    case ClusterType::kDevelopment:
      o.drivers = {kOlder};
      break;
    case ClusterType::kEdge:
      o.drivers.assign(std::max(pool.size, 1), kCurrent);
      o.drivers[0] = kEol;
      // The second half of the stores have fanless enclosures (examples/fleet.yaml's profile
      // override caps them at 60 W): all but the first of them start at 60 W.
      if (pool.size > 1) {
        o.labels.assign(pool.size, "-");
        o.power_limits.assign(pool.size, "-");
        for (int i = pool.size / 2; i < pool.size; ++i) {
          o.labels[i] = "enclosure=fanless";
          if (i > pool.size / 2) o.power_limits[i] = "60";
        }
      }
      break;
    default:
      o.drivers = {kCurrent, kCurrent, kCurrent, kOlder};
  }
  if (first_inference && pool.size > 1) {
    o.container_toolkits.assign(pool.size, "1.19.1");
    o.container_toolkits[1] = "1.17.3";
  }
  // Unauthorized software: a cryptocurrency miner on the third node of the first training pool
  // (examples/fleet.yaml's training profile forbids it).
  if (first_training && pool.size > 2) {
    o.extra_packages.assign(pool.size, "");
    o.extra_packages[2] = "xmrig=6.21.0";
  }
  if (first_training && pool.size > 4) {
    o.power_limits.assign(pool.size, "-");
    o.power_limits[4] = "500";
  }
}

int RunUp(UpFlags& f, const cli::Globals& g) {
  if (auto s = Finish(f.serve, g); !s.ok()) return Fail(s.error());
  std::string yaml, filename = f.fleet_file;
  if (filename.empty() && std::filesystem::exists("examples/fleet.yaml"))
    filename = "examples/fleet.yaml";
  if (filename.empty()) {
    yaml = std::string(embedded::example_fleet());
    filename = "examples/fleet.yaml (built in)";
  } else {
    std::ifstream in(filename);
    if (!in) return Fail(MakeError(ErrorCode::kNotFound, "cannot read " + filename));
    std::stringstream buf;
    buf << in.rdbuf();
    yaml = buf.str();
  }
  auto catalog = GpuCatalog::Builtin();
  auto spec = ParseFleetSpec(yaml, filename, *catalog);
  if (!spec.ok()) return Fail(spec.error());
  net::TlsContext agent_tls;
  if (f.tls) {
    auto tls = UpTls(f.serve);
    if (!tls.ok()) return Fail(tls.error());
    agent_tls = tls.value();
  }

  sigset_t set = BlockStopSignals(true);
  // One simulated fleet: the pools' initial nodes, and what their autoscalers start.
  SimFleet sim(catalog);
  auto times = f.actions.Times();
  if (!times.ok()) return Fail(times.error());
  sim.SetActions(times.value(), f.actions.action_log);
  ControllerOptions options = f.serve.options;  // destroyed before `sim`, with its actuator
  options.sim_actuator = MakeSimActuator(sim, agent_tls, "580.159.03",  // the demo's image
                                         f.serve.options.data_dir + "/sim-agents");
  options.demo_workload = f.workload == "on";
  options.defer_scaling = true;  // started below, once the pools' own nodes have registered
  Controller controller(options);
  if (auto s = controller.Start(); !s.ok()) return Fail(s.error());
  if (auto s = controller.ApplyFleetYaml(yaml, filename); !s.ok()) return Fail(s.error());
  int nodes = 0, gpus = 0;
  bool inference_seen = false, training_seen = false;
  for (const auto& pool : spec->pools) {
    if (pool.size == 0) continue;
    auto token = controller.IssueJoinToken(pool.name);
    if (!token.ok()) return Fail(token.error());
    SimPoolOptions o;
    o.controller = controller.url();
    o.tls = agent_tls;
    o.join_token = token.value();
    // Each node's token kept in the data directory: `gpufleet up` run again on it rejoins as
    // the same nodes (a join token admits only names not registered yet).
    o.token_dir = f.serve.options.data_dir + "/sim-agents";
    o.name_prefix = pool.name;
    o.nodes = pool.size;
    o.gpus_per_node = pool.gpus_per_node;
    o.model = pool.gpu_model;
    auto of_type = [&](ClusterType type) {
      return std::any_of(spec->clusters.begin(), spec->clusters.end(),
                         [&](auto& c) { return c.name == pool.cluster && c.type == type; });
    };
    const bool inference = of_type(ClusterType::kInference);
    const bool training = of_type(ClusterType::kTraining);
    StageDemoSoftware(*spec, pool, inference && !inference_seen, training && !training_seen, o);
    inference_seen = inference_seen || inference;
    training_seen = training_seen || training;
    if (auto s = sim.AddPool(o); !s.ok()) return Fail(s.error());
    nodes += pool.size;
    gpus += pool.size * pool.gpus_per_node;
  }
  std::thread io([&] { sim.Run(1); });
  // The fleet file's policies are set, but the pools' nodes are only now registering: a
  // decision before they have would see an empty pool and start nodes the pool already has (on
  // a slow machine it did). So autoscaling starts once they are all connected, or after two
  // minutes at most (a node that never registers must not hold scaling off for good).
  std::atomic<bool> stopping{false};
  std::thread scaling_start([&] {
    auto until = std::chrono::steady_clock::now() + std::chrono::minutes(2);
    while (!stopping && sim.stats().connected.load() < nodes &&
           std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (stopping) return;
    controller.StartScaling();
    // The demo's purchase dates, warranties and racks on the assets discovery found.
    if (auto s = controller.SeedDemoAssets(); !s.ok()) {
      spdlog::warn("demo assets: {}", s.error().message);
    }
  });
  // The pool a rollout demo suggests: a development cluster's, where a new driver goes first.
  auto in_development = [&](const Pool& p) {
    return p.size > 0 && std::any_of(spec->clusters.begin(), spec->clusters.end(), [&](auto& c) {
             return c.name == p.cluster && c.type == ClusterType::kDevelopment;
           });
  };
  auto dev = std::find_if(spec->pools.begin(), spec->pools.end(), in_development);
  std::string demo_pool = dev != spec->pools.end() ? dev->name
                          : spec->pools.empty()    ? "POOL"
                                                   : spec->pools.front().name;
  std::printf(
      "\ngpufleet is up: %zu clusters, %zu pools, %d simulated nodes with %d GPUs (from %s)\n\n"
      "  Dashboard and API:  %s/\n"
      "%s"
      "  Admin token:        %s\n"
      "  Grafana, promtool:  %s/prometheus (a Prometheus data source: the token as bearer, or\n"
      "                      as the basic-auth password; docs/grafana.md)\n"
      "  Try:                gpufleet --data-dir %s nodes list\n"
      "  Workload:           %s\n"
      "  Jobs:               gpufleet jobs list (and the dashboard's Jobs page)\n"
      "  Autoscaled pools:   %zu (gpufleet scaling list; gpufleet scaling tune POOL)\n"
      "  Inventory:          gpufleet assets summary; gpufleet assets list (and the Inventory\n"
      "                      page): purchase dates, warranties and racks are the demo's\n"
      "  Security:           some simulated nodes run drivers with published CVEs (staged):\n"
      "                      gpufleet vulns list; gpufleet vulns fix --pool %s proposes the\n"
      "                      rollout to 580.159.03 (then rollouts start, and the dashboard's\n"
      "                      Security and Rollouts pages)\n\n"
      "Press Ctrl-C to stop.\n",
      spec->clusters.size(), spec->pools.size(), nodes, gpus, filename.c_str(),
      controller.url().c_str(),
      f.tls ? ("  TLS:                a private CA, " + f.serve.options.data_dir +
               "/tls/ca.pem: import it into the browser, or accept its warning once\n")
                  .c_str()
            : "",
      controller.admin_token_path().c_str(), controller.url().c_str(),
      f.serve.options.data_dir.c_str(),
      options.demo_workload ? "teams submit jobs with a daily rhythm (--workload off: none)"
                            : "none (--workload on: teams submit jobs with a daily rhythm)",
      spec->scaling.size(), demo_pool.c_str());
  std::fflush(stdout);
  WaitForStop(set, controller);
  stopping = true;
  scaling_start.join();
  std::printf("stopping...\n");
  std::fflush(stdout);  // a log shows how far a slow stop got
  sim.Stop();
  io.join();
  controller.Stop();
  return 0;
}

}  // namespace

void AddDaemonCommands(CLI::App& app, cli::Globals& g) {
  static ServeFlags serve;
  auto* s = app.add_subcommand("serve", "Run the controller");
  AddControllerFlags(s, serve);
  s->callback([&g] { g.exit_code = RunServe(serve, g); });

  static AgentFlags agent;
  auto* a = app.add_subcommand("agent", "Run the node agent");
  AddAgentFlags(a, agent);
  a->callback([&g] { g.exit_code = RunAgent(agent, g); });

  static SimFlags sim;
  auto* m = app.add_subcommand("sim", "Run a simulated fleet of agents");
  m->add_option("--controller", sim.pool.controller,
                "controller URL (required to run); several comma-separated, as the agent's");
  m->add_option("--join-token", sim.pool.join_token, "pool join token (required to run)");
  m->add_option("--nodes", sim.pool.nodes, "number of simulated nodes");
  m->add_option("--gpus-per-node", sim.pool.gpus_per_node, "GPUs per node");
  m->add_option("--model", sim.pool.model, "GPU model id from the catalogue");
  m->add_option("--prefix", sim.pool.name_prefix, "node name prefix");
  m->add_option("--first-index", sim.pool.first_index, "number of the first node");
  m->add_option("--driver", sim.pool.drivers,
                "the driver the nodes run (repeat or comma-separate: node N runs the N-th, "
                "cycling; default 550.54.15)")
      ->delimiter(',');
  m->add_option("--container-toolkit", sim.pool.container_toolkits,
                "the NVIDIA Container Toolkit version the nodes report (cycling as --driver; "
                "default 1.19.1)")
      ->delimiter(',');
  m->add_option("--package", sim.pool.extra_packages,
                "a package NAME=VERSION installed beside the base ones (cycling as --driver; "
                "'-': none), e.g. '-,-,xmrig=6.21.0' on the third node")
      ->delimiter(',');
  m->add_option("--labels", sim.pool.labels,
                "the node's labels, KEY=VALUE joined by ';' (cycling as --driver; '-': none), "
                "e.g. '-,rack=r2;zone=b' on the second node")
      ->delimiter(',');
  m->add_option("--power-limit", sim.pool.power_limits,
                "every GPU's power limit in watts at start (cycling as --driver; '-': the "
                "model's TDP), e.g. '-,500' on the second node")
      ->delimiter(',');
  m->add_option("--state-dir", sim.pool.token_dir,
                "where each node keeps its node token (NAME.token), to rejoin as the same nodes "
                "when run again");
  m->add_option("--threads", sim.threads, "I/O threads");
  sim.actions.Add(m);
  m->add_option("--log-level", sim.log_level, "trace, debug, info, warn, error");
  m->add_option("--workload", sim.workload,
                "on: teams submit jobs to the pool with a daily rhythm, through the API with "
                "--token (default); off: none")
      ->check(CLI::IsMember({"on", "off"}));
  m->require_subcommand(0, 1);
  cli::AddSimInjectCommand(*m, g);
  cli::AddSimDriftCommand(*m, g);
  cli::AddSimFaultyCommand(*m, g);
  m->callback([&g, m] {
    if (!m->get_subcommands().empty()) return;  // `sim inject` (or faulty-version) ran instead
    if (sim.pool.controller.empty() || sim.pool.join_token.empty()) {
      std::fprintf(stderr, "error: sim needs --controller and --join-token\n");
      g.exit_code = 2;
      return;
    }
    g.exit_code = RunSim(sim, g);
  });

  static UpFlags up;
  auto* u = app.add_subcommand("up", "Run a controller and a simulated fleet (the demo)");
  AddControllerFlags(u, up.serve);
  u->add_option("-f,--fleet", up.fleet_file, "fleet YAML (default examples/fleet.yaml)");
  u->add_option("--workload", up.workload,
                "on: teams submit jobs with a daily rhythm (default); off: an idle fleet")
      ->check(CLI::IsMember({"on", "off"}));
  up.actions.Add(u);
  u->add_flag("--tls", up.tls,
              "serve HTTPS with a private CA made in DATA_DIR/tls (kept across runs); the "
              "simulated agents trust it");
  u->callback([&g] { g.exit_code = RunUp(up, g); });
}

}  // namespace app
}  // namespace gpufleet
