#pragma once
// Several controllers on one database: this controller's id among them.

#include <string>
#include <vector>

#include "common/result.h"

namespace gpufleet {

// DATA_DIR/controller.id, written at the first start ("HOSTNAME-8 hex digits"), so a controller
// keeps its id across restarts and two on one host differ.
Result<std::string> ControllerId(const std::string& data_dir);

}  // namespace gpufleet

namespace gpufleet {

class CommandRelay;
class FleetService;
class TeamService;
class AssetService;
namespace alerting {
class Notifier;
}
namespace health {
class HealthService;
}
namespace workload {
class JobService;
}
namespace lifecycle {
class RolloutService;
}
namespace runtime {
class Leadership;
}
namespace scaling {
class ScalingService;
}

// The services that keep tables in memory, told what another controller changed.
struct ChangeTargets {
  FleetService& fleet;
  TeamService& teams;
  AssetService& assets;
  scaling::ScalingService& scaling;
  lifecycle::RolloutService& rollouts;
  alerting::Notifier& notifier;
  const runtime::Leadership& leadership;
  CommandRelay& relay;
  health::HealthService& health;
  workload::JobService& jobs;
};

// Reads again what `tables` (store/lease.h's WatchedTables) hold into the services that keep
// them: the nodes (FleetService::Refresh), the clusters and pools, teams, assets, scaling
// policies, rollouts and alert rules; and on a follower the alert states the leader keeps. A
// relayed command (agent_commands) is sent or its answer read (CommandRelay::Poll). The XIDs
// the others' agents reported (gpu_events) reach the health model; a follower follows the jobs
// the leader stores.
// Failures are logged: the next change, or the feed's reconnect, reads again.
void TakeChanges(const ChangeTargets& to, const std::vector<std::string>& tables);

}  // namespace gpufleet
