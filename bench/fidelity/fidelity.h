// The calibration benchmark (bench/fidelity/README.md): hapmoe's
// prediction of published, measured training runs
// (shared/calibration/published-runs.tsv), one case per row, written by the
// project from the facts in the row (bench/fidelity/cases.json). Each case
// is scored like `hapmoe evaluate` scores a plan: the analytic tables and
// CostModel::evaluate, nothing fitted per row.
//
// What it reports: per row the predicted and measured seconds per
// iteration and the signed error; over the rows hapmoe can express (those
// without an `outside_median` reason) the median and worst |error|; per
// same-hardware group, how well the predicted order matches the measured
// one (pairwise concordance, Kendall tau-b, whether the measured-fastest
// plan is predicted fastest).
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "costmodel/cost.h"
#include "costmodel/plan.h"
#include "io/inputs/model_io.h"

namespace hapmoe::fidelity {

// One row of the calibration table as hapmoe inputs.
struct Case {
  std::string id;
  std::string group;    // same-hardware group, "" for none
  std::string model;    // preset or model file (relative to the project root)
  std::string cluster;  // cluster spec
  TrainingOverrides overrides;
  std::string plan_text;  // the plan object, as JSON text
  double measured_s = 0;  // seconds per iteration, as published
  // Where the settings the row does not print (dispatcher, overlaps,
  // gradient reduction, FP8 recipe) were read: the source's own recipe or
  // script at a commit, with lines. "" when the row names them all.
  std::string settings_from;
  // What the case had to approximate (still inside the median).
  std::vector<std::string> approximations;
  // Why the row stays outside the median ("" when it is inside): a feature
  // hapmoe cannot express yet.
  std::string outside_median;
};

// Reads the cases file. InputError naming the file, the JSON pointer and
// the value on anything malformed.
std::vector<Case> load_cases(const std::string& path);

struct Outcome {
  Case c;
  double predicted_s = 0;
  double error = 0;   // signed: (predicted - measured) / measured
  bool fits = true;   // the plan fits in memory per the cost model
  double mfu = 0;     // predicted
  PlanReport report;  // the whole evaluation, for the breakdown
  bool inside() const { return c.outside_median.empty(); }
};

// Scores every case; model and cluster paths are read relative to
// `root` when they name files. InputError naming the case on bad inputs.
// `kernel_overhead` (seconds), when set, replaces every device's kernel
// overhead: the fit of docs/costmodel.md, "Kernel overhead", scans it.
std::vector<Outcome> evaluate_cases(const std::vector<Case>& cases, const std::string& root,
                                    std::optional<double> kernel_overhead = std::nullopt);

// The fit of the kernel overhead over the rows inside the median: the
// value of `grid` (seconds) with the least sum of squared log errors
// log(predicted / measured), and that sum at every grid point.
struct OverheadFit {
  std::vector<double> grid;
  std::vector<double> sse;  // per grid point
  double best = 0;
  // Leave-one-out: per row inside the median, the value fitted without
  // it and that row's signed error at that value.
  struct HeldOut {
    std::string id;
    double fitted = 0;
    double error = 0;
  };
  std::vector<HeldOut> held_out;
};
OverheadFit fit_kernel_overhead(const std::vector<Case>& cases, const std::string& root,
                                const std::vector<double>& grid);

// How the predicted order of one same-hardware group matches the measured
// order, over pairs of different measured time: concordance counts a pair
// ordered alike as 1 and a pair predicted equal as 1/2.
struct GroupStats {
  std::string group;
  int rows = 0;
  int pairs = 0;
  double concordance = 0;
  double kendall_tau_b = 0;
  bool best_predicted_best = false;  // a measured-fastest row is predicted fastest
};
GroupStats group_stats(const std::string& group, const std::vector<const Outcome*>& rows);

struct Summary {
  int rows = 0;
  int expressible = 0;  // inside the median
  double median_abs_error = 0;
  double worst_abs_error = 0;
  std::vector<GroupStats> groups;      // over the rows inside the median
  std::vector<GroupStats> groups_all;  // over every row of the group
};
Summary summarise(const std::vector<Outcome>& outcomes);

// "calibration: rows=R expressible=E median_abs_error=0.xxx
// worst_abs_error=0.xxx qwen3_235b_concordance=0.xx qwen3_235b_best=yes|no"
std::string summary_line(const Summary& s);

// The per-row table, the approximations, the groups and the summary line.
void print_report(std::ostream& out, const std::vector<Outcome>& outcomes, const Summary& s);

// Where each row's predicted time goes (docs/costmodel.md, "Breakdown"):
// micro-batches, the bottleneck stage's step, the bubble, the exposed DP
// sync and the optimizer per iteration; then that stage's forward and
// backward step of one micro-batch by part, in milliseconds.
void print_breakdown(std::ostream& out, const std::vector<Outcome>& outcomes);

}  // namespace hapmoe::fidelity
