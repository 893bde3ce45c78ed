// The embedded store: alerting (channels, alert state, the notification outbox, rules, silences).

#include "store/sql/sql_store.h"

namespace gpufleet::store::sql {

Status SqlStore::CreateChannel(const Channel& c) {
  return Run([&](soci::session& sql) -> Status {
    long long created = c.created_ms;
    sql << "INSERT INTO channels (name, type, url, secret, created_ms, matchers, group_by) "
           "VALUES (:n, :t, :u, :s, :c, :m, :g)",
        soci::use(c.name), soci::use(c.type), soci::use(c.url), soci::use(c.secret),
        soci::use(created), soci::use(c.matchers), soci::use(c.group_by);
    return {};
  });
}

Status SqlStore::UpdateChannel(const Channel& c) {
  return Run([&](soci::session& sql) -> Status {
    soci::statement st = Once(sql,
                              "UPDATE channels SET type = :t, url = :u, secret = :s, "
                              "matchers = :m, group_by = :g WHERE name = :n",
                              soci::use(c.type), soci::use(c.url), soci::use(c.secret),
                              soci::use(c.matchers), soci::use(c.group_by), soci::use(c.name));
    st.execute(true);
    if (st.get_affected_rows() == 0) {
      return MakeError(ErrorCode::kNotFound, "no channel '" + c.name + "'");
    }
    return {};
  });
}

Result<std::vector<Channel>> SqlStore::ListChannels() {
  return Run([&](soci::session& sql) -> Result<std::vector<Channel>> {
    std::vector<Channel> out;
    Channel c;
    long long created = 0;
    soci::statement st =
        Once(sql,
             "SELECT name, type, url, secret, created_ms, matchers, group_by FROM "
             "channels ORDER BY name COLLATE \"binary\"",
             soci::into(c.name), soci::into(c.type), soci::into(c.url), soci::into(c.secret),
             soci::into(created), soci::into(c.matchers), soci::into(c.group_by));
    st.execute();
    while (st.fetch()) {
      c.created_ms = created;
      out.push_back(c);
    }
    return out;
  });
}

Status SqlStore::DeleteChannel(const std::string& name) {
  return Run([&](soci::session& sql) -> Status {
    soci::transaction tx(sql);
    int found = 0;
    sql << "SELECT COUNT(*) FROM channels WHERE name = :n", soci::use(name), soci::into(found);
    if (!found) return MakeError(ErrorCode::kNotFound, "no channel '" + name + "'");
    sql << "DELETE FROM outbox WHERE channel = :n", soci::use(name);
    sql << "DELETE FROM channels WHERE name = :n", soci::use(name);
    tx.commit();
    return {};
  });
}

Status SqlStore::RecordAlertChanges(const std::vector<std::pair<std::string, std::string>>& alerts,
                                    const std::vector<Notification>& notifications) {
  return Run([&](soci::session& sql) -> Status {
    soci::transaction tx(sql);
    for (const auto& [fp, doc] : alerts) {
      sql << "INSERT INTO alerts (fingerprint, doc) VALUES (:f, :d) ON CONFLICT (fingerprint) "
             "DO UPDATE SET doc = excluded.doc",
          soci::use(fp), soci::use(doc);
    }
    for (const auto& n : notifications) {
      long long created = n.created_ms, next = n.next_ms, attempts = 0;
      sql << "INSERT INTO outbox (channel, fingerprint, body, created_ms, attempts, next_ms, "
             "last_error) VALUES (:c, :f, :b, :cr, :a, :n, '')",
          soci::use(n.channel), soci::use(n.fingerprint), soci::use(n.body), soci::use(created),
          soci::use(attempts), soci::use(next);
    }
    tx.commit();
    return {};
  });
}

Result<std::vector<std::string>> SqlStore::LoadAlertDocs() {
  return Run([&](soci::session& sql) -> Result<std::vector<std::string>> {
    std::vector<std::string> out;
    std::string doc;
    soci::statement st = Once(sql, "SELECT doc FROM alerts", soci::into(doc));
    st.execute();
    while (st.fetch()) out.push_back(doc);
    return out;
  });
}

Status SqlStore::DeleteAlertDoc(const std::string& fingerprint) {
  return Run([&](soci::session& sql) -> Status {
    sql << "DELETE FROM alerts WHERE fingerprint = :f", soci::use(fingerprint);
    return {};
  });
}

Result<std::vector<Notification>> SqlStore::DueNotifications(int64_t now, int limit) {
  return Run([&](soci::session& sql) -> Result<std::vector<Notification>> {
    std::vector<Notification> out;
    Notification n;
    long long id = 0, created = 0, attempts = 0, next = 0, t = now, lim = limit;
    soci::statement st =
        Once(sql,
             "SELECT id, channel, fingerprint, body, created_ms, attempts, next_ms, "
             "last_error FROM outbox WHERE next_ms <= :t ORDER BY id LIMIT :l",
             soci::into(id), soci::into(n.channel), soci::into(n.fingerprint), soci::into(n.body),
             soci::into(created), soci::into(attempts), soci::into(next), soci::into(n.last_error),
             soci::use(t), soci::use(lim));
    st.execute();
    while (st.fetch()) {
      n.id = id;
      n.created_ms = created;
      n.attempts = static_cast<int>(attempts);
      n.next_ms = next;
      out.push_back(n);
    }
    return out;
  });
}

Status SqlStore::AckNotification(int64_t id) {
  return Run([&](soci::session& sql) -> Status {
    long long i = id;
    sql << "DELETE FROM outbox WHERE id = :i", soci::use(i);
    return {};
  });
}

Status SqlStore::DeferNotification(int64_t id, int64_t next_ms, const std::string& error) {
  return Run([&](soci::session& sql) -> Status {
    long long i = id, next = next_ms;
    sql << "UPDATE outbox SET attempts = attempts + 1, next_ms = :n, last_error = :e "
           "WHERE id = :i",
        soci::use(next), soci::use(error), soci::use(i);
    return {};
  });
}

Result<std::vector<OutboxCount>> SqlStore::OutboxCounts() {
  return Run([&](soci::session& sql) -> Result<std::vector<OutboxCount>> {
    std::vector<OutboxCount> out;
    OutboxCount c;
    long long pending = 0, oldest = 0;
    soci::statement st = Once(
        sql,
        "SELECT channel, COUNT(*), MIN(created_ms), MAX(last_error) FROM outbox "
        "GROUP BY channel ORDER BY channel COLLATE \"binary\"",
        soci::into(c.channel), soci::into(pending), soci::into(oldest), soci::into(c.last_error));
    st.execute();
    while (st.fetch()) {
      c.pending = pending;
      c.oldest_ms = oldest;
      out.push_back(c);
    }
    return out;
  });
}

Status SqlStore::SaveRules(const std::vector<RuleRecord>& upsert,
                           const std::vector<std::string>& remove) {
  return Run([&](soci::session& sql) -> Status {
    soci::transaction tx(sql);
    for (const auto& r : upsert) {
      long long t = r.updated_ms;
      sql << "INSERT INTO alert_rules (name, grp, doc, updated_ms) VALUES (:n, :g, :d, :t) "
             "ON CONFLICT (name) DO UPDATE SET grp = excluded.grp, doc = excluded.doc, "
             "updated_ms = excluded.updated_ms",
          soci::use(r.name), soci::use(r.group), soci::use(r.doc), soci::use(t);
    }
    for (const auto& name : remove) {
      sql << "DELETE FROM alert_rules WHERE name = :n", soci::use(name);
    }
    tx.commit();
    return {};
  });
}

Result<std::vector<RuleRecord>> SqlStore::ListRules() {
  return Run([&](soci::session& sql) -> Result<std::vector<RuleRecord>> {
    std::vector<RuleRecord> out;
    RuleRecord r;
    long long t = 0;
    soci::statement st =
        Once(sql,
             "SELECT name, grp, doc, updated_ms FROM alert_rules ORDER BY name COLLATE "
             "\"binary\"",
             soci::into(r.name), soci::into(r.group), soci::into(r.doc), soci::into(t));
    st.execute();
    while (st.fetch()) {
      r.updated_ms = t;
      out.push_back(r);
    }
    return out;
  });
}

Status SqlStore::CreateSilence(const SilenceRecord& s) {
  return Run([&](soci::session& sql) -> Status {
    long long starts = s.starts_ms, ends = s.ends_ms, created = s.created_ms;
    sql << "INSERT INTO silences (id, matchers, starts_ms, ends_ms, created_by, comment, "
           "created_ms) VALUES (:i, :m, :s, :e, :b, :c, :cr)",
        soci::use(s.id), soci::use(s.matchers), soci::use(starts), soci::use(ends),
        soci::use(s.created_by), soci::use(s.comment), soci::use(created);
    return {};
  });
}

Result<std::vector<SilenceRecord>> SqlStore::ListSilences() {
  return Run([&](soci::session& sql) -> Result<std::vector<SilenceRecord>> {
    std::vector<SilenceRecord> out;
    SilenceRecord s;
    long long starts = 0, ends = 0, created = 0;
    soci::statement st =
        Once(sql,
             "SELECT id, matchers, starts_ms, ends_ms, created_by, comment, "
             "created_ms FROM silences ORDER BY created_ms DESC",
             soci::into(s.id), soci::into(s.matchers), soci::into(starts), soci::into(ends),
             soci::into(s.created_by), soci::into(s.comment), soci::into(created));
    st.execute();
    while (st.fetch()) {
      s.starts_ms = starts;
      s.ends_ms = ends;
      s.created_ms = created;
      out.push_back(s);
    }
    return out;
  });
}

Status SqlStore::ExpireSilence(const std::string& id, int64_t now) {
  return Run([&](soci::session& sql) -> Status {
    int found = 0;
    sql << "SELECT COUNT(*) FROM silences WHERE id = :i", soci::use(id), soci::into(found);
    if (!found) return MakeError(ErrorCode::kNotFound, "no silence '" + id + "'");
    long long t = now;
    sql << "UPDATE silences SET ends_ms = :t WHERE id = :i AND ends_ms > :t2", soci::use(t),
        soci::use(id), soci::use(t);
    return {};
  });
}

}  // namespace gpufleet::store::sql
