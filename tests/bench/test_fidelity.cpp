// The calibration benchmark (bench/fidelity): its statistics on small
// hand-made groups, and a pin of where the cost model stands on the
// published runs, so that a change that makes the median or worst error or
// the Qwen3-235B group's order worse fails here. When a change improves them,
// lower the pins to the new figures (bench/fidelity/README.md).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "bench/fidelity/fidelity.h"
#include "costmodel/cluster.h"
#include "costmodel/errors.h"

namespace hapmoe::fidelity {
namespace {

Outcome row(const std::string& id, double measured, double predicted) {
  Outcome o;
  o.c.id = id;
  o.c.group = "g/x";
  o.c.measured_s = measured;
  o.predicted_s = predicted;
  o.error = (predicted - measured) / measured;
  return o;
}

GroupStats stats_of(const std::vector<Outcome>& rows) {
  std::vector<const Outcome*> p;
  for (const Outcome& o : rows) p.push_back(&o);
  return group_stats("g/x", p);
}

TEST(Fidelity, GroupInTheMeasuredOrder) {
  const GroupStats g = stats_of({row("a", 1, 10), row("b", 2, 20), row("c", 3, 30)});
  EXPECT_EQ(g.pairs, 3);
  EXPECT_DOUBLE_EQ(g.concordance, 1.0);
  EXPECT_DOUBLE_EQ(g.kendall_tau_b, 1.0);
  EXPECT_TRUE(g.best_predicted_best);
}

TEST(Fidelity, GroupBackwards) {
  const GroupStats g = stats_of({row("a", 1, 30), row("b", 2, 20), row("c", 3, 10)});
  EXPECT_DOUBLE_EQ(g.concordance, 0.0);
  EXPECT_DOUBLE_EQ(g.kendall_tau_b, -1.0);
  EXPECT_FALSE(g.best_predicted_best);
}

// A pair measured equal is not counted; a pair predicted equal counts 1/2.
TEST(Fidelity, TiesInTheMeasuredOrPredictedTimes) {
  const GroupStats g = stats_of({row("a", 1, 5), row("b", 1, 6), row("c", 2, 5)});
  EXPECT_EQ(g.pairs, 2);                  // (a,c) and (b,c); (a,b) is a measured tie
  EXPECT_DOUBLE_EQ(g.concordance, 0.25);  // (a,c) predicted equal: 1/2; (b,c) backwards: 0
  EXPECT_TRUE(g.best_predicted_best);     // a is measured-fastest and predicted fastest
}

TEST(Fidelity, MedianAndWorstOverTheRowsInsideTheMedianOnly) {
  std::vector<Outcome> rows = {row("a", 10, 11), row("b", 10, 8), row("c", 10, 10.5),
                               row("d", 10, 30)};
  rows[3].c.outside_median = "a feature not modelled";
  const Summary s = summarise(rows);
  EXPECT_EQ(s.rows, 4);
  EXPECT_EQ(s.expressible, 3);
  EXPECT_DOUBLE_EQ(s.median_abs_error, 0.1);
  EXPECT_DOUBLE_EQ(s.worst_abs_error, 0.2);
  EXPECT_NE(summary_line(s).find("rows=4 expressible=3 median_abs_error=0.100 "
                                 "worst_abs_error=0.200 g_concordance="),
            std::string::npos)
      << summary_line(s);
}

TEST(Fidelity, CasesFileErrorsNameTheCase) {
  EXPECT_THROW(load_cases(std::string(HAPMOE_TEST_DATA) + "/models/small-moe.json"), InputError);
}

// Where the cost model stands on shared/calibration's published runs
// (bench/README.md, "Calibration"). Lower these as the model improves;
// never raise them to make a change pass. Two sets: every row inside the
// median, and the bf16 rows the figures were first pinned over (issue 17),
// so that adding rows (FP8) cannot hide a change that makes those worse.
// They were raised once, with recompute by module (issue 18): the four
// long-context rows had been costed as full recompute, which Megatron did
// not run, and that overcount had hidden an underestimate of long-context
// attention (bench/README.md, "Recompute by module"). Megatron-FSDP then
// brought the Qwen3-235B FSDP row inside (bench/README.md, "Sharded data
// parallelism"): a new row, so the set, its median and the group's
// concordance (8 of 9 pairs, as over every row before) are new figures;
// the same for the two GPT-OSS rows once sliding windows and sinks were
// costed (bench/README.md, "Attention variants"), with τ refitted to 42 µs,
// and for DeepSeek-V3 once MTP was (bench/README.md, "Multi-token
// prediction"): every row is inside, τ = 41 µs. Then every row took the
// settings its source's own recipe or script ran with (dispatcher, the
// overlaps, --delay-wgrad-compute, bf16 gradient reduction, the FP8
// recipe; bench/README.md, "The rows' own settings"), τ refitted to 51 µs:
// the group is in the measured order (9 of 9 pairs). Data-parallel groups
// with several members per node then crossed the nodes over all their NICs
// (docs/costmodel.md, "Collectives over several nodes"), τ 52 µs: the
// median fell, the worst row (GPT-OSS B200) rose from 0.301. Core attention
// then ran at cuDNN's measured share of peak instead of the GEMMs'
// (docs/costmodel.md, "Core attention"), τ refitted to 44 µs: the median
// halved (0.090 -> 0.047), 17 of 18 rows within 25 % (16 before; the
// long-context rows from -5.7..-20.5 % to -2.4..+2.7 %, Qwen3-235B TP 4
// PP 8 from +29.1 % to +18.3 %), and the one row it does not explain,
// GPT-OSS on B200, from -32.1 % to -33.6 % with the lower τ: the worst
// pin follows it (bench/README.md, "Core attention"). Collectives then moved
// NCCL's share of a link's line rate (370 of 450 GB/s over NVLink, 48.5 of
// 50 GB/s per NIC; docs/costmodel.md, "Analytic communication table"), τ
// 43 µs: median 0.047 -> 0.046, worst 0.336 -> 0.327; the bf16 rows' median
// rose 0.048 -> 0.052 (Megatron-FSDP, all NIC-bound gathers, +13.8 % ->
// +17.0 %; Mixtral 8x7B, the middle row, +4.8 % -> +5.2 %).
constexpr int kExpressible = 18;
constexpr double kMedianAbsError = 0.046;
constexpr double kWorstAbsError = 0.327;
constexpr int kRowsWithin25 = 17;  // rows with |error| <= 0.25
constexpr int kBf16Rows = 13;
constexpr double kBf16MedianAbsError = 0.052;
constexpr double kBf16WorstAbsError = 0.327;
constexpr double kQwenConcordance = 9.0 / 9.0;

TEST(Fidelity, PublishedRunsNoWorseThanPinned) {
  const std::string root = HAPMOE_SOURCE_DIR;
  const auto cases = load_cases(root + "/bench/fidelity/cases.json");
  const auto outcomes = evaluate_cases(cases, root);
  const Summary s = summarise(outcomes);
  EXPECT_EQ(s.rows, 18);
  EXPECT_GE(s.expressible, kExpressible);
  EXPECT_LE(s.median_abs_error, kMedianAbsError + 5e-4) << summary_line(s);
  EXPECT_LE(s.worst_abs_error, kWorstAbsError + 5e-4) << summary_line(s);
  int within = 0;
  for (const Outcome& o : outcomes) within += o.inside() && std::abs(o.error) <= 0.25;
  EXPECT_GE(within, kRowsWithin25) << summary_line(s);
  bool qwen = false;
  for (const GroupStats& g : s.groups) {
    if (g.group.rfind("qwen3-235b/", 0) != 0) continue;
    qwen = true;
    EXPECT_GE(g.concordance, kQwenConcordance - 1e-9) << summary_line(s);
    EXPECT_TRUE(g.best_predicted_best) << summary_line(s);
  }
  EXPECT_TRUE(qwen) << "no Qwen3-235B group among the cases";
  std::vector<Outcome> bf16;
  for (const Outcome& o : outcomes) {
    if (o.c.overrides.precision != Precision::kFp8) bf16.push_back(o);
  }
  const Summary b = summarise(bf16);
  EXPECT_EQ(b.expressible, kBf16Rows) << summary_line(b);
  EXPECT_LE(b.median_abs_error, kBf16MedianAbsError + 5e-4) << summary_line(b);
  EXPECT_LE(b.worst_abs_error, kBf16WorstAbsError + 5e-4) << summary_line(b);
}

// The catalog's kernel overhead is the fit over the rows inside the median
// (docs/costmodel.md, "Kernel overhead"): a change to the cost model that
// moves the least of the fit must refit kDefaultKernelOverhead, not leave a
// stale constant behind.
TEST(Fidelity, CatalogKernelOverheadIsTheFit) {
  const std::string root = HAPMOE_SOURCE_DIR;
  const auto cases = load_cases(root + "/bench/fidelity/cases.json");
  std::vector<double> grid;
  for (int us = 34; us <= 54; ++us) grid.push_back(us * 1e-6);
  const OverheadFit fit = fit_kernel_overhead(cases, root, grid);
  EXPECT_DOUBLE_EQ(fit.best, kDefaultKernelOverhead);
  ASSERT_EQ(fit.held_out.size(), static_cast<std::size_t>(kExpressible));
  // Leave-one-out errors stay near the in-sample ones (worst: GPT-OSS on
  // B200, -33.8 % held out at 40 µs against -32.7 % at 43 µs; Qwen3-235B
  // TP 4 PP 8 +24.5 % at 47 µs against +18.0 %).
  for (const auto& h : fit.held_out) EXPECT_LT(std::abs(h.error), 0.35) << h.id;
}

}  // namespace
}  // namespace hapmoe::fidelity
