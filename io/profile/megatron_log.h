// Megatron-LM's own training log as a measurement (docs/profile.md,
// "Megatron training logs"): what core_v0.15.0 prints without patching,
// read from the text as a job wrote it (launcher prefixes such as
// "[rank7]: ", srun --label's "3: " and Open MPI's "[1,0]<stdout>:" are
// stripped; any other line is skipped):
//   - training.py training_log: " [date] iteration N/ M | ... | elapsed
//     time per iteration (ms): T | throughput per GPU (TFLOP/s/GPU): F |
//     ... | global batch size: B | lm loss: ... |", one line per
//     --log-interval, T the mean over that interval;
//   - core/timers.py (--timing-log-level 1 or 2): "(min, max) time across
//     ranks (ms):" or "max time across ranks (ms):", then one
//     "    name .....: (min, max)" or "    name .....: max" line per timer;
//   - training/utils.py report_memory: "[Rank R] (after N iterations)
//     memory (MB) | allocated: A | max allocated: M | reserved: ... | max
//     reserved: ...";
//   - theoretical_memory_usage.py: "Theoretical memory footprints: weight
//     and optimizer=W MB, activation=A MB, total=T MB".
// Pure functions of the text: no I/O; bad input throws InputError naming
// the origin, the line and the value.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "costmodel/cost.h"

namespace hapmoe {

struct MegatronLogInterval {
  int iteration = 0;    // the last iteration of the interval
  int train_iters = 0;  // --train-iters
  double ms_per_iteration = 0;
  std::optional<double> tflops_per_gpu;
  std::optional<int> global_batch;
  // Every other "name: number" field of the line (lm loss,
  // load_balancing_loss, grad norm, ...), by name.
  std::map<std::string, double> values;
  // The timers printed after this line (--timing-log-level), ms.
  struct Timer {
    std::string name;
    double min_ms = 0;  // = max_ms when only the max was printed
    double max_ms = 0;
  };
  std::vector<Timer> timers;
  int line = 0;
};

struct MegatronLogMemory {
  int rank = 0;
  double allocated_mb = 0;
  double max_allocated_mb = 0;
  double reserved_mb = 0;
  double max_reserved_mb = 0;
  int line = 0;
};

struct MegatronLog {
  std::vector<MegatronLogInterval> intervals;  // in the log's order
  std::vector<MegatronLogMemory> memory;       // one per rank that reported
  std::optional<double> theoretical_total_mb;  // Megatron's own estimate
  int lines = 0;

  // The measured iteration time: the median over the logged intervals
  // but the first (it holds the warm-up), or the only one; seconds.
  double seconds_per_iteration() const;
  // The highest "max allocated" over the ranks' reports, bytes (0: none).
  double peak_allocated_bytes() const;
  // Each timer's median, over the intervals seconds_per_iteration uses, of
  // its max over ranks, in seconds, in the order the log first prints them.
  std::vector<std::pair<std::string, double>> timer_medians() const;
};

// Throws InputError("origin:LINE", ...) on an iteration line whose
// numbers do not read, and InputError(origin, ...) when the text holds no
// iteration line at all.
MegatronLog parse_megatron_log(std::string_view text, const std::string& origin);

// The cost model's term for a Megatron-LM timer of --timing-log-level,
// per iteration, for the plan `rep` prices (core_v0.15.0: schedules.py
// times the whole pipeline schedule with finalize_model_grads inside it;
// training.py times optimizer.step with the distributed optimizer's
// params-all-gather inside it):
//   forward-backward    edge + middle + the gradient sync left exposed
//   all-grads-sync      the gradient sync left exposed
//   optimizer           the optimizer step + the parameter all-gather
//   params-all-gather   the parameter all-gather left exposed
//   forward-compute     M x the busiest stage's forward, p2p left out
//   backward-compute    M x the busiest stage's backward (with recompute)
// nullopt for any other timer (the model has no term for it).
std::optional<double> megatron_timer_term(const std::string& name, const PlanReport& rep);

}  // namespace hapmoe
