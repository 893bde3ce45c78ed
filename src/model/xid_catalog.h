#pragma once
// The XID catalogue: what each NVIDIA XID error means, how bad it is for the GPU and what to do
// (data/xid-catalog.yaml, built into the binary; a file can replace it).

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace gpufleet {

enum class XidSeverity { kInfo, kWarning, kCritical };
std::string_view ToString(XidSeverity s);

// What the operator (or the remediation policy) should do about a GPU.
inline constexpr std::string_view kActions[] = {
    "none",         "restart_application", "reset_gpu",    "reboot_node",
    "check_nvlink", "check_hardware",      "rma_candidate"};

struct XidInfo {
  int xid = 0;
  std::string name;  // "GPU_HAS_FALLEN_OFF_THE_BUS"
  std::string description;
  XidSeverity severity = XidSeverity::kWarning;
  std::string action = "none";
  int64_t hold_ms = 0;  // how long an occurrence counts against the GPU's health
};

class XidCatalog {
 public:
  // Errors name the source, the line and the field.
  static Result<std::shared_ptr<const XidCatalog>> Parse(std::string_view yaml,
                                                         std::string_view source);
  static Result<std::shared_ptr<const XidCatalog>> Load(const std::string& path);
  static std::shared_ptr<const XidCatalog> Builtin();  // data/xid-catalog.yaml

  // An XID the catalogue does not list is a warning with action none, held 10 minutes.
  XidInfo Find(int xid) const;
  const std::vector<XidInfo>& all() const { return all_; }

 private:
  std::vector<XidInfo> all_;
  std::map<int, size_t> by_xid_;
};

}  // namespace gpufleet
