// MpiComm: the Comm of an MPI job. The only file that includes mpi.h.
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "engine/comm.h"

namespace hapmoe {

namespace {

using Clock = std::chrono::steady_clock;

void check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw std::runtime_error(std::string("MPI call failed: ") + what);
}

std::int64_t ticks(Clock::time_point t) { return t.time_since_epoch().count(); }

// The other ranks give up this long after rank 0 would have (rank 0 ends
// the job when it is alive, so a rank still waiting then knows that rank 0
// is the one not answering), staggered by rank so that one of them speaks.
Clock::duration backup_delay(int rank) {
  using std::chrono::milliseconds;
  return milliseconds(5000) + milliseconds(500) * std::min(rank - 1, 20);
}

// Between polls of a collective's arrival barrier (MpiComm::arrive), not
// yet complete: a yield for its first millisecond (a search round's
// usually completes within microseconds; where ranks outnumber cores, the
// yield hands the core to a rank that has work, where spinning held it
// for a scheduler's time slice), then sleeps growing to 1 ms, so a rank
// that waits long costs no CPU.
void pause(Clock::duration waited) {
  using std::chrono::microseconds;
  if (waited < std::chrono::milliseconds(1)) {
    std::this_thread::yield();
    return;
  }
  std::this_thread::sleep_for(std::min<Clock::duration>(
      microseconds(1000), std::max<Clock::duration>(microseconds(50), waited / 16)));
}

// Waits for `request`, a transfer between ranks that have all arrived
// (MpiComm::arrive), yielding between polls but never sleeping: each of
// its steps needs every rank's poll, so a rank asleep would hold up the
// others once per step (a megabyte gathered from 3 ranks on 2 cores took
// 0.1 s more with sleeps of up to 1 ms; bench/README.md). MPI's blocking
// calls would spin without yielding.
void wait_arrived(MPI_Request& request, const char* what) {
  for (;;) {
    int done = 0;
    check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), what);
    if (done != 0) return;
    std::this_thread::yield();
  }
}

class MpiComm final : public Comm {
 public:
  MpiComm(int& argc, char**& argv) {
    int provided = 0;
    // Only the main thread calls MPI (OpenMP threads never do; claim() is
    // a plain atomic on shared memory).
    check(MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    check(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
    check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node_),
          "MPI_Comm_split_type");
    if (const char* k = std::getenv("HAPMOE_RANKS_PER_NODE")) {  // test hook: smaller "nodes"
      const int per = std::atoi(k);
      if (per >= 1) {
        int local = 0;
        check(MPI_Comm_rank(node_, &local), "MPI_Comm_rank");
        MPI_Comm part = MPI_COMM_NULL;
        check(MPI_Comm_split(node_, local / per, rank_, &part), "MPI_Comm_split");
        MPI_Comm_free(&node_);
        node_ = part;
      }
    }
    int local = 0;
    check(MPI_Comm_size(node_, &local_size_), "MPI_Comm_size");
    check(MPI_Comm_rank(node_, &local), "MPI_Comm_rank");
    // Node numbers: a node is named by its lowest world rank (its local
    // rank 0, as the split keys are world ranks).
    int leader = rank_;
    check(MPI_Bcast(&leader, 1, MPI_INT, 0, node_), "MPI_Bcast");
    std::vector<int> leaders(static_cast<std::size_t>(size_));
    check(MPI_Allgather(&leader, 1, MPI_INT, leaders.data(), 1, MPI_INT, MPI_COMM_WORLD),
          "MPI_Allgather");
    for (int r = 0; r < size_; ++r) {
      if (leaders[static_cast<std::size_t>(r)] != r) continue;  // not a leader
      if (r < leader) ++node_index_;
      ++nodes_;
    }
    // The node's work counter: one int64 in memory the node's ranks share.
    const MPI_Aint bytes = local == 0 ? static_cast<MPI_Aint>(sizeof(std::int64_t)) : 0;
    void* base = nullptr;
    check(MPI_Win_allocate_shared(bytes, static_cast<int>(sizeof(std::int64_t)), MPI_INFO_NULL,
                                  node_, &base, &window_),
          "MPI_Win_allocate_shared");
    MPI_Aint size = 0;
    int unit = 0;
    check(MPI_Win_shared_query(window_, 0, &size, &unit, &counter_), "MPI_Win_shared_query");
    if (reinterpret_cast<std::uintptr_t>(counter_) %
            std::atomic_ref<std::int64_t>::required_alignment !=
        0) {
      throw std::runtime_error("MPI_Win_allocate_shared: misaligned node counter");
    }
    if (local == 0) *static_cast<std::int64_t*>(counter_) = 0;
    check(MPI_Comm_dup(MPI_COMM_WORLD, &watch_), "MPI_Comm_dup");
    check(MPI_Barrier(node_), "MPI_Barrier");  // the counter is 0 before anyone claims
  }
  MpiComm(const MpiComm&) = delete;
  MpiComm& operator=(const MpiComm&) = delete;
  ~MpiComm() override {
    MPI_Win_free(&window_);
    MPI_Comm_free(&watch_);
    MPI_Comm_free(&node_);
    MPI_Finalize();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_size() const override { return local_size_; }
  int nodes() const override { return nodes_; }
  int node() const override { return node_index_; }

  std::vector<std::string> allgather(const std::string& bytes) override {
    // Sizes first, then the bytes; MPI counts are int, so a rank's share
    // is limited to 2 GiB (the search sends kilobytes to megabytes).
    if (bytes.size() > static_cast<std::size_t>(INT32_MAX)) {
      throw std::length_error("MpiComm::allgather: more than 2 GiB from one rank");
    }
    const int mine = static_cast<int>(bytes.size());
    arrive();
    std::vector<int> sizes(static_cast<std::size_t>(size_));
    MPI_Request request = MPI_REQUEST_NULL;
    check(MPI_Iallgather(&mine, 1, MPI_INT, sizes.data(), 1, MPI_INT, MPI_COMM_WORLD, &request),
          "MPI_Iallgather");
    wait_arrived(request, "MPI_Iallgather");
    std::vector<int> offsets(sizes.size());
    long long total = 0;
    for (std::size_t r = 0; r < sizes.size(); ++r) {
      if (total > INT32_MAX) throw std::length_error("MpiComm::allgather: more than 2 GiB");
      offsets[r] = static_cast<int>(total);
      total += sizes[r];
    }
    if (total > INT32_MAX) throw std::length_error("MpiComm::allgather: more than 2 GiB");
    std::string all(static_cast<std::size_t>(total), '\0');
    check(MPI_Iallgatherv(bytes.data(), mine, MPI_BYTE, all.data(), sizes.data(), offsets.data(),
                          MPI_BYTE, MPI_COMM_WORLD, &request),
          "MPI_Iallgatherv");
    wait_arrived(request, "MPI_Iallgatherv");
    std::vector<std::string> out(sizes.size());
    for (std::size_t r = 0; r < sizes.size(); ++r) {
      out[r] = all.substr(static_cast<std::size_t>(offsets[r]), static_cast<std::size_t>(sizes[r]));
    }
    return out;
  }

  void set_watchdog(Watchdog watchdog) override { watchdog_ = std::move(watchdog); }

  CollectiveWait waiting() const override {
    CollectiveWait w;
    const std::int64_t since = wait_start_.load(std::memory_order_relaxed);
    if (since == 0) return w;
    w.seconds =
        std::chrono::duration<double>(Clock::now().time_since_epoch() - Clock::duration(since))
            .count();
    w.first_silent = first_silent_.load(std::memory_order_relaxed);
    w.silent = silent_.load(std::memory_order_relaxed);
    return w;
  }

  std::int64_t claim(std::int64_t limit) override {
    return claim_below(std::atomic_ref<std::int64_t>(*static_cast<std::int64_t*>(counter_)), limit);
  }

  std::int64_t claimed() override {
    return std::atomic_ref<std::int64_t>(*static_cast<std::int64_t*>(counter_)).load();
  }

  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

  std::vector<double> time_collective(Primitive prim, std::size_t bytes, int color, int warmup,
                                      int reps) override {
    MPI_Comm group = MPI_COMM_NULL;
    check(MPI_Comm_split(MPI_COMM_WORLD, color < 0 ? MPI_UNDEFINED : color, rank_, &group),
          "MPI_Comm_split");
    std::vector<double> times;
    if (group == MPI_COMM_NULL) return times;
    int me = 0;
    int n = 1;
    check(MPI_Comm_rank(group, &me), "MPI_Comm_rank");
    check(MPI_Comm_size(group, &n), "MPI_Comm_size");
    if (n < 2) {
      MPI_Comm_free(&group);
      return std::vector<double>(static_cast<std::size_t>(std::max(reps, 0)), 0.0);
    }
    // Buffers: float elements for the reductions, bytes for the rest; the
    // per-rank share is rounded down to whole elements (at least one).
    const std::size_t un = static_cast<std::size_t>(n);
    const std::size_t floats = std::max<std::size_t>(1, bytes / sizeof(float));
    const std::size_t share = std::max<std::size_t>(1, bytes / un);  // bytes per peer
    const std::size_t share_floats = std::max<std::size_t>(1, floats / un);
    std::vector<float> fin(std::max(floats, share_floats * un), 1.0F);
    std::vector<float> fout(fin.size(), 0.0F);
    std::vector<char> bin(std::max(bytes, share * un), 1);
    std::vector<char> bout(bin.size(), 0);
    const int peer = me ^ 1;  // p2p: pairs (0,1), (2,3), ...; an odd last rank idles
    auto once = [&] {
      switch (prim) {
        case Primitive::kAllReduce:
          check(MPI_Allreduce(fin.data(), fout.data(), static_cast<int>(floats), MPI_FLOAT, MPI_SUM,
                              group),
                "MPI_Allreduce");
          break;
        case Primitive::kAllGather:
          check(MPI_Allgather(bin.data(), static_cast<int>(share), MPI_BYTE, bout.data(),
                              static_cast<int>(share), MPI_BYTE, group),
                "MPI_Allgather");
          break;
        case Primitive::kReduceScatter:
          check(MPI_Reduce_scatter_block(fin.data(), fout.data(), static_cast<int>(share_floats),
                                         MPI_FLOAT, MPI_SUM, group),
                "MPI_Reduce_scatter_block");
          break;
        case Primitive::kAllToAll:
          check(MPI_Alltoall(bin.data(), static_cast<int>(share), MPI_BYTE, bout.data(),
                             static_cast<int>(share), MPI_BYTE, group),
                "MPI_Alltoall");
          break;
        case Primitive::kP2P:
          if (peer < n) {
            check(
                MPI_Sendrecv(bin.data(), static_cast<int>(bytes), MPI_BYTE, peer, 0, bout.data(),
                             static_cast<int>(bytes), MPI_BYTE, peer, 0, group, MPI_STATUS_IGNORE),
                "MPI_Sendrecv");
          }
          break;
      }
    };
    if (bytes > static_cast<std::size_t>(INT32_MAX)) {
      MPI_Comm_free(&group);
      throw std::length_error("MpiComm::time_collective: more than 2 GiB");
    }
    for (int i = 0; i < warmup; ++i) once();
    for (int i = 0; i < reps; ++i) {
      check(MPI_Barrier(group), "MPI_Barrier");
      const double t0 = MPI_Wtime();
      once();
      double t = MPI_Wtime() - t0;
      double slowest = 0;
      check(MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, group), "MPI_Allreduce");
      times.push_back(slowest);
    }
    MPI_Comm_free(&group);
    return times;
  }

 private:
  // Returns when every rank has reached this point (a barrier that
  // watches): the ranks poll instead of blocking, and each tells rank 0 it
  // has arrived, so rank 0 knows who has not (waiting()) and the watchdog
  // can name a rank that never comes.
  void arrive() {
    constexpr int kTag = 1;
    const auto others = static_cast<std::size_t>(rank_ == 0 ? size_ - 1 : 1);
    std::vector<MPI_Request> notes(others, MPI_REQUEST_NULL);
    std::vector<char> note(others, 0);
    for (std::size_t i = 0; i < others; ++i) {
      if (rank_ == 0) {
        check(MPI_Irecv(&note[i], 1, MPI_CHAR, static_cast<int>(i) + 1, kTag, watch_, &notes[i]),
              "MPI_Irecv");
      } else {
        check(MPI_Isend(&note[i], 1, MPI_CHAR, 0, kTag, watch_, &notes[i]), "MPI_Isend");
      }
    }
    MPI_Request all = MPI_REQUEST_NULL;
    check(MPI_Ibarrier(watch_, &all), "MPI_Ibarrier");
    const Clock::time_point since = Clock::now();
    Clock::time_point give_up = watchdog_.give_up;
    if (rank_ != 0 && give_up != Clock::time_point::max()) give_up += backup_delay(rank_);
    first_silent_.store(-1, std::memory_order_relaxed);
    silent_.store(0, std::memory_order_relaxed);
    wait_start_.store(ticks(since), std::memory_order_relaxed);
    for (int polls = 0;; ++polls) {
      int done = 0;
      check(MPI_Test(&all, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (done != 0) break;
      int first = -1;
      int silent = 0;
      if (rank_ == 0 && polls >= 100) {
        for (std::size_t i = 0; i < others; ++i) {
          int arrived = 0;
          check(MPI_Test(&notes[i], &arrived, MPI_STATUS_IGNORE), "MPI_Test");
          if (arrived != 0) continue;
          if (first < 0) first = static_cast<int>(i) + 1;
          ++silent;
        }
        first_silent_.store(first, std::memory_order_relaxed);
        silent_.store(silent, std::memory_order_relaxed);
      }
      const Clock::time_point now = Clock::now();
      if (now >= give_up) {
        if (rank_ != 0) {
          first = 0;  // rank 0 would have ended the job by now
          silent = 1;
        }
        if (watchdog_.say) {
          watchdog_.say(first, silent, std::chrono::duration<double>(now - since).count());
          // The launcher forwards output through pipes and stops reading
          // them when it ends the job: give it the line first.
          std::this_thread::sleep_for(std::chrono::milliseconds(500));
        }
        abort(watchdog_.exit_code);
      }
      pause(now - since);
    }
    check(MPI_Waitall(static_cast<int>(others), notes.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
    wait_start_.store(0, std::memory_order_relaxed);
  }

  int rank_ = 0;
  int size_ = 1;
  int local_size_ = 1;
  int nodes_ = 0;
  int node_index_ = 0;
  MPI_Comm node_ = MPI_COMM_NULL;
  MPI_Win window_ = MPI_WIN_NULL;
  void* counter_ = nullptr;         // the node's counter, in the window
  MPI_Comm watch_ = MPI_COMM_NULL;  // arrive(): its own, apart from the data
  Watchdog watchdog_;
  // The collective being waited in (waiting()): its start in Clock ticks
  // (0: none), and who has not arrived yet as rank 0 sees it.
  std::atomic<std::int64_t> wait_start_{0};
  std::atomic<int> first_silent_{-1};
  std::atomic<int> silent_{0};
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
