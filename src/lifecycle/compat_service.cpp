#include "lifecycle/compat_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace gpufleet::lifecycle {

namespace {
constexpr const char* kSetting = "compat";
}

CompatService::CompatService(FleetService& fleet, store::SettingStore& settings,
                             std::shared_ptr<const GpuCatalog> catalog,
                             std::shared_ptr<Clock> clock)
    : fleet_(fleet), settings_(settings), catalog_(std::move(catalog)), clock_(std::move(clock)) {
  current_ = {CompatMatrix::Builtin(), false, std::string(CompatMatrix::BuiltinText())};
}

Status CompatService::Load() {
  auto stored = settings_.GetSetting(kSetting);
  if (!stored.ok()) return stored.error();
  if (!stored->has_value()) return {};
  auto parsed = CompatMatrix::Parse(**stored, "the applied compatibility matrix");
  if (!parsed.ok()) return parsed.error();
  std::lock_guard lock(mu_);
  current_ = {parsed.value(), true, **stored};
  spdlog::info("compat: using the applied compatibility matrix ({} branches)",
               parsed.value()->branches().size());
  return {};
}

std::string CompatService::today() const { return FormatTime(clock_->NowMs()).substr(0, 10); }

MatrixInEffect CompatService::current() const {
  std::lock_guard lock(mu_);
  return current_;
}

Status CompatService::Apply(const std::string& yaml, const std::string& filename) {
  auto parsed = CompatMatrix::Parse(yaml, filename);
  if (!parsed.ok()) return parsed.error();
  GF_TRY(settings_.PutSetting(kSetting, yaml, clock_->NowMs()));
  std::lock_guard lock(mu_);
  current_ = {parsed.value(), true, yaml};
  return {};
}

Status CompatService::Reset() {
  GF_TRY(settings_.DeleteSetting(kSetting));
  std::lock_guard lock(mu_);
  current_ = {CompatMatrix::Builtin(), false, std::string(CompatMatrix::BuiltinText())};
  return {};
}

Result<CompatResult> CompatService::Check(const std::string& pool_name, const std::string& driver,
                                          const std::string& cuda) {
  auto pool = fleet_.FindPool(pool_name);
  if (!pool.ok()) return pool.error();
  auto clusters = fleet_.Clusters();
  if (!clusters.ok()) return clusters.error();
  for (const auto& c : clusters.value()) {
    if (c.name == pool->cluster) return Check(c, pool.value(), driver, cuda);
  }
  return MakeError(ErrorCode::kNotFound, "pool '" + pool_name + "' has no cluster");
}

CompatResult CompatService::Check(const Cluster& cluster, const Pool& pool,
                                  const std::string& driver, const std::string& cuda) {
  CompatQuery q;
  q.driver = driver;
  q.needs = EffectiveNeeds(cluster, pool);
  if (!cuda.empty()) q.needs.cuda = cuda;
  // The pool's model and whatever its nodes really have.
  std::vector<std::string> models{pool.gpu_model};
  NodeFilter filter;
  filter.pool = pool.name;
  for (const auto& n : fleet_.Nodes(filter)) {
    for (const auto& g : n.gpus) {
      if (!g.model.empty()) models.push_back(g.model);
    }
  }
  std::sort(models.begin(), models.end());
  models.erase(std::unique(models.begin(), models.end()), models.end());
  for (const auto& m : models) {
    q.models.push_back(m);
    if (const auto* spec = catalog_->Find(m);
        spec && !spec->architecture.empty() &&
        std::find(q.architectures.begin(), q.architectures.end(), spec->architecture) ==
            q.architectures.end()) {
      q.architectures.push_back(spec->architecture);
    }
  }
  q.today = today();
  return current().matrix->Check(q);
}

}  // namespace gpufleet::lifecycle
