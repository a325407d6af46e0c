// Tests of the model readers (io/inputs/model_io.h): presets, Hugging Face
// config.json files, the hapmoe model JSON, overrides and the writer.
#include "io/inputs/model_io.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "costmodel/errors.h"
#include "io/inputs/files.h"
#include "io/inputs/json_strict.h"
#include "tests/io/inputs/input_error.h"

namespace hapmoe {
namespace {

const std::string kModels = std::string(HAPMOE_TEST_DATA) + "/models";

using test::catch_input_error;
using test::Caught;

// Expects an InputError whose message contains every one of `parts`.
void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  const Caught e = catch_input_error(f);
  for (const auto& p : parts) {
    EXPECT_NE(e.what.find(p), std::string::npos) << "missing \"" << p << "\" in: " << e.what;
  }
}

const Workload& preset(const std::string& name) {
  const ModelPreset* p = find_model_preset(name);
  if (p == nullptr) throw std::runtime_error("no preset " + name);
  return p->workload;
}

Workload load_fixture(const std::string& relative) {
  return load_workload(kModels + "/" + relative);
}

// A Hugging Face file must describe the same model as the preset (the name
// is the file path).
void expect_same_model(Workload parsed, const std::string& preset_name) {
  parsed.model.name = preset_name;
  EXPECT_EQ(parsed.model, preset(preset_name).model) << preset_name;
  EXPECT_EQ(parsed.training, preset(preset_name).training) << preset_name;
}

// A small valid hapmoe model, modified by the tests below.
Json base_model() {
  return Json::parse(R"({
    "name": "t", "num_layers": 4, "hidden": 256, "num_heads": 4, "ffn_hidden": 1024,
    "max_positions": 2048, "vocab": 1000,
    "moe": {"num_experts": 8, "top_k": 2, "expert_ffn_hidden": 512},
    "training": {"seq_len": 1024, "global_batch": 16, "micro_batch": 2}
  })");
}

Workload parse(const Json& j) { return parse_workload_json(j.dump(), "t.json"); }

// ---------------------------------------------------------------------------
// Presets

TEST(ModelIoPresets, AllValidateAndAreWellFormed) {
  const auto presets = model_presets();
  ASSERT_EQ(presets.size(), 10u);
  std::set<std::string> names;
  for (const ModelPreset& p : presets) {
    SCOPED_TRACE(p.name);
    EXPECT_TRUE(names.insert(p.name).second) << "duplicate preset";
    EXPECT_EQ(p.name, to_lower(p.name));
    EXPECT_EQ(p.workload.model.name, p.name);
    EXPECT_FALSE(p.description.empty());
    EXPECT_FALSE(p.source.empty());
    EXPECT_EQ(validate(p.workload.model), "");
    EXPECT_EQ(validate(p.workload.training, p.workload.model), "");
    EXPECT_EQ(find_model_preset(p.name), &p);
  }
  for (const char* n :
       {"mixtral-s", "mixtral-l", "llama2-7b", "llama2-13b", "llama3-70b", "mixtral-8x7b",
        "mixtral-8x22b", "qwen3-30b-a3b", "qwen3-235b-a22b", "deepseek-v3"}) {
    EXPECT_EQ(names.count(n), 1u) << n;
  }
}

TEST(ModelIoPresets, FindIsCaseInsensitive) {
  ASSERT_NE(find_model_preset("Mixtral-S"), nullptr);
  EXPECT_EQ(find_model_preset("Mixtral-S")->name, "mixtral-s");
  EXPECT_EQ(find_model_preset("DEEPSEEK-V3")->name, "deepseek-v3");
  EXPECT_EQ(find_model_preset("mixtral"), nullptr);
  EXPECT_EQ(find_model_preset(""), nullptr);
}

TEST(ModelIoPresets, MixtralS) {
  const Workload& w = preset("mixtral-s");
  const ModelSpec& m = w.model;
  EXPECT_EQ(m.num_layers, 24);
  EXPECT_EQ(m.hidden, 4096);
  EXPECT_EQ(m.num_heads, 32);
  EXPECT_EQ(m.num_kv_heads, 8);
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_EQ(m.ffn_hidden, 14336);
  EXPECT_EQ(m.expert_ffn_hidden, 14336);
  EXPECT_EQ(m.num_experts, 8);
  EXPECT_EQ(m.top_k, 2);
  EXPECT_EQ(m.num_moe_layers(), 24);
  EXPECT_EQ(m.shared_expert_ffn_hidden, 0);
  EXPECT_EQ(m.vocab, 32000);
  EXPECT_EQ(m.max_positions, 32768);
  EXPECT_EQ(m.mlp, MlpKind::kSwiGlu);
  EXPECT_EQ(m.positions, PositionKind::kRotary);
  EXPECT_FALSE(m.tied_embeddings);
  EXPECT_FALSE(m.mla.enabled());
  EXPECT_EQ(w.training.seq_len, 4096);
  EXPECT_EQ(w.training.global_batch, 256);
  EXPECT_EQ(w.training.micro_batch, 1);
  EXPECT_EQ(w.training.precision, Precision::kBf16);
  EXPECT_TRUE(w.training.distributed_optimizer);
  EXPECT_EQ(w.training.dispatcher, Dispatcher::kAllGather);
}

TEST(ModelIoPresets, MixtralL) {
  const Workload& w = preset("mixtral-l");
  const ModelSpec& m = w.model;
  EXPECT_EQ(m.num_layers, 48);
  EXPECT_EQ(m.hidden, 6144);
  EXPECT_EQ(m.num_heads, 48);
  EXPECT_EQ(m.num_kv_heads, 8);
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_EQ(m.expert_ffn_hidden, 16384);
  EXPECT_EQ(m.num_experts, 8);
  EXPECT_EQ(m.top_k, 2);
  EXPECT_EQ(m.num_moe_layers(), 48);
  EXPECT_EQ(m.max_positions, 65536);
  EXPECT_EQ(w.training.global_batch, 512);
  EXPECT_EQ(w.training.dispatcher, Dispatcher::kAllToAll);
  // The paper calls it ~122B parameters.
  EXPECT_NEAR(total_params(m) / 1e9, 122.0, 3.0);
}

TEST(ModelIoPresets, DenseLlamas) {
  const ModelSpec& l7 = preset("llama2-7b").model;
  EXPECT_EQ(l7.num_layers, 32);
  EXPECT_EQ(l7.hidden, 4096);
  EXPECT_EQ(l7.num_kv_heads, 32);  // MHA
  EXPECT_EQ(l7.ffn_hidden, 11008);
  EXPECT_EQ(l7.max_positions, 4096);
  EXPECT_FALSE(l7.is_moe());
  EXPECT_TRUE(l7.moe_layers.empty());
  EXPECT_EQ(l7.num_experts, 0);
  EXPECT_NEAR(total_params(l7) / 1e9, 6.74, 0.05);

  const ModelSpec& l13 = preset("llama2-13b").model;
  EXPECT_EQ(l13.num_layers, 40);
  EXPECT_EQ(l13.hidden, 5120);
  EXPECT_EQ(l13.num_heads, 40);
  EXPECT_EQ(l13.num_kv_heads, 40);
  EXPECT_EQ(l13.head_dim, 128);
  EXPECT_EQ(l13.ffn_hidden, 13824);
  EXPECT_NEAR(total_params(l13) / 1e9, 13.0, 0.1);

  const ModelSpec& l70 = preset("llama3-70b").model;
  EXPECT_EQ(l70.num_layers, 80);
  EXPECT_EQ(l70.hidden, 8192);
  EXPECT_EQ(l70.num_heads, 64);
  EXPECT_EQ(l70.num_kv_heads, 8);  // GQA
  EXPECT_EQ(l70.head_dim, 128);
  EXPECT_EQ(l70.ffn_hidden, 28672);
  EXPECT_EQ(l70.vocab, 128256);
  EXPECT_EQ(l70.max_positions, 8192);
  EXPECT_NEAR(total_params(l70) / 1e9, 70.6, 0.5);
  EXPECT_EQ(preset("llama3-70b").training.dispatcher, Dispatcher::kAllToAll);
}

TEST(ModelIoPresets, Mixtrals) {
  const ModelSpec& a = preset("mixtral-8x7b").model;
  EXPECT_EQ(a.num_layers, 32);
  EXPECT_EQ(a.expert_ffn_hidden, 14336);
  EXPECT_EQ(a.num_moe_layers(), 32);
  EXPECT_EQ(a.vocab, 32000);
  EXPECT_NEAR(total_params(a) / 1e9, 46.7, 0.3);
  EXPECT_NEAR(active_params(a) / 1e9, 12.9, 0.2);

  const ModelSpec& b = preset("mixtral-8x22b").model;
  EXPECT_EQ(b.num_layers, 56);
  EXPECT_EQ(b.hidden, 6144);
  EXPECT_EQ(b.num_heads, 48);
  EXPECT_EQ(b.num_kv_heads, 8);
  EXPECT_EQ(b.expert_ffn_hidden, 16384);
  EXPECT_EQ(b.vocab, 32000);
  EXPECT_EQ(b.max_positions, 65536);
  EXPECT_NEAR(total_params(b) / 1e9, 140.6, 1.0);
  const TrainingSpec& t = preset("mixtral-8x22b").training;
  EXPECT_EQ(t, TrainingSpec{});  // the TrainingSpec defaults
}

TEST(ModelIoPresets, Qwen3) {
  const ModelSpec& s = preset("qwen3-30b-a3b").model;
  EXPECT_EQ(s.num_layers, 48);
  EXPECT_EQ(s.hidden, 2048);
  EXPECT_EQ(s.num_heads, 32);
  EXPECT_EQ(s.num_kv_heads, 4);
  EXPECT_EQ(s.head_dim, 128);  // != hidden / heads
  EXPECT_EQ(s.num_experts, 128);
  EXPECT_EQ(s.top_k, 8);
  EXPECT_EQ(s.expert_ffn_hidden, 768);
  EXPECT_EQ(s.vocab, 151936);
  EXPECT_EQ(s.max_positions, 40960);
  EXPECT_NEAR(total_params(s) / 1e9, 30.5, 0.5);

  const ModelSpec& l = preset("qwen3-235b-a22b").model;
  EXPECT_EQ(l.num_layers, 94);
  EXPECT_EQ(l.hidden, 4096);
  EXPECT_EQ(l.num_heads, 64);
  EXPECT_EQ(l.num_kv_heads, 4);
  EXPECT_EQ(l.head_dim, 128);
  EXPECT_EQ(l.expert_ffn_hidden, 1536);
  EXPECT_EQ(l.ffn_hidden, 12288);
  EXPECT_EQ(l.num_moe_layers(), 94);
  EXPECT_NEAR(total_params(l) / 1e9, 235.0, 3.0);
  EXPECT_NEAR(active_params(l) / 1e9, 22.0, 1.0);
}

TEST(ModelIoPresets, DeepSeekV3) {
  const Workload& w = preset("deepseek-v3");
  const ModelSpec& m = w.model;
  EXPECT_EQ(m.num_layers, 61);
  EXPECT_EQ(m.hidden, 7168);
  EXPECT_EQ(m.num_heads, 128);
  EXPECT_EQ(m.num_kv_heads, 128);
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_EQ(m.ffn_hidden, 18432);
  EXPECT_TRUE(m.mla.enabled());
  EXPECT_EQ(m.mla.q_lora_rank, 1536);
  EXPECT_EQ(m.mla.kv_lora_rank, 512);
  EXPECT_EQ(m.mla.qk_nope_head_dim, 128);
  EXPECT_EQ(m.mla.qk_rope_head_dim, 64);
  EXPECT_EQ(m.mla.v_head_dim, 128);
  EXPECT_EQ(m.num_experts, 256);
  EXPECT_EQ(m.top_k, 8);
  EXPECT_EQ(m.expert_ffn_hidden, 2048);
  EXPECT_EQ(m.shared_expert_ffn_hidden, 2048);
  EXPECT_EQ(m.num_moe_layers(), 58);
  EXPECT_FALSE(m.is_moe_layer(0));
  EXPECT_FALSE(m.is_moe_layer(2));
  EXPECT_TRUE(m.is_moe_layer(3));
  EXPECT_TRUE(m.is_moe_layer(60));
  EXPECT_EQ(m.vocab, 129280);
  EXPECT_EQ(m.max_positions, 163840);
  EXPECT_NE(find_model_preset("deepseek-v3")->description.find("MTP"), std::string::npos);
  // 671B main model and the MTP module, 685B in the hub files (one more
  // MoE layer and its projection: 682.6B counted here, without the hub's
  // second copies of the shared embedding and output head).
  EXPECT_EQ(m.mtp_layers, 1);
  EXPECT_NEAR(total_params(m) / 1e9, 682.6, 0.5);
  EXPECT_NEAR(active_params(m) / 1e9, 37.0, 2.0);
}

// ---------------------------------------------------------------------------
// load_workload

TEST(ModelIoLoad, PresetByNameAnyCase) {
  EXPECT_EQ(load_workload("deepseek-v3"), preset("deepseek-v3"));
  EXPECT_EQ(load_workload("Qwen3-30B-A3B"), preset("qwen3-30b-a3b"));
}

TEST(ModelIoLoad, UnknownPresetListsPresets) {
  const Caught e = catch_input_error([] { load_workload("mixtral-xl"); });
  EXPECT_EQ(e.where, "--model");
  for (const char* part : {"\"mixtral-xl\"", "neither a known model preset", "nor a file",
                           "mixtral-s", "llama3-70b", "deepseek-v3"}) {
    EXPECT_NE(e.what.find(part), std::string::npos) << part << " in: " << e.what;
  }
}

TEST(ModelIoLoad, MissingFile) {
  Caught e = catch_input_error([] { load_workload("/nonexistent/model.json"); });
  EXPECT_EQ(e.where, "/nonexistent/model.json");
  EXPECT_NE(e.what.find("no such file"), std::string::npos) << e.what;
  e = catch_input_error([] { load_workload("missing-model.json"); });
  EXPECT_EQ(e.where, "missing-model.json");
  EXPECT_NE(e.what.find("no such file"), std::string::npos) << e.what;
}

TEST(ModelIoLoad, FileErrorsNameThePath) {
  const std::string path = kModels + "/hf/llama-2-7b-hf.json";
  const Workload w = load_workload(path);
  EXPECT_EQ(w.model.name, path);
}

// ---------------------------------------------------------------------------
// Hugging Face config.json

TEST(ModelIoHf, Mixtral8x7B) {
  const Workload w = load_fixture("hf/mixtral-8x7b-v0.1.json");
  EXPECT_EQ(w.model.expert_ffn_hidden, 14336);  // intermediate_size is the expert width
  EXPECT_EQ(w.model.num_experts, 8);            // from num_local_experts
  expect_same_model(w, "mixtral-8x7b");
}

TEST(ModelIoHf, Qwen15MoeSharedExpertIsATotalWidth) {
  const Workload w = load_fixture("hf/qwen1.5-moe-a2.7b.json");
  const ModelSpec& m = w.model;
  EXPECT_EQ(m.num_layers, 24);
  EXPECT_EQ(m.hidden, 2048);
  EXPECT_EQ(m.num_heads, 16);
  EXPECT_EQ(m.num_kv_heads, 16);
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_EQ(m.ffn_hidden, 5632);
  EXPECT_EQ(m.num_experts, 60);
  EXPECT_EQ(m.top_k, 4);
  EXPECT_EQ(m.expert_ffn_hidden, 1408);
  EXPECT_EQ(m.shared_expert_ffn_hidden, 5632);
  EXPECT_EQ(m.num_moe_layers(), 24);
  EXPECT_EQ(m.vocab, 151936);
  EXPECT_EQ(m.max_positions, 8192);
  EXPECT_EQ(m.mlp, MlpKind::kSwiGlu);
  EXPECT_FALSE(m.tied_embeddings);
  EXPECT_EQ(w.training.seq_len, 4096);
  EXPECT_NEAR(total_params(m) / 1e9, 14.3, 0.3);
}

TEST(ModelIoHf, Qwen3WrittenByTransformers5) {
  const Workload w = load_fixture("hf/qwen3-30b-a3b-transformers5.json");
  EXPECT_EQ(w.model.num_experts, 128);  // num_local_experts
  EXPECT_EQ(w.model.head_dim, 128);
  expect_same_model(w, "qwen3-30b-a3b");
}

TEST(ModelIoHf, DeepSeekV3) {
  const Workload w = load_fixture("hf/deepseek-v3.json");
  EXPECT_EQ(w.model.num_moe_layers(), 58);
  EXPECT_EQ(w.model.mla.q_lora_rank, 1536);
  EXPECT_EQ(w.model.shared_expert_ffn_hidden, 2048);
  expect_same_model(w, "deepseek-v3");
}

TEST(ModelIoHf, Llama2WithoutKvHeads) {
  const Workload w = load_fixture("hf/llama-2-7b-hf.json");
  EXPECT_EQ(w.model.num_kv_heads, 32);
  EXPECT_EQ(w.model.head_dim, 128);
  EXPECT_FALSE(w.model.is_moe());
  expect_same_model(w, "llama2-7b");
}

Json llama_text() {
  return Json::parse(R"({"model_type": "llama", "hidden_size": 1024, "intermediate_size": 2816,
    "num_hidden_layers": 8, "num_attention_heads": 16, "vocab_size": 32000,
    "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "rope_theta": 10000.0})");
}

Workload parse_hf(const Json& j) { return parse_workload_json(j.dump(), "config.json"); }

TEST(ModelIoHf, DefaultsAndNulls) {
  Json j = llama_text();
  j["num_key_value_heads"] = nullptr;
  j["tie_word_embeddings"] = true;
  const Workload w = parse_hf(j);
  EXPECT_EQ(w.model.num_kv_heads, 16);
  EXPECT_EQ(w.model.head_dim, 64);
  EXPECT_TRUE(w.model.tied_embeddings);
  EXPECT_EQ(w.training.seq_len, 2048);  // min(4096, max_position_embeddings)
  EXPECT_EQ(w.training.global_batch, TrainingSpec{}.global_batch);
  EXPECT_EQ(w.model.name, "config.json");
}

TEST(ModelIoHf, RopeParametersAndUnknownKeysAreIgnored) {
  Json j = llama_text();
  j.erase("rope_theta");
  j["rope_parameters"] = {{"rope_type", "llama3"}, {"rope_theta", 500000.0}, {"factor", 8.0}};
  j["some_future_key"] = {{"nested", {1, 2, 3}}};
  EXPECT_EQ(parse_hf(j).model.num_layers, 8);
}

TEST(ModelIoHf, HeadDimDifferentFromHiddenOverHeads) {
  Json j = llama_text();
  j["head_dim"] = 128;
  EXPECT_EQ(parse_hf(j).model.head_dim, 128);
}

TEST(ModelIoHf, QwenSparseStepAndMlpOnlyLayers) {
  Json j = llama_text();
  j["model_type"] = "qwen2_moe";
  j["num_experts"] = 16;
  j["num_experts_per_tok"] = 4;
  j["moe_intermediate_size"] = 512;
  j["decoder_sparse_step"] = 2;
  j["mlp_only_layers"] = {3};
  const ModelSpec m = parse_hf(j).model;
  // (layer + 1) % 2 == 0 and not in mlp_only_layers: 1, 5, 7.
  EXPECT_EQ(m.moe_layers, (std::vector<std::uint8_t>{0, 1, 0, 0, 0, 1, 0, 1}));
  EXPECT_EQ(m.ffn_hidden, 2816);
  EXPECT_EQ(m.shared_expert_ffn_hidden, 0);
}

TEST(ModelIoHf, DeepSeekFirstDenseAndLayerFreq) {
  Json j = llama_text();
  j["model_type"] = "deepseek_v2";
  j["n_routed_experts"] = 64;
  j["n_shared_experts"] = 2;
  j["num_experts_per_tok"] = 6;
  j["moe_intermediate_size"] = 256;
  j["first_k_dense_replace"] = 1;
  j["moe_layer_freq"] = 2;
  j["q_lora_rank"] = nullptr;  // V2-Lite style: queries without compression
  j["kv_lora_rank"] = 128;
  j["qk_nope_head_dim"] = 32;
  j["qk_rope_head_dim"] = 16;
  j["v_head_dim"] = 32;
  const ModelSpec m = parse_hf(j).model;
  // layer >= 1 and layer % 2 == 0: 2, 4, 6.
  EXPECT_EQ(m.moe_layers, (std::vector<std::uint8_t>{0, 0, 1, 0, 1, 0, 1, 0}));
  EXPECT_EQ(m.shared_expert_ffn_hidden, 512);  // 2 x 256
  EXPECT_EQ(m.mla.q_lora_rank, 0);
  EXPECT_EQ(m.mla.kv_lora_rank, 128);
  EXPECT_EQ(m.head_dim, 32);
}

// Zero experts with a router top-k is a contradiction, not a dense model
// (it used to be read as dense without a word).
TEST(ModelIoHf, ZeroExpertsWithATopKIsRefused) {
  Json j = llama_text();
  j["model_type"] = "mixtral";
  j["num_local_experts"] = 0;
  j["num_experts_per_tok"] = 2;
  try {
    (void)parse_workload_json(j.dump(), "config.json", nullptr);
    ADD_FAILURE() << "read as dense";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("num_local_experts = 0 but num_experts_per_tok = 2"),
              std::string::npos)
        << e.what();
  }
  j["num_experts_per_tok"] = 0;
  EXPECT_EQ(parse_workload_json(j.dump(), "config.json", nullptr).model.num_experts, 0);
}

TEST(ModelIoHf, UnknownFamilyReadGenerically) {
  Json j = llama_text();
  j["model_type"] = "my_moe";
  j["num_local_experts"] = 4;
  j["num_experts_per_tok"] = 1;
  std::vector<std::string> notes;
  const ModelSpec m = parse_workload_json(j.dump(), "config.json", &notes).model;
  EXPECT_EQ(m.num_experts, 4);
  EXPECT_EQ(m.expert_ffn_hidden, 2816);  // intermediate_size, as in Mixtral
  EXPECT_EQ(m.num_moe_layers(), 8);
  // Never silently: a note says how the file was read.
  ASSERT_EQ(notes.size(), 1u);
  for (const char* part : {"model_type \"my_moe\" is not a known family", "mixtral",
                           "Llama-style keys", "num_local_experts", "check the parameter counts"}) {
    EXPECT_NE(notes[0].find(part), std::string::npos) << part << " in: " << notes[0];
  }
  // A file without model_type is noted too.
  j.erase("model_type");
  notes.clear();
  (void)parse_workload_json(j.dump(), "config.json", &notes);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("the file has no model_type"), std::string::npos) << notes[0];

  Json g = Json::parse(R"({"model_type": "gpt2", "n_layer": 12, "n_embd": 768, "n_head": 12,
                           "vocab_size": 50257, "architectures": ["GPT2LMHeadModel"]})");
  expect_error([&] { parse_hf(g); }, {"config.json:/num_hidden_layers", "required field is missing",
                                      "\"gpt2\" is not a known family"});
}

TEST(ModelIoHf, KnownFamiliesAndPresetsGiveNoNotes) {
  for (const char* f :
       {"mixtral-8x7b-v0.1.json", "qwen1.5-moe-a2.7b.json", "qwen3-30b-a3b-transformers5.json",
        "deepseek-v3.json", "llama-2-7b-hf.json"}) {
    SCOPED_TRACE(f);
    std::vector<std::string> notes;
    (void)load_workload(kModels + "/hf/" + f, &notes);
    EXPECT_TRUE(notes.empty()) << notes.front();
  }
  std::vector<std::string> notes;
  (void)load_workload("mixtral-s", &notes);
  (void)load_workload(kModels + "/small-moe.json", &notes);
  EXPECT_TRUE(notes.empty());
  // layer_types of full attention only (Qwen3 as written by recent
  // transformers) is plain attention: read, no note.
  Json j = llama_text();
  j["model_type"] = "qwen3";
  j["layer_types"] = Json::array();
  for (int l = 0; l < 8; ++l) j["layer_types"].push_back("full_attention");
  (void)parse_workload_json(j.dump(), "config.json", &notes);
  EXPECT_TRUE(notes.empty()) << notes.front();
}

// GPT-OSS (model_type "gpt_oss") is not a known family: it is read with the
// common keys, with a note, and its sliding-window layers with another.
TEST(ModelIoHf, GptOssIsReadWithNotes) {
  std::vector<std::string> notes;
  const Workload w = load_workload(kModels + "/hf/gpt-oss-120b.json", &notes);
  const ModelSpec& m = w.model;
  EXPECT_EQ(m.num_layers, 36);
  EXPECT_EQ(m.hidden, 2880);
  EXPECT_EQ(m.num_heads, 64);
  EXPECT_EQ(m.num_kv_heads, 8);
  EXPECT_EQ(m.head_dim, 64);
  EXPECT_EQ(m.num_experts, 128);
  EXPECT_EQ(m.top_k, 4);
  EXPECT_EQ(m.expert_ffn_hidden, 2880);  // intermediate_size, as in Mixtral
  EXPECT_EQ(m.num_moe_layers(), 36);
  EXPECT_EQ(m.vocab, 201088);
  // 116.8B in the model card; the active count here includes the embedding
  // and the output layer (the card's 5.1B leaves the embedding out).
  EXPECT_NEAR(total_params(m) / 1e9, 116.8, 0.2);
  EXPECT_NEAR((active_params(m) - embedding_params(m)) / 1e9, 5.1, 0.1);
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_NE(notes[0].find("model_type \"gpt_oss\" is not a known family"), std::string::npos)
      << notes[0];
  // Alternating 128-key sliding windows (layer_types), a sink per head,
  // QKV biases (attention_bias): costed, with a note on the window.
  EXPECT_EQ(m.sliding_window, 128);
  ASSERT_EQ(m.window_layers.size(), 36u);
  for (int l = 0; l < 36; ++l) EXPECT_EQ(m.window_layers[l], l % 2 == 0 ? 1 : 0) << l;
  EXPECT_TRUE(m.attention_sinks);
  EXPECT_TRUE(m.qkv_bias);
  for (const char* part :
       {"18 of 36 layers attend to a window of the last 128 keys", "Attention variants"}) {
    EXPECT_NE(notes[1].find(part), std::string::npos) << part << " in: " << notes[1];
  }
}

TEST(ModelIoHf, VisionConfigBesideTopLevelTextKeysIsNoted) {
  Json j = llama_text();
  j["vision_config"] = {{"hidden_size", 1280}, {"depth", 32}};
  std::vector<std::string> notes;
  EXPECT_EQ(parse_workload_json(j.dump(), "config.json", &notes).model.num_layers, 8);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("vision_config"), std::string::npos) << notes[0];
  EXPECT_NE(notes[0].find("vision tower is not modelled"), std::string::npos) << notes[0];
}

// Models the cost model cannot represent are refused, naming the file, the
// field and its value (docs/models.md, "Refused and approximated").
TEST(ModelIoHf, RefusesJamba) {
  const Caught e = catch_input_error([] { load_fixture("hf/jamba-v0.1.json"); });
  EXPECT_EQ(e.where, kModels + "/hf/jamba-v0.1.json:/attn_layer_period");
  for (const char* part : {"attn_layer_period = 8", "hybrid Mamba/linear-attention layers",
                           "model_type \"jamba\"", "not modelled", "refused"}) {
    EXPECT_NE(e.what.find(part), std::string::npos) << part << " in: " << e.what;
  }
}

TEST(ModelIoHf, RefusesQwen3Next) {
  // As on the hub (full_attention_interval and the Gated DeltaNet widths).
  Caught e = catch_input_error([] { load_fixture("hf/qwen3-next-80b-a3b.json"); });
  EXPECT_EQ(e.where, kModels + "/hf/qwen3-next-80b-a3b.json:/full_attention_interval");
  EXPECT_NE(e.what.find("hybrid Mamba/linear-attention layers (model_type \"qwen3_next\")"),
            std::string::npos)
      << e.what;
  // As written back by transformers: layer_types names the first linear one.
  Json j = parse_json(read_regular_file(kModels + "/hf/qwen3-next-80b-a3b.json"), "q");
  j["layer_types"] = Json::array();
  for (int l = 0; l < 48; ++l) {
    j["layer_types"].push_back(l % 4 == 3 ? "full_attention" : "linear_attention");
  }
  e = catch_input_error([&] { parse_hf(j); });
  EXPECT_EQ(e.where, "config.json:/layer_types/0");
  EXPECT_NE(e.what.find("layer_types[0] = \"linear_attention\""), std::string::npos) << e.what;
  // Without the model type and the other keys, layer_types alone says it.
  Json k = llama_text();
  k.erase("model_type");
  k["layer_types"] = {"full_attention", "full_attention", "full_attention", "mamba",
                      "full_attention", "full_attention", "full_attention", "full_attention"};
  e = catch_input_error([&] { parse_hf(k); });
  EXPECT_EQ(e.where, "config.json:/layer_types/3");
  EXPECT_NE(e.what.find("\"mamba\": hybrid Mamba/linear-attention layers are not modelled"),
            std::string::npos)
      << e.what;
}

TEST(ModelIoHf, RefusesEveryHybridMarker) {
  struct Case {
    const char* key;
    Json value;
    const char* where;
    const char* shown;  // field = value, as the message gives it
  };
  const std::vector<Case> cases = {
      {"mamba_d_state", 16, "/mamba_d_state", "mamba_d_state = 16"},
      {"mamba_n_heads", 128, "/mamba_n_heads", "mamba_n_heads = 128"},
      {"ssm_state_size", 128, "/ssm_state_size", "ssm_state_size = 128"},
      {"hybrid_override_pattern", "M-M-M*-", "/hybrid_override_pattern",
       "hybrid_override_pattern = \"M-M-M*-\""},
      {"attn_layer_indices", {3, 7}, "/attn_layer_indices", "attn_layer_indices = [3,7]"},
      {"block_types",
       {"recurrent", "attention"},
       "/block_types",
       "block_types = [\"recurrent\",\"attention\"]"},
      {"attn_type_list", {0, 0, 0, 1}, "/attn_type_list", "attn_type_list = [0,0,0,1]"},
      {"linear_num_value_heads", 32, "/linear_num_value_heads", "linear_num_value_heads = 32"},
      {"layer_types",
       {"conv", "full_attention", "full_attention", "full_attention", "full_attention",
        "full_attention", "full_attention", "full_attention"},
       "/layer_types/0",
       "layer_types[0] = \"conv\""},
      {"model_type", "mamba2", "/model_type", "model_type = \"mamba2\""},
      {"model_type", "nemotron_h", "/model_type", "model_type = \"nemotron_h\""},
      {"model_type", "falcon_h1", "/model_type", "model_type = \"falcon_h1\""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.shown);
    Json j = llama_text();
    j[c.key] = c.value;
    const Caught e = catch_input_error([&] { parse_hf(j); });
    EXPECT_EQ(e.where, std::string("config.json:") + c.where);
    EXPECT_EQ(e.what.find(e.where + ": " + c.shown + ": hybrid Mamba/linear-attention layers"), 0u)
        << e.what;
  }
  // A Mamba model without attention keys is refused before any key is
  // found missing.
  const Json mamba = Json::parse(R"({"model_type": "mamba", "hidden_size": 768,
    "num_hidden_layers": 24, "state_size": 16, "vocab_size": 50280})");
  EXPECT_EQ(catch_input_error([&] { parse_hf(mamba); }).where, "config.json:/model_type");
  // null counts as absent, as for every other key.
  Json j = llama_text();
  j["mamba_d_state"] = nullptr;
  j["layer_types"] = nullptr;
  EXPECT_EQ(parse_hf(j).model.num_layers, 8);
}

TEST(ModelIoHf, LayerTypesMustBeAListOfKindsOnePerLayer) {
  Json j = llama_text();
  j["layer_types"] = "full_attention";
  expect_error([&] { parse_hf(j); }, {"config.json:/layer_types", "must be a list of layer kinds"});
  j["layer_types"] = {"full_attention", 3};
  expect_error([&] { parse_hf(j); }, {"config.json:/layer_types/1", "must be a string", "3"});
  j["layer_types"] = {"full_attention", "sliding_attention"};
  expect_error([&] { parse_hf(j); },
               {"config.json:/layer_types", "2 entries", "one per layer", "num_hidden_layers = 8"});
}

TEST(ModelIoHf, RefusesDeepSeekSparseAttention) {
  Caught e = catch_input_error([] { load_fixture("hf/deepseek-v3.2-exp.json"); });
  EXPECT_EQ(e.where, kModels + "/hf/deepseek-v3.2-exp.json:/index_topk");
  for (const char* part : {"index_topk = 2048", "DeepSeek sparse attention",
                           "model_type \"deepseek_v32\"", "not modelled", "refused"}) {
    EXPECT_NE(e.what.find(part), std::string::npos) << part << " in: " << e.what;
  }
  // Any of the indexer keys, on any family, and the family alone.
  Json j = parse_json(read_regular_file(kModels + "/hf/deepseek-v3.json"), "d");
  j["index_n_heads"] = 64;
  e = catch_input_error([&] { parse_hf(j); });
  EXPECT_EQ(e.where, "config.json:/index_n_heads");
  EXPECT_NE(e.what.find("index_n_heads = 64: DeepSeek sparse attention"), std::string::npos)
      << e.what;
  j.erase("index_n_heads");
  j["model_type"] = "deepseek_v32";
  e = catch_input_error([&] { parse_hf(j); });
  EXPECT_EQ(e.where, "config.json:/model_type");
  EXPECT_NE(e.what.find("DeepSeek sparse attention is not modelled"), std::string::npos) << e.what;
}

TEST(ModelIoHf, RefusesANestedTextConfig) {
  const std::string path = kModels + "/hf/llama4-scout-17b-16e.json";
  Caught e = catch_input_error([&] { load_workload(path); });
  EXPECT_EQ(e.where, path + ":/text_config");
  for (const char* part :
       {"multimodal config (model_type \"llama4\")", "text_config", "not modelled",
        "pass the text_config object as its own file", "jq .text_config"}) {
    EXPECT_NE(e.what.find(part), std::string::npos) << part << " in: " << e.what;
  }
  // Recognised as a Hugging Face config even without model_type.
  const Json nested = Json::parse(R"({"text_config": {"hidden_size": 4096}})");
  e = catch_input_error([&] { parse_hf(nested); });
  EXPECT_EQ(e.where, "config.json:/text_config");
  // null counts as absent.
  Json j = llama_text();
  j["text_config"] = nullptr;
  EXPECT_EQ(parse_hf(j).model.num_layers, 8);
}

TEST(ModelIoHf, BadValues) {
  struct Case {
    const char* key;
    Json value;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {"hidden_size", 32.7, {"config.json:/hidden_size", "32.7", "must be an integer"}},
      {"num_hidden_layers", true, {"/num_hidden_layers", "true"}},
      {"vocab_size", -3, {"/vocab_size", "-3", "out of range"}},
      {"num_attention_heads", "16", {"/num_attention_heads", "\"16\""}},
      {"num_key_value_heads", 5, {"/num_key_value_heads", "5", "must divide"}},
      {"intermediate_size", "NaN", {"/intermediate_size", "\"NaN\""}},
      {"max_position_embeddings", 0, {"/max_position_embeddings", "0"}},
      {"tie_word_embeddings", 1, {"/tie_word_embeddings", "true or false"}},
      {"model_type", 7, {"/model_type", "must be a string"}},
      {"head_dim", 0.5, {"/head_dim", "0.5"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.key);
    Json j = llama_text();
    j[c.key] = c.value;
    expect_error([&] { parse_hf(j); }, c.parts);
  }
}

TEST(ModelIoHf, BadMoeValues) {
  Json j = llama_text();
  j["model_type"] = "mixtral";
  j["num_local_experts"] = 8;
  j["num_experts_per_tok"] = 9;
  expect_error([&] { parse_hf(j); }, {"/num_experts_per_tok", "9", "exceeds", "8"});
  j["num_experts_per_tok"] = 2;
  j["num_experts"] = 16;
  expect_error([&] { parse_hf(j); }, {"disagrees", "16", "8"});
  j.erase("num_experts");
  j["mlp_only_layers"] = {0, 8};
  expect_error([&] { parse_hf(j); }, {"/mlp_only_layers/1", "8", "out of range"});
  j["mlp_only_layers"] = "0";
  expect_error([&] { parse_hf(j); }, {"/mlp_only_layers", "list of layer indices"});
  j.erase("mlp_only_layers");
  j["first_k_dense_replace"] = 8;
  expect_error([&] { parse_hf(j); }, {"config.json", "leave no MoE layer"});
  j["first_k_dense_replace"] = 2.5;
  expect_error([&] { parse_hf(j); }, {"/first_k_dense_replace", "2.5"});
  j.erase("first_k_dense_replace");
  j["model_type"] = "qwen3_moe";  // needs moe_intermediate_size
  expect_error([&] { parse_hf(j); }, {"/moe_intermediate_size", "required field is missing"});
}

TEST(ModelIoHf, DenseModelNeedsIntermediateSize) {
  Json j = llama_text();
  j.erase("intermediate_size");
  expect_error([&] { parse_hf(j); }, {"/intermediate_size", "required field is missing"});
}

TEST(ModelIoHf, HeadsNotDividingHiddenWithoutHeadDim) {
  Json j = llama_text();
  j["num_attention_heads"] = 15;
  expect_error([&] { parse_hf(j); }, {"/hidden_size", "1024", "15", "head_dim"});
}

// ---------------------------------------------------------------------------
// hapmoe model JSON

TEST(ModelIoOwn, Gpt3DenseFixture) {
  const Workload w = load_fixture("gpt3-1.3b.json");
  const ModelSpec& m = w.model;
  EXPECT_EQ(m.name, "gpt3-1.3b");
  EXPECT_EQ(m.num_layers, 24);
  EXPECT_EQ(m.hidden, 2048);
  EXPECT_EQ(m.num_heads, 16);
  EXPECT_EQ(m.num_kv_heads, 16);  // MHA by default
  EXPECT_EQ(m.head_dim, 128);     // hidden / heads
  EXPECT_EQ(m.ffn_hidden, 8192);
  EXPECT_EQ(m.mlp, MlpKind::kGelu);
  EXPECT_EQ(m.positions, PositionKind::kLearned);
  EXPECT_EQ(m.max_positions, 2048);
  EXPECT_EQ(m.vocab, 50257);
  EXPECT_TRUE(m.tied_embeddings);
  EXPECT_FALSE(m.is_moe());
  EXPECT_TRUE(m.moe_layers.empty());
  EXPECT_FALSE(m.mla.enabled());
  EXPECT_EQ(w.training.seq_len, 2048);
  EXPECT_EQ(w.training.global_batch, 512);
  EXPECT_EQ(w.training.micro_batch, 4);
  EXPECT_EQ(w.training.precision, Precision::kFp16);
  EXPECT_FALSE(w.training.distributed_optimizer);
  EXPECT_EQ(w.training.dispatcher, Dispatcher::kAllToAll);
  EXPECT_DOUBLE_EQ(w.training.imbalance, 1.2);
  EXPECT_DOUBLE_EQ(w.training.gamma, 1.0);
  // GPT-3 XL: 1.3B parameters.
  EXPECT_NEAR(total_params(m) / 1e9, 1.32, 0.03);
}

TEST(ModelIoOwn, SmallMoeFixture) {
  const Workload w = load_fixture("small-moe.json");
  const ModelSpec& m = w.model;
  EXPECT_EQ(m.name, "small-moe");
  EXPECT_EQ(m.num_layers, 12);
  EXPECT_EQ(m.num_kv_heads, 4);
  EXPECT_EQ(m.head_dim, 64);
  EXPECT_EQ(m.mlp, MlpKind::kSwiGlu);
  EXPECT_EQ(m.positions, PositionKind::kRotary);
  EXPECT_FALSE(m.tied_embeddings);
  EXPECT_EQ(m.num_experts, 16);
  EXPECT_EQ(m.top_k, 2);
  EXPECT_EQ(m.expert_ffn_hidden, 1024);
  EXPECT_EQ(m.shared_expert_ffn_hidden, 1024);
  EXPECT_EQ(m.num_moe_layers(), 11);
  EXPECT_FALSE(m.is_moe_layer(0));
  EXPECT_TRUE(m.is_moe_layer(1));
  EXPECT_EQ(w.training.seq_len, 2048);
  EXPECT_EQ(w.training.global_batch, 128);
  EXPECT_EQ(w.training.micro_batch, 2);
  EXPECT_EQ(w.training.dispatcher, Dispatcher::kAllToAll);
  EXPECT_DOUBLE_EQ(w.training.imbalance, 1.5);
  EXPECT_DOUBLE_EQ(w.training.gamma, 0.5);
}

TEST(ModelIoOwn, MinimalFileGetsDefaults) {
  const Workload w = parse_workload_json(
      R"({"num_layers": 2, "hidden": 512, "num_heads": 8, "ffn_hidden": 2048, "vocab": 100})",
      "min.json");
  EXPECT_EQ(w.model.name, "min.json");
  EXPECT_EQ(w.model.num_kv_heads, 8);
  EXPECT_EQ(w.model.head_dim, 64);
  EXPECT_EQ(w.model.mlp, MlpKind::kSwiGlu);
  EXPECT_EQ(w.model.positions, PositionKind::kRotary);
  EXPECT_EQ(w.model.max_positions, 0);
  EXPECT_FALSE(w.model.tied_embeddings);
  EXPECT_EQ(w.training, TrainingSpec{});
}

TEST(ModelIoOwn, SeqLenDefaultIsCappedByMaxPositions) {
  const Workload w = parse_workload_json(
      R"({"num_layers": 2, "hidden": 512, "num_heads": 8, "ffn_hidden": 2048, "vocab": 100,
          "positions": "learned", "max_positions": 1024})",
      "cap.json");
  EXPECT_EQ(w.training.seq_len, 1024);
}

TEST(ModelIoOwn, LayerFreqIntegerAndList) {
  Json j = base_model();
  j["num_layers"] = 8;
  j["moe"]["first_dense_layers"] = 1;
  j["moe"]["layer_freq"] = 2;
  EXPECT_EQ(parse(j).model.moe_layers, (std::vector<std::uint8_t>{0, 1, 0, 1, 0, 1, 0, 1}));
  j["moe"].erase("first_dense_layers");
  j["moe"]["layer_freq"] = {1, 1, 0, 1, 0, 0, 1, 1};
  EXPECT_EQ(parse(j).model.moe_layers, (std::vector<std::uint8_t>{1, 1, 0, 1, 0, 0, 1, 1}));
  EXPECT_EQ(parse(j).model.num_moe_layers(), 5);
}

TEST(ModelIoOwn, MlaBlock) {
  Json j = base_model();
  j["mla"] = {{"q_lora_rank", 64},
              {"kv_lora_rank", 32},
              {"qk_nope_head_dim", 64},
              {"qk_rope_head_dim", 32},
              {"v_head_dim", 64}};
  const MlaSpec mla = parse(j).model.mla;
  EXPECT_TRUE(mla.enabled());
  EXPECT_EQ(mla.q_lora_rank, 64);
  EXPECT_EQ(mla.kv_lora_rank, 32);
  EXPECT_EQ(mla.qk_rope_head_dim, 32);
}

TEST(ModelIoOwn, DispatcherAndPrecisionSpellings) {
  Json j = base_model();
  j["training"]["dispatcher"] = "All-Gather";
  j["training"]["precision"] = "FP16";
  const Workload w = parse(j);
  EXPECT_EQ(w.training.dispatcher, Dispatcher::kAllGather);
  EXPECT_EQ(w.training.precision, Precision::kFp16);
  j["training"]["dispatcher"] = "auto";
  EXPECT_EQ(parse(j).training.dispatcher, Dispatcher::kAuto);
}

// "precision": "fp8" with "fp8_recipe" (docs/costmodel.md, "FP8"); the
// recipe defaults to delayed, as Megatron's --fp8-recipe.
TEST(ModelIoOwn, Fp8PrecisionAndRecipe) {
  Json j = base_model();
  j["training"]["precision"] = "fp8";
  Workload w = parse(j);
  EXPECT_EQ(w.training.precision, Precision::kFp8);
  EXPECT_EQ(w.training.fp8_recipe, Fp8Recipe::kDelayed);
  const std::vector<std::pair<std::string, Fp8Recipe>> recipes = {
      {"delayed", Fp8Recipe::kDelayed},       {"tensorwise", Fp8Recipe::kTensorwise},
      {"blockwise", Fp8Recipe::kBlockwise},   {"mxfp8", Fp8Recipe::kMxfp8},
      {"TensorWise", Fp8Recipe::kTensorwise}, {"MXFP8", Fp8Recipe::kMxfp8}};
  for (const auto& [text, recipe] : recipes) {
    j["training"]["fp8_recipe"] = text;
    j["training"]["precision"] = "FP8";
    w = parse(j);
    EXPECT_EQ(w.training.precision, Precision::kFp8) << text;
    EXPECT_EQ(w.training.fp8_recipe, recipe) << text;
  }
  // Everything else of the training settings is untouched.
  Workload plain = parse(base_model());
  plain.training.precision = Precision::kFp8;
  plain.training.fp8_recipe = Fp8Recipe::kMxfp8;
  EXPECT_EQ(w, plain);
}

// Each bad input: a modification of base_model() and what the message must
// contain (file, JSON pointer and the offending value).
TEST(ModelIoOwn, BadValuesNamePointerAndValue) {
  struct Case {
    const char* label;
    std::function<void(Json&)> edit;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {"unknown top-level key",
       [](Json& j) { j["hiden"] = 256; },
       {"t.json:/hiden", "unknown field"}},
      {"unknown key in moe",
       [](Json& j) { j["moe"]["topk"] = 2; },
       {"t.json:/moe/topk", "unknown field"}},
      {"unknown key in training",
       [](Json& j) { j["training"]["seq_length"] = 2; },
       {"t.json:/training/seq_length", "unknown field"}},
      {"unknown key in mla",
       [](Json& j) {
         j["mla"] = {{"kv_lora_rank", 8},
                     {"qk_nope_head_dim", 8},
                     {"qk_rope_head_dim", 8},
                     {"v_head_dim", 8},
                     {"rope_theta", 1}};
       },
       {"t.json:/mla/rope_theta", "unknown field"}},
      {"string for int",
       [](Json& j) { j["num_layers"] = "24"; },
       {"t.json:/num_layers", "\"24\"", "must be an integer"}},
      {"fraction for int",
       [](Json& j) { j["hidden"] = 32.7; },
       {"t.json:/hidden", "32.7", "must be an integer"}},
      {"negative size",
       [](Json& j) { j["ffn_hidden"] = -3; },
       {"t.json:/ffn_hidden", "-3", "out of range"}},
      {"bool for int",
       [](Json& j) { j["num_heads"] = true; },
       {"t.json:/num_heads", "true", "must be an integer"}},
      {"missing required",
       [](Json& j) { j.erase("vocab"); },
       {"t.json:/vocab", "required field is missing"}},
      {"missing required in moe",
       [](Json& j) { j["moe"].erase("expert_ffn_hidden"); },
       {"t.json:/moe/expert_ffn_hidden", "required field is missing"}},
      {"kv heads not dividing",
       [](Json& j) { j["num_kv_heads"] = 3; },
       {"t.json:/num_kv_heads", "num_kv_heads = 3", "must divide num_heads = 4"}},
      {"kv heads above heads",
       [](Json& j) { j["num_kv_heads"] = 8; },
       {"t.json:/num_kv_heads", "8"}},
      {"top_k above experts",
       [](Json& j) { j["moe"]["top_k"] = 9; },
       {"t.json:/moe/top_k", "top_k = 9", "num_experts = 8"}},
      {"seq_len above max_positions",
       [](Json& j) { j["training"]["seq_len"] = 4096; },
       {"t.json:/training/seq_len", "4096", "max_positions = 2048"}},
      {"batch not a multiple",
       [](Json& j) { j["training"]["global_batch"] = 15; },
       {"t.json:/training/global_batch", "15", "micro_batch = 2"}},
      {"NaN as text",
       [](Json& j) { j["training"]["imbalance"] = "NaN"; },
       {"t.json:/training/imbalance", "\"NaN\"", "must be a number"}},
      {"Infinity as text",
       [](Json& j) { j["training"]["gamma"] = "Infinity"; },
       {"t.json:/training/gamma", "\"Infinity\""}},
      {"imbalance below 1",
       [](Json& j) { j["training"]["imbalance"] = 0.5; },
       {"t.json:/training/imbalance", "0.5", "out of range"}},
      {"gamma above 1",
       [](Json& j) { j["training"]["gamma"] = 1.5; },
       {"t.json:/training/gamma", "1.5"}},
      {"seq_len too large",
       [](Json& j) { j["training"]["seq_len"] = 1 << 23; },
       {"t.json:/training/seq_len", "8388608"}},
      {"layers zero", [](Json& j) { j["num_layers"] = 0; }, {"t.json:/num_layers", "0"}},
      {"layers too many",
       [](Json& j) { j["num_layers"] = 100001; },
       {"t.json:/num_layers", "100001"}},
      {"unknown mlp",
       [](Json& j) { j["mlp"] = "relu"; },
       {"t.json:/mlp", "\"relu\"", "swiglu, gelu"}},
      {"unknown dispatcher",
       [](Json& j) { j["training"]["dispatcher"] = "broadcast"; },
       {"t.json:/training/dispatcher", "\"broadcast\"", "allgather"}},
      {"unknown precision",
       [](Json& j) { j["training"]["precision"] = "fp4"; },
       {"t.json:/training/precision", "\"fp4\"", "bf16, fp16, fp8"}},
      {"unknown fp8 recipe",
       [](Json& j) {
         j["training"]["precision"] = "fp8";
         j["training"]["fp8_recipe"] = "nvfp4";
       },
       {"t.json:/training/fp8_recipe", "\"nvfp4\"", "delayed, tensorwise, blockwise, mxfp8"}},
      {"learned without max_positions",
       [](Json& j) {
         j["positions"] = "learned";
         j.erase("max_positions");
       },
       {"t.json:/max_positions", "required field is missing"}},
      {"dense model without ffn_hidden",
       [](Json& j) {
         j.erase("moe");
         j.erase("ffn_hidden");
       },
       {"t.json:/ffn_hidden", "required field is missing"}},
      {"no MoE layer",
       [](Json& j) { j["moe"]["first_dense_layers"] = 4; },
       {"t.json:/moe", "no layer is a MoE layer"}},
      {"first dense beyond layers",
       [](Json& j) { j["moe"]["first_dense_layers"] = 5; },
       {"t.json:/moe/first_dense_layers", "5"}},
      {"layer_freq bool",
       [](Json& j) { j["moe"]["layer_freq"] = true; },
       {"t.json:/moe/layer_freq", "true"}},
      {"layer_freq list too short",
       [](Json& j) {
         j["moe"]["layer_freq"] = {1, 1};
       },
       {"t.json:/moe/layer_freq", "2 entries", "num_layers = 4"}},
      {"layer_freq list bad entry",
       [](Json& j) {
         j["moe"]["layer_freq"] = {1, 1, 2, 1};
       },
       {"t.json:/moe/layer_freq/2", "2"}},
      {"layer_freq list and first dense",
       [](Json& j) {
         j["moe"]["layer_freq"] = {0, 1, 1, 1};
         j["moe"]["first_dense_layers"] = 1;
       },
       {"t.json:/moe/first_dense_layers", "not both"}},
      {"head_dim not derivable",
       [](Json& j) {
         j["hidden"] = 250;
         j.erase("head_dim");
       },
       {"t.json:/hidden", "250", "head_dim"}},
      {"moe not an object", [](Json& j) { j["moe"] = 8; }, {"t.json:/moe", "JSON object"}},
      {"experts zero",
       [](Json& j) { j["moe"]["num_experts"] = 0; },
       {"t.json:/moe/num_experts", "0"}},
      {"name not a string", [](Json& j) { j["name"] = 5; }, {"t.json:/name", "string"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.label);
    Json j = base_model();
    EXPECT_NO_THROW(parse(j));
    c.edit(j);
    expect_error([&] { parse(j); }, c.parts);
  }
}

// training.overlap (docs/costmodel.md, "Overlap"): each flag optional and
// off by default, read strictly, and overlap.param_gather needs the
// distributed optimizer.
TEST(ModelIoOwn, TrainingOverlapObject) {
  EXPECT_EQ(parse(base_model()).training.overlap, Overlap{});
  Json j = base_model();
  j["training"]["overlap"] = {{"grad_reduce", true}, {"tp_comm", true}};
  Workload w = parse(j);
  EXPECT_TRUE(w.training.overlap.grad_reduce);
  EXPECT_FALSE(w.training.overlap.param_gather);
  EXPECT_TRUE(w.training.overlap.tp_comm);
  EXPECT_FALSE(w.training.overlap.moe_ep_comm);
  j["training"]["overlap"] = {
      {"grad_reduce", false}, {"param_gather", true}, {"tp_comm", false}, {"moe_ep_comm", true}};
  w = parse(j);
  EXPECT_EQ(w.training.overlap, (Overlap{false, true, false, true}));
  j["training"]["overlap"]["delay_wgrad"] = true;
  EXPECT_EQ(parse(j).training.overlap, (Overlap{false, true, false, true, true}));
  j["training"]["overlap"] = Json::object();
  EXPECT_EQ(parse(j).training.overlap, Overlap{});

  struct Case {
    const char* label;
    Json overlap;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {"unknown key",
       {{"grad_reduce", true}, {"grad_reduse", true}},
       {"t.json:/training/overlap/grad_reduse", "unknown field"}},
      {"not a bool", {{"tp_comm", 1}}, {"t.json:/training/overlap/tp_comm"}},
      {"string for bool", {{"moe_ep_comm", "true"}}, {"t.json:/training/overlap/moe_ep_comm"}},
      {"not an object", Json::array({true}), {"t.json:/training/overlap"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.label);
    Json bad = base_model();
    bad["training"]["overlap"] = c.overlap;
    expect_error([&] { parse(bad); }, c.parts);
  }
}

TEST(ModelIoOwn, OverlapParamGatherNeedsTheDistributedOptimizer) {
  Json j = base_model();
  j["training"]["distributed_optimizer"] = false;
  j["training"]["overlap"] = {{"param_gather", true}};
  const Caught e = catch_input_error([&] { parse(j); });
  EXPECT_EQ(e.where.rfind("t.json", 0), 0u) << e.where;
  EXPECT_NE(e.where.find("/training/overlap/param_gather"), std::string::npos) << e.where;
  EXPECT_NE(e.what.find("overlap.param_gather"), std::string::npos) << e.what;
  EXPECT_NE(e.what.find("distributed optimizer"), std::string::npos) << e.what;
  // With the distributed optimizer (the default) it is accepted; without,
  // the other overlaps are.
  j["training"]["distributed_optimizer"] = true;
  EXPECT_TRUE(parse(j).training.overlap.param_gather);
  j["training"]["distributed_optimizer"] = false;
  j["training"]["overlap"] = {{"grad_reduce", true}, {"tp_comm", true}, {"moe_ep_comm", true}};
  EXPECT_EQ(parse(j).training.overlap, (Overlap{true, false, true, true}));
}

// Megatron asserts --delay-wgrad-compute only with
// --overlap-moe-expert-parallel-comm; the model JSON says where.
TEST(ModelIoOwn, OverlapDelayWgradNeedsTheMoeOverlap) {
  Json j = base_model();
  j["training"]["overlap"] = {{"delay_wgrad", true}};
  const Caught e = catch_input_error([&] { parse(j); });
  EXPECT_EQ(e.where, "t.json:/training/overlap/delay_wgrad") << e.where;
  EXPECT_NE(e.what.find("needs overlap.moe_ep_comm"), std::string::npos) << e.what;
  j["training"]["overlap"]["moe_ep_comm"] = true;
  EXPECT_TRUE(parse(j).training.overlap.delay_wgrad);
}

TEST(ModelIoOwn, DuplicateKeyAndInvalidJson) {
  expect_error(
      [] {
        parse_workload_json(
            R"({"num_layers": 2, "hidden": 512, "hidden": 256, "num_heads": 8, "vocab": 10})",
            "dup.json");
      },
      {"dup.json", "duplicate key \"hidden\""});
  expect_error(
      [] {
        parse_workload_json(
            R"({"num_layers": 2, "moe": {"top_k": 1, "top_k": 2}, "hidden": 8, "vocab": 10})",
            "dup.json");
      },
      {"duplicate key \"top_k\""});
  const Caught e = catch_input_error(
      [] { parse_workload_json("{\n  \"num_layers\": 2,\n  \"hidden\": ,\n}", "bad.json"); });
  EXPECT_EQ(e.where, "bad.json:3:13") << e.what;
  EXPECT_NE(e.what.find("invalid JSON"), std::string::npos) << e.what;
  expect_error([] { parse_workload_json(R"({"num_layers": NaN})", "nan.json"); },
               {"nan.json:1:", "invalid JSON"});
}

TEST(ModelIoOwn, UnrecognisedDocuments) {
  expect_error([] { parse_workload_json(R"({"layers": 4})", "x.json"); },
               {"x.json", "not a recognised model file", "num_hidden_layers", "num_layers"});
  expect_error([] { parse_workload_json("[1, 2]", "x.json"); }, {"x.json", "JSON object"});
  expect_error([] { parse_workload_json("4", "x.json"); }, {"x.json", "JSON object"});
}

// ---------------------------------------------------------------------------
// Overrides

TEST(ModelIoOverrides, ApplyEveryField) {
  Workload w = preset("mixtral-s");
  TrainingOverrides o;
  o.seq_len = 2048;
  o.global_batch = 64;
  o.micro_batch = 2;
  o.precision = Precision::kFp16;
  o.dispatcher = Dispatcher::kAuto;
  o.imbalance = 1.1;
  o.gamma = 0.3;
  o.no_distributed_optimizer = true;
  apply_overrides(o, w);
  EXPECT_EQ(w.training.seq_len, 2048);
  EXPECT_EQ(w.training.global_batch, 64);
  EXPECT_EQ(w.training.micro_batch, 2);
  EXPECT_EQ(w.training.precision, Precision::kFp16);
  EXPECT_EQ(w.training.dispatcher, Dispatcher::kAuto);
  EXPECT_DOUBLE_EQ(w.training.imbalance, 1.1);
  EXPECT_DOUBLE_EQ(w.training.gamma, 0.3);
  EXPECT_FALSE(w.training.distributed_optimizer);
  EXPECT_EQ(w.model, preset("mixtral-s").model);
}

// --precision fp8 and --fp8-recipe as overrides.
TEST(ModelIoOverrides, Fp8PrecisionAndRecipe) {
  Workload w = preset("mixtral-s");
  TrainingOverrides o;
  o.precision = Precision::kFp8;
  o.fp8_recipe = Fp8Recipe::kTensorwise;
  apply_overrides(o, w);
  EXPECT_EQ(w.training.precision, Precision::kFp8);
  EXPECT_EQ(w.training.fp8_recipe, Fp8Recipe::kTensorwise);
  EXPECT_EQ(w.model, preset("mixtral-s").model);
  // --precision fp8 alone keeps the model's recipe (delayed by default).
  Workload v = preset("mixtral-s");
  TrainingOverrides p;
  p.precision = Precision::kFp8;
  apply_overrides(p, v);
  EXPECT_EQ(v.training.precision, Precision::kFp8);
  EXPECT_EQ(v.training.fp8_recipe, Fp8Recipe::kDelayed);
  // --fp8-recipe alone changes the recipe of an FP8 model.
  TrainingOverrides r;
  r.fp8_recipe = Fp8Recipe::kBlockwise;
  apply_overrides(r, w);
  EXPECT_EQ(w.training.precision, Precision::kFp8);
  EXPECT_EQ(w.training.fp8_recipe, Fp8Recipe::kBlockwise);
}

TEST(ModelIoOverrides, EmptyOverridesChangeNothing) {
  Workload w = preset("deepseek-v3");
  apply_overrides(TrainingOverrides{}, w);
  EXPECT_EQ(w, preset("deepseek-v3"));
}

TEST(ModelIoOverrides, InvalidResultNamesTheOption) {
  struct Case {
    const char* label;
    TrainingOverrides o;
    std::string option;
    std::vector<std::string> parts;
  };
  std::vector<Case> cases(7);
  cases[0] = {"seq_len above max_positions", {}, "--seq-len", {"seq_len = 8192", "4096"}};
  cases[0].o.seq_len = 8192;
  cases[1] = {"micro not dividing preset batch", {}, "--micro-batch", {"micro_batch = 3"}};
  cases[1].o.micro_batch = 3;
  cases[2] = {"global not a multiple of micro", {}, "--global-batch", {"global_batch = 10"}};
  cases[2].o.global_batch = 10;
  cases[2].o.micro_batch = 4;
  cases[3] = {"imbalance below 1", {}, "--imbalance", {"imbalance"}};
  cases[3].o.imbalance = 0.5;
  cases[4] = {"gamma above 1", {}, "--gamma", {"gamma"}};
  cases[4].o.gamma = 1.5;
  cases[5] = {"seq_len zero", {}, "--seq-len", {"0"}};
  cases[5].o.seq_len = 0;
  cases[6] = {"global batch too large", {}, "--global-batch", {"out of range"}};
  cases[6].o.global_batch = (1 << 30) + 1;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.label);
    Workload w = preset("llama2-7b");
    const Caught e = catch_input_error([&] { apply_overrides(c.o, w); });
    EXPECT_EQ(e.where, c.option) << e.what;
    for (const auto& p : c.parts) EXPECT_NE(e.what.find(p), std::string::npos) << e.what;
    EXPECT_EQ(w, preset("llama2-7b")) << "a failed override must leave the workload unchanged";
  }
}

// --overlap-* turn overlaps on (never off); --overlap-param-gather without
// the distributed optimizer names the option.
TEST(ModelIoOverrides, OverlapFlags) {
  Workload w = preset("mixtral-s");
  EXPECT_EQ(w.training.overlap, Overlap{});
  TrainingOverrides o;
  o.overlap.grad_reduce = true;
  o.overlap.moe_ep_comm = true;
  apply_overrides(o, w);
  EXPECT_EQ(w.training.overlap, (Overlap{true, false, false, true}));
  // An override of false leaves an overlap of the model on.
  TrainingOverrides more;
  more.overlap.param_gather = true;
  more.overlap.tp_comm = true;
  apply_overrides(more, w);
  EXPECT_EQ(w.training.overlap, (Overlap{true, true, true, true}));
  EXPECT_EQ(w.model, preset("mixtral-s").model);

  Workload v = preset("mixtral-s");
  TrainingOverrides bad;
  bad.no_distributed_optimizer = true;
  bad.overlap.param_gather = true;
  const Caught e = catch_input_error([&] { apply_overrides(bad, v); });
  EXPECT_EQ(e.where, "--overlap-param-gather") << e.what;
  EXPECT_NE(e.what.find("overlap.param_gather"), std::string::npos) << e.what;
  EXPECT_EQ(v, preset("mixtral-s")) << "a failed override must leave the workload unchanged";
  // A model whose own overlap.param_gather meets --no-distributed-optimizer
  // blames the model.
  Workload m = preset("mixtral-s");
  m.training.overlap.param_gather = true;
  TrainingOverrides no_dist;
  no_dist.no_distributed_optimizer = true;
  EXPECT_EQ(catch_input_error([&] { apply_overrides(no_dist, m); }).where, "--model");
}

TEST(ModelIoOverrides, InvalidWorkloadWithoutOverrideBlamesModel) {
  Workload w = preset("llama2-7b");
  w.training.seq_len = 100000;  // beyond max_positions, not from an override
  TrainingOverrides o;
  o.gamma = 0.5;
  const Caught e = catch_input_error([&] { apply_overrides(o, w); });
  EXPECT_EQ(e.where, "--model");
}

TEST(ModelIoParse, Precision) {
  EXPECT_EQ(parse_precision("bf16", "--precision"), Precision::kBf16);
  EXPECT_EQ(parse_precision("BF16", "--precision"), Precision::kBf16);
  EXPECT_EQ(parse_precision("fp16", "--precision"), Precision::kFp16);
  const Caught e = catch_input_error([] { parse_precision("fp32", "--precision"); });
  EXPECT_EQ(e.where, "--precision");
  EXPECT_NE(e.what.find("\"fp32\""), std::string::npos) << e.what;
  EXPECT_NE(e.what.find("bf16, fp16"), std::string::npos) << e.what;
}

TEST(ModelIoParse, Fp8PrecisionAndRecipe) {
  EXPECT_EQ(parse_precision("fp8", "--precision"), Precision::kFp8);
  EXPECT_EQ(parse_precision("FP8", "--precision"), Precision::kFp8);
  const Caught p = catch_input_error([] { parse_precision("fp4", "--precision"); });
  EXPECT_NE(p.what.find("bf16, fp16, fp8"), std::string::npos) << p.what;
  EXPECT_EQ(parse_fp8_recipe("delayed", "--fp8-recipe"), Fp8Recipe::kDelayed);
  EXPECT_EQ(parse_fp8_recipe("tensorwise", "--fp8-recipe"), Fp8Recipe::kTensorwise);
  EXPECT_EQ(parse_fp8_recipe("blockwise", "--fp8-recipe"), Fp8Recipe::kBlockwise);
  EXPECT_EQ(parse_fp8_recipe("mxfp8", "--fp8-recipe"), Fp8Recipe::kMxfp8);
  EXPECT_EQ(parse_fp8_recipe("Delayed", "--fp8-recipe"), Fp8Recipe::kDelayed);
  const Caught e = catch_input_error([] { parse_fp8_recipe("nvfp4", "--fp8-recipe"); });
  EXPECT_EQ(e.where, "--fp8-recipe");
  EXPECT_NE(e.what.find("\"nvfp4\""), std::string::npos) << e.what;
  EXPECT_NE(e.what.find("delayed, tensorwise, blockwise, mxfp8"), std::string::npos) << e.what;
  // The names written back are the ones read.
  for (Fp8Recipe r :
       {Fp8Recipe::kDelayed, Fp8Recipe::kTensorwise, Fp8Recipe::kBlockwise, Fp8Recipe::kMxfp8}) {
    EXPECT_EQ(parse_fp8_recipe(to_string(r), "x"), r) << to_string(r);
  }
  EXPECT_EQ(parse_precision(to_string(Precision::kFp8), "x"), Precision::kFp8);
}

TEST(ModelIoParse, Dispatcher) {
  EXPECT_EQ(parse_dispatcher("alltoall", "d"), Dispatcher::kAllToAll);
  EXPECT_EQ(parse_dispatcher("All-To-All", "d"), Dispatcher::kAllToAll);
  EXPECT_EQ(parse_dispatcher("allgather", "d"), Dispatcher::kAllGather);
  EXPECT_EQ(parse_dispatcher("all-gather", "d"), Dispatcher::kAllGather);
  EXPECT_EQ(parse_dispatcher("flex", "d"), Dispatcher::kFlex);
  EXPECT_EQ(parse_dispatcher("DeepEP", "d"), Dispatcher::kFlex);
  EXPECT_EQ(parse_dispatcher("AUTO", "d"), Dispatcher::kAuto);
  const Caught e = catch_input_error([] { parse_dispatcher("ring", "--dispatcher"); });
  EXPECT_EQ(e.where, "--dispatcher");
  EXPECT_NE(e.what.find("\"ring\""), std::string::npos) << e.what;
  EXPECT_NE(e.what.find("alltoall"), std::string::npos) << e.what;
  EXPECT_NE(e.what.find("auto"), std::string::npos) << e.what;
}

// ---------------------------------------------------------------------------
// workload_to_json

TEST(ModelIoRoundTrip, EveryPreset) {
  for (const ModelPreset& p : model_presets()) {
    SCOPED_TRACE(p.name);
    const std::string text = workload_to_json(p.workload);
    EXPECT_EQ(parse_workload_json(text, "rt.json"), p.workload) << text;
  }
}

TEST(ModelIoRoundTrip, FixturesAndOddLayerMaps) {
  std::vector<Workload> workloads = {load_fixture("gpt3-1.3b.json"), load_fixture("small-moe.json"),
                                     load_fixture("hf/qwen1.5-moe-a2.7b.json")};
  Json j = base_model();
  j["num_layers"] = 8;
  j["moe"]["layer_freq"] = {1, 1, 0, 1, 0, 0, 1, 1};
  workloads.push_back(parse(j));
  j["moe"]["layer_freq"] = 3;
  j["moe"]["first_dense_layers"] = 2;
  workloads.push_back(parse(j));
  j["moe"]["layer_freq"] = 1;
  j["moe"]["first_dense_layers"] = 7;  // a single MoE layer at the end
  workloads.push_back(parse(j));
  for (const Workload& w : workloads) {
    SCOPED_TRACE(w.model.name);
    const std::string text = workload_to_json(w);
    EXPECT_EQ(parse_workload_json(text, "rt.json"), w) << text;
  }
}

TEST(ModelIoRoundTrip, TrainingOverlap) {
  for (const Overlap& o : {Overlap{}, Overlap{true, false, false, false},
                           Overlap{false, true, false, false}, Overlap{false, false, true, false},
                           Overlap{false, false, false, true}, Overlap{true, true, true, true},
                           Overlap{false, false, false, true, true}}) {
    Workload w = preset("qwen3-30b-a3b");
    w.training.overlap = o;
    const std::string text = workload_to_json(w);
    EXPECT_EQ(parse_workload_json(text, "rt.json"), w) << text;
    const Json out = Json::parse(text).at("training").at("overlap");
    EXPECT_EQ(out, (Json{{"grad_reduce", o.grad_reduce},
                         {"param_gather", o.param_gather},
                         {"tp_comm", o.tp_comm},
                         {"moe_ep_comm", o.moe_ep_comm},
                         {"delay_wgrad", o.delay_wgrad}}))
        << text;
  }
}

// "grad_reduce_in_bf16" is read, written only when on, and round-trips; the
// --grad-reduce-in-bf16 override turns it on.
TEST(ModelIoRoundTrip, GradReduceInBf16) {
  Workload w = preset("qwen3-30b-a3b");
  EXPECT_FALSE(w.training.grad_reduce_in_bf16);
  EXPECT_FALSE(Json::parse(workload_to_json(w)).at("training").contains("grad_reduce_in_bf16"));
  TrainingOverrides ov;
  ov.grad_reduce_in_bf16 = true;
  apply_overrides(ov, w);
  ASSERT_TRUE(w.training.grad_reduce_in_bf16);
  const std::string text = workload_to_json(w);
  EXPECT_EQ(Json::parse(text).at("training").at("grad_reduce_in_bf16"), true);
  EXPECT_EQ(parse_workload_json(text, "rt.json"), w) << text;
}

// "optimizer_offload_fraction" is read, written only when above 0, and
// round-trips; out of [0, 1] or without the distributed optimizer it is
// refused naming the field.
TEST(ModelIoRoundTrip, OptimizerOffloadFraction) {
  Workload w = preset("mixtral-l");
  EXPECT_FALSE(
      Json::parse(workload_to_json(w)).at("training").contains("optimizer_offload_fraction"));
  TrainingOverrides ov;
  ov.optimizer_offload_fraction = 0.75;
  apply_overrides(ov, w);
  ASSERT_EQ(w.training.optimizer_offload_fraction, 0.75);
  const std::string text = workload_to_json(w);
  EXPECT_EQ(Json::parse(text).at("training").at("optimizer_offload_fraction"), 0.75);
  EXPECT_EQ(parse_workload_json(text, "rt.json"), w) << text;
  Json j = Json::parse(text);
  j["training"]["optimizer_offload_fraction"] = 1.5;
  EXPECT_THROW(parse_workload_json(j.dump(), "bad.json"), InputError);
  j["training"]["optimizer_offload_fraction"] = 0.5;
  j["training"]["distributed_optimizer"] = false;
  try {
    parse_workload_json(j.dump(), "bad.json");
    ADD_FAILURE() << "offload without the distributed optimizer was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("optimizer_offload_fraction"), std::string::npos)
        << e.what();
  }
}

// Sliding windows, sinks and QKV biases in a model JSON: window layers from
// window_attn_skip_freq (every N-th layer full) or an explicit list; written
// as the list; round trip.
TEST(ModelIoRoundTrip, AttentionVariants) {
  Workload w = preset("mixtral-s");
  Json j = Json::parse(workload_to_json(w));
  j["sliding_window"] = 512;
  j["window_attn_skip_freq"] = 3;
  j["attention_sinks"] = true;
  j["qkv_bias"] = true;
  const Workload a = parse_workload_json(j.dump(), "a.json");
  EXPECT_EQ(a.model.sliding_window, 512);
  ASSERT_EQ(a.model.window_layers.size(), static_cast<std::size_t>(a.model.num_layers));
  for (int l = 0; l < a.model.num_layers; ++l) {
    EXPECT_EQ(a.model.window_layers[static_cast<std::size_t>(l)], (l + 1) % 3 == 0 ? 0 : 1);
  }
  EXPECT_TRUE(a.model.attention_sinks);
  EXPECT_TRUE(a.model.qkv_bias);
  const std::string text = workload_to_json(a);
  EXPECT_EQ(parse_workload_json(text, "rt.json"), a) << text;
  j.erase("sliding_window");
  EXPECT_THROW(parse_workload_json(j.dump(), "b.json"), InputError);  // skip freq alone
  j["sliding_window"] = 512;
  j.erase("window_attn_skip_freq");
  j["window_layers"] = {1, 0};
  EXPECT_THROW(parse_workload_json(j.dump(), "c.json"), InputError);  // not one per layer
}

// "fsdp" (Megatron-FSDP beyond the distributed optimizer) is read, written
// only when on, and round-trips; an unknown strategy names the field.
TEST(ModelIoRoundTrip, Fsdp) {
  Workload w = preset("qwen3-235b-a22b");
  EXPECT_FALSE(Json::parse(workload_to_json(w)).at("training").contains("fsdp"));
  for (Fsdp f : {Fsdp::kOptimGrads, Fsdp::kOptimGradsParams}) {
    TrainingOverrides ov;
    ov.fsdp = f;
    apply_overrides(ov, w);
    const std::string text = workload_to_json(w);
    EXPECT_EQ(Json::parse(text).at("training").at("fsdp"), to_string(f));
    EXPECT_EQ(parse_workload_json(text, "rt.json"), w) << text;
  }
  EXPECT_EQ(parse_fsdp("zero3", "x"), Fsdp::kOptimGradsParams);
  Json j = Json::parse(workload_to_json(w));
  j["training"]["fsdp"] = "optim_params";
  try {
    parse_workload_json(j.dump(), "bad.json");
    ADD_FAILURE() << "an unknown strategy was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("/training/fsdp"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("optim_params"), std::string::npos) << e.what();
  }
}

// FP8 workloads round-trip with their recipe; "fp8_recipe" is written for
// FP8 only, right after "precision".
TEST(ModelIoRoundTrip, Fp8PrecisionAndRecipe) {
  for (Fp8Recipe r :
       {Fp8Recipe::kDelayed, Fp8Recipe::kTensorwise, Fp8Recipe::kBlockwise, Fp8Recipe::kMxfp8}) {
    for (const char* name : {"mixtral-s", "deepseek-v3", "llama2-7b"}) {
      SCOPED_TRACE(testing::Message() << name << " " << to_string(r));
      Workload w = preset(name);
      w.training.precision = Precision::kFp8;
      w.training.fp8_recipe = r;
      const std::string text = workload_to_json(w);
      EXPECT_EQ(parse_workload_json(text, "rt.json"), w) << text;
      const Json t = Json::parse(text).at("training");
      EXPECT_EQ(t.at("precision"), "fp8");
      EXPECT_EQ(t.at("fp8_recipe"), to_string(r));
      const nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(text);
      std::vector<std::string> keys;
      for (const auto& item : ordered.at("training").items()) keys.push_back(item.key());
      const auto at = std::find(keys.begin(), keys.end(), "precision");
      ASSERT_NE(at, keys.end());
      ASSERT_NE(at + 1, keys.end());
      EXPECT_EQ(*(at + 1), "fp8_recipe");
    }
  }
  for (Precision p : {Precision::kBf16, Precision::kFp16}) {
    Workload w = preset("mixtral-s");
    w.training.precision = p;
    const std::string text = workload_to_json(w);
    EXPECT_FALSE(Json::parse(text).at("training").contains("fp8_recipe")) << text;
    EXPECT_EQ(parse_workload_json(text, "rt.json"), w) << text;
  }
}

TEST(ModelIoRoundTrip, OutputFormat) {
  const std::string ds = workload_to_json(preset("deepseek-v3"));
  EXPECT_EQ(ds.rfind("{\n  \"name\": \"deepseek-v3\",\n  \"num_layers\": 61,", 0), 0u) << ds;
  const Json j = Json::parse(ds);
  EXPECT_EQ(j.at("moe").at("first_dense_layers"), 3);
  EXPECT_FALSE(j.at("moe").contains("layer_freq"));  // "every layer after the dense ones"
  EXPECT_EQ(j.at("mla").at("kv_lora_rank"), 512);
  EXPECT_EQ(j.at("training").at("dispatcher"), "alltoall");

  Json odd = base_model();
  odd["moe"]["layer_freq"] = {1, 0, 1, 1};
  const Json out = Json::parse(workload_to_json(parse(odd)));
  EXPECT_EQ(out.at("moe").at("layer_freq"), Json::array({1, 0, 1, 1}));
  EXPECT_FALSE(out.at("moe").contains("first_dense_layers"));

  const Json dense = Json::parse(workload_to_json(preset("llama2-7b")));
  EXPECT_FALSE(dense.contains("moe"));
  EXPECT_FALSE(dense.contains("mla"));
  EXPECT_EQ(dense.at("mlp"), "swiglu");
  EXPECT_EQ(dense.at("positions"), "rotary");
}

}  // namespace
}  // namespace hapmoe
