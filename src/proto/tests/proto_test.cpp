#include "proto/proto.h"

#include <gtest/gtest.h>

namespace gpufleet::proto {
namespace {

TEST(Proto, HelloRoundTrips) {
  Hello h;
  h.join_token = "gfj_x";
  h.facts.hostname = "node-1";
  h.facts.driver_version = "550.54.15";
  h.simulated = true;
  Gpu g;
  g.index = 0;
  g.uuid = "GPU-a";
  g.name = "NVIDIA L4";
  h.gpus.push_back(g);
  std::string wire = Encode(h);
  EXPECT_NE(wire.find("\"v\":1"), std::string::npos);
  auto back = Decode(wire);
  ASSERT_TRUE(back.ok()) << back.error().message;
  auto* hello = std::get_if<Hello>(&back.value());
  ASSERT_NE(hello, nullptr);
  EXPECT_EQ(hello->join_token, "gfj_x");
  EXPECT_EQ(hello->facts.hostname, "node-1");
  EXPECT_EQ(hello->facts.driver_version, "550.54.15");
  EXPECT_TRUE(hello->simulated);
  ASSERT_EQ(hello->gpus.size(), 1u);
  EXPECT_EQ(hello->gpus[0].uuid, "GPU-a");
}

TEST(Proto, WelcomeHeartbeatInventoryErrorRoundTrip) {
  auto w = Decode(Encode(Welcome{"n", "c", "p", "gfn_t", 250}));
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(std::get<Welcome>(w.value()).heartbeat_interval_ms, 250);
  EXPECT_EQ(std::get<Welcome>(w.value()).node_token, "gfn_t");
  auto hb = Decode(Encode(Heartbeat{7, 1000}));
  ASSERT_TRUE(hb.ok());
  EXPECT_EQ(std::get<Heartbeat>(hb.value()).seq, 7);
  auto inv = Decode(Encode(Inventory{}));
  ASSERT_TRUE(inv.ok());
  EXPECT_TRUE(std::holds_alternative<Inventory>(inv.value()));
  auto err = Decode(Encode(ErrorMessage{"unauthenticated", "bad token"}));
  ASSERT_TRUE(err.ok());
  EXPECT_EQ(std::get<ErrorMessage>(err.value()).message, "bad token");
}

TEST(Proto, RemediationCommandsAndTheirResultsRoundTrip) {
  Command cmd;
  cmd.id = 9;
  cmd.gpu = 3;
  cmd.action = "reset_gpu";
  auto c = Decode(Encode(cmd));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(std::get<Command>(c.value()).action, "reset_gpu");
  EXPECT_EQ(std::get<Command>(c.value()).gpu, 3);
  auto r = Decode(Encode(CommandResult{9, 3, "reset_gpu", true, "exit 0: done"}));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(std::get<CommandResult>(r.value()).ok);
  EXPECT_EQ(std::get<CommandResult>(r.value()).message, "exit 0: done");
  auto bad = Decode(R"({"v":1,"type":"command","id":1,"gpu":0,"action":"format"})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("unknown action 'format': reset_gpu, reboot_node"),
            std::string::npos);
  EXPECT_FALSE(Decode(R"({"v":1,"type":"command_result","id":1,"gpu":0})").ok());
}

TEST(Proto, NodeActionsCarryTheirArgumentsDeadlineAndExitCode) {
  Command cmd;
  cmd.id = 1LL << 40;
  cmd.action = "install-driver";
  cmd.args = {"580.95.05", "/srv/pkgs/nvidia-driver-580.deb"};
  cmd.timeout_ms = 600'000;
  cmd.sim_faulty = true;
  auto c = Decode(Encode(cmd));
  ASSERT_TRUE(c.ok()) << c.error().message;
  const auto& got = std::get<Command>(c.value());
  EXPECT_EQ(got.id, 1LL << 40);
  EXPECT_EQ(got.args, cmd.args);
  EXPECT_EQ(got.timeout_ms, 600'000);
  EXPECT_TRUE(got.sim_faulty);
  CommandResult result{cmd.id, 0, "install-driver", false, "dpkg: error", 2, 4200};
  auto r = Decode(Encode(result));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(std::get<CommandResult>(r.value()).exit_code, 2);
  EXPECT_EQ(std::get<CommandResult>(r.value()).duration_ms, 4200);
  // An older agent's result has no exit code: -1, not 0 (which would read as a success).
  auto old =
      Decode(R"({"v":1,"type":"command_result","id":1,"gpu":0,"action":"reboot","ok":true})");
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(std::get<CommandResult>(old.value()).exit_code, -1);
  EXPECT_FALSE(
      Decode(R"({"v":1,"type":"command","id":1,"gpu":0,"action":"reboot","args":[1]})").ok());
}

TEST(Proto, SimLoadCommandsCarryEachHeldGpusJobAndProfile) {
  Command cmd;
  cmd.id = 3'000'000'001;
  cmd.action = std::string(kSimLoadAction);
  cmd.loads = {{0, 59, "training", 1'764'547'200'000}, {3, 61, "idle", 1'764'547'260'000}};
  auto c = Decode(Encode(cmd));
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(std::get<Command>(c.value()).loads, cmd.loads);
  cmd.loads.clear();  // every GPU free
  c = Decode(Encode(cmd));
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(std::get<Command>(c.value()).loads.empty());
  auto bad = Decode(R"({"v":1,"type":"command","id":1,"gpu":0,"action":"sim-load",)"
                    R"("loads":[[0,59,"training"]]})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message, "'loads' must be a list of [gpu, job, profile, since_ms]");
}

TEST(Proto, SamplesRoundTripWithAbsentFields) {
  Samples s;
  s.seq = 42;
  SampleRow r;
  r.time_ms = 1'764'430'000'000;
  r.gpu = 3;
  r.set(Field::kGpuUtil, 97);
  r.set(Field::kPowerUsage, 612'345);
  r.set(Field::kNvlinkLinksDown, 0);
  s.rows.push_back(r);
  auto back = Decode(Encode(s));
  ASSERT_TRUE(back.ok()) << back.error().message;
  const auto& got = std::get<Samples>(back.value());
  EXPECT_EQ(got.seq, 42);
  ASSERT_EQ(got.rows.size(), 1u);
  EXPECT_EQ(got.rows[0].time_ms, r.time_ms);
  EXPECT_EQ(got.rows[0].gpu, 3);
  EXPECT_EQ(got.rows[0].present, r.present);
  EXPECT_TRUE(got.rows[0].has(Field::kPowerUsage));
  EXPECT_FALSE(got.rows[0].has(Field::kGpuTemp));  // absent, not zero
  EXPECT_EQ(got.rows[0].values[static_cast<size_t>(Field::kPowerUsage)], 612'345);
  auto ack = Decode(Encode(Ack{42}));
  ASSERT_TRUE(ack.ok());
  EXPECT_EQ(std::get<Ack>(ack.value()).seq, 42);
  // A newer agent's extra fields are ignored; junk rows are refused.
  auto wider = Decode(
      R"({"v":1,"type":"samples","seq":1,"rows":[[5,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29]]})");
  ASSERT_TRUE(wider.ok()) << wider.error().message;
  EXPECT_EQ(std::get<Samples>(wider.value()).rows[0].values[0], 1);
  EXPECT_FALSE(Decode(R"({"v":1,"type":"samples","seq":1,"rows":[["x"]]})").ok());
  EXPECT_FALSE(Decode(R"({"v":1,"type":"samples","seq":1,"rows":[[1,0,"hot"]]})").ok());
}

TEST(Proto, RefusesNewerVersionsAndJunk) {
  auto newer = Decode(R"({"v": 99, "type": "heartbeat"})");
  ASSERT_FALSE(newer.ok());
  EXPECT_NE(newer.error().message.find("unsupported protocol version 99"), std::string::npos);
  EXPECT_FALSE(Decode(R"({"type": "heartbeat"})").ok());
  EXPECT_FALSE(Decode(R"({"v": 1, "type": "teleport"})").ok());
  EXPECT_FALSE(Decode("not json").ok());
  EXPECT_FALSE(Decode(R"({"v": 1, "type": "hello"})").ok());  // no facts
  EXPECT_FALSE(Decode(R"({"v": 1, "type": "hello", "facts": {"hostname": "a"}, "gpus": 3})").ok());
}

}  // namespace
}  // namespace gpufleet::proto

namespace gpufleet::proto {
namespace {

// A frame from the network is an error value whatever it holds: a fraction, a number out of
// range or a negative where a whole number goes never throws (it once took the controller
// down: the exception unwound an agent's session).
TEST(Decode, NumbersThatAreNotWholeAreErrorsNotExceptions) {
  for (const char* row :
       {"[1.5,0,50]", "[1000,0.5,50]", "[1e300,0,50]", "[-5,0,50]", "[1000,99999,50]",
        "[1000,-1,50]", "[18446744073709551615,0,1]", "[\"1\",0,1]", "[1000]"}) {
    auto m = Decode(std::string(R"({"v":1,"type":"samples","seq":1,"rows":[)") + row + "]}");
    EXPECT_FALSE(m.ok()) << row;
  }
  for (const char* event : {"[1.5,0,\"xid\",79]", "[1,0,\"xid\",79.5]", "[1,0,\"xid\"]"}) {
    auto m = Decode(std::string(R"({"v":1,"type":"samples","seq":1,"rows":[],"events":[)") + event +
                    "]}");
    EXPECT_FALSE(m.ok()) << event;
  }
  auto fine = Decode(R"({"v":1,"type":"samples","seq":1,"rows":[[1000,0,50.5,null]]})");
  ASSERT_TRUE(fine.ok()) << fine.error().message;
  EXPECT_EQ(std::get<Samples>(fine.value()).rows.at(0).time_ms, 1000);
  // Deep nesting and garbage: errors too.
  EXPECT_FALSE(Decode(std::string(10'000, '[')).ok());
  EXPECT_FALSE(Decode(R"({"v":1.5,"type":"hello"})").ok());
}

}  // namespace
}  // namespace gpufleet::proto
