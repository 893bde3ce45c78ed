#pragma once
// JSON helpers for route handlers (internal to the api component).

#include <boost/json.hpp>

#include "api/context.h"
#include "common/strings.h"

namespace gpufleet::api {

// {"items": [...page...], "total": N, "limit": L, "offset": O}
Response ListResponse(boost::json::array all, const Page& page);
// The same reply when the caller built only the page's items, of `total`.
Response PageResponse(boost::json::array items, size_t total, const Page& page);
Response ObjectResponse(int status, const boost::json::object& o);
// 503 "alerting is not running": for routes that need ctx.alerts.
Response AlertingUnavailable();
// A request body may carry only these fields; anything else is a 400 naming it.
Status OnlyFields(const boost::json::object& o, std::initializer_list<std::string_view> allowed);

// A channel from the object POST /api/v1/channels takes ({name, type, url, secret, matchers,
// group_by}), checked, its secret sealed under the data directory's key; and the API's view of
// one (`signed` in place of the secret). Apply takes the fleet file's `channels:` through them.
Result<Channel> ChannelFromJson(ApiContext& ctx, const boost::json::object& body);
boost::json::object ChannelJson(const Channel& c);

// For replies written directly as text (10,000-item replies, where a JSON tree costs several
// times the writing): the shortest number that reads back the same, and an escaped string.
void AppendNumber(std::string& out, double v);
using ::gpufleet::AppendJsonString;  // common/strings.h

}  // namespace gpufleet::api
