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
  std::vector<std::string> by;              // kAggregate: sorted, "node" spelled "Hostname"
  Op op = Op::kAdd;                         // kBinary
  std::vector<std::unique_ptr<Expr>> args;  // kCall: 1; kAggregate: 1; kBinary: 2; kNegate: 1
  std::string key;      // canonical text: equal keys are equal expressions (a cycle's cache key)
  bool vector = false;  // false: a number
};

// Parses and checks an expression; errors read "expr: at 14: unknown function 'avg_ovr_time'".
Result<std::unique_ptr<Expr>> ParseExpr(std::string_view text);

}  // namespace gpufleet::alerting
