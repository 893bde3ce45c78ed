#include "alerting/engine.h"

#include <algorithm>
#include <cassert>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <tuple>

#include "alerting/eval.h"

namespace gpufleet::alerting {

std::string_view ToString(State s) {
  switch (s) {
    case State::kPending:
      return "pending";
    case State::kFiring:
      return "firing";
    case State::kResolved:
      return "resolved";
  }
  return "pending";
}

bool ReadBefore(const Alert& a, const Alert& b) {
  auto state = [](const Alert& x) {
    return x.state == State::kFiring ? 0 : x.state == State::kPending ? 1 : 2;
  };
  auto severity = [](const Alert& x) {
    auto it = x.labels.find("severity");
    if (it == x.labels.end()) return 3;
    return it->second == "critical"  ? 0
           : it->second == "warning" ? 1
           : it->second == "info"    ? 2
                                     : 3;
  };
  // Smaller first: active since longer; resolved more recently.
  auto age = [](const Alert& x) {
    return x.state == State::kResolved ? -x.resolved_ms : x.active_since_ms;
  };
  return std::tuple(state(a), severity(a), age(a), a.fingerprint) <
         std::tuple(state(b), severity(b), age(b), b.fingerprint);
}

namespace {

Rule HealthRule(const char* name, const char* check, const char* level, const char* severity,
                int64_t for_ms, int64_t keep_ms, const char* summary) {
  Rule r;
  r.name = name;
  r.group = "builtin";
  r.builtin = true;
  r.check = check;
  r.level = level;
  r.severity = severity;
  r.for_ms = for_ms;
  r.keep_firing_for_ms = keep_ms;
  r.annotations = {{"summary", summary}};
  return r;
}

Rule ExprRule(const char* name, const char* expr, const char* severity, int64_t for_ms,
              const char* summary) {
  Rule r;
  r.name = name;
  r.group = "builtin";
  r.builtin = true;
  r.expr = expr;
  r.severity = severity;
  r.for_ms = for_ms;
  r.annotations = {{"summary", summary}};
  auto parsed = ParseExpr(r.expr);
  assert(parsed.ok());  // built in: tested
  r.parsed = std::move(parsed.value());
  return r;
}

bool IsName(const std::string& s) {
  if (s.empty() || s.size() > 128 || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

// The templates Render knows: {{ $value }} and {{ $labels.NAME }}.
Status CheckTemplate(const std::string& tmpl) {
  size_t i = 0;
  while ((i = tmpl.find("{{", i)) != std::string::npos) {
    size_t close = tmpl.find("}}", i);
    if (close == std::string::npos) {
      return MakeError(ErrorCode::kInvalidArgument, "'{{' is not closed");
    }
    std::string e = tmpl.substr(i + 2, close - i - 2);
    size_t a = e.find_first_not_of(' '), b = e.find_last_not_of(' ');
    e = a == std::string::npos ? "" : e.substr(a, b - a + 1);
    if (e != "$value" && !(e.rfind("$labels.", 0) == 0 && IsName(e.substr(8)))) {
      return MakeError(ErrorCode::kInvalidArgument, "'{{ " + e +
                                                        " }}' is not a template gpufleet knows "
                                                        "({{ $value }} or {{ $labels.NAME }})");
    }
    i = close + 2;
  }
  return {};
}

}  // namespace

const std::vector<Rule>& BuiltinRules() {
  static const char* kGpu = "{{ $labels.Hostname }} GPU {{ $labels.gpu }}: {{ $value }}";
  static const std::vector<Rule> kRules = {
      HealthRule("GpuXidCritical", "xid", "failed", "critical", 0, 0, kGpu),
      HealthRule("GpuXidWarning", "xid", "warning", "warning", 0, 0, kGpu),
      HealthRule("GpuDoubleBitEcc", "ecc_dbe", "failed", "critical", 0, 0, kGpu),
      HealthRule("GpuRowRemapFailure", "row_remap", "failed", "critical", 0, 0, kGpu),
      HealthRule("GpuLost", "nvml", "failed", "critical", 0, 0, kGpu),
      HealthRule("GpuNvlinkDown", "nvlink", "failed", "critical", 60'000, 0, kGpu),
      HealthRule("GpuOverheating", "temperature", "failed", "critical", 60'000, 300'000, kGpu),
      HealthRule("GpuRunningHot", "temperature", "warning", "warning", 300'000, 300'000, kGpu),
      HealthRule("GpuThrottled", "throttle", "warning", "warning", 300'000, 300'000, kGpu),
      HealthRule("GpuPcieReplays", "pcie", "warning", "warning", 300'000, 0, kGpu),
      HealthRule("NodeUnreachable", "node_unreachable", "any", "critical", 60'000, 0,
                 "{{ $labels.Hostname }} is unreachable: {{ $value }}"),
      // Latency: a node whose reports arrive late, before it counts as unreachable; a slow API.
      ExprRule("NodeReportsLate", "node_report_age_seconds > 10 and node_up == 1", "warning",
               30'000, "{{ $labels.Hostname }} last reported {{ $value }} s ago"),
      ExprRule("ApiLatencyHigh", "api_request_duration_p99_seconds > 1", "warning", 300'000,
               "The API's p99 request duration is {{ $value }} s"),
      // Rollouts: one that halted or rolled back, and each node that failed its update.
      ExprRule("RolloutHalted", "rollouts_halted > 0", "critical", 0,
               "{{ $value }} rollout(s) halted or rolled back: gpufleet rollouts list"),
      ExprRule("RolloutNodeFailed", "node_rollout_failed == 1", "warning", 0,
               "{{ $labels.Hostname }} failed its update in a rollout"),
      // Security: a node exposed to a published CVE at or above CVSS 9.0 (critical). Another
      // threshold: a rule of the same name in your rules file replaces this one.
      ExprRule("NodeCriticalCve", "node_cve_max_cvss >= 9", "critical", 0,
               "{{ $labels.Hostname }} is exposed to a CVE of CVSS {{ $value }}: gpufleet vulns "
               "show {{ $labels.Hostname }}"),
      // Drift from the golden profile: a node that differs for 30 minutes (a rollout on its way
      // passes through), and sooner and louder when the difference is high or critical.
      // One alert per node at its highest severity: NodeDrift yields to NodeDriftHigh.
      ExprRule("NodeDrift", "node_drift_severity >= 1 unless node_drift_severity >= 3", "info",
               1'800'000,
               "{{ $labels.Hostname }} differs from its profile: gpufleet drift list --node "
               "{{ $labels.Hostname }}"),
      ExprRule("NodeDriftHigh", "node_drift_severity >= 3", "warning", 600'000,
               "{{ $labels.Hostname }} has high or critical drift from its profile: gpufleet "
               "drift list --node {{ $labels.Hostname }}"),
      // Capacity: a pool with no GPU a job could use, or with a tenth of its GPUs unhealthy.
      ExprRule("PoolNoAvailableGpus", "sum by (cluster, pool) (gpu_available) == 0", "critical",
               300'000, "{{ $labels.cluster }}/{{ $labels.pool }} has no available GPU"),
      // Allocation: jobs waiting while the pool has no GPU free for them, and long waits.
      ExprRule("PoolNoFreeGpus", "pool_queued_jobs > 0 and pool_free_gpus == 0", "warning", 900'000,
               "{{ $labels.pool }} has had no free GPU for 15 minutes while jobs wait "
               "({{ $value }} queued)"),
      ExprRule("PoolQueueWaitHigh", "pool_queue_wait_p95_seconds > 1800", "warning", 600'000,
               "{{ $labels.pool }}: the p95 queue wait of the last hour is {{ $value }} s"),
      ExprRule(
          "PoolDegraded", "avg by (cluster, pool) (gpu_healthy) < 0.9", "warning", 600'000,
          "{{ $labels.cluster }}/{{ $labels.pool }}: only {{ $value }} of its GPUs are healthy"),
  };
  return kRules;
}

std::vector<Rule> MergeRules(const std::vector<Rule>& base, const std::vector<Rule>& user) {
  std::map<std::string, const Rule*> by_name;
  for (const auto& r : user) by_name[r.name] = &r;
  std::vector<Rule> out;
  for (const auto& b : base) {
    auto it = by_name.find(b.name);
    if (it == by_name.end()) out.push_back(b);
  }
  for (const auto& r : user) {
    if (r.enabled) out.push_back(r);
  }
  return out;
}

Status CheckRule(Rule& rule, std::string* failed_field) {
  auto fail = [&](const std::string& field, const std::string& why) {
    if (failed_field) *failed_field = field;
    return MakeError(ErrorCode::kInvalidArgument,
                     "rule '" + rule.name + "': " + field + ": " + why);
  };
  if (!IsName(rule.name)) {
    return fail("alert", "must be 1-128 letters, digits or '_', not starting with a digit");
  }
  if (!rule.enabled) {
    if (!rule.expr.empty()) return fail("enabled", "a disabled rule has no expr");
    return {};
  }
  if (rule.expr.empty()) return fail("expr", "is required");
  auto parsed = ParseExpr(rule.expr);
  if (!parsed.ok()) return fail("expr", parsed.error().message.substr(6));  // "expr: " prefix
  rule.parsed = std::move(parsed.value());
  if (auto it = rule.labels.find("severity"); it != rule.labels.end()) {
    rule.severity = it->second;
    rule.labels.erase(it);
  }
  if (rule.severity.empty()) rule.severity = "warning";
  if (rule.severity != "critical" && rule.severity != "warning" && rule.severity != "info") {
    return fail("labels.severity", "'" + rule.severity + "' is not critical, warning or info");
  }
  if (rule.for_ms < 0) return fail("for", "must not be negative");
  if (rule.keep_firing_for_ms < 0) return fail("keep_firing_for", "must not be negative");
  for (const auto& [k, v] : rule.labels) {
    if (!IsName(k)) return fail("labels." + k, "is not a label name");
    if (k == "alertname") return fail("labels.alertname", "is the rule's name: set `alert`");
  }
  for (const auto& [k, v] : rule.annotations) {
    if (!IsName(k)) return fail("annotations." + k, "is not an annotation name");
    if (auto s = CheckTemplate(v); !s.ok()) return fail("annotations." + k, s.error().message);
  }
  if (!rule.annotations.count("summary")) {
    rule.annotations["summary"] = rule.name + ": {{ $value }}";
  }
  return {};
}

std::vector<Signal> Signals(const std::vector<health::NodeHealth>& nodes,
                            const std::vector<Rule>& rules) {
  std::vector<Signal> out;
  for (const auto& n : nodes) {
    if (LeftFleet(n.state)) continue;  // decommissioning or retired: nothing to alert on
    Labels base{{"Hostname", n.node}, {"cluster", n.cluster}, {"pool", n.pool}};
    for (const auto& rule : rules) {
      if (rule.check.empty()) continue;  // an expression rule
      if (rule.check == "node_unreachable") {
        if (!n.reachable) out.push_back({rule.name, base, n.reasons.front(), "none"});
        continue;
      }
      for (const auto& g : n.gpus) {
        for (const auto& r : g.reasons) {
          if (r.check != rule.check) continue;
          if (rule.level != "any" && health::ToString(r.level) != rule.level) continue;
          Labels labels = base;
          labels["gpu"] = std::to_string(g.index);
          labels["UUID"] = g.uuid;
          out.push_back({rule.name, std::move(labels), r.message, r.action});
          break;  // one alert per rule and GPU
        }
      }
    }
  }
  return out;
}

std::string FormatValue(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::vector<Signal> ExprSignals(const std::vector<Rule>& rules, Evaluator& evaluator,
                                std::map<std::string, RuleRun>* runs) {
  std::vector<Signal> out;
  for (const auto& rule : rules) {
    if (!rule.parsed) continue;
    auto start = std::chrono::steady_clock::now();
    auto samples = evaluator.Run(*rule.parsed);
    RuleRun run;
    if (!samples.ok()) {
      run.error = samples.error().message;
    } else {
      run.series = samples->size();
      for (auto& s : samples.value()) {
        Labels labels = std::move(s.labels);
        for (const auto& [k, v] : rule.labels) labels[k] = v;
        out.push_back({rule.name, std::move(labels), FormatValue(s.value), ""});
      }
    }
    run.duration_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (runs) (*runs)[rule.name] = std::move(run);
  }
  return out;
}

std::string Render(const std::string& tmpl, const Labels& labels, const std::string& value) {
  std::string out;
  size_t i = 0;
  while (i < tmpl.size()) {
    size_t open = tmpl.find("{{", i);
    if (open == std::string::npos) break;
    size_t close = tmpl.find("}}", open);
    if (close == std::string::npos) break;
    out.append(tmpl, i, open - i);
    std::string expr = tmpl.substr(open + 2, close - open - 2);
    auto trim = [](std::string s) {
      size_t a = s.find_first_not_of(' '), b = s.find_last_not_of(' ');
      return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
    };
    expr = trim(expr);
    if (expr == "$value") {
      out += value;
    } else if (expr.rfind("$labels.", 0) == 0) {
      auto it = labels.find(expr.substr(8));
      if (it != labels.end()) out += it->second;
    } else {
      out.append(tmpl, open, close + 2 - open);  // not a template we know: left as written
    }
    i = close + 2;
  }
  out.append(tmpl, i, std::string::npos);
  return out;
}

// FNV-1a, 64 bits, over the sorted labels: stable across runs and builds (fingerprints are
// stored), and cheap enough for every signal of every cycle.
std::string Fingerprint(const Labels& labels) {
  uint64_t h = 1469598103934665603ULL;
  auto mix = [&](std::string_view s, char end) {
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
    h = (h ^ static_cast<unsigned char>(end)) * 1099511628211ULL;
  };
  for (const auto& [k, v] : labels) {
    mix(k, '\x1f');
    mix(v, '\x1e');
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

const Rule* Engine::Find(const std::string& name) const {
  for (const auto& r : rules_) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

std::vector<Alert> Engine::Evaluate(int64_t now, const std::vector<Signal>& signals) {
  std::vector<Alert> changed;
  std::map<std::string, bool> seen;
  for (const auto& s : signals) {
    const Rule* rule = Find(s.rule);
    if (!rule) continue;
    Labels labels = s.labels;
    labels["alertname"] = rule->name;
    labels["severity"] = rule->severity;
    std::string fp = Fingerprint(labels);
    seen[fp] = true;
    auto [it, fresh] = alerts_.try_emplace(fp);
    Alert& a = it->second;
    if (fresh || a.state == State::kResolved) {
      a = Alert{};
      a.fingerprint = fp;
      a.rule = rule->name;
      a.labels = labels;
      a.state = State::kPending;
      a.active_since_ms = now;
    }
    a.last_true_ms = now;
    a.keep_since_ms = 0;
    if (a.annotations.empty() || a.value != s.value) {
      a.value = s.value;
      a.annotations.clear();
      for (const auto& [k, tmpl] : rule->annotations)
        a.annotations[k] = Render(tmpl, labels, s.value);
      if (!rule->check.empty()) {  // a health rule: the reason and what to do about it
        a.annotations["description"] = s.value;
        a.annotations["action"] = s.action;
      }
    }
    if (a.state == State::kPending && now - a.active_since_ms >= rule->for_ms) {
      a.state = State::kFiring;
      a.fired_ms = now;
      changed.push_back(a);
    }
  }
  for (auto it = alerts_.begin(); it != alerts_.end();) {
    Alert& a = it->second;
    if (seen.count(it->first)) {
      ++it;
      continue;
    }
    const Rule* rule = Find(a.rule);
    int64_t keep = rule ? rule->keep_firing_for_ms : 0;
    if (a.state == State::kPending) {
      it = alerts_.erase(it);  // never fired: nothing to tell anyone
      continue;
    }
    // As Prometheus: kept firing while less than keep_firing_for has passed since the first
    // evaluation at which the condition no longer held.
    if (a.state == State::kFiring) {
      if (a.keep_since_ms == 0) a.keep_since_ms = now;
      if (now - a.keep_since_ms >= keep) {
        a.state = State::kResolved;
        a.resolved_ms = now;
        changed.push_back(a);
      }
    }
    if (a.state == State::kResolved && now - a.resolved_ms > 3'600'000) {
      it = alerts_.erase(it);
      continue;
    }
    ++it;
  }
  return changed;
}

std::vector<Alert> Engine::Alerts() const {
  std::vector<Alert> out;
  for (const auto& [_, a] : alerts_) out.push_back(a);
  return out;
}

void Engine::Restore(const std::vector<Alert>& alerts) {
  for (const auto& a : alerts) alerts_[a.fingerprint] = a;
}

}  // namespace gpufleet::alerting
