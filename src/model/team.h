#pragma once
// Teams and their projects as values: who owns clusters, pools and jobs, who to tell about
// their alerts, and what they may spend. One JSON parser for the API, the stored document and a
// fleet file's `teams:` entries (config turns its YAML into JSON), so the three accept the same
// fields and say the same things about bad ones:
//
//   {"name": "vision", "contacts": ["vision-oncall@example.com"], "channels": ["vision-pager"],
//    "budget_monthly": 120000,
//    "projects": ["detector", {"name": "segmenter", "description": "the store cameras"}]}
//
// Every field but `name` is optional; unknown fields are errors.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace gpufleet {

struct Project {
  std::string name;  // unique in its team
  std::string description;
  int64_t created_ms = 0;
  bool operator==(const Project& o) const { return name == o.name && description == o.description; }
};

struct Team {
  std::string name;                   // a DNS-label style name, unique in the fleet
  std::vector<std::string> contacts;  // people or lists: e-mail addresses, handles
  // Alert channels (by name) that get the alerts about the team's clusters, pools and jobs.
  std::vector<std::string> channels;
  double budget_monthly = 0;  // in the cost reports' currency; 0: none set
  std::vector<Project> projects;
  // The Slurm accounts whose jobs are this team's (a Slurm job's team is the team that lists
  // its account, else the account's own name).
  std::vector<std::string> slurm_accounts;
  int64_t created_ms = 0, updated_ms = 0;
  bool operator==(const Team& o) const {
    return name == o.name && contacts == o.contacts && channels == o.channels &&
           budget_monthly == o.budget_monthly && projects == o.projects &&
           slurm_accounts == o.slurm_accounts;
  }
  const Project* FindProject(std::string_view project) const;
};

// Parses a team object. `field`, when given, is set to the field an error is about
// ("projects[1].name"), so a fleet file can point at its line. The times are read when present
// (the stored document), else left at 0.
Result<Team> ParseTeam(std::string_view json, std::string* field = nullptr);
// The team as the API shows it and the store keeps it (with its times); `for_file` leaves the
// times, empty fields and project times out, as the fleet file writes it.
std::string TeamJson(const Team& team, bool for_file = false);
// A project as POST /api/v1/teams/{team}/projects takes one: {"name", "description"}.
Result<Project> ParseProject(std::string_view json);

}  // namespace gpufleet
