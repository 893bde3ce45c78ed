#pragma once
// The GPU specification catalogue (data/gpu-models.yaml, embedded in the binary, overridable
// with --gpu-catalog). Immutable after loading; safe to share between threads.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace gpufleet {

struct GpuModelSpec {
  std::string id;  // "H100-SXM5-80GB"
  std::string name;
  std::string architecture;
  std::vector<std::string> nvml_names;
  double memory_gib = 0;
  std::string memory_type;
  int tdp_w = 0;
  int max_operating_temp_c = 0;
  std::string form_factor;
  int nvlink_generation = 0;
  int nvlink_bandwidth_gbps = 0;
  bool mig_supported = false;
  int mig_max_instances = 0;
  std::vector<std::string> mig_profiles;
  // The default rate of the cost reports, per GPU-hour; 0: none given (OpenCost's default).
  double price_per_gpu_hour = 0;
};

class GpuCatalog {
 public:
  static Result<std::shared_ptr<const GpuCatalog>> Parse(std::string_view yaml,
                                                         std::string_view source);
  static Result<std::shared_ptr<const GpuCatalog>> Load(const std::string& path);
  static std::shared_ptr<const GpuCatalog> Builtin();  // the embedded data/gpu-models.yaml

  const GpuModelSpec* Find(std::string_view id) const;
  // The model whose nvml_names contains the driver's device name (case-insensitive).
  const GpuModelSpec* MatchDeviceName(std::string_view nvml_name) const;
  const std::vector<GpuModelSpec>& models() const { return models_; }

 private:
  std::vector<GpuModelSpec> models_;
};

}  // namespace gpufleet
