// Megatron-LM's rules for interleaved 1F1B in the plan checks
// (partition/constraints.cpp; docs/costmodel.md, "Interleaved 1F1B"):
// vpp > 1 needs PP > 1 and micro-batches in groups of PP. And FP8 plans
// only on devices with FP8 matrix math (docs/costmodel.md, "FP8").
#include "partition/constraints.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

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

// --precision fp8 on a device whose catalog entry has no FP8 peak (A100,
// MI250X, 910B) is refused with a message naming the device; H100-class
// devices, or a device given an FP8 peak in a cluster file, are accepted.
ClusterSpec catalog_cluster(const char* device) {
  ClusterSpec c;
  c.name = device;
  const DeviceSpec* d = find_device(device);
  if (d == nullptr) throw std::runtime_error(std::string("no catalog device ") + device);
  c.pools.push_back({*d, 1, 8});
  return c;
}

Plan one_stage_plan() {
  Plan plan;
  plan.parallel = pi(1, 8, 1);
  plan.stages = {{0, 8, {}}};
  return plan;
}

TEST(ConstraintsFp8, DevicesWithoutFp8AreRefused) {
  Workload w = workload();
  w.training.precision = Precision::kFp8;
  for (const char* name : {"A100-40GB", "A100-80GB", "910B", "MI250X"}) {
    SCOPED_TRACE(name);
    const std::string e = check_plan(one_stage_plan(), w, catalog_cluster(name));
    EXPECT_NE(e.find(name), std::string::npos) << e;
    EXPECT_NE(e.find("FP8"), std::string::npos) << e;
    EXPECT_NE(e.find("--precision fp8"), std::string::npos) << e;
    EXPECT_NE(e.find("fp8_peak_tflops"), std::string::npos) << e;  // what to do about it
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    // Every recipe alike.
    for (Fp8Recipe r : {Fp8Recipe::kTensorwise, Fp8Recipe::kBlockwise, Fp8Recipe::kMxfp8}) {
      Workload v = w;
      v.training.fp8_recipe = r;
      EXPECT_EQ(check_plan(one_stage_plan(), v, catalog_cluster(name)), e);
    }
    // The same device trains in bf16 and fp16.
    Workload b = w;
    b.training.precision = Precision::kBf16;
    EXPECT_EQ(check_plan(one_stage_plan(), b, catalog_cluster(name)), "");
    b.training.precision = Precision::kFp16;
    EXPECT_EQ(check_plan(one_stage_plan(), b, catalog_cluster(name)), "");
  }
  EXPECT_EQ(check_plan(one_stage_plan(), w, catalog_cluster("910B")),
            "910B has no FP8 matrix math (its catalog entry gives no FP8 peak), so it cannot "
            "train in --precision fp8; use bf16, or a cluster file that gives "
            "\"fp8_peak_tflops\"");
}

TEST(ConstraintsFp8, DevicesWithFp8AreAccepted) {
  Workload w = workload();
  w.training.precision = Precision::kFp8;
  for (const char* name : {"H100", "H800", "H200", "B200", "MI300X", "Gaudi2", "Gaudi3"}) {
    EXPECT_EQ(check_plan(one_stage_plan(), w, catalog_cluster(name)), "") << name;
  }
  // A 910B given an FP8 peak (a cluster file's "fp8_peak_tflops").
  ClusterSpec c = catalog_cluster("910B");
  c.pools[0].device.fp8_peak_flops = 700e12;
  EXPECT_EQ(check_plan(one_stage_plan(), w, c), "");
}

TEST(ConstraintsFp8, EveryStageTypeOfAHeterogeneousPlanIsChecked) {
  Workload w = workload();
  w.training.precision = Precision::kFp8;
  ClusterSpec c;
  c.name = "h100+910b";
  c.pools.push_back({*find_device("H100"), 1, 8});
  c.pools.push_back({*find_device("910B"), 1, 8});
  Plan plan;
  plan.parallel = pi(2, 8, 1);
  plan.stages = {{0, 4, {}}, {1, 4, {}}};
  const std::string e = check_plan(plan, w, c);
  EXPECT_NE(e.find("910B"), std::string::npos) << e;
  EXPECT_NE(e.find("FP8"), std::string::npos) << e;
  EXPECT_EQ(e.find("H100"), std::string::npos) << e;
  // The 910B stage first: the same refusal.
  plan.stages = {{1, 4, {}}, {0, 4, {}}};
  EXPECT_EQ(check_plan(plan, w, c), e);
  // Both stages on H100 (16 devices: two nodes of 8).
  c.pools[0].nodes = 2;
  plan.stages = {{0, 4, {}}, {0, 4, {}}};
  EXPECT_EQ(check_plan(plan, w, c), "");
}

// The launcher's placement (place_stages): nodes in stage order, a stage
// continuing on the previous node while it has room and is of its type,
// spanning nodes when larger than one, and a run of another type opening
// a fresh node; what finds no node left fails at that stage.
TEST(Placement, RunsOfOneTypeStartOnFreshNodes) {
  ClusterSpec c;
  DevicePool a;
  a.device.name = "A";
  a.nodes = 3;
  a.devices_per_node = 8;
  DevicePool b = a;
  b.device.name = "B";
  b.nodes = 1;
  b.devices_per_node = 16;
  c.pools = {a, b};
  using Node = Placement::Node;
  const auto nodes = [](const Placement& p) {
    std::vector<std::tuple<int, int, int>> out;
    for (const Node& n : p.nodes) out.emplace_back(n.type, n.index, n.procs);
    return out;
  };
  // S = 4: two A stages share node A0, the B stages node B0, the last A
  // stage opens A1.
  const Placement p = place_stages(c, 4, {0, 0, 1, 1, 0});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(nodes(p), (std::vector<std::tuple<int, int, int>>{{0, 0, 8}, {1, 0, 8}, {0, 1, 4}}));
  EXPECT_EQ(p.stages, (std::vector<std::vector<int>>{{0}, {0}, {1}, {1}, {2}}));
  // S = 12: a stage spans 1.5 A nodes, the next continues on the half.
  const Placement q = place_stages(c, 12, {0, 0});
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(nodes(q), (std::vector<std::tuple<int, int, int>>{{0, 0, 8}, {0, 1, 8}, {0, 2, 8}}));
  EXPECT_EQ(q.stages, (std::vector<std::vector<int>>{{0, 1}, {1, 2}}));
  // B | A | B with S = 8: the second run of B needs a second B node.
  const Placement r = place_stages(c, 8, {1, 0, 1});
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.failed_stage, 2);
  // check_plan says so only when asked (plan --launcher, the launcher).
  Plan plan;
  plan.parallel.pp = 3;
  plan.parallel.dp = 8;
  for (const int h : {1, 0, 1}) plan.stages.push_back({h, h == 0 ? 2 : 3, {}});
  Workload w = workload();
  w.model.num_heads = w.model.num_kv_heads = 8;
  const std::string e = check_plan(plan, w, c, {.launcher_placement = true});
  EXPECT_NE(e.find("stage 2 needs more B nodes"), std::string::npos) << e;
  EXPECT_EQ(check_plan(plan, w, c), "");
}

}  // namespace
// Activation offload as Megatron-Core core_v0.15.0 allows it
// (transformer_config.py): no pipeline parallelism, no recomputation; and
// the host side of every device must be known.
TEST(ConstraintsOffload, ActivationOffloadNeedsOneStageNoRecomputeAndAKnownHost) {
  Workload w = workload();
  w.training.activation_offload_layers = 4;
  const std::string e = check_parallel(pi(2, 8, 1), w);
  EXPECT_NE(e.find("no pipeline parallelism with CPU offloading"), std::string::npos) << e;
  EXPECT_EQ(check_parallel(pi(1, 8, 1), w), "");
  const ClusterSpec c = catalog_cluster("H100");
  Plan plan = one_stage_plan();
  EXPECT_EQ(check_plan(plan, w, c), "");
  plan.stages[0].recompute = {RecomputeKind::kSelective, 0};
  EXPECT_NE(check_plan(plan, w, c).find("recomputation with activation offload"),
            std::string::npos);
  EXPECT_EQ(check_offload(w, c), "");
  ClusterSpec unknown = c;
  unknown.pools[0].device.host_memory_bytes = 0;
  EXPECT_NE(check_offload(w, unknown).find("host_memory_gb"), std::string::npos);
  w.training.activation_offload_layers = 0;
  EXPECT_EQ(check_offload(w, unknown), "");
}

// Megatron-LM core_v0.15.0 refuses moe_act and layernorm recompute with FP8
// delayed scaling (transformer_config.py): such a plan is refused, naming
// the way out; core_attn alone, or another recipe, passes.
TEST(ConstraintsFp8, DelayedScalingRefusesMoeActAndLayernormRecompute) {
  Workload w = workload();
  w.training.precision = Precision::kFp8;
  w.training.fp8_recipe = Fp8Recipe::kDelayed;
  const ClusterSpec c = catalog_cluster("H100");
  Plan plan = one_stage_plan();
  plan.stages[0].recompute = {RecomputeKind::kSelective, 0};  // core_attn + moe_act
  const std::string e = check_plan(plan, w, c);
  EXPECT_NE(e.find("FP8 delayed scaling"), std::string::npos) << e;
  EXPECT_NE(e.find("selective:core_attn"), std::string::npos) << e;
  plan.stages[0].recompute = {RecomputeKind::kSelective, 0,
                              module_bit(RecomputeModule::kLayernorm)};
  EXPECT_NE(check_plan(plan, w, c), "");
  plan.stages[0].recompute = {RecomputeKind::kSelective, 0, module_bit(RecomputeModule::kCoreAttn)};
  EXPECT_EQ(check_plan(plan, w, c), "");
  plan.stages[0].recompute = {RecomputeKind::kSelective, 0};
  w.training.fp8_recipe = Fp8Recipe::kTensorwise;
  EXPECT_EQ(check_plan(plan, w, c), "");
}

// parallel_ok, the enumeration's check, takes the same decisions as
// check_parallel without building its messages; every rule is reached.
TEST(ConstraintsParallel, OkIsCheckParallelWithoutTheMessage) {
  std::set<std::string> kinds;  // the messages, digits masked
  int checked = 0;
  for (const bool moe : {true, false}) {
    for (const Precision precision : {Precision::kBf16, Precision::kFp16}) {
      for (const int offload : {0, 2}) {
        Workload w = workload();
        if (!moe) {
          w.model.num_experts = 0;
          w.model.moe_layers.assign(8, 0);
        }
        w.model.num_kv_heads = 4;
        w.training.precision = precision;
        w.training.activation_offload_layers = offload;
        for (int pp = 0; pp <= 9; ++pp) {
          for (const int tp : {1, 2, 4, 8}) {
            for (const int cp : {1, 2, 3}) {
              for (const int ep : {1, 2, 3}) {
                for (const int tpe : {1, 2}) {
                  for (const int dp : {1, 2, 3, 4}) {
                    for (const int vpp : {1, 2}) {
                      for (const int b : {1, 2}) {
                        const ParallelConfig c{pp, tp, cp, ep, tpe, dp, b, vpp};
                        const std::string why = check_parallel(c, w);
                        ASSERT_EQ(parallel_ok(c, w), why.empty()) << why;
                        std::string kind = why;
                        std::replace_if(
                            kind.begin(), kind.end(),
                            [](unsigned char ch) { return std::isdigit(ch) != 0; }, '#');
                        kinds.insert(kind);
                        ++checked;
                      }
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 10000);
  EXPECT_GE(kinds.size(), 14u);  // "" and each rule's message
}

// schedule_ok, with_vpp's check: a configuration that passes parallel_ok
// with micro-batch 1 and no interleaving passes it with another
// micro-batch and vpp exactly when it passes schedule_ok with them.
TEST(ConstraintsParallel, ScheduleOkIsWhatAnotherMicroBatchAndVppAdd) {
  int kept = 0;
  int refused = 0;
  Workload w = workload();
  w.training.global_batch = 48;
  for (int pp = 1; pp <= 8; ++pp) {
    for (const int tp : {1, 2, 4}) {
      for (const int ep : {1, 2, 4}) {
        for (const int dp : {1, 2, 3, 4, 6}) {
          const ParallelConfig plain{pp, tp, 1, ep, 1, dp, 1, 1};
          if (!parallel_ok(plain, w)) continue;
          for (const int b : {1, 2, 3, 4, 8}) {
            for (const int vpp : {1, 2, 3}) {
              ParallelConfig c = plain;
              c.micro_batch = b;
              c.vpp = vpp;
              ASSERT_EQ(schedule_ok(c, w), parallel_ok(c, w))
                  << "pp " << pp << " dp " << dp << " b " << b << " vpp " << vpp;
              (parallel_ok(c, w) ? kept : refused) += 1;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(kept, 100);
  EXPECT_GT(refused, 100);
}

}  // namespace hapmoe
