// The ledger as CSV (GET /api/v1/usage?format=csv and /usage/export, streamed in pages), and
// a record's figures from its columns or, for records stored before them, its document.

#include <charconv>

#include "common/csv.h"
#include "usage/ledger.h"
#include "usage/reports.h"

namespace gpufleet::usage {
namespace {
constexpr double kHourMs = 3.6e6;
}  // namespace

const store::UsageFigures& FiguresOf(const store::UsageRecord& r, store::UsageFigures& scratch) {
  if (r.figures.gpus > 0 || r.doc.empty()) return r.figures;
  scratch = FiguresOf(r);
  return scratch;
}

store::UsageFigures FiguresOf(const store::UsageRecord& r) {
  if (r.figures.gpus > 0 || r.doc.empty()) return r.figures;
  store::UsageFigures f;
  auto e = EntryFromRecord(r);
  if (!e.ok()) return f;
  return Figures(e.value());
}

std::string LedgerCsvHeader() {
  return "id,job,team,project,cluster,pool,gpu_model,gpus,nodes,start,end,wait_s,outcome,"
         "gpu_hours,util_mean,util_p95,mem_peak_mib,energy_j,source,external_id\n";
}

void AppendLedgerCsv(std::string& out, const store::UsageRecord& r) {
  store::UsageFigures scratch;
  const store::UsageFigures& f = FiguresOf(r, scratch);
  auto number = [&out](double v) {
    char buf[32];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, ec == std::errc() ? end : buf);
    out += ',';
  };
  auto integer = [&out](int64_t v) {
    char buf[24];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, end);
    out += ',';
  };
  auto text = [&out](const std::string& v) {
    AppendCsvField(out, v);
    out += ',';
  };
  integer(r.id);
  integer(r.job);
  for (const std::string* v : {&r.team, &r.project, &r.cluster, &r.pool, &f.gpu_model}) text(*v);
  integer(f.gpus);
  text(f.placement);
  text(FormatTime(r.start_ms));
  text(FormatTime(r.end_ms));
  number(static_cast<double>(f.wait_ms) / 1000.0);
  text(f.outcome);
  number(static_cast<double>(f.gpus) * static_cast<double>(r.end_ms - r.start_ms) / kHourMs);
  if (f.util_milli >= 0) {
    number(static_cast<double>(f.util_milli) / 1000.0);
  } else {
    out += ',';
  }
  if (f.util_p95_milli >= 0) {
    number(static_cast<double>(f.util_p95_milli) / 1000.0);
  } else {
    out += ',';
  }
  if (f.mem_peak_mib >= 0) {
    integer(f.mem_peak_mib);
  } else {
    out += ',';
  }
  integer(f.energy_j);
  text(f.source.empty() ? "gpufleet" : f.source);
  text(f.external_id);
  out.back() = '\n';
}

LedgerExport::LedgerExport(store::UsageStore& store, store::UsageQuery query)
    : store_(store), query_(std::move(query)) {
  query_.page = kPage;
  query_.after_id = 0;
}

Result<std::string> LedgerExport::Next() {
  std::string out;
  if (!started_) {
    out = LedgerCsvHeader();
    started_ = true;
  }
  if (done_) return out;
  int64_t n = 0;
  GF_TRY(store_.ScanUsage(query_, [&](const store::UsageRecord& record) {
    AppendLedgerCsv(out, record);
    query_.after_id = record.id;
    ++n;
  }));
  done_ = n < kPage;
  return out;
}

}  // namespace gpufleet::usage
