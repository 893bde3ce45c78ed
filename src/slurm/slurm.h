#pragma once
// What Slurm's own clients print, read: `squeue --json` and `sinfo --json` (Slurm 22.05's
// data_parser output), hostlists ("gpu[01-04,07]") and GRES strings ("gpu:h100:2(IDX:0-1)").
// Pure functions: no process is run here (bridge.h runs the clients).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace gpufleet::slurm {

// A hostlist expression expanded in order: "n[1-3],gpu07" -> n1 n2 n3 gpu07; zero padding is
// kept ("gpu[08-10]" -> gpu08 gpu09 gpu10). kInvalidArgument for a malformed one, or one of
// more than `max` names.
Result<std::vector<std::string>> ExpandHostlist(std::string_view list, size_t max = 100'000);

// The GPU indices in one node's GRES detail: "gpu:h100:2(IDX:0-1)" -> 0 1;
// "gpu:1(IDX:3),mps:100(IDX:0)" -> 3. Empty when none.
std::vector<int> GpuIndices(std::string_view detail);
// The GPUs a TRES string asks for: "gres:gpu:2" / "gres:gpu:h100:2" / "gres/gpu=2" -> 2;
// 0 when it names none.
int GpusInTres(std::string_view tres);

struct Job {
  std::string id;  // job_id (an array task: "<array job>_<task>")
  std::string name, state, account, wckey, user, partition, reason;
  std::vector<std::string> nodes;      // running: its nodes
  std::vector<std::vector<int>> gpus;  // running: the GPU indices on each of `nodes`
  int gpus_requested = 0;              // all of it, over its nodes
  int node_count = 0;
  int64_t submit_s = 0, start_s = 0, end_s = 0;
};

// squeue --json: every job slurmctld holds (22.05 ignores squeue's filters with --json).
Result<std::vector<Job>> ParseSqueue(std::string_view json);

struct Node {
  std::string name;
  std::string state;               // "idle", "mixed", "allocated", "down", ...
  std::vector<std::string> flags;  // "DRAIN", "FAIL", "POWERED_DOWN", ...
  std::string reason;
  std::string reason_user;
  int64_t reason_changed_s = 0;
  std::vector<std::string> partitions;
  std::string gres;  // "gpu:h100:2"
  bool Has(std::string_view flag) const;
  // DRAIN set: no new jobs. Drained: and none left (draining: some still run).
  bool Draining() const { return Has("DRAIN"); }
  bool Drained() const;
  bool Down() const { return state == "down" || Has("FAIL") || state == "fail"; }
};

// sinfo --json.
Result<std::vector<Node>> ParseSinfo(std::string_view json);

// The gpufleet node name that a Scheduler::node_name template turns into `slurm_name`, for a
// node gpufleet has not seen: the text around the template's one placeholder taken off
// ("gpu-{hostname}" and "gpu-a01" -> "a01"). Empty when the name does not fit the template, or
// the template has no single placeholder.
std::string NodeForSlurmName(const std::string& tmpl, const std::string& slurm_name);

// The reason gpufleet gives Slurm for its drains; a drain whose reason starts with it is
// gpufleet's to resume.
inline constexpr std::string_view kReasonPrefix = "gpufleet:";

}  // namespace gpufleet::slurm
