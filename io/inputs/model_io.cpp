#include "io/inputs/model_io.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "costmodel/errors.h"
#include "costmodel/text.h"
#include "io/inputs/files.h"
#include "io/inputs/json_strict.h"
#include "io/inputs/plan_io.h"

namespace hapmoe {

namespace {

// Ranges of the values a model file may give (docs/models.md).
constexpr std::int64_t kMaxSize = std::int64_t{1} << 24;       // hidden, FFN widths, vocab
constexpr std::int64_t kMaxPositions = std::int64_t{1} << 30;  // max_positions
constexpr std::int64_t kMaxLayers = 100000;
constexpr std::int64_t kMaxHeads = 65536;
constexpr std::int64_t kMaxExperts = 65536;
constexpr std::int64_t kMaxSeqLen = std::int64_t{1} << 22;
constexpr std::int64_t kMaxBatch = std::int64_t{1} << 30;
constexpr double kMinImbalance = 1.0;
constexpr double kMaxImbalance = 1000.0;
// Default sequence length; a model's max_positions caps it when no
// training.seq_len is given.
constexpr int kDefaultSeqLen = 4096;

std::vector<std::uint8_t> moe_map(int num_layers, int first_dense, int freq) {
  std::vector<std::uint8_t> map(static_cast<std::size_t>(num_layers), 0);
  for (int l = first_dense; l < num_layers; l += freq) map[static_cast<std::size_t>(l)] = 1;
  return map;
}

std::vector<std::uint8_t> all_moe(int num_layers) { return moe_map(num_layers, 0, 1); }

// ---------------------------------------------------------------------------
// Presets

Workload mixtral_like(const std::string& name, int layers, int hidden, int heads, int ffn,
                      int max_positions) {
  Workload w;
  ModelSpec& m = w.model;
  m.name = name;
  m.num_layers = layers;
  m.hidden = hidden;
  m.num_heads = heads;
  m.num_kv_heads = 8;
  m.head_dim = 128;
  m.ffn_hidden = ffn;  // no dense layer; kept equal to the expert width
  m.mlp = MlpKind::kSwiGlu;
  m.positions = PositionKind::kRotary;
  m.max_positions = max_positions;
  m.vocab = 32000;
  m.tied_embeddings = false;
  m.num_experts = 8;
  m.top_k = 2;
  m.expert_ffn_hidden = ffn;
  m.shared_expert_ffn_hidden = 0;
  m.moe_layers = all_moe(layers);
  return w;
}

Workload llama_like(const std::string& name, int layers, int hidden, int heads, int kv_heads,
                    int ffn, int vocab, int max_positions) {
  Workload w;
  ModelSpec& m = w.model;
  m.name = name;
  m.num_layers = layers;
  m.hidden = hidden;
  m.num_heads = heads;
  m.num_kv_heads = kv_heads;
  m.head_dim = hidden / heads;
  m.ffn_hidden = ffn;
  m.mlp = MlpKind::kSwiGlu;
  m.positions = PositionKind::kRotary;
  m.max_positions = max_positions;
  m.vocab = vocab;
  m.tied_embeddings = false;
  return w;
}

Workload qwen3_moe(const std::string& name, int layers, int hidden, int heads, int dense_ffn,
                   int expert_ffn) {
  Workload w;
  ModelSpec& m = w.model;
  m.name = name;
  m.num_layers = layers;
  m.hidden = hidden;
  m.num_heads = heads;
  m.num_kv_heads = 4;
  m.head_dim = 128;
  m.ffn_hidden = dense_ffn;  // unused: every layer is MoE
  m.mlp = MlpKind::kSwiGlu;
  m.positions = PositionKind::kRotary;
  m.max_positions = 40960;
  m.vocab = 151936;
  m.tied_embeddings = false;
  m.num_experts = 128;
  m.top_k = 8;
  m.expert_ffn_hidden = expert_ffn;
  m.shared_expert_ffn_hidden = 0;
  m.moe_layers = all_moe(layers);
  return w;
}

Workload deepseek_v3() {
  Workload w;
  ModelSpec& m = w.model;
  m.name = "deepseek-v3";
  m.num_layers = 61;
  m.hidden = 7168;
  m.num_heads = 128;
  m.num_kv_heads = 128;
  m.head_dim = 128;  // = qk_nope_head_dim; attention is costed from the MLA widths
  m.ffn_hidden = 18432;
  m.mlp = MlpKind::kSwiGlu;
  m.positions = PositionKind::kRotary;
  m.max_positions = 163840;
  m.vocab = 129280;
  m.tied_embeddings = false;
  m.mla.q_lora_rank = 1536;
  m.mla.kv_lora_rank = 512;
  m.mla.qk_nope_head_dim = 128;
  m.mla.qk_rope_head_dim = 64;
  m.mla.v_head_dim = 128;
  m.num_experts = 256;
  m.top_k = 8;
  m.expert_ffn_hidden = 2048;
  m.shared_expert_ffn_hidden = 2048;  // 1 shared expert x 2048
  m.moe_layers = moe_map(61, 3, 1);
  m.mtp_layers = 1;  // num_nextn_predict_layers: DeepSeek-V3 trains one MTP depth
  return w;
}

std::vector<ModelPreset> build_presets() {
  std::vector<ModelPreset> presets;

  {
    Workload w = mixtral_like("mixtral-s", 24, 4096, 32, 14336, 32768);
    w.training.global_batch = 256;
    w.training.dispatcher = Dispatcher::kAllGather;
    presets.push_back({"mixtral-s",
                       "paper's Mixtral-S: 24 layers of Mixtral-8x7B width, 8 experts top-2",
                       "paper Appendix A", std::move(w)});
  }
  {
    Workload w = mixtral_like("mixtral-l", 48, 6144, 48, 16384, 65536);
    w.training.global_batch = 512;
    w.training.dispatcher = Dispatcher::kAllToAll;
    presets.push_back({"mixtral-l",
                       "paper's Mixtral-L (~122B): 48 layers of Mixtral-8x22B width, 8 experts "
                       "top-2",
                       "paper Appendix A", std::move(w)});
  }
  presets.push_back({"llama2-7b", "Llama-2-7B, dense, MHA",
                     "REFERENCE.md §2.2 row Llama-2-7B (M12, M13)",
                     llama_like("llama2-7b", 32, 4096, 32, 32, 11008, 32000, 4096)});
  presets.push_back({"llama2-13b", "Llama-2-13B, dense, MHA",
                     "REFERENCE.md §2.2 row Llama-2-13B (M14)",
                     llama_like("llama2-13b", 40, 5120, 40, 40, 13824, 32000, 4096)});
  presets.push_back({"llama3-70b", "Llama-3-70B, dense, GQA with 8 KV heads",
                     "REFERENCE.md §2.2 row Llama-3-70B (M15)",
                     llama_like("llama3-70b", 80, 8192, 64, 8, 28672, 128256, 8192)});
  presets.push_back({"mixtral-8x7b", "Mixtral-8x7B-v0.1: 32 layers, 8 experts top-2",
                     "REFERENCE.md §2.2 row Mixtral-8x7B-v0.1 (M1, M2, M3)",
                     mixtral_like("mixtral-8x7b", 32, 4096, 32, 14336, 32768)});
  presets.push_back({"mixtral-8x22b",
                     "Mixtral-8x22B-v0.1 (base, vocab 32000): 56 layers, 8 experts top-2",
                     "REFERENCE.md §2.2 row Mixtral-8x22B-v0.1 (M4)",
                     mixtral_like("mixtral-8x22b", 56, 6144, 48, 16384, 65536)});
  presets.push_back({"qwen3-30b-a3b", "Qwen3-30B-A3B: 48 layers, 128 experts top-8, GQA 4",
                     "REFERENCE.md §2.2 row Qwen3-30B-A3B (M8, M9, M10)",
                     qwen3_moe("qwen3-30b-a3b", 48, 2048, 32, 6144, 768)});
  presets.push_back({"qwen3-235b-a22b", "Qwen3-235B-A22B: 94 layers, 128 experts top-8, GQA 4",
                     "REFERENCE.md §2.2 row Qwen3-235B-A22B (M8, M9, M11)",
                     qwen3_moe("qwen3-235b-a22b", 94, 4096, 64, 12288, 1536)});
  presets.push_back({"deepseek-v3",
                     "DeepSeek-V3 (671B): MLA, 3 dense + 58 MoE layers, 256 routed experts "
                     "top-8 + 1 shared, one MTP depth",
                     "REFERENCE.md §2.2 row DeepSeek-V3 and MLA notes (M5, M6, M7)",
                     deepseek_v3()});
  return presets;
}

// ---------------------------------------------------------------------------
// Shared helpers for both file formats

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

std::string preset_names() {
  std::vector<std::string> names;
  for (const auto& p : model_presets()) names.push_back(p.name);
  return join(names);
}

std::string where_of(const std::string& origin, const std::string& pointer) {
  return pointer.empty() ? origin : origin + ":" + pointer;
}

// Turns a validate() message into an InputError. The message starts with
// the field name ("top_k = 9 must be ..."); `pointers` maps field names to
// the JSON pointer of that field in the file.
[[noreturn]] void fail_validation(const std::string& origin, const std::string& message,
                                  const std::map<std::string, std::string>& pointers) {
  const std::string field = message.substr(0, message.find(' '));
  const auto it = pointers.find(field);
  throw InputError(where_of(origin, it == pointers.end() ? "" : it->second), message);
}

void validate_workload(const Workload& w, const std::string& origin,
                       const std::map<std::string, std::string>& pointers) {
  if (auto e = validate(w.model); !e.empty()) fail_validation(origin, e, pointers);
  if (auto e = validate(w.training, w.model); !e.empty()) fail_validation(origin, e, pointers);
}

// ---------------------------------------------------------------------------
// Hugging Face config.json

const std::vector<std::string>& known_hf_families() {
  static const std::vector<std::string> kFamilies = {"mixtral",     "qwen2_moe",   "qwen3_moe",
                                                     "deepseek_v3", "deepseek_v2", "llama",
                                                     "mistral",     "qwen2",       "qwen3"};
  return kFamilies;
}

// Reads a required integer, with a message that explains a missing key in
// a file of an unknown family.
int hf_required_int(ObjectReader& r, const std::string& key, std::int64_t lo, std::int64_t hi,
                    const std::string& family, bool known_family) {
  if (!r.has(key)) {
    std::string what = "required field is missing";
    if (!known_family) {
      what += " (model_type \"" + family + "\" is not a known family (" +
              join(known_hf_families()) +
              "); it is read with the common Llama-style keys num_hidden_layers, hidden_size, "
              "num_attention_heads, intermediate_size, vocab_size)";
    }
    r.fail(key, what);
  }
  return r.get_int(key, lo, hi);
}

// ---------------------------------------------------------------------------
// Hugging Face: what the cost model cannot represent (docs/models.md,
// "Refused and approximated"). The cost model knows one kind of layer:
// softmax attention (MHA, GQA or MLA over the whole sequence) followed by a
// dense MLP or a MoE block. A file describing anything else is refused with
// the field that shows it, rather than costed as if it were that layer: a
// plan for a model the numbers do not describe is worse than no plan.
// Approximations that keep the figures meaningful are read, with a note.

constexpr const char* kRefusedSection = "docs/models.md, \"Refused and approximated\"";

// A key whose value is present and not null.
const Json* present(const Json& root, const std::string& key) {
  const auto it = root.find(key);
  return it == root.end() || it->is_null() ? nullptr : &*it;
}

std::string of_family(const std::string& family) {
  return family.empty() ? std::string() : " (model_type \"" + family + "\")";
}

// `layer_types` entries that are softmax attention; sliding-window and
// chunked layers are costed as full attention (noted).
bool is_attention_layer_kind(const std::string& kind) {
  return kind == "full_attention" || kind == "attention" || kind == "sliding_attention" ||
         kind == "chunked_attention";
}

// Families whose layers are (partly) state-space or linear-attention
// mixers: Mamba and its hybrids, Gated DeltaNet, lightning attention, RWKV,
// short convolutions, RG-LRU.
bool is_hybrid_family(const std::string& family) {
  static const std::set<std::string> kFamilies = {
      "jamba",      "mamba",           "mamba2",  "falcon_mamba", "falcon_h1",
      "bamba",      "zamba",           "zamba2",  "nemotron_h",   "granitemoehybrid",
      "qwen3_next", "recurrent_gemma", "minimax", "kimi_linear",  "lfm2",
      "rwkv"};
  return kFamilies.count(family) > 0;
}

// Keys that only hybrid configs have, in the order they are reported.
const std::vector<std::string>& hybrid_keys() {
  static const std::vector<std::string> kKeys = {
      "attn_layer_period",        // Jamba: one attention layer every N
      "attn_layer_offset",        // Jamba
      "attn_layer_indices",       // Bamba
      "hybrid_override_pattern",  // Nemotron-H: "M-M-M-*-..."
      "block_types",              // RecurrentGemma
      "attn_type_list",           // MiniMax-01: lightning (linear) attention
      "linear_attn_config",       // Kimi Linear
      "full_attention_interval",  // Qwen3-Next: one full-attention layer every N
      "linear_num_key_heads",     // Qwen3-Next: Gated DeltaNet widths
      "linear_num_value_heads",
      "linear_key_head_dim",
      "linear_value_head_dim",
      "linear_conv_kernel_dim"};
  return kKeys;
}

[[noreturn]] void refuse_hybrid(const std::string& origin, const std::string& pointer,
                                const std::string& field, const Json& value,
                                const std::string& family) {
  throw InputError(where_of(origin, pointer),
                   field + " = " + describe(value) + ": hybrid Mamba/linear-attention layers" +
                       of_family(family) + " are not modelled; refused (" + kRefusedSection + ")");
}

// Throws InputError for a model the cost model cannot represent, naming
// the field and its value; returns for everything else.
void refuse_unrepresentable(const Json& root, const ObjectReader& r, const std::string& family) {
  const std::string& origin = r.origin();
  // A multimodal config: the language model's keys are one level down,
  // next to a vision (or audio) tower that is not modelled.
  if (present(root, "text_config")) {
    r.fail("text_config", "a multimodal config" + of_family(family) +
                              ": its vision/audio towers are not modelled; pass the text_config "
                              "object as its own file (jq .text_config) to plan the language "
                              "model alone");
  }
  // DeepSeek sparse attention (DeepSeek-V3.2): a lightning indexer picks
  // index_topk keys per query.
  for (const char* key : {"index_topk", "index_n_heads", "index_head_dim"}) {
    if (const Json* v = present(root, key)) {
      r.fail(key, std::string(key) + " = " + describe(*v) + ": DeepSeek sparse attention" +
                      of_family(family) + " is not modelled; refused (" + kRefusedSection + ")");
    }
  }
  if (family == "deepseek_v32") {
    r.fail("model_type",
           "model_type = \"deepseek_v32\": DeepSeek sparse attention is not modelled; "
           "refused (" +
               std::string(kRefusedSection) + ")");
  }
  // Hybrid layers: a layer kind that is not attention, a key only hybrid
  // configs have, any Mamba/SSM key, or a hybrid family.
  if (const Json* types = present(root, "layer_types")) {
    if (!types->is_array()) {
      r.fail("layer_types", "must be a list of layer kinds, got " + describe(*types));
    }
    for (std::size_t i = 0; i < types->size(); ++i) {
      const Json& t = (*types)[i];
      const std::string ptr = r.pointer("layer_types") + "/" + std::to_string(i);
      if (!t.is_string()) {
        throw InputError(where_of(origin, ptr), "must be a string, got " + describe(t));
      }
      if (!is_attention_layer_kind(t.get<std::string>())) {
        refuse_hybrid(origin, ptr, "layer_types[" + std::to_string(i) + "]", t, family);
      }
    }
  }
  for (const std::string& key : hybrid_keys()) {
    if (const Json* v = present(root, key)) refuse_hybrid(origin, r.pointer(key), key, *v, family);
  }
  for (const auto& [key, v] : root.items()) {
    if (v.is_null()) continue;
    if (key.rfind("mamba", 0) == 0 || key.rfind("ssm_", 0) == 0 || key == "ssm_cfg") {
      refuse_hybrid(origin, r.pointer(key), key, v, family);
    }
  }
  if (is_hybrid_family(family)) {
    refuse_hybrid(origin, r.pointer("model_type"), "model_type", root.at("model_type"), family);
  }
}

// The approximations of a file that was read: one note each.
// Sliding-window attention, sinks and QKV bias of a Hugging Face config:
// `layer_types` names each layer's kind (sliding_attention and
// chunked_attention attend to a window of sliding_window or
// attention_chunk_size keys); without it, Qwen's use_sliding_window windows
// the layers from max_window_layers on, and a sliding_window alone (Mistral)
// windows every layer. GPT-OSS has a learned sink per head; Qwen2 has QKV
// biases, other families say so in attention_bias.
void read_hf_attention_variants(const Json& root, ObjectReader& r, const std::string& family,
                                ModelSpec& m) {
  std::optional<int> window = r.opt_int("sliding_window", 1, kMaxPositions);
  if (!window) window = r.opt_int("attention_chunk_size", 1, kMaxPositions);
  std::vector<std::uint8_t> layers;
  if (const Json* types = present(root, "layer_types")) {
    for (const Json& t : *types) {
      const std::string kind = t.get<std::string>();
      layers.push_back(kind == "sliding_attention" || kind == "chunked_attention" ? 1 : 0);
    }
  } else if (window && r.has("use_sliding_window")) {
    if (r.opt_bool("use_sliding_window").value_or(false)) {
      const int from = r.opt_int("max_window_layers", 0, m.num_layers).value_or(0);
      for (int l = 0; l < m.num_layers; ++l) layers.push_back(l >= from ? 1 : 0);
    }
  } else if (window) {
    layers.assign(static_cast<std::size_t>(m.num_layers), 1);
  }
  if (window && std::count(layers.begin(), layers.end(), 1) > 0) {
    m.sliding_window = *window;
    m.window_layers = std::move(layers);
  } else if (std::count(layers.begin(), layers.end(), 1) > 0) {
    r.fail("layer_types", "names sliding-window layers but the file gives no sliding_window");
  }
  m.attention_sinks = family == "gpt_oss";
  m.qkv_bias =
      family == "qwen2" || family == "qwen2_moe" || r.opt_bool("attention_bias").value_or(false);
}

void note_approximations(const Json& root, const ModelSpec& m, const std::string& family,
                         bool known, std::vector<std::string>& notes) {
  if (!known) {
    notes.push_back(
        (family.empty() ? std::string("the file has no model_type")
                        : "model_type \"" + family + "\" is not a known family (" +
                              join(known_hf_families()) + ")") +
        "; it is read with the Llama-style keys (num_hidden_layers, hidden_size, "
        "num_attention_heads, num_key_value_heads, head_dim, intermediate_size, vocab_size; "
        "experts from num_experts / num_local_experts / n_routed_experts, num_experts_per_tok, "
        "moe_intermediate_size) as a SwiGLU MLP with rotary positions; check the parameter "
        "counts against the model card");
  }
  if (m.sliding_window > 0) {
    const auto windowed = std::count(m.window_layers.begin(), m.window_layers.end(), 1);
    notes.push_back(std::to_string(windowed) + " of " + std::to_string(m.num_layers) +
                    " layers attend to a window of the last " + std::to_string(m.sliding_window) +
                    " keys; their attention is costed at the model's mean keys per query "
                    "(docs/costmodel.md, \"Attention variants\")");
  }
  for (const char* key : {"vision_config", "audio_config"}) {
    if (present(root, key)) {
      notes.push_back(std::string(key) +
                      ": the file describes a multimodal model; only its language model is "
                      "costed, the " +
                      (std::string(key) == "vision_config" ? "vision" : "audio") +
                      " tower is not modelled");
    }
  }
}

Workload parse_hf_config(const Json& root, const std::string& origin,
                         std::vector<std::string>& notes) {
  ObjectReader r(root, origin, "");
  const std::string family = r.opt_string("model_type").value_or("");
  refuse_unrepresentable(root, r, family);
  const auto& families = known_hf_families();
  const bool known = std::find(families.begin(), families.end(), family) != families.end();
  const bool is_deepseek = family == "deepseek_v3" || family == "deepseek_v2";
  const bool is_qwen_moe = family == "qwen2_moe" || family == "qwen3_moe";

  Workload w;
  ModelSpec& m = w.model;
  m.name = origin;
  m.mlp = MlpKind::kSwiGlu;  // every supported family has a gated (SwiGLU) MLP
  m.positions = PositionKind::kRotary;

  m.num_layers = hf_required_int(r, "num_hidden_layers", 1, kMaxLayers, family, known);
  m.hidden = hf_required_int(r, "hidden_size", 1, kMaxSize, family, known);
  m.num_heads = hf_required_int(r, "num_attention_heads", 1, kMaxHeads, family, known);
  m.vocab = hf_required_int(r, "vocab_size", 1, kMaxSize, family, known);
  if (const Json* types = present(root, "layer_types");
      types && types->size() != static_cast<std::size_t>(m.num_layers)) {
    r.fail("layer_types", "list has " + std::to_string(types->size()) +
                              " entries, expected one per layer (num_hidden_layers = " +
                              std::to_string(m.num_layers) + ")");
  }
  m.num_kv_heads = r.opt_int("num_key_value_heads", 1, kMaxHeads).value_or(m.num_heads);
  if (r.has("num_key_value_heads") &&
      (m.num_kv_heads > m.num_heads || m.num_heads % m.num_kv_heads != 0)) {
    r.fail("num_key_value_heads",
           "num_key_value_heads = " + std::to_string(m.num_kv_heads) +
               " must divide num_attention_heads = " + std::to_string(m.num_heads));
  }
  const std::optional<int> head_dim = r.opt_int("head_dim", 1, kMaxSize);
  const std::optional<int> intermediate = r.opt_int("intermediate_size", 1, kMaxSize);
  m.max_positions = r.opt_int("max_position_embeddings", 1, kMaxPositions).value_or(0);
  m.tied_embeddings = r.opt_bool("tie_word_embeddings").value_or(false);

  // Multi-latent attention (DeepSeek-V2/V3).
  const std::optional<int> kv_lora = r.opt_int("kv_lora_rank", 0, kMaxSize);
  if (kv_lora && *kv_lora > 0) {
    m.mla.kv_lora_rank = *kv_lora;
    m.mla.q_lora_rank = r.opt_int("q_lora_rank", 0, kMaxSize).value_or(0);
    m.mla.qk_nope_head_dim = r.get_int("qk_nope_head_dim", 1, kMaxHeads);
    m.mla.qk_rope_head_dim = r.get_int("qk_rope_head_dim", 1, kMaxHeads);
    m.mla.v_head_dim = r.get_int("v_head_dim", 1, kMaxHeads);
    // With MLA, head_dim is the per-head query/key width without the rotary
    // part (transformers stores qk_rope_head_dim in head_dim).
    m.head_dim = m.mla.qk_nope_head_dim;
  } else if (head_dim) {
    m.head_dim = *head_dim;
  } else {
    if (m.hidden % m.num_heads != 0) {
      r.fail("hidden_size",
             "hidden_size = " + std::to_string(m.hidden) +
                 " is not divisible by num_attention_heads = " + std::to_string(m.num_heads) +
                 " and head_dim is absent (give head_dim)");
    }
    m.head_dim = m.hidden / m.num_heads;
  }

  // Routed experts: three spellings of the same count.
  std::optional<int> experts;
  std::string experts_key;
  for (const char* key : {"num_experts", "num_local_experts", "n_routed_experts"}) {
    const std::optional<int> v = r.opt_int(key, 0, kMaxExperts);
    if (!v) continue;
    if (experts && *experts != *v) {
      r.fail(key, std::string(key) + " = " + std::to_string(*v) + " disagrees with " + experts_key +
                      " = " + std::to_string(*experts) +
                      " (they are aliases of the number of routed experts)");
    }
    experts = v;
    experts_key = key;
  }
  m.num_experts = experts.value_or(0);
  if (experts && *experts == 0) {
    // A count of 0 with a router top-k is a contradiction, not a dense
    // model: say so rather than drop the experts silently.
    if (const std::optional<int> k = r.opt_int("num_experts_per_tok", 0, kMaxExperts);
        k && *k > 0) {
      r.fail(experts_key, experts_key + " = 0 but num_experts_per_tok = " + std::to_string(*k) +
                              ": give the number of experts, or drop both for a dense "
                              "model");
    }
  }

  // Shared experts and layer-map keys are type-checked even for dense files.
  const std::optional<int> moe_width = r.opt_int("moe_intermediate_size", 1, kMaxSize);
  const std::optional<int> shared_width = r.opt_int("shared_expert_intermediate_size", 0, kMaxSize);
  const std::optional<int> n_shared = r.opt_int("n_shared_experts", 0, kMaxExperts);
  const std::optional<int> first_dense = r.opt_int("first_k_dense_replace", 0, m.num_layers);
  const std::optional<int> layer_freq = r.opt_int("moe_layer_freq", 1, m.num_layers);
  const std::optional<int> sparse_step = r.opt_int("decoder_sparse_step", 1, m.num_layers);
  std::vector<int> mlp_only;
  if (const Json* list = r.opt_raw("mlp_only_layers")) {
    if (!list->is_array()) {
      r.fail("mlp_only_layers", "must be a list of layer indices, got " + describe(*list));
    }
    for (std::size_t i = 0; i < list->size(); ++i) {
      mlp_only.push_back(static_cast<int>(
          checked_int((*list)[i], 0, m.num_layers - 1,
                      where_of(origin, r.pointer("mlp_only_layers") + "/" + std::to_string(i)))));
    }
  }

  if (m.num_experts > 0) {
    m.top_k = r.get_int("num_experts_per_tok", 1, kMaxExperts);
    if (m.top_k > m.num_experts) {
      r.fail("num_experts_per_tok", "num_experts_per_tok = " + std::to_string(m.top_k) +
                                        " exceeds the number of experts " + experts_key + " = " +
                                        std::to_string(m.num_experts));
    }
    if (moe_width) {
      m.expert_ffn_hidden = *moe_width;
    } else if (is_deepseek || is_qwen_moe) {
      r.fail("moe_intermediate_size", "required field is missing (model_type \"" + family +
                                          "\" gives the expert width in moe_intermediate_size)");
    } else {
      // Mixtral (and unknown families without moe_intermediate_size):
      // intermediate_size is the width of one expert.
      if (!intermediate) {
        r.fail("intermediate_size", "required field is missing (the width of one expert)");
      }
      m.expert_ffn_hidden = *intermediate;
    }
    if (shared_width) {
      m.shared_expert_ffn_hidden = *shared_width;  // Qwen2-MoE: a total width
    } else if (n_shared) {
      m.shared_expert_ffn_hidden = *n_shared * m.expert_ffn_hidden;  // DeepSeek: a count
    }
    const int k = first_dense.value_or(0);
    const int freq = layer_freq.value_or(1);
    const int step = sparse_step.value_or(1);
    m.moe_layers.assign(static_cast<std::size_t>(m.num_layers), 0);
    for (int l = 0; l < m.num_layers; ++l) {
      // DeepSeek: layer_idx >= first_k_dense_replace and layer_idx %
      // moe_layer_freq == 0. Qwen: (layer_idx + 1) % decoder_sparse_step
      // == 0 and not in mlp_only_layers.
      const bool moe = l >= k && l % freq == 0 && (l + 1) % step == 0 &&
                       std::find(mlp_only.begin(), mlp_only.end(), l) == mlp_only.end();
      m.moe_layers[static_cast<std::size_t>(l)] = moe ? 1 : 0;
    }
    if (m.num_moe_layers() == 0) {
      throw InputError(origin, "the file has " + experts_key + " = " +
                                   std::to_string(m.num_experts) +
                                   " but first_k_dense_replace / moe_layer_freq / "
                                   "decoder_sparse_step / mlp_only_layers leave no MoE layer");
    }
  }

  const bool any_dense =
      m.num_experts == 0 || m.num_moe_layers() < static_cast<int>(m.moe_layers.size());
  if (intermediate) {
    m.ffn_hidden = *intermediate;
  } else if (any_dense) {
    r.fail("intermediate_size", "required field is missing (the model has dense layers)");
  }

  read_hf_attention_variants(root, r, family, m);
  // DeepSeek-V3's multi-token prediction depth.
  m.mtp_layers = r.opt_int("num_nextn_predict_layers", 0, 1000).value_or(0);

  // Keys the planner does not need (norms, rope, token ids, dtype, ...).
  r.ignore_all();
  r.finish();

  if (m.max_positions > 0) w.training.seq_len = std::min(kDefaultSeqLen, m.max_positions);

  static const std::map<std::string, std::string> kPointers = {
      {"num_layers", "/num_hidden_layers"},
      {"hidden", "/hidden_size"},
      {"num_heads", "/num_attention_heads"},
      {"num_kv_heads", "/num_key_value_heads"},
      {"head_dim", "/head_dim"},
      {"vocab", "/vocab_size"},
      {"ffn_hidden", "/intermediate_size"},
      {"max_positions", "/max_position_embeddings"},
      {"top_k", "/num_experts_per_tok"},
      {"expert_ffn_hidden", "/moe_intermediate_size"},
      {"q_lora_rank", "/q_lora_rank"},
      {"seq_len", "/max_position_embeddings"}};
  validate_workload(w, origin, kPointers);
  note_approximations(root, m, family, known, notes);
  return w;
}

// ---------------------------------------------------------------------------
// hapmoe model JSON

// Sliding-window attention, sinks and QKV bias (docs/models.md). The
// window's layers: an explicit 0/1 list, or Megatron's
// window_attn_skip_freq k (every k-th layer, 1-based, is full attention;
// absent: every layer windowed).
void read_attention_variants(ObjectReader& r, ModelSpec& m) {
  m.qkv_bias = r.opt_bool("qkv_bias").value_or(false);
  m.attention_sinks = r.opt_bool("attention_sinks").value_or(false);
  const std::optional<int> window = r.opt_int("sliding_window", 1, kMaxPositions);
  const Json* list = r.opt_raw("window_layers");
  const std::optional<int> skip = r.opt_int("window_attn_skip_freq", 1, kMaxLayers);
  if (!window) {
    for (const char* key : {"window_layers", "window_attn_skip_freq"}) {
      if (r.has(key)) r.fail(key, "has no effect without sliding_window");
    }
    return;
  }
  m.sliding_window = *window;
  if (list && skip) {
    r.fail("window_layers", "give either window_layers or window_attn_skip_freq, not both");
  }
  if (list) {
    if (!list->is_array() || list->size() != static_cast<std::size_t>(m.num_layers)) {
      r.fail("window_layers", "must be a list of one 0/1 per layer (num_layers = " +
                                  std::to_string(m.num_layers) + "), got " + describe(*list));
    }
    for (std::size_t i = 0; i < list->size(); ++i) {
      m.window_layers.push_back(static_cast<std::uint8_t>(
          checked_int((*list)[i], 0, 1,
                      where_of(r.origin(), r.pointer("window_layers") + "/" + std::to_string(i)))));
    }
    return;
  }
  for (int l = 0; l < m.num_layers; ++l) {
    m.window_layers.push_back(skip && (l + 1) % *skip == 0 ? 0 : 1);
  }
}

void read_mla(ObjectReader& parent, MlaSpec& mla) {
  const Json* raw = parent.opt_raw("mla");
  if (!raw) return;
  ObjectReader r(*raw, parent.origin(), parent.pointer("mla"));
  mla.q_lora_rank = r.opt_int("q_lora_rank", 0, kMaxSize).value_or(0);
  mla.kv_lora_rank = r.get_int("kv_lora_rank", 1, kMaxSize);
  mla.qk_nope_head_dim = r.get_int("qk_nope_head_dim", 1, kMaxHeads);
  mla.qk_rope_head_dim = r.get_int("qk_rope_head_dim", 1, kMaxHeads);
  mla.v_head_dim = r.get_int("v_head_dim", 1, kMaxHeads);
  r.finish();
}

void read_moe(ObjectReader& parent, ModelSpec& m) {
  const Json* raw = parent.opt_raw("moe");
  if (!raw) return;
  ObjectReader r(*raw, parent.origin(), parent.pointer("moe"));
  m.num_experts = r.get_int("num_experts", 1, kMaxExperts);
  m.top_k = r.get_int("top_k", 1, kMaxExperts);
  if (m.top_k > m.num_experts) {
    r.fail("top_k", "top_k = " + std::to_string(m.top_k) +
                        " exceeds num_experts = " + std::to_string(m.num_experts));
  }
  m.expert_ffn_hidden = r.get_int("expert_ffn_hidden", 1, kMaxSize);
  m.shared_expert_ffn_hidden = r.opt_int("shared_expert_ffn_hidden", 0, kMaxSize).value_or(0);
  const std::optional<int> first_dense = r.opt_int("first_dense_layers", 0, m.num_layers);
  const Json* freq = r.opt_raw("layer_freq");
  if (freq && freq->is_array()) {
    if (first_dense) {
      r.fail("first_dense_layers",
             "give either first_dense_layers (with an integer layer_freq) or an explicit "
             "layer_freq list, not both");
    }
    const std::string ptr = r.pointer("layer_freq");
    if (freq->size() != static_cast<std::size_t>(m.num_layers)) {
      r.fail("layer_freq", "list has " + std::to_string(freq->size()) +
                               " entries, expected one 0/1 per layer (num_layers = " +
                               std::to_string(m.num_layers) + ")");
    }
    m.moe_layers.clear();
    for (std::size_t i = 0; i < freq->size(); ++i) {
      m.moe_layers.push_back(static_cast<std::uint8_t>(
          checked_int((*freq)[i], 0, 1, where_of(r.origin(), ptr + "/" + std::to_string(i)))));
    }
  } else {
    int every = 1;
    if (freq) {
      if (!freq->is_number() || freq->is_boolean()) {
        r.fail("layer_freq",
               "must be an integer N (every N-th layer is MoE) or a list of 0/1 "
               "per layer, got " +
                   describe(*freq));
      }
      every = static_cast<int>(
          checked_int(*freq, 1, m.num_layers, where_of(r.origin(), r.pointer("layer_freq"))));
    }
    const int k = first_dense.value_or(0);
    m.moe_layers = moe_map(m.num_layers, k, every);
  }
  if (m.num_moe_layers() == 0) {
    throw InputError(
        where_of(r.origin(), parent.pointer("moe")),
        "no layer is a MoE layer (first_dense_layers = " + std::to_string(first_dense.value_or(0)) +
            ", num_layers = " + std::to_string(m.num_layers) + "); omit \"moe\" for a dense model");
  }
  r.finish();
}

void read_training(ObjectReader& parent, const ModelSpec& m, TrainingSpec& t) {
  if (m.max_positions > 0) t.seq_len = std::min(kDefaultSeqLen, m.max_positions);
  const Json* raw = parent.opt_raw("training");
  if (!raw) return;
  ObjectReader r(*raw, parent.origin(), parent.pointer("training"));
  if (auto v = r.opt_int("seq_len", 1, kMaxSeqLen)) {
    t.seq_len = *v;
    if (m.max_positions > 0 && t.seq_len > m.max_positions) {
      r.fail("seq_len",
             "seq_len = " + std::to_string(t.seq_len) +
                 " exceeds the model's max_positions = " + std::to_string(m.max_positions));
    }
  }
  t.global_batch = r.opt_int("global_batch", 1, kMaxBatch).value_or(t.global_batch);
  t.micro_batch = r.opt_int("micro_batch", 1, kMaxBatch).value_or(t.micro_batch);
  if (t.global_batch % t.micro_batch != 0) {
    r.fail(r.has("global_batch") ? "global_batch" : "micro_batch",
           "global_batch = " + std::to_string(t.global_batch) +
               " is not a multiple of micro_batch = " + std::to_string(t.micro_batch));
  }
  if (auto s = r.opt_string("precision")) {
    t.precision = parse_precision(*s, where_of(r.origin(), r.pointer("precision")));
  }
  if (auto s = r.opt_string("fp8_recipe")) {
    t.fp8_recipe = parse_fp8_recipe(*s, where_of(r.origin(), r.pointer("fp8_recipe")));
  }
  t.distributed_optimizer = r.opt_bool("distributed_optimizer").value_or(t.distributed_optimizer);
  t.grad_reduce_in_bf16 = r.opt_bool("grad_reduce_in_bf16").value_or(t.grad_reduce_in_bf16);
  t.optimizer_offload_fraction =
      r.opt_number("optimizer_offload_fraction", 0.0, 1.0).value_or(t.optimizer_offload_fraction);
  if (auto s = r.opt_string("fsdp")) {
    t.fsdp = parse_fsdp(*s, where_of(r.origin(), r.pointer("fsdp")));
  }
  t.activation_offload_layers =
      r.opt_int("activation_offload_layers", 0, 100000).value_or(t.activation_offload_layers);
  if (auto s = r.opt_string("dispatcher")) {
    t.dispatcher = parse_dispatcher(*s, where_of(r.origin(), r.pointer("dispatcher")));
  }
  t.imbalance = r.opt_number("imbalance", kMinImbalance, kMaxImbalance).value_or(t.imbalance);
  t.gamma = r.opt_number("gamma", 0.0, 1.0).value_or(t.gamma);
  if (r.has("overlap")) {
    ObjectReader o(r.get_raw("overlap"), r.origin(), r.pointer("overlap"));
    t.overlap.grad_reduce = o.opt_bool("grad_reduce").value_or(false);
    t.overlap.param_gather = o.opt_bool("param_gather").value_or(false);
    t.overlap.tp_comm = o.opt_bool("tp_comm").value_or(false);
    t.overlap.moe_ep_comm = o.opt_bool("moe_ep_comm").value_or(false);
    t.overlap.delay_wgrad = o.opt_bool("delay_wgrad").value_or(false);
    o.finish();
  }
  r.finish();
}

Workload parse_hapmoe_json(const Json& root, const std::string& origin) {
  ObjectReader r(root, origin, "");
  Workload w;
  ModelSpec& m = w.model;
  m.name = r.opt_string("name").value_or(origin);
  if (auto e = check_name_text("name", m.name); !e.empty()) {
    throw InputError(where_of(origin, r.pointer("name")), e);
  }
  m.num_layers = r.get_int("num_layers", 1, kMaxLayers);
  m.hidden = r.get_int("hidden", 1, kMaxSize);
  m.num_heads = r.get_int("num_heads", 1, kMaxHeads);
  m.num_kv_heads = r.opt_int("num_kv_heads", 1, kMaxHeads).value_or(m.num_heads);
  if (m.num_kv_heads > m.num_heads || m.num_heads % m.num_kv_heads != 0) {
    r.fail("num_kv_heads", "num_kv_heads = " + std::to_string(m.num_kv_heads) +
                               " must divide num_heads = " + std::to_string(m.num_heads));
  }
  if (auto d = r.opt_int("head_dim", 1, kMaxSize)) {
    m.head_dim = *d;
  } else {
    if (m.hidden % m.num_heads != 0) {
      r.fail("hidden", "hidden = " + std::to_string(m.hidden) +
                           " is not divisible by num_heads = " + std::to_string(m.num_heads) +
                           " and head_dim is absent (give head_dim)");
    }
    m.head_dim = m.hidden / m.num_heads;
  }
  const std::optional<int> ffn = r.opt_int("ffn_hidden", 1, kMaxSize);
  m.ffn_hidden = ffn.value_or(0);
  if (auto s = r.opt_choice("mlp", {"swiglu", "gelu"})) {
    m.mlp = *s == "gelu" ? MlpKind::kGelu : MlpKind::kSwiGlu;
  }
  if (auto s = r.opt_choice("positions", {"rotary", "learned"})) {
    m.positions = *s == "learned" ? PositionKind::kLearned : PositionKind::kRotary;
  }
  if (auto v = r.opt_int("max_positions", 1, kMaxPositions)) {
    m.max_positions = *v;
  } else if (m.positions == PositionKind::kLearned) {
    r.fail("max_positions", "required field is missing (learned positions need a table size)");
  }
  m.vocab = r.get_int("vocab", 1, kMaxSize);
  m.vocab_divisible_by = r.opt_int("vocab_divisible_by", 1, 1000000).value_or(m.vocab_divisible_by);
  m.tied_embeddings = r.opt_bool("tied_embeddings").value_or(false);
  read_attention_variants(r, m);
  m.mtp_layers = r.opt_int("mtp_layers", 0, 1000).value_or(0);
  read_mla(r, m.mla);
  read_moe(r, m);
  const bool any_dense = !m.is_moe() || m.num_moe_layers() < static_cast<int>(m.moe_layers.size());
  if (any_dense && !ffn) {
    r.fail("ffn_hidden", "required field is missing (the model has dense layers)");
  }
  read_training(r, m, w.training);
  r.finish();

  static const std::map<std::string, std::string> kPointers = {
      {"num_layers", "/num_layers"},
      {"hidden", "/hidden"},
      {"num_heads", "/num_heads"},
      {"num_kv_heads", "/num_kv_heads"},
      {"head_dim", "/head_dim"},
      {"vocab", "/vocab"},
      {"ffn_hidden", "/ffn_hidden"},
      {"max_positions", "/max_positions"},
      {"q_lora_rank", "/mla/q_lora_rank"},
      {"multi-latent", "/mla"},
      {"top_k", "/moe/top_k"},
      {"expert_ffn_hidden", "/moe/expert_ffn_hidden"},
      {"shared_expert_ffn_hidden", "/moe/shared_expert_ffn_hidden"},
      {"seq_len", "/training/seq_len"},
      {"global_batch", "/training/global_batch"},
      {"micro_batch", "/training/micro_batch"},
      {"imbalance", "/training/imbalance"},
      {"gamma", "/training/gamma"},
      {"overlap.param_gather", "/training/overlap/param_gather"},
      {"overlap.delay_wgrad", "/training/overlap/delay_wgrad"}};
  validate_workload(w, origin, kPointers);
  return w;
}

}  // namespace

// ---------------------------------------------------------------------------
// Public functions

std::span<const ModelPreset> model_presets() {
  static const std::vector<ModelPreset> kPresets = build_presets();
  return kPresets;
}

const ModelPreset* find_model_preset(const std::string& name) {
  const std::string key = to_lower(name);
  for (const ModelPreset& p : model_presets()) {
    if (p.name == key) return &p;
  }
  return nullptr;
}

Workload load_workload(const std::string& spec, std::vector<std::string>* notes) {
  if (const ModelPreset* p = find_model_preset(spec)) return p->workload;
  std::error_code ec;
  const bool exists = std::filesystem::exists(spec, ec);
  const std::string lower = to_lower(spec);
  const bool looks_like_path =
      spec.find('/') != std::string::npos ||
      (lower.size() >= 5 && lower.compare(lower.size() - 5, 5, ".json") == 0);
  if (!exists && !looks_like_path) {
    throw InputError("--model", "\"" + escape_control_characters(spec) +
                                    "\" is neither a known model preset (" + preset_names() +
                                    ") nor a file");
  }
  const std::string text = read_regular_file(spec);
  return parse_workload_json(text, spec, notes);
}

Workload parse_workload_json(const std::string& text, const std::string& origin,
                             std::vector<std::string>* notes) {
  const Json root = parse_json(text, origin);
  if (!root.is_object()) {
    throw InputError(origin, "a model file must be a JSON object, got " + describe(root));
  }
  // Notes are collected here and handed over only with a workload.
  std::vector<std::string> found;
  auto hf = [&] {
    Workload w = parse_hf_config(root, origin, found);
    if (notes) notes->insert(notes->end(), found.begin(), found.end());
    return w;
  };
  if (root.contains("num_hidden_layers") || root.contains("model_type")) return hf();
  if (root.contains("num_layers")) return parse_hapmoe_json(root, origin);
  if (root.contains("architectures") || root.contains("text_config")) return hf();
  throw InputError(origin,
                   "not a recognised model file: expected a Hugging Face config.json (with "
                   "\"model_type\" or \"num_hidden_layers\") or a hapmoe model JSON (with "
                   "\"num_layers\", see docs/models.md)");
}

void apply_overrides(const TrainingOverrides& o, Workload& workload) {
  Workload w = workload;
  TrainingSpec& t = w.training;
  auto check_int = [](std::optional<int> v, std::int64_t lo, std::int64_t hi, const char* option) {
    if (v && (*v < lo || *v > hi)) {
      throw InputError(option, "value " + std::to_string(*v) + " is out of range (expected [" +
                                   std::to_string(lo) + ", " + std::to_string(hi) + "])");
    }
  };
  check_int(o.seq_len, 1, kMaxSeqLen, "--seq-len");
  check_int(o.global_batch, 1, kMaxBatch, "--global-batch");
  check_int(o.micro_batch, 1, kMaxBatch, "--micro-batch");
  if (o.seq_len) t.seq_len = *o.seq_len;
  if (o.global_batch) t.global_batch = *o.global_batch;
  if (o.micro_batch) t.micro_batch = *o.micro_batch;
  if (o.precision) t.precision = *o.precision;
  if (o.fp8_recipe) {
    if (t.precision != Precision::kFp8) {
      throw InputError("--fp8-recipe", std::string("an FP8 recipe with precision ") +
                                           to_string(t.precision) +
                                           " does nothing; add --precision fp8");
    }
    t.fp8_recipe = *o.fp8_recipe;
  }
  if (o.dispatcher) t.dispatcher = *o.dispatcher;
  if (o.imbalance) t.imbalance = *o.imbalance;
  if (o.gamma) t.gamma = *o.gamma;
  if (o.no_distributed_optimizer) t.distributed_optimizer = false;
  if (o.grad_reduce_in_bf16) t.grad_reduce_in_bf16 = true;
  if (o.optimizer_offload_fraction) t.optimizer_offload_fraction = *o.optimizer_offload_fraction;
  if (o.fsdp) t.fsdp = *o.fsdp;
  if (o.activation_offload_layers) t.activation_offload_layers = *o.activation_offload_layers;
  t.overlap.grad_reduce = t.overlap.grad_reduce || o.overlap.grad_reduce;
  t.overlap.param_gather = t.overlap.param_gather || o.overlap.param_gather;
  t.overlap.tp_comm = t.overlap.tp_comm || o.overlap.tp_comm;
  t.overlap.moe_ep_comm = t.overlap.moe_ep_comm || o.overlap.moe_ep_comm;
  t.overlap.delay_wgrad = t.overlap.delay_wgrad || o.overlap.delay_wgrad;

  const std::string e = validate(t, w.model);
  if (!e.empty()) {
    const std::string field = e.substr(0, e.find(' '));
    std::string option = "--model";
    if (field == "seq_len" && o.seq_len) {
      option = "--seq-len";
    } else if (field == "global_batch" || field == "micro_batch") {
      // "global_batch = B is not a multiple of micro_batch = b": blame the
      // value the user changed.
      if (field == "micro_batch" && o.micro_batch) {
        option = "--micro-batch";
      } else if (o.global_batch) {
        option = "--global-batch";
      } else if (o.micro_batch) {
        option = "--micro-batch";
      }
    } else if (field == "imbalance" && o.imbalance) {
      option = "--imbalance";
    } else if (field == "gamma" && o.gamma) {
      option = "--gamma";
    } else if (field == "overlap.param_gather" && o.overlap.param_gather) {
      option = "--overlap-param-gather";
    } else if (field == "overlap.delay_wgrad" && o.overlap.delay_wgrad) {
      option = "--delay-wgrad-compute";
    } else if (field == "optimizer_offload_fraction" && o.optimizer_offload_fraction) {
      option = "--optimizer-offload-fraction";
    } else if (field == "fsdp" && o.fsdp) {
      option = "--fsdp";
    }
    throw InputError(option, e);
  }
  workload = std::move(w);
}

Precision parse_precision(const std::string& text, const std::string& where) {
  const std::string s = to_lower(text);
  if (s == "bf16") return Precision::kBf16;
  if (s == "fp16") return Precision::kFp16;
  if (s == "fp8") return Precision::kFp8;
  throw InputError(where, "unknown precision \"" + text + "\" (allowed: bf16, fp16, fp8)");
}

Fp8Recipe parse_fp8_recipe(const std::string& text, const std::string& where) {
  const std::string s = to_lower(text);
  if (s == "delayed") return Fp8Recipe::kDelayed;
  if (s == "tensorwise") return Fp8Recipe::kTensorwise;
  if (s == "blockwise") return Fp8Recipe::kBlockwise;
  if (s == "mxfp8") return Fp8Recipe::kMxfp8;
  throw InputError(where, "unknown FP8 recipe \"" + text +
                              "\" (allowed: delayed, tensorwise, blockwise, mxfp8)");
}

Fsdp parse_fsdp(const std::string& text, const std::string& where) {
  const std::string s = to_lower(text);
  if (s == "off") return Fsdp::kOff;
  if (s == "optim_grads" || s == "zero2") return Fsdp::kOptimGrads;
  if (s == "optim_grads_params" || s == "zero3") return Fsdp::kOptimGradsParams;
  throw InputError(where, "unknown data-parallel sharding \"" + text +
                              "\" (allowed: off, optim_grads (zero2), optim_grads_params (zero3); "
                              "Megatron-FSDP's no_shard and optim are distributed_optimizer "
                              "false and true)");
}

Dispatcher parse_dispatcher(const std::string& text, const std::string& where) {
  const std::string s = to_lower(text);
  if (s == "alltoall" || s == "all-to-all") return Dispatcher::kAllToAll;
  if (s == "allgather" || s == "all-gather") return Dispatcher::kAllGather;
  if (s == "auto") return Dispatcher::kAuto;
  if (s == "flex" || s == "deepep") return Dispatcher::kFlex;
  throw InputError(where, "unknown dispatcher \"" + text +
                              "\" (allowed: alltoall, all-to-all, allgather, all-gather, flex, "
                              "deepep, auto)");
}

std::string workload_to_json(const Workload& workload) {
  using OrderedJson = nlohmann::ordered_json;
  const ModelSpec& m = workload.model;
  const TrainingSpec& t = workload.training;
  OrderedJson j;
  j["name"] = m.name;
  j["num_layers"] = m.num_layers;
  j["hidden"] = m.hidden;
  j["num_heads"] = m.num_heads;
  j["num_kv_heads"] = m.num_kv_heads;
  j["head_dim"] = m.head_dim;
  if (m.ffn_hidden > 0) j["ffn_hidden"] = m.ffn_hidden;
  j["mlp"] = to_string(m.mlp);
  j["positions"] = m.positions == PositionKind::kLearned ? "learned" : "rotary";
  if (m.max_positions > 0) j["max_positions"] = m.max_positions;
  j["vocab"] = m.vocab;
  if (m.vocab_divisible_by != ModelSpec{}.vocab_divisible_by) {
    j["vocab_divisible_by"] = m.vocab_divisible_by;
  }
  j["tied_embeddings"] = m.tied_embeddings;
  if (m.mtp_layers > 0) j["mtp_layers"] = m.mtp_layers;
  if (m.qkv_bias) j["qkv_bias"] = true;
  if (m.attention_sinks) j["attention_sinks"] = true;
  if (m.sliding_window > 0) {
    j["sliding_window"] = m.sliding_window;
    j["window_layers"] = m.window_layers;
  }
  if (m.mla.enabled()) {
    OrderedJson mla;
    mla["q_lora_rank"] = m.mla.q_lora_rank;
    mla["kv_lora_rank"] = m.mla.kv_lora_rank;
    mla["qk_nope_head_dim"] = m.mla.qk_nope_head_dim;
    mla["qk_rope_head_dim"] = m.mla.qk_rope_head_dim;
    mla["v_head_dim"] = m.mla.v_head_dim;
    j["mla"] = std::move(mla);
  }
  if (m.is_moe()) {
    OrderedJson moe;
    moe["num_experts"] = m.num_experts;
    moe["top_k"] = m.top_k;
    moe["expert_ffn_hidden"] = m.expert_ffn_hidden;
    moe["shared_expert_ffn_hidden"] = m.shared_expert_ffn_hidden;
    // Compact form when the map is "k dense layers, then every N-th".
    const auto first = std::find(m.moe_layers.begin(), m.moe_layers.end(), 1);
    bool compact = false;
    if (first != m.moe_layers.end()) {
      const int k = static_cast<int>(first - m.moe_layers.begin());
      const auto next = std::find(first + 1, m.moe_layers.end(), 1);
      const int every = next == m.moe_layers.end() ? std::max(1, m.num_layers - k)
                                                   : static_cast<int>(next - first);
      if (moe_map(m.num_layers, k, every) == m.moe_layers) {
        compact = true;
        moe["first_dense_layers"] = k;
        if (every != 1) moe["layer_freq"] = every;
      }
    }
    if (!compact) {
      OrderedJson list = OrderedJson::array();
      for (std::uint8_t v : m.moe_layers) list.push_back(static_cast<int>(v));
      moe["layer_freq"] = std::move(list);
    }
    j["moe"] = std::move(moe);
  }
  OrderedJson tr;
  tr["seq_len"] = t.seq_len;
  tr["global_batch"] = t.global_batch;
  tr["micro_batch"] = t.micro_batch;
  tr["precision"] = to_string(t.precision);
  if (t.precision == Precision::kFp8 || t.fp8_recipe != Fp8Recipe::kDelayed) {
    tr["fp8_recipe"] = to_string(t.fp8_recipe);
  }
  tr["distributed_optimizer"] = t.distributed_optimizer;
  if (t.grad_reduce_in_bf16) tr["grad_reduce_in_bf16"] = true;
  if (t.optimizer_offload_fraction > 0) {
    tr["optimizer_offload_fraction"] = t.optimizer_offload_fraction;
  }
  if (t.fsdp != Fsdp::kOff) tr["fsdp"] = to_string(t.fsdp);
  if (t.activation_offload_layers > 0)
    tr["activation_offload_layers"] = t.activation_offload_layers;
  tr["dispatcher"] = to_string(t.dispatcher);
  tr["imbalance"] = t.imbalance;
  tr["gamma"] = t.gamma;
  tr["overlap"] = overlap_json(t.overlap);
  j["training"] = std::move(tr);
  return j.dump(2) + "\n";
}

}  // namespace hapmoe
