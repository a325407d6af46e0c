// `hapmoe plan`: read the inputs on every rank, search (or run a
// baseline), score the plans, print them, write what was asked for.
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cxxopts.hpp>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "costmodel/errors.h"
#include "engine/baselines.h"
#include "engine/bytes.h"
#include "engine/driver.h"
#include "engine/job_space.h"
#include "io/archive/resume.h"
#include "io/cli/cli.h"
#include "io/cli/commands.h"
#include "io/cli/fault_hooks.h"
#include "io/cli/megatron_cli.h"
#include "io/cli/options.h"
#include "io/cli/plan_sources.h"
#include "io/cli/progress.h"
#include "io/cli/steps.h"
#include "io/cli/stop_signals.h"
#include "io/inputs/cluster_io.h"
#include "io/inputs/json_strict.h"
#include "io/inputs/model_io.h"
#include "io/inputs/plan_io.h"
#include "io/megatron/megatron_launcher.h"
#include "io/report/report.h"

namespace hapmoe {

namespace {

cxxopts::Options plan_options() {
  cxxopts::Options o("hapmoe plan",
                     "Searches the 6-D space (PP, TP, CP, EP, TPE, DP) with non-uniform layer "
                     "partitions, per-stage device types and recomputation for the fastest plan "
                     "that fits in memory (HS-DP with three prunings, docs/search.md). With "
                     "--out (hapmoe's own search: not with --baseline, --bruteforce or the "
                     "job-wide knobs), the search is committed to the archive as it goes (every "
                     "--checkpoint-every seconds); SIGTERM or SIGUSR1 finishes the units in "
                     "flight, commits them and exits with code 4 (a second signal exits at "
                     "once, the last commit kept), and --resume continues from there with the "
                     "result of an uninterrupted run (docs/archive.md, \"Checkpoints of one "
                     "search\"). Without --out, SIGTERM ends the process as usual.");
  add_workload_options(o);
  add_search_options(o);
  o.add_options("Search")("bruteforce", "enumerate every plan without DP (small instances only)")(
      "count-only",
      "find no plan: count the DP states, transitions and pruning cuts of the plain DP (as "
      "with --no-bound) without costing any stage (docs/search.md, \"Counting the plain DP\"); "
      "exact; seconds to minutes where running the plain DP would take months")(
      "baseline",
      "run a baseline instead of hapmoe's search: uniform, mi, hetermoe-style, metis-style or "
      "homogeneous-only "
      "(docs/baselines.md); the output is the same as the search's",
      cxxopts::value<std::string>())("plan-json",
                                     "write the plans and search statistics as JSON to this file",
                                     cxxopts::value<std::string>())(
      "progress-every",
      "while the search runs, a progress line on stderr every this many seconds (default 60; "
      "0: none)",
      cxxopts::value<std::string>());
  add_job_space_options(o);
  add_launcher_options(o);
  add_out_option(o);
  o.add_options("Archive")(
      "checkpoint-every",
      "with --out: commit the configurations searched so far to --out at most every this many "
      "seconds while the search runs (default 60; 0: after every round, or without the bound "
      "every 0.1 s of work); SIGTERM or "
      "SIGUSR1 then finishes the units in flight, commits them and exits with code 4 "
      "(docs/archive.md, \"Checkpoints of one search\")",
      cxxopts::value<std::string>())(
      "resume",
      "with --out: continue the search that --out holds (a run stopped by a signal or killed): "
      "the committed configurations are not searched again, and the plans and statistics are "
      "those of an uninterrupted run; the inputs and search options must be the same (exit 2 "
      "otherwise); without the file, start afresh");
  add_limit_options(o);
  return o;
}

// What `plan` was asked to do, read and checked on every rank.
struct PlanRequest {
  Inputs in;
  SearchOptions opt;
  RunOptions run;
  Baseline baseline = Baseline::kNone;
  bool brute = false;
  double every = 60.0;              // --progress-every
  JobSpace job;                     // --space (and --precision auto)
  HostsByDevice hosts;              // --launcher-hosts
  std::optional<ArchiveLock> lock;  // rank 0: --out's, held to the end
  // --launcher: what the pinned Megatron-LM cannot run was left out of the
  // space (a line for the output; "" when nothing was).
  std::string launcher_space;
  // --out with hapmoe's own search: commits while it runs (0: none),
  // --checkpoint-every, and what --resume restored (on every rank).
  bool checkpoints = false;
  double checkpoint_s = 60.0;
  bool resume = false;
  std::optional<SearchResume> resumed;
};

// The resolved options an archive records (inputs@options), for --out and
// for comparing with an archive to resume.
nlohmann::ordered_json archive_options(const PlanRequest& q) {
  nlohmann::ordered_json o = resolved_search_options(q.opt, q.run);
  o["bruteforce"] = q.brute;
  o["baseline"] = to_string(q.baseline);
  o["space"] = to_string(q.job);
  o["recompute_scope"] = q.job.job_recompute ? "job" : "stage";
  if (q.job.dims != 0) o["overlaps"] = to_string(q.job.overlaps);
  return o;
}

// Rank 0: the archive to resume, checked against this run's inputs and
// options; throws InputError naming the first difference. Options that
// change how the run is spread, never its results (threads,
// --split-above), may differ.
SearchResume read_resume_on_root(const cxxopts::ParseResult& r, const PlanRequest& q) {
  const std::string path = r["out"].as<std::string>();
  const std::string where = "--resume: " + path;
  ResumeArchive a = read_resume_archive(path, where);
  if (a.model_json != workload_to_json(q.in.workload)) {
    throw InputError(where,
                     "is the search of another model or training settings (its "
                     "/inputs@model_json differs from --model and the overrides given)");
  }
  if (a.cluster_json != cluster_to_json(q.in.cluster)) {
    throw InputError(where,
                     "is the search of another cluster (its /inputs@cluster_json differs "
                     "from --cluster)");
  }
  const nlohmann::json theirs = nlohmann::json::parse(a.options, nullptr, false);
  const nlohmann::json ours = archive_options(q);
  if (!theirs.is_object()) throw InputError(where, "its /inputs@options is not a JSON object");
  for (const auto& [key, value] : ours.items()) {
    if (key == "threads" || key == "split_above") continue;
    const std::string was = theirs.contains(key) ? theirs[key].dump() : "absent";
    if (was != value.dump()) {
      throw InputError(where, "was searched with another " + key + " (" + was + " there, " +
                                  value.dump() + " here); --resume needs the same options");
    }
  }
  // Measured tables: compared by the path given (their text is not kept).
  const nlohmann::json given = nlohmann::json::parse(a.options_given, nullptr, false);
  const std::string was = given.is_object() && given.contains("profile")
                              ? given["profile"].get<std::string>()
                              : std::string("none");
  const std::string now = r.count("profile") ? r["profile"].as<std::string>() : "none";
  if (was != now) {
    throw InputError(where, "was searched with another --profile (" + was + " there, " + now +
                                " here); --resume needs the same options");
  }
  return std::move(a.resume);
}

std::string encode_resume(const SearchResume& s) {
  Bytes b;
  b.put(s.configs);
  b.put(s.rounds);
  b.put(s.skipped);
  b.put(s.searched.size());
  for (const CommittedConfig& c : s.searched) {
    b.put(c.config);
    b.put(c.outcome);
    b.put(c.rank);
    b.put(c.round);
    b.put(c.parts);
    b.put(c.estimate);
  }
  return b.data();
}

SearchResume decode_resume(const std::string& data) {
  SearchResume s;
  Unbytes b(data);
  b.get(s.configs);
  b.get(s.rounds);
  b.get(s.skipped);
  std::size_t n = 0;
  b.get(n);
  if (n > data.size()) throw std::runtime_error("truncated data from another rank");
  s.searched.resize(n);
  for (CommittedConfig& c : s.searched) {
    b.get(c.config);
    b.get(c.outcome);
    b.get(c.rank);
    b.get(c.round);
    b.get(c.parts);
    b.get(c.estimate);
  }
  return s;
}

// Inputs are read on every rank; a failure on some ranks only (a file
// missing on one node) is agreed on before the search starts, so no rank
// waits for one that gave up.
PlanRequest read_plan_request(const cxxopts::ParseResult& r, Comm& comm, const Started& started) {
  PlanRequest q;
  read_on_every_rank(comm, [&] {
    inject_plan_faults(comm, q.run);
    q.lock = check_outputs_on_root(comm, r);
    q.in = read_inputs(r);
    q.hosts = read_launcher_options(r, q.in.cluster, q.in.megatron.get());
    read_search_options(r, q.in, comm, q.opt, q.run);
    // The launcher must run what is predicted: the plans the pinned
    // Megatron-LM cannot run for this script are not searched, so the
    // launcher never refuses the plan after the search.
    if (r.count("launcher")) {
      q.opt.space.constraints.launcher_placement = true;
      if (const int etp = launcher_expert_tp(q.in.megatron.get(), q.in.workload); etp != 0) {
        q.opt.space.fixed_tpe = etp;
        q.launcher_space =
            "expert tensor parallelism 1 only (--launcher: the script's linear layers have "
            "biases, no --disable-bias-linear, and Megatron-LM then requires it)";
      }
    }
    q.run.limits = read_limit_options(r, comm, started.at);
    if (r.count("progress-every")) {
      q.every =
          parse_number_text(r["progress-every"].as<std::string>(), 0.0, 1e7, "--progress-every");
    }
    if (r.count("baseline")) {
      q.baseline = parse_baseline(r["baseline"].as<std::string>(), "--baseline");
      if (r.count("bruteforce")) throw InputError("--baseline", "does not go with --bruteforce");
    }
  });
  q.brute = r.count("bruteforce") > 0;
  read_on_every_rank(comm, [&] {
    if (r.count("count-only")) {
      // The plain DP is what is counted; its bound would be computed and
      // never used (no plan is found to bound with).
      q.opt.count_only = true;
      q.opt.bound = false;
      for (const char* other : {"bruteforce", "baseline", "space", "recompute-scope", "launcher"}) {
        if (r.count(other)) {
          throw InputError("--count-only", std::string("does not go with --") + other +
                                               " (it counts hapmoe's DP and finds no plan)");
        }
      }
    }
    q.job = read_job_space(r, q.in);
    if (q.opt.count_only && q.job.active()) {
      throw InputError("--count-only",
                       "does not go with the job-wide knobs (--precision auto searches two)");
    }
    if (q.brute || q.baseline != Baseline::kNone) {
      if (q.job.dims != 0 || r.count("recompute-scope") > 0) {
        throw InputError(r.count("space")             ? "--space"
                         : r.count("recompute-scope") ? "--recompute-scope"
                                                      : "--precision",
                         "the job-wide knobs are searched by hapmoe's search only, not with "
                         "--bruteforce or --baseline");
      }
      q.job.job_recompute = false;  // a baseline's launcher says what it collapses
    }
  });
  // Checkpoints and --resume: hapmoe's own search into --out (a baseline,
  // brute force and the job-wide knobs run several searches or none).
  std::string resume_bytes;
  read_on_every_rank(comm, [&] {
    q.resume = r.count("resume") > 0;
    if (r.count("checkpoint-every")) {
      q.checkpoint_s = parse_number_text(r["checkpoint-every"].as<std::string>(), 0.0, 1e7,
                                         "--checkpoint-every");
    }
    const bool own = q.baseline == Baseline::kNone && !q.brute && !q.job.active();
    for (const char* o : {"resume", "checkpoint-every"}) {
      if (r.count(o) == 0) continue;
      if (r.count("out") == 0) throw InputError(std::string("--") + o, "needs --out");
      if (!own) {
        throw InputError(std::string("--") + o,
                         "works for hapmoe's own search only, not with --baseline, --bruteforce "
                         "or the job-wide knobs (--space, --recompute-scope job, --precision "
                         "auto; --launcher implies --recompute-scope job)");
      }
    }
    q.checkpoints = own && r.count("out") > 0;
    // HAPMOE_TEST_CRASH=commit@K / signals@K: a kill or two signals inside
    // the K-th commit (tests/io/archive/plan_resume.sh), as for sweep.
    if (q.checkpoints) install_sweep_crash_hook();
    if (comm.rank() == 0 && q.resume) {
      std::error_code ec;
      if (std::filesystem::exists(r["out"].as<std::string>(), ec)) {
        resume_bytes = "R" + encode_resume(read_resume_on_root(r, q));
      }
    }
  });
  if (q.resume) {
    // Rank 0's reading, on every rank.
    const std::string got = comm.allgather(comm.rank() == 0 ? resume_bytes : "").front();
    if (!got.empty()) q.resumed = decode_resume(got.substr(1));
  }
  return q;
}

// The search, with a progress line on rank 0's `err` every q.every seconds;
// with job-wide knobs, their search in `job_out`. A rank that stops
// answering ends the job after the time limit and a grace (the watchdog
// writes to `alarm`), and the progress lines name it.
BaselineRun search_with_progress(
    PlanRequest& q, Comm& comm, std::ostream& err, std::ostream& alarm,
    std::optional<JobSearchResult>& job_out,
    const std::function<void(const std::function<SearchResult()>&)>& checkpoint) {
  SearchProgress progress;
  q.run.progress = &progress;
  if (checkpoint) q.run.checkpoint = checkpoint;
  if (q.checkpoints) {
    // Segments as long as the commits are apart (--checkpoint-every 0:
    // 0.1 s, each committed), so a commit is due at most one segment late.
    q.run.segment_s = std::max(q.checkpoint_s, 0.1);
    q.run.stop_requested = [asked = std::make_shared<std::atomic<std::int64_t>>(0),
                            at = injected_signal_unit(comm)] {
      // Test hook: SIGTERM to itself before the at-th unit.
      if (at > 0 && asked->fetch_add(1) + 1 == at) std::raise(SIGTERM);
      return g_stop_signal != 0;
    };
    if (q.resumed) q.run.resume = &*q.resumed;
  }
  const WatchdogScope watchdog(comm, search_watchdog(q.run.limits, comm, "plan", alarm));
  const Heartbeat beat(comm.rank() == 0 ? q.every : 0.0, [&](double s) {
    err << "hapmoe plan: " << duration_text(s) << ": " << progress_text(progress)
        << silence_text(comm.waiting()) << "\n";
    err.flush();
  });
  stop_if_injected(comm);
  BaselineRun ran;
  if (q.job.active()) {
    JobSearchResult job = run_job_search(q.in.workload, q.in.cluster, q.opt, q.job, comm, q.run);
    // Everything after (report, plan file, archive, launcher) is the best
    // plan's job: the workload with its knobs.
    q.in.workload = apply(q.in.workload, job.best);
    ran.result = std::move(job.result);
    job_out = std::move(job);
  } else {
    ran = run_one_search(q.baseline, q.brute, q.in.workload, q.in.cluster, q.opt, comm, q.run);
  }
  q.run.progress = nullptr;
  q.run.checkpoint = nullptr;
  q.run.stop_requested = nullptr;
  q.run.resume = nullptr;
  return ran;
}

// The job-wide recompute setting chosen, and what per-stage recompute
// (which stock Megatron-LM cannot run) would have saved.
void print_recompute_scope(std::ostream& out, const JobSearchResult& job) {
  out << "recompute scope job: one Megatron-LM setting for every stage";
  if (job.best.recompute) out << ", best " << to_string(*job.best.recompute);
  out << " (" << job.recompute_variants << " more searches, " << job.recompute_configs
      << " configurations)\n";
  if (!std::isfinite(job.best_s)) return;
  out << "  per-stage recompute ";
  if (std::isfinite(job.per_stage_best)) {
    out << "would reach " << format_seconds(job.per_stage_best) << " per iteration ("
        << fmt("%+.2f %%", 100.0 * (job.per_stage_best / job.best_s - 1.0))
        << "), which stock Megatron-LM cannot run (--recompute-scope stage)\n";
  } else {
    out << "would not be faster\n";
  }
}

// The job-wide knobs searched: what each dimension tried and gained.
void print_job_space(std::ostream& out, const PlanRequest& q, const JobSearchResult& job) {
  if (q.job.job_recompute) print_recompute_scope(out, job);
  if (q.job.dims == 0) return;
  const bool moe = q.in.workload.model.is_moe();
  std::int64_t configs = 0;
  int refused = 0;
  for (const VariantOutcome& v : job.variants) {
    configs += v.stats.configs;
    refused += v.refused.empty() ? 0 : 1;
  }
  out << "job-wide knobs (--space " << to_string(q.job) << "): " << job.variants.size()
      << " variants, " << configs << " configurations";
  if (refused > 0) out << ", " << refused << " refused";
  out << "\n  best: " << to_string(job.best, moe) << "\n";
  out << "  overlaps: " << to_string(q.job.overlaps)
      << (q.job.overlaps == JobOverlaps::kRecipe
              ? " (each variant --overlap-grad-reduce, and --overlap-param-gather with the "
                "distributed optimizer; --overlaps given: the flags alone)\n"
              : " (the overlap flags given)\n");
  out << "  dimension     variants  configurations  best with it alone  vs the given values\n";
  for (int d = 0; d < kNumJobDims; ++d) {
    const auto dim = static_cast<JobDim>(d);
    if (!q.job.has(dim)) continue;
    char line[160];
    const double alone = job.dim_best[d];
    const std::string gain =
        std::isfinite(alone) && std::isfinite(job.base_best)
            ? fmt("%+.1f %%", 100.0 * (alone / job.base_best - 1.0))
            : (std::isfinite(alone) ? std::string("(fits only with it)") : std::string("-"));
    std::snprintf(line, sizeof line, "  %-12s %9lld %15lld  %-18s  %s\n", to_string(dim),
                  static_cast<long long>(job.dim_variants[d]),
                  static_cast<long long>(job.dim_configs[d]),
                  std::isfinite(alone) ? format_seconds(alone).c_str() : "no plan", gain.c_str());
    out << line;
  }
  for (const VariantOutcome& v : job.variants) {
    if (!v.refused.empty()) {
      out << "  refused " << to_string(v.variant, moe) << ": " << v.refused << "\n";
      break;  // one example: the rest are alike
    }
  }
}

// The best plan's report, where its values came from, and the top-K table.
void print_plans(std::ostream& out, const PlanRequest& q, const BaselineRun& ran,
                 const std::vector<PlanReport>& reports, const PlanSources& plan_src) {
  print_input_notes(out, q.in);
  if (!q.launcher_space.empty()) out << "space    " << q.launcher_space << "\n";
  if (!reports.empty()) {
    print_plan_report(out, reports.front(), q.in.workload, q.in.cluster);
    if (q.in.profile) print_plan_sources(out, plan_src, q.in.profile_path);
    out << "\ntop " << reports.size() << " (best plan of each configuration)\n";
    out << "  rank  latency      PP  TP  CP  EP TPE  DP  stages (device x layers, recompute)\n";
    for (std::size_t k = 0; k < reports.size(); ++k) {
      const PlanReport& p = reports[k];
      const ParallelConfig& pi = p.plan.parallel;
      const std::string stages = stages_text(p.plan, q.in.cluster);
      char line[160];
      std::snprintf(line, sizeof line, "  %4zu  %-11s %3d %3d %3d %3d %3d %3d  ", k + 1,
                    format_seconds(p.latency_s).c_str(), pi.pp, pi.tp, pi.cp, pi.ep, pi.tpe, pi.dp);
      out << line << stages << "\n";
    }
    out << "\n";
  } else {
    print_model_summary(out, q.in.workload);  // no plan: still say what was searched for
    out << "\n";
  }
  if (q.baseline != Baseline::kNone) {
    out << "baseline " << to_string(q.baseline) << ": " << ran.rule << "\n";
  }
}

// The search's counters, and how it was spread.
void print_search_statistics(std::ostream& out, const PlanRequest& q, const SearchResult& result,
                             const Comm& comm) {
  const SearchStats& s = result.stats;
  out << "search ("
      << (q.brute ? "brute force, prunings ignored" : "HS-DP, prune " + to_string(q.opt.prune))
      << (q.opt.uniform ? ", uniform layers" : "")
      << (q.opt.count_only ? "; counted, not searched: the plain DP's states and moves, no "
                             "stage costed, no plan"
                           : "")
      << ")\n";
  out << "  configurations " << s.configs << ", evaluated " << s.configs_evaluated << "\n";
  out << "  DP states " << s.states << ", transitions " << s.transitions << "\n";
  out << "  pruned: load balance " << s.pruned_load_balance << ", memory " << s.pruned_memory
      << ", hetero comm " << s.pruned_hetero_comm;
  if (s.hetero_comm_ratio > 0) {
    // What the count means: how near the cross-type transfers came to the
    // cut (pruning 3, docs/search.md).
    char ratio[96];
    std::snprintf(ratio, sizeof ratio, " (largest cross-type transfer %.3g x T_comp, cut above %g)",
                  s.hetero_comm_ratio, q.opt.eta);
    out << ratio;
  }
  out << "\n";
  if (q.opt.bound && !q.brute) {
    out << "  branch and bound: " << s.configs_bounded << " configurations skipped, "
        << s.pruned_bound << " partial plans dropped";
    if (std::isfinite(result.seed)) {
      out << "; seeded at " << format_seconds(result.seed) << " by " << result.seed_searches
          << " configurations of a sample";
    }
    out << "\n";
  }
  if (q.opt.count_only) {
    out << "  feasible plans not counted (no plan is costed)\n";
  } else {
    out << "  feasible plans " << s.feasible << "\n";
  }
  if (result.stopped != StopReason::kNone) {
    out << not_proven_line(to_string(result.stopped), result.not_searched, s.configs);
  }
  out << "  wall time " << format_seconds(s.seconds) << " on " << comm.size()
      << (comm.size() == 1 ? " rank" : " ranks") << " x " << q.run.threads
      << (q.run.threads == 1 ? " thread" : " threads");
  if (comm.nodes() > 1) out << " (" << comm.nodes() << " nodes)";
  if (result.whole_on_rank0) out << ", rank 0 searching the whole space (--split-above)";
  if (result.resumed > 0) {
    out << "; " << result.resumed << " configurations committed by earlier runs (--resume)";
  }
  out << "\n";
}

// The --plan-json document: plans, baseline, profile sources, search
// statistics and the run's spread.
nlohmann::ordered_json plan_document(const PlanRequest& q, const BaselineRun& ran,
                                     const std::vector<PlanReport>& reports,
                                     const PlanSources& plan_src, const Comm& comm,
                                     const std::optional<JobSearchResult>& job) {
  const SearchResult& result = ran.result;
  const SearchStats& s = result.stats;
  nlohmann::ordered_json doc;
  doc["plans"] = nlohmann::ordered_json::array();
  for (const PlanReport& p : reports) doc["plans"].push_back(plan_report_json(p, q.in.cluster));
  if (q.baseline != Baseline::kNone) {
    doc["baseline"] = {{"name", to_string(q.baseline)}, {"rule", ran.rule}};
  }
  if (q.in.profile) doc["profile"] = plan_sources_json(plan_src, q.in.profile_path);
  if (job) {
    // The knobs the plans were costed with: `evaluate --plan` applies them.
    doc["job"] = {{"space", to_string(q.job)},
                  {"variants", job->variants.size()},
                  {"recompute_scope", q.job.job_recompute ? "job" : "stage"},
                  {"overlaps", to_string(q.job.overlaps)},
                  {"training", job_training_json(q.in.workload.training)}};
    if (job->best.recompute) doc["job"]["recompute"] = to_string(*job->best.recompute);
  }
  doc["search"] = {{"counted", q.opt.count_only},
                   {"configs", s.configs},
                   {"configs_evaluated", s.configs_evaluated},
                   {"states", s.states},
                   {"transitions", s.transitions},
                   {"pruned",
                    {{"load_balance", s.pruned_load_balance},
                     {"memory", s.pruned_memory},
                     {"hetero_comm", s.pruned_hetero_comm},
                     {"hetero_comm_ratio", s.hetero_comm_ratio},
                     {"bound", s.pruned_bound},
                     {"configs_bound", s.configs_bounded}}},
                   {"feasible", q.opt.count_only ? nlohmann::ordered_json(nullptr)
                                                 : nlohmann::ordered_json(s.feasible)},
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
                {"threads", q.run.threads},
                {"rounds", result.rounds},
                {"whole_on_rank0", result.whole_on_rank0},
                {"resumed_configs", result.resumed},
                {"omp_wait_policy",
                 std::getenv("OMP_WAIT_POLICY") != nullptr ? std::getenv("OMP_WAIT_POLICY") : ""},
                {"gomp_spincount",
                 std::getenv("GOMP_SPINCOUNT") != nullptr ? std::getenv("GOMP_SPINCOUNT") : ""},
                {"per_rank", per_rank}};
  return doc;
}

// The archive of the run (docs/archive.md), or of the search so far.
void fill_plan_archive(h5::File& f, const cxxopts::ParseResult& r, const PlanRequest& q,
                       const BaselineRun& ran, const Scored& scored, const PlanSources& plan_src,
                       const Provenance& p) {
  ArchiveInputs a = given_inputs(r, q.in);
  a.options_resolved = archive_options(q);
  a.options_resolved["baseline_rule"] = ran.rule;
  if (q.in.profile) a.options_resolved["profile"] = plan_sources_json(plan_src, q.in.profile_path);
  a.tables = &scored.tables;
  write_header(f, "plan");
  write_provenance(f, p);
  write_run(f, a, scored.reports, &ran.result);
}

// --out: the archive of the run, written by rank 0 (collective).
void write_plan_archive(const cxxopts::ParseResult& r, Comm& comm, const PlanRequest& q,
                        const BaselineRun& ran, const Scored& scored, const PlanSources& plan_src,
                        const Provenance& p) {
  write_out(comm, r["out"].as<std::string>(),
            [&](h5::File& f) { fill_plan_archive(f, r, q, ran, scored, plan_src, p); });
}

// What a second SIGTERM/SIGUSR1 prints: what the archive on disk holds.
// `committed` < 0: no checkpoint written by this run or an earlier one.
std::string second_signal_line(const std::string& path, std::int64_t committed,
                               std::int64_t configs) {
  std::string s =
      "hapmoe plan: stopped by a second SIGTERM/SIGUSR1, the units in flight abandoned: ";
  if (committed >= 0) {
    s += std::to_string(committed) + " of " + std::to_string(configs) +
         " configurations committed to " + path + "; run again with --resume to finish";
  } else {
    s += "no checkpoint written yet, no archive (" + path + "); run again with --resume to start";
  }
  return s + " (exit code " + std::to_string(kExitStopped) + ")\n";
}

// Configurations a result settles: searched, or skipped by their bound.
std::int64_t settled(const SearchResult& s) {
  return static_cast<std::int64_t>(s.configs.size()) - s.not_searched;
}

// The exit code, with a line on `err` for a search a limit stopped or one
// where no plan fits (and the closest miss).
int plan_exit_code(std::ostream& err, const PlanRequest& q, const SearchResult& result,
                   const std::vector<PlanReport>& reports) {
  if (result.stopped != StopReason::kNone) {
    err << "hapmoe plan: the " << to_string(result.stopped) << " stopped the search: "
        << (reports.empty() ? "no plan found yet"
                            : "the plans are the best found, not proven optimal")
        << " (exit code " << kExitLimit << ")\n";
    return kExitLimit;
  }
  if (q.opt.count_only) return kExitOk;  // no plan was looked for
  if (reports.empty()) {
    err << "hapmoe plan: no plan fits in memory";
    if (result.closest.known()) {
      const Shortfall& c = result.closest;
      const ParallelConfig& pi = c.parallel;
      err << "; the closest: stage " << c.stage << " on "
          << q.in.cluster.pools[static_cast<std::size_t>(c.device_type)].device.name << " with "
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

}  // namespace

int cmd_plan(int argc, const char* const* argv, std::ostream& out, std::ostream& err,
             std::ostream& alarm, Comm& comm) {
  cxxopts::Options o = plan_options();
  const Started started;
  const auto parsed = parse(o, argc, argv, out);
  if (!parsed) return kExitOk;
  const auto& r = *parsed;
  PlanRequest q = read_plan_request(r, comm, started);
  warn_if_unlocked(err, q.lock, "plan");
  // With --out: SIGTERM/SIGUSR1 finish the units in flight, commit and
  // exit 4; the search so far is committed every --checkpoint-every
  // seconds (docs/archive.md, "Checkpoints of one search").
  std::optional<StopSignals> signals;
  std::function<void(const std::function<SearchResult()>&)> checkpoint;
  auto last_commit = std::chrono::steady_clock::now();
  const std::string out_path = r.count("out") ? r["out"].as<std::string>() : "";
  if (q.checkpoints) {
    signals.emplace();
    if (comm.rank() == 0) {
      if (q.resumed) {
        const auto held =
            static_cast<std::int64_t>(q.resumed->searched.size() + q.resumed->skipped.size());
        err << "hapmoe plan: resuming " << out_path << ": " << held << " of " << q.resumed->configs
            << " configurations committed (searched, or skipped by their bound); searching the "
               "rest\n";
        set_stop_line(second_signal_line(out_path, held, q.resumed->configs));
      } else {
        if (q.resume) {
          err << "hapmoe plan: --resume: " << out_path << " does not exist: starting afresh\n";
        }
        set_stop_line(second_signal_line(out_path, -1, 0));
      }
      err.flush();
    }
    checkpoint = [&](const std::function<SearchResult()>& snapshot) {
      // Rank 0's clock decides, for every rank.
      const bool due =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - last_commit).count() >=
          q.checkpoint_s;
      if (comm.allgather(comm.rank() == 0 && due ? "1" : "").front().empty()) return;
      CommitScope committing;
      write_out(comm, out_path, [&](h5::File& f) {
        const BaselineRun so_far{snapshot(), ""};
        const Scored scored =
            score(q.in.workload, q.in.cluster, so_far.result, q.in.profile.get(), nullptr);
        fill_plan_archive(
            f, r, q, so_far, scored, PlanSources{},
            provenance_since(started, hapmoe_command_line(argc, argv), comm.size(), q.run.threads));
        set_stop_line(second_signal_line(out_path, settled(so_far.result),
                                         static_cast<std::int64_t>(so_far.result.configs.size())));
      });
      committing.done();
      last_commit = std::chrono::steady_clock::now();
    };
  }
  std::optional<JobSearchResult> job;
  const BaselineRun ran = search_with_progress(q, comm, err, alarm, job, checkpoint);
  if (ran.result.stopped == StopReason::kSignal) {
    // Stopped by SIGTERM/SIGUSR1: the units in flight are done; commit
    // what is searched and say how to go on.
    const Scored scored = score(q.in.workload, q.in.cluster, ran.result, q.in.profile.get());
    CommitScope committing;
    write_plan_archive(
        r, comm, q, ran, scored, PlanSources{},
        provenance_since(started, hapmoe_command_line(argc, argv), comm.size(), q.run.threads));
    const std::int64_t held = settled(ran.result);
    const auto configs = static_cast<std::int64_t>(ran.result.configs.size());
    if (comm.rank() == 0) {
      set_stop_line(second_signal_line(out_path, held, configs));
      err << "hapmoe plan: stopped by SIGTERM/SIGUSR1: " << held << " of " << configs
          << " configurations committed to " << out_path << " ("
          << fmt("%.0f %%", configs > 0
                                ? 100.0 * static_cast<double>(held) / static_cast<double>(configs)
                                : 100.0)
          << "); run again with --resume to finish (exit code " << kExitStopped << ")\n";
      err.flush();
    }
    committing.done();
    return kExitStopped;
  }
  ProfileSources sources;
  const Scored scored =
      score(q.in.workload, q.in.cluster, ran.result, q.in.profile.get(), &sources);
  const std::vector<PlanReport>& reports = scored.reports;
  PlanSources plan_src;
  if (q.in.profile && !reports.empty()) {
    plan_src = plan_sources(reports.front(), q.in.workload, q.in.cluster, scored.tables, sources);
  }
  print_plans(out, q, ran, reports, plan_src);
  print_search_statistics(out, q, ran.result, comm);
  if (job) print_job_space(out, q, *job);
  // The outputs, each agreed on by every rank (write_on_root): the
  // launcher first (making it may still refuse the plan), the archive
  // last, so a run that fails writes no archive.
  const CostModel model(q.in.workload, q.in.cluster, scored.tables);
  write_launcher_if_requested(r, out, q.in.megatron.get(),
                              reports.empty() ? nullptr : &reports.front(), model, q.hosts, comm);
  write_plan_json(r, comm, [&] { return plan_document(q, ran, reports, plan_src, comm, job); });
  if (r.count("out")) {
    const Provenance p =
        provenance_since(started, hapmoe_command_line(argc, argv), comm.size(), q.run.threads);
    // What a second signal during this commit says once it is written.
    if (q.checkpoints && comm.rank() == 0) {
      set_stop_line(second_signal_line(out_path, settled(ran.result),
                                       static_cast<std::int64_t>(ran.result.configs.size())));
    }
    CommitScope committing;
    write_plan_archive(r, comm, q, ran, scored, plan_src, p);
    committing.done();
  }
  return plan_exit_code(err, q, ran.result, reports);
}

}  // namespace hapmoe
