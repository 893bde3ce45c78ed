#pragma once
// Where gpufleet keeps its files by default.

#include <string>

namespace gpufleet {

// $GPUFLEET_DATA_DIR, else $XDG_DATA_HOME/gpufleet, else ~/.local/share/gpufleet.
std::string DefaultDataDir();

}  // namespace gpufleet
