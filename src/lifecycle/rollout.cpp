#include "lifecycle/rollout.h"

#include <algorithm>
#include <array>
#include <boost/json.hpp>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <set>

#include "common/clock.h"
#include "common/field_table.h"
#include "common/json_fields.h"
#include "common/json_text.h"
#include "common/strings.h"
#include "model/json.h"

namespace json = boost::json;

namespace gpufleet::lifecycle {
namespace {

Error Bad(const std::string& field, const std::string& why) {
  return MakeError(ErrorCode::kInvalidArgument, field + ": " + why);
}

// 2 or "2" or "25%".
Result<Amount> AmountOf(const json::value& v, const std::string& field, bool allow_zero) {
  Amount a;
  std::string text;
  if (v.is_int64() || v.is_uint64()) {
    a.value = static_cast<double>(v.to_number<int64_t>());
  } else if (v.is_string()) {
    text = std::string(v.as_string());
    a.share = !text.empty() && text.back() == '%';
    std::string number = a.share ? text.substr(0, text.size() - 1) : text;
    char* end = nullptr;
    a.value = std::strtod(number.c_str(), &end);
    if (number.empty() || end != number.c_str() + number.size() || !std::isfinite(a.value)) {
      return Bad(field, "'" + text + "' must be a count (2) or a share (\"25%\")");
    }
    if (!a.share && a.value != std::floor(a.value)) return Bad(field, "a count must be whole");
  } else {
    return Bad(field, "must be a count (2) or a share (\"25%\")");
  }
  if (a.value < 0 || (a.share && a.value > 100)) {
    return Bad(field, "must be from 0 to 100% or a count of 0 or more");
  }
  if (!allow_zero && a.value == 0) return Bad(field, "must be more than 0");
  return a;
}

Result<int64_t> DurationOf(const json::value& v, const std::string& field, int64_t min_ms,
                           int64_t max_ms) {
  if (!v.is_string()) return Bad(field, "must be a duration such as \"10m\"");
  int64_t ms = ParseDurationMs(std::string(v.as_string()));
  if (ms < min_ms || ms > max_ms) {
    return Bad(field, "'" + std::string(v.as_string()) + "' must be a duration from " +
                          std::to_string(min_ms / 1000) + "s to " +
                          std::to_string(max_ms / 3'600'000) + "h");
  }
  return ms;
}

std::string Duration(int64_t ms) {
  if (ms % 3'600'000 == 0 && ms > 0) return std::to_string(ms / 3'600'000) + "h";
  if (ms % 60'000 == 0 && ms > 0) return std::to_string(ms / 60'000) + "m";
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

Result<RolloutStrategy> StrategyOf(const json::object& o) {
  RolloutStrategy s;
  JsonFields f(o, "strategy");
  GF_TRY(f.Only({"test_nodes", "test_pool", "validate", "canary", "confidence", "batch",
                 "max_unavailable", "max_failed_nodes", "rollback", "drain_timeout", "on_busy",
                 "approve_between_stages", "respect_windows", "action_timeout", "boot_timeout"}));
  GF_TRY(f.Strings("test_nodes", s.test_nodes, false));
  GF_TRY(f.Bool("validate", s.validate));
  GF_TRY(f.Bool("approve_between_stages", s.approve_between_stages));
  if (f.Get("respect_windows")) {
    bool b = false;
    GF_TRY(f.Bool("respect_windows", b));
    s.respect_windows = b;
  }
  for (const auto& [key, v] : o) {
    std::string field = "strategy." + std::string(key);
    if (key == "test_pool") {
      if (!v.is_string()) return Bad(field, "must be a pool's name");
      s.test_pool = std::string(v.as_string());
    } else if (key == "canary") {
      GF_TRY_ASSIGN(s.canary, AmountOf(v, field, true));
    } else if (key == "confidence") {
      GF_TRY_ASSIGN(s.confidence_ms, DurationOf(v, field, 0, 7 * 86'400'000LL));
    } else if (key == "batch") {
      if (!v.is_object()) return Bad(field, "must be {size, growth}");
      const auto& b = v.as_object();
      GF_TRY(JsonFields(b, "strategy.batch").Only({"size", "growth"}));
      if (const auto* size = b.if_contains("size")) {
        if (!size->is_int64() || size->as_int64() < 1 || size->as_int64() > 100'000) {
          return Bad("strategy.batch.size", "must be a count from 1");
        }
        s.batch_size = static_cast<int>(size->as_int64());
      }
      if (const auto* g = b.if_contains("growth")) {
        std::string growth = g->is_string() ? std::string(g->as_string()) : "";
        if (growth != "fixed" && growth != "linear" && growth != "exponential") {
          return Bad("strategy.batch.growth", "must be fixed, linear or exponential");
        }
        s.batch_growth = growth;
      }
    } else if (key == "max_unavailable") {
      GF_TRY_ASSIGN(s.max_unavailable, AmountOf(v, field, false));
    } else if (key == "max_failed_nodes") {
      GF_TRY_ASSIGN(s.max_failed_nodes, AmountOf(v, field, false));
    } else if (key == "rollback") {
      std::string r = v.is_string() ? std::string(v.as_string()) : "";
      if (r != "automatic" && r != "manual") return Bad(field, "must be automatic or manual");
      s.rollback = r;
    } else if (key == "drain_timeout") {
      GF_TRY_ASSIGN(s.drain_timeout_ms, DurationOf(v, field, 0, 24 * 3'600'000LL));
    } else if (key == "on_busy") {
      std::string b = v.is_string() ? std::string(v.as_string()) : "";
      if (b != "drain" && b != "skip") return Bad(field, "must be drain or skip");
      s.busy = b;
    } else if (key == "action_timeout") {
      GF_TRY_ASSIGN(s.action_timeout_ms, DurationOf(v, field, 1000, 24 * 3'600'000LL));
    } else if (key == "boot_timeout") {
      GF_TRY_ASSIGN(s.boot_timeout_ms, DurationOf(v, field, 1000, 24 * 3'600'000LL));
    }
  }
  return s;
}

Result<RolloutSelector> SelectorOf(const json::object& o) {
  RolloutSelector s;
  JsonFields f(o, "selector");
  GF_TRY(f.Only({"clusters", "pools", "nodes", "labels"}));
  GF_TRY(f.Strings("clusters", s.clusters, false));
  GF_TRY(f.Strings("pools", s.pools, false));
  GF_TRY(f.Strings("nodes", s.nodes, false));
  if (const auto* l = o.if_contains("labels")) {
    if (!l->is_object()) return Bad("selector.labels", "must be a mapping of labels");
    for (const auto& [k, v] : l->as_object()) {
      if (!v.is_string()) return Bad("selector.labels." + std::string(k), "must be a string");
      s.labels[std::string(k)] = std::string(v.as_string());
    }
  }
  if (s.Empty()) return Bad("selector", "must name clusters, pools, nodes or labels");
  return s;
}

json::array Array(const std::vector<std::string>& v) {
  json::array a;
  for (const auto& s : v) a.emplace_back(s);
  return a;
}

std::string Str(const json::object& o, const char* key) {
  const auto* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->as_string()) : std::string();
}
int64_t Int(const json::object& o, const char* key, int64_t fallback = 0) {
  const auto* v = o.if_contains(key);
  return v && v->is_number() ? v->to_number<int64_t>() : fallback;
}
std::string Time(int64_t ms) { return ms > 0 ? FormatTime(ms) : ""; }

// A rollout's fields that its API form and its stored document share, as they are.
const FieldOf<Rollout> kRolloutFields[] = {
    {"target", &Rollout::target},   {"package", &Rollout::package},
    {"stage", &Rollout::stage},     {"reason", &Rollout::reason},
    {"batches", &Rollout::batches}, {"created_by", &Rollout::created_by},
    {"forced", &Rollout::forced}};
// What resuming needs beyond the API's form, in milliseconds: the stored document's alone.
const FieldOf<Rollout> kRolloutDocFields[] = {
    {"current", &Rollout::current},
    {"approved", &Rollout::approved},
    {"confidence_until_ms", &Rollout::confidence_until_ms},
    {"created_ms", &Rollout::created_ms},
    {"started_ms", &Rollout::started_ms},
    {"ended_ms", &Rollout::ended_ms}};
// A node's stored document (its state and step are written by name besides).
const FieldOf<RolloutNode> kNodeDocFields[] = {{"pool", &RolloutNode::pool},
                                               {"cluster", &RolloutNode::cluster},
                                               {"from", &RolloutNode::from},
                                               {"to", &RolloutNode::to},
                                               {"started_ms", &RolloutNode::started_ms},
                                               {"ended_ms", &RolloutNode::ended_ms},
                                               {"message", &RolloutNode::message},
                                               {"stage", &RolloutNode::stage},
                                               {"command", &RolloutNode::command},
                                               {"step_ms", &RolloutNode::step_ms},
                                               {"rollback", &RolloutNode::rollback},
                                               {"resume", &RolloutNode::resume},
                                               {"result", &RolloutNode::result}};

}  // namespace

int Amount::Of(int total) const {
  if (!share) return static_cast<int>(value);
  if (value == 0) return 0;
  return std::max(1, static_cast<int>(std::floor(total * value / 100.0)));
}

std::string Amount::Text() const {
  char buf[32];
  std::snprintf(buf, sizeof buf, share ? "%g%%" : "%g", value);
  return buf;
}

Result<RolloutRequest> ParseRolloutRequest(std::string_view body) {
  auto parsed = ParseObject(body);
  if (!parsed.ok()) return parsed.error();
  const json::object& o = parsed.value();
  JsonFields f(o);
  GF_TRY(
      f.Only({"kind", "target", "package", "selector", "strategy", "force", "reason", "expect"}));
  RolloutRequest r;
  std::string kind = Str(o, "kind");
  auto k = ParseRolloutKind(kind);
  if (!k) return Bad("kind", "'" + kind + "' must be " + RolloutKindNames());
  r.kind = *k;
  r.target = Str(o, "target");
  // Both go to the node's action program as arguments: neither may look like an option.
  if (r.target.empty() || r.target.size() > 64 ||
      !std::isalnum(static_cast<unsigned char>(r.target[0])) ||
      r.target.find_first_not_of("0123456789abcdefABCDEF.-_") != std::string::npos) {
    return Bad("target", "must be a version such as 580.95.05");
  }
  if (const auto* p = o.if_contains("package")) {
    if (!p->is_string()) return Bad("package", "must be a path or URL");
    r.package = std::string(p->as_string());
    if (r.package.size() > 1024 || (!r.package.empty() && r.package[0] == '-') ||
        HasControl(r.package)) {
      return Bad("package",
                 "must be a path or URL of at most 1024 bytes, not starting with '-', on one line");
    }
  }
  const auto* sel = o.if_contains("selector");
  if (!sel || !sel->is_object()) return Bad("selector", "is required: {pools: [...]} or the like");
  GF_TRY_ASSIGN(r.selector, SelectorOf(sel->as_object()));
  if (const auto* st = o.if_contains("strategy")) {
    if (!st->is_object()) return Bad("strategy", "must be a mapping");
    GF_TRY_ASSIGN(r.strategy, StrategyOf(st->as_object()));
  }
  GF_TRY(f.Bool("force", r.force));
  r.reason = Str(o, "reason");
  if (r.force && r.reason.empty()) {
    return Bad("reason", "a forced rollout needs a reason (it goes to the audit log)");
  }
  if (const auto* e = o.if_contains("expect")) {
    if (!e->is_object()) return Bad("expect", "must be {drain, install, reboot, validate}");
    GF_TRY(JsonFields(e->as_object(), "expect").Only({"drain", "install", "reboot", "validate"}));
    for (auto [key, into] :
         {std::pair{"drain", &r.expect_drain_ms}, std::pair{"install", &r.expect_install_ms},
          std::pair{"reboot", &r.expect_reboot_ms}, std::pair{"validate", &r.expect_validate_ms}}) {
      if (const auto* v = e->as_object().if_contains(key)) {
        GF_TRY_ASSIGN(*into, DurationOf(*v, "expect." + std::string(key), 0, 24 * 3'600'000LL));
      }
    }
  }
  return r;
}

json::object ToJson(const RolloutStrategy& s) {
  json::object o{{"test_nodes", Array(s.test_nodes)},
                 {"test_pool", s.test_pool},
                 {"validate", s.validate},
                 {"canary", s.canary.Text()},
                 {"confidence", Duration(s.confidence_ms)},
                 {"batch", {{"size", s.batch_size}, {"growth", s.batch_growth}}},
                 {"max_unavailable", s.max_unavailable.Text()},
                 {"max_failed_nodes", s.max_failed_nodes.Text()},
                 {"rollback", s.rollback},
                 {"drain_timeout", Duration(s.drain_timeout_ms)},
                 {"on_busy", s.busy},
                 {"approve_between_stages", s.approve_between_stages},
                 {"action_timeout", Duration(s.action_timeout_ms)},
                 {"boot_timeout", Duration(s.boot_timeout_ms)}};
  if (s.respect_windows) o["respect_windows"] = *s.respect_windows;
  return o;
}

json::object ToJson(const RolloutNode& n) {
  return {{"node", n.node},
          {"pool", n.pool},
          {"cluster", n.cluster},
          {"state", ToString(n.state)},
          {"from", n.from},
          {"to", n.to},
          {"started_at", Time(n.started_ms)},
          {"ended_at", Time(n.ended_ms)},
          {"message", n.message},
          {"stage", n.stage < 0    ? "test"
                    : n.stage == 0 ? "canary"
                                   : "batch " + std::to_string(n.stage)},
          {"step", ToString(n.step)}};
}

json::object ToJson(const Rollout& r, bool with_nodes) {
  json::object sel{{"clusters", Array(r.selector.clusters)},
                   {"pools", Array(r.selector.pools)},
                   {"nodes", Array(r.selector.nodes)},
                   {"labels", ::gpufleet::ToJson(r.selector.labels)}};
  json::object counts;
  std::array<int64_t, static_cast<size_t>(NodeProgress::kRolledBack) + 1> count{};
  for (const auto& n : r.nodes) ++count[static_cast<size_t>(n.state)];
  for (size_t i = 0; i < count.size(); ++i) {
    counts[ToString(static_cast<NodeProgress>(i))] = count[i];
  }
  json::object o{{"id", r.id}, {"kind", ToString(r.kind)}};
  WriteFields(r, kRolloutFields, o);
  o.insert({{"selector", std::move(sel)},
            {"strategy", ToJson(r.strategy)},
            {"state", ToString(r.state)},
            {"confidence_until", Time(r.confidence_until_ms)},
            {"created_at", Time(r.created_ms)},
            {"updated_at", Time(r.updated_ms)},
            {"started_at", Time(r.started_ms)},
            {"ended_at", Time(r.ended_ms)},
            {"total", static_cast<int64_t>(r.nodes.size())},
            {"counts", std::move(counts)}});
  if (with_nodes) {
    json::array nodes;
    for (const auto& n : r.nodes) nodes.push_back(ToJson(n));
    o["nodes"] = std::move(nodes);
  }
  return o;
}

std::string RolloutDoc(const Rollout& r) {
  json::object o = ToJson(r, false);
  WriteFields(r, kRolloutDocFields, o);
  o["strategy_ms"] = {{"confidence", r.strategy.confidence_ms},
                      {"drain_timeout", r.strategy.drain_timeout_ms},
                      {"action_timeout", r.strategy.action_timeout_ms},
                      {"boot_timeout", r.strategy.boot_timeout_ms}};
  return JsonText(o);
}

Result<Rollout> RolloutFromDoc(int64_t id, const std::string& doc) {
  auto parsed = ParseObject(doc);
  if (!parsed.ok()) return parsed.error();
  const json::object& o = parsed.value();
  Rollout r;
  r.id = id;
  auto kind = ParseRolloutKind(Str(o, "kind"));
  if (!kind) return MakeError(ErrorCode::kInternal, "rollout " + std::to_string(id) + ": no kind");
  r.kind = *kind;
  if (const auto* s = o.if_contains("selector"); s && s->is_object()) {
    const auto& so = s->as_object();
    auto names = [&](const char* key) {
      std::vector<std::string> list;
      (void)JsonFields(so).Strings(key, list, false);  // as stored; a bad list reads as none
      return list;
    };
    r.selector.clusters = names("clusters");
    r.selector.pools = names("pools");
    r.selector.nodes = names("nodes");
    if (const auto* l = so.if_contains("labels")) r.selector.labels = LabelsFromJson(*l);
  }
  if (const auto* s = o.if_contains("strategy"); s && s->is_object()) {
    json::object st = s->as_object();
    // Durations are read from strategy_ms (exact), the rest as the API would.
    for (const char* k : {"confidence", "drain_timeout", "action_timeout", "boot_timeout"}) {
      st.erase(k);
    }
    auto parsed_strategy = StrategyOf(st);
    if (!parsed_strategy.ok()) return parsed_strategy.error();
    r.strategy = parsed_strategy.value();
    if (const auto* ms = o.if_contains("strategy_ms"); ms && ms->is_object()) {
      const auto& m = ms->as_object();
      r.strategy.confidence_ms = Int(m, "confidence", r.strategy.confidence_ms);
      r.strategy.drain_timeout_ms = Int(m, "drain_timeout", r.strategy.drain_timeout_ms);
      r.strategy.action_timeout_ms = Int(m, "action_timeout", r.strategy.action_timeout_ms);
      r.strategy.boot_timeout_ms = Int(m, "boot_timeout", r.strategy.boot_timeout_ms);
    }
  }
  auto state = ParseRolloutState(Str(o, "state"));
  if (!state) {
    return MakeError(ErrorCode::kInternal, "rollout " + std::to_string(id) + ": state '" +
                                               Str(o, "state") + "' is not known");
  }
  r.state = *state;
  ReadFields(o, kRolloutFields, r);
  ReadFields(o, kRolloutDocFields, r);
  return r;
}

std::string NodeDoc(const RolloutNode& n) {
  json::object o{{"state", ToString(n.state)}, {"step", ToString(n.step)}};
  WriteFields(n, kNodeDocFields, o);
  return JsonText(o);
}

Result<RolloutNode> NodeFromDoc(const std::string& node, const std::string& doc) {
  auto parsed = ParseObject(doc);
  if (!parsed.ok()) return parsed.error();
  const json::object& o = parsed.value();
  RolloutNode n;
  n.node = node;
  auto state = ParseNodeProgress(Str(o, "state"));
  auto step = ParseRolloutStep(Str(o, "step"));
  if (!state || !step) {
    return MakeError(ErrorCode::kInternal, "rollout node " + node + ": state '" + Str(o, "state") +
                                               "' or step '" + Str(o, "step") + "' is not known");
  }
  n.state = *state;
  n.step = *step;
  ReadFields(o, kNodeDocFields, n);
  return n;
}

}  // namespace gpufleet::lifecycle
