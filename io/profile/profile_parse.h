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

// A line without the prefixes launchers put before every line of a
// process's output, and the rank they named (-1: none): Open MPI's
// --tag-output "[1,0]<stdout>:" (or <stderr>), MPICH / Hydra's
// -prepend-rank "[0] ", torchrun's "[rank7]:" / "[default7]:" and srun
// --label's "0: " (a few times, for a launcher inside another).
struct Unprefixed {
  std::string_view text;
  long long rank = -1;
};
Unprefixed strip_launcher(std::string_view line);

// One row of an nccl-tests result table.
struct NcclRow {
  double bytes = 0;      // the "size" column, bytes
  double seconds = 0;    // out-of-place (or in-place) time, seconds
  double busbw_gbs = 0;  // bus bandwidth of that column, GB/s
  int line = 0;          // 1-based line in the log
};

// One result table of a log: one run of an nccl-tests / rccl-tests binary,
// with what the log says about that run.
struct NcclLog {
  std::string test;  // "all_reduce_perf" etc. when the log names it for this run, else ""
  int ranks = 0;     // ranks of the "# Rank N ... device" lines of this run, in the
                     // group of the first one (nccl-tests' split mask); 0: none printed
  int nodes = 0;     // distinct hosts on those lines (0: none printed)
  std::vector<std::string> devices;  // device names printed on those lines, distinct, in
                                     // rank order ("NVIDIA H100 80GB HBM3")
  bool in_place = false;             // the times are the in-place column: asked for, or
                                     // the table has no out-of-place one (rccl-tests -O 0)
  int header_line = 0;               // 1-based line of the `# size count ...` header
  std::vector<NcclRow> rows;
};

// Reads every result table of an nccl-tests or rccl-tests log, one NcclLog
// per table in the order of the log (two binaries, or one binary run
// twice, in one job's output are two tables, never merged). Tables are
// found by their `# size count type ...` header; the columns (`time` or
// `cputime`, `busbw`, with or without `redop`/`root`, `#wrong` or `error`,
// extra columns such as `copybw` or the per-iteration ones) are read from
// that header, the out-of-place `time` unless `in_place` (a table with only
// in-place columns is read as such). Everything else before, between and
// inside the tables is skipped: banners and comment lines, `rccl-tests:
// Version`, `NCCL version`, NCCL/RCCL INFO and WARN lines, MPI, ssh, UCX
// and Slurm messages, blank lines. Launcher prefixes are removed from every
// line first: Open MPI's --tag-output `[1,0]<stdout>:`, MPICH/Hydra's
// -prepend-rank `[0] ` and srun --label's `0: `.
// Inside a table, a line whose first field is a number is a row: a row
// with too few columns, a non-positive size or time throws
// InputError("origin:LINE", ...), as do tables printed by two different
// MPI ranks (nccl-tests built without MPI under mpirun) and a log without
// any table row.
std::vector<NcclLog> parse_nccl_tests_logs(std::string_view text, const std::string& origin,
                                           bool in_place = false);

// The primitive an nccl-tests binary measures ("all_reduce_perf" ->
// kAllReduce, ...); throws InputError naming `where` otherwise.
Primitive nccl_test_primitive(const std::string& name, const std::string& where);

// True for the nccl-tests / rccl-tests binaries whose collective the cost
// model never uses (broadcast_perf, reduce_perf, gather_perf, scatter_perf,
// alltoallv_perf, hypercube_perf): `profile import` skips their tables.
bool nccl_test_unused(const std::string& name);

// The catalog name (costmodel/catalog.cpp) of a device as nccl-tests prints
// it on its "# Rank" lines ("NVIDIA H100 80GB HBM3" -> "H100", "AMD
// Instinct MI300X" -> "MI300X", "NVIDIA A100-SXM4-80GB" -> "A100-80GB"), or
// "" when it names no catalog device or is ambiguous (an A100 without its
// memory size, "NVIDIA H20").
std::string catalog_device_name(std::string_view printed);

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
  // peak_bytes is PyTorch's max allocated (a Megatron log's memory report):
  // it holds no runtime reserve (context, NCCL buffers, fragmentation).
  bool peak_is_allocated = false;
  int global_batch = 0;  // 0: the model's
  int seq_len = 0;       // 0: the model's
  int line = 0;
};
std::vector<MeasuredRun> parse_runs_csv(std::string_view text, const std::string& origin);

}  // namespace hapmoe
