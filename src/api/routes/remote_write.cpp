// GET /api/v1/remote-write: each remote-write receiver's state (remote/writer.h), and the same
// figures in /metrics.

#include "api/json_util.h"
#include "remote/writer.h"

namespace json = boost::json;

namespace gpufleet::api {

namespace {

std::string TimeOrEmpty(int64_t ms) { return ms ? FormatTime(ms) : ""; }

Response GetRemoteWrite(ApiContext& ctx) {
  json::array items;
  json::object out;
  if (ctx.remote_write) {
    for (const auto& r : ctx.remote_write->Receivers()) {
      items.push_back(json::object{{"name", r.name},
                                   {"url", r.url},
                                   {"state", r.state},
                                   {"samples_sent", r.sent},
                                   {"samples_failed", r.failed},
                                   {"samples_dropped", r.dropped},
                                   {"samples_pending", r.pending},
                                   {"requests", r.requests},
                                   {"retries", r.retries},
                                   {"last_error", r.last_error},
                                   {"last_error_at", TimeOrEmpty(r.last_error_ms)},
                                   {"last_sent_at", TimeOrEmpty(r.last_sent_ms)},
                                   {"newest_sample_sent", TimeOrEmpty(r.newest_sent_sample_ms)}});
    }
    out["queue_bytes"] = ctx.remote_write->queue_bytes();
    out["window_bytes"] = ctx.remote_write->window_bytes();
  } else {
    out["queue_bytes"] = 0;
    out["window_bytes"] = 0;
  }
  out["items"] = std::move(items);
  return ObjectResponse(200, out);
}

}  // namespace

void AppendRemoteWriteMetrics(std::string& out, ApiContext& ctx) {
  if (!ctx.remote_write) return;
  auto receivers = ctx.remote_write->Receivers();
  struct Family {
    const char* name;
    const char* type;
    const char* help;
    uint64_t remote::ReceiverStatus::*field;
  };
  static const Family kFamilies[] = {
      {"gpufleet_remote_write_samples_sent_total", "counter",
       "Samples a remote-write receiver took.", &remote::ReceiverStatus::sent},
      {"gpufleet_remote_write_samples_failed_total", "counter",
       "Samples in requests that failed (5xx, 429, no answer) and are sent again.",
       &remote::ReceiverStatus::failed},
      {"gpufleet_remote_write_samples_dropped_total", "counter",
       "Samples given up: refused with a 4xx, or out of the queue's window before they were sent.",
       &remote::ReceiverStatus::dropped},
      {"gpufleet_remote_write_samples_pending", "gauge",
       "Samples in the queue that the receiver has not taken yet.",
       &remote::ReceiverStatus::pending},
  };
  for (const auto& f : kFamilies) {
    out +=
        std::string("# HELP ") + f.name + ' ' + f.help + "\n# TYPE " + f.name + ' ' + f.type + '\n';
    for (const auto& r : receivers) {
      out += std::string(f.name) + "{receiver=\"" + r.name + "\"} " + std::to_string(r.*f.field) +
             '\n';
    }
  }
  out +=
      "# HELP gpufleet_remote_write_newest_sample_timestamp_seconds The newest sample time a "
      "receiver took.\n# TYPE gpufleet_remote_write_newest_sample_timestamp_seconds gauge\n";
  for (const auto& r : receivers) {
    out += "gpufleet_remote_write_newest_sample_timestamp_seconds{receiver=\"" + r.name + "\"} ";
    AppendNumber(out, static_cast<double>(r.newest_sent_sample_ms) / 1000.0);
    out += '\n';
  }
  out +=
      "# HELP gpufleet_remote_write_queue_bytes Bytes of the remote-write queue on disk.\n"
      "# TYPE gpufleet_remote_write_queue_bytes gauge\ngpufleet_remote_write_queue_bytes " +
      std::to_string(ctx.remote_write->queue_bytes()) + '\n';
}

void AddRemoteWriteRoutes(Router& router, ApiContext& ctx) {
  router.Add("GET", "/api/v1/remote-write", Role::kViewer,
             [&ctx](const Request&, const Principal&) { return GetRemoteWrite(ctx); });
  router.Scoped(Scope::kFleet);
}

}  // namespace gpufleet::api
