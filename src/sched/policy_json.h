#pragma once
// A pool's scaling (policy, actuator, enabled) as JSON: the API's object, the stored document,
// and (through config's YAML to JSON) the `scaling:` block of a fleet file. One parser, so the
// three accept the same fields and say the same things about bad ones.
//
//   {"mode": "predictive", "min_nodes": 2, "max_nodes": 40, "target_share": 0.8,
//    "step_up": 10, "step_down": 5, "up_cooldown": "0s", "down_cooldown": "5m",
//    "lead_time": "10m", "idle_before_remove": "10m", "interval": "1m", "enabled": true,
//    "schedule": [{"nodes": 8, "from": 8, "to": 18, "weekdays": true}],
//    "actuator": {"type": "command", "provision": "...", "deprovision": "...", "timeout": "5m"}}
//
// Durations are strings ("90s", "5m", "2h") or numbers of seconds. Every field is optional and
// takes its default (sched::ScalePolicy's); unknown fields are errors.

#include <string>
#include <string_view>

#include "common/result.h"
#include "sched/autoscaler.h"

namespace gpufleet::sched {

// On an error, `field` (when given) is set to the offending field's path, e.g. "actuator.type"
// or "schedule[1].to", and the message starts with it.
Result<PoolScaling> ParsePoolScaling(std::string_view json, std::string* field = nullptr);
std::string PoolScalingJson(const PoolScaling& s);  // durations as strings, e.g. "10m"
std::string FormatSeconds(double s);                // 600 -> "10m", 90 -> "90s", 0.5 -> "500ms"

}  // namespace gpufleet::sched
