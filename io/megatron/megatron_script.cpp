// Megatron-LM flags -> hapmoe inputs. Every flag hapmoe reads is in the
// table below with its kind; flags known to have no effect on the cost
// model are kept silently, anything else is kept and named once in a note.
// Defaults are Megatron-LM core_v0.15.0's (megatron/training/arguments.py),
// so a script is read the way Megatron would run it.
#include "io/megatron/megatron_script.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <map>
#include <set>
#include <utility>

#include "costmodel/errors.h"
#include "costmodel/text.h"
#include "io/inputs/files.h"
#include "io/inputs/json_strict.h"
#include "io/inputs/model_io.h"

namespace hapmoe {

namespace {

enum class Kind { kBool, kInt, kText, kList };

struct FlagInfo {
  Kind kind;
  const char* note;  // non-null: understood but not modelled (said once)
};

const std::map<std::string, FlagInfo>& read_flags() {
  static const std::map<std::string, FlagInfo> kFlags = {
      // Model shape.
      {"--num-layers", {Kind::kInt, nullptr}},
      {"--hidden-size", {Kind::kInt, nullptr}},
      {"--ffn-hidden-size", {Kind::kInt, nullptr}},
      {"--num-attention-heads", {Kind::kInt, nullptr}},
      {"--group-query-attention", {Kind::kBool, nullptr}},
      {"--num-query-groups", {Kind::kInt, nullptr}},
      {"--kv-channels", {Kind::kInt, nullptr}},
      {"--seq-length", {Kind::kInt, nullptr}},
      {"--encoder-seq-length", {Kind::kInt, nullptr}},
      {"--max-position-embeddings", {Kind::kInt, nullptr}},
      {"--vocab-size", {Kind::kInt, nullptr}},
      {"--padded-vocab-size", {Kind::kInt, nullptr}},
      // Pai-Megatron-Patch's entry points (pretrain_qwen.py, ...).
      {"--patch-tokenizer-type", {Kind::kText, nullptr}},
      {"--extra-vocab-size", {Kind::kInt, nullptr}},
      {"--make-vocab-size-divisible-by", {Kind::kInt, nullptr}},
      {"--add-qkv-bias", {Kind::kBool, nullptr}},
      {"--window-size", {Kind::kText, nullptr}},
      {"--window-attn-skip-freq", {Kind::kText, nullptr}},
      {"--softmax-type", {Kind::kText, nullptr}},
      {"--tokenizer-type", {Kind::kText, nullptr}},
      {"--tokenizer-model", {Kind::kText, nullptr}},
      {"--untie-embeddings-and-output-weights", {Kind::kBool, nullptr}},
      {"--swiglu", {Kind::kBool, nullptr}},
      {"--normalization", {Kind::kText, nullptr}},
      {"--position-embedding-type", {Kind::kText, nullptr}},
      {"--use-rotary-position-embeddings", {Kind::kBool, nullptr}},
      {"--no-position-embedding", {Kind::kBool, nullptr}},
      {"--disable-bias-linear", {Kind::kBool, nullptr}},
      {"--multi-latent-attention", {Kind::kBool, nullptr}},
      {"--q-lora-rank", {Kind::kInt, nullptr}},
      {"--kv-lora-rank", {Kind::kInt, nullptr}},
      {"--qk-head-dim", {Kind::kInt, nullptr}},
      {"--qk-pos-emb-head-dim", {Kind::kInt, nullptr}},
      {"--v-head-dim", {Kind::kInt, nullptr}},
      {"--mtp-num-layers", {Kind::kInt, nullptr}},
      // MoE.
      {"--num-experts", {Kind::kInt, nullptr}},
      {"--moe-router-topk", {Kind::kInt, nullptr}},
      {"--moe-ffn-hidden-size", {Kind::kInt, nullptr}},
      {"--moe-shared-expert-intermediate-size", {Kind::kInt, nullptr}},
      {"--moe-layer-freq", {Kind::kText, nullptr}},
      {"--moe-token-dispatcher-type", {Kind::kText, nullptr}},
      {"--moe-expert-capacity-factor",
       {Kind::kText,
        "--moe-expert-capacity-factor (token dropping) is not modelled: experts are costed "
        "dropless with the router imbalance"}},
      {"--moe-enable-deepep", {Kind::kBool, nullptr}},
      {"--overlap-moe-expert-parallel-comm", {Kind::kBool, nullptr}},
      {"--delay-wgrad-compute", {Kind::kBool, nullptr}},
      // Batch, precision, optimizer.
      {"--micro-batch-size", {Kind::kInt, nullptr}},
      {"--global-batch-size", {Kind::kInt, nullptr}},
      {"--rampup-batch-size",
       {Kind::kList, "--rampup-batch-size is not modelled: the full global batch is costed"}},
      {"--bf16", {Kind::kBool, nullptr}},
      {"--fp16", {Kind::kBool, nullptr}},
      {"--fp8-format", {Kind::kText, nullptr}},
      {"--fp8-recipe", {Kind::kText, nullptr}},
      {"--use-distributed-optimizer", {Kind::kBool, nullptr}},
      {"--overlap-param-gather", {Kind::kBool, nullptr}},
      {"--overlap-grad-reduce", {Kind::kBool, nullptr}},
      {"--tp-comm-overlap", {Kind::kBool, nullptr}},
      {"--grad-reduce-in-bf16", {Kind::kBool, nullptr}},
      {"--num-distributed-optimizer-instances",
       {Kind::kInt, "--num-distributed-optimizer-instances is not modelled (one instance)"}},
      {"--use-megatron-fsdp", {Kind::kBool, nullptr}},
      {"--data-parallel-sharding-strategy", {Kind::kText, nullptr}},
      {"--optimizer-cpu-offload", {Kind::kBool, nullptr}},
      {"--optimizer-offload-fraction", {Kind::kText, nullptr}},
      {"--use-precision-aware-optimizer", {Kind::kBool, nullptr}},
      {"--overlap-cpu-optimizer-d2h-h2d",
       {Kind::kBool,
        "--overlap-cpu-optimizer-d2h-h2d is not modelled: the offloaded optimizer's copies are "
        "costed without overlap"}},
      // Parallelism (replaced by a launcher).
      {"--tensor-model-parallel-size", {Kind::kInt, nullptr}},
      {"--pipeline-model-parallel-size", {Kind::kInt, nullptr}},
      {"--context-parallel-size", {Kind::kInt, nullptr}},
      {"--expert-model-parallel-size", {Kind::kInt, nullptr}},
      {"--expert-tensor-parallel-size", {Kind::kInt, nullptr}},
      {"--sequence-parallel", {Kind::kBool, nullptr}},
      {"--decoder-first-pipeline-num-layers", {Kind::kInt, nullptr}},
      {"--decoder-last-pipeline-num-layers", {Kind::kInt, nullptr}},
      {"--pipeline-model-parallel-layout", {Kind::kText, nullptr}},
      {"--account-for-embedding-in-pipeline-split", {Kind::kBool, nullptr}},
      {"--account-for-loss-in-pipeline-split", {Kind::kBool, nullptr}},
      {"--num-layers-per-virtual-pipeline-stage", {Kind::kInt, nullptr}},
      {"--num-virtual-stages-per-pipeline-rank", {Kind::kInt, nullptr}},
      {"--recompute-granularity", {Kind::kText, nullptr}},
      {"--recompute-activations", {Kind::kBool, nullptr}},
      {"--recompute-method", {Kind::kText, nullptr}},
      {"--recompute-num-layers", {Kind::kInt, nullptr}},
      {"--recompute-modules", {Kind::kList, nullptr}},
  };
  return kFlags;
}

// Flags known to have no effect on the cost model: kept, not reported.
bool is_irrelevant_flag(const std::string& name) {
  static const std::set<std::string> kNames = {
      "--use-mcore-models",
      "--init-method-std",
      "--attention-dropout",
      "--hidden-dropout",
      "--no-masked-softmax-fusion",
      "--rotary-base",
      "--rotary-percent",
      "--rotary-scaling-factor",
      "--norm-epsilon",
      "--lr",
      "--min-lr",
      "--weight-decay",
      "--clip-grad",
      "--train-iters",
      "--train-samples",
      "--split",
      "--data-path",
      "--mock-data",
      "--save",
      "--load",
      "--seed",
      "--moe-router-load-balancing-type",
      "--moe-aux-loss-coeff",
      "--moe-z-loss-coeff",
      "--moe-grouped-gemm",
      "--moe-permute-fusion",
      "--moe-router-dtype",
      "--moe-router-score-function",
      "--moe-router-enable-expert-bias",
      "--moe-router-topk-scaling-factor",
      "--moe-router-num-groups",
      "--moe-router-group-topk",
      "--moe-router-pre-softmax",
      "--moe-router-bias-update-rate",
      "--moe-shared-expert-overlap",
      "--distributed-backend",
      "--distributed-timeout-minutes",
      "--use-flash-attn",
      "--attention-backend",
      "--transformer-impl",
      "--no-create-attention-mask-in-dataloader",
      "--manual-gc",
      "--manual-gc-interval",
      "--exit-duration-in-mins",
      "--exit-interval",
      "--no-load-optim",
      "--no-load-rng",
      "--finetune",
      "--auto-detect-ckpt-format",
      "--dist-ckpt-strictness",
      "--qk-layernorm",
      "--apply-layernorm-1p",
      "--num-workers",
      "--data-cache-path",
      "--no-mmap-bin-files",
      "--dataloader-type",
      "--bias-swiglu-fusion",
      "--no-bias-swiglu-fusion",
      "--no-rope-fusion",
      "--cross-entropy-loss-fusion",
      "--rope-type",
      "--mscale",
      "--mscale-all-dim",
      "--beta-fast",
      "--beta-slow",
      "--original-max-position-embeddings",
      "--sequence-parallel-comm",
      "--cp-comm-type",
      "--use-torch-optimizer-for-cpu-offload",
      "--ckpt-format",
      "--profile",
      "--profile-step-start",
      "--profile-step-end",
      "--timing-log-level",
  };
  if (kNames.count(name) > 0) return true;
  for (const char* prefix :
       {"--log-", "--wandb-", "--tensorboard-", "--eval-", "--lr-", "--adam-", "--save-", "--ckpt-",
        "--tokenizer-", "--data-", "--train-", "--valid-", "--test-", "--init-", "--no-log",
        "--use-checkpoint-", "--hf-", "--ft-"}) {
    if (name.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

std::string join(const std::vector<std::string>& items, const char* sep = ", ") {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : sep) + s;
  return out;
}

// Reads one flag's values with messages that name file, line and flag.
class FlagReader {
 public:
  explicit FlagReader(const MegatronScript& s) : s_(s) {}

  std::string where(const MegatronFlag& f) const {
    return s_.origin() + ":" + std::to_string(f.line) + ": " + f.name;
  }
  std::string where(const std::string& name) const {
    const MegatronFlag* f = s_.find(name);
    return f ? where(*f) : s_.origin() + ": " + name;
  }

  [[noreturn]] void fail(const std::string& name, const std::string& what) const {
    const MegatronFlag* f = s_.find(name);
    throw InputError(f ? where(*f) : s_.origin() + ": " + name, what);
  }

  bool flag(const std::string& name) const { return s_.has(name); }

  // The single value of a flag (nullopt if absent).
  std::optional<std::string> text(const std::string& name) const {
    const MegatronFlag* f = s_.find(name);
    if (!f) return std::nullopt;
    if (f->values.size() != 1) {
      fail(name, f->values.empty() ? "needs a value"
                                   : "takes one value, got " + std::to_string(f->values.size()));
    }
    const ShellWord& w = f->values[0];
    if (!w.known) {
      fail(name, "its value " + w.source +
                     " is not defined by the script (command output or environment); give "
                     "the variable with --megatron-env NAME=VALUE");
    }
    return w.text;
  }

  std::optional<int> opt_int(const std::string& name, std::int64_t lo, std::int64_t hi) const {
    const auto t = text(name);
    if (!t) return std::nullopt;
    return static_cast<int>(parse_int_text(*t, lo, hi, where(name)));
  }

  int get_int(const std::string& name, std::int64_t lo, std::int64_t hi) const {
    const auto v = opt_int(name, lo, hi);
    if (!v) {
      throw InputError(s_.origin(), name +
                                        " is required (Megatron-LM needs it) but the script "
                                        "does not give it");
    }
    return *v;
  }

 private:
  const MegatronScript& s_;
};

// --moe-layer-freq: an int N (every N-th layer, from layer 0) or a Python
// list expression over 0/1: "[1,0,1]", "([0]*3+[1]*58)".
class FreqParser {
 public:
  FreqParser(const std::string& text, const std::string& where, int num_layers)
      : t_(text), where_(where), limit_(static_cast<std::size_t>(num_layers)) {}

  std::vector<std::uint8_t> run() {
    const Val v = sum(0);
    skip();
    if (p_ != t_.size()) bad("unexpected '" + t_.substr(p_, 1) + "'");
    if (!v.is_list) {
      if (v.n < 1) bad("an integer frequency must be at least 1");
      std::vector<std::uint8_t> out(limit_, 0);
      for (std::size_t l = 0; l < limit_; l += static_cast<std::size_t>(v.n)) out[l] = 1;
      return out;
    }
    if (v.list.size() != limit_) {
      bad("the list has " + std::to_string(v.list.size()) +
          " entries, expected one per layer (--num-layers " + std::to_string(limit_) + ")");
    }
    return v.list;
  }

 private:
  struct Val {
    bool is_list = false;
    std::int64_t n = 0;
    std::vector<std::uint8_t> list;
  };

  [[noreturn]] void bad(const std::string& what) const {
    throw InputError(where_, "\"" + t_ + "\": " + what +
                                 " (expected an integer or a Python list of 0/1 such as "
                                 "\"([0]*3+[1]*58)\")");
  }
  void skip() {
    while (p_ < t_.size() && (t_[p_] == ' ' || t_[p_] == '\t')) ++p_;
  }
  std::int64_t integer() {
    skip();
    std::int64_t v = 0;
    const std::size_t start = p_;
    while (p_ < t_.size() && t_[p_] >= '0' && t_[p_] <= '9') {
      v = v * 10 + (t_[p_] - '0');
      if (v > 1000000) bad("number too large");
      ++p_;
    }
    if (p_ == start) bad("expected a number");
    return v;
  }
  Val atom(int depth) {
    if (depth > 32) bad("nested too deeply");
    skip();
    if (p_ < t_.size() && t_[p_] == '(') {
      ++p_;
      Val v = sum(depth + 1);
      skip();
      if (p_ >= t_.size() || t_[p_] != ')') bad("unbalanced '('");
      ++p_;
      return v;
    }
    if (p_ < t_.size() && t_[p_] == '[') {
      ++p_;
      Val v;
      v.is_list = true;
      skip();
      while (p_ < t_.size() && t_[p_] != ']') {
        const std::int64_t x = integer();
        if (x != 0 && x != 1) bad("list entries must be 0 or 1");
        v.list.push_back(static_cast<std::uint8_t>(x));
        if (v.list.size() > limit_) bad("the list is longer than --num-layers");
        skip();
        if (p_ < t_.size() && t_[p_] == ',') ++p_;
        skip();
      }
      if (p_ >= t_.size()) bad("unbalanced '['");
      ++p_;
      return v;
    }
    Val v;
    v.n = integer();
    return v;
  }
  Val product(int depth) {
    Val v = atom(depth);
    while (true) {
      skip();
      if (p_ >= t_.size() || t_[p_] != '*') return v;
      ++p_;
      Val r = atom(depth);
      if (v.is_list == r.is_list) bad("'*' needs a list and an integer");
      Val& list = v.is_list ? v : r;
      const std::int64_t times = v.is_list ? r.n : v.n;
      if (times < 0 || static_cast<std::size_t>(times) * list.list.size() > limit_) {
        bad("the list is longer than --num-layers");
      }
      Val out;
      out.is_list = true;
      for (std::int64_t k = 0; k < times; ++k) {
        out.list.insert(out.list.end(), list.list.begin(), list.list.end());
      }
      v = std::move(out);
    }
  }
  Val sum(int depth) {
    Val v = product(depth);
    while (true) {
      skip();
      if (p_ >= t_.size() || t_[p_] != '+') return v;
      ++p_;
      Val r = product(depth);
      if (!v.is_list || !r.is_list) bad("'+' joins two lists");
      if (v.list.size() + r.list.size() > limit_) bad("the list is longer than --num-layers");
      v.list.insert(v.list.end(), r.list.begin(), r.list.end());
    }
  }

  std::string t_;
  std::string where_;
  std::size_t limit_;
  std::size_t p_ = 0;
};

// The vocabulary a tokenizer gives Megatron (tokenizer.vocab_size, before
// the padding), where it is public: the fixed --tokenizer-type
// vocabularies, and the model families a --tokenizer-model names.
struct TokenizerVocab {
  const char* key;  // a --tokenizer-type, or a family (see family_key)
  int vocab;
  const char* source;
};

constexpr TokenizerVocab kTokenizerTypes[] = {
    {"GPT2BPETokenizer", 50257, "GPT-2's BPE vocabulary (openai/gpt-2 encoder.json)"},
    {"Llama2Tokenizer", 32000, "the Llama-2 SentencePiece model (REFERENCE.md §2.2, M12-M14)"},
};

// Most specific first: the first family the model name contains wins.
constexpr TokenizerVocab kTokenizerFamilies[] = {
    {"mixtral8x22binstruct", 32768, "REFERENCE.md §2.2 Mixtral-8x22B (M4)"},
    {"mixtral", 32000, "REFERENCE.md §2.2 Mixtral (M1-M4)"},
    {"deepseekv3", 129280, "REFERENCE.md §2.2 DeepSeek-V3 (M5-M7)"},
    {"deepseekr1", 129280, "REFERENCE.md §2.2 DeepSeek-V3, R1's architecture (M7)"},
    {"qwen3", 151936, "REFERENCE.md §2.2 Qwen3 (M8-M11)"},
    {"llama3", 128256, "REFERENCE.md §2.2 Llama-3 (M15)"},
    {"llama2", 32000, "REFERENCE.md §2.2 Llama-2 (M12-M14)"},
    {"gptoss", 201088, "GPT-OSS, shared/calibration mb-gptoss-120b rows"},
};

// A model name (Hugging Face id or path) lower-cased without '-', '_',
// '.', ' ': "meta-llama/Meta-Llama-3.1-8B" -> "meta/metallama318b"...
std::string family_key(const std::string& name) {
  std::string out;
  for (const char c : name) {
    if (c == '-' || c == '_' || c == '.' || c == ' ') continue;
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

const TokenizerVocab* tokenizer_vocab(const std::string& type, const std::string& model) {
  for (const TokenizerVocab& t : kTokenizerTypes) {
    if (type == t.key) return &t;
  }
  if (model.empty()) return nullptr;
  const std::string key = family_key(model);
  for (const TokenizerVocab& t : kTokenizerFamilies) {
    if (key.find(t.key) != std::string::npos) return &t;
  }
  return nullptr;
}

void add_note(MegatronScript& s, const std::string& note) {
  if (std::find(s.notes.begin(), s.notes.end(), note) == s.notes.end()) s.notes.push_back(note);
}

// What Megatron-LM's entry points other than pretrain_gpt.py train: models
// the cost model (decoder-only transformers, docs/costmodel.md) cannot
// represent, so a script running one is refused (docs/megatron.md, "Entry
// points"). Empty for a script hapmoe reads.
std::string non_gpt_entry_point(const std::string& script) {
  static const std::map<std::string, const char*> kEntries = {
      {"pretrain_bert.py", "BERT, a bidirectional encoder with a binary head"},
      {"pretrain_t5.py", "T5, an encoder-decoder model"},
      {"pretrain_mamba.py", "a hybrid Mamba model (Mamba, attention and MLP layers)"},
      {"pretrain_vlm.py", "a vision-language model (a vision encoder and a language model)"},
      {"pretrain_retro.py", "RETRO, with a retrieval encoder and chunked cross-attention"},
      {"pretrain_ict.py", "an ICT biencoder retriever (two BERT encoders)"},
      {"pretrain_vision_classify.py", "a vision transformer"},
      {"pretrain_vision_dino.py", "a vision transformer"},
      {"pretrain_vision_inpaint.py", "a vision transformer"}};
  const auto it = kEntries.find(script);
  return it == kEntries.end() ? std::string() : it->second;
}

// The launch command's entry point: pretrain_gpt.py is read; Megatron-LM's
// other entry points are refused; anything else (a wrapper such as
// Pai-Megatron-Patch's pretrain_qwen.py) is read as GPT, with a note.
void check_entry_point(MegatronScript& s) {
  if (!s.shell.has_command) return;  // a bare argument list: GPT's flags
  const ShellWord& entry = s.shell.launch.entry;
  const auto slash = entry.text.find_last_of('/');
  const std::string script = slash == std::string::npos ? entry.text : entry.text.substr(slash + 1);
  if (script == "pretrain_gpt.py") return;
  if (const std::string what = non_gpt_entry_point(script); !what.empty()) {
    throw InputError(s.origin() + ":" + std::to_string(entry.line),
                     "the script runs " + script + ", which trains " + what +
                         "; hapmoe models decoder-only GPT models (pretrain_gpt.py) only, so "
                         "the script is refused rather than costed wrong (docs/megatron.md, "
                         "\"Entry points\")");
  }
  add_note(s, "the entry point " + script +
                  " is not Megatron-LM's pretrain_gpt.py; its flags are read as a decoder-only "
                  "GPT model");
}

// Flags of Megatron's hybrid Mamba models (pretrain_mamba.py): refused
// wherever they appear, as the layers they describe are not modelled.
void check_hybrid_flags(const MegatronScript& s) {
  for (const char* name :
       {"--hybrid-override-pattern", "--hybrid-attention-ratio", "--hybrid-mlp-ratio"}) {
    const MegatronFlag* f = s.find(name);
    if (!f) continue;
    const std::string value = f->values.empty() ? std::string() : " " + f->values[0].source;
    throw InputError(s.origin() + ":" + std::to_string(f->line) + ": " + name,
                     std::string(name) + value +
                         " describes a hybrid Mamba model; Mamba layers are not modelled "
                         "(hapmoe costs every layer as attention + MLP/MoE), so the script is "
                         "refused rather than costed wrong (docs/megatron.md, \"Entry points\")");
  }
}

}  // namespace

const MegatronFlag* MegatronScript::find(const std::string& name) const {
  for (std::size_t k = flags.size(); k-- > 0;) {
    if (flags[k].name == name && !flags[k].launcher_only) return &flags[k];
  }
  return nullptr;
}

bool is_parallel_flag(const std::string& name) {
  static const std::set<std::string> kNames = {"--tensor-model-parallel-size",
                                               "--pipeline-model-parallel-size",
                                               "--context-parallel-size",
                                               "--expert-model-parallel-size",
                                               "--expert-tensor-parallel-size",
                                               "--sequence-parallel",
                                               "--decoder-first-pipeline-num-layers",
                                               "--decoder-last-pipeline-num-layers",
                                               "--pipeline-model-parallel-layout",
                                               "--account-for-embedding-in-pipeline-split",
                                               "--account-for-loss-in-pipeline-split",
                                               "--num-layers-per-virtual-pipeline-stage",
                                               "--num-virtual-stages-per-pipeline-rank",
                                               "--recompute-granularity",
                                               "--recompute-activations",
                                               "--recompute-method",
                                               "--recompute-num-layers",
                                               "--recompute-modules",
                                               "--micro-batch-size",
                                               "--global-batch-size",
                                               "--overlap-grad-reduce",
                                               "--overlap-param-gather",
                                               "--tp-comm-overlap",
                                               "--overlap-moe-expert-parallel-comm",
                                               "--delay-wgrad-compute"};
  return kNames.count(name) > 0;
}

namespace {

// A Megatron-MoE-ModelZoo model config (YAML: an ENV_VARS and a MODEL_ARGS
// mapping of "--flag: value" entries, true for a switch, false to leave it
// out, ${VAR} filled by envsubst) as the equivalent bash, line for line so
// messages keep the YAML's line numbers: ENV_VARS entries become exports,
// MODEL_ARGS entries one continued argument list. nullopt for any other
// text.
std::optional<std::string> yaml_args_as_shell(const std::string& text) {
  auto trim = [](const std::string& v) { return std::string(hapmoe::trim(v)); };
  // A value: an inline comment cut, quotes taken off, in double quotes so
  // that ${VAR} still expands.
  auto value_of = [&](std::string v) {
    if (const auto hash = v.find(" #"); hash != std::string::npos) v.resize(hash);
    v = trim(v);
    if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front()) {
      v = v.substr(1, v.size() - 2);
    }
    std::string out = "\"";
    for (char c : v) {
      if (c == '"' || c == '\\' || c == '`') out += '\\';
      out += c;
    }
    return out + "\"";
  };
  std::vector<std::string> lines;
  std::string section;
  bool entries = false;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    const std::string t = trim(line);
    std::string out;
    const bool indented = !line.empty() && (line[0] == ' ' || line[0] == '\t');
    const auto colon = t.find(':');
    if (!indented && !t.empty() && t[0] != '#' && colon == t.size() - 1) {
      section = t.substr(0, colon);  // a top-level key: a section
    } else if (indented && !t.empty() && t[0] != '#' && colon != std::string::npos) {
      const std::string key = t.substr(0, colon);
      const std::string v = trim(t.substr(colon + 1));
      if (section == "MODEL_ARGS" && key.rfind("--", 0) == 0) {
        entries = true;
        const std::string bare = trim(v.substr(0, v.find(" #")));
        if (bare == "false" || bare == "null" || bare == "~") {
          out = "\\";
        } else if (bare == "true" || bare.empty()) {
          out = key + " \\";
        } else {
          out = key + " " + value_of(v) + " \\";
        }
      } else if (section == "ENV_VARS" && !key.empty() &&
                 std::all_of(key.begin(), key.end(), [](char c) {
                   return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
                 })) {
        out = "export " + key + "=" + value_of(v);
      }
    } else if (section == "MODEL_ARGS" && entries) {
      out = "\\";  // a comment or blank line inside the list
    }
    lines.push_back(out);
    if (end == text.size()) break;
  }
  if (!entries) return std::nullopt;
  std::string shell;
  for (const std::string& l : lines) shell += l + "\n";
  return shell;
}

}  // namespace

MegatronScript parse_megatron_script(const std::string& text, const std::string& origin,
                                     const ShellInputs& inputs) {
  MegatronScript s;
  const std::optional<std::string> yaml = yaml_args_as_shell(text);
  s.shell = read_shell_script(yaml ? *yaml : text, origin, inputs);
  if (yaml) {
    s.shell.notes.insert(s.shell.notes.begin(),
                         "read as a Megatron-MoE-ModelZoo YAML config: MODEL_ARGS entries as "
                         "flags (true: the flag alone, false: left out), ENV_VARS as exported "
                         "variables, ${VAR} from --megatron-env");
  }
  s.notes = s.shell.notes;
  check_entry_point(s);
  const std::vector<ShellWord>& args = s.shell.launch.args;
  std::set<std::string> seen_unknown;
  std::map<std::string, int> last_line;  // of each flag read so far
  std::vector<std::string> undefined;    // sources of unknown words, once each
  std::set<std::string> seen_undefined;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const ShellWord& w = args[i];
    if (!w.known || (w.launcher_only && w.text.rfind("--", 0) != 0)) {
      // E.g. $EXTRA_ARGS that the script never sets: kept for the
      // launcher, not read.
      s.flags.push_back({"", {w}, w.line, w.guard, w.launcher_only});
      if (!w.launcher_only && seen_undefined.insert(w.source).second) {
        undefined.push_back(w.source);
      }
      continue;
    }
    if (w.text.rfind("--", 0) != 0 || w.text.size() < 3) {
      throw InputError(
          origin + ":" + std::to_string(w.line),
          "\"" + w.text + "\" is not a --flag (Megatron-LM takes no positional arguments)");
    }
    MegatronFlag f;
    f.line = w.line;
    f.guard = w.guard;
    f.launcher_only = w.launcher_only;
    const auto eq = w.text.find('=');
    if (eq != std::string::npos) {
      f.name = w.text.substr(0, eq);
      ShellWord v = w;
      v.text = w.text.substr(eq + 1);
      v.source = shell_quote(v.text);
      v.defaulted = false;  // --flag=${X:-d}: the value is written as read
      v.varies = false;
      f.values.push_back(v);
    } else {
      f.name = w.text;
      // Values: the known words up to the next --flag. A word the script
      // does not define (e.g. ${EXTRA_ARGS}) is taken only as the first
      // value of a flag that takes values; after a switch it stays a
      // word of its own.
      const auto known_it = read_flags().find(f.name);
      const bool is_switch = known_it != read_flags().end() && known_it->second.kind == Kind::kBool;
      while (i + 1 < args.size()) {
        const ShellWord& next = args[i + 1];
        if (next.known ? next.text.rfind("--", 0) == 0 : (is_switch || !f.values.empty())) break;
        if (next.launcher_only != f.launcher_only) break;
        f.values.push_back(args[++i]);
      }
    }
    if (f.launcher_only) {
      s.flags.push_back(std::move(f));  // not read: no checks, no notes
      continue;
    }
    const auto& table = read_flags();
    const auto it = table.find(f.name);
    if (it != table.end()) {
      const Kind k = it->second.kind;
      if (k == Kind::kBool && !f.values.empty()) {
        throw InputError(origin + ":" + std::to_string(f.line) + ": " + f.name,
                         "takes no value, got \"" + f.values[0].source + "\"");
      }
      if ((k == Kind::kInt || k == Kind::kText) && f.values.size() != 1) {
        throw InputError(origin + ":" + std::to_string(f.line) + ": " + f.name,
                         f.values.empty()
                             ? "needs a value"
                             : "takes one value, got " + std::to_string(f.values.size()));
      }
      if (it->second.note) add_note(s, it->second.note);
    } else if (!is_irrelevant_flag(f.name) && seen_unknown.insert(f.name).second) {
      s.unknown.push_back(f.name);
    }
    // argparse keeps the last of a repeated flag.
    if (const auto [last, first] = last_line.try_emplace(f.name, f.line); !first) {
      s.notes.push_back(f.name + " is given twice (lines " + std::to_string(last->second) +
                        " and " + std::to_string(f.line) +
                        "); the last one is used, as argparse does");
      last->second = f.line;
    }
    s.flags.push_back(std::move(f));
  }
  check_hybrid_flags(s);
  if (!undefined.empty()) {
    constexpr std::size_t kShown = 8;
    std::vector<std::string> shown(undefined.begin(),
                                   undefined.begin() + std::min(undefined.size(), kShown));
    s.notes.push_back("the script passes " + join(shown) +
                      (undefined.size() > kShown
                           ? " and " + std::to_string(undefined.size() - kShown) + " more"
                           : std::string()) +
                      (undefined.size() > 1 ? ", which it does not define; they are"
                                            : ", which it does not define; it is") +
                      " kept but not read");
  }
  if (!s.unknown.empty()) {
    s.notes.push_back("flags kept as they are, not read by hapmoe: " + join(s.unknown));
  }
  return s;
}

MegatronScript read_megatron_script(const std::string& path, const ShellInputs& inputs) {
  return parse_megatron_script(read_regular_file(path, 8u << 20), path, inputs);
}

Workload megatron_workload(MegatronScript& script, const MegatronDefaults& defaults) {
  const FlagReader r(script);
  constexpr std::int64_t kMaxSize = std::int64_t{1} << 24;
  Workload w;
  ModelSpec& m = w.model;
  TrainingSpec& t = w.training;
  m.name = script.origin();
  m.num_layers = r.get_int("--num-layers", 1, 100000);
  m.hidden = r.get_int("--hidden-size", 1, kMaxSize);
  m.num_heads = r.get_int("--num-attention-heads", 1, 65536);

  // Attention: MLA, GQA or MHA.
  const bool mla = r.flag("--multi-latent-attention");
  for (const char* f : {"--q-lora-rank", "--kv-lora-rank", "--qk-head-dim", "--qk-pos-emb-head-dim",
                        "--v-head-dim"}) {
    if (!mla && r.flag(f)) {
      r.fail(f, std::string(f) +
                    " without --multi-latent-attention: Megatron ignores it; add "
                    "--multi-latent-attention or remove it");
    }
  }
  const bool gqa = r.flag("--group-query-attention");
  if (r.flag("--num-query-groups") && !gqa) {
    r.fail("--num-query-groups",
           "--num-query-groups without --group-query-attention: Megatron ignores it and runs "
           "multi-head attention; add --group-query-attention or remove --num-query-groups");
  }
  if (gqa && !r.flag("--num-query-groups")) {
    r.fail("--group-query-attention",
           "--group-query-attention without --num-query-groups: Megatron's default is 1 query "
           "group; give --num-query-groups");
  }
  if (mla && gqa) {
    r.fail("--group-query-attention",
           "--group-query-attention with --multi-latent-attention: MLA has no query groups");
  }
  m.num_kv_heads = gqa ? r.get_int("--num-query-groups", 1, 65536) : m.num_heads;
  if (m.num_heads % m.num_kv_heads != 0) {
    r.fail("--num-query-groups", "--num-query-groups " + std::to_string(m.num_kv_heads) +
                                     " does not divide --num-attention-heads " +
                                     std::to_string(m.num_heads));
  }
  if (mla) {
    m.mla.q_lora_rank = r.opt_int("--q-lora-rank", 0, kMaxSize).value_or(0);
    m.mla.kv_lora_rank = r.opt_int("--kv-lora-rank", 1, kMaxSize).value_or(32);
    m.mla.qk_nope_head_dim = r.opt_int("--qk-head-dim", 1, 65536).value_or(128);
    m.mla.qk_rope_head_dim = r.opt_int("--qk-pos-emb-head-dim", 1, 65536).value_or(64);
    m.mla.v_head_dim = r.opt_int("--v-head-dim", 1, 65536).value_or(128);
    m.head_dim = m.mla.qk_nope_head_dim;
  } else if (auto kv = r.opt_int("--kv-channels", 1, kMaxSize)) {
    m.head_dim = *kv;
  } else {
    if (m.hidden % m.num_heads != 0) {
      r.fail("--hidden-size", "--hidden-size " + std::to_string(m.hidden) +
                                  " is not divisible by --num-attention-heads " +
                                  std::to_string(m.num_heads) + " and --kv-channels is absent");
    }
    m.head_dim = m.hidden / m.num_heads;
  }

  // MLP.
  m.mlp = r.flag("--swiglu") ? MlpKind::kSwiGlu : MlpKind::kGelu;
  if (auto f = r.opt_int("--ffn-hidden-size", 1, kMaxSize)) {
    m.ffn_hidden = *f;
  } else {
    // Megatron's default (arguments.py): 4h, or 2/3 of it rounded down to
    // a multiple of 64 with SwiGLU.
    m.ffn_hidden = m.mlp == MlpKind::kSwiGlu ? (4 * m.hidden * 2 / 3) / 64 * 64 : 4 * m.hidden;
    add_note(script, "--ffn-hidden-size is absent: Megatron's default " +
                         std::to_string(m.ffn_hidden) + " is used");
  }

  // Positions and sequence.
  std::string pos = r.text("--position-embedding-type").value_or("learned_absolute");
  if (r.flag("--use-rotary-position-embeddings")) pos = "rope";
  if (pos == "rope" || pos == "yarn" || pos == "mrope") {
    m.positions = PositionKind::kRotary;
  } else if (pos == "learned_absolute") {
    m.positions =
        r.flag("--no-position-embedding") ? PositionKind::kRotary : PositionKind::kLearned;
  } else if (pos == "none") {
    m.positions = PositionKind::kRotary;  // no parameters either way
  } else {
    r.fail("--position-embedding-type",
           "\"" + pos + "\" is not one of learned_absolute, rope, yarn, mrope, none");
  }
  if (script.has("--seq-length") && script.has("--encoder-seq-length")) {
    r.fail("--encoder-seq-length", "give --seq-length or --encoder-seq-length, not both");
  }
  const char* seq_flag =
      script.has("--encoder-seq-length") ? "--encoder-seq-length" : "--seq-length";
  t.seq_len = r.get_int(seq_flag, 1, std::int64_t{1} << 22);
  m.max_positions =
      r.opt_int("--max-position-embeddings", 1, std::int64_t{1} << 30).value_or(t.seq_len);
  if (m.max_positions < t.seq_len) {
    r.fail("--max-position-embeddings", "--max-position-embeddings " +
                                            std::to_string(m.max_positions) + " is smaller than " +
                                            seq_flag + " " + std::to_string(t.seq_len));
  }
  m.tied_embeddings = !r.flag("--untie-embeddings-and-output-weights");
  // Attention variants (docs/costmodel.md, "Attention variants"):
  // --window-size "L,R" windows the layers over L keys back; with
  // --window-attn-skip-freq N every N-th layer (1-based) is full attention,
  // or a list of 1 (window) / 0 (full) per layer; --softmax-type learnable
  // is GPT-OSS's sink per head.
  m.qkv_bias = r.flag("--add-qkv-bias");
  m.mtp_layers = r.opt_int("--mtp-num-layers", 0, 1000).value_or(0);
  m.attention_sinks = r.text("--softmax-type").value_or("vanilla") == "learnable";
  if (const auto window = r.text("--window-size")) {
    const std::string left = window->substr(0, window->find(','));
    const double keys = parse_number_text(left, -1, kMaxSize, r.where("--window-size"));
    if (keys > 0) {
      m.sliding_window = static_cast<int>(keys);
      const std::string skip = r.text("--window-attn-skip-freq").value_or("");
      if (skip.find(',') != std::string::npos || skip.find('[') != std::string::npos) {
        for (char c : skip) {
          if (c == '0' || c == '1') m.window_layers.push_back(static_cast<std::uint8_t>(c - '0'));
        }
        if (m.window_layers.size() != static_cast<std::size_t>(m.num_layers)) {
          r.fail("--window-attn-skip-freq", "\"" + skip +
                                                "\" must give one 0/1 per layer (--num-layers " +
                                                std::to_string(m.num_layers) + ")");
        }
      } else {
        const int every = skip.empty()
                              ? 0
                              : static_cast<int>(parse_number_text(
                                    skip, 1, kMaxSize, r.where("--window-attn-skip-freq")));
        for (int l = 0; l < m.num_layers; ++l) {
          m.window_layers.push_back(every > 0 && (l + 1) % every == 0 ? 0 : 1);
        }
      }
    }
  }

  // Vocabulary.
  m.vocab_divisible_by =
      r.opt_int("--make-vocab-size-divisible-by", 1, 1000000).value_or(m.vocab_divisible_by);
  // Megatron takes the size from its tokenizer (build_tokenizer, then
  // _vocab_size_with_padding); --vocab-size is read only by NullTokenizer,
  // which adds one for its EOD token, and TikTokenizer.
  const std::string tok = r.text("--tokenizer-type").value_or("");
  const ShellWord* tok_model =
      script.find("--tokenizer-model") ? &script.find("--tokenizer-model")->values[0] : nullptr;
  const std::string model = tok_model && tok_model->known ? tok_model->text : "";
  const std::optional<int> given = r.opt_int("--vocab-size", 1, kMaxSize);
  // Older examples (gpt3's train_gpt3_175b_distributed.sh) give GPT-2's
  // vocabulary and merge files without --tokenizer-type, which
  // core_v0.15.0 needs: they were written for GPT2BPETokenizer.
  const bool gpt2_files = tok.empty() && script.has("--vocab-file") && script.has("--merge-file");
  // Pai-Megatron-Patch names its tokenizer by family (Qwen3Tokenizer,
  // LLama3Tokenizer, ...) and adds --extra-vocab-size tokens to the
  // tokenizer's size to make the model's vocab_size.
  const std::string patch = r.text("--patch-tokenizer-type").value_or("");
  const TokenizerVocab* known = tokenizer_vocab(gpt2_files ? "GPT2BPETokenizer" : tok,
                                                tok.empty() && model.empty() ? patch : model);
  const std::optional<int> padded_given = r.opt_int("--padded-vocab-size", 1, kMaxSize);
  std::string why;
  if (padded_given) {
    // Megatron takes it as the embedding's size, unpadded further
    // (tokenizer.py: padding only when padded_vocab_size is None).
    m.vocab = *padded_given;
    m.vocab_divisible_by = 1;
    add_note(script, "vocabulary " + std::to_string(m.vocab) +
                         " from --padded-vocab-size, used as given (Megatron pads no further)");
  } else if (tok == "NullTokenizer" && given) {
    m.vocab = *given + 1;
  } else if (known && !(given && tok == "TikTokenizer")) {
    m.vocab = known->vocab;
    why = (gpt2_files ? "--vocab-file and --merge-file without --tokenizer-type, read as "
                        "GPT2BPETokenizer, which Megatron needs named"
           : std::string(known->key) == tok ? "--tokenizer-type " + tok
           : model.empty()                  ? "--patch-tokenizer-type " + patch
                                            : "--tokenizer-model " + model) +
          " (" + known->source + ")";
    if (script.has("--extra-vocab-size") && model.empty() && !patch.empty()) {
      // Pai adds it to the tokenizer's own size to reach the model's
      // vocab_size, which is what the family's entry is.
      why += ", which --extra-vocab-size already counts in";
    }
    if (given && *given != known->vocab) {
      why += "; Megatron takes the tokenizer's size, not --vocab-size " + std::to_string(*given);
    }
  } else if (given) {
    m.vocab = *given;
  } else if (defaults.vocab) {
    m.vocab = *defaults.vocab;
  } else {
    throw InputError(script.origin(),
                     "the vocabulary size is unknown: the script has no --vocab-size and "
                     "hapmoe does not run its tokenizer (" +
                         (!patch.empty() ? "--patch-tokenizer-type " + patch
                          : tok.empty()  ? std::string("--tokenizer-type absent")
                                         : "--tokenizer-type " + tok) +
                         (tok_model ? ", --tokenizer-model " + tok_model->source : "") +
                         "); give hapmoe --vocab-size N, the model's vocab_size");
  }
  if (!why.empty()) {
    const int tp = r.opt_int("--tensor-model-parallel-size", 1, kMaxSize).value_or(1);
    const long long multiple = static_cast<long long>(m.vocab_divisible_by) * tp;
    const long long padded = (m.vocab + multiple - 1) / multiple * multiple;
    add_note(script,
             "vocabulary " + std::to_string(m.vocab) + " from " + why + ", padded to " +
                 std::to_string(padded) + " (a multiple of --make-vocab-size-divisible-by " +
                 std::to_string(m.vocab_divisible_by) + " x TP " + std::to_string(tp) + ")");
  }

  // Experts.
  const std::optional<int> experts = r.opt_int("--num-experts", 1, 65536);
  for (const char* f :
       {"--moe-router-topk", "--moe-ffn-hidden-size", "--moe-shared-expert-intermediate-size",
        "--moe-layer-freq", "--expert-model-parallel-size"}) {
    if (!experts && r.flag(f)) {
      r.fail(f, std::string(f) + " without --num-experts: the model is dense in Megatron");
    }
  }
  if (experts) {
    m.num_experts = *experts;
    m.top_k = r.opt_int("--moe-router-topk", 1, 65536).value_or(2);
    if (m.top_k > m.num_experts) {
      r.fail("--moe-router-topk", "--moe-router-topk " + std::to_string(m.top_k) +
                                      " exceeds --num-experts " + std::to_string(m.num_experts));
    }
    m.expert_ffn_hidden = r.opt_int("--moe-ffn-hidden-size", 1, kMaxSize).value_or(m.ffn_hidden);
    m.shared_expert_ffn_hidden =
        r.opt_int("--moe-shared-expert-intermediate-size", 1, kMaxSize).value_or(0);
    const std::string freq = r.text("--moe-layer-freq").value_or("1");
    m.moe_layers = FreqParser(freq, r.where("--moe-layer-freq"), m.num_layers).run();
    if (m.num_moe_layers() == 0) {
      r.fail("--moe-layer-freq", "no layer is a MoE layer");
    }
    if (!script.has("--ffn-hidden-size") && m.num_moe_layers() == m.num_layers) {
      m.ffn_hidden = m.expert_ffn_hidden;  // unused: every layer is MoE
    }
  }

  // Training settings.
  t.micro_batch = r.get_int("--micro-batch-size", 1, std::int64_t{1} << 20);
  if (r.flag("--bf16") && r.flag("--fp16")) {
    r.fail("--fp16", "--bf16 and --fp16 are both given; Megatron accepts only one");
  }
  if (r.flag("--bf16")) {
    t.precision = Precision::kBf16;
  } else if (r.flag("--fp16")) {
    t.precision = Precision::kFp16;
  } else if (defaults.precision) {
    t.precision = *defaults.precision;
  } else {
    throw InputError(script.origin(),
                     "neither --bf16 nor --fp16 is given, so Megatron would train in fp32, "
                     "which hapmoe does not model; add one to the script or give hapmoe "
                     "--precision");
  }
  // FP8 (docs/costmodel.md, "FP8"): --fp8-format with --bf16 trains the
  // linear layers in FP8 with --fp8-recipe (Megatron's default: delayed).
  if (r.text("--fp8-format")) {
    if (t.precision == Precision::kFp16) {
      r.fail("--fp8-format", "--fp8-format with --fp16: hapmoe models FP8 over bf16 only");
    }
    t.precision = Precision::kFp8;
    if (const auto recipe = r.text("--fp8-recipe")) {
      try {
        t.fp8_recipe = parse_fp8_recipe(*recipe, "--fp8-recipe");
      } catch (const InputError& e) {
        r.fail("--fp8-recipe", e.what());
      }
    } else {
      t.fp8_recipe = Fp8Recipe::kDelayed;  // Megatron's default
    }
  }
  t.distributed_optimizer = r.flag("--use-distributed-optimizer");
  if (r.flag("--use-megatron-fsdp")) {
    // Megatron-FSDP (core_v0.15.0 arguments.py; default no_shard): optim is
    // the distributed optimizer, optim_grads and optim_grads_params shard
    // the gradients and the parameters too.
    const std::string strategy = r.text("--data-parallel-sharding-strategy").value_or("no_shard");
    if (strategy == "optim") {
      t.distributed_optimizer = true;
    } else if (strategy == "optim_grads") {
      t.distributed_optimizer = true;
      t.fsdp = Fsdp::kOptimGrads;
    } else if (strategy == "optim_grads_params") {
      t.distributed_optimizer = true;
      t.fsdp = Fsdp::kOptimGradsParams;
    } else if (strategy != "no_shard") {
      r.fail("--data-parallel-sharding-strategy",
             "unknown strategy \"" + strategy +
                 "\" (Megatron-LM: no_shard, optim, optim_grads, optim_grads_params)");
    }
  } else if (r.text("--data-parallel-sharding-strategy")) {
    add_note(script, "--data-parallel-sharding-strategy has no effect without --use-megatron-fsdp");
  }
  t.overlap.grad_reduce = r.flag("--overlap-grad-reduce");
  t.grad_reduce_in_bf16 = r.flag("--grad-reduce-in-bf16");
  // --optimizer-offload-fraction defaults to 1.0 (Megatron-LM core_v0.15.0
  // arguments.py) and does nothing without --optimizer-cpu-offload.
  if (r.flag("--optimizer-cpu-offload")) {
    t.optimizer_offload_fraction = 1.0;
    if (const auto f = r.text("--optimizer-offload-fraction")) {
      t.optimizer_offload_fraction =
          parse_number_text(*f, 0.0, 1.0, r.where("--optimizer-offload-fraction"));
    }
  } else if (r.text("--optimizer-offload-fraction")) {
    add_note(script, "--optimizer-offload-fraction has no effect without --optimizer-cpu-offload");
  }
  t.overlap.param_gather = r.flag("--overlap-param-gather") && t.distributed_optimizer;
  t.overlap.tp_comm = r.flag("--tp-comm-overlap");
  t.overlap.moe_ep_comm = r.flag("--overlap-moe-expert-parallel-comm");
  t.overlap.delay_wgrad = r.flag("--delay-wgrad-compute");
  if (t.overlap.delay_wgrad && !t.overlap.moe_ep_comm) {
    // core_v0.15.0 transformer_config.py asserts it.
    throw InputError(r.where("--delay-wgrad-compute"),
                     "needs --overlap-moe-expert-parallel-comm: Megatron "
                     "stops (\"overlap_moe_expert_parallel_comm must be enabled when enabling "
                     "delay_wgrad_compute\")");
  }
  const std::string disp = r.text("--moe-token-dispatcher-type").value_or("allgather");
  if (disp == "alltoall" || disp == "alltoall_seq") {
    t.dispatcher = Dispatcher::kAllToAll;
  } else if (disp == "flex") {
    t.dispatcher = Dispatcher::kFlex;  // DeepEP, the flex backend of core_v0.15
  } else if (disp == "allgather") {
    t.dispatcher = Dispatcher::kAllGather;
  } else {
    r.fail("--moe-token-dispatcher-type",
           "\"" + disp + "\" is not one of allgather, alltoall, flex");
  }
  if (!m.is_moe()) t.dispatcher = TrainingSpec{}.dispatcher;  // no experts: unused
  if (auto g = r.opt_int("--global-batch-size", 1, std::int64_t{1} << 30)) {
    t.global_batch = *g;
  } else {
    // Megatron's default is micro x DP; DP needs the world size.
    const MegatronWorld world = megatron_world(script);
    const int tp = r.opt_int("--tensor-model-parallel-size", 1, 1 << 20).value_or(1);
    const int pp = r.opt_int("--pipeline-model-parallel-size", 1, 1 << 20).value_or(1);
    const int cp = r.opt_int("--context-parallel-size", 1, 1 << 20).value_or(1);
    const long long group = static_cast<long long>(tp) * pp * cp;
    if (!world.size || *world.size % group != 0) {
      throw InputError(
          script.origin(),
          "--global-batch-size is absent and the world size is " +
              (world.size
                   ? std::to_string(*world.size) + " (" + world.from +
                         "), not a multiple of TP x PP x CP = " + std::to_string(group)
                   : "unknown" + (world.from.empty() ? std::string() : " (" + world.from + ")")) +
              ", so Megatron's default (micro-batch x DP) cannot be computed; give "
              "--global-batch-size (or hapmoe --global-batch)");
    }
    const long long global = t.micro_batch * (*world.size / group);
    if (global > (1LL << 30)) {
      throw InputError(script.origin(),
                       "--global-batch-size is absent and Megatron's default "
                       "micro-batch x DP = " +
                           std::to_string(global) + " is too large");
    }
    t.global_batch = static_cast<int>(global);
    add_note(script, "--global-batch-size is absent: Megatron's default micro-batch x DP = " +
                         std::to_string(t.global_batch));
  }
  if (t.global_batch % t.micro_batch != 0) {
    r.fail("--global-batch-size", "--global-batch-size " + std::to_string(t.global_batch) +
                                      " is not a multiple of --micro-batch-size " +
                                      std::to_string(t.micro_batch));
  }
  if (auto e = validate(m); !e.empty()) throw InputError(script.origin(), e);
  if (auto e = validate(t, m); !e.empty()) throw InputError(script.origin(), e);
  return w;
}

namespace {

// How a launcher word got its value: "8", or "$NNODES = 2 (NNODES=
// ${SLURM_NNODES:-1} on line 3)" when it came from a variable.
std::string word_origin(const ShellScript& sh, const ShellWord& w) {
  if (!w.known) return w.source;
  if (w.source == w.text || w.source == shell_quote(w.text)) return w.text;
  std::string out = w.source + " = " + w.text;
  std::string name = w.source;
  if (name.size() > 3 && name.rfind("${", 0) == 0 && name.back() == '}') {
    name = name.substr(2, name.size() - 3);
  } else if (name.size() > 1 && name[0] == '$') {
    name = name.substr(1);
  }
  const auto it = sh.assignments.find(name);
  if (it != sh.assignments.end() && it->second.written != w.text) {
    out += " (" + name + "=" + it->second.written + " on line " + std::to_string(it->second.line) +
           ")";
  }
  return out;
}

}  // namespace

MegatronWorld megatron_world(const MegatronScript& script) {
  if (script.world_size) return {script.world_size, "--nnodes x --gpus-per-node"};
  // A WORLD_SIZE variable wins over the launch command: hapmoe's launchers
  // give each node its own --nproc-per-node, which reads as node 0's here.
  const ShellScript& sh = script.shell;
  constexpr long long kMax = 1 << 24;
  // A count: nullopt if not a whole number; beyond kMax is an error (a
  // world hapmoe cannot plan for is not a world it may ignore).
  auto as_int = [&](const ShellWord& w, const std::string& what) -> std::optional<long long> {
    if (!w.known || w.text.empty() ||
        !std::all_of(w.text.begin(), w.text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return std::nullopt;
    }
    if (w.text.size() > 9 || std::stoll(w.text) > kMax) {
      throw InputError(script.origin() + ":" + std::to_string(w.line),
                       what + " " + word_origin(sh, w) + " is beyond 2^24 processes");
    }
    return std::stoll(w.text);
  };
  struct Count {
    std::optional<long long> value;
    std::string from;    // "--nnodes $NNODES = 2 (...)"
    bool given = false;  // the launcher gives it (known or not)
  };
  Count nnodes, nproc, ntasks, nodes_srun, per_node_srun;
  const auto& pre = sh.launch.prefix;
  for (std::size_t i = 0; i < pre.size(); ++i) {
    if (!pre[i].known) continue;
    std::string name = pre[i].text;
    std::optional<ShellWord> value;
    const auto eq = name.find('=');
    if (eq != std::string::npos && name.rfind('-', 0) == 0) {
      value = pre[i];
      value->text = name.substr(eq + 1);
      value->source = value->text;
      name = name.substr(0, eq);
    } else if (i + 1 < pre.size()) {
      value = pre[i + 1];
    }
    const std::string written = name;
    std::replace(name.begin(), name.end(), '_', '-');
    if (!value) continue;
    Count* c = nullptr;
    if (name == "--nnodes") c = &nnodes;
    if (name == "--nproc-per-node") c = &nproc;
    if (name == "-n" || name == "--ntasks" || name == "-np") c = &ntasks;
    if (name == "-N" || name == "--nodes") c = &nodes_srun;
    if (name == "--ntasks-per-node") c = &per_node_srun;
    if (c == nullptr) continue;
    c->given = true;
    c->from = written + " " + word_origin(sh, *value);
    c->value = as_int(*value, written);
  }
  MegatronWorld out;
  auto product = [&](const Count& a, const Count& b) {
    out.from = a.from + " x " + b.from;
    if (a.value && b.value) {
      if (*a.value * *b.value > kMax) {
        throw InputError(script.origin(), "the script's world size " + out.from + " = " +
                                              std::to_string(*a.value * *b.value) +
                                              " is beyond 2^24 processes");
      }
      out.size = static_cast<int>(*a.value * *b.value);
    }
  };
  if (!nnodes.given && nproc.given && !pre.empty() && pre[0].known &&
      pre[0].text.substr(pre[0].text.find_last_of('/') + 1) == "torchrun") {
    // torchrun's --nnodes defaults to 1.
    nnodes.given = true;
    nnodes.value = 1;
    nnodes.from = "torchrun's default --nnodes 1";
  }
  if (nnodes.given && nproc.given) {
    product(nnodes, nproc);
  } else if (ntasks.given) {
    out.from = ntasks.from;
    if (ntasks.value) out.size = static_cast<int>(*ntasks.value);
  } else if (nodes_srun.given && per_node_srun.given) {
    product(nodes_srun, per_node_srun);
  }
  const auto var = sh.variables.find("WORLD_SIZE");
  if (var != sh.variables.end() && var->second.size() == 1) {
    const ShellWord& w = var->second[0];
    const std::optional<long long> v = as_int(w, "WORLD_SIZE");
    if (v || out.from.empty()) {
      const auto a = sh.assignments.find("WORLD_SIZE");
      const std::string written = a != sh.assignments.end() ? a->second.written : w.source;
      out.from = "WORLD_SIZE=" + written + " on line " + std::to_string(w.line);
      if (w.known && written != w.text) out.from += " = " + w.text;
    }
    if (v) out.size = static_cast<int>(*v);
  }
  if (out.size && *out.size < 1) out.size.reset();
  return out;
}

std::optional<int> megatron_world_size(const MegatronScript& script) {
  return megatron_world(script).size;
}

MegatronSettings megatron_settings(const MegatronScript& script, const Workload& w,
                                   int fallback_world_size) {
  const FlagReader r(script);
  MegatronSettings s;
  s.num_layers = w.model.num_layers;
  s.mtp_layers = r.opt_int("--mtp-num-layers", 0, 1000).value_or(0);
  s.num_heads = w.model.num_heads;
  s.num_query_groups = w.model.mla.enabled() ? 0 : w.model.num_kv_heads;
  s.num_experts = w.model.num_experts;
  s.seq_length = w.training.seq_len;
  s.max_position_embeddings = w.model.max_positions;
  s.fp16 = w.training.precision == Precision::kFp16;
  s.bias_linear = !r.flag("--disable-bias-linear");
  s.world_size = megatron_world_size(script).value_or(fallback_world_size);
  constexpr int kMax = 1 << 20;
  s.tp = r.opt_int("--tensor-model-parallel-size", 1, kMax).value_or(1);
  s.pp = r.opt_int("--pipeline-model-parallel-size", 1, kMax).value_or(1);
  s.cp = r.opt_int("--context-parallel-size", 1, kMax).value_or(1);
  s.ep = r.opt_int("--expert-model-parallel-size", 1, kMax).value_or(1);
  s.etp = r.opt_int("--expert-tensor-parallel-size", 1, kMax).value_or(s.tp);
  // Megatron turns sequence parallelism off, with a warning, at TP 1
  // (core_v0.15.0 arguments.py); megatron_plan notes it.
  s.sequence_parallel = r.flag("--sequence-parallel") && s.tp > 1;
  s.first_stage_layers = r.opt_int("--decoder-first-pipeline-num-layers", 0, kMax);
  s.last_stage_layers = r.opt_int("--decoder-last-pipeline-num-layers", 0, kMax);
  s.layout = r.text("--pipeline-model-parallel-layout").value_or("");
  s.account_for_embedding = r.flag("--account-for-embedding-in-pipeline-split");
  s.account_for_loss = r.flag("--account-for-loss-in-pipeline-split");
  s.vpp_layers = r.opt_int("--num-layers-per-virtual-pipeline-stage", 1, kMax);
  s.vpp_stages = r.opt_int("--num-virtual-stages-per-pipeline-rank", 1, kMax);
  s.recompute_granularity = r.text("--recompute-granularity").value_or("");
  if (r.flag("--recompute-activations")) {
    if (!s.recompute_granularity.empty() && s.recompute_granularity != "selective") {
      r.fail("--recompute-activations",
             "--recompute-activations (selective) contradicts "
             "--recompute-granularity " +
                 s.recompute_granularity);
    }
    s.recompute_granularity = "selective";
  }
  s.recompute_method = r.text("--recompute-method").value_or("");
  s.recompute_num_layers = r.opt_int("--recompute-num-layers", 0, kMax);
  if (const MegatronFlag* f = script.find("--recompute-modules")) {
    for (const ShellWord& v : f->values) {
      if (!parse_recompute_module(v.text)) {
        r.fail("--recompute-modules", "unknown module \"" + v.text + "\" (Megatron-LM's modules: " +
                                          join(recompute_module_names(~0u), " ") + ")");
      }
      s.recompute_modules.push_back(v.text);
    }
  }
  s.micro_batch = w.training.micro_batch;
  s.global_batch = w.training.global_batch;
  s.distributed_optimizer = w.training.distributed_optimizer;
  s.overlap_param_gather = r.flag("--overlap-param-gather");
  return s;
}

RecomputeSetting megatron_recompute_setting(const MegatronSettings& s) {
  if (s.recompute_granularity == "selective") {
    // Megatron's default module list is core_attn alone.
    unsigned modules = s.recompute_modules.empty() ? module_bit(RecomputeModule::kCoreAttn) : 0u;
    for (const std::string& name : s.recompute_modules) {
      if (const auto mod = parse_recompute_module(name)) modules |= module_bit(*mod);
    }
    return {RecomputeKind::kSelective, 0, modules};
  }
  if (s.recompute_granularity != "full") return {};
  if (s.recompute_method != "block") return {RecomputeKind::kFull, 0};
  const int block = s.recompute_num_layers.value_or(0);
  return block > 0 ? RecomputeSetting{RecomputeKind::kFull, block} : RecomputeSetting{};
}

Recompute megatron_stage_recompute(const MegatronSettings& s, int stage_layers) {
  return stage_recompute(megatron_recompute_setting(s), stage_layers);
}

void set_megatron_recompute(const RecomputeSetting& r, unsigned modules, MegatronSettings& s) {
  s.recompute_granularity.clear();
  s.recompute_method.clear();
  s.recompute_num_layers.reset();
  s.recompute_modules.clear();
  if (r.kind == RecomputeKind::kFull) {
    s.recompute_granularity = "full";
    s.recompute_method = r.block == 0 ? "uniform" : "block";
    s.recompute_num_layers = r.block == 0 ? 1 : r.block;
  } else if (r.kind == RecomputeKind::kSelective) {
    s.recompute_granularity = "selective";
    s.recompute_modules = recompute_module_names(r.modules & modules);
  }
}

Plan megatron_plan(MegatronScript& script, const Workload& w, const ClusterSpec& cluster) {
  const MegatronWorld world = megatron_world(script);
  const std::string assumed =
      ": the whole cluster, " + std::to_string(cluster.total_devices()) + " devices, is assumed";
  if (!world.size && world.from.empty()) {
    add_note(script,
             "the script does not say its world size (torchrun --nnodes x "
             "--nproc-per-node, WORLD_SIZE or srun -n)" +
                 assumed);
  } else if (!world.size) {
    add_note(script, "the script's world size is not known before it runs (" + world.from + ")" +
                         assumed +
                         " (evaluate --nnodes N --gpus-per-node G, or --megatron-env for the "
                         "variable, says it)");
  }
  // "the world size N from ...", for messages.
  const std::string world_said =
      world.size ? "world size " + std::to_string(*world.size) + " from " + world.from
                 : "world size " + std::to_string(cluster.total_devices()) + ", the cluster's";
  const MegatronSettings s = megatron_settings(script, w, cluster.total_devices());
  if (const auto v = check_megatron_settings(s); !v.empty()) {
    throw InputError(script.origin(),
                     "Megatron-LM would reject the script's parallel settings (" + world_said +
                         "): " + join(v, "; ") +
                         (script.world_size ? ""
                                            : " (evaluate --nnodes N --gpus-per-node G sets the "
                                              "world the script runs on)"));
  }
  if (s.recompute_granularity == "full" && s.recompute_method == "uniform" &&
      s.recompute_num_layers.value_or(1) > 1) {
    add_note(script,
             "--recompute-method uniform with --recompute-num-layers > 1 is costed as "
             "full recomputation of every layer");
  }
  if (s.world_size > cluster.total_devices()) {
    throw InputError(script.origin(), "the script runs " + std::to_string(s.world_size) +
                                          " processes (" + world.from + ") but the cluster has " +
                                          std::to_string(cluster.total_devices()) + " devices");
  }
  // core_v0.15.0 arguments.py: SP is turned off at TP 1, then
  // --tp-comm-overlap asserts it is on.
  if (const MegatronFlag* overlap = script.find("--tp-comm-overlap");
      overlap != nullptr && !s.sequence_parallel) {
    throw InputError(script.origin() + ":" + std::to_string(overlap->line),
                     "--tp-comm-overlap needs sequence parallelism, " +
                         std::string(s.tp == 1 ? "which Megatron turns off at "
                                                 "--tensor-model-parallel-size 1"
                                               : "and the script does not give "
                                                 "--sequence-parallel") +
                         ": Megatron stops (\"Tensor parallel communication/GEMM overlap can "
                         "happen only when sequence parallelism is enabled\")");
  }
  if (s.tp == 1 && script.find("--sequence-parallel")) {
    add_note(script,
             "--sequence-parallel with --tensor-model-parallel-size 1: Megatron turns it off "
             "with a warning, and so does hapmoe");
  }
  Plan plan;
  // Without experts the expert TP (Megatron's default: TP) means nothing:
  // a dense plan's TPE is 1.
  plan.parallel = {s.pp,   s.tp,          s.cp,   s.ep, w.model.is_moe() ? s.etp : 1,
                   s.dp(), s.micro_batch, s.vpp()};
  const std::vector<int> layers = megatron_stage_layers(s);
  const int per_stage = plan.parallel.stage_devices();
  // Device type per stage: the script's HAPMOE_STAGE_DEVICES, else the
  // rank order over the pools.
  std::vector<int> types;
  const auto it = script.shell.variables.find("HAPMOE_STAGE_DEVICES");
  if (it != script.shell.variables.end()) {
    for (const ShellWord& name : it->second) {
      int found = -1;
      for (int h = 0; h < cluster.num_types(); ++h) {
        if (to_lower(cluster.pools[static_cast<std::size_t>(h)].device.name) ==
            to_lower(name.text)) {
          found = h;
        }
      }
      if (!name.known || found < 0) {
        throw InputError(name.line > 0 ? script.origin() + ":" + std::to_string(name.line)
                                       : std::string("--megatron-stage-devices"),
                         "HAPMOE_STAGE_DEVICES names device \"" + name.source +
                             "\", which is not in the cluster");
      }
      types.push_back(found);
    }
    if (static_cast<int>(types.size()) != s.pp) {
      throw InputError(script.origin(), "HAPMOE_STAGE_DEVICES has " + std::to_string(types.size()) +
                                            " entries but --pipeline-model-parallel-size is " +
                                            std::to_string(s.pp));
    }
  } else {
    long long first_rank = 0;
    for (int i = 0; i < s.pp; ++i) {
      long long start = 0;
      int type = -1;
      for (int h = 0; h < cluster.num_types(); ++h) {
        const long long end = start + cluster.pools[static_cast<std::size_t>(h)].devices();
        if (first_rank >= start && first_rank < end) {
          if (first_rank + per_stage > end) {
            throw InputError(script.origin(),
                             "pipeline stage " + std::to_string(i) + " (ranks " +
                                 std::to_string(first_rank) + ".." +
                                 std::to_string(first_rank + per_stage - 1) +
                                 ") would span two device pools in rank order; put "
                                 "HAPMOE_STAGE_DEVICES=(...) in the script to name each "
                                 "stage's device type");
          }
          type = h;
          break;
        }
        start = end;
      }
      types.push_back(type);
      first_rank += per_stage;
    }
    if (cluster.num_types() > 1) {
      std::string list;
      for (int h : types)
        list += (list.empty() ? "" : " ") + cluster.pools[static_cast<std::size_t>(h)].device.name;
      add_note(script, "device type per stage by rank order over the cluster's pools: " + list);
    }
  }
  for (int i = 0; i < s.pp; ++i) {
    StagePlan st;
    st.device_type = types[static_cast<std::size_t>(i)];
    st.layers = layers[static_cast<std::size_t>(i)];
    st.recompute = megatron_stage_recompute(s, st.layers);
    if (st.recompute.kind == RecomputeKind::kFull && st.recompute.layers == 0) {
      st.recompute = {RecomputeKind::kNone, 0};
    }
    plan.stages.push_back(st);
  }
  return plan;
}

}  // namespace hapmoe
