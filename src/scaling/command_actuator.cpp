// The `command` actuator: the operator's provision and deprovision programs (sched::ActuatorSpec).

#include <algorithm>
#include <utility>
#include <vector>

#include "common/command.h"
#include "common/strings.h"
#include "scaling/scaling.h"
#include "sched/policy_json.h"

namespace gpufleet::scaling {
namespace {

class CommandActuator : public Actuator {
 public:
  Status Provision(const ActuatorRequest& r) override {
    return Run("provision", r.spec.provision, r);
  }
  Status Deprovision(const ActuatorRequest& r) override {
    return Run("deprovision", r.spec.deprovision, r);
  }

 private:
  static Status Run(const char* what, std::string command, const ActuatorRequest& r) {
    std::string nodes = Join(r.nodes, " ");
    for (auto [key, value] : {std::pair<std::string, std::string>{"{pool}", r.pool},
                              std::pair<std::string, std::string>{"{nodes}", nodes}}) {
      for (size_t at = command.find(key); at != std::string::npos; at = command.find(key, at)) {
        command.replace(at, key.size(), value);
        at += value.size();
      }
    }
    std::vector<std::pair<std::string, std::string>> env{
        {"GPUFLEET_POOL", r.pool},
        {"GPUFLEET_CLUSTER", r.cluster},
        {"GPUFLEET_NODES", nodes},
        {"GPUFLEET_GPU_MODEL", r.gpu_model},
        {"GPUFLEET_GPUS_PER_NODE", std::to_string(r.gpus_per_node)},
        {"GPUFLEET_CONTROLLER", r.controller}};
    if (!r.join_token.empty()) env.emplace_back("GPUFLEET_JOIN_TOKEN", r.join_token);
    auto timeout_ms = static_cast<int>(std::min(r.spec.timeout_s * 1000.0, 86'400'000.0));
    auto out = RunShellCommand(command, timeout_ms, env);
    if (!out.ok()) return out.error();
    if (out->timed_out) {
      return MakeError(ErrorCode::kUnavailable, std::string(what) + " command timed out after " +
                                                    sched::FormatSeconds(r.spec.timeout_s));
    }
    if (out->exit_code != 0) {
      std::string text = out->output;
      while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
      if (auto nl = text.rfind('\n'); nl != std::string::npos) text = text.substr(nl + 1);
      return MakeError(ErrorCode::kUnavailable, std::string(what) + " command exited " +
                                                    std::to_string(out->exit_code) +
                                                    (text.empty() ? "" : ": " + text));
    }
    return {};
  }
};

}  // namespace

std::unique_ptr<Actuator> MakeCommandActuator() { return std::make_unique<CommandActuator>(); }

}  // namespace gpufleet::scaling
