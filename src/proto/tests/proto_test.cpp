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
