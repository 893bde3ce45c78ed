#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <deque>
#include <map>
#include <random>
#include <set>

#include "sched/autoscaler.h"
#include "sched/consolidate.h"
#include "sched/forecast.h"
#include "sched/pool.h"
#include "sched/replay.h"
#include "sched/tune.h"

namespace gpufleet::sched {
namespace {

// Property: over thousands of random placements, releases, failures and removals, no GPU is
// ever handed out twice, nothing lands on a node that is not ready, a job of up to one node's
// GPUs sits on one node, a larger one on whole nodes, a job spread with gpus_per_node on that
// many distinct nodes with that many GPUs each, and the pool's counters match the nodes. A
// job goes on a reserved node only when it is expected to end by backfill_until_s, so that the
// reserved nodes' jobs are still expected to have ended by then.
TEST(Allocator, RandomOperationsKeepEveryInvariant) {
  std::mt19937 rng(7);
  for (int G : {1, 2, 4, 8}) {
    Pool pool(G);
    for (int i = 0; i < 12; ++i) pool.MarkReady(pool.AddNode(0, 0), 0);
    std::vector<Job> running;
    std::vector<int> held(64, 0);  // GPUs held per node, recomputed from the jobs
    int64_t next_id = 0;
    for (int step = 0; step < 5000; ++step) {
      int op = static_cast<int>(rng() % 10);
      if (op < 6) {
        Job j;
        j.id = next_id++;
        j.gpus = 1 + static_cast<int>(rng() % (3 * G));
        if (G > 1 && rng() % 3 == 0) {  // spread: k GPUs on each of m nodes
          j.gpus_per_node = 1 + static_cast<int>(rng() % static_cast<unsigned>(G - 1));
          j.gpus = j.gpus_per_node * (2 + static_cast<int>(rng() % 3));
        }
        if (rng() % 3 != 0) j.duration_s = 1 + static_cast<double>(rng() % 50);
        const double now = step, end = j.duration_s > 0 ? now + j.duration_s : Pool::kNoEnd;
        std::vector<NodeState> before;
        for (const auto& n : pool.nodes()) before.push_back(n.state);
        if (pool.Place(j, now)) {
          pool.ExpectEnd(j, end);
          ASSERT_FALSE(j.nodes.empty());
          if (j.gpus_per_node > 0) {
            ASSERT_EQ(static_cast<int>(j.nodes.size()), j.gpus / j.gpus_per_node);
            ASSERT_EQ(std::set<int>(j.nodes.begin(), j.nodes.end()).size(), j.nodes.size())
                << "a spread job's nodes are distinct";
            for (int n : j.nodes) held[n] += j.gpus_per_node;
          } else if (j.gpus <= G) {
            ASSERT_EQ(j.nodes.size(), 1u) << "a job of up to one node's GPUs is on one node";
            held[j.nodes[0]] += j.gpus;
          } else {
            ASSERT_EQ(static_cast<int>(j.nodes.size()), (j.gpus + G - 1) / G);
            for (int n : j.nodes) held[n] += G;  // whole nodes
          }
          for (int n : j.nodes) {
            ASSERT_EQ(before[n], NodeState::kReady) << "placed on a node that is not ready";
            if (pool.nodes()[n].reserved) {
              ASSERT_LE(end, pool.backfill_until_s()) << "on a reserved node past its start";
            }
          }
          for (const auto& n : pool.nodes()) {
            if (n.reserved && pool.backfill_until_s() >= 0) {
              ASSERT_LE(n.busy_until_s, pool.backfill_until_s()) << "a reserved node's jobs";
            }
          }
          running.push_back(j);
        } else if (rng() % 4 == 0) {  // reserved for the job that did not fit, or not
          pool.ClearReservations();
          auto kept = pool.Reserve(j);
          ASSERT_LE(static_cast<int>(kept.size()), pool.NodesFor(j));
          for (int n : kept) ASSERT_EQ(pool.nodes()[n].state, NodeState::kReady);
        } else {
          pool.ClearReservations();
        }
      } else if (op < 9 && !running.empty()) {
        size_t k = rng() % running.size();
        const Job& j = running[k];
        int per = j.gpus_per_node > 0 ? j.gpus_per_node : j.gpus <= G ? j.gpus : G;
        ASSERT_EQ(pool.PerNode(j), per);
        for (int n : j.nodes) held[n] -= per;
        pool.Release(j, step);
        running.erase(running.begin() + static_cast<long>(k));
      } else if (pool.nodes().size() < 40) {
        int n = static_cast<int>(rng() % pool.nodes().size());
        if (rng() % 2) {
          pool.MarkReady(pool.AddNode(step, step), step);
        } else if (pool.nodes()[n].jobs == 0 && pool.nodes()[n].state == NodeState::kReady) {
          ASSERT_TRUE(pool.Remove(n));
        } else if (pool.nodes()[n].jobs > 0) {
          ASSERT_FALSE(pool.Remove(n)) << "a node with a running job must not be removed";
        }
      }
      int free = 0, ready = 0, whole = 0;
      for (size_t n = 0; n < pool.nodes().size(); ++n) {
        const PoolNode& node = pool.nodes()[n];
        ASSERT_LE(held[n], G) << "node " << n << " over-allocated";
        ASSERT_GE(node.free, 0);
        if (node.state == NodeState::kReady) {
          ASSERT_EQ(node.free, G - held[n]) << "node " << n;
          free += node.free;
          ++ready;
          whole += node.free == G;
        }
      }
      ASSERT_EQ(pool.free_gpus(), free);
      ASSERT_EQ(pool.ready_nodes(), ready);
      ASSERT_EQ(pool.empty_nodes(), whole);
    }
  }
}

// A spread job goes on the nodes with the fewest free GPUs that fit, one share on each; it
// waits when too few distinct nodes have room, however many GPUs are free in all. The queue's
// node count takes it as that many whole nodes.
TEST(Allocator, ASpreadJobTakesItsShareOnDistinctBestFitNodes) {
  Pool pool(8);
  for (int i = 0; i < 5; ++i) pool.MarkReady(pool.AddNode(0, 0), 0);
  for (auto [node, gpus] : {std::pair{0, 2}, {1, 4}, {3, 5}}) ASSERT_TRUE(pool.Take(node, gpus));
  // Free: 6, 4, 8, 3, 8.
  Job j{.id = 1, .gpus = 12, .gpus_per_node = 4};
  ASSERT_TRUE(pool.Place(j, 0));
  EXPECT_EQ(j.nodes, (std::vector<int>{1, 0, 2})) << "free 4, then 6, then the first whole node";
  EXPECT_EQ(pool.nodes()[1].free, 0);
  EXPECT_EQ(pool.nodes()[0].free, 2);
  EXPECT_EQ(pool.nodes()[2].free, 4);
  EXPECT_EQ(pool.empty_nodes(), 1);
  Job wide{.id = 2, .gpus = 12, .gpus_per_node = 3};
  EXPECT_FALSE(pool.Place(wide, 0)) << "17 GPUs free, but only 3 nodes with 3 of them";
  EXPECT_TRUE(wide.nodes.empty());
  pool.Release(j, 1);
  EXPECT_EQ(pool.free_gpus(), 40 - 11);
  EXPECT_EQ(pool.empty_nodes(), 2);
  EXPECT_EQ(QueueSize(12, 4, 8), 24) << "three whole nodes";
  EXPECT_EQ(QueueSize(4, 4, 8), 4) << "one node: not spread";
  EXPECT_EQ(QueueSize(16, 8, 8), 16) << "whole nodes: the default";
  EXPECT_EQ(QueueNodes(1, {{QueueSize(12, 4, 8), 1}}, 8), 4);
}

TEST(Allocator, BestFitKeepsWholeNodesFreeAndSkipsUnavailableNodes) {
  Pool pool(8);
  for (int i = 0; i < 3; ++i) pool.MarkReady(pool.AddNode(0, 0), 0);
  Job a{.id = 1, .gpus = 6};
  ASSERT_TRUE(pool.Place(a, 0));
  Job b{.id = 2, .gpus = 2};
  ASSERT_TRUE(pool.Place(b, 0));
  EXPECT_EQ(b.nodes, a.nodes) << "the 2-GPU job fills the node the 6-GPU job started";
  pool.MarkUnavailable(1);  // cordoned or failed
  Job c{.id = 3, .gpus = 16};
  EXPECT_FALSE(pool.Place(c, 0)) << "only one whole ready node is left";
  Job d{.id = 4, .gpus = 8};
  ASSERT_TRUE(pool.Place(d, 0));
  EXPECT_EQ(d.nodes, std::vector<int>{2});
  EXPECT_EQ(pool.free_gpus(), 0);
}

TEST(Queue, PriorityThenFairShareThenAge) {
  Pool pool(8);
  pool.MarkReady(pool.AddNode(0, 0), 0);
  Queue q;
  Job hog1{.id = 1, .team = "a", .gpus = 4, .submit_s = 0};
  q.Push(&hog1);
  ASSERT_EQ(q.Schedule(pool, 0).size(), 1u);  // team a now runs 4 GPUs
  Job a2{.id = 2, .team = "a", .gpus = 4, .submit_s = 1};
  Job b1{.id = 3, .team = "b", .gpus = 4, .submit_s = 2};
  Job urgent{.id = 4, .team = "a", .gpus = 4, .priority = 5, .submit_s = 3};
  q.Push(&a2);
  q.Push(&b1);
  auto started = q.Schedule(pool, 5);
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0]->id, 3) << "team b runs nothing yet: it goes before a's older job";
  pool.Release(hog1, 6);
  q.OnFinished(hog1);
  q.Push(&urgent);
  started = q.Schedule(pool, 6);
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0]->id, 4) << "priority first";
  EXPECT_EQ(q.size(), 1u);
  EXPECT_TRUE(q.Remove(2));
  EXPECT_TRUE(q.empty());
}

// Backfill alone would let 1-GPU jobs take every GPU a 16-GPU job's nodes free, for as long
// as they keep coming. Once it has waited Queue::kReserveAfterS, the nodes with the most free
// GPUs are kept for it: jobs behind it in the order go elsewhere or wait, jobs ahead of it do
// not, and it starts when the kept nodes' jobs end.
TEST(Queue, AJobThatWaitedLongGetsNodesKeptForIt) {
  Pool pool(8);
  for (int i = 0; i < 3; ++i) pool.MarkReady(pool.AddNode(0, 0), 0);
  ASSERT_TRUE(pool.Take(0, 6));
  ASSERT_TRUE(pool.Take(1, 2));
  ASSERT_TRUE(pool.Take(2, 1));
  Queue q;
  q.AddRunning("small", 9);
  Job big{.id = 1, .team = "big", .gpus = 16, .submit_s = 0};
  Job s1{.id = 2, .team = "small", .gpus = 1, .submit_s = 0};
  q.Push(&big);
  q.Push(&s1);
  auto started = q.Schedule(pool, 10);
  ASSERT_EQ(started.size(), 1u) << "not waited long yet: plain backfill";
  EXPECT_EQ(started[0]->id, 2);
  EXPECT_EQ(s1.nodes, std::vector<int>{0}) << "best fit";
  EXPECT_EQ(q.reserved_for(), nullptr);

  Job s2{.id = 3, .team = "small", .gpus = 1, .submit_s = 600};
  Job urgent{.id = 4, .team = "small", .gpus = 1, .priority = 1, .submit_s = 600};
  q.Push(&s2);
  q.Push(&urgent);
  started = q.Schedule(pool, Queue::kReserveAfterS);
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0]->id, 4) << "ahead of the big job in the order: not held back";
  EXPECT_EQ(urgent.nodes, std::vector<int>{0});
  ASSERT_EQ(q.reserved_for(), &big);
  EXPECT_EQ(q.reserved_nodes(), (std::vector<int>{2, 1})) << "the most free GPUs first";
  EXPECT_TRUE(pool.nodes()[1].reserved && pool.nodes()[2].reserved);
  EXPECT_FALSE(pool.nodes()[0].reserved);
  EXPECT_EQ(s2.start_s, -1) << "behind it: the free GPUs are on kept nodes";
  EXPECT_EQ(q.Schedule(pool, 700).size(), 0u);

  // The kept nodes' jobs end: the big job starts there, before the small one.
  Job on1{.gpus = 2, .nodes = {1}}, on2{.gpus = 1, .nodes = {2}};
  pool.Release(on1, 800);
  pool.Release(on2, 800);
  started = q.Schedule(pool, 800);
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0]->id, 1);
  EXPECT_EQ(big.nodes, (std::vector<int>{1, 2}));
  EXPECT_EQ(q.reserved_for(), nullptr);
  EXPECT_FALSE(pool.nodes()[1].reserved || pool.nodes()[2].reserved) << "cleared";
  EXPECT_EQ(s2.start_s, -1) << "no GPU left";
  EXPECT_EQ(q.size(), 1u);
}

// The nodes kept are those whose jobs are expected to end first: a node with more free GPUs
// but a job that runs until cancelled would keep the waiting job out for good.
TEST(Queue, NodesAreKeptWhereTheJobsEndFirst) {
  Pool pool(8);
  for (int i = 0; i < 3; ++i) pool.MarkReady(pool.AddNode(0, 0), 0);
  ASSERT_TRUE(pool.Take(0, 2));  // no expected end
  ASSERT_TRUE(pool.Take(1, 5, 2000));
  ASSERT_TRUE(pool.Take(2, 4, 1500));
  Queue q;
  Job whole{.id = 1, .team = "t", .gpus = 8, .submit_s = 0};
  Job small{.id = 2, .team = "t", .gpus = 2, .submit_s = 0, .duration_s = 100};
  q.Push(&whole);
  q.Push(&small);
  auto started = q.Schedule(pool, Queue::kReserveAfterS);
  ASSERT_EQ(q.reserved_nodes(), std::vector<int>{2}) << "its jobs end first";
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(small.nodes, std::vector<int>{1}) << "best fit, off the kept node";
  EXPECT_EQ(pool.nodes()[1].busy_until_s, 2000) << "the later end stands";
  EXPECT_EQ(pool.nodes()[0].busy_until_s, Pool::kNoEnd);
  pool.Release(small, 700);
  EXPECT_EQ(pool.nodes()[1].busy_until_s, 2000) << "still running a job: a bound";
  Job on1{.gpus = 5, .nodes = {1}};
  pool.Release(on1, 800);
  EXPECT_EQ(pool.nodes()[1].busy_until_s, 0) << "empty";
}

// Backfill onto kept nodes: a job behind the waiting one may run there when it is expected to
// end before the kept nodes' jobs do, so the waiting job starts no later. A job without a
// duration, or one that would end later, may not. A job that takes part of a node could start
// before all of a node's jobs end, so for it nothing is backfilled.
TEST(Queue, KeptNodesTakeJobsThatEndBeforeTheWaitingJobCanStart) {
  Pool pool(8);
  for (int i = 0; i < 3; ++i) pool.MarkReady(pool.AddNode(0, 0), 0);
  ASSERT_TRUE(pool.Take(0, 8, 5000));
  ASSERT_TRUE(pool.Take(1, 2, 1000));
  ASSERT_TRUE(pool.Take(2, 1, 900));
  Queue q;
  Job big{.id = 1, .team = "big", .gpus = 16, .submit_s = 0, .duration_s = 3600};
  Job fits{.id = 2, .team = "t", .gpus = 1, .submit_s = 0, .duration_s = 400};
  Job too_long{.id = 3, .team = "t", .gpus = 1, .submit_s = 0, .duration_s = 401};
  Job endless{.id = 4, .team = "t", .gpus = 1, .submit_s = 0};
  for (Job* j : {&big, &fits, &too_long, &endless}) q.Push(j);
  auto started = q.Schedule(pool, 600);
  ASSERT_EQ(q.reserved_nodes(), (std::vector<int>{2, 1}));
  EXPECT_EQ(pool.backfill_until_s(), 1000) << "node 1's job ends last";
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0]->id, 2) << "ends at 1000: on time";
  EXPECT_EQ(fits.nodes, std::vector<int>{1}) << "best fit among the kept nodes";
  EXPECT_EQ(pool.nodes()[1].busy_until_s, 1000);
  EXPECT_EQ(q.size(), 3u) << "ends at 1001, or no end known: not there";

  Job on1{.gpus = 2, .nodes = {1}}, on2{.gpus = 1, .nodes = {2}};
  pool.Release(on1, 1000);
  pool.Release(on2, 1000);
  pool.Release(fits, 1000);
  started = q.Schedule(pool, 1000);
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0]->id, 1) << "the big job starts when it was expected to";

  // An empty kept node is not offered to scale-down.
  Pool idle(8);
  for (int i = 0; i < 2; ++i) idle.MarkReady(idle.AddNode(0, 0), 0);
  ASSERT_TRUE(idle.Take(1, 1, 2000));
  EXPECT_EQ(idle.IdleNodes(600), std::vector<int>{0});
  EXPECT_EQ(idle.Reserve(big), (std::vector<int>{0, 1}));
  EXPECT_TRUE(idle.IdleNodes(600).empty());

  // Fewer ready nodes than it needs: it also waits for the node being provisioned.
  Pool growing(8);
  growing.MarkReady(growing.AddNode(0, 0), 0);
  ASSERT_TRUE(growing.Take(0, 4, 700));
  growing.AddNode(600, 1200);
  EXPECT_EQ(growing.Reserve(big), std::vector<int>{0});
  EXPECT_EQ(growing.backfill_until_s(), 1200);
  growing.ClearReservations();
  EXPECT_EQ(growing.backfill_until_s(), -1);

  Pool partial(8);
  partial.MarkReady(partial.AddNode(0, 0), 0);
  ASSERT_TRUE(partial.Take(0, 5, 1000));
  Job four{.id = 5, .team = "t", .gpus = 4, .submit_s = 0};
  Job short_one{.id = 6, .team = "t", .gpus = 1, .submit_s = 0, .duration_s = 10};
  Queue pq;
  pq.Push(&four);
  pq.Push(&short_one);
  EXPECT_TRUE(pq.Schedule(partial, 600).empty());
  EXPECT_EQ(pq.reserved_nodes(), std::vector<int>{0});
  EXPECT_EQ(partial.backfill_until_s(), -1);
}

// Property: with exact run times, a job that has nodes kept for it starts no later than the
// backfill_until_s its reservation promised, however much is backfilled onto those nodes
// meanwhile; and a later pass only brings that time forward. One team and one priority, so
// that no job overtakes it in the queue's order.
TEST(Queue, BackfillNeverDelaysTheJobNodesAreKeptFor) {
  std::mt19937 rng(11);
  constexpr int kG = 4;
  Pool pool(kG);
  for (int i = 0; i < 6; ++i) pool.MarkReady(pool.AddNode(0, 0), 0);
  std::deque<Job> jobs;  // addresses stay put
  Queue q;
  std::multimap<double, Job*> ends;
  std::map<int64_t, double> promised;  // job -> start at the latest
  int backfilled = 0, kept_started = 0;
  double t = 0;
  for (int64_t id = 1; id < 20000;) {
    double arrival = t + static_cast<double>(rng() % 70);
    if (!ends.empty() && ends.begin()->first <= arrival) {
      t = ends.begin()->first;
      for (; !ends.empty() && ends.begin()->first == t; ends.erase(ends.begin())) {
        pool.Release(*ends.begin()->second, t);
        q.OnFinished(*ends.begin()->second);
      }
    } else {
      t = arrival;
      Job& j = jobs.emplace_back();
      j.id = id++;
      j.team = "t";
      j.submit_s = t;
      j.gpus = rng() % 5 == 0 ? kG * (2 + static_cast<int>(rng() % 2))
                              : 1 + static_cast<int>(rng() % kG);
      j.duration_s = 1 + static_cast<double>(rng() % 400);
      q.Push(&j);
    }
    for (Job* j : q.Schedule(pool, t)) {
      if (auto p = promised.find(j->id); p != promised.end()) {
        ASSERT_LE(t, p->second) << "job " << j->id << " started after its promised time";
        ++kept_started;
      }
      const Job* r = q.reserved_for();
      for (int n : j->nodes) {
        backfilled += r && j->submit_s > r->submit_s && pool.nodes()[n].reserved;
      }
      ends.emplace(t + j->duration_s, j);
    }
    const Job* r = q.reserved_for();
    if (r && pool.backfill_until_s() >= 0) {
      auto [it, first] = promised.emplace(r->id, pool.backfill_until_s());
      ASSERT_LE(pool.backfill_until_s(), it->second) << "the promise moved later";
      it->second = pool.backfill_until_s();
    }
  }
  EXPECT_GT(kept_started, 10) << "too few jobs had nodes kept for them to show anything";
  EXPECT_GT(backfilled, 10) << "too few jobs were backfilled onto kept nodes";
}

ScalePolicy Policy() {
  ScalePolicy p;
  p.min_nodes = 2;
  p.max_nodes = 10;
  p.target_share = 0.5;
  p.step_up = 3;
  p.step_down = 2;
  p.up_cooldown_s = 60;
  p.down_cooldown_s = 300;
  p.mode = ScaleMode::kReactive;
  return p;
}

TEST(Autoscaler, BoundsStepsAndCooldowns) {
  ScalePolicy p = Policy();
  ScaleInput in;
  in.gpus_per_node = 8;
  in.ready = 2;
  in.demand_gpus = 40;  // needs 40 / (8 x 0.5) = 10 nodes
  auto d = Decide(p, in);
  EXPECT_EQ(d.target, 10);
  EXPECT_EQ(d.delta, 3) << "at most step_up";
  EXPECT_EQ(d.reason, "queue");
  in.demand_gpus = 400;
  d = Decide(p, in);
  EXPECT_EQ(d.target, 10) << "never above max_nodes";
  EXPECT_EQ(d.reason, "bound");
  in.now_s = 30;
  in.last_up_s = 0;
  d = Decide(p, in);
  EXPECT_EQ(d.delta, 0);
  EXPECT_EQ(d.reason, "cooldown");
  // Down: never below min_nodes, at most step_down, only idle nodes, after the cooldown.
  in = ScaleInput{};
  in.now_s = 1000;
  in.gpus_per_node = 8;
  in.ready = 8;
  in.demand_gpus = 0;
  in.idle_removable = 8;
  d = Decide(p, in);
  EXPECT_EQ(d.target, 2);
  EXPECT_EQ(d.delta, -2);
  in.idle_removable = 1;
  EXPECT_EQ(Decide(p, in).delta, -1) << "only idle nodes go";
  in.idle_removable = 0;
  d = Decide(p, in);
  EXPECT_EQ(d.delta, 0) << "a node with a running job is never removed";
  EXPECT_EQ(d.reason, "steady");
  in.idle_removable = 8;
  in.last_down_s = 900;
  EXPECT_EQ(Decide(p, in).reason, "cooldown");
  // Predictive: the forecast peak (its margin included by the caller) raises the target ahead
  // of the demand; target_share keeps headroom over today's demand only.
  p.mode = ScaleMode::kPredictive;
  in = ScaleInput{};
  in.gpus_per_node = 8;
  in.ready = 2;
  in.demand_gpus = 4;
  in.peak_forecast_gpus = 40;
  d = Decide(p, in);
  EXPECT_EQ(d.target, 5);
  EXPECT_EQ(d.delta, 3);
  EXPECT_EQ(d.reason, "forecast");
  in.peak_forecast_gpus = 12;  // 2 nodes' worth, but today's 4 GPUs at share 0.5 need 1
  EXPECT_EQ(Decide(p, in).target, 2);
  EXPECT_EQ(p.Validate(), "");
  p.target_share = 0;
  EXPECT_EQ(p.Validate(), "target_share must be in (0, 1]");
}

TEST(Autoscaler, AQueuedWholeNodeJobGetsANodeEvenWhenFreeGpusAddUp) {
  // Two ready nodes of 8, each running a 1-GPU job: 14 GPUs are free, but an 8-GPU job waits.
  EXPECT_EQ(QueueNodes(2, {{8, 1}}, 8), 3);
  EXPECT_EQ(QueueNodes(2, {{1, 3}, {4, 2}}, 8), 4) << "11 GPUs of small jobs pack into 2 nodes";
  EXPECT_EQ(QueueNodes(1, {{16, 1}}, 8), 3);
  EXPECT_EQ(QueueNodes(5, {}, 8), 0) << "nothing queued: nothing needed for the queue";
  ScalePolicy p;
  p.target_share = 1;
  p.mode = ScaleMode::kReactive;
  ScaleInput in;
  in.gpus_per_node = 8;
  in.ready = 2;
  in.demand_gpus = 10;
  EXPECT_EQ(Decide(p, in).delta, 0) << "by demand alone 10 GPUs fit in 2 nodes";
  in.queue_nodes = QueueNodes(2, {{8, 1}}, 8);
  auto d = Decide(p, in);
  EXPECT_EQ(d.delta, 1);
  EXPECT_EQ(d.reason, "queue");
}

TEST(Autoscaler, ScheduledMinimumHoldsOnWeekdayHours) {
  ScalePolicy p = Policy();
  p.schedule.push_back({.nodes = 6, .from_hour = 8, .to_hour = 18, .weekdays_only = true});
  const double monday = 4 * 86400;  // 1970-01-05 was a Monday
  EXPECT_EQ(p.MinimumAt(monday + 9 * 3600), 6);
  EXPECT_EQ(p.MinimumAt(monday + 19 * 3600), 2);
  EXPECT_EQ(p.MinimumAt(monday + 5 * 86400 + 9 * 3600), 2) << "Saturday";
  ScaleInput in;
  in.now_s = monday + 9 * 3600;
  in.ready = 2;
  auto d = Decide(p, in);
  EXPECT_EQ(d.delta, 3);
  EXPECT_EQ(d.reason, "schedule");
}

// A daily pattern (5-minute steps) with noise: after a week of learning, the forecast one hour
// ahead is within 10% MAPE; a flat series is forecast exactly.
TEST(Forecaster, LearnsADailySeasonWithinTenPercent) {
  Forecaster f(300, 12);
  std::mt19937 rng(3);
  std::normal_distribution<double> noise(0, 2);
  auto demand = [&](int step) {
    double hour = (step % 288) / 12.0;
    return 100 + 60 * std::sin((hour - 8) / 24 * 2 * M_PI) + noise(rng);
  };
  for (int s = 0; s < 288 * 7; ++s) f.Observe(demand(s));
  Forecaster g(300, 12);  // scored from day 8 on only
  for (int s = 0; s < 288 * 7; ++s) g.Observe(demand(s));
  auto before = g.stats();
  for (int s = 288 * 7; s < 288 * 10; ++s) g.Observe(demand(s));
  auto after = g.stats();
  double mape = (after.mape * after.scored - before.mape * before.scored) /
                static_cast<double>(after.scored - before.scored);
  EXPECT_LT(mape, 0.10) << "model " << after.model;
  std::printf("days 8-10: MAPE %.4f, model %s\n", mape, after.model.c_str());
  EXPECT_NE(after.model, "last") << "a seasonal model should win on a seasonal series";
  // The peak over the next hour at the trough's end foresees the morning rise.
  EXPECT_GT(f.Peak(12), f.Forecast(1) - 1e-9);
  Forecaster flat(300, 3);
  for (int s = 0; s < 100; ++s) flat.Observe(50);
  EXPECT_DOUBLE_EQ(flat.Forecast(3), 50);
  EXPECT_NEAR(flat.stats().mape, 0, 1e-12);
}

// The margin's unit: the recent mean shortfall counts only forecasts that came out too low.
// By hand, the last-value model one step ahead on 10, 20, 10, 20: three forecasts are scored,
// 10 for 20 (short by 10), 20 for 10 (too high: short by 0), 10 for 20 (short by 10). The
// exponentially weighted means (weight 0.02, the first one taken as it is) are
// shortfall 10, 0.98 x 10 = 9.8, 0.98 x 9.8 + 0.02 x 10 = 9.804, and absolute error 10.
TEST(Forecaster, ShortfallCountsOnlyForecastsThatCameOutTooLow) {
  Forecaster f(300, 1);
  for (double v : {10.0, 20.0, 10.0, 20.0}) f.Observe(v);
  EXPECT_EQ(f.stats().scored, 3u);
  EXPECT_NEAR(f.shortfall(), 9.804, 1e-9);
  EXPECT_NEAR(f.error(), 10, 1e-9);
  EXPECT_NEAR(f.stats().shortfall, 9.804, 1e-9);
  // Demand that only falls is always over-forecast: no shortfall, so no margin, however large
  // the error.
  Forecaster falling(300, 2);
  for (int s = 0; s < 50; ++s) falling.Observe(500 - 5 * s);
  EXPECT_NEAR(falling.error(), 10, 1e-9);
  EXPECT_DOUBLE_EQ(falling.shortfall(), 0);
}

// What a decision plans for: the forecast's peak over the lead time and one interval, plus the
// policy's forecast_margin times the forecast's recent mean shortfall.
TEST(DemandTracker, PlansForThePeakPlusTheMarginInShortfalls) {
  DemandTracker t(300, 540, 60);  // 600 s ahead: 2 steps
  EXPECT_EQ(t.horizon(), 2);
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> demand(10, 30);
  for (int m = 0; m < 1000; ++m) t.Observe(m * 60.0, demand(rng));  // a decision a minute
  double shortfall = t.forecaster().shortfall();
  EXPECT_GT(shortfall, 1) << "noise is not forecast exactly";
  EXPECT_LT(shortfall, t.forecaster().error()) << "over-forecasts count in the error only";
  EXPECT_DOUBLE_EQ(t.PlanningPeak(0), t.forecaster().Peak(2));
  EXPECT_DOUBLE_EQ(t.PlanningPeak(1.5), t.forecaster().Peak(2) + 1.5 * shortfall);
  EXPECT_GE(t.PlanningPeak(0), 10);
  EXPECT_LE(t.PlanningPeak(0), 30);
}

// A hand-computed case: one 8-GPU node from the start, lead time 100 s, reactive, share 1.
//   t=0   job A (8 GPUs, 300 s) starts at once on the node        wait 0
//   t=10  job B (8 GPUs, 100 s) queues; the tick at t=60 asks for a node, ready at t=160
//   t=160 B starts                                                 wait 150
//   t=20  job C (4 GPUs, 50 s) queues behind B; at t=160 no room (B took the new node);
//         B ends at t=260 and C takes its node                    wait 240
//   A ends at 300, C at 310: the replay ends there.
TEST(Replay, SmallTraceGivesTheHandComputedWaits) {
  auto trace = ParseTrace("submit_time,duration_s,gpus\n0,300,8\n10,100,8\n20,50,4\n", "t.csv");
  ASSERT_TRUE(trace.ok()) << trace.error().message;
  ReplayOptions o;
  o.gpus_per_node = 8;
  o.policy.mode = ScaleMode::kReactive;
  o.policy.min_nodes = 1;
  o.policy.max_nodes = 2;
  o.policy.target_share = 1;
  o.policy.lead_time_s = 100;
  o.policy.interval_s = 60;
  o.policy.idle_before_remove_s = 1e9;  // keep nodes: the waits are the point here
  auto r = Replay(trace.value(), o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->jobs, 3u);
  // Waits 0, 150, 240: p50 is 150, p95 and p99 are 240 (nearest rank).
  EXPECT_DOUBLE_EQ(r->wait_p50_s, 150);
  EXPECT_DOUBLE_EQ(r->wait_p95_s, 240);
  EXPECT_DOUBLE_EQ(r->wait_p99_s, 240);
  EXPECT_EQ(r->jobs_waited_over_lead_time, 2u);
  EXPECT_EQ(r->scale_events, 1u);
  EXPECT_EQ(r->peak_nodes, 2);
  // Busy: A 8x300 + B 8x100 + C 4x50 GPU-seconds. Provisioned: node 1 from 0 to 310 (C ends),
  // node 2 from its request at 60 to 310: 8 x (310 + 250).
  EXPECT_NEAR(r->gpu_hours_busy * 3600, 8 * 300 + 8 * 100 + 4 * 50, 1e-6);
  EXPECT_NEAR(r->gpu_hours_provisioned * 3600, 8 * (310 + 250), 1e-6);
  // Idle, 1080 GPU-seconds: node 2 starting from 60 to 160 (8 x 100); node 1 empty from A's
  // end at 300 to 310 (8 x 10); node 2 half used by C from 260 to 310 (4 x 50). Node 2 is never
  // empty: C takes it the moment B ends.
  EXPECT_NEAR(r->gpu_hours_starting * 3600, 800, 1e-6);
  EXPECT_NEAR(r->gpu_hours_empty * 3600, 80, 1e-6);
  EXPECT_NEAR(r->gpu_hours_fragmented * 3600, 200, 1e-6);
  EXPECT_NEAR(r->gpu_hours_idle * 3600, 1080, 1e-6);
  EXPECT_DOUBLE_EQ(r->span_s, 310);
  EXPECT_TRUE(std::isnan(r->forecast_mape)) << "reactive has no forecast";
}

// A hand case and a property: the least used candidate goes first, its jobs go best fit to busy
// nodes, and over random pools nothing is over-allocated, nothing goes to an empty node or to
// a node being emptied, and a node that takes jobs is not emptied.
// The same end to end through the replay: a fixed pool of 4 nodes kept 90 % busy by 1-GPU
// jobs for 6 hours, and one 16-GPU job at the first hour. Backfill alone started it only after
// the small jobs stopped coming (over 2 hours); with nodes kept for it, no job waits half an
// hour.
TEST(Replay, AWideJobIsNotStarvedByAStreamOfSmallOnes) {
  std::mt19937 rng(1);
  std::exponential_distribution<double> gap(32 * 0.9 / 600), run(1.0 / 600);
  std::vector<TraceJob> trace;
  for (double t = gap(rng); t < 6 * 3600; t += gap(rng)) {
    trace.push_back({t, run(rng), 1, "small", -1});
  }
  trace.push_back({3600, 1800, 16, "big", -1});
  ReplayOptions o;
  o.gpus_per_node = 8;
  o.policy.mode = ScaleMode::kReactive;
  o.policy.min_nodes = o.policy.max_nodes = 4;
  o.policy.consolidate_below = 0;
  o.policy.lead_time_s = 1800;  // "waited over the lead time": over half an hour
  auto r = Replay(trace, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->jobs, trace.size());
  EXPECT_EQ(r->jobs_waited_over_lead_time, 0u);
  EXPECT_GT(r->wait_p99_s, 0) << "the pool is busy enough that small jobs wait too";
}

// A live tune hands the replay the pool's demand from before its window (`--window 1d` of 8
// days' samples: a week of it), so that its forecaster starts as the live one did, knowing
// the day's shape, not from nothing: here a working day's jump from 10 to 70 GPUs at 09:00.
TEST(Replay, DemandBeforeTheTraceWarmsTheForecaster) {
  auto demand = [](double t) {
    double hour = std::fmod(std::fmod(t, 86400) + 86400, 86400) / 3600;
    return hour >= 9 && hour < 17 ? 70.0 : 10.0;
  };
  std::vector<TraceJob> trace;  // a day: 1-GPU jobs of 5 minutes, as many as the shape says
  for (double t = 0; t < 86400; t += 300) {
    for (int i = 0; i < static_cast<int>(demand(t)); ++i) trace.push_back({t, 299, 1, "", -1});
  }
  ReplayOptions o;
  o.gpus_per_node = 8;
  o.policy.mode = ScaleMode::kPredictive;
  o.policy.max_nodes = 50;
  auto cold = Replay(trace, o);
  ASSERT_TRUE(cold.ok()) << cold.error().message;
  for (double t = -3 * 86400; t < 0; t += 60) o.demand_before.emplace_back(t, demand(t));
  o.demand_before.emplace_back(10, 1000);  // at or after the first job: ignored
  auto warm = Replay(trace, o);
  ASSERT_TRUE(warm.ok()) << warm.error().message;
  EXPECT_EQ(warm->jobs, cold->jobs);
  // Measured: cold, model `last`, MAPE 11.0 %, p99 wait 300 s; warm, `daily`, 1.2 %, 0 s.
  EXPECT_LT(warm->forecast_mape, cold->forecast_mape / 2)
      << cold->forecast_model << " " << cold->forecast_mape << " " << warm->forecast_model << " "
      << warm->forecast_mape;
  EXPECT_LT(warm->wait_p99_s, cold->wait_p99_s) << "the jump at 09:00 was seen coming";
}

TEST(Consolidation, EmptiesTheLeastUsedNodesWhoseJobsFitOnOtherBusyNodes) {
  std::vector<NodeLoad> nodes(5);
  nodes[0] = {.free = 6, .running = true, .candidate = true, .jobs = {2}};
  nodes[1] = {.free = 3, .running = true, .candidate = false, .jobs = {}};   // 5 unmovable GPUs
  nodes[2] = {.free = 8, .running = false, .candidate = false, .jobs = {}};  // empty: no target
  nodes[3] = {.free = 4, .running = true, .candidate = true, .jobs = {1, 3}};
  nodes[4] = {.free = 1, .running = true, .candidate = false, .jobs = {}};
  auto plan = PlanConsolidation(nodes, 5);
  // Node 0 (2 GPUs used) first: its job to node 1 (3 free; node 3's 4 free is a worse fit, and
  // node 4's 1 is too few). Then node 3: its 3-GPU job to node 1? only 1 left there; to node 0?
  // being emptied. So it stays.
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].node, 0);
  EXPECT_EQ(plan[0].to, std::vector<int>{1});
  EXPECT_TRUE(PlanConsolidation(nodes, 0).empty());
  // With room on node 4, node 3 empties too: its 3-GPU job to node 4, its 1-GPU job to node 1.
  nodes[4].free = 3;
  plan = PlanConsolidation(nodes, 5);
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[1].node, 3);
  EXPECT_EQ(plan[1].to, (std::vector<int>{1, 4}));
  EXPECT_EQ(PlanConsolidation(nodes, 1).size(), 1u) << "at most max_nodes";
  EXPECT_TRUE(LightlyUsed(4, 8, 0.5));
  EXPECT_FALSE(LightlyUsed(5, 8, 0.5));
  EXPECT_FALSE(LightlyUsed(0, 8, 0.5)) << "an empty node is removed as idle, not consolidated";
  EXPECT_FALSE(LightlyUsed(1, 8, 0)) << "0: never";

  std::mt19937 rng(11);
  for (int round = 0; round < 2000; ++round) {
    const int g = 8;
    std::vector<NodeLoad> pool(1 + rng() % 12);
    for (auto& n : pool) {
      int used = static_cast<int>(rng() % (g + 1));
      n.running = used > 0;
      n.free = g - used;
      n.candidate = n.running && rng() % 2;
      for (int left = used; n.candidate && left > 0;) {
        int j = 1 + static_cast<int>(rng() % static_cast<unsigned>(left));
        n.jobs.push_back(j);
        left -= j;
      }
    }
    int max_nodes = static_cast<int>(rng() % 4);
    auto moves = PlanConsolidation(pool, max_nodes);
    ASSERT_LE(static_cast<int>(moves.size()), max_nodes);
    std::vector<int> free(pool.size());
    std::set<int> emptied, targets;
    for (size_t i = 0; i < pool.size(); ++i) free[i] = pool[i].free;
    for (const auto& m : moves) {
      ASSERT_TRUE(pool[static_cast<size_t>(m.node)].candidate);
      ASSERT_FALSE(targets.count(m.node)) << "a node that took jobs is emptied";
      emptied.insert(m.node);
      ASSERT_EQ(m.to.size(), pool[static_cast<size_t>(m.node)].jobs.size());
      for (size_t k = 0; k < m.to.size(); ++k) {
        auto to = static_cast<size_t>(m.to[k]);
        ASSERT_TRUE(pool[to].running) << "moved to a node running nothing";
        ASSERT_FALSE(emptied.count(m.to[k])) << "moved to a node being emptied";
        free[to] -= pool[static_cast<size_t>(m.node)].jobs[k];
        ASSERT_GE(free[to], 0) << "over-allocated node " << to;
        targets.insert(m.to[k]);
      }
    }
  }
}

// Consolidation in the replay, by hand. One node at first (min 1); J0 (4 GPUs, 100 s) and J1
// (4 GPUs, 1000 s) fill it at 0; J2 (2 GPUs, 1000 s) arrives at 1 and waits for a second node,
// asked for at the tick at 60 (lead time 0): it runs there from 60. J0 ends at 100. From the
// tick at 120 both nodes are lightly used (4 and 2 of 8); at 240 they have been for
// idle_before_remove (120 s), the pool wants 1 node for 6 GPUs, so the less used node 1 is
// emptied: J2 moves to node 0 with 820 s left, plus the 30 s move cost, and ends at 1090.
TEST(Replay, ConsolidationMovesAJobAndRemovesItsNodeByHand) {
  auto trace = ParseTrace("submit_time,duration_s,gpus\n0,100,4\n0,1000,4\n1,1000,2\n", "t.csv");
  ASSERT_TRUE(trace.ok()) << trace.error().message;
  ReplayOptions o;
  o.policy.mode = ScaleMode::kReactive;
  o.policy.min_nodes = 1;
  o.policy.max_nodes = 2;
  o.policy.target_share = 1;
  o.policy.lead_time_s = 0;
  o.policy.interval_s = 60;
  o.policy.idle_before_remove_s = 120;
  o.policy.down_cooldown_s = 0;
  o.move_cost_s = 30;
  auto r = Replay(trace.value(), o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->jobs_moved, 1u);
  EXPECT_EQ(r->nodes_consolidated, 1u);
  EXPECT_DOUBLE_EQ(r->span_s, 1090);
  // Provisioned: node 0 from 0 to 1090, node 1 from 60 to 240. Work: 400 + 4000 + 2000.
  EXPECT_NEAR(r->gpu_hours_provisioned * 3600, 8 * 1090 + 8 * 180, 1e-6);
  EXPECT_NEAR(r->gpu_hours_busy * 3600, 6400, 1e-6);
  EXPECT_NEAR(r->gpu_hours_idle * 3600, 3760, 1e-6);
  EXPECT_NEAR(r->gpu_hours_moving * 3600, 60, 1e-6) << "2 GPUs for the 30 s move cost";
  // Free GPUs of busy nodes: node 0 4 x 140 (100..240), 2 x 760, 6 x 90; node 1 6 x 180.
  EXPECT_NEAR(r->gpu_hours_fragmented * 3600, 560 + 1520 + 540 + 1080, 1e-6);
  EXPECT_NEAR(r->gpu_hours_empty * 3600, 0, 1e-6);

  // Without consolidation node 1 runs J2 to its end at 1060: 8 x 1000 more GPU-seconds.
  o.policy.consolidate_below = 0;
  auto off = Replay(trace.value(), o);
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->jobs_moved, 0u);
  EXPECT_NEAR(off->gpu_hours_idle * 3600, 16480 - 6400, 1e-6);
  // A free move: J2 ends when it would have, once (its first finish event is not counted).
  o.policy.consolidate_below = 0.5;
  o.move_cost_s = 0;
  auto free_move = Replay(trace.value(), o);
  ASSERT_TRUE(free_move.ok());
  EXPECT_EQ(free_move->jobs_moved, 1u);
  EXPECT_DOUBLE_EQ(free_move->span_s, 1060);
  EXPECT_NEAR(free_move->gpu_hours_busy * 3600, 6400, 1e-6);
  EXPECT_NEAR(free_move->gpu_hours_provisioned * 3600, 8 * 1060 + 8 * 180, 1e-6);
  // J2 not movable (the trace's column): node 1 stays, and node 0 goes instead, its J1 moving
  // to node 1 at 240 with 760 s left; it ends at 1030, J2 at 1060.
  o.move_cost_s = 30;
  auto fixed = ParseTrace(
      "submit_time,duration_s,gpus,movable\n0,100,4,true\n0,1000,4,1\n1,1000,2,0\n", "t.csv");
  ASSERT_TRUE(fixed.ok()) << fixed.error().message;
  auto other = Replay(fixed.value(), o);
  EXPECT_EQ(other->jobs_moved, 1u);
  EXPECT_DOUBLE_EQ(other->span_s, 1060);
  EXPECT_NEAR(other->gpu_hours_provisioned * 3600, 8 * 240 + 8 * 1000, 1e-6);
  // No job movable (--movable-share 0): nothing moves.
  o.movable_share = 0;
  EXPECT_EQ(Replay(trace.value(), o)->jobs_moved, 0u);
  EXPECT_EQ(
      ParseTrace("submit_time,duration_s,gpus,movable\n0,1,1,maybe\n", "t.csv").error().message,
      "t.csv:2: movable 'maybe' is not 1, 0, true or false");
  o.movable_share = 2;
  EXPECT_EQ(Replay(trace.value(), o).error().message, "--movable-share must be in [0, 1]");
  o.movable_share = 1;
  o.move_cost_s = -1;
  EXPECT_EQ(Replay(trace.value(), o).error().message, "--move-cost must be 0 or more seconds");
}

// A trace's gpus_per_node column spreads a job as the live allocator does; a value that does
// not divide its GPUs is an error naming the line; one wider than the pool's nodes is left out.
TEST(Replay, TheTracesGpusPerNodeSpreadsAJob) {
  auto trace = ParseTrace(
      "submit_time,duration_s,gpus,gpus_per_node\n0,100,4,\n0,100,12,4\n0,100,16,16\n", "t.csv");
  ASSERT_TRUE(trace.ok()) << trace.error().message;
  EXPECT_EQ((*trace)[0].gpus_per_node, 0);
  EXPECT_EQ((*trace)[1].gpus_per_node, 4);
  ReplayOptions o;
  o.gpus_per_node = 8;
  o.policy.mode = ScaleMode::kReactive;
  o.policy.min_nodes = 2;
  o.policy.max_nodes = 2;
  o.policy.target_share = 1;
  o.policy.idle_before_remove_s = 1e9;
  auto r = Replay(trace.value(), o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  // 16 GPUs per node on 8-GPU nodes, and 3 shares of 4 on a pool of at most 2 nodes: left out.
  EXPECT_EQ(r->unplaceable, 2u);
  EXPECT_EQ(r->jobs, 1u);
  o.policy.max_nodes = 3;
  o.policy.min_nodes = 3;
  r = Replay(trace.value(), o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->jobs, 2u);
  EXPECT_EQ(r->unplaceable, 1u);
  EXPECT_EQ(r->wait_p95_s, 0) << "both start at once: 4 + 4 on one node, 4 on two others";
  EXPECT_NEAR(r->gpu_hours_busy * 3600, 16 * 100, 1e-6);
  EXPECT_EQ(
      ParseTrace("submit_time,duration_s,gpus,gpus_per_node\n0,1,6,4\n", "t.csv").error().message,
      "t.csv:2: gpus_per_node '4' is not a whole number that divides gpus");
}

TEST(Replay, TraceErrorsNameTheLineAndNothingRuns) {
  auto bad = ParseTrace("submit_time,duration_s,gpus\n0,300,8\n10,abc,8\n", "t.csv");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message, "t.csv:3: duration_s 'abc' is not seconds >= 0");
  EXPECT_FALSE(ParseTrace("a,b\n1,2\n", "x.csv").ok());
  EXPECT_EQ(ParseTrace("submit_time,duration_s,gpus\n1,2\n", "x.csv").error().message,
            "x.csv:2: 2 columns, the header has 3");
  auto openb = ParseOpenbTrace(
      "name,num_gpu,gpu_milli,qos,creation_time,deletion_time,scheduled_time\n"
      "p0,1,460,LS,100,700,160\np1,0,0,BE,0,10,0\np2,2,1000,BE,5,,5\n",
      "o.csv");
  ASSERT_TRUE(openb.ok()) << openb.error().message;
  ASSERT_EQ(openb->size(), 1u) << "no GPU, or never deleted: skipped";
  EXPECT_EQ((*openb)[0].gpus, 1);
  EXPECT_DOUBLE_EQ((*openb)[0].duration_s, 540);
  EXPECT_EQ((*openb)[0].team, "LS");
  ReplayOptions o;
  o.policy.target_share = 2;
  EXPECT_EQ(Replay({}, o).error().message, "policy: target_share must be in (0, 1]");
}

// Three days of jobs whose arrivals follow the time of day, from a fixed seed.
std::vector<TraceJob> DailyTrace(unsigned seed) {
  std::mt19937 rng(seed);
  std::exponential_distribution<double> run(1.0 / 3600);
  std::uniform_int_distribution<int> size(0, 3);
  std::vector<TraceJob> out;
  for (double t = 0; t < 3 * 86400;) {
    double rate = 1.0 / 120 * (1.2 + std::sin(2 * M_PI * t / 86400));  // jobs a second
    t += std::exponential_distribution<double>(rate)(rng);
    TraceJob j;
    j.submit_s = t;
    j.duration_s = 60 + run(rng);
    j.gpus = 1 << size(rng);
    out.push_back(j);
  }
  return out;
}

// Every setting of the grid is replayed as it is (the same figures as a replay of it alone);
// the one chosen is the cheapest within the objective; threads change nothing.
TEST(Tune, ChoosesTheCheapestSettingWithinTheObjective) {
  auto trace = DailyTrace(7);
  TuneOptions o;
  o.replay.policy.mode = ScaleMode::kPredictive;
  o.replay.policy.max_nodes = 200;
  o.replay.policy.target_share = 0.8;
  o.replay.policy.forecast_margin = 4;
  o.wait_p95_s = 30;
  o.shares = {0.7, 0.85, 1.0};
  o.margins = {0.5, 2, 6};
  o.threads = 3;
  auto t = Tune(trace, o);
  ASSERT_TRUE(t.ok()) << t.error().message;
  ASSERT_EQ(t->grid.size(), 9u);
  EXPECT_EQ(t->grid[1].target_share, 0.7);
  EXPECT_EQ(t->grid[1].forecast_margin, 2);
  auto alone = [&](double share, double margin) {
    ReplayOptions ro = o.replay;
    ro.policy.target_share = share;
    ro.policy.forecast_margin = margin;
    auto r = Replay(trace, ro);
    EXPECT_TRUE(r.ok());
    return r.value();
  };
  auto cur = alone(0.8, 4);
  EXPECT_DOUBLE_EQ(t->current.result.gpu_hours_idle, cur.gpu_hours_idle);
  EXPECT_DOUBLE_EQ(t->current.result.wait_p95_s, cur.wait_p95_s);
  int within = 0;
  for (const auto& c : t->grid) {
    auto r = alone(c.target_share, c.forecast_margin);
    EXPECT_DOUBLE_EQ(c.result.gpu_hours_idle, r.gpu_hours_idle);
    EXPECT_DOUBLE_EQ(c.result.wait_p95_s, r.wait_p95_s);
    EXPECT_EQ(c.meets, r.wait_p95_s <= 30);
    within += c.meets;
  }
  // The grid spans both sides of the objective, or the choice would prove nothing.
  ASSERT_GT(within, 0);
  ASSERT_LT(within, 9);
  ASSERT_GE(t->chosen, 0);
  EXPECT_EQ(t->closest, -1);
  const auto& best = t->grid[static_cast<size_t>(t->chosen)];
  EXPECT_TRUE(best.meets);
  for (const auto& c : t->grid) {
    if (c.meets) EXPECT_GE(c.result.gpu_hours_idle, best.result.gpu_hours_idle);
  }
  // A share of 1 with the smallest margin is the cheapest setting of all, and over the objective.
  EXPECT_FALSE(t->grid[6].meets);
  EXPECT_LT(t->grid[6].result.gpu_hours_idle, best.result.gpu_hours_idle);

  o.threads = 1;
  auto one = Tune(trace, o);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->chosen, t->chosen);
  for (size_t i = 0; i < t->grid.size(); ++i) {
    EXPECT_DOUBLE_EQ(one->grid[i].result.gpu_hours_idle, t->grid[i].result.gpu_hours_idle);
  }

  // JSON: the chosen setting and its saving against the current one.
  auto text = TuneJson(t.value(), o.replay.policy.mode, 30);
  EXPECT_NE(text.find("\"objective\":{\"wait_p95_s\":3E1}"), std::string::npos) << text;
  EXPECT_NE(text.find("\"chosen\":{\"target_share\":"), std::string::npos) << text;
  EXPECT_NE(text.find("\"closest\":null"), std::string::npos) << text;
}

// Out of reach: every job of a burst waits for its node, whatever the share. No setting is
// chosen; the lowest p95 is named instead. Bad grid values are refused.
TEST(Tune, NoSettingWithinTheObjectiveNamesTheLowestP95) {
  std::vector<TraceJob> trace;
  for (int burst = 0; burst < 5; ++burst) {
    for (int i = 0; i < 10; ++i) trace.push_back({burst * 20000.0 + i, 600, 8, "", -1});
  }
  TuneOptions o;
  o.replay.policy.mode = ScaleMode::kReactive;
  o.replay.policy.lead_time_s = 300;
  o.wait_p95_s = 10;
  auto t = Tune(trace, o);
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(t->grid.size(), 9u) << "shares 0.6 to 1.0; reactive has no margins";
  EXPECT_EQ(t->chosen, -1);
  ASSERT_GE(t->closest, 0);
  for (const auto& c : t->grid) {
    EXPECT_FALSE(c.meets);
    EXPECT_GE(c.result.wait_p95_s, 300);
    EXPECT_GE(c.result.wait_p95_s, t->grid[static_cast<size_t>(t->closest)].result.wait_p95_s);
  }
  EXPECT_NE(TuneJson(t.value(), ScaleMode::kReactive, 10).find("\"chosen\":null"),
            std::string::npos);

  o.shares = {0.5, 1.5};
  EXPECT_EQ(Tune(trace, o).error().message, "target share 1.5 is not in (0, 1]");
  o.shares = {};
  o.wait_p95_s = -1;
  EXPECT_FALSE(Tune(trace, o).ok());

  // Cancelled (a controller stopping): the replays stop, and the tune fails.
  o.wait_p95_s = 10;
  std::atomic<bool> cancel{true};
  o.replay.cancel = &cancel;
  auto cancelled = Tune(trace, o);
  ASSERT_FALSE(cancelled.ok());
  EXPECT_EQ(cancelled.error().code, ErrorCode::kUnavailable);
  std::vector<TraceJob> long_trace;  // long enough for the replay to look at the flag
  for (int i = 0; i < 5000; ++i) long_trace.push_back({i * 60.0, 600, 1, "", -1});
  EXPECT_EQ(Replay(long_trace, o.replay).error().code, ErrorCode::kUnavailable);
  cancel = false;
  EXPECT_TRUE(Replay(long_trace, o.replay).ok());
}

}  // namespace
}  // namespace gpufleet::sched
