// Alerts and where they go: GET /api/v1/alerts, and the delivery channels (POST, GET and
// DELETE /api/v1/channels) with each channel's outbox.

#include <algorithm>

#include "alerting/silence.h"
#include "api/json_util.h"
#include "api/scope.h"
#include "common/crypto.h"
#include "common/json_text.h"
#include "common/strings.h"
#include "common/url.h"
#include "model/json.h"

namespace json = boost::json;

namespace gpufleet::api {
namespace {

json::array GroupByJson(const std::string& group_by) {
  json::array out;
  for (const auto& l : Split(group_by, ',')) {
    if (!l.empty()) out.push_back(json::string(l));
  }
  return out;
}

}  // namespace

Result<Channel> ChannelFromJson(ApiContext& ctx, const json::object& body) {
  GF_TRY(OnlyFields(body, {"name", "type", "url", "secret", "matchers", "group_by"}));
  Channel c;
  GF_TRY_ASSIGN(c.name, GetString(body, "name", std::nullopt));
  GF_TRY_ASSIGN(c.type, GetString(body, "type", std::nullopt));
  GF_TRY_ASSIGN(c.url, GetString(body, "url", std::nullopt));
  std::string secret;
  GF_TRY_ASSIGN(secret, GetString(body, "secret", std::string()));
  // Sealed at rest (AES-256-GCM under secret.key): a copied database discloses nothing.
  c.secret = secret.empty() || ctx.secret_key.empty() ? secret : SealSecret(ctx.secret_key, secret);
  auto* m = body.if_contains("matchers");
  if (m && !m->is_null() && !(m->is_array() && m->as_array().empty())) {
    // The route: only alerts these match go to the channel.
    std::vector<alerting::Matcher> matchers;
    GF_TRY_ASSIGN(matchers, alerting::ParseMatchers(JsonText(*m)));
    c.matchers = alerting::MatchersJson(matchers);
  }
  if (auto* g = body.if_contains("group_by"); g && !g->is_null()) {
    const Error bad =
        MakeError(ErrorCode::kInvalidArgument, "'group_by' must be a list of label names");
    if (!g->is_array()) return bad;
    for (const auto& l : g->as_array()) {
      std::string name = l.is_string() ? std::string(l.as_string()) : "";
      bool ok = !name.empty() && std::all_of(name.begin(), name.end(), [](char ch) {
        return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_';
      });
      if (!ok) return bad;
      c.group_by += (c.group_by.empty() ? "" : ",") + name;
    }
  }
  if (!IsValidName(c.name)) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "'name' must be lower-case letters, digits, '-' or '.', at most 63");
  }
  if (c.type != "alertmanager" && c.type != "webhook") {
    return MakeError(ErrorCode::kInvalidArgument, "'type' must be alertmanager or webhook");
  }
  if (c.type == "alertmanager" && !c.group_by.empty()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "'group_by' is for webhooks: Alertmanager groups by its own route's group_by");
  }
  if (c.url.size() > 2048 || c.url.find("://") == std::string::npos) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "'url' must start with http:// or https:// and be at most 2048 bytes");
  }
  HttpUrl parsed;
  GF_TRY_ASSIGN(parsed, ParseHttpUrl(c.url, "80"));
  if (parsed.scheme != "http" && parsed.scheme != "https") {
    return MakeError(ErrorCode::kInvalidArgument, "'url': a receiver is http:// or https://");
  }
  while (!c.url.empty() && c.url.back() == '/') c.url.pop_back();
  return c;
}

json::object ChannelJson(const Channel& c) {
  boost::system::error_code ec;
  json::value route = c.matchers.empty() ? json::value(json::array()) : json::parse(c.matchers, ec);
  return {{"name", c.name},
          {"type", c.type},
          {"url", c.url},
          {"signed", !c.secret.empty()},
          {"matchers", std::move(route)},
          {"group_by", GroupByJson(c.group_by)}};
}

// The longest silence: a year and a day (a silence for good is a rule to change).
constexpr int64_t kMaxSilenceMs = 366LL * 86'400'000;

namespace {

// GET /api/v1/alerts
Response GetAlerts(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.alerts) return AlertingUnavailable();
  auto page = ParsePage(req);
  if (!page.ok()) return ErrorResponse(page.error());
  std::string state = req.Param("state");
  if (!state.empty() && state != "pending" && state != "firing" && state != "resolved") {
    return ErrorResponse(
        MakeError(ErrorCode::kInvalidArgument, "'state' must be pending, firing or resolved"));
  }
  std::string fingerprint = req.Param("fingerprint");
  auto silences = ctx.store.alerting->ListSilences();
  if (!silences.ok()) return ErrorResponse(silences.error());
  alerting::ActiveSilences active(silences.value(), ctx.clock->NowMs());
  json::array items;
  auto alerts = ctx.alerts->Alerts();
  std::sort(alerts.begin(), alerts.end(), alerting::ReadBefore);
  for (const auto& a : alerts) {
    if (!state.empty() && alerting::ToString(a.state) != state) continue;
    if (!fingerprint.empty() && a.fingerprint != fingerprint) continue;
    // A scoped token sees the alerts of its clusters, not the fleet's own.
    auto cluster = a.labels.find("cluster");
    if (!who.clusters.empty() &&
        (cluster == a.labels.end() || !who.CanSeeCluster(cluster->second))) {
      continue;
    }
    json::object o{
        {"fingerprint", a.fingerprint},         {"alertname", a.rule},
        {"state", alerting::ToString(a.state)}, {"labels", ToJson(a.labels)},
        {"annotations", ToJson(a.annotations)}, {"active_since", FormatTime(a.active_since_ms)}};
    o["fired_at"] = a.fired_ms ? json::value(FormatTime(a.fired_ms)) : nullptr;
    o["resolved_at"] = a.resolved_ms ? json::value(FormatTime(a.resolved_ms)) : nullptr;
    json::array silenced_by;
    for (const auto& id : active.Matching(a.labels)) silenced_by.push_back(json::value(id));
    o["silenced_by"] = std::move(silenced_by);
    items.push_back(std::move(o));
  }
  return ListResponse(std::move(items), page.value());
}

// POST /api/v1/channels
Response PostChannels(ApiContext& ctx, const Request& req, const Principal& who) {
  auto body = ParseObject(req.body);
  if (!body.ok()) return ErrorResponse(body.error());
  auto parsed = ChannelFromJson(ctx, body.value());
  if (!parsed.ok()) return ErrorResponse(parsed.error());
  Channel c = std::move(parsed).value();
  c.created_ms = ctx.clock->NowMs();
  if (auto s = ctx.store.alerting->CreateChannel(c); !s.ok()) return ErrorResponse(s.error());
  return ObjectResponse(201, ChannelJson(c));
}

// GET /api/v1/channels
Response GetChannels(ApiContext& ctx, const Request& req, const Principal& who) {
  auto page = ParsePage(req);
  if (!page.ok()) return ErrorResponse(page.error());
  auto channels = ctx.store.alerting->ListChannels();
  if (!channels.ok()) return ErrorResponse(channels.error());
  auto counts = ctx.store.alerting->OutboxCounts();
  if (!counts.ok()) return ErrorResponse(counts.error());
  json::array items;
  for (const auto& c : channels.value()) {
    json::object o = ChannelJson(c);
    o["created_at"] = FormatTime(c.created_ms);
    o["pending"] = 0;
    o["oldest_pending"] = nullptr;
    o["last_error"] = "";
    for (const auto& n : counts.value()) {
      if (n.channel != c.name) continue;
      o["pending"] = n.pending;
      o["oldest_pending"] = FormatTime(n.oldest_ms);
      o["last_error"] = n.last_error;
    }
    items.push_back(std::move(o));
  }
  return ListResponse(std::move(items), page.value());
}

// POST /api/v1/silences
Response PostSilences(ApiContext& ctx, const Request& req, const Principal& who) {
  auto body = ParseObject(req.body);
  if (!body.ok()) return ErrorResponse(body.error());
  if (auto s = OnlyFields(*body, {"matchers", "duration", "created_by", "comment"}); !s.ok()) {
    return ErrorResponse(s.error());
  }
  auto* m = body->if_contains("matchers");
  auto matchers = alerting::ParseMatchers(m ? JsonText(*m) : std::string("null"));
  if (!matchers.ok()) return ErrorResponse(matchers.error());
  // A scoped token's silence names one of its clusters.
  if (auto s = ScopeMatchers(who, matchers.value()); !s.ok()) {
    return ErrorResponse(s.error());
  }
  auto comment = GetString(*body, "comment", std::string());
  if (!comment.ok()) return ErrorResponse(comment.error());
  if (comment->empty()) {
    return ErrorResponse(MakeError(ErrorCode::kInvalidArgument, "'comment' is required: say why"));
  }
  // Who silenced is the token that did: a name given for someone else goes with
  // the comment.
  auto author = GetString(*body, "created_by", who.name);
  if (!author.ok()) return ErrorResponse(author.error());
  if (HasControl(*author) || author->size() > 128) {
    return ErrorResponse(
        MakeError(ErrorCode::kInvalidArgument,
                  "'created_by' must be at most 128 characters, none a control character"));
  }
  if (*author != who.name) *comment = "(for " + *author + ") " + *comment;
  auto duration = GetString(*body, "duration", std::string());
  if (!duration.ok()) return ErrorResponse(duration.error());
  int64_t ms = ParseDurationMs(duration.value());
  if (ms <= 0 || ms > kMaxSilenceMs) {
    return ErrorResponse(MakeError(ErrorCode::kInvalidArgument,
                                   "'duration' must be such as 30m, 2h or 7d, and at most 366d"));
  }
  int64_t now = ctx.clock->NowMs();
  SilenceRecord s;
  s.id = "sil-" + RandomHex(6);
  s.matchers = alerting::MatchersJson(matchers.value());
  s.created_by = who.name;
  s.comment = comment.value();
  s.created_ms = now;
  s.starts_ms = now;
  s.ends_ms = now + ms;
  if (auto st = ctx.store.alerting->CreateSilence(s); !st.ok()) return ErrorResponse(st.error());
  Response r = ObjectResponse(
      201,
      {{"id", s.id}, {"starts_at", FormatTime(s.starts_ms)}, {"ends_at", FormatTime(s.ends_ms)}});
  r.audit_target = "silence/" + s.id;
  r.audit_after = "{\"matchers\":" + s.matchers + "}";
  return r;
}

// GET /api/v1/silences
Response GetSilences(ApiContext& ctx, const Request& req, const Principal& who) {
  auto page = ParsePage(req);
  if (!page.ok()) return ErrorResponse(page.error());
  auto silences = ctx.store.alerting->ListSilences();
  if (!silences.ok()) return ErrorResponse(silences.error());
  int64_t now = ctx.clock->NowMs();
  json::array items;
  for (const auto& s : silences.value()) {
    if (!SilenceInScope(who, s.matchers)) continue;
    const char* state = s.ends_ms <= now ? "expired" : s.starts_ms > now ? "pending" : "active";
    boost::system::error_code ec;
    json::value matchers = json::parse(s.matchers, ec);
    items.push_back(json::object{{"id", s.id},
                                 {"state", state},
                                 {"matchers", std::move(matchers)},
                                 {"starts_at", FormatTime(s.starts_ms)},
                                 {"ends_at", FormatTime(s.ends_ms)},
                                 {"created_by", s.created_by},
                                 {"comment", s.comment}});
  }
  return ListResponse(std::move(items), page.value());
}

// DELETE /api/v1/silences/{id}
Response DeleteSilencesId(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!who.clusters.empty()) {
    auto silences = ctx.store.alerting->ListSilences();
    if (!silences.ok()) return ErrorResponse(silences.error());
    auto it = std::find_if(silences->begin(), silences->end(),
                           [&](const auto& s) { return s.id == req.params.at("id"); });
    if (it == silences->end() || !SilenceInScope(who, it->matchers)) {
      return ErrorResponse(MakeError(ErrorCode::kNotFound,
                                     "no silence '" + Printable(req.params.at("id"), 80) + "'"));
    }
  }
  if (auto s = ctx.store.alerting->ExpireSilence(req.params.at("id"), ctx.clock->NowMs());
      !s.ok()) {
    return ErrorResponse(s.error());
  }
  return ObjectResponse(200, {{"expired", req.params.at("id")}});
}

// DELETE /api/v1/channels/{name}
Response DeleteChannelsName(ApiContext& ctx, const Request& req, const Principal& who) {
  const std::string& name = req.params.at("name");
  if (ctx.teams) {
    for (const auto& [team, channels] : ctx.teams->Channels()) {
      if (std::find(channels.begin(), channels.end(), name) != channels.end()) {
        return ErrorResponse(
            MakeError(ErrorCode::kConflict, "team '" + team + "' sends its alerts to channel '" +
                                                name + "': take it out of the team first"));
      }
    }
  }
  if (auto s = ctx.store.alerting->DeleteChannel(name); !s.ok()) {
    return ErrorResponse(s.error());
  }
  return ObjectResponse(200, {{"deleted", req.params.at("name")}});
}

}  // namespace

void AddAlertRoutes(Router& router, ApiContext& ctx) {
  router.Add("GET", "/api/v1/alerts", Role::kViewer,
             [&ctx](const Request& req, const Principal& who) { return GetAlerts(ctx, req, who); });
  router.Scoped(Scope::kClusters);

  router.Add(
      "POST", "/api/v1/channels", Role::kAdmin,
      [&ctx](const Request& req, const Principal& who) { return PostChannels(ctx, req, who); });
  router.Scoped(Scope::kFleet);

  router.Add(
      "GET", "/api/v1/channels", Role::kViewer,
      [&ctx](const Request& req, const Principal& who) { return GetChannels(ctx, req, who); });
  router.Scoped(Scope::kFleet);  // webhook URLs and routes of every team

  router.Add(
      "POST", "/api/v1/silences", Role::kOperator,
      [&ctx](const Request& req, const Principal& who) { return PostSilences(ctx, req, who); });
  router.Scoped(Scope::kClusters);  // the matchers' cluster (ScopeMatchers)

  router.Add(
      "GET", "/api/v1/silences", Role::kViewer,
      [&ctx](const Request& req, const Principal& who) { return GetSilences(ctx, req, who); });
  router.Scoped(Scope::kClusters);

  router.Add(
      "DELETE", "/api/v1/silences/{id}", Role::kOperator,
      [&ctx](const Request& req, const Principal& who) { return DeleteSilencesId(ctx, req, who); });
  router.Scoped(Scope::kClusters);

  router.Add("DELETE", "/api/v1/channels/{name}", Role::kAdmin,
             [&ctx](const Request& req, const Principal& who) {
               return DeleteChannelsName(ctx, req, who);
             });
  router.Scoped(Scope::kFleet);
}

}  // namespace gpufleet::api
