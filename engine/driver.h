// The search over the whole configuration space (docs/search.md,
// docs/parallel.md): enumerate Pi, build the profile tables once, run the
// HS-DP kernel (or brute force) on every pi, keep the top K by (latency,
// canonical plan key) -- over MPI ranks (a Comm) and OpenMP threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "costmodel/cluster.h"
#include "costmodel/model.h"
#include "costmodel/profile.h"
#include "engine/comm.h"
#include "engine/limits.h"
#include "engine/search.h"

namespace hapmoe {

// How far a search has come, for a progress line (`plan --progress-every`):
// written by run_search as it goes, readable from any thread meanwhile.
// Counts over Pi are the whole job's, known after each round; the units
// of the round in progress are this rank's node's.
struct SearchProgress {
  enum Phase : int { kStarting, kBounds, kSearching, kDone };
  std::atomic<int> phase{kStarting};
  std::atomic<std::int64_t> configs{0};  // |Pi|, once enumerated
  std::atomic<std::int64_t> settled{0};  // searched, or skipped by the bound
  std::atomic<std::int64_t> searched{0};
  std::atomic<std::int64_t> rounds{0};         // rounds begun
  std::atomic<std::int64_t> round_units{0};    // units of the round on this node
  std::atomic<std::int64_t> round_claimed{0};  // of them, begun on this rank
  std::atomic<double> best{std::numeric_limits<double>::infinity()};  // latency
  // Without the bound (one round over Pi): the estimated work of the whole
  // search (work_estimate: counted moves) and of what is committed so far
  // (restored, and the segments finished); 0 when not known.
  std::atomic<double> work_total{0};
  std::atomic<double> work_done{0};
  // The search of the job-wide knobs (run_job_search), around the fields
  // above (those are its current variant's): the variants begun, its steps
  // done of all (a combination of the knobs, or the offload fractions of
  // one) and the best latency of every variant so far. 0 steps: not a job
  // search.
  std::atomic<std::int64_t> variants{0};
  std::atomic<std::int64_t> job_steps_done{0};
  std::atomic<std::int64_t> job_steps{0};
  std::atomic<double> job_best{std::numeric_limits<double>::infinity()};
};

// How one process runs its share of the search.
// RunOptions::split_above's default: the paper's cases run whole (Mixtral-S
// on paper:32-2, 1,248 configurations of 24 layers, 4-8 ms on one core:
// over 3 ranks on 2 cores a median of 65 ms split, 32 ms whole;
// docs/parallel.md, "Small searches").
inline constexpr double kSplitAbove = 65536;
// Without the bound, a search whose plain DP makes more moves than this
// (counted, with each configuration's fixed share: work_estimate) is split
// however few its configuration-layers: 0.2-2 s of work on one core,
// against the few milliseconds a split costs.
inline constexpr double kSplitAboveMoves = 4e6;
// RunOptions::seed_from's default: DeepSeek-V3's large case (0.6 M
// configurations) is seeded, the paper's cases (at most 1,248) are not.
// Below it a seed gains little (the bounds are few) and one that finds no
// K plans costs a few percent: DeepSeek-V3 on 910B:256 (18,076
// configurations) took 0.07 s seeded, 0.05 s not; on H800:128 (8,722)
// with `--space all`, 2.88 s against 2.83 s (bench/README.md).
inline constexpr std::size_t kSeedFrom = 32768;

struct SearchResult;

// Searches pi in level shares (SearchPart::levels, can_share_levels(opt))
// on `threads` threads of every rank at once, one share per thread: every
// rank calls it with the same arguments. Returns this rank's threads'
// outcomes merged in share order (merge_part; the job's outcome is the
// ranks' merged in rank order), `shares` the shares over the job, and
// `error` the first failure of a thread of this rank ("" if none).
ConfigOutcome search_in_shares(Comm& comm, int threads, const CostModel& model,
                               const ParallelConfig& pi, const SearchOptions& opt, double incumbent,
                               const CancelCheck* cancel, int& shares, std::string& error);

// A configuration whose search is committed (a checkpoint of an earlier
// run, RunOptions::resume): its outcome as that run merged it.
struct CommittedConfig {
  std::size_t config = 0;  // index in Pi
  // Its counters, closest miss and best plan. A best plan outside the
  // committed top K may come with its latency only (plan.stages empty):
  // it can never enter the top K again (K committed plans beat it), and
  // the engine fills in plan.parallel.
  ConfigOutcome outcome;
  int rank = -1;        // the rank that searched it (in that run)
  int round = 0;        // its round
  int parts = 1;        // the parts it was searched in
  double estimate = 0;  // its work estimate (bounded rounds: against their incumbent)
};

// What a search resumes from (plan --resume; docs/archive.md,
// "Checkpoints of one search"): the committed units of an earlier run of
// the same search. Every configuration of a committed round is committed
// (the bounded search commits whole rounds); without the bound all of Pi
// is one round, committed configuration by configuration.
struct SearchResume {
  std::int64_t configs = 0;  // |Pi| of that run: must be this search's
  std::vector<CommittedConfig> searched;
  std::vector<std::size_t> skipped;  // skipped by their bound
  int rounds = 0;                    // rounds of that run (all committed)
};

// A configuration whose lower bound is above this cannot enter the top K
// once the K-th best latency is `incumbent` (the margin: the same stages
// summed in another order). A search skips above it, and keeps no plan
// above it (SearchResult::floors).
double skip_above(double incumbent);

// What a search needs of Pi beyond the configurations themselves: its
// distinct TP and CP degrees, ascending, and its deepest pipeline. One
// pass over Pi (memory-bound: 2 ms for the 0.6 M configurations of the
// large case), which a caller searching one Pi many times keeps.
struct PiSummary {
  std::vector<int> tp;
  std::vector<int> cp;
  int max_pp = 0;
};
PiSummary summarize(const std::vector<ParallelConfig>& configs);

struct RunOptions {
  int threads = 1;  // OpenMP threads of this rank
  // Branch and bound runs in rounds of this many configurations (those
  // not skipped), each searched against the incumbent of the round's
  // start, so any split of a round over ranks and threads gives the same
  // results and statistics. Changing it changes the statistics (not the
  // plans).
  int round = 32;
  // A configuration whose estimated work exceeds 1/parts_per_round of its
  // round's is cut into up to (its share x parts_per_round) parts
  // (SearchPart) that any workers search apart; 0 never cuts. Like
  // `round`, it changes the statistics (parts tighten their bound only
  // among their own stage mixes), never the plans, and it does not depend
  // on the ranks and threads.
  int parts_per_round = 0;
  // --time-limit and --max-memory: when one is reached, no new unit of
  // work starts (units in progress stop at their next check, keeping the
  // best plan they found), the round ends with what was
  // searched and no further round starts; SearchResult::stopped says why.
  // Every rank stops after the same round (the ranks' reasons are
  // gathered with the round's outcomes).
  SearchLimits limits;
  // Where to report progress (nullptr: nowhere).
  SearchProgress* progress = nullptr;
  // A latency known to be no better than the K-th best plan of the whole
  // job (the job search's earlier variants, engine/job_space.h): the
  // bound skips what cannot beat it from the start. +inf: none.
  double incumbent = std::numeric_limits<double>::infinity();
  // Without such an incumbent, a search with the bound over at least this
  // many configurations seeds one (docs/search.md, "The seed incumbent"):
  // its bounds and its first rounds then have a cut. 0: never. Changes
  // the statistics and the bounds kept, never the plans.
  std::size_t seed_from = kSeedFrom;
  // Pi, when the caller has it: enumerate_configs of this search's
  // workload, cluster and space (the job search reuses it across variants
  // that Pi does not depend on). nullptr: the search enumerates it.
  const std::vector<ParallelConfig>* configs = nullptr;
  // Whether SearchResult::configs gets a copy of the caller's Pi
  // (`configs`; Pi enumerated by the search is always moved there). A
  // caller that keeps Pi and most results only for their plans and bounds
  // (the job search) leaves the copy out: SearchResult::configs is then
  // empty.
  bool result_configs = true;
  // summarize(*configs), when the caller keeps it with Pi. nullptr: the
  // search makes it.
  const PiSummary* summary = nullptr;
  // tables_for(this search's workload, cluster, summary and profile), when
  // the caller keeps them: the job search, per micro-batch, vpp and
  // precision (a variant's other knobs do not enter them; docs/search.md,
  // "Job-wide knobs"). nullptr: the search makes them.
  const ProfileTables* tables = nullptr;
  // bound_shape_order(*configs), kept by the caller across searches of the
  // same Pi: used when set; made and left here when null and a search
  // orders all of Pi. nullptr: the search makes its own.
  std::shared_ptr<const std::vector<std::size_t>>* shape_order = nullptr;
  // Per configuration of Pi, when the caller knows them: a latency that no
  // plan of it reaches under this search's costs, the SearchResult::floors
  // of a search of a relaxation of this one (cheaper in every time term and
  // needing no more memory: the job search's range of offload fractions
  // for a fraction in it, its per-stage recompute for a job-wide setting).
  // A configuration whose floor is above the incumbent is skipped without
  // its bound; the others' bounds are raised to their floors. Changes the
  // statistics, never the plans. nullptr: none.
  const std::vector<double>* floors = nullptr;
  // Per configuration of Pi: a floor of its bound without the tail term
  // (ConfigBound::steps), the SearchResult::step_bounds of a search whose
  // layer steps, boundaries, embedding and output are this one's (the job
  // search's variants that differ only in sharding, offload or recompute:
  // those change a stage's tail and what is added to its layers' steps,
  // never the steps themselves). Used as `floors` are. nullptr: none.
  const std::vector<double>* step_floors = nullptr;
  // Bound each configuration so that its SearchResult::step_bounds is
  // above the incumbent wherever one more test of the bottleneck floor
  // proves it (config_lower_bound's steps_above_cut), for the searches
  // that will take them as step_floors. Changes no plan or counter.
  bool step_bounds_above_cut = false;
  // The job search (run_job_search) runs a variant whose floors or step
  // floors leave part of Pi open on that part alone (the others are
  // skipped by their floors, as this search would skip them), and gives
  // the result of Pi. false: every variant's search is of all of Pi (the
  // same results and statistics; tests compare the two).
  bool open_part_only = true;
  // A search of more than this many configuration-layers (configurations
  // x the model's layers) is split over the ranks; a smaller one runs
  // whole on every rank, with one collective at the end: its rounds'
  // collectives would cost more than its work (docs/parallel.md, "Small
  // searches"). 0: every search is split.
  double split_above = kSplitAbove;
  // Test hook (tests, docs/parallel.md): this rank fails in round
  // fail_round (0 = the first) before claiming any work, so the failure
  // happens however the work is handed out; -1 never.
  int fail_round = -1;
  // Test hook: this rank throws inside the parallel loop when it starts its
  // search number fail_search (0 = its first); -1 never.
  std::int64_t fail_search = -1;

  // Checkpoints and resume (plan --out / --resume; docs/archive.md,
  // "Checkpoints of one search"). None of them changes a result or a
  // counter; none applies to a search run whole on every rank.
  //
  // Asked before each unit this rank would start: true makes it start no
  // more (units in flight finish). The ranks agree at the end of the
  // segment or round: the search then ends with StopReason::kSignal. In
  // the bounded search the unfinished round is dropped (its
  // configurations are not searched), so what the result holds is whole
  // rounds, each searched against the incumbent its predecessors left.
  std::function<bool()> stop_requested;
  // > 0: the one round of a search without the bound (all of Pi) is run
  // in segments, each about this many seconds of work (sized from the work
  // estimates and the rate of the segments before), so that `checkpoint`
  // can be called between them. A segment's configurations are searched
  // exactly as in one round (same incumbent), so the segments change
  // nothing but the waits at their ends.
  double segment_s = 0;
  // Called on every rank after each segment (without the bound) and each
  // round (with it) unless the search stopped there; `snapshot()` makes the
  // result so far (StopReason::kCheckpoint, no per-rank figures), e.g. for
  // rank 0 to write it. Every rank calls it at the same points, so it may
  // use the Comm for collectives.
  std::function<void(const std::function<SearchResult()>& snapshot)> checkpoint;
  // Committed units to restore instead of searching them (nullptr: none).
  const SearchResume* resume = nullptr;
};

// What one rank did.
struct RankFigures {
  int rank = 0;
  int threads = 1;
  std::int64_t configs = 0;      // configurations whose first part it searched
  std::int64_t parts = 0;        // units (configurations or parts of one) it searched
  std::int64_t transitions = 0;  // their transitions
  double estimate = 0;           // their work estimate
  double busy_s = 0;             // computing (bounds and searches)
  double idle_s = 0;             // waiting for the other ranks
};

// One unit of work the search handed out: a configuration, or one part of
// it (RunOptions::parts_per_round).
struct UnitFigures {
  std::size_t config = 0;
  SearchPart part;
  int round = 0;
  int rank = 0;         // the rank that searched it
  double estimate = 0;  // its share of the configuration's work estimate
  double seconds = 0;   // its search time
  std::int64_t transitions = 0;
  // A configuration searched in level shares (SearchPart::levels) by every
  // thread of every rank: one unit per rank (part = {rank, ranks}), and
  // the shares over the job; 0 for any other unit.
  int shares = 0;
};

struct SearchResult {
  std::vector<PlanCandidate> top;  // best first, at most top_k, one per pi
  SearchStats stats;
  Shortfall closest;  // when nothing fits
  std::vector<ParallelConfig> configs;
  // The outcomes of the configurations searched, in the order of `configs`
  // (most of a large space is skipped by its bound: per-config storage of
  // outcomes cost 224 bytes each). outcome(c) finds configuration c's.
  std::vector<ConfigOutcome> outcomes;
  // Per config: index in outcomes, or kSkippedByBound, or kNotSearched (a
  // limit stopped the search before it, or it was not reached before
  // a checkpoint).
  std::vector<std::int32_t> outcome_of;
  static constexpr std::int32_t kSkippedByBound = -1;
  static constexpr std::int32_t kNotSearched = -2;
  std::vector<double> lower_bounds;  // per config: config_lower_bound (0 without the bound)
  // Per config, with the bound: no plan of it is faster (its best plan's
  // latency; just above its round's cut if it was searched and held none
  // under it; else its bound, or RunOptions::floors'). Empty without the
  // bound. For a search of a restriction of this one, RunOptions::floors.
  std::vector<double> floors;
  // Per config, with the bound: its ConfigBound::steps (at least
  // RunOptions::step_floors'; that alone where a floor skipped it). Empty
  // without the bound.
  std::vector<double> step_bounds;
  std::vector<double> estimates;  // per config: work_estimate
  std::vector<int> ran_on;        // per config: the rank that searched (its first part), -1 if none
  std::vector<int> round_of;      // per config: its round, -1 if not searched
  std::vector<int> parts;         // per config: the parts it was searched in, 0 if not
  std::vector<RankFigures> ranks;  // per rank
  std::vector<UnitFigures> units;  // per unit searched: by round, parts of a config together
  int rounds = 0;                  // branch-and-bound rounds
  // The seed incumbent (RunOptions::seed_from): the K-th best latency of
  // the plans its searches found (+inf: not seeded), and the
  // configurations it searched (their work is not in `stats`).
  double seed = std::numeric_limits<double>::infinity();
  int seed_searches = 0;
  // A small search (RunOptions::split_above): rank 0 searched the whole
  // space alone and sent the result to the others (their figures show no
  // work).
  bool whole_on_rank0 = false;
  // kNone when the search ran to its end: the top plans are then the
  // optimum under the cost model. Otherwise the limit that stopped it: the
  // plans are the best found, not proven optimal, and `not_searched`
  // configurations were neither searched nor skipped by their bound.
  StopReason stopped = StopReason::kNone;
  std::int64_t not_searched = 0;
  // Configurations restored from RunOptions::resume, not searched by this
  // run (their outcomes are those of the run that committed them).
  std::int64_t resumed = 0;

  // Configuration c's outcome, or null if it was not searched.
  const ConfigOutcome* outcome(std::size_t c) const {
    const std::int32_t k = outcome_of[c];
    return k < 0 ? nullptr : &outcomes[static_cast<std::size_t>(k)];
  }
};

// Profile tables with a compute entry for every (TP, CP) of Pi: the
// analytic ones, with what `profile` measured in their place when given
// (costmodel/measured.h); `sources`, when given, says which.
ProfileTables tables_for(const Workload& workload, const ClusterSpec& cluster, const PiSummary& pi,
                         const MeasuredProfile* profile = nullptr,
                         ProfileSources* sources = nullptr);
ProfileTables tables_for(const Workload& workload, const ClusterSpec& cluster,
                         const std::vector<ParallelConfig>& configs,
                         const MeasuredProfile* profile = nullptr,
                         ProfileSources* sources = nullptr);

// Brute force refuses spaces larger than this many plans.
inline constexpr double kBruteForceLimit = 2e7;

// Collective over `comm`: every rank gets the same result. Throws
// InputError("--bruteforce", ...) when brute force would exceed
// kBruteForceLimit plans, and SearchFailure when any rank failed.
SearchResult run_search(const Workload& workload, const ClusterSpec& cluster,
                        const SearchOptions& options, bool bruteforce, Comm& comm,
                        const RunOptions& run);

// The whole result as bytes and back, for a collective that moves it
// between ranks (a small search run by rank 0 alone, a sweep's case run by
// one rank): decode_result(encode_result(r)) equals r.
std::string encode_result(const SearchResult& result);
SearchResult decode_result(const std::string& bytes);

// A small search (RunOptions::split_above) run by rank 0 alone: `search`
// gets a one-rank Comm and `run` without a stop request, checkpoints or
// segments (it runs to its end), and returns its result as bytes and
// rank 0's figures. The other ranks wait in the one collective without
// spinning (Comm::allgather sleeps once a wait passes a millisecond), so
// extra ranks and cores cost it nothing. Every rank gets the bytes, every
// rank's figures (the others show no work, only the wait) and any
// failure: an InputError keeps its type on rank 0 (its exit code), any
// other failure is a SearchFailure on every rank.
struct OnRank0 {
  std::string bytes;
  std::vector<RankFigures> ranks;  // per rank
};
OnRank0 run_on_rank0(
    Comm& comm, const RunOptions& run,
    const std::function<std::pair<std::string, RankFigures>(Comm& alone, const RunOptions& inner)>&
        search);

// What `result` commits, to resume its search from (RunOptions::resume):
// every configuration it searched or skipped by its bound, with its
// outcome, and its rounds. A result the search returned commits whole
// rounds only (RunOptions::stop_requested), so this is exact for a
// result stopped by a signal, a snapshot, or a finished one; not for one
// a limit stopped (its last units were cut short). The archive stores the
// same (io/archive/resume.h).
SearchResume resume_point(const SearchResult& result);

// The threads a rank uses by default: OMP_NUM_THREADS when set, otherwise
// the cores of the node shared by its ranks (at least 1).
int default_threads(const Comm& comm);

// One process, one thread.
SearchResult run_search(const Workload& workload, const ClusterSpec& cluster,
                        const SearchOptions& options, bool bruteforce = false);

// A failure of the search on some rank (an exception in the kernel, out of
// memory), reported identically on every rank.
class SearchFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace hapmoe
