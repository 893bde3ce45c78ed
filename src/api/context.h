#pragma once
// What route handlers share (internal to the api component).

#include "alerting/notifier.h"
#include "api/buffer_pool.h"
#include "api/http.h"
#include "api/http_metrics.h"
#include "common/clock.h"
#include "fleet/assets.h"
#include "fleet/fleet.h"
#include "fleet/teams.h"
#include "health/service.h"
#include "lifecycle/compat_service.h"
#include "lifecycle/compliance_service.h"
#include "lifecycle/drift_service.h"
#include "lifecycle/rollout_service.h"
#include "lifecycle/vuln_service.h"
#include "model/catalog.h"
#include "proto/proto.h"
#include "runtime/command_bus.h"
#include "runtime/services.h"
#include "runtime/ticker.h"
#include "scaling/scaling.h"
#include "scrape/scraper.h"
#include "store/store.h"
#include "telemetry/telemetry.h"
#include "usage/usage.h"
#include "workload/jobs.h"

namespace boost::json {
class array;
}

namespace gpufleet::api {

// The services (runtime::Services, as the controller built them) and what the server adds.
struct ApiContext : runtime::Services {
  ApiContext(const runtime::Services& services, HttpMetrics& metrics, BufferPool& pool)
      : runtime::Services(services), http_metrics(metrics), buffers(pool) {}
  HttpMetrics& http_metrics;
  BufferPool& buffers;  // for large reply bodies; the server hands them back after writing
  // Writes the API tokens' last-use times kept in memory (Authenticator::FlushUse).
  std::function<void()> flush_token_use = [] {};
};

// Each routes/<resource>.cpp registers its handlers.
void AddClusterRoutes(Router& router, ApiContext& ctx);
void AddNodeRoutes(Router& router, ApiContext& ctx);
void AddTokenRoutes(Router& router, ApiContext& ctx);
void AddApplyRoutes(Router& router, ApiContext& ctx);
void AddAuditRoutes(Router& router, ApiContext& ctx);
void AddStaticRoutes(Router& router, ApiContext& ctx);
void AddMetricsRoutes(Router& router, ApiContext& ctx);    // /healthz, /metrics, /api/v1/query
void AddEventRoutes(Router& router, ApiContext& ctx);      // GPU events, fault injection
void AddScrapeRoutes(Router& router, ApiContext& ctx);     // scrape mode's targets
void AddHealthRoutes(Router& router, ApiContext& ctx);     // GPU and node health
void AddAlertRoutes(Router& router, ApiContext& ctx);      // alerts, channels and silences
void AddRuleRoutes(Router& router, ApiContext& ctx);       // alert rules
void AddDashboardRoutes(Router& router, ApiContext& ctx);  // whoami, heatmap
void AddJobRoutes(Router& router, ApiContext& ctx);        // jobs
void AddScalingRoutes(Router& router, ApiContext& ctx);    // autoscaling
void AddCompatRoutes(Router& router, ApiContext& ctx);     // the compatibility matrix
// lifecycle::TargetWarnings for `kind`'s `target` on nodes running `runs` (node, version), as
// [{"kind", "message", "nodes"}], with the bulletins and matrix in effect (routes/compat.cpp).
boost::json::array WarningsJson(ApiContext& ctx, std::string_view kind, const std::string& target,
                                const std::vector<std::pair<std::string, std::string>>& runs);
void AddRolloutRoutes(Router& router, ApiContext& ctx);   // rollouts, node actions
void AddSecurityRoutes(Router& router, ApiContext& ctx);  // vulnerabilities, bulletins
void AddDriftRoutes(Router& router, ApiContext& ctx);     // drift from the golden profiles
void AddReportRoutes(Router& router, ApiContext& ctx);    // /reports/*: usage, capacity, compliance
void AddTeamRoutes(Router& router, ApiContext& ctx);      // teams and their projects
void AddUsageRoutes(Router& router, ApiContext& ctx);     // the usage ledger
void AddAssetRoutes(Router& router, ApiContext& ctx);     // the asset register
void AddSlurmRoutes(Router& router, ApiContext& ctx);     // the bridge to Slurm
void AddControllerRoutes(Router& router, ApiContext& ctx);   // the controllers and the leader
void AddRemoteWriteRoutes(Router& router, ApiContext& ctx);  // the receivers' state
// The remote-write receivers' counters, for /metrics (nothing when there are none).
void AppendRemoteWriteMetrics(std::string& out, ApiContext& ctx);
void AddPrometheusRoutes(Router& router, ApiContext& ctx);  // /prometheus/api/v1/: Grafana's

// Authenticates "Bearer <token>" against the stored API tokens. While the store is unavailable
// it answers from the last successful lookup of the same token (its role, expiry and revocation
// as they were then), so reads go on during a database outage; whenever the store answers it is
// asked, so a revocation counts from the next request. Thread-safe.
// Every request's token is looked up in the store, so a revocation or a rotation's end takes
// effect on the next request; the last lookups are kept only to go on while the store is away.
// Last use is kept in memory and written in batches (FlushUse), not once per request.
// The Prometheus API's routes (/prometheus/...) also take HTTP basic auth with the token as the
// password (what promtool and Grafana send for http://user:TOKEN@host/prometheus): this turns
// such a header into "Bearer <token>" for a path under /prometheus/; any other header or path
// keeps the header as it is.
std::string AuthorizationFor(const std::string& path, const std::string& authorization);

class Authenticator {
 public:
  Authenticator(store::TokenStore& store, Clock& clock) : store_(store), clock_(clock) {}
  Result<Principal> Check(const std::string& authorization);
  // Writes the last-use times gathered since the last flush; kept for the next one on error.
  Status FlushUse();

 private:
  store::TokenStore& store_;
  Clock& clock_;
  std::mutex mu_;
  std::map<std::string, ApiToken> known_;  // by hash, the last lookups; guarded by mu_
  std::map<std::string, int64_t> used_;    // by token id, not yet written; guarded by mu_
};

// Failed sign-ins per source address. A valid token always passes; after kMaxFailures within a
// minute an unknown token from the address is refused (429 with Retry-After) until that minute
// is over, so tokens cannot be guessed at speed while nobody with a valid token behind the same
// address (a NAT, a proxy, a site of agents) is kept out. The failures are also gathered for
// the audit log, one record per address and minute with its count (TakeAuditCounts), so a flood
// of bad tokens writes a bounded number of rows. Thread-safe; at most kMaxAddresses remembered.
class SignInLimiter {
 public:
  static constexpr int kMaxFailures = 20;
  static constexpr int64_t kWindowMs = 60'000;
  static constexpr size_t kMaxAddresses = 100'000;
  // Addresses named in the audit log per flush; the failures of any more are summed in one
  // record for "other addresses".
  static constexpr size_t kMaxAuditAddresses = 1'000;
  // Counts a failed sign-in from `remote`. 0 while the address may still try; else the seconds
  // until it may again (the answer is then a 429).
  int64_t Failed(const std::string& remote, int64_t now_ms);

  struct AuditCount {
    std::string remote;  // "other addresses" for the sum beyond kMaxAuditAddresses
    int64_t first_ms = 0;
    int64_t last_ms = 0;
    int64_t count = 0;
  };
  // The failures counted since the last call, one entry per address, oldest first.
  std::vector<AuditCount> TakeAuditCounts();

 private:
  struct Window {
    int64_t start_ms = 0;
    int failures = 0;
  };
  std::mutex mu_;
  std::map<std::string, Window> by_address_;     // guarded by mu_
  std::map<std::string, AuditCount> for_audit_;  // guarded by mu_
  AuditCount others_{"other addresses"};         // guarded by mu_
};

// One lookup, with nothing remembered.
Result<Principal> Authenticate(store::TokenStore& store, Clock& clock,
                               const std::string& authorization);

// Paging: limit (default 500, at most 5000) and offset from the query string.
struct Page {
  size_t limit = 500;
  size_t offset = 0;
};
Result<Page> ParsePage(const Request& req);
// A time in the query string: milliseconds since the epoch, relative to now ("-1h", "-30m"),
// or RFC 3339 in UTC ("2026-12-01T00:00:00Z", with optional milliseconds); `fallback` when the
// parameter is absent or empty.
Result<int64_t> TimeParam(const Request& req, const char* key, int64_t now, int64_t fallback);
// Alert rules cover the whole fleet: a token limited to some clusters may not change them.
Status RequireFleetWide(const Principal& who);
// The node named in the path ({name}), if the caller may see it; else kNotFound.
Result<Node> VisibleNode(ApiContext& ctx, const Request& req, const Principal& who);
// A pool about to be deleted has no queued job and no GPU running one (kConflict naming them).
Status RequirePoolsIdle(ApiContext& ctx, const std::vector<std::string>& pools);

}  // namespace gpufleet::api
