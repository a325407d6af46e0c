// Checkpoints and resume inside one search (RunOptions::stop_requested,
// segment_s, checkpoint, resume; docs/archive.md, "Checkpoints of one
// search"): a search stopped at any point and resumed from what it
// committed, or from any snapshot, gives the uninterrupted search's plans
// and statistics (timings apart), with the bound and without it, on 1 and
// 2 threads.
#include <gtest/gtest.h>

#include <algorithm>

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "costmodel/errors.h"
#include "engine/comm.h"
#include "engine/driver.h"
#include "io/inputs/cluster_io.h"
#include "io/inputs/model_io.h"

namespace hapmoe {
namespace {

// Everything but the timings and who ran what.
void expect_same_search(const SearchResult& a, const SearchResult& b, const std::string& where) {
  SCOPED_TRACE(where);
  ASSERT_EQ(a.top.size(), b.top.size());
  for (std::size_t k = 0; k < a.top.size(); ++k) {
    EXPECT_EQ(a.top[k].latency_s, b.top[k].latency_s) << "plan " << k;
    EXPECT_TRUE(a.top[k].plan == b.top[k].plan) << "plan " << k;
  }
  const SearchStats& s = a.stats;
  const SearchStats& t = b.stats;
  EXPECT_EQ(s.configs, t.configs);
  EXPECT_EQ(s.configs_evaluated, t.configs_evaluated);
  EXPECT_EQ(s.configs_bounded, t.configs_bounded);
  EXPECT_EQ(s.states, t.states);
  EXPECT_EQ(s.transitions, t.transitions);
  EXPECT_EQ(s.pruned_load_balance, t.pruned_load_balance);
  EXPECT_EQ(s.pruned_memory, t.pruned_memory);
  EXPECT_EQ(s.pruned_hetero_comm, t.pruned_hetero_comm);
  EXPECT_EQ(s.pruned_bound, t.pruned_bound);
  EXPECT_EQ(s.feasible, t.feasible);
  EXPECT_EQ(s.hetero_comm_ratio, t.hetero_comm_ratio);
  EXPECT_EQ(a.rounds, b.rounds);
  EXPECT_EQ(a.stopped, b.stopped);
  EXPECT_EQ(a.not_searched, b.not_searched);
  EXPECT_EQ(a.closest.bytes, b.closest.bytes);
  EXPECT_EQ(a.round_of, b.round_of);
  EXPECT_EQ(a.estimates, b.estimates);
  EXPECT_EQ(a.lower_bounds, b.lower_bounds);
  ASSERT_EQ(a.outcome_of.size(), b.outcome_of.size());
  for (std::size_t c = 0; c < a.outcome_of.size(); ++c) {
    ASSERT_EQ(a.outcome_of[c] < 0, b.outcome_of[c] < 0) << "configuration " << c;
    EXPECT_EQ(a.outcome_of[c] == SearchResult::kSkippedByBound,
              b.outcome_of[c] == SearchResult::kSkippedByBound)
        << "configuration " << c;
    const ConfigOutcome* x = a.outcome(c);
    const ConfigOutcome* y = b.outcome(c);
    if (x == nullptr) continue;
    EXPECT_EQ(x->stats.transitions, y->stats.transitions) << "configuration " << c;
    EXPECT_EQ(x->stats.pruned_bound, y->stats.pruned_bound) << "configuration " << c;
    EXPECT_EQ(x->best.has_value(), y->best.has_value()) << "configuration " << c;
    if (x->best && y->best) {
      EXPECT_EQ(x->best->latency_s, y->best->latency_s) << "configuration " << c;
    }
  }
}

struct Case {
  const char* model;
  const char* cluster;
  bool bound;
};

// Stops the search (stop_requested) once `after` units were asked for.
RunOptions stopping_after(int threads, std::int64_t after, std::atomic<std::int64_t>& asked) {
  RunOptions run;
  run.threads = threads;
  run.round = 2;
  run.segment_s = 1e-4;  // many segments: a stop lands in any of them
  run.stop_requested = [&asked, after] { return asked.fetch_add(1) + 1 > after; };
  return run;
}

TEST(Resume, StoppedTwiceAndResumedEqualsTheUninterruptedSearch) {
  for (const Case& k :
       {Case{"mixtral-l", "paper:24-3", false}, Case{"mixtral-l", "paper:24-3", true},
        Case{"mixtral-s", "paper:16-1", true}}) {
    const Workload w = load_workload(k.model);
    const ClusterSpec cl = load_cluster(k.cluster);
    SearchOptions opt;
    opt.bound = k.bound;
    SerialComm comm;
    RunOptions plain;
    plain.round = 2;
    const SearchResult whole = run_search(w, cl, opt, false, comm, plain);
    ASSERT_EQ(whole.stopped, StopReason::kNone);
    const std::int64_t units = whole.stats.configs_evaluated;
    for (const int threads : {1, 2}) {
      for (const double first : {0.0, 0.3, 0.5}) {
        const std::string where =
            std::string(k.model) + " " + k.cluster + (k.bound ? " bound" : " no bound") + ", " +
            std::to_string(threads) + " threads, first stop at " + std::to_string(first);
        std::atomic<std::int64_t> asked{0};
        const SearchResult a = run_search(
            w, cl, opt, false, comm,
            stopping_after(threads, static_cast<std::int64_t>(first * static_cast<double>(units)),
                           asked));
        ASSERT_EQ(a.stopped, StopReason::kSignal) << where;
        EXPECT_EQ(a.stats.configs_evaluated + a.stats.configs_bounded + a.not_searched,
                  a.stats.configs);
        const SearchResume from_a = resume_point(a);
        asked = 0;
        RunOptions second = stopping_after(threads, units / 4, asked);
        second.resume = &from_a;
        const SearchResult b = run_search(w, cl, opt, false, comm, second);
        ASSERT_EQ(b.stopped, StopReason::kSignal) << where;
        EXPECT_GE(b.stats.configs_evaluated, a.stats.configs_evaluated) << where;
        const SearchResume from_b = resume_point(b);
        RunOptions third = plain;
        third.threads = 3 - threads;
        third.resume = &from_b;
        const SearchResult c = run_search(w, cl, opt, false, comm, third);
        expect_same_search(whole, c, where);
        EXPECT_EQ(c.resumed, b.stats.configs_evaluated) << where;
      }
    }
  }
}

// Without the bound a configuration may be cut into parts (its stage
// mixes): a stop that leaves some of its parts unsearched must not commit
// it, or the resumed search would take its partial outcome for the whole.
TEST(Resume, AConfigurationStoppedBetweenItsPartsIsNotCommitted) {
  const Workload w = load_workload("mixtral-s");
  const ClusterSpec cl = load_cluster("paper:32-1");
  SearchOptions opt;
  opt.bound = false;
  SerialComm comm;
  RunOptions plain;
  plain.parts_per_round = 256;
  const SearchResult whole = run_search(w, cl, opt, false, comm, plain);
  const auto units = static_cast<std::int64_t>(whole.units.size());
  ASSERT_GT(units, whole.stats.configs_evaluated);  // some configuration was cut
  int split = 0;  // stops that left a configuration with only some parts searched
  for (const int threads : {1, 2}) {
    for (std::int64_t after = 1; after < units; after += 1 + units / 7) {
      std::atomic<std::int64_t> asked{0};
      RunOptions run = stopping_after(threads, after, asked);
      run.parts_per_round = 256;
      const SearchResult a = run_search(w, cl, opt, false, comm, run);
      ASSERT_EQ(a.stopped, StopReason::kSignal);
      // Units run but not committed: the parts of a configuration cut short.
      std::int64_t ran = 0;
      for (const RankFigures& f : a.ranks) ran += f.parts;
      if (ran > static_cast<std::int64_t>(a.units.size())) ++split;
      const SearchResume from = resume_point(a);
      RunOptions again = plain;
      again.resume = &from;
      expect_same_search(
          whole, run_search(w, cl, opt, false, comm, again),
          std::to_string(threads) + " threads, stopped after " + std::to_string(after) + " units");
    }
  }
  EXPECT_GT(split, 0);
}

// With --prune none a large configuration is shared level by level by the
// threads (docs/parallel.md): the ranks agree before each shared
// configuration whether to start it, so a stop commits it whole or not at
// all, and the resumed search is the uninterrupted one.
TEST(Resume, AStopBetweenLevelSharedConfigurationsResumesToTheSameSearch) {
  const Workload w = load_workload("mixtral-s");
  const ClusterSpec cl = load_cluster("paper:16-2");
  SearchOptions opt;
  opt.bound = false;
  opt.prune = {false, false, false};
  SerialComm comm;
  RunOptions plain;
  const SearchResult whole = run_search(w, cl, opt, false, comm, plain);
  int shared_before_stop = 0;
  for (const std::int64_t after : {std::int64_t{3}, std::int64_t{100}}) {
    std::atomic<std::int64_t> asked{0};
    RunOptions run = stopping_after(2, after, asked);
    run.parts_per_round = 512;
    const SearchResult a = run_search(w, cl, opt, false, comm, run);
    ASSERT_EQ(a.stopped, StopReason::kSignal);
    for (const UnitFigures& u : a.units) shared_before_stop += u.shares > 0 ? 1 : 0;
    const SearchResume from = resume_point(a);
    RunOptions again = plain;
    again.threads = 2;
    again.parts_per_round = 512;
    again.resume = &from;
    expect_same_search(whole, run_search(w, cl, opt, false, comm, again),
                       "stopped after " + std::to_string(after) + " units");
  }
  EXPECT_GT(shared_before_stop, 0);
}

TEST(Resume, EverySnapshotResumesToTheSameSearch) {
  for (const bool bound : {false, true}) {
    const Workload w = load_workload("mixtral-l");
    const ClusterSpec cl = load_cluster("paper:24-3");
    SearchOptions opt;
    opt.bound = bound;
    SerialComm comm;
    RunOptions run;
    run.round = 2;
    run.segment_s = 1e-4;
    std::vector<SearchResume> points;
    run.checkpoint = [&](const std::function<SearchResult()>& snapshot) {
      const SearchResult s = snapshot();
      EXPECT_EQ(s.stopped, StopReason::kCheckpoint);
      points.push_back(resume_point(s));
    };
    const SearchResult whole = run_search(w, cl, opt, false, comm, run);
    ASSERT_GE(points.size(), 3U) << (bound ? "bound" : "no bound");
    for (std::size_t i = 0; i < points.size(); i += std::max<std::size_t>(1, points.size() / 5)) {
      RunOptions again;
      again.round = 2;
      again.resume = &points[i];
      expect_same_search(whole, run_search(w, cl, opt, false, comm, again),
                         (bound ? "bound, snapshot " : "no bound, snapshot ") + std::to_string(i));
    }
  }
}

// Segments cut the round of a search without the bound; its results do
// not change.
TEST(Resume, SegmentsChangeNothing) {
  const Workload w = load_workload("mixtral-l");
  const ClusterSpec cl = load_cluster("paper:24-3");
  SearchOptions opt;
  opt.bound = false;
  SerialComm comm;
  const SearchResult one = run_search(w, cl, opt, false, comm, RunOptions{});
  RunOptions run;
  run.threads = 2;
  run.segment_s = 2e-3;
  int checkpoints = 0;
  // The progress line's share of the estimated work committed grows with
  // the segments, up to all of it.
  SearchProgress progress;
  run.progress = &progress;
  std::vector<double> shares;
  run.checkpoint = [&](const std::function<SearchResult()>&) {
    ++checkpoints;
    shares.push_back(progress.work_done.load() / progress.work_total.load());
  };
  const SearchResult segmented = run_search(w, cl, opt, false, comm, run);
  expect_same_search(one, segmented, "segments");
  EXPECT_GE(checkpoints, 2);
  ASSERT_FALSE(shares.empty());
  EXPECT_GT(shares.front(), 0.0);
  EXPECT_TRUE(std::is_sorted(shares.begin(), shares.end()));
  EXPECT_LT(shares.back(), 1.0);
  EXPECT_DOUBLE_EQ(progress.work_done.load(), progress.work_total.load());
  ASSERT_FALSE(one.top.empty());
  EXPECT_EQ(progress.best.load(), one.top.front().latency_s);
}

TEST(Resume, RefusesTheCheckpointOfAnotherSpace) {
  const Workload w = load_workload("mixtral-s");
  SerialComm comm;
  const SearchResult small = run_search(w, load_cluster("paper:16-1"), {}, false, comm, {});
  const SearchResume from = resume_point(small);
  RunOptions run;
  run.resume = &from;
  EXPECT_THROW(run_search(w, load_cluster("paper:32-2"), {}, false, comm, run), InputError);
}

// A result travels between ranks as bytes (a small search run by rank 0
// alone, a sweep's case run by one rank): every field comes back.
TEST(ResultBytes, DecodeEncodeGivesTheResultBack) {
  const Workload w = load_workload("mixtral-s");
  const ClusterSpec c = load_cluster("paper:32-2");
  SearchOptions opt;
  opt.top_k = 3;
  SerialComm comm;
  RunOptions run;
  run.parts_per_round = 4;  // parts and units
  const SearchResult a = run_search(w, c, opt, false, comm, run);
  const SearchResult b = decode_result(encode_result(a));
  expect_same_search(a, b, "decoded");
  EXPECT_EQ(a.configs, b.configs);
  EXPECT_EQ(a.ran_on, b.ran_on);
  EXPECT_EQ(a.parts, b.parts);
  EXPECT_EQ(a.units.size(), b.units.size());
  EXPECT_EQ(a.ranks.size(), b.ranks.size());
  EXPECT_EQ(a.whole_on_rank0, b.whole_on_rank0);
  EXPECT_EQ(a.resumed, b.resumed);
  EXPECT_EQ(a.stats.seconds, b.stats.seconds);
  EXPECT_THROW(decode_result(encode_result(a) + "x"), std::exception);           // bytes left over
  EXPECT_THROW(decode_result(encode_result(a).substr(0, 100)), std::exception);  // truncated
}

}  // namespace
}  // namespace hapmoe
