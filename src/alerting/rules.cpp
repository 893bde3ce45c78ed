#include "alerting/rules.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <boost/json.hpp>
#include <set>

#include "common/clock.h"
#include "common/json_fields.h"
#include "common/json_text.h"
#include "model/json.h"
#include "model/yaml_input.h"

namespace json = boost::json;

namespace gpufleet::alerting {
namespace {

class FileParser : YamlFields {
 public:
  explicit FileParser(std::string_view filename) : YamlFields(filename) {}

  Result<RuleFile> Run(const YAML::Node& root) {
    if (!root.IsMap()) return Bad(root, "", "the document must be a mapping with `groups`");
    GF_TRY(Only(root, "", {"groups"}));
    auto groups = root["groups"];
    if (!groups || !groups.IsSequence())
      return Bad(groups ? groups : root, "groups", "must be a list");
    RuleFile out;
    std::set<std::string> group_names, rule_names;
    for (size_t i = 0; i < groups.size(); ++i) {
      const YAML::Node g = groups[i];
      std::string path = "groups[" + std::to_string(i) + "]";
      if (!g.IsMap()) return Bad(g, path, "must be a mapping");
      GF_TRY(Only(g, path, {"name", "rules", "interval"}));
      if (g["interval"]) {
        return Bad(g["interval"], path + ".interval",
                   "rules are evaluated every health cycle (--health-interval); remove it");
      }
      std::string name;
      GF_TRY_ASSIGN(name, String(g, path, "name", false));
      if (name.empty()) return Bad(g, path + ".name", "is required");
      if (name == "builtin") return Bad(g["name"], path + ".name", "'builtin' is reserved");
      if (!group_names.insert(name).second) {
        return Bad(g["name"], path + ".name", "duplicate group '" + name + "'");
      }
      out.groups.push_back(name);
      auto rules = g["rules"];
      if (rules && !rules.IsSequence()) return Bad(rules, path + ".rules", "must be a list");
      for (size_t j = 0; rules && j < rules.size(); ++j) {
        const YAML::Node r = rules[j];
        std::string rpath = path + ".rules[" + std::to_string(j) + "]";
        if (!r.IsMap()) return Bad(r, rpath, "must be a mapping");
        if (r["record"]) {
          return Bad(r["record"], rpath + ".record", "recording rules are not supported");
        }
        GF_TRY(
            Only(r, rpath,
                 {"alert", "expr", "for", "keep_firing_for", "labels", "annotations", "enabled"}));
        Rule rule;
        rule.group = name;
        GF_TRY_ASSIGN(rule.name, String(r, rpath, "alert", false));
        GF_TRY_ASSIGN(rule.expr, String(r, rpath, "expr", false));
        GF_TRY_ASSIGN(rule.for_ms, Duration(r, rpath, "for"));
        GF_TRY_ASSIGN(rule.keep_firing_for_ms, Duration(r, rpath, "keep_firing_for"));
        GF_TRY_ASSIGN(rule.labels, Map(r, rpath, "labels"));
        GF_TRY_ASSIGN(rule.annotations, Map(r, rpath, "annotations"));
        if (auto e = r["enabled"]) {
          if (!e.IsScalar() || (e.Scalar() != "true" && e.Scalar() != "false")) {
            return Bad(e, rpath + ".enabled", "must be true or false");
          }
          rule.enabled = e.Scalar() == "true";
        }
        std::string field;
        if (auto s = CheckRule(rule, &field); !s.ok()) {
          std::string top = field.substr(0, field.find('.'));
          auto node = r[top];
          std::string why = s.error().message;
          why = why.substr(why.find(field + ": ") + field.size() + 2);
          return Bad(node ? node : r, rpath + "." + field, why);
        }
        if (!rule_names.insert(rule.name).second) {
          return Bad(r["alert"], rpath + ".alert", "duplicate rule '" + rule.name + "'");
        }
        out.rules.push_back(std::move(rule));
      }
    }
    return out;
  }

 private:
  Result<int64_t> Duration(const YAML::Node& map, const std::string& path, const char* key) const {
    auto v = map[key];
    if (!v) return int64_t{0};
    int64_t ms = v.IsScalar() ? ParseDurationMs(v.Scalar()) : -1;
    if (v.IsScalar() && v.Scalar() == "0") ms = 0;
    if (ms < 0) return Bad(v, path + "." + key, "must be a duration such as 30s, 5m or 1h");
    return ms;
  }

  Result<Labels> Map(const YAML::Node& map, const std::string& path, const char* key) const {
    auto v = map[key];
    Labels out;
    if (!v) return out;
    if (!v.IsMap()) return Bad(v, path + "." + key, "must be a mapping of names to strings");
    for (const auto& kv : v) {
      if (!kv.second.IsScalar()) {
        return Bad(kv.second, path + "." + key + "." + kv.first.Scalar(), "must be a string");
      }
      out[kv.first.Scalar()] = kv.second.Scalar();
    }
    return out;
  }
};

}  // namespace

std::string FormatDuration(int64_t ms) {
  if (ms == 0) return "0s";
  struct Unit {
    int64_t ms;
    const char* name;
  };
  for (Unit u : {Unit{86'400'000, "d"}, Unit{3'600'000, "h"}, Unit{60'000, "m"}, Unit{1000, "s"}}) {
    if (ms % u.ms == 0) return std::to_string(ms / u.ms) + u.name;
  }
  return std::to_string(ms) + "ms";
}

bool IsRuleFile(std::string_view yaml) {
  auto root = LoadYamlInput(yaml, "rules");
  return root.ok() && root->IsMap() && (*root)["groups"];
}

Result<RuleFile> ParseRuleFile(std::string_view yaml, std::string_view filename) {
  auto loaded = LoadYamlInput(yaml, filename);
  if (!loaded.ok()) return loaded.error();
  YAML::Node root = std::move(loaded).value();
  try {
    return FileParser(filename).Run(root);
  } catch (const YAML::Exception& e) {
    return MakeError(ErrorCode::kInvalidArgument,
                     std::string(filename) + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
}

std::string WriteRuleFile(const std::vector<Rule>& rules) {
  std::vector<std::string> groups;
  for (const auto& r : rules) {
    if (std::find(groups.begin(), groups.end(), r.group) == groups.end()) groups.push_back(r.group);
  }
  std::string out = groups.empty() ? "groups: []\n" : "groups:\n";
  for (const auto& g : groups) {
    out += "  - name: ";
    AppendYamlFlow(out, json::value(g));
    out += "\n    rules:\n";
    for (const auto& r : rules) {
      if (r.group != g) continue;
      boost::system::error_code ec;
      json::object o = json::parse(RuleJson(r), ec).as_object();
      o.erase("group");
      out += "      - ";
      AppendYamlFlow(out, o);
      out += '\n';
    }
  }
  return out;
}

std::string RuleJson(const Rule& rule) {
  json::object o{{"alert", rule.name},
                 {"group", rule.group},
                 {"enabled", rule.enabled},
                 {"expr", rule.expr},
                 {"for", FormatDuration(rule.for_ms)},
                 {"keep_firing_for", FormatDuration(rule.keep_firing_for_ms)},
                 {"labels", ToJson(rule.labels)},
                 {"annotations", ToJson(rule.annotations)}};
  if (!rule.severity.empty()) o["labels"].as_object()["severity"] = rule.severity;
  return JsonText(o);
}

Result<Rule> RuleFromJson(std::string_view text) {
  boost::system::error_code ec;
  auto v = json::parse(text, ec);
  if (ec || !v.is_object()) {
    return MakeError(ErrorCode::kInvalidArgument, "the rule must be a JSON object");
  }
  const auto& o = v.as_object();
  JsonFields fields(o);
  GF_TRY(fields.Only(
      {"alert", "group", "enabled", "expr", "for", "keep_firing_for", "labels", "annotations"}));
  auto str = [&](const char* k, std::string& out) { return fields.String(k, out); };
  auto map = [&](const char* k, Labels& out) -> Status {
    auto* x = o.if_contains(k);
    if (!x) return {};
    if (!x->is_object()) {
      return MakeError(ErrorCode::kInvalidArgument, std::string(k) + ": must be an object");
    }
    for (const auto& kv : x->as_object()) {
      if (!kv.value().is_string()) {
        return MakeError(ErrorCode::kInvalidArgument,
                         std::string(k) + "." + std::string(kv.key()) + ": must be a string");
      }
    }
    out = LabelsFromJson(*x);
    return {};
  };
  auto duration = [&](const char* k, int64_t& out) -> Status {
    std::string text;
    GF_TRY(str(k, text));
    if (text.empty()) return {};
    out = text == "0" ? 0 : ParseDurationMs(text);
    if (out < 0) {
      return MakeError(ErrorCode::kInvalidArgument,
                       std::string(k) + ": must be a duration such as 30s, 5m or 1h");
    }
    return {};
  };
  Rule rule;
  GF_TRY(str("alert", rule.name));
  GF_TRY(str("group", rule.group));
  GF_TRY(str("expr", rule.expr));
  GF_TRY(duration("for", rule.for_ms));
  GF_TRY(duration("keep_firing_for", rule.keep_firing_for_ms));
  GF_TRY(map("labels", rule.labels));
  GF_TRY(map("annotations", rule.annotations));
  if (auto* e = o.if_contains("enabled")) {
    if (!e->is_bool()) return MakeError(ErrorCode::kInvalidArgument, "enabled: must be a boolean");
    rule.enabled = e->as_bool();
  }
  if (rule.group.empty()) rule.group = "api";
  if (rule.group == "builtin") {
    return MakeError(ErrorCode::kInvalidArgument, "group: 'builtin' is reserved");
  }
  GF_TRY(CheckRule(rule));
  return rule;
}

}  // namespace gpufleet::alerting
