#include "fleet/teams.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace gpufleet {

TeamService::TeamService(store::TeamStore& store, std::shared_ptr<Clock> clock)
    : store_(store), clock_(std::move(clock)) {}

Status TeamService::Load() {
  std::lock_guard lock(mu_);  // every change writes under it: nothing read here is older
  auto records = store_.ListTeams();
  if (!records.ok()) return records.error();
  std::map<std::string, Team> teams;
  for (const auto& r : records.value()) {
    auto team = ParseTeam(r.doc);
    if (!team.ok()) {
      spdlog::error("teams: stored team '{}' is unreadable, left out: {}", r.name,
                    team.error().message);
      continue;
    }
    std::string name = team->name;  // read before the move: `a[k] = b` evaluates b first
    teams[name] = std::move(team).value();
  }
  teams_ = std::move(teams);
  return {};
}

std::vector<Team> TeamService::List() const {
  std::lock_guard lock(mu_);
  std::vector<Team> out;
  for (const auto& [name, t] : teams_) out.push_back(t);
  return out;
}

Result<Team> TeamService::Get(const std::string& name) const {
  std::lock_guard lock(mu_);
  auto it = teams_.find(name);
  if (it == teams_.end()) return MakeError(ErrorCode::kNotFound, "no team '" + name + "'");
  return it->second;
}

Status TeamService::Save(const Team& team) {
  return store_.PutTeam({team.name, TeamJson(team), team.updated_ms});
}

Result<Team> TeamService::Create(Team team) {
  std::lock_guard lock(mu_);
  if (teams_.count(team.name)) {
    return MakeError(ErrorCode::kConflict, "team '" + team.name + "' exists");
  }
  int64_t now = clock_->NowMs();
  team.created_ms = team.updated_ms = now;
  for (auto& p : team.projects) p.created_ms = now;
  GF_TRY(Save(team));
  teams_[team.name] = team;
  return team;
}

Result<Team> TeamService::Replace(Team team) {
  std::lock_guard lock(mu_);
  auto it = teams_.find(team.name);
  if (it == teams_.end()) return MakeError(ErrorCode::kNotFound, "no team '" + team.name + "'");
  int64_t now = clock_->NowMs();
  team.created_ms = it->second.created_ms;
  team.updated_ms = now;
  for (auto& p : team.projects) {
    const Project* old = it->second.FindProject(p.name);
    p.created_ms = old ? old->created_ms : now;
  }
  GF_TRY(Save(team));
  it->second = team;
  return team;
}

Status TeamService::Delete(const std::string& name) {
  std::lock_guard lock(mu_);
  if (!teams_.count(name)) return MakeError(ErrorCode::kNotFound, "no team '" + name + "'");
  GF_TRY(store_.DeleteTeam(name));
  teams_.erase(name);
  return {};
}

Result<Team> TeamService::AddProject(const std::string& team, Project project) {
  std::lock_guard lock(mu_);
  auto it = teams_.find(team);
  if (it == teams_.end()) return MakeError(ErrorCode::kNotFound, "no team '" + team + "'");
  if (it->second.FindProject(project.name)) {
    return MakeError(ErrorCode::kConflict,
                     "team '" + team + "' has a project '" + project.name + "' already");
  }
  Team t = it->second;
  int64_t now = clock_->NowMs();
  project.created_ms = now;
  t.projects.push_back(std::move(project));
  t.updated_ms = now;
  GF_TRY(Save(t));
  it->second = t;
  return t;
}

Result<Team> TeamService::RemoveProject(const std::string& team, const std::string& project) {
  std::lock_guard lock(mu_);
  auto it = teams_.find(team);
  if (it == teams_.end()) return MakeError(ErrorCode::kNotFound, "no team '" + team + "'");
  Team t = it->second;
  auto gone = std::erase_if(t.projects, [&](const Project& p) { return p.name == project; });
  if (gone == 0) {
    return MakeError(ErrorCode::kNotFound, "team '" + team + "' has no project '" + project + "'");
  }
  t.updated_ms = clock_->NowMs();
  GF_TRY(Save(t));
  it->second = t;
  return t;
}

Status TeamService::CheckJob(const std::string& team, const std::string& project) const {
  std::lock_guard lock(mu_);
  auto it = teams_.find(team);
  if (it == teams_.end()) {
    std::string known;
    for (const auto& [name, t] : teams_) known += (known.empty() ? "" : ", ") + name;
    return MakeError(ErrorCode::kInvalidArgument,
                     "unknown team '" + team + "' (" +
                         (known.empty() ? std::string("no teams yet: gpufleet teams create")
                                        : "known: " + known) +
                         ")");
  }
  if (project.empty() || !it->second.FindProject(project)) {
    std::string known;
    for (const auto& p : it->second.projects) known += (known.empty() ? "" : ", ") + p.name;
    std::string has =
        known.empty() ? "it has none yet: gpufleet teams projects add" : "it has " + known;
    if (project.empty()) {
      return MakeError(ErrorCode::kInvalidArgument, "'project' is required: the project of team '" +
                                                        team + "' that the job is for (" + has +
                                                        ")");
    }
    return MakeError(ErrorCode::kInvalidArgument,
                     "team '" + team + "' has no project '" + project + "' (" + has + ")");
  }
  return {};
}

std::string TeamService::ForSlurmAccount(const std::string& account) const {
  std::lock_guard lock(mu_);
  for (const auto& [name, t] : teams_) {
    if (std::find(t.slurm_accounts.begin(), t.slurm_accounts.end(), account) !=
        t.slurm_accounts.end()) {
      return name;
    }
  }
  return account;
}

std::map<std::string, std::vector<std::string>> TeamService::Channels() const {
  std::lock_guard lock(mu_);
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& [name, t] : teams_) {
    if (!t.channels.empty()) out[name] = t.channels;
  }
  return out;
}

}  // namespace gpufleet
