#pragma once
// A fresh directory for one test: made with mkdtemp(3) under $TMPDIR (or /tmp), so two runs of
// the same test at once never share it, and removed with everything in it by the destructor.
// Header-only; tests of any component may include it (tests/support/).

#include <stdlib.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

namespace gpufleet::testing {

class TempDir {
 public:
  explicit TempDir(std::string_view prefix = "gf-test") {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern =
        std::string(tmp && *tmp ? tmp : "/tmp") + "/" + std::string(prefix) + "-XXXXXX";
    if (!::mkdtemp(pattern.data())) {
      throw std::runtime_error("mkdtemp " + pattern + ": " +
                               std::error_code(errno, std::generic_category()).message());
    }
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // A path inside it: dir / "fleet.db".
  std::string operator/(std::string_view name) const { return path_ + "/" + std::string(name); }
  operator std::filesystem::path() const { return path_; }  // NOLINT: where a path is taken

 private:
  std::string path_;
};

}  // namespace gpufleet::testing
