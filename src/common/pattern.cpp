#include "common/pattern.h"

#include <re2/re2.h>

#include <algorithm>
#include <cctype>
#include <vector>

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

std::optional<std::string> Pattern::Replace(std::string_view text,
                                            std::string_view replacement) const {
  const RE2& re = compiled_->re;
  std::vector<re2::StringPiece> groups(static_cast<size_t>(re.NumberOfCapturingGroups()) + 1);
  re2::StringPiece input(text.data(), text.size());
  if (!re.Match(input, 0, input.size(), RE2::ANCHOR_BOTH, groups.data(),
                static_cast<int>(groups.size()))) {
    return std::nullopt;
  }
  const auto& named = re.NamedCapturingGroups();
  std::string out;
  for (size_t i = 0; i < replacement.size(); ++i) {
    char c = replacement[i];
    if (c != '$' || i + 1 >= replacement.size()) {
      out += c;
      continue;
    }
    size_t start = i + 1, end = start;
    bool braced = replacement[start] == '{';
    if (braced) {
      end = replacement.find('}', start);
      if (end == std::string_view::npos) {
        out += c;
        continue;
      }
      ++start;
    } else {
      while (
          end < replacement.size() &&
          (std::isalnum(static_cast<unsigned char>(replacement[end])) || replacement[end] == '_')) {
        ++end;
      }
    }
    std::string name(replacement.substr(start, end - start));
    i = braced ? end : end - 1;
    if (name.empty()) {
      out += c;
      continue;
    }
    int index = -1;
    if (std::all_of(name.begin(), name.end(),
                    [](char d) { return std::isdigit(static_cast<unsigned char>(d)) != 0; })) {
      index = name.size() < 4 ? std::stoi(name) : -1;
    } else if (auto it = named.find(name); it != named.end()) {
      index = it->second;
    }
    if (index >= 0 && static_cast<size_t>(index) < groups.size()) {
      out.append(groups[static_cast<size_t>(index)].data(),
                 groups[static_cast<size_t>(index)].size());
    }
  }
  return out;
}

const std::string& Pattern::source() const { return compiled_->source; }

}  // namespace gpufleet
