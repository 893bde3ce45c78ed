#include "store/migrations/migrations.h"

#include <iterator>

namespace gpufleet::migrations {

namespace {

// Each one as it shipped: a migration is never edited, only followed by another.
constexpr Migration kMigrations[] = {
    {1, R"SQL(
CREATE TABLE clusters (
  name TEXT PRIMARY KEY, type TEXT NOT NULL, site TEXT NOT NULL, labels TEXT NOT NULL,
  created_ms BIGINT NOT NULL, updated_ms BIGINT NOT NULL);
CREATE TABLE pools (
  name TEXT PRIMARY KEY, cluster TEXT NOT NULL REFERENCES clusters(name),
  gpu_model TEXT NOT NULL, gpus_per_node BIGINT NOT NULL, size BIGINT NOT NULL,
  labels TEXT NOT NULL, created_ms BIGINT NOT NULL, updated_ms BIGINT NOT NULL);
CREATE TABLE nodes (
  name TEXT PRIMARY KEY, cluster TEXT NOT NULL, pool TEXT NOT NULL, state TEXT NOT NULL,
  resume_state TEXT NOT NULL, reason TEXT NOT NULL, facts TEXT NOT NULL,
  simulated BIGINT NOT NULL, registered_ms BIGINT NOT NULL, last_seen_ms BIGINT NOT NULL,
  state_since_ms BIGINT NOT NULL, token_hash TEXT NOT NULL);
CREATE TABLE gpus (
  uuid TEXT PRIMARY KEY, node TEXT NOT NULL REFERENCES nodes(name), idx BIGINT NOT NULL,
  serial TEXT NOT NULL, name TEXT NOT NULL, model TEXT NOT NULL, pci_bus_id TEXT NOT NULL,
  memory_total BIGINT NOT NULL, vbios TEXT NOT NULL, inforom TEXT NOT NULL,
  mig_mode BIGINT NOT NULL, error TEXT NOT NULL);
CREATE INDEX gpus_node ON gpus(node);
CREATE TABLE node_events (
  id {ID}, node TEXT NOT NULL, time_ms BIGINT NOT NULL, from_state TEXT NOT NULL,
  to_state TEXT NOT NULL, reason TEXT NOT NULL, actor TEXT NOT NULL);
CREATE INDEX node_events_node ON node_events(node, id);
CREATE TABLE join_tokens (
  id TEXT PRIMARY KEY, pool TEXT NOT NULL, hash TEXT NOT NULL UNIQUE, created_by TEXT NOT NULL,
  created_ms BIGINT NOT NULL, expires_ms BIGINT NOT NULL, revoked BIGINT NOT NULL);
CREATE TABLE api_tokens (
  id TEXT PRIMARY KEY, name TEXT NOT NULL, role TEXT NOT NULL, clusters TEXT NOT NULL,
  hash TEXT NOT NULL UNIQUE, created_ms BIGINT NOT NULL, expires_ms BIGINT NOT NULL,
  revoked BIGINT NOT NULL);
CREATE TABLE audit (
  id {ID}, time_ms BIGINT NOT NULL, actor TEXT NOT NULL, action TEXT NOT NULL,
  target TEXT NOT NULL, status BIGINT NOT NULL, result TEXT NOT NULL, before_doc TEXT NOT NULL,
  after_doc TEXT NOT NULL)
)SQL"},
    {2, R"SQL(
CREATE TABLE gpu_events (
  id {ID}, time_ms BIGINT NOT NULL, node TEXT NOT NULL, gpu BIGINT NOT NULL, uuid TEXT NOT NULL,
  kind TEXT NOT NULL, value BIGINT NOT NULL, UNIQUE (uuid, time_ms, kind, value));
CREATE INDEX gpu_events_node ON gpu_events(node, id)
)SQL"},
    // Scrape mode: a pool's dcgm-exporter nodes, as a JSON array of {node, url}.
    {3, R"SQL(
ALTER TABLE pools ADD COLUMN exporters TEXT NOT NULL DEFAULT '';
ALTER TABLE pools ADD COLUMN scrape_interval_ms BIGINT NOT NULL DEFAULT 15000
)SQL"},
    // A cluster's remediation policy, as JSON {cordon_unhealthy, drain_unhealthy, max_share}.
    {4, R"SQL(
ALTER TABLE clusters ADD COLUMN remediation TEXT NOT NULL DEFAULT ''
)SQL"},
    // Alerting: channels, the outbox of notifications, and alert states across restarts.
    {5, R"SQL(
CREATE TABLE channels (
  name TEXT PRIMARY KEY, type TEXT NOT NULL, url TEXT NOT NULL, secret TEXT NOT NULL,
  created_ms BIGINT NOT NULL);
CREATE TABLE outbox (
  id {ID}, channel TEXT NOT NULL, fingerprint TEXT NOT NULL, body TEXT NOT NULL,
  created_ms BIGINT NOT NULL, attempts BIGINT NOT NULL, next_ms BIGINT NOT NULL,
  last_error TEXT NOT NULL);
CREATE INDEX outbox_due ON outbox(next_ms, id);
CREATE TABLE alerts (fingerprint TEXT PRIMARY KEY, doc TEXT NOT NULL)
)SQL"},
    {6, R"SQL(
CREATE TABLE silences (
  id TEXT PRIMARY KEY, matchers TEXT NOT NULL, starts_ms BIGINT NOT NULL,
  ends_ms BIGINT NOT NULL, created_by TEXT NOT NULL, comment TEXT NOT NULL,
  created_ms BIGINT NOT NULL)
)SQL"},
    // User alert rules (a JSON document each), and a channel's route: the matchers an alert
    // must meet to be sent there, as a JSON array like a silence's (empty: every alert).
    {7, R"SQL(
CREATE TABLE alert_rules (
  name TEXT PRIMARY KEY, grp TEXT NOT NULL, doc TEXT NOT NULL, updated_ms BIGINT NOT NULL);
ALTER TABLE channels ADD COLUMN matchers TEXT NOT NULL DEFAULT ''
)SQL"},
    // A webhook channel's grouping: the label names, comma-separated (empty: one per alert).
    {8, R"SQL(
ALTER TABLE channels ADD COLUMN group_by TEXT NOT NULL DEFAULT ''
)SQL"},
    // Jobs (GPU requests), a JSON document each; the state is a column for listing by it.
    {9, R"SQL(
CREATE TABLE jobs (
  id BIGINT PRIMARY KEY, state TEXT NOT NULL, doc TEXT NOT NULL, updated_ms BIGINT NOT NULL);
CREATE INDEX jobs_state ON jobs(state)
)SQL"},
    // Autoscaling: each pool's policy, its decisions (events), and one sample per decision
    // (nodes, demand, forecast: the scaling page's history and the forecaster's memory).
    {10, R"SQL(
CREATE TABLE scaling_policies (
  pool TEXT PRIMARY KEY, doc TEXT NOT NULL, updated_ms BIGINT NOT NULL);
CREATE TABLE scale_events (
  id {ID}, time_ms BIGINT NOT NULL, pool TEXT NOT NULL,
  doc TEXT NOT NULL);
CREATE INDEX scale_events_pool ON scale_events(pool, id);
CREATE TABLE scaling_samples (
  pool TEXT NOT NULL, time_ms BIGINT NOT NULL, doc TEXT NOT NULL, PRIMARY KEY (pool, time_ms))
)SQL"},
    // Security: the audit log's hash chain and the anchor pruning leaves; API tokens' shown
    // prefix, last use and rotation (the previous secret and until when it is accepted).
    {11, R"SQL(
ALTER TABLE audit ADD COLUMN prev_hash TEXT NOT NULL DEFAULT '';
ALTER TABLE audit ADD COLUMN hash TEXT NOT NULL DEFAULT '';
CREATE TABLE audit_anchor (
  id BIGINT PRIMARY KEY, last_id BIGINT NOT NULL, last_hash TEXT NOT NULL,
  pruned BIGINT NOT NULL, time_ms BIGINT NOT NULL, signature TEXT NOT NULL);
ALTER TABLE api_tokens ADD COLUMN prefix TEXT NOT NULL DEFAULT '';
ALTER TABLE api_tokens ADD COLUMN last_used_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE api_tokens ADD COLUMN previous_hash TEXT NOT NULL DEFAULT '';
ALTER TABLE api_tokens ADD COLUMN previous_expires_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE join_tokens ADD COLUMN prefix TEXT NOT NULL DEFAULT ''
)SQL"},
    // Driver lifecycle: what a cluster's or pool's workloads need of their drivers (tier,
    // requires, driver_branch), a JSON document each; named documents (the applied
    // compatibility matrix); a GPU's InfoROM object and GSP firmware versions, as JSON.
    {12, R"SQL(
ALTER TABLE clusters ADD COLUMN lifecycle TEXT NOT NULL DEFAULT '{}';
ALTER TABLE pools ADD COLUMN lifecycle TEXT NOT NULL DEFAULT '{}';
CREATE TABLE settings (name TEXT PRIMARY KEY, doc TEXT NOT NULL, updated_ms BIGINT NOT NULL);
ALTER TABLE gpus ADD COLUMN firmware TEXT NOT NULL DEFAULT '{}'
)SQL"},
    // Rollouts of drivers and firmware: each rollout (its spec and progress, a JSON
    // document), each node's step in it (written as it happens, so a restarted controller
    // resumes where it was), and the steps as events.
    {13, R"SQL(
CREATE TABLE rollouts (
  id {ID}, state TEXT NOT NULL, doc TEXT NOT NULL, created_ms BIGINT NOT NULL,
  updated_ms BIGINT NOT NULL);
CREATE TABLE rollout_nodes (
  rollout BIGINT NOT NULL, node TEXT NOT NULL, doc TEXT NOT NULL, updated_ms BIGINT NOT NULL,
  PRIMARY KEY (rollout, node));
CREATE TABLE rollout_events (
  id {ID}, rollout BIGINT NOT NULL, time_ms BIGINT NOT NULL, node TEXT NOT NULL,
  kind TEXT NOT NULL, message TEXT NOT NULL);
CREATE INDEX rollout_events_rollout ON rollout_events(rollout, id)
)SQL"},
    // Drift from the golden profiles: each finding a JSON document, upserted as it changes.
    {14, R"SQL(
CREATE TABLE drift_findings (
  id BIGINT PRIMARY KEY, node TEXT NOT NULL, state TEXT NOT NULL, doc TEXT NOT NULL,
  updated_ms BIGINT NOT NULL);
CREATE INDEX drift_findings_node ON drift_findings(node)
)SQL"},
    // The compliance posture, one JSON document a day.
    {15, R"SQL(
CREATE TABLE compliance_days (day TEXT PRIMARY KEY, doc TEXT NOT NULL, updated_ms BIGINT NOT NULL)
)SQL"},
    // Teams and their projects, a JSON document each; the team that owns a cluster or pool.
    {16, R"SQL(
CREATE TABLE teams (name TEXT PRIMARY KEY, doc TEXT NOT NULL, updated_ms BIGINT NOT NULL);
ALTER TABLE clusters ADD COLUMN team TEXT NOT NULL DEFAULT '';
ALTER TABLE pools ADD COLUMN team TEXT NOT NULL DEFAULT ''
)SQL"},
    // The usage ledger: one record per ended allocation, a JSON document with the fields
    // reports filter and order by beside it.
    {17, R"SQL(
CREATE TABLE usage_records (
  id {ID}, job BIGINT NOT NULL, team TEXT NOT NULL, project TEXT NOT NULL, pool TEXT NOT NULL,
  cluster TEXT NOT NULL, start_ms BIGINT NOT NULL, end_ms BIGINT NOT NULL, doc TEXT NOT NULL);
CREATE INDEX usage_records_end ON usage_records(end_ms);
CREATE INDEX usage_records_team ON usage_records(team, end_ms)
)SQL"},
    // The figures reports add up, as columns (integers: % x 1000, MiB, joules), and each
    // pool's hours: GPUs installed and allocated, energy of all, free and idle GPUs.
    {18, R"SQL(
ALTER TABLE usage_records ADD COLUMN gpu_model TEXT NOT NULL DEFAULT '';
ALTER TABLE usage_records ADD COLUMN gpus BIGINT NOT NULL DEFAULT 0;
ALTER TABLE usage_records ADD COLUMN wait_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE usage_records ADD COLUMN util_milli BIGINT NOT NULL DEFAULT -1;
ALTER TABLE usage_records ADD COLUMN util_p95_milli BIGINT NOT NULL DEFAULT -1;
ALTER TABLE usage_records ADD COLUMN mem_peak_mib BIGINT NOT NULL DEFAULT -1;
ALTER TABLE usage_records ADD COLUMN energy_j BIGINT NOT NULL DEFAULT 0;
ALTER TABLE usage_records ADD COLUMN placement TEXT NOT NULL DEFAULT '';
ALTER TABLE usage_records ADD COLUMN outcome TEXT NOT NULL DEFAULT '';
CREATE TABLE pool_hours (
  pool TEXT NOT NULL, hour_ms BIGINT NOT NULL, cluster TEXT NOT NULL, gpu_model TEXT NOT NULL,
  covered_ms BIGINT NOT NULL, gpu_ms BIGINT NOT NULL, alloc_gpu_ms BIGINT NOT NULL, queued_gpu_ms BIGINT NOT NULL,
  energy_j BIGINT NOT NULL,
  free_energy_j BIGINT NOT NULL, idle_energy_j BIGINT NOT NULL, PRIMARY KEY (pool, hour_ms));
CREATE INDEX pool_hours_hour ON pool_hours(hour_ms)
)SQL"},
    // Assets (GPUs by serial, nodes by name), a JSON document each, and their histories.
    {19, R"SQL(
CREATE TABLE assets (
  id TEXT PRIMARY KEY, kind TEXT NOT NULL, state TEXT NOT NULL, doc TEXT NOT NULL,
  updated_ms BIGINT NOT NULL);
CREATE TABLE asset_events (
  id {ID}, asset TEXT NOT NULL, time_ms BIGINT NOT NULL, doc TEXT NOT NULL);
CREATE INDEX asset_events_asset ON asset_events(asset, id)
)SQL"},
    // The ledger's daily sums (store::UsageDay; filled from the records already there after
    // this runs), and the records from before migration 18 found without reading the rest.
    {20, R"SQL(
CREATE TABLE usage_days (
  day_ms BIGINT NOT NULL, team TEXT NOT NULL, project TEXT NOT NULL, pool TEXT NOT NULL,
  cluster TEXT NOT NULL, gpu_model TEXT NOT NULL, gpu_ms BIGINT NOT NULL,
  measured_gpu_ms BIGINT NOT NULL, effective_gpu_ms BIGINT NOT NULL, energy_j BIGINT NOT NULL,
  idle_energy_j BIGINT NOT NULL, max_span_ms BIGINT NOT NULL,
  PRIMARY KEY (day_ms, team, project, pool, cluster, gpu_model));
CREATE INDEX usage_records_unfigured ON usage_records(end_ms) WHERE gpus = 0
)SQL"},
    // The batch scheduler of a cluster (model::Scheduler as JSON; '' for none), and where a
    // ledger record's job came from (its scheduler and that scheduler's job id).
    {21, R"SQL(
ALTER TABLE clusters ADD COLUMN scheduler TEXT NOT NULL DEFAULT '';
ALTER TABLE usage_records ADD COLUMN source TEXT NOT NULL DEFAULT '';
ALTER TABLE usage_records ADD COLUMN external_id TEXT NOT NULL DEFAULT ''
)SQL"},
    // Several controllers on one database (store/lease.h): the leader's lease, on the
    // database's clock in ms, and the controllers that serve. Neither is copied by `store copy`:
    // they describe running processes.
    {22, R"SQL(
CREATE TABLE leader (
  name TEXT PRIMARY KEY, holder TEXT NOT NULL, epoch BIGINT NOT NULL, expires_at BIGINT NOT NULL);
CREATE TABLE controllers (
  id TEXT PRIMARY KEY, url TEXT NOT NULL, started_ms BIGINT NOT NULL,
  last_seen_ms BIGINT NOT NULL, agents BIGINT NOT NULL)
)SQL"},
    // PostgreSQL only, in code (sql/changes.cpp): the triggers that tell the other controllers
    // that a table they keep in memory changed.
    {23, ""},
    // Commands to agents connected to another controller (store::RelayedCommand); not copied
    // by `store copy` either. And when a node's agent last connected (to whichever controller):
    // the others see that it is connected, and when it came back after a reboot.
    {24, R"SQL(
ALTER TABLE nodes ADD COLUMN connected_ms BIGINT NOT NULL DEFAULT 0;
CREATE TABLE agent_commands (
  id BIGINT PRIMARY KEY, node TEXT NOT NULL, issuer TEXT NOT NULL, command TEXT NOT NULL,
  taken_by TEXT NOT NULL DEFAULT '', result TEXT NOT NULL DEFAULT '', created_ms BIGINT NOT NULL)
)SQL"},
    // Jobs read by when they were stored: a controller that does not lead follows the
    // leader's (workload::JobService::Follow). And, on PostgreSQL, in code: the change feed's
    // triggers on gpu_events (the XIDs another controller's agents report reach the leader's
    // health model) and jobs.
    {25, R"SQL(
CREATE INDEX IF NOT EXISTS jobs_updated ON jobs (updated_ms)
)SQL"},
};

}  // namespace

const std::vector<Migration>& All() {
  static const std::vector<Migration> all(std::begin(kMigrations), std::end(kMigrations));
  return all;
}

}  // namespace gpufleet::migrations
