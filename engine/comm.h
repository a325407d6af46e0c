// The only communication the search needs, behind a small interface: the
// driver runs on a Comm, an MPI job gets MpiComm (engine/comm_mpi.cpp, the
// one file that includes mpi.h) and a single process SerialComm. Every
// call is collective: all ranks make the same calls in the same order.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace hapmoe {

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Ranks of this job on this node (for a default thread count).
  virtual int local_size() const = 0;
  // Every rank's `bytes`, in rank order, on every rank.
  virtual std::vector<std::string> allgather(const std::string& bytes) = 0;
  // Ends every rank of the job now with `code`; for when ranks can no
  // longer agree (a failure outside the collective protocol).
  [[noreturn]] virtual void abort(int code) = 0;
};

class SerialComm final : public Comm {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_size() const override { return 1; }
  std::vector<std::string> allgather(const std::string& bytes) override { return {bytes}; }
  [[noreturn]] void abort(int code) override;
};

// The job's communicator: MPI when the process was started by an MPI
// launcher (mpiexec, srun: PMI_RANK, PMI_SIZE, PMIX_RANK or
// OMPI_COMM_WORLD_SIZE in the environment), a SerialComm otherwise, so a
// plain run never pays MPI's start-up. MPI is initialised here and
// finalised when the returned object is destroyed.
std::unique_ptr<Comm> make_world_comm(int& argc, char**& argv);

// The first non-empty error of any rank (lowest rank first), identical on
// every rank, or "" when all are empty. Collective: every rank calls it at
// the same point, failed or not, so no rank waits for one that gave up.
std::string first_error(Comm& comm, const std::string& mine);

}  // namespace hapmoe
