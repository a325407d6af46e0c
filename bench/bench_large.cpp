// The large case: 12,288 devices (H800:4096, MI300X:4096, 910B:4096), global
// batch scaled to the cluster (12288), one thread.
//
//   pruned   - run_search with the default options (three prunings, branch
//              and bound): wall time, |Pi|, configurations evaluated, DP
//              states, transitions, pruned counts, peak RSS (VmHWM), best
//              latency.
//   unpruned - the plain DP (prune none, bound off) over the whole space is
//              far too slow to run (single configurations take seconds to
//              minutes); a seeded uniform random sample of Pi goes through
//              search_config with prune none and bound off, and the total is
//              extrapolated as mean time per sampled configuration x |Pi|,
//              with the standard error of that estimate.
//
//   bench_large MODEL [--sample N] [--seed S] [--budget SECONDS]
//                     [--config-limit SECONDS] [--verbose] [--no-pruned]
//                     [--no-sample] [--cluster SPEC] [--global-batch B]
//   MODEL: mixtral-l | deepseek-v3 (any model preset or file works)
//
//   --sample N         configurations drawn (default 200) with std::sample
//                      and mt19937_64(--seed), then measured in shuffled order;
//   --budget S         no new sampled configuration is started after S seconds
//                      (default 240): the ones measured are still a uniform
//                      random sample, just a smaller one;
//   --config-limit S   each sampled configuration runs in a forked child killed
//                      after S seconds (default 60); a killed one counts as S
//                      seconds, and the extrapolation is then a lower bound
//                      (printed with ">=").
//   --verbose          one line per sampled configuration.
//   --config PP,TP,CP,EP,TPE,DP
//                      measure this configuration instead of a sample
//                      (repeatable; each must be in Pi).
//   --shares T         search each measured configuration of the plain DP
//                      in T level shares on T threads (search_in_shares,
//                      docs/parallel.md): the same plan and transitions,
//                      its wall time.
//
// Each measured configuration's transitions are also counted
// (count_only, exact, milliseconds), killed or not, and so are all of
// Pi's: the ratio estimate is then (sum of the measured seconds / sum of
// their counted transitions) x Pi's transitions, which follows the work
// where the mean per configuration follows only how many there are.

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench/run_limited.h"
#include "engine/driver.h"
#include "engine/search.h"
#include "io/inputs/cluster_io.h"
#include "io/inputs/model_io.h"
#include "partition/config_space.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Peak resident set size of this process in KiB (VmHWM), -1 if unknown.
long peak_rss_kib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

long long ll(std::int64_t v) { return static_cast<long long>(v); }

// One sampled configuration, timed inside the child (trivially copyable).
struct Sample {
  double seconds = 0;
  long long transitions = 0;
  long long feasible = 0;
  double latency = std::numeric_limits<double>::infinity();
};

// search_config(model, pi, opt) timed in a forked child, or in `shares`
// level shares on as many threads; nullopt if it did not finish within
// limit_s seconds (the child is killed) or failed.
std::optional<Sample> sample_limited(const hapmoe::CostModel& model,
                                     const hapmoe::ParallelConfig& pi,
                                     const hapmoe::SearchOptions& opt, double limit_s, int shares) {
  return hapmoe::bench::run_limited(
      [&] {
        const auto start = Clock::now();
        hapmoe::ConfigOutcome o;
        if (shares > 1) {
          hapmoe::SerialComm comm;
          int made = 0;
          std::string error;
          o = hapmoe::search_in_shares(comm, shares, model, pi, opt,
                                       std::numeric_limits<double>::infinity(), nullptr, made,
                                       error);
          if (!error.empty() || made != shares) std::abort();  // counted as failed
        } else {
          o = hapmoe::search_config(model, pi, opt);
        }
        Sample s;
        s.seconds = seconds_since(start);
        s.transitions = o.stats.transitions;
        s.feasible = o.stats.feasible;
        if (o.best) s.latency = o.best->latency_s;
        return s;
      },
      limit_s);
}

int usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s MODEL [--sample N] [--seed S] [--budget SECONDS]\n"
               "          [--config-limit SECONDS] [--verbose] [--no-pruned] [--no-sample]\n"
               "          [--cluster SPEC] [--global-batch B] [--config PP,TP,CP,EP,TPE,DP]...\n"
               "          [--shares T]\n"
               "  MODEL: mixtral-l | deepseek-v3\n",
               argv0);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return usage(argv[0]);
  const std::string model_name = argv[1];
  std::string cluster_spec = "H800:4096,MI300X:4096,910B:4096";
  int global_batch = 12288;
  int sample_size = 200;
  std::uint64_t seed = 20240611;
  double budget = 240.0;
  double config_limit = 60.0;
  bool run_pruned = true;
  bool run_sample = true;
  bool verbose = false;
  std::vector<std::array<int, 6>> chosen;  // --config
  int shares = 1;                          // --shares
  for (int a = 2; a < argc; ++a) {
    const std::string arg = argv[a];
    const bool has_value = a + 1 < argc;
    if (arg == "--sample" && has_value) {
      sample_size = std::stoi(argv[++a]);
    } else if (arg == "--seed" && has_value) {
      seed = std::stoull(argv[++a]);
    } else if (arg == "--budget" && has_value) {
      budget = std::stod(argv[++a]);
    } else if (arg == "--config-limit" && has_value) {
      config_limit = std::stod(argv[++a]);
    } else if (arg == "--cluster" && has_value) {
      cluster_spec = argv[++a];
    } else if (arg == "--global-batch" && has_value) {
      global_batch = std::stoi(argv[++a]);
    } else if (arg == "--config" && has_value) {
      std::array<int, 6> d{};
      if (std::sscanf(argv[++a], "%d,%d,%d,%d,%d,%d", &d[0], &d[1], &d[2], &d[3], &d[4], &d[5]) !=
          6) {
        return usage(argv[0]);
      }
      chosen.push_back(d);
    } else if (arg == "--shares" && has_value) {
      shares = std::stoi(argv[++a]);
      if (shares < 1) return usage(argv[0]);
    } else if (arg == "--verbose") {
      verbose = true;
    } else if (arg == "--no-pruned") {
      run_pruned = false;
    } else if (arg == "--no-sample") {
      run_sample = false;
    } else {
      return usage(argv[0]);
    }
  }

  try {
    hapmoe::Workload w = hapmoe::load_workload(model_name);
    hapmoe::TrainingOverrides ov;
    ov.global_batch = global_batch;
    hapmoe::apply_overrides(ov, w);
    const hapmoe::ClusterSpec cluster = hapmoe::load_cluster(cluster_spec);
    std::printf("model %s, cluster %s, global batch %d, one thread", model_name.c_str(),
                cluster_spec.c_str(), global_batch);
    if (shares > 1) std::printf(" (the sample's plain DPs: %d level shares on %d)", shares, shares);
    std::printf("\n");

    if (run_pruned) {
      const hapmoe::SearchOptions opt;  // defaults: prune all, bound on
      const auto start = Clock::now();
      const hapmoe::SearchResult r = hapmoe::run_search(w, cluster, opt);
      const double secs = seconds_since(start);
      const long rss = peak_rss_kib();
      const hapmoe::SearchStats& s = r.stats;
      std::printf("\npruned (default options; steady_clock around run_search, incl. tables)\n");
      std::printf("  wall time          %.2f s\n", secs);
      std::printf("  configurations     %lld\n", ll(s.configs));
      std::printf("  evaluated          %lld\n", ll(s.configs_evaluated));
      std::printf("  skipped by bound   %lld\n", ll(s.configs_bounded));
      std::printf("  DP states          %lld\n", ll(s.states));
      std::printf("  transitions        %lld (%.3g)\n", ll(s.transitions),
                  static_cast<double>(s.transitions));
      std::printf("  pruned lb/mem/comm %lld / %lld / %lld\n", ll(s.pruned_load_balance),
                  ll(s.pruned_memory), ll(s.pruned_hetero_comm));
      std::printf("  bound: partial     %lld\n", ll(s.pruned_bound));
      std::printf("  feasible           %lld\n", ll(s.feasible));
      std::printf("  peak RSS (VmHWM)   %.1f MiB\n", static_cast<double>(rss) / 1024.0);
      if (r.top.empty()) {
        std::printf("  best latency       none (nothing fits)\n");
      } else {
        const hapmoe::ParallelConfig& pi = r.top.front().plan.parallel;
        std::printf("  best latency       %.6f s (PP %d TP %d CP %d EP %d TPE %d DP %d)\n",
                    r.top.front().latency_s, pi.pp, pi.tp, pi.cp, pi.ep, pi.tpe, pi.dp);
      }
      std::fflush(stdout);
    }

    if (run_sample && sample_size > 0) {
      const hapmoe::SearchOptions base;
      const auto t0 = Clock::now();
      const std::vector<hapmoe::ParallelConfig> configs =
          hapmoe::enumerate_configs(w, cluster, base.space);
      const hapmoe::ProfileTables tables = hapmoe::tables_for(w, cluster, configs);
      const hapmoe::CostModel model(w, cluster, tables);
      const double setup = seconds_since(t0);

      std::vector<std::size_t> index(configs.size());
      std::iota(index.begin(), index.end(), std::size_t{0});
      std::vector<std::size_t> picked;
      if (chosen.empty()) {
        const std::size_t n = std::min(static_cast<std::size_t>(sample_size), configs.size());
        std::mt19937_64 rng(seed);
        std::sample(index.begin(), index.end(), std::back_inserter(picked), n, rng);
        // std::sample keeps Pi's order (PP first); measure in random order
        // so that stopping at the budget does not bias the sample.
        std::shuffle(picked.begin(), picked.end(), rng);
      }
      for (const std::array<int, 6>& d : chosen) {
        const auto it = std::find_if(configs.begin(), configs.end(), [&](const auto& pi) {
          return std::array<int, 6>{pi.pp, pi.tp, pi.cp, pi.ep, pi.tpe, pi.dp} == d;
        });
        if (it == configs.end()) {
          std::fprintf(stderr, "error: --config %d,%d,%d,%d,%d,%d is not in Pi\n", d[0], d[1], d[2],
                       d[3], d[4], d[5]);
          return 2;
        }
        picked.push_back(static_cast<std::size_t>(it - configs.begin()));
      }

      hapmoe::SearchOptions plain;
      plain.prune = hapmoe::PruneSet{false, false, false};
      plain.bound = false;
      hapmoe::SearchOptions counting = plain;
      counting.count_only = true;
      const auto count_start = Clock::now();
      double pi_transitions = 0;  // of all of Pi, counted
      for (const hapmoe::ParallelConfig& pi : configs) {
        pi_transitions +=
            static_cast<double>(hapmoe::search_config(model, pi, counting).stats.transitions);
      }
      const double count_s = seconds_since(count_start);
      std::printf("\nunpruned baseline (prune none, bound off), %s%s\n",
                  chosen.empty() ? "sampled" : "chosen", verbose ? ":" : "");
      std::vector<double> times;
      std::int64_t transitions = 0;
      double counted = 0;       // the measured configurations' transitions, counted
      double counted_done = 0;  // of those that finished
      double seconds_done = 0;
      int censored = 0;
      double best = std::numeric_limits<double>::infinity();
      const auto sample_start = Clock::now();
      bool cut = false;
      for (const std::size_t c : picked) {
        if (budget > 0 && seconds_since(sample_start) > budget) {
          cut = true;
          break;
        }
        const hapmoe::ParallelConfig& pi = configs[c];
        const auto moves =
            static_cast<double>(hapmoe::search_config(model, pi, counting).stats.transitions);
        counted += moves;
        const std::optional<Sample> s = sample_limited(model, pi, plain, config_limit, shares);
        if (s) {
          times.push_back(s->seconds);
          transitions += s->transitions;
          counted_done += moves;
          seconds_done += s->seconds;
          best = std::min(best, s->latency);
        } else {
          times.push_back(config_limit);
          ++censored;
        }
        if (verbose) {
          std::printf(
              "    PP %2d TP %d CP %2d EP %2d TPE %2d DP %4d: %s%10.1f ms, %.4g transitions", pi.pp,
              pi.tp, pi.cp, pi.ep, pi.tpe, pi.dp, s ? "  " : "> ", times.back() * 1e3, moves);
          if (s) {
            std::printf(" (%.0f ns each), %lld feasible plans reached",
                        s->seconds / std::max(moves, 1.0) * 1e9, s->feasible);
          }
          std::printf("\n");
          std::fflush(stdout);
        }
      }
      const double k = static_cast<double>(times.size());
      const double sum = std::accumulate(times.begin(), times.end(), 0.0);
      const double mean = sum / k;
      double var = 0;
      for (const double t : times) var += (t - mean) * (t - mean);
      var = times.size() > 1 ? var / (k - 1) : 0.0;
      const double se = std::sqrt(var / k);
      std::vector<double> sorted = times;
      std::sort(sorted.begin(), sorted.end());
      const double total = static_cast<double>(configs.size());
      const char* ge = censored > 0 ? ">= " : "";
      if (chosen.empty()) {
        std::printf("  method             uniform random sample of Pi without replacement\n");
        std::printf("                     (std::sample + shuffle, mt19937_64 seed %llu), each\n",
                    static_cast<unsigned long long>(seed));
      } else {
        std::printf(
            "  method             the configurations given (--config: not a sample), each\n");
      }
      std::printf("                     through search_config in a child process;\n");
      std::printf("                     total = mean time per config x |Pi|\n");
      std::printf("  |Pi|               %zu (enumeration + tables %.2f s)\n", configs.size(),
                  setup);
      std::printf(
          "  sample             %zu of %zu drawn measured%s, %d over the %.0f s "
          "per-config limit\n",
          times.size(), picked.size(), cut ? " (budget reached)" : "", censored, config_limit);
      std::printf(
          "  per config         mean %s%.1f ms, median %.1f ms, min %.1f ms, max %s%.1f ms\n", ge,
          mean * 1e3, sorted[sorted.size() / 2] * 1e3, sorted.front() * 1e3,
          censored > 0 ? "> " : "", sorted.back() * 1e3);
      if (censored == 0) {
        std::printf("  sample transitions %lld (%.3g/s)\n", ll(transitions),
                    static_cast<double>(transitions) / sum);
      }
      std::printf("  extrapolated       %s%.3g s = %s%.1f days (1 std. error %.2g s)\n", ge,
                  mean * total, ge, mean * total / 86400.0, se * total);
      // The ratio estimate: seconds per counted transition of the measured
      // configurations times Pi's transitions (a killed one adds its limit
      // and its whole count: its rate is a lower bound).
      const double per_move = sum / std::max(counted, 1.0);
      std::printf(
          "  Pi's transitions   %.4g (counted in %.1f s); measured %.4g, of which finished "
          "%.4g in %.1f s (%.0f ns each)\n",
          pi_transitions, count_s, counted, counted_done, seconds_done,
          seconds_done / std::max(counted_done, 1.0) * 1e9);
      std::printf(
          "  ratio estimate     %s%.3g s = %s%.1f core-days = %s%.2f h on 1,024 cores (%s%.0f ns "
          "per transition)\n",
          ge, per_move * pi_transitions, ge, per_move * pi_transitions / 86400.0, ge,
          per_move * pi_transitions / 1024.0 / 3600.0, ge, per_move * 1e9);
      if (std::isfinite(best)) std::printf("  best in sample     %.6f s\n", best);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
