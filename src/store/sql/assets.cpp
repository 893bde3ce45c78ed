// The assets and their histories.

#include <algorithm>

#include "store/sql/sql_store.h"

namespace gpufleet::store::sql {

Status SqlStore::SaveAssets(const std::vector<AssetRecord>& assets,
                            const std::vector<AssetEventRecord>& events) {
  if (assets.empty() && events.empty()) return {};
  return Run([&](soci::session& sql) -> Status {
    soci::transaction tx(sql);
    if (!assets.empty()) {
      std::string id, kind, state, doc;
      long long u = 0;
      soci::statement st =
          (sql.prepare << "INSERT INTO assets (id, kind, state, doc, updated_ms) "
                          "VALUES (:i, :k, :s, :d, :u) ON CONFLICT (id) DO UPDATE "
                          "SET kind = excluded.kind, state = excluded.state, doc = excluded.doc, "
                          "updated_ms = excluded.updated_ms",
           soci::use(id), soci::use(kind), soci::use(state), soci::use(doc), soci::use(u));
      for (const auto& a : assets) {
        id = a.id;
        kind = a.kind;
        state = a.state;
        doc = a.doc;
        u = a.updated_ms;
        st.execute(true);
      }
    }
    if (!events.empty()) {
      std::string asset, doc;
      long long t = 0;
      soci::statement st =
          (sql.prepare << "INSERT INTO asset_events (asset, time_ms, doc) VALUES (:a, :t, :d)",
           soci::use(asset), soci::use(t), soci::use(doc));
      for (const auto& e : events) {
        asset = e.asset;
        t = e.time_ms;
        doc = e.doc;
        st.execute(true);
      }
    }
    tx.commit();
    return {};
  });
}

Result<std::vector<AssetRecord>> SqlStore::ListAssets() {
  return Run([&](soci::session& sql) -> Result<std::vector<AssetRecord>> {
    std::vector<AssetRecord> out;
    AssetRecord r;
    long long u = 0;
    soci::statement st = Once(
        sql, "SELECT id, kind, state, doc, updated_ms FROM assets ORDER BY id", soci::into(r.id),
        soci::into(r.kind), soci::into(r.state), soci::into(r.doc), soci::into(u));
    st.execute();
    while (st.fetch()) {
      r.updated_ms = u;
      out.push_back(r);
    }
    return out;
  });
}

Result<std::vector<AssetEventRecord>> SqlStore::ListAssetEvents(const std::string& asset,
                                                                int limit) {
  return Run([&](soci::session& sql) -> Result<std::vector<AssetEventRecord>> {
    std::vector<AssetEventRecord> out;
    AssetEventRecord r;
    long long id = 0, t = 0, n = limit;
    soci::statement st =
        Once(sql,
             "SELECT id, asset, time_ms, doc FROM asset_events WHERE (:a1 = '' OR asset = :a2) "
             "ORDER BY id DESC LIMIT :n",
             soci::into(id), soci::into(r.asset), soci::into(t), soci::into(r.doc),
             soci::use(asset), soci::use(asset), soci::use(n));
    st.execute();
    while (st.fetch()) {
      r.id = id;
      r.time_ms = t;
      out.push_back(r);
    }
    std::reverse(out.begin(), out.end());
    return out;
  });
}

}  // namespace gpufleet::store::sql
