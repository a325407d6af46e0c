// `hapmoe compare`: hapmoe's search and every baseline on one model and
// cluster, one table normalised to MI (docs/baselines.md).
#include <algorithm>
#include <cstdio>
#include <cxxopts.hpp>
#include <string>
#include <vector>

#include "engine/baselines.h"
#include "io/cli/cli.h"
#include "io/cli/commands.h"
#include "io/cli/options.h"
#include "io/cli/steps.h"
#include "io/inputs/files.h"
#include "io/inputs/plan_io.h"
#include "io/report/report.h"

namespace hapmoe {

namespace {

cxxopts::Options compare_options() {
  cxxopts::Options o(
      "hapmoe compare",
      "Runs hapmoe's search and every baseline (uniform, mi, hetermoe-style, "
      "metis-style, homogeneous-only; docs/baselines.md) on one model and cluster and prints "
      "latency, tokens/s, TFLOP/s per device and MFU, normalised to MI.");
  add_workload_options(o);
  add_search_options(o);
  o.add_options("Output")("plan-json",
                          "write every baseline's plans and search statistics as JSON to this file",
                          cxxopts::value<std::string>());
  add_out_option(o);
  return o;
}

// One baseline's run and its scored plans.
struct Row {
  Baseline baseline;
  BaselineRun ran;
  Scored scored;
};

std::vector<Row> run_every_baseline(const Inputs& in, const SearchOptions& opt,
                                    const RunOptions& run, Comm& comm) {
  std::vector<Row> rows;
  for (const Baseline b : all_baselines()) {
    Row row{b, run_baseline(b, in.workload, in.cluster, opt, comm, run), {}};
    row.scored = score(in.workload, in.cluster, row.ran.result, in.profile.get());
    rows.push_back(std::move(row));
  }
  return rows;
}

// MI's best plan, what the table is normalised to; nullptr if MI has none.
const PlanReport* normaliser(const std::vector<Row>& rows) {
  const auto mi = std::find_if(rows.begin(), rows.end(),
                               [](const Row& x) { return x.baseline == Baseline::kMi; });
  return mi->scored.reports.empty() ? nullptr : &mi->scored.reports.front();
}

void print_comparison(std::ostream& out, const Inputs& in, const std::vector<Row>& rows,
                      const PlanReport* norm, const RunOptions& run, const Comm& comm) {
  print_input_notes(out, in);
  out << "compare  " << in.workload.model.name << " on " << cluster_summary(in.cluster)
      << (norm ? ", normalised to mi" : " (mi has no plan: nothing to normalise to)") << "\n";
  if (in.profile) {
    out << "profile  " << in.profile_path << " (measured values replace the catalog's; "
        << "`plan --profile` lists them per plan)\n";
  }
  out << "\n";
  out << "  baseline          latency     tokens/s  TFLOP/s/dev    MFU  thr/mi  lat/mi  plan\n";
  for (const Row& row : rows) {
    char line[200];
    if (row.scored.reports.empty()) {
      std::snprintf(line, sizeof line, "  %-16s  %-10s\n", to_string(row.baseline).c_str(),
                    "no plan fits");
      out << line;
      continue;
    }
    const PlanReport& p = row.scored.reports.front();
    const ParallelConfig& pi = p.plan.parallel;
    std::string thr = "-";
    std::string lat = "-";
    if (norm) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.2fx",
                    p.throughput_tokens_per_s / norm->throughput_tokens_per_s);
      thr = buf;
      std::snprintf(buf, sizeof buf, "%.2fx", p.latency_s / norm->latency_s);
      lat = buf;
    }
    std::snprintf(line, sizeof line,
                  "  %-16s  %-10s %10.0f %12.1f %6.1f%% %7s %7s  PP%d TP%d CP%d EP%d TPE%d DP%d: ",
                  to_string(row.baseline).c_str(), format_seconds(p.latency_s).c_str(),
                  p.throughput_tokens_per_s, p.tflops_per_device, 100.0 * p.mfu, thr.c_str(),
                  lat.c_str(), pi.pp, pi.tp, pi.cp, pi.ep, pi.tpe, pi.dp);
    out << line << stages_text(p.plan, in.cluster) << "\n";
  }
  out << "\n";
  for (const Row& row : rows) {
    if (row.ran.rule.empty()) continue;
    out << "  " << to_string(row.baseline) << ": " << row.ran.rule << "\n";
  }
  std::int64_t configs = 0;
  double seconds = 0.0;
  for (const Row& row : rows) {
    configs += row.ran.result.stats.configs_evaluated;
    seconds += row.ran.result.stats.seconds;
  }
  out << "  searched " << configs << " configurations in " << format_seconds(seconds) << " on "
      << comm.size() << (comm.size() == 1 ? " rank" : " ranks") << " x " << run.threads
      << (run.threads == 1 ? " thread" : " threads") << "\n";
}

nlohmann::ordered_json comparison_document(const Inputs& in, const std::vector<Row>& rows,
                                           const PlanReport* norm) {
  nlohmann::ordered_json doc;
  doc["normalised_to"] = norm ? "mi" : "";
  doc["baselines"] = nlohmann::ordered_json::array();
  for (const Row& row : rows) {
    nlohmann::ordered_json b;
    b["name"] = to_string(row.baseline);
    b["rule"] = row.ran.rule;
    b["plans"] = nlohmann::ordered_json::array();
    for (const PlanReport& p : row.scored.reports)
      b["plans"].push_back(plan_report_json(p, in.cluster));
    const SearchStats& st = row.ran.result.stats;
    b["search"] = {{"configs", st.configs},   {"configs_evaluated", st.configs_evaluated},
                   {"states", st.states},     {"transitions", st.transitions},
                   {"feasible", st.feasible}, {"seconds", st.seconds}};
    doc["baselines"].push_back(b);
  }
  return doc;
}

void write_comparison(h5::File& f, const cxxopts::ParseResult& r, const Inputs& in,
                      const std::vector<Row>& rows, const PlanReport* norm,
                      const SearchOptions& opt, const RunOptions& run, const Provenance& p) {
  write_header(f, "compare");
  write_provenance(f, p);
  const h5::Group cmp = f.create_group("compare");
  cmp.attrs().set("normalised_to", norm ? "mi" : "");
  cmp.attrs().set("baselines", static_cast<std::int64_t>(rows.size()));
  const h5::Group cases = f.create_group("cases");
  for (std::size_t k = 0; k < rows.size(); ++k) {
    const Row& row = rows[k];
    const h5::Group g = cases.create_group(case_group_name(k, rows.size()));
    g.attrs().set("name", to_string(row.baseline));
    g.attrs().set("index", static_cast<std::int64_t>(k));
    g.attrs().set("case", nlohmann::ordered_json{{"model", r["model"].as<std::string>()},
                                                 {"cluster", r["cluster"].as<std::string>()},
                                                 {"baseline", to_string(row.baseline)}}
                              .dump());
    g.attrs().set("rule", row.ran.rule);
    g.attrs().set("status", row.scored.reports.empty() ? "no_fit" : "ok");
    write_provenance(g, p);
    ArchiveInputs a = given_inputs(r, in);
    a.options_resolved = resolved_search_options(opt, run);
    a.options_resolved["baseline"] = to_string(row.baseline);
    a.options_resolved["baseline_rule"] = row.ran.rule;
    a.tables = &row.scored.tables;
    write_run(g, a, row.scored.reports, &row.ran.result);
  }
}

}  // namespace

int cmd_compare(int argc, const char* const* argv, std::ostream& out, std::ostream& err,
                Comm& comm) {
  cxxopts::Options o = compare_options();
  const Started started;
  const auto parsed = parse(o, argc, argv, out);
  if (!parsed) return kExitOk;
  const auto& r = *parsed;
  Inputs in;
  SearchOptions opt;
  RunOptions run;
  std::optional<ArchiveLock> lock;  // rank 0: --out's, held to the end
  read_on_every_rank(comm, [&] {
    lock = check_outputs_on_root(comm, r);
    in = read_inputs(r);
    refuse_precision_auto(in, "compare");
    read_search_options(r, in, comm, opt, run);
  });
  warn_if_unlocked(err, lock, "compare");
  const std::vector<Row> rows = run_every_baseline(in, opt, run, comm);
  const PlanReport* norm = normaliser(rows);
  print_comparison(out, in, rows, norm, run, comm);
  write_plan_json(r, comm, [&] { return comparison_document(in, rows, norm); });
  if (r.count("out")) {
    const Provenance p =
        provenance_since(started, hapmoe_command_line(argc, argv), comm.size(), run.threads);
    write_out(comm, r["out"].as<std::string>(),
              [&](h5::File& f) { write_comparison(f, r, in, rows, norm, opt, run, p); });
  }
  if (rows.front().scored.reports.empty()) {
    err << "hapmoe compare: no plan fits in memory\n";
    return kExitNoFit;
  }
  return kExitOk;
}

}  // namespace hapmoe
