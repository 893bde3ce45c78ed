// replay: a job trace through the queue, allocator, forecaster and autoscaler in virtual time,
// for one pool; prints what it cost (GPU-hours provisioned and idle) and how jobs waited.
// Runs locally: no controller needed.

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "cli/output.h"
#include "sched/replay.h"
#include "sched/tune.h"

namespace json = boost::json;

namespace gpufleet::cli {
namespace {

struct ReplayFlags {
  std::string trace, format = "csv", policy = "predictive", margin_by = "recent";
  int gpus_per_node = 8;
  double lead_time = 600, time_scale = 1, size_scale = 1;
  int min_nodes = 0, max_nodes = 1000, step_up = 50, step_down = 10;
  double target_share = 0, idle_before_remove = 600, interval = 60, down_cooldown = 300;
  double forecast_margin = 4, consolidate_below = 0.5, move_cost = 300, movable_share = 1;
  double reserve_after = sched::Queue::kDefaultReserveAfterS;
  bool tune = false, all = false;
  double wait_p95 = 60;
  std::vector<std::string> schedule;  // NODES@FROM-TO
};

// `--schedule 200@8-18`: at least 200 nodes from 08:00 to 18:00 of the trace's clock, every day.
Result<sched::ScheduledMinimum> ParseScheduledMinimum(const std::string& text) {
  sched::ScheduledMinimum m;
  int used = 0;
  if (std::sscanf(text.c_str(), "%d@%d-%d%n", &m.nodes, &m.from_hour, &m.to_hour, &used) != 3 ||
      used != static_cast<int>(text.size())) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "--schedule '" + text + "': expected NODES@FROM-TO, e.g. 200@8-18");
  }
  if (m.nodes < 0 || m.from_hour < 0 || m.from_hour > 23 || m.to_hour <= m.from_hour ||
      m.to_hour > 24) {
    return MakeError(
        ErrorCode::kInvalidArgument,
        "--schedule '" + text + "': nodes must be 0 or more, and hours 0 <= FROM < TO <= 24");
  }
  return m;
}

json::value Num(double v) { return std::isfinite(v) ? json::value(v) : json::value(nullptr); }

std::string Fixed(double v, int digits = 1) {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// The flags of `replay`, registered on `r`.
void AddReplayFlags(CLI::App* r, ReplayFlags& f) {
  r->add_option("--trace", f.trace, "the trace: CSV submit_time,duration_s,gpus[,team,movable]")
      ->required();
  r->add_option("--format", f.format, "csv (default) or openb (Alibaba 2023 pod list)")
      ->check(CLI::IsMember({"csv", "openb"}));
  r->add_option("--pool-gpus-per-node", f.gpus_per_node, "GPUs per node of the pool (8)");
  r->add_option("--policy", f.policy, "reactive, predictive (default) or oracle")
      ->check(CLI::IsMember({"reactive", "predictive", "oracle"}));
  r->add_option("--lead-time", f.lead_time, "seconds from asking for a node to its being ready");
  r->add_option("--time-scale", f.time_scale, "arrivals this many times denser (default 1)");
  r->add_option("--size-scale", f.size_scale, "each job this many times (default 1)");
  r->add_option("--min-nodes", f.min_nodes, "policy: fewest nodes (0)");
  r->add_option("--max-nodes", f.max_nodes, "policy: most nodes (1000)");
  r->add_option("--target-share", f.target_share,
                "policy: GPUs asked for / provisioned (0.8 reactive; 1 predictive and oracle, "
                "whose forecast's margin is their headroom)");
  r->add_option("--step-up", f.step_up, "policy: most nodes added per decision (50)");
  r->add_option("--step-down", f.step_down, "policy: most nodes removed per decision (10)");
  r->add_option("--idle-before-remove", f.idle_before_remove,
                "policy: seconds a node must be idle before removal (600)");
  r->add_option("--forecast-margin", f.forecast_margin,
                "policy (predictive): plan for this many times the forecast's recent mean "
                "shortfall over it (4)");
  r->add_option("--margin-by", f.margin_by,
                "policy (predictive): the margin's shortfall: recent (default), or that of the "
                "same hour of the day on the past days")
      ->check(CLI::IsMember({"recent", "hour"}));
  r->add_option("--consolidate-below", f.consolidate_below,
                "policy: empty nodes using at most this share of their GPUs by moving their "
                "jobs, when they fit elsewhere (0.5; 0: never)");
  r->add_option("--move-cost", f.move_cost,
                "seconds a moved job's GPUs work for nothing, restarting on its new node (300)");
  r->add_option("--movable-share", f.movable_share,
                "the share of jobs that may be moved, where the trace has no movable column (1)");
  r->add_option("--reserve-after", f.reserve_after,
                "seconds a job that does not fit waits before nodes are kept for it (600)");
  r->add_option("--interval", f.interval, "policy: seconds between decisions (60)");
  r->add_option("--down-cooldown", f.down_cooldown, "policy: seconds between scale-downs (300)");
  r->add_option("--schedule", f.schedule,
                "policy: at least NODES from hour FROM to TO of the trace's clock, every day, as "
                "NODES@FROM-TO (e.g. 200@8-18); repeatable");
  r->add_flag("--tune", f.tune,
              "replay under a grid of target shares (and, predictive, forecast margins) and "
              "print the cheapest setting whose p95 wait is within --wait-p95");
  r->add_option("--wait-p95", f.wait_p95, "--tune's objective: p95 queue wait in seconds (60)");
  r->add_flag("--all", f.all, "--tune: print every setting replayed, cheapest first");
}

// The replay's options from its flags; `share_given`: --target-share was given.
Result<sched::ReplayOptions> ReplayOptionsOf(const ReplayFlags& f, bool share_given) {
  sched::ReplayOptions o;
  o.gpus_per_node = f.gpus_per_node;
  o.time_scale = f.time_scale;
  o.size_scale = f.size_scale;
  o.policy.mode = f.policy == "reactive" ? sched::ScaleMode::kReactive
                  : f.policy == "oracle" ? sched::ScaleMode::kOracle
                                         : sched::ScaleMode::kPredictive;
  o.policy.lead_time_s = f.lead_time;
  o.policy.min_nodes = f.min_nodes;
  o.policy.max_nodes = f.max_nodes;
  o.policy.target_share =
      share_given ? f.target_share : sched::ScalePolicy::DefaultShare(o.policy.mode);
  o.policy.step_up = f.step_up;
  o.policy.step_down = f.step_down;
  o.policy.idle_before_remove_s = f.idle_before_remove;
  o.policy.interval_s = f.interval;
  o.policy.forecast_margin = f.forecast_margin;
  o.policy.margin_by_hour = f.margin_by == "hour";
  o.policy.down_cooldown_s = f.down_cooldown;
  o.policy.consolidate_below = f.consolidate_below;
  o.move_cost_s = f.move_cost;
  o.movable_share = f.movable_share;
  o.reserve_after_s = f.reserve_after;
  for (const auto& text : f.schedule) {
    auto m = ParseScheduledMinimum(text);
    if (!m.ok()) return m.error();
    o.policy.schedule.push_back(m.value());
  }
  return o;
}

// --tune: the cheapest setting within the objective, and the block that sets it.
void RunTune(Globals& g, const ReplayFlags& f, const std::vector<sched::TraceJob>& trace,
             const sched::ReplayOptions& o) {
  sched::TuneOptions to;
  to.replay = o;
  to.wait_p95_s = f.wait_p95;
  auto t = sched::Tune(trace, to);
  if (!t.ok()) {
    std::fprintf(stderr, "error: %s\n", t.error().message.c_str());
    g.exit_code = 2;
    return;
  }
  auto v = json::parse(sched::TuneJson(t.value(), o.policy.mode, f.wait_p95));
  Show(g, v, [&](const json::value& v) {
    PrintTune(v, f.all);
    if (const auto& c = v.at("chosen"); !c.is_null()) {
      char margin[80] = "";
      if (!c.at("forecast_margin").is_null()) {
        std::snprintf(margin, sizeof margin, ", forecast_margin: %g, margin_by: %s",
                      c.at("forecast_margin").to_number<double>(),
                      c.at("margin_by").as_string().c_str());
      }
      std::printf("in a pool's scaling: block: target_share: %g%s\n",
                  c.at("target_share").to_number<double>(), margin);
    }
  });
}

json::object ReplayJson(const sched::ReplayResult& x, const sched::ReplayOptions& o,
                        double took_s) {
  return json::object{{"policy", x.policy},
                      {"jobs", x.jobs},
                      {"unplaceable_jobs", x.unplaceable},
                      {"gpu_hours_provisioned", x.gpu_hours_provisioned},
                      {"gpu_hours_busy", x.gpu_hours_busy},
                      {"gpu_hours_idle", x.gpu_hours_idle},
                      {"gpu_hours_idle_starting", x.gpu_hours_starting},
                      {"gpu_hours_idle_empty", x.gpu_hours_empty},
                      {"gpu_hours_idle_fragmented", x.gpu_hours_fragmented},
                      {"gpu_hours_idle_moving", x.gpu_hours_moving},
                      {"jobs_moved", x.jobs_moved},
                      {"nodes_consolidated", x.nodes_consolidated},
                      {"wait_p50_s", x.wait_p50_s},
                      {"wait_p95_s", x.wait_p95_s},
                      {"wait_p99_s", x.wait_p99_s},
                      {"wait_mean_s", x.wait_mean_s},
                      {"jobs_waited_over_lead_time", x.jobs_waited_over_lead_time},
                      {"scale_events", x.scale_events},
                      {"forecast_mape", Num(x.forecast_mape)},
                      {"forecast_bias", Num(x.forecast_bias)},
                      {"forecast_model", x.forecast_model.empty() ? json::value(nullptr)
                                                                  : json::value(x.forecast_model)},
                      {"target_share", o.policy.target_share},
                      {"forecast_margin", o.policy.mode == sched::ScaleMode::kPredictive
                                              ? json::value(o.policy.forecast_margin)
                                              : json::value(nullptr)},
                      {"margin_by", o.policy.mode == sched::ScaleMode::kPredictive
                                        ? json::value(o.policy.margin_by_hour ? "hour" : "recent")
                                        : json::value(nullptr)},
                      {"lead_time_s", o.policy.lead_time_s},
                      {"peak_nodes", x.peak_nodes},
                      {"simulated_hours", x.span_s / 3600},
                      {"replay_seconds", took_s}};
}

void PrintReplay(const sched::ReplayResult& x, const sched::ReplayOptions& o, double took_s) {
  Table t({"POLICY", "JOBS", "GPU-H PROVISIONED", "GPU-H IDLE", "WAIT P50", "WAIT P95", "WAIT P99",
           "WAITED > LEAD", "SCALE EVENTS", "PEAK NODES", "FORECAST MAPE"});
  t.Row({x.policy, std::to_string(x.jobs), Fixed(x.gpu_hours_provisioned), Fixed(x.gpu_hours_idle),
         Fixed(x.wait_p50_s) + "s", Fixed(x.wait_p95_s) + "s", Fixed(x.wait_p99_s) + "s",
         std::to_string(x.jobs_waited_over_lead_time), std::to_string(x.scale_events),
         std::to_string(x.peak_nodes),
         std::isfinite(x.forecast_mape) ? Fixed(100 * x.forecast_mape) + "%" : "-"});
  t.Print();
  std::printf(
      "idle GPU-hours: %s starting, %s on empty nodes, %s free on busy nodes, %s restarting "
      "moved jobs\n",
      Fixed(x.gpu_hours_starting).c_str(), Fixed(x.gpu_hours_empty).c_str(),
      Fixed(x.gpu_hours_fragmented).c_str(), Fixed(x.gpu_hours_moving).c_str());
  std::printf("consolidation: %zu nodes emptied, %zu job moves\n", x.nodes_consolidated,
              x.jobs_moved);
  char plan[96] = "no forecast";
  if (o.policy.mode == sched::ScaleMode::kPredictive) {
    std::snprintf(plan, sizeof plan, "the forecast plus %g mean shortfalls (%s)",
                  o.policy.forecast_margin,
                  o.policy.margin_by_hour ? "of the hour of the day" : "recent");
  } else if (o.policy.mode == sched::ScaleMode::kOracle) {
    std::snprintf(plan, sizeof plan, "the trace's exact demand ahead");
  }
  std::printf("policy: target share %g, %s, lead time %g s\n", o.policy.target_share, plan,
              o.policy.lead_time_s);
  std::printf("%.1f simulated hours replayed in %.2f s%s\n", x.span_s / 3600, took_s,
              x.unplaceable ? (", " + std::to_string(x.unplaceable) +
                               " jobs larger than the pool at --max-nodes left out")
                                  .c_str()
                            : "");
}

}  // namespace

void AddReplayCommand(CLI::App& app, Globals& g) {
  static ReplayFlags f;
  auto* r = app.add_subcommand(
      "replay", "Replay a job trace through the scheduler and autoscaler in virtual time");
  AddReplayFlags(r, f);
  r->callback([&g, r] {
    auto text = ReadInput(g, f.trace);
    if (!text) return;
    auto trace = f.format == "openb" ? sched::ParseOpenbTrace(*text, f.trace)
                                     : sched::ParseTrace(*text, f.trace);
    if (!trace.ok()) {
      std::fprintf(stderr, "error: %s\n", trace.error().message.c_str());
      g.exit_code = 1;
      return;
    }
    auto o = ReplayOptionsOf(f, r->get_option("--target-share")->count() > 0);
    if (!o.ok()) {
      std::fprintf(stderr, "error: %s\n", o.error().message.c_str());
      g.exit_code = 2;  // as the policy's other errors
      return;
    }
    if (f.tune) {
      RunTune(g, f, trace.value(), *o);
      return;
    }
    auto started = std::chrono::steady_clock::now();
    auto res = sched::Replay(std::move(trace.value()), *o);
    std::chrono::duration<double> took = std::chrono::steady_clock::now() - started;
    if (!res.ok()) {
      std::fprintf(stderr, "error: %s\n", res.error().message.c_str());
      g.exit_code = 2;
      return;
    }
    const auto& x = res.value();
    Show(g, ReplayJson(x, *o, took.count()),
         [&](const json::value&) { PrintReplay(x, *o, took.count()); });
  });
}

}  // namespace gpufleet::cli
