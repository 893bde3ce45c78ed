// Drift: the facts a profile governs, and the differences between a node and its profile.

#include <algorithm>
#include <boost/json.hpp>
#include <charconv>
#include <cstdio>

#include "model/profile.h"

namespace json = boost::json;

namespace gpufleet {

// Driver and firmware differences are fixed by a rollout (src/lifecycle) to the profile's
// version; the rest by hand. A driver that differs is high: the workloads were validated on
// the profile's.
const std::vector<DriftFact> kDriftFacts = {
    {"driver_version", "high", "rollout", false},
    {"cuda_driver", "high", "rollout", false},
    {"kernel", "medium", "manual", false},
    {"os", "medium", "manual", false},
    {"image_id", "medium", "manual", false},
    {"container_toolkit", "medium", "manual", false},
    {"vbios", "medium", "rollout", true},
    {"inforom", "low", "manual", true},
    {"gsp_firmware", "medium", "rollout", true},
    // GPU settings the agent can set through NVML ("auto"). ECC and MIG modes change only with a
    // GPU reset: manual unless the profile says auto (then inside a maintenance window).
    {"mig_mode", "high", "manual", true, true},
    // The GPU instances of a MIG-enabled GPU: re-partitioning ends the work on them (manual).
    {"mig_layout", "medium", "manual", true},
    {"ecc_mode", "high", "manual", true, true},
    {"persistence_mode", "low", "auto", true, true},
    {"compute_mode", "medium", "auto", true, true},
    {"power_limit_w", "medium", "auto", true, true},
    {"application_clocks", "low", "auto", true, true},
    // Per port ("ib_pkeys:mlx5_0/1"): a wrong partition key puts a node in another tenant's
    // network, or out of its own.
    {"ib_pkeys", "high", "manual", false},
    // Device files others may open: GPU access control.
    {"device_files", "high", "manual", false},
    // A forbidden package is critical (a miner, a remote-access tool: a security finding); one
    // missing or outside the allowlist medium (EvaluateDrift).
    {"packages", "medium", "manual", false},
};

const DriftFact* FindDriftFact(std::string_view name) {
  for (const auto& f : kDriftFacts) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

bool GlobMatch(std::string_view pattern, std::string_view text) {
  // Iterative, with one backtrack point: linear in practice, no recursion.
  size_t p = 0, t = 0, star = std::string_view::npos, mark = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p;
      ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

namespace {

// "name=version" -> {name, version}; "name" -> {name, ""}.
std::pair<std::string, std::string> SplitPackage(const std::string& entry) {
  const size_t eq = entry.find('=');
  if (eq == std::string::npos) return {entry, ""};
  return {entry.substr(0, eq), entry.substr(eq + 1)};
}

// Does an installed version ("1.17.3-1", "1:2.36-9") match the one asked for ("1.17.3"): the
// same, or the same upstream version with a Debian revision or an epoch.
bool VersionMatches(const std::string& want, std::string have) {
  if (want.empty() || have == want) return true;
  if (size_t colon = have.find(':'); colon != std::string::npos) have = have.substr(colon + 1);
  if (have == want) return true;
  return have.size() > want.size() && have.compare(0, want.size(), want) == 0 &&
         have[want.size()] == '-';
}

}  // namespace

namespace {

// What a profile asks of a settable fact, written as GpuSettingText writes it ("" nothing).
std::string SettingWant(const Profile& p, std::string_view fact) {
  auto mode = [](const std::optional<bool>& on) {
    return !on ? std::string() : *on ? std::string("enabled") : std::string("disabled");
  };
  if (fact == "persistence_mode") return mode(p.persistence_mode);
  if (fact == "ecc_mode") return mode(p.ecc_mode);
  if (fact == "mig_mode") return mode(p.mig_mode);
  if (fact == "compute_mode") return p.compute_mode;
  if (fact == "power_limit_w") return p.power_limit_w > 0 ? std::to_string(p.power_limit_w) : "";
  if (fact == "application_clocks" && p.app_clock_graphics_mhz > 0) {
    return std::to_string(p.app_clock_graphics_mhz) + "/" + std::to_string(p.app_clock_mem_mhz);
  }
  return "";
}

std::string DeviceWant(const Profile& p) {
  std::string out;
  if (!p.device_mode.empty()) out = "mode " + p.device_mode;
  if (!p.device_group.empty())
    out += (out.empty() ? "" : ", ") + std::string("group ") + p.device_group;
  return out;
}

std::string JoinKeys(std::vector<std::string> keys) {
  for (auto& k : keys) k = NormalizePkey(k);
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  std::string out;
  for (const auto& k : keys) out += (out.empty() ? "" : " ") + k;
  return out.empty() ? "none" : out;
}

// Each InfiniBand port a pattern of the profile matches (the most specific: the longest pattern
// that matches) against its keys; a node with no readable port is one finding, "unknown".
template <class Add>
void EvaluatePkeys(const Profile& p, const Node& node, Add add) {
  if (p.ib_pkeys.empty()) return;
  bool any = false;
  for (const auto& nic : node.facts.nics) {
    for (const auto& [port, keys] : nic.pkeys) {
      const std::string name = nic.name + "/" + std::to_string(port);
      const std::vector<std::string>* want = nullptr;
      size_t best = 0;
      for (const auto& [pattern, list] : p.ib_pkeys) {
        if (GlobMatch(pattern, name) && (!want || pattern.size() > best)) {
          want = &list;
          best = pattern.size();
        }
      }
      if (!want) continue;
      any = true;
      std::string w = JoinKeys(*want), h = JoinKeys(keys);
      if (w != h) add(name, w, h);
    }
  }
  if (!any) add("", "partition keys on the InfiniBand ports", "");
}

}  // namespace

std::vector<DriftFinding> EvaluateDrift(const Profile& profile, const Node& node) {
  std::vector<DriftFinding> out;
  auto add = [&](const DriftFact& f, int gpu, const std::string& expected, std::string actual) {
    DriftFinding d;
    d.node = node.name;
    d.pool = node.pool;
    d.cluster = node.cluster;
    d.gpu = gpu;
    d.fact = std::string(f.name);
    d.expected = expected;
    d.severity = std::string(f.severity);
    auto how = profile.remediation.find(d.fact);
    d.remediation = how != profile.remediation.end() ? how->second : std::string(f.remediation);
    if (actual.empty()) {
      actual = "unknown";
      d.remediation = "manual";  // nothing to roll out to until the node says what it runs
    }
    d.actual = std::move(actual);
    out.push_back(std::move(d));
  };
  auto exact = [&](const DriftFact& f, const std::string& want, const std::string& have) {
    if (!want.empty() && have != want) add(f, -1, want, have);
  };
  for (const auto& f : kDriftFacts) {
    if (f.name == "packages") {
      const bool any = !profile.packages_required.empty() || !profile.packages_forbidden.empty() ||
                       !profile.packages_allowed.empty();
      if (!any) continue;
      if (!node.facts.packages) {  // cannot tell: one finding, never a match
        add(f, -1, "packages as the profile says", "");
        continue;
      }
      const auto& have = *node.facts.packages;
      auto package_finding = [&](const std::string& name, const std::string& expected,
                                 const std::string& actual, const char* severity) {
        add(f, -1, expected, actual);
        out.back().fact = "package:" + name;
        out.back().severity = severity;
      };
      for (const auto& entry : profile.packages_required) {
        auto [name, version] = SplitPackage(entry);
        auto it = have.find(name);
        if (it == have.end()) {
          package_finding(name, version.empty() ? "installed" : version, "not installed", "medium");
        } else if (!VersionMatches(version, it->second)) {
          package_finding(name, version, it->second, "medium");
        }
      }
      for (const auto& entry : profile.packages_forbidden) {
        auto [name, version] = SplitPackage(entry);
        auto it = have.find(name);
        if (it != have.end() && (version.empty() || VersionMatches(version, it->second))) {
          package_finding(name, version.empty() ? "not installed" : "not " + version, it->second,
                          "critical");
        }
      }
      if (!profile.packages_allowed.empty()) {
        for (const auto& [name, version] : have) {
          bool allowed = false;
          for (const auto& pattern : profile.packages_allowed) {
            if (GlobMatch(pattern, name)) {
              allowed = true;
              break;
            }
          }
          for (const auto& entry : profile.packages_required) {
            allowed |= SplitPackage(entry).first == name;
          }
          for (const auto& entry : profile.packages_forbidden) {
            allowed |= SplitPackage(entry).first == name;  // found above: one finding a package
          }
          if (!allowed)
            package_finding(name, "not installed (not in the allowlist)", version, "medium");
        }
      }
      continue;
    }
    if (f.name == "driver_version") {
      exact(f, profile.driver_version, node.facts.driver_version);
    } else if (f.name == "cuda_driver") {
      exact(f, profile.cuda_driver, node.facts.cuda_driver_version);
    } else if (f.name == "kernel") {
      const std::string& have = node.facts.kernel;
      if (!profile.kernel.empty() && (have.empty() || !GlobMatch(profile.kernel, have))) {
        add(f, -1, profile.kernel, have);
      }
    } else if (f.name == "os") {
      exact(f, profile.os, node.facts.os);
    } else if (f.name == "image_id") {
      const std::string& have = node.facts.image_id;
      if (!profile.image_id.empty() && (have.empty() || !GlobMatch(profile.image_id, have))) {
        add(f, -1, profile.image_id, have);
      }
    } else if (f.name == "container_toolkit") {
      exact(f, profile.container_toolkit, node.facts.container_toolkit);
    } else if (f.name == "ib_pkeys") {
      EvaluatePkeys(profile, node,
                    [&](const std::string& port, const std::string& want, const std::string& have) {
                      add(f, -1, want, have);
                      if (!port.empty()) out.back().fact = "ib_pkeys:" + port;
                    });
    } else if (f.name == "device_files") {
      if (profile.device_mode.empty() && profile.device_group.empty()) continue;
      std::string want = DeviceWant(profile);
      if (!node.facts.device_files) {
        add(f, -1, want, "");
        continue;
      }
      std::string wrong;
      for (const auto& d : *node.facts.device_files) {
        if ((!profile.device_mode.empty() && d.mode != profile.device_mode) ||
            (!profile.device_group.empty() && d.group != profile.device_group)) {
          wrong += (wrong.empty() ? "" : ", ") + d.path + " " + d.mode + " " + d.group;
        }
      }
      if (node.facts.device_files->empty()) wrong = "no /dev/nvidia* files";
      if (!wrong.empty()) add(f, -1, want, wrong);
    } else if (f.settable && f.name != "mig_mode") {
      std::string want = SettingWant(profile, f.name);
      if (want.empty()) continue;
      for (const auto& g : node.gpus) {
        std::string have = GpuSettingText(g, f.name);
        if (have != want) add(f, g.index, want, have);
      }
    } else {
      for (const auto& g : node.gpus) {
        auto fw = profile.firmware.find(g.model);
        if (f.name == "vbios" && fw != profile.firmware.end() && !fw->second.vbios.empty() &&
            g.vbios_version != fw->second.vbios) {
          add(f, g.index, fw->second.vbios, g.vbios_version);
        } else if (f.name == "inforom" && fw != profile.firmware.end() &&
                   !fw->second.inforom.empty() && g.inforom_version != fw->second.inforom) {
          add(f, g.index, fw->second.inforom, g.inforom_version);
        } else if (f.name == "gsp_firmware" && !profile.gsp_firmware.empty() &&
                   g.gsp_firmware_version != profile.gsp_firmware) {
          add(f, g.index, profile.gsp_firmware, g.gsp_firmware_version);
        } else if (f.name == "mig_mode" && profile.mig_mode) {
          std::string want = *profile.mig_mode ? "enabled" : "disabled";
          std::string have = g.mig_mode < 0 ? "" : g.mig_mode == 1 ? "enabled" : "disabled";
          if (have != want) add(f, g.index, want, g.mig_mode < 0 ? "not supported" : have);
        } else if (f.name == "mig_layout" && !profile.mig_layout.empty()) {
          // A GPU with MIG off has no instances; when the profile asks for MIG on, the
          // mig_mode finding already says so.
          const std::string want = MigLayoutText(profile.mig_layout);
          if (g.mig_mode != 1) {
            if (!profile.mig_mode) {
              add(f, g.index, want, g.mig_mode < 0 ? "MIG not supported" : "MIG disabled");
            }
          } else if (!g.mig_layout) {
            add(f, g.index, want, "");
          } else if (*g.mig_layout != profile.mig_layout) {
            add(f, g.index, want, MigLayoutText(*g.mig_layout));
          }
        }
      }
    }
  }
  return out;
}

Result<GpuSettingValue> ParseGpuSetting(std::string_view setting, std::string_view value) {
  auto bad = [&](const std::string& what) {
    return MakeError(ErrorCode::kInvalidArgument,
                     std::string(setting) + " '" + std::string(value) + "': " + what);
  };
  auto number = [](std::string_view text, int& out) {
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
    return ec == std::errc() && end == text.data() + text.size() && out > 0;
  };
  GpuSettingValue v;
  if (setting == "persistence_mode" || setting == "ecc_mode" || setting == "mig_mode") {
    if (value != "enabled" && value != "disabled") return bad("must be enabled or disabled");
    v.number = value == "enabled" ? 1 : 0;
  } else if (setting == "compute_mode") {
    if (value == "default") {
      v.number = 0;
    } else if (value == "prohibited") {
      v.number = 2;
    } else if (value == "exclusive_process") {
      v.number = 3;
    } else {
      return bad("must be default, exclusive_process or prohibited");
    }
  } else if (setting == "power_limit_w") {
    if (!number(value, v.number) || v.number > 10'000) return bad("must be watts, 1 to 10000");
  } else if (setting == "application_clocks") {
    size_t slash = value.find('/');
    if (slash == std::string_view::npos || !number(value.substr(0, slash), v.number) ||
        !number(value.substr(slash + 1), v.second)) {
      return bad("must be GRAPHICS/MEMORY in MHz, \"1980/2619\"");
    }
  } else {
    return MakeError(ErrorCode::kInvalidArgument,
                     "unknown GPU setting '" + std::string(setting) +
                         "' (persistence_mode, ecc_mode, mig_mode, compute_mode, power_limit_w, "
                         "application_clocks)");
  }
  return v;
}

std::string GpuSettingText(const Gpu& g, std::string_view setting) {
  const GpuSettings& s = g.settings;
  auto mode = [](int v) { return v < 0 ? "" : v == 1 ? "enabled" : "disabled"; };
  if (setting == "persistence_mode") return mode(s.persistence_mode);
  if (setting == "ecc_mode") return mode(s.ecc_mode);
  if (setting == "mig_mode") return mode(g.mig_mode);
  if (setting == "compute_mode") return s.compute_mode;
  if (setting == "power_limit_w") return s.power_limit_w < 0 ? "" : std::to_string(s.power_limit_w);
  if (setting == "application_clocks") {
    if (s.app_clock_graphics_mhz < 0 || s.app_clock_mem_mhz < 0) return "";
    return std::to_string(s.app_clock_graphics_mhz) + "/" + std::to_string(s.app_clock_mem_mhz);
  }
  return "";
}

std::string DriftFindingJson(const DriftFinding& f) {
  return json::serialize(json::object{{"id", f.id},
                                      {"node", f.node},
                                      {"pool", f.pool},
                                      {"cluster", f.cluster},
                                      {"gpu", f.gpu},
                                      {"fact", f.fact},
                                      {"expected", f.expected},
                                      {"actual", f.actual},
                                      {"severity", f.severity},
                                      {"remediation", f.remediation},
                                      {"state", f.state},
                                      {"note", f.note},
                                      {"first_seen_ms", f.first_seen_ms},
                                      {"last_seen_ms", f.last_seen_ms},
                                      {"resolved_ms", f.resolved_ms}});
}

Result<DriftFinding> ParseDriftFinding(std::string_view text) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec || !v.is_object()) {
    return MakeError(ErrorCode::kInternal, "a stored drift finding is not a JSON object");
  }
  const auto& o = v.as_object();
  auto str = [&](const char* k) {
    const auto* s = o.if_contains(k);
    return s && s->is_string() ? std::string(s->as_string()) : std::string();
  };
  auto num = [&](const char* k) -> int64_t {
    const auto* n = o.if_contains(k);
    return n && n->is_int64() ? n->as_int64() : 0;
  };
  DriftFinding f;
  f.id = num("id");
  f.node = str("node");
  f.pool = str("pool");
  f.cluster = str("cluster");
  f.gpu = static_cast<int>(o.contains("gpu") ? num("gpu") : -1);
  f.fact = str("fact");
  f.expected = str("expected");
  f.actual = str("actual");
  f.severity = str("severity");
  f.remediation = str("remediation");
  f.state = str("state");
  f.note = str("note");
  f.first_seen_ms = num("first_seen_ms");
  f.last_seen_ms = num("last_seen_ms");
  f.resolved_ms = num("resolved_ms");
  return f;
}

}  // namespace gpufleet
