// Reading Megatron-LM scripts as hapmoe inputs: the model and training
// settings, notes on what is kept or approximated, contradictions named
// with their flags, and the script's own parallel settings as a plan.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "costmodel/errors.h"
#include "io/inputs/cluster_io.h"
#include "io/inputs/model_io.h"
#include "io/megatron/megatron_script.h"
#include "tests/io/cli_run.h"

namespace hapmoe {
namespace {

namespace fs = std::filesystem;

const std::string kData = std::string(HAPMOE_TEST_DATA) + "/megatron/";

Workload preset(const char* name) { return find_model_preset(name)->workload; }

TEST(MegatronScript, Mixtral8x7bExampleStyleReadsAsThePreset) {
  MegatronScript s = read_megatron_script(kData + "mixtral_8x7b.sh");
  Workload w = megatron_workload(s);
  Workload expected = preset("mixtral-8x7b");
  expected.model.name = w.model.name;
  // The script's --overlap-grad-reduce and --overlap-param-gather.
  expected.training.overlap.grad_reduce = true;
  expected.training.overlap.param_gather = true;
  EXPECT_EQ(w.model, expected.model);
  EXPECT_EQ(w.training, expected.training);
  EXPECT_EQ(megatron_world_size(s), 32);  // WORLD_SIZE=$(($GPUS_PER_NODE*$NNODES))
  EXPECT_TRUE(s.unknown.empty());
  // The if-branch's wandb flags: WANDB_API_KEY is set by nothing, so the
  // branch is not taken (bash without it in the environment) and its flags
  // are not read; they are kept for the launcher, under the condition.
  EXPECT_FALSE(s.has("--wandb-project"));
  const auto wandb = std::find_if(s.flags.begin(), s.flags.end(), [](const MegatronFlag& f) {
    return f.name == "--wandb-project";
  });
  ASSERT_NE(wandb, s.flags.end());
  EXPECT_TRUE(wandb->launcher_only);
  EXPECT_EQ(wandb->guard, "[ -n \"${WANDB_API_KEY}\" ]");
  // Values from outside the script stay as written, for the launcher.
  const MegatronFlag* save = s.find("--save");
  ASSERT_NE(save, nullptr);
  EXPECT_FALSE(save->values[0].known);
  EXPECT_EQ(save->values[0].source, "$1");
}

TEST(MegatronScript, DeepSeekV3LikeWithMlaLayerFreqAndSharedExpert) {
  MegatronScript s = read_megatron_script(kData + "deepseek_v3_like.sh");
  const Workload w = megatron_workload(s);
  Workload expected = preset("deepseek-v3");
  ModelSpec& m = expected.model;
  m.name = w.model.name;
  m.num_layers = 16;
  m.mtp_layers = 0;  // the script has no --mtp-num-layers
  m.moe_layers.assign(16, 1);
  for (int l = 0; l < 3; ++l) m.moe_layers[static_cast<std::size_t>(l)] = 0;
  EXPECT_EQ(w.model, m);
  EXPECT_EQ(w.training.global_batch, 512);
  EXPECT_EQ(w.training.dispatcher, Dispatcher::kFlex);  // flex with --moe-enable-deepep
  EXPECT_TRUE(w.training.distributed_optimizer);
  // The one unknown flag is kept and named once, in one note.
  EXPECT_EQ(s.unknown, std::vector<std::string>{"--mystery-flag"});
  int mentions = 0;
  for (const std::string& n : s.notes) mentions += n.find("--mystery-flag") != std::string::npos;
  EXPECT_EQ(mentions, 1);
  // --megatron-env changes a variable the script reads from outside.
  MegatronScript s8 =
      read_megatron_script(kData + "deepseek_v3_like.sh", {.env = {{"NUM_LAYERS", "8"}}});
  EXPECT_EQ(megatron_workload(s8).model.num_moe_layers(), 5);
}

// The style of Megatron-LM's modelopt confs: flags in a string variable with
// continuations, expanded unquoted, and an undefined ${EXTRA} after a switch.
TEST(MegatronScript, FlagsInAStringVariable) {
  MegatronScript s = parse_megatron_script(
      "CFG=\" \\\n    --num-layers 4 --hidden-size 64 \\\n    --num-attention-heads 4 "
      "--seq-length 128 --micro-batch-size 1 --global-batch-size 8 --vocab-size 100 \\\n"
      "    --num-experts 4 --moe-layer-freq ([0]*1+[1]*3) --bf16 \\\n\"\n"
      "${PYTHON:-python} pretrain_gpt.py ${CFG} ${EXTRA} --save $CKPT $MORE\n",
      "conf.sh");
  const Workload w = megatron_workload(s);
  EXPECT_EQ(w.model.moe_layers, (std::vector<std::uint8_t>{0, 1, 1, 1}));
  EXPECT_EQ(s.find("--save")->values.size(), 1u);  // $MORE is a word of its own
  int opaque = 0;
  for (const MegatronFlag& f : s.flags) opaque += f.name.empty();
  EXPECT_EQ(opaque, 2);  // ${EXTRA} and $MORE, kept for the launcher
}

TEST(MegatronScript, MoeLayerFreqForms) {
  auto freq = [](const std::string& f) {
    MegatronScript s = parse_megatron_script(
        "--num-layers 4 --hidden-size 64 --num-attention-heads 4 --seq-length 128 "
        "--micro-batch-size 1 --global-batch-size 8 --bf16 --vocab-size 100 --num-experts 4 "
        "--moe-layer-freq " +
            f + "\n",
        "t");
    return megatron_workload(s).model.moe_layers;
  };
  using M = std::vector<std::uint8_t>;
  EXPECT_EQ(freq("1"), (M{1, 1, 1, 1}));
  EXPECT_EQ(freq("2"), (M{1, 0, 1, 0}));
  EXPECT_EQ(freq("'[0,1,1,0]'"), (M{0, 1, 1, 0}));
  EXPECT_EQ(freq("'([0]*1+[1]*3)'"), (M{0, 1, 1, 1}));
  EXPECT_EQ(freq("'[0]+[1]*2+([0])'"), (M{0, 1, 1, 0}));
  EXPECT_THROW(freq("'[1]*5'"), InputError);
  EXPECT_THROW(freq("'[1]*1000000000'"), InputError);
  EXPECT_THROW(freq("'[2,1,1,1]'"), InputError);
  EXPECT_THROW(freq("0"), InputError);
}

// Every error names the file, the line where it can and the flags.
TEST(MegatronScript, ContradictionsAndMissingValuesNameTheFlags) {
  const std::string base =
      "python pretrain_gpt.py \\\n"
      "  --num-layers 4 --hidden-size 64 --num-attention-heads 4 --seq-length 128 \\\n"
      "  --micro-batch-size 1 --global-batch-size 8 --vocab-size 100 \\\n";
  struct Case {
    std::string flags;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {"--bf16 --num-query-groups 2",
       "t.sh:4: --num-query-groups: --num-query-groups without --group-query-attention"},
      {"--bf16 --group-query-attention", "--group-query-attention without --num-query-groups"},
      {"--bf16 --kv-lora-rank 32", "--kv-lora-rank without --multi-latent-attention"},
      {"--bf16 --fp16", "--bf16 and --fp16 are both given"},
      {"--bf16 --moe-router-topk 2", "--moe-router-topk without --num-experts"},
      {"--bf16 --num-experts 4 --moe-router-topk 8", "--moe-router-topk 8 exceeds --num-experts 4"},
      {"", "fp32"},
      {"--bf16 --swiglu yes", "t.sh:4: --swiglu: takes no value"},
      {"--bf16 --num-query-groups", "needs a value"},
      {"--bf16 --group-query-attention --num-query-groups 3", "does not divide"},
      {"--bf16 --max-position-embeddings 64", "smaller than --seq-length"},
      {"--bf16 --hidden-size $H", "$H is not defined by the script"},
      {"--bf16 --moe-token-dispatcher-type magic", "not one of allgather, alltoall, flex"},
      {"--bf16 positional", "t.sh:4: --bf16: takes no value, got \"positional\""},
  };
  for (const Case& c : cases) {
    try {
      MegatronScript s = parse_megatron_script(base + "  " + c.flags + "\n", "t.sh");
      megatron_workload(s);
      ADD_FAILURE() << "no error for " << c.flags;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(c.expect), std::string::npos)
          << c.flags << ": " << e.what();
    }
  }
  EXPECT_THROW(parse_megatron_script("positional --num-layers 2\n", "t.sh"), InputError);
  // Missing required flag and unknown vocabulary.
  try {
    MegatronScript s = parse_megatron_script("--hidden-size 64\n", "t.sh");
    megatron_workload(s);
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--num-layers is required"), std::string::npos);
  }
  MegatronScript no_vocab = parse_megatron_script(
      "--num-layers 4 --hidden-size 64 --num-attention-heads 4 --seq-length 128 "
      "--micro-batch-size 1 --global-batch-size 8 --bf16 --tokenizer-type HuggingFaceTokenizer\n",
      "t.sh");
  EXPECT_THROW(megatron_workload(no_vocab), InputError);
  MegatronDefaults d;
  d.vocab = 500;
  EXPECT_EQ(megatron_workload(no_vocab, d).model.vocab, 500);
}

TEST(MegatronScript, DefaultsAreMegatrons) {
  MegatronScript s = parse_megatron_script(
      "torchrun --nnodes 2 --nproc-per-node 4 pretrain_gpt.py --num-layers 4 --hidden-size 96 "
      "--num-attention-heads 4 --seq-length 128 --micro-batch-size 2 --fp16 "
      "--tokenizer-type GPT2BPETokenizer --swiglu --tensor-model-parallel-size 2\n",
      "t.sh");
  const Workload w = megatron_workload(s);
  EXPECT_EQ(w.model.ffn_hidden, 256);  // int(4*96*2/3 / 64) * 64
  EXPECT_EQ(w.model.vocab, 50257);
  EXPECT_TRUE(w.model.tied_embeddings);
  EXPECT_EQ(w.model.positions, PositionKind::kLearned);
  EXPECT_EQ(w.model.max_positions, 128);
  EXPECT_EQ(w.training.global_batch, 8);  // micro 2 x DP 4
  EXPECT_FALSE(w.training.distributed_optimizer);
  EXPECT_EQ(w.training.precision, Precision::kFp16);
}

TEST(MegatronScript, ScriptPlanOnAHomogeneousCluster) {
  MegatronScript s = read_megatron_script(kData + "deepseek_v3_like.sh");
  const Workload w = megatron_workload(s);
  const Plan p = megatron_plan(s, w, load_cluster("H800:64"));
  EXPECT_EQ(p.parallel, (ParallelConfig{4, 2, 1, 8, 1, 8, 1}));
  ASSERT_EQ(p.stages.size(), 4u);
  const int layers[] = {3, 5, 5, 3};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(p.stages[static_cast<std::size_t>(i)].layers, layers[i]);
    EXPECT_EQ(p.stages[static_cast<std::size_t>(i)].recompute,
              (Recompute{RecomputeKind::kFull, 2}));
  }
}

// --make-vocab-size-divisible-by is read (default 128) and written back by a
// launcher for a model that is not from a script.
TEST(MegatronScript, VocabularyPaddingMultipleIsRead) {
  const std::string head =
      "--num-layers 4 --hidden-size 64 --num-attention-heads 4 --seq-length 128 "
      "--micro-batch-size 1 --global-batch-size 8 --bf16 --vocab-size 1000";
  MegatronScript d = parse_megatron_script(head + "\n", "t.sh");
  EXPECT_EQ(megatron_workload(d).model.vocab_divisible_by, 128);
  MegatronScript s = parse_megatron_script(head + " --make-vocab-size-divisible-by 64\n", "t.sh");
  const Workload w = megatron_workload(s);
  EXPECT_EQ(w.model.vocab_divisible_by, 64);
  EXPECT_EQ(padded_vocab(w.model, 2), 1024.0);  // a multiple of 128
  EXPECT_TRUE(s.notes.empty() || s.notes.front().find("make-vocab") == std::string::npos);
  const std::string text = workload_to_json(w);
  EXPECT_NE(text.find("\"vocab_divisible_by\": 64"), std::string::npos) << text;
  EXPECT_EQ(parse_workload_json(text, "rt.json").model.vocab_divisible_by, 64);
}

// Megatron takes the vocabulary from its tokenizer: the fixed types and the
// model families a --tokenizer-model names (case-insensitive, any
// spelling of the family) have public sizes; NullTokenizer adds its EOD
// token to --vocab-size. The note says the size, why, and the padding.
TEST(MegatronScript, VocabularyFromTheTokenizer) {
  const std::string head =
      "--num-layers 4 --hidden-size 64 --num-attention-heads 4 --seq-length 128 "
      "--micro-batch-size 1 --global-batch-size 8 --bf16 ";
  struct Case {
    std::string flags;
    int vocab;
    std::string note;  // a part of the vocabulary note ("" : no note)
  };
  for (const Case& c : std::vector<Case>{
           {"--tokenizer-type HuggingFaceTokenizer --tokenizer-model unsloth/DeepSeek-V3", 129280,
            "from --tokenizer-model unsloth/DeepSeek-V3 (REFERENCE.md §2.2 DeepSeek-V3"},
           {"--tokenizer-type HuggingFaceTokenizer --tokenizer-model meta-llama/Meta-Llama-3-8B",
            128256, "Llama-3"},
           {"--tokenizer-type HuggingFaceTokenizer --tokenizer-model /ckpt/meta_llama_3.1_70b",
            128256, "Llama-3"},
           {"--tokenizer-type HuggingFaceTokenizer --tokenizer-model qwen/QWEN3-8b", 151936,
            "Qwen3"},
           {"--tokenizer-type HuggingFaceTokenizer --tokenizer-model "
            "mistralai/Mixtral-8x22B-Instruct-v0.1",
            32768, "Mixtral-8x22B"},
           {"--tokenizer-type GPT2BPETokenizer --vocab-file v.json --merge-file m.txt", 50257,
            "--tokenizer-type GPT2BPETokenizer"},
           {"--tokenizer-type Llama2Tokenizer --tokenizer-model /data/tokenizer.model", 32000,
            "Llama-2"},
           // The tokenizer's size, not --vocab-size, as Megatron does.
           {"--vocab-size 50000 --tokenizer-type HuggingFaceTokenizer --tokenizer-model "
            "Qwen/Qwen3-30B-A3B",
            151936, "not --vocab-size 50000"},
           // TP 4: padded to a multiple of 128 x 4 = 512.
           {"--tokenizer-type HuggingFaceTokenizer --tokenizer-model deepseek-ai/DeepSeek-R1 "
            "--tensor-model-parallel-size 4",
            129280, "padded to 129536 (a multiple of --make-vocab-size-divisible-by 128 x TP 4)"},
           {"--vocab-size 100 --tokenizer-type NullTokenizer", 101, ""},
           {"--vocab-size 100 --tokenizer-type HuggingFaceTokenizer --tokenizer-model my/own", 100,
            ""},
       }) {
    MegatronScript s = parse_megatron_script(head + c.flags + "\n", "t.sh");
    const Workload w = megatron_workload(s);
    EXPECT_EQ(w.model.vocab, c.vocab) << c.flags;
    std::string notes;
    for (const std::string& n : s.notes) notes += n + "\n";
    if (c.note.empty()) {
      EXPECT_EQ(notes.find("vocabulary"), std::string::npos) << c.flags << "\n" << notes;
    } else {
      EXPECT_NE(notes.find("vocabulary " + std::to_string(c.vocab) + " from"), std::string::npos)
          << c.flags << "\n"
          << notes;
      EXPECT_NE(notes.find(c.note), std::string::npos) << c.flags << "\n" << notes;
    }
  }
  // Unknown: the message names the tokenizer and the way out.
  MegatronScript u = parse_megatron_script(
      head + "--tokenizer-type HuggingFaceTokenizer --tokenizer-model my/own\n", "u.sh");
  try {
    megatron_workload(u);
    ADD_FAILURE();
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("u.sh"), std::string::npos) << what;
    EXPECT_NE(what.find("--tokenizer-model my/own"), std::string::npos) << what;
    EXPECT_NE(what.find("--vocab-size N"), std::string::npos) << what;
  }
}

// --recompute-modules is costed module by module; without it selective is
// Megatron's default, core_attn alone.
TEST(MegatronScript, RecomputeModulesAreReadAsWritten) {
  const std::string head =
      "--num-layers 4 --hidden-size 64 --num-attention-heads 4 --seq-length 128 "
      "--micro-batch-size 1 --global-batch-size 8 --bf16 --vocab-size 1000 "
      "--recompute-granularity selective";
  auto stage_recompute = [&](const std::string& extra) {
    MegatronScript s = parse_megatron_script(head + extra + "\n", "t.sh");
    const Workload w = megatron_workload(s);
    return megatron_plan(s, w, load_cluster("H800:8")).stages.front().recompute;
  };
  EXPECT_EQ(
      stage_recompute(" --recompute-modules layernorm mlp"),
      (Recompute{RecomputeKind::kSelective, 0,
                 module_bit(RecomputeModule::kLayernorm) | module_bit(RecomputeModule::kMlp)}));
  EXPECT_EQ(stage_recompute(""),
            (Recompute{RecomputeKind::kSelective, 0, module_bit(RecomputeModule::kCoreAttn)}));
  MegatronScript s =
      parse_megatron_script(head + " --recompute-modules layernorm attn_norm\n", "t.sh");
  try {
    const Workload w = megatron_workload(s);
    (void)megatron_plan(s, w, load_cluster("H800:8"));  // the modules are read here
    ADD_FAILURE() << "an unknown module was accepted";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("--recompute-modules"), std::string::npos) << what;
    EXPECT_NE(what.find("\"attn_norm\""), std::string::npos) << what;
  }
}

// Rank order over pools: stage i holds ranks [i*S, (i+1)*S), pools fill in
// the order listed.
TEST(MegatronScript, ScriptPlanDeviceTypesFollowRankOrder) {
  MegatronScript s = read_megatron_script(kData + "mixtral_s.sh");
  const Workload w = megatron_workload(s);
  const ClusterSpec c1 = load_cluster("paper:16-1");  // H800 first
  Plan p = megatron_plan(s, w, c1);
  EXPECT_EQ(p.parallel, (ParallelConfig{2, 2, 1, 4, 2, 4, 1}));  // ETP defaults to TP
  EXPECT_EQ(c1.pools[static_cast<std::size_t>(p.stages[0].device_type)].device.name, "H800");
  EXPECT_EQ(c1.pools[static_cast<std::size_t>(p.stages[1].device_type)].device.name, "910B");
  EXPECT_EQ(p.stages[0].layers + p.stages[1].layers, 24);
  // A stage that would straddle two pools is an error that says how to fix it.
  MegatronScript straddle = parse_megatron_script(
      "WORLD_SIZE=24\npython pretrain_gpt.py --num-layers 4 --hidden-size 64 "
      "--num-attention-heads 4 --seq-length 128 --micro-batch-size 1 --global-batch-size 24 "
      "--bf16 --vocab-size 100 --pipeline-model-parallel-size 2\n",
      "t.sh");
  const Workload ws = megatron_workload(straddle);
  try {
    megatron_plan(straddle, ws, load_cluster("paper:24-1"));
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("HAPMOE_STAGE_DEVICES"), std::string::npos) << e.what();
  }
}

// Messages about the world size say where it came from, down to the
// variable's assignment; a world beyond what hapmoe plans is an error, not
// "the script does not say".
TEST(MegatronScript, WorldSizeMessagesNameTheVariable) {
  const std::string text =
      "NNODES=${SLURM_NNODES:-1}\n"
      "torchrun --nnodes $NNODES --nproc-per-node 8 pretrain_gpt.py --num-layers 4 "
      "--hidden-size 64 --num-attention-heads 4 --seq-length 128 --micro-batch-size 1 "
      "--global-batch-size 64 --bf16 --vocab-size 100\n";
  auto plan_error = [&](MegatronScript& s) {
    try {
      const Workload w = megatron_workload(s);
      (void)megatron_plan(s, w, load_cluster("H800:16"));
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  MegatronScript four = parse_megatron_script(text, "t.sh", {.env = {{"SLURM_NNODES", "4"}}});
  EXPECT_EQ(megatron_world(four).from,
            "--nnodes $NNODES = 4 (NNODES=${SLURM_NNODES:-1} on line 1) x --nproc-per-node 8");
  EXPECT_NE(plan_error(four).find("the script runs 32 processes (--nnodes $NNODES = 4 "
                                  "(NNODES=${SLURM_NNODES:-1} on line 1) x --nproc-per-node 8) "
                                  "but the cluster has 16 devices"),
            std::string::npos)
      << plan_error(four);
  EXPECT_EQ(megatron_world_size(parse_megatron_script(text, "t.sh")), 8);  // the default

  // Unknown: the note names what the script says.
  MegatronScript unknown = parse_megatron_script(
      "N=$SLURM_NNODES\ntorchrun --nnodes $N --nproc-per-node 8 pretrain_gpt.py --num-layers 4 "
      "--hidden-size 64 --num-attention-heads 4 --seq-length 128 --micro-batch-size 1 "
      "--global-batch-size 64 --bf16 --vocab-size 100\n",
      "t.sh");
  EXPECT_EQ(plan_error(unknown), "");
  EXPECT_NE(std::find(unknown.notes.begin(), unknown.notes.end(),
                      "the script's world size is not known before it runs (--nnodes "
                      "$SLURM_NNODES x --nproc-per-node 8): the whole cluster, 16 devices, is "
                      "assumed (evaluate --nnodes N --gpus-per-node G, or --megatron-env for the "
                      "variable, says it)"),
            unknown.notes.end());

  // 2^32 nodes: an error naming the variable (it used to read as "not said").
  MegatronScript huge =
      parse_megatron_script(text, "t.sh", {.env = {{"SLURM_NNODES", "4294967296"}}});
  EXPECT_NE(plan_error(huge).find("t.sh:2: --nnodes $NNODES = 4294967296 (NNODES="
                                  "${SLURM_NNODES:-1} on line 1) is beyond 2^24 processes"),
            std::string::npos)
      << plan_error(huge);
  EXPECT_THROW(megatron_world_size(parse_megatron_script(
                   "WORLD_SIZE=99999999999\npython pretrain_gpt.py --num-layers 2\n", "t.sh")),
               InputError);
  // torchrun without --nnodes runs one node.
  const MegatronWorld one = megatron_world(parse_megatron_script(
      "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 2\n", "t.sh"));
  EXPECT_EQ(one.size, 8);
  EXPECT_EQ(one.from, "torchrun's default --nnodes 1 x --nproc_per_node 8");
}

TEST(MegatronScript, ScriptPlanRejectsWhatMegatronRejects) {
  // Degrees whose product overflows 32 bits are rejected, not divided by.
  MegatronScript huge = parse_megatron_script(
      "--num-layers 6 --hidden-size 64 --num-attention-heads 4 --seq-length 128 "
      "--micro-batch-size 1 --global-batch-size 8 --bf16 --vocab-size 100 "
      "--tensor-model-parallel-size 1048576 --pipeline-model-parallel-size 1048576 "
      "--context-parallel-size 1048576\n",
      "t.sh");
  const Workload wh = megatron_workload(huge);
  EXPECT_THROW(megatron_plan(huge, wh, load_cluster("H800:8")), InputError);

  MegatronScript s = parse_megatron_script(
      "torchrun --nnodes 1 --nproc-per-node 8 pretrain_gpt.py --num-layers 6 --hidden-size 64 "
      "--num-attention-heads 4 --seq-length 128 --micro-batch-size 1 --global-batch-size 8 "
      "--bf16 --vocab-size 100 --pipeline-model-parallel-size 4\n",
      "t.sh");
  const Workload w = megatron_workload(s);
  try {
    megatron_plan(s, w, load_cluster("H800:8"));
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("§3.2.8"), std::string::npos) << e.what();
  }
}

// Megatron core_v0.15.0 turns --sequence-parallel off with a warning when
// TP is 1 (arguments.py); the reader does the same, with a note, instead
// of refusing the script.
TEST(MegatronScript, SequenceParallelWithTp1IsTurnedOffWithANote) {
  MegatronScript s = parse_megatron_script(
      "torchrun --nnodes 1 --nproc-per-node 8 pretrain_gpt.py --num-layers 8 --hidden-size 64 "
      "--num-attention-heads 4 --seq-length 128 --micro-batch-size 1 --global-batch-size 8 "
      "--bf16 --vocab-size 100 --sequence-parallel\n",
      "sp.sh");
  const Workload w = megatron_workload(s);
  const Plan p = megatron_plan(s, w, load_cluster("H800:8"));
  EXPECT_EQ(p.parallel.tp, 1);
  EXPECT_EQ(p.parallel.dp, 8);
  const bool noted = std::any_of(s.notes.begin(), s.notes.end(), [](const std::string& n) {
    return n.find("--sequence-parallel") != std::string::npos &&
           n.find("turns it off") != std::string::npos;
  });
  EXPECT_TRUE(noted) << (s.notes.empty() ? "" : s.notes.back());
  EXPECT_FALSE(megatron_settings(s, w, 8).sequence_parallel);
}

// A dense model with TP > 1: Megatron's expert TP defaults to TP, which
// must not be held against a model without experts (the plan's TPE is 1).
TEST(MegatronScript, DenseModelWithTensorParallelism) {
  MegatronScript s = parse_megatron_script(
      "torchrun --nnodes 1 --nproc-per-node 8 pretrain_gpt.py --num-layers 8 --hidden-size 64 "
      "--num-attention-heads 4 --seq-length 128 --micro-batch-size 1 --global-batch-size 8 "
      "--bf16 --vocab-size 100 --tensor-model-parallel-size 4 --sequence-parallel\n",
      "dense.sh");
  const Workload w = megatron_workload(s);
  ASSERT_FALSE(w.model.is_moe());
  const Plan p = megatron_plan(s, w, load_cluster("H800:8"));
  EXPECT_EQ(p.parallel.tp, 4);
  EXPECT_EQ(p.parallel.ep, 1);
  EXPECT_EQ(p.parallel.tpe, 1);
  EXPECT_EQ(p.parallel.dp, 2);
}

// Virtual pipelining, three ways of saying it, reads as the plan's vpp and
// is costed (no "not modelled" note). 8 layers on 8 ranks, PP 2, DP 4:
// M = 8/(1·4) = 2, a multiple of PP.
std::string small_script(const std::string& extra) {
  return "torchrun --nnodes 1 --nproc-per-node 8 pretrain_gpt.py --num-layers 8 "
         "--hidden-size 64 --num-attention-heads 4 --seq-length 128 --micro-batch-size 1 "
         "--global-batch-size 8 --bf16 --vocab-size 100 --num-experts 4 "
         "--pipeline-model-parallel-size 2 " +
         extra + "\n";
}

// Megatron-LM's entry points other than pretrain_gpt.py train models the
// cost model cannot represent: refused, naming the script's line and the
// entry point (docs/megatron.md, "Entry points").
TEST(MegatronScript, NonGptEntryPointsAreRefused) {
  struct Case {
    const char* entry;
    const char* what;
  };
  const std::vector<Case> cases = {
      {"pretrain_t5.py", "T5, an encoder-decoder model"},
      {"pretrain_bert.py", "BERT"},
      {"/opt/Megatron-LM/pretrain_mamba.py", "a hybrid Mamba model"},
      {"pretrain_vlm.py", "a vision-language model"},
      {"pretrain_retro.py", "RETRO"},
      {"pretrain_ict.py", "an ICT biencoder"},
      {"pretrain_vision_dino.py", "a vision transformer"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.entry);
    std::string text = small_script("");
    text.replace(text.find("pretrain_gpt.py"), 15, c.entry);
    try {
      (void)parse_megatron_script("# a comment\n" + text, "t.sh");
      ADD_FAILURE() << "no error";
    } catch (const InputError& e) {
      EXPECT_EQ(e.where(), "t.sh:2");
      const std::string what = e.what();
      const std::string name = std::string(c.entry).substr(std::string(c.entry).rfind('/') + 1);
      EXPECT_NE(what.find("the script runs " + name + ", which trains " + c.what),
                std::string::npos)
          << what;
      EXPECT_NE(what.find("decoder-only GPT models (pretrain_gpt.py) only"), std::string::npos)
          << what;
      EXPECT_NE(what.find("refused"), std::string::npos) << what;
    }
  }
  // The hostile-input fixtures, in the style of Megatron-LM's examples.
  const std::string bad = std::string(HAPMOE_SOURCE_DIR) + "/tests/bad_inputs/";
  for (const char* f : {"megatron_t5.sh", "megatron_bert.sh"}) {
    SCOPED_TRACE(f);
    EXPECT_THROW((void)read_megatron_script(bad + f), InputError);
  }
}

TEST(MegatronScript, OtherEntryPointsAreReadAsGptWithANote) {
  const std::string note =
      "the entry point pretrain_qwen.py is not Megatron-LM's pretrain_gpt.py; its flags are "
      "read as a decoder-only GPT model";
  std::string text = small_script("");
  text.replace(text.find("pretrain_gpt.py"), 15, "examples/qwen3/pretrain_qwen.py");
  MegatronScript s = parse_megatron_script(text, "t.sh");
  EXPECT_EQ(megatron_workload(s).model.num_layers, 8);
  EXPECT_EQ(std::count(s.notes.begin(), s.notes.end(), note), 1)
      << ::testing::PrintToString(s.notes);
  // pretrain_gpt.py, and a bare argument list, are read without it.
  const std::string gpt = small_script("");
  for (const std::string& t : {gpt, gpt.substr(gpt.find("--num-layers"))}) {
    MegatronScript plain = parse_megatron_script(t, "t.sh");
    for (const std::string& n : plain.notes) {
      EXPECT_EQ(n.find("entry point"), std::string::npos) << n;
    }
  }
}

TEST(MegatronScript, HybridMambaFlagsAreRefused) {
  for (const char* flag : {"--hybrid-override-pattern M-M-M*-", "--hybrid-attention-ratio 0.08",
                           "--hybrid-mlp-ratio 0.5"}) {
    SCOPED_TRACE(flag);
    const std::string name = std::string(flag).substr(0, std::string(flag).find(' '));
    try {
      (void)parse_megatron_script(small_script(flag), "t.sh");
      ADD_FAILURE() << "no error";
    } catch (const InputError& e) {
      EXPECT_EQ(e.where(), "t.sh:1: " + name);
      const std::string what = e.what();
      EXPECT_NE(what.find(std::string(flag) + " describes a hybrid Mamba model"), std::string::npos)
          << what;
      EXPECT_NE(what.find("refused"), std::string::npos) << what;
    }
  }
}

TEST(MegatronScript, VirtualPipelineStagesReadAsThePlansVpp) {
  struct Case {
    const char* flags;
    int vpp;
    std::vector<int> layers;
  };
  const std::vector<Case> cases = {
      {"--num-virtual-stages-per-pipeline-rank 2", 2, {4, 4}},
      {"--num-virtual-stages-per-pipeline-rank 4", 4, {4, 4}},
      {"--num-layers-per-virtual-pipeline-stage 2", 2, {4, 4}},  // 4 layers per rank / 2
      {"--num-layers-per-virtual-pipeline-stage 1", 4, {4, 4}},
      // A layout of PP·v = 4 stages: rank i holds stages i and i + 2.
      {"--pipeline-model-parallel-layout 'Et*3|t|t*2|t*2,L'", 2, {5, 3}},
      {"--pipeline-model-parallel-layout 'Et|t|t|t*2|t|t*2,L'", 3, {3, 5}},
      {"", 1, {4, 4}},
  };
  const ClusterSpec cluster = load_cluster("H800:8");
  for (const Case& c : cases) {
    SCOPED_TRACE(c.flags);
    MegatronScript s = parse_megatron_script(small_script(c.flags), "t.sh");
    const Workload w = megatron_workload(s);
    const Plan p = megatron_plan(s, w, cluster);
    EXPECT_EQ(p.parallel.vpp, c.vpp);
    EXPECT_EQ(p.parallel, (ParallelConfig{2, 1, 1, 1, 1, 4, 1, c.vpp}));
    ASSERT_EQ(p.stages.size(), 2u);
    EXPECT_EQ(p.stages[0].layers, c.layers[0]);
    EXPECT_EQ(p.stages[1].layers, c.layers[1]);
    for (const std::string& note : s.notes) {
      EXPECT_EQ(note.find("virtual"), std::string::npos) << note;
      EXPECT_EQ(note.find("not modelled"), std::string::npos) << note;
    }
  }
}

TEST(MegatronScript, GradReduceInBf16IsRead) {
  MegatronScript s = parse_megatron_script(small_script("--grad-reduce-in-bf16"), "t.sh");
  EXPECT_TRUE(megatron_workload(s).training.grad_reduce_in_bf16);
  EXPECT_TRUE(s.unknown.empty());
  MegatronScript plain = parse_megatron_script(small_script(""), "t.sh");
  EXPECT_FALSE(megatron_workload(plain).training.grad_reduce_in_bf16);
}

TEST(MegatronScript, OverlapFlagsReadIntoTrainingOverlap) {
  {
    MegatronScript s = parse_megatron_script(
        small_script("--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather "
                     "--tp-comm-overlap --overlap-moe-expert-parallel-comm --delay-wgrad-compute"),
        "t.sh");
    const Workload w = megatron_workload(s);
    EXPECT_EQ(w.training.overlap, (Overlap{true, true, true, true, true}));
    EXPECT_TRUE(s.unknown.empty());
    for (const std::string& note : s.notes) {
      EXPECT_EQ(note.find("overlap"), std::string::npos) << note;
    }
  }
  {
    // One at a time.
    const std::vector<std::pair<std::string, Overlap>> one = {
        {"--overlap-grad-reduce", {true, false, false, false}},
        {"--overlap-param-gather", {false, true, false, false}},
        {"--tp-comm-overlap", {false, false, true, false}},
        {"--overlap-moe-expert-parallel-comm", {false, false, false, true}},
        {"", {}},
    };
    for (const auto& [flag, expected] : one) {
      MegatronScript s =
          parse_megatron_script(small_script("--use-distributed-optimizer " + flag), "t.sh");
      EXPECT_EQ(megatron_workload(s).training.overlap, expected) << flag;
    }
  }
  {
    // --delay-wgrad-compute alone: Megatron stops, and so does the reader,
    // naming the line.
    MegatronScript s = parse_megatron_script(small_script("--delay-wgrad-compute"), "t.sh");
    try {
      (void)megatron_workload(s);
      ADD_FAILURE() << "--delay-wgrad-compute without the overlap was accepted";
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind("t.sh:", 0), 0u) << what;
      EXPECT_NE(what.find("--delay-wgrad-compute: needs --overlap-moe-expert-parallel-comm"),
                std::string::npos)
          << what;
    }
  }
}

// FP8 (docs/costmodel.md, "FP8"): --fp8-format with --bf16 reads as
// Precision::kFp8 with --fp8-recipe (Megatron's default: delayed); with
// --fp16 it is an error naming --fp8-format.
TEST(MegatronScript, Fp8FormatAndRecipe) {
  {
    MegatronScript s =
        parse_megatron_script(small_script("--fp8-format hybrid --fp8-recipe tensorwise"), "t.sh");
    const Workload w = megatron_workload(s);
    EXPECT_EQ(w.training.precision, Precision::kFp8);
    EXPECT_EQ(w.training.fp8_recipe, Fp8Recipe::kTensorwise);
    EXPECT_TRUE(s.unknown.empty());
    for (const std::string& note : s.notes) {
      EXPECT_EQ(note.find("fp8"), std::string::npos) << note;  // read, not approximated
    }
    // Nothing else differs from the bf16 script.
    MegatronScript b = parse_megatron_script(small_script(""), "t.sh");
    Workload expected = megatron_workload(b);
    expected.training.precision = Precision::kFp8;
    expected.training.fp8_recipe = Fp8Recipe::kTensorwise;
    EXPECT_EQ(w, expected);
  }
  const std::vector<std::pair<std::string, Fp8Recipe>> recipes = {
      {"--fp8-format hybrid", Fp8Recipe::kDelayed},
      {"--fp8-format e4m3", Fp8Recipe::kDelayed},
      {"--fp8-format hybrid --fp8-recipe delayed", Fp8Recipe::kDelayed},
      {"--fp8-format e4m3 --fp8-recipe blockwise", Fp8Recipe::kBlockwise},
      {"--fp8-recipe mxfp8 --fp8-format e4m3", Fp8Recipe::kMxfp8},
  };
  for (const auto& [flags, recipe] : recipes) {
    MegatronScript s = parse_megatron_script(small_script(flags), "t.sh");
    const Workload w = megatron_workload(s);
    EXPECT_EQ(w.training.precision, Precision::kFp8) << flags;
    EXPECT_EQ(w.training.fp8_recipe, recipe) << flags;
  }
  {
    // --fp8-recipe without --fp8-format: no FP8 in Megatron either.
    MegatronScript s = parse_megatron_script(small_script("--fp8-recipe tensorwise"), "t.sh");
    EXPECT_EQ(megatron_workload(s).training.precision, Precision::kBf16);
  }
  {
    // --fp16 with --fp8-format: an error naming the file, the line and
    // --fp8-format.
    std::string text = small_script("--fp8-format hybrid");
    text.replace(text.find("--bf16"), 6, "--fp16");
    MegatronScript s = parse_megatron_script(text, "t.sh");
    try {
      megatron_workload(s);
      ADD_FAILURE() << "no error for --fp16 --fp8-format";
    } catch (const InputError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("t.sh:1: --fp8-format: "), std::string::npos) << m;
      EXPECT_NE(m.find("--fp16"), std::string::npos) << m;
      EXPECT_NE(m.find("bf16 only"), std::string::npos) << m;
    }
  }
  {
    // An unknown recipe names the flag and the value.
    MegatronScript s =
        parse_megatron_script(small_script("--fp8-format hybrid --fp8-recipe nvfp4"), "t.sh");
    try {
      megatron_workload(s);
      ADD_FAILURE() << "no error for --fp8-recipe nvfp4";
    } catch (const InputError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("--fp8-recipe"), std::string::npos) << m;
      EXPECT_NE(m.find("\"nvfp4\""), std::string::npos) << m;
    }
  }
}

// Found while writing the test above: an unknown --fp8-recipe in a script
// is reported as "--fp8-recipe: unknown FP8 recipe ..." without the file
// and line, unlike every other bad value of a script (megatron_script.h:
// "file:line: --flag: what"), so it reads as hapmoe's own --fp8-recipe
// option. Enable once fixed.
TEST(MegatronScript, UnknownFp8RecipeNamesTheFileAndLine) {
  MegatronScript s =
      parse_megatron_script(small_script("--fp8-format hybrid --fp8-recipe nvfp4"), "t.sh");
  try {
    megatron_workload(s);
    ADD_FAILURE() << "no error for --fp8-recipe nvfp4";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("t.sh:1: --fp8-recipe"), std::string::npos) << e.what();
  }
}

// In the style of Pai-Megatron-Patch's run_mcore_*.sh launchers (written
// for this test): settings from the command line with defaults, model sizes
// and precision flags in if-branches, TP_COMM_OVERLAP from ternary
// arithmetic, flags in strings and in arrays of "--flag value" elements, a
// config written by a here-document, and the command built in a string and
// run through eval.
TEST(MegatronScript, PaiMegatronPatchStyleScriptIsRead) {
  const std::string text = R"SH(#!/bin/bash
set -e
ENV=${1:-dsw}
CURRENT_DIR="$( cd "$( dirname "$0" )" && pwd )"
MEGATRON_PATH=$( dirname $( dirname ${CURRENT_DIR}))
export PYTHONPATH=${MEGATRON_PATH}:${MEGATRON_PATH}/Megatron-LM:$PYTHONPATH
export CUDA_DEVICE_MAX_CONNECTIONS=1
if [ $ENV = dlc ]; then
    NNODES=${WORLD_SIZE}
    NODE_RANK=${RANK}
    GPUS_PER_NODE=${KUBERNETES_CONTAINER_RESOURCE_GPU}
elif [ $ENV = dsw ]; then
    MASTER_ADDR=localhost
    MASTER_PORT=$(shuf -n 1 -i 10000-65535)
    NNODES=1
    NODE_RANK=0
    GPUS_PER_NODE=8
fi
DISTRIBUTED_ARGS="--nproc_per_node $GPUS_PER_NODE --nnodes $NNODES --node_rank $NODE_RANK --master_addr $MASTER_ADDR --master_port $MASTER_PORT"

MODEL_SIZE=${2:-A1B}
BATCH_SIZE=${3:-1}
GLOBAL_BATCH_SIZE=${4:-64}
LR=$5
PR=${6:-bf16}
TP=${7:-2}
PP=${8:-2}
EP=${9:-4}
SEQ_LEN=${10:-4096}
AC=${11:-sel}
SAVE_PATH=${12}

if [ $MODEL_SIZE = A1B ]; then
NUM_LAYERS=8
HIDDEN_SIZE=1024
NUM_ATTN_HEADS=16
INTERMEDIATE_SIZE=4096
moe_options=(
    "--moe-ffn-hidden-size $(( INTERMEDIATE_SIZE / 8 ))"
    "--num-experts 8 --moe-router-topk 2"
    "--expert-model-parallel-size ${EP}"
    --moe-grouped-gemm
)
fi

if [ $PR = fp16 ]; then
    pr_options=" \
        --fp16 \
        --apply-query-key-layer-scaling"
    export NVTE_APPLY_QK_LAYER_SCALING=1
elif [ $PR = bf16 ]; then
    pr_options=" \
        --bf16"
fi

if [ $TP -gt 1 ]; then
    sp_options=" \
        --sequence-parallel"
fi

TP_COMM_OVERLAP=$(( ($TP > 1) ? 1 : 0 ))
comm_overlap_option="\
    --overlap-grad-reduce \
    --overlap-param-gather"
if [ $TP_COMM_OVERLAP -eq 1 ]; then
    comm_overlap_option="\
        --tp-comm-overlap \
        --overlap-grad-reduce \
        --overlap-param-gather"
fi

if [ $AC = full ]; then
    _check=$(( ($NUM_LAYERS / $PP) % ${MP_AC_LAYERS:-1} ))
    if [ $_check != 0 ]; then
        echo "the num layers per pp rank must be a multiple of the recompute layers."
        exit -1
    fi
    activation_checkpoint_options=" \
        --recompute-method uniform \
        --recompute-num-layers ${MP_AC_LAYERS:-1} \
        --recompute-granularity full"
elif [ $AC = sel ]; then
    activation_checkpoint_options=" \
        --recompute-activations"
fi

cat <<EOF > ${SAVE_PATH}/run_config.yaml
tensor_parallel: ${TP}
pipeline_parallel: ${PP}
EOF

megatron_options="  \
        --save ${SAVE_PATH} \
        --lr ${LR} \
        --micro-batch-size ${BATCH_SIZE} \
        --global-batch-size ${GLOBAL_BATCH_SIZE} \
        --num-layers ${NUM_LAYERS} \
        --hidden-size ${HIDDEN_SIZE} \
        --num-attention-heads ${NUM_ATTN_HEADS} \
        --ffn-hidden-size ${INTERMEDIATE_SIZE} \
        --seq-length ${SEQ_LEN} \
        --max-position-embeddings ${SEQ_LEN} \
        --tensor-model-parallel-size ${TP} \
        --pipeline-model-parallel-size ${PP} \
        --swiglu \
        --normalization RMSNorm \
        --disable-bias-linear \
        --untie-embeddings-and-output-weights \
        --use-distributed-optimizer \
        --vocab-size 32000"
dataset_options=("--data-path ${DATA_PATH}" "--split 99,1,0")

run_cmd="torchrun $DISTRIBUTED_ARGS pretrain_qwen.py
 ${megatron_options} ${pr_options} ${activation_checkpoint_options} ${sp_options} \
 ${comm_overlap_option} ${moe_options[@]} ${dataset_options[@]}"

echo ${run_cmd}
eval ${run_cmd}
set +x
)SH";
  const fs::path d = test::scratch_dir("pai");
  std::ofstream(d / "run_mcore_test.sh") << text;
  MegatronScript s = read_megatron_script((d / "run_mcore_test.sh").string());
  ASSERT_TRUE(s.shell.has_command);
  EXPECT_EQ(s.shell.launch.entry.text, "pretrain_qwen.py");
  EXPECT_EQ(s.shell.launch.line, 118);  // eval ${run_cmd}
  EXPECT_TRUE(s.unknown.empty()) << s.unknown.front();
  const Workload w = megatron_workload(s);
  EXPECT_EQ(w.model.num_layers, 8);
  EXPECT_EQ(w.model.hidden, 1024);
  EXPECT_EQ(w.model.num_experts, 8);
  EXPECT_EQ(w.model.top_k, 2);
  EXPECT_EQ(w.model.expert_ffn_hidden, 512);
  EXPECT_EQ(w.training.seq_len, 4096);
  EXPECT_EQ(w.training.global_batch, 64);
  EXPECT_EQ(w.training.overlap, (Overlap{true, true, true, false}));  // TP_COMM_OVERLAP=1
  EXPECT_EQ(megatron_world_size(s), 8);
  const MegatronSettings m = megatron_settings(s, w, 8);
  EXPECT_EQ(m.tp, 2);
  EXPECT_EQ(m.pp, 2);
  EXPECT_EQ(m.ep, 4);
  EXPECT_TRUE(m.sequence_parallel);
  // Values from the command line stay as written, one word each.
  ASSERT_NE(s.find("--lr"), nullptr);
  EXPECT_EQ(s.find("--lr")->values.size(), 1u);
  EXPECT_EQ(s.find("--lr")->values[0].source, "$5");
  EXPECT_EQ(s.find("--data-path")->values[0].source, "${DATA_PATH}");
  // The here-document is named, not read.
  const auto heredoc = std::find_if(s.notes.begin(), s.notes.end(), [](const std::string& n) {
    return n.find("here-document") != std::string::npos;
  });
  ASSERT_NE(heredoc, s.notes.end());
  EXPECT_EQ(*heredoc,
            "the here-document <<EOF on line 87 (lines 88-89) feeds cat, written to "
            "${SAVE_PATH}/run_config.yaml; it is skipped: hapmoe runs nothing, and its lines are "
            "not read as commands");

  // With its arguments as the user types them after the script's name, the
  // branches they select are the ones read: fp16 (not bf16), full
  // recomputation (not selective), TP 4 without the other defaults.
  MegatronScript typed = read_megatron_script(
      (d / "run_mcore_test.sh").string(),
      {.args = split_shell_words("dsw A1B 2 128 1e-5 fp16 4 1 2 2048 full /save", "args")});
  EXPECT_TRUE(typed.has("--fp16"));
  EXPECT_FALSE(typed.has("--bf16"));
  EXPECT_FALSE(typed.has("--recompute-activations"));
  EXPECT_EQ(typed.find("--save")->values[0].text, "/save");
  const Workload tw = megatron_workload(typed);
  EXPECT_EQ(tw.training.precision, Precision::kFp16);
  EXPECT_EQ(tw.training.seq_len, 2048);
  EXPECT_EQ(tw.training.global_batch, 128);
  const MegatronSettings tm = megatron_settings(typed, tw, 8);
  EXPECT_EQ(tm.tp, 4);
  EXPECT_EQ(tm.pp, 1);
  EXPECT_EQ(tm.ep, 2);
  EXPECT_EQ(tm.micro_batch, 2);
  EXPECT_EQ(tm.recompute_granularity, "full");
  EXPECT_EQ(tm.recompute_method, "uniform");
  for (const std::string& n : typed.notes) {
    EXPECT_EQ(n.find("cannot be evaluated"), std::string::npos) << n;
  }
}

// A Megatron-MoE-ModelZoo-style YAML config (tests/data/megatron/
// modelzoo_style_moe.yaml, written for this test): MODEL_ARGS entries are
// the flags, true a switch, false left out, ${VAR} from --megatron-env,
// ENV_VARS exported; messages name the YAML's own lines.
TEST(MegatronScript, ModelZooStyleYamlConfigIsRead) {
  const std::string path = kData + "modelzoo_style_moe.yaml";
  MegatronScript s = read_megatron_script(
      path, {.env = {{"TP", "2"}, {"PP", "2"}, {"EP", "4"}, {"SEQ_LEN", "4096"}, {"GBS", "64"}}});
  EXPECT_FALSE(s.shell.has_command);
  EXPECT_TRUE(s.has("--overlap-grad-reduce"));
  EXPECT_FALSE(s.has("--overlap-param-gather"));  // false: left out
  EXPECT_EQ(s.find("--wandb-exp-name")->values[0].text, "moe-TP2PP2");
  EXPECT_EQ(s.find("--num-layers")->line, 18);
  EXPECT_EQ(s.shell.exported,
            (std::vector<std::string>{"CUDA_DEVICE_MAX_CONNECTIONS", "NVTE_FUSED_ATTN"}));
  EXPECT_EQ(s.shell.find("NVTE_FUSED_ATTN")->text, "1");
  const Workload w = megatron_workload(s);
  EXPECT_EQ(w.model.num_layers, 16);
  EXPECT_EQ(w.model.num_experts, 64);
  EXPECT_EQ(w.model.top_k, 8);
  EXPECT_EQ(w.model.vocab, 151936);  // NullTokenizer: --vocab-size + 1
  EXPECT_EQ(w.training.seq_len, 4096);
  const MegatronSettings m = megatron_settings(s, w, 16);
  EXPECT_EQ(m.tp, 2);
  EXPECT_EQ(m.pp, 2);
  EXPECT_EQ(m.ep, 4);
  // Without the variables: the message names the YAML line and the variable.
  MegatronScript bare = read_megatron_script(path);
  try {
    (void)megatron_workload(bare);
    ADD_FAILURE() << "no error without ${SEQ_LEN}";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("modelzoo_style_moe.yaml:24: --seq-length"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace hapmoe
