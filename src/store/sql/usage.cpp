// The embedded store: the usage ledger.

#include "store/sql/sql_store.h"

namespace gpufleet::store::sql {

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
             "placement, outcome) VALUES (:j, :t, :p, :o, :c, :s, :e, :d, :m, :g, :w, :u, :u95, "
             ":mem, :en, :pl, :oc)",
          soci::use(job), soci::use(r.team), soci::use(r.project), soci::use(r.pool),
          soci::use(r.cluster), soci::use(start), soci::use(end), soci::use(r.doc),
          soci::use(f.gpu_model), soci::use(gpus), soci::use(wait), soci::use(util), soci::use(p95),
          soci::use(mem), soci::use(energy), soci::use(f.placement), soci::use(f.outcome);
    }
    tx.commit();
    return {};
  });
}

namespace {

// The WHERE clause of a usage query; its values are bound in this order by Bind.
constexpr const char* kWhere =
    " WHERE end_ms >= :from AND start_ms < :to AND (:t1 = '' OR team = :t2) "
    "AND (:p1 = '' OR project = :p2) AND (:o1 = '' OR pool = :o2) "
    "AND (:c1 = '' OR cluster = :c2)";

}  // namespace

Result<std::vector<UsageRecord>> SqlStore::ListUsage(const UsageQuery& q, int64_t* total) {
  return Run([&](soci::session& sql) -> Result<std::vector<UsageRecord>> {
    long long from = q.from_ms, to = q.to_ms, limit = std::max<int64_t>(0, q.limit),
              offset = std::max<int64_t>(0, q.offset);
    if (total) {
      long long n = 0;
      sql << std::string("SELECT COUNT(*) FROM usage_records") + kWhere, soci::into(n),
          soci::use(from), soci::use(to), soci::use(q.team), soci::use(q.team),
          soci::use(q.project), soci::use(q.project), soci::use(q.pool), soci::use(q.pool),
          soci::use(q.cluster), soci::use(q.cluster);
      *total = n;
    }
    std::vector<UsageRecord> out;
    UsageRecord r;
    long long id = 0, job = 0, start = 0, end = 0;
    soci::statement st = Once(
        sql,
        std::string("SELECT id, job, team, project, pool, cluster, start_ms, end_ms, doc "
                    "FROM usage_records") +
            kWhere + " ORDER BY end_ms DESC, id DESC LIMIT :l OFFSET :f",
        soci::into(id), soci::into(job), soci::into(r.team), soci::into(r.project),
        soci::into(r.pool), soci::into(r.cluster), soci::into(start), soci::into(end),
        soci::into(r.doc), soci::use(from), soci::use(to), soci::use(q.team), soci::use(q.team),
        soci::use(q.project), soci::use(q.project), soci::use(q.pool), soci::use(q.pool),
        soci::use(q.cluster), soci::use(q.cluster), soci::use(limit), soci::use(offset));
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
  return Run([&](soci::session& sql) -> Status {
    // A batch at a time into vectors: a million records cost a batch's memory, and far less
    // time than a row at a time.
    constexpr size_t kBatch = 4096;
    long long from = q.from_ms, to = q.to_ms;
    std::vector<long long> job(kBatch), start(kBatch), end(kBatch), gpus(kBatch), wait(kBatch),
        util(kBatch), p95(kBatch), mem(kBatch), energy(kBatch);
    std::vector<std::string> team(kBatch), project(kBatch), pool(kBatch), cluster(kBatch),
        model(kBatch), placement(kBatch), outcome(kBatch), doc(kBatch);
    soci::statement st =
        (sql.prepare << std::string(
                            "SELECT job, team, project, pool, cluster, start_ms, end_ms, "
                            "gpu_model, gpus, wait_ms, util_milli, util_p95_milli, mem_peak_mib, "
                            "energy_j, placement, outcome, CASE WHEN gpus = 0 THEN doc ELSE '' END "
                            "FROM usage_records") +
                            kWhere,
         soci::into(job), soci::into(team), soci::into(project), soci::into(pool),
         soci::into(cluster), soci::into(start), soci::into(end), soci::into(model),
         soci::into(gpus), soci::into(wait), soci::into(util), soci::into(p95), soci::into(mem),
         soci::into(energy), soci::into(placement), soci::into(outcome), soci::into(doc),
         soci::use(from), soci::use(to), soci::use(q.team), soci::use(q.team), soci::use(q.project),
         soci::use(q.project), soci::use(q.pool), soci::use(q.pool), soci::use(q.cluster),
         soci::use(q.cluster));
    st.execute();
    UsageRecord r;
    while (st.fetch()) {
      for (size_t i = 0; i < job.size(); ++i) {
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
        fn(r);
      }
      for (auto* v : {&job, &start, &end, &gpus, &wait, &util, &p95, &mem, &energy}) {
        v->resize(kBatch);
      }
      for (auto* v : {&team, &project, &pool, &cluster, &model, &placement, &outcome, &doc}) {
        v->resize(kBatch);
      }
    }
    return {};
  });
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
    long long before = before_ms;
    soci::statement st =
        Once(sql, "DELETE FROM usage_records WHERE end_ms < :b", soci::use(before));
    st.execute(true);
    return static_cast<int64_t>(st.get_affected_rows());
  });
}

}  // namespace gpufleet::store::sql
