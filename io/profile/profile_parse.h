// Readers of measurement files for `hapmoe profile` (docs/profile.md):
// nccl-tests / rccl-tests logs, layer-timing CSV, router-statistics CSV and
// measured-runs CSV. Pure functions of the text, so fuzz targets can call
// them directly: no I/O, and any bad input throws InputError naming
// `origin` (a file name), the line and the value -- never a crash.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "costmodel/measured.h"

namespace hapmoe {

// One row of an nccl-tests result table.
struct NcclRow {
  double bytes = 0;      // the "size" column, bytes
  double seconds = 0;    // out-of-place (or in-place) time, seconds
  double busbw_gbs = 0;  // bus bandwidth of that column, GB/s
  int line = 0;          // 1-based line in the log
};

struct NcclLog {
  std::string test;  // "all_reduce_perf" etc. when the log names it, else ""
  int ranks = 0;     // "Rank N ... device" lines counted (0: none printed)
  std::vector<NcclRow> rows;
};

// Parses the `size count type redop root time algbw busbw #wrong time
// algbw busbw #wrong` table of all_reduce_perf, all_gather_perf,
// reduce_scatter_perf, alltoall_perf and sendrecv_perf (also the older
// layout without `root` and with `error`). Comment (#) lines and NCCL
// debug lines are skipped; `in_place` picks the second time column.
// Throws InputError("origin:LINE", ...) on a malformed row, a
// non-positive size or time, and when there is no table at all.
NcclLog parse_nccl_tests_log(std::string_view text, const std::string& origin,
                             bool in_place = false);

// The primitive an nccl-tests binary measures ("all_reduce_perf" ->
// kAllReduce, ...); throws InputError naming `where` otherwise.
Primitive nccl_test_primitive(const std::string& name, const std::string& where);

// Layer timings: a header line, then one row per measured layer. Columns
// (any order, case-insensitive): device, tp, cp, micro_batch, forward_ms,
// backward_ms; optional layer (dense|moe, default dense), ep, tpe,
// ffn_forward_ms (or ffn_ms), ffn_backward_ms, router_ms,
// peak_memory_gib. Unknown columns are errors (a typo would be lost).
std::vector<LayerSample> parse_layer_csv(std::string_view text, const std::string& origin);

// Router statistics: columns iteration, layer, expert, tokens; one row per
// expert. Grouped into one RouterSample per (iteration, layer).
std::vector<RouterSample> parse_router_csv(std::string_view text, const std::string& origin);

// Measured runs for `profile check`: columns name, model, cluster, plan,
// latency_ms; optional peak_memory_gib, global_batch, seq_len. model,
// cluster and plan are as on the command line (a file path is relative to
// the CSV's folder; the caller resolves it).
struct MeasuredRun {
  std::string name;
  std::string model;
  std::string cluster;
  std::string plan;
  double latency_s = 0;
  double peak_bytes = kUnset;
  int global_batch = 0;  // 0: the model's
  int seq_len = 0;       // 0: the model's
  int line = 0;
};
std::vector<MeasuredRun> parse_runs_csv(std::string_view text, const std::string& origin);

}  // namespace hapmoe
