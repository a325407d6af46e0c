// Megatron-LM's parallel settings as one value, the constraints Megatron
// enforces on them (REFERENCE.md §3.2) and the `--pipeline-model-parallel-
// layout` syntax (§3.3). Shared by the script reader (a user's settings:
// violations are input errors) and the launcher writer (hapmoe's settings:
// a violation is a bug in hapmoe).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace hapmoe {

// What Megatron-LM sees of one job: the model facts its checks read and the
// parallel, batch and recomputation flags.
struct MegatronSettings {
  // Model facts (from the model flags).
  int num_layers = 0;
  int mtp_layers = 0;  // --mtp-num-layers
  int num_heads = 0;
  int num_query_groups = 0;  // = num_heads without GQA
  int num_experts = 0;       // 0: dense
  int seq_length = 0;
  int max_position_embeddings = 0;
  bool fp16 = false;
  bool bias_linear = true;  // Megatron's default; --disable-bias-linear turns it off
  // Parallel degrees.
  int world_size = 0;
  int tp = 1;
  int pp = 1;
  int cp = 1;
  int ep = 1;
  int etp = 1;  // --expert-tensor-parallel-size (Megatron's default is TP)
  bool sequence_parallel = false;
  // Pipeline split: at most one way (checked).
  std::optional<int> first_stage_layers;  // --decoder-first-pipeline-num-layers
  std::optional<int> last_stage_layers;   // --decoder-last-pipeline-num-layers
  std::string layout;                     // --pipeline-model-parallel-layout
  bool account_for_embedding = false;
  bool account_for_loss = false;
  std::optional<int> vpp_layers;  // --num-layers-per-virtual-pipeline-stage
  std::optional<int> vpp_stages;  // --num-virtual-stages-per-pipeline-rank
  // Recomputation.
  std::string recompute_granularity;  // "", "full", "selective"
  std::string recompute_method;       // "", "uniform", "block"
  std::optional<int> recompute_num_layers;
  std::vector<std::string> recompute_modules;  // empty: Megatron's default core_attn
  // Batch and optimizer.
  int micro_batch = 0;
  int global_batch = 0;
  bool distributed_optimizer = false;
  bool overlap_param_gather = false;

  int dp() const {
    const long long group = static_cast<long long>(tp) * pp * cp;
    return group > 0 ? static_cast<int>(world_size / group) : 0;
  }
  // Virtual pipeline stages per rank: --num-virtual-stages-per-pipeline-rank,
  // else layers per stage / --num-layers-per-virtual-pipeline-stage, else a
  // layout's stages / PP, else 1.
  int vpp() const;
  bool operator==(const MegatronSettings&) const = default;
};

// One stage of an expanded layout: counts of its symbols.
struct LayoutStage {
  int embedding = 0;  // E
  int decoder = 0;    // t
  int mtp = 0;        // m
  int loss = 0;       // L
  bool operator==(const LayoutStage&) const = default;
};

// Expands a layout string (`x*n`, `(...)*n`, `|`, cosmetic commas). Returns
// "" and fills `stages`, or a message on a syntax error. Repeats are bounded
// so a hostile layout cannot blow up.
std::string parse_pipeline_layout(const std::string& layout, std::vector<LayoutStage>& stages);

// The layer counts of the PP x v stages of an interleaved layout, in the
// layout's order (virtual stage 0 of every rank, then virtual stage 1, ...):
// rank i's `stage_layers[i]` layers split as evenly as possible over its v
// virtual stages, the larger ones first (a virtual stage may be empty).
std::vector<int> interleaved_stage_layers(const std::vector<int>& stage_layers, int vpp);

// The layout string for per-stage decoder layer counts: "Et*4|t*5|t*4,L".
// `mtp_layers` m layers go with L in the last stage.
std::string make_pipeline_layout(const std::vector<int>& stage_layers, int mtp_layers);

// Every constraint of REFERENCE.md §3.2 and layout rule of §3.3 that `s`
// violates, each message naming the rule ("§3.2.4") and the flags. Empty
// when Megatron-LM accepts the settings.
std::vector<std::string> check_megatron_settings(const MegatronSettings& s);

// Decoder layers per pipeline rank as Megatron builds them from the split
// flags (layout summed over virtual stages; first/last; even split with the
// embedding/loss accounted). Requires check_megatron_settings() to pass.
std::vector<int> megatron_stage_layers(const MegatronSettings& s);

}  // namespace hapmoe
