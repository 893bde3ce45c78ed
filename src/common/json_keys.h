#pragma once
// JSON from outside must say one thing: an object that names a key twice is refused (parsers
// disagree on which one wins: Boost.JSON keeps the last, others the first). Read event by event,
// without building the document.

#include <string_view>

#include "common/result.h"

namespace gpufleet {

// kInvalidArgument naming the key ("key 'role' is given twice in one object") when an object
// of `json` repeats a key; OK otherwise, also for text that is not JSON (the parse proper
// reports that).
Status CheckJsonKeys(std::string_view json);

}  // namespace gpufleet
