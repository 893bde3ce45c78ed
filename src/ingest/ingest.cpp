#include "ingest/ingest.h"

#include <spdlog/spdlog.h>

#include <boost/json.hpp>
#include <map>

#include "common/clock.h"
#include "common/json_text.h"
#include "common/strings.h"

namespace gpufleet::ingest {

namespace {

// The versions a rollout acts on, by what they belong to ("driver", "GPU-… vbios").
std::map<std::string, std::string> Versions(const NodeFacts& facts, const std::vector<Gpu>& gpus) {
  std::map<std::string, std::string> v{{"driver", facts.driver_version},
                                       {"cuda_driver", facts.cuda_driver_version},
                                       {"container_toolkit", facts.container_toolkit}};
  for (const auto& g : gpus) {
    v[g.uuid + " vbios"] = g.vbios_version;
    v[g.uuid + " inforom"] = g.inforom_version;
    v[g.uuid + " gsp"] = g.gsp_firmware_version;
  }
  for (const auto& n : facts.nics) v["nic " + n.name + " firmware"] = n.fw_version;
  return v;
}

}  // namespace

Result<proto::Welcome> Ingest::OnHello(const proto::Hello& hello, const std::string& remote) {
  auto before = fleet_.GetNode(hello.facts.hostname);
  auto welcome = fleet_.OnHello(hello, remote);
  if (!welcome.ok() && welcome.error().code == ErrorCode::kPermissionDenied) {
    // A name taken by a credential that is not the node's own: in the audit log, not only the
    // log, as an attempt on the node's identity.
    AuditRecord rec;
    rec.time_ms = RealClock()->NowMs();
    rec.actor = "agent at " + Printable(remote, 64);
    rec.action = "hello refused";
    rec.target = "node/" + Printable(ToLower(hello.facts.hostname), 64);
    rec.status = 403;
    rec.result = welcome.error().message;
    if (auto s = audit_.AppendAudit(rec); !s.ok()) {
      spdlog::error("ingest: audit of a refused hello failed: {}", s.error().message);
    }
  }
  if (!welcome.ok() || !before.ok() || before->name != welcome->node) return welcome;
  auto was = Versions(before->facts, before->gpus);
  auto now = Versions(hello.facts, hello.gpus);
  boost::json::object from, to;
  for (const auto& [what, version] : now) {
    auto it = was.find(what);
    // A GPU new to the node is an inventory change, not a version change.
    if (it == was.end() || it->second == version || it->second.empty()) continue;
    from[what] = it->second;
    to[what] = version;
  }
  if (from.empty()) return welcome;
  AuditRecord rec;
  rec.time_ms = RealClock()->NowMs();
  rec.actor = "node/" + welcome->node;
  rec.action = "versions changed";
  rec.target = "node/" + welcome->node;
  rec.status = 200;
  rec.result = "ok";
  rec.before = JsonText(from);
  rec.after = JsonText(to);
  if (auto s = audit_.AppendAudit(rec); !s.ok()) {
    spdlog::error("ingest: audit of {}'s versions failed: {}", welcome->node, s.error().message);
  } else {
    spdlog::info("node {} reports new versions: {}", welcome->node, rec.after);
  }
  return welcome;
}

uint64_t Ingest::OnConnected(const std::string& node) { return fleet_.OnConnected(node); }

void Ingest::OnClosed(const std::string& node, uint64_t connection) {
  fleet_.OnClosed(node, connection);
}

std::optional<proto::Message> Ingest::OnMessage(const std::string& node,
                                                const proto::Message& message) {
  fleet_.OnMessage(node, message);
  if (const auto* result = std::get_if<proto::CommandResult>(&message)) {
    commands_.OnResult(node, *result);
    return std::nullopt;
  }
  const auto* samples = std::get_if<proto::Samples>(&message);
  if (!samples) return std::nullopt;
  std::vector<std::string> uuids = fleet_.GpuUuids(node);
  // A batch that is not stored is not acknowledged, and neither is any later one on this
  // connection (an acknowledgement covers every batch before it): the error closes the
  // connection, and the agent sends again, on its next, everything not acknowledged.
  auto not_stored = [&](const std::string& why) {
    return proto::Message(proto::ErrorMessage{
        "unavailable", "batch " + std::to_string(samples->seq) + " not stored (" + why +
                           "); reconnect and send it again"});
  };
  if (!samples->events.empty() && !RecordGpuEvents(node, uuids, samples->events)) {
    return not_stored("its GPU events could not be written");
  }
  // One append for the rows and the XID gauge of the events (TelemetryStore::Ingest).
  auto stored = telemetry_.Ingest(uuids, *samples);
  if (!stored.ok()) {
    spdlog::error("telemetry from {} not stored: {}", node, stored.error().message);
    return not_stored(stored.error().message);
  }
  return proto::Message(proto::Ack{samples->seq});
}

bool Ingest::RecordGpuEvents(const std::string& node, const std::vector<std::string>& uuids,
                             const std::vector<proto::GpuEvent>& events) {
  std::vector<GpuEventRecord> records;
  records.reserve(events.size());
  for (const auto& e : events) {
    bool known = e.gpu >= 0 && e.gpu < static_cast<int>(uuids.size());
    records.push_back({0, e.time_ms, node, e.gpu, known ? uuids[e.gpu] : "", e.kind, e.value});
    spdlog::warn("{} GPU {} ({}): {} {}", node, e.gpu, Printable(records.back().uuid, 80),
                 Printable(e.kind, 64), e.value);
  }
  if (auto s = store_.AppendGpuEvents(records); !s.ok()) {
    spdlog::error("events from {} not stored: {}", node, s.error().message);
    return false;
  }
  for (const auto& r : records) {
    if (r.kind == "xid" && !r.uuid.empty()) {
      health_.OnXid(r.uuid, r.time_ms, static_cast<int>(r.value));
    }
  }
  return true;
}

Status Ingest::OnScrape(const scrape::ScrapeTarget& target, int64_t now,
                        const scrape::DcgmReading& reading) {
  auto pool = fleet_.FindPool(target.pool);
  if (!pool.ok()) return pool.error();
  // Three missed scrapes (and a little slack) before the node turns unreachable.
  GF_TRY(fleet_.ObserveExporter(target.node, pool.value(), reading.facts, reading.gpus,
                                3 * target.interval_ms + 5'000));
  std::vector<std::string> uuids = fleet_.GpuUuids(target.node);
  proto::Samples batch;
  std::vector<proto::GpuEvent> events;
  for (SampleRow row : reading.rows) {
    row.time_ms = now;
    if (row.has(Field::kXidLast) && row.gpu < static_cast<int>(uuids.size())) {
      double xid = row.values[static_cast<size_t>(Field::kXidLast)];
      auto last = telemetry_.Latest(uuids[row.gpu], Field::kXidLast);
      if (xid != 0 && (!last || last->v != xid)) {
        events.push_back({now, row.gpu, "xid", static_cast<int64_t>(xid)});
      }
    }
    batch.rows.push_back(row);
  }
  // The rows carry the XID gauge already: the events go to the store and health only.
  if (!events.empty() && !RecordGpuEvents(target.node, uuids, events)) {
    return MakeError(ErrorCode::kUnavailable, "XID events of " + target.node + " not stored");
  }
  auto stored = telemetry_.Ingest(uuids, batch);
  if (!stored.ok()) return stored.error();
  return {};
}

std::vector<scrape::ScrapeTarget> ScrapeTargets(FleetService& fleet) {
  std::vector<scrape::ScrapeTarget> targets;
  auto pools = fleet.Pools();
  if (!pools.ok()) return targets;
  for (const auto& p : pools.value()) {
    for (const auto& e : p.exporters) {
      targets.push_back({e.node, p.name, e.url, p.scrape_interval_ms});
    }
  }
  return targets;
}

}  // namespace gpufleet::ingest
