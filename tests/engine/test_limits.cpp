// --time-limit and --max-memory in the driver (engine/limits.h): a stopped
// search reports real plans, says it stopped, and accounts for every
// configuration; a search estimated too large is refused before it runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "costmodel/cost.h"
#include "costmodel/errors.h"
#include "engine/driver.h"
#include "io/inputs/cluster_io.h"
#include "io/inputs/model_io.h"

namespace hapmoe {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

void expect_accounted(const SearchResult& r) {
  EXPECT_EQ(r.stats.configs_evaluated + r.stats.configs_bounded + r.not_searched, r.stats.configs);
  std::int64_t not_searched = 0;
  for (std::size_t c = 0; c < r.configs.size(); ++c) {
    if (r.outcome_of[c] == SearchResult::kNotSearched) {
      ++not_searched;
      EXPECT_EQ(r.round_of[c], -1) << "configuration " << c;
    }
  }
  EXPECT_EQ(not_searched, r.not_searched);
}

TEST(Limits, ADeadlineInThePastSearchesNothing) {
  const Workload w = load_workload("mixtral-s");
  const ClusterSpec cl = load_cluster("paper:32-2");
  SerialComm comm;
  RunOptions run;
  run.limits.deadline = std::chrono::steady_clock::now();
  const SearchResult r = run_search(w, cl, {}, false, comm, run);
  EXPECT_EQ(r.stopped, StopReason::kTimeLimit);
  EXPECT_TRUE(r.top.empty());
  EXPECT_EQ(r.stats.configs_evaluated, 0);
  EXPECT_GT(r.not_searched, 0);
  expect_accounted(r);
}

// A search keeps the K best plans, K at least one: its first round takes
// K configurations, and none would never end.
TEST(Limits, ASearchOfNoPlansIsRefused) {
  const Workload w = load_workload("mixtral-s");
  const ClusterSpec cl = load_cluster("paper:32-2");
  SearchOptions opt;
  opt.top_k = 0;
  SerialComm comm;
  EXPECT_THROW(run_search(w, cl, opt, false, comm, RunOptions{}), ContractError);
}

// Stopped after K units (test hook), on one thread: exactly the first K
// configurations of the search order are searched, the plans are the best
// of those, and the whole search (no limit) is at least as good. The K
// fall in the first round: a search without an incumbent first takes the
// top_k configurations of least bound, here 12.
TEST(Limits, StoppedMidwayReportsTheBestOfWhatItSearched) {
  const Workload w = load_workload("mixtral-l");
  const ClusterSpec cl = load_cluster("paper:24-3");
  SerialComm comm;
  SearchOptions opt;
  opt.top_k = 12;
  const SearchResult whole = run_search(w, cl, opt, false, comm, RunOptions{});
  ASSERT_EQ(whole.stopped, StopReason::kNone);
  ASSERT_GT(whole.stats.configs_evaluated, 12);
  for (const int threads : {1, 2}) {
    RunOptions run;
    run.threads = threads;
    run.limits.checks_before_deadline = 10;
    const SearchResult r = run_search(w, cl, opt, false, comm, run);
    EXPECT_EQ(r.stopped, StopReason::kTimeLimit);
    EXPECT_EQ(r.stats.configs_evaluated, 10) << threads << " threads";
    expect_accounted(r);
    ASSERT_FALSE(r.top.empty());
    // The best of the searched configurations, first.
    double best = std::numeric_limits<double>::infinity();
    for (const ConfigOutcome& o : r.outcomes) {
      if (o.best) best = std::min(best, o.best->latency_s);
    }
    EXPECT_EQ(r.top.front().latency_s, best);
    EXPECT_GE(r.top.front().latency_s, whole.top.front().latency_s);
  }
}

// The kernel asks its CancelCheck between stage mixes and DP levels:
// cancelled at once it finds nothing; later, the best of what it searched
// (a real plan, never better than the whole search's); never, the whole.
TEST(Limits, ACancelledConfigurationKeepsTheBestOfWhatItSearched) {
  const Workload w = load_workload("mixtral-l");
  const ClusterSpec cl = load_cluster("paper:24-3");
  const SearchResult r = run_search(w, cl, {});
  ASSERT_FALSE(r.top.empty());
  const ParallelConfig pi = r.top.front().plan.parallel;
  const ProfileTables tables = tables_for(w, cl, {pi});
  const CostModel model(w, cl, tables);
  const SearchOptions opt;
  const ConfigOutcome whole = search_config(model, pi, opt);
  ASSERT_TRUE(whole.best);
  EXPECT_FALSE(whole.cancelled);
  int calls = 0;
  int limit = 0;
  const CancelCheck cancel = [&](std::int64_t) { return ++calls > limit; };
  const ConfigOutcome none = search_config(model, pi, opt, kInf, {}, &cancel);
  EXPECT_TRUE(none.cancelled);
  EXPECT_FALSE(none.best);
  const int asked = [&] {
    calls = 0;
    limit = 1 << 30;
    const ConfigOutcome all = search_config(model, pi, opt, kInf, {}, &cancel);
    EXPECT_FALSE(all.cancelled);
    EXPECT_EQ(all.best->latency_s, whole.best->latency_s);
    EXPECT_EQ(all.best->plan, whole.best->plan);
    return calls;
  }();
  ASSERT_GT(asked, 4);
  bool some_partial = false;
  for (limit = 1; limit < asked; limit += std::max(1, asked / 16)) {
    calls = 0;
    const ConfigOutcome part = search_config(model, pi, opt, kInf, {}, &cancel);
    EXPECT_TRUE(part.cancelled) << "after " << limit << " of " << asked;
    if (!part.best) continue;
    some_partial = true;
    EXPECT_GE(part.best->latency_s, whole.best->latency_s);
    EXPECT_EQ(model.evaluate(part.best->plan).latency_s, part.best->latency_s);
  }
  EXPECT_TRUE(some_partial);
}

TEST(Limits, ASearchEstimatedLargerThanTheMemoryLimitIsRefused) {
  const Workload w = load_workload("mixtral-s");
  const ClusterSpec cl = load_cluster("paper:32-2");
  SerialComm comm;
  RunOptions run;
  run.limits.max_memory_bytes = 1 << 20;
  run.limits.memory_given = true;
  try {
    run_search(w, cl, {}, false, comm, run);
    FAIL() << "not refused";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--max-memory"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("less than the search needs"), std::string::npos)
        << e.what();
  }
}

// A budget above the up-front estimate but below what the process holds
// (ballast): the search stops at its first check, cleanly.
TEST(Limits, GrowingPastTheMemoryLimitStopsTheSearch) {
  const Workload w = load_workload("mixtral-s");
  const ClusterSpec cl = load_cluster("paper:32-2");
  SerialComm comm;
  RunOptions run;
  run.limits.max_memory_bytes = kBaseBytes + (std::int64_t{16} << 20);
  run.limits.memory_given = true;
  std::vector<char> ballast(static_cast<std::size_t>(run.limits.max_memory_bytes));
  std::memset(ballast.data(), 1, ballast.size());  // resident
  ASSERT_GT(resident_bytes(), run.limits.max_memory_bytes);
  const SearchResult r = run_search(w, cl, {}, false, comm, run);
  EXPECT_EQ(r.stopped, StopReason::kMemoryLimit);
  EXPECT_EQ(r.stats.configs_evaluated, 0);
  expect_accounted(r);
  EXPECT_EQ(ballast[ballast.size() / 2], 1);
}

// tests/data/models/small-moe.json with `layers` layers (the first dense,
// as in the file).
Workload small_moe(int layers) {
  Workload w = load_workload(std::string(HAPMOE_TEST_DATA) + "/models/small-moe.json");
  w.model.num_layers = layers;
  w.model.moe_layers.assign(static_cast<std::size_t>(layers), 1);
  w.model.moe_layers[0] = 0;
  return w;
}

// Issue 21, item 5: the up-front estimate grows with the layers and the
// deepest pipeline (the DP's states), not only with the configurations.
TEST(Limits, TheEstimateGrowsWithTheLayersAndTheDepth) {
  const SearchSize base{412, 1000, 16, 2};
  SearchSize more_layers = base;
  more_layers.layers = 4000;
  SearchSize deeper = base;
  deeper.max_pp = 32;
  EXPECT_GT(estimate_search_bytes(more_layers), estimate_search_bytes(base));
  EXPECT_GT(estimate_search_bytes(deeper), estimate_search_bytes(base));
  // Each DP state of the deepest configuration holds at least one label.
  EXPECT_GE(estimate_search_bytes(more_layers) - estimate_search_bytes(base),
            std::int64_t{3000} * 16 * 2 * kBytesPerLabel);
  EXPECT_EQ(estimate_search_bytes({}), kBaseBytes);
}

// Issue 21, item 5: 4,000 layers (inside the documented 1 ... 100000) on a
// two-type cluster failed with "internal error: out of memory" (the flat
// stage memo, types x PP x (N+1)^2 entries, refused by calloc). Under a
// budget below the estimate it is refused up front, naming the layers;
// under one above it, it searches (the memo is a map) and stops cleanly.
TEST(Limits, FourThousandLayersAreRefusedUpFrontOrSearched) {
  const Workload w = small_moe(4000);
  const ClusterSpec cl = load_cluster("paper:16-1");
  SerialComm comm;
  RunOptions run;
  run.limits.max_memory_bytes = std::int64_t{80} << 20;  // above the old estimate (64 MiB)
  run.limits.memory_given = true;
  try {
    run_search(w, cl, {}, false, comm, run);
    FAIL() << "not refused";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--max-memory"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("4000 layers"), std::string::npos) << e.what();
  }
  run.limits = {};
  run.limits.checks_before_deadline = 3;  // three units, then the deadline
  const SearchResult r = run_search(w, cl, {}, false, comm, run);
  EXPECT_EQ(r.stopped, StopReason::kTimeLimit);
  EXPECT_LE(r.stats.configs_evaluated, 3);
  expect_accounted(r);
}

// A search that a limit stops after its seed (docs/search.md, "The seed
// incumbent") reports the plans the seed's budgeted searches found -- real
// plans of Pi, at the latency the cost model gives them -- instead of
// none. Here the time limit passes at the first unit of the first round.
TEST(Limits, AStopAfterTheSeedReportsTheSeedsPlans) {
  const Workload w = load_workload("mixtral-s");
  const ClusterSpec cl = load_cluster("paper:32-2");
  SerialComm comm;
  RunOptions run;
  run.seed_from = 1;
  run.limits.checks_before_deadline = 0;
  const SearchResult r = run_search(w, cl, {}, false, comm, run);
  EXPECT_EQ(r.stopped, StopReason::kTimeLimit);
  EXPECT_EQ(r.stats.configs_evaluated, 0);
  expect_accounted(r);
  ASSERT_TRUE(std::isfinite(r.seed));
  const int k = SearchOptions{}.top_k;
  ASSERT_EQ(static_cast<int>(r.top.size()), k);
  // The seed is the K-th best of the K plans it found.
  EXPECT_EQ(r.top.back().latency_s, r.seed);
  const SearchResult whole = run_search(w, cl, {}, false, comm, RunOptions{});
  ASSERT_FALSE(whole.top.empty());
  for (std::size_t i = 0; i < r.top.size(); ++i) {
    const Plan& plan = r.top[i].plan;
    const ProfileTables tables = tables_for(w, cl, {plan.parallel});
    const CostModel model(w, cl, tables);
    EXPECT_EQ(model.evaluate(plan).latency_s, r.top[i].latency_s) << i;
    EXPECT_GE(r.top[i].latency_s, whole.top[std::min(i, whole.top.size() - 1)].latency_s) << i;
    for (std::size_t j = 0; j < i; ++j) EXPECT_NE(r.top[j].plan.parallel, plan.parallel) << i;
  }
  // Not stopped, the same search holds no seed plan it did not search.
  RunOptions seeded;
  seeded.seed_from = 1;
  const SearchResult full = run_search(w, cl, {}, false, comm, seeded);
  ASSERT_EQ(full.top.size(), whole.top.size());
  for (std::size_t i = 0; i < full.top.size(); ++i) EXPECT_EQ(full.top[i].plan, whole.top[i].plan);
}

// Issue 21, item 5: a 10 s limit ended at 13.3 s on a 1,000-layer model:
// the kernel asked only between DP levels, and a level of 1,000 layers
// took seconds. It now asks every kCancelEvery labels inside a level too:
// stopped at its K-th ask, a configuration has done at most about K x
// kCancelEvery transitions (each extends at least one label).
TEST(Limits, AManyLayerSearchAsksInsideItsLevels) {
  const Workload w = small_moe(1000);
  const ClusterSpec cl = load_cluster("paper:16-1");
  ParallelConfig pi;
  pi.pp = 4;
  pi.tp = 4;
  pi.ep = 4;
  const ProfileTables tables = tables_for(w, cl, {pi});
  const CostModel model(w, cl, tables);
  const SearchOptions opt;
  for (const int k : {2, 3, 5, 8}) {
    int calls = 0;
    const CancelCheck cancel = [&](std::int64_t) { return ++calls >= k; };
    const ConfigOutcome out = search_config(model, pi, opt, kInf, {}, &cancel);
    EXPECT_TRUE(out.cancelled) << k;
    EXPECT_EQ(calls, k);
    EXPECT_LE(out.stats.transitions, std::int64_t{k} * 2 * kCancelEvery) << k;
    if (out.best) {
      EXPECT_EQ(model.evaluate(out.best->plan).latency_s, out.best->latency_s);
    }
  }
}

// The kernel asks before its arena of labels grows, with the bytes of the
// new block: refused, the configuration stops there.
TEST(Limits, TheKernelAsksBeforeItsArenaGrows) {
  const Workload w = small_moe(1000);
  const ClusterSpec cl = load_cluster("paper:16-1");
  ParallelConfig pi;
  pi.pp = 4;
  pi.tp = 4;
  pi.ep = 4;
  const ProfileTables tables = tables_for(w, cl, {pi});
  const CostModel model(w, cl, tables);
  std::int64_t asked_bytes = 0;
  const CancelCheck cancel = [&](std::int64_t grow) {
    asked_bytes = std::max(asked_bytes, grow);
    return grow > (std::int64_t{1} << 20);  // no block over 1 MiB
  };
  const ConfigOutcome out = search_config(model, pi, {}, kInf, {}, &cancel);
  EXPECT_TRUE(out.cancelled);
  EXPECT_GT(asked_bytes, std::int64_t{1} << 20);
}

// LimitWatch::check with the bytes about to be allocated: the memory limit
// counts them, read at once.
TEST(Limits, TheWatchCountsTheBytesAboutToBeAllocated) {
  SearchLimits limits;
  limits.max_memory_bytes = resident_bytes() + (std::int64_t{64} << 20);
  LimitWatch watch(limits);
  EXPECT_EQ(watch.check(false), StopReason::kNone);
  EXPECT_EQ(watch.check(false, std::int64_t{1} << 20), StopReason::kNone);
  EXPECT_EQ(watch.check(false, std::int64_t{128} << 20), StopReason::kMemoryLimit);
}

TEST(Limits, DefaultBudgetIsPositiveAndSharedByTheNodesRanks) {
  const std::int64_t one = default_memory_budget(1);
  ASSERT_GT(one, 0);
  EXPECT_NEAR(static_cast<double>(default_memory_budget(4)), static_cast<double>(one) / 4.0, 1.0);
  EXPECT_GT(resident_bytes(), 0);
}

}  // namespace
}  // namespace hapmoe
