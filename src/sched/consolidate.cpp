#include "sched/consolidate.h"

#include <algorithm>
#include <numeric>

namespace gpufleet::sched {

std::vector<NodeMoves> PlanConsolidation(const std::vector<NodeLoad>& nodes, int max_nodes) {
  std::vector<NodeMoves> plan;
  if (max_nodes <= 0) return plan;
  std::vector<int> order;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].candidate && !nodes[i].jobs.empty()) order.push_back(static_cast<int>(i));
  }
  auto used = [&](int i) {
    const auto& j = nodes[static_cast<size_t>(i)].jobs;
    return std::accumulate(j.begin(), j.end(), 0);
  };
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return used(a) < used(b); });
  std::vector<int> free(nodes.size());
  std::vector<char> takes(nodes.size()), emptied(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    takes[i] = nodes[i].running;
    free[i] = nodes[i].running ? nodes[i].free : 0;
  }
  for (int c : order) {
    if (static_cast<int>(plan.size()) >= max_nodes) break;
    const auto ci = static_cast<size_t>(c);
    if (free[ci] != nodes[ci].free) continue;  // it has taken moved jobs: it stays
    // Largest jobs first: they are the hardest to fit.
    std::vector<size_t> jobs(nodes[ci].jobs.size());
    std::iota(jobs.begin(), jobs.end(), size_t{0});
    std::stable_sort(jobs.begin(), jobs.end(),
                     [&](size_t a, size_t b) { return nodes[ci].jobs[a] > nodes[ci].jobs[b]; });
    std::vector<int> trial = free;
    NodeMoves m{c, std::vector<int>(jobs.size(), -1)};
    bool fits = true;
    for (size_t k : jobs) {
      int g = nodes[ci].jobs[k], best = -1;
      for (size_t i = 0; i < nodes.size(); ++i) {
        if (i == ci || !takes[i] || emptied[i] || trial[i] < g) continue;
        if (best < 0 || trial[i] < trial[static_cast<size_t>(best)]) best = static_cast<int>(i);
      }
      if (best < 0) {
        fits = false;
        break;
      }
      trial[static_cast<size_t>(best)] -= g;
      m.to[k] = best;
    }
    if (!fits) continue;
    free = std::move(trial);
    emptied[ci] = 1;
    free[ci] = 0;
    plan.push_back(std::move(m));
  }
  return plan;
}

}  // namespace gpufleet::sched
