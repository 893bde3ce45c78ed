#pragma once
// The gres.conf lines of a node, from the GPUs its agent found: Debian's Slurm is built
// without NVML, so slurmd cannot autodetect them (AutoDetect=nvml) and a site writes
// `NodeName=gpu01 Name=gpu Type=nvidia_h100_80gb_hbm3 File=/dev/nvidia0` per GPU by hand.

#include <string>
#include <vector>

#include "common/result.h"
#include "model/types.h"

namespace gpufleet::slurm {

struct GresConf {
  std::string node;                // gpufleet's
  std::string slurm_node;          // Slurm's (the cluster's node_name template applied)
  std::vector<std::string> lines;  // gres.conf, one per GPU, by device file
  std::string gres;                // slurm.conf's Gres= for the node: "gpu:TYPE:N[,gpu:TYPE2:M]"
};

// Slurm's type for a GPU name as AutoDetect=nvml makes it: lower case, spaces as underscores
// ("NVIDIA H100 80GB HBM3" -> "nvidia_h100_80gb_hbm3").
std::string GresType(const std::string& gpu_name);

// `type`, when not empty, replaces every GPU's (a site that names its types "h100"); it must be
// letters, digits, '_', '-' or '.', at most 64 (kInvalidArgument). kConflict when the
// node has no GPUs, a GPU's device file number is unknown, or MIG is on (MIG instances need
// MultipleFiles= lines with their capability files, which are not written here).
Result<GresConf> MakeGresConf(const gpufleet::Node& node, const Scheduler* scheduler,
                              const std::string& type);

}  // namespace gpufleet::slurm
