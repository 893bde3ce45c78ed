#pragma once
// The controller's durable state, one interface per capability: the fleet (clusters, pools,
// nodes, GPUs, node and GPU events), tokens, the audit log, alerting, jobs and scaling.
// `store::Open(url)` gives the set for `sqlite:PATH` (embedded) or `postgresql://...` (a libpq
// URI). Every implementation is thread-safe; a database that cannot be reached is kUnavailable.

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "model/types.h"
#include "store/usage_store.h"

namespace gpufleet {

enum class Role { kViewer = 0, kOperator = 1, kAdmin = 2 };
std::string_view ToString(Role role);
std::optional<Role> ParseRole(std::string_view text);

struct ApiToken {
  std::string id;    // public identifier, e.g. "tok-3f2a…"
  std::string name;  // who it is for
  Role role = Role::kViewer;
  std::vector<std::string> clusters;  // empty: every cluster
  std::string hash;                   // SHA-256 of the secret
  int64_t created_ms = 0;
  int64_t expires_ms = 0;  // 0: never
  bool revoked = false;
  std::string prefix;        // the secret's first characters, what lists show ("gfa_3f2a")
  int64_t last_used_ms = 0;  // 0: never (written in batches, not on every request)
  // After a rotation: the old secret's hash, accepted until previous_expires_ms.
  std::string previous_hash;
  int64_t previous_expires_ms = 0;
};

// What lists show of a secret: enough to tell tokens apart, nothing to sign in with.
inline std::string SecretPrefix(const std::string& secret) { return secret.substr(0, 8); }

struct JoinToken {
  std::string id;
  std::string pool;
  std::string hash;
  std::string created_by;
  int64_t created_ms = 0;
  int64_t expires_ms = 0;
  bool revoked = false;
  std::string prefix;  // the secret's first characters
};

struct AuditRecord {
  int64_t id = 0;
  int64_t time_ms = 0;
  std::string actor;   // token name
  std::string action;  // "POST /api/v1/nodes/n1/cordon"
  std::string target;  // "node/n1"
  int status = 0;      // HTTP status of the outcome
  std::string result;  // "ok" or the error message
  std::string before;  // JSON of the target before, when known
  std::string after;   // JSON after
  // The chain (set by AppendAudit): the previous record's hash, and this one's, AuditHash().
  std::string prev_hash;
  std::string hash;
};

// Where alert notifications go: "alertmanager" (its v2 API) or "webhook" (JSON, HMAC-signed).
struct Channel {
  std::string name;
  std::string type;
  std::string url;
  std::string secret;  // webhook signing key; never returned by the API
  int64_t created_ms = 0;
  std::string matchers;  // the route: a JSON array of matchers, as a silence's; empty: all
  // Webhooks: alerts that change in the same evaluation and share these labels' values go in
  // one notification; comma-separated names, empty: one notification per alert.
  std::string group_by;
};

// A user alert rule: its name, its rule file group, and the rule as a JSON document.
struct RuleRecord {
  std::string name;
  std::string group;
  std::string doc;
  int64_t updated_ms = 0;
};

// A job (a GPU request): its state and the whole job as a JSON document (owned by the workload
// component).
struct JobRecord {
  int64_t id = 0;
  std::string state;
  std::string doc;
  int64_t updated_ms = 0;
};

// Autoscaling records (owned by the scaling component): a pool's policy, one of its decisions,
// one sample of its history; each a JSON document.
struct ScalingRecord {
  std::string pool;
  std::string doc;
  int64_t updated_ms = 0;
};
struct ScaleEventRecord {
  int64_t id = 0;
  int64_t time_ms = 0;
  std::string pool;
  std::string doc;
};
struct ScalingSampleRecord {
  std::string pool;
  int64_t time_ms = 0;
  std::string doc;
};

// A notification in the outbox: written with the alert state change it tells, removed only when
// the receiver acknowledged it.
struct Notification {
  int64_t id = 0;
  std::string channel;
  std::string fingerprint;  // the alert's
  std::string body;         // the request body, ready to send
  int64_t created_ms = 0;
  int attempts = 0;
  int64_t next_ms = 0;  // not before
  std::string last_error;
};

// Mutes the notifications of the alerts it matches while starts_ms <= now < ends_ms.
// `matchers` is a JSON array of {name, value, isRegex, isEqual}, as Alertmanager's.
struct SilenceRecord {
  std::string id;
  std::string matchers;
  int64_t starts_ms = 0;
  int64_t ends_ms = 0;
  std::string created_by;
  std::string comment;
  int64_t created_ms = 0;
};

struct OutboxCount {
  std::string channel;
  int64_t pending = 0;
  int64_t oldest_ms = 0;  // created_ms of the oldest; 0 when none
  std::string last_error;
};

// Something that happened on a GPU (an XID error), as recorded.
struct GpuEventRecord {
  int64_t id = 0;
  int64_t time_ms = 0;
  std::string node;
  int gpu = 0;
  std::string uuid;
  std::string kind;  // "xid"
  int64_t value = 0;
};

namespace store {

// SHA-256 (hex) over a canonical encoding of the record's fields (each as its length and its
// bytes, so no two records encode alike) followed by the previous record's hash.
std::string AuditHash(const AuditRecord& r, const std::string& prev_hash);

// Which audit records to read; every filter that is set must match.
struct AuditFilter {
  std::string actor;       // exact
  std::string action;      // a substring of "METHOD /path"
  std::string target;      // exact, or every target under a prefix that ends in '/' ("node/")
  std::string result;      // "ok", "error" or "" (both)
  int64_t since_ms = 0;    // time_ms >= since (0: no bound)
  int64_t until_ms = 0;    // time_ms < until (0: no bound)
  bool ascending = false;  // oldest first, ids above `after_id`; else newest first, below
  int64_t after_id = 0;
  int64_t before_id = 0;  // 0: from the newest
  int limit = 500;
};

// Where the chain starts after the oldest records were pruned: the last pruned record's id and
// hash, signed (HMAC-SHA-256 with the controller's secret.key) so that it cannot be moved.
struct AuditAnchor {
  int64_t last_id = 0;
  std::string last_hash;
  int64_t pruned = 0;  // records pruned in all
  int64_t time_ms = 0;
  std::string signature;
};
std::string AuditAnchorSignature(const AuditAnchor& a, const std::string& key);

class FleetStore {
 public:
  virtual ~FleetStore() = default;
  // Creates or updates every cluster and pool in one transaction (nothing is deleted).
  virtual Status ApplyFleet(const std::vector<Cluster>& clusters,
                            const std::vector<Pool>& pools) = 0;
  // Deletes these pools, then these clusters, in one transaction (apply --prune). The caller
  // has checked that no node is in them.
  virtual Status DeleteFleet(const std::vector<std::string>& pools,
                             const std::vector<std::string>& clusters) = 0;
  virtual Result<std::vector<Cluster>> ListClusters() = 0;
  virtual Result<std::vector<Pool>> ListPools() = 0;
  // Writes the node, replaces its GPUs and appends the events, in one transaction.
  virtual Status SaveNode(const Node& node, const std::vector<NodeEvent>& events) = 0;
  virtual Result<std::vector<Node>> LoadNodes() = 0;
  // Removes a node and its GPUs (a retired node an operator deletes); its events stay, for
  // the record. kNotFound when there is none.
  virtual Status DeleteNode(const std::string& name) = 0;
  virtual Result<std::vector<NodeEvent>> ListNodeEvents(const std::string& node, int limit) = 0;
  // Appends events; one already recorded (same GPU, time, kind and value: a re-sent batch)
  // is skipped.
  virtual Status AppendGpuEvents(const std::vector<GpuEventRecord>& events) = 0;
  // Newest first; empty `node` or `kind` matches all.
  virtual Result<std::vector<GpuEventRecord>> ListGpuEvents(const std::string& node,
                                                            const std::string& kind, int limit) = 0;
  // The events recorded after event `after_id`, oldest first, at most `limit` (several
  // controllers: what the others' agents reported since the last read).
  virtual Result<std::vector<GpuEventRecord>> ListGpuEventsAfter(int64_t after_id, int limit) {
    auto newest = ListGpuEvents("", "", limit);
    if (!newest.ok()) return newest.error();
    std::vector<GpuEventRecord> out;
    for (auto it = newest->rbegin(); it != newest->rend(); ++it) {
      if (it->id > after_id) out.push_back(*it);
    }
    return out;
  }
};

class TokenStore {
 public:
  virtual ~TokenStore() = default;
  virtual Status CreateJoinToken(const JoinToken& token) = 0;
  virtual Result<std::vector<JoinToken>> ListJoinTokens() = 0;
  virtual Result<JoinToken> FindJoinToken(const std::string& hash) = 0;
  virtual Status RevokeJoinToken(const std::string& id) = 0;
  virtual Status CreateApiToken(const ApiToken& token) = 0;
  virtual Result<std::vector<ApiToken>> ListApiTokens() = 0;
  // The token whose secret, or whose previous secret (after a rotation), has this hash.
  virtual Result<ApiToken> FindApiToken(const std::string& hash) = 0;
  virtual Status RevokeApiToken(const std::string& id) = 0;
  // A new secret for the token `id`; its current one stays valid until `previous_expires_ms`
  // (0: not at all). kNotFound for no such token, kConflict for a revoked one.
  virtual Status RotateApiToken(const std::string& id, const std::string& hash,
                                const std::string& prefix, int64_t previous_expires_ms) = 0;
  // Last-use times by token id, each kept only if later than the stored one.
  virtual Status TouchApiTokens(const std::map<std::string, int64_t>& last_used_ms) = 0;
};

class AuditLog {
 public:
  virtual ~AuditLog() = default;
  // Appends `record` chained to the newest one (its prev_hash and hash are set here).
  virtual Status AppendAudit(const AuditRecord& record) = 0;
  virtual Result<std::vector<AuditRecord>> QueryAudit(const AuditFilter& filter) = 0;
  // Newest first; `before_id` > 0 pages backwards.
  Result<std::vector<AuditRecord>> ListAudit(int64_t before_id, int limit) {
    AuditFilter f;
    f.before_id = before_id;
    f.limit = limit;
    return QueryAudit(f);
  }
  // The anchor left by pruning; kNotFound when nothing was ever pruned.
  virtual Result<AuditAnchor> FindAuditAnchor() = 0;
  // Deletes the records older than `before_ms` (from the oldest on) and replaces the anchor
  // with one at the last deleted record, signed with `key`, in one transaction. Returns how
  // many it deleted.
  virtual Result<int64_t> PruneAudit(int64_t before_ms, const std::string& key) = 0;
};

// Walks the whole chain from the anchor (or the first record) to the newest record.
struct AuditVerification {
  bool ok = true;
  int64_t verified = 0;   // records whose hashes checked out
  int64_t unchained = 0;  // records from before the chain existed (no hash), all at the start
  int64_t first_bad_id = 0;
  std::string problem;  // what is wrong at first_bad_id, in words
  int64_t anchor_id = 0;
};
Result<AuditVerification> VerifyAudit(AuditLog& log, const std::string& key);

class AlertStore {
 public:
  virtual ~AlertStore() = default;
  // Channel names are unique (kConflict).
  virtual Status CreateChannel(const Channel& channel) = 0;
  // Its type, URL, secret, route and grouping (kNotFound when there is none of that name); its
  // queued notifications stay.
  virtual Status UpdateChannel(const Channel& channel) = 0;
  virtual Result<std::vector<Channel>> ListChannels() = 0;
  virtual Status DeleteChannel(const std::string& name) = 0;  // and its queued notifications
  // Alert state changes and their notifications, in one transaction: `alerts` are (fingerprint,
  // JSON document) pairs to upsert.
  virtual Status RecordAlertChanges(const std::vector<std::pair<std::string, std::string>>& alerts,
                                    const std::vector<Notification>& notifications) = 0;
  virtual Result<std::vector<std::string>> LoadAlertDocs() = 0;
  virtual Status DeleteAlertDoc(const std::string& fingerprint) = 0;
  // Due notifications (next_ms <= now), oldest first.
  virtual Result<std::vector<Notification>> DueNotifications(int64_t now, int limit) = 0;
  virtual Status AckNotification(int64_t id) = 0;
  virtual Status DeferNotification(int64_t id, int64_t next_ms, const std::string& error) = 0;
  virtual Result<std::vector<OutboxCount>> OutboxCounts() = 0;
  // User alert rules: upserts and removals by name in one transaction.
  virtual Status SaveRules(const std::vector<RuleRecord>& upsert,
                           const std::vector<std::string>& remove) = 0;
  virtual Result<std::vector<RuleRecord>> ListRules() = 0;  // by name
  virtual Status CreateSilence(const SilenceRecord& silence) = 0;
  virtual Result<std::vector<SilenceRecord>> ListSilences() = 0;  // newest first
  // Ends a silence now (ends_ms = now) if it has not ended; kNotFound for an unknown id.
  virtual Status ExpireSilence(const std::string& id, int64_t now) = 0;
};

class JobStore {
 public:
  virtual ~JobStore() = default;
  virtual Status SaveJobs(const std::vector<JobRecord>& jobs) = 0;  // upserts, one transaction
  virtual Result<std::vector<JobRecord>> ListJobs() = 0;            // by id
  // The jobs stored (updated_ms) at or after `since_ms`, by id.
  virtual Result<std::vector<JobRecord>> ListJobsUpdatedSince(int64_t since_ms) {
    auto all = ListJobs();
    if (!all.ok()) return all.error();
    std::erase_if(all.value(), [&](const JobRecord& j) { return j.updated_ms < since_ms; });
    return all;
  }
  // Removes the completed and cancelled jobs last saved before `updated_ms`, except the job with
  // the highest id: the next job's id follows it, so no id is used twice after a restart.
  virtual Status DeleteEndedJobsBefore(int64_t updated_ms) = 0;
};

class ScalingStore {
 public:
  virtual ~ScalingStore() = default;
  virtual Status SaveScalingPolicy(const ScalingRecord& policy) = 0;  // upsert
  // kNotFound when the pool has none.
  virtual Status DeleteScalingPolicy(const std::string& pool) = 0;
  virtual Result<std::vector<ScalingRecord>> ListScalingPolicies() = 0;         // by pool
  virtual Result<int64_t> AppendScaleEvent(const ScaleEventRecord& event) = 0;  // its id
  // Newest first; empty `pool`: every pool's.
  virtual Result<std::vector<ScaleEventRecord>> ListScaleEvents(const std::string& pool,
                                                                int limit) = 0;
  virtual Status AppendScalingSample(const ScalingSampleRecord& sample) = 0;  // upsert
  // Oldest first, time_ms >= since_ms.
  virtual Result<std::vector<ScalingSampleRecord>> ListScalingSamples(const std::string& pool,
                                                                      int64_t since_ms) = 0;
  virtual Status DeleteScalingSamplesBefore(int64_t time_ms) = 0;
};

// Documents the controller keeps by name, one each, replaced whole: today the applied
// compatibility matrix ("compat", its YAML).
class SettingStore {
 public:
  virtual ~SettingStore() = default;
  virtual Status PutSetting(const std::string& name, const std::string& doc, int64_t now_ms) = 0;
  // Empty when there is none.
  virtual Result<std::optional<std::string>> GetSetting(const std::string& name) = 0;
  virtual Status DeleteSetting(const std::string& name) = 0;  // none is not an error
};

// Rollouts (src/lifecycle): each one a JSON document, its nodes' steps one document each
// (upserted as they change), and its events. The documents' shape is the lifecycle
// component's.
struct RolloutRecord {
  int64_t id = 0;
  std::string state;
  std::string doc;
  int64_t created_ms = 0, updated_ms = 0;
};
struct RolloutNodeRecord {
  std::string node;
  std::string doc;
  int64_t updated_ms = 0;
};
struct RolloutEventRecord {
  int64_t id = 0;
  int64_t rollout = 0;
  int64_t time_ms = 0;
  std::string node;  // empty: the rollout's own
  std::string kind;  // "started", "drain", "install", "failed", "halted", ...
  std::string message;
};
class RolloutStore {
 public:
  virtual ~RolloutStore() = default;
  virtual Result<int64_t> CreateRollout(const RolloutRecord& r) = 0;  // its id
  virtual Status UpdateRollout(const RolloutRecord& r) = 0;           // kNotFound: no such id
  // The rollout's record and changed nodes in one transaction.
  virtual Status SaveRolloutNodes(const RolloutRecord& r,
                                  const std::vector<RolloutNodeRecord>& nodes) = 0;
  virtual Result<std::vector<RolloutRecord>> ListRollouts() = 0;  // by id
  virtual Result<std::vector<RolloutNodeRecord>> ListRolloutNodes(int64_t rollout) = 0;
  virtual Status AppendRolloutEvents(const std::vector<RolloutEventRecord>& events) = 0;
  // Oldest first, id > after_id, at most `limit`.
  virtual Result<std::vector<RolloutEventRecord>> ListRolloutEvents(int64_t rollout,
                                                                    int64_t after_id,
                                                                    int limit) = 0;
};

// Drift findings (src/drift): each one a JSON document (model/profile.h's DriftFinding), its
// id given by the drift service, upserted as it changes.
struct DriftRecord {
  int64_t id = 0;
  std::string node;
  std::string state;  // "open", "remediating", "resolved"
  std::string doc;
  int64_t updated_ms = 0;
};
class DriftStore {
 public:
  virtual ~DriftStore() = default;
  virtual Status SaveDriftFindings(const std::vector<DriftRecord>& findings) = 0;  // one tx
  virtual Result<std::vector<DriftRecord>> ListDriftFindings() = 0;                // by id
  // Resolved findings whose last change is older than `before_ms`; how many went.
  virtual Result<int64_t> DeleteResolvedDriftBefore(int64_t before_ms) = 0;
};

// The compliance posture (src/lifecycle/compliance_service.h): one JSON document a day, the
// day's latest measurement replacing the earlier ones. Days are "YYYY-MM-DD" (UTC), so they
// sort as text.
struct ComplianceDay {
  std::string day;
  std::string doc;
  int64_t updated_ms = 0;
};

class ComplianceStore {
 public:
  virtual ~ComplianceStore() = default;
  virtual Status PutComplianceDay(const ComplianceDay& day) = 0;  // an upsert by day
  // The days from `from` to `to`, both included, oldest first.
  virtual Result<std::vector<ComplianceDay>> ListComplianceDays(const std::string& from,
                                                                const std::string& to) = 0;
  // The days before `day`; how many went.
  virtual Result<int64_t> DeleteComplianceDaysBefore(const std::string& day) = 0;
};

// Teams (model/team.h): each one a JSON document with its projects, replaced whole.
struct TeamRecord {
  std::string name;
  std::string doc;
  int64_t updated_ms = 0;
};
class TeamStore {
 public:
  virtual ~TeamStore() = default;
  virtual Status PutTeam(const TeamRecord& team) = 0;       // an upsert by name
  virtual Result<std::vector<TeamRecord>> ListTeams() = 0;  // by name
  virtual Status DeleteTeam(const std::string& name) = 0;   // none is not an error
};

// Assets (model/asset.h): each one a JSON document keyed by its id (a GPU's serial, a node's
// name), and what happened to each, in order.
struct AssetRecord {
  std::string id;
  std::string kind;  // "gpu" or "node"
  std::string state;
  std::string doc;
  int64_t updated_ms = 0;
};
struct AssetEventRecord {
  int64_t id = 0;  // given by the store
  std::string asset;
  int64_t time_ms = 0;
  std::string doc;
};
class AssetStore {
 public:
  virtual ~AssetStore() = default;
  // Upserts the assets and appends the events, in one transaction.
  virtual Status SaveAssets(const std::vector<AssetRecord>& assets,
                            const std::vector<AssetEventRecord>& events) = 0;
  virtual Result<std::vector<AssetRecord>> ListAssets() = 0;  // by id
  // The asset's events, oldest first, the newest `limit` of them; empty `asset`: every asset's.
  virtual Result<std::vector<AssetEventRecord>> ListAssetEvents(const std::string& asset,
                                                                int limit) = 0;
};

// The database itself: what /healthz and `gpufleet store` ask of it.
class Database {
 public:
  virtual ~Database() = default;
  virtual std::string_view backend() const = 0;     // "sqlite" or "postgresql"
  virtual const std::string& location() const = 0;  // the URL without its password
  virtual Status Ping() = 0;                        // one round trip
  virtual Result<int> SchemaVersion() = 0;          // the newest migration applied
};

// One database seen through each capability's interface (all share one object).
struct Stores {
  std::shared_ptr<FleetStore> fleet;
  std::shared_ptr<TokenStore> tokens;
  std::shared_ptr<AuditLog> audit;
  std::shared_ptr<AlertStore> alerting;
  std::shared_ptr<JobStore> jobs;
  std::shared_ptr<ScalingStore> scaling;
  std::shared_ptr<Database> database;
  std::shared_ptr<SettingStore> settings;
  std::shared_ptr<RolloutStore> rollouts;
  std::shared_ptr<DriftStore> drift;
  std::shared_ptr<ComplianceStore> compliance;
  std::shared_ptr<TeamStore> teams;
  std::shared_ptr<UsageStore> usage;
  std::shared_ptr<AssetStore> assets;
};

struct OpenOptions {
  int connections = 8;  // PostgreSQL: the size of the connection pool (SQLite uses one)
};

// url: "sqlite:PATH" (or a bare PATH), "postgresql://..." or "postgres://..." (libpq's URI).
// Applies the migrations this build knows; a database whose schema is newer is refused.
Result<Stores> Open(const std::string& url, const OpenOptions& options = {});

// The newest schema version this build knows.
int KnownSchemaVersion();

// `gpufleet store copy`: every table from one database to another, one transaction per table,
// each table's row count checked after. Refused (kConflict) unless every target table is empty.
struct TableCopy {
  std::string table;
  int64_t rows = 0;
};
Result<std::vector<TableCopy>> Copy(const std::string& from_url, const std::string& to_url);

// "postgresql://gpufleet:secret@db/x" -> "postgresql://gpufleet:***@db/x", for messages and logs.
std::string RedactUrl(const std::string& url);

}  // namespace store

}  // namespace gpufleet
