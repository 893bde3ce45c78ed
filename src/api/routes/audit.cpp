// GET /api/v1/audit: the audit log, newest first (admin only). ?before=ID pages backwards.

#include "api/json_util.h"
#include "model/json.h"

namespace json = boost::json;

namespace gpufleet::api {

void AddAuditRoutes(Router& router, ApiContext& ctx) {
  router.Add("GET", "/api/v1/audit", Role::kAdmin, [&ctx](const Request& req, const Principal&) {
    auto page = ParsePage(req);
    if (!page.ok()) return ErrorResponse(page.error());
    int64_t before = 0;
    if (auto it = req.query.find("before"); it != req.query.end()) {
      if (it->second.empty() || it->second.size() > 18 ||
          it->second.find_first_not_of("0123456789") != std::string::npos) {
        return ErrorResponse(
            MakeError(ErrorCode::kInvalidArgument, "'before' must be an audit id"));
      }
      before = std::stoll(it->second);
    }
    auto records = ctx.store.audit->ListAudit(before, static_cast<int>(page->limit));
    if (!records.ok()) return ErrorResponse(records.error());
    json::array items;
    for (const auto& r : records.value()) {
      json::object o{{"id", r.id},         {"time", FormatTime(r.time_ms)},
                     {"actor", r.actor},   {"action", r.action},
                     {"target", r.target}, {"status", r.status},
                     {"result", r.result}};
      boost::system::error_code ec;
      if (!r.before.empty()) o["before"] = json::parse(r.before, ec);
      if (!r.after.empty()) o["after"] = json::parse(r.after, ec);
      items.push_back(std::move(o));
    }
    return ListResponse(std::move(items), Page{page->limit, 0});
  });
}

}  // namespace gpufleet::api
