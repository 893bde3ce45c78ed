#pragma once
// The node agent: connects to the controller's WebSocket at /api/v1/agent, registers (hello with
// a join token or its node token), reports inventory and facts, heartbeats, and reconnects with
// capped, jittered exponential backoff. AgentRunner owns the I/O thread(s) and can run many
// agents (the simulated fleet runs thousands in one process). Asio stays behind the pimpl.

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "agent/gpu_backend.h"
#include "net/tls.h"

namespace gpufleet {

struct AgentOptions {
  // "http://127.0.0.1:8080", "127.0.0.1:8080" or "https://ctl:8443"; or several controllers
  // of one database, comma-separated: the first that answers serves, one that fails (or whose
  // connection ends) goes to the back, and the next connection replays what was not
  // acknowledged.
  std::string controller;
  // For an https:// controller: whom to trust (net::MakeClientContext); shared by every agent
  // of a runner. Null: net::DefaultClientContext().
  net::TlsContext tls;
  std::string join_token;
  std::string node_token;  // from an earlier welcome; tried before the join token
  std::string hostname;    // overrides the host's name (the simulator sets one per node)
  Labels labels;           // what the operator says the node is (NodeFacts::labels)
  int inventory_interval_ms = 60'000;
  int sample_interval_ms = 1'000;  // telemetry; samples are stamped on this grid; 0: none
  // Unacknowledged telemetry kept across controller outages, in seconds of samples.
  int buffer_seconds = 900;
  // Remediation commands the controller may ask for (empty: refused), run with /bin/sh -c;
  // {index} and {uuid} name the GPU, e.g. "nvidia-smi --gpu-reset -i {index}".
  std::string reset_gpu_command;
  std::string reboot_command;  // e.g. "systemctl reboot"
  int command_timeout_ms = 300'000;
  // Node actions (proto::kNodeActions): the programs of this directory, each named for its
  // action (install-driver, flash-gpu-firmware, flash-nic-firmware, reboot, reset-gpu,
  // validate) and run with the controller's arguments (the version and package, or the GPU
  // index). Empty: every node action is refused. Simulated nodes carry them out themselves.
  std::string action_dir;
  int64_t action_timeout_ms = 3'600'000;  // when the controller gives no deadline
  // Where each node action is recorded as it starts (a JSON line: time, node, id, action,
  // args); empty: nowhere. Several agents of one runner may share the file.
  std::string action_log;
  // Where the answers to the newest node actions are kept across the agent's restarts, by
  // command id (a command asked again is answered from them, not run twice); empty: in memory.
  std::string answers_file;
  // Where sysfs is (NIC firmware: SYSFS/class/infiniband); tests point it at a fixture tree.
  // Simulated nodes read none.
  std::string sysfs_root = "/sys";
  // Where the node's files are (the package database: ROOT/var/lib/dpkg/status); tests point
  // it at a fixture tree. Simulated nodes read none.
  std::string root = "/";
  int backoff_initial_ms = 500;
  int backoff_max_ms = 30'000;
  // Called (on the I/O thread) when the controller issues a node token.
  std::function<void(const std::string&)> on_node_token;
};

// Keeps the node token in `path` (mode 0600, written whole through a rename): reads the one
// there into options.node_token, if any, and sets options.on_node_token to write each new one.
// A controller admits a join token only for a name not registered yet, so an agent that lost
// its node token needs an admin's `gpufleet nodes reset-identity NAME`.
void KeepNodeTokenIn(AgentOptions& options, const std::string& path);

struct AgentStats {
  std::atomic<int> connected{0};         // sessions with a live, welcomed connection
  std::atomic<int64_t> welcomes{0};      // successful registrations, reconnects included
  std::atomic<int64_t> failures{0};      // failed attempts
  std::atomic<int64_t> failovers{0};     // moves to the next of several controllers
  std::atomic<int64_t> rows_sampled{0};  // one GPU's fields at one time
  std::atomic<int64_t> rows_acked{0};
  std::atomic<int64_t> rows_dropped{0};  // lost to a full buffer during a long outage
};

// Thread-safe: Add and Stop may be called from any thread.
class AgentRunner {
 public:
  AgentRunner();
  ~AgentRunner();
  AgentRunner(const AgentRunner&) = delete;
  AgentRunner& operator=(const AgentRunner&) = delete;

  void Add(AgentOptions options, std::unique_ptr<GpuBackend> backend);
  // Stops the agent registered as `hostname` (AgentOptions::hostname) and forgets it; false
  // when there is none.
  bool Remove(const std::string& hostname);
  bool Has(const std::string& hostname) const;
  // Runs until Stop(); `threads` I/O threads (the caller's is one of them).
  void Run(int threads = 1);
  void Stop();
  const AgentStats& stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpufleet
