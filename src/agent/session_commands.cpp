// What the agent's session does for its controller's commands (remediation, GPU settings, node
// actions), and the node's facts it reports.

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cstdio>
#include <mutex>
#include <thread>

#include "agent/session.h"
#include "common/clock.h"
#include "common/command.h"
#include "common/json_text.h"

namespace gpufleet::agent_internal {

void Session::ApplySetting(const proto::Command& cmd) {
  proto::CommandResult result{cmd.id, cmd.gpu, cmd.action, false, ""};
  if (cmd.args.size() != 2) {
    result.message = "apply-setting takes a setting and a value";
  } else {
    auto done = backend_->ApplySetting(cmd.gpu, cmd.args[0], cmd.args[1]);
    result.ok = done.ok();
    result.exit_code = done.ok() ? 0 : -1;
    result.message = done.ok() ? done.value() : done.error().message;
    spdlog::info("agent {}: {}", options_.hostname, result.message);
    const bool needs_reset = cmd.args[0] == "ecc_mode" || cmd.args[0] == "mig_mode";
    if (done.ok() && needs_reset && !backend_->Simulated()) {
      if (!options_.reset_gpu_command.empty()) {
        RunInBackground(std::move(result),
                        ExpandCommand(options_.reset_gpu_command, cmd.gpu, GpuUuid(cmd.gpu)));
        return;
      }
      result.message += "; pending until the GPU is reset (the agent has no --reset-gpu-command)";
    }
  }
  results_.push_back(std::move(result));
  inventory_due_ = true;
}

std::string Session::GpuUuid(int gpu) const {
  for (const auto& g : last_inventory_) {
    if (g.index == gpu) return g.uuid;
  }
  return "";
}

void Session::RunInBackground(proto::CommandResult result, std::string command) {
  spdlog::warn("agent: {} of GPU {}: running '{}'", result.action, result.gpu, command);
  std::thread([self = shared_from_this(), result = std::move(result),
               command = std::move(command)]() mutable {
    auto outcome = RunShellCommand(command, self->options_.command_timeout_ms);
    std::string said = result.message.empty() ? "" : result.message + "; " + command + ": ";
    if (!outcome.ok()) {
      result.ok = false;
      result.message = said + outcome.error().message;
    } else {
      result.ok = outcome->exit_code == 0;
      result.exit_code = outcome->exit_code;
      result.message = said + (outcome->timed_out ? "timed out"
                                                  : "exit " + std::to_string(outcome->exit_code) +
                                                        ": " + outcome->output);
    }
    asio::post(self->ex_, [self, result = std::move(result)]() mutable {
      self->results_.push_back(std::move(result));
      self->inventory_due_ = true;
    });
  }).detach();
}

void Session::Remediate(const proto::Command& cmd) {
  proto::CommandResult result{cmd.id, cmd.gpu, cmd.action, false, ""};
  if (backend_->Simulated()) {
    auto done = backend_->Remediate(cmd.gpu, cmd.action);
    result.ok = done.ok();
    result.message = done.ok() ? done.value() : done.error().message;
    results_.push_back(std::move(result));
    inventory_due_ = true;
    return;
  }
  const std::string& tmpl =
      cmd.action == "reset_gpu" ? options_.reset_gpu_command : options_.reboot_command;
  if (tmpl.empty()) {
    result.message = "not allowed on this node: the agent has no --" +
                     std::string(cmd.action == "reset_gpu" ? "reset-gpu" : "reboot") + "-command";
    results_.push_back(std::move(result));
    return;
  }
  RunInBackground(std::move(result), ExpandCommand(tmpl, cmd.gpu, GpuUuid(cmd.gpu)));
}

void Session::NodeAction(const proto::Command& cmd) {
  // Asked again (its answer was lost with a connection): answered from the record, or, while it
  // runs, when it ends; never run twice. (Id 0 is no id: not remembered.)
  if (cmd.id != 0) {
    if (const auto* done = actions_answered_.Find(cmd.id, cmd.action)) {
      spdlog::warn("agent: node action {} (command {}) asked again: answered as before", cmd.action,
                   cmd.id);
      results_.push_back(*done);
      return;
    }
    if (!actions_running_.insert(cmd.id).second) {
      spdlog::warn("agent: node action {} (command {}) asked again: it is still running",
                   cmd.action, cmd.id);
      return;
    }
  }
  proto::CommandResult result{cmd.id, cmd.gpu, cmd.action, false, ""};
  if (backend_->Simulated()) {
    auto sim = backend_->Simulate(cmd);
    if (!sim) {
      result.message = "the simulated node does not do " + cmd.action;
      ActionAnswered(std::move(result));
      return;
    }
    Record(cmd);
    result.ok = sim->ok;
    result.exit_code = sim->ok ? 0 : 1;
    result.message = sim->message;
    if (sim->reboot) {  // it answers, then goes away
      ActionAnswered(std::move(result));
      reboot_for_ms_ = sim->duration_ms;
      return;
    }
    result.duration_ms = sim->duration_ms;
    asio::co_spawn(
        ex_,
        [self = shared_from_this(), result = std::move(result),
         wait = sim->duration_ms]() mutable -> asio::awaitable<void> {
          asio::steady_timer t(self->ex_, std::chrono::milliseconds(wait));
          co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
          self->ActionAnswered(std::move(result));
          self->inventory_due_ = true;
        },
        asio::detached);
    return;
  }
  if (options_.action_dir.empty()) {
    result.message = "not allowed on this node: the agent has no --action-dir";
    ActionAnswered(std::move(result));
    return;
  }
  std::string program = options_.action_dir + "/" + cmd.action;
  int64_t timeout = cmd.timeout_ms > 0 ? cmd.timeout_ms : options_.action_timeout_ms;
  Record(cmd);
  spdlog::warn("agent: node action {} (command {}): running {}", cmd.action, cmd.id, program);
  std::thread([self = shared_from_this(), result, program, args = cmd.args, timeout]() mutable {
    auto start = std::chrono::steady_clock::now();
    auto outcome =
        RunProgram(program, args, static_cast<int>(std::min<int64_t>(timeout, INT32_MAX)));
    result.duration_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::steady_clock::now() - start)
                             .count();
    if (!outcome.ok()) {
      result.message = "refused: " + outcome.error().message;
    } else {
      result.exit_code = outcome->exit_code;
      result.ok = outcome->exit_code == 0;
      result.message = outcome->timed_out ? "timed out after " + std::to_string(timeout / 1000) +
                                                " s: " + outcome->output
                                          : outcome->output;
    }
    asio::post(self->ex_, [self, result = std::move(result)]() mutable {
      self->ActionAnswered(std::move(result));
      self->inventory_due_ = true;
    });
  }).detach();
}

void Session::ActionAnswered(proto::CommandResult result) {
  actions_running_.erase(result.id);
  actions_answered_.Add(result);
  results_.push_back(std::move(result));
}

void Session::Record(const proto::Command& cmd) {
  if (options_.action_log.empty()) return;
  boost::json::array args;
  for (const auto& a : cmd.args) args.emplace_back(a);
  std::string line = JsonText(boost::json::object{{"time_ms", RealClock()->NowMs()},
                                                  {"node", options_.hostname},
                                                  {"id", cmd.id},
                                                  {"action", cmd.action},
                                                  {"args", std::move(args)}}) +
                     "\n";
  static std::mutex mu;
  std::lock_guard lock(mu);
  if (FILE* f = std::fopen(options_.action_log.c_str(), "a")) {
    std::fwrite(line.data(), 1, line.size(), f);
    std::fclose(f);
  }
}

NodeFacts Session::Facts() {
  NodeFacts f = HostFacts();
  if (!options_.hostname.empty()) f.hostname = options_.hostname;
  f.labels = options_.labels;
  f.backend = backend_->Name();
  auto nics = backend_->Nics();
  f.nics = nics ? std::move(*nics) : ReadNics(options_.sysfs_root);
  // The package database: the backend's own (simulated nodes), else dpkg's status file or
  // the rpm database under the root; neither leaves the list unknown.
  auto packages = backend_->Packages();
  if (!packages) packages = packages_.Read();
  f.container_toolkit = packages ? ContainerToolkitVersion(*packages) : "";
  f.packages = std::move(packages);
  if (auto d = backend_->Driver(); d.ok()) {
    f.driver_version = d->driver_version;
    f.cuda_driver_version = d->cuda_driver_version;
  }
  if (!backend_->Simulated()) {
    f.image_id = ReadImageId(options_.root);
    f.device_files = ReadDeviceFiles(options_.root);
  }
  backend_->AdjustFacts(f);
  return f;
}

}  // namespace gpufleet::agent_internal
