#include "alerting/eval.h"

#include <algorithm>
#include <optional>

#include "alerting/metrics.h"
#include "common/pattern.h"

namespace gpufleet::alerting {
namespace {

constexpr int kGpuSpace = -1;
constexpr int kNodeSpace = -2;
constexpr int kControllerSpace = -3;
constexpr int kPoolSpace = -4;

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

bool Matches(const Matcher& m, const Pattern* re, std::string_view value) {
  bool hit = re ? re->FullMatch(value) : value == m.value;
  return hit == m.is_equal;
}

// A matcher's pattern (checked when the expression was parsed); none for a literal matcher.
std::optional<Pattern> PatternOf(const Matcher& m) {
  if (!m.is_regex) return std::nullopt;
  auto p = Pattern::Compile(m.value);
  // Parsing refused patterns RE2 does not take; one that still fails matches nothing.
  return p.ok() ? std::move(p).value() : Pattern::Compile("[^\\s\\S]").value();
}

}  // namespace

struct Evaluator::Vec {
  int space = kGpuSpace;
  std::vector<double> v;  // NaN: no value for the row
};

struct Evaluator::Space {
  std::vector<std::string> by;
  std::vector<Labels> groups;
};

Evaluator::Evaluator(const Snapshot& snap, SeriesReader& reader) : snap_(snap), reader_(reader) {}
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
  return out;
}

const std::vector<double>& Evaluator::LatestOf(Field field) {
  auto it = latest_.find(field);
  if (it != latest_.end()) return it->second;
  auto& out = latest_[field];
  reader_.Latest(snap_, field, snap_.now_ms - kStalenessMs, out);
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
    case Expr::Kind::kCall: {
      if (e.name != "abs") return RangeCall(e);
      auto in = Eval(*e.args[0]);
      if (!in.ok()) return in;
      auto out = std::make_shared<Vec>(*in.value());
      for (double& x : out->v) x = std::fabs(x);
      return std::shared_ptr<const Vec>(out);
    }
    case Expr::Kind::kAggregate:
      return Aggregate(e);
    case Expr::Kind::kBinary:
      return Binary(e);
    case Expr::Kind::kNegate: {
      auto in = Eval(*e.args[0]);
      if (!in.ok()) return in;
      auto out = std::make_shared<Vec>(*in.value());
      for (double& x : out->v) x = -x;
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
        v = static_cast<double>(snap_.now_ms - snap_.nodes[r].last_seen_ms) / 1000.0;
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
  size_t rows = Rows(out->space);
  out->v.assign(rows, NAN);
  const auto& mask = Mask(e, out->space);
  const std::vector<double>* latest =
      metric->special == Special::kNone ? &LatestOf(metric->field) : nullptr;
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

// One row's range function over its window's samples (in the metric's stored unit; `scale`
// converts); NaN where it has no value.
double Reduce(const std::string& fn, const std::vector<tsdb::Sample>& samples, double seconds,
              double scale) {
  if (samples.empty()) return NAN;
  if (fn == "count_over_time") return static_cast<double>(samples.size());  // has no unit
  double v = 0;
  if (fn == "avg_over_time" || fn == "sum_over_time") {
    for (const auto& s : samples) v += s.v;
    if (fn == "avg_over_time") v /= static_cast<double>(samples.size());
  } else if (fn == "min_over_time") {
    v = samples[0].v;
    for (const auto& s : samples) v = std::min(v, s.v);
  } else if (fn == "max_over_time") {
    v = samples[0].v;
    for (const auto& s : samples) v = std::max(v, s.v);
  } else if (fn == "last_over_time") {
    v = samples.back().v;
  } else if (fn == "delta") {
    if (samples.size() < 2) return NAN;
    v = samples.back().v - samples.front().v;
  } else {  // increase, rate: a counter; a drop is a reset, counted from zero
    if (samples.size() < 2) return NAN;
    for (size_t i = 1; i < samples.size(); ++i) {
      double d = samples[i].v - samples[i - 1].v;
      v += d >= 0 ? d : samples[i].v;
    }
    if (fn == "rate") v /= seconds;
  }
  return v * scale;
}

}  // namespace

Result<std::shared_ptr<const Evaluator::Vec>> Evaluator::RangeCall(const Expr& call) {
  const Expr& sel = *call.args[0];
  auto metric = FindMetric(sel.name);
  if (!metric) return MakeError(ErrorCode::kInvalidArgument, "unknown metric '" + sel.name + "'");
  auto out = std::make_shared<Vec>();
  out->space = kGpuSpace;
  out->v.assign(snap_.gpus.size(), NAN);
  const auto& mask = Mask(sel, kGpuSpace);
  int64_t end = snap_.now_ms, start = end - sel.range_ms + 1;

  if (metric->special == Special::kXidEvents) {
    std::vector<std::pair<const Matcher*, std::optional<Pattern>>> event_matchers;
    for (const auto& m : sel.matchers) {
      if (m.name != "xid" && m.name != "severity" && m.name != "action") continue;
      event_matchers.emplace_back(&m, PatternOf(m));
    }
    for (const auto& [row, events] : snap_.xids) {
      if (row >= mask.size() || !mask[row]) continue;
      double count = 0;
      for (const auto& x : events) {
        if (x.time_ms < start || x.time_ms > end) continue;
        bool keep = true;
        std::string xid = std::to_string(x.xid);
        for (const auto& [m, re] : event_matchers) {
          std::string_view value = m->name == "xid"        ? std::string_view(xid)
                                   : m->name == "severity" ? std::string_view(x.severity)
                                                           : std::string_view(x.action);
          keep = keep && Matches(*m, re ? &*re : nullptr, value);
        }
        if (keep) ++count;
      }
      if (count > 0) out->v[row] = count;
    }
    return std::shared_ptr<const Vec>(out);
  }

  const std::string& fn = call.name;
  double seconds = static_cast<double>(sel.range_ms) / 1000.0;
  std::vector<size_t> rows;
  for (size_t r = 0; r < snap_.gpus.size(); ++r) {
    if (mask[r]) rows.push_back(r);
  }
  reader_.Prepare(snap_);
  std::vector<tsdb::Sample> samples;
  for (size_t r : rows) {
    samples.clear();
    reader_.Window(snap_, r, metric->field, start, end, samples);
    out->v[r] = Reduce(fn, samples, seconds, metric->scale);
  }
  return std::shared_ptr<const Vec>(out);
}

Result<std::shared_ptr<const Evaluator::Vec>> Evaluator::Aggregate(const Expr& e) {
  auto in_r = Eval(*e.args[0]);
  if (!in_r.ok()) return in_r;
  const Vec& in = *in_r.value();
  std::string by;
  for (const auto& l : e.by) by += l + ",";
  std::string key = std::to_string(in.space) + "|" + by;
  int space = 0;
  if (auto it = space_ids_.find(key); it != space_ids_.end()) {
    space = it->second;
  } else {
    // Groups every row of the source space, so that other aggregations reuse it.
    auto grouping = std::make_unique<Space>();
    grouping->by = e.by;
    std::vector<uint32_t> group_of(Rows(in.space));
    std::unordered_map<std::string, uint32_t> ids;
    std::string k;
    for (size_t r = 0; r < group_of.size(); ++r) {
      k.clear();
      for (const auto& l : e.by) {
        k += Label(in.space, r, l);
        k += '\x1f';
      }
      auto [it, fresh] = ids.try_emplace(k, static_cast<uint32_t>(grouping->groups.size()));
      if (fresh) {
        Labels labels;
        for (const auto& l : e.by) {
          auto v = Label(in.space, r, l);
          if (!v.empty()) labels.emplace(l, std::string(v));
        }
        grouping->groups.push_back(std::move(labels));
      }
      group_of[r] = it->second;
    }
    space = static_cast<int>(spaces_.size());
    spaces_.push_back(std::move(grouping));
    space_ids_[key] = space;
    group_of_[key] = std::move(group_of);
  }
  const auto& group_of = group_of_[key];
  size_t groups = spaces_[static_cast<size_t>(space)]->groups.size();
  std::vector<double> acc(groups, 0), count(groups, 0);
  bool is_min = e.name == "min", is_max = e.name == "max";
  for (size_t r = 0; r < in.v.size(); ++r) {
    double x = in.v[r];
    if (std::isnan(x)) continue;
    uint32_t g = group_of[r];
    if (count[g] == 0 && (is_min || is_max)) {
      acc[g] = x;
    } else if (is_min) {
      acc[g] = std::min(acc[g], x);
    } else if (is_max) {
      acc[g] = std::max(acc[g], x);
    } else {
      acc[g] += x;
    }
    count[g] += 1;
  }
  auto out = std::make_shared<Vec>();
  out->space = space;
  out->v.assign(groups, NAN);
  for (size_t g = 0; g < groups; ++g) {
    if (count[g] == 0) continue;
    if (e.name == "count") {
      out->v[g] = count[g];
    } else if (e.name == "avg") {
      out->v[g] = acc[g] / count[g];
    } else {
      out->v[g] = acc[g];
    }
  }
  return std::shared_ptr<const Vec>(out);
}

namespace {

double Arith(Op op, double a, double b) {
  switch (op) {
    case Op::kAdd:
      return a + b;
    case Op::kSub:
      return a - b;
    case Op::kMul:
      return a * b;
    case Op::kDiv:
      return a / b;
    default:
      return NAN;
  }
}

bool Compare(Op op, double a, double b) {
  switch (op) {
    case Op::kEq:
      return a == b;
    case Op::kNe:
      return a != b;
    case Op::kGt:
      return a > b;
    case Op::kLt:
      return a < b;
    case Op::kGe:
      return a >= b;
    case Op::kLe:
      return a <= b;
    default:
      return false;
  }
}

// One row of a binary operation: NaN means no row in the result.
double Apply(Op op, double a, double b, bool a_is_series) {
  if (std::isnan(a) || std::isnan(b)) return NAN;
  if (IsComparison(op)) return Compare(op, a, b) ? (a_is_series ? a : b) : NAN;
  return Arith(op, a, b);
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
      x = l.vector ? Apply(e.op, x, number, true) : Apply(e.op, number, x, false);
    }
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
        out->v[i] = Apply(e.op, a, b, true);
    }
  }
  return std::shared_ptr<const Vec>(out);
}

Result<std::vector<OutputSample>> Evaluator::Run(const Expr& expr) {
  auto v = Eval(expr);
  if (!v.ok()) return v.error();
  std::vector<OutputSample> out;
  const Vec& vec = *v.value();
  for (size_t i = 0; i < vec.v.size(); ++i) {
    if (std::isnan(vec.v[i])) continue;
    out.push_back({LabelsOf(vec.space, i), vec.v[i]});
  }
  return out;
}
}  // namespace gpufleet::alerting
