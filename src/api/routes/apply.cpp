// GET /api/v1/export: the live clusters and pools (those the token may see) with their scaling
// policies, and for a fleet-wide token the alert channels (without their secrets) and, as a
// second YAML document, the user alert rules: the file that `apply` takes back with no change
// (config/fleet_spec.h), or with ?format=ansible an Ansible inventory of them and their nodes.
// POST /api/v1/apply: fleet as code. The body is the YAML file itself (the CLI sends it as is,
// with ?filename= so errors name the file): a fleet file (kind Fleet), an alert rule file
// (Prometheus's format, top-level `groups`), or both as two documents split by `---`. The whole
// file is validated before anything is written, and a bad file changes nothing.

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "alerting/rules.h"
#include "api/json_util.h"
#include "api/scope.h"
#include "common/json_text.h"
#include "config/fleet_spec.h"
#include "slurm/bridge.h"

namespace json = boost::json;

namespace gpufleet::api {

namespace {

std::vector<FleetChange> RuleChanges(ApiContext& ctx, const alerting::RuleFile& file);
json::array ChangesJson(const std::vector<FleetChange>& changes);

Response ApplyRules(ApiContext& ctx, const Principal& who, const std::string& body,
                    const std::string& filename, bool dry_run) {
  if (!ctx.alerts) return AlertingUnavailable();
  if (auto s = RequireFleetWide(who); !s.ok()) return ErrorResponse(s.error());
  auto file = alerting::ParseRuleFile(body, filename);
  if (!file.ok()) return ErrorResponse(file.error());
  if (dry_run) {
    return ObjectResponse(200, {{"dry_run", true},
                                {"groups", file->groups.size()},
                                {"rules", file->rules.size()},
                                {"changes", ChangesJson(RuleChanges(ctx, file.value()))}});
  }
  auto changes = ctx.alerts->ApplyRuleFile(file.value());
  if (!changes.ok()) return ErrorResponse(changes.error());
  const auto& c = changes.value();
  return ObjectResponse(200, {{"rules",
                               {{"created", c.created},
                                {"updated", c.updated},
                                {"unchanged", c.unchanged},
                                {"deleted", c.deleted}}}});
}

json::array ChangesJson(const std::vector<FleetChange>& changes) {
  json::array out;
  for (const auto& c : changes) {
    json::array fields;
    for (const auto& f : c.fields) {
      fields.push_back(json::object{{"field", f.field}, {"from", f.from}, {"to", f.to}});
    }
    out.push_back(json::object{
        {"kind", c.kind}, {"name", c.name}, {"action", c.action}, {"fields", std::move(fields)}});
  }
  return out;
}

// What --prune deletes, checked before anything changes: no pool with nodes (the registry
// refuses those), queued or running jobs; the whole fleet's to see, so a scoped token may not.
Result<PrunePlan> PlanPrune(ApiContext& ctx, const Principal& who, const FleetSpec& spec) {
  GF_TRY(RequireFleetWide(who));
  PrunePlan plan;
  GF_TRY_ASSIGN(plan, ctx.fleet.PlanPrune(spec));
  GF_TRY(RequirePoolsIdle(ctx, plan.pools));
  return plan;
}

// The YAML documents of a file, split at its "---" lines: each is the file's text with the
// other documents' lines left blank, so that an error names the file's own line. A document of
// nothing but blank lines and comments is dropped.
std::vector<std::string> Documents(const std::string& text) {
  std::vector<std::string> lines;
  for (size_t at = 0; at <= text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  std::vector<std::string> out;
  size_t first = 0;
  auto take = [&](size_t from, size_t to) {
    std::string doc(from, '\n');
    bool content = false;
    for (size_t i = from; i < to; ++i) {
      const std::string& l = lines[i];
      const size_t c = l.find_first_not_of(" \t\r");
      content = content || (c != std::string::npos && l[c] != '#');
      doc += l + "\n";
    }
    if (content) out.push_back(std::move(doc));
  };
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& l = lines[i];
    if (l.rfind("---", 0) == 0 && l.find_first_not_of(" \t\r", 3) == std::string::npos) {
      take(first, i);
      first = i + 1;
    }
  }
  take(first, lines.size());
  return out;
}

// A channel of the file, checked as POST /api/v1/channels checks one; errors name the file,
// its line and the entry.
Result<Channel> FileChannel(ApiContext& ctx, const ChannelEntry& e, size_t i,
                            const std::string& filename) {
  boost::system::error_code ec;
  json::value v = json::parse(e.json, ec);
  auto parsed = v.is_object()
                    ? ChannelFromJson(ctx, v.as_object())
                    : Result<Channel>(MakeError(ErrorCode::kInvalidArgument, "must be a mapping"));
  if (!parsed.ok()) {
    return MakeError(ErrorCode::kInvalidArgument, filename + ":" + std::to_string(e.line) +
                                                      ": channels[" + std::to_string(i) +
                                                      "]: " + parsed.error().message);
  }
  return parsed;
}

// A channel as the file writes it: the API's view without `signed`, empty route and grouping
// left out.
std::string ChannelFileJson(const Channel& c) {
  const json::object api = ChannelJson(c);
  json::object o{{"name", c.name}, {"type", c.type}, {"url", c.url}};
  for (const char* key : {"matchers", "group_by"}) {
    if (!api.at(key).as_array().empty()) o[key] = api.at(key);
  }
  return JsonText(o);
}

// What the file's channels change: created, updated (the secret kept unless the file gives
// one) and, with prune, deleted (the store's that the file does not name).
struct ChannelPlan {
  std::vector<Channel> create, update;
  std::vector<std::string> remove;
  int unchanged = 0;
  std::map<std::string, std::string> stored;  // name -> the stored channel's file form
};

Result<ChannelPlan> PlanChannels(ApiContext& ctx, const std::vector<ChannelEntry>& entries,
                                 const std::string& filename, bool prune) {
  std::map<std::string, Channel> have;
  std::vector<Channel> stored;
  GF_TRY_ASSIGN(stored, ctx.store.alerting->ListChannels());
  ChannelPlan plan;
  for (auto& c : stored) {
    plan.stored[c.name] = ChannelFileJson(c);
    have.emplace(c.name, std::move(c));
  }
  std::set<std::string> named;
  for (size_t i = 0; i < entries.size(); ++i) {
    Channel c;
    GF_TRY_ASSIGN(c, FileChannel(ctx, entries[i], i, filename));
    named.insert(c.name);
    auto it = have.find(c.name);
    if (it == have.end()) {
      c.created_ms = ctx.clock->NowMs();
      plan.create.push_back(std::move(c));
      continue;
    }
    const bool secret_given = !c.secret.empty();
    if (!secret_given) c.secret = it->second.secret;
    c.created_ms = it->second.created_ms;
    if (!secret_given && ChannelFileJson(c) == plan.stored[c.name]) {
      ++plan.unchanged;
    } else {
      plan.update.push_back(std::move(c));
    }
  }
  if (prune) {
    for (const auto& [name, c] : have) {
      if (!named.count(name)) plan.remove.push_back(name);
    }
  }
  return plan;
}

// What the file's teams change, as the channels': created, updated and, with prune, deleted.
// Every channel a team names is the file's or stored (and not pruned); every team a cluster or
// pool of the file names is the file's or stored (and not pruned: a prune deletes the stored
// clusters and pools that the file leaves out, so none is left naming a pruned team).
struct TeamPlan {
  std::vector<Team> create, update;
  std::vector<std::string> remove;
  int unchanged = 0;
  std::map<std::string, std::string> stored;  // name -> the stored team's file form
};

Result<TeamPlan> PlanTeams(ApiContext& ctx, const FleetSpec& spec,
                           const std::optional<ChannelPlan>& channels, const std::string& filename,
                           bool prune) {
  if (!ctx.teams) return MakeError(ErrorCode::kUnavailable, "teams are not loaded");
  TeamPlan plan;
  std::set<std::string> teams;  // what the fleet will have
  for (const auto& t : ctx.teams->List()) plan.stored[t.name] = TeamJson(t, true);
  if (spec.teams) {
    std::set<std::string> named_channels;
    auto stored_channels = ctx.store.alerting->ListChannels();
    if (!stored_channels.ok()) return stored_channels.error();
    for (const auto& c : stored_channels.value()) named_channels.insert(c.name);
    if (channels) {
      for (const auto& c : channels->create) named_channels.insert(c.name);
      for (const auto& c : channels->remove) named_channels.erase(c);
    }
    for (size_t i = 0; i < spec.teams->size(); ++i) {
      const Team& t = (*spec.teams)[i];
      for (size_t j = 0; j < t.channels.size(); ++j) {
        if (!named_channels.count(t.channels[j])) {
          return MakeError(ErrorCode::kInvalidArgument,
                           filename + ": teams[" + std::to_string(i) + "].channels[" +
                               std::to_string(j) + "]: no channel '" + t.channels[j] + "'");
        }
      }
      teams.insert(t.name);
      auto it = plan.stored.find(t.name);
      if (it == plan.stored.end()) {
        plan.create.push_back(t);
      } else if (it->second == TeamJson(t, true)) {
        ++plan.unchanged;
      } else {
        plan.update.push_back(t);
      }
    }
  }
  for (const auto& [name, doc] : plan.stored) {
    if (!spec.teams || !prune || teams.count(name)) {
      teams.insert(name);
    } else {
      plan.remove.push_back(name);
    }
  }
  auto known = [&](const std::string& team, const std::string& what) -> Status {
    if (team.empty() || teams.count(team)) return {};
    return MakeError(ErrorCode::kInvalidArgument,
                     filename + ": " + what + ": team: no team '" + team +
                         "' (add it to the file's teams, or gpufleet teams create " + team + ")");
  };
  for (const auto& c : spec.clusters) GF_TRY(known(c.team, "cluster " + c.name));
  for (const auto& p : spec.pools) GF_TRY(known(p.team, "pool " + p.name));
  return plan;
}

std::vector<FleetChange> TeamChanges(const TeamPlan& plan) {
  auto before = [&](const std::string& name) {
    auto it = plan.stored.find(name);
    return it == plan.stored.end() ? std::string() : it->second;
  };
  std::vector<FleetChange> out;
  for (const auto& t : plan.create) {
    out.push_back({"team", t.name, "create", DiffJson("", TeamJson(t, true))});
  }
  for (const auto& t : plan.update) {
    out.push_back({"team", t.name, "update", DiffJson(before(t.name), TeamJson(t, true))});
  }
  for (const auto& name : plan.remove) {
    out.push_back({"team", name, "delete", DiffJson(before(name), "")});
  }
  std::sort(out.begin(), out.end(),
            [](const FleetChange& a, const FleetChange& b) { return a.name < b.name; });
  return out;
}

// The plan's channels as diff entries, by name.
std::vector<FleetChange> ChannelChanges(const ChannelPlan& plan) {
  auto before = [&](const std::string& name) {
    auto it = plan.stored.find(name);
    return it == plan.stored.end() ? std::string() : it->second;
  };
  std::vector<FleetChange> out;
  for (const auto& c : plan.create) {
    out.push_back({"channel", c.name, "create", DiffJson("", ChannelFileJson(c))});
  }
  for (const auto& c : plan.update) {
    auto fields = DiffJson(before(c.name), ChannelFileJson(c));
    if (fields.empty()) fields.push_back({"secret", "", "(the file's)"});
    out.push_back({"channel", c.name, "update", std::move(fields)});
  }
  for (const auto& name : plan.remove) {
    out.push_back({"channel", name, "delete", DiffJson(before(name), "")});
  }
  std::sort(out.begin(), out.end(),
            [](const FleetChange& a, const FleetChange& b) { return a.name < b.name; });
  return out;
}

// What applying `file` does to the user rules, by name: as Notifier::ApplyRuleFile, a rule of
// a group the file names that the file no longer has is deleted.
std::vector<FleetChange> RuleChanges(ApiContext& ctx, const alerting::RuleFile& file) {
  std::map<std::string, alerting::Rule> have;
  for (const auto& v : ctx.alerts->Rules()) {
    if (!v.rule.builtin) have.emplace(v.rule.name, v.rule);
  }
  std::set<std::string> groups(file.groups.begin(), file.groups.end()), named;
  std::vector<FleetChange> out;
  for (const auto& r : file.rules) {
    named.insert(r.name);
    auto it = have.find(r.name);
    const std::string after = alerting::RuleJson(r);
    if (it == have.end()) {
      out.push_back({"rule", r.name, "create", DiffJson("", after)});
    } else if (auto fields = DiffJson(alerting::RuleJson(it->second), after); !fields.empty()) {
      out.push_back({"rule", r.name, "update", std::move(fields)});
    }
  }
  for (const auto& [name, r] : have) {
    if (groups.count(r.group) && !named.count(name)) {
      out.push_back({"rule", name, "delete", DiffJson(alerting::RuleJson(r), "")});
    }
  }
  std::sort(out.begin(), out.end(),
            [](const FleetChange& a, const FleetChange& b) { return a.name < b.name; });
  return out;
}

// A fleet file's changes, checked before anything changes: the spec, its rule file, channels,
// teams and what --prune deletes.
struct ApplyPlan {
  std::string filename;
  bool dry_run = false, prune = false;
  FleetSpec spec;
  std::optional<alerting::RuleFile> rules;
  std::optional<ChannelPlan> channels;
  TeamPlan teams;
  PrunePlan deletes;
};

Error Denied(const Principal& who, const std::string& what) {
  return MakeError(ErrorCode::kPermissionDenied, "token '" + who.name + "' may not change " + what);
}

Status CheckApply(ApiContext& ctx, const Principal& who, const std::string& rules_doc,
                  ApplyPlan& p) {
  // The rule file and the channels, checked before anything changes: both are the whole
  // fleet's, and channels an admin's.
  if (!rules_doc.empty()) {
    if (!ctx.alerts) return MakeError(ErrorCode::kUnavailable, "alerting is not running");
    GF_TRY(RequireFleetWide(who));
    auto file = alerting::ParseRuleFile(rules_doc, p.filename);
    if (!file.ok()) return file.error();
    p.rules = std::move(file).value();
  }
  const bool removes = p.prune || p.dry_run;  // the diff shows what --prune would delete
  if (p.spec.channels) {
    if (who.role < Role::kAdmin) {
      return Denied(who, "alert channels: the file's channels need an admin token");
    }
    GF_TRY(RequireFleetWide(who));
    auto plan = PlanChannels(ctx, *p.spec.channels, p.filename, removes);
    if (!plan.ok()) return plan.error();
    p.channels = std::move(plan).value();
  }
  // Teams: the file's need an admin's fleet-wide token, as channels do; the teams clusters and
  // pools name must be known either way.
  if (p.spec.teams) {
    if (who.role < Role::kAdmin) return Denied(who, "teams: the file's teams need an admin token");
    GF_TRY(RequireFleetWide(who));
  }
  auto teams = PlanTeams(ctx, p.spec, p.channels, p.filename, removes);
  if (!teams.ok()) return teams.error();
  p.teams = std::move(teams).value();
  for (const auto& c : p.spec.clusters) {
    if (!who.CanSeeCluster(c.name)) return Denied(who, "cluster '" + c.name + "'");
  }
  GF_TRY(ScopeFilePrograms(ctx, who, p.spec.clusters, p.spec.scaling));
  GF_TRY(slurm::CheckClients(p.spec.clusters, p.filename));  // a Slurm cluster's clients
  if (!p.spec.scaling.empty() && !ctx.scaling) {  // scaling policies, before anything changes
    return MakeError(ErrorCode::kUnavailable, "autoscaling is not running: no scaling blocks");
  }
  for (const auto& sc : p.spec.scaling) {
    if (auto s = ctx.scaling->Check(sc); !s.ok()) {
      return MakeError(ErrorCode::kInvalidArgument,
                       p.filename + ": pool " + sc.pool + ": scaling." + s.error().message);
    }
  }
  if (p.prune) {
    auto planned = PlanPrune(ctx, who, p.spec);
    if (!planned.ok()) return planned.error();
    p.deletes = std::move(planned.value());
  }
  return {};
}

Response DryRun(ApiContext& ctx, const ApplyPlan& p) {
  auto changes = ctx.fleet.Diff(p.spec);
  if (!changes.ok()) return ErrorResponse(changes.error());
  if (ctx.scaling) {
    std::vector<PoolScaling> have;
    for (auto& pool : ctx.scaling->Pools()) have.push_back(std::move(pool.scaling));
    for (auto& c : DiffScaling(have, p.spec)) changes->push_back(std::move(c));
  }
  if (p.channels) {
    for (auto& c : ChannelChanges(*p.channels)) changes->push_back(std::move(c));
  }
  for (auto& c : TeamChanges(p.teams)) changes->push_back(std::move(c));
  if (p.rules) {
    for (auto& c : RuleChanges(ctx, *p.rules)) changes->push_back(std::move(c));
  }
  return ObjectResponse(200, {{"dry_run", true},
                              {"clusters", p.spec.clusters.size()},
                              {"pools", p.spec.pools.size()},
                              {"scaling", p.spec.scaling.size()},
                              {"changes", ChangesJson(changes.value())}});
}

json::object Counts(size_t created, size_t updated, int unchanged,
                    const std::vector<std::string>& deleted) {
  return {{"created", created},
          {"updated", updated},
          {"unchanged", unchanged},
          {"deleted", json::value_from(deleted)}};
}

// Channels and teams first (the teams name channels, clusters and pools name teams), then the
// clusters and pools, the scaling policies, and what the file no longer has.
Result<json::object> Carry(ApiContext& ctx, const Principal& who, const ApplyPlan& p) {
  json::object reply;
  if (p.channels) {
    for (const auto& c : p.channels->create) GF_TRY(ctx.store.alerting->CreateChannel(c));
    for (const auto& c : p.channels->update) GF_TRY(ctx.store.alerting->UpdateChannel(c));
  }
  for (const auto& t : p.teams.create) GF_TRY(ctx.teams->Create(t));
  for (const auto& t : p.teams.update) GF_TRY(ctx.teams->Replace(t));
  auto counts = ctx.fleet.Apply(p.spec);
  if (!counts.ok()) return counts.error();
  GF_TRY(ctx.fleet.Prune(p.deletes));
  for (const auto& pool : p.deletes.pools) {
    if (ctx.scaling) (void)ctx.scaling->DeletePolicy(pool, who.name);  // none: fine
  }
  int set = 0, unchanged = 0;
  for (const auto& sc : p.spec.scaling) {
    bool changed = false;
    GF_TRY(ctx.scaling->SetPolicy(sc, who.name, &changed));
    ++(changed ? set : unchanged);
  }
  for (const auto& name : p.teams.remove) GF_TRY(ctx.teams->Delete(name));
  if (p.spec.teams) {
    reply["teams"] =
        Counts(p.teams.create.size(), p.teams.update.size(), p.teams.unchanged, p.teams.remove);
  }
  if (p.channels) {
    for (const auto& name : p.channels->remove) GF_TRY(ctx.store.alerting->DeleteChannel(name));
    reply["channels"] = Counts(p.channels->create.size(), p.channels->update.size(),
                               p.channels->unchanged, p.channels->remove);
  }
  if (p.rules) {
    auto applied = ctx.alerts->ApplyRuleFile(*p.rules);
    if (!applied.ok()) return applied.error();
    const auto& a = applied.value();
    reply["rules"] = {{"created", a.created},
                      {"updated", a.updated},
                      {"unchanged", a.unchanged},
                      {"deleted", a.deleted}};
  }
  const auto& c = counts.value();
  reply["clusters"] = {{"created", c.clusters_created},
                       {"updated", c.clusters_updated},
                       {"unchanged", c.clusters_unchanged}};
  reply["pools"] = {
      {"created", c.pools_created}, {"updated", c.pools_updated}, {"unchanged", c.pools_unchanged}};
  reply["scaling"] = {{"set", set}, {"unchanged", unchanged}};
  reply["deleted"] = {{"clusters", json::value_from(p.deletes.clusters)},
                      {"pools", json::value_from(p.deletes.pools)}};
  return reply;
}

bool Flag(const Request& req, const char* name) {
  auto it = req.query.find(name);
  return it != req.query.end() && (it->second == "true" || it->second == "1");
}

Response ApplyFile(ApiContext& ctx, const Request& req, const Principal& who, ApplyPlan& p) {
  if (req.body.empty()) {
    return ErrorResponse(
        MakeError(ErrorCode::kInvalidArgument, "empty body: send a fleet YAML file"));
  }
  // A fleet document, a rule file, or one of each.
  std::string fleet_doc, rules_doc;
  for (auto& d : Documents(req.body)) {
    std::string& slot = alerting::IsRuleFile(d) ? rules_doc : fleet_doc;
    if (!slot.empty()) {
      return ErrorResponse(
          MakeError(ErrorCode::kInvalidArgument,
                    p.filename + ": one fleet document and one rule file at most, split by ---"));
    }
    slot = std::move(d);
  }
  if (fleet_doc.empty() && rules_doc.empty()) {
    return ErrorResponse(
        MakeError(ErrorCode::kInvalidArgument, p.filename + ": no YAML document in the file"));
  }
  if (fleet_doc.empty()) return ApplyRules(ctx, who, rules_doc, p.filename, p.dry_run);
  auto spec = ParseFleetSpec(fleet_doc, p.filename, *ctx.catalog);
  if (!spec.ok()) return ErrorResponse(spec.error());
  p.spec = std::move(spec).value();
  if (auto s = CheckApply(ctx, who, rules_doc, p); !s.ok()) return ErrorResponse(s.error());
  if (p.dry_run) return DryRun(ctx, p);
  auto reply = Carry(ctx, who, p);
  if (!reply.ok()) return ErrorResponse(reply.error());
  return ObjectResponse(200, reply.value());
}

// POST /api/v1/apply
Response PostApply(ApiContext& ctx, const Request& req, const Principal& who) {
  ApplyPlan p;
  p.filename = "request";
  if (auto it = req.query.find("filename"); it != req.query.end() && !it->second.empty()) {
    p.filename = it->second;
  }
  p.dry_run = Flag(req, "dry_run");
  p.prune = Flag(req, "prune");
  Response r = ApplyFile(ctx, req, who, p);
  r.audit_target = "fleet/" + p.filename;
  if (r.status == 200) r.audit_after = r.body;
  return r;
}

// GET /api/v1/export
Response GetExport(ApiContext& ctx, const Request& req, const Principal& who) {
  std::string format = "fleet";
  if (auto f = req.query.find("format"); f != req.query.end() && !f->second.empty()) {
    format = f->second;
  }
  if (format != "fleet" && format != "ansible") {
    return ErrorResponse(MakeError(ErrorCode::kInvalidArgument,
                                   "format: '" + format + "' is not one of fleet, ansible"));
  }
  auto clusters = ctx.fleet.Clusters();
  if (!clusters.ok()) return ErrorResponse(clusters.error());
  auto pools = ctx.fleet.Pools();
  if (!pools.ok()) return ErrorResponse(pools.error());
  FleetSpec spec;
  for (auto& c : clusters.value()) {
    if (who.CanSeeCluster(c.name)) spec.clusters.push_back(std::move(c));
  }
  std::map<std::string, PoolScaling> policies;
  if (ctx.scaling) {
    for (auto& s : ctx.scaling->Pools()) policies[s.scaling.pool] = std::move(s.scaling);
  }
  for (auto& p : pools.value()) {
    if (!who.CanSeeCluster(p.cluster)) continue;
    if (auto it = policies.find(p.name); it != policies.end()) spec.scaling.push_back(it->second);
    spec.pools.push_back(std::move(p));
  }
  Response r;
  r.content_type = "application/yaml";
  if (format == "ansible") {
    std::vector<Node> nodes;
    for (auto& n : ctx.fleet.Nodes({})) {
      if (who.CanSeeCluster(n.cluster)) nodes.push_back(std::move(n));
    }
    r.body = WriteAnsibleInventory(spec, nodes);
  } else {
    // Channels and rules are the whole fleet's: a fleet-wide token's export has them.
    std::vector<alerting::Rule> rules;
    if (who.clusters.empty()) {
      if (ctx.teams) {
        auto teams = ctx.teams->List();
        if (!teams.empty()) spec.teams = std::move(teams);
      }
      auto stored = ctx.store.alerting->ListChannels();
      if (!stored.ok()) return ErrorResponse(stored.error());
      if (!stored->empty()) spec.channels.emplace();
      for (const auto& c : stored.value()) {
        spec.channels->push_back({c.name, ChannelFileJson(c), 0});
      }
      if (ctx.alerts) {
        for (const auto& v : ctx.alerts->Rules()) {
          if (!v.rule.builtin) rules.push_back(v.rule);
        }
      }
    }
    r.body = WriteFleetSpec(spec);
    if (!rules.empty()) r.body += "---\n" + alerting::WriteRuleFile(rules);
  }
  return r;
}

}  // namespace

void AddApplyRoutes(Router& router, ApiContext& ctx) {
  router.Add("POST", "/api/v1/apply", Role::kOperator,
             [&ctx](const Request& req, const Principal& who) { return PostApply(ctx, req, who); });
  router.TakesYaml();
  router.Scoped(Scope::kClusters);  // a fleet or rule file, as YAML

  router.Add("GET", "/api/v1/export", Role::kViewer,
             [&ctx](const Request& req, const Principal& who) { return GetExport(ctx, req, who); });
  router.Scoped(Scope::kClusters);
}

}  // namespace gpufleet::api
