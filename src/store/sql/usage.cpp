// The embedded store: the usage ledger.

#include "store/sql/sql_store.h"

namespace gpufleet::store::sql {

Status SqlStore::AppendUsage(const std::vector<UsageRecord>& records) {
  if (records.empty()) return {};
  return Run([&](soci::session& sql) -> Status {
    soci::transaction tx(sql);
    for (const auto& r : records) {
      long long job = r.job, start = r.start_ms, end = r.end_ms;
      sql << "INSERT INTO usage_records (job, team, project, pool, cluster, start_ms, end_ms, "
             "doc) VALUES (:j, :t, :p, :o, :c, :s, :e, :d)",
          soci::use(job), soci::use(r.team), soci::use(r.project), soci::use(r.pool),
          soci::use(r.cluster), soci::use(start), soci::use(end), soci::use(r.doc);
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
