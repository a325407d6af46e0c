// Measured curves: log-log interpolation in bytes and world, the flags of
// lookups outside the measured range, medians of repeated points, and the
// catalog path left untouched when nothing is measured; a measured layer
// scaling the analytic compute entry.
#include <gtest/gtest.h>

#include <cmath>

#include "costmodel/analytic.h"
#include "costmodel/cluster.h"
#include "costmodel/measured.h"
#include "costmodel/model.h"
#include "costmodel/profile.h"
#include "tests/costmodel/synthetic_model.h"

namespace hapmoe {
namespace {

MeasuredCurve two_worlds() {
  // world 2: 1 us at 1 KB, 100 us at 1 MB; world 8: twice as long.
  return make_curve({{2, 1e3, 1e-6}, {2, 1e6, 1e-4}, {8, 1e3, 2e-6}, {8, 1e6, 2e-4}});
}

TEST(MeasuredCurve, ExactPointsAreReturnedAsMeasured) {
  const MeasuredCurve c = two_worlds();
  unsigned f = 0;
  EXPECT_DOUBLE_EQ(measured_time(c, Primitive::kAllToAll, 1e3, 2, f), 1e-6);
  EXPECT_EQ(f, kLookupMeasured);
  f = 0;
  EXPECT_NEAR(measured_time(c, Primitive::kAllToAll, 1e6, 8, f), 2e-4, 1e-15);
  EXPECT_EQ(f, kLookupMeasured);
}

TEST(MeasuredCurve, InterpolatesLogLogInBytesAndWorld) {
  const MeasuredCurve c = two_worlds();
  unsigned f = 0;
  // Halfway in log(bytes) between 1e3 and 1e6: the geometric mean.
  EXPECT_NEAR(measured_time(c, Primitive::kAllToAll, std::sqrt(1e9), 2, f), 1e-5, 1e-12);
  EXPECT_EQ(f, kLookupMeasured);
  // world 4 is halfway between 2 and 8 in log(world): sqrt(1 * 2) us.
  f = 0;
  EXPECT_NEAR(measured_time(c, Primitive::kAllToAll, 1e3, 4, f), std::sqrt(2.0) * 1e-6, 1e-12);
  EXPECT_EQ(f, kLookupMeasured);
}

TEST(MeasuredCurve, OutsideTheRangeIsFlaggedNeverSilent) {
  const MeasuredCurve c = two_worlds();
  unsigned f = 0;
  // Above the largest size: proportional to bytes.
  EXPECT_NEAR(measured_time(c, Primitive::kAllToAll, 4e6, 2, f), 4e-4, 1e-12);
  EXPECT_TRUE(f & kLookupAboveBytes);
  // Below the smallest: its time.
  f = 0;
  EXPECT_DOUBLE_EQ(measured_time(c, Primitive::kAllToAll, 10, 2, f), 1e-6);
  EXPECT_TRUE(f & kLookupBelowBytes);
  // World 16 from world 8 by the all-to-all factor (w-1)/w.
  f = 0;
  EXPECT_NEAR(measured_time(c, Primitive::kAllToAll, 1e3, 16, f), 2e-6 * (15.0 / 16) / (7.0 / 8),
              1e-15);
  EXPECT_TRUE(f & kLookupWorldScaled);
}

TEST(MeasuredCurve, RepeatedPointsKeepTheirMedian) {
  const MeasuredCurve c = make_curve({{2, 1e3, 5e-6}, {2, 1e3, 1e-6}, {2, 1e3, 2e-6}});
  unsigned f = 0;
  EXPECT_DOUBLE_EQ(measured_time(c, Primitive::kP2P, 1e3, 2, f), 2e-6);
}

TEST(CommTable, MeasuredKeyReplacesTheFormulaOthersKeepIt) {
  CommTable t;
  const Link intra{LinkKind::kIntraNode, 0, 0};
  const Link inter{LinkKind::kInterNode, 0, 0};
  t.set(Primitive::kAllReduce, intra, {100e9, 1e-6});
  t.set(Primitive::kAllReduce, inter, {10e9, 1e-5});
  const double before_inter = t.time(Primitive::kAllReduce, 1e6, 8, inter);
  t.set_measured(Primitive::kAllReduce, intra, make_curve({{8, 1e3, 1.0}, {8, 1e7, 2.0}}));
  unsigned f = 0;
  EXPECT_NEAR(t.time_flags(Primitive::kAllReduce, 1e7, 8, intra, f), 2.0, 1e-12);
  EXPECT_EQ(f, kLookupMeasured);
  EXPECT_EQ(t.time(Primitive::kAllReduce, 1e6, 8, inter), before_inter);
  LookupLog log;
  t.set_log(&log);
  (void)t.time(Primitive::kAllReduce, 1e6, 8, inter);
  (void)t.time(Primitive::kAllReduce, 1e8, 8, intra);
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0].flags, 0u);  // catalog
  EXPECT_EQ(log[1].flags, kLookupMeasured | kLookupAboveBytes);
}

// A measured dense layer scales the analytic entry's attention: its core
// attention with it, forward and backward (what the CP ring and the TP
// overlap hide behind, docs/costmodel.md, "Core attention"), by the ratio
// of the measured to the analytic time.
TEST(ApplyProfile, MeasuredDenseLayerScalesCoreAttentionBothWays) {
  const ModelSpec m = test_models::dense_model();
  TrainingSpec t;
  t.seq_len = 4096;
  t.global_batch = 64;
  const Workload w{m, t};
  ClusterSpec c;
  c.name = "one";
  c.pools.push_back({*find_device("H100"), 1, 8});
  ProfileTables tables = make_analytic_tables(w, c, 1, {1}, {1});
  const ComputeEntry before = tables.compute[0].at({1, 1});
  ASSERT_GT(before.core_attention_bwd, before.core_attention_fwd);
  MeasuredProfile p;
  ComputeSample s;
  s.device = "H100";
  s.dense_fwd_s = 2.0 * (before.attention_fwd + before.dense_mlp_fwd);
  s.dense_bwd_s = 3.0 * (before.attention_bwd + before.dense_mlp_bwd);
  p.compute.push_back(s);
  apply_profile(tables, p, w, c, 1);
  const ComputeEntry& after = tables.compute[0].at({1, 1});
  EXPECT_DOUBLE_EQ(after.core_attention_fwd, 2.0 * before.core_attention_fwd);
  EXPECT_DOUBLE_EQ(after.core_attention_bwd, 3.0 * before.core_attention_bwd);
  EXPECT_DOUBLE_EQ(after.attention_bwd, 3.0 * before.attention_bwd);
}

}  // namespace
}  // namespace hapmoe
