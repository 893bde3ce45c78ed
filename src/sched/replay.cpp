#include "sched/replay.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <deque>
#include <map>
#include <optional>
#include <queue>

#include "sched/consolidate.h"
#include "sched/forecast.h"
#include "sched/pool.h"

namespace gpufleet::sched {
namespace {

std::vector<std::string_view> SplitCsv(std::string_view line) {
  std::vector<std::string_view> out;
  size_t pos = 0;
  while (true) {
    size_t comma = line.find(',', pos);
    out.push_back(line.substr(pos, comma == std::string_view::npos ? comma : comma - pos));
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  for (auto& f : out) {
    while (!f.empty() && (f.back() == '\r' || f.back() == ' ')) f.remove_suffix(1);
    while (!f.empty() && f.front() == ' ') f.remove_prefix(1);
  }
  return out;
}

bool ToDouble(std::string_view s, double& out) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size() && std::isfinite(out);
}

// Calls fn(line number, fields) for each data row; the header's column names come first.
template <typename Fn>
Status EachRow(std::string_view text, const std::string& name,
               std::vector<std::string_view>& header, Fn fn) {
  size_t pos = 0;
  int line_no = 0;
  bool have_header = false;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? nl : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    ++line_no;
    if (line.empty() || line == "\r" || line.front() == '#') continue;
    auto fields = SplitCsv(line);
    if (!have_header) {
      header = fields;
      have_header = true;
      continue;
    }
    if (fields.size() != header.size()) {
      return MakeError(ErrorCode::kInvalidArgument,
                       name + ":" + std::to_string(line_no) + ": " + std::to_string(fields.size()) +
                           " columns, the header has " + std::to_string(header.size()));
    }
    if (auto s = fn(line_no, fields); !s.ok()) return s;
  }
  if (!have_header) return MakeError(ErrorCode::kInvalidArgument, name + ": empty trace");
  return {};
}

int Column(const std::vector<std::string_view>& header, std::string_view col) {
  for (size_t i = 0; i < header.size(); ++i) {
    if (header[i] == col) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

Result<std::vector<TraceJob>> ParseTrace(std::string_view text, const std::string& name) {
  std::vector<TraceJob> jobs;
  std::vector<std::string_view> header;
  int c_submit = -1, c_dur = -1, c_gpus = -1, c_team = -1, c_movable = -1, c_per_node = -1;
  auto s = EachRow(text, name, header, [&](int line, const std::vector<std::string_view>& f) {
    if (c_submit < 0) {
      c_per_node = Column(header, "gpus_per_node");
      c_submit = Column(header, "submit_time");
      c_dur = Column(header, "duration_s");
      c_gpus = Column(header, "gpus");
      c_team = Column(header, "team");
      c_movable = Column(header, "movable");
      if (c_submit < 0 || c_dur < 0 || c_gpus < 0) {
        std::string hint =
            Column(header, "num_gpu") >= 0 ? " (an openb pod list? --format openb)" : "";
        return Status(
            MakeError(ErrorCode::kInvalidArgument,
                      name + ":1: the header must name submit_time,duration_s,gpus" + hint));
      }
    }
    auto bad = [&](const char* col, std::string_view v, const char* want) {
      return Status(MakeError(
          ErrorCode::kInvalidArgument,
          name + ":" + std::to_string(line) + ": " + col + " '" + std::string(v) + "' " + want));
    };
    TraceJob j;
    double gpus = 0;
    if (!ToDouble(f[c_submit], j.submit_s) || j.submit_s < 0) {
      return bad("submit_time", f[c_submit], "is not seconds >= 0");
    }
    if (j.submit_s > kMaxSubmitS) {
      return bad("submit_time", f[c_submit], "is more than 1e11 seconds (milliseconds?)");
    }
    if (!ToDouble(f[c_dur], j.duration_s) || j.duration_s < 0) {
      return bad("duration_s", f[c_dur], "is not seconds >= 0");
    }
    if (j.duration_s > kMaxReplaySpanS) {
      return bad("duration_s", f[c_dur], "is more than 366 days");
    }
    if (!ToDouble(f[c_gpus], gpus) || gpus < 1 || gpus != std::floor(gpus) || gpus > 100000) {
      return bad("gpus", f[c_gpus], "is not a whole number of GPUs >= 1");
    }
    j.gpus = static_cast<int>(gpus);
    if (c_per_node >= 0 && !f[c_per_node].empty()) {
      double k = 0;
      if (!ToDouble(f[c_per_node], k) || k < 1 || k != std::floor(k) || k > gpus ||
          static_cast<int>(gpus) % static_cast<int>(k) != 0) {
        return bad("gpus_per_node", f[c_per_node], "is not a whole number that divides gpus");
      }
      j.gpus_per_node = static_cast<int>(k);
    }
    if (c_team >= 0) j.team = std::string(f[c_team]);
    if (c_movable >= 0) {
      std::string_view m = f[c_movable];
      if (m == "1" || m == "true") {
        j.movable = 1;
      } else if (m == "0" || m == "false") {
        j.movable = 0;
      } else {
        return bad("movable", m, "is not 1, 0, true or false");
      }
    }
    jobs.push_back(std::move(j));
    return Status();
  });
  if (!s.ok()) return s.error();
  if (c_submit < 0) return MakeError(ErrorCode::kInvalidArgument, name + ": no jobs");
  return jobs;
}

Result<std::vector<TraceJob>> ParseOpenbTrace(std::string_view text, const std::string& name) {
  std::vector<TraceJob> jobs;
  std::vector<std::string_view> header;
  int c_gpu = -1, c_create = -1, c_delete = -1, c_sched = -1, c_qos = -1;
  auto s = EachRow(text, name, header, [&](int line, const std::vector<std::string_view>& f) {
    if (c_gpu < 0) {
      c_gpu = Column(header, "num_gpu");
      c_create = Column(header, "creation_time");
      c_delete = Column(header, "deletion_time");
      c_sched = Column(header, "scheduled_time");
      c_qos = Column(header, "qos");
      if (c_gpu < 0 || c_create < 0 || c_delete < 0) {
        return Status(MakeError(
            ErrorCode::kInvalidArgument,
            name + ":1: not an openb pod list (needs num_gpu, creation_time, deletion_time)"));
      }
    }
    double gpus = 0, created = 0, deleted = 0, scheduled = -1;
    if (!ToDouble(f[c_gpu], gpus) || !ToDouble(f[c_create], created)) {
      return Status(MakeError(ErrorCode::kInvalidArgument, name + ":" + std::to_string(line) +
                                                               ": bad num_gpu or creation_time"));
    }
    if (gpus < 1 || f[c_delete].empty() || !ToDouble(f[c_delete], deleted)) return Status();
    if (c_sched >= 0 && !f[c_sched].empty()) ToDouble(f[c_sched], scheduled);
    TraceJob j;
    j.submit_s = created;
    j.duration_s = std::max(0.0, deleted - (scheduled >= created ? scheduled : created));
    if (gpus > 100000 || j.duration_s > kMaxReplaySpanS || created < 0 || created > kMaxSubmitS) {
      return Status(MakeError(ErrorCode::kInvalidArgument,
                              name + ":" + std::to_string(line) +
                                  ": more than 100000 GPUs, a run of more than 366 days, or a "
                                  "creation_time not in 0..1e11 seconds"));
    }
    j.gpus = static_cast<int>(gpus);
    if (c_qos >= 0) j.team = std::string(f[c_qos]);
    jobs.push_back(std::move(j));
    return Status();
  });
  if (!s.ok()) return s.error();
  return jobs;
}

namespace {

double Quantile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  rank = std::clamp<size_t>(rank, 1, v.size());
  std::nth_element(v.begin(), v.begin() + static_cast<long>(rank - 1), v.end());
  return v[rank - 1];
}

// The trace's own demand (every job running from its submit time), for the oracle: the peak
// over a window that only moves forward, as a sliding-window maximum over its change points.
class OracleDemand {
 public:
  explicit OracleDemand(const std::vector<Job>& jobs) {
    std::vector<std::pair<double, int>> d;
    d.reserve(jobs.size() * 2);
    for (const Job& j : jobs) {
      d.emplace_back(j.submit_s, j.gpus);
      d.emplace_back(j.submit_s + j.duration_s, -j.gpus);
    }
    std::sort(d.begin(), d.end());
    double level = 0;
    for (size_t i = 0; i < d.size(); ++i) {
      level += d[i].second;
      if (i + 1 < d.size() && d[i + 1].first == d[i].first) continue;
      points_.emplace_back(d[i].first, level);
    }
  }
  // The largest demand in [from, to]; calls come with non-decreasing `from` and `to`.
  double Peak(double from, double to) {
    while (next_ < points_.size() && points_[next_].first <= to) {
      while (!window_.empty() && points_[window_.back()].second <= points_[next_].second) {
        window_.pop_back();
      }
      window_.push_back(next_++);
    }
    while (at_ + 1 < points_.size() && points_[at_ + 1].first <= from) ++at_;
    while (!window_.empty() && points_[window_.front()].first <= from) window_.pop_front();
    double now = points_.empty() || points_[at_].first > from ? 0 : points_[at_].second;
    return window_.empty() ? now : std::max(now, points_[window_.front()].second);
  }

 private:
  std::vector<std::pair<double, double>> points_;  // (time, demand from then on)
  size_t next_ = 0, at_ = 0;
  std::deque<size_t> window_;
};

enum EventKind { kFinish = 0, kNodeReady = 1, kArrival = 2, kTick = 3 };
struct Event {
  double t;
  int kind;
  int64_t id;
  bool operator>(const Event& o) const { return t != o.t ? t > o.t : kind > o.kind; }
};

}  // namespace

Result<ReplayResult> Replay(std::vector<TraceJob> trace, const ReplayOptions& o) {
  const ScalePolicy& p = o.policy;
  if (auto why = p.Validate(); !why.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "policy: " + why);
  }
  if (o.gpus_per_node < 1 || o.gpus_per_node > 64) {
    return MakeError(ErrorCode::kInvalidArgument, "--pool-gpus-per-node must be 1 to 64");
  }
  if (!(o.time_scale >= 1e-3 && o.time_scale <= 1e6) || !(o.size_scale > 0)) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "--time-scale must be 0.001 to 1000000 and --size-scale more than 0");
  }
  if (o.size_scale > kMaxSizeScale ||
      static_cast<double>(trace.size()) * o.size_scale > kMaxReplayJobs) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "--size-scale must be at most 1000 and give at most 10,000,000 jobs (" +
                         std::to_string(trace.size()) + " in the trace)");
  }
  for (const TraceJob& t : trace) {
    if (!(t.duration_s >= 0 && t.duration_s <= kMaxReplaySpanS)) {
      return MakeError(ErrorCode::kInvalidArgument, "a job runs more than 366 days");
    }
    if (!(t.submit_s >= 0 && t.submit_s <= kMaxSubmitS)) {
      return MakeError(ErrorCode::kInvalidArgument, "a job's submit time is not 0 to 1e11 s");
    }
  }
  if (!(o.move_cost_s >= 0)) {
    return MakeError(ErrorCode::kInvalidArgument, "--move-cost must be 0 or more seconds");
  }
  if (!(o.movable_share >= 0 && o.movable_share <= 1)) {
    return MakeError(ErrorCode::kInvalidArgument, "--movable-share must be in [0, 1]");
  }
  if (!(o.reserve_after_s >= 0)) {
    return MakeError(ErrorCode::kInvalidArgument, "--reserve-after must be 0 or more seconds");
  }
  const int G = o.gpus_per_node;
  ReplayResult r;
  r.policy = ToString(p.mode);

  // Scaled jobs, in submit order.
  std::vector<Job> jobs;
  int whole = static_cast<int>(std::floor(o.size_scale));
  double frac = o.size_scale - whole;
  const int64_t max_gpus = static_cast<int64_t>(p.max_nodes) * G;
  for (size_t i = 0; i < trace.size(); ++i) {
    const TraceJob& t = trace[i];
    // Deterministic: the same trace and scale always give the same jobs.
    uint64_t h = (i + 1) * 0x9E3779B97F4A7C15ULL;
    int copies = whole + ((h >> 11) * 0x1.0p-53 < frac ? 1 : 0);
    uint64_t hm = (i + 1) * 0xD1B54A32D192ED03ULL;
    bool movable = t.movable >= 0 ? t.movable == 1 : (hm >> 11) * 0x1.0p-53 < o.movable_share;
    // GPUs per node beyond the pool's node, or more nodes than the pool may have: never placed.
    int per = t.gpus_per_node > 0 ? t.gpus_per_node : std::min(t.gpus, G);
    bool too_wide = t.gpus_per_node > G || (t.gpus + per - 1) / per > p.max_nodes;
    for (int c = 0; c < copies; ++c) {
      if (t.gpus > max_gpus || too_wide) {
        ++r.unplaceable;
        continue;
      }
      Job j;
      j.id = static_cast<int64_t>(jobs.size());
      j.team = t.team;
      j.gpus = t.gpus;
      j.gpus_per_node = t.gpus_per_node;
      j.submit_s = t.submit_s / o.time_scale;
      j.duration_s = t.duration_s;
      j.movable = movable;
      jobs.push_back(std::move(j));
    }
  }
  std::stable_sort(jobs.begin(), jobs.end(),
                   [](const Job& a, const Job& b) { return a.submit_s < b.submit_s; });
  for (size_t i = 0; i < jobs.size(); ++i) jobs[i].id = static_cast<int64_t>(i);
  r.jobs = jobs.size();
  if (jobs.empty()) return r;
  if (double span = jobs.back().submit_s - jobs.front().submit_s; span > kMaxReplaySpanS) {
    char why[160];
    std::snprintf(why, sizeof why,
                  "the jobs are submitted over %.0f days at --time-scale %g; at most 366 days "
                  "are replayed",
                  span / 86400, o.time_scale);
    return MakeError(ErrorCode::kInvalidArgument, why);
  }
  double longest = 0;
  for (const Job& j : jobs) longest = std::max(longest, j.duration_s);
  if (double decisions = (jobs.back().submit_s - jobs.front().submit_s + longest) / p.interval_s;
      decisions > 1e7) {
    char why[160];
    std::snprintf(why, sizeof why,
                  "%.0f decisions at --interval %g s; at most 10,000,000 are replayed (a longer "
                  "--interval)",
                  decisions, p.interval_s);
    return MakeError(ErrorCode::kInvalidArgument, why);
  }

  Pool pool(G);
  Queue queue(o.reserve_after_s);
  const double t0 = jobs.front().submit_s;
  DemandTracker tracker(o.forecast_step_s, p.lead_time_s, p.interval_s);
  for (const auto& [t, demand] : o.demand_before) {
    if (t < t0) tracker.Observe(t, demand);
  }
  tracker.ResetAccuracy();  // the MAPE reported is the replay's own
  std::optional<OracleDemand> oracle;
  if (p.mode == ScaleMode::kOracle) oracle.emplace(jobs);

  std::priority_queue<Event, std::vector<Event>, std::greater<>> events;
  for (const Job& j : jobs) events.push({j.submit_s, kArrival, j.id});
  // Consolidation: a moved job's earlier finish event is stale; each node's jobs (the jobs of
  // whole-node jobs too, which are never moved) and since when it has been lightly used.
  std::vector<double> finish_at(jobs.size(), -1);
  std::vector<std::vector<int64_t>> on_node;
  std::vector<double> light_since;
  double moving_gpu_s = 0;
  int initial = o.initial_nodes < 0 ? p.MinimumAt(t0)
                                    : std::clamp(o.initial_nodes, p.MinimumAt(t0), p.max_nodes);
  for (int i = 0; i < initial; ++i) pool.MarkReady(pool.AddNode(t0, t0), t0);
  events.push({t0, kTick, 0});

  double now = t0, last_up = -1e18, last_down = -1e18;
  double provisioned_gpu_s = 0, busy_gpu_s = 0, starting_gpu_s = 0, empty_gpu_s = 0;
  size_t finished = 0;
  int live_nodes = initial;  // provisioning + ready
  r.peak_nodes = initial;

  auto start = [&](double t) {
    for (Job* j : queue.Schedule(pool, t)) {
      finish_at[static_cast<size_t>(j->id)] = t + j->duration_s;
      events.push({t + j->duration_s, kFinish, j->id});
      for (int n : j->nodes) {
        if (on_node.size() <= static_cast<size_t>(n)) on_node.resize(static_cast<size_t>(n) + 1);
        on_node[static_cast<size_t>(n)].push_back(j->id);
      }
    }
  };
  // Empties up to `max_nodes` lightly used nodes whose jobs fit elsewhere and removes them;
  // with max_nodes 0 it only keeps each node's light_since.
  auto consolidate = [&](int max_nodes) {
    const auto& nodes = pool.nodes();
    light_since.resize(nodes.size(), -1);
    on_node.resize(nodes.size());
    // Most ticks may empty nothing: then only light_since is kept, and no plan is built.
    std::vector<NodeLoad> load(max_nodes > 0 ? nodes.size() : 0);
    for (size_t i = 0; i < nodes.size(); ++i) {
      const PoolNode& n = nodes[i];
      bool light = n.state == NodeState::kReady && LightlyUsed(G - n.free, G, p.consolidate_below);
      for (size_t k = 0; light && k < on_node[i].size(); ++k) {
        const Job& j = jobs[static_cast<size_t>(on_node[i][k])];
        light = j.movable && j.nodes.size() == 1;
      }
      if (!light) {
        light_since[i] = -1;
      } else if (light_since[i] < 0) {
        light_since[i] = now;
      }
      if (load.empty() || n.state != NodeState::kReady) continue;
      load[i].free = n.free;
      load[i].running = n.jobs > 0;
      for (int64_t id : on_node[i]) {
        load[i].jobs.push_back(pool.PerNode(jobs[static_cast<size_t>(id)]));  // its GPUs here
      }
      load[i].candidate = light && now - light_since[i] >= p.idle_before_remove_s;
    }
    if (load.empty()) return 0;
    int done = 0;
    for (const NodeMoves& m : PlanConsolidation(load, max_nodes)) {
      auto from = static_cast<size_t>(m.node);
      std::vector<int64_t> ids = std::move(on_node[from]);
      on_node[from].clear();
      for (size_t k = 0; k < ids.size(); ++k) {
        Job& j = jobs[static_cast<size_t>(ids[k])];
        double left = finish_at[static_cast<size_t>(j.id)] - now;
        pool.Release(j, now);
        pool.Take(m.to[k], j.gpus, now + left + o.move_cost_s);
        j.nodes = {m.to[k]};
        on_node[static_cast<size_t>(m.to[k])].push_back(j.id);
        double end = now + left + o.move_cost_s;
        finish_at[static_cast<size_t>(j.id)] = end;
        events.push({end, kFinish, j.id});
        moving_gpu_s += o.move_cost_s * j.gpus;
        ++r.jobs_moved;
      }
      light_since[from] = -1;
      done += pool.Remove(m.node) ? 1 : 0;
    }
    r.nodes_consolidated += static_cast<size_t>(done);
    return done;
  };
  size_t handled = 0;
  while (!events.empty()) {
    if (o.cancel && (++handled & 4095) == 0 && o.cancel->load()) {
      return MakeError(ErrorCode::kUnavailable, "the replay was cancelled");
    }
    Event e = events.top();
    events.pop();
    if (e.kind == kTick && finished == jobs.size()) continue;  // the trace is over
    double dt = e.t - now;
    if (dt > 0) {
      provisioned_gpu_s += static_cast<double>(live_nodes) * G * dt;
      busy_gpu_s += static_cast<double>(pool.busy_gpus()) * dt;
      starting_gpu_s += static_cast<double>(pool.provisioning_nodes()) * G * dt;
      empty_gpu_s += static_cast<double>(pool.empty_nodes()) * G * dt;
      now = e.t;
    }
    switch (e.kind) {
      case kArrival:
        queue.Push(&jobs[static_cast<size_t>(e.id)]);
        start(now);
        break;
      case kFinish: {
        Job& j = jobs[static_cast<size_t>(e.id)];
        // A moved job's first finish is stale (with no move cost both come at the same time).
        if (finish_at[static_cast<size_t>(e.id)] != e.t) break;
        finish_at[static_cast<size_t>(e.id)] = -1;
        for (int n : j.nodes) std::erase(on_node[static_cast<size_t>(n)], j.id);
        pool.Release(j, now);
        queue.OnFinished(j);
        ++finished;
        start(now);
        break;
      }
      case kNodeReady:
        pool.MarkReady(static_cast<int>(e.id), now);
        start(now);
        break;
      case kTick: {
        double demand = static_cast<double>(pool.busy_gpus() + queue.queued_gpus());
        tracker.Observe(now, demand);
        ScaleInput in;
        in.now_s = now;
        in.gpus_per_node = G;
        in.ready = pool.ready_nodes();
        in.provisioning = pool.provisioning_nodes();
        in.demand_gpus = demand;
        {
          std::map<int, int> queued;
          for (const Job* j : queue.jobs()) ++queued[QueueSize(j->gpus, j->gpus_per_node, G)];
          // Ready nodes running a job (every replayed job has a GPU, so such a node is not
          // wholly free).
          int busy = pool.ready_nodes() - pool.empty_nodes();
          in.queue_nodes = QueueNodes(busy, queued, G);
        }
        if (p.mode == ScaleMode::kPredictive) {
          in.peak_forecast_gpus = tracker.PlanningPeak(p.forecast_margin, p.margin_by_hour);
        } else if (p.mode == ScaleMode::kOracle) {
          in.peak_forecast_gpus = oracle->Peak(now, now + p.lead_time_s + p.interval_s);
        }
        double idle_since = now - p.idle_before_remove_s;
        in.idle_removable = pool.IdleNodeCount(idle_since);
        in.last_up_s = last_up;
        in.last_down_s = last_down;
        ScaleDecision d = Decide(p, in);
        if (d.delta > 0) {
          for (int i = 0; i < d.delta; ++i) {
            int node = pool.AddNode(now, now + p.lead_time_s);
            events.push({now + p.lead_time_s, kNodeReady, node});
          }
          live_nodes += d.delta;
          last_up = now;
          ++r.scale_events;
        } else if (d.delta < 0) {
          int removed = 0;
          for (int node : pool.IdleNodes(idle_since, static_cast<size_t>(-d.delta))) {
            removed += pool.Remove(node) ? 1 : 0;
          }
          live_nodes -= removed;
          last_down = now;
          ++r.scale_events;
        }
        // Consolidation is a scale-down too: only with nothing queued or starting, a surplus
        // left, and the down cooldown over.
        int surplus = pool.ready_nodes() + pool.provisioning_nodes() - d.target;
        bool may = p.consolidate_below > 0 && d.delta <= 0 && surplus > 0 && queue.empty() &&
                   pool.provisioning_nodes() == 0 && now - last_down >= p.down_cooldown_s;
        if (p.consolidate_below > 0) {
          if (int n = consolidate(may ? std::min(surplus, p.step_down) : 0); n > 0) {
            live_nodes -= n;
            last_down = now;
            ++r.scale_events;
          }
        }
        r.peak_nodes = std::max(r.peak_nodes, live_nodes);
        events.push({now + p.interval_s, kTick, 0});
        break;
      }
    }
  }

  std::vector<double> waits;
  waits.reserve(jobs.size());
  double wait_sum = 0;
  for (const Job& j : jobs) {
    double w = j.start_s - j.submit_s;
    waits.push_back(w);
    wait_sum += w;
    if (w > p.lead_time_s) ++r.jobs_waited_over_lead_time;
  }
  r.wait_mean_s = wait_sum / static_cast<double>(waits.size());
  r.wait_p50_s = Quantile(waits, 0.50);
  r.wait_p95_s = Quantile(waits, 0.95);
  r.wait_p99_s = Quantile(waits, 0.99);
  r.gpu_hours_provisioned = provisioned_gpu_s / 3600;
  r.gpu_hours_busy = (busy_gpu_s - moving_gpu_s) / 3600;
  r.gpu_hours_idle = r.gpu_hours_provisioned - r.gpu_hours_busy;
  r.gpu_hours_starting = starting_gpu_s / 3600;
  r.gpu_hours_empty = empty_gpu_s / 3600;
  r.gpu_hours_moving = moving_gpu_s / 3600;
  r.gpu_hours_fragmented =
      r.gpu_hours_idle - r.gpu_hours_starting - r.gpu_hours_empty - r.gpu_hours_moving;
  r.span_s = now - t0;
  if (p.mode == ScaleMode::kPredictive) {
    auto s = tracker.forecaster().stats();
    r.forecast_mape = s.mape;
    r.forecast_bias = s.bias;
    r.forecast_model = s.model;
  } else {
    r.forecast_mape = NAN;
    r.forecast_bias = NAN;
  }
  return r;
}

}  // namespace gpufleet::sched
