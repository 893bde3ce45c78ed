#include "sim/sim.h"

#include <cstdio>
#include <cstdlib>

#include "model/profile.h"

namespace gpufleet {

SimFleet::SimFleet(std::shared_ptr<const GpuCatalog> catalog) : catalog_(std::move(catalog)) {}

namespace {
// "rack=r2;zone=b" -> {rack: r2, zone: b}; "-" or "": none.
Result<Labels> NodeLabels(const std::string& entry) {
  std::vector<std::string> args;
  if (entry == "-" || entry.empty()) return Labels{};
  for (size_t start = 0;;) {
    const size_t semi = entry.find(';', start);
    args.push_back(entry.substr(start, semi - start));
    if (semi == std::string::npos) break;
    start = semi + 1;
  }
  return ParseLabelArgs(args);
}

Status Check(const GpuCatalog& catalog, const SimPoolOptions& o) {
  if (!catalog.Find(o.model)) {
    return MakeError(ErrorCode::kInvalidArgument, "unknown GPU model '" + o.model + "'");
  }
  if (o.nodes < 0 || o.nodes > 100000) {
    return MakeError(ErrorCode::kInvalidArgument, "--nodes must be 0..100000");
  }
  if (o.gpus_per_node < 0 || o.gpus_per_node > 16) {
    return MakeError(ErrorCode::kInvalidArgument, "--gpus-per-node must be 0..16");
  }
  for (const auto& entry : o.labels) {
    if (auto labels = NodeLabels(entry); !labels.ok()) return labels.error();
  }
  return {};
}
}  // namespace

Status SimFleet::AddPool(const SimPoolOptions& o) {
  GF_TRY(Check(*catalog_, o));
  for (int i = 0; i < o.nodes; ++i) {
    char name[128];
    std::snprintf(name, sizeof name, "%s-%04d", o.name_prefix.c_str(), o.first_index + i);
    GF_TRY(AddNode(o, name));
  }
  return {};
}

Status SimFleet::AddNode(const SimPoolOptions& o, const std::string& name) {
  GF_TRY(Check(*catalog_, o));
  if (runner_.Has(name)) return {};
  SimNodeSpec spec;
  spec.hostname = name;
  spec.model = catalog_->Find(o.model);
  spec.gpu_count = o.gpus_per_node;
  // The node's number is its name's last digits (<prefix>-0007), also for nodes a scaler adds.
  const size_t number =
      std::strtoull(name.c_str() + name.find_last_not_of("0123456789") + 1, nullptr, 10);
  if (!o.drivers.empty()) {
    spec.driver_version = o.drivers[number % o.drivers.size()];
    spec.cuda_driver_version.clear();
  }
  if (!o.container_toolkits.empty()) {
    spec.container_toolkit = o.container_toolkits[number % o.container_toolkits.size()];
  }
  if (!o.extra_packages.empty()) {
    const std::string& entry = o.extra_packages[number % o.extra_packages.size()];
    if (size_t eq = entry.find('='); eq != std::string::npos && eq > 0) {
      spec.extra_packages[entry.substr(0, eq)] = entry.substr(eq + 1);
    }
  }
  if (!o.power_limits.empty()) {
    spec.power_limit_w = std::atoi(o.power_limits[number % o.power_limits.size()].c_str());
  }
  AgentOptions ao;
  {
    std::lock_guard lock(mu_);
    spec.actions = actions_;
    ao.action_log = action_log_;
  }
  ao.controller = o.controller;
  ao.join_token = o.join_token;
  ao.tls = o.tls;
  ao.hostname = name;
  if (!o.token_dir.empty()) KeepNodeTokenIn(ao, o.token_dir + "/" + name + ".token");
  if (!o.labels.empty()) {
    auto labels = NodeLabels(o.labels[number % o.labels.size()]);
    if (labels.ok()) ao.labels = std::move(labels).value();  // checked above
  }
  runner_.Add(std::move(ao), MakeSimBackend(spec));
  ++nodes_;
  return {};
}

bool SimFleet::RemoveNode(const std::string& name) {
  if (!runner_.Remove(name)) return false;
  --nodes_;
  return true;
}

void SimFleet::SetActions(const SimNodeSpec::ActionTimes& times, const std::string& action_log) {
  std::lock_guard lock(mu_);
  actions_ = times;
  action_log_ = action_log;
}

void SimFleet::Run(int threads) { runner_.Run(threads); }
void SimFleet::Stop() { runner_.Stop(); }

}  // namespace gpufleet
