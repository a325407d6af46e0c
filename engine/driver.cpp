#include "engine/driver.h"

#include <algorithm>
#include <chrono>
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
  r.outcomes.reserve(r.configs.size());
  for (const ParallelConfig& pi : r.configs) {
    r.outcomes.push_back(bruteforce ? bruteforce_config(model, pi, opt)
                                    : search_config(model, pi, opt));
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
  r.stats.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace hapmoe
