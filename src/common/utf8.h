#pragma once
// UTF-8 from outside. Text that a JSON reply may carry back must be UTF-8, or the reply is not
// JSON: the readers of files (YAML, CSV) refuse other text, and error messages that quote a
// request replace what is not UTF-8.

#include <string>
#include <string_view>

namespace gpufleet {

// The offset of the first byte of `text` that is not part of well-formed UTF-8 (an overlong
// form, a surrogate, past U+10FFFF, a sequence cut short), or npos when all of it is.
size_t InvalidUtf8At(std::string_view text);
// `text` with each byte that is not part of well-formed UTF-8 replaced by U+FFFD.
std::string ToUtf8(std::string_view text);

}  // namespace gpufleet
