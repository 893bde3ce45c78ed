#pragma once
// Versioned agent <-> controller messages, carried as JSON text frames over the WebSocket at
// /api/v1/agent. Every message has "v" (protocol version) and "type". Readers accept every
// version up to kProtoVersion and refuse newer ones with a clear error.
//
//   agent -> controller: hello (first frame), heartbeat, inventory (when GPUs change), samples
//   controller -> agent: welcome (reply to hello), error (then close), ack (of samples),
//                        command (fault injection on simulated GPUs)

#include <array>
#include <boost/json/fwd.hpp>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/result.h"
#include "model/telemetry.h"
#include "model/types.h"

namespace gpufleet::proto {

inline constexpr int kProtoVersion = 1;

struct Hello {
  std::string join_token;  // first join of a node into a pool
  std::string node_token;  // the credential returned in a previous Welcome
  NodeFacts facts;
  std::vector<Gpu> gpus;
  bool simulated = false;
};

struct Welcome {
  std::string node;
  std::string cluster;
  std::string pool;
  std::string node_token;  // set when newly issued; the agent keeps it for reconnects
  int heartbeat_interval_ms = 5000;
};

struct Heartbeat {
  int64_t seq = 0;
  int64_t time_ms = 0;
};

// The GPUs (when they or their settings change) and, when they change, the node's facts.
struct Inventory {
  std::vector<Gpu> gpus;
  std::optional<NodeFacts> facts;
};

// Something that happened on a GPU at a time, e.g. an XID error: an event, not a sample.
struct GpuEvent {
  int64_t time_ms = 0;
  int gpu = 0;
  std::string kind;   // "xid"
  int64_t value = 0;  // the XID number
};

// A batch of rows. Wire form: {"seq":N, "rows":[[t, gpu, v0, v1, ...], ...]} with values in
// Fields() order and null where absent; a reader takes the fields it knows and ignores more.
struct Samples {
  int64_t seq = 0;  // the agent's batch number; acknowledged by Ack
  std::vector<SampleRow> rows;
  std::vector<GpuEvent> events;  // wire: "events": [[time_ms, gpu, kind, value], ...]
};

// What a simulated node can be told to show (POST .../inject). Real nodes refuse. Faults and
// settings are a GPU's (the command's gpu); facts and packages the node's.
struct Injection {
  std::optional<int> xid;            // raise this XID once
  std::optional<int> ecc_dbe;        // add double-bit ECC errors
  std::optional<int> temperature_c;  // hold the temperature here
  bool lost = false;                 // the GPU stops answering (GPU_IS_LOST)
  bool clear = false;                // end every injected fault
  // A GPU setting as something other than the agent changed it: setting -> value, as
  // ParseGpuSetting reads it ("power_limit_w" -> "250").
  std::map<std::string, std::string> settings;
  // Node facts over what the node reports: "kernel", "os", "image_id".
  std::map<std::string, std::string> facts;
  std::vector<std::string> packages_add;     // "name=version"
  std::vector<std::string> packages_remove;  // "name"
  bool gpu_part() const {
    return xid || ecc_dbe || temperature_c || lost || clear || !settings.empty();
  }
};
// The node facts an injection may set.
inline constexpr std::array<std::string_view, 3> kInjectableFacts{"kernel", "os", "image_id"};

// The node actions an agent runs through the programs of its --action-dir (each named so), for
// operators' node actions and for rollouts.
inline constexpr std::array<std::string_view, 6> kNodeActions{
    "install-driver", "flash-gpu-firmware", "flash-nic-firmware",
    "reboot",         "reset-gpu",          "validate"};
bool IsNodeAction(std::string_view action);
// The command that sets one of a GPU's settings (drift remediation "auto"): args {setting,
// value}, as ParseGpuSetting (model/profile.h) reads them.
inline constexpr std::string_view kApplySettingAction = "apply-setting";
// The command that tells a simulated node which of its GPUs run a job, and how they behave
// (Command::loads); real agents refuse it.
inline constexpr std::string_view kSimLoadAction = "sim-load";

// A simulated GPU held by a job: the job's id and model/sim_profile.h's profile, and when the
// job started on it (the profile's phase). Wire: [gpu, job, profile, since_ms].
struct GpuLoad {
  int gpu = 0;
  int64_t job = 0;
  std::string profile;
  int64_t since_ms = 0;
  bool operator==(const GpuLoad&) const = default;
};

// controller -> agent: fault injection on a simulated GPU, a remediation action (the health
// model's recommended action, where the cluster's policy allows it), or a node action.
struct Command {
  int64_t id = 0;
  int gpu = 0;
  Injection inject;
  // "reset_gpu" or "reboot_node" (remediation), one of kNodeActions, or empty: an injection.
  std::string action;
  std::vector<std::string> args;  // a node action's arguments: the version, the package path
  int64_t timeout_ms = 0;         // a node action's deadline; 0: the agent's default
  // Simulated nodes only: the version this action installs is marked faulty (the simulator's
  // GPUs raise XIDs once it runs). Real agents ignore it.
  bool sim_faulty = false;
  // kSimLoadAction: every GPU of the node that a job holds; the others are free.
  std::vector<GpuLoad> loads;
};

// agent -> controller: how a remediation or node action went.
struct CommandResult {
  int64_t id = 0;
  int gpu = 0;
  std::string action;
  bool ok = false;
  std::string message;  // what the command printed (its end), or why it was not run
  int exit_code = -1;   // the program's exit code; -1: not run, killed or timed out
  int64_t duration_ms = 0;
};

struct Ack {
  int64_t seq = 0;  // every batch up to and including seq is stored
};

struct ErrorMessage {
  std::string code;
  std::string message;
};

using Message = std::variant<Hello, Welcome, Heartbeat, Inventory, ErrorMessage, Samples, Ack,
                             Command, CommandResult>;

std::string Encode(const Message& message);
// The "inject" object of a command or of POST .../inject: strict, with the field in errors.
Result<Injection> InjectionFromJson(const boost::json::object& o);
boost::json::object InjectionJson(const Injection& injection);  // what InjectionFromJson reads
Result<Message> Decode(std::string_view text);

}  // namespace gpufleet::proto
