// What the job-wide knobs' exact search (`plan --space all`, docs/search.md)
// costs on the paper's 24 cases, against what it would cost if the best
// plan were known before it starts: the floor that no order of the
// variants, seed or shared work list can go below with today's bounds.
// Each case, one thread, in this process (no process start-up), each
// figure the median of --repeat runs:
//   K=5     - run_job_search as `plan --space all` runs it (top 5, Megatron's
//             recipes' overlaps);
//   K=1     - the same with the top 1;
//   oracle  - the top 1 with the incumbent at its best latency (+1e-9) from
//             the start (RunOptions::incumbent): every variant is bounded
//             against the optimum, so what is left is what the bound cannot
//             rule out. Its best must equal K=1's.
// For K=1 and the oracle: the configurations searched (evaluated) over all
// variants, and the time of the variants that searched none (their time is
// bounding and set-up only, which even an exact bound would not remove).
//
//   bench_space_floor [--model M]... [--cluster C]... [--repeat R]

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <exception>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "bench/paper_cases.h"
#include "engine/comm.h"
#include "engine/driver.h"
#include "engine/job_space.h"
#include "engine/search.h"
#include "io/inputs/cluster_io.h"
#include "io/inputs/model_io.h"

namespace {

using hapmoe::JobSearchResult;
using hapmoe::JobSpace;
using hapmoe::RunOptions;
using hapmoe::SearchOptions;

struct Measure {
  double ms = 0;
  double best = 0;
  long long evaluated = 0;    // configurations searched, over every variant
  double bounds_only_ms = 0;  // the variants that searched no configuration
};

Measure measure(const hapmoe::Workload& w, const hapmoe::ClusterSpec& c, const JobSpace& space,
                int top_k, double incumbent) {
  SearchOptions opt;
  opt.top_k = top_k;
  RunOptions run;
  run.incumbent = incumbent;
  hapmoe::SerialComm comm;
  const auto start = std::chrono::steady_clock::now();
  const JobSearchResult j = hapmoe::run_job_search(w, c, opt, space, comm, run);
  Measure m;
  m.ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  m.best = j.best_s;
  for (const hapmoe::VariantOutcome& v : j.variants) {
    m.evaluated += v.stats.configs_evaluated;
    if (v.stats.configs_evaluated == 0) m.bounds_only_ms += v.stats.seconds * 1e3;
  }
  return m;
}

Measure median_of(int repeat, const auto& run) {
  std::vector<Measure> runs;
  runs.reserve(static_cast<std::size_t>(repeat));
  for (int k = 0; k < repeat; ++k) runs.push_back(run());
  std::sort(runs.begin(), runs.end(),
            [](const Measure& a, const Measure& b) { return a.ms < b.ms; });
  return runs[runs.size() / 2];
}

int usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s [--model M]... [--cluster C]... [--repeat R]\n", argv0);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> models;
  std::vector<std::string> clusters;
  int repeat = 3;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    const bool has_value = a + 1 < argc;
    if (arg == "--model" && has_value) {
      models.emplace_back(argv[++a]);
    } else if (arg == "--cluster" && has_value) {
      clusters.emplace_back(argv[++a]);
    } else if (arg == "--repeat" && has_value) {
      repeat = std::max(1, std::stoi(argv[++a]));
    } else {
      return usage(argv[0]);
    }
  }
  if (models.empty()) models = hapmoe::bench::paper_models();
  if (clusters.empty()) clusters = hapmoe::bench::paper_clusters();
  JobSpace space = hapmoe::parse_job_space("all", "bench_space_floor");
  space.overlaps = hapmoe::JobOverlaps::kRecipe;  // as `plan --space all`
  const double inf = std::numeric_limits<double>::infinity();

  std::printf("# one thread, in process; medians of %d runs; --space all, recipe overlaps\n",
              repeat);
  std::printf("%-10s %-13s %8s | %8s %9s %8s | %8s %9s %8s | %10s\n", "model", "cluster", "K5_ms",
              "K1_ms", "evaluated", "bnd_ms", "orc_ms", "evaluated", "bnd_ms", "best_s");
  Measure sum5;
  Measure sum1;
  Measure sumo;
  try {
    for (const std::string& mname : models) {
      const hapmoe::Workload w = hapmoe::load_workload(mname);
      for (const std::string& cname : clusters) {
        const hapmoe::ClusterSpec c = hapmoe::load_cluster(cname);
        const Measure k5 = median_of(repeat, [&] { return measure(w, c, space, 5, inf); });
        const Measure k1 = median_of(repeat, [&] { return measure(w, c, space, 1, inf); });
        const double oracle = std::isfinite(k1.best) ? k1.best * (1 + 1e-9) : inf;
        const Measure o = median_of(repeat, [&] { return measure(w, c, space, 1, oracle); });
        if (o.best != k1.best) {
          std::fprintf(stderr, "error: %s %s: the oracle's best %.9g is not the search's %.9g\n",
                       mname.c_str(), cname.c_str(), o.best, k1.best);
          return 1;
        }
        for (auto [s, m] : {std::pair{&sum5, &k5}, std::pair{&sum1, &k1}, std::pair{&sumo, &o}}) {
          s->ms += m->ms;
          s->evaluated += m->evaluated;
          s->bounds_only_ms += m->bounds_only_ms;
        }
        std::printf("%-10s %-13s %8.1f | %8.1f %9lld %8.1f | %8.1f %9lld %8.1f | %10.3f\n",
                    mname.c_str(), cname.c_str(), k5.ms, k1.ms, k1.evaluated, k1.bounds_only_ms,
                    o.ms, o.evaluated, o.bounds_only_ms, k1.best);
        std::fflush(stdout);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  std::printf("%-24s %8.1f | %8.1f %9lld %8.1f | %8.1f %9lld %8.1f |\n", "total", sum5.ms, sum1.ms,
              sum1.evaluated, sum1.bounds_only_ms, sumo.ms, sumo.evaluated, sumo.bounds_only_ms);
  std::printf(
      "the optimum known from the start saves %.1f %% of K=1's time; %.1f %% of the "
      "configurations searched remain\n",
      100.0 * (1.0 - sumo.ms / sum1.ms),
      100.0 * static_cast<double>(sumo.evaluated) / static_cast<double>(sum1.evaluated));
  return 0;
}
