// The hapmoe executable: run_cli (io/cli/cli.cpp) and the commands of io/cli/
// do the work; this file only starts MPI. Under an MPI launcher
// every rank runs the same command; only rank 0 prints.
#include <sched.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <streambuf>
#include <string_view>

#include "engine/comm.h"
#include "io/cli/cli.h"

namespace {

// Whether the run can start only one OpenMP thread, as far as main sees
// before MPI starts: `--threads 1` (the last --threads wins, as in
// cxxopts); else OMP_NUM_THREADS=1; else a process bound to one CPU
// (the default divides the node's CPUs over its ranks: at most one).
bool one_thread(int argc, char** argv) {
  const char* threads = nullptr;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--threads" && i + 1 < argc) threads = argv[++i];
    if (arg.starts_with("--threads=")) threads = argv[i] + std::strlen("--threads=");
  }
  if (threads == nullptr) threads = std::getenv("OMP_NUM_THREADS");
  if (threads != nullptr) return std::string_view(threads) == "1";
  cpu_set_t cpus;
  return sched_getaffinity(0, sizeof cpus, &cpus) == 0 && CPU_COUNT(&cpus) == 1;
}

}  // namespace

int main(int argc, char** argv) {
  // OpenMP threads spin between parallel regions unless told otherwise
  // (libgomp without OMP_WAIT_POLICY: 300,000 spins), and on a loaded node
  // a spinning thread takes the core of the one doing the work: 2 threads
  // ran a search 3x slower than one (docs/parallel.md, "Threads"). Asleep
  // at once (passive: 0 spins), a thread is woken for every parallel
  // region, and a job search runs thousands of small ones: 2 threads took
  // 82 ms where one took 56. So the threads wait passively after 3,000
  // spins (GOMP_SPINCOUNT; tenths of a millisecond), which bridges the gap
  // between one region and the next. libgomp reads both only when it
  // loads, so a run that sets no policy starts again with these; a policy
  // or spin count set by the user is kept. A run of one thread has no
  // thread to wait and does not start again (that costs about 7 ms: the
  // dynamic loading of its libraries twice).
  if (std::getenv("OMP_WAIT_POLICY") == nullptr && !one_thread(argc, argv) &&
      setenv("OMP_WAIT_POLICY", "passive", 1) == 0 && setenv("GOMP_SPINCOUNT", "3000", 0) == 0) {
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
