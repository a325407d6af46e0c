// Limits of a search (--time-limit, --max-memory; docs/testing.md, "Faults
// and limits"): checked by the driver before each unit of work and, through
// the kernel's CancelCheck, between the stage mixes and DP levels of the
// one in progress. Every result stays a real, evaluated plan: what stops
// early is the proof of optimality, never the plans' correctness.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace hapmoe {

// Why a search ended before its end. kSignal: the caller asked it to stop
// (RunOptions::stop_requested: plan's SIGTERM/SIGUSR1), units in flight
// finished, not cut short. kCheckpoint marks a snapshot taken while the
// search went on (RunOptions::checkpoint), never a finished search.
enum class StopReason : std::uint8_t {
  kNone = 0,
  kTimeLimit = 1,
  kMemoryLimit = 2,
  kSignal = 3,
  kCheckpoint = 4,
};

// "time limit", "memory limit", "signal", "checkpoint" ("" for kNone).
const char* to_string(StopReason reason);

struct SearchLimits {
  // No work starts after this instant, and work in progress stops at its
  // next check.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  // The same while this process's resident set is larger; 0 = no limit. Also the budget of the
  // up-front estimate (estimate_search_bytes).
  std::int64_t max_memory_bytes = 0;
  // Whether max_memory_bytes was given (--max-memory) or is the default
  // budget (default_memory_budget): for the messages.
  bool memory_given = false;
  // Test hook: the deadline passes after this many checks before a unit
  // (units started on this process), so a test can stop a search at a
  // known point; -1 never.
  std::int64_t checks_before_deadline = -1;

  bool any() const {
    return deadline != std::chrono::steady_clock::time_point::max() || max_memory_bytes > 0 ||
           checks_before_deadline >= 0;
  }
};

// Watches the limits of one search; check() may be called from any thread.
// The resident set is read at most every 10 ms (it costs a read of /proc).
class LimitWatch {
 public:
  explicit LimitWatch(const SearchLimits& limits) : limits_(limits) {}

  // The first limit reached now (time, then memory), or kNone. `unit`:
  // the check before a unit of the search (what the test hook counts),
  // not one of the set-up's. `grow_bytes` > 0: the caller is about to
  // allocate that much at once, so the resident set is read now and the
  // memory limit is reached if the two together pass it.
  StopReason check(bool unit, std::int64_t grow_bytes = 0);

 private:
  SearchLimits limits_;
  std::atomic<std::int64_t> next_memory_check_ns_{0};
  std::atomic<std::int64_t> checks_{0};
};

// This process's resident set size in bytes (/proc/self/statm); 0 if it
// cannot be read.
std::int64_t resident_bytes();

// The memory this process may use when no limit is given: the cgroup's
// limit (memory.max) or, without one, the machine's memory, shared by the
// `local_ranks` processes of the node; 0 if neither can be read.
std::int64_t default_memory_budget(int local_ranks);

// What the up-front estimate reads: the same on every rank (so every rank
// refuses alike), known before anything large is allocated.
struct SearchSize {
  std::int64_t configs = 0;  // configurations of the space
  int layers = 0;            // the model's layers N
  int max_pp = 0;            // the deepest pipeline among the configurations
  int types = 0;             // the cluster's device types
};

// The up-front estimate: kBaseBytes for the process, its libraries and the
// tables; kBytesPerConfig for each configuration of the space (its record,
// bound, estimate, order and the gathered copies); and the kernel's floor
// for the deepest configuration, kBytesPerLabel for each of its
// (N + 1) x PP x types DP states holding a front of one label (a label in
// the arena and in the level's front, its slot in the fronts' map, its
// entry in the level's order and ranks; larger fronts multiply it), plus
// the per-layer arrays of its evaluator. The fronts' real sizes are not
// known before the search (hundreds of labels on heterogeneous clusters at
// hundreds of layers): the search's own growth is watched while it runs
// (SearchLimits::max_memory_bytes; the kernel asks before its arena grows),
// as is the scratch of each further thread.
// Measured (bench/README.md, "Limits"): 153 MiB peak for the large case's
// 603,873 configurations on one thread (this estimate: 156 MiB). 4,000
// layers on paper:16-1 (394 configurations, PP up to 16, two types): 87 MiB
// (the old estimate, configurations only: 64 MiB). The 1,000-layer model
// on paper:16-1 grows with its fronts past 600 MiB within 20 s; under
// --max-memory 200M and 400M the run-time checks held its peak under the
// limit (194 and 323 MiB; 345 and 662 MiB before they asked inside a level
// and before the arena grows).
inline constexpr std::int64_t kBaseBytes = std::int64_t{64} << 20;
inline constexpr std::int64_t kBytesPerConfig = 160;
inline constexpr std::int64_t kBytesPerLabel = 184;
inline constexpr std::int64_t kBytesPerLayer = 64;
std::int64_t estimate_search_bytes(const SearchSize& size);

}  // namespace hapmoe
