#pragma once
// Errors for YAML files that name the file, the line and the field path, e.g.
// "fleet.yaml:12: clusters[1].pools[0].gpu_model: ...": shared by the fleet and rule files.
// Include only from .cpp files that already use yaml-cpp.

#include <yaml-cpp/yaml.h>

#include <initializer_list>
#include <string>
#include <string_view>

#include "common/result.h"

namespace gpufleet {

inline Error YamlError(std::string_view file, const YAML::Node& node, const std::string& path,
                       const std::string& what) {
  std::string where(file);
  if (node.IsDefined() && node.Mark().line >= 0) {
    where += ":" + std::to_string(node.Mark().line + 1);
  }
  return MakeError(ErrorCode::kInvalidArgument,
                   where + ": " + (path.empty() ? "" : path + ": ") + what);
}

// Every key of `map` must be one of `allowed`: strict files catch typos.
inline Status YamlKeys(std::string_view file, const YAML::Node& map, const std::string& path,
                       std::initializer_list<std::string_view> allowed) {
  for (const auto& kv : map) {
    std::string key = kv.first.as<std::string>("");
    bool ok = false;
    for (auto a : allowed) ok = ok || key == a;
    if (!ok)
      return YamlError(file, kv.first, path.empty() ? key : path + "." + key, "unknown field");
  }
  return {};
}

}  // namespace gpufleet
