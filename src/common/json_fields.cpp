#include "common/json_fields.h"

#include <boost/json.hpp>
#include <cmath>
#include <set>

#include "common/clock.h"

namespace json = boost::json;

namespace gpufleet {

JsonFields::JsonFields(const json::object& o, std::string path) : o_(o), path_(std::move(path)) {}

std::string JsonFields::Path(std::string_view key) const {
  if (path_.empty()) return std::string(key);
  if (!key.empty() && key.front() == '[') return path_ + std::string(key);
  return path_ + "." + std::string(key);
}

Error JsonFields::Bad(std::string_view key, const std::string& why) {
  field_ = Path(key);
  return MakeError(ErrorCode::kInvalidArgument, field_ + ": " + why);
}

Status JsonFields::Only(std::initializer_list<std::string_view> known) {
  for (const auto& kv : o_) {
    bool ok = false;
    for (auto k : known) ok = ok || kv.key() == k;
    if (ok) continue;
    std::string list;
    for (auto k : known) list += (list.empty() ? "" : ", ") + std::string(k);
    return Bad(kv.key(), "unknown field (known: " + list + ")");
  }
  return {};
}

const json::value* JsonFields::Get(std::string_view key) const { return o_.if_contains(key); }

Status JsonFields::String(std::string_view key, std::string& out) {
  const json::value* v = Get(key);
  if (!v) return {};
  if (!v->is_string()) return Bad(key, "must be a string");
  out = std::string(v->as_string());
  return {};
}

Status JsonFields::Bool(std::string_view key, bool& out) {
  const json::value* v = Get(key);
  if (!v) return {};
  if (!v->is_bool()) return Bad(key, "must be true or false");
  out = v->as_bool();
  return {};
}

Status JsonFields::Number(std::string_view key, double& out) {
  const json::value* v = Get(key);
  if (!v) return {};
  if (!v->is_number() || !std::isfinite(v->to_number<double>())) {
    return Bad(key, "must be a number");
  }
  out = v->to_number<double>();
  return {};
}

Status JsonFields::Int(std::string_view key, int& out, int lo, int hi) {
  const json::value* v = Get(key);
  if (!v) return {};
  int64_t n = 0;
  if (v->is_int64()) {
    n = v->as_int64();
  } else if (v->is_uint64() && v->as_uint64() <= static_cast<uint64_t>(hi)) {
    n = static_cast<int64_t>(v->as_uint64());
  } else {
    return Bad(key, "must be an integer");
  }
  if (n < lo || n > hi) {
    bool bounded = lo != -1'000'000'000 || hi != 1'000'000'000;
    return Bad(
        key, bounded ? "must be an integer from " + std::to_string(lo) + " to " + std::to_string(hi)
                     : "must be an integer");
  }
  out = static_cast<int>(n);
  return {};
}

Status JsonFields::Int64(std::string_view key, int64_t& out) {
  const json::value* v = Get(key);
  if (!v) return {};
  if (!v->is_int64()) return Bad(key, "must be an integer");
  out = v->as_int64();
  return {};
}

Status JsonFields::Seconds(std::string_view key, double& out, double max_s) {
  const json::value* v = Get(key);
  if (!v) return {};
  double s = 0;
  if (v->is_number()) {
    s = v->to_number<double>();
  } else if (v->is_string()) {
    int64_t ms = ParseDurationMs(std::string(v->as_string()));
    if (ms < 0) return Bad(key, "'" + std::string(v->as_string()) + "' is not a duration");
    s = static_cast<double>(ms) / 1000.0;
  } else {
    return Bad(key, "must be a duration such as \"5m\" or a number of seconds");
  }
  if (!(s >= 0) || s > max_s) {
    return Bad(key, max_s == 366 * 86400.0
                        ? "must be a duration from 0 to 366 days"
                        : "must be a duration from 0 to " + std::to_string(max_s) + " seconds");
  }
  out = s;
  return {};
}

Status JsonFields::Strings(std::string_view key, std::vector<std::string>& out, bool unique) {
  const json::value* v = Get(key);
  if (!v) return {};
  if (!v->is_array()) return Bad(key, "must be a list of strings");
  std::set<std::string> seen;
  const auto& a = v->as_array();
  std::vector<std::string> read;
  for (size_t i = 0; i < a.size(); ++i) {
    std::string at = std::string(key) + "[" + std::to_string(i) + "]";
    if (!a[i].is_string() || a[i].as_string().empty()) {
      return Bad(at, "must be a non-empty string");
    }
    std::string s(a[i].as_string());
    if (unique && !seen.insert(s).second) return Bad(at, "'" + s + "' is listed twice");
    read.push_back(std::move(s));
  }
  out = std::move(read);
  return {};
}

}  // namespace gpufleet
