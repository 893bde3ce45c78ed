#pragma once
// The asset register (model/asset.h): kept in memory, stored one document per asset with an
// event per change. Discovery adds every GPU and node the fleet reports and follows a GPU by its
// serial from node to node; imports (NetBox's CSV columns, or JSON) add what discovery cannot
// know (purchase, warranty, location); operators move assets through their lifecycle.
// Thread-safe.

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "model/asset.h"
#include "model/types.h"
#include "store/store.h"

namespace gpufleet {

struct AssetFilter {
  std::string kind, state, model, site, node;  // empty: any; state is a lifecycle state
  int warranty_within_days = -1;  // >= 0: only those whose warranty ends within that many days
};

// A node as discovery reports it: what the asset register needs of a fleet Node.
struct NodeSighting {
  std::string node, cluster;
  int64_t last_seen_ms = 0;  // of two nodes reporting one GPU, the later one has it
  struct Gpu {
    int index = 0;
    std::string serial, uuid, model;
  };
  std::vector<Gpu> gpus;
  static NodeSighting Of(const Node& node);
};

struct AssetImport {
  int applied = 0;  // rows that created or changed an asset
  int created = 0, updated = 0, unchanged = 0;
};

// What the Inventory page shows: counts by model, site and state, the warranties that end soon,
// and how old the GPUs are.
struct AssetSummary {
  struct Counts {
    int total = 0;
    std::map<std::string, int> by_model, by_site, by_state;
  };
  Counts gpus, nodes;
  std::vector<Asset> warranty_expiring;  // ending within the window, soonest first
  int warranty_expired = 0;              // in service or spare, warranty over
  int warranty_unknown = 0;
  // GPUs by years since purchase: "<1y", "1-2y", "2-3y", "3-4y", "4-5y", "5y+", "unknown".
  std::map<std::string, int> gpu_age;
  double gpu_mean_age_years = -1;  // -1: no purchase date known
};

class AssetService {
 public:
  AssetService(store::AssetStore& store, std::shared_ptr<Clock> clock);
  Status Load();

  std::vector<Asset> List(const AssetFilter& filter) const;  // by kind, then id
  Result<Asset> Get(const std::string& id) const;            // kNotFound when none
  Result<std::vector<AssetEvent>> History(const std::string& id, int limit);
  AssetSummary Summary(int warranty_days) const;

  // Applies a whole file's rows, or none of them: an asset tag that another asset has, or a row
  // that names a node as a GPU's serial, is a kInvalidArgument naming the row. An asset new to
  // the register without a status is a spare until discovery finds it in a node.
  // A dry run checks and counts the same and applies nothing.
  Result<AssetImport> Import(const std::vector<AssetPatch>& rows, const std::string& actor,
                             bool dry_run = false);
  // A lifecycle step (into RMA with its RMA number as the note, back from repair, retired).
  Result<Asset> SetState(const std::string& id, AssetState state, const std::string& note,
                         const std::string& actor);

  // Discovery: the fleet's nodes as they are now, and each cluster's site. A GPU seen for the
  // first time is added in service; one found in another node (or another slot) has moved,
  // and one that was in no node is back in service; one no node reports any more is a spare.
  // Nodes likewise. A GPU without a serial is followed by its UUID.
  Status Observe(const std::vector<NodeSighting>& nodes,
                 const std::map<std::string, std::string>& cluster_site);

 private:
  Status Save(const std::vector<const Asset*>& assets, std::vector<AssetEvent> events);
  store::AssetStore& store_;
  std::shared_ptr<Clock> clock_;
  mutable std::mutex mu_;
  std::map<std::string, Asset> assets_;  // by id; guarded by mu_
};

}  // namespace gpufleet
