#pragma once
// A label matcher, as Alertmanager's and PromQL's: equal or not, to a literal or to a fully
// anchored regular expression.

#include <string>

namespace gpufleet::alerting {

struct Matcher {
  std::string name;
  std::string value;
  bool is_regex = false;
  bool is_equal = true;
};

}  // namespace gpufleet::alerting
