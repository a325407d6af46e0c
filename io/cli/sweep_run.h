// Running a sweep (docs/archive.md, "Sweeps"): every case searched in turn
// (or spread over the ranks), committed to one archive as it finishes,
// resumable after a kill. The sweep file itself is io/archive/sweep.h.
#pragma once

#include <iostream>
#include <ostream>
#include <string>

#include "engine/comm.h"
#include "engine/limits.h"

namespace hapmoe {

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
  // Where any rank says that the watchdog ends the job (docs/parallel.md).
  std::ostream* alarm = &std::cerr;
};

// Runs the sweep on every rank of `comm` (each case with the whole
// communicator: the engine splits its configurations over all ranks).
// Rank 0 prints progress to `err`, a summary to `out`, and writes the
// archive. Returns kExitOk, or kExitStopped after SIGTERM/SIGUSR1 (the
// case in flight finished and committed). Throws InputError on bad input
// or a bad --out, before any search.
int run_sweep(const SweepRunOptions& options, std::ostream& out, std::ostream& err, Comm& comm);

}  // namespace hapmoe
