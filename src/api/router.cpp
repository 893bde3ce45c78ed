#include <algorithm>

#include "api/http.h"
#include "common/json_text.h"
#include "common/strings.h"
#include "common/utf8.h"
#include "model/json.h"

namespace gpufleet::api {

bool Principal::CanSeeCluster(const std::string& cluster) const {
  return clusters.empty() || std::find(clusters.begin(), clusters.end(), cluster) != clusters.end();
}

std::string_view ToString(Scope scope) {
  switch (scope) {
    case Scope::kFleet:
      return "fleet";
    case Scope::kClusters:
      return "clusters";
    case Scope::kAny:
      return "any";
    case Scope::kUndeclared:
      break;
  }
  return "undeclared";
}

Response JsonResponse(int status, std::string body) {
  Response r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

Response ErrorResponse(const Error& error) {
  // A message may quote the request (a path's name, a query's value): a reply must be JSON.
  boost::json::object e{{"code", ErrorCodeName(error.code)}, {"message", ToUtf8(error.message)}};
  return JsonResponse(HttpStatus(error.code), JsonText(boost::json::object{{"error", e}}));
}

void Router::Add(std::string method, std::string pattern, Role min_role, Handler handler,
                 bool public_route) {
  routes_.push_back(Route{std::move(method), pattern, Split(pattern, '/'), min_role,
                          std::move(handler), public_route});
}

std::vector<Router::Entry> Router::Entries() const {
  std::vector<Entry> out;
  for (const auto& r : routes_) {
    out.push_back({r.method, r.pattern, r.min_role, r.public_route, r.scope});
  }
  return out;
}

void Router::AddSlow(std::string method, std::string pattern, Role min_role, Handler handler) {
  Add(std::move(method), std::move(pattern), min_role, std::move(handler));
  routes_.back().slow = true;
}

Router::Match Router::Find(const std::string& method, const std::string& path) const {
  Match m;
  auto segments = Split(path, '/');
  for (const auto& r : routes_) {
    if (r.segments.size() != segments.size()) continue;
    std::map<std::string, std::string> params;
    bool ok = true;
    for (size_t i = 0; i < segments.size() && ok; ++i) {
      const auto& want = r.segments[i];
      if (want.size() > 2 && want.front() == '{' && want.back() == '}') {
        if (segments[i].empty()) ok = false;
        params[want.substr(1, want.size() - 2)] = segments[i];
      } else {
        ok = want == segments[i];
      }
    }
    if (!ok) continue;
    m.path_known = true;
    if (r.method != method) continue;
    m.handler = &r.handler;
    m.min_role = r.min_role;
    m.public_route = r.public_route;
    m.slow = r.slow;
    m.raw_body = r.raw_body;
    m.scope = r.scope;
    m.object = r.object;
    m.object_param = r.object_param;
    m.pattern = r.pattern;
    m.params = std::move(params);
    return m;
  }
  return m;
}

}  // namespace gpufleet::api
