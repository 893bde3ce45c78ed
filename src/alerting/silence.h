#pragma once
// Silences, as Alertmanager's: matchers on an alert's labels (equal or not, literal or a fully
// anchored regular expression), a time window, an author and a comment. A silenced alert keeps
// its state but its notifications are not sent.

#include <regex>
#include <string>
#include <vector>

#include "alerting/engine.h"
#include "common/result.h"
#include "store/store.h"

namespace gpufleet::alerting {

struct Matcher {
  std::string name;
  std::string value;
  bool is_regex = false;
  bool is_equal = true;
};

// Reads `[{name, value, isRegex, isEqual}]` (isRegex and isEqual optional); errors name the
// matcher and the problem (an empty name, a bad regular expression).
Result<std::vector<Matcher>> ParseMatchers(const std::string& json_array);
std::string MatchersJson(const std::vector<Matcher>& matchers);

// The silences in force at `now`, ready to match.
class ActiveSilences {
 public:
  ActiveSilences(const std::vector<SilenceRecord>& all, int64_t now);
  // The ids of the silences that match `labels`.
  std::vector<std::string> Matching(const Labels& labels) const;

 private:
  struct Compiled {
    std::string id;
    std::vector<Matcher> matchers;
    std::vector<std::regex> regexes;  // one per matcher; unused for literal ones
  };
  std::vector<Compiled> silences_;
};

}  // namespace gpufleet::alerting
