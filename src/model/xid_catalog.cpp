#include "model/xid_catalog.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "common/clock.h"
#include "model/yaml_input.h"

namespace gpufleet {
namespace embedded {
std::string_view xid_catalog();
}

std::string_view ToString(XidSeverity s) {
  switch (s) {
    case XidSeverity::kInfo:
      return "info";
    case XidSeverity::kWarning:
      return "warning";
    case XidSeverity::kCritical:
      return "critical";
  }
  return "warning";
}

namespace {

constexpr int64_t kCriticalHoldMs = 3'600'000;
constexpr int64_t kWarningHoldMs = 600'000;

}  // namespace

Result<std::shared_ptr<const XidCatalog>> XidCatalog::Parse(std::string_view yaml,
                                                            std::string_view source) {
  auto catalog = std::make_shared<XidCatalog>();
  const YamlFields r(source);
  try {
    YAML::Node root = YAML::Load(std::string(yaml));
    YAML::Node xids = root["xids"];
    if (!xids || !xids.IsSequence()) {
      return r.Bad(root, "", "'xids' must be a list");
    }
    for (size_t i = 0; i < xids.size(); ++i) {
      const YAML::Node e = xids[i];
      std::string at = "xids[" + std::to_string(i) + "]";
      if (!e.IsMap() || !e["xid"] || !e["severity"]) {
        return r.Bad(e, at, "needs xid and severity");
      }
      XidInfo x;
      x.xid = e["xid"].as<int>();
      if (x.xid <= 0 || x.xid > 1000) return r.Bad(e["xid"], at + ".xid", "out of range 1..1000");
      x.name = e["name"].as<std::string>("XID_" + std::to_string(x.xid));
      x.description = e["description"].as<std::string>("");
      std::string severity = e["severity"].as<std::string>();
      if (severity == "info") {
        x.severity = XidSeverity::kInfo;
      } else if (severity == "warning") {
        x.severity = XidSeverity::kWarning;
      } else if (severity == "critical") {
        x.severity = XidSeverity::kCritical;
      } else {
        return r.Bad(e["severity"], at + ".severity",
                     "'" + severity + "' is not info, warning or critical");
      }
      x.action = e["action"].as<std::string>("none");
      if (std::find(std::begin(kActions), std::end(kActions), x.action) == std::end(kActions)) {
        return r.Bad(e["action"], at + ".action", "unknown action '" + x.action + "'");
      }
      x.hold_ms = x.severity == XidSeverity::kCritical  ? kCriticalHoldMs
                  : x.severity == XidSeverity::kWarning ? kWarningHoldMs
                                                        : 0;
      if (auto hold = e["hold"]) {
        x.hold_ms = ParseDurationMs(hold.as<std::string>());
        if (x.hold_ms < 0) return r.Bad(hold, at + ".hold", "not a duration");
      }
      if (catalog->by_xid_.count(x.xid)) {
        return r.Bad(e, at, "XID " + std::to_string(x.xid) + " is listed twice");
      }
      catalog->by_xid_[x.xid] = catalog->all_.size();
      catalog->all_.push_back(std::move(x));
    }
  } catch (const YAML::Exception& e) {
    return MakeError(ErrorCode::kInvalidArgument,
                     std::string(source) + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  return std::shared_ptr<const XidCatalog>(catalog);
}

Result<std::shared_ptr<const XidCatalog>> XidCatalog::Load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return MakeError(ErrorCode::kNotFound, "cannot read XID catalogue " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return Parse(ss.str(), path);
}

std::shared_ptr<const XidCatalog> XidCatalog::Builtin() {
  static const std::shared_ptr<const XidCatalog> kBuiltin = [] {
    auto parsed = Parse(embedded::xid_catalog(), "data/xid-catalog.yaml");
    return parsed.ok() ? parsed.value() : std::make_shared<const XidCatalog>();
  }();
  return kBuiltin;
}

XidInfo XidCatalog::Find(int xid) const {
  auto it = by_xid_.find(xid);
  if (it != by_xid_.end()) return all_[it->second];
  XidInfo unknown;
  unknown.xid = xid;
  unknown.name = "XID_" + std::to_string(xid);
  unknown.description = "not in the XID catalogue";
  unknown.severity = XidSeverity::kWarning;
  unknown.hold_ms = kWarningHoldMs;
  return unknown;
}

}  // namespace gpufleet
