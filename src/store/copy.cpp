// store::Copy: table by table from one database to another through SOCI's dynamic rows, so it
// needs no code per table; every column is TEXT or an integer (see migrations/).

#include <spdlog/spdlog.h>

#include <variant>

#include "store/sql/backends.h"

namespace gpufleet::store {

// Not `leader`, `controllers` and `agent_commands`: they describe the controllers running on
// the source.
const std::vector<std::string>& Tables() {
  static const std::vector<std::string> kTables = {
      "clusters",        "pools",           "nodes",          "gpus",
      "node_events",     "join_tokens",     "api_tokens",     "audit",
      "gpu_events",      "channels",        "outbox",         "alerts",
      "silences",        "alert_rules",     "jobs",           "scaling_policies",
      "scale_events",    "scaling_samples", "audit_anchor",   "settings",
      "rollouts",        "rollout_nodes",   "rollout_events", "drift_findings",
      "compliance_days", "teams",           "usage_records",  "pool_hours",
      "assets",          "asset_events",    "usage_days"};
  return kTables;
}

namespace {

int64_t CountRows(soci::session& sql, const std::string& table) {
  long long n = 0;
  sql << "SELECT COUNT(*) FROM " + table, soci::into(n);
  return n;
}

using Value = std::variant<long long, std::string>;

// One table: read all of it in one transaction, write all of it in another.
int64_t CopyTable(soci::session& from, soci::session& to, sql::Dialect to_dialect,
                  const std::string& table) {
  soci::transaction read(from);
  soci::rowset<soci::row> rows = (from.prepare << "SELECT * FROM " + table);
  soci::transaction write(to);
  bool has_id = false;
  std::vector<Value> values;
  std::vector<soci::indicator> nulls;
  std::unique_ptr<soci::statement> insert;
  int64_t copied = 0;
  for (const soci::row& r : rows) {
    if (!insert) {
      std::string cols, params;
      for (size_t i = 0; i < r.size(); ++i) {
        const std::string& name = r.get_properties(i).get_name();
        has_id = has_id || name == "id";
        cols += (i ? ", " : "") + name;
        params += (i ? ", :c" : ":c") + std::to_string(i);
        bool text = r.get_properties(i).get_data_type() == soci::dt_string;
        values.push_back(text ? Value(std::string()) : Value(0LL));
      }
      nulls.assign(values.size(), soci::i_ok);
      insert = std::make_unique<soci::statement>(to);
      insert->alloc();
      for (size_t i = 0; i < values.size(); ++i) {
        if (auto* s = std::get_if<std::string>(&values[i])) {
          insert->exchange(soci::use(*s, nulls[i]));
        } else {
          insert->exchange(soci::use(std::get<long long>(values[i]), nulls[i]));
        }
      }
      insert->prepare("INSERT INTO " + table + " (" + cols + ") VALUES (" + params + ")");
      insert->define_and_bind();
    }
    for (size_t i = 0; i < values.size(); ++i) {
      nulls[i] = r.get_indicator(i) == soci::i_null ? soci::i_null : soci::i_ok;
      if (nulls[i] == soci::i_null) continue;
      if (auto* s = std::get_if<std::string>(&values[i])) {
        *s = r.get<std::string>(i);
      } else {
        switch (r.get_properties(i).get_data_type()) {
          case soci::dt_integer:
            std::get<long long>(values[i]) = r.get<int>(i);
            break;
          case soci::dt_unsigned_long_long:
            std::get<long long>(values[i]) = static_cast<long long>(r.get<unsigned long long>(i));
            break;
          case soci::dt_double:
            std::get<long long>(values[i]) = static_cast<long long>(r.get<double>(i));
            break;
          default:
            std::get<long long>(values[i]) = r.get<long long>(i);
        }
      }
    }
    insert->execute(true);
    ++copied;
  }
  // PostgreSQL's sequences do not follow explicit ids: the next id must come after the copied.
  if (to_dialect == sql::Dialect::kPostgres && has_id) {
    std::string sequence;
    soci::indicator ind = soci::i_null;
    to << "SELECT pg_get_serial_sequence('" + table + "', 'id')", soci::into(sequence, ind);
    if (ind == soci::i_ok) {
      to << "SELECT setval('" + sequence + "', MAX(id)) FROM " + table +
                " HAVING MAX(id) IS NOT NULL";
    }
  }
  write.commit();
  read.commit();
  return copied;
}

}  // namespace

Result<std::vector<TableCopy>> Copy(const std::string& from_url, const std::string& to_url) {
  auto from = OpenSql(from_url, 1);
  if (!from.ok()) return from.error();
  auto to = OpenSql(to_url, 1);
  if (!to.ok()) return to.error();
  auto source_version = from.value()->SchemaVersion();
  auto target_version = to.value()->SchemaVersion();
  if (!source_version.ok()) return source_version.error();
  if (!target_version.ok()) return target_version.error();
  if (source_version.value() != target_version.value()) {
    return MakeError(ErrorCode::kConflict, "schema versions differ");  // Open migrated both
  }
  return from.value()->Run([&](soci::session& src) -> Result<std::vector<TableCopy>> {
    return to.value()->Run([&](soci::session& dst) -> Result<std::vector<TableCopy>> {
      for (const auto& t : Tables()) {
        if (int64_t n = CountRows(dst, t); n > 0) {
          return MakeError(ErrorCode::kConflict, "the target is not empty (" + t + " has " +
                                                     std::to_string(n) +
                                                     " rows): copy only into a new database");
        }
      }
      std::vector<TableCopy> out;
      for (const auto& t : Tables()) {
        int64_t copied = CopyTable(src, dst, to.value()->dialect(), t);
        int64_t source = CountRows(src, t), target = CountRows(dst, t);
        if (copied != source || target != source) {
          return MakeError(ErrorCode::kInternal,
                           t + ": " + std::to_string(source) + " rows in the source, " +
                               std::to_string(target) + " in the target after the copy");
        }
        spdlog::info("store copy: {} ({} rows)", t, copied);
        out.push_back({t, copied});
      }
      return out;
    });
  });
}

}  // namespace gpufleet::store
