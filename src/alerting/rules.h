#pragma once
// Rule files and rule documents. A rule file is Prometheus's format, so that existing files
// carry over:
//
//   groups:
//     - name: gpu
//       rules:
//         - alert: GpuHot
//           expr: max_over_time(gpu_temp[5m]) > 85
//           for: 2m
//           keep_firing_for: 5m
//           labels: {severity: warning, team: infra}
//           annotations: {summary: "{{ $labels.Hostname }} GPU {{ $labels.gpu }} at {{ $value }}
//           C"}
//
// plus `enabled: false` to switch off a built-in rule of the same name. Every rule is checked
// (CheckRule) and errors name the file, the line and the field, e.g.
// "rules.yaml:7: groups[0].rules[0].expr: at 15: unknown metric 'gpu_tmp'".

#include <string>
#include <string_view>
#include <vector>

#include "alerting/engine.h"
#include "common/result.h"

namespace gpufleet::alerting {

struct RuleFile {
  std::vector<std::string> groups;  // the groups the file defines, in order
  std::vector<Rule> rules;
};

// True when the YAML document's top level has `groups` (a rule file, not a fleet file).
bool IsRuleFile(std::string_view yaml);
Result<RuleFile> ParseRuleFile(std::string_view yaml, std::string_view filename);

// A rule file of `rules` (gpufleet export): their groups in the order first seen, each rule one
// line of JSON's flow syntax (which is YAML) with the fields RuleJson gives but the group, so
// that ParseRuleFile reads back the same rules.
std::string WriteRuleFile(const std::vector<Rule>& rules);

// A rule as JSON: {alert, group, expr, for, keep_firing_for, labels, annotations, enabled}
// (durations as "5m"), what the store keeps and the API takes and gives. RuleFromJson checks
// the rule.
std::string RuleJson(const Rule& rule);
Result<Rule> RuleFromJson(std::string_view json_text);

// 300000 -> "5m", 90000 -> "90s", 0 -> "0s".
std::string FormatDuration(int64_t ms);

}  // namespace gpufleet::alerting
