// Join tokens (per pool, for agents) and API tokens (per person or system, with a role).
// Secrets are returned once, at creation; the store keeps only their SHA-256.

#include <algorithm>

#include "api/json_util.h"
#include "api/scope.h"
#include "common/crypto.h"
#include "common/json_text.h"
#include "common/strings.h"
#include "model/json.h"

namespace json = boost::json;

namespace gpufleet::api {
namespace {

Result<int64_t> Ttl(const json::object& o, const char* fallback) {
  std::string text;
  GF_TRY_ASSIGN(text, GetString(o, "ttl", std::string(fallback)));
  if (text == "0" || text == "never") return int64_t{0};
  int64_t ms = ParseDurationMs(text);
  if (ms <= 0) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "field 'ttl' must be a duration such as 30m, 24h or 7d (or 'never')");
  }
  return ms;
}

json::object JoinTokenJson(const JoinToken& t, int64_t now) {
  return {{"id", t.id},
          {"pool", t.pool},
          {"created_by", t.created_by},
          {"created_at", FormatTime(t.created_ms)},
          {"expires_at", FormatTime(t.expires_ms)},
          {"revoked", t.revoked},
          {"valid", !t.revoked && (t.expires_ms == 0 || t.expires_ms > now)},
          {"prefix", t.prefix}};
}

json::object ApiTokenJson(const ApiToken& t) {
  json::array clusters;
  for (const auto& c : t.clusters) clusters.push_back(json::value(c));
  return {{"id", t.id},
          {"name", t.name},
          {"role", ToString(t.role)},
          {"clusters", clusters},
          {"created_at", FormatTime(t.created_ms)},
          {"expires_at", FormatTime(t.expires_ms)},
          {"revoked", t.revoked},
          {"prefix", t.prefix},
          {"last_used_at", FormatTime(t.last_used_ms)},
          {"previous_valid_until", FormatTime(t.previous_expires_ms)}};
}

Result<ApiToken> ApiTokenFrom(const json::object& o, Clock& clock) {
  GF_TRY(OnlyFields(o, {"name", "role", "clusters", "ttl"}));
  ApiToken t;
  GF_TRY_ASSIGN(t.name, GetString(o, "name"));
  if (t.name.empty() || t.name.size() > 128 || HasControl(t.name)) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "field 'name' must be 1 to 128 characters, none of them a control character");
  }
  std::string role;
  GF_TRY_ASSIGN(role, GetString(o, "role"));
  auto parsed = ParseRole(role);
  if (!parsed) {
    return MakeError(ErrorCode::kInvalidArgument, "field 'role' must be viewer, operator or admin");
  }
  t.role = *parsed;
  if (auto it = o.find("clusters"); it != o.end()) {
    if (!it->value().is_array()) {
      return MakeError(ErrorCode::kInvalidArgument, "field 'clusters' must be a list of names");
    }
    for (const auto& c : it->value().as_array()) {
      if (!c.is_string()) {
        return MakeError(ErrorCode::kInvalidArgument, "field 'clusters' must be a list of names");
      }
      t.clusters.emplace_back(c.as_string());
    }
  }
  int64_t ttl = 0;
  GF_TRY_ASSIGN(ttl, Ttl(o, "never"));
  t.created_ms = clock.NowMs();
  t.expires_ms = ttl ? t.created_ms + ttl : 0;
  return t;
}

// A token that a scoped token may see and change: one limited to some of its own clusters (as
// the tokens it may create are). A fleet-wide token sees them all.
bool TokenInScope(const Principal& who, const ApiToken& t) {
  if (who.clusters.empty()) return true;
  return !t.clusters.empty() && std::all_of(t.clusters.begin(), t.clusters.end(),
                                            [&](const auto& c) { return who.CanSeeCluster(c); });
}

// The API token `id`, when `who` may see it; 404 as if it did not exist otherwise.
Status ApiTokenInScope(ApiContext& ctx, const Principal& who, const std::string& id) {
  if (who.clusters.empty()) return {};
  auto tokens = ctx.store.tokens->ListApiTokens();
  if (!tokens.ok()) return tokens.error();
  for (const auto& t : tokens.value()) {
    if (t.id == id && TokenInScope(who, t)) return {};
  }
  return MakeError(ErrorCode::kNotFound, "no API token '" + Printable(id, 80) + "'");
}

// The join token `id`, when its pool is in `who`'s clusters; 404 otherwise.
Status JoinTokenInScope(ApiContext& ctx, const Principal& who, const std::string& id) {
  if (who.clusters.empty()) return {};
  auto tokens = ctx.store.tokens->ListJoinTokens();
  if (!tokens.ok()) return tokens.error();
  for (const auto& t : tokens.value()) {
    if (t.id == id && ScopePool(ctx, who, t.pool).ok()) return {};
  }
  return MakeError(ErrorCode::kNotFound, "no join token '" + Printable(id, 80) + "'");
}

// POST /api/v1/join-tokens
Response PostJoinTokens(ApiContext& ctx, const Request& req, const Principal& who) {
  auto body = ParseObject(req.body);
  if (!body.ok()) return ErrorResponse(body.error());
  if (auto s = OnlyFields(body.value(), {"pool", "ttl"}); !s.ok()) return ErrorResponse(s.error());
  auto pool = GetString(body.value(), "pool");
  if (!pool.ok()) return ErrorResponse(pool.error());
  auto ttl = Ttl(body.value(), "24h");
  if (!ttl.ok()) return ErrorResponse(ttl.error());
  auto p = ctx.fleet.FindPool(pool.value());
  if (!p.ok()) {
    return ErrorResponse(
        MakeError(ErrorCode::kNotFound, "no pool '" + Printable(pool.value(), 80) + "'"));
  }
  if (auto s = ScopePool(ctx, who, pool.value()); !s.ok()) return ErrorResponse(s.error());
  auto issued = ctx.fleet.CreateJoinToken(pool.value(), ttl.value(), who.name);
  if (!issued.ok()) return ErrorResponse(issued.error());
  json::object o = JoinTokenJson(issued->token, ctx.clock->NowMs());
  Response r = ObjectResponse(201, [&] {
    json::object with = o;
    with["token"] = issued->secret;
    return with;
  }());
  r.audit_target = "join-token/" + issued->token.id;
  r.audit_after = JsonText(o);
  return r;
}

// GET /api/v1/join-tokens
Response GetJoinTokens(ApiContext& ctx, const Request& req, const Principal& who) {
  auto page = ParsePage(req);
  if (!page.ok()) return ErrorResponse(page.error());
  auto tokens = ctx.store.tokens->ListJoinTokens();
  if (!tokens.ok()) return ErrorResponse(tokens.error());
  json::array items;
  for (const auto& t : tokens.value()) {
    if (!ScopePool(ctx, who, t.pool).ok()) continue;
    items.push_back(JoinTokenJson(t, ctx.clock->NowMs()));
  }
  return ListResponse(std::move(items), page.value());
}

// DELETE /api/v1/join-tokens/{id}
Response DeleteJoinTokensId(ApiContext& ctx, const Request& req, const Principal& who) {
  const std::string& id = req.params.at("id");
  Response r = [&] {
    if (auto s = JoinTokenInScope(ctx, who, id); !s.ok()) {
      return ErrorResponse(s.error());
    }
    if (auto s = ctx.store.tokens->RevokeJoinToken(id); !s.ok()) return ErrorResponse(s.error());
    return ObjectResponse(200, {{"id", id}, {"revoked", true}});
  }();
  r.audit_target = "join-token/" + id;
  return r;
}

// POST /api/v1/api-tokens
Response PostApiTokens(ApiContext& ctx, const Request& req, const Principal& who) {
  auto body = ParseObject(req.body);
  if (!body.ok()) return ErrorResponse(body.error());
  auto token = ApiTokenFrom(body.value(), *ctx.clock);
  if (!token.ok()) return ErrorResponse(token.error());
  if (auto s = ScopeNewToken(who, token->role, token->clusters); !s.ok()) {
    return ErrorResponse(s.error());
  }
  std::string secret = "gfa_" + RandomHex(24);
  token->id = "tok-" + RandomHex(6);
  token->hash = Sha256Hex(secret);
  token->prefix = SecretPrefix(secret);
  if (auto s = ctx.store.tokens->CreateApiToken(token.value()); !s.ok())
    return ErrorResponse(s.error());
  json::object o = ApiTokenJson(token.value());
  json::object with = o;
  with["token"] = secret;
  Response r = ObjectResponse(201, with);
  r.audit_target = "api-token/" + token->id;
  r.audit_after = JsonText(o);
  return r;
}

// GET /api/v1/api-tokens
Response GetApiTokens(ApiContext& ctx, const Request& req, const Principal& who) {
  auto page = ParsePage(req);
  if (!page.ok()) return ErrorResponse(page.error());
  ctx.flush_token_use();  // so that last_used_at is up to date
  auto tokens = ctx.store.tokens->ListApiTokens();
  if (!tokens.ok()) return ErrorResponse(tokens.error());
  json::array items;
  for (const auto& t : tokens.value()) {
    if (TokenInScope(who, t)) items.push_back(ApiTokenJson(t));
  }
  return ListResponse(std::move(items), page.value());
}

// POST /api/v1/api-tokens/{id}/rotate
Response PostApiTokensIdRotate(ApiContext& ctx, const Request& req, const Principal& who) {
  const std::string& id = req.params.at("id");
  Response r = [&] {
    if (auto s = ApiTokenInScope(ctx, who, id); !s.ok()) {
      return ErrorResponse(s.error());
    }
    json::object o;
    if (!req.body.empty()) {
      auto body = ParseObject(req.body);
      if (!body.ok()) return ErrorResponse(body.error());
      o = std::move(body.value());
    }
    if (auto s = OnlyFields(o, {"grace"}); !s.ok()) return ErrorResponse(s.error());
    auto grace_text = GetString(o, "grace", std::string("1h"));
    if (!grace_text.ok()) return ErrorResponse(grace_text.error());
    int64_t grace = grace_text.value() == "0" ? 0 : ParseDurationMs(grace_text.value());
    if (grace < 0 || grace > 30 * 86'400'000LL) {
      return ErrorResponse(
          MakeError(ErrorCode::kInvalidArgument,
                    "field 'grace' must be a duration from 0s to 30d, such as 1h (default 1h)"));
    }
    std::string secret = "gfa_" + RandomHex(24);
    int64_t until = grace ? ctx.clock->NowMs() + grace : 0;
    if (auto s =
            ctx.store.tokens->RotateApiToken(id, Sha256Hex(secret), SecretPrefix(secret), until);
        !s.ok()) {
      return ErrorResponse(s.error());
    }
    auto rotated = ctx.store.tokens->FindApiToken(Sha256Hex(secret));
    if (!rotated.ok()) return ErrorResponse(rotated.error());
    json::object with = ApiTokenJson(rotated.value());
    Response done = ObjectResponse(200, with);
    done.audit_after = JsonText(with);
    with["token"] = secret;
    done.body = JsonText(with);
    return done;
  }();
  r.audit_target = "api-token/" + id;
  return r;
}

// DELETE /api/v1/api-tokens/{id}
Response DeleteApiTokensId(ApiContext& ctx, const Request& req, const Principal& who) {
  const std::string& id = req.params.at("id");
  Response r = [&] {
    if (auto s = ApiTokenInScope(ctx, who, id); !s.ok()) {
      return ErrorResponse(s.error());
    }
    if (auto s = ctx.store.tokens->RevokeApiToken(id); !s.ok()) return ErrorResponse(s.error());
    return ObjectResponse(200, {{"id", id}, {"revoked", true}});
  }();
  r.audit_target = "api-token/" + id;
  return r;
}

}  // namespace

void AddTokenRoutes(Router& router, ApiContext& ctx) {
  router.Add(
      "POST", "/api/v1/join-tokens", Role::kOperator,
      [&ctx](const Request& req, const Principal& who) { return PostJoinTokens(ctx, req, who); });
  router.Scoped(Scope::kClusters);  // the body's pool

  router.Add(
      "GET", "/api/v1/join-tokens", Role::kOperator,
      [&ctx](const Request& req, const Principal& who) { return GetJoinTokens(ctx, req, who); });
  router.Scoped(Scope::kClusters);

  router.Add("DELETE", "/api/v1/join-tokens/{id}", Role::kOperator,
             [&ctx](const Request& req, const Principal& who) {
               return DeleteJoinTokensId(ctx, req, who);
             });
  router.Scoped(Scope::kClusters);

  router.Add(
      "POST", "/api/v1/api-tokens", Role::kAdmin,
      [&ctx](const Request& req, const Principal& who) { return PostApiTokens(ctx, req, who); });
  router.Scoped(Scope::kClusters);  // the new token's role and clusters (ScopeNewToken)

  router.Add(
      "GET", "/api/v1/api-tokens", Role::kAdmin,
      [&ctx](const Request& req, const Principal& who) { return GetApiTokens(ctx, req, who); });
  router.Scoped(Scope::kClusters);

  router.Add("POST", "/api/v1/api-tokens/{id}/rotate", Role::kAdmin,
             [&ctx](const Request& req, const Principal& who) {
               return PostApiTokensIdRotate(ctx, req, who);
             });
  router.Scoped(Scope::kClusters);

  router.Add("DELETE", "/api/v1/api-tokens/{id}", Role::kAdmin,
             [&ctx](const Request& req, const Principal& who) {
               return DeleteApiTokensId(ctx, req, who);
             });
  router.Scoped(Scope::kClusters);
}

}  // namespace gpufleet::api
