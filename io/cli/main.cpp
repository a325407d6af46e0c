// The hapmoe executable: run_cli (io/cli/cli.cpp) and the commands of io/cli/
// do the work; this file only starts MPI. Under an MPI launcher
// every rank runs the same command; only rank 0 prints.
#include <iostream>
#include <memory>
#include <streambuf>

#include "engine/comm.h"
#include "io/cli/cli.h"

int main(int argc, char** argv) {
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
