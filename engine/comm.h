// The only communication the search needs, behind a small interface: the
// driver runs on a Comm, an MPI job gets MpiComm (engine/comm_mpi.cpp, the
// one file that includes mpi.h) and a single process SerialComm. Every
// call but claim() is collective: all ranks make the same calls in the
// same order.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "costmodel/profile.h"

namespace hapmoe {

// A collective this rank is waiting in now (Comm::waiting), for a progress
// line.
struct CollectiveWait {
  double seconds = 0;     // how long this rank has waited in it; 0: not waiting
  int first_silent = -1;  // the lowest rank that has not reached it, as rank 0
                          // sees it (-1 elsewhere, or when all have)
  int silent = 0;         // how many ranks have not reached it (rank 0)
};

// The watchdog of a search with a time limit (docs/parallel.md, "A rank
// that stops answering"): a collective still waiting for some rank at
// `give_up` (rank 0, which sees who has arrived), or a little later on the
// other ranks (which then know that rank 0 is the one not answering),
// calls `say(first_silent, silent, waited_s)` and ends the job with
// `exit_code` (Comm::abort). `say` must not call the Comm.
struct Watchdog {
  std::chrono::steady_clock::time_point give_up = std::chrono::steady_clock::time_point::max();
  std::function<void(int first_silent, int silent, double waited_s)> say;
  int exit_code = 1;
};

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Ranks of this job on this node (for a default thread count).
  virtual int local_size() const = 0;
  // The nodes of the job (groups of ranks sharing memory), numbered by
  // their lowest rank, and this rank's node.
  virtual int nodes() const = 0;
  virtual int node() const = 0;
  // Every rank's `bytes`, in rank order, on every rank.
  virtual std::vector<std::string> allgather(const std::string& bytes) = 0;
  // Work hand-out inside a node: a counter shared by the ranks of this node
  // and their threads, starting at 0. Returns its value and adds 1 when the
  // value is below `limit`, else returns -1 and leaves it: it never passes
  // the limit, so after a batch of `n` items claimed to the end (limit =
  // base + n) every rank of the node knows the next base. Not collective,
  // no MPI call (an atomic in memory shared by the node): any thread may
  // call it at any time.
  virtual std::int64_t claim(std::int64_t limit) = 0;
  // The counter's value now. The same on every rank of the node when read
  // after the last claim of a batch and before a collective that precedes
  // the next claim.
  virtual std::int64_t claimed() = 0;
  // Ends every rank of the job now with `code`; for when ranks can no
  // longer agree (a failure outside the collective protocol).
  [[noreturn]] virtual void abort(int code) = 0;
  // Times one collective for `hapmoe profile comm` (docs/profile.md): the
  // ranks with the same `color` >= 0 form a group, in rank order, that
  // runs `prim` on `bytes` (the per-device buffer, as CommTable::time
  // reads it) `warmup` times untimed, then `reps` times, each after a
  // barrier of the group. Returns each repetition's time of the slowest
  // rank of the group, in seconds, on the group's ranks; empty on ranks
  // with color < 0. Collective: every rank calls it. A group of one rank
  // (a SerialComm) has nobody to talk to and returns `reps` zeros.
  virtual std::vector<double> time_collective(Primitive prim, std::size_t bytes, int color,
                                              int warmup, int reps) = 0;
  // Arms (or, with the default Watchdog, disarms) the watchdog for the
  // collectives that follow. A job of one process has nobody to wait for.
  virtual void set_watchdog(Watchdog /*watchdog*/) {}
  // The collective this rank waits in now; any thread may ask.
  virtual CollectiveWait waiting() const { return {}; }
};

// Arms a watchdog for a scope and disarms it at the end.
class WatchdogScope {
 public:
  WatchdogScope(Comm& comm, Watchdog watchdog) : comm_(comm) {
    comm_.set_watchdog(std::move(watchdog));
  }
  ~WatchdogScope() { comm_.set_watchdog(Watchdog{}); }
  WatchdogScope(const WatchdogScope&) = delete;
  WatchdogScope& operator=(const WatchdogScope&) = delete;

 private:
  Comm& comm_;
};

// claim() on a counter: the one atomic step behind every Comm's claim.
std::int64_t claim_below(std::atomic_ref<std::int64_t> counter, std::int64_t limit);

class SerialComm final : public Comm {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_size() const override { return 1; }
  int nodes() const override { return 1; }
  int node() const override { return 0; }
  std::vector<std::string> allgather(const std::string& bytes) override { return {bytes}; }
  std::int64_t claim(std::int64_t limit) override {
    return claim_below(std::atomic_ref<std::int64_t>(counter_), limit);
  }
  std::int64_t claimed() override { return std::atomic_ref<std::int64_t>(counter_).load(); }
  [[noreturn]] void abort(int code) override;
  std::vector<double> time_collective(Primitive prim, std::size_t bytes, int color, int warmup,
                                      int reps) override;

 private:
  alignas(std::atomic_ref<std::int64_t>::required_alignment) std::int64_t counter_ = 0;
};

// The job's communicator: MPI when the process was started by an MPI
// launcher (mpiexec, srun: PMI_RANK, PMI_SIZE, PMIX_RANK or
// OMPI_COMM_WORLD_SIZE in the environment), a SerialComm otherwise, so a
// plain run never pays MPI's start-up. MPI is initialised here and
// finalised when the returned object is destroyed.
//
// HAPMOE_RANKS_PER_NODE=K (tests, docs/parallel.md) cuts each node into
// groups of K ranks that act as separate nodes, so one machine can stand
// for several.
std::unique_ptr<Comm> make_world_comm(int& argc, char**& argv);

// The first non-empty error of any rank (lowest rank first), identical on
// every rank, or "" when all are empty. Collective: every rank calls it at
// the same point, failed or not, so no rank waits for one that gave up.
std::string first_error(Comm& comm, const std::string& mine);

// Runs `read` (reading and checking inputs) on this rank and agrees on the
// outcome: when it throws InputError on any rank, every rank throws an
// InputError with the first failing rank's message (prefixed "rank R: "
// under MPI). Collective, like first_error.
void read_on_every_rank(Comm& comm, const std::function<void()>& read);

}  // namespace hapmoe
