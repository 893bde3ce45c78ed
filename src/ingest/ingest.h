#pragma once
// Ingest: what arrives from the nodes, routed to the capabilities that keep it. An agent's
// channel (registration, liveness and facts to the fleet; sample batches to the telemetry
// store, acknowledged once in its write-ahead log; XID events to the store and the health
// model; command results to health) and a scraped dcgm-exporter page (the node registered or
// refreshed like an agent's, its readings stored like a batch). Thread-safe as its parts are:
// the API's I/O threads and the scraper's thread call it at once.

#include <functional>
#include <string>
#include <vector>

#include "fleet/fleet.h"
#include "health/service.h"
#include "proto/agent_handler.h"
#include "runtime/command_bus.h"
#include "scrape/scraper.h"
#include "store/store.h"
#include "telemetry/telemetry.h"

namespace gpufleet::ingest {

class Ingest : public proto::AgentHandler {
 public:
  // Agents' answers to commands go to `commands`, which routes each to its sender.
  Ingest(FleetService& fleet, TelemetryStore& telemetry, store::FleetStore& store,
         health::HealthService& health, store::AuditLog& audit, runtime::CommandBus& commands)
      : fleet_(fleet),
        telemetry_(telemetry),
        store_(store),
        health_(health),
        audit_(audit),
        commands_(commands) {}

  // A registration; a node whose driver, CUDA, VBIOS or InfoROM version differs from what it
  // last reported is audited, with the node as the actor (an upgrade done outside gpufleet).
  Result<proto::Welcome> OnHello(const proto::Hello& hello, const std::string& remote) override;
  uint64_t OnConnected(const std::string& node) override;
  void OnClosed(const std::string& node, uint64_t connection) override;
  // A sample batch is acknowledged only once stored; without an ack the agent sends it again.
  std::optional<proto::Message> OnMessage(const std::string& node,
                                          const proto::Message& message) override;

  // The scraper's sink. dcgm-exporter shows only the last XID per GPU, so a change of that
  // value to a non-zero one is recorded as an XID event (a repeat of the same XID cannot be
  // told apart).
  Status OnScrape(const scrape::ScrapeTarget& target, int64_t now,
                  const scrape::DcgmReading& reading);

 private:
  // The durable, queryable record of each event, then the health model's view of its XIDs.
  // False when the records could not be stored.
  bool RecordGpuEvents(const std::string& node, const std::vector<std::string>& uuids,
                       const std::vector<proto::GpuEvent>& events);

  FleetService& fleet_;
  TelemetryStore& telemetry_;
  store::FleetStore& store_;
  health::HealthService& health_;
  store::AuditLog& audit_;
  runtime::CommandBus& commands_;
};

// Every pool's exporters, as scrape targets.
std::vector<scrape::ScrapeTarget> ScrapeTargets(FleetService& fleet);

}  // namespace gpufleet::ingest
