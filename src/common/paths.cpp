#include "common/paths.h"

#include <cstdlib>

namespace gpufleet {

std::string DefaultDataDir() {
  if (const char* d = std::getenv("GPUFLEET_DATA_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_DATA_HOME"); x && *x) return std::string(x) + "/gpufleet";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : ".") + "/.local/share/gpufleet";
}

}  // namespace gpufleet
