// The DP inner loop: search_config on one fixed configuration, reporting
// DP transitions per second on one core (counter "transitions/s", a rate
// over the benchmark's CPU time; a transition is one (state, type, layers)
// move, which merges a whole Pareto front, so the rate falls as fronts grow).
//
// Cases: Mixtral-L on paper:32-1 and Mixtral-S on H800:512,MI300X:512, each
// on two configurations picked from a default run_search:
//   best    - the configuration of the best plan;
//   busiest - the one the search spent the most transitions on (first in
//             canonical order on ties), a non-trivial DP even where the
//             best plan's is tiny (Mixtral-L/32-1: PP 2).
// and three option sets:
//   plain   - prune none, bound off: the plain DP baseline;
//   mem     - the memory pruning only (exact), bound off;
//   pruned  - the default options (three prunings, bound on, no incumbent).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "engine/driver.h"
#include "engine/search.h"
#include "io/inputs/cluster_io.h"
#include "io/inputs/model_io.h"

namespace {

// A workload, cluster, tables and cost model kept alive for the benchmarks,
// and the configuration measured.
struct Case {
  hapmoe::Workload workload;
  hapmoe::ClusterSpec cluster;
  hapmoe::ProfileTables tables;
  std::unique_ptr<hapmoe::CostModel> model;
  hapmoe::ParallelConfig best;
  hapmoe::ParallelConfig busiest;
};

const Case& get_case(const std::string& model, const std::string& cluster) {
  static std::map<std::pair<std::string, std::string>, std::unique_ptr<Case>> cache;
  auto& slot = cache[{model, cluster}];
  if (!slot) {
    auto c = std::make_unique<Case>();
    c->workload = hapmoe::load_workload(model);
    c->cluster = hapmoe::load_cluster(cluster);
    const hapmoe::SearchResult r = hapmoe::run_search(c->workload, c->cluster, {});
    if (r.top.empty()) throw std::runtime_error("no plan fits: " + model + " " + cluster);
    c->best = r.top.front().plan.parallel;
    std::int64_t most = -1;
    for (std::size_t k = 0; k < r.configs.size(); ++k) {
      const hapmoe::ConfigOutcome* o = r.outcome(k);
      if (o && o->stats.transitions > most) {
        most = o->stats.transitions;
        c->busiest = r.configs[k];
      }
    }
    c->tables = hapmoe::tables_for(c->workload, c->cluster, {c->best, c->busiest});
    c->model = std::make_unique<hapmoe::CostModel>(c->workload, c->cluster, c->tables);
    slot = std::move(c);
  }
  return *slot;
}

enum class Pick { kBest, kBusiest };
enum class Mode { kPlain, kMem, kPruned };

void dp(benchmark::State& state, const char* model, const char* cluster, Pick pick, Mode mode) {
  const Case& c = get_case(model, cluster);
  const hapmoe::ParallelConfig& pi = pick == Pick::kBest ? c.best : c.busiest;
  hapmoe::SearchOptions opt;
  if (mode != Mode::kPruned) {
    opt.prune = hapmoe::PruneSet{false, mode == Mode::kMem, false};
    opt.bound = false;
  }
  std::int64_t transitions = 0;
  std::int64_t states = 0;
  for (auto _ : state) {
    hapmoe::ConfigOutcome o = hapmoe::search_config(*c.model, pi, opt);
    benchmark::DoNotOptimize(o);
    transitions += o.stats.transitions;
    states += o.stats.states;
  }
  const double iters = static_cast<double>(state.iterations());
  state.counters["transitions/s"] =
      benchmark::Counter(static_cast<double>(transitions), benchmark::Counter::kIsRate);
  state.counters["transitions"] = static_cast<double>(transitions) / iters;
  state.counters["states"] = static_cast<double>(states) / iters;
  char label[96];
  std::snprintf(label, sizeof label, "PP%d TP%d CP%d EP%d TPE%d DP%d", pi.pp, pi.tp, pi.cp, pi.ep,
                pi.tpe, pi.dp);
  state.SetLabel(label);
}

BENCHMARK_CAPTURE(dp, MixtralL_32_1_best_plain, "mixtral-l", "paper:32-1", Pick::kBest,
                  Mode::kPlain)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(dp, MixtralL_32_1_best_mem, "mixtral-l", "paper:32-1", Pick::kBest, Mode::kMem)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(dp, MixtralL_32_1_best_pruned, "mixtral-l", "paper:32-1", Pick::kBest,
                  Mode::kPruned)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(dp, MixtralL_32_1_busiest_plain, "mixtral-l", "paper:32-1", Pick::kBusiest,
                  Mode::kPlain)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(dp, MixtralL_32_1_busiest_mem, "mixtral-l", "paper:32-1", Pick::kBusiest,
                  Mode::kMem)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(dp, MixtralL_32_1_busiest_pruned, "mixtral-l", "paper:32-1", Pick::kBusiest,
                  Mode::kPruned)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(dp, MixtralS_1024_best_plain, "mixtral-s", "H800:512,MI300X:512", Pick::kBest,
                  Mode::kPlain)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(dp, MixtralS_1024_best_mem, "mixtral-s", "H800:512,MI300X:512", Pick::kBest,
                  Mode::kMem)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(dp, MixtralS_1024_best_pruned, "mixtral-s", "H800:512,MI300X:512", Pick::kBest,
                  Mode::kPruned)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(dp, MixtralS_1024_busiest_plain, "mixtral-s", "H800:512,MI300X:512",
                  Pick::kBusiest, Mode::kPlain)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(dp, MixtralS_1024_busiest_mem, "mixtral-s", "H800:512,MI300X:512", Pick::kBusiest,
                  Mode::kMem)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(dp, MixtralS_1024_busiest_pruned, "mixtral-s", "H800:512,MI300X:512",
                  Pick::kBusiest, Mode::kPruned)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
