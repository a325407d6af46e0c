#include "engine/driver.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <set>
#include <sstream>

#include "costmodel/analytic.h"
#include "costmodel/errors.h"

namespace hapmoe {

ProfileTables tables_for(const Workload& w, const ClusterSpec& cluster,
                         const std::vector<ParallelConfig>& configs) {
  std::set<int> tps;
  std::set<int> cps;
  for (const ParallelConfig& pi : configs) {
    tps.insert(pi.tp);
    cps.insert(pi.cp);
  }
  return make_analytic_tables(w, cluster, w.training.micro_batch, {tps.begin(), tps.end()},
                              {cps.begin(), cps.end()});
}

SearchResult run_search(const Workload& w, const ClusterSpec& cluster, const SearchOptions& opt,
                        bool bruteforce) {
  const auto start = std::chrono::steady_clock::now();
  SearchResult r;
  r.configs = enumerate_configs(w, cluster, opt.space);
  const ProfileTables tables = tables_for(w, cluster, r.configs);
  const CostModel model(w, cluster, tables);
  if (bruteforce) {
    double total = 0.0;
    for (const ParallelConfig& pi : r.configs) total += bruteforce_size(model, pi, opt);
    if (total > kBruteForceLimit) {
      std::ostringstream msg;
      msg << "the space has about " << total << " plans over " << r.configs.size()
          << " configurations; brute force is limited to " << kBruteForceLimit
          << " plans (use the DP, or a smaller model/cluster)";
      throw InputError("--bruteforce", msg.str());
    }
  }
  r.outcomes.assign(r.configs.size(), {});
  if (bruteforce) {
    for (std::size_t c = 0; c < r.configs.size(); ++c) {
      r.outcomes[c] = bruteforce_config(model, r.configs[c], opt);
    }
  } else {
    // Branch and bound over Pi: configurations in increasing lower bound
    // (then canonical order); one whose bound exceeds the K-th best
    // latency found so far cannot enter the top K and is skipped.
    // The order uses the bound without the tail term: it finds good
    // incumbents sooner (measured in bench/README.md).
    std::vector<ConfigBound> bounds(r.configs.size());
    std::vector<std::size_t> order(r.configs.size());
    for (std::size_t c = 0; c < r.configs.size(); ++c) {
      if (opt.bound) bounds[c] = config_lower_bound(model, r.configs[c], opt);
      order[c] = c;
    }
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return bounds[a].steps < bounds[b].steps;
    });
    std::vector<PlanCandidate> top;  // the K best so far, sorted
    const auto kth = [&] {
      return static_cast<int>(top.size()) < opt.top_k ? std::numeric_limits<double>::infinity()
                                                      : top.back().latency_s;
    };
    for (const std::size_t c : order) {
      ConfigOutcome& o = r.outcomes[c];
      o.lower_bound = bounds[c].latency;
      if (opt.bound && bounds[c].latency > kth() * (1.0 + 1e-12)) {
        o.skipped = true;
        o.stats.configs_bounded = 1;
        continue;
      }
      const double lower_bound = o.lower_bound;
      o = search_config(model, r.configs[c], opt, kth());
      o.lower_bound = lower_bound;
      if (!o.best) continue;
      top.insert(std::upper_bound(top.begin(), top.end(), *o.best, candidate_less), *o.best);
      if (static_cast<int>(top.size()) > opt.top_k) top.pop_back();
    }
  }
  std::vector<PlanCandidate> all;
  for (const ConfigOutcome& o : r.outcomes) {
    r.stats += o.stats;
    if (o.best) all.push_back(*o.best);
    if (o.closest.bytes < r.closest.bytes) r.closest = o.closest;
  }
  std::sort(all.begin(), all.end(), candidate_less);
  if (static_cast<int>(all.size()) > opt.top_k) all.resize(static_cast<std::size_t>(opt.top_k));
  r.top = std::move(all);
  r.stats.configs = static_cast<std::int64_t>(r.configs.size());
  r.stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace hapmoe
