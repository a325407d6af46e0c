// Counting the plain DP (docs/search.md, "Counting the plain DP"): the
// states, transitions and pruning cuts that run_dp (hsdp.cpp) reports with
// branch and bound off, without labels and without costing any stage
// (SearchOptions::count_only). Internal to the engine, like stage_memo.h:
// run_dp hands its arguments to count_dp when counting, so the stage
// mixes, windows, thresholds and configurations are the search's own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/search.h"
#include "engine/stage_memo.h"

namespace hapmoe::hsdp {

// Layer windows per (stage position, type): [lo, hi] (pruning 1, or the
// whole range without it; hsdp.cpp builds them).
struct Windows {
  std::vector<int> lo;
  std::vector<int> hi;
  int types = 0;
  int lo_at(int i, int h) const { return lo[static_cast<std::size_t>(i * types + h)]; }
  int hi_at(int i, int h) const { return hi[static_cast<std::size_t>(i * types + h)]; }
};

// What run_dp(ev, limit, exact_mix, win, opt, comp_threshold, ...) adds to
// out.stats with opt.bound off: states, transitions, pruned_load_balance,
// pruned_memory, pruned_hetero_comm and hetero_comm_ratio, exactly; no
// plan, no label, `feasible` untouched. A state's front is never empty
// once a move reaches it (a merge keeps at least one label), so without
// the bound the states are those the moves reach, whatever the labels:
// the count runs the DP on sets of layer counts j per (usage u, previous
// type), a bitset each. Memory: a stage fits with at most
// max_fitting(h, i, j) layers (the stage memo's own verdict, found by
// bisection; fitting is monotone in the layer count,
// Count.FittingIsMonotoneInTheLayerCount). Asks `cancel` between levels.
// Test hooks (tests/engine/test_count.cpp), written only while no search
// runs: runs of more (u code, previous type) keys than count_flat_keys
// index their groups with a map instead of a flat table; with
// count_state_by_state every group is counted one state at a time, as
// when a stage's fit depends on its first layer. With either changed,
// nothing is looked up in or added to the thread's counted shapes.
inline constexpr std::uint64_t kCountFlatKeys = std::uint64_t{1} << 22;
inline std::uint64_t count_flat_keys = kCountFlatKeys;
inline bool count_state_by_state = false;

void count_dp(Evaluator& ev, const std::vector<int>& limit, bool exact_mix, const Windows& win,
              const SearchOptions& opt, double comp_threshold, const CancelCheck* cancel,
              ConfigOutcome& out);

}  // namespace hapmoe::hsdp
