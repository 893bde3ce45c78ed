// The embedded store: alerting (channels, alert state, the notification outbox, rules, silences).

#include "store/sqlite/sqlite_store.h"

namespace gpufleet::sqlite_store {

Status SqliteStore::CreateChannel(const Channel& c) {
  std::lock_guard lock(mu_);
  try {
    long long created = c.created_ms;
    sql_ << "INSERT INTO channels (name, type, url, secret, created_ms, matchers, group_by) "
            "VALUES (:n, :t, :u, :s, :c, :m, :g)",
        soci::use(c.name), soci::use(c.type), soci::use(c.url), soci::use(c.secret),
        soci::use(created), soci::use(c.matchers), soci::use(c.group_by);
    return {};
  } catch (const std::exception& e) {
    return StoreError(e);
  }
}

Result<std::vector<Channel>> SqliteStore::ListChannels() {
  std::lock_guard lock(mu_);
  try {
    std::vector<Channel> out;
    Channel c;
    long long created = 0;
    soci::statement st =
        (sql_.prepare << "SELECT name, type, url, secret, created_ms, matchers, group_by FROM "
                         "channels ORDER BY name",
         soci::into(c.name), soci::into(c.type), soci::into(c.url), soci::into(c.secret),
         soci::into(created), soci::into(c.matchers), soci::into(c.group_by));
    st.execute();
    while (st.fetch()) {
      c.created_ms = created;
      out.push_back(c);
    }
    return out;
  } catch (const std::exception& e) {
    return StoreError(e);
  }
}

Status SqliteStore::DeleteChannel(const std::string& name) {
  std::lock_guard lock(mu_);
  try {
    soci::transaction tx(sql_);
    int found = 0;
    sql_ << "SELECT COUNT(*) FROM channels WHERE name = :n", soci::use(name), soci::into(found);
    if (!found) return MakeError(ErrorCode::kNotFound, "no channel '" + name + "'");
    sql_ << "DELETE FROM outbox WHERE channel = :n", soci::use(name);
    sql_ << "DELETE FROM channels WHERE name = :n", soci::use(name);
    tx.commit();
    return {};
  } catch (const std::exception& e) {
    return StoreError(e);
  }
}

Status SqliteStore::RecordAlertChanges(
    const std::vector<std::pair<std::string, std::string>>& alerts,
    const std::vector<Notification>& notifications) {
  std::lock_guard lock(mu_);
  try {
    soci::transaction tx(sql_);
    for (const auto& [fp, doc] : alerts) {
      sql_ << "INSERT INTO alerts (fingerprint, doc) VALUES (:f, :d) ON CONFLICT (fingerprint) "
              "DO UPDATE SET doc = excluded.doc",
          soci::use(fp), soci::use(doc);
    }
    for (const auto& n : notifications) {
      long long created = n.created_ms, next = n.next_ms, attempts = 0;
      sql_ << "INSERT INTO outbox (channel, fingerprint, body, created_ms, attempts, next_ms, "
              "last_error) VALUES (:c, :f, :b, :cr, :a, :n, '')",
          soci::use(n.channel), soci::use(n.fingerprint), soci::use(n.body), soci::use(created),
          soci::use(attempts), soci::use(next);
    }
    tx.commit();
    return {};
  } catch (const std::exception& e) {
    return StoreError(e);
  }
}

Result<std::vector<std::string>> SqliteStore::LoadAlertDocs() {
  std::lock_guard lock(mu_);
  try {
    std::vector<std::string> out;
    std::string doc;
    soci::statement st = (sql_.prepare << "SELECT doc FROM alerts", soci::into(doc));
    st.execute();
    while (st.fetch()) out.push_back(doc);
    return out;
  } catch (const std::exception& e) {
    return StoreError(e);
  }
}

Status SqliteStore::DeleteAlertDoc(const std::string& fingerprint) {
  std::lock_guard lock(mu_);
  try {
    sql_ << "DELETE FROM alerts WHERE fingerprint = :f", soci::use(fingerprint);
    return {};
  } catch (const std::exception& e) {
    return StoreError(e);
  }
}

Result<std::vector<Notification>> SqliteStore::DueNotifications(int64_t now, int limit) {
  std::lock_guard lock(mu_);
  try {
    std::vector<Notification> out;
    Notification n;
    long long id = 0, created = 0, attempts = 0, next = 0, t = now, lim = limit;
    soci::statement st =
        (sql_.prepare << "SELECT id, channel, fingerprint, body, created_ms, attempts, next_ms, "
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
  } catch (const std::exception& e) {
    return StoreError(e);
  }
}

Status SqliteStore::AckNotification(int64_t id) {
  std::lock_guard lock(mu_);
  try {
    long long i = id;
    sql_ << "DELETE FROM outbox WHERE id = :i", soci::use(i);
    return {};
  } catch (const std::exception& e) {
    return StoreError(e);
  }
}

Status SqliteStore::DeferNotification(int64_t id, int64_t next_ms, const std::string& error) {
  std::lock_guard lock(mu_);
  try {
    long long i = id, next = next_ms;
    sql_ << "UPDATE outbox SET attempts = attempts + 1, next_ms = :n, last_error = :e "
            "WHERE id = :i",
        soci::use(next), soci::use(error), soci::use(i);
    return {};
  } catch (const std::exception& e) {
    return StoreError(e);
  }
}

Result<std::vector<OutboxCount>> SqliteStore::OutboxCounts() {
  std::lock_guard lock(mu_);
  try {
    std::vector<OutboxCount> out;
    OutboxCount c;
    long long pending = 0, oldest = 0;
    soci::statement st =
        (sql_.prepare << "SELECT channel, COUNT(*), MIN(created_ms), MAX(last_error) FROM outbox "
                         "GROUP BY channel ORDER BY channel",
         soci::into(c.channel), soci::into(pending), soci::into(oldest), soci::into(c.last_error));
    st.execute();
    while (st.fetch()) {
      c.pending = pending;
      c.oldest_ms = oldest;
      out.push_back(c);
    }
    return out;
  } catch (const std::exception& e) {
    return StoreError(e);
  }
}

Status SqliteStore::SaveRules(const std::vector<RuleRecord>& upsert,
                              const std::vector<std::string>& remove) {
  std::lock_guard lock(mu_);
  try {
    soci::transaction tx(sql_);
    for (const auto& r : upsert) {
      long long t = r.updated_ms;
      sql_ << "INSERT INTO alert_rules (name, grp, doc, updated_ms) VALUES (:n, :g, :d, :t) "
              "ON CONFLICT (name) DO UPDATE SET grp = excluded.grp, doc = excluded.doc, "
              "updated_ms = excluded.updated_ms",
          soci::use(r.name), soci::use(r.group), soci::use(r.doc), soci::use(t);
    }
    for (const auto& name : remove) {
      sql_ << "DELETE FROM alert_rules WHERE name = :n", soci::use(name);
    }
    tx.commit();
    return {};
  } catch (const std::exception& e) {
    return StoreError(e);
  }
}

Result<std::vector<RuleRecord>> SqliteStore::ListRules() {
  std::lock_guard lock(mu_);
  try {
    std::vector<RuleRecord> out;
    RuleRecord r;
    long long t = 0;
    soci::statement st =
        (sql_.prepare << "SELECT name, grp, doc, updated_ms FROM alert_rules ORDER BY name",
         soci::into(r.name), soci::into(r.group), soci::into(r.doc), soci::into(t));
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

Status SqliteStore::CreateSilence(const SilenceRecord& s) {
  std::lock_guard lock(mu_);
  try {
    long long starts = s.starts_ms, ends = s.ends_ms, created = s.created_ms;
    sql_ << "INSERT INTO silences (id, matchers, starts_ms, ends_ms, created_by, comment, "
            "created_ms) VALUES (:i, :m, :s, :e, :b, :c, :cr)",
        soci::use(s.id), soci::use(s.matchers), soci::use(starts), soci::use(ends),
        soci::use(s.created_by), soci::use(s.comment), soci::use(created);
    return {};
  } catch (const std::exception& e) {
    return StoreError(e);
  }
}

Result<std::vector<SilenceRecord>> SqliteStore::ListSilences() {
  std::lock_guard lock(mu_);
  try {
    std::vector<SilenceRecord> out;
    SilenceRecord s;
    long long starts = 0, ends = 0, created = 0;
    soci::statement st =
        (sql_.prepare << "SELECT id, matchers, starts_ms, ends_ms, created_by, comment, "
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
  } catch (const std::exception& e) {
    return StoreError(e);
  }
}

Status SqliteStore::ExpireSilence(const std::string& id, int64_t now) {
  std::lock_guard lock(mu_);
  try {
    int found = 0;
    sql_ << "SELECT COUNT(*) FROM silences WHERE id = :i", soci::use(id), soci::into(found);
    if (!found) return MakeError(ErrorCode::kNotFound, "no silence '" + id + "'");
    long long t = now;
    sql_ << "UPDATE silences SET ends_ms = :t WHERE id = :i AND ends_ms > :t2", soci::use(t),
        soci::use(id), soci::use(t);
    return {};
  } catch (const std::exception& e) {
    return StoreError(e);
  }
}

}  // namespace gpufleet::sqlite_store
