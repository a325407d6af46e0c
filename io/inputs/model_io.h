// Reading models: built-in presets, Hugging Face config.json files and the
// project's own model JSON (docs/models.md). The kind of file is recognised
// from its content.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "costmodel/model.h"

namespace hapmoe {

struct ModelPreset {
  std::string name;         // e.g. "mixtral-s"
  std::string description;  // one line
  std::string source;       // where the figures come from
  Workload workload;        // model + default training settings
};

std::span<const ModelPreset> model_presets();
// Case-insensitive; nullptr if unknown.
const ModelPreset* find_model_preset(const std::string& name);

// --model: a preset name, or a path to a Hugging Face config.json or a
// hapmoe model JSON. Throws InputError naming the file, JSON pointer and
// value on any problem, and for a model the cost model cannot represent
// (hybrid Mamba/linear-attention layers, DeepSeek sparse attention, a
// multimodal config with a nested text_config; docs/models.md, "Refused
// and approximated"). The result is validated.
//
// `notes` (when given) receives one line per approximation the reader
// made, without the file name (e.g. an unknown model_type read with the
// Llama-style keys, sliding-window layers costed as full attention); the
// command line prints them as "note: FILE: ...". Presets and hapmoe model
// JSON give none.
Workload load_workload(const std::string& spec, std::vector<std::string>* notes = nullptr);

// Parses JSON text (either kind), `origin` names it in messages.
Workload parse_workload_json(const std::string& text, const std::string& origin,
                             std::vector<std::string>* notes = nullptr);

// Command-line overrides of the training settings, applied after loading.
struct TrainingOverrides {
  std::optional<int> seq_len;
  std::optional<int> global_batch;
  std::optional<int> micro_batch;
  std::optional<Precision> precision;
  std::optional<Fp8Recipe> fp8_recipe;
  std::optional<Dispatcher> dispatcher;
  std::optional<double> imbalance;
  std::optional<double> gamma;
  bool no_distributed_optimizer = false;
  bool grad_reduce_in_bf16 = false;  // turn on (never off)
  std::optional<double> optimizer_offload_fraction;
  std::optional<Fsdp> fsdp;
  std::optional<int> activation_offload_layers;
  // Overlaps to turn on (Megatron's flags of the same names); never off.
  Overlap overlap;
};

// Applies the overrides and re-validates; throws InputError naming the
// option (e.g. "--seq-len") when the result is inconsistent.
void apply_overrides(const TrainingOverrides& overrides, Workload& workload);

Precision parse_precision(const std::string& text, const std::string& where);
Fp8Recipe parse_fp8_recipe(const std::string& text, const std::string& where);
Dispatcher parse_dispatcher(const std::string& text, const std::string& where);
Fsdp parse_fsdp(const std::string& text, const std::string& where);

// The workload as the project's own JSON (round-trips through
// parse_workload_json).
std::string workload_to_json(const Workload& workload);

}  // namespace hapmoe
