// Splitting work over workers by estimated cost (longest processing time
// first): items in decreasing work, each to the least-loaded worker. A pure
// function, so every MPI rank computes the same split without talking.
#pragma once

#include <span>
#include <vector>

namespace hapmoe {

struct Shard {
  std::vector<int> owner;    // per item: the worker it goes to
  std::vector<double> load;  // per worker: the work it received
  // Largest load over the mean load (1 = perfect; 1 when there is no work).
  double imbalance() const;
};

// LPT split of `work` (non-negative, one entry per item) over `workers`
// (>= 1) workers. Ties go to the lower item index and the lower worker, so
// the split depends only on its arguments.
Shard lpt_split(std::span<const double> work, int workers);

}  // namespace hapmoe
