#pragma once
// `gpufleet agent` and the portable `gpufleet-agent`: the same flags, the same run.

#include <string>
#include <vector>

#include "agent/gpu_backend.h"
#include "common/result.h"

namespace CLI {
class App;
}

namespace gpufleet::cli {
struct Globals;
}

namespace gpufleet::app {

// How long simulated node actions take (`up`, `sim`, `agent --backend sim`), as flags.
struct SimActionFlags {
  std::string install = "10s", flash = "20s", reboot = "15s", reset = "2s", validate = "5s";
  double failure_rate = 0;
  std::string action_log;
  void Add(CLI::App* app);
  Result<SimNodeSpec::ActionTimes> Times() const;
};

struct AgentFlags {
  std::string controller, join_token, backend = "nvml", nvml_library, hostname, state_dir;
  std::string sim_model = "H100-SXM5-80GB";
  int sim_gpus = 8;
  std::string log_level = "info";
  std::string reset_gpu_command, reboot_command;
  std::string sysfs_root = "/sys";
  std::string root = "/";
  std::string client_cert, client_key;  // for a controller with --client-ca
  std::string action_dir, action_timeout = "1h";
  std::vector<std::string> labels;
  std::vector<std::string> sim_gpus_from;
  SimActionFlags sim_actions;
};

// The agent's flags on `app` (the `agent` subcommand, or gpufleet-agent's own command line).
void AddAgentFlags(CLI::App* a, AgentFlags& f);
// Runs the agent until SIGINT or SIGTERM; the exit code.
int RunAgent(AgentFlags& f, const cli::Globals& g);

}  // namespace gpufleet::app
