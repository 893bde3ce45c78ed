#include "usage/usage.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/json.hpp>
#include <map>

#include "common/json_text.h"
#include "telemetry/telemetry.h"

namespace json = boost::json;

namespace gpufleet::usage {
namespace {

constexpr int64_t kMaxHoldMs = 60'000;        // a power sample counts for at most this long
constexpr int64_t kRawMs = 23 * 3'600'000LL;  // older windows are read from minute rollups

json::value NumberOrNull(double v) { return std::isnan(v) ? json::value(nullptr) : json::value(v); }
double NumberOr(const json::object& o, const char* key, double fallback) {
  const json::value* v = o.if_contains(key);
  return v && v->is_number() ? v->to_number<double>() : fallback;
}

}  // namespace

Effective Summarize(const std::vector<std::vector<tsdb::Sample>>& util,
                    const std::vector<std::vector<tsdb::Sample>>& mem_mib,
                    const std::vector<std::vector<tsdb::Sample>>& power_mw, int64_t start_ms,
                    int64_t end_ms) {
  Effective e;
  std::vector<double> all;
  double sum = 0;
  for (const auto& gpu : util) {
    for (const auto& s : gpu) {
      if (s.t < start_ms || s.t >= end_ms || std::isnan(s.v)) continue;
      all.push_back(s.v);
      sum += s.v;
    }
  }
  if (!all.empty()) {
    e.samples = static_cast<int64_t>(all.size());
    e.util_mean = sum / static_cast<double>(all.size());
    size_t rank = (all.size() * 95 + 99) / 100;
    std::nth_element(all.begin(), all.begin() + static_cast<long>(rank - 1), all.end());
    e.util_p95 = all[rank - 1];
  }
  double msum = 0, mpeak = NAN;
  int64_t mn = 0;
  for (const auto& gpu : mem_mib) {
    for (const auto& s : gpu) {
      if (s.t < start_ms || s.t >= end_ms || std::isnan(s.v)) continue;
      msum += s.v;
      ++mn;
      mpeak = std::isnan(mpeak) ? s.v : std::max(mpeak, s.v);
    }
  }
  if (mn > 0) {
    e.mem_mean_bytes = msum / static_cast<double>(mn) * 1048576.0;
    e.mem_peak_bytes = mpeak * 1048576.0;
  }
  for (const auto& gpu : power_mw) {
    for (size_t i = 0; i < gpu.size(); ++i) {
      const auto& s = gpu[i];
      if (s.t >= end_ms || std::isnan(s.v)) continue;
      int64_t next = i + 1 < gpu.size() ? gpu[i + 1].t : end_ms;
      int64_t from = std::max(s.t, start_ms);
      int64_t to = std::min({next, end_ms, s.t + kMaxHoldMs});
      if (to > from) e.energy_j += s.v / 1000.0 * static_cast<double>(to - from) / 1000.0;
    }
  }
  return e;
}

std::string EntryDoc(const Entry& e) {
  const auto& a = e.allocation;
  json::array nodes;
  for (const auto& p : a.placement) {
    nodes.push_back(json::object{{"node", p.node}, {"gpus", json::value_from(p.gpus)}});
  }
  return JsonText(json::object{{"job", a.job},
                               {"team", a.team},
                               {"project", a.project},
                               {"cluster", a.cluster},
                               {"pool", a.pool},
                               {"gpu_model", a.gpu_model},
                               {"gpus", a.gpus},
                               {"nodes", std::move(nodes)},
                               {"start_ms", a.start_ms},
                               {"end_ms", a.end_ms},
                               {"wait_ms", a.wait_ms},
                               {"outcome", a.outcome},
                               {"source", a.source},
                               {"external_id", a.external_id},
                               {"util_mean", NumberOrNull(e.effective.util_mean)},
                               {"util_p95", NumberOrNull(e.effective.util_p95)},
                               {"mem_mean_bytes", NumberOrNull(e.effective.mem_mean_bytes)},
                               {"mem_peak_bytes", NumberOrNull(e.effective.mem_peak_bytes)},
                               {"energy_j", e.effective.energy_j},
                               {"samples", e.effective.samples}});
}

store::UsageFigures Figures(const Entry& e) {
  const auto& a = e.allocation;
  store::UsageFigures f;
  f.gpu_model = a.gpu_model;
  f.gpus = a.gpus;
  f.wait_ms = a.wait_ms;
  auto milli = [](double v) { return std::isnan(v) ? -1 : std::llround(v * 1000); };
  f.util_milli = milli(e.effective.util_mean);
  f.util_p95_milli = milli(e.effective.util_p95);
  f.mem_peak_mib = std::isnan(e.effective.mem_peak_bytes)
                       ? -1
                       : std::llround(e.effective.mem_peak_bytes / 1048576.0);
  f.energy_j = std::llround(e.effective.energy_j);
  for (const auto& p : a.placement) {
    if (!f.placement.empty()) f.placement += ';';
    f.placement += p.node + ":";
    for (size_t i = 0; i < p.gpus.size(); ++i) {
      f.placement += (i ? "," : "") + std::to_string(p.gpus[i]);
    }
  }
  f.outcome = a.outcome;
  f.source = a.source;
  f.external_id = a.external_id;
  return f;
}

Result<Entry> EntryFromRecord(const store::UsageRecord& r) {
  boost::system::error_code ec;
  json::value v = json::parse(r.doc, ec);
  if (ec || !v.is_object()) {
    return MakeError(ErrorCode::kInternal,
                     "usage record " + std::to_string(r.id) + " is unreadable");
  }
  const json::object& o = v.as_object();
  Entry e;
  e.id = r.id;
  auto& a = e.allocation;
  a.job = r.job;
  a.team = r.team;
  a.project = r.project;
  a.pool = r.pool;
  a.cluster = r.cluster;
  a.start_ms = r.start_ms;
  a.end_ms = r.end_ms;
  if (const auto* m = o.if_contains("gpu_model"); m && m->is_string()) {
    a.gpu_model = std::string(m->as_string());
  }
  for (auto [key, out] : {std::pair<const char*, std::string*>{"outcome", &a.outcome},
                          {"source", &a.source},
                          {"external_id", &a.external_id}}) {
    if (const auto* m = o.if_contains(key); m && m->is_string()) *out = m->as_string();
  }
  a.gpus = static_cast<int>(NumberOr(o, "gpus", 0));
  a.wait_ms = static_cast<int64_t>(NumberOr(o, "wait_ms", 0));
  if (const auto* nodes = o.if_contains("nodes"); nodes && nodes->is_array()) {
    for (const auto& n : nodes->as_array()) {
      if (!n.is_object() || !n.as_object().contains("node")) continue;
      workload::Placement p;
      p.node = std::string(n.at("node").as_string());
      if (const auto* g = n.as_object().if_contains("gpus"); g && g->is_array()) {
        for (const auto& i : g->as_array()) {
          if (i.is_int64()) p.gpus.push_back(static_cast<int>(i.as_int64()));
        }
      }
      a.placement.push_back(std::move(p));
    }
  }
  e.effective.util_mean = NumberOr(o, "util_mean", NAN);
  e.effective.util_p95 = NumberOr(o, "util_p95", NAN);
  e.effective.mem_mean_bytes = NumberOr(o, "mem_mean_bytes", NAN);
  e.effective.mem_peak_bytes = NumberOr(o, "mem_peak_bytes", NAN);
  e.effective.energy_j = NumberOr(o, "energy_j", 0);
  e.effective.samples = static_cast<int64_t>(NumberOr(o, "samples", 0));
  return e;
}

UsageService::UsageService(workload::JobService& jobs, FleetService& fleet,
                           const TelemetryStore& telemetry, store::UsageStore& store,
                           std::shared_ptr<Clock> clock, int64_t retention_ms)
    : jobs_(jobs),
      fleet_(fleet),
      telemetry_(telemetry),
      store_(store),
      clock_(std::move(clock)),
      retention_ms_(retention_ms) {}

Effective UsageService::Measure(const workload::EndedAllocation& a, int64_t now) const {
  std::vector<std::vector<tsdb::Sample>> util, mem, power;
  const bool raw = a.start_ms >= now - kRawMs;
  auto read = [&](const std::string& uuid, Field field,
                  std::vector<std::vector<tsdb::Sample>>& out) {
    out.emplace_back();
    if (raw) {
      telemetry_.Raw(uuid, TelemetryStore::kNoGpu, field, a.start_ms, a.end_ms, out.back());
      return;
    }
    // Minute rollups: each minute's mean, at the minute's start.
    for (const auto& b :
         telemetry_.Range(uuid, field, tsdb::Resolution::kMinute, a.start_ms, a.end_ms)) {
      if (b.count > 0) out.back().push_back({std::max(b.start, a.start_ms), b.sum / b.count});
    }
  };
  for (const auto& p : a.placement) {
    auto node = fleet_.GetNode(p.node);
    if (!node.ok()) continue;
    for (int index : p.gpus) {
      for (const auto& g : node->gpus) {
        if (g.index != index || g.uuid.empty()) continue;
        read(g.uuid, Field::kGpuUtil, util);
        read(g.uuid, Field::kFbUsed, mem);
        read(g.uuid, Field::kPowerUsage, power);
      }
    }
  }
  return Summarize(util, mem, power, a.start_ms, a.end_ms);
}

Status UsageService::Tick() {
  int64_t now = clock_->NowMs();
  for (auto& a : jobs_.TakeEnded()) {
    Entry e;
    e.allocation = std::move(a);
    e.effective = Measure(e.allocation, now);
    const auto& x = e.allocation;
    unsaved_.push_back({0, x.job, x.team, x.project, x.pool, x.cluster, x.start_ms, x.end_ms,
                        EntryDoc(e), Figures(e)});
  }
  if (!unsaved_.empty()) {
    if (auto s = store_.AppendUsage(unsaved_); !s.ok()) {
      if (unsaved_.size() > 100'000) unsaved_.erase(unsaved_.begin(), unsaved_.begin() + 10'000);
      return s;
    }
    unsaved_.clear();
  }
  if (now >= next_capacity_ms_) {
    next_capacity_ms_ = now + capacity_interval_ms_;
    GF_TRY(Capacity(now));
  }
  if (now >= next_prune_ms_) {
    next_prune_ms_ = now + 3'600'000;
    auto gone = store_.DeleteUsageBefore(now - retention_ms_);
    if (!gone.ok()) return gone.error();
    if (gone.value() > 0)
      spdlog::info("usage: {} record(s) past the retention dropped", gone.value());
    auto hours = store_.DeletePoolHoursBefore(now - retention_ms_);
    if (!hours.ok()) return hours.error();
  }
  return {};
}

namespace {

// Splits `h`, `elapsed` ms up to `now` that began before the hour `boundary`, in proportion:
// `h` keeps the part after it, the part before it is returned.
store::PoolHour SplitAtHour(store::PoolHour& h, int64_t now, int64_t elapsed, int64_t boundary) {
  const double after = static_cast<double>(now - boundary) / static_cast<double>(elapsed);
  store::PoolHour early = h;
  early.hour_ms = boundary - 3'600'000;
  h.hour_ms = boundary;
  using Pair = std::pair<int64_t*, int64_t*>;
  for (auto [late_v, early_v] :
       std::initializer_list<Pair>{{&h.gpu_ms, &early.gpu_ms},
                                   {&h.alloc_gpu_ms, &early.alloc_gpu_ms},
                                   {&h.queued_gpu_ms, &early.queued_gpu_ms},
                                   {&h.energy_j, &early.energy_j},
                                   {&h.free_energy_j, &early.free_energy_j},
                                   {&h.idle_energy_j, &early.idle_energy_j}}) {
    const int64_t total = *late_v;
    *late_v = std::llround(static_cast<double>(total) * after);
    *early_v = total - *late_v;
  }
  return early;
}

}  // namespace

Status UsageService::Capacity(int64_t now) {
  const int64_t last = last_capacity_ms_;
  last_capacity_ms_ = now;
  if (last == 0 || now <= last) return {};
  const int64_t elapsed =
      std::min<int64_t>(now - last, std::max<int64_t>(300'000, 2 * capacity_interval_ms_));
  const int64_t from = now - elapsed;
  auto pools = fleet_.Pools();
  if (!pools.ok()) return pools.error();
  std::map<std::string, store::PoolHour> by_pool;
  for (const auto& p : pools.value()) {
    by_pool[p.name] = {p.name, p.cluster, p.gpu_model, 0, elapsed};
  }
  const auto held = jobs_.Allocation();
  for (const auto& [pool, d] : jobs_.Demand()) {
    if (auto it = by_pool.find(pool); it != by_pool.end()) {
      it->second.queued_gpu_ms += static_cast<int64_t>(d.queued_gpus) * elapsed;
    }
  }
  const double seconds = static_cast<double>(elapsed) / 1000.0;
  fleet_.ForEachNode({}, [&](const Node& n) {
    auto it = by_pool.find(n.pool);
    if (it == by_pool.end()) return;
    store::PoolHour& h = it->second;
    const auto jobs = held.find(n.name);
    for (const auto& g : n.gpus) {
      h.gpu_ms += elapsed;
      const bool busy = jobs != held.end() && g.index >= 0 &&
                        g.index < static_cast<int>(jobs->second.size()) &&
                        jobs->second[static_cast<size_t>(g.index)] != 0;
      if (busy) h.alloc_gpu_ms += elapsed;
      if (g.uuid.empty()) continue;
      auto power = telemetry_.Latest(g.uuid, Field::kPowerUsage);
      if (!power || power->t < now - 120'000 || std::isnan(power->v)) continue;
      const auto joules = static_cast<int64_t>(std::llround(power->v / 1000.0 * seconds));
      h.energy_j += joules;
      if (!busy) {
        h.free_energy_j += joules;
        continue;
      }
      auto util = telemetry_.Latest(g.uuid, Field::kGpuUtil);
      if (util && util->t >= now - 120'000 && util->v < 5) h.idle_energy_j += joules;
    }
  });
  // Into the hour (or the two hours) the time was in, in proportion.
  const int64_t boundary = now / 3'600'000 * 3'600'000;
  for (auto& [name, h] : by_pool) {
    if (h.gpu_ms == 0 && h.queued_gpu_ms == 0) continue;
    if (from >= boundary) {
      h.hour_ms = boundary;
      unsaved_hours_.push_back(std::move(h));
      continue;
    }
    store::PoolHour early = SplitAtHour(h, now, elapsed, boundary);
    unsaved_hours_.push_back(std::move(early));
    unsaved_hours_.push_back(std::move(h));
  }
  if (unsaved_hours_.empty()) return {};
  if (auto s = store_.AddPoolHours(unsaved_hours_); !s.ok()) {
    // Kept for the next minute; a store away for days keeps the last day's at most.
    if (unsaved_hours_.size() > 100'000) {
      unsaved_hours_.erase(unsaved_hours_.begin(), unsaved_hours_.begin() + 10'000);
    }
    return s;
  }
  unsaved_hours_.clear();
  return {};
}

Result<Report> UsageService::Run(const ReportRequest& request, ReportContext context,
                                 const std::string& cluster) {
  return RunReport(store_, request, std::move(context), cluster);
}

Result<std::vector<Recommendation>> UsageService::Advise(const AdviceRequest& request,
                                                         ReportContext context,
                                                         std::map<std::string, PoolFacts> pools) {
  const int64_t now = clock_->NowMs();
  std::vector<RunningJob> running;
  workload::JobFilter running_only;
  running_only.state = "running";
  for (const auto& j : jobs_.List(running_only)) {
    if (now - j.start_ms < request.min_idle_ms) continue;  // too young to call idle
    workload::EndedAllocation a;
    a.placement = j.placement;
    a.start_ms = j.start_ms;
    a.end_ms = now;
    const Effective e = Measure(a, now);
    RunningJob r{j.id,           j.spec.team,      j.spec.project, j.spec.pool,
                 j.spec.cluster, j.spec.gpu_model, j.spec.gpus};
    for (const auto& p : j.placement) r.nodes.push_back(p.node);
    r.start_ms = j.start_ms;
    r.util_mean = e.util_mean;
    r.energy_j = e.energy_j;
    if (!j.source.empty()) r.external = j.source + " job " + j.external_id;
    running.push_back(std::move(r));
  }
  return RunAdvice(store_, request, std::move(context), std::move(pools), running);
}

namespace {
constexpr const char* kRatesSetting = "report_rates";
}

Result<Rates> UsageService::GetRates(const GpuCatalog& catalog) const {
  if (!settings_) return Rates{};
  std::optional<std::string> doc;
  GF_TRY_ASSIGN(doc, settings_->GetSetting(kRatesSetting));
  if (!doc) return Rates{};
  return ParseRates(*doc, catalog);
}

Status UsageService::SetRates(const Rates& rates) {
  if (!settings_) return MakeError(ErrorCode::kUnavailable, "the rates cannot be stored");
  return settings_->PutSetting(kRatesSetting, RatesJson(rates), clock_->NowMs());
}

Result<std::vector<Entry>> UsageService::List(const store::UsageQuery& query, int64_t* total) {
  auto records = store_.ListUsage(query, total);
  if (!records.ok()) return records.error();
  std::vector<Entry> out;
  for (const auto& r : records.value()) {
    auto e = EntryFromRecord(r);
    if (e.ok()) out.push_back(std::move(e).value());
  }
  return out;
}

}  // namespace gpufleet::usage
