// The SQL store: the leader's lease, the controllers that serve, and fenced calls
// (store/lease.h).

#include <libpq-fe.h>
#include <soci/postgresql/soci-postgresql.h>
#include <spdlog/spdlog.h>

#include "store/sql/sql_store.h"

namespace gpufleet::store {

namespace {
thread_local const Fence* current_fence = nullptr;
}  // namespace

FenceScope::FenceScope(const Fence* fence) : previous_(current_fence) { current_fence = fence; }
FenceScope::~FenceScope() { current_fence = previous_; }
const Fence* CurrentFence() { return current_fence; }

std::shared_ptr<Coordination> CoordinationOf(const std::shared_ptr<Database>& db) {
  return std::dynamic_pointer_cast<Coordination>(db);
}

}  // namespace gpufleet::store

namespace gpufleet::store::sql {

namespace {

// The database's clock, in ms since the epoch.
const char* NowMs(Dialect d) {
  return d == Dialect::kPostgres ? "CAST(EXTRACT(EPOCH FROM now()) * 1000 AS BIGINT)"
                                 : "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)";
}

std::string WithNow(std::string text, Dialect d) {
  for (size_t pos; (pos = text.find("{NOW}")) != std::string::npos;) {
    text.replace(pos, 5, NowMs(d));
  }
  return text;
}

}  // namespace

Result<Lease> SqlStore::TakeLease(const std::string& name, const std::string& holder,
                                  int64_t lease_ms) {
  // One statement in autocommit: a free or expired lease (or the holder's own) is taken; the
  // epoch grows unless the holder renews a lease it still has.
  static const std::string kTake =
      "INSERT INTO leader (name, holder, epoch, expires_at) VALUES (:n, :h, 1, {NOW} + :ms) "
      "ON CONFLICT (name) DO UPDATE SET "
      "epoch = CASE WHEN leader.holder = excluded.holder AND leader.expires_at > {NOW} "
      "THEN leader.epoch ELSE leader.epoch + 1 END, "
      "holder = excluded.holder, expires_at = excluded.expires_at "
      "WHERE leader.holder = excluded.holder OR leader.expires_at <= {NOW} "
      "RETURNING epoch, expires_at";
  auto taken = Run([&](soci::session& sql) -> Result<bool> {
    long long ms = lease_ms, epoch = 0, expires = 0;
    auto st = Once(sql, WithNow(kTake, dialect_), soci::use(name), soci::use(holder), soci::use(ms),
                   soci::into(epoch), soci::into(expires));
    return st.execute(true);
  });
  if (!taken.ok()) return taken.error();
  auto lease = ReadLease(name);
  if (!lease.ok()) return lease.error();
  lease->held = taken.value() && lease->holder == holder && lease->expires_ms > lease->now_ms;
  return lease;
}

Result<Lease> SqlStore::ReadLease(const std::string& name) {
  return Run([&](soci::session& sql) -> Result<Lease> {
    Lease l;
    long long now = 0, epoch = 0, expires = 0;
    soci::indicator ind = soci::i_null;
    sql << WithNow("SELECT {NOW}", dialect_), soci::into(now);
    sql << "SELECT holder, epoch, expires_at FROM leader WHERE name = :n",
        soci::into(l.holder, ind), soci::into(epoch), soci::into(expires), soci::use(name);
    l.now_ms = now;
    if (ind == soci::i_ok) {
      l.epoch = epoch;
      l.expires_ms = expires;
    } else {
      l.holder.clear();
    }
    return l;
  });
}

Status SqlStore::ReleaseLease(const std::string& name, const std::string& holder) {
  return Run([&](soci::session& sql) -> Status {
    // Expired now: the next controller takes it at its next try, with the next epoch.
    sql << WithNow("UPDATE leader SET expires_at = {NOW} WHERE name = :n AND holder = :h",
                   dialect_),
        soci::use(name), soci::use(holder);
    return {};
  });
}

Status SqlStore::SeeController(const ControllerRecord& c) {
  return Run([&](soci::session& sql) -> Status {
    long long started = c.started_ms, agents = c.agents;
    sql << WithNow(
        "INSERT INTO controllers (id, url, started_ms, last_seen_ms, agents) "
        "VALUES (:i, :u, :s, {NOW}, :a) ON CONFLICT (id) DO UPDATE SET url = excluded.url, "
        "started_ms = excluded.started_ms, last_seen_ms = excluded.last_seen_ms, "
        "agents = excluded.agents",
        dialect_),
        soci::use(c.id), soci::use(c.url), soci::use(started), soci::use(agents);
    return {};
  });
}

Result<std::vector<ControllerRecord>> SqlStore::ListControllers() {
  return Run([&](soci::session& sql) -> Result<std::vector<ControllerRecord>> {
    std::vector<ControllerRecord> out;
    soci::rowset<soci::row> rows =
        (sql.prepare << "SELECT id, url, started_ms, last_seen_ms, agents FROM controllers "
                        "ORDER BY id COLLATE \"binary\"");
    for (const auto& r : rows) {
      ControllerRecord c;
      c.id = r.get<std::string>(0);
      c.url = r.get<std::string>(1);
      c.started_ms = r.get<long long>(2);
      c.last_seen_ms = r.get<long long>(3);
      c.agents = r.get<long long>(4);
      out.push_back(std::move(c));
    }
    return out;
  });
}

Status SqlStore::ForgetController(const std::string& id, int64_t before_ms) {
  return Run([&](soci::session& sql) -> Status {
    long long before = before_ms;
    sql << "DELETE FROM controllers WHERE id = :i OR last_seen_ms < :b", soci::use(id),
        soci::use(before);
    return {};
  });
}

Status SqlStore::BeginFenced(soci::session& sql, const Fence& fence) {
  sql << "BEGIN";
  // A method that opens its own transaction inside this one gets PostgreSQL's warning about
  // it, which is expected here: not for the logs.
  sql << "SET LOCAL client_min_messages = error";
  // The shared lock makes a takeover (an UPDATE of the row) wait for this transaction: what it
  // writes happens while the lease was this epoch's.
  long long epoch = fence.epoch, held = 0;
  soci::indicator ind = soci::i_null;
  sql << WithNow(
      "SELECT epoch FROM leader WHERE name = :n AND holder = :h AND epoch = :e AND "
      "expires_at > {NOW} FOR SHARE",
      dialect_),
      soci::into(held, ind), soci::use(fence.name), soci::use(fence.holder), soci::use(epoch);
  if (ind == soci::i_ok) return {};
  sql << "ROLLBACK";
  spdlog::warn(
      "store: the lease {} is no longer this controller's at epoch {}: a leader's "
      "write refused",
      fence.name, fence.epoch);
  if (fence.on_lost) fence.on_lost();
  return MakeError(ErrorCode::kConflict, "this controller no longer leads (lease " + fence.name +
                                             " epoch " + std::to_string(fence.epoch) +
                                             " is over): the leader's work is refused");
}

void SqlStore::EndFenced(soci::session& sql, bool commit) {
  try {
    auto* backend = static_cast<soci::postgresql_session_backend*>(sql.get_backend());
    // The method may have committed (or rolled back) the transaction itself.
    if (backend && backend->conn_ && PQtransactionStatus(backend->conn_) == PQTRANS_IDLE) return;
    sql << (commit ? "COMMIT" : "ROLLBACK");
  } catch (const std::exception& e) {
    if (commit) throw;  // the commit failed: the call did not happen
    spdlog::debug("store: rollback: {}", e.what());
  }
}

}  // namespace gpufleet::store::sql

namespace gpufleet::store::sql {

Status SqlStore::PostCommand(const RelayedCommand& c) {
  return Run([&](soci::session& sql) -> Status {
    long long id = c.id, created = c.created_ms;
    sql << "INSERT INTO agent_commands (id, node, issuer, command, taken_by, result, created_ms) "
           "VALUES (:i, :n, :s, :c, :b, :r, :t)",
        soci::use(id), soci::use(c.node), soci::use(c.issuer), soci::use(c.command),
        soci::use(c.taken_by), soci::use(c.result), soci::use(created);
    return {};
  });
}

Result<std::vector<RelayedCommand>> SqlStore::RelayedCommands(const std::string& issuer,
                                                              bool every_answer) {
  return Run([&](soci::session& sql) -> Result<std::vector<RelayedCommand>> {
    int every = every_answer ? 1 : 0;
    std::vector<RelayedCommand> out;
    soci::rowset<soci::row> rows =
        (sql.prepare << "SELECT id, node, issuer, command, taken_by, result, created_ms "
                        "FROM agent_commands WHERE taken_by = '' OR issuer = :i OR "
                        "(:e = 1 AND result <> '') ORDER BY id",
         soci::use(issuer), soci::use(every));
    for (const auto& r : rows) {
      RelayedCommand c;
      c.id = r.get<long long>(0);
      c.node = r.get<std::string>(1);
      c.issuer = r.get<std::string>(2);
      c.command = r.get<std::string>(3);
      c.taken_by = r.get<std::string>(4);
      c.result = r.get<std::string>(5);
      c.created_ms = r.get<long long>(6);
      out.push_back(std::move(c));
    }
    return out;
  });
}

Result<bool> SqlStore::TakeCommand(int64_t id, const std::string& by) {
  return Run([&](soci::session& sql) -> Result<bool> {
    long long i = id;
    soci::statement st = (sql.prepare << "UPDATE agent_commands SET taken_by = :b "
                                         "WHERE id = :i AND taken_by = ''",
                          soci::use(by), soci::use(i));
    st.execute(true);
    return st.get_affected_rows() == 1;
  });
}

Status SqlStore::AnswerCommand(int64_t id, const std::string& result) {
  return Run([&](soci::session& sql) -> Status {
    long long i = id;
    sql << "UPDATE agent_commands SET result = :r WHERE id = :i", soci::use(result), soci::use(i);
    return {};
  });
}

Result<bool> SqlStore::ForgetCommand(int64_t id, bool untaken_only) {
  return Run([&](soci::session& sql) -> Result<bool> {
    long long i = id;
    int only = untaken_only ? 1 : 0;
    soci::statement st =
        (sql.prepare << "DELETE FROM agent_commands WHERE id = :i AND (:o = 0 OR taken_by = '')",
         soci::use(i), soci::use(only));
    st.execute(true);
    return st.get_affected_rows() == 1;
  });
}

}  // namespace gpufleet::store::sql
