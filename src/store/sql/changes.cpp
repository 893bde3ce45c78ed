// The change feed (store/lease.h WatchChanges): statement triggers on the tables controllers keep
// in memory NOTIFY "TABLE APPLICATION_NAME" on channel gpufleet_changes; the feed LISTENs on a
// connection of its own and hands on the tables that other processes changed.

#include <libpq-fe.h>
#include <poll.h>
#include <soci/postgresql/soci-postgresql.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <set>
#include <thread>

#include "store/sql/backends.h"

namespace gpufleet::store {

const std::vector<std::string>& WatchedTables() {
  static const std::vector<std::string> kTables = {
      "nodes",         "gpus",        "clusters",         "pools",
      "teams",         "alert_rules", "alerts",           "rollouts",
      "rollout_nodes", "assets",      "scaling_policies", "agent_commands",
      "gpu_events",    "jobs"};
  return kTables;
}

namespace {

constexpr const char* kChannel = "gpufleet_changes";

class PgChangeFeed final : public ChangeFeed {
 public:
  PgChangeFeed(std::shared_ptr<sql::SqlStore> store, OnChanges on_change)
      : store_(std::move(store)), on_change_(std::move(on_change)), thread_([this] { Loop(); }) {}
  ~PgChangeFeed() override {
    stop_ = true;
    thread_.join();
  }

 private:
  void Loop() {
    bool told = true;  // whether the last connection's loss was logged
    while (!stop_) {
      try {
        soci::session sql;
        store_->OpenSession(sql);
        std::string self;
        sql << "SHOW application_name", soci::into(self);
        sql << std::string("LISTEN ") + kChannel;
        auto* backend = static_cast<soci::postgresql_session_backend*>(sql.get_backend());
        PGconn* conn = backend->conn_;
        if (!told) spdlog::info("store: the change feed is back");
        told = false;
        on_change_(WatchedTables());  // what changed while nobody listened
        Listen(sql, conn, self);
      } catch (const std::exception& e) {
        if (!told) spdlog::warn("store: the change feed lost its connection: {}", e.what());
        told = true;
      }
      for (int i = 0; i < 10 && !stop_; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
  }

  // Until the connection fails or the feed stops. A ping every 5 s finds a connection that died
  // without a word.
  void Listen(soci::session& sql, PGconn* conn, const std::string& self) {
    auto next_ping = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!stop_) {
      pollfd p{PQsocket(conn), POLLIN, 0};
      if (p.fd < 0) throw std::runtime_error("no socket");
      int ready = poll(&p, 1, 200);
      if (ready < 0 && errno != EINTR) throw std::runtime_error("poll failed");
      if (ready > 0 && PQconsumeInput(conn) == 0) throw std::runtime_error(PQerrorMessage(conn));
      std::set<std::string> tables;
      while (PGnotify* n = PQnotifies(conn)) {
        std::string payload = n->extra ? n->extra : "";
        PQfreemem(n);
        auto space = payload.find(' ');
        if (space == std::string::npos || payload.substr(space + 1) == self) continue;
        tables.insert(payload.substr(0, space));
      }
      if (!tables.empty()) on_change_({tables.begin(), tables.end()});
      if (std::chrono::steady_clock::now() >= next_ping) {
        sql << "SELECT 1";  // throws when the connection is gone
        next_ping = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      }
    }
  }

  std::shared_ptr<sql::SqlStore> store_;
  OnChanges on_change_;
  std::atomic<bool> stop_{false};
  std::thread thread_;  // last: started once the rest is set
};

}  // namespace

std::unique_ptr<ChangeFeed> WatchChanges(const std::shared_ptr<Database>& db, OnChanges on_change) {
  auto store = std::dynamic_pointer_cast<sql::SqlStore>(db);
  if (!store || store->dialect() != sql::Dialect::kPostgres) return nullptr;
  return std::make_unique<PgChangeFeed>(store, std::move(on_change));
}

}  // namespace gpufleet::store

namespace gpufleet::store::sql {

void InstallChangeTriggers(soci::session& sql) {
  sql << "CREATE OR REPLACE FUNCTION gpufleet_changed() RETURNS trigger LANGUAGE plpgsql AS $$ "
         "BEGIN PERFORM pg_notify('" +
             std::string(kChannel) +
             "', TG_TABLE_NAME || ' ' || current_setting('application_name')); RETURN NULL; "
             "END $$";
  for (const auto& table : WatchedTables()) {
    sql << "CREATE OR REPLACE TRIGGER gpufleet_changed AFTER INSERT OR UPDATE OR DELETE OR "
           "TRUNCATE ON " +
               table + " FOR EACH STATEMENT EXECUTE FUNCTION gpufleet_changed()";
  }
}

}  // namespace gpufleet::store::sql
