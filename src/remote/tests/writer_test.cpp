#include "remote/writer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <thread>

#include "receiver.h"
#include "remote/wire.h"
#include "tests/support/temp_dir.h"

namespace gpufleet::remote {
namespace {

using testing::Received;

bool WaitFor(const std::function<bool()>& pred, int ms = 10'000) {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

class Writer : public ::testing::Test {
 protected:
  void SetUp() override {
    labels_ = std::make_shared<GpuLabels>();
    (*labels_)["GPU-a"] = {{"Hostname", "n1"}, {"UUID", "GPU-a"}, {"gpu", "0"}, {"pool", "a"}};
    (*labels_)["GPU-b"] = {{"Hostname", "n1"}, {"UUID", "GPU-b"}, {"gpu", "1"}, {"pool", "b"}};
  }
  std::unique_ptr<RemoteWriter> Open(std::vector<ReceiverConfig> receivers) {
    RemoteWriteOptions o;
    o.dir = dir_.path();
    o.batch_wait_ms = 20;
    o.labels_every_ms = 3'600'000;  // the tests call RefreshLabels
    o.receivers = std::move(receivers);
    auto w = RemoteWriter::Open(o, [this] { return std::shared_ptr<const GpuLabels>(labels_); });
    EXPECT_TRUE(w.ok()) << (w.ok() ? "" : w.error().message);
    return w.ok() ? std::move(w.value()) : nullptr;
  }
  ReceiverConfig Config(const std::string& url, int shards = 2) {
    ReceiverConfig r;
    r.url = url;
    r.shards = shards;
    r.max_samples_per_send = 50;
    return r;
  }
  // One second of both GPUs: utilization and power (in mW) at `t`.
  void Second(RemoteWriter& w, int64_t t) {
    w.Stored({"GPU-a", "GPU-b"}, {0, 1},
             {{0, Field::kGpuUtil, t, 10.0 + t / 1000},
              {0, Field::kPowerUsage, t, 250'000},
              {1, Field::kGpuUtil, t, 20.0 + t / 1000},
              {1, Field::kPowerUsage, t, 300'000}});
  }
  static std::map<std::string, std::vector<int64_t>> BySeries(const std::vector<Received>& taken) {
    std::map<std::string, std::vector<int64_t>> out;
    for (const auto& r : taken)
      out[r.labels.at("__name__") + "/" + r.labels.at("UUID")].push_back(r.t);
    return out;
  }
  // Every series has exactly the times [from, to) in order.
  static void ExpectEverySecond(const std::vector<Received>& taken, int64_t from, int64_t to) {
    auto series = BySeries(taken);
    EXPECT_EQ(series.size(), 4u);
    for (const auto& [name, times] : series) {
      std::vector<int64_t> want;
      for (int64_t t = from; t < to; t += 1000) want.push_back(t);
      EXPECT_EQ(times, want) << name;
    }
  }
  std::shared_ptr<GpuLabels> labels_;
  gpufleet::testing::TempDir dir_;
};

TEST_F(Writer, SendsEveryStoredSampleUnderDcgmNamesUnitsAndTheFleetsLabels) {
  testing::Receiver rx;
  auto c = Config(rx.url());
  c.bearer_token = "s3cret";
  auto w = Open({c});
  w->Start();
  for (int64_t t = 1000; t <= 5000; t += 1000) Second(*w, t);
  ASSERT_TRUE(WaitFor([&] {
    return rx.Taken().size() == 20 && w->Receivers()[0].sent == 20 &&
           w->Receivers()[0].pending == 0;
  }));
  for (const auto& p : rx.Problems()) EXPECT_EQ(p, "");
  EXPECT_EQ(rx.last_authorization(), "Bearer s3cret");
  ExpectEverySecond(rx.Taken(), 1000, 6000);
  for (const auto& r : rx.Taken()) {
    EXPECT_EQ(r.labels.at("Hostname"), "n1");
    if (r.labels.at("__name__") == "DCGM_FI_DEV_POWER_USAGE") {
      EXPECT_EQ(r.v, r.labels.at("UUID") == "GPU-a" ? 250 : 300);  // mW stored, W sent
    } else {
      EXPECT_EQ(r.labels.at("__name__"), "DCGM_FI_DEV_GPU_UTIL");
    }
  }
  auto s = w->Receivers();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].sent, 20u);
  EXPECT_EQ(s[0].pending, 0u);
  EXPECT_EQ(s[0].failed + s[0].dropped, 0u);
  EXPECT_EQ(s[0].name,
            "127.0.0.1:" + rx.url().substr(17, rx.url().find('/', 17) - 17) + "/api/v1/write");
}

TEST_F(Writer, RetriesServerErrorsAndTooManyRequestsAndLosesNothing) {
  testing::Receiver rx;
  rx.Script({503, 429, 500});
  auto w = Open({Config(rx.url(), 1)});
  w->Start();
  for (int64_t t = 1000; t <= 3000; t += 1000) Second(*w, t);
  ASSERT_TRUE(WaitFor([&] { return rx.Taken().size() == 12 && w->Receivers()[0].sent == 12; }));
  ExpectEverySecond(rx.Taken(), 1000, 4000);
  auto s = w->Receivers()[0];
  EXPECT_EQ(s.sent, 12u);
  EXPECT_GE(s.retries, 3u);
  EXPECT_GT(s.failed, 0u);
  EXPECT_EQ(s.dropped, 0u);
  EXPECT_EQ(s.last_error, "");
}

TEST_F(Writer, DropsWhatAReceiverRefusesAndGoesOn) {
  testing::Receiver rx;
  rx.Script({400});
  auto w = Open({Config(rx.url(), 1)});
  w->Start();
  Second(*w, 1000);
  ASSERT_TRUE(WaitFor([&] { return w->Receivers()[0].dropped == 4; }));
  EXPECT_NE(w->Receivers()[0].last_error.find("HTTP 400"), std::string::npos);
  Second(*w, 2000);
  ASSERT_TRUE(WaitFor([&] { return rx.Taken().size() == 4 && w->Receivers()[0].sent == 4; }));
  ExpectEverySecond(rx.Taken(), 2000, 3000);
  EXPECT_EQ(w->Receivers()[0].sent, 4u);
}

TEST_F(Writer, ARestartResumesWhereTheReceiverLeftOffWithoutSendingAnythingTwice) {
  testing::Receiver rx;
  {
    auto w = Open({Config(rx.url())});
    w->Start();
    for (int64_t t = 1000; t <= 3000; t += 1000) Second(*w, t);
    ASSERT_TRUE(WaitFor([&] { return w->Receivers()[0].sent == 12; }));
    // Stored while the receiver is failing, then the controller stops.
    rx.Script(std::vector<int>(1000, 503));
    for (int64_t t = 4000; t <= 6000; t += 1000) Second(*w, t);
    ASSERT_TRUE(WaitFor([&] { return w->Receivers()[0].retries >= 2; }));
    EXPECT_EQ(w->Receivers()[0].pending, 12u);
    w->Stop();
  }
  rx.Script({});
  auto w = Open({Config(rx.url())});
  EXPECT_EQ(w->Receivers()[0].pending, 12u);
  w->Start();
  for (int64_t t = 7000; t <= 8000; t += 1000) Second(*w, t);
  ASSERT_TRUE(WaitFor([&] { return rx.Taken().size() == 32; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ExpectEverySecond(rx.Taken(), 1000, 9000);
}

TEST_F(Writer, AnInterruptedReadDoesNotSendTheShardsTakenAgain) {
  testing::Receiver rx;
  // Four shards and four series: one request per series. The second request fails, and the
  // writer stops while it waits to retry it.
  {
    auto w = Open({Config(rx.url(), 4)});
    rx.Script({204, 503, 503, 503, 503, 503, 503, 503, 503});
    w->Start();
    Second(*w, 1000);
    ASSERT_TRUE(
        WaitFor([&] { return w->Receivers()[0].retries >= 1 && w->Receivers()[0].sent >= 1; }));
    w->Stop();
  }
  size_t before = rx.Taken().size();
  EXPECT_GE(before, 1u);
  EXPECT_LT(before, 4u);
  rx.Script({});
  auto w = Open({Config(rx.url(), 4)});
  w->Start();
  ASSERT_TRUE(WaitFor([&] { return rx.Taken().size() >= 4; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ExpectEverySecond(rx.Taken(), 1000, 2000);  // each series once
}

// Five seconds stored before the writer reads: one request carries them all, each series' labels
// once for its five samples.
TEST_F(Writer, AReadSendsEachSeriesSamplesTogetherInOneRequest) {
  testing::Receiver rx;
  auto w = Open({Config(rx.url(), 1)});
  for (int64_t t = 1000; t <= 5000; t += 1000) Second(*w, t);
  w->Start();
  ASSERT_TRUE(WaitFor([&] { return rx.Taken().size() == 20; }));
  EXPECT_EQ(rx.requests(), 1);
  ExpectEverySecond(rx.Taken(), 1000, 6000);
  for (const auto& p : rx.Problems()) EXPECT_EQ(p, "");
}

// A read of 20 samples with 10 a request: two requests of one shard (GPU-b's series, then
// GPU-a's, by their hashes). The second fails and the writer stops; started again, it reads the
// same samples, splits them the same way and sends only the second.
TEST_F(Writer, AnInterruptedReadGoesOnWithTheRequestsNotTaken) {
  testing::Receiver rx;
  auto c = Config(rx.url(), 1);
  c.max_samples_per_send = 10;
  {
    auto w = Open({c});
    for (int64_t t = 1000; t <= 5000; t += 1000) Second(*w, t);
    rx.Script({204, 503, 503, 503, 503, 503, 503, 503, 503});
    w->Start();
    ASSERT_TRUE(WaitFor([&] { return w->Receivers()[0].retries >= 1; }));
    // Stored meanwhile: not part of the interrupted read.
    Second(*w, 6000);
    w->Stop();
  }
  auto before = BySeries(rx.Taken());
  ASSERT_EQ(before.size(), 2u);
  EXPECT_TRUE(before.count("DCGM_FI_DEV_GPU_UTIL/GPU-b"));
  rx.Script({});
  auto w = Open({c});
  w->Start();
  ASSERT_TRUE(WaitFor([&] { return rx.Taken().size() >= 24; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ExpectEverySecond(rx.Taken(), 1000, 7000);  // each sample once, in order
  EXPECT_EQ(w->Receivers()[0].pending, 0u);
}

TEST_F(Writer, AGpuThatLeavesTheFleetEndsItsSeriesWithStalenessMarkers) {
  testing::Receiver rx;
  auto w = Open({Config(rx.url())});
  w->Start();
  Second(*w, 1000);
  ASSERT_TRUE(WaitFor([&] { return rx.Taken().size() == 4; }));
  labels_ = std::make_shared<GpuLabels>(*labels_);
  labels_->erase("GPU-b");
  w->RefreshLabels();
  ASSERT_TRUE(WaitFor([&] { return rx.Taken().size() == 6; }));
  auto taken = rx.Taken();
  for (size_t i = 4; i < 6; ++i) {
    const auto& r = taken[i];
    EXPECT_EQ(r.labels.at("UUID"), "GPU-b");
    EXPECT_TRUE(IsStaleNaN(r.v));
    EXPECT_GT(r.t, 1000);
  }
}

TEST_F(Writer, SendsOnlyTheSeriesItsSelectorsMatch) {
  testing::Receiver rx;
  auto c = Config(rx.url());
  c.match = {"DCGM_FI_DEV_GPU_UTIL{pool=\"a\"}", "DCGM_FI_DEV_POWER_USAGE{gpu=\"1\"}",
             "{pool=\"nosuch\"}"};
  auto w = Open({c});
  w->Start();
  Second(*w, 1000);
  Second(*w, 2000);
  ASSERT_TRUE(WaitFor([&] { return w->Receivers()[0].pending == 0 && rx.Taken().size() == 4; }));
  auto series = BySeries(rx.Taken());
  EXPECT_EQ(series.size(), 2u);
  EXPECT_TRUE(series.count("DCGM_FI_DEV_GPU_UTIL/GPU-a"));
  EXPECT_TRUE(series.count("DCGM_FI_DEV_POWER_USAGE/GPU-b"));
}

TEST(RemoteConfig, ReadsTheListAndRefusesWhatCannotWork) {
  auto ok = ParseReceivers(R"(
remote_write:
  - url: http://127.0.0.1:8428/api/v1/write
    name: vm
    basic_auth: {username: gf, password: pw}
    match: ['DCGM_FI_DEV_GPU_UTIL']
    shards: 2
    timeout: 10s
  - url: https://mimir.example.com/api/v1/push
    bearer_token: t
)",
                           "c.yaml");
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  ASSERT_EQ(ok->size(), 2u);
  EXPECT_EQ((*ok)[0].name, "vm");
  EXPECT_EQ((*ok)[0].basic_password, "pw");
  EXPECT_EQ((*ok)[0].timeout_ms, 10'000);
  EXPECT_EQ((*ok)[1].name, "mimir.example.com/api/v1/push");
  auto expect_error = [](const std::string& yaml, const std::string& says) {
    auto r = ParseReceivers(yaml, "c.yaml");
    ASSERT_FALSE(r.ok()) << yaml;
    EXPECT_NE(r.error().message.find(says), std::string::npos) << r.error().message;
  };
  expect_error("remote_write:\n  - url: http://vm.example.com/api/v1/write\n    bearer_token: t\n",
               "only over https");
  expect_error("remote_write:\n  - url: ftp://x/y\n", "url must be");
  expect_error("remote_write:\n  - url: http://127.0.0.1/w\n    shard: 2\n", "unknown key 'shard'");
  expect_error(
      "remote_write:\n  - url: http://127.0.0.1/w\n    match: ['rate(DCGM_FI_DEV_GPU_UTIL[5m])']\n",
      "not a series selector");
  expect_error("remote_writes: []\n", "unknown key");
  expect_error("remote_write:\n  - url: http://127.0.0.1/w\n    bearer_token_file: /nonexistent\n",
               "cannot read /nonexistent");
  EXPECT_FALSE(ReceiverFromUrl("localhost:9090").ok());
  EXPECT_TRUE(ReceiverFromUrl("http://localhost:9090/api/v1/write").ok());
}

}  // namespace
}  // namespace gpufleet::remote
