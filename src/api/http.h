#pragma once
// Transport-neutral HTTP request/response and the router. No Beast here: handlers and tests see
// only these types; server.cpp adapts them to Beast.

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"
#include "store/store.h"

namespace gpufleet::api {

struct Request {
  std::string method;                        // "GET"
  std::string path;                          // "/api/v1/nodes" (decoded, no query)
  std::map<std::string, std::string> query;  // the last value of each key
  std::vector<std::pair<std::string, std::string>> query_list;  // every one, in order (match[])
  std::map<std::string, std::string> params;  // from the route pattern, e.g. {name}
  std::string body;
  std::string content_type;
  std::string authorization;
  std::string remote;

  // A query parameter's value; "" when absent.
  std::string Param(std::string_view key) const {
    auto it = query.find(std::string(key));
    return it == query.end() ? std::string() : it->second;
  }
};

struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  // For the audit log of a mutating call: what it touched, and its JSON before and after.
  std::string audit_target;
  std::string audit_before;
  std::string audit_after;
  int64_t retry_after_s = 0;  // sent as Retry-After when set (429)
  // The leader's answer, handed on (AskLeader): the leader audited the call, so this
  // controller does not audit it again.
  bool from_leader = false;
  // A body too large to hold (an export): the server sends it chunked, calling this for each
  // next part until it gives an empty one. Each call should be short (a page of a store read):
  // it runs on the connection's thread, between the writes that wait for the client. An error
  // after the first part can only cut the answer short: the connection is closed.
  std::function<Result<std::string>()> more;
};

struct Principal {
  std::string name;  // token name, "anonymous" when none
  Role role = Role::kViewer;
  std::vector<std::string> clusters;  // empty: all clusters
  bool CanSeeCluster(const std::string& cluster) const;
};

Response ErrorResponse(const Error& error);
Response JsonResponse(int status, std::string body);

// A handler runs with the caller already authenticated and authorised for `min_role`.
using Handler = std::function<Response(const Request&, const Principal&)>;

// What a route touches, for the scope policy (a token limited to some clusters). Every route
// states it; the server applies it before the handler runs (scope.h says what each means).
enum class Scope {
  kUndeclared,  // treated as kFleet; the route walk fails on it
  kFleet,       // fleet-wide objects (tokens, audit, channels, rules, prices, compat, bulletins,
                // teams, the simulator): a token limited to some clusters is refused (403)
  kClusters,    // objects of clusters: the one the path names is checked by the server (404
                // when the token cannot see it), what a body or selector reaches by the
                // handler through the policy's checks, and lists show only the token's clusters
  kAny,         // nothing of any cluster (reference data, the caller itself): any token
};
// The path parameter that names a kClusters route's object, resolved to its cluster.
enum class ScopeObject { kNone, kNode, kPool, kCluster };
std::string_view ToString(Scope scope);

class Router {
 public:
  // pattern: "/api/v1/nodes/{name}/cordon"; `public_route` skips authentication.
  void Add(std::string method, std::string pattern, Role min_role, Handler handler,
           bool public_route = false);
  // A call that takes seconds (a tune's replays): the server runs it on its worker thread, so
  // that its I/O threads go on serving the other requests meanwhile.
  void AddSlow(std::string method, std::string pattern, Role min_role, Handler handler);
  // The route added last takes a YAML body (a fleet or rule file) whatever its Content-Type;
  // every other route's body must be a JSON object.
  void TakesYaml() { routes_.back().raw_body = true; }
  // The route added last takes CSV or JSON, by its Content-Type, and checks the body itself.
  void TakesCsv() { routes_.back().raw_body = true; }
  // The route added last takes a form body (application/x-www-form-urlencoded) and parses it.
  void TakesForm() { routes_.back().raw_body = true; }
  // The scope of the route added last, and the path parameter that names its object.
  void Scoped(Scope scope, ScopeObject object = ScopeObject::kNone, std::string param = "name") {
    routes_.back().scope = scope;
    routes_.back().object = object;
    routes_.back().object_param = std::move(param);
  }

  struct Match {
    const Handler* handler = nullptr;
    Role min_role = Role::kViewer;
    bool public_route = false;
    bool slow = false;      // AddSlow
    bool raw_body = false;  // TakesYaml, TakesCsv
    Scope scope = Scope::kUndeclared;
    ScopeObject object = ScopeObject::kNone;
    std::string object_param;
    std::map<std::string, std::string> params;
    bool path_known = false;  // some route has this path (for 405 vs 404)
    std::string pattern;      // the matched route, "/api/v1/nodes/{name}"
  };
  Match Find(const std::string& method, const std::string& path) const;

  // The table itself, for GET /api/v1/routes (and the test that calls every route).
  struct Entry {
    std::string method, pattern;
    Role min_role;
    bool public_route;
    Scope scope;
  };
  std::vector<Entry> Entries() const;

 private:
  struct Route {
    std::string method;
    std::string pattern;
    std::vector<std::string> segments;
    Role min_role;
    Handler handler;
    bool public_route;
    bool slow = false;
    bool raw_body = false;
    Scope scope = Scope::kUndeclared;
    ScopeObject object = ScopeObject::kNone;
    std::string object_param;
  };
  std::vector<Route> routes_;
};

}  // namespace gpufleet::api
