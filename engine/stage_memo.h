// The stage memo of HS-DP (docs/search.md): the cost of a stage -- device
// type h, pipeline position i, layers [j, j+n) -- with its least
// recomputation, evaluated once per configuration and looked up by the DP
// on every transition. Each stage takes the least recomputation that fits
// (the choice with the least added time; it dominates every other choice
// for that stage); a stage that does not fit even with full recomputation
// is marked infeasible, which the memory pruning (2) cuts at once
// (hsdp.cpp), and note_shortfall keeps the closest such miss.
//
// Evaluator is the per-configuration context around the memo: type costs,
// boundaries, stage capacities, and what the windows and bounds of the DP
// read per type (fixed steps, tail lines, layer floors, the most layers a
// stage can hold, the bound of a stage mix). Its lookups (row, stage,
// boundary) are inline here, the DP calling them per transition; building
// it and a memo miss are in stage_memo.cpp. Relies on the cost model
// (CostModel::least_recompute, stage_cost) and on bounds.h.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <type_traits>
#include <vector>

#include "engine/bounds.h"
#include "engine/search.h"

namespace hapmoe::hsdp {

// The cost of a stage (type h, position i, layers [j, j+n)) with its least
// recomputation, before the boundary with its predecessor.
struct StageEval {
  bool feasible = false;
  Recompute recompute;
  double fwd = 0;  // StageCost::fwd_s without the boundary
  double bwd = 0;  // StageCost::bwd_s without the boundary
  double sync = 0;
  double opt = 0;
  double over = 0;  // bytes beyond capacity when infeasible (full recompute)
};

// Zeroed storage of `size` T (T implicit-lifetime: trivially copyable and
// destructible), from calloc, replaced whole when it must grow.
template <class T>
struct MemoBlock {
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  std::unique_ptr<T, Free> data;
  std::size_t size = 0;
  // False (and empty) when calloc refuses.
  bool grow(std::size_t n) {
    static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>);
    data.reset();
    size = 0;
    data.reset(static_cast<T*>(std::calloc(n, sizeof(T))));
    if (!data) return false;
    size = n;
    return true;
  }
};

// The memo when a flat table of every (type, position, first layer, layers)
// would take more than kFlatMemoBytes of address space (thousands of
// layers: types x PP x (N+1)^2 entries, 70 GB at 4,000 layers and PP 64,
// which calloc refuses): open addressing over the entries a search
// touches, each entry in a chunk that never moves (references stay valid
// while the map grows). An entry is valid in the generation that wrote it;
// a slot of an older one counts as empty, so nothing is cleared between
// configurations.
class MemoMap {
 public:
  const StageEval* find(std::uint64_t key, std::uint32_t gen) const {
    if (slots_.empty()) return nullptr;
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t s = hash(key) & mask;; s = (s + 1) & mask) {
      const Slot& slot = slots_[s];
      if (slot.gen != gen) return nullptr;
      if (slot.key == key) return &chunk_entry(slot.index);
    }
  }
  // A new entry for `key` (not present), zeroed.
  StageEval& insert(std::uint64_t key, std::uint32_t gen);
  // Forgets every entry (a wrapped generation).
  void reset();

 private:
  static constexpr std::size_t kChunk = 4096;
  struct Slot {
    std::uint64_t key = 0;
    std::uint32_t gen = 0;  // 0: never written
    std::uint32_t index = 0;
  };
  static std::size_t hash(std::uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return static_cast<std::size_t>(k);
  }
  const StageEval& chunk_entry(std::uint32_t i) const { return chunks_[i / kChunk][i % kChunk]; }
  StageEval& chunk_entry(std::uint32_t i) { return chunks_[i / kChunk][i % kChunk]; }
  void rehash(std::size_t size);

  std::vector<Slot> slots_;
  std::vector<std::unique_ptr<StageEval[]>> chunks_;
  std::uint32_t gen_ = 0;    // the generation `count_` counts
  std::uint32_t count_ = 0;  // entries of generation gen_
};

// Address space above which the memo is a MemoMap instead of a flat table
// (per thread; the flat table's untouched pages cost nothing, but calloc
// refuses what the machine could never hold). A smaller flat table that
// calloc refuses falls back to the map too.
inline constexpr std::size_t kFlatMemoBytes = std::size_t{4} << 30;
// Test hook: the limit the evaluators apply (tests set 0 to run the map
// everywhere, and set it back); written only while no search runs.
inline std::size_t flat_memo_bytes = kFlatMemoBytes;

// Per-configuration evaluation context: type costs, boundaries, capacities,
// and a memo of stage evaluations.
class Evaluator {
 public:
  Evaluator(const CostModel& model, const ParallelConfig& pi, const SearchOptions& options);
  // A copy of `facts` (all it computed of its configuration) with this
  // thread's memo, empty: a round's work estimate makes the evaluator,
  // and the configuration's search, on any thread, takes a copy.
  struct Fresh {};
  Evaluator(const Evaluator& facts, Fresh);

  int types() const { return types_; }
  int layers() const { return n_; }
  // Every layer of one kind (all dense or all MoE).
  bool layers_alike() const { return moe_total_ == 0 || moe_total_ == n_; }
  int microbatches() const { return m_; }
  int cap(int h) const { return caps_[static_cast<std::size_t>(h)]; }
  const ClusterSpec& cluster() const { return model_.cluster(); }
  const ParallelConfig& pi() const { return pi_; }
  const CostModel& model() const { return model_; }

  // The stages of type h at position i from layer j, for the DP's loop
  // over the layer count: what stage() computes for every count, once.
  struct Row {
    int h = 0;
    int i = 0;  // the memo's position
    int j = 0;
    int run = 0;                 // run_[j]
    const int* first = nullptr;  // first_run_ of layer j's kind
    std::size_t base = 0;        // (h, i) part of the memo index
  };
  Row row(int h, int i, int j) const {
    Row r;
    r.h = h;
    r.i = (i > 0 && i < pi_.pp - 1 && i <= full_to_) ? 1 : i;  // all in flight
    r.j = j;
    r.run = run_[static_cast<std::size_t>(j)];
    r.first =
        first_run_.data() + static_cast<std::size_t>(kind_[static_cast<std::size_t>(j)]) * (n_ + 1);
    r.base = (static_cast<std::size_t>(h) * pi_.pp + r.i) * (n_ + 1);
    return r;
  }
  const StageEval& stage(const Row& r, int n) {
    const int j = (n >= 1 && n <= r.run) ? r.first[n] : r.j;
    const std::size_t key = (r.base + j) * (n_ + 1) + n;
    if (stamps_ != nullptr) {
      if (stamps_[key] == generation_) return memo_[key];
    } else if (const StageEval* e = map_->find(key, generation_)) {
      return *e;
    }
    return evaluate(key, r.h, r.i, j, n);
  }
  const StageEval& stage(int h, int i, int j, int n) { return stage(row(h, i, j), n); }
  // stage(h, i, j, n).feasible, without the choice's cost or the memo.
  bool fits(int h, int i, int j, int n) const;

  // Unique among this thread's evaluators (while the counter does not
  // wrap): what a per-configuration cache keys on (count.cpp).
  std::uint32_t generation() const { return generation_; }

  const CostModel::Boundary& boundary(int hp, int h) const {
    return boundary_[static_cast<std::size_t>((hp + 1) * types_ + h)];
  }

  // The output layer's step on type h.
  double output_step(int h) const {
    const TypeCosts& tc = costs_[static_cast<std::size_t>(h)];
    return tc.output_fwd_s + tc.output_bwd_s;
  }

  // Step time a stage of type h pays besides its layers: the embedding on
  // the first stage, the output layer on the last, the boundary with a
  // predecessor of its own type on every other.
  double fixed_step(int h, bool first, bool last) const {
    const TypeCosts& tc = costs_[static_cast<std::size_t>(h)];
    double t = 0.0;
    if (first) {
      t += tc.embedding_fwd_s + tc.embedding_bwd_s;
    } else {
      const CostModel::Boundary& b = boundary(h, h);
      t += b.fwd_s + b.bwd_s;
    }
    if (last) t += tc.output_fwd_s + tc.output_bwd_s;
    return t;
  }

  // The sync + optimizer time of a stage of type h as a line in its layer
  // count: tail(n) ~ fixed + n * per_layer, measured on 1 and 2 layers.
  struct TailLine {
    double fixed = 0;
    double per_layer = 0;
  };
  TailLine tail_line(int h, bool first, bool last) const;

  // The cheapest step of the remaining layers [j, N) on any usable type,
  // without recomputation or boundaries: a lower bound on what they add to
  // the sum of stage steps.
  double remaining_floor(int j) const;

  // remaining_floor(j) for j = 0 .. N, computed once per evaluator.
  const double* remaining_floors();

  // The most layers a stage of type h can hold with the least recomputation
  // that fits (full at worst), at the later pipeline positions (fewest
  // micro-batches in flight); N when memory does not limit it below the
  // most a stage can take, 0 if not even one layer fits. With layers_alike()
  // no stage of type h holds more anywhere: an earlier position holds more
  // micro-batches in flight, the first the embedding too.
  int max_fitting_layers(int h);
  // The most layers k <= most a stage of type h holds, each layer alike,
  // in a plan no slower than `cut`: one whose latency, at least
  //   M t + R / v + tail
  // (t the stage's step, forward + backward with its least recomputation;
  // R the other layers' steps at their cheapest; tail its sync +
  // optimizer: iteration_latency, pipeline_edge), is at most the cut, at
  // the later positions, as max_fitting_layers. For the same reason no
  // stage of type h holds more anywhere: an earlier position holds more
  // micro-batches in flight, so its least recomputation is no cheaper, and
  // the first the embedding too. 0 if no count of layers does. With
  // layers_alike() only.
  int most_under_cut(int h, int most, double cut);

  // The step of a dense and of a MoE layer on type h (forward + backward,
  // no recomputation).
  double dense_step(int h) const {
    const TypeCosts& tc = costs_[static_cast<std::size_t>(h)];
    return tc.dense.fwd_s + tc.dense.bwd_s;
  }
  double moe_step(int h) const {
    const TypeCosts& tc = costs_[static_cast<std::size_t>(h)];
    return tc.moe.fwd_s + tc.moe.bwd_s;
  }
  // The MoE layers among [j, N), for j = 0 .. N, computed once per
  // evaluator.
  const int* moe_layers_left();

  // The cheapest step of one layer of the model on type h.
  double layer_floor(int h) const {
    const double d = dense_step(h);
    const double e = moe_step(h);
    return moe_total_ == n_ ? e : (moe_total_ == 0 ? d : std::min(d, e));
  }

  // A lower bound on the latency of every plan with stage mix c: the sum of
  // steps is at least every layer, the embedding, the output layer and
  // PP - 1 boundaries at their cheapest in the mix, and the slowest stage
  // at least the bottleneck floor of the mix (recomputation only adds).
  // `most`, if given, caps the layers a stage of each type holds (memory:
  // max_fitting_layers, which bounds every stage with every layer alike).
  // Against a finite `cut` (the incumbent, as config_lower_bound's): one
  // test of the bottleneck floor where the bound passes the cut settles
  // most mixes above it, returning a bound above the cut; the others get
  // the bound without a cut.
  double mix_lower_bound(const std::vector<int>& c, const std::vector<int>* most = nullptr,
                         double cut = std::numeric_limits<double>::infinity()) const;

  // Per-layer step (forward + backward, no recomputation) of an average
  // layer of the model on type h: the speed used for balance and T_comp.
  double layer_step(int h) const {
    const TypeCosts& tc = costs_[static_cast<std::size_t>(h)];
    const int moe = model_.moe_layers_in(0, n_);
    return ((n_ - moe) * (tc.dense.fwd_s + tc.dense.bwd_s) + moe * (tc.moe.fwd_s + tc.moe.bwd_s)) /
           n_;
  }

 private:
  const CostModel& model_;
  ParallelConfig pi_;
  int n_;
  int types_;
  int m_;
  // The last middle position at which a stage keeps every micro-batch in
  // flight (stage_cost's in_flight at its cap, M x v; 0 if none): the
  // positions 1 .. full_to_ cost the same as position 1. (Until 2026-11-29
  // the positions after it were taken as position 1 too: their stages
  // held the cap's activations, not their own, when M < PP - 1;
  // Count.EvaluatorStagesAreTheCostModelsAtEveryPosition.)
  int full_to_;
  std::vector<int> caps_;
  std::vector<TypeCosts> costs_;
  std::vector<CostModel::Boundary> boundary_;
  double min_dense_step_ = 0;
  double min_moe_step_ = 0;
  int moe_total_ = 0;
  std::vector<LayerTails> tails_;
  // The shape of a stage at position i holding layers [j, j + n).
  StageShape shape_at(int i, int j, int n) const;
  // Takes this thread's memo, with a new generation: no entry valid.
  void attach();
  // A memo miss: the stage with its least recomputation.
  [[gnu::noinline]] const StageEval& evaluate(std::size_t key, int h, int i, int j, int n);

  std::vector<double> rem_floor_;    // remaining_floors()
  std::vector<int> moe_left_;        // moe_layers_left()
  std::vector<int> kind_;            // per layer: 1 if MoE
  std::vector<int> run_;             // per layer: the run of its kind from it on
  std::vector<int> first_run_;       // (kind, length): the first such run
  StageEval* memo_ = nullptr;        // the flat table, or
  std::uint32_t* stamps_ = nullptr;  // (its stamps; nullptr with map_)
  MemoMap* map_ = nullptr;           // the map (thousands of layers)
  std::uint32_t generation_ = 0;
};

// Keeps `e` as the closest miss (ConfigOutcome::closest) if it does not
// fit and needs less memory beyond its capacity than the closest so far.
inline void note_shortfall(ConfigOutcome& out, const StageEval& e, const ParallelConfig& pi,
                           int stage, int h, int n) {
  if (e.feasible || e.over >= out.closest.bytes) return;
  out.closest.bytes = e.over;
  out.closest.parallel = pi;
  out.closest.stage = stage;
  out.closest.device_type = h;
  out.closest.layers = n;
}

}  // namespace hapmoe::hsdp
