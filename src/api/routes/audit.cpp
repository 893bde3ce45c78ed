// The audit log (admin only): GET /api/v1/audit, newest first or oldest first, filtered by
// actor, action, target, result and time, paged by id; GET /api/v1/audit/verify walks the hash
// chain; POST /api/v1/audit/prune deletes the oldest records, leaving a signed anchor.

#include "api/json_util.h"
#include "common/json_text.h"
#include "model/json.h"

namespace json = boost::json;

namespace gpufleet::api {
namespace {

Result<int64_t> IdParam(const Request& req, const char* key) {
  auto it = req.query.find(key);
  if (it == req.query.end()) return int64_t{0};
  if (it->second.empty() || it->second.size() > 18 ||
      it->second.find_first_not_of("0123456789") != std::string::npos) {
    return MakeError(ErrorCode::kInvalidArgument, std::string("'") + key + "' must be an audit id");
  }
  return static_cast<int64_t>(std::stoll(it->second));
}

Result<store::AuditFilter> Filter(const Request& req, int64_t now) {
  store::AuditFilter f;
  f.actor = req.Param("actor");
  f.action = req.Param("action");
  f.target = req.Param("target");
  f.result = req.Param("result");
  if (!f.result.empty() && f.result != "ok" && f.result != "error") {
    return MakeError(ErrorCode::kInvalidArgument, "'result' must be ok or error");
  }
  GF_TRY_ASSIGN(f.since_ms, TimeParam(req, "since", now, 0));
  GF_TRY_ASSIGN(f.until_ms, TimeParam(req, "until", now, 0));
  GF_TRY_ASSIGN(f.before_id, IdParam(req, "before"));
  GF_TRY_ASSIGN(f.after_id, IdParam(req, "after"));
  std::string order = req.Param("order");
  if (!order.empty() && order != "asc" && order != "desc") {
    return MakeError(ErrorCode::kInvalidArgument, "'order' must be asc or desc");
  }
  f.ascending = order == "asc";
  if (f.ascending && f.before_id) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "'before' pages a newest-first list; use 'after'");
  }
  if (!f.ascending && f.after_id) {
    return MakeError(ErrorCode::kInvalidArgument, "'after' pages an oldest-first list (order=asc)");
  }
  auto page = ParsePage(req);
  if (!page.ok()) return page.error();
  f.limit = static_cast<int>(page->limit);
  return f;
}

json::object RecordJson(const AuditRecord& r) {
  json::object o{{"id", r.id},         {"time", FormatTime(r.time_ms)},
                 {"actor", r.actor},   {"action", r.action},
                 {"target", r.target}, {"status", r.status},
                 {"result", r.result}, {"hash", r.hash}};
  boost::system::error_code ec;
  if (!r.before.empty()) o["before"] = json::parse(r.before, ec);
  if (!r.after.empty()) o["after"] = json::parse(r.after, ec);
  return o;
}

// GET /api/v1/audit
Response GetAudit(ApiContext& ctx, const Request& req, const Principal& who) {
  auto filter = Filter(req, ctx.clock->NowMs());
  if (!filter.ok()) return ErrorResponse(filter.error());
  auto records = ctx.store.audit->QueryAudit(filter.value());
  if (!records.ok()) return ErrorResponse(records.error());
  json::array items;
  for (const auto& r : records.value()) items.push_back(RecordJson(r));
  return ListResponse(std::move(items), Page{static_cast<size_t>(filter->limit), 0});
}

// GET /api/v1/audit/verify
Response GetAuditVerify(ApiContext& ctx, const Request& req, const Principal& who) {
  auto v = store::VerifyAudit(*ctx.store.audit, ctx.secret_key);
  if (!v.ok()) return ErrorResponse(v.error());
  json::object o{{"ok", v->ok},
                 {"verified", v->verified},
                 {"unchained", v->unchained},
                 {"anchor_id", v->anchor_id}};
  if (!v->ok) {
    o["first_bad_id"] = v->first_bad_id;
    o["problem"] = v->problem;
  }
  return ObjectResponse(200, o);
}

// POST /api/v1/audit/prune
Response PostAuditPrune(ApiContext& ctx, const Request& req, const Principal& who) {
  auto body = ParseObject(req.body);
  if (!body.ok()) return ErrorResponse(body.error());
  if (auto s = OnlyFields(body.value(), {"older_than"}); !s.ok()) {
    return ErrorResponse(s.error());
  }
  auto text = GetString(body.value(), "older_than");
  if (!text.ok()) return ErrorResponse(text.error());
  int64_t age = ParseDurationMs(text.value());
  if (age < 86'400'000) {
    return ErrorResponse(
        MakeError(ErrorCode::kInvalidArgument,
                  "'older_than' must be a duration of at least 1d, such as 90d or 400d"));
  }
  int64_t before = ctx.clock->NowMs() - age;
  auto pruned = ctx.store.audit->PruneAudit(before, ctx.secret_key);
  if (!pruned.ok()) return ErrorResponse(pruned.error());
  Response r = ObjectResponse(200, {{"pruned", pruned.value()}, {"before", FormatTime(before)}});
  r.audit_target = "audit";
  r.audit_after = JsonText(json::object{{"pruned", pruned.value()}});
  return r;
}

}  // namespace

void AddAuditRoutes(Router& router, ApiContext& ctx) {
  router.Add("GET", "/api/v1/audit", Role::kAdmin,
             [&ctx](const Request& req, const Principal& who) { return GetAudit(ctx, req, who); });
  router.Scoped(Scope::kFleet);

  router.Add(
      "GET", "/api/v1/audit/verify", Role::kAdmin,
      [&ctx](const Request& req, const Principal& who) { return GetAuditVerify(ctx, req, who); });
  router.Scoped(Scope::kFleet);

  router.Add(
      "POST", "/api/v1/audit/prune", Role::kAdmin,
      [&ctx](const Request& req, const Principal& who) { return PostAuditPrune(ctx, req, who); });
  router.Scoped(Scope::kFleet);
}

}  // namespace gpufleet::api
