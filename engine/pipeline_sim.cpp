#include "engine/pipeline_sim.h"

#include <algorithm>
#include <cstddef>

#include "costmodel/errors.h"

namespace hapmoe {

PipelineTrace simulate_1f1b(const std::vector<double>& forward, const std::vector<double>& backward,
                            int microbatches) {
  HAPMOE_REQUIRE(!forward.empty() && forward.size() == backward.size() && microbatches >= 1,
                 "simulate_1f1b: need equal, non-empty stage vectors and M >= 1");
  const int pp = static_cast<int>(forward.size());
  const int m = microbatches;
  // The op sequence of every stage.
  std::vector<std::vector<PipelineOp>> order(static_cast<std::size_t>(pp));
  for (int i = 0; i < pp; ++i) {
    auto& ops = order[static_cast<std::size_t>(i)];
    const int warmup = std::min(pp - 1 - i, m);
    int next_f = 0;
    int next_b = 0;
    for (int k = 0; k < warmup; ++k) ops.push_back({i, next_f++, true, 0, 0});
    while (next_f < m) {
      ops.push_back({i, next_f++, true, 0, 0});
      ops.push_back({i, next_b++, false, 0, 0});
    }
    while (next_b < m) ops.push_back({i, next_b++, false, 0, 0});
  }
  // Completion times, -1 until known.
  const auto idx = [m](int stage, int mb) { return static_cast<std::size_t>(stage * m + mb); };
  std::vector<double> f_end(static_cast<std::size_t>(pp * m), -1.0);
  std::vector<double> b_end(static_cast<std::size_t>(pp * m), -1.0);
  std::vector<std::size_t> cursor(static_cast<std::size_t>(pp), 0);
  std::vector<double> free_at(static_cast<std::size_t>(pp), 0.0);
  std::size_t remaining = static_cast<std::size_t>(2 * pp * m);
  while (remaining > 0) {
    bool progressed = false;
    for (int i = 0; i < pp; ++i) {
      const auto si = static_cast<std::size_t>(i);
      while (cursor[si] < order[si].size()) {
        PipelineOp& op = order[si][cursor[si]];
        double ready = 0.0;
        if (op.forward) {
          if (i > 0) ready = f_end[idx(i - 1, op.microbatch)];
        } else {
          ready = i + 1 < pp ? b_end[idx(i + 1, op.microbatch)] : f_end[idx(i, op.microbatch)];
        }
        if (ready < 0.0) break;  // input not produced yet
        op.start = std::max(ready, free_at[si]);
        op.end = op.start + (op.forward ? forward[si] : backward[si]);
        free_at[si] = op.end;
        (op.forward ? f_end : b_end)[idx(i, op.microbatch)] = op.end;
        ++cursor[si];
        --remaining;
        progressed = true;
      }
    }
    HAPMOE_REQUIRE(progressed, "simulate_1f1b: schedule deadlocked (internal error)");
  }
  PipelineTrace trace;
  for (const auto& ops : order) {
    for (const PipelineOp& op : ops) {
      trace.makespan = std::max(trace.makespan, op.end);
      trace.ops.push_back(op);
    }
  }
  return trace;
}

}  // namespace hapmoe
