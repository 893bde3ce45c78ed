// The PostgreSQL backend: libpq through SOCI, a pool of sessions. The URI goes to libpq as it
// is (so every libpq parameter works: sslmode, passfile, host=/socket/dir ...), with a connect
// timeout added when it names none, so a database that does not answer fails a call in
// seconds rather than hanging the API.

#include <soci/postgresql/soci-postgresql.h>

#include "common/crypto.h"
#include "store/sql/backends.h"

namespace gpufleet::store::sql {

std::shared_ptr<SqlStore> MakePostgres(const std::string& uri, size_t sessions) {
  std::string conninfo = uri;
  if (conninfo.find("connect_timeout=") == std::string::npos) {
    conninfo += conninfo.find('?') == std::string::npos ? "?" : "&";
    conninfo += "connect_timeout=5";
  }
  // This store's connections' name: the change feed (sql/changes.cpp) tells another process's
  // changes from its own by it.
  std::string name = "gpufleet-" + RandomHex(6);
  auto connect = [conninfo, name](soci::session& s) {
    s.open(*soci::factory_postgresql(), conninfo);
    // libpq prints notices ("relation ... already exists, skipping") on stderr: not for logs.
    s << "SET client_min_messages = warning";
    s << "SET application_name = '" + name + "'";
  };
  return std::make_shared<SqlStore>(Dialect::kPostgres, RedactUrl(uri), connect, sessions);
}

}  // namespace gpufleet::store::sql
