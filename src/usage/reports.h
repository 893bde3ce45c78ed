#pragma once
// Reports over the usage ledger and the pools' hours (store::PoolHour): utilization (allocated
// against effective), cost (OpenCost's rules: a workload is charged what it was allocated, the
// idle cost is the installed less the allocated, shared in proportion to cost), energy, queue
// waits and peak periods. A ReportBuilder takes the records one at a time, so that a million of
// them stream through in the memory of the answer, and tests feed it fixtures.

#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/result.h"
#include "model/catalog.h"
#include "store/store.h"

namespace gpufleet::usage {

// Prices: per GPU-hour by model (and site), and energy per kWh.
struct Rates {
  std::string currency = "USD";
  // A round placeholder, not a sourced price: set yours.
  double energy_kwh = 0.10;
  // OpenCost's default GPU price (configs/default.json), for a model with no price of its own.
  double default_gpu_hour = 0.95;
  struct Rate {
    std::string model;  // a catalogue id
    std::string site;   // empty: every site
    double gpu_hour = 0;
    bool operator==(const Rate&) const = default;
  };
  std::vector<Rate> gpu_hour;  // over the catalogue's price_per_gpu_hour
  // The price of a GPU-hour of `model` at `site`: the rate for both, else the model's rate for
  // every site, else the catalogue's price, else default_gpu_hour.
  double GpuHour(const GpuCatalog& catalog, const std::string& model,
                 const std::string& site) const;
};
// The stored and API form: {"currency", "energy_kwh", "default_gpu_hour",
// "gpu_hour": [{"model", "site", "price"}]}. Strict: an unknown model or field is an error.
Result<Rates> ParseRates(std::string_view json_text, const GpuCatalog& catalog);
std::string RatesJson(const Rates& rates);

enum class ReportKind { kUtilization, kCost, kEnergy, kQueue, kPeaks };
std::optional<ReportKind> ParseReportKind(std::string_view name);
// The `by` values a kind takes; the first is its default.
const std::vector<std::string>& ReportDimensions(ReportKind kind);

struct ReportRequest {
  ReportKind kind = ReportKind::kUtilization;
  int64_t from_ms = 0, to_ms = 0;
  std::string by;          // empty: the kind's default
  bool share_idle = true;  // cost: idle cost shared to teams; false: an "__idle__" item
};

// What the reports need to know of the fleet now.
struct ReportContext {
  const GpuCatalog* catalog = nullptr;              // null: the built-in one
  std::map<std::string, std::string> cluster_site;  // cluster -> site
  std::map<std::string, double> team_budget;        // team -> monthly budget
  Rates rates;
};

// A report: named columns ("key" first) and a row per item; a cell is a number, text or null.
using Cell = std::variant<std::monostate, double, std::string>;
struct Report {
  std::string by;
  std::string currency;  // of the money columns; empty: none
  std::vector<std::string> columns;
  std::vector<std::vector<Cell>> rows;
};

class ReportBuilder {
 public:
  // Checks `by` against the kind (kInvalidArgument naming the known ones).
  static Result<std::unique_ptr<ReportBuilder>> Make(ReportRequest request, ReportContext context);
  virtual ~ReportBuilder() = default;
  // Each ledger record that overlaps the period (the store's scan), and each pool hour in it.
  virtual void Add(const store::UsageRecord& record) = 0;
  virtual void AddHour(const store::PoolHour& hour) = 0;
  virtual Report Finish() = 0;
  // Whether it reads the pools' hours / the ledger at all.
  virtual bool wants_hours() const = 0;
  virtual bool wants_records() const = 0;
  // Whether it only adds the ledger up (by team, project, pool, cluster or model): RunReport
  // then hands it the ledger's daily sums of the days inside the period and the parts inside
  // it of the records at its ends, not each record.
  virtual bool wants_days() const = 0;
  virtual void AddDay(const store::UsageDay& day) = 0;
  // The columns Add reads (store::UsageQuery::Column).
  virtual uint32_t columns() const = 0;
};

// Runs a report over the store's ledger (its daily sums, or its records streamed a batch at
// a time) and pools' hours in [from, to); `cluster` non-empty: that cluster's only.
Result<Report> RunReport(store::UsageStore& store, const ReportRequest& request,
                         ReportContext context, const std::string& cluster = "");

// The figures of a record: its columns, or its document for one stored before they existed.
store::UsageFigures FiguresOf(const store::UsageRecord& record);
// The same without a copy: the record's own columns, or `scratch` filled from its document.
const store::UsageFigures& FiguresOf(const store::UsageRecord& record,
                                     store::UsageFigures& scratch);

// A record's placement: "node-a:0,1;node-b:2" -> {node-a: [0, 1], node-b: [2]}.
std::vector<std::pair<std::string, std::vector<int>>> ParsePlacement(const std::string& text);

// The CSV of a report: a header of its columns, a line per row (text quoted where it needs).
std::string ReportCsv(const Report& report);

// The ledger's CSV export (GET /api/v1/usage/export): the header, then a line per record from
// its columns (its document's figures for one from before them): id, job, team, project,
// cluster, pool, gpu_model, gpus, nodes ("node:0,1;node-b:2"), start, end (RFC 3339), wait_s,
// outcome, gpu_hours, util_mean, util_p95 (%; empty: no samples), mem_peak_mib, energy_j.
std::string LedgerCsvHeader();
void AppendLedgerCsv(std::string& out, const store::UsageRecord& record);
// The export a part at a time: the header and the first page's lines, then a page's lines each
// call (one short store read of kPage records by id), then "" at the end.
class LedgerExport {
 public:
  static constexpr int64_t kPage = 4096;
  LedgerExport(store::UsageStore& store, store::UsageQuery query);
  Result<std::string> Next();

 private:
  store::UsageStore& store_;
  store::UsageQuery query_;
  bool started_ = false, done_ = false;
};

}  // namespace gpufleet::usage
