// How well the engine's work split would balance R workers, from the work
// the search really did (issue 4): one run on one thread records, per
// searched configuration, its round, its work estimate and its measured
// seconds. For R = 1 ... 4096 workers in nodes of W (W = 1: every worker a
// node of its own, the static LPT split; W > 1: the round is split over the
// R / W nodes by LPT on the estimates, and inside a node handed out
// dynamically, largest estimate first, to whichever worker is free -- the
// scheme of engine/driver.cpp), each round is timed with the measured
// seconds. Prints per R the predicted search time (sum over rounds of the
// slowest worker), max/mean (that over the perfectly balanced time, the sum
// over rounds of the round's work / R), and the floor no split of whole
// configurations can beat (sum over rounds of max(work / R, the longest
// configuration)); and the correlation of estimate and measured work.
//
//   bench_split [--no-bound] [--prune SET] [--parts N] [--space LIST] [MODEL]
//   [CLUSTER] [GLOBAL_BATCH]
//   (default: the large case, deepseek-v3 on H800:4096,MI300X:4096,910B:4096,
//   global batch 12288; --no-bound: the search without branch and bound, one
//   round over all of Pi; --space: the job search over those knobs, as
//   `plan --space`, every variant's rounds one after the other; --prune:
//   the prunings, as `plan --prune`, default all)
//
//   bench_split --no-bound --prune none --sample N [--seed S] [--config-limit S]
//   [MODEL] [CLUSTER] [GLOBAL_BATCH]
//   the exhaustive search too large to run here (the plain DP of the large
//   case, hours on 1,024 cores): the units are all of Pi's configurations
//   with the engine's estimates (work_estimate: the counted transitions);
//   N of them, drawn uniformly (mt19937_64 seed S, default 20240611), are
//   searched (each in a child process killed after S seconds, default 60:
//   a killed one counts S), and every other configuration's seconds are
//   its estimate times the seconds-per-estimate of a sampled one, drawn by
//   a hash of its index (a bootstrap of the measured rates).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <queue>
#include <random>
#include <string>
#include <vector>

#include "bench/run_limited.h"
#include "engine/driver.h"
#include "engine/job_space.h"
#include "io/inputs/cluster_io.h"
#include "io/inputs/model_io.h"
#include "partition/config_space.h"
#include "partition/shard.h"

namespace {

double pearson(const std::vector<double>& x, const std::vector<double>& y) {
  const double n = static_cast<double>(x.size());
  const double mx = std::accumulate(x.begin(), x.end(), 0.0) / n;
  const double my = std::accumulate(y.begin(), y.end(), 0.0) / n;
  double sxy = 0, sxx = 0, syy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  return sxy / std::sqrt(sxx * syy);
}

std::vector<double> ranks_of(const std::vector<double>& v) {
  std::vector<std::size_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), std::size_t{0});
  std::sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (std::size_t k = 0; k < idx.size(); ++k) r[idx[k]] = static_cast<double>(k);
  return r;
}

// Items (seconds, in hand-out order) over `workers` that each take the
// next item when free: the time the last one finishes.
double list_schedule(const std::vector<double>& seconds, int workers) {
  std::priority_queue<double, std::vector<double>, std::greater<>> free_at;
  for (int k = 0; k < workers; ++k) free_at.push(0.0);
  double end = 0.0;
  for (const double t : seconds) {
    const double start = free_at.top();
    free_at.pop();
    free_at.push(start + t);
    end = std::max(end, start + t);
  }
  return end;
}

}  // namespace

int main(int argc, char** argv) try {
  std::vector<std::string> args(argv + 1, argv + argc);
  hapmoe::SearchOptions opt;
  hapmoe::RunOptions run;
  hapmoe::JobSpace space;
  int sample = 0;  // --sample: predict the exhaustive search from a sample
  std::uint64_t seed = 20240611;
  double config_limit = 60;
  while (!args.empty() && args.front().starts_with("--")) {
    if (args.front() == "--no-bound") {
      opt.bound = false;
    } else if (args.front() == "--parts" && args.size() > 1) {
      run.parts_per_round = std::atoi(args[1].c_str());
      args.erase(args.begin());
    } else if (args.front() == "--prune" && args.size() > 1) {
      opt.prune = hapmoe::parse_prune_set(args[1], "--prune");
      args.erase(args.begin());
    } else if (args.front() == "--sample" && args.size() > 1) {
      sample = std::atoi(args[1].c_str());
      args.erase(args.begin());
    } else if (args.front() == "--seed" && args.size() > 1) {
      seed = std::strtoull(args[1].c_str(), nullptr, 10);
      args.erase(args.begin());
    } else if (args.front() == "--config-limit" && args.size() > 1) {
      config_limit = std::atof(args[1].c_str());
      args.erase(args.begin());
    } else if (args.front() == "--space" && args.size() > 1) {
      space = hapmoe::parse_job_space(args[1], "--space");
      args.erase(args.begin());
    } else {
      throw std::runtime_error(
          "usage: bench_split [--no-bound [--sample N [--seed S] [--config-limit S]]] "
          "[--prune SET] [--parts N] [--space LIST] [MODEL] [CLUSTER] [GLOBAL_BATCH]");
    }
    args.erase(args.begin());
  }
  const std::string model = args.size() > 0 ? args[0] : "deepseek-v3";
  const std::string cluster = args.size() > 1 ? args[1] : "H800:4096,MI300X:4096,910B:4096";
  hapmoe::Workload w = hapmoe::load_workload(model);
  w.training.global_batch = args.size() > 2 ? std::atoi(args[2].c_str()) : 12288;
  const hapmoe::ClusterSpec cl = hapmoe::load_cluster(cluster);
  hapmoe::SerialComm comm;
  // Items: the units the search handed out (configurations, or parts).
  std::vector<hapmoe::UnitFigures> units;
  hapmoe::SearchStats stats;
  std::string variants;
  std::string sampled;  // with --sample: what was measured
  std::vector<double> sample_est;
  std::vector<double> sample_sec;
  if (sample > 0) {
    if (opt.bound || space.active())
      throw std::runtime_error("--sample needs --no-bound, no --space");
    const std::vector<hapmoe::ParallelConfig> configs = hapmoe::enumerate_configs(w, cl, opt.space);
    const hapmoe::ProfileTables tables = hapmoe::tables_for(w, cl, configs);
    const hapmoe::CostModel cost(w, cl, tables);
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<double> estimate(configs.size());
    for (std::size_t c = 0; c < configs.size(); ++c) {
      estimate[c] = hapmoe::work_estimate(cost, configs[c], opt);
    }
    const double estimate_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::vector<std::size_t> index(configs.size());
    std::iota(index.begin(), index.end(), std::size_t{0});
    std::vector<std::size_t> picked;
    std::mt19937_64 rng(seed);
    std::sample(index.begin(), index.end(), std::back_inserter(picked),
                std::min<std::size_t>(static_cast<std::size_t>(sample), configs.size()), rng);
    std::vector<double> measured(configs.size(), -1.0);
    std::vector<double> rates;  // seconds per unit of estimate, per sampled configuration
    int killed = 0;
    double sampled_s = 0;
    for (const std::size_t c : picked) {
      const std::optional<double> secs = hapmoe::bench::run_limited(
          [&] { return hapmoe::search_config(cost, configs[c], opt).stats.seconds; }, config_limit);
      measured[c] = secs ? *secs : config_limit;
      killed += secs ? 0 : 1;
      const hapmoe::ParallelConfig& pi = configs[c];
      std::printf("  PP %2d TP %d CP %2d EP %2d TPE %2d DP %4d: %s%9.3f s, estimate %.4g\n", pi.pp,
                  pi.tp, pi.cp, pi.ep, pi.tpe, pi.dp, secs ? "  " : "> ", measured[c], estimate[c]);
      std::fflush(stdout);
      sampled_s += measured[c];
      rates.push_back(measured[c] / estimate[c]);
      sample_est.push_back(estimate[c]);
      sample_sec.push_back(measured[c]);
    }
    hapmoe::SearchOptions counting = opt;
    counting.count_only = true;
    double predicted_total = 0;
    for (std::size_t c = 0; c < configs.size(); ++c) {
      // A fixed hash of the index picks the sampled rate (splitmix64).
      std::uint64_t x = c + 0x9e3779b97f4a7c15ULL;
      x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
      x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
      x ^= x >> 31;
      const double secs = measured[c] >= 0 ? measured[c] : estimate[c] * rates[x % rates.size()];
      predicted_total += secs;
      units.push_back({c, {}, 0, 0, estimate[c], secs, 0});
      stats.transitions += hapmoe::search_config(cost, configs[c], counting).stats.transitions;
    }
    stats.configs_evaluated = static_cast<std::int64_t>(configs.size());
    stats.seconds = predicted_total;
    char line[512];
    std::snprintf(line, sizeof line,
                  "sample of %zu configurations (seed %llu) searched in %.1f s, %d killed at %.0f "
                  "s (their rate a lower bound); estimates of all %zu in %.1f s; predicted "
                  "total %.4g s = %.1f core-days = %.2f h on 1,024 cores\n",
                  picked.size(), static_cast<unsigned long long>(seed), sampled_s, killed,
                  config_limit, configs.size(), estimate_s, predicted_total,
                  predicted_total / 86400, predicted_total / 1024 / 3600);
    sampled = line;
  } else if (space.active()) {
    hapmoe::JobSearchResult job = hapmoe::run_job_search(w, cl, opt, space, comm, run);
    units = std::move(job.units);
    stats = job.stats;
    variants = ", --space " + hapmoe::to_string(space) + " (" +
               std::to_string(job.variants.size()) + " variants)";
  } else {
    hapmoe::SearchResult r = hapmoe::run_search(w, cl, opt, false, comm, run);
    units = std::move(r.units);
    stats = r.stats;
  }
  std::map<int, std::vector<std::size_t>> rounds;
  std::vector<double> est;
  std::vector<double> sec;
  for (std::size_t u = 0; u < units.size(); ++u) {
    rounds[units[u].round].push_back(u);
    est.push_back(units[u].estimate);
    sec.push_back(units[u].seconds);
  }
  const double serial = std::accumulate(sec.begin(), sec.end(), 0.0);
  std::printf(
      "%s on %s, global batch %d, prune %s%s%s, parts per round %d: %lld configurations searched "
      "as %zu units in %zu rounds, %.2f s, %lld transitions\n",
      model.c_str(), cluster.c_str(), w.training.global_batch, hapmoe::to_string(opt.prune).c_str(),
      opt.bound ? "" : ", no bound", variants.c_str(), run.parts_per_round,
      static_cast<long long>(stats.configs_evaluated), est.size(), rounds.size(), stats.seconds,
      static_cast<long long>(stats.transitions));
  std::printf("%s", sampled.c_str());
  const std::vector<double>& xe = sample_est.empty() ? est : sample_est;
  const std::vector<double>& xs = sample_est.empty() ? sec : sample_sec;
  std::printf(
      "estimate vs measured seconds%s: Pearson %.3f, Spearman %.3f; longest %.3f s of %.3f s\n\n",
      sample_est.empty() ? "" : " (the sample)", pearson(xe, xs),
      pearson(ranks_of(xe), ranks_of(xs)), *std::max_element(sec.begin(), sec.end()), serial);
  const std::vector<int> per_node = {1, 16, 64};
  std::printf("%6s %10s", "ranks", "ideal_s");
  for (const int wpn : per_node) std::printf("   W=%-2d pred_s max/mean", wpn);
  std::printf(" %10s %9s\n", "floor_s", "floor_x");
  for (int ranks = 1; ranks <= 4096; ranks *= 2) {
    double ideal = 0.0;
    double floor = 0.0;
    std::vector<double> predicted(per_node.size(), 0.0);
    for (const auto& [round, items] : rounds) {
      std::vector<double> work;
      double total = 0.0;
      double longest = 0.0;
      for (const std::size_t u : items) {
        work.push_back(est[u]);
        total += sec[u];
        longest = std::max(longest, sec[u]);
      }
      ideal += total / ranks;
      floor += std::max(total / ranks, longest);
      for (std::size_t v = 0; v < per_node.size(); ++v) {
        const int workers = std::min(per_node[v], ranks);
        const int nodes = ranks / workers;
        const hapmoe::Shard s = hapmoe::lpt_split(work, nodes);
        double slowest = 0.0;
        for (int node = 0; node < nodes; ++node) {
          std::vector<std::size_t> mine;  // largest estimate first, as the driver hands out
          for (std::size_t k = 0; k < items.size(); ++k) {
            if (s.owner[k] == node) mine.push_back(k);
          }
          std::stable_sort(mine.begin(), mine.end(),
                           [&](std::size_t a, std::size_t b) { return work[a] > work[b]; });
          std::vector<double> seconds;
          seconds.reserve(mine.size());
          for (const std::size_t k : mine) seconds.push_back(sec[items[k]]);
          slowest = std::max(slowest, list_schedule(seconds, workers));
        }
        predicted[v] += slowest;
      }
    }
    std::printf("%6d %10.3f", ranks, ideal);
    for (const double p : predicted) std::printf("   %13.3f %8.3f", p, p / ideal);
    std::printf(" %10.3f %9.3f\n", floor, floor / ideal);
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_split: %s\n", e.what());
  return 1;
}
