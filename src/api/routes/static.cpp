// The dashboard's files, built into the binary from web/ (so it works with no internet): the
// page at /, its scripts, styles and the vendored chart library under /ui/.

#include <string_view>
#include <utility>
#include <vector>

#include "api/context.h"

namespace gpufleet {
namespace embedded {
const std::vector<std::pair<std::string_view, std::string_view>>& web_files();
}

namespace api {
namespace {

std::string_view ContentType(std::string_view name) {
  auto ends = [&](std::string_view ext) {
    return name.size() >= ext.size() && name.substr(name.size() - ext.size()) == ext;
  };
  if (ends(".html")) return "text/html; charset=utf-8";
  if (ends(".js")) return "text/javascript; charset=utf-8";
  if (ends(".css")) return "text/css; charset=utf-8";
  return "application/octet-stream";
}

Response File(std::string_view name) {
  for (const auto& [file, data] : embedded::web_files()) {
    if (file == name) {
      Response r;
      r.content_type = std::string(ContentType(file));
      r.body = std::string(data);
      return r;
    }
  }
  return ErrorResponse(
      MakeError(ErrorCode::kNotFound, "no dashboard file '" + std::string(name) + "'"));
}

}  // namespace

void AddStaticRoutes(Router& router, ApiContext&) {
  router.Add(
      "GET", "/", Role::kViewer,
      [](const Request&, const Principal&) { return File("index.html"); },
      /*public_route=*/true);
  router.Scoped(Scope::kAny);
  router.Add(
      "GET", "/ui/{file}", Role::kViewer,
      [](const Request& req, const Principal&) { return File(req.params.at("file")); },
      /*public_route=*/true);
  router.Scoped(Scope::kAny);
}

}  // namespace api
}  // namespace gpufleet
