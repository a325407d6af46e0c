// A plan: one point of the 6-D space plus the per-stage choices.
#pragma once

#include <optional>
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
//   kSelective: recompute the modules in `modules` in every layer of the
//               stage (Megatron --recompute-granularity selective
//               --recompute-modules ...; docs/costmodel.md, "Recompute by
//               module"). The default set is core attention and the routed
//               experts' activation (core_attn, moe_act).
//   kFull:      recompute `layers` whole layers of the stage from their
//               inputs (Megatron full/block with --recompute-num-layers);
//               layers == stage layers is full recomputation.
enum class RecomputeKind { kNone, kSelective, kFull };

// Megatron-LM's --recompute-modules, in its documented order.
enum class RecomputeModule {
  kCoreAttn,       // core attention (the S^2 part)
  kMoeAct,         // the routed experts' activation function
  kLayernorm,      // norms not fused into the following linear layer
  kMlaUpProj,      // MLA's up-projections (and rotary)
  kMlp,            // a dense layer's whole MLP
  kMoe,            // a MoE layer's whole MoE block (router, exchange, experts)
  kSharedExperts,  // the shared experts
};
inline constexpr int kNumRecomputeModules = 7;
constexpr unsigned module_bit(RecomputeModule m) { return 1u << static_cast<unsigned>(m); }
inline constexpr unsigned kDefaultRecomputeModules =
    module_bit(RecomputeModule::kCoreAttn) | module_bit(RecomputeModule::kMoeAct);
// Megatron's name of a module ("core_attn", ...), and back (exact,
// lower case; std::nullopt if unknown).
const char* to_string(RecomputeModule m);
std::optional<RecomputeModule> parse_recompute_module(const std::string& name);

struct Recompute {
  RecomputeKind kind = RecomputeKind::kNone;
  int layers = 0;                               // only for kFull: number of fully recomputed layers
  unsigned modules = kDefaultRecomputeModules;  // only for kSelective: module_bit()s
  // Equal when they recompute the same: `modules` counts only for
  // kSelective and `layers` only for kFull.
  bool operator==(const Recompute& o) const {
    return kind == o.kind && (kind != RecomputeKind::kFull || layers == o.layers) &&
           (kind != RecomputeKind::kSelective || modules == o.modules);
  }
};

// One recompute setting for every stage, as stock Megatron-LM takes it
// (plan --recompute-scope job; docs/search.md, "Recompute scope"):
//   kNone;
//   kSelective: `modules` in every layer (--recompute-granularity
//               selective --recompute-modules ...);
//   kFull:      the first `block` layers of each stage (--recompute-method
//               block --recompute-num-layers block), or every layer when
//               block == 0 (--recompute-method uniform
//               --recompute-num-layers 1).
struct RecomputeSetting {
  RecomputeKind kind = RecomputeKind::kNone;
  int block = 0;                                // only for kFull
  unsigned modules = kDefaultRecomputeModules;  // only for kSelective
  bool operator==(const RecomputeSetting&) const = default;
};

// What `s` recomputes in a stage of `stage_layers` layers (none in a stage
// without layers).
Recompute stage_recompute(const RecomputeSetting& s, int stage_layers);
// "none", "selective", "selective:m1,m2", "full" or "full block K".
std::string to_string(const RecomputeSetting& s);

// Text form used in plan files: "none", "selective" (the default modules),
// "selective:m1,m2,..." (Megatron's module names), "full" (all layers of
// the stage) or "full:K" (K layers). `stage_layers` resolves "full".
std::string to_string(const Recompute& r, int stage_layers);
// Megatron's names of the modules in a mask, in its order.
std::vector<std::string> recompute_module_names(unsigned modules);

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
