// The embedded backend: one SQLite file in WAL mode with synchronous=NORMAL (a commit survives
// a crash of the process; a power loss may lose the last moments, never corrupt the file).

#include <soci/sqlite3/soci-sqlite3.h>

#include "store/sql/backends.h"

namespace gpufleet::store::sql {

std::shared_ptr<SqlStore> MakeSqlite(const std::string& path) {
  auto connect = [path](soci::session& s) {
    s.open(*soci::factory_sqlite3(), "db=" + path + " timeout=10");
    s << "PRAGMA journal_mode=WAL";
    s << "PRAGMA synchronous=NORMAL";
    s << "PRAGMA foreign_keys=ON";
  };
  return std::make_shared<SqlStore>(Dialect::kSqlite, "sqlite:" + path, connect, 1);
}

}  // namespace gpufleet::store::sql
