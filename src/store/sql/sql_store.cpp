// The SQL store's sessions, migrations and the database interface.

#include "store/sql/sql_store.h"

#include <spdlog/spdlog.h>

#include <boost/json.hpp>

#include "common/strings.h"
#include "store/migrations/migrations.h"
#include "store/sql/backends.h"

namespace json = boost::json;

namespace gpufleet::store::sql {

json::value ParseOrNull(const std::string& text) {
  boost::system::error_code ec;
  auto v = json::parse(text, ec);
  return ec ? json::value(nullptr) : v;
}

namespace {

// SOCI's message without the statement and its values (" while executing ..." names a token's
// hash, a channel's secret...), SOCI's own prefixes, and libpq's second lines.
std::string Short(std::string what) {
  for (const char* cut : {" while executing", " while preparing", "\n"}) {
    if (auto pos = what.find(cut); pos != std::string::npos) what.resize(pos);
  }
  for (const char* noise :
       {"Cannot execute query. ", "Cannot prepare statement. ", "Fatal error. "}) {
    for (size_t pos; (pos = what.find(noise)) != std::string::npos;) {
      what.erase(pos, std::string_view(noise).size());
    }
  }
  while (!what.empty() && (what.back() == ' ' || what.back() == '.')) what.pop_back();
  return what;
}

// libpq's message on one line: "Cannot establish connection...\nconnection to server on socket
// ... failed: ...\n\tIs the server running...": a refused start is one line of the CLI's.
std::string OneLine(const std::string& what) {
  std::string out;
  for (char c : what) {
    bool space = c == '\n' || c == '\t' || c == ' ';
    if (space && (out.empty() || out.back() == ' ')) continue;
    out += space ? ' ' : c;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// For the log: the statement but not its bound values (`... with :s="a webhook secret"`).
std::string WithoutValues(std::string what) {
  if (auto pos = what.find("\" with :"); pos != std::string::npos) what.resize(pos + 1);
  return what;
}

}  // namespace

Error StoreError(const std::exception& e) {
  std::string what = e.what();
  // The statement goes to the log; the caller (and so an API client) gets the short text.
  // SQLite: "UNIQUE constraint failed"; PostgreSQL: "duplicate key value violates unique
  // constraint".
  if (what.find("UNIQUE constraint") != std::string::npos ||
      what.find("duplicate key value") != std::string::npos) {
    spdlog::debug("store: {}", WithoutValues(what));
    return MakeError(ErrorCode::kConflict, "already exists: " + Short(what));
  }
  spdlog::warn("store: {}", WithoutValues(what));
  return MakeError(ErrorCode::kUnavailable, "store: " + Short(what));
}

SqlStore::SqlStore(Dialect dialect, std::string location, Connect connect, size_t sessions)
    : dialect_(dialect),
      location_(std::move(location)),
      connect_(std::move(connect)),
      sessions_(sessions),
      pool_(std::make_unique<soci::connection_pool>(sessions)) {}

SqlStore::~SqlStore() = default;

Status SqlStore::Open() {
  try {
    for (size_t i = 0; i < sessions_; ++i) connect_(pool_->at(i));
    soci::session sql(*pool_);
    return Migrate(sql);
  } catch (const std::exception& e) {
    return MakeError(ErrorCode::kUnavailable,
                     "cannot open store " + location_ + ": " + OneLine(e.what()));
  }
}

Status SqlStore::Migrate(soci::session& sql) {
  soci::transaction tx(sql);
  if (dialect_ == Dialect::kPostgres) {
    // Controllers starting together on one database: one migrates, the others wait here and
    // then find the work done.
    sql << "SELECT pg_advisory_xact_lock(7170656)";
    // Lists sort by bytes on both backends, whatever the database's own collation.
    sql << "CREATE COLLATION IF NOT EXISTS \"binary\" (provider = libc, locale = 'C')";
  }
  sql << "CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY)";
  long long current = 0;
  soci::indicator ind = soci::i_null;
  sql << "SELECT MAX(version) FROM schema_migrations", soci::into(current, ind);
  if (ind != soci::i_ok) current = 0;
  if (current > KnownSchemaVersion()) {
    return MakeError(ErrorCode::kConflict,
                     "store " + location_ + " has schema version " + std::to_string(current) +
                         ", newer than this gpufleet knows (" +
                         std::to_string(KnownSchemaVersion()) + "): run a newer gpufleet");
  }
  const char* id = dialect_ == Dialect::kPostgres ? "BIGSERIAL PRIMARY KEY"
                                                  : "INTEGER PRIMARY KEY AUTOINCREMENT";
  bool triggers = false;  // the change feed's, once every table they watch is there
  for (const auto& m : migrations::All()) {
    if (m.version <= current) continue;
    std::string text(m.sql);
    for (size_t pos; (pos = text.find("{ID}")) != std::string::npos;) text.replace(pos, 4, id);
    for (const auto& stmt : Split(text, ';')) {
      if (stmt.find_first_not_of(" \n") != std::string::npos) sql << stmt;
    }
    long long v = m.version;
    sql << "INSERT INTO schema_migrations (version) VALUES (:v)", soci::use(v);
    spdlog::info("store: applied migration {}", m.version);
    if (m.version == 20) BackfillUsageDays(sql);
    triggers |= m.version >= 23 && dialect_ == Dialect::kPostgres;
  }
  if (triggers) InstallChangeTriggers(sql);
  tx.commit();
  return {};
}

bool SqlStore::Reconnect(soci::session& sql) {
  if (dialect_ != Dialect::kPostgres) return false;
  try {
    sql << "SELECT 1";
    return false;  // the connection is fine: the statement itself failed
  } catch (const std::exception&) {
  }
  try {
    sql.close();
    connect_(sql);
    spdlog::info("store: connected again to {}", location_);
    return true;
  } catch (const std::exception& e) {
    return false;
  }
}

std::string_view SqlStore::backend() const {
  return dialect_ == Dialect::kPostgres ? "postgresql" : "sqlite";
}

Status SqlStore::Ping() {
  return Run([&](soci::session& sql) -> Status {
    int one = 0;
    sql << "SELECT 1", soci::into(one);
    return {};
  });
}

Result<int> SqlStore::SchemaVersion() {
  return Run([&](soci::session& sql) -> Result<int> {
    long long v = 0;
    soci::indicator ind = soci::i_null;
    sql << "SELECT MAX(version) FROM schema_migrations", soci::into(v, ind);
    return ind == soci::i_ok ? static_cast<int>(v) : 0;
  });
}

}  // namespace gpufleet::store::sql
