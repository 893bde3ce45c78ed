#include "alerting/eval.h"

#include <algorithm>
#include <optional>

#include "alerting/eval_parts.h"
#include "alerting/expr_lex.h"
#include "alerting/metrics.h"
#include "common/pattern.h"

namespace gpufleet::alerting {
namespace {

int SpaceOf(RowKind kind) {
  switch (kind) {
    case RowKind::kGpu:
      return kGpuSpace;
    case RowKind::kNode:
      return kNodeSpace;
    case RowKind::kPool:
      return kPoolSpace;
    case RowKind::kController:
      return kControllerSpace;
  }
  return kGpuSpace;
}

}  // namespace

Evaluator::Evaluator(const Snapshot& snap, SeriesReader& reader, EvalOptions options)
    : snap_(snap), reader_(reader), options_(options), now_(snap.now_ms) {}

void Evaluator::SetTime(int64_t at_ms) {
  now_ = at_ms;
  cache_.clear();
  latest_.clear();
}
Evaluator::~Evaluator() = default;

size_t Evaluator::Rows(int space) const {
  switch (space) {
    case kGpuSpace:
      return snap_.gpus.size();
    case kNodeSpace:
      return snap_.nodes.size();
    case kControllerSpace:
      return 1;
    case kPoolSpace:
      return snap_.pool_rows.size();
    default:
      return spaces_[static_cast<size_t>(space)]->groups.size();
  }
}

std::string_view Evaluator::Label(int space, size_t row, std::string_view name) const {
  if (space == kGpuSpace) {
    const auto& g = snap_.gpus[row];
    const auto& n = snap_.nodes[g.node];
    if (name == "Hostname") return n.name;
    if (name == "cluster") return snap_.clusters[n.cluster];
    if (name == "pool") return snap_.pools[n.pool];
    if (name == "gpu") return g.gpu;
    if (name == "UUID") return g.uuid;
    if (name == "modelName") return snap_.models[g.model];
    if (name == "team") return TeamOfPool(n.pool);
    if (name == "pci_bus_id") return g.pci_bus_id;
    if (name == "device") return g.device;
    return {};
  }
  if (space == kNodeSpace) {
    const auto& n = snap_.nodes[row];
    if (name == "Hostname") return n.name;
    if (name == "cluster") return snap_.clusters[n.cluster];
    if (name == "pool") return snap_.pools[n.pool];
    if (name == "team") return TeamOfPool(n.pool);
    return {};
  }
  if (space == kPoolSpace) {
    const auto& p = snap_.pool_rows[row];
    if (name == "cluster") return snap_.clusters[p.cluster];
    if (name == "pool") return snap_.pools[p.pool];
    if (name == "team") return TeamOfPool(p.pool);
    return {};
  }
  if (space == kControllerSpace) return {};
  const Labels& l = spaces_[static_cast<size_t>(space)]->groups[row];
  auto it = l.find(std::string(name));
  return it == l.end() ? std::string_view() : std::string_view(it->second);
}

std::string_view Evaluator::TeamOfPool(uint32_t pool) const {
  return pool < snap_.pool_teams.size() ? std::string_view(snap_.pool_teams[pool])
                                        : std::string_view();
}

Labels Evaluator::LabelsOf(int space, size_t row) const {
  if (space >= 0) return spaces_[static_cast<size_t>(space)]->groups[row];
  Labels out;
  RowKind kind = space == kGpuSpace    ? RowKind::kGpu
                 : space == kNodeSpace ? RowKind::kNode
                 : space == kPoolSpace ? RowKind::kPool
                                       : RowKind::kController;
  for (auto name : RowLabels(kind)) {
    auto v = Label(space, row, name);
    if (!v.empty()) out.emplace(std::string(name), std::string(v));
  }
  if (options_.prometheus && kind == RowKind::kGpu) {
    for (std::string_view name : {"pci_bus_id", "device"}) {
      auto v = Label(space, row, name);
      if (!v.empty()) out.emplace(std::string(name), std::string(v));
    }
  }
  return out;
}

bool Evaluator::FactsVisible(int64_t at_ms) const {
  int64_t facts = snap_.facts_ms ? snap_.facts_ms : snap_.now_ms;
  return at_ms > facts - kStalenessMs && at_ms < facts + kStalenessMs;
}

void SeriesReader::LatestAt(const Snapshot& snap, Field field, int64_t at_ms,
                            const std::vector<char>* /*rows*/, std::vector<double>& out) {
  Latest(snap, field, at_ms - kStalenessMs, out);
}

const std::vector<double>& Evaluator::LatestOf(Field field, int64_t at_ms, const Expr& selector,
                                               const std::vector<char>& mask) {
  std::tuple<Field, int64_t, std::string> key{field, at_ms,
                                              reader_.ReadsAllRows() ? "" : selector.key};
  auto it = latest_.find(key);
  if (it != latest_.end()) return it->second;
  auto& out = latest_[key];
  reader_.LatestAt(snap_, field, at_ms, &mask, out);
  out.resize(snap_.gpus.size(), NAN);
  return out;
}

// The rows a selector's matchers keep. Labels shared by many rows (cluster, pool, Hostname,
// modelName) are matched once per distinct value.
const std::vector<char>& Evaluator::Mask(const Expr& selector, int space) {
  std::string key = std::to_string(space) + selector.key;
  if (auto it = masks_.find(key); it != masks_.end()) return it->second;
  size_t rows = Rows(space);
  std::vector<char> mask(rows, 1);
  for (const auto& m : selector.matchers) {
    if (m.name == "xid" || m.name == "severity" || m.name == "action") continue;  // events
    std::optional<Pattern> re = PatternOf(m);
    // cluster, pool and modelName: match each distinct value once, then look rows up by id.
    const std::vector<std::string>* table = m.name == "cluster"     ? &snap_.clusters
                                            : m.name == "pool"      ? &snap_.pools
                                            : m.name == "modelName" ? &snap_.models
                                                                    : nullptr;
    if (table && (space == kGpuSpace || (space == kNodeSpace && m.name != "modelName"))) {
      std::vector<char> hit(table->size());
      for (size_t i = 0; i < table->size(); ++i) {
        hit[i] = Matches(m, re ? &*re : nullptr, (*table)[i]) ? 1 : 0;
      }
      for (size_t r = 0; r < rows; ++r) {
        if (!mask[r]) continue;
        const auto& node = snap_.nodes[space == kGpuSpace ? snap_.gpus[r].node : r];
        uint32_t id = m.name == "cluster" ? node.cluster
                      : m.name == "pool"  ? node.pool
                                          : snap_.gpus[r].model;
        mask[r] = hit[id];
      }
      continue;
    }
    std::unordered_map<std::string_view, char> memo;
    for (size_t r = 0; r < rows; ++r) {
      if (!mask[r]) continue;
      auto value = Label(space, r, m.name);
      auto [it, fresh] = memo.try_emplace(value, 0);
      if (fresh) it->second = Matches(m, re ? &*re : nullptr, value) ? 1 : 0;
      mask[r] = it->second;
    }
  }
  return masks_[key] = std::move(mask);
}

Result<std::shared_ptr<const Evaluator::Vec>> Evaluator::Eval(const Expr& e) {
  if (auto it = cache_.find(e.key); it != cache_.end()) return it->second;
  auto v = Compute(e);
  if (!v.ok()) return v;
  cache_[e.key] = v.value();
  return v;
}

Result<std::shared_ptr<const Evaluator::Vec>> Evaluator::Compute(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::kSelector:
      return Select(e);
    case Expr::Kind::kCall:
      if (e.args.empty() || (e.args[0]->kind == Expr::Kind::kSelector && e.args[0]->range_ms)) {
        return e.args.empty() ? Instant(e) : RangeCall(e);
      }
      return e.name == "label_replace" ? LabelReplace(e) : Instant(e);
    case Expr::Kind::kAggregate:
      return Aggregate(e);
    case Expr::Kind::kBinary:
      return Binary(e);
    case Expr::Kind::kNegate: {
      auto in = Eval(*e.args[0]);
      if (!in.ok()) return in;
      auto out = std::make_shared<Vec>(*in.value());
      for (double& x : out->v) x = -x;
      out->name.clear();
      return std::shared_ptr<const Vec>(out);
    }
    case Expr::Kind::kNumber:
      break;
  }
  return MakeError(ErrorCode::kInternal, "a number where a series was expected");
}

// Row `r` of `metric`: its latest sample scaled, or the fact the snapshot holds for it.
double Evaluator::RowValue(const MetricDef& metric, size_t r, const std::vector<double>* latest,
                           const std::unordered_map<std::string, double>* node_input) const {
  double v = NAN;
  switch (metric.special) {
    case Special::kNone:
      v = (*latest)[r] * metric.scale;
      break;
    case Special::kGpuHealth:
      v = snap_.gpus[r].health;
      break;
    case Special::kGpuHealthy:
      v = snap_.gpus[r].health == 0 ? 1 : 0;
      break;
    case Special::kGpuAvailable: {
      const auto& n = snap_.nodes[snap_.gpus[r].node];
      v = snap_.gpus[r].health == 0 && n.up && !n.cordoned && n.health != 2 ? 1 : 0;
      break;
    }
    case Special::kNodeUp:
      v = snap_.nodes[r].up ? 1 : 0;
      break;
    case Special::kNodeHealth:
      v = snap_.nodes[r].health;
      break;
    case Special::kNodeCordoned:
      v = snap_.nodes[r].cordoned ? 1 : 0;
      break;
    case Special::kNodeReportAge:
      if (snap_.nodes[r].last_seen_ms > 0) {
        v = static_cast<double>(now_ - snap_.nodes[r].last_seen_ms) / 1000.0;
      }
      break;
    case Special::kNodeInput: {
      v = 0;
      if (!node_input) break;
      auto it = node_input->find(snap_.nodes[r].name);
      if (it != node_input->end()) v = it->second;
      break;
    }
    case Special::kPoolFreeGpus:
      v = snap_.pool_rows[r].free_gpus;
      break;
    case Special::kPoolAllocatedGpus:
      v = snap_.pool_rows[r].allocated_gpus;
      break;
    case Special::kPoolQueuedJobs:
      v = snap_.pool_rows[r].queued_jobs;
      break;
    case Special::kPoolQueueWaitP95:
      v = snap_.pool_rows[r].queue_wait_p95_s;
      break;
    case Special::kApiP99:
      v = snap_.api_p99_s;
      break;
    case Special::kControllerInput: {
      auto it = snap_.controller_inputs.find(metric.name);
      v = it == snap_.controller_inputs.end() ? 0 : it->second;
      break;
    }
    case Special::kXidEvents:
      break;  // a range: counted by RangeCall
  }
  return v;
}

Result<std::shared_ptr<const Evaluator::Vec>> Evaluator::Select(const Expr& e) {
  auto metric = FindMetric(e.name);
  if (!metric) return MakeError(ErrorCode::kInvalidArgument, "unknown metric '" + e.name + "'");
  auto out = std::make_shared<Vec>();
  out->space = SpaceOf(metric->rows);
  out->name = e.name;
  size_t rows = Rows(out->space);
  out->v.assign(rows, NAN);
  const int64_t at = now_ - e.offset_ms;
  // The facts of the health model and the registry have no history.
  if (metric->special != Special::kNone && !FactsVisible(at)) {
    return std::shared_ptr<const Vec>(out);
  }
  const auto& mask = Mask(e, out->space);
  const std::vector<double>* latest =
      metric->special == Special::kNone ? &LatestOf(metric->field, at, e, mask) : nullptr;
  const std::unordered_map<std::string, double>* node_input = nullptr;
  if (metric->special == Special::kNodeInput) {
    auto it = snap_.node_inputs.find(metric->name);
    if (it != snap_.node_inputs.end()) node_input = &it->second;
  }
  for (size_t r = 0; r < rows; ++r) {
    if (!mask[r]) continue;
    out->v[r] = RowValue(*metric, r, latest, node_input);
  }
  return std::shared_ptr<const Vec>(out);
}

namespace {

// One row of a binary operation: NaN means no row in the result.
double Apply(Op op, double a, double b, bool a_is_series, bool return_bool) {
  if (std::isnan(a) || std::isnan(b)) return NAN;
  if (IsComparison(op)) {
    if (return_bool) return detail::Fold(op, a, b);
    return detail::Fold(op, a, b) != 0 ? (a_is_series ? a : b) : NAN;
  }
  return detail::Fold(op, a, b);
}

// PromQL keeps the metric's name through a filter (a comparison without bool) and a set
// operation, and drops it otherwise.
bool KeepsName(const Expr& e) {
  return (IsComparison(e.op) && !e.return_bool) || e.op == Op::kAnd || e.op == Op::kOr ||
         e.op == Op::kUnless;
}

}  // namespace

Result<std::shared_ptr<const Evaluator::Vec>> Evaluator::Binary(const Expr& e) {
  const Expr& l = *e.args[0];
  const Expr& r = *e.args[1];
  if (!l.vector || !r.vector) {  // a series and a number
    const Expr& series = l.vector ? l : r;
    double number = l.vector ? r.number : l.number;
    auto in = Eval(series);
    if (!in.ok()) return in;
    auto out = std::make_shared<Vec>(*in.value());
    for (double& x : out->v) {
      x = l.vector ? Apply(e.op, x, number, true, e.return_bool)
                   : Apply(e.op, number, x, false, e.return_bool);
    }
    if (!KeepsName(e)) out->name.clear();
    return std::shared_ptr<const Vec>(out);
  }
  auto lv_r = Eval(l);
  if (!lv_r.ok()) return lv_r;
  auto rv_r = Eval(r);
  if (!rv_r.ok()) return rv_r;
  const Vec& lv = *lv_r.value();
  const Vec& rv = *rv_r.value();
  // The right side's value for each row of the left: the same row when both sides have the
  // same rows, else the row with the same labels (one-to-one matching, as PromQL's default).
  std::vector<double> right;
  if (lv.space == rv.space) {
    right = rv.v;
  } else {
    if (e.op == Op::kOr) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "expr: both sides of 'or' must have the same labels: group them alike");
    }
    std::map<Labels, double> by_labels;
    for (size_t i = 0; i < rv.v.size(); ++i) {
      if (std::isnan(rv.v[i])) continue;
      auto [it, fresh] = by_labels.emplace(LabelsOf(rv.space, i), rv.v[i]);
      if (!fresh) {
        return MakeError(ErrorCode::kInvalidArgument,
                         "expr: the right side of '" + r.key + "' has several series per labels");
      }
    }
    right.assign(lv.v.size(), NAN);
    for (size_t i = 0; i < lv.v.size(); ++i) {
      if (std::isnan(lv.v[i])) continue;
      auto it = by_labels.find(LabelsOf(lv.space, i));
      if (it != by_labels.end()) right[i] = it->second;
    }
  }
  auto out = std::make_shared<Vec>();
  out->space = lv.space;
  if (KeepsName(e)) out->name = lv.name;
  out->v.resize(lv.v.size());
  for (size_t i = 0; i < lv.v.size(); ++i) {
    double a = lv.v[i], b = right[i];
    switch (e.op) {
      case Op::kAnd:
        out->v[i] = std::isnan(b) ? NAN : a;
        break;
      case Op::kOr:
        out->v[i] = std::isnan(a) ? b : a;
        break;
      case Op::kUnless:
        out->v[i] = std::isnan(b) ? a : NAN;
        break;
      default:
        out->v[i] = Apply(e.op, a, b, true, e.return_bool);
    }
  }
  return std::shared_ptr<const Vec>(out);
}

Labels Evaluator::OutputLabels(int space, size_t row, const std::string& name) const {
  Labels labels = LabelsOf(space, row);
  if (options_.prometheus && !name.empty()) labels["__name__"] = name;
  return labels;
}

Result<Evaluator::Dense> Evaluator::RunDense(const Expr& expr) {
  auto v = Eval(expr);
  if (!v.ok()) return v.error();
  return Dense{v.value()->space, v.value()->name, v.value()->v};
}

Result<std::vector<OutputSample>> Evaluator::Run(const Expr& expr) {
  auto v = Eval(expr);
  if (!v.ok()) return v.error();
  std::vector<OutputSample> out;
  const Vec& vec = *v.value();
  for (size_t i = 0; i < vec.v.size(); ++i) {
    if (std::isnan(vec.v[i])) continue;
    out.push_back({OutputLabels(vec.space, i, vec.name), vec.v[i]});
  }
  return out;
}
}  // namespace gpufleet::alerting
