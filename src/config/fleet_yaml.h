// The fleet file's reader as fleet_objects.cpp uses it; private to src/config.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <string_view>

#include "config/fleet_spec.h"

namespace gpufleet {

// A parsed fleet document, its errors "filename:line: path: message".
Result<FleetSpec> ParseFleetRoot(const YAML::Node& root, std::string_view filename,
                                 const GpuCatalog& catalog);

// A YAML mapping as JSON text: plain scalars that read as numbers or booleans become those,
// quoted ones and everything else strings.
void YamlToJson(const YAML::Node& n, std::string& out);

}  // namespace gpufleet
