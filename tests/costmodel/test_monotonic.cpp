// Physical monotonicity of the cost model (docs/costmodel.md) with the
// analytic tables on a realistic workload: a Mixtral-like MoE (N = 8,
// H = 4096, a = 32, g = 8, d = 128, E = 8, k = 2, F_e = 14336, SwiGLU,
// V = 32000), S = 4096, B = 256, on an H100-like device.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "costmodel/analytic.h"
#include "costmodel/cluster.h"
#include "costmodel/cost.h"
#include "costmodel/model.h"
#include "costmodel/plan.h"
#include "costmodel/profile.h"

namespace hapmoe {
namespace {

ModelSpec mixtral_like() {
  ModelSpec m;
  m.name = "mixtral-like";
  m.num_layers = 8;
  m.hidden = 4096;
  m.num_heads = 32;
  m.num_kv_heads = 8;
  m.head_dim = 128;
  m.ffn_hidden = 14336;
  m.mlp = MlpKind::kSwiGlu;
  m.positions = PositionKind::kRotary;
  m.max_positions = 32768;
  m.vocab = 32000;
  m.num_experts = 8;
  m.top_k = 2;
  m.expert_ffn_hidden = 14336;
  m.moe_layers.assign(8, 1);
  return m;
}

Workload workload(int seq_len = 4096, int micro_batch = 1, double imbalance = 1.2) {
  Workload w;
  w.model = mixtral_like();
  w.training.seq_len = seq_len;
  w.training.global_batch = 256;
  w.training.micro_batch = micro_batch;
  w.training.imbalance = imbalance;
  w.training.gamma = 1.0;
  return w;
}

// H100-SXM-like: 989 TFLOP/s dense BF16, 80 GB at 3.35 TB/s, NVLink
// 450 GB/s per direction, 50 GB/s NIC, 8 per node.
ClusterSpec h100_cluster() {
  DeviceSpec d;
  d.name = "H100-like";
  d.peak_flops = 989e12;
  d.memory_bytes = 80e9;
  d.hbm_bandwidth = 3.35e12;
  d.intra_node_bandwidth = 450e9;
  d.inter_node_bandwidth = 50e9;
  d.devices_per_node = 8;
  ClusterSpec c;
  c.name = "h100";
  c.pools.push_back({d, 16, 8});
  return c;
}

ParallelConfig config(int pp, int tp, int cp, int ep, int tpe, int dp, int b = 1) {
  ParallelConfig pi;
  pi.pp = pp;
  pi.tp = tp;
  pi.cp = cp;
  pi.ep = ep;
  pi.tpe = tpe;
  pi.dp = dp;
  pi.micro_batch = b;
  return pi;
}

// Everything needed to cost one stage of one plan; the CostModel holds
// references, so the inputs live here.
struct CostInputs {
  Workload w;
  ClusterSpec c;
  ProfileTables t;
  CostInputs(const Workload& workload_in, const ParallelConfig& pi)
      : w(workload_in),
        c(h100_cluster()),
        t(make_analytic_tables(w, c, pi.micro_batch, {pi.tp}, {pi.cp})) {}
  CostModel model() const { return CostModel(w, c, t); }
};

struct Costed {
  TypeCosts type;
  StageCost stage;
};

// Stage `position` of `pi` holding layers [first, first + layers).
Costed cost_stage(const Workload& w, const ParallelConfig& pi, int position, int first, int layers,
                  Recompute r = {}) {
  const CostInputs s(w, pi);
  const CostModel cm = s.model();
  Costed out;
  out.type = cm.type_costs(pi, 0);
  StageShape shape;
  shape.position = position;
  shape.first_layer = first;
  shape.layers = layers;
  shape.moe_layers = cm.moe_layers_in(first, layers);
  shape.prev_type = position == 0 ? -1 : 0;
  shape.recompute = r;
  if (r.kind == RecomputeKind::kFull)
    shape.moe_in_first_recomputed = cm.moe_layers_in(first, r.layers);
  out.stage = cm.stage_cost(pi, out.type, shape);
  return out;
}

void expect_strictly_decreasing(const std::vector<double>& v, const std::string& what) {
  for (std::size_t i = 1; i < v.size(); ++i) {
    EXPECT_LT(v[i], v[i - 1]) << what << " at step " << i;
  }
}

void expect_strictly_increasing(const std::vector<double>& v, const std::string& what) {
  for (std::size_t i = 1; i < v.size(); ++i) {
    EXPECT_GT(v[i], v[i - 1]) << what << " at step " << i;
  }
}

TEST(CostMonotonic, MoreTpLessWeightAndActivationMemory) {
  // PP = 2, EP = TPE = 1, DP = 1, TP = 1, 2, 4, 8: a middle-of-pipeline view
  // of stage 1 (layers 4..7).
  std::vector<double> weights, activations, dense_params, act_per_layer;
  for (int tp : {1, 2, 4, 8}) {
    const Costed c = cost_stage(workload(), config(2, tp, 1, 1, 1, 1), 1, 4, 4);
    weights.push_back(c.stage.memory.weights);
    activations.push_back(c.stage.memory.activations);
    dense_params.push_back(c.type.moe.dense_params);
    act_per_layer.push_back(c.type.moe.act_bytes);
  }
  expect_strictly_decreasing(weights, "weight memory");
  expect_strictly_decreasing(activations, "activation memory");
  expect_strictly_decreasing(dense_params, "non-expert parameters per device");
  expect_strictly_decreasing(act_per_layer, "activations per MoE layer");
}

TEST(CostMonotonic, MoreEpLessExpertWeightMemory) {
  // TP = 1, DP = 8, EP = 1, 2, 4, 8.
  std::vector<double> expert_params, weights;
  for (int ep : {1, 2, 4, 8}) {
    const Costed c = cost_stage(workload(), config(2, 1, 1, ep, 1, 8), 1, 4, 4);
    expert_params.push_back(c.type.moe.expert_params);
    weights.push_back(c.stage.memory.weights);
  }
  expect_strictly_decreasing(expert_params, "expert parameters per device");
  expect_strictly_decreasing(weights, "weight memory");
}

TEST(CostMonotonic, MoreTpeLessExpertWeightMemory) {
  // TP = 1, EP = 2, DP = 8, TPE = 1, 2, 4.
  std::vector<double> expert_params;
  for (int tpe : {1, 2, 4}) {
    expert_params.push_back(
        cost_stage(workload(), config(2, 1, 1, 2, tpe, 8), 1, 4, 4).type.moe.expert_params);
  }
  expect_strictly_decreasing(expert_params, "expert parameters per device");
}

TEST(CostMonotonic, MoreRecomputationLessActivationMoreBackwardTwoLayerStage) {
  // A 2-layer stage (PP = 4, position 1): none → selective → full:1 → full:2.
  const ParallelConfig pi = config(4, 2, 1, 1, 1, 4);
  std::vector<double> act, bwd, fwd;
  for (const Recompute r :
       {Recompute{RecomputeKind::kNone, 0}, Recompute{RecomputeKind::kSelective, 0},
        Recompute{RecomputeKind::kFull, 1}, Recompute{RecomputeKind::kFull, 2}}) {
    const Costed c = cost_stage(workload(), pi, 1, 2, 2, r);
    act.push_back(c.stage.memory.activations);
    bwd.push_back(c.stage.bwd_s);
    fwd.push_back(c.stage.fwd_s);
  }
  expect_strictly_decreasing(act, "activation memory");
  expect_strictly_increasing(bwd, "backward time");
  // recomputation never changes the forward
  for (double f : fwd) EXPECT_EQ(f, fwd[0]);
}

TEST(CostMonotonic, MoreFullRecomputeLayersLessActivationMoreBackward) {
  // An 8-layer stage (PP = 1): none → selective, and full:1 → ... → full:8.
  const ParallelConfig pi = config(1, 2, 1, 1, 1, 4);
  const Costed none = cost_stage(workload(), pi, 0, 0, 8);
  const Costed selective = cost_stage(workload(), pi, 0, 0, 8, {RecomputeKind::kSelective, 0});
  EXPECT_LT(selective.stage.memory.activations, none.stage.memory.activations);
  EXPECT_GT(selective.stage.bwd_s, none.stage.bwd_s);
  std::vector<double> act{none.stage.memory.activations}, bwd{none.stage.bwd_s};
  for (int k = 1; k <= 8; ++k) {
    const Costed c = cost_stage(workload(), pi, 0, 0, 8, {RecomputeKind::kFull, k});
    act.push_back(c.stage.memory.activations);
    bwd.push_back(c.stage.bwd_s);
  }
  expect_strictly_decreasing(act, "activation memory over K");
  expect_strictly_increasing(bwd, "backward time over K");
}

TEST(CostMonotonic, MoreDpLessOptimizerMemory) {
  // Distributed optimizer, TP = 1, EP = 1: the non-expert states shard over DP·CP
  // and the expert states over EDP = DP.
  std::vector<double> optimizer;
  for (int dp : {1, 2, 4, 8, 16}) {
    optimizer.push_back(
        cost_stage(workload(), config(2, 1, 1, 1, 1, dp), 1, 4, 4).stage.memory.optimizer);
  }
  expect_strictly_decreasing(optimizer, "optimizer memory");
  // Without the distributed optimizer DP does not shard anything.
  Workload w = workload();
  w.training.distributed_optimizer = false;
  const double dp1 = cost_stage(w, config(2, 1, 1, 1, 1, 1), 1, 4, 4).stage.memory.optimizer;
  const double dp8 = cost_stage(w, config(2, 1, 1, 1, 1, 8), 1, 4, 4).stage.memory.optimizer;
  EXPECT_EQ(dp1, dp8);
}

TEST(CostMonotonic, LongerSequenceMoreTime) {
  std::vector<double> layer_fwd, layer_bwd, latency;
  const ParallelConfig pi = config(2, 2, 1, 2, 1, 4);
  for (int s : {1024, 2048, 4096, 8192}) {
    const Workload w = workload(s);
    const CostInputs setup(w, pi);
    const CostModel cm = setup.model();
    const TypeCosts tc = cm.type_costs(pi, 0);
    layer_fwd.push_back(tc.moe.fwd_s);
    layer_bwd.push_back(tc.moe.bwd_s);
    Plan plan;
    plan.parallel = pi;
    plan.stages = {{0, 4, {}}, {0, 4, {}}};
    latency.push_back(cm.evaluate(plan).latency_s);
  }
  expect_strictly_increasing(layer_fwd, "MoE layer forward");
  expect_strictly_increasing(layer_bwd, "MoE layer backward");
  expect_strictly_increasing(latency, "iteration latency");
}

TEST(CostMonotonic, LargerMicroBatchMoreActivationMemory) {
  std::vector<double> act, act_per_layer;
  for (int b : {1, 2, 4}) {
    const Costed c = cost_stage(workload(4096, b), config(2, 2, 1, 2, 1, 4, b), 1, 4, 4);
    act.push_back(c.stage.memory.activations);
    act_per_layer.push_back(c.type.moe.act_bytes);
  }
  expect_strictly_increasing(act, "activation memory");
  expect_strictly_increasing(act_per_layer, "activations per layer");
}

TEST(CostMonotonic, EarlierPipelinePositionsHoldMoreMicroBatches) {
  // PP = 4, two layers per stage; M = 256/(1·2) = 128 ≥ PP.
  const ParallelConfig pi = config(4, 2, 1, 2, 1, 2);
  std::vector<double> in_flight, act;
  for (int i = 0; i < 4; ++i) {
    const Costed c = cost_stage(workload(), pi, i, 2 * i, 2);
    in_flight.push_back(c.stage.in_flight);
    act.push_back(c.stage.memory.activations);
    EXPECT_EQ(c.stage.in_flight, 4 - i);  // min(PP − i, M)
  }
  expect_strictly_decreasing(in_flight, "micro-batches in flight");
  expect_strictly_decreasing(act, "activation memory");
}

TEST(CostMonotonic, HigherImbalanceMoreTime) {
  const ParallelConfig pi = config(1, 1, 1, 2, 2, 8);  // TPE > 1: gathers carry ρ too
  std::vector<double> fwd, bwd, moe_comm, act;
  for (double rho : {1.0, 1.2, 1.5, 2.0}) {
    const CostInputs setup(workload(4096, 1, rho), pi);
    const TypeCosts tc = setup.model().type_costs(pi, 0);
    fwd.push_back(tc.moe.fwd_s);
    bwd.push_back(tc.moe.bwd_s);
    moe_comm.push_back(tc.moe.fwd_parts.ep);
    act.push_back(tc.moe.act_bytes);
  }
  expect_strictly_increasing(fwd, "MoE layer forward");
  expect_strictly_increasing(bwd, "MoE layer backward");
  expect_strictly_increasing(moe_comm, "expert-TP gathers");
  expect_strictly_increasing(act, "expert activations on the busiest device");
}

TEST(CostMonotonic, SlowerLinkMoreTime) {
  // The EP all-to-all across nodes (EP = 16 > 8 per node) is slower than inside one.
  Workload w16 = workload();
  w16.model.num_experts = 16;
  const ParallelConfig intra = config(1, 1, 1, 8, 1, 16);
  const ParallelConfig inter = config(1, 1, 1, 16, 1, 16);
  const CostInputs a(w16, intra), b(w16, inter);
  const double t_intra = a.model().type_costs(intra, 0).moe.fwd_parts.ep;
  const double t_inter = b.model().type_costs(inter, 0).moe.fwd_parts.ep;
  EXPECT_GT(t_inter, t_intra);
}

// type_costs remembers the layer costs of one (TP, CP, EP, TPE,
// micro-batch, type) for every configuration that shares them, and the
// gradient synchronisations per group (the expert groups of EP 8 and of
// EP 4 at DP 16 both have 4 members, 8 and 4 apart): a cost model that has
// costed configurations of other PP, DP and degrees gives what a new one
// gives.
TEST(CostMemo, TypeCostsAreTheSameRememberedOrNot) {
  const Workload w = workload();
  const ClusterSpec c = h100_cluster();
  const ProfileTables t = make_analytic_tables(w, c, 1, {1, 2}, {1, 2});
  const CostModel shared(w, c, t);
  const std::vector<ParallelConfig> configs = {
      config(4, 1, 1, 8, 1, 32), config(1, 1, 1, 8, 1, 128), config(8, 1, 1, 8, 1, 16),
      config(4, 2, 1, 8, 1, 16), config(4, 1, 2, 8, 1, 16),  config(4, 1, 1, 4, 1, 32),
      config(4, 1, 1, 4, 2, 32), config(2, 1, 1, 8, 1, 8),   config(4, 1, 1, 8, 1, 32)};
  // All from the one model first (its memo is its thread's until another
  // model is asked), then each from a new one.
  std::vector<TypeCosts> remembered;
  for (const ParallelConfig& pi : configs) remembered.push_back(shared.type_costs(pi, 0));
  for (std::size_t i = 0; i < configs.size(); ++i) {
    const ParallelConfig& pi = configs[i];
    const TypeCosts& a = remembered[i];
    const TypeCosts b = CostModel(w, c, t).type_costs(pi, 0);
    const std::string at = "pp " + std::to_string(pi.pp) + " tp " + std::to_string(pi.tp) + " cp " +
                           std::to_string(pi.cp) + " ep " + std::to_string(pi.ep) + " tpe " +
                           std::to_string(pi.tpe) + " dp " + std::to_string(pi.dp);
    for (const auto& [x, y] : {std::pair{a.dense, b.dense}, std::pair{a.moe, b.moe}}) {
      EXPECT_EQ(x.fwd_s, y.fwd_s) << at;
      EXPECT_EQ(x.bwd_s, y.bwd_s) << at;
      EXPECT_EQ(x.act_bytes, y.act_bytes) << at;
      EXPECT_EQ(x.dense_params, y.dense_params) << at;
      EXPECT_EQ(x.expert_params, y.expert_params) << at;
      EXPECT_EQ(x.fwd_parts.ep, y.fwd_parts.ep) << at;
    }
    EXPECT_EQ(a.output_params, b.output_params) << at;
    EXPECT_EQ(a.dense_opt_bytes_per_param, b.dense_opt_bytes_per_param) << at;
    EXPECT_EQ(a.expert_opt_bytes_per_param, b.expert_opt_bytes_per_param) << at;
    EXPECT_EQ(a.dp_reduce.s_per_param, b.dp_reduce.s_per_param) << at;
    EXPECT_EQ(a.edp_reduce.s_per_param, b.edp_reduce.s_per_param) << at;
  }
}

// least_recompute narrows its bisection over full recomputation of r
// layers by a guess that assumes the layers alike; with four dense layers
// and four MoE ones (which keep far more activations), first or last, the
// guess is off one way or the other, and the least r that fits must still
// be found, for every capacity between all layers recomputed and none.
TEST(CostMonotonic, LeastFullRecomputationIsTheLeastThatFitsWhateverTheLayers) {
  for (const int mixed : {0, 1, 2}) {
    Workload w = workload();
    if (mixed == 1) w.model.moe_layers = {0, 0, 0, 0, 1, 1, 1, 1};
    if (mixed == 2) w.model.moe_layers = {1, 1, 1, 1, 0, 0, 0, 0};
    const ClusterSpec c = h100_cluster();
    const ParallelConfig pi = config(1, 1, 1, 8, 1, 16);
    const ProfileTables base = make_analytic_tables(w, c, 1, {1}, {1});
    StageShape shape;
    shape.layers = 8;
    shape.moe_layers = mixed != 0 ? 4 : 8;
    const auto bytes = [&](const ProfileTables& t, int r) {
      const CostModel cm(w, c, t);
      StageShape sh = shape;
      sh.recompute = {r == 0 ? RecomputeKind::kNone : RecomputeKind::kFull, r};
      sh.moe_in_first_recomputed = cm.moe_layers_in(0, r);
      return cm.stage_cost(pi, cm.type_costs(pi, 0), sh).memory.total();
    };
    const double none = bytes(base, 0);
    const double all = bytes(base, 8);
    int full = 0;  // capacities at which full recomputation is the choice
    for (int step = 0; step <= 64; ++step) {
      ProfileTables t = base;
      // Selective recomputation never fits: only full r can.
      t.devices[0].capacity_bytes = all + (none - all) * step / 64.0 * 0.999;
      const CostModel cm(w, c, t);
      int least = 0;  // the least r that fits, by a scan
      for (int r = 1; r <= 8 && least == 0; ++r) {
        if (bytes(t, r) <= t.devices[0].capacity_bytes) least = r;
      }
      const std::optional<Recompute> got = cm.least_recompute(pi, cm.type_costs(pi, 0), shape);
      ASSERT_TRUE(got.has_value()) << mixed << " " << step;
      if (got->kind != RecomputeKind::kFull) continue;  // selective fit, and added less
      EXPECT_EQ(got->layers, least) << "layers " << mixed << " step " << step;
      ++full;
    }
    EXPECT_GE(full, 32) << mixed;
  }
}

// least_recompute and fits_with_recompute hold a stage once and change
// only its recomputation per candidate (CostModel::recompute_hold): that
// must give, bit for bit, what stage_hold and stage_cost give the stage
// recomputing so, with whatever else the stage holds (activation offload,
// FSDP shards, optimizer offload, mixed layers, any position).
TEST(CostMonotonic, RecomputeHoldIsStageHoldOfTheRecomputedStage) {
  Workload w = workload();
  w.model.moe_layers = {0, 1, 0, 1, 1, 0, 0, 1};
  const ParallelConfig pi = config(4, 2, 1, 2, 1, 2);
  const CostInputs s(w, pi);
  const CostModel cm = s.model();
  const TypeCosts plain = cm.type_costs(pi, 0);
  std::vector<TypeCosts> variants(4, plain);
  variants[1].activation_offload_layers = 1;
  variants[2].fsdp = Fsdp::kOptimGradsParams;
  variants[3].offload_fraction = variants[3].offload_memory_fraction = 0.5;
  const std::vector<Recompute> candidates = {
      {RecomputeKind::kNone, 0}, {RecomputeKind::kSelective, 0, kDefaultRecomputeModules},
      {RecomputeKind::kFull, 1}, {RecomputeKind::kFull, 2},
      {RecomputeKind::kFull, 3}, {RecomputeKind::kNone, 0}};
  int compared = 0;
  for (std::size_t v = 0; v < variants.size(); ++v) {
    const TypeCosts& tc = variants[v];
    for (int position = 0; position < pi.pp; ++position) {
      for (int first = 0; first + 3 <= w.model.num_layers; first += 2) {
        StageShape shape;
        shape.position = position;
        shape.first_layer = first;
        shape.layers = 3;
        shape.moe_layers = cm.moe_layers_in(first, 3);
        CostModel::StageHold held = cm.stage_hold(pi, tc, shape);
        for (const Recompute& r : candidates) {
          StageShape recomputed = shape;
          recomputed.recompute = r;
          if (r.kind == RecomputeKind::kFull) {
            recomputed.moe_in_first_recomputed = cm.moe_layers_in(first, r.layers);
          }
          cm.recompute_hold(pi, tc, recomputed, held);
          const CostModel::StageHold whole = cm.stage_hold(pi, tc, recomputed);
          const StageCost cost = cm.stage_cost(pi, tc, recomputed);
          const std::string at = "variant " + std::to_string(v) + " position " +
                                 std::to_string(position) + " first " + std::to_string(first) +
                                 " recompute " + std::to_string(static_cast<int>(r.kind)) + ":" +
                                 std::to_string(r.layers);
          EXPECT_EQ(held.memory.total(), whole.memory.total()) << at;
          EXPECT_EQ(held.memory.activations, whole.memory.activations) << at;
          EXPECT_EQ(held.host_bytes, whole.host_bytes) << at;
          EXPECT_EQ(held.recompute_s, whole.recompute_s) << at;
          EXPECT_EQ(held.act, whole.act) << at;
          EXPECT_EQ(held.fits(tc), cost.fits()) << at;
          EXPECT_EQ(whole.memory.total(), cost.memory.total()) << at;
          EXPECT_EQ(whole.recompute_s, cost.recompute_s) << at;
          ++compared;
        }
      }
    }
  }
  EXPECT_EQ(compared, 4 * 4 * 3 * 6);
}

}  // namespace
}  // namespace hapmoe
