#pragma once
// Remote write 1.0 to any number of receivers (VictoriaMetrics, Prometheus with
// --web.enable-remote-write-receiver, Mimir, Thanos Receive): every sample the telemetry store
// stores, under dcgm-exporter's names and units and the labels the Prometheus API gives
// (Hostname, gpu, UUID, modelName, pci_bus_id, device, cluster, pool, team).
//
// The telemetry store's tap appends what each Ingest stored to the queue (queue.h). Each
// receiver reads the queue from its own cursor (<dir>/<receiver>.cursor) every batch_wait_ms
// (at once while it catches up) and splits each read by series into `shards`, sent in
// parallel, each into as many requests of about max_samples_per_send as it needs: a series'
// samples of one read go together in one request (its labels once for them all) and in order.
// A request answered 5xx or 429 (or not answered) is sent again after 30 ms, doubling to 5 s,
// until it is taken; any other 4xx drops its samples (counted). A cursor moves past a read once
// every request has been taken, and records the requests each shard sent before that (a read
// splits the same way again), so a restart, a killed process or an outage never sends a sample
// twice out of order (Prometheus refuses a whole batch for one out-of-order sample). When a GPU
// leaves the fleet (its node deleted or retired, or the GPU gone from its node), a staleness marker
// ends each of its series.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/result.h"
#include "model/types.h"
#include "remote/config.h"
#include "remote/queue.h"
#include "telemetry/telemetry.h"

namespace gpufleet::remote {

// The labels of each GPU in the fleet now, by UUID (without __name__).
using GpuLabels = std::unordered_map<std::string, Labels>;
using LabelSource = std::function<std::shared_ptr<const GpuLabels>()>;

struct RemoteWriteOptions {
  std::string dir;  // <data-dir>/remote-write
  uint64_t window_bytes = 1ull << 30;
  uint64_t segment_bytes = 64ull << 20;
  // Reads start this long apart unless the last one was full: each series' samples of that
  // long go in one request (Prometheus's batch_send_deadline is 5 s too).
  int64_t batch_wait_ms = 5'000;
  size_t max_read = 1'000'000;      // samples a read takes at most (about 60 bytes each while sent)
  int64_t labels_every_ms = 5'000;  // how often the fleet's labels are read again
  std::vector<ReceiverConfig> receivers;
};

struct ReceiverStatus {
  std::string name, url;
  std::string state;  // "sending" (caught up or on its way), "retrying", "idle" (nothing yet)
  uint64_t sent = 0, failed = 0, dropped = 0, pending = 0, requests = 0, retries = 0;
  std::string last_error;  // the last failed request's reason; "" after one is taken
  int64_t last_error_ms = 0, last_sent_ms = 0;
  int64_t newest_sent_sample_ms = 0;  // the newest sample time taken
};

class RemoteWriter {
 public:
  static Result<std::unique_ptr<RemoteWriter>> Open(RemoteWriteOptions options, LabelSource labels);
  ~RemoteWriter();
  void Start();
  void Stop();

  // The telemetry store's tap: `handles[i]` is the store's handle of GPU uuids[i] (dense, never
  // another GPU's), which keys what the writer remembers of it for its staleness markers.
  void Stored(const std::vector<std::string>& uuids, const std::vector<uint32_t>& handles,
              const std::vector<StoredPoint>& points);
  std::vector<ReceiverStatus> Receivers() const;
  uint64_t queue_bytes() const { return queue_->bytes(); }
  uint64_t window_bytes() const { return options_.window_bytes; }
  // Reads the fleet's labels now and ends the series of the GPUs that left (what the label
  // thread does every labels_every_ms).
  void RefreshLabels();

 private:
  struct Receiver;
  RemoteWriter(RemoteWriteOptions options, LabelSource labels, std::unique_ptr<Queue> queue);
  void Run(Receiver& r);
  bool SendShards(Receiver& r, size_t chunks, const std::vector<uint64_t>& done);
  bool Wait(int64_t ms);  // false once stopping
  std::pair<std::shared_ptr<const GpuLabels>, uint64_t> LabelsFor(
      const QueueRead& read, std::chrono::steady_clock::time_point read_at);
  void LabelLoop();

  RemoteWriteOptions options_;
  LabelSource source_;
  std::unique_ptr<Queue> queue_;
  std::vector<std::unique_ptr<Receiver>> receivers_;
  mutable std::mutex labels_mu_;
  std::shared_ptr<const GpuLabels> labels_;          // guarded by labels_mu_
  uint64_t labels_generation_ = 0;                   // guarded by labels_mu_
  std::chrono::steady_clock::time_point labels_at_;  // guarded: when they were read
  // What was queued of each GPU (by its handle), for the staleness markers: its fields (a bit
  // each) and their newest time. A marker follows all of them, so one time serves.
  struct Seen {
    std::string uuid;
    uint32_t fields = 0;
    int64_t newest = 0;
  };
  static_assert(kFieldCount <= 32, "Seen::fields has a bit a field");
  std::mutex seen_mu_;
  std::vector<Seen> seen_;  // guarded by seen_mu_
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;  // guarded by stop_mu_
  std::thread label_thread_;
};

}  // namespace gpufleet::remote
