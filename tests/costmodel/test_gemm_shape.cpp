// The shape model of the GEMMs (costmodel/analytic.h): tile and wave
// quantisation over the device's compute units with the tile and split-K a
// GEMM library would pick, grouped GEMMs on concurrent streams, the routed
// experts of one MoE layer, and the per-kernel overhead of every block.
// Expectations are computed by hand from the formulas (the candidates are
// listed where a tile or split wins), or are the properties the physics
// must keep (never faster than the HBM traffic, wave quantisation small for
// large GEMMs, ...).
//
// Tile rates relative to 256x128 (arithmetic intensity rows·cols/(rows+cols)
// over 256·128/384): 256x128, 128x256 1; 128x128 0.75; 128x64, 64x128 0.5;
// 64x64 0.375.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
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

namespace hapmoe {
namespace {

constexpr double kBf16 = 2.0;

// H100-SXM-like: 989 TFLOP/s dense BF16 at efficiency 0.75 (P·e =
// 741.75e12), 3.35 TB/s, 132 SMs; no kernel overhead unless a test sets it.
DeviceSpec h100_like(int compute_units = 132) {
  DeviceSpec d;
  d.name = "H100-like";
  d.peak_flops = 989e12;
  d.memory_bytes = 80e9;
  d.hbm_bandwidth = 3.35e12;
  d.intra_node_bandwidth = 450e9;
  d.inter_node_bandwidth = 50e9;
  d.devices_per_node = 8;
  d.gemm_efficiency = 0.75;
  d.compute_units = compute_units;
  return d;
}

constexpr double kRate = 989e12 * 0.75;  // P·e, FLOP/s of the whole device
constexpr double kUnitRate = kRate / 132;
constexpr double kHbm = 3.35e12;

// 2mnk / (P·e): the compute time with every unit busy at the largest tile.
double ideal(double m, double n, double k) { return 2.0 * m * n * k / kRate; }
// A, B and C through HBM once, in bf16.
double traffic(double m, double n, double k) { return kBf16 * (m * k + k * n + m * n) / kHbm; }

// ===========================================================================
// gemm_time

TEST(GemmShape, WithoutComputeUnitsIsTheRoofline) {
  const DeviceSpec d = h100_like(0);
  const double shapes[][3] = {{8192, 8192, 8192}, {512, 3072, 4096}, {1, 4096, 1024},
                              {64, 4096, 1024},   {100, 77, 3},      {4096, 14336, 4096}};
  for (const auto& s : shapes) {
    SCOPED_TRACE(testing::Message() << s[0] << " x " << s[1] << " x " << s[2]);
    const double roofline = std::max(2.0 * s[0] * s[1] * s[2] / (d.peak_flops * d.gemm_efficiency),
                                     kBf16 * (s[0] * s[2] + s[2] * s[1] + s[0] * s[1]) / kHbm);
    EXPECT_REL(gemm_time(s[0], s[1], s[2], d, kBf16), roofline);
  }
  // fp32 operands: the traffic term scales with the element size.
  EXPECT_REL(gemm_time(1, 4096, 1024, d, 4.0), 4.0 * (1024 + 1024.0 * 4096 + 4096) / kHbm);
}

TEST(GemmShape, LargeSquareGemmIsWithinAFewPercentOfTheRoofline) {
  // 8192³: 256x128 tiles, 32·64 = 2048 of them over 132 units: ceil(15.52)
  // = 16 waves, each a full-depth tile: 16·2·256·128·8192/(P·e/132) =
  // (16·132/2048)·2mnk/(P·e) = 1.03125·ideal. Split-K only multiplies the
  // waves (2: 4096 tiles, 32 waves of half depth) and adds fp32 partials;
  // smaller tiles run slower. Traffic 1.2e-4 s ≪ 1.5e-3 s.
  const DeviceSpec d = h100_like();
  const double t = gemm_time(8192, 8192, 8192, d, kBf16);
  EXPECT_REL(t, 1.03125 * ideal(8192, 8192, 8192));
  EXPECT_REL(t, 16 * 2.0 * 256 * 128 * 8192 / kUnitRate);
  EXPECT_LT(t, 1.05 * ideal(8192, 8192, 8192));
  EXPECT_GE(t, ideal(8192, 8192, 8192));
}

TEST(GemmShape, FewTilesAreNoticeablySlowerThanTheRoofline) {
  // 512 x 3072 x 4096 (ideal 1.737e-5 s, traffic 9.70e-6 s). Per full-depth
  // wave W = 2·256·128·4096/(P·e/132); candidates (time in W, + fp32
  // partials 2·s·m·n·4/W_hbm = s·3.7561e-6 s):
  //   256x128, 48 tiles:  s=1 1 wave 1.0 W = 4.777e-5     s=2 96 → 1 wave 0.5 W + 7.51e-6
  //                        s=4 192 → 2 waves 0.5 W + 1.50e-5 ...
  //   128x128, 96 tiles:  s=1 1 wave ·(1/2 area)/0.75 = 0.6667 W = 3.185e-5
  //                        s=2 192 → 2 waves · 1/2 depth → same, + partials
  //   128x64, 192 tiles: s=1 2 waves ·(1/4)/0.5 = 1.0 W; 64x64, 384 tiles: 3 waves → 1.0 W
  // Winner: 256x128 with split-K 2, 0.5 W + 7.5122e-6 = 3.13972e-5 s,
  // just ahead of 128x128 unsplit (3.18468e-5 s).
  const DeviceSpec d = h100_like();
  const double m = 512, n = 3072, k = 4096;
  const double expected = 1 * 2.0 * 256 * 128 * (k / 2) / kUnitRate + 2.0 * 2 * m * n * 4.0 / kHbm;
  const double t = gemm_time(m, n, k, d, kBf16);
  EXPECT_REL(t, expected);
  EXPECT_NEAR(t, 3.13972e-5, 1e-10);
  const double runner_up = 2.0 * 128 * 128 * k / (0.75 * kUnitRate);
  EXPECT_LT(t, runner_up);
  // 1.81 × the ideal: 48 tiles cannot fill 132 units.
  EXPECT_GT(t, 1.5 * ideal(m, n, k));
  EXPECT_GT(t, traffic(m, n, k));
}

TEST(GemmShape, MidSizeGemmPicksASmallerTile) {
  // 1024 x 1024 x 4096 (ideal 1.158e-5 s): 256x128, 32 tiles: split 4 → 128
  // tiles, one wave of depth 1024, 1.194e-5 + 1.002e-5 partials = 2.196e-5;
  // split 2: 2.389e-5 + 5.01e-6. 128x128, 64 tiles: split 2 → 128 tiles, one
  // wave of depth 2048 at 0.75: 1.592e-5 + 5.008e-6 = 2.0931e-5 s, the
  // winner. 128x64, 128 tiles, one full-depth wave at 0.5: 2.389e-5; 64x64:
  // 2 waves, 3.18e-5.
  const DeviceSpec d = h100_like();
  const double expected =
      2.0 * 128 * 128 * 2048 / (0.75 * kUnitRate) + 2.0 * 2 * 1024 * 1024 * 4.0 / kHbm;
  EXPECT_REL(gemm_time(1024, 1024, 4096, d, kBf16), expected);
  EXPECT_NEAR(gemm_time(1024, 1024, 4096, d, kBf16), 2.09315e-5, 1e-10);
}

TEST(GemmShape, SplitKFillsTheUnitsForADeepNarrowGemm) {
  // 256 x 256 x 65536: at most 16 output tiles of 64x64. Split-K 16 (each
  // split 4096 ≥ 256 deep) multiplies them; the winner is 128x64 (8 tiles ·
  // 16 = 128 ≤ 132: one wave of depth 4096 at rate 0.5) plus 16 fp32
  // partials of 256·256 written and read: 2.3885e-5 + 2.5040e-6 s.
  // (128x128·16: 64 tiles, one wave at 0.75: 3.18e-5; 64x64·8: 128 tiles,
  // depth 8192 at 0.375: 3.18e-5; 256x128·16: 4.78e-5.) Traffic 2.007e-5 s.
  // Unsplit, the same 8 tiles would take one wave of depth 65536: 16× longer.
  const DeviceSpec d = h100_like();
  const double m = 256, n = 256, k = 65536;
  const double wave = 2.0 * 128 * 64 * (k / 16) / (0.5 * kUnitRate);
  const double partials = 2.0 * 16 * m * n * 4.0 / kHbm;
  const double t = gemm_time(m, n, k, d, kBf16);
  EXPECT_REL(t, wave + partials);
  EXPECT_GT(t, traffic(m, n, k));
  EXPECT_LT(t, 2.0 * 128 * 64 * k / (0.5 * kUnitRate) / 10);
}

TEST(GemmShape, EachSplitKeepsAtLeast256OfK) {
  // 64 x 64 x 2048: one 64x64 tile; split-K up to 8 (2048/8 = 256), not 16.
  // Split 8: 8 tiles, one wave of depth 256 at rate 0.375, + 8 fp32 partials
  // of 64·64: 9.952e-7 + 7.82e-8 s. (A 16-way split, depth 128, would take
  // 4.98e-7 + 1.56e-7 s; 128x64 at split 8 1.49e-6 s.)
  const DeviceSpec d = h100_like();
  const double expected =
      2.0 * 64 * 64 * 256 / (0.375 * kUnitRate) + 2.0 * 8 * 64 * 64 * 4.0 / kHbm;
  EXPECT_REL(gemm_time(64, 64, 2048, d, kBf16), expected);
}

TEST(GemmShape, NeverFasterThanItsHbmTraffic) {
  // Skinny GEMMs (decode-like rows, weight-sized B): the operands through HBM
  // bound the time whatever tile or split is chosen.
  const DeviceSpec d = h100_like();
  for (double m : {1.0, 2.0, 8.0, 16.0, 64.0, 128.0}) {
    for (const auto& [n, k] : {std::pair{8192.0, 8192.0}, std::pair{4096.0, 16384.0},
                               std::pair{28672.0, 4096.0}, std::pair{1024.0, 1024.0}}) {
      SCOPED_TRACE(testing::Message() << m << " x " << n << " x " << k);
      EXPECT_GE(gemm_time(m, n, k, d, kBf16), traffic(m, n, k));
      EXPECT_GE(gemm_time(m, n, k, d, kBf16), ideal(m, n, k));
    }
  }
  // 8 x 8192 x 8192 is memory bound: 2·(8·8192 + 8192² + 8·8192)/3.35e12 =
  // 4.01432e-5 s, while the best tile (64x64, 128 tiles: one full-depth wave
  // at rate 0.375, 3.18e-5 s) would be faster.
  EXPECT_REL(gemm_time(8, 8192, 8192, d, kBf16), traffic(8, 8192, 8192));
  EXPECT_GT(traffic(8, 8192, 8192), 2.0 * 64 * 64 * 8192 / (0.375 * kUnitRate));
}

TEST(GemmShape, MoreComputeUnitsNeverSlower) {
  // Doubling the units (at the same device rate per unit) never lengthens a GEMM.
  for (const auto& s :
       {std::vector<double>{512, 3072, 4096}, std::vector<double>{8192, 8192, 8192},
        std::vector<double>{256, 256, 65536}, std::vector<double>{3000, 1000, 700}}) {
    DeviceSpec d = h100_like(132);
    const double t132 = gemm_time(s[0], s[1], s[2], d, kBf16);
    d.compute_units = 264;
    d.peak_flops *= 2;
    EXPECT_LE(gemm_time(s[0], s[1], s[2], d, kBf16), t132)
        << s[0] << " x " << s[1] << " x " << s[2];
  }
}

// ===========================================================================
// grouped_gemm_time

TEST(GroupedGemm, OneGemmIsGemmTime) {
  const DeviceSpec d = h100_like();
  for (const auto& s : {std::vector<double>{512, 3072, 4096}, std::vector<double>{8, 8192, 8192},
                        std::vector<double>{8192, 8192, 8192}}) {
    for (int streams : {1, 4}) {
      EXPECT_EQ(grouped_gemm_time(1, streams, s[0], s[1], s[2], d, kBf16),
                gemm_time(s[0], s[1], s[2], d, kBf16));
    }
  }
  EXPECT_EQ(grouped_gemm_time(0, 4, 512, 3072, 4096, d, kBf16), 0.0);
}

TEST(GroupedGemm, ConcurrentStreamsShareTheWaves) {
  const DeviceSpec d = h100_like();
  // Never slower than one after the other (equal when the single GEMM's
  // waves are already full, up to rounding).
  for (const auto& s :
       {std::vector<double>{512, 3072, 4096}, std::vector<double>{8192, 8192, 8192},
        std::vector<double>{256, 1408, 2048}, std::vector<double>{64, 4096, 1024}}) {
    const double one = gemm_time(s[0], s[1], s[2], d, kBf16);
    for (int count : {2, 3, 4}) {
      EXPECT_LE(grouped_gemm_time(count, count, s[0], s[1], s[2], d, kBf16),
                count * one * (1 + 1e-12))
          << count << " of " << s[0] << " x " << s[1] << " x " << s[2];
    }
  }
  // 4 x (512 x 3072 x 4096): 4·48 = 192 tiles of 256x128 over 132 units:
  // 2 full-depth waves; 4·96 = 384 tiles of 128x128: 3 waves at 0.75 of
  // half the area, 2 W (W as in FewTilesAreNoticeablySlowerThanTheRoofline;
  // both 9.5540e-5 s); split-K 2 on 256x128: 3 waves of half depth + 4·7.51e-6 =
  // 1.0171e-4 s. Alone, each takes 3.13972e-5 s: 1.2559e-4 s for four.
  const double w = 2.0 * 256 * 128 * 4096 / kUnitRate;
  EXPECT_REL(grouped_gemm_time(4, 4, 512, 3072, 4096, d, kBf16), 2 * w);
  EXPECT_LT(grouped_gemm_time(4, 4, 512, 3072, 4096, d, kBf16),
            0.8 * 4 * gemm_time(512, 3072, 4096, d, kBf16));
  // One stream: strictly one after the other.
  EXPECT_REL(grouped_gemm_time(4, 1, 512, 3072, 4096, d, kBf16),
             4 * gemm_time(512, 3072, 4096, d, kBf16));
}

TEST(GroupedGemm, RoundsOfStreams) {
  const DeviceSpec d = h100_like();
  for (const auto& s : {std::vector<double>{512, 3072, 4096}, std::vector<double>{256, 1408, 2048},
                        std::vector<double>{2048, 4096, 14336}}) {
    SCOPED_TRACE(testing::Message() << s[0] << " x " << s[1] << " x " << s[2]);
    const double four = grouped_gemm_time(4, 4, s[0], s[1], s[2], d, kBf16);
    // 8 GEMMs on 4 streams: two rounds of 4 concurrent.
    EXPECT_REL(grouped_gemm_time(8, 4, s[0], s[1], s[2], d, kBf16), 2 * four);
    // 6 on 4: a round of 4, then the 2 left over together.
    EXPECT_REL(grouped_gemm_time(6, 4, s[0], s[1], s[2], d, kBf16),
               four + grouped_gemm_time(2, 2, s[0], s[1], s[2], d, kBf16));
  }
  // Without compute units every GEMM is its roofline: count × one.
  const DeviceSpec roof = h100_like(0);
  EXPECT_REL(grouped_gemm_time(8, 4, 512, 3072, 4096, roof, kBf16),
             8 * gemm_time(512, 3072, 4096, roof, kBf16));
  EXPECT_REL(grouped_gemm_time(3, 4, 8, 8192, 8192, roof, kBf16),
             3 * gemm_time(8, 8192, 8192, roof, kBf16));
}

TEST(GroupedGemm, ConcurrentGemmsStillMoveTheirOperands) {
  // 4 concurrent skinny GEMMs move 4× the operands: never faster than that.
  const DeviceSpec d = h100_like();
  EXPECT_REL(grouped_gemm_time(4, 4, 8, 8192, 8192, d, kBf16), 4 * traffic(8, 8192, 8192));
}

TEST(GroupedGemm, RejectsBadCounts) {
  const DeviceSpec d = h100_like();
  EXPECT_THROW(grouped_gemm_time(-1, 4, 512, 512, 512, d, kBf16), ContractError);
  EXPECT_THROW(grouped_gemm_time(4, 0, 512, 512, 512, d, kBf16), ContractError);
}

// ===========================================================================
// routed_expert_time

// Mixtral-like (E = 8, k = 2, H = 4096, F_e = 14336) and a fine-grained
// MoE (E = 64, k = 8, H = 2048, F_e = 1408), SwiGLU.
ModelSpec moe(int experts, int top_k, int hidden, int expert_ffn) {
  ModelSpec m;
  m.name = "moe";
  m.num_layers = 2;
  m.hidden = hidden;
  m.num_heads = 16;
  m.num_kv_heads = 4;
  m.head_dim = 128;
  m.ffn_hidden = 4 * hidden;
  m.mlp = MlpKind::kSwiGlu;
  m.positions = PositionKind::kRotary;
  m.max_positions = 4096;
  m.vocab = 32000;
  m.num_experts = experts;
  m.top_k = top_k;
  m.expert_ffn_hidden = expert_ffn;
  m.moe_layers = {1, 1};
  return m;
}

std::vector<ModelSpec> moe_models() { return {moe(8, 2, 4096, 14336), moe(64, 8, 2048, 1408)}; }

TEST(RoutedExperts, KernelsPerLocalExpert) {
  const DeviceSpec d = h100_like();
  for (const ModelSpec& m : moe_models()) {
    for (int ep = 1; ep <= m.num_experts; ep *= 2) {
      for (int tpe : {1, 2}) {
        const RoutedExpertTime r = routed_expert_time(m, d, 1024, ep, tpe);
        EXPECT_EQ(r.kernels_fwd, 2.0 * m.num_experts / ep) << "E " << m.num_experts << " EP " << ep;
        EXPECT_EQ(r.kernels_bwd, 4.0 * m.num_experts / ep) << "E " << m.num_experts << " EP " << ep;
      }
    }
  }
}

TEST(RoutedExperts, KernelOverheadAddsExactlyKernelsTimesOverhead) {
  DeviceSpec none = h100_like();
  DeviceSpec some = none;
  some.kernel_overhead = 1e-5;
  for (const ModelSpec& m : moe_models()) {
    for (int ep : {1, 2, 8}) {
      for (double tokens : {256.0, 4096.0}) {
        SCOPED_TRACE(testing::Message()
                     << "E " << m.num_experts << " EP " << ep << " t " << tokens);
        const RoutedExpertTime a = routed_expert_time(m, none, tokens, ep, 1);
        const RoutedExpertTime b = routed_expert_time(m, some, tokens, ep, 1);
        // The launches are in the fixed part (which imbalance and eta do
        // not scale), never in the GEMMs + activation.
        EXPECT_REL(b.fixed_fwd - a.fixed_fwd, 2.0 * m.num_experts / ep * 1e-5);
        EXPECT_REL(b.fixed_bwd - a.fixed_bwd, 4.0 * m.num_experts / ep * 1e-5);
        EXPECT_EQ(b.fwd, a.fwd);
        EXPECT_EQ(b.bwd, a.bwd);
        EXPECT_EQ(b.act_fwd, a.act_fwd);
        EXPECT_EQ(b.kernels_fwd, a.kernels_fwd);
      }
    }
  }
}

TEST(RoutedExperts, MoreLocalExpertsAtEqualTokensCostAtLeastAsMuch) {
  // Halving EP doubles the local experts over the same token copies: smaller
  // GEMMs (more quantisation), more weights through HBM, more launches. The
  // forward never gets cheaper; nor does the backward once the local experts
  // fill the grouped GEMM's 4 streams. (Below that the weight-gradient GEMMs
  // of fewer experts — fixed F_e x H outputs, K = rows — put fewer tiles in
  // flight, so fewer, deeper experts can cost more; not asserted.)
  for (double overhead : {0.0, kDefaultKernelOverhead}) {
    DeviceSpec d = h100_like();
    d.kernel_overhead = overhead;
    for (const ModelSpec& m : moe_models()) {
      for (double tokens : {128.0, 1024.0, 4096.0, 16384.0}) {
        for (int tpe : {1, 2}) {
          for (int ep = 2; ep <= m.num_experts; ep *= 2) {
            SCOPED_TRACE(testing::Message() << "overhead " << overhead << " E " << m.num_experts
                                            << " t " << tokens << " TPE " << tpe << " EP " << ep);
            const RoutedExpertTime more = routed_expert_time(m, d, tokens, ep / 2, tpe);
            const RoutedExpertTime fewer = routed_expert_time(m, d, tokens, ep, tpe);
            // The GEMMs + activation, and with the launches and permutation.
            EXPECT_GE(more.fwd, fewer.fwd * (1 - 1e-12));
            EXPECT_GE(more.fwd + more.fixed_fwd, (fewer.fwd + fewer.fixed_fwd) * (1 - 1e-12));
            EXPECT_GE(more.fixed_fwd, fewer.fixed_fwd * (1 - 1e-12));
            EXPECT_GE(more.fixed_bwd, fewer.fixed_bwd * (1 - 1e-12));
            if (m.num_experts / ep >= kGroupedGemmStreams) {
              EXPECT_GE(more.bwd, fewer.bwd * (1 - 1e-12));
              EXPECT_GE(more.bwd + more.fixed_bwd, (fewer.bwd + fewer.fixed_bwd) * (1 - 1e-12));
            }
          }
        }
      }
    }
  }
}

TEST(RoutedExperts, WithoutComputeUnitsTheGemmsAreTheFlops) {
  // compute_units = 0, no overhead, every GEMM compute bound: the forward
  // GEMMs are k·2·t·3·H·F_e/(P·e) whatever EP (Mixtral-like, t = 4096:
  // 8 experts of 1024 rows); with them the activation (3 passes of
  // t·k·F_e·β) at HBM bandwidth. Apart, unscaled: the permutation, 2·2
  // passes over the t·k own and t·k·TPE computed token copies of H·β
  // (TPE = 1: 4·(t·k + t·k)·H·β), forward and backward alike.
  const ModelSpec m = moe(8, 2, 4096, 14336);
  const DeviceSpec d = h100_like(0);
  const double t = 4096;
  const double gemms = 2 * 2.0 * t * 3 * 4096 * 14336 / kRate;
  const double act = 3.0 * t * 2 * 14336 * kBf16 / kHbm;
  const double permute = 4.0 * (t * 2 + t * 2 * 1) * 4096 * kBf16 / kHbm;
  for (int ep : {1, 2, 4, 8}) {
    const RoutedExpertTime r = routed_expert_time(m, d, t, ep, 1);
    EXPECT_REL(r.act_fwd, act);
    EXPECT_REL(r.fwd, gemms + act) << "EP " << ep;
    EXPECT_REL(r.bwd, 2 * gemms + 2 * act) << "EP " << ep;
    EXPECT_REL(r.fixed_fwd, permute) << "EP " << ep;
    EXPECT_REL(r.fixed_bwd, permute) << "EP " << ep;
  }
  // The wave model is never faster than that (units at the same device
  // rate), and moves the same permutation bytes.
  for (int ep : {1, 2, 4, 8}) {
    const RoutedExpertTime r = routed_expert_time(m, h100_like(), t, ep, 1);
    EXPECT_GE(r.fwd, gemms + act);
    EXPECT_REL(r.fixed_fwd, permute);
  }
}

TEST(RoutedExperts, GroupedGemmsOfTheLocalExpertsOnFourStreams) {
  // With compute units: the E/EP local experts' GEMMs run as grouped GEMMs
  // on Transformer Engine's 4 streams, over t·k·TPE/(E/EP) rows each, width
  // F_e/TPE; up + gate (2·w) then down, and the four backward GEMMs.
  EXPECT_EQ(kGroupedGemmStreams, 4);
  const DeviceSpec d = h100_like();
  struct Case {
    ModelSpec m;
    double t;
    int ep, tpe;
  };
  const Case cases[] = {{moe(8, 2, 4096, 14336), 4096, 2, 1},  // 4 experts of 2048 rows
                        {moe(8, 2, 4096, 14336), 1024, 1, 2},  // 8 of 512 rows, width 7168
                        {moe(64, 8, 2048, 1408), 2048, 4, 1},  // 16 of 1024 rows
                        {moe(64, 8, 2048, 1408), 512, 8, 1}};  // 8 of 512 rows
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message()
                 << "E " << c.m.num_experts << " t " << c.t << " EP " << c.ep << " TPE " << c.tpe);
    const int local = c.m.num_experts / c.ep;
    const double h = c.m.hidden;
    const double rows = c.t * c.m.top_k * c.tpe / local;
    const double w = static_cast<double>(c.m.expert_ffn_hidden) / c.tpe;
    auto g = [&](double m, double n, double k) {
      return grouped_gemm_time(local, 4, m, n, k, d, kBf16);
    };
    const double act = 3.0 * c.t * c.m.top_k * c.tpe * w * kBf16 / kHbm;
    // permute/unpermute over the own t·k copies, sort/unsort over the t·k·TPE
    // computed ones, each read and written.
    const double permute = 4.0 * (c.t * c.m.top_k + c.t * c.m.top_k * c.tpe) * h * kBf16 / kHbm;
    const RoutedExpertTime r = routed_expert_time(c.m, d, c.t, c.ep, c.tpe);
    EXPECT_REL(r.act_fwd, act);
    EXPECT_REL(r.fwd, g(rows, 2 * w, h) + g(rows, h, w) + act);
    EXPECT_REL(r.bwd,
               g(rows, w, h) + g(w, h, rows) + g(rows, h, 2 * w) + g(h, 2 * w, rows) + 2 * act);
    EXPECT_REL(r.fixed_fwd, permute);  // no kernel overhead on h100_like()
    EXPECT_REL(r.fixed_bwd, permute);
  }
}

TEST(RoutedExperts, RejectsEpNotDividingTheExperts) {
  const DeviceSpec d = h100_like();
  EXPECT_THROW(routed_expert_time(moe(8, 2, 4096, 14336), d, 1024, 3, 1), ContractError);
  EXPECT_THROW(routed_expert_time(moe(8, 2, 4096, 14336), d, 1024, 1, 0), ContractError);
}

// ===========================================================================
// FP8 (docs/costmodel.md, "FP8"): linear layers and routed experts at the
// device's FP8 peak with 1-byte operands, plus the casts to FP8.

constexpr double kFp8Peak = 1979e12;  // H100 SXM dense FP8
constexpr double kFp8Rate = kFp8Peak * 0.75;

DeviceSpec h100_fp8(int compute_units = 132) {
  DeviceSpec d = h100_like(compute_units);
  d.fp8_peak_flops = kFp8Peak;
  return d;
}

// The device as its FP8 GEMMs see it, built here: the FP8 peak as its peak.
DeviceSpec at_fp8_peak(const DeviceSpec& d) {
  DeviceSpec e = d;
  e.peak_flops = d.fp8_peak_flops;
  return e;
}

// The roofline of an FP8 GEMM without compute units: 2mnk at the FP8 rate,
// never faster than A, B and C through HBM at one byte each.
double fp8_roofline(double m, double n, double k) {
  return std::max(2.0 * m * n * k / kFp8Rate, (m * k + k * n + m * n) / kHbm);
}

constexpr Fp8Recipe kRecipes[] = {Fp8Recipe::kDelayed, Fp8Recipe::kTensorwise,
                                  Fp8Recipe::kBlockwise, Fp8Recipe::kMxfp8};

// Read bf16 (2), write the rowwise and columnwise FP8 copies (1 + 1);
// tensor-wise current scaling reads the tensor once more for its amax (+2).
double cast_bytes(Fp8Recipe r) { return r == Fp8Recipe::kTensorwise ? 6.0 : 4.0; }

// Core attention's share of peak (docs/costmodel.md, "Core attention"):
// the cuDNN bars of the FlashAttention-3 paper over the H100's 989 TFLOP/s,
// the causal backward scaled by what the mask costs the forward.
TEST(AttentionEfficiency, TablePointsByHand) {
  // head width 128 at 4k: causal forward 518; backward 499 · 518 / 609.
  AttentionEfficiency e = attention_efficiency(128, 4096);
  EXPECT_REL(e.fwd, 518.0 / 989.0);
  EXPECT_REL(e.bwd, 499.0 * 518.0 / 609.0 / 989.0);
  // head width 64 at 16k: 388; 433 · 388 / 413.
  e = attention_efficiency(64, 16384);
  EXPECT_REL(e.fwd, 388.0 / 989.0);
  EXPECT_REL(e.bwd, 433.0 * 388.0 / 413.0 / 989.0);
}

TEST(AttentionEfficiency, InterpolatesInLog2OfLengthAndHeadWidth) {
  // Half-way (in log2) between 2k and 4k at head width 128.
  const double len = 2048.0 * std::sqrt(2.0);
  const double causal = (484.0 + 518.0) / 2;
  const double fwd = (617.0 + 609.0) / 2;
  const double bwd = (465.0 + 499.0) / 2;
  AttentionEfficiency e = attention_efficiency(128, len);
  EXPECT_REL(e.fwd, causal / 989.0);
  EXPECT_REL(e.bwd, bwd * causal / fwd / 989.0);
  // Half-way between head widths 64 and 128 (~90.5) at 8k.
  e = attention_efficiency(64.0 * std::sqrt(2.0), 8192);
  EXPECT_REL(e.fwd, (379.0 + 529.0) / 2 / 989.0);
}

TEST(AttentionEfficiency, ClampedOutsideTheTable) {
  // Longer than 16k is 16k; wider than 128 (MLA's 192) is 128; shorter
  // than 512 is 512; narrower than 64 is 64.
  EXPECT_EQ(attention_efficiency(192, 131072).fwd, attention_efficiency(128, 16384).fwd);
  EXPECT_EQ(attention_efficiency(256, 65536).bwd, attention_efficiency(128, 16384).bwd);
  EXPECT_EQ(attention_efficiency(32, 100).fwd, attention_efficiency(64, 512).fwd);
  EXPECT_REL(attention_efficiency(64, 512).fwd, 225.0 / 989.0);
}

TEST(AttentionEfficiency, BelowTheGemmShareAndRisingWithLength) {
  for (double hd : {64.0, 96.0, 128.0}) {
    double prev_f = 0, prev_b = 0;
    for (double len = 512; len <= 16384; len *= 2) {
      const AttentionEfficiency e = attention_efficiency(hd, len);
      EXPECT_LT(e.fwd, 0.75) << hd << " " << len;
      EXPECT_LT(e.bwd, 0.75) << hd << " " << len;
      EXPECT_GT(e.fwd, prev_f) << hd << " " << len;
      EXPECT_GT(e.bwd, prev_b) << hd << " " << len;
      prev_f = e.fwd;
      prev_b = e.bwd;
    }
  }
}

TEST(Fp8, CastBytesPerElement) {
  EXPECT_EQ(fp8_cast_bytes(Fp8Recipe::kDelayed), 4.0);
  EXPECT_EQ(fp8_cast_bytes(Fp8Recipe::kTensorwise), 6.0);
  EXPECT_EQ(fp8_cast_bytes(Fp8Recipe::kBlockwise), 4.0);
  EXPECT_EQ(fp8_cast_bytes(Fp8Recipe::kMxfp8), 4.0);
}

// Compute bound (large and deep), memory bound (a few rows: the 1-byte
// operands matter) and a Mixtral FC1-like shape.
const std::vector<std::vector<double>> kLinearShapes = {
    {4096, 4096, 4096}, {8, 4096, 4096}, {2048, 28672, 4096}, {512, 3072, 4096}};

TEST(Fp8, LinearTimeInBf16AndFp16IsTheGemmAndTwiceIt) {
  for (int units : {132, 0}) {
    // A device without FP8 still runs bf16 linear layers.
    for (const DeviceSpec& d : {h100_like(units), h100_fp8(units)}) {
      for (const auto& s : kLinearShapes) {
        SCOPED_TRACE(testing::Message() << "units " << units << " fp8 peak " << d.fp8_peak_flops
                                        << " shape " << s[0] << " x " << s[1] << " x " << s[2]);
        const double g = gemm_time(s[0], s[1], s[2], d, kBf16);
        for (Precision p : {Precision::kBf16, Precision::kFp16}) {
          for (Fp8Recipe r : kRecipes) {
            const LinearTime l = linear_time(s[0], s[1], s[2], d, p, r);
            EXPECT_EQ(l.fwd, g);
            EXPECT_EQ(l.bwd, 2.0 * g);
          }
        }
      }
    }
  }
}

TEST(Fp8, LinearTimeInFp8IsTheGemmAtTheFp8PeakPlusTheCasts) {
  for (const auto& s : kLinearShapes) {
    const double m = s[0], n = s[1], k = s[2];
    for (Fp8Recipe r : kRecipes) {
      SCOPED_TRACE(testing::Message() << to_string(r) << " " << m << " x " << n << " x " << k);
      const double c = cast_bytes(r);
      {
        // With compute units: the shape model of an FP8-peak device with
        // 1-byte operands; forward casts the input (m x k), backward the
        // output gradient (m x n), at HBM bandwidth.
        const DeviceSpec d = h100_fp8();
        const double g = gemm_time(m, n, k, at_fp8_peak(d), 1.0);
        const LinearTime l = linear_time(m, n, k, d, Precision::kFp8, r);
        EXPECT_REL(l.fwd, g + c * m * k / kHbm);
        EXPECT_REL(l.bwd, 2.0 * g + c * m * n / kHbm);
        // Not the bf16 peak; and 1-byte operands, which the memory-bound
        // shape shows.
        EXPECT_NE(g, gemm_time(m, n, k, d, 1.0));
        if (m == 8) {
          EXPECT_NE(g, gemm_time(m, n, k, at_fp8_peak(d), kBf16));
        }
      }
      {
        // Without compute units: the FP8 roofline by hand.
        const DeviceSpec d = h100_fp8(0);
        const double g = fp8_roofline(m, n, k);
        const LinearTime l = linear_time(m, n, k, d, Precision::kFp8, r);
        EXPECT_REL(l.fwd, g + c * m * k / kHbm);
        EXPECT_REL(l.bwd, 2.0 * g + c * m * n / kHbm);
      }
    }
  }
  // The memory-bound GEMV-like shape moves one byte per operand element.
  EXPECT_REL(fp8_roofline(8, 4096, 4096), (8.0 * 4096 + 4096.0 * 4096 + 8.0 * 4096) / kHbm);
  // The compute-bound square one runs at the FP8 rate.
  EXPECT_REL(fp8_roofline(4096, 4096, 4096), 2.0 * 4096 * 4096 * 4096 / kFp8Rate);
}

TEST(Fp8, DeviceWithoutFp8IsAContractError) {
  const DeviceSpec d = h100_like();  // fp8_peak_flops = 0
  ASSERT_EQ(d.fp8_peak_flops, 0.0);
  for (Fp8Recipe r : kRecipes) {
    EXPECT_THROW(linear_time(4096, 4096, 4096, d, Precision::kFp8, r), ContractError);
    EXPECT_THROW(routed_expert_time(moe(8, 2, 4096, 14336), d, 1024, 2, 1, Precision::kFp8, r),
                 ContractError);
  }
  EXPECT_NO_THROW(linear_time(4096, 4096, 4096, d, Precision::kBf16, Fp8Recipe::kDelayed));
  EXPECT_NO_THROW(routed_expert_time(moe(8, 2, 4096, 14336), d, 1024, 2, 1));
}

TEST(Fp8, RoutedExpertsByHand) {
  // E = 8, k = 2, H = 1024, F_e = 2048, t = 512, EP = 2, TPE = 2: 4 local
  // experts (one round of the 4 streams), 2048 token copies, 512 rows per
  // expert, width 1024. Without compute units every grouped GEMM is the
  // FP8 roofline of its 4 GEMMs together.
  for (MlpKind kind : {MlpKind::kSwiGlu, MlpKind::kGelu}) {
    ModelSpec m = moe(8, 2, 1024, 2048);
    m.mlp = kind;
    const bool gated = kind == MlpKind::kSwiGlu;
    const double up = gated ? 2.0 : 1.0;
    const double passes = gated ? 3.0 : 2.0;
    DeviceSpec d = h100_fp8(0);
    d.kernel_overhead = 1e-5;
    const double t = 512, h = 1024, copies = 2048, rows = 512, w = 1024;
    auto four = [](double mm, double nn, double kk) {
      return std::max(4 * 2.0 * mm * nn * kk / kFp8Rate, 4 * (mm * kk + kk * nn + mm * nn) / kHbm);
    };
    const double act = passes * copies * w * kBf16 / kHbm;  // the activation stays bf16
    const RoutedExpertTime bf16 = routed_expert_time(m, d, t, 2, 2);
    for (Fp8Recipe r : kRecipes) {
      SCOPED_TRACE(testing::Message() << (gated ? "swiglu " : "gelu ") << to_string(r));
      const double c = cast_bytes(r);
      const RoutedExpertTime f = routed_expert_time(m, d, t, 2, 2, Precision::kFp8, r);
      EXPECT_REL(f.fwd,
                 four(rows, up * w, h) + four(rows, h, w) + act + c * copies * (h + w) / kHbm);
      EXPECT_REL(f.bwd, four(rows, w, h) + four(w, h, rows) + four(rows, h, up * w) +
                            four(h, up * w, rows) + 2 * act + c * copies * (h + up * w) / kHbm);
      // Permutation, launches and the activation alone: as in bf16.
      EXPECT_EQ(f.act_fwd, bf16.act_fwd);
      EXPECT_REL(f.act_fwd, act);
      EXPECT_EQ(f.fixed_fwd, bf16.fixed_fwd);
      EXPECT_EQ(f.fixed_bwd, bf16.fixed_bwd);
      EXPECT_EQ(f.kernels_fwd, bf16.kernels_fwd);
      EXPECT_EQ(f.kernels_bwd, bf16.kernels_bwd);
      EXPECT_REL(f.fixed_fwd, 4.0 * (t * 2 + copies) * h * kBf16 / kHbm + 8 * 1e-5);
    }
  }
  // Precision::kBf16 and kFp16 ignore the recipe: the bf16 times.
  const ModelSpec m = moe(8, 2, 1024, 2048);
  const RoutedExpertTime a = routed_expert_time(m, h100_fp8(), 512, 2, 2);
  for (Precision p : {Precision::kBf16, Precision::kFp16}) {
    const RoutedExpertTime b =
        routed_expert_time(m, h100_fp8(), 512, 2, 2, p, Fp8Recipe::kTensorwise);
    EXPECT_EQ(b.fwd, a.fwd);
    EXPECT_EQ(b.bwd, a.bwd);
  }
}

// With compute units the grouped GEMMs are the shape model at the FP8 peak
// with 1-byte operands.
TEST(Fp8, RoutedExpertsWithComputeUnits) {
  const ModelSpec m = moe(8, 2, 4096, 14336);
  const DeviceSpec d = h100_fp8();
  const DeviceSpec e = at_fp8_peak(d);
  // t = 4096, EP = 2, TPE = 1: 4 local experts of 2048 rows, width 14336.
  const double t = 4096, h = 4096, copies = t * 2, rows = copies / 4, w = 14336;
  auto g = [&](double mm, double nn, double kk) {
    return grouped_gemm_time(4, 4, mm, nn, kk, e, 1.0);
  };
  const double act = 3.0 * copies * w * kBf16 / kHbm;
  const RoutedExpertTime f =
      routed_expert_time(m, d, t, 2, 1, Precision::kFp8, Fp8Recipe::kTensorwise);
  EXPECT_REL(f.fwd, g(rows, 2 * w, h) + g(rows, h, w) + act + 6.0 * copies * (h + w) / kHbm);
  EXPECT_REL(f.bwd, g(rows, w, h) + g(w, h, rows) + g(rows, h, 2 * w) + g(h, 2 * w, rows) +
                        2 * act + 6.0 * copies * (h + 2 * w) / kHbm);
}

// ===========================================================================
// Kernel overhead of the blocks (analytic compute entries and the layer)

ClusterSpec single(const DeviceSpec& d) {
  ClusterSpec c;
  c.name = "single";
  c.pools.push_back({d, 1, d.devices_per_node});
  return c;
}

Workload training_of(const ModelSpec& m) {
  Workload w;
  w.model = m;
  w.training.seq_len = 2048;
  w.training.global_batch = 64;
  w.training.micro_batch = 1;
  w.training.imbalance = 1.0;  // f_imb = 1
  w.training.gamma = 1.0;
  return w;
}

ParallelConfig one_device() {
  ParallelConfig pi;
  pi.pp = 1;
  pi.tp = 1;
  pi.cp = 1;
  pi.ep = 1;
  pi.tpe = 1;
  pi.dp = 1;
  pi.micro_batch = 1;
  return pi;
}

constexpr double kOverhead = 1e-5;

TEST(KernelOverhead, EveryBlockEntryAddsItsKernels) {
  ModelSpec m = moe(8, 2, 2048, 4096);
  m.shared_expert_ffn_hidden = 2048;
  m.moe_layers = {0, 1};
  const Workload w = training_of(m);
  DeviceSpec some = h100_like();
  some.kernel_overhead = kOverhead;
  const ClusterSpec c0 = single(h100_like());
  const ClusterSpec c1 = single(some);
  const ProfileTables t0 = make_analytic_tables(w, c0, 1, {1, 2}, {1});
  const ProfileTables t1 = make_analytic_tables(w, c1, 1, {1, 2}, {1});
  for (int tp : {1, 2}) {
    SCOPED_TRACE(tp);
    const ComputeEntry& a = t0.compute[0].at({tp, 1});
    const ComputeEntry& b = t1.compute[0].at({tp, 1});
    // attention 7 (norm, QKV, rotary q and k, attention, out, residual)
    EXPECT_REL(b.attention_fwd - a.attention_fwd, 7 * kOverhead);
    EXPECT_REL(b.attention_bwd - a.attention_bwd, 14 * kOverhead);
    // dense MLP 5 (norm, FC1, activation, FC2, residual)
    EXPECT_REL(b.dense_mlp_fwd - a.dense_mlp_fwd, 5 * kOverhead);
    EXPECT_REL(b.dense_mlp_bwd - a.dense_mlp_bwd, 10 * kOverhead);
    // MoE block around the experts 12, shared experts 3
    EXPECT_REL(b.router_fwd - a.router_fwd, 12 * kOverhead);
    EXPECT_REL(b.router_bwd - a.router_bwd, 24 * kOverhead);
    EXPECT_REL(b.shared_fwd - a.shared_fwd, 3 * kOverhead);
    EXPECT_REL(b.shared_bwd - a.shared_bwd, 6 * kOverhead);
    // embedding 1, output layer + loss 4
    EXPECT_REL(b.embedding_fwd - a.embedding_fwd, 1 * kOverhead);
    EXPECT_REL(b.embedding_bwd - a.embedding_bwd, 2 * kOverhead);
    EXPECT_REL(b.output_fwd - a.output_fwd, 4 * kOverhead);
    EXPECT_REL(b.output_bwd - a.output_bwd, 8 * kOverhead);
    // The activation-only and core-attention parts launch nothing of their own.
    EXPECT_EQ(b.core_attention_fwd, a.core_attention_fwd);
    EXPECT_EQ(b.dense_act_fwd, a.dense_act_fwd);
  }
}

TEST(KernelOverhead, DenseLayerForwardAddsTwelveKernels) {
  // Two devices differing only in kernel_overhead: a dense layer's forward
  // differs by (attention 7 + MLP 5)·overhead, its backward by twice that.
  const Workload w = training_of(moe(8, 2, 2048, 4096));
  ModelSpec dense = w.model;
  dense.num_experts = 0;
  dense.top_k = 0;
  dense.expert_ffn_hidden = 0;
  dense.moe_layers.clear();
  const Workload wd{dense, w.training};
  DeviceSpec some = h100_like();
  some.kernel_overhead = kOverhead;
  const ClusterSpec c0 = single(h100_like());
  const ClusterSpec c1 = single(some);
  const ProfileTables t0 = make_analytic_tables(wd, c0, 1, {1}, {1});
  const ProfileTables t1 = make_analytic_tables(wd, c1, 1, {1}, {1});
  const TypeCosts a = CostModel(wd, c0, t0).type_costs(one_device(), 0);
  const TypeCosts b = CostModel(wd, c1, t1).type_costs(one_device(), 0);
  EXPECT_REL(b.dense.fwd_s - a.dense.fwd_s, 12 * kOverhead);
  EXPECT_REL(b.dense.bwd_s - a.dense.bwd_s, 24 * kOverhead);
  EXPECT_REL(b.dense.fwd_parts.compute - a.dense.fwd_parts.compute, 12 * kOverhead);
  EXPECT_EQ(b.dense.fwd_parts.tp, a.dense.fwd_parts.tp);
}

TEST(KernelOverhead, MoeLayerAddsItsBlocksAndTwoKernelsPerLocalExpert) {
  // Attention 7 + MoE block 12 + shared experts 3 + 2·E/EP expert GEMMs in
  // the forward, twice that in the backward, whatever the imbalance factor
  // and η: the routed experts' launches are outside their scaling (f_imb = 1,
  // η = 1 as the analytic tables have it; and f_imb = 1.6, η = 0.7).
  ModelSpec m = moe(8, 2, 2048, 4096);
  m.shared_expert_ffn_hidden = 2048;
  DeviceSpec some = h100_like();
  some.kernel_overhead = kOverhead;
  const ClusterSpec c0 = single(h100_like());
  const ClusterSpec c1 = single(some);
  for (const auto& [rho, eta] : {std::pair{1.0, 1.0}, std::pair{1.6, 0.7}}) {
    Workload w = training_of(m);
    w.training.imbalance = rho;  // γ = 1: f_imb = ρ
    ProfileTables t0 = make_analytic_tables(w, c0, 1, {1}, {1});
    ProfileTables t1 = make_analytic_tables(w, c1, 1, {1}, {1});
    t0.devices[0].eta = eta;
    t1.devices[0].eta = eta;
    for (int ep : {1, 2, 8}) {
      SCOPED_TRACE(testing::Message() << "f_imb " << rho << " eta " << eta << " EP " << ep);
      ParallelConfig pi = one_device();
      pi.ep = ep;
      pi.dp = ep;
      const TypeCosts a = CostModel(w, c0, t0).type_costs(pi, 0);
      const TypeCosts b = CostModel(w, c1, t1).type_costs(pi, 0);
      EXPECT_REL(b.moe.fwd_parts.compute - a.moe.fwd_parts.compute,
                 (7 + 12 + 3 + 2.0 * 8 / ep) * kOverhead);
      EXPECT_REL(b.moe.bwd_parts.compute - a.moe.bwd_parts.compute,
                 (14 + 24 + 6 + 4.0 * 8 / ep) * kOverhead);
    }
  }
}

}  // namespace
}  // namespace hapmoe
