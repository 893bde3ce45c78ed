#pragma once
// Remote write on the controller (internal to the controller component): the fleet's labels of
// each GPU, and the writer fed by the telemetry store's tap.

#include <memory>

#include "common/result.h"
#include "controller/controller.h"
#include "fleet/fleet.h"
#include "remote/writer.h"
#include "telemetry/telemetry.h"

namespace gpufleet {

// Each GPU of a node that is not retired or being decommissioned, with the labels the
// Prometheus API gives it: Hostname, gpu, UUID, modelName (the GPU's name), pci_bus_id,
// device, cluster, pool, and team (its pool's, else its cluster's) where there is one.
remote::LabelSource FleetLabels(FleetService& fleet);

// Null when no receiver is configured. Sets the telemetry store's tap: call before agents
// connect.
Result<std::unique_ptr<remote::RemoteWriter>> OpenRemoteWrite(const ControllerOptions& options,
                                                              FleetService& fleet,
                                                              TelemetryStore& telemetry);

}  // namespace gpufleet
