#pragma once
// The `sim` actuator: a pool's autoscaler starts simulated nodes (agents inside this process,
// connecting to the controller like any agent) after the policy's lead time, and stops them.

#include <memory>
#include <string>

#include "scaling/scaling.h"
#include "sim/sim.h"

namespace gpufleet::app {

// `fleet` must outlive the actuator, and be running (SimFleet::Run) for the nodes to connect.
// `tls`: whom the nodes trust when the controller is https:// (null: the system's store).
// `driver`: the driver the nodes it starts run (empty: the simulated default), as a pool's
// image would give them. `token_dir`: where each node keeps its node token, so that a node
// started again after a controller restart rejoins as itself (a join token admits only names
// not registered yet); empty: kept in memory only.
std::shared_ptr<scaling::Actuator> MakeSimActuator(SimFleet& fleet, net::TlsContext tls = nullptr,
                                                   std::string driver = "",
                                                   std::string token_dir = "");

}  // namespace gpufleet::app
