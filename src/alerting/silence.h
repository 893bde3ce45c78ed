#pragma once
// Silences, as Alertmanager's: matchers on an alert's labels (equal or not, literal or a fully
// anchored regular expression), a time window, an author and a comment. A silenced alert keeps
// its state but its notifications are not sent.

#include <optional>
#include <string>
#include <vector>

#include "alerting/engine.h"
#include "alerting/matcher.h"
#include "common/pattern.h"
#include "common/result.h"
#include "store/store.h"

namespace gpufleet::alerting {

// Reads `[{name, value, isRegex, isEqual}]` (isRegex and isEqual optional); errors name the
// matcher and the problem (an empty name, a bad regular expression).
Result<std::vector<Matcher>> ParseMatchers(const std::string& json_array);
std::string MatchersJson(const std::vector<Matcher>& matchers);

// Matchers compiled once; a label set matches when every matcher holds (an absent label reads
// as empty, as in Alertmanager). What silences and channel routes match with.
class MatcherSet {
 public:
  explicit MatcherSet(std::vector<Matcher> matchers);  // as ParseMatchers gives them
  bool Matches(const Labels& labels) const;

 private:
  std::vector<Matcher> matchers_;
  std::vector<std::optional<Pattern>> regexes_;  // one per matcher; none for literal ones
};

// The silences in force at `now`, ready to match.
class ActiveSilences {
 public:
  ActiveSilences(const std::vector<SilenceRecord>& all, int64_t now);
  // The ids of the silences that match `labels`.
  std::vector<std::string> Matching(const Labels& labels) const;

 private:
  std::vector<std::pair<std::string, MatcherSet>> silences_;  // by id
};

}  // namespace gpufleet::alerting
