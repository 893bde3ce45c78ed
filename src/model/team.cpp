#include "model/team.h"

#include <boost/json.hpp>
#include <cmath>
#include <set>

#include "common/strings.h"

namespace json = boost::json;

namespace gpufleet {
namespace {

// Reads one object's fields; the first bad one is named in `field` and in the message.
class Reader {
 public:
  Reader(const json::object& o, std::string* field) : o_(o), field_(field) {}

  Status Only(std::initializer_list<std::string_view> known) {
    for (const auto& kv : o_) {
      bool ok = false;
      for (auto k : known) ok = ok || kv.key() == k;
      if (!ok) {
        std::string list;
        for (auto k : known) list += (list.empty() ? "" : ", ") + std::string(k);
        return Bad(kv.key(), "unknown field (known: " + list + ")");
      }
    }
    return {};
  }

  Status Name(std::string_view key, std::string& out, bool required) {
    const json::value* v = o_.if_contains(key);
    if (!v) return required ? Bad(key, "is required") : Status{};
    if (!v->is_string()) return Bad(key, "must be a string");
    out = std::string(v->as_string());
    if (!IsValidName(out)) {
      return Bad(key, "'" + out + "' must be lower-case letters, digits, '-' or '.', at most 63");
    }
    return {};
  }

  Status Strings(std::string_view key, std::vector<std::string>& out, bool names) {
    const json::value* v = o_.if_contains(key);
    if (!v) return {};
    if (!v->is_array()) return Bad(key, "must be a list of strings");
    std::set<std::string> seen;
    const auto& a = v->as_array();
    for (size_t i = 0; i < a.size(); ++i) {
      std::string at = std::string(key) + "[" + std::to_string(i) + "]";
      if (!a[i].is_string() || a[i].as_string().empty()) {
        return Bad(at, "must be a non-empty string");
      }
      std::string s(a[i].as_string());
      if (names && !IsValidName(s)) return Bad(at, "'" + s + "' is not a channel name");
      if (!seen.insert(s).second) return Bad(at, "'" + s + "' is listed twice");
      out.push_back(std::move(s));
    }
    return {};
  }

  Status Text(std::string_view key, std::string& out) {
    const json::value* v = o_.if_contains(key);
    if (!v) return {};
    if (!v->is_string()) return Bad(key, "must be a string");
    out = std::string(v->as_string());
    return {};
  }

  Status Money(std::string_view key, double& out) {
    const json::value* v = o_.if_contains(key);
    if (!v) return {};
    if (!v->is_number()) return Bad(key, "must be a number");
    double d = v->to_number<double>();
    if (!std::isfinite(d) || d < 0) return Bad(key, "must not be negative");
    out = d;
    return {};
  }

  Status Time(std::string_view key, int64_t& out) {
    const json::value* v = o_.if_contains(key);
    if (!v) return {};
    if (!v->is_int64()) return Bad(key, "must be an integer");
    out = v->as_int64();
    return {};
  }

  Error Bad(std::string_view key, const std::string& why) {
    if (field_) *field_ = std::string(key);
    return MakeError(ErrorCode::kInvalidArgument, std::string(key) + ": " + why);
  }

 private:
  const json::object& o_;
  std::string* field_;
};

}  // namespace

const Project* Team::FindProject(std::string_view project) const {
  for (const auto& p : projects) {
    if (p.name == project) return &p;
  }
  return nullptr;
}

namespace {

// One project object: {"name", "description", "created_ms"}.
Status ReadProject(const json::object& o, Project& p, std::string* field) {
  Reader r(o, field);
  GF_TRY(r.Only({"name", "description", "created_ms"}));
  GF_TRY(r.Name("name", p.name, true));
  GF_TRY(r.Text("description", p.description));
  return r.Time("created_ms", p.created_ms);
}

}  // namespace

Result<Project> ParseProject(std::string_view text) {
  boost::system::error_code ec;
  json::value doc = json::parse(text, ec);
  if (ec) return MakeError(ErrorCode::kInvalidArgument, "malformed JSON: " + ec.message());
  if (!doc.is_object()) {
    return MakeError(ErrorCode::kInvalidArgument, "a project is a JSON object");
  }
  Project p;
  GF_TRY(ReadProject(doc.as_object(), p, nullptr));
  return p;
}

Result<Team> ParseTeam(std::string_view text, std::string* field) {
  boost::system::error_code ec;
  json::value doc = json::parse(text, ec);
  if (ec) return MakeError(ErrorCode::kInvalidArgument, "malformed JSON: " + ec.message());
  if (!doc.is_object()) return MakeError(ErrorCode::kInvalidArgument, "a team is a JSON object");
  const json::object& o = doc.as_object();
  Reader r(o, field);
  Team t;
  GF_TRY(r.Only(
      {"name", "contacts", "channels", "budget_monthly", "projects", "created_ms", "updated_ms"}));
  GF_TRY(r.Name("name", t.name, true));
  GF_TRY(r.Strings("contacts", t.contacts, false));
  GF_TRY(r.Strings("channels", t.channels, true));
  GF_TRY(r.Money("budget_monthly", t.budget_monthly));
  GF_TRY(r.Time("created_ms", t.created_ms));
  GF_TRY(r.Time("updated_ms", t.updated_ms));
  if (const json::value* v = o.if_contains("projects")) {
    if (!v->is_array()) return r.Bad("projects", "must be a list of names or {name} objects");
    const auto& a = v->as_array();
    for (size_t i = 0; i < a.size(); ++i) {
      std::string at = "projects[" + std::to_string(i) + "]";
      Project p;
      if (a[i].is_string()) {
        p.name = std::string(a[i].as_string());
      } else if (a[i].is_object()) {
        std::string sub;
        if (auto st = ReadProject(a[i].as_object(), p, &sub); !st.ok()) {
          if (field) *field = at + "." + sub;
          return MakeError(ErrorCode::kInvalidArgument, at + "." + st.error().message);
        }
      } else {
        return r.Bad(at, "must be a name or a {name} object");
      }
      if (!IsValidName(p.name)) {
        return r.Bad(at,
                     "'" + p.name + "' must be lower-case letters, digits, '-' or '.', at most 63");
      }
      if (t.FindProject(p.name)) return r.Bad(at, "duplicate project '" + p.name + "'");
      t.projects.push_back(std::move(p));
    }
  }
  return t;
}

std::string TeamJson(const Team& t, bool for_file) {
  json::object o;
  o["name"] = t.name;
  if (!for_file || !t.contacts.empty()) o["contacts"] = json::value_from(t.contacts);
  if (!for_file || !t.channels.empty()) o["channels"] = json::value_from(t.channels);
  if (!for_file || t.budget_monthly != 0) {
    // Whole amounts as integers (a double would be written 1.2E5).
    double b = t.budget_monthly;
    if (b == std::floor(b) && b < 1e15) {
      o["budget_monthly"] = static_cast<int64_t>(b);
    } else {
      o["budget_monthly"] = b;
    }
  }
  json::array projects;
  for (const auto& p : t.projects) {
    if (for_file && p.description.empty()) {
      projects.emplace_back(p.name);
    } else {
      json::object po{{"name", p.name}};
      if (!for_file || !p.description.empty()) po["description"] = p.description;
      if (!for_file) po["created_ms"] = p.created_ms;
      projects.emplace_back(std::move(po));
    }
  }
  if (!for_file || !projects.empty()) o["projects"] = std::move(projects);
  if (!for_file) {
    o["created_ms"] = t.created_ms;
    o["updated_ms"] = t.updated_ms;
  }
  return json::serialize(o);
}

}  // namespace gpufleet
