#pragma once
// A fuzz target's entry point (libFuzzer's), and the check a target makes of a property that
// must hold whatever the input: a failure aborts, which libFuzzer reports with the input and
// the driver's replay (driver.cpp) reports as a failed test.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace gpufleet::fuzz {

inline std::string_view Text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

[[noreturn]] inline void Fail(const char* what, std::string_view detail = {}) {
  std::fprintf(stderr, "fuzz property failed: %s%s%.*s\n", what, detail.empty() ? "" : ": ",
               static_cast<int>(detail.size() > 2000 ? 2000 : detail.size()), detail.data());
  std::abort();
}

}  // namespace gpufleet::fuzz
