// Fills the profile tables from the device catalog with a roofline model,
// so the planner works without measurements (docs/costmodel.md,
// "Analytic tables"). Measured profiles replace these values entry by entry.
#pragma once

#include <vector>

#include "costmodel/cluster.h"
#include "costmodel/model.h"
#include "costmodel/profile.h"

namespace hapmoe {

// Assumptions of the analytic generator, each documented and overridable.
struct AnalyticAssumptions {
  double memory_overhead_bytes = 2.0 * (1u << 30);  // context, NCCL, allocator
  double activation_scale = 1.0;                    // memory calibration
  double eta = 1.0;                                 // routed-expert kernel efficiency
  double elementwise_passes = 8.0;                  // tensor passes of norms/residuals per block
  double attention_bwd_factor = 2.5;                // flash-attention backward / forward
  // The share of a link's line rate NCCL's collectives move (docs/costmodel.md,
  // "Analytic communication table"): over NVLink 370 of 450 GB/s ("with the
  // protocol overhead (~20%)", NCCL's maintainer in NVIDIA/nccl-tests issue
  // 212), over a 400 Gb/s NIC 48.5 of 50 GB/s ("up to 48-49GB/s per NIC",
  // NVIDIA in nccl-tests issue 267). Taken for every device's node link and
  // NIC, and for the links between device types.
  double node_link_efficiency = 370.0 / 450.0;
  double nic_efficiency = 48.5 / 50.0;
};

// Compute entries for every (tp, cp) pair given, at micro-batch size
// `micro_batch`; communication entries for every link kind of the cluster.
ProfileTables make_analytic_tables(const Workload& workload, const ClusterSpec& cluster,
                                   int micro_batch, const std::vector<int>& tp_values,
                                   const std::vector<int>& cp_values,
                                   const AnalyticAssumptions& assumptions = {});

// Time of one GEMM (m x k) * (k x n) in `bytes_per_element` precision,
// the device's kernel overhead not included (docs/costmodel.md, "GEMM
// efficiency"): the output tiles run in waves over the device's compute
// units, with the tile shape and split-K a GEMM library would pick, at the
// device's achievable share of peak; never less than moving A, B and C
// through HBM once. Without a compute-unit count: 2mnk / (peak x
// efficiency), the same lower bound.
double gemm_time(double m, double n, double k, const DeviceSpec& device, double bytes_per_element);

// `count` GEMMs of one shape launched `streams` at a time on concurrent
// streams (Transformer Engine's GroupedLinear for the local experts): the
// tiles of the GEMMs in flight share the waves. Kernel overhead not
// included.
double grouped_gemm_time(int count, int streams, double m, double n, double k,
                         const DeviceSpec& device, double bytes_per_element);

// The routed experts of one MoE layer on one device for one micro-batch
// (docs/costmodel.md, "Routed experts"), with balanced routing and eta = 1.
// `sp_tokens` tokens per device (b*S/(CP*TP)); each device holds E/EP
// experts, each of width F_e/TPE, and receives sp_tokens * k * TPE token
// copies.
struct RoutedExpertTime {
  double fwd = 0;      // grouped GEMMs + activation function: what imbalance,
  double bwd = 0;      // kernel efficiency eta and a measured FFN scale
  double act_fwd = 0;  // the activation function alone
  double wgrad = 0;    // the weight-gradient GEMMs, part of bwd
  // Token permutation and the experts' kernel overhead, which grow with
  // neither imbalance nor eta.
  double fixed_fwd = 0;
  double fixed_bwd = 0;
  double kernels_fwd = 0, kernels_bwd = 0;  // kernels launched
};
RoutedExpertTime routed_expert_time(const ModelSpec& model, const DeviceSpec& device,
                                    double sp_tokens, int ep, int tpe,
                                    Precision precision = Precision::kBf16,
                                    Fp8Recipe recipe = Fp8Recipe::kDelayed);

// The share of a device's dense peak that fused causal attention reaches
// (docs/costmodel.md, "Core attention"): cuDNN's fused attention, the
// kernel Transformer Engine runs for Megatron-LM on Hopper, as measured on
// an H100 SXM5 in the FlashAttention-3 paper (Shah et al., 2024,
// arXiv:2407.08608, Figs. 5 and 6), interpolated in log2 of the head
// width (64..128) and of the kernel's sequence length (512..16k), clamped
// outside. The backward, which the paper measures without the causal mask
// only, loses to the mask what the forward loses. Taken as the same share
// of peak on every device.
struct AttentionEfficiency {
  double fwd = 0;
  double bwd = 0;
};
AttentionEfficiency attention_efficiency(double head_dim, double seq_len);

// A linear layer's GEMM (m x k) * (k x n) in the training precision
// (docs/costmodel.md, "FP8"): its forward and its backward (data and weight
// gradients). In FP8 the GEMMs run at the device's FP8 peak with the same
// shape model, and the layer casts its input (forward) and its output
// gradient (backward) to FP8, rowwise and columnwise. Kernel overhead not
// included.
struct LinearTime {
  double fwd = 0;
  double bwd = 0;
};
LinearTime linear_time(double m, double n, double k, const DeviceSpec& device, Precision precision,
                       Fp8Recipe recipe);

// Bytes a cast to FP8 moves per element: read bf16 (2), write the rowwise
// and columnwise FP8 copies (1 + 1); tensor-wise current scaling first
// reads the tensor once more for its amax (+2).
double fp8_cast_bytes(Fp8Recipe recipe);

// Concurrent streams of Transformer Engine's grouped GEMM
// (nvte_get_num_compute_streams() in transformer_engine/common/util/
// multi_stream.cpp).
inline constexpr int kGroupedGemmStreams = 4;

}  // namespace hapmoe
