// The Megatron constraint checker, table-driven: one valid baseline and,
// for every rule of REFERENCE.md §3.2 and §3.3, settings that break it.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "io/megatron/megatron_args.h"

namespace hapmoe {
namespace {

// Mixtral-S-like: 24 layers, 32 heads, 8 groups, 8 experts on 32 ranks.
MegatronSettings base() {
  MegatronSettings s;
  s.num_layers = 24;
  s.num_heads = 32;
  s.num_query_groups = 8;
  s.num_experts = 8;
  s.seq_length = 4096;
  s.max_position_embeddings = 32768;
  s.bias_linear = false;
  s.world_size = 32;
  s.tp = 2;
  s.pp = 4;
  s.cp = 1;
  s.ep = 4;
  s.etp = 1;
  s.sequence_parallel = true;
  s.micro_batch = 1;
  s.global_batch = 256;
  s.distributed_optimizer = true;
  return s;
}

struct Case {
  const char* name;
  const char* rule;  // expected in the message
  std::function<void(MegatronSettings&)> change;
};

TEST(MegatronArgs, BaselineIsValid) {
  EXPECT_TRUE(check_megatron_settings(base()).empty());
  MegatronSettings s = base();
  s.layout = "Et*6|t*7|t*6|t*5,L";
  EXPECT_TRUE(check_megatron_settings(s).empty());
  s = base();
  s.first_stage_layers = 4;
  s.last_stage_layers = 6;  // 14 over 2 middle stages
  EXPECT_TRUE(check_megatron_settings(s).empty());
  s = base();
  s.recompute_granularity = "full";
  s.recompute_method = "block";
  s.recompute_num_layers = 2;
  EXPECT_TRUE(check_megatron_settings(s).empty());
}

TEST(MegatronArgs, EachRuleIsCaught) {
  const std::vector<Case> cases = {
      {"world not divisible by TPxPPxCP", "§3.2.1", [](auto& s) { s.world_size = 36; }},
      {"world not divisible by ETPxEPxPP", "§3.2.2",
       [](auto& s) {
         s.tp = 1;
         s.sequence_parallel = false;
         s.ep = 8;
         s.etp = 2;
       }},
      {"experts not divisible by EP", "§3.2.3",
       [](auto& s) {
         s.ep = 16;
         s.world_size = 128;
         s.global_batch = 512;
       }},
      {"EP on a dense model", "§3.2.3", [](auto& s) { s.num_experts = 0; }},
      {"EP with fp16", "§3.2.3", [](auto& s) { s.fp16 = true; }},
      {"heads not divisible by TP", "§3.2.4", [](auto& s) { s.num_heads = 33; }},
      {"query groups not divisible by TP", "§3.2.4", [](auto& s) { s.num_query_groups = 1; }},
      {"sequence not divisible by 2xCP", "§3.2.5",
       [](auto& s) {
         s.cp = 4;
         s.seq_length = 4100;
         s.world_size = 128;
       }},
      {"positions shorter than the sequence", "§3.2.5",
       [](auto& s) { s.max_position_embeddings = 2048; }},
      {"MoE with TP and no SP", "§3.2.6", [](auto& s) { s.sequence_parallel = false; }},
      {"two ways of VPP", "§3.2.7",
       [](auto& s) {
         s.layout = "Et*6|t*6|t*6|t*6,L";
         s.vpp_layers = 2;
       }},
      {"uneven layers without split flags", "§3.2.8", [](auto& s) { s.num_layers = 26; }},
      {"layers per stage not divisible by VPP", "§3.2.8", [](auto& s) { s.vpp_layers = 4; }},
      {"first/last leave an uneven middle", "§3.2.9",
       [](auto& s) {
         s.first_stage_layers = 5;
         s.last_stage_layers = 6;
       }},
      {"first/last with a layout", "§3.2.9",
       [](auto& s) {
         s.first_stage_layers = 6;
         s.layout = "Et*6|t*6|t*6|t*6,L";
       }},
      {"first/last with account-for-embedding", "§3.2.9",
       [](auto& s) {
         s.first_stage_layers = 6;
         s.account_for_embedding = true;
       }},
      {"first/last with PP 1", "§3.2.9",
       [](auto& s) {
         s.pp = 1;
         s.world_size = 8;
         s.first_stage_layers = 24;
       }},
      {"VPP with PP 1", "§3.2.10",
       [](auto& s) {
         s.pp = 1;
         s.world_size = 8;
         s.vpp_stages = 2;
       }},
      {"full recompute without method", "§3.2.11",
       [](auto& s) {
         s.recompute_granularity = "full";
         s.recompute_num_layers = 1;
       }},
      {"selective with num-layers", "§3.2.11",
       [](auto& s) {
         s.recompute_granularity = "selective";
         s.recompute_num_layers = 1;
       }},
      {"bad method", "§3.2.11",
       [](auto& s) {
         s.recompute_granularity = "full";
         s.recompute_method = "random";
         s.recompute_num_layers = 1;
       }},
      {"overlap param gather without dist opt", "§3.2.12",
       [](auto& s) {
         s.overlap_param_gather = true;
         s.distributed_optimizer = false;
       }},
      {"MoE with bias and ETP 2", "§3.2.13",
       [](auto& s) {
         s.bias_linear = true;
         s.etp = 2;
       }},
      {"global batch not a multiple of micro x DP", "§3.1", [](auto& s) { s.global_batch = 250; }},
      {"layout: bad syntax", "§3.3", [](auto& s) { s.layout = "Et*6|(t*6|t*6|t*6,L"; }},
      {"layout: unknown symbol", "§3.3", [](auto& s) { s.layout = "Et*6|x*6|t*6|t*6,L"; }},
      {"layout: stages not a multiple of PP", "§3.3", [](auto& s) { s.layout = "Et*8|t*8|t*8,L"; }},
      {"layout: two E", "§3.3", [](auto& s) { s.layout = "Et*6|Et*6|t*6|t*6,L"; }},
      {"layout: E not first", "§3.3", [](auto& s) { s.layout = "t*6|Et*6|t*6|t*6,L"; }},
      {"layout: no L", "§3.3", [](auto& s) { s.layout = "Et*6|t*6|t*6|t*6"; }},
      {"layout: L not last", "§3.3", [](auto& s) { s.layout = "Et*6|t*6|t*6,L|t*6"; }},
      {"layout: layer count", "§3.3", [](auto& s) { s.layout = "Et*6|t*6|t*6|t*5,L"; }},
      {"layout: MTP count", "§3.3", [](auto& s) { s.layout = "Et*6|t*6|t*6|t*6,m,L"; }},
      {"layout: MTP not last", "§3.3",
       [](auto& s) {
         s.mtp_layers = 1;
         s.layout = "Et*6|m,t*6|t*6|t*6,L";
       }},
      {"layout: huge repeat", "§3.3", [](auto& s) { s.layout = "E(t*1000000)*1000000|L"; }},
  };
  for (const Case& c : cases) {
    MegatronSettings s = base();
    c.change(s);
    const std::vector<std::string> v = check_megatron_settings(s);
    bool found = false;
    std::string all;
    for (const std::string& m : v) {
      all += m + "\n";
      found = found || m.find(c.rule) != std::string::npos;
    }
    EXPECT_TRUE(found) << c.name << ": expected a " << c.rule << " violation, got:\n" << all;
  }
}

TEST(MegatronArgs, LayoutParseAndMake) {
  std::vector<LayoutStage> st;
  ASSERT_EQ(parse_pipeline_layout("Et*3|(tt|)*29,m|L", st), "");
  ASSERT_EQ(st.size(), 32u);  // REFERENCE.md §3.3's DeepSeek-V3 PP16 x VPP2 example
  EXPECT_EQ(st[0], (LayoutStage{1, 3, 0, 0}));
  EXPECT_EQ(st[1], (LayoutStage{0, 2, 0, 0}));
  EXPECT_EQ(st[30], (LayoutStage{0, 0, 1, 0}));
  EXPECT_EQ(st[31], (LayoutStage{0, 0, 0, 1}));
  EXPECT_EQ(make_pipeline_layout({9, 9, 3, 3}, 0), "E,t*9|t*9|t*3|t*3,L");
  EXPECT_EQ(make_pipeline_layout({1, 0, 2}, 1), "E,t||t*2,m,L");
  // Megatron's split from the flags, per pipeline rank.
  MegatronSettings s = base();
  EXPECT_EQ(megatron_stage_layers(s), (std::vector<int>{6, 6, 6, 6}));
  s.layout = "Et*3|t*7|t*7|t*7,L";
  EXPECT_EQ(megatron_stage_layers(s), (std::vector<int>{3, 7, 7, 7}));
  s.layout = "Et|t*3|t*3|t*3|(t*3|)*3t*2,L";  // VPP 2: stages i and i+4 share rank i
  EXPECT_EQ(megatron_stage_layers(s), (std::vector<int>{4, 6, 6, 5}));
  s = base();
  s.first_stage_layers = 3;
  EXPECT_EQ(megatron_stage_layers(s), (std::vector<int>{3, 7, 7, 7}));
  s = base();
  s.account_for_embedding = true;
  s.account_for_loss = true;
  s.num_layers = 26;
  EXPECT_EQ(megatron_stage_layers(s), (std::vector<int>{6, 7, 7, 6}));
}

// Interleaved layouts (docs/megatron.md, "Virtual pipelining"): PP·v stages
// in Megatron's order, virtual stage 0 of every rank first; each rank's
// layers split as evenly as possible, the larger first.
TEST(MegatronArgs, InterleavedStageLayers) {
  using V = std::vector<int>;
  EXPECT_EQ(interleaved_stage_layers({13, 11}, 2), (V{7, 6, 6, 5}));
  EXPECT_EQ(interleaved_stage_layers({12, 12}, 2), (V{6, 6, 6, 6}));
  EXPECT_EQ(interleaved_stage_layers({5, 3}, 3), (V{2, 1, 2, 1, 1, 1}));
  EXPECT_EQ(interleaved_stage_layers({1, 2}, 2), (V{1, 1, 0, 1}));  // an empty virtual stage
  EXPECT_EQ(interleaved_stage_layers({4, 4, 5}, 1), (V{4, 4, 5}));
  EXPECT_EQ(make_pipeline_layout(interleaved_stage_layers({13, 11}, 2), 0), "E,t*7|t*6|t*6|t*5,L");
  // Megatron's split of such a layout gives back each rank's layers.
  MegatronSettings s = base();
  const V ranks = {7, 5, 7, 5};
  s.layout = make_pipeline_layout(interleaved_stage_layers(ranks, 2), 0);
  EXPECT_EQ(s.layout, "E,t*4|t*3|t*4|t*3|t*3|t*2|t*3|t*2,L");
  EXPECT_TRUE(check_megatron_settings(s).empty());
  EXPECT_EQ(megatron_stage_layers(s), ranks);
  EXPECT_EQ(s.vpp(), 2);
  s.layout = make_pipeline_layout(interleaved_stage_layers({1, 1, 1, 21}, 2), 0);
  EXPECT_EQ(s.layout, "E,t|t|t|t*11||||t*10,L");
  EXPECT_EQ(megatron_stage_layers(s), (V{1, 1, 1, 21}));
  EXPECT_EQ(s.vpp(), 2);
}

TEST(MegatronArgs, VirtualStagesPerRank) {
  MegatronSettings s = base();  // 24 layers, PP 4
  EXPECT_EQ(s.vpp(), 1);
  s.vpp_stages = 3;
  EXPECT_EQ(s.vpp(), 3);
  s = base();
  s.vpp_layers = 2;  // 6 layers per rank / 2
  EXPECT_EQ(s.vpp(), 3);
  s.vpp_layers = 6;
  EXPECT_EQ(s.vpp(), 1);
  // Megatron counts the embedding and the loss as a layer each when the
  // split accounts for them: (14 + 2) / 2 / 2 = 4 (it used to say 3).
  s = base();
  s.num_layers = 14;
  s.pp = 2;
  s.vpp_layers = 2;
  s.account_for_embedding = true;
  s.account_for_loss = true;
  EXPECT_EQ(s.vpp(), 4);
  s = base();
  s.layout = "Et*3|t*3|t*3|t*3|t*3|t*3|t*3|t*3,L";  // 8 stages over PP 4
  EXPECT_EQ(s.vpp(), 2);
  s.layout = "Et*6|t*6|t*6|t*6,L";
  EXPECT_EQ(s.vpp(), 1);
  s.layout = "Et*6|(t*6";  // not a layout: plain
  EXPECT_EQ(s.vpp(), 1);
}

}  // namespace
}  // namespace hapmoe
