// `hapmoe sweep`: its options; running the sweep is io/cli/sweep_run.cpp.
#include <unistd.h>

#include <cxxopts.hpp>
#include <iostream>
#include <string>

#include "costmodel/errors.h"
#include "io/cli/cli.h"
#include "io/cli/commands.h"
#include "io/cli/options.h"
#include "io/cli/steps.h"
#include "io/cli/sweep_run.h"
#include "io/inputs/json_strict.h"

namespace hapmoe {

int cmd_sweep(int argc, const char* const* argv, std::ostream& out, std::ostream& err,
              std::ostream& alarm, Comm& comm) {
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
  s.threads = read_threads(r, comm);
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
  s.command_line = hapmoe_command_line(argc, argv);
  s.alarm = &alarm;
  return run_sweep(s, out, err, comm);
}

}  // namespace hapmoe
