#pragma once
// Alerting with Prometheus's semantics over the health model and the telemetry: rules turn
// conditions into alerts that go inactive -> pending (for `for`) -> firing -> resolved, with
// `keep_firing_for` against flapping. Two kinds of rule: health rules (built in) fire on the
// health model's reasons (an XID class, double-bit ECC, row-remap failure, a lost GPU, NVLink
// down, heat, throttling) and on unreachable nodes; expression rules fire on the series of a
// PromQL-like expression (expr.h), built in (latency, capacity) or written by users in
// Prometheus-format rule files. Pure logic on the evaluation time it is given; the Notifier
// delivers the changes.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "alerting/expr.h"
#include "health/health.h"

namespace gpufleet::alerting {

struct Rule {
  std::string name;   // the alertname, e.g. "GpuXidCritical"
  std::string group;  // "builtin", or the rule file's group
  bool builtin = false;
  bool enabled = true;  // a user rule `enabled: false` switches off the built-in of its name
  // A health rule: a health check ("xid", "ecc_dbe", ...) or "node_unreachable", and the level
  // that fires it: "failed", "warning" or "any".
  std::string check;
  std::string level;
  // An expression rule: the expression, and its parse (shared: rules are copied).
  std::string expr;
  std::shared_ptr<const Expr> parsed;
  std::string severity;  // "critical", "warning", "info"
  int64_t for_ms = 0;
  int64_t keep_firing_for_ms = 0;
  Labels labels;       // added to each alert's labels
  Labels annotations;  // templates: {{ $labels.Hostname }}, {{ $labels.gpu }}, {{ $value }}
};

// Checks a rule and parses its expression; errors name the rule and the field, which is also
// written to `failed_field` ("expr", "labels.severity", ...).
Status CheckRule(Rule& rule, std::string* failed_field = nullptr);

// The rules on by default.
const std::vector<Rule>& BuiltinRules();
// The base rules (the built-in ones) with the user's: a user rule replaces the base rule of its
// name, and a disabled one removes it.
std::vector<Rule> MergeRules(const std::vector<Rule>& base, const std::vector<Rule>& user);

// One condition that holds at an evaluation: a rule and the labels of what it is about.
struct Signal {
  std::string rule;
  Labels labels;
  std::string value;  // what {{ $value }} renders: the health reason's message, or a number
  std::string action;
};

// The signals the health rules see in the health reports.
std::vector<Signal> Signals(const std::vector<health::NodeHealth>& nodes,
                            const std::vector<Rule>& rules);

class Evaluator;
// How an expression rule's last evaluation went, as Prometheus's rule health.
struct RuleRun {
  std::string error;  // empty: ok
  double duration_ms = 0;
  size_t series = 0;  // how many series its expression gave
};
// The signals of the expression rules; each rule's run is written to `runs` by name.
std::vector<Signal> ExprSignals(const std::vector<Rule>& rules, Evaluator& evaluator,
                                std::map<std::string, RuleRun>* runs);
// "{{ $value }}" of a number: as Prometheus prints it (%g with enough digits).
std::string FormatValue(double v);

enum class State { kPending, kFiring, kResolved };
std::string_view ToString(State s);

struct Alert {
  std::string fingerprint;  // of the rule name and the labels
  std::string rule;
  Labels labels;       // rule name, severity and the signal's labels
  Labels annotations;  // summary, description, action
  std::string value;   // {{ $value }} when the annotations were rendered
  State state = State::kPending;
  int64_t active_since_ms = 0;  // when the condition began to hold
  int64_t fired_ms = 0;
  int64_t resolved_ms = 0;
  int64_t last_true_ms = 0;   // the last evaluation at which the condition held
  int64_t keep_since_ms = 0;  // the first evaluation without it, while kept firing; 0: none
};

// The order people read alerts in (GET /api/v1/alerts, the CLI and every page): firing, then
// pending, then resolved; within each, critical, warning, info, then any other severity; then
// the longest active first (resolved ones: the latest resolved first); then by fingerprint.
bool ReadBefore(const Alert& a, const Alert& b);

// "{{ $labels.Hostname }} GPU {{ $labels.gpu }}: {{ $value }}" -> text. Unknown labels render
// empty, as in Prometheus.
std::string Render(const std::string& tmpl, const Labels& labels, const std::string& value);

std::string Fingerprint(const Labels& labels);

class Engine {
 public:
  explicit Engine(std::vector<Rule> rules) : rules_(std::move(rules)) {}
  // A new rule set; the alerts of rules that left it resolve at the next evaluation.
  void SetRules(std::vector<Rule> rules) { rules_ = std::move(rules); }
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
