// The small synthetic dense model the cost-model tests compute by hand:
// 4 layers, H = 1024, 8 heads of 128 with 2 KV groups, SwiGLU F = 4096,
// rotary positions, V = 32000, untied embeddings; the MoE models of the
// tests add their experts to it.
#pragma once

#include "costmodel/model.h"

namespace hapmoe::test_models {

inline ModelSpec dense_model() {
  ModelSpec m;
  m.name = "synthetic-dense";
  m.num_layers = 4;
  m.hidden = 1024;
  m.num_heads = 8;
  m.num_kv_heads = 2;
  m.head_dim = 128;
  m.ffn_hidden = 4096;
  m.mlp = MlpKind::kSwiGlu;
  m.positions = PositionKind::kRotary;
  m.max_positions = 4096;
  m.vocab = 32000;
  m.tied_embeddings = false;
  return m;
}

}  // namespace hapmoe::test_models
