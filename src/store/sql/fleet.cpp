// The SQL store: the fleet (clusters, pools, nodes, GPUs, node and GPU events).

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/json.hpp>
#include <deque>
#include <string_view>

#include "common/json_text.h"
#include "common/strings.h"
#include "model/json.h"
#include "store/sql/sql_store.h"

namespace json = boost::json;

namespace gpufleet::store::sql {

Status SqlStore::ApplyFleet(const std::vector<Cluster>& clusters, const std::vector<Pool>& pools) {
  return Run([&](soci::session& sql) -> Status {
    soci::transaction tx(sql);
    for (const auto& c : clusters) {
      std::string type(ToString(c.type)), labels = JsonText(ToJson(c.labels));
      std::string remediation = JsonText(ToJson(c.remediation));
      std::string lifecycle = JsonText(ToJson(c.lifecycle));
      std::string scheduler = c.scheduler.type.empty() ? "" : JsonText(ToJson(c.scheduler));
      long long created = c.created_ms, updated = c.updated_ms;
      sql << "INSERT INTO clusters (name, type, site, team, labels, remediation, lifecycle, "
             "scheduler, created_ms, updated_ms) VALUES (:n, :t, :s, :tm, :l, :r, :lc, :sc, :c, "
             ":u) ON CONFLICT (name) DO UPDATE "
             "SET type = excluded.type, site = excluded.site, team = excluded.team, "
             "labels = excluded.labels, "
             "remediation = excluded.remediation, lifecycle = excluded.lifecycle, "
             "scheduler = excluded.scheduler, updated_ms = excluded.updated_ms",
          soci::use(c.name), soci::use(type), soci::use(c.site), soci::use(c.team),
          soci::use(labels), soci::use(remediation), soci::use(lifecycle), soci::use(scheduler),
          soci::use(created), soci::use(updated);
    }
    for (const auto& p : pools) {
      std::string labels = JsonText(ToJson(p.labels)), exporters = JsonText(ToJson(p.exporters));
      std::string lifecycle = JsonText(ToJson(p.lifecycle));
      long long gpn = p.gpus_per_node, size = p.size, created = p.created_ms,
                updated = p.updated_ms, interval = p.scrape_interval_ms;
      sql << "INSERT INTO pools (name, cluster, gpu_model, gpus_per_node, size, team, labels, "
             "exporters, scrape_interval_ms, lifecycle, created_ms, updated_ms) "
             "VALUES (:n, :c, :m, :g, :s, :tm, :l, :e, :i, :lc, :cr, :u) "
             "ON CONFLICT (name) DO UPDATE SET cluster = excluded.cluster, "
             "gpu_model = excluded.gpu_model, gpus_per_node = excluded.gpus_per_node, "
             "size = excluded.size, team = excluded.team, labels = excluded.labels, "
             "exporters = excluded.exporters, "
             "scrape_interval_ms = excluded.scrape_interval_ms, "
             "lifecycle = excluded.lifecycle, updated_ms = excluded.updated_ms",
          soci::use(p.name), soci::use(p.cluster), soci::use(p.gpu_model), soci::use(gpn),
          soci::use(size), soci::use(p.team), soci::use(labels), soci::use(exporters),
          soci::use(interval), soci::use(lifecycle), soci::use(created), soci::use(updated);
    }
    tx.commit();
    return {};
  });
}

Status SqlStore::DeleteFleet(const std::vector<std::string>& pools,
                             const std::vector<std::string>& clusters) {
  return Run([&](soci::session& sql) -> Status {
    soci::transaction tx(sql);
    for (const auto& p : pools) sql << "DELETE FROM pools WHERE name = :n", soci::use(p);
    for (const auto& c : clusters) sql << "DELETE FROM clusters WHERE name = :n", soci::use(c);
    tx.commit();
    return {};
  });
}

Result<std::vector<Cluster>> SqlStore::ListClusters() {
  return Run([&](soci::session& sql) -> Result<std::vector<Cluster>> {
    std::vector<Cluster> out;
    Cluster c;
    std::string type, labels, remediation, lifecycle, scheduler;
    long long created = 0, updated = 0;
    soci::statement st =
        Once(sql,
             "SELECT name, type, site, team, labels, remediation, lifecycle, scheduler, "
             "created_ms, updated_ms FROM clusters ORDER BY name COLLATE \"binary\"",
             soci::into(c.name), soci::into(type), soci::into(c.site), soci::into(c.team),
             soci::into(labels), soci::into(remediation), soci::into(lifecycle),
             soci::into(scheduler), soci::into(created), soci::into(updated));
    st.execute();
    while (st.fetch()) {
      c.type = ParseClusterType(type).value_or(ClusterType::kTraining);
      c.labels = LabelsFromJson(ParseOrNull(labels));
      c.remediation = RemediationFromJson(ParseOrNull(remediation));
      c.lifecycle = LifecycleFromJson(ParseOrNull(lifecycle));
      c.scheduler = SchedulerFromJson(ParseOrNull(scheduler));
      c.created_ms = created;
      c.updated_ms = updated;
      out.push_back(c);
    }
    return out;
  });
}

Result<std::vector<Pool>> SqlStore::ListPools() {
  return Run([&](soci::session& sql) -> Result<std::vector<Pool>> {
    std::vector<Pool> out;
    Pool p;
    std::string labels, exporters, lifecycle;
    long long gpn = 0, size = 0, created = 0, updated = 0, interval = 0;
    soci::statement st =
        Once(sql,
             "SELECT name, cluster, gpu_model, gpus_per_node, size, team, labels, "
             "exporters, scrape_interval_ms, lifecycle, created_ms, updated_ms FROM pools "
             "ORDER BY cluster COLLATE \"binary\", name COLLATE \"binary\"",
             soci::into(p.name), soci::into(p.cluster), soci::into(p.gpu_model), soci::into(gpn),
             soci::into(size), soci::into(p.team), soci::into(labels), soci::into(exporters),
             soci::into(interval), soci::into(lifecycle), soci::into(created), soci::into(updated));
    st.execute();
    while (st.fetch()) {
      p.gpus_per_node = static_cast<int>(gpn);
      p.size = static_cast<int>(size);
      p.labels = LabelsFromJson(ParseOrNull(labels));
      p.exporters = ExportersFromJson(ParseOrNull(exporters));
      p.scrape_interval_ms = interval;
      p.lifecycle = LifecycleFromJson(ParseOrNull(lifecycle));
      p.created_ms = created;
      p.updated_ms = updated;
      out.push_back(p);
    }
    return out;
  });
}

namespace {

constexpr const char* kNodeColumns =
    "INSERT INTO nodes (name, cluster, pool, state, resume_state, reason, facts, simulated, "
    "registered_ms, last_seen_ms, state_since_ms, token_hash, connected_ms) VALUES (";
constexpr const char* kNodeConflict =
    ") ON CONFLICT (name) DO UPDATE SET cluster = excluded.cluster, pool = excluded.pool, "
    "state = excluded.state, resume_state = excluded.resume_state, reason = excluded.reason, "
    "facts = excluded.facts, simulated = excluded.simulated, "
    "registered_ms = excluded.registered_ms, last_seen_ms = excluded.last_seen_ms, "
    "state_since_ms = excluded.state_since_ms, token_hash = excluded.token_hash, "
    "connected_ms = excluded.connected_ms";
// A GPU's InfoROM object and GSP firmware versions, its settings and MIG layout: one JSON
// column.
std::string FirmwareJson(const Gpu& g) {
  return JsonText(json::object{{"inforom_oem", g.inforom_oem},
                               {"inforom_ecc", g.inforom_ecc},
                               {"inforom_power", g.inforom_power},
                               {"gsp", g.gsp_firmware_version},
                               {"minor", g.minor_number},
                               {"settings", ToJson(g.settings)},
                               {"mig_layout", MigLayoutJson(g.mig_layout)}});
}

void ReadFirmware(const std::string& text, Gpu& g) {
  json::value v = ParseOrNull(text);
  auto str = [&](const char* key) {
    const auto* s = v.is_object() ? v.as_object().if_contains(key) : nullptr;
    return s && s->is_string() ? std::string(s->as_string()) : std::string();
  };
  g.inforom_oem = str("inforom_oem");
  g.inforom_ecc = str("inforom_ecc");
  g.inforom_power = str("inforom_power");
  g.gsp_firmware_version = str("gsp");
  const auto* minor = v.is_object() ? v.as_object().if_contains("minor") : nullptr;
  g.minor_number = minor && minor->is_int64() ? static_cast<int>(minor->as_int64()) : -1;
  g.settings = {};
  if (const auto* s = v.is_object() ? v.as_object().if_contains("settings") : nullptr) {
    if (auto settings = GpuSettingsFromJson(*s); settings.ok()) g.settings = settings.value();
  }
  g.mig_layout.reset();
  if (auto layout =
          MigLayoutFromJson(v.is_object() ? v.as_object().if_contains("mig_layout") : nullptr);
      layout.ok()) {
    g.mig_layout = std::move(layout).value();
  }
}

constexpr const char* kGpuColumns =
    "INSERT INTO gpus (uuid, node, idx, serial, name, model, pci_bus_id, memory_total, vbios, "
    "inforom, mig_mode, error, firmware) VALUES ";
// A GPU moved between nodes keeps its UUID, the primary key: the newest report wins.
constexpr const char* kGpuConflict =
    " ON CONFLICT (uuid) DO UPDATE SET node = excluded.node, idx = excluded.idx, "
    "serial = excluded.serial, name = excluded.name, model = excluded.model, "
    "pci_bus_id = excluded.pci_bus_id, memory_total = excluded.memory_total, "
    "vbios = excluded.vbios, inforom = excluded.inforom, mig_mode = excluded.mig_mode, "
    "error = excluded.error, firmware = excluded.firmware";
constexpr const char* kEventColumns =
    "INSERT INTO node_events (node, time_ms, from_state, to_state, reason, actor) VALUES ";

// One statement's text and its bound values, in the order their placeholders appear (SOCI binds
// them by position). The values live here until the statement has run.
class Builder {
 public:
  explicit Builder(soci::session& sql) : st_(sql) { st_.alloc(); }
  Builder& Text(std::string_view text) {
    query_ += text;
    return *this;
  }
  Builder& Bind(const std::string& value) {
    Placeholder();
    st_.exchange(soci::use(value));
    return *this;
  }
  Builder& Bind(long long value) {
    Placeholder();
    st_.exchange(soci::use(ints_.emplace_back(value)));
    return *this;
  }
  Builder& Node(const gpufleet::Node& n) {
    strings_.emplace_back(ToString(n.state));
    const std::string& state = strings_.back();
    strings_.emplace_back(ToString(n.resume_state));
    const std::string& resume = strings_.back();
    json::object facts_doc = ToJson(n.facts);
    facts_doc.erase("packages");  // large, and sent again with each hello: memory only
    const std::string& facts = strings_.emplace_back(JsonText(facts_doc));
    Text(kNodeColumns).Bind(n.name).Text(", ").Bind(n.cluster).Text(", ").Bind(n.pool);
    Text(", ").Bind(state).Text(", ").Bind(resume).Text(", ").Bind(n.reason).Text(", ");
    Bind(facts).Text(", ").Bind(n.simulated ? 1 : 0).Text(", ").Bind(n.registered_ms);
    Text(", ").Bind(n.last_seen_ms).Text(", ").Bind(n.state_since_ms).Text(", ");
    Bind(n.token_hash).Text(", ").Bind(n.connected_ms);
    return Text(kNodeConflict);
  }
  Builder& Gpus(const gpufleet::Node& n, size_t from, size_t to) {
    Text(kGpuColumns);
    for (size_t i = from; i < to; ++i) {
      const Gpu& g = n.gpus[i];
      Text(i == from ? "(" : ", (").Bind(g.uuid).Text(", ").Bind(n.name).Text(", ");
      Bind(g.index).Text(", ").Bind(g.serial).Text(", ").Bind(g.name).Text(", ").Bind(g.model);
      Text(", ").Bind(g.pci_bus_id).Text(", ");
      Bind(static_cast<long long>(g.memory_total_bytes)).Text(", ").Bind(g.vbios_version);
      Text(", ").Bind(g.inforom_version).Text(", ").Bind(g.mig_mode).Text(", ").Bind(g.error);
      Text(", ").Bind(strings_.emplace_back(FirmwareJson(g))).Text(")");
    }
    return Text(kGpuConflict);
  }
  Builder& Events(const std::vector<NodeEvent>& events) {
    Text(kEventColumns);
    for (size_t i = 0; i < events.size(); ++i) {
      const NodeEvent& e = events[i];
      Text(i == 0 ? "(" : ", (").Bind(e.node).Text(", ").Bind(e.time_ms).Text(", ").Bind(e.from);
      Text(", ").Bind(e.to).Text(", ").Bind(e.reason).Text(", ").Bind(e.actor).Text(")");
    }
    return *this;
  }
  // Runs it once: one round trip on PostgreSQL (see Once()).
  void Run() {
    st_.prepare(query_, soci::details::st_one_time_query);
    st_.define_and_bind();
    st_.execute(true);
  }

 private:
  void Placeholder() { query_ += ":v" + std::to_string(count_++); }
  std::string query_;
  int count_ = 0;
  std::deque<long long> ints_;  // deques: bound addresses stay put as they grow
  std::deque<std::string> strings_;
  soci::statement st_;  // last: it goes before the values it binds
};

}  // namespace

// The node, its GPUs (which replace its old ones) and its events, atomically.
//  - PostgreSQL: one statement of data-modifying CTEs, so one round trip and no BEGIN/COMMIT:
//    a registration storm saves every node, and over a network each statement is a round trip.
//    The DELETE spares the GPUs the upsert writes (one statement may not change a row twice).
//  - SQLite (no data-modifying CTEs, and no round trips): a transaction of the same statements,
//    up to 64 GPUs or events each (12 parameters a GPU: within SQLite's oldest limit of 999).
Status SqlStore::SaveNode(const Node& n, const std::vector<NodeEvent>& events) {
  return Run([&](soci::session& sql) -> Status {
    // Within PostgreSQL's 65,535 parameters of one statement (14 a GPU, 6 an event), else the
    // transaction below, which works on both.
    constexpr size_t kOneStatement = 1000;
    if (dialect_ == Dialect::kPostgres && n.gpus.size() <= kOneStatement &&
        events.size() <= kOneStatement) {
      Builder b(sql);
      b.Text("WITH node AS (").Node(n).Text("), gone AS (DELETE FROM gpus WHERE node = ");
      b.Bind(n.name);
      for (size_t i = 0; i < n.gpus.size(); ++i) {
        b.Text(i == 0 ? " AND uuid NOT IN (" : ", ").Bind(n.gpus[i].uuid);
      }
      b.Text(n.gpus.empty() ? ")" : "))");
      if (!n.gpus.empty()) b.Text(", gpus AS (").Gpus(n, 0, n.gpus.size()).Text(")");
      if (!events.empty()) b.Text(", events AS (").Events(events).Text(")");
      b.Text(" SELECT 1");
      b.Run();
      return {};
    }
    soci::transaction tx(sql);
    Builder(sql).Node(n).Run();
    sql << "DELETE FROM gpus WHERE node = :n", soci::use(n.name);
    constexpr size_t kChunk = 64;
    for (size_t from = 0; from < n.gpus.size(); from += kChunk) {
      Builder(sql).Gpus(n, from, std::min(n.gpus.size(), from + kChunk)).Run();
    }
    for (size_t from = 0; from < events.size(); from += kChunk) {
      const size_t to = std::min(events.size(), from + kChunk);
      Builder(sql).Events({events.begin() + from, events.begin() + to}).Run();
    }
    tx.commit();
    return {};
  });
}

Result<std::vector<Node>> SqlStore::LoadNodes() {
  return Run([&](soci::session& sql) -> Result<std::vector<Node>> {
    std::vector<Node> out;
    std::map<std::string, size_t> by_name;
    {
      Node n;
      std::string state, resume, facts;
      long long simulated = 0, registered = 0, seen = 0, since = 0, connected = 0;
      soci::statement st =
          Once(sql,
               "SELECT name, cluster, pool, state, resume_state, reason, facts, "
               "simulated, registered_ms, last_seen_ms, state_since_ms, token_hash, connected_ms "
               "FROM nodes ORDER BY name COLLATE \"binary\"",
               soci::into(n.name), soci::into(n.cluster), soci::into(n.pool), soci::into(state),
               soci::into(resume), soci::into(n.reason), soci::into(facts), soci::into(simulated),
               soci::into(registered), soci::into(seen), soci::into(since),
               soci::into(n.token_hash), soci::into(connected));
      st.execute();
      while (st.fetch()) {
        n.state = ParseNodeState(state).value_or(NodeState::kUnreachable);
        n.resume_state = ParseNodeState(resume).value_or(NodeState::kReady);
        boost::system::error_code ec;
        auto fv = json::parse(facts, ec);
        if (!ec) {
          if (auto f = FactsFromJson(fv); f.ok()) n.facts = f.value();
        }
        n.simulated = simulated != 0;
        n.registered_ms = registered;
        n.last_seen_ms = seen;
        n.state_since_ms = since;
        n.connected_ms = connected;
        by_name[n.name] = out.size();
        out.push_back(n);
      }
    }
    Gpu g;
    std::string node, firmware;
    long long idx = 0, mem = 0, mig = 0;
    soci::statement st =
        Once(sql,
             "SELECT node, uuid, idx, serial, name, model, pci_bus_id, "
             "memory_total, vbios, inforom, mig_mode, error, firmware FROM gpus "
             "ORDER BY node COLLATE \"binary\", idx",
             soci::into(node), soci::into(g.uuid), soci::into(idx), soci::into(g.serial),
             soci::into(g.name), soci::into(g.model), soci::into(g.pci_bus_id), soci::into(mem),
             soci::into(g.vbios_version), soci::into(g.inforom_version), soci::into(mig),
             soci::into(g.error), soci::into(firmware));
    st.execute();
    while (st.fetch()) {
      ReadFirmware(firmware, g);
      g.index = static_cast<int>(idx);
      g.memory_total_bytes = static_cast<uint64_t>(mem);
      g.mig_mode = static_cast<int>(mig);
      auto it = by_name.find(node);
      if (it != by_name.end()) out[it->second].gpus.push_back(g);
    }
    return out;
  });
}

Result<std::vector<NodeEvent>> SqlStore::ListNodeEvents(const std::string& node, int limit) {
  return Run([&](soci::session& sql) -> Result<std::vector<NodeEvent>> {
    std::vector<NodeEvent> out;
    NodeEvent e;
    long long id = 0, t = 0, lim = limit;
    soci::statement st = Once(sql,
                              "SELECT id, node, time_ms, from_state, to_state, reason, actor FROM "
                              "node_events WHERE node = :n ORDER BY id DESC LIMIT :l",
                              soci::into(id), soci::into(e.node), soci::into(t), soci::into(e.from),
                              soci::into(e.to), soci::into(e.reason), soci::into(e.actor),
                              soci::use(node), soci::use(lim));
    st.execute();
    while (st.fetch()) {
      e.id = id;
      e.time_ms = t;
      out.push_back(e);
    }
    return out;
  });
}

Status SqlStore::AppendGpuEvents(const std::vector<GpuEventRecord>& events) {
  return Run([&](soci::session& sql) -> Status {
    soci::transaction tx(sql);
    for (const auto& e : events) {
      long long t = e.time_ms, gpu = e.gpu, value = e.value;
      sql << "INSERT INTO gpu_events (time_ms, node, gpu, uuid, kind, value) VALUES "
             "(:t, :n, :g, :u, :k, :v) ON CONFLICT DO NOTHING",
          soci::use(t), soci::use(e.node), soci::use(gpu), soci::use(e.uuid), soci::use(e.kind),
          soci::use(value);
    }
    tx.commit();
    return {};
  });
}

Result<std::vector<GpuEventRecord>> SqlStore::ListGpuEvents(const std::string& node,
                                                            const std::string& kind, int limit) {
  return GpuEvents(node, kind, 0, limit, /*oldest_first=*/false);
}

Result<std::vector<GpuEventRecord>> SqlStore::ListGpuEventsAfter(int64_t after_id, int limit) {
  return GpuEvents("", "", after_id, limit, /*oldest_first=*/true);
}

Result<std::vector<GpuEventRecord>> SqlStore::GpuEvents(const std::string& node,
                                                        const std::string& kind, int64_t after_id,
                                                        int limit, bool oldest_first) {
  return Run([&](soci::session& sql) -> Result<std::vector<GpuEventRecord>> {
    std::vector<GpuEventRecord> out;
    GpuEventRecord e;
    long long id = 0, t = 0, gpu = 0, value = 0, after = after_id, lim = limit;
    soci::statement st =
        Once(sql,
             std::string("SELECT id, time_ms, node, gpu, uuid, kind, value FROM gpu_events "
                         "WHERE (node = :n OR :n2 = '') AND (kind = :k OR :k2 = '') AND id > :a "
                         "ORDER BY id") +
                 (oldest_first ? "" : " DESC") + " LIMIT :l",
             soci::into(id), soci::into(t), soci::into(e.node), soci::into(gpu), soci::into(e.uuid),
             soci::into(e.kind), soci::into(value), soci::use(node), soci::use(node),
             soci::use(kind), soci::use(kind), soci::use(after), soci::use(lim));
    st.execute();
    while (st.fetch()) {
      e.id = id;
      e.time_ms = t;
      e.gpu = static_cast<int>(gpu);
      e.value = value;
      out.push_back(e);
    }
    return out;
  });
}

}  // namespace gpufleet::store::sql
