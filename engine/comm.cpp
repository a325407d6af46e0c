#include "engine/comm.h"

#include <algorithm>
#include <cstdlib>

#include "costmodel/errors.h"

namespace hapmoe {

static_assert(std::atomic_ref<std::int64_t>::is_always_lock_free,
              "the node counter lives in memory shared between processes");

std::int64_t claim_below(std::atomic_ref<std::int64_t> counter, std::int64_t limit) {
  std::int64_t v = counter.load(std::memory_order_relaxed);
  while (v < limit) {
    if (counter.compare_exchange_weak(v, v + 1, std::memory_order_relaxed)) return v;
  }
  return -1;
}

void SerialComm::abort(int code) { std::_Exit(code); }

std::vector<double> SerialComm::time_collective(Primitive /*prim*/, std::size_t /*bytes*/,
                                                int color, int /*warmup*/, int reps) {
  if (color < 0) return {};
  return std::vector<double>(static_cast<std::size_t>(std::max(reps, 0)), 0.0);
}

std::string first_error(Comm& comm, const std::string& mine) {
  const std::vector<std::string> all = comm.allgather(mine);
  for (const std::string& e : all) {
    if (!e.empty()) return e;
  }
  return {};
}

}  // namespace hapmoe

namespace hapmoe {

void read_on_every_rank(Comm& comm, const std::function<void()>& read) {
  std::string failed;
  try {
    read();
  } catch (const InputError& e) {
    failed = comm.size() > 1 ? "rank " + std::to_string(comm.rank()) + ": " + e.what() : e.what();
  }
  if (const std::string first = first_error(comm, failed); !first.empty()) {
    throw InputError("", first);
  }
}

}  // namespace hapmoe
