#pragma once
// The controller's services as one list: the controller builds them, and whoever serves them
// (the API) takes this one `const Services&`. Declarations only, so cheap to include.

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace gpufleet {
class Clock;
class FleetService;
class GpuCatalog;
class TelemetryStore;
class TeamService;
class AssetService;
namespace store {
struct Stores;
}
namespace proto {
class AgentHandler;
}
namespace scrape {
struct TargetStatus;
}
namespace health {
class HealthService;
}
namespace alerting {
class Notifier;
}
namespace workload {
class JobService;
}
namespace scaling {
class ScalingService;
}
namespace lifecycle {
class CompatService;
class RolloutService;
class VulnService;
class DriftService;
class ComplianceService;
}  // namespace lifecycle
namespace usage {
class UsageService;
}
namespace slurm {
class Bridge;
}
namespace remote {
class RemoteWriter;
}

namespace runtime {
class CommandBus;
class Ticker;
class Leadership;

struct Services {
  FleetService& fleet;
  store::Stores& store;
  std::shared_ptr<const GpuCatalog> catalog;
  std::shared_ptr<Clock> clock;
  TelemetryStore& telemetry;
  proto::AgentHandler& agents;  // the agent channel's receiver
  // Scrape mode's targets and how their last scrape went; empty when nothing is scraped.
  std::function<std::vector<scrape::TargetStatus>()> scrape_targets;
  std::string secret_key;  // the data directory's secret.key (common/crypto.h)
  // The services below are absent (null) in tests that do not need them; their routes say 503.
  CommandBus* commands = nullptr;          // commands to agents (fault injection)
  const Ticker* ticker = nullptr;          // the periodic tasks' figures in /metrics
  const Leadership* leadership = nullptr;  // which controller leads; the controllers
  health::HealthService* health = nullptr;
  alerting::Notifier* alerts = nullptr;
  workload::JobService* jobs = nullptr;
  slurm::Bridge* slurm = nullptr;  // the clusters Slurm schedules
  scaling::ScalingService* scaling = nullptr;
  lifecycle::CompatService* compat = nullptr;
  lifecycle::RolloutService* rollouts = nullptr;
  lifecycle::VulnService* vulns = nullptr;
  lifecycle::DriftService* drift = nullptr;
  lifecycle::ComplianceService* compliance = nullptr;
  TeamService* teams = nullptr;
  usage::UsageService* usage = nullptr;
  AssetService* assets = nullptr;
  remote::RemoteWriter* remote_write = nullptr;  // null: no remote-write receiver
};

}  // namespace runtime
}  // namespace gpufleet
