// The job-wide knobs (engine/job_space.h): the job search's best is the
// best of every variant searched on its own, its per-dimension figures are
// exact, and offload takes the fastest step where nothing fits without it.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "costmodel/errors.h"
#include "engine/comm.h"
#include "engine/driver.h"
#include "engine/job_space.h"
#include "engine/search.h"
#include "engine/stage_memo.h"
#include "io/inputs/cluster_io.h"
#include "io/inputs/model_io.h"
#include "partition/config_space.h"

namespace hapmoe {
namespace {

// A variant searched alone, unbounded by anything found before.
SearchResult alone(const Workload& w, const ClusterSpec& c, const JobVariant& v,
                   SearchOptions opt) {
  opt.space.vpp = v.vpp;
  return run_search(apply(w, v), c, opt);
}

// Models and clusters whose Pi the tests of its enumeration compare.
const std::vector<std::pair<std::string, std::string>> kPiCases = {
    {"mixtral-s", "paper:16-2"},
    {"deepseek-v3", "H800:64,MI300X:64,910B:64"},
    {"llama2-7b", "H800:32,910B:32"}};

// Two searches of one Pi that must find the same: their plans, counters,
// bounds and step bounds.
void expect_same_search(const SearchResult& a, const SearchResult& b, const std::string& what) {
  ASSERT_EQ(a.top.size(), b.top.size()) << what;
  for (std::size_t k = 0; k < a.top.size(); ++k) {
    EXPECT_EQ(a.top[k].plan, b.top[k].plan) << what;
    EXPECT_EQ(a.top[k].latency_s, b.top[k].latency_s) << what;
  }
  EXPECT_EQ(a.stats.configs_evaluated, b.stats.configs_evaluated) << what;
  EXPECT_EQ(a.stats.transitions, b.stats.transitions) << what;
  EXPECT_EQ(a.lower_bounds, b.lower_bounds) << what;
  EXPECT_EQ(a.step_bounds, b.step_bounds) << what;
}

// The workload's own values but these.
JobVariant variant_of(const Workload& w, int micro_batch, int vpp, Precision precision) {
  JobVariant v = base_variant(w);
  v.micro_batch = micro_batch;
  v.vpp = vpp;
  v.precision = precision;
  return v;
}

// Pi of a variant, enumerated.
std::vector<ParallelConfig> pi_of(const Workload& w, const ClusterSpec& c, const JobVariant& v) {
  SpaceOptions so;
  so.vpp = v.vpp;
  return enumerate_configs(apply(w, v), c, so);
}

unsigned dims_differing(const JobVariant& v, const JobVariant& base) {
  unsigned d = 0;
  if (v.micro_batch != base.micro_batch) d |= job_dim_bit(JobDim::kMicroBatch);
  if (v.vpp != base.vpp) d |= job_dim_bit(JobDim::kVpp);
  if (v.fsdp != base.fsdp || v.distributed_optimizer != base.distributed_optimizer) {
    d |= job_dim_bit(JobDim::kSharding);
  }
  if (v.offload != base.offload) d |= job_dim_bit(JobDim::kOffload);
  if (v.dispatcher != base.dispatcher) d |= job_dim_bit(JobDim::kDispatcher);
  if (v.precision != base.precision) d |= job_dim_bit(JobDim::kPrecision);
  return d;
}

// Ranks as threads of this process, on one node: each rank's Comm
// (rank(k)) gathers through shared memory, and the collectives are
// counted.
class ThreadRanks {
 public:
  explicit ThreadRanks(int n) : slots_(static_cast<std::size_t>(n)) {
    for (int k = 0; k < n; ++k) ranks_.emplace_back(*this, k);
  }
  Comm& rank(int k) { return ranks_[static_cast<std::size_t>(k)]; }
  int collectives() const { return collectives_; }

 private:
  class Rank final : public Comm {
   public:
    Rank(ThreadRanks& all, int rank) : all_(all), rank_(rank) {}
    int rank() const override { return rank_; }
    int size() const override { return static_cast<int>(all_.slots_.size()); }
    int local_size() const override { return size(); }
    int nodes() const override { return 1; }
    int node() const override { return 0; }
    std::vector<std::string> allgather(const std::string& bytes) override {
      return all_.gather(rank_, bytes);
    }
    std::int64_t claim(std::int64_t limit) override {
      return claim_below(std::atomic_ref<std::int64_t>(all_.counter_), limit);
    }
    std::int64_t claimed() override { return std::atomic_ref<std::int64_t>(all_.counter_).load(); }
    [[noreturn]] void abort(int /*code*/) override { std::abort(); }
    std::vector<double> time_collective(Primitive, std::size_t, int, int, int) override {
      return {};
    }

   private:
    ThreadRanks& all_;
    int rank_;
  };

  // The last to arrive publishes every rank's bytes; the next gather
  // cannot complete (so cannot overwrite them) before every rank has
  // copied them and arrived again.
  std::vector<std::string> gather(int rank, const std::string& bytes) {
    std::unique_lock<std::mutex> lock(mutex_);
    const std::int64_t generation = generation_;
    slots_[static_cast<std::size_t>(rank)] = bytes;
    if (++arrived_ == static_cast<int>(slots_.size())) {
      gathered_ = slots_;
      arrived_ = 0;
      ++generation_;
      ++collectives_;
      all_in_.notify_all();
    } else {
      all_in_.wait(lock, [&] { return generation_ != generation; });
    }
    return gathered_;
  }

  std::vector<Rank> ranks_;
  std::mutex mutex_;
  std::condition_variable all_in_;
  std::vector<std::string> slots_;
  std::vector<std::string> gathered_;
  int arrived_ = 0;
  std::int64_t generation_ = 0;
  int collectives_ = 0;
  alignas(8) std::int64_t counter_ = 0;
};

// The job search enumerates Pi once per (micro-batch, vpp, precision) and
// gives it to the other variants' searches: Pi must not depend on the
// other knobs (sharding, offload, dispatcher, job-wide recompute).
TEST(JobSpace, PiDependsOnlyOnMicroBatchVppAndPrecision) {
  int compared = 0;
  for (const auto& [model, cluster] : kPiCases) {
    const Workload w = load_workload(model);
    const ClusterSpec c = load_cluster(cluster);
    for (const int b : {1, 2}) {
      for (const int vpp : {1, 2}) {
        for (const Precision p : {Precision::kBf16, Precision::kFp16}) {
          const JobVariant v = variant_of(w, b, vpp, p);
          const std::vector<ParallelConfig> pi = pi_of(w, c, v);
          ASSERT_FALSE(pi.empty()) << model;
          std::vector<JobVariant> others(6, v);
          others[0].distributed_optimizer = false;
          others[1].fsdp = Fsdp::kOptimGradsParams;
          others[2].offload = 0.5;
          others[3].offload_to = 1.0;
          others[3].offload = 0.25;
          others[4].dispatcher = Dispatcher::kAllGather;
          others[5].recompute = RecomputeSetting{RecomputeKind::kFull, 1};
          for (const JobVariant& o : others) {
            EXPECT_EQ(pi_of(w, c, o), pi)
                << model << " on " << cluster << ": " << to_string(o, w.model.is_moe());
            ++compared;
          }
        }
      }
    }
  }
  EXPECT_EQ(compared, 3 * 2 * 2 * 2 * 6);
}

TEST(JobSpace, BestIsTheBestOfEveryVariantAndEachDimensionsGainIsExact) {
  const Workload w = load_workload("mixtral-s");
  for (const char* name : {"paper:16-2", "H100:16"}) {
    const ClusterSpec c = load_cluster(name);
    JobSpace space;
    space.dims = (1u << kNumJobDims) - 1;
    space.max_micro_batch = 4;
    space.max_vpp = 3;
    SearchOptions opt;
    opt.top_k = 3;
    SerialComm comm;
    const JobSearchResult job = run_job_search(w, c, opt, space, comm, RunOptions{});
    ASSERT_FALSE(job.result.top.empty()) << name;
    const JobVariant base = base_variant(w);
    double best = std::numeric_limits<double>::infinity();
    double dim_best[kNumJobDims];
    std::fill(dim_best, dim_best + kNumJobDims, std::numeric_limits<double>::infinity());
    std::set<std::tuple<int, int, int, int, int, int, double, double>> seen;
    std::set<int> dims_used;
    Plan best_plan;
    for (const VariantOutcome& o : job.variants) {
      const JobVariant& v = o.variant;
      EXPECT_TRUE(seen.insert({v.micro_batch, v.vpp, static_cast<int>(v.fsdp),
                               static_cast<int>(v.dispatcher), static_cast<int>(v.precision),
                               v.distributed_optimizer, v.offload, v.offload_to})
                      .second)
          << name << ": a variant twice: " << to_string(v, true);
      // A range of offload fractions is searched as a bound, its plans
      // never kept (docs/search.md).
      if (!o.refused.empty() || v.offload_to > 0) continue;
      const SearchResult r = alone(w, c, v, opt);
      const double b =
          r.top.empty() ? std::numeric_limits<double>::infinity() : r.top.front().latency_s;
      // Searched against earlier plans, a variant's best is exact or cut.
      if (!o.bounded) {
        EXPECT_EQ(o.best, b) << to_string(v, true);
      }
      if (b < best) {
        best = b;
        best_plan = r.top.front().plan;
      }
      const unsigned diff = dims_differing(v, base);
      for (int d = 0; d < kNumJobDims; ++d) {
        if (diff == 0 || diff == (1u << d)) dim_best[d] = std::min(dim_best[d], b);
        if ((diff & (1u << d)) != 0) dims_used.insert(d);
      }
    }
    EXPECT_EQ(job.result.top.front().latency_s, best) << name;
    EXPECT_EQ(job.result.top.front().plan, best_plan) << name;
    // The result kept holds its variant's Pi (the job search leaves it
    // out of the others').
    SpaceOptions so = opt.space;
    so.vpp = job.best.vpp;
    EXPECT_EQ(job.result.configs, enumerate_configs(apply(w, job.best), c, so)) << name;
    EXPECT_EQ(job.result.outcome_of.size(), job.result.configs.size()) << name;
    for (int d = 0; d < kNumJobDims; ++d) {
      EXPECT_EQ(job.dim_best[d], dim_best[d]) << name << " " << to_string(static_cast<JobDim>(d));
    }
    // Micro-batch, VPP, sharding and the dispatcher all vary, and the
    // knobs beat the workload's own values.
    for (const JobDim d :
         {JobDim::kMicroBatch, JobDim::kVpp, JobDim::kSharding, JobDim::kDispatcher}) {
      EXPECT_TRUE(dims_used.count(static_cast<int>(d))) << name << " " << to_string(d);
    }
    EXPECT_LT(best, job.base_best) << name;
    EXPECT_GE(job.variants.size(), 50u) << name;
    // Every variant's units of work, its rounds after the earlier ones'.
    std::int64_t evaluated = 0;
    for (const VariantOutcome& o : job.variants) evaluated += o.stats.configs_evaluated;
    EXPECT_EQ(static_cast<std::int64_t>(job.units.size()), evaluated) << name;
    for (std::size_t u = 1; u < job.units.size(); ++u) {
      EXPECT_LE(job.units[u - 1].round, job.units[u].round) << name << " " << u;
    }
    ASSERT_FALSE(job.units.empty());
    EXPECT_EQ(job.units.back().round, job.rounds - 1) << name;
  }
}

// Over several ranks, a job search whose every variant is small
// (RunOptions::split_above) runs whole on rank 0 with one collective, not
// one per variant; split (split_above 0) it makes a collective per round.
// Both give every rank what one rank finds.
// Each rank searches its share of the seed's sample, and the ranks gather
// the plans found: a search that a limit stops after its seed reports the
// same plans on every rank as on one (Limits.AStopAfterTheSeedReportsTheSeedsPlans).
// --overlaps recipe: every variant runs the overlaps of Megatron's recipes
// for its sharding, on top of those given, and the job search stays exact:
// its best is the best of every variant searched alone with its overlaps.
// Overlaps only hide, so it is never slower than the given overlaps'
// search, and here faster (mixtral-s on 16 H100: the DP sync of few
// micro-batches).
TEST(JobSpace, RecipeOverlapsFollowEachVariantsShardingAndStayExact) {
  Workload w = load_workload("mixtral-s");
  w.training.overlap.tp_comm = true;  // given: kept under the recipe too
  const ClusterSpec c = load_cluster("H100:16");
  JobSpace space;
  space.dims = job_dim_bit(JobDim::kSharding) | job_dim_bit(JobDim::kMicroBatch);
  space.max_micro_batch = 4;
  SearchOptions opt;
  opt.top_k = 2;
  SerialComm comm;
  const JobSearchResult given = run_job_search(w, c, opt, space, comm, RunOptions{});
  space.overlaps = JobOverlaps::kRecipe;
  const JobSearchResult recipe = run_job_search(w, c, opt, space, comm, RunOptions{});
  ASSERT_FALSE(given.result.top.empty());
  ASSERT_FALSE(recipe.result.top.empty());
  const Overlap as_given = w.training.overlap;
  double best = std::numeric_limits<double>::infinity();
  std::set<bool> param_gathers;
  for (const VariantOutcome& o : recipe.variants) {
    const JobVariant& v = o.variant;
    EXPECT_EQ(v.overlap, recipe_overlap(as_given, v.distributed_optimizer)) << to_string(v, true);
    EXPECT_TRUE(v.overlap.grad_reduce && v.overlap.tp_comm) << to_string(v, true);
    param_gathers.insert(v.overlap.param_gather);
    if (!o.refused.empty() || v.offload_to > 0) continue;
    const SearchResult r = alone(w, c, v, opt);
    if (!r.top.empty()) best = std::min(best, r.top.front().latency_s);
  }
  EXPECT_EQ(recipe.result.top.front().latency_s, best);
  EXPECT_EQ(recipe.best.overlap, recipe_overlap(as_given, recipe.best.distributed_optimizer));
  for (const VariantOutcome& o : given.variants) EXPECT_EQ(o.variant.overlap, as_given);
  EXPECT_LT(recipe.result.top.front().latency_s, given.result.top.front().latency_s);
  EXPECT_EQ(param_gathers, std::set<bool>{true});  // ZeRO-1, ZeRO-2, FSDP

  // Without the distributed optimizer (sharding DP), no parameter gather:
  // Megatron refuses --overlap-param-gather there.
  w.training.distributed_optimizer = false;
  const JobSearchResult dp = run_job_search(w, c, opt, space, comm, RunOptions{});
  bool plain_dp = false;
  for (const VariantOutcome& o : dp.variants) {
    EXPECT_TRUE(o.refused.empty()) << o.refused;
    EXPECT_EQ(o.variant.overlap.param_gather, o.variant.distributed_optimizer);
    plain_dp = plain_dp || !o.variant.distributed_optimizer;
  }
  EXPECT_TRUE(plain_dp);
}

TEST(Limits, TheSeedsPlansOfAStoppedSearchAreTheSameOnEveryRank) {
  const Workload w = load_workload("mixtral-s");
  const ClusterSpec c = load_cluster("paper:32-2");
  RunOptions run;
  run.seed_from = 1;
  run.split_above = 0;  // split over the ranks, small as it is
  run.limits.checks_before_deadline = 0;
  SerialComm serial;
  const SearchResult one = run_search(w, c, {}, false, serial, run);
  ASSERT_EQ(one.stopped, StopReason::kTimeLimit);
  ASSERT_EQ(static_cast<int>(one.top.size()), SearchOptions{}.top_k);
  for (const int n : {2, 3}) {
    ThreadRanks ranks(n);
    std::vector<SearchResult> got(static_cast<std::size_t>(n));
    std::vector<std::thread> others;
    for (int k = 1; k < n; ++k) {
      others.emplace_back([&, k] {
        got[static_cast<std::size_t>(k)] = run_search(w, c, {}, false, ranks.rank(k), run);
      });
    }
    got[0] = run_search(w, c, {}, false, ranks.rank(0), run);
    for (std::thread& t : others) t.join();
    for (const SearchResult& r : got) {
      EXPECT_EQ(r.stopped, StopReason::kTimeLimit) << n;
      EXPECT_EQ(r.seed, one.seed) << n;
      ASSERT_EQ(r.top.size(), one.top.size()) << n;
      for (std::size_t i = 0; i < r.top.size(); ++i) {
        EXPECT_EQ(r.top[i].plan, one.top[i].plan) << n << " " << i;
        EXPECT_EQ(r.top[i].latency_s, one.top[i].latency_s) << n << " " << i;
      }
    }
  }
}

TEST(JobSpace, SmallVariantsRunAsOneJobOnRankZero) {
  const Workload w = load_workload("mixtral-s");
  const ClusterSpec c = load_cluster("paper:16-2");
  const JobSpace space = parse_job_space("micro-batch,vpp,sharding", "test");
  const SearchOptions opt;
  SerialComm serial;
  const JobSearchResult one = run_job_search(w, c, opt, space, serial, RunOptions{});
  ASSERT_FALSE(one.result.top.empty());
  ASSERT_GE(one.variants.size(), 20u);
  for (const double split_above : {kSplitAbove, 0.0}) {
    RunOptions run;
    run.split_above = split_above;
    ThreadRanks ranks(2);
    std::vector<JobSearchResult> got(2);
    std::thread other([&] { got[1] = run_job_search(w, c, opt, space, ranks.rank(1), run); });
    got[0] = run_job_search(w, c, opt, space, ranks.rank(0), run);
    other.join();
    for (const JobSearchResult& j : got) {
      EXPECT_EQ(j.best_s, one.best_s) << split_above;
      EXPECT_EQ(j.best, one.best) << split_above;
      ASSERT_EQ(j.result.top.size(), one.result.top.size()) << split_above;
      EXPECT_EQ(j.result.top.front().plan, one.result.top.front().plan) << split_above;
      EXPECT_EQ(j.result.configs, one.result.configs) << split_above;
      ASSERT_EQ(j.variants.size(), one.variants.size()) << split_above;
      for (std::size_t v = 0; v < j.variants.size(); ++v) {
        EXPECT_EQ(j.variants[v].variant, one.variants[v].variant) << split_above << " " << v;
        EXPECT_EQ(j.variants[v].best, one.variants[v].best) << split_above << " " << v;
        EXPECT_EQ(j.variants[v].stats.transitions, one.variants[v].stats.transitions);
      }
      EXPECT_EQ(j.stats.configs_evaluated, one.stats.configs_evaluated) << split_above;
      EXPECT_EQ(j.stats.transitions, one.stats.transitions) << split_above;
      EXPECT_EQ(j.units.size(), one.units.size()) << split_above;
      EXPECT_EQ(j.rounds, one.rounds) << split_above;
      for (int d = 0; d < kNumJobDims; ++d) EXPECT_EQ(j.dim_best[d], one.dim_best[d]);
      EXPECT_EQ(j.base_best, one.base_best) << split_above;
      EXPECT_EQ(j.result.ranks.size(), 2u) << split_above;
    }
    if (split_above > 0) {
      EXPECT_EQ(ranks.collectives(), 1);
      EXPECT_TRUE(got[0].result.whole_on_rank0);
      EXPECT_EQ(got[1].result.ranks[1].transitions, 0);
    } else {
      EXPECT_GT(ranks.collectives(), static_cast<int>(one.variants.size()));
    }
  }
}

// The progress line's figures (plan --progress-every): every variant
// begun, every step (a combination, or its offload) done, the job's best.
TEST(JobSpace, ProgressCountsVariantsStepsAndTheJobsBest) {
  const Workload w = load_workload("mixtral-l");
  const ClusterSpec c = load_cluster("paper:16-2");
  const JobSpace space = parse_job_space("micro-batch,offload", "test");
  SearchProgress progress;
  RunOptions run;
  run.progress = &progress;
  SerialComm comm;
  const JobSearchResult job = run_job_search(w, c, SearchOptions{}, space, comm, run);
  ASSERT_TRUE(std::isfinite(job.best_s));
  EXPECT_EQ(progress.variants.load(), static_cast<std::int64_t>(job.variants.size()));
  EXPECT_GT(progress.job_steps.load(), 2);
  EXPECT_EQ(progress.job_steps_done.load(), progress.job_steps.load());
  EXPECT_EQ(progress.job_best.load(), job.best_s);
}

// RunOptions::shape_order: the first search of all of Pi leaves its shape
// order there, and a later search of the same Pi (another dispatcher, as
// the job search does) reads it and finds what it finds alone.
TEST(JobSpace, AShapeOrderKeptForPiIsTheOneASearchMakes) {
  const Workload w = load_workload("mixtral-l");
  const ClusterSpec c = load_cluster("paper:32-1");
  const std::vector<ParallelConfig> configs = enumerate_configs(w, c, SpaceOptions{});
  SerialComm comm;
  std::shared_ptr<const std::vector<std::size_t>> kept;
  RunOptions with;
  with.configs = &configs;
  with.shape_order = &kept;
  RunOptions alone;
  alone.configs = &configs;
  expect_same_search(run_search(w, c, SearchOptions{}, false, comm, with),
                     run_search(w, c, SearchOptions{}, false, comm, alone), "first");
  ASSERT_NE(kept, nullptr);
  EXPECT_EQ(*kept, bound_shape_order(configs));
  Workload other = w;
  other.training.dispatcher = other.training.dispatcher == Dispatcher::kAllToAll
                                  ? Dispatcher::kAllGather
                                  : Dispatcher::kAllToAll;
  const auto* made = kept.get();
  expect_same_search(run_search(other, c, SearchOptions{}, false, comm, with),
                     run_search(other, c, SearchOptions{}, false, comm, alone), "second");
  EXPECT_EQ(kept.get(), made);  // read, not made again
}

// every_variant_small's premise: a variant's Pi is within Pi at the least
// micro-batch without interleaving.
TEST(JobSpace, PiIsWidestAtTheLeastMicroBatchWithoutInterleaving) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"mixtral-s", "paper:16-2"}, {"mixtral-l", "paper:32-1"}, {"llama2-7b", "H800:32,910B:32"}};
  for (const auto& [model, cluster] : cases) {
    const Workload w = load_workload(model);
    const ClusterSpec c = load_cluster(cluster);
    JobVariant widest = base_variant(w);
    widest.micro_batch = 1;
    const std::vector<ParallelConfig> all = enumerate_configs(apply(w, widest), c, SpaceOptions{});
    const std::set<std::tuple<int, int, int, int, int, int>> keys = [&] {
      std::set<std::tuple<int, int, int, int, int, int>> k;
      for (const ParallelConfig& pi : all) k.insert({pi.pp, pi.tp, pi.cp, pi.ep, pi.tpe, pi.dp});
      return k;
    }();
    int checked = 0;
    for (const int b : {1, 2, 4, 8}) {
      for (const int vpp : {1, 2, 3}) {
        for (const Precision p : {Precision::kBf16, Precision::kFp8}) {
          for (const ParallelConfig& pi : pi_of(w, c, variant_of(w, b, vpp, p))) {
            EXPECT_TRUE(keys.count({pi.pp, pi.tp, pi.cp, pi.ep, pi.tpe, pi.dp}))
                << model << " on " << cluster << ": b=" << b << " vpp=" << vpp;
            ++checked;
          }
        }
      }
    }
    EXPECT_GT(checked, static_cast<int>(all.size())) << model;
  }
}

// The job search derives a vpp's Pi from another vpp's (with_vpp): the
// same configurations, in the same order, as enumerating it.
TEST(JobSpace, PiWithAnotherVppIsAPassOverAKnownOne) {
  for (const auto& [model, cluster] : kPiCases) {
    const ClusterSpec c = load_cluster(cluster);
    for (const int b : {1, 2, 4}) {
      Workload w = load_workload(model);
      w.training.micro_batch = b;
      SpaceOptions so;
      const std::vector<ParallelConfig> plain = enumerate_configs(w, c, so);
      so.vpp = 2;
      const std::vector<ParallelConfig> two = enumerate_configs(w, c, so);
      ASSERT_LT(two.size(), plain.size()) << model << " b=" << b;
      EXPECT_EQ(with_vpp(plain, w, 2), two) << model << " b=" << b;
      EXPECT_EQ(with_vpp(plain, w, 1), plain) << model << " b=" << b;
      for (const int vpp : {3, 4}) {
        so.vpp = vpp;
        const std::vector<ParallelConfig> more = enumerate_configs(w, c, so);
        EXPECT_EQ(with_vpp(plain, w, vpp), more) << model << " b=" << b << " vpp=" << vpp;
        EXPECT_EQ(with_vpp(two, w, vpp), more) << model << " b=" << b << " vpp=" << vpp;
      }
      EXPECT_THROW(with_vpp(two, w, 1), ContractError) << model;
    }
  }
}

// So is the Pi of a micro-batch that a known one's divides (the job search
// enumerates one Pi per precision and passes over it for the others).
TEST(JobSpace, PiOfALargerMicroBatchIsAPassOverAKnownOne) {
  for (const auto& [model, cluster] : kPiCases) {
    const ClusterSpec c = load_cluster(cluster);
    Workload w = load_workload(model);
    w.training.global_batch = 48;  // micro-batches 1, 2, 3, 4, 6, 8 all divide it
    const auto pi = [&](int b, int vpp) {
      Workload at = w;
      at.training.micro_batch = b;
      SpaceOptions so;
      so.vpp = vpp;
      return enumerate_configs(at, c, so);
    };
    const std::vector<ParallelConfig> one = pi(1, 1);
    const std::vector<ParallelConfig> two = pi(2, 1);
    int smaller = 0;
    for (const int b : {2, 3, 4, 6, 8}) {
      Workload at = w;
      at.training.micro_batch = b;
      for (const int vpp : {1, 2, 4}) {
        const std::vector<ParallelConfig> want = pi(b, vpp);
        smaller += want.size() < one.size() ? 1 : 0;
        EXPECT_EQ(with_vpp(one, at, vpp), want) << model << " b=" << b << " vpp=" << vpp;
        if (b % 2 == 0) {
          EXPECT_EQ(with_vpp(two, at, vpp), want) << model << " b=" << b << " vpp=" << vpp;
        } else {
          EXPECT_THROW(with_vpp(two, at, vpp), ContractError) << model << " b=" << b;
        }
      }
    }
    EXPECT_GT(smaller, 10) << model;
  }
}

// A Pi that with_vpp derives from a root takes the root's shape order
// (shape_order_within): a permutation of its configurations in the root's
// sequence, and a search given it finds what one that sorts its own finds,
// its plans, counters and every configuration's bound (the order never
// decides a bound). Not a subsequence: no order.
TEST(JobSpace, ADerivedPiTakesItsShapeOrderFromItsRoots) {
  for (const auto& [model, cluster] : kPiCases) {
    const ClusterSpec c = load_cluster(cluster);
    const Workload w = load_workload(model);
    const std::vector<ParallelConfig> root = enumerate_configs(w, c, SpaceOptions{});
    const std::vector<std::size_t> root_order = bound_shape_order(root);
    std::vector<std::size_t> rank(root.size());
    for (std::size_t k = 0; k < root_order.size(); ++k) rank[root_order[k]] = k;
    int fewer = 0;  // derived Pis that leave configurations out
    for (const auto& [b, vpp] : {std::pair{2, 1}, {1, 2}, {2, 4}}) {
      Workload at = w;
      at.training.micro_batch = b;
      const std::vector<ParallelConfig> configs = with_vpp(root, at, vpp);
      ASSERT_LE(configs.size(), root.size()) << model << " b=" << b << " vpp=" << vpp;
      fewer += configs.size() < root.size() ? 1 : 0;
      const std::vector<std::size_t> order = shape_order_within(root_order, root, configs);
      ASSERT_EQ(order.size(), configs.size()) << model << " b=" << b << " vpp=" << vpp;
      std::vector<std::size_t> sorted = order;
      std::sort(sorted.begin(), sorted.end());
      for (std::size_t k = 0; k < sorted.size(); ++k) ASSERT_EQ(sorted[k], k) << model;
      // In the root's sequence: the root positions of the configurations,
      // found by their degrees, rise along the order.
      std::size_t last = 0;
      for (std::size_t k = 0; k < order.size(); ++k) {
        ParallelConfig pi = configs[order[k]];
        pi.vpp = 1;
        pi.micro_batch = w.training.micro_batch;
        const auto at_root =
            static_cast<std::size_t>(std::find(root.begin(), root.end(), pi) - root.begin());
        ASSERT_LT(at_root, root.size()) << model;
        if (k > 0) EXPECT_GT(rank[at_root], last) << model << " b=" << b << " vpp=" << vpp;
        last = rank[at_root];
      }
      if (model == "deepseek-v3") continue;  // its searches take seconds: the order alone
      SearchOptions opt;
      opt.space.vpp = vpp;
      SerialComm comm;
      auto kept = std::make_shared<const std::vector<std::size_t>>(order);
      RunOptions given;
      given.configs = &configs;
      given.shape_order = &kept;
      RunOptions alone;
      alone.configs = &configs;
      expect_same_search(run_search(at, c, opt, false, comm, given),
                         run_search(at, c, opt, false, comm, alone),
                         model + " b=" + std::to_string(b) + " vpp=" + std::to_string(vpp));
    }
    EXPECT_GE(fewer, 2) << model;
    std::vector<ParallelConfig> stranger = {root.back(), root.front()};  // out of order
    EXPECT_TRUE(shape_order_within(root_order, root, stranger).empty()) << model;
  }
}

// H100 has FP8 and DeepEP: both are tried; 910B has neither.
TEST(JobSpace, Fp8AndFlexOnlyWhereEveryDeviceHasThem) {
  const Workload w = load_workload("mixtral-s");
  JobSpace space;
  space.dims = job_dim_bit(JobDim::kPrecision) | job_dim_bit(JobDim::kDispatcher);
  SerialComm comm;
  for (const auto& [name, expect] :
       {std::pair<const char*, bool>{"H100:16", true}, {"H100:8,910B:8", false}}) {
    const JobSearchResult job =
        run_job_search(w, load_cluster(name), SearchOptions{}, space, comm, RunOptions{});
    bool fp8 = false;
    bool flex = false;
    for (const VariantOutcome& o : job.variants) {
      fp8 = fp8 || o.variant.precision == Precision::kFp8;
      flex = flex || o.variant.dispatcher == Dispatcher::kFlex;
    }
    EXPECT_EQ(fp8, expect) << name;
    EXPECT_EQ(flex, expect) << name;
  }
}

// The paper offloads Mixtral-L's optimizer where nothing else fits: the
// job search finds the fastest plan over every multiple of the step, and
// each range it searched as a bound is below every fraction's best in it.
TEST(JobSpace, OffloadIsTheFastestStepWhereNothingElseFits) {
  const Workload w = load_workload("mixtral-l");
  const ClusterSpec c = load_cluster("paper:16-1");
  SearchOptions opt;
  SerialComm comm;
  ASSERT_TRUE(run_search(w, c, opt).top.empty());  // nothing fits without offload
  JobSpace space;
  space.dims = job_dim_bit(JobDim::kOffload);
  const JobSearchResult job = run_job_search(w, c, opt, space, comm, RunOptions{});
  ASSERT_FALSE(job.result.top.empty());
  const int steps = static_cast<int>(std::lround(1.0 / space.offload_step));
  std::vector<double> at(static_cast<std::size_t>(steps) + 1,
                         std::numeric_limits<double>::infinity());
  double best = std::numeric_limits<double>::infinity();
  Plan best_plan;
  int least = 0;  // the least step with a plan
  for (int k = 1; k <= steps; ++k) {
    JobVariant v = base_variant(w);
    v.offload = static_cast<double>(k) / steps;
    const SearchResult r = alone(w, c, v, opt);
    if (r.top.empty()) continue;
    if (least == 0) least = k;
    at[static_cast<std::size_t>(k)] = r.top.front().latency_s;
    if (r.top.front().latency_s < best) {
      best = r.top.front().latency_s;
      best_plan = r.top.front().plan;
    }
  }
  EXPECT_EQ(job.best_s, best);
  EXPECT_EQ(job.result.top.front().plan, best_plan);
  EXPECT_EQ(job.best.offload_to, 0.0);
  // Offloading only the least that fits would be slower here: the search
  // does not stop at the first fraction that fits.
  EXPECT_GT(at[static_cast<std::size_t>(least)], best);
  int ranges = 0;
  for (const VariantOutcome& o : job.variants) {
    if (o.variant.offload_to == 0) continue;
    ++ranges;
    const int lo = static_cast<int>(std::lround(o.variant.offload * steps));
    const int hi = static_cast<int>(std::lround(o.variant.offload_to * steps));
    // A range cut by the K-th best so far has no plan faster than the best.
    const double floor = std::isfinite(o.best) || !o.bounded ? o.best : job.best_s;
    for (int k = lo; k <= hi; ++k) {
      EXPECT_LE(floor, at[static_cast<std::size_t>(k)]) << to_string(o.variant, true) << " " << k;
    }
  }
  EXPECT_GT(ranges, 2);
  // With the plans fitting without offload (Mixtral-S), offload is tried
  // too (its ranges as bounds), and does not beat them there.
  const Workload small = load_workload("mixtral-s");
  const JobSearchResult fits = run_job_search(small, c, opt, space, comm, RunOptions{});
  EXPECT_GT(fits.variants.size(), 1u);
  EXPECT_EQ(fits.best.offload, 0.0);
  EXPECT_EQ(fits.best_s, run_search(small, c, opt).top.front().latency_s);
}

// Offload is a dimension, not a fallback: where plans fit without it, the
// memory it frees can still buy a faster plan (less recomputation, another
// configuration). Mixtral-L on paper:32-1: 65.5 s without offload; when
// offload was tried only where nothing fit, the search stopped there,
// while the Metis-style baseline, which had to offload, found 50 s
// (bench/paper/README.md).
TEST(JobSpace, OffloadIsSearchedWherePlansFitWithoutIt) {
  const Workload w = load_workload("mixtral-l");
  const ClusterSpec c = load_cluster("paper:32-1");
  SearchOptions opt;
  SerialComm comm;
  const SearchResult plain = run_search(w, c, opt);
  ASSERT_FALSE(plain.top.empty());
  JobSpace space;
  space.dims = job_dim_bit(JobDim::kOffload);
  const JobSearchResult job = run_job_search(w, c, opt, space, comm, RunOptions{});
  ASSERT_FALSE(job.result.top.empty());
  EXPECT_GT(job.best.offload, 0.0);
  EXPECT_LT(job.best_s, plain.top.front().latency_s);
  // The best over every step, each searched alone.
  const int steps = static_cast<int>(std::lround(1.0 / space.offload_step));
  double best = plain.top.front().latency_s;
  for (int k = 1; k <= steps; ++k) {
    JobVariant v = base_variant(w);
    v.offload = static_cast<double>(k) / steps;
    const SearchResult r = alone(w, c, v, opt);
    if (!r.top.empty()) best = std::min(best, r.top.front().latency_s);
  }
  EXPECT_EQ(job.best_s, best);
}

// Where nothing fits without offload (Mixtral-L on paper:16-1), the
// combinations of several dimensions are searched after the offload of
// those at most one dimension away, whose plans bound them: searched
// before it, they had no bound and searched every configuration. The
// best, and each dimension's best, stay those of every variant alone.
TEST(JobSpace, OffloadBoundsTheCombinationsOfSeveralDimensionsWhereNothingElseFits) {
  const Workload w = load_workload("mixtral-l");
  const ClusterSpec c = load_cluster("paper:16-1");
  SearchOptions opt;
  SerialComm comm;
  ASSERT_TRUE(run_search(w, c, opt).top.empty());
  JobSpace space;
  space.dims = job_dim_bit(JobDim::kOffload) | job_dim_bit(JobDim::kMicroBatch) |
               job_dim_bit(JobDim::kSharding);
  space.max_micro_batch = 2;
  space.offload_step = 0.25;
  const JobSearchResult job = run_job_search(w, c, opt, space, comm, RunOptions{});
  ASSERT_FALSE(job.result.top.empty());
  const JobVariant base = base_variant(w);
  const unsigned several = job_dim_bit(JobDim::kMicroBatch) | job_dim_bit(JobDim::kSharding);
  int bounded = 0;
  for (const VariantOutcome& o : job.variants) {
    if ((dims_differing(o.variant, base) & several) != several || o.variant.offload > 0) continue;
    EXPECT_TRUE(o.bounded) << to_string(o.variant, true);
    bounded += o.bounded ? 1 : 0;
  }
  EXPECT_EQ(bounded, 2);  // micro-batch 2 with ZeRO-2 and with FSDP
  // Every variant alone: micro-batch 1 and 2, the three shardings, the
  // offload fractions 0 to 1 in quarters.
  const double inf = std::numeric_limits<double>::infinity();
  double best = inf;
  std::vector<double> dim_best(kNumJobDims, inf);
  for (const int b : {1, 2}) {
    for (const Fsdp f : {Fsdp::kOff, Fsdp::kOptimGrads, Fsdp::kOptimGradsParams}) {
      for (int k = 0; k <= 4; ++k) {
        JobVariant v = base;
        v.micro_batch = b;
        v.fsdp = f;
        v.offload = k / 4.0;
        const SearchResult r = alone(w, c, v, opt);
        const double t = r.top.empty() ? inf : r.top.front().latency_s;
        best = std::min(best, t);
        const unsigned diff = dims_differing(v, base);
        for (int d = 0; d < kNumJobDims; ++d) {
          if (diff == 0 || diff == (1u << d)) {
            dim_best[static_cast<std::size_t>(d)] =
                std::min(dim_best[static_cast<std::size_t>(d)], t);
          }
        }
      }
    }
  }
  EXPECT_EQ(job.best_s, best);
  for (int d = 0; d < kNumJobDims; ++d) {
    EXPECT_EQ(job.dim_best[d], dim_best[static_cast<std::size_t>(d)])
        << to_string(static_cast<JobDim>(d));
  }
}

// Where nothing fits with any value of the knobs searched, the job
// search reports the closest miss of the workload's own values, found as
// run_search finds it: the later variants, which skip the stage mixes
// that cannot hold the layers without looking for theirs, do not change it.
TEST(JobSpace, NothingFitsAnywhereReportsTheGivenValuesClosestMiss) {
  const Workload w = load_workload("mixtral-l");
  const ClusterSpec c = load_cluster("paper:16-1");
  SearchOptions opt;
  SerialComm comm;
  const SearchResult own = run_search(w, c, opt);
  ASSERT_TRUE(own.top.empty());
  ASSERT_TRUE(own.closest.known());
  JobSpace space;
  space.dims = job_dim_bit(JobDim::kMicroBatch) | job_dim_bit(JobDim::kVpp) |
               job_dim_bit(JobDim::kDispatcher);
  const JobSearchResult job = run_job_search(w, c, opt, space, comm, RunOptions{});
  EXPECT_GT(job.variants.size(), 10u);
  EXPECT_TRUE(job.result.top.empty());
  EXPECT_EQ(job.best, base_variant(w));
  EXPECT_EQ(job.result.closest.bytes, own.closest.bytes);
  EXPECT_EQ(job.result.closest.parallel, own.closest.parallel);
  EXPECT_EQ(job.result.closest.stage, own.closest.stage);
  EXPECT_EQ(job.result.closest.device_type, own.closest.device_type);
  EXPECT_EQ(job.result.closest.layers, own.closest.layers);
  EXPECT_EQ(job.result.stats.transitions, own.stats.transitions);
}

TEST(JobSpace, ParsingNamesEveryDimension) {
  EXPECT_EQ(parse_job_space("none", "--space").dims, 0u);
  EXPECT_EQ(parse_job_space("all", "--space").dims, (1u << kNumJobDims) - 1);
  const JobSpace s = parse_job_space("vpp,fp8", "--space");
  EXPECT_TRUE(s.has(JobDim::kVpp));
  EXPECT_TRUE(s.has(JobDim::kPrecision));
  EXPECT_FALSE(s.has(JobDim::kMicroBatch));
  EXPECT_EQ(to_string(s), "vpp,fp8");
  EXPECT_EQ(to_string(parse_job_space("all", "x")),
            "micro-batch,vpp,sharding,offload,dispatcher,fp8");
  for (const char* bad : {"", "vpp,", "zero", "VPP", "all,vpp"}) {
    EXPECT_THROW(parse_job_space(bad, "--space"), InputError) << bad;
  }
}

// --recompute-scope job: the best is the best of every Megatron setting
// searched alone, every stage of it takes the setting, and per-stage
// recompute (the lower bound the search prunes with) is reported only
// where it is faster. Mixtral-L on paper:32-1 needs recomputation, and
// its per-stage plan mixes full, selective and none.
TEST(JobSpace, JobWideRecomputeIsTheBestSettingAndPerStageBoundsIt) {
  const Workload w = load_workload("mixtral-l");
  const ClusterSpec c = load_cluster("paper:32-1");
  SearchOptions opt;
  opt.top_k = 3;
  JobSpace space;
  space.job_recompute = true;
  SerialComm comm;
  const JobSearchResult job = run_job_search(w, c, opt, space, comm, RunOptions{});
  ASSERT_TRUE(job.best.recompute.has_value());
  ASSERT_FALSE(job.result.top.empty());
  EXPECT_EQ(job.result.top.front().latency_s, job.best_s);
  for (const StagePlan& st : job.result.top.front().plan.stages) {
    EXPECT_EQ(st.recompute, stage_recompute(*job.best.recompute, st.layers));
  }
  double best = std::numeric_limits<double>::infinity();
  std::vector<RecomputeSetting> settings = {
      {RecomputeKind::kNone},
      {RecomputeKind::kSelective, 0, kDefaultRecomputeModules},
      {RecomputeKind::kFull, 0}};
  for (int k = 1; k < w.model.num_layers; ++k) settings.push_back({RecomputeKind::kFull, k});
  for (const RecomputeSetting& s : settings) {
    JobVariant v = base_variant(w);
    v.recompute = s;
    const SearchResult r = alone(w, c, v, opt);
    if (!r.top.empty()) best = std::min(best, r.top.front().latency_s);
  }
  EXPECT_EQ(job.best_s, best);
  const SearchResult per_stage = alone(w, c, base_variant(w), opt);
  ASSERT_FALSE(per_stage.top.empty());
  const double ps = per_stage.top.front().latency_s;
  EXPECT_LT(ps, best);  // this case: per-stage is faster than any setting
  EXPECT_EQ(job.per_stage_best, ps);
  EXPECT_GT(job.recompute_variants, 0);
  EXPECT_GT(job.recompute_configs, 0);

  // Interleaved, the block method counts per model chunk: not searched.
  space.dims = job_dim_bit(JobDim::kVpp);
  space.max_vpp = 2;
  const JobSearchResult vpp = run_job_search(w, c, opt, space, comm, RunOptions{});
  int interleaved = 0;
  for (const VariantOutcome& o : vpp.variants) {
    if (o.variant.vpp == 1 || !o.variant.recompute) continue;
    ++interleaved;
    EXPECT_FALSE(o.variant.recompute->kind == RecomputeKind::kFull &&
                 o.variant.recompute->block > 0)
        << to_string(o.variant, true);
  }
  EXPECT_GT(interleaved, 0);
  EXPECT_LE(vpp.best_s, job.best_s);
}

// What a search carries to another (floors, step bounds) is checked on
// Mixtral-L on paper:32-1, top 2, against its best plan without the knobs.
struct CarryCase {
  Workload w = load_workload("mixtral-l");
  ClusterSpec c = load_cluster("paper:32-1");
  SearchOptions opt = [] {
    SearchOptions o;
    o.top_k = 2;
    return o;
  }();
  double plain = run_search(w, c, opt).top.front().latency_s;
};

// ShapeBounds::short_of_memory is search_config's test of a configuration
// whose stages cannot hold its layers in memory (the Evaluator's most
// layers per type, the PP stages filled from the types that hold the
// most), for every configuration of variants that move the memory
// (micro-batch, interleaving, which the cached most layers per shape must
// not take for another PP's, sharding, an offload range), bounded in shape
// order and in reverse: the answer is the configuration's alone. Where it
// holds, search_config finds no plan and takes no transition. The driver
// skips those before their search once no closest miss is wanted, with the
// same plans.
TEST(JobSpace, ShortOfMemoryIsTheSearchsOwnTest) {
  const Workload w = load_workload("mixtral-l");
  const int n = w.model.num_layers;
  SearchOptions opt;
  opt.closest_miss = false;
  std::vector<JobVariant> variants(6, base_variant(w));
  variants[1].micro_batch = 2;
  variants[2].vpp = 2;
  variants[3].vpp = 4;
  variants[4].fsdp = Fsdp::kOptimGradsParams;
  variants[5].offload = 0.5;
  variants[5].offload_to = 1.0;
  int shorts = 0;
  int fits = 0;
  int fewer = 0;  // variants whose search evaluated fewer configurations by it
  for (const char* cluster : {"paper:16-1-h", "paper:32-1", "paper:24-2"}) {
    for (const JobVariant& v : variants) {
      const ClusterSpec c = load_cluster(cluster);
      const Workload vw = apply(w, v);
      SearchOptions o = opt;
      o.space.vpp = v.vpp;
      const std::vector<ParallelConfig> configs = enumerate_configs(vw, c, o.space);
      ASSERT_FALSE(configs.empty()) << to_string(v, true);
      const ProfileTables tables = tables_for(vw, c, configs);
      const CostModel model(vw, c, tables);
      std::vector<char> reference(configs.size());
      for (std::size_t k = 0; k < configs.size(); ++k) {
        hsdp::Evaluator ev(model, configs[k], o);
        std::vector<std::pair<int, int>> room;
        for (int h = 0; h < ev.types(); ++h) {
          if (ev.cap(h) > 0) room.emplace_back(ev.max_fitting_layers(h), ev.cap(h));
        }
        std::sort(room.begin(), room.end(), std::greater<>{});
        long long held = 0;
        int left = configs[k].pp;
        for (const auto& [layers, stages] : room) {
          held += static_cast<long long>(std::min(left, stages)) * layers;
          left -= std::min(left, stages);
        }
        reference[k] = held < n ? 1 : 0;
        (reference[k] != 0 ? shorts : fits) += 1;
      }
      std::vector<std::size_t> order = bound_shape_order(configs);
      for (const bool reversed : {false, true}) {
        if (reversed) std::reverse(order.begin(), order.end());
        ShapeBounds bounds(model, o);
        for (const std::size_t k : order) {
          ASSERT_EQ(bounds.short_of_memory(configs[k]), reference[k] != 0)
              << to_string(v, true) << " PP " << configs[k].pp << " TP " << configs[k].tp << " EP "
              << configs[k].ep << " DP " << configs[k].dp << (reversed ? " (reversed)" : "");
        }
      }
      for (std::size_t k = 0; k < configs.size(); k += 7) {
        if (reference[k] == 0) continue;
        const ConfigOutcome out =
            search_config(model, configs[k], o, std::numeric_limits<double>::infinity());
        EXPECT_FALSE(out.best.has_value()) << to_string(v, true);
        EXPECT_EQ(out.stats.transitions, 0) << to_string(v, true);
      }
      // The search skips them before their search, with the same plans.
      SerialComm comm;
      const SearchResult skipping = run_search(vw, c, o, false, comm, RunOptions{});
      SearchOptions wanted = o;
      wanted.closest_miss = true;
      const SearchResult searching = run_search(vw, c, wanted, false, comm, RunOptions{});
      ASSERT_EQ(skipping.top.size(), searching.top.size()) << to_string(v, true);
      for (std::size_t i = 0; i < skipping.top.size(); ++i) {
        EXPECT_EQ(skipping.top[i].plan, searching.top[i].plan) << to_string(v, true);
        EXPECT_EQ(skipping.top[i].latency_s, searching.top[i].latency_s) << to_string(v, true);
      }
      EXPECT_LE(skipping.stats.configs_evaluated, searching.stats.configs_evaluated);
      if (skipping.stats.configs_evaluated < searching.stats.configs_evaluated) ++fewer;
    }
  }
  EXPECT_GT(shorts, 100);
  EXPECT_GT(fits, 100);
  EXPECT_GT(fewer, 0);
}

// A search's floors (SearchResult::floors) hold for every search it
// relaxes: a range of offload fractions for each fraction in it, per-stage
// recompute for a job-wide setting. Given as RunOptions::floors they skip
// configurations without their bound and change no plan.
TEST(JobSpace, FloorsOfARelaxationSkipWorkAndChangeNoPlan) {
  const CarryCase carry;
  const Workload& w = carry.w;  // (not a structured binding: lambdas below take them)
  const ClusterSpec& c = carry.c;
  const SearchOptions& opt = carry.opt;
  const double plain = carry.plain;
  SerialComm comm;
  RunOptions run;
  run.incumbent = plain;  // the fractions' plans to beat, as the job search has it
  const auto search = [&](const JobVariant& v, const std::vector<double>* floors) {
    RunOptions r = run;
    r.floors = floors;
    return run_search(apply(w, v), c, opt, false, comm, r);
  };
  // The whole range of fractions, as a bound.
  JobVariant range = base_variant(w);
  range.offload = 0.1;
  range.offload_to = 1.0;
  const SearchResult relaxed = search(range, nullptr);
  ASSERT_FALSE(relaxed.top.empty());
  ASSERT_EQ(relaxed.floors.size(), relaxed.configs.size());
  for (std::size_t k = 0; k < relaxed.configs.size(); ++k) {
    EXPECT_GE(relaxed.floors[k], relaxed.lower_bounds[k]);
    if (const ConfigOutcome* o = relaxed.outcome(k); o != nullptr && o->best) {
      EXPECT_EQ(relaxed.floors[k], o->best->latency_s);
    }
  }
  int skipped_more = 0;
  for (const double f : {0.1, 0.5, 1.0}) {
    JobVariant v = base_variant(w);
    v.offload = f;
    const SearchResult own = search(v, nullptr);
    const SearchResult given = search(v, &relaxed.floors);
    ASSERT_EQ(own.top.size(), given.top.size()) << f;
    for (std::size_t i = 0; i < own.top.size(); ++i) {
      EXPECT_EQ(own.top[i].plan, given.top[i].plan) << f;
      EXPECT_EQ(own.top[i].latency_s, given.top[i].latency_s) << f;
    }
    // No floor is above a plan. Every configuration with a plan under the
    // incumbent finds it with the floors too, unless its plan could not
    // enter the top K: a search leaves out what its cut, the K-th best so
    // far, excludes, and with the floors skipping other configurations the
    // cut may fall before it is reached (as without them in another order).
    int under = 0;
    const double kth = given.top.back().latency_s;
    for (std::size_t k = 0; k < own.configs.size(); ++k) {
      const ConfigOutcome* o = own.outcome(k);
      if (o == nullptr || !o->best) continue;
      EXPECT_GE(o->best->latency_s, relaxed.floors[k]) << f << " configuration " << k;
      if (o->best->latency_s >= plain) continue;
      ++under;
      const ConfigOutcome* g = given.outcome(k);
      if (g != nullptr && g->best) {
        EXPECT_EQ(g->best->latency_s, o->best->latency_s) << f << " configuration " << k;
      } else {
        EXPECT_GE(o->best->latency_s, kth) << f << " configuration " << k;
      }
    }
    EXPECT_GT(under, 0) << f;
    EXPECT_LE(given.stats.configs_evaluated, own.stats.configs_evaluated) << f;
    // The floors settle configurations whose own bound does not: those the
    // search without them bounds (and searches, unless it fits no stage
    // in memory: ShapeBounds::short_of_memory) go unbounded.
    for (std::size_t k = 0; k < own.configs.size(); ++k) {
      if (relaxed.floors[k] > plain && own.lower_bounds[k] <= plain) ++skipped_more;
    }
  }
  EXPECT_GT(skipped_more, 0);
  // Per-stage recompute relaxes each job-wide setting.
  const SearchResult per_stage = search(base_variant(w), nullptr);
  for (const RecomputeSetting& s :
       {RecomputeSetting{RecomputeKind::kNone}, RecomputeSetting{RecomputeKind::kFull, 0},
        RecomputeSetting{RecomputeKind::kFull, 8}}) {
    JobVariant v = base_variant(w);
    v.recompute = s;
    const SearchResult own = search(v, nullptr);
    const SearchResult given = search(v, &per_stage.floors);
    ASSERT_EQ(own.top.size(), given.top.size()) << to_string(s);
    for (std::size_t i = 0; i < own.top.size(); ++i) {
      EXPECT_EQ(own.top[i].plan, given.top[i].plan) << to_string(s);
    }
    EXPECT_LE(given.stats.configs_evaluated, own.stats.configs_evaluated) << to_string(s);
  }
}

// A floor above the caller's incumbent settles its configuration without
// a bound: it is skipped. The others are bounded in a pass over them
// alone, in their own shape order: their bounds, the plans and the
// counters of what is searched are those of the search without the
// floors. A caller that gives Pi can leave it out of the result.
TEST(JobSpace, FloorsAboveTheIncumbentSettleTheirConfigurationsAndBoundTheRest) {
  const CarryCase carry;
  SerialComm comm;
  RunOptions run;
  run.incumbent = carry.plain * 1.5;
  const std::vector<ParallelConfig> pi = enumerate_configs(carry.w, carry.c, carry.opt.space);
  run.configs = &pi;
  const SearchResult own = run_search(carry.w, carry.c, carry.opt, false, comm, run);
  ASSERT_FALSE(own.top.empty());
  EXPECT_EQ(own.configs, pi);
  // Every third configuration not in the top K floored above the
  // incumbent: the top K cannot change.
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> floors(pi.size(), 0.0);
  for (std::size_t k = 0; k < pi.size(); k += 3) {
    const bool top = std::any_of(own.top.begin(), own.top.end(),
                                 [&](const PlanCandidate& p) { return p.plan.parallel == pi[k]; });
    if (!top) floors[k] = inf;
  }
  RunOptions floored = run;
  floored.floors = &floors;
  floored.result_configs = false;
  const SearchResult given = run_search(carry.w, carry.c, carry.opt, false, comm, floored);
  EXPECT_TRUE(given.configs.empty());
  EXPECT_EQ(given.stats.configs, static_cast<std::int64_t>(pi.size()));
  ASSERT_EQ(given.top.size(), own.top.size());
  for (std::size_t i = 0; i < own.top.size(); ++i) {
    EXPECT_EQ(given.top[i].plan, own.top[i].plan);
    EXPECT_EQ(given.top[i].latency_s, own.top[i].latency_s);
  }
  ASSERT_EQ(given.lower_bounds.size(), pi.size());
  ASSERT_EQ(given.step_bounds.size(), pi.size());
  int settled = 0;
  int bounded = 0;
  for (std::size_t k = 0; k < pi.size(); ++k) {
    if (std::isinf(floors[k])) {
      EXPECT_EQ(given.lower_bounds[k], inf) << k;
      EXPECT_EQ(given.outcome_of[k], SearchResult::kSkippedByBound) << k;
      ++settled;
    } else {
      EXPECT_EQ(given.lower_bounds[k], own.lower_bounds[k]) << k;
      EXPECT_EQ(given.step_bounds[k], own.step_bounds[k]) << k;
      bounded += std::isfinite(own.lower_bounds[k]) ? 1 : 0;
    }
  }
  EXPECT_GT(settled, 100);
  EXPECT_GT(bounded, 100);
  EXPECT_LE(given.stats.configs_evaluated, own.stats.configs_evaluated);
}

// Sharding, offload and job-wide recompute change a stage's tail and what
// is added to its layers' steps, never the steps: one variant's step
// bounds (SearchResult::step_bounds) hold for the others of its
// micro-batch, vpp, precision and dispatcher (RunOptions::step_floors).
TEST(JobSpace, StepBoundsCarryAcrossShardingOffloadAndRecompute) {
  const CarryCase carry;
  const Workload& w = carry.w;  // (not a structured binding: lambdas below take them)
  const ClusterSpec& c = carry.c;
  const SearchOptions& opt = carry.opt;
  const double plain = carry.plain;
  SerialComm comm;
  const auto search = [&](const JobVariant& v, const std::vector<double>* step_floors, bool above) {
    RunOptions r;
    r.incumbent = plain;
    r.step_floors = step_floors;
    r.step_bounds_above_cut = above;
    return run_search(apply(w, v), c, opt, false, comm, r);
  };
  const JobVariant base = base_variant(w);
  const SearchResult first = search(base, nullptr, true);
  // The steps bound made tight above the cut changes no plan or counter.
  const SearchResult loose = search(base, nullptr, false);
  EXPECT_EQ(first.stats.configs_evaluated, loose.stats.configs_evaluated);
  EXPECT_EQ(first.stats.configs_bounded, loose.stats.configs_bounded);
  EXPECT_EQ(first.stats.transitions, loose.stats.transitions);
  ASSERT_EQ(first.top.size(), loose.top.size());
  EXPECT_EQ(first.top.front().plan, loose.top.front().plan);
  const double cut = plain * (1 + 1e-12);
  int tight = 0;
  int tight_loose = 0;
  ASSERT_EQ(first.step_bounds.size(), first.configs.size());
  for (std::size_t k = 0; k < first.configs.size(); ++k) {
    EXPECT_LE(first.step_bounds[k], first.lower_bounds[k]);
    tight += first.step_bounds[k] > cut ? 1 : 0;
    tight_loose += loose.step_bounds[k] > cut ? 1 : 0;
  }
  // A shape whose layer tails the driver leaves pending (its bound
  // without them above the cut) gets the steps' test all the same: the
  // latency's is that test then.
  EXPECT_GE(tight, tight_loose);
  EXPECT_GT(tight, 100);

  std::vector<JobVariant> siblings(4, base);
  siblings[0].fsdp = Fsdp::kOptimGradsParams;
  siblings[1].fsdp = Fsdp::kOptimGrads;
  siblings[2].offload = 0.5;
  siblings[3].recompute = RecomputeSetting{RecomputeKind::kFull, 0};
  for (const JobVariant& v : siblings) {
    const SearchResult own = search(v, nullptr, false);
    const SearchResult given = search(v, &first.step_bounds, false);
    ASSERT_EQ(own.top.size(), given.top.size()) << to_string(v, true);
    for (std::size_t i = 0; i < own.top.size(); ++i) {
      EXPECT_EQ(own.top[i].plan, given.top[i].plan) << to_string(v, true);
    }
    int skipped = 0;  // by the carried bound, without their own
    for (std::size_t k = 0; k < own.configs.size(); ++k) {
      if (const ConfigOutcome* o = own.outcome(k); o != nullptr && o->best) {
        EXPECT_GE(o->best->latency_s, first.step_bounds[k]) << to_string(v, true) << " " << k;
        if (o->best->latency_s < plain) {
          const ConfigOutcome* g = given.outcome(k);
          ASSERT_TRUE(g != nullptr && g->best) << to_string(v, true) << " " << k;
          EXPECT_EQ(g->best->latency_s, o->best->latency_s);
        }
      }
      skipped += first.step_bounds[k] > cut && given.step_bounds[k] == first.step_bounds[k] &&
                         given.lower_bounds[k] == first.step_bounds[k]
                     ? 1
                     : 0;
    }
    EXPECT_GT(skipped, 0) << to_string(v, true);
  }
}

// Interleaving changes the steps only by more boundaries and a shorter
// fill and drain: the step bounds of the variant without it, scaled by
// interleaved_step_floors, hold for vpp 2 and 3 (under every
// configuration's best plan), skip configurations without their own bound
// and change no plan.
TEST(JobSpace, StepBoundsCarryToInterleavedVariants) {
  const CarryCase carry;
  const Workload& w = carry.w;  // (not a structured binding: lambdas below take them)
  const ClusterSpec& c = carry.c;
  const double plain = carry.plain;
  SerialComm comm;
  const auto search = [&](int vpp, const std::vector<double>* step_floors, bool above,
                          double incumbent) {
    SearchOptions opt = carry.opt;
    opt.space.vpp = vpp;
    RunOptions r;
    r.incumbent = incumbent;
    r.step_floors = step_floors;
    r.step_bounds_above_cut = above;
    return run_search(w, c, opt, false, comm, r);
  };
  const double inf = std::numeric_limits<double>::infinity();
  // Step bounds proven above a higher cut, so that scaled down they are
  // still above the plans to beat.
  const SearchResult first = search(1, nullptr, true, plain * 1.5);
  const double cut = plain * (1 + 1e-12);
  for (const int vpp : {2, 3}) {
    const SearchResult own = search(vpp, nullptr, false, plain);
    // Every configuration's best plan, unbounded.
    const SearchResult all = search(vpp, nullptr, false, inf);
    ASSERT_FALSE(own.configs.empty()) << vpp;
    const std::vector<double> floors = interleaved_step_floors(
        first.step_bounds, first.configs, own.configs, w.training.global_batch);
    const SearchResult given = search(vpp, &floors, false, plain);
    const ProfileTables tables = tables_for(w, c, own.configs, nullptr);
    const CostModel model(w, c, tables);
    ASSERT_EQ(own.top.size(), given.top.size()) << vpp;
    for (std::size_t i = 0; i < own.top.size(); ++i) {
      EXPECT_EQ(own.top[i].plan, given.top[i].plan) << vpp;
    }
    int found = 0;    // configurations of the interleaved Pi found in the plain one
    int plans = 0;    // configurations with a plan
    int skipped = 0;  // by the carried bound, without their own
    for (std::size_t k = 0; k < own.configs.size(); ++k) {
      found += floors[k] > 0 ? 1 : 0;
      // The floor is under the steps (fill, drain and the middle, no
      // tail) of the configuration's best plan.
      if (const ConfigOutcome* o = all.outcome(k); o != nullptr && o->best) {
        const IterationBreakdown b = model.evaluate(o->best->plan).breakdown;
        EXPECT_GE(b.edge_s + b.middle_s, floors[k]) << vpp << " " << k;
        ++plans;
      }
      skipped += floors[k] > cut && given.lower_bounds[k] == floors[k] ? 1 : 0;
    }
    EXPECT_EQ(found, static_cast<int>(own.configs.size())) << vpp;
    EXPECT_GT(plans, 5) << vpp;
    EXPECT_GT(skipped, 0) << vpp;
    EXPECT_LE(given.stats.configs_evaluated, own.stats.configs_evaluated) << vpp;
  }
}

// The job search carries the configurations a variant without
// interleaving proves to have no plan at all to the same variant
// interleaved (docs/search.md, "No plan without interleaving, none with
// it"). Its premise, checked stage by stage: interleaving needs no less
// device or host memory for the same stage, whatever its position, layers
// and recomputation. And the job search stays exact where the carry
// skips work: Mixtral-L on paper:16-1, where nothing fits without offload
// (JobSpace.BestIsTheBestOfEveryVariantAndEachDimensionsGainIsExact checks
// each unbounded variant's best, interleaved ones included).
TEST(JobSpace, NoPlanWithoutInterleavingNoneWithIt) {
  const Workload w = load_workload("mixtral-l");
  const ClusterSpec c = load_cluster("paper:16-1");
  std::vector<JobVariant> variants(3, base_variant(w));
  variants[1].fsdp = Fsdp::kOptimGradsParams;
  variants[2].offload = 0.25;
  variants[2].offload_to = 1.0;
  int compared = 0;
  int more = 0;  // stages that need more interleaved
  for (const JobVariant& v : variants) {
    const Workload vw = apply(w, v);
    const std::vector<ParallelConfig> plain = pi_of(w, c, v);
    const ProfileTables tables = tables_for(vw, c, plain);
    const CostModel model(vw, c, tables);
    for (const int vpp : {2, 4}) {
      JobVariant iv = v;
      iv.vpp = vpp;
      const std::vector<ParallelConfig> interleaved = pi_of(w, c, iv);
      const std::vector<std::size_t> at = plain_indices(plain, interleaved);
      for (std::size_t k = 0; k < interleaved.size(); k += 3) {
        ASSERT_NE(at[k], kNotPlain) << to_string(iv, true);
        const ParallelConfig& pi = interleaved[k];
        const ParallelConfig& one = plain[at[k]];
        for (int h = 0; h < c.num_types(); ++h) {
          if (stage_capacity(c, h, pi, SpaceOptions{}.constraints) == 0) continue;
          const TypeCosts tc = model.type_costs(pi, h);
          for (int position = 0; position < pi.pp; ++position) {
            for (const int layers : {1, 4, w.model.num_layers / pi.pp}) {
              for (const Recompute& r : {Recompute{}, Recompute{RecomputeKind::kSelective, 0},
                                         Recompute{RecomputeKind::kFull, layers}}) {
                StageShape shape;
                shape.position = position;
                shape.layers = layers;
                shape.moe_layers = layers;  // every layer of Mixtral is MoE
                shape.moe_in_first_recomputed = r.kind == RecomputeKind::kFull ? layers : 0;
                shape.prev_type = position == 0 ? -1 : h;
                shape.recompute = r;
                const StageCost with = model.stage_cost(pi, tc, shape);
                const StageCost without = model.stage_cost(one, tc, shape);
                EXPECT_GE(with.memory.total(), without.memory.total())
                    << to_string(iv, true) << " PP " << pi.pp << " position " << position;
                EXPECT_GE(with.host_bytes, without.host_bytes) << to_string(iv, true);
                more += with.memory.total() > without.memory.total() ? 1 : 0;
                ++compared;
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(compared, 1000);
  EXPECT_GT(more, compared / 2);

  // The flags follow each configuration into the interleaved Pi, which
  // lacks some of the plain one's.
  {
    const std::vector<ParallelConfig> plain = pi_of(w, c, base_variant(w));
    JobVariant iv = base_variant(w);
    iv.vpp = 2;
    const std::vector<ParallelConfig> interleaved = pi_of(w, c, iv);
    ASSERT_LT(interleaved.size(), plain.size());
    const auto flagged = [](const ParallelConfig& pi) { return pi.tp == 2 || pi.pp % 4 == 0; };
    std::vector<bool> none(plain.size());
    for (std::size_t k = 0; k < plain.size(); ++k) none[k] = flagged(plain[k]);
    const std::vector<bool> got = interleaved_no_plan(none, plain, interleaved);
    ASSERT_EQ(got.size(), interleaved.size());
    int flags = 0;
    for (std::size_t k = 0; k < interleaved.size(); ++k) {
      EXPECT_EQ(got[k], flagged(interleaved[k])) << k;
      flags += got[k] ? 1 : 0;
    }
    EXPECT_GT(flags, 0);
    EXPECT_LT(flags, static_cast<int>(interleaved.size()));
  }

  // The job search: every variant alone, its best and each dimension's.
  SearchOptions opt;
  SerialComm comm;
  JobSpace space;
  space.dims = job_dim_bit(JobDim::kOffload) | job_dim_bit(JobDim::kVpp);
  space.max_vpp = 2;
  space.offload_step = 0.25;
  const JobSearchResult job = run_job_search(w, c, opt, space, comm, RunOptions{});
  ASSERT_FALSE(job.result.top.empty());
  const double inf = std::numeric_limits<double>::infinity();
  double best = inf;
  double vpp_best = inf;
  for (const int vpp : {1, 2}) {
    for (int k = 0; k <= 4; ++k) {
      JobVariant v = base_variant(w);
      v.vpp = vpp;
      v.offload = k / 4.0;
      const SearchResult r = alone(w, c, v, opt);
      const double t = r.top.empty() ? inf : r.top.front().latency_s;
      best = std::min(best, t);
      if (k == 0) vpp_best = std::min(vpp_best, t);
    }
  }
  // Configuration by configuration (unbounded, every 5th): without a plan
  // interleaved wherever none without.
  int none = 0;
  for (const double offload : {0.0, 0.5}) {
    JobVariant v = base_variant(w);
    v.offload = offload;
    const Workload vw = apply(w, v);
    const std::vector<ParallelConfig> plain = pi_of(w, c, v);
    v.vpp = 2;
    const std::vector<ParallelConfig> interleaved = pi_of(w, c, v);
    const ProfileTables tables = tables_for(vw, c, plain);
    const CostModel model(vw, c, tables);
    SearchOptions o = opt;
    o.space.vpp = 2;
    const std::vector<std::size_t> at = plain_indices(plain, interleaved);
    for (std::size_t i = 0; i < interleaved.size(); i += 5) {
      if (search_config(model, plain[at[i]], opt, inf).best) continue;
      EXPECT_FALSE(search_config(model, interleaved[i], o, inf).best)
          << to_string(v, true) << " " << i;
      ++none;
    }
  }
  EXPECT_GT(none, 20);
  EXPECT_EQ(job.best_s, best);
  EXPECT_EQ(job.dim_best[static_cast<int>(JobDim::kVpp)], vpp_best);
}

// interleaved_step_floors is exact where it can be: with every stage's
// step alike, the interleaved pipeline's steps (iteration_latency, no
// tail) are the plain one's times (1 + (v - 1) M / (PP + M - 1)) / v; with
// stages unlike, more.
TEST(JobSpace, InterleavedStepFloorIsTheStepsOfAlikeStages) {
  for (const int pp : {2, 4, 8}) {
    for (const int dp : {1, 4}) {
      for (const int v : {2, 3, 4}) {
        const int global_batch = 64;
        const int m = global_batch / dp;
        ParallelConfig pi;
        pi.pp = pp;
        pi.dp = dp;
        ParallelConfig interleaved = pi;
        interleaved.vpp = v;
        const auto steps = [&](const std::vector<double>& stage_steps, int vpp) {
          std::vector<StageCost> stages;
          for (const double t : stage_steps) {
            StageCost sc;
            sc.fwd_s = t / 3;
            sc.bwd_s = t - sc.fwd_s;
            stages.push_back(sc);
          }
          const IterationBreakdown b = iteration_latency(stages, m, vpp);
          return b.edge_s + b.middle_s;
        };
        const std::vector<double> alike(static_cast<std::size_t>(pp), 0.5);
        std::vector<double> unlike = alike;
        unlike.back() = 0.2;
        for (const bool same : {true, false}) {
          const std::vector<double>& stage_steps = same ? alike : unlike;
          const double floor =
              interleaved_step_floors({steps(stage_steps, 1)}, {pi}, {interleaved}, global_batch)
                  .front();
          const double at_v = steps(stage_steps, v);
          EXPECT_LE(floor, at_v) << pp << " " << dp << " " << v;
          if (same) {
            EXPECT_NEAR(floor, at_v, at_v * 1e-9) << pp << " " << dp << " " << v;
          }
        }
      }
    }
  }
  // A configuration not in the plain Pi gets no floor.
  ParallelConfig a;
  a.pp = 2;
  ParallelConfig b = a;
  b.pp = 4;
  b.vpp = 2;
  EXPECT_EQ(interleaved_step_floors({1.0}, {a}, {b}, 8), std::vector<double>{0.0});
}

// Every variant whose floors or step floors leave part of Pi open is
// searched on that part alone (RunOptions::open_part_only), and gives what
// a search of all of Pi gives: the same plans, the same statistics of
// every variant, and the kept search's figures per configuration and per
// unit. Offload ranges halved (floors given over a part of Pi, and a
// finer cut than the range's), interleaved step floors and job-wide
// recompute each take that path here.
TEST(JobSpace, VariantsSearchedOnWhatTheirFloorsLeaveOpenAreAsOverPi) {
  const auto same_stats = [](const SearchStats& a, const SearchStats& b, const std::string& what) {
    EXPECT_EQ(a.configs, b.configs) << what;
    EXPECT_EQ(a.configs_evaluated, b.configs_evaluated) << what;
    EXPECT_EQ(a.states, b.states) << what;
    EXPECT_EQ(a.transitions, b.transitions) << what;
    EXPECT_EQ(a.pruned_load_balance, b.pruned_load_balance) << what;
    EXPECT_EQ(a.pruned_memory, b.pruned_memory) << what;
    EXPECT_EQ(a.pruned_bound, b.pruned_bound) << what;
    EXPECT_EQ(a.configs_bounded, b.configs_bounded) << what;
    EXPECT_EQ(a.feasible, b.feasible) << what;
  };
  struct Case {
    std::string model, cluster;
    JobSpace space;
  };
  JobSpace knobs;
  knobs.dims =
      job_dim_bit(JobDim::kOffload) | job_dim_bit(JobDim::kVpp) | job_dim_bit(JobDim::kSharding);
  knobs.max_vpp = 2;
  JobSpace recompute;
  recompute.dims = job_dim_bit(JobDim::kOffload);
  recompute.job_recompute = true;
  recompute.offload_step = 0.25;
  for (const Case& k :
       {Case{"mixtral-l", "paper:16-1", knobs}, Case{"mixtral-l", "paper:32-1", recompute}}) {
    const Workload w = load_workload(k.model);
    const ClusterSpec c = load_cluster(k.cluster);
    SearchOptions opt;
    opt.top_k = 2;
    SerialComm comm;
    RunOptions over_pi;
    over_pi.open_part_only = false;
    const JobSearchResult a = run_job_search(w, c, opt, k.space, comm, RunOptions{});
    const JobSearchResult b = run_job_search(w, c, opt, k.space, comm, over_pi);
    const std::string what = k.model + " on " + k.cluster;
    EXPECT_GT(a.floored_before, 0) << what;  // the path is taken
    EXPECT_EQ(b.floored_before, 0) << what;
    ASSERT_FALSE(a.result.top.empty()) << what;
    EXPECT_EQ(a.best, b.best) << what;
    EXPECT_EQ(a.best_s, b.best_s) << what;
    ASSERT_EQ(a.variants.size(), b.variants.size()) << what;
    for (std::size_t v = 0; v < a.variants.size(); ++v) {
      const std::string which = what + ": " + to_string(a.variants[v].variant, true);
      EXPECT_EQ(a.variants[v].variant, b.variants[v].variant) << which;
      EXPECT_EQ(a.variants[v].best, b.variants[v].best) << which;
      EXPECT_EQ(a.variants[v].bounded, b.variants[v].bounded) << which;
      same_stats(a.variants[v].stats, b.variants[v].stats, which);
    }
    same_stats(a.stats, b.stats, what);
    for (int d = 0; d < kNumJobDims; ++d) {
      EXPECT_EQ(a.dim_configs[d], b.dim_configs[d]) << what << " " << d;
      EXPECT_EQ(a.dim_best[d], b.dim_best[d]) << what << " " << d;
    }
    EXPECT_EQ(a.recompute_configs, b.recompute_configs) << what;
    EXPECT_EQ(a.per_stage_best, b.per_stage_best) << what;
    EXPECT_EQ(a.rounds, b.rounds) << what;
    ASSERT_EQ(a.units.size(), b.units.size()) << what;
    for (std::size_t u = 0; u < a.units.size(); ++u) {
      EXPECT_EQ(a.units[u].config, b.units[u].config) << what << " unit " << u;
      EXPECT_EQ(a.units[u].round, b.units[u].round) << what << " unit " << u;
      EXPECT_EQ(a.units[u].transitions, b.units[u].transitions) << what << " unit " << u;
    }
    // The kept search, per configuration.
    const SearchResult& x = a.result;
    const SearchResult& y = b.result;
    ASSERT_EQ(x.top.size(), y.top.size()) << what;
    for (std::size_t t = 0; t < x.top.size(); ++t) {
      EXPECT_EQ(x.top[t].plan, y.top[t].plan) << what;
      EXPECT_EQ(x.top[t].latency_s, y.top[t].latency_s) << what;
    }
    same_stats(x.stats, y.stats, what + " (kept)");
    EXPECT_EQ(x.configs, y.configs) << what;
    EXPECT_EQ(x.outcome_of, y.outcome_of) << what;
    EXPECT_EQ(x.lower_bounds, y.lower_bounds) << what;
    EXPECT_EQ(x.floors, y.floors) << what;
    EXPECT_EQ(x.step_bounds, y.step_bounds) << what;
    EXPECT_EQ(x.estimates, y.estimates) << what;
    EXPECT_EQ(x.ran_on, y.ran_on) << what;
    EXPECT_EQ(x.round_of, y.round_of) << what;
    EXPECT_EQ(x.parts, y.parts) << what;
    EXPECT_EQ(x.rounds, y.rounds) << what;
    ASSERT_EQ(x.outcomes.size(), y.outcomes.size()) << what;
    ASSERT_EQ(x.units.size(), y.units.size()) << what;
    for (std::size_t u = 0; u < x.units.size(); ++u) {
      EXPECT_EQ(x.units[u].config, y.units[u].config) << what << " kept unit " << u;
    }
  }
}

// The job search makes a search's profile tables once per micro-batch,
// vpp and precision: no other knob may enter them (sharding, offload,
// dispatcher, job-wide recompute, FP8 aside).
TEST(JobSpace, TablesDependOnlyOnMicroBatchAndPrecision) {
  const Workload w = load_workload("mixtral-s");
  const ClusterSpec c = load_cluster("paper:16-2");
  const PiSummary summary = summarize(enumerate_configs(w, c, SpaceOptions{}));
  const auto same = [](const ProfileTables& a, const ProfileTables& b) {
    if (a.compute.size() != b.compute.size() || a.devices.size() != b.devices.size()) return false;
    for (std::size_t h = 0; h < a.compute.size(); ++h) {
      if (std::memcmp(&a.devices[h], &b.devices[h], sizeof(DeviceCoefficients)) != 0) return false;
      if (a.compute[h].size() != b.compute[h].size()) return false;
      for (const auto& [key, entry] : a.compute[h]) {
        const auto at = b.compute[h].find(key);
        if (at == b.compute[h].end() ||
            std::memcmp(&entry, &at->second, sizeof(ComputeEntry)) != 0) {
          return false;
        }
      }
    }
    return true;
  };
  for (const int b : {1, 2}) {
    JobVariant base = base_variant(w);
    base.micro_batch = b;
    const ProfileTables want = tables_for(apply(w, base), c, summary);
    std::vector<JobVariant> others;
    for (const int vpp : {2, 3}) {
      others.push_back(base);
      others.back().vpp = vpp;
    }
    others.push_back(base);
    others.back().distributed_optimizer = false;
    for (const Fsdp f : {Fsdp::kOptimGrads, Fsdp::kOptimGradsParams}) {
      others.push_back(base);
      others.back().fsdp = f;
    }
    for (const double offload : {0.25, 1.0}) {
      others.push_back(base);
      others.back().offload = offload;
    }
    others.push_back(base);
    others.back().offload_to = 0.5;
    for (const Dispatcher d : {Dispatcher::kAllGather, Dispatcher::kFlex, Dispatcher::kAuto}) {
      others.push_back(base);
      others.back().dispatcher = d;
    }
    for (const RecomputeKind k : {RecomputeKind::kNone, RecomputeKind::kFull}) {
      others.push_back(base);
      others.back().recompute = RecomputeSetting{k, 0};
    }
    for (const JobVariant& v : others) {
      EXPECT_TRUE(same(tables_for(apply(w, v), c, summary), want)) << to_string(v, true);
    }
    // The precision does enter them.
    JobVariant fp8 = base;
    fp8.precision = Precision::kFp8;
    EXPECT_FALSE(same(tables_for(apply(w, fp8), c, summary), want));
  }
}

// SparseBounds::under is the filter of the kept bounds by the cut, in Pi's
// order, whatever the cuts asked before it: falling, rising again, equal
// to a bound, after keep_under; bounds above the keeping cut never come.
TEST(JobSpace, SparseBoundsUnderACutAreThoseKeptAtMostIt) {
  std::mt19937_64 rng(20261203);
  std::uniform_real_distribution<double> value(0.0, 10.0);
  const std::size_t n = 500;
  std::vector<double> all(n);
  for (double& v : all) v = std::round(value(rng) * 4) / 4;  // ties with the cuts
  SparseBounds kept(n);
  double keep = 8.0;
  for (std::size_t c = 0; c < n; ++c) kept.add(static_cast<std::uint32_t>(c), all[c], keep);
  const auto expected = [&](double cut) {
    std::vector<std::uint32_t> out;
    for (std::size_t c = 0; c < n; ++c) {
      if (all[c] <= keep && all[c] <= cut) out.push_back(static_cast<std::uint32_t>(c));
    }
    return out;
  };
  double least_above = std::numeric_limits<double>::infinity();
  for (const double v : all) {
    if (v > keep) least_above = std::min(least_above, v);
  }
  EXPECT_EQ(kept.rest(), least_above);
  // Falling, then rising past the last cut, then past the keeping cut.
  for (const double cut : {7.0, 5.5, 5.5, 2.25, 6.0, 0.0, -1.0, 3.0, 9.0, 7.75}) {
    EXPECT_EQ(kept.under(cut), expected(cut)) << "cut " << cut;
  }
  std::uniform_real_distribution<double> cuts(-0.5, 10.5);
  for (int k = 0; k < 200; ++k) {
    const double cut = std::round(cuts(rng) * 4) / 4;
    if (k == 100) {
      keep = 4.0;
      kept.keep_under(keep);
    }
    ASSERT_EQ(kept.under(cut), expected(cut)) << "cut " << cut << ", query " << k;
  }
  const std::vector<double>& dense = *kept.dense();
  ASSERT_EQ(dense.size(), n);
  for (std::size_t c = 0; c < n; ++c) {
    EXPECT_EQ(dense[c], all[c] <= keep ? all[c] : kept.rest()) << c;
  }
}

}  // namespace
}  // namespace hapmoe
