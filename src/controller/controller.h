#pragma once
// The composition root: configuration -> store, fleet service, API server, heartbeat monitor.

#include <memory>
#include <string>

#include "common/paths.h"
#include "common/result.h"
#include "net/tls.h"
#include "remote/config.h"

namespace gpufleet {

namespace scaling {
class Actuator;
}

struct ControllerOptions {
  std::string listen = "127.0.0.1:8080";
  // Where the other controllers, the agents and people reach this one (several controllers on
  // one PostgreSQL list each other); default: the URL it listens on.
  std::string advertise_url;
  std::string data_dir;
  std::string store_url;                        // default: sqlite:<data_dir>/gpufleet.db
  int store_connections = 8;                    // PostgreSQL's connection pool
  std::string gpu_catalog;                      // default: the built-in catalogue
  std::string xid_catalog;                      // default: the built-in data/xid-catalog.yaml
  int health_interval_ms = 5'000;               // how often the health model re-evaluates the fleet
  int64_t drain_timeout_ms = 10 * 60'000;       // a drain waits this long for a node's jobs
  int64_t job_retention_ms = 7 * 86'400'000LL;  // ended jobs are kept this long
  // The usage ledger keeps an allocation this long after its end (13 months and more).
  int64_t usage_retention_ms = 400 * 86'400'000LL;
  int64_t usage_interval_ms = 60'000;      // how often the pools' hours are added to
  int64_t reserve_after_ms = 10 * 60'000;  // a job that does not fit waits this long for kept nodes
  int heartbeat_interval_ms = 5'000;
  int heartbeat_timeout_ms = 30'000;
  size_t max_body_bytes = 4 << 20;
  int threads = 2;
  int ingest_threads = 0;     // agents' frames are decoded and stored on these; 0: one per core
  net::TlsServerOptions tls;  // HTTPS and WSS when its certificate is set
  bool insecure_plaintext = false;             // plain HTTP on an address that is not loopback
  int max_connections = 16384;                 // more are closed as soon as they are accepted
  int header_timeout_ms = 30'000;              // a request's headers must arrive within this long
  int64_t checkpoint_interval_ms = 600'000;    // telemetry snapshot, which truncates the log
  uint64_t wal_checkpoint_bytes = 256u << 20;  // ...or when the log is this large
  // Autoscaling's `sim` actuator (simulated nodes started in this process); null: pools may
  // only use the `command` actuator.
  std::shared_ptr<scaling::Actuator> sim_actuator;
  // The demo workload (src/workload/generator.h) on every pool with a size, once there are
  // such pools: `gpufleet up` turns it on.
  bool demo_workload = false;
  // Autoscaling makes no decision until StartScaling(): `gpufleet up` applies its fleet file
  // (policies included) before its simulated nodes register, and a decision in between would
  // see an empty pool and start nodes it already has.
  bool defer_scaling = false;
  // Remote write (--remote-write, a configuration file's remote_write:): the receivers, and how
  // much of the queue on disk is kept for them (<data_dir>/remote-write).
  std::vector<remote::ReceiverConfig> remote_write;
  uint64_t remote_write_window_bytes = 1ull << 30;
};

// Thread-safe. Start() brings everything up; Stop() (or the destructor) takes it down.
class Controller {
 public:
  explicit Controller(ControllerOptions options);
  ~Controller();
  Status Start();
  void Stop();
  const std::string& address() const;  // "127.0.0.1:8080", valid after Start
  std::string url() const;             // "http://127.0.0.1:8080" or "https://..."
  // Re-reads the TLS certificate and key (SIGHUP); the old ones stay on an error.
  Status ReloadTls();
  std::string admin_token_path() const;  // <data_dir>/admin.token
  // Applies a fleet YAML document directly (used by `gpufleet up`), scaling policies included.
  Status ApplyFleetYaml(const std::string& yaml, const std::string& filename);
  // Issues a join token for `pool` directly (used by `gpufleet up`).
  Result<std::string> IssueJoinToken(const std::string& pool);
  // Starts autoscaling's decisions when Start() deferred them (defer_scaling); else nothing.
  void StartScaling();
  // Adds the GPUs and nodes the fleet reports to the asset register and follows their moves
  // (the monitor does every 5 s).
  Status ObserveAssets();
  // The demo's asset records (`gpufleet up`): what an operator's import would add to the
  // simulated fleet's discovered assets (purchase dates, street prices, warranties, racks), a
  // few spare GPUs and one in RMA; and a capacity growth plan (a team's growth, a new model's
  // GPUs from three months on). Audited as the actor "demo".
  Status SeedDemoAssets();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpufleet
