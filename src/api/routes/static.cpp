// The dashboard's files, built into the binary (web/), so it works with no internet.

#include "api/context.h"

namespace gpufleet {
namespace embedded {
std::string_view web_index();
}

namespace api {

void AddStaticRoutes(Router& router, ApiContext&) {
  router.Add(
      "GET", "/", Role::kViewer,
      [](const Request&, const Principal&) {
        Response r;
        r.content_type = "text/html; charset=utf-8";
        r.body = std::string(embedded::web_index());
        return r;
      },
      /*public_route=*/true);
}

}  // namespace api
}  // namespace gpufleet
