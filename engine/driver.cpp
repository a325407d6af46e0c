#include "engine/driver.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <new>
#include <numeric>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>

#include "costmodel/analytic.h"
#include "costmodel/errors.h"
#include "engine/bytes.h"
#include "partition/shard.h"

namespace hapmoe {

PiSummary summarize(const std::vector<ParallelConfig>& configs) {
  // The distinct degrees: a few, so a linear find beats a set's insert;
  // and in canonical order mostly the last one's again.
  PiSummary s;
  const auto add = [](std::vector<int>& seen, int& last, int v) {
    if (v == last) return;
    last = v;
    if (std::find(seen.begin(), seen.end(), v) == seen.end()) seen.push_back(v);
  };
  int last_tp = 0;  // no degree is 0
  int last_cp = 0;
  for (const ParallelConfig& pi : configs) {
    add(s.tp, last_tp, pi.tp);
    add(s.cp, last_cp, pi.cp);
    s.max_pp = std::max(s.max_pp, pi.pp);
  }
  std::sort(s.tp.begin(), s.tp.end());
  std::sort(s.cp.begin(), s.cp.end());
  return s;
}

ProfileTables tables_for(const Workload& w, const ClusterSpec& cluster, const PiSummary& pi,
                         const MeasuredProfile* profile, ProfileSources* sources) {
  ProfileTables t = make_analytic_tables(w, cluster, w.training.micro_batch, pi.tp, pi.cp);
  if (profile != nullptr) {
    ProfileSources s = apply_profile(t, *profile, w, cluster, w.training.micro_batch);
    if (sources != nullptr) *sources = std::move(s);
  }
  return t;
}

ProfileTables tables_for(const Workload& w, const ClusterSpec& cluster,
                         const std::vector<ParallelConfig>& configs, const MeasuredProfile* profile,
                         ProfileSources* sources) {
  return tables_for(w, cluster, summarize(configs), profile, sources);
}

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The one parallel loop of hapmoe: `threads` OpenMP threads take items
// from `next` (an index, or a negative value when there are none left)
// and run body(item) on each, so items are handed out dynamically (they
// come in decreasing estimated work). `next` may be shared with other
// processes (Comm::claim). Exceptions never cross the parallel region:
// after the first failure the items still handed out are drained without
// running them, and the message of the lowest failed item is returned
// ("" when none failed).
template <class Next, class Body>
std::string parallel_for_each(int threads, std::size_t n, Next&& next, Body&& body) {
  std::vector<std::string> errors(n);
  std::atomic<bool> failed{false};
  // No more threads than items: a thread without one would only be woken.
  threads = static_cast<int>(std::clamp<std::size_t>(n, 1, static_cast<std::size_t>(threads)));
#pragma omp parallel num_threads(threads)
  for (std::int64_t i = next(); i >= 0; i = next()) {
    if (failed.load(std::memory_order_relaxed)) continue;
    std::string& error = errors[static_cast<std::size_t>(i)];
    try {
      body(static_cast<std::size_t>(i));
    } catch (const std::bad_alloc&) {
      error = "out of memory";
    } catch (const std::exception& e) {
      error = e.what();
      if (error.empty()) error = "unknown error";
    } catch (...) {
      error = "unknown exception";
    }
    if (!error.empty()) failed.store(true, std::memory_order_relaxed);
  }
  for (std::string& e : errors) {
    if (!e.empty()) return std::move(e);
  }
  return {};
}

// body(i) for i in [0, n) on this process's threads.
template <class Body>
std::string parallel_for(int threads, std::size_t n, Body&& body) {
  std::atomic<std::int64_t> counter{0};
  const auto count = static_cast<std::int64_t>(n);
  return parallel_for_each(
      threads, n,
      [&] {
        const std::int64_t i = counter.fetch_add(1, std::memory_order_relaxed);
        return i < count ? i : -1;
      },
      std::forward<Body>(body));
}

// The trade of a level between the level shares of one configuration's
// DP (SearchPart::levels), one share per thread of every rank: the
// threads of a rank meet at a barrier, the rank's first thread trades the
// rank's shares with the other ranks (one Comm::allgather per level), and
// every thread then reads them all. Shares first_share .. first_share +
// threads - 1 are this rank's.
class RankTrade final : public LevelExchange {
 public:
  RankTrade(Comm& comm, int threads, int first_share)
      : comm_(comm),
        sync_(threads),
        mine_(static_cast<std::size_t>(threads)),
        first_(first_share) {}

  const std::vector<std::string_view>& trade(int share, std::string_view built) override {
    sync_.arrive_and_wait();  // every thread has read the last trade
    mine_[static_cast<std::size_t>(share - first_)] = built;
    sync_.arrive_and_wait();
    if (comm_.size() == 1) return mine_;  // every share's, once all are in
    if (share == first_) {
      // The rank's shares as one buffer: their count, sizes, bytes.
      std::string out;
      const std::uint64_t count = mine_.size();
      out.append(reinterpret_cast<const char*>(&count), sizeof count);
      for (const std::string_view b : mine_) {
        const std::uint64_t size = b.size();
        out.append(reinterpret_cast<const char*>(&size), sizeof size);
      }
      for (const std::string_view b : mine_) out.append(b);
      received_ = comm_.allgather(out);
      all_.clear();
      for (int rank = 0; rank < comm_.size(); ++rank) {
        if (rank == comm_.rank()) {
          all_.insert(all_.end(), mine_.begin(), mine_.end());
          continue;
        }
        const std::string& in = received_[static_cast<std::size_t>(rank)];
        std::uint64_t shares = 0;
        std::memcpy(&shares, in.data(), sizeof shares);
        std::size_t at = sizeof shares * (1 + shares);
        for (std::uint64_t k = 0; k < shares; ++k) {
          std::uint64_t size = 0;
          std::memcpy(&size, in.data() + sizeof shares * (1 + k), sizeof size);
          all_.emplace_back(in.data() + at, size);
          at += size;
        }
      }
    }
    sync_.arrive_and_wait();
    return all_;
  }

 private:
  Comm& comm_;
  std::barrier<> sync_;
  std::vector<std::string_view> mine_;  // this rank's shares' bytes
  std::vector<std::string> received_;   // the other ranks' (and this one's)
  std::vector<std::string_view> all_;   // every share's, in share order
  int first_;
};

// What a share sends once its search is over (kEnd) or has failed
// (kFailed, a stop: LevelExchange). The shares end together: every one
// trades until none is still searching (search_in_shares).
// (Static: a trade's bytes must outlive the next trade.)
constexpr std::string_view kEnd("\x02", 1);
constexpr std::string_view kFailed("\x01", 1);

}  // namespace

// A share that fails leaves the others cancelled at their next trade; the
// trades after the searches, until every share has ended, keep the
// barriers and the collectives matched.
ConfigOutcome search_in_shares(Comm& comm, int threads, const CostModel& model,
                               const ParallelConfig& pi, const SearchOptions& opt, double incumbent,
                               const CancelCheck* cancel, int& shares, std::string& error) {
  std::vector<ConfigOutcome> outcomes;
  std::vector<std::string> errors;
  std::unique_ptr<RankTrade> trade;
  int first = 0;
#pragma omp parallel num_threads(threads)
  {
#pragma omp single
    {
      // The team OpenMP gave, which may be fewer threads than asked.
      const int team = omp_get_num_threads();
      Bytes mine;
      mine.put(team);
      shares = 0;
      const std::vector<std::string> teams = comm.allgather(mine.take());
      for (int k = 0; k < comm.size(); ++k) {
        if (k == comm.rank()) first = shares;
        shares += Unbytes(teams[static_cast<std::size_t>(k)]).get<int>();
      }
      outcomes.resize(static_cast<std::size_t>(team));
      errors.resize(static_cast<std::size_t>(team));
      trade = std::make_unique<RankTrade>(comm, team, first);
    }  // (the single's barrier: every thread sees `trade`)
    const int t = omp_get_thread_num();
    const int share = first + t;
    std::string& failure = errors[static_cast<std::size_t>(t)];
    try {
      outcomes[static_cast<std::size_t>(t)] =
          search_config(model, pi, opt, incumbent, SearchPart{share, shares, trade.get()}, cancel);
    } catch (const std::bad_alloc&) {
      failure = "out of memory";
    } catch (const std::exception& e) {
      failure = e.what()[0] != 0 ? e.what() : "unknown error";
    } catch (...) {
      failure = "unknown exception";
    }
    // Until no share is searching: a failed one stops the others at their
    // trade, then ends with them.
    for (std::string_view say = failure.empty() ? kEnd : kFailed;; say = kEnd) {
      const std::vector<std::string_view>& all = trade->trade(share, say);
      if (std::all_of(all.begin(), all.end(),
                      [](std::string_view b) { return b == kEnd || b == kFailed; })) {
        break;
      }
    }
  }
  ConfigOutcome merged;
  for (std::size_t k = 0; k < outcomes.size(); ++k) {
    if (error.empty() && !errors[k].empty()) error = errors[k];
    merge_part(merged, outcomes[k]);
  }
  return merged;
}

namespace {

std::string on_rank(const Comm& comm, const std::string& error) {
  if (error.empty() || comm.size() == 1) return error;
  return "rank " + std::to_string(comm.rank()) + ": " + error;
}

// f(i) for i in [0, n), computed once over the whole job and returned on
// every rank: the items in chunks of `chunk` (smaller, down to 16, where
// there are too few for 16 per rank: a pass over a few hundred
// configurations would run on one thread; the same on every rank), dealt
// to the ranks in turn (chunk k to rank k mod R: the cost of f drifts
// along Pi, so contiguous blocks would not balance), the rank's threads
// taking its chunks as they go, then gathered. A limit reached (checked
// per chunk) stops it, leaving the values not computed at T{}, and
// `stopped` is the largest reason any rank gave; a failure on any rank
// throws SearchFailure on every rank with the first (lowest rank's)
// message. Computing time counts as busy, the gather as idle.
template <class T, class F>
std::vector<T> computed_by_all(Comm& comm, int threads, std::size_t n, std::size_t chunk,
                               LimitWatch& watch, StopReason& stopped, RankFigures& mine, F&& f) {
  static_assert(std::is_trivially_copyable_v<T>);
  const auto ranks = static_cast<std::size_t>(comm.size());
  const std::size_t shares = 16 * ranks;
  chunk = std::min(chunk, std::max(std::min<std::size_t>(chunk, 16), (n + shares - 1) / shares));
  const std::size_t chunks = (n + chunk - 1) / chunk;
  const auto me = static_cast<std::size_t>(comm.rank());
  const std::size_t mine_count = chunks > me ? (chunks - me + ranks - 1) / ranks : 0;
  std::vector<T> values(n);
  std::atomic<StopReason> stop{StopReason::kNone};
  const auto t = Clock::now();
  const std::string error = parallel_for(threads, mine_count, [&](std::size_t k) {
    if (stop.load(std::memory_order_relaxed) != StopReason::kNone) return;
    if (const StopReason why = watch.check(false); why != StopReason::kNone) {
      stop.store(why, std::memory_order_relaxed);
      return;
    }
    const std::size_t first = (me + k * ranks) * chunk;
    const std::size_t end = std::min(n, first + chunk);
    for (std::size_t i = first; i < end; ++i) values[i] = f(i);
  });
  mine.busy_s += since(t);
  if (ranks == 1) {  // alone: nothing to gather
    stopped = std::max(stopped, stop.load());
    if (!error.empty()) throw SearchFailure(on_rank(comm, error));
    return values;
  }
  Bytes out(mine_count * chunk * sizeof(T) + error.size() + 64);
  out.put(on_rank(comm, error));
  out.put(stop.load());
  for (std::size_t c = me; c < chunks; c += ranks) {
    for (std::size_t i = c * chunk; i < std::min(n, (c + 1) * chunk); ++i) out.put(values[i]);
  }
  const auto wait = Clock::now();
  const std::vector<std::string> all = comm.allgather(out.take());
  mine.idle_s += since(wait);
  std::string first;
  for (std::size_t k = 0; k < ranks; ++k) {
    Unbytes in(all[k]);
    std::string e = in.get<std::string>();
    if (first.empty()) first = std::move(e);
    stopped = std::max(stopped, in.get<StopReason>());
    if (k == me) continue;  // its values are in place
    for (std::size_t c = k; c < chunks && first.empty(); c += ranks) {
      for (std::size_t i = c * chunk; i < std::min(n, (c + 1) * chunk); ++i) {
        values[i] = in.get<T>();
      }
    }
  }
  if (!first.empty()) throw SearchFailure(first);
  return values;
}

}  // namespace

std::string encode_result(const SearchResult& r) {
  Bytes b;
  b.put(r.top);
  b.put(r.stats);
  b.put(r.closest);
  b.put(r.configs);
  b.put(r.outcomes);
  b.put(r.outcome_of);
  b.put(r.lower_bounds);
  b.put(r.floors);
  b.put(r.step_bounds);
  b.put(r.estimates);
  b.put(r.ran_on);
  b.put(r.round_of);
  b.put(r.parts);
  b.put(r.ranks);
  b.put(r.units);
  b.put(r.rounds);
  b.put(r.seed);
  b.put(r.seed_searches);
  b.put(r.whole_on_rank0);
  b.put(r.stopped);
  b.put(r.not_searched);
  b.put(r.resumed);
  return b.take();
}

SearchResult decode_result(const std::string& bytes) {
  SearchResult r;
  Unbytes b(bytes);
  b.get(r.top);
  b.get(r.stats);
  b.get(r.closest);
  b.get(r.configs);
  b.get(r.outcomes);
  b.get(r.outcome_of);
  b.get(r.lower_bounds);
  b.get(r.floors);
  b.get(r.step_bounds);
  b.get(r.estimates);
  b.get(r.ran_on);
  b.get(r.round_of);
  b.get(r.parts);
  b.get(r.ranks);
  b.get(r.units);
  b.get(r.rounds);
  b.get(r.seed);
  b.get(r.seed_searches);
  b.get(r.whole_on_rank0);
  b.get(r.stopped);
  b.get(r.not_searched);
  b.get(r.resumed);
  HAPMOE_REQUIRE(b.done(), "decode_result: bytes left over");
  return r;
}

SearchResume resume_point(const SearchResult& result) {
  SearchResume s;
  s.configs = static_cast<std::int64_t>(result.configs.size());
  s.rounds = result.rounds;
  for (std::size_t c = 0; c < result.configs.size(); ++c) {
    if (result.outcome_of[c] == SearchResult::kSkippedByBound) s.skipped.push_back(c);
    const ConfigOutcome* o = result.outcome(c);
    if (o == nullptr) continue;
    s.searched.push_back({c, *o, result.ran_on[c], result.round_of[c], std::max(1, result.parts[c]),
                          result.estimates[c]});
  }
  return s;
}

int default_threads(const Comm& comm) {
  if (std::getenv("OMP_NUM_THREADS") != nullptr) return std::max(1, omp_get_max_threads());
  return std::max(1, omp_get_num_procs() / std::max(1, comm.local_size()));
}

SearchResult run_search(const Workload& w, const ClusterSpec& cluster, const SearchOptions& opt,
                        bool bruteforce) {
  SerialComm serial;
  return run_search(w, cluster, opt, bruteforce, serial, RunOptions{});
}

double skip_above(double incumbent) { return incumbent * (1.0 + 1e-12); }

OnRank0 run_on_rank0(
    Comm& comm, const RunOptions& run,
    const std::function<std::pair<std::string, RankFigures>(Comm& alone, const RunOptions& inner)>&
        search) {
  const bool searches = comm.rank() == 0;
  std::pair<std::string, RankFigures> mine;
  std::exception_ptr failed;
  std::string error;
  if (searches) {
    SerialComm alone;
    // Alone: no collective may happen inside.
    RunOptions inner = run;
    inner.stop_requested = nullptr;
    inner.checkpoint = nullptr;
    inner.segment_s = 0;
    try {
      mine = search(alone, inner);
    } catch (const std::exception& e) {
      failed = std::current_exception();
      error = on_rank(comm, e.what());
    }
  }
  RankFigures& figures = mine.second;
  if (!searches || failed) figures = RankFigures{};
  figures.rank = comm.rank();
  figures.threads = run.threads;
  Bytes out;
  out.put(error);
  out.put(figures);
  if (searches && !failed) out.put(mine.first);
  const auto wait = Clock::now();
  const std::vector<std::string> all = comm.allgather(out.take());
  if (failed) {
    // Named as the other ranks see it; an input error keeps its type (its
    // exit code).
    try {
      std::rethrow_exception(failed);
    } catch (const InputError&) {
      throw;
    } catch (...) {
      throw SearchFailure(error);
    }
  }
  OnRank0 got;
  for (std::size_t k = 0; k < all.size(); ++k) {
    Unbytes in(all[k]);
    if (std::string e = in.get<std::string>(); !e.empty()) throw SearchFailure(e);
    got.ranks.push_back(in.get<RankFigures>());
    if (k == 0) got.bytes = searches ? std::move(mine.first) : in.get<std::string>();
  }
  got.ranks[static_cast<std::size_t>(comm.rank())].idle_s += since(wait);
  return got;
}

namespace {

// A small search run whole on rank 0 (run_on_rank0), its result on
// every rank.
SearchResult whole_on_rank0(const Workload& w, const ClusterSpec& cluster, const SearchOptions& opt,
                            bool bruteforce, Comm& comm, const RunOptions& run) {
  const auto start = Clock::now();
  OnRank0 got = run_on_rank0(comm, run, [&](Comm& alone, const RunOptions& inner) {
    const SearchResult r = run_search(w, cluster, opt, bruteforce, alone, inner);
    return std::pair{encode_result(r), r.ranks.front()};
  });
  SearchResult r = decode_result(got.bytes);
  r.ranks = std::move(got.ranks);
  r.whole_on_rank0 = true;
  r.stats.seconds = since(start);
  return r;
}

// The result's outcomes in the order of the configurations, its
// statistics (sums over the outcomes, plus the configurations skipped by
// their bound), its closest miss and its top K, from the outcomes in the
// order searched.
void finish_result(SearchResult& r, std::vector<ConfigOutcome>&& searched, std::int64_t skipped,
                   int top_k) {
  r.outcomes.clear();
  r.outcomes.reserve(searched.size());
  for (std::size_t c = 0; c < r.outcome_of.size(); ++c) {
    std::int32_t& k = r.outcome_of[c];
    if (k < 0) continue;
    r.outcomes.push_back(std::move(searched[static_cast<std::size_t>(k)]));
    k = static_cast<std::int32_t>(r.outcomes.size() - 1);
  }
  std::vector<PlanCandidate> all;
  for (const ConfigOutcome& o : r.outcomes) {
    r.stats += o.stats;
    if (o.best) all.push_back(*o.best);
    if (o.closest.bytes < r.closest.bytes) r.closest = o.closest;
  }
  r.stats.configs_bounded += skipped;
  std::sort(all.begin(), all.end(), candidate_less);
  if (static_cast<int>(all.size()) > top_k) all.resize(static_cast<std::size_t>(top_k));
  r.top = std::move(all);
  r.stats.configs = static_cast<std::int64_t>(r.outcome_of.size());
}

// Whether the plain DP (bound off) over `configs` makes at most
// kSplitAboveMoves moves, counted (work_estimate), stopping as soon as it
// makes more. Without the bound a few configurations can hold much work
// (a deep plain DP: Mixtral-S on paper:32-1 without pruning, 1,248
// configurations of 24 layers, 3.4 million moves and 5.9 million with the
// fixed shares): such a search is split over the ranks however few its
// configurations. Every rank counts alike.
bool plain_moves_at_most(const Workload& w, const ClusterSpec& cluster,
                         const std::vector<ParallelConfig>& configs, const SearchOptions& opt) {
  const ProfileTables tables = tables_for(w, cluster, configs, opt.profile.get());
  const CostModel model(w, cluster, tables);
  double moves = 0;
  for (const ParallelConfig& pi : configs) {
    moves += work_estimate(model, pi, opt);
    if (moves > kSplitAboveMoves) return false;
  }
  return true;
}

// The seed incumbent (docs/search.md, "The seed incumbent"): a sample of
// Pi (every stride-th configuration, at most kSeedSample) is bounded, and
// its configurations of least bound are searched, K at a time, until K of
// them hold a plan or kSeedSearches are searched. Each is searched against
// its bound plus kSeedMargin, within kSeedChecks of its cancel checks
// between DP levels and labels (a deterministic budget: without a cut,
// one deep configuration of DeepSeek-V3's large case took 3 s); a search
// stopped there keeps the plan it found, if any. Every plan found is a
// plan of Pi, so the K-th best of Pi is at most the K-th of theirs. Both
// steps are spread over the ranks and threads (computed_by_all), and give
// the same values on every rank for any of them. The plans found are kept
// for a search that a limit stops later (run_search).
struct Seed {
  double latency = std::numeric_limits<double>::infinity();
  int searches = 0;
  std::vector<PlanCandidate> plans;  // in the order of the sample searched
};
constexpr std::size_t kSeedSample = 16384;
constexpr int kSeedSearches = 64;
constexpr double kSeedMargin = 0.1;
constexpr int kSeedChecks = 16;

Seed seed_incumbent(const CostModel& model, const std::vector<ParallelConfig>& configs,
                    const SearchOptions& opt, int threads, Comm& comm, LimitWatch& watch,
                    bool limited, StopReason& stopped, RankFigures& mine) {
  if (opt.top_k > kSeedSearches) return {};  // K plans cannot be found within it
  const double inf = std::numeric_limits<double>::infinity();
  const std::size_t stride = std::max<std::size_t>(1, configs.size() / kSeedSample);
  const std::size_t count = (configs.size() + stride - 1) / stride;
  const std::vector<double> bounds =
      computed_by_all<double>(comm, threads, count, 64, watch, stopped, mine, [&](std::size_t i) {
        const ParallelConfig& pi = configs[i * stride];
        return config_lower_bound(model, bound_shape(model, pi, opt), pi).latency;
      });
  if (stopped != StopReason::kNone) return {};
  std::vector<std::pair<double, std::size_t>> sample;  // (bound, config)
  for (std::size_t i = 0; i < count; ++i) {
    if (std::isfinite(bounds[i])) sample.emplace_back(bounds[i], i * stride);
  }
  std::sort(sample.begin(), sample.end());
  const auto k = static_cast<std::size_t>(opt.top_k);
  const std::size_t most = std::min(sample.size(), static_cast<std::size_t>(kSeedSearches));
  std::vector<double> found;
  Seed seed;
  // The plans this rank's threads found, by position in the sample.
  std::vector<std::optional<PlanCandidate>> plans(most);
  while (static_cast<std::size_t>(seed.searches) < most && found.size() < k) {
    const auto at = static_cast<std::size_t>(seed.searches);
    const std::size_t batch = std::min(k - found.size(), most - at);
    const std::vector<double> best =
        computed_by_all<double>(comm, threads, batch, 1, watch, stopped, mine, [&](std::size_t i) {
          const auto& [bound, c] = sample[at + i];
          int checks = 0;
          const CancelCheck budget = [&](std::int64_t grow_bytes) {
            // Only the checks between DP levels and labels count: a check
            // for growth depends on what the thread's arena held before.
            if (grow_bytes == 0 && ++checks > kSeedChecks) return true;
            return limited && watch.check(false, grow_bytes) != StopReason::kNone;
          };
          ConfigOutcome o = search_config(model, configs[c], opt, bound * (1.0 + kSeedMargin),
                                          SearchPart{}, &budget);
          plans[at + i] = std::move(o.best);
          return plans[at + i] ? plans[at + i]->latency_s : inf;
        });
    if (stopped != StopReason::kNone) return {};
    seed.searches += static_cast<int>(batch);
    for (const double b : best) {
      if (std::isfinite(b)) found.push_back(b);
    }
  }
  if (found.size() >= k) seed.latency = *std::max_element(found.begin(), found.end());
  // Every rank gets every plan, in the sample's order.
  Bytes out;
  for (std::size_t i = 0; i < plans.size(); ++i) {
    if (!plans[i]) continue;
    out.put(static_cast<std::uint64_t>(i));
    out.put(*plans[i]);
  }
  const auto wait = Clock::now();
  const std::vector<std::string> all =
      comm.size() == 1 ? std::vector<std::string>{out.take()} : comm.allgather(out.take());
  mine.idle_s += since(wait);
  for (const std::string& from : all) {
    Unbytes in(from);
    while (!in.done()) {
      const auto i = static_cast<std::size_t>(in.get<std::uint64_t>());
      if (i >= plans.size()) {
        throw std::runtime_error("seed: a plan out of range from another rank");
      }
      plans[i].emplace();
      in.get(*plans[i]);
    }
  }
  for (std::optional<PlanCandidate>& p : plans) {
    if (p) seed.plans.push_back(std::move(*p));
  }
  return seed;
}

// A search that a limit stopped also offers the seed's plans (real plans
// of Pi, found by budgeted searches): each in the top K unless the search
// holds a plan of its configuration at least as good. Enough to compare
// with the top K: a configuration whose best was left out of it has K
// better plans there.
void add_seed_plans(std::vector<PlanCandidate>& top, const std::vector<PlanCandidate>& seed_plans,
                    int top_k) {
  for (const PlanCandidate& p : seed_plans) {
    const auto same = std::find_if(top.begin(), top.end(), [&](const PlanCandidate& q) {
      return q.plan.parallel == p.plan.parallel;
    });
    if (same == top.end()) {
      top.push_back(p);
    } else if (candidate_less(p, *same)) {
      *same = p;
    }
  }
  std::sort(top.begin(), top.end(), candidate_less);
  if (static_cast<int>(top.size()) > top_k) top.resize(static_cast<std::size_t>(top_k));
}

}  // namespace

SearchResult run_search(const Workload& w, const ClusterSpec& cluster, const SearchOptions& opt,
                        bool bruteforce, Comm& comm, const RunOptions& run) {
  HAPMOE_REQUIRE(run.threads >= 1 && run.round >= 1 && opt.top_k >= 1,
                 "run_search: threads, round and top_k must be >= 1");
  const auto start = Clock::now();
  const int ranks = comm.size();
  const int me = comm.rank();
  const std::int64_t claimed_at_start = comm.claimed();
  RankFigures mine;
  mine.rank = me;
  mine.threads = run.threads;

  SearchResult r;
  // Progress, when asked for (relaxed: a progress line reads them).
  SearchProgress fallback;
  SearchProgress& progress = run.progress != nullptr ? *run.progress : fallback;
  const auto report = [&](std::atomic<std::int64_t>& field, std::int64_t value) {
    field.store(value, std::memory_order_relaxed);
  };
  // Pi: the caller's (copied into the result only if asked), or
  // enumerated here (moved into it).
  std::vector<ParallelConfig> enumerated;
  if (run.configs == nullptr) enumerated = enumerate_configs(w, cluster, opt.space);
  const std::vector<ParallelConfig>& configs = run.configs != nullptr ? *run.configs : enumerated;
  const std::size_t n = configs.size();
  if (ranks > 1 && static_cast<double>(n) * w.model.num_layers <= run.split_above &&
      (opt.bound || bruteforce || opt.count_only ||
       plain_moves_at_most(w, cluster, configs, opt))) {
    return whole_on_rank0(w, cluster, opt, bruteforce, comm, run);
  }
  report(progress.configs, static_cast<std::int64_t>(n));
  progress.phase.store(SearchProgress::kBounds, std::memory_order_relaxed);
  PiSummary own_summary;
  if (run.summary == nullptr) own_summary = summarize(configs);
  const PiSummary& summary = run.summary != nullptr ? *run.summary : own_summary;
  ProfileTables own_tables;
  if (run.tables == nullptr) own_tables = tables_for(w, cluster, summary, opt.profile.get());
  const CostModel model(w, cluster, run.tables != nullptr ? *run.tables : own_tables);
  HAPMOE_REQUIRE(n <= static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()),
                 "run_search: more configurations than an int32 index reaches");
  if (const std::int64_t budget = run.limits.max_memory_bytes; budget > 0) {
    const SearchSize size{static_cast<std::int64_t>(n), w.model.num_layers, summary.max_pp,
                          cluster.num_types()};
    const std::int64_t need = estimate_search_bytes(size);
    if (need > budget) {
      std::ostringstream msg;
      if (run.limits.memory_given) {
        msg << budget << " bytes (" << (budget >> 20) << " MiB)";
      } else {
        msg << "this rank's share of the node's memory (" << (budget >> 20) << " MiB)";
      }
      msg << " is less than the search needs: at least " << (need >> 20) << " MiB for " << n
          << " configurations of " << size.layers << " layers, PP up to " << size.max_pp
          << " (docs/testing.md, \"Faults and limits\"); "
          << (run.limits.memory_given ? "raise it, or make" : "use fewer ranks per node, or make")
          << " the space smaller (--max-pp, a smaller cluster)";
      throw InputError(run.limits.memory_given ? "--max-memory" : "memory", msg.str());
    }
  }

  // Bounds, or work estimates where there is no bound: computed once over
  // the job. With the bound, each round estimates its own configurations
  // (finer, against its incumbent, below); without it, one round holds all
  // of Pi. A limit reached here stops the search before any round.
  LimitWatch watch(run.limits);
  // The incumbent the search starts from: the caller's, or a seed where
  // there is none and Pi is large (RunOptions::seed_from).
  double incumbent_in = run.incumbent;
  std::vector<PlanCandidate> seed_plans;
  if (!bruteforce && opt.bound && !opt.count_only && !std::isfinite(run.incumbent) &&
      run.floors == nullptr && run.step_floors == nullptr && run.seed_from > 0 &&
      n >= run.seed_from) {
    Seed seed = seed_incumbent(model, configs, opt, run.threads, comm, watch, run.limits.any(),
                               r.stopped, mine);
    incumbent_in = seed.latency;
    r.seed = seed.latency;
    r.seed_searches = seed.searches;
    seed_plans = std::move(seed.plans);
  }
  std::vector<ConfigBound> bounds;
  // Configurations whose stages cannot hold the layers are skipped by an
  // infinite bound (below), where search_config would skip them unsearched.
  const bool memory_short = memory_short_applies(model, opt, incumbent_in);
  if (!bruteforce && opt.bound) {
    HAPMOE_REQUIRE((run.floors == nullptr || run.floors->size() == n) &&
                       (run.step_floors == nullptr || run.step_floors->size() == n),
                   "run_search: the floors are not Pi's");
    const double incumbent_cut = skip_above(incumbent_in);
    const auto steps_of = [&](std::size_t c) {
      return run.step_floors != nullptr ? (*run.step_floors)[c] : 0.0;
    };
    const auto floor_of = [&](std::size_t c) {
      return std::max(steps_of(c), run.floors != nullptr ? (*run.floors)[c] : 0.0);
    };
    bounds.resize(n);
    // A configuration whose floor is above the caller's incumbent takes
    // the floor as its bound (it is skipped all the same, below); only the
    // others are bounded, in one pass over them alone.
    std::vector<std::size_t> open;
    const bool floored = run.floors != nullptr || run.step_floors != nullptr;
    if (floored) {
      for (std::size_t c = 0; c < n; ++c) {
        if (const double floor = floor_of(c); floor > incumbent_cut) {
          bounds[c] = ConfigBound{floor, steps_of(c)};
        } else {
          open.push_back(c);
        }
      }
    }
    // Configurations of equal shape next to each other (BoundShape: most
    // of a bound's cost), so a thread computes each shape once, for the
    // run of its chunk that shares it.
    std::vector<std::size_t> own_order;
    const std::vector<std::size_t>* order = &own_order;  // the kept one, or own_order
    if (floored && open.size() < n) {
      std::vector<ParallelConfig> left;
      left.reserve(open.size());
      for (const std::size_t c : open) left.push_back(configs[c]);
      for (const std::size_t k : bound_shape_order(left)) own_order.push_back(open[k]);
    } else if (run.shape_order != nullptr) {
      std::shared_ptr<const std::vector<std::size_t>>& kept = *run.shape_order;
      if (!kept)
        kept = std::make_shared<const std::vector<std::size_t>>(bound_shape_order(configs));
      HAPMOE_REQUIRE(kept->size() == n, "run_search: a shape order of another Pi");
      order = kept.get();
    } else {
      own_order = bound_shape_order(configs);
    }
    const std::vector<std::size_t>& by_shape = *order;
    std::vector<ShapeBounds> shapes(static_cast<std::size_t>(run.threads), ShapeBounds(model, opt));
    // A configuration search_config would skip at once for memory takes
    // an infinite bound (its steps kept: another sharding or offload may
    // fit it), so that it is skipped before its work estimate and search,
    // the incumbent or not (RunOptions::floors carry it to the searches
    // this one relaxes: they need no less memory).
    const std::vector<ConfigBound> in_shape_order = computed_by_all<ConfigBound>(
        comm, run.threads, by_shape.size(), 512, watch, r.stopped, mine, [&](std::size_t i) {
          const std::size_t c = by_shape[i];
          const auto thread = static_cast<std::size_t>(omp_get_thread_num());
          ConfigBound b =
              shapes[thread].bound(configs[c], incumbent_cut, run.step_bounds_above_cut);
          if (memory_short && !(b.latency > incumbent_cut) &&
              shapes[thread].short_of_memory(configs[c])) {
            b.latency = std::numeric_limits<double>::infinity();
          }
          b.latency = std::max(b.latency, floor_of(c));
          b.steps = std::max(b.steps, steps_of(c));
          return b;
        });
    for (std::size_t i = 0; i < by_shape.size(); ++i) bounds[by_shape[i]] = in_shape_order[i];
    r.estimates.assign(n, 0.0);
  } else {
    r.estimates = computed_by_all<double>(
        comm, run.threads, n, 512, watch, r.stopped, mine, [&](std::size_t c) {
          return bruteforce ? bruteforce_size(model, configs[c], opt)
                            : work_estimate(model, configs[c], opt);
        });
  }
  if (bruteforce && r.stopped == StopReason::kNone) {
    const double total = std::accumulate(r.estimates.begin(), r.estimates.end(), 0.0);
    if (total > kBruteForceLimit) {
      std::ostringstream msg;
      msg << "the space has about " << total << " plans over " << n
          << " configurations; brute force is limited to " << kBruteForceLimit
          << " plans (use the DP, or a smaller model/cluster)";
      throw InputError("--bruteforce", msg.str());
    }
  }

  // Outcomes of the searched configurations, in the order searched; put in
  // the order of the configurations at the end.
  std::vector<ConfigOutcome> searched;
  std::int64_t skipped = 0;
  r.outcome_of.assign(n, SearchResult::kNotSearched);
  r.lower_bounds.assign(n, 0.0);
  for (std::size_t c = 0; c < bounds.size(); ++c) r.lower_bounds[c] = bounds[c].latency;
  r.ran_on.assign(n, -1);
  r.round_of.assign(n, -1);
  r.parts.assign(n, 0);
  std::vector<PlanCandidate> top;  // the K best so far, sorted
  const auto kth = [&] {
    return static_cast<int>(top.size()) < opt.top_k ? incumbent_in
                                                    : std::min(incumbent_in, top.back().latency_s);
  };
  const auto enter_top = [&](const PlanCandidate& best) {
    top.insert(std::upper_bound(top.begin(), top.end(), best, candidate_less), best);
    if (static_cast<int>(top.size()) > opt.top_k) top.pop_back();
  };
  const bool rounds = !bruteforce && opt.bound;

  // The committed units of an earlier run (RunOptions::resume) take the
  // place of their searches: their outcomes, the configurations their
  // rounds skipped, and the top K they leave, from which the next round's
  // incumbent follows exactly as it did in that run.
  int resumed_rounds = 0;
  if (run.resume != nullptr) {
    const SearchResume& from = *run.resume;
    if (from.configs != static_cast<std::int64_t>(n)) {
      throw InputError("--resume", "the archive's search has " + std::to_string(from.configs) +
                                       " configurations, this one " + std::to_string(n) +
                                       " (another version of hapmoe, or other inputs)");
    }
    for (const CommittedConfig& k : from.searched) {
      HAPMOE_REQUIRE(k.config < n && r.outcome_of[k.config] == SearchResult::kNotSearched,
                     "run_search: a committed configuration out of range, or twice");
      r.outcome_of[k.config] = static_cast<std::int32_t>(searched.size());
      searched.push_back(k.outcome);
      ConfigOutcome& o = searched.back();
      if (o.best) {
        o.best->plan.parallel = configs[k.config];
        enter_top(*o.best);
      }
      r.ran_on[k.config] = k.rank;
      r.round_of[k.config] = k.round;
      r.parts[k.config] = k.parts;
      r.estimates[k.config] = k.estimate;
    }
    for (const std::size_t c : from.skipped) {
      HAPMOE_REQUIRE(c < n && r.outcome_of[c] == SearchResult::kNotSearched,
                     "run_search: a committed configuration out of range, or twice");
      r.outcome_of[c] = SearchResult::kSkippedByBound;
      ++skipped;
    }
    for (const PlanCandidate& c : top) {
      HAPMOE_REQUIRE(static_cast<int>(c.plan.stages.size()) == c.plan.parallel.pp,
                     "run_search: a committed plan of the top K without its stages");
    }
    r.resumed = static_cast<std::int64_t>(from.searched.size());
    resumed_rounds = from.rounds;
    // Without the bound all of Pi is round 0, continued here.
    r.rounds = rounds ? from.rounds : 0;
  }

  // A snapshot of the result so far, for RunOptions::checkpoint: what is
  // searched, as the end of the search would give it.
  const auto snapshot = [&] {
    SearchResult s;
    s.configs = configs;
    s.outcome_of = r.outcome_of;
    s.lower_bounds = r.lower_bounds;
    s.estimates = r.estimates;
    s.ran_on = r.ran_on;
    s.round_of = r.round_of;
    s.parts = r.parts;
    s.units = r.units;
    s.rounds = std::max(r.rounds, resumed_rounds);
    s.resumed = r.resumed;
    for (std::size_t c = 0; c < n; ++c) {
      if (s.outcome_of[c] != SearchResult::kNotSearched) continue;
      s.round_of[c] = -1;
      ++s.not_searched;
    }
    std::vector<ConfigOutcome> copy = searched;
    finish_result(s, std::move(copy), skipped, opt.top_k);
    s.stopped = StopReason::kCheckpoint;
    s.stats.seconds = since(start);
    return s;
  };

  // The units of a round: a configuration, or (a large share of the
  // round's estimate) its parts, consecutive.
  struct Unit {
    std::size_t config = 0;
    SearchPart part;
    double work = 0;
    // What the round's estimate computed of the configuration, on this
    // rank (null elsewhere): its search, on any thread, starts there.
    std::shared_ptr<const ConfigFacts> facts;
    // Searched in level shares by every thread of every rank at once
    // (SearchPart::levels; its `part` is then unused).
    bool shared = false;
  };
  std::atomic<std::int64_t> started{0};  // searches this rank began (test hook)
  // The node counter's value before this round: where the last search on
  // this Comm left it (read by every rank of the node before the bounds'
  // allgather, so before any rank claims).
  std::int64_t claimed = claimed_at_start;
  // Searches `seg` (indices into `units`, the parts of a configuration
  // together and in order) against `incumbent`. The units are split over
  // the nodes by estimated work (LPT), handed out dynamically to the
  // node's ranks and their threads (the node's claim counter), largest
  // estimate first; the outcomes gathered on every rank and the parts
  // merged in order. Which worker runs a unit changes nothing but the
  // timing: every unit is searched against the same incumbent. Returns
  // the longest time a rank computed.
  const auto run_units = [&](const std::vector<Unit>& units, const std::vector<std::size_t>& seg,
                             double incumbent, bool first_of_round) {
    std::vector<double> work(seg.size());
    for (std::size_t k = 0; k < seg.size(); ++k) {
      work[k] = units[seg[k]].shared ? 0.0 : units[seg[k]].work;
    }
    const Shard shard = lpt_split(work, comm.nodes());
    std::vector<std::size_t> local;  // positions in seg of this node's units, largest first
    for (std::size_t k = 0; k < seg.size(); ++k) {
      if (shard.owner[k] == comm.node() && !units[seg[k]].shared) local.push_back(k);
    }
    std::stable_sort(local.begin(), local.end(),
                     [&](std::size_t a, std::size_t b) { return work[a] > work[b]; });
    std::vector<ConfigOutcome> results(local.size());
    std::vector<char> ran(local.size(), 0);           // by this rank
    std::atomic<StopReason> stop{StopReason::kNone};  // a limit this rank reached
    // A unit in progress stops too when a limit passes (between its stage
    // mixes and DP levels); without limits nothing is asked.
    const CancelCheck cancel = [&](std::int64_t grow_bytes) {
      const StopReason why = watch.check(false, grow_bytes);
      if (why == StopReason::kNone) return false;
      stop.store(why, std::memory_order_relaxed);
      return true;
    };
    const CancelCheck* cancel_ptr = run.limits.any() ? &cancel : nullptr;
    const std::int64_t base = claimed;
    const std::int64_t limit = base + static_cast<std::int64_t>(local.size());
    claimed = limit;
    // The progress line counts the units of the round (the segments of a
    // round add up).
    if (first_of_round) {
      report(progress.round_claimed, 0);
      report(progress.round_units, 0);
    }
    progress.round_units.fetch_add(static_cast<std::int64_t>(local.size()),
                                   std::memory_order_relaxed);
    const auto t = Clock::now();
    // The level-shared units first, one after another, each on every
    // thread of every rank at once. The ranks agree before each whether to
    // start it: a limit, a signal or a failure (in the last shared unit)
    // on any rank starts none of them; the round's gather below then
    // reports a failure on every rank.
    struct SharedRun {
      std::size_t at = 0;  // position in seg
      ConfigOutcome outcome;
      int shares = 0;
    };
    std::vector<SharedRun> shared;
    std::string shared_error;
    for (std::size_t k = 0; k < seg.size(); ++k) {
      const Unit& unit = units[seg[k]];
      if (!unit.shared) continue;
      StopReason why = stop.load(std::memory_order_relaxed);
      if (why == StopReason::kNone) why = watch.check(true);
      if (why == StopReason::kNone && run.stop_requested && run.stop_requested()) {
        why = StopReason::kSignal;
      }
      Bytes asked;
      asked.put(why);
      asked.put(!shared_error.empty());
      bool failed = false;
      for (const std::string& b : comm.allgather(asked.take())) {
        Unbytes in(b);
        why = std::max(why, in.get<StopReason>());
        failed = in.get<bool>() || failed;
      }
      if (failed) break;
      if (why != StopReason::kNone) {
        stop.store(why, std::memory_order_relaxed);
        break;
      }
      progress.round_units.fetch_add(1, std::memory_order_relaxed);
      progress.round_claimed.fetch_add(1, std::memory_order_relaxed);
      SharedRun done{k, {}, 0};
      done.outcome = search_in_shares(comm, run.threads, model, configs[unit.config], opt,
                                      incumbent, cancel_ptr, done.shares, shared_error);
      shared.push_back(std::move(done));
    }
    // The test hook fails this rank in a given round, whether or not it
    // would have claimed work there (it claims none; the others do it all).
    const bool inject = r.rounds - 1 == run.fail_round;
    const std::string error =
        !shared_error.empty() ? shared_error
        : inject
            ? "injected failure (test hook) in round " + std::to_string(r.rounds - 1)
            : parallel_for_each(
                  run.threads, local.size(),
                  [&] {
                    if (stop.load(std::memory_order_relaxed) != StopReason::kNone)
                      return std::int64_t{-1};
                    if (const StopReason why = watch.check(true); why != StopReason::kNone) {
                      stop.store(why, std::memory_order_relaxed);
                      return std::int64_t{-1};
                    }
                    // A stop asked for (a signal): start nothing more;
                    // the units in flight finish.
                    if (run.stop_requested && run.stop_requested()) {
                      stop.store(StopReason::kSignal, std::memory_order_relaxed);
                      return std::int64_t{-1};
                    }
                    const std::int64_t v = comm.claim(limit);
                    return v < 0 ? v : v - base;
                  },
                  [&](std::size_t i) {
                    const Unit& unit = units[seg[local[i]]];
                    ran[i] = 1;
                    if (started.fetch_add(1) == run.fail_search) {
                      throw std::runtime_error("injected failure (test hook) in configuration " +
                                               std::to_string(unit.config));
                    }
                    const ParallelConfig& pi = configs[unit.config];
                    progress.round_claimed.fetch_add(1, std::memory_order_relaxed);
                    results[i] = bruteforce ? bruteforce_config(model, pi, opt)
                                            : search_config(model, pi, opt, incumbent, unit.part,
                                                            cancel_ptr, unit.facts.get());
                  });
    const double busy = since(t);
    mine.busy_s += busy;
    Bytes out;
    out.put(on_rank(comm, error));
    out.put(stop.load());
    out.put(busy);
    if (error.empty()) {
      for (std::size_t i = 0; i < local.size(); ++i) {
        if (!ran[i]) continue;
        const Unit& unit = units[seg[local[i]]];
        out.put(static_cast<std::uint64_t>(local[i]));
        out.put(results[i]);
        mine.configs += unit.part.index == 0 ? 1 : 0;
        mine.parts += 1;
        mine.transitions += results[i].stats.transitions;
        mine.estimate += unit.work;
      }
      for (const SharedRun& done : shared) {
        out.put(static_cast<std::uint64_t>(done.at));
        out.put(done.outcome);
        mine.configs += comm.rank() == 0 ? 1 : 0;
        mine.parts += 1;
        mine.transitions += done.outcome.stats.transitions;
        mine.estimate += units[seg[done.at]].work / comm.size();
      }
    }
    const auto wait = Clock::now();
    const std::vector<std::string> all = comm.allgather(out.take());
    mine.idle_s += since(wait);
    std::string first;
    double longest = 0;
    std::vector<std::optional<ConfigOutcome>> got(seg.size());
    std::vector<int> by(seg.size(), -1);
    // A shared unit's outcome from each rank (seconds, transitions), merged
    // in rank order into got.
    std::vector<std::vector<ConfigOutcome>> by_rank(seg.size());
    for (int k = 0; k < ranks && first.empty(); ++k) {
      Unbytes in(all[static_cast<std::size_t>(k)]);
      first = in.get<std::string>();
      // The same on every rank: the largest reason any rank gave.
      r.stopped = std::max(r.stopped, in.get<StopReason>());
      longest = std::max(longest, in.get<double>());
      while (first.empty() && !in.done()) {
        const auto u = static_cast<std::size_t>(in.get<std::uint64_t>());
        HAPMOE_REQUIRE(u < seg.size() && (!got[u] || units[seg[u]].shared),
                       "run_search: a rank sent a unit not in the round, or twice");
        if (units[seg[u]].shared) {
          by_rank[u].push_back(in.get<ConfigOutcome>());
          if (!got[u]) got[u].emplace();
          merge_part(*got[u], by_rank[u].back());
          HAPMOE_REQUIRE(static_cast<int>(by_rank[u].size()) == k + 1,
                         "run_search: a rank did not take part in a shared unit");
          if (by[u] < 0) by[u] = k;
          continue;
        }
        got[u] = in.get<ConfigOutcome>();
        by[u] = k;
      }
    }
    if (!first.empty()) throw SearchFailure(first);
    // Parts of a configuration are consecutive units: merged in order. A
    // unit no rank ran (a limit was reached, or a stop asked for) is left
    // out; a configuration none of whose units ran is not searched. After
    // a signal, one some of whose parts did not run is not searched either:
    // what is committed must be whole for --resume (a limit keeps the best
    // found, which is all a stopped search promises).
    std::vector<char> whole(seg.size(), 1);
    for (std::size_t k = 0; k < seg.size() && r.stopped == StopReason::kSignal;) {
      std::size_t end = k;
      bool complete = true;
      for (; end < seg.size() && units[seg[end]].config == units[seg[k]].config; ++end) {
        complete = complete && got[end].has_value();
      }
      if (!complete)
        std::fill(whole.begin() + static_cast<std::ptrdiff_t>(k),
                  whole.begin() + static_cast<std::ptrdiff_t>(end), 0);
      k = end;
    }
    int shares = 0;  // of the shared units (the same for all of them)
    for (const SharedRun& done : shared) shares = done.shares;
    // (A shared configuration counts as searched in one part: its DP is
    // one, and /search/configs stays the same for any ranks and threads.)
    for (std::size_t k = 0; k < seg.size(); ++k) {
      const Unit& unit = units[seg[k]];
      if (unit.shared && got[k] && static_cast<int>(by_rank[k].size()) != ranks) got[k].reset();
      if (!got[k] || !whole[k]) {
        HAPMOE_REQUIRE(r.stopped != StopReason::kNone, "run_search: a unit of the round was lost");
        continue;
      }
      const std::size_t c = unit.config;
      if (r.outcome_of[c] < 0) {
        r.outcome_of[c] = static_cast<std::int32_t>(searched.size());
        searched.emplace_back();
        r.ran_on[c] = by[k];
        r.parts[c] = unit.part.count;
      }
      merge_part(searched[static_cast<std::size_t>(r.outcome_of[c])], *got[k]);
      if (!unit.shared) {
        r.units.push_back({c, unit.part, r.rounds - 1, by[k], unit.work, got[k]->stats.seconds,
                           got[k]->stats.transitions});
        continue;
      }
      // A shared unit: one figure per rank, its threads' shares together.
      for (int rank = 0; rank < ranks; ++rank) {
        const ConfigOutcome& o = by_rank[k][static_cast<std::size_t>(rank)];
        r.units.push_back({c, SearchPart{rank, ranks}, r.rounds - 1, rank, unit.work / ranks,
                           o.stats.seconds, o.stats.transitions, shares});
      }
    }
    return longest;
  };

  // One round: `batch` searched against `incumbent`. A configuration whose
  // estimate is a large share of the round's is cut into parts
  // (SearchPart; the rule depends on the estimates only, never on R or T).
  // With RunOptions::segment_s (and no bound: the round is all of Pi) the
  // round is run in segments with a checkpoint between them: the
  // configurations largest estimate first, the first segment 1/1024 of the
  // round's estimate, each next one the estimate the segments so far did
  // in segment_s seconds (at most 8 times the last). The sizes come from
  // the times gathered from every rank, so every rank cuts alike.
  const auto run_round = [&](const std::vector<std::size_t>& batch, double incumbent) {
    // Bounded rounds get the finer estimate (the mixes the bound keeps),
    // computed over the job like the bounds; a limit reached there ends
    // the search before the round.
    std::vector<std::shared_ptr<const ConfigFacts>> facts(batch.size());
    if (rounds) {
      const std::vector<double> estimates = computed_by_all<double>(
          comm, run.threads, batch.size(), 1, watch, r.stopped, mine, [&](std::size_t k) {
            return work_estimate(model, configs[batch[k]], opt, incumbent, &facts[k]);
          });
      if (r.stopped != StopReason::kNone) return;
      for (std::size_t k = 0; k < batch.size(); ++k) r.estimates[batch[k]] = estimates[k];
    }
    double total = 0.0;
    for (const std::size_t c : batch) total += r.estimates[c];
    std::vector<Unit> units;
    std::vector<std::size_t> first_unit;  // per batch position
    for (std::size_t k = 0; k < batch.size(); ++k) {
      const std::size_t c = batch[k];
      int parts = 1;
      bool shared = false;
      // Without the bound every part is searched with its configuration's
      // own probe plan (search_config); with it, only rounds that have an
      // incumbent are cut (without one, every part would first run its best
      // mix unbounded).
      if (!bruteforce && run.parts_per_round > 0 && total > 0.0 &&
          (std::isfinite(incumbent) || !opt.bound)) {
        const double share = r.estimates[c] / total * run.parts_per_round;
        if (share > 1.0) {
          parts = std::min(max_parts(model, configs[c], opt),
                           static_cast<int>(std::min(std::ceil(share), 1e6)));
          // A DP without stage mixes has no parts: every worker shares it,
          // level by level (one worker searches it whole).
          shared = parts == 1 && can_share_levels(opt) && (comm.size() > 1 || run.threads > 1);
        }
      }
      first_unit.push_back(units.size());
      for (int p = 0; p < parts; ++p) {
        units.push_back({c, SearchPart{p, parts}, r.estimates[c] / parts, facts[k], shared});
      }
    }
    first_unit.push_back(units.size());
    if (rounds || run.segment_s <= 0) {
      std::vector<std::size_t> all(units.size());
      std::iota(all.begin(), all.end(), std::size_t{0});
      run_units(units, all, incumbent, true);
      return;
    }
    std::vector<std::size_t> order(batch.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return r.estimates[batch[a]] > r.estimates[batch[b]];
    });
    // The share of the estimated work committed, for the progress line
    // (configurations restored from a checkpoint count as done).
    const double all_work = std::accumulate(r.estimates.begin(), r.estimates.end(), 0.0);
    progress.work_total.store(all_work, std::memory_order_relaxed);
    progress.work_done.store(all_work - total, std::memory_order_relaxed);
    double target = total / 1024;
    double done_work = 0;
    double done_s = 0;
    for (std::size_t k = 0; k < order.size() && r.stopped == StopReason::kNone;) {
      std::vector<std::size_t> seg;
      double work = 0;
      std::size_t configs_in_seg = 0;
      while (k < order.size() && (seg.empty() || work < target)) {
        ++configs_in_seg;
        for (std::size_t u = first_unit[order[k]]; u < first_unit[order[k] + 1]; ++u) {
          seg.push_back(u);
        }
        work += r.estimates[batch[order[k]]];
        ++k;
      }
      done_s += run_units(units, seg, incumbent, k == configs_in_seg);
      done_work += work;
      progress.work_done.store(progress.work_done.load(std::memory_order_relaxed) + work,
                               std::memory_order_relaxed);
      for (const std::size_t u : seg) {  // the best plan so far, for the progress line
        const std::int32_t at = r.outcome_of[units[u].config];
        const ConfigOutcome* o = at < 0 ? nullptr : &searched[static_cast<std::size_t>(at)];
        if (o != nullptr && o->best && o->best->latency_s < progress.best.load()) {
          progress.best.store(o->best->latency_s, std::memory_order_relaxed);
        }
      }
      progress.settled.fetch_add(static_cast<std::int64_t>(configs_in_seg),
                                 std::memory_order_relaxed);
      report(progress.searched, static_cast<std::int64_t>(searched.size()));
      if (r.stopped != StopReason::kNone || k == order.size()) break;
      if (run.checkpoint) run.checkpoint(snapshot);
      const double rate = done_s > 0 ? done_work / done_s : 0.0;
      target = rate > 0 ? std::min(8 * target, rate * run.segment_s) : 8 * target;
    }
  };

  // Configurations in increasing lower bound (then canonical order); in a
  // round, one whose bound exceeds the K-th best latency found before the
  // round cannot enter the top K and is skipped. The order uses the bound
  // without the tail term: it finds good incumbents sooner (measured in
  // bench/README.md). Without the bound (or for brute force) one round
  // holds everything, in canonical order.
  //
  // The order comes from a heap of (bound, index), taken as the rounds
  // need it: once the least bound left exceeds the incumbent, every
  // configuration left is skipped (a full bound is never below its
  // steps), so most of Pi is never sorted (on the 604 k of the large
  // case: under 0.01 s, against 0.06 s for a stable sort of all).
  // Committed configurations (RunOptions::resume) are left out: taken.
  progress.phase.store(SearchProgress::kSearching, std::memory_order_relaxed);
  // A bound above the caller's incumbent is above every round's cut: such
  // a configuration is skipped here, without entering the heap (where it
  // would wait for its turn by its steps, or for the end).
  std::vector<std::pair<double, std::size_t>> heap;  // least first
  if (rounds) {
    const double first_cut = skip_above(incumbent_in);
    for (std::size_t c = 0; c < n; ++c) {
      if (r.outcome_of[c] != SearchResult::kNotSearched) continue;
      // An infinite bound, no plan at all, is skipped without an incumbent
      // too where no closest miss is wanted.
      if (bounds[c].latency > first_cut || (memory_short && std::isinf(bounds[c].latency))) {
        r.outcome_of[c] = SearchResult::kSkippedByBound;
        ++skipped;
      } else {
        heap.emplace_back(bounds[c].steps, c);
      }
    }
    std::make_heap(heap.begin(), heap.end(), std::greater<>{});
  }
  std::size_t taken = rounds ? n - heap.size() : 0;  // configurations taken from the order
  const auto round_size = static_cast<std::size_t>(run.round);
  // Per bounded round: its cut (its searches keep no plan above it); -inf
  // for the rounds of a resumed run (RunOptions::resume) before this one.
  std::vector<double> round_cut(static_cast<std::size_t>(r.rounds),
                                -std::numeric_limits<double>::infinity());
  while (taken < n && r.stopped == StopReason::kNone) {
    // Without the bound, the one round's incumbent is the caller's, also
    // when committed plans were restored (as in the run that committed
    // them).
    const double incumbent = rounds ? kth() : run.incumbent;
    const double cut = skip_above(incumbent);
    // A first round without an incumbent takes only the K configurations
    // of least bound: searched unbounded, each is several times dearer
    // than against a cut, and K plans give every later round its cut.
    const std::size_t size = rounds && r.rounds == 0 && !std::isfinite(incumbent)
                                 ? std::min(round_size, static_cast<std::size_t>(opt.top_k))
                                 : round_size;
    std::vector<std::size_t> batch;
    while (taken < n && (!rounds || batch.size() < size)) {
      std::size_t c = taken;
      if (rounds) {
        if (heap.front().first > cut) {  // this bound and every later one
          for (const auto& left : heap) r.outcome_of[left.second] = SearchResult::kSkippedByBound;
          skipped += static_cast<std::int64_t>(heap.size());
          taken = n;
          break;
        }
        std::pop_heap(heap.begin(), heap.end(), std::greater<>{});
        c = heap.back().second;
        heap.pop_back();
      }
      ++taken;
      if (r.outcome_of[c] != SearchResult::kNotSearched) continue;  // committed
      if (rounds && bounds[c].latency > cut) {
        r.outcome_of[c] = SearchResult::kSkippedByBound;
        ++skipped;
        continue;
      }
      batch.push_back(c);
    }
    if (batch.empty()) continue;
    for (const std::size_t c : batch) r.round_of[c] = r.rounds;
    round_cut.push_back(cut);
    ++r.rounds;
    report(progress.settled, static_cast<std::int64_t>(taken - batch.size()));
    report(progress.rounds, r.rounds);
    const std::size_t searched_before = searched.size();
    const std::size_t units_before = r.units.size();
    run_round(batch, incumbent);
    if (rounds && r.stopped == StopReason::kSignal) {
      // A stop asked for in a bounded round: the round is dropped, so the
      // result holds whole rounds only (RunOptions::stop_requested).
      searched.resize(searched_before);
      r.units.resize(units_before);
      for (const std::size_t c : batch) {
        r.outcome_of[c] = SearchResult::kNotSearched;
        r.ran_on[c] = -1;
        r.parts[c] = 0;
        r.estimates[c] = 0;
      }
      --r.rounds;
      round_cut.pop_back();
    }
    for (const std::size_t c : batch) {
      if (r.outcome_of[c] < 0) {  // stopped before it
        r.round_of[c] = -1;
        ++r.not_searched;
        continue;
      }
      const ConfigOutcome& o = searched[static_cast<std::size_t>(r.outcome_of[c])];
      if (o.best) enter_top(*o.best);
    }
    report(progress.settled, static_cast<std::int64_t>(taken));
    report(progress.searched, static_cast<std::int64_t>(searched.size()));
    if (!top.empty()) progress.best.store(top.front().latency_s, std::memory_order_relaxed);
    if (rounds && taken < n && r.stopped == StopReason::kNone && run.checkpoint) {
      run.checkpoint(snapshot);
    }
  }
  r.rounds = std::max(r.rounds, resumed_rounds);
  progress.phase.store(SearchProgress::kDone, std::memory_order_relaxed);
  if (r.stopped != StopReason::kNone) r.not_searched += static_cast<std::int64_t>(n - taken);
  // A stop asked for once nothing was left (a rank that saw it had no unit
  // to start, the others searched the rest): the search is whole.
  if (r.stopped == StopReason::kSignal && r.not_searched == 0) r.stopped = StopReason::kNone;

  if (rounds) {
    r.step_bounds.resize(n);
    for (std::size_t c = 0; c < n; ++c) r.step_bounds[c] = bounds[c].steps;
    r.floors.resize(n);
    for (std::size_t c = 0; c < n; ++c) {
      double& floor = r.floors[c];
      floor = bounds[c].latency;
      const std::int32_t k = r.outcome_of[c];
      const ConfigOutcome* o = k < 0 ? nullptr : &searched[static_cast<std::size_t>(k)];
      if (o == nullptr || o->cancelled) continue;
      floor = o->best ? o->best->latency_s
                      : std::max(floor,
                                 std::nextafter(round_cut[static_cast<std::size_t>(r.round_of[c])],
                                                std::numeric_limits<double>::infinity()));
    }
  }
  finish_result(r, std::move(searched), skipped, opt.top_k);
  if (r.stopped != StopReason::kNone) add_seed_plans(r.top, seed_plans, opt.top_k);
  if (run.configs == nullptr) {
    r.configs = std::move(enumerated);
  } else if (run.result_configs) {
    r.configs = *run.configs;
  }

  // Per-rank figures, on every rank.
  {
    Bytes out;
    out.put(mine);
    const std::vector<std::string> figures = comm.allgather(out.take());
    for (const std::string& f : figures) {
      Unbytes in(f);
      r.ranks.push_back(in.get<RankFigures>());
    }
  }
  r.stats.seconds = since(start);
  return r;
}

}  // namespace hapmoe
