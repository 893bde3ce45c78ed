#pragma once
// A golden profile: what a cluster's or pool's nodes should run (fleet file `profile:`), and
// the drift of a node from it. A pool's profile is its cluster's with the pool's own fields
// over it (Merge), and a node's is that with the overrides its labels select (ForNode); an
// empty field asks for nothing. Evaluate compares a node's reported facts
// with it, field by field: a fact the node did not report is "unknown" and is a finding, never a
// match.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "model/types.h"

namespace gpufleet {

// The facts a profile can ask for, with their severity and default remediation.
struct DriftFact {
  std::string_view name;         // "driver_version"; a finding's `fact`
  std::string_view severity;     // "critical", "high", "medium", "low"
  std::string_view remediation;  // "auto", "rollout" or "manual"
  bool per_gpu;
  bool settable = false;  // a GPU setting the agent can set through NVML: "auto" allowed
};
extern const std::vector<DriftFact> kDriftFacts;
const DriftFact* FindDriftFact(std::string_view name);

// The profile's JSON (the fleet file's `profile:` block, the stored form): only the fields set.
std::string ProfileJson(const Profile& p);
// Strict: an unknown field or a value of the wrong kind is an error whose message starts with
// the field's path inside the profile ("firmware.H100-SXM5-80GB.vbios: must be a string").
Result<Profile> ParseProfile(std::string_view json);

// `over`'s fields where set, else `base`'s (firmware and remediation merged per key; the
// overrides of both, `base`'s first).
Profile Merge(const Profile& base, const Profile& over);
// Does a node with `labels` have every label of `selector` (values may be patterns).
bool LabelsMatch(const Labels& selector, const Labels& labels);
// The profile for one node: `profile` with each override its labels match merged over it, in
// order (a cluster's overrides, then its pool's); the result has no overrides.
Profile ForNode(const Profile& profile, const Labels& labels);
// Node labels as the agent's `--label KEY=VALUE` gives them: keys of letters, digits and
// . _ - / (up to 63), values of letters, digits and . _ - (up to 63, may be empty); a key given
// twice is an error.
Result<Labels> ParseLabelArgs(const std::vector<std::string>& args);
// A MIG layout as findings write it: "1g.10gb x4, 3g.40gb x1" (by name), "none" when empty.
std::string MigLayoutText(const std::map<std::string, int>& layout);

// An InfiniBand partition key by value: "0X8001" and "0x08001" -> "0x8001" ("" when not a
// 16-bit hex key).
std::string NormalizePkey(std::string_view key);

// Does `text` match `pattern`, where * is any run of characters and ? any one.
bool GlobMatch(std::string_view pattern, std::string_view text);

// One difference between a node and its profile.
struct DriftFinding {
  int64_t id = 0;
  std::string node;
  std::string pool;
  std::string cluster;
  int gpu = -1;  // -1: the node's
  std::string fact;
  std::string expected;
  std::string actual;  // "unknown" when the node did not report it
  std::string severity;
  std::string remediation;  // "auto", "rollout" or "manual"
  std::string state;        // "open", "remediating", "resolved"
  std::string note;         // what remediation did last ("attempt 1: done: ..."), or why not
  int64_t first_seen_ms = 0;
  int64_t last_seen_ms = 0;
  int64_t resolved_ms = 0;
  // The same difference (node, GPU, fact): an open finding is updated rather than opened again.
  bool SameAs(const DriftFinding& o) const {
    return node == o.node && gpu == o.gpu && fact == o.fact;
  }
};

// The differences between `node` and `profile`, in kDriftFacts order (per-GPU facts by GPU).
// Only node, pool, cluster, gpu, fact, expected, actual, severity and remediation are set.
std::vector<DriftFinding> EvaluateDrift(const Profile& profile, const Node& node);

std::string DriftFindingJson(const DriftFinding& f);  // the stored form

// A GPU setting's value as drift findings and the agent's apply-setting command write it:
// persistence_mode, ecc_mode, mig_mode "enabled" | "disabled" (1, 0); compute_mode "default" |
// "exclusive_process" | "prohibited" (NVML's 0, 3, 2); power_limit_w "700" (watts);
// application_clocks "1980/2619" (graphics / memory MHz; second = memory).
struct GpuSettingValue {
  int number = 0;
  int second = 0;
};
Result<GpuSettingValue> ParseGpuSetting(std::string_view setting, std::string_view value);
// The value of `setting` a GPU reports, as ParseGpuSetting reads it ("" when unknown).
std::string GpuSettingText(const Gpu& gpu, std::string_view setting);

Result<DriftFinding> ParseDriftFinding(std::string_view json);

}  // namespace gpufleet
