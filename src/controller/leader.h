#pragma once
// Several controllers on one database: this controller's id among them.

#include <string>

#include "common/result.h"

namespace gpufleet {

// DATA_DIR/controller.id, written at the first start ("HOSTNAME-8 hex digits"), so a controller
// keeps its id across restarts and two on one host differ.
Result<std::string> ControllerId(const std::string& data_dir);

}  // namespace gpufleet
