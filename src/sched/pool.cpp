#include "sched/pool.h"

#include <algorithm>

namespace gpufleet::sched {

int Pool::AddNode(double now, double ready_at) {
  PoolNode n;
  n.state = NodeState::kProvisioning;
  n.ready_at_s = ready_at;
  n.added_s = now;
  ++provisioning_;
  // A removed node's slot is reused, so that a long run of scaling keeps the scan short.
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].state == NodeState::kRemoved) {
      nodes_[i] = n;
      return static_cast<int>(i);
    }
  }
  nodes_.push_back(n);
  return static_cast<int>(nodes_.size() - 1);
}

void Pool::MarkReady(int node, double now) {
  PoolNode& n = nodes_[node];
  if (n.state != NodeState::kProvisioning) return;
  n.state = NodeState::kReady;
  n.free = gpus_per_node_;
  n.idle_since_s = now;
  --provisioning_;
  ++ready_;
  free_ += gpus_per_node_;
  ++whole_free_;
}

void Pool::MarkUnavailable(int node) {
  PoolNode& n = nodes_[node];
  if (n.state == NodeState::kProvisioning) --provisioning_;
  if (n.state == NodeState::kReady) {
    --ready_;
    free_ -= n.free;
    if (n.free == gpus_per_node_) --whole_free_;
  }
  n.state = NodeState::kUnavailable;
  n.free = 0;
}

bool Pool::Remove(int node) {
  PoolNode& n = nodes_[node];
  if (n.jobs > 0) return false;
  if (n.state == NodeState::kReady) {
    --ready_;
    free_ -= n.free;
    --whole_free_;
  } else if (n.state == NodeState::kProvisioning) {
    --provisioning_;
  }
  n.state = NodeState::kRemoved;
  n.free = 0;
  return true;
}

bool Pool::Take(int node, int gpus, double until_s) {
  PoolNode& n = nodes_[node];
  if (n.state != NodeState::kReady || gpus < 0 || n.free < gpus) return false;
  n.busy_until_s = std::max(n.busy_until_s, until_s);
  if (n.free == gpus_per_node_ && gpus > 0) --whole_free_;
  n.free -= gpus;
  ++n.jobs;
  free_ -= gpus;
  return true;
}

namespace {

// A job spread over several nodes, fewer than all GPUs of each.
bool Spread(const Job& job, int g) {
  return job.gpus_per_node > 0 && job.gpus_per_node < g && job.gpus_per_node < job.gpus;
}

}  // namespace

int Pool::PerNode(const Job& job) const {
  const int g = gpus_per_node_;
  if (Spread(job, g)) return job.gpus_per_node;
  return job.gpus <= g ? job.gpus : g;
}

int Pool::NodesFor(const Job& job) const {
  const int per = std::max(1, PerNode(job));
  return (job.gpus + per - 1) / per;
}

bool Pool::Open(const PoolNode& n, const Job& job, double now) const {
  return !n.reserved || (job.duration_s > 0 && now + job.duration_s <= backfill_until_s_);
}

bool Pool::Place(Job& job, double now) {
  const int g = gpus_per_node_;
  if (job.gpus <= 0 || job.gpus > free_) return false;
  if (Spread(job, g)) {
    const int k = job.gpus_per_node;
    const size_t m = static_cast<size_t>(NodesFor(job));
    std::vector<int> fit;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (nodes_[i].state == NodeState::kReady && Open(nodes_[i], job, now) &&
          nodes_[i].free >= k) {
        fit.push_back(static_cast<int>(i));
      }
    }
    if (fit.size() < m) return false;
    // The m nodes with the fewest free GPUs that fit (then the lowest index).
    std::partial_sort(
        fit.begin(), fit.begin() + static_cast<std::ptrdiff_t>(m), fit.end(), [&](int a, int b) {
          return nodes_[a].free != nodes_[b].free ? nodes_[a].free < nodes_[b].free : a < b;
        });
    job.nodes.assign(fit.begin(), fit.begin() + static_cast<std::ptrdiff_t>(m));
    for (int i : job.nodes) {
      PoolNode& n = nodes_[i];
      if (n.free == g) --whole_free_;
      n.free -= k;
      ++n.jobs;
    }
    free_ -= k * static_cast<int>(m);
    return true;
  }
  if (job.gpus <= g) {
    int best = -1;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      const PoolNode& n = nodes_[i];
      if (n.state != NodeState::kReady || !Open(n, job, now) || n.free < job.gpus) continue;
      if (best < 0 || n.free < nodes_[best].free) {
        best = static_cast<int>(i);
        if (n.free == job.gpus) break;  // an exact fit is as good as it gets
      }
    }
    if (best < 0) return false;
    PoolNode& n = nodes_[best];
    if (n.free == g) --whole_free_;
    n.free -= job.gpus;
    ++n.jobs;
    free_ -= job.gpus;
    job.nodes = {best};
    return true;
  }
  int need = (job.gpus + g - 1) / g;
  if (need > whole_free_) return false;
  std::vector<int> whole;
  for (size_t i = 0; i < nodes_.size() && static_cast<int>(whole.size()) < need; ++i) {
    const PoolNode& n = nodes_[i];
    if (n.state == NodeState::kReady && Open(n, job, now) && n.free == g) {
      whole.push_back(static_cast<int>(i));
    }
  }
  if (static_cast<int>(whole.size()) < need) return false;  // some of them are reserved
  job.nodes = std::move(whole);
  for (int i : job.nodes) {
    nodes_[i].free = 0;
    ++nodes_[i].jobs;
  }
  free_ -= need * g;
  whole_free_ -= need;
  return true;
}

void Pool::ExpectEnd(const Job& job, double until_s) {
  for (int i : job.nodes) nodes_[i].busy_until_s = std::max(nodes_[i].busy_until_s, until_s);
}

bool Pool::CanHold(const Job& job) const { return ready_ + provisioning_ >= NodesFor(job); }

std::vector<int> Pool::Reserve(const Job& job) {
  backfill_until_s_ = -1;
  if (!CanHold(job)) return {};
  std::vector<int> ready;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].state == NodeState::kReady && !nodes_[i].reserved) {
      ready.push_back(static_cast<int>(i));
    }
  }
  size_t m = std::min(ready.size(), static_cast<size_t>(NodesFor(job)));
  std::partial_sort(ready.begin(), ready.begin() + static_cast<std::ptrdiff_t>(m), ready.end(),
                    [&](int a, int b) {
                      const PoolNode &x = nodes_[a], &y = nodes_[b];
                      if (x.busy_until_s != y.busy_until_s) return x.busy_until_s < y.busy_until_s;
                      return x.free != y.free ? x.free > y.free : a < b;
                    });
  ready.resize(m);
  if (PerNode(job) == gpus_per_node_) {
    double until = 0;
    for (int i : ready) until = std::max(until, nodes_[i].busy_until_s);
    // Too few ready nodes: it also waits for nodes being provisioned.
    if (const size_t short_by = static_cast<size_t>(NodesFor(job)) - m; short_by > 0) {
      std::vector<double> coming;
      for (const auto& n : nodes_) {
        if (n.state == NodeState::kProvisioning) coming.push_back(n.ready_at_s);
      }
      auto nth = coming.begin() + static_cast<std::ptrdiff_t>(short_by - 1);  // CanHold
      std::nth_element(coming.begin(), nth, coming.end());
      until = std::max(until, *nth);
    }
    if (until < kNoEnd) backfill_until_s_ = until;
  }
  for (int i : ready) nodes_[i].reserved = true;
  return ready;
}

void Pool::ClearReservations() {
  for (auto& n : nodes_) n.reserved = false;
  backfill_until_s_ = -1;
}

void Pool::Release(const Job& job, double now) {
  const int g = gpus_per_node_;
  const int per_node = PerNode(job);
  for (int i : job.nodes) {
    PoolNode& n = nodes_[i];
    --n.jobs;
    if (n.jobs == 0) {
      n.idle_since_s = now;
      n.busy_until_s = 0;
    }
    if (n.state != NodeState::kReady) continue;  // failed meanwhile: its GPUs stay out
    n.free += per_node;
    free_ += per_node;
    if (n.free == g) ++whole_free_;
  }
}

std::vector<int> Pool::IdleNodes(double idle_since_at_most, size_t at_most) const {
  std::vector<int> out;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (Idle(nodes_[i], idle_since_at_most)) out.push_back(static_cast<int>(i));
  }
  auto longest_idle = [&](int a, int b) {
    double sa = nodes_[a].idle_since_s, sb = nodes_[b].idle_since_s;
    return sa < sb || (sa == sb && a < b);
  };
  // Scale-down asks for a few of what can be thousands of idle nodes in a replay's fixed pool:
  // sorting only those it takes keeps a decision linear in the pool's size.
  if (at_most < out.size()) {
    std::partial_sort(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(at_most), out.end(),
                      longest_idle);
    out.resize(at_most);
  } else {
    std::sort(out.begin(), out.end(), longest_idle);
  }
  return out;
}

int Pool::IdleNodeCount(double idle_since_at_most) const {
  int n = 0;
  for (const PoolNode& node : nodes_) n += Idle(node, idle_since_at_most) ? 1 : 0;
  return n;
}

int64_t Queue::queued_gpus() const {
  int64_t n = 0;
  for (const Job* j : jobs_) n += j->gpus;
  return n;
}

int64_t& Queue::TeamGpus(const std::string& team) {
  for (auto& [name, gpus] : team_gpus_) {
    if (name == team) return gpus;
  }
  team_gpus_.emplace_back(team, 0);
  return team_gpus_.back().second;
}

std::vector<Job*> Queue::Schedule(Pool& pool, double now) {
  std::vector<Job*> started;
  if (!jobs_.empty() && pool.free_gpus() == 0) return started;  // a reservation stands
  if (!reserved_nodes_.empty()) pool.ClearReservations();       // made again below, if due
  reserved_for_ = nullptr;
  reserved_nodes_.clear();
  if (jobs_.empty()) return started;
  // The order of the first kWindow jobs: the rest wait their turn (a bounded scan keeps one
  // pass cheap with a deep queue).
  constexpr size_t kWindow = 512;
  size_t n = std::min(jobs_.size(), kWindow);
  std::vector<Job*> order(jobs_.begin(), jobs_.begin() + static_cast<long>(n));
  if (team_gpus_.size() > 1 || order.size() > 1) {
    std::stable_sort(order.begin(), order.end(), [&](Job* a, Job* b) {
      if (a->priority != b->priority) return a->priority > b->priority;
      int64_t ta = TeamGpus(a->team), tb = TeamGpus(b->team);
      if (ta != tb) return ta < tb;
      return a->submit_s < b->submit_s;
    });
  }
  for (Job* j : order) {
    if (pool.free_gpus() == 0) break;
    if (!pool.Place(*j, now)) {
      if (!reserved_for_ && now - j->submit_s >= reserve_after_s_ && pool.CanHold(*j)) {
        reserved_nodes_ = pool.Reserve(*j);
        reserved_for_ = j;
      }
      continue;
    }
    j->start_s = now;
    pool.ExpectEnd(*j, j->duration_s > 0 ? now + j->duration_s : Pool::kNoEnd);
    TeamGpus(j->team) += j->gpus;
    started.push_back(j);
  }
  if (!started.empty()) {
    std::erase_if(jobs_, [](const Job* j) { return j->start_s >= 0; });
  }
  return started;
}

void Queue::OnFinished(const Job& job) { TeamGpus(job.team) -= job.gpus; }

bool Queue::Remove(int64_t id) {
  auto it = std::find_if(jobs_.begin(), jobs_.end(), [&](const Job* j) { return j->id == id; });
  if (it == jobs_.end()) return false;
  if (*it == reserved_for_) reserved_for_ = nullptr;  // its nodes are freed at the next pass
  jobs_.erase(it);
  return true;
}

}  // namespace gpufleet::sched
