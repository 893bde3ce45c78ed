#include "controller/controller.h"

#include <malloc.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "alerting/notifier.h"
#include "api/api.h"
#include "common/crypto.h"
#include "config/fleet_spec.h"
#include "fleet/assets.h"
#include "fleet/fleet.h"
#include "health/service.h"
#include "ingest/ingest.h"
#include "lifecycle/compat_service.h"
#include "lifecycle/compliance_service.h"
#include "lifecycle/drift_service.h"
#include "lifecycle/rollout_service.h"
#include "lifecycle/vuln_service.h"
#include "scaling/scaling.h"
#include "scrape/scraper.h"
#include "store/store.h"
#include "telemetry/telemetry.h"
#include "usage/capacity.h"
#include "usage/usage.h"
#include "workload/generator.h"
#include "workload/jobs.h"

namespace gpufleet {

namespace {

// The dashboard's live stream gets one event per health cycle: when it ran, and digests of the
// alerts and of the health verdicts, so that a page refetches what it shows when they change.
// No names or counts: the stream goes to tokens of any cluster scope, the API filters by scope.
std::string CycleEvent(int64_t now, const std::vector<health::NodeHealth>& reports,
                       const std::vector<alerting::Alert>& alerts) {
  size_t health = 0, firing = 0;
  auto mix = [](size_t& h, size_t v) { h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2); };
  std::hash<std::string> text;
  for (const auto& n : reports) {
    mix(health, text(n.node));
    mix(health, static_cast<size_t>(n.health) * 31 + static_cast<size_t>(n.state));
    for (const auto& g : n.gpus) mix(health, static_cast<size_t>(g.level));
  }
  for (const auto& a : alerts) {
    mix(firing, text(a.fingerprint));
    mix(firing, static_cast<size_t>(a.state));
  }
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "{\"type\":\"cycle\",\"time_ms\":%lld,\"health\":\"%zx\",\"alerts\":\"%zx\"}",
                static_cast<long long>(now), health, firing);
  return buf;
}

// The demo workload over the pools that have a size, for the teams that have projects (null
// while there are none of either).
std::unique_ptr<workload::WorkloadGenerator> DemoWorkload(FleetService& fleet,
                                                          const TeamService& teams,
                                                          workload::JobService& jobs) {
  auto pools = fleet.Pools();
  auto clusters = fleet.Clusters();
  if (!pools.ok() || !clusters.ok()) return nullptr;
  std::map<std::string, std::string> cluster_team, cluster_type;
  for (const auto& c : clusters.value()) {
    cluster_team[c.name] = c.team;
    cluster_type[c.name] = std::string(ToString(c.type));
  }
  std::vector<workload::GeneratedPool> sized;
  for (const auto& p : pools.value()) {
    if (p.size > 0) {
      // `gpufleet up`'s pools are simulated but for those watched through dcgm-exporter.
      sized.push_back({p.name, p.gpus_per_node, p.size * p.gpus_per_node,
                       p.team.empty() ? cluster_team[p.cluster] : p.team, p.exporters.empty(),
                       cluster_type[p.cluster]});
    }
  }
  std::vector<workload::DemoTeam> demo_teams;
  for (const auto& t : teams.List()) {
    workload::DemoTeam d{t.name, {}};
    for (const auto& p : t.projects) d.projects.push_back(p.name);
    if (!d.projects.empty()) demo_teams.push_back(std::move(d));
  }
  if (sized.empty() || demo_teams.empty()) return nullptr;
  spdlog::info("demo workload: {} pools, {} teams", sized.size(), demo_teams.size());
  return std::make_unique<workload::WorkloadGenerator>(
      [&jobs](workload::JobSpec spec) -> Status {
        auto job = jobs.Submit(std::move(spec));
        if (!job.ok()) return job.error();
        return {};
      },
      std::move(sized), std::move(demo_teams));
}

// The simulated nodes' GPUs follow their jobs: each node is told which of its GPUs jobs hold
// (proto::kSimLoadAction) when that changes, when its agent registers again (it starts with
// every GPU free), and every five minutes anyway. Real nodes are never told.
class SimLoadPusher {
 public:
  using Send = std::function<Status(const std::string&, const proto::Command&)>;
  void Push(FleetService& fleet, const workload::JobService& jobs, const Send& send, int64_t now) {
    auto loads = jobs.Loads();
    struct Target {
      std::string node;
      int64_t connected_ms;
    };
    std::vector<Target> targets;
    fleet.ForEachNode({}, [&](const Node& n) {
      if (n.simulated && n.connected) targets.push_back({n.name, n.connected_ms});
    });
    std::map<std::string, Sent> kept;
    for (const auto& t : targets) {
      std::vector<proto::GpuLoad> want;
      for (const auto& l : loads[t.node]) want.push_back({l.gpu, l.job, l.profile, l.since_ms});
      std::sort(want.begin(), want.end(),
                [](const proto::GpuLoad& a, const proto::GpuLoad& b) { return a.gpu < b.gpu; });
      auto it = sent_.find(t.node);
      if (it != sent_.end() && it->second.loads == want &&
          it->second.connected_ms == t.connected_ms && now < it->second.at_ms + 300'000) {
        kept.emplace(t.node, std::move(it->second));
        continue;
      }
      proto::Command cmd;
      cmd.id = next_id_++;
      cmd.action = std::string(proto::kSimLoadAction);
      cmd.loads = want;
      // Not sent (the agent is between connections): tried again on the next tick.
      if (send(t.node, cmd).ok()) kept[t.node] = {std::move(want), t.connected_ms, now};
    }
    sent_ = std::move(kept);  // nodes gone or disconnected are forgotten
  }

 private:
  struct Sent {
    std::vector<proto::GpuLoad> loads;
    int64_t connected_ms = 0;
    int64_t at_ms = 0;
  };
  std::map<std::string, Sent> sent_;
  int64_t next_id_ = 3'000'000'000;
};

}  // namespace

struct Controller::Impl {
  ControllerOptions options;
  std::shared_ptr<Clock> clock = RealClock();
  std::shared_ptr<const GpuCatalog> catalog;
  store::Stores stores;
  std::unique_ptr<FleetService> fleet;
  std::unique_ptr<TeamService> teams;
  std::unique_ptr<AssetService> assets;
  std::unique_ptr<TelemetryStore> telemetry;
  std::unique_ptr<health::HealthService> health;
  std::unique_ptr<workload::JobService> jobs;
  std::unique_ptr<usage::UsageService> usage;
  std::unique_ptr<scaling::ScalingService> scaling;
  std::unique_ptr<lifecycle::CompatService> compat;
  std::unique_ptr<lifecycle::RolloutService> rollouts;
  std::unique_ptr<lifecycle::VulnService> vulns;
  std::unique_ptr<lifecycle::DriftService> drift;
  std::unique_ptr<lifecycle::ComplianceService> compliance;
  std::unique_ptr<workload::WorkloadGenerator> generator;  // the monitor thread's
  SimLoadPusher sim_loads;                                 // the monitor thread's
  std::unique_ptr<alerting::Notifier> notifier;
  std::unique_ptr<alerting::SeriesReader> series_reader;  // the monitor thread's
  std::unique_ptr<ingest::Ingest> ingest;  // the agent channel's handler, the scraper's sink
  std::unique_ptr<scrape::Scraper> scraper;
  std::unique_ptr<api::ApiServer> server;
  std::string address;
  std::thread monitor;
  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;  // guarded by mu
  // Whether the monitor makes autoscaling decisions (false until StartScaling() when Start()
  // deferred them).
  std::atomic<bool> scaling_on{false};
};

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
  if (o.gpu_catalog.empty()) {
    impl_->catalog = GpuCatalog::Builtin();
  } else {
    auto c = GpuCatalog::Load(o.gpu_catalog);
    if (!c.ok()) return c.error();
    impl_->catalog = c.value();
  }
  auto stores = store::Open(o.store_url, {o.store_connections});
  if (!stores.ok()) return stores.error();
  impl_->stores = std::move(stores.value());
  auto& db = impl_->stores;
  auto wrote = api::BootstrapAdminToken(*db.tokens, *impl_->clock, admin_token_path());
  if (!wrote.ok()) return wrote.error();
  if (wrote.value()) spdlog::info("wrote the bootstrap admin token to {}", admin_token_path());

  FleetOptions fo;
  fo.heartbeat_interval_ms = o.heartbeat_interval_ms;
  fo.heartbeat_timeout_ms = o.heartbeat_timeout_ms;
  impl_->fleet =
      std::make_unique<FleetService>(*db.fleet, *db.tokens, impl_->catalog, impl_->clock, fo);
  GF_TRY(impl_->fleet->Load());
  impl_->teams = std::make_unique<TeamService>(*db.teams, impl_->clock);
  GF_TRY(impl_->teams->Load());
  impl_->assets = std::make_unique<AssetService>(*db.assets, impl_->clock);
  GF_TRY(impl_->assets->Load());
  auto telemetry = TelemetryStore::Open({o.data_dir + "/tsdb", {}});
  if (!telemetry.ok()) return telemetry.error();
  impl_->telemetry = std::move(telemetry.value());
  const auto& replay = impl_->telemetry->replay();
  spdlog::info("telemetry: {} series from the checkpoint, {} points replayed from the log{}",
               replay.checkpoint_series, replay.wal_points,
               replay.torn_bytes
                   ? " (a torn tail of " + std::to_string(replay.torn_bytes) + " bytes was cut)"
                   : "");
  auto xids = XidCatalog::Builtin();
  if (!o.xid_catalog.empty()) {
    auto loaded = XidCatalog::Load(o.xid_catalog);
    if (!loaded.ok()) return loaded.error();
    xids = loaded.value();
  }
  impl_->health = std::make_unique<health::HealthService>(
      *impl_->fleet, *impl_->telemetry, *db.fleet, *db.audit, impl_->catalog, xids, impl_->clock);
  GF_TRY(impl_->health->Load());
  impl_->jobs = std::make_unique<workload::JobService>(*impl_->fleet, *db.jobs, impl_->clock,
                                                       o.drain_timeout_ms, o.job_retention_ms,
                                                       o.reserve_after_ms);
  impl_->jobs->set_audit(db.audit.get());  // allocations, from the first placement on
  impl_->jobs->set_teams(impl_->teams.get());
  GF_TRY(impl_->jobs->Load());
  impl_->usage =
      std::make_unique<usage::UsageService>(*impl_->jobs, *impl_->fleet, *impl_->telemetry,
                                            *db.usage, impl_->clock, o.usage_retention_ms);
  impl_->usage->set_settings(db.settings.get());
  impl_->usage->set_capacity_interval(o.usage_interval_ms);
  impl_->fleet->set_busy_check(
      [jobs = impl_->jobs.get()](const std::string& node) { return jobs->Busy(node); });
  scaling::ScalingOptions so;
  so.sim = o.sim_actuator;
  impl_->scaling = std::make_unique<scaling::ScalingService>(
      *impl_->fleet, *impl_->jobs, *db.scaling, *db.audit, impl_->clock, so);
  GF_TRY(impl_->scaling->Load());
  impl_->compat = std::make_unique<lifecycle::CompatService>(*impl_->fleet, *db.settings,
                                                             impl_->catalog, impl_->clock);
  GF_TRY(impl_->compat->Load());
  impl_->rollouts = std::make_unique<lifecycle::RolloutService>(
      *impl_->fleet, impl_->compat.get(), *db.rollouts, *db.audit, impl_->clock);
  GF_TRY(impl_->rollouts->Load());
  impl_->vulns = std::make_unique<lifecycle::VulnService>(*impl_->fleet, *impl_->compat,
                                                          *db.settings, impl_->clock);
  GF_TRY(impl_->vulns->Load());
  impl_->drift = std::make_unique<lifecycle::DriftService>(*impl_->fleet, *db.drift, impl_->clock,
                                                           db.audit.get());
  GF_TRY(impl_->drift->Load());
  impl_->drift->set_rollout_targets(
      [rollouts = impl_->rollouts.get()] { return rollouts->ActiveTargets(); });
  impl_->compliance = std::make_unique<lifecycle::ComplianceService>(
      *impl_->fleet, *impl_->compat, *impl_->vulns, *impl_->drift, *db.compliance, *db.audit,
      key.value(), impl_->clock);
  impl_->notifier = std::make_unique<alerting::Notifier>(*db.alerting, impl_->clock, "");
  GF_TRY(impl_->notifier->Load());
  impl_->notifier->set_team_channels([teams = impl_->teams.get()] { return teams->Channels(); });
  impl_->series_reader = alerting::MakeTelemetryReader(*impl_->telemetry);
  impl_->ingest = std::make_unique<ingest::Ingest>(*impl_->fleet, *impl_->telemetry, *db.fleet,
                                                   *impl_->health, *db.audit);
  impl_->scraper = std::make_unique<scrape::Scraper>(
      impl_->clock, [ingest = impl_->ingest.get()](const scrape::ScrapeTarget& t, int64_t now,
                                                   const scrape::DcgmReading& r) {
        return ingest->OnScrape(t, now, r);
      });
  impl_->scraper->SetTargets(ingest::ScrapeTargets(*impl_->fleet));

  api::ApiOptions ao;
  ao.listen = o.listen;
  ao.max_body_bytes = o.max_body_bytes;
  ao.threads = o.threads;
  ao.tls = o.tls;
  ao.insecure_plaintext = o.insecure_plaintext;
  ao.max_connections = o.max_connections;
  ao.header_timeout_ms = o.header_timeout_ms;
  impl_->server = std::make_unique<api::ApiServer>(
      ao, api::ApiDeps{*impl_->fleet,
                       impl_->stores,
                       impl_->catalog,
                       impl_->clock,
                       *impl_->telemetry,
                       *impl_->ingest,
                       [s = impl_->scraper.get()] { return s->Targets(); },
                       impl_->health.get(),
                       impl_->notifier.get(),
                       impl_->jobs.get(),
                       impl_->scaling.get(),
                       key.value(),
                       impl_->compat.get(),
                       impl_->rollouts.get(),
                       impl_->vulns.get(),
                       impl_->drift.get(),
                       impl_->compliance.get(),
                       impl_->teams.get(),
                       impl_->usage.get(),
                       impl_->assets.get()});
  auto addr = impl_->server->Start();
  if (!addr.ok()) return addr.error();
  // Remediation actions go to agents over their connections (the monitor thread asks; it is
  // joined before the server stops).
  impl_->health->set_agent_sender(
      [server = impl_->server.get()](const std::string& node, const proto::Command& cmd) {
        return server->SendToAgent(node, proto::Message(cmd));
      });
  // Drift remediation "auto": settings applied by the agents, their answers back.
  impl_->drift->set_agent_sender(
      [server = impl_->server.get()](const std::string& node, const proto::Command& cmd) {
        return server->SendToAgent(node, proto::Message(cmd));
      });
  impl_->ingest->set_setting_results(
      [drift = impl_->drift.get()](const std::string& node, const proto::CommandResult& result) {
        drift->OnCommandResult(node, result);
      });
  // Rollouts and node actions: commands to agents, their answers from the agent channel, and
  // what their gates watch (the health model's XIDs, the alerts firing).
  {
    lifecycle::RolloutHooks hooks;
    hooks.send = [server = impl_->server.get()](const std::string& node,
                                                const proto::Command& cmd) {
      return server->SendToAgent(node, proto::Message(cmd));
    };
    hooks.busy = [jobs = impl_->jobs.get()](const std::string& node) { return jobs->Busy(node); };
    hooks.drain_timeout = [jobs = impl_->jobs.get()](const std::string& node, int64_t ms) {
      jobs->SetDrainTimeout(node, ms);
    };
    hooks.last_xid = [health = impl_->health.get(), fleet = impl_->fleet.get()] {
      std::map<std::string, std::string> node_of;  // GPU UUID -> node
      fleet->ForEachNode({}, [&](const Node& n) {
        for (const auto& g : n.gpus) node_of[g.uuid] = n.name;
      });
      std::map<std::string, int64_t> out;
      for (const auto& [uuid, seen] : health->RecentXids()) {
        auto node = node_of.find(uuid);
        if (node == node_of.end()) continue;
        for (const auto& x : seen) out[node->second] = std::max(out[node->second], x.time_ms);
      }
      return out;
    };
    hooks.alerting = [notifier = impl_->notifier.get()] {
      std::map<std::string, std::string> out;
      for (const auto& a : notifier->Alerts()) {
        auto host = a.labels.find("Hostname");
        if (a.state == alerting::State::kFiring && host != a.labels.end()) {
          out.emplace(host->second, a.rule);
        }
      }
      return out;
    };
    hooks.gpu_reset = [health = impl_->health.get()](const std::string& node, int gpu) {
      health->OnReset(node, gpu);
    };
    impl_->rollouts->set_hooks(std::move(hooks));
    impl_->ingest->set_action_results(
        [rollouts = impl_->rollouts.get()](const std::string& node,
                                           const proto::CommandResult& result) {
          rollouts->OnCommandResult(node, result);
        });
  }
  impl_->address = addr.value();
  impl_->notifier->set_external_url(url());
  impl_->notifier->set_secret_key(key.value());
  impl_->notifier->Start();
  impl_->scaling->set_controller_url(url());
  if (!o.defer_scaling) StartScaling();
  // Write where we listen, so scripts and tests that asked for port 0 can find us: the bare
  // address for plain HTTP, the https:// URL for TLS (so the CLI dials it with TLS).
  {
    std::string tmp = o.data_dir + "/controller.addr.tmp";
    FILE* f = std::fopen(tmp.c_str(), "w");
    if (f) {
      std::fprintf(f, "%s\n", (o.tls.enabled() ? url() : impl_->address).c_str());
      std::fclose(f);
      std::filesystem::rename(tmp, o.data_dir + "/controller.addr", ec);
    }
  }
  int period = std::max(100, std::min(1000, o.heartbeat_timeout_ms / 4));
  impl_->monitor = std::thread([this, period] {
    std::unique_lock lock(impl_->mu);
    int64_t next_retain = impl_->clock->NowMs() + 60'000;
    int64_t next_targets = impl_->clock->NowMs() + 5'000;
    int64_t next_health = impl_->clock->NowMs() + impl_->options.health_interval_ms;
    int64_t next_checkpoint = impl_->clock->NowMs() + impl_->options.checkpoint_interval_ms;
    // The day's compliance posture: a minute after start (the agents are back and drift has
    // looked at them), then every ten minutes; each replaces the day's earlier one.
    int64_t next_compliance = impl_->clock->NowMs() + 60'000;
    while (!impl_->stopping) {
      impl_->cv.wait_for(lock, std::chrono::milliseconds(period));
      if (impl_->stopping) break;
      lock.unlock();
      int lost = impl_->fleet->CheckHeartbeats();
      if (lost) spdlog::warn("{} node(s) stopped sending heartbeats: unreachable", lost);
      if (impl_->options.demo_workload) {
        if (!impl_->generator) {
          impl_->generator = DemoWorkload(*impl_->fleet, *impl_->teams, *impl_->jobs);
        }
        if (impl_->generator) impl_->generator->Tick(impl_->clock->NowMs());
      }
      // Jobs: ends, requeues off nodes that cannot run them, placements.
      impl_->jobs->Tick();
      impl_->sim_loads.Push(
          *impl_->fleet, *impl_->jobs,
          [server = impl_->server.get()](const std::string& node, const proto::Command& cmd) {
            return server->SendToAgent(node, proto::Message(cmd));
          },
          impl_->clock->NowMs());
      // The allocations that ended, with what their GPUs did, into the usage ledger.
      if (auto s = impl_->usage->Tick(); !s.ok()) spdlog::error("usage: {}", s.error().message);
      // Autoscaling: the decisions that are due, from the demand the jobs just showed.
      if (impl_->scaling_on) impl_->scaling->Tick();
      // Rollouts and node actions: each node's next step.
      impl_->rollouts->Tick();
      int64_t now = impl_->clock->NowMs();
      // Pools change through apply; pick up their exporters within a few seconds.
      if (now >= next_targets) {
        next_targets = now + 5'000;
        // Drift: every node against its profile, as its facts and the profiles now are.
        if (auto d = impl_->drift->Tick(); !d.ok()) {
          spdlog::error("drift: {}", d.error().message);
        }
        impl_->scraper->SetTargets(ingest::ScrapeTargets(*impl_->fleet));
        // The asset register: GPUs and nodes that came, moved or went.
        if (auto a = ObserveAssets(); !a.ok()) spdlog::error("assets: {}", a.error().message);
      }
      if (now >= next_health) {
        next_health = now + impl_->options.health_interval_ms;
        std::vector<health::NodeHealth> reports;
        impl_->health->Apply(&reports);
        alerting::Snapshot snap = alerting::MakeSnapshot(reports, impl_->health->RecentXids(),
                                                         impl_->health->xid_catalog(), now,
                                                         impl_->server->TakeRecentP99());
        // What the rollout rules read (RolloutHalted, RolloutNodeFailed).
        snap.rollouts_halted = static_cast<double>(impl_->rollouts->Alarms().size());
        if (auto failed = impl_->rollouts->FailedNodes(); !failed.empty()) {
          for (auto& n : snap.nodes) n.rollout_failed = failed.count(n.name) > 0;
        }
        // What NodeDrift and NodeDriftHigh read.
        if (auto drift = impl_->drift->NodeSeverity(); !drift.empty()) {
          for (auto& n : snap.nodes) {
            if (auto it = drift.find(n.name); it != drift.end()) n.drift_severity = it->second;
          }
        }
        // The pools' allocation and queues (PoolNoFreeGpus, PoolQueueWaitHigh), and the teams
        // that own them (the `team` label).
        {
          auto pools = impl_->fleet->Pools();
          auto clusters = impl_->fleet->Clusters();
          if (pools.ok() && clusters.ok()) {
            std::map<std::string, std::string> cluster_team;
            for (const auto& c : clusters.value()) cluster_team[c.name] = c.team;
            auto demand = impl_->jobs->Demand();
            std::vector<alerting::PoolInput> inputs;
            for (const auto& p : pools.value()) {
              const workload::PoolDemand& d = demand[p.name];
              inputs.push_back({p.name, p.cluster,
                                p.team.empty() ? cluster_team[p.cluster] : p.team, d.queued_jobs,
                                static_cast<double>(d.queue_wait_p95_ms) / 1000.0});
            }
            alerting::AddPools(snap, inputs, impl_->jobs->Allocation());
          }
        }
        // What NodeCriticalCve reads.
        if (auto cvss = impl_->vulns->MaxCvss(); !cvss.empty()) {
          for (auto& n : snap.nodes) {
            if (auto it = cvss.find(n.name); it != cvss.end()) n.cve_max_cvss = it->second;
          }
        }
        auto snapshot = std::make_shared<const alerting::Snapshot>(std::move(snap));
        if (auto s = impl_->notifier->Cycle(reports, std::move(snapshot), *impl_->series_reader);
            !s.ok()) {
          spdlog::error("alerting: {}", s.error().message);
        }
        impl_->server->Publish(CycleEvent(now, reports, impl_->notifier->Alerts()));
      }
      if (now >= next_compliance) {
        next_compliance = now + 600'000;
        if (auto s = impl_->compliance->Record(); !s.ok()) {
          spdlog::error("compliance: cannot record the day's posture: {}", s.error().message);
        }
      }
      if (now >= next_retain) {
        next_retain = now + 60'000;
        impl_->server->FlushTokenUse();  // tokens' last use, once a minute
        impl_->telemetry->Retain(now);
      }
      // Checkpoint on a timer, and sooner when the log grows large (a big fleet writes fast).
      if (now >= next_checkpoint ||
          impl_->telemetry->wal_bytes() > impl_->options.wal_checkpoint_bytes) {
        next_checkpoint = now + impl_->options.checkpoint_interval_ms;
        if (auto s = impl_->telemetry->Checkpoint(); !s.ok()) {
          spdlog::error("telemetry checkpoint failed: {}", s.error().message);
        }
      }
      lock.lock();
    }
  });
  spdlog::info("controller listening on {} (store {})", url(), db.database->location());
  if (!o.tls.enabled() && o.insecure_plaintext) {
    spdlog::warn(
        "controller: plain HTTP on {} (--insecure-plaintext): tokens cross the network "
        "in clear",
        impl_->address);
  }
  return {};
}

void Controller::Stop() {
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->stopping) return;
    impl_->stopping = true;
  }
  impl_->cv.notify_all();
  if (impl_->monitor.joinable()) impl_->monitor.join();
  if (impl_->scraper) impl_->scraper->Stop();
  if (impl_->notifier) impl_->notifier->Stop();
  if (impl_->scaling) impl_->scaling->Stop();
  if (impl_->server) {
    impl_->server->Stop();
    impl_->server->FlushTokenUse();
  }
  // A checkpoint now makes the next start quick; the log alone would lose nothing either.
  if (impl_->telemetry) {
    if (auto s = impl_->telemetry->Checkpoint(); !s.ok()) {
      spdlog::error("telemetry checkpoint at stop failed: {}", s.error().message);
    }
  }
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
  GF_TRY(ObserveAssets());
  auto clusters = impl_->fleet->Clusters();
  if (!clusters.ok()) return clusters.error();
  std::map<std::string, int> cluster_no;
  for (const auto& c : clusters.value()) cluster_no.emplace(c.name, cluster_no.size());
  // Each cluster was bought at one time, so their warranties (three years) end apart: one
  // with years left, one ending within weeks, one over.
  static constexpr int kAgeDays[] = {250, 600, 1080, 1400, 900};
  const int64_t today = impl_->clock->NowMs() / 86'400'000;
  // Street prices per GPU where the reference has one (lifecycle-facts.md 8b: H100 SXM
  // about 25-40k USD, refurbished A100 80GB 8-15k; low confidence): the middle of each.
  auto price = [](const Asset& a) -> std::string {
    if (a.kind != "gpu") return "";
    if (a.model.rfind("H100", 0) == 0) return "32500";
    if (a.model.rfind("A100", 0) == 0) return "11500";
    return "";
  };
  std::string csv =
      "kind,serial,name,status,location,rack,purchase_date,purchase_price,warranty_end,"
      "comments\n";
  std::string rma, spare_model, spare_site;
  std::map<std::string, std::string> rack_of;  // pool -> rack
  for (const auto& a : impl_->assets->List({})) {
    if (!a.purchase_date.empty() || a.node.empty()) continue;  // an operator's, or not ours
    auto n = impl_->fleet->GetNode(a.node);
    if (!n.ok() || !n->simulated) continue;
    int64_t bought = today - kAgeDays[cluster_no[n->cluster] % std::size(kAgeDays)];
    auto [r, fresh] = rack_of.try_emplace(n->pool, "r" + std::to_string(rack_of.size() + 1));
    std::string status = "active", comment;
    if (a.kind == "gpu" && rma.empty() && n->pool.find("h100") != std::string::npos) {
      rma = a.serial;
      status = "failed";
      comment = "RMA-2291: row remapping failures (demo)";
    }
    if (a.kind == "gpu" && spare_model.empty()) {
      spare_model = a.model;
      spare_site = a.site;
    }
    csv += a.kind + "," + (a.kind == "gpu" ? a.serial : "") + "," + a.name + "," + status +
           ",hall-1," + r->second + "," + usage::IsoDate(bought) + "," + price(a) + "," +
           usage::IsoDate(bought + 3 * 365) + "," + comment + "\n";
  }
  // Three spare GPUs on the shelf, bought with the newest cluster.
  for (int i = 1; i <= 3 && !spare_model.empty(); ++i) {
    csv += "gpu,16522990000" + std::to_string(i) + ",,inventory,store-room,," +
           usage::IsoDate(today - 250) + ",," + usage::IsoDate(today - 250 + 3 * 365) +
           ",spare (demo)\n";
  }
  auto rows = ParseAssetsCsv(csv);
  if (!rows.ok()) return rows.error();
  for (auto& row : rows.value()) {
    if (row.key.rfind("16522990000", 0) == 0) {
      row.set["model"] = spare_model;
      row.set["site"] = spare_site;
    }
  }
  auto done = impl_->assets->Import(rows.value(), "demo");
  if (!done.ok()) return done.error();
  AuditRecord rec;
  rec.time_ms = impl_->clock->NowMs();
  rec.actor = "demo";
  rec.action = "POST /api/v1/assets/import";
  rec.target = "assets";
  rec.status = 200;
  rec.result = "ok";
  rec.after = "{\"applied\":" + std::to_string(done->applied) + "}";
  GF_TRY(impl_->stores.audit->AppendAudit(rec));
  // And what an operator would plan beyond the trend: the first team's demand +25% a quarter,
  // and a new model needing 64 GPUs of the biggest pool from three months on (unless a plan
  // is there already).
  auto existing = impl_->stores.settings->GetSetting(usage::kCapacityGrowthSetting);
  if (!existing.ok()) return existing.error();
  auto teams = impl_->teams->List();
  auto pools = impl_->fleet->Pools();
  if (existing.value() || teams.empty() || !pools.ok() || pools->empty()) return {};
  const Pool* biggest = &pools->front();
  for (const auto& p : pools.value()) {
    if (p.size * p.gpus_per_node > biggest->size * biggest->gpus_per_node) biggest = &p;
  }
  usage::CapacityGrowth plan;
  plan.teams.push_back({teams.front().name, 0.25});
  plan.demands.push_back({"next-model (demo)", biggest->name, 64, usage::IsoDate(today + 90)});
  const std::string growth = usage::CapacityGrowthJson(plan);
  GF_TRY(impl_->stores.settings->PutSetting(usage::kCapacityGrowthSetting, growth,
                                            impl_->clock->NowMs()));
  rec.action = "PUT /api/v1/reports/capacity/growth";
  rec.target = "reports/capacity/growth";
  rec.after = growth;
  return impl_->stores.audit->AppendAudit(rec);
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
