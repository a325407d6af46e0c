// Lower bounds of HS-DP (docs/search.md, "Branch and bound"): the helpers
// of bounds.h, and the bound on every plan of a configuration, computed
// before the configuration is searched (config_lower_bound), with the part
// shared by configurations that differ only in PP >= 3 computed once per
// shape (bound_shape, bound_shape_key, bound_shape_order; engine/search.h).
// Relies on the cost model only: type costs, boundaries, stage costs for
// the per-layer tails, stage capacities (partition/config_space.h).
#include "engine/bounds.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

namespace hapmoe {
namespace hsdp {

LayerTails layer_tails(const CostModel& model, const ParallelConfig& pi, const TypeCosts& tc) {
  // A range of offload fractions costs each stage's step at the least
  // fraction it fits, which is not affine in its layers; its faster end
  // is, and is no more (TypeCosts::offload_step_at_fit).
  std::optional<TypeCosts> scratch;
  const TypeCosts& affine = with_affine_tails(tc, scratch);
  auto tail = [&](int layers, int moe_layers) {
    StageShape s;
    s.position = std::min(1, pi.pp - 1);
    s.layers = layers;
    s.moe_layers = moe_layers;
    const StageCost c = model.stage_cost(pi, affine, s);
    return c.dp_sync_s + c.optimizer_s;
  };
  LayerTails t;
  t.dense = tail(2, 0) - tail(1, 0);
  if (model.workload().model.is_moe()) t.moe = tail(2, 2) - tail(1, 1);
  return t;
}

namespace {

// The layers a stage of `t` holds within t_step at `price` per layer (and
// in memory), as floor_holds counts them: they grow by one at each step
// fixed + r * price (r = 1 .. most).
long long floor_room(const StageFloor& t, double price, double t_step) {
  const double room = (t_step - t.fixed) / price;
  return room < 0.0 ? 0 : std::min<long long>(t.most, static_cast<long long>(std::min(room, 1e9)));
}

// The price of a layer of either kind the model has on a stage of `t`.
double cheaper_price(const StageFloor& t, int dense, int moe) {
  return moe == 0 ? t.dense : (dense == 0 ? t.moe : std::min(t.dense, t.moe));
}

// The prices floor_holds takes a type's layers at: the cheaper kind's, and
// each kind's the model has.
template <class F>
void for_each_floor_price(const StageFloor& t, int dense, int moe, F&& f) {
  f(cheaper_price(t, dense, moe));
  if (moe > 0) f(t.moe);
  if (dense > 0) f(t.dense);
}

// Where floor_holds turns true within (lo, hi] if one step of its rooms
// lies there (every room that grows between lo and hi grows by one at the
// same step); 0 otherwise. floor_holds counts the rooms only, so it turns
// true exactly there.
double only_step(const std::vector<StageFloor>& types, int dense, int moe, double lo, double hi) {
  double at = 0.0;
  for (const StageFloor& t : types) {
    bool one = true;
    for_each_floor_price(t, dense, moe, [&](double price) {
      const long long grown = floor_room(t, price, hi);
      const long long by = grown - floor_room(t, price, lo);
      if (by == 0 || !one) return;
      const double step = t.fixed + static_cast<double>(grown) * price;
      if (by > 1 || (at > 0.0 && step != at)) one = false;
      at = step;
    });
    if (!one) return 0.0;
  }
  return at;
}

// Whether pp stages drawn from `types`, each step at most t_step, can hold
// `dense` dense and `moe` MoE layers, one at least per stage (see
// bottleneck_floor). Monotone in t_step. `hold` is scratch.
bool floor_holds(const std::vector<StageFloor>& types, int pp, int dense, int moe, double t_step,
                 std::vector<std::pair<long long, int>>& hold) {
  hold.resize(types.size());  // (layers a stage holds, stages)
  // Do pp stages with at most t_step each hold `need` layers priced `price`?
  const auto holds = [&](int need, auto price, bool one_each) {
    for (std::size_t k = 0; k < types.size(); ++k) {
      hold[k] = {floor_room(types[k], price(types[k]), t_step), types[k].stages};
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
  return holds(
             dense + moe, [&](const StageFloor& t) { return cheaper_price(t, dense, moe); },
             true) &&
         (moe == 0 || holds(
                          moe, [](const StageFloor& t) { return t.moe; }, false)) &&
         (dense == 0 || holds(
                            dense, [](const StageFloor& t) { return t.dense; }, false));
}

bool floor_possible(const std::vector<StageFloor>& types, int pp, int dense, int moe) {
  int available = 0;
  for (const StageFloor& t : types) available += t.stages;
  return available >= pp && pp > 0 && dense + moe >= pp;
}

}  // namespace

double bottleneck_floor(const std::vector<StageFloor>& types, int pp, int dense, int moe) {
  const double inf = std::numeric_limits<double>::infinity();
  double hi = 0.0;
  for (const StageFloor& t : types) {
    hi = std::max(hi, t.fixed + (dense + moe) * std::max(t.dense, t.moe));
  }
  hi = 2.0 * hi + std::numeric_limits<double>::min();  // clear of rounding
  if (!floor_possible(types, pp, dense, moe)) return inf;
  std::vector<std::pair<long long, int>> hold;
  const auto fits = [&](double t_step) { return floor_holds(types, pp, dense, moe, t_step, hold); };
  if (!fits(hi)) return inf;  // the stages cannot hold the layers in memory (StageFloor::most)
  double lo = 0.0;            // fits(lo) is false
  if (fits(lo)) return 0.0;
  // Bisected until (lo, hi] holds one step of the rooms, which is the
  // answer (once hi - lo is under the least price, each room grows at most
  // once there), or to 1e-6 of hi (hi is a few times the answer) where two
  // steps lie closer than that.
  double least = inf;
  for (const StageFloor& t : types) {
    for_each_floor_price(t, dense, moe, [&](double price) { least = std::min(least, price); });
  }
  while (hi - lo > 1e-6 * hi) {
    if (hi - lo < least) {
      if (const double step = only_step(types, dense, moe, lo, hi); step > 0.0) {
        lo = std::min(step, hi);
        break;
      }
    }
    const double mid = 0.5 * (lo + hi);
    (fits(mid) ? hi : lo) = mid;
  }
  // Every plan's slowest stage is at least lo (above it, after the
  // bisection); the margin covers the rounding of stage steps summed in
  // another order than fixed + n * step.
  return lo * (1.0 - 1e-9);
}

double bottleneck_floor_above(const std::vector<StageFloor>& types, int pp, int dense, int moe,
                              double t_step) {
  std::vector<std::pair<long long, int>> hold;
  if (!floor_possible(types, pp, dense, moe)) return std::numeric_limits<double>::infinity();
  if (t_step <= 0.0 || floor_holds(types, pp, dense, moe, t_step, hold)) return 0.0;
  return t_step * (1.0 - 1e-9);
}

namespace {

// Room is taken at t_step (1 + kRoomSlack): a plan's stage steps are sums
// in another order than fixed + n * step, a little below it at most.
constexpr double kRoomSlack = 1e-9;

// The layers a stage of `t` holds within t_step at `price` per layer (and
// in memory).
long long room(const StageFloor& t, double price, double t_step) {
  const double r = (t_step * (1.0 + kRoomSlack) - t.fixed) / price;
  return r < 0.0 ? 0 : std::min<long long>(t.most, static_cast<long long>(std::min(r, 1e9)));
}

// The least `layers` layers of one kind (`price` per type) add to the sum
// of the steps within t_step: the types cheapest for them first, each at
// most min(stages, pp) stages of its room. +infinity if they do not fit.
template <class Price>
double kind_sum_floor(const std::vector<StageFloor>& types, int pp, int layers, Price price,
                      double t_step, std::vector<std::pair<double, long long>>& by_price) {
  if (layers == 0) return 0.0;
  by_price.clear();
  for (const StageFloor& t : types) {
    by_price.emplace_back(price(t), room(t, price(t), t_step) * std::min(t.stages, pp));
  }
  std::sort(by_price.begin(), by_price.end());
  double sum = 0.0;
  long long left = layers;
  for (const auto& [p, cap] : by_price) {
    const long long take = std::min(left, cap);
    sum += static_cast<double>(take) * p;
    left -= take;
  }
  return left > 0 ? std::numeric_limits<double>::infinity() : sum;
}

// The fewest layers the fullest of pp stages holds within t_step (each
// type's stages at most their room at the cheaper kind's price); 0 if the
// layers do not fit at all.
int fullest_stage_floor(const std::vector<StageFloor>& types, int pp, int dense, int moe,
                        double t_step, std::vector<std::pair<long long, int>>& caps) {
  caps.clear();
  long long most = 0;
  for (const StageFloor& t : types) {
    const double price = cheaper_price(t, dense, moe);
    caps.emplace_back(room(t, price, t_step), t.stages);
    most = std::max(most, caps.back().first);
  }
  std::sort(caps.begin(), caps.end(), std::greater<>());
  const int n = dense + moe;
  const auto holds = [&](long long k) {  // stages of at most k layers hold n
    long long total = 0;
    int left = pp;
    for (const auto& [cap, stages] : caps) {
      const int take = std::min(stages, left);
      total += std::min(k, cap) * take;
      left -= take;
    }
    return total >= n;
  };
  long long lo = (n + pp - 1) / pp;  // holds(lo - 1) is false
  long long hi = std::min<long long>(most, n);
  if (lo > hi || !holds(hi)) return 0;
  while (lo < hi) {
    const long long mid = lo + (hi - lo) / 2;
    if (holds(mid)) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return static_cast<int>(lo);
}

}  // namespace

namespace {

// S + (M - 1) T and the largest tail, from the layers' sum and the fullest
// stage's tail (at least the mean).
ConfigBound pipeline_floor(const LatencyFloorInputs& in, double layer_sum, double tail, double t) {
  ConfigBound b;
  b.steps = pipeline_edge(in.fixed_sum + layer_sum, t, in.vpp) + (in.microbatches - 1) * t;
  b.latency =
      b.steps + std::max(tail_floor(in.dense, in.moe, in.dense_tail, in.moe_tail, in.pp), tail);
  return b;
}

double plain_layer_sum(const LatencyFloorInputs& in) {
  return (in.dense > 0 ? in.dense * in.dense_step : 0.0) +
         (in.moe > 0 ? in.moe * in.moe_step : 0.0);
}

}  // namespace

LatencyFloorInputs floor_inputs(const BoundShape& shape, int pp, int dense, int moe,
                                int microbatches, int vpp) {
  LatencyFloorInputs in;
  in.pp = pp;
  in.dense = dense;
  in.moe = moe;
  in.microbatches = microbatches;
  in.vpp = vpp;
  in.fixed_sum = shape.emb + shape.output + (pp - 1) * shape.link;
  in.dense_step = shape.dense;
  in.moe_step = shape.moe;
  in.dense_tail = shape.dense_tail;
  in.moe_tail = shape.moe_tail;
  return in;
}

ConfigBound plain_latency_floor(const LatencyFloorInputs& in, double slowest) {
  return pipeline_floor(in, plain_layer_sum(in), 0.0, slowest);
}

ConfigBound floor_past_cut(const std::vector<StageFloor>& types, const LatencyFloorInputs& in,
                           double cut, bool steps) {
  // The measure is affine in the slowest step: a + k * slowest. The test
  // is at the step where it passes the cut, a little beyond; the bound is
  // computed from the floor that test proves, a valid lower bound like
  // the bisection's (and, within the bisection's 1e-6, sometimes a tighter
  // one).
  const ConfigBound zero = plain_latency_floor(in, 0.0);
  const ConfigBound one = plain_latency_floor(in, 1.0);
  const double a = steps ? zero.steps : zero.latency;
  const double k = (steps ? one.steps : one.latency) - a;
  const double at = k > 0.0 ? std::max(0.0, (cut - a) / k) * (1.0 + 1e-6) : 0.0;
  const double floor = bottleneck_floor_above(types, in.pp, in.dense, in.moe, at);
  if (!std::isfinite(floor)) {  // not enough stage groups
    const double inf = std::numeric_limits<double>::infinity();
    return {inf, inf};
  }
  return plain_latency_floor(in, floor);
}

ConfigBound latency_floor(const std::vector<StageFloor>& types, const LatencyFloorInputs& in,
                          double slowest) {
  const double inf = std::numeric_limits<double>::infinity();
  if (!std::isfinite(slowest)) return {inf, inf};
  const double plain_sum = plain_layer_sum(in);
  const auto plain = [&](double t) { return plain_latency_floor(in, t); };
  // The tail of a stage of k layers: the cheaper kind's first.
  const bool tails = in.dense_tail >= 0.0 && in.moe_tail >= 0.0;  // NaN: no
  const auto tail_of = [&](int k) {
    if (!tails || k <= 0) return 0.0;
    const bool dense_first = in.dense_tail <= in.moe_tail;
    const int first = std::min(k, dense_first ? in.dense : in.moe);
    return first * (dense_first ? in.dense_tail : in.moe_tail) +
           (k - first) * (dense_first ? in.moe_tail : in.dense_tail);
  };
  // Where the intervals end: just under the next step at which a type's
  // room at a price it is taken at grows, while it holds fewer than all
  // the layers. Any ends would keep the bound valid (each interval takes
  // the room at its end); these keep it tight.
  const int layers = in.dense + in.moe;
  const auto next_step = [&](double t) {
    double next = inf;
    for (const StageFloor& f : types) {
      const double both = cheaper_price(f, in.dense, in.moe);
      for (const double price : {in.dense > 0 ? f.dense : 0.0, in.moe > 0 ? f.moe : 0.0, both}) {
        if (!(price > 0.0)) continue;
        const double r = std::floor((t * (1.0 + kRoomSlack) - f.fixed) / price);
        if (!(r < layers) || !(r < f.most)) continue;  // it holds all it can
        for (const double grown : {std::max(r, -1.0) + 1.0, std::max(r, -1.0) + 2.0}) {
          const double at_step = (f.fixed + grown * price) / (1.0 + kRoomSlack) * (1.0 - 1e-12);
          if (at_step > t) {
            next = std::min(next, at_step);
            break;
          }
        }
      }
    }
    return next;
  };
  std::vector<std::pair<double, long long>> by_price;
  std::vector<std::pair<long long, int>> caps;
  ConfigBound best{inf, inf};
  double t = slowest;
  for (int interval = 0; interval < 16; ++interval) {
    const double end = next_step(t);  // +infinity: the last interval
    // The plans whose slowest step is in [t, end]: the room at end, the
    // pipeline at t.
    const double sum =
        kind_sum_floor(
            types, in.pp, in.dense, [](const StageFloor& f) { return f.dense; }, end, by_price) +
        kind_sum_floor(
            types, in.pp, in.moe, [](const StageFloor& f) { return f.moe; }, end, by_price);
    const int fullest = fullest_stage_floor(types, in.pp, in.dense, in.moe, end, caps);
    if (std::isfinite(sum) && fullest > 0) {
      const ConfigBound b = pipeline_floor(in, std::max(sum, plain_sum), tail_of(fullest), t);
      if (b.latency < best.latency) best = b;
    }
    if (!std::isfinite(end)) return best;
    t = end;
    if (plain(t).latency >= best.latency) return best;
  }
  // The plans beyond: the plain floor at t.
  const ConfigBound rest = plain(t);
  return rest.latency < best.latency ? rest : best;
}

void whole_layer_floors(const std::vector<StagesLeft>& left, int layers, std::vector<double>& out) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // Stage steps are sums in another order than fixed + k * layer: the
  // floor is taken a little low, and the layers that fit a little high.
  constexpr double kSlack = 1e-9;
  out.assign(static_cast<std::size_t>(std::max(layers, 0)) + 1, kInf);
  if (layers < 0) return;
  double t_step = 0.0;  // every stage left holds its least layers
  for (const StagesLeft& t : left) {
    if (t.stages <= 0) continue;
    // An empty window, or steps that are not finite numbers: no floor.
    if (t.most < std::max(1, t.least) || !std::isfinite(t.fixed) || !std::isfinite(t.layer) ||
        t.layer < 0.0) {
      std::fill(out.begin(), out.end(), 0.0);
      return;
    }
    t_step = std::max(t_step, t.fixed + std::max(1, t.least) * t.layer);
  }
  // Per type, the layers a stage holds within t_step.
  thread_local std::vector<int> held_by;
  held_by.assign(left.size(), 0);
  long long held = 0;
  for (std::size_t k = 0; k < left.size(); ++k) {
    const StagesLeft& t = left[k];
    if (t.stages <= 0) continue;
    // A layer that costs nothing fills the stage.
    const double fit =
        t.layer > 0.0 ? std::floor((t_step * (1.0 + kSlack) - t.fixed) / t.layer * (1.0 + kSlack))
                      : 1e9;
    held_by[k] =
        std::clamp(static_cast<int>(std::clamp(fit, 0.0, 1e9)), std::max(1, t.least), t.most);
    held += static_cast<long long>(t.stages) * held_by[k];
  }
  for (int l = 0; l <= layers; ++l) {
    while (held < l) {
      std::size_t next = left.size();
      double next_step = kInf;
      for (std::size_t k = 0; k < left.size(); ++k) {
        const StagesLeft& t = left[k];
        if (t.stages <= 0 || held_by[k] >= t.most) continue;
        const double step = t.fixed + (held_by[k] + 1) * t.layer;
        if (step < next_step) {
          next_step = step;
          next = k;
        }
      }
      if (next == left.size()) return;  // the stages cannot hold more
      ++held_by[next];
      held += left[next].stages;
      t_step = std::max(t_step, next_step);
    }
    out[static_cast<std::size_t>(l)] = t_step * (1.0 - kSlack);
  }
}

void layer_sum_floors(const std::vector<LayersOnType>& types, int layers,
                      std::vector<double>& dense, std::vector<double>& moe) {
  thread_local std::vector<std::size_t> order;
  const auto fill = [&](double LayersOnType::*step, std::vector<double>& out) {
    order.resize(types.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return types[a].*step < types[b].*step; });
    out.assign(static_cast<std::size_t>(std::max(layers, 0)) + 1, 0.0);
    for (int c = 1; c <= layers; ++c) {
      double sum = 0.0;
      long long left = c;
      for (const std::size_t k : order) {
        if (left == 0) break;
        if (types[k].most <= 0) continue;
        const long long here = std::min(left, types[k].most);
        sum += static_cast<double>(here) * (types[k].*step);
        left -= here;
      }
      out[static_cast<std::size_t>(c)] = left > 0 ? std::numeric_limits<double>::infinity() : sum;
    }
  };
  fill(&LayersOnType::dense, dense);
  fill(&LayersOnType::moe, moe);
}

bool stages_fall_short(std::vector<std::pair<int, int>> room, int pp, int layers) {
  std::sort(room.begin(), room.end(), std::greater<>{});
  long long held = 0;
  for (const auto& [most, stages] : room) {
    const int take = std::min(pp, stages);
    held += static_cast<long long>(take) * most;
    pp -= take;
  }
  return held < layers;
}

int most_fitting_layers(const CostModel& model, const ParallelConfig& pi, const TypeCosts& tc,
                        int position, int most) {
  const int n = model.workload().model.num_layers;
  const auto shape = [&](int layers) {
    StageShape s;
    s.position = position;
    s.first_layer = n - layers;
    s.layers = layers;
    s.moe_layers = model.moe_layers_in(n - layers, layers);
    return s;
  };
  const auto fits = [&](int layers) { return model.fits_with_recompute(pi, tc, shape(layers)); };
  if (most <= 0 || fits(most)) return std::max(most, 0);
  if (most >= 2) {
    // Over the capacity with full recomputation of `layers`.
    const auto over = [&](int layers) {
      StageShape s = shape(layers);
      s.recompute = {RecomputeKind::kFull, layers};
      s.moe_in_first_recomputed = s.moe_layers;  // all of them
      return model.stage_hold(pi, tc, s).memory.total() - tc.capacity_bytes;
    };
    const double one = over(1);
    const double per = over(2) - one;
    if (per > 0) {
      // The most with one + (g - 1) * per <= 0, below `most` (which does
      // not fit).
      const double g = std::floor(1.0 - one / per);
      const int guess = g < 0 ? 0 : static_cast<int>(std::min<double>(g, most - 1));
      if ((guess == 0 || fits(guess)) && (guess + 1 == most || !fits(guess + 1))) return guess;
    }
  }
  int lo = 0;  // fits (trivially)
  int hi = most - 1;
  while (lo < hi) {
    const int mid = lo + (hi - lo + 1) / 2;
    if (fits(mid)) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

}  // namespace hsdp

using hsdp::bottleneck_floor;
using hsdp::bottleneck_floor_above;
using hsdp::floor_inputs;
using hsdp::floor_past_cut;
using hsdp::latency_floor;
using hsdp::LatencyFloorInputs;
using hsdp::layer_tails;
using hsdp::LayerTails;
using hsdp::plain_latency_floor;

namespace {

// f(h, capacity, type costs) for each type a stage of pi can use, in type
// order, the type costs from `cache` where given (kept there per key).
template <class F>
void for_each_usable_type(const CostModel& model, const ParallelConfig& pi,
                          const SearchOptions& opt, TypeCostsCache* cache, F&& f) {
  const ClusterSpec& cluster = model.cluster();
  if (cache != nullptr) {
    if (const ParallelConfig key = model.type_costs_key(pi); !(cache->key == key)) {
      cache->key = key;
      cache->costs.assign(static_cast<std::size_t>(cluster.num_types()), std::nullopt);
    }
  }
  std::optional<TypeCosts> own;
  for (int h = 0; h < cluster.num_types(); ++h) {
    const int cap = stage_capacity(cluster, h, pi, opt.space.constraints);
    if (cap == 0) continue;
    if (cache == nullptr) own.reset();
    std::optional<TypeCosts>& slot =
        cache != nullptr ? cache->costs[static_cast<std::size_t>(h)] : own;
    if (!slot) slot.emplace(model.type_costs(pi, h));
    f(h, cap, *slot);
  }
}

}  // namespace

BoundShape bound_shape(const CostModel& model, const ParallelConfig& pi, const SearchOptions& opt,
                       TypeCostsCache* cache, bool tails) {
  BoundShape shape;
  std::vector<int> usable;
  for_each_usable_type(model, pi, opt, cache, [&](int h, int cap, const TypeCosts& tc) {
    const double d = tc.dense.fwd_s + tc.dense.bwd_s;
    const double e = tc.moe.fwd_s + tc.moe.bwd_s;
    shape.dense = std::min(shape.dense, d);
    shape.moe = std::min(shape.moe, e);
    shape.emb = std::min(shape.emb, tc.embedding_fwd_s + tc.embedding_bwd_s);
    shape.output = std::min(shape.output, tc.output_fwd_s + tc.output_bwd_s);
    usable.push_back(h);
    shape.types.push_back({d, e, tc.embedding_fwd_s + tc.embedding_bwd_s, cap});
  });
  if (tails) {
    add_tails(model, pi, opt, shape, cache);
  } else {
    shape.dense_tail = 0.0;
    shape.moe_tail = 0.0;
    shape.tails_pending = true;
  }
  // Every stage but the first pays a boundary from a usable type.
  for (std::size_t k = 0; k < usable.size(); ++k) {
    for (const int hp : usable) {
      const CostModel::Boundary b = model.stage_boundary(pi, hp, usable[k]);
      shape.types[k].fixed = std::min(shape.types[k].fixed, b.fwd_s + b.bwd_s);
      shape.link = std::min(shape.link, b.fwd_s + b.bwd_s);
    }
  }
  return shape;
}

void add_tails(const CostModel& model, const ParallelConfig& pi, const SearchOptions& opt,
               BoundShape& shape, TypeCostsCache* cache) {
  shape.dense_tail = std::numeric_limits<double>::infinity();
  shape.moe_tail = std::numeric_limits<double>::infinity();
  for_each_usable_type(model, pi, opt, cache, [&](int, int, const TypeCosts& tc) {
    const LayerTails t = layer_tails(model, pi, tc);
    shape.dense_tail = std::min(shape.dense_tail, t.dense);
    shape.moe_tail = std::min(shape.moe_tail, t.moe);
  });
  shape.tails_pending = false;
}

ConfigBound ShapeBounds::bound(const ParallelConfig& pi, double cut, bool steps_above_cut) {
  if (const ParallelConfig k = bound_shape_key(pi); !(k == key_)) {
    loose_ = bound_shape(*model_, pi, *options_, &costs_, false);
    whole_.reset();
    key_ = k;
  }
  // The bound is the loose one where that is above the cut, else the
  // whole one. The whole one is above the cut wherever the loose one is
  // (Search.BoundShapesAreSharedByTheirKey): with the tails at hand, a
  // whole bound under the cut is the answer at once.
  if (std::isfinite(cut) && whole_) {
    const ConfigBound whole = config_lower_bound(*model_, *whole_, pi, cut, steps_above_cut);
    if (!(whole.latency > cut)) return whole;
    const ConfigBound loose = config_lower_bound(*model_, loose_, pi, cut, steps_above_cut);
    return loose.latency > cut ? loose : whole;
  }
  if (std::isfinite(cut)) {
    const ConfigBound b = config_lower_bound(*model_, loose_, pi, cut, steps_above_cut);
    if (b.latency > cut) return b;
  }
  if (!whole_) {
    whole_ = loose_;
    add_tails(*model_, pi, *options_, *whole_, &costs_);
  }
  return config_lower_bound(*model_, *whole_, pi, cut, steps_above_cut);
}

bool ShapeBounds::short_of_memory(const ParallelConfig& pi) {
  const CostModel& model = *model_;
  const int n = model.workload().model.num_layers;
  const int moe = model.moe_layers_in(0, n);
  if (moe != 0 && moe != n) return false;
  const ClusterSpec& cluster = model.cluster();
  // Per usable type, the most layers a stage holds at positions PP - 2
  // and PP - 1 of the key (the fewest micro-batches in flight, and no
  // embedding past the first: Evaluator::max_fitting_layers). Without
  // interleaving, those positions keep 2 and 1 micro-batches in flight at
  // any PP, so the bound shape key's (PP 1, 2 or 3) serves every PP,
  // counted to N; interleaved, they keep more as PP grows, so each
  // configuration has its own, counted to the most its stage can take.
  const int cap_layers = n - (pi.pp - 1);
  const ParallelConfig key = pi.vpp > 1 ? pi : bound_shape_key(pi);
  if (!(key == fit_key_)) {
    fit_key_ = key;
    const int most = pi.vpp > 1 ? cap_layers : n;
    fit_.assign(static_cast<std::size_t>(cluster.num_types()), -1);
    for_each_usable_type(model, key, *options_, &costs_, [&](int h, int, const TypeCosts& tc) {
      int best = 0;
      for (int i = std::max(0, key.pp - 2); i < key.pp; ++i) {
        best = std::max(best, hsdp::most_fitting_layers(model, key, tc, i, most));
      }
      fit_[static_cast<std::size_t>(h)] = best;
    });
  }
  // As search_config: a type's stages hold all N where memory does not
  // limit them below the most a stage can take.
  std::vector<std::pair<int, int>> room;  // (layers, stages) per usable type
  for (int h = 0; h < cluster.num_types(); ++h) {
    const int fit = fit_[static_cast<std::size_t>(h)];
    if (fit < 0) continue;
    const int stages = std::min(stage_capacity(cluster, h, pi, options_->space.constraints), pi.pp);
    room.emplace_back(fit >= cap_layers ? n : fit, stages);
  }
  return hsdp::stages_fall_short(std::move(room), pi.pp, n);
}

bool memory_short_applies(const CostModel& model, const SearchOptions& opt, double incumbent) {
  const int n = model.workload().model.num_layers;
  const int moe = model.moe_layers_in(0, n);
  return opt.bound && opt.prune.memory && opt.prune.load_balance && !opt.uniform &&
         !opt.count_only && (moe == 0 || moe == n) &&
         (std::isfinite(incumbent) || !opt.closest_miss);
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
  // The first block of pp >= 3 gives the keys, and every other block, in
  // canonical order too, is merged alongside (sweep, below): those of pp 1
  // and 2 (each configuration its own shape) and the later ones, whose
  // configurations of a key the first lacks come alone (none in all of Pi,
  // whose later blocks hold only the first's keys; a subset of Pi has
  // them).
  std::size_t lead = 0;
  while (lead < blocks && configs[begin[lead]].pp < 3) ++lead;
  if (lead == blocks) {
    for (std::size_t c = 0; c < n; ++c) order.push_back(c);
    return order;
  }
  // below(k, c): configuration k's degrees order before c's; same(k, c):
  // they are equal (pp aside). Each configuration c of the first block of
  // pp >= 3 comes after every configuration of smaller degrees not yet
  // placed, then those of pp 1 and 2 with its degrees (each its own
  // shape), and before those of the later blocks with its degrees (its
  // shape): all of c's degrees together, which share their type costs
  // (CostModel::type_costs_key; a thread keeps them, TypeCostsCache).
  const auto sweep = [&](const auto& below, const auto& same) {
    std::vector<std::size_t> before(begin.begin(),
                                    begin.begin() + static_cast<std::ptrdiff_t>(lead));
    std::vector<std::size_t> at(begin.begin() + static_cast<std::ptrdiff_t>(lead) + 1,
                                begin.end() - 1);  // each later block's next
    for (std::size_t c = begin[lead]; c < begin[lead + 1]; ++c) {
      for (std::size_t b = 0; b < before.size(); ++b) {
        std::size_t& k = before[b];
        while (k < begin[b + 1] && below(k, c)) order.push_back(k++);
      }
      for (std::size_t b = 0; b < at.size(); ++b) {
        std::size_t& k = at[b];
        while (k < begin[lead + 2 + b] && below(k, c)) order.push_back(k++);
      }
      for (std::size_t b = 0; b < before.size(); ++b) {
        std::size_t& k = before[b];
        while (k < begin[b + 1] && same(k, c)) order.push_back(k++);
      }
      order.push_back(c);
      for (std::size_t b = 0; b < at.size(); ++b) {
        std::size_t& k = at[b];
        while (k < begin[lead + 2 + b] && same(k, c)) order.push_back(k++);
      }
    }
    // What the sweep did not reach (not in canonical order): at the end.
    for (std::size_t b = 0; b < before.size(); ++b) {
      for (std::size_t k = before[b]; k < begin[b + 1]; ++k) order.push_back(k);
    }
    for (std::size_t b = 0; b < at.size(); ++b) {
      for (std::size_t k = at[b]; k < begin[lead + 2 + b]; ++k) order.push_back(k);
    }
  };
  // The degrees as integers, their bits side by side in the order
  // compared, where they fit in 64 bits and every configuration has the
  // same micro-batch and vpp (as in any Pi): most of this order's time on
  // the large case went to comparing the degrees.
  int widths[5] = {};
  bool alike = true;
  for (std::size_t c = 0; c < n; ++c) {
    const ParallelConfig& pi = configs[c];
    const int degrees[5] = {pi.tp, pi.cp, pi.ep, pi.tpe, pi.dp};
    for (int d = 0; d < 5; ++d) {
      alike = alike && degrees[d] > 0;
      if (degrees[d] > 0) {
        widths[d] = std::max(widths[d],
                             static_cast<int>(std::bit_width(static_cast<unsigned>(degrees[d]))));
      }
    }
    alike = alike && pi.micro_batch == configs[0].micro_batch && pi.vpp == configs[0].vpp;
  }
  if (alike && std::accumulate(std::begin(widths), std::end(widths), 0) <= 64) {
    std::vector<std::uint64_t> packed(n);
    for (std::size_t c = 0; c < n; ++c) {
      const ParallelConfig& pi = configs[c];
      const int degrees[5] = {pi.tp, pi.cp, pi.ep, pi.tpe, pi.dp};
      std::uint64_t v = 0;
      for (int d = 0; d < 5; ++d) v = (v << widths[d]) | static_cast<std::uint64_t>(degrees[d]);
      packed[c] = v;
    }
    sweep([&](std::size_t k, std::size_t c) { return packed[k] < packed[c]; },
          [&](std::size_t k, std::size_t c) { return packed[k] == packed[c]; });
    return order;
  }
  const auto less = [](const ParallelConfig& a, const ParallelConfig& b) {
    return std::tie(a.tp, a.cp, a.ep, a.tpe, a.dp) < std::tie(b.tp, b.cp, b.ep, b.tpe, b.dp);
  };
  const auto same = [](ParallelConfig a, ParallelConfig b) {
    a.pp = b.pp = 0;
    return a == b;
  };
  sweep([&](std::size_t k, std::size_t c) { return less(configs[k], configs[c]); },
        [&](std::size_t k, std::size_t c) { return same(configs[k], configs[c]); });
  return order;
}

ConfigBound config_lower_bound(const CostModel& model, const BoundShape& shape,
                               const ParallelConfig& pi, double cut, bool steps_above_cut) {
  const int n = model.workload().model.num_layers;
  const int moe = model.moe_layers_in(0, n);
  const double inf = std::numeric_limits<double>::infinity();
  if (shape.types.empty()) return {inf, inf};
  const LatencyFloorInputs in =
      floor_inputs(shape, pi.pp, n - moe, moe, model.num_microbatches(pi), pi.vpp);
  if (std::isfinite(cut)) {
    // The steps pass the cut at a slower step than the latency: if the
    // slowest step is proven above that, both bounds are above the cut.
    // With the tails pending (0), the latency's test below is this one.
    if (steps_above_cut && !shape.tails_pending) {
      if (const ConfigBound b = floor_past_cut(shape.types, in, cut, true); b.steps > cut) return b;
    }
    if (const ConfigBound b = floor_past_cut(shape.types, in, cut, false); b.latency > cut) {
      return b;
    }
  }
  const double slowest = bottleneck_floor(shape.types, pi.pp, n - moe, moe);
  if (!std::isfinite(slowest)) return {inf, inf};  // not enough stage groups
  return latency_floor(shape.types, in, slowest);
}

ConfigBound config_lower_bound(const CostModel& model, const ParallelConfig& pi,
                               const SearchOptions& opt) {
  return config_lower_bound(model, bound_shape(model, pi, opt), pi);
}

}  // namespace hapmoe
