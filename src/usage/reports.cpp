#include "usage/reports.h"

#include <algorithm>
#include <boost/json.hpp>
#include <charconv>
#include <unordered_map>

#include "common/clock.h"
#include "common/csv.h"
#include "common/json_fields.h"
#include "common/json_text.h"
#include "usage/ledger.h"

namespace json = boost::json;

namespace gpufleet::usage {
namespace {

constexpr double kHourMs = 3.6e6;
constexpr double kMonthMs = 30.4375 * 86'400'000.0;  // a budget is monthly: 365.25 / 12 days
constexpr const char* kIdleKey = "__idle__";         // OpenCost's name for the idle allocation
constexpr const char* kDays[] = {"mon", "tue", "wed", "thu", "fri", "sat", "sun"};

Cell Num(double v) { return std::isnan(v) ? Cell() : Cell(v); }

// The GPU-hours of a record inside [from, to).
double GpuHoursIn(const store::UsageRecord& r, int64_t gpus, int64_t from, int64_t to) {
  const int64_t a = std::max(r.start_ms, from), b = std::min(r.end_ms, to);
  if (b <= a || r.end_ms <= r.start_ms) return 0;
  return static_cast<double>(gpus) * static_cast<double>(b - a) / kHourMs;
}

double Percentile(std::vector<double>& v, int p) {  // nearest rank
  if (v.empty()) return NAN;
  const size_t rank = std::max<size_t>(1, (v.size() * static_cast<size_t>(p) + 99) / 100);
  std::nth_element(v.begin(), v.begin() + static_cast<long>(rank - 1), v.end());
  return v[rank - 1];
}

// What the ledger-based reports share: the request, the fleet's prices and sites.
class Base : public ReportBuilder {
 public:
  Base(ReportRequest r, ReportContext c) : req_(std::move(r)), ctx_(std::move(c)) {}
  bool wants_days() const override { return false; }
  void AddDay(const store::UsageDay&) override {}
  uint32_t columns() const override { return store::UsageQuery::kAllColumns; }

 protected:
  // A record as the part of it inside the period (its figures from its document if it is
  // from before migration 18), for the reports that add days up.
  void AddAsDay(const store::UsageRecord& r) {
    if (r.figures.gpus > 0 || r.doc.empty()) {
      AddDay(store::UsagePiece(r, req_.from_ms, req_.to_ms));
      return;
    }
    store::UsageRecord copy = r;
    copy.figures = FiguresOf(r);
    AddDay(store::UsagePiece(copy, req_.from_ms, req_.to_ms));
  }
  std::string Site(const std::string& cluster) const {
    auto it = ctx_.cluster_site.find(cluster);
    return it == ctx_.cluster_site.end() ? std::string() : it->second;
  }
  double Rate(const std::string& model, const std::string& cluster) const {
    return ctx_.rates.GpuHour(*ctx_.catalog, model, Site(cluster));
  }
  // A record's key along a ledger dimension (not node or gpu).
  std::string KeyOf(const store::UsageDay& d) const {
    if (req_.by == "team") return d.team;
    if (req_.by == "project") return d.team + "/" + d.project;
    if (req_.by == "pool") return d.pool;
    if (req_.by == "cluster") return d.cluster;
    if (req_.by == "model") return d.gpu_model;
    return "fleet";
  }
  std::string KeyOf(const store::PoolHour& h) const {
    if (req_.by == "pool") return h.pool;
    if (req_.by == "cluster") return h.cluster;
    if (req_.by == "model") return h.gpu_model;
    return "fleet";
  }
  bool ByPoolHours() const {
    return req_.by == "pool" || req_.by == "cluster" || req_.by == "model";
  }
  Report Start(std::vector<std::string> columns) const {
    Report r;
    r.by = req_.by;
    r.columns = std::move(columns);
    return r;
  }
  ReportRequest req_;
  ReportContext ctx_;
  store::UsageFigures scratch_;  // a record's figures read from its document
};

constexpr double kHourOfMs = 1 / kHourMs;

class Utilization : public Base {
 public:
  using Base::Base;
  bool wants_hours() const override { return ByPoolHours(); }
  bool wants_records() const override { return true; }
  bool wants_days() const override { return !ByPlacement(); }
  uint32_t columns() const override {
    return ByPlacement() ? store::UsageQuery::kUtil | store::UsageQuery::kPlacement
                         : store::UsageQuery::kAllColumns;
  }
  void AddDay(const store::UsageDay& d) override {
    if (d.gpu_ms <= 0) return;
    Acc& a = acc_[KeyOf(d)];
    a.alloc_h += d.gpu_ms * kHourOfMs;
    a.measured_h += d.measured_gpu_ms * kHourOfMs;
    a.effective_h += d.effective_gpu_ms * kHourOfMs;
  }
  void Add(const store::UsageRecord& r) override {
    if (!ByPlacement()) {
      AddAsDay(r);
      return;
    }
    const store::UsageFigures& f = FiguresOf(r, scratch_);
    const double gpu_hours = GpuHoursIn(r, f.gpus, req_.from_ms, req_.to_ms);
    if (gpu_hours <= 0) return;
    // A million records' placements: read in place and looked up by view, not copied.
    auto add = [&](std::string_view key, double hours) {
      auto it = placed_.find(key);
      if (it == placed_.end()) it = placed_.emplace(std::string(key), Acc()).first;
      Acc& a = it->second;
      a.alloc_h += hours;
      if (f.util_milli >= 0) {
        a.measured_h += hours;
        a.effective_h += hours * static_cast<double>(f.util_milli) / 100'000.0;
      }
    };
    const double per_gpu = gpu_hours / static_cast<double>(f.gpus);
    const bool by_node = req_.by == "node";
    const std::string_view text = f.placement;
    for (size_t start = 0; start < text.size();) {  // "node-a:0,1;node-b:2"
      const size_t end = std::min(text.find(';', start), text.size());
      const std::string_view part = text.substr(start, end - start);
      start = end + 1;
      const size_t colon = part.rfind(':');
      if (colon == std::string_view::npos) continue;
      const std::string_view gpus = part.substr(colon + 1);
      if (by_node) {
        const auto n = gpus.empty() ? 0 : std::count(gpus.begin(), gpus.end(), ',') + 1;
        add(part.substr(0, colon), per_gpu * static_cast<double>(n));
        continue;
      }
      for (size_t g = 0; g < gpus.size();) {
        const size_t comma = std::min(gpus.find(',', g), gpus.size());
        key_.assign(part.substr(0, colon + 1)).append(gpus.substr(g, comma - g));
        add(key_, per_gpu);
        g = comma + 1;
      }
    }
  }
  void AddHour(const store::PoolHour& h) override {
    Acc& a = acc_[KeyOf(h)];
    a.installed_h += static_cast<double>(h.gpu_ms) / kHourMs;
    a.held_h += static_cast<double>(h.alloc_gpu_ms) / kHourMs;
    a.has_hours = true;
  }
  Report Finish() override {
    Report out =
        Start({"key", "gpu_hours_allocated", "gpu_hours_effective", "util_mean", "gpu_hours_unused",
               "idle_share", "gpu_hours_installed", "allocated_share"});
    for (auto& [key, a] : placed_) acc_.emplace(key, a);
    for (const auto& [key, a] : acc_) {
      const double util = a.measured_h > 0 ? 100 * a.effective_h / a.measured_h : NAN;
      const double effective = a.alloc_h * util / 100.0;
      out.rows.push_back(
          {key, a.alloc_h, Num(effective), Num(util), Num(a.alloc_h - effective),
           Num(a.alloc_h > 0 ? 1 - util / 100.0 : NAN), a.has_hours ? Num(a.installed_h) : Cell(),
           a.has_hours && a.installed_h > 0 ? Num(a.held_h / a.installed_h) : Cell()});
    }
    return out;
  }

 private:
  bool ByPlacement() const { return req_.by == "node" || req_.by == "gpu"; }
  struct Acc {
    double alloc_h = 0, measured_h = 0, effective_h = 0;  // the ledger's
    double installed_h = 0, held_h = 0;                   // the pools' hours'
    bool has_hours = false;
  };
  std::map<std::string, Acc> acc_;
  // By node or GPU: by key, unordered until Finish.
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  std::unordered_map<std::string, Acc, Hash, std::equal_to<>> placed_;
  std::string key_;  // a GPU's key, "node:index"
};

class Cost : public Base {
 public:
  using Base::Base;
  bool wants_hours() const override { return true; }
  bool wants_records() const override { return true; }
  bool wants_days() const override { return true; }
  void Add(const store::UsageRecord& r) override { AddAsDay(r); }
  void AddDay(const store::UsageDay& d) override {
    if (d.gpu_ms <= 0) return;
    const double hours = d.gpu_ms * kHourOfMs;
    const double cost = hours * Rate(d.gpu_model, d.cluster);
    const std::string key = KeyOf(d);
    Acc& a = acc_[key];
    a.gpu_h += hours;
    a.cost += cost;
    pools_[d.pool].cost_by_key[key] += cost;
  }
  void AddHour(const store::PoolHour& h) override {
    PoolAcc& p = pools_[h.pool];
    p.model = h.gpu_model;
    p.cluster = h.cluster;
    p.installed_h += static_cast<double>(h.gpu_ms) / kHourMs;
    p.held_h += static_cast<double>(h.alloc_gpu_ms) / kHourMs;
    if (ByPoolHours()) acc_[KeyOf(h)];  // a pool nobody used still shows its idle cost
  }
  Report Finish() override {
    for (const auto& [pool, p] : pools_) {
      const double idle = std::max(0.0, p.installed_h - p.held_h) * Rate(p.model, p.cluster);
      if (idle <= 0) continue;
      if (ByPoolHours()) {
        store::UsageDay d;
        d.pool = pool;
        d.cluster = p.cluster;
        d.gpu_model = p.model;
        acc_[KeyOf(d)].idle_cost += idle;
        continue;
      }
      double total = 0;
      for (const auto& [key, c] : p.cost_by_key) total += c;
      if (!req_.share_idle || total <= 0) {
        acc_[kIdleKey].idle_cost += idle;
        continue;
      }
      for (const auto& [key, c] : p.cost_by_key) acc_[key].idle_cost += idle * c / total;
    }
    Report out =
        Start({"key", "gpu_hours", "cost", "idle_cost", "total_cost", "budget", "budget_used"});
    out.currency = ctx_.rates.currency;
    const double months = static_cast<double>(req_.to_ms - req_.from_ms) / kMonthMs;
    for (const auto& [key, a] : acc_) {
      Cell budget, used;
      if (req_.by == "team") {
        if (auto it = ctx_.team_budget.find(key); it != ctx_.team_budget.end() && it->second > 0) {
          const double b = it->second * months;
          budget = b;
          used = (a.cost + a.idle_cost) / b;
        }
      }
      out.rows.push_back({key, a.gpu_h, a.cost, a.idle_cost, a.cost + a.idle_cost, budget, used});
    }
    return out;
  }

 private:
  struct Acc {
    double gpu_h = 0, cost = 0, idle_cost = 0;
  };
  struct PoolAcc {
    std::string model, cluster;
    double installed_h = 0, held_h = 0;
    std::map<std::string, double> cost_by_key;
  };
  std::map<std::string, Acc> acc_;
  std::map<std::string, PoolAcc> pools_;
};

class Energy : public Base {
 public:
  using Base::Base;
  bool wants_hours() const override { return true; }
  bool wants_records() const override { return !ByPoolHours(); }
  bool wants_days() const override { return !ByPoolHours(); }
  void Add(const store::UsageRecord& r) override { AddAsDay(r); }
  void AddDay(const store::UsageDay& d) override {
    if (d.gpu_ms <= 0) return;
    Acc& a = acc_[KeyOf(d)];
    a.joules += d.energy_j;
    a.gpu_h += d.gpu_ms * kHourOfMs;
    a.idle_joules += d.idle_energy_j;
  }
  void AddHour(const store::PoolHour& h) override {
    if (!ByPoolHours()) {  // the energy of GPUs no job held is nobody's: OpenCost's idle item
      Acc& a = acc_[kIdleKey];
      a.joules += static_cast<double>(h.free_energy_j);
      a.idle_joules += static_cast<double>(h.free_energy_j);
      return;
    }
    Acc& a = acc_[KeyOf(h)];
    a.joules += static_cast<double>(h.energy_j);
    a.idle_joules += static_cast<double>(h.free_energy_j + h.idle_energy_j);
    a.gpu_h += static_cast<double>(h.alloc_gpu_ms) / kHourMs;
  }
  Report Finish() override {
    Report out = Start({"key", "kwh", "cost", "gpu_hours", "gpu_hours_per_kwh", "idle_share"});
    out.currency = ctx_.rates.currency;
    for (const auto& [key, a] : acc_) {
      const double kwh = a.joules / 3.6e6;
      out.rows.push_back({key, kwh, kwh * ctx_.rates.energy_kwh, a.gpu_h,
                          kwh > 0 ? Num(a.gpu_h / kwh) : Cell(),
                          a.joules > 0 ? Num(a.idle_joules / a.joules) : Cell()});
    }
    return out;
  }

 private:
  struct Acc {
    double joules = 0, idle_joules = 0, gpu_h = 0;
  };
  std::map<std::string, Acc> acc_;
};

class Queue : public Base {
 public:
  using Base::Base;
  bool wants_hours() const override { return false; }
  bool wants_records() const override { return true; }
  uint32_t columns() const override {
    return store::UsageQuery::kTeam | store::UsageQuery::kPool | store::UsageQuery::kWait |
           store::UsageQuery::kOutcome;
  }
  void Add(const store::UsageRecord& r) override {
    // Each start in the period, on its day (UTC); a move is not a wait.
    if (r.start_ms < req_.from_ms || r.start_ms >= req_.to_ms) return;
    const store::UsageFigures& f = FiguresOf(r, scratch_);
    if (f.outcome == "moved") return;
    const std::string& key = req_.by == "team" ? r.team : r.pool;
    auto it = waits_.find(key);
    if (it == waits_.end()) it = waits_.emplace(key, Days()).first;
    it->second[r.start_ms / store::kUsageDayMs].push_back(static_cast<double>(f.wait_ms) / 1000.0);
  }
  void AddHour(const store::PoolHour&) override {}
  Report Finish() override {
    Report out = Start({"key", "day", "starts", "wait_p50_s", "wait_p95_s", "wait_max_s"});
    for (auto& [key, days] : waits_) {
      for (auto& [day, w] : days) {
        const double max = *std::max_element(w.begin(), w.end());
        const double n = static_cast<double>(w.size());
        const double p50 = Percentile(w, 50), p95 = Percentile(w, 95);
        out.rows.push_back(
            {key, FormatTime(day * store::kUsageDayMs).substr(0, 10), n, p50, p95, max});
      }
    }
    return out;
  }

 private:
  using Days = std::map<int64_t, std::vector<double>>;  // day number (UTC) -> waits, s
  std::map<std::string, Days, std::less<>> waits_;
};

class Peaks : public Base {
 public:
  using Base::Base;
  bool wants_hours() const override { return true; }
  bool wants_records() const override { return false; }
  void Add(const store::UsageRecord&) override {}
  void AddHour(const store::PoolHour& h) override {
    if (h.covered_ms <= 0) return;
    // The pool's mean GPUs over the part of the hour that was recorded, summed over the
    // key's pools.
    const double covered = static_cast<double>(h.covered_ms);
    Gpus& g = acc_[{KeyOf(h), HourOfWeek(h.hour_ms)}][h.hour_ms];
    g.allocated += static_cast<double>(h.alloc_gpu_ms) / covered;
    g.queued += static_cast<double>(h.queued_gpu_ms) / covered;
    g.installed += static_cast<double>(h.gpu_ms) / covered;
  }
  Report Finish() override {
    Report out = Start({"key", "hour_of_week", "gpus_allocated", "gpus_queued", "gpus_demand",
                        "gpus_installed", "hours"});
    for (const auto& [k, hours] : acc_) {
      Gpus mean;  // over the hours of the week with data
      for (const auto& [hour, g] : hours) {
        mean.allocated += g.allocated;
        mean.queued += g.queued;
        mean.installed += g.installed;
      }
      const double n = static_cast<double>(hours.size());
      char when[16];
      std::snprintf(when, sizeof when, "%s %02d:00", kDays[k.second / 24], k.second % 24);
      out.rows.push_back({k.first, std::string(when), mean.allocated / n, mean.queued / n,
                          (mean.allocated + mean.queued) / n, mean.installed / n, n});
    }
    return out;
  }

 private:
  // 0 = Monday 00:00 UTC ... 167 = Sunday 23:00 (1970-01-01 was a Thursday).
  static int HourOfWeek(int64_t ms) {
    const int64_t hours = ms / 3'600'000;
    return static_cast<int>(((hours / 24 + 3) % 7) * 24 + hours % 24);
  }
  struct Gpus {
    double allocated = 0, queued = 0, installed = 0;
  };
  std::map<std::pair<std::string, int>, std::map<int64_t, Gpus>> acc_;
};

}  // namespace

std::vector<std::pair<std::string, std::vector<int>>> ParsePlacement(const std::string& text) {
  std::vector<std::pair<std::string, std::vector<int>>> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(';', start);
    if (end == std::string::npos) end = text.size();
    const std::string part = text.substr(start, end - start);
    const size_t colon = part.rfind(':');
    if (colon != std::string::npos) {
      std::vector<int> gpus;
      const char* p = part.data() + colon + 1;
      const char* e = part.data() + part.size();
      while (p < e) {
        int g = 0;
        auto [next, ec] = std::from_chars(p, e, g);
        if (ec != std::errc()) break;
        gpus.push_back(g);
        p = next < e ? next + 1 : next;
      }
      out.emplace_back(part.substr(0, colon), std::move(gpus));
    }
    start = end + 1;
  }
  return out;
}

std::optional<ReportKind> ParseReportKind(std::string_view name) {
  if (name == "utilization") return ReportKind::kUtilization;
  if (name == "cost") return ReportKind::kCost;
  if (name == "energy") return ReportKind::kEnergy;
  if (name == "queue") return ReportKind::kQueue;
  if (name == "peaks") return ReportKind::kPeaks;
  return std::nullopt;
}

const std::vector<std::string>& ReportDimensions(ReportKind kind) {
  static const std::vector<std::string> kUtil{"team",  "project", "pool", "cluster",
                                              "model", "node",    "gpu"};
  static const std::vector<std::string> kMoney{"team", "project", "pool", "cluster", "model"};
  static const std::vector<std::string> kQueue{"pool", "team"};
  static const std::vector<std::string> kPeaks{"fleet", "pool", "cluster", "model"};
  switch (kind) {
    case ReportKind::kUtilization:
      return kUtil;
    case ReportKind::kCost:
    case ReportKind::kEnergy:
      return kMoney;
    case ReportKind::kQueue:
      return kQueue;
    case ReportKind::kPeaks:
      break;
  }
  return kPeaks;
}

Result<std::unique_ptr<ReportBuilder>> ReportBuilder::Make(ReportRequest req, ReportContext ctx) {
  const auto& dims = ReportDimensions(req.kind);
  if (req.by.empty()) req.by = dims.front();
  if (std::find(dims.begin(), dims.end(), req.by) == dims.end()) {
    std::string known;
    for (const auto& d : dims) known += (known.empty() ? "" : ", ") + d;
    return MakeError(ErrorCode::kInvalidArgument,
                     "'by' must be one of " + known + ", not '" + req.by + "'");
  }
  if (!ctx.catalog) ctx.catalog = GpuCatalog::Builtin().get();
  switch (req.kind) {
    case ReportKind::kUtilization:
      return std::unique_ptr<ReportBuilder>(new Utilization(std::move(req), std::move(ctx)));
    case ReportKind::kCost:
      return std::unique_ptr<ReportBuilder>(new Cost(std::move(req), std::move(ctx)));
    case ReportKind::kEnergy:
      return std::unique_ptr<ReportBuilder>(new Energy(std::move(req), std::move(ctx)));
    case ReportKind::kQueue:
      return std::unique_ptr<ReportBuilder>(new Queue(std::move(req), std::move(ctx)));
    case ReportKind::kPeaks:
      break;
  }
  return std::unique_ptr<ReportBuilder>(new Peaks(std::move(req), std::move(ctx)));
}

namespace {

int64_t FloorDay(int64_t ms) {
  const int64_t d = ms / store::kUsageDayMs - (ms % store::kUsageDayMs < 0 ? 1 : 0);
  return d * store::kUsageDayMs;
}

// The records with figures that overlap [from, to), each as its part inside. The daily sums of
// those days bound how long such a record is, and so how late it can have ended: the scan
// reads the records that ended in [from, to + that), not all those after `from`.
Status AddEdge(store::UsageStore& store, ReportBuilder& b, int64_t from, int64_t to,
               const std::string& cluster) {
  if (to <= from) return {};
  int64_t span = 0;
  GF_TRY_ASSIGN(span, store.MaxUsageSpan(FloorDay(from), to));
  if (span <= 0) return {};
  store::UsageQuery q;
  q.from_ms = from;
  q.to_ms = to;
  q.end_before_ms = span < INT64_MAX - to ? to + span : INT64_MAX;
  q.cluster = cluster;
  q.rows = store::UsageQuery::Rows::kWithFigures;
  q.columns = store::UsageQuery::kTeam | store::UsageQuery::kProject | store::UsageQuery::kPool |
              store::UsageQuery::kCluster | store::UsageQuery::kModel | store::UsageQuery::kUtil |
              store::UsageQuery::kEnergy;
  return store.ScanUsage(
      q, [&](const store::UsageRecord& r) { b.AddDay(store::UsagePiece(r, from, to)); });
}

// The ledger through its daily sums: the whole days inside [from, to), the records at its
// ends, and each record from before the sums (before migration 18) whole.
Status AddDays(store::UsageStore& store, ReportBuilder& b, const ReportRequest& req,
               const std::string& cluster) {
  const int64_t first = FloorDay(req.from_ms) == req.from_ms
                            ? req.from_ms
                            : FloorDay(req.from_ms) + store::kUsageDayMs;
  const int64_t last = FloorDay(req.to_ms);
  if (first < last) {
    auto days = store.ListUsageDays(first, last, cluster);
    if (!days.ok()) return days.error();
    for (const auto& d : days.value()) b.AddDay(d);
    GF_TRY(AddEdge(store, b, req.from_ms, first, cluster));
    GF_TRY(AddEdge(store, b, last, req.to_ms, cluster));
  } else {
    GF_TRY(AddEdge(store, b, req.from_ms, req.to_ms, cluster));
  }
  store::UsageQuery q;
  q.from_ms = req.from_ms;
  q.to_ms = req.to_ms;
  q.cluster = cluster;
  q.rows = store::UsageQuery::Rows::kDocumentOnly;
  return store.ScanUsage(q, [&](const store::UsageRecord& r) { b.Add(r); });
}

}  // namespace

Result<Report> RunReport(store::UsageStore& store, const ReportRequest& request,
                         ReportContext context, const std::string& cluster) {
  std::unique_ptr<ReportBuilder> b;
  GF_TRY_ASSIGN(b, ReportBuilder::Make(request, std::move(context)));
  if (b->wants_days()) {
    GF_TRY(AddDays(store, *b, request, cluster));
  } else if (b->wants_records()) {
    store::UsageQuery q;
    q.from_ms = request.from_ms;
    q.to_ms = request.to_ms;
    q.cluster = cluster;
    q.columns = b->columns();
    GF_TRY(store.ScanUsage(q, [&](const store::UsageRecord& r) { b->Add(r); }));
  }
  if (b->wants_hours()) {
    auto hours = store.ListPoolHours(request.from_ms / 3'600'000 * 3'600'000, request.to_ms);
    if (!hours.ok()) return hours.error();
    for (const auto& h : hours.value()) {
      if (cluster.empty() || h.cluster == cluster) b->AddHour(h);
    }
  }
  return b->Finish();
}

std::string ReportCsv(const Report& report) {
  std::string out;
  for (size_t i = 0; i < report.columns.size(); ++i) {
    out += (i ? "," : "") + report.columns[i];
  }
  out += '\n';
  for (const auto& row : report.rows) {
    for (size_t i = 0; i < row.size(); ++i) {
      if (i) out += ',';
      if (const auto* d = std::get_if<double>(&row[i])) {
        char buf[64];
        auto [end, ec] = std::to_chars(buf, buf + sizeof buf, *d);
        out.append(buf, ec == std::errc() ? end : buf);
      } else if (const auto* s = std::get_if<std::string>(&row[i])) {
        AppendCsvField(out, *s);
      }
    }
    out += '\n';
  }
  return out;
}

}  // namespace gpufleet::usage
