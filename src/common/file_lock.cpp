#include "common/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace gpufleet {

Result<FileLock> FileLock::Take(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return MakeError(ErrorCode::kUnavailable, "cannot open " + path + ": " + std::strerror(errno));
  }
  // flock, not fcntl: its lock belongs to this open file, so a second FileLock in the same
  // process is refused too, and SQLite's own fcntl locks on the database are not touched.
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    char buf[32] = {};
    ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
    ::close(fd);
    if (err != EWOULDBLOCK) {
      return MakeError(ErrorCode::kUnavailable, "cannot lock " + path + ": " + std::strerror(err));
    }
    std::string pid = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
    while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
    return MakeError(
        ErrorCode::kConflict,
        path + " is in use by " + (pid.empty() ? "another process" : "process " + pid));
  }
  std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 ||
      ::pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    // The lock holds without the pid; only the message of whoever is refused is poorer.
  }
  return FileLock(fd);
}

FileLock::FileLock(FileLock&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}

FileLock& FileLock::operator=(FileLock&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
  }
  return *this;
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace gpufleet
