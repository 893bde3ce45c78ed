#include "remote/filter.h"

#include "alerting/expr.h"

namespace gpufleet::remote {

bool Filter::Matches(const std::string& metric, const Labels& labels) const {
  if (!name.empty() && name != metric) return false;
  for (const auto& t : terms) {
    std::string_view v;
    if (t.label == "__name__") {
      v = metric;
    } else if (auto it = labels.find(t.label); it != labels.end()) {
      v = it->second;
    }
    bool hit = t.regex ? t.regex->FullMatch(v) : v == t.value;
    if (hit != t.equal) return false;
  }
  return true;
}

Result<Filter> CompileFilter(const std::string& text) {
  // `{cluster="a"}` (any metric) is read as a selector of some metric whose name is then
  // forgotten: the query parser wants a name.
  size_t lead = text.find_first_not_of(" \t");
  const bool any_metric = lead != std::string::npos && text[lead] == '{';
  auto e = alerting::ParseQuery(any_metric ? "DCGM_FI_DEV_GPU_UTIL" + text.substr(lead) : text);
  if (!e.ok()) return e.error();
  if (e.value()->kind != alerting::Expr::Kind::kSelector || e.value()->range_ms != 0 ||
      e.value()->offset_ms != 0) {
    return MakeError(
        ErrorCode::kInvalidArgument,
        "'" + text + "' is not a series selector such as DCGM_FI_DEV_GPU_UTIL{pool=\"a\"}");
  }
  Filter f;
  if (!any_metric) f.name = e.value()->name;
  for (const auto& m : e.value()->matchers) {
    Filter::Term t{m.name, m.is_equal, std::nullopt, m.value};
    if (m.is_regex) {
      auto p = Pattern::Compile(m.value);
      if (!p.ok()) return p.error();
      t.regex = std::move(p.value());
    }
    f.terms.push_back(std::move(t));
  }
  return f;
}

}  // namespace gpufleet::remote
