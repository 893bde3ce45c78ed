#include "model/scaling_policy.h"

#include <algorithm>
#include <boost/json.hpp>
#include <cmath>
#include <cstdio>

#include "common/clock.h"
#include "common/json_fields.h"
#include "common/json_text.h"

namespace gpufleet {

const char* ToString(ScaleMode m) {
  switch (m) {
    case ScaleMode::kReactive:
      return "reactive";
    case ScaleMode::kPredictive:
      return "predictive";
    case ScaleMode::kOracle:
      return "oracle";
  }
  return "?";
}

std::string ScalePolicy::Validate() const {
  if (min_nodes < 0) return "min_nodes must be 0 or more";
  if (max_nodes < min_nodes) return "max_nodes must be at least min_nodes";
  if (max_nodes > 100'000) return "max_nodes must be at most 100000";
  if (!(target_share > 0 && target_share <= 1)) return "target_share must be in (0, 1]";
  if (step_up < 1) return "step_up must be at least 1";
  if (step_down < 1) return "step_down must be at least 1";
  if (up_cooldown_s < 0 || down_cooldown_s < 0) return "cooldowns must not be negative";
  if (!(lead_time_s >= 0 && lead_time_s <= 86'400)) return "lead_time must be 0 to 1d";
  if (idle_before_remove_s < 0) return "idle_before_remove must not be negative";
  if (!(interval_s >= 1 && interval_s <= 86'400)) return "interval must be 1s to 1d";
  if (!(forecast_margin >= 0 && forecast_margin <= 10)) return "forecast_margin must be in [0, 10]";
  if (!(consolidate_below >= 0 && consolidate_below <= 1)) {
    return "consolidate_below must be in [0, 1] (0: never)";
  }
  for (const auto& s : schedule) {
    if (s.nodes < 0 || s.from_hour < 0 || s.to_hour > 24 || s.from_hour >= s.to_hour) {
      return "schedule: nodes >= 0 and 0 <= from < to <= 24";
    }
    if (s.nodes > max_nodes) return "schedule: nodes must be at most max_nodes";
  }
  return "";
}

std::string PoolScaling::Validate() const {
  if (policy.mode == ScaleMode::kOracle)
    return "mode must be reactive or predictive (oracle is for replays)";
  if (auto e = policy.Validate(); !e.empty()) return e;
  if (actuator.type == "command") {
    if (actuator.provision.empty() || actuator.deprovision.empty()) {
      return "actuator: a command actuator needs both provision and deprovision";
    }
  } else if (actuator.type != "sim") {
    return "actuator.type must be sim or command";
  }
  if (!(actuator.timeout_s > 0)) return "actuator.timeout must be positive";
  if (!(tune.every_s == 0 || tune.every_s >= 60)) {
    return "tune.every must be 0 (never) or at least 1m";
  }
  if (!(tune.wait_p95_s >= 0)) return "tune.wait_p95 must be 0 or more";
  if (!(tune.window_s > 0 && tune.window_s <= 30 * 86400)) {
    return "tune.window must be positive and at most 30d";
  }
  return "";
}

int ScalePolicy::MinimumAt(double t_s) const {
  int m = min_nodes;
  auto secs = static_cast<int64_t>(std::floor(t_s));
  int hour = static_cast<int>((secs / 3600) % 24);
  // Day 0 of the epoch (1970-01-01) was a Thursday: 0 = Monday.
  int weekday = static_cast<int>((secs / 86400 + 3) % 7);
  for (const auto& s : schedule) {
    if (hour < s.from_hour || hour >= s.to_hour) continue;
    if (s.weekdays_only && weekday >= 5) continue;
    m = std::max(m, s.nodes);
  }
  return std::min(m, max_nodes);
}

namespace json = boost::json;

std::string FormatSeconds(double s) {
  char buf[32];
  auto whole = [](double v) { return std::fabs(v - std::round(v)) < 1e-9; };
  if (s > 0 && !whole(s)) {
    std::snprintf(buf, sizeof buf, "%lldms", static_cast<long long>(std::llround(s * 1000)));
  } else if (s >= 86400 && whole(s / 86400)) {
    std::snprintf(buf, sizeof buf, "%lldd", static_cast<long long>(std::llround(s / 86400)));
  } else if (s >= 3600 && whole(s / 3600)) {
    std::snprintf(buf, sizeof buf, "%lldh", static_cast<long long>(std::llround(s / 3600)));
  } else if (s >= 60 && whole(s / 60)) {
    std::snprintf(buf, sizeof buf, "%lldm", static_cast<long long>(std::llround(s / 60)));
  } else {
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(std::llround(s)));
  }
  return buf;
}

Result<PoolScaling> ParsePoolScaling(std::string_view text, std::string* field) {
  auto fail = [&](JsonFields& f, Error e) -> Result<PoolScaling> {
    if (field) *field = f.field();
    return e;
  };
  boost::system::error_code ec;
  json::value doc = json::parse(text, ec);
  if (ec) return MakeError(ErrorCode::kInvalidArgument, "malformed JSON: " + ec.message());
  if (!doc.is_object()) {
    return MakeError(ErrorCode::kInvalidArgument, "a scaling policy is a JSON object");
  }
  PoolScaling s;
  ScalePolicy& p = s.policy;
  JsonFields f(doc.as_object());
#define GF_FIELD(expr)                     \
  if (auto st = (expr); !st.ok()) {        \
    return fail(f, std::move(st).error()); \
  }
  GF_FIELD(f.Only({"pool",
                   "updated_ms",
                   "mode",
                   "min_nodes",
                   "max_nodes",
                   "target_share",
                   "step_up",
                   "step_down",
                   "up_cooldown",
                   "down_cooldown",
                   "lead_time",
                   "idle_before_remove",
                   "forecast_margin",
                   "margin_by",
                   "consolidate_below",
                   "interval",
                   "enabled",
                   "schedule",
                   "actuator",
                   "tune"}));
  std::string mode = "predictive";
  GF_FIELD(f.String("mode", mode));
  if (mode == "reactive") {
    p.mode = ScaleMode::kReactive;
  } else if (mode == "predictive") {
    p.mode = ScaleMode::kPredictive;
  } else {
    return fail(f, f.Bad("mode", "'" + mode + "' is not reactive or predictive"));
  }
  p.target_share = ScalePolicy::DefaultShare(p.mode);  // unless given
  GF_FIELD(f.Int("min_nodes", p.min_nodes));
  GF_FIELD(f.Int("max_nodes", p.max_nodes));
  GF_FIELD(f.Number("target_share", p.target_share));
  GF_FIELD(f.Int("step_up", p.step_up));
  GF_FIELD(f.Int("step_down", p.step_down));
  GF_FIELD(f.Seconds("up_cooldown", p.up_cooldown_s));
  GF_FIELD(f.Seconds("down_cooldown", p.down_cooldown_s));
  GF_FIELD(f.Seconds("lead_time", p.lead_time_s));
  GF_FIELD(f.Seconds("idle_before_remove", p.idle_before_remove_s));
  GF_FIELD(f.Number("forecast_margin", p.forecast_margin));
  std::string margin_by = "recent";
  GF_FIELD(f.String("margin_by", margin_by));
  if (margin_by != "recent" && margin_by != "hour") {
    return fail(f, f.Bad("margin_by", "'" + margin_by + "' is not recent or hour"));
  }
  p.margin_by_hour = margin_by == "hour";
  GF_FIELD(f.Number("consolidate_below", p.consolidate_below));
  GF_FIELD(f.Seconds("interval", p.interval_s));
  GF_FIELD(f.Bool("enabled", s.enabled));
  if (const json::value* v = doc.as_object().if_contains("schedule")) {
    if (!v->is_array()) return fail(f, f.Bad("schedule", "must be a list"));
    for (size_t i = 0; i < v->as_array().size(); ++i) {
      const json::value& e = v->as_array()[i];
      std::string at = "schedule[" + std::to_string(i) + "]";
      if (!e.is_object()) return fail(f, f.Bad(at, "must be an object with nodes, from, to"));
      JsonFields g(e.as_object(), at);
      ScheduledMinimum m;
#define GF_SUB(expr)                \
  if (auto st = (expr); !st.ok()) { \
    if (field) *field = g.field();  \
    return std::move(st).error();   \
  }
      GF_SUB(g.Only({"nodes", "from", "to", "weekdays"}));
      GF_SUB(g.Int("nodes", m.nodes));
      GF_SUB(g.Int("from", m.from_hour));
      GF_SUB(g.Int("to", m.to_hour));
      GF_SUB(g.Bool("weekdays", m.weekdays_only));
      if (m.nodes < 0) GF_SUB(Status(g.Bad("nodes", "must be 0 or more")));
      if (m.from_hour < 0 || m.from_hour > 23)
        GF_SUB(Status(g.Bad("from", "must be an hour 0..23 (UTC)")));
      if (m.to_hour <= m.from_hour || m.to_hour > 24) {
        GF_SUB(Status(g.Bad("to", "must be an hour after 'from', at most 24 (UTC)")));
      }
      p.schedule.push_back(m);
    }
  }
  if (const json::value* v = doc.as_object().if_contains("actuator")) {
    if (!v->is_object()) return fail(f, f.Bad("actuator", "must be an object"));
    JsonFields g(v->as_object(), "actuator");
    GF_SUB(g.Only({"type", "provision", "deprovision", "timeout"}));
    GF_SUB(g.String("type", s.actuator.type));
    GF_SUB(g.String("provision", s.actuator.provision));
    GF_SUB(g.String("deprovision", s.actuator.deprovision));
    GF_SUB(g.Seconds("timeout", s.actuator.timeout_s));
  }
  if (const json::value* v = doc.as_object().if_contains("tune")) {
    if (!v->is_object()) return fail(f, f.Bad("tune", "must be an object"));
    JsonFields g(v->as_object(), "tune");
    GF_SUB(g.Only({"every", "wait_p95", "window"}));
    GF_SUB(g.Seconds("every", s.tune.every_s));
    GF_SUB(g.Seconds("wait_p95", s.tune.wait_p95_s));
    GF_SUB(g.Seconds("window", s.tune.window_s));
  }
#undef GF_SUB
#undef GF_FIELD
  if (auto e = s.Validate(); !e.empty()) {
    if (field) *field = e.substr(0, e.find_first_of(" :"));
    return MakeError(ErrorCode::kInvalidArgument, e);
  }
  return s;
}

std::string PoolScalingJson(const PoolScaling& s) {
  const ScalePolicy& p = s.policy;
  json::array schedule;
  for (const auto& m : p.schedule) {
    schedule.push_back(json::object{{"nodes", m.nodes},
                                    {"from", m.from_hour},
                                    {"to", m.to_hour},
                                    {"weekdays", m.weekdays_only}});
  }
  json::object actuator{{"type", s.actuator.type},
                        {"timeout", FormatSeconds(s.actuator.timeout_s)}};
  if (s.actuator.type == "command") {
    actuator["provision"] = s.actuator.provision;
    actuator["deprovision"] = s.actuator.deprovision;
  }
  json::object o{{"pool", s.pool},
                 {"mode", ToString(p.mode)},
                 {"enabled", s.enabled},
                 {"min_nodes", p.min_nodes},
                 {"max_nodes", p.max_nodes},
                 {"target_share", p.target_share},
                 {"step_up", p.step_up},
                 {"step_down", p.step_down},
                 {"up_cooldown", FormatSeconds(p.up_cooldown_s)},
                 {"down_cooldown", FormatSeconds(p.down_cooldown_s)},
                 {"lead_time", FormatSeconds(p.lead_time_s)},
                 {"idle_before_remove", FormatSeconds(p.idle_before_remove_s)},
                 {"forecast_margin", p.forecast_margin},
                 {"margin_by", p.margin_by_hour ? "hour" : "recent"},
                 {"consolidate_below", p.consolidate_below},
                 {"interval", FormatSeconds(p.interval_s)},
                 {"schedule", std::move(schedule)},
                 {"actuator", std::move(actuator)},
                 {"tune",
                  {{"every", FormatSeconds(s.tune.every_s)},
                   {"wait_p95", FormatSeconds(s.tune.wait_p95_s)},
                   {"window", FormatSeconds(s.tune.window_s)}}},
                 {"updated_ms", s.updated_ms}};
  return JsonText(o);
}

}  // namespace gpufleet
