// An explicit event simulation of the 1F1B (PipeDream-flush) schedule, the
// reference the closed-form latency of the cost model is tested against and
// a cross-check users can ask for (`hapmoe evaluate --simulate`).
#pragma once

#include <vector>

namespace hapmoe {

struct PipelineOp {
  int stage = 0;
  int microbatch = 0;
  bool forward = true;
  double start = 0;
  double end = 0;
};

struct PipelineTrace {
  double makespan = 0;          // end of the last backward
  std::vector<PipelineOp> ops;  // in the order each stage runs them
};

// Stage i runs min(PP - 1 - i, M) warm-up forwards, then alternates one
// forward and one backward, then drains the remaining backwards (Megatron's
// non-interleaved schedule). An op starts when its stage is free and its
// input is ready: F(i, m) after F(i-1, m); B(i, m) after B(i+1, m) (the last
// stage after its own F). Transfer times are part of the stage times.
PipelineTrace simulate_1f1b(const std::vector<double>& forward, const std::vector<double>& backward,
                            int microbatches);

}  // namespace hapmoe
