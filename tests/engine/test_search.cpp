// HS-DP against brute force on random small instances (the oracle), the
// prunings against the unpruned DP, and determinism.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "costmodel/analytic.h"
#include "costmodel/errors.h"
#include "engine/bounds.h"
#include "engine/driver.h"
#include "engine/search.h"
#include "engine/stage_memo.h"
#include "io/inputs/cluster_io.h"
#include "io/inputs/model_io.h"
#include "partition/config_space.h"
#include "partition/constraints.h"

namespace hapmoe {
namespace {

// A random instance: N <= 10 layers, 1-3 device types, up to 32 devices,
// random shapes and memory limits tight enough that some stages need
// recomputation and some do not fit at all.
struct Instance {
  Workload workload;
  ClusterSpec cluster;
  int vpp = 1;  // virtual stages per rank (SpaceOptions::vpp)
  // Random shapes can break a model or cluster rule; such draws are skipped.
  bool valid() const { return validate(workload.model).empty() && validate(cluster).empty(); }
  std::string describe() const {
    std::ostringstream s;
    const ModelSpec& m = workload.model;
    s << "N=" << m.num_layers << " H=" << m.hidden << " a=" << m.num_heads
      << " g=" << m.num_kv_heads << " E=" << m.num_experts << " k=" << m.top_k
      << " S=" << workload.training.seq_len << " B=" << workload.training.global_batch
      << " b=" << workload.training.micro_batch << " fsdp=" << to_string(workload.training.fsdp)
      << " offload=" << workload.training.optimizer_offload_fraction
      << " act_offload=" << workload.training.activation_offload_layers << " vpp=" << vpp
      << " recompute="
      << (workload.training.recompute ? to_string(*workload.training.recompute) : "per-stage")
      << " |";
    for (const DevicePool& p : cluster.pools) {
      s << " " << p.device.name << ":" << p.nodes << "x" << p.devices_per_node << "@"
        << p.device.memory_bytes / 1e9 << "GB";
    }
    return s.str();
  }
};

Instance random_instance(std::mt19937& rng) {
  auto pick = [&](std::initializer_list<int> v) {
    return *(v.begin() + static_cast<long>(rng() % v.size()));
  };
  Instance in;
  ModelSpec& m = in.workload.model;
  m.name = "random";
  m.num_layers = 2 + static_cast<int>(rng() % 9);
  m.hidden = pick({256, 512, 1024});
  m.num_heads = pick({4, 8, 16});
  m.num_kv_heads = pick({1, 2, 4});
  m.head_dim = m.hidden / m.num_heads;
  m.ffn_hidden = m.hidden * pick({2, 3, 4});
  m.mlp = rng() % 2 ? MlpKind::kSwiGlu : MlpKind::kGelu;
  m.vocab = pick({1000, 32000});
  m.tied_embeddings = rng() % 2;
  if (rng() % 10 < 6) {
    m.num_experts = pick({2, 4, 8});
    m.top_k = 1 + static_cast<int>(rng() % 2);
    m.expert_ffn_hidden = m.hidden * pick({1, 2});
    m.moe_layers.assign(static_cast<std::size_t>(m.num_layers), 1);
    if (rng() % 3 == 0) m.moe_layers[0] = 0;  // a dense first layer
  }
  TrainingSpec& t = in.workload.training;
  t.seq_len = pick({256, 512, 1024});
  t.global_batch = pick({8, 16, 32});
  t.micro_batch = pick({1, 2});
  t.dispatcher = static_cast<Dispatcher>(rng() % 3);
  t.distributed_optimizer = rng() % 4 != 0;

  const int types = 1 + static_cast<int>(rng() % 3);
  const char* names[] = {"H800", "910B", "MI300X"};
  const double peaks[] = {989e12, 353.9e12, 1307.4e12};
  int devices_left = 32;
  for (int h = 0; h < types && devices_left > 0; ++h) {
    DevicePool pool;
    pool.device.name = names[h];
    pool.device.peak_flops = peaks[h];
    pool.device.hbm_bandwidth = 2e12 + 1e12 * h;
    pool.device.intra_node_bandwidth = 100e9 * (h + 1);
    pool.device.inter_node_bandwidth = 25e9;
    pool.devices_per_node = pick({2, 4, 8});
    pool.device.devices_per_node = pool.devices_per_node;
    pool.nodes = 1 + static_cast<int>(rng() % 2);
    if (pool.devices() > devices_left) pool.nodes = 1;
    if (pool.devices() > devices_left) break;
    devices_left -= pool.devices();
    // Memory: a random multiple of a rough per-device share of the model
    // state, plus the fixed overhead, so fits and misses both occur.
    const double state = total_params(m) * 18.0 / pool.devices();
    const double act =
        static_cast<double>(t.micro_batch) * t.seq_len * m.hidden * 40.0 * m.num_layers;
    std::uniform_real_distribution<double> f(0.2, 3.0);
    pool.device.memory_bytes = 2.0 * (1u << 30) + f(rng) * (state + act);
    in.cluster.pools.push_back(pool);
  }
  // Megatron-FSDP and optimizer offload, whose terms the search must keep
  // exact too; the host memory random as well, so the host side decides
  // some fits.
  if (t.distributed_optimizer) {
    const unsigned r = rng() % 4;
    t.fsdp = r == 1 ? Fsdp::kOptimGrads : r == 2 ? Fsdp::kOptimGradsParams : Fsdp::kOff;
    if (rng() % 3 == 0) {
      t.optimizer_offload_fraction = rng() % 2 ? 0.5 : 1.0;
      std::uniform_real_distribution<double> f(0.05, 2.0);
      for (DevicePool& pool : in.cluster.pools) {
        pool.device.host_memory_bytes =
            f(rng) * total_params(m) * 16.0 / in.cluster.total_devices() * pool.devices_per_node;
        pool.device.host_link_bandwidth = 32e9;
        pool.device.host_memory_bandwidth = 200e9;
      }
    }
  }
  // Interleaved 1F1B in a quarter of the instances (activation offload
  // has one stage: plain 1F1B then).
  if (rng() % 4 == 0) in.vpp = pick({2, 3});
  // Activation offload (one-stage plans only, no recomputation).
  if (in.vpp == 1 && rng() % 5 == 0 && m.num_layers > 1) {
    t.activation_offload_layers = 1 + static_cast<int>(rng() % (m.num_layers - 1));
    for (DevicePool& pool : in.cluster.pools) {
      if (pool.device.host_memory_bytes == 0) pool.device.host_memory_bytes = 1e12;
      pool.device.host_link_bandwidth = 32e9;
      pool.device.host_memory_bandwidth = 200e9;
    }
  }
  // One job-wide recompute setting in a quarter of the others (block
  // counts per model chunk when interleaved: none of those).
  if (t.activation_offload_layers == 0 && rng() % 4 == 0) {
    const auto r = static_cast<unsigned>(rng() % (in.vpp == 1 ? 4 : 3));
    t.recompute =
        r == 0   ? RecomputeSetting{}
        : r == 1 ? RecomputeSetting{RecomputeKind::kSelective, 0, kDefaultRecomputeModules}
        : r == 2 ? RecomputeSetting{RecomputeKind::kFull, 0}
                 : RecomputeSetting{RecomputeKind::kFull, 1 + static_cast<int>(rng() % 3)};
  }
  return in;
}

void expect_same(const ConfigOutcome& a, const ConfigOutcome& b, const std::string& what) {
  ASSERT_EQ(a.best.has_value(), b.best.has_value()) << what;
  if (!a.best) return;
  EXPECT_NEAR(a.best->latency_s, b.best->latency_s, 1e-9 * b.best->latency_s) << what;
  auto show = [](const Plan& p) {
    std::ostringstream o;
    for (const auto& st : p.stages)
      o << st.device_type << "x" << st.layers << "r" << static_cast<int>(st.recompute.kind) << ":"
        << st.recompute.layers << " ";
    return o.str();
  };
  EXPECT_EQ(a.best->plan, b.best->plan)
      << what << "\n dp: " << show(a.best->plan) << "\n bf: " << show(b.best->plan);
}

// When brute force over `in`'s configurations under `opt` stays at most
// `max_plans` plans, calls each(model, configurations, tables) and returns
// true.
template <class F>
bool with_small_space(const Instance& in, const SearchOptions& opt, double max_plans, F&& each) {
  const auto pis = enumerate_configs(in.workload, in.cluster, opt.space);
  if (pis.empty()) return false;
  const ProfileTables tables = tables_for(in.workload, in.cluster, pis);
  const CostModel model(in.workload, in.cluster, tables);
  double size = 0;
  for (const auto& pi : pis) size += bruteforce_size(model, pi, opt);
  if (size > max_plans) return false;
  each(model, pis, tables);
  return true;
}

// The devices of each type a plan uses.
std::vector<int> devices_of(const Plan& plan, int types) {
  std::vector<int> devices(static_cast<std::size_t>(types), 0);
  for (const StagePlan& st : plan.stages) {
    devices[static_cast<std::size_t>(st.device_type)] += plan.parallel.stage_devices();
  }
  return devices;
}

// Pi comes in canonical order (pp, tp, cp, ep, tpe, dp), without
// repeats: the enumerator sorts only within each (pp, tp, cp, ep) group.
TEST(ConfigSpace, CanonicalOrderWithoutRepeats) {
  std::mt19937 rng(7);
  int checked = 0;
  for (int trial = 0; trial < 100; ++trial) {
    const Instance in = random_instance(rng);
    const auto pis = enumerate_configs(in.workload, in.cluster, {});
    for (std::size_t k = 1; k < pis.size(); ++k) {
      const ParallelConfig& a = pis[k - 1];
      const ParallelConfig& b = pis[k];
      ASSERT_LT(std::tie(a.pp, a.tp, a.cp, a.ep, a.tpe, a.dp),
                std::tie(b.pp, b.tp, b.cp, b.ep, b.tpe, b.dp))
          << "trial " << trial << " at " << k;
      ++checked;
    }
  }
  const auto large = enumerate_configs(load_workload("mixtral-l"), load_cluster("paper:32-1"), {});
  for (std::size_t k = 1; k < large.size(); ++k) {
    const ParallelConfig& a = large[k - 1];
    const ParallelConfig& b = large[k];
    ASSERT_LT(std::tie(a.pp, a.tp, a.cp, a.ep, a.tpe, a.dp),
              std::tie(b.pp, b.tp, b.cp, b.ep, b.tpe, b.dp));
    ++checked;
  }
  EXPECT_GT(checked, 1000);
}

TEST(SearchOracle, DpEqualsBruteForceWithPruningsOff) {
  std::mt19937 rng(20261122);
  SearchOptions opt;
  opt.prune = {false, false, false};
  opt.space.max_pp = 4;
  int instances = 0;
  int configs = 0;
  int with_plan = 0;
  int with_recompute = 0;
  int with_fsdp = 0;         // plans found under ZeRO-2/3
  int with_offload = 0;      // plans found with optimizer offload
  int with_act_offload = 0;  // plans found with activation offload
  int with_vpp = 0;          // plans found interleaved
  int with_job = 0;          // plans found under a job-wide recompute setting
  while (instances < 300) {
    const Instance in = random_instance(rng);
    if (!in.valid()) continue;
    opt.space.vpp = in.vpp;
    instances += with_small_space(
        in, opt, 2e5, [&](const CostModel& model, const auto& pis, const ProfileTables& tables) {
          for (const auto& pi : pis) {
            ++configs;
            const ConfigOutcome dp = search_config(model, pi, opt);
            const ConfigOutcome bf = bruteforce_config(model, pi, opt);
            expect_same(dp, bf, in.describe());
            if (bf.best) {
              ++with_plan;
              if (in.workload.training.fsdp != Fsdp::kOff) ++with_fsdp;
              if (in.workload.training.optimizer_offload_fraction > 0) ++with_offload;
              if (in.workload.training.activation_offload_layers > 0) ++with_act_offload;
              if (pi.vpp > 1) ++with_vpp;
              if (const auto& setting = in.workload.training.recompute) {
                ++with_job;
                // Every stage takes the setting, and per-stage recompute is a
                // lower bound on it (CostModel::least_recompute).
                for (const StagePlan& st : bf.best->plan.stages) {
                  EXPECT_EQ(st.recompute, stage_recompute(*setting, st.layers)) << in.describe();
                }
                Workload per_stage = in.workload;
                per_stage.training.recompute.reset();
                const CostModel relaxed(per_stage, in.cluster, tables);
                const ConfigOutcome lb = search_config(relaxed, pi, opt);
                ASSERT_TRUE(lb.best.has_value()) << in.describe();
                // (up to rounding: the same stage sums in another order)
                EXPECT_LE(lb.best->latency_s, bf.best->latency_s * (1 + 1e-12)) << in.describe();
              }
              for (const StagePlan& s : bf.best->plan.stages) {
                if (s.recompute.kind != RecomputeKind::kNone) {
                  ++with_recompute;
                  break;
                }
              }
              // Bit-identical latency, and the same figure as evaluate().
              EXPECT_EQ(dp.best->latency_s, bf.best->latency_s);
              EXPECT_EQ(model.evaluate(dp.best->plan).latency_s, dp.best->latency_s);
              // With an incumbent (the tight optimum, or a looser one) partial
              // plans ahead in the sum by more than the tie margin drop the
              // others regardless of their key: still the same plan.
              for (const double slack : {1.0, 1.5}) {
                const double incumbent = bf.best->latency_s * slack;
                expect_same(search_config(model, pi, opt, incumbent), bf,
                            in.describe() + " incumbent x" + std::to_string(slack));
              }
            }
          }
        });
  }
  // The instances exercise what they should: plans that fit, plans that
  // need recomputation, configurations where nothing fits.
  EXPECT_GT(with_plan, configs / 10);
  EXPECT_LT(with_plan, configs);
  EXPECT_GT(with_recompute, 20);
  EXPECT_GT(with_fsdp, 20);
  EXPECT_GT(with_offload, 10);
  EXPECT_GT(with_act_offload, 5);
  EXPECT_GT(with_vpp, 20);
  EXPECT_GT(with_job, 20);
}

// The stage memo as a map (MemoMap, used above kFlatMemoBytes of flat
// table: thousands of layers, issue 21 item 5) gives what the flat table
// gives: the same plans, latencies and counters, with the prunings and
// the bound on and off, and brute force's optimum.
TEST(SearchOracle, TheMemoMapGivesTheFlatTablesResults) {
  std::mt19937 rng(20261124);
  int instances = 0;
  int with_plan = 0;
  while (instances < 60) {
    const Instance in = random_instance(rng);
    if (!in.valid()) continue;
    SearchOptions opt;
    opt.space.max_pp = 4;
    opt.space.vpp = in.vpp;
    const auto pis = enumerate_configs(in.workload, in.cluster, opt.space);
    if (pis.empty()) continue;
    const ProfileTables tables = tables_for(in.workload, in.cluster, pis);
    const CostModel model(in.workload, in.cluster, tables);
    ++instances;
    for (const auto& pi : pis) {
      for (const bool pruned : {true, false}) {
        SearchOptions o = opt;
        if (!pruned) {
          o.prune = {false, false, false};
          o.bound = false;
        }
        const ConfigOutcome flat = search_config(model, pi, o);
        hsdp::flat_memo_bytes = 0;
        const ConfigOutcome map = search_config(model, pi, o);
        hsdp::flat_memo_bytes = hsdp::kFlatMemoBytes;
        ASSERT_EQ(flat.best.has_value(), map.best.has_value()) << in.describe();
        EXPECT_EQ(flat.stats.transitions, map.stats.transitions) << in.describe();
        EXPECT_EQ(flat.stats.states, map.stats.states) << in.describe();
        if (!flat.best) continue;
        ++with_plan;
        EXPECT_EQ(flat.best->latency_s, map.best->latency_s) << in.describe();
        EXPECT_EQ(flat.best->plan, map.best->plan) << in.describe();
        if (!pruned && bruteforce_size(model, pi, o) < 2e4) {
          hsdp::flat_memo_bytes = 0;
          const ConfigOutcome bf = bruteforce_config(model, pi, o);
          hsdp::flat_memo_bytes = hsdp::kFlatMemoBytes;
          expect_same(map, bf, in.describe() + " (map)");
        }
      }
    }
  }
  EXPECT_GT(with_plan, 20);
}

// A stage of more than 32,767 layers (models go to 100,000): the labels
// kept a stage's layers in 16 bits, and the plan came back without it.
TEST(Search, AStageOfFortyThousandLayers) {
  Workload w = load_workload(std::string(HAPMOE_TEST_DATA) + "/models/tiny-moe-4000.json");
  w.model.num_layers = 40000;  // narrow, short sequences: it fits on one stage
  w.model.hidden = 64;
  w.model.num_heads = 1;
  w.model.num_kv_heads = 1;
  w.model.head_dim = 64;
  w.model.ffn_hidden = 64;
  w.model.expert_ffn_hidden = 64;
  w.model.vocab = 1000;
  w.training.seq_len = 128;
  w.model.moe_layers.assign(40000, 1);
  w.model.moe_layers[0] = 0;
  const ClusterSpec cl = load_cluster("H200:8");
  ParallelConfig pi;
  pi.pp = 1;
  pi.dp = 8;
  pi.ep = 4;
  const ProfileTables tables = tables_for(w, cl, {pi});
  const CostModel model(w, cl, tables);
  const ConfigOutcome out = search_config(model, pi, {});
  ASSERT_TRUE(out.best.has_value());
  ASSERT_EQ(out.best->plan.stages.size(), 1u);
  EXPECT_EQ(out.best->plan.stages[0].layers, 40000);
  EXPECT_EQ(model.evaluate(out.best->plan).latency_s, out.best->latency_s);
}

TEST(SearchOracle, PruningsNeverBeatTheUnprunedOptimum) {
  std::mt19937 rng(7);
  SearchOptions none;
  none.prune = {false, false, false};
  none.space.max_pp = 6;
  int compared = 0;
  for (int trial = 0; trial < 120; ++trial) {
    const Instance in = random_instance(rng);
    if (!in.valid()) continue;
    const SearchResult base = run_search(in.workload, in.cluster, none);
    for (const PruneSet p : {PruneSet{true, false, false}, PruneSet{false, true, false},
                             PruneSet{false, false, true}, PruneSet{true, true, true}}) {
      SearchOptions o = none;
      o.prune = p;
      const SearchResult r = run_search(in.workload, in.cluster, o);
      if (r.top.empty()) continue;
      ASSERT_FALSE(base.top.empty()) << in.describe();
      EXPECT_GE(r.top.front().latency_s, base.top.front().latency_s * (1 - 1e-12))
          << in.describe() << " prune " << to_string(p);
      // Memory pruning alone is exact: it only cuts stages that cannot fit.
      if (p == PruneSet{false, true, false}) {
        EXPECT_EQ(r.top.front().plan, base.top.front().plan) << in.describe();
        EXPECT_LE(r.stats.transitions, base.stats.transitions);
      }
      ++compared;
    }
  }
  EXPECT_GT(compared, 100);
}

TEST(SearchOracle, LoadBalancePruningLosesNothingOnHomogeneousClusters) {
  std::mt19937 rng(99);
  SearchOptions none;
  none.prune = {false, false, false};
  none.space.max_pp = 8;
  SearchOptions lb = none;
  lb.prune = {true, false, false};
  int compared = 0;
  for (int trial = 0; compared < 60 && trial < 2000; ++trial) {
    Instance in = random_instance(rng);
    in.cluster.pools.resize(1);
    in.cluster.pools[0].device.memory_bytes *= 4;  // plenty: the balanced optimum
    if (!in.valid()) continue;
    const SearchResult a = run_search(in.workload, in.cluster, none);
    const SearchResult b = run_search(in.workload, in.cluster, lb);
    if (a.top.empty()) continue;
    ASSERT_FALSE(b.top.empty()) << in.describe();
    auto show = [](const Plan& p) {
      std::ostringstream o;
      const auto& q = p.parallel;
      o << "pp" << q.pp << " tp" << q.tp << " cp" << q.cp << " ep" << q.ep << " tpe" << q.tpe
        << " dp" << q.dp << ": ";
      for (const auto& st : p.stages)
        o << st.layers << "r" << static_cast<int>(st.recompute.kind) << " ";
      return o.str();
    };
    EXPECT_EQ(b.top.front().latency_s, a.top.front().latency_s)
        << in.describe() << "\n none: " << show(a.top.front().plan)
        << "\n lb: " << show(b.top.front().plan);
    // The pruning cuts moves: without the bound, whose cuts follow the
    // K-th best (a configuration's best plan may be an unbalanced one the
    // pruning loses, so its K-th best is no better), every move the
    // pruned DP makes the plain one makes too.
    SearchOptions none_all = none;
    SearchOptions lb_all = lb;
    none_all.bound = lb_all.bound = false;
    EXPECT_LE(run_search(in.workload, in.cluster, lb_all).stats.transitions,
              run_search(in.workload, in.cluster, none_all).stats.transitions)
        << in.describe();
    ++compared;
  }
  EXPECT_GE(compared, 60);
}

TEST(SearchOracle, UniformForcesEvenLayers) {
  std::mt19937 rng(5);
  SearchOptions o;
  o.uniform = true;
  int checked = 0;
  for (int trial = 0; checked < 30 && trial < 500; ++trial) {
    const Instance in = random_instance(rng);
    if (!in.valid()) continue;
    const SearchResult r = run_search(in.workload, in.cluster, o);
    for (const PlanCandidate& c : r.top) {
      const int n = in.workload.model.num_layers;
      const int pp = c.plan.parallel.pp;
      EXPECT_EQ(n % pp, 0) << "an even split needs PP | N";
      for (int i = 0; i < pp; ++i) {
        EXPECT_EQ(c.plan.stages[static_cast<std::size_t>(i)].layers, n / pp);
      }
      ++checked;
    }
  }
  EXPECT_GE(checked, 30);
}

// The uniform ablation's space (docs/baselines.md): the even split on
// given devices per type, DP == brute force per configuration, and every
// plan on exactly those devices.
TEST(SearchOracle, UniformOnGivenDevicesEqualsBruteForce) {
  std::mt19937 rng(2611);
  int instances = 0;
  int with_plan = 0;
  for (int trial = 0; instances < 40 && trial < 2000; ++trial) {
    const Instance in = random_instance(rng);
    if (!in.valid()) continue;
    SearchOptions free;
    free.prune = {false, false, false};
    free.space.max_pp = 4;
    free.space.vpp = in.vpp;
    const SearchResult best = run_search(in.workload, in.cluster, free);
    if (best.top.empty()) continue;
    SearchOptions o = free;
    o.uniform = true;
    o.devices_per_type = devices_of(best.top.front().plan, in.cluster.num_types());
    instances += with_small_space(
        in, o, 2e5, [&](const CostModel& model, const auto& pis, const ProfileTables&) {
          for (const auto& pi : pis) {
            const ConfigOutcome dp = search_config(model, pi, o);
            const ConfigOutcome bf = bruteforce_config(model, pi, o);
            expect_same(dp, bf, in.describe());
            if (!bf.best) continue;
            ++with_plan;
            const int n = in.workload.model.num_layers;
            for (const StagePlan& st : bf.best->plan.stages) {
              EXPECT_EQ(st.layers * pi.pp, n) << in.describe();
            }
            EXPECT_EQ(devices_of(bf.best->plan, in.cluster.num_types()), o.devices_per_type)
                << in.describe();
          }
        });
  }
  EXPECT_GE(instances, 40);
  EXPECT_GE(with_plan, 20);
}

// `plan --launcher` searches only the stage orders the launcher can place
// (partition/constraints.h, place_stages): DP == brute force under that
// rule, with at most the devices of each type (prunings off) and with
// exactly given devices per type (the uniform ablation's path, a fixed
// stage mix, like the load-balance pruning's), and every plan found is
// placeable. Some instances must have an unconstrained optimum that
// cannot be placed, or the rule is untried.
TEST(SearchOracle, LauncherPlacementEqualsBruteForce) {
  std::mt19937 rng(20261124);
  int instances = 0;
  int with_plan = 0;
  int with_mix_plan = 0;
  int constrained = 0;  // the unconstrained best plan cannot be placed
  const auto placeable = [](const ClusterSpec& cluster, const PlanCandidate& c) {
    std::vector<int> order;
    for (const StagePlan& st : c.plan.stages) order.push_back(st.device_type);
    return place_stages(cluster, c.plan.parallel.stage_devices(), order).ok();
  };
  while (instances < 120) {
    const Instance in = random_instance(rng);
    if (!in.valid()) continue;
    SearchOptions free;
    free.prune = {false, false, false};
    free.space.max_pp = 4;
    free.space.vpp = in.vpp;
    SearchOptions placed = free;
    placed.space.constraints.launcher_placement = true;
    // The devices of the best unconstrained plan, for the exact mixes.
    const SearchResult best = run_search(in.workload, in.cluster, free);
    SearchOptions mix = placed;
    mix.uniform = true;
    if (!best.top.empty())
      mix.devices_per_type = devices_of(best.top.front().plan, in.cluster.num_types());
    instances += with_small_space(
        in, free, 1e5, [&](const CostModel& model, const auto& pis, const ProfileTables&) {
          for (const auto& pi : pis) {
            const ConfigOutcome bf = bruteforce_config(model, pi, placed);
            expect_same(search_config(model, pi, placed), bf, in.describe());
            const ConfigOutcome any = bruteforce_config(model, pi, free);
            if (bf.best) {
              ++with_plan;
              EXPECT_TRUE(placeable(in.cluster, *bf.best)) << in.describe();
            }
            if (any.best && (!bf.best || any.best->latency_s < bf.best->latency_s)) ++constrained;
            if (best.top.empty()) continue;
            const ConfigOutcome bf_mix = bruteforce_config(model, pi, mix);
            expect_same(search_config(model, pi, mix), bf_mix, in.describe() + " (exact mix)");
            if (bf_mix.best) {
              ++with_mix_plan;
              EXPECT_TRUE(placeable(in.cluster, *bf_mix.best)) << in.describe();
            }
          }
        });
  }
  EXPECT_GE(with_plan, 100);
  EXPECT_GE(with_mix_plan, 20);
  EXPECT_GE(constrained, 10);
}

TEST(SearchOracle, BranchAndBoundChangesNothing) {
  std::mt19937 rng(31);
  int compared = 0;
  for (int trial = 0; trial < 150; ++trial) {
    const Instance in = random_instance(rng);
    if (!in.valid()) continue;
    for (const PruneSet p : {PruneSet{true, true, true}, PruneSet{false, false, false}}) {
      SearchOptions on;
      on.prune = p;
      on.space.vpp = in.vpp;
      on.top_k = 1 + static_cast<int>(rng() % 5);
      SearchOptions off = on;
      off.bound = false;
      const SearchResult a = run_search(in.workload, in.cluster, on);
      const SearchResult b = run_search(in.workload, in.cluster, off);
      ASSERT_EQ(a.top.size(), b.top.size()) << in.describe();
      for (std::size_t k = 0; k < a.top.size(); ++k) {
        EXPECT_EQ(a.top[k].plan, b.top[k].plan) << in.describe() << " rank " << k;
        EXPECT_EQ(a.top[k].latency_s, b.top[k].latency_s) << in.describe();
      }
      // (Transitions may be more with the bound on tiny instances: a
      // configuration searched without an incumbent runs twice.)
      EXPECT_LE(a.stats.configs_evaluated, b.stats.configs_evaluated);
      ++compared;
    }
  }
  EXPECT_GT(compared, 150);
}

// For `trials` random instances with configurations: each(instance,
// options (the bound on 3 times in 4, PP at most 6), model, configurations).
template <class F>
void for_random_configs(std::mt19937& rng, int trials, F&& each) {
  for (int trial = 0; trial < trials; ++trial) {
    const Instance in = random_instance(rng);
    if (!in.valid()) continue;
    SearchOptions opt;
    opt.bound = rng() % 4 != 0;
    opt.space.max_pp = 6;
    const auto pis = enumerate_configs(in.workload, in.cluster, opt.space);
    if (pis.empty()) continue;
    const ProfileTables tables = tables_for(in.workload, in.cluster, pis);
    const CostModel model(in.workload, in.cluster, tables);
    each(in, opt, model, pis);
  }
}

void expect_same_counters(const ConfigOutcome& a, const ConfigOutcome& b, const std::string& what) {
  EXPECT_EQ(a.stats.states, b.stats.states) << what;
  EXPECT_EQ(a.stats.transitions, b.stats.transitions) << what;
  EXPECT_EQ(a.stats.feasible, b.stats.feasible) << what;
  EXPECT_EQ(a.stats.pruned_load_balance, b.stats.pruned_load_balance) << what;
  EXPECT_EQ(a.stats.pruned_memory, b.stats.pruned_memory) << what;
}

TEST(SearchOracle, PartsMergeToTheWholeSearch) {
  // A configuration cut into parts (its stage mixes dealt round-robin)
  // and merged gives the same best plan, to the bit, as one search: with
  // and without the bound, with no incumbent, a loose one and the tight one.
  std::mt19937 rng(4242);
  int compared = 0;
  int cut = 0;
  for_random_configs(
      rng, 120,
      [&](const Instance& in, const SearchOptions& opt, const CostModel& model,
          const std::vector<ParallelConfig>& pis) {
        for (const auto& pi : pis) {
          const ConfigOutcome whole = search_config(model, pi, opt);
          const int most = max_parts(model, pi, opt);
          ASSERT_GE(most, 1);
          std::vector<double> incumbents = {std::numeric_limits<double>::infinity()};
          if (whole.best)
            incumbents.insert(incumbents.end(),
                              {whole.best->latency_s * 1.5, whole.best->latency_s});
          for (const double incumbent : incumbents) {
            const ConfigOutcome reference = search_config(model, pi, opt, incumbent);
            for (const int count : {2, 3, most}) {
              ConfigOutcome merged;
              for (int p = 0; p < count; ++p) {
                merge_part(merged, search_config(model, pi, opt, incumbent, SearchPart{p, count}));
              }
              const std::string what = in.describe() + " parts " + std::to_string(count) +
                                       " incumbent " + std::to_string(incumbent);
              expect_same(merged, reference, what);
              if (reference.best) {
                EXPECT_EQ(merged.best->latency_s, reference.best->latency_s) << what;
              }
              EXPECT_EQ(merged.stats.configs_evaluated, 1);
              if (!opt.bound) {  // independent mixes: the parts' counters are the whole's
                expect_same_counters(merged, reference, what);
              }
              ++compared;
              if (count > 1 && most > 1) ++cut;
            }
          }
        }
      });
  EXPECT_GT(compared, 300);
  EXPECT_GT(cut, 100);
}

// The shares of one DP trading each level through memory, one thread per
// share, as the driver's threads do (engine/driver.cpp, RankTrade).
class ThreadTrade final : public LevelExchange {
 public:
  explicit ThreadTrade(int shares) : sync_(shares), mine_(static_cast<std::size_t>(shares)) {}
  const std::vector<std::string_view>& trade(int share, std::string_view built) override {
    sync_.arrive_and_wait();
    mine_[static_cast<std::size_t>(share)] = built;
    sync_.arrive_and_wait();
    ++trades_[static_cast<std::size_t>(share)];
    return mine_;
  }
  int trades(int share) const { return trades_[static_cast<std::size_t>(share)]; }

 private:
  std::barrier<> sync_;
  std::vector<std::string_view> mine_;
  std::array<int, 8> trades_{};
};

// pi searched in `count` level shares at once, merged in share order.
ConfigOutcome search_in_shares(const CostModel& model, const ParallelConfig& pi,
                               const SearchOptions& opt, int count,
                               const std::function<const CancelCheck*(int)>& cancel_of = {}) {
  ThreadTrade trade(count);
  std::vector<ConfigOutcome> outcomes(static_cast<std::size_t>(count));
  {
    std::vector<std::jthread> threads;
    threads.reserve(static_cast<std::size_t>(count));
    for (int s = 0; s < count; ++s) {
      threads.emplace_back([&, s] {
        outcomes[static_cast<std::size_t>(s)] =
            search_config(model, pi, opt, std::numeric_limits<double>::infinity(),
                          SearchPart{s, count, &trade}, cancel_of ? cancel_of(s) : nullptr);
        // The closing trade: no thread ends (its buffers with it) while
        // another may still read its last level.
        trade.trade(s, std::string_view("\x02", 1));
      });
    }
  }
  for (int s = 1; s < count; ++s) EXPECT_EQ(trade.trades(s), trade.trades(0));
  ConfigOutcome merged;
  for (const ConfigOutcome& o : outcomes) merge_part(merged, o);
  return merged;
}

TEST(SearchOracle, LevelSharesMergeToTheWholeSearch) {
  // Without the bound and without stage mixes, a configuration's one DP
  // shared level by level between 2 or 3 threads (each builds the
  // states that hash to it, then they trade) gives the same best plan, to
  // the bit, and the same counters as one search, with each of the
  // prunings that can be on and under --uniform.
  std::mt19937 rng(6060);
  int compared = 0;
  int with_plan = 0;
  int cut_memory = 0;
  int cut_comm = 0;
  for_random_configs(
      rng, 15,
      [&](const Instance& in, SearchOptions opt, const CostModel& model,
          const std::vector<ParallelConfig>& pis) {
        opt.bound = false;
        const int variant = compared % 5;
        opt.prune = {false, variant == 1 || variant == 3, variant == 2 || variant == 3};
        opt.eta = variant == 2 ? 0.05 : opt.eta;  // cut some cross-type boundaries
        opt.uniform = variant == 4;
        ASSERT_TRUE(can_share_levels(opt));
        for (const auto& pi : pis) {
          const ConfigOutcome whole = search_config(model, pi, opt);
          for (const int count : {2, 3}) {
            const ConfigOutcome merged = search_in_shares(model, pi, opt, count);
            const std::string what = in.describe() + " shares " + std::to_string(count) +
                                     " prune " + to_string(opt.prune);
            expect_same(merged, whole, what);
            if (whole.best) {
              EXPECT_EQ(merged.best->latency_s, whole.best->latency_s) << what;
            }
            expect_same_counters(merged, whole, what);
            EXPECT_EQ(merged.stats.pruned_hetero_comm, whole.stats.pruned_hetero_comm) << what;
            EXPECT_EQ(merged.stats.hetero_comm_ratio, whole.stats.hetero_comm_ratio) << what;
            EXPECT_EQ(merged.closest.bytes, whole.closest.bytes) << what;
            EXPECT_FALSE(merged.cancelled) << what;
          }
          ++compared;
          with_plan += whole.best ? 1 : 0;
          cut_memory += whole.stats.pruned_memory > 0 ? 1 : 0;
          cut_comm += whole.stats.pruned_hetero_comm > 0 ? 1 : 0;
        }
      });
  EXPECT_GT(compared, 500);
  EXPECT_GT(with_plan, 200);
  EXPECT_GT(cut_memory, 50);
  EXPECT_GT(cut_comm, 50);
}

// Mixtral-S on paper:16-2 without the bound or the prunings, and its
// deepest configuration: a DP of several levels for the level shares.
struct DeepPlain {
  Workload w = load_workload("mixtral-s");
  ClusterSpec cl = load_cluster("paper:16-2");
  SearchOptions opt = [] {
    SearchOptions o;
    o.bound = false;
    o.prune = {false, false, false};
    return o;
  }();
  std::vector<ParallelConfig> pis = enumerate_configs(w, cl, opt.space);
  ProfileTables tables = tables_for(w, cl, pis);
  CostModel model{w, cl, tables};
  const ParallelConfig& deepest() const {
    return *std::max_element(pis.begin(), pis.end(),
                             [](const auto& a, const auto& b) { return a.pp < b.pp; });
  }
};

TEST(SearchOracle, ALevelShareThatStopsStopsThemAll) {
  // A limit reached by one share (its cancel check) ends every share's
  // search at the next trade, cancelled, instead of leaving them waiting.
  const DeepPlain c;
  const ParallelConfig& deep = c.deepest();
  ASSERT_GE(deep.pp, 4);
  int asked = 0;
  const CancelCheck stop_third = [&](std::int64_t) { return ++asked >= 3; };
  const ConfigOutcome merged = search_in_shares(
      c.model, deep, c.opt, 3, [&](int s) { return s == 1 ? &stop_third : nullptr; });
  EXPECT_TRUE(merged.cancelled);
  EXPECT_FALSE(merged.best.has_value());
  const ConfigOutcome whole = search_config(c.model, deep, c.opt);
  EXPECT_LT(merged.stats.transitions, whole.stats.transitions);
}

// A share of the driver's (engine/driver.h, search_in_shares) that fails,
// here its limit check throwing, stops the other shares at their next
// trade, and they all end together: the failure is reported, the outcome
// cancelled, nothing waits forever.
TEST(Parallel, ALevelShareThatFailsStopsTheOthersAndIsReported) {
  const DeepPlain c;
  const ParallelConfig& deep = c.deepest();
  ASSERT_GE(deep.pp, 4);
  SerialComm comm;
  for (const int fail_at : {1, 2, 5}) {
    std::atomic<int> asked{0};
    const CancelCheck failing = [&](std::int64_t) {
      if (asked.fetch_add(1) + 1 == fail_at) throw std::runtime_error("injected limit failure");
      return false;
    };
    int shares = 0;
    std::string error;
    const ConfigOutcome o =
        hapmoe::search_in_shares(comm, 2, c.model, deep, c.opt,
                                 std::numeric_limits<double>::infinity(), &failing, shares, error);
    const std::string what = "failing at ask " + std::to_string(fail_at);
    EXPECT_EQ(shares, 2) << what;
    EXPECT_EQ(error, "injected limit failure") << what;
    EXPECT_TRUE(o.cancelled) << what;
    EXPECT_FALSE(o.best.has_value()) << what;
  }
}

TEST(SearchOracle, SearchFromAnEstimatesFactsIsTheSearch) {
  // A round's work estimate keeps the evaluator it made (ConfigFacts), and
  // the configuration's search starts from it, on another thread's memo
  // perhaps, after other evaluators, and once per part: the same outcome,
  // counters included, as a search that makes its own.
  std::mt19937 rng(977);
  int compared = 0;
  int with_plan = 0;
  for_random_configs(
      rng, 60,
      [&](const Instance& in, const SearchOptions& opt, const CostModel& model,
          const std::vector<ParallelConfig>& pis) {
        for (const double incumbent : {std::numeric_limits<double>::infinity(), 1e9}) {
          // Every estimate first (as a round does), then every search.
          std::vector<std::shared_ptr<const ConfigFacts>> facts(pis.size());
          for (std::size_t c = 0; c < pis.size(); ++c) {
            const double kept = work_estimate(model, pis[c], opt, incumbent, &facts[c]);
            ASSERT_EQ(kept, work_estimate(model, pis[c], opt, incumbent));
            ASSERT_NE(facts[c], nullptr);
          }
          for (std::size_t c = pis.size(); c-- > 0;) {
            const ConfigOutcome own = search_config(model, pis[c], opt, incumbent);
            for (int count : {1, 2}) {
              ConfigOutcome merged;
              ConfigOutcome reference;
              for (int p = 0; p < count; ++p) {
                const SearchPart part{p, count};
                merge_part(merged, search_config(model, pis[c], opt, incumbent, part, nullptr,
                                                 facts[c].get()));
                merge_part(reference, search_config(model, pis[c], opt, incumbent, part));
              }
              const std::string what = in.describe() + " config " + std::to_string(c) + " parts " +
                                       std::to_string(count);
              expect_same(merged, reference, what);
              if (count == 1) expect_same(merged, own, what);
              expect_same_counters(merged, reference, what);
              EXPECT_EQ(merged.closest.bytes, reference.closest.bytes) << what;
              ++compared;
              if (reference.best) ++with_plan;
            }
          }
        }
      });
  EXPECT_GT(compared, 200);
  EXPECT_GT(with_plan, 50);
}

// The kernel's stage memo (engine/stage_memo.h, Evaluator) shares one entry
// between stages that CostModel cannot tell apart: a middle position with
// all M micro-batches in flight (PP - i >= M) is evaluated as position 1,
// and a stage whose layers are all MoE (all dense) as the first run of
// such layers of its length. This checks that premise on the cost model
// itself, for random MoE patterns and few micro-batches, so a change to
// what stage_cost reads fails here rather than silently in the search.
TEST(Search, StagesTheMemoSharesCostTheSame) {
  std::mt19937 rng(314);
  int compared = 0;
  int shared = 0;
  for (int trial = 0; trial < 60; ++trial) {
    Instance in = random_instance(rng);
    ModelSpec& m = in.workload.model;
    if (m.num_experts > 0) {  // a random pattern, at least one MoE layer
      for (auto& l : m.moe_layers) l = static_cast<std::uint8_t>(rng() % 2);
      m.moe_layers[rng() % m.moe_layers.size()] = 1;
    }
    if (!in.valid()) continue;
    SpaceOptions space;
    space.max_pp = 6;
    space.vpp = in.vpp;
    const auto pis = enumerate_configs(in.workload, in.cluster, space);
    if (pis.empty()) continue;
    const ProfileTables tables = tables_for(in.workload, in.cluster, pis);
    const CostModel model(in.workload, in.cluster, tables);
    const int n = m.num_layers;
    std::vector<int> kind(static_cast<std::size_t>(n));
    for (int j = 0; j < n; ++j) kind[static_cast<std::size_t>(j)] = model.moe_layers_in(j, 1);
    const auto uniform = [&](int j, int len) {
      for (int t = j; t < j + len; ++t) {
        if (kind[static_cast<std::size_t>(t)] != kind[static_cast<std::size_t>(j)]) return false;
      }
      return true;
    };
    for (std::size_t c = 0; c < pis.size(); c += 1 + pis.size() / 8) {
      const ParallelConfig& pi = pis[c];
      const int mb = model.num_microbatches(pi);
      for (int h = 0; h < in.cluster.num_types(); ++h) {
        const TypeCosts tc = model.type_costs(pi, h);
        const auto eval = [&](int i, int j, int len) {
          StageShape s;
          s.position = i;
          s.first_layer = j;
          s.layers = len;
          s.moe_layers = model.moe_layers_in(j, len);
          const std::optional<Recompute> r = model.least_recompute(pi, tc, s);
          s.recompute = r.value_or(Recompute{RecomputeKind::kFull, len});
          if (s.recompute.kind == RecomputeKind::kFull) {
            s.moe_in_first_recomputed = model.moe_layers_in(j, s.recompute.layers);
          }
          return std::make_pair(r, model.stage_cost(pi, tc, s));
        };
        for (int i = 0; i < pi.pp; ++i) {
          // Micro-batches in flight at i (stage_cost), all of them (M x v)
          // from some middle position on.
          const int chunks =
              pi.vpp > 1 ? 2 * (pi.pp - i - 1) + (pi.vpp - 1) * pi.pp + 1 : pi.pp - i;
          const int i_rep = (i > 0 && i < pi.pp - 1 && chunks >= mb * pi.vpp) ? 1 : i;
          for (int j = 0; j < n; ++j) {
            for (int len = 1; j + len <= n; ++len) {
              int j_rep = j;
              if (uniform(j, len)) {
                j_rep = 0;
                while (!(uniform(j_rep, len) && kind[static_cast<std::size_t>(j_rep)] ==
                                                    kind[static_cast<std::size_t>(j)])) {
                  ++j_rep;
                }
              }
              if (i_rep == i && j_rep == j) continue;
              const auto [ra, a] = eval(i, j, len);
              const auto [rb, b] = eval(i_rep, j_rep, len);
              ASSERT_EQ(ra, rb) << in.describe() << " i " << i << " j " << j << " n " << len;
              EXPECT_EQ(a.fwd_s, b.fwd_s);
              EXPECT_EQ(a.bwd_s, b.bwd_s);
              EXPECT_EQ(a.dp_sync_s, b.dp_sync_s);
              EXPECT_EQ(a.optimizer_s, b.optimizer_s);
              EXPECT_EQ(a.memory.total(), b.memory.total());
              EXPECT_EQ(a.capacity_bytes, b.capacity_bytes);
              ++shared;
            }
          }
        }
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 50);
  EXPECT_GT(shared, 1000);
}

TEST(Search, LowerBoundIsBelowEveryPlan) {
  std::mt19937 rng(77);
  int checked = 0;
  int looser = 0;
  int mix_looser = 0;
  int capped = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const Instance in = random_instance(rng);
    if (!in.valid()) continue;
    SearchOptions o;
    o.bound = false;
    o.prune = {false, false, false};
    o.space.vpp = in.vpp;
    const SearchResult r = run_search(in.workload, in.cluster, o);
    const ProfileTables tables = tables_for(in.workload, in.cluster, r.configs);
    const CostModel model(in.workload, in.cluster, tables);
    for (std::size_t c = 0; c < r.configs.size(); ++c) {
      const ConfigOutcome* searched = r.outcome(c);
      ASSERT_NE(searched, nullptr);  // no bound: every configuration is searched
      if (!searched->best) continue;
      const double best = searched->best->latency_s;
      const ConfigBound b = config_lower_bound(model, r.configs[c], o);
      EXPECT_LE(b.latency, best);
      EXPECT_LE(b.steps, b.latency);
      ++checked;
      // The bound of the best plan's stage mix (the DP skips mixes above
      // the incumbent) is below it too.
      hsdp::Evaluator ev(model, r.configs[c], o);
      std::vector<int> mix(static_cast<std::size_t>(in.cluster.num_types()), 0);
      for (const StagePlan& st : searched->best->plan.stages) {
        ++mix[static_cast<std::size_t>(st.device_type)];
      }
      EXPECT_LE(ev.mix_lower_bound(mix), best) << in.describe();
      // With every layer alike, capped by what each type's stages hold in
      // memory (as the search bounds its mixes): still below it.
      if (ev.layers_alike()) {
        std::vector<int> most(mix.size(), 0);
        for (int h = 0; h < in.cluster.num_types(); ++h) {
          if (ev.cap(h) > 0) most[static_cast<std::size_t>(h)] = ev.max_fitting_layers(h);
        }
        EXPECT_LE(ev.mix_lower_bound(mix, &most), best) << in.describe();
        capped += ev.mix_lower_bound(mix, &most) > ev.mix_lower_bound(mix);
      }
      // Against a cut (the driver's incumbent): still below every plan;
      // above the cut when the tightest bound is; the tightest otherwise.
      const BoundShape shape = bound_shape(model, r.configs[c], o);
      for (const double f : {0.3, 0.9, 0.999999, 1.0, 1.000001, 1.2, 3.0}) {
        for (const double cut : {f * b.latency, f * best}) {
          const ConfigBound q = config_lower_bound(model, shape, r.configs[c], cut);
          EXPECT_LE(q.latency, best) << "cut " << cut;
          EXPECT_LE(q.steps, q.latency);
          if (b.latency > cut) {
            EXPECT_GT(q.latency, cut);
          }
          if (q.latency <= cut) {
            EXPECT_EQ(q.latency, b.latency);
            EXPECT_EQ(q.steps, b.steps);
          }
          looser += q.latency > cut && q.latency != b.latency;
        }
        // The mix's bound against a cut: the same rules.
        const double whole = ev.mix_lower_bound(mix);
        for (const double cut : {f * whole, f * best}) {
          const double q = ev.mix_lower_bound(mix, nullptr, cut);
          EXPECT_LE(q, best) << "mix cut " << cut;
          if (whole > cut) {
            EXPECT_GT(q, cut) << "mix cut " << cut;
          }
          if (q <= cut) {
            EXPECT_EQ(q, whole) << "mix cut " << cut;
          }
          mix_looser += q > cut && q != whole;
        }
      }
    }
  }
  EXPECT_GT(checked, 500);
  // The cut settled configurations (and mixes) by its one test, with a
  // looser bound.
  EXPECT_GT(looser, 1000);
  EXPECT_GT(mix_looser, 500);
  // Memory raised some mixes' bounds.
  EXPECT_GT(capped, 0);
}

// The latency floor takes each type's room within the bottleneck: two fast
// stages (a layer step of 1) and two slow ones (3), 8 MoE layers, 10
// micro-batches, a tail of 0.5 per layer. The slowest step is at least 3;
// there the fast stages hold 3 layers each and the slow ones 1, so the
// steps sum to at least 3 + 3 + 3 + 3 = 12 (not 8, every layer on a fast
// stage) and the fullest stage holds 3 layers (tail 1.5, not the mean 1):
// 12 + 9 x 3 + 1.5 = 40.5, which that plan reaches. From a step of 4 on,
// the fast stages hold all 8, but 8 + 9 x 4 + 1 is more.
TEST(Search, LatencyFloorTakesTheRoomWithinTheBottleneck) {
  const std::vector<hsdp::StageFloor> types = {{1.0, 1.0, 0.0, 2}, {3.0, 3.0, 0.0, 2}};
  hsdp::LatencyFloorInputs in;
  in.pp = 4;
  in.moe = 8;
  in.microbatches = 10;
  in.dense_step = 1.0;
  in.moe_step = 1.0;
  in.dense_tail = 0.5;
  in.moe_tail = 0.5;
  const double slowest = hsdp::bottleneck_floor(types, in.pp, 0, in.moe);
  EXPECT_NEAR(slowest, 3.0, 1e-5);
  const ConfigBound b = hsdp::latency_floor(types, in, slowest);
  EXPECT_NEAR(b.latency, 40.5, 1e-6);
  EXPECT_NEAR(b.steps, 39.0, 1e-6);
  EXPECT_LE(b.latency, 40.5);  // the plan above: a lower bound still
  // One micro-batch: the step itself costs nothing more, and the least is
  // in the last interval, from 6 on (the slow stages hold 2 layers): the
  // sum at least 8, the fullest stage at least 2 layers (the mean tail).
  in.microbatches = 1;
  const ConfigBound one = hsdp::latency_floor(types, in, slowest);
  EXPECT_NEAR(one.latency, 8.0 + 1.0, 1e-6);
}

// The bottleneck floor is the step at which the stages first hold the
// layers (their rooms grow by one at each fixed + r x price): just under
// it, to the margin, when that step is alone within its bracket, as it is
// unless two types' steps fall within 1e-6 of each other. Below the floor
// the stages do not hold the layers (it bounds every plan's slowest step);
// just above the step they do.
TEST(Search, BottleneckFloorIsTheStepWhereTheStagesHoldTheLayers) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> price(0.5, 3.0);
  std::uniform_real_distribution<double> fixed(0.0, 2.0);
  std::uniform_int_distribution<int> stages(1, 6);
  std::uniform_int_distribution<int> layers(4, 60);
  int exact = 0;
  int cases = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::vector<hsdp::StageFloor> types;
    const int kinds = 1 + trial % 3;
    int available = 0;
    for (int k = 0; k < kinds; ++k) {
      hsdp::StageFloor t{price(rng), price(rng), fixed(rng), stages(rng)};
      if (trial % 4 == 0) t.most = 3 + trial % 7;
      available += t.stages;
      types.push_back(t);
    }
    const int pp = std::uniform_int_distribution<int>(1, available)(rng);
    const int n = std::max(pp, layers(rng));
    const int dense = trial % 5 == 0 ? 0 : n / 4;
    const int moe = n - dense;
    const double floor = hsdp::bottleneck_floor(types, pp, dense, moe);
    if (!std::isfinite(floor)) continue;
    ++cases;
    // Below it: no plan (bottleneck_floor_above tests floor_holds there).
    EXPECT_GT(hsdp::bottleneck_floor_above(types, pp, dense, moe, floor), 0.0) << trial;
    // The step it stands under: the stages hold the layers there.
    const double step = floor / (1.0 - 1e-9);
    if (hsdp::bottleneck_floor_above(types, pp, dense, moe, step * (1.0 + 1e-12)) == 0.0) ++exact;
  }
  EXPECT_GT(cases, 300);
  EXPECT_GT(exact, cases * 9 / 10);
}

// The whole-layer floor of the stages a partial plan has left (the DP's
// bound on its slowest stage, hsdp::whole_layer_floors), by hand: two
// stages of A (1 per layer) and one of B (0.5 + 3 per layer). Every stage
// holds a layer, so the slowest steps at least 3.5, where A's stages hold
// 3 each and B's 1: 7 layers. The 8th and 9th need a 4th layer on each A
// stage (4), the 10th and 11th a 5th (5); the balanced split in fractions
// of a layer gives only (9 + 1/6) / (2 + 1/3) = 3.93 for 9.
TEST(Search, WholeLayerFloorsByHand) {
  std::vector<double> out;
  hsdp::whole_layer_floors({{0.0, 1.0, 2, 1, 10}, {0.5, 3.0, 1, 1, 10}}, 11, out);
  ASSERT_EQ(out.size(), 12u);
  const double want[] = {3.5, 3.5, 3.5, 3.5, 3.5, 3.5, 3.5, 3.5, 4.0, 4.0, 5.0, 5.0};
  for (int l = 0; l <= 11; ++l) EXPECT_NEAR(out[static_cast<std::size_t>(l)], want[l], 1e-8) << l;
  for (int l = 0; l <= 11; ++l) EXPECT_LE(out[static_cast<std::size_t>(l)], want[l]) << l;
  // A stage of A holds at most 3 (memory, windows): the 8th layer goes to
  // B (6.5), the 9th too (9.5); 10 do not fit.
  hsdp::whole_layer_floors({{0.0, 1.0, 2, 1, 3}, {0.5, 3.0, 1, 1, 3}}, 10, out);
  EXPECT_NEAR(out[8], 6.5, 1e-8);
  EXPECT_NEAR(out[9], 9.5, 1e-8);
  EXPECT_EQ(out[10], std::numeric_limits<double>::infinity());
  // A layer of no cost (a dense model's MoE step) fills the stages: the
  // floor is their entry; steps that are not finite give no floor.
  hsdp::whole_layer_floors({{0.0, 0.0, 2, 1, 10}}, 5, out);
  for (const double v : out) EXPECT_EQ(v, 0.0);
  hsdp::whole_layer_floors({{std::numeric_limits<double>::infinity(), 1.0, 1, 1, 10}}, 5, out);
  for (const double v : out) EXPECT_EQ(v, 0.0);
  // Each stage holds at least 2 (its windows): 0.5 + 2 x 3 from the start.
  hsdp::whole_layer_floors({{0.0, 1.0, 2, 2, 10}, {0.5, 3.0, 1, 2, 10}}, 6, out);
  EXPECT_NEAR(out[0], 6.5, 1e-8);
  EXPECT_NEAR(out[6], 6.5, 1e-8);
}

// The floor is the least slowest step over every way to give the stages
// whole layers within their limits, on random small instances against
// all the ways: never above it (a lower bound), and not below it by more
// than its rounding margin (as tight as the relaxation allows).
TEST(Search, WholeLayerFloorsAreTheLeastSlowestStep) {
  std::mt19937 rng(77);
  std::uniform_real_distribution<double> fixed(0.0, 2.0);
  std::uniform_real_distribution<double> layer(0.5, 4.0);
  int checked = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<hsdp::StagesLeft> left;
    std::vector<int> stage_type;  // one entry per stage
    const int types = 1 + static_cast<int>(rng() % 3);
    for (int t = 0; t < types; ++t) {
      hsdp::StagesLeft s;
      s.fixed = fixed(rng);
      s.layer = layer(rng);
      s.stages = static_cast<int>(rng() % 3);  // 0 .. 2
      s.least = 1 + static_cast<int>(rng() % 2);
      s.most = s.least + static_cast<int>(rng() % 4);
      left.push_back(s);
      for (int k = 0; k < s.stages; ++k) stage_type.push_back(t);
    }
    if (stage_type.empty()) continue;
    const int layers = 14;
    std::vector<double> out;
    hsdp::whole_layer_floors(left, layers, out);
    // Every assignment of layer counts to the stages.
    std::vector<double> least(static_cast<std::size_t>(layers) + 1,
                              std::numeric_limits<double>::infinity());
    std::vector<int> n(stage_type.size(), 0);
    std::function<void(std::size_t, int, double)> all = [&](std::size_t k, int sum,
                                                            double slowest) {
      if (k == stage_type.size()) {
        if (sum <= layers)
          least[static_cast<std::size_t>(sum)] =
              std::min(least[static_cast<std::size_t>(sum)], slowest);
        return;
      }
      const hsdp::StagesLeft& s = left[static_cast<std::size_t>(stage_type[k])];
      for (int c = s.least; c <= s.most; ++c) {
        all(k + 1, sum + c, std::max(slowest, s.fixed + c * s.layer));
      }
    };
    all(0, 0, 0.0);
    int least_layers = 0;
    for (const int t : stage_type) least_layers += left[static_cast<std::size_t>(t)].least;
    for (int l = least_layers; l <= layers; ++l) {
      const double want = least[static_cast<std::size_t>(l)];
      const double got = out[static_cast<std::size_t>(l)];
      if (std::isinf(want)) {
        EXPECT_TRUE(std::isinf(got)) << "trial " << trial << " layers " << l;
        continue;
      }
      EXPECT_LE(got, want) << "trial " << trial << " layers " << l;
      EXPECT_GE(got, want * (1.0 - 1e-8)) << "trial " << trial << " layers " << l;
      ++checked;
    }
  }
  EXPECT_GT(checked, 500);
}

// The least sum of the layer steps the stages left add (the DP's bound on
// a partial plan's sum, hsdp::layer_sum_floors), by hand: A steps 1 per
// dense and 2 per MoE layer and holds 3 layers, B 2 and 5 and holds 10.
// Five MoE layers: 3 on A and 2 on B, 6 + 10; two dense layers on A, 2.
// Each kind is placed on its own (A's room counts for both): 18, below
// the 20 of the best joint placement (3 MoE layers on A, the rest on B).
// 14 MoE layers do not fit.
TEST(Search, LayerSumFloorByHand) {
  const std::vector<hsdp::LayersOnType> types = {{1.0, 2.0, 3}, {2.0, 5.0, 10}};
  std::vector<double> dense;
  std::vector<double> moe;
  hsdp::layer_sum_floors(types, 14, dense, moe);
  ASSERT_EQ(dense.size(), 15u);
  ASSERT_EQ(moe.size(), 15u);
  EXPECT_DOUBLE_EQ(dense[2] + moe[5], 18.0);
  EXPECT_DOUBLE_EQ(dense[0] + moe[0], 0.0);
  EXPECT_DOUBLE_EQ(moe[13], 3 * 2.0 + 10 * 5.0);
  EXPECT_EQ(moe[14], std::numeric_limits<double>::infinity());
}

// Never above the least sum of any placement of the layers within the
// types' room, on random small instances against all the placements.
TEST(Search, LayerSumFloorIsBelowEveryPlacement) {
  std::mt19937 rng(78);
  std::uniform_real_distribution<double> step(0.5, 4.0);
  int checked = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<hsdp::LayersOnType> types;
    const int count = 1 + static_cast<int>(rng() % 3);
    for (int t = 0; t < count; ++t) {
      types.push_back({step(rng), step(rng), static_cast<long long>(rng() % 6)});
    }
    const int dense = static_cast<int>(rng() % 5);
    const int moe = static_cast<int>(rng() % 7);
    // Every placement: per type, its dense and MoE layers.
    double least = std::numeric_limits<double>::infinity();
    std::function<void(std::size_t, int, int, double)> all = [&](std::size_t k, int d, int m,
                                                                 double sum) {
      if (k == types.size()) {
        if (d == 0 && m == 0) least = std::min(least, sum);
        return;
      }
      for (int a = 0; a <= d; ++a) {
        for (int b = 0; b <= m && a + b <= types[k].most; ++b) {
          all(k + 1, d - a, m - b, sum + a * types[k].dense + b * types[k].moe);
        }
      }
    };
    all(0, dense, moe, 0.0);
    std::vector<double> dense_sums;
    std::vector<double> moe_sums;
    hsdp::layer_sum_floors(types, 6, dense_sums, moe_sums);
    const double got =
        dense_sums[static_cast<std::size_t>(dense)] + moe_sums[static_cast<std::size_t>(moe)];
    if (std::isinf(least)) continue;
    EXPECT_LE(got, least * (1.0 + 1e-12)) << "trial " << trial;
    ++checked;
  }
  EXPECT_GT(checked, 100);
}

// The driver computes one BoundShape per bound_shape_key, in the order of
// bound_shape_order, and each thread keeps the type costs of the last
// CostModel::type_costs_key (TypeCostsCache): configurations of equal key
// must get the same bound from a shared shape and kept type costs as from
// their own, to the bit, and the order must be a permutation that keeps
// equal keys together, and the configurations of each type-costs key of
// the first pp >= 3 (all of pp 1, 2 and deeper with its degrees) too.
void expect_shapes_shared(const Workload& w, const ClusterSpec& cluster, const char* what) {
  const SearchOptions o;
  const std::vector<ParallelConfig> configs = enumerate_configs(w, cluster, o.space);
  const ProfileTables tables = tables_for(w, cluster, configs);
  const CostModel model(w, cluster, tables);
  const std::vector<std::size_t> order = bound_shape_order(configs);
  ASSERT_EQ(order.size(), configs.size()) << what;
  std::vector<char> seen(configs.size(), 0);
  std::set<std::tuple<int, int, int, int, int, int, int>> closed;  // keys whose run ended
  ParallelConfig key{0};
  BoundShape shape;
  TypeCostsCache kept;
  BoundShape pending;  // shape's, its tails left pending
  BoundShape added;    // pending's, its tails then added
  TypeCostsCache kept_pending;
  const auto type_key = [&](const ParallelConfig& pi) {
    const ParallelConfig k = model.type_costs_key(pi);
    return std::tuple{k.pp, k.tp, k.cp, k.ep, k.tpe, k.dp, k.micro_batch};
  };
  int lead = std::numeric_limits<int>::max();  // the first pp >= 3
  for (const ParallelConfig& pi : configs) {
    if (pi.pp >= 3) lead = std::min(lead, pi.pp);
  }
  std::map<std::tuple<int, int, int, int, int, int, int>, std::vector<std::size_t>> at;
  std::set<std::tuple<int, int, int, int, int, int, int>> of_lead;
  for (std::size_t i = 0; i < order.size(); ++i) {
    ASSERT_LT(order[i], configs.size()) << what;
    ASSERT_FALSE(seen[order[i]]) << what << ": " << order[i] << " twice";
    seen[order[i]] = 1;
    const ParallelConfig& pi = configs[order[i]];
    at[type_key(pi)].push_back(i);
    if (pi.pp == lead) of_lead.insert(type_key(pi));
    const ParallelConfig k = bound_shape_key(pi);
    if (!(k == key)) {
      if (key.pp > 0)
        closed.insert({key.pp, key.tp, key.cp, key.ep, key.tpe, key.dp, key.micro_batch});
      ASSERT_FALSE(closed.count({k.pp, k.tp, k.cp, k.ep, k.tpe, k.dp, k.micro_batch}))
          << what << ": a key's configurations are not together";
      key = k;
      shape = bound_shape(model, pi, o, &kept);
      pending = bound_shape(model, pi, o, &kept_pending, false);
      added = pending;
      add_tails(model, pi, o, added, &kept_pending);
    }
    const ConfigBound shared = config_lower_bound(model, shape, pi);
    const ConfigBound own = config_lower_bound(model, pi, o);
    ASSERT_EQ(shared.latency, own.latency) << what << ": pp " << pi.pp << " tp " << pi.tp;
    ASSERT_EQ(shared.steps, own.steps) << what;
    // The driver's shapes under a cut: the tails left pending give a bound
    // at most the whole one, so whatever it puts above a cut the whole
    // one does too; with them added, the very same bound.
    if (!std::isfinite(own.latency)) continue;
    ASSERT_TRUE(pending.tails_pending);
    ASSERT_FALSE(added.tails_pending);
    ASSERT_LE(config_lower_bound(model, pending, pi).latency, own.latency) << what;
    for (const double f : {0.97, 1.0 - 1e-12, 1.0 + 1e-12, 1.03}) {
      const double cut = own.latency * f;
      const ConfigBound whole = config_lower_bound(model, shape, pi, cut);
      if (config_lower_bound(model, pending, pi, cut).latency > cut) {
        ASSERT_GT(whole.latency, cut) << what << ": pp " << pi.pp << " cut x" << f;
      }
      const ConfigBound with_added = config_lower_bound(model, added, pi, cut);
      ASSERT_EQ(with_added.latency, whole.latency) << what << ": pp " << pi.pp << " cut x" << f;
      ASSERT_EQ(with_added.steps, whole.steps) << what;
    }
  }
  for (const auto& k : of_lead) {
    const std::vector<std::size_t>& run = at[k];
    EXPECT_EQ(run.back() - run.front() + 1, run.size())
        << what << ": a type-costs key's configurations are not together";
  }
}

TEST(Search, BoundShapesAreSharedByTheirKey) {
  std::mt19937 rng(5);
  int spaces = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const Instance in = random_instance(rng);
    if (!in.valid()) continue;
    expect_shapes_shared(in.workload, in.cluster, in.describe().c_str());
    ++spaces;
  }
  EXPECT_GT(spaces, 40);
  // A space of deep pipelines over three types (the large case's shape,
  // smaller): 61 layers, pp up to 61.
  Workload w = load_workload("deepseek-v3");
  w.training.global_batch = 1536;
  expect_shapes_shared(w, load_cluster("H800:256,MI300X:256,910B:256"), "deepseek-v3");
}

// ShapeBounds, as the driver bounds a pass (one per thread): a bound is
// the configuration's alone, whatever the bounder met before (the order,
// and so the threads, change no value): in shape order, in reverse, and
// from a fresh bounder, under no cut and under cuts that some bounds
// pass and some do not; and with no cut it is config_lower_bound's.
// `looser` counts the bounds under a cut looser than the whole one.
void expect_shape_bounds_pure(const Workload& w, const ClusterSpec& cluster, const char* what,
                              std::size_t fresh_every, int& looser) {
  const SearchOptions o;
  const std::vector<ParallelConfig> configs = enumerate_configs(w, cluster, o.space);
  const ProfileTables tables = tables_for(w, cluster, configs);
  const CostModel model(w, cluster, tables);
  const std::vector<std::size_t> order = bound_shape_order(configs);
  std::vector<double> whole;
  for (const ParallelConfig& pi : configs) {
    const double b = config_lower_bound(model, pi, o).latency;
    if (std::isfinite(b)) whole.push_back(b);
  }
  if (whole.empty()) return;
  std::sort(whole.begin(), whole.end());
  const double inf = std::numeric_limits<double>::infinity();
  for (const double cut : {inf, whole[whole.size() / 8], whole[whole.size() / 2]}) {
    for (const bool steps : {false, true}) {
      ShapeBounds forward(model, o);
      std::vector<ConfigBound> in_order(configs.size());
      for (const std::size_t c : order) in_order[c] = forward.bound(configs[c], cut, steps);
      ShapeBounds backward(model, o);
      for (auto it = order.rbegin(); it != order.rend(); ++it) {
        const ConfigBound b = backward.bound(configs[*it], cut, steps);
        ASSERT_EQ(b.latency, in_order[*it].latency) << what << ": config " << *it;
        ASSERT_EQ(b.steps, in_order[*it].steps) << what << ": config " << *it;
      }
      for (std::size_t c = 0; c < configs.size(); c += fresh_every) {
        ShapeBounds fresh(model, o);
        const ConfigBound b = fresh.bound(configs[c], cut, steps);
        ASSERT_EQ(b.latency, in_order[c].latency) << what << ": config " << c;
        ASSERT_EQ(b.steps, in_order[c].steps) << what << ": config " << c;
        const ConfigBound exact = config_lower_bound(model, configs[c], o);
        if (!std::isfinite(cut)) {
          ASSERT_EQ(b.latency, exact.latency) << what << ": config " << c;
          ASSERT_EQ(b.steps, exact.steps) << what << ": config " << c;
        } else if (b.latency > cut) {
          ASSERT_GT(exact.latency, cut) << what << ": config " << c;
          ASSERT_LE(b.latency, exact.latency) << what << ": config " << c;
          looser += b.latency < exact.latency ? 1 : 0;
        } else {
          ASSERT_EQ(b.latency, config_lower_bound(model, bound_shape(model, configs[c], o),
                                                  configs[c], cut, steps)
                                   .latency)
              << what << ": config " << c;
        }
      }
    }
  }
}

TEST(Search, ShapeBoundsDependOnTheConfigurationAlone) {
  std::mt19937 rng(17);
  int spaces = 0;
  for (int trial = 0; trial < 30; ++trial) {
    const Instance in = random_instance(rng);
    if (!in.valid()) continue;
    int looser = 0;
    expect_shape_bounds_pure(in.workload, in.cluster, in.describe().c_str(), 1, looser);
    ++spaces;
  }
  EXPECT_GT(spaces, 20);
  Workload w = load_workload("deepseek-v3");
  w.training.global_batch = 1536;
  int looser = 0;
  expect_shape_bounds_pure(w, load_cluster("H800:256,MI300X:256,910B:256"), "deepseek-v3", 23,
                           looser);
  EXPECT_GT(looser, 0);  // some bounds leave their tails out: the path is taken
}

// The job search bounds a subset of Pi (those its floors leave): its
// order still shares a shape between a configuration of the first block
// of pp >= 3 and the later blocks' of its key, though the subset's later
// blocks hold keys the first lacks.
TEST(Search, BoundShapesAreSharedInASubsetOfPi) {
  Workload w = load_workload("deepseek-v3");
  w.training.global_batch = 1536;
  const ClusterSpec cluster = load_cluster("H800:256,MI300X:256,910B:256");
  const std::vector<ParallelConfig> all = enumerate_configs(w, cluster, SearchOptions{}.space);
  // Every second configuration of pp 3 left out.
  std::vector<ParallelConfig> configs;
  int third = 0;
  for (const ParallelConfig& pi : all) {
    if (pi.pp == 3 && third++ % 2 == 1) continue;
    configs.push_back(pi);
  }
  ASSERT_GT(third, 100);
  const auto key_of = [](const ParallelConfig& pi) {
    const ParallelConfig k = bound_shape_key(pi);
    return std::tuple{k.pp, k.tp, k.cp, k.ep, k.tpe, k.dp, k.micro_batch};
  };
  std::set<std::tuple<int, int, int, int, int, int, int>> lead;
  for (const ParallelConfig& pi : configs) {
    if (pi.pp == 3) lead.insert(key_of(pi));
  }
  // At most one shape per configuration of pp < 3, per key of pp 3, and
  // per configuration of pp > 3 whose key pp 3 lacks.
  std::size_t most = lead.size();
  for (const ParallelConfig& pi : configs) {
    if (pi.pp < 3 || (pi.pp > 3 && lead.count(key_of(pi)) == 0)) ++most;
  }
  const std::vector<std::size_t> order = bound_shape_order(configs);
  ASSERT_EQ(order.size(), configs.size());
  std::vector<char> seen(configs.size(), 0);
  std::size_t shapes = 0;
  for (std::size_t i = 0; i < order.size(); ++i) {
    ASSERT_LT(order[i], configs.size());
    ASSERT_FALSE(seen[order[i]]) << order[i] << " twice";
    seen[order[i]] = 1;
    if (i == 0 || key_of(configs[order[i]]) != key_of(configs[order[i - 1]])) ++shapes;
  }
  EXPECT_LE(shapes, most);
  EXPECT_LT(shapes, configs.size() / 2);
}

// summarize: Pi's distinct TP and CP degrees, ascending, and its deepest
// pipeline, which the tables and the memory estimate take from it (the job
// search makes it once per Pi).
TEST(Search, SummaryOfPiIsItsDegreesAndDeepestPipeline) {
  std::mt19937 rng(11);
  int spaces = 0;
  for (int trial = 0; trial < 30; ++trial) {
    const Instance in = random_instance(rng);
    if (!in.valid()) continue;
    const std::vector<ParallelConfig> pi =
        enumerate_configs(in.workload, in.cluster, SearchOptions{}.space);
    std::set<int> tp;
    std::set<int> cp;
    int max_pp = 0;
    for (const ParallelConfig& c : pi) {
      tp.insert(c.tp);
      cp.insert(c.cp);
      max_pp = std::max(max_pp, c.pp);
    }
    const PiSummary s = summarize(pi);
    EXPECT_EQ(s.tp, std::vector<int>(tp.begin(), tp.end())) << in.describe();
    EXPECT_EQ(s.cp, std::vector<int>(cp.begin(), cp.end())) << in.describe();
    EXPECT_EQ(s.max_pp, max_pp) << in.describe();
    spaces += cp.size() > 1 || tp.size() > 1 ? 1 : 0;
  }
  EXPECT_GT(spaces, 5);
  // Out of canonical order too.
  const PiSummary s = summarize({ParallelConfig{4, 2, 1, 1, 1, 1}, ParallelConfig{1, 1, 4, 1, 1, 1},
                                 ParallelConfig{2, 2, 2, 1, 1, 1}});
  EXPECT_EQ(s.tp, (std::vector<int>{1, 2}));
  EXPECT_EQ(s.cp, (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(s.max_pp, 4);
}

TEST(Search, DeterministicAcrossRuns) {
  std::mt19937 rng(42);
  for (int trial = 0; trial < 20; ++trial) {
    const Instance in = random_instance(rng);
    if (!in.valid()) continue;
    const SearchResult a = run_search(in.workload, in.cluster, {});
    const SearchResult b = run_search(in.workload, in.cluster, {});
    ASSERT_EQ(a.top.size(), b.top.size());
    for (std::size_t k = 0; k < a.top.size(); ++k) {
      EXPECT_EQ(a.top[k].plan, b.top[k].plan);
      EXPECT_EQ(a.top[k].latency_s, b.top[k].latency_s);
    }
    EXPECT_EQ(a.stats.transitions, b.stats.transitions);
    EXPECT_EQ(a.stats.states, b.stats.states);
  }
}

// Pruning (3) compares each cross-type boundary with eta x the mean stage
// step. On the paper's clusters the largest cross-type transfer is a few
// percent of a stage's step, so it never cuts at eta = 2 (and the
// statistics say how near it came); over a slow link between the types it
// cuts, and never beats the unpruned optimum.
TEST(Search, HeteroCommPruningCutsOnlyOverSlowCrossTypeLinks) {
  const Workload w = load_workload("mixtral-l");
  const ClusterSpec fast = load_cluster("paper:32-1");  // H800 2x8 + 910B 2x8
  ASSERT_EQ(fast.num_types(), 2);
  SearchOptions all;
  const SearchResult on_fast = run_search(w, fast, all);
  EXPECT_EQ(on_fast.stats.pruned_hetero_comm, 0);
  EXPECT_GT(on_fast.stats.hetero_comm_ratio, 0.0);
  EXPECT_LT(on_fast.stats.hetero_comm_ratio, 0.1);

  ClusterSpec slow = fast;  // 2 Gbit/s between the types
  slow.cross_links.push_back({0, 1, 0.25e9, 50e-6});
  const SearchResult on_slow = run_search(w, slow, all);
  EXPECT_GT(on_slow.stats.pruned_hetero_comm, 0);
  EXPECT_GT(on_slow.stats.hetero_comm_ratio, all.eta);
  SearchOptions none = all;
  none.prune = {false, false, false};
  const SearchResult unpruned = run_search(w, slow, none);
  EXPECT_EQ(unpruned.stats.pruned_hetero_comm, 0);
  EXPECT_GT(unpruned.stats.hetero_comm_ratio, all.eta);
  ASSERT_FALSE(on_slow.top.empty());
  ASSERT_FALSE(unpruned.top.empty());
  EXPECT_GE(on_slow.top.front().latency_s, unpruned.top.front().latency_s * (1 - 1e-12));
}

TEST(Search, PruneSetParsing) {
  EXPECT_EQ(parse_prune_set("all", "--prune"), (PruneSet{true, true, true}));
  EXPECT_EQ(parse_prune_set("none", "--prune"), (PruneSet{false, false, false}));
  EXPECT_EQ(parse_prune_set("lb,comm", "--prune"), (PruneSet{true, false, true}));
  EXPECT_EQ(parse_prune_set("mem", "--prune"), (PruneSet{false, true, false}));
  EXPECT_THROW(parse_prune_set("lb,bogus", "--prune"), InputError);
  EXPECT_THROW(parse_prune_set("", "--prune"), InputError);
  EXPECT_EQ(to_string(PruneSet{true, false, true}), "lb,comm");
  EXPECT_EQ(to_string(PruneSet{false, false, false}), "none");
}

}  // namespace
}  // namespace hapmoe
