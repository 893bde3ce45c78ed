#pragma once
// Pieces of the health cycle. The dashboard's live stream gets one event per health cycle: when it
// ran, and digests of the alerts and of the health verdicts, so that a page refetches what it shows
// when they change. No names or counts: the stream goes to tokens of any cluster scope, the API
// filters by scope.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "alerting/eval.h"
#include "alerting/notifier.h"
#include "health/service.h"
#include "workload/jobs.h"

namespace gpufleet {

// The pools' allocation and queues (PoolNoFreeGpus, PoolQueueWaitHigh), and the teams that own
// them (the `team` label), into the health cycle's snapshot.
void AddPoolInputs(alerting::Snapshot& snap, FleetService& fleet, const workload::JobService& jobs);

// Each node's newest XID the health model has seen (what the rollouts' gates watch).
std::map<std::string, int64_t> LastXidByNode(FleetService& fleet, health::HealthService& health);

std::string CycleEvent(int64_t now, const std::vector<health::NodeHealth>& reports,
                       const std::vector<alerting::Alert>& alerts);

}  // namespace gpufleet
