#include "controller/locks.h"

#include <cstdio>
#include <filesystem>

namespace gpufleet {

// A data directory holds one controller's telemetry log, and a SQLite file serves one
// controller: two would interleave their writes and each run the engines. Several controllers
// share a PostgreSQL store, each with a data directory of its own. The locks go with the
// process, however it ends.
Result<std::vector<FileLock>> TakeControllerLocks(const std::string& data_dir,
                                                  const std::string& store_url) {
  auto refuse = [](const Error& e, const std::string& what) {
    return MakeError(ErrorCode::kConflict,
                     "another controller is running on " + what + " (" + e.message + ")");
  };
  std::vector<FileLock> locks;
  auto dir = FileLock::Take(data_dir + "/controller.lock");
  if (!dir.ok()) {
    if (dir.error().code != ErrorCode::kConflict) return dir.error();
    return refuse(dir.error(), "the data directory " + data_dir +
                                   ": give each controller a --data-dir of its own");
  }
  locks.push_back(std::move(dir.value()));
  // A SQLite store's file: `sqlite:PATH` or a bare PATH, as store::Open reads the URL.
  const std::string& url = store_url;
  if (url.find("://") != std::string::npos) return locks;  // PostgreSQL
  std::string db = url.rfind("sqlite:", 0) == 0 ? url.substr(7) : url;
  auto file = FileLock::Take(db + ".controller-lock");
  if (!file.ok()) {
    if (file.error().code != ErrorCode::kConflict) return file.error();
    return refuse(file.error(), "the SQLite store " + db +
                                    ": SQLite serves one controller; several controllers share "
                                    "a PostgreSQL store (--store postgresql://...)");
  }
  locks.push_back(std::move(file.value()));
  return locks;
}

void WriteControllerAddress(const std::string& data_dir, const std::string& shown) {
  std::string tmp = data_dir + "/controller.addr.tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (!f) return;
  std::fprintf(f, "%s\n", shown.c_str());
  std::fclose(f);
  std::error_code ec;
  std::filesystem::rename(tmp, data_dir + "/controller.addr", ec);
}

}  // namespace gpufleet
