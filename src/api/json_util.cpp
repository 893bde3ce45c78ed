#include "api/json_util.h"

namespace gpufleet::api {

Response ListResponse(boost::json::array all, const Page& page) {
  boost::json::array items;
  size_t total = all.size();
  for (size_t i = page.offset; i < total && items.size() < page.limit; ++i) {
    items.push_back(std::move(all[i]));
  }
  return JsonResponse(200, boost::json::serialize(boost::json::object{{"items", std::move(items)},
                                                                      {"total", total},
                                                                      {"limit", page.limit},
                                                                      {"offset", page.offset}}));
}

Response ObjectResponse(int status, const boost::json::object& o) {
  return JsonResponse(status, boost::json::serialize(o));
}

Response AlertingUnavailable() {
  return ErrorResponse(MakeError(ErrorCode::kUnavailable, "alerting is not running"));
}

Status OnlyFields(const boost::json::object& o, std::initializer_list<std::string_view> allowed) {
  for (const auto& kv : o) {
    bool ok = false;
    for (auto a : allowed) ok = ok || kv.key() == a;
    if (!ok) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "unknown field '" + std::string(kv.key()) + "'");
    }
  }
  return {};
}

}  // namespace gpufleet::api
