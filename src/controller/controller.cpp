#include "controller/controller.h"

#include <malloc.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>

#include "alerting/notifier.h"
#include "api/api.h"
#include "common/crypto.h"
#include "config/fleet_spec.h"
#include "controller/cycle_event.h"
#include "controller/leader.h"
#include "controller/locks.h"
#include "controller/relay.h"
#include "controller/remote_write.h"
#include "demo/demo.h"
#include "fleet/assets.h"
#include "fleet/fleet.h"
#include "health/service.h"
#include "ingest/ingest.h"
#include "lifecycle/compat_service.h"
#include "lifecycle/compliance_service.h"
#include "lifecycle/drift_service.h"
#include "lifecycle/rollout_service.h"
#include "lifecycle/vuln_service.h"
#include "runtime/command_bus.h"
#include "runtime/leadership.h"
#include "runtime/services.h"
#include "runtime/ticker.h"
#include "scaling/scaling.h"
#include "scrape/scraper.h"
#include "slurm/bridge.h"
#include "store/lease.h"
#include "store/store.h"
#include "telemetry/telemetry.h"
#include "usage/capacity.h"
#include "usage/usage.h"
#include "workload/generator.h"
#include "workload/jobs.h"

namespace gpufleet {

struct Controller::Impl {
  ControllerOptions options;
  std::shared_ptr<Clock> clock = RealClock();
  std::shared_ptr<const GpuCatalog> catalog;
  std::string key;  // the data directory's secret.key
  store::Stores stores;
  std::unique_ptr<runtime::CommandBus> commands;
  std::unique_ptr<FleetService> fleet;
  std::unique_ptr<TeamService> teams;
  std::unique_ptr<AssetService> assets;
  std::unique_ptr<TelemetryStore> telemetry;
  std::unique_ptr<health::HealthService> health;
  std::unique_ptr<workload::JobService> jobs;
  std::unique_ptr<slurm::Bridge> slurm;  // the clusters that Slurm schedules
  std::unique_ptr<usage::UsageService> usage;
  std::unique_ptr<scaling::ScalingService> scaling;
  std::unique_ptr<lifecycle::CompatService> compat;
  std::unique_ptr<lifecycle::RolloutService> rollouts;
  std::unique_ptr<lifecycle::VulnService> vulns;
  std::unique_ptr<lifecycle::DriftService> drift;
  std::unique_ptr<lifecycle::ComplianceService> compliance;
  std::unique_ptr<alerting::Notifier> notifier;
  std::unique_ptr<alerting::SeriesReader> series_reader;  // the ticker's
  alerting::AlertInputs alert_inputs;      // what the engines show the rules; the ticker's
  std::unique_ptr<ingest::Ingest> ingest;  // the agent channel's handler, the scraper's sink
  std::unique_ptr<scrape::Scraper> scraper;
  std::unique_ptr<remote::RemoteWriter> remote_write;  // null: no receiver
  std::unique_ptr<runtime::Services> services;         // what the API serves
  // The data directory's, and a SQLite store's: one controller each (locks.h).
  std::vector<FileLock> locks;
  std::unique_ptr<api::ApiServer> server;
  std::unique_ptr<runtime::Ticker> ticker;
  std::unique_ptr<runtime::Leadership> leadership;  // the engines run while this one leads
  std::unique_ptr<CommandRelay> relay;         // commands to agents connected to other controllers
  std::unique_ptr<store::ChangeFeed> changes;  // what other controllers change; PostgreSQL only
  std::unique_ptr<workload::WorkloadGenerator> generator;  // the ticker's
  demo::SimLoadPusher sim_loads;                           // the ticker's
  std::string address;
  std::atomic<bool> stopped{false};
  // Whether the ticker makes autoscaling decisions (false until StartScaling() when Start()
  // deferred them).
  std::atomic<bool> scaling_on{false};

  Status Build();         // the stores and the services, each loaded
  Status OpenStores();    // the catalog, the stores, the telemetry store
  Status MakeServices();  // each loaded from the stores
  void ListServices();    // the one list the API takes
  void Wire();            // what the services ask of each other
  void AddTasks(Controller& controller);
  Status MakeLeadership();  // before the server; started once it listens
  Status HealthCycle();
};

Status Controller::Impl::Build() {
  GF_TRY(OpenStores());
  GF_TRY(MakeServices());
  ListServices();
  return {};
}

Status Controller::Impl::OpenStores() {
  auto& o = options;
  if (o.gpu_catalog.empty()) {
    catalog = GpuCatalog::Builtin();
  } else {
    auto c = GpuCatalog::Load(o.gpu_catalog);
    if (!c.ok()) return c.error();
    catalog = c.value();
  }
  auto opened = store::Open(o.store_url, {o.store_connections});
  if (!opened.ok()) return opened.error();
  stores = std::move(opened.value());
  commands = std::make_unique<runtime::CommandBus>(clock);
  auto opened_tsdb = TelemetryStore::Open({o.data_dir + "/tsdb", {}});
  if (!opened_tsdb.ok()) return opened_tsdb.error();
  telemetry = std::move(opened_tsdb.value());
  const auto& replay = telemetry->replay();
  spdlog::info("telemetry: {} series from the checkpoint, {} points replayed from the log{}",
               replay.checkpoint_series, replay.wal_points,
               replay.torn_bytes
                   ? " (a torn tail of " + std::to_string(replay.torn_bytes) + " bytes was cut)"
                   : "");
  return {};
}

Status Controller::Impl::MakeServices() {
  auto& o = options;
  auto& db = stores;
  FleetOptions fo;
  fo.heartbeat_interval_ms = o.heartbeat_interval_ms;
  fo.heartbeat_timeout_ms = o.heartbeat_timeout_ms;
  fleet = std::make_unique<FleetService>(*db.fleet, *db.tokens, catalog, clock, fo);
  GF_TRY(fleet->Load());
  teams = std::make_unique<TeamService>(*db.teams, clock);
  GF_TRY(teams->Load());
  assets = std::make_unique<AssetService>(*db.assets, clock);
  GF_TRY(assets->Load());
  auto xids = XidCatalog::Builtin();
  if (!o.xid_catalog.empty()) {
    auto loaded = XidCatalog::Load(o.xid_catalog);
    if (!loaded.ok()) return loaded.error();
    xids = loaded.value();
  }
  health = std::make_unique<health::HealthService>(*fleet, *telemetry, *db.fleet, *db.audit,
                                                   catalog, xids, clock);
  health->set_max_answer_age(2 * o.health_interval_ms);  // reads from the health task's cycle
  GF_TRY(health->Load());
  jobs = std::make_unique<workload::JobService>(*fleet, *db.jobs, clock, o.drain_timeout_ms,
                                                o.job_retention_ms, o.reserve_after_ms);
  jobs->set_audit(db.audit.get());  // allocations, from the first placement on
  jobs->set_teams(teams.get());
  GF_TRY(jobs->Load());
  slurm = std::make_unique<slurm::Bridge>(*fleet, *jobs, teams.get(), clock);
  usage = std::make_unique<usage::UsageService>(*jobs, *fleet, *telemetry, *db.usage, clock,
                                                o.usage_retention_ms);
  usage->set_settings(db.settings.get());
  usage->set_capacity_interval(o.usage_interval_ms);
  scaling::ScalingOptions so;
  so.sim = o.sim_actuator;
  scaling =
      std::make_unique<scaling::ScalingService>(*fleet, *jobs, *db.scaling, *db.audit, clock, so);
  GF_TRY(scaling->Load());
  compat = std::make_unique<lifecycle::CompatService>(*fleet, *db.settings, catalog, clock);
  GF_TRY(compat->Load());
  rollouts = std::make_unique<lifecycle::RolloutService>(*fleet, compat.get(), *db.rollouts,
                                                         *db.audit, clock);
  GF_TRY(rollouts->Load());
  vulns = std::make_unique<lifecycle::VulnService>(*fleet, *compat, *db.settings, clock);
  GF_TRY(vulns->Load());
  drift = std::make_unique<lifecycle::DriftService>(*fleet, *db.drift, clock, db.audit.get());
  GF_TRY(drift->Load());
  compliance = std::make_unique<lifecycle::ComplianceService>(
      *fleet, *compat, *vulns, *drift, *db.compliance, *db.audit, key, clock);
  notifier = std::make_unique<alerting::Notifier>(*db.alerting, clock, "");
  GF_TRY(notifier->Load());
  series_reader = alerting::MakeTelemetryReader(*telemetry);
  ingest = std::make_unique<ingest::Ingest>(*fleet, *telemetry, *db.fleet, *health, *db.audit,
                                            *commands);
  scraper = std::make_unique<scrape::Scraper>(
      clock, [this](const scrape::ScrapeTarget& t, int64_t now, const scrape::DcgmReading& r) {
        return ingest->OnScrape(t, now, r);
      });
  scraper->SetTargets(ingest::ScrapeTargets(*fleet));
  GF_TRY_ASSIGN(remote_write, OpenRemoteWrite(o, *fleet, *telemetry));  // tap before agents
  return {};
}

void Controller::Impl::ListServices() {
  services = std::make_unique<runtime::Services>(runtime::Services{
      .fleet = *fleet,
      .store = stores,
      .catalog = catalog,
      .clock = clock,
      .telemetry = *telemetry,
      .agents = *ingest,
      .scrape_targets = [this] { return scraper->Targets(); },
      .secret_key = key,
      .commands = commands.get(),
      .health = health.get(),
      .alerts = notifier.get(),
      .jobs = jobs.get(),
      .slurm = slurm.get(),
      .scaling = scaling.get(),
      .compat = compat.get(),
      .rollouts = rollouts.get(),
      .vulns = vulns.get(),
      .drift = drift.get(),
      .compliance = compliance.get(),
      .teams = teams.get(),
      .usage = usage.get(),
      .assets = assets.get(),
      .remote_write = remote_write.get(),
  });
}

void Controller::Impl::Wire() {
  // A node of a Slurm cluster is drained when Slurm says so, besides its jobs having ended.
  fleet->set_busy_check(
      [this](const std::string& node) { return jobs->Busy(node) || slurm->Holds(node); });
  jobs->set_drain_hold([this](const std::string& node) { return slurm->Holds(node); });
  drift->set_rollout_targets([this] { return rollouts->ActiveTargets(); });
  notifier->set_team_channels([this] { return teams->Channels(); });
  // Commands to agents: remediation, drift's settings, rollouts and node actions each get their
  // answers back from the bus.
  health->set_commands(commands.get());
  drift->set_commands(commands.get());
  lifecycle::RolloutHooks hooks;
  hooks.commands = commands.get();
  hooks.busy = [this](const std::string& node) { return jobs->Busy(node); };  // Slurm's too
  hooks.drain_timeout = [this](const std::string& node, int64_t ms) {
    jobs->SetDrainTimeout(node, ms);
  };
  // What the rollouts' gates watch: the health model's XIDs and the alerts firing.
  hooks.last_xid = [this] { return LastXidByNode(*fleet, *health); };
  hooks.alerting = [this] {
    std::map<std::string, std::string> out;
    for (const auto& a : notifier->Alerts()) {
      auto host = a.labels.find("Hostname");
      if (a.state == alerting::State::kFiring && host != a.labels.end()) {
        out.emplace(host->second, a.rule);
      }
    }
    return out;
  };
  hooks.gpu_reset = [this](const std::string& node, int gpu) { health->OnReset(node, gpu); };
  rollouts->set_hooks(std::move(hooks));
  // What the engines show the alert rules, each under its metric's name: the rollouts
  // (RolloutHalted, RolloutNodeFailed), drift (NodeDrift, NodeDriftHigh), the vulnerability
  // status (NodeCriticalCve).
  auto must = [](const Status& s) {
    if (!s.ok()) spdlog::critical("alert inputs: {}", s.error().message);
  };
  must(alert_inputs.AddController(
      "rollouts_halted", [this] { return static_cast<double>(rollouts->Alarms().size()); }));
  must(alert_inputs.AddNode("node_rollout_failed", [this] {
    std::map<std::string, double> out;
    for (const auto& node : rollouts->FailedNodes()) out[node] = 1;
    return out;
  }));
  must(alert_inputs.AddNode("node_drift_severity", [this] {
    std::map<std::string, double> out;
    for (const auto& [node, severity] : drift->NodeSeverity()) out[node] = severity;
    return out;
  }));
  must(alert_inputs.AddNode("node_cve_max_cvss", [this] {
    std::map<std::string, double> out;
    for (const auto& [node, cvss] : vulns->MaxCvss()) out[node] = cvss;
    return out;
  }));
}

Controller::Controller(ControllerOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
}

Controller::~Controller() { Stop(); }

Status Controller::Start() {
  // API replies for large fleets are megabytes: keep freed memory in the heap instead of
  // returning it to the kernel after each reply and page-faulting it back on the next.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 128 << 20);
  auto& o = impl_->options;
  if (o.data_dir.empty()) o.data_dir = DefaultDataDir();
  std::error_code ec;
  std::filesystem::create_directories(o.data_dir, ec);
  if (ec)
    return MakeError(ErrorCode::kUnavailable,
                     "cannot create data dir " + o.data_dir + ": " + ec.message());
  ::chmod(o.data_dir.c_str(), 0700);
  if (o.store_url.empty()) o.store_url = "sqlite:" + o.data_dir + "/gpufleet.db";
  // Signs the audit log's anchor and seals the secrets the store keeps: without this file a
  // copied database discloses no secret.
  auto key = LoadOrCreateKey(o.data_dir + "/secret.key");
  if (!key.ok()) return key.error();
  impl_->key = key.value();
  auto locks = TakeControllerLocks(o.data_dir, o.store_url);
  if (!locks.ok()) return locks.error();
  impl_->locks = std::move(locks.value());
  // Build, wire, serve.
  GF_TRY(impl_->Build());
  auto wrote = api::BootstrapAdminToken(*impl_->stores.tokens, *impl_->clock, admin_token_path());
  if (!wrote.ok()) return wrote.error();
  if (wrote.value()) spdlog::info("wrote the bootstrap admin token to {}", admin_token_path());
  impl_->Wire();
  api::ApiOptions ao;
  ao.listen = o.listen;
  ao.max_body_bytes = o.max_body_bytes;
  ao.threads = o.threads;
  ao.ingest_threads = o.ingest_threads;
  ao.tls = o.tls;
  ao.insecure_plaintext = o.insecure_plaintext;
  ao.max_connections = o.max_connections;
  ao.header_timeout_ms = o.header_timeout_ms;
  impl_->ticker = std::make_unique<runtime::Ticker>(
      impl_->clock, std::max(100, std::min(1000, o.heartbeat_timeout_ms / 4)));
  impl_->services->ticker = impl_->ticker.get();
  GF_TRY(impl_->MakeLeadership());
  impl_->server = std::make_unique<api::ApiServer>(ao, *impl_->services);
  impl_->AddTasks(*this);
  auto addr = impl_->server->Start();
  if (!addr.ok()) return addr.error();
  impl_->address = addr.value();
  impl_->notifier->set_external_url(url());
  impl_->notifier->set_secret_key(impl_->key);
  impl_->leadership->set_url(o.advertise_url.empty() ? url() : o.advertise_url);
  impl_->leadership->Start();  // a lone controller leads before its first tick
  impl_->changes = store::WatchChanges(
      impl_->stores.database, [i = impl_.get()](const std::vector<std::string>& tables) {
        TakeChanges({*i->fleet, *i->teams, *i->assets, *i->scaling, *i->rollouts, *i->notifier,
                     *i->leadership, *i->relay, *i->health, *i->jobs},
                    tables);
      });
  impl_->notifier->Start();
  if (impl_->remote_write) impl_->remote_write->Start();
  impl_->slurm->Start();
  impl_->scaling->set_controller_url(url());
  if (!o.defer_scaling) StartScaling();
  // Where we listen, for scripts and tests that asked for port 0: the bare address for plain
  // HTTP, the https:// URL for TLS (so the CLI dials it with TLS).
  WriteControllerAddress(o.data_dir, o.tls.enabled() ? url() : impl_->address);
  impl_->ticker->Start();
  spdlog::info("controller listening on {} (store {})", url(), impl_->stores.database->location());
  if (!o.tls.enabled() && o.insecure_plaintext) {
    spdlog::warn(
        "controller: plain HTTP on {} (--insecure-plaintext): tokens cross the network "
        "in clear",
        impl_->address);
  }
  return {};
}

// The periodic work, in the order it runs at each tick. leader_only: the engines, which one
// controller runs for the fleet; the others keep this controller's own state.
void Controller::Impl::AddTasks(Controller& controller) {
  const int64_t tick = 0;  // every tick
  auto& t = *ticker;
  auto task = [&t](std::string name, int64_t every, bool leader_only, std::function<Status()> fn,
                   int64_t first = -1, std::function<bool()> early = nullptr) {
    t.Add({std::move(name), every, std::move(fn), leader_only, first, std::move(early)});
  };
  task("relay", 2000, false, [this] {  // what the change feed missed; commands nobody took
    if (changes) relay->Poll();
    return Status{};
  });
  task("heartbeats", tick, false, [this] {
    // With other controllers live, a node that never reached this one is theirs to judge.
    int lost = fleet->CheckHeartbeats(leadership->alone());
    if (lost) spdlog::warn("{} node(s) stopped sending heartbeats: unreachable", lost);
    return Status{};
  });
  if (options.demo_workload) {
    task("demo-workload", tick, true, [this] {
      if (!generator) generator = demo::DemoWorkload(*fleet, *teams, *jobs);
      if (generator) generator->Tick(clock->NowMs());
      return Status{};
    });
  }
  // Jobs: ends, requeues off nodes that cannot run them, placements.
  task("jobs", tick, true, [this] {
    jobs->Tick();
    return Status{};
  });
  // Slurm: its jobs into gpufleet's, the drains gpufleet's node states ask of it.
  task("slurm", tick, true, [this] { return slurm->Sync(); });
  task("sim-loads", tick, true, [this] {
    sim_loads.Push(*fleet, *jobs, *commands, clock->NowMs());
    return Status{};
  });
  // The allocations that ended, with what their GPUs did, into the usage ledger.
  task("usage", tick, true, [this] { return usage->Tick(); });
  // Autoscaling: the decisions that are due, from the demand the jobs just showed.
  task("scaling", tick, true, [this] {
    if (scaling_on) scaling->Tick();
    return Status{};
  });
  // Rollouts and node actions: each node's next step.
  task("rollouts", tick, true, [this] {
    rollouts->Tick();
    return Status{};
  });
  // Drift: every node against its profile, as its facts and the profiles now are; pools
  // change through apply, so their exporters are picked up within a few seconds; the asset
  // register follows the GPUs and nodes that came, moved or went.
  task("drift", 5'000, true, [this]() -> Status {
    auto found = drift->Tick();
    if (!found.ok()) return found.error();
    return {};
  });
  task("scrape-targets", 5'000, false, [this] {
    scraper->SetTargets(ingest::ScrapeTargets(*fleet));
    return Status{};
  });
  task("assets", 5'000, true, [&controller] { return controller.ObserveAssets(); });
  task("health", options.health_interval_ms, true, [this] { return HealthCycle(); });
  // Several controllers: the others judge the nodes whose agents they hold (the telemetry is
  // theirs); the leader takes their verdicts from the store.
  task("health-here", options.health_interval_ms, false, [this] {
    if (!leadership->leading()) health->Apply(nullptr, false);
    return Status{};
  });
  // The day's compliance posture: a minute after start (the agents are back and drift has
  // looked at them), then every ten minutes; each replaces the day's earlier one.
  task(
      "compliance", 600'000, true, [this] { return compliance->Record(); }, 60'000);
  task("token-use", 60'000, false, [this] {
    server->FlushTokenUse();  // tokens' last use, once a minute
    return Status{};
  });
  task("retention", 60'000, false, [this] {
    telemetry->Retain(clock->NowMs());
    return Status{};
  });
  // On a timer, and sooner when the log grows large (a big fleet writes fast).
  task(
      "checkpoint", options.checkpoint_interval_ms, false,
      [this] { return telemetry->Checkpoint(); }, -1,
      [this] { return telemetry->wal_bytes() > options.wal_checkpoint_bytes; });
}

// Leadership (runtime/leadership.h): the ticker's leader-only tasks and the notifier's sender go
// through its gate. A controller that starts leading after another loads what that one left
// (the alert states, the rollouts) before its engines run.
Status Controller::Impl::MakeLeadership() {
  auto id = ControllerId(options.data_dir);
  if (!id.ok()) return id.error();
  runtime::LeadershipOptions lo;
  lo.id = id.value();
  lo.started_ms = clock->NowMs();
  lo.sole = stores.database->backend() == "sqlite";  // its file lock keeps a second one out
  auto on_change = [this, first = true](bool leading) mutable {
    if (leading && !first) {
      if (auto s = notifier->Load(); !s.ok()) spdlog::error("alerts: {}", s.error().message);
      if (auto s = rollouts->Load(); !s.ok()) spdlog::error("rollouts: {}", s.error().message);
      if (auto s = jobs->Follow(); !s.ok()) spdlog::error("jobs: {}", s.error().message);
      if (auto s = health->TakeEvents(); !s.ok()) spdlog::error("health: {}", s.error().message);
    }
    if (leading) first = false;
    ticker->set_leader(leading);
  };
  leadership = std::make_unique<runtime::Leadership>(
      store::CoordinationOf(stores.database), lo,
      [this] { return static_cast<int64_t>(fleet->ConnectedAgents()); }, on_change);
  auto gate = [l = leadership.get()](const std::function<void()>& fn) { return l->Gate(fn); };
  ticker->set_leader_gate(gate);
  notifier->set_gate(gate);
  services->leadership = leadership.get();
  CommandRelay::Hooks hooks{
      [this](const std::string& n, const proto::Command& c) { return server->SendToAgent(n, c); },
      [this](const std::string& n) { return server->HasAgent(n); },
      [this] { return leadership->alone(); }, [this] { return leadership->leading(); }};
  relay = std::make_unique<CommandRelay>(lo.id, store::CoordinationOf(stores.database), *commands,
                                         clock, std::move(hooks));
  // Every answer's way back is set before the first agent can connect.
  commands->set_transport(
      [r = relay.get()](const std::string& n, const proto::Command& c) { return r->Send(n, c); });
  commands->set_unrouted(
      [this, r = relay.get()](const std::string& n, const proto::CommandResult& a) {
        // On the leader: a step's answer sent by a leader that died (id unclaimed here).
        if (proto::IsNodeAction(a.action) && leadership && leadership->leading()) {
          rollouts->OnResult(n, a);
          return;
        }
        r->OnUnrouted(n, a);
      });
  return {};
}

// The health model over the fleet, then the alert rules over what it and the engines show.
Status Controller::Impl::HealthCycle() {
  const int64_t now = clock->NowMs();
  std::vector<health::NodeHealth> reports;
  health->Apply(&reports);
  alerting::Snapshot snap = alerting::MakeSnapshot(
      reports, health->RecentXids(), health->xid_catalog(), now, server->TakeRecentP99());
  alert_inputs.Fill(snap);
  AddPoolInputs(snap, *fleet, *jobs);
  auto snapshot = std::make_shared<const alerting::Snapshot>(std::move(snap));
  Status cycled = notifier->Cycle(reports, std::move(snapshot), *series_reader);
  server->Publish(CycleEvent(now, reports, notifier->Alerts()));
  return cycled;
}

void Controller::Stop() {
  if (impl_->stopped.exchange(true)) return;
  impl_->changes.reset();
  if (impl_->ticker) impl_->ticker->Stop();
  if (impl_->scraper) impl_->scraper->Stop();
  if (impl_->slurm) impl_->slurm->Stop();
  if (impl_->notifier) impl_->notifier->Stop();
  if (impl_->leadership) impl_->leadership->Stop();  // the lease given up: the next one leads
  if (impl_->scaling) impl_->scaling->Stop();
  if (impl_->server) {
    impl_->server->Stop();
    impl_->server->FlushTokenUse();
  }
  if (impl_->remote_write) impl_->remote_write->Stop();  // its cursors saved
  // A checkpoint now makes the next start quick; the log alone would lose nothing either.
  if (impl_->telemetry) {
    if (auto s = impl_->telemetry->Checkpoint(); !s.ok()) {
      spdlog::error("telemetry checkpoint at stop failed: {}", s.error().message);
    }
  }
  impl_->locks.clear();
}

const std::string& Controller::address() const { return impl_->address; }

std::string Controller::url() const {
  return (impl_->options.tls.enabled() ? "https://" : "http://") + impl_->address;
}

Status Controller::ReloadTls() {
  if (!impl_->server) return MakeError(ErrorCode::kUnavailable, "the controller is not started");
  return impl_->server->ReloadTls();
}

Status Controller::ObserveAssets() {
  std::vector<NodeSighting> nodes;
  impl_->fleet->ForEachNode({}, [&](const Node& n) { nodes.push_back(NodeSighting::Of(n)); });
  auto clusters = impl_->fleet->Clusters();
  if (!clusters.ok()) return clusters.error();
  std::map<std::string, std::string> site;
  for (const auto& c : clusters.value()) site[c.name] = c.site;
  return impl_->assets->Observe(nodes, site);
}

Status Controller::SeedDemoAssets() {
  if (!impl_->services) return MakeError(ErrorCode::kUnavailable, "the controller is not started");
  GF_TRY(ObserveAssets());
  return demo::SeedDemoAssets(*impl_->services);
}

void Controller::StartScaling() {
  if (!impl_->scaling) return;
  impl_->scaling->Start();  // its actuator thread, at most once: Start() is idempotent
  impl_->scaling_on = true;
}

std::string Controller::admin_token_path() const {
  return impl_->options.data_dir + "/admin.token";
}

Status Controller::ApplyFleetYaml(const std::string& yaml, const std::string& filename) {
  auto spec = ParseFleetSpec(yaml, filename, *impl_->catalog);
  if (!spec.ok()) return spec.error();
  for (const auto& sc : spec->scaling) GF_TRY(impl_->scaling->Check(sc));
  // The teams first: clusters and pools name them.
  for (const auto& t : spec->teams.value_or(std::vector<Team>{})) {
    auto done = impl_->teams->Get(t.name).ok() ? impl_->teams->Replace(t) : impl_->teams->Create(t);
    if (!done.ok()) return done.error();
  }
  auto counts = impl_->fleet->Apply(spec.value());
  if (!counts.ok()) return counts.error();
  for (const auto& sc : spec->scaling) {
    auto set = impl_->scaling->SetPolicy(sc, "gpufleet-up");
    if (!set.ok()) return set.error();
  }
  return {};
}

Result<std::string> Controller::IssueJoinToken(const std::string& pool) {
  auto t = impl_->fleet->CreateJoinToken(pool, 24 * 3600 * 1000LL, "gpufleet-up");
  if (!t.ok()) return t.error();
  return t->secret;
}

}  // namespace gpufleet
