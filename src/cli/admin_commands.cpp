// tokens, apply and audit commands.

#include <CLI/CLI.hpp>
#include <fstream>
#include <sstream>

#include "cli/cli.h"
#include "cli/output.h"
#include "common/json_text.h"

namespace json = boost::json;

namespace gpufleet::cli {
namespace {

std::string Field(const json::value& item, const char* key) {
  const auto& o = item.as_object();
  auto it = o.find(key);
  return it == o.end() ? "" : Str(it->value());
}

void AddTokensCreateCommand(Globals& g, CLI::App* tokens) {
  auto* create = tokens->add_subcommand(
      "create", "Create a join token (--pool) or an API token (--role and --name)");
  static std::string pool, ttl, role, name;
  static std::vector<std::string> clusters;
  create->add_option("--pool", pool, "pool the join token admits nodes to");
  create->add_option("--ttl", ttl, "lifetime, e.g. 30m, 24h, 7d or never (join default 24h)");
  create->add_option("--role", role, "API token role: viewer, operator or admin");
  create->add_option("--name", name, "API token name (who it is for)");
  create->add_option("--cluster", clusters, "API token scope (repeatable; default all)");
  create->callback([&g] {
    json::object body;
    std::string target;
    if (!pool.empty()) {
      if (!role.empty() || !name.empty()) {
        std::fprintf(stderr, "error: --pool makes a join token; --role/--name make an API token\n");
        g.exit_code = 2;
        return;
      }
      target = "/api/v1/join-tokens";
      body["pool"] = pool;
    } else if (!role.empty() && !name.empty()) {
      target = "/api/v1/api-tokens";
      body["role"] = role;
      body["name"] = name;
      json::array cs;
      for (const auto& c : clusters) cs.push_back(json::value(c));
      if (!cs.empty()) body["clusters"] = cs;
    } else {
      std::fprintf(stderr,
                   "error: give --pool for a join token, or --role and --name for an API token\n");
      g.exit_code = 2;
      return;
    }
    if (!ttl.empty()) body["ttl"] = ttl;
    auto v = Call(g, "POST", target, JsonText(body));
    if (!v) return;
    Show(g, *v, [](const json::value& t) {
      std::printf("%s\n", Field(t, "token").c_str());
      std::fprintf(stderr, "created %s%s, expires %s; the token is shown only once\n",
                   Field(t, "id").c_str(),
                   t.as_object().contains("pool") ? (" for pool " + Field(t, "pool")).c_str() : "",
                   Field(t, "expires_at").empty() ? "never" : Field(t, "expires_at").c_str());
    });
  });
}

void AddTokensListCommand(Globals& g, CLI::App* tokens) {
  auto* list = tokens->add_subcommand("list", "List join tokens (or API tokens with --api)");
  static bool api = false;
  list->add_flag("--api", api, "list API tokens instead (admin)");
  list->callback([&g] {
    auto v = Call(g, "GET", api ? "/api/v1/api-tokens" : "/api/v1/join-tokens");
    if (!v) return;
    Show(g, *v, [](const json::value& v) {
      if (api) {
        Table t({"ID", "NAME", "PREFIX", "ROLE", "CLUSTERS", "CREATED", "LAST USED", "EXPIRES",
                 "REVOKED"});
        for (const auto& x : v.at("items").as_array()) {
          std::string cs;
          for (const auto& c : x.at("clusters").as_array()) cs += (cs.empty() ? "" : ",") + Str(c);
          std::string prefix = Field(x, "prefix");
          t.Row({Field(x, "id"), Field(x, "name"), prefix.empty() ? "-" : prefix + "…",
                 Field(x, "role"), cs.empty() ? "*" : cs, Field(x, "created_at"),
                 Field(x, "last_used_at").empty() ? "never" : Field(x, "last_used_at"),
                 Field(x, "expires_at"), Field(x, "revoked")});
        }
        t.Print();
      } else {
        Table t({"ID", "POOL", "PREFIX", "CREATED BY", "CREATED", "EXPIRES", "VALID"});
        for (const auto& x : v.at("items").as_array()) {
          std::string prefix = Field(x, "prefix");
          t.Row({Field(x, "id"), Field(x, "pool"), prefix.empty() ? "-" : prefix + "…",
                 Field(x, "created_by"), Field(x, "created_at"), Field(x, "expires_at"),
                 Field(x, "valid")});
        }
        t.Print();
      }
    });
  });
}

void AddTokensRotateCommand(Globals& g, CLI::App* tokens) {
  auto* rotate = tokens->add_subcommand(
      "rotate", "A new secret for an API token; the old one works for a grace period");
  static std::string rotate_id, grace = "1h";
  rotate->add_option("id", rotate_id, "API token id (tok-…)")->required();
  rotate->add_option("--grace", grace,
                     "how long the old secret still works (default 1h; 0s: not at all)");
  rotate->callback([&g] {
    auto v = Call(g, "POST", "/api/v1/api-tokens/" + UrlEncode(rotate_id) + "/rotate",
                  JsonText(json::object{{"grace", grace}}));
    if (!v) return;
    Show(g, *v, [](const json::value& t) {
      std::printf("%s\n", Field(t, "token").c_str());
      std::string until = Field(t, "previous_valid_until");
      std::fprintf(stderr, "rotated %s; the old secret %s; the new one is shown only once\n",
                   Field(t, "id").c_str(),
                   until.empty() ? "no longer works" : ("works until " + until).c_str());
    });
  });
}

void AddTokensRevokeCommand(Globals& g, CLI::App* tokens) {
  auto* revoke = tokens->add_subcommand("revoke", "Revoke a token by id (jt-… or tok-…)");
  static std::string id;
  revoke->add_option("id", id, "token id")->required();
  revoke->callback([&g] {
    std::string target = id.rfind("tok-", 0) == 0 ? "/api/v1/api-tokens/" : "/api/v1/join-tokens/";
    auto v = Call(g, "DELETE", target + UrlEncode(id));
    if (v) Show(g, *v, [](const json::value&) { std::printf("revoked %s\n", id.c_str()); });
  });
}

void AddTokenCommands(CLI::App& app, Globals& g) {
  auto* tokens =
      app.add_subcommand("tokens", "Join tokens (per pool) and API tokens")->require_subcommand(1);

  AddTokensCreateCommand(g, tokens);
  AddTokensListCommand(g, tokens);
  AddTokensRotateCommand(g, tokens);
  AddTokensRevokeCommand(g, tokens);
}

// What `apply` did, or (--dry-run) what the file holds.
void PrintApplied(const std::string& file, const json::value& r) {
  // A rule file alone; a fleet file's reply has clusters (and rules when it had some).
  bool rules = !r.as_object().contains("clusters");
  if (r.as_object().contains("dry_run")) {
    if (rules) {
      std::printf("%s is valid: %s groups, %s rules (dry run, nothing changed)\n", file.c_str(),
                  Field(r, "groups").c_str(), Field(r, "rules").c_str());
      return;
    }
    std::printf(
        "%s is valid: %s clusters, %s pools, %s scaling policies (dry run, nothing "
        "changed)\n",
        file.c_str(), Field(r, "clusters").c_str(), Field(r, "pools").c_str(),
        r.as_object().contains("scaling") ? Field(r, "scaling").c_str() : "0");
    return;
  }
  if (rules) {
    const auto& c = r.at("rules");
    std::printf("rules: %s created, %s updated, %s unchanged, %s deleted\n",
                Str(c.at("created")).c_str(), Str(c.at("updated")).c_str(),
                Str(c.at("unchanged")).c_str(), Str(c.at("deleted")).c_str());
    return;
  }
  for (const char* kind : {"clusters", "pools"}) {
    const auto& c = r.at(kind);
    std::printf("%s: %s created, %s updated, %s unchanged\n", kind, Str(c.at("created")).c_str(),
                Str(c.at("updated")).c_str(), Str(c.at("unchanged")).c_str());
  }
  if (const auto* sc = r.as_object().if_contains("scaling")) {
    std::printf("scaling: %s set, %s unchanged\n", Str(sc->at("set")).c_str(),
                Str(sc->at("unchanged")).c_str());
  }
  if (const auto* t = r.as_object().if_contains("teams")) {
    std::printf("teams: %s created, %s updated, %s unchanged\n", Str(t->at("created")).c_str(),
                Str(t->at("updated")).c_str(), Str(t->at("unchanged")).c_str());
    for (const auto& name : t->at("deleted").as_array()) {
      std::printf("deleted team %s\n", Str(name).c_str());
    }
  }
  if (const auto* ch = r.as_object().if_contains("channels")) {
    std::printf("channels: %s created, %s updated, %s unchanged\n", Str(ch->at("created")).c_str(),
                Str(ch->at("updated")).c_str(), Str(ch->at("unchanged")).c_str());
    for (const auto& name : ch->at("deleted").as_array()) {
      std::printf("deleted channel %s\n", Str(name).c_str());
    }
  }
  if (const auto* ru = r.as_object().if_contains("rules")) {
    std::printf("rules: %s created, %s updated, %s unchanged, %s deleted\n",
                Str(ru->at("created")).c_str(), Str(ru->at("updated")).c_str(),
                Str(ru->at("unchanged")).c_str(), Str(ru->at("deleted")).c_str());
  }
  if (const auto* d = r.as_object().if_contains("deleted")) {
    for (auto [kind, one] : {std::pair{"clusters", "cluster"}, std::pair{"pools", "pool"}}) {
      for (const auto& name : d->at(kind).as_array()) {
        std::printf("deleted %s %s\n", one, Str(name).c_str());
      }
    }
  }
}

void AddApplyCommand(CLI::App& app, Globals& g) {
  auto* apply =
      app.add_subcommand("apply", "Apply a fleet file (clusters, pools) or an alert rule file");
  static std::string file;
  static bool dry_run = false, prune = false;
  apply->add_option("-f,--filename", file, "fleet or rule YAML file (- for stdin)")->required();
  apply->add_flag("--dry-run", dry_run, "validate only; change nothing");
  apply->add_flag("--prune", prune,
                  "also delete the clusters and pools the file no longer names (refused, "
                  "deleting nothing, for a pool with nodes or jobs)");
  apply->callback([&g] {
    auto text = ReadInput(g, file);
    if (!text) return;
    std::string target = "/api/v1/apply?filename=" + UrlEncode(file == "-" ? "stdin" : file);
    if (dry_run) target += "&dry_run=true";
    if (prune) target += "&prune=true";
    auto v = Call(g, "POST", target, *text, "application/yaml");
    if (!v) return;
    Show(g, *v, [](const json::value& r) { PrintApplied(file, r); });
  });
}

void AddExportCommand(CLI::App& app, Globals& g) {
  auto* exp = app.add_subcommand(
      "export", "The live clusters, pools and scaling policies as a fleet file apply takes back");
  static std::string format = "fleet";
  exp->add_option("--format", format,
                  "fleet (a fleet file) or ansible (an inventory of the nodes, in YAML)")
      ->capture_default_str();
  exp->callback([&g] {
    if (auto text = CallText(g, "GET", "/api/v1/export?format=" + UrlEncode(format))) {
      std::fputs(text->c_str(), stdout);
    }
  });
}

void AddDiffCommand(CLI::App& app, Globals& g) {
  auto* diff = app.add_subcommand(
      "diff", "What applying a fleet file would create, change and delete (exit 1 if anything)");
  static std::string file;
  diff->add_option("-f,--filename", file, "fleet YAML file (- for stdin)")->required();
  diff->callback([&g] {
    auto text = ReadInput(g, file);
    if (!text) return;
    auto v = Call(g, "POST",
                  "/api/v1/apply?dry_run=true&filename=" + UrlEncode(file == "-" ? "stdin" : file),
                  *text, "application/yaml");
    if (!v) return;
    const auto* changes = v->as_object().if_contains("changes");
    if (changes == nullptr) {
      std::fprintf(stderr, "error: %s is neither a fleet file nor a rule file\n", file.c_str());
      g.exit_code = 1;
      return;
    }
    Show(g, *v, [](const json::value& r) {
      for (const auto& c : r.at("changes").as_array()) {
        const std::string action = Str(c.at("action"));
        const char mark = action == "create" ? '+' : action == "delete" ? '-' : '~';
        std::printf("%c %s %s%s\n", mark, Str(c.at("kind")).c_str(), Str(c.at("name")).c_str(),
                    action == "delete" ? " (not in the file: apply --prune deletes it)" : "");
        if (action != "update") continue;
        for (const auto& f : c.at("fields").as_array()) {
          auto shown = [](const json::value& s) {
            return s.as_string().empty() ? "(none)" : Str(s);
          };
          std::printf("    %s: %s -> %s\n", Str(f.at("field")).c_str(), shown(f.at("from")).c_str(),
                      shown(f.at("to")).c_str());
        }
      }
      if (r.at("changes").as_array().empty()) std::printf("no changes\n");
    });
    // As kubectl diff: 1 when there are differences.
    if (!changes->as_array().empty() && g.exit_code == 0) g.exit_code = 1;
  });
}

void AddAuditListCommand(Globals& g, CLI::App* audit) {
  // The filters `list` and `export` share.
  static std::string actor, action, target, result, since, until;
  auto filters = [](CLI::App* c) {
    c->add_option("--actor", actor, "who: a token's name, or a node's");
    c->add_option("--action", action, "part of the action, e.g. cordon or 'POST /api/v1/jobs'");
    c->add_option("--target", target, "what: node/n1, or a prefix ending in / (node/)");
    c->add_option("--result", result, "ok or error")->check(CLI::IsMember({"ok", "error"}));
    c->add_option("--since", since, "from: -24h, -7d or 2026-12-01T00:00:00Z");
    c->add_option("--until", until, "before: the same forms");
  };
  auto query = [] {
    return QueryString({{"actor", actor},
                        {"action", action},
                        {"target", target},
                        {"result", result},
                        {"since", since},
                        {"until", until}});
  };
  auto* list = audit->add_subcommand("list", "Every change made through the API, newest first");
  static std::string limit = "50";
  list->add_option("--limit", limit, "at most this many (default 50)");
  filters(list);
  list->callback([&g, query] {
    std::string q = query();
    auto v =
        Call(g, "GET", "/api/v1/audit" + (q.empty() ? "?" : q + "&") + "limit=" + UrlEncode(limit));
    if (!v) return;
    Show(g, *v, [](const json::value& v) {
      Table t({"ID", "TIME", "ACTOR", "ACTION", "TARGET", "STATUS"});
      for (const auto& r : v.at("items").as_array()) {
        t.Row({Field(r, "id"), Field(r, "time"), Field(r, "actor"), Field(r, "action"),
               Field(r, "target"), Field(r, "status")});
      }
      t.Print();
    });
  });

  auto* exp = audit->add_subcommand(
      "export", "Matching records, oldest first, as JSON lines (for a SIEM), page by page");
  filters(exp);
  exp->callback([&g, query] {
    std::string q = query();
    int64_t after = 0;
    for (;;) {
      auto v = Call(g, "GET",
                    "/api/v1/audit" + (q.empty() ? "?" : q + "&") +
                        "order=asc&limit=5000&after=" + std::to_string(after));
      if (!v) return;
      const auto& items = v->at("items").as_array();
      for (const auto& r : items) std::printf("%s\n", JsonText(r).c_str());
      std::fflush(stdout);
      if (items.size() < 5000) return;
      after = items.back().at("id").to_number<int64_t>();
    }
  });
}

void AddAuditVerifyCommand(Globals& g, CLI::App* audit) {
  auto* verify = audit->add_subcommand(
      "verify", "Walk the hash chain: exit 0 with the count, or 1 naming the first bad record");
  verify->callback([&g] {
    auto v = Call(g, "GET", "/api/v1/audit/verify");
    if (!v) return;
    bool ok = v->at("ok").as_bool();
    Show(g, *v, [ok](const json::value& v) {
      if (ok) {
        std::printf("audit log verified: %s records chained", Field(v, "verified").c_str());
        if (v.at("unchained").to_number<int64_t>() > 0) {
          std::printf(", %s older ones from before the chain", Field(v, "unchained").c_str());
        }
        if (v.at("anchor_id").to_number<int64_t>() > 0) {
          std::printf(", from the anchor at record %s", Field(v, "anchor_id").c_str());
        }
        std::printf("\n");
      } else {
        std::fprintf(stderr, "audit log broken at record %s: %s\n",
                     Field(v, "first_bad_id").c_str(), Field(v, "problem").c_str());
      }
    });
    if (!ok) g.exit_code = 1;
  });
}

void AddAuditPruneCommand(Globals& g, CLI::App* audit) {
  auto* prune = audit->add_subcommand(
      "prune", "Delete records older than a duration (from the oldest on), keeping the chain");
  static std::string older_than;
  prune->add_option("--older-than", older_than, "e.g. 400d (at least 1d)")->required();
  prune->callback([&g] {
    auto v =
        Call(g, "POST", "/api/v1/audit/prune", JsonText(json::object{{"older_than", older_than}}));
    if (!v) return;
    Show(g, *v, [](const json::value& v) {
      std::printf("pruned %s records from before %s\n", Field(v, "pruned").c_str(),
                  Field(v, "before").c_str());
    });
  });
}

void AddAuditCommand(CLI::App& app, Globals& g) {
  auto* audit = app.add_subcommand("audit", "The audit log")->require_subcommand(1);
  AddAuditListCommand(g, audit);
  AddAuditVerifyCommand(g, audit);
  AddAuditPruneCommand(g, audit);
}

// gpufleet controllers list: the controllers sharing the database and which one leads.
void AddControllersCommand(CLI::App& app, Globals& g) {
  auto* controllers =
      app.add_subcommand("controllers", "The controllers that share the store, and the leader")
          ->require_subcommand(1);
  auto* list = controllers->add_subcommand("list", "Each controller, its URL, agents and role");
  list->callback([&g] {
    auto v = Call(g, "GET", "/api/v1/controllers");
    if (!v) return;
    Show(g, *v, [](const json::value& v) {
      Table t({"ID", "URL", "ROLE", "EPOCH", "AGENTS", "STARTED", "LAST SEEN", "STATE"});
      for (const auto& r : v.at("items").as_array()) {
        bool leader = r.at("leader").as_bool();
        std::string id = Str(r.at("id")) + (r.at("self").as_bool() ? " (this one)" : "");
        t.Row({id, Str(r.at("url")), leader ? "leader" : "follower",
               leader ? Str(r.at("epoch")) : "-", Str(r.at("agents")), Str(r.at("started_at")),
               Str(r.at("last_seen")),
               r.at("live").as_bool() ? "live" : "silent " + Str(r.at("seen_ago_s")) + " s"});
      }
      t.Print();
    });
  });
}

}  // namespace

void AddAdminCommands(CLI::App& app, Globals& g) {
  AddControllersCommand(app, g);
  AddTokenCommands(app, g);
  AddApplyCommand(app, g);
  AddExportCommand(app, g);
  AddDiffCommand(app, g);
  AddAuditCommand(app, g);
}

}  // namespace gpufleet::cli
