// `gpufleet store copy`: moves an installation from one store to another (SQLite to PostgreSQL)
// while the controller is stopped. Works on the database directly, not through the API.

#include "apps/gpufleet/store_commands.h"

#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/cli.h"
#include "common/paths.h"
#include "store/store.h"

namespace gpufleet::app {

void AddStoreCommands(CLI::App& app, cli::Globals& globals) {
  auto* s = app.add_subcommand("store", "Work on the controller's database (stop it first)");
  s->require_subcommand(1);
  auto* copy = s->add_subcommand(
      "copy", "Copy every table into a new, empty store (e.g. from SQLite to PostgreSQL)");
  auto from = std::make_shared<std::string>();
  auto to = std::make_shared<std::string>();
  copy->add_option("--from", *from, "source store URL (default sqlite:DATA_DIR/gpufleet.db)");
  copy->add_option("--to", *to, "target store URL, e.g. postgresql://gpufleet@db:5432/gpufleet")
      ->required();
  copy->callback([&globals, from, to] {
    std::string source = *from;
    if (source.empty()) {
      source = "sqlite:" + (globals.data_dir.empty() ? DefaultDataDir() : globals.data_dir) +
               "/gpufleet.db";
    }
    auto copied = store::Copy(source, *to);
    if (!copied.ok()) {
      std::fprintf(stderr, "error: %s\n", copied.error().message.c_str());
      globals.exit_code = 1;
      return;
    }
    int64_t total = 0;
    for (const auto& t : copied.value()) {
      std::printf("%-18s %10lld rows\n", t.table.c_str(), static_cast<long long>(t.rows));
      total += t.rows;
    }
    std::printf("copied %lld rows in %zu tables from %s to %s; counts verified\n",
                static_cast<long long>(total), copied->size(), store::RedactUrl(source).c_str(),
                store::RedactUrl(*to).c_str());
  });
}

}  // namespace gpufleet::app
