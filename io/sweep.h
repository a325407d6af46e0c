// Sweeps: many searches in one job, one archive (docs/archive.md,
// "Sweeps"). A sweep file lists cases and/or Cartesian products of case
// fields; every case is a full `hapmoe plan` (model, cluster, training
// overrides, search options).
#pragma once

#include <csignal>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/baselines.h"
#include "engine/comm.h"
#include "engine/limits.h"
#include "engine/search.h"
#include "io/model_io.h"

namespace hapmoe {

// One case, resolved: every field has its value (defaults filled in).
struct SweepCase {
  std::string name;  // unique in the sweep
  std::string model;
  std::string cluster;
  TrainingOverrides overrides;
  SearchOptions options;
  bool bruteforce = false;
  Baseline baseline = Baseline::kNone;  // a baseline instead of the search (docs/baselines.md)
  int round = 32;  // RunOptions::round (changes the statistics, never the plans)
  // The case as canonical JSON (every field, sorted keys): what --resume
  // compares.
  nlohmann::ordered_json resolved;
};

struct SweepDefinition {
  std::string origin;  // the file
  std::string text;    // its text as given
  std::vector<SweepCase> cases;
  // The resolved cases as one JSON array: equal for equal sweeps.
  std::string canonical() const;
};

// Parses a sweep file. Unknown keys, wrong types, values out of range,
// empty products and duplicate case names are InputErrors naming the file
// and JSON pointer. Models and clusters are not loaded here.
SweepDefinition parse_sweep_json(const std::string& text, const std::string& origin);
SweepDefinition load_sweep(const std::string& path);

struct SweepRunOptions {
  std::string sweep_path;
  std::string out;          // the archive
  bool resume = false;      // finish an existing archive of the same sweep
  int threads = 1;          // OpenMP threads per rank
  double checkpoint_s = 0;  // commit at most this often (0: after every case)
  double progress_s = 60;   // a progress line while a case runs this long (0: none)
  // Give each rank whole cases (each searched alone, gathered to rank 0)
  // instead of running every case over all ranks.
  bool spread_cases = false;
  bool tty = false;  // stderr is a terminal: a live bar, not lines
  // For the whole sweep: a case a limit stops is committed with status
  // "stopped" (its best plan so far, not proven optimal), the sweep ends
  // with kExitLimit, and --resume runs that case again.
  SearchLimits limits;
  // Measured tables for every case (--profile, docs/profile.md); "" none.
  std::string profile_path;
  std::string command_line;
};

// Set by SIGTERM/SIGUSR1 while a sweep runs (the signal number, else 0).
extern volatile std::sig_atomic_t g_sweep_stop_signal;

// Runs the sweep on every rank of `comm` (each case with the whole
// communicator: the engine splits its configurations over all ranks).
// Rank 0 prints progress to `err`, a summary to `out`, and writes the
// archive. Returns kExitOk, or kExitStopped after SIGTERM/SIGUSR1 (the
// case in flight finished and committed). Throws InputError on bad input
// or a bad --out, before any search.
int run_sweep(const SweepRunOptions& options, std::ostream& out, std::ostream& err, Comm& comm);

}  // namespace hapmoe
