// The SQL store: drift findings, one JSON document each; the compliance posture, one a day.

#include "store/sql/sql_store.h"

namespace gpufleet::store::sql {

Status SqlStore::SaveDriftFindings(const std::vector<DriftRecord>& findings) {
  if (findings.empty()) return {};
  return Run([&](soci::session& sql) -> Status {
    soci::transaction tx(sql);
    long long id = 0, u = 0;
    std::string node, state, doc;
    soci::statement st =
        (sql.prepare << "INSERT INTO drift_findings (id, node, state, doc, updated_ms) "
                        "VALUES (:i, :n, :s, :d, :u) ON CONFLICT (id) DO UPDATE "
                        "SET state = excluded.state, doc = excluded.doc, "
                        "updated_ms = excluded.updated_ms",
         soci::use(id), soci::use(node), soci::use(state), soci::use(doc), soci::use(u));
    for (const auto& f : findings) {
      id = f.id;
      node = f.node;
      state = f.state;
      doc = f.doc;
      u = f.updated_ms;
      st.execute(true);
    }
    tx.commit();
    return {};
  });
}

Result<std::vector<DriftRecord>> SqlStore::ListDriftFindings() {
  return Run([&](soci::session& sql) -> Result<std::vector<DriftRecord>> {
    std::vector<DriftRecord> out;
    DriftRecord r;
    long long id = 0, u = 0;
    soci::statement st = Once(
        sql, "SELECT id, node, state, doc, updated_ms FROM drift_findings ORDER BY id",
        soci::into(id), soci::into(r.node), soci::into(r.state), soci::into(r.doc), soci::into(u));
    st.execute();
    while (st.fetch()) {
      r.id = id;
      r.updated_ms = u;
      out.push_back(r);
    }
    return out;
  });
}

Result<int64_t> SqlStore::DeleteResolvedDriftBefore(int64_t before_ms) {
  return Run([&](soci::session& sql) -> Result<int64_t> {
    long long before = before_ms;
    soci::statement st =
        Once(sql, "DELETE FROM drift_findings WHERE state = 'resolved' AND updated_ms < :b",
             soci::use(before));
    st.execute(true);
    return static_cast<int64_t>(st.get_affected_rows());
  });
}

Status SqlStore::PutComplianceDay(const ComplianceDay& day) {
  return Run([&](soci::session& sql) -> Status {
    long long u = day.updated_ms;
    soci::statement st = Once(sql,
                              "INSERT INTO compliance_days (day, doc, updated_ms) "
                              "VALUES (:d, :doc, :u) ON CONFLICT (day) DO UPDATE "
                              "SET doc = excluded.doc, updated_ms = excluded.updated_ms",
                              soci::use(day.day), soci::use(day.doc), soci::use(u));
    st.execute(true);
    return {};
  });
}

Result<std::vector<ComplianceDay>> SqlStore::ListComplianceDays(const std::string& from,
                                                                const std::string& to) {
  return Run([&](soci::session& sql) -> Result<std::vector<ComplianceDay>> {
    std::vector<ComplianceDay> out;
    ComplianceDay d;
    long long u = 0;
    soci::statement st =
        Once(sql,
             "SELECT day, doc, updated_ms FROM compliance_days "
             "WHERE day >= :f AND day <= :t ORDER BY day",
             soci::use(from), soci::use(to), soci::into(d.day), soci::into(d.doc), soci::into(u));
    st.execute();
    while (st.fetch()) {
      d.updated_ms = u;
      out.push_back(d);
    }
    return out;
  });
}

Result<int64_t> SqlStore::DeleteComplianceDaysBefore(const std::string& day) {
  return Run([&](soci::session& sql) -> Result<int64_t> {
    soci::statement st = Once(sql, "DELETE FROM compliance_days WHERE day < :d", soci::use(day));
    st.execute(true);
    return static_cast<int64_t>(st.get_affected_rows());
  });
}

}  // namespace gpufleet::store::sql
