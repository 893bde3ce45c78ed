#include "model/team.h"

#include <boost/json.hpp>
#include <cmath>
#include <set>

#include "common/json_fields.h"
#include "common/strings.h"

namespace json = boost::json;

namespace gpufleet {
namespace {

const std::string kNameRule = "must be lower-case letters, digits, '-' or '.', at most 63";

Status Name(JsonFields& r, std::string_view key, std::string& out, bool required) {
  if (!r.Get(key)) return required ? Status(r.Bad(key, "is required")) : Status{};
  GF_TRY(r.String(key, out));
  if (!IsValidName(out)) return r.Bad(key, "'" + out + "' " + kNameRule);
  return {};
}

// A list of names (`names`: each a valid name, as channels are).
Status Names(JsonFields& r, std::string_view key, std::vector<std::string>& out, bool names) {
  GF_TRY(r.Strings(key, out));
  for (size_t i = 0; names && i < out.size(); ++i) {
    if (!IsValidName(out[i])) {
      return r.Bad(std::string(key) + "[" + std::to_string(i) + "]",
                   "'" + out[i] + "' is not a channel name");
    }
  }
  return {};
}

Status Money(JsonFields& r, std::string_view key, double& out) {
  double d = out;
  GF_TRY(r.Number(key, d));
  if (d < 0) return r.Bad(key, "must not be negative");
  out = d;
  return {};
}

}  // namespace

const Project* Team::FindProject(std::string_view project) const {
  for (const auto& p : projects) {
    if (p.name == project) return &p;
  }
  return nullptr;
}

namespace {

// One project object: {"name", "description", "created_ms"}.
Status ReadProject(JsonFields& r, Project& p) {
  GF_TRY(r.Only({"name", "description", "created_ms"}));
  GF_TRY(Name(r, "name", p.name, true));
  GF_TRY(r.String("description", p.description));
  return r.Int64("created_ms", p.created_ms);
}

Status ReadTeam(JsonFields& r, Team& t) {
  GF_TRY(r.Only({"name", "contacts", "channels", "budget_monthly", "projects", "slurm_accounts",
                 "created_ms", "updated_ms"}));
  GF_TRY(Name(r, "name", t.name, true));
  GF_TRY(Names(r, "contacts", t.contacts, false));
  GF_TRY(Names(r, "channels", t.channels, true));
  GF_TRY(r.Strings("slurm_accounts", t.slurm_accounts));
  for (size_t i = 0; i < t.slurm_accounts.size(); ++i) {
    const std::string& a = t.slurm_accounts[i];
    if (a.empty() || a.size() > 64 ||
        a.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") !=
            std::string::npos) {
      return r.Bad("slurm_accounts[" + std::to_string(i) + "]",
                   "'" + a + "' is not a Slurm account name (letters, digits, '_', '.', '-')");
    }
  }
  GF_TRY(Money(r, "budget_monthly", t.budget_monthly));
  GF_TRY(r.Int64("created_ms", t.created_ms));
  GF_TRY(r.Int64("updated_ms", t.updated_ms));
  const json::value* v = r.Get("projects");
  if (!v) return {};
  if (!v->is_array()) return r.Bad("projects", "must be a list of names or {name} objects");
  const auto& a = v->as_array();
  for (size_t i = 0; i < a.size(); ++i) {
    std::string at = "projects[" + std::to_string(i) + "]";
    Project p;
    if (a[i].is_string()) {
      p.name = std::string(a[i].as_string());
    } else if (a[i].is_object()) {
      JsonFields pr(a[i].as_object(), at);
      if (auto st = ReadProject(pr, p); !st.ok()) return r.Nested(pr, st.error());
    } else {
      return r.Bad(at, "must be a name or a {name} object");
    }
    if (!IsValidName(p.name)) return r.Bad(at, "'" + p.name + "' " + kNameRule);
    for (const auto& other : t.projects) {
      if (other.name == p.name) return r.Bad(at, "duplicate project '" + p.name + "'");
    }
    t.projects.push_back(std::move(p));
  }
  return {};
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
  JsonFields r(doc.as_object());
  GF_TRY(ReadProject(r, p));
  return p;
}

Result<Team> ParseTeam(std::string_view text, std::string* field) {
  boost::system::error_code ec;
  json::value doc = json::parse(text, ec);
  if (ec) return MakeError(ErrorCode::kInvalidArgument, "malformed JSON: " + ec.message());
  if (!doc.is_object()) return MakeError(ErrorCode::kInvalidArgument, "a team is a JSON object");
  JsonFields r(doc.as_object());
  Team t;
  if (auto read = ReadTeam(r, t); !read.ok()) {
    if (field) *field = r.field();
    return read.error();
  }
  return t;
}

std::string TeamJson(const Team& t, bool for_file) {
  json::object o;
  o["name"] = t.name;
  if (!for_file || !t.contacts.empty()) o["contacts"] = json::value_from(t.contacts);
  if (!for_file || !t.channels.empty()) o["channels"] = json::value_from(t.channels);
  if (!for_file || !t.slurm_accounts.empty()) {
    o["slurm_accounts"] = json::value_from(t.slurm_accounts);
  }
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
