#pragma once
// The simulated fleet: many simulated agents in one process, each with its own WebSocket
// connection, hostname and GPU identities. Every node it reports is marked simulated.

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agent/agent.h"
#include "model/catalog.h"

namespace gpufleet {

struct SimPoolOptions {
  std::string controller;
  std::string join_token;
  std::string name_prefix = "sim";  // nodes are <prefix>-0000, <prefix>-0001, ...
  int nodes = 1;
  int gpus_per_node = 8;
  std::string model = "H100-SXM5-80GB";  // catalogue id
  int first_index = 0;
  // The driver each node runs: node N (its name's number) runs drivers[N % size]; empty: the
  // simulated default (SimNodeSpec). The CUDA version follows the driver's branch.
  std::vector<std::string> drivers;
  std::vector<std::string> container_toolkits;  // the same for the Container Toolkit
  // A package installed beside the base ones, "name=version", the same way; "-" (or anything
  // without '=') for none.
  std::vector<std::string> extra_packages;
  // Every GPU's power limit in watts at start, the same way; "-" (or 0) for the model's TDP.
  std::vector<std::string> power_limits;
  // The node's labels, "KEY=VALUE;KEY=VALUE", the same way; "-" (or "") for none.
  std::vector<std::string> labels;
  net::TlsContext tls;  // for an https:// controller (AgentOptions::tls)
  // Where each node keeps its node token (DIR/NAME.token, KeepNodeTokenIn), so that a fleet
  // started again rejoins as the same nodes; empty: in memory only, for one run.
  std::string token_dir;
};

// Thread-safe: AddPool and Stop may be called from any thread while Run runs.
class SimFleet {
 public:
  explicit SimFleet(std::shared_ptr<const GpuCatalog> catalog);
  Status AddPool(const SimPoolOptions& options);
  // One node named `name` (options.nodes and name_prefix are not used); nothing when this
  // fleet already runs a node of that name.
  Status AddNode(const SimPoolOptions& options, const std::string& name);
  // Stops the node's agent; false when this fleet does not run it.
  bool RemoveNode(const std::string& name);
  // How long the node actions of nodes added from now on take, and where they record them
  // (AgentOptions::action_log; empty: nowhere).
  void SetActions(const SimNodeSpec::ActionTimes& times, const std::string& action_log);
  void Run(int threads = 1);  // until Stop()
  void Stop();
  const AgentStats& stats() const { return runner_.stats(); }
  int nodes() const { return nodes_; }

 private:
  std::shared_ptr<const GpuCatalog> catalog_;
  AgentRunner runner_;
  std::atomic<int> nodes_{0};
  std::mutex mu_;
  SimNodeSpec::ActionTimes actions_;  // guarded by mu_
  std::string action_log_;            // guarded by mu_
};

}  // namespace gpufleet
