#include "io/cli/cli.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cxxopts.hpp>
#include <exception>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "costmodel/analytic.h"
#include "costmodel/cost.h"
#include "costmodel/errors.h"
#include "costmodel/measured.h"
#include "engine/baselines.h"
#include "engine/driver.h"
#include "engine/pipeline_sim.h"
#include "io/archive/archive.h"
#include "io/archive/version.h"
#include "io/cli/cli_args.h"
#include "io/cli/megatron_cli.h"
#include "io/cli/profile_cli.h"
#include "io/cli/progress.h"
#include "io/cli/sweep_run.h"
#include "io/inputs/cluster_io.h"
#include "io/inputs/json_strict.h"
#include "io/inputs/model_io.h"
#include "io/inputs/plan_io.h"
#include "io/profile/profile_h5.h"
#include "io/report/report.h"
#include "partition/constraints.h"

namespace hapmoe {

namespace {

constexpr const char* kUsage =
    "usage: hapmoe <command> [options]\n"
    "\n"
    "commands:\n"
    "  plan       search the fastest plan that fits in memory (HS-DP, docs/search.md)\n"
    "  evaluate   predict the iteration latency, memory and throughput of a given plan\n"
    "  compare    run hapmoe and every baseline, one table normalised to MI (docs/baselines.md)\n"
    "  catalog    list the built-in devices, model presets and cluster presets\n"
    "  sweep      run many searches (a list and/or a product of cases) into one archive\n"
    "  show       print the summary of an HDF5 archive (--out) without re-running anything\n"
    "  profile    measured tables: import nccl-tests logs and layer timings, time MPI\n"
    "             collectives (comm), fit the calibration (fit), check predictions (check)\n"
    "\n"
    "`hapmoe <command> --help` shows the options of a command; `hapmoe --version` the version.\n"
    "Exit codes: 0 ok, 2 bad input, 3 the plan does not fit in memory, 4 sweep stopped by a\n"
    "signal (resume it with --resume), 5 a --time-limit or --max-memory stopped the search (the\n"
    "plans are the best found, not proven optimal), 1 internal error.\n";

// Options every command that takes a model and a cluster shares.
void add_workload_options(cxxopts::Options& o) {
  o.add_options("Model and cluster")(
      "model",
      "model: a preset name (see `hapmoe catalog`), a Hugging Face config.json or a "
      "hapmoe model JSON",
      cxxopts::value<std::string>())(
      "cluster",
      "cluster: a preset (paper:16-1 ...), an inline spec (H800:16,910B:16 or "
      "910B:2x16) or a cluster JSON file",
      cxxopts::value<std::string>())("allow-cross-node-tp",
                                     "let tensor-parallel groups span nodes");
  o.add_options("Training settings (override the model's defaults)")(
      "seq-len", "sequence length in tokens", cxxopts::value<std::string>())(
      "global-batch", "global batch in samples", cxxopts::value<std::string>())(
      "micro-batch", "micro-batch in samples", cxxopts::value<std::string>())(
      "precision", "bf16 or fp16 mixed precision", cxxopts::value<std::string>())(
      "dispatcher", "MoE token dispatcher: alltoall, allgather or auto (cheaper per plan)",
      cxxopts::value<std::string>())("imbalance",
                                     "router imbalance rho = max/mean tokens per expert (>= 1)",
                                     cxxopts::value<std::string>())(
      "gamma", "share gamma in [0,1] of the imbalance on the critical path",
      cxxopts::value<std::string>())("no-distributed-optimizer",
                                     "replicate optimizer states over DP (no ZeRO-1)");
  o.add_options("Profile (docs/profile.md)")(
      "profile",
      "measured tables (HDF5, from `hapmoe profile`): they replace the catalog's entry by entry, "
      "and the output says which values were measured",
      cxxopts::value<std::string>());
  add_megatron_options(o);
}

struct Inputs {
  Workload workload;
  ClusterSpec cluster;
  ConstraintOptions constraints;
  std::shared_ptr<MegatronScript> megatron;        // --megatron-script, if given
  std::shared_ptr<const MeasuredProfile> profile;  // --profile, if given
  std::string profile_path;
};

Inputs read_inputs(const cxxopts::ParseResult& r) {
  Inputs in;
  in.megatron = read_megatron_input(r);
  in.workload =
      in.megatron ? megatron_input_workload(r, *in.megatron) : load_workload(required(r, "model"));
  in.cluster = load_cluster(required(r, "cluster"));
  TrainingOverrides ov;
  auto int_opt = [&](const char* name, std::int64_t lo, std::int64_t hi) -> std::optional<int> {
    if (r.count(name) == 0) return std::nullopt;
    return static_cast<int>(
        parse_int_text(r[name].as<std::string>(), lo, hi, std::string("--") + name));
  };
  auto num_opt = [&](const char* name, double lo, double hi) -> std::optional<double> {
    if (r.count(name) == 0) return std::nullopt;
    return parse_number_text(r[name].as<std::string>(), lo, hi, std::string("--") + name);
  };
  ov.seq_len = int_opt("seq-len", 1, 1 << 22);
  ov.global_batch = int_opt("global-batch", 1, 1 << 30);
  ov.micro_batch = int_opt("micro-batch", 1, 1 << 20);
  if (r.count("precision"))
    ov.precision = parse_precision(r["precision"].as<std::string>(), "--precision");
  if (r.count("dispatcher")) {
    ov.dispatcher = parse_dispatcher(r["dispatcher"].as<std::string>(), "--dispatcher");
  }
  ov.imbalance = num_opt("imbalance", 1.0, 1000.0);
  ov.gamma = num_opt("gamma", 0.0, 1.0);
  ov.no_distributed_optimizer = r.count("no-distributed-optimizer") > 0;
  if (r.count("profile")) {
    in.profile_path = r["profile"].as<std::string>();
    in.profile = std::make_shared<const MeasuredProfile>(read_profile(in.profile_path));
    // rho measured for this model, unless --imbalance says otherwise.
    const double rho = profile_imbalance(*in.profile, in.workload.model.name);
    if (!ov.imbalance && is_set(rho)) ov.imbalance = rho;
  }
  apply_overrides(ov, in.workload);
  in.constraints.allow_cross_node_tp = r.count("allow-cross-node-tp") > 0;
  return in;
}

// --out: the HDF5 archive of the run (docs/archive.md).
void add_out_option(cxxopts::Options& o) {
  o.add_options("Archive")("out",
                           "write an HDF5 archive of the run (inputs, plans, statistics, "
                           "provenance; docs/archive.md) to this file",
                           cxxopts::value<std::string>());
}

// The start of a command, for the archive's provenance.
struct Started {
  std::string utc = utc_now();
  std::chrono::steady_clock::time_point at = std::chrono::steady_clock::now();
};

Provenance provenance(const Started& started, int argc, const char* const* argv, int ranks,
                      int threads) {
  Provenance p;
  p.command_line = "hapmoe " + command_line(argc, argv);
  p.ranks = ranks;
  p.threads = threads;
  p.start_time = started.utc;
  p.end_time = utc_now();
  p.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started.at).count();
  p.host = host_name();
  return p;
}

// The archive's record of the inputs as given: the option values as typed
// and the text of the model and cluster files.
ArchiveInputs given_inputs(const cxxopts::ParseResult& r, const Inputs& in) {
  ArchiveInputs a;
  for (const auto& kv : r.arguments()) a.options_given[kv.key()] = kv.value();
  a.model_given = r.count("model") ? r["model"].as<std::string>() : "";
  a.cluster_given = r.count("cluster") ? r["cluster"].as<std::string>() : "";
  a.model_file_text = given_file_text(a.model_given);
  a.cluster_file_text = given_file_text(a.cluster_given);
  a.workload = &in.workload;
  a.cluster = &in.cluster;
  return a;
}

// Rank 0 writes the archive; a failure there is agreed on so every rank
// exits with the same code.
void write_out(Comm& comm, const std::string& path, const std::function<void(h5::File&)>& fill) {
  std::string failed;
  if (comm.rank() == 0) {
    try {
      write_archive_atomic(path, fill);
    } catch (const std::exception& e) {  // any: the other ranks are waiting below
      failed = e.what();
    }
  }
  if (const std::string first = first_error(comm, failed); !first.empty()) {
    throw InputError("", first);
  }
}

// Rank 0 checks --out before any work; every rank learns the verdict.
void check_out(Comm& comm, const cxxopts::ParseResult& r) {
  std::string failed;
  if (comm.rank() == 0 && r.count("out")) {
    try {
      check_archive_path(r["out"].as<std::string>());
    } catch (const InputError& e) {
      failed = e.what();
    }
  }
  if (const std::string first = first_error(comm, failed); !first.empty()) {
    throw InputError("", first);
  }
}

int cmd_evaluate(int argc, const char* const* argv, std::ostream& out, std::ostream& err,
                 Comm& comm) {
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
  const Started started;
  add_launcher_options(o);
  const auto parsed = parse(o, argc, argv, out);
  if (!parsed) return kExitOk;
  const auto& r = *parsed;
  check_out(comm, r);
  const Inputs in = read_inputs(r);
  const int index = r.count("plan-index")
                        ? static_cast<int>(parse_int_text(r["plan-index"].as<std::string>(), 0,
                                                          1 << 20, "--plan-index"))
                        : 0;
  const bool script_plan = in.megatron && r.count("plan") == 0;  // the script's own settings
  const std::string plan_path = script_plan ? in.megatron->origin() : required(r, "plan");
  const Plan plan = script_plan
                        ? megatron_plan(*in.megatron, in.workload, in.cluster)
                        : load_plan(plan_path, in.cluster, in.workload.training.micro_batch, index);
  if (auto e = check_plan(plan, in.workload, in.cluster, in.constraints); !e.empty()) {
    throw InputError(plan_path, e);
  }
  ProfileTables tables = make_analytic_tables(in.workload, in.cluster, plan.parallel.micro_batch,
                                              {plan.parallel.tp}, {plan.parallel.cp});
  ProfileSources sources;
  if (in.profile) {
    sources =
        apply_profile(tables, *in.profile, in.workload, in.cluster, plan.parallel.micro_batch);
  }
  const CostModel model(in.workload, in.cluster, tables);
  const PlanReport report = model.evaluate(plan);
  print_megatron_notes(out, in.megatron.get());
  print_plan_report(out, report, in.workload, in.cluster);
  PlanSources plan_src;
  if (in.profile) {
    plan_src = plan_sources(report, in.workload, in.cluster, tables, sources);
    print_plan_sources(out, plan_src, in.profile_path);
  }
  if (r.count("simulate")) {
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
  if (r.count("plan-json") && comm.rank() == 0) {
    nlohmann::ordered_json doc;
    doc["plans"] = nlohmann::ordered_json::array({plan_report_json(report, in.cluster)});
    if (in.profile) doc["profile"] = plan_sources_json(plan_src, in.profile_path);
    write_file_atomic(r["plan-json"].as<std::string>(), doc.dump(2) + "\n");
  }
  if (r.count("out")) {
    ArchiveInputs a = given_inputs(r, in);
    a.plan_file_text = given_file_text(plan_path);
    a.options_resolved = {{"plan", plan_path},
                          {"plan_index", index},
                          {"allow_cross_node_tp", in.constraints.allow_cross_node_tp}};
    if (in.profile) a.options_resolved["profile"] = plan_sources_json(plan_src, in.profile_path);
    a.tables = &tables;
    const Provenance p = provenance(started, argc, argv, comm.size(), 1);
    write_out(comm, r["out"].as<std::string>(), [&](h5::File& f) {
      write_header(f, "evaluate");
      write_provenance(f, p);
      write_run(f, a, {report}, nullptr);
    });
  }
  write_launcher_if_requested(r, out, in.megatron.get(), &report, model, comm.rank() == 0);
  if (!report.fits) {
    err << "hapmoe: the plan does not fit in memory (see the warnings above)\n";
    return kExitNoFit;
  }
  return kExitOk;
}

// The test hook of docs/parallel.md: HAPMOE_TEST_FAIL=input@R makes rank R
// fail reading its inputs, search@R its first search.
struct FaultHook {
  int input_rank = -1;
  int search_rank = -1;
};

FaultHook fault_hook() {
  FaultHook h;
  const char* v = std::getenv("HAPMOE_TEST_FAIL");
  if (v == nullptr) return h;
  const std::string text = v;
  const auto at = text.find('@');
  const std::string what = text.substr(0, at);
  const int rank =
      at == std::string::npos
          ? 0
          : static_cast<int>(parse_int_text(text.substr(at + 1), 0, 1 << 20, "HAPMOE_TEST_FAIL"));
  if (what == "input") {
    h.input_rank = rank;
  } else if (what == "search") {
    h.search_rank = rank;
  } else {
    throw InputError("HAPMOE_TEST_FAIL", "'" + text + "': expected input@RANK or search@RANK");
  }
  return h;
}

// "H800 x12 | MI300X x12 full | [910B x1] *8": the stages of a plan on one
// line (device x layers, recomputation), runs of equal stages folded.
std::string stages_text(const Plan& plan, const ClusterSpec& cluster) {
  std::string stages;
  const auto& st = plan.stages;
  for (std::size_t i = 0; i < st.size();) {
    std::size_t run = 1;
    while (i + run < st.size() && st[i + run] == st[i]) ++run;
    std::string one = cluster.pools[static_cast<std::size_t>(st[i].device_type)].device.name +
                      " x" + std::to_string(st[i].layers);
    if (st[i].recompute.kind != RecomputeKind::kNone) {
      one += " " + to_string(st[i].recompute, st[i].layers);
    }
    if (!stages.empty()) stages += " | ";
    stages += run == 1 ? one : "[" + one + "] *" + std::to_string(run);
    i += run;
  }
  return stages;
}

// Options of the search, shared by plan and compare.
void add_search_options(cxxopts::Options& o) {
  o.add_options("Search")("top-k",
                          "how many plans to list, the best of each configuration (default 5)",
                          cxxopts::value<std::string>())(
      "prune", "prunings: all (default), none, or a comma list of lb, mem, comm",
      cxxopts::value<std::string>())("delta", "load-balance tolerance delta (default 0.2)",
                                     cxxopts::value<std::string>())(
      "eta", "cross-type communication threshold eta (default 2)", cxxopts::value<std::string>())(
      "uniform", "force n_i = N/PP layers per stage (the paper's uniform baseline)")(
      "no-bound", "turn off branch and bound (exact either way; for measuring the plain DP)")(
      "max-pp", "largest pipeline depth to consider (default: the number of layers)",
      cxxopts::value<std::string>());
  o.add_options("Parallel run (docs/parallel.md; start with mpiexec -n R for R ranks)")(
      "threads",
      "OpenMP threads per rank (default: OMP_NUM_THREADS, else the node's cores over its ranks)",
      cxxopts::value<std::string>())(
      "round",
      "most configurations per branch-and-bound round (default 32); the plans never depend on "
      "it, the statistics do, and neither depends on ranks or threads",
      cxxopts::value<std::string>())(
      "parts-per-round",
      "cut a configuration whose estimated work exceeds 1/N of its round's into parts (its "
      "stage mixes) that several workers search apart (default 0: never); like --round it "
      "changes the statistics, not the plans",
      cxxopts::value<std::string>());
}

// --time-limit and --max-memory (plan, sweep).
void add_limit_options(cxxopts::Options& o) {
  o.add_options("Limits (docs/testing.md, \"Faults and limits\")")(
      "time-limit",
      "stop the search after this many seconds (counted from the start, on every rank); the "
      "best plan found so far is reported as not proven optimal and the exit code is 5",
      cxxopts::value<std::string>())(
      "max-memory",
      "bytes (suffix K, M, G or T for powers of 1024) this process may use: a search "
      "estimated larger is refused (exit 2); one that grows past it stops like --time-limit "
      "(default: the node's memory, or its cgroup's limit, over the node's ranks)",
      cxxopts::value<std::string>());
}

// "8G", "512M", "1000000": bytes (InputError naming `what` otherwise).
std::int64_t parse_bytes_text(const std::string& text, const std::string& what) {
  std::string digits = text;
  std::int64_t unit = 1;
  if (!digits.empty()) {
    const char last = static_cast<char>(std::toupper(static_cast<unsigned char>(digits.back())));
    const std::string units = "KMGT";
    if (const auto at = units.find(last); at != std::string::npos) {
      unit = std::int64_t{1} << (10 * (at + 1));
      digits.pop_back();
    }
  }
  const std::int64_t limit = (std::int64_t{1} << 50) / unit;  // 1 PiB
  try {
    return parse_int_text(digits, 1, limit, what) * unit;
  } catch (const InputError&) {
    throw InputError(what, "'" + text +
                               "': expected a whole number of bytes from 1 to 1P, optionally "
                               "with a suffix K, M, G or T (powers of 1024)");
  }
}

SearchLimits read_limit_options(const cxxopts::ParseResult& r, const Comm& comm,
                                std::chrono::steady_clock::time_point started) {
  SearchLimits l;
  if (r.count("time-limit")) {
    const double s = parse_number_text(r["time-limit"].as<std::string>(), 0.0, 1e9, "--time-limit");
    if (!(s > 0))
      throw InputError("--time-limit", "'" + r["time-limit"].as<std::string>() +
                                           "': expected a number of seconds above 0");
    l.deadline = started + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                               std::chrono::duration<double>(s));
  }
  if (r.count("max-memory")) {
    l.max_memory_bytes = parse_bytes_text(r["max-memory"].as<std::string>(), "--max-memory");
    l.memory_given = true;
  } else {
    l.max_memory_bytes = default_memory_budget(comm.local_size());
  }
  return l;
}

// The line of a search a limit stopped (none if it ran to its end).
void print_stopped(std::ostream& out, const SearchResult& result) {
  if (result.stopped == StopReason::kNone) return;
  out << not_proven_line(to_string(result.stopped), result.not_searched, result.stats.configs);
}

// The values of add_search_options' options (InputError on a bad one).
void read_search_options(const cxxopts::ParseResult& r, const Inputs& in, Comm& comm,
                         SearchOptions& opt, RunOptions& run) {
  opt.space.constraints = in.constraints;
  opt.profile = in.profile;
  if (r.count("top-k")) {
    opt.top_k = static_cast<int>(parse_int_text(r["top-k"].as<std::string>(), 1, 1000, "--top-k"));
  }
  if (r.count("prune")) opt.prune = parse_prune_set(r["prune"].as<std::string>(), "--prune");
  if (r.count("delta"))
    opt.delta = parse_number_text(r["delta"].as<std::string>(), 0.0, 10.0, "--delta");
  if (r.count("eta")) opt.eta = parse_number_text(r["eta"].as<std::string>(), 0.0, 1e6, "--eta");
  if (r.count("max-pp")) {
    opt.space.max_pp =
        static_cast<int>(parse_int_text(r["max-pp"].as<std::string>(), 1, 100000, "--max-pp"));
  }
  opt.uniform = r.count("uniform") > 0;
  opt.bound = r.count("no-bound") == 0;
  run.threads =
      r.count("threads")
          ? static_cast<int>(parse_int_text(r["threads"].as<std::string>(), 1, 4096, "--threads"))
          : default_threads(comm);
  if (r.count("round")) {
    run.round =
        static_cast<int>(parse_int_text(r["round"].as<std::string>(), 1, 1 << 20, "--round"));
  }
  if (r.count("parts-per-round")) {
    run.parts_per_round = static_cast<int>(
        parse_int_text(r["parts-per-round"].as<std::string>(), 0, 1 << 20, "--parts-per-round"));
  }
}

// The search options with their values after defaults, for the archive.
nlohmann::ordered_json resolved_search_options(const SearchOptions& opt, const RunOptions& run) {
  return {{"top_k", opt.top_k},
          {"prune", to_string(opt.prune)},
          {"delta", opt.delta},
          {"eta", opt.eta},
          {"uniform", opt.uniform},
          {"bound", opt.bound},
          {"max_pp", opt.space.max_pp},
          {"allow_cross_node_tp", opt.space.constraints.allow_cross_node_tp},
          {"round", run.round},
          {"parts_per_round", run.parts_per_round},
          {"threads", run.threads}};
}

int cmd_plan(int argc, const char* const* argv, std::ostream& out, std::ostream& err, Comm& comm) {
  cxxopts::Options o("hapmoe plan",
                     "Searches the 6-D space (PP, TP, CP, EP, TPE, DP) with non-uniform layer "
                     "partitions, per-stage device types and recomputation for the fastest plan "
                     "that fits in memory (HS-DP with three prunings, docs/search.md).");
  add_workload_options(o);
  add_search_options(o);
  o.add_options("Search")("bruteforce", "enumerate every plan without DP (small instances only)")(
      "baseline",
      "run a baseline instead of hapmoe's search: uniform, mi, metis-style or homogeneous-only "
      "(docs/baselines.md); the output is the same as the search's",
      cxxopts::value<std::string>())("plan-json",
                                     "write the plans and search statistics as JSON to this file",
                                     cxxopts::value<std::string>())(
      "progress-every",
      "while the search runs, a progress line on stderr every this many seconds (default 60; "
      "0: none)",
      cxxopts::value<std::string>());
  add_launcher_options(o);
  add_out_option(o);
  add_limit_options(o);
  const Started started;
  const auto parsed = parse(o, argc, argv, out);
  if (!parsed) return kExitOk;
  const auto& r = *parsed;
  // Inputs are read on every rank; a failure on some ranks only (a file
  // missing on one node) is agreed on before the search starts, so no
  // rank waits for one that gave up.
  Inputs in;
  SearchOptions opt;
  RunOptions run;
  Baseline baseline = Baseline::kNone;
  double every = 60.0;  // --progress-every
  read_on_every_rank(comm, [&] {
    const FaultHook hook = fault_hook();
    if (hook.input_rank == comm.rank()) {
      throw InputError("HAPMOE_TEST_FAIL", "injected input failure (test hook)");
    }
    if (hook.search_rank == comm.rank()) run.fail_round = 0;
    if (comm.rank() == 0 && r.count("out")) check_archive_path(r["out"].as<std::string>());
    in = read_inputs(r);
    read_search_options(r, in, comm, opt, run);
    run.limits = read_limit_options(r, comm, started.at);
    if (r.count("progress-every")) {
      every =
          parse_number_text(r["progress-every"].as<std::string>(), 0.0, 1e7, "--progress-every");
    }
    if (r.count("baseline")) {
      baseline = parse_baseline(r["baseline"].as<std::string>(), "--baseline");
      if (r.count("bruteforce")) throw InputError("--baseline", "does not go with --bruteforce");
    }
  });
  const bool brute = r.count("bruteforce") > 0;
  SearchProgress progress;
  run.progress = &progress;
  const BaselineRun ran = [&] {
    const Heartbeat beat(comm.rank() == 0 ? every : 0.0, [&](double s) {
      err << "hapmoe plan: " << duration_text(s) << ": " << progress_text(progress) << "\n";
      err.flush();
    });
    return brute ? BaselineRun{run_search(in.workload, in.cluster, opt, true, comm, run), ""}
                 : run_baseline(baseline, in.workload, in.cluster, opt, comm, run);
  }();
  const SearchResult& result = ran.result;
  ProfileSources sources;
  const ProfileTables tables =
      tables_for(in.workload, in.cluster, result.configs, in.profile.get(), &sources);
  const CostModel model(in.workload, in.cluster, tables);
  std::vector<PlanReport> reports;
  for (const PlanCandidate& c : result.top) reports.push_back(model.evaluate(c.plan));
  const SearchStats& s = result.stats;
  print_megatron_notes(out, in.megatron.get());
  PlanSources plan_src;
  if (!reports.empty()) {
    print_plan_report(out, reports.front(), in.workload, in.cluster);
    if (in.profile) {
      plan_src = plan_sources(reports.front(), in.workload, in.cluster, tables, sources);
      print_plan_sources(out, plan_src, in.profile_path);
    }
    out << "\ntop " << reports.size() << " (best plan of each configuration)\n";
    out << "  rank  latency      PP  TP  CP  EP TPE  DP  stages (device x layers, recompute)\n";
    for (std::size_t k = 0; k < reports.size(); ++k) {
      const PlanReport& p = reports[k];
      const ParallelConfig& pi = p.plan.parallel;
      const std::string stages = stages_text(p.plan, in.cluster);
      char line[160];
      std::snprintf(line, sizeof line, "  %4zu  %-11s %3d %3d %3d %3d %3d %3d  ", k + 1,
                    format_seconds(p.latency_s).c_str(), pi.pp, pi.tp, pi.cp, pi.ep, pi.tpe, pi.dp);
      out << line << stages << "\n";
    }
    out << "\n";
  }
  if (baseline != Baseline::kNone) {
    out << "baseline " << to_string(baseline) << ": " << ran.rule << "\n";
  }
  out << "search ("
      << (brute ? "brute force, prunings ignored" : "HS-DP, prune " + to_string(opt.prune))
      << (opt.uniform ? ", uniform layers" : "") << ")\n";
  out << "  configurations " << s.configs << ", evaluated " << s.configs_evaluated << "\n";
  out << "  DP states " << s.states << ", transitions " << s.transitions << "\n";
  out << "  pruned: load balance " << s.pruned_load_balance << ", memory " << s.pruned_memory
      << ", hetero comm " << s.pruned_hetero_comm << "\n";
  if (opt.bound && !brute) {
    out << "  branch and bound: " << s.configs_bounded << " configurations skipped, "
        << s.pruned_bound << " partial plans dropped\n";
  }
  out << "  feasible plans " << s.feasible << "\n";
  print_stopped(out, result);
  out << "  wall time " << format_seconds(s.seconds) << " on " << comm.size()
      << (comm.size() == 1 ? " rank" : " ranks") << " x " << run.threads
      << (run.threads == 1 ? " thread" : " threads");
  if (comm.nodes() > 1) out << " (" << comm.nodes() << " nodes)";
  out << "\n";
  if (r.count("plan-json") && comm.rank() == 0) {
    nlohmann::ordered_json doc;
    doc["plans"] = nlohmann::ordered_json::array();
    for (const PlanReport& p : reports) doc["plans"].push_back(plan_report_json(p, in.cluster));
    if (baseline != Baseline::kNone) {
      doc["baseline"] = {{"name", to_string(baseline)}, {"rule", ran.rule}};
    }
    if (in.profile) doc["profile"] = plan_sources_json(plan_src, in.profile_path);
    doc["search"] = {{"configs", s.configs},
                     {"configs_evaluated", s.configs_evaluated},
                     {"states", s.states},
                     {"transitions", s.transitions},
                     {"pruned",
                      {{"load_balance", s.pruned_load_balance},
                       {"memory", s.pruned_memory},
                       {"hetero_comm", s.pruned_hetero_comm},
                       {"bound", s.pruned_bound},
                       {"configs_bound", s.configs_bounded}}},
                     {"feasible", s.feasible},
                     {"proven_optimal", result.stopped == StopReason::kNone},
                     {"stopped_by", result.stopped == StopReason::kNone
                                        ? nlohmann::ordered_json(nullptr)
                                        : nlohmann::ordered_json(to_string(result.stopped))},
                     {"configs_not_searched", result.not_searched},
                     {"seconds", s.seconds}};
    // How the run was spread: differs with ranks and threads, unlike
    // everything above (docs/parallel.md).
    nlohmann::ordered_json per_rank = nlohmann::ordered_json::array();
    for (const RankFigures& f : result.ranks) {
      per_rank.push_back({{"rank", f.rank},
                          {"threads", f.threads},
                          {"configs", f.configs},
                          {"parts", f.parts},
                          {"transitions", f.transitions},
                          {"work_estimate", f.estimate},
                          {"busy_seconds", f.busy_s},
                          {"idle_seconds", f.idle_s}});
    }
    doc["run"] = {{"ranks", comm.size()},
                  {"nodes", comm.nodes()},
                  {"threads", run.threads},
                  {"rounds", result.rounds},
                  {"per_rank", per_rank}};
    write_file_atomic(r["plan-json"].as<std::string>(), doc.dump(2) + "\n");
  }
  if (r.count("out")) {
    ArchiveInputs a = given_inputs(r, in);
    a.options_resolved = resolved_search_options(opt, run);
    a.options_resolved["bruteforce"] = brute;
    a.options_resolved["baseline"] = to_string(baseline);
    a.options_resolved["baseline_rule"] = ran.rule;
    if (in.profile) a.options_resolved["profile"] = plan_sources_json(plan_src, in.profile_path);
    a.tables = &tables;
    const Provenance p = provenance(started, argc, argv, comm.size(), run.threads);
    write_out(comm, r["out"].as<std::string>(), [&](h5::File& f) {
      write_header(f, "plan");
      write_provenance(f, p);
      write_run(f, a, reports, &result);
    });
  }
  write_launcher_if_requested(r, out, in.megatron.get(),
                              reports.empty() ? nullptr : &reports.front(), model,
                              comm.rank() == 0);
  if (result.stopped != StopReason::kNone) {
    err << "hapmoe plan: the " << to_string(result.stopped) << " stopped the search: "
        << (reports.empty() ? "no plan found yet"
                            : "the plans are the best found, not proven optimal")
        << " (exit code " << kExitLimit << ")\n";
    return kExitLimit;
  }
  if (reports.empty()) {
    err << "hapmoe plan: no plan fits in memory";
    if (result.closest.known()) {
      const Shortfall& c = result.closest;
      const ParallelConfig& pi = c.parallel;
      err << "; the closest: stage " << c.stage << " on "
          << in.cluster.pools[static_cast<std::size_t>(c.device_type)].device.name << " with "
          << c.layers << " layers under PP=" << pi.pp << " TP=" << pi.tp << " CP=" << pi.cp
          << " EP=" << pi.ep << " TPE=" << pi.tpe << " DP=" << pi.dp << " is short by "
          << format_bytes(c.bytes) << " even with full recomputation";
    } else if (result.configs.empty()) {
      err << "; no parallel configuration is valid for this model, batch and cluster";
    }
    err << "\n";
    return kExitNoFit;
  }
  return kExitOk;
}

int cmd_compare(int argc, const char* const* argv, std::ostream& out, std::ostream& err,
                Comm& comm) {
  cxxopts::Options o("hapmoe compare",
                     "Runs hapmoe's search and every baseline (uniform, mi, metis-style, "
                     "homogeneous-only; docs/baselines.md) on one model and cluster and prints "
                     "latency, tokens/s, TFLOP/s per device and MFU, normalised to MI.");
  add_workload_options(o);
  add_search_options(o);
  o.add_options("Output")("plan-json",
                          "write every baseline's plans and search statistics as JSON to this file",
                          cxxopts::value<std::string>());
  add_out_option(o);
  const Started started;
  const auto parsed = parse(o, argc, argv, out);
  if (!parsed) return kExitOk;
  const auto& r = *parsed;
  Inputs in;
  SearchOptions opt;
  RunOptions run;
  read_on_every_rank(comm, [&] {
    if (comm.rank() == 0 && r.count("out")) check_archive_path(r["out"].as<std::string>());
    in = read_inputs(r);
    read_search_options(r, in, comm, opt, run);
  });
  struct Row {
    Baseline baseline;
    BaselineRun ran;
    std::vector<PlanReport> reports;
    ProfileTables tables;
  };
  std::vector<Row> rows;
  for (const Baseline b : all_baselines()) {
    Row row{b, run_baseline(b, in.workload, in.cluster, opt, comm, run), {}, {}};
    row.tables = tables_for(in.workload, in.cluster, row.ran.result.configs, in.profile.get());
    const CostModel model(in.workload, in.cluster, row.tables);
    for (const PlanCandidate& c : row.ran.result.top) row.reports.push_back(model.evaluate(c.plan));
    rows.push_back(std::move(row));
  }
  const auto mi = std::find_if(rows.begin(), rows.end(),
                               [](const Row& x) { return x.baseline == Baseline::kMi; });
  const PlanReport* norm = mi->reports.empty() ? nullptr : &mi->reports.front();
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
    if (row.reports.empty()) {
      std::snprintf(line, sizeof line, "  %-16s  %-10s\n", to_string(row.baseline).c_str(),
                    "no plan fits");
      out << line;
      continue;
    }
    const PlanReport& p = row.reports.front();
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
  if (r.count("plan-json") && comm.rank() == 0) {
    nlohmann::ordered_json doc;
    doc["normalised_to"] = norm ? "mi" : "";
    doc["baselines"] = nlohmann::ordered_json::array();
    for (const Row& row : rows) {
      nlohmann::ordered_json b;
      b["name"] = to_string(row.baseline);
      b["rule"] = row.ran.rule;
      b["plans"] = nlohmann::ordered_json::array();
      for (const PlanReport& p : row.reports) b["plans"].push_back(plan_report_json(p, in.cluster));
      const SearchStats& st = row.ran.result.stats;
      b["search"] = {{"configs", st.configs},   {"configs_evaluated", st.configs_evaluated},
                     {"states", st.states},     {"transitions", st.transitions},
                     {"feasible", st.feasible}, {"seconds", st.seconds}};
      doc["baselines"].push_back(b);
    }
    write_file_atomic(r["plan-json"].as<std::string>(), doc.dump(2) + "\n");
  }
  if (r.count("out")) {
    const Provenance p = provenance(started, argc, argv, comm.size(), run.threads);
    write_out(comm, r["out"].as<std::string>(), [&](h5::File& f) {
      write_header(f, "compare");
      write_provenance(f, p);
      const h5::Group cmp = f.create_group("compare");
      cmp.attrs().set("normalised_to", norm ? "mi" : "");
      cmp.attrs().set("baselines", static_cast<std::int64_t>(rows.size()));
      const h5::Group cases = f.create_group("cases");
      for (std::size_t k = 0; k < rows.size(); ++k) {
        const Row& row = rows[k];
        std::string name = std::to_string(k);
        name.insert(0, name.size() < 4 ? 4 - name.size() : 0, '0');  // as a sweep's cases
        const h5::Group g = cases.create_group(name);
        g.attrs().set("name", to_string(row.baseline));
        g.attrs().set("index", static_cast<std::int64_t>(k));
        g.attrs().set("case", nlohmann::ordered_json{{"model", r["model"].as<std::string>()},
                                                     {"cluster", r["cluster"].as<std::string>()},
                                                     {"baseline", to_string(row.baseline)}}
                                  .dump());
        g.attrs().set("rule", row.ran.rule);
        g.attrs().set("status", row.reports.empty() ? "no_fit" : "ok");
        write_provenance(g, p);
        ArchiveInputs a = given_inputs(r, in);
        a.options_resolved = resolved_search_options(opt, run);
        a.options_resolved["baseline"] = to_string(row.baseline);
        a.options_resolved["baseline_rule"] = row.ran.rule;
        a.tables = &row.tables;
        write_run(g, a, row.reports, &row.ran.result);
      }
    });
  }
  if (rows.front().reports.empty()) {
    err << "hapmoe compare: no plan fits in memory\n";
    return kExitNoFit;
  }
  return kExitOk;
}

int cmd_catalog(int argc, const char* const* argv, std::ostream& out) {
  cxxopts::Options o("hapmoe catalog", "Lists the built-in devices, model presets and clusters.");
  if (!parse(o, argc, argv, out)) return kExitOk;
  print_catalog(out);
  return kExitOk;
}

int cmd_sweep(int argc, const char* const* argv, std::ostream& out, std::ostream& err, Comm& comm) {
  cxxopts::Options o("hapmoe sweep",
                     "Runs every case of a sweep file (a list of cases and/or Cartesian products "
                     "of models, clusters and options) into one HDF5 archive, committing each "
                     "case as it finishes. SIGTERM or SIGUSR1 finishes the case in flight and "
                     "exits with code 4; --resume then runs only what is missing "
                     "(docs/archive.md).");
  o.add_options()("sweep", "the sweep file", cxxopts::value<std::string>())(
      "out", "the archive (required)", cxxopts::value<std::string>())(
      "resume", "finish the sweep in --out: skip the cases it holds (the sweep must be the same)")(
      "threads",
      "OpenMP threads per rank (default: OMP_NUM_THREADS, else the node's cores over its ranks)",
      cxxopts::value<std::string>())(
      "checkpoint-every",
      "commit finished cases at most every this many seconds (default 0: after every case)",
      cxxopts::value<std::string>())(
      "progress-every",
      "while a case runs, a progress line every this many seconds (default 60; 0: none)",
      cxxopts::value<std::string>())(
      "spread",
      "over MPI ranks: configs (default: each case over all ranks) or cases (whole "
      "cases to ranks, for many small cases)",
      cxxopts::value<std::string>());
  add_limit_options(o);
  o.add_options("Profile (docs/profile.md)")(
      "profile", "measured tables (HDF5, from `hapmoe profile`) for every case",
      cxxopts::value<std::string>());
  o.parse_positional({"sweep"});
  o.positional_help("SWEEP.json");
  const Started started;
  const auto parsed = parse(o, argc, argv, out);
  if (!parsed) return kExitOk;
  const auto& r = *parsed;
  SweepRunOptions s;
  s.limits = read_limit_options(r, comm, started.at);
  if (r.count("profile")) s.profile_path = r["profile"].as<std::string>();
  s.sweep_path = required(r, "sweep");
  s.out = required(r, "out");
  s.resume = r.count("resume") > 0;
  s.threads =
      r.count("threads")
          ? static_cast<int>(parse_int_text(r["threads"].as<std::string>(), 1, 4096, "--threads"))
          : default_threads(comm);
  if (r.count("checkpoint-every")) {
    s.checkpoint_s =
        parse_number_text(r["checkpoint-every"].as<std::string>(), 0.0, 1e7, "--checkpoint-every");
  }
  if (r.count("progress-every")) {
    s.progress_s =
        parse_number_text(r["progress-every"].as<std::string>(), 0.0, 1e7, "--progress-every");
  }
  if (r.count("spread")) {
    const std::string spread = to_lower(r["spread"].as<std::string>());
    if (spread != "configs" && spread != "cases") {
      throw InputError("--spread", "'" + spread + "': expected configs or cases");
    }
    s.spread_cases = spread == "cases";
  }
  s.tty = &err == &std::cerr && ::isatty(STDERR_FILENO) == 1;
  s.command_line = "hapmoe " + command_line(argc, argv);
  return run_sweep(s, out, err, comm);
}

int cmd_show(int argc, const char* const* argv, std::ostream& out) {
  cxxopts::Options o("hapmoe show",
                     "Prints the summary of an archive written with --out (best plan, top K, "
                     "search statistics; for a sweep, one line per case) without re-running "
                     "anything. docs/archive.md describes the file.");
  o.add_options()("case", "a sweep archive: print this case (its name or group) in full",
                  cxxopts::value<std::string>())("file", "the archive",
                                                 cxxopts::value<std::string>());
  o.parse_positional({"file"});
  o.positional_help("FILE.h5");
  const auto parsed = parse(o, argc, argv, out);
  if (!parsed) return kExitOk;
  const auto& r = *parsed;
  print_archive_summary(out, required(r, "file"),
                        r.count("case") ? r["case"].as<std::string>() : "");
  return kExitOk;
}

}  // namespace

std::optional<cxxopts::ParseResult> parse(cxxopts::Options& o, int argc, const char* const* argv,
                                          std::ostream& out) {
  o.add_options()("h,help", "show this help");
  o.set_width(100);
  auto result = o.parse(argc, argv);
  if (result.count("help")) {
    out << o.help();
    return std::nullopt;
  }
  if (!result.unmatched().empty()) {
    throw InputError(result.unmatched().front(), "unexpected argument");
  }
  return result;
}

std::string required(const cxxopts::ParseResult& r, const char* name) {
  if (r.count(name) == 0) throw InputError(std::string("--") + name, "is required");
  return r[name].as<std::string>();
}

int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  SerialComm serial;
  return run_cli(argc, argv, out, err, serial);
}

int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err, Comm& comm) {
  if (argc < 2) {
    err << kUsage;
    return kExitInput;
  }
  const std::string command = argv[1];
  try {
    // Each command parses argv from its own name on.
    if (command == "plan") return cmd_plan(argc - 1, argv + 1, out, err, comm);
    if (command == "evaluate") return cmd_evaluate(argc - 1, argv + 1, out, err, comm);
    if (command == "catalog") return cmd_catalog(argc - 1, argv + 1, out);
    if (command == "compare") return cmd_compare(argc - 1, argv + 1, out, err, comm);
    if (command == "show") return cmd_show(argc - 1, argv + 1, out);
    if (command == "sweep") return cmd_sweep(argc - 1, argv + 1, out, err, comm);
    if (command == "profile") return run_profile_command(argc - 1, argv + 1, out, err, comm);
    if (command == "--help" || command == "-h" || command == "help") {
      out << kUsage;
      return kExitOk;
    }
    if (command == "--version") {
      out << "hapmoe " << kVersion << " (" << kGitRevision << ")\n";
      return kExitOk;
    }
    err << "hapmoe: unknown command '" << command << "'\n" << kUsage;
    return kExitInput;
  } catch (const InputError& e) {
    err << "hapmoe " << command << ": error: " << e.what() << "\n";
    return kExitInput;
  } catch (const cxxopts::exceptions::exception& e) {
    err << "hapmoe " << command << ": error: " << e.what() << " (see `hapmoe " << command
        << " --help`)\n";
    return kExitInput;
  } catch (const std::bad_alloc&) {
    err << "hapmoe " << command << ": error: out of memory\n";
    return kExitInternal;
  } catch (const std::exception& e) {
    err << "hapmoe " << command << ": internal error: " << e.what() << "\n";
    return kExitInternal;
  }
}

}  // namespace hapmoe
