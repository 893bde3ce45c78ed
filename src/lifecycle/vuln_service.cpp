#include "lifecycle/vuln_service.h"

#include <algorithm>
#include <boost/json.hpp>
#include <map>
#include <optional>

#include "common/json_text.h"

namespace json = boost::json;

namespace gpufleet::lifecycle {
namespace {

// The store's settings: "bulletins" lists the imported ids ({"version": 1, "imported": [...]}),
// "bulletin/<id>" keeps each one's CSAF document as it was imported.
constexpr char kIndex[] = "bulletins";
std::string DocKey(const std::string& id) { return "bulletin/" + id; }

Result<std::vector<std::string>> ParseIndex(const std::string& doc) {
  boost::system::error_code ec;
  json::value v = json::parse(doc, ec);
  const json::object* o = ec ? nullptr : v.if_object();
  const json::value* list = o ? o->if_contains("imported") : nullptr;
  if (list == nullptr || !list->is_array()) {
    return MakeError(ErrorCode::kInternal, "setting 'bulletins' is not a list of imported ids");
  }
  std::vector<std::string> ids;
  for (const auto& e : list->as_array()) {
    if (!e.is_string()) return MakeError(ErrorCode::kInternal, "setting 'bulletins': not an id");
    ids.emplace_back(e.as_string());
  }
  return ids;
}

std::string IndexDoc(const std::vector<std::string>& ids) {
  json::array list;
  for (const auto& id : ids) list.emplace_back(id);
  return JsonText(json::object{{"version", 1}, {"imported", std::move(list)}});
}

}  // namespace

VulnService::VulnService(FleetService& fleet, CompatService& compat, store::SettingStore& settings,
                         std::shared_ptr<Clock> clock)
    : fleet_(fleet),
      compat_(compat),
      settings_(settings),
      clock_(std::move(clock)),
      bulletins_(BulletinSet::Builtin()) {}

Status VulnService::Load() {
  std::optional<std::string> index;
  GF_TRY_ASSIGN(index, settings_.GetSetting(kIndex));
  if (!index) return {};
  std::vector<std::string> ids;
  GF_TRY_ASSIGN(ids, ParseIndex(*index));
  auto set = std::make_shared<BulletinSet>(*BulletinSet::Builtin());
  for (const auto& id : ids) {
    std::optional<std::string> doc;
    GF_TRY_ASSIGN(doc, settings_.GetSetting(DocKey(id)));
    if (!doc) return MakeError(ErrorCode::kInternal, "imported bulletin " + id + " is missing");
    auto b = ParseCsafAdvisory(*doc);
    if (!b.ok()) {
      return MakeError(ErrorCode::kInternal,
                       "imported bulletin " + id + " no longer reads: " + b.error().message);
    }
    b->origin = "imported";
    set->Put(std::move(b.value()));
  }
  std::lock_guard lock(mu_);
  bulletins_ = std::move(set);
  imported_ = std::move(ids);
  cache_.clear();
  return {};
}

std::shared_ptr<const BulletinSet> VulnService::bulletins() const {
  std::lock_guard lock(mu_);
  return bulletins_;
}

Result<Bulletin> VulnService::Import(std::string_view csaf_json) {
  Bulletin b;
  GF_TRY_ASSIGN(b, ParseCsafAdvisory(csaf_json));
  b.origin = "imported";
  std::lock_guard lock(mu_);
  std::vector<std::string> ids = imported_;
  if (std::find(ids.begin(), ids.end(), b.id) == ids.end()) ids.push_back(b.id);
  // The document first: an index never names a document that is not there.
  const int64_t now = clock_->NowMs();
  GF_TRY(settings_.PutSetting(DocKey(b.id), std::string(csaf_json), now));
  GF_TRY(settings_.PutSetting(kIndex, IndexDoc(ids), now));
  auto set = std::make_shared<BulletinSet>(*bulletins_);
  set->Put(b);
  bulletins_ = std::move(set);
  imported_ = std::move(ids);
  cache_.clear();
  return b;
}

void VulnService::RefreshCacheLocked() {
  std::shared_ptr<const CompatMatrix> matrix = compat_.current().matrix;
  std::string today = compat_.today();
  if (matrix != cache_matrix_ || today != cache_day_) {
    cache_.clear();
    cache_matrix_ = std::move(matrix);
    cache_day_ = std::move(today);
  }
}

std::shared_ptr<const VulnVerdict> VulnService::JudgeLocked(const NodeSoftware& software) {
  std::string key = software.driver + '\n' + software.container_toolkit;
  auto it = cache_.find(key);
  if (it != cache_.end()) {
    ++stats_.cached;
    return it->second;
  }
  ++stats_.judged;
  auto verdict = std::make_shared<const VulnVerdict>(
      JudgeNode(*bulletins_, *cache_matrix_, software, cache_day_));
  cache_.emplace(std::move(key), verdict);
  return verdict;
}

std::vector<NodeVulns> VulnService::Nodes(const VulnFilter& filter) {
  NodeFilter nf;
  nf.name = filter.node;
  nf.pool = filter.pool;
  nf.cluster = filter.cluster;
  nf.clusters = filter.clusters;
  std::vector<NodeVulns> out;
  std::lock_guard lock(mu_);
  RefreshCacheLocked();
  fleet_.ForEachNode(nf, [&](const Node& n) {
    NodeVulns v{n.name, n.cluster, n.pool,
                NodeSoftware{n.facts.driver_version, n.facts.container_toolkit}, n.simulated};
    v.verdict = JudgeLocked(v.software);
    if (!filter.status.empty() && v.verdict->status != filter.status) return;
    if (filter.min_cvss > 0) {
      if (v.verdict->max_cvss < filter.min_cvss) return;
      auto cut = std::make_shared<VulnVerdict>(*v.verdict);
      std::erase_if(cut->cves, [&](const Exposure& e) { return e.cvss < filter.min_cvss; });
      v.verdict = std::move(cut);
    }
    out.push_back(std::move(v));
  });
  std::sort(out.begin(), out.end(),
            [](const NodeVulns& a, const NodeVulns& b) { return a.node < b.node; });
  return out;
}

std::unordered_map<std::string, double> VulnService::MaxCvss() {
  std::unordered_map<std::string, double> out;
  std::lock_guard lock(mu_);
  RefreshCacheLocked();
  fleet_.ForEachNode({}, [&](const Node& n) {
    auto v = JudgeLocked(NodeSoftware{n.facts.driver_version, n.facts.container_toolkit});
    if (v->max_cvss > 0) out.emplace(n.name, v->max_cvss);
  });
  return out;
}

Result<FixProposal> VulnService::ProposeFix(const std::string& pool_name) {
  Pool pool;
  GF_TRY_ASSIGN(pool, fleet_.FindPool(pool_name));
  std::vector<Cluster> clusters;
  GF_TRY_ASSIGN(clusters, fleet_.Clusters());
  auto cluster = std::find_if(clusters.begin(), clusters.end(),
                              [&](const Cluster& c) { return c.name == pool.cluster; });
  CompatNeeds needs = cluster != clusters.end() ? EffectiveNeeds(*cluster, pool) : CompatNeeds{};
  // The branch most of the pool's nodes run, and each node's verdict.
  std::vector<NodeVulns> nodes = Nodes(VulnFilter{.pool = pool_name});
  std::map<std::string, int> branches;
  for (const auto& n : nodes) {
    if (!n.verdict->branch.empty()) ++branches[n.verdict->branch];
  }
  std::string current;
  for (const auto& [branch, count] : branches) {
    if (current.empty() || count > branches[current]) current = branch;
  }
  FixProposal out;
  out.pool = pool_name;
  out.target = ChooseFixTarget(*bulletins(), *compat_.current().matrix, needs.driver_branch,
                               current, compat_.today());
  if (out.target.target.empty()) {
    return MakeError(ErrorCode::kConflict, "no bulletin names a fixed driver for pool " +
                                               pool_name + " (" + out.target.why + ")");
  }
  for (const auto& n : nodes) {
    const bool needs_driver =
        !n.verdict->fixed_driver.empty() || n.verdict->status == "unsupported_branch";
    if (needs_driver && n.software.driver != out.target.target) out.nodes.push_back(n.node);
  }
  if (out.nodes.empty()) {
    return MakeError(ErrorCode::kConflict,
                     "no node of pool " + pool_name + " needs a driver to fix a published CVE");
  }
  return out;
}

VulnService::Stats VulnService::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace gpufleet::lifecycle
