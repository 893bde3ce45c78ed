#pragma once
// How each backend opens the SQL store (sqlite/sqlite.cpp, postgres/postgres.cpp). Private to
// this library.

#include <memory>
#include <string>
#include <vector>

#include "store/sql/sql_store.h"

namespace gpufleet::store::sql {

// Not yet opened: the caller calls Open().
std::shared_ptr<SqlStore> MakeSqlite(const std::string& path);
// `uri` is libpq's postgresql:// URI; `sessions` connections.
std::shared_ptr<SqlStore> MakePostgres(const std::string& uri, size_t sessions);
// PostgreSQL: the triggers that tell the change feed (store/lease.h WatchChanges); migration 23.
void InstallChangeTriggers(soci::session& sql);

}  // namespace gpufleet::store::sql

namespace gpufleet::store {
// store::Open's work, keeping the concrete class (for Copy).
Result<std::shared_ptr<sql::SqlStore>> OpenSql(const std::string& url, int connections);
// Every table of the schema, parents before children (the order Copy writes them in).
const std::vector<std::string>& Tables();
}  // namespace gpufleet::store
