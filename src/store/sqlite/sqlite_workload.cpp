// The embedded store: jobs, scaling policies, scale events and the scaling history.

#include "store/sqlite/sqlite_store.h"

namespace gpufleet::sqlite_store {

Status SqliteStore::SaveJobs(const std::vector<JobRecord>& jobs) {
  std::lock_guard lock(mu_);
  try {
    soci::transaction tx(sql_);
    for (const auto& j : jobs) {
      long long id = j.id, t = j.updated_ms;
      sql_ << "INSERT INTO jobs (id, state, doc, updated_ms) VALUES (:i, :s, :d, :t) "
              "ON CONFLICT (id) DO UPDATE SET state = excluded.state, doc = excluded.doc, "
              "updated_ms = excluded.updated_ms",
          soci::use(id), soci::use(j.state), soci::use(j.doc), soci::use(t);
    }
    tx.commit();
    return {};
  } catch (const std::exception& e) {
    return StoreError(e);
  }
}

Result<std::vector<JobRecord>> SqliteStore::ListJobs() {
  std::lock_guard lock(mu_);
  try {
    std::vector<JobRecord> out;
    JobRecord j;
    long long id = 0, t = 0;
    soci::statement st = (sql_.prepare << "SELECT id, state, doc, updated_ms FROM jobs ORDER BY id",
                          soci::into(id), soci::into(j.state), soci::into(j.doc), soci::into(t));
    st.execute();
    while (st.fetch()) {
      j.id = id;
      j.updated_ms = t;
      out.push_back(j);
    }
    return out;
  } catch (const std::exception& e) {
    return StoreError(e);
  }
}

Status SqliteStore::SaveScalingPolicy(const ScalingRecord& r) {
  std::lock_guard lock(mu_);
  try {
    long long t = r.updated_ms;
    sql_ << "INSERT INTO scaling_policies (pool, doc, updated_ms) VALUES (:p, :d, :t) "
            "ON CONFLICT (pool) DO UPDATE SET doc = excluded.doc, updated_ms = "
            "excluded.updated_ms",
        soci::use(r.pool), soci::use(r.doc), soci::use(t);
    return {};
  } catch (const std::exception& e) {
    return StoreError(e);
  }
}

Status SqliteStore::DeleteScalingPolicy(const std::string& pool) {
  std::lock_guard lock(mu_);
  try {
    soci::statement st =
        (sql_.prepare << "DELETE FROM scaling_policies WHERE pool = :p", soci::use(pool));
    st.execute(true);
    if (st.get_affected_rows() == 0) {
      return MakeError(ErrorCode::kNotFound, "pool '" + pool + "' has no scaling policy");
    }
    return {};
  } catch (const std::exception& e) {
    return StoreError(e);
  }
}

Result<std::vector<ScalingRecord>> SqliteStore::ListScalingPolicies() {
  std::lock_guard lock(mu_);
  try {
    std::vector<ScalingRecord> out;
    ScalingRecord r;
    long long t = 0;
    soci::statement st =
        (sql_.prepare << "SELECT pool, doc, updated_ms FROM scaling_policies ORDER BY pool",
         soci::into(r.pool), soci::into(r.doc), soci::into(t));
    st.execute();
    while (st.fetch()) {
      r.updated_ms = t;
      out.push_back(r);
    }
    return out;
  } catch (const std::exception& e) {
    return StoreError(e);
  }
}

Result<int64_t> SqliteStore::AppendScaleEvent(const ScaleEventRecord& r) {
  std::lock_guard lock(mu_);
  try {
    long long t = r.time_ms;
    sql_ << "INSERT INTO scale_events (time_ms, pool, doc) VALUES (:t, :p, :d)", soci::use(t),
        soci::use(r.pool), soci::use(r.doc);
    long long id = 0;
    sql_ << "SELECT last_insert_rowid()", soci::into(id);
    return static_cast<int64_t>(id);
  } catch (const std::exception& e) {
    return StoreError(e);
  }
}

Result<std::vector<ScaleEventRecord>> SqliteStore::ListScaleEvents(const std::string& pool,
                                                                   int limit) {
  std::lock_guard lock(mu_);
  try {
    std::vector<ScaleEventRecord> out;
    ScaleEventRecord r;
    long long id = 0, t = 0, lim = limit;
    soci::statement st = (sql_.prepare << "SELECT id, time_ms, pool, doc FROM scale_events "
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
  } catch (const std::exception& e) {
    return StoreError(e);
  }
}

Status SqliteStore::AppendScalingSample(const ScalingSampleRecord& r) {
  std::lock_guard lock(mu_);
  try {
    long long t = r.time_ms;
    sql_ << "INSERT INTO scaling_samples (pool, time_ms, doc) VALUES (:p, :t, :d) "
            "ON CONFLICT (pool, time_ms) DO UPDATE SET doc = excluded.doc",
        soci::use(r.pool), soci::use(t), soci::use(r.doc);
    return {};
  } catch (const std::exception& e) {
    return StoreError(e);
  }
}

Result<std::vector<ScalingSampleRecord>> SqliteStore::ListScalingSamples(const std::string& pool,
                                                                         int64_t since_ms) {
  std::lock_guard lock(mu_);
  try {
    std::vector<ScalingSampleRecord> out;
    ScalingSampleRecord r;
    long long t = 0, since = since_ms;
    soci::statement st =
        (sql_.prepare << "SELECT pool, time_ms, doc FROM scaling_samples "
                         "WHERE pool = :p AND time_ms >= :s ORDER BY time_ms",
         soci::into(r.pool), soci::into(t), soci::into(r.doc), soci::use(pool), soci::use(since));
    st.execute();
    while (st.fetch()) {
      r.time_ms = t;
      out.push_back(r);
    }
    return out;
  } catch (const std::exception& e) {
    return StoreError(e);
  }
}

Status SqliteStore::DeleteEndedJobsBefore(int64_t updated_ms) {
  std::lock_guard lock(mu_);
  try {
    long long t = updated_ms;
    sql_ << "DELETE FROM jobs WHERE state IN ('completed', 'cancelled') AND updated_ms < :t "
            "AND id < (SELECT MAX(id) FROM jobs)",
        soci::use(t);
    return {};
  } catch (const std::exception& e) {
    return StoreError(e);
  }
}

Status SqliteStore::DeleteScalingSamplesBefore(int64_t time_ms) {
  std::lock_guard lock(mu_);
  try {
    long long t = time_ms;
    sql_ << "DELETE FROM scaling_samples WHERE time_ms < :t", soci::use(t);
    return {};
  } catch (const std::exception& e) {
    return StoreError(e);
  }
}

}  // namespace gpufleet::sqlite_store
