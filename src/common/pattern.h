#pragma once
// Patterns from users (silence and rule matchers, `=~` selectors): RE2, which matches in time
// linear in the input and uses no recursion, so no pattern can exhaust the stack or the CPU.
// Matches are fully anchored, as Prometheus's and Alertmanager's. A pattern is bounded before
// it is compiled (kMaxPatternBytes) and while it is (RE2's program size). Immutable after
// Compile, so thread-safe; copies share the compiled program.

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/result.h"

namespace gpufleet {

class Pattern {
 public:
  static constexpr size_t kMaxPatternBytes = 4096;
  // kInvalidArgument naming the problem for a pattern RE2 refuses or that is too large.
  static Result<Pattern> Compile(std::string_view pattern);
  // True when the whole of `text` matches.
  bool FullMatch(std::string_view text) const;
  // When the whole of `text` matches: `replacement` with $1, ${1}, $name and ${name} replaced
  // by the pattern's groups (Prometheus's label_replace); nullopt when it does not match.
  std::optional<std::string> Replace(std::string_view text, std::string_view replacement) const;
  const std::string& source() const;

 private:
  struct Compiled;
  explicit Pattern(std::shared_ptr<const Compiled> compiled) : compiled_(std::move(compiled)) {}
  std::shared_ptr<const Compiled> compiled_;
};

}  // namespace gpufleet
