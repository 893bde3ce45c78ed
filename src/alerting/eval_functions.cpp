// The evaluator's functions: range functions over each GPU's window, aggregations, the
// instant functions and label_replace.

#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>

#include "alerting/eval_parts.h"
#include "alerting/metrics.h"

namespace gpufleet::alerting {

namespace {

// One row's range function over its window's samples (in the metric's stored unit; `scale`
// converts); NaN where it has no value.
double Reduce(const std::string& fn, const std::vector<tsdb::Sample>& samples, double seconds,
              double scale) {
  if (samples.empty()) return NAN;
  if (fn == "count_over_time") return static_cast<double>(samples.size());  // has no unit
  if (fn == "present_over_time") return 1;
  const size_t n = samples.size();
  double v = 0;
  if (fn == "avg_over_time" || fn == "sum_over_time") {
    for (const auto& s : samples) v += s.v;
    if (fn == "avg_over_time") v /= static_cast<double>(n);
  } else if (fn == "stddev_over_time" || fn == "stdvar_over_time") {
    double mean = 0;
    for (const auto& s : samples) mean += s.v;
    mean /= static_cast<double>(n);
    for (const auto& s : samples) v += (s.v - mean) * (s.v - mean);
    v /= static_cast<double>(n);
    // A variance is in the unit squared.
    return fn == "stddev_over_time" ? std::sqrt(v) * scale : v * scale * scale;
  } else if (fn == "min_over_time") {
    v = samples[0].v;
    for (const auto& s : samples) v = std::min(v, s.v);
  } else if (fn == "max_over_time") {
    v = samples[0].v;
    for (const auto& s : samples) v = std::max(v, s.v);
  } else if (fn == "last_over_time") {
    v = samples.back().v;
  } else if (fn == "delta") {
    if (n < 2) return NAN;
    v = samples.back().v - samples.front().v;
  } else if (fn == "idelta" || fn == "irate") {  // the last two samples
    if (n < 2) return NAN;
    const auto& a = samples[n - 2];
    const auto& b = samples[n - 1];
    v = b.v - a.v;
    if (fn == "irate") {
      if (v < 0) v = b.v;  // a reset
      v /= static_cast<double>(b.t - a.t) / 1000.0;
    }
  } else {  // increase, rate: a counter; a drop is a reset, counted from zero
    if (n < 2) return NAN;
    for (size_t i = 1; i < n; ++i) {
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
  int64_t end = now_ - sel.offset_ms, start = end - sel.range_ms + 1;
  if (metric->special == Special::kXidEvents && !FactsVisible(end)) {
    return std::shared_ptr<const Vec>(out);  // the health model's recent XIDs: no history
  }

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

// The space of an aggregation's groups over `source_space`: `by` its labels, or `without` them
// (every other label of the row). Shared by equal groupings.
int Evaluator::Grouping(const Expr& e, int source_space) {
  std::string by;
  for (const auto& l : e.by) by += l + ",";
  std::string key = std::to_string(source_space) + (e.without ? "|-" : "|") + by;
  if (auto it = space_ids_.find(key); it != space_ids_.end()) return it->second;
  auto grouping = std::make_unique<Space>();
  grouping->by = e.by;
  std::vector<uint32_t> group_of(Rows(source_space));
  std::map<Labels, uint32_t> ids;
  for (size_t r = 0; r < group_of.size(); ++r) {
    Labels labels;
    if (e.without) {
      labels = LabelsOf(source_space, r);
      for (const auto& l : e.by) labels.erase(l);
    } else {
      for (const auto& l : e.by) {
        auto v = Label(source_space, r, l);
        if (!v.empty()) labels.emplace(l, std::string(v));
      }
    }
    auto [it, fresh] = ids.try_emplace(labels, static_cast<uint32_t>(grouping->groups.size()));
    if (fresh) grouping->groups.push_back(std::move(labels));
    group_of[r] = it->second;
  }
  int space = static_cast<int>(spaces_.size());
  spaces_.push_back(std::move(grouping));
  space_ids_[key] = space;
  group_of_[key] = std::move(group_of);
  return space;
}

namespace {

// Prometheus's quantile: linear interpolation between the closest ranks.
double Quantile(double q, std::vector<double>& values) {
  if (values.empty()) return NAN;
  if (q < 0) return -INFINITY;
  if (q > 1) return INFINITY;
  std::sort(values.begin(), values.end());
  double rank = q * static_cast<double>(values.size() - 1);
  auto lower = static_cast<size_t>(std::floor(rank));
  size_t upper = std::min(lower + 1, values.size() - 1);
  double weight = rank - std::floor(rank);
  return values[lower] * (1 - weight) + values[upper] * weight;
}

}  // namespace

namespace {

// topk and bottomk: each group's k highest (lowest) rows, in the source's space.
void SelectK(const Expr& e, const Evaluator::Vec& in, const std::vector<uint32_t>& group_of,
             size_t groups, Evaluator::Vec& out) {
  auto k = static_cast<size_t>(e.params[0]);
  std::vector<std::vector<size_t>> members(groups);
  for (size_t r = 0; r < in.v.size(); ++r) {
    if (!std::isnan(in.v[r])) members[group_of[r]].push_back(r);
  }
  out = in;
  out.v.assign(in.v.size(), NAN);
  bool top = e.name == "topk";
  for (auto& m : members) {
    size_t keep = std::min(k, m.size());
    std::partial_sort(
        m.begin(), m.begin() + static_cast<std::ptrdiff_t>(keep), m.end(),
        [&](size_t a, size_t b) { return top ? in.v[a] > in.v[b] : in.v[a] < in.v[b]; });
    for (size_t i = 0; i < keep; ++i) out.v[m[i]] = in.v[m[i]];
  }
}

// quantile, stddev and stdvar of each group (out is already in the groups' space).
void Spread(const Expr& e, const Evaluator::Vec& in, const std::vector<uint32_t>& group_of,
            Evaluator::Vec& out) {
  std::vector<std::vector<double>> values(out.v.size());
  for (size_t r = 0; r < in.v.size(); ++r) {
    if (!std::isnan(in.v[r])) values[group_of[r]].push_back(in.v[r]);
  }
  for (size_t g = 0; g < values.size(); ++g) {
    auto& vs = values[g];
    if (vs.empty()) continue;
    if (e.name == "quantile") {
      out.v[g] = Quantile(e.params[0], vs);
      continue;
    }
    double mean = 0, var = 0;
    for (double x : vs) mean += x;
    mean /= static_cast<double>(vs.size());
    for (double x : vs) var += (x - mean) * (x - mean);
    var /= static_cast<double>(vs.size());
    out.v[g] = e.name == "stddev" ? std::sqrt(var) : var;
  }
}

}  // namespace

Result<std::shared_ptr<const Evaluator::Vec>> Evaluator::Aggregate(const Expr& e) {
  auto in_r = Eval(*e.args[0]);
  if (!in_r.ok()) return in_r;
  const Vec& in = *in_r.value();
  int space = Grouping(e, in.space);
  std::string by;
  for (const auto& l : e.by) by += l + ",";
  const auto& group_of = group_of_[std::to_string(in.space) + (e.without ? "|-" : "|") + by];
  size_t groups = spaces_[static_cast<size_t>(space)]->groups.size();
  auto out = std::make_shared<Vec>();
  if (e.name == "topk" || e.name == "bottomk") {  // the rows themselves, k per group
    SelectK(e, in, group_of, groups, *out);
    return std::shared_ptr<const Vec>(out);
  }
  out->space = space;
  out->v.assign(groups, NAN);
  if (e.name == "quantile" || e.name == "stddev" || e.name == "stdvar") {
    Spread(e, in, group_of, *out);
    return std::shared_ptr<const Vec>(out);
  }
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
  for (size_t g = 0; g < groups; ++g) {
    if (count[g] == 0) continue;
    if (e.name == "count") {
      out->v[g] = count[g];
    } else if (e.name == "group") {
      out->v[g] = 1;
    } else if (e.name == "avg") {
      out->v[g] = acc[g] / count[g];
    } else {
      out->v[g] = acc[g];
    }
  }
  return std::shared_ptr<const Vec>(out);
}

namespace {

double Round(double x, double to) {
  if (to == 0) return x;
  // Prometheus: rounds half up, to the nearest multiple of `to`.
  return std::floor(x / to + 0.5) * to;
}

double InstantValue(const Expr& e, double x) {
  const std::string& fn = e.name;
  if (fn == "abs") return std::fabs(x);
  if (fn == "ceil") return std::ceil(x);
  if (fn == "floor") return std::floor(x);
  if (fn == "sqrt") return std::sqrt(x);
  if (fn == "exp") return std::exp(x);
  if (fn == "ln") return std::log(x);
  if (fn == "log2") return std::log2(x);
  if (fn == "log10") return std::log10(x);
  if (fn == "round") return Round(x, e.params.empty() ? 1 : e.params[0]);
  if (fn == "clamp_min") return std::max(x, e.params[0]);
  if (fn == "clamp_max") return std::min(x, e.params[0]);
  if (fn == "clamp")
    return e.params[0] > e.params[1] ? NAN : std::clamp(x, e.params[0], e.params[1]);
  return NAN;
}

}  // namespace

// The math functions over a series, and vector(number).
Result<std::shared_ptr<const Evaluator::Vec>> Evaluator::Instant(const Expr& e) {
  if (e.name == "vector") {  // one row without labels: the controller's space
    auto out = std::make_shared<Vec>();
    out->space = kControllerSpace;
    out->v.assign(1, e.params[0]);
    return std::shared_ptr<const Vec>(out);
  }
  auto in = Eval(*e.args[0]);
  if (!in.ok()) return in;
  auto out = std::make_shared<Vec>(*in.value());
  out->name.clear();
  for (double& x : out->v) {
    if (!std::isnan(x)) x = InstantValue(e, x);
  }
  return std::shared_ptr<const Vec>(out);
}

// label_replace(v, dst, replacement, src, regex): each row's labels with dst set from the
// regex's match of src ($1, ${name}); a row whose src does not match keeps its labels.
Result<std::shared_ptr<const Evaluator::Vec>> Evaluator::LabelReplace(const Expr& e) {
  auto in_r = Eval(*e.args[0]);
  if (!in_r.ok()) return in_r;
  const Vec& in = *in_r.value();
  auto re = Pattern::Compile(e.strings[3]);
  if (!re.ok()) return re.error();
  auto out = std::make_shared<Vec>(in);
  // The relabelled rows are the same at every step of a range query: made once.
  std::string key = "label_replace|" + std::to_string(in.space) + "|" + e.key;
  if (auto it = space_ids_.find(key); it != space_ids_.end()) {
    out->space = it->second;
    return std::shared_ptr<const Vec>(out);
  }
  const std::string &dst = e.strings[0], &replacement = e.strings[1], &src = e.strings[2];
  auto space = std::make_unique<Space>();
  for (size_t r = 0; r < in.v.size(); ++r) {
    Labels labels = LabelsOf(in.space, r);
    auto it = labels.find(src);
    std::string value = it == labels.end() ? "" : it->second;
    auto replaced = re->Replace(value, replacement);
    if (replaced) {
      if (replaced->empty()) {
        labels.erase(dst);
      } else {
        labels[dst] = *replaced;
      }
    }
    space->groups.push_back(std::move(labels));
  }
  out->space = static_cast<int>(spaces_.size());
  spaces_.push_back(std::move(space));
  space_ids_[key] = out->space;
  return std::shared_ptr<const Vec>(out);
}

}  // namespace gpufleet::alerting
