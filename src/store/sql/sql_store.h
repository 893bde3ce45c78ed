#pragma once
// The SQL store: every store interface over SOCI, for both backends (the SQL is portable; the
// backends differ in how a session is opened and in a few words of the schema). Private to
// this library: store::Open() in store.h is the way in. Files: sql_store.cpp (sessions,
// migrations, the database), fleet.cpp (fleet, tokens, audit), alerting.cpp, workload.cpp
// (jobs and scaling).

#include <soci/soci.h>

#include <boost/json/value.hpp>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "store/lease.h"
#include "store/store.h"

namespace gpufleet::store::sql {

enum class Dialect { kSqlite, kPostgres };

// Labels, exporters and remediation policies are stored as their JSON (model/json.h).
boost::json::value ParseOrNull(const std::string& text);
// A unique-key violation is kConflict; anything else (the database is down, the disk is
// full...) is kUnavailable: the API answers 503 and the caller may try again.
Error StoreError(const std::exception& e);

// A statement that runs once, with its into()/use() elements: on PostgreSQL one round trip
// (PQexecParams), where `sql.prepare << …` takes three (prepare, execute, deallocate). What the
// hot paths (a registration storm, authentication, the outbox poll) pay per statement.
template <typename... Elements>
soci::statement Once(soci::session& sql, const std::string& query, Elements&&... elements) {
  soci::statement st(sql);
  (st.exchange(std::forward<Elements>(elements)), ...);
  st.alloc();
  st.prepare(query, soci::details::st_one_time_query);
  st.define_and_bind();
  return st;
}

// Thread-safe. Each call leases one session of the pool for its duration: SQLite has one (its
// writers are serialised anyway), PostgreSQL `sessions`, so API calls do not queue behind one.
// No method calls another through Run(): a pool of one would deadlock.
class SqlStore final : public FleetStore,
                       public TokenStore,
                       public AuditLog,
                       public AlertStore,
                       public JobStore,
                       public ScalingStore,
                       public SettingStore,
                       public RolloutStore,
                       public DriftStore,
                       public ComplianceStore,
                       public TeamStore,
                       public UsageStore,
                       public AssetStore,
                       public Coordination,
                       public Database {
 public:
  // Opens (or opens again) one session: the backend, its connection string, its settings.
  using Connect = std::function<void(soci::session&)>;
  SqlStore(Dialect dialect, std::string location, Connect connect, size_t sessions);
  ~SqlStore() override;
  // Connects every session and applies the migrations this build knows.
  Status Open();

  Status ApplyFleet(const std::vector<Cluster>& clusters, const std::vector<Pool>& pools) override;
  Status DeleteFleet(const std::vector<std::string>& pools,
                     const std::vector<std::string>& clusters) override;
  Result<std::vector<Cluster>> ListClusters() override;
  Result<std::vector<Pool>> ListPools() override;
  Status SaveNode(const Node& n, const std::vector<NodeEvent>& events) override;
  Status DeleteNode(const std::string& name) override;
  Result<std::vector<Node>> LoadNodes() override;
  Result<std::vector<NodeEvent>> ListNodeEvents(const std::string& node, int limit) override;
  Status AppendGpuEvents(const std::vector<GpuEventRecord>& events) override;
  Result<std::vector<GpuEventRecord>> ListGpuEventsAfter(int64_t after_id, int limit) override;
  Result<std::vector<GpuEventRecord>> ListGpuEvents(const std::string& node,
                                                    const std::string& kind, int limit) override;

  Status CreateJoinToken(const JoinToken& t) override;
  Result<std::vector<JoinToken>> ListJoinTokens() override { return QueryJoinTokens(""); }
  Result<JoinToken> FindJoinToken(const std::string& hash) override;
  Status RevokeJoinToken(const std::string& id) override;
  Status CreateApiToken(const ApiToken& t) override;
  Result<std::vector<ApiToken>> ListApiTokens() override { return QueryApiTokens(""); }
  Result<ApiToken> FindApiToken(const std::string& hash) override;
  Status RotateApiToken(const std::string& id, const std::string& hash, const std::string& prefix,
                        int64_t previous_expires_ms) override;
  Status TouchApiTokens(const std::map<std::string, int64_t>& last_used_ms) override;
  Status RevokeApiToken(const std::string& id) override;

  Status AppendAudit(const AuditRecord& r) override;
  Result<std::vector<AuditRecord>> QueryAudit(const AuditFilter& filter) override;
  Result<AuditAnchor> FindAuditAnchor() override;
  Result<int64_t> PruneAudit(int64_t before_ms, const std::string& key) override;

  Status CreateChannel(const Channel& c) override;
  Status UpdateChannel(const Channel& c) override;
  Result<std::vector<Channel>> ListChannels() override;
  Status DeleteChannel(const std::string& name) override;
  Status RecordAlertChanges(const std::vector<std::pair<std::string, std::string>>& alerts,
                            const std::vector<Notification>& notifications) override;
  Result<std::vector<std::string>> LoadAlertDocs() override;
  Status DeleteAlertDoc(const std::string& fingerprint) override;
  Result<std::vector<Notification>> DueNotifications(int64_t now, int limit) override;
  Status AckNotification(int64_t id) override;
  Status DeferNotification(int64_t id, int64_t next_ms, const std::string& error) override;
  Result<std::vector<OutboxCount>> OutboxCounts() override;
  Status SaveRules(const std::vector<RuleRecord>& upsert,
                   const std::vector<std::string>& remove) override;
  Result<std::vector<RuleRecord>> ListRules() override;
  Status CreateSilence(const SilenceRecord& s) override;
  Result<std::vector<SilenceRecord>> ListSilences() override;
  Status ExpireSilence(const std::string& id, int64_t now) override;

  Status SaveJobs(const std::vector<JobRecord>& jobs) override;
  Result<std::vector<JobRecord>> ListJobs() override;
  Result<std::vector<JobRecord>> ListJobsUpdatedSince(int64_t since_ms) override;
  Status DeleteEndedJobsBefore(int64_t updated_ms) override;

  Status SaveScalingPolicy(const ScalingRecord& r) override;
  Status DeleteScalingPolicy(const std::string& pool) override;
  Result<std::vector<ScalingRecord>> ListScalingPolicies() override;
  Result<int64_t> AppendScaleEvent(const ScaleEventRecord& r) override;
  Result<std::vector<ScaleEventRecord>> ListScaleEvents(const std::string& pool,
                                                        int limit) override;
  Status AppendScalingSample(const ScalingSampleRecord& r) override;
  Result<std::vector<ScalingSampleRecord>> ListScalingSamples(const std::string& pool,
                                                              int64_t since_ms) override;
  Status DeleteScalingSamplesBefore(int64_t time_ms) override;

  Status PutSetting(const std::string& name, const std::string& doc, int64_t now_ms) override;
  Result<std::optional<std::string>> GetSetting(const std::string& name) override;
  Status DeleteSetting(const std::string& name) override;
  Result<int64_t> CreateRollout(const RolloutRecord& r) override;
  Status UpdateRollout(const RolloutRecord& r) override;
  Status SaveRolloutNodes(const RolloutRecord& r,
                          const std::vector<RolloutNodeRecord>& nodes) override;
  Result<std::vector<RolloutRecord>> ListRollouts() override;
  Result<std::vector<RolloutNodeRecord>> ListRolloutNodes(int64_t rollout) override;
  Status AppendRolloutEvents(const std::vector<RolloutEventRecord>& events) override;
  Result<std::vector<RolloutEventRecord>> ListRolloutEvents(int64_t rollout, int64_t after_id,
                                                            int limit) override;

  Status SaveDriftFindings(const std::vector<DriftRecord>& findings) override;
  Result<std::vector<DriftRecord>> ListDriftFindings() override;
  Result<int64_t> DeleteResolvedDriftBefore(int64_t before_ms) override;

  Status PutComplianceDay(const ComplianceDay& day) override;
  Result<std::vector<ComplianceDay>> ListComplianceDays(const std::string& from,
                                                        const std::string& to) override;
  Result<int64_t> DeleteComplianceDaysBefore(const std::string& day) override;

  Status PutTeam(const TeamRecord& team) override;
  Result<std::vector<TeamRecord>> ListTeams() override;
  Status DeleteTeam(const std::string& name) override;

  Status AppendUsage(const std::vector<UsageRecord>& records) override;
  Result<std::vector<UsageRecord>> ListUsage(const UsageQuery& query, int64_t* total) override;
  Result<int64_t> DeleteUsageBefore(int64_t before_ms) override;
  Status ScanUsage(const UsageQuery& query,
                   const std::function<void(const UsageRecord&)>& fn) override;
  Status AddPoolHours(const std::vector<PoolHour>& deltas) override;
  Result<std::vector<PoolHour>> ListPoolHours(int64_t from_ms, int64_t to_ms) override;
  Result<int64_t> DeletePoolHoursBefore(int64_t before_ms) override;
  Result<std::vector<UsageDay>> ListUsageDays(int64_t from_ms, int64_t to_ms,
                                              const std::string& cluster) override;
  Result<int64_t> MaxUsageSpan(int64_t from_ms, int64_t to_ms) override;

  Status SaveAssets(const std::vector<AssetRecord>& assets,
                    const std::vector<AssetEventRecord>& events) override;
  Result<std::vector<AssetRecord>> ListAssets() override;
  Result<std::vector<AssetEventRecord>> ListAssetEvents(const std::string& asset,
                                                        int limit) override;

  Result<Lease> TakeLease(const std::string& name, const std::string& holder,
                          int64_t lease_ms) override;
  Result<Lease> ReadLease(const std::string& name) override;
  Status ReleaseLease(const std::string& name, const std::string& holder) override;
  Status SeeController(const ControllerRecord& c) override;
  Result<std::vector<ControllerRecord>> ListControllers() override;
  Status ForgetController(const std::string& id, int64_t before_ms) override;
  Status PostCommand(const RelayedCommand& c) override;
  Result<std::vector<RelayedCommand>> RelayedCommands(const std::string& issuer,
                                                      bool every_answer) override;
  Result<bool> TakeCommand(int64_t id, const std::string& by) override;
  Status AnswerCommand(int64_t id, const std::string& result) override;
  Result<bool> ForgetCommand(int64_t id, bool untaken_only) override;

  std::string_view backend() const override;
  const std::string& location() const override { return location_; }
  Status Ping() override;
  Result<int> SchemaVersion() override;

  Dialect dialect() const { return dialect_; }
  // Opens `s` as the pool's sessions are (the change feed's own connection).
  void OpenSession(soci::session& s) const { connect_(s); }

  // Runs f(session) on a leased session and turns SOCI's exceptions into errors. A session
  // whose connection the server dropped (a restart, a failover) is connected again and f run
  // once more, so the first call after the database returns succeeds. Under a FenceScope
  // (store/lease.h) on PostgreSQL, f runs in a transaction that first checks the lease.
  template <class F>
  auto Run(F&& f) -> std::invoke_result_t<F&, soci::session&> {
    soci::session sql(*pool_);
    const Fence* fence = dialect_ == Dialect::kPostgres ? CurrentFence() : nullptr;
    for (int attempt = 0;; ++attempt) {
      try {
        if (!fence) return f(sql);
        if (auto lost = BeginFenced(sql, *fence); !lost.ok()) return lost.error();
        auto out = f(sql);
        EndFenced(sql, true);
        return out;
      } catch (const std::exception& e) {
        if (fence) EndFenced(sql, false);
        if (attempt == 0 && Reconnect(sql)) continue;
        return StoreError(e);
      }
    }
  }

 private:
  // gpu_events after `after_id` (0: all) of `node` and `kind` (empty: any), newest or oldest first.
  Result<std::vector<GpuEventRecord>> GpuEvents(const std::string& node, const std::string& kind,
                                                int64_t after_id, int limit, bool oldest_first);
  Status Migrate(soci::session& sql);
  // Migration 20: the daily sums of the records already in the ledger.
  void BackfillUsageDays(soci::session& sql);
  // A fenced call's transaction: BEGIN and the lease check (an error, and fence.on_lost
  // called, when the lease is no longer fence.epoch's); then COMMIT (or ROLLBACK) unless f
  // ended the transaction itself.
  Status BeginFenced(soci::session& sql, const Fence& fence);
  void EndFenced(soci::session& sql, bool commit);
  // True when the session's connection was lost and is open again.
  bool Reconnect(soci::session& sql);
  // All tokens, or the one with this hash when `hash` is not empty.
  Result<std::vector<JoinToken>> QueryJoinTokens(const std::string& hash);
  Result<std::vector<ApiToken>> QueryApiTokens(const std::string& hash);
  Status Revoke(const char* query, const std::string& id, const char* what);

  const Dialect dialect_;
  const std::string location_;
  const Connect connect_;
  const size_t sessions_;
  std::unique_ptr<soci::connection_pool> pool_;  // thread-safe itself
  // Appends to the audit chain one at a time, and the newest record's hash (empty optional:
  // read it from the database first). One controller writes a database.
  std::mutex audit_mu_;
  std::optional<std::string> audit_head_;
};

}  // namespace gpufleet::store::sql
