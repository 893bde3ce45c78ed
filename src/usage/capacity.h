#pragma once
// Capacity planning: for each pool, the demand its jobs showed (the pools' hours, the ledger),
// its trend and its season, grown by what the operator plans (a team's growth a quarter, new
// demand from a date), replayed through the scheduler's replay engine (sched/replay.h) on the
// pool as installed and as it would be with more nodes: the nodes to order so that the p95
// queue wait stays under the target at the horizon, by when (the need less the procurement lead
// time), and what they cost against a budget.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "store/store.h"

namespace gpufleet::usage {

// What the operator plans beyond the trend, kept as a setting ("capacity_growth"):
//   {"teams": [{"team": "nlp", "quarterly": 0.2}],
//    "demands": [{"name": "llm-v2", "pool": "h100-sxm", "gpus": 64, "from": "2027-03-01"}]}
inline constexpr const char* kCapacityGrowthSetting = "capacity_growth";
struct CapacityGrowth {
  struct TeamGrowth {
    std::string team;
    double quarterly = 0;  // 0.2: its demand grows 20% a quarter (compounded)
  };
  struct NewDemand {
    std::string name, pool;
    int gpus = 0;      // held from `from` on, all the time
    std::string from;  // YYYY-MM-DD
  };
  std::vector<TeamGrowth> teams;
  std::vector<NewDemand> demands;
};
// Strict: an unknown field, a growth under -100% or over +1000% a quarter, a bad date or a
// demand of no GPUs is a kInvalidArgument naming the field ("demands[1].from: ...").
Result<CapacityGrowth> ParseCapacityGrowth(std::string_view json);
std::string CapacityGrowthJson(const CapacityGrowth& growth);

// Days of pool hours a trend is fitted from; a plan on fewer recommends no order.
inline constexpr int kTrendDaysNeeded = 14;

struct CapacityRequest {
  int64_t now_ms = 0;
  int horizon_days = 180;        // plan for this far ahead
  int lead_time_days = 90;       // from an order to the GPUs in service
  int history_days = 30;         // the jobs replayed: this many days of the ledger
  int trend_days = 400;          // the pools' hours the trend and season are read from
  double wait_p95_s = 600;       // the queue wait to keep the p95 under
  std::optional<double> budget;  // for all the orders; none: not checked
  std::string currency = "USD";
};

// A pool as the fleet has it now, and what the asset register knows of its GPUs.
struct CapacityPool {
  std::string name, cluster, gpu_model;
  int gpus_per_node = 8;
  int nodes = 0;                    // installed (registered) now
  int gpus_leaving_warranty = 0;    // of its GPUs, warranty ending before the horizon
  std::optional<double> gpu_price;  // mean purchase price of the model in the register
  // Its jobs running and queued now, as ledger records would have them when they end (a job
  // without a duration holds its GPUs through the history window): the ledger has only the
  // ones that ended, and a pool of long jobs would look empty without them.
  std::vector<store::UsageRecord> live;
};

struct PoolCapacityPlan {
  CapacityPool pool;
  int history_jobs = 0;         // ledger records replayed
  int trend_days_recorded = 0;  // days with pool hours
  double peak_demand_now = 0;   // GPUs: the trend's value today (daily peak hour)
  double trend_gpus_per_month = 0;
  double factor_trend = 1, factor_season = 1, factor_planned = 1;  // at the horizon
  double factor = 1;                                               // the three together
  int planned_gpus = 0;           // new demand (CapacityGrowth::demands) by the horizon
  double wait_p95_now_s = 0;      // the history replayed as it was, on the nodes installed
  double wait_p95_horizon_s = 0;  // the projected demand on the nodes installed
  int nodes_needed = 0;           // the fewest that keep the p95 under the target at the horizon
  // YYYY-MM-DD: the start of the first 30-day step at whose end the installed nodes no longer
  // keep the wait under the target; empty: they do to the horizon.
  std::string need_by;
  std::string order_by;  // need_by less the lead time (today when that has passed)
  int order_nodes = 0, order_gpus = 0;
  std::optional<double> cost;  // order_gpus x gpu_price; none when no price is known
  bool within_budget = true;
  // Under kTrendDaysNeeded days of pool hours: nodes_needed and need_by say what the replay
  // found, and no order is recommended (order_* empty, no cost).
  bool history_short = false;
  std::string summary;             // "order 2 x 8 H100-SXM5-80GB by 2027-03-01, cost ..."
  std::vector<std::string> notes;  // what the plan could not take into account
  int replays = 0;
};

struct CapacityPlan {
  CapacityRequest request;
  std::vector<PoolCapacityPlan> pools;  // the soonest order first
  double total_cost = 0;                // of the orders with a price
};

// Plans each pool from the store's ledger and pools' hours.
Result<CapacityPlan> PlanCapacity(store::UsageStore& store, const std::vector<CapacityPool>& pools,
                                  const CapacityGrowth& growth, const CapacityRequest& request);

// One pool from its records (the history window) and hours (the trend window).
Result<PoolCapacityPlan> PlanPool(const CapacityPool& pool,
                                  const std::vector<store::UsageRecord>& records,
                                  const std::vector<store::PoolHour>& hours,
                                  const CapacityGrowth& growth, const CapacityRequest& request);

std::string IsoDate(int64_t days_since_epoch);

}  // namespace gpufleet::usage
