// Teams and their projects (model/team.h):
//   GET    /api/v1/teams                              every team, with the clusters and pools
//                                                     it owns
//   POST   /api/v1/teams                              {"name", "contacts", "channels",
//                                                      "budget_monthly", "projects"}
//   GET    /api/v1/teams/{team}
//   PATCH  /api/v1/teams/{team}                       the fields given replace the team's
//   DELETE /api/v1/teams/{team}                       409 while a cluster, pool or live job
//                                                     names it
//   GET    /api/v1/teams/{team}/projects
//   POST   /api/v1/teams/{team}/projects              {"name", "description"}
//   GET    /api/v1/teams/{team}/projects/{project}
//   PATCH  /api/v1/teams/{team}/projects/{project}    {"description"}
//   DELETE /api/v1/teams/{team}/projects/{project}    409 while a live job names it
// A team's channels must exist (alert channels, /api/v1/channels).

#include <set>

#include "api/json_util.h"
#include "api/scope.h"
#include "common/clock.h"
#include "common/json_text.h"
#include "common/strings.h"
#include "model/json.h"

namespace json = boost::json;

namespace gpufleet::api {
namespace {

Response Unavailable() {
  return ErrorResponse(MakeError(ErrorCode::kUnavailable, "teams are not loaded"));
}

json::object ProjectJson(const Project& p) {
  return {{"name", p.name},
          {"description", p.description},
          {"created_at", p.created_ms > 0 ? json::value(FormatTime(p.created_ms)) : nullptr}};
}

json::object TeamView(ApiContext& ctx, const Team& t) {
  json::array projects, clusters, pools;
  for (const auto& p : t.projects) projects.push_back(ProjectJson(p));
  std::map<std::string, std::string> cluster_team;
  if (auto cs = ctx.fleet.Clusters(); cs.ok()) {
    for (const auto& c : cs.value()) {
      cluster_team[c.name] = c.team;
      if (c.team == t.name) clusters.emplace_back(c.name);
    }
  }
  if (auto ps = ctx.fleet.Pools(); ps.ok()) {
    for (const auto& p : ps.value()) {
      // A pool without a team of its own is its cluster's.
      const std::string& owner = p.team.empty() ? cluster_team[p.cluster] : p.team;
      if (owner == t.name) pools.emplace_back(p.name);
    }
  }
  json::object o = json::parse(TeamJson(t)).as_object();
  json::object out{{"name", t.name},
                   {"contacts", o["contacts"]},
                   {"channels", o["channels"]},
                   {"budget_monthly", o["budget_monthly"]},
                   {"projects", std::move(projects)},
                   {"clusters", std::move(clusters)},
                   {"pools", std::move(pools)},
                   {"created_at", FormatTime(t.created_ms)},
                   {"updated_at", FormatTime(t.updated_ms)}};
  return out;
}

// Every channel the team names exists.
Status CheckChannels(ApiContext& ctx, const Team& t) {
  if (t.channels.empty()) return {};
  auto stored = ctx.store.alerting->ListChannels();
  if (!stored.ok()) return stored.error();
  std::set<std::string> known;
  for (const auto& c : stored.value()) known.insert(c.name);
  for (size_t i = 0; i < t.channels.size(); ++i) {
    if (!known.count(t.channels[i])) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "channels[" + std::to_string(i) + "]: no channel '" + t.channels[i] +
                           "' (create it first: gpufleet channels create)");
    }
  }
  return {};
}

// Live (queued or running) jobs of the team, or of one of its projects when `project` is given.
size_t LiveJobs(ApiContext& ctx, const std::string& team, const std::string& project) {
  if (!ctx.jobs) return 0;
  size_t n = 0;
  for (const char* state : {"queued", "running"}) {
    workload::JobFilter f;
    f.state = state;
    f.team = team;
    for (const auto& j : ctx.jobs->List(f)) {
      if (project.empty() || j.spec.project == project) ++n;
    }
  }
  return n;
}

Response TeamResponse(ApiContext& ctx, int status, const Team& t, const std::string& before) {
  Response r = ObjectResponse(status, TeamView(ctx, t));
  r.audit_target = "team/" + t.name;
  r.audit_before = before;
  r.audit_after = TeamJson(t);
  return r;
}

Result<Team> ParseBody(const Request& req) {
  auto body = ParseObject(req.body);
  if (!body.ok()) return body.error();
  return ParseTeam(req.body);
}

// The scope policy on the team the path names: a scoped token sees a team that owns something
// in its clusters, and changes one all of whose clusters are its own (ScopeTeam).
Handler TeamScoped(ApiContext& ctx, bool change, Handler handler) {
  return [&ctx, change, handler = std::move(handler)](const Request& req, const Principal& who) {
    const std::string& team = req.params.at("team");
    if (change) {
      if (auto s = ScopeTeam(ctx, who, team); !s.ok()) return ErrorResponse(s.error());
    } else if (!TeamVisible(ctx, who, team)) {
      return ErrorResponse(
          MakeError(ErrorCode::kNotFound, "no team '" + Printable(team, 80) + "'"));
    }
    return handler(req, who);
  };
}

// GET /api/v1/teams
Response GetTeams(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.teams) return Unavailable();
  auto page = ParsePage(req);
  if (!page.ok()) return ErrorResponse(page.error());
  json::array items;
  for (const auto& t : ctx.teams->List()) {
    if (TeamVisible(ctx, who, t.name)) items.push_back(TeamView(ctx, t));
  }
  return ListResponse(std::move(items), page.value());
}

// POST /api/v1/teams
Response PostTeams(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.teams) return Unavailable();
  auto team = ParseBody(req);
  if (!team.ok()) return ErrorResponse(team.error());
  if (auto s = CheckChannels(ctx, team.value()); !s.ok()) return ErrorResponse(s.error());
  auto made = ctx.teams->Create(std::move(team).value());
  if (!made.ok()) return ErrorResponse(made.error());
  return TeamResponse(ctx, 201, made.value(), "");
}

// PATCH /api/v1/teams/{team}
Response PatchTeamsTeam(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.teams) return Unavailable();
  auto old = ctx.teams->Get(req.params.at("team"));
  if (!old.ok()) return ErrorResponse(old.error());
  auto body = ParseObject(req.body);
  if (!body.ok()) return ErrorResponse(body.error());
  if (auto s = OnlyFields(*body, {"name", "contacts", "channels", "budget_monthly", "projects"});
      !s.ok()) {
    return ErrorResponse(s.error());
  }
  if (const auto* n = body->if_contains("name");
      n && !(n->is_string() && n->as_string() == old->name)) {
    return ErrorResponse(MakeError(ErrorCode::kInvalidArgument, "name: a team cannot be renamed"));
  }
  // The body's fields over the stored team's.
  json::object merged = json::parse(TeamJson(old.value())).as_object();
  for (const auto& [k, v] : *body) merged[k] = v;
  auto team = ParseTeam(JsonText(merged));
  if (!team.ok()) return ErrorResponse(team.error());
  if (auto s = CheckChannels(ctx, team.value()); !s.ok()) return ErrorResponse(s.error());
  std::string before = TeamJson(old.value());
  auto done = ctx.teams->Replace(std::move(team).value());
  if (!done.ok()) return ErrorResponse(done.error());
  return TeamResponse(ctx, 200, done.value(), before);
}

// DELETE /api/v1/teams/{team}
Response DeleteTeamsTeam(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.teams) return Unavailable();
  const std::string& name = req.params.at("team");
  auto old = ctx.teams->Get(name);
  if (!old.ok()) return ErrorResponse(old.error());
  std::vector<std::string> owned;
  if (auto cs = ctx.fleet.Clusters(); cs.ok()) {
    for (const auto& c : cs.value()) {
      if (c.team == name) owned.push_back("cluster " + c.name);
    }
  }
  if (auto ps = ctx.fleet.Pools(); ps.ok()) {
    for (const auto& p : ps.value()) {
      if (p.team == name) owned.push_back("pool " + p.name);
    }
  }
  if (!owned.empty()) {
    return ErrorResponse(MakeError(
        ErrorCode::kConflict,
        "team '" + name + "' owns " + Join(owned, ", ") + ": give them another team first"));
  }
  if (size_t live = LiveJobs(ctx, name, ""); live > 0) {
    return ErrorResponse(
        MakeError(ErrorCode::kConflict,
                  "team '" + name + "' has " + std::to_string(live) + " queued or running job(s)"));
  }
  if (auto s = ctx.teams->Delete(name); !s.ok()) return ErrorResponse(s.error());
  Response r = ObjectResponse(200, {{"deleted", name}});
  r.audit_target = "team/" + name;
  r.audit_before = TeamJson(old.value());
  return r;
}

// GET /api/v1/teams/{team}/projects
Response GetTeamsTeamProjects(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.teams) return Unavailable();
  auto page = ParsePage(req);
  if (!page.ok()) return ErrorResponse(page.error());
  auto t = ctx.teams->Get(req.params.at("team"));
  if (!t.ok()) return ErrorResponse(t.error());
  json::array items;
  for (const auto& p : t->projects) items.push_back(ProjectJson(p));
  return ListResponse(std::move(items), page.value());
}

// POST /api/v1/teams/{team}/projects
Response PostTeamsTeamProjects(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.teams) return Unavailable();
  auto old = ctx.teams->Get(req.params.at("team"));
  if (!old.ok()) return ErrorResponse(old.error());
  auto body = ParseObject(req.body);
  if (!body.ok()) return ErrorResponse(body.error());
  if (auto s = OnlyFields(*body, {"name", "description"}); !s.ok()) {
    return ErrorResponse(s.error());
  }
  auto project = ParseProject(req.body);
  if (!project.ok()) return ErrorResponse(project.error());
  std::string name = project->name;
  auto t = ctx.teams->AddProject(old->name, std::move(project).value());
  if (!t.ok()) return ErrorResponse(t.error());
  Response r = ObjectResponse(201, ProjectJson(*t->FindProject(name)));
  r.audit_target = "team/" + t->name + "/project/" + name;
  r.audit_before = TeamJson(old.value());
  r.audit_after = TeamJson(t.value());
  return r;
}

// GET /api/v1/teams/{team}/projects/{project}
Response GetTeamsTeamProjectsProject(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.teams) return Unavailable();
  auto t = ctx.teams->Get(req.params.at("team"));
  if (!t.ok()) return ErrorResponse(t.error());
  const Project* p = t->FindProject(req.params.at("project"));
  if (!p) {
    return ErrorResponse(MakeError(ErrorCode::kNotFound, "team '" + t->name + "' has no project '" +
                                                             req.params.at("project") + "'"));
  }
  return ObjectResponse(200, ProjectJson(*p));
}

// PATCH /api/v1/teams/{team}/projects/{project}
Response PatchTeamsTeamProjectsProject(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.teams) return Unavailable();
  auto old = ctx.teams->Get(req.params.at("team"));
  if (!old.ok()) return ErrorResponse(old.error());
  const std::string& name = req.params.at("project");
  if (!old->FindProject(name)) {
    return ErrorResponse(
        MakeError(ErrorCode::kNotFound, "team '" + old->name + "' has no project '" + name + "'"));
  }
  auto body = ParseObject(req.body);
  if (!body.ok()) return ErrorResponse(body.error());
  if (auto s = OnlyFields(*body, {"name", "description"}); !s.ok()) {
    return ErrorResponse(s.error());
  }
  if (const auto* n = body->if_contains("name"); n && !(n->is_string() && n->as_string() == name)) {
    return ErrorResponse(
        MakeError(ErrorCode::kInvalidArgument,
                  "name: a project cannot be renamed (its jobs and usage keep the name)"));
  }
  auto desc = GetString(*body, "description", std::string());
  if (!desc.ok()) return ErrorResponse(desc.error());
  Team t = old.value();
  for (auto& p : t.projects) {
    if (p.name == name && body->contains("description")) p.description = *desc;
  }
  auto done = ctx.teams->Replace(std::move(t));
  if (!done.ok()) return ErrorResponse(done.error());
  Response r = ObjectResponse(200, ProjectJson(*done->FindProject(name)));
  r.audit_target = "team/" + done->name + "/project/" + name;
  r.audit_before = TeamJson(old.value());
  r.audit_after = TeamJson(done.value());
  return r;
}

// DELETE /api/v1/teams/{team}/projects/{project}
Response DeleteTeamsTeamProjectsProject(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.teams) return Unavailable();
  auto old = ctx.teams->Get(req.params.at("team"));
  if (!old.ok()) return ErrorResponse(old.error());
  const std::string& name = req.params.at("project");
  if (size_t live = LiveJobs(ctx, old->name, name); live > 0) {
    return ErrorResponse(MakeError(
        ErrorCode::kConflict,
        "project '" + name + "' has " + std::to_string(live) + " queued or running job(s)"));
  }
  auto t = ctx.teams->RemoveProject(old->name, name);
  if (!t.ok()) return ErrorResponse(t.error());
  Response r = ObjectResponse(200, {{"deleted", name}});
  r.audit_target = "team/" + t->name + "/project/" + name;
  r.audit_before = TeamJson(old.value());
  r.audit_after = TeamJson(t.value());
  return r;
}

}  // namespace

void AddTeamRoutes(Router& router, ApiContext& ctx) {
  router.Add("GET", "/api/v1/teams", Role::kViewer,
             [&ctx](const Request& req, const Principal& who) { return GetTeams(ctx, req, who); });
  router.Scoped(Scope::kClusters);

  router.Add("POST", "/api/v1/teams", Role::kAdmin,
             [&ctx](const Request& req, const Principal& who) { return PostTeams(ctx, req, who); });
  router.Scoped(Scope::kFleet);

  router.Add("GET", "/api/v1/teams/{team}", Role::kViewer,
             TeamScoped(ctx, false, [&ctx](const Request& req, const Principal&) {
               if (!ctx.teams) return Unavailable();
               auto t = ctx.teams->Get(req.params.at("team"));
               if (!t.ok()) return ErrorResponse(t.error());
               return ObjectResponse(200, TeamView(ctx, t.value()));
             }));
  router.Scoped(Scope::kClusters);

  router.Add("PATCH", "/api/v1/teams/{team}", Role::kAdmin,
             TeamScoped(ctx, true, [&ctx](const Request& req, const Principal& who) {
               return PatchTeamsTeam(ctx, req, who);
             }));
  router.Scoped(Scope::kClusters);

  router.Add(
      "DELETE", "/api/v1/teams/{team}", Role::kAdmin,
      [&ctx](const Request& req, const Principal& who) { return DeleteTeamsTeam(ctx, req, who); });
  router.Scoped(Scope::kFleet);

  router.Add("GET", "/api/v1/teams/{team}/projects", Role::kViewer,
             TeamScoped(ctx, false, [&ctx](const Request& req, const Principal& who) {
               return GetTeamsTeamProjects(ctx, req, who);
             }));
  router.Scoped(Scope::kClusters);

  router.Add("POST", "/api/v1/teams/{team}/projects", Role::kOperator,
             TeamScoped(ctx, true, [&ctx](const Request& req, const Principal& who) {
               return PostTeamsTeamProjects(ctx, req, who);
             }));
  router.Scoped(Scope::kClusters);

  router.Add("GET", "/api/v1/teams/{team}/projects/{project}", Role::kViewer,
             TeamScoped(ctx, false, [&ctx](const Request& req, const Principal& who) {
               return GetTeamsTeamProjectsProject(ctx, req, who);
             }));
  router.Scoped(Scope::kClusters);

  router.Add("PATCH", "/api/v1/teams/{team}/projects/{project}", Role::kOperator,
             TeamScoped(ctx, true, [&ctx](const Request& req, const Principal& who) {
               return PatchTeamsTeamProjectsProject(ctx, req, who);
             }));
  router.Scoped(Scope::kClusters);

  router.Add("DELETE", "/api/v1/teams/{team}/projects/{project}", Role::kOperator,
             TeamScoped(ctx, true, [&ctx](const Request& req, const Principal& who) {
               return DeleteTeamsTeamProjectsProject(ctx, req, who);
             }));
  router.Scoped(Scope::kClusters);
}

}  // namespace gpufleet::api
