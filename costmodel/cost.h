// The MoE-aware cost model (paper §3.3-3.4, Appendix B): pure functions of
// (workload, cluster, profile tables, plan). Every formula, unit and
// constant is written down in docs/costmodel.md; this header is the map.
//
// The model is organised so that a search can reuse it cheaply:
//   1. layer_costs(pi, h): per layer kind (dense, MoE) on device type h under
//      pi, the per-micro-batch times and per-device bytes. Everything later is
//      linear in these.
//   2. stage_cost(...): one stage = a run of layers at a pipeline position on
//      one device type with one recomputation choice.
//   3. iteration latency: 1F1B over the stage times, DP sync, optimizer.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "costmodel/cluster.h"
#include "costmodel/model.h"
#include "costmodel/plan.h"
#include "costmodel/profile.h"

namespace hapmoe {

// What one forward or backward step (of a layer, or of a whole stage for
// one micro-batch) spends its time on, for reports (docs/costmodel.md,
// "Breakdown"). The parts add up to the step's time.
struct StepParts {
  double compute = 0;    // kernels: GEMMs, attention, memory-bound passes
  double tp = 0;         // TP (+SP) collectives
  double cp = 0;         // CP ring, the part core attention does not hide
  double ep = 0;         // MoE dispatch + combine (+ expert-TP gathers)
  double p2p = 0;        // pipeline point-to-point at the stage boundary
  double recompute = 0;  // backward only: the recomputed forward
  double dp = 0;         // Megatron-FSDP's per-micro-batch parameter gathers and
                         // gradient reduce-scatters, the part compute does not hide
  double host = 0;       // activation offload's copies to and from the host, the
                         // part compute does not hide
  // What the overlaps hid (docs/costmodel.md, "Overlap"); not part of the
  // step's time: --tp-comm-overlap of TP collectives, and
  // --overlap-moe-expert-parallel-comm of the dispatch and combine.
  double tp_hidden = 0;
  double ep_hidden = 0;
  double total() const { return compute + tp + cp + ep + p2p + recompute + dp + host; }
  StepParts& operator+=(const StepParts& o);
  bool operator==(const StepParts&) const = default;
};
StepParts operator*(double n, const StepParts& p);

// Costs of one layer of one kind for one micro-batch on one device.
struct LayerCost {
  double fwd_s = 0;           // forward: compute + exposed communication
  double bwd_s = 0;           // backward without recomputation
  double act_bytes = 0;       // activations kept per micro-batch, no recompute
  double act_full_bytes = 0;  // ... fully recomputed (layer input only)
  // Selective recompute, per Megatron module (index: RecomputeModule): the
  // activation bytes it frees and the backward time it adds; a module the
  // layer does not have is zero. `moe` includes what `moe_act` and
  // `shared_experts` would free, so stage_cost counts those only without it.
  struct ModuleCost {
    double saved_bytes = 0;
    double extra_s = 0;
    bool operator==(const ModuleCost&) const = default;
  };
  std::array<ModuleCost, kNumRecomputeModules> modules{};
  // The bytes freed and the time added by recomputing a set of modules
  // (module_bit()s; `moe` subsumes `moe_act` and `shared_experts`).
  ModuleCost selective(unsigned module_set) const;
  double dense_params = 0;      // non-expert parameters held per device
  double expert_params = 0;     // routed-expert parameters held per device
  double moe_buffer_bytes = 0;  // transient dispatch buffers (not summed)
  // The MoE block's compute (routed and shared experts) within fwd_parts
  // and bwd_parts.compute before the overlap's slowdown, and the backward's
  // weight-gradient part: what --overlap-moe-expert-parallel-comm pairs
  // with the exchange (docs/costmodel.md, "Overlap"). Zero in dense layers.
  double mlp_fwd_s = 0, mlp_bwd_s = 0, mlp_wgrad_s = 0;
  // Breakdown of fwd_s and bwd_s (no p2p, no recompute), for reports.
  StepParts fwd_parts;
  StepParts bwd_parts;
  Dispatcher dispatcher = Dispatcher::kAllToAll;  // the one chosen
  bool operator==(const LayerCost&) const = default;
};

// An affine collective time over a number of parameters.
struct SyncCost {
  double latency_s = 0;
  double s_per_param = 0;
  double time(double params) const { return params > 0 ? latency_s + params * s_per_param : 0.0; }
  bool operator==(const SyncCost&) const = default;
};

// Per (pi, device type): the two layer kinds plus first/last-stage extras.
struct TypeCosts {
  int type = 0;
  LayerCost dense;  // a dense layer
  LayerCost moe;    // a MoE layer (zero if the model is dense)
  double embedding_fwd_s = 0, embedding_bwd_s = 0;
  double output_fwd_s = 0, output_bwd_s = 0;
  // Multi-token prediction on the last stage, per MTP depth: the projection
  // and norms (its layer and output pass are the kinds' own costs).
  double mtp_fwd_s = 0, mtp_bwd_s = 0;
  double mtp_params = 0;        // per device: projection and norms
  double embedding_params = 0;  // per device, first stage
  double output_params = 0;     // per device, last stage
  double logits_bytes = 0;      // last stage transient logits
  double capacity_bytes = 0;
  double overhead_bytes = 0;
  double activation_scale = 1;
  // Bytes per parameter held: weights, gradients, optimizer states, for
  // dense (sharded over DP) and expert (sharded over EDP) parameters.
  double weight_bytes_per_param = 2;
  // FP8: the rowwise and columnwise FP8 copies of the transformer layers'
  // weights (not the embedding's or the output layer's).
  double fp8_copy_bytes_per_param = 0;
  double grad_bytes_per_param = 4;
  double dense_opt_bytes_per_param = 0;
  double expert_opt_bytes_per_param = 0;
  double optimizer_s_per_param = 0;
  // Optimizer CPU offload (docs/costmodel.md, "Optimizer CPU offload"): the
  // share of the local optimizer shard on the host, the host bytes per
  // offloaded parameter, the seconds per offloaded parameter (gradient
  // down, CPU Adam step, parameter up) and this device's share of its
  // node's host memory.
  double offload_fraction = 0;
  // The fraction whose device memory a stage holds: offload_fraction, or
  // the top of a bound's range (TrainingSpec::offload_range_to).
  double offload_memory_fraction = 0;
  // Over a bound's range: whether a stage's step is costed at the least
  // fraction at which its least memory fits (the search's stages), or at
  // the range's faster end (false: affine in the layers, for the per-layer
  // tail bounds; docs/search.md, "Job-wide knobs").
  bool offload_step_at_fit = true;
  // Over a bound's range: the fewest activation bytes a dense and a MoE
  // layer can keep per micro-batch under any recomputation.
  double dense_least_act_bytes = 0;
  double moe_least_act_bytes = 0;
  double host_bytes_per_param = 0;
  double offload_s_per_param = 0;
  double host_capacity_bytes = 0;
  // Activation offload: layers per stage, and seconds per byte over the
  // host link (one way).
  int activation_offload_layers = 0;
  double host_link_s_per_byte = 0;
  // Megatron-FSDP: ZeRO-2 or ZeRO-3 (docs/costmodel.md, "Sharded data
  // parallelism"); the most parameters one layer holds on this device
  // (gathered and reduced one layer at a time).
  Fsdp fsdp = Fsdp::kOff;
  double layer_unit_params = 0;
  // Gradient synchronisation, for the DP group (dense grads) and the EDP
  // group (expert grads): the gradient reduction (reduce-scatter with the
  // distributed optimizer, else all-reduce) and the parameter all-gather
  // (distributed optimizer only), each time(n params) = latency + n * slope.
  SyncCost dp_reduce, dp_gather, edp_reduce, edp_gather;
  bool operator==(const TypeCosts&) const = default;
};

// `tc` costing a range's optimizer step at its faster end
// (offload_step_at_fit false), which is affine in a stage's layers, as the
// per-layer tail bounds need: `tc` itself unless it is a range's, else a
// copy in `scratch`.
inline const TypeCosts& with_affine_tails(const TypeCosts& tc, std::optional<TypeCosts>& scratch) {
  if (!tc.offload_step_at_fit || !(tc.offload_memory_fraction > tc.offload_fraction)) return tc;
  scratch = tc;
  scratch->offload_step_at_fit = false;
  return *scratch;
}

// Where a stage sits and what it holds.
struct StageShape {
  int position = 0;                 // 0-based pipeline rank
  int first_layer = 0;              // global index of its first layer
  int layers = 0;                   // n_i
  int moe_layers = 0;               // how many of them are MoE layers
  int moe_in_first_recomputed = 0;  // MoE layers among the first
                                    // recompute.layers (kFull only)
  int prev_type = -1;               // device type of stage i-1, -1 for the first stage
  Recompute recompute;
};

struct MemoryBreakdown {
  double weights = 0;      // parameters (bf16/fp16)
  double gradients = 0;    // fp32 main gradients
  double optimizer = 0;    // fp32 master + Adam moments (sharded if ZeRO-1)
  double activations = 0;  // kept by 1F1B at this position, calibrated
  double moe_buffers = 0;  // transient dispatch buffers / logits
  double overhead = 0;     // context, allocator, communication buffers
  double total() const {
    return weights + gradients + optimizer + activations + moe_buffers + overhead;
  }
};

struct StageCost {
  double fwd_s = 0;        // t_f,i including p2p from the previous stage
  double bwd_s = 0;        // t_b,i including recompute and p2p back
  double p2p_fwd_s = 0;    // part of fwd_s spent receiving activations
  double p2p_bwd_s = 0;    // part of bwd_s spent sending gradients back
  double recompute_s = 0;  // part of bwd_s spent recomputing
  double dp_sync_s = 0;    // gradient synchronisation after the last micro-batch,
                           // the part the overlaps leave exposed
  double dp_gather_s = 0;  // part of dp_sync_s: the parameter all-gather after the
                           // optimizer step (Megatron's params-all-gather timer)
  double dp_hidden_s = 0;  // the part --overlap-grad-reduce/-param-gather hid
  double optimizer_s = 0;  // optimizer step
  int in_flight = 0;       // micro-batches whose activations 1F1B keeps
                           // (interleaved: virtual-stage micro-batches)
  StepParts fwd_parts;     // fwd_s by part
  StepParts bwd_parts;     // bwd_s by part
  MemoryBreakdown memory;
  double capacity_bytes = 0;
  // Optimizer CPU offload: the host memory the device's offloaded optimizer
  // state takes, and the device's share of its node's host memory.
  double host_bytes = 0;
  double host_capacity_bytes = 0;
  bool fits() const {
    return memory.total() <= capacity_bytes && host_bytes <= host_capacity_bytes;
  }
};

struct IterationBreakdown {
  double edge_s = 0;       // sum_i (t_f,i + t_b,i)
  double middle_s = 0;     // (M - 1) * max_i (t_f,i + t_b,i)
  double step_s = 0;       // max_i (t_f,i + t_b,i): the bottleneck stage's step
  double dp_sync_s = 0;    // of the stage with the longest sync + optimizer
  double dp_gather_s = 0;  // part of dp_sync_s: that stage's parameter all-gather
  double optimizer_s = 0;
  double dp_hidden_s = 0;  // that stage's sync hidden by the overlaps (not in total)
  double total() const { return edge_s + middle_s + dp_sync_s + optimizer_s; }
  // The pipeline's time is M steps of the bottleneck stage plus the bubble,
  // edge - step: its wait while the pipeline fills and drains.
  double bubble_s() const { return edge_s - step_s; }
};

struct StageReport {
  int device_type = 0;
  int devices = 0;
  int first_layer = 0;
  int layers = 0;
  Recompute recompute;
  StageCost cost;
};

struct PlanReport {
  Plan plan;
  int num_microbatches = 0;  // M = B / (b * DP)
  double latency_s = 0;      // T_iter
  IterationBreakdown breakdown;
  double throughput_tokens_per_s = 0;
  double tflops_per_device = 0;  // model TFLOP/s per device in use
  double mfu = 0;                // model FLOPs / (T_iter * sum of peaks)
  int bottleneck_stage = 0;      // argmax_i (t_f,i + t_b,i)
  bool fits = true;              // every stage within capacity
  Overlap overlap;               // the overlaps the plan was costed with
  std::vector<StageReport> stages;
};

class CostModel {
 public:
  // The references must outlive the CostModel.
  CostModel(const Workload& workload, const ClusterSpec& cluster, const ProfileTables& tables);

  const Workload& workload() const { return workload_; }
  const ClusterSpec& cluster() const { return cluster_; }

  int num_microbatches(const ParallelConfig& pi) const;

  // Its two layer costs are remembered per (TP, CP, EP, TPE, micro-batch,
  // type), the fields of the configuration they read: a search asks for
  // them for the bound, the work estimate and the search of each
  // configuration, and configurations of other PP and DP share them. So
  // are its gradient synchronisations' times, per group and primitive.
  // Thread-safe.
  TypeCosts type_costs(const ParallelConfig& pi, int type) const;
  // pi with only what type_costs reads of it: its degrees and micro-batch,
  // and PP only where the embeddings are tied (a single stage then holds
  // no output matrix of its own); vpp 1. Configurations with equal keys
  // have equal type costs: a bound computes them once for a key's PP 1,
  // 2 and deeper shapes (bound_shape).
  ParallelConfig type_costs_key(const ParallelConfig& pi) const;

  // Receiving activations from the previous stage (forward) and sending
  // gradients back (backward), charged to the later stage.
  struct Boundary {
    double fwd_s = 0;
    double bwd_s = 0;
  };
  Boundary boundary(const ParallelConfig& pi, int prev_type, int type) const;
  // What a stage after one of prev_type pays for its boundary per step:
  // boundary() once per virtual stage, v times when interleaved (zero for
  // prev_type < 0). stage_cost charges exactly this.
  Boundary stage_boundary(const ParallelConfig& pi, int prev_type, int type) const;

  StageCost stage_cost(const ParallelConfig& pi, const TypeCosts& costs,
                       const StageShape& shape) const;
  // What stage_cost's stage holds, without its times: its memory, host
  // memory and recomputation time (what a choice of recomputation
  // compares), and the sizes its times are made of. stage_cost takes
  // these from here, so both tell the same stages fit.
  struct StageHold {
    MemoryBreakdown memory;
    double host_bytes = 0;
    double recompute_s = 0;
    int in_flight = 1;
    // The sizes stage_cost's times read.
    int dense_layers = 0;
    bool first = false;
    bool last = false;
    int mtp = 0;                           // MTP depths on the stage
    const LayerCost* mtp_layer = nullptr;  // the layer an MTP depth runs (in `costs`)
    double act = 0;                        // activation bytes per micro-batch
    double act_none = 0;                   // the same without recomputation
    double offloaded_act = 0;              // of which off the device
    double offload_copy_bytes = 0;         // copied to the host per micro-batch
    double dense_params = 0;
    double expert_params = 0;
    double shard = 0;  // parameters the optimizer steps
    bool fits(const TypeCosts& costs) const {
      return memory.total() <= costs.capacity_bytes && host_bytes <= costs.host_capacity_bytes;
    }
  };
  StageHold stage_hold(const ParallelConfig& pi, const TypeCosts& costs,
                       const StageShape& shape) const;
  // `hold`, a stage_hold of `shape` under another recomputation, made
  // stage_hold(pi, costs, shape): only the activations and the
  // recomputation time depend on it.
  void recompute_hold(const ParallelConfig& pi, const TypeCosts& costs, const StageShape& shape,
                      StageHold& hold) const;

  // The least recomputation with which the stage fits in memory: the
  // feasible choice with the smallest added time (ties: less recompute).
  // std::nullopt if even full recomputation does not fit. Under a
  // job-wide TrainingSpec::recompute, what that setting recomputes in the
  // stage (std::nullopt if the stage does not fit with it): never less
  // time than the per-stage choice, so per-stage searches bound job-wide
  // ones.
  std::optional<Recompute> least_recompute(const ParallelConfig& pi, const TypeCosts& costs,
                                           StageShape shape) const;
  // The same with the stage's cost under that choice, as stage_cost gives
  // it (under full recomputation of every layer when nothing fits): the
  // choice has computed it already.
  struct RecomputeChoice {
    std::optional<Recompute> recompute;
    StageCost cost;
  };
  RecomputeChoice least_recompute_cost(const ParallelConfig& pi, const TypeCosts& costs,
                                       StageShape shape) const;
  // least_recompute(...).has_value(), from the choices that need the least
  // memory first (one stage_cost when full recomputation fits).
  bool fits_with_recompute(const ParallelConfig& pi, const TypeCosts& costs,
                           const StageShape& shape) const;

  // Layers [first, first + count) that are MoE layers.
  int moe_layers_in(int first, int count) const;

  // Evaluates a complete plan. Throws InputError if the plan does not
  // match the model and cluster (see partition/constraints.h for the checks).
  PlanReport evaluate(const Plan& plan) const;

 private:
  LayerCost layer_cost(const ParallelConfig& pi, int type, bool moe) const;
  // stage_cost of a stage that holds `hold` (its stage_hold).
  StageCost stage_cost(const ParallelConfig& pi, const TypeCosts& costs, const StageShape& shape,
                       const StageHold& hold) const;
  // least_recompute with `hold`, a stage_hold of `shape` (left holding
  // some candidate).
  std::optional<Recompute> least_recompute(const ParallelConfig& pi, const TypeCosts& costs,
                                           const StageShape& shape, StageHold& hold) const;
  // `shape` recomputing `r` (with the MoE layers among the first it
  // recomputes).
  StageShape recomputing(StageShape shape, const Recompute& r) const;

  const Workload& workload_;
  const ClusterSpec& cluster_;
  const ProfileTables& tables_;
  std::vector<int> moe_prefix_;  // moe_prefix_[l] = MoE layers in [0, l)
  struct Memo;
  std::uint64_t id_;  // type_costs' memo's key: one per construction, shared by copies
};

// The modules hapmoe's plain selective recomputation reruns: core attention
// and the routed experts' activation, or core attention alone with FP8
// delayed scaling, with which Megatron-LM core_v0.15.0 refuses moe_act
// (and layernorm) recompute (transformer_config.py).
unsigned default_selective_modules(const TrainingSpec& training);

// 1F1B iteration latency from per-stage forward/backward/sync/optimizer
// times and the number of micro-batches M (paper Eq. 2 and Appendix B; see
// docs/costmodel.md for the form used and why).
// With v = vpp > 1 virtual stages per rank (interleaved 1F1B) the bubble
// is 1/v of plain 1F1B's.
IterationBreakdown iteration_latency(const std::vector<StageCost>& stages, int num_microbatches,
                                     int vpp = 1);

// The pipeline's fill-and-drain part of iteration_latency, edge_s, from
// the sum and the largest of the stage steps: the sum itself for plain
// 1F1B, bottleneck + (sum - bottleneck) / v interleaved. The search
// (engine/labels.h) uses it so that its latencies are bit-identical.
// Written as sum / v + bottleneck (v - 1) / v, a sum of two terms each
// rounded monotonically: it never falls when either argument grows, in
// floating point too, which the search's dominance and bounds rely on.
inline double pipeline_edge(double sum, double bottleneck, int vpp) {
  return vpp > 1 ? sum / vpp + bottleneck * ((vpp - 1.0) / vpp) : sum;
}

}  // namespace hapmoe
