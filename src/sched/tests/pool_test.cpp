#include "sched/pool.h"

#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <random>
#include <set>

#include "sched/autoscaler.h"

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

// Scale-down's candidates: ready nodes idle long enough, longest idle first, ties by index; a
// bound sorts only the first few, and the count agrees with the unbounded list.
TEST(Allocator, IdleNodesLongestIdleFirstAndBounded) {
  Pool pool(8);
  std::vector<double> ready_at = {300, 100, 200, 100, 500, 50};
  for (double t : ready_at) pool.MarkReady(pool.AddNode(0, t), t);
  Job busy{.id = 1, .gpus = 1};
  ASSERT_TRUE(pool.Place(busy, 600));  // best fit on a tie of empty nodes: the lowest index, 0
  ASSERT_EQ(busy.nodes, std::vector<int>{0});
  pool.MarkUnavailable(2);
  EXPECT_EQ(pool.IdleNodes(400), (std::vector<int>{5, 1, 3}));
  EXPECT_EQ(pool.IdleNodeCount(400), 3);
  EXPECT_EQ(pool.IdleNodes(400, 2), (std::vector<int>{5, 1}));
  EXPECT_EQ(pool.IdleNodes(1000, 0), std::vector<int>{});
  EXPECT_EQ(pool.IdleNodes(1000), (std::vector<int>{5, 1, 3, 4}));
  EXPECT_EQ(pool.IdleNodeCount(1000), 4);
  EXPECT_EQ(pool.IdleNodes(1000, 10), pool.IdleNodes(1000));
  EXPECT_EQ(pool.IdleNodeCount(40), 0);
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
// as they keep coming. Once it has waited Queue::kDefaultReserveAfterS, the nodes with the most
// free GPUs are kept for it: jobs behind it in the order go elsewhere or wait, jobs ahead of it do
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
  started = q.Schedule(pool, Queue::kDefaultReserveAfterS);
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

// A job larger than the pool's ready and provisioning nodes could ever give gets no nodes kept,
// however long it waits: keeping them would stop every job behind it until the pool grew. The
// next job in the order that the pool can hold gets them instead; once enough nodes are being
// provisioned, the large job does.
TEST(Queue, AJobThePoolCannotHoldKeepsNoNodes) {
  Pool pool(8);
  for (int i = 0; i < 2; ++i) pool.MarkReady(pool.AddNode(0, 0), 0);
  ASSERT_TRUE(pool.Take(0, 4));
  ASSERT_TRUE(pool.Take(1, 4));
  Queue q;
  Job huge{.id = 1, .team = "a", .gpus = 24, .submit_s = 0};  // 3 nodes; the pool has 2
  Job whole{.id = 2, .team = "b", .gpus = 8, .submit_s = 10};
  q.Push(&huge);
  q.Push(&whole);
  EXPECT_FALSE(pool.CanHold(huge));
  EXPECT_TRUE(pool.CanHold(whole));
  EXPECT_TRUE(pool.Reserve(huge).empty());
  EXPECT_EQ(q.Schedule(pool, 3600).size(), 0u);
  ASSERT_EQ(q.reserved_for(), &whole) << "the next job the pool can hold";
  EXPECT_EQ(q.reserved_nodes().size(), 1u);

  // Small jobs still start on the node not kept.
  Job small{.id = 3, .team = "c", .gpus = 2, .submit_s = 3600};
  q.Push(&small);
  auto started = q.Schedule(pool, 3601);
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0]->id, 3);

  // A node on its way: now 3 nodes could hold the large job, and it is first in the order.
  pool.AddNode(3700, 4200);
  EXPECT_TRUE(pool.CanHold(huge));
  EXPECT_EQ(q.Schedule(pool, 3700).size(), 0u);
  EXPECT_EQ(q.reserved_for(), &huge);
  EXPECT_EQ(q.reserved_nodes().size(), 2u);
}

// How long a job waits before nodes are kept for it is the queue's: 0 keeps them at once, as
// Slurm's backfill reserves for the first job in its order.
TEST(Queue, TheWaitBeforeNodesAreKeptIsTheQueues) {
  for (double after : {0.0, 1800.0}) {
    Pool pool(8);
    for (int i = 0; i < 2; ++i) pool.MarkReady(pool.AddNode(0, 0), 0);
    ASSERT_TRUE(pool.Take(0, 4));
    ASSERT_TRUE(pool.Take(1, 4));
    Queue q(after);
    Job wide{.id = 1, .team = "a", .gpus = 16, .submit_s = 0};
    q.Push(&wide);
    q.Schedule(pool, 0);
    EXPECT_EQ(q.reserved_for() != nullptr, after == 0) << after;
    q.Schedule(pool, 1799);
    EXPECT_EQ(q.reserved_for() != nullptr, after == 0) << after;
    q.Schedule(pool, 1800);
    EXPECT_EQ(q.reserved_for(), &wide) << after;
  }
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
  auto started = q.Schedule(pool, Queue::kDefaultReserveAfterS);
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

}  // namespace
}  // namespace gpufleet::sched
