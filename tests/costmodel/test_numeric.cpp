// Numerical hygiene (issue 9, docs/costmodel.md): a cost that would come
// out non-finite or negative is caught where it is computed, with the
// inputs that produced it, and never reaches a plan report. Each test
// feeds the cost model a profile-table entry that is NaN, negative or so
// small that a time overflows, as a measured profile could hold.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "costmodel/analytic.h"
#include "costmodel/cluster.h"
#include "costmodel/cost.h"
#include "costmodel/errors.h"
#include "costmodel/model.h"
#include "costmodel/plan.h"
#include "costmodel/profile.h"
#include "tests/costmodel/synthetic_model.h"

namespace hapmoe {
namespace {

Workload workload() {
  Workload w;
  w.model = test_models::dense_model();
  ModelSpec& m = w.model;
  m.name = "numeric-moe";
  m.num_experts = 8;
  m.top_k = 2;
  m.expert_ffn_hidden = 2048;
  m.moe_layers = {1, 1, 1, 1};
  TrainingSpec& t = w.training;
  t.seq_len = 1024;
  t.global_batch = 64;
  t.micro_batch = 1;
  t.imbalance = 1.4;
  t.gamma = 0.5;
  return w;
}

DeviceSpec device() {
  DeviceSpec d;
  d.name = "DevN";
  d.peak_flops = 100e12;
  d.memory_bytes = 80e9;
  d.hbm_bandwidth = 1e12;
  d.intra_node_bandwidth = 100e9;
  d.inter_node_bandwidth = 10e9;
  d.devices_per_node = 8;
  d.gemm_efficiency = 1.0;
  d.intra_node_latency = 1e-6;
  d.inter_node_latency = 2e-6;
  return d;
}

ClusterSpec cluster(const DeviceSpec& d) {
  ClusterSpec c;
  c.name = "numeric";
  c.pools.push_back({d, 1, 8});
  return c;
}

Plan plan() {
  Plan p;
  p.parallel = {.pp = 2, .tp = 2, .cp = 1, .ep = 2, .tpe = 1, .dp = 2, .micro_batch = 1};
  p.stages = {{0, 2, {}}, {0, 2, {}}};
  return p;
}

// The message names the quantity, the model, the device and the degrees.
void expect_numeric_error(const CostModel& model, const std::string& quantity) {
  try {
    (void)model.evaluate(plan());
    ADD_FAILURE() << "no NumericError";
  } catch (const NumericError& e) {
    const std::string what = e.what();
    for (const std::string& part : {quantity, std::string("numeric-moe"), std::string("DevN"),
                                    std::string("PP=2 TP=2 CP=1 EP=2 TPE=1 DP=2")}) {
      EXPECT_NE(what.find(part), std::string::npos) << "missing '" << part << "' in: " << what;
    }
  }
}

TEST(Numeric, SaneInputsGiveFiniteNonNegativeCosts) {
  const Workload w = workload();
  const ClusterSpec c = cluster(device());
  ASSERT_EQ(validate(c), "");
  const ProfileTables tables = make_analytic_tables(w, c, 1, {2}, {1});
  const CostModel model(w, c, tables);
  const PlanReport r = model.evaluate(plan());
  EXPECT_TRUE(std::isfinite(r.latency_s) && r.latency_s > 0);
  for (const StageReport& s : r.stages) {
    EXPECT_TRUE(std::isfinite(s.cost.fwd_s) && s.cost.fwd_s >= 0);
    EXPECT_TRUE(std::isfinite(s.cost.memory.total()) && s.cost.memory.total() >= 0);
  }
}

TEST(Numeric, OverflowingStageSumIsCaughtInTheStageCost) {
  // A (measured) HBM bandwidth of 1e-300 B/s in the tables: positive and
  // finite, and each layer's expert time (~1e308 s) is still finite, but
  // a stage's sum overflows.
  const Workload w = workload();
  const ClusterSpec c = cluster(device());
  ProfileTables tables = make_analytic_tables(w, c, 1, {2}, {1});
  tables.devices[0].hbm_bandwidth = 1e-300;
  const CostModel model(w, c, tables);
  EXPECT_NO_THROW((void)model.type_costs(plan().parallel, 0));
  expect_numeric_error(model, "a stage cost (stage 0, 2 layers");
}

TEST(Numeric, ImplausiblySmallDeviceFiguresAreInvalid) {
  // validate() has floors, so a 1e-300 FLOP/s device cannot produce
  // 1e300-second plans that look confident.
  DeviceSpec d = device();
  d.peak_flops = 1e-300;
  EXPECT_NE(validate(cluster(d)).find("implausibly small"), std::string::npos);
  d = device();
  d.inter_node_bandwidth = 1.0;  // 1 B/s
  EXPECT_NE(validate(cluster(d)).find("inter_node_bandwidth"), std::string::npos);
}

TEST(Numeric, NanInAMeasuredTableIsCaught) {
  const Workload w = workload();
  const ClusterSpec c = cluster(device());
  ProfileTables tables = make_analytic_tables(w, c, 1, {2}, {1});
  tables.compute[0].at({2, 1}).attention_fwd = std::numeric_limits<double>::quiet_NaN();
  const CostModel model(w, c, tables);
  EXPECT_THROW((void)model.type_costs(plan().parallel, 0), NumericError);
  expect_numeric_error(model, "dense layer fwd_s = nan");
}

TEST(Numeric, NegativeTableEntryIsCaught) {
  const Workload w = workload();
  const ClusterSpec c = cluster(device());
  ProfileTables tables = make_analytic_tables(w, c, 1, {2}, {1});
  tables.compute[0].at({2, 1}).output_bwd = -1.0;
  const CostModel model(w, c, tables);
  expect_numeric_error(model, "output_bwd_s = -1");
}

TEST(Numeric, InfiniteOptimizerCoefficientIsCaught) {
  const Workload w = workload();
  const ClusterSpec c = cluster(device());
  ProfileTables tables = make_analytic_tables(w, c, 1, {2}, {1});
  tables.devices[0].optimizer_s_per_param = std::numeric_limits<double>::infinity();
  const CostModel model(w, c, tables);
  expect_numeric_error(model, "optimizer_s_per_param = inf");
}

}  // namespace
}  // namespace hapmoe
