// The model to train and the training settings: plain data, validated apart.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "costmodel/plan.h"

namespace hapmoe {

// kFp8: bf16 weights and activations with the transformer layers' linear
// layers in FP8 (Transformer Engine; Megatron's --bf16 --fp8-format),
// docs/costmodel.md, "FP8".
enum class Precision { kBf16, kFp16, kFp8 };
// Megatron's --fp8-recipe: delayed (tensor-wise, scale from the amax
// history), tensorwise (current scaling: the amax of the tensor itself),
// blockwise (DeepSeek-style 1x128/128x128 scales), mxfp8 (Blackwell's
// 32-element blocks).
enum class Fp8Recipe { kDelayed, kTensorwise, kBlockwise, kMxfp8 };
// Token dispatcher of the MoE layer. kAuto picks, per candidate plan, the
// cheaper of all-to-all and all-gather (paper §3.3, "best primitive").
// kFlex is Megatron's flex dispatcher with DeepEP: across nodes a token
// travels once to each other node holding one of its experts
// (docs/costmodel.md, "Dispatch and combine").
enum class Dispatcher { kAllToAll, kAllGather, kAuto, kFlex };
// Megatron-FSDP's sharding beyond the distributed optimizer
// (--use-megatron-fsdp --data-parallel-sharding-strategy; docs/costmodel.md,
// "Sharded data parallelism"): kOff is Megatron's DDP (the optimizer states
// sharded or not by distributed_optimizer, which also stands for FSDP's
// "optim" and "no_shard"); kOptimGrads also shards the gradients (ZeRO-2);
// kOptimGradsParams the parameters too (ZeRO-3).
enum class Fsdp { kOff, kOptimGrads, kOptimGradsParams };
// Gated (SwiGLU: three matrices) or plain (GELU: two matrices) MLP.
enum class MlpKind { kSwiGlu, kGelu };
enum class PositionKind { kRotary, kLearned };

// Multi-latent attention (DeepSeek-V2/V3). Enabled when kv_lora_rank > 0.
struct MlaSpec {
  int q_lora_rank = 0;       // 0: queries projected directly from hidden
  int kv_lora_rank = 0;      // compressed KV width
  int qk_nope_head_dim = 0;  // per-head query/key width without rotary part
  int qk_rope_head_dim = 0;  // per-head rotary part (shared key)
  int v_head_dim = 0;        // per-head value width
  bool enabled() const { return kv_lora_rank > 0; }
  bool operator==(const MlaSpec&) const = default;
};

struct ModelSpec {
  std::string name;      // preset name or file it came from
  int num_layers = 0;    // decoder layers N
  int hidden = 0;        // H
  int num_heads = 0;     // attention heads a
  int num_kv_heads = 0;  // KV heads / query groups g (= a for MHA)
  int head_dim = 0;      // per-head width d (kv channels)
  int ffn_hidden = 0;    // dense MLP width F (dense layers)
  MlpKind mlp = MlpKind::kSwiGlu;
  PositionKind positions = PositionKind::kRotary;
  int max_positions = 0;  // learned table size / max context
  int vocab = 0;          // vocabulary V (before padding)
  // Attention variants (docs/costmodel.md, "Attention variants"):
  // sliding-window attention over the last `sliding_window` keys in the
  // layers window_layers marks 1 (empty: none); a learned sink logit per
  // head (GPT-OSS); biases on the query, key and value projections.
  // Multi-token prediction (DeepSeek-V3; Megatron --mtp-num-layers): each
  // MTP depth adds to the last stage a transformer layer of the model's
  // last layer's kind, a 2H -> H projection, two norms and another pass of
  // the output layer and loss (docs/costmodel.md, "Multi-token prediction").
  int mtp_layers = 0;
  int sliding_window = 0;
  std::vector<std::uint8_t> window_layers;
  bool attention_sinks = false;
  bool qkv_bias = false;
  // Megatron pads the vocabulary to a multiple of this times TP
  // (--make-vocab-size-divisible-by, default 128; padded_vocab()).
  int vocab_divisible_by = 128;
  bool tied_embeddings = false;  // output layer shares the embedding
  MlaSpec mla;
  // Mixture of experts. num_experts == 0 means a dense model.
  int num_experts = 0;               // routed experts E
  int top_k = 0;                     // experts per token k
  int expert_ffn_hidden = 0;         // F_e, width of one routed expert
  int shared_expert_ffn_hidden = 0;  // total width of shared experts (0: none)
  // One entry per layer: 1 if the layer's MLP is a MoE block. Empty for a
  // dense model. Built from first-k-dense / layer-frequency settings.
  std::vector<std::uint8_t> moe_layers;

  bool is_moe() const { return num_experts > 0; }
  bool is_moe_layer(int layer) const {
    return !moe_layers.empty() && moe_layers[static_cast<std::size_t>(layer)] != 0;
  }
  int num_moe_layers() const;
  bool operator==(const ModelSpec&) const = default;
};

// Which communication Megatron-LM overlaps with compute (docs/costmodel.md,
// "Overlap"); each is off unless its Megatron flag is given, as in
// Megatron-LM.
struct Overlap {
  bool grad_reduce = false;   // --overlap-grad-reduce
  bool param_gather = false;  // --overlap-param-gather (distributed optimizer)
  bool tp_comm = false;       // --tp-comm-overlap
  bool moe_ep_comm = false;   // --overlap-moe-expert-parallel-comm
  bool delay_wgrad = false;   // --delay-wgrad-compute (needs moe_ep_comm)
  bool operator==(const Overlap&) const = default;
};

struct TrainingSpec {
  int seq_len = 4096;      // S, tokens per sample
  int global_batch = 256;  // B, samples per iteration
  int micro_batch = 1;     // b, samples per micro-batch
  Precision precision = Precision::kBf16;
  Fp8Recipe fp8_recipe = Fp8Recipe::kDelayed;  // with Precision::kFp8
  bool distributed_optimizer = true;           // ZeRO-1 sharding of optimizer state
  // Megatron's --grad-reduce-in-bf16: the gradient buffer, and so the DP
  // reduction, in bf16 (2 B/param) instead of fp32 (4 B/param).
  bool grad_reduce_in_bf16 = false;
  // Megatron's --optimizer-cpu-offload --optimizer-offload-fraction f: the
  // share f in [0, 1] of each device's optimizer shard kept and stepped on
  // the host (docs/costmodel.md, "Optimizer CPU offload"); 0 = off.
  double optimizer_offload_fraction = 0;
  // For bounds only (the job search, engine/job_space.h): > 0 stands for
  // every fraction in [optimizer_offload_fraction, offload_range_to] at
  // once, each term at its loosest end: device memory at the top, host
  // memory at the bottom, the optimizer step at its faster end. A plan
  // that fits at some fraction of the range fits so, no slower. 0: one
  // fraction.
  double offload_range_to = 0;
  Fsdp fsdp = Fsdp::kOff;
  // Megatron-Core's activation offload (TransformerConfig cpu_offloading,
  // cpu_offloading_num_layers; Megatron-LM --cpu-offloading
  // --cpu-offloading-num-layers): the activations of this many layers of
  // each stage go to host memory in the forward and come back for the
  // backward; 0 = off. Megatron forbids it with recomputation.
  int activation_offload_layers = 0;
  // One recompute setting for the whole job, as stock Megatron-LM applies
  // it to each stage (plan --recompute-scope job); std::nullopt: each
  // stage takes its least recomputation that fits (the paper's per-stage
  // choice).
  std::optional<RecomputeSetting> recompute;
  Dispatcher dispatcher = Dispatcher::kAllToAll;
  double imbalance = 1.2;  // rho = max/mean tokens per expert (>= 1)
  double gamma = 1.0;      // gamma in [0,1]: share of rho on the path
  Overlap overlap;
  bool operator==(const TrainingSpec&) const = default;
};

// What the cost model needs about the workload.
struct Workload {
  ModelSpec model;
  TrainingSpec training;
  bool operator==(const Workload&) const = default;
};

// Parameter counts of one layer (whole layer, before any sharding).
struct LayerParams {
  double attention = 0;  // projections + norms of the attention block
  double mlp = 0;        // dense MLP (dense layers) or router + shared experts
  double experts = 0;    // all routed experts of the layer (0 if dense)
};

LayerParams layer_params(const ModelSpec& model, bool moe_layer);
// Embedding (and learned positions) and, if untied, the output layer.
double embedding_params(const ModelSpec& model);
// The vocabulary as Megatron-LM allocates it under TP: V rounded up to a
// multiple of vocab_divisible_by x TP (training/tokenizer/tokenizer.py,
// _vocab_size_with_padding). The embedding, the output layer and the
// logits have this many rows; the model's FLOPs count V.
double padded_vocab(const ModelSpec& model, int tp);
// Keys a query of a causal layer attends to, on average over a sequence of
// `seq` tokens, averaged over the model's layers: seq/2 for full attention,
// W - W(W-1)/(2 seq) for a window of W < seq keys.
double mean_attended_keys(const ModelSpec& model, double seq);
double output_params(const ModelSpec& model);
double total_params(const ModelSpec& model);
// Parameters of one MTP depth besides its transformer layer: the 2H -> H
// projection and its norms (the embedding and output layer are shared).
double mtp_extra_params(const ModelSpec& model);
// Parameters touched by one token (attention + k experts + shared + dense).
double active_params(const ModelSpec& model);

// Model FLOPs of one training iteration (forward + backward, no
// recomputation), the numerator of MFU. Causal attention counts half of the
// S^2 products.
double model_flops_per_iteration(const Workload& workload);

// "" when the model and settings are consistent, otherwise a message naming
// the field and the value (e.g. "num_kv_heads = 5 must divide
// num_heads = 32").
std::string validate(const ModelSpec& model);
std::string validate(const TrainingSpec& training, const ModelSpec& model);

const char* to_string(Precision);
const char* to_string(Fp8Recipe);
const char* to_string(Dispatcher);
const char* to_string(Fsdp);
const char* to_string(MlpKind);

}  // namespace hapmoe
