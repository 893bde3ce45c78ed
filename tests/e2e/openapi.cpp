#include "openapi.h"

#include <yaml-cpp/yaml.h>

#include <boost/json.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <regex>

namespace gpufleet::e2e {
namespace {

namespace json = boost::json;

const YAML::Node& Spec() {
  static const YAML::Node spec =
      YAML::LoadFile(std::string(GPUFLEET_SOURCE_DIR) + "/docs/openapi.yaml");
  return spec;
}

std::vector<std::string> Split(const std::string& path) {
  std::vector<std::string> out;
  size_t start = 1;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    out.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// The documented path that `path` is an instance of: the one with the most literal segments.
std::string Template(const std::string& path) {
  const auto want = Split(path);
  std::string best;
  int best_literals = -1;
  for (const auto& entry : Spec()["paths"]) {
    const std::string t = entry.first.as<std::string>();
    const auto segs = Split(t);
    if (segs.size() != want.size()) continue;
    int literals = 0;
    bool match = true;
    for (size_t i = 0; i < segs.size() && match; ++i) {
      if (segs[i].starts_with('{') && segs[i].ends_with('}')) {
        match = !want[i].empty();
      } else {
        match = segs[i] == want[i];
        literals += match;
      }
    }
    if (match && literals > best_literals) {
      best = t;
      best_literals = literals;
    }
  }
  return best;
}

// yaml-cpp's Node assignment writes through to the node assigned to: reset() rebinds, and the
// spec is only read through const nodes.
YAML::Node Resolve(const YAML::Node& schema) {
  YAML::Node cur;
  cur.reset(schema);
  for (int depth = 0; depth < 16 && cur.IsMap() && cur["$ref"]; ++depth) {
    std::string ref = cur["$ref"].as<std::string>();
    const std::string prefix = "#/components/schemas/";
    if (!ref.starts_with(prefix)) return YAML::Node();
    cur.reset(Spec()["components"]["schemas"][ref.substr(prefix.size())]);
  }
  return cur;
}

std::string Kind(const json::value& v) {
  switch (v.kind()) {
    case json::kind::null:
      return "null";
    case json::kind::bool_:
      return "boolean";
    case json::kind::int64:
    case json::kind::uint64:
      return "integer";
    case json::kind::double_:
      return "number";
    case json::kind::string:
      return "string";
    case json::kind::array:
      return "array";
    case json::kind::object:
      return "object";
  }
  return "?";
}

bool IsDateTime(const std::string& s) {
  static const std::regex re(R"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2}))");
  return std::regex_match(s, re);
}

void Check(const json::value& v, const YAML::Node& node, const std::string& at,
           std::vector<std::string>& out) {
  const YAML::Node schema = Resolve(node);
  if (!schema || !schema.IsMap()) {
    out.push_back(at + ": the schema is missing or an unknown $ref");
    return;
  }
  if (v.is_null()) {
    if (!(schema["nullable"] && schema["nullable"].as<bool>())) {
      out.push_back(at + ": null, and the schema is not nullable");
    }
    return;
  }
  if (schema["type"]) {
    const std::string type = schema["type"].as<std::string>();
    const std::string kind = Kind(v);
    const bool ok = kind == type || (type == "number" && kind == "integer");
    if (!ok) {
      out.push_back(at + ": " + kind + ", the schema says " + type);
      return;
    }
  }
  if (schema["enum"]) {
    const std::string text = v.is_string() ? std::string(v.as_string()) : json::serialize(v);
    bool found = false;
    for (const auto& e : schema["enum"]) found = found || e.as<std::string>() == text;
    if (!found) out.push_back(at + ": '" + text + "' is not in the schema's enum");
  }
  if (v.is_string() && schema["format"] && schema["format"].as<std::string>() == "date-time" &&
      !IsDateTime(std::string(v.as_string()))) {
    out.push_back(at + ": '" + std::string(v.as_string()) + "' is not an RFC 3339 date-time");
  }
  if (v.is_array() && schema["items"]) {
    const auto& a = v.as_array();
    for (size_t i = 0; i < a.size(); ++i) {
      Check(a[i], schema["items"], at + "[" + std::to_string(i) + "]", out);
    }
  }
  if (!v.is_object()) return;
  const auto& o = v.as_object();
  if (schema["required"]) {
    for (const auto& r : schema["required"]) {
      if (!o.contains(r.as<std::string>())) {
        out.push_back(at + ": required property '" + r.as<std::string>() + "' is missing");
      }
    }
  }
  const YAML::Node props = schema["properties"];
  const YAML::Node extra = schema["additionalProperties"];
  for (const auto& [key, value] : o) {
    const std::string k(key);
    if (props && props[k]) {
      Check(value, props[k], at + "." + k, out);
    } else if (extra && extra.IsMap()) {
      Check(value, extra, at + "." + k, out);
    } else if (props && !(extra && extra.IsScalar() && extra.as<bool>())) {
      out.push_back(at + ": property '" + k + "' is not in the schema");
    }
  }
}

// With GPUFLEET_OPENAPI_SAMPLES=DIR, the first body of each operation and status is written
// there: what a schema is written from.
void KeepSample(const std::string& method, const std::string& path, int status,
                const json::value& body) {
  const char* dir = std::getenv("GPUFLEET_OPENAPI_SAMPLES");
  if (!dir) return;
  std::string name = method + path + "-" + std::to_string(status) + ".json";
  for (char& c : name) c = (c == '/' || c == '{' || c == '}') ? '_' : c;
  std::filesystem::path file = std::filesystem::path(dir) / name;
  if (!std::filesystem::exists(file)) std::ofstream(file) << json::serialize(body);
}

}  // namespace

std::vector<std::string> CheckResponse(const std::string& method, const std::string& target,
                                       int status, const json::value* body) {
  static std::mutex mu;  // yaml-cpp's reads are not safe from several threads
  std::lock_guard lock(mu);
  const std::string path = target.substr(0, target.find('?'));
  const std::string op = method + " " + path;
  const std::string t = Template(path);
  // The router's own answers: 404 to a path it does not serve, 405 to a method it does not.
  if (t.empty()) {
    if (status == 404) return {};
    return {op + ": no path of docs/openapi.yaml matches"};
  }
  std::string lower = method;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const YAML::Node operation = Spec()["paths"][t][lower];
  if (!operation) {
    if (status == 405) return {};
    return {op + ": " + t + " has no " + lower + " in docs/openapi.yaml"};
  }
  const YAML::Node response = operation["responses"][std::to_string(status)];
  if (!response) {
    return {op + ": status " + std::to_string(status) + " is not documented for " + method + " " +
            t};
  }
  if (!body) return {};
  KeepSample(method, t, status, *body);
  YAML::Node r;
  r.reset(response);
  if (r["$ref"]) {
    std::string ref = r["$ref"].as<std::string>();
    r.reset(Spec()["components"]["responses"][ref.substr(ref.rfind('/') + 1)]);
  }
  const YAML::Node schema = r["content"]["application/json"]["schema"];
  if (!schema) return {op + " " + std::to_string(status) + ": JSON, documented as not JSON"};
  std::vector<std::string> out;
  Check(*body, schema, op + " " + std::to_string(status) + " body", out);
  return out;
}

std::vector<std::string> CheckSchema(const std::string& schema, const json::value& value) {
  std::vector<std::string> out;
  Check(value, Spec()["components"]["schemas"][schema], schema, out);
  return out;
}

}  // namespace gpufleet::e2e
