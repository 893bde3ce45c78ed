// assets list|show|summary|import|export|set-state: the asset register (GPUs by serial, nodes by
// name), its NetBox-column CSV, and the lifecycle (in service, spare, RMA, retired).

#include <CLI/CLI.hpp>
#include <cmath>

#include "cli/cli.h"
#include "cli/output.h"
#include "common/clock.h"

namespace json = boost::json;

namespace gpufleet::cli {
namespace {

std::string Days(const json::value& v) {
  if (!v.is_int64()) return "-";
  return std::to_string(v.as_int64()) + "d";
}

std::string Where(const json::object& a) {
  if (!Str(a.at("node")).empty()) {
    return a.at("kind") == "gpu" ? Str(a.at("node")) + ":" + Str(a.at("gpu_index"))
                                 : Str(a.at("node"));
  }
  std::string last = Str(a.at("last_node"));
  return last.empty() ? "-" : "(was " + last + ")";
}

// What `assets list` and `assets export` filter by.
struct AssetFilter {
  std::string kind, state, model, site, node, within;
} filter;

std::vector<std::pair<std::string, std::string>> Filters() {
  return {{"kind", filter.kind}, {"state", filter.state}, {"model", filter.model},
          {"site", filter.site}, {"node", filter.node},   {"warranty_within", filter.within}};
}

// The asset `assets show` and `assets set-state` take.
std::string asset_id;

void AddAssetsListCommand(Globals& g, CLI::App* assets) {
  static std::string limit = "1000";
  auto* list = assets->add_subcommand("list", "Assets: GPUs by serial, nodes by name");
  list->add_option("--kind", filter.kind, "gpu or node");
  list->add_option("--state", filter.state, "in_service, spare, rma or retired");
  list->add_option("--model", filter.model, "one model's");
  list->add_option("--site", filter.site, "one site's");
  list->add_option("--node", filter.node, "those in one node");
  list->add_option("--warranty-within", filter.within, "warranty ending within DAYS");
  list->add_option("--limit", limit, "at most this many (default 1000)");
  list->callback([&g] {
    auto q = Filters();
    q.emplace_back("limit", limit);
    auto v = Call(g, "GET", "/api/v1/assets" + QueryString(q));
    if (!v) return;
    Show(g, *v, [](const json::value& v) {
      Table t({"ID", "KIND", "MODEL", "STATE", "WHERE", "SITE", "RACK", "ASSET TAG", "BOUGHT",
               "AGE", "WARRANTY LEFT"});
      for (const auto& e : v.at("items").as_array()) {
        const auto& a = e.as_object();
        t.Row({Str(a.at("id")), Str(a.at("kind")), Str(a.at("model")), Str(a.at("state")), Where(a),
               Str(a.at("site")), Str(a.at("rack")), Str(a.at("asset_tag")),
               Str(a.at("purchase_date")), Days(a.at("age_days")),
               Days(a.at("warranty_days_left"))});
      }
      t.Print();
      std::printf("%s of %s\n", Str(v.at("items").as_array().size()).c_str(),
                  Str(v.at("total")).c_str());
    });
  });
}

void AddAssetsShowCommand(Globals& g, CLI::App* assets) {
  auto* show = assets->add_subcommand("show", "One asset and its history");
  show->add_option("id", asset_id, "a GPU's serial or a node's name")->required();
  show->callback([&g] {
    auto v = Call(g, "GET", "/api/v1/assets/" + asset_id);
    if (!v) return;
    Show(g, *v, [](const json::value& v) {
      const auto& a = v.as_object();
      for (const char* k : {"id", "kind", "name", "serial", "gpu_uuid", "model", "part_number",
                            "asset_tag", "state", "status", "site", "location", "rack", "position",
                            "purchase_date", "purchase_price", "warranty_end", "comments"}) {
        std::printf("%-15s %s\n", (std::string(k) + ":").c_str(), Str(a.at(k)).c_str());
      }
      std::printf("%-15s %s\n", "where:", Where(a).c_str());
      std::printf("%-15s %s\n", "age:", Days(a.at("age_days")).c_str());
      std::printf("%-15s %s\n\n", "warranty left:", Days(a.at("warranty_days_left")).c_str());
      Table t({"TIME", "EVENT", "FROM", "TO", "BY", "NOTE"});
      for (const auto& e : a.at("history").as_array()) {
        t.Row({FormatTime(e.at("time_ms").as_int64()), Str(e.at("kind")), Str(e.at("from")),
               Str(e.at("to")), Str(e.at("actor")), Str(e.at("note"))});
      }
      t.Print();
    });
  });
}

void AddAssetsSummaryCommand(Globals& g, CLI::App* assets) {
  static std::string warranty_days = "90";
  auto* summary = assets->add_subcommand(
      "summary", "Counts by model, site and state; warranties ending soon; the GPUs' ages");
  summary->add_option("--warranty-days", warranty_days, "what 'soon' is, in days (default 90)");
  summary->callback([&g] {
    auto v =
        Call(g, "GET", "/api/v1/assets/summary" + QueryString({{"warranty_days", warranty_days}}));
    if (!v) return;
    Show(g, *v, [](const json::value& v) {
      for (const char* kind : {"gpus", "nodes"}) {
        const auto& c = v.at(kind).as_object();
        std::printf("%s: %s\n", kind, Str(c.at("total")).c_str());
        for (const char* by : {"by_model", "by_site", "by_state"}) {
          std::string line;
          for (const auto& kv : c.at(by).as_object()) {
            line += (line.empty() ? "" : ", ") + std::string(kv.key()) + " " + Str(kv.value());
          }
          std::printf("  %-9s %s\n", by + 3, line.empty() ? "-" : line.c_str());
        }
      }
      std::string ages;
      for (const auto& kv : v.at("gpu_age").as_object()) {
        ages += (ages.empty() ? "" : ", ") + std::string(kv.key()) + " " + Str(kv.value());
      }
      std::printf(
          "GPU age: %s (mean %s years)\n", ages.empty() ? "-" : ages.c_str(),
          v.at("gpu_mean_age_years").is_number()
              ? Str(std::round(v.at("gpu_mean_age_years").to_number<double>() * 10) / 10).c_str()
              : "-");
      std::printf("warranty: %s expired, %s unknown; ending within %s days: %zu\n",
                  Str(v.at("warranty_expired")).c_str(), Str(v.at("warranty_unknown")).c_str(),
                  Str(v.at("warranty_days")).c_str(), v.at("warranty_expiring").as_array().size());
      // The soonest; the rest are a list away.
      const auto& expiring = v.at("warranty_expiring").as_array();
      Table t({"ID", "KIND", "MODEL", "WHERE", "WARRANTY END", "LEFT"});
      for (size_t i = 0; i < expiring.size() && i < 20; ++i) {
        const auto& a = expiring[i].as_object();
        t.Row({Str(a.at("id")), Str(a.at("kind")), Str(a.at("model")), Where(a),
               Str(a.at("warranty_end")), Days(a.at("warranty_days_left"))});
      }
      t.Print();
      if (expiring.size() > 20) {
        std::printf("... %zu more: gpufleet assets list --warranty-within %s\n",
                    expiring.size() - 20, Str(v.at("warranty_days")).c_str());
      }
    });
  });
}

void AddAssetsImportCommand(Globals& g, CLI::App* assets) {
  static std::string file;
  static bool dry_run = false;
  auto* import_cmd = assets->add_subcommand(
      "import",
      "Add or update assets from a CSV (NetBox's columns) or JSON file; all rows or "
      "none");
  import_cmd->add_option("file", file, "the file (.csv or .json; - for CSV on stdin)")->required();
  import_cmd->add_flag("--dry-run", dry_run, "check the file and count, apply nothing");
  import_cmd->callback([&g] {
    auto body = ReadInput(g, file);
    if (!body) return;
    bool is_json = file.size() > 5 && file.compare(file.size() - 5, 5, ".json") == 0;
    auto v =
        Call(g, "POST", "/api/v1/assets/import" + QueryString({{"dry_run", dry_run ? "true" : ""}}),
             *body, is_json ? "application/json" : "text/csv");
    if (!v) return;
    Show(g, *v, [](const json::value& v) {
      std::printf("%s%s applied: %s created, %s updated, %s unchanged\n",
                  v.at("dry_run").as_bool() ? "dry run: would have " : "",
                  Str(v.at("applied")).c_str(), Str(v.at("created")).c_str(),
                  Str(v.at("updated")).c_str(), Str(v.at("unchanged")).c_str());
    });
  });
}

void AddAssetsExportCommand(Globals& g, CLI::App* assets) {
  static std::string format = "csv";
  auto* exp = assets->add_subcommand("export", "Every column of the assets, as import reads them");
  exp->add_option("--format", format, "csv (default) or json")
      ->check(CLI::IsMember({"csv", "json"}));
  exp->add_option("--kind", filter.kind, "gpu or node");
  exp->add_option("--state", filter.state, "in_service, spare, rma or retired");
  exp->add_option("--site", filter.site, "one site's");
  exp->callback([&g] {
    auto q = Filters();
    q.emplace_back("format", format);
    if (auto text = CallText(g, "GET", "/api/v1/assets/export" + QueryString(q))) {
      std::fputs(text->c_str(), stdout);
    }
  });
}

void AddAssetsSetStateCommand(Globals& g, CLI::App* assets) {
  static std::string to_state, note;
  auto* set_state = assets->add_subcommand(
      "set-state", "Move an asset through its lifecycle: in_service, spare, rma, retired");
  set_state->add_option("id", asset_id, "a GPU's serial or a node's name")->required();
  set_state->add_option("state", to_state, "in_service, spare, rma or retired")
      ->required()
      ->check(CLI::IsMember({"in_service", "spare", "rma", "retired"}));
  set_state->add_option("--note", note, "why: the RMA number, the repair, ...");
  set_state->callback([&g] {
    json::object body{{"state", to_state}};
    if (!note.empty()) body["note"] = note;
    auto v = Call(g, "POST", "/api/v1/assets/" + asset_id + "/state", json::serialize(body));
    if (!v) return;
    Show(g, *v, [](const json::value& v) {
      std::printf("%s is %s\n", Str(v.at("id")).c_str(), Str(v.at("state")).c_str());
    });
  });
}

}  // namespace

void AddAssetCommands(CLI::App& app, Globals& g) {
  auto* assets = app.add_subcommand("assets",
                                    "The asset register: GPUs and nodes, their lifecycle and "
                                    "history, NetBox-column CSV")
                     ->require_subcommand(1);

  AddAssetsListCommand(g, assets);
  AddAssetsShowCommand(g, assets);
  AddAssetsSummaryCommand(g, assets);
  AddAssetsImportCommand(g, assets);
  AddAssetsExportCommand(g, assets);
  AddAssetsSetStateCommand(g, assets);
}

}  // namespace gpufleet::cli
