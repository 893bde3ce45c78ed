#include "model/profile.h"

#include <algorithm>
#include <boost/json.hpp>
#include <charconv>
#include <cstdio>

namespace json = boost::json;

namespace gpufleet {

namespace {

constexpr std::string_view kStringFields[] = {
    "driver_version", "cuda_driver",       "kernel",       "os",
    "image_id",       "container_toolkit", "gsp_firmware", "compute_mode"};

std::string* StringField(Profile& p, std::string_view key) {
  if (key == "driver_version") return &p.driver_version;
  if (key == "cuda_driver") return &p.cuda_driver;
  if (key == "kernel") return &p.kernel;
  if (key == "os") return &p.os;
  if (key == "image_id") return &p.image_id;
  if (key == "container_toolkit") return &p.container_toolkit;
  if (key == "gsp_firmware") return &p.gsp_firmware;
  if (key == "compute_mode") return &p.compute_mode;
  return nullptr;
}

constexpr std::string_view kComputeModes[] = {"default", "exclusive_process", "prohibited"};

bool IsComputeMode(std::string_view v) {
  return std::find(std::begin(kComputeModes), std::end(kComputeModes), v) !=
         std::end(kComputeModes);
}

bool IsOctalMode(std::string_view v) {
  if (v.size() < 3 || v.size() > 4) return false;
  return std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '7'; });
}

const std::string& StringField(const Profile& p, std::string_view key) {
  return *StringField(const_cast<Profile&>(p), key);
}

Error Bad(const std::string& path, const std::string& what) {
  return MakeError(ErrorCode::kInvalidArgument, path + ": " + what);
}

Result<std::string> NonEmpty(const json::value& v, const std::string& path) {
  if (!v.is_string() || v.as_string().empty()) return Bad(path, "must be a non-empty string");
  return std::string(v.as_string());
}

// A GPU instance profile's name as nvidia-smi and mig-parted write it: "1g.10gb", "3g.71gb",
// "1g.10gb+me".
bool IsMigProfileName(std::string_view name) {
  auto digits = [&](size_t& i) {
    size_t start = i;
    while (i < name.size() && name[i] >= '0' && name[i] <= '9') ++i;
    return i > start && i - start <= 3;
  };
  size_t i = 0;
  if (!digits(i) || name.substr(i, 2) != "g.") return false;
  i += 2;
  if (!digits(i) || name.substr(i, 2) != "gb") return false;
  i += 2;
  if (i == name.size()) return true;
  if (name[i] != '+' || i + 1 == name.size()) return false;
  return std::all_of(name.begin() + static_cast<long>(i) + 1, name.end(),
                     [](char c) { return c >= 'a' && c <= 'z'; });
}

Result<Profile> ParseProfileObject(const json::object& o, const std::string& prefix,
                                   bool overrides_allowed);

}  // namespace

// "0x8001" -> "0x8001", "0X8001" / "0x08001" -> "0x8001": partition keys compare by value.
std::string NormalizePkey(std::string_view key) {
  unsigned value = 0;
  std::string_view digits = key;
  if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) {
    digits.remove_prefix(2);
  }
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value, 16);
  if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty() ||
      value > 0xffff) {
    return "";
  }
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%04x", value);
  return buf;
}

// ProfileOverride's defaulted == used once before Profile's is defaulted: clang 14 crashes
// resolving it from inside Profile's (each type holds the other), as the fuzz build found.
[[maybe_unused]] static bool SameOverride(const ProfileOverride& a, const ProfileOverride& b) {
  return a == b;
}
bool Profile::operator==(const Profile&) const = default;
bool Profile::empty() const { return *this == Profile{}; }

std::string MigLayoutText(const std::map<std::string, int>& layout) {
  std::string out;
  for (const auto& [name, count] : layout) {
    out += (out.empty() ? "" : ", ") + name + " x" + std::to_string(count);
  }
  return out.empty() ? "none" : out;
}

Result<Labels> ParseLabelArgs(const std::vector<std::string>& args) {
  auto valid = [](std::string_view text, bool key) {
    if (text.size() > 63 || (key && text.empty())) return false;
    return std::all_of(text.begin(), text.end(), [&](char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             c == '.' || c == '_' || c == '-' || (key && c == '/');
    });
  };
  Labels out;
  for (const auto& arg : args) {
    const size_t eq = arg.find('=');
    const std::string key = arg.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    if (eq == std::string::npos || !valid(key, true) || !valid(value, false)) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "label '" + arg +
                           "' must be KEY=VALUE (letters, digits, . _ - and / in the key; up to "
                           "63 each)");
    }
    if (!out.emplace(key, value).second) {
      return MakeError(ErrorCode::kInvalidArgument, "label '" + key + "' is given twice");
    }
  }
  return out;
}

bool LabelsMatch(const Labels& selector, const Labels& labels) {
  for (const auto& [key, pattern] : selector) {
    auto it = labels.find(key);
    if (it == labels.end() || !GlobMatch(pattern, it->second)) return false;
  }
  return true;
}

Profile ForNode(const Profile& profile, const Labels& labels) {
  Profile out = profile;
  out.overrides.clear();
  for (const auto& o : profile.overrides) {
    if (LabelsMatch(o.labels, labels)) out = Merge(out, o.profile);
  }
  return out;
}

namespace {

json::object ProfileObject(const Profile& p) {
  json::object o;
  for (auto key : kStringFields) {
    if (const auto& v = StringField(p, key); !v.empty()) o[key] = v;
  }
  if (!p.firmware.empty()) {
    json::object fw;
    for (const auto& [model, want] : p.firmware) {
      json::object w;
      if (!want.vbios.empty()) w["vbios"] = want.vbios;
      if (!want.inforom.empty()) w["inforom"] = want.inforom;
      fw[model] = std::move(w);
    }
    o["firmware"] = std::move(fw);
  }
  if (p.mig_mode) o["mig_mode"] = *p.mig_mode;
  if (!p.mig_layout.empty()) {
    json::object layout;
    for (const auto& [name, count] : p.mig_layout) layout[name] = count;
    o["mig_layout"] = std::move(layout);
  }
  if (p.persistence_mode) o["persistence_mode"] = *p.persistence_mode;
  if (p.ecc_mode) o["ecc_mode"] = *p.ecc_mode;
  if (p.power_limit_w > 0) o["power_limit_w"] = p.power_limit_w;
  if (p.app_clock_graphics_mhz > 0) {
    o["application_clocks"] = json::object{{"graphics_mhz", p.app_clock_graphics_mhz},
                                           {"memory_mhz", p.app_clock_mem_mhz}};
  }
  if (!p.ib_pkeys.empty()) {
    json::object pk;
    for (const auto& [port, keys] : p.ib_pkeys) {
      json::array a;
      for (const auto& k : keys) a.emplace_back(k);
      pk[port] = std::move(a);
    }
    o["ib_pkeys"] = std::move(pk);
  }
  if (!p.device_mode.empty() || !p.device_group.empty()) {
    json::object d;
    if (!p.device_mode.empty()) d["mode"] = p.device_mode;
    if (!p.device_group.empty()) d["group"] = p.device_group;
    o["device_files"] = std::move(d);
  }
  json::object packages;
  auto list = [&](const char* key, const std::vector<std::string>& v) {
    if (!v.empty()) packages[key] = json::value_from(v);
  };
  list("required", p.packages_required);
  list("forbidden", p.packages_forbidden);
  list("allowed", p.packages_allowed);
  if (!packages.empty()) o["packages"] = std::move(packages);
  if (!p.remediation.empty()) {
    json::object r;
    for (const auto& [fact, how] : p.remediation) r[fact] = how;
    o["remediation"] = std::move(r);
  }
  if (!p.overrides.empty()) {
    json::array list;
    for (const auto& over : p.overrides) {
      json::object item{{"labels", json::object()}};
      for (const auto& [key, value] : over.labels) item["labels"].as_object()[key] = value;
      for (auto& [key, value] : ProfileObject(over.profile)) item[key] = std::move(value);
      list.emplace_back(std::move(item));
    }
    o["overrides"] = std::move(list);
  }
  return o;
}

}  // namespace

std::string ProfileJson(const Profile& p) { return json::serialize(ProfileObject(p)); }

Result<Profile> ParseProfile(std::string_view text) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec || !v.is_object()) return Bad("profile", "must be a mapping");
  return ParseProfileObject(v.as_object(), "", true);
}

namespace {

// The profile's the MIG layout: {"1g.10gb": 7}.
Status ReadMigLayout(const json::value& value, const std::string& k, Profile& p) {
  if (!value.is_object() || value.as_object().empty()) {
    return Bad(k, "must be a mapping of GPU instance profile to count ({\"1g.10gb\": 7})");
  }
  for (const auto& [name, count] : value.as_object()) {
    const std::string path = k + "." + std::string(name);
    if (!IsMigProfileName(name)) {
      return Bad(path, "not a GPU instance profile such as 1g.10gb or 3g.40gb");
    }
    if (!count.is_int64() || count.as_int64() < 1 || count.as_int64() > 8) {
      return Bad(path, "must be a count of instances, 1 to 8");
    }
    p.mig_layout[std::string(name)] = static_cast<int>(count.as_int64());
  }
  return {};
}

// The profile's application clocks: {graphics_mhz, memory_mhz}.
Status ReadAppClocks(const json::value& value, const std::string& k, Profile& p) {
  if (!value.is_object()) return Bad(k, "must be a mapping with graphics_mhz and memory_mhz");
  for (const auto& [field, fv] : value.as_object()) {
    const std::string fpath = k + "." + std::string(field);
    int* out = field == "graphics_mhz" ? &p.app_clock_graphics_mhz
               : field == "memory_mhz" ? &p.app_clock_mem_mhz
                                       : nullptr;
    if (!out) return Bad(fpath, "unknown field (known: graphics_mhz, memory_mhz)");
    if (!fv.is_int64() || fv.as_int64() < 1 || fv.as_int64() > 100'000) {
      return Bad(fpath, "must be a whole number of MHz");
    }
    *out = static_cast<int>(fv.as_int64());
  }
  if (p.app_clock_graphics_mhz == 0 || p.app_clock_mem_mhz == 0) {
    return Bad(k, "needs both graphics_mhz and memory_mhz");
  }
  return {};
}

// The profile's InfiniBand partition keys by ADAPTER/PORT pattern.
Status ReadPkeys(const json::value& value, const std::string& k, Profile& p) {
  if (!value.is_object() || value.as_object().empty()) {
    return Bad(k, "must be a mapping of ADAPTER/PORT (or a pattern) to partition keys");
  }
  for (const auto& [port, keys] : value.as_object()) {
    const std::string path = k + "." + std::string(port);
    if (!keys.is_array() || keys.as_array().empty()) {
      return Bad(path, "must be a list of partition keys (\"0xffff\")");
    }
    auto& out = p.ib_pkeys[std::string(port)];
    for (size_t i = 0; i < keys.as_array().size(); ++i) {
      const auto& key = keys.as_array()[i];
      std::string normal = key.is_string() ? NormalizePkey(key.as_string()) : "";
      if (normal.empty()) {
        return Bad(path + "[" + std::to_string(i) + "]",
                   "must be a partition key, 0x0000 to 0xffff");
      }
      out.push_back(std::string(key.as_string()));
    }
  }
  return {};
}

// The profile's the GPU device files' mode and group.
Status ReadDeviceAccess(const json::value& value, const std::string& k, Profile& p) {
  if (!value.is_object() || value.as_object().empty()) {
    return Bad(k, "must be a mapping with mode, group or both");
  }
  for (const auto& [field, fv] : value.as_object()) {
    const std::string fpath = k + "." + std::string(field);
    if (field == "mode") {
      GF_TRY_ASSIGN(p.device_mode, NonEmpty(fv, fpath));
      if (!IsOctalMode(p.device_mode)) return Bad(fpath, "must be octal bits, \"0660\"");
      if (p.device_mode.size() == 3) p.device_mode = "0" + p.device_mode;
    } else if (field == "group") {
      GF_TRY_ASSIGN(p.device_group, NonEmpty(fv, fpath));
    } else {
      return Bad(fpath, "unknown field (known: mode, group)");
    }
  }
  return {};
}

// The profile's firmware by GPU model: {vbios, inforom}.
Status ReadFirmware(const json::value& value, const std::string& k, Profile& p) {
  if (!value.is_object()) return Bad(k, "must be a mapping of GPU model to {vbios, inforom}");
  for (const auto& [model, want] : value.as_object()) {
    const std::string path = k + "." + std::string(model);
    if (!want.is_object() || want.as_object().empty()) {
      return Bad(path, "must be a mapping with vbios, inforom or both");
    }
    FirmwareWant& w = p.firmware[std::string(model)];
    for (const auto& [field, fv] : want.as_object()) {
      const std::string fpath = path + "." + std::string(field);
      if (field == "vbios") {
        GF_TRY_ASSIGN(w.vbios, NonEmpty(fv, fpath));
      } else if (field == "inforom") {
        GF_TRY_ASSIGN(w.inforom, NonEmpty(fv, fpath));
      } else {
        return Bad(fpath, "unknown field (known: vbios, inforom)");
      }
    }
  }
  return {};
}

// The profile's packages: required, forbidden, allowed.
Status ReadPackages(const json::value& value, const std::string& k, Profile& p) {
  if (!value.is_object()) {
    return Bad(k, "must be a mapping with required, forbidden or allowed");
  }
  for (const auto& [field, list] : value.as_object()) {
    const std::string path = k + "." + std::string(field);
    std::vector<std::string>* out = field == "required"    ? &p.packages_required
                                    : field == "forbidden" ? &p.packages_forbidden
                                    : field == "allowed"   ? &p.packages_allowed
                                                           : nullptr;
    if (!out) return Bad(path, "unknown field (known: required, forbidden, allowed)");
    if (!list.is_array()) return Bad(path, "must be a list of package names");
    for (size_t i = 0; i < list.as_array().size(); ++i) {
      std::string entry;
      GF_TRY_ASSIGN(entry, NonEmpty(list.as_array()[i], path + "[" + std::to_string(i) + "]"));
      if (field == "allowed" && entry.find('=') != std::string::npos) {
        return Bad(path + "[" + std::to_string(i) + "]",
                   "the allowlist names packages, not versions");
      }
      out->push_back(std::move(entry));
    }
  }
  return {};
}

// The profile's how each fact is remediated: auto, rollout or manual.
Status ReadRemediation(const json::value& value, const std::string& k, Profile& p) {
  if (!value.is_object()) return Bad(k, "must be a mapping of fact to auto, rollout or manual");
  for (const auto& [fact, how] : value.as_object()) {
    const std::string path = k + "." + std::string(fact);
    const DriftFact* f = FindDriftFact(fact);
    if (!f) return Bad(path, "not a fact a profile checks");
    if (!how.is_string() || (how.as_string() != "rollout" && how.as_string() != "manual" &&
                             how.as_string() != "auto")) {
      return Bad(path, "must be auto, rollout or manual");
    }
    if (how.as_string() == "rollout" && f->remediation != "rollout") {
      return Bad(path, std::string("a rollout cannot change it: ") +
                           (f->settable ? "auto or manual" : "manual only"));
    }
    if (how.as_string() == "auto" && !f->settable) {
      return Bad(path, std::string("the agent cannot set it: ") +
                           (f->remediation == "rollout" ? "rollout or manual" : "manual only"));
    }
    p.remediation[std::string(fact)] = std::string(how.as_string());
  }
  return {};
}

Result<Profile> ParseProfileObject(const json::object& object, const std::string& prefix,
                                   bool overrides_allowed) {
  auto Bad = [&](const std::string& path, const std::string& what) {
    return gpufleet::Bad(prefix + path, what);
  };
  auto NonEmpty = [&](const json::value& v, const std::string& path) {
    return gpufleet::NonEmpty(v, prefix + path);
  };
  Profile p;
  for (const auto& [key, value] : object) {
    const std::string k(key);
    if (std::string* s = StringField(p, k)) {
      GF_TRY_ASSIGN(*s, NonEmpty(value, k));
      if (k == "compute_mode" && !IsComputeMode(*s)) {
        return Bad(k, "must be default, exclusive_process or prohibited");
      }
    } else if (k == "mig_mode" || k == "persistence_mode" || k == "ecc_mode") {
      if (!value.is_bool()) return Bad(k, "must be true or false");
      (k == "mig_mode"   ? p.mig_mode
       : k == "ecc_mode" ? p.ecc_mode
                         : p.persistence_mode) = value.as_bool();
    } else if (k == "mig_layout") {
      GF_TRY(ReadMigLayout(value, prefix + k, p));
    } else if (k == "overrides" && overrides_allowed) {
      if (!value.is_array()) return Bad(k, "must be a list of {labels, ...profile fields}");
      for (size_t i = 0; i < value.as_array().size(); ++i) {
        const std::string path = k + "[" + std::to_string(i) + "]";
        const json::value& item = value.as_array()[i];
        if (!item.is_object()) return Bad(path, "must be a mapping with labels and fields");
        const json::value* labels = item.as_object().if_contains("labels");
        if (!labels || !labels->is_object() || labels->as_object().empty()) {
          return Bad(path + ".labels", "must be a mapping of node label to value (or pattern)");
        }
        ProfileOverride over;
        json::object fields;
        for (const auto& [field, fv] : item.as_object()) {
          if (field != "labels") fields[field] = fv;
        }
        for (const auto& [label, lv] : labels->as_object()) {
          std::string v;
          GF_TRY_ASSIGN(v, NonEmpty(lv, path + ".labels." + std::string(label)));
          over.labels[std::string(label)] = std::move(v);
        }
        if (fields.empty()) return Bad(path, "sets no field");
        GF_TRY_ASSIGN(over.profile, ParseProfileObject(fields, prefix + path + ".", false));
        p.overrides.push_back(std::move(over));
      }
    } else if (k == "power_limit_w") {
      if (!value.is_int64() || value.as_int64() < 1 || value.as_int64() > 10'000) {
        return Bad(k, "must be a whole number of watts, 1 to 10000");
      }
      p.power_limit_w = static_cast<int>(value.as_int64());
    } else if (k == "application_clocks") {
      GF_TRY(ReadAppClocks(value, prefix + k, p));
    } else if (k == "ib_pkeys") {
      GF_TRY(ReadPkeys(value, prefix + k, p));
    } else if (k == "device_files") {
      GF_TRY(ReadDeviceAccess(value, prefix + k, p));
    } else if (k == "firmware") {
      GF_TRY(ReadFirmware(value, prefix + k, p));
    } else if (k == "packages") {
      GF_TRY(ReadPackages(value, prefix + k, p));
    } else if (k == "remediation") {
      GF_TRY(ReadRemediation(value, prefix + k, p));
    } else {
      return Bad(k,
                 "unknown field (known: driver_version, cuda_driver, kernel, os, image_id, "
                 "container_toolkit, firmware, gsp_firmware, mig_mode, mig_layout, ecc_mode, "
                 "persistence_mode, compute_mode, power_limit_w, application_clocks, ib_pkeys, "
                 "device_files, packages, remediation" +
                     std::string(overrides_allowed ? ", overrides)" : "; an override has none)"));
    }
  }
  return p;
}

}  // namespace

Profile Merge(const Profile& base, const Profile& over) {
  Profile out = base;
  for (auto key : kStringFields) {
    if (const auto& v = StringField(over, key); !v.empty()) *StringField(out, key) = v;
  }
  for (const auto& [model, want] : over.firmware) {
    FirmwareWant& w = out.firmware[model];
    if (!want.vbios.empty()) w.vbios = want.vbios;
    if (!want.inforom.empty()) w.inforom = want.inforom;
  }
  if (over.mig_mode) out.mig_mode = over.mig_mode;
  if (!over.mig_layout.empty()) out.mig_layout = over.mig_layout;
  if (over.persistence_mode) out.persistence_mode = over.persistence_mode;
  if (over.ecc_mode) out.ecc_mode = over.ecc_mode;
  if (over.power_limit_w > 0) out.power_limit_w = over.power_limit_w;
  if (over.app_clock_graphics_mhz > 0) {
    out.app_clock_graphics_mhz = over.app_clock_graphics_mhz;
    out.app_clock_mem_mhz = over.app_clock_mem_mhz;
  }
  if (!over.ib_pkeys.empty()) out.ib_pkeys = over.ib_pkeys;  // the pool's map replaces
  if (!over.device_mode.empty()) out.device_mode = over.device_mode;
  if (!over.device_group.empty()) out.device_group = over.device_group;
  // A pool's list replaces its cluster's.
  if (!over.packages_required.empty()) out.packages_required = over.packages_required;
  if (!over.packages_forbidden.empty()) out.packages_forbidden = over.packages_forbidden;
  if (!over.packages_allowed.empty()) out.packages_allowed = over.packages_allowed;
  for (const auto& [fact, how] : over.remediation) out.remediation[fact] = how;
  out.overrides.insert(out.overrides.end(), over.overrides.begin(), over.overrides.end());
  return out;
}

}  // namespace gpufleet
