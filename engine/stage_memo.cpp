// The stage memo of HS-DP (stage_memo.h): building a configuration's
// evaluation context (type costs, boundaries, capacities, the classes of
// stages the cost model cannot tell apart, the thread's memo), a memo miss
// (the least recomputation that fits, from CostModel::least_recompute, and
// the stage's cost with it), and the per-type quantities the DP's windows
// and bounds read from it: tail lines, the floor of the remaining layers,
// the most layers a stage can hold in memory, the bound of a stage mix.
// Relies on the cost model and on bounds.h.
#include "engine/stage_memo.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "costmodel/errors.h"

namespace hapmoe::hsdp {

namespace {
// The generation of this thread's newest evaluator (its memo's stamps).
thread_local std::uint32_t thread_generation = 0;
}  // namespace

Evaluator::Evaluator(const CostModel& model, const ParallelConfig& pi, const SearchOptions& options)
    : model_(model),
      pi_(pi),
      n_(model.workload().model.num_layers),
      types_(model.cluster().num_types()),
      m_(model.num_microbatches(pi)),
      full_to_(0) {
  // stage_cost: plain 1F1B keeps PP - i micro-batches at stage i,
  // interleaved 2(PP - i - 1) + (v - 1)PP + 1 chunks, each capped at M x v;
  // both fall with i, so the positions that keep the cap are 1 .. full_to_.
  for (int i = 1; i < pi.pp - 1; ++i) {
    const int chunks = pi.vpp > 1 ? 2 * (pi.pp - i - 1) + (pi.vpp - 1) * pi.pp + 1 : pi.pp - i;
    if (chunks >= m_ * pi.vpp) full_to_ = std::max(full_to_, i);
  }
  caps_.resize(static_cast<std::size_t>(types_));
  costs_.resize(static_cast<std::size_t>(types_));
  for (int h = 0; h < types_; ++h) {
    caps_[static_cast<std::size_t>(h)] =
        std::min(stage_capacity(model.cluster(), h, pi, options.space.constraints), pi.pp);
    if (caps_[static_cast<std::size_t>(h)] > 0) {
      costs_[static_cast<std::size_t>(h)] = model.type_costs(pi, h);
    }
  }
  min_dense_step_ = std::numeric_limits<double>::infinity();
  min_moe_step_ = std::numeric_limits<double>::infinity();
  moe_total_ = model.moe_layers_in(0, n_);
  tails_.resize(static_cast<std::size_t>(types_));
  for (int h = 0; h < types_; ++h) {
    if (caps_[static_cast<std::size_t>(h)] > 0) {
      tails_[static_cast<std::size_t>(h)] =
          layer_tails(model, pi, costs_[static_cast<std::size_t>(h)]);
    }
  }
  for (int h = 0; h < types_; ++h) {
    if (caps_[static_cast<std::size_t>(h)] == 0) continue;
    min_dense_step_ = std::min(min_dense_step_, dense_step(h));
    min_moe_step_ = std::min(min_moe_step_, moe_step(h));
  }
  boundary_.assign(static_cast<std::size_t>((types_ + 1) * types_), {});
  for (int hp = 0; hp < types_; ++hp) {
    for (int h = 0; h < types_; ++h) {
      if (caps_[static_cast<std::size_t>(hp)] > 0 && caps_[static_cast<std::size_t>(h)] > 0) {
        boundary_[static_cast<std::size_t>((hp + 1) * types_ + h)] =
            model.stage_boundary(pi, hp, h);
      }
    }
  }
  // Stages that CostModel cannot tell apart share a memo entry.
  // stage_cost reads the position only through first (i = 0), last
  // (i = PP - 1) and the micro-batches in flight, min(PP - i, M), and
  // the first layer only through the MoE layers among the stage's first
  // K (least_recompute, full recomputation): a middle position with M
  // in flight maps to position 1, and a stage of layers all MoE (all
  // dense) to the first such run of its length
  // (Search.StagesTheMemoSharesCostTheSame checks that premise).
  // kind_[j]: 1 if layer j is MoE; run_[j]: the layers from j on of that
  // kind; first_run_[kind][len]: the first j whose run of `kind` holds
  // len layers.
  const auto span = static_cast<std::size_t>(n_) + 1;
  kind_.assign(span, 0);
  run_.assign(span, 0);
  first_run_.assign(2 * span, -1);
  for (int j = 0; j < n_; ++j) kind_[static_cast<std::size_t>(j)] = model.moe_layers_in(j, 1);
  for (int j = n_ - 1; j >= 0; --j) {
    const auto u = static_cast<std::size_t>(j);
    run_[u] = 1 + (j + 1 < n_ && kind_[u + 1] == kind_[u] ? run_[u + 1] : 0);
  }
  int filled[2] = {0, 0};  // first_run_ is set for len <= filled[kind]
  for (int j = 0; j < n_; ++j) {
    const auto u = static_cast<std::size_t>(j);
    int& f = filled[kind_[u]];
    for (; f < run_[u]; ++f) first_run_[static_cast<std::size_t>(kind_[u]) * span + f + 1] = j;
  }
  attach();
}

Evaluator::Evaluator(const Evaluator& facts, Fresh) : Evaluator(facts) { attach(); }

void Evaluator::attach() {
  // The memo is reused across configurations of a thread: an entry is
  // valid when its stamp is this evaluator's generation, so nothing is
  // cleared between configurations. Its blocks come from calloc: a
  // search touches few of the types x PP x (N+1)^2 entries, and the
  // pages it never touches are never faulted in (DeepSeek-V3 at PP 40:
  // about 26 MB, whose zeroing by std::vector made the first work
  // estimate at that depth take 86 ms instead of 2); a larger block
  // needs no copy, its stamps are all 0, i.e. stale.
  // Thousands of layers make the flat table too large even as address
  // space: the memo is then a map of the entries touched (MemoMap).
  thread_local MemoBlock<StageEval> memo;
  thread_local MemoBlock<std::uint32_t> stamps;
  thread_local MemoMap map;
  std::uint32_t& generation = thread_generation;
  const std::size_t size = static_cast<std::size_t>(types_) * pi_.pp * (n_ + 1) * (n_ + 1);
  bool flat = size <= flat_memo_bytes / (sizeof(StageEval) + sizeof(std::uint32_t));
  if (flat && memo.size < size && !(memo.grow(size) && stamps.grow(size))) {
    memo.data.reset();  // refused: the map, and a flat table again when one fits
    memo.size = 0;
    stamps.data.reset();
    stamps.size = 0;
    flat = false;
  }
  if (++generation == 0) {  // wrapped: stale stamps could look valid
    if (stamps.data) std::fill(stamps.data.get(), stamps.data.get() + stamps.size, 0);
    map.reset();
    generation = 1;
  }
  memo_ = nullptr;
  stamps_ = nullptr;
  map_ = nullptr;
  if (flat) {
    memo_ = memo.data.get();
    stamps_ = stamps.data.get();
  } else {
    map_ = &map;
  }
  generation_ = generation;
}

Evaluator::TailLine Evaluator::tail_line(int h, bool first, bool last) const {
  // A line in the layers (layer_tails: a range of offload fractions costed
  // at its faster end).
  std::optional<TypeCosts> scratch;
  const TypeCosts& tc = with_affine_tails(costs_[static_cast<std::size_t>(h)], scratch);
  auto tail = [&](int layers) {
    StageShape s;
    s.position = first ? 0 : (last ? pi_.pp - 1 : std::min(1, pi_.pp - 1));
    s.first_layer = first ? 0 : n_ - layers;
    s.layers = layers;
    s.moe_layers = model_.moe_layers_in(s.first_layer, layers);
    const StageCost c = model_.stage_cost(pi_, tc, s);
    return c.dp_sync_s + c.optimizer_s;
  };
  if (n_ < 2) return {tail(1), 0.0};
  const double one = tail(1);
  const double per_layer = tail(2) - one;
  return {one - per_layer, per_layer};
}

double Evaluator::remaining_floor(int j) const {
  const int moe = model_.moe_layers_in(j, n_ - j);
  return (n_ - j - moe) * min_dense_step_ + moe * min_moe_step_;
}

const double* Evaluator::remaining_floors() {
  if (rem_floor_.empty()) {
    rem_floor_.resize(static_cast<std::size_t>(n_) + 1);
    for (int j = 0; j <= n_; ++j) rem_floor_[static_cast<std::size_t>(j)] = remaining_floor(j);
  }
  return rem_floor_.data();
}

const int* Evaluator::moe_layers_left() {
  if (moe_left_.empty()) {
    moe_left_.resize(static_cast<std::size_t>(n_) + 1);
    for (int j = 0; j <= n_; ++j) {
      moe_left_[static_cast<std::size_t>(j)] = model_.moe_layers_in(j, n_ - j);
    }
  }
  return moe_left_.data();
}

int Evaluator::max_fitting_layers(int h) {
  const int most = n_ - (pi_.pp - 1);  // the most a stage can take
  int best = 0;
  for (int i = std::max(0, pi_.pp - 2); i < pi_.pp; ++i) {
    const int k = most_fitting_layers(model_, pi_, costs_[static_cast<std::size_t>(h)], i, most);
    if (k == most) return n_;  // memory does not limit
    best = std::max(best, k);
  }
  return best;
}

int Evaluator::most_under_cut(int h, int most, double cut) {
  const double m = m_;
  const double layer = layer_floor(h);
  for (int k = std::min(most, n_ - (pi_.pp - 1)); k >= 1; --k) {
    const double others = remaining_floor(k) / pi_.vpp;  // layers alike: any N - k of them
    // Its layers' steps alone (as the bottleneck floor's) pass the cut:
    // no stage to evaluate.
    if (m * k * layer + others > cut) continue;
    for (int i = std::max(0, pi_.pp - 2); i < pi_.pp; ++i) {
      const StageEval& e = stage(h, i, n_ - k, k);
      if (e.feasible && m * (e.fwd + e.bwd) + others + (e.sync + e.opt) <= cut) return k;
    }
  }
  return 0;
}

double Evaluator::mix_lower_bound(const std::vector<int>& c, const std::vector<int>* most,
                                  double cut) const {
  // The shape of the mix's types (as bound_shape's of a configuration's).
  BoundShape s;
  for (int h = 0; h < types_; ++h) {
    if (c[static_cast<std::size_t>(h)] == 0) continue;
    s.dense_tail = std::min(s.dense_tail, tails_[static_cast<std::size_t>(h)].dense);
    s.moe_tail = std::min(s.moe_tail, tails_[static_cast<std::size_t>(h)].moe);
    const TypeCosts& tc = costs_[static_cast<std::size_t>(h)];
    const double d = tc.dense.fwd_s + tc.dense.bwd_s;
    const double e = tc.moe.fwd_s + tc.moe.bwd_s;
    s.dense = std::min(s.dense, d);
    s.moe = std::min(s.moe, e);
    s.emb = std::min(s.emb, tc.embedding_fwd_s + tc.embedding_bwd_s);
    s.output = std::min(s.output, tc.output_fwd_s + tc.output_bwd_s);
    StageFloor f{d, e, tc.embedding_fwd_s + tc.embedding_bwd_s, c[static_cast<std::size_t>(h)]};
    if (most != nullptr) f.most = (*most)[static_cast<std::size_t>(h)];
    for (int hp = 0; hp < types_; ++hp) {
      if (c[static_cast<std::size_t>(hp)] == 0) continue;
      const CostModel::Boundary& b = boundary(hp, h);
      f.fixed = std::min(f.fixed, b.fwd_s + b.bwd_s);
      s.link = std::min(s.link, b.fwd_s + b.bwd_s);
    }
    s.types.push_back(f);
  }
  const int dense = n_ - moe_total_;
  const LatencyFloorInputs in = floor_inputs(s, pi_.pp, dense, moe_total_, m_, pi_.vpp);
  if (std::isfinite(cut)) {
    if (const double above = floor_past_cut(s.types, in, cut, false).latency; above > cut) {
      return above;
    }
  }
  return latency_floor(s.types, in, bottleneck_floor(s.types, pi_.pp, dense, moe_total_)).latency;
}

StageEval& MemoMap::insert(std::uint64_t key, std::uint32_t gen) {
  if (gen != gen_) {
    gen_ = gen;
    count_ = 0;
  }
  if ((static_cast<std::size_t>(count_) + 1) * 2 > slots_.size()) {
    rehash(std::max<std::size_t>(1024, slots_.size() * 2));
  }
  const std::uint32_t index = count_++;
  if (index / kChunk == chunks_.size()) chunks_.push_back(std::make_unique<StageEval[]>(kChunk));
  const std::size_t mask = slots_.size() - 1;
  std::size_t s = hash(key) & mask;
  while (slots_[s].gen == gen) s = (s + 1) & mask;
  slots_[s] = {key, gen, index};
  StageEval& e = chunk_entry(index);
  e = StageEval{};
  return e;
}

void MemoMap::rehash(std::size_t size) {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(size, Slot{});
  const std::size_t mask = size - 1;
  for (const Slot& slot : old) {
    if (slot.gen != gen_) continue;  // empty or stale
    std::size_t s = hash(slot.key) & mask;
    while (slots_[s].gen == gen_) s = (s + 1) & mask;
    slots_[s] = slot;
  }
}

void MemoMap::reset() {
  std::fill(slots_.begin(), slots_.end(), Slot{});
  gen_ = 0;
  count_ = 0;
}

StageShape Evaluator::shape_at(int i, int j, int n) const {
  StageShape shape;
  shape.position = i;
  shape.first_layer = j;
  shape.layers = n;
  shape.moe_layers = model_.moe_layers_in(j, n);
  shape.prev_type = -1;
  return shape;
}

bool Evaluator::fits(int h, int i, int j, int n) const {
  return model_.fits_with_recompute(pi_, costs_[static_cast<std::size_t>(h)], shape_at(i, j, n));
}

const StageEval& Evaluator::evaluate(std::size_t key, int h, int i, int j, int n) {
  StageEval* slot = nullptr;
  if (stamps_ != nullptr) {
    slot = &memo_[key];
    stamps_[key] = generation_;
  } else {
    // The map reuses its entries from one generation to the next: only
    // the thread's newest evaluator may fill it (search_config and
    // bruteforce_config build one at a time; the const ones never fill).
    HAPMOE_REQUIRE(generation_ == thread_generation,
                   "Evaluator: an older evaluator of this thread filled the memo map");
    slot = &map_->insert(key, generation_);
  }
  StageEval& e = *slot;
  e = StageEval{};
  const CostModel::RecomputeChoice choice =
      model_.least_recompute_cost(pi_, costs_[static_cast<std::size_t>(h)], shape_at(i, j, n));
  e.feasible = choice.recompute.has_value();
  e.recompute = choice.recompute.value_or(Recompute{RecomputeKind::kFull, n});
  const StageCost& c = choice.cost;
  e.fwd = c.fwd_s;
  e.bwd = c.bwd_s;
  e.sync = c.dp_sync_s;
  e.opt = c.optimizer_s;
  e.over = c.memory.total() - c.capacity_bytes;
  return e;
}

}  // namespace hapmoe::hsdp
