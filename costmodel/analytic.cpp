// Analytic (roofline) profile tables.
//
// Every GEMM is timed as max(2mnk / (peak * gemm_efficiency),
// bytes(A, B, C) / HBM bandwidth); core attention is compute bound (fused
// causal attention at its measured share of peak); norms, residuals and
// activation functions are memory bound. Backward GEMMs cost twice the
// forward (data and weight gradients). The shapes are those of one device
// under TP with sequence parallelism and CP: docs/costmodel.md, "Compute",
// gives every formula.
#include "costmodel/analytic.h"

#include <array>
#include <cstdint>
#include <cstring>
#include <unordered_map>

#include <algorithm>
#include <cmath>
#include <limits>

#include "costmodel/errors.h"

namespace hapmoe {

namespace {

// The output tiles a GEMM library picks among (NVIDIA, "Matrix
// Multiplication Background User's Guide", DU-09799-001, 2.3: cuBLAS tiles
// from 256x128 down to 64x64), with each tile's throughput per compute unit
// relative to the largest: proportional to its arithmetic intensity
// rows*cols/(rows+cols) (operand bytes loaded per multiply-add), the
// guide's reason that larger tiles are more efficient (docs/costmodel.md,
// "GEMM efficiency").
struct Tile {
  double rows, cols;
};
constexpr Tile kTiles[] = {{256, 128}, {128, 256}, {128, 128}, {128, 64}, {64, 128}, {64, 64}};
constexpr double kLargestIntensity = 256.0 * 128.0 / (256.0 + 128.0);
// Split-K factors tried; each split keeps at least kMinSplitDepth of k.
constexpr int kSplits[] = {1, 2, 4, 8, 16};
constexpr double kMinSplitDepth = 256.0;
constexpr double kFp32Bytes = 4.0;

double ceil_div(double a, double b) { return std::ceil(a / b - 1e-9); }

// `count` GEMMs of one shape in flight together, at matrix peak `peak`
// (the device's BF16 or FP8 one).
double concurrent_gemms_uncached(int count, double m, double n, double k, const DeviceSpec& d,
                                 double peak, double bytes_per_element) {
  const double rate = peak * d.gemm_efficiency;  // FLOP/s, the whole device
  const double traffic = count * bytes_per_element * (m * k + k * n + m * n) / d.hbm_bandwidth;
  if (d.compute_units <= 0 || m <= 0 || n <= 0 || k <= 0) {
    return std::max(count * 2.0 * m * n * k / rate, traffic);
  }
  const double units = d.compute_units;
  const double unit_rate = rate / units;
  double best = std::numeric_limits<double>::infinity();
  for (const Tile& t : kTiles) {
    const double intensity = t.rows * t.cols / (t.rows + t.cols);
    const double tile_rate = unit_rate * intensity / kLargestIntensity;
    const double tiles = count * ceil_div(m, t.rows) * ceil_div(n, t.cols);
    for (int split : kSplits) {
      if (split > 1 && k / split < kMinSplitDepth) break;
      const double waves = ceil_div(tiles * split, units);
      const double depth = ceil_div(k, split);
      double time = waves * 2.0 * t.rows * t.cols * depth / tile_rate;
      // Split-K writes fp32 partial sums and reads them back to reduce.
      if (split > 1) time += count * 2.0 * split * m * n * kFp32Bytes / d.hbm_bandwidth;
      best = std::min(best, time);
    }
  }
  return std::max(best, traffic);
}

// The same, remembered per thread: a search costs the same few shapes for
// every configuration and job variant (a quarter of `plan --space all`'s
// time went to this tile search). Keyed by every input the result reads,
// so it is bit-identical to computing it.
struct GemmKey {
  std::array<double, 9> v;
  bool operator==(const GemmKey&) const = default;
};
struct GemmKeyHash {
  std::size_t operator()(const GemmKey& key) const {
    std::uint64_t h = 1469598103934665603ull;
    for (const double x : key.v) {
      std::uint64_t bits = 0;
      std::memcpy(&bits, &x, sizeof bits);
      h = (h ^ bits) * 1099511628211ull;
    }
    return static_cast<std::size_t>(h ^ (h >> 29));
  }
};

double concurrent_gemms(int count, double m, double n, double k, const DeviceSpec& d, double peak,
                        double bytes_per_element) {
  thread_local std::unordered_map<GemmKey, double, GemmKeyHash> memo;
  const GemmKey key{{static_cast<double>(count), m, n, k, peak, bytes_per_element,
                     d.gemm_efficiency, d.hbm_bandwidth, static_cast<double>(d.compute_units)}};
  if (const auto it = memo.find(key); it != memo.end()) return it->second;
  if (memo.size() >= (1u << 16)) memo.clear();  // bounded: a new search's shapes refill it
  const double t = concurrent_gemms_uncached(count, m, n, k, d, peak, bytes_per_element);
  memo.emplace(key, t);
  return t;
}

}  // namespace

AttentionEfficiency attention_efficiency(double head_dim, double seq_len) {
  // cuDNN's bars in the FlashAttention-3 paper (arXiv:2407.08608, H100 80GB
  // SXM5, BF16, batch x length = 16k tokens, 2048 hidden), TFLOP/s at
  // lengths 512, 1k, 2k, 4k, 8k, 16k: forward with the causal mask
  // (Fig. 5), forward and backward without it (Figs. 5 and 6).
  struct Curve {
    std::array<double, 6> causal_fwd, fwd, bwd;
  };
  static constexpr Curve kHead64{{225, 288, 334, 363, 379, 388},
                                 {335, 373, 395, 408, 412, 413},
                                 {266, 348, 395, 417, 432, 433}};
  static constexpr Curve kHead128{{315, 410, 484, 518, 529, 539},
                                  {497, 574, 617, 609, 600, 595},
                                  {305, 408, 465, 499, 518, 516}};
  static constexpr double kH100Peak = 989.0;  // TFLOP/s, dense BF16, as the catalog
  // Position in log2 between the table's points, clamped to its ends.
  auto position = [](double x, double lo, double steps) {
    return std::clamp(std::log2(std::max(x, 1.0) / lo), 0.0, steps);
  };
  const double at_len = position(seq_len, 512.0, 5.0);
  const auto i = std::min(static_cast<std::size_t>(at_len), std::size_t{4});
  const double f = at_len - static_cast<double>(i);
  auto along = [&](const std::array<double, 6>& c) { return c[i] + f * (c[i + 1] - c[i]); };
  const double g = position(head_dim, 64.0, 1.0);
  auto across = [&](auto member) {
    return along(kHead64.*member) + g * (along(kHead128.*member) - along(kHead64.*member));
  };
  const double causal_fwd = across(&Curve::causal_fwd);
  AttentionEfficiency e;
  e.fwd = causal_fwd / kH100Peak;
  e.bwd = across(&Curve::bwd) * (causal_fwd / across(&Curve::fwd)) / kH100Peak;
  return e;
}

double gemm_time(double m, double n, double k, const DeviceSpec& d, double bytes_per_element) {
  return concurrent_gemms(1, m, n, k, d, d.peak_flops, bytes_per_element);
}

namespace {

double grouped_gemms(int count, int streams, double m, double n, double k, const DeviceSpec& d,
                     double peak, double bytes_per_element) {
  HAPMOE_REQUIRE(count >= 0 && streams >= 1, "grouped_gemm_time: bad count or streams");
  const int rounds = count / streams;
  const int rest = count % streams;
  double t = rounds * concurrent_gemms(streams, m, n, k, d, peak, bytes_per_element);
  if (rest > 0) t += concurrent_gemms(rest, m, n, k, d, peak, bytes_per_element);
  return t;
}

}  // namespace

double grouped_gemm_time(int count, int streams, double m, double n, double k, const DeviceSpec& d,
                         double bytes_per_element) {
  return grouped_gemms(count, streams, m, n, k, d, d.peak_flops, bytes_per_element);
}

double fp8_cast_bytes(Fp8Recipe recipe) {
  return recipe == Fp8Recipe::kTensorwise ? 2.0 + 1.0 + 1.0 + 2.0 : 2.0 + 1.0 + 1.0;
}

LinearTime linear_time(double m, double n, double k, const DeviceSpec& d, Precision precision,
                       Fp8Recipe recipe) {
  if (precision != Precision::kFp8) {
    const double g = gemm_time(m, n, k, d, 2.0);
    return {g, 2.0 * g};
  }
  HAPMOE_REQUIRE(d.fp8_peak_flops > 0, "linear_time: FP8 on a device without FP8");
  const double g = concurrent_gemms(1, m, n, k, d, d.fp8_peak_flops, 1.0);
  const double cast = fp8_cast_bytes(recipe) / d.hbm_bandwidth;
  return {g + cast * m * k, 2.0 * g + cast * m * n};
}

namespace {

// Kernels one forward pass launches per block (docs/costmodel.md, "Kernel
// overhead"), as Megatron-LM with Transformer Engine runs them; a backward
// pass launches twice as many (data and weight gradients).
constexpr double kAttentionKernels = 7;     // norm, QKV, rotary q and k, attention, out, residual
constexpr double kMlpKernels = 5;           // norm, FC1, activation, FC2, residual
constexpr double kMlaUpKernels = 4;         // q up, kv up, rotary q and k
constexpr double kMoeKernels = 12;          // norm, router GEMM, softmax, top-k, aux loss (2),
                                            // permute (2), token counts, activation, unpermute,
                                            // residual
constexpr double kSharedExpertKernels = 3;  // FC1, activation, FC2
constexpr double kExpertKernels = 2;        // per local expert: FC1, FC2
constexpr double kEmbeddingKernels = 1;
constexpr double kOutputKernels = 4;
constexpr double kMtpKernels = 5;  // embedding, two norms, concatenation, projection  // final
                                   // norm, output GEMM, cross entropy (2)
// Token permutation around the experts, per forward pass, each pass
// reading and writing every token copy it moves: permute before the
// dispatch and unpermute after the combine (the device's own t_sp * k
// copies), sort by expert after the dispatch and back before the combine
// (the t_sp * k * TPE copies it computes).
constexpr double kPermutePasses = 2 * 2;

}  // namespace

RoutedExpertTime routed_expert_time(const ModelSpec& m, const DeviceSpec& d, double sp_tokens,
                                    int ep, int tpe, Precision precision, Fp8Recipe recipe) {
  HAPMOE_REQUIRE(m.is_moe() && ep >= 1 && tpe >= 1 && m.num_experts % ep == 0,
                 "routed_expert_time: a MoE model and EP dividing its experts");
  const double beta = 2.0;
  const double h = m.hidden;
  const int local = m.num_experts / ep;
  const double copies = sp_tokens * m.top_k * tpe;  // token copies the device computes
  const double rows = copies / local;               // per local expert
  const double width = static_cast<double>(m.expert_ffn_hidden) / tpe;
  const bool gated = m.mlp == MlpKind::kSwiGlu;
  const double up = gated ? 2.0 : 1.0;
  const double act_passes = gated ? 3.0 : 2.0;
  const int s = kGroupedGemmStreams;
  const bool fp8 = precision == Precision::kFp8;
  HAPMOE_REQUIRE(!fp8 || d.fp8_peak_flops > 0, "routed_expert_time: FP8 on a device without FP8");
  const double peak = fp8 ? d.fp8_peak_flops : d.peak_flops;
  auto group = [&](double mm, double nn, double kk) {
    return grouped_gemms(local, s, mm, nn, kk, d, peak, fp8 ? 1.0 : beta);
  };
  // FP8: each expert GEMM casts its input forward and its output gradient
  // backward, over all the device's copies.
  const double cast = fp8 ? fp8_cast_bytes(recipe) / d.hbm_bandwidth : 0.0;
  RoutedExpertTime r;
  r.act_fwd = act_passes * copies * width * beta / d.hbm_bandwidth;
  const double permute =
      kPermutePasses * (sp_tokens * m.top_k + copies) * h * beta / d.hbm_bandwidth;
  r.kernels_fwd = kExpertKernels * local;
  r.kernels_bwd = 2.0 * r.kernels_fwd;
  r.fwd =
      group(rows, up * width, h) + group(rows, h, width) + r.act_fwd + cast * copies * (h + width);
  // Backward: data gradients (rows x K) and weight gradients (K summed
  // over the rows) of both GEMMs.
  r.bwd = group(rows, width, h) + group(width, h, rows) + group(rows, h, up * width) +
          group(h, up * width, rows) + 2.0 * r.act_fwd + cast * copies * (h + up * width);
  r.wgrad = group(width, h, rows) + group(h, up * width, rows);
  r.fixed_fwd = permute + r.kernels_fwd * d.kernel_overhead;
  r.fixed_bwd = permute + r.kernels_bwd * d.kernel_overhead;
  return r;
}

namespace {

struct Shapes {
  double tokens;     // b*S/CP: tokens of the device's sequence chunk
  double sp_tokens;  // b*S/(CP*TP): tokens held under sequence parallelism
  double heads;      // a/TP
  double kv_heads;   // g/TP
  double qk_dim;     // per-head query/key width
  double v_dim;      // per-head value width
  double seq;        // S, keys seen by the chunk (all, through CP)
};

ComputeEntry compute_entry(const Workload& w, const DeviceSpec& dev, int micro_batch, int tp,
                           int cp, const AnalyticAssumptions& as) {
  const ModelSpec& m = w.model;
  const double beta = 2.0;  // bf16/fp16 activations and weights
  const double h = m.hidden;
  Shapes s{};
  s.seq = w.training.seq_len;
  s.tokens = static_cast<double>(micro_batch) * s.seq / cp;
  s.sp_tokens = s.tokens / tp;
  s.heads = static_cast<double>(m.num_heads) / tp;
  s.kv_heads = static_cast<double>(m.num_kv_heads) / tp;
  s.qk_dim = m.mla.enabled() ? m.mla.qk_nope_head_dim + m.mla.qk_rope_head_dim : m.head_dim;
  s.v_dim = m.mla.enabled() ? m.mla.v_head_dim : m.head_dim;
  const double peak = dev.peak_flops * dev.gemm_efficiency;
  auto stream = [&](double bytes) { return bytes / dev.hbm_bandwidth; };
  const double block_elementwise = stream(as.elementwise_passes * s.sp_tokens * h * beta);
  auto kernels = [&](double n) { return n * dev.kernel_overhead; };

  ComputeEntry e;
  // The transformer layers' linear layers run in the training precision
  // (FP8: docs/costmodel.md, "FP8"); core attention, the router, the
  // embedding and the output layer stay in bf16.
  const Precision precision = w.training.precision;
  const Fp8Recipe recipe = w.training.fp8_recipe;
  auto linear = [&](double rows, double n, double k) {
    return linear_time(rows, n, k, dev, precision, recipe);
  };
  // Attention projections.
  double proj = 0.0;
  double proj_bwd = 0.0;
  auto add_proj = [&](double n, double k) {
    const LinearTime l = linear(s.tokens, n, k);
    proj += l.fwd;
    proj_bwd += l.bwd;
  };
  if (m.mla.enabled()) {
    const double a = s.heads;
    if (m.mla.q_lora_rank > 0) {
      add_proj(m.mla.q_lora_rank, h);
      add_proj(a * s.qk_dim, m.mla.q_lora_rank);
    } else {
      add_proj(a * s.qk_dim, h);
    }
    add_proj(m.mla.kv_lora_rank + m.mla.qk_rope_head_dim, h);
    add_proj(a * (m.mla.qk_nope_head_dim + s.v_dim), m.mla.kv_lora_rank);
    add_proj(h, a * s.v_dim);
    // What mla_up_proj recompute reruns: the query and key/value
    // up-projections and the rotary of q and k (read and write).
    const double q_up =
        m.mla.q_lora_rank > 0 ? linear(s.tokens, a * s.qk_dim, m.mla.q_lora_rank).fwd : 0.0;
    e.mla_up_fwd =
        q_up + linear(s.tokens, a * (m.mla.qk_nope_head_dim + s.v_dim), m.mla.kv_lora_rank).fwd +
        stream(2.0 * s.tokens * a * 2.0 * m.mla.qk_rope_head_dim * beta) + kernels(kMlaUpKernels);
  } else {
    add_proj((s.heads + 2.0 * s.kv_heads) * s.qk_dim, h);
    add_proj(h, s.heads * s.v_dim);
  }
  // Causal core attention: each query attends to S/2 keys on average, fewer
  // in sliding-window layers (the model's mean over its layers).
  const double core_flops =
      2.0 * s.tokens * mean_attended_keys(m, s.seq) * s.heads * (s.qk_dim + s.v_dim);
  // Core attention runs at the fused kernel's own share of peak at the
  // length it sees: the sequence, or its chunk per CP rank.
  const AttentionEfficiency ae =
      attention_efficiency(std::max(s.qk_dim, s.v_dim), s.seq / static_cast<double>(cp));
  e.core_attention_fwd = core_flops / (dev.peak_flops * ae.fwd);
  e.core_attention_bwd = as.attention_bwd_factor * core_flops / (dev.peak_flops * ae.bwd);
  // One RMSNorm: read and write the device's sequence-parallel tokens.
  e.norm_fwd = stream(2.0 * s.sp_tokens * h * beta) + kernels(1);
  e.attention_fwd = proj + e.core_attention_fwd + block_elementwise + kernels(kAttentionKernels);
  e.attention_bwd =
      proj_bwd + e.core_attention_bwd + 2.0 * block_elementwise + kernels(2.0 * kAttentionKernels);

  // MLPs: up (and gate) projection, activation, down projection.
  const bool gated = m.mlp == MlpKind::kSwiGlu;
  const double up_factor = gated ? 2.0 : 1.0;
  const double act_passes = gated ? 3.0 : 2.0;  // read gate+up, write; or read, write
  auto mlp = [&](double rows, double width, double& fwd, double& act, double& bwd) {
    if (width <= 0.0) {
      fwd = act = bwd = 0.0;
      return;
    }
    const LinearTime fc1 = linear(rows, up_factor * width, h);
    const LinearTime fc2 = linear(rows, h, width);
    act = stream(act_passes * rows * width * beta);
    fwd = fc1.fwd + fc2.fwd + act;
    bwd = fc1.bwd + fc2.bwd + 2.0 * act;
  };
  double dense_bwd = 0.0;
  mlp(s.tokens, m.ffn_hidden / static_cast<double>(tp), e.dense_mlp_fwd, e.dense_act_fwd,
      dense_bwd);
  e.dense_mlp_fwd += block_elementwise + kernels(kMlpKernels);
  e.dense_mlp_bwd = dense_bwd + 2.0 * block_elementwise + kernels(2.0 * kMlpKernels);

  if (m.is_moe()) {
    // One expert-width MLP over the device's (sequence-parallel) tokens, at
    // full GEMM efficiency; the cost model multiplies by top-k, divides by
    // eta_h and adds the expert-weight streaming bound.
    const double rows = s.sp_tokens;
    const double flops = 2.0 * rows * h * m.expert_ffn_hidden * (up_factor + 1.0);
    e.expert_act_fwd = stream(act_passes * rows * m.expert_ffn_hidden * beta);
    e.expert_fwd = flops / peak + e.expert_act_fwd;
    e.expert_bwd = 2.0 * flops / peak + 2.0 * e.expert_act_fwd;
    mlp(s.tokens, m.shared_expert_ffn_hidden / static_cast<double>(tp), e.shared_fwd,
        e.shared_act_fwd, e.shared_bwd);
    if (m.shared_expert_ffn_hidden > 0) {
      e.shared_fwd += kernels(kSharedExpertKernels);
      e.shared_bwd += kernels(2.0 * kSharedExpertKernels);
    }
    e.router_fwd = gemm_time(rows, m.num_experts, h, dev, beta) +
                   stream(3.0 * rows * m.num_experts * 4.0) + block_elementwise +
                   kernels(kMoeKernels);
    e.router_bwd = 2.0 * e.router_fwd;
  }
  // Embedding lookup (memory bound) and output layer + cross entropy.
  e.embedding_fwd = stream(2.0 * s.sp_tokens * h * beta) + kernels(kEmbeddingKernels);
  e.embedding_bwd = 2.0 * e.embedding_fwd;
  const double vocab_shard = padded_vocab(m, tp) / tp;
  const double logits_stream = stream(s.tokens * vocab_shard * 3.0 * 4.0);  // fp32 passes
  e.output_fwd =
      gemm_time(s.tokens, vocab_shard, h, dev, beta) + logits_stream + kernels(kOutputKernels);
  e.output_bwd = 2.0 * gemm_time(s.tokens, vocab_shard, h, dev, beta) + 2.0 * logits_stream +
                 kernels(2.0 * kOutputKernels);
  if (m.mtp_layers > 0) {
    // One MTP depth besides its layer and output pass: the shifted tokens'
    // embedding, the two norms and the concatenation (memory bound), and
    // the 2H -> H projection (a TP-sharded linear layer).
    const LinearTime mtp_proj = linear(s.tokens, h / tp, 2.0 * h);
    e.mtp_fwd = mtp_proj.fwd + stream(6.0 * s.sp_tokens * h * beta) + kernels(kMtpKernels);
    e.mtp_bwd = mtp_proj.bwd + stream(12.0 * s.sp_tokens * h * beta) + kernels(2.0 * kMtpKernels);
  }
  return e;
}

}  // namespace

ProfileTables make_analytic_tables(const Workload& workload, const ClusterSpec& cluster,
                                   int micro_batch, const std::vector<int>& tp_values,
                                   const std::vector<int>& cp_values,
                                   const AnalyticAssumptions& as) {
  HAPMOE_REQUIRE(micro_batch > 0, "make_analytic_tables: micro_batch must be positive");
  ProfileTables t;
  const int types = cluster.num_types();
  t.devices.resize(static_cast<std::size_t>(types));
  t.compute.resize(static_cast<std::size_t>(types));
  for (int h = 0; h < types; ++h) {
    const DeviceSpec& d = cluster.pools[static_cast<std::size_t>(h)].device;
    DeviceCoefficients& c = t.devices[static_cast<std::size_t>(h)];
    c.capacity_bytes = d.memory_bytes;
    c.eta = as.eta;
    c.hbm_bandwidth = d.hbm_bandwidth;
    // Adam step: read master, grad, m, v (4 B each); write master, m, v and
    // the bf16 parameter: 30 bytes per parameter at HBM bandwidth.
    c.optimizer_s_per_param = 30.0 / d.hbm_bandwidth;
    c.activation_scale = as.activation_scale;
    c.overhead_bytes = as.memory_overhead_bytes;
    for (int tp : tp_values) {
      for (int cp : cp_values) {
        HAPMOE_REQUIRE(tp > 0 && cp > 0, "make_analytic_tables: TP and CP must be positive");
        t.compute[static_cast<std::size_t>(h)][{tp, cp}] =
            compute_entry(workload, d, micro_batch, tp, cp, as);
      }
    }
    for (int p = 0; p < kNumPrimitives; ++p) {
      const auto prim = static_cast<Primitive>(p);
      t.comm.set(prim, {LinkKind::kIntraNode, h, h},
                 {d.intra_node_bandwidth * as.node_link_efficiency, d.intra_node_latency});
      t.comm.set(prim, {LinkKind::kInterNode, h, h},
                 {d.inter_node_bandwidth * as.nic_efficiency, d.inter_node_latency});
    }
  }
  for (int a = 0; a < types; ++a) {
    for (int b = a + 1; b < types; ++b) {
      for (int p = 0; p < kNumPrimitives; ++p) {
        t.comm.set(
            static_cast<Primitive>(p), {LinkKind::kCrossType, a, b},
            {cluster.cross_bandwidth(a, b) * as.nic_efficiency, cluster.cross_latency(a, b)});
      }
    }
  }
  return t;
}

}  // namespace hapmoe
