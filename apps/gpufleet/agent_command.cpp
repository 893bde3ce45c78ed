#include "apps/gpufleet/agent_command.h"

#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <filesystem>
#include <map>
#include <thread>
#include <tuple>

#include "agent/agent.h"
#include "apps/gpufleet/process.h"
#include "common/clock.h"
#include "model/catalog.h"
#include "model/profile.h"

namespace gpufleet::app {
namespace {

// --sim-gpu-from SLOT=HOST:INDEX, repeated.
Result<std::map<int, std::pair<std::string, int>>> ParseGpusFrom(
    const std::vector<std::string>& args, int gpus) {
  std::map<int, std::pair<std::string, int>> out;
  for (const auto& arg : args) {
    auto bad = [&] {
      return MakeError(
          ErrorCode::kInvalidArgument,
          "--sim-gpu-from '" + arg + "': expected SLOT=HOST:INDEX, such as 0=node-a:3");
    };
    auto eq = arg.find('='), colon = arg.rfind(':');
    if (eq == std::string::npos || colon == std::string::npos || colon < eq + 2) return bad();
    int slot = 0, index = 0;
    std::string_view s(arg.data(), eq), i(arg.data() + colon + 1, arg.size() - colon - 1);
    auto [p1, e1] = std::from_chars(s.data(), s.data() + s.size(), slot);
    auto [p2, e2] = std::from_chars(i.data(), i.data() + i.size(), index);
    if (e1 != std::errc() || p1 != s.data() + s.size() || e2 != std::errc() ||
        p2 != i.data() + i.size() || slot < 0 || index < 0) {
      return bad();
    }
    if (slot >= gpus) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "--sim-gpu-from '" + arg + "': slot " + std::to_string(slot) +
                           " is past the node's " + std::to_string(gpus) + " GPUs");
    }
    out[slot] = {arg.substr(eq + 1, colon - eq - 1), index};
  }
  return out;
}

}  // namespace

int RunAgent(AgentFlags& f, const cli::Globals& g) {
  SetLogLevel(f.log_level);
  auto labels = ParseLabelArgs(f.labels);
  if (!labels.ok()) return Fail(labels.error());
  auto tls = ClientContext(f.controller, g, f.client_cert, f.client_key);
  if (!tls.ok()) return Fail(tls.error());
  if (f.join_token.empty()) {
    if (const char* t = std::getenv("GPUFLEET_JOIN_TOKEN"); t && *t) f.join_token = t;
  }
  std::unique_ptr<GpuBackend> backend;
  if (f.backend == "nvml") {
    auto nvml = OpenNvmlBackend(f.nvml_library);
    if (!nvml.ok()) return Fail(nvml.error());
    backend = std::move(nvml.value());
  } else {
    const GpuModelSpec* model = GpuCatalog::Builtin()->Find(f.sim_model);
    if (!model)
      return Fail(MakeError(ErrorCode::kInvalidArgument, "unknown --sim-model " + f.sim_model));
    SimNodeSpec spec;
    spec.hostname = f.hostname.empty() ? HostFacts().hostname : f.hostname;
    spec.model = model;
    spec.gpu_count = f.sim_gpus;
    auto from = ParseGpusFrom(f.sim_gpus_from, f.sim_gpus);
    if (!from.ok()) return Fail(from.error());
    spec.gpus_from = std::move(from).value();
    auto times = f.sim_actions.Times();
    if (!times.ok()) return Fail(times.error());
    spec.actions = times.value();
    backend = MakeSimBackend(spec);
  }
  AgentOptions o;
  o.controller = f.controller;
  o.tls = tls.value();
  o.join_token = f.join_token;
  o.hostname = f.hostname;
  o.labels = std::move(labels).value();
  o.reset_gpu_command = f.reset_gpu_command;
  o.reboot_command = f.reboot_command;
  o.sysfs_root = f.sysfs_root;
  o.root = f.root;
  o.action_dir = f.action_dir;
  o.action_log = f.sim_actions.action_log;
  o.action_timeout_ms = ParseDurationMs(f.action_timeout);
  if (o.action_timeout_ms < 1000) {
    return Fail(MakeError(ErrorCode::kInvalidArgument,
                          "--action-timeout must be a duration of 1s or more, e.g. 1h"));
  }
  if (!o.action_dir.empty() && !std::filesystem::is_directory(o.action_dir)) {
    return Fail(
        MakeError(ErrorCode::kNotFound, "--action-dir " + o.action_dir + " is not a directory"));
  }
  if (!f.state_dir.empty()) {
    KeepNodeTokenIn(o, f.state_dir + "/node.token");
    o.answers_file = f.state_dir + "/answers.jsonl";
  }
  if (o.join_token.empty() && o.node_token.empty()) {
    return Fail(MakeError(ErrorCode::kInvalidArgument,
                          "give --join-token (or GPUFLEET_JOIN_TOKEN); create one with "
                          "`gpufleet tokens create --pool POOL`"));
  }
  sigset_t set = BlockStopSignals();
  AgentRunner runner;
  runner.Add(std::move(o), std::move(backend));
  std::thread io([&] { runner.Run(1); });
  spdlog::info("agent: {} backend, controller {}", f.backend, f.controller);
  WaitForSignal(set);
  runner.Stop();
  io.join();
  return 0;
}

void SimActionFlags::Add(CLI::App* app) {
  app->add_option("--sim-install-time", install, "how long a simulated driver install takes");
  app->add_option("--sim-flash-time", flash, "how long a simulated firmware flash takes");
  app->add_option("--sim-reboot-time", reboot, "how long a simulated node is off to reboot");
  app->add_option("--sim-reset-time", reset, "how long a simulated GPU reset takes");
  app->add_option("--sim-validate-time", validate, "how long a simulated diagnostic takes");
  app->add_option("--sim-action-failure-rate", failure_rate,
                  "share of simulated node actions that fail, 0..1")
      ->check(CLI::Range(0.0, 1.0));
  app->add_option("--action-log", action_log,
                  "record every node action an agent runs in this file, a JSON line each");
}

Result<SimNodeSpec::ActionTimes> SimActionFlags::Times() const {
  SimNodeSpec::ActionTimes t;
  for (auto [flag, text, into] : {std::tuple{"--sim-install-time", &install, &t.install_ms},
                                  std::tuple{"--sim-flash-time", &flash, &t.flash_ms},
                                  std::tuple{"--sim-reboot-time", &reboot, &t.reboot_ms},
                                  std::tuple{"--sim-reset-time", &reset, &t.reset_ms},
                                  std::tuple{"--sim-validate-time", &validate, &t.validate_ms}}) {
    *into = ParseDurationMs(*text);
    if (*into < 0 || *into > 24 * 3'600'000LL) {
      return MakeError(ErrorCode::kInvalidArgument,
                       std::string(flag) + " must be a duration up to 24h, e.g. 10s");
    }
  }
  t.failure_rate = failure_rate;
  return t;
}

void AddAgentFlags(CLI::App* a, AgentFlags& f) {
  a->add_option("--controller", f.controller,
                "controller URL, e.g. http://10.0.0.5:8080; several controllers of one database "
                "comma-separated: the first that answers, failing over in turn")
      ->required();
  a->add_option("--join-token", f.join_token, "pool join token (env GPUFLEET_JOIN_TOKEN)");
  a->add_option("--backend", f.backend, "nvml or sim")->check(CLI::IsMember({"nvml", "sim"}));
  a->add_option("--nvml-library", f.nvml_library,
                "path of libnvidia-ml.so.1 (env GPUFLEET_NVML_LIBRARY)");
  a->add_option("--hostname", f.hostname, "node name to register as (default: hostname)");
  a->add_option("--state-dir", f.state_dir,
                "where to keep the node token and the answers to node actions across restarts");
  a->add_option("--label", f.labels,
                "KEY=VALUE the node carries (repeat), e.g. rack=r12: golden profile overrides "
                "select nodes by them");
  a->add_option("--sim-model", f.sim_model, "GPU model for --backend sim");
  a->add_option("--sim-gpus", f.sim_gpus, "GPU count for --backend sim");
  a->add_option("--sim-gpu-from", f.sim_gpus_from,
                "SLOT=HOST:INDEX: the simulated GPU in SLOT is the one HOST's simulated GPU INDEX "
                "is (its serial and UUID), as if moved from there (repeat)");
  a->add_option("--log-level", f.log_level, "trace, debug, info, warn, error");
  a->add_option("--reset-gpu-command", f.reset_gpu_command,
                "remediation: how to reset a GPU, {index} and {uuid} replaced, e.g. "
                "'nvidia-smi --gpu-reset -i {index}' (default: refuse)");
  a->add_option("--reboot-command", f.reboot_command,
                "remediation: how to reboot the node, e.g. 'systemctl reboot' (default: refuse)");
  a->add_option("--sysfs-root", f.sysfs_root,
                "where sysfs is mounted: NIC firmware is read from ROOT/class/infiniband/*/fw_ver "
                "and board_id (default /sys)");
  a->add_option("--root", f.root,
                "where the node's file system is: the NVIDIA Container Toolkit's version is read "
                "from ROOT/var/lib/dpkg/status (default /)");
  a->add_option("--client-cert", f.client_cert,
                "PEM client certificate, for a controller with --client-ca (gpufleet tls issue)");
  a->add_option("--client-key", f.client_key, "PEM private key of --client-cert");
  a->add_option("--action-dir", f.action_dir,
                "node actions: a directory of programs named install-driver, "
                "flash-gpu-firmware, flash-nic-firmware, reboot, reset-gpu and validate, run "
                "with the version and package (or GPU index) as arguments (default: refuse)");
  a->add_option("--action-timeout", f.action_timeout,
                "deadline of a node action when the controller gives none (default 1h)");
  f.sim_actions.Add(a);
}

}  // namespace gpufleet::app
