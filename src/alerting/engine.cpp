#include "alerting/engine.h"

#include <cstdio>

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

const std::vector<Rule>& BuiltinRules() {
  static const std::vector<Rule> kRules = {
      {"GpuXidCritical", "xid", "failed", "critical", 0, 0,
       "{{ $labels.Hostname }} GPU {{ $labels.gpu }}: {{ $value }}"},
      {"GpuXidWarning", "xid", "warning", "warning", 0, 0,
       "{{ $labels.Hostname }} GPU {{ $labels.gpu }}: {{ $value }}"},
      {"GpuDoubleBitEcc", "ecc_dbe", "failed", "critical", 0, 0,
       "{{ $labels.Hostname }} GPU {{ $labels.gpu }}: {{ $value }}"},
      {"GpuRowRemapFailure", "row_remap", "failed", "critical", 0, 0,
       "{{ $labels.Hostname }} GPU {{ $labels.gpu }}: {{ $value }}"},
      {"GpuLost", "nvml", "failed", "critical", 0, 0,
       "{{ $labels.Hostname }} GPU {{ $labels.gpu }}: {{ $value }}"},
      {"GpuNvlinkDown", "nvlink", "failed", "critical", 60'000, 0,
       "{{ $labels.Hostname }} GPU {{ $labels.gpu }}: {{ $value }}"},
      {"GpuOverheating", "temperature", "failed", "critical", 60'000, 300'000,
       "{{ $labels.Hostname }} GPU {{ $labels.gpu }}: {{ $value }}"},
      {"GpuRunningHot", "temperature", "warning", "warning", 300'000, 300'000,
       "{{ $labels.Hostname }} GPU {{ $labels.gpu }}: {{ $value }}"},
      {"GpuThrottled", "throttle", "warning", "warning", 300'000, 300'000,
       "{{ $labels.Hostname }} GPU {{ $labels.gpu }}: {{ $value }}"},
      {"GpuPcieReplays", "pcie", "warning", "warning", 300'000, 0,
       "{{ $labels.Hostname }} GPU {{ $labels.gpu }}: {{ $value }}"},
      {"NodeUnreachable", "node_unreachable", "any", "critical", 60'000, 0,
       "{{ $labels.Hostname }} is unreachable: {{ $value }}"},
  };
  return kRules;
}

std::vector<Signal> Signals(const std::vector<health::NodeHealth>& nodes,
                            const std::vector<Rule>& rules) {
  std::vector<Signal> out;
  for (const auto& n : nodes) {
    Labels base{{"Hostname", n.node}, {"cluster", n.cluster}, {"pool", n.pool}};
    for (const auto& rule : rules) {
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
    auto description = a.annotations.find("description");
    if (description == a.annotations.end() || description->second != s.value) {
      a.annotations = {{"summary", Render(rule->summary, labels, s.value)},
                       {"description", s.value},
                       {"action", s.action}};
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
