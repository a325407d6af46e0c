// The hapmoe executable: run_cli (io/cli/cli.cpp) and the commands of io/cli/
// do the work; this file only starts MPI. Under an MPI launcher
// every rank runs the same command; only rank 0 prints.
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <memory>
#include <streambuf>

#include "engine/comm.h"
#include "io/cli/cli.h"

int main(int argc, char** argv) {
  // OpenMP threads spin between parallel regions unless told otherwise
  // (libgomp without OMP_WAIT_POLICY), and on a loaded node a spinning
  // thread takes the core of the one doing the work: 2 threads ran a
  // search 3x slower than one (docs/parallel.md, "Threads"). libgomp reads
  // the policy only when it loads, so a run that sets none starts again
  // with the passive one; a policy set by the user is kept.
  if (std::getenv("OMP_WAIT_POLICY") == nullptr && setenv("OMP_WAIT_POLICY", "passive", 1) == 0) {
    execv("/proc/self/exe", argv);  // returns only if it failed: run as it is
  }
  std::unique_ptr<hapmoe::Comm> comm;
  try {
    comm = hapmoe::make_world_comm(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "hapmoe: error: cannot start MPI: " << e.what() << "\n";
    return hapmoe::kExitInternal;
  }
  if (comm->rank() == 0) return hapmoe::run_cli(argc, argv, std::cout, std::cerr, *comm);
  std::ostream quiet(nullptr);  // discards everything but the watchdog's word
  return hapmoe::run_cli(argc, argv, quiet, quiet, *comm, std::cerr);
}
