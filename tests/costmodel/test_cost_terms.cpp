// Independent tests of every term of the cost model against its
// specification, docs/costmodel.md. Every expectation is computed here, by
// hand, from the formulas of the doc on small synthetic inputs with round
// numbers; no expectation comes from calling another function of the
// implementation. Most layer/stage/iteration tests read hand-filled profile
// tables (so the numbers are exact and independent of the analytic
// generator); the analytic generator is tested on its own.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <optional>
#include <utility>
#include <vector>

#include "costmodel/analytic.h"
#include "costmodel/cluster.h"
#include "costmodel/cost.h"
#include "costmodel/errors.h"
#include "costmodel/model.h"
#include "costmodel/plan.h"
#include "costmodel/profile.h"
#include "tests/costmodel/rel_near.h"
#include "tests/costmodel/synthetic_model.h"

namespace hapmoe {
namespace {

// ---------------------------------------------------------------------------
// Doc formulas used as test-side arithmetic ("Analytic communication table"):
// ring / pairwise primitives (all-gather, reduce-scatter, all-to-all):
//   (w-1)·α + (w-1)/w · n/B
double ring(double n, double w, double bandwidth, double latency) {
  return (w - 1.0) * latency + (w - 1.0) / w * n / bandwidth;
}
// all-reduce: 2(w-1)·α + 2(w-1)/w · n/B
double all_reduce(double n, double w, double bandwidth, double latency) {
  return 2.0 * (w - 1.0) * latency + 2.0 * (w - 1.0) / w * n / bandwidth;
}
// point-to-point: α + n/B
double p2p(double n, double bandwidth, double latency) { return latency + n / bandwidth; }

// t_gemm(r, n, c) = max(2·r·n·c / (P·e), β·(r·c + c·n + r·n) / W) ("Analytic compute table").
double roofline(double r, double n, double c, double peak_times_eff, double hbm) {
  return std::max(2.0 * r * n * c / peak_times_eff, 2.0 * (r * c + c * n + r * n) / hbm);
}

// ---------------------------------------------------------------------------
// Synthetic model: N = 4, H = 1024, a = 8, g = 2, d = 128, F = 4096,
// V = 32000, SwiGLU (m = 3), rotary. The MoE variant: E = 8, k = 2,
// F_e = 2048. Training: S = 1024, B = 64, b = 1, bf16, distributed
// optimizer, all-to-all, rho = 1.4 and gamma = 0.5 so f_imb = 1 + 0.5·0.4 = 1.2.
constexpr double kH = 1024, kA = 8, kG = 2, kD = 128, kF = 4096, kV = 32000;
constexpr double kE = 8, kK = 2, kFe = 2048;
constexpr double kS = 1024;
constexpr double kImb = 1.2;  // f_imb = 1 + γ(ρ−1) = 1 + 0.5·(1.4−1)

// Attention projection parameters: Q H·a·d + K,V 2·H·g·d + O a·d·H.
constexpr double kAttnProj = kH * kA * kD + 2 * kH * kG * kD + kA * kD * kH;  // 2,621,440
// Attention block parameters: projections + its input norm (H). The doc
// leaves norm weights implicit; model.h counts one H vector per norm.
constexpr double kAttnParams = kAttnProj + kH;
// Dense MLP block: m·H·F + its norm (H).
constexpr double kDenseMlpParams = 3 * kH * kF + kH;
// MoE block, non-expert part: router H·E + shared m·H·F_s (0 here) + norm H.
constexpr double kRouterParams = kH * kE + kH;
// All routed experts of a layer: E·m·H·F_e.
constexpr double kExpertParams = kE * 3 * kH * kFe;  // 50,331,648

using test_models::dense_model;

ModelSpec moe_model(std::vector<std::uint8_t> layers = {1, 1, 1, 1}) {
  ModelSpec m = dense_model();
  m.name = "synthetic-moe";
  m.num_experts = 8;
  m.top_k = 2;
  m.expert_ffn_hidden = 2048;
  m.moe_layers = std::move(layers);
  return m;
}

// Multi-latent attention: q_lora 384, kv_lora 128, d_nope 64, d_rope 32,
// d_v 64 (d_qk = 96).
ModelSpec mla_model() {
  ModelSpec m = dense_model();
  m.name = "synthetic-mla";
  m.num_kv_heads = 8;
  m.mla.q_lora_rank = 384;
  m.mla.kv_lora_rank = 128;
  m.mla.qk_nope_head_dim = 64;
  m.mla.qk_rope_head_dim = 32;
  m.mla.v_head_dim = 64;
  return m;
}

TrainingSpec training() {
  TrainingSpec t;
  t.seq_len = 1024;
  t.global_batch = 64;
  t.micro_batch = 1;
  t.precision = Precision::kBf16;
  t.distributed_optimizer = true;
  t.dispatcher = Dispatcher::kAllToAll;
  t.imbalance = 1.4;
  t.gamma = 0.5;
  return t;
}

// Device A (type 0): 100 TFLOP/s, 8 per node. Device B (type 1): 50 TFLOP/s,
// 4 per node. The figures matter for the analytic generator and MFU; the
// hand-filled tables below carry their own numbers.
DeviceSpec device_a() {
  DeviceSpec d;
  d.name = "DevA";
  d.peak_flops = 100e12;
  d.memory_bytes = 80e9;
  d.hbm_bandwidth = 1e12;
  d.intra_node_bandwidth = 100e9;
  d.inter_node_bandwidth = 10e9;
  d.devices_per_node = 8;
  d.gemm_efficiency = 1.0;
  d.intra_node_latency = 1e-6;
  d.inter_node_latency = 2e-6;
  return d;
}

DeviceSpec device_b() {
  DeviceSpec d;
  d.name = "DevB";
  d.peak_flops = 50e12;
  d.memory_bytes = 40e9;
  d.hbm_bandwidth = 0.5e12;
  d.intra_node_bandwidth = 50e9;
  d.inter_node_bandwidth = 5e9;
  d.devices_per_node = 4;
  d.gemm_efficiency = 0.5;
  d.intra_node_latency = 2e-6;
  d.inter_node_latency = 4e-6;
  return d;
}

ClusterSpec two_type_cluster() {
  ClusterSpec c;
  c.name = "synthetic-two-types";
  c.pools.push_back({device_a(), 4, 8});
  c.pools.push_back({device_b(), 4, 4});
  return c;
}

// ---------------------------------------------------------------------------
// Hand-filled communication table. Each primitive gets its own share of the
// link bandwidth so a test notices when the wrong primitive is used:
//
//                AR      AG      RS      A2A     P2P      α
//   type 0 intra 100e9   80e9    50e9    40e9    25e9     1 µs
//   type 0 inter 10e9    8e9     5e9     4e9     2.5e9    2 µs
//   type 1 intra 50e9    40e9    25e9    20e9    12.5e9   2 µs
//   type 1 inter 5e9     4e9     2.5e9   2e9     1.25e9   4 µs
//   cross 0-1    2e9     1.6e9   1e9     0.8e9   0.5e9    5 µs
constexpr double kPrimShare[kNumPrimitives] = {1.0, 0.8, 0.5, 0.4, 0.25};

void fill_comm(CommTable& comm) {
  struct Row {
    LinkKind kind;
    int a, b;
    double bandwidth, latency;
  };
  const Row rows[] = {{LinkKind::kIntraNode, 0, 0, 100e9, 1e-6},
                      {LinkKind::kInterNode, 0, 0, 10e9, 2e-6},
                      {LinkKind::kIntraNode, 1, 1, 50e9, 2e-6},
                      {LinkKind::kInterNode, 1, 1, 5e9, 4e-6},
                      {LinkKind::kCrossType, 0, 1, 2e9, 5e-6}};
  for (const Row& r : rows) {
    for (int p = 0; p < kNumPrimitives; ++p) {
      comm.set(static_cast<Primitive>(p), {r.kind, r.a, r.b},
               {r.bandwidth * kPrimShare[p], r.latency});
    }
  }
}

// Hand-filled compute entries (seconds per micro-batch on one device).
ComputeEntry entry_a() {
  ComputeEntry e;
  e.attention_fwd = 1.0e-3;
  e.core_attention_fwd = 4.0e-4;
  e.core_attention_bwd = 1.0e-3;
  e.dense_mlp_fwd = 2.0e-3;
  e.dense_act_fwd = 1.0e-4;
  e.expert_fwd = 5.0e-4;
  e.expert_act_fwd = 5.0e-5;
  e.shared_fwd = 0.0;
  e.router_fwd = 1.0e-4;
  e.embedding_fwd = 2.0e-5;
  e.output_fwd = 3.0e-3;
  e.attention_bwd = 2.2e-3;
  e.dense_mlp_bwd = 4.0e-3;
  e.expert_bwd = 1.0e-3;
  e.shared_bwd = 0.0;
  e.router_bwd = 2.0e-4;
  e.embedding_bwd = 4.0e-5;
  e.output_bwd = 6.5e-3;
  return e;
}

ComputeEntry entry_b() {
  ComputeEntry e;
  e.attention_fwd = 1.5e-3;
  e.core_attention_fwd = 6.0e-4;
  e.core_attention_bwd = 1.5e-3;
  e.dense_mlp_fwd = 3.0e-3;
  e.dense_act_fwd = 1.5e-4;
  e.expert_fwd = 8.0e-4;
  e.expert_act_fwd = 8.0e-5;
  e.shared_fwd = 0.0;
  e.router_fwd = 1.5e-4;
  e.embedding_fwd = 3.0e-5;
  e.output_fwd = 4.5e-3;
  e.attention_bwd = 3.3e-3;
  e.dense_mlp_bwd = 6.0e-3;
  e.expert_bwd = 1.6e-3;
  e.shared_bwd = 0.0;
  e.router_bwd = 3.0e-4;
  e.embedding_bwd = 6.0e-5;
  e.output_bwd = 9.5e-3;
  return e;
}

// Coefficients: type 0 capacity 80e9, eta 0.8, HBM 1e12, 3e-11 s/param,
// scale 1, overhead 2e9; type 1 capacity 40e9, eta 0.5, HBM 0.5e12,
// 6e-11 s/param, scale 1.25, overhead 1e9.
ProfileTables hand_tables() {
  ProfileTables t;
  t.devices.resize(2);
  t.devices[0] = {80e9, 0.8, 1e12, 3e-11, 1.0, 2e9};
  t.devices[1] = {40e9, 0.5, 0.5e12, 6e-11, 1.25, 1e9};
  t.compute.resize(2);
  for (int tp : {1, 2, 4, 8, 16}) {
    for (int cp : {1, 2, 4}) {
      t.compute[0][{tp, cp}] = entry_a();
      t.compute[1][{tp, cp}] = entry_b();
    }
  }
  fill_comm(t.comm);
  return t;
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

// Hand-made per-type costs, to test the stage formulas on their own.
TypeCosts hand_type_costs(int type) {
  TypeCosts t;
  t.type = type;
  t.dense.fwd_s = 1e-3;
  t.dense.bwd_s = 2e-3;
  t.dense.act_bytes = 100e6;
  // The default selective set (core_attn, moe_act) frees 20 MB and adds 0.1 ms.
  t.dense.modules[static_cast<std::size_t>(RecomputeModule::kCoreAttn)] = {20e6, 1e-4};
  t.dense.act_full_bytes = 10e6;
  t.dense.dense_params = 50e6;
  t.moe.fwd_s = 1.5e-3;
  t.moe.bwd_s = 3e-3;
  t.moe.act_bytes = 200e6;
  t.moe.modules[static_cast<std::size_t>(RecomputeModule::kMoeAct)] = {50e6, 2e-4};
  t.moe.act_full_bytes = 10e6;
  t.moe.dense_params = 20e6;
  t.moe.expert_params = 100e6;
  t.moe.moe_buffer_bytes = 30e6;
  t.embedding_fwd_s = 1e-4;
  t.embedding_bwd_s = 2e-4;
  t.output_fwd_s = 5e-4;
  t.output_bwd_s = 1e-3;
  t.embedding_params = 16e6;
  t.output_params = 16e6;
  t.logits_bytes = 40e6;
  t.capacity_bytes = 80e9;
  t.overhead_bytes = 2e9;
  t.activation_scale = 1.25;
  t.weight_bytes_per_param = 2;
  t.grad_bytes_per_param = 4;
  t.dense_opt_bytes_per_param = 3;   // 12 / (DP·CP) with DP·CP = 4
  t.expert_opt_bytes_per_param = 6;  // 12 / EDP with EDP = 2
  t.optimizer_s_per_param = 1e-11;
  t.dp_reduce = {1e-5, 1e-10};
  t.edp_reduce = {2e-5, 2e-10};
  return t;
}

StageShape shape(int position, int first_layer, int layers, int moe_layers, int prev_type,
                 Recompute r = {}, int moe_in_first_recomputed = 0) {
  StageShape s;
  s.position = position;
  s.first_layer = first_layer;
  s.layers = layers;
  s.moe_layers = moe_layers;
  s.prev_type = prev_type;
  s.recompute = r;
  s.moe_in_first_recomputed = moe_in_first_recomputed;
  return s;
}

// Fixture: the MoE workload, the two-type cluster and the hand tables. The
// CostModel holds references, so it is built from the members on demand.
class CostTerms : public ::testing::Test {
 protected:
  Workload workload{moe_model(), training()};
  ClusterSpec cluster = two_type_cluster();
  ProfileTables tables = hand_tables();
  CostModel model() const { return CostModel(workload, cluster, tables); }
};

// ===========================================================================
// Communication primitives (docs/costmodel.md, "Analytic communication table")

TEST(CostTermsComm, EveryPrimitiveFormula) {
  CommTable comm;
  const Link intra{LinkKind::kIntraNode, 0, 0};
  for (int p = 0; p < kNumPrimitives; ++p) {
    comm.set(static_cast<Primitive>(p), intra, {100e9, 1e-6});  // B = 100 GB/s, α = 1 µs
  }
  const double n = 8e6;  // bytes; n/B = 8e-5 s
  // all-reduce, w = 4: 2·3·1e-6 + 2·3/4·8e-5 = 6e-6 + 1.2e-4
  EXPECT_REL(comm.time(Primitive::kAllReduce, n, 4, intra), 6e-6 + 1.2e-4);
  // all-gather, w = 4: 3·1e-6 + 3/4·8e-5 = 3e-6 + 6e-5
  EXPECT_REL(comm.time(Primitive::kAllGather, n, 4, intra), 3e-6 + 6e-5);
  // reduce-scatter, w = 4: same form as all-gather
  EXPECT_REL(comm.time(Primitive::kReduceScatter, n, 4, intra), 3e-6 + 6e-5);
  // all-to-all, w = 8: 7·1e-6 + 7/8·8e-5 = 7e-6 + 7e-5
  EXPECT_REL(comm.time(Primitive::kAllToAll, n, 8, intra), 7e-6 + 7e-5);
  // all-reduce, w = 2: 2·1·1e-6 + 2·1/2·8e-5 = 2e-6 + 8e-5
  EXPECT_REL(comm.time(Primitive::kAllReduce, n, 2, intra), 2e-6 + 8e-5);
  // point-to-point: α + n/B = 1e-6 + 8e-5
  EXPECT_REL(comm.time(Primitive::kP2P, n, 2, intra), 1e-6 + 8e-5);
}

TEST(CostTermsComm, GroupOfOneAndEmptyMessageCostNothing) {
  CommTable comm;
  const Link intra{LinkKind::kIntraNode, 0, 0};
  for (int p = 0; p < kNumPrimitives; ++p) {
    comm.set(static_cast<Primitive>(p), intra, {100e9, 1e-6});
  }
  // "A group of size 1 costs nothing."
  for (Primitive p : {Primitive::kAllReduce, Primitive::kAllGather, Primitive::kReduceScatter,
                      Primitive::kAllToAll}) {
    EXPECT_EQ(comm.time(p, 8e6, 1, intra), 0.0) << to_string(p);
  }
  // No bytes, no time (not even the latency).
  for (int p = 0; p < kNumPrimitives; ++p) {
    EXPECT_EQ(comm.time(static_cast<Primitive>(p), 0.0, 8, intra), 0.0)
        << to_string(static_cast<Primitive>(p));
  }
}

TEST(CostTermsComm, EntriesAreKeyedByPrimitiveLinkKindAndTypes) {
  CommTable comm;
  fill_comm(comm);
  // all-gather, type 1 intra: B = 40e9, α = 2 µs; w = 4, n = 4e6:
  // 3·2e-6 + 3/4·4e6/40e9 = 6e-6 + 7.5e-5
  EXPECT_REL(comm.time(Primitive::kAllGather, 4e6, 4, {LinkKind::kIntraNode, 1, 1}), 6e-6 + 7.5e-5);
  // reduce-scatter, type 0 inter: B = 5e9, α = 2 µs: 3·2e-6 + 3/4·4e6/5e9 = 6e-6 + 6e-4
  EXPECT_REL(comm.time(Primitive::kReduceScatter, 4e6, 4, {LinkKind::kInterNode, 0, 0}),
             6e-6 + 6e-4);
  // Cross link is symmetric in the two types: p2p B = 0.5e9, α = 5 µs.
  EXPECT_REL(comm.time(Primitive::kP2P, 1e6, 2, {LinkKind::kCrossType, 1, 0}), 5e-6 + 1e6 / 0.5e9);
  EXPECT_REL(comm.time(Primitive::kP2P, 1e6, 2, {LinkKind::kCrossType, 0, 1}), 5e-6 + 1e6 / 0.5e9);
  // An absent entry is a contract violation.
  CommTable empty;
  EXPECT_THROW(empty.time(Primitive::kAllGather, 1e6, 4, {LinkKind::kIntraNode, 0, 0}),
               ContractError);
}

// ===========================================================================
// Roofline GEMM (docs/costmodel.md, "Analytic compute table")

TEST(CostTermsAnalytic, GemmTimeComputeBound) {
  DeviceSpec d = device_a();
  d.gemm_efficiency = 0.5;  // P·e = 50e12
  // 4096³ GEMM: compute 2·4096³/50e12 = 1.37438953472e11/5e13 = 2.74877906944e-3 s;
  // traffic 2·3·4096²/1e12 = 1.00663296e-4 s: compute bound.
  const double compute = 2.0 * 4096.0 * 4096.0 * 4096.0 / 50e12;
  const double traffic = 2.0 * (3.0 * 4096.0 * 4096.0) / 1e12;
  ASSERT_GT(compute, traffic);
  EXPECT_REL(gemm_time(4096, 4096, 4096, d, 2.0), compute);
  EXPECT_REL(compute, 2.74877906944e-3);
}

TEST(CostTermsAnalytic, GemmTimeMemoryBound) {
  DeviceSpec d = device_a();
  d.gemm_efficiency = 0.5;
  // GEMV (r = 1, n = 4096, c = 1024): compute 2·1·4096·1024/5e13 = 1.6777216e-7 s;
  // traffic 2·(1·1024 + 1024·4096 + 1·4096)/1e12 = 8.398848e-6 s: memory bound.
  const double traffic = 2.0 * (1.0 * 1024 + 1024.0 * 4096 + 1.0 * 4096) / 1e12;
  EXPECT_REL(gemm_time(1, 4096, 1024, d, 2.0), traffic);
  EXPECT_REL(traffic, 8.398848e-6);
  // The argument order is (r, n, c). r = 64: compute 2·64·4096·1024/5e13 =
  // 1.073741824e-5 s beats traffic 2·(64·1024 + 1024·4096 + 64·4096)/1e12 = 9.043968e-6 s.
  EXPECT_REL(gemm_time(64, 4096, 1024, d, 2.0),
             std::max(2.0 * 64 * 4096 * 1024 / 50e12,
                      2.0 * (64.0 * 1024 + 1024.0 * 4096 + 64.0 * 4096) / 1e12));
  EXPECT_REL(gemm_time(64, 4096, 1024, d, 2.0), 1.073741824e-5);
}

// ===========================================================================
// Analytic compute entries at TP = 2, CP = 2, b = 1, S = 1024:
// t = b·S/CP = 512 tokens, t_sp = t/TP = 256. Device: P = 100e12, e = 0.5,
// W = 1e12 (P·e = 50e12).

struct AnalyticCase {
  Workload workload;
  ClusterSpec cluster;
  ProfileTables tables;
};

DeviceSpec roofline_device() {
  DeviceSpec d = device_a();
  d.name = "Roof";
  d.gemm_efficiency = 0.5;
  return d;
}

ClusterSpec single_cluster(const DeviceSpec& d) {
  ClusterSpec c;
  c.name = "single";
  c.pools.push_back({d, 2, d.devices_per_node});
  return c;
}

// MoE model with shared experts (F_s = 1024) and dense layers (moe 0,1,0,1).
ModelSpec moe_shared_model() {
  ModelSpec m = moe_model({0, 1, 0, 1});
  m.shared_expert_ffn_hidden = 1024;
  return m;
}

constexpr double kPe = 50e12;  // P·e of roofline_device()
constexpr double kW = 1e12;    // HBM of roofline_device()

// Core attention of `flops` forward FLOPs on roofline_device() (P = 100e12)
// at the fused kernel's own share of peak for the head width and the
// kernel's length (docs/costmodel.md, "Core attention"; the table itself is
// checked by hand in test_gemm_shape.cpp), not at the GEMMs' P·e: the
// forward, and the backward's 2.5x the FLOPs.
double core_fwd(double flops, double head, double len) {
  return flops / (100e12 * attention_efficiency(head, len).fwd);
}
double core_bwd(double flops, double head, double len) {
  return 2.5 * flops / (100e12 * attention_efficiency(head, len).bwd);
}

const ComputeEntry& analytic_entry(const ProfileTables& t, int tp, int cp) {
  return t.compute[0].at({tp, cp});
}

TEST(CostTermsAnalytic, AttentionProjectionsCoreAndNorms) {
  const Workload w{moe_shared_model(), training()};
  const ClusterSpec c = single_cluster(roofline_device());
  const ProfileTables t = make_analytic_tables(w, c, 1, {2}, {2});
  const ComputeEntry& e = analytic_entry(t, 2, 2);
  const double tok = 512, tsp = 256;
  // QKV: t_gemm(t, (a+2g)·d/TP, H) = t_gemm(512, (8+4)·128/2 = 768, 1024)
  const double qkv = roofline(tok, (kA + 2 * kG) * kD / 2, kH, kPe, kW);
  // output: t_gemm(t, H, a·d/TP) = t_gemm(512, 1024, 512)
  const double out = roofline(tok, kH, kA * kD / 2, kPe, kW);
  // causal core: 2·t·(S/2)·(a/TP)·(d_qk + d_v) / (P·e)
  // at the fused kernel's share of peak, head width 128, length S/CP = 512
  const double core_flops = 2.0 * tok * (kS / 2) * (kA / 2) * (kD + kD);
  EXPECT_REL(core_flops, 2.0 * 512 * 512 * 4 * 256);
  const double core = core_fwd(core_flops, kD, 512);
  EXPECT_REL(core, core_flops / (100e12 * 315.0 / 989.0));  // causal forward 315 TFLOP/s
  // norms/residuals/rotary: 8 passes of t_sp·H·β at W
  const double elem = 8.0 * tsp * kH * 2.0 / kW;
  EXPECT_REL(e.core_attention_fwd, core);
  EXPECT_REL(e.core_attention_bwd, core_bwd(core_flops, kD, 512));
  EXPECT_REL(e.attention_fwd, qkv + out + core + elem);
  // backward: GEMMs twice, core 2.5× the FLOPs, memory-bound passes twice
  EXPECT_REL(e.attention_bwd, 2.0 * (qkv + out) + core_bwd(core_flops, kD, 512) + 2.0 * elem);
}

// What the norm and mla_up_proj recompute modules rerun, and what they free
// (docs/costmodel.md, "Recompute by module").
TEST(CostTermsAnalytic, RecomputeModulesOfNormsAndMlaUpProjections) {
  const Workload w{mla_model(), training()};
  const ClusterSpec c = single_cluster(roofline_device());
  // TP = 2, CP = 1: t = 1024, t_sp = 512, a/TP = 4, d_qk = 96, d_v = 64.
  const ProfileTables t = make_analytic_tables(w, c, 1, {2}, {1});
  const ComputeEntry& e = analytic_entry(t, 2, 1);
  const double tok = 1024, tsp = 512;
  // One RMSNorm reads and writes t_sp·H·β.
  EXPECT_REL(e.norm_fwd, 2.0 * tsp * kH * 2.0 / kW);
  // The up-projections (q_lora → a/TP·d_qk, kv_lora → a/TP·(nope + v)) and
  // the rotary of q and k (read and write a/TP·2·d_rope per token).
  const double q_up = roofline(tok, 4 * 96, 384, kPe, kW);
  const double kv_up = roofline(tok, 4 * (64 + 64), 128, kPe, kW);
  EXPECT_REL(e.mla_up_fwd, q_up + kv_up + 2.0 * tok * 4 * 2 * 32 * 2.0 / kW);

  const CostModel cm(w, c, t);
  const TypeCosts tc = cm.type_costs(config(1, 2, 1, 1, 1, 4), 0);
  const LayerCost::ModuleCost up =
      tc.dense.modules[static_cast<std::size_t>(RecomputeModule::kMlaUpProj)];
  // Frees the up-projected Q, K (a·d_qk each) and V (a·d_v): t_sp·(2·8·96 + 8·64)·β.
  EXPECT_REL(up.saved_bytes, tsp * (2 * kA * 96 + kA * 64) * 2);
  EXPECT_REL(up.extra_s, e.mla_up_fwd);
  // MLA's input norm is a module of its own: its output, H per token.
  const LayerCost::ModuleCost ln =
      tc.dense.modules[static_cast<std::size_t>(RecomputeModule::kLayernorm)];
  EXPECT_REL(ln.saved_bytes, tsp * kH * 2);
  EXPECT_REL(ln.extra_s, e.norm_fwd);
  // A model without MLA has no such module.
  const Workload plain{dense_model(), training()};
  const ProfileTables tp = make_analytic_tables(plain, c, 1, {2}, {1});
  EXPECT_EQ(analytic_entry(tp, 2, 1).mla_up_fwd, 0.0);
  const CostModel cp(plain, c, tp);
  EXPECT_EQ(cp.type_costs(config(1, 2, 1, 1, 1, 4), 0)
                .dense.selective(module_bit(RecomputeModule::kMlaUpProj))
                .saved_bytes,
            0.0);
}

TEST(CostTermsAnalytic, MultiLatentAttentionProjections) {
  Workload w{mla_model(), training()};
  const ClusterSpec c = single_cluster(roofline_device());
  {
    // TP = 2, CP = 1: t = 1024, t_sp = 512, a/TP = 4, d_qk = 96, d_v = 64.
    const ProfileTables t = make_analytic_tables(w, c, 1, {2}, {1});
    const ComputeEntry& e = analytic_entry(t, 2, 1);
    const double tok = 1024, tsp = 512;
    const double q_down = roofline(tok, 384, kH, kPe, kW);            // H → q_lora
    const double q_up = roofline(tok, 4 * 96, 384, kPe, kW);          // q_lora → a/TP·d_qk
    const double kv_down = roofline(tok, 128 + 32, kH, kPe, kW);      // H → kv_lora + rope
    const double kv_up = roofline(tok, 4 * (64 + 64), 128, kPe, kW);  // kv_lora → a/TP·(nope+v)
    const double o = roofline(tok, kH, 4 * 64, kPe, kW);              // a/TP·d_v → H
    // head width max(d_qk, d_v) = 96, length S = 1024
    const double core_flops = 2.0 * tok * (kS / 2) * 4 * (96 + 64);
    const double core = core_fwd(core_flops, 96, kS);
    const double elem = 8.0 * tsp * kH * 2.0 / kW;
    const double proj = q_down + q_up + kv_down + kv_up + o;
    EXPECT_REL(e.core_attention_fwd, core);
    EXPECT_REL(e.attention_fwd, proj + core + elem);
    EXPECT_REL(e.attention_bwd, 2.0 * proj + core_bwd(core_flops, 96, kS) + 2.0 * elem);
  }
  {
    // q_lora_rank = 0: queries projected directly, t_gemm(t, a/TP·d_qk, H).
    w.model.mla.q_lora_rank = 0;
    const ProfileTables t = make_analytic_tables(w, c, 1, {2}, {1});
    const ComputeEntry& e = analytic_entry(t, 2, 1);
    const double tok = 1024, tsp = 512;
    const double q = roofline(tok, 4 * 96, kH, kPe, kW);
    const double kv_down = roofline(tok, 128 + 32, kH, kPe, kW);
    const double kv_up = roofline(tok, 4 * (64 + 64), 128, kPe, kW);
    const double o = roofline(tok, kH, 4 * 64, kPe, kW);
    const double core = core_fwd(2.0 * tok * (kS / 2) * 4 * (96 + 64), 96, kS);
    const double elem = 8.0 * tsp * kH * 2.0 / kW;
    EXPECT_REL(e.attention_fwd, q + kv_down + kv_up + o + core + elem);
  }
}

TEST(CostTermsAnalytic, DenseMlpSwiGluAndGelu) {
  Workload w{moe_shared_model(), training()};
  const ClusterSpec c = single_cluster(roofline_device());
  const double tok = 512, tsp = 256;
  const double elem = 8.0 * tsp * kH * 2.0 / kW;  // the MLP block's norms/residuals
  {
    // SwiGLU (m = 3): up+gate t_gemm(t, 2·F/TP, H), down t_gemm(t, H, F/TP),
    // activation 3 passes of t·F/TP·β at W.
    const ProfileTables t = make_analytic_tables(w, c, 1, {2}, {2});
    const ComputeEntry& e = analytic_entry(t, 2, 2);
    const double up = roofline(tok, 2 * kF / 2, kH, kPe, kW);
    const double down = roofline(tok, kH, kF / 2, kPe, kW);
    const double act = 3.0 * tok * (kF / 2) * 2.0 / kW;
    EXPECT_REL(e.dense_act_fwd, act);
    EXPECT_REL(e.dense_mlp_fwd, up + down + act + elem);
    EXPECT_REL(e.dense_mlp_bwd, 2.0 * (up + down) + 2.0 * act + 2.0 * elem);
  }
  {
    // GELU (m = 2): up t_gemm(t, F/TP, H), down t_gemm(t, H, F/TP), 2 passes.
    w.model.mlp = MlpKind::kGelu;
    const ProfileTables t = make_analytic_tables(w, c, 1, {2}, {2});
    const ComputeEntry& e = analytic_entry(t, 2, 2);
    const double up = roofline(tok, kF / 2, kH, kPe, kW);
    const double down = roofline(tok, kH, kF / 2, kPe, kW);
    const double act = 2.0 * tok * (kF / 2) * 2.0 / kW;
    EXPECT_REL(e.dense_act_fwd, act);
    EXPECT_REL(e.dense_mlp_fwd, up + down + act + elem);
    EXPECT_REL(e.dense_mlp_bwd, 2.0 * (up + down) + 2.0 * act + 2.0 * elem);
  }
}

TEST(CostTermsAnalytic, RoutedExpertMlp) {
  const Workload w{moe_shared_model(), training()};
  const ClusterSpec c = single_cluster(roofline_device());
  const ProfileTables t = make_analytic_tables(w, c, 1, {2}, {2});
  const ComputeEntry& e = analytic_entry(t, 2, 2);
  const double tsp = 256;
  // one expert-width MLP over t_sp tokens: 2·t_sp·H·F_e·m/(P·e) + activation
  // (m passes of t_sp·F_e·β at W).
  const double gemm = 2.0 * tsp * kH * kFe * 3 / kPe;  // = 3.221225472e9/5e13
  const double act = 3.0 * tsp * kFe * 2.0 / kW;
  EXPECT_REL(gemm, 6.442450944e-5);
  EXPECT_REL(e.expert_act_fwd, act);
  EXPECT_REL(e.expert_fwd, gemm + act);
  EXPECT_REL(e.expert_bwd, 2.0 * gemm + 2.0 * act);
}

TEST(CostTermsAnalytic, SharedExpertsAreATpShardedMlp) {
  const Workload w{moe_shared_model(), training()};
  const ClusterSpec c = single_cluster(roofline_device());
  const ProfileTables t = make_analytic_tables(w, c, 1, {2}, {2});
  const ComputeEntry& e = analytic_entry(t, 2, 2);
  const double tok = 512;
  // width F_s = 1024 sharded over TP = 2: up+gate t_gemm(t, 2·512, H),
  // down t_gemm(t, H, 512), activation 3 passes of t·512·β.
  const double up = roofline(tok, 2 * 512, kH, kPe, kW);
  const double down = roofline(tok, kH, 512, kPe, kW);
  const double act = 3.0 * tok * 512 * 2.0 / kW;
  EXPECT_REL(e.shared_fwd, up + down + act);
  EXPECT_REL(e.shared_bwd, 2.0 * (up + down) + 2.0 * act);
}

TEST(CostTermsAnalytic, RouterGemmSoftmaxAndMoeBlockNorms) {
  const Workload w{moe_shared_model(), training()};
  const ClusterSpec c = single_cluster(roofline_device());
  const ProfileTables t = make_analytic_tables(w, c, 1, {2}, {2});
  const ComputeEntry& e = analytic_entry(t, 2, 2);
  const double tsp = 256;
  // router: t_gemm(t_sp, E, H) + 3 fp32 passes over t_sp·E logits.
  const double gemm = roofline(tsp, kE, kH, kPe, kW);
  const double softmax = 3.0 * tsp * kE * 4.0 / kW;
  // The MoE block's own norms/residuals (8 passes of t_sp·H·β, "per block")
  // are booked with the router: the MoE block has no other per-block entry.
  const double elem = 8.0 * tsp * kH * 2.0 / kW;
  EXPECT_REL(e.router_fwd, gemm + softmax + elem);
  EXPECT_REL(e.router_bwd, 2.0 * (gemm + softmax + elem));
}

TEST(CostTermsAnalytic, EmbeddingAndOutputLayerForward) {
  const Workload w{moe_shared_model(), training()};
  const ClusterSpec c = single_cluster(roofline_device());
  const ProfileTables t = make_analytic_tables(w, c, 1, {2}, {2});
  const ComputeEntry& e = analytic_entry(t, 2, 2);
  const double tok = 512, tsp = 256;
  // embedding: 2 passes of t_sp·H·β; backward twice (memory-bound passes).
  const double emb = 2.0 * tsp * kH * 2.0 / kW;
  EXPECT_REL(e.embedding_fwd, emb);
  EXPECT_REL(e.embedding_bwd, 2.0 * emb);
  // output + loss: t_gemm(t, V/TP, H) + 3 fp32 passes over t·V/TP logits.
  const double gemm = roofline(tok, kV / 2, kH, kPe, kW);
  const double passes = 3.0 * tok * (kV / 2) * 4.0 / kW;
  EXPECT_REL(e.output_fwd, gemm + passes);
}

TEST(CostTermsAnalytic, OutputLayerBackwardDoublesGemmAndPasses) {
  const Workload w{moe_shared_model(), training()};
  const ClusterSpec c = single_cluster(roofline_device());
  const ProfileTables t = make_analytic_tables(w, c, 1, {2}, {2});
  const ComputeEntry& e = analytic_entry(t, 2, 2);
  const double tok = 512;
  const double gemm = roofline(tok, kV / 2, kH, kPe, kW);
  const double passes = 3.0 * tok * (kV / 2) * 4.0 / kW;  // 9.8304e-5 s
  // "Backward GEMMs cost twice the forward (data and weight gradients);
  // memory-bound passes twice."
  EXPECT_REL(e.output_bwd, 2.0 * gemm + 2.0 * passes);
}

TEST(CostTermsAnalytic, CoefficientsAndCommunicationEntries) {
  DeviceSpec a = device_a();
  a.intra_node_latency = 5e-6;   // the doc's 5 µs inside a node
  a.inter_node_latency = 10e-6;  // and 10 µs across nodes
  DeviceSpec b = device_b();
  b.intra_node_latency = 5e-6;
  b.inter_node_latency = 10e-6;
  ClusterSpec c;
  c.name = "two";
  c.pools.push_back({a, 1, 8});
  c.pools.push_back({b, 1, 4});
  const Workload w{moe_model(), training()};
  const ProfileTables t = make_analytic_tables(w, c, 1, {1}, {1});
  ASSERT_EQ(t.devices.size(), 2u);
  // C_h = vendor memory; η = 1; W_h; optimizer 30 B/param at W_h; 2 GiB overhead; scale 1.
  EXPECT_EQ(t.devices[0].capacity_bytes, 80e9);
  EXPECT_EQ(t.devices[1].capacity_bytes, 40e9);
  EXPECT_EQ(t.devices[0].eta, 1.0);
  EXPECT_EQ(t.devices[0].hbm_bandwidth, 1e12);
  EXPECT_REL(t.devices[0].optimizer_s_per_param, 30.0 / 1e12);
  EXPECT_REL(t.devices[1].optimizer_s_per_param, 30.0 / 0.5e12);
  EXPECT_EQ(t.devices[0].overhead_bytes, 2.0 * 1024 * 1024 * 1024);
  EXPECT_EQ(t.devices[1].activation_scale, 1.0);
  for (int p = 0; p < kNumPrimitives; ++p) {
    const auto prim = static_cast<Primitive>(p);
    // intra-node: device intra bandwidth at NCCL's 370 of 450 GB/s over
    // NVLink, 5 µs
    EXPECT_REL(t.comm.entry(prim, {LinkKind::kIntraNode, 0, 0}).bandwidth, 100e9 * 370 / 450);
    EXPECT_EQ(t.comm.entry(prim, {LinkKind::kIntraNode, 0, 0}).latency, 5e-6);
    EXPECT_REL(t.comm.entry(prim, {LinkKind::kIntraNode, 1, 1}).bandwidth, 50e9 * 370 / 450);
    // across nodes: NIC bandwidth at 48.5 of 50 GB/s, 10 µs
    EXPECT_REL(t.comm.entry(prim, {LinkKind::kInterNode, 0, 0}).bandwidth, 10e9 * 0.97);
    EXPECT_EQ(t.comm.entry(prim, {LinkKind::kInterNode, 1, 1}).latency, 10e-6);
    // two types, no explicit link: the slower NIC (5e9, as a NIC) and the
    // larger latency
    EXPECT_REL(t.comm.entry(prim, {LinkKind::kCrossType, 0, 1}).bandwidth, 5e9 * 0.97);
    EXPECT_EQ(t.comm.entry(prim, {LinkKind::kCrossType, 0, 1}).latency, 10e-6);
  }
  // An explicit cross link of the cluster file wins.
  c.cross_links.push_back({1, 0, 3e9, 7e-6});
  const ProfileTables t2 = make_analytic_tables(w, c, 1, {1}, {1});
  EXPECT_REL(t2.comm.entry(Primitive::kP2P, {LinkKind::kCrossType, 0, 1}).bandwidth, 3e9 * 0.97);
  EXPECT_EQ(t2.comm.entry(Primitive::kP2P, {LinkKind::kCrossType, 0, 1}).latency, 7e-6);
}

// ===========================================================================
// Layer (docs/costmodel.md, "Layer"), on hand tables.

TEST_F(CostTerms, DenseLayerTpCollectivesPerBlock) {
  workload.model = dense_model();
  const CostModel cm = model();
  // TP = 2, CP = 1, DP = 4 on type 0 (8 per node): TP link span 2 → intra.
  const TypeCosts tc = cm.type_costs(config(1, 2, 1, 1, 1, 4), 0);
  // Per TP-sharded block an all-gather and a reduce-scatter of b·S/CP·H·β
  // = 1·1024·1024·2 = 2,097,152 B, w = 2: AG 80e9, RS 50e9, α = 1 µs.
  const double n = 1.0 * 1024 / 1 * kH * 2;
  const double block = ring(n, 2, 80e9, 1e-6) + ring(n, 2, 50e9, 1e-6);
  EXPECT_REL(block, 1e-6 + 0.5 * 2097152 / 80e9 + 1e-6 + 0.5 * 2097152 / 50e9);
  // Dense layer: attention + dense MLP, two blocks.
  EXPECT_REL(tc.dense.fwd_s, 1.0e-3 + 2.0e-3 + 2 * block);
  EXPECT_REL(tc.dense.bwd_s, 2.2e-3 + 4.0e-3 + 2 * block);
  EXPECT_REL(tc.dense.fwd_parts.compute, 1.0e-3 + 2.0e-3);
  EXPECT_REL(tc.dense.fwd_parts.tp, 2 * block);
  EXPECT_EQ(tc.dense.fwd_parts.ep, 0.0);
  // Default selective recomputation reruns core attention only in a dense
  // layer (Megatron's moe_act is the routed experts'); `mlp` reruns the
  // whole MLP with its two collectives.
  EXPECT_REL(tc.dense.selective(kDefaultRecomputeModules).extra_s, 4.0e-4);
  EXPECT_EQ(tc.dense.selective(kDefaultRecomputeModules).saved_bytes, 0.0);
  EXPECT_REL(tc.dense.selective(module_bit(RecomputeModule::kMlp)).extra_s, 2.0e-3 + block);
}

TEST_F(CostTerms, NoTpNoCollectives) {
  workload.model = dense_model();
  const CostModel cm = model();
  const TypeCosts tc = cm.type_costs(config(1, 1, 1, 1, 1, 8), 0);
  EXPECT_REL(tc.dense.fwd_s, 1.0e-3 + 2.0e-3);
  EXPECT_REL(tc.dense.bwd_s, 2.2e-3 + 4.0e-3);
}

TEST_F(CostTerms, TpGroupLargerThanNodeUsesInterNodeLink) {
  workload.model = dense_model();
  const CostModel cm = model();
  // TP = 8 on type 1 (4 per node): span 8 > 4 → inter-node AG 4e9, RS 2.5e9, α = 4 µs.
  const TypeCosts tc = cm.type_costs(config(1, 8, 1, 1, 1, 1), 1);
  const double n = 1024.0 * kH * 2;  // b·S/CP·H·β
  const double block = ring(n, 8, 4e9, 4e-6) + ring(n, 8, 2.5e9, 4e-6);
  EXPECT_REL(tc.dense.fwd_s, 1.5e-3 + 3.0e-3 + 2 * block);
}

TEST_F(CostTerms, CpRingExposedOnlyBeyondCoreAttention) {
  workload.model = dense_model();
  // TP = 1, CP = 2 on type 0: CP link span TP·CP = 2 → intra p2p (25e9, 1 µs).
  // KV chunk: b·S/CP · 2·g/TP·d · β = 512 · 2·2·128 · 2 = 524,288 B.
  const double chunk = 512.0 * (2 * kG / 1 * kD) * 2;
  EXPECT_EQ(chunk, 524288.0);
  const double ring_time = (2 - 1) * p2p(chunk, 25e9, 1e-6);  // CP−1 steps
  EXPECT_REL(ring_time, 1e-6 + 524288 / 25e9);                // 2.197152e-5 s
  const ParallelConfig pi = config(1, 1, 2, 1, 1, 4);
  struct Case {
    double core, fwd_exposed, bwd_exposed;
  };
  const Case cases[] = {
      // core 4e-4 hides the ring both ways
      {4e-4, 0.0, 0.0},
      // core 1e-5: fwd ring − core, bwd 2·ring − 2.5·core
      {1e-5, ring_time - 1e-5, 2 * ring_time - 2.5 * 1e-5},
      // core 2e-5: fwd exposed by 1.97152e-6, bwd 4.394304e-5 − 5e-5 < 0 → hidden
      {2e-5, ring_time - 2e-5, 0.0},
  };
  for (const Case& cs : cases) {
    tables.compute[0][{1, 2}].core_attention_fwd = cs.core;
    tables.compute[0][{1, 2}].core_attention_bwd = 2.5 * cs.core;
    const TypeCosts tc = model().type_costs(pi, 0);
    SCOPED_TRACE(cs.core);
    EXPECT_REL(tc.dense.fwd_s, 1.0e-3 + 2.0e-3 + cs.fwd_exposed);
    EXPECT_REL(tc.dense.bwd_s, 2.2e-3 + 4.0e-3 + cs.bwd_exposed);
  }
}

TEST_F(CostTerms, CpRingAcrossNodesAndWithTp) {
  workload.model = dense_model();
  tables.compute[0][{4, 4}].core_attention_fwd = 0.0;  // nothing to hide behind
  tables.compute[0][{4, 4}].core_attention_bwd = 0.0;
  // TP = 4, CP = 4 on type 0: CP span 16 > 8 → inter p2p (2.5e9, 2 µs).
  // chunk = b·S/CP · 2·g/TP·d · β = 256 · (2·2/4·128) · 2 = 65,536 B; 3 steps.
  const double chunk = 256.0 * (2 * kG / 4 * kD) * 2;
  const double ring_time = 3 * p2p(chunk, 2.5e9, 2e-6);
  // TP blocks: AG + RS of b·S/CP·H·β = 256·1024·2 over TP = 4 (span 4 → intra).
  const double n = 256.0 * kH * 2;
  const double block = ring(n, 4, 80e9, 1e-6) + ring(n, 4, 50e9, 1e-6);
  const TypeCosts tc = model().type_costs(config(1, 4, 4, 1, 1, 1), 0);
  EXPECT_REL(tc.dense.fwd_s, 1.0e-3 + 2.0e-3 + 2 * block + ring_time);
  EXPECT_REL(tc.dense.bwd_s, 2.2e-3 + 4.0e-3 + 2 * block + 2 * ring_time);
}

TEST_F(CostTerms, CpRingMultiLatentAttentionChunk) {
  workload.model = mla_model();
  tables.compute[0][{1, 2}].core_attention_fwd = 1e-6;
  tables.compute[0][{1, 2}].core_attention_bwd = 2.5e-6;
  // MLA KV chunk: b·S/CP · a/TP·(d_qk + d_v) · β = 512 · 8·(96 + 64) · 2 = 1,310,720 B.
  const double chunk = 512.0 * 8 * (96 + 64) * 2;
  const double ring_time = p2p(chunk, 25e9, 1e-6);
  const TypeCosts tc = model().type_costs(config(1, 1, 2, 1, 1, 4), 0);
  EXPECT_REL(tc.dense.fwd_s, 1.0e-3 + 2.0e-3 + (ring_time - 1e-6));
  EXPECT_REL(tc.dense.bwd_s, 2.2e-3 + 4.0e-3 + (2 * ring_time - 2.5e-6));
}

// ---------------------------------------------------------------------------
// Routed experts (analytic.h, routed_expert_time) on the fixture's devices,
// which have no compute-unit count and no kernel overhead (unless a test
// sets one): every GEMM is the roofline, and E/EP GEMMs on concurrent
// streams cost E/EP single ones. A device holds E/EP experts of width
// w = F_e/TPE and receives t_sp·k·TPE token copies, r = t_sp·k·TPE/(E/EP)
// rows per expert (m' = 2: SwiGLU up + gate):
//   fwd = (E/EP)·[t_gemm(r, m'·w, H) + t_gemm(r, H, w)] + act
//   bwd = (E/EP)·[t_gemm(r, w, H) + t_gemm(w, H, r) + t_gemm(r, H, m'·w)
//                 + t_gemm(H, m'·w, r)] + 2·act
// act = 3 passes of t_sp·k·TPE·w·β at W (SwiGLU). Apart from these, what
// neither imbalance nor η scales:
//   fixed_fwd = perm + 2·(E/EP)·τ,  fixed_bwd = perm + 4·(E/EP)·τ
// perm = 2·2 passes (each a read and a write) at W: permute before the
// dispatch and unpermute after the combine over the device's own t_sp·k
// copies, and sort by expert / back over the t_sp·k·TPE copies it computes,
// i.e. 4·(t_sp·k + t_sp·k·TPE)·H·β, in the forward and again in the backward.
// The layer charges max(fwd·s·f_imb/η, W_local/W_h) + fixed_fwd (s = the
// entry's expert_scale, 1 unless a profile measured the FFN).
struct HandExperts {
  double fwd, bwd, act, perm, fixed_fwd, fixed_bwd;
  double wgrad;  // the weight-gradient GEMMs of bwd
};

HandExperts hand_experts(double tsp, int ep, int tpe, double peak_times_eff, double hbm,
                         double overhead = 0.0) {
  const double local = kE / ep;
  const double copies = tsp * kK * tpe;
  const double r = copies / local;
  const double w = kFe / tpe;
  auto group = [&](double a, double b, double c) {
    return local * roofline(a, b, c, peak_times_eff, hbm);
  };
  HandExperts x;
  x.act = 3.0 * copies * w * 2.0 / hbm;
  x.perm = 4.0 * (tsp * kK + tsp * kK * tpe) * kH * 2.0 / hbm;
  x.fwd = group(r, 2 * w, kH) + group(r, kH, w) + x.act;
  x.bwd =
      group(r, w, kH) + group(w, kH, r) + group(r, kH, 2 * w) + group(kH, 2 * w, r) + 2.0 * x.act;
  x.wgrad = group(w, kH, r) + group(kH, 2 * w, r);
  x.fixed_fwd = x.perm + 2.0 * local * overhead;
  x.fixed_bwd = x.perm + 4.0 * local * overhead;
  return x;
}

// Device A (type 0): P·e = 100e12, W = 1e12; device B (type 1): P·e = 25e12,
// W = 0.5e12.
HandExperts hand_experts_a(double tsp, int ep, int tpe, double overhead = 0.0) {
  return hand_experts(tsp, ep, tpe, 100e12, 1e12, overhead);
}
HandExperts hand_experts_b(double tsp, int ep, int tpe) {
  return hand_experts(tsp, ep, tpe, 25e12, 0.5e12);
}

// The routed-expert term of a type-0 MoE layer on the hand tables (η = 0.8,
// W_h = 1e12, f_imb = 1.2, expert_scale 1), forward and backward.
double experts_fwd_a(double tsp, int ep, int tpe) {
  const double w_local = kE / ep * 3 * kH * kFe / tpe * 2;
  const HandExperts x = hand_experts_a(tsp, ep, tpe);
  return std::max(x.fwd * kImb / 0.8, w_local / 1e12) + x.fixed_fwd;
}
double experts_bwd_a(double tsp, int ep, int tpe) {
  const double w_local = kE / ep * 3 * kH * kFe / tpe * 2;
  const HandExperts x = hand_experts_a(tsp, ep, tpe);
  return std::max(x.bwd * kImb / 0.8, 2 * w_local / 1e12) + x.fixed_bwd;
}

TEST_F(CostTerms, ExpertTermComputeBranch) {
  // TP = CP = EP = TPE = DP = 1: no collectives; type 0, η = 0.8, W_h = 1e12.
  // t_sp = 1024, 8 local experts of r = 1024·2/8 = 256 rows, w = 2048; every
  // GEMM compute bound (P·e = 100e12):
  //   GEMMs 8·(2·256·4096·1024 + 2·256·1024·2048)/1e14 = 2.5769803776e-4 s
  //         = k·2·t_sp·m·H·F_e/(P·e), the old k·t_expert's GEMMs
  //   act 3·2048·2048·2/1e12 = 2.5165824e-5 s
  //   perm 4·(1024·2 + 1024·2·1)·1024·2/1e12 = 3.3554432e-5 s (no kernel overhead)
  const HandExperts x = hand_experts_a(1024, 1, 1);
  EXPECT_REL(x.fwd - x.act, 2.5769803776e-4);
  EXPECT_REL(x.act, 2.5165824e-5);
  EXPECT_REL(x.fwd, 2.8286386176e-4);
  EXPECT_REL(x.bwd, 2 * 2.5769803776e-4 + 2 * 2.5165824e-5);  // 5.6572772352e-4
  EXPECT_REL(x.fixed_fwd, 3.3554432e-5);
  EXPECT_REL(x.fixed_bwd, 3.3554432e-5);
  // The implementation's routed_expert_time agrees with the hand formula.
  const RoutedExpertTime impl = routed_expert_time(workload.model, device_a(), 1024, 1, 1);
  EXPECT_REL(impl.fwd, x.fwd);
  EXPECT_REL(impl.bwd, x.bwd);
  EXPECT_REL(impl.act_fwd, x.act);
  EXPECT_REL(impl.fixed_fwd, x.fixed_fwd);
  EXPECT_REL(impl.fixed_bwd, x.fixed_bwd);
  // The weight gradients have the forward's FLOPs: half the GEMMs.
  EXPECT_REL(x.wgrad, 2.5769803776e-4);
  EXPECT_REL(impl.wgrad, x.wgrad);
  EXPECT_EQ(impl.kernels_fwd, 16.0);  // 2 per local expert
  EXPECT_EQ(impl.kernels_bwd, 32.0);

  const TypeCosts tc = model().type_costs(config(1, 1, 1, 1, 1, 1), 0);
  // fwd·f_imb/η = 2.8286386176e-4·1.2/0.8 = 4.2429579264e-4 s
  // W_local/W_h = (E/EP)·m·H·F_e/TPE·β / W_h = 8·3·1024·2048·2/1e12 = 1.00663296e-4 s
  const double compute = x.fwd * kImb / 0.8;
  const double stream = kE / 1 * 3 * kH * kFe / 1 * 2 / 1e12;
  ASSERT_GT(compute, stream);
  EXPECT_REL(compute, 4.2429579264e-4);
  // attention + router + experts (+ the unscaled permutation): 4.5785022464e-4
  EXPECT_REL(tc.moe.fwd_s, 1.0e-3 + 1.0e-4 + compute + 3.3554432e-5);
  // backward: 5.6572772352e-4·1.2/0.8 = 8.4859158528e-4 vs 2·W_local/W_h, + perm
  EXPECT_REL(tc.moe.bwd_s, 2.2e-3 + 2.0e-4 + 8.4859158528e-4 + 3.3554432e-5);
  EXPECT_REL(tc.moe.fwd_parts.compute, 1.0e-3 + 1.0e-4 + compute + 3.3554432e-5);
  // The table's single-expert time no longer enters the layer; its scale
  // does, on the GEMMs and activation only (not on the permutation).
  tables.compute[0][{1, 1}].expert_fwd = 1.0;
  tables.compute[0][{1, 1}].expert_scale_fwd = 2.0;
  tables.compute[0][{1, 1}].expert_scale_bwd = 3.0;
  const TypeCosts scaled = model().type_costs(config(1, 1, 1, 1, 1, 1), 0);
  EXPECT_REL(scaled.moe.fwd_s, 1.0e-3 + 1.0e-4 + 2 * compute + 3.3554432e-5);
  EXPECT_REL(scaled.moe.bwd_s, 2.2e-3 + 2.0e-4 + 3 * 8.4859158528e-4 + 3.3554432e-5);
}

TEST_F(CostTerms, ExpertTermWeightStreamingBranch) {
  // A profile that measured the experts at a tenth of the analytic time.
  tables.compute[0][{1, 1}].expert_scale_fwd = 0.1;
  tables.compute[0][{1, 1}].expert_scale_bwd = 0.1;
  const TypeCosts tc = model().type_costs(config(1, 1, 1, 1, 1, 1), 0);
  // fwd·0.1·f/η = 4.2429579264e-5 < W_local/W_h = 1.00663296e-4; the
  // permutation (3.3554432e-5 s) comes on top of the bound, not inside it.
  const double w_local = 8.0 * 3 * 1024 * 2048 * 2;  // 100,663,296 B
  const HandExperts x = hand_experts_a(1024, 1, 1);
  ASSERT_LT(0.1 * x.fwd * kImb / 0.8, w_local / 1e12);
  EXPECT_REL(x.perm, 3.3554432e-5);
  EXPECT_REL(tc.moe.fwd_s, 1.0e-3 + 1.0e-4 + w_local / 1e12 + 3.3554432e-5);
  // backward: 8.4859158528e-5 < 2·W_local/W_h = 2.01326592e-4
  ASSERT_LT(0.1 * x.bwd * kImb / 0.8, 2 * w_local / 1e12);
  EXPECT_REL(tc.moe.bwd_s, 2.2e-3 + 2.0e-4 + 2 * w_local / 1e12 + 3.3554432e-5);
}

TEST_F(CostTerms, ExpertParallelismChangesTheStreamingBoundAndTheLaunchesOnly) {
  // Without compute units and kernel overhead, and with every expert GEMM
  // compute bound, the routed experts' GEMMs and activation do not depend
  // on EP or TPE: the device computes k·t_sp expert-width rows of FLOPs
  // whatever experts they meet (EP = 4: 2 experts of 1024 rows; EP = 2,
  // TPE = 2: 2 experts of 2048 rows, width 1024), and the activation passes
  // move the same bytes. Nor does the permutation depend on EP (TPE adds
  // its gathered copies to it: ExpertTensorParallelPermutesTheGatheredCopies).
  const HandExperts ep1 = hand_experts_a(1024, 1, 1);
  for (const auto& [ep, tpe] :
       {std::pair{2, 1}, std::pair{4, 1}, std::pair{8, 1}, std::pair{2, 2}, std::pair{1, 2}}) {
    SCOPED_TRACE(testing::Message() << "EP = " << ep << ", TPE = " << tpe);
    const RoutedExpertTime r = routed_expert_time(workload.model, device_a(), 1024, ep, tpe);
    EXPECT_REL(r.fwd, ep1.fwd);
    EXPECT_REL(r.bwd, ep1.bwd);
    EXPECT_REL(r.act_fwd, ep1.act);
    EXPECT_REL(hand_experts_a(1024, ep, tpe).fwd, ep1.fwd);
    EXPECT_EQ(r.kernels_fwd, 2.0 * 8 / ep);
    if (tpe == 1) {
      EXPECT_REL(r.fixed_fwd, ep1.fixed_fwd);
      EXPECT_REL(r.fixed_bwd, ep1.fixed_bwd);
    }
  }
  // What EP does change: the per-expert launches (2 per local expert
  // forward, 4 backward), 16 at EP = 1 against 4 at EP = 4, in the fixed
  // part only.
  DeviceSpec launches = device_a();
  launches.kernel_overhead = 1e-5;
  const RoutedExpertTime l1 = routed_expert_time(workload.model, launches, 1024, 1, 1);
  const RoutedExpertTime l4 = routed_expert_time(workload.model, launches, 1024, 4, 1);
  EXPECT_REL(l1.fixed_fwd - l4.fixed_fwd, (16 - 4) * 1e-5);
  EXPECT_REL(l1.fixed_bwd - l4.fixed_bwd, (32 - 8) * 1e-5);
  EXPECT_REL(l1.fwd, l4.fwd);
  EXPECT_REL(l1.bwd, l4.bwd);

  // ... and the streaming bound of the layer. With a profile scale of 0.1 the
  // compute term is 0.1·2.8286386176e-4·1.2/0.8 = 4.2429579264e-5 s. EP = 1:
  // W_local/W_h = 1.00663296e-4 s dominates; EP = 4: W_local = (8/4)·3·1024·2048·2
  // = 25,165,824 B → 2.5165824e-5 s < compute: now compute bound. TPE = 2,
  // EP = 2 gives the same W_local and the same compute, with a larger
  // permutation (4·(2048 + 4096)·2048/1e12 = 5.0331648e-5 s against 3.3554432e-5 s).
  tables.compute[0][{1, 1}].expert_scale_fwd = 0.1;
  const double compute = 0.1 * ep1.fwd * kImb / 0.8;
  const double stream1 = 8.0 * 3 * 1024 * 2048 * 2 / 1e12;
  const double stream4 = 2.0 * 3 * 1024 * 2048 * 2 / 1e12;
  ASSERT_LT(compute, stream1);
  ASSERT_GT(compute, stream4);
  const TypeCosts ep1_costs = model().type_costs(config(1, 1, 1, 1, 1, 4), 0);
  EXPECT_REL(ep1_costs.moe.fwd_parts.compute, 1.0e-3 + 1.0e-4 + stream1 + 3.3554432e-5);
  const TypeCosts ep4 = model().type_costs(config(1, 1, 1, 4, 1, 4), 0);
  EXPECT_REL(ep4.moe.fwd_parts.compute, 1.0e-3 + 1.0e-4 + compute + 3.3554432e-5);
  const TypeCosts ep2tpe2 = model().type_costs(config(1, 1, 1, 2, 2, 4), 0);
  EXPECT_REL(ep2tpe2.moe.fwd_parts.compute, 1.0e-3 + 1.0e-4 + compute + 5.0331648e-5);
}

TEST_F(CostTerms, ImbalanceFactorOnePlusGammaRhoMinusOne) {
  struct Case {
    double rho, gamma, factor;
  };
  const Case cases[] = {{1.4, 0.5, 1.2}, {2.0, 1.0, 2.0}, {3.0, 0.0, 1.0}, {1.0, 1.0, 1.0}};
  const HandExperts x = hand_experts_a(1024, 1, 1);  // fwd 2.8286386176e-4 s
  for (const Case& cs : cases) {
    workload.training.imbalance = cs.rho;
    workload.training.gamma = cs.gamma;
    const TypeCosts tc = model().type_costs(config(1, 1, 1, 1, 1, 1), 0);
    SCOPED_TRACE(cs.rho);
    // compute branch: fwd·(1+γ(ρ−1))/η ≥ 2.8286386176e-4/0.8 = 3.536e-4 > 1.0066e-4;
    // the permutation (3.3554432e-5 s) is not scaled.
    EXPECT_REL(tc.moe.fwd_s, 1.0e-3 + 1.0e-4 + x.fwd * cs.factor / 0.8 + 3.3554432e-5);
    EXPECT_REL(tc.moe.bwd_s, 2.2e-3 + 2.0e-4 + x.bwd * cs.factor / 0.8 + 3.3554432e-5);
  }
}

TEST_F(CostTerms, ImbalanceAndEtaScaleNeitherThePermutationNorTheLaunches) {
  // The routed experts' kernel overhead and token permutation are host and
  // HBM time that grows with neither the imbalance factor nor the kernel
  // efficiency η: only the GEMMs + activation (routed.fwd, .bwd) are scaled.
  // Type 0 with τ = 2e-5 s (16 expert launches forward, 32 backward) and a
  // measured expert scale of 1.5 forward, 0.75 backward.
  constexpr double kTau = 2e-5;
  cluster.pools[0].device.kernel_overhead = kTau;
  tables.compute[0][{1, 1}].expert_scale_fwd = 1.5;
  tables.compute[0][{1, 1}].expert_scale_bwd = 0.75;
  const HandExperts x = hand_experts_a(1024, 1, 1, kTau);
  // fixed: perm 3.3554432e-5 + 16·2e-5 = 3.53554432e-4 s; backward perm + 32·2e-5
  EXPECT_REL(x.fixed_fwd, 3.3554432e-5 + 16 * kTau);
  EXPECT_REL(x.fixed_bwd, 3.3554432e-5 + 32 * kTau);
  const RoutedExpertTime impl =
      routed_expert_time(workload.model, cluster.pools[0].device, 1024, 1, 1);
  EXPECT_REL(impl.fwd, x.fwd);  // τ does not enter the scaled part
  EXPECT_REL(impl.bwd, x.bwd);
  EXPECT_REL(impl.fixed_fwd, x.fixed_fwd);
  EXPECT_REL(impl.fixed_bwd, x.fixed_bwd);

  auto layer = [&](double rho, double gamma, double eta) {
    workload.training.imbalance = rho;
    workload.training.gamma = gamma;
    tables.devices[0].eta = eta;
    return model().type_costs(config(1, 1, 1, 1, 1, 1), 0).moe;
  };
  // f_imb = 1.2 (ρ 1.4, γ 0.5) and f_imb = 2 (ρ 2, γ 1), η = 0.8; compute
  // branch throughout: 2.8286386176e-4·1.5·1.2/0.8 = 6.36e-4 > W_local/W_h
  // = 1.0066e-4, and 5.6572772352e-4·0.75·1.2/0.8 = 6.36e-4 > 2.0133e-4.
  const LayerCost f12 = layer(1.4, 0.5, 0.8);
  const LayerCost f20 = layer(2.0, 1.0, 0.8);
  ASSERT_GT(x.fwd * 1.5 * 1.2 / 0.8, 1.00663296e-4);
  ASSERT_GT(x.bwd * 0.75 * 1.2 / 0.8, 2.01326592e-4);
  EXPECT_REL(f20.fwd_s - f12.fwd_s, (2.0 - 1.2) * x.fwd * 1.5 / 0.8);
  EXPECT_REL(f20.bwd_s - f12.bwd_s, (2.0 - 1.2) * x.bwd * 0.75 / 0.8);
  EXPECT_REL(f20.fwd_parts.compute - f12.fwd_parts.compute, (2.0 - 1.2) * x.fwd * 1.5 / 0.8);
  // η = 0.5 against 0.8 at f_imb = 1.2: the same, through 1/η.
  const LayerCost e05 = layer(1.4, 0.5, 0.5);
  EXPECT_REL(e05.fwd_s - f12.fwd_s, 1.2 * x.fwd * 1.5 * (1 / 0.5 - 1 / 0.8));
  EXPECT_REL(e05.bwd_s - f12.bwd_s, 1.2 * x.bwd * 0.75 * (1 / 0.5 - 1 / 0.8));
  // And the whole layer: attention + router + scaled experts + the fixed part.
  EXPECT_REL(f12.fwd_s, 1.0e-3 + 1.0e-4 + x.fwd * 1.5 * 1.2 / 0.8 + x.fixed_fwd);
  EXPECT_REL(f12.bwd_s, 2.2e-3 + 2.0e-4 + x.bwd * 0.75 * 1.2 / 0.8 + x.fixed_bwd);
  EXPECT_REL(e05.fwd_s, 1.0e-3 + 1.0e-4 + x.fwd * 1.5 * 1.2 / 0.5 + x.fixed_fwd);
  EXPECT_REL(f20.bwd_s, 2.2e-3 + 2.0e-4 + x.bwd * 0.75 * 2.0 / 0.8 + x.fixed_bwd);
}

TEST_F(CostTerms, ExpertTensorParallelPermutesTheGatheredCopies) {
  // TPE gathers t_sp·k·TPE token copies onto the device: the sort by expert
  // after the dispatch and back before the combine move all of them, the
  // permute / unpermute around the exchange the device's own t_sp·k:
  // perm = 4·(t_sp·k + t_sp·k·TPE)·H·β/W, t_sp = 1024 on type 0 (W = 1e12):
  //   TPE = 1: 4·(2048 + 2048)·1024·2/1e12 = 3.3554432e-5 s
  //   TPE = 2: 4·(2048 + 4096)·1024·2/1e12 = 5.0331648e-5 s
  //   TPE = 4: 4·(2048 + 8192)·1024·2/1e12 = 8.388608e-5 s
  EXPECT_REL(hand_experts_a(1024, 2, 1).perm, 3.3554432e-5);
  EXPECT_REL(hand_experts_a(1024, 2, 2).perm, 5.0331648e-5);
  EXPECT_REL(hand_experts_a(1024, 1, 4).perm, 8.388608e-5);
  const ModelSpec& m = workload.model;
  const RoutedExpertTime tpe1 = routed_expert_time(m, device_a(), 1024, 2, 1);
  const RoutedExpertTime tpe2 = routed_expert_time(m, device_a(), 1024, 2, 2);
  const RoutedExpertTime tpe4 = routed_expert_time(m, device_a(), 1024, 1, 4);
  EXPECT_REL(tpe1.fixed_fwd, 3.3554432e-5);
  EXPECT_REL(tpe2.fixed_fwd, 5.0331648e-5);
  EXPECT_REL(tpe2.fixed_bwd, 5.0331648e-5);
  EXPECT_REL(tpe4.fixed_fwd, 8.388608e-5);
  // Each further TPE rank adds 4·t_sp·k·H·β/W = 1.6777216e-5 s.
  EXPECT_REL(tpe2.fixed_fwd - tpe1.fixed_fwd, 1.6777216e-5);
  // With τ = 1e-5: + 2·(E/EP) = 8 launches forward, 16 backward (EP = 2).
  DeviceSpec slow = device_a();
  slow.kernel_overhead = 1e-5;
  const RoutedExpertTime tau = routed_expert_time(m, slow, 1024, 2, 2);
  EXPECT_REL(tau.fixed_fwd, 5.0331648e-5 + 8 * 1e-5);
  EXPECT_REL(tau.fixed_bwd, 5.0331648e-5 + 16 * 1e-5);

  // In the layer at f_imb = 1 and η = 1 (EP = 2, TPE = 2, DP = 4): attention
  // + router + max(fwd, W_local/W_h) + perm, W_local = 4·3·1024·1024·2 B
  // → 2.5165824e-5 s < fwd = 2.8286386176e-4 s.
  workload.training.imbalance = 1.0;
  tables.devices[0].eta = 1.0;
  const HandExperts x = hand_experts_a(1024, 2, 2);
  EXPECT_REL(x.fwd, 2.8286386176e-4);
  const TypeCosts tc = model().type_costs(config(1, 1, 1, 2, 2, 4), 0);
  EXPECT_REL(tc.moe.fwd_parts.compute, 1.0e-3 + 1.0e-4 + 2.8286386176e-4 + 5.0331648e-5);
  EXPECT_REL(tc.moe.bwd_parts.compute, 2.2e-3 + 2.0e-4 + x.bwd + 5.0331648e-5);
}

TEST_F(CostTerms, DispatchAllToAll) {
  // TP = 1, EP = 4, DP = 4 on type 0: EP span EP·TPE = 4 → intra.
  const ParallelConfig pi = config(1, 1, 1, 4, 1, 4);
  const TypeCosts tc = model().type_costs(pi, 0);
  // n = t_sp·k·H·β = 1024·2·1024·2 = 4,194,304 B; 2 × all-to-all (40e9, 1 µs) over EP = 4.
  const double n = 1024.0 * kK * kH * 2;
  const double a2a = 2 * ring(n, 4, 40e9, 1e-6);
  EXPECT_REL(a2a, 2 * (3e-6 + 0.75 * 4194304 / 40e9));  // 1.632864e-4 s
  EXPECT_REL(tc.moe.fwd_parts.ep, a2a);
  // Experts at EP = 4: 2 local experts of 1024 rows, the same time as at EP = 1
  // (4.2429579264e-4 s with f_imb/η, + the permutation 3.3554432e-5 s);
  // W_local = 2·3·1024·2048·2 = 25,165,824 B → 2.5e-5 s: compute branch.
  ASSERT_GT(hand_experts_a(1024, 4, 1).fwd * kImb / 0.8, 25165824 / 1e12);
  EXPECT_REL(experts_fwd_a(1024, 4, 1), 4.2429579264e-4 + 3.3554432e-5);
  EXPECT_REL(experts_bwd_a(1024, 4, 1), 8.4859158528e-4 + 3.3554432e-5);
  const double compute = 1.0e-3 + 1.0e-4 + experts_fwd_a(1024, 4, 1);
  EXPECT_REL(tc.moe.fwd_s, compute + a2a);
  // same exchange in the backward
  EXPECT_REL(tc.moe.bwd_s, 2.2e-3 + 2.0e-4 + experts_bwd_a(1024, 4, 1) + a2a);
  EXPECT_EQ(tc.moe.dispatcher, Dispatcher::kAllToAll);
  // Dispatch buffer (all-to-all): 2·t_sp·k·H·β·f_imb·TPE = 2·4194304·1.2
  EXPECT_REL(tc.moe.moe_buffer_bytes, 2 * n * kImb * 1);
}

TEST_F(CostTerms, DispatchAllGather) {
  workload.training.dispatcher = Dispatcher::kAllGather;
  const TypeCosts tc = model().type_costs(config(1, 1, 1, 4, 1, 4), 0);
  // all-gather + reduce-scatter of t_sp·EP·H·β = 1024·4·1024·2 = 8,388,608 B over EP = 4:
  // AG 80e9, RS 50e9, α = 1 µs.
  const double n = 1024.0 * 4 * kH * 2;
  const double ag = ring(n, 4, 80e9, 1e-6) + ring(n, 4, 50e9, 1e-6);
  EXPECT_REL(ag, 3e-6 + 0.75 * 8388608 / 80e9 + 3e-6 + 0.75 * 8388608 / 50e9);
  EXPECT_REL(tc.moe.fwd_parts.ep, ag);
  EXPECT_REL(tc.moe.fwd_s, 1.0e-3 + 1.0e-4 + experts_fwd_a(1024, 4, 1) + ag);
  EXPECT_EQ(tc.moe.dispatcher, Dispatcher::kAllGather);
  // Dispatch buffer (all-gather): t_sp·EP·TPE·H·β
  EXPECT_REL(tc.moe.moe_buffer_bytes, 1024.0 * 4 * 1 * kH * 2);
}

TEST_F(CostTerms, DispatchAutoTakesTheCheaper) {
  workload.training.dispatcher = Dispatcher::kAuto;
  const ParallelConfig pi = config(1, 1, 1, 4, 1, 4);
  const double n_a2a = 1024.0 * kK * kH * 2;  // t_sp·k·H·β
  const double n_ag = 1024.0 * 4 * kH * 2;    // t_sp·EP·H·β
  {
    // all-to-all at 40e9: 1.632864e-4 s < all-gather 2.1047232e-4 s
    const double a2a = 2 * ring(n_a2a, 4, 40e9, 1e-6);
    const double ag = ring(n_ag, 4, 80e9, 1e-6) + ring(n_ag, 4, 50e9, 1e-6);
    ASSERT_LT(a2a, ag);
    const TypeCosts tc = model().type_costs(pi, 0);
    EXPECT_EQ(tc.moe.dispatcher, Dispatcher::kAllToAll);
    EXPECT_REL(tc.moe.fwd_parts.ep, a2a);
  }
  {
    // Slow all-to-all (10e9): 6.351456e-4 s > all-gather → all-gather.
    tables.comm.set(Primitive::kAllToAll, {LinkKind::kIntraNode, 0, 0}, {10e9, 1e-6});
    const double a2a = 2 * ring(n_a2a, 4, 10e9, 1e-6);
    const double ag = ring(n_ag, 4, 80e9, 1e-6) + ring(n_ag, 4, 50e9, 1e-6);
    ASSERT_GT(a2a, ag);
    const TypeCosts tc = model().type_costs(pi, 0);
    EXPECT_EQ(tc.moe.dispatcher, Dispatcher::kAllGather);
    EXPECT_REL(tc.moe.fwd_parts.ep, ag);
    EXPECT_REL(tc.moe.moe_buffer_bytes, n_ag);
  }
}

TEST_F(CostTerms, ExpertTensorParallelGathers) {
  // TP = 1, EP = 2, TPE = 2, DP = 4 on type 0: EDP = 4/(2·2) = 1.
  const TypeCosts tc = model().type_costs(config(1, 1, 1, 2, 2, 4), 0);
  const double routed = 1024.0 * kK * kH * 2;  // t_sp·k·H·β = 4,194,304 B
  // all-to-all over EP = 2 (EP span EP·TPE = 4 → intra)
  const double a2a = 2 * ring(routed, 2, 40e9, 1e-6);
  // TPE > 1: AG + RS of t_sp·k·H·β·f_imb·TPE over TPE = 2 (span 2 → intra)
  const double gathered = routed * kImb * 2;
  const double tpe = ring(gathered, 2, 80e9, 1e-6) + ring(gathered, 2, 50e9, 1e-6);
  EXPECT_REL(tc.moe.fwd_parts.ep, a2a + tpe);
  // Experts: 2 local experts of width F_e/2 over 1024·2·2/2 = 2048 rows each,
  // the same GEMM time as at TPE = 1, and the permutation of the 2048 own
  // and 4096 gathered copies, 4·6144·1024·2/1e12 = 5.0331648e-5 s.
  EXPECT_REL(experts_fwd_a(1024, 2, 2), 4.2429579264e-4 + 5.0331648e-5);
  EXPECT_REL(tc.moe.fwd_s, 1.0e-3 + 1.0e-4 + experts_fwd_a(1024, 2, 2) + a2a + tpe);
  EXPECT_REL(tc.moe.bwd_s, 2.2e-3 + 2.0e-4 + experts_bwd_a(1024, 2, 2) + a2a + tpe);
  // buffer: 2·t_sp·k·H·β·f_imb·TPE
  EXPECT_REL(tc.moe.moe_buffer_bytes, 2 * routed * kImb * 2);
}

TEST_F(CostTerms, EpGroupLinkSelection) {
  const double routed = 1024.0 * kK * kH * 2;
  {
    // EP = 8 on type 0 (8 per node): span 8 → intra all-to-all (40e9, 1 µs).
    const TypeCosts tc = model().type_costs(config(1, 1, 1, 8, 1, 8), 0);
    EXPECT_REL(tc.moe.fwd_parts.ep, 2 * ring(routed, 8, 40e9, 1e-6));
  }
  {
    // EP = 8 on type 1 (4 per node): span 8 > 4, the group spans two nodes.
    // Each device sends n/8 to each peer; the 3 peers on its node over the
    // node's link (A2A 20e9, 2 µs), the 4 on the other node over the NIC
    // (2e9, 4 µs), concurrently: the longer of the two.
    const TypeCosts tc = model().type_costs(config(1, 1, 1, 8, 1, 8), 1);
    const double share = routed / 8;
    const double node = ring(share * 4, 4, 20e9, 2e-6);  // 3 peers, 3 shares
    const double nic = ring(share * 5, 5, 2e9, 4e-6);    // 4 peers, 4 shares
    EXPECT_REL(tc.moe.fwd_parts.ep, 2 * std::max(node, nic));
    EXPECT_LT(tc.moe.fwd_parts.ep, 2 * ring(routed, 8, 2e9, 4e-6));  // all of it over the NIC
  }
  {
    // EP = 4, TPE = 2 on type 1: span EP·TPE = 8 > 4, 2 members of the
    // group per node (stride 2): 1 peer over the node's link, 2 over the
    // NIC; TPE span 2 → intra (AG 40e9, RS 25e9, 2 µs).
    const TypeCosts tc = model().type_costs(config(1, 1, 1, 4, 2, 8), 1);
    const double share = routed / 4;
    const double exchange = std::max(ring(share * 2, 2, 20e9, 2e-6), ring(share * 3, 3, 2e9, 4e-6));
    const double gathered = routed * kImb * 2;
    EXPECT_REL(tc.moe.fwd_parts.ep,
               2 * exchange + ring(gathered, 2, 40e9, 2e-6) + ring(gathered, 2, 25e9, 2e-6));
  }
  {
    // A measured inter-node all-to-all is NCCL's real exchange already: the
    // group's time is its lookup at the whole world.
    const CommTable saved = tables.comm;
    CommTable measured = tables.comm;
    std::vector<CommPoint> points;
    for (const double bytes : {1e6, 1e7, 1e8}) points.push_back({8, bytes, bytes / 1e9});
    measured.set_measured(Primitive::kAllToAll, {LinkKind::kInterNode, 1, 1}, make_curve(points));
    tables.comm = measured;
    const TypeCosts tc = model().type_costs(config(1, 1, 1, 8, 1, 8), 1);
    EXPECT_REL(tc.moe.fwd_parts.ep,
               2 * tables.comm.time(Primitive::kAllToAll, routed, 8, {LinkKind::kInterNode, 1, 1}));
    tables.comm = saved;
  }
  {
    // Nodes of 6: span 4 ≤ 6 but 6 is not a multiple of 4 → inter (4e9, 2 µs).
    cluster.pools[0].devices_per_node = 6;
    cluster.pools[0].device.devices_per_node = 6;
    const TypeCosts tc = model().type_costs(config(1, 1, 1, 4, 1, 4), 0);
    EXPECT_REL(tc.moe.fwd_parts.ep, 2 * ring(routed, 4, 4e9, 2e-6));
  }
}

// The flex dispatcher (DeepEP, docs/costmodel.md "Dispatch and combine"):
// inside a node it is the all-to-all; across nodes each token goes once to
// every other node holding one of its k experts, over RDMA, pipelined with
// the forwarding inside the node.
TEST_F(CostTerms, FlexDispatcherSendsEachTokenOncePerRemoteNode) {
  const double tokens = 1024.0;  // t_sp = b·S/(CP·TP)
  const double routed = tokens * kK * kH * 2;
  workload.training.dispatcher = Dispatcher::kFlex;
  {
    // EP = 8 on type 0 (8 per node): one node, the all-to-all (40e9, 1 µs).
    const TypeCosts tc = model().type_costs(config(1, 1, 1, 8, 1, 8), 0);
    EXPECT_REL(tc.moe.fwd_parts.ep, 2 * ring(routed, 8, 40e9, 1e-6));
    EXPECT_EQ(tc.moe.dispatcher, Dispatcher::kFlex);
  }
  {
    // EP = 8 on type 1 (4 per node): two nodes of 4 experts each (E = 8,
    // k = 2). A token misses the other node with probability (4/8)(3/7):
    // it goes there 1 - 3/14 times on average, t_sp·H·β each, as one
    // transfer over the NIC (p2p 1.25e9, 4 µs); inside the node the
    // all-to-all of the node's share (A2A 20e9, 2 µs); the longer of the two.
    const TypeCosts tc = model().type_costs(config(1, 1, 1, 8, 1, 8), 1);
    const double copies = 1.0 - (4.0 / 8.0) * (3.0 / 7.0);
    const double rdma = p2p(tokens * copies * kH * 2, 1.25e9, 4e-6);
    const double node = ring(routed / 8 * 4, 4, 20e9, 2e-6);
    EXPECT_REL(tc.moe.fwd_parts.ep, 2 * std::max(rdma, node));
    EXPECT_REL(tc.moe.bwd_parts.ep, 2 * std::max(rdma, node));
  }
}

TEST_F(CostTerms, MoeLayerTpCollectivesOnlyForAttentionAndSharedExperts) {
  const ParallelConfig pi = config(1, 2, 1, 1, 1, 2);
  const double n = 1024.0 * kH * 2;  // b·S/CP·H·β
  const double block = ring(n, 2, 80e9, 1e-6) + ring(n, 2, 50e9, 1e-6);
  // Experts at TP = 2: t_sp = 512, 8 local experts of 128 rows.
  const double experts_f = experts_fwd_a(512, 1, 1);
  const double experts_b = experts_bwd_a(512, 1, 1);
  {
    // No shared experts: only the attention block (routed experts have none).
    const TypeCosts tc = model().type_costs(pi, 0);
    EXPECT_REL(tc.moe.fwd_parts.tp, block);
    EXPECT_REL(tc.moe.fwd_s, 1.0e-3 + 1.0e-4 + experts_f + block);
  }
  {
    // Shared experts are a TP-sharded block: a second AG + RS.
    workload.model.shared_expert_ffn_hidden = 1024;
    tables.compute[0][{2, 1}].shared_fwd = 3e-4;
    tables.compute[0][{2, 1}].shared_bwd = 6e-4;
    const TypeCosts tc = model().type_costs(pi, 0);
    EXPECT_REL(tc.moe.fwd_parts.tp, 2 * block);
    EXPECT_REL(tc.moe.fwd_s, 1.0e-3 + 1.0e-4 + experts_f + 3e-4 + 2 * block);
    EXPECT_REL(tc.moe.bwd_s, 2.2e-3 + 2.0e-4 + experts_b + 6e-4 + 2 * block);
  }
}

// ===========================================================================
// Activation memory per micro-batch (docs/costmodel.md table)

TEST_F(CostTerms, ActivationBytesDenseLayer) {
  workload.model = dense_model();
  // TP = 2, CP = 1: t_sp = b·S/(CP·TP) = 512.
  const TypeCosts tc = model().type_costs(config(1, 2, 1, 1, 1, 4), 0);
  const double tsp = 512;
  // attention: t_sp·(2H + 2a·d + 2g·d)·β = 512·(2048 + 2048 + 512)·2 = 4,718,592
  const double attn = tsp * (2 * kH + 2 * kA * kD + 2 * kG * kD) * 2;
  // dense MLP: t_sp·(2H + m·F)·β = 512·(2048 + 12288)·2 = 14,680,064
  const double mlp = tsp * (2 * kH + 3 * kF) * 2;
  EXPECT_EQ(attn, 4718592.0);
  EXPECT_EQ(mlp, 14680064.0);
  EXPECT_REL(tc.dense.act_bytes, attn + mlp);
  // default selective (core_attn): flash attention keeps Q, K, V and the
  // output anyway, so nothing is freed
  EXPECT_EQ(tc.dense.selective(kDefaultRecomputeModules).saved_bytes, 0.0);
  // mlp: the whole MLP but its input, t_sp·(H + m·F)·β
  EXPECT_REL(tc.dense.selective(module_bit(RecomputeModule::kMlp)).saved_bytes,
             tsp * (kH + 3 * kF) * 2);
  // layernorm: Transformer Engine fuses both norms of a dense layer into
  // the next linear layer; nothing to free
  EXPECT_EQ(tc.dense.selective(module_bit(RecomputeModule::kLayernorm)).saved_bytes, 0.0);
  // full: the layer input t_sp·H·β only
  EXPECT_REL(tc.dense.act_full_bytes, tsp * kH * 2);
}

TEST_F(CostTerms, ActivationBytesGeluLayer) {
  workload.model = dense_model();
  workload.model.mlp = MlpKind::kGelu;
  const TypeCosts tc = model().type_costs(config(1, 1, 1, 1, 1, 8), 0);
  const double tsp = 1024;
  // m = 2 for GELU: t_sp·(2H + 2F)·β
  const double attn = tsp * (2 * kH + 2 * kA * kD + 2 * kG * kD) * 2;
  EXPECT_REL(tc.dense.act_bytes, attn + tsp * (2 * kH + 2 * kF) * 2);
  EXPECT_REL(tc.dense.selective(module_bit(RecomputeModule::kMlp)).saved_bytes,
             tsp * (kH + 2 * kF) * 2);
}

TEST_F(CostTerms, ActivationBytesMoeLayer) {
  workload.model.shared_expert_ffn_hidden = 1024;
  // TP = 2, EP = 2, TPE = 2, DP = 2: t_sp = 512.
  const TypeCosts tc = model().type_costs(config(1, 2, 1, 2, 2, 2), 0);
  const double tsp = 512, fs = 1024;
  const double attn = tsp * (2 * kH + 2 * kA * kD + 2 * kG * kD) * 2;
  // MoE: t_sp·(2H·β + 2E·4 + k·f_imb·(TPE·H + m·F_e)·β + m·F_s·β)
  const double moe =
      tsp * (2 * kH * 2 + 2 * kE * 4 + kK * kImb * (2 * kH + 3 * kFe) * 2 + 3 * fs * 2);
  EXPECT_REL(tc.moe.act_bytes, attn + moe);
  // default selective (core_attn, moe_act) drops k·f_imb·F_e per token
  EXPECT_REL(tc.moe.selective(kDefaultRecomputeModules).saved_bytes, tsp * kK * kImb * kFe * 2);
  // shared_experts: their FC1 outputs and activation, m·F_s
  EXPECT_REL(tc.moe.selective(module_bit(RecomputeModule::kSharedExperts)).saved_bytes,
             tsp * 3 * fs * 2);
  // layernorm: the pre-MoE norm's output, H
  EXPECT_REL(tc.moe.selective(module_bit(RecomputeModule::kLayernorm)).saved_bytes, tsp * kH * 2);
  // moe: everything of the block but the norm's input and output; it
  // includes moe_act and shared_experts, which are not counted twice
  const double block = moe - tsp * 2 * kH * 2;
  const unsigned all_moe = module_bit(RecomputeModule::kMoe) |
                           module_bit(RecomputeModule::kMoeAct) |
                           module_bit(RecomputeModule::kSharedExperts);
  EXPECT_REL(tc.moe.selective(module_bit(RecomputeModule::kMoe)).saved_bytes, block);
  EXPECT_REL(tc.moe.selective(all_moe).saved_bytes, block);
  EXPECT_REL(tc.moe.act_full_bytes, tsp * kH * 2);
}

TEST_F(CostTerms, ActivationBytesMultiLatentAttention) {
  workload.model = mla_model();
  const TypeCosts tc = model().type_costs(config(1, 2, 1, 1, 1, 4), 0);
  const double tsp = 512;
  // MLA: t_sp·(2H + q_lora + kv_lora + 2a·d_qk + 2a·d_v)·β
  const double attn = tsp * (2 * kH + 384 + 128 + 2 * kA * 96 + 2 * kA * 64) * 2;
  const double mlp = tsp * (2 * kH + 3 * kF) * 2;
  EXPECT_REL(tc.dense.act_bytes, attn + mlp);
}

// ===========================================================================
// Selective recomputation time (docs/costmodel.md, "Activation memory"):
// recompute core attention plus the dropped activation-function outputs.

TEST_F(CostTerms, SelectiveRecomputeTimeMoeLayer) {
  tables.devices[0].eta = 1.0;  // the doc does not say whether η scales the activation recompute
  const TypeCosts tc = model().type_costs(config(1, 1, 1, 1, 1, 1), 0);
  // core attention + f_imb × the routed experts' activation function, m = 3
  // passes of t_sp·k·F_e·β at W: 4e-4 + 1.2·3·1024·2·2048·2/1e12 = 4e-4 + 1.2·2.5165824e-5
  const double act = 3.0 * 1024 * kK * kFe * 2 / 1e12;
  EXPECT_REL(act, 2.5165824e-5);
  EXPECT_REL(tc.moe.selective(kDefaultRecomputeModules).extra_s, 4e-4 + kImb * act);
  // A measured expert scale scales the recomputed activation too; η divides it.
  tables.compute[0][{1, 1}].expert_scale_fwd = 0.5;
  tables.devices[0].eta = 0.8;
  EXPECT_REL(model()
                 .type_costs(config(1, 1, 1, 1, 1, 1), 0)
                 .moe.selective(kDefaultRecomputeModules)
                 .extra_s,
             4e-4 + 0.5 * kImb * act / 0.8);
}

TEST(CostTermsAnalytic, SelectiveRecomputeTimeDenseLayer) {
  const Workload w{moe_shared_model(), training()};
  const ClusterSpec c = single_cluster(roofline_device());
  const ProfileTables t = make_analytic_tables(w, c, 1, {2}, {2});
  const CostModel cm(w, c, t);
  const TypeCosts tc = cm.type_costs(config(1, 2, 2, 1, 1, 1), 0);
  const double tok = 512;
  const double core = core_fwd(2.0 * tok * (kS / 2) * (kA / 2) * (kD + kD), kD, 512);
  // core attention alone: Megatron has no module for a dense MLP's
  // activation function
  EXPECT_REL(tc.dense.selective(kDefaultRecomputeModules).extra_s, core);
}

TEST(CostTermsAnalytic, SelectiveRecomputeOfSharedExpertsRerunsThem) {
  // moe_act reruns the routed experts' activation; shared_experts reruns
  // the shared experts' whole MLP with its TP collectives.
  const Workload w{moe_shared_model(), training()};
  const ClusterSpec c = single_cluster(roofline_device());
  const ProfileTables t = make_analytic_tables(w, c, 1, {2}, {2});
  const CostModel cm(w, c, t);
  const TypeCosts tc = cm.type_costs(config(1, 2, 2, 1, 1, 1), 0);
  const double tok = 512, tsp = 256;
  const double core = core_fwd(2.0 * tok * (kS / 2) * (kA / 2) * (kD + kD), kD, 512);
  const double expert_act = 3.0 * tsp * kFe * 2.0 / kW;  // m passes of t_sp·F_e·β
  // η = 1 in the analytic tables.
  EXPECT_REL(tc.moe.selective(kDefaultRecomputeModules).extra_s, core + kK * kImb * expert_act);
  const ComputeEntry& e = t.compute_entry(0, 2, 2, "roofline");
  const double shared_tp = tc.moe.fwd_parts.tp / 2;  // attention's block and the shared experts'
  EXPECT_REL(tc.moe.selective(module_bit(RecomputeModule::kSharedExperts)).extra_s,
             e.shared_fwd + shared_tp);
}

// ===========================================================================
// Parameters per device and bytes per parameter (docs/costmodel.md, "Parameters per device")

TEST_F(CostTerms, ParametersPerDevice) {
  workload.model = moe_model({0, 1, 0, 1});
  // TP = 2, EP = 4, TPE = 1, DP = 4.
  const TypeCosts tc = model().type_costs(config(1, 2, 1, 4, 1, 4), 0);
  // dense layer: (attention + MLP)/TP
  EXPECT_REL(tc.dense.dense_params, (kAttnParams + kDenseMlpParams) / 2);
  EXPECT_EQ(tc.dense.expert_params, 0.0);
  // MoE layer: (attention + router + shared)/TP non-expert; E·m·H·F_e/(EP·TPE) expert
  EXPECT_REL(tc.moe.dense_params, (kAttnParams + kRouterParams) / 2);
  EXPECT_REL(tc.moe.expert_params, kExpertParams / 4);
  // TPE divides the experts too: EP = 2, TPE = 2
  const TypeCosts tpe = model().type_costs(config(1, 2, 1, 2, 2, 4), 0);
  EXPECT_REL(tpe.moe.expert_params, kExpertParams / 4);
}

TEST_F(CostTerms, BytesPerParameter) {
  // TP = 2, CP = 2, DP = 2, EP = 4: d = DP·CP = 4 dense, EDP = 8/4 = 2 expert.
  const ParallelConfig pi = config(1, 2, 2, 4, 1, 2);
  {
    // bf16, distributed: 2 + 4 + 12/d
    const TypeCosts tc = model().type_costs(pi, 0);
    EXPECT_EQ(tc.weight_bytes_per_param, 2.0);
    EXPECT_EQ(tc.grad_bytes_per_param, 4.0);
    EXPECT_REL(tc.dense_opt_bytes_per_param, 12.0 / 4);
    EXPECT_REL(tc.expert_opt_bytes_per_param, 12.0 / 2);
  }
  {
    // fp16, distributed: 2 + 2 + 16/d
    workload.training.precision = Precision::kFp16;
    const TypeCosts tc = model().type_costs(pi, 0);
    EXPECT_EQ(tc.weight_bytes_per_param, 2.0);
    EXPECT_EQ(tc.grad_bytes_per_param, 2.0);
    EXPECT_REL(tc.dense_opt_bytes_per_param, 16.0 / 4);
    EXPECT_REL(tc.expert_opt_bytes_per_param, 16.0 / 2);
  }
  {
    // non-distributed: d = 1 → bf16 2 + 4 + 12 = 18, fp16 2 + 2 + 16 = 20
    workload.training.distributed_optimizer = false;
    const TypeCosts fp16 = model().type_costs(pi, 0);
    EXPECT_EQ(
        fp16.weight_bytes_per_param + fp16.grad_bytes_per_param + fp16.dense_opt_bytes_per_param,
        20.0);
    EXPECT_EQ(fp16.expert_opt_bytes_per_param, 16.0);
    workload.training.precision = Precision::kBf16;
    const TypeCosts bf16 = model().type_costs(pi, 0);
    EXPECT_EQ(
        bf16.weight_bytes_per_param + bf16.grad_bytes_per_param + bf16.dense_opt_bytes_per_param,
        18.0);
    EXPECT_EQ(bf16.expert_opt_bytes_per_param, 12.0);
  }
}

// --grad-reduce-in-bf16: the gradient buffer and its DP reduction in bf16,
// 2 B/param instead of 4: half the gradient memory and half the
// reduce-scatter's bytes; the all-gather of parameters is unchanged.
TEST_F(CostTerms, GradReduceInBf16HalvesGradientsAndTheirReduction) {
  const ParallelConfig pi = config(1, 2, 2, 4, 1, 2);
  const TypeCosts fp32 = model().type_costs(pi, 0);
  workload.training.grad_reduce_in_bf16 = true;
  const TypeCosts bf16 = model().type_costs(pi, 0);
  EXPECT_EQ(fp32.grad_bytes_per_param, 4.0);
  EXPECT_EQ(bf16.grad_bytes_per_param, 2.0);
  EXPECT_REL(bf16.dp_reduce.s_per_param, fp32.dp_reduce.s_per_param / 2);
  EXPECT_REL(bf16.edp_reduce.s_per_param, fp32.edp_reduce.s_per_param / 2);
  EXPECT_EQ(bf16.dp_gather.s_per_param, fp32.dp_gather.s_per_param);
  EXPECT_EQ(bf16.dp_reduce.latency_s, fp32.dp_reduce.latency_s);
  const StageShape s = shape(0, 0, 2, 1, -1);
  const StageCost a = model().stage_cost(pi, fp32, s);
  const StageCost b = model().stage_cost(pi, bf16, s);
  EXPECT_REL(b.memory.gradients, a.memory.gradients / 2);
  EXPECT_EQ(b.memory.weights, a.memory.weights);
  EXPECT_LT(b.dp_sync_s, a.dp_sync_s);
}

TEST_F(CostTerms, EmbeddingOnFirstStageOutputOnLast) {
  {
    // untied, PP = 2, TP = 2: embedding V·H/TP, output V·H/TP
    const TypeCosts tc = model().type_costs(config(2, 2, 1, 1, 1, 1), 0);
    EXPECT_REL(tc.embedding_params, kV * kH / 2);
    EXPECT_REL(tc.output_params, kV * kH / 2);
  }
  {
    // tied, PP = 2: the last stage holds its own copy
    workload.model.tied_embeddings = true;
    const TypeCosts tc = model().type_costs(config(2, 2, 1, 1, 1, 1), 0);
    EXPECT_REL(tc.output_params, kV * kH / 2);
  }
  {
    // tied, PP = 1: shared, no second copy
    const TypeCosts tc = model().type_costs(config(1, 2, 1, 1, 1, 1), 0);
    EXPECT_EQ(tc.output_params, 0.0);
    EXPECT_REL(tc.embedding_params, kV * kH / 2);
  }
  {
    // learned positions (max_positions = 4096) join the embedding: (V + 4096)·H/TP
    workload.model.positions = PositionKind::kLearned;
    const TypeCosts tc = model().type_costs(config(1, 2, 1, 1, 1, 1), 0);
    EXPECT_REL(tc.embedding_params, (kV + 4096) * kH / 2);
  }
}

// type_costs reads of a configuration only what type_costs_key keeps: the
// bounds compute one TypeCosts per key for the shapes of PP 1, 2 and
// deeper (engine bound_shape, TypeCostsCache). With tied embeddings a
// single stage holds no output matrix of its own, so PP 1 has its key.
TEST_F(CostTerms, TypeCostsDependOnTheirKeyOnly) {
  for (const bool tied : {false, true}) {
    workload.model.tied_embeddings = tied;
    const CostModel cm = model();
    for (const ParallelConfig degrees : {config(1, 2, 1, 2, 1, 2), config(1, 1, 2, 4, 1, 4, 2)}) {
      for (int type = 0; type < cluster.num_types(); ++type) {
        ParallelConfig a = degrees;
        const TypeCosts one = cm.type_costs(a, type);
        for (const int pp : {1, 2, 3, 5}) {
          for (const int vpp : {1, 2}) {
            ParallelConfig b = degrees;
            b.pp = pp;
            b.vpp = vpp;
            const bool same_key = cm.type_costs_key(a) == cm.type_costs_key(b);
            EXPECT_EQ(same_key, !tied || pp == 1) << "tied " << tied << " pp " << pp;
            if (same_key) {
              EXPECT_TRUE(cm.type_costs(b, type) == one) << "tied " << tied << " pp " << pp;
            } else {
              EXPECT_NE(cm.type_costs(b, type).output_params, one.output_params);
            }
          }
        }
      }
    }
  }
  // Other degrees, another key.
  const CostModel cm = model();
  EXPECT_FALSE(cm.type_costs_key(config(2, 2, 1, 1, 1, 1)) ==
               cm.type_costs_key(config(2, 2, 1, 1, 1, 2)));
}

TEST_F(CostTerms, StageWeightsPlaceEmbeddingAndOutput) {
  workload.model = dense_model();
  const CostModel cm = model();
  // PP = 3, TP = 2, DP = 1: first and middle stage with one dense layer, last with two.
  const ParallelConfig pi = config(3, 2, 1, 1, 1, 1);
  const TypeCosts tc = cm.type_costs(pi, 0);
  const double layer = (kAttnParams + kDenseMlpParams) / 2;
  const double emb = kV * kH / 2, out = kV * kH / 2;
  const StageCost first = cm.stage_cost(pi, tc, shape(0, 0, 1, 0, -1));
  const StageCost middle = cm.stage_cost(pi, tc, shape(1, 1, 1, 0, 0));
  const StageCost last = cm.stage_cost(pi, tc, shape(2, 2, 2, 0, 0));
  EXPECT_REL(first.memory.weights, 2 * (layer + emb));
  EXPECT_REL(middle.memory.weights, 2 * layer);
  EXPECT_REL(last.memory.weights, 2 * (2 * layer + out));
}

TEST_F(CostTerms, WeightGradientOptimizerMemoryFromTheModel) {
  // PP = 2, TP = 2, CP = 2, EP = 4, DP = 2: d = DP·CP = 4, EDP = 8/4 = 2.
  const ParallelConfig pi = config(2, 2, 2, 4, 1, 2);
  const CostModel cm = model();
  const TypeCosts tc = cm.type_costs(pi, 0);
  // First stage, two MoE layers: non-expert 2·(attention + router)/TP + V·H/TP,
  // expert 2·E·m·H·F_e/(EP·TPE).
  const double pd = 2 * (kAttnParams + kRouterParams) / 2 + kV * kH / 2;
  const double pe = 2 * kExpertParams / 4;
  const StageCost s = cm.stage_cost(pi, tc, shape(0, 0, 2, 2, -1));
  EXPECT_REL(s.memory.weights, 2 * (pd + pe));
  EXPECT_REL(s.memory.gradients, 4 * (pd + pe));
  EXPECT_REL(s.memory.optimizer, 12.0 / 4 * pd + 12.0 / 2 * pe);
}

TEST_F(CostTerms, LogitsBytesOfTheLastStage) {
  // b = 2, TP = 2, CP = 2: b·S/CP·V/TP·6 = 2·1024/2·32000/2·6 = 98,304,000 B
  const TypeCosts tc = model().type_costs(config(2, 2, 2, 1, 1, 1, 2), 0);
  EXPECT_REL(tc.logits_bytes, 2.0 * 1024 / 2 * (kV / 2) * 6);
  EXPECT_EQ(tc.logits_bytes, 98304000.0);
}

// ===========================================================================
// Stage (docs/costmodel.md, "Stage"), on hand-made per-type costs.
// PP = 4, TP = 2, EP = 2, DP = 2, b = 1: M = 64/(1·2) = 32; EDP = 4/2 = 2.

TEST_F(CostTerms, StageMemoryFirstStage) {
  const ParallelConfig pi = config(4, 2, 1, 2, 1, 2);
  const TypeCosts tc = hand_type_costs(0);
  // position 0, one dense + two MoE layers
  const StageCost s = model().stage_cost(pi, tc, shape(0, 0, 3, 2, -1));
  EXPECT_EQ(s.in_flight, 4);  // min(PP − 0, M) = min(4, 32)
  // parameters: non-expert 1·50e6 + 2·20e6 + 16e6 (embedding) = 106e6; expert 2·100e6
  EXPECT_REL(s.memory.weights, 2 * 306e6);
  EXPECT_REL(s.memory.gradients, 4 * 306e6);
  EXPECT_REL(s.memory.optimizer, 3 * 106e6 + 6 * 200e6);
  // activations (1·100e6 + 2·200e6) × 4 in flight × scale 1.25 = 2.5e9
  EXPECT_REL(s.memory.activations, 500e6 * 4 * 1.25);
  // dispatch buffer (not the last stage)
  EXPECT_REL(s.memory.moe_buffers, 30e6);
  EXPECT_REL(s.memory.overhead, 2e9);
  EXPECT_REL(s.memory.total(), 612e6 + 1224e6 + 1518e6 + 2500e6 + 30e6 + 2000e6);
  EXPECT_EQ(s.capacity_bytes, 80e9);
}

TEST_F(CostTerms, StageMemoryMiddleAndLastStages) {
  const ParallelConfig pi = config(4, 2, 1, 2, 1, 2);
  TypeCosts tc = hand_type_costs(0);
  const CostModel cm = model();
  {
    // middle (position 1), two dense layers: 3 in flight, no buffers, no embedding
    const StageCost s = cm.stage_cost(pi, tc, shape(1, 3, 2, 0, 0));
    EXPECT_EQ(s.in_flight, 3);
    EXPECT_REL(s.memory.activations, 200e6 * 3 * 1.25);
    EXPECT_EQ(s.memory.moe_buffers, 0.0);
    EXPECT_REL(s.memory.weights, 2 * 100e6);
  }
  {
    // last (position 3), one MoE layer: 1 in flight, output params,
    // buffers max(dispatch 30e6, logits 40e6) = 40e6
    const StageCost s = cm.stage_cost(pi, tc, shape(3, 3, 1, 1, 0));
    EXPECT_EQ(s.in_flight, 1);
    EXPECT_REL(s.memory.activations, 200e6 * 1 * 1.25);
    EXPECT_REL(s.memory.moe_buffers, 40e6);
    EXPECT_REL(s.memory.weights, 2 * (20e6 + 16e6 + 100e6));
  }
  {
    // a dispatch buffer larger than the logits wins
    tc.moe.moe_buffer_bytes = 50e6;
    const StageCost s = cm.stage_cost(pi, tc, shape(3, 3, 1, 1, 0));
    EXPECT_REL(s.memory.moe_buffers, 50e6);
  }
  {
    // last stage without MoE layers: the logits alone
    const StageCost s = cm.stage_cost(pi, tc, shape(3, 3, 1, 0, 0));
    EXPECT_REL(s.memory.moe_buffers, 40e6);
  }
}

TEST_F(CostTerms, InFlightMicroBatchesWithFewMicroBatches) {
  // B = 4, b = 1, DP = 2: M = 2 < PP = 4 → min(PP − i, M) = 2, 2, 2, 1.
  workload.training.global_batch = 4;
  const ParallelConfig pi = config(4, 2, 1, 2, 1, 2);
  const CostModel cm = model();
  EXPECT_EQ(cm.num_microbatches(pi), 2);
  const TypeCosts tc = hand_type_costs(0);
  const int expected[] = {2, 2, 2, 1};
  for (int i = 0; i < 4; ++i) {
    const StageCost s = cm.stage_cost(pi, tc, shape(i, i, 1, 0, i == 0 ? -1 : 0));
    EXPECT_EQ(s.in_flight, expected[i]) << "position " << i;
    EXPECT_REL(s.memory.activations, 100e6 * expected[i] * 1.25);
  }
}

TEST_F(CostTerms, FitsAgainstCapacity) {
  const ParallelConfig pi = config(4, 2, 1, 2, 1, 2);
  TypeCosts tc = hand_type_costs(0);
  const double total = 612e6 + 1224e6 + 1518e6 + 2500e6 + 30e6 + 2000e6;  // = 7.884e9
  tc.capacity_bytes = total;                                              // total ≤ C_h fits
  EXPECT_TRUE(model().stage_cost(pi, tc, shape(0, 0, 3, 2, -1)).fits());
  tc.capacity_bytes = total - 1;
  EXPECT_FALSE(model().stage_cost(pi, tc, shape(0, 0, 3, 2, -1)).fits());
}

TEST_F(CostTerms, StageTimesFirstMiddleLast) {
  const ParallelConfig pi = config(4, 2, 1, 2, 1, 2);  // stage of 4 devices < 8 per node
  const TypeCosts tc = hand_type_costs(0);
  const CostModel cm = model();
  // p2p: b·S/(CP·TP)·H·β = 512·1024·2 = 1,048,576 B on type 0 intra p2p (25e9, 1 µs)
  const double boundary = p2p(512.0 * kH * 2, 25e9, 1e-6);
  {
    // first: Σ layers + embedding, no p2p
    const StageCost s = cm.stage_cost(pi, tc, shape(0, 0, 3, 2, -1));
    EXPECT_REL(s.fwd_s, 1e-3 + 2 * 1.5e-3 + 1e-4);
    EXPECT_REL(s.bwd_s, 2e-3 + 2 * 3e-3 + 2e-4);
    EXPECT_EQ(s.p2p_fwd_s, 0.0);
    EXPECT_EQ(s.p2p_bwd_s, 0.0);
  }
  {
    // middle: Σ layers + p2p from the previous stage, once each way
    const StageCost s = cm.stage_cost(pi, tc, shape(1, 3, 2, 1, 0));
    EXPECT_REL(s.p2p_fwd_s, boundary);
    EXPECT_REL(s.p2p_bwd_s, boundary);
    EXPECT_REL(s.fwd_s, 1e-3 + 1.5e-3 + boundary);
    EXPECT_REL(s.bwd_s, 2e-3 + 3e-3 + boundary);
  }
  {
    // last: Σ layers + output layer + p2p
    const StageCost s = cm.stage_cost(pi, tc, shape(3, 3, 1, 1, 0));
    EXPECT_REL(s.fwd_s, 1.5e-3 + 5e-4 + boundary);
    EXPECT_REL(s.bwd_s, 3e-3 + 1e-3 + boundary);
  }
  {
    // PP = 1: the only stage has both the embedding and the output layer
    const StageCost s = cm.stage_cost(config(1, 2, 1, 2, 1, 2), tc, shape(0, 0, 2, 1, -1));
    EXPECT_REL(s.fwd_s, 1e-3 + 1.5e-3 + 1e-4 + 5e-4);
    EXPECT_REL(s.bwd_s, 2e-3 + 3e-3 + 2e-4 + 1e-3);
  }
}

TEST_F(CostTerms, BoundaryLinks) {
  const CostModel cm = model();
  // bytes: b·S/(CP·TP)·H·β with TP = 2: 1,048,576 B
  const double n = 512.0 * kH * 2;
  // first stage: nothing
  EXPECT_EQ(cm.boundary(config(2, 2, 1, 1, 1, 2), -1, 0).fwd_s, 0.0);
  // type 0, stage of 4 < 8 per node: intra p2p (25e9, 1 µs)
  auto b = cm.boundary(config(2, 2, 1, 1, 1, 2), 0, 0);
  EXPECT_REL(b.fwd_s, p2p(n, 25e9, 1e-6));
  EXPECT_REL(b.bwd_s, p2p(n, 25e9, 1e-6));
  // type 0, stage of 8 = a node: inter p2p (2.5e9, 2 µs)
  EXPECT_REL(cm.boundary(config(2, 2, 1, 1, 1, 4), 0, 0).fwd_s, p2p(n, 2.5e9, 2e-6));
  // type 1, stage of 2 < 4: intra (12.5e9, 2 µs); stage of 4: inter (1.25e9, 4 µs)
  EXPECT_REL(cm.boundary(config(2, 2, 1, 1, 1, 1), 1, 1).fwd_s, p2p(n, 12.5e9, 2e-6));
  EXPECT_REL(cm.boundary(config(2, 2, 1, 1, 1, 2), 1, 1).fwd_s, p2p(n, 1.25e9, 4e-6));
  // different types: the cross-type link (0.5e9, 5 µs), either direction
  EXPECT_REL(cm.boundary(config(2, 2, 1, 1, 1, 2), 0, 1).fwd_s, p2p(n, 0.5e9, 5e-6));
  EXPECT_REL(cm.boundary(config(2, 2, 1, 1, 1, 2), 1, 0).bwd_s, p2p(n, 0.5e9, 5e-6));
  // CP = 2 halves the message: b·S/(CP·TP)·H·β = 256·1024·2
  EXPECT_REL(cm.boundary(config(2, 2, 2, 1, 1, 1), 0, 0).fwd_s, p2p(256.0 * kH * 2, 25e9, 1e-6));
}

TEST(CostTermsAnalytic, CrossTypeBoundaryUsesClusterCrossLink) {
  const Workload w{moe_model(), training()};
  ClusterSpec c = two_type_cluster();
  const ParallelConfig pi = config(2, 2, 1, 1, 1, 2);
  const double n = 512.0 * kH * 2;
  {
    // No explicit link: ClusterSpec::cross_bandwidth = min NIC (10e9, 5e9) = 5e9,
    // cross_latency = max(2 µs, 4 µs) = 4 µs; NCCL moves 0.97 of a NIC's rate.
    const ProfileTables t = make_analytic_tables(w, c, 1, {2}, {1});
    const CostModel cm(w, c, t);
    EXPECT_REL(cm.boundary(pi, 0, 1).fwd_s, p2p(n, 5e9 * 0.97, 4e-6));
  }
  {
    c.cross_links.push_back({0, 1, 3e9, 7e-6});
    const ProfileTables t = make_analytic_tables(w, c, 1, {2}, {1});
    const CostModel cm(w, c, t);
    EXPECT_REL(cm.boundary(pi, 1, 0).bwd_s, p2p(n, 3e9 * 0.97, 7e-6));
  }
}

TEST_F(CostTerms, RecomputationTime) {
  const ParallelConfig pi = config(4, 2, 1, 2, 1, 2);
  const TypeCosts tc = hand_type_costs(0);
  const CostModel cm = model();
  const double bwd = 2e-3 + 2 * 3e-3 + 2e-4;  // one dense + two MoE + embedding
  {
    // selective (core_attn, moe_act): Σ extras = 1e-4 + 2·2e-4; activations 80e6 + 2·150e6
    const StageCost s =
        cm.stage_cost(pi, tc, shape(0, 0, 3, 2, -1, {RecomputeKind::kSelective, 0}));
    EXPECT_REL(s.recompute_s, 1e-4 + 2 * 2e-4);
    EXPECT_REL(s.bwd_s, bwd + 5e-4);
    EXPECT_REL(s.memory.activations, (80e6 + 2 * 150e6) * 4 * 1.25);
  }
  {
    // selective by module (docs/costmodel.md, "Recompute by module"):
    // layernorm + moe + moe_act sums layernorm and moe; moe already reruns
    // the experts' activation, so moe_act is not counted again.
    TypeCosts m = tc;
    auto mod = [](LayerCost& l, RecomputeModule r) -> LayerCost::ModuleCost& {
      return l.modules[static_cast<std::size_t>(r)];
    };
    mod(m.moe, RecomputeModule::kLayernorm) = {5e6, 1e-5};
    mod(m.moe, RecomputeModule::kMoe) = {120e6, 1e-3};
    mod(m.dense, RecomputeModule::kMlp) = {30e6, 4e-4};
    const unsigned set = module_bit(RecomputeModule::kLayernorm) |
                         module_bit(RecomputeModule::kMoe) | module_bit(RecomputeModule::kMoeAct);
    const StageCost s =
        cm.stage_cost(pi, m, shape(0, 0, 3, 2, -1, {RecomputeKind::kSelective, 0, set}));
    EXPECT_REL(s.recompute_s, 2 * (1e-5 + 1e-3));
    EXPECT_REL(s.memory.activations, (100e6 + 2 * (200e6 - 5e6 - 120e6)) * 4 * 1.25);
    // mlp counts in the dense layer alone.
    const StageCost d = cm.stage_cost(
        pi, m,
        shape(0, 0, 3, 2, -1, {RecomputeKind::kSelective, 0, module_bit(RecomputeModule::kMlp)}));
    EXPECT_REL(d.recompute_s, 4e-4);
    EXPECT_REL(d.memory.activations, (100e6 - 30e6 + 2 * 200e6) * 4 * 1.25);
  }
  {
    // full, K = 2 layers of which 1 MoE: adds one dense and one MoE forward;
    // those layers keep only their input (10e6 each).
    const StageCost s = cm.stage_cost(pi, tc, shape(0, 0, 3, 2, -1, {RecomputeKind::kFull, 2}, 1));
    EXPECT_REL(s.recompute_s, 1e-3 + 1.5e-3);
    EXPECT_REL(s.bwd_s, bwd + 2.5e-3);
    EXPECT_REL(s.memory.activations, (10e6 + 10e6 + 200e6) * 4 * 1.25);
    EXPECT_REL(s.fwd_s, 1e-3 + 2 * 1.5e-3 + 1e-4);  // the forward is unchanged
  }
  {
    // full, K = n = 3: every layer recomputed
    const StageCost s = cm.stage_cost(pi, tc, shape(0, 0, 3, 2, -1, {RecomputeKind::kFull, 3}, 2));
    EXPECT_REL(s.recompute_s, 1e-3 + 2 * 1.5e-3);
    EXPECT_REL(s.memory.activations, 3 * 10e6 * 4 * 1.25);
  }
}

TEST_F(CostTerms, GradientSyncAndOptimizerFromPerTypeCosts) {
  // time(n params) = latency + n·slope per group (cost.h); optimizer on the shard.
  const ParallelConfig pi = config(4, 2, 1, 2, 1, 2);
  const TypeCosts tc = hand_type_costs(0);
  const StageCost s = model().stage_cost(pi, tc, shape(0, 0, 3, 2, -1));
  // non-expert 106e6 over DP·CP, expert 200e6 over EDP
  EXPECT_REL(s.dp_sync_s, 1e-5 + 106e6 * 1e-10 + 2e-5 + 200e6 * 2e-10);
  // optimizer: (106e6/(DP·CP = 2) + 200e6/(EDP = 2)) · 1e-11
  EXPECT_REL(s.optimizer_s, (106e6 / 2 + 200e6 / 2) * 1e-11);
  // a stage without experts syncs only over DP
  const StageCost dense_stage = model().stage_cost(pi, tc, shape(1, 3, 2, 0, 0));
  EXPECT_REL(dense_stage.dp_sync_s, 1e-5 + 100e6 * 1e-10);
}

TEST_F(CostTerms, GradientSyncAndOptimizerFromTheModel) {
  // PP = 1, TP = 2, CP = 2, EP = 4, DP = 2: stage of 8 devices; d = DP·CP = 4, EDP = 2.
  const ParallelConfig pi = config(1, 2, 2, 4, 1, 2);
  // Stage = whole model (4 MoE layers), embedding and untied output.
  const double pd = 4 * (kAttnParams + kRouterParams) / 2 + kV * kH / 2 + kV * kH / 2;
  const double pe = 4 * kExpertParams / 4;
  {
    // type 0: stage span 8 = node → intra (RS 50e9, AG 80e9, 1 µs).
    // distributed: RS of 4 B/param + AG of 2 B/param, per group
    const CostModel cm = model();
    const StageCost s = cm.stage_cost(pi, cm.type_costs(pi, 0), shape(0, 0, 4, 4, -1));
    const double sync = ring(4 * pd, 4, 50e9, 1e-6) + ring(2 * pd, 4, 80e9, 1e-6) +
                        ring(4 * pe, 2, 50e9, 1e-6) + ring(2 * pe, 2, 80e9, 1e-6);
    EXPECT_REL(s.dp_sync_s, sync);
    // optimizer: (params/d)·30 B/param / W_h... here the table's 3e-11 s/param
    EXPECT_REL(s.optimizer_s, (pd / 4 + pe / 2) * 3e-11);
  }
  {
    // type 1 (4 per node): span 8 > 4 → inter (RS 2.5e9, AG 4e9, 4 µs).
    // The DP x CP group (stride TP = 2) has 2 members on each node: half
    // of what a member sends crosses its NIC, the other half moves over
    // the node's link (RS 25e9, AG 40e9, 2 µs), at the same time. The EDP
    // group (stride EP = 4) has one member per node: all over the NIC.
    const CostModel cm = model();
    const StageCost s = cm.stage_cost(pi, cm.type_costs(pi, 1), shape(0, 0, 4, 4, -1));
    const double dense =
        std::max(ring(4 * pd / 2, 4, 2.5e9, 4e-6), ring(4 * pd / 2, 4, 25e9, 2e-6)) +
        std::max(ring(2 * pd / 2, 4, 4e9, 4e-6), ring(2 * pd / 2, 4, 40e9, 2e-6));
    const double sync = dense + ring(4 * pe, 2, 2.5e9, 4e-6) + ring(2 * pe, 2, 4e9, 4e-6);
    EXPECT_REL(s.dp_sync_s, sync);
    EXPECT_LT(dense, ring(4 * pd, 4, 2.5e9, 4e-6) + ring(2 * pd, 4, 4e9, 4e-6));  // all via NIC
    EXPECT_REL(s.optimizer_s, (pd / 4 + pe / 2) * 6e-11);
    // A measured inter-node reduce-scatter is NCCL's real collective over
    // the whole group already: taken as measured.
    const CommTable saved = tables.comm;
    std::vector<CommPoint> points;
    for (const double bytes : {1e6, 1e7, 1e8}) points.push_back({4, bytes, bytes / 1e9});
    tables.comm.set_measured(Primitive::kReduceScatter, {LinkKind::kInterNode, 1, 1},
                             make_curve(points));
    const TypeCosts measured = model().type_costs(pi, 1);
    auto lookup = [&](double bytes) {
      return tables.comm.time(Primitive::kReduceScatter, bytes, 4, {LinkKind::kInterNode, 1, 1});
    };
    EXPECT_REL(measured.dp_reduce.latency_s, lookup(1e-300));
    EXPECT_REL(measured.dp_reduce.s_per_param, (lookup(4e9) - lookup(1e-300)) / 1e9);
    tables.comm = saved;
  }
  {
    // without the distributed optimizer: an all-reduce of gradients (4 B/param, AR 100e9)
    // and the optimizer on all local parameters.
    workload.training.distributed_optimizer = false;
    const CostModel cm = model();
    const StageCost s = cm.stage_cost(pi, cm.type_costs(pi, 0), shape(0, 0, 4, 4, -1));
    EXPECT_REL(s.dp_sync_s,
               all_reduce(4 * pd, 4, 100e9, 1e-6) + all_reduce(4 * pe, 2, 100e9, 1e-6));
    EXPECT_REL(s.optimizer_s, (pd + pe) * 3e-11);
  }
}

// Activation offload (docs/costmodel.md, "Activation offload"): the first K
// layers' activations go to the host but one layer's; their copies (one way
// each pass) hide behind the stage's compute but for what exceeds it; no
// recomputation is offered with it (Megatron-Core refuses the pair).
TEST_F(CostTerms, ActivationOffload) {
  const ParallelConfig pi = config(1, 2, 1, 2, 1, 2);
  const StageShape sh = shape(0, 0, 4, 4, -1);
  const StageCost off = model().stage_cost(pi, model().type_costs(pi, 0), sh);
  workload.training.activation_offload_layers = 3;
  DeviceSpec& d = cluster.pools[0].device;
  d.host_memory_bytes = 1e12;
  d.host_link_bandwidth = 1e9;  // slow enough that the copies show
  d.host_memory_bandwidth = 200e9;
  const CostModel cm = model();
  const TypeCosts tc = cm.type_costs(pi, 0);
  const StageCost s = cm.stage_cost(pi, tc, sh);
  const double moved = 3 * tc.moe.act_bytes - tc.moe.act_bytes;  // one layer stays
  const double scale = s.in_flight * tc.activation_scale;
  EXPECT_REL(off.memory.activations - s.memory.activations, moved * scale);
  EXPECT_REL(s.host_bytes, moved * scale);
  const double copy = 3 * tc.moe.act_bytes / 1e9;
  EXPECT_REL(s.fwd_parts.host, std::max(0.0, copy - off.fwd_s));
  EXPECT_REL(s.bwd_parts.host, std::max(0.0, copy - off.bwd_s));
  EXPECT_GT(s.fwd_parts.host, 0.0);
  EXPECT_REL(s.fwd_s, off.fwd_s + s.fwd_parts.host);
  // Only "none" is a candidate: a stage too small for it has no choice.
  TypeCosts tight = tc;
  tight.capacity_bytes = s.memory.total() * 0.99;
  EXPECT_FALSE(cm.least_recompute(pi, tight, sh).has_value());
  tight.capacity_bytes = s.memory.total() * 1.01;
  EXPECT_EQ(cm.least_recompute(pi, tight, sh), (Recompute{RecomputeKind::kNone, 0}));
  // K must stay below the model's layers (Megatron-Core).
  workload.training.activation_offload_layers = workload.model.num_layers;
  EXPECT_NE(validate(workload.training, workload.model).find("activation_offload_layers"),
            std::string::npos);
}

// Multi-token prediction (docs/costmodel.md, "Multi-token prediction"): on
// the last stage each depth adds a layer of the last layer's kind, its
// projection and another output pass, the layer's parameters and
// activations, and (untied, PP > 1) the embedding; other stages are as
// without.
TEST_F(CostTerms, MultiTokenPredictionOnTheLastStage) {
  const ParallelConfig pi = config(2, 2, 1, 2, 1, 2);
  tables.compute[0][{2, 1}].mtp_fwd = 3e-5;
  tables.compute[0][{2, 1}].mtp_bwd = 6e-5;
  const TypeCosts t0 = model().type_costs(pi, 0);
  const StageShape last = shape(1, 2, 2, 2, 0);
  const StageCost before = model().stage_cost(pi, t0, last);
  const StageCost first_before = model().stage_cost(pi, t0, shape(0, 0, 2, 2, -1));
  workload.model.mtp_layers = 2;
  const CostModel cm = model();
  const TypeCosts tc = cm.type_costs(pi, 0);
  EXPECT_REL(tc.mtp_params, (2.0 * kH * kH + 3 * kH) / 2);
  const StageCost after = cm.stage_cost(pi, tc, last);
  EXPECT_REL(after.fwd_s - before.fwd_s, 2 * (tc.moe.fwd_s + 3e-5 + tc.output_fwd_s));
  EXPECT_REL(after.bwd_s - before.bwd_s, 2 * (tc.moe.bwd_s + 6e-5 + tc.output_bwd_s));
  EXPECT_REL(after.fwd_parts.total(), after.fwd_s);
  const double dense = 2 * (tc.moe.dense_params + tc.mtp_params) + tc.embedding_params;
  const double expert = 2 * tc.moe.expert_params;
  EXPECT_REL(after.memory.weights - before.memory.weights, (dense + expert) * 2);
  EXPECT_REL(after.memory.activations - before.memory.activations,
             2 * tc.moe.act_bytes * after.in_flight * tc.activation_scale);
  const StageCost first_after = cm.stage_cost(pi, tc, shape(0, 0, 2, 2, -1));
  EXPECT_EQ(first_after.fwd_s, first_before.fwd_s);
  EXPECT_EQ(first_after.memory.total(), first_before.memory.total());
}

// The embedding, the output layer and the logits have the padded
// vocabulary's rows: V = 32000 at TP 4 pads to 32256 (a multiple of 512).
TEST_F(CostTerms, PaddedVocabularyInParametersAndLogits) {
  const ParallelConfig pi = config(2, 4, 1, 1, 1, 2);
  const TypeCosts tc = model().type_costs(pi, 0);
  EXPECT_REL(tc.output_params, 32256.0 * kH / 4);
  EXPECT_REL(tc.embedding_params, 32256.0 * kH / 4);
  EXPECT_REL(tc.logits_bytes, 1.0 * kS * 32256.0 / 4 * 6);
  workload.model.vocab_divisible_by = 1;
  EXPECT_REL(model().type_costs(pi, 0).output_params, kV * kH / 4);
}

// Megatron-FSDP (docs/costmodel.md, "Sharded data parallelism"). ZeRO-2:
// gradients sharded over each group, plus one layer's being reduced; each
// micro-batch's backward reduce-scatters (one collective per layer and
// group), hidden behind the backward but for one layer's; after the step
// only the parameter all-gather. ZeRO-3: parameters sharded too, plus two
// layers gathered (computing and prefetched); gathered before each layer's
// forward and again before its backward; nothing after the step.
TEST_F(CostTerms, MegatronFsdpShardsAndCommunicatesPerMicroBatch) {
  const ParallelConfig pi = config(1, 2, 2, 4, 1, 2);  // d = DP·CP = 4, EDP = 2
  const StageShape sh = shape(0, 0, 4, 4, -1);
  const TypeCosts tc0 = model().type_costs(pi, 0);
  const StageCost off = model().stage_cost(pi, tc0, sh);
  const double pd = 4 * tc0.moe.dense_params + tc0.embedding_params + tc0.output_params;
  const double pe = 4 * tc0.moe.expert_params;
  const double unit = tc0.moe.dense_params + tc0.moe.expert_params;
  const double shard = pd / 4 + pe / 2;
  auto per_layer = [&](const SyncCost& d, const SyncCost& e) {
    return 4 * d.latency_s + pd * d.s_per_param + 4 * e.latency_s + pe * e.s_per_param;
  };
  const double rs = per_layer(tc0.dp_reduce, tc0.edp_reduce);
  const double ag = per_layer(tc0.dp_gather, tc0.edp_gather);
  {
    workload.training.fsdp = Fsdp::kOptimGrads;
    const CostModel cm = model();
    const TypeCosts tc = cm.type_costs(pi, 0);
    EXPECT_REL(tc.layer_unit_params, unit);
    const StageCost s = cm.stage_cost(pi, tc, sh);
    EXPECT_REL(s.memory.gradients, (shard + unit) * 4);
    EXPECT_EQ(s.memory.weights, off.memory.weights);
    EXPECT_EQ(s.memory.optimizer, off.memory.optimizer);
    EXPECT_EQ(s.fwd_s, off.fwd_s);
    EXPECT_REL(s.bwd_s, off.bwd_s + std::max(rs / 4, rs - off.bwd_s));
    EXPECT_REL(s.bwd_parts.dp, std::max(rs / 4, rs - off.bwd_s));
    EXPECT_REL(s.dp_sync_s, tc.dp_gather.time(pd) + tc.edp_gather.time(pe));
  }
  {
    workload.training.fsdp = Fsdp::kOptimGradsParams;
    const CostModel cm = model();
    const StageCost s = cm.stage_cost(pi, cm.type_costs(pi, 0), sh);
    EXPECT_REL(s.memory.weights, (shard + 2 * unit) * 2);
    EXPECT_REL(s.memory.gradients, (shard + unit) * 4);
    EXPECT_REL(s.fwd_s, off.fwd_s + std::max(ag / 4, ag - off.fwd_s));
    EXPECT_REL(s.bwd_s, off.bwd_s + std::max((ag + rs) / 4, ag + rs - off.bwd_s));
    EXPECT_EQ(s.dp_sync_s, 0.0);
    EXPECT_REL(s.fwd_parts.total(), s.fwd_s);
    EXPECT_REL(s.bwd_parts.total(), s.bwd_s);
  }
  // FSDP shards the optimizer states as well: without the distributed
  // optimizer it is refused.
  workload.training.distributed_optimizer = false;
  EXPECT_NE(validate(workload.training, workload.model).find("fsdp"), std::string::npos);
}

// Optimizer CPU offload (docs/costmodel.md, "Optimizer CPU offload"): the
// host keeps 16 B per offloaded parameter of the local shard; the device
// keeps the rest of the optimizer state; the step is the GPU's share plus,
// per offloaded parameter, the gradient down and the master up (4 B each
// on the host link) and a CPU Adam step streaming 28 B through the node's
// host memory, shared by its devices.
TEST_F(CostTerms, OptimizerCpuOffload) {
  const ParallelConfig pi = config(1, 2, 2, 4, 1, 2);  // d = DP·CP = 4, EDP = 2
  const double pd = 4 * (kAttnParams + kRouterParams) / 2 + kV * kH / 2 + kV * kH / 2;
  const double pe = 4 * kExpertParams / 4;
  const double shard = pd / 4 + pe / 2;
  const StageCost off = model().stage_cost(pi, model().type_costs(pi, 0), shape(0, 0, 4, 4, -1));
  workload.training.optimizer_offload_fraction = 0.25;
  DeviceSpec& d = cluster.pools[0].device;
  d.host_memory_bytes = 1e12;
  d.host_link_bandwidth = 50e9;
  d.host_memory_bandwidth = 100e9;
  const int per_node = cluster.pools[0].devices_per_node;
  ASSERT_EQ(per_node, 8);
  const CostModel cm = model();
  const StageCost s = cm.stage_cost(pi, cm.type_costs(pi, 0), shape(0, 0, 4, 4, -1));
  const double host_step = 2 * 4.0 / 50e9 + 28.0 * 8 / 100e9;
  EXPECT_REL(s.optimizer_s, shard * (0.75 * 3e-11 + 0.25 * host_step));
  EXPECT_REL(s.host_bytes, shard * 0.25 * 16);
  EXPECT_REL(s.host_capacity_bytes, 1e12 / 8);
  EXPECT_REL(s.memory.optimizer, 0.75 * off.memory.optimizer);
  EXPECT_EQ(s.memory.weights, off.memory.weights);
  EXPECT_EQ(s.memory.gradients, off.memory.gradients);  // the grad buffer stays on the device
  EXPECT_EQ(s.fwd_s, off.fwd_s);
  EXPECT_EQ(off.host_bytes, 0.0);
  EXPECT_TRUE(s.fits() == (s.memory.total() <= s.capacity_bytes));
  // A bound over the fractions [0.25, 0.75] (engine/job_space.cpp): the
  // device memory of 0.75, the host memory and the step of 0.25 (the host
  // steps slower here); each term no more than at any fraction between.
  workload.training.offload_range_to = 0.75;
  const CostModel range = model();
  const StageCost r = range.stage_cost(pi, range.type_costs(pi, 0), shape(0, 0, 4, 4, -1));
  EXPECT_REL(r.memory.optimizer, 0.25 * off.memory.optimizer);
  EXPECT_EQ(r.optimizer_s, s.optimizer_s);
  EXPECT_EQ(r.host_bytes, s.host_bytes);
  EXPECT_EQ(r.fwd_s, s.fwd_s);
  // ... and the faster end when the host steps faster than the device.
  cluster.pools[0].device.host_memory_bandwidth = 1e18;
  cluster.pools[0].device.host_link_bandwidth = 1e18;
  const CostModel fast_host = model();
  EXPECT_REL(
      fast_host.stage_cost(pi, fast_host.type_costs(pi, 0), shape(0, 0, 4, 4, -1)).optimizer_s,
      shard * (0.25 * 3e-11 + 0.75 * (2 * 4.0 / 1e18 + 28.0 * 8 / 1e18)));
  workload.training.offload_range_to = 1.5;
  EXPECT_NE(validate(workload.training, workload.model).find("offload_range_to"),
            std::string::npos);
  workload.training.offload_range_to = 0;
  cluster.pools[0].device.host_link_bandwidth = 50e9;
  cluster.pools[0].device.host_memory_bandwidth = 100e9;
  // Host memory too small: the stage does not fit whatever its HBM.
  cluster.pools[0].device.host_memory_bytes = 8 * shard * 0.25 * 16 * 0.99;
  const CostModel small = model();
  EXPECT_FALSE(small.stage_cost(pi, small.type_costs(pi, 0), shape(0, 0, 4, 4, -1)).fits());
}

// Over a bound's range of offload fractions, a stage's optimizer step is
// costed at the least fraction at which it could fit with its least memory
// (every layer fully recomputed), not at the range's lower end: still no
// more than its step at any fraction of the range at which it fits with
// any recomputation. The per-layer tail bounds keep the lower end
// (TypeCosts::offload_step_at_fit = false), which is affine in the layers.
TEST_F(CostTerms, OffloadRangeStepsFromTheLeastFractionThatCanFit) {
  const ParallelConfig pi = config(1, 2, 2, 4, 1, 2);
  DeviceSpec& d = cluster.pools[0].device;
  d.host_memory_bytes = 1e13;
  d.host_link_bandwidth = 50e9;  // the host steps slower than the device
  d.host_memory_bandwidth = 100e9;
  const auto at = [&](double lo, double hi, const Recompute& r, double capacity,
                      bool step_at_fit = true) {
    workload.training.optimizer_offload_fraction = lo;
    workload.training.offload_range_to = hi;
    const CostModel cm = model();
    TypeCosts tc = cm.type_costs(pi, 0);
    tc.capacity_bytes = capacity;
    tc.offload_step_at_fit = step_at_fit;
    return cm.stage_cost(pi, tc,
                         shape(0, 0, 4, 4, -1, r, r.kind == RecomputeKind::kFull ? r.layers : 0));
  };
  const Recompute full{RecomputeKind::kFull, 4};
  // The capacity the fully recomputed stage needs at the fraction 0.5.
  const double capacity = at(0.5, 0, full, 0).memory.total();
  const StageCost range = at(0.25, 0.75, {}, capacity);
  const double lower_end = at(0.25, 0, {}, capacity).optimizer_s;
  EXPECT_REL(range.optimizer_s, at(0.5, 0, {}, capacity).optimizer_s);
  EXPECT_GT(range.optimizer_s, 1.5 * lower_end);
  EXPECT_EQ(at(0.25, 0.75, {}, capacity, false).optimizer_s, lower_end);
  // With room for everything, the lower end again.
  EXPECT_EQ(at(0.25, 0.75, {}, 1e18).optimizer_s, lower_end);
  int fitting = 0;
  std::vector<Recompute> all = {{},
                                {RecomputeKind::kSelective, 0, (1u << kNumRecomputeModules) - 1},
                                {RecomputeKind::kSelective, 0, kDefaultRecomputeModules}};
  for (int k = 1; k <= 4; ++k) all.push_back({RecomputeKind::kFull, k});
  for (int f = 5; f <= 15; ++f) {
    for (const Recompute& r : all) {
      const StageCost exact = at(f / 20.0, 0, r, capacity);
      if (!exact.fits()) continue;
      ++fitting;
      EXPECT_GE(exact.optimizer_s, range.optimizer_s * (1 - 1e-12)) << f << " " << to_string(r, 4);
      EXPECT_GE(exact.bwd_s, range.bwd_s);
    }
  }
  EXPECT_GT(fitting, 5);
}

// ===========================================================================
// least_recompute (docs/costmodel.md, "Recomputation").
// Dense model, hand per-type costs, PP = 2, position 0, 4 dense layers:
// fixed memory = 9 B/param · (4·50e6 + 16e6) + 2e9 overhead = 3.944e9 B;
// activations × (2 in flight × 1.25):
//   none 400e6 → 4.944e9    selective 320e6 → 4.744e9
//   full:1 310e6 → 4.719e9   full:2 220e6 → 4.494e9
//   full:3 130e6 → 4.269e9   full:4 40e6 → 4.044e9
// added time: selective 4·1e-4 = 4e-4; full:K K·1e-3.

class CostTermsLeastRecompute : public CostTerms {
 protected:
  std::optional<Recompute> pick(double capacity, TypeCosts tc = hand_type_costs(0)) {
    workload.model = dense_model();
    tc.capacity_bytes = capacity;
    const CostModel cm = model();
    return cm.least_recompute(config(2, 2, 1, 2, 1, 2), tc, shape(0, 0, 4, 0, -1));
  }
};

TEST_F(CostTermsLeastRecompute, NoneWhenItFits) {
  const auto r = pick(5.0e9);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->kind, RecomputeKind::kNone);
}

TEST_F(CostTermsLeastRecompute, SelectiveWhenCheapestThatFits) {
  // 4.8e9: selective and every full:K fit; selective adds least (4e-4 s)
  const auto r = pick(4.8e9);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->kind, RecomputeKind::kSelective);
}

TEST_F(CostTermsLeastRecompute, FullOneLayer) {
  // 4.73e9: selective (4.744e9) does not fit, full:1 (4.719e9) does
  const auto r = pick(4.73e9);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, (Recompute{RecomputeKind::kFull, 1}));
}

TEST_F(CostTermsLeastRecompute, FullTwoLayers) {
  const auto r = pick(4.6e9);  // full:1 4.719e9 no, full:2 4.494e9 yes
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, (Recompute{RecomputeKind::kFull, 2}));
}

TEST_F(CostTermsLeastRecompute, FullAllLayers) {
  const auto r = pick(4.05e9);  // only full:4 (4.044e9)
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, (Recompute{RecomputeKind::kFull, 4}));
}

TEST_F(CostTermsLeastRecompute, NothingFits) {
  EXPECT_FALSE(pick(4.0e9).has_value());  // below full:4 (4.044e9)
}

// The search's selective is what Megatron can run: core_attn alone under
// FP8 delayed scaling (no moe_act), core_attn + moe_act otherwise.
TEST(CostTermsRecompute, DefaultSelectiveFollowsTheFp8Recipe) {
  TrainingSpec t;
  EXPECT_EQ(default_selective_modules(t), kDefaultRecomputeModules);
  t.precision = Precision::kFp8;
  t.fp8_recipe = Fp8Recipe::kDelayed;
  EXPECT_EQ(default_selective_modules(t), module_bit(RecomputeModule::kCoreAttn));
  t.fp8_recipe = Fp8Recipe::kBlockwise;
  EXPECT_EQ(default_selective_modules(t), kDefaultRecomputeModules);
}

TEST_F(CostTermsLeastRecompute, FullCheaperThanSelectiveWins) {
  // Selective extra 5e-4 per layer: selective adds 2e-3 s, full:1 only 1e-3 s.
  TypeCosts tc = hand_type_costs(0);
  tc.dense.modules[static_cast<std::size_t>(RecomputeModule::kCoreAttn)].extra_s = 5e-4;
  const auto r = pick(4.8e9, tc);  // both fit
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, (Recompute{RecomputeKind::kFull, 1}));
}

TEST_F(CostTermsLeastRecompute, SelectiveWhenFullOneDoesNotFit) {
  // Selective keeps 60e6 per layer: selective 240e6 → 3.944e9 + 0.6e9 = 4.544e9,
  // full:1 still 4.719e9, full:2 4.494e9.
  TypeCosts tc = hand_type_costs(0);
  tc.dense.modules[static_cast<std::size_t>(RecomputeModule::kCoreAttn)].saved_bytes = 40e6;
  auto r = pick(4.6e9, tc);  // selective and full:2 fit; selective adds less
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->kind, RecomputeKind::kSelective);
  r = pick(4.5e9, tc);  // only full:2 and more
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, (Recompute{RecomputeKind::kFull, 2}));
}

// The evaluator takes the stage's cost from least_recompute_cost and asks
// fits_with_recompute where it only needs to know whether a choice fits:
// both must say what least_recompute and stage_cost say, per stage, under
// a job-wide setting and with activation offload too, for capacities from
// nothing fitting to everything fitting.
TEST_F(CostTermsLeastRecompute, TheChoiceComesWithItsCostAndFitsSaysWhetherOneFits) {
  workload.model = dense_model();
  const ParallelConfig pi = config(2, 2, 1, 2, 1, 2);
  const StageShape sh = shape(0, 0, 4, 0, -1);
  int fitting = 0;
  int not_fitting = 0;
  for (int setup = 0; setup < 3; ++setup) {
    workload.training.recompute.reset();
    workload.training.activation_offload_layers = 0;
    if (setup == 1) workload.training.recompute = RecomputeSetting{RecomputeKind::kFull, 2};
    if (setup == 2) {
      workload.training.activation_offload_layers = 2;
      cluster.pools[0].device.host_memory_bytes = 1e12;
      cluster.pools[0].device.host_link_bandwidth = 1e9;
    }
    const CostModel cm = model();
    for (double capacity = 3.9e9; capacity < 5.1e9; capacity += 0.02e9) {
      TypeCosts tc = hand_type_costs(0);
      tc.activation_offload_layers = workload.training.activation_offload_layers;
      tc.capacity_bytes = capacity;
      const std::optional<Recompute> r = cm.least_recompute(pi, tc, sh);
      const CostModel::RecomputeChoice choice = cm.least_recompute_cost(pi, tc, sh);
      EXPECT_EQ(choice.recompute, r) << setup << " " << capacity;
      EXPECT_EQ(cm.fits_with_recompute(pi, tc, sh), r.has_value()) << setup << " " << capacity;
      StageShape under = sh;
      under.recompute = r.value_or(Recompute{RecomputeKind::kFull, sh.layers});
      if (under.recompute.kind == RecomputeKind::kFull) {
        under.moe_in_first_recomputed = cm.moe_layers_in(0, under.recompute.layers);
      }
      const StageCost c = cm.stage_cost(pi, tc, under);
      EXPECT_EQ(choice.cost.fwd_s, c.fwd_s);
      EXPECT_EQ(choice.cost.bwd_s, c.bwd_s);
      EXPECT_EQ(choice.cost.recompute_s, c.recompute_s);
      EXPECT_EQ(choice.cost.memory.total(), c.memory.total());
      (r ? fitting : not_fitting) += 1;
    }
  }
  EXPECT_GT(fitting, 20);
  EXPECT_GT(not_fitting, 5);
}

TEST_F(CostTerms, LeastRecomputeCountsMoeLayersAmongTheFirstK) {
  // Model layers 0,1,0,1; stage = layers 1..3 (MoE, dense, MoE) at position 0.
  // Recomputing the first layer frees a MoE layer: 200e6 − 10e6.
  workload.model = moe_model({0, 1, 0, 1});
  TypeCosts tc = hand_type_costs(0);
  // fixed: weights+grads+opt = 2·306e6 + 4·306e6 + (3·106e6 + 6·200e6) = 3.354e9,
  // + buffer 30e6 + overhead 2e9 = 5.384e9. Activations × 2 × 1.25:
  //   none (100 + 400)e6 → 6.634e9; selective 380e6 → 6.334e9; full:1 310e6 → 6.159e9
  tc.capacity_bytes = 6.2e9;
  const CostModel cm = model();
  const auto r = cm.least_recompute(config(2, 2, 1, 2, 1, 2), tc, shape(0, 1, 3, 2, -1));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, (Recompute{RecomputeKind::kFull, 1}));
}

// ===========================================================================
// Iteration (docs/costmodel.md, "Iteration (1F1B)")

TEST(CostTermsIteration, EdgeMiddleAndSlowestSync) {
  std::vector<StageCost> st(3);
  auto set = [&](int i, double f, double b, double sync, double opt) {
    st[static_cast<std::size_t>(i)].fwd_s = f;
    st[static_cast<std::size_t>(i)].bwd_s = b;
    st[static_cast<std::size_t>(i)].dp_sync_s = sync;
    st[static_cast<std::size_t>(i)].optimizer_s = opt;
  };
  set(0, 1.0, 2.0, 0.5, 0.0);
  set(1, 1.5, 2.5, 0.4, 0.2);
  set(2, 0.5, 1.0, 0.3, 0.05);
  const IterationBreakdown it = iteration_latency(st, 8);
  // T_edge = Σ (t_f + t_b) = 3 + 4 + 1.5
  EXPECT_REL(it.edge_s, 8.5);
  // T_middle = (M − 1)·max (t_f + t_b) = 7·4
  EXPECT_REL(it.middle_s, 28.0);
  // sync + optimizer of the stage with the largest sum: stage 1 (0.6), not stage 0
  // with the largest sync alone (0.5)
  EXPECT_REL(it.dp_sync_s, 0.4);
  EXPECT_REL(it.optimizer_s, 0.2);
  EXPECT_REL(it.total(), 8.5 + 28.0 + 0.6);
  // M = 1: no middle
  EXPECT_EQ(iteration_latency(st, 1).middle_s, 0.0);
}

// ===========================================================================
// evaluate() on a 2-stage heterogeneous plan, every number from the doc.
// Model layers 0,1,0,1 (dense, MoE, dense, MoE). PP = 2, TP = 2, CP = 1,
// EP = 2, TPE = 1, DP = 2, b = 1: stages of 4 devices, EDP = 2, M = 32.
// Stage 0: type 0, layers 0..2, no recomputation. Stage 1: type 1, layer 3,
// full recomputation of its one layer.

struct DocLayerTimes {
  double dense_fwd, dense_bwd, moe_fwd, moe_bwd;
};

// Per the doc's layer formulas for this plan on hand tables; `x` the
// device's routed experts at t_sp = 512, EP = 2, TPE = 1 (hand_experts).
DocLayerTimes doc_layer_times(const ComputeEntry& e, const HandExperts& x, double ag_bw,
                              double rs_bw, double a2a_bw, double lat, double eta, double hbm) {
  const double n_tp = 1024.0 * kH * 2;  // b·S/CP·H·β
  const double tp_block = ring(n_tp, 2, ag_bw, lat) + ring(n_tp, 2, rs_bw, lat);
  const double routed = 512.0 * kK * kH * 2;  // t_sp·k·H·β, t_sp = 512
  const double exchange = 2 * ring(routed, 2, a2a_bw, lat);
  const double w_local = kE / 2 * 3 * kH * kFe / 1 * 2;  // (E/EP)·m·H·F_e/TPE·β
  const double experts_fwd = std::max(x.fwd * kImb / eta, w_local / hbm) + x.fixed_fwd;
  const double experts_bwd = std::max(x.bwd * kImb / eta, 2 * w_local / hbm) + x.fixed_bwd;
  DocLayerTimes t;
  t.dense_fwd = e.attention_fwd + e.dense_mlp_fwd + 2 * tp_block;
  t.dense_bwd = e.attention_bwd + e.dense_mlp_bwd + 2 * tp_block;
  t.moe_fwd = e.attention_fwd + e.router_fwd + experts_fwd + e.shared_fwd + tp_block + exchange;
  t.moe_bwd = e.attention_bwd + e.router_bwd + experts_bwd + e.shared_bwd + tp_block + exchange;
  return t;
}

TEST_F(CostTerms, EvaluateTwoStageHeterogeneousPlan) {
  workload.model = moe_model({0, 1, 0, 1});
  Plan plan;
  plan.parallel = config(2, 2, 1, 2, 1, 2);
  plan.stages = {{0, 3, {RecomputeKind::kNone, 0}}, {1, 1, {RecomputeKind::kFull, 1}}};
  const CostModel cm = model();
  const PlanReport r = cm.evaluate(plan);

  // Layers: type 0 links intra (AG 80e9, RS 50e9, A2A 40e9, 1 µs), η 0.8, W 1e12;
  // type 1 intra (AG 40e9, RS 25e9, A2A 20e9, 2 µs), η 0.5, W 0.5e12.
  // Routed experts: 4 local experts of 512·2/4 = 256 rows (hand_experts).
  const DocLayerTimes a =
      doc_layer_times(entry_a(), hand_experts_a(512, 2, 1), 80e9, 50e9, 40e9, 1e-6, 0.8, 1e12);
  const DocLayerTimes b =
      doc_layer_times(entry_b(), hand_experts_b(512, 2, 1), 40e9, 25e9, 20e9, 2e-6, 0.5, 0.5e12);
  // Stage 0: dense + MoE + dense + embedding.
  const double f0 = 2 * a.dense_fwd + a.moe_fwd + entry_a().embedding_fwd;
  const double b0 = 2 * a.dense_bwd + a.moe_bwd + entry_a().embedding_bwd;
  // Stage 1: MoE + output + cross-type p2p of b·S/(CP·TP)·H·β (0.5e9, 5 µs);
  // full recomputation adds the layer's forward to the backward.
  const double boundary = p2p(512.0 * kH * 2, 0.5e9, 5e-6);
  const double f1 = b.moe_fwd + entry_b().output_fwd + boundary;
  const double b1 = b.moe_bwd + entry_b().output_bwd + boundary + b.moe_fwd;
  // Gradient sync (stage link span 4 → intra on both types): RS 4 B + AG 2 B per param
  // over DP·CP = 2 (non-expert) and EDP = 2 (expert); optimizer on the shard.
  const double pd0 =
      2 * (kAttnParams + kDenseMlpParams) / 2 + (kAttnParams + kRouterParams) / 2 + kV * kH / 2;
  const double pd1 = (kAttnParams + kRouterParams) / 2 + kV * kH / 2;
  const double pe = kExpertParams / 2;  // one MoE layer per stage, EP = 2
  const double sync0 = ring(4 * pd0, 2, 50e9, 1e-6) + ring(2 * pd0, 2, 80e9, 1e-6) +
                       ring(4 * pe, 2, 50e9, 1e-6) + ring(2 * pe, 2, 80e9, 1e-6);
  const double sync1 = ring(4 * pd1, 2, 25e9, 2e-6) + ring(2 * pd1, 2, 40e9, 2e-6) +
                       ring(4 * pe, 2, 25e9, 2e-6) + ring(2 * pe, 2, 40e9, 2e-6);
  const double opt0 = (pd0 / 2 + pe / 2) * 3e-11;
  const double opt1 = (pd1 / 2 + pe / 2) * 6e-11;

  ASSERT_EQ(r.stages.size(), 2u);
  EXPECT_EQ(r.num_microbatches, 32);
  EXPECT_REL(r.stages[0].cost.fwd_s, f0);
  EXPECT_REL(r.stages[0].cost.bwd_s, b0);
  EXPECT_REL(r.stages[1].cost.fwd_s, f1);
  EXPECT_REL(r.stages[1].cost.bwd_s, b1);
  EXPECT_REL(r.stages[0].cost.dp_sync_s, sync0);
  EXPECT_REL(r.stages[1].cost.dp_sync_s, sync1);
  EXPECT_REL(r.stages[0].cost.optimizer_s, opt0);
  EXPECT_REL(r.stages[1].cost.optimizer_s, opt1);

  // T_iter = Σ(t_f + t_b) + (M − 1)·max(t_f + t_b) + max(sync + opt)
  const double latency = (f0 + b0) + (f1 + b1) + 31 * std::max(f0 + b0, f1 + b1) +
                         std::max(sync0 + opt0, sync1 + opt1);
  EXPECT_REL(r.latency_s, latency);
  EXPECT_EQ(r.bottleneck_stage, f0 + b0 >= f1 + b1 ? 0 : 1);
  EXPECT_TRUE(r.fits);

  // The breakdown (docs/costmodel.md, "Breakdown"): each step's parts add
  // up to it; the boundary is the p2p part, the recomputed forward the
  // recompute part; the bubble is what the bottleneck stage waits.
  for (const StageReport& st : r.stages) {
    EXPECT_REL(st.cost.fwd_parts.total(), st.cost.fwd_s);
    EXPECT_REL(st.cost.bwd_parts.total(), st.cost.bwd_s);
    EXPECT_EQ(st.cost.bwd_parts.cp, 0.0);  // CP = 1
  }
  EXPECT_EQ(r.stages[0].cost.fwd_parts.p2p, 0.0);
  EXPECT_REL(r.stages[1].cost.fwd_parts.p2p, boundary);
  EXPECT_REL(r.stages[1].cost.bwd_parts.recompute, b.moe_fwd);
  // Stage 0: two dense layers (two TP blocks each) and one MoE layer (one
  // block and one dispatch + combine) on type 0's intra-node link.
  const double tp_block0 =
      ring(1024.0 * kH * 2, 2, 80e9, 1e-6) + ring(1024.0 * kH * 2, 2, 50e9, 1e-6);
  EXPECT_REL(r.stages[0].cost.fwd_parts.tp, 5 * tp_block0);
  EXPECT_REL(r.stages[0].cost.bwd_parts.tp, 5 * tp_block0);
  EXPECT_REL(r.stages[0].cost.fwd_parts.ep, 2 * ring(512.0 * kK * kH * 2, 2, 40e9, 1e-6));
  EXPECT_REL(r.breakdown.step_s, std::max(f0 + b0, f1 + b1));
  EXPECT_REL(r.breakdown.bubble_s(), (f0 + b0) + (f1 + b1) - std::max(f0 + b0, f1 + b1));

  // Model FLOPs per iteration = 3 × forward, per token: each layer 2·(attention
  // projection params) + 2·(S/2)·a·(d_qk + d_v); dense layers 2·m·H·F; MoE layers
  // 2·H·E + 2·m·H·(k·F_e + F_s); output 2·H·V.
  const double per_token = 4 * (2 * kAttnProj + 2 * (kS / 2) * kA * (kD + kD)) +
                           2 * (2 * 3 * kH * kF) + 2 * (2 * kH * kE + 2 * 3 * kH * (kK * kFe)) +
                           2 * kH * kV;
  const double flops = 3 * per_token * kS * 64;
  // tokens/s = B·S / T
  EXPECT_REL(r.throughput_tokens_per_s, 64 * kS / latency);
  // TFLOP/s per device: 8 devices in use
  EXPECT_REL(r.tflops_per_device, flops / latency / 8 / 1e12);
  // MFU with per-type peaks: 4·100e12 + 4·50e12
  EXPECT_REL(r.mfu, flops / (latency * (4 * 100e12 + 4 * 50e12)));
}

// ===========================================================================
// Interleaved 1F1B (docs/costmodel.md, "Interleaved 1F1B" and "Stage"):
// v = parallel.vpp virtual stages per pipeline rank.

ParallelConfig with_vpp(ParallelConfig pi, int vpp) {
  pi.vpp = vpp;
  return pi;
}

TEST(CostTermsIteration, InterleavedEdgeIsStepPlusTheRestOverV) {
  std::vector<StageCost> st(3);
  const double f[] = {1.0, 1.5, 0.5}, b[] = {2.0, 2.5, 1.0};
  for (std::size_t i = 0; i < 3; ++i) {
    st[i].fwd_s = f[i];
    st[i].bwd_s = b[i];
    st[i].dp_sync_s = 0.1 * static_cast<double>(i);
    st[i].optimizer_s = 0.05;
  }
  // Σ (t_f + t_b) = 3 + 4 + 1.5 = 8.5, step = max = 4, M = 8.
  const IterationBreakdown plain = iteration_latency(st, 8);
  EXPECT_REL(plain.edge_s, 8.5);
  EXPECT_REL(plain.bubble_s(), 4.5);
  // vpp = 1 is plain 1F1B, bit for bit.
  const IterationBreakdown one = iteration_latency(st, 8, 1);
  EXPECT_EQ(one.edge_s, plain.edge_s);
  EXPECT_EQ(one.middle_s, plain.middle_s);
  EXPECT_EQ(one.total(), plain.total());
  // T_edge = step + (Σ − step)/v: v = 2 → 4 + 4.5/2 = 6.25; v = 3 → 4 + 4.5/3 = 5.5.
  const IterationBreakdown two = iteration_latency(st, 8, 2);
  const IterationBreakdown three = iteration_latency(st, 8, 3);
  EXPECT_REL(two.edge_s, 4.0 + (8.5 - 4.0) / 2);
  EXPECT_REL(two.edge_s, 6.25);
  EXPECT_REL(three.edge_s, 5.5);
  // The bubble (edge − step) shrinks v-fold; the middle, step, sync and
  // optimizer do not change.
  EXPECT_REL(two.bubble_s(), plain.bubble_s() / 2);
  EXPECT_REL(three.bubble_s(), plain.bubble_s() / 3);
  for (const IterationBreakdown* it : {&two, &three}) {
    EXPECT_EQ(it->step_s, plain.step_s);
    EXPECT_EQ(it->middle_s, plain.middle_s);
    EXPECT_REL(it->middle_s, 7 * 4.0);
    EXPECT_EQ(it->dp_sync_s, plain.dp_sync_s);
    EXPECT_EQ(it->optimizer_s, plain.optimizer_s);
  }
  EXPECT_REL(two.total(), 6.25 + 28.0 + 0.2 + 0.05);
  // One stage: no bubble whatever v.
  const std::vector<StageCost> single(st.begin(), st.begin() + 1);
  EXPECT_REL(iteration_latency(single, 8, 4).edge_s, 3.0);
  // vpp < 1 is a contract violation.
  EXPECT_THROW(iteration_latency(st, 8, 0), ContractError);
}

TEST_F(CostTerms, InterleavedStagePointToPointIsVFold) {
  // PP = 4, TP = 2, EP = 2, DP = 2: stages of 4 devices. b·S/(CP·TP)·H·β =
  // 1,048,576 B per boundary crossing.
  const ParallelConfig pi = config(4, 2, 1, 2, 1, 2);
  const TypeCosts tc0 = hand_type_costs(0);
  const TypeCosts tc1 = hand_type_costs(1);
  const CostModel cm = model();
  const double n = 512.0 * kH * 2;
  const double intra0 = p2p(n, 25e9, 1e-6);    // type 0, 4 < 8 per node
  const double inter1 = p2p(n, 1.25e9, 4e-6);  // type 1, 4 = a node: across nodes
  const double cross = p2p(n, 0.5e9, 5e-6);    // types 0 and 1
  {
    // Middle stage from a type-0 predecessor: v = 2 crossings each way.
    const StageCost plain = cm.stage_cost(pi, tc0, shape(1, 3, 2, 1, 0));
    const StageCost s = cm.stage_cost(with_vpp(pi, 2), tc0, shape(1, 3, 2, 1, 0));
    EXPECT_REL(plain.p2p_fwd_s, intra0);
    EXPECT_REL(s.p2p_fwd_s, 2 * intra0);
    EXPECT_REL(s.p2p_bwd_s, 2 * intra0);
    EXPECT_REL(s.fwd_parts.p2p, 2 * intra0);
    EXPECT_REL(s.bwd_parts.p2p, 2 * intra0);
    EXPECT_REL(s.fwd_s, 1e-3 + 1.5e-3 + 2 * intra0);
    EXPECT_REL(s.bwd_s, 2e-3 + 3e-3 + 2 * intra0);
  }
  {
    // A type-0 stage after a type-1 stage, v = 3: three crossings of the
    // cross-type link.
    const StageCost s = cm.stage_cost(with_vpp(pi, 3), tc0, shape(2, 5, 1, 1, 1));
    EXPECT_REL(s.p2p_fwd_s, 3 * cross);
    EXPECT_REL(s.p2p_bwd_s, 3 * cross);
  }
  {
    // The last stage: v crossings too (and its output layer).
    const StageCost s = cm.stage_cost(with_vpp(pi, 2), tc0, shape(3, 3, 1, 1, 0));
    EXPECT_REL(s.fwd_s, 1.5e-3 + 5e-4 + 2 * intra0);
  }
  {
    // The first stage: plain 1F1B receives nothing; with v virtual stages
    // it receives v − 1 times, from the last rank, costed on its own type's
    // link (type 0: intra; type 1: a stage fills a node, across nodes).
    EXPECT_EQ(cm.stage_cost(pi, tc0, shape(0, 0, 3, 2, -1)).p2p_fwd_s, 0.0);
    const StageCost s0 = cm.stage_cost(with_vpp(pi, 2), tc0, shape(0, 0, 3, 2, -1));
    EXPECT_REL(s0.p2p_fwd_s, 1 * intra0);
    EXPECT_REL(s0.p2p_bwd_s, 1 * intra0);
    EXPECT_REL(s0.fwd_s, 1e-3 + 2 * 1.5e-3 + 1e-4 + intra0);
    const StageCost s1 = cm.stage_cost(with_vpp(pi, 3), tc1, shape(0, 0, 3, 2, -1));
    EXPECT_REL(s1.p2p_fwd_s, 2 * inter1);
    EXPECT_REL(s1.p2p_bwd_s, 2 * inter1);
  }
}

TEST_F(CostTerms, InterleavedInFlightAndActivationMemory) {
  // PP = 4, DP = 2: M = 64/2 = 32. Interleaved 1F1B keeps
  // min(2(PP − i − 1) + (v − 1)·PP + 1, M·v) virtual-stage micro-batches of
  // n_i/v layers: activations = act · in_flight / v · scale.
  const ParallelConfig pi = config(4, 2, 1, 2, 1, 2);
  const TypeCosts tc = hand_type_costs(0);
  const CostModel cm = model();
  ASSERT_EQ(cm.num_microbatches(pi), 32);
  struct Case {
    int vpp;
    int in_flight[4];
  };
  const Case cases[] = {
      {1, {4, 3, 2, 1}},    // plain: PP − i
      {2, {11, 9, 7, 5}},   // 2(3 − i) + 4 + 1
      {3, {15, 13, 11, 9}}  // 2(3 − i) + 8 + 1
  };
  for (const Case& cs : cases) {
    for (int i = 0; i < 4; ++i) {
      SCOPED_TRACE(testing::Message() << "vpp " << cs.vpp << ", position " << i);
      // One dense layer: 100e6 B of activations per micro-batch, scale 1.25.
      const StageCost s =
          cm.stage_cost(with_vpp(pi, cs.vpp), tc, shape(i, i, 1, 0, i == 0 ? -1 : 0));
      EXPECT_EQ(s.in_flight, cs.in_flight[i]);
      EXPECT_REL(s.memory.activations, 100e6 * cs.in_flight[i] / cs.vpp * 1.25);
    }
  }
  // The stage's whole activations: one dense + two MoE layers at position 0,
  // v = 2: (100e6 + 2·200e6)·11/2·1.25.
  const StageCost s = cm.stage_cost(with_vpp(pi, 2), tc, shape(0, 0, 3, 2, -1));
  EXPECT_REL(s.memory.activations, 500e6 * 11 / 2 * 1.25);
  // Few micro-batches: PP = 2, B = 4, DP = 2 → M = 2, v = 3 → at most
  // M·v = 6: position 0 min(2 + 4 + 1, 6) = 6, position 1 min(0 + 4 + 1, 6) = 5.
  workload.training.global_batch = 4;
  const CostModel few = model();
  const ParallelConfig pi2 = with_vpp(config(2, 2, 1, 2, 1, 2), 3);
  ASSERT_EQ(few.num_microbatches(pi2), 2);
  const StageCost f0 = few.stage_cost(pi2, tc, shape(0, 0, 1, 0, -1));
  const StageCost f1 = few.stage_cost(pi2, tc, shape(1, 1, 1, 0, 0));
  EXPECT_EQ(f0.in_flight, 6);
  EXPECT_EQ(f1.in_flight, 5);
  EXPECT_REL(f0.memory.activations, 100e6 * 6 / 3 * 1.25);
  EXPECT_REL(f1.memory.activations, 100e6 * 5 / 3 * 1.25);
}

// ===========================================================================
// Overlaps (docs/costmodel.md, "Overlap"), each against the same workload
// without it.

// Gradient reduction on the hand per-type costs: dense 1e-5 + n·1e-10, expert
// 2e-5 + n·2e-10. Stage 0 (one dense + two MoE layers + embedding) holds
// 106e6 non-expert and 200e6 expert parameters; its backward step is
// 2e-3 + 2·3e-3 + 2e-4 = 8.2e-3 s. Megatron's bucket: max(40e6, 1e6·DP).
double dense_reduce(double params) { return params > 0 ? 1e-5 + params * 1e-10 : 0.0; }
double expert_reduce(double params) { return params > 0 ? 2e-5 + params * 2e-10 : 0.0; }

TEST_F(CostTerms, OverlapGradReduceExposesTheLastBucketOrWhatExceedsTheBackward) {
  const ParallelConfig pi = config(4, 2, 1, 2, 1, 2);  // DP = 2: bucket 40e6
  TypeCosts tc = hand_type_costs(0);
  const double whole = dense_reduce(106e6) + expert_reduce(200e6);        // 0.05063 s
  const double last = std::max(dense_reduce(40e6), expert_reduce(40e6));  // 8.02e-3 s
  const StageCost off = model().stage_cost(pi, tc, shape(0, 0, 3, 2, -1));
  EXPECT_REL(off.dp_sync_s, whole);
  EXPECT_EQ(off.dp_hidden_s, 0.0);
  workload.training.overlap.grad_reduce = true;
  const CostModel cm = model();
  {
    // The whole reduction exceeds the backward step by more than the last
    // bucket: the excess is exposed, the backward step's worth hidden.
    const double bwd = 2e-3 + 2 * 3e-3 + 2e-4;
    ASSERT_GT(whole - bwd, last);
    const StageCost s = cm.stage_cost(pi, tc, shape(0, 0, 3, 2, -1));
    EXPECT_REL(s.bwd_s, bwd);
    EXPECT_REL(s.dp_sync_s, whole - bwd);
    EXPECT_REL(s.dp_sync_s, 0.04243);
    EXPECT_REL(s.dp_hidden_s, bwd);
    // Nothing else moves.
    EXPECT_EQ(s.fwd_s, off.fwd_s);
    EXPECT_EQ(s.bwd_s, off.bwd_s);
    EXPECT_EQ(s.optimizer_s, off.optimizer_s);
    EXPECT_EQ(s.memory.total(), off.memory.total());
  }
  {
    // A backward longer than the whole reduction: only the last bucket is
    // exposed (the expert one, 2e-5 + 40e6·2e-10 = 8.02e-3 s).
    tc.moe.bwd_s = 0.05;  // backward 2e-3 + 0.1 + 2e-4 = 0.1022 s
    const StageCost s = cm.stage_cost(pi, tc, shape(0, 0, 3, 2, -1));
    ASSERT_LT(whole - s.bwd_s, last);
    EXPECT_REL(s.dp_sync_s, last);
    EXPECT_REL(s.dp_sync_s, 8.02e-3);
    EXPECT_REL(s.dp_hidden_s, whole - 8.02e-3);
  }
  {
    // Fewer parameters than a bucket: the last bucket is the whole
    // reduction, nothing is hidden (two dense layers of 15e6 parameters).
    tc.dense.dense_params = 15e6;
    const StageCost s = cm.stage_cost(pi, tc, shape(1, 3, 2, 0, 0));
    EXPECT_REL(s.dp_sync_s, dense_reduce(30e6));
    EXPECT_EQ(s.dp_hidden_s, 0.0);
  }
}

TEST_F(CostTerms, OverlapGradReduceBucketGrowsWithDp) {
  // DP = 64: the bucket is 1e6·64 = 64e6 > 40e6 parameters. With a long
  // backward the last bucket is exposed: max(1e-5 + 64e6·1e-10, 2e-5 +
  // 64e6·2e-10) = 1.282e-2 s (with 40e6 it would be 8.02e-3 s).
  workload.training.overlap.grad_reduce = true;
  TypeCosts tc = hand_type_costs(0);
  tc.moe.bwd_s = 0.05;
  const CostModel cm = model();
  const StageCost dp64 = cm.stage_cost(config(4, 2, 1, 2, 1, 64), tc, shape(0, 0, 3, 2, -1));
  EXPECT_REL(dp64.dp_sync_s, std::max(dense_reduce(64e6), expert_reduce(64e6)));
  EXPECT_REL(dp64.dp_sync_s, 1.282e-2);
  // DP = 40: 1e6·40 = 40e6, the floor; DP = 41: 41e6.
  EXPECT_REL(cm.stage_cost(config(4, 2, 1, 2, 1, 40), tc, shape(0, 0, 3, 2, -1)).dp_sync_s,
             expert_reduce(40e6));
  EXPECT_REL(cm.stage_cost(config(4, 2, 1, 2, 1, 41), tc, shape(0, 0, 3, 2, -1)).dp_sync_s,
             expert_reduce(41e6));
  // The dense buffer alone sets the last bucket when the stage has no
  // experts: one dense layer of 50e6 parameters and a long backward exposes
  // a 40e6 bucket at DP = 2, but all 50e6 (less than a bucket) at DP = 64.
  tc.dense.bwd_s = 0.05;
  const StageCost dp2 = cm.stage_cost(config(4, 2, 1, 2, 1, 2), tc, shape(1, 3, 1, 0, 0));
  const StageCost dense = cm.stage_cost(config(4, 2, 1, 2, 1, 64), tc, shape(1, 3, 1, 0, 0));
  ASSERT_GT(dense.bwd_s, dense_reduce(50e6));
  EXPECT_REL(dp2.dp_sync_s, dense_reduce(40e6));
  EXPECT_REL(dense.dp_sync_s, dense_reduce(50e6));
  EXPECT_EQ(dense.dp_hidden_s, 0.0);
}

TEST_F(CostTerms, OverlapParamGatherAgainstTheForwardStep) {
  // All-gather (distributed optimizer): dense 3e-5 + n·5e-11, expert
  // 4e-5 + n·1e-10. Stage 0's forward step: 1e-3 + 2·1.5e-3 + 1e-4 = 4.1e-3 s.
  const ParallelConfig pi = config(4, 2, 1, 2, 1, 2);
  TypeCosts tc = hand_type_costs(0);
  tc.dp_gather = {3e-5, 5e-11};
  tc.edp_gather = {4e-5, 1e-10};
  const double reduce = dense_reduce(106e6) + expert_reduce(200e6);
  const double gather = 3e-5 + 106e6 * 5e-11 + 4e-5 + 200e6 * 1e-10;       // 0.02537 s
  const double last = std::max(3e-5 + 40e6 * 5e-11, 4e-5 + 40e6 * 1e-10);  // 4.04e-3 s
  const double fwd = 1e-3 + 2 * 1.5e-3 + 1e-4;
  const double bwd = 2e-3 + 2 * 3e-3 + 2e-4;
  const StageCost off = model().stage_cost(pi, tc, shape(0, 0, 3, 2, -1));
  EXPECT_REL(off.dp_sync_s, reduce + gather);
  EXPECT_EQ(off.dp_hidden_s, 0.0);
  workload.training.overlap.param_gather = true;
  {
    const StageCost s = model().stage_cost(pi, tc, shape(0, 0, 3, 2, -1));
    ASSERT_GT(gather - fwd, last);
    // The reduction stays whole; the gather exposes what exceeds the forward.
    EXPECT_REL(s.dp_sync_s, reduce + (gather - fwd));
    EXPECT_REL(s.dp_hidden_s, fwd);
    EXPECT_EQ(s.fwd_s, off.fwd_s);
    EXPECT_EQ(s.bwd_s, off.bwd_s);
  }
  {
    // Both overlaps: each against its own step.
    workload.training.overlap.grad_reduce = true;
    const StageCost s = model().stage_cost(pi, tc, shape(0, 0, 3, 2, -1));
    EXPECT_REL(s.dp_sync_s, (reduce - bwd) + (gather - fwd));
    EXPECT_REL(s.dp_hidden_s, bwd + fwd);
    workload.training.overlap.grad_reduce = false;
  }
  {
    // A forward longer than the gather: the last bucket (the expert one).
    tc.moe.fwd_s = 0.02;  // forward 1e-3 + 0.04 + 1e-4 = 0.0411 s
    const StageCost s = model().stage_cost(pi, tc, shape(0, 0, 3, 2, -1));
    ASSERT_LT(gather - s.fwd_s, last);
    EXPECT_REL(s.dp_sync_s, reduce + last);
    EXPECT_REL(s.dp_sync_s, reduce + 4.04e-3);
    EXPECT_REL(s.dp_hidden_s, gather - 4.04e-3);
  }
}

// --tp-comm-overlap: per TP block, min(AG + RS, the block's GEMMs) is
// hidden, forward (GEMMs = the block's time without core attention) and
// backward (without 2.5× core attention).
TEST_F(CostTerms, TpCommOverlapHidesEachBlockUpToItsGemms) {
  workload.model = dense_model();
  const ParallelConfig pi = config(1, 2, 1, 1, 1, 4);
  const double n = 1024.0 * kH * 2;
  const double block = ring(n, 2, 80e9, 1e-6) + ring(n, 2, 50e9, 1e-6);  // 3.607872e-5 s
  const TypeCosts off = model().type_costs(pi, 0);
  EXPECT_EQ(off.dense.fwd_parts.tp_hidden, 0.0);
  EXPECT_EQ(off.dense.bwd_parts.tp_hidden, 0.0);
  workload.training.overlap.tp_comm = true;
  {
    // The hand entries' GEMMs (attention 1e-3 − 4e-4, MLP 2e-3; backward
    // 2.2e-3 − 2.5·4e-4, 4e-3) are all longer than a block's collectives:
    // every collective is hidden.
    const TypeCosts on = model().type_costs(pi, 0);
    EXPECT_REL(on.dense.fwd_parts.tp_hidden, 2 * block);
    EXPECT_REL(on.dense.bwd_parts.tp_hidden, 2 * block);
    EXPECT_EQ(on.dense.fwd_parts.tp, 0.0);
    EXPECT_EQ(on.dense.bwd_parts.tp, 0.0);
    EXPECT_REL(on.dense.fwd_s, off.dense.fwd_s - 2 * block);
    EXPECT_REL(on.dense.fwd_s, 1.0e-3 + 2.0e-3);
    EXPECT_REL(on.dense.bwd_s, 2.2e-3 + 4.0e-3);
    EXPECT_EQ(on.dense.fwd_parts.compute, off.dense.fwd_parts.compute);
    EXPECT_REL(on.dense.fwd_parts.total(), on.dense.fwd_s);
  }
  {
    // GEMMs shorter than the collectives: only the GEMMs' worth is hidden.
    ComputeEntry& e = tables.compute[0][{2, 1}];
    e.attention_fwd = e.core_attention_fwd + 1e-5;  // attention GEMMs 1e-5 s
    e.dense_mlp_fwd = 2e-5;                         // MLP 2e-5 s
    e.attention_bwd = e.core_attention_bwd + 5e-6;  // backward GEMMs 5e-6 s
    const double gemms_f_attn = e.attention_fwd - e.core_attention_fwd;
    const double gemms_b_attn = e.attention_bwd - e.core_attention_bwd;
    ASSERT_LT(gemms_f_attn, block);
    ASSERT_LT(e.dense_mlp_fwd, block);
    ASSERT_LT(gemms_b_attn, block);
    ASSERT_GT(e.dense_mlp_bwd, block);
    workload.training.overlap.tp_comm = false;
    const TypeCosts slow_off = model().type_costs(pi, 0);
    workload.training.overlap.tp_comm = true;
    const TypeCosts on = model().type_costs(pi, 0);
    const double hidden_f = gemms_f_attn + e.dense_mlp_fwd;
    const double hidden_b = gemms_b_attn + block;
    EXPECT_REL(on.dense.fwd_parts.tp_hidden, hidden_f);
    EXPECT_REL(on.dense.bwd_parts.tp_hidden, hidden_b);
    EXPECT_REL(on.dense.fwd_parts.tp, 2 * block - hidden_f);
    EXPECT_REL(on.dense.bwd_parts.tp, 2 * block - hidden_b);
    EXPECT_REL(on.dense.fwd_s, slow_off.dense.fwd_s - hidden_f);
    EXPECT_REL(on.dense.bwd_s, slow_off.dense.bwd_s - hidden_b);
    EXPECT_REL(on.dense.bwd_parts.total(), on.dense.bwd_s);
  }
}

TEST_F(CostTerms, TpCommOverlapInMoeLayersCoversAttentionAndSharedExperts) {
  const ParallelConfig pi = config(1, 2, 1, 1, 1, 2);
  const double n = 1024.0 * kH * 2;
  const double block = ring(n, 2, 80e9, 1e-6) + ring(n, 2, 50e9, 1e-6);
  workload.training.overlap.tp_comm = true;
  {
    // No shared experts: one block (attention); the routed experts have no
    // TP collectives to hide.
    const TypeCosts on = model().type_costs(pi, 0);
    EXPECT_REL(on.moe.fwd_parts.tp_hidden, block);
    EXPECT_REL(on.moe.bwd_parts.tp_hidden, block);
    EXPECT_EQ(on.moe.fwd_parts.tp, 0.0);
  }
  {
    // Shared experts with a short forward (1e-5 s < a block): the attention
    // block all, the shared block 1e-5 s; backward (6e-4 s) both blocks.
    workload.model.shared_expert_ffn_hidden = 1024;
    tables.compute[0][{2, 1}].shared_fwd = 1e-5;
    tables.compute[0][{2, 1}].shared_bwd = 6e-4;
    workload.training.overlap.tp_comm = false;
    const TypeCosts off = model().type_costs(pi, 0);
    workload.training.overlap.tp_comm = true;
    const TypeCosts on = model().type_costs(pi, 0);
    EXPECT_REL(on.moe.fwd_parts.tp_hidden, block + 1e-5);
    EXPECT_REL(on.moe.bwd_parts.tp_hidden, 2 * block);
    EXPECT_REL(on.moe.fwd_parts.tp, 2 * block - (block + 1e-5));
    EXPECT_REL(on.moe.fwd_s, off.moe.fwd_s - (block + 1e-5));
    EXPECT_REL(on.moe.bwd_s, off.moe.bwd_s - 2 * block);
    // The EP exchange is untouched by the TP overlap.
    EXPECT_EQ(on.moe.fwd_parts.ep, off.moe.fwd_parts.ep);
    EXPECT_EQ(on.moe.fwd_parts.ep_hidden, 0.0);
  }
}

TEST_F(CostTerms, TpCommOverlapHidesNothingWithoutTp) {
  workload.model.shared_expert_ffn_hidden = 1024;
  const ParallelConfig pi = config(1, 1, 1, 2, 1, 8);
  const TypeCosts off = model().type_costs(pi, 0);
  workload.training.overlap.tp_comm = true;
  const TypeCosts on = model().type_costs(pi, 0);
  for (const auto& [a, b] : {std::pair{&on.dense, &off.dense}, std::pair{&on.moe, &off.moe}}) {
    EXPECT_EQ(a->fwd_s, b->fwd_s);
    EXPECT_EQ(a->bwd_s, b->bwd_s);
    EXPECT_EQ(a->fwd_parts.tp_hidden, 0.0);
    EXPECT_EQ(a->bwd_parts.tp_hidden, 0.0);
  }
}

// --overlap-moe-expert-parallel-comm pairs one micro-batch's layer forward
// with another's layer backward in four phases (docs/costmodel.md,
// "Overlap"), each exchange half (dispatch or combine, ep/2) beside compute
// it does not wait for:
//   combine bwd  | attention fwd        dispatch fwd | experts bwd
//   dispatch bwd | experts fwd          combine fwd  | attention bwd
// so hidden_f = min(ep/2, mlp_b) + min(ep/2, cb − mlp_b) and
// hidden_b = min(ep/2, cf − mlp_f) + min(ep/2, mlp_f); the dispatcher's 20
// SMs slow the compute by hidden·20/(U − 20). Device A with U = 132 SMs:
// 20/112.
struct EpPhases {
  double hidden_f, hidden_b;
};
EpPhases ep_phases(const LayerCost& off, double ep, bool delay_wgrad) {
  const double half = ep / 2;
  const double cf = off.fwd_parts.compute;
  const double cb = off.bwd_parts.compute;
  const double w = delay_wgrad ? off.mlp_wgrad_s : 0.0;
  return {std::min(half, off.mlp_bwd_s - w) + std::min(half, cb - off.mlp_bwd_s),
          std::min(half, cf - off.mlp_fwd_s) + std::min(half, w + off.mlp_fwd_s)};
}

TEST_F(CostTerms, MoeEpCommOverlapHidesBehindTheOtherDirectionAndTakesSms) {
  cluster.pools[0].device.compute_units = 132;
  const double steal = 20.0 / 112.0;
  const ParallelConfig pi = config(1, 1, 1, 4, 1, 4);  // EP = 4 inside a node
  auto costs = [&](bool overlap) {
    workload.training.overlap.moe_ep_comm = overlap;
    return model().type_costs(pi, 0);
  };
  struct Case {
    const char* what;
    double a2a_bandwidth;
  };
  // The exchange (2 all-to-alls of 4,194,304 B over EP = 4) against the
  // layer's compute (forward ≈ 1.6e-3 s, backward ≈ 3.3e-3 s): shorter than
  // both, between the two, longer than both.
  const Case cases[] = {{"exchange shorter than both", 40e9},
                        {"exchange between forward and backward compute", 2.5e9},
                        {"exchange longer than both", 0.5e9}};
  for (const Case& cs : cases) {
    SCOPED_TRACE(cs.what);
    tables.comm.set(Primitive::kAllToAll, {LinkKind::kIntraNode, 0, 0}, {cs.a2a_bandwidth, 1e-6});
    const TypeCosts off = costs(false);
    const TypeCosts on = costs(true);
    const double ep = 2 * ring(1024.0 * kK * kH * 2, 4, cs.a2a_bandwidth, 1e-6);
    EXPECT_REL(off.moe.fwd_parts.ep, ep);
    EXPECT_REL(off.moe.bwd_parts.ep, ep);
    const double cf = off.moe.fwd_parts.compute;
    const double cb = off.moe.bwd_parts.compute;
    // The experts are part of the compute, their weight gradients part of
    // their backward; the overlap does not change them.
    EXPECT_GT(off.moe.mlp_fwd_s, 0.0);
    EXPECT_LT(off.moe.mlp_fwd_s, cf);
    EXPECT_GT(off.moe.mlp_wgrad_s, 0.0);
    EXPECT_LT(off.moe.mlp_wgrad_s, off.moe.mlp_bwd_s);
    EXPECT_LT(off.moe.mlp_bwd_s, cb);
    EXPECT_EQ(on.moe.mlp_fwd_s, off.moe.mlp_fwd_s);
    EXPECT_EQ(on.moe.mlp_bwd_s, off.moe.mlp_bwd_s);
    const EpPhases want = ep_phases(off.moe, ep, false);
    const double hidden_f = want.hidden_f;
    const double hidden_b = want.hidden_b;
    EXPECT_REL(on.moe.fwd_parts.ep_hidden, hidden_f);
    EXPECT_REL(on.moe.bwd_parts.ep_hidden, hidden_b);
    EXPECT_REL(on.moe.fwd_parts.ep, ep - hidden_f);
    EXPECT_REL(on.moe.bwd_parts.ep, ep - hidden_b);
    // The compute slows by 20/(U − 20) of what was hidden, in all.
    EXPECT_REL(on.moe.fwd_parts.compute + on.moe.bwd_parts.compute,
               cf + cb + steal * (hidden_f + hidden_b));
    EXPECT_REL(on.moe.fwd_s + on.moe.bwd_s,
               off.moe.fwd_s + off.moe.bwd_s - (1 - steal) * (hidden_f + hidden_b));
    EXPECT_REL(on.moe.fwd_parts.total(), on.moe.fwd_s);
    EXPECT_REL(on.moe.bwd_parts.total(), on.moe.bwd_s);
    // Nothing else of the layer moves; dense layers have no exchange.
    EXPECT_EQ(on.moe.fwd_parts.tp_hidden, 0.0);
    EXPECT_EQ(on.moe.act_bytes, off.moe.act_bytes);
    EXPECT_EQ(on.moe.selective(kDefaultRecomputeModules).extra_s,
              off.moe.selective(kDefaultRecomputeModules).extra_s);
    EXPECT_EQ(on.dense.fwd_s, off.dense.fwd_s);
    EXPECT_EQ(on.dense.bwd_s, off.dense.bwd_s);
    EXPECT_EQ(on.dense.fwd_parts.ep_hidden, 0.0);
  }
  // At the ends: an exchange shorter than twice every phase's compute hides
  // whole; one longer than twice every phase's hides behind all the compute.
  tables.comm.set(Primitive::kAllToAll, {LinkKind::kIntraNode, 0, 0}, {400e9, 1e-9});
  const TypeCosts short_on = costs(true);
  EXPECT_REL(short_on.moe.fwd_parts.ep_hidden, costs(false).moe.fwd_parts.ep);
  EXPECT_EQ(short_on.moe.fwd_parts.ep, 0.0);
  EXPECT_EQ(short_on.moe.bwd_parts.ep, 0.0);
  tables.comm.set(Primitive::kAllToAll, {LinkKind::kIntraNode, 0, 0}, {0.05e9, 1e-6});
  const TypeCosts long_off = costs(false);
  const TypeCosts long_on = costs(true);
  EXPECT_REL(long_on.moe.fwd_parts.ep_hidden, long_off.moe.bwd_parts.compute);
  EXPECT_REL(long_on.moe.bwd_parts.ep_hidden, long_off.moe.fwd_parts.compute);
}

// The doc: "the compute they hide behind slows by hidden·20/(U_h − 20)":
// the forward exchange (hidden_f) hides behind backward compute, so the
// backward compute slows by steal·hidden_f, and the forward compute by
// steal·hidden_b. The two differ only when the exchange lies between the
// forward and the backward compute.
TEST_F(CostTerms, MoeEpCommOverlapSlowsTheComputeItHidesBehind) {
  cluster.pools[0].device.compute_units = 132;
  const double steal = 20.0 / 112.0;
  const ParallelConfig pi = config(1, 1, 1, 4, 1, 4);
  tables.comm.set(Primitive::kAllToAll, {LinkKind::kIntraNode, 0, 0}, {2.5e9, 1e-6});
  const TypeCosts off = model().type_costs(pi, 0);
  workload.training.overlap.moe_ep_comm = true;
  const TypeCosts on = model().type_costs(pi, 0);
  const double ep = off.moe.fwd_parts.ep;
  const double cf = off.moe.fwd_parts.compute;
  const double cb = off.moe.bwd_parts.compute;
  ASSERT_LT(cf, ep);
  ASSERT_LT(ep, cb);
  const EpPhases want = ep_phases(off.moe, ep, false);
  ASSERT_NE(want.hidden_f, want.hidden_b);
  SCOPED_TRACE(testing::Message() << std::setprecision(17) << "EP " << ep << ", compute fwd " << cf
                                  << ", bwd " << cb);
  EXPECT_REL(on.moe.bwd_parts.compute, cb + steal * want.hidden_f);
  EXPECT_REL(on.moe.fwd_parts.compute, cf + steal * want.hidden_b);
}

// --delay-wgrad-compute: the experts' weight gradients leave the phase of
// the forward dispatch for the phase of the backward dispatch, beside the
// experts' forward. With an exchange longer than every phase's compute the
// forward exchange hides behind the backward compute less the weight
// gradients, and the backward exchange behind the forward compute plus them.
TEST_F(CostTerms, DelayWgradComputeMovesTheExpertsWeightGradientsToTheBackwardDispatch) {
  cluster.pools[0].device.compute_units = 0;  // no SMs taken: hidden is exact
  const ParallelConfig pi = config(1, 1, 1, 4, 1, 4);
  auto costs = [&](bool delay) {
    workload.training.overlap.moe_ep_comm = true;
    workload.training.overlap.delay_wgrad = delay;
    return model().type_costs(pi, 0);
  };
  for (const double bandwidth : {40e9, 2.5e9, 0.05e9}) {
    SCOPED_TRACE(bandwidth);
    tables.comm.set(Primitive::kAllToAll, {LinkKind::kIntraNode, 0, 0}, {bandwidth, 1e-6});
    const TypeCosts plain = costs(false);
    const TypeCosts delayed = costs(true);
    const double ep = plain.moe.fwd_parts.ep + plain.moe.fwd_parts.ep_hidden;
    const EpPhases want = ep_phases(plain.moe, ep, true);
    EXPECT_REL(delayed.moe.fwd_parts.ep_hidden, want.hidden_f);
    EXPECT_REL(delayed.moe.bwd_parts.ep_hidden, want.hidden_b);
    EXPECT_EQ(delayed.moe.fwd_parts.compute, plain.moe.fwd_parts.compute);
    EXPECT_EQ(delayed.moe.act_bytes, plain.moe.act_bytes);
  }
  const TypeCosts plain = costs(false);
  const TypeCosts delayed = costs(true);
  const double w = plain.moe.mlp_wgrad_s;
  EXPECT_REL(delayed.moe.fwd_parts.ep_hidden, plain.moe.fwd_parts.ep_hidden - w);
  EXPECT_REL(delayed.moe.bwd_parts.ep_hidden, plain.moe.bwd_parts.ep_hidden + w);
  // Without the overlap Megatron refuses it, and so does the workload.
  workload.training.overlap.moe_ep_comm = false;
  EXPECT_NE(validate(workload.training, workload.model).find("overlap.delay_wgrad needs"),
            std::string::npos);
  workload.training.overlap.delay_wgrad = false;
  EXPECT_EQ(validate(workload.training, workload.model), "");
}

TEST_F(CostTerms, MoeEpCommOverlapTakesNoSmsFromSmallOrUnknownDevices) {
  const ParallelConfig pi = config(1, 1, 1, 4, 1, 4);
  for (const int units : {0, 20}) {
    SCOPED_TRACE(units);
    cluster.pools[0].device.compute_units = units;
    workload.training.overlap.moe_ep_comm = false;
    const TypeCosts off = model().type_costs(pi, 0);
    workload.training.overlap.moe_ep_comm = true;
    const TypeCosts on = model().type_costs(pi, 0);
    const double hidden = off.moe.fwd_parts.ep;  // shorter than both computes
    EXPECT_REL(on.moe.fwd_parts.ep_hidden, hidden);
    EXPECT_EQ(on.moe.fwd_parts.compute, off.moe.fwd_parts.compute);
    EXPECT_EQ(on.moe.bwd_parts.compute, off.moe.bwd_parts.compute);
    EXPECT_REL(on.moe.fwd_s, off.moe.fwd_s - hidden);
    EXPECT_REL(on.moe.bwd_s, off.moe.bwd_s - hidden);
  }
  // 21 units: one left besides the dispatcher's 20, steal = 20.
  cluster.pools[0].device.compute_units = 21;
  workload.training.overlap.moe_ep_comm = false;
  const TypeCosts off = model().type_costs(pi, 0);
  workload.training.overlap.moe_ep_comm = true;
  const TypeCosts on = model().type_costs(pi, 0);
  const double hidden = off.moe.fwd_parts.ep;
  EXPECT_REL(on.moe.fwd_parts.compute + on.moe.bwd_parts.compute,
             off.moe.fwd_parts.compute + off.moe.bwd_parts.compute + 20.0 * 2 * hidden);
}

TEST_F(CostTerms, OverlapsAreOffByDefaultAndInertWhereTheyDoNotApply) {
  const Overlap none;
  EXPECT_EQ(TrainingSpec{}.overlap, none);
  EXPECT_FALSE(none.grad_reduce || none.param_gather || none.tp_comm || none.moe_ep_comm ||
               none.delay_wgrad);
  EXPECT_EQ(training().overlap, none);
  // The DP overlaps do not touch the layers; the layer overlaps do not
  // touch the DP sync; --overlap-moe-expert-parallel-comm does nothing to a
  // dense model.
  workload.model = moe_model({0, 1, 0, 1});
  const ParallelConfig pi = config(2, 2, 1, 2, 1, 2);
  const CostModel cm0 = model();
  const TypeCosts base = cm0.type_costs(pi, 0);
  const StageCost base_stage = cm0.stage_cost(pi, base, shape(0, 0, 3, 1, -1));
  EXPECT_EQ(base_stage.dp_hidden_s, 0.0);
  workload.training.overlap.grad_reduce = true;
  workload.training.overlap.param_gather = true;
  const TypeCosts dp_on = model().type_costs(pi, 0);
  for (const auto& [a, b] :
       {std::pair{&dp_on.dense, &base.dense}, std::pair{&dp_on.moe, &base.moe}}) {
    EXPECT_EQ(a->fwd_s, b->fwd_s);
    EXPECT_EQ(a->bwd_s, b->bwd_s);
  }
  workload.training.overlap = {false, false, true, true};
  const CostModel cm2 = model();
  const TypeCosts layers_on = cm2.type_costs(pi, 0);
  const StageCost layers_stage = cm2.stage_cost(pi, base, shape(0, 0, 3, 1, -1));
  EXPECT_EQ(layers_stage.dp_sync_s, base_stage.dp_sync_s);
  EXPECT_EQ(layers_stage.dp_hidden_s, 0.0);
  EXPECT_LT(layers_on.moe.fwd_s, base.moe.fwd_s);
  workload.model = dense_model();
  workload.training.overlap = {};
  const TypeCosts dense_off = model().type_costs(pi, 0);
  workload.training.overlap.moe_ep_comm = true;
  const TypeCosts dense_on = model().type_costs(pi, 0);
  EXPECT_EQ(dense_on.dense.fwd_s, dense_off.dense.fwd_s);
  EXPECT_EQ(dense_on.dense.bwd_s, dense_off.dense.bwd_s);
  EXPECT_EQ(dense_on.dense.fwd_parts.ep_hidden, 0.0);
}

// evaluate(): the report says which overlaps were on and what they hid:
// per stage the layers' hidden parts, and the breakdown's dp_hidden_s of
// the stage that ends the iteration; interleaving is passed to the
// iteration.
TEST_F(CostTerms, EvaluateReportsTheOverlapsAndInterleaving) {
  workload.model = moe_model({0, 1, 0, 1});
  Plan plan;
  plan.parallel = config(2, 2, 1, 2, 1, 2);
  plan.stages = {{0, 3, {RecomputeKind::kNone, 0}}, {1, 1, {RecomputeKind::kNone, 0}}};
  const PlanReport off = model().evaluate(plan);
  EXPECT_EQ(off.overlap, Overlap{});
  EXPECT_EQ(off.breakdown.dp_hidden_s, 0.0);
  workload.training.overlap = {true, true, true, true, true};
  const CostModel cm = model();
  const PlanReport on = cm.evaluate(plan);
  EXPECT_EQ(on.overlap, (Overlap{true, true, true, true, true}));
  ASSERT_EQ(on.stages.size(), 2u);
  const TypeCosts t0 = cm.type_costs(plan.parallel, 0);
  const TypeCosts t1 = cm.type_costs(plan.parallel, 1);
  // Stage 0: dense, MoE, dense; stage 1: MoE.
  const StepParts& f0 = on.stages[0].cost.fwd_parts;
  const StepParts& b0 = on.stages[0].cost.bwd_parts;
  EXPECT_REL(f0.tp_hidden, 2 * t0.dense.fwd_parts.tp_hidden + t0.moe.fwd_parts.tp_hidden);
  EXPECT_REL(b0.tp_hidden, 2 * t0.dense.bwd_parts.tp_hidden + t0.moe.bwd_parts.tp_hidden);
  EXPECT_REL(f0.ep_hidden, t0.moe.fwd_parts.ep_hidden);
  EXPECT_REL(on.stages[1].cost.bwd_parts.ep_hidden, t1.moe.bwd_parts.ep_hidden);
  EXPECT_GT(f0.tp_hidden, 0.0);
  EXPECT_GT(f0.ep_hidden, 0.0);
  for (const StageReport& s : on.stages) {
    EXPECT_REL(s.cost.fwd_parts.total(), s.cost.fwd_s);
    EXPECT_REL(s.cost.bwd_parts.total(), s.cost.bwd_s);
    EXPECT_GT(s.cost.dp_hidden_s, 0.0);
  }
  // The breakdown's dp_hidden_s is that of the stage with the longest sync +
  // optimizer, as its dp_sync_s.
  const std::size_t k = on.stages[0].cost.dp_sync_s + on.stages[0].cost.optimizer_s >=
                                on.stages[1].cost.dp_sync_s + on.stages[1].cost.optimizer_s
                            ? 0
                            : 1;
  EXPECT_EQ(on.breakdown.dp_sync_s, on.stages[k].cost.dp_sync_s);
  EXPECT_EQ(on.breakdown.dp_hidden_s, on.stages[k].cost.dp_hidden_s);
  EXPECT_LT(on.latency_s, off.latency_s);

  // vpp = 2 (M = 32 is a multiple of PP = 2): T_edge = step + (Σ − step)/2
  // over the interleaved stage times.
  plan.parallel.vpp = 2;
  const PlanReport vpp = cm.evaluate(plan);
  const double s0 = vpp.stages[0].cost.fwd_s + vpp.stages[0].cost.bwd_s;
  const double s1 = vpp.stages[1].cost.fwd_s + vpp.stages[1].cost.bwd_s;
  const double step = std::max(s0, s1);
  EXPECT_REL(vpp.breakdown.edge_s, step + (s0 + s1 - step) / 2);
  EXPECT_REL(vpp.breakdown.middle_s, 31 * step);
  EXPECT_REL(vpp.latency_s, vpp.breakdown.total());
  // The first stage now receives once per step (from the last), the second
  // twice across the cross-type link.
  const double n = 512.0 * kH * 2;
  EXPECT_REL(vpp.stages[0].cost.p2p_fwd_s, p2p(n, 25e9, 1e-6));
  EXPECT_REL(vpp.stages[1].cost.p2p_fwd_s, 2 * p2p(n, 0.5e9, 5e-6));
  EXPECT_EQ(vpp.plan.parallel.vpp, 2);
}

// ===========================================================================
// FP8 (docs/costmodel.md, "FP8"): the transformer layers' linear layers
// (attention projections, dense MLP, shared experts) run at the FP8 peak
// with 1-byte operands plus their casts; core attention, the router, the
// embedding and the output layer stay bf16. In memory: FP8 copies of the
// layers' weights (2 bytes per parameter) and the GEMM inputs kept as
// 1-byte FP8 copies.

// P = 100e12, e = 0.5 (P·e = 50e12) as roofline_device(); FP8 twice the
// BF16 peak (P8·e = 100e12); W = 4e12, so that the casts are small next to
// the GEMMs; no compute units, no kernel overhead.
DeviceSpec fp8_roofline_device() {
  DeviceSpec d = roofline_device();
  d.name = "Roof8";
  d.fp8_peak_flops = 200e12;
  d.hbm_bandwidth = 4e12;
  return d;
}
constexpr double kPe8 = 100e12;
constexpr double kW4 = 4e12;

struct Linear8 {
  double fwd, bwd;
};
// An FP8 linear layer (r x c) · (c x n): its GEMM at P8·e with 1-byte
// operands, plus the cast of its input (r·c elements, forward) and of its
// output gradient (r·n, backward), `cast` bytes each at W.
Linear8 fp8_linear(double r, double n, double c, double cast) {
  const double g = std::max(2.0 * r * n * c / kPe8, (r * c + c * n + r * n) / kW4);
  return {g + cast * r * c / kW4, 2.0 * g + cast * r * n / kW4};
}
// The same layer in bf16 on this device.
double bf16_linear(double r, double n, double c) { return roofline(r, n, c, kPe, kW4); }

TEST(CostTermsFp8, LinearLayersOfTheBlocksRunInFp8) {
  Workload bf16{moe_shared_model(), training()};  // F_s = 1024, layers 0,1,0,1
  Workload fp8 = bf16;
  fp8.training.precision = Precision::kFp8;
  fp8.training.fp8_recipe = Fp8Recipe::kDelayed;  // 4 bytes per cast element
  const ClusterSpec c = single_cluster(fp8_roofline_device());
  const ProfileTables t16 = make_analytic_tables(bf16, c, 1, {1, 2}, {1});
  const ProfileTables t8 = make_analytic_tables(fp8, c, 1, {1, 2}, {1});
  for (int tp : {1, 2}) {
    SCOPED_TRACE(testing::Message() << "TP " << tp);
    const ComputeEntry& a = analytic_entry(t16, tp, 1);
    const ComputeEntry& e = analytic_entry(t8, tp, 1);
    const double tok = 1024, tsp = tok / tp;
    const double core_flops = 2.0 * tok * (kS / 2) * (kA / tp) * (kD + kD);
    const double core = core_fwd(core_flops, kD, kS);
    const double elem = 8.0 * tsp * kH * 2.0 / kW4;
    // Attention: QKV (t, (a+2g)·d/TP, H) and output (t, H, a·d/TP) in FP8.
    const Linear8 qkv = fp8_linear(tok, (kA + 2 * kG) * kD / tp, kH, 4);
    const Linear8 out = fp8_linear(tok, kH, kA * kD / tp, 4);
    EXPECT_REL(e.attention_fwd, qkv.fwd + out.fwd + core + elem);
    EXPECT_REL(e.attention_bwd, qkv.bwd + out.bwd + core_bwd(core_flops, kD, kS) + 2.0 * elem);
    // Dense MLP: FC1 (t, 2F/TP, H), FC2 (t, H, F/TP); the activation bf16.
    const double act = 3.0 * tok * (kF / tp) * 2.0 / kW4;
    const Linear8 fc1 = fp8_linear(tok, 2 * kF / tp, kH, 4);
    const Linear8 fc2 = fp8_linear(tok, kH, kF / tp, 4);
    EXPECT_REL(e.dense_mlp_fwd, fc1.fwd + fc2.fwd + act + elem);
    EXPECT_REL(e.dense_mlp_bwd, fc1.bwd + fc2.bwd + 2.0 * act + 2.0 * elem);
    // Shared experts: the same MLP of width F_s/TP.
    const double fs = 1024.0 / tp;
    const double act_s = 3.0 * tok * fs * 2.0 / kW4;
    const Linear8 s1 = fp8_linear(tok, 2 * fs, kH, 4);
    const Linear8 s2 = fp8_linear(tok, kH, fs, 4);
    EXPECT_REL(e.shared_fwd, s1.fwd + s2.fwd + act_s);
    EXPECT_REL(e.shared_bwd, s1.bwd + s2.bwd + 2.0 * act_s);

    // Faster than bf16: the GEMMs at twice the rate, a little back for the
    // casts. The projections' forward takes 0.52 of its bf16 time: near
    // but not exactly half.
    const double proj16 =
        bf16_linear(tok, (kA + 2 * kG) * kD / tp, kH) + bf16_linear(tok, kH, kA * kD / tp);
    const double proj8 = qkv.fwd + out.fwd;
    EXPECT_REL(a.attention_fwd, proj16 + core + elem);  // the bf16 entry on this device
    const double ratio = (e.attention_fwd - e.core_attention_fwd - elem) /
                         (a.attention_fwd - a.core_attention_fwd - elem);
    EXPECT_NEAR(ratio, proj8 / proj16, 1e-9);
    EXPECT_GT(ratio, 0.5 + 1e-3);
    EXPECT_LT(ratio, 0.55);
    const double mlp16 = bf16_linear(tok, 2 * kF / tp, kH) + bf16_linear(tok, kH, kF / tp);
    const double mlp_ratio = (e.dense_mlp_fwd - act - elem) / (a.dense_mlp_fwd - act - elem);
    EXPECT_NEAR(mlp_ratio, (fc1.fwd + fc2.fwd) / mlp16, 1e-9);
    EXPECT_GT(mlp_ratio, 0.5 + 1e-3);
    EXPECT_LT(mlp_ratio, 0.55);
    EXPECT_LT(e.attention_fwd, a.attention_fwd);
    EXPECT_LT(e.attention_bwd, a.attention_bwd);
    EXPECT_LT(e.dense_mlp_fwd, a.dense_mlp_fwd);
    EXPECT_LT(e.dense_mlp_bwd, a.dense_mlp_bwd);
    EXPECT_LT(e.shared_fwd, a.shared_fwd);
    EXPECT_LT(e.shared_bwd, a.shared_bwd);

    // What stays bf16 is identical.
    EXPECT_EQ(e.core_attention_fwd, a.core_attention_fwd);
    EXPECT_REL(e.core_attention_fwd, core);
    EXPECT_EQ(e.dense_act_fwd, a.dense_act_fwd);
    EXPECT_EQ(e.shared_act_fwd, a.shared_act_fwd);
    EXPECT_EQ(e.router_fwd, a.router_fwd);
    EXPECT_EQ(e.router_bwd, a.router_bwd);
    EXPECT_EQ(e.embedding_fwd, a.embedding_fwd);
    EXPECT_EQ(e.embedding_bwd, a.embedding_bwd);
    EXPECT_EQ(e.output_fwd, a.output_fwd);
    EXPECT_EQ(e.output_bwd, a.output_bwd);
    // The output layer is the bf16 GEMM (t, V/TP, H) + 3 fp32 passes.
    EXPECT_REL(e.output_fwd, bf16_linear(tok, kV / tp, kH) + 3.0 * tok * (kV / tp) * 4.0 / kW4);
  }
  // The tensor-wise recipe casts 6 bytes per element: slower than delayed.
  fp8.training.fp8_recipe = Fp8Recipe::kTensorwise;
  const ProfileTables tw = make_analytic_tables(fp8, c, 1, {1}, {1});
  const ComputeEntry& e = analytic_entry(tw, 1, 1);
  const double tok = 1024;
  const Linear8 qkv = fp8_linear(tok, (kA + 2 * kG) * kD, kH, 6);
  const Linear8 out = fp8_linear(tok, kH, kA * kD, 6);
  const double core_flops = 2.0 * tok * (kS / 2) * kA * (kD + kD);
  const double core = core_fwd(core_flops, kD, kS);
  const double elem = 8.0 * tok * kH * 2.0 / kW4;
  EXPECT_REL(e.attention_fwd, qkv.fwd + out.fwd + core + elem);
  EXPECT_REL(e.attention_bwd, qkv.bwd + out.bwd + core_bwd(core_flops, kD, kS) + 2.0 * elem);
  EXPECT_GT(e.attention_fwd, analytic_entry(t8, 1, 1).attention_fwd);
}

TEST(CostTermsFp8, MultiLatentAttentionProjectionsRunInFp8) {
  Workload w{mla_model(), training()};
  w.training.precision = Precision::kFp8;
  w.training.fp8_recipe = Fp8Recipe::kTensorwise;
  const ClusterSpec c = single_cluster(fp8_roofline_device());
  // TP = 2, CP = 1: t = 1024, t_sp = 512, a/TP = 4, d_qk = 96, d_v = 64.
  const ProfileTables t = make_analytic_tables(w, c, 1, {2}, {1});
  const ComputeEntry& e = analytic_entry(t, 2, 1);
  const double tok = 1024, tsp = 512;
  const Linear8 q_down = fp8_linear(tok, 384, kH, 6);
  const Linear8 q_up = fp8_linear(tok, 4 * 96, 384, 6);
  const Linear8 kv_down = fp8_linear(tok, 128 + 32, kH, 6);
  const Linear8 kv_up = fp8_linear(tok, 4 * (64 + 64), 128, 6);
  const Linear8 o = fp8_linear(tok, kH, 4 * 64, 6);
  const double core_flops = 2.0 * tok * (kS / 2) * 4 * (96 + 64);  // bf16
  const double core = core_fwd(core_flops, 96, kS);
  const double elem = 8.0 * tsp * kH * 2.0 / kW4;
  EXPECT_REL(e.core_attention_fwd, core);
  EXPECT_REL(e.attention_fwd,
             q_down.fwd + q_up.fwd + kv_down.fwd + kv_up.fwd + o.fwd + core + elem);
  EXPECT_REL(e.attention_bwd, q_down.bwd + q_up.bwd + kv_down.bwd + kv_up.bwd + o.bwd +
                                  core_bwd(core_flops, 96, kS) + 2.0 * elem);
}

// A device without FP8 cannot build FP8 tables (check_plan refuses such a
// plan before; partition/constraints.cpp).
TEST(CostTermsFp8, AnalyticTablesOfADeviceWithoutFp8AreAContractError) {
  Workload w{moe_shared_model(), training()};
  w.training.precision = Precision::kFp8;
  EXPECT_THROW(make_analytic_tables(w, single_cluster(roofline_device()), 1, {1}, {1}),
               ContractError);
  EXPECT_NO_THROW(make_analytic_tables(w, single_cluster(fp8_roofline_device()), 1, {1}, {1}));
}

TEST_F(CostTerms, Fp8ActivationBytesDenseLayer) {
  workload.model = dense_model();
  // TP = 2, CP = 1: t_sp = 512.
  const TypeCosts b = model().type_costs(config(1, 2, 1, 1, 1, 4), 0);
  workload.training.precision = Precision::kFp8;
  const TypeCosts f = model().type_costs(config(1, 2, 1, 1, 1, 4), 0);
  const double tsp = 512;
  // The QKV input (H) and the output projection's input (a·d), FC1's input
  // (H) and FC2's (F) are kept as 1-byte FP8 copies: one byte less each.
  const double attn = tsp * (2 * kH + 2 * kA * kD + 2 * kG * kD) * 2 - tsp * (kH + kA * kD);
  const double mlp = tsp * (2 * kH + 3 * kF) * 2 - tsp * (kH + kF);
  EXPECT_EQ(attn, 3670016.0);
  EXPECT_EQ(mlp, 12058624.0);
  EXPECT_REL(f.dense.act_bytes, attn + mlp);
  EXPECT_EQ(b.dense.act_bytes - f.dense.act_bytes, tsp * (kH + kA * kD) + tsp * (kH + kF));
  // Recomputing the MLP frees all of it but its bf16 input.
  const unsigned mlp_module = module_bit(RecomputeModule::kMlp);
  EXPECT_REL(f.dense.selective(mlp_module).saved_bytes, mlp - tsp * kH * 2);
  EXPECT_REL(b.dense.selective(mlp_module).saved_bytes, tsp * (kH + 3 * kF) * 2);
  // Full recomputation keeps the bf16 layer input.
  EXPECT_EQ(f.dense.act_full_bytes, tsp * kH * 2);
  EXPECT_EQ(f.dense.act_full_bytes, b.dense.act_full_bytes);

  // GELU (m = 2): the same bytes saved.
  workload.model.mlp = MlpKind::kGelu;
  const TypeCosts g = model().type_costs(config(1, 2, 1, 1, 1, 4), 0);
  EXPECT_REL(g.dense.act_bytes, attn + tsp * (2 * kH + 2 * kF) * 2 - tsp * (kH + kF));
  EXPECT_REL(g.dense.selective(mlp_module).saved_bytes,
             tsp * (2 * kH + 2 * kF) * 2 - tsp * (kH + kF) - tsp * kH * 2);
}

TEST_F(CostTerms, Fp8ActivationBytesMoeLayer) {
  workload.model.shared_expert_ffn_hidden = 1024;
  cluster.pools[0].device.fp8_peak_flops = 200e12;  // the routed experts need FP8
  // TP = 2, EP = 2, TPE = 2, DP = 2: t_sp = 512.
  const ParallelConfig pi = config(1, 2, 1, 2, 2, 2);
  const TypeCosts b = model().type_costs(pi, 0);
  workload.training.precision = Precision::kFp8;
  workload.training.fp8_recipe = Fp8Recipe::kMxfp8;
  const TypeCosts f = model().type_costs(pi, 0);
  const double tsp = 512, fs = 1024;
  const double attn = tsp * (2 * kH + 2 * kA * kD + 2 * kG * kD) * 2 - tsp * (kH + kA * kD);
  // MoE: the experts' FC1 inputs (TPE·H) and FC2 inputs (F_e) per routed
  // copy, the shared experts' FC2 input (F_s), one byte less each.
  const double moe =
      tsp * (2 * kH * 2 + 2 * kE * 4 + kK * kImb * ((2 * kH + 3 * kFe) * 2 - (2 * kH + kFe)) +
             3 * fs * 2 - fs);
  EXPECT_REL(f.moe.act_bytes, attn + moe);
  EXPECT_REL(b.moe.act_bytes - f.moe.act_bytes,
             tsp * (kH + kA * kD) + tsp * kK * kImb * (2 * kH + kFe) + tsp * fs);
  // moe_act drops the experts' activation, k·f_imb·F_e per token, kept as
  // its one-byte FP8 copy (FC2's input).
  EXPECT_REL(f.moe.selective(kDefaultRecomputeModules).saved_bytes, tsp * kK * kImb * kFe);
  EXPECT_EQ(f.moe.act_full_bytes, tsp * kH * 2);
}

TEST_F(CostTerms, Fp8ActivationBytesMultiLatentAttention) {
  workload.model = mla_model();
  workload.model.mla.v_head_dim = 48;  // d_v unlike d_nope (64) and d_qk (96)
  const TypeCosts b = model().type_costs(config(1, 2, 1, 1, 1, 4), 0);
  workload.training.precision = Precision::kFp8;
  const TypeCosts f = model().type_costs(config(1, 2, 1, 1, 1, 4), 0);
  const double tsp = 512;
  // The projections' inputs: H (QKV down-projections) and a·d_v (output).
  const double attn =
      tsp * (2 * kH + 384 + 128 + 2 * kA * 96 + 2 * kA * 48) * 2 - tsp * (kH + kA * 48);
  const double mlp = tsp * (2 * kH + 3 * kF) * 2 - tsp * (kH + kF);
  EXPECT_REL(f.dense.act_bytes, attn + mlp);
  EXPECT_EQ(b.dense.act_bytes - f.dense.act_bytes, tsp * (kH + kA * 48) + tsp * (kH + kF));
}

// The routed experts of a MoE layer in FP8 (analytic.h, routed_expert_time
// with the training precision): the grouped GEMMs at the FP8 peak with
// 1-byte operands, the activation in bf16, the casts of the experts'
// inputs (forward) and output gradients (backward) over all token copies;
// scaled by f_imb/η and bounded by the weight streaming as in bf16; the
// permutation unchanged.
TEST_F(CostTerms, Fp8ExpertTermOfTheLayer) {
  cluster.pools[0].device.fp8_peak_flops = 200e12;  // P8·e = 200e12 (e = 1)
  const ParallelConfig pi = config(1, 1, 1, 1, 1, 1);
  const TypeCosts b = model().type_costs(pi, 0);
  workload.training.precision = Precision::kFp8;
  workload.training.fp8_recipe = Fp8Recipe::kTensorwise;  // 6 bytes per cast element
  const TypeCosts f = model().type_costs(pi, 0);
  // t_sp = 1024: 8 local experts of r = 256 rows, w = 2048, 2048 copies.
  const double local = 8, r = 256, w = kFe, copies = 2048;
  auto group = [&](double a, double n, double c) {
    return local * std::max(2.0 * a * n * c / 200e12, (a * c + c * n + a * n) / 1e12);
  };
  const HandExperts x = hand_experts_a(1024, 1, 1);  // bf16: act and perm
  const double fwd8 =
      group(r, 2 * w, kH) + group(r, kH, w) + x.act + 6.0 * copies * (kH + w) / 1e12;
  const double bwd8 = group(r, w, kH) + group(w, kH, r) + group(r, kH, 2 * w) +
                      group(kH, 2 * w, r) + 2.0 * x.act + 6.0 * copies * (kH + 2 * w) / 1e12;
  const double stream = kE * 3 * kH * kFe * 2 / 1e12;
  ASSERT_GT(fwd8 * kImb / 0.8, stream);
  ASSERT_GT(bwd8 * kImb / 0.8, 2 * stream);
  EXPECT_REL(f.moe.fwd_s, 1.0e-3 + 1.0e-4 + fwd8 * kImb / 0.8 + x.perm);
  EXPECT_REL(f.moe.bwd_s, 2.2e-3 + 2.0e-4 + bwd8 * kImb / 0.8 + x.perm);
  EXPECT_LT(f.moe.fwd_s, b.moe.fwd_s);
  EXPECT_LT(f.moe.bwd_s, b.moe.bwd_s);
  // Selective recomputation reruns the bf16 activation, as in bf16.
  EXPECT_EQ(f.moe.selective(kDefaultRecomputeModules).extra_s,
            b.moe.selective(kDefaultRecomputeModules).extra_s);
  // The dense layer's time comes from the (hand) table: unchanged.
  EXPECT_EQ(f.dense.fwd_s, b.dense.fwd_s);
}

TEST_F(CostTerms, Fp8BytesPerParameter) {
  const ParallelConfig pi = config(1, 2, 2, 4, 1, 2);
  cluster.pools[0].device.fp8_peak_flops = 200e12;
  EXPECT_EQ(model().type_costs(pi, 0).fp8_copy_bytes_per_param, 0.0);  // bf16
  workload.training.precision = Precision::kFp16;
  EXPECT_EQ(model().type_costs(pi, 0).fp8_copy_bytes_per_param, 0.0);
  workload.training.precision = Precision::kFp8;
  const TypeCosts tc = model().type_costs(pi, 0);
  // The rowwise and columnwise FP8 copies; the rest as bf16.
  EXPECT_EQ(tc.fp8_copy_bytes_per_param, 2.0);
  EXPECT_EQ(tc.weight_bytes_per_param, 2.0);
  EXPECT_EQ(tc.grad_bytes_per_param, 4.0);
  EXPECT_REL(tc.dense_opt_bytes_per_param, 12.0 / 4);
  EXPECT_REL(tc.expert_opt_bytes_per_param, 12.0 / 2);
}

TEST_F(CostTerms, Fp8StageWeightsAddCopiesOfTheLayersOnly) {
  workload.model = dense_model();
  workload.training.precision = Precision::kFp8;
  const CostModel cm = model();
  // PP = 3, TP = 2, DP = 1: first and middle stage with one dense layer,
  // last with two. The embedding and output layer have no FP8 copy.
  const ParallelConfig pi = config(3, 2, 1, 1, 1, 1);
  const TypeCosts tc = cm.type_costs(pi, 0);
  const double layer = (kAttnParams + kDenseMlpParams) / 2;
  const double emb = kV * kH / 2, out = kV * kH / 2;
  const StageCost first = cm.stage_cost(pi, tc, shape(0, 0, 1, 0, -1));
  const StageCost middle = cm.stage_cost(pi, tc, shape(1, 1, 1, 0, 0));
  const StageCost last = cm.stage_cost(pi, tc, shape(2, 2, 2, 0, 0));
  EXPECT_REL(first.memory.weights, 2 * (layer + emb) + 2 * layer);
  EXPECT_REL(middle.memory.weights, 2 * layer + 2 * layer);
  EXPECT_REL(last.memory.weights, 2 * (2 * layer + out) + 2 * 2 * layer);
  // Gradients and optimizer states as in bf16.
  EXPECT_REL(first.memory.gradients, 4 * (layer + emb));
  EXPECT_REL(last.memory.gradients, 4 * (2 * layer + out));
}

TEST_F(CostTerms, Fp8StageWeightsOfMoeStages) {
  cluster.pools[0].device.fp8_peak_flops = 200e12;
  workload.model = moe_model({0, 1, 0, 1});
  // PP = 2, TP = 2, CP = 2, EP = 4, DP = 2: d = 4, EDP = 2.
  const ParallelConfig pi = config(2, 2, 2, 4, 1, 2);
  const StageCost b0 = model().stage_cost(pi, model().type_costs(pi, 0), shape(0, 0, 2, 1, -1));
  workload.training.precision = Precision::kFp8;
  const CostModel cm = model();
  const TypeCosts tc = cm.type_costs(pi, 0);
  const double dense_layer = (kAttnParams + kDenseMlpParams) / 2;
  const double moe_dense = (kAttnParams + kRouterParams) / 2;
  const double experts = kExpertParams / 4;
  const double emb = kV * kH / 2, out = kV * kH / 2;
  {
    // First stage: a dense and a MoE layer, and the embedding.
    const StageCost s = cm.stage_cost(pi, tc, shape(0, 0, 2, 1, -1));
    const double pd = dense_layer + moe_dense + emb, pe = experts;
    EXPECT_REL(s.memory.weights, 2 * (pd + pe) + 2 * (dense_layer + moe_dense + experts));
    EXPECT_REL(s.memory.weights - b0.memory.weights, 2 * (dense_layer + moe_dense + experts));
    EXPECT_EQ(s.memory.gradients, b0.memory.gradients);
    EXPECT_EQ(s.memory.optimizer, b0.memory.optimizer);
    EXPECT_REL(s.memory.optimizer, 12.0 / 4 * pd + 12.0 / 2 * pe);
  }
  {
    // Last stage: a dense and a MoE layer, and the output layer.
    const StageCost s = cm.stage_cost(pi, tc, shape(1, 2, 2, 1, 0));
    EXPECT_REL(s.memory.weights, 2 * (dense_layer + moe_dense + out + experts) +
                                     2 * (dense_layer + moe_dense + experts));
  }
}

}  // namespace
}  // namespace hapmoe
