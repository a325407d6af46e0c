// How well the work-estimate split would balance R ranks, from the work the
// search really did (issue 4): one run on one thread records, per searched
// configuration, its round, its work estimate and its measured seconds; for
// R = 1 ... 4096 every round is split by lpt_split over the estimates and
// timed with the measured seconds. Prints, per R, the predicted search time
// (sum over rounds of the most loaded rank), the ideal (sum over rounds of
// the round's work / R, i.e. perfect balance) and their ratio (the
// imbalance, max/mean), and the correlation of estimate and measured work.
//
//   bench_split [MODEL] [CLUSTER] [GLOBAL_BATCH]   (default: the large case,
//   deepseek-v3 on H800:4096,MI300X:4096,910B:4096, global batch 12288)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "engine/driver.h"
#include "io/cluster_io.h"
#include "io/model_io.h"
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

}  // namespace

int main(int argc, char** argv) try {
  const std::string model = argc > 1 ? argv[1] : "deepseek-v3";
  const std::string cluster = argc > 2 ? argv[2] : "H800:4096,MI300X:4096,910B:4096";
  hapmoe::Workload w = hapmoe::load_workload(model);
  w.training.global_batch = argc > 3 ? std::atoi(argv[3]) : 12288;
  const hapmoe::ClusterSpec cl = hapmoe::load_cluster(cluster);
  hapmoe::SerialComm comm;
  const hapmoe::SearchResult r = hapmoe::run_search(w, cl, {}, false, comm, hapmoe::RunOptions{});
  std::map<int, std::vector<std::size_t>> rounds;
  std::vector<double> est;
  std::vector<double> sec;
  for (std::size_t c = 0; c < r.configs.size(); ++c) {
    if (r.round_of[c] < 0) continue;
    rounds[r.round_of[c]].push_back(c);
    est.push_back(r.estimates[c]);
    sec.push_back(r.outcomes[c].stats.seconds);
  }
  std::printf("%s on %s, global batch %d: %zu configurations searched in %zu rounds, %.2f s\n",
              model.c_str(), cluster.c_str(), w.training.global_batch, est.size(), rounds.size(),
              r.stats.seconds);
  std::printf("estimate vs measured seconds: Pearson %.3f, Spearman %.3f\n\n", pearson(est, sec),
              pearson(ranks_of(est), ranks_of(sec)));
  std::printf("%6s %12s %12s %10s %12s\n", "ranks", "predicted_s", "ideal_s", "max/mean",
              "speed-up");
  const double serial = std::accumulate(sec.begin(), sec.end(), 0.0);
  for (int ranks = 1; ranks <= 4096; ranks *= 2) {
    double predicted = 0.0;
    double ideal = 0.0;
    for (const auto& [round, items] : rounds) {
      std::vector<double> work;
      for (const std::size_t c : items) work.push_back(r.estimates[c]);
      const hapmoe::Shard s = hapmoe::lpt_split(work, ranks);
      std::vector<double> load(static_cast<std::size_t>(ranks), 0.0);
      double total = 0.0;
      for (std::size_t k = 0; k < items.size(); ++k) {
        load[static_cast<std::size_t>(s.owner[k])] += r.outcomes[items[k]].stats.seconds;
        total += r.outcomes[items[k]].stats.seconds;
      }
      predicted += *std::max_element(load.begin(), load.end());
      ideal += total / ranks;
    }
    std::printf("%6d %12.3f %12.3f %10.3f %12.2f\n", ranks, predicted, ideal, predicted / ideal,
                serial / predicted);
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_split: %s\n", e.what());
  return 1;
}
