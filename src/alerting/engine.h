#pragma once
// Alerting with Prometheus's semantics over the health model: built-in rules turn health
// reasons (an XID class, double-bit ECC, row-remap failure, a lost GPU, NVLink down, heat,
// throttling) and unreachable nodes into alerts that go inactive -> pending (for `for`) ->
// firing -> resolved, with `keep_firing_for` against flapping. Pure logic on the evaluation
// time it is given; the Notifier delivers the changes.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "health/health.h"

namespace gpufleet::alerting {

struct Rule {
  std::string name;      // the alertname, e.g. "GpuXidCritical"
  std::string check;     // a health check ("xid", "ecc_dbe", ...) or "node_unreachable"
  std::string level;     // the health level that fires it: "failed", "warning" or "any"
  std::string severity;  // "critical", "warning", "info"
  int64_t for_ms = 0;
  int64_t keep_firing_for_ms = 0;
  std::string summary;  // a template: {{ $labels.Hostname }}, {{ $labels.gpu }}, {{ $value }}
};

// The rules on by default.
const std::vector<Rule>& BuiltinRules();

// One condition that holds at an evaluation: a rule and the labels of what it is about.
struct Signal {
  std::string rule;
  Labels labels;
  std::string value;  // what {{ $value }} renders: the health reason's message
  std::string action;
};

// The signals the rules see in the health reports.
std::vector<Signal> Signals(const std::vector<health::NodeHealth>& nodes,
                            const std::vector<Rule>& rules);

enum class State { kPending, kFiring, kResolved };
std::string_view ToString(State s);

struct Alert {
  std::string fingerprint;  // of the rule name and the labels
  std::string rule;
  Labels labels;       // rule name, severity and the signal's labels
  Labels annotations;  // summary, description, action
  State state = State::kPending;
  int64_t active_since_ms = 0;  // when the condition began to hold
  int64_t fired_ms = 0;
  int64_t resolved_ms = 0;
  int64_t last_true_ms = 0;   // the last evaluation at which the condition held
  int64_t keep_since_ms = 0;  // the first evaluation without it, while kept firing; 0: none
};

// "{{ $labels.Hostname }} GPU {{ $labels.gpu }}: {{ $value }}" -> text. Unknown labels render
// empty, as in Prometheus.
std::string Render(const std::string& tmpl, const Labels& labels, const std::string& value);

std::string Fingerprint(const Labels& labels);

class Engine {
 public:
  explicit Engine(std::vector<Rule> rules) : rules_(std::move(rules)) {}
  // One evaluation at `now`. Returns the alerts that changed to firing or resolved: what is
  // notified. Pending alerts whose condition goes away are dropped without a notification.
  std::vector<Alert> Evaluate(int64_t now, const std::vector<Signal>& signals);
  // Pending and firing alerts, and those resolved within the last hour.
  std::vector<Alert> Alerts() const;
  // Puts back the alerts of an earlier run (after a restart), so that nothing fires twice.
  void Restore(const std::vector<Alert>& alerts);
  const std::vector<Rule>& rules() const { return rules_; }

 private:
  const Rule* Find(const std::string& name) const;
  std::vector<Rule> rules_;
  std::map<std::string, Alert> alerts_;  // by fingerprint
};

}  // namespace gpufleet::alerting
