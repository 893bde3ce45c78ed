#pragma once
// The fleet's value types: Fleet -> Cluster -> Pool -> Node -> Gpu, plus node events.
// Plain data; no I/O. Times are milliseconds since the Unix epoch.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/window.h"

namespace gpufleet {

using Labels = std::map<std::string, std::string>;

enum class ClusterType { kTraining, kInference, kDevelopment, kEdge };
std::string_view ToString(ClusterType type);
std::optional<ClusterType> ParseClusterType(std::string_view text);

// What the controller may do on its own about a cluster's unhealthy nodes. The circuit breaker:
// automatic actions stop while `max_share` of the cluster's nodes are already out by them.
struct Remediation {
  bool cordon_unhealthy = false;
  bool drain_unhealthy = false;  // implies cordon
  double max_share = 0.1;        // 0..1
  // Ask the node's agent for the recommended action of a failed GPU once remediation has taken
  // the node out: reset the GPU, or reboot the node.
  bool reset_gpu = false;
  bool reboot_node = false;
  bool operator==(const Remediation&) const = default;
};

// The firmware a GPU model should carry (profile `firmware: {MODEL: {vbios, inforom}}`).
struct FirmwareWant {
  std::string vbios;
  std::string inforom;
  bool operator==(const FirmwareWant&) const = default;
};

struct ProfileOverride;

// A golden profile (fleet file `profile:`): what a cluster's or pool's nodes should run; an
// empty field asks for nothing. model/profile.h reads it and compares a node with it.
struct Profile {
  std::string driver_version;     // exact: "580.95.05"
  std::string cuda_driver;        // the CUDA version the driver reports: "13.0"
  std::string kernel;             // exact, or a pattern with * and ?: "6.1.0-*-amd64"
  std::string os;                 // os-release PRETTY_NAME: "Debian GNU/Linux 12 (bookworm)"
  std::string container_toolkit;  // the NVIDIA Container Toolkit: "1.17.8"
  std::map<std::string, FirmwareWant> firmware;  // catalogue GPU model id -> firmware
  std::string gsp_firmware;
  std::optional<bool> mig_mode;  // MIG enabled on every GPU, or on none
  // The GPU instances every MIG-enabled GPU should be split into: profile name -> count
  // ({"1g.10gb": 7}, as nvidia-smi and mig-parted name them); empty asks for nothing.
  std::map<std::string, int> mig_layout;
  std::string image_id;  // the OS image id (NodeFacts::image_id), exact or a pattern
  // GPU settings, on every GPU of the node: unset asks for nothing.
  std::optional<bool> persistence_mode, ecc_mode;
  std::string compute_mode;  // "default", "exclusive_process", "prohibited"
  int power_limit_w = 0;
  int app_clock_graphics_mhz = 0, app_clock_mem_mhz = 0;  // application_clocks
  // InfiniBand partition keys: "ADAPTER/PORT" (patterns allowed, "*/1", "*") -> the keys every
  // matching port has, exactly ("0xffff", "0x8001").
  std::map<std::string, std::vector<std::string>> ib_pkeys;
  // Who may open /dev/nvidia*: permission bits in octal ("0660") and the group ("video").
  std::string device_mode, device_group;
  // Software: packages that must be installed and that must not be ("name" or
  // "name=version"), and, when `allowed` is not empty, the only packages a node may have
  // (names, * and ? as in patterns).
  std::vector<std::string> packages_required, packages_forbidden, packages_allowed;
  // Per fact, "auto", "rollout" or "manual" instead of the fact's default (kDriftFacts).
  std::map<std::string, std::string> remediation;
  // Fields for the nodes whose labels match (NodeFacts::labels), over the rest, in order.
  std::vector<ProfileOverride> overrides;
  bool operator==(const Profile&) const;  // model/profile.cpp (ProfileOverride is incomplete)
  bool empty() const;
};

// A profile's fields for some of its nodes: those that have every one of `labels` (a value may
// be a pattern with * and ?).
struct ProfileOverride {
  Labels labels;
  Profile profile;  // without overrides of its own
  bool operator==(const ProfileOverride&) const = default;
};

// What a cluster's or a pool's workloads need of their drivers (fleet file `tier`, `requires`,
// `driver_branch`): empty fields are inherited, a pool's from its cluster's; model/compat.h
// checks a driver against them.
struct Lifecycle {
  std::string tier;  // "production", "staging", "development"; empty: inherited (production)
  std::string cuda;  // requires.cuda: "12.8"
  std::string gpu_operator;   // requires.gpu_operator: "v25.10.1"
  std::string kubernetes;     // requires.kubernetes: "1.33"
  std::string driver_branch;  // pinned: "R580"
  // When disruptive work may start (fleet file `maintenance_windows`); a pool with none uses
  // its cluster's, and none at all means any time.
  std::vector<MaintenanceWindow> windows;
  Profile profile;  // a pool's own fields over its cluster's
  bool operator==(const Lifecycle&) const = default;
};

// The batch scheduler that runs a cluster's jobs, when not gpufleet's own queue (fleet file
// `scheduler:`; docs/slurm.md). gpufleet then reads the scheduler's jobs and drains nodes
// through it instead of queueing jobs itself.
struct Scheduler {
  std::string type;                     // "slurm"; empty: gpufleet's own queue
  std::string bin_dir = "/usr/bin";     // where its clients are (scontrol, squeue, sinfo)
  std::string conf;                     // SLURM_CONF for the clients; empty: their default
  std::vector<std::string> partitions;  // the partitions read; empty: all
  int64_t poll_ms = 10'000;
  // The scheduler's name of a gpufleet node: "{name}" (the default) is the node's name,
  // "{hostname}" its name up to the first '.'; other text is kept ("gpu-{hostname}").
  std::string node_name = "{name}";
  bool operator==(const Scheduler&) const = default;
};
// The scheduler's name for gpufleet node `node` under `tmpl` (Scheduler::node_name).
std::string SchedulerNodeName(const std::string& tmpl, const std::string& node);

struct Cluster {
  std::string name;
  ClusterType type = ClusterType::kTraining;
  std::string site;
  Labels labels;
  int64_t created_ms = 0;
  int64_t updated_ms = 0;
  Remediation remediation{};
  Lifecycle lifecycle{};
  std::string team{};  // the owning team (model/team.h); empty: none
  Scheduler scheduler{};
};

// A node that runs NVIDIA's dcgm-exporter instead of the gpufleet agent: the controller scrapes
// its Prometheus endpoint and stores the samples like an agent's.
struct ExporterTarget {
  std::string node;  // the node's name in the fleet
  std::string url;   // "http://10.0.0.5:9400/metrics"
  bool operator==(const ExporterTarget&) const = default;
};

struct Pool {
  std::string name;       // unique in the fleet
  std::string cluster;    // owning cluster's name
  std::string gpu_model;  // a catalogue id, e.g. "H100-SXM5-80GB"
  int gpus_per_node = 8;
  int size = 0;  // desired node count (what `gpufleet sim`/`up` start)
  Labels labels;
  int64_t created_ms = 0;
  int64_t updated_ms = 0;
  std::vector<ExporterTarget> exporters{};  // nodes watched through dcgm-exporter
  int64_t scrape_interval_ms = 15'000;
  Lifecycle lifecycle{};
  std::string team{};  // the owning team; empty: its cluster's
};

enum class NodeState {
  kProvisioning,
  kJoining,
  kReady,
  kDegraded,
  kUnhealthy,
  kCordoned,
  kDraining,
  kDrained,
  kMaintenance,
  kUnreachable,
  kDecommissioning,
  kRetired,
};
std::string_view ToString(NodeState state);
// A node leaving the fleet (decommissioning) or gone from it (retired): it raises no alert and
// its series end.
inline bool LeftFleet(NodeState state) {
  return state == NodeState::kDecommissioning || state == NodeState::kRetired;
}
std::optional<NodeState> ParseNodeState(std::string_view text);

// A GPU's operating settings, the ones a profile can ask for and the agent can set through NVML;
// -1 or empty: the GPU did not tell (unknown).
struct GpuSettings {
  int persistence_mode = -1;        // 0 disabled, 1 enabled
  int ecc_mode = -1;                // the current mode: 0 disabled, 1 enabled
  int ecc_pending = -1;             // the mode after the next reset
  std::string compute_mode;         // "default", "exclusive_process", "prohibited"
  int power_limit_w = -1;           // the power management limit
  int app_clock_graphics_mhz = -1;  // application clocks
  int app_clock_mem_mhz = -1;
  bool operator==(const GpuSettings&) const = default;
};

struct Gpu {
  int index = 0;
  std::string uuid;
  std::string serial;
  std::string name;   // as the driver reports it, e.g. "NVIDIA H100 80GB HBM3"
  std::string model;  // catalogue id it matched, empty if none
  std::string pci_bus_id;
  int minor_number =
      -1;  // N of its device file /dev/nvidiaN (nvmlDeviceGetMinorNumber); -1 unknown
  uint64_t memory_total_bytes = 0;
  std::string vbios_version;
  std::string inforom_version;  // the InfoROM image, "G520.0200.00.05"
  // The InfoROM's object versions (OEM, ECC, power: they say which features it has) and the
  // GSP firmware; empty when the GPU cannot tell (GSP off, no such object).
  std::string inforom_oem, inforom_ecc, inforom_power;
  std::string gsp_firmware_version;
  int mig_mode = -1;  // -1 not supported, 0 disabled, 1 enabled
  // Its GPU instances, profile name -> count ({"3g.40gb": 1, "1g.10gb": 4}); empty when MIG is
  // disabled; nullopt when it cannot be read (no MIG, or the driver cannot tell).
  std::optional<std::map<std::string, int>> mig_layout;
  GpuSettings settings;
  std::string error;  // last NVML error on this GPU, e.g. "GPU_IS_LOST"; empty when healthy
};

// An InfiniBand / RoCE adapter as sysfs shows it (/sys/class/infiniband/NAME).
struct Nic {
  std::string name;        // "mlx5_0"
  std::string fw_version;  // fw_ver, "28.41.1000"
  std::string board_id;    // the PSID, "MT_0000000834"
  std::string hca_type;    // "MT4129"
  // Partition keys per port (ports/N/pkeys/*, the non-zero ones, as "0xffff"); a port whose
  // table cannot be read is absent.
  std::map<int, std::vector<std::string>> pkeys;
  bool operator==(const Nic&) const = default;
};

// A GPU device file (/dev/nvidia0, /dev/nvidiactl, ...): who may open it.
struct DeviceFile {
  std::string path;   // "/dev/nvidia0"
  std::string mode;   // permission bits in octal, "0666"
  std::string group;  // the owning group's name (its number when the name is unknown)
  bool operator==(const DeviceFile&) const = default;
};

struct NodeFacts {
  std::string hostname;
  // What the operator says the node is (agent `--label rack=r12`): golden profile overrides
  // select nodes by them.
  Labels labels;
  std::string os;
  std::string kernel;
  std::string driver_version;
  std::string cuda_driver_version;  // "12.4"
  // The NVIDIA Container Toolkit's upstream version ("1.17.8"), from the package database;
  // empty when it is not installed or cannot be read (unknown).
  std::string container_toolkit;
  std::string agent_version;
  std::string backend;  // "nvml" or "sim"
  // The OS image: the id file the image builder writes (/etc/gpufleet/image-id), else
  // os-release's IMAGE_ID[:IMAGE_VERSION]; empty when neither exists (unknown).
  std::string image_id;
  std::vector<Nic> nics;
  // The GPU device files, by path; nullopt when /dev could not be read (unknown).
  std::optional<std::vector<DeviceFile>> device_files;
  // Every installed package (name -> version as the package database has it); nullopt when
  // the node cannot read its package database (unknown). Carried by the agent's hello and
  // kept in memory: the store and the node's API form leave it out (it is large).
  std::optional<std::map<std::string, std::string>> packages;
  bool operator==(const NodeFacts&) const = default;
};

struct Node {
  std::string name;
  std::string cluster;
  std::string pool;
  NodeState state = NodeState::kProvisioning;
  NodeState resume_state = NodeState::kReady;  // where an unreachable node returns to
  std::string reason;                          // why it is in its state
  NodeFacts facts;
  std::vector<Gpu> gpus;
  bool simulated = false;
  bool connected = false;
  int64_t registered_ms = 0;
  int64_t last_seen_ms = 0;
  int64_t state_since_ms = 0;
  // When its agent last registered (a hello): a reboot is over when this is after it began.
  // Kept in memory only.
  int64_t connected_ms = 0;
  // The node credential's SHA-256; never leaves the controller. kJoinableNode when an admin has
  // cleared the node's identity: the next agent with a join token may take the name.
  std::string token_hash;
};

// Node::token_hash of a node whose identity was cleared (no SHA-256 hex digest is this).
inline constexpr std::string_view kJoinableNode = "joinable";

struct NodeEvent {
  int64_t id = 0;
  std::string node;
  int64_t time_ms = 0;
  std::string from;  // previous state
  std::string to;
  std::string reason;
  std::string actor;  // "controller", "agent", or the token name that asked
};

}  // namespace gpufleet
