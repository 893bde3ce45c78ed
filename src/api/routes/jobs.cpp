// Jobs: POST /api/v1/jobs (submit), GET /api/v1/jobs and /api/v1/jobs/{id}, DELETE
// /api/v1/jobs/{id} (cancel).

#include "api/json_util.h"
#include "api/peers.h"
#include "api/scope.h"
#include "common/json_text.h"
#include "model/json.h"

namespace json = boost::json;

namespace gpufleet::api {
namespace {

// A job's queue wait over its starts, and a queued one's wait so far.
int64_t WaitMs(const workload::Job& j, int64_t now) {
  if (j.state == workload::JobState::kQueued && j.queued_ms > 0 && now > j.queued_ms)
    return j.wait_ms + (now - j.queued_ms);
  return j.wait_ms;
}

// `now`: a running job's GPU-hours and run time include its current run, a queued one's wait
// its wait so far.
json::object JobJson(const workload::Job& j, int64_t now) {
  json::array placement;
  for (const auto& p : j.placement) {
    json::array gpus;
    for (int g : p.gpus) gpus.push_back(g);
    placement.push_back(json::object{{"node", p.node}, {"gpus", std::move(gpus)}});
  }
  auto time = [](int64_t ms) { return ms ? json::value(FormatTime(ms)) : json::value(nullptr); };
  double run_s = j.spec.gpus > 0 ? j.gpu_hours * 3600 / j.spec.gpus : 0;  // ended runs
  if (j.state == workload::JobState::kRunning && now > j.start_ms) {
    run_s += static_cast<double>(now - j.start_ms) / 1000;
  }
  return {
      {"id", j.id},
      {"team", j.spec.team},
      {"project", j.spec.project},
      {"cluster", j.spec.cluster},
      {"pool", j.spec.pool},
      {"gpu_model", j.spec.gpu_model},
      {"gpus", j.spec.gpus},
      {"gpus_per_node",
       j.spec.gpus_per_node ? json::value(j.spec.gpus_per_node) : json::value(nullptr)},
      {"priority", j.spec.priority},
      {"duration_s", j.spec.duration_ms / 1000},
      {"state", workload::ToString(j.state)},
      {"reason", j.reason},
      {"submitted_at", time(j.submit_ms)},
      {"started_at", time(j.start_ms)},
      {"ended_at", time(j.end_ms)},
      {"wait_s", static_cast<double>(WaitMs(j, now)) / 1000.0},
      {"run_s", run_s},
      {"gpu_hours", run_s * j.spec.gpus / 3600},
      {"requeues", j.requeues},
      {"movable", j.spec.movable},
      {"sim_profile",
       j.spec.sim_profile.empty() ? json::value(nullptr) : json::value(j.spec.sim_profile)},
      {"moves", j.moves},
      {"source", j.source.empty() ? "gpufleet" : j.source},
      {"external_id", j.external_id.empty() ? json::value(nullptr) : json::value(j.external_id)},
      {"user", j.user.empty() ? json::value(nullptr) : json::value(j.user)},
      {"placement", std::move(placement)}};
}

Response JobsUnavailable() {
  return ErrorResponse(MakeError(ErrorCode::kUnavailable, "jobs are not running"));
}

Result<int64_t> JobId(const Request& req) {
  const std::string& text = req.params.at("id");
  if (text.empty() || text.size() > 15 ||
      text.find_first_not_of("0123456789") != std::string::npos) {
    return MakeError(ErrorCode::kInvalidArgument, "a job id is a number, not '" + text + "'");
  }
  return std::stoll(text);
}

// A job outside the caller's cluster scope does not exist for it.
Result<workload::Job> VisibleJob(ApiContext& ctx, const Request& req, const Principal& who) {
  auto id = JobId(req);
  if (!id.ok()) return id.error();
  auto job = ctx.jobs->Get(id.value());
  if (!job.ok() || !who.CanSeeCluster(job->spec.cluster)) {
    return MakeError(ErrorCode::kNotFound, "no job " + std::to_string(id.value()));
  }
  return job;
}

// POST /api/v1/jobs
Response PostJobs(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.jobs) return JobsUnavailable();
  if (auto led = AskLeader(ctx, req)) return std::move(*led);  // the leader places jobs
  auto body = ParseObject(req.body);
  if (!body.ok()) return ErrorResponse(body.error());
  if (auto s =
          OnlyFields(*body, {"team", "project", "cluster", "pool", "gpu_model", "gpus",
                             "gpus_per_node", "priority", "duration", "movable", "sim_profile"});
      !s.ok()) {
    return ErrorResponse(s.error());
  }
  workload::JobSpec spec;
  auto team = GetString(*body, "team", std::string());
  auto project = GetString(*body, "project", std::string());
  auto cluster = GetString(*body, "cluster", std::string());
  auto pool = GetString(*body, "pool", std::string());
  auto model = GetString(*body, "gpu_model", std::string());
  auto gpus = GetInt(*body, "gpus", 1);
  auto per_node = GetInt(*body, "gpus_per_node", 0);
  if (!per_node.ok()) return ErrorResponse(per_node.error());
  if (per_node.value() < 0 || per_node.value() > 100'000) {
    return ErrorResponse(
        MakeError(ErrorCode::kInvalidArgument, "'gpus_per_node' must be 1 or more"));
  }
  auto priority = GetInt(*body, "priority", 0);
  auto duration = GetString(*body, "duration", std::string());
  auto sim_profile = GetString(*body, "sim_profile", std::string());
  auto movable = GetBool(*body, "movable", false);
  if (!movable.ok()) return ErrorResponse(movable.error());
  for (const auto* r : {&team, &project, &cluster, &pool, &model, &duration, &sim_profile}) {
    if (!r->ok()) return ErrorResponse(r->error());
  }
  if (!gpus.ok()) return ErrorResponse(gpus.error());
  if (!priority.ok()) return ErrorResponse(priority.error());
  if (gpus.value() < 1 || gpus.value() > 100'000) {
    return ErrorResponse(MakeError(ErrorCode::kInvalidArgument, "'gpus' must be 1 to 100000"));
  }
  spec.team = team.value();
  spec.project = project.value();
  spec.cluster = cluster.value();
  spec.pool = pool.value();
  spec.gpu_model = model.value();
  spec.gpus = static_cast<int>(gpus.value());
  spec.gpus_per_node = static_cast<int>(per_node.value());
  if (priority.value() < -1'000'000 || priority.value() > 1'000'000) {
    return ErrorResponse(
        MakeError(ErrorCode::kInvalidArgument, "'priority' must be from -1000000 to 1000000"));
  }
  spec.priority = static_cast<int>(priority.value());
  spec.movable = movable.value();
  spec.sim_profile = sim_profile.value();
  if (!duration->empty()) {
    spec.duration_ms = ParseDurationMs(duration.value());
    if (spec.duration_ms <= 0) {
      return ErrorResponse(
          MakeError(ErrorCode::kInvalidArgument, "'duration' must be such as 90s, 30m or 2h"));
    }
  }
  // A pool the token cannot see is refused before anything is queued.
  if (!spec.pool.empty()) {
    if (auto s = ScopePool(ctx, who, spec.pool); !s.ok()) return ErrorResponse(s.error());
  }
  if (!spec.cluster.empty() && !who.CanSeeCluster(spec.cluster)) {
    return ErrorResponse(MakeError(ErrorCode::kPermissionDenied,
                                   "cluster '" + spec.cluster + "' is outside this token's scope"));
  }
  auto job = ctx.jobs->Submit(spec);
  if (!job.ok()) return ErrorResponse(job.error());
  if (!who.CanSeeCluster(job->spec.cluster)) {  // the pool's cluster, now known
    (void)ctx.jobs->Cancel(job->id);
    return ErrorResponse(MakeError(ErrorCode::kPermissionDenied,
                                   "pool '" + job->spec.pool + "' is outside this token's scope"));
  }
  Response r = ObjectResponse(201, JobJson(job.value(), ctx.clock->NowMs()));
  r.audit_target = "job/" + std::to_string(job->id);
  r.audit_after = r.body;
  return r;
}

// GET /api/v1/jobs
Response GetJobs(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.jobs) return JobsUnavailable();
  auto page = ParsePage(req);
  if (!page.ok()) return ErrorResponse(page.error());
  workload::JobFilter f;
  f.state = req.Param("state");
  if (!f.state.empty() && f.state != "queued" && f.state != "running" && f.state != "completed" &&
      f.state != "cancelled") {
    return ErrorResponse(MakeError(ErrorCode::kInvalidArgument,
                                   "'state' must be queued, running, completed or cancelled"));
  }
  f.source = req.Param("source");
  if (!f.source.empty() && f.source != "gpufleet" && f.source != "slurm") {
    return ErrorResponse(
        MakeError(ErrorCode::kInvalidArgument, "'source' must be gpufleet or slurm"));
  }
  f.team = req.Param("team");
  f.pool = req.Param("pool");
  f.cluster = req.Param("cluster");
  f.clusters = who.clusters;
  // Only the page's jobs are copied: the list may hold a week of ended jobs.
  size_t total = 0;
  json::array items;
  for (const auto& j : ctx.jobs->List(f, page->offset, page->limit, total)) {
    items.push_back(JobJson(j, ctx.clock->NowMs()));
  }
  return PageResponse(std::move(items), total, page.value());
}

// DELETE /api/v1/jobs/{id}
Response DeleteJobsId(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.jobs) return JobsUnavailable();
  if (auto led = AskLeader(ctx, req)) return std::move(*led);
  auto job = VisibleJob(ctx, req, who);
  if (!job.ok()) return ErrorResponse(job.error());
  auto before = JobJson(job.value(), ctx.clock->NowMs());
  auto cancelled = ctx.jobs->Cancel(job->id);
  if (!cancelled.ok()) return ErrorResponse(cancelled.error());
  Response r = ObjectResponse(200, JobJson(cancelled.value(), ctx.clock->NowMs()));
  r.audit_target = "job/" + std::to_string(job->id);
  r.audit_before = JsonText(before);
  r.audit_after = r.body;
  return r;
}

}  // namespace

void AddJobRoutes(Router& router, ApiContext& ctx) {
  router.Add("POST", "/api/v1/jobs", Role::kOperator,
             [&ctx](const Request& req, const Principal& who) { return PostJobs(ctx, req, who); });
  router.Scoped(Scope::kClusters);

  router.Add("GET", "/api/v1/jobs", Role::kViewer,
             [&ctx](const Request& req, const Principal& who) { return GetJobs(ctx, req, who); });
  router.Scoped(Scope::kClusters);

  router.Add("GET", "/api/v1/jobs/{id}", Role::kViewer,
             [&ctx](const Request& req, const Principal& who) {
               if (!ctx.jobs) return JobsUnavailable();
               auto job = VisibleJob(ctx, req, who);
               if (!job.ok()) return ErrorResponse(job.error());
               return ObjectResponse(200, JobJson(job.value(), ctx.clock->NowMs()));
             });
  router.Scoped(Scope::kClusters);

  router.Add(
      "DELETE", "/api/v1/jobs/{id}", Role::kOperator,
      [&ctx](const Request& req, const Principal& who) { return DeleteJobsId(ctx, req, who); });
  router.Scoped(Scope::kClusters);
}

}  // namespace gpufleet::api
