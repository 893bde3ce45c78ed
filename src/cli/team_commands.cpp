// teams list|show|create|set|delete and teams projects add|list|delete: who owns clusters,
// pools and jobs, where their alerts go, and their budget.

#include <CLI/CLI.hpp>

#include "cli/cli.h"
#include "cli/client.h"
#include "cli/output.h"
#include "common/json_text.h"
#include "common/strings.h"

namespace json = boost::json;

namespace gpufleet::cli {
namespace {

std::string Names(const json::value& list, const char* key = nullptr) {
  std::string out;
  for (const auto& v : list.as_array()) {
    out += (out.empty() ? "" : ", ") + Str(key ? v.at(key) : v);
  }
  return out.empty() ? "-" : out;
}

void PrintTeam(const json::value& t) {
  std::printf("Team:      %s\n", Str(t.at("name")).c_str());
  std::printf("Contacts:  %s\n", Names(t.at("contacts")).c_str());
  std::printf("Channels:  %s\n", Names(t.at("channels")).c_str());
  std::printf("Budget:    %s a month\n", t.at("budget_monthly").to_number<double>() > 0
                                             ? Str(t.at("budget_monthly")).c_str()
                                             : "none");
  std::printf("Clusters:  %s\n", Names(t.at("clusters")).c_str());
  std::printf("Pools:     %s\n", Names(t.at("pools")).c_str());
  std::printf("Projects:\n");
  Table tab({"PROJECT", "DESCRIPTION", "CREATED"});
  for (const auto& p : t.at("projects").as_array()) {
    tab.Row({Str(p.at("name")), Str(p.at("description")), Str(p.at("created_at"))});
  }
  tab.Print();
}

// The body of create and set: only the options given.
struct TeamArgs {
  std::vector<std::string> contacts, channels, projects;
  double budget = -1;
  void Add(CLI::App* cmd, bool create) {
    cmd->add_option("--contact", contacts, "a person or list to reach (repeatable)");
    cmd->add_option("--channel", channels,
                    "an alert channel that gets the team's alerts (repeatable)");
    cmd->add_option("--budget", budget, "monthly budget, in the cost reports' currency")
        ->check(CLI::NonNegativeNumber);
    if (create) cmd->add_option("--project", projects, "a project of the team (repeatable)");
  }
  json::object Body() const {
    json::object o;
    if (!contacts.empty()) o["contacts"] = json::value_from(contacts);
    if (!channels.empty()) o["channels"] = json::value_from(channels);
    if (budget >= 0) o["budget_monthly"] = budget;
    if (!projects.empty()) o["projects"] = json::value_from(projects);
    return o;
  }
};

void AddTeamsListCommand(Globals& g, CLI::App* teams) {
  auto* list = teams->add_subcommand("list", "Every team");
  list->callback([&g] {
    auto v = Call(g, "GET", "/api/v1/teams?limit=1000");
    if (!v) return;
    Show(g, *v, [](const json::value& v) {
      Table t({"TEAM", "PROJECTS", "CLUSTERS", "POOLS", "CHANNELS", "BUDGET/MONTH", "CONTACTS"});
      for (const auto& team : v.at("items").as_array()) {
        double budget = team.at("budget_monthly").to_number<double>();
        t.Row({Str(team.at("name")), Names(team.at("projects"), "name"), Names(team.at("clusters")),
               Names(team.at("pools")), Names(team.at("channels")),
               budget > 0 ? Str(team.at("budget_monthly")) : "-", Names(team.at("contacts"))});
      }
      t.Print();
    });
  });
}

// The team the `teams` subcommands but list take.
std::string team_name;

void AddTeamsShowCommand(Globals& g, CLI::App* teams) {
  auto* show = teams->add_subcommand("show", "A team, what it owns and its projects");
  show->add_option("team", team_name, "team name")->required();
  show->callback([&g] {
    auto v = Call(g, "GET", "/api/v1/teams/" + UrlEncode(team_name));
    if (v) Show(g, *v, PrintTeam);
  });
}

void AddTeamsCreateCommand(Globals& g, CLI::App* teams) {
  static TeamArgs create_args;
  auto* create = teams->add_subcommand("create", "Add a team");
  create->add_option("team", team_name, "team name")->required();
  create_args.Add(create, true);
  create->callback([&g] {
    json::object body = create_args.Body();
    body["name"] = team_name;
    auto v = Call(g, "POST", "/api/v1/teams", JsonText(body));
    if (!v) return;
    Show(g, *v, [](const json::value& v) {
      std::printf("team %s created (%zu project(s))\n", Str(v.at("name")).c_str(),
                  v.at("projects").as_array().size());
    });
  });
}

void AddTeamsSetCommand(Globals& g, CLI::App* teams) {
  static TeamArgs set_args;
  auto* set = teams->add_subcommand("set", "Change a team: the options given replace its own");
  set->add_option("team", team_name, "team name")->required();
  set_args.Add(set, false);
  set->callback([&g] {
    json::object body = set_args.Body();
    if (body.empty()) {
      std::fprintf(stderr, "error: nothing to change: give --contact, --channel or --budget\n");
      g.exit_code = 2;
      return;
    }
    auto v = Call(g, "PATCH", "/api/v1/teams/" + UrlEncode(team_name), JsonText(body));
    if (v) Show(g, *v, PrintTeam);
  });
}

void AddTeamsDeleteCommand(Globals& g, CLI::App* teams) {
  auto* del = teams->add_subcommand("delete", "Remove a team that owns nothing and runs nothing");
  del->add_option("team", team_name, "team name")->required();
  del->callback([&g] {
    auto v = Call(g, "DELETE", "/api/v1/teams/" + UrlEncode(team_name));
    if (v)
      Show(g, *v, [](const json::value&) { std::printf("team %s deleted\n", team_name.c_str()); });
  });
}

void AddTeamsProjectsCommand(Globals& g, CLI::App* teams) {
  auto* projects =
      teams->add_subcommand("projects", "A team's projects (jobs name one)")->require_subcommand(1);
  static std::string project, description;
  auto* add = projects->add_subcommand("add", "Add a project to a team");
  add->add_option("team", team_name, "team name")->required();
  add->add_option("project", project, "project name")->required();
  add->add_option("--description", description, "what it is");
  add->callback([&g] {
    json::object body{{"name", project}};
    if (!description.empty()) body["description"] = description;
    auto v = Call(g, "POST", "/api/v1/teams/" + UrlEncode(team_name) + "/projects", JsonText(body));
    if (!v) return;
    Show(g, *v, [](const json::value&) {
      std::printf("project %s added to team %s\n", project.c_str(), team_name.c_str());
    });
  });
  auto* plist = projects->add_subcommand("list", "A team's projects");
  plist->add_option("team", team_name, "team name")->required();
  plist->callback([&g] {
    auto v = Call(g, "GET", "/api/v1/teams/" + UrlEncode(team_name) + "/projects");
    if (!v) return;
    Show(g, *v, [](const json::value& v) {
      Table t({"PROJECT", "DESCRIPTION", "CREATED"});
      for (const auto& p : v.at("items").as_array()) {
        t.Row({Str(p.at("name")), Str(p.at("description")), Str(p.at("created_at"))});
      }
      t.Print();
    });
  });
  auto* pdel = projects->add_subcommand("delete", "Remove a project that runs no job");
  pdel->add_option("team", team_name, "team name")->required();
  pdel->add_option("project", project, "project name")->required();
  pdel->callback([&g] {
    auto v = Call(g, "DELETE",
                  "/api/v1/teams/" + UrlEncode(team_name) + "/projects/" + UrlEncode(project));
    if (!v) return;
    Show(g, *v, [](const json::value&) {
      std::printf("project %s of team %s deleted\n", project.c_str(), team_name.c_str());
    });
  });
}

}  // namespace

void AddTeamCommands(CLI::App& app, Globals& g) {
  auto* teams = app.add_subcommand("teams",
                                   "Teams and their projects: owners, alert channels, "
                                   "budgets")
                    ->require_subcommand(1);
  AddTeamsListCommand(g, teams);
  AddTeamsShowCommand(g, teams);
  AddTeamsCreateCommand(g, teams);
  AddTeamsSetCommand(g, teams);
  AddTeamsDeleteCommand(g, teams);
  AddTeamsProjectsCommand(g, teams);
}

}  // namespace gpufleet::cli
