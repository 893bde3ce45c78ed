// The embedded store: jobs, teams, scaling policies, scale events and the scaling history.

#include <cstdint>

#include "store/sql/sql_store.h"

namespace gpufleet::store::sql {

Status SqlStore::SaveJobs(const std::vector<JobRecord>& jobs) {
  return Run([&](soci::session& sql) -> Status {
    soci::transaction tx(sql);
    for (const auto& j : jobs) {
      long long id = j.id, t = j.updated_ms;
      sql << "INSERT INTO jobs (id, state, doc, updated_ms) VALUES (:i, :s, :d, :t) "
             "ON CONFLICT (id) DO UPDATE SET state = excluded.state, doc = excluded.doc, "
             "updated_ms = excluded.updated_ms",
          soci::use(id), soci::use(j.state), soci::use(j.doc), soci::use(t);
    }
    tx.commit();
    return {};
  });
}

Result<std::vector<JobRecord>> SqlStore::ListJobs() { return ListJobsUpdatedSince(INT64_MIN); }

Result<std::vector<JobRecord>> SqlStore::ListJobsUpdatedSince(int64_t since_ms) {
  return Run([&](soci::session& sql) -> Result<std::vector<JobRecord>> {
    std::vector<JobRecord> out;
    JobRecord j;
    long long id = 0, t = 0, since = since_ms;
    soci::statement st = Once(sql,
                              "SELECT id, state, doc, updated_ms FROM jobs WHERE updated_ms >= :s "
                              "ORDER BY id",
                              soci::into(id), soci::into(j.state), soci::into(j.doc), soci::into(t),
                              soci::use(since));
    st.execute();
    while (st.fetch()) {
      j.id = id;
      j.updated_ms = t;
      out.push_back(j);
    }
    return out;
  });
}

Status SqlStore::PutSetting(const std::string& name, const std::string& doc, int64_t now_ms) {
  return Run([&](soci::session& sql) -> Status {
    long long t = now_ms;
    sql << "INSERT INTO settings (name, doc, updated_ms) VALUES (:n, :d, :t) "
           "ON CONFLICT (name) DO UPDATE SET doc = excluded.doc, updated_ms = excluded.updated_ms",
        soci::use(name), soci::use(doc), soci::use(t);
    return {};
  });
}

Result<std::optional<std::string>> SqlStore::GetSetting(const std::string& name) {
  return Run([&](soci::session& sql) -> Result<std::optional<std::string>> {
    std::string doc;
    soci::indicator found = soci::i_null;
    sql << "SELECT doc FROM settings WHERE name = :n", soci::use(name), soci::into(doc, found);
    if (!sql.got_data() || found != soci::i_ok) return std::optional<std::string>();
    return std::optional<std::string>(std::move(doc));
  });
}

Status SqlStore::DeleteSetting(const std::string& name) {
  return Run([&](soci::session& sql) -> Status {
    sql << "DELETE FROM settings WHERE name = :n", soci::use(name);
    return {};
  });
}

Status SqlStore::PutTeam(const TeamRecord& team) {
  return Run([&](soci::session& sql) -> Status {
    long long t = team.updated_ms;
    sql << "INSERT INTO teams (name, doc, updated_ms) VALUES (:n, :d, :t) "
           "ON CONFLICT (name) DO UPDATE SET doc = excluded.doc, updated_ms = excluded.updated_ms",
        soci::use(team.name), soci::use(team.doc), soci::use(t);
    return {};
  });
}

Result<std::vector<TeamRecord>> SqlStore::ListTeams() {
  return Run([&](soci::session& sql) -> Result<std::vector<TeamRecord>> {
    std::vector<TeamRecord> out;
    TeamRecord r;
    long long t = 0;
    soci::statement st = Once(sql, "SELECT name, doc, updated_ms FROM teams ORDER BY name",
                              soci::into(r.name), soci::into(r.doc), soci::into(t));
    st.execute();
    while (st.fetch()) {
      r.updated_ms = t;
      out.push_back(r);
    }
    return out;
  });
}

Status SqlStore::DeleteTeam(const std::string& name) {
  return Run([&](soci::session& sql) -> Status {
    sql << "DELETE FROM teams WHERE name = :n", soci::use(name);
    return {};
  });
}

Status SqlStore::SaveScalingPolicy(const ScalingRecord& r) {
  return Run([&](soci::session& sql) -> Status {
    long long t = r.updated_ms;
    sql << "INSERT INTO scaling_policies (pool, doc, updated_ms) VALUES (:p, :d, :t) "
           "ON CONFLICT (pool) DO UPDATE SET doc = excluded.doc, updated_ms = "
           "excluded.updated_ms",
        soci::use(r.pool), soci::use(r.doc), soci::use(t);
    return {};
  });
}

Status SqlStore::DeleteScalingPolicy(const std::string& pool) {
  return Run([&](soci::session& sql) -> Status {
    soci::statement st = Once(sql, "DELETE FROM scaling_policies WHERE pool = :p", soci::use(pool));
    st.execute(true);
    if (st.get_affected_rows() == 0) {
      return MakeError(ErrorCode::kNotFound, "pool '" + pool + "' has no scaling policy");
    }
    return {};
  });
}

Result<std::vector<ScalingRecord>> SqlStore::ListScalingPolicies() {
  return Run([&](soci::session& sql) -> Result<std::vector<ScalingRecord>> {
    std::vector<ScalingRecord> out;
    ScalingRecord r;
    long long t = 0;
    soci::statement st = Once(sql,
                              "SELECT pool, doc, updated_ms FROM scaling_policies ORDER "
                              "BY pool COLLATE \"binary\"",
                              soci::into(r.pool), soci::into(r.doc), soci::into(t));
    st.execute();
    while (st.fetch()) {
      r.updated_ms = t;
      out.push_back(r);
    }
    return out;
  });
}

Result<int64_t> SqlStore::AppendScaleEvent(const ScaleEventRecord& r) {
  return Run([&](soci::session& sql) -> Result<int64_t> {
    long long t = r.time_ms;
    long long id = 0;
    sql << "INSERT INTO scale_events (time_ms, pool, doc) VALUES (:t, :p, :d) RETURNING id",
        soci::use(t), soci::use(r.pool), soci::use(r.doc), soci::into(id);
    return static_cast<int64_t>(id);
  });
}

Result<std::vector<ScaleEventRecord>> SqlStore::ListScaleEvents(const std::string& pool,
                                                                int limit) {
  return Run([&](soci::session& sql) -> Result<std::vector<ScaleEventRecord>> {
    std::vector<ScaleEventRecord> out;
    ScaleEventRecord r;
    long long id = 0, t = 0, lim = limit;
    soci::statement st = Once(sql,
                              "SELECT id, time_ms, pool, doc FROM scale_events "
                              "WHERE (pool = :p OR :p2 = '') ORDER BY id DESC LIMIT :l",
                              soci::into(id), soci::into(t), soci::into(r.pool), soci::into(r.doc),
                              soci::use(pool), soci::use(pool), soci::use(lim));
    st.execute();
    while (st.fetch()) {
      r.id = id;
      r.time_ms = t;
      out.push_back(r);
    }
    return out;
  });
}

Status SqlStore::AppendScalingSample(const ScalingSampleRecord& r) {
  return Run([&](soci::session& sql) -> Status {
    long long t = r.time_ms;
    sql << "INSERT INTO scaling_samples (pool, time_ms, doc) VALUES (:p, :t, :d) "
           "ON CONFLICT (pool, time_ms) DO UPDATE SET doc = excluded.doc",
        soci::use(r.pool), soci::use(t), soci::use(r.doc);
    return {};
  });
}

Result<std::vector<ScalingSampleRecord>> SqlStore::ListScalingSamples(const std::string& pool,
                                                                      int64_t since_ms) {
  return Run([&](soci::session& sql) -> Result<std::vector<ScalingSampleRecord>> {
    std::vector<ScalingSampleRecord> out;
    ScalingSampleRecord r;
    long long t = 0, since = since_ms;
    soci::statement st = Once(sql,
                              "SELECT pool, time_ms, doc FROM scaling_samples "
                              "WHERE pool = :p AND time_ms >= :s ORDER BY time_ms",
                              soci::into(r.pool), soci::into(t), soci::into(r.doc), soci::use(pool),
                              soci::use(since));
    st.execute();
    while (st.fetch()) {
      r.time_ms = t;
      out.push_back(r);
    }
    return out;
  });
}

Status SqlStore::DeleteEndedJobsBefore(int64_t updated_ms) {
  return Run([&](soci::session& sql) -> Status {
    long long t = updated_ms;
    sql << "DELETE FROM jobs WHERE state IN ('completed', 'cancelled') AND updated_ms < :t "
           "AND id < (SELECT MAX(id) FROM jobs)",
        soci::use(t);
    return {};
  });
}

Status SqlStore::DeleteScalingSamplesBefore(int64_t time_ms) {
  return Run([&](soci::session& sql) -> Status {
    long long t = time_ms;
    sql << "DELETE FROM scaling_samples WHERE time_ms < :t", soci::use(t);
    return {};
  });
}

}  // namespace gpufleet::store::sql
