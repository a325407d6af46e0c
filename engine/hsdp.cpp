// HS-DP: the exact search of one configuration pi (docs/search.md).
//
// Stages are placed first to last. A DP state is (u, j, h_prev): u the stage
// groups used per device type so far (so i = sum u stages are placed), j the
// layers covered, h_prev the type of the last stage (the next boundary
// depends on it). T_iter = sum + (M-1)*max + tail is not a sum, so a state
// keeps a Pareto front of labels (sum of stage steps, max stage step, max
// stage sync+optimizer): every completion adds to the sum and can only raise
// the maxima, so a label that is no better in any of the three can never
// lead to a better plan. That makes the DP exact (tests/engine: DP ==
// brute force).
//
// Each stage takes the least recomputation that fits (the choice with the
// least added time; it dominates every other choice for that stage). The
// prunings:
//   (1) load balance: the stage-type mix c (stages per type, sum = PP) is
//       enumerated; the balanced stage time T* = N / sum_h c_h / tau_h
//       gives each type its share n*_h = T* / tau_h of layers, and n_i must
//       lie in [floor((1-delta) n*), ceil((1+delta) n*)]. On a homogeneous
//       cluster n* = N/PP, so the even split is always inside.
//   (2) memory: a stage that does not fit even with full recomputation is
//       cut at once. With this pruning off it is carried, marked
//       infeasible, and dropped only when the plan is complete.
//   (3) hetero comm: a boundary between two device types whose transfer
//       (forward + backward) exceeds eta * T_comp is cut, T_comp the mean
//       stage step of a balanced split.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <limits>
#include <memory>
#include <new>
#include <numeric>
#include <tuple>
#include <type_traits>
#include <vector>

#include "costmodel/errors.h"
#include "engine/search.h"

namespace hapmoe {

SearchStats& SearchStats::operator+=(const SearchStats& o) {
  configs += o.configs;
  configs_evaluated += o.configs_evaluated;
  states += o.states;
  transitions += o.transitions;
  pruned_load_balance += o.pruned_load_balance;
  pruned_memory += o.pruned_memory;
  pruned_hetero_comm += o.pruned_hetero_comm;
  pruned_bound += o.pruned_bound;
  configs_bounded += o.configs_bounded;
  feasible += o.feasible;
  seconds += o.seconds;
  return *this;
}

namespace {

auto recompute_key(const Recompute& r) {
  return std::make_tuple(static_cast<int>(r.kind), r.layers);
}

}  // namespace

bool plan_key_less(const Plan& a, const Plan& b) {
  const ParallelConfig& x = a.parallel;
  const ParallelConfig& y = b.parallel;
  const auto kx = std::tie(x.pp, x.tp, x.cp, x.ep, x.tpe, x.dp, x.micro_batch);
  const auto ky = std::tie(y.pp, y.tp, y.cp, y.ep, y.tpe, y.dp, y.micro_batch);
  if (kx != ky) return kx < ky;
  const std::size_t n = std::min(a.stages.size(), b.stages.size());
  for (std::size_t i = 0; i < n; ++i) {
    const StagePlan& s = a.stages[i];
    const StagePlan& t = b.stages[i];
    const auto ks = std::make_tuple(s.device_type, s.layers, recompute_key(s.recompute));
    const auto kt = std::make_tuple(t.device_type, t.layers, recompute_key(t.recompute));
    if (ks != kt) return ks < kt;
  }
  return a.stages.size() < b.stages.size();
}

bool candidate_less(const PlanCandidate& a, const PlanCandidate& b) {
  if (a.latency_s != b.latency_s) return a.latency_s < b.latency_s;
  return plan_key_less(a.plan, b.plan);
}

namespace {

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

// What one more layer of each kind adds to a stage's sync + optimizer time
// on a type (the tail is affine in the stage's parameters): the difference
// between a two-layer and a one-layer stage at the same position.
struct LayerTails {
  double dense = 0;
  double moe = 0;
};

LayerTails layer_tails(const CostModel& model, const ParallelConfig& pi, const TypeCosts& tc) {
  auto tail = [&](int layers, int moe_layers) {
    StageShape s;
    s.position = std::min(1, pi.pp - 1);
    s.layers = layers;
    s.moe_layers = moe_layers;
    const StageCost c = model.stage_cost(pi, tc, s);
    return c.dp_sync_s + c.optimizer_s;
  };
  LayerTails t;
  t.dense = tail(2, 0) - tail(1, 0);
  if (model.workload().model.is_moe()) t.moe = tail(2, 2) - tail(1, 1);
  return t;
}

// The least the layers can add to the largest stage tail: the tails of all
// stages sum to at least every layer's cheapest tail, and the largest is at
// least the mean.
double tail_floor(int dense_layers, int moe_layers, double dense_tail, double moe_tail, int pp) {
  return (dense_layers * dense_tail + moe_layers * moe_tail) / pp;
}

using StageFloor = BoundShape::Type;

// A lower bound on the slowest stage step of every plan with `pp` stages
// drawn from `types` (at most `stages` of each) holding `dense` dense and
// `moe` MoE layers, one at least per stage: the least T at which the
// stages, with n_i <= (T - fixed) / step layers each, can hold all the
// layers (and, separately, all the MoE and all the dense layers), the
// stages taken from the types that hold the most at T. Discrete, so
// tighter than the continuous split when stages hold few layers;
// +infinity when pp stages are not available.
double bottleneck_floor(const std::vector<StageFloor>& types, int pp, int dense, int moe) {
  const double inf = std::numeric_limits<double>::infinity();
  int available = 0;
  double hi = 0.0;
  for (const StageFloor& t : types) {
    available += t.stages;
    hi = std::max(hi, t.fixed + (dense + moe) * std::max(t.dense, t.moe));
  }
  hi = 2.0 * hi + std::numeric_limits<double>::min();  // clear of rounding
  if (available < pp || pp <= 0 || dense + moe < pp) return inf;
  std::vector<std::pair<long long, int>> hold(types.size());  // (layers a stage holds, stages)
  // Do pp stages with at most T each hold `need` layers priced `price`?
  const auto holds = [&](double t_step, int need, auto price, bool one_each) {
    for (std::size_t k = 0; k < types.size(); ++k) {
      const double per = price(types[k]);
      const double room = (t_step - types[k].fixed) / per;
      hold[k] = {room < 0.0 ? 0 : static_cast<long long>(std::min(room, 1e9)), types[k].stages};
    }
    std::sort(hold.begin(), hold.end(), std::greater<>());
    long long total = 0;
    int left = pp;
    for (const auto& [layers, stages] : hold) {
      const int take = std::min(stages, left);
      if (take == 0) break;
      if (one_each && layers < 1) return false;
      total += layers * take;
      left -= take;
    }
    return total >= need;
  };
  const auto fits = [&](double t_step) {
    return holds(
               t_step, dense + moe,
               [&](const StageFloor& t) {
                 return moe == 0 ? t.dense : (dense == 0 ? t.moe : std::min(t.dense, t.moe));
               },
               true) &&
           (moe == 0 || holds(
                            t_step, moe, [](const StageFloor& t) { return t.moe; }, false)) &&
           (dense == 0 || holds(
                              t_step, dense, [](const StageFloor& t) { return t.dense; }, false));
  };
  if (!fits(hi)) return inf;  // cannot happen: every stage holds N layers at hi
  double lo = 0.0;            // fits(lo) is false
  if (fits(lo)) return 0.0;
  // To 1e-6 of hi (hi is a few times the answer): a bound this close is
  // as good as exact for skipping, at a third of the work.
  while (hi - lo > 1e-6 * hi) {
    const double mid = 0.5 * (lo + hi);
    (fits(mid) ? hi : lo) = mid;
  }
  // Every plan's slowest stage exceeds lo; the margin covers the rounding
  // of stage steps summed in another order than fixed + n * step.
  return lo * (1.0 - 1e-9);
}

// Zeroed storage of `size` T (T implicit-lifetime: trivially copyable and
// destructible), from calloc, replaced whole when it must grow.
template <class T>
struct MemoBlock {
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  std::unique_ptr<T, Free> data;
  std::size_t size = 0;
  void grow(std::size_t n) {
    static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>);
    data.reset();
    size = 0;
    data.reset(static_cast<T*>(std::calloc(n, sizeof(T))));
    if (!data) throw std::bad_alloc();
    size = n;
  }
};

// Per-configuration evaluation context: type costs, boundaries, capacities,
// and a memo of stage evaluations.
class Evaluator {
 public:
  Evaluator(const CostModel& model, const ParallelConfig& pi, const SearchOptions& options)
      : model_(model),
        pi_(pi),
        n_(model.workload().model.num_layers),
        types_(model.cluster().num_types()),
        m_(model.num_microbatches(pi)) {
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
      const TypeCosts& tc = costs_[static_cast<std::size_t>(h)];
      min_dense_step_ = std::min(min_dense_step_, tc.dense.fwd_s + tc.dense.bwd_s);
      min_moe_step_ = std::min(min_moe_step_, tc.moe.fwd_s + tc.moe.bwd_s);
    }
    boundary_.assign(static_cast<std::size_t>((types_ + 1) * types_), {});
    for (int hp = 0; hp < types_; ++hp) {
      for (int h = 0; h < types_; ++h) {
        if (caps_[static_cast<std::size_t>(hp)] > 0 && caps_[static_cast<std::size_t>(h)] > 0) {
          boundary_[static_cast<std::size_t>((hp + 1) * types_ + h)] = model.boundary(pi, hp, h);
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
    // The memo is reused across configurations of a thread: an entry is
    // valid when its stamp is this evaluator's generation, so nothing is
    // cleared between configurations. Its blocks come from calloc: a
    // search touches few of the types x PP x (N+1)^2 entries, and the
    // pages it never touches are never faulted in (DeepSeek-V3 at PP 40:
    // about 26 MB, whose zeroing by std::vector made the first work
    // estimate at that depth take 86 ms instead of 2); a larger block
    // needs no copy, its stamps are all 0, i.e. stale.
    thread_local MemoBlock<StageEval> memo;
    thread_local MemoBlock<std::uint32_t> stamps;
    thread_local std::uint32_t generation = 0;
    const std::size_t size = static_cast<std::size_t>(types_) * pi.pp * (n_ + 1) * (n_ + 1);
    if (memo.size < size) {
      memo.grow(size);
      stamps.grow(size);
    }
    if (++generation == 0) {  // wrapped: stale stamps could look valid
      std::fill(stamps.data.get(), stamps.data.get() + stamps.size, 0);
      generation = 1;
    }
    memo_ = memo.data.get();
    stamps_ = stamps.data.get();
    generation_ = generation;
  }

  int types() const { return types_; }
  int layers() const { return n_; }
  int microbatches() const { return m_; }
  int cap(int h) const { return caps_[static_cast<std::size_t>(h)]; }
  const ParallelConfig& pi() const { return pi_; }

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
    r.i = (i > 0 && i < pi_.pp - 1 && pi_.pp - i >= m_) ? 1 : i;  // m_ in flight
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
    if (stamps_[key] == generation_) return memo_[key];
    return evaluate(key, r.h, r.i, j, n);
  }
  const StageEval& stage(int h, int i, int j, int n) { return stage(row(h, i, j), n); }

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
  TailLine tail_line(int h, bool first, bool last) const {
    const TypeCosts& tc = costs_[static_cast<std::size_t>(h)];
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

  // The cheapest step of the remaining layers [j, N) on any usable type,
  // without recomputation or boundaries: a lower bound on what they add to
  // the sum of stage steps.
  double remaining_floor(int j) const {
    const int moe = model_.moe_layers_in(j, n_ - j);
    return (n_ - j - moe) * min_dense_step_ + moe * min_moe_step_;
  }

  // remaining_floor(j) for j = 0 .. N, computed once per evaluator.
  const double* remaining_floors() {
    if (rem_floor_.empty()) {
      rem_floor_.resize(static_cast<std::size_t>(n_) + 1);
      for (int j = 0; j <= n_; ++j) rem_floor_[static_cast<std::size_t>(j)] = remaining_floor(j);
    }
    return rem_floor_.data();
  }

  // The most layers a stage of type h can hold with the least recomputation
  // that fits (full at worst), at the later pipeline positions (fewest
  // micro-batches in flight); N when memory does not limit it below the
  // most a stage can take, 0 if not even one layer fits.
  int max_fitting_layers(int h) {
    const int most = n_ - (pi_.pp - 1);  // the most a stage can take
    int best = 0;
    for (int i = std::max(0, pi_.pp - 2); i < pi_.pp; ++i) {
      if (stage(h, i, n_ - most, most).feasible) return n_;  // memory does not limit
      int lo = 0;                                            // fits (0 trivially)
      int hi = most - 1;
      while (lo < hi) {
        const int mid = lo + (hi - lo + 1) / 2;
        if (stage(h, i, n_ - mid, mid).feasible) {
          lo = mid;
        } else {
          hi = mid - 1;
        }
      }
      best = std::max(best, lo);
    }
    return best;
  }

  // The cheapest step of one layer of the model on type h.
  double layer_floor(int h) const {
    const TypeCosts& tc = costs_[static_cast<std::size_t>(h)];
    const double d = tc.dense.fwd_s + tc.dense.bwd_s;
    const double e = tc.moe.fwd_s + tc.moe.bwd_s;
    return moe_total_ == n_ ? e : (moe_total_ == 0 ? d : std::min(d, e));
  }

  // A lower bound on the latency of every plan with stage mix c: the sum of
  // steps is at least every layer, the embedding, the output layer and
  // PP - 1 boundaries at their cheapest in the mix, and the slowest stage
  // at least the bottleneck floor of the mix (recomputation only adds).
  double mix_lower_bound(const std::vector<int>& c) const {
    const double inf = std::numeric_limits<double>::infinity();
    double dense = inf;
    double moe = inf;
    double emb = inf;
    double out = inf;
    double link = inf;
    double dense_tail = inf;
    double moe_tail = inf;
    std::vector<StageFloor> floors;
    for (int h = 0; h < types_; ++h) {
      if (c[static_cast<std::size_t>(h)] == 0) continue;
      dense_tail = std::min(dense_tail, tails_[static_cast<std::size_t>(h)].dense);
      moe_tail = std::min(moe_tail, tails_[static_cast<std::size_t>(h)].moe);
      const TypeCosts& tc = costs_[static_cast<std::size_t>(h)];
      const double d = tc.dense.fwd_s + tc.dense.bwd_s;
      const double e = tc.moe.fwd_s + tc.moe.bwd_s;
      dense = std::min(dense, d);
      moe = std::min(moe, e);
      emb = std::min(emb, tc.embedding_fwd_s + tc.embedding_bwd_s);
      out = std::min(out, tc.output_fwd_s + tc.output_bwd_s);
      StageFloor f{d, e, tc.embedding_fwd_s + tc.embedding_bwd_s, c[static_cast<std::size_t>(h)]};
      for (int hp = 0; hp < types_; ++hp) {
        if (c[static_cast<std::size_t>(hp)] == 0) continue;
        const CostModel::Boundary& b = boundary(hp, h);
        f.fixed = std::min(f.fixed, b.fwd_s + b.bwd_s);
        link = std::min(link, b.fwd_s + b.bwd_s);
      }
      floors.push_back(f);
    }
    const double sum = (n_ - moe_total_) * (moe_total_ == n_ ? 0.0 : dense) +
                       moe_total_ * (moe_total_ > 0 ? moe : 0.0) + emb + out + (pi_.pp - 1) * link;
    return sum + (m_ - 1) * bottleneck_floor(floors, pi_.pp, n_ - moe_total_, moe_total_) +
           tail_floor(n_ - moe_total_, moe_total_, dense_tail, moe_tail, pi_.pp);
  }

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
  std::vector<int> caps_;
  std::vector<TypeCosts> costs_;
  std::vector<CostModel::Boundary> boundary_;
  double min_dense_step_ = 0;
  double min_moe_step_ = 0;
  int moe_total_ = 0;
  std::vector<LayerTails> tails_;
  // A memo miss: the stage with its least recomputation.
  [[gnu::noinline]] const StageEval& evaluate(std::size_t key, int h, int i, int j, int n) {
    StageEval& e = memo_[key];
    stamps_[key] = generation_;
    e = StageEval{};
    const TypeCosts& tc = costs_[static_cast<std::size_t>(h)];
    StageShape shape;
    shape.position = i;
    shape.first_layer = j;
    shape.layers = n;
    shape.moe_layers = model_.moe_layers_in(j, n);
    shape.prev_type = -1;
    const std::optional<Recompute> r = model_.least_recompute(pi_, tc, shape);
    e.feasible = r.has_value();
    shape.recompute = r.value_or(Recompute{RecomputeKind::kFull, n});
    if (shape.recompute.kind == RecomputeKind::kFull) {
      shape.moe_in_first_recomputed = model_.moe_layers_in(j, shape.recompute.layers);
    }
    e.recompute = shape.recompute;
    const StageCost c = model_.stage_cost(pi_, tc, shape);
    e.fwd = c.fwd_s;
    e.bwd = c.bwd_s;
    e.sync = c.dp_sync_s;
    e.opt = c.optimizer_s;
    e.over = c.memory.total() - c.capacity_bytes;
    return e;
  }

  std::vector<double> rem_floor_;  // remaining_floors()
  std::vector<int> kind_;          // per layer: 1 if MoE
  std::vector<int> run_;           // per layer: the run of its kind from it on
  std::vector<int> first_run_;     // (kind, length): the first such run
  StageEval* memo_ = nullptr;
  std::uint32_t* stamps_ = nullptr;
  std::uint32_t generation_ = 0;
};

// One DP label: the summary of a partial plan and how it was reached.
struct Label {
  double sum = 0;        // sum of stage steps
  double max = 0;        // max stage step
  double tail = -1;      // max stage sync + optimizer
  double tail_sync = 0;  // sync and optimizer of the first stage reaching tail
  double tail_opt = 0;
  std::int32_t parent = -1;  // arena index of the previous label
  std::int16_t type = 0;
  std::int16_t layers = 0;
  bool feasible = true;
  // Canonical order of partial plans of one level (all have i stages):
  // (rank of the parent in its level, type, layers). `rank` is this label's
  // position in that order, assigned once its level is complete.
  std::int64_t key = 0;
  std::int32_t rank = 0;
};

// Appending a stage to a label, with the arithmetic of iteration_latency.
Label extend(const Label& from, std::int32_t parent, int h, int n, const StageEval& e,
             const CostModel::Boundary& b) {
  Label l;
  const double fwd = e.fwd + b.fwd_s;
  const double bwd = e.bwd + b.bwd_s;
  const double step = fwd + bwd;
  l.sum = from.sum + step;
  l.max = std::max(from.max, step);
  if (e.sync + e.opt > from.tail) {
    l.tail = e.sync + e.opt;
    l.tail_sync = e.sync;
    l.tail_opt = e.opt;
  } else {
    l.tail = from.tail;
    l.tail_sync = from.tail_sync;
    l.tail_opt = from.tail_opt;
  }
  l.parent = parent;
  l.type = static_cast<std::int16_t>(h);
  l.layers = static_cast<std::int16_t>(n);
  l.feasible = from.feasible && e.feasible;
  l.key = (static_cast<std::int64_t>(from.rank) << 32) | (static_cast<std::int64_t>(h) << 16) | n;
  return l;
}

double latency(const Label& l, int m) {
  IterationBreakdown it;
  it.edge_s = l.sum;
  it.middle_s = (m - 1) * l.max;
  it.dp_sync_s = l.tail_sync;
  it.optimizer_s = l.tail_opt;
  return it.total();
}

// a dominates b (same state): no worse in sum, max and tail, and either
// not later in the canonical plan order or ahead in the sum by more than
// `gap`. Then every completion of a is no worse than the same completion
// of b in (latency, plan key) -- floating-point sums and maxima are
// monotone -- so dropping b keeps the DP exact, ties included.
//
// Ties: a better max or tail can be absorbed by a later, larger stage, so
// b's completion may tie a's and win on the key; a and b then both stay
// unless a is ahead in the sum by more than `gap`, a margin far above the
// rounding of any latency up to U, the best latency this configuration
// can still matter at (docs/search.md): the completions of b are then
// strictly slower. With no such U yet, gap is infinite and the key
// decides. Within a level, partial plans compare lexicographically by
// (parent's rank, type, layers): Label::key. (At one state both paths
// place the same layers, so the recomputation of the first differing
// stage is decided by its type and layers.)
template <class A, class B>
bool dominates(const A& a, const B& b, double gap) {
  return a.feasible == b.feasible && a.sum <= b.sum && a.max <= b.max && a.tail <= b.tail &&
         (a.key <= b.key || b.sum - a.sum > gap);
}

// The sum margin of `dominates` for plans of `pp` stages whose latency
// matters only up to `upper`: a latency is a sum of pp + 3 terms, each
// rounding costs at most 2^-53 of it, so a lead of more than
// 2 (pp + 3) 2^-53 upper survives on both sides; 1e-14 (pp + 4) upper is
// about 20 times that.
double tie_gap(int pp, double upper) {
  return std::isfinite(upper) ? 1e-14 * (pp + 4) * upper : std::numeric_limits<double>::infinity();
}

// Rebuilds the plan of a complete label.
Plan rebuild(const std::vector<Label>& arena, std::int32_t index, Evaluator& ev) {
  Plan plan;
  plan.parallel = ev.pi();
  std::vector<std::int32_t> chain;
  for (std::int32_t k = index; k >= 0; k = arena[static_cast<std::size_t>(k)].parent) {
    if (arena[static_cast<std::size_t>(k)].layers > 0) chain.push_back(k);
  }
  std::reverse(chain.begin(), chain.end());
  int j = 0;
  for (std::size_t i = 0; i < chain.size(); ++i) {
    const Label& l = arena[static_cast<std::size_t>(chain[i])];
    const StageEval& e = ev.stage(l.type, static_cast<int>(i), j, l.layers);
    plan.stages.push_back({l.type, l.layers, e.recompute});
    j += l.layers;
  }
  return plan;
}

// Offers a finished label to the configuration's best.
void offer(ConfigOutcome& out, const std::vector<Label>& arena, std::int32_t index, Evaluator& ev) {
  const Label& l = arena[static_cast<std::size_t>(index)];
  if (!l.feasible) return;
  ++out.stats.feasible;
  PlanCandidate c{latency(l, ev.microbatches()), {}};
  if (out.best && c.latency_s > out.best->latency_s) return;
  c.plan = rebuild(arena, index, ev);
  if (!out.best || candidate_less(c, *out.best)) out.best = std::move(c);
}

void note_shortfall(ConfigOutcome& out, const StageEval& e, const ParallelConfig& pi, int stage,
                    int h, int n) {
  if (e.feasible || e.over >= out.closest.bytes) return;
  out.closest.bytes = e.over;
  out.closest.parallel = pi;
  out.closest.stage = stage;
  out.closest.device_type = h;
  out.closest.layers = n;
}

// Layer windows per (stage position, type): [lo, hi].
struct Windows {
  std::vector<int> lo;
  std::vector<int> hi;
  int types = 0;
  int lo_at(int i, int h) const { return lo[static_cast<std::size_t>(i * types + h)]; }
  int hi_at(int i, int h) const { return hi[static_cast<std::size_t>(i * types + h)]; }
};

// Reusable storage of the DP's fronts: an open-addressing map from a state
// key to a front in a pool. Kept per thread and reused across runs, so a
// run allocates nothing once the pool has grown.
template <class T>
class FrontStore {
 public:
  static constexpr std::uint64_t kEmpty = ~std::uint64_t{0};

  // The front of `key`, created empty if new; `created` tells which.
  std::vector<T>& at(std::uint64_t key, bool& created) {
    if ((used_.size() + 1) * 2 > keys_.size()) grow();
    std::size_t mask = keys_.size() - 1;
    std::size_t slot = hash(key) & mask;
    while (keys_[slot] != kEmpty) {
      if (keys_[slot] == key) {
        created = false;
        return pool_[static_cast<std::size_t>(values_[slot])];
      }
      slot = (slot + 1) & mask;
    }
    created = true;
    keys_[slot] = key;
    if (pool_used_ == pool_.size()) pool_.emplace_back();
    values_[slot] = static_cast<std::int32_t>(pool_used_);
    used_.push_back(slot);
    auto& front = pool_[pool_used_++];
    front.clear();
    return front;
  }

  // Every (key, front) present, in insertion order.
  std::size_t size() const { return used_.size(); }
  std::uint64_t key(std::size_t k) const { return keys_[used_[k]]; }
  std::vector<T>& front(std::size_t k) {
    return pool_[static_cast<std::size_t>(values_[used_[k]])];
  }
  const std::vector<T>& front(std::size_t k) const {
    return pool_[static_cast<std::size_t>(values_[used_[k]])];
  }

  // Empties the map (the fronts stay in the pool until recycled).
  void clear() {
    for (std::size_t slot : used_) keys_[slot] = kEmpty;
    used_.clear();
  }
  // Makes every front of the pool reusable.
  void recycle_pool() { pool_used_ = 0; }

 private:
  static std::size_t hash(std::uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return static_cast<std::size_t>(k);
  }
  void grow() {
    std::vector<std::uint64_t> old_keys = std::move(keys_);
    std::vector<std::int32_t> old_values = std::move(values_);
    const std::size_t size = std::max<std::size_t>(64, old_keys.size() * 2);
    keys_.assign(size, kEmpty);
    values_.assign(size, 0);
    std::vector<std::size_t> old_used = std::move(used_);
    used_.clear();
    for (std::size_t slot : old_used) {
      std::size_t s = hash(old_keys[slot]) & (size - 1);
      while (keys_[s] != kEmpty) s = (s + 1) & (size - 1);
      keys_[s] = old_keys[slot];
      values_[s] = old_values[slot];
      used_.push_back(s);
    }
  }

  std::vector<std::uint64_t> keys_;
  std::vector<std::int32_t> values_;
  std::vector<std::size_t> used_;
  std::vector<std::vector<T>> pool_;
  std::size_t pool_used_ = 0;
};

// The entries of `store` in increasing key order (deterministic runs).
template <class T>
void key_order(const FrontStore<T>& store,
               std::vector<std::pair<std::uint64_t, std::size_t>>& order) {
  order.resize(store.size());
  for (std::size_t k = 0; k < order.size(); ++k) order[k] = {store.key(k), k};
  std::sort(order.begin(), order.end());  // keys are distinct
}

// A label of the level being built, inline in its state's front: the
// dominance scan reads contiguous memory, and a label that a later one
// dominates never reaches the arena.
struct Entry {
  double sum = 0;
  double max = 0;
  double tail = 0;
  std::int64_t key = 0;
  double tail_sync = 0;
  double tail_opt = 0;
  std::int32_t parent = -1;
  std::int32_t seq = 0;  // insertion order in the level
  bool feasible = true;
};

Label to_label(const Entry& c) {
  Label l;
  l.sum = c.sum;
  l.max = c.max;
  l.tail = c.tail;
  l.tail_sync = c.tail_sync;
  l.tail_opt = c.tail_opt;
  l.parent = c.parent;
  l.type = static_cast<std::int16_t>((c.key >> 16) & 0xffff);
  l.layers = static_cast<std::int16_t>(c.key & 0xffff);
  l.feasible = c.feasible;
  l.key = c.key;
  return l;
}

// dominates(a, b, gap) when a.sum <= b.sum is known; `&` instead of `&&`
// (the same value, fewer unpredictable branches).
inline bool dominates_given_sum(const Entry& a, const Entry& b, double gap) {
  return (a.feasible == b.feasible) & (a.max <= b.max) & (a.tail <= b.tail) &
         ((a.key <= b.key) | (b.sum - a.sum > gap));
}

// Offers `cand` to a front: dropped if a label of the front dominates it,
// otherwise inserted after the labels it dominates are removed -- the
// same set as checking and erasing over the front in any order.
//
// A front is kept sorted by (feasible, sum): the infeasible labels first,
// and within each part by sum, labels whose sum is NaN (which dominate
// nothing and nothing dominates) at the part's end. Feasible and
// infeasible labels never dominate each other, so only cand's part is
// scanned; only labels with sum <= cand.sum can dominate cand, so that
// scan stops at the first larger sum; only labels with sum >= cand.sum
// can be dominated by it. The DP still expands a front in insertion order
// (`seq`, restored when the level is complete) where ties depend on it.
void merge(std::vector<Entry>& front, const Entry& cand, double gap) {
  if (front.empty()) {
    front.push_back(cand);
    return;
  }
  Entry* m = front.data();
  // cand's part [lo, hi).
  std::size_t split = 0;  // the first feasible label
  if (!front.empty() && !m[0].feasible) {
    split =
        static_cast<std::size_t>(std::partition_point(front.begin(), front.end(),
                                                      [](const Entry& e) { return !e.feasible; }) -
                                 front.begin());
  }
  const std::size_t lo = cand.feasible ? split : 0;
  const std::size_t hi = cand.feasible ? front.size() : split;
  // k: the first label with sum > cand.sum (or NaN); q: the first with
  // sum >= cand.sum.
  std::size_t k = hi;
  if (hi - lo <= 16) {  // short: linearly, from the top
    while (k > lo && !(m[k - 1].sum <= cand.sum)) --k;
  } else {
    k = static_cast<std::size_t>(
        std::partition_point(front.begin() + static_cast<std::ptrdiff_t>(lo),
                             front.begin() + static_cast<std::ptrdiff_t>(hi),
                             [&](const Entry& e) { return e.sum <= cand.sum; }) -
        front.begin());
  }
  std::size_t q = k;
  while (q > lo && !(m[q - 1].sum < cand.sum)) --q;
  // Downwards from the nearest sums: ties (equal values, an earlier key)
  // and near ties are the likeliest dominators.
  for (std::size_t r = k; r > lo; --r) {
    if (dominates_given_sum(m[r - 1], cand, gap)) return;
  }
  if (cand.sum != cand.sum) k = hi;  // NaN: at the end, dominates nothing
  // The first label cand dominates, if any.
  std::size_t d = q;
  while (d < hi && !(cand.sum <= m[d].sum && dominates_given_sum(cand, m[d], gap))) ++d;
  if (d == hi) {
    front.insert(front.begin() + static_cast<std::ptrdiff_t>(k), cand);
    return;
  }
  // Compact in place, cand taking its place among the survivors (after
  // the equal sums that stay; m[d] is removed, so there is room).
  std::size_t w = 0;
  std::size_t r = 0;
  if (d >= k) {  // cand goes at k: [k, d) moves up by one over m[d]
    std::copy_backward(m + k, m + d, m + d + 1);
    m[k] = cand;
    w = d + 1;
    r = d + 1;
  } else {  // an equal sum is removed: compact up to k, then cand
    w = d;
    for (r = d + 1; r < k; ++r) {
      if (!(cand.sum <= m[r].sum && dominates_given_sum(cand, m[r], gap))) m[w++] = m[r];
    }
    m[w++] = cand;
  }
  for (; r < hi; ++r) {
    if (!(cand.sum <= m[r].sum && dominates_given_sum(cand, m[r], gap))) m[w++] = m[r];
  }
  front.erase(front.begin() + static_cast<std::ptrdiff_t>(w),
              front.begin() + static_cast<std::ptrdiff_t>(hi));
}

// Back to insertion order (fronts are short: insertion sort).
void by_insertion(std::vector<Entry>& front) {
  for (std::size_t a = 1; a < front.size(); ++a) {
    if (front[a - 1].seq < front[a].seq) continue;
    const Entry e = front[a];
    std::size_t b = a;
    while (b > 0 && front[b - 1].seq > e.seq) {
      front[b] = front[b - 1];
      --b;
    }
    front[b] = e;
  }
}

// The least sum, max and tail terms over a front (for the bound).
struct FrontFloor {
  double sum = std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  double tail_sync = std::numeric_limits<double>::infinity();
  double tail_opt = std::numeric_limits<double>::infinity();
  bool usable = false;  // the pre-check applies
};

// The labels of one state of a level: arena[begin, end), in the order they
// entered the state's front.
struct StateRange {
  std::uint64_t key = 0;
  std::int32_t begin = 0;
  std::int32_t end = 0;
};

// Ranks the labels arena[level_begin, end) in canonical order, i.e. by
// key = (parent's rank, type, layers): a radix sort, first by
// (type, layers) < types x (N + 1), then stably by the parent's rank
// (the previous level's `parents` labels are ranked 0 .. parents - 1).
void rank_level(std::vector<Label>& arena, std::int32_t parents, std::int32_t level_begin,
                int types, int n, std::vector<std::int32_t>& bucket,
                std::vector<std::int32_t>& order, std::vector<std::int32_t>& ranked) {
  const auto level_end = static_cast<std::int32_t>(arena.size());
  if (level_end == level_begin) return;
  const auto low = [&](std::int32_t k) {
    const std::int64_t key = arena[static_cast<std::size_t>(k)].key;
    return static_cast<std::size_t>(((key >> 16) & 0xffff) * (n + 1) + (key & 0xffff));
  };
  const auto high = [&](std::int32_t k) {
    return static_cast<std::size_t>(arena[static_cast<std::size_t>(k)].key >> 32);
  };
  const auto count = static_cast<std::size_t>(level_end - level_begin);
  if (count <= 32) {  // a few labels (deep pipelines): sort them directly
    ranked.resize(count);
    for (std::size_t r = 0; r < count; ++r) ranked[r] = level_begin + static_cast<std::int32_t>(r);
    for (std::size_t a = 1; a < count; ++a) {
      const std::int32_t x = ranked[a];
      const std::int64_t key = arena[static_cast<std::size_t>(x)].key;
      std::size_t b = a;
      for (; b > 0 && arena[static_cast<std::size_t>(ranked[b - 1])].key > key; --b) {
        ranked[b] = ranked[b - 1];
      }
      ranked[b] = x;
    }
    for (std::size_t r = 0; r < count; ++r) {
      arena[static_cast<std::size_t>(ranked[r])].rank = static_cast<std::int32_t>(r);
    }
    return;
  }
  bucket.assign(static_cast<std::size_t>(types) * (static_cast<std::size_t>(n) + 1) + 1, 0);
  for (std::int32_t k = level_begin; k < level_end; ++k) ++bucket[low(k) + 1];
  for (std::size_t r = 1; r < bucket.size(); ++r) bucket[r] += bucket[r - 1];
  order.resize(count);
  for (std::int32_t k = level_begin; k < level_end; ++k) {
    order[static_cast<std::size_t>(bucket[low(k)]++)] = k;
  }
  bucket.assign(static_cast<std::size_t>(parents) + 1, 0);
  for (std::int32_t k = level_begin; k < level_end; ++k) ++bucket[high(k) + 1];
  for (std::size_t r = 1; r < bucket.size(); ++r) bucket[r] += bucket[r - 1];
  ranked.resize(count);
  for (const std::int32_t k : order) ranked[static_cast<std::size_t>(bucket[high(k)]++)] = k;
  for (std::size_t r = 0; r < count; ++r) {
    arena[static_cast<std::size_t>(ranked[r])].rank = static_cast<std::int32_t>(r);
  }
}

// The DP over one set of per-type stage limits. With `exact_mix`, a
// complete plan must use exactly `limit[h]` stages of each type (the
// load-balance pruning enumerates mixes); otherwise at most.
//
// A usage vector u (u_h <= limit_h) is coded in mixed radix; a state key
// is (u code, j, h_prev). States are expanded level by level (i stages
// placed), in increasing key order so the run is deterministic.
//
// With `value_only`, labels dominate on (sum, max, tail) alone: the best
// latency is still exact, the plan among equal latencies is not canonical.
void run_dp(Evaluator& ev, const std::vector<int>& limit, bool exact_mix, const Windows& win,
            const SearchOptions& opt, double comp_threshold, double incumbent, bool value_only,
            const CancelCheck* cancel, ConfigOutcome& out) {
  const int pp = ev.pi().pp;
  const int n = ev.layers();
  const int types = ev.types();
  std::vector<std::uint64_t> stride(static_cast<std::size_t>(types));
  std::uint64_t full = 0;  // code of u = limit
  {
    std::uint64_t st = 1;
    for (int h = 0; h < types; ++h) {
      stride[static_cast<std::size_t>(h)] = st;
      full += st * static_cast<std::uint64_t>(limit[static_cast<std::size_t>(h)]);
      st *= static_cast<std::uint64_t>(limit[static_cast<std::size_t>(h)] + 1);
    }
  }
  const auto used_of = [&](std::uint64_t code, int h) {
    return static_cast<int>(code / stride[static_cast<std::size_t>(h)] %
                            static_cast<std::uint64_t>(limit[static_cast<std::size_t>(h)] + 1));
  };
  const std::uint64_t jspan = static_cast<std::uint64_t>(n + 1);
  const std::uint64_t hspan = static_cast<std::uint64_t>(types + 1);
  const auto make_key = [&](std::uint64_t code, int j, int hp) {
    return (code * jspan + static_cast<std::uint64_t>(j)) * hspan +
           static_cast<std::uint64_t>(hp + 1);
  };
  // For the bound: per type, the cheapest layer step (floor_of), the
  // cheapest boundary into a stage of it from a type of `limit` (entry_of)
  // and its output layer (out_of); every stage after the first pays its
  // entry, the last its output too.
  const double inf = std::numeric_limits<double>::infinity();
  double fastest = inf;
  std::vector<double> floor_of(static_cast<std::size_t>(types), 0.0);
  std::vector<double> entry_of(static_cast<std::size_t>(types), 0.0);
  std::vector<double> out_of(static_cast<std::size_t>(types), 0.0);
  double entry_any = inf;        // least entry_of
  double entry_per_floor = inf;  // least entry_of / floor_of
  double out_any = inf;          // least out_of
  double out_per_floor = inf;    // least out_of / floor_of
  for (int h = 0; h < types; ++h) {
    const auto u = static_cast<std::size_t>(h);
    if (limit[u] == 0) continue;
    floor_of[u] = ev.layer_floor(h);
    fastest = std::min(fastest, floor_of[u]);
    entry_of[u] = inf;
    for (int hp = 0; hp < types; ++hp) {
      if (limit[static_cast<std::size_t>(hp)] == 0) continue;
      const CostModel::Boundary& b = ev.boundary(hp, h);
      entry_of[u] = std::min(entry_of[u], b.fwd_s + b.bwd_s);
    }
    out_of[u] = ev.output_step(h);
    entry_any = std::min(entry_any, entry_of[u]);
    entry_per_floor = std::min(entry_per_floor, entry_of[u] / floor_of[u]);
    out_any = std::min(out_any, out_of[u]);
    out_per_floor = std::min(out_per_floor, out_of[u] / floor_of[u]);
  }

  // The fronts of the level being built, keyed by state. Their labels stay
  // inline (Entry) until the level is complete; only the survivors then
  // enter the arena, each state's labels contiguous and in insertion order.
  thread_local FrontStore<Entry> store;
  thread_local std::vector<Label> arena;
  thread_local std::vector<StateRange> current;
  thread_local std::vector<StateRange> upcoming;
  thread_local std::vector<std::pair<std::uint64_t, std::size_t>> order;
  thread_local std::vector<std::int32_t> bucket;
  thread_local std::vector<std::int32_t> ranked;
  thread_local std::vector<std::int32_t> by_low;
  store.clear();
  store.recycle_pool();
  arena.clear();
  arena.push_back(Label{});  // the root: nothing placed
  current.clear();
  current.push_back({make_key(0, 0, -1), 0, 1});
  // Plans slower than this configuration's best so far cannot be its
  // result, nor (with the bound on) slower than the incumbent: the
  // latency that matters is at most U.
  const double gap = value_only ? -inf
                                : tie_gap(pp, std::min(opt.bound ? incumbent : inf,
                                                       out.best ? out.best->latency_s : inf));
  // The bound's threshold: out.best changes only when complete plans are
  // offered, after the last level.
  const double best = out.best ? std::min(incumbent, out.best->latency_s) : incumbent;
  const double threshold = best * (1.0 + 1e-12);
  const int m_less_one = ev.microbatches() - 1;
  // The cheapest step of the layers [j, N), per j (for the bound).
  const double* rem_floor = opt.bound ? ev.remaining_floors() : nullptr;
  // speed_of[speed_at[t] + left] = left / floor_of[t], the terms of
  // speed_left below, divided once per run.
  std::vector<std::size_t> speed_at(static_cast<std::size_t>(types), 0);
  std::vector<double> speed_of;
  for (int t = 0; t < types; ++t) {
    speed_at[static_cast<std::size_t>(t)] = speed_of.size();
    for (int left = 0; left <= limit[static_cast<std::size_t>(t)]; ++left) {
      speed_of.push_back(left / floor_of[static_cast<std::size_t>(t)]);
    }
  }
  std::vector<int> used(static_cast<std::size_t>(types), 0);
  for (int i = 0; i < pp && !current.empty(); ++i) {
    if (cancel != nullptr && (*cancel)()) {
      out.cancelled = true;
      return;
    }
    const int remaining_after = pp - i - 1;
    store.clear();
    store.recycle_pool();
    std::int32_t seq = 0;
    // Expand the states of level i in key order (`current` is sorted).
    for (const StateRange& state : current) {
      const std::uint64_t key = state.key;
      const int hp = static_cast<int>(key % hspan) - 1;
      const int j = static_cast<int>(key / hspan % jspan);
      const std::uint64_t code = key / hspan / jspan;
      ++out.stats.states;
      for (int t = 0; t < types; ++t) used[static_cast<std::size_t>(t)] = used_of(code, t);
      // The least any label of the front can carry into a candidate's
      // bound, for the pre-check below.
      FrontFloor low;
      low.usable = opt.bound && m_less_one > 0;  // 0 * inf would be NaN, never above
      if (low.usable) {
        for (std::int32_t from = state.begin; from < state.end; ++from) {
          const Label& f = arena[static_cast<std::size_t>(from)];
          low.sum = std::min(low.sum, f.sum);
          low.max = std::min(low.max, f.max);
          low.tail_sync = std::min(low.tail_sync, f.tail_sync);
          low.tail_opt = std::min(low.tail_opt, f.tail_opt);
          // A NaN (whose bound is never above the threshold) would be
          // skipped by min: no pre-check then.
          low.usable = low.usable && f.sum == f.sum && f.max == f.max &&
                       f.tail_sync == f.tail_sync && f.tail_opt == f.tail_opt;
        }
      }
      for (int h = 0; h < types; ++h) {
        if (used[static_cast<std::size_t>(h)] >= limit[static_cast<std::size_t>(h)]) continue;
        // Structural bounds: every later stage needs at least a layer.
        const int max_n = n - j - remaining_after;
        if (max_n < 1) continue;
        // The last stage takes all the remaining layers.
        const int min_n = remaining_after == 0 ? max_n : 1;
        const int lo = std::max(min_n, win.lo_at(i, h));
        const int hi = std::min(max_n, win.hi_at(i, h));
        if (!opt.uniform) {  // with --uniform the window is the space itself
          out.stats.pruned_load_balance += (max_n - min_n + 1) - std::max(0, hi - lo + 1);
        }
        const CostModel::Boundary& b = ev.boundary(hp, h);
        if (opt.prune.hetero_comm && hp >= 0 && hp != h && b.fwd_s + b.bwd_s > comp_threshold) {
          out.stats.pruned_hetero_comm += std::max(0, hi - lo + 1);
          continue;
        }
        const std::uint64_t next_code = code + stride[static_cast<std::size_t>(h)];
        // The stages still to place: speed_left, the sum of 1 / (cheapest
        // layer step of their type), and what their fixed steps add to the
        // sum (fixed_left) and to the layers the balanced split must hold
        // (held_left: each fixed step over its type's layer step), exact
        // types with a fixed mix, the cheapest otherwise. A stage of type t
        // holding n layers steps at least fixed + n floor_of[t], so a
        // slowest stage of T holds at most (T - fixed) / floor_of[t].
        double speed_left = 0.0;
        double fixed_left = 0.0;
        double held_left = 0.0;
        if (remaining_after > 0) {
          if (exact_mix) {
            double out_min = inf;
            double out_held = inf;
            for (int t = 0; t < types; ++t) {
              const auto u = static_cast<std::size_t>(t);
              const int left = limit[u] - used[u] - (t == h ? 1 : 0);
              if (left <= 0) continue;
              speed_left += speed_of[speed_at[u] + left];
              fixed_left += left * entry_of[u];
              held_left += left * (entry_of[u] / floor_of[u]);
              out_min = std::min(out_min, out_of[u]);
              out_held = std::min(out_held, out_of[u] / floor_of[u]);
            }
            fixed_left += out_min;
            held_left += out_held;
          } else {
            speed_left = remaining_after / fastest;
            fixed_left = remaining_after * entry_any + out_any;
            held_left = remaining_after * entry_per_floor + out_per_floor;
          }
        }
        const Evaluator::Row stage_row = ev.row(h, i, j);
        for (int layers = lo; layers <= hi; ++layers) {
          const StageEval& e = ev.stage(stage_row, layers);
          if (!e.feasible) {
            note_shortfall(out, e, ev.pi(), i, h, layers);
            if (opt.prune.memory) {
              ++out.stats.pruned_memory;
              continue;
            }
          }
          ++out.stats.transitions;
          const double floor = opt.bound ? rem_floor[j + layers] + fixed_left : 0.0;
          // The slowest stage is at least the balanced split of the layers
          // left over the stages left.
          const double max_floor =
              speed_left > 0.0 ? ((n - j - layers) + held_left) / speed_left : 0.0;
          // What the stage adds, with the arithmetic of extend().
          const double step = (e.fwd + b.fwd_s) + (e.bwd + b.bwd_s);
          const double stage_tail = e.sync + e.opt;
          const std::int64_t low_key = (static_cast<std::int64_t>(h) << 16) | layers;
          if (low.usable) {
            // The bound below, from the front's least values: + and max are
            // monotone in floating point too, so this is at most every
            // label's bound; above the threshold, every label is dropped.
            const double lb = (low.sum + step + floor) +
                              m_less_one * std::max(std::max(low.max, step), max_floor) +
                              std::min(low.tail_sync, e.sync) + std::min(low.tail_opt, e.opt);
            if (lb > threshold) {
              out.stats.pruned_bound += state.end - state.begin;
              continue;
            }
          }
          std::vector<Entry>* dest = nullptr;  // looked up at the first survivor
          for (std::int32_t from = state.begin; from < state.end; ++from) {
            const Label& f = arena[static_cast<std::size_t>(from)];
            Entry cand;
            cand.sum = f.sum + step;
            cand.max = std::max(f.max, step);
            if (stage_tail > f.tail) {
              cand.tail = stage_tail;
              cand.tail_sync = e.sync;
              cand.tail_opt = e.opt;
            } else {
              cand.tail = f.tail;
              cand.tail_sync = f.tail_sync;
              cand.tail_opt = f.tail_opt;
            }
            if (opt.bound) {
              // Every completion adds at least `floor` to the sum and keeps
              // the maxima; the margin keeps ties (equal latency, smaller
              // key) and rounding on the safe side.
              const double lb = (cand.sum + floor) + m_less_one * std::max(cand.max, max_floor) +
                                cand.tail_sync + cand.tail_opt;
              if (lb > threshold) {
                ++out.stats.pruned_bound;
                continue;
              }
            }
            cand.key = (static_cast<std::int64_t>(f.rank) << 32) | low_key;
            cand.parent = from;
            cand.seq = seq++;
            // Feasible and infeasible labels never dominate each other (an
            // infeasible one never completes).
            cand.feasible = f.feasible && e.feasible;
            if (dest == nullptr) {
              bool created = false;
              dest = &store.at(make_key(next_code, j + layers, h), created);
            }
            merge(*dest, cand, gap);
          }
        }
      }
    }
    // The level's survivors enter the arena, state by state in key order.
    const auto level_begin = static_cast<std::int32_t>(arena.size());
    const std::int32_t parents = level_begin - current.front().begin;
    key_order(store, order);
    upcoming.clear();
    for (const auto& [state_key, k] : order) {
      std::vector<Entry>& front = store.front(k);
      if (front.empty()) continue;
      // Only value-only runs depend on the order a front is expanded in
      // (which of equal labels stays); otherwise a front is the set of
      // the non-dominated candidates, whatever their order (dominance is
      // then a strict partial order: transitive, and two labels at one
      // state never dominate each other, their keys differing).
      if (value_only) by_insertion(front);
      const auto begin = static_cast<std::int32_t>(arena.size());
      for (const Entry& c : front) arena.push_back(to_label(c));
      upcoming.push_back({state_key, begin, static_cast<std::int32_t>(arena.size())});
    }
    rank_level(arena, parents, level_begin, types, n, bucket, by_low, ranked);
    std::swap(current, upcoming);
  }
  // Complete plans: all PP stages, all N layers, the mix if required.
  for (const StateRange& state : current) {
    const std::uint64_t key = state.key;
    if (static_cast<int>(key / hspan % jspan) != n) continue;
    if (exact_mix && key / hspan / jspan != full) continue;
    ++out.stats.states;
    for (std::int32_t idx = state.begin; idx < state.end; ++idx) offer(out, arena, idx, ev);
  }
}

Windows full_windows(const Evaluator& ev) {
  Windows w;
  w.types = ev.types();
  const std::size_t size = static_cast<std::size_t>(ev.pi().pp * ev.types());
  w.lo.assign(size, 1);
  w.hi.assign(size, ev.layers());
  return w;
}

// n_i = N/PP, the remainder spread over the first stages.
void apply_uniform(const Evaluator& ev, Windows& w) {
  const int pp = ev.pi().pp;
  const int n = ev.layers();
  for (int i = 0; i < pp; ++i) {
    const int layers = n / pp + (i < n % pp ? 1 : 0);
    for (int h = 0; h < ev.types(); ++h) {
      w.lo[static_cast<std::size_t>(i * ev.types() + h)] = layers;
      w.hi[static_cast<std::size_t>(i * ev.types() + h)] = layers;
    }
  }
}

}  // namespace

BoundShape bound_shape(const CostModel& model, const ParallelConfig& pi, const SearchOptions& opt) {
  const ClusterSpec& cluster = model.cluster();
  BoundShape shape;
  std::vector<int> usable;
  for (int h = 0; h < cluster.num_types(); ++h) {
    const int cap = stage_capacity(cluster, h, pi, opt.space.constraints);
    if (cap == 0) continue;
    const TypeCosts tc = model.type_costs(pi, h);
    const double d = tc.dense.fwd_s + tc.dense.bwd_s;
    const double e = tc.moe.fwd_s + tc.moe.bwd_s;
    shape.dense = std::min(shape.dense, d);
    shape.moe = std::min(shape.moe, e);
    shape.emb = std::min(shape.emb, tc.embedding_fwd_s + tc.embedding_bwd_s);
    shape.output = std::min(shape.output, tc.output_fwd_s + tc.output_bwd_s);
    const LayerTails t = layer_tails(model, pi, tc);
    shape.dense_tail = std::min(shape.dense_tail, t.dense);
    shape.moe_tail = std::min(shape.moe_tail, t.moe);
    usable.push_back(h);
    shape.types.push_back({d, e, tc.embedding_fwd_s + tc.embedding_bwd_s, cap});
  }
  // Every stage but the first pays a boundary from a usable type.
  for (std::size_t k = 0; k < usable.size(); ++k) {
    for (const int hp : usable) {
      const CostModel::Boundary b = model.boundary(pi, hp, usable[k]);
      shape.types[k].fixed = std::min(shape.types[k].fixed, b.fwd_s + b.bwd_s);
      shape.link = std::min(shape.link, b.fwd_s + b.bwd_s);
    }
  }
  return shape;
}

ParallelConfig bound_shape_key(const ParallelConfig& pi) {
  ParallelConfig key = pi;
  key.pp = std::min(pi.pp, 3);
  return key;
}

std::vector<std::size_t> bound_shape_order(const std::vector<ParallelConfig>& configs) {
  const std::size_t n = configs.size();
  std::vector<std::size_t> order;
  order.reserve(n);
  // Blocks of equal pp: [begin[b], begin[b + 1]).
  std::vector<std::size_t> begin;
  for (std::size_t c = 0; c < n; ++c) {
    if (c == 0 || configs[c].pp != configs[c - 1].pp) begin.push_back(c);
  }
  begin.push_back(n);
  const std::size_t blocks = begin.size() - 1;
  // Blocks of pp <= 2 (each configuration its own shape) in order; the
  // first block of pp >= 3 gives the keys, and every later block, a
  // subsequence of it in canonical order, is swept alongside.
  std::size_t lead = 0;
  while (lead < blocks && configs[begin[lead]].pp < 3) {
    for (std::size_t c = begin[lead]; c < begin[lead + 1]; ++c) order.push_back(c);
    ++lead;
  }
  if (lead < blocks) {
    std::vector<std::size_t> at(begin.begin() + static_cast<std::ptrdiff_t>(lead) + 1,
                                begin.end() - 1);  // each later block's next
    for (std::size_t c = begin[lead]; c < begin[lead + 1]; ++c) {
      order.push_back(c);
      const ParallelConfig key = bound_shape_key(configs[c]);
      for (std::size_t b = 0; b < at.size(); ++b) {
        std::size_t& k = at[b];
        while (k < begin[lead + 2 + b] && bound_shape_key(configs[k]) == key) order.push_back(k++);
      }
    }
    // What the sweep did not reach (not in canonical order): at the end.
    for (std::size_t b = 0; b < at.size(); ++b) {
      for (std::size_t k = at[b]; k < begin[lead + 2 + b]; ++k) order.push_back(k);
    }
  }
  return order;
}

ConfigBound config_lower_bound(const CostModel& model, const BoundShape& shape,
                               const ParallelConfig& pi) {
  const int n = model.workload().model.num_layers;
  const int moe = model.moe_layers_in(0, n);
  const double inf = std::numeric_limits<double>::infinity();
  if (shape.types.empty()) return {inf, inf};
  const double slowest = bottleneck_floor(shape.types, pi.pp, n - moe, moe);
  if (!std::isfinite(slowest)) return {inf, inf};  // not enough stage groups
  const double sum = (n - moe) * (moe == n ? 0.0 : shape.dense) +
                     moe * (moe > 0 ? shape.moe : 0.0) + shape.emb + shape.output +
                     (pi.pp - 1) * shape.link;
  ConfigBound b;
  b.steps = sum + (model.num_microbatches(pi) - 1) * slowest;
  b.latency = b.steps + tail_floor(n - moe, moe, shape.dense_tail, shape.moe_tail, pi.pp);
  return b;
}

ConfigBound config_lower_bound(const CostModel& model, const ParallelConfig& pi,
                               const SearchOptions& opt) {
  return config_lower_bound(model, bound_shape(model, pi, opt), pi);
}

// The load-balance windows of a stage mix c (docs/search.md, pruning 1):
// per (position, type), the layers around the step-balanced and the
// tail-balanced shares, +-delta. Sets `t_star`, the balanced stage step.
Windows balanced_windows(const Evaluator& ev, const std::vector<int>& c,
                         const std::vector<double>& tau, const std::vector<int>& fit_max,
                         const std::vector<Evaluator::TailLine>& tail_lines, double delta,
                         double& t_star_out) {
  const int types = ev.types();
  const int n = ev.layers();
  const int pp = ev.pi().pp;
  // Balanced stage step T*: every stage i of type h takes
  // n_i = (T* - fixed_i,h) / tau_h layers and the n_i sum to N. The
  // types of the first and last stage are not known yet, so their
  // fixed costs enter weighted by the mix (exact when homogeneous).
  double speed = 0.0;  // sum_h c_h / tau_h
  double fixed = 0.0;  // sum_i fixed_i / tau_h(i), mix-weighted
  for (int t = 0; t < types; ++t) {
    const double ct = c[static_cast<std::size_t>(t)];
    if (ct == 0) continue;
    const double tt = tau[static_cast<std::size_t>(t)];
    const double share = ct / pp;  // chance of being first / last
    speed += ct / tt;
    if (pp == 1) {
      fixed += ev.fixed_step(t, true, true) / tt;
    } else {
      fixed += share * (ev.fixed_step(t, true, false) + ev.fixed_step(t, false, true)) / tt +
               (ct - 2.0 * share) * ev.fixed_step(t, false, false) / tt;
    }
  }
  double t_star = (n + fixed) / speed;
  // Memory: a type whose balanced share exceeds the most layers its stages
  // can hold takes that many, and the others take more (water-filling:
  // sum_t c_t * min((T - F_t) / tau_t, fit_t) = N, solved for T by
  // bisection). Not binding on a homogeneous cluster that fits.
  const auto share_of = [&](int t, double t_step) {
    const double raw = (t_step - ev.fixed_step(t, false, false)) / tau[static_cast<std::size_t>(t)];
    return std::clamp(raw, 0.0, static_cast<double>(fit_max[static_cast<std::size_t>(t)]));
  };
  bool binding = false;
  double capacity = 0.0;
  for (int t = 0; t < types; ++t) {
    if (c[static_cast<std::size_t>(t)] == 0) continue;
    capacity +=
        c[static_cast<std::size_t>(t)] * static_cast<double>(fit_max[static_cast<std::size_t>(t)]);
    const double raw = (t_star - ev.fixed_step(t, false, false)) / tau[static_cast<std::size_t>(t)];
    binding = binding || (fit_max[static_cast<std::size_t>(t)] < n &&
                          raw > fit_max[static_cast<std::size_t>(t)]);
  }
  if (binding && capacity >= n) {
    double lo_t = 0.0;
    double hi_t = t_star;
    const auto placed = [&](double t_step) {
      double sum = 0.0;
      for (int t = 0; t < types; ++t) sum += c[static_cast<std::size_t>(t)] * share_of(t, t_step);
      return sum;
    };
    while (placed(hi_t) < n) hi_t *= 2.0;
    for (int iter = 0; iter < 100; ++iter) {
      const double mid = 0.5 * (lo_t + hi_t);
      (placed(mid) < n ? lo_t : hi_t) = mid;
    }
    t_star = hi_t;
  } else {
    binding = false;
  }
  // The same balance for the tail (gradient sync + optimizer, which
  // grows with the parameters a stage holds): with few micro-batches
  // it can outweigh the step, so the window spans both shares.
  double tail_speed = 0.0;
  double tail_fixed = 0.0;
  for (int t = 0; t < types; ++t) {
    const double ct = c[static_cast<std::size_t>(t)];
    if (ct == 0) continue;
    const auto mid = tail_lines[static_cast<std::size_t>(3 * t)];
    const auto first = tail_lines[static_cast<std::size_t>(3 * t + 1)];
    const auto lastl = tail_lines[static_cast<std::size_t>(3 * t + 2)];
    if (mid.per_layer <= 0.0) continue;
    const double share = ct / pp;
    tail_speed += ct / mid.per_layer;
    tail_fixed += (pp == 1 ? first.fixed + lastl.fixed - mid.fixed
                           : share * (first.fixed + lastl.fixed) + (ct - 2.0 * share) * mid.fixed) /
                  mid.per_layer;
  }
  const double u_star = tail_speed > 0.0 ? (n + tail_fixed) / tail_speed : 0.0;
  Windows w;
  w.types = types;
  w.lo.resize(static_cast<std::size_t>(pp * types));
  w.hi.resize(w.lo.size());
  auto window = [&](double share, int& lo, int& hi) {
    // Never empty: a stage whose fixed costs alone exceed the
    // balanced time (an output layer with a large vocabulary)
    // takes one layer.
    share = std::max(0.0, share);
    lo = std::clamp(static_cast<int>(std::floor((1.0 - delta) * share)), 1, n);
    hi = std::clamp(static_cast<int>(std::ceil((1.0 + delta) * share)), lo, n);
  };
  for (int t = 0; t < types; ++t) {
    if (c[static_cast<std::size_t>(t)] == 0) continue;
    for (int i = 0; i < pp; ++i) {
      const bool first = i == 0;
      const bool last = i == pp - 1;
      int lo = 0;
      int hi = 0;
      double share = (t_star - ev.fixed_step(t, first, last)) / tau[static_cast<std::size_t>(t)];
      if (binding)
        share = std::min(share, static_cast<double>(fit_max[static_cast<std::size_t>(t)]));
      window(share, lo, hi);
      const auto mid = tail_lines[static_cast<std::size_t>(3 * t)];
      if (mid.per_layer > 0.0) {
        const auto line = first ? tail_lines[static_cast<std::size_t>(3 * t + 1)]
                                : (last ? tail_lines[static_cast<std::size_t>(3 * t + 2)] : mid);
        int tlo = 0;
        int thi = 0;
        window((u_star - line.fixed) / mid.per_layer, tlo, thi);
        lo = std::min(lo, tlo);
        hi = std::max(hi, thi);
      }
      w.lo[static_cast<std::size_t>(i * types + t)] = lo;
      w.hi[static_cast<std::size_t>(i * types + t)] = hi;
    }
  }
  t_star_out = t_star;
  return w;
}

namespace {

// The stage mixes c of pi: stages per type, sum PP, c_h <= cap_h.
std::vector<std::vector<int>> stage_mixes(const Evaluator& ev) {
  const int types = ev.types();
  std::vector<std::vector<int>> all;
  std::vector<int> m(static_cast<std::size_t>(types), 0);
  std::function<void(int, int)> gen = [&](int h, int left) {
    if (h == types) {
      if (left == 0) all.push_back(m);
      return;
    }
    for (int k = 0; k <= std::min(ev.cap(h), left); ++k) {
      m[static_cast<std::size_t>(h)] = k;
      gen(h + 1, left - k);
    }
    m[static_cast<std::size_t>(h)] = 0;
  };
  gen(0, ev.pi().pp);
  return all;
}

// One search of pi with `ev`, an evaluator of pi (its stage memo is kept
// between the two passes of search_config); `part` of its stage mixes.
ConfigOutcome search_once(Evaluator& ev, const ParallelConfig& pi, const SearchOptions& opt,
                          double incumbent, bool value_only, SearchPart part,
                          const CancelCheck* cancel) {
  const auto start = std::chrono::steady_clock::now();
  ConfigOutcome out;
  out.stats.configs_evaluated = 1;
  const int types = ev.types();
  const int n = ev.layers();
  std::vector<int> usable;
  for (int h = 0; h < types; ++h) {
    if (ev.cap(h) > 0) usable.push_back(h);
  }
  // tau_h: the step of an average layer; T_comp: the mean stage step of a
  // balanced split over the usable types.
  std::vector<double> tau(static_cast<std::size_t>(types), 0.0);
  double inv_sum = 0.0;
  for (int h : usable) {
    tau[static_cast<std::size_t>(h)] = ev.layer_step(h);
    inv_sum += 1.0 / tau[static_cast<std::size_t>(h)];
  }
  const double mean_tau =
      usable.empty() ? 0.0 : static_cast<double>(usable.size()) / inv_sum;  // harmonic mean
  const double comp_threshold = opt.eta * n * mean_tau / pi.pp;

  if (!usable.empty()) {
    if (opt.prune.load_balance && !opt.uniform) {
      // The most layers a stage of each type can hold (memory).
      std::vector<int> fit_max(static_cast<std::size_t>(types), 0);
      for (int h : usable) fit_max[static_cast<std::size_t>(h)] = ev.max_fitting_layers(h);
      // Tail lines per type: middle, first, last stage.
      std::vector<Evaluator::TailLine> tail_lines(static_cast<std::size_t>(3 * types));
      for (int h : usable) {
        tail_lines[static_cast<std::size_t>(3 * h)] = ev.tail_line(h, false, false);
        tail_lines[static_cast<std::size_t>(3 * h + 1)] = ev.tail_line(h, true, pi.pp == 1);
        tail_lines[static_cast<std::size_t>(3 * h + 2)] = ev.tail_line(h, pi.pp == 1, true);
      }
      // The mixes c (stages per type, sum PP, c_h <= cap_h), each with a
      // lower bound on the latency of its plans, searched best bound first.
      const std::vector<std::vector<int>> all_mixes = stage_mixes(ev);
      std::vector<double> mix_bound(all_mixes.size(), 0.0);
      std::vector<std::size_t> mix_order(all_mixes.size());
      for (std::size_t k = 0; k < all_mixes.size(); ++k) {
        mix_bound[k] = opt.bound ? ev.mix_lower_bound(all_mixes[k]) : 0.0;
        mix_order[k] = k;
      }
      std::stable_sort(mix_order.begin(), mix_order.end(),
                       [&](std::size_t a, std::size_t b) { return mix_bound[a] < mix_bound[b]; });
      for (std::size_t at = static_cast<std::size_t>(part.index); at < mix_order.size();
           at += static_cast<std::size_t>(part.count)) {
        if (out.cancelled) break;
        const std::size_t k = mix_order[at];
        const double best = out.best ? std::min(incumbent, out.best->latency_s) : incumbent;
        if (opt.bound && mix_bound[k] > best * (1.0 + 1e-12)) {
          ++out.stats.pruned_bound;
          continue;
        }
        const std::vector<int>& c = all_mixes[k];
        double t_star = 0.0;
        const Windows w = balanced_windows(ev, c, tau, fit_max, tail_lines, opt.delta, t_star);
        run_dp(ev, c, /*exact_mix=*/true, w, opt, opt.eta * t_star, incumbent, value_only, cancel,
               out);
      }
    } else if (part.index == 0) {  // one part only
      std::vector<int> limit(static_cast<std::size_t>(types));
      for (int h = 0; h < types; ++h) limit[static_cast<std::size_t>(h)] = ev.cap(h);
      Windows w = full_windows(ev);
      if (opt.uniform) apply_uniform(ev, w);
      run_dp(ev, limit, /*exact_mix=*/false, w, opt, comp_threshold, incumbent, value_only, cancel,
             out);
    }
  }
  out.stats.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace

int max_parts(const CostModel& model, const ParallelConfig& pi, const SearchOptions& opt) {
  if (!opt.prune.load_balance || opt.uniform) return 1;
  const Evaluator ev(model, pi, opt);
  return std::max<int>(1, static_cast<int>(stage_mixes(ev).size()));
}

void merge_part(ConfigOutcome& into, const ConfigOutcome& part) {
  if (part.best && (!into.best || candidate_less(*part.best, *into.best))) into.best = part.best;
  if (part.closest.bytes < into.closest.bytes) into.closest = part.closest;
  into.cancelled = into.cancelled || part.cancelled;
  into.stats += part.stats;
  into.stats.configs_evaluated = 1;
}

ConfigOutcome search_config(const CostModel& model, const ParallelConfig& pi,
                            const SearchOptions& opt, double incumbent, SearchPart part,
                            const CancelCheck* cancel) {
  HAPMOE_REQUIRE(part.count >= 1 && part.index >= 0 && part.index < part.count,
                 "search_config: part index out of range");
  const auto start = std::chrono::steady_clock::now();
  Evaluator ev(model, pi, opt);
  const double setup =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!opt.bound || std::isfinite(incumbent)) {
    ConfigOutcome out = search_once(ev, pi, opt, incumbent, false, part, cancel);
    out.stats.seconds += setup;
    return out;
  }
  // No incumbent yet: without a latency that bounds the answer, ties keep
  // fronts large (docs/search.md). A first pass with dominance on the
  // values alone finds the exact best latency; the second, bounded by it,
  // finds the canonical plan among the plans that reach it. Both passes
  // count in the statistics.
  // The second pass reuses the first's stage evaluations (same evaluator).
  ConfigOutcome probe = search_once(ev, pi, opt, incumbent, true, part, cancel);
  probe.stats.seconds += setup;
  // Nothing fits: the second pass finds nothing either. Cancelled: the
  // probe's best is a real plan, which is all a stopped search promises.
  if (!probe.best || probe.cancelled) return probe;
  ConfigOutcome out = search_once(ev, pi, opt, probe.best->latency_s, false, part, cancel);
  if (out.cancelled && !out.best) out.best = probe.best;  // the probe's is a real plan
  const double seconds = out.stats.seconds + probe.stats.seconds;
  out.stats += probe.stats;
  out.stats.configs_evaluated = 1;
  out.stats.seconds = seconds;
  return out;
}

double work_estimate(const CostModel& model, const ParallelConfig& pi, const SearchOptions& opt) {
  const int n = model.workload().model.num_layers;
  // ways[s]: the mixes of the types so far with s stages (a convolution
  // with each type's box [0, cap]), or the usage vectors without the
  // load-balance pruning's mix enumeration.
  std::vector<double> ways(static_cast<std::size_t>(pi.pp) + 1, 0.0);
  ways[0] = 1.0;
  double vectors = 1.0;
  for (int h = 0; h < model.cluster().num_types(); ++h) {
    const int cap = std::min(stage_capacity(model.cluster(), h, pi, opt.space.constraints), pi.pp);
    if (cap == 0) continue;
    vectors *= cap + 1;
    std::vector<double> next(ways.size(), 0.0);
    double window = 0.0;  // sum of ways[s - cap .. s]
    for (std::size_t s = 0; s < ways.size(); ++s) {
      window += ways[s];
      if (s >= static_cast<std::size_t>(cap) + 1)
        window -= ways[s - static_cast<std::size_t>(cap) - 1];
      next[s] = window;
    }
    ways = std::move(next);
  }
  const bool mixes = opt.prune.load_balance && !opt.uniform;
  return static_cast<double>(pi.pp) * n * (mixes ? ways.back() : vectors);
}

double work_estimate(const CostModel& model, const ParallelConfig& pi, const SearchOptions& opt,
                     double incumbent) {
  if (!opt.prune.load_balance || opt.uniform) return work_estimate(model, pi, opt);
  const Evaluator ev(model, pi, opt);
  double states = 0.0;  // usage vectors over the mixes the bound keeps
  for (const std::vector<int>& c : stage_mixes(ev)) {
    if (opt.bound && ev.mix_lower_bound(c) > incumbent * (1.0 + 1e-12)) continue;
    double vectors = 1.0;
    for (const int k : c) vectors *= k + 1;
    states += vectors;
  }
  return static_cast<double>(pi.pp) * ev.layers() * std::max(states, 1.0);
}

double bruteforce_size(const CostModel& model, const ParallelConfig& pi, const SearchOptions& opt) {
  const int n = model.workload().model.num_layers;
  int types = 0;
  for (int h = 0; h < model.cluster().num_types(); ++h) {
    if (stage_capacity(model.cluster(), h, pi, opt.space.constraints) > 0) ++types;
  }
  // types^PP sequences times C(N-1, PP-1) compositions.
  double size = std::pow(static_cast<double>(types), pi.pp);
  if (!opt.uniform) {
    double comb = 1.0;
    for (int k = 1; k <= pi.pp - 1; ++k) comb = comb * (n - k) / k;
    size *= comb;
  }
  return std::min(size, 4.6e18);
}

ConfigOutcome bruteforce_config(const CostModel& model, const ParallelConfig& pi,
                                const SearchOptions& opt) {
  const auto start = std::chrono::steady_clock::now();
  ConfigOutcome out;
  out.stats.configs_evaluated = 1;
  Evaluator ev(model, pi, opt);
  const int pp = pi.pp;
  const int n = ev.layers();
  std::vector<int> used(static_cast<std::size_t>(ev.types()), 0);
  std::vector<Label> arena;  // the current path only, root first
  arena.reserve(static_cast<std::size_t>(pp) + 1);
  arena.push_back(Label{});
  std::function<void(int, int, int)> place = [&](int i, int j, int hp) {
    if (i == pp) {
      ++out.stats.transitions;
      offer(out, arena, static_cast<std::int32_t>(arena.size() - 1), ev);
      return;
    }
    const int remaining_after = pp - i - 1;
    for (int h = 0; h < ev.types(); ++h) {
      if (used[static_cast<std::size_t>(h)] >= ev.cap(h)) continue;
      const int max_n = n - j - remaining_after;
      for (int layers = 1; layers <= max_n; ++layers) {
        if (remaining_after == 0 && layers != max_n) continue;
        if (opt.uniform && layers != n / pp + (i < n % pp ? 1 : 0)) continue;
        const StageEval& e = ev.stage(h, i, j, layers);
        note_shortfall(out, e, pi, i, h, layers);
        const auto parent = static_cast<std::int32_t>(arena.size() - 1);
        arena.push_back(extend(arena.back(), parent, h, layers, e, ev.boundary(hp, h)));
        ++used[static_cast<std::size_t>(h)];
        place(i + 1, j + layers, h);
        --used[static_cast<std::size_t>(h)];
        arena.pop_back();
      }
    }
  };
  place(0, 0, -1);
  out.stats.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace hapmoe
