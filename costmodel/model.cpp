#include "costmodel/model.h"

#include "costmodel/text.h"

#include <algorithm>
#include <string>

namespace hapmoe {

namespace {

std::string field(const char* name, long long value) {
  return std::string(name) + " = " + std::to_string(value);
}

}  // namespace

int ModelSpec::num_moe_layers() const {
  return static_cast<int>(std::count(moe_layers.begin(), moe_layers.end(), 1));
}

const char* to_string(Precision p) {
  switch (p) {
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp16:
      return "fp16";
    case Precision::kFp8:
      return "fp8";
  }
  return "?";
}

const char* to_string(Fp8Recipe r) {
  switch (r) {
    case Fp8Recipe::kDelayed:
      return "delayed";
    case Fp8Recipe::kTensorwise:
      return "tensorwise";
    case Fp8Recipe::kBlockwise:
      return "blockwise";
    case Fp8Recipe::kMxfp8:
      return "mxfp8";
  }
  return "?";
}

const char* to_string(Dispatcher d) {
  switch (d) {
    case Dispatcher::kAllToAll:
      return "alltoall";
    case Dispatcher::kAllGather:
      return "allgather";
    case Dispatcher::kAuto:
      return "auto";
    case Dispatcher::kFlex:
      return "flex";
  }
  return "?";
}

const char* to_string(Fsdp f) {
  switch (f) {
    case Fsdp::kOff:
      return "off";
    case Fsdp::kOptimGrads:
      return "optim_grads";
    case Fsdp::kOptimGradsParams:
      return "optim_grads_params";
  }
  return "?";
}

const char* to_string(MlpKind m) { return m == MlpKind::kSwiGlu ? "swiglu" : "gelu"; }

std::string validate(const ModelSpec& m) {
  if (auto e = check_name_text("name", m.name); !e.empty()) return e;
  auto positive = [](const char* name, long long v) -> std::string {
    return v > 0 ? "" : field(name, v) + " must be positive";
  };
  for (const auto& [name, value] : {std::pair<const char*, long long>{"num_layers", m.num_layers},
                                    {"hidden", m.hidden},
                                    {"num_heads", m.num_heads},
                                    {"num_kv_heads", m.num_kv_heads},
                                    {"head_dim", m.head_dim},
                                    {"vocab", m.vocab}}) {
    if (auto e = positive(name, value); !e.empty()) return e;
  }
  if (m.num_layers > 100000) return field("num_layers", m.num_layers) + " is larger than 100000";
  if (!m.window_layers.empty() &&
      m.window_layers.size() != static_cast<std::size_t>(m.num_layers)) {
    return "window_layers has " + std::to_string(m.window_layers.size()) +
           " entries, expected num_layers = " + std::to_string(m.num_layers);
  }
  if (m.sliding_window < 0) return field("sliding_window", m.sliding_window) + " must be >= 0";
  if (m.mtp_layers < 0 || m.mtp_layers > 1000) {
    return field("mtp_layers", m.mtp_layers) + " must be in [0, 1000]";
  }
  if (!m.window_layers.empty() && m.sliding_window == 0) {
    return "window_layers is given but sliding_window is 0";
  }
  if (m.vocab_divisible_by < 1 || m.vocab_divisible_by > 1000000) {
    return field("vocab_divisible_by", m.vocab_divisible_by) + " must be in [1, 1000000]";
  }
  if (m.num_kv_heads > m.num_heads || m.num_heads % m.num_kv_heads != 0) {
    return field("num_kv_heads", m.num_kv_heads) +
           " must divide num_heads = " + std::to_string(m.num_heads);
  }
  const bool any_dense = !m.is_moe() || std::any_of(m.moe_layers.begin(), m.moe_layers.end(),
                                                    [](std::uint8_t v) { return v == 0; });
  if (any_dense && m.ffn_hidden <= 0) {
    return field("ffn_hidden", m.ffn_hidden) + " must be positive (the model has dense layers)";
  }
  if (m.ffn_hidden < 0) return field("ffn_hidden", m.ffn_hidden) + " must not be negative";
  if (m.positions == PositionKind::kLearned && m.max_positions <= 0) {
    return field("max_positions", m.max_positions) + " must be positive with learned positions";
  }
  if (m.mla.enabled()) {
    if (m.mla.qk_nope_head_dim <= 0 || m.mla.qk_rope_head_dim <= 0 || m.mla.v_head_dim <= 0) {
      return "multi-latent attention needs positive qk_nope_head_dim, qk_rope_head_dim and "
             "v_head_dim";
    }
    if (m.mla.q_lora_rank < 0) return field("q_lora_rank", m.mla.q_lora_rank) + " is negative";
  }
  if (!m.is_moe()) {
    if (m.num_experts < 0) return field("num_experts", m.num_experts) + " is negative";
    if (!m.moe_layers.empty() && m.num_moe_layers() > 0) {
      return "moe layers are set but num_experts = 0";
    }
    return "";
  }
  if (m.top_k <= 0 || m.top_k > m.num_experts) {
    return field("top_k", m.top_k) +
           " must be in [1, num_experts = " + std::to_string(m.num_experts) + "]";
  }
  if (m.expert_ffn_hidden <= 0) {
    return field("expert_ffn_hidden", m.expert_ffn_hidden) + " must be positive";
  }
  if (m.shared_expert_ffn_hidden < 0) {
    return field("shared_expert_ffn_hidden", m.shared_expert_ffn_hidden) + " is negative";
  }
  if (static_cast<int>(m.moe_layers.size()) != m.num_layers) {
    return "moe layer map has " + std::to_string(m.moe_layers.size()) +
           " entries, expected num_layers = " + std::to_string(m.num_layers);
  }
  if (m.num_moe_layers() == 0) return "num_experts > 0 but no layer is a MoE layer";
  return "";
}

std::string validate(const TrainingSpec& t, const ModelSpec& m) {
  if (t.seq_len <= 0) return field("seq_len", t.seq_len) + " must be positive";
  if (t.global_batch <= 0) return field("global_batch", t.global_batch) + " must be positive";
  if (t.micro_batch <= 0) return field("micro_batch", t.micro_batch) + " must be positive";
  if (t.global_batch % t.micro_batch != 0) {
    return field("global_batch", t.global_batch) +
           " is not a multiple of micro_batch = " + std::to_string(t.micro_batch);
  }
  if (m.max_positions > 0 && t.seq_len > m.max_positions) {
    return field("seq_len", t.seq_len) +
           " exceeds the model's max_positions = " + std::to_string(m.max_positions);
  }
  if (!(t.imbalance >= 1.0) || t.imbalance > 1000.0) {
    return "imbalance = " + std::to_string(t.imbalance) + " must be in [1, 1000]";
  }
  if (!(t.gamma >= 0.0) || t.gamma > 1.0) {
    return "gamma = " + std::to_string(t.gamma) + " must be in [0, 1]";
  }
  if (t.overlap.param_gather && !t.distributed_optimizer) {
    // REFERENCE.md 3.2.12.
    return "overlap.param_gather needs the distributed optimizer (Megatron: "
           "--overlap-param-gather needs --use-distributed-optimizer)";
  }
  if (t.overlap.delay_wgrad && !t.overlap.moe_ep_comm) {
    // core_v0.15.0 transformer_config.py.
    return "overlap.delay_wgrad needs overlap.moe_ep_comm (Megatron: --delay-wgrad-compute "
           "needs --overlap-moe-expert-parallel-comm)";
  }
  if (!(t.optimizer_offload_fraction >= 0.0) || t.optimizer_offload_fraction > 1.0) {
    return "optimizer_offload_fraction = " + std::to_string(t.optimizer_offload_fraction) +
           " must be in [0, 1]";
  }
  if (t.offload_range_to != 0 &&
      !(t.offload_range_to >= t.optimizer_offload_fraction && t.offload_range_to <= 1.0)) {
    return "offload_range_to = " + std::to_string(t.offload_range_to) + " must be 0 or in [" +
           std::to_string(t.optimizer_offload_fraction) + ", 1]";
  }
  if (t.activation_offload_layers < 0 || t.activation_offload_layers >= std::max(1, m.num_layers)) {
    // Megatron-Core: cpu_offloading_num_layers < num_layers.
    return "activation_offload_layers = " + std::to_string(t.activation_offload_layers) +
           " must be in [0, num_layers - 1 = " + std::to_string(m.num_layers - 1) + "]";
  }
  if (const auto& r = t.recompute) {
    if (r->kind == RecomputeKind::kFull && r->block < 0) {
      return "recompute block = " + std::to_string(r->block) + " must be >= 0 (0: every layer)";
    }
    if (r->kind == RecomputeKind::kSelective && r->modules == 0) {
      return "selective recompute needs at least one module";
    }
    if (r->kind != RecomputeKind::kNone && t.activation_offload_layers > 0) {
      return "activation offload cannot be combined with recomputation (Megatron-Core refuses "
             "cpu_offloading with recompute_granularity)";
    }
  }
  if (t.fsdp != Fsdp::kOff && !t.distributed_optimizer) {
    return std::string("fsdp = ") + to_string(t.fsdp) +
           " shards the optimizer states too: it needs distributed_optimizer";
  }
  if (t.optimizer_offload_fraction > 0 && !t.distributed_optimizer) {
    // Megatron-LM core_v0.15.0 arguments.py: offload needs
    // --use-precision-aware-optimizer, which needs the distributed optimizer.
    return "optimizer_offload_fraction needs the distributed optimizer (Megatron: "
           "--optimizer-cpu-offload needs --use-precision-aware-optimizer and "
           "--use-distributed-optimizer)";
  }
  return "";
}

}  // namespace hapmoe

namespace hapmoe {

namespace {

// Matrices of one MLP: SwiGLU has gate, up and down; GELU has up and down.
double mlp_matrices(const ModelSpec& m) { return m.mlp == MlpKind::kSwiGlu ? 3.0 : 2.0; }

// Parameters of the attention projections (matrices only) and, for
// multi-latent attention, of the norms of the two latent vectors.
double attention_matrix_params(const ModelSpec& m) {
  const double h = m.hidden;
  const double a = m.num_heads;
  if (m.mla.enabled()) {
    const double qk = m.mla.qk_nope_head_dim + m.mla.qk_rope_head_dim;
    const double q =
        m.mla.q_lora_rank > 0 ? h * m.mla.q_lora_rank + m.mla.q_lora_rank * a * qk : h * a * qk;
    const double kv = h * (m.mla.kv_lora_rank + m.mla.qk_rope_head_dim) +
                      m.mla.kv_lora_rank * a * (m.mla.qk_nope_head_dim + m.mla.v_head_dim);
    return q + kv + a * m.mla.v_head_dim * h;
  }
  const double d = m.head_dim;
  return h * a * d + 2.0 * h * m.num_kv_heads * d + a * d * h;
}

double latent_norm_params(const ModelSpec& m) {
  return m.mla.enabled() ? static_cast<double>(m.mla.q_lora_rank) + m.mla.kv_lora_rank : 0.0;
}

// Forward FLOPs per token of one layer's attention (projections + causal
// core attention over a sequence of `seq` tokens).
double attention_flops_per_token(const ModelSpec& m, double seq) {
  const double a = m.num_heads;
  const double qk = m.mla.enabled() ? m.mla.qk_nope_head_dim + m.mla.qk_rope_head_dim : m.head_dim;
  const double v = m.mla.enabled() ? m.mla.v_head_dim : m.head_dim;
  // Causal: each query sees seq/2 keys on average (fewer in sliding-window
  // layers); 2 FLOPs per MAC.
  const double core = 2.0 * mean_attended_keys(m, seq) * a * (qk + v);
  return 2.0 * attention_matrix_params(m) + core;
}

}  // namespace

LayerParams layer_params(const ModelSpec& m, bool moe_layer) {
  LayerParams p;
  const double h = m.hidden;
  p.attention = attention_matrix_params(m) + latent_norm_params(m) + h;  // + input norm
  if (m.qkv_bias && !m.mla.enabled()) {
    p.attention += static_cast<double>(m.num_heads + 2 * m.num_kv_heads) * m.head_dim;
  }
  if (m.attention_sinks) p.attention += m.num_heads;
  if (moe_layer) {
    p.mlp = h * m.num_experts + mlp_matrices(m) * h * m.shared_expert_ffn_hidden + h;
    p.experts = static_cast<double>(m.num_experts) * mlp_matrices(m) * h * m.expert_ffn_hidden;
  } else {
    p.mlp = mlp_matrices(m) * h * m.ffn_hidden + h;
  }
  return p;
}

double embedding_params(const ModelSpec& m) {
  double p = static_cast<double>(m.vocab) * m.hidden;
  if (m.positions == PositionKind::kLearned) p += static_cast<double>(m.max_positions) * m.hidden;
  return p;
}

double mean_attended_keys(const ModelSpec& m, double seq) {
  const double full = seq / 2.0;
  if (m.sliding_window <= 0 || m.window_layers.empty() || m.num_layers <= 0) return full;
  const double w = m.sliding_window;
  const double windowed = w >= seq ? full : w - w * (w - 1.0) / (2.0 * seq);
  const double share =
      static_cast<double>(std::count(m.window_layers.begin(), m.window_layers.end(), 1)) /
      m.num_layers;
  return (1.0 - share) * full + share * windowed;
}

double padded_vocab(const ModelSpec& m, int tp) {
  const long long multiple = static_cast<long long>(std::max(1, m.vocab_divisible_by)) * tp;
  const long long padded = (m.vocab + multiple - 1) / multiple * multiple;  // rounded up
  return static_cast<double>(padded);
}

double output_params(const ModelSpec& m) {
  // Final norm, plus the output matrix when it is not tied to the embedding.
  return m.hidden + (m.tied_embeddings ? 0.0 : static_cast<double>(m.vocab) * m.hidden);
}

double total_params(const ModelSpec& m) {
  double p = embedding_params(m) + output_params(m) + m.mtp_layers * mtp_extra_params(m);
  for (int l = 0; l < m.num_layers; ++l) {
    const auto lp = layer_params(m, m.is_moe_layer(l));
    p += lp.attention + lp.mlp + lp.experts;
  }
  const auto mtp = layer_params(m, m.num_layers > 0 && m.is_moe_layer(m.num_layers - 1));
  return p + m.mtp_layers * (mtp.attention + mtp.mlp + mtp.experts);
}

double mtp_extra_params(const ModelSpec& m) {
  const double h = m.hidden;
  return 2.0 * h * h + 3.0 * h;  // eh_proj, enorm, hnorm, the final norm
}

double active_params(const ModelSpec& m) {
  double p = embedding_params(m) + output_params(m);
  for (int l = 0; l < m.num_layers; ++l) {
    const bool moe = m.is_moe_layer(l);
    const auto lp = layer_params(m, moe);
    p += lp.attention + lp.mlp;
    if (moe) p += lp.experts * m.top_k / m.num_experts;
  }
  return p;
}

double model_flops_per_iteration(const Workload& w) {
  const ModelSpec& m = w.model;
  const double seq = w.training.seq_len;
  const double h = m.hidden;
  double per_token = 2.0 * h * m.vocab;  // output layer
  for (int l = 0; l < m.num_layers; ++l) {
    per_token += attention_flops_per_token(m, seq);
    if (m.is_moe_layer(l)) {
      per_token += 2.0 * h * m.num_experts;  // router
      per_token +=
          2.0 * mlp_matrices(m) * h *
          (static_cast<double>(m.top_k) * m.expert_ffn_hidden + m.shared_expert_ffn_hidden);
    } else {
      per_token += 2.0 * mlp_matrices(m) * h * m.ffn_hidden;
    }
  }
  // Backward costs twice the forward.
  return 3.0 * per_token * seq * w.training.global_batch;
}

}  // namespace hapmoe
