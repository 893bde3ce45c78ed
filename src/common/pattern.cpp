#include "common/pattern.h"

#include <re2/re2.h>

namespace gpufleet {

struct Pattern::Compiled {
  Compiled(std::string_view p, const RE2::Options& options)
      : source(p), re(re2::StringPiece(p.data(), p.size()), options) {}
  std::string source;
  RE2 re;
};

Result<Pattern> Pattern::Compile(std::string_view pattern) {
  if (pattern.size() > kMaxPatternBytes) {
    return MakeError(ErrorCode::kInvalidArgument, "a pattern of " + std::to_string(pattern.size()) +
                                                      " bytes; at most " +
                                                      std::to_string(kMaxPatternBytes));
  }
  RE2::Options options;
  options.set_log_errors(false);
  options.set_max_mem(1 << 20);  // bounds the compiled program (and nesting) of one pattern
  auto compiled = std::make_shared<const Compiled>(pattern, options);
  if (!compiled->re.ok()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "not a regular expression RE2 accepts: " + compiled->re.error());
  }
  return Pattern(std::move(compiled));
}

bool Pattern::FullMatch(std::string_view text) const {
  return RE2::FullMatch(re2::StringPiece(text.data(), text.size()), compiled_->re);
}

const std::string& Pattern::source() const { return compiled_->source; }

}  // namespace gpufleet
