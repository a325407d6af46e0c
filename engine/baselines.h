// Baselines for comparison (issue 6, docs/baselines.md), all scored by the
// same cost model as hapmoe's own search, so plans compare line by line:
//   uniform           hapmoe's search with layers split evenly over stages
//                     (the paper's "disable non-uniform PP/DP" ablation);
//   mi                what a practitioner configures by hand in Megatron-LM:
//                     a fixed rule, not a search (mi_plan);
//   hetermoe-style    MI's configuration with MoE-layer-level scheduling:
//                     the layers split by each type's speed on a layer, a
//                     fixed rule without the global 6D search
//                     (hetermoe_style_plan);
//   metis-style       the heterogeneous search of PP/DP/TP/CP, placement and
//                     non-uniform layers with EP and TPE fixed to the best
//                     homogeneous choice;
//   homogeneous-only  the best plan on one device type alone.
// Each returns a SearchResult like run_search (plans best first, statistics
// summed over the searches it ran), collective over the Comm.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "costmodel/cost.h"
#include "engine/driver.h"
#include "partition/constraints.h"

namespace hapmoe {

enum class Baseline { kNone, kUniform, kMi, kHeterMoeStyle, kMetisStyle, kHomogeneousOnly };

// "hapmoe" (kNone: the search itself), "uniform", "mi", "hetermoe-style",
// "metis-style", "homogeneous-only"; InputError naming `where` otherwise.
Baseline parse_baseline(const std::string& text, const std::string& where);
std::string to_string(Baseline b);
// Every baseline, in the order `compare` prints them (hapmoe first).
std::vector<Baseline> all_baselines();

// The MI rule (docs/baselines.md): TP the largest divisor of the heads and
// KV groups within a node (at most 8), CP = TPE = 1, the smallest PP (from
// the number of device types up) whose plan fits, for it the largest DP
// whose stage groups fit on the cluster, EP the largest divisor of the
// experts that divides TP x DP, stages per device type in proportion to
// its devices (pool order), even layers, no recomputation unless a stage
// does not fit, then full recomputation everywhere. The plan with its
// latency; nullopt when no PP fits.
std::optional<PlanCandidate> mi_plan(const Workload& workload, const ClusterSpec& cluster,
                                     const ConstraintOptions& constraints,
                                     const MeasuredProfile* profile = nullptr);

// The HeterMoE-style rule (docs/baselines.md): MI's TP, CP, PP, DP, EP and
// stages per device type, but each stage's layers in proportion to its
// speed on a layer (asymmetric assignment: a faster type's stages take
// more), each stage with the least of none, selective and full
// recomputation that fits; of the PPs, the fastest plan (not the
// smallest PP that fits, as MI). The plan with its latency; nullopt when no PP
// fits.
std::optional<PlanCandidate> hetermoe_style_plan(const Workload& workload,
                                                 const ClusterSpec& cluster,
                                                 const ConstraintOptions& constraints,
                                                 const MeasuredProfile* profile = nullptr);

struct BaselineRun {
  SearchResult result;
  // What the baseline fixed, in a line (e.g. "EP=8 TPE=1 from H800 alone").
  std::string rule;
};

// The uniform ablation (docs/baselines.md, "Uniform"): hapmoe's search,
// then the even split (N/PP layers per stage) on the same devices of each
// type as its best plan, searched (or, with `bruteforce`, enumerated
// without DP); without a best plan, the even split on any devices. The
// result is the second search's. Collective over `comm`.
SearchResult uniform_ablation(const Workload& workload, const ClusterSpec& cluster,
                              const SearchOptions& options, bool bruteforce, Comm& comm,
                              const RunOptions& run);

// Runs `baseline` (kNone: run_search, or uniform_ablation with
// SearchOptions::uniform). Collective over `comm`.
BaselineRun run_baseline(Baseline baseline, const Workload& workload, const ClusterSpec& cluster,
                         const SearchOptions& options, Comm& comm, const RunOptions& run);

// The cluster of type h alone (its pool, no cross links).
ClusterSpec single_type(const ClusterSpec& cluster, int type);

}  // namespace hapmoe
