#pragma once
// Alert rule expressions: a subset of PromQL over gpufleet's data.
//
//   gpu_temp > 85                                       a field's latest value per GPU
//   max_over_time(gpu_temp{cluster="train"}[5m]) > 85   over a window (avg, min, max, sum, count)
//   increase(ecc_dbe_volatile[10m]) > 0                 counters: rate, increase, delta
//   avg by (pool) (avg_over_time(gpu_util[1h])) < 10    aggregations sum/avg/min/max/count by
//   fb_used / (fb_used + fb_free) > 0.95                arithmetic between vectors and numbers
//   count_over_time(xid_events{xid=~"79|94"}[10m]) > 0  events: XIDs in a window
//   sum by (cluster, pool) (gpu_available) < 2          health and capacity: gpu_health,
//   node_up == 0                                          gpu_healthy, gpu_available, node_up...
//
// Parse() checks the whole expression (names, functions, argument kinds, the labels of `by`)
// and errors name the position and the reason. What each name means is in metrics.h.
//
// The same engine answers the Prometheus query API (ParseQuery): there an expression may give a
// number (`1+1`), a matcher may name any label (a label a row lacks is ""), and it may use
// `offset`, `bool`, `without`, topk/bottomk/quantile, clamp_min/clamp_max/clamp/round, the
// unary math functions, label_replace and vector(). Rules may use them too; an alert rule
// must give a series. What PromQL has and this does not (subqueries, @, on/ignoring,
// group_left, histograms, most functions) is an error that names it.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "alerting/matcher.h"
#include "common/result.h"

namespace gpufleet::alerting {

enum class Op { kAdd, kSub, kMul, kDiv, kEq, kNe, kGt, kLt, kGe, kLe, kAnd, kOr, kUnless };
bool IsComparison(Op op);

struct Expr {
  enum class Kind { kNumber, kSelector, kCall, kAggregate, kBinary, kNegate };
  Kind kind = Kind::kNumber;
  double number = 0;                        // kNumber
  std::string name;                         // kSelector: metric; kCall/kAggregate: function
  std::vector<Matcher> matchers;            // kSelector
  int64_t range_ms = 0;                     // kSelector: [5m]; 0 for an instant selector
  int64_t offset_ms = 0;                    // kSelector: `offset 1h`
  std::vector<std::string> by;              // kAggregate: sorted, "node" spelled "Hostname"
  bool without = false;                     // kAggregate: `by` lists the labels dropped
  Op op = Op::kAdd;                         // kBinary
  bool return_bool = false;                 // kBinary: `> bool`, 0 or 1 instead of a filter
  std::vector<double> params;               // topk's k, quantile's q, clamp_min's bound, ...
  std::vector<std::string> strings;         // label_replace's dst, replacement, src, regex
  std::vector<std::unique_ptr<Expr>> args;  // kCall: 1; kAggregate: 1; kBinary: 2; kNegate: 1
  std::string key;      // canonical text: equal keys are equal expressions (a cycle's cache key)
  bool vector = false;  // false: a number
};

// Parses and checks a rule's expression, which must give a series; errors read
// "expr: at 14: unknown function 'avg_ovr_time'".
Result<std::unique_ptr<Expr>> ParseExpr(std::string_view text);
// A query's expression (the Prometheus API): it may give a number, and its matchers and
// groupings may name any label.
Result<std::unique_ptr<Expr>> ParseQuery(std::string_view text);

}  // namespace gpufleet::alerting
