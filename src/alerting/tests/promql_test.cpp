// The PromQL that the Prometheus query API adds to the rule engine: number results, bool,
// without, topk/bottomk/quantile, the instant functions, label_replace, offset, __name__, and
// evaluations at many times from one HistoryReader.

#include <gtest/gtest.h>

#include <cmath>

#include "alerting/eval.h"
#include "alerting/expr.h"
#include "alerting/history.h"

namespace gpufleet::alerting {
namespace {

constexpr int64_t kNow = 1'800'000'000'000;
constexpr int64_t kMin = 60'000;

std::string RuleError(const std::string& text) {
  auto e = ParseExpr(text);
  return e.ok() ? "(parsed)" : e.error().message;
}

std::string QueryError(const std::string& text) {
  auto e = ParseQuery(text);
  return e.ok() ? "(parsed)" : e.error().message;
}

TEST(Query, NumbersAndWhatIsNotSupportedIsNamed) {
  auto two = ParseQuery("1+1");
  ASSERT_TRUE(two.ok());
  EXPECT_FALSE(two.value()->vector);
  EXPECT_EQ(two.value()->number, 2);
  EXPECT_EQ(ParseQuery("2 > bool 1").value()->number, 1);
  EXPECT_EQ(QueryError("2 > 1"), "expr: at 3: a comparison of two numbers needs 'bool'");
  EXPECT_EQ(RuleError("1+1"),
            "expr: at 1: the expression gives a number, not a series: an "
            "alert needs a series");
  EXPECT_EQ(QueryError("rate(DCGM_FI_DEV_ECC_SBE_VOL_TOTAL[5m:1m])"),
            "expr: at 38: subqueries ([5m:1m]) are not supported");
  EXPECT_EQ(QueryError("gpu_temp @ 1700000000"), "expr: at 10: the @ modifier is not supported");
  EXPECT_EQ(QueryError("gpu_temp + on(Hostname) gpu_util"), "expr: at 12: 'on' is not supported");
  EXPECT_EQ(QueryError("histogram_quantile(0.9, gpu_temp)"),
            "expr: at 1: histogram_quantile() is not supported");
  EXPECT_EQ(QueryError("gpu_temp % 2"), "expr: at 10: the '%' operator is not supported");
  EXPECT_EQ(QueryError("{__name__=~\"DCGM.*\"}"),
            "expr: at 1: a selector names one metric: __name__ takes = and a name");
  EXPECT_EQ(QueryError("topk(1.5, gpu_temp)"), "expr: at 6: topk() takes a whole number of series");
  // A query may match a label the metric lacks (as Prometheus: its value is ""); a rule may not.
  EXPECT_EQ(QueryError("node_up{rack=\"\"}"), "(parsed)");
  EXPECT_NE(RuleError("node_up{rack=\"\"} == 0"), "(parsed)");
  // Equal queries share a key; the modifiers are part of it.
  EXPECT_EQ(ParseQuery("{__name__=\"gpu_temp\", pool='a'} offset 5m").value()->key,
            ParseQuery("gpu_temp{pool=\"a\"} offset 300s").value()->key);
  EXPECT_NE(ParseQuery("gpu_temp > bool 1").value()->key, ParseQuery("gpu_temp > 1").value()->key);
  EXPECT_NE(ParseQuery("sum by (pool) (gpu_temp)").value()->key,
            ParseQuery("sum without (pool) (gpu_temp)").value()->key);
}

// n1 (pool a) with GPUs 0 and 1, n2 (pool b) with GPU 0; temperatures sampled each minute for
// the last 30 minutes: GPU-10 at 60 + minute index, GPU-11 at 80, GPU-20 at 40.
struct Fixture {
  Snapshot snap;
  std::map<std::pair<std::string, Field>, std::vector<tsdb::Sample>> data;
  int loads = 0;
  Fixture() {
    snap.now_ms = kNow;
    snap.clusters = {"train"};
    snap.pools = {"a", "b"};
    snap.models = {"NVIDIA H100 80GB HBM3"};
    snap.nodes = {{"n1", 0, 0, true, 0, false, kNow - 1000},
                  {"n2", 0, 1, true, 0, false, kNow - 1000}};
    snap.gpus = {{0, "0", "GPU-10", 0, 0, "00000000:18:00.0", "nvidia0"},
                 {0, "1", "GPU-11", 0, 2, "00000000:2A:00.0", "nvidia1"},
                 {1, "0", "GPU-20", 0, 0, "00000000:18:00.0", "nvidia0"}};
    for (int m = 30; m >= 0; --m) {
      int64_t t = kNow - m * kMin;
      data[{"GPU-10", Field::kGpuTemp}].push_back({t, 60.0 + (30 - m)});
      data[{"GPU-11", Field::kGpuTemp}].push_back({t, 80});
      data[{"GPU-20", Field::kGpuTemp}].push_back({t, 40});
      // A counter that grows 120 per minute and resets 10 minutes ago.
      data[{"GPU-10", Field::kEccSbeVolatile}].push_back(
          {t, m >= 10 ? 120.0 * (30 - m) : 120.0 * (10 - m)});
    }
  }
  std::unique_ptr<HistoryReader> Reader(int64_t start, int64_t end, size_t max = 1'000'000) {
    return std::make_unique<HistoryReader>(
        [this](const Snapshot& s, size_t row, Field f, int64_t a, int64_t b,
               std::vector<tsdb::Sample>& out) {
          ++loads;
          out.clear();
          for (const auto& x : data[{s.gpus[row].uuid, f}]) {
            if (x.t >= a && x.t <= b) out.push_back(x);
          }
        },
        start, end, max);
  }
};

// "labels => value" of each output series, labels as label=value joined by commas.
std::map<std::string, double> Q(Evaluator& ev, const std::string& text,
                                const std::vector<std::string>& keys) {
  auto e = ParseQuery(text);
  EXPECT_TRUE(e.ok()) << text << ": " << (e.ok() ? "" : e.error().message);
  if (!e.ok()) return {};
  auto out = ev.Run(*e.value());
  EXPECT_TRUE(out.ok()) << text << ": " << (out.ok() ? "" : out.error().message);
  std::map<std::string, double> m;
  for (const auto& s : out.value()) {
    std::string k;
    for (const auto& key : keys) {
      auto it = s.labels.find(key);
      if (it != s.labels.end()) k += (k.empty() ? "" : ",") + key + "=" + it->second;
    }
    m[k] = s.value;
  }
  return m;
}

TEST(Query, NamesBoolWithoutAndTheDcgmLabels) {
  Fixture f;
  auto reader = f.Reader(kNow - 40 * kMin, kNow);
  Evaluator ev(f.snap, *reader, {true});
  auto sel = ParseQuery("DCGM_FI_DEV_GPU_TEMP{Hostname=\"n1\", gpu=\"1\"}");
  auto out = ev.Run(*sel.value());
  ASSERT_TRUE(out.ok());
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ(out->at(0).labels, (Labels{{"__name__", "DCGM_FI_DEV_GPU_TEMP"},
                                       {"Hostname", "n1"},
                                       {"UUID", "GPU-11"},
                                       {"cluster", "train"},
                                       {"device", "nvidia1"},
                                       {"gpu", "1"},
                                       {"modelName", "NVIDIA H100 80GB HBM3"},
                                       {"pci_bus_id", "00000000:2A:00.0"},
                                       {"pool", "a"}}));
  std::vector<std::string> k = {"__name__", "Hostname", "gpu"};
  // A filter keeps the name; arithmetic and bool drop it.
  EXPECT_EQ(
      Q(ev, "DCGM_FI_DEV_GPU_TEMP > 85", k),
      (std::map<std::string, double>{{"__name__=DCGM_FI_DEV_GPU_TEMP,Hostname=n1,gpu=0", 90}}));
  EXPECT_EQ(Q(ev, "DCGM_FI_DEV_GPU_TEMP > bool 85", k),
            (std::map<std::string, double>{
                {"Hostname=n1,gpu=0", 1}, {"Hostname=n1,gpu=1", 0}, {"Hostname=n2,gpu=0", 0}}));
  EXPECT_EQ(Q(ev, "DCGM_FI_DEV_GPU_TEMP{pool=\"b\"} * 2", k),
            (std::map<std::string, double>{{"Hostname=n2,gpu=0", 80}}));
  // A label no row has matches "" (Prometheus's rule).
  EXPECT_EQ(Q(ev, "gpu_temp{rack=\"\"}", k).size(), 3u);
  EXPECT_EQ(Q(ev, "gpu_temp{rack=\"r1\"}", k).size(), 0u);
  std::vector<std::string> g = {"Hostname", "cluster", "pool", "gpu", "UUID"};
  EXPECT_EQ(Q(ev, "sum without (gpu, UUID, pci_bus_id, device) (gpu_temp)", g),
            (std::map<std::string, double>{{"Hostname=n1,cluster=train,pool=a", 170},
                                           {"Hostname=n2,cluster=train,pool=b", 40}}));
}

TEST(Query, TopkQuantileFunctionsAndLabelReplace) {
  Fixture f;
  auto reader = f.Reader(kNow - 40 * kMin, kNow);
  Evaluator ev(f.snap, *reader, {true});
  std::vector<std::string> k = {"Hostname", "gpu", "pool", "host"};
  EXPECT_EQ(Q(ev, "topk(1, gpu_temp)", k),
            (std::map<std::string, double>{{"Hostname=n1,gpu=0,pool=a", 90}}));
  EXPECT_EQ(Q(ev, "bottomk by (pool) (1, gpu_temp)", k),
            (std::map<std::string, double>{{"Hostname=n1,gpu=1,pool=a", 80},
                                           {"Hostname=n2,gpu=0,pool=b", 40}}));
  EXPECT_EQ(Q(ev, "quantile(0.5, gpu_temp)", k), (std::map<std::string, double>{{"", 80}}));
  EXPECT_EQ(Q(ev, "quantile by (pool) (0.25, gpu_temp)", k),
            (std::map<std::string, double>{{"pool=a", 82.5}, {"pool=b", 40}}));
  // Population standard deviation of 90, 80 and 40 (mean 70).
  EXPECT_NEAR(Q(ev, "stddev(gpu_temp)", k)[""], std::sqrt((400.0 + 100 + 900) / 3), 1e-9);
  EXPECT_EQ(Q(ev, "clamp_max(gpu_temp, 85)", k)["Hostname=n1,gpu=0,pool=a"], 85);
  EXPECT_EQ(Q(ev, "clamp_min(gpu_temp, 50)", k)["Hostname=n2,gpu=0,pool=b"], 50);
  EXPECT_EQ(Q(ev, "clamp(gpu_temp, 50, 85)", k).size(), 3u);
  EXPECT_EQ(Q(ev, "round(gpu_temp / 7)", k)["Hostname=n1,gpu=0,pool=a"], 13);
  EXPECT_EQ(Q(ev, "round(gpu_temp / 7, 0.5)", k)["Hostname=n1,gpu=0,pool=a"], 13);
  EXPECT_EQ(Q(ev, "vector(3)", k), (std::map<std::string, double>{{"", 3}}));
  EXPECT_EQ(Q(ev,
              "label_replace(gpu_temp{pool=\"b\"}, \"host\", \"node-$1\", \"Hostname\", "
              "\"n(.*)\")",
              k),
            (std::map<std::string, double>{{"Hostname=n2,gpu=0,pool=b,host=node-2", 40}}));
  EXPECT_EQ(Q(ev,
              "label_replace(gpu_temp{pool=\"b\"}, \"host\", \"$1\", \"Hostname\", "
              "\"x(.*)\")",
              k),
            (std::map<std::string, double>{{"Hostname=n2,gpu=0,pool=b", 40}}))
      << "no match: the labels stay";
}

TEST(Query, StepsOffsetsAndRatesFromOneLoadPerSeries) {
  Fixture f;
  auto reader = f.Reader(kNow - 40 * kMin, kNow);
  Evaluator ev(f.snap, *reader, {true});
  std::vector<std::string> k = {"Hostname", "gpu"};
  auto temp = ParseQuery("gpu_temp{Hostname=\"n1\", gpu=\"0\"}");
  auto ago = ParseQuery("gpu_temp{Hostname=\"n1\", gpu=\"0\"} offset 10m");
  for (int m = 20; m >= 0; m -= 5) {
    ev.SetTime(kNow - m * kMin + 30'000);  // between samples: the one before it
    EXPECT_EQ(ev.Run(*temp.value())->at(0).value, 60 + 30 - m) << m;
    EXPECT_EQ(ev.Run(*ago.value())->at(0).value, 60 + 30 - m - 10) << m;
  }
  // Nothing older than the lookback (5 minutes) is a value.
  ev.SetTime(kNow + 6 * kMin);
  EXPECT_TRUE(ev.Run(*temp.value())->empty());
  // The counter's reset is counted from zero; irate reads the last two samples.
  ev.SetTime(kNow);
  EXPECT_NEAR(Q(ev, "rate(ecc_sbe_volatile[5m])", k)["Hostname=n1,gpu=0"], 480.0 / 300, 1e-9);
  EXPECT_NEAR(Q(ev, "irate(ecc_sbe_volatile[5m])", k)["Hostname=n1,gpu=0"], 2, 1e-9);
  EXPECT_NEAR(Q(ev, "increase(ecc_sbe_volatile[15m] offset 2m)", k)["Hostname=n1,gpu=0"], 14 * 120,
              1e-9);
  // The health model's facts have no history: absent far from when they were observed.
  EXPECT_EQ(Q(ev, "gpu_health", k).size(), 3u);
  ev.SetTime(kNow - 20 * kMin);
  EXPECT_TRUE(Q(ev, "gpu_health", k).empty());
  EXPECT_TRUE(Q(ev, "gpu_health offset 1m", k).empty());
  // Each series read was loaded once, whatever the number of steps: one GPU's temperature
  // (only the rows a selector keeps are read), every GPU's counter.
  EXPECT_EQ(f.loads, 1 + 3);
}

TEST(Query, TheHistoryReaderStopsAtItsBound) {
  Fixture f;
  auto reader = f.Reader(kNow - 40 * kMin, kNow, 40);
  Evaluator ev(f.snap, *reader, {true});
  auto e = ParseQuery("gpu_temp");
  ASSERT_TRUE(ev.Run(*e.value()).ok());
  EXPECT_TRUE(reader->exceeded()) << "31 samples per GPU: the second passes 40";
  EXPECT_EQ(f.loads, 2) << "nothing loaded after the bound";
}

}  // namespace
}  // namespace gpufleet::alerting

namespace gpufleet::alerting {
namespace {

// A range query at a step of a minute or more reads the minute rollups: a GPU's value at a
// step is the mean of its last whole minute before it, and windows still read raw samples.
TEST(Query, RollupStepsReadTheMinuteMeansAndWindowsTheRawSamples) {
  Fixture f;
  auto reader = f.Reader(kNow - 40 * kMin, kNow);
  int bucket_loads = 0;
  reader->UseRollups(kMin, [&](const Snapshot& s, size_t row, Field field, int64_t a, int64_t b,
                               std::vector<tsdb::Bucket>& out) {
    ++bucket_loads;
    out.clear();
    // One bucket a minute: the minute's samples were the recorded one and one 10 higher.
    for (const auto& x : f.data[{s.gpus[row].uuid, field}]) {
      if (x.t >= a && x.t < b) out.push_back({x.t, x.v, x.v + 10, 2 * x.v + 10, 2});
    }
  });
  Evaluator ev(f.snap, *reader, {true});
  auto e = ParseQuery("sum by (pool) (gpu_temp)");
  auto series = EvaluateRange(ev, *reader, *e.value(), kNow - 10 * kMin, kNow, kMin, 1000,
                              std::chrono::steady_clock::now() + std::chrono::seconds(10));
  ASSERT_TRUE(series.ok()) << series.error().message;
  ASSERT_EQ(series->size(), 2u);
  std::map<std::string, std::vector<std::pair<int64_t, double>>> by_pool;
  for (const auto& s : series.value()) {
    by_pool[ev.OutputLabels(s.space, s.row, s.name).at("pool")] = s.points;
  }
  // At kNow the last whole minute is the one that began a minute before: GPU-10's sample there
  // was 89 (mean 94), GPU-11's 80 (mean 85).
  ASSERT_EQ(by_pool["a"].size(), 11u);
  EXPECT_EQ(by_pool["a"].back(), (std::pair<int64_t, double>{kNow, 94 + 85}));
  EXPECT_EQ(by_pool["b"].front(), (std::pair<int64_t, double>{kNow - 10 * kMin, 45}));
  EXPECT_EQ(bucket_loads, 3) << "each GPU's minutes once for the 11 steps";
  EXPECT_EQ(f.loads, 0) << "no raw samples";
  // A window reads the raw samples.
  auto rate = ParseQuery("max_over_time(gpu_temp{gpu=\"0\", pool=\"a\"}[3m])");
  auto points = EvaluateRange(ev, *reader, *rate.value(), kNow - kMin, kNow, kMin, 1000,
                              std::chrono::steady_clock::now() + std::chrono::seconds(10));
  ASSERT_TRUE(points.ok());
  EXPECT_EQ(points->at(0).points.back().second, 90);
  EXPECT_EQ(f.loads, 1);
  // The point bound.
  auto many = EvaluateRange(ev, *reader, *e.value(), kNow - 10 * kMin, kNow, kMin, 5,
                            std::chrono::steady_clock::now() + std::chrono::seconds(10));
  ASSERT_FALSE(many.ok());
  EXPECT_EQ(many.error().code, ErrorCode::kTooLarge);
}

}  // namespace
}  // namespace gpufleet::alerting
