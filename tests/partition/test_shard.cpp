// The work split of the distributed engine (partition/shard.h), without MPI.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "costmodel/errors.h"
#include "partition/shard.h"

namespace hapmoe {
namespace {

TEST(Shard, EveryItemGoesToExactlyOneWorkerAndLoadsAddUp) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    const int items = static_cast<int>(rng() % 300);
    const int workers = 1 + static_cast<int>(rng() % 40);
    std::vector<double> work(static_cast<std::size_t>(items));
    std::lognormal_distribution<double> size(0.0, 2.0);  // a few huge items
    for (double& w : work) w = size(rng);
    const Shard s = lpt_split(work, workers);
    ASSERT_EQ(s.owner.size(), work.size());
    ASSERT_EQ(s.load.size(), static_cast<std::size_t>(workers));
    std::vector<double> load(static_cast<std::size_t>(workers), 0.0);
    for (std::size_t k = 0; k < work.size(); ++k) {
      ASSERT_GE(s.owner[k], 0);
      ASSERT_LT(s.owner[k], workers);
      load[static_cast<std::size_t>(s.owner[k])] += work[k];
    }
    for (int w = 0; w < workers; ++w) {
      EXPECT_NEAR(load[static_cast<std::size_t>(w)], s.load[static_cast<std::size_t>(w)],
                  1e-9 * (1.0 + load[static_cast<std::size_t>(w)]));
    }
    // Graham: LPT's largest load is at most 4/3 of the optimum, and the
    // optimum is at least the mean load and the largest item.
    const double total = std::accumulate(work.begin(), work.end(), 0.0);
    const double largest = work.empty() ? 0.0 : *std::max_element(work.begin(), work.end());
    const double optimum_floor = std::max(total / workers, largest);
    const double makespan = *std::max_element(s.load.begin(), s.load.end());
    EXPECT_LE(makespan, 4.0 / 3.0 * optimum_floor * (1.0 + 1e-12));
  }
}

TEST(Shard, ImbalanceIsMaxOverMean) {
  const std::vector<double> even = {3, 3, 3, 3};
  EXPECT_DOUBLE_EQ(lpt_split(even, 2).imbalance(), 1.0);
  EXPECT_DOUBLE_EQ(lpt_split(even, 4).imbalance(), 1.0);
  // One item dominates: it alone sets the largest load.
  const std::vector<double> skewed = {10, 1, 1};
  const Shard s = lpt_split(skewed, 2);
  EXPECT_DOUBLE_EQ(s.imbalance(), 10.0 / 6.0);
  EXPECT_EQ(s.owner[0], 0);
  EXPECT_EQ(s.owner[1], 1);
  EXPECT_EQ(s.owner[2], 1);
  // More workers than items: idle workers count in the mean.
  const Shard idle = lpt_split(std::vector<double>{1.0}, 4);
  EXPECT_DOUBLE_EQ(idle.imbalance(), 4.0);
  EXPECT_DOUBLE_EQ(lpt_split(std::vector<double>{}, 3).imbalance(), 1.0);
}

TEST(Shard, LargestFirstToTheLeastLoaded) {
  // 7, 5, 4, 3, 3 over 2: 7 | 5, then 4 -> the 5 side (9), the first 3 ->
  // the 7 side (10), the second 3 -> the 9 side (12).
  const Shard s = lpt_split(std::vector<double>{3, 7, 4, 5, 3}, 2);
  EXPECT_EQ(s.owner, (std::vector<int>{0, 0, 1, 1, 1}));
  EXPECT_DOUBLE_EQ(s.load[0], 10.0);
  EXPECT_DOUBLE_EQ(s.load[1], 12.0);
}

TEST(Shard, DependsOnlyOnItsArguments) {
  std::vector<double> work(1000);
  std::mt19937 rng(5);
  for (double& w : work) w = static_cast<double>(rng() % 17);  // many ties
  const Shard a = lpt_split(work, 7);
  const Shard b = lpt_split(work, 7);
  EXPECT_EQ(a.owner, b.owner);
}

TEST(Shard, RejectsNoWorkersAndNegativeWork) {
  EXPECT_THROW(lpt_split(std::vector<double>{1.0}, 0), ContractError);
  EXPECT_THROW(lpt_split(std::vector<double>{1.0, -1.0}, 2), ContractError);
}

}  // namespace
}  // namespace hapmoe
