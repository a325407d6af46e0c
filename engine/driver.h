// The search over the whole configuration space: enumerate Pi, build the
// profile tables once, run the HS-DP kernel (or brute force) on every pi,
// keep the top K by (latency, canonical plan key).
#pragma once

#include <vector>

#include "costmodel/cluster.h"
#include "costmodel/model.h"
#include "costmodel/profile.h"
#include "engine/search.h"

namespace hapmoe {

struct SearchResult {
  std::vector<PlanCandidate> top;  // best first, at most top_k, one per pi
  SearchStats stats;
  Shortfall closest;  // when nothing fits
  std::vector<ParallelConfig> configs;
  std::vector<ConfigOutcome> outcomes;  // per config, same order
};

// Profile tables with a compute entry for every (TP, CP) in `configs`.
ProfileTables tables_for(const Workload& workload, const ClusterSpec& cluster,
                         const std::vector<ParallelConfig>& configs);

// Brute force refuses spaces larger than this many plans.
inline constexpr double kBruteForceLimit = 2e7;

// Throws InputError("--bruteforce", ...) when brute force would exceed
// kBruteForceLimit plans.
SearchResult run_search(const Workload& workload, const ClusterSpec& cluster,
                        const SearchOptions& options, bool bruteforce = false);

}  // namespace hapmoe
