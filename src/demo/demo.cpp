#include "demo/demo.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

#include "fleet/assets.h"
#include "fleet/fleet.h"
#include "fleet/teams.h"
#include "model/types.h"
#include "proto/proto.h"
#include "runtime/command_bus.h"
#include "runtime/services.h"
#include "store/store.h"
#include "usage/capacity.h"
#include "usage/usage.h"
#include "workload/jobs.h"

namespace gpufleet::demo {

std::unique_ptr<workload::WorkloadGenerator> DemoWorkload(FleetService& fleet,
                                                          const TeamService& teams,
                                                          workload::JobService& jobs) {
  auto pools = fleet.Pools();
  auto clusters = fleet.Clusters();
  if (!pools.ok() || !clusters.ok()) return nullptr;
  std::map<std::string, std::string> cluster_team, cluster_type;
  for (const auto& c : clusters.value()) {
    cluster_team[c.name] = c.team;
    cluster_type[c.name] = std::string(ToString(c.type));
  }
  std::vector<workload::GeneratedPool> sized;
  for (const auto& p : pools.value()) {
    if (p.size > 0) {
      // `gpufleet up`'s pools are simulated but for those watched through dcgm-exporter.
      sized.push_back({p.name, p.gpus_per_node, p.size * p.gpus_per_node,
                       p.team.empty() ? cluster_team[p.cluster] : p.team, p.exporters.empty(),
                       cluster_type[p.cluster]});
    }
  }
  std::vector<workload::DemoTeam> demo_teams;
  for (const auto& t : teams.List()) {
    workload::DemoTeam d{t.name, {}};
    for (const auto& p : t.projects) d.projects.push_back(p.name);
    if (!d.projects.empty()) demo_teams.push_back(std::move(d));
  }
  if (sized.empty() || demo_teams.empty()) return nullptr;
  spdlog::info("demo workload: {} pools, {} teams", sized.size(), demo_teams.size());
  return std::make_unique<workload::WorkloadGenerator>(
      [&jobs](workload::JobSpec spec) -> Status {
        auto job = jobs.Submit(std::move(spec));
        if (!job.ok()) return job.error();
        return {};
      },
      std::move(sized), std::move(demo_teams));
}

void SimLoadPusher::Push(FleetService& fleet, const workload::JobService& jobs,
                         runtime::CommandBus& commands, int64_t now) {
  auto loads = jobs.Loads();
  struct Target {
    std::string node;
    int64_t connected_ms;
  };
  std::vector<Target> targets;
  fleet.ForEachNode({}, [&](const Node& n) {
    if (n.simulated && n.connected) targets.push_back({n.name, n.connected_ms});
  });
  std::map<std::string, Sent> kept;
  for (const auto& t : targets) {
    std::vector<proto::GpuLoad> want;
    for (const auto& l : loads[t.node]) want.push_back({l.gpu, l.job, l.profile, l.since_ms});
    std::sort(want.begin(), want.end(),
              [](const proto::GpuLoad& a, const proto::GpuLoad& b) { return a.gpu < b.gpu; });
    auto it = sent_.find(t.node);
    if (it != sent_.end() && it->second.loads == want &&
        it->second.connected_ms == t.connected_ms && now < it->second.at_ms + 300'000) {
      kept.emplace(t.node, std::move(it->second));
      continue;
    }
    proto::Command cmd;
    cmd.action = std::string(proto::kSimLoadAction);
    cmd.loads = want;
    // Not sent (the agent is between connections): tried again on the next tick.
    if (commands.Send(t.node, cmd, nullptr).ok()) {
      kept[t.node] = {std::move(want), t.connected_ms, now};
    }
  }
  sent_ = std::move(kept);  // nodes gone or disconnected are forgotten
}

namespace {

// What an operator would plan beyond the trend: the first team's demand +25% a quarter, and a
// new model needing 64 GPUs of the biggest pool from three months on (unless a plan is there
// already); audited as `rec` says, with its action and target.
Status SeedCapacityGrowth(const runtime::Services& s, int64_t today, AuditRecord rec) {
  auto existing = s.store.settings->GetSetting(usage::kCapacityGrowthSetting);
  if (!existing.ok()) return existing.error();
  auto teams = s.teams->List();
  auto pools = s.fleet.Pools();
  if (existing.value() || teams.empty() || !pools.ok() || pools->empty()) return {};
  const Pool* biggest = &pools->front();
  for (const auto& p : pools.value()) {
    if (p.size * p.gpus_per_node > biggest->size * biggest->gpus_per_node) biggest = &p;
  }
  usage::CapacityGrowth plan;
  plan.teams.push_back({teams.front().name, 0.25});
  plan.demands.push_back({"next-model (demo)", biggest->name, 64, usage::IsoDate(today + 90)});
  const std::string growth = usage::CapacityGrowthJson(plan);
  GF_TRY(s.store.settings->PutSetting(usage::kCapacityGrowthSetting, growth, s.clock->NowMs()));
  rec.action = "PUT /api/v1/reports/capacity/growth";
  rec.target = "reports/capacity/growth";
  rec.after = growth;
  return s.store.audit->AppendAudit(rec);
}

}  // namespace

Status SeedDemoAssets(const runtime::Services& s) {
  auto clusters = s.fleet.Clusters();
  if (!clusters.ok()) return clusters.error();
  std::map<std::string, int> cluster_no;
  for (const auto& c : clusters.value()) cluster_no.emplace(c.name, cluster_no.size());
  // Each cluster was bought at one time, so their warranties (three years) end apart: one
  // with years left, one ending within weeks, one over.
  static constexpr int kAgeDays[] = {250, 600, 1080, 1400, 900};
  const int64_t today = s.clock->NowMs() / 86'400'000;
  // Street prices per GPU where the reference has one (lifecycle-facts.md 8b: H100 SXM
  // about 25-40k USD, refurbished A100 80GB 8-15k; low confidence): the middle of each.
  auto price = [](const Asset& a) -> std::string {
    if (a.kind != "gpu") return "";
    if (a.model.rfind("H100", 0) == 0) return "32500";
    if (a.model.rfind("A100", 0) == 0) return "11500";
    return "";
  };
  std::string csv =
      "kind,serial,name,status,location,rack,purchase_date,purchase_price,warranty_end,"
      "comments\n";
  std::string rma, spare_model, spare_site;
  std::map<std::string, std::string> rack_of;  // pool -> rack
  for (const auto& a : s.assets->List({})) {
    if (!a.purchase_date.empty() || a.node.empty()) continue;  // an operator's, or not ours
    auto n = s.fleet.GetNode(a.node);
    if (!n.ok() || !n->simulated) continue;
    int64_t bought = today - kAgeDays[cluster_no[n->cluster] % std::size(kAgeDays)];
    auto [r, fresh] = rack_of.try_emplace(n->pool, "r" + std::to_string(rack_of.size() + 1));
    std::string status = "active", comment;
    if (a.kind == "gpu" && rma.empty() && n->pool.find("h100") != std::string::npos) {
      rma = a.serial;
      status = "failed";
      comment = "RMA-2291: row remapping failures (demo)";
    }
    if (a.kind == "gpu" && spare_model.empty()) {
      spare_model = a.model;
      spare_site = a.site;
    }
    csv += a.kind + "," + (a.kind == "gpu" ? a.serial : "") + "," + a.name + "," + status +
           ",hall-1," + r->second + "," + usage::IsoDate(bought) + "," + price(a) + "," +
           usage::IsoDate(bought + 3 * 365) + "," + comment + "\n";
  }
  // Three spare GPUs on the shelf, bought with the newest cluster.
  for (int i = 1; i <= 3 && !spare_model.empty(); ++i) {
    csv += "gpu,16522990000" + std::to_string(i) + ",,inventory,store-room,," +
           usage::IsoDate(today - 250) + ",," + usage::IsoDate(today - 250 + 3 * 365) +
           ",spare (demo)\n";
  }
  auto rows = ParseAssetsCsv(csv);
  if (!rows.ok()) return rows.error();
  for (auto& row : rows.value()) {
    if (row.key.rfind("16522990000", 0) == 0) {
      row.set["model"] = spare_model;
      row.set["site"] = spare_site;
    }
  }
  auto done = s.assets->Import(rows.value(), "demo");
  if (!done.ok()) return done.error();
  AuditRecord rec;
  rec.time_ms = s.clock->NowMs();
  rec.actor = "demo";
  rec.action = "POST /api/v1/assets/import";
  rec.target = "assets";
  rec.status = 200;
  rec.result = "ok";
  rec.after = "{\"applied\":" + std::to_string(done->applied) + "}";
  GF_TRY(s.store.audit->AppendAudit(rec));
  return SeedCapacityGrowth(s, today, rec);
}

}  // namespace gpufleet::demo
