// The fleet file of a FleetSpec (gpufleet export): every value in JSON's flow syntax, which is
// YAML too, so that strings stay strings and numbers numbers when ParseFleetSpec reads it back.

#include <boost/json.hpp>
#include <charconv>

#include "common/json_text.h"
#include "common/strings.h"
#include "config/fleet_spec.h"
#include "model/json.h"
#include "model/profile.h"

namespace json = boost::json;

namespace gpufleet {
namespace {

// The cluster's scheduler as the fleet file writes it: the defaults left out, poll as "10s".
json::object SchedulerYaml(const Scheduler& s) {
  const Scheduler defaults;
  json::object o{{"type", s.type}};
  if (s.bin_dir != defaults.bin_dir) o["bin_dir"] = s.bin_dir;
  if (!s.conf.empty()) o["conf"] = s.conf;
  if (!s.partitions.empty()) {
    json::array partitions;
    for (const auto& p : s.partitions) partitions.emplace_back(p);
    o["partitions"] = std::move(partitions);
  }
  if (s.poll_ms != defaults.poll_ms) {
    o["poll"] = s.poll_ms % 1000 ? std::to_string(s.poll_ms) + "ms"
                                 : std::to_string(s.poll_ms / 1000) + "s";
  }
  if (s.node_name != defaults.node_name) o["node_name"] = s.node_name;
  return o;
}

void Line(std::string& out, const std::string& indent, const char* key, const json::value& v) {
  out += indent;
  out += key;
  out += ": ";
  AppendYamlFlow(out, v);
  out += '\n';
}

// tier, requires, driver_branch, maintenance_windows and profile, where set.
void LifecycleLines(std::string& out, const std::string& indent, const Lifecycle& l) {
  if (!l.tier.empty()) Line(out, indent, "tier", json::value(l.tier));
  json::object needs;
  if (!l.cuda.empty()) needs["cuda"] = l.cuda;
  if (!l.gpu_operator.empty()) needs["gpu_operator"] = l.gpu_operator;
  if (!l.kubernetes.empty()) needs["kubernetes"] = l.kubernetes;
  if (!needs.empty()) Line(out, indent, "requires", needs);
  if (!l.driver_branch.empty()) Line(out, indent, "driver_branch", json::value(l.driver_branch));
  if (!l.windows.empty()) Line(out, indent, "maintenance_windows", ToJson(l.windows));
  if (!l.profile.empty()) Line(out, indent, "profile", json::parse(ProfileJson(l.profile)));
}

std::string Duration(int64_t ms) {
  return ms % 1000 == 0 ? std::to_string(ms / 1000) + "s" : std::to_string(ms) + "ms";
}

void PoolLines(std::string& out, const Pool& p, const PoolScaling* scaling) {
  const std::string in = "        ";
  Line(out, "      - ", "name", json::value(p.name));
  Line(out, in, "gpu_model", json::value(p.gpu_model));
  Line(out, in, "gpus_per_node", p.gpus_per_node);
  Line(out, in, "size", p.size);
  if (!p.team.empty()) Line(out, in, "team", json::value(p.team));
  if (!p.labels.empty()) Line(out, in, "labels", ToJson(p.labels));
  if (!p.exporters.empty()) Line(out, in, "exporters", ToJson(p.exporters));
  if (p.scrape_interval_ms != Pool{}.scrape_interval_ms) {
    Line(out, in, "scrape_interval", json::value(Duration(p.scrape_interval_ms)));
  }
  LifecycleLines(out, in, p.lifecycle);
  if (scaling) {
    // The stored document's own fields are not the file's (erase would reorder the rest).
    const json::value stored = json::parse(PoolScalingJson(*scaling));
    json::object policy;
    for (const auto& [key, value] : stored.as_object()) {
      if (key != "pool" && key != "updated_ms") policy[key] = value;
    }
    Line(out, in, "scaling", policy);
  }
}

}  // namespace

std::string WriteFleetSpec(const FleetSpec& spec) {
  std::string out = "apiVersion: gpufleet/v1\nkind: Fleet\n";
  if (spec.teams && !spec.teams->empty()) {
    out += "teams:\n";
    for (const auto& t : *spec.teams) {
      out += "  - ";
      AppendYamlFlow(out, json::parse(TeamJson(t, true)));
      out += '\n';
    }
  }
  out += spec.clusters.empty() ? "clusters: []\n" : "clusters:\n";
  for (const auto& c : spec.clusters) {
    const std::string in = "    ";
    Line(out, "  - ", "name", json::value(c.name));
    Line(out, in, "type", json::value(ToString(c.type)));
    Line(out, in, "site", json::value(c.site));
    if (!c.team.empty()) Line(out, in, "team", json::value(c.team));
    if (!c.labels.empty()) Line(out, in, "labels", ToJson(c.labels));
    if (c.remediation != Remediation{}) Line(out, in, "remediation", ToJson(c.remediation));
    if (!c.scheduler.type.empty()) Line(out, in, "scheduler", SchedulerYaml(c.scheduler));
    LifecycleLines(out, in, c.lifecycle);
    bool any = false;
    for (const auto& p : spec.pools) {
      if (p.cluster != c.name) continue;
      if (!any) out += in + "pools:\n";
      any = true;
      const PoolScaling* scaling = nullptr;
      for (const auto& s : spec.scaling) {
        if (s.pool == p.name) scaling = &s;
      }
      PoolLines(out, p, scaling);
    }
  }
  if (spec.channels && !spec.channels->empty()) {
    out += "channels:\n";
    for (const auto& c : *spec.channels) {
      boost::system::error_code ec;
      out += "  - ";
      AppendYamlFlow(out, json::parse(c.json, ec));
      out += '\n';
    }
  }
  return out;
}

}  // namespace gpufleet
