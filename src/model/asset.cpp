#include "model/asset.h"

#include <boost/json.hpp>
#include <cctype>
#include <charconv>
#include <cmath>
#include <functional>
#include <set>

#include "common/csv.h"
#include "common/json_fields.h"
#include "common/timezone.h"

namespace json = boost::json;

namespace gpufleet {

const char* const kNetboxStatuses =
    "offline, active, planned, staged, failed, inventory, decommissioning";

const std::vector<std::string_view> kAssetColumns = {
    "name",          "kind",           "serial",       "asset_tag", "status", "site",
    "location",      "rack",           "position",     "gpu_uuid",  "model",  "part_number",
    "purchase_date", "purchase_price", "warranty_end", "comments"};

std::string_view ToString(AssetState s) {
  switch (s) {
    case AssetState::kInService:
      return "in_service";
    case AssetState::kSpare:
      return "spare";
    case AssetState::kRma:
      return "rma";
    case AssetState::kRetired:
      return "retired";
  }
  return "in_service";
}

std::optional<AssetState> ParseAssetState(std::string_view t) {
  for (auto s :
       {AssetState::kInService, AssetState::kSpare, AssetState::kRma, AssetState::kRetired}) {
    if (t == ToString(s)) return s;
  }
  return std::nullopt;
}

std::string_view NetboxStatus(AssetState s) {
  switch (s) {
    case AssetState::kInService:
      return "active";
    case AssetState::kSpare:
      return "inventory";
    case AssetState::kRma:
      return "failed";
    case AssetState::kRetired:
      return "decommissioning";
  }
  return "active";
}

std::optional<AssetState> FromNetboxStatus(std::string_view s) {
  if (s == "active") return AssetState::kInService;
  if (s == "inventory" || s == "planned" || s == "staged") return AssetState::kSpare;
  if (s == "failed") return AssetState::kRma;
  if (s == "offline" || s == "decommissioning") return AssetState::kRetired;
  return std::nullopt;
}

std::optional<int64_t> ParseIsoDate(std::string_view t) {
  if (t.size() != 10 || t[4] != '-' || t[7] != '-') return std::nullopt;
  int y = 0, m = 0, d = 0;
  auto num = [&](size_t at, size_t n, int& out) {
    auto [p, ec] = std::from_chars(t.data() + at, t.data() + at + n, out);
    return ec == std::errc() && p == t.data() + at + n;
  };
  if (!num(0, 4, y) || !num(5, 2, m) || !num(8, 2, d)) return std::nullopt;
  if (m < 1 || m > 12 || d < 1 || d > 31) return std::nullopt;
  int64_t days = DaysFromCivil(y, m, d);
  int64_t yy = 0;
  int mm = 0, dd = 0;
  CivilFromDays(days, yy, mm, dd);
  if (yy != y || mm != m || dd != d) return std::nullopt;  // 2027-02-30
  return days;
}

namespace {

std::string Number(double d) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d);
  return std::string(buf, ec == std::errc() ? end : buf);
}

bool IsColumn(std::string_view c) {
  for (auto k : kAssetColumns) {
    if (k == c) return true;
  }
  return false;
}

std::string ColumnList() {
  std::string out;
  for (auto k : kAssetColumns) out += (out.empty() ? "" : ", ") + std::string(k);
  return out;
}

// Checks and normalises one value; the reason when it is bad. `kind` is the row's.
std::optional<std::string> CheckValue(std::string_view column, std::string& v,
                                      std::string_view kind) {
  // Surrounding blanks are a spreadsheet's, never meant.
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.pop_back();
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.erase(0, 1);
  if (v.size() > 1024) return "is longer than 1024 characters";
  for (char c : v) {
    if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && column != "comments") {
      return "has a control character or line break";
    }
  }
  if (column == "status") {
    if (!v.empty() && !FromNetboxStatus(v)) {
      return "'" + v + "' is not a NetBox status (" + kNetboxStatuses + ")";
    }
  } else if (column == "kind") {
    if (v != "gpu" && v != "node") return "'" + v + "' must be gpu or node";
  } else if (column == "purchase_date" || column == "warranty_end") {
    if (!v.empty() && !ParseIsoDate(v)) return "'" + v + "' is not a date (YYYY-MM-DD)";
  } else if (column == "purchase_price" || column == "position") {
    if (!v.empty()) {
      double d = 0;
      auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), d);
      if (ec != std::errc() || p != v.data() + v.size() || !std::isfinite(d) || d < 0) {
        return "'" + v + "' must be a number, not negative";
      }
      if (column == "purchase_price") v = Number(d);
    }
  } else if (column == "gpu_uuid") {
    if (!v.empty()) {
      if (kind == "node") return "a node has no GPU UUID";
      bool ok = v.rfind("GPU-", 0) == 0 || v.rfind("MIG-", 0) == 0;
      for (size_t i = 4; ok && i < v.size(); ++i)
        ok = std::isxdigit(static_cast<unsigned char>(v[i])) || v[i] == '-';
      if (!ok) return "'" + v + "' is not a GPU UUID (GPU-xxxxxxxx-...)";
    }
  }
  return std::nullopt;
}

// Builds a patch from one row's (column, value) pairs, checking each; `at` names a field for
// an error: "line 3, field 'x'" or "items[2].x".
Result<AssetPatch> MakePatch(std::string where,
                             std::vector<std::pair<std::string, std::string>> cells,
                             const std::function<std::string(std::string_view)>& at) {
  AssetPatch p;
  p.where = std::move(where);
  p.kind = "gpu";
  for (const auto& [c, v] : cells) {
    if (c == "kind" && !v.empty()) p.kind = v;
  }
  auto bad = [&](std::string_view column, const std::string& why) {
    return MakeError(ErrorCode::kInvalidArgument, at(column) + ": " + why);
  };
  for (auto& [c, v] : cells) {
    if (c == "kind" && v.empty()) continue;  // the default
    if (auto why = CheckValue(c, v, p.kind)) return bad(c, *why);
    p.set[c] = v;
  }
  const char* key = p.kind == "node" ? "name" : "serial";
  auto it = p.set.find(key);
  if (it == p.set.end() || it->second.empty()) {
    return bad(key, p.kind == "node"
                        ? "a node is known by its name: it is required"
                        : "a GPU is known by its serial: it is required (a node's row has kind "
                          "node)");
  }
  p.key = it->second;
  auto bought = p.set.find("purchase_date"), ends = p.set.find("warranty_end");
  if (bought != p.set.end() && ends != p.set.end() && !bought->second.empty() &&
      !ends->second.empty() && ends->second < bought->second) {
    return bad("warranty_end",
               "'" + ends->second + "' is before the purchase date " + bought->second);
  }
  return p;
}

// The same asset twice in one file, or one asset tag on two of its rows.
Status CheckDuplicates(const std::vector<AssetPatch>& patches,
                       const std::function<std::string(size_t, std::string_view)>& at) {
  std::map<std::string, size_t> keys, tags;
  for (size_t i = 0; i < patches.size(); ++i) {
    const auto& p = patches[i];
    auto [k, fresh] = keys.try_emplace(p.kind + "/" + p.key, i);
    if (!fresh) {
      return MakeError(ErrorCode::kInvalidArgument, at(i, p.kind == "node" ? "name" : "serial") +
                                                        ": '" + p.key + "' is also on " +
                                                        patches[k->second].where);
    }
    auto tag = p.set.find("asset_tag");
    if (tag != p.set.end() && !tag->second.empty()) {
      auto [t, new_tag] = tags.try_emplace(tag->second, i);
      if (!new_tag) {
        return MakeError(ErrorCode::kInvalidArgument,
                         at(i, "asset_tag") + ": '" + tag->second + "' is also on " +
                             patches[t->second].where + " (asset tags are unique)");
      }
    }
  }
  return {};
}

}  // namespace

Result<std::vector<AssetPatch>> ParseAssetsCsv(std::string_view text) {
  auto rows = ParseCsv(text);
  if (!rows.ok()) return rows.error();
  if (rows->empty()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "the file is empty: it needs a header row (" + ColumnList() + ")");
  }
  const CsvRow& header = rows.value()[0];
  std::set<std::string> seen;
  for (const auto& c : header.fields) {
    auto at = "line " + std::to_string(header.line) + ", field '" + c + "'";
    if (!IsColumn(c)) {
      return MakeError(ErrorCode::kInvalidArgument,
                       at + ": unknown column (known: " + ColumnList() + ")");
    }
    if (!seen.insert(c).second) {
      return MakeError(ErrorCode::kInvalidArgument, at + ": the column is there twice");
    }
  }
  if (!seen.count("serial") && !seen.count("name")) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "line " + std::to_string(header.line) +
                         ": the header needs a 'serial' column (GPUs) or a 'name' column (nodes)");
  }
  std::vector<AssetPatch> out;
  for (size_t r = 1; r < rows->size(); ++r) {
    const CsvRow& row = rows.value()[r];
    std::string line = "line " + std::to_string(row.line);
    if (row.fields.size() != header.fields.size()) {
      return MakeError(ErrorCode::kInvalidArgument,
                       line + ": " + std::to_string(row.fields.size()) +
                           " fields where the header has " + std::to_string(header.fields.size()));
    }
    std::vector<std::pair<std::string, std::string>> cells;
    for (size_t i = 0; i < row.fields.size(); ++i) {
      cells.emplace_back(header.fields[i], UnguardCsvField(row.fields[i]));  // as exported
    }
    auto p = MakePatch(line, std::move(cells), [&](std::string_view c) {
      return line + ", field '" + std::string(c) + "'";
    });
    if (!p.ok()) return p.error();
    out.push_back(std::move(p).value());
  }
  GF_TRY(CheckDuplicates(out, [&](size_t i, std::string_view c) {
    return out[i].where + ", field '" + std::string(c) + "'";
  }));
  return out;
}

Result<std::vector<AssetPatch>> ParseAssetsJson(std::string_view text) {
  boost::system::error_code ec;
  json::value doc = json::parse(text, ec);
  if (ec) return MakeError(ErrorCode::kInvalidArgument, "malformed JSON: " + ec.message());
  const json::array* items = doc.if_array();
  if (const json::object* o = doc.if_object()) {
    GF_TRY(JsonFields(*o).Only({"items"}));
    const json::value* v = o->if_contains("items");
    items = v ? v->if_array() : nullptr;
  }
  if (!items) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "expected {\"items\": [assets]} or a list of assets");
  }
  std::vector<AssetPatch> out;
  for (size_t i = 0; i < items->size(); ++i) {
    std::string where = "items[" + std::to_string(i) + "]";
    const json::object* o = (*items)[i].if_object();
    if (!o) return MakeError(ErrorCode::kInvalidArgument, where + ": must be an object");
    std::vector<std::pair<std::string, std::string>> cells;
    JsonFields fields(*o, where);
    for (const auto& kv : *o) {
      std::string c(kv.key());
      if (!IsColumn(c)) return fields.Bad(c, "unknown field (known: " + ColumnList() + ")");
      const json::value& v = kv.value();
      if (v.is_string()) {
        cells.emplace_back(c, std::string(v.as_string()));
      } else if (v.is_null()) {
        cells.emplace_back(c, "");
      } else if (v.is_number() && (c == "purchase_price" || c == "position")) {
        cells.emplace_back(c, Number(v.to_number<double>()));
      } else {
        return fields.Bad(c, c == "purchase_price" || c == "position"
                                 ? "must be a number, a string or null"
                                 : "must be a string or null");
      }
    }
    auto p = MakePatch(where, std::move(cells),
                       [&](std::string_view c) { return where + "." + std::string(c); });
    if (!p.ok()) return p.error();
    out.push_back(std::move(p).value());
  }
  GF_TRY(CheckDuplicates(
      out, [&](size_t i, std::string_view c) { return out[i].where + "." + std::string(c); }));
  return out;
}

namespace {

// The asset's value of a column, as text.
std::string Get(const Asset& a, std::string_view c) {
  if (c == "name") return a.name;
  if (c == "kind") return a.kind;
  if (c == "serial") return a.serial;
  if (c == "asset_tag") return a.asset_tag;
  if (c == "status") return std::string(NetboxStatus(a.state));
  if (c == "site") return a.site;
  if (c == "location") return a.location;
  if (c == "rack") return a.rack;
  if (c == "position") return a.position;
  if (c == "gpu_uuid") return a.gpu_uuid;
  if (c == "model") return a.model;
  if (c == "part_number") return a.part_number;
  if (c == "purchase_date") return a.purchase_date;
  if (c == "purchase_price") return a.purchase_price ? Number(*a.purchase_price) : "";
  if (c == "warranty_end") return a.warranty_end;
  if (c == "comments") return a.comments;
  return "";
}

void Set(Asset& a, std::string_view c, const std::string& v) {
  if (c == "name") a.name = v;
  if (c == "kind") a.kind = v;
  if (c == "serial") a.serial = v;
  if (c == "asset_tag") a.asset_tag = v;
  if (c == "status") a.state = FromNetboxStatus(v).value_or(a.state);
  if (c == "site") a.site = v;
  if (c == "location") a.location = v;
  if (c == "rack") a.rack = v;
  if (c == "position") a.position = v;
  if (c == "gpu_uuid") a.gpu_uuid = v;
  if (c == "model") a.model = v;
  if (c == "part_number") a.part_number = v;
  if (c == "purchase_date") a.purchase_date = v;
  if (c == "purchase_price") {
    a.purchase_price.reset();
    double d = 0;
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), d);
    if (!v.empty() && ec == std::errc()) a.purchase_price = d;
  }
  if (c == "warranty_end") a.warranty_end = v;
  if (c == "comments") a.comments = v;
}

}  // namespace

std::vector<std::string> ApplyPatch(const AssetPatch& patch, Asset& asset) {
  std::vector<std::string> changed;
  for (auto c : kAssetColumns) {
    auto it = patch.set.find(std::string(c));
    if (it == patch.set.end()) continue;
    // An empty status keeps the state (a lifecycle state cannot be "none").
    if (c == "status" && it->second.empty()) continue;
    std::string before = Get(asset, c);
    Set(asset, c, it->second);
    if (Get(asset, c) != before) changed.emplace_back(c);
  }
  return changed;
}

std::string AssetsCsv(const std::vector<Asset>& assets) {
  std::string out;
  for (size_t i = 0; i < kAssetColumns.size(); ++i) {
    if (i) out += ',';
    out += kAssetColumns[i];
  }
  out += '\n';
  for (const auto& a : assets) {
    for (size_t i = 0; i < kAssetColumns.size(); ++i) {
      if (i) out += ',';
      AppendCsvField(out, Get(a, kAssetColumns[i]));
    }
    out += '\n';
  }
  return out;
}

namespace {

json::object Columns(const Asset& a) {
  json::object o;
  for (auto c : kAssetColumns) {
    if (c == "purchase_price") {
      if (a.purchase_price) {
        o[c] = *a.purchase_price;
      } else {
        o[c] = nullptr;
      }
    } else {
      o[c] = Get(a, c);
    }
  }
  return o;
}

}  // namespace

std::string AssetsExportJson(const std::vector<Asset>& assets) {
  json::array items;
  for (const auto& a : assets) items.emplace_back(Columns(a));
  return json::serialize(json::object{{"items", std::move(items)}});
}

std::string AssetDoc(const Asset& a) {
  json::object o = Columns(a);
  o["state"] = ToString(a.state);
  o["node"] = a.node;
  o["gpu_index"] = a.gpu_index;
  o["last_node"] = a.last_node;
  o["first_seen_ms"] = a.first_seen_ms;
  o["created_ms"] = a.created_ms;
  o["updated_ms"] = a.updated_ms;
  return json::serialize(o);
}

std::string AssetJson(const Asset& a, int64_t now_ms) {
  json::value v = json::parse(AssetDoc(a));
  json::object& o = v.as_object();
  o["id"] = a.id();
  int64_t today = now_ms / 86'400'000;
  if (auto d = ParseIsoDate(a.purchase_date)) {
    o["age_days"] = today - *d;
  } else {
    o["age_days"] = nullptr;
  }
  if (auto d = ParseIsoDate(a.warranty_end)) {
    o["warranty_days_left"] = *d - today;
  } else {
    o["warranty_days_left"] = nullptr;
  }
  return json::serialize(v);
}

Result<Asset> ParseAssetDoc(std::string_view doc) {
  boost::system::error_code ec;
  json::value v = json::parse(doc, ec);
  if (ec || !v.is_object()) return MakeError(ErrorCode::kInvalidArgument, "not an asset document");
  const json::object& o = v.as_object();
  Asset a;
  auto text = [&](std::string_view k) -> std::string {
    const json::value* x = o.if_contains(k);
    return x && x->is_string() ? std::string(x->as_string()) : std::string();
  };
  auto integer = [&](std::string_view k, int64_t dflt) -> int64_t {
    const json::value* x = o.if_contains(k);
    return x && x->is_int64() ? x->as_int64() : dflt;
  };
  for (auto c : kAssetColumns) {
    if (c == "status" || c == "purchase_price") continue;
    Set(a, c, text(c));
  }
  if (const json::value* p = o.if_contains("purchase_price"); p && p->is_number()) {
    a.purchase_price = p->to_number<double>();
  }
  auto state = ParseAssetState(text("state"));
  if (!state) return MakeError(ErrorCode::kInvalidArgument, "asset without a state");
  a.state = *state;
  if (a.kind.empty()) a.kind = "gpu";
  a.node = text("node");
  a.gpu_index = static_cast<int>(integer("gpu_index", -1));
  a.last_node = text("last_node");
  a.first_seen_ms = integer("first_seen_ms", 0);
  a.created_ms = integer("created_ms", 0);
  a.updated_ms = integer("updated_ms", 0);
  return a;
}

std::string AssetEventJson(const AssetEvent& e) {
  return json::serialize(json::object{{"id", e.id},
                                      {"asset", e.asset},
                                      {"time_ms", e.time_ms},
                                      {"kind", e.kind},
                                      {"from", e.from},
                                      {"to", e.to},
                                      {"actor", e.actor},
                                      {"note", e.note}});
}

std::string AssetEventDoc(const AssetEvent& e) { return AssetEventJson(e); }

Result<AssetEvent> ParseAssetEventDoc(std::string_view doc) {
  boost::system::error_code ec;
  json::value v = json::parse(doc, ec);
  if (ec || !v.is_object()) return MakeError(ErrorCode::kInvalidArgument, "not an asset event");
  const json::object& o = v.as_object();
  auto text = [&](std::string_view k) -> std::string {
    const json::value* x = o.if_contains(k);
    return x && x->is_string() ? std::string(x->as_string()) : std::string();
  };
  AssetEvent e;
  e.asset = text("asset");
  if (const json::value* t = o.if_contains("time_ms"); t && t->is_int64())
    e.time_ms = t->as_int64();
  e.kind = text("kind");
  e.from = text("from");
  e.to = text("to");
  e.actor = text("actor");
  e.note = text("note");
  return e;
}

}  // namespace gpufleet
