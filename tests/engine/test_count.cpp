// Counting the plain DP (SearchOptions::count_only, engine/count.cpp)
// against the plain DP itself: for every pruning subset, on random small
// instances and on the paper's clusters (homogeneous, heterogeneous, a
// slow cross-type link where pruning 3 cuts, a model that memory prunes,
// a model with dense and MoE layers), the counted states, transitions,
// cuts and largest cross-type ratio equal those of search_config with
// branch and bound off, configuration by configuration. Any drift of the
// counter from run_dp fails here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "costmodel/analytic.h"
#include "engine/count.h"
#include "engine/driver.h"
#include "engine/search.h"
#include "engine/stage_memo.h"
#include "io/inputs/cluster_io.h"
#include "io/inputs/model_io.h"
#include "partition/config_space.h"

namespace hapmoe {
namespace {

const PruneSet kSubsets[] = {{false, false, false}, {true, false, false}, {false, true, false},
                             {false, false, true},  {true, true, false},  {true, false, true},
                             {false, true, true},   {true, true, true}};

struct Totals {
  SearchStats run;    // the plain DP's
  SearchStats count;  // the counter's
  int configs = 0;
};

// Every configuration of the space (up to `max_configs`, spread over it)
// searched with the plain DP and counted; the counters must be equal.
Totals compare(const Workload& w, const ClusterSpec& cluster, SearchOptions opt,
               const std::string& what, std::size_t max_configs = 0) {
  opt.bound = false;
  opt.count_only = false;
  SearchOptions counted = opt;
  counted.count_only = true;
  const std::vector<ParallelConfig> configs = enumerate_configs(w, cluster, opt.space);
  const ProfileTables tables = tables_for(w, cluster, configs);
  const CostModel model(w, cluster, tables);
  const std::size_t step =
      max_configs > 0 && configs.size() > max_configs ? configs.size() / max_configs + 1 : 1;
  Totals t;
  for (std::size_t c = 0; c < configs.size(); c += step) {
    const ParallelConfig& pi = configs[c];
    const ConfigOutcome a = search_config(model, pi, opt);
    const ConfigOutcome b = search_config(model, pi, counted);
    std::ostringstream where;
    where << what << " prune " << to_string(opt.prune) << " delta " << opt.delta << " eta "
          << opt.eta << (opt.uniform ? " uniform" : "") << " pp" << pi.pp << " tp" << pi.tp << " cp"
          << pi.cp << " ep" << pi.ep << " tpe" << pi.tpe << " dp" << pi.dp << " vpp" << pi.vpp;
    EXPECT_EQ(b.stats.states, a.stats.states) << where.str();
    EXPECT_EQ(b.stats.transitions, a.stats.transitions) << where.str();
    EXPECT_EQ(b.stats.pruned_load_balance, a.stats.pruned_load_balance) << where.str();
    EXPECT_EQ(b.stats.pruned_memory, a.stats.pruned_memory) << where.str();
    EXPECT_EQ(b.stats.pruned_hetero_comm, a.stats.pruned_hetero_comm) << where.str();
    EXPECT_EQ(b.stats.hetero_comm_ratio, a.stats.hetero_comm_ratio) << where.str();
    EXPECT_FALSE(b.best.has_value()) << where.str();
    t.run += a.stats;
    t.count += b.stats;
    ++t.configs;
  }
  return t;
}

// A random instance: N <= 12 layers (some dense, some MoE), 1-3 device
// types, memory tight enough that some stages do not fit, and now and
// then a slow link between two types.
struct Instance {
  Workload workload;
  ClusterSpec cluster;
  bool valid() const { return validate(workload.model).empty() && validate(cluster).empty(); }
};

Instance random_instance(std::mt19937& rng) {
  auto pick = [&](std::initializer_list<int> v) {
    return *(v.begin() + static_cast<long>(rng() % v.size()));
  };
  Instance in;
  ModelSpec& m = in.workload.model;
  m.name = "random";
  m.num_layers = 2 + static_cast<int>(rng() % 11);
  m.hidden = pick({256, 512, 1024});
  m.num_heads = pick({4, 8, 16});
  m.num_kv_heads = pick({1, 2, 4});
  m.head_dim = m.hidden / m.num_heads;
  m.ffn_hidden = m.hidden * pick({2, 4});
  m.vocab = pick({1000, 32000});
  if (rng() % 10 < 7) {
    m.num_experts = pick({2, 4, 8});
    m.top_k = 1 + static_cast<int>(rng() % 2);
    m.expert_ffn_hidden = m.hidden * pick({1, 2});
    m.moe_layers.assign(static_cast<std::size_t>(m.num_layers), 1);
    // Dense layers among the MoE ones: a stage's fit then depends on
    // where it starts (the counter's state-by-state path).
    if (rng() % 2 == 0) m.moe_layers[0] = 0;
    if (rng() % 3 == 0) {
      for (std::size_t l = 1; l < m.moe_layers.size(); l += 2) m.moe_layers[l] = 0;
    }
  }
  TrainingSpec& t = in.workload.training;
  t.seq_len = pick({256, 1024});
  t.global_batch = pick({8, 16, 32});
  t.micro_batch = pick({1, 2});
  if (rng() % 4 == 0) {
    t.recompute = RecomputeSetting{RecomputeKind::kFull, 1 + static_cast<int>(rng() % 2)};
  }
  const int types = 1 + static_cast<int>(rng() % 3);
  const char* names[] = {"H800", "910B", "MI300X"};
  const double peaks[] = {989e12, 353.9e12, 1307.4e12};
  for (int h = 0; h < types; ++h) {
    DevicePool pool;
    pool.device.name = names[h];
    pool.device.peak_flops = peaks[h];
    pool.device.hbm_bandwidth = 2e12 + 1e12 * h;
    pool.device.intra_node_bandwidth = 100e9 * (h + 1);
    pool.device.inter_node_bandwidth = 25e9;
    pool.devices_per_node = pick({2, 4, 8});
    pool.device.devices_per_node = pool.devices_per_node;
    pool.nodes = 1 + static_cast<int>(rng() % 2);
    const double state = total_params(m) * 18.0 / pool.devices();
    const double act =
        static_cast<double>(t.micro_batch) * t.seq_len * m.hidden * 40.0 * m.num_layers;
    std::uniform_real_distribution<double> f(0.2, 3.0);
    pool.device.memory_bytes = 2.0 * (1u << 30) + f(rng) * (state + act);
    in.cluster.pools.push_back(pool);
  }
  if (types > 1 && rng() % 3 == 0) in.cluster.cross_links.push_back({0, 1, 0.05e9, 50e-6});
  return in;
}

// The counter with its flat index off (the map of groups) and with every
// group counted state by state must count the same: the hooks are reset
// when a test leaves.
struct HookGuard {
  ~HookGuard() {
    hsdp::count_flat_keys = hsdp::kCountFlatKeys;
    hsdp::count_state_by_state = false;
  }
};

TEST(Count, EqualsThePlainDpOnRandomInstances) {
  const HookGuard guard;
  std::mt19937 rng(20261124);
  int instances = 0;
  std::int64_t cut_lb = 0;
  std::int64_t cut_mem = 0;
  std::int64_t cut_comm = 0;
  for (int trial = 0; instances < 60 && trial < 400; ++trial) {
    const Instance in = random_instance(rng);
    if (!in.valid()) continue;
    ++instances;
    SearchOptions opt;
    opt.space.max_pp = 6;
    opt.space.vpp = trial % 5 == 0 ? 2 : 1;
    const double deltas[] = {0.0, 0.2, 0.8};
    const double etas[] = {0.003, 0.05, 2.0};
    opt.delta = deltas[rng() % 3];
    opt.eta = etas[rng() % 3];
    opt.uniform = rng() % 8 == 0;
    // A third of the instances through the map of groups, a third state
    // by state.
    hsdp::count_flat_keys = trial % 3 == 1 ? 0 : hsdp::kCountFlatKeys;
    hsdp::count_state_by_state = trial % 3 == 2;
    for (const PruneSet& p : kSubsets) {
      opt.prune = p;
      const Totals t = compare(in.workload, in.cluster, opt, "trial " + std::to_string(trial));
      cut_lb += t.run.pruned_load_balance;
      cut_mem += t.run.pruned_memory;
      cut_comm += t.run.pruned_hetero_comm;
    }
  }
  EXPECT_GE(instances, 60);
  // Every pruning cut something somewhere, so each was compared.
  EXPECT_GT(cut_lb, 0);
  EXPECT_GT(cut_mem, 0);
  EXPECT_GT(cut_comm, 0);
}

// The paper's presets: homogeneous, heterogeneous, a slow cross-type
// link (pruning 3 cuts) and Mixtral-L, which memory prunes hard; every
// pruning subset, up to 400 configurations spread over the space.
TEST(Count, EqualsThePlainDpOnThePapersClusters) {
  const Workload mixtral_s = load_workload("mixtral-s");
  struct Case {
    std::string cluster;
    bool comm_cuts;
  };
  for (const Case& c : {Case{"paper:16-1-h", false}, Case{"paper:32-1", false},
                        Case{"bench/clusters/slow-link-4gbit.json", true}}) {
    const ClusterSpec cluster = load_cluster(c.cluster);
    for (const PruneSet& p : kSubsets) {
      SearchOptions opt;
      opt.prune = p;
      const Totals t = compare(mixtral_s, cluster, opt, "mixtral-s on " + c.cluster, 400);
      EXPECT_GT(t.run.states, 0);
      if (p.load_balance) {
        EXPECT_GT(t.run.pruned_load_balance, 0) << c.cluster;
      }
      if (p.memory) {
        EXPECT_GT(t.run.pruned_memory, 0) << c.cluster;
      }
      if (p.hetero_comm && c.comm_cuts) {
        EXPECT_GT(t.run.pruned_hetero_comm, 0) << c.cluster;
      }
    }
  }
  // Mixtral-L (the plain DP of its whole space takes hours): 120
  // configurations spread over PP <= 6.
  const Workload mixtral_l = load_workload("mixtral-l");
  const ClusterSpec c32 = load_cluster("paper:32-1");
  for (const PruneSet& p : kSubsets) {
    SearchOptions opt;
    opt.prune = p;
    opt.space.max_pp = 6;
    const Totals t = compare(mixtral_l, c32, opt, "mixtral-l on paper:32-1", 120);
    if (p.memory) {
      EXPECT_GT(t.run.pruned_memory, t.run.transitions) << "memory should prune most moves";
    }
  }
}

// DeepSeek-V3 (3 dense, then 58 MoE layers): a stage's fit depends on
// where it starts, counted state by state.
TEST(Count, EqualsThePlainDpWithDenseAndMoeLayers) {
  const Workload w = load_workload("deepseek-v3");
  const ClusterSpec cluster = load_cluster("paper:32-1");
  for (const PruneSet& p : kSubsets) {
    SearchOptions opt;
    opt.prune = p;
    opt.space.max_pp = 4;
    const Totals t = compare(w, cluster, opt, "deepseek-v3 on paper:32-1", 150);
    if (p.memory) {
      EXPECT_GT(t.run.pruned_memory, 0);
    }
  }
}

// The driver: run_search with count_only gives the plain DP's totals, with
// several threads too, and no plan.
TEST(Count, RunSearchCountsWhatThePlainDpSearches) {
  const Workload w = load_workload("mixtral-s");
  const ClusterSpec cluster = load_cluster("bench/clusters/slow-link-4gbit.json");
  for (const PruneSet& p : {PruneSet{false, false, false}, PruneSet{true, true, false},
                            PruneSet{false, false, true}, PruneSet{true, true, true}}) {
    SearchOptions plain;
    plain.prune = p;
    plain.bound = false;
    SearchOptions counted = plain;
    counted.count_only = true;
    const SearchResult a = run_search(w, cluster, plain);
    SerialComm comm;
    RunOptions run;
    run.threads = 2;
    const SearchResult b = run_search(w, cluster, counted, false, comm, run);
    EXPECT_EQ(b.stats.configs, a.stats.configs);
    EXPECT_EQ(b.stats.configs_evaluated, a.stats.configs_evaluated);
    EXPECT_EQ(b.stats.states, a.stats.states) << to_string(p);
    EXPECT_EQ(b.stats.transitions, a.stats.transitions) << to_string(p);
    EXPECT_EQ(b.stats.pruned_load_balance, a.stats.pruned_load_balance) << to_string(p);
    EXPECT_EQ(b.stats.pruned_memory, a.stats.pruned_memory) << to_string(p);
    EXPECT_EQ(b.stats.pruned_hetero_comm, a.stats.pruned_hetero_comm) << to_string(p);
    EXPECT_EQ(b.stats.hetero_comm_ratio, a.stats.hetero_comm_ratio) << to_string(p);
    EXPECT_TRUE(b.top.empty());
    EXPECT_FALSE(a.top.empty());
  }
}

// Without the bound the driver deals configurations by their counted
// moves (work_estimate): each configuration's estimate is the transitions
// its plain DP makes plus one fixed share, whatever the pruning subset.
TEST(Count, ThePlainDpIsDealtByItsCountedMoves) {
  const Workload w = load_workload("mixtral-s");
  const ClusterSpec cluster = load_cluster("paper:16-1");
  for (const PruneSet& p : {PruneSet{false, false, false}, PruneSet{true, true, true}}) {
    SearchOptions plain;
    plain.prune = p;
    plain.bound = false;
    const SearchResult r = run_search(w, cluster, plain);
    ASSERT_GT(r.configs.size(), 10U);
    const double share = r.estimates[0] - static_cast<double>(r.outcome(0)->stats.transitions);
    EXPECT_GT(share, 0.0);
    double least = r.estimates[0];
    double most = r.estimates[0];
    for (std::size_t c = 0; c < r.configs.size(); ++c) {
      ASSERT_NE(r.outcome(c), nullptr);
      EXPECT_EQ(r.estimates[c] - static_cast<double>(r.outcome(c)->stats.transitions), share)
          << to_string(p) << " config " << c;
      least = std::min(least, r.estimates[c]);
      most = std::max(most, r.estimates[c]);
    }
    EXPECT_GT(most, 5 * least) << to_string(p);  // the moves, not a constant
  }
}

// An evaluator for every configuration of `trials` random instances (PP
// up to 6, every fourth interleaved), with the trial's number.
void each_evaluator(unsigned seed, int trials,
                    const std::function<void(int, const ParallelConfig&, hsdp::Evaluator&)>& fn) {
  std::mt19937 rng(seed);
  for (int trial = 0; trial < trials; ++trial) {
    const Instance in = random_instance(rng);
    if (!in.valid()) continue;
    SearchOptions opt;
    opt.space.max_pp = 6;
    opt.space.vpp = trial % 4 == 0 ? 2 : 1;
    const std::vector<ParallelConfig> configs =
        enumerate_configs(in.workload, in.cluster, opt.space);
    const ProfileTables tables = tables_for(in.workload, in.cluster, configs);
    const CostModel model(in.workload, in.cluster, tables);
    for (const ParallelConfig& pi : configs) {
      hsdp::Evaluator ev(model, pi, opt);
      fn(trial, pi, ev);
    }
  }
}

// What the counter assumes of memory: a stage of type h at position i from
// layer j that fits with k layers fits with fewer (its least recomputation
// that fits, or none), so one bisection finds every verdict.
TEST(Count, FittingIsMonotoneInTheLayerCount) {
  int checked = 0;
  int misses = 0;
  each_evaluator(11, 60, [&](int trial, const ParallelConfig& pi, hsdp::Evaluator& ev) {
    const int n = ev.layers();
    for (int h = 0; h < ev.types(); ++h) {
      if (ev.cap(h) == 0) continue;
      for (int i = 0; i < pi.pp; ++i) {
        for (int j = 0; j < n; ++j) {
          bool fits = true;
          for (int k = 1; j + k <= n; ++k) {
            const bool f = ev.stage(h, i, j, k).feasible;
            ASSERT_FALSE(f && !fits)
                << "trial " << trial << " pp" << pi.pp << " type " << h << " position " << i
                << " from " << j << ": " << k << " layers fit, fewer did not";
            misses += f ? 0 : 1;
            fits = f;
            ++checked;
          }
        }
      }
    }
  });
  EXPECT_GT(checked, 10000);
  EXPECT_GT(misses, 100);  // memory did bind
}

// With every layer alike, no stage of a type holds more layers anywhere
// than max_fitting_layers finds at the later positions: search_once skips
// stage mixes that cannot hold the N layers between them on that bound.
TEST(Count, AlikeLayersFitNowhereBeyondTheLaterPositions) {
  int checked = 0;
  int bound_binds = 0;
  each_evaluator(12, 120, [&](int trial, const ParallelConfig& pi, hsdp::Evaluator& ev) {
    if (!ev.layers_alike()) return;
    const int n = ev.layers();
    for (int h = 0; h < ev.types(); ++h) {
      if (ev.cap(h) == 0) continue;
      const int most = ev.max_fitting_layers(h);
      bound_binds += most < n - (pi.pp - 1) ? 1 : 0;
      // And it is the most that fits at the later positions, counted one
      // by one (its guess from two sizes, hsdp::most_fitting_layers, is
      // taken only where the bisection would end).
      const int cap = n - (pi.pp - 1);
      int counted = 0;
      for (int i = std::max(0, pi.pp - 2); i < pi.pp && counted < n; ++i) {
        if (ev.fits(h, i, n - cap, cap)) counted = n;
        for (int k = 1; k < cap && counted < n && ev.fits(h, i, n - k, k); ++k) {
          counted = std::max(counted, k);
        }
      }
      EXPECT_EQ(most, counted) << "trial " << trial << " pp" << pi.pp << " type " << h;
      for (int i = 0; i < pi.pp; ++i) {
        // Stage i holds [j, j + k): i layers at least before it, one
        // at least per stage after it.
        for (int j = i; j < n; ++j) {
          for (int k = most + 1; j + k <= n - (pi.pp - 1 - i); ++k) {
            ASSERT_FALSE(ev.stage(h, i, j, k).feasible)
                << "trial " << trial << " pp" << pi.pp << " type " << h << " position " << i
                << " from " << j << ": " << k << " layers fit, max_fitting_layers says " << most;
            ++checked;
          }
        }
      }
    }
  });
  EXPECT_GT(checked, 1000);
  EXPECT_GT(bound_binds, 50);  // memory did bind
}

// With every layer alike, no stage of a type holds more layers, in a plan
// no slower than a cut, than most_under_cut finds at the later positions:
// a stage of k layers with step t and tail (sync + optimizer) puts every
// plan it is in at M t + R / v + tail at least (R: the other N - k layers
// at their cheapest), and an earlier position is no cheaper. search_once
// skips stage mixes that cannot hold the N layers within these rooms.
TEST(Count, AlikeLayersStepNowhereUnderACutBeyondTheLaterPositions) {
  int checked = 0;
  int room_binds = 0;
  each_evaluator(13, 120, [&](int trial, const ParallelConfig& pi, hsdp::Evaluator& ev) {
    if (!ev.layers_alike()) return;
    const int n = ev.layers();
    const double m = ev.microbatches();
    // What a stage at position i holding [j, j + k) puts a plan at, at least.
    const auto floor_of = [&](int h, int i, int j, int k) {
      const hsdp::StageEval& e = ev.stage(h, i, j, k);
      return e.feasible ? m * (e.fwd + e.bwd) + ev.remaining_floor(k) / pi.vpp + (e.sync + e.opt)
                        : std::numeric_limits<double>::infinity();
    };
    for (int h = 0; h < ev.types(); ++h) {
      if (ev.cap(h) == 0) continue;
      const int most = ev.max_fitting_layers(h);
      // Cuts at the floors of the later positions' stages, and between.
      std::vector<double> cuts;
      for (int k = 1; k <= std::min(most, n - (pi.pp - 1)); ++k) {
        const double f = floor_of(h, pi.pp - 1, n - k, k);
        if (std::isfinite(f)) cuts.insert(cuts.end(), {f, f * 1.01, f * 0.99});
      }
      for (const double cut : cuts) {
        const int room = ev.most_under_cut(h, most, cut);
        ASSERT_LE(room, most);
        room_binds += room < std::min(most, n - (pi.pp - 1)) ? 1 : 0;
        for (int i = 0; i < pi.pp; ++i) {
          for (int j = i; j < n; ++j) {
            for (int k = room + 1; j + k <= n - (pi.pp - 1 - i); ++k) {
              ASSERT_GT(floor_of(h, i, j, k), cut)
                  << "trial " << trial << " pp" << pi.pp << " vpp" << pi.vpp << " type " << h
                  << " position " << i << " from " << j << ": " << k
                  << " layers under the cut, most_under_cut says " << room;
              ++checked;
            }
          }
        }
      }
    }
  });
  EXPECT_GT(checked, 10000);
  EXPECT_GT(room_binds, 100);  // the step did bind
}

// The stage memo's entries are the cost model's stage with its least
// recomputation, at every position: the memo shares a row between middle
// positions that keep every micro-batch in flight (M x v, the cap), and
// only between those. Before the fix, with M < PP - 1, the positions after
// the last capped one were costed as position 1, with more activations.
TEST(Count, EvaluatorStagesAreTheCostModelsAtEveryPosition) {
  int checked = 0;
  int uncapped = 0;  // middle positions under the cap, where the bug was
  each_evaluator(5, 200, [&](int trial, const ParallelConfig& pi, hsdp::Evaluator& ev) {
    const CostModel& model = ev.model();
    const int n = ev.layers();
    for (int h = 0; h < ev.types(); ++h) {
      if (ev.cap(h) == 0) continue;
      const TypeCosts tc = model.type_costs(pi, h);
      for (int i = 0; i < pi.pp; ++i) {
        for (int j = i; j < n; ++j) {
          for (int k = 1; j + k <= n - (pi.pp - 1 - i); ++k) {
            StageShape shape;
            shape.position = i;
            shape.first_layer = j;
            shape.layers = k;
            shape.moe_layers = model.moe_layers_in(j, k);
            const CostModel::RecomputeChoice choice = model.least_recompute_cost(pi, tc, shape);
            const hsdp::StageEval& e = ev.stage(h, i, j, k);
            const std::string what =
                "trial " + std::to_string(trial) + " pp" + std::to_string(pi.pp) + " vpp" +
                std::to_string(pi.vpp) + " M" + std::to_string(ev.microbatches()) + " type " +
                std::to_string(h) + " position " + std::to_string(i) + " layers [" +
                std::to_string(j) + ", +" + std::to_string(k) + ")";
            ASSERT_EQ(e.feasible, choice.recompute.has_value()) << what;
            ASSERT_EQ(e.fwd, choice.cost.fwd_s) << what;
            ASSERT_EQ(e.bwd, choice.cost.bwd_s) << what;
            ASSERT_EQ(e.over, choice.cost.memory.total() - choice.cost.capacity_bytes) << what;
            ++checked;
            uncapped +=
                (i > 0 && i < pi.pp - 1 && choice.cost.in_flight < ev.microbatches() * pi.vpp) ? 1
                                                                                               : 0;
          }
        }
      }
    }
  });
  EXPECT_GT(checked, 10000);
  EXPECT_GT(uncapped, 100);
}

}  // namespace

}  // namespace hapmoe
