#include "partition/shard.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <queue>
#include <utility>

#include "costmodel/errors.h"

namespace hapmoe {

double Shard::imbalance() const {
  if (load.empty()) return 1.0;
  const double total = std::accumulate(load.begin(), load.end(), 0.0);
  if (total <= 0.0) return 1.0;
  return *std::max_element(load.begin(), load.end()) / (total / static_cast<double>(load.size()));
}

Shard lpt_split(std::span<const double> work, int workers) {
  HAPMOE_REQUIRE(workers >= 1, "lpt_split: at least one worker");
  Shard s;
  s.owner.assign(work.size(), 0);
  s.load.assign(static_cast<std::size_t>(workers), 0.0);
  std::vector<std::size_t> order(work.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return work[a] > work[b]; });
  // Min-heap of (load, worker): the least-loaded worker, lowest index first.
  using Entry = std::pair<double, int>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap;
  for (int w = 0; w < workers; ++w) heap.emplace(0.0, w);
  for (const std::size_t item : order) {
    auto [load, w] = heap.top();
    heap.pop();
    HAPMOE_REQUIRE(work[item] >= 0.0, "lpt_split: negative work");
    s.owner[item] = w;
    load += work[item];
    s.load[static_cast<std::size_t>(w)] = load;
    heap.emplace(load, w);
  }
  return s;
}

}  // namespace hapmoe
