#pragma once
// Large reply bodies (a 10,000-GPU /metrics page is about 50 MB) are built in buffers that are
// handed back after the write instead of freed: a fresh buffer of that size is mapped anew by
// malloc each time, and faulting its pages in costs more than writing the page. At most two
// buffers are kept; small ones are not kept at all, and neither are huge ones (one oversized
// answer must not hold its memory for the life of the process).

#include <mutex>
#include <string>
#include <vector>

namespace gpufleet::api {

class BufferPool {
 public:
  static constexpr size_t kMinKept = 1 << 20;
  static constexpr size_t kMaxKept = 2;
  static constexpr size_t kMaxKeptBytes = 128 << 20;

  // An empty string, with the capacity of a returned buffer when one is free.
  std::string Take() {
    std::lock_guard lock(mu_);
    if (free_.empty()) return {};
    std::string s = std::move(free_.back());
    free_.pop_back();
    s.clear();
    return s;
  }
  void Give(std::string&& s) {
    if (s.capacity() < kMinKept || s.capacity() > kMaxKeptBytes) return;
    std::lock_guard lock(mu_);
    if (free_.size() < kMaxKept) free_.push_back(std::move(s));
  }

 private:
  std::mutex mu_;
  std::vector<std::string> free_;
};

}  // namespace gpufleet::api
