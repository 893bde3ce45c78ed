#include "fleet/assets.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

namespace gpufleet {

NodeSighting NodeSighting::Of(const Node& node) {
  NodeSighting s{node.name, node.cluster, node.last_seen_ms, {}};
  for (const auto& g : node.gpus) s.gpus.push_back({g.index, g.serial, g.uuid, g.model});
  return s;
}

AssetService::AssetService(store::AssetStore& store, std::shared_ptr<Clock> clock)
    : store_(store), clock_(std::move(clock)) {}

Status AssetService::Load() {
  std::lock_guard lock(mu_);  // every change writes under it: nothing read here is older
  auto records = store_.ListAssets();
  if (!records.ok()) return records.error();
  std::map<std::string, Asset> assets;
  for (const auto& r : records.value()) {
    auto a = ParseAssetDoc(r.doc);
    if (!a.ok()) {
      spdlog::error("assets: stored asset '{}' is unreadable, left out: {}", r.id,
                    a.error().message);
      continue;
    }
    assets[r.id] = std::move(a).value();
  }
  assets_ = std::move(assets);
  return {};
}

namespace {

bool Matches(const Asset& a, const AssetFilter& f, int64_t today) {
  if (!f.kind.empty() && a.kind != f.kind) return false;
  if (!f.state.empty() && ToString(a.state) != f.state) return false;
  if (!f.model.empty() && a.model != f.model) return false;
  if (!f.site.empty() && a.site != f.site) return false;
  if (!f.node.empty() && a.node != f.node) return false;
  if (f.warranty_within_days >= 0) {
    auto end = ParseIsoDate(a.warranty_end);
    if (!end || *end < today || *end > today + f.warranty_within_days) return false;
  }
  return true;
}

std::string Slot(const std::string& node, int index) {
  return index >= 0 ? node + ":" + std::to_string(index) : node;
}

// The event a state change is: into RMA, back from it, or another step.
AssetEvent StateEvent(const Asset& a, AssetState from, int64_t now, const std::string& actor,
                      const std::string& note) {
  std::string kind = a.state == AssetState::kRma ? "rma"
                     : from == AssetState::kRma  ? "repaired"
                                                 : "state";
  return {0,     a.id(), now, kind, std::string(ToString(from)), std::string(ToString(a.state)),
          actor, note};
}

}  // namespace

std::vector<Asset> AssetService::List(const AssetFilter& filter) const {
  int64_t today = clock_->NowMs() / 86'400'000;
  std::lock_guard lock(mu_);
  std::vector<Asset> out;
  for (const auto& [id, a] : assets_) {
    if (Matches(a, filter, today)) out.push_back(a);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Asset& x, const Asset& y) { return x.kind > y.kind; });  // nodes first
  return out;
}

Result<Asset> AssetService::Get(const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = assets_.find(id);
  if (it == assets_.end()) return MakeError(ErrorCode::kNotFound, "no asset '" + id + "'");
  return it->second;
}

Result<std::vector<AssetEvent>> AssetService::History(const std::string& id, int limit) {
  if (auto a = Get(id); !a.ok()) return a.error();
  auto records = store_.ListAssetEvents(id, limit);
  if (!records.ok()) return records.error();
  std::vector<AssetEvent> out;
  for (const auto& r : records.value()) {
    auto e = ParseAssetEventDoc(r.doc);
    if (!e.ok()) continue;
    e->id = r.id;
    out.push_back(std::move(e).value());
  }
  return out;
}

AssetSummary AssetService::Summary(int warranty_days) const {
  int64_t today = clock_->NowMs() / 86'400'000;
  AssetSummary s;
  double age_sum = 0;
  int aged = 0;
  std::lock_guard lock(mu_);
  for (const auto& [id, a] : assets_) {
    bool gpu = a.kind == "gpu";
    AssetSummary::Counts& c = gpu ? s.gpus : s.nodes;
    ++c.total;
    ++c.by_model[a.model.empty() ? "unknown" : a.model];
    ++c.by_site[a.site.empty() ? "unknown" : a.site];
    ++c.by_state[std::string(ToString(a.state))];
    bool counted = a.state == AssetState::kInService || a.state == AssetState::kSpare;
    if (auto end = ParseIsoDate(a.warranty_end)) {
      if (*end < today) {
        if (counted) ++s.warranty_expired;
      } else if (*end <= today + warranty_days && a.state != AssetState::kRetired) {
        s.warranty_expiring.push_back(a);
      }
    } else if (counted) {
      ++s.warranty_unknown;
    }
    if (!gpu || a.state == AssetState::kRetired) continue;
    auto bought = ParseIsoDate(a.purchase_date);
    if (!bought) {
      ++s.gpu_age["unknown"];
      continue;
    }
    double years = static_cast<double>(today - *bought) / 365.25;
    static const char* kBuckets[] = {"<1y", "1-2y", "2-3y", "3-4y", "4-5y", "5y+"};
    ++s.gpu_age[kBuckets[std::clamp(static_cast<int>(years), 0, 5)]];
    age_sum += years;
    ++aged;
  }
  if (aged) s.gpu_mean_age_years = age_sum / aged;
  std::sort(
      s.warranty_expiring.begin(), s.warranty_expiring.end(), [](const Asset& x, const Asset& y) {
        return std::tie(x.warranty_end, x.kind, x.name) < std::tie(y.warranty_end, y.kind, y.name);
      });
  return s;
}

Status AssetService::Save(const std::vector<const Asset*>& assets, std::vector<AssetEvent> events) {
  std::vector<store::AssetRecord> records;
  for (const Asset* a : assets) {
    records.push_back(
        {a->id(), a->kind, std::string(ToString(a->state)), AssetDoc(*a), a->updated_ms});
  }
  std::vector<store::AssetEventRecord> docs;
  for (const auto& e : events) docs.push_back({0, e.asset, e.time_ms, AssetEventDoc(e)});
  return store_.SaveAssets(records, docs);
}

namespace {

// Asset tags stay unique across the register as it will be: `current` with `next` over it.
Status UniqueTags(const std::map<std::string, Asset>& current,
                  const std::map<std::string, Asset>& next, const std::vector<AssetPatch>& rows) {
  std::map<std::string, std::string> tags;
  for (const auto& [id, a] : current) {
    if (!a.asset_tag.empty() && !next.count(id)) tags[a.asset_tag] = id;
  }
  for (const auto& row : rows) {
    auto n = next.find(row.key);
    if (n == next.end() || n->second.asset_tag.empty()) continue;
    auto [t, fresh] = tags.try_emplace(n->second.asset_tag, row.key);
    if (!fresh && t->second != row.key) {
      return MakeError(ErrorCode::kInvalidArgument,
                       row.where + ", field 'asset_tag': '" + n->second.asset_tag +
                           "' is the asset tag of '" + t->second + "' (asset tags are unique)");
    }
  }
  return {};
}

}  // namespace

Result<AssetImport> AssetService::Import(const std::vector<AssetPatch>& rows,
                                         const std::string& actor, bool dry_run) {
  std::lock_guard lock(mu_);
  int64_t now = clock_->NowMs();
  AssetImport counts;
  std::map<std::string, Asset> next;  // the rows' assets as they will be
  std::vector<AssetEvent> events;
  for (const auto& row : rows) {
    auto at = [&](std::string_view field) {
      return MakeError(ErrorCode::kInvalidArgument,
                       row.where + ", field '" + std::string(field) + "': ");
    };
    auto it = assets_.find(row.key);
    bool created = it == assets_.end();
    if (!created && it->second.kind != row.kind) {
      auto e = at(row.kind == "node" ? "name" : "serial");
      e.message +=
          "'" + row.key + "' is a " + it->second.kind + " in the register, not a " + row.kind;
      return e;
    }
    Asset a = created ? Asset{} : it->second;
    if (created) {
      a.kind = row.kind;
      a.state = AssetState::kSpare;
      a.created_ms = now;
    }
    AssetState before = a.state;
    auto changed = ApplyPatch(row, a);
    if (a.id() != row.key) {  // the key column is what finds it; it cannot change here
      auto e = at(row.kind == "node" ? "name" : "serial");
      e.message += "the key does not match";
      return e;
    }
    if (created) {
      ++counts.created;
      events.push_back({0, a.id(), now, "imported", "", "", actor, row.where});
      if (a.state != AssetState::kSpare) {
        events.push_back(StateEvent(a, AssetState::kSpare, now, actor, row.where));
      }
    } else if (changed.empty()) {
      ++counts.unchanged;
      continue;
    } else {
      ++counts.updated;
      std::vector<std::string> fields;
      for (const auto& f : changed) {
        if (f != "status") fields.push_back(f);
      }
      if (!fields.empty()) {
        std::string list;
        for (const auto& f : fields) list += (list.empty() ? "" : ", ") + f;
        events.push_back({0, a.id(), now, "edited", "", list, actor, row.where});
      }
      if (a.state != before) events.push_back(StateEvent(a, before, now, actor, row.where));
    }
    a.updated_ms = now;
    next[a.id()] = std::move(a);
  }
  GF_TRY(UniqueTags(assets_, next, rows));
  counts.applied = counts.created + counts.updated;
  if (dry_run) return counts;
  std::vector<const Asset*> save;
  for (const auto& [id, a] : next) save.push_back(&a);
  GF_TRY(Save(save, events));
  for (auto& [id, a] : next) assets_[id] = std::move(a);
  return counts;
}

Result<Asset> AssetService::SetState(const std::string& id, AssetState state,
                                     const std::string& note, const std::string& actor) {
  std::lock_guard lock(mu_);
  auto it = assets_.find(id);
  if (it == assets_.end()) return MakeError(ErrorCode::kNotFound, "no asset '" + id + "'");
  if (it->second.state == state) return it->second;
  Asset a = it->second;
  AssetState from = a.state;
  a.state = state;
  a.updated_ms = clock_->NowMs();
  GF_TRY(Save({&a}, {StateEvent(a, from, a.updated_ms, actor, note)}));
  it->second = a;
  return a;
}

Status AssetService::Observe(const std::vector<NodeSighting>& nodes,
                             const std::map<std::string, std::string>& cluster_site) {
  // Where each GPU is now. Two nodes may report one serial for a while: a GPU moved, and its old
  // node has not reported since (it is down, being worked on). It stays where it is recorded
  // while that node reports it, so that two reports never make it flap between nodes; else the
  // node heard from last has it.
  struct Seen {
    const NodeSighting* node;
    const NodeSighting::Gpu* gpu;
  };
  std::map<std::string, Seen> gpus;
  std::map<std::string, const NodeSighting*> by_name;
  std::lock_guard lock(mu_);
  for (const auto& n : nodes) {
    by_name[n.node] = &n;
    for (const auto& g : n.gpus) {
      const std::string& key = g.serial.empty() ? g.uuid : g.serial;
      if (key.empty()) continue;
      auto [it, fresh] = gpus.try_emplace(key, Seen{&n, &g});
      if (fresh) continue;
      auto known = assets_.find(key);
      auto here = [&](const NodeSighting& s) {
        return known != assets_.end() && known->second.node == s.node;
      };
      if (here(*it->second.node)) continue;
      if (here(n) || n.last_seen_ms > it->second.node->last_seen_ms) it->second = {&n, &g};
    }
  }
  int64_t now = clock_->NowMs();
  std::map<std::string, Asset> changed;
  std::vector<AssetEvent> events;
  auto site_of = [&](const std::string& cluster) {
    auto it = cluster_site.find(cluster);
    return it == cluster_site.end() ? std::string() : it->second;
  };
  // Places `a` (a copy, or a new asset) at `node`/`index`; the events it takes.
  auto place = [&](Asset a, bool fresh, const NodeSighting& n, int index) {
    std::string to = Slot(n.node, index);
    if (fresh) {
      a.state = AssetState::kInService;
      a.created_ms = a.first_seen_ms = now;
      events.push_back({0, a.id(), now, "discovered", "", to, "discovery", ""});
    } else {
      std::string from = !a.node.empty() ? Slot(a.node, a.gpu_index) : a.last_node;
      bool moved = !from.empty() && from != to;
      events.push_back({0, a.id(), now, moved ? "moved" : "installed", from, to, "discovery", ""});
      if (a.first_seen_ms == 0) a.first_seen_ms = now;
      if (a.state != AssetState::kInService) {
        AssetState before = a.state;
        a.state = AssetState::kInService;
        events.push_back(StateEvent(a, before, now, "discovery", "found in " + to));
      }
    }
    a.node = n.node;
    a.gpu_index = index;
    if (std::string site = site_of(n.cluster); !site.empty()) a.site = site;
    a.updated_ms = now;
    changed[a.id()] = std::move(a);
  };
  // Takes `a` out of its node: the node no longer reports it.
  auto remove = [&](Asset a) {
    std::string from = Slot(a.node, a.gpu_index);
    events.push_back({0, a.id(), now, "removed", from, "", "discovery", ""});
    a.last_node = from;
    a.node.clear();
    a.gpu_index = -1;
    if (a.state == AssetState::kInService) {
      a.state = AssetState::kSpare;
      events.push_back(
          StateEvent(a, AssetState::kInService, now, "discovery", "no node reports it"));
    }
    a.updated_ms = now;
    changed[a.id()] = std::move(a);
  };
  for (const auto& n : nodes) {
    auto it = assets_.find(n.node);
    if (it == assets_.end()) {
      Asset a;
      a.kind = "node";
      a.name = n.node;
      place(std::move(a), true, n, -1);
    } else if (it->second.kind == "node" && it->second.node != n.node) {
      place(it->second, false, n, -1);
    }
  }
  for (const auto& [key, seen] : gpus) {
    auto it = assets_.find(key);
    if (it == assets_.end()) {
      Asset a;
      a.serial = key;
      a.gpu_uuid = seen.gpu->uuid;
      a.model = seen.gpu->model;
      a.name = seen.node->node + "/gpu" + std::to_string(seen.gpu->index);
      place(std::move(a), true, *seen.node, seen.gpu->index);
      continue;
    }
    const Asset& a = it->second;
    if (a.kind != "gpu") continue;
    bool same = a.node == seen.node->node && a.gpu_index == seen.gpu->index;
    bool facts =
        a.gpu_uuid == seen.gpu->uuid && (seen.gpu->model.empty() || a.model == seen.gpu->model);
    if (same && facts) continue;
    Asset next = a;
    next.gpu_uuid = seen.gpu->uuid;
    if (!seen.gpu->model.empty()) next.model = seen.gpu->model;
    next.name = seen.node->node + "/gpu" + std::to_string(seen.gpu->index);
    if (same) {
      next.updated_ms = now;
      changed[a.id()] = std::move(next);
    } else {
      place(std::move(next), false, *seen.node, seen.gpu->index);
    }
  }
  for (const auto& [id, a] : assets_) {
    if (a.node.empty() || changed.count(id)) continue;
    bool gone = a.kind == "node" ? !by_name.count(a.node) : !gpus.count(id);
    if (gone) remove(a);
  }
  if (changed.empty()) return {};
  std::vector<const Asset*> save;
  for (const auto& [id, a] : changed) save.push_back(&a);
  GF_TRY(Save(save, events));
  for (auto& [id, a] : changed) assets_[id] = std::move(a);
  return {};
}

}  // namespace gpufleet
