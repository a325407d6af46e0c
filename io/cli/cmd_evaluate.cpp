// `hapmoe evaluate`: read one plan (a file, or the Megatron script's own
// settings), score it, print and write the report.
#include <cxxopts.hpp>
#include <string>
#include <vector>

#include "costmodel/errors.h"
#include "costmodel/measured.h"
#include "engine/pipeline_sim.h"
#include "io/cli/cli.h"
#include "io/cli/commands.h"
#include "io/cli/megatron_cli.h"
#include "io/cli/options.h"
#include "io/cli/plan_sources.h"
#include "io/cli/steps.h"
#include "io/inputs/files.h"
#include "io/inputs/json_strict.h"
#include "io/inputs/plan_io.h"
#include "io/report/report.h"
#include "partition/constraints.h"

namespace hapmoe {

namespace {

cxxopts::Options evaluate_options() {
  cxxopts::Options o("hapmoe evaluate",
                     "Predicts the iteration latency, memory per stage, throughput and MFU of one "
                     "plan with the MoE-aware cost model (docs/costmodel.md).");
  add_workload_options(o);
  o.add_options("Plan")(
      "plan", "plan JSON: {\"parallel\":{...},\"stages\":[...]} or an output of --plan-json",
      cxxopts::value<std::string>())(
      "plan-index", "which plan of an output document with several plans (default 0)",
      cxxopts::value<std::string>())("plan-json", "write the report as JSON to this file",
                                     cxxopts::value<std::string>())(
      "simulate", "also run an event simulation of the 1F1B schedule and print its makespan");
  add_out_option(o);
  add_launcher_options(o);
  return o;
}

// The plan to score: --plan (entry --plan-index of it), or without --plan
// the Megatron script's own settings. Checked against the inputs.
struct PlanInput {
  Plan plan;
  std::string path;  // where it came from, for messages and the archive
  int index = 0;
  bool job = false;  // the file's "job" knobs were applied to the workload
};

// A plan from `plan --space` also brings the training knobs it was costed
// with ("job"): they replace those of `in`'s workload.
PlanInput read_plan_input(const cxxopts::ParseResult& r, Inputs& in) {
  PlanInput p;
  p.index = r.count("plan-index")
                ? static_cast<int>(
                      parse_int_text(r["plan-index"].as<std::string>(), 0, 1 << 20, "--plan-index"))
                : 0;
  const bool script_plan = in.megatron && r.count("plan") == 0;  // the script's own settings
  p.path = script_plan ? in.megatron->origin() : required(r, "plan");
  if (script_plan) {
    p.plan = megatron_plan(*in.megatron, in.workload, in.cluster);
  } else {
    const std::string text = read_regular_file(p.path);
    p.job = apply_plan_job(text, p.path, in.workload);
    for (const std::string& e : {p.job ? validate(in.workload.training, in.workload.model) : "",
                                 p.job ? check_precision(in.workload, in.cluster) : "",
                                 p.job ? check_offload(in.workload, in.cluster) : ""}) {
      if (!e.empty()) throw InputError(p.path, e);
    }
    p.plan = parse_plan_json(text, p.path, in.cluster, in.workload.training.micro_batch, p.index);
  }
  if (auto e = check_plan(p.plan, in.workload, in.cluster, in.constraints); !e.empty()) {
    throw InputError(p.path, e);
  }
  return p;
}

// --simulate: the 1F1B event simulation against the closed form.
void print_simulation(std::ostream& out, const PlanReport& report) {
  std::vector<double> f;
  std::vector<double> b;
  for (const StageReport& s : report.stages) {
    f.push_back(s.cost.fwd_s);
    b.push_back(s.cost.bwd_s);
  }
  const double sim = simulate_1f1b(f, b, report.num_microbatches).makespan;
  const double formula = report.breakdown.edge_s + report.breakdown.middle_s;
  out << "\n1F1B event simulation: pipeline " << format_seconds(sim) << " vs closed form "
      << format_seconds(formula) << " (" << (formula - sim) / sim * 100.0 << "% above)\n";
}

}  // namespace

int cmd_evaluate(int argc, const char* const* argv, std::ostream& out, std::ostream& err,
                 Comm& comm) {
  cxxopts::Options o = evaluate_options();
  const Started started;
  const auto parsed = parse(o, argc, argv, out);
  if (!parsed) return kExitOk;
  const auto& r = *parsed;
  // Read on every rank, the outputs checked on rank 0, and agreed on: a
  // failure on one rank only is every rank's, so none waits for one that
  // left (at write_out, say).
  Inputs in;
  HostsByDevice hosts;
  PlanInput given;
  std::optional<ArchiveLock> lock;  // rank 0: --out's, held to the end
  read_on_every_rank(comm, [&] {
    lock = check_outputs_on_root(comm, r);
    in = read_inputs(r);
    hosts = read_launcher_options(r, in.cluster, in.megatron.get());
    refuse_precision_auto(in, "evaluate");
    given = read_plan_input(r, in);
  });
  warn_if_unlocked(err, lock, "evaluate");
  const Plan& plan = given.plan;
  ProfileSources sources;
  const ProfileTables tables =
      plan_tables(in.workload, in.cluster, plan.parallel, in.profile.get(), &sources);
  const CostModel model(in.workload, in.cluster, tables);
  const PlanReport report = model.evaluate(plan);
  print_input_notes(out, in);
  if (given.job) {
    out << "note: " << given.path
        << ": the training knobs its search chose (\"job\") replace the options' and the "
           "model's\n\n";
  }
  print_plan_report(out, report, in.workload, in.cluster);
  PlanSources plan_src;
  if (in.profile) {
    plan_src = plan_sources(report, in.workload, in.cluster, tables, sources);
    print_plan_sources(out, plan_src, in.profile_path);
  }
  if (r.count("simulate")) print_simulation(out, report);
  // The launcher first, the archive last (as `plan` does).
  write_launcher_if_requested(r, out, in.megatron.get(), &report, model, hosts, comm);
  write_plan_json(r, comm, [&] {
    nlohmann::ordered_json doc;
    doc["plans"] = nlohmann::ordered_json::array({plan_report_json(report, in.cluster)});
    if (in.profile) doc["profile"] = plan_sources_json(plan_src, in.profile_path);
    return doc;
  });
  if (r.count("out")) {
    ArchiveInputs a = given_inputs(r, in);
    a.plan_file_text = given_file_text(given.path);
    a.options_resolved = {{"plan", given.path},
                          {"plan_index", given.index},
                          {"allow_cross_node_tp", in.constraints.allow_cross_node_tp}};
    if (in.profile) a.options_resolved["profile"] = plan_sources_json(plan_src, in.profile_path);
    a.tables = &tables;
    const Provenance p = provenance_since(started, hapmoe_command_line(argc, argv), comm.size(), 1);
    write_out(comm, r["out"].as<std::string>(), [&](h5::File& f) {
      write_header(f, "evaluate");
      write_provenance(f, p);
      write_run(f, a, {report}, nullptr);
    });
  }
  if (!report.fits) {
    err << "hapmoe: the plan does not fit in memory (see the warnings above)\n";
    return kExitNoFit;
  }
  return kExitOk;
}

}  // namespace hapmoe
