// The SQL store: rollouts, their nodes' steps and their events; deleting a retired node.

#include "store/sql/sql_store.h"

namespace gpufleet::store::sql {

Status SqlStore::DeleteNode(const std::string& name) {
  return Run([&](soci::session& sql) -> Status {
    soci::transaction tx(sql);
    sql << "DELETE FROM gpus WHERE node = :n", soci::use(name);
    soci::statement st = Once(sql, "DELETE FROM nodes WHERE name = :n", soci::use(name));
    st.execute(true);
    if (st.get_affected_rows() == 0) {
      return MakeError(ErrorCode::kNotFound, "no node '" + name + "'");
    }
    tx.commit();
    return {};
  });
}

Result<int64_t> SqlStore::CreateRollout(const RolloutRecord& r) {
  return Run([&](soci::session& sql) -> Result<int64_t> {
    long long c = r.created_ms, u = r.updated_ms, id = 0;
    sql << "INSERT INTO rollouts (state, doc, created_ms, updated_ms) VALUES (:s, :d, :c, :u) "
           "RETURNING id",
        soci::use(r.state), soci::use(r.doc), soci::use(c), soci::use(u), soci::into(id);
    return static_cast<int64_t>(id);
  });
}

namespace {
Status Update(soci::session& sql, const RolloutRecord& r) {
  long long u = r.updated_ms, id = r.id;
  soci::statement st =
      Once(sql, "UPDATE rollouts SET state = :s, doc = :d, updated_ms = :u WHERE id = :i",
           soci::use(r.state), soci::use(r.doc), soci::use(u), soci::use(id));
  st.execute(true);
  if (st.get_affected_rows() == 0) {
    return MakeError(ErrorCode::kNotFound, "no rollout " + std::to_string(r.id));
  }
  return {};
}
}  // namespace

Status SqlStore::UpdateRollout(const RolloutRecord& r) {
  return Run([&](soci::session& sql) -> Status { return Update(sql, r); });
}

Status SqlStore::SaveRolloutNodes(const RolloutRecord& r,
                                  const std::vector<RolloutNodeRecord>& nodes) {
  return Run([&](soci::session& sql) -> Status {
    soci::transaction tx(sql);
    GF_TRY(Update(sql, r));
    long long id = r.id, u = 0;
    std::string node, doc;
    soci::statement st =
        (sql.prepare << "INSERT INTO rollout_nodes (rollout, node, doc, updated_ms) "
                        "VALUES (:r, :n, :d, :u) ON CONFLICT (rollout, node) DO UPDATE "
                        "SET doc = excluded.doc, updated_ms = excluded.updated_ms",
         soci::use(id), soci::use(node), soci::use(doc), soci::use(u));
    for (const auto& n : nodes) {
      node = n.node;
      doc = n.doc;
      u = n.updated_ms;
      st.execute(true);
    }
    tx.commit();
    return {};
  });
}

Result<std::vector<RolloutRecord>> SqlStore::ListRollouts() {
  return Run([&](soci::session& sql) -> Result<std::vector<RolloutRecord>> {
    std::vector<RolloutRecord> out;
    RolloutRecord r;
    long long id = 0, c = 0, u = 0;
    soci::statement st =
        Once(sql, "SELECT id, state, doc, created_ms, updated_ms FROM rollouts ORDER BY id",
             soci::into(id), soci::into(r.state), soci::into(r.doc), soci::into(c), soci::into(u));
    st.execute();
    while (st.fetch()) {
      r.id = id;
      r.created_ms = c;
      r.updated_ms = u;
      out.push_back(r);
    }
    return out;
  });
}

Result<std::vector<RolloutNodeRecord>> SqlStore::ListRolloutNodes(int64_t rollout) {
  return Run([&](soci::session& sql) -> Result<std::vector<RolloutNodeRecord>> {
    std::vector<RolloutNodeRecord> out;
    RolloutNodeRecord n;
    long long id = rollout, u = 0;
    soci::statement st = Once(sql,
                              "SELECT node, doc, updated_ms FROM rollout_nodes WHERE rollout = :r "
                              "ORDER BY node COLLATE \"binary\"",
                              soci::into(n.node), soci::into(n.doc), soci::into(u), soci::use(id));
    st.execute();
    while (st.fetch()) {
      n.updated_ms = u;
      out.push_back(n);
    }
    return out;
  });
}

Status SqlStore::AppendRolloutEvents(const std::vector<RolloutEventRecord>& events) {
  if (events.empty()) return {};
  return Run([&](soci::session& sql) -> Status {
    soci::transaction tx(sql);
    long long rollout = 0, t = 0;
    std::string node, kind, message;
    soci::statement st =
        (sql.prepare << "INSERT INTO rollout_events (rollout, time_ms, node, kind, message) "
                        "VALUES (:r, :t, :n, :k, :m)",
         soci::use(rollout), soci::use(t), soci::use(node), soci::use(kind), soci::use(message));
    for (const auto& e : events) {
      rollout = e.rollout;
      t = e.time_ms;
      node = e.node;
      kind = e.kind;
      message = e.message;
      st.execute(true);
    }
    tx.commit();
    return {};
  });
}

Result<std::vector<RolloutEventRecord>> SqlStore::ListRolloutEvents(int64_t rollout,
                                                                    int64_t after_id, int limit) {
  return Run([&](soci::session& sql) -> Result<std::vector<RolloutEventRecord>> {
    std::vector<RolloutEventRecord> out;
    RolloutEventRecord e;
    long long id = 0, t = 0, r = rollout, after = after_id, lim = limit;
    soci::statement st =
        Once(sql,
             "SELECT id, time_ms, node, kind, message FROM rollout_events "
             "WHERE rollout = :r AND id > :a ORDER BY id LIMIT :l",
             soci::into(id), soci::into(t), soci::into(e.node), soci::into(e.kind),
             soci::into(e.message), soci::use(r), soci::use(after), soci::use(lim));
    st.execute();
    while (st.fetch()) {
      e.id = id;
      e.rollout = rollout;
      e.time_ms = t;
      out.push_back(e);
    }
    return out;
  });
}

}  // namespace gpufleet::store::sql
