// HS-DP search (paper §3.5, Algorithm 1; docs/search.md): for every
// configuration pi of the space, the best non-uniform partition, device
// type per stage and recomputation per stage, with the three prunings.
// This kernel knows nothing of MPI or threads.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "costmodel/cost.h"
#include "costmodel/measured.h"
#include "costmodel/plan.h"
#include "partition/config_space.h"

namespace hapmoe {

// Which of the paper's three prunings are on.
struct PruneSet {
  bool load_balance = true;  // (1) window on n_i around the balanced share
  bool memory = true;        // (2) cut stages that do not fit with any recompute
  bool hetero_comm = true;   // (3) cut cross-type boundaries costlier than eta * T_comp
  bool operator==(const PruneSet&) const = default;
};

// "all", "none" or a comma list of lb, mem, comm. Throws InputError naming
// `where` on anything else.
PruneSet parse_prune_set(const std::string& text, const std::string& where);
std::string to_string(const PruneSet& p);

struct SearchOptions {
  PruneSet prune;
  double delta = 0.2;  // load-balance tolerance
  double eta = 2.0;    // cross-type communication threshold
  // Every stage holds N/PP layers; configurations whose PP does not divide
  // N have no plan (Megatron's even split; docs/baselines.md, "Uniform").
  bool uniform = false;
  // When not empty: every plan uses exactly this many devices of each
  // type (the cluster's pool order); configurations that cannot have no
  // plan. The uniform ablation gives it the devices of hapmoe's best plan.
  // Only with `uniform` (its DP enumerates no stage mixes).
  std::vector<int> devices_per_type;
  int top_k = 5;
  // Branch and bound (exact, on by default): configurations whose lower
  // bound exceeds the K-th best latency found are skipped, and partial
  // plans that cannot beat the incumbent are dropped. Off gives the plain
  // DP baseline of the pruning study.
  bool bound = true;
  // Count instead of search (`plan --count-only`, docs/search.md, "Counting
  // the plain DP"): every configuration's DP is run on its states alone,
  // no stage costed, no label built, no plan found; the statistics are
  // those of the plain DP (bound off): states, transitions, the prunings'
  // cuts and hetero_comm_ratio exactly, `feasible` not counted. The stage
  // mixes, windows and thresholds are the search's (engine/count.h).
  bool count_only = false;
  // Find the closest miss (SearchResult::closest) when nothing fits. Off,
  // the memory pruning skips stage mixes that cannot hold the layers
  // (docs/search.md) before a plan is known too: for searches whose
  // closest miss is never reported (the job search's later variants).
  bool closest_miss = true;
  SpaceOptions space;
  // Measured tables (--profile, docs/profile.md) that replace the analytic
  // ones entry by entry; nullptr: the catalog alone.
  std::shared_ptr<const MeasuredProfile> profile;
};

// Counters of one search, summed over configurations.
struct SearchStats {
  std::int64_t configs = 0;            // |Pi|
  std::int64_t configs_evaluated = 0;  // configurations searched
  std::int64_t states = 0;             // DP states with a non-empty front
  std::int64_t transitions = 0;        // (state, type, layers) moves evaluated
  std::int64_t pruned_load_balance = 0;
  std::int64_t pruned_memory = 0;
  std::int64_t pruned_hetero_comm = 0;
  std::int64_t pruned_bound = 0;     // partial plans dropped by the bound
  std::int64_t configs_bounded = 0;  // configurations skipped by their bound
  std::int64_t feasible = 0;         // complete plans that fit, reached
  // The largest cross-type boundary transfer (forward + backward per step)
  // over the mean stage step T_comp among the moves considered: pruning
  // (3) cuts above eta, so this says how near it came (docs/search.md).
  // The maximum over configurations, not a sum; 0 without cross-type moves.
  double hetero_comm_ratio = 0;
  double seconds = 0;  // wall time
  SearchStats& operator+=(const SearchStats& o);
};

// The closest miss when nothing fits: the stage candidate that needs the
// least memory beyond its capacity (with full recomputation).
struct Shortfall {
  double bytes = std::numeric_limits<double>::infinity();
  ParallelConfig parallel;
  int stage = -1;
  int device_type = -1;
  int layers = 0;
  bool known() const { return stage >= 0; }
};

struct PlanCandidate {
  double latency_s = 0;
  Plan plan;
};

// Canonical order of plans: latency, then (pp, tp, cp, ep, tpe, dp,
// micro-batch), then stages (type, layers, recompute) in order.
bool plan_key_less(const Plan& a, const Plan& b);
bool candidate_less(const PlanCandidate& a, const PlanCandidate& b);

struct ConfigOutcome {
  std::optional<PlanCandidate> best;
  SearchStats stats;
  Shortfall closest;
  // A CancelCheck stopped the search of the configuration early: `best` is
  // the best of what was searched (a real plan), not proven its best.
  bool cancelled = false;
};

// Asked by the search of a configuration between stage mixes and DP levels,
// and inside a level every kCancelEvery labels it extends (about every
// millisecond at most): true stops it early (ConfigOutcome::cancelled).
// The argument is 0, or the bytes the search is about to allocate at once
// (its labels growing), which the answer must allow for: the
// driver's limits (engine/limits.h, LimitWatch::check).
using CancelCheck = std::function<bool(std::int64_t grow_bytes)>;
inline constexpr std::int64_t kCancelEvery = std::int64_t{1} << 16;

// One part of a configuration's search, so that a configuration too large
// for one worker can be spread over several. Under the load-balance pruning
// the stage mixes, in increasing order of their lower bound, are dealt
// round-robin to `count` parts (each part gets good mixes early, which
// tighten its own bound); part `index` searches its share. Without the
// mix enumeration there is one part. Parts are searched independently
// (against the same incumbent) and merged with merge_part: the best plan
// is the configuration's exact best, the counters are the parts' sums
// (more work than one search, which tightens across all mixes).
//
// A level share is the other way to cut a search, for a DP that has no
// stage mixes (the load-balance pruning off, or --uniform) and no bound:
// `count` workers run the configuration's one DP at once, and share
// `index` builds, at each DP level, the states whose key hashes to it,
// from every state of the level before. At the end of each level the
// shares trade the states they built through `levels`, so each holds the
// whole level, as one search would have built it. The best plan is the
// configuration's exact best, and the counters summed over the shares are
// those of one search (each state and each move is counted by one share).
class LevelExchange;
struct SearchPart {
  int index = 0;
  int count = 1;
  LevelExchange* levels = nullptr;  // a level share (count > 1): the trade
};

// The trade of a level between the shares of one DP (SearchPart::levels),
// which the caller provides (threads, ranks or both). Every share calls
// trade once per level, with the same number of calls, passing the bytes
// of the states it built, which stay as they are until its next call
// returns; it returns every share's bytes in share order, valid until the
// share's next call. A trade must not throw. Bytes that are empty or
// begin with a byte other than 0 are a stop: every share that receives
// one ends its search, cancelled (what the caller sends for a share that
// failed). A share's bytes live in its thread's storage: the caller ends
// with one more trade (a stop, say) after every share's search, so that no
// thread ends while another may still read its last level.
class LevelExchange {
 public:
  virtual ~LevelExchange() = default;
  virtual const std::vector<std::string_view>& trade(int share, std::string_view built) = 0;
};

// Whether pi's search can be cut into level shares (SearchPart::levels)
// under `options`: without the bound, with no stage mixes.
bool can_share_levels(const SearchOptions& options);

// How many parts pi's search can be cut into: its stage mixes under the
// load-balance pruning (1 without it, or with --uniform).
int max_parts(const CostModel& model, const ParallelConfig& pi, const SearchOptions& options);

// Folds the outcome of one part of a configuration into `into` (a
// default-constructed outcome to start): the better plan by
// candidate_less, the closer shortfall, counters summed (one
// configuration evaluated).
void merge_part(ConfigOutcome& into, const ConfigOutcome& part);

// The exact best plan of one configuration under the cost model (with the
// prunings that are on). With options.bound, partial plans whose latency
// cannot come within `incumbent` are dropped: the result is exact whenever
// the configuration's best is at most `incumbent`, and otherwise may be
// empty. Without it `incumbent` is not used: the plain DP first finds a
// plan of pi with the prunings on (a probe, not counted) whose latency
// settles its ties (docs/search.md, "Exactness").
// `facts`, if given, is what the configuration's work estimate computed
// of pi (the same options), which the search then does not compute again.
struct ConfigFacts;
ConfigOutcome search_config(const CostModel& model, const ParallelConfig& pi,
                            const SearchOptions& options,
                            double incumbent = std::numeric_limits<double>::infinity(),
                            SearchPart part = {}, const CancelCheck* cancel = nullptr,
                            const ConfigFacts* facts = nullptr);

// Lower bounds on the latency of every plan of pi (docs/search.md, "Branch
// and bound"). With S the sum over layers of the cheapest step of that
// layer on any usable type, plus the cheapest embedding, output layer and
// PP - 1 boundaries: the slowest stage takes at least the bottleneck floor
// (the discrete balanced split of the layers over the stage groups the
// capacities allow, fixed steps included), and the largest stage tail
// (sync + optimizer) at least the mean; both S and the tail then rise with
// the slowest step, by the layers each type's stages can hold within it
// (hsdp::latency_floor, engine/bounds.h). +infinity if pi has too few
// stage groups.
struct ConfigBound {
  double latency = 0;  // S + (M-1) * slowest + largest tail: skip above it
  double steps = 0;    // the same without the tail: the search order
};
ConfigBound config_lower_bound(const CostModel& model, const ParallelConfig& pi,
                               const SearchOptions& options);

// What config_lower_bound knows of pi before its pipeline depth: per usable
// device type the cheapest dense and MoE layer steps, the least fixed step
// a stage pays (embedding or a boundary) and its stage groups, and the
// cheapest embedding, output layer, boundary and per-layer tails. Equal
// for configurations with equal bound_shape_key (pp enters only as 1, 2
// or more: where the first and last stage are), so a search over Pi
// computes it once per key: most of a bound's cost, the rest being the
// bottleneck floor.
struct BoundShape {
  struct Type {
    double dense = 0;
    double moe = 0;
    double fixed = std::numeric_limits<double>::infinity();
    int stages = 0;
    // The most layers a stage of the type holds in memory, where known
    // (Evaluator::mix_lower_bound, with every layer alike).
    int most = std::numeric_limits<int>::max();
  };
  std::vector<Type> types;  // the usable types
  double dense = std::numeric_limits<double>::infinity();
  double moe = std::numeric_limits<double>::infinity();
  double emb = std::numeric_limits<double>::infinity();
  double output = std::numeric_limits<double>::infinity();
  double link = std::numeric_limits<double>::infinity();
  double dense_tail = std::numeric_limits<double>::infinity();
  double moe_tail = std::numeric_limits<double>::infinity();
  // The tails are not computed yet: both are 0, which bounds them from
  // below (a bound with them is at most the bound with the real ones).
  bool tails_pending = false;
};
// The type costs of one CostModel::type_costs_key, per device type, kept
// by a thread between the shapes it bounds: bound_shape_order puts a
// key's shapes of PP 1, 2 and deeper next to each other, and they share
// their type costs.
struct TypeCostsCache {
  ParallelConfig key{0};  // pp 0: none yet
  std::vector<std::optional<TypeCosts>> costs;
};
// `cache`, if given, must be used with one cost model only. Without
// `tails` the shape's layer tails are left pending (BoundShape::
// tails_pending): a looser bound, for a caller that adds them (add_tails)
// only where the looser one does not pass its cut.
BoundShape bound_shape(const CostModel& model, const ParallelConfig& pi,
                       const SearchOptions& options, TypeCostsCache* cache = nullptr,
                       bool tails = true);
// Computes the layer tails of pi's shape (from `cache` as bound_shape).
void add_tails(const CostModel& model, const ParallelConfig& pi, const SearchOptions& options,
               BoundShape& shape, TypeCostsCache* cache = nullptr);
ParallelConfig bound_shape_key(const ParallelConfig& pi);
// A permutation of `configs` (in the canonical order of enumerate_configs)
// that puts configurations of equal bound_shape_key next to each other,
// and those of equal degrees (CostModel::type_costs_key) too: per
// configuration of the first block of pp >= 3, in order, the
// configurations of smaller degrees not yet placed, then those of pp 1
// and 2 with its degrees, then it, then those of the later blocks with its
// degrees (a subset of Pi in that order too: the degrees the first block
// lacks come alone, before the next larger). Linear in |Pi| times the
// number of pp blocks; any other input still gives a permutation.
std::vector<std::size_t> bound_shape_order(const std::vector<ParallelConfig>& configs);
// config_lower_bound(model, pi, options) from pi's shape. With a finite
// `cut`: a bound above the cut may be a looser one, still above it (one
// test of the bottleneck floor instead of its bisection; the driver skips
// what is above its incumbent, RunOptions::incumbent, whatever its bound).
// With `steps_above_cut` the steps bound too is above the cut wherever a
// test of the floor at the step where the steps pass it proves that (a
// second test where the first did not; RunOptions::step_bounds_above_cut).
ConfigBound config_lower_bound(const CostModel& model, const BoundShape& shape,
                               const ParallelConfig& pi,
                               double cut = std::numeric_limits<double>::infinity(),
                               bool steps_above_cut = false);
// config_lower_bound of configurations one after another (one per
// thread), keeping the shape of the last bound_shape_key and the type
// costs of the last type-costs key (bound_shape_order puts those
// together). Under a finite cut a shape's layer tails (four stage costs
// per type) are computed only once one of its configurations is not put
// above the cut without them: such a configuration gets the bound with
// them, the others the bound without (above the cut, so skipped all the
// same). A bound depends on the configuration, the cut and
// steps_above_cut alone, never on what was bounded before.
class ShapeBounds {
 public:
  ShapeBounds(const CostModel& model, const SearchOptions& options)
      : model_(&model), options_(&options) {}
  ConfigBound bound(const ParallelConfig& pi, double cut, bool steps_above_cut);
  // Whether no plan of pi fits in memory by the test search_config skips
  // a configuration on before its stage mixes (the memory pruning's, with
  // every layer alike: the most layers a stage of each type holds at its
  // later pipeline positions, full recomputation at worst, over the PP
  // stages the types that hold the most can give, fall short of the
  // layers; Evaluator::max_fitting_layers). Without interleaving those
  // positions hold what they hold at any PP from 3 on, so the most layers
  // are found once per bound shape; interleaved (their micro-batches in
  // flight grow with PP), once per configuration. With layers of two
  // kinds: false (search_config has no such test). For callers that would
  // have search_config skip it (memory_short_applies).
  bool short_of_memory(const ParallelConfig& pi);

 private:
  const CostModel* model_;
  const SearchOptions* options_;
  ParallelConfig key_{0};  // the shape's bound_shape_key; pp 0: none yet
  BoundShape loose_;       // its tails pending
  std::optional<BoundShape> whole_;
  TypeCostsCache costs_;
  // short_of_memory's: per type, the most layers a stage holds at the
  // later positions of fit_key_ (the bound shape key, or the interleaved
  // configuration), -1 for an unusable type.
  ParallelConfig fit_key_{0};
  std::vector<int> fit_;
};

// Whether search_config skips a configuration whose stages cannot hold the
// layers in memory (ShapeBounds::short_of_memory) without searching it:
// with the bound, the memory and load-balance prunings, every layer alike,
// not counting, and a closest miss not wanted or an incumbent to beat.
bool memory_short_applies(const CostModel& model, const SearchOptions& options, double incumbent);

// A relative estimate of the work search_config does on pi. Without the
// bound: the plain DP's transitions, counted (count_only), plus a fixed
// share per configuration; with it (or when counting): PP x N x the stage
// mixes (or usage vectors) its DP runs over. For splitting work between
// workers; bench/README.md measures how well it predicts the work done.
double work_estimate(const CostModel& model, const ParallelConfig& pi,
                     const SearchOptions& options);

// The same, finer and dearer (tens of microseconds): the DP states of the
// stage mixes whose lower bound is within `incumbent`. For the
// configurations of one branch-and-bound round.
// What it computed of pi is left in *facts, if given, for search_config
// (null where it computed none: without the load-balance pruning's mixes).
double work_estimate(const CostModel& model, const ParallelConfig& pi, const SearchOptions& options,
                     double incumbent, std::shared_ptr<const ConfigFacts>* facts = nullptr);

// Every plan of the same configuration, without DP (prunings ignored).
// The same cost evaluation and summation order as search_config, so equal
// plans have bit-identical latencies.
ConfigOutcome bruteforce_config(const CostModel& model, const ParallelConfig& pi,
                                const SearchOptions& options);

// Plans brute force would enumerate for pi (types^PP x compositions of N),
// saturating at 2^62.
double bruteforce_size(const CostModel& model, const ParallelConfig& pi,
                       const SearchOptions& options);

}  // namespace hapmoe
