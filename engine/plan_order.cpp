// The canonical order of plans (engine/search.h): latency, then the
// parallel configuration (pp, tp, cp, ep, tpe, dp, micro-batch), then the
// stages in order (type, layers, recomputation). Every tie in the search
// is broken by it -- a configuration's best among equal latencies
// (labels.cpp, offer), the parts of a configuration (hsdp.cpp,
// merge_part), the top K of the driver and of the baselines -- so a plan
// does not depend on the order of the work or on the number of workers.
// Relies on costmodel/plan.h only.
#include <algorithm>
#include <cstddef>
#include <tuple>

#include "engine/search.h"

namespace hapmoe {

namespace {

auto recompute_key(const Recompute& r) {
  return std::make_tuple(static_cast<int>(r.kind), r.layers);
}

}  // namespace

bool plan_key_less(const Plan& a, const Plan& b) {
  const ParallelConfig& x = a.parallel;
  const ParallelConfig& y = b.parallel;
  const auto kx = std::tie(x.pp, x.tp, x.cp, x.ep, x.tpe, x.dp, x.micro_batch);
  const auto ky = std::tie(y.pp, y.tp, y.cp, y.ep, y.tpe, y.dp, y.micro_batch);
  if (kx != ky) return kx < ky;
  const std::size_t n = std::min(a.stages.size(), b.stages.size());
  for (std::size_t i = 0; i < n; ++i) {
    const StagePlan& s = a.stages[i];
    const StagePlan& t = b.stages[i];
    const auto ks = std::make_tuple(s.device_type, s.layers, recompute_key(s.recompute));
    const auto kt = std::make_tuple(t.device_type, t.layers, recompute_key(t.recompute));
    if (ks != kt) return ks < kt;
  }
  return a.stages.size() < b.stages.size();
}

bool candidate_less(const PlanCandidate& a, const PlanCandidate& b) {
  if (a.latency_s != b.latency_s) return a.latency_s < b.latency_s;
  return plan_key_less(a.plan, b.plan);
}

}  // namespace hapmoe
