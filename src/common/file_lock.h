#pragma once
// An exclusive lock on a file, held by this process until the FileLock goes (or the process
// dies: the kernel drops it, so a controller killed with -9 leaves nothing to clean up).

#include <string>

#include "common/result.h"

namespace gpufleet {

class FileLock {
 public:
  // Takes the lock on `path` (created if missing, mode 0600) without waiting, and writes this
  // process's pid into it. kConflict when another process (or another FileLock of
  // this one) holds it: "… is in use by process 1234".
  static Result<FileLock> Take(const std::string& path);

  FileLock() = default;
  FileLock(FileLock&& o) noexcept;
  FileLock& operator=(FileLock&& o) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();

  bool held() const { return fd_ >= 0; }

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace gpufleet
