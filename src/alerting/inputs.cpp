// The figures other components contribute to the rules by name (AlertInputs in eval.h).

#include "alerting/eval.h"
#include "alerting/metrics.h"

namespace gpufleet::alerting {

Status AlertInputs::AddNode(std::string_view name, NodeFigures figures) {
  auto metric = FindMetric(name);
  if (!metric || metric->special != Special::kNodeInput || nodes_.count(name)) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "'" + std::string(name) + "' is not a node input the rules know, or taken");
  }
  nodes_.emplace(std::string(name), std::move(figures));
  return {};
}

Status AlertInputs::AddController(std::string_view name, Figure figure) {
  auto metric = FindMetric(name);
  if (!metric || metric->special != Special::kControllerInput || controller_.count(name)) {
    return MakeError(ErrorCode::kInvalidArgument, "'" + std::string(name) +
                                                      "' is not a controller input the rules "
                                                      "know, or taken");
  }
  controller_.emplace(std::string(name), std::move(figure));
  return {};
}

void AlertInputs::Fill(Snapshot& snap) const {
  for (const auto& [name, figures] : nodes_) {
    auto& into = snap.node_inputs[name];
    for (auto& [node, v] : figures()) into[node] = v;
  }
  for (const auto& [name, figure] : controller_) snap.controller_inputs[name] = figure();
}

}  // namespace gpufleet::alerting
