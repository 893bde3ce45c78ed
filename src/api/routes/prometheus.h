#pragma once
// What the Prometheus API's two route files share (internal to the api component): its
// parameters (query string and form body), its answers, times, and the fleet as a token sees
// it.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "alerting/eval.h"
#include "api/context.h"

namespace gpufleet::api::prom {

// The request's parameters: the query string's, then a form-encoded POST body's.
struct Params {
  std::vector<std::pair<std::string, std::string>> all;
  std::string Get(std::string_view key) const;  // the last value; "" when absent
  std::vector<std::string> All(std::string_view key) const;
  bool Has(std::string_view key) const;
};
Result<Params> ParamsOf(const Request& req);

// {"status":"success","data":<data>} with data as JSON text.
Response Success(std::string data);
// {"status":"error","errorType":type,"error":message}: 400 bad_data, 422 execution,
// 503 unavailable or timeout.
Response Failure(int status, std::string_view type, std::string_view message);

// RFC 3339 or Unix seconds with a fraction, in milliseconds.
Result<int64_t> ParseTime(const std::string& text);
// A duration ("15s", "1m") or seconds with a fraction, in milliseconds (> 0).
Result<int64_t> ParseStep(const std::string& text);
// A Prometheus timestamp (seconds, up to 3 decimals) and a sample value (a string).
void AppendTime(std::string& out, int64_t ms);
void AppendValue(std::string& out, double v);
void AppendLabels(std::string& out, const Labels& labels);

// The last health cycle's snapshot of the fleet, narrowed to the token's clusters, with
// dcgm-exporter's modelName (the GPU's name), pci_bus_id and device; kUnavailable before the
// first cycle. Shared while the cycle and the token's clusters are the same.
Result<std::shared_ptr<const alerting::Snapshot>> FleetSnapshot(ApiContext& ctx,
                                                                const Principal& who);

void AddRoutes(Router& router, ApiContext& ctx);      // query, query_range (prometheus.cpp)
void AddMetaRoutes(Router& router, ApiContext& ctx);  // the rest (prometheus_meta.cpp)

}  // namespace gpufleet::api::prom
