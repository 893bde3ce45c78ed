#include "model/catalog.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <sstream>

#include "common/strings.h"
#include "model/yaml_input.h"

namespace gpufleet {
namespace embedded {
std::string_view gpu_models();
}

Result<std::shared_ptr<const GpuCatalog>> GpuCatalog::Parse(std::string_view yaml,
                                                            std::string_view source) {
  auto catalog = std::make_shared<GpuCatalog>();
  const YamlFields r(source);
  try {
    YAML::Node root = YAML::Load(std::string(yaml));
    YAML::Node models = root["models"];
    if (!models || !models.IsSequence()) {
      return r.Bad(root, "", "'models' must be a list");
    }
    for (const auto& m : models) {
      GpuModelSpec s;
      if (!m["id"] || !m["nvml_names"] || !m["memory_gib"] || !m["tdp_w"]) {
        return r.Bad(m, "", "each model needs id, nvml_names, memory_gib and tdp_w");
      }
      s.id = m["id"].as<std::string>();
      s.name = m["name"].as<std::string>(s.id);
      s.architecture = m["architecture"].as<std::string>("");
      s.nvml_names = m["nvml_names"].as<std::vector<std::string>>();
      s.memory_gib = m["memory_gib"].as<double>();
      s.memory_type = m["memory_type"].as<std::string>("");
      s.tdp_w = m["tdp_w"].as<int>();
      s.max_operating_temp_c = m["max_operating_temp_c"].as<int>(0);
      s.form_factor = m["form_factor"].as<std::string>("");
      s.price_per_gpu_hour = m["price_per_gpu_hour"].as<double>(0);
      if (s.price_per_gpu_hour < 0) return r.Bad(m, "price_per_gpu_hour", "must not be negative");
      if (auto nv = m["nvlink"]) {
        s.nvlink_generation = nv["generation"].as<int>(0);
        s.nvlink_bandwidth_gbps = nv["bandwidth_gbps"].as<int>(0);
      }
      if (auto mig = m["mig"]) {
        s.mig_supported = mig["supported"].as<bool>(false);
        s.mig_max_instances = mig["max_instances"].as<int>(0);
        if (mig["profiles"]) s.mig_profiles = mig["profiles"].as<std::vector<std::string>>();
      }
      if (catalog->Find(s.id)) return r.Bad(m, "", "duplicate model id '" + s.id + "'");
      catalog->models_.push_back(std::move(s));
    }
  } catch (const YAML::Exception& e) {
    return MakeError(ErrorCode::kInvalidArgument,
                     std::string(source) + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  return std::shared_ptr<const GpuCatalog>(std::move(catalog));
}

Result<std::shared_ptr<const GpuCatalog>> GpuCatalog::Load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return MakeError(ErrorCode::kNotFound, "cannot read GPU catalogue " + path);
  std::stringstream buf;
  buf << in.rdbuf();
  return Parse(buf.str(), path);
}

std::shared_ptr<const GpuCatalog> GpuCatalog::Builtin() {
  static std::shared_ptr<const GpuCatalog> builtin = [] {
    auto parsed = Parse(embedded::gpu_models(), "data/gpu-models.yaml");
    if (!parsed.ok()) std::abort();  // the shipped file is tested; failing here is a build bug
    return parsed.value();
  }();
  return builtin;
}

const GpuModelSpec* GpuCatalog::Find(std::string_view id) const {
  for (const auto& m : models_) {
    if (m.id == id) return &m;
  }
  return nullptr;
}

const GpuModelSpec* GpuCatalog::MatchDeviceName(std::string_view nvml_name) const {
  std::string wanted = ToLower(nvml_name);
  for (const auto& m : models_) {
    for (const auto& n : m.nvml_names) {
      if (ToLower(n) == wanted) return &m;
    }
  }
  return nullptr;
}

}  // namespace gpufleet
