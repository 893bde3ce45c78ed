#pragma once
// The teams and their projects (model/team.h), kept in memory and stored one document each. Jobs
// must name a known team and project; alerts about a team's clusters, pools and jobs go to its
// channels as well (alerting/notifier.h). Thread-safe.

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "model/team.h"
#include "store/store.h"

namespace gpufleet {

class TeamService {
 public:
  TeamService(store::TeamStore& store, std::shared_ptr<Clock> clock);
  Status Load();

  std::vector<Team> List() const;  // by name
  Result<Team> Get(const std::string& name) const;
  // kConflict when one of the name exists. Its projects are created with it.
  Result<Team> Create(Team team);
  // Replaces the team's fields (contacts, channels, budget, projects); kNotFound when none.
  // Projects keep their creation times.
  Result<Team> Replace(Team team);
  Status Delete(const std::string& name);                             // kNotFound when none
  Result<Team> AddProject(const std::string& team, Project project);  // kConflict: exists
  Result<Team> RemoveProject(const std::string& team, const std::string& project);

  // Whether a job may name them: a 400's message when not ("unknown team 'x' (known: ...)").
  Status CheckJob(const std::string& team, const std::string& project) const;
  // The team whose slurm_accounts list `account`; the account's own name when none does.
  std::string ForSlurmAccount(const std::string& account) const;
  // Team -> the channels its alerts go to (teams with none are absent).
  std::map<std::string, std::vector<std::string>> Channels() const;

 private:
  Status Save(const Team& team);
  store::TeamStore& store_;
  std::shared_ptr<Clock> clock_;
  mutable std::mutex mu_;
  std::map<std::string, Team> teams_;  // guarded by mu_
};

}  // namespace gpufleet
