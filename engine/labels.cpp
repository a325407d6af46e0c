// Labels of HS-DP (labels.h), the part that runs per complete plan rather
// than per transition: offering a complete label to its configuration's
// best, rebuilt into a plan through the stage memo (the recomputation of
// each stage) and compared by the canonical plan order. Shared by the DP
// (hsdp.cpp) and brute force (bruteforce.cpp). Relies on stage_memo.h and
// plan_order.cpp (candidate_less).
#include "engine/labels.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace hapmoe::hsdp {

namespace {

// Rebuilds the plan of a complete label.
Plan rebuild(const std::vector<Step>& trail, std::int32_t index, Evaluator& ev) {
  Plan plan;
  plan.parallel = ev.pi();
  std::vector<std::int32_t> chain;
  for (std::int32_t k = index; k >= 0; k = trail[static_cast<std::size_t>(k)].parent) {
    if (trail[static_cast<std::size_t>(k)].layers > 0) chain.push_back(k);
  }
  std::reverse(chain.begin(), chain.end());
  int j = 0;
  for (std::size_t i = 0; i < chain.size(); ++i) {
    const Step& l = trail[static_cast<std::size_t>(chain[i])];
    const StageEval& e = ev.stage(l.type, static_cast<int>(i), j, l.layers);
    plan.stages.push_back({l.type, l.layers, e.recompute});
    j += l.layers;
  }
  return plan;
}

}  // namespace

void offer(ConfigOutcome& out, const Label& l, const std::vector<Step>& trail, std::int32_t index,
           Evaluator& ev) {
  if (!l.feasible) return;
  ++out.stats.feasible;
  PlanCandidate c{latency(l, ev.microbatches(), ev.pi().vpp), {}};
  if (out.best && c.latency_s > out.best->latency_s) return;
  c.plan = rebuild(trail, index, ev);
  if (!out.best || candidate_less(c, *out.best)) out.best = std::move(c);
}

}  // namespace hapmoe::hsdp
