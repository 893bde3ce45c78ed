#include <boost/json.hpp>
#include <charconv>

#include "slurm/slurm.h"

namespace json = boost::json;

namespace gpufleet::slurm {
namespace {

bool Digits(std::string_view s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos;
}

// "0-1,3" -> 0 1 3; false when malformed.
bool ExpandRanges(std::string_view ranges, std::vector<std::pair<std::string, std::string>>& out) {
  size_t at = 0;
  while (at <= ranges.size()) {
    size_t comma = ranges.find(',', at);
    std::string_view part = ranges.substr(at, comma == std::string_view::npos ? comma : comma - at);
    size_t dash = part.find('-');
    std::string_view lo = part.substr(0, dash);
    std::string_view hi = dash == std::string_view::npos ? lo : part.substr(dash + 1);
    if (!Digits(lo) || !Digits(hi) || lo.size() > 9 || hi.size() > 9) return false;
    out.emplace_back(lo, hi);
    if (comma == std::string_view::npos) break;
    at = comma + 1;
  }
  return true;
}

int ToInt(std::string_view s) {
  int v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

std::string Str(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->as_string()) : std::string();
}

int64_t Int(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (!v) return 0;
  if (v->is_int64()) return v->as_int64();
  if (v->is_uint64()) return static_cast<int64_t>(v->as_uint64());
  if (v->is_double()) return static_cast<int64_t>(v->as_double());
  return 0;
}

std::vector<std::string> Strings(const json::object& o, std::string_view key) {
  std::vector<std::string> out;
  const json::value* v = o.if_contains(key);
  if (!v || !v->is_array()) return out;
  for (const auto& e : v->as_array()) {
    if (e.is_string()) out.emplace_back(e.as_string());
  }
  return out;
}

// The document's list `key`, or why there is none: Slurm's own errors, or a bad document.
Result<const json::array*> List(const json::value& doc, std::string_view key,
                                std::string_view client) {
  const json::object* o = doc.if_object();
  if (!o)
    return MakeError(ErrorCode::kInvalidArgument, std::string(client) + ": not a JSON object");
  if (const auto* errors = o->if_contains("errors"); errors && errors->is_array()) {
    for (const auto& e : errors->as_array()) {
      if (!e.is_object()) continue;
      std::string what = Str(e.as_object(), "description");
      if (what.empty()) what = Str(e.as_object(), "error");
      if (!what.empty()) {
        // 22.05 says no more than this when slurmctld does not answer.
        return MakeError(ErrorCode::kUnavailable,
                         std::string(client) + " --json reported an error: " + what +
                             " (is slurmctld up, and reachable with this slurm.conf?)");
      }
    }
  }
  const json::value* list = o->if_contains(key);
  if (!list || !list->is_array()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     std::string(client) + ": no '" + std::string(key) + "' list");
  }
  return &list->as_array();
}

}  // namespace

Result<std::vector<std::string>> ExpandHostlist(std::string_view list, size_t max) {
  std::vector<std::string> out;
  auto bad = [&list](const std::string& why) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "hostlist '" + std::string(list.substr(0, 200)) + "': " + why);
  };
  size_t at = 0;
  while (at < list.size()) {
    // One item: up to a comma outside brackets.
    size_t end = at;
    int depth = 0;
    while (end < list.size() && (list[end] != ',' || depth > 0)) {
      if (list[end] == '[') ++depth;
      if (list[end] == ']') --depth;
      if (depth < 0 || depth > 1) return bad("unbalanced brackets");
      ++end;
    }
    if (depth != 0) return bad("unbalanced brackets");
    std::string_view item = list.substr(at, end - at);
    at = end + 1;
    if (item.empty()) continue;
    size_t open = item.find('[');
    if (open == std::string_view::npos) {
      out.emplace_back(item);
    } else {
      size_t close = item.find(']');
      std::string_view prefix = item.substr(0, open), suffix = item.substr(close + 1);
      std::vector<std::pair<std::string, std::string>> ranges;
      if (!ExpandRanges(item.substr(open + 1, close - open - 1), ranges)) {
        return bad("a range must be numbers, as [1-4,7]");
      }
      for (const auto& [lo, hi] : ranges) {
        int a = ToInt(lo), b = ToInt(hi);
        if (b < a) return bad("a range runs backwards");
        for (int i = a; i <= b; ++i) {
          std::string n = std::to_string(i);
          if (n.size() < lo.size()) n.insert(0, lo.size() - n.size(), '0');
          out.push_back(std::string(prefix) + n + std::string(suffix));
          if (out.size() > max) return bad("more than " + std::to_string(max) + " names");
        }
      }
    }
    if (out.size() > max) return bad("more than " + std::to_string(max) + " names");
  }
  return out;
}

std::vector<int> GpuIndices(std::string_view detail) {
  std::vector<int> out;
  size_t at = 0;
  while (at < detail.size()) {
    // One GRES item: up to a comma outside parentheses ("gpu:2(IDX:0,2),mps:0").
    size_t end = at;
    for (int depth = 0; end < detail.size() && (detail[end] != ',' || depth > 0); ++end) {
      depth += detail[end] == '(' ? 1 : detail[end] == ')' ? -1 : 0;
    }
    std::string_view item = detail.substr(at, end - at);
    at = end + 1;
    size_t idx = item.find("(IDX:");
    size_t close = item.find(')');
    if (!item.starts_with("gpu") || idx == std::string_view::npos || close < idx) continue;
    std::vector<std::pair<std::string, std::string>> ranges;
    if (!ExpandRanges(item.substr(idx + 5, close - idx - 5), ranges)) continue;  // "N/A"
    for (const auto& [lo, hi] : ranges) {
      for (int i = ToInt(lo); i <= ToInt(hi) && i < 1024; ++i) out.push_back(i);
    }
  }
  return out;
}

int GpusInTres(std::string_view tres) {
  int total = 0;
  size_t at = 0;
  while (at < tres.size()) {
    size_t comma = tres.find(',', at);
    std::string_view item = tres.substr(at, comma == std::string_view::npos ? comma : comma - at);
    at = comma == std::string_view::npos ? tres.size() : comma + 1;
    if (item.starts_with("gres:")) item.remove_prefix(5);
    if (item.starts_with("gres/")) item.remove_prefix(5);
    if (!item.starts_with("gpu")) continue;
    size_t sep = item.find_last_of(":=");
    if (sep == std::string_view::npos) continue;
    std::string_view count = item.substr(sep + 1);
    if (Digits(count) && count.size() < 7) total += ToInt(count);
  }
  return total;
}

Result<std::vector<Job>> ParseSqueue(std::string_view text) {
  boost::system::error_code ec;
  // Every value in one arena, freed at once: a 10,000-job document is 25 MB of small objects.
  json::monotonic_resource arena;
  json::value doc = json::parse(text, ec, &arena);
  if (ec) return MakeError(ErrorCode::kInvalidArgument, "squeue --json: " + ec.message());
  auto list = List(doc, "jobs", "squeue");
  if (!list.ok()) return list.error();
  std::vector<Job> out;
  out.reserve(list.value()->size());
  for (const auto& v : *list.value()) {
    const json::object* o = v.if_object();
    if (!o) continue;
    Job j;
    j.id = std::to_string(Int(*o, "job_id"));
    if (const json::value* task = o->if_contains("array_task_id"); task && task->is_number()) {
      j.id =
          std::to_string(Int(*o, "array_job_id")) + "_" + std::to_string(Int(*o, "array_task_id"));
    }
    j.name = Str(*o, "name");
    j.state = Str(*o, "job_state");
    j.account = Str(*o, "account");
    j.wckey = Str(*o, "wckey");
    j.user = Str(*o, "user_name");
    j.partition = Str(*o, "partition");
    j.reason = Str(*o, "state_reason");
    j.submit_s = Int(*o, "submit_time");
    j.start_s = Int(*o, "start_time");
    j.end_s = Int(*o, "end_time");
    j.node_count = static_cast<int>(Int(*o, "node_count"));
    if (std::string nodes = Str(*o, "nodes"); !nodes.empty()) {
      auto expanded = ExpandHostlist(nodes, 10'000);
      if (!expanded.ok())
        return MakeError(ErrorCode::kInvalidArgument,
                         "squeue: job " + j.id + ": " + expanded.error().message);
      j.nodes = std::move(expanded).value();
    }
    for (const auto& d : Strings(*o, "gres_detail")) j.gpus.push_back(GpuIndices(d));
    const int per_node = GpusInTres(Str(*o, "tres_per_node"));
    const int per_job = GpusInTres(Str(*o, "tres_per_job"));
    const int nodes = std::max(1, j.node_count);
    j.gpus_requested = per_job > 0 ? per_job : per_node * nodes;
    if (j.gpus_requested == 0) {
      for (const auto& g : j.gpus) j.gpus_requested += static_cast<int>(g.size());
    }
    out.push_back(std::move(j));
  }
  return out;
}

bool Node::Has(std::string_view flag) const {
  for (const auto& f : flags) {
    if (f == flag) return true;
  }
  return false;
}

bool Node::Drained() const {
  return Draining() && state != "mixed" && state != "allocated" && state != "completing" &&
         !Has("COMPLETING");
}

Result<std::vector<Node>> ParseSinfo(std::string_view text) {
  boost::system::error_code ec;
  json::monotonic_resource arena;  // as ParseSqueue's
  json::value doc = json::parse(text, ec, &arena);
  if (ec) return MakeError(ErrorCode::kInvalidArgument, "sinfo --json: " + ec.message());
  auto list = List(doc, "nodes", "sinfo");
  if (!list.ok()) return list.error();
  std::vector<Node> out;
  for (const auto& v : *list.value()) {
    const json::object* o = v.if_object();
    if (!o) continue;
    Node n;
    n.name = Str(*o, "name");
    n.state = Str(*o, "state");
    n.flags = Strings(*o, "state_flags");
    n.reason = Str(*o, "reason");
    n.reason_user = Str(*o, "reason_set_by_user");
    n.reason_changed_s = Int(*o, "reason_changed_at");
    n.partitions = Strings(*o, "partitions");
    n.gres = Str(*o, "gres");
    if (!n.name.empty()) out.push_back(std::move(n));
  }
  return out;
}

}  // namespace gpufleet::slurm

namespace gpufleet::slurm {

std::string NodeForSlurmName(const std::string& tmpl, const std::string& slurm_name) {
  size_t at = std::string::npos, len = 0;
  for (std::string_view p : {"{name}", "{hostname}"}) {
    for (size_t i = tmpl.find(p); i != std::string::npos; i = tmpl.find(p, i + 1)) {
      if (at != std::string::npos) return "";  // two placeholders: no single answer
      at = i;
      len = p.size();
    }
  }
  if (at == std::string::npos) return "";
  const std::string prefix = tmpl.substr(0, at), suffix = tmpl.substr(at + len);
  if (slurm_name.size() <= prefix.size() + suffix.size() || !slurm_name.starts_with(prefix) ||
      !slurm_name.ends_with(suffix)) {
    return "";
  }
  return slurm_name.substr(prefix.size(), slurm_name.size() - prefix.size() - suffix.size());
}

}  // namespace gpufleet::slurm
