#pragma once
// The one strict reader of a JSON object's fields, for every document gpufleet takes as JSON (a
// request body, a policy, a team, a rollout, a stored document): an unknown field, a wrong type
// or a value out of range is an error that names the field by its path from the document's top
// ("strategy.canary: must be ...", "schedule[2].nodes: must be an integer"), and the first bad
// field's path is kept (field()) for the callers that report it apart (the fleet file's lines).
// Each reader lists its fields once (Only) and reads each with the method of its type; a field
// that is absent leaves `out` as it was (its default), unless the method says it is required.

#include <boost/json/fwd.hpp>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace gpufleet {

class JsonFields {
 public:
  // `path`: where the object stands in its document ("strategy", "teams[2]"); empty at the top.
  explicit JsonFields(const boost::json::object& o, std::string path = "");

  // "path.key: unknown field (known: a, b, c)" for the first field not in `known`.
  Status Only(std::initializer_list<std::string_view> known);
  const boost::json::value* Get(std::string_view key) const;

  Status String(std::string_view key, std::string& out);  // "must be a string"
  Status Bool(std::string_view key, bool& out);           // "must be true or false"
  Status Number(std::string_view key, double& out);       // "must be a number"
  // A whole number in [lo, hi]: "must be an integer" (out of range too, with the bounds).
  Status Int(std::string_view key, int& out, int lo = -1'000'000'000, int hi = 1'000'000'000);
  Status Int64(std::string_view key, int64_t& out);
  // "5m", "90s", "250ms" or a number of seconds, from 0 to `max_s`.
  Status Seconds(std::string_view key, double& out, double max_s = 366 * 86400.0);
  // A list of non-empty strings; `unique`: none listed twice.
  Status Strings(std::string_view key, std::vector<std::string>& out, bool unique = true);

  std::string Path(std::string_view key) const;  // "strategy.canary", "canary" at the top
  // kInvalidArgument "PATH: why", remembering PATH as the bad field.
  Error Bad(std::string_view key, const std::string& why);
  const std::string& field() const { return field_; }
  // A nested object's error (`child` read it, with its path), kept as this reader's own.
  Error Nested(const JsonFields& child, Error e) {
    field_ = child.field();
    return e;
  }

 private:
  const boost::json::object& o_;
  std::string path_;
  std::string field_;
};

}  // namespace gpufleet
