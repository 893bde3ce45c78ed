#pragma once
// The embedded store's class, shared by the files that implement it (sqlite_store.cpp: the
// fleet, nodes, tokens, GPU events and audit; sqlite_alerting.cpp: channels, alerts, the
// outbox, rules and silences; sqlite_workload.cpp: jobs and scaling). Not included elsewhere:
// OpenStore() in store.h is the way in.

#include <soci/soci.h>

#include <boost/json/value.hpp>
#include <mutex>
#include <string>

#include "store/store.h"

namespace gpufleet::sqlite_store {

// Labels, exporters and remediation policies are stored as their JSON (model/json.h).
boost::json::value ParseOrNull(const std::string& text);
Error StoreError(const std::exception& e);

class SqliteStore : public Store {
 public:
  explicit SqliteStore(const std::string& path) : path_(path) {}
  Status Open();
  Status ApplyFleet(const std::vector<Cluster>& clusters, const std::vector<Pool>& pools) override;
  Result<std::vector<Cluster>> ListClusters() override;
  Result<std::vector<Pool>> ListPools() override;
  Status SaveNode(const Node& n, const std::vector<NodeEvent>& events) override;
  Result<std::vector<Node>> LoadNodes() override;
  Result<std::vector<NodeEvent>> ListNodeEvents(const std::string& node, int limit) override;
  Status CreateJoinToken(const JoinToken& t) override;
  Result<std::vector<JoinToken>> ListJoinTokens() override { return QueryJoinTokens(""); }
  Result<JoinToken> FindJoinToken(const std::string& hash) override;
  Status RevokeJoinToken(const std::string& id) override;
  Status CreateApiToken(const ApiToken& t) override;
  Result<std::vector<ApiToken>> ListApiTokens() override { return QueryApiTokens(""); }
  Result<ApiToken> FindApiToken(const std::string& hash) override;
  Status RevokeApiToken(const std::string& id) override;
  Status AppendGpuEvents(const std::vector<GpuEventRecord>& events) override;
  Result<std::vector<GpuEventRecord>> ListGpuEvents(const std::string& node,
                                                    const std::string& kind, int limit) override;
  Status AppendAudit(const AuditRecord& r) override;
  Status CreateChannel(const Channel& c) override;
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
  Status SaveJobs(const std::vector<JobRecord>& jobs) override;
  Result<std::vector<JobRecord>> ListJobs() override;
  Status SaveScalingPolicy(const ScalingRecord& r) override;
  Status DeleteScalingPolicy(const std::string& pool) override;
  Result<std::vector<ScalingRecord>> ListScalingPolicies() override;
  Result<int64_t> AppendScaleEvent(const ScaleEventRecord& r) override;
  Result<std::vector<ScaleEventRecord>> ListScaleEvents(const std::string& pool,
                                                        int limit) override;
  Status AppendScalingSample(const ScalingSampleRecord& r) override;
  Result<std::vector<ScalingSampleRecord>> ListScalingSamples(const std::string& pool,
                                                              int64_t since_ms) override;
  Status DeleteEndedJobsBefore(int64_t updated_ms) override;
  Status DeleteScalingSamplesBefore(int64_t time_ms) override;
  Status CreateSilence(const SilenceRecord& s) override;
  Result<std::vector<SilenceRecord>> ListSilences() override;
  Status ExpireSilence(const std::string& id, int64_t now) override;
  Result<std::vector<AuditRecord>> ListAudit(int64_t before_id, int limit) override;

 private:
  Status Migrate();

  // All tokens, or the one with this hash when `hash` is not empty.
  Result<std::vector<JoinToken>> QueryJoinTokens(const std::string& hash);
  Result<std::vector<ApiToken>> QueryApiTokens(const std::string& hash);
  Status Revoke(const char* query, const std::string& id, const char* what);
  std::string path_;
  std::mutex mu_;
  soci::session sql_;  // guarded by mu_
};

}  // namespace gpufleet::sqlite_store
