// gres.conf lines from a node's GPUs (gres.h).

#include "slurm/gres.h"

#include <algorithm>
#include <cctype>
#include <map>

namespace gpufleet::slurm {

std::string GresType(const std::string& gpu_name) {
  std::string out;
  for (char c : gpu_name) {
    out += std::isspace(static_cast<unsigned char>(c))
               ? '_'
               : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

namespace {

bool ValidType(const std::string& type) {
  return !type.empty() && type.size() <= 64 && std::all_of(type.begin(), type.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  });
}

}  // namespace

Result<GresConf> MakeGresConf(const gpufleet::Node& node, const Scheduler* scheduler,
                              const std::string& type) {
  if (!type.empty() && !ValidType(type)) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "type: '" + type +
                         "' is not a Slurm GRES type (letters, digits, '_', '-', "
                         "'.'; at most 64)");
  }
  if (node.gpus.empty()) {
    return MakeError(ErrorCode::kConflict,
                     "node '" + node.name + "' has no GPUs (has its agent registered?)");
  }
  GresConf out;
  out.node = node.name;
  out.slurm_node = scheduler && scheduler->type == "slurm"
                       ? SchedulerNodeName(scheduler->node_name, node.name)
                       : node.name;
  std::vector<const Gpu*> gpus;
  for (const auto& g : node.gpus) gpus.push_back(&g);
  std::sort(gpus.begin(), gpus.end(),
            [](const Gpu* a, const Gpu* b) { return a->minor_number < b->minor_number; });
  std::map<std::string, int> count;  // by type, for Gres=
  std::vector<std::string> order;
  for (const Gpu* g : gpus) {
    std::string which = "GPU " + std::to_string(g->index) + " of node '" + node.name + "'";
    if (g->minor_number < 0) {
      return MakeError(ErrorCode::kConflict,
                       which +
                           ": its device file (/dev/nvidiaN) is unknown: the agent could not "
                           "read NVML's minor number (an agent older than this controller?)");
    }
    if (g->mig_mode == 1) {
      return MakeError(ErrorCode::kConflict,
                       which +
                           " has MIG enabled: its instances need MultipleFiles= lines with "
                           "their /dev/nvidia-caps files, which gpufleet does not write");
    }
    std::string t = type.empty() ? GresType(g->name) : type;
    if (t.empty() || !ValidType(t)) {
      return MakeError(ErrorCode::kConflict,
                       which + ": its name '" + g->name + "' makes no GRES type: give one");
    }
    out.lines.push_back("NodeName=" + out.slurm_node + " Name=gpu Type=" + t + " File=/dev/nvidia" +
                        std::to_string(g->minor_number));
    if (count[t]++ == 0) order.push_back(t);
  }
  for (const auto& t : order) {
    out.gres += (out.gres.empty() ? "gpu:" : ",gpu:") + t + ":" + std::to_string(count[t]);
  }
  return out;
}

}  // namespace gpufleet::slurm
