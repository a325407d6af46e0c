// A plan: one point of the 6-D space plus the per-stage choices.
#pragma once

#include <string>
#include <vector>

namespace hapmoe {

// pi = (PP, TP, CP, EP, TPE, DP) and the micro-batch size. TPE is expert
// tensor parallelism (Megatron's --expert-tensor-parallel-size). Every stage
// is TP*CP*DP devices of one type; the expert side folds the same devices
// into TPE*EP*EDP with EDP = TP*CP*DP / (TPE*EP).
struct ParallelConfig {
  int pp = 1;
  int tp = 1;
  int cp = 1;
  int ep = 1;
  int tpe = 1;
  int dp = 1;
  int micro_batch = 1;
  // Virtual pipeline stages per rank (interleaved 1F1B, Megatron's
  // --num-virtual-stages-per-pipeline-rank); 1 is plain 1F1B.
  int vpp = 1;

  int stage_devices() const { return tp * cp * dp; }
  int devices() const { return pp * stage_devices(); }
  int edp() const { return stage_devices() / (ep * tpe); }
  bool operator==(const ParallelConfig&) const = default;
};

// Activation recomputation of one stage.
//   kNone:      keep every activation.
//   kSelective: recompute core attention and the MLP/expert activation
//               functions (Megatron --recompute-granularity selective with
//               core_attn, mlp/moe_act).
//   kFull:      recompute `layers` whole layers of the stage from their
//               inputs (Megatron full/block with --recompute-num-layers);
//               layers == stage layers is full recomputation.
enum class RecomputeKind { kNone, kSelective, kFull };

struct Recompute {
  RecomputeKind kind = RecomputeKind::kNone;
  int layers = 0;  // only for kFull: number of fully recomputed layers
  bool operator==(const Recompute&) const = default;
};

// Text form used in plan files: "none", "selective", "full" (all layers of
// the stage) or "full:K" (K layers). `stage_layers` resolves "full".
std::string to_string(const Recompute& r, int stage_layers);

struct StagePlan {
  int device_type = 0;  // index into ClusterSpec::pools
  int layers = 0;       // n_i
  Recompute recompute;
  bool operator==(const StagePlan&) const = default;
};

struct Plan {
  ParallelConfig parallel;
  std::vector<StagePlan> stages;  // size == parallel.pp
  bool operator==(const Plan&) const = default;
};

}  // namespace hapmoe
