// The asset register (model/asset.h, fleet/assets.h):
//   GET  /api/v1/assets                 ?kind=gpu|node&state=&model=&site=&node=
//                                       &warranty_within=90 (days); each asset with where
//                                       discovery sees it, its age and warranty left
//   GET  /api/v1/assets/summary         ?warranty_days=90: counts by model, site and state,
//                                       warranties ending soon, the GPUs' ages
//   GET  /api/v1/assets/export          ?format=csv|json and the list's filters: every column,
//                                       what import reads back
//   POST /api/v1/assets/import          text/csv (NetBox's columns) or JSON {"items": [...]};
//                                       ?dry_run=true checks and counts without applying.
//                                       {"applied", "created", "updated", "unchanged"}, or a
//                                       400 naming the line and field, with nothing applied
//   GET  /api/v1/assets/{id}            one asset (a GPU's serial, a node's name) and its
//                                       history
//   POST /api/v1/assets/{id}/state      {"state": "in_service"|"spare"|"rma"|"retired", "note"}
// A token limited to clusters sees the assets in their nodes only, and changes none.

#include <boost/json.hpp>
#include <set>

#include "api/json_util.h"
#include "common/json_text.h"
#include "model/json.h"

namespace json = boost::json;

namespace gpufleet::api {
namespace {

Response Unavailable() {
  return ErrorResponse(MakeError(ErrorCode::kUnavailable, "the asset register is not loaded"));
}

Result<AssetFilter> Filter(const Request& req) {
  AssetFilter f;
  f.kind = req.Param("kind");
  if (!f.kind.empty() && f.kind != "gpu" && f.kind != "node") {
    return MakeError(ErrorCode::kInvalidArgument, "'kind' must be gpu or node");
  }
  f.state = req.Param("state");
  if (!f.state.empty() && !ParseAssetState(f.state)) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "'state' must be in_service, spare, rma or retired");
  }
  f.model = req.Param("model");
  f.site = req.Param("site");
  f.node = req.Param("node");
  if (std::string w = req.Param("warranty_within"); !w.empty()) {
    if (w.back() == 'd') w.pop_back();
    char* end = nullptr;
    long days = std::strtol(w.c_str(), &end, 10);
    if (w.empty() || *end || days < 0 || days > 36'500) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "'warranty_within' is a number of days, such as 90");
    }
    f.warranty_within_days = static_cast<int>(days);
  }
  return f;
}

// The assets the caller may see: a token limited to clusters, those in its clusters' nodes.
std::vector<Asset> Visible(ApiContext& ctx, const Principal& who, std::vector<Asset> assets) {
  if (who.clusters.empty()) return assets;
  std::set<std::string> visible;  // the nodes of its clusters
  ctx.fleet.ForEachNode({}, [&](const Node& n) {
    if (who.CanSeeCluster(n.cluster)) visible.insert(n.name);
  });
  std::erase_if(assets, [&](const Asset& a) { return !visible.count(a.node); });
  return assets;
}

Status FleetWide(const Principal& who) {
  if (who.clusters.empty()) return {};
  return MakeError(
      ErrorCode::kPermissionDenied,
      "token '" + who.name + "' is limited to clusters; the asset register is changed fleet-wide");
}

json::object Counts(const AssetSummary::Counts& c) {
  auto map = [](const std::map<std::string, int>& m) {
    json::object o;
    for (const auto& [k, v] : m) o[k] = v;
    return o;
  };
  return {{"total", c.total},
          {"by_model", map(c.by_model)},
          {"by_site", map(c.by_site)},
          {"by_state", map(c.by_state)}};
}

// GET /api/v1/assets
Response GetAssets(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.assets) return Unavailable();
  auto page = ParsePage(req);
  if (!page.ok()) return ErrorResponse(page.error());
  auto f = Filter(req);
  if (!f.ok()) return ErrorResponse(f.error());
  int64_t now = ctx.clock->NowMs();
  json::array items;
  for (const auto& a : Visible(ctx, who, ctx.assets->List(f.value()))) {
    items.push_back(json::parse(AssetJson(a, now)));
  }
  return ListResponse(std::move(items), page.value());
}

// GET /api/v1/assets/summary
Response GetAssetsSummary(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.assets) return Unavailable();
  if (!who.clusters.empty()) {
    return ErrorResponse(
        MakeError(ErrorCode::kPermissionDenied,
                  "token '" + who.name +
                      "' is limited to clusters; the summary is fleet-wide: list the assets"));
  }
  int days = 90;
  if (std::string w = req.Param("warranty_days"); !w.empty()) {
    char* end = nullptr;
    long d = std::strtol(w.c_str(), &end, 10);
    if (*end || d < 0 || d > 3650) {
      return ErrorResponse(
          MakeError(ErrorCode::kInvalidArgument, "'warranty_days' is a number of days, 0-3650"));
    }
    days = static_cast<int>(d);
  }
  AssetSummary s = ctx.assets->Summary(days);
  int64_t now = ctx.clock->NowMs();
  json::array expiring;
  for (const auto& a : s.warranty_expiring) {
    expiring.push_back(json::parse(AssetJson(a, now)));
  }
  json::object age;
  for (const auto& [k, v] : s.gpu_age) age[k] = v;
  return ObjectResponse(
      200, {{"gpus", Counts(s.gpus)},
            {"nodes", Counts(s.nodes)},
            {"warranty_days", days},
            {"warranty_expiring", std::move(expiring)},
            {"warranty_expired", s.warranty_expired},
            {"warranty_unknown", s.warranty_unknown},
            {"gpu_age", std::move(age)},
            {"gpu_mean_age_years",
             s.gpu_mean_age_years < 0 ? json::value(nullptr) : json::value(s.gpu_mean_age_years)}});
}

// GET /api/v1/assets/export
Response GetAssetsExport(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.assets) return Unavailable();
  auto f = Filter(req);
  if (!f.ok()) return ErrorResponse(f.error());
  std::string format = req.Param("format");
  if (!format.empty() && format != "csv" && format != "json") {
    return ErrorResponse(MakeError(ErrorCode::kInvalidArgument, "'format' must be csv or json"));
  }
  auto assets = Visible(ctx, who, ctx.assets->List(f.value()));
  if (format == "json") return JsonResponse(200, AssetsExportJson(assets));
  Response out;
  out.content_type = "text/csv; charset=utf-8";
  out.body = AssetsCsv(assets);
  return out;
}

// POST /api/v1/assets/import
Response PostAssetsImport(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.assets) return Unavailable();
  if (auto s = FleetWide(who); !s.ok()) return ErrorResponse(s.error());
  std::string dry = req.Param("dry_run");
  if (!dry.empty() && dry != "true" && dry != "false") {
    return ErrorResponse(MakeError(ErrorCode::kInvalidArgument, "'dry_run' must be true or false"));
  }
  std::string type = req.content_type.substr(0, req.content_type.find(';'));
  Result<std::vector<AssetPatch>> rows = MakeError(ErrorCode::kInvalidArgument, "empty");
  if (type == "text/csv") {
    rows = ParseAssetsCsv(req.body);
  } else if (type == "application/json" || type.empty()) {
    rows = ParseAssetsJson(req.body);
  } else {
    return ErrorResponse(
        MakeError(ErrorCode::kInvalidArgument,
                  "Content-Type must be text/csv or application/json, not '" + type + "'"));
  }
  if (!rows.ok()) return ErrorResponse(rows.error());
  auto done = ctx.assets->Import(rows.value(), who.name, dry == "true");
  if (!done.ok()) return ErrorResponse(done.error());
  json::object o{{"applied", done->applied},
                 {"created", done->created},
                 {"updated", done->updated},
                 {"unchanged", done->unchanged},
                 {"dry_run", dry == "true"}};
  Response r = ObjectResponse(200, o);
  r.audit_target = "assets";
  r.audit_after = json::serialize(o);
  return r;
}

// GET /api/v1/assets/{id}
Response GetAssetsId(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.assets) return Unavailable();
  const std::string& id = req.params.at("id");
  auto a = ctx.assets->Get(id);
  if (!a.ok() || Visible(ctx, who, {a.value()}).empty()) {
    return ErrorResponse(MakeError(ErrorCode::kNotFound, "no asset '" + id + "'"));
  }
  auto history = ctx.assets->History(id, 500);
  if (!history.ok()) return ErrorResponse(history.error());
  json::object o = json::parse(AssetJson(a.value(), ctx.clock->NowMs())).as_object();
  json::array events;
  for (const auto& e : history.value()) {
    events.push_back(json::parse(AssetEventJson(e)));
  }
  o["history"] = std::move(events);
  return ObjectResponse(200, o);
}

// POST /api/v1/assets/{id}/state
Response PostAssetsIdState(ApiContext& ctx, const Request& req, const Principal& who) {
  if (!ctx.assets) return Unavailable();
  if (auto s = FleetWide(who); !s.ok()) return ErrorResponse(s.error());
  auto body = ParseObject(req.body);
  if (!body.ok()) return ErrorResponse(body.error());
  if (auto s = OnlyFields(body.value(), {"state", "note"}); !s.ok()) {
    return ErrorResponse(s.error());
  }
  const json::value* st = body->if_contains("state");
  auto state = st && st->is_string() ? ParseAssetState(st->as_string()) : std::nullopt;
  if (!state) {
    return ErrorResponse(MakeError(ErrorCode::kInvalidArgument,
                                   "'state' is required: in_service, spare, rma or retired"));
  }
  std::string note;
  if (const json::value* n = body->if_contains("note")) {
    if (!n->is_string()) {
      return ErrorResponse(MakeError(ErrorCode::kInvalidArgument, "'note' must be a string"));
    }
    note = std::string(n->as_string());
  }
  const std::string& id = req.params.at("id");
  auto before = ctx.assets->Get(id);
  if (!before.ok()) return ErrorResponse(before.error());
  auto after = ctx.assets->SetState(id, *state, note, who.name);
  if (!after.ok()) return ErrorResponse(after.error());
  Response r =
      ObjectResponse(200, json::parse(AssetJson(after.value(), ctx.clock->NowMs())).as_object());
  r.audit_target = "asset/" + id;
  r.audit_before = AssetDoc(before.value());
  r.audit_after = AssetDoc(after.value());
  return r;
}

}  // namespace

void AddAssetRoutes(Router& router, ApiContext& ctx) {
  router.Add("GET", "/api/v1/assets", Role::kViewer,
             [&ctx](const Request& req, const Principal& who) { return GetAssets(ctx, req, who); });
  router.Scoped(Scope::kClusters);

  router.Add(
      "GET", "/api/v1/assets/summary", Role::kViewer,
      [&ctx](const Request& req, const Principal& who) { return GetAssetsSummary(ctx, req, who); });
  router.Scoped(Scope::kClusters);

  router.Add(
      "GET", "/api/v1/assets/export", Role::kViewer,
      [&ctx](const Request& req, const Principal& who) { return GetAssetsExport(ctx, req, who); });
  router.Scoped(Scope::kClusters);

  router.Add(
      "POST", "/api/v1/assets/import", Role::kOperator,
      [&ctx](const Request& req, const Principal& who) { return PostAssetsImport(ctx, req, who); });
  router.TakesCsv();
  router.Scoped(Scope::kFleet);

  router.Add(
      "GET", "/api/v1/assets/{id}", Role::kViewer,
      [&ctx](const Request& req, const Principal& who) { return GetAssetsId(ctx, req, who); });
  router.Scoped(Scope::kClusters);

  router.Add("POST", "/api/v1/assets/{id}/state", Role::kOperator,
             [&ctx](const Request& req, const Principal& who) {
               return PostAssetsIdState(ctx, req, who);
             });
  router.Scoped(Scope::kFleet);
}

}  // namespace gpufleet::api
