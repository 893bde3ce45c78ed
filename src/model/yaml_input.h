#pragma once
// YAML from outside (fleet files, rule files, bulletins): read event by event first, bounded,
// before a node tree is built. Aliases are refused (a few hundred bytes of nested aliases
// expand into gigabytes when the tree is walked), and so are duplicate keys in a mapping (one
// reader keeps the first, another the last: a file must say one thing). Errors name the source
// and the line. Includes yaml-cpp: for the .cpp files that read YAML, not for headers.

#include <yaml-cpp/yaml.h>

#include <initializer_list>
#include <string>
#include <string_view>

#include "common/result.h"

namespace gpufleet {

// The first document of `text`, or kInvalidArgument "SOURCE:LINE: message".
Result<YAML::Node> LoadYamlInput(std::string_view text, std::string_view source);

// The strict reader of the YAML files (fleet, rule, compatibility and bulletin files), as
// common/json_fields.h's JsonFields is of JSON bodies: every error is
// "FILE:LINE: path.to.field: message", the line that of the node at fault. A field that is
// absent or null (`key:`) is not given.
class YamlFields {
 public:
  explicit YamlFields(std::string_view file) : file_(file) {}

  const std::string& file() const { return file_; }
  // "FILE:LINE: PATH: WHAT" ("FILE:LINE: WHAT" when `path` is empty; no LINE for a node that is
  // not in the file).
  Error Bad(const YAML::Node& node, const std::string& path, const std::string& what) const;
  // `map` (when given) is a mapping of `allowed` keys only: "must be a mapping", "unknown field".
  Status Only(const YAML::Node& map, const std::string& path,
              std::initializer_list<std::string_view> allowed) const;
  // map[key] as text, "" when not given: "is required", "must be a string".
  Result<std::string> String(const YAML::Node& map, const std::string& path, const char* key,
                             bool required) const;
  // "path.key", or "key" at the top.
  static std::string Join(const std::string& path, std::string_view key);

 private:
  std::string file_;
};

}  // namespace gpufleet
