// Parameter counts and model FLOPs (costmodel/model.h) against
// docs/costmodel.md ("Parameters per device", "Throughput and MFU"), with
// every expectation computed here by hand from the model dimensions.
//
// Conventions (the doc names the blocks but not their small vectors; these
// are model.h's "projections + norms"): linear layers have no biases; each
// norm has one weight vector of its width (RMSNorm): the attention input norm
// and the MLP/MoE input norm (H each) in every layer, the final norm (H), and
// for multi-latent attention the q and kv latent norms (q_lora, kv_lora).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <string>
#include <vector>

#include "costmodel/model.h"
#include "tests/costmodel/rel_near.h"
#include "tests/costmodel/synthetic_model.h"

namespace hapmoe {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// ---------------------------------------------------------------------------
// GPT-style dense model (GPT-2 small shape): N = 12, H = 768, a = g = 12,
// d = 64, F = 3072, GELU (m = 2), learned positions (1024), V = 50257, tied.
ModelSpec gpt_model() {
  ModelSpec m;
  m.name = "gpt-small";
  m.num_layers = 12;
  m.hidden = 768;
  m.num_heads = 12;
  m.num_kv_heads = 12;
  m.head_dim = 64;
  m.ffn_hidden = 3072;
  m.mlp = MlpKind::kGelu;
  m.positions = PositionKind::kLearned;
  m.max_positions = 1024;
  m.vocab = 50257;
  m.tied_embeddings = true;
  return m;
}

// MoE model: N = 4, H = 1024, a = 8, g = 2, d = 128, F = 4096, SwiGLU (m = 3),
// rotary, V = 32000, untied; E = 8, k = 2, F_e = 2048, F_s = 1024; layer 0
// dense, layers 1-3 MoE.
ModelSpec moe_model() {
  ModelSpec m = test_models::dense_model();
  m.name = "moe-small";
  m.num_experts = 8;
  m.top_k = 2;
  m.expert_ffn_hidden = 2048;
  m.shared_expert_ffn_hidden = 1024;
  m.moe_layers = {0, 1, 1, 1};
  return m;
}

// DeepSeek-style model with multi-latent attention: N = 3, H = 1024, a = 8,
// q_lora 384, kv_lora 128, d_nope 64, d_rope 32 (d_qk = 96), d_v 64;
// F = 2816 (layer 0), E = 16, k = 4, F_e = 256, F_s = 512 (layers 1, 2).
ModelSpec mla_model() {
  ModelSpec m;
  m.name = "mla-small";
  m.num_layers = 3;
  m.hidden = 1024;
  m.num_heads = 8;
  m.num_kv_heads = 8;
  m.head_dim = 128;
  m.ffn_hidden = 2816;
  m.mlp = MlpKind::kSwiGlu;
  m.positions = PositionKind::kRotary;
  m.max_positions = 4096;
  m.vocab = 32000;
  m.tied_embeddings = false;
  m.num_experts = 16;
  m.top_k = 4;
  m.expert_ffn_hidden = 256;
  m.shared_expert_ffn_hidden = 512;
  m.moe_layers = {0, 1, 1};
  m.mla.q_lora_rank = 384;
  m.mla.kv_lora_rank = 128;
  m.mla.qk_nope_head_dim = 64;
  m.mla.qk_rope_head_dim = 32;
  m.mla.v_head_dim = 64;
  return m;
}

TrainingSpec training(int seq_len, int global_batch) {
  TrainingSpec t;
  t.seq_len = seq_len;
  t.global_batch = global_batch;
  t.micro_batch = 1;
  return t;
}

// ===========================================================================
// GPT-style dense model

TEST(ModelCounts, GptLayerParams) {
  const LayerParams p = layer_params(gpt_model(), false);
  // attention: Q H·a·d + K,V 2·H·g·d + O a·d·H = 4·768·768 = 2,359,296; + norm 768
  EXPECT_REL(p.attention, 768.0 * 12 * 64 + 2.0 * 768 * 12 * 64 + 12.0 * 64 * 768 + 768);
  EXPECT_EQ(p.attention, 2360064.0);
  // MLP (GELU, m = 2): 2·H·F = 4,718,592; + norm 768
  EXPECT_REL(p.mlp, 2.0 * 768 * 3072 + 768);
  EXPECT_EQ(p.mlp, 4719360.0);
  EXPECT_EQ(p.experts, 0.0);
}

TEST(ModelCounts, GptEmbeddingOutputAndTotal) {
  ModelSpec m = gpt_model();
  // embedding V·H + learned positions 1024·H = (50257 + 1024)·768 = 39,383,808
  EXPECT_REL(embedding_params(m), 50257.0 * 768 + 1024.0 * 768);
  EXPECT_EQ(embedding_params(m), 39383808.0);
  // tied: the output layer adds only the final norm
  EXPECT_REL(output_params(m), 768.0);
  // total = embedding + final norm + 12·(attention + MLP)
  const double layer = (4.0 * 768 * 768 + 768) + (2.0 * 768 * 3072 + 768);
  const double total = 39383808.0 + 768 + 12 * layer;
  EXPECT_REL(total_params(m), total);
  EXPECT_EQ(total_params(m), 124337664.0);
  // dense: every parameter is active
  EXPECT_REL(active_params(m), total);
  // untied: the output matrix V·H joins
  m.tied_embeddings = false;
  EXPECT_REL(output_params(m), 768.0 + 50257.0 * 768);
  EXPECT_REL(total_params(m), total + 50257.0 * 768);
  // rotary positions: no position table
  m.positions = PositionKind::kRotary;
  EXPECT_REL(embedding_params(m), 50257.0 * 768);
}

// Megatron-LM pads the vocabulary to a multiple of
// --make-vocab-size-divisible-by (128) x TP (_vocab_size_with_padding).
TEST(ModelCounts, PaddedVocabulary) {
  ModelSpec m;
  m.vocab = 32000;
  EXPECT_EQ(padded_vocab(m, 1), 32000.0);  // 250 x 128
  EXPECT_EQ(padded_vocab(m, 2), 32000.0);  // 125 x 256
  EXPECT_EQ(padded_vocab(m, 4), 32256.0);  // 63 x 512
  m.vocab = 151936;                        // Qwen3
  EXPECT_EQ(padded_vocab(m, 2), 152064.0);
  m.vocab = 128256;  // Llama 3
  EXPECT_EQ(padded_vocab(m, 8), 129024.0);
  m.vocab_divisible_by = 1;
  EXPECT_EQ(padded_vocab(m, 1), 128256.0);
  ModelSpec g = gpt_model();
  ASSERT_EQ(validate(g), "");
  g.vocab_divisible_by = 0;
  EXPECT_NE(validate(g).find("vocab_divisible_by"), std::string::npos);
}

// Attention variants (docs/costmodel.md, "Attention variants"): a causal
// query sees seq/2 keys on average, W - W(W-1)/(2 seq) in a window of W
// keys; the model's mean over its layers. QKV biases and sinks add
// parameters.
TEST(ModelCounts, SlidingWindowKeysAndAttentionParameters) {
  ModelSpec m = gpt_model();
  const double seq = 4096;
  EXPECT_EQ(mean_attended_keys(m, seq), 2048.0);
  m.sliding_window = 128;
  m.window_layers.assign(static_cast<std::size_t>(m.num_layers), 0);
  for (std::size_t l = 0; l < m.window_layers.size(); l += 2) m.window_layers[l] = 1;
  const double share = static_cast<double>((m.num_layers + 1) / 2) / m.num_layers;
  const double windowed = 128.0 - 128.0 * 127.0 / (2.0 * seq);  // 126.015625
  EXPECT_DOUBLE_EQ(mean_attended_keys(m, seq), (1 - share) * 2048.0 + share * windowed);
  m.sliding_window = 8192;  // wider than the sequence: full
  EXPECT_DOUBLE_EQ(mean_attended_keys(m, seq), 2048.0);
  EXPECT_EQ(validate(m), "");
  m.window_layers.pop_back();
  EXPECT_NE(validate(m).find("window_layers"), std::string::npos);

  ModelSpec b = gpt_model();
  const double plain = layer_params(b, false).attention;
  b.qkv_bias = true;
  b.attention_sinks = true;
  EXPECT_DOUBLE_EQ(layer_params(b, false).attention,
                   plain + (b.num_heads + 2.0 * b.num_kv_heads) * b.head_dim + b.num_heads);
}

TEST(ModelCounts, GptFlopsPerIteration) {
  const Workload w{gpt_model(), training(1024, 8)};
  // per token and layer: 2·(attention projection params) + causal core
  // 2·(S/2)·a·(d_qk + d_v) + dense MLP 2·m·H·F
  const double proj = 4.0 * 768 * 768;                                        // 2,359,296
  const double core = 2.0 * (1024 / 2) * 12 * (64 + 64);                      // 1,572,864
  const double mlp = 2.0 * 2 * 768 * 3072;                                    // 9,437,184
  const double per_token = 12 * (2 * proj + core + mlp) + 2.0 * 768 * 50257;  // + output 2·H·V
  EXPECT_EQ(per_token, 265938432.0);
  // 3 × forward (backward twice), B·S tokens
  EXPECT_REL(model_flops_per_iteration(w), 3 * per_token * 1024 * 8);
}

TEST(ModelCounts, FlopsCountCausalAttentionQuadratically) {
  // Doubling S doubles every per-token term but the core attention, which
  // doubles per token again (S/2 keys per query).
  const Workload w1{gpt_model(), training(512, 8)};
  const Workload w2{gpt_model(), training(1024, 8)};
  const double proj = 4.0 * 768 * 768, mlp = 2.0 * 2 * 768 * 3072, out = 2.0 * 768 * 50257;
  auto expected = [&](double s) {
    const double core = 2.0 * (s / 2) * 12 * 128;
    return 3 * (12 * (2 * proj + core + mlp) + out) * s * 8;
  };
  EXPECT_REL(model_flops_per_iteration(w1), expected(512));
  EXPECT_REL(model_flops_per_iteration(w2), expected(1024));
}

// ===========================================================================
// MoE model

TEST(ModelCounts, MoeLayerParams) {
  const ModelSpec m = moe_model();
  const double attn = 1024.0 * 8 * 128 + 2.0 * 1024 * 2 * 128 + 8.0 * 128 * 1024 + 1024;
  EXPECT_EQ(attn, 2622464.0);
  const LayerParams dense = layer_params(m, false);
  EXPECT_REL(dense.attention, attn);
  // dense MLP (SwiGLU, m = 3): 3·H·F + norm
  EXPECT_REL(dense.mlp, 3.0 * 1024 * 4096 + 1024);
  EXPECT_EQ(dense.experts, 0.0);
  const LayerParams moe = layer_params(m, true);
  EXPECT_REL(moe.attention, attn);
  // router H·E + shared m·H·F_s + norm
  EXPECT_REL(moe.mlp, 1024.0 * 8 + 3.0 * 1024 * 1024 + 1024);
  // all routed experts: E·m·H·F_e = 8·3·1024·2048 = 50,331,648
  EXPECT_REL(moe.experts, 8.0 * 3 * 1024 * 2048);
  EXPECT_EQ(moe.experts, 50331648.0);
}

TEST(ModelCounts, MoeTotalAndActiveParams) {
  const ModelSpec m = moe_model();
  const double attn = 2622464.0;
  const double dense_mlp = 3.0 * 1024 * 4096 + 1024;
  const double moe_mlp = 1024.0 * 8 + 3.0 * 1024 * 1024 + 1024;
  const double experts = 8.0 * 3 * 1024 * 2048;
  const double emb = 32000.0 * 1024;
  const double out = 1024.0 + 32000.0 * 1024;  // final norm + untied output matrix
  EXPECT_REL(embedding_params(m), emb);
  EXPECT_REL(output_params(m), out);
  // one dense layer, three MoE layers
  EXPECT_REL(total_params(m), emb + out + 4 * attn + dense_mlp + 3 * (moe_mlp + experts));
  // active: a token meets k = 2 of the E = 8 experts
  EXPECT_REL(active_params(m), emb + out + 4 * attn + dense_mlp + 3 * (moe_mlp + experts * 2 / 8));
}

TEST(ModelCounts, MoeFlopsPerIteration) {
  const Workload w{moe_model(), training(2048, 16)};
  const double proj = 1024.0 * 8 * 128 + 2.0 * 1024 * 2 * 128 + 8.0 * 128 * 1024;  // no norm
  const double core = 2.0 * (2048 / 2) * 8 * (128 + 128);
  // dense layer: 2·m·H·F; MoE layers: router 2·H·E + 2·m·H·(k·F_e + F_s)
  const double dense_mlp = 2.0 * 3 * 1024 * 4096;
  const double moe = 2.0 * 1024 * 8 + 2.0 * 3 * 1024 * (2.0 * 2048 + 1024);
  const double per_token = 4 * (2 * proj + core) + dense_mlp + 3 * moe + 2.0 * 1024 * 32000;
  EXPECT_REL(model_flops_per_iteration(w), 3 * per_token * 2048 * 16);
}

// ===========================================================================
// Multi-latent attention model

TEST(ModelCounts, MlaLayerParams) {
  const ModelSpec m = mla_model();
  // q: down H·q_lora + latent norm q_lora + up q_lora·a·d_qk
  const double q = 1024.0 * 384 + 384 + 384.0 * 8 * 96;
  // kv: down H·(kv_lora + d_rope) + latent norm kv_lora + up kv_lora·a·(d_nope + d_v)
  const double kv = 1024.0 * (128 + 32) + 128 + 128.0 * 8 * (64 + 64);
  // output: a·d_v·H
  const double o = 8.0 * 64 * 1024;
  const LayerParams dense = layer_params(m, false);
  EXPECT_REL(dense.attention, q + kv + o + 1024);  // + input norm
  EXPECT_EQ(dense.attention, 1508864.0);
  EXPECT_REL(dense.mlp, 3.0 * 1024 * 2816 + 1024);
  const LayerParams moe = layer_params(m, true);
  EXPECT_REL(moe.mlp, 1024.0 * 16 + 3.0 * 1024 * 512 + 1024);
  EXPECT_REL(moe.experts, 16.0 * 3 * 1024 * 256);
  // active params: k = 4 of E = 16 experts
  const double emb = 32000.0 * 1024, out = 1024.0 + 32000.0 * 1024;
  EXPECT_REL(active_params(m), emb + out + 3 * (q + kv + o + 1024) + dense.mlp +
                                   2 * (moe.mlp + 16.0 * 3 * 1024 * 256 * 4 / 16));
  EXPECT_REL(total_params(m),
             emb + out + 3 * (q + kv + o + 1024) + (3.0 * 1024 * 2816 + 1024) +
                 2 * ((1024.0 * 16 + 3.0 * 1024 * 512 + 1024) + 16.0 * 3 * 1024 * 256));
}

TEST(ModelCounts, MlaDirectQueryProjection) {
  ModelSpec m = mla_model();
  m.mla.q_lora_rank = 0;  // queries projected directly: H·a·d_qk
  const double q = 1024.0 * 8 * 96;
  const double kv = 1024.0 * (128 + 32) + 128 + 128.0 * 8 * (64 + 64);
  const double o = 8.0 * 64 * 1024;
  EXPECT_REL(layer_params(m, false).attention, q + kv + o + 1024);
}

TEST(ModelCounts, MlaFlopsPerIteration) {
  const Workload w{mla_model(), training(4096, 4)};
  // "2 × attention projection params": the projection matrices only.
  const double proj = (1024.0 * 384 + 384.0 * 8 * 96) +                // q down, q up
                      (1024.0 * (128 + 32) + 128.0 * 8 * (64 + 64)) +  // kv down, kv up
                      8.0 * 64 * 1024;                                 // output
  EXPECT_EQ(proj, 1507328.0);
  // causal core: 2·(S/2)·a·(d_qk + d_v) with d_qk = 96, d_v = 64
  const double core = 2.0 * (4096 / 2) * 8 * (96 + 64);
  const double dense_mlp = 2.0 * 3 * 1024 * 2816;
  const double moe = 2.0 * 1024 * 16 + 2.0 * 3 * 1024 * (4.0 * 256 + 512);
  const double per_token = 3 * (2 * proj + core) + dense_mlp + 2 * moe + 2.0 * 1024 * 32000;
  EXPECT_REL(model_flops_per_iteration(w), 3 * per_token * 4096 * 4);
}

TEST(ModelCounts, NumMoeLayers) {
  EXPECT_EQ(moe_model().num_moe_layers(), 3);
  EXPECT_EQ(mla_model().num_moe_layers(), 2);
  EXPECT_EQ(gpt_model().num_moe_layers(), 0);
  EXPECT_FALSE(moe_model().is_moe_layer(0));
  EXPECT_TRUE(moe_model().is_moe_layer(3));
  EXPECT_FALSE(gpt_model().is_moe_layer(0));
}

// ===========================================================================
// validate(ModelSpec)

TEST(ModelCounts, ValidModelsPass) {
  EXPECT_EQ(validate(gpt_model()), "");
  EXPECT_EQ(validate(moe_model()), "");
  EXPECT_EQ(validate(mla_model()), "");
}

TEST(ModelCounts, ValidateModelNamesFieldAndValue) {
  {
    ModelSpec m = gpt_model();
    m.num_layers = 0;
    const std::string e = validate(m);
    EXPECT_TRUE(contains(e, "num_layers = 0")) << e;
  }
  {
    ModelSpec m = gpt_model();
    m.hidden = -1;
    EXPECT_TRUE(contains(validate(m), "hidden = -1")) << validate(m);
  }
  {
    ModelSpec m = moe_model();
    m.num_heads = 32;
    m.num_kv_heads = 5;  // does not divide 32
    const std::string e = validate(m);
    EXPECT_TRUE(contains(e, "num_kv_heads = 5")) << e;
    EXPECT_TRUE(contains(e, "32")) << e;
  }
  {
    ModelSpec m = gpt_model();
    m.num_kv_heads = 24;  // more KV heads than heads
    EXPECT_TRUE(contains(validate(m), "num_kv_heads = 24")) << validate(m);
  }
  {
    ModelSpec m = gpt_model();
    m.vocab = 0;
    EXPECT_TRUE(contains(validate(m), "vocab = 0")) << validate(m);
  }
  {
    ModelSpec m = gpt_model();  // dense layers need an MLP width
    m.ffn_hidden = 0;
    EXPECT_TRUE(contains(validate(m), "ffn_hidden = 0")) << validate(m);
  }
  {
    ModelSpec m = gpt_model();  // learned positions need a table size
    m.max_positions = 0;
    EXPECT_TRUE(contains(validate(m), "max_positions = 0")) << validate(m);
  }
  {
    ModelSpec m = mla_model();
    m.mla.v_head_dim = 0;
    EXPECT_FALSE(validate(m).empty());
  }
}

TEST(ModelCounts, ValidateMoeFields) {
  {
    ModelSpec m = moe_model();
    m.top_k = 9;  // more than E = 8
    const std::string e = validate(m);
    EXPECT_TRUE(contains(e, "top_k = 9")) << e;
  }
  {
    ModelSpec m = moe_model();
    m.top_k = 0;
    EXPECT_TRUE(contains(validate(m), "top_k = 0")) << validate(m);
  }
  {
    ModelSpec m = moe_model();
    m.expert_ffn_hidden = 0;
    EXPECT_TRUE(contains(validate(m), "expert_ffn_hidden = 0")) << validate(m);
  }
  {
    ModelSpec m = moe_model();
    m.shared_expert_ffn_hidden = -1;
    EXPECT_TRUE(contains(validate(m), "shared_expert_ffn_hidden = -1")) << validate(m);
  }
  {
    ModelSpec m = moe_model();
    m.moe_layers = {1, 1, 1};  // 3 entries for 4 layers
    EXPECT_FALSE(validate(m).empty());
  }
  {
    ModelSpec m = moe_model();
    m.moe_layers = {0, 0, 0, 0};  // experts but no MoE layer
    EXPECT_FALSE(validate(m).empty());
  }
  {
    ModelSpec m = gpt_model();  // MoE layers without experts
    m.moe_layers = std::vector<std::uint8_t>(12, 1);
    EXPECT_FALSE(validate(m).empty());
  }
  {
    // All layers MoE: the dense width may be 0.
    ModelSpec m = moe_model();
    m.moe_layers = {1, 1, 1, 1};
    m.ffn_hidden = 0;
    EXPECT_EQ(validate(m), "");
  }
}

// ===========================================================================
// validate(TrainingSpec, ModelSpec)

TEST(ModelCounts, ValidateTraining) {
  const ModelSpec gpt = gpt_model();  // max_positions 1024
  EXPECT_EQ(validate(training(1024, 8), gpt), "");
  {
    TrainingSpec t = training(1024, 8);
    t.seq_len = 0;
    EXPECT_TRUE(contains(validate(t, gpt), "seq_len = 0")) << validate(t, gpt);
  }
  {
    const TrainingSpec t = training(2048, 8);  // longer than max_positions
    const std::string e = validate(t, gpt);
    EXPECT_TRUE(contains(e, "seq_len = 2048")) << e;
    EXPECT_TRUE(contains(e, "1024")) << e;
  }
  {
    TrainingSpec t = training(1024, 10);
    t.micro_batch = 4;  // 10 is not a multiple of 4
    const std::string e = validate(t, gpt);
    EXPECT_TRUE(contains(e, "global_batch = 10")) << e;
  }
  {
    TrainingSpec t = training(1024, 8);
    t.micro_batch = 0;
    EXPECT_TRUE(contains(validate(t, gpt), "micro_batch = 0")) << validate(t, gpt);
  }
  {
    TrainingSpec t = training(1024, 8);
    t.global_batch = 0;
    EXPECT_TRUE(contains(validate(t, gpt), "global_batch = 0")) << validate(t, gpt);
  }
  {
    TrainingSpec t = training(1024, 8);
    t.imbalance = 0.9;  // ρ ≥ 1
    EXPECT_TRUE(contains(validate(t, gpt), "imbalance")) << validate(t, gpt);
    t.imbalance = 1.0;
    EXPECT_EQ(validate(t, gpt), "");
  }
  {
    TrainingSpec t = training(1024, 8);
    t.gamma = 1.5;  // γ ∈ [0, 1]
    EXPECT_TRUE(contains(validate(t, gpt), "gamma")) << validate(t, gpt);
    t.gamma = -0.1;
    EXPECT_TRUE(contains(validate(t, gpt), "gamma")) << validate(t, gpt);
    t.gamma = 0.0;
    EXPECT_EQ(validate(t, gpt), "");
  }
}

}  // namespace
}  // namespace hapmoe
