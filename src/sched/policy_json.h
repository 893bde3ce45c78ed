#pragma once
// A pool's scaling as JSON: model/scaling_policy.h has it, as sched has always named it.

#include "model/scaling_policy.h"

namespace gpufleet::sched {

using gpufleet::FormatSeconds;
using gpufleet::ParsePoolScaling;
using gpufleet::PoolScalingJson;

}  // namespace gpufleet::sched
