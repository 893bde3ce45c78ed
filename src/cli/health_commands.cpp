// health, xids, alerts and channels: the health model and alerting from the command line.

#include <CLI/CLI.hpp>

#include "cli/cli.h"
#include "cli/output.h"
#include "common/json_text.h"
#include "common/strings.h"

namespace json = boost::json;

namespace gpufleet::cli {
namespace {

// "cluster=train,severity=~critical|warning"; "(all)" for none.
std::string MatchersText(const json::value& matchers) {
  std::string text;
  if (!matchers.is_array()) return "(all)";
  for (const auto& m : matchers.as_array()) {
    bool regex = m.at("isRegex").as_bool(), equal = m.at("isEqual").as_bool();
    const char* op = equal ? (regex ? "=~" : "=") : (regex ? "!~" : "!=");
    text += (text.empty() ? "" : ",") + Str(m.at("name")) + op + Str(m.at("value"));
  }
  return text.empty() ? "(all)" : text;
}

void AddHealthCommand(CLI::App& app, Globals& g) {
  auto* health = app.add_subcommand(
      "health", "GPU and node health with reasons and recommended actions (problems only)");
  static std::string cluster, pool, node;
  static bool all = false;
  health->add_option("--cluster", cluster, "only this cluster");
  health->add_option("--pool", pool, "only this pool");
  health->add_option("--node", node, "only this node");
  health->add_flag("--all", all, "list healthy nodes and GPUs too");
  health->callback([&g] {
    auto v = Call(g, "GET",
                  "/api/v1/health" + QueryString({{"cluster", cluster},
                                                  {"pool", pool},
                                                  {"node", node},
                                                  {"show", all ? "all" : ""},
                                                  {"limit", "5000"}}));
    if (!v) return;
    Show(g, *v, [](const json::value& v) {
      Table clusters({"CLUSTER", "NODES", "STARTING", "READY", "DEGRADED", "UNHEALTHY", "GPUS",
                      "HEALTHY", "WARNING", "FAILED"});
      auto row = [&](const std::string& name, const json::value& c) {
        clusters.Row({name, Str(c.at("nodes")), Str(c.at("starting")), Str(c.at("ready")),
                      Str(c.at("degraded")), Str(c.at("unhealthy")), Str(c.at("gpus")),
                      Str(c.at("gpus_healthy")), Str(c.at("gpus_warning")),
                      Str(c.at("gpus_failed"))});
      };
      for (const auto& c : v.at("clusters").as_array()) row(Str(c.at("cluster")), c);
      row("(fleet)", v.at("summary"));
      clusters.Print();
      Table t({"NODE", "HEALTH", "GPU", "LEVEL", "CHECK", "ACTION", "WHY"});
      size_t rows = 0;
      for (const auto& n : v.at("items").as_array()) {
        bool any = false;
        for (const auto& gpu : n.at("gpus").as_array()) {
          for (const auto& r : gpu.at("reasons").as_array()) {
            t.Row({Str(n.at("node")), Str(n.at("health")), Str(gpu.at("index")), Str(r.at("level")),
                   Str(r.at("check")), Str(r.at("action")), Str(r.at("message"))});
            any = true;
            ++rows;
          }
        }
        if (!any) {
          std::string why;
          for (const auto& r : n.at("reasons").as_array())
            why += (why.empty() ? "" : "; ") + Str(r);
          t.Row({Str(n.at("node")), Str(n.at("health")), "-", "-", "-", "-", why});
          ++rows;
        }
      }
      if (rows) {
        std::printf("\n");
        t.Print();
      }
    });
  });
}

void AddXidsCommand(CLI::App& app, Globals& g) {
  auto* xids = app.add_subcommand("xids", "The XID catalogue")->require_subcommand(1);
  auto* list = xids->add_subcommand("list", "What each XID means and what to do about it");
  list->callback([&g] {
    auto v = Call(g, "GET", "/api/v1/xids?limit=5000");
    if (!v) return;
    Show(g, *v, [](const json::value& v) {
      Table t({"XID", "NAME", "SEVERITY", "ACTION", "HOLD", "DESCRIPTION"});
      for (const auto& x : v.at("items").as_array()) {
        t.Row({Str(x.at("xid")), Str(x.at("name")), Str(x.at("severity")), Str(x.at("action")),
               std::to_string(x.at("hold_ms").as_int64() / 60'000) + "m",
               Str(x.at("description"))});
      }
      t.Print();
    });
  });
}

void AddAlertsCommand(CLI::App& app, Globals& g) {
  auto* alerts = app.add_subcommand("alerts", "Alerts")->require_subcommand(1);
  auto* show = alerts->add_subcommand("show", "One alert with all its labels and annotations");
  static std::string fingerprint;
  show->add_option("fingerprint", fingerprint, "the alert's fingerprint (alerts list -o json)")
      ->required();
  show->callback([&g] {
    auto v = Call(g, "GET", "/api/v1/alerts" + QueryString({{"fingerprint", fingerprint}}));
    if (!v) return;
    const auto& items = v->at("items").as_array();
    if (items.empty()) {
      std::fprintf(stderr, "error: no alert %s\n", fingerprint.c_str());
      g.exit_code = 1;
      return;
    }
    Show(g, items.at(0), [](const json::value& a) {
      std::printf("%s  %s  since %s\n", Str(a.at("alertname")).c_str(), Str(a.at("state")).c_str(),
                  Str(a.at("active_since")).c_str());
      for (const char* part : {"labels", "annotations"}) {
        std::printf("%s:\n", part);
        for (const auto& kv : a.at(part).as_object()) {
          std::printf("  %s: %s\n", std::string(kv.key()).c_str(), Str(kv.value()).c_str());
        }
      }
      std::string silenced;
      for (const auto& s : a.at("silenced_by").as_array()) silenced += " " + Str(s);
      if (!silenced.empty()) std::printf("silenced by:%s\n", silenced.c_str());
    });
  });
  auto* list = alerts->add_subcommand("list", "Pending, firing and recently resolved alerts");
  static std::string state;
  list->add_option("--state", state, "pending, firing or resolved");
  list->callback([&g] {
    auto v = Call(g, "GET", "/api/v1/alerts" + QueryString({{"state", state}, {"limit", "5000"}}));
    if (!v) return;
    Show(g, *v, [](const json::value& v) {
      Table t({"FINGERPRINT", "ALERT", "STATE", "SEVERITY", "NODE", "GPU", "SINCE", "SUMMARY"});
      for (const auto& a : v.at("items").as_array()) {
        const auto& labels = a.at("labels").as_object();
        auto label = [&](const char* k) {
          auto it = labels.find(k);
          return it == labels.end() ? std::string("-") : Str(it->value());
        };
        t.Row({Str(a.at("fingerprint")), Str(a.at("alertname")), Str(a.at("state")),
               label("severity"), label("Hostname"), label("gpu"), Str(a.at("active_since")),
               Str(a.at("annotations").at("summary"))});
      }
      t.Print();
    });
  });
}

void AddChannelsCommand(CLI::App& app, Globals& g) {
  auto* channels =
      app.add_subcommand("channels", "Where alerts are delivered")->require_subcommand(1);
  auto* create = channels->add_subcommand("create", "Add an Alertmanager or webhook channel");
  static std::string name, type, url, secret;
  create->add_option("--name", name, "channel name")->required();
  create->add_option("--type", type, "alertmanager or webhook")->required();
  create->add_option("--url", url, "http://host:port (Alertmanager) or the webhook's URL")
      ->required();
  create->add_option("--secret", secret, "webhook signing key (HMAC-SHA256)");
  static std::vector<std::string> routes;
  static std::string group_by;
  create->add_option("--group-by", group_by,
                     "webhooks: one notification for the alerts sharing these labels, e.g. "
                     "alertname,cluster");
  create->add_option("--match", routes,
                     "route: send only alerts matching LABEL=VALUE, !=, =~ or !~ (repeatable)");
  create->callback([&g] {
    json::object body{{"name", name}, {"type", type}, {"url", url}};
    if (!secret.empty()) body["secret"] = secret;
    auto route = MatchArgs(g, routes);
    if (!route) return;
    if (!route->empty()) body["matchers"] = *route;
    if (!group_by.empty()) {
      json::array labels;
      for (const auto& l : Split(group_by, ',')) labels.push_back(json::string(l));
      body["group_by"] = std::move(labels);
    }
    auto v = Call(g, "POST", "/api/v1/channels", JsonText(body));
    if (!v) return;
    Show(g, *v, [](const json::value& v) {
      std::printf("channel %s (%s) created\n", Str(v.at("name")).c_str(),
                  Str(v.at("type")).c_str());
    });
  });
  auto* list = channels->add_subcommand("list", "Channels and their undelivered notifications");
  list->callback([&g] {
    auto v = Call(g, "GET", "/api/v1/channels");
    if (!v) return;
    Show(g, *v, [](const json::value& v) {
      Table t({"NAME", "TYPE", "URL", "SIGNED", "ROUTE", "GROUP BY", "PENDING", "LAST ERROR"});
      for (const auto& c : v.at("items").as_array()) {
        std::string group_by;
        for (const auto& l : c.at("group_by").as_array()) {
          group_by += (group_by.empty() ? "" : ",") + Str(l);
        }
        t.Row({Str(c.at("name")), Str(c.at("type")), Str(c.at("url")), Str(c.at("signed")),
               MatchersText(c.at("matchers")), group_by.empty() ? "-" : group_by,
               Str(c.at("pending")), Str(c.at("last_error"))});
      }
      t.Print();
    });
  });
  auto* del = channels->add_subcommand("delete", "Remove a channel and its queued notifications");
  static std::string target;
  del->add_option("name", target, "channel name")->required();
  del->callback([&g] {
    auto v = Call(g, "DELETE", "/api/v1/channels/" + UrlEncode(target));
    if (!v) return;
    Show(g, *v, [](const json::value&) { std::printf("channel %s deleted\n", target.c_str()); });
  });
}

void AddSilencesCommand(CLI::App& app, Globals& g) {
  auto* silences = app.add_subcommand("silences", "Mute alerts' notifications for a while")
                       ->require_subcommand(1);
  auto* create = silences->add_subcommand("create", "Silence the alerts every matcher matches");
  static std::vector<std::string> matches;
  static std::string duration = "2h", comment, author;
  create
      ->add_option("--match", matches,
                   "LABEL=VALUE, LABEL!=VALUE, LABEL=~REGEX or LABEL!~REGEX (repeatable)")
      ->required();
  create->add_option("--duration", duration, "how long (default 2h)");
  create->add_option("--comment", comment, "why")->required();
  create->add_option("--author", author, "who (default: the token's name)");
  create->callback([&g] {
    auto matchers = MatchArgs(g, matches);
    if (!matchers) return;
    json::object body{{"matchers", *matchers}, {"duration", duration}, {"comment", comment}};
    if (!author.empty()) body["created_by"] = author;
    auto v = Call(g, "POST", "/api/v1/silences", JsonText(body));
    if (!v) return;
    Show(g, *v, [](const json::value& v) {
      std::printf("%s until %s\n", Str(v.at("id")).c_str(), Str(v.at("ends_at")).c_str());
    });
  });
  auto* list = silences->add_subcommand("list", "Silences, newest first");
  list->callback([&g] {
    auto v = Call(g, "GET", "/api/v1/silences");
    if (!v) return;
    Show(g, *v, [](const json::value& v) {
      Table t({"ID", "STATE", "MATCHERS", "ENDS", "BY", "COMMENT"});
      for (const auto& s : v.at("items").as_array()) {
        t.Row({Str(s.at("id")), Str(s.at("state")), MatchersText(s.at("matchers")),
               Str(s.at("ends_at")), Str(s.at("created_by")), Str(s.at("comment"))});
      }
      t.Print();
    });
  });
  auto* expire = silences->add_subcommand("expire", "End a silence now");
  static std::string id;
  expire->add_option("id", id, "silence id")->required();
  expire->callback([&g] {
    auto v = Call(g, "DELETE", "/api/v1/silences/" + UrlEncode(id));
    if (!v) return;
    Show(g, *v, [](const json::value&) { std::printf("%s expired\n", id.c_str()); });
  });
}

}  // namespace

void AddHealthCommands(CLI::App& app, Globals& g) {
  AddHealthCommand(app, g);
  AddXidsCommand(app, g);
  AddAlertsCommand(app, g);
  AddChannelsCommand(app, g);
  AddSilencesCommand(app, g);
}

}  // namespace gpufleet::cli
