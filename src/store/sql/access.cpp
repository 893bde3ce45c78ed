// The SQL store: join and API tokens, and the audit log.

#include <boost/json.hpp>
#include <string_view>

#include "common/json_text.h"
#include "common/strings.h"
#include "model/json.h"
#include "store/sql/sql_store.h"

namespace json = boost::json;

namespace gpufleet::store::sql {

Status SqlStore::CreateJoinToken(const JoinToken& t) {
  return Run([&](soci::session& sql) -> Status {
    long long created = t.created_ms, expires = t.expires_ms, revoked = t.revoked;
    sql << "INSERT INTO join_tokens (id, pool, hash, created_by, created_ms, expires_ms, "
           "revoked, prefix) VALUES (:i, :p, :h, :b, :c, :e, :r, :x)",
        soci::use(t.id), soci::use(t.pool), soci::use(t.hash), soci::use(t.created_by),
        soci::use(created), soci::use(expires), soci::use(revoked), soci::use(t.prefix);
    return {};
  });
}

Result<JoinToken> SqlStore::FindJoinToken(const std::string& hash) {
  auto found = QueryJoinTokens(hash);
  if (!found.ok()) return found.error();
  if (found->empty()) return MakeError(ErrorCode::kNotFound, "unknown join token");
  return found->front();
}

Status SqlStore::RevokeJoinToken(const std::string& id) {
  return Revoke("UPDATE join_tokens SET revoked = 1 WHERE id = :i", id, "join token");
}

Status SqlStore::CreateApiToken(const ApiToken& t) {
  return Run([&](soci::session& sql) -> Status {
    std::string role(ToString(t.role)), clusters;
    for (const auto& c : t.clusters) clusters += (clusters.empty() ? "" : ",") + c;
    long long created = t.created_ms, expires = t.expires_ms, revoked = t.revoked;
    sql << "INSERT INTO api_tokens (id, name, role, clusters, hash, created_ms, expires_ms, "
           "revoked, prefix) VALUES (:i, :n, :r, :c, :h, :cr, :e, :rv, :x)",
        soci::use(t.id), soci::use(t.name), soci::use(role), soci::use(clusters), soci::use(t.hash),
        soci::use(created), soci::use(expires), soci::use(revoked), soci::use(t.prefix);
    return {};
  });
}

Result<ApiToken> SqlStore::FindApiToken(const std::string& hash) {
  auto found = QueryApiTokens(hash);
  if (!found.ok()) return found.error();
  if (found->empty()) return MakeError(ErrorCode::kNotFound, "unknown API token");
  return found->front();
}

Status SqlStore::RevokeApiToken(const std::string& id) {
  return Revoke("UPDATE api_tokens SET revoked = 1 WHERE id = :i", id, "API token");
}

Status SqlStore::RotateApiToken(const std::string& id, const std::string& hash,
                                const std::string& prefix, int64_t previous_expires_ms) {
  return Run([&](soci::session& sql) -> Status {
    long long until = previous_expires_ms;
    soci::statement st = Once(sql,
                              "UPDATE api_tokens SET previous_hash = hash, previous_expires_ms = "
                              ":e, hash = :h, prefix = :p WHERE id = :i AND revoked = 0",
                              soci::use(until), soci::use(hash), soci::use(prefix), soci::use(id));
    st.execute(true);
    if (st.get_affected_rows() > 0) return {};
    long long revoked = 0;
    sql << "SELECT revoked FROM api_tokens WHERE id = :i", soci::use(id), soci::into(revoked);
    if (!sql.got_data()) return MakeError(ErrorCode::kNotFound, "no API token '" + id + "'");
    return MakeError(ErrorCode::kConflict, "API token '" + id + "' is revoked: create a new one");
  });
}

Status SqlStore::TouchApiTokens(const std::map<std::string, int64_t>& last_used_ms) {
  if (last_used_ms.empty()) return {};
  return Run([&](soci::session& sql) -> Status {
    soci::transaction tx(sql);
    for (const auto& [id, ms] : last_used_ms) {
      long long t = ms;
      sql << "UPDATE api_tokens SET last_used_ms = :t WHERE id = :i AND last_used_ms < :t2",
          soci::use(t), soci::use(id), soci::use(t);
    }
    tx.commit();
    return {};
  });
}

Status SqlStore::AppendAudit(const AuditRecord& record) {
  std::lock_guard lock(audit_mu_);
  Status s = Run([&](soci::session& sql) -> Status {
    AuditRecord r = record;
    if (!audit_head_) {
      std::string head;
      soci::indicator ind = soci::i_null;
      sql << "SELECT hash FROM audit ORDER BY id DESC LIMIT 1", soci::into(head, ind);
      if (!sql.got_data()) {  // empty: after the anchor, if records were pruned
        sql << "SELECT last_hash FROM audit_anchor WHERE id = 1", soci::into(head, ind);
        if (!sql.got_data()) head.clear();
      }
      audit_head_ = head;
    }
    r.prev_hash = *audit_head_;
    r.hash = AuditHash(r, r.prev_hash);
    long long t = r.time_ms, status = r.status;
    sql << "INSERT INTO audit (time_ms, actor, action, target, status, result, before_doc, "
           "after_doc, prev_hash, hash) VALUES (:t, :a, :ac, :ta, :s, :r, :b, :af, :p, :h)",
        soci::use(t), soci::use(r.actor), soci::use(r.action), soci::use(r.target),
        soci::use(status), soci::use(r.result), soci::use(r.before), soci::use(r.after),
        soci::use(r.prev_hash), soci::use(r.hash);
    audit_head_ = r.hash;
    return {};
  });
  if (!s.ok()) audit_head_.reset();  // whether the insert happened is not known
  return s;
}

Result<std::vector<AuditRecord>> SqlStore::QueryAudit(const AuditFilter& f) {
  return Run([&](soci::session& sql) -> Result<std::vector<AuditRecord>> {
    std::vector<AuditRecord> out;
    AuditRecord r;
    long long id = 0, t = 0, status = 0;
    long long after = f.ascending ? f.after_id : 0;
    long long before = !f.ascending && f.before_id > 0 ? f.before_id : INT64_MAX;
    long long since = f.since_ms, until = f.until_ms, lim = std::max(1, f.limit);
    bool prefix = !f.target.empty() && f.target.back() == '/';
    long long target_prefix = prefix ? 1 : 0, target_len = static_cast<long long>(f.target.size());
    // The action is a substring, matched without regard to case, with LIKE's wildcards escaped.
    std::string action = "%";
    for (char c : f.action) {
      if (c == '%' || c == '_' || c == '!') action += '!';
      action += c;
    }
    action += '%';
    std::string q =
        "SELECT id, time_ms, actor, action, target, status, result, before_doc, after_doc, "
        "prev_hash, hash FROM audit WHERE (:a1 = '' OR actor = :a2) "
        "AND (:c1 = '' OR lower(action) LIKE lower(:c2) ESCAPE '!') "
        "AND (:t1 = '' OR target = :t2 OR (:tp = 1 AND substr(target, 1, :tl) = :t3)) "
        "AND (:r1 = '' OR (:r2 = 'ok' AND status < 400) OR (:r3 = 'error' AND status >= 400)) "
        "AND (:s1 = 0 OR time_ms >= :s2) AND (:u1 = 0 OR time_ms < :u2) "
        "AND id > :after AND id < :before ORDER BY id " +
        std::string(f.ascending ? "ASC" : "DESC") + " LIMIT :l";
    soci::statement st =
        Once(sql, q, soci::into(id), soci::into(t), soci::into(r.actor), soci::into(r.action),
             soci::into(r.target), soci::into(status), soci::into(r.result), soci::into(r.before),
             soci::into(r.after), soci::into(r.prev_hash), soci::into(r.hash), soci::use(f.actor),
             soci::use(f.actor), soci::use(f.action), soci::use(action), soci::use(f.target),
             soci::use(f.target), soci::use(target_prefix), soci::use(target_len),
             soci::use(f.target), soci::use(f.result), soci::use(f.result), soci::use(f.result),
             soci::use(since), soci::use(since), soci::use(until), soci::use(until),
             soci::use(after), soci::use(before), soci::use(lim));
    st.execute();
    while (st.fetch()) {
      r.id = id;
      r.time_ms = t;
      r.status = static_cast<int>(status);
      out.push_back(r);
    }
    return out;
  });
}

Result<AuditAnchor> SqlStore::FindAuditAnchor() {
  return Run([&](soci::session& sql) -> Result<AuditAnchor> {
    AuditAnchor a;
    long long last = 0, pruned = 0, t = 0;
    sql << "SELECT last_id, last_hash, pruned, time_ms, signature FROM audit_anchor WHERE id = 1",
        soci::into(last), soci::into(a.last_hash), soci::into(pruned), soci::into(t),
        soci::into(a.signature);
    if (!sql.got_data()) return MakeError(ErrorCode::kNotFound, "the audit log was never pruned");
    a.last_id = last;
    a.pruned = pruned;
    a.time_ms = t;
    return a;
  });
}

Result<int64_t> SqlStore::PruneAudit(int64_t before_ms, const std::string& key) {
  std::lock_guard lock(audit_mu_);
  return Run([&](soci::session& sql) -> Result<int64_t> {
    soci::transaction tx(sql);
    // From the start only: up to the record before the first one that is not old enough.
    long long b = before_ms, first_kept = 0, last = 0, n = 0;
    soci::indicator ind = soci::i_null;
    sql << "SELECT MIN(id) FROM audit WHERE time_ms >= :b", soci::use(b),
        soci::into(first_kept, ind);
    if (ind == soci::i_null) {
      sql << "SELECT COALESCE(MAX(id), 0) FROM audit", soci::into(last);
    } else {
      last = first_kept - 1;
    }
    sql << "SELECT COUNT(*) FROM audit WHERE id <= :l", soci::use(last), soci::into(n);
    if (n == 0) return int64_t{0};
    AuditAnchor a;
    long long t = 0, found = 0;
    sql << "SELECT id, hash, time_ms FROM audit WHERE id <= :l ORDER BY id DESC LIMIT 1",
        soci::use(last), soci::into(found), soci::into(a.last_hash), soci::into(t);
    long long before_pruned = 0;
    soci::indicator pind = soci::i_null;
    sql << "SELECT pruned FROM audit_anchor WHERE id = 1", soci::into(before_pruned, pind);
    if (!sql.got_data()) before_pruned = 0;
    a.last_id = found;
    a.time_ms = t;
    a.pruned = before_pruned + n;
    a.signature = AuditAnchorSignature(a, key);
    long long pruned = a.pruned;
    sql << "DELETE FROM audit WHERE id <= :l", soci::use(found);
    sql << "DELETE FROM audit_anchor WHERE id = 1";
    sql << "INSERT INTO audit_anchor (id, last_id, last_hash, pruned, time_ms, signature) VALUES "
           "(1, :l, :h, :p, :t, :s)",
        soci::use(found), soci::use(a.last_hash), soci::use(pruned), soci::use(t),
        soci::use(a.signature);
    tx.commit();
    return static_cast<int64_t>(n);
  });
}

Result<std::vector<JoinToken>> SqlStore::QueryJoinTokens(const std::string& hash) {
  return Run([&](soci::session& sql) -> Result<std::vector<JoinToken>> {
    std::vector<JoinToken> out;
    JoinToken t;
    long long created = 0, expires = 0, revoked = 0, all = hash.empty() ? 1 : 0;
    std::string q =
        "SELECT id, pool, hash, created_by, created_ms, expires_ms, revoked, prefix FROM "
        "join_tokens WHERE (hash = :h OR :all = 1) ORDER BY created_ms, id COLLATE \"binary\"";
    soci::statement st =
        Once(sql, q, soci::into(t.id), soci::into(t.pool), soci::into(t.hash),
             soci::into(t.created_by), soci::into(created), soci::into(expires),
             soci::into(revoked), soci::into(t.prefix), soci::use(hash), soci::use(all));
    st.execute();
    while (st.fetch()) {
      t.created_ms = created;
      t.expires_ms = expires;
      t.revoked = revoked != 0;
      out.push_back(t);
    }
    return out;
  });
}

Result<std::vector<ApiToken>> SqlStore::QueryApiTokens(const std::string& hash) {
  return Run([&](soci::session& sql) -> Result<std::vector<ApiToken>> {
    std::vector<ApiToken> out;
    ApiToken t;
    std::string role, clusters;
    long long created = 0, expires = 0, revoked = 0, all = hash.empty() ? 1 : 0;
    std::string q =
        "SELECT id, name, role, clusters, hash, created_ms, expires_ms, revoked, prefix, "
        "last_used_ms, previous_hash, previous_expires_ms FROM api_tokens WHERE (hash = :h OR "
        "(previous_hash = :h2 AND :h3 <> '') OR :all = 1) ORDER BY created_ms, id COLLATE "
        "\"binary\"";
    long long used = 0, previous_expires = 0;
    soci::statement st =
        Once(sql, q, soci::into(t.id), soci::into(t.name), soci::into(role), soci::into(clusters),
             soci::into(t.hash), soci::into(created), soci::into(expires), soci::into(revoked),
             soci::into(t.prefix), soci::into(used), soci::into(t.previous_hash),
             soci::into(previous_expires), soci::use(hash), soci::use(hash), soci::use(hash),
             soci::use(all));
    st.execute();
    while (st.fetch()) {
      t.role = ParseRole(role).value_or(Role::kViewer);
      t.clusters = clusters.empty() ? std::vector<std::string>{} : Split(clusters, ',');
      t.created_ms = created;
      t.expires_ms = expires;
      t.revoked = revoked != 0;
      t.last_used_ms = used;
      t.previous_expires_ms = previous_expires;
      out.push_back(t);
    }
    return out;
  });
}

Status SqlStore::Revoke(const char* query, const std::string& id, const char* what) {
  return Run([&](soci::session& sql) -> Status {
    soci::statement st = Once(sql, query, soci::use(id));
    st.execute(true);
    if (st.get_affected_rows() == 0) {
      return MakeError(ErrorCode::kNotFound, std::string("no ") + what + " '" + id + "'");
    }
    return {};
  });
}

}  // namespace gpufleet::store::sql
