#pragma once
// Assets: every GPU and node as a thing that was bought, sits somewhere, is under warranty for a
// while and goes through a lifecycle (in service, spare, RMA, retired), with its history. A GPU
// is known by its board serial wherever it goes; a node by its name.
//
// Import and export use NetBox's device columns where NetBox has one and gpufleet's own for the
// rest (kAssetColumns); `status` carries NetBox's values, mapped to the four lifecycle states:
//   active -> in_service; inventory, planned, staged -> spare; failed -> rma;
//   offline, decommissioning -> retired
// and exported back as active, inventory, failed and decommissioning.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace gpufleet {

enum class AssetState { kInService, kSpare, kRma, kRetired };
std::string_view ToString(AssetState state);                       // "in_service", "rma", ...
std::optional<AssetState> ParseAssetState(std::string_view text);  // those four
std::string_view NetboxStatus(AssetState state);
std::optional<AssetState> FromNetboxStatus(std::string_view status);
extern const char* const kNetboxStatuses;  // "offline, active, planned, ..." for messages

struct Asset {
  std::string kind = "gpu";  // "gpu" or "node"
  std::string serial;        // a GPU's board serial (its key); a node's chassis serial
  std::string name;          // NetBox's device name; a node's is its key; "NODE/gpuN" installed
  std::string asset_tag;     // unique across the assets, as in NetBox
  AssetState state = AssetState::kInService;
  std::string site, location, rack, position;  // NetBox: location is the room, position the U
  std::string gpu_uuid, model, part_number;
  std::string purchase_date;  // YYYY-MM-DD; empty: unknown
  std::optional<double> purchase_price;
  std::string warranty_end;  // YYYY-MM-DD; empty: unknown
  std::string comments;
  // Where discovery sees it now: the node and, for a GPU, its index there (empty and -1: in no
  // node), and where it was last seen when it left.
  std::string node;
  int gpu_index = -1;
  std::string last_node;
  int64_t first_seen_ms = 0;  // when discovery first found it; 0: never
  int64_t created_ms = 0, updated_ms = 0;

  // The key: a GPU's serial, a node's name.
  const std::string& id() const { return kind == "node" ? name : serial; }
};

// Something that happened to an asset, newest last in its history.
struct AssetEvent {
  int64_t id = 0;
  std::string asset;  // Asset::id()
  int64_t time_ms = 0;
  // "discovered", "moved", "removed", "state", "rma", "repaired", "imported", "edited"
  std::string kind;
  std::string from, to;  // node:gpu for moves, states for state changes, fields for edits
  std::string actor;     // "discovery" or the token name
  std::string note;      // why: an RMA number, the import's line, ...
};

// The columns of an asset file, in the order an export writes them.
extern const std::vector<std::string_view> kAssetColumns;

// One row of an import: where it came from (for messages) and the columns it sets, checked and
// normalised; a column absent from the file is absent here and left as it is, an empty cell
// clears the field.
struct AssetPatch {
  std::string where;  // "line 3" or "items[2]"
  std::string kind;   // "gpu" or "node"
  std::string key;    // the asset's id
  std::map<std::string, std::string> set;
};

// A CSV file with a header row of kAssetColumns' names (any order and subset, but `serial` or
// `name`). An unknown or repeated column, a row of the wrong width or a bad value is refused
// with its line and field: "line 4, field 'warranty_end': '2027-02-30' is not a date
// (YYYY-MM-DD)". Nothing is returned unless every row is good.
Result<std::vector<AssetPatch>> ParseAssetsCsv(std::string_view text);
// {"items": [{column: value, ...}]} or the bare list; values are strings, numbers or null
// (clears). Errors name "items[N].field".
Result<std::vector<AssetPatch>> ParseAssetsJson(std::string_view text);
// Sets the patch's fields on the asset; the names of those that changed, in column order.
std::vector<std::string> ApplyPatch(const AssetPatch& patch, Asset& asset);

// The export: the header and one row per asset, every column.
std::string AssetsCsv(const std::vector<Asset>& assets);
// {"items": [...]} with the same columns, what ParseAssetsJson reads back.
std::string AssetsExportJson(const std::vector<Asset>& assets);

// The asset as the API shows it: the columns, its `state`, where discovery sees it, its times,
// and `age_days` and `warranty_days_left` at `now_ms` when the dates are known.
std::string AssetJson(const Asset& asset, int64_t now_ms);
std::string AssetEventJson(const AssetEvent& event);
// What the store keeps, and back.
std::string AssetDoc(const Asset& asset);
Result<Asset> ParseAssetDoc(std::string_view doc);
std::string AssetEventDoc(const AssetEvent& event);
Result<AssetEvent> ParseAssetEventDoc(std::string_view doc);

// Days since 1970-01-01 of "YYYY-MM-DD"; nullopt for anything else or a date that does not exist.
std::optional<int64_t> ParseIsoDate(std::string_view text);

}  // namespace gpufleet
