#include "api/json_util.h"

#include <charconv>
#include <cstdio>

#include "common/json_fields.h"
#include "common/json_text.h"

namespace gpufleet::api {

Response ListResponse(boost::json::array all, const Page& page) {
  boost::json::array items;
  size_t total = all.size();
  for (size_t i = page.offset; i < total && items.size() < page.limit; ++i) {
    items.push_back(std::move(all[i]));
  }
  return PageResponse(std::move(items), total, page);
}

Response PageResponse(boost::json::array items, size_t total, const Page& page) {
  return JsonResponse(200, JsonText(boost::json::object{{"items", std::move(items)},
                                                        {"total", total},
                                                        {"limit", page.limit},
                                                        {"offset", page.offset}}));
}

Response ObjectResponse(int status, const boost::json::object& o) {
  return JsonResponse(status, JsonText(o));
}

Response AlertingUnavailable() {
  return ErrorResponse(MakeError(ErrorCode::kUnavailable, "alerting is not running"));
}

Status OnlyFields(const boost::json::object& o, std::initializer_list<std::string_view> allowed) {
  return JsonFields(o).Only(allowed);
}

// The shortest text that reads back as the same double ("16.911", not "16.911000000000001").
void AppendNumber(std::string& out, double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, ec == std::errc() ? end : buf);
}

}  // namespace gpufleet::api
