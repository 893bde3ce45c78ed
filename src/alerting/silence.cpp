#include "alerting/silence.h"

#include <boost/json.hpp>

#include "common/json_fields.h"
#include "common/json_text.h"

namespace json = boost::json;

namespace gpufleet::alerting {

Result<std::vector<Matcher>> ParseMatchers(const std::string& text) {
  boost::system::error_code ec;
  auto v = json::parse(text, ec);
  if (ec || !v.is_array()) {
    return MakeError(ErrorCode::kInvalidArgument, "'matchers' must be a list of matchers");
  }
  if (v.as_array().empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "'matchers' needs at least one matcher");
  }
  std::vector<Matcher> out;
  for (size_t i = 0; i < v.as_array().size(); ++i) {
    const auto& m = v.as_array()[i];
    std::string at = "matchers[" + std::to_string(i) + "]";
    if (!m.is_object()) return MakeError(ErrorCode::kInvalidArgument, at + " must be an object");
    const auto& o = m.as_object();
    GF_TRY(JsonFields(o, at).Only({"name", "value", "isRegex", "isEqual"}));
    Matcher x;
    auto* name = o.if_contains("name");
    auto* value = o.if_contains("value");
    if (!name || !name->is_string() || name->as_string().empty()) {
      return MakeError(ErrorCode::kInvalidArgument, at + ".name must be a label name");
    }
    if (!value || !value->is_string()) {
      return MakeError(ErrorCode::kInvalidArgument, at + ".value must be a string");
    }
    x.name = name->as_string().c_str();
    x.value = value->as_string().c_str();
    if (auto* r = o.if_contains("isRegex")) {
      if (!r->is_bool()) return MakeError(ErrorCode::kInvalidArgument, at + ".isRegex: a boolean");
      x.is_regex = r->as_bool();
    }
    if (auto* e = o.if_contains("isEqual")) {
      if (!e->is_bool()) return MakeError(ErrorCode::kInvalidArgument, at + ".isEqual: a boolean");
      x.is_equal = e->as_bool();
    }
    if (x.is_regex) {
      if (auto p = Pattern::Compile(x.value); !p.ok()) {
        return MakeError(ErrorCode::kInvalidArgument, at + ".value: " + p.error().message);
      }
    }
    out.push_back(std::move(x));
  }
  return out;
}

std::string MatchersJson(const std::vector<Matcher>& matchers) {
  json::array a;
  for (const auto& m : matchers) {
    a.push_back(json::object{
        {"name", m.name}, {"value", m.value}, {"isRegex", m.is_regex}, {"isEqual", m.is_equal}});
  }
  return JsonText(a);
}

ActiveSilences::ActiveSilences(const std::vector<SilenceRecord>& all, int64_t now) {
  for (const auto& s : all) {
    if (s.starts_ms > now || s.ends_ms <= now) continue;
    auto matchers = ParseMatchers(s.matchers);
    if (!matchers.ok()) continue;
    silences_.emplace_back(s.id, MatcherSet(std::move(matchers.value())));
  }
}

std::vector<std::string> ActiveSilences::Matching(const Labels& labels) const {
  std::vector<std::string> out;
  for (const auto& [id, set] : silences_) {
    if (set.Matches(labels)) out.push_back(id);
  }
  return out;
}

MatcherSet::MatcherSet(std::vector<Matcher> matchers) : matchers_(std::move(matchers)) {
  for (const auto& m : matchers_) {
    std::optional<Pattern> p;
    if (m.is_regex) {
      // ParseMatchers checked it; one that fails after all matches nothing.
      auto compiled = Pattern::Compile(m.value);
      p = compiled.ok() ? std::move(compiled).value() : Pattern::Compile("[^\\s\\S]").value();
    }
    regexes_.push_back(std::move(p));
  }
}

bool MatcherSet::Matches(const Labels& labels) const {
  for (size_t i = 0; i < matchers_.size(); ++i) {
    const Matcher& m = matchers_[i];
    auto it = labels.find(m.name);
    std::string value = it == labels.end() ? "" : it->second;  // absent reads as empty
    bool match = regexes_[i] ? regexes_[i]->FullMatch(value) : value == m.value;
    if (match != m.is_equal) return false;
  }
  return true;
}

}  // namespace gpufleet::alerting
