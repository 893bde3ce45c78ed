#pragma once
// YAML from outside (fleet files, rule files, bulletins): read event by event first, bounded,
// before a node tree is built. Aliases are refused (a few hundred bytes of nested aliases
// expand into gigabytes when the tree is walked), and so are duplicate keys in a mapping (one
// reader keeps the first, another the last: a file must say one thing). Errors name the source
// and the line. Includes yaml-cpp: for the .cpp files that read YAML, not for headers.

#include <yaml-cpp/yaml.h>

#include <string_view>

#include "common/result.h"

namespace gpufleet {

// The first document of `text`, or kInvalidArgument "SOURCE:LINE: message".
Result<YAML::Node> LoadYamlInput(std::string_view text, std::string_view source);

}  // namespace gpufleet
