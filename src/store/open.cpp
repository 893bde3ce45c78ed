// store::Open: the URL picks the backend; the set of interfaces all point at one SqlStore.

#include <algorithm>

#include "store/migrations/migrations.h"
#include "store/sql/backends.h"

namespace gpufleet::store {

namespace {

bool IsPostgres(const std::string& url) {
  return url.rfind("postgresql://", 0) == 0 || url.rfind("postgres://", 0) == 0;
}

}  // namespace

int KnownSchemaVersion() { return migrations::All().back().version; }

std::string RedactUrl(const std::string& url) {
  std::string out = url;
  // user:password@ after the scheme
  if (auto scheme = out.find("://"); scheme != std::string::npos) {
    auto at = out.find('@', scheme + 3);
    auto slash = out.find('/', scheme + 3);
    if (at != std::string::npos && (slash == std::string::npos || at < slash)) {
      auto colon = out.find(':', scheme + 3);
      if (colon != std::string::npos && colon < at) out.replace(colon + 1, at - colon - 1, "***");
    }
  }
  // password=... among the query parameters
  for (size_t pos = 0; (pos = out.find("password=", pos)) != std::string::npos;) {
    pos += 9;
    auto end = out.find('&', pos);
    out.replace(pos, (end == std::string::npos ? out.size() : end) - pos, "***");
  }
  return out;
}

Result<std::shared_ptr<sql::SqlStore>> OpenSql(const std::string& url, int connections) {
  std::shared_ptr<sql::SqlStore> db;
  if (IsPostgres(url)) {
    db = sql::MakePostgres(url, static_cast<size_t>(std::clamp(connections, 1, 64)));
  } else {
    std::string path = url.rfind("sqlite:", 0) == 0 ? url.substr(7) : url;
    if (path.empty()) return MakeError(ErrorCode::kInvalidArgument, "empty store path");
    if (path.find("://") != std::string::npos) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "unknown store URL '" + RedactUrl(url) +
                           "': use sqlite:PATH or postgresql://USER@HOST:PORT/DB");
    }
    db = sql::MakeSqlite(path);
  }
  GF_TRY(db->Open());
  return db;
}

Result<Stores> Open(const std::string& url, const OpenOptions& options) {
  auto db = OpenSql(url, options.connections);
  if (!db.ok()) return db.error();
  auto s = db.value();
  return Stores{s, s, s, s, s, s, s, s, s, s, s, s, s, s};
}

}  // namespace gpufleet::store
