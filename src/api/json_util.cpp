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

}  // namespace gpufleet::api
