// Megatron-LM's rules for interleaved 1F1B in the plan checks
// (partition/constraints.cpp; docs/costmodel.md, "Interleaved 1F1B"):
// vpp > 1 needs PP > 1 and micro-batches in groups of PP.
#include "partition/constraints.h"

#include <gtest/gtest.h>

#include <string>

#include "costmodel/cluster.h"
#include "costmodel/model.h"
#include "costmodel/plan.h"

namespace hapmoe {
namespace {

// 8 layers, 8 heads, 8 experts; S = 1024, B = 64, b = 1.
Workload workload() {
  Workload w;
  ModelSpec& m = w.model;
  m.name = "t";
  m.num_layers = 8;
  m.hidden = 1024;
  m.num_heads = 8;
  m.num_kv_heads = 8;
  m.head_dim = 128;
  m.ffn_hidden = 4096;
  m.max_positions = 4096;
  m.vocab = 1000;
  m.num_experts = 8;
  m.top_k = 2;
  m.expert_ffn_hidden = 1024;
  m.moe_layers.assign(8, 1);
  w.training.seq_len = 1024;
  w.training.global_batch = 64;
  w.training.micro_batch = 1;
  return w;
}

ParallelConfig pi(int pp, int dp, int vpp, int micro_batch = 1) {
  ParallelConfig p;
  p.pp = pp;
  p.tp = 1;
  p.cp = 1;
  p.ep = 1;
  p.tpe = 1;
  p.dp = dp;
  p.micro_batch = micro_batch;
  p.vpp = vpp;
  return p;
}

TEST(ConstraintsVpp, InterleavingNeedsAPipeline) {
  const Workload w = workload();
  EXPECT_EQ(check_parallel(pi(1, 4, 2), w), "vpp=2 needs pp > 1 (got pp=1)");
  EXPECT_EQ(check_parallel(pi(1, 4, 1), w), "");  // plain 1F1B on one stage
  EXPECT_EQ(check_parallel(pi(1, 4, 0), w), "vpp=0 must be at least 1");
  EXPECT_EQ(check_parallel(pi(2, 4, -1), w), "vpp=-1 must be at least 1");
}

TEST(ConstraintsVpp, MicroBatchesMustComeInGroupsOfPp) {
  const Workload w = workload();
  // B = 64, b = 1, DP = 2: M = 32, not a multiple of PP = 3.
  EXPECT_EQ(check_parallel(pi(3, 2, 2), w),
            "vpp=2: the 32 micro-batches per iteration are not a multiple of pp=3, as the "
            "interleaved schedule needs");
  // Plain 1F1B has no such rule.
  EXPECT_EQ(check_parallel(pi(3, 2, 1), w), "");
  // b = 2, DP = 4: M = 8, not a multiple of PP = 3 either; PP = 4 is fine.
  const std::string e = check_parallel(pi(3, 4, 4, 2), w);
  EXPECT_NE(e.find("vpp=4"), std::string::npos) << e;
  EXPECT_NE(e.find("the 8 micro-batches"), std::string::npos) << e;
  EXPECT_EQ(check_parallel(pi(4, 4, 4, 2), w), "");
}

TEST(ConstraintsVpp, ValidInterleavedConfigurationsAreAccepted) {
  const Workload w = workload();
  // M = 32 over PP = 2, 4, 8 with v = 2, 3, 4.
  for (int pp : {2, 4, 8}) {
    for (int v : {2, 3, 4}) {
      EXPECT_EQ(check_parallel(pi(pp, 2, v), w), "") << "pp " << pp << " vpp " << v;
    }
  }
  // M = PP exactly (B = 8, DP = 2: M = 4).
  Workload small = w;
  small.training.global_batch = 8;
  EXPECT_EQ(check_parallel(pi(4, 2, 2), small), "");
  EXPECT_EQ(check_parallel(pi(8, 1, 2), small), "");  // M = 8 = PP
  EXPECT_NE(check_parallel(pi(8, 2, 2), small), "");  // M = 4 < PP = 8
}

TEST(ConstraintsVpp, WholePlanChecksCarryTheRule) {
  const Workload w = workload();
  ClusterSpec c;
  c.name = "one";
  DeviceSpec d;
  d.name = "Dev";
  d.peak_flops = 100e12;
  d.memory_bytes = 80e9;
  d.hbm_bandwidth = 1e12;
  d.intra_node_bandwidth = 100e9;
  d.inter_node_bandwidth = 10e9;
  d.devices_per_node = 8;
  c.pools.push_back({d, 2, 8});
  Plan plan;
  plan.parallel = pi(1, 8, 2);
  plan.stages = {{0, 8, {}}};
  EXPECT_EQ(check_plan(plan, w, c), "vpp=2 needs pp > 1 (got pp=1)");
  plan.parallel = pi(2, 8, 2);  // M = 8, a multiple of 2
  plan.stages = {{0, 4, {}}, {0, 4, {}}};
  EXPECT_EQ(check_plan(plan, w, c), "");
  plan.parallel = pi(2, 8, 2, 8);  // b = 8: M = 1, not a multiple of 2
  const std::string e = check_plan(plan, w, c);
  EXPECT_NE(e.find("not a multiple of pp=2"), std::string::npos) << e;
}

}  // namespace
}  // namespace hapmoe
