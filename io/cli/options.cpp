// cxxopts.hpp undefines it once read: checked before it is included.
#ifndef CXXOPTS_NO_REGEX
#error "CXXOPTS_NO_REGEX must be defined for every target (CMakeLists.txt)"
#endif

#include "io/cli/options.h"

#include <cctype>
#include <cstdint>
#include <string>

#include "costmodel/errors.h"
#include "io/cli/megatron_cli.h"
#include "io/inputs/cluster_io.h"
#include "io/inputs/json_strict.h"
#include "io/inputs/model_io.h"
#include "io/profile/profile_h5.h"
#include "partition/constraints.h"

namespace hapmoe {

namespace {

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
    throw InputError(what, "'" + echo_value(text) +
                               "': expected a whole number of bytes from 1 to 1P, optionally "
                               "with a suffix K, M, G or T (powers of 1024)");
  }
}

}  // namespace

std::optional<cxxopts::ParseResult> parse(cxxopts::Options& o, int argc, const char* const* argv,
                                          std::ostream& out) {
  // cxxopts' std::regex parser overflowed the stack on an option of some
  // 40,000 characters ("--xxx...", "--name=xxx..."); the hand-written one
  // built here (CXXOPTS_NO_REGEX, CMakeLists.txt) does not, but no option
  // name is that long: a long value goes in its own argument.
  constexpr std::size_t kMaxOptionArgument = 4096;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.size() > kMaxOptionArgument && a.front() == '-') {
      throw InputError("argument " + std::to_string(i) + " \"" + echo_value(a, 40) + "\"",
                       "an option of " + std::to_string(a.size()) + " characters is longer than " +
                           std::to_string(kMaxOptionArgument) +
                           " (give a long value as its own argument: --name VALUE)");
    }
  }
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
      "precision",
      "bf16 or fp16 mixed precision, or fp8: bf16 with the transformer layers' linear layers "
      "in FP8 (Megatron's --bf16 --fp8-format; devices without FP8 refuse it); plan also takes "
      "auto: search bf16 and, when every device type has FP8, fp8",
      cxxopts::value<std::string>())(
      "fp8-recipe",
      "FP8 scaling recipe with --precision fp8: delayed (default, as Megatron), tensorwise, "
      "blockwise or mxfp8",
      cxxopts::value<std::string>())(
      "dispatcher",
      "MoE token dispatcher: alltoall, allgather, flex (DeepEP) or auto (the cheaper of alltoall "
      "and allgather per plan)",
      cxxopts::value<std::string>())("imbalance",
                                     "router imbalance rho = max/mean tokens per expert (>= 1)",
                                     cxxopts::value<std::string>())(
      "gamma", "share gamma in [0,1] of the imbalance on the critical path",
      cxxopts::value<std::string>())("no-distributed-optimizer",
                                     "replicate optimizer states over DP (no ZeRO-1)")(
      "overlap-grad-reduce",
      "overlap the gradient reduce-scatter with the last micro-batch's backward, as "
      "Megatron's flag of that name (default off, as in Megatron)")(
      "overlap-param-gather",
      "overlap the parameter all-gather with the next forward (needs the distributed "
      "optimizer; default off)")(
      "tp-comm-overlap",
      "overlap TP collectives with their GEMMs (Transformer Engine; default off)")(
      "grad-reduce-in-bf16",
      "keep and reduce gradients in bf16 (2 B/param) instead of fp32, as Megatron's flag of "
      "that name")("optimizer-offload-fraction",
                   "keep and step this share (0..1) of each device's optimizer state on the host, "
                   "as Megatron's --optimizer-cpu-offload --optimizer-offload-fraction (needs the "
                   "distributed optimizer; default 0, off)",
                   cxxopts::value<std::string>())(
      "fsdp",
      "Megatron-FSDP sharding beyond the distributed optimizer: optim_grads (ZeRO-2: gradients "
      "sharded too) or optim_grads_params (ZeRO-3: parameters too, gathered per layer); default "
      "off",
      cxxopts::value<std::string>())(
      "activation-offload-layers",
      "offload the activations of this many layers of each stage to host memory, as "
      "Megatron-Core's cpu_offloading (needs PP 1 and no recomputation; default 0, off)",
      cxxopts::value<std::string>())(
      "overlap-moe-expert-parallel-comm",
      "overlap the MoE dispatch and combine of one micro-batch with another's compute "
      "(Megatron's 1F1B all-to-all overlap; default off)")(
      "delay-wgrad-compute",
      "with --overlap-moe-expert-parallel-comm: run the experts' weight gradients later, beside "
      "the backward dispatch, as Megatron's flag of that name (default off)");
  o.add_options("Profile (docs/profile.md)")(
      "profile",
      "measured tables (HDF5, from `hapmoe profile`): they replace the catalog's entry by entry, "
      "and the output says which values were measured",
      cxxopts::value<std::string>());
  add_megatron_options(o);
}

Inputs read_inputs(const cxxopts::ParseResult& r) {
  Inputs in;
  in.megatron = read_megatron_input(r);
  in.workload = in.megatron ? megatron_input_workload(r, *in.megatron)
                            : load_workload(required(r, "model"), &in.model_notes);
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
  if (r.count("precision")) {
    const std::string p = r["precision"].as<std::string>();
    in.precision_auto = p == "auto";
    if (!in.precision_auto) ov.precision = parse_precision(p, "--precision");
  }
  if (r.count("fp8-recipe")) {
    ov.fp8_recipe = parse_fp8_recipe(r["fp8-recipe"].as<std::string>(), "--fp8-recipe");
  }
  if (r.count("dispatcher")) {
    ov.dispatcher = parse_dispatcher(r["dispatcher"].as<std::string>(), "--dispatcher");
  }
  ov.imbalance = num_opt("imbalance", 1.0, 1000.0);
  ov.gamma = num_opt("gamma", 0.0, 1.0);
  ov.no_distributed_optimizer = r.count("no-distributed-optimizer") > 0;
  ov.overlap.grad_reduce = r.count("overlap-grad-reduce") > 0;
  ov.grad_reduce_in_bf16 = r.count("grad-reduce-in-bf16") > 0;
  ov.optimizer_offload_fraction = num_opt("optimizer-offload-fraction", 0.0, 1.0);
  if (r.count("fsdp")) ov.fsdp = parse_fsdp(r["fsdp"].as<std::string>(), "--fsdp");
  ov.activation_offload_layers = int_opt("activation-offload-layers", 0, 100000);
  ov.overlap.param_gather = r.count("overlap-param-gather") > 0;
  ov.overlap.tp_comm = r.count("tp-comm-overlap") > 0;
  ov.overlap.moe_ep_comm = r.count("overlap-moe-expert-parallel-comm") > 0;
  ov.overlap.delay_wgrad = r.count("delay-wgrad-compute") > 0;
  if (r.count("profile")) {
    in.profile_path = r["profile"].as<std::string>();
    in.profile = std::make_shared<const MeasuredProfile>(read_profile(in.profile_path));
    // rho measured for this model, unless --imbalance says otherwise.
    const double rho = profile_imbalance(*in.profile, in.workload.model.name);
    if (!ov.imbalance && is_set(rho)) ov.imbalance = rho;
  }
  apply_overrides(ov, in.workload);
  if (const std::string e = check_precision(in.workload, in.cluster); !e.empty()) {
    throw InputError(r.count("precision") ? "--precision" : "--cluster", e);
  }
  if (const std::string e = check_offload(in.workload, in.cluster); !e.empty()) {
    throw InputError("--cluster", e);
  }
  in.constraints.allow_cross_node_tp = r.count("allow-cross-node-tp") > 0;
  return in;
}

void print_model_notes(std::ostream& out, const std::string& spec,
                       const std::vector<std::string>& notes) {
  for (const std::string& n : notes) out << "note: " << spec << ": " << n << "\n";
  if (!notes.empty()) out << "\n";
}

void print_input_notes(std::ostream& out, const Inputs& in) {
  if (in.megatron) {
    print_megatron_notes(out, in.megatron.get());
  } else if (!in.model_notes.empty()) {
    // Only Hugging Face files give notes, and their model's name is the
    // path --model gave.
    print_model_notes(out, in.workload.model.name, in.model_notes);
  }
}

// --out: the HDF5 archive of the run (docs/archive.md).
void add_out_option(cxxopts::Options& o) {
  o.add_options("Archive")("out",
                           "write an HDF5 archive of the run (inputs, plans, statistics, "
                           "provenance; docs/archive.md) to this file",
                           cxxopts::value<std::string>());
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
      "stage mixes) that several workers search apart; like --round it changes the statistics, "
      "not the plans. Without the bound and without stage mixes (--no-bound, --prune without "
      "lb) such a configuration is instead shared level by level by every thread of every "
      "rank, which changes neither (default 0: never)",
      cxxopts::value<std::string>())(
      "split-above",
      "split a search over the ranks when it has more than N configuration-layers "
      "(configurations x layers); a smaller one runs whole on rank 0 and is sent to the "
      "others, as the collectives of a split would cost more than its work (default 65536; 0: "
      "split every search); the plans and "
      "statistics never depend on it",
      cxxopts::value<std::string>());
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
  run.threads = read_threads(r, comm);
  if (r.count("round")) {
    run.round =
        static_cast<int>(parse_int_text(r["round"].as<std::string>(), 1, 1 << 20, "--round"));
  }
  if (r.count("parts-per-round")) {
    run.parts_per_round = static_cast<int>(
        parse_int_text(r["parts-per-round"].as<std::string>(), 0, 1 << 20, "--parts-per-round"));
  }
  if (r.count("split-above")) {
    run.split_above =
        parse_number_text(r["split-above"].as<std::string>(), 0.0, 1e18, "--split-above");
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
          {"count_only", opt.count_only},
          {"max_pp", opt.space.max_pp},
          {"allow_cross_node_tp", opt.space.constraints.allow_cross_node_tp},
          {"launcher_placement", opt.space.constraints.launcher_placement},
          {"round", run.round},
          {"parts_per_round", run.parts_per_round},
          {"split_above", run.split_above},
          {"threads", run.threads}};
}

void add_job_space_options(cxxopts::Options& o) {
  o.add_options("Job-wide knobs (docs/search.md, \"Job-wide knobs\")")(
      "space",
      "also search these knobs of the whole job: a comma list of micro-batch, vpp, sharding "
      "(ZeRO-1, ZeRO-2, FSDP), offload (optimizer CPU offload: off and the multiples of 0.05, "
      "each plan at the least share that fits it), dispatcher (alltoall, allgather, flex where "
      "DeepEP runs), "
      "fp8; all; or none (default: the values given or the model's)",
      cxxopts::value<std::string>())(
      "max-micro-batch", "largest micro-batch the micro-batch dimension tries (default 8)",
      cxxopts::value<std::string>())(
      "max-vpp", "most virtual stages per pipeline rank the vpp dimension tries (default 4)",
      cxxopts::value<std::string>())(
      "recompute-scope",
      "stage: each stage's least recomputation that fits (the paper's); job: one Megatron-LM "
      "recompute setting for the whole job (none, selective, full, full block K), as stock "
      "Megatron runs it (default: job with --launcher, else stage)",
      cxxopts::value<std::string>())(
      "overlaps",
      "with --space: recipe gives every variant Megatron's recipes' overlaps, "
      "--overlap-grad-reduce and, with the distributed optimizer, --overlap-param-gather, on "
      "top of the overlap flags given; given: only the flags given (default: recipe)",
      cxxopts::value<std::string>());
}

JobSpace read_job_space(const cxxopts::ParseResult& r, const Inputs& in) {
  JobSpace s;
  if (r.count("space")) s = parse_job_space(r["space"].as<std::string>(), "--space");
  if (in.precision_auto) s.dims |= job_dim_bit(JobDim::kPrecision);
  // The search chooses the knobs users tune, each variant with the
  // overlaps its recipe would run (docs/search.md).
  if (s.dims != 0) s.overlaps = JobOverlaps::kRecipe;
  if (r.count("overlaps")) {
    if (s.dims == 0) {
      throw InputError("--overlaps",
                       "goes with --space (the job-wide knobs); a plan of fixed "
                       "knobs takes the overlap flags themselves");
    }
    s.overlaps = parse_job_overlaps(r["overlaps"].as<std::string>(), "--overlaps");
  }
  if (r.count("max-micro-batch")) {
    s.max_micro_batch = static_cast<int>(
        parse_int_text(r["max-micro-batch"].as<std::string>(), 1, 1 << 20, "--max-micro-batch"));
  }
  if (r.count("max-vpp")) {
    s.max_vpp =
        static_cast<int>(parse_int_text(r["max-vpp"].as<std::string>(), 1, 1024, "--max-vpp"));
  }
  // Stock Megatron-LM takes one recompute setting per job: a launcher runs
  // what was predicted only with the job-wide search.
  s.job_recompute = r.count("launcher") > 0;
  if (r.count("recompute-scope")) {
    const std::string scope = r["recompute-scope"].as<std::string>();
    if (scope != "stage" && scope != "job") {
      throw InputError("--recompute-scope", "expected stage or job, got \"" + scope + "\"");
    }
    s.job_recompute = scope == "job";
  }
  return s;
}

void refuse_precision_auto(const Inputs& in, const std::string& command) {
  if (in.precision_auto) {
    throw InputError("--precision",
                     "auto is for plan's search; " + command + " takes bf16, fp16 or fp8");
  }
}

int read_threads(const cxxopts::ParseResult& r, const Comm& comm) {
  return r.count("threads") ? static_cast<int>(parse_int_text(r["threads"].as<std::string>(), 1,
                                                              4096, "--threads"))
                            : default_threads(comm);
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

}  // namespace hapmoe
