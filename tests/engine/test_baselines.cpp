// The baselines of engine/baselines.h: what each fixes, and that hapmoe's
// search is never worse than any of them (they search subsets of its space
// or, for MI, fix one plan in it).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "costmodel/errors.h"
#include "engine/baselines.h"
#include "io/inputs/cluster_io.h"
#include "io/inputs/model_io.h"
#include "partition/config_space.h"

namespace hapmoe {
namespace {

struct Case {
  std::string model;
  std::string cluster;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"mixtral-s", "paper:16-1"},   {"mixtral-s", "paper:32-2"},
      {"mixtral-s", "paper:16-3-h"}, {"mixtral-l", "paper:24-3"},
      {"mixtral-l", "paper:32-3"},   {"llama2-7b", "A100-80GB:16,910B:16"}};
  return c;
}

TEST(Baselines, NamesRoundTrip) {
  for (const Baseline b : all_baselines()) EXPECT_EQ(parse_baseline(to_string(b), "--baseline"), b);
  EXPECT_THROW(parse_baseline("megatron", "--baseline"), InputError);
}

TEST(Baselines, HapmoeIsNeverWorseAndEachBaselineKeepsItsRule) {
  for (const Case& c : cases()) {
    const Workload w = load_workload(c.model);
    const ClusterSpec cl = load_cluster(c.cluster);
    const std::string what = c.model + " on " + c.cluster;
    SerialComm comm;
    const SearchOptions opt;
    std::map<Baseline, BaselineRun> runs;
    for (const Baseline b : all_baselines()) runs[b] = run_baseline(b, w, cl, opt, comm, {});
    const SearchResult& best = runs[Baseline::kNone].result;
    ASSERT_FALSE(best.top.empty()) << what;
    const ProfileTables tables = tables_for(w, cl, enumerate_configs(w, cl, opt.space));
    const CostModel model(w, cl, tables);
    for (const auto& [b, run] : runs) {
      const std::string who = what + ", " + to_string(b);
      if (run.result.top.empty()) continue;
      const PlanCandidate& top = run.result.top.front();
      EXPECT_LE(best.top.front().latency_s, top.latency_s) << who;
      // The same latency, to the bit, when the full cluster evaluates it.
      const PlanReport report = model.evaluate(top.plan);
      EXPECT_EQ(report.latency_s, top.latency_s) << who;
      EXPECT_TRUE(report.fits) << who;
      std::set<int> types;
      for (const StagePlan& s : top.plan.stages) types.insert(s.device_type);
      const ParallelConfig& pi = top.plan.parallel;
      int most = 0;
      int least = w.model.num_layers;
      for (const StagePlan& s : top.plan.stages) {
        most = std::max(most, s.layers);
        least = std::min(least, s.layers);
      }
      switch (b) {
        case Baseline::kUniform: {
          // N/PP layers everywhere, on the devices of hapmoe's best plan.
          EXPECT_EQ(most, least) << who;
          EXPECT_EQ(most * pi.pp, w.model.num_layers) << who;
          const auto devices = [&](const Plan& p) {
            std::vector<int> d(static_cast<std::size_t>(cl.num_types()), 0);
            for (const StagePlan& s : p.stages) {
              d[static_cast<std::size_t>(s.device_type)] += p.parallel.stage_devices();
            }
            return d;
          };
          EXPECT_EQ(devices(top.plan), devices(best.top.front().plan)) << who;
          break;
        }
        case Baseline::kHomogeneousOnly:
          EXPECT_EQ(types.size(), 1u) << who;
          break;
        case Baseline::kMetisStyle: {
          // EP, TPE of the best homogeneous plan; never worse than it (that
          // plan is in its space).
          const SearchResult& homo = runs[Baseline::kHomogeneousOnly].result;
          if (homo.top.empty()) break;  // EP, TPE from the closest miss
          for (const PlanCandidate& p : run.result.top) {
            EXPECT_EQ(p.plan.parallel.ep, homo.top.front().plan.parallel.ep) << who;
            EXPECT_EQ(p.plan.parallel.tpe, homo.top.front().plan.parallel.tpe) << who;
          }
          EXPECT_LE(top.latency_s, homo.top.front().latency_s) << who;
          EXPECT_NE(run.rule.find("EP="), std::string::npos) << who;
          break;
        }
        case Baseline::kMi: {
          EXPECT_EQ(run.result.top.size(), 1u) << who;
          EXPECT_EQ(pi.cp, 1) << who;
          EXPECT_EQ(pi.tpe, 1) << who;
          EXPECT_LE(most - least, 1) << who;
          // Every device type is used unless it cannot hold its stages (the
          // rule says so), stages grouped by type in pool order; one
          // recomputation for all stages.
          if (static_cast<int>(types.size()) < cl.num_types()) {
            EXPECT_NE(run.rule.find("do not fit, so only on"), std::string::npos) << who;
          }
          EXPECT_TRUE(std::is_sorted(
              top.plan.stages.begin(), top.plan.stages.end(),
              [](const StagePlan& a, const StagePlan& x) { return a.device_type < x.device_type; }))
              << who;
          for (const StagePlan& s : top.plan.stages) {
            EXPECT_EQ(s.recompute.kind, top.plan.stages.front().recompute.kind) << who;
          }
          // TP within the smallest node, dividing heads and KV groups.
          int node = 8;
          for (const DevicePool& p : cl.pools) node = std::min(node, p.devices_per_node);
          EXPECT_LE(pi.tp, node) << who;
          EXPECT_EQ(w.model.num_kv_heads % pi.tp, 0) << who;
          EXPECT_EQ(pi.stage_devices() % pi.ep, 0) << who;
          break;
        }
        case Baseline::kHeterMoeStyle: {
          // MI's TP, CP and TPE, one plan; stages grouped by type in pool
          // order; the stages of one type hold the same layers (up to the
          // remainder), a faster type's stages no fewer (docs/baselines.md).
          EXPECT_EQ(run.result.top.size(), 1u) << who;
          EXPECT_EQ(pi.cp, 1) << who;
          EXPECT_EQ(pi.tpe, 1) << who;
          if (const auto& mi = runs[Baseline::kMi].result; !mi.top.empty()) {
            EXPECT_EQ(pi.tp, mi.top.front().plan.parallel.tp) << who;
          }
          EXPECT_TRUE(std::is_sorted(
              top.plan.stages.begin(), top.plan.stages.end(),
              [](const StagePlan& a, const StagePlan& x) { return a.device_type < x.device_type; }))
              << who;
          std::map<int, std::pair<int, int>> layers_of;  // type: (least, most)
          int sum = 0;
          for (const StagePlan& s : top.plan.stages) {
            auto [it, fresh] = layers_of.try_emplace(s.device_type, s.layers, s.layers);
            it->second.first = std::min(it->second.first, s.layers);
            it->second.second = std::max(it->second.second, s.layers);
            EXPECT_GE(s.layers, 1) << who;
            sum += s.layers;
          }
          EXPECT_EQ(sum, w.model.num_layers) << who;
          for (const auto& [type, range] : layers_of)
            EXPECT_LE(range.second - range.first, 1) << who;
          break;
        }
        case Baseline::kNone:
          break;
      }
    }
  }
}

TEST(Baselines, MiHasNoPlanWhenNothingFits) {
  // Mixtral-L does not fit on 16 H800 (bench/README.md: no plan at all).
  const Workload w = load_workload("mixtral-l");
  const ClusterSpec cl = load_cluster("paper:16-1-h");
  EXPECT_FALSE(mi_plan(w, cl, {}).has_value());
  SerialComm comm;
  const BaselineRun run = run_baseline(Baseline::kMi, w, cl, {}, comm, {});
  EXPECT_TRUE(run.result.top.empty());
  EXPECT_NE(run.rule.find("no PP fits"), std::string::npos);
}

TEST(Baselines, SingleTypeKeepsOnePool) {
  const ClusterSpec cl = load_cluster("H800:16,910B:8");
  const ClusterSpec one = single_type(cl, 1);
  ASSERT_EQ(one.pools.size(), 1u);
  EXPECT_EQ(one.pools[0], cl.pools[1]);
  EXPECT_TRUE(one.cross_links.empty());
}

}  // namespace
}  // namespace hapmoe
