#pragma once
// JSON mapping of the model types (Boost.JSON). Include only where JSON is produced or read:
// the API, the proto codec, the CLI. Readers report the field and the expected type.

#include <boost/json.hpp>

#include "common/result.h"
#include "model/catalog.h"
#include "model/types.h"

namespace gpufleet {

boost::json::object ToJson(const Cluster& c);
boost::json::object ToJson(const Pool& p);
boost::json::object ToJson(const Gpu& g);
boost::json::object ToJson(const GpuSettings& s);
boost::json::object ToJson(const NodeFacts& f);
boost::json::object ToJson(const Node& n, bool with_gpus);
boost::json::object ToJson(const NodeEvent& e);
boost::json::object ToJson(const GpuModelSpec& m);
boost::json::object ToJson(const Labels& labels);
boost::json::array ToJson(const std::vector<ExporterTarget>& targets);
boost::json::object ToJson(const Remediation& r);

// Lenient readers of stored documents: what does not have the expected shape is left out
// (labels, exporters) or left at its default (remediation).
Labels LabelsFromJson(const boost::json::value& v);
// A GPU's MIG layout ({"1g.10gb": 7}); null when unknown.
boost::json::value MigLayoutJson(const std::optional<std::map<std::string, int>>& layout);
Result<std::optional<std::map<std::string, int>>> MigLayoutFromJson(const boost::json::value* v);
std::vector<ExporterTarget> ExportersFromJson(const boost::json::value& v);
Remediation RemediationFromJson(const boost::json::value& v);
// {"type": "slurm", "bin_dir", "conf", "partitions", "poll_s", "node_name"}; null for none (and
// read back as none).
boost::json::value ToJson(const Scheduler& s);
Scheduler SchedulerFromJson(const boost::json::value& v);
// {"tier", "requires": {"cuda", "gpu_operator", "kubernetes"}, "driver_branch",
//  "maintenance_windows": [...]}; a cluster's and a pool's JSON carry the windows beside it.
boost::json::object ToJson(const Lifecycle& l);
// {"days": ["sat", "sun"], "from": "02:00", "to": "06:00", "timezone": "UTC"}
boost::json::array ToJson(const std::vector<MaintenanceWindow>& windows);
Lifecycle LifecycleFromJson(const boost::json::value& v);

Result<Gpu> GpuFromJson(const boost::json::value& v);
Result<GpuSettings> GpuSettingsFromJson(const boost::json::value& v);  // null: unknown
Result<NodeFacts> FactsFromJson(const boost::json::value& v);

// Field readers: a missing optional field gives the fallback; a present field of the wrong type
// is an error naming the field.
Result<std::string> GetString(const boost::json::object& o, std::string_view key,
                              std::optional<std::string> fallback = std::nullopt);
Result<int64_t> GetInt(const boost::json::object& o, std::string_view key,
                       std::optional<int64_t> fallback = std::nullopt);
Result<bool> GetBool(const boost::json::object& o, std::string_view key,
                     std::optional<bool> fallback = std::nullopt);

// Parses a request body that must be a JSON object.
Result<boost::json::object> ParseObject(std::string_view body);

}  // namespace gpufleet
