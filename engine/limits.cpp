#include "engine/limits.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace hapmoe {

const char* to_string(StopReason reason) {
  switch (reason) {
    case StopReason::kNone:
      return "";
    case StopReason::kTimeLimit:
      return "time limit";
    case StopReason::kMemoryLimit:
      return "memory limit";
    case StopReason::kSignal:
      return "signal";
    case StopReason::kCheckpoint:
      return "checkpoint";
  }
  return "";
}

StopReason LimitWatch::check(bool unit, std::int64_t grow_bytes) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point now = Clock::now();
  if (limits_.deadline != Clock::time_point::max() && now >= limits_.deadline) {
    return StopReason::kTimeLimit;
  }
  if (unit && limits_.checks_before_deadline >= 0 &&
      checks_.fetch_add(1, std::memory_order_relaxed) >= limits_.checks_before_deadline) {
    return StopReason::kTimeLimit;
  }
  if (limits_.max_memory_bytes <= 0) return StopReason::kNone;
  if (grow_bytes > 0) {  // read now, whenever the last read was
    return resident_bytes() + grow_bytes > limits_.max_memory_bytes ? StopReason::kMemoryLimit
                                                                    : StopReason::kNone;
  }
  const std::int64_t ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  std::int64_t due = next_memory_check_ns_.load(std::memory_order_relaxed);
  if (ns < due || !next_memory_check_ns_.compare_exchange_strong(due, ns + 10'000'000,
                                                                 std::memory_order_relaxed)) {
    return StopReason::kNone;  // checked recently, or another thread checks now
  }
  return resident_bytes() > limits_.max_memory_bytes ? StopReason::kMemoryLimit : StopReason::kNone;
}

std::int64_t resident_bytes() {
  // statm: size resident shared text lib data dt, in pages.
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  long long size = 0;
  long long resident = 0;
  const int got = std::fscanf(f, "%lld %lld", &size, &resident);
  std::fclose(f);
  if (got != 2) return 0;
  return static_cast<std::int64_t>(resident) * sysconf(_SC_PAGESIZE);
}

namespace {

// cgroup v2's memory.max of this process's cgroup, 0 if none ("max") or
// unreadable.
std::int64_t cgroup_limit() {
  std::ifstream cg("/proc/self/cgroup");
  std::string line;
  std::string path;
  while (std::getline(cg, line)) {
    if (line.rfind("0::", 0) == 0) path = line.substr(3);
  }
  if (path.empty()) return 0;
  std::ifstream max("/sys/fs/cgroup" + path + "/memory.max");
  std::string value;
  if (!(max >> value) || value == "max") return 0;
  try {
    return std::stoll(value);
  } catch (const std::exception&) {
    return 0;
  }
}

}  // namespace

std::int64_t default_memory_budget(int local_ranks) {
  std::int64_t total = cgroup_limit();
  if (total <= 0) {
    const long pages = sysconf(_SC_PHYS_PAGES);
    if (pages <= 0) return 0;
    total = static_cast<std::int64_t>(pages) * sysconf(_SC_PAGESIZE);
  }
  return total / (local_ranks > 0 ? local_ranks : 1);
}

std::int64_t estimate_search_bytes(const SearchSize& size) {
  const std::int64_t span = std::int64_t{size.layers} + 1;
  const std::int64_t states = size.configs > 0 ? span * size.max_pp * size.types : 0;
  return kBaseBytes + size.configs * kBytesPerConfig + states * kBytesPerLabel +
         (size.configs > 0 ? span * size.types * kBytesPerLayer : 0);
}

}  // namespace hapmoe
