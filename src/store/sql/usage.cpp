// The embedded store: the usage ledger.

#include <soci/sqlite3/soci-sqlite3.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <stdexcept>
#include <tuple>

#include "store/sql/sql_store.h"

namespace gpufleet::store::sql {
namespace {

// Daily sums by day and key, as a batch of records adds up before it is written.
using DayKey = std::tuple<int64_t, std::string, std::string, std::string, std::string, std::string>;
using DaySums = std::map<DayKey, UsageDay>;

void AddDays(const UsageRecord& r, DaySums& sums) {
  for (auto& d : UsageDaysOf(r)) {
    auto [it, added] =
        sums.try_emplace(DayKey{d.day_ms, d.team, d.project, d.pool, d.cluster, d.gpu_model}, d);
    if (!added) AddTo(it->second, d);
  }
}

// Adds each sum to its stored day (a new one starts at zero); the caller's transaction.
void WriteDays(soci::session& sql, const DaySums& sums) {
  for (const auto& [key, d] : sums) {
    long long day = d.day_ms, gpu = std::llround(d.gpu_ms),
              measured = std::llround(d.measured_gpu_ms),
              effective = std::llround(d.effective_gpu_ms), energy = std::llround(d.energy_j),
              idle = std::llround(d.idle_energy_j), span = d.max_span_ms;
    sql << "INSERT INTO usage_days (day_ms, team, project, pool, cluster, gpu_model, gpu_ms, "
           "measured_gpu_ms, effective_gpu_ms, energy_j, idle_energy_j, max_span_ms) VALUES (:d, "
           ":t, :p, :o, :c, :m, :g, :ms, :ef, :e, :i, :s) "
           "ON CONFLICT (day_ms, team, project, pool, cluster, gpu_model) DO UPDATE SET "
           "gpu_ms = usage_days.gpu_ms + excluded.gpu_ms, "
           "measured_gpu_ms = usage_days.measured_gpu_ms + excluded.measured_gpu_ms, "
           "effective_gpu_ms = usage_days.effective_gpu_ms + excluded.effective_gpu_ms, "
           "energy_j = usage_days.energy_j + excluded.energy_j, "
           "idle_energy_j = usage_days.idle_energy_j + excluded.idle_energy_j, "
           "max_span_ms = CASE WHEN excluded.max_span_ms > usage_days.max_span_ms "
           "THEN excluded.max_span_ms ELSE usage_days.max_span_ms END",
        soci::use(day), soci::use(d.team), soci::use(d.project), soci::use(d.pool),
        soci::use(d.cluster), soci::use(d.gpu_model), soci::use(gpu), soci::use(measured),
        soci::use(effective), soci::use(energy), soci::use(idle), soci::use(span);
  }
}

// The WHERE clause of a usage query; its values are bound in this order. `end` is how it names
// end_ms: "+end_ms" keeps SQLite off the column's index, for a scan of most of the table.
std::string Where(const char* end = "end_ms") {
  return std::string(" WHERE ") + end + " >= :from AND start_ms < :to AND " + end +
         " < :eb AND (:t1 = '' OR team = :t2) AND (:p1 = '' OR project = :p2) "
         "AND (:o1 = '' OR pool = :o2) AND (:c1 = '' OR cluster = :c2) AND id > :after";
}

// ScanUsage's columns, in order (then the document of a record from before migration 18), and
// what stands in for one the query leaves out.
struct ScanColumn {
  const char* name;
  uint32_t column;  // UsageQuery::Column; 0: always read
  const char* absent;
};
constexpr ScanColumn kScanColumns[] = {{"id", 0, ""},
                                       {"job", 0, ""},
                                       {"team", UsageQuery::kTeam, "''"},
                                       {"project", UsageQuery::kProject, "''"},
                                       {"pool", UsageQuery::kPool, "''"},
                                       {"cluster", UsageQuery::kCluster, "''"},
                                       {"start_ms", 0, ""},
                                       {"end_ms", 0, ""},
                                       {"gpu_model", UsageQuery::kModel, "''"},
                                       {"gpus", 0, ""},
                                       {"wait_ms", UsageQuery::kWait, "0"},
                                       {"util_milli", UsageQuery::kUtil, "-1"},
                                       {"util_p95_milli", UsageQuery::kUtil, "-1"},
                                       {"mem_peak_mib", UsageQuery::kMemory, "-1"},
                                       {"energy_j", UsageQuery::kEnergy, "0"},
                                       {"placement", UsageQuery::kPlacement, "''"},
                                       {"outcome", UsageQuery::kOutcome, "''"},
                                       {"source", UsageQuery::kOutcome, "''"},
                                       {"external_id", UsageQuery::kOutcome, "''"}};

// Whether SQLite should find the records `q` asks for by the index of their ends: not when they
// are most of the ledger (by the span of its ends), where reading the table in its order is
// twice as fast as looking each one up from the index.
bool ByEndIndex(soci::session& sql, const UsageQuery& q) {
  long long first = 0, last = 0;
  soci::indicator i1 = soci::i_null, i2 = soci::i_null;
  sql << "SELECT MIN(end_ms) FROM usage_records", soci::into(first, i1);
  sql << "SELECT MAX(end_ms) FROM usage_records", soci::into(last, i2);
  if (i1 != soci::i_ok || i2 != soci::i_ok || last <= first) return true;
  const double a = static_cast<double>(std::max<int64_t>(q.from_ms, first));
  const double b = static_cast<double>(std::min<int64_t>(q.end_before_ms, last));
  return (b - a) < 0.3 * static_cast<double>(last - first);
}

// ScanUsage on SQLite, through SQLite's own calls: SOCI's copying of every value of a batch
// into vectors costs more than SQLite's reading of them (about 1 s of 2.4 s for a million
// records). `query` is ScanUsage's, its parameters Where()'s.
Status ScanSqlite(soci::session& sql, const std::string& query, const UsageQuery& q,
                  const std::function<void(const UsageRecord&)>& fn) {
  using namespace sqlite_api;
  sqlite3* db = static_cast<soci::sqlite3_session_backend*>(sql.get_backend())->conn_;
  sqlite3_stmt* raw = nullptr;
  if (sqlite3_prepare_v2(db, query.c_str(), -1, &raw, nullptr) != SQLITE_OK) {
    return MakeError(ErrorCode::kUnavailable, std::string("usage scan: ") + sqlite3_errmsg(db));
  }
  std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> st(raw, sqlite3_finalize);
  int n = 0;
  for (int64_t v : {q.from_ms, q.to_ms, q.end_before_ms}) sqlite3_bind_int64(raw, ++n, v);
  for (const std::string* v :
       {&q.team, &q.team, &q.project, &q.project, &q.pool, &q.pool, &q.cluster, &q.cluster}) {
    sqlite3_bind_text(raw, ++n, v->data(), static_cast<int>(v->size()), SQLITE_STATIC);
  }
  sqlite3_bind_int64(raw, ++n, q.after_id);
  auto text = [raw](int column, std::string& out) {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(raw, column));
    out.assign(p ? p : "", static_cast<size_t>(sqlite3_column_bytes(raw, column)));
  };
  // Only the columns asked for: SQLite takes its connection's mutex for each value read, and
  // the others stay as they start (empty, 0 or -1), as ScanUsage's stand-ins for them are.
  const uint32_t want = q.columns;
  auto has = [want](uint32_t column) { return (want & column) != 0; };
  UsageRecord r;
  UsageFigures& f = r.figures;
  int rc;
  while ((rc = sqlite3_step(raw)) == SQLITE_ROW) {
    r.id = sqlite3_column_int64(raw, 0);
    r.job = sqlite3_column_int64(raw, 1);
    if (has(UsageQuery::kTeam)) text(2, r.team);
    if (has(UsageQuery::kProject)) text(3, r.project);
    if (has(UsageQuery::kPool)) text(4, r.pool);
    if (has(UsageQuery::kCluster)) text(5, r.cluster);
    r.start_ms = sqlite3_column_int64(raw, 6);
    r.end_ms = sqlite3_column_int64(raw, 7);
    if (has(UsageQuery::kModel)) text(8, f.gpu_model);
    f.gpus = sqlite3_column_int64(raw, 9);
    if (has(UsageQuery::kWait)) f.wait_ms = sqlite3_column_int64(raw, 10);
    if (has(UsageQuery::kUtil)) {
      f.util_milli = sqlite3_column_int64(raw, 11);
      f.util_p95_milli = sqlite3_column_int64(raw, 12);
    }
    if (has(UsageQuery::kMemory)) f.mem_peak_mib = sqlite3_column_int64(raw, 13);
    if (has(UsageQuery::kEnergy)) f.energy_j = sqlite3_column_int64(raw, 14);
    if (has(UsageQuery::kPlacement)) text(15, f.placement);
    if (has(UsageQuery::kOutcome)) {
      text(16, f.outcome);
      text(17, f.source);
      text(18, f.external_id);
    }
    if (f.gpus == 0) {
      text(19, r.doc);
    } else {
      r.doc.clear();
    }
    fn(r);
  }
  if (rc != SQLITE_DONE) {
    return MakeError(ErrorCode::kUnavailable, std::string("usage scan: ") + sqlite3_errmsg(db));
  }
  return {};
}

// ScanUsage in a session of its own or the migration's.
Status Scan(soci::session& sql, Dialect dialect, const UsageQuery& q,
            const std::function<void(const UsageRecord&)>& fn) {
  // Written out, not bound, so that SQLite takes the index of the records without figures.
  const char* rows = q.rows == UsageQuery::Rows::kWithFigures    ? " AND gpus > 0"
                     : q.rows == UsageQuery::Rows::kDocumentOnly ? " AND gpus = 0"
                                                                 : "";
  std::string query = "SELECT ";
  for (const auto& c : kScanColumns) {
    query += c.column == 0 || (q.columns & c.column) ? c.name : c.absent;
    query += ", ";
  }
  query += "CASE WHEN gpus = 0 THEN doc ELSE '' END FROM usage_records";
  const std::string page = q.page > 0 ? " ORDER BY id LIMIT " + std::to_string(q.page) : "";
  if (dialect == Dialect::kSqlite) {
    // A page is read by id: not by the index of ends either.
    const bool by_end = q.page <= 0 && ByEndIndex(sql, q);
    return ScanSqlite(sql, query + Where(by_end ? "end_ms" : "+end_ms") + rows + page, q, fn);
  }
  query += Where();
  query += rows;
  query += page;
  // A batch at a time into vectors: a million records cost a batch's memory, and far less
  // time than a row at a time.
  constexpr size_t kBatch = 4096;
  long long from = q.from_ms, to = q.to_ms, end_before = q.end_before_ms, after = q.after_id;
  std::vector<long long> id(kBatch), job(kBatch), start(kBatch), end(kBatch), gpus(kBatch),
      wait(kBatch), util(kBatch), p95(kBatch), mem(kBatch), energy(kBatch);
  std::vector<std::string> team(kBatch), project(kBatch), pool(kBatch), cluster(kBatch),
      model(kBatch), placement(kBatch), outcome(kBatch), source(kBatch), external(kBatch),
      doc(kBatch);
  soci::statement st =
      (sql.prepare << query, soci::into(id), soci::into(job), soci::into(team), soci::into(project),
       soci::into(pool), soci::into(cluster), soci::into(start), soci::into(end), soci::into(model),
       soci::into(gpus), soci::into(wait), soci::into(util), soci::into(p95), soci::into(mem),
       soci::into(energy), soci::into(placement), soci::into(outcome), soci::into(source),
       soci::into(external), soci::into(doc), soci::use(from), soci::use(to), soci::use(end_before),
       soci::use(q.team), soci::use(q.team), soci::use(q.project), soci::use(q.project),
       soci::use(q.pool), soci::use(q.pool), soci::use(q.cluster), soci::use(q.cluster),
       soci::use(after));
  st.execute();
  UsageRecord r;
  while (st.fetch()) {
    for (size_t i = 0; i < job.size(); ++i) {
      r.id = id[i];
      r.job = job[i];
      r.team = std::move(team[i]);
      r.project = std::move(project[i]);
      r.pool = std::move(pool[i]);
      r.cluster = std::move(cluster[i]);
      r.start_ms = start[i];
      r.end_ms = end[i];
      r.doc = std::move(doc[i]);
      UsageFigures& f = r.figures;
      f.gpu_model = std::move(model[i]);
      f.gpus = gpus[i];
      f.wait_ms = wait[i];
      f.util_milli = util[i];
      f.util_p95_milli = p95[i];
      f.mem_peak_mib = mem[i];
      f.energy_j = energy[i];
      f.placement = std::move(placement[i]);
      f.outcome = std::move(outcome[i]);
      f.source = std::move(source[i]);
      f.external_id = std::move(external[i]);
      fn(r);
    }
    for (auto* v : {&id, &job, &start, &end, &gpus, &wait, &util, &p95, &mem, &energy}) {
      v->resize(kBatch);
    }
    for (auto* v : {&team, &project, &pool, &cluster, &model, &placement, &outcome, &source,
                    &external, &doc}) {
      v->resize(kBatch);
    }
  }
  return {};
}

}  // namespace

Status SqlStore::AppendUsage(const std::vector<UsageRecord>& records) {
  if (records.empty()) return {};
  return Run([&](soci::session& sql) -> Status {
    soci::transaction tx(sql);
    for (const auto& r : records) {
      const UsageFigures& f = r.figures;
      long long job = r.job, start = r.start_ms, end = r.end_ms, gpus = f.gpus, wait = f.wait_ms,
                util = f.util_milli, p95 = f.util_p95_milli, mem = f.mem_peak_mib,
                energy = f.energy_j;
      sql << "INSERT INTO usage_records (job, team, project, pool, cluster, start_ms, end_ms, "
             "doc, gpu_model, gpus, wait_ms, util_milli, util_p95_milli, mem_peak_mib, energy_j, "
             "placement, outcome, source, external_id) VALUES (:j, :t, :p, :o, :c, :s, :e, :d, "
             ":m, :g, :w, :u, :u95, :mem, :en, :pl, :oc, :src, :ext)",
          soci::use(job), soci::use(r.team), soci::use(r.project), soci::use(r.pool),
          soci::use(r.cluster), soci::use(start), soci::use(end), soci::use(r.doc),
          soci::use(f.gpu_model), soci::use(gpus), soci::use(wait), soci::use(util), soci::use(p95),
          soci::use(mem), soci::use(energy), soci::use(f.placement), soci::use(f.outcome),
          soci::use(f.source), soci::use(f.external_id);
    }
    DaySums days;
    for (const auto& r : records) AddDays(r, days);
    WriteDays(sql, days);
    tx.commit();
    return {};
  });
}

Result<std::vector<UsageRecord>> SqlStore::ListUsage(const UsageQuery& q, int64_t* total) {
  return Run([&](soci::session& sql) -> Result<std::vector<UsageRecord>> {
    long long from = q.from_ms, to = q.to_ms, end_before = q.end_before_ms, after = q.after_id,
              limit = std::max<int64_t>(0, q.limit), offset = std::max<int64_t>(0, q.offset);
    if (total) {
      long long n = 0;
      sql << std::string("SELECT COUNT(*) FROM usage_records") + Where(), soci::into(n),
          soci::use(from), soci::use(to), soci::use(end_before), soci::use(q.team),
          soci::use(q.team), soci::use(q.project), soci::use(q.project), soci::use(q.pool),
          soci::use(q.pool), soci::use(q.cluster), soci::use(q.cluster), soci::use(after);
      *total = n;
    }
    std::vector<UsageRecord> out;
    UsageRecord r;
    long long id = 0, job = 0, start = 0, end = 0;
    soci::statement st =
        Once(sql,
             std::string("SELECT id, job, team, project, pool, cluster, start_ms, end_ms, doc "
                         "FROM usage_records") +
                 Where() + " ORDER BY end_ms DESC, id DESC LIMIT :l OFFSET :f",
             soci::into(id), soci::into(job), soci::into(r.team), soci::into(r.project),
             soci::into(r.pool), soci::into(r.cluster), soci::into(start), soci::into(end),
             soci::into(r.doc), soci::use(from), soci::use(to), soci::use(end_before),
             soci::use(q.team), soci::use(q.team), soci::use(q.project), soci::use(q.project),
             soci::use(q.pool), soci::use(q.pool), soci::use(q.cluster), soci::use(q.cluster),
             soci::use(after), soci::use(limit), soci::use(offset));
    st.execute();
    while (st.fetch()) {
      r.id = id;
      r.job = job;
      r.start_ms = start;
      r.end_ms = end;
      out.push_back(r);
    }
    return out;
  });
}

Status SqlStore::ScanUsage(const UsageQuery& q, const std::function<void(const UsageRecord&)>& fn) {
  return Run([&](soci::session& sql) { return Scan(sql, dialect_, q, fn); });
}

Status SqlStore::AddPoolHours(const std::vector<PoolHour>& deltas) {
  if (deltas.empty()) return {};
  return Run([&](soci::session& sql) -> Status {
    soci::transaction tx(sql);
    for (const auto& h : deltas) {
      long long hour = h.hour_ms, covered = h.covered_ms, gpu = h.gpu_ms, alloc = h.alloc_gpu_ms,
                queued = h.queued_gpu_ms, energy = h.energy_j, free = h.free_energy_j,
                idle = h.idle_energy_j;
      sql << "INSERT INTO pool_hours (pool, hour_ms, cluster, gpu_model, covered_ms, gpu_ms, "
             "alloc_gpu_ms, queued_gpu_ms, energy_j, free_energy_j, idle_energy_j) VALUES (:p, :h, "
             ":c, :m, :cv, :g, :a, :q, :e, :f, :i) "
             "ON CONFLICT (pool, hour_ms) DO UPDATE SET cluster = excluded.cluster, "
             "gpu_model = excluded.gpu_model, "
             "covered_ms = pool_hours.covered_ms + excluded.covered_ms, "
             "gpu_ms = pool_hours.gpu_ms + excluded.gpu_ms, "
             "alloc_gpu_ms = pool_hours.alloc_gpu_ms + excluded.alloc_gpu_ms, "
             "queued_gpu_ms = pool_hours.queued_gpu_ms + excluded.queued_gpu_ms, "
             "energy_j = pool_hours.energy_j + excluded.energy_j, "
             "free_energy_j = pool_hours.free_energy_j + excluded.free_energy_j, "
             "idle_energy_j = pool_hours.idle_energy_j + excluded.idle_energy_j",
          soci::use(h.pool), soci::use(hour), soci::use(h.cluster), soci::use(h.gpu_model),
          soci::use(covered), soci::use(gpu), soci::use(alloc), soci::use(queued),
          soci::use(energy), soci::use(free), soci::use(idle);
    }
    tx.commit();
    return {};
  });
}

Result<std::vector<PoolHour>> SqlStore::ListPoolHours(int64_t from_ms, int64_t to_ms) {
  return Run([&](soci::session& sql) -> Result<std::vector<PoolHour>> {
    long long from = from_ms, to = to_ms, hour = 0, covered = 0, gpu = 0, alloc = 0, queued = 0,
              energy = 0, free = 0, idle = 0;
    PoolHour h;
    std::vector<PoolHour> out;
    soci::statement st = Once(
        sql,
        "SELECT pool, hour_ms, cluster, gpu_model, covered_ms, gpu_ms, alloc_gpu_ms, "
        "queued_gpu_ms, "
        "energy_j, "
        "free_energy_j, idle_energy_j FROM pool_hours WHERE hour_ms >= :f AND hour_ms < :t "
        "ORDER BY hour_ms, pool",
        soci::into(h.pool), soci::into(hour), soci::into(h.cluster), soci::into(h.gpu_model),
        soci::into(covered), soci::into(gpu), soci::into(alloc), soci::into(queued),
        soci::into(energy), soci::into(free), soci::into(idle), soci::use(from), soci::use(to));
    st.execute();
    while (st.fetch()) {
      h.hour_ms = hour;
      h.covered_ms = covered;
      h.gpu_ms = gpu;
      h.alloc_gpu_ms = alloc;
      h.queued_gpu_ms = queued;
      h.energy_j = energy;
      h.free_energy_j = free;
      h.idle_energy_j = idle;
      out.push_back(h);
    }
    return out;
  });
}

Result<int64_t> SqlStore::DeletePoolHoursBefore(int64_t before_ms) {
  return Run([&](soci::session& sql) -> Result<int64_t> {
    long long before = before_ms;
    soci::statement st = Once(sql, "DELETE FROM pool_hours WHERE hour_ms < :b", soci::use(before));
    st.execute(true);
    return static_cast<int64_t>(st.get_affected_rows());
  });
}

Result<int64_t> SqlStore::DeleteUsageBefore(int64_t before_ms) {
  return Run([&](soci::session& sql) -> Result<int64_t> {
    soci::transaction tx(sql);
    long long before = before_ms, day = before_ms / kUsageDayMs * kUsageDayMs;
    soci::statement st =
        Once(sql, "DELETE FROM usage_records WHERE end_ms < :b", soci::use(before));
    st.execute(true);
    const auto deleted = static_cast<int64_t>(st.get_affected_rows());
    // The days that ended before it: what is left of their records is no longer all of them.
    sql << "DELETE FROM usage_days WHERE day_ms < :d", soci::use(day);
    tx.commit();
    return deleted;
  });
}

Result<std::vector<UsageDay>> SqlStore::ListUsageDays(int64_t from_ms, int64_t to_ms,
                                                      const std::string& cluster) {
  return Run([&](soci::session& sql) -> Result<std::vector<UsageDay>> {
    long long from = from_ms, to = to_ms, day = 0, gpu = 0, measured = 0, effective = 0, energy = 0,
              idle = 0, span = 0;
    UsageDay d;
    std::vector<UsageDay> out;
    soci::statement st =
        Once(sql,
             "SELECT day_ms, team, project, pool, cluster, gpu_model, gpu_ms, measured_gpu_ms, "
             "effective_gpu_ms, energy_j, idle_energy_j, max_span_ms FROM usage_days "
             "WHERE day_ms >= :f AND day_ms < :t AND (:c1 = '' OR cluster = :c2) ORDER BY day_ms",
             soci::into(day), soci::into(d.team), soci::into(d.project), soci::into(d.pool),
             soci::into(d.cluster), soci::into(d.gpu_model), soci::into(gpu), soci::into(measured),
             soci::into(effective), soci::into(energy), soci::into(idle), soci::into(span),
             soci::use(from), soci::use(to), soci::use(cluster), soci::use(cluster));
    st.execute();
    while (st.fetch()) {
      d.day_ms = day;
      d.gpu_ms = static_cast<double>(gpu);
      d.measured_gpu_ms = static_cast<double>(measured);
      d.effective_gpu_ms = static_cast<double>(effective);
      d.energy_j = static_cast<double>(energy);
      d.idle_energy_j = static_cast<double>(idle);
      d.max_span_ms = span;
      out.push_back(d);
    }
    return out;
  });
}

Result<int64_t> SqlStore::MaxUsageSpan(int64_t from_ms, int64_t to_ms) {
  return Run([&](soci::session& sql) -> Result<int64_t> {
    long long from = from_ms, to = to_ms, span = 0;
    soci::indicator ind = soci::i_null;
    sql << "SELECT MAX(max_span_ms) FROM usage_days WHERE day_ms >= :f AND day_ms < :t",
        soci::into(span, ind), soci::use(from), soci::use(to);
    return ind == soci::i_ok ? static_cast<int64_t>(span) : 0;
  });
}

void SqlStore::BackfillUsageDays(soci::session& sql) {
  UsageQuery q;
  q.rows = UsageQuery::Rows::kWithFigures;
  q.columns = UsageQuery::kTeam | UsageQuery::kProject | UsageQuery::kPool | UsageQuery::kCluster |
              UsageQuery::kModel | UsageQuery::kUtil | UsageQuery::kEnergy;
  DaySums days;
  Status scanned = Scan(sql, dialect_, q, [&](const UsageRecord& r) { AddDays(r, days); });
  if (!scanned.ok()) throw std::runtime_error(scanned.error().message);
  WriteDays(sql, days);
}

}  // namespace gpufleet::store::sql
