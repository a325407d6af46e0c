// MpiComm: the Comm of an MPI job. The only file that includes mpi.h.
#include <mpi.h>

#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/comm.h"

namespace hapmoe {

namespace {

void check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw std::runtime_error(std::string("MPI call failed: ") + what);
}

class MpiComm final : public Comm {
 public:
  MpiComm(int& argc, char**& argv) {
    int provided = 0;
    // Only the main thread calls MPI (OpenMP threads never do).
    check(MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    check(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
    MPI_Comm node = MPI_COMM_NULL;
    check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node),
          "MPI_Comm_split_type");
    check(MPI_Comm_size(node, &local_size_), "MPI_Comm_size");
    MPI_Comm_free(&node);
  }
  MpiComm(const MpiComm&) = delete;
  MpiComm& operator=(const MpiComm&) = delete;
  ~MpiComm() override { MPI_Finalize(); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_size() const override { return local_size_; }

  std::vector<std::string> allgather(const std::string& bytes) override {
    // Sizes first, then the bytes; MPI counts are int, so a rank's share
    // is limited to 2 GiB (the search sends kilobytes to megabytes).
    if (bytes.size() > static_cast<std::size_t>(INT32_MAX)) {
      throw std::length_error("MpiComm::allgather: more than 2 GiB from one rank");
    }
    const int mine = static_cast<int>(bytes.size());
    std::vector<int> sizes(static_cast<std::size_t>(size_));
    check(MPI_Allgather(&mine, 1, MPI_INT, sizes.data(), 1, MPI_INT, MPI_COMM_WORLD),
          "MPI_Allgather");
    std::vector<int> offsets(sizes.size());
    long long total = 0;
    for (std::size_t r = 0; r < sizes.size(); ++r) {
      if (total > INT32_MAX) throw std::length_error("MpiComm::allgather: more than 2 GiB");
      offsets[r] = static_cast<int>(total);
      total += sizes[r];
    }
    if (total > INT32_MAX) throw std::length_error("MpiComm::allgather: more than 2 GiB");
    std::string all(static_cast<std::size_t>(total), '\0');
    check(MPI_Allgatherv(bytes.data(), mine, MPI_BYTE, all.data(), sizes.data(), offsets.data(),
                         MPI_BYTE, MPI_COMM_WORLD),
          "MPI_Allgatherv");
    std::vector<std::string> out(sizes.size());
    for (std::size_t r = 0; r < sizes.size(); ++r) {
      out[r] = all.substr(static_cast<std::size_t>(offsets[r]), static_cast<std::size_t>(sizes[r]));
    }
    return out;
  }

  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

 private:
  int rank_ = 0;
  int size_ = 1;
  int local_size_ = 1;
};

bool launched_by_mpi() {
  for (const char* v : {"PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE"}) {
    if (std::getenv(v) != nullptr) return true;
  }
  return false;
}

}  // namespace

std::unique_ptr<Comm> make_world_comm(int& argc, char**& argv) {
  if (!launched_by_mpi()) return std::make_unique<SerialComm>();
  return std::make_unique<MpiComm>(argc, argv);
}

}  // namespace hapmoe
