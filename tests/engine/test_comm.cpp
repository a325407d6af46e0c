// The Comm pieces that need no MPI: the node's work counter (claim) and
// its serial twin.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "engine/comm.h"

namespace hapmoe {
namespace {

TEST(Comm, ClaimHandsOutEveryIndexOnceAndStopsAtTheLimit) {
  alignas(std::atomic_ref<std::int64_t>::required_alignment) std::int64_t counter = 0;
  std::int64_t base = 0;
  for (const std::int64_t batch : {0, 1, 7, 1000, 3}) {
    const std::int64_t limit = base + batch;
    std::vector<std::atomic<int>> seen(static_cast<std::size_t>(batch));
    std::vector<std::thread> workers;
    for (int t = 0; t < 4; ++t) {
      workers.emplace_back([&] {
        for (std::int64_t v = claim_below(std::atomic_ref(counter), limit); v >= 0;
             v = claim_below(std::atomic_ref(counter), limit)) {
          ASSERT_GE(v, base);
          ASSERT_LT(v, limit);
          seen[static_cast<std::size_t>(v - base)].fetch_add(1);
        }
      });
    }
    for (std::thread& w : workers) w.join();
    for (std::int64_t k = 0; k < batch; ++k) {
      EXPECT_EQ(seen[static_cast<std::size_t>(k)].load(), 1) << "index " << k << " of " << batch;
    }
    // The counter ends exactly at the limit, so the next batch's base is
    // known to everyone without talking.
    EXPECT_EQ(counter, limit);
    EXPECT_EQ(claim_below(std::atomic_ref(counter), limit), -1);
    EXPECT_EQ(counter, limit);
    base = limit;
  }
}

TEST(Comm, SerialCommIsOneNodeWithItsOwnCounter) {
  SerialComm comm;
  EXPECT_EQ(comm.nodes(), 1);
  EXPECT_EQ(comm.node(), 0);
  EXPECT_EQ(comm.claimed(), 0);
  EXPECT_EQ(comm.claim(2), 0);
  EXPECT_EQ(comm.claim(2), 1);
  EXPECT_EQ(comm.claim(2), -1);
  EXPECT_EQ(comm.claimed(), 2);
  EXPECT_EQ(comm.allgather("x"), std::vector<std::string>{"x"});
}

}  // namespace
}  // namespace hapmoe
