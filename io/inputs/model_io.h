// Reading models: built-in presets, Hugging Face config.json files and the
// project's own model JSON (docs/models.md). The kind of file is recognised
// from its content.
#pragma once

#include <optional>
#include <span>
#include <string>

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
// value on any problem. The result is validated.
Workload load_workload(const std::string& spec);

// Parses JSON text (either kind), `origin` names it in messages.
Workload parse_workload_json(const std::string& text, const std::string& origin);

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
  // Overlaps to turn on (Megatron's flags of the same names); never off.
  Overlap overlap;
};

// Applies the overrides and re-validates; throws InputError naming the
// option (e.g. "--seq-len") when the result is inconsistent.
void apply_overrides(const TrainingOverrides& overrides, Workload& workload);

Precision parse_precision(const std::string& text, const std::string& where);
Fp8Recipe parse_fp8_recipe(const std::string& text, const std::string& where);
Dispatcher parse_dispatcher(const std::string& text, const std::string& where);

// The workload as the project's own JSON (round-trips through
// parse_workload_json).
std::string workload_to_json(const Workload& workload);

}  // namespace hapmoe
