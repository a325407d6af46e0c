// Lower bounds of HS-DP (docs/search.md, "Branch and bound"), the parts
// shared by the kernel's files: what a layer adds to a stage's tail (sync +
// optimizer), the least the largest tail can be, and the discrete
// bottleneck floor, the least the slowest stage step can be. bounds.cpp
// builds the bounds on a whole configuration from them (config_lower_bound,
// BoundShape, engine/search.h), which the driver uses to order Pi and skip
// configurations; the stage memo (stage_memo.h) builds the bound of a stage
// mix from them, which the DP (hsdp.cpp) uses to order and skip mixes.
// They are lower bounds: what they rule out never holds the optimum, so
// branch and bound stays exact. Relies on the cost model only.
#pragma once

#include <utility>
#include <vector>

#include "engine/search.h"

namespace hapmoe::hsdp {

// What one more layer of each kind adds to a stage's sync + optimizer time
// on a type (the tail is affine in the stage's parameters): the difference
// between a two-layer and a one-layer stage at the same position.
struct LayerTails {
  double dense = 0;
  double moe = 0;
};

LayerTails layer_tails(const CostModel& model, const ParallelConfig& pi, const TypeCosts& tc);

// The least the layers can add to the largest stage tail: the tails of all
// stages sum to at least every layer's cheapest tail, and the largest is at
// least the mean.
inline double tail_floor(int dense_layers, int moe_layers, double dense_tail, double moe_tail,
                         int pp) {
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
double bottleneck_floor(const std::vector<StageFloor>& types, int pp, int dense, int moe);
// A lower bound on the same from one test instead of a bisection: just
// under t_step when no plan's stages all step within t_step, else 0
// (+infinity when pp stages are not available).
double bottleneck_floor_above(const std::vector<StageFloor>& types, int pp, int dense, int moe,
                              double t_step);

// What a floor on the whole latency needs besides the types: the stages,
// the layers of each kind, the micro-batches, the interleaving, the fixed
// parts of the steps summed (the cheapest embedding, output layer and
// PP - 1 boundaries), the cheapest layer steps and layer tails.
struct LatencyFloorInputs {
  int pp = 1;
  int dense = 0;
  int moe = 0;
  int microbatches = 1;
  int vpp = 1;
  double fixed_sum = 0;
  double dense_step = 0;
  double moe_step = 0;
  double dense_tail = 0;
  double moe_tail = 0;
};

// The inputs of `shape`'s latency floor for pp stages holding `dense` and
// `moe` layers, `microbatches` of them, interleaved vpp times.
LatencyFloorInputs floor_inputs(const BoundShape& shape, int pp, int dense, int moe,
                                int microbatches, int vpp);

// The plain floor of a slowest step T: every layer at its cheapest step,
// the mean tail.
ConfigBound plain_latency_floor(const LatencyFloorInputs& in, double slowest);

// Against a cut (an incumbent): the plain floor at the slowest step that
// one test of the bottleneck floor proves where that floor passes `cut`,
// its latency (or, with `steps`, its steps) taken a little beyond for
// rounding. Above the cut on that measure when the test settles it;
// +infinity when the stages cannot hold the layers; at most the cut
// otherwise (nothing proven). A valid lower bound either way.
ConfigBound floor_past_cut(const std::vector<StageFloor>& types, const LatencyFloorInputs& in,
                           double cut, bool steps);

// A lower bound on the latency of every plan whose slowest stage steps at
// least `slowest` (a bottleneck floor): S + (M - 1) T and the largest tail,
// where T is the plan's slowest step. The layers a stage of each type can
// hold within T, (T - fixed) / step, bound how cheaply the layers can sum
// (each kind alone, on the types cheapest for it first, at most
// min(stages, PP) stages of a type) and how few layers the fullest stage
// holds (its tail at least that many layers' cheapest tails, and at least
// the mean tail). Both fall as T grows, so the bound is the least over the
// intervals between the steps where some type holds one more layer,
// from `slowest` on, each at its left end with its right end's room;
// beyond a few of them, the plain floor (every layer at its cheapest
// step) at the next. +infinity when `slowest` is.
ConfigBound latency_floor(const std::vector<StageFloor>& types, const LatencyFloorInputs& in,
                          double slowest);

// Whether `pp` stages hold fewer than `layers` layers at the most: `room`
// holds per type the most layers a stage of it holds and the stages it can
// give, and the types that hold the most give theirs first (the memory
// pruning's test of a configuration, search_config).
bool stages_fall_short(std::vector<std::pair<int, int>> room, int pp, int layers);

// The most layers, at most `most`, a stage of pi at `position` holds in
// memory, holding the model's last layers (every layer alike; full
// recomputation at worst: CostModel::fits_with_recompute), 0 if not even
// one. Memory grows with the layers, nearly affine: a guess from the
// memory of full recomputation of 1 and 2 layers is taken where it is the
// boundary (it fits and one more does not; fits is monotone, so that is a
// bisection's answer), else a bisection finds it. About half the fits
// tests of the bisection.
int most_fitting_layers(const CostModel& model, const ParallelConfig& pi, const TypeCosts& tc,
                        int position, int most);

// One device type of the stages a partial plan has still to place: the
// least step a stage of it has besides its layers (its cheapest entry
// boundary), the least step of a layer on it, its stages left and the
// layers each of them may hold (the windows of the load-balance pruning
// at the positions left, memory included).
struct StagesLeft {
  double fixed = 0;
  double layer = 0;
  int stages = 0;
  int least = 1;
  int most = 0;
};

// For each count of layers L = 0 .. layers, a lower bound on the slowest
// step of the stages `left` holding L layers between them, into `out`: a
// stage of type t holding k layers steps at least fixed_t + k layer_t,
// with least_t <= k <= most_t. So the slowest step is at least the least
// T at which the stages hold L whole layers: every stage holds its least,
// and from there on T rises to the next whole layer of some type, which
// adds that type's stages to what they hold. Tighter than the balanced
// split in fractions of a layer when stages hold few layers; +infinity
// where the stages cannot hold L layers, 0 where a type's window is empty
// (no floor then).
void whole_layer_floors(const std::vector<StagesLeft>& left, int layers, std::vector<double>& out);

// One device type of the stages a partial plan has still to place, for
// the sum of their layer steps: the least step of a dense and of a MoE
// layer on it, and the most layers its stages left hold between them.
struct LayersOnType {
  double dense = 0;
  double moe = 0;
  long long most = 0;
};

// For each count c = 0 .. layers, the least sum of the steps of c dense
// layers placed on `types` into `dense`, and of c MoE layers into `moe`:
// cheapest type first, each type up to its most; +infinity where they do
// not fit. dense[d] + moe[m] is a lower bound on the sum of the layer
// steps of d dense and m MoE layers placed on the types together (in any
// placement, the layers of one kind alone are within the types' room).
void layer_sum_floors(const std::vector<LayersOnType>& types, int layers,
                      std::vector<double>& dense, std::vector<double>& moe);

}  // namespace hapmoe::hsdp
