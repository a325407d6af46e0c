// The launcher writer. Order of work: express the plan in Megatron's terms
// (uniform recomputation priced with the cost model), check the settings
// against every Megatron rule and against the plan's layer split, place
// stages on nodes in rank order, then write the text. Nothing is written
// unless every check passed.
#include "io/megatron/megatron_launcher.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <iomanip>
#include <set>
#include <sstream>
#include <utility>

#include "costmodel/errors.h"
#include "costmodel/text.h"
#include "io/inputs/json_strict.h"
#include "io/megatron/megatron_flags.h"
#include "io/report/report.h"
#include "partition/constraints.h"

namespace hapmoe {

namespace {

std::string join(const std::vector<std::string>& items, const char* sep = ", ") {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : sep) + s;
  return out;
}

// The recompute modules a model's layers have: Megatron rejects moe_act
// without grouped experts, and the MoE modules cost nothing in a dense model.
unsigned modules_of(const ModelSpec& model) {
  unsigned all = 0;
  for (int i = 0; i < kNumRecomputeModules; ++i) all |= module_bit(static_cast<RecomputeModule>(i));
  if (!model.is_moe()) {
    all &= ~(module_bit(RecomputeModule::kMoeAct) | module_bit(RecomputeModule::kMoe) |
             module_bit(RecomputeModule::kSharedExperts));
  }
  if (!model.mla.enabled()) all &= ~module_bit(RecomputeModule::kMlaUpProj);
  return all;
}

// The plan with each selective stage's modules cut to those the model has.
Plan relevant_modules(Plan plan, const ModelSpec& model) {
  for (StagePlan& st : plan.stages) {
    if (st.recompute.kind == RecomputeKind::kSelective) st.recompute.modules &= modules_of(model);
  }
  return plan;
}

void apply_setting(const RecomputeSetting& r, const ModelSpec& model, MegatronSettings& s) {
  set_megatron_recompute(r, modules_of(model), s);
}

Plan with_setting(const Plan& plan, const MegatronSettings& s) {
  Plan p = plan;
  for (StagePlan& st : p.stages) {
    st.recompute = megatron_stage_recompute(s, st.layers);
    if (st.recompute.kind == RecomputeKind::kFull && st.recompute.layers == 0) {
      st.recompute = {RecomputeKind::kNone, 0};
    }
  }
  return p;
}

std::string node_name(const std::string& device, int index) {
  std::string out;
  for (char c : device) {
    out += std::isalnum(static_cast<unsigned char>(c)) != 0
               ? static_cast<char>(std::tolower(static_cast<unsigned char>(c)))
               : '-';
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "-node-%03d", index);
  return out + buf;
}

// Text for a comment line: every name, path and note written in a comment
// goes through here, so a line break (or any control character) in one
// cannot end the comment and start a command. Names with control
// characters are refused on input (check_name_text); this holds whatever
// reaches the launcher.
std::string comment_safe(const std::string& s) { return escape_control_characters(s); }

// A word of the script as the launcher writes it: its value, or its source
// where the value is known only at run time or is a default the
// environment may replace (${VAR:-default} stays a default) or a variable
// whose value depends on a branch (ShellWord::varies: the launcher defines
// it as the script does).
std::string word_text(const ShellWord& w) {
  return w.known && !w.defaulted && !w.varies ? shell_quote(w.text) : w.source;
}

// Flags whose values hapmoe sets from the plan and the training settings.
bool owned_by_hapmoe(const std::string& name) {
  static const std::set<std::string> kNames = {"--seq-length",
                                               "--encoder-seq-length",
                                               "--bf16",
                                               "--fp16",
                                               "--use-distributed-optimizer",
                                               "--fp8-format",
                                               "--grad-reduce-in-bf16",
                                               "--optimizer-cpu-offload",
                                               "--optimizer-offload-fraction",
                                               "--use-precision-aware-optimizer",
                                               "--use-megatron-fsdp",
                                               "--data-parallel-sharding-strategy",
                                               "--fp8-recipe",
                                               "--moe-token-dispatcher-type",
                                               "--moe-enable-deepep"};
  return is_parallel_flag(name) || kNames.count(name) > 0;
}

// "[0]*3+[1]*58" for a layer map, "1" when every layer is MoE.
std::string layer_freq_expr(const std::vector<std::uint8_t>& map) {
  std::string out;
  std::size_t i = 0;
  while (i < map.size()) {
    std::size_t j = i;
    while (j < map.size() && map[j] == map[i]) ++j;
    out += (out.empty() ? "" : "+") + std::string("[") + (map[i] ? "1" : "0") + "]*" +
           std::to_string(j - i);
    i = j;
  }
  return "(" + out + ")";
}

// Model and training flags written from the model (no user script).
std::vector<std::string> model_flags(const Workload& w) {
  const ModelSpec& m = w.model;
  std::vector<std::string> f;
  auto add = [&](const std::string& name, const std::string& value = "") {
    f.push_back(value.empty() ? name : name + " " + value);
  };
  add("--num-layers", std::to_string(m.num_layers));
  add("--hidden-size", std::to_string(m.hidden));
  add("--ffn-hidden-size", std::to_string(m.ffn_hidden > 0 ? m.ffn_hidden : m.expert_ffn_hidden));
  add("--num-attention-heads", std::to_string(m.num_heads));
  if (m.mla.enabled()) {
    add("--multi-latent-attention");
    if (m.mla.q_lora_rank > 0) add("--q-lora-rank", std::to_string(m.mla.q_lora_rank));
    add("--kv-lora-rank", std::to_string(m.mla.kv_lora_rank));
    add("--qk-head-dim", std::to_string(m.mla.qk_nope_head_dim));
    add("--qk-pos-emb-head-dim", std::to_string(m.mla.qk_rope_head_dim));
    add("--v-head-dim", std::to_string(m.mla.v_head_dim));
  } else {
    if (m.num_kv_heads != m.num_heads) {
      add("--group-query-attention");
      add("--num-query-groups", std::to_string(m.num_kv_heads));
    }
    if (m.hidden % m.num_heads != 0 || m.head_dim != m.hidden / m.num_heads) {
      add("--kv-channels", std::to_string(m.head_dim));
    }
  }
  add("--max-position-embeddings", std::to_string(std::max(m.max_positions, w.training.seq_len)));
  add("--position-embedding-type",
      m.positions == PositionKind::kRotary ? "rope" : "learned_absolute");
  if (m.mlp == MlpKind::kSwiGlu) add("--swiglu");
  if (!m.tied_embeddings) add("--untie-embeddings-and-output-weights");
  add("--normalization", "RMSNorm");
  add("--disable-bias-linear");
  if (m.is_moe()) {
    add("--num-experts", std::to_string(m.num_experts));
    add("--moe-router-topk", std::to_string(m.top_k));
    add("--moe-ffn-hidden-size", std::to_string(m.expert_ffn_hidden));
    if (m.shared_expert_ffn_hidden > 0) {
      add("--moe-shared-expert-intermediate-size", std::to_string(m.shared_expert_ffn_hidden));
    }
    if (m.num_moe_layers() != m.num_layers) {
      add("--moe-layer-freq", shell_quote(layer_freq_expr(m.moe_layers)));
    }
    add("--moe-grouped-gemm");
  }
  if (m.qkv_bias) add("--add-qkv-bias");
  if (m.mtp_layers > 0) add("--mtp-num-layers", std::to_string(m.mtp_layers));
  if (m.attention_sinks) add("--softmax-type", "learnable");
  if (m.sliding_window > 0) {
    add("--window-size", std::to_string(m.sliding_window) + ",0");
    // One full layer every N (Megatron's integer form) when the layers say
    // so, else the per-layer list.
    int every = 0;
    for (int n = 1; n <= m.num_layers && every == 0; ++n) {
      bool match = true;
      for (int l = 0; l < m.num_layers && match; ++l) {
        match = m.window_layers[static_cast<std::size_t>(l)] == ((l + 1) % n == 0 ? 0 : 1);
      }
      if (match) every = n;
    }
    const bool all_windowed =
        std::all_of(m.window_layers.begin(), m.window_layers.end(), [](auto v) { return v == 1; });
    if (every > 0) {
      add("--window-attn-skip-freq", std::to_string(every));
    } else if (!all_windowed) {
      std::string list;
      for (auto v : m.window_layers) list += (list.empty() ? "" : ",") + std::to_string(v);
      add("--window-attn-skip-freq", shell_quote(list));
    }
  }
  // NullTokenizer's vocabulary is --vocab-size plus its EOD token.
  add("--vocab-size", std::to_string(m.vocab - 1));
  if (m.vocab_divisible_by != ModelSpec{}.vocab_divisible_by) {
    add("--make-vocab-size-divisible-by", std::to_string(m.vocab_divisible_by));
  }
  add("--tokenizer-type", "NullTokenizer");
  add("--mock-data");
  add("--train-iters", "100");
  add("--lr", "1.0e-4");
  return f;
}

}  // namespace

Plan express_recompute(const Plan& plan, const CostModel& model, MegatronSettings& s) {
  const ModelSpec& m = model.workload().model;
  // One setting that reproduces every stage?
  bool all_none = true, all_sel = true, all_full = true;
  int k_max = 0;
  for (const StagePlan& st : plan.stages) {
    all_none = all_none && st.recompute.kind == RecomputeKind::kNone;
    all_sel = all_sel && st.recompute.kind == RecomputeKind::kSelective;
    all_full = all_full && st.recompute.kind == RecomputeKind::kFull;
    if (st.recompute.kind == RecomputeKind::kFull) k_max = std::max(k_max, st.recompute.layers);
  }
  if (all_none || all_sel || all_full) {
    const RecomputeSetting r{all_none  ? RecomputeKind::kNone
                             : all_sel ? RecomputeKind::kSelective
                                       : RecomputeKind::kFull,
                             k_max, plan.stages.front().recompute.modules};
    apply_setting(r, m, s);
    if (with_setting(plan, s) == relevant_modules(plan, m)) return with_setting(plan, s);
  }
  // Otherwise the best expressible uniform setting.
  std::vector<RecomputeSetting> candidates = {
      {RecomputeKind::kNone},
      {RecomputeKind::kSelective, 0, default_selective_modules(model.workload().training)}};
  std::set<int> ks;
  std::set<unsigned> module_sets;
  int max_layers = 0;
  for (const StagePlan& st : plan.stages) {
    if (st.recompute.kind == RecomputeKind::kFull) ks.insert(st.recompute.layers);
    if (st.recompute.kind == RecomputeKind::kSelective &&
        st.recompute.modules != default_selective_modules(model.workload().training)) {
      module_sets.insert(st.recompute.modules);
    }
    max_layers = std::max(max_layers, st.layers);
  }
  for (unsigned mods : module_sets) candidates.push_back({RecomputeKind::kSelective, 0, mods});
  ks.insert(max_layers);
  for (int k : ks) candidates.push_back({RecomputeKind::kFull, k});
  int best = -1;
  double best_latency = 0;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    MegatronSettings trial = s;
    apply_setting(candidates[i], m, trial);
    const PlanReport r = model.evaluate(with_setting(plan, trial));
    if (r.fits && (best < 0 || r.latency_s < best_latency)) {
      best = static_cast<int>(i);
      best_latency = r.latency_s;
    }
  }
  if (best < 0) best = static_cast<int>(candidates.size()) - 1;  // saves the most memory
  apply_setting(candidates[static_cast<std::size_t>(best)], m, s);
  return with_setting(plan, s);
}

HostsByDevice parse_launcher_hosts(const std::string& text, const std::string& origin) {
  HostsByDevice out;
  std::istringstream in(text);
  std::string line;
  std::set<std::string> seen;
  for (int n = 1; std::getline(in, line); ++n) {
    if (const auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::string host, device, extra;
    if (!(words >> host)) continue;
    if (!(words >> device) || (words >> extra)) {
      throw InputError(origin + ":" + std::to_string(n),
                       "expected \"HOST DEVICE\" (e.g. \"gpu-a-01 H800\"), got \"" + line + "\"");
    }
    for (const auto& [field, word] : {std::pair<const char*, const std::string&>{"host name", host},
                                      {"device type name", device}}) {
      if (auto e = check_name_text(field, word); !e.empty()) {
        throw InputError(origin + ":" + std::to_string(n), e);
      }
    }
    if (!seen.insert(host).second) {
      throw InputError(origin + ":" + std::to_string(n), "host " + host + " is listed twice");
    }
    const DeviceSpec* known = find_device(device);
    out[to_lower(known ? known->name : device)].push_back(host);
  }
  return out;
}

void check_launcher_hosts(const HostsByDevice& hosts, const ClusterSpec& cluster) {
  for (const auto& entry : hosts) {
    const std::string& device = entry.first;
    const std::vector<std::string>& names = entry.second;
    const bool in_cluster = std::any_of(cluster.pools.begin(), cluster.pools.end(),
                                        [&](auto& p) { return to_lower(p.device.name) == device; });
    if (!in_cluster) {
      throw InputError("--launcher-hosts", "host " + names.front() + " has device type \"" +
                                               device + "\", which is not in the cluster");
    }
  }
  if (hosts.empty()) return;
  for (const DevicePool& pool : cluster.pools) {
    const auto named = hosts.find(to_lower(pool.device.name));
    const std::size_t listed = named == hosts.end() ? 0 : named->second.size();
    if (listed < static_cast<std::size_t>(pool.nodes)) {
      throw InputError("--launcher-hosts",
                       "lists " + std::to_string(listed) + " " + pool.device.name +
                           " host(s), but the cluster has " + std::to_string(pool.nodes) + " " +
                           pool.device.name +
                           " nodes and a plan may use each: list one host per node, or give a "
                           "smaller --cluster");
    }
  }
}

int launcher_expert_tp(const MegatronScript* script, const Workload& w) {
  const bool biased = script != nullptr && !script->has("--disable-bias-linear");
  return w.model.is_moe() && biased ? 1 : 0;
}

Launcher make_megatron_launcher(const PlanReport& report, const CostModel& model,
                                const MegatronScript* script, const std::string& hapmoe_version,
                                const HostsByDevice& hosts) {
  const Workload& w = model.workload();
  const ClusterSpec& cluster = model.cluster();
  const Plan& plan = report.plan;
  const ParallelConfig& pi = plan.parallel;
  Launcher out;
  out.planned_latency_s = report.latency_s;

  // 1. The settings Megatron will see.
  MegatronSettings& s = out.settings;
  s.num_layers = w.model.num_layers;
  s.num_heads = w.model.num_heads;
  s.num_query_groups = w.model.mla.enabled() ? 0 : w.model.num_kv_heads;
  s.num_experts = w.model.num_experts;
  s.seq_length = w.training.seq_len;
  s.max_position_embeddings = std::max(w.model.max_positions, w.training.seq_len);
  s.fp16 = w.training.precision == Precision::kFp16;
  s.bias_linear = script ? !script->has("--disable-bias-linear") : false;
  s.mtp_layers = w.model.mtp_layers;
  if (script) {
    // The script's own value (the model's max positions came from it).
    s.max_position_embeddings = w.model.max_positions;
  }
  s.world_size = pi.devices();
  s.tp = pi.tp;
  s.pp = pi.pp;
  s.cp = pi.cp;
  s.ep = pi.ep;
  s.etp = pi.tpe;
  s.sequence_parallel = pi.tp > 1;
  s.micro_batch = pi.micro_batch;
  s.global_batch = w.training.global_batch;
  s.distributed_optimizer = w.training.distributed_optimizer;
  s.overlap_param_gather =
      w.training.distributed_optimizer &&
      (w.training.overlap.param_gather || (script && script->has("--overlap-param-gather")));
  if (script && script->has("--overlap-param-gather") && !s.overlap_param_gather) {
    out.notes.emplace_back(
        "--overlap-param-gather is dropped: it needs the distributed optimizer, "
        "which is off");
  }
  if (w.training.overlap.tp_comm && pi.tp == 1) {
    out.notes.emplace_back("--tp-comm-overlap is dropped: the plan has no tensor parallelism");
  }
  if (w.training.overlap.moe_ep_comm && pi.ep == 1) {
    out.notes.emplace_back(
        std::string(w.training.overlap.delay_wgrad
                        ? "--overlap-moe-expert-parallel-comm and --delay-wgrad-compute are"
                        : "--overlap-moe-expert-parallel-comm is") +
        " dropped: the plan has no expert parallelism");
  }
  if (launcher_expert_tp(script, w) == 1 && pi.tpe != 1) {
    throw InputError("--launcher",
                     "the plan uses expert tensor parallelism " + std::to_string(pi.tpe) +
                         " but the script's linear layers have biases (no --disable-bias-linear), "
                         "and Megatron-LM then requires --expert-tensor-parallel-size 1 "
                         "(REFERENCE.md §3.2.13); add --disable-bias-linear to the script");
  }
  // Layer split: even, first/last, or a layout; with virtual stages,
  // --num-virtual-stages-per-pipeline-rank when every rank's layers split
  // evenly into them, else a layout of PP x v stages.
  std::vector<int> layers;
  for (const StagePlan& st : plan.stages) layers.push_back(st.layers);
  const bool even =
      std::all_of(layers.begin(), layers.end(), [&](int n) { return n == layers.front(); });
  if (pi.vpp > 1) {
    if (even && layers.front() % pi.vpp == 0 && s.mtp_layers == 0) {
      s.vpp_stages = pi.vpp;
    } else {
      s.layout = make_pipeline_layout(interleaved_stage_layers(layers, pi.vpp), s.mtp_layers);
    }
  } else if (!even) {
    bool first_last = false;
    if (pi.pp == 2) {
      first_last = true;
      s.first_stage_layers = layers.front();
      s.last_stage_layers = layers.back();
    } else if (pi.pp > 2) {
      const int mid = layers[1];
      if (std::all_of(layers.begin() + 1, layers.end() - 1, [&](int n) { return n == mid; })) {
        first_last = true;
        if (layers.front() != mid) s.first_stage_layers = layers.front();
        if (layers.back() != mid) s.last_stage_layers = layers.back();
      }
    }
    if (!first_last || s.mtp_layers > 0) {
      s.first_stage_layers.reset();
      s.last_stage_layers.reset();
      s.layout = make_pipeline_layout(layers, s.mtp_layers);
    }
  }
  // Recomputation.
  out.plan = express_recompute(plan, model, s);
  const PlanReport launched = model.evaluate(out.plan);
  out.launched_latency_s = launched.latency_s;
  out.launched_fits = launched.fits;
  if (!(out.plan == relevant_modules(plan, w.model))) {
    std::string per_stage;
    for (std::size_t i = 0; i < plan.stages.size(); ++i) {
      per_stage += (i ? ", " : "") + to_string(plan.stages[i].recompute, plan.stages[i].layers);
    }
    char pct[32];
    std::snprintf(pct, sizeof pct, "%+.2f%%",
                  (launched.latency_s - report.latency_s) / report.latency_s * 100.0);
    out.notes.push_back(
        "per-stage recomputation (" + per_stage +
        ") cannot be expressed in stock Megatron-LM (one setting per job); the "
        "closest uniform setting " +
        (s.recompute_granularity.empty()
             ? std::string("none")
             : s.recompute_granularity + (s.recompute_num_layers
                                              ? " block " + std::to_string(*s.recompute_num_layers)
                                              : std::string())) +
        " is predicted at " + format_seconds(launched.latency_s) + " per iteration vs " +
        format_seconds(report.latency_s) + " for the plan (" + pct + ")" +
        (launched.fits ? "" : "; it does NOT fit in memory on every stage"));
  }
  if (w.training.activation_offload_layers > 0) {
    out.notes.push_back(
        "activation offload of " + std::to_string(w.training.activation_offload_layers) +
        " layers has no Megatron-LM core_v0.15.0 command-line flag: set Megatron-Core's "
        "TransformerConfig cpu_offloading=True, cpu_offloading_num_layers=" +
        std::to_string(w.training.activation_offload_layers) +
        " (e.g. through Megatron-Bridge); the script as written runs without it");
  }
  // An entry point of another project (Pai-Megatron-Patch's
  // pretrain_qwen.py, ...) parses flags of its own on top of Megatron's:
  // those are kept, with a note, not refused.
  if (script != nullptr) check_launcher_flags(*script);
  if (script != nullptr && has_own_entry_point(*script)) {
    std::vector<std::string> foreign;
    for (const MegatronFlag& f : script->flags) {
      if (!f.name.empty() && !is_megatron_flag(f.name) &&
          std::find(foreign.begin(), foreign.end(), f.name) == foreign.end()) {
        foreign.push_back(f.name);
      }
    }
    if (!foreign.empty()) {
      out.notes.push_back(join(foreign) +
                          (foreign.size() > 1 ? " are not flags" : " is not a flag") +
                          " of Megatron-LM " + kMegatronVersion + "; kept for " +
                          script->shell.launch.entry.text + ", whose own parser takes them");
    }
  }
  if (w.training.dispatcher == Dispatcher::kAuto && w.model.is_moe()) {
    out.notes.emplace_back(
        "the dispatcher was chosen per plan (auto); the launcher writes the "
        "one chosen for the first stage");
  }

  // 2. Check: a violation is a bug in hapmoe.
  if (const auto v = check_megatron_settings(s); !v.empty()) {
    throw ContractError(
        "make_megatron_launcher: hapmoe built settings that Megatron-LM rejects "
        "(a bug in hapmoe): " +
        join(v, "; "));
  }
  if (megatron_stage_layers(s) != layers) {
    throw ContractError(
        "make_megatron_launcher: the split flags do not reproduce the plan's "
        "layers per stage (a bug in hapmoe)");
  }
  if (!(with_setting(out.plan, s) == out.plan)) {
    throw ContractError(
        "make_megatron_launcher: the recomputation flags do not reproduce the "
        "launched plan (a bug in hapmoe)");
  }

  // 3. Placement (partition/constraints.h, place_stages): nodes in stage
  //    order, each holding ranks of one device type only.
  check_launcher_hosts(hosts, cluster);
  std::vector<int> stage_types;
  for (const StagePlan& st : plan.stages) stage_types.push_back(st.device_type);
  const Placement placed = place_stages(cluster, pi.stage_devices(), stage_types);
  if (!placed.ok()) {
    const ConstraintOptions placing{.launcher_placement = true};
    throw InputError("--launcher", check_plan(plan, w, cluster, placing));
  }
  for (const Placement::Node& node : placed.nodes) {
    const DevicePool& pool = cluster.pools[static_cast<std::size_t>(node.type)];
    const auto named = hosts.find(to_lower(pool.device.name));
    if (!hosts.empty() &&
        (named == hosts.end() || node.index >= static_cast<int>(named->second.size()))) {
      throw InputError("--launcher-hosts",
                       "lists " + std::to_string(named == hosts.end() ? 0 : named->second.size()) +
                           " " + pool.device.name + " hosts; the plan needs " +
                           std::to_string(node.index + 1) + " or more");
    }
    out.nodes.push_back(hosts.empty() ? node_name(pool.device.name, node.index)
                                      : named->second[static_cast<std::size_t>(node.index)]);
    out.node_procs.push_back(node.procs);
  }
  const int per_stage = pi.stage_devices();
  std::vector<std::string> stage_nodes(plan.stages.size());
  for (std::size_t i = 0; i < plan.stages.size(); ++i) {
    std::set<std::string> used;
    for (const int k : placed.stages[i]) used.insert(out.nodes[static_cast<std::size_t>(k)]);
    stage_nodes[i] = join({used.begin(), used.end()}, " ");
  }

  // 4. The text.
  std::ostringstream t;
  const std::string entry = script && script->shell.has_command
                                ? word_text(script->shell.launch.entry)
                                : std::string("pretrain_gpt.py");
  t << "#!/bin/bash\n";
  t << "# Megatron-LM launcher written by hapmoe " << hapmoe_version << " for Megatron-LM "
    << kMegatronVersion << " (NVIDIA/Megatron-LM tag " << kMegatronVersion << ").\n";
  t << "# Model: " << comment_safe(w.model.name)
    << (script ? " (flags read from " + comment_safe(script->origin()) + ")" : "") << "\n";
  t << "# Cluster: " << comment_safe(cluster.name) << "\n";
  t << "# Plan: PP=" << pi.pp << " TP=" << pi.tp << " CP=" << pi.cp << " EP=" << pi.ep
    << " ETP=" << pi.tpe << " DP=" << pi.dp << ", micro-batch " << pi.micro_batch
    << ", global batch " << w.training.global_batch << " (" << launched.num_microbatches
    << " micro-batches), " << s.world_size << " processes\n";
  t << "# Predicted iteration latency: " << format_seconds(launched.latency_s);
  if (!(out.plan == plan))
    t << " as launched (the plan as searched: " << format_seconds(report.latency_s) << ")";
  t << "; throughput " << std::fixed << std::setprecision(0) << launched.throughput_tokens_per_s
    << " tokens/s; MFU " << std::setprecision(1) << launched.mfu * 100.0 << "%\n";
  t << "#\n";
  t << "#  stage  device    ranks            layers  recompute   memory / capacity        nodes\n";
  for (std::size_t i = 0; i < launched.stages.size(); ++i) {
    const StageReport& st = launched.stages[i];
    // Sized for the names: a cut line would lose its line break.
    const std::string device =
        comment_safe(cluster.pools[static_cast<std::size_t>(st.device_type)].device.name);
    const std::string nodes = comment_safe(stage_nodes[i]);
    std::vector<char> line(256 + device.size() + nodes.size());
    const long long r0 = static_cast<long long>(i) * per_stage;
    std::snprintf(
        line.data(), line.size(), "#  %5zu  %-8s  %6lld..%-6lld  %6d  %-10s  %9s / %-9s %s  %s\n",
        i, device.c_str(), r0, r0 + per_stage - 1, st.layers,
        to_string(st.recompute, st.layers).c_str(), format_bytes(st.cost.memory.total()).c_str(),
        format_bytes(st.cost.capacity_bytes).c_str(), st.cost.fits() ? "  " : "!!", nodes.c_str());
    t << line.data();
  }
  t << "#\n";
  t << "# Rank order: Megatron-LM orders ranks tp-cp-ep-dp-pp, so pipeline stage i holds the\n"
       "# global ranks [i*S, (i+1)*S) with S = TP*CP*DP = "
    << per_stage
    << ". torchrun numbers ranks node by node in\n"
       "# --node-rank order, so NODE_HOSTS lists the nodes in that order: every stage lands on\n"
       "# nodes of its device type. "
    << (hosts.empty() ? "Node names are placeholders: replace them with your hosts\n"
                        "# (same order, same device types) and run"
                      : "Hosts are from --launcher-hosts. Run")
    << " this script once on every node: a node finds its index in\n"
       "# NODE_HOSTS from its short host name (or set NODE_RANK). Under Slurm, for example:\n"
       "#   srun --nodes="
    << out.nodes.size() << " --ntasks-per-node=1 --nodelist=" << comment_safe(join(out.nodes, ","))
    << " bash THIS_SCRIPT\n";
  t << "#\n# What stock Megatron-LM cannot express:\n";
  t << "#  - device types: Megatron has no notion of them; the plan's device type per stage is\n"
       "#    realised only by the rank order above. A job spanning accelerator vendors also needs\n"
       "#    a collective library that spans them, which stock PyTorch does not provide.\n";
  t << "#  - cost-model inputs without a flag: router imbalance " << w.training.imbalance
    << ", gamma " << w.training.gamma << ".\n";
  for (const std::string& n : out.notes) {
    std::string wrapped = "#  - ";
    std::size_t col = wrapped.size();
    std::istringstream words(comment_safe(n));
    std::string word;
    bool first = true;
    while (words >> word) {
      if (!first && col + 1 + word.size() > 98) {
        wrapped += "\n#    ";
        col = 5;
      } else if (!first) {
        wrapped += " ";
        ++col;
      }
      wrapped += word;
      col += word.size();
      first = false;
    }
    t << wrapped << "\n";
  }
  t << "\nset -eo pipefail\n\n";
  // Node table.
  std::vector<std::string> stage_devices;
  for (const StagePlan& st : out.plan.stages) {
    stage_devices.push_back(
        shell_quote(cluster.pools[static_cast<std::size_t>(st.device_type)].device.name));
  }
  std::vector<std::string> quoted_nodes, procs;
  for (std::size_t i = 0; i < out.nodes.size(); ++i) {
    quoted_nodes.push_back(shell_quote(out.nodes[i]));
    procs.push_back(std::to_string(out.node_procs[i]));
  }
  t << "# Device type of each pipeline stage (read back by hapmoe --megatron-script).\n";
  t << "HAPMOE_STAGE_DEVICES=(" << join(stage_devices, " ") << ")\n";
  t << "NODE_HOSTS=(" << join(quoted_nodes, " ") << ")\n";
  t << "NODE_GPUS=(" << join(procs, " ") << ")\n";
  t << "NNODES=" << out.nodes.size() << "\n";
  t << "WORLD_SIZE=" << s.world_size << "\n";
  // This node's index: NODE_RANK if set, else its host name's place in
  // NODE_HOSTS, else Slurm's node id, else 0.
  std::vector<std::string> index_entries;
  for (std::size_t i = 0; i < out.nodes.size(); ++i) {
    index_entries.push_back("[" + shell_quote(out.nodes[i]) + "]=" + std::to_string(i));
  }
  t << "declare -A NODE_INDEX=(" << join(index_entries, " ") << ")\n";
  t << "NODE_RANK=${NODE_RANK:-${NODE_INDEX[$(hostname -s)]:-${SLURM_NODEID:-0}}}\n";
  t << "MASTER_ADDR=${MASTER_ADDR:-" << shell_quote(out.nodes.front()) << "}\n";
  // The script's port, if it sets one (a default kept as the default).
  const ShellWord* port = script ? script->shell.find("MASTER_PORT") : nullptr;
  t << "MASTER_PORT=${MASTER_PORT:-" << (port ? shell_quote(port->text) : std::string("6000"))
    << "}\n\n";
  t << "export CUDA_DEVICE_MAX_CONNECTIONS=1\n";
  if (script) {
    static const std::set<std::string> kOwn = {"CUDA_DEVICE_MAX_CONNECTIONS",
                                               "WORLD_SIZE",
                                               "NODE_RANK",
                                               "MASTER_ADDR",
                                               "MASTER_PORT",
                                               "NNODES",
                                               "HAPMOE_STAGE_DEVICES"};
    for (const std::string& name : script->shell.exported) {
      const auto it = script->shell.variables.find(name);
      if (kOwn.count(name) || it == script->shell.variables.end() || it->second.empty()) continue;
      t << "export " << name << "=" << word_text(it->second.front()) << "\n";
    }
  }
  if (script) {
    // Script variables that the kept values still refer to (values known
    // only at run time, like CHECKPOINT_PATH=$1, and what they use).
    static const std::set<std::string> kOwn = {
        "WORLD_SIZE",       "NODE_RANK",     "MASTER_ADDR",  "MASTER_PORT",
        "NNODES",           "NODE_HOSTS",    "NODE_GPUS",    "HAPMOE_STAGE_DEVICES",
        "DISTRIBUTED_ARGS", "MEGATRON_ARGS", "PARALLEL_ARGS"};
    std::string sources;
    for (const MegatronFlag& f : script->flags) {
      sources += f.guard + " ";
      for (const ShellWord& v : f.values) {
        if (!v.known || v.defaulted || v.varies) sources += v.source + " ";
      }
    }
    auto used = [&](const std::string& name) {
      for (const std::string& form : {"$" + name, "${" + name}) {
        for (auto p = sources.find(form); p != std::string::npos; p = sources.find(form, p + 1)) {
          const std::size_t end = p + form.size();
          if (end >= sources.size() ||
              !(std::isalnum(static_cast<unsigned char>(sources[end])) || sources[end] == '_')) {
            return true;
          }
        }
      }
      return false;
    };
    std::vector<std::string> defs;
    std::set<std::string> done;
    for (int pass = 0; pass < 4; ++pass) {
      for (const auto& [name, value] : script->shell.variables) {
        if (kOwn.count(name) || done.count(name) || value.size() != 1 || !used(name)) continue;
        done.insert(name);
        const auto alts = script->shell.alternatives.find(name);
        if (alts == script->shell.alternatives.end()) {
          defs.push_back(name + "=" + word_text(value.front()));
        } else {
          // Set under conditions: each value under its own, as the script
          // sets them.
          std::string def;
          std::vector<const ShellWord*> all = {&value.front()};
          for (const ShellWord& a : alts->second) all.push_back(&a);
          for (const ShellWord* v : all) {
            const std::string set = name + "=" + word_text(*v);
            def += (def.empty() ? "" : "\n") +
                   (v->guard.empty() ? set : "if " + v->guard + "; then " + set + "; fi");
            sources += v->guard + " ";
            if (!v->known || v->defaulted) sources += v->source + " ";
          }
          defs.push_back(def);
          continue;
        }
        if (!value.front().known || value.front().defaulted) sources += value.front().source + " ";
      }
    }
    if (!defs.empty()) {
      t << "\n# Variables of " << comment_safe(script->origin()) << " that the kept flags use.\n";
      for (std::size_t k = defs.size(); k-- > 0;) t << defs[k] << "\n";
    }
  }
  t << "\nDISTRIBUTED_ARGS=(\n"
       "    --nnodes $NNODES\n"
       "    --node-rank $NODE_RANK\n"
       "    --nproc-per-node ${NODE_GPUS[$NODE_RANK]}\n"
       "    --master-addr $MASTER_ADDR\n"
       "    --master-port $MASTER_PORT\n"
       ")\n\n";
  if (script) {
    t << "# Flags kept from " << comment_safe(script->origin())
      << " (values as the script defines them).\n";
  } else {
    t << "# Model flags written from the model; replace the tokenizer, data and schedule flags\n"
         "# (NullTokenizer, --mock-data, --train-iters, --lr) with your own.\n";
  }
  // Every flag the launcher writes, carried from the script (`from`,
  // checked above by check_launcher_flags) or written by hapmoe (`from`
  // null), goes through here: one that the pinned Megatron-LM does not
  // define would stop the launch in its argument parser (docs/megatron.md,
  // "Flags of the pinned Megatron-LM").
  auto flag_text = [&](const std::string& name, const std::string& values,
                       const MegatronFlag* from) {
    if (from == nullptr && !is_megatron_flag(name)) {
      throw ContractError("make_megatron_launcher: hapmoe wrote " + name +
                          ", which is not a flag of Megatron-LM " + kMegatronVersion +
                          " (a bug in hapmoe)");
    }
    return "    " + name + (values.empty() ? "" : " " + values) + "\n";
  };
  // "--name value..." written by hapmoe.
  auto flag = [&](const std::string& f) {
    const auto space = f.find(' ');
    t << flag_text(f.substr(0, space), space == std::string::npos ? "" : f.substr(space + 1),
                   nullptr);
  };
  t << "MEGATRON_ARGS=(\n";
  // Flags the script adds under a condition hapmoe could not decide (e.g.
  // inside if [ -n "${WANDB_API_KEY}" ]): appended under the same
  // condition, after the others.
  std::vector<std::pair<std::string, std::string>> guarded;  // condition, flag line
  if (script) {
    for (const MegatronFlag& f : script->flags) {
      if (!f.name.empty() && owned_by_hapmoe(f.name)) continue;
      // Megatron-FSDP checkpoints only in its own format.
      if (f.name == "--ckpt-format" && w.training.fsdp != Fsdp::kOff) continue;
      std::string values;
      for (const ShellWord& v : f.values) values += (values.empty() ? "" : " ") + word_text(v);
      // A word the script passes but does not define (e.g. $EXTRA_ARGS):
      // its flags are known only when the launcher runs.
      const std::string line =
          f.name.empty() ? "    " + values + "\n" : flag_text(f.name, values, &f);
      if (f.guard.empty()) {
        t << line;
      } else {
        guarded.emplace_back(f.guard, line);
      }
    }
  } else {
    for (const std::string& f : model_flags(w)) flag(f);
  }
  t << ")\n";
  for (std::size_t i = 0; i < guarded.size();) {
    t << "if " << guarded[i].first << "; then\n    MEGATRON_ARGS+=(\n";
    std::size_t j = i;
    for (; j < guarded.size() && guarded[j].first == guarded[i].first; ++j) {
      t << "    " << guarded[j].second;
    }
    t << "    )\nfi\n";
    i = j;
  }
  t << "\n";
  t << "# Set by hapmoe from the plan and the training settings.\n";
  t << "PARALLEL_ARGS=(\n";
  flag("--tensor-model-parallel-size " + std::to_string(s.tp));
  flag("--pipeline-model-parallel-size " + std::to_string(s.pp));
  flag("--context-parallel-size " + std::to_string(s.cp));
  if (w.model.is_moe()) {
    flag("--expert-model-parallel-size " + std::to_string(s.ep));
    flag("--expert-tensor-parallel-size " + std::to_string(s.etp));
  }
  if (s.sequence_parallel) flag("--sequence-parallel");
  if (s.first_stage_layers) {
    flag("--decoder-first-pipeline-num-layers " + std::to_string(*s.first_stage_layers));
  }
  if (s.last_stage_layers) {
    flag("--decoder-last-pipeline-num-layers " + std::to_string(*s.last_stage_layers));
  }
  if (s.vpp_stages) flag("--num-virtual-stages-per-pipeline-rank " + std::to_string(*s.vpp_stages));
  if (!s.layout.empty()) flag("--pipeline-model-parallel-layout " + shell_quote(s.layout));
  if (!s.recompute_granularity.empty()) {
    flag("--recompute-granularity " + s.recompute_granularity);
  }
  if (!s.recompute_method.empty()) flag("--recompute-method " + s.recompute_method);
  if (s.recompute_num_layers) {
    flag("--recompute-num-layers " + std::to_string(*s.recompute_num_layers));
  }
  if (!s.recompute_modules.empty()) flag("--recompute-modules " + join(s.recompute_modules, " "));
  flag("--micro-batch-size " + std::to_string(s.micro_batch));
  flag("--global-batch-size " + std::to_string(s.global_batch));
  flag("--seq-length " + std::to_string(s.seq_length));
  flag(w.training.precision == Precision::kFp16 ? "--fp16" : "--bf16");
  if (w.training.precision == Precision::kFp8) {
    // E4M3 throughout for the block-scaled recipes (as Megatron-Bridge's
    // DeepSeek-V3 recipe), E4M3 forward / E5M2 gradients otherwise.
    const Fp8Recipe r = w.training.fp8_recipe;
    flag(std::string("--fp8-format ") +
         (r == Fp8Recipe::kBlockwise || r == Fp8Recipe::kMxfp8 ? "e4m3" : "hybrid"));
    flag(std::string("--fp8-recipe ") + to_string(r));
  }
  if (w.training.distributed_optimizer) flag("--use-distributed-optimizer");
  if (w.training.fsdp != Fsdp::kOff) {
    // Megatron-LM core_v0.15.0: Megatron-FSDP needs its own checkpoint format.
    flag("--use-megatron-fsdp");
    flag(std::string("--data-parallel-sharding-strategy ") + to_string(w.training.fsdp));
    flag("--ckpt-format fsdp_dtensor");
  }
  if (w.training.grad_reduce_in_bf16) flag("--grad-reduce-in-bf16");
  if (w.training.optimizer_offload_fraction > 0) {
    // The hybrid device optimizer reuses the precision-aware optimizer's
    // code path, which Megatron requires with it.
    char fraction[32];
    std::snprintf(fraction, sizeof fraction, "%.6g", w.training.optimizer_offload_fraction);
    flag("--optimizer-cpu-offload");
    flag(std::string("--optimizer-offload-fraction ") + fraction);
    flag("--use-precision-aware-optimizer");
  }
  // The overlaps the plan was costed with (docs/costmodel.md, "Overlap").
  if (w.training.overlap.grad_reduce) flag("--overlap-grad-reduce");
  if (s.overlap_param_gather) flag("--overlap-param-gather");
  if (w.training.overlap.tp_comm && pi.tp > 1) flag("--tp-comm-overlap");
  if (w.training.overlap.moe_ep_comm && pi.ep > 1) {
    flag("--overlap-moe-expert-parallel-comm");
    if (w.training.overlap.delay_wgrad) flag("--delay-wgrad-compute");
  }
  if (w.model.is_moe()) {
    Dispatcher d = w.training.dispatcher;
    if (d == Dispatcher::kAuto)
      d = model.type_costs(pi, plan.stages.front().device_type).moe.dispatcher;
    if (d == Dispatcher::kFlex) {
      flag("--moe-token-dispatcher-type flex");
      flag("--moe-enable-deepep");
    } else {
      flag(std::string("--moe-token-dispatcher-type ") +
           (d == Dispatcher::kAllGather ? "allgather" : "alltoall"));
    }
  }
  t << ")\n\n";
  t << "torchrun \"${DISTRIBUTED_ARGS[@]}\" " << entry
    << " \"${MEGATRON_ARGS[@]}\" \"${PARALLEL_ARGS[@]}\"\n";
  out.text = t.str();
  return out;
}

bool has_own_entry_point(const MegatronScript& script) {
  if (!script.shell.has_command) return false;
  const std::string& e = script.shell.launch.entry.text;
  return e.substr(e.find_last_of('/') + 1) != "pretrain_gpt.py";
}

void check_launcher_flags(const MegatronScript& script) {
  if (has_own_entry_point(script)) return;
  for (const MegatronFlag& f : script.flags) {
    if (f.name.empty() || is_megatron_flag(f.name)) continue;
    const std::string near = nearest_megatron_flag(f.name);
    throw InputError(script.origin() + ":" + std::to_string(f.line),
                     f.name + " is not a flag of Megatron-LM " + kMegatronVersion +
                         (near.empty() ? "" : " (did you mean " + near + "?)") +
                         "; the launcher would stop at Megatron's argument parser, so none is "
                         "written: correct or remove it");
  }
}

}  // namespace hapmoe
