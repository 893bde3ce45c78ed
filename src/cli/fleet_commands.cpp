// clusters, pools, nodes, gpus and gpu-models commands.

#include <CLI/CLI.hpp>

#include "cli/cli.h"
#include "cli/output.h"

namespace json = boost::json;

namespace gpufleet::cli {
namespace {

std::string Field(const json::value& item, const char* key) {
  const auto& o = item.as_object();
  auto it = o.find(key);
  return it == o.end() ? "" : Str(it->value());
}

// "enabled: 1g.10gb x4, 3g.40gb x1", "disabled", "" (no MIG).
std::string MigText(const json::value& gpu) {
  std::string out = Field(gpu, "mig_mode");
  const auto* layout = gpu.as_object().if_contains("mig_layout");
  if (out != "enabled" || !layout || !layout->is_object()) return out;
  std::string parts;
  for (const auto& [name, count] : layout->as_object()) {
    parts += (parts.empty() ? "" : ", ") + std::string(name) + " x" + Str(count);
  }
  return out + ": " + (parts.empty() ? "no instances" : parts);
}

void Get(Globals& g, const std::string& target,
         const std::function<void(const json::value&)>& table) {
  if (auto v = Call(g, "GET", target)) Show(g, *v, table);
}

void NodeTable(const json::value& v) {
  Table t({"NAME", "CLUSTER", "POOL", "STATE", "GPUS", "MODEL", "DRIVER", "REASON"});
  for (const auto& n : v.at("items").as_array()) {
    std::string name = Field(n, "name") + (n.at("simulated").as_bool() ? " (sim)" : "");
    t.Row({name, Field(n, "cluster"), Field(n, "pool"), Field(n, "state"), Field(n, "gpu_count"),
           Field(n, "gpu_model"), Str(n.at("facts").at("driver_version")), Field(n, "reason")});
  }
  t.Print();
}

// "size=4", "labels.team=vision", "driver_branch=R580": a merge patch of the fields named,
// each value read as JSON when it is JSON (4, true, [..], {..}, null) and as a string otherwise.
std::optional<json::object> PatchOf(Globals& g, const std::vector<std::string>& settings) {
  json::object patch;
  for (const auto& s : settings) {
    size_t eq = s.find('=');
    if (eq == std::string::npos || eq == 0) {
      std::fprintf(stderr, "error: '%s' must be FIELD=VALUE (a nested field as a.b=VALUE)\n",
                   s.c_str());
      g.exit_code = 2;
      return std::nullopt;
    }
    boost::system::error_code ec;
    json::value v = json::parse(s.substr(eq + 1), ec);
    if (ec) v = json::string(s.substr(eq + 1));
    json::object* at = &patch;
    std::string path = s.substr(0, eq);
    for (size_t dot; (dot = path.find('.')) != std::string::npos; path = path.substr(dot + 1)) {
      json::value& next = (*at)[path.substr(0, dot)];
      if (!next.is_object()) next = json::object();
      at = &next.as_object();
    }
    (*at)[path] = std::move(v);
  }
  return patch;
}

// `clusters set|delete` and `pools set|delete`: PATCH and DELETE on /api/v1/<kind>s/NAME.
void AddSetAndDelete(CLI::App& parent, Globals& g, const std::string& kind) {
  struct Args {
    std::string name;
    std::vector<std::string> settings;
  };
  auto args = std::make_shared<Args>();
  auto* set = parent.add_subcommand(
      "set", "Change fields of a " + kind + " (FIELD=VALUE, the fleet file's names)");
  set->add_option("name", args->name, kind + " name")->required();
  set->add_option("settings", args->settings, "FIELD=VALUE ... (VALUE null removes the field)")
      ->required();
  set->callback([&g, args, kind] {
    auto patch = PatchOf(g, args->settings);
    if (!patch) return;
    auto v =
        Call(g, "PATCH", "/api/v1/" + kind + "s/" + UrlEncode(args->name), json::serialize(*patch));
    if (!v) return;
    Show(g, *v, [&](const json::value& v) {
      std::printf("%s %s updated (at %s)\n", kind.c_str(), args->name.c_str(),
                  Field(v, "updated_at").c_str());
    });
  });
  auto* del = parent.add_subcommand("delete", "Delete a " + kind + " (refused while it has " +
                                                  (kind == "pool" ? "nodes or jobs)" : "pools)"));
  del->add_option("name", args->name, kind + " name")->required();
  del->callback([&g, args, kind] {
    auto v = Call(g, "DELETE", "/api/v1/" + kind + "s/" + UrlEncode(args->name));
    if (!v) return;
    Show(g, *v, [&](const json::value&) {
      std::printf("%s %s deleted\n", kind.c_str(), args->name.c_str());
    });
  });
}

void AddClustersShowCommand(Globals& g, CLI::App* clusters) {
  auto* show = clusters->add_subcommand("show", "Show one cluster");
  static std::string name;
  show->add_option("name", name, "cluster name")->required();
  show->callback([&g] {
    Get(g, "/api/v1/clusters/" + UrlEncode(name),
        [](const json::value& v) { std::printf("%s\n", PrettyJson(v).c_str()); });
  });
}

void AddPoolsCommands(Globals& g, CLI::App* pools) {
  auto* list = pools->add_subcommand("list", "List pools");
  static std::string cluster;
  list->add_option("--cluster", cluster, "only this cluster");
  list->callback([&g] {
    Get(g, "/api/v1/pools" + QueryString({{"cluster", cluster}}), [](const json::value& v) {
      Table t({"NAME", "CLUSTER", "MODEL", "GPUS/NODE", "SIZE", "NODES", "READY", "GPUS"});
      for (const auto& p : v.at("items").as_array()) {
        t.Row({Field(p, "name"), Field(p, "cluster"), Field(p, "gpu_model"),
               Field(p, "gpus_per_node"), Field(p, "size"), Field(p, "nodes"),
               Field(p, "nodes_ready"), Field(p, "gpus")});
      }
      t.Print();
    });
  });
  auto* show = pools->add_subcommand("show", "Show one pool");
  static std::string name;
  show->add_option("name", name, "pool name")->required();
  show->callback([&g] {
    Get(g, "/api/v1/pools/" + UrlEncode(name),
        [](const json::value& v) { std::printf("%s\n", PrettyJson(v).c_str()); });
  });
}

void AddResetIdentityCommand(CLI::App& app, Globals& g, CLI::App* nodes) {
  auto* cmd = nodes->add_subcommand(
      "reset-identity",
      "clear a node's identity: the next agent with a join token takes the name (admin)");
  static std::string name;
  cmd->add_option("name", name, "node name")->required();
  cmd->callback([&g] {
    auto v = Call(g, "POST", "/api/v1/nodes/" + UrlEncode(name) + "/reset-identity", "{}");
    if (!v) return;
    Show(g, *v, [](const json::value& n) {
      std::printf("node/%s identity cleared: the next agent with a join token takes it\n",
                  Field(n, "name").c_str());
    });
  });
}

void AddNodesListCommand(Globals& g, CLI::App* nodes) {
  auto* list = nodes->add_subcommand("list", "List nodes");
  static std::string cluster, pool, state, model, limit;
  list->add_option("--cluster", cluster, "only this cluster");
  list->add_option("--pool", pool, "only this pool");
  list->add_option("--state", state, "only nodes in this state (ready, degraded, ...)");
  list->add_option("--model", model, "only nodes with this GPU model");
  list->add_option("--limit", limit, "at most this many (default 500)");
  list->callback([&g] {
    if (!KnownFilters(g, {cluster, pool, model, ""})) return;
    Get(g,
        "/api/v1/nodes" + QueryString({{"cluster", cluster},
                                       {"pool", pool},
                                       {"state", state},
                                       {"model", model},
                                       {"limit", limit}}),
        NodeTable);
  });
}

void AddNodesShowCommand(Globals& g, CLI::App* nodes) {
  auto* show = nodes->add_subcommand("show", "Show a node with its GPUs and recent events");
  static std::string name;
  show->add_option("name", name, "node name")->required();
  show->callback([&g] {
    auto node = Call(g, "GET", "/api/v1/nodes/" + UrlEncode(name));
    if (!node) return;
    if (g.output == "json") {
      std::printf("%s\n", PrettyJson(*node).c_str());
      return;
    }
    const auto& n = *node;
    const auto& f = n.at("facts");
    std::printf("Name:      %s%s\nCluster:   %s\nPool:      %s\nState:     %s since %s\n",
                Field(n, "name").c_str(), n.at("simulated").as_bool() ? " (simulated)" : "",
                Field(n, "cluster").c_str(), Field(n, "pool").c_str(), Field(n, "state").c_str(),
                Field(n, "state_since").c_str());
    std::printf("Reason:    %s\nLast seen: %s (%s)\nOS:        %s, kernel %s\n",
                Field(n, "reason").c_str(), Field(n, "last_seen_at").c_str(),
                n.at("connected").as_bool() ? "connected" : "disconnected", Str(f.at("os")).c_str(),
                Str(f.at("kernel")).c_str());
    std::printf("Driver:    %s (CUDA %s), agent %s, backend %s\n",
                Str(f.at("driver_version")).c_str(), Str(f.at("cuda_driver_version")).c_str(),
                Str(f.at("agent_version")).c_str(), Str(f.at("backend")).c_str());
    std::string labels;
    if (const auto* l = f.as_object().if_contains("labels"); l && l->is_object()) {
      for (const auto& [key, value] : l->as_object()) {
        labels += (labels.empty() ? "" : ", ") + std::string(key) + "=" + Str(value);
      }
    }
    std::printf("Labels:    %s\n\n", labels.empty() ? "none" : labels.c_str());
    Table t({"GPU", "NAME", "MODEL", "UUID", "SERIAL", "PCI", "MEMORY", "MIG", "ERROR"});
    for (const auto& gpu : n.at("gpus").as_array()) {
      double gib = gpu.at("memory_total_bytes").to_number<double>() / (1024.0 * 1024 * 1024);
      char mem[32];
      std::snprintf(mem, sizeof mem, "%.0f GiB", gib);
      t.Row({Field(gpu, "index"), Field(gpu, "name"), Field(gpu, "model"), Field(gpu, "uuid"),
             Field(gpu, "serial"), Field(gpu, "pci_bus_id"), mem, MigText(gpu),
             Field(gpu, "error")});
    }
    t.Print();
    if (auto events = Call(g, "GET", "/api/v1/nodes/" + UrlEncode(name) + "/events?limit=10")) {
      std::printf("\nRecent events:\n");
      Table e({"TIME", "FROM", "TO", "ACTOR", "REASON"});
      for (const auto& ev : events->at("items").as_array()) {
        e.Row({Field(ev, "time"), Field(ev, "from"), Field(ev, "to"), Field(ev, "actor"),
               Field(ev, "reason")});
      }
      e.Print();
    }
  });
}

void AddNodesEventsCommand(Globals& g, CLI::App* nodes) {
  auto* events = nodes->add_subcommand("events", "A node's state changes, newest first");
  static std::string ev_name, ev_limit;
  events->add_option("name", ev_name, "node name")->required();
  events->add_option("--limit", ev_limit, "at most this many (default 500)");
  events->callback([&g] {
    Get(g, "/api/v1/nodes/" + UrlEncode(ev_name) + "/events" + QueryString({{"limit", ev_limit}}),
        [](const json::value& v) {
          Table e({"TIME", "FROM", "TO", "ACTOR", "REASON"});
          for (const auto& ev : v.at("items").as_array()) {
            e.Row({Field(ev, "time"), Field(ev, "from"), Field(ev, "to"), Field(ev, "actor"),
                   Field(ev, "reason")});
          }
          e.Print();
        });
  });
}

void AddNodesCommands(CLI::App& app, Globals& g, CLI::App* nodes) {
  AddNodesListCommand(g, nodes);
  AddNodesShowCommand(g, nodes);
  AddNodesEventsCommand(g, nodes);
  for (const char* action : {"cordon", "uncordon", "drain"}) {
    auto* cmd = nodes->add_subcommand(action, std::string(action) + " a node");
    auto target = std::make_shared<std::string>();
    cmd->add_option("name", *target, "node name")->required();
    cmd->callback([&g, target, action] {
      auto v = Call(g, "POST", "/api/v1/nodes/" + UrlEncode(*target) + "/" + action, "{}");
      if (!v) return;
      Show(g, *v, [](const json::value& n) {
        std::printf("node/%s %s\n", Field(n, "name").c_str(), Field(n, "state").c_str());
      });
    });
  }
  AddResetIdentityCommand(app, g, nodes);
}

void AddGpusCommand(CLI::App& app, Globals& g) {
  auto* gpus = app.add_subcommand("gpus", "GPUs of the fleet")->require_subcommand(1);
  auto* list = gpus->add_subcommand("list", "List GPUs");
  static std::string cluster, pool, node, model, limit;
  list->add_option("--cluster", cluster, "only this cluster");
  list->add_option("--pool", pool, "only this pool");
  list->add_option("--node", node, "only this node");
  list->add_option("--model", model, "only this GPU model");
  list->add_option("--limit", limit, "at most this many (default 500)");
  list->callback([&g] {
    if (!KnownFilters(g, {cluster, pool, model, node})) return;
    Get(g,
        "/api/v1/gpus" + QueryString({{"cluster", cluster},
                                      {"pool", pool},
                                      {"node", node},
                                      {"model", model},
                                      {"limit", limit}}),
        [](const json::value& v) {
          Table t({"NODE", "GPU", "MODEL", "UUID", "SERIAL", "PCI", "ERROR"});
          for (const auto& gpu : v.at("items").as_array()) {
            t.Row({Field(gpu, "node"), Field(gpu, "index"), Field(gpu, "model"), Field(gpu, "uuid"),
                   Field(gpu, "serial"), Field(gpu, "pci_bus_id"), Field(gpu, "error")});
          }
          t.Print();
        });
  });
}

void AddGpuModelsCommand(CLI::App& app, Globals& g) {
  auto* models =
      app.add_subcommand("gpu-models", "The GPU specification catalogue")->require_subcommand(1);
  models->add_subcommand("list", "List GPU models")->callback([&g] {
    Get(g, "/api/v1/gpu-models", [](const json::value& v) {
      Table t({"ID", "ARCH", "MEMORY GIB", "TDP W", "MAX TEMP C", "NVLINK", "MIG"});
      for (const auto& m : v.at("items").as_array()) {
        const auto& nv = m.at("nvlink");
        std::string nvlink =
            nv.at("generation").as_int64() == 0
                ? "-"
                : "gen" + Str(nv.at("generation")) + " " + Str(nv.at("bandwidth_gbps")) + " GB/s";
        std::string mig = m.at("mig").at("supported").as_bool()
                              ? "up to " + Str(m.at("mig").at("max_instances"))
                              : "-";
        t.Row({Field(m, "id"), Field(m, "architecture"), Field(m, "memory_gib"), Field(m, "tdp_w"),
               Field(m, "max_operating_temp_c"), nvlink, mig});
      }
      t.Print();
    });
  });
}

void AddClustersCommand(CLI::App& app, Globals& g) {
  auto* clusters = app.add_subcommand("clusters", "Clusters of the fleet")->require_subcommand(1);
  clusters->add_subcommand("list", "List clusters")->callback([&g] {
    Get(g, "/api/v1/clusters", [](const json::value& v) {
      Table t({"NAME", "TYPE", "SITE", "NODES", "READY", "GPUS"});
      for (const auto& c : v.at("items").as_array()) {
        t.Row({Field(c, "name"), Field(c, "type"), Field(c, "site"), Field(c, "nodes"),
               Field(c, "nodes_ready"), Field(c, "gpus")});
      }
      t.Print();
    });
  });
  AddClustersShowCommand(g, clusters);
  AddSetAndDelete(*clusters, g, "cluster");
}

}  // namespace

void AddFleetCommands(CLI::App& app, Globals& g) {
  AddClustersCommand(app, g);
  auto* pools = app.add_subcommand("pools", "Pools of nodes")->require_subcommand(1);
  AddPoolsCommands(g, pools);
  AddSetAndDelete(*pools, g, "pool");
  auto* nodes = app.add_subcommand("nodes", "Nodes and node actions")->require_subcommand(1);
  AddNodesCommands(app, g, nodes);
  AddGpusCommand(app, g);
  AddGpuModelsCommand(app, g);
}

}  // namespace gpufleet::cli
