#pragma once
// The handlers of GET/PUT /api/v1/reports/*, which AddReportRoutes (reports.cpp) registers in one
// place: the usage reports and the rates (usage.cpp), the capacity plan and its planned growth
// (capacity.cpp); the compliance reports are in reports.cpp itself.

#include "api/context.h"

namespace gpufleet::usage {
enum class ReportKind;
}

namespace gpufleet::api {

Response UsageReport(ApiContext& ctx, const Request& req, const Principal& who,
                     usage::ReportKind kind);
Response GetRates(ApiContext& ctx);
Response PutRates(ApiContext& ctx, const Request& req);
Response CapacityReport(ApiContext& ctx, const Request& req, const Principal& who);
Response GetCapacityGrowth(ApiContext& ctx);
Response PutCapacityGrowth(ApiContext& ctx, const Request& req, const Principal& who);

}  // namespace gpufleet::api
