// The job-wide knobs the search chooses beyond the paper's 6-D space
// (docs/search.md, "Job-wide knobs"): micro-batch size, virtual pipeline
// stages, data-parallel sharding, optimizer CPU offload, the MoE token
// dispatcher and FP8. Each combination of values is a variant of the
// workload (and of SpaceOptions::vpp) that run_search searches exactly;
// the best plans of all variants are merged. Collective over a Comm, like
// run_search; the result does not depend on ranks or threads.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/driver.h"

namespace hapmoe {

enum class JobDim { kMicroBatch, kVpp, kSharding, kOffload, kDispatcher, kPrecision };
inline constexpr int kNumJobDims = 6;
constexpr unsigned job_dim_bit(JobDim d) { return 1u << static_cast<unsigned>(d); }
// "micro-batch", "vpp", "sharding", "offload", "dispatcher", "fp8".
const char* to_string(JobDim d);

// The overlaps of each variant (docs/search.md, "Overlaps of the job-wide
// knobs"): the workload's as given, or Megatron's recipes' defaults for the
// variant's sharding (recipe_overlap) on top of them.
enum class JobOverlaps { kGiven, kRecipe };

struct JobSpace {
  unsigned dims = 0;  // job_dim_bit()s searched; 0: the workload's values only
  JobOverlaps overlaps = JobOverlaps::kGiven;
  int max_micro_batch = 8;
  int max_vpp = 4;
  // Optimizer offload fractions are the multiples of this in (0, 1].
  double offload_step = 0.05;
  // --recompute-scope job: one Megatron recompute setting for the whole
  // job, searched (none, selective, full, and full block K = 1..N-1 when
  // not interleaved), instead of each stage's least recomputation.
  bool job_recompute = false;
  bool has(JobDim d) const { return (dims & job_dim_bit(d)) != 0; }
  // Anything for run_job_search to do beyond one run_search.
  bool active() const { return dims != 0 || job_recompute; }
  bool operator==(const JobSpace&) const = default;
};

// "none", "all" or a comma list of the dimension names (InputError naming
// `where` otherwise).
JobSpace parse_job_space(const std::string& text, const std::string& where);
std::string to_string(const JobSpace& s);
// "given" or "recipe" (InputError naming `where` otherwise).
JobOverlaps parse_job_overlaps(const std::string& text, const std::string& where);
const char* to_string(JobOverlaps o);

// One value of every knob.
struct JobVariant {
  int micro_batch = 1;
  int vpp = 1;
  bool distributed_optimizer = true;
  Fsdp fsdp = Fsdp::kOff;
  double offload = 0;  // optimizer offload fraction
  // > 0: not a variant but a bound over the fractions [offload,
  // offload_to] at once (TrainingSpec::offload_range_to); its plans are
  // never kept.
  double offload_to = 0;
  Dispatcher dispatcher = Dispatcher::kAllToAll;
  Precision precision = Precision::kBf16;
  // The job-wide recompute setting; std::nullopt: per stage.
  std::optional<RecomputeSetting> recompute;
  // Not a dimension: the workload's, or with JobOverlaps::kRecipe a
  // function of the sharding (recipe_overlap).
  Overlap overlap;
  bool operator==(const JobVariant&) const = default;
};

// Megatron's recipes' overlaps on top of `given` (Megatron-Bridge's
// performance recipes and the Megatron-MoE-ModelZoo set both:
// --overlap-grad-reduce always, --overlap-param-gather with the
// distributed optimizer, which it needs; docs/search.md). The TP and MoE
// overlaps stay as given.
Overlap recipe_overlap(Overlap given, bool distributed_optimizer);

// The workload's own values (vpp 1).
JobVariant base_variant(const Workload& workload);
// The workload with the variant's values.
Workload apply(const Workload& workload, const JobVariant& v);
// "b=2 vpp=2 ZeRO-1 offload=0.25 alltoall fp8 recompute=full block 2",
// every knob (the recompute setting only when job-wide).
std::string to_string(const JobVariant& v, bool moe);
// The sharding's name: "DP" (no distributed optimizer), "ZeRO-1", "ZeRO-2"
// or "FSDP".
std::string sharding_name(const JobVariant& v);

// What each variant's search gave.
struct VariantOutcome {
  JobVariant variant;
  double best = std::numeric_limits<double>::infinity();  // its best latency found
  // Its search was cut by the bound of the plans already found: its best,
  // if any, is slower than `best` says nothing about.
  bool bounded = false;
  std::string refused;  // why the variant was not searched ("" if it was)
  SearchStats stats;
};

struct JobSearchResult {
  // The search of the variant holding the best plan (the workload's own
  // values when nothing fits anywhere): its configurations, outcomes and
  // top plans, as run_search gives them.
  SearchResult result;
  JobVariant best;
  double best_s = std::numeric_limits<double>::infinity();  // the best plan's latency
  std::vector<VariantOutcome> variants;                     // in the order searched
  SearchStats stats;                                        // summed over every variant
  // Per JobDim: the variants searched with a value other than the
  // workload's, and their configurations; and the best latency with only
  // that dimension free (the others at the workload's values; +inf if no
  // plan). `base_best` has every dimension at the workload's values.
  std::int64_t dim_variants[kNumJobDims] = {};
  std::int64_t dim_configs[kNumJobDims] = {};
  double dim_best[kNumJobDims] = {};
  double base_best = std::numeric_limits<double>::infinity();
  // With JobSpace::job_recompute: the recompute settings searched beyond
  // the first of each combination of the other knobs, and their
  // configurations; and the best latency with each stage's least
  // recomputation instead, with the best plan's other knobs (what
  // per-stage recompute would give; +inf if no plan, or not faster).
  std::int64_t recompute_variants = 0;
  std::int64_t recompute_configs = 0;
  double per_stage_best = std::numeric_limits<double>::infinity();
  // The units of work of every variant's search, in the order searched,
  // their rounds numbered on across variants (each variant's search is its
  // own rounds: bench_split predicts the split from them). `config`
  // indexes that variant's configurations.
  std::vector<UnitFigures> units;
  int rounds = 0;
  // The configurations of every variant skipped by their floors before
  // its search (RunOptions::open_part_only).
  std::int64_t floored_before = 0;
};

// For each configuration of an interleaved Pi `configs`, its index in
// `plain`, the Pi without interleaving it comes from (with_vpp: the same
// configurations less those interleaving refuses, in the same order), or
// kNotPlain.
inline constexpr std::size_t kNotPlain = static_cast<std::size_t>(-1);
std::vector<std::size_t> plain_indices(const std::vector<ParallelConfig>& plain,
                                       const std::vector<ParallelConfig>& configs);

// The shape order (bound_shape_order) of `configs`, a Pi that with_vpp
// derives from `known` (its configurations less some, in the same order,
// the degrees unchanged), from `order`, known's: its positions in `order`'s
// sequence, in one pass over `known` rather than a sort of its own. Empty
// if `configs` is not such a subsequence. The order of the bounds only
// decides which configurations share a bound shape in turn, never a bound
// (ShapeBounds::bound: the loose bound where it passes the cut, else the
// whole one).
std::vector<std::size_t> shape_order_within(const std::vector<std::size_t>& order,
                                            const std::vector<ParallelConfig>& known,
                                            const std::vector<ParallelConfig>& configs);

// Which configurations of an interleaved Pi `configs` have no plan, from
// `none`, those of `plain` (its Pi without interleaving, plain_indices)
// that have none at all with the same other knobs: interleaving keeps no
// fewer activations in flight at any stage (PP - i micro-batches without
// it, 2 (PP - i - 1) + (v - 1) PP + 1 of 1/v of the stage with it, for any
// number of micro-batches) and changes no other memory, so a stage that
// does not fit without it does not fit with it (docs/search.md, "No plan
// without interleaving, none with it").
std::vector<bool> interleaved_no_plan(const std::vector<bool>& none,
                                      const std::vector<ParallelConfig>& plain,
                                      const std::vector<ParallelConfig>& configs);

// An interleaved variant's step floors (RunOptions::step_floors) from the
// step bounds `floors` of its configurations without interleaving, `plain`
// (its micro-batch, precision and dispatcher; docs/search.md, "Step bounds
// carried across variants"). A plan of v virtual stages per rank is, stage
// for stage, a plan of the same configuration without them, each stage
// step at least as slow (v - 1 more boundaries), its fill and drain
// S / v + T (v - 1) / v instead of the steps' sum S. With S at most PP x T,
// S + (M - 1) T >= B gives S / v + T (v - 1) / v + (M - 1) T >=
// B (1 + (v - 1) M / (PP + M - 1)) / v. `configs` (vpp > 1) is `plain`
// less the configurations interleaving refuses, in the same order; one
// not found there gets no floor (0).
std::vector<double> interleaved_step_floors(const std::vector<double>& floors,
                                            const std::vector<ParallelConfig>& plain,
                                            const std::vector<ParallelConfig>& configs,
                                            int global_batch);

// Bounds over the n configurations of a Pi, kept sparsely: those at most
// a cut, in Pi's order, and the least of the others (search_variants' step
// bounds, docs/search.md, "Step bounds carried across sharding, offload
// and recompute").
class SparseBounds {
 public:
  explicit SparseBounds(std::size_t n) : n_(n) {}
  // Configuration c's bound v, kept if at most `cut`; c above every
  // configuration added before.
  void add(std::uint32_t c, double v, double cut);
  // Room for `kept` bounds at most the cuts of the adds to come.
  void reserve(std::size_t kept);
  // Keeps only those at most `cut`.
  void keep_under(double cut);
  // The least bound not kept (+inf while every one is).
  double rest() const { return rest_; }
  // Over Pi: each kept bound, `rest` elsewhere (a floor under those). Made
  // once.
  const std::shared_ptr<const std::vector<double>>& dense() const;
  // The configurations kept whose bound is at most `cut`, in Pi's order.
  // Filtered from the last answer when its cut was no lower (the cuts of
  // later searches mostly fall), else from all those kept: on DeepSeek-V3's
  // large case, 240 searches ask, of 123 k bounds kept on average, for
  // about 50 each. Like dense(), it keeps what it made, so it is not for
  // two threads at once.
  std::vector<std::uint32_t> under(double cut) const;

 private:
  std::size_t n_;
  std::vector<std::pair<std::uint32_t, double>> low_;
  double rest_ = std::numeric_limits<double>::infinity();
  mutable std::shared_ptr<const std::vector<double>> dense_;
  // under()'s last cut and the bounds kept at most it.
  mutable std::optional<std::pair<double, std::vector<std::pair<std::uint32_t, double>>>> under_;
};

// Searches every variant of `space` (run_search on each): first the
// workload's own values, then the combinations that differ in one
// dimension and the optimizer offload fractions of these, then the rest
// and theirs (docs/search.md, "Job-wide knobs"). A variant one dimension
// away is bounded by the larger of the K-th best so far and the best with
// that dimension alone so far, so `dim_best` is exact; the rest by the
// K-th best so far. Offload: for each combination the fastest plans over
// the multiples of offload_step, by branch and bound over ranges of
// fractions (a range is searched at once as a bound,
// JobVariant::offload_to, and halved while it holds a plan under its
// incumbent). A plan found at several fractions is kept at its fastest,
// the least that fits it when the host steps slower than the device.
// Variants a check refuses (FP8 on a device without it, offload without
// host figures) are listed with the reason and skipped. With job-wide recompute, each
// combination is first searched with per-stage recomputation (a lower
// bound on every setting: CostModel::least_recompute); only when that
// finds a plan under the bound are its settings searched, the setting of
// that plan's recomputation first, each of the others only for a plan
// faster than the best so far, and none once the per-stage bound is
// reached.
JobSearchResult run_job_search(const Workload& workload, const ClusterSpec& cluster,
                               const SearchOptions& options, const JobSpace& space, Comm& comm,
                               const RunOptions& run);

}  // namespace hapmoe
