#include "controller/leader.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>

#include "alerting/notifier.h"
#include "common/crypto.h"
#include "controller/relay.h"
#include "fleet/assets.h"
#include "fleet/fleet.h"
#include "fleet/teams.h"
#include "health/service.h"
#include "lifecycle/rollout_service.h"
#include "runtime/leadership.h"
#include "scaling/scaling.h"
#include "workload/jobs.h"

namespace gpufleet {

Result<std::string> ControllerId(const std::string& data_dir) {
  const std::string path = data_dir + "/controller.id";
  std::ifstream in(path);
  std::string id;
  if (in && std::getline(in, id) && !id.empty()) return id;
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0 || !host[0]) std::snprintf(host, sizeof host, "x");
  id = std::string(host) + "-" + RandomHex(4);
  std::ofstream out(path, std::ios::trunc);
  out << id << "\n";
  if (!out.flush()) return MakeError(ErrorCode::kUnavailable, "cannot write " + path);
  return id;
}

void TakeChanges(const ChangeTargets& to, const std::vector<std::string>& tables) {
  auto any = [&](std::initializer_list<std::string_view> names) {
    return std::any_of(tables.begin(), tables.end(), [&](const std::string& t) {
      return std::find(names.begin(), names.end(), t) != names.end();
    });
  };
  auto began = std::chrono::steady_clock::now();
  auto check = [](const char* what, const Status& s) {
    if (!s.ok())
      spdlog::warn("{}: another controller's changes not taken: {}", what, s.error().message);
  };
  if (any({"clusters", "pools"})) to.fleet.ForgetTopology();
  if (any({"nodes", "gpus"})) {
    auto r = to.fleet.Refresh();
    check("fleet", r.ok() ? Status{} : Status(r.error()));
  }
  if (any({"teams"})) check("teams", to.teams.Load());
  if (any({"assets"})) check("assets", to.assets.Load());
  if (any({"scaling_policies"})) check("scaling", to.scaling.ReloadPolicies());
  // Every step of a rollout is stored as it is taken, so reading them again between two of
  // the leader's ticks loses nothing and takes a pause or a new rollout made elsewhere.
  if (any({"rollouts", "rollout_nodes"})) check("rollouts", to.rollouts.Load());
  if (any({"agent_commands"})) to.relay.Poll();
  if (any({"gpu_events"})) check("health", to.health.TakeEvents());
  if (any({"jobs"}) && !to.leadership.leading()) check("jobs", to.jobs.Follow());
  if (to.leadership.leading()) {
    if (any({"alert_rules"})) check("alert rules", to.notifier.LoadRules());
  } else if (any({"alert_rules", "alerts"})) {
    check("alerts", to.notifier.Load());  // the states are the leader's
  }
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                  began)
                .count();
  spdlog::debug("store: took another controller's changes to {} table(s) in {} ms", tables.size(),
                ms);
}

}  // namespace gpufleet
