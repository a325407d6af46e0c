// The records of the archive's compound tables (docs/archive.md), each
// with the compound type that names its fields: the struct is the schema.
// Strings are `const char*` (variable-length UTF-8); when writing they
// point into strings the writer keeps alive, when reading HDF5 allocates
// them and Group::read_table frees them after the callback.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "io/archive/h5.h"

namespace hapmoe::archive {

// plans/plans: one row per plan of the top K, best first.
struct PlanRow {
  std::int32_t rank = 0;  // 0 = best
  double latency_s = 0;   // predicted iteration latency T_iter
  double throughput_tokens_per_s = 0;
  double tflops_per_device = 0;  // model TFLOP/s per device in use
  double mfu = 0;                // model FLOPs utilisation, 0..1
  std::uint8_t fits = 0;         // every stage within its memory
  std::int32_t pp = 0, tp = 0, cp = 0, ep = 0, tpe = 0, dp = 0;
  std::int32_t micro_batch = 0;       // samples per micro-batch
  std::int32_t num_microbatches = 0;  // M
  // Virtual pipeline stages per rank (interleaved 1F1B). 1 when read from
  // an archive written before the field (HDF5 leaves a member the file
  // lacks as initialised here).
  std::int32_t vpp = 1;
  std::int32_t devices = 0;  // devices in use
  std::int32_t bottleneck_stage = 0;
  double edge_s = 0;             // breakdown: sum of stage fwd+bwd
  double middle_s = 0;           // (M-1) x bottleneck stage
  double dp_sync_s = 0;          // gradient synchronisation
  double optimizer_s = 0;        // optimizer step
  std::int64_t first_stage = 0;  // its rows in plans/stages: [first_stage, first_stage+num_stages)
  std::int32_t num_stages = 0;
};

inline h5::Compound<PlanRow> plan_row_type() {
  h5::Compound<PlanRow> c;
  HAPMOE_H5_FIELD(c, PlanRow, rank);
  HAPMOE_H5_FIELD(c, PlanRow, latency_s);
  HAPMOE_H5_FIELD(c, PlanRow, throughput_tokens_per_s);
  HAPMOE_H5_FIELD(c, PlanRow, tflops_per_device);
  HAPMOE_H5_FIELD(c, PlanRow, mfu);
  HAPMOE_H5_FIELD(c, PlanRow, fits);
  HAPMOE_H5_FIELD(c, PlanRow, pp);
  HAPMOE_H5_FIELD(c, PlanRow, tp);
  HAPMOE_H5_FIELD(c, PlanRow, cp);
  HAPMOE_H5_FIELD(c, PlanRow, ep);
  HAPMOE_H5_FIELD(c, PlanRow, tpe);
  HAPMOE_H5_FIELD(c, PlanRow, dp);
  HAPMOE_H5_FIELD(c, PlanRow, micro_batch);
  HAPMOE_H5_FIELD(c, PlanRow, num_microbatches);
  HAPMOE_H5_FIELD(c, PlanRow, vpp);
  HAPMOE_H5_FIELD(c, PlanRow, devices);
  HAPMOE_H5_FIELD(c, PlanRow, bottleneck_stage);
  HAPMOE_H5_FIELD(c, PlanRow, edge_s);
  HAPMOE_H5_FIELD(c, PlanRow, middle_s);
  HAPMOE_H5_FIELD(c, PlanRow, dp_sync_s);
  HAPMOE_H5_FIELD(c, PlanRow, optimizer_s);
  HAPMOE_H5_FIELD(c, PlanRow, first_stage);
  HAPMOE_H5_FIELD(c, PlanRow, num_stages);
  return c;
}

// plans/stages: one row per stage of every plan (CSR through
// PlanRow::first_stage / num_stages and plans/stage_offsets).
struct StageRow {
  std::int32_t plan = 0;         // PlanRow::rank of its plan
  std::int32_t stage = 0;        // 0 = first pipeline stage
  const char* device = "";       // device type name
  std::int32_t device_type = 0;  // index into the cluster's pools
  std::int32_t devices = 0;      // TP x CP x DP
  std::int32_t first_layer = 0;
  std::int32_t layers = 0;
  const char* recompute = "";  // none, selective, full, full:K
  double forward_s = 0;        // per micro-batch, incl. p2p receive
  double backward_s = 0;       // per micro-batch, incl. recompute and p2p send
  double p2p_forward_s = 0;
  double p2p_backward_s = 0;
  double recompute_s = 0;
  double dp_sync_s = 0;
  double optimizer_s = 0;
  std::int32_t in_flight = 0;  // micro-batches whose activations 1F1B keeps
  double memory_bytes = 0;     // total of the six below
  double capacity_bytes = 0;
  double weights_bytes = 0;
  double gradients_bytes = 0;
  double optimizer_bytes = 0;
  double activations_bytes = 0;
  double moe_buffers_bytes = 0;
  double overhead_bytes = 0;
  std::uint8_t fits = 0;
};

inline h5::Compound<StageRow> stage_row_type() {
  h5::Compound<StageRow> c;
  HAPMOE_H5_FIELD(c, StageRow, plan);
  HAPMOE_H5_FIELD(c, StageRow, stage);
  HAPMOE_H5_FIELD(c, StageRow, device);
  HAPMOE_H5_FIELD(c, StageRow, device_type);
  HAPMOE_H5_FIELD(c, StageRow, devices);
  HAPMOE_H5_FIELD(c, StageRow, first_layer);
  HAPMOE_H5_FIELD(c, StageRow, layers);
  HAPMOE_H5_FIELD(c, StageRow, recompute);
  HAPMOE_H5_FIELD(c, StageRow, forward_s);
  HAPMOE_H5_FIELD(c, StageRow, backward_s);
  HAPMOE_H5_FIELD(c, StageRow, p2p_forward_s);
  HAPMOE_H5_FIELD(c, StageRow, p2p_backward_s);
  HAPMOE_H5_FIELD(c, StageRow, recompute_s);
  HAPMOE_H5_FIELD(c, StageRow, dp_sync_s);
  HAPMOE_H5_FIELD(c, StageRow, optimizer_s);
  HAPMOE_H5_FIELD(c, StageRow, in_flight);
  HAPMOE_H5_FIELD(c, StageRow, memory_bytes);
  HAPMOE_H5_FIELD(c, StageRow, capacity_bytes);
  HAPMOE_H5_FIELD(c, StageRow, weights_bytes);
  HAPMOE_H5_FIELD(c, StageRow, gradients_bytes);
  HAPMOE_H5_FIELD(c, StageRow, optimizer_bytes);
  HAPMOE_H5_FIELD(c, StageRow, activations_bytes);
  HAPMOE_H5_FIELD(c, StageRow, moe_buffers_bytes);
  HAPMOE_H5_FIELD(c, StageRow, overhead_bytes);
  HAPMOE_H5_FIELD(c, StageRow, fits);
  return c;
}

// search/configs: one row per configuration pi of Pi, in Pi's canonical
// order; search/totals: one row, the sums (config fields -1).
struct ConfigRow {
  std::int64_t index = 0;  // position in Pi
  std::int32_t pp = 0, tp = 0, cp = 0, ep = 0, tpe = 0, dp = 0, micro_batch = 0;
  std::int32_t rank = -1;     // MPI rank that searched it, -1 if none
  std::int32_t round = -1;    // branch-and-bound round, -1 if not searched
  std::uint8_t searched = 0;  // the DP ran on it
  std::uint8_t skipped = 0;   // skipped by branch and bound (its lower bound)
  double lower_bound_s = 0;   // lower bound on its latency
  double work_estimate = 0;   // relative work estimate (no unit)
  double best_latency_s = 0;  // its best plan's latency; NaN if none found
  std::int64_t states = 0;
  std::int64_t transitions = 0;
  std::int64_t pruned_load_balance = 0;
  std::int64_t pruned_memory = 0;
  std::int64_t pruned_hetero_comm = 0;
  std::int64_t pruned_bound = 0;
  std::int64_t feasible = 0;
  double seconds = 0;            // wall time of its search
  double hetero_comm_ratio = 0;  // largest cross-type transfer over T_comp (SearchStats)
  std::int32_t parts = 0;        // the parts it was searched in, 0 if not searched
};

inline h5::Compound<ConfigRow> config_row_type() {
  h5::Compound<ConfigRow> c;
  HAPMOE_H5_FIELD(c, ConfigRow, index);
  HAPMOE_H5_FIELD(c, ConfigRow, pp);
  HAPMOE_H5_FIELD(c, ConfigRow, tp);
  HAPMOE_H5_FIELD(c, ConfigRow, cp);
  HAPMOE_H5_FIELD(c, ConfigRow, ep);
  HAPMOE_H5_FIELD(c, ConfigRow, tpe);
  HAPMOE_H5_FIELD(c, ConfigRow, dp);
  HAPMOE_H5_FIELD(c, ConfigRow, micro_batch);
  HAPMOE_H5_FIELD(c, ConfigRow, rank);
  HAPMOE_H5_FIELD(c, ConfigRow, round);
  HAPMOE_H5_FIELD(c, ConfigRow, searched);
  HAPMOE_H5_FIELD(c, ConfigRow, skipped);
  HAPMOE_H5_FIELD(c, ConfigRow, lower_bound_s);
  HAPMOE_H5_FIELD(c, ConfigRow, work_estimate);
  HAPMOE_H5_FIELD(c, ConfigRow, best_latency_s);
  HAPMOE_H5_FIELD(c, ConfigRow, states);
  HAPMOE_H5_FIELD(c, ConfigRow, transitions);
  HAPMOE_H5_FIELD(c, ConfigRow, pruned_load_balance);
  HAPMOE_H5_FIELD(c, ConfigRow, pruned_memory);
  HAPMOE_H5_FIELD(c, ConfigRow, pruned_hetero_comm);
  HAPMOE_H5_FIELD(c, ConfigRow, pruned_bound);
  HAPMOE_H5_FIELD(c, ConfigRow, feasible);
  HAPMOE_H5_FIELD(c, ConfigRow, seconds);
  HAPMOE_H5_FIELD(c, ConfigRow, hetero_comm_ratio);
  HAPMOE_H5_FIELD(c, ConfigRow, parts);
  return c;
}

// search/resume/plans and search/resume/stages: the top K plans exactly as
// the engine holds them (its recompute choice as numbers, no text to
// parse back), for plan --resume (io/archive/resume.h).
struct ResumePlanRow {
  std::int64_t config = 0;       // its configuration's index in Pi
  double latency_s = 0;          // the search's latency, bit for bit
  std::int64_t first_stage = 0;  // its rows in search/resume/stages
  std::int32_t num_stages = 0;
};

inline h5::Compound<ResumePlanRow> resume_plan_row_type() {
  h5::Compound<ResumePlanRow> c;
  HAPMOE_H5_FIELD(c, ResumePlanRow, config);
  HAPMOE_H5_FIELD(c, ResumePlanRow, latency_s);
  HAPMOE_H5_FIELD(c, ResumePlanRow, first_stage);
  HAPMOE_H5_FIELD(c, ResumePlanRow, num_stages);
  return c;
}

struct ResumeStageRow {
  std::int32_t device_type = 0;
  std::int32_t layers = 0;
  std::int32_t recompute_kind = 0;     // RecomputeKind: 0 none, 1 selective, 2 full
  std::int32_t recompute_layers = 0;   // Recompute::layers
  std::int32_t recompute_modules = 0;  // Recompute::modules (module bits)
};

inline h5::Compound<ResumeStageRow> resume_stage_row_type() {
  h5::Compound<ResumeStageRow> c;
  HAPMOE_H5_FIELD(c, ResumeStageRow, device_type);
  HAPMOE_H5_FIELD(c, ResumeStageRow, layers);
  HAPMOE_H5_FIELD(c, ResumeStageRow, recompute_kind);
  HAPMOE_H5_FIELD(c, ResumeStageRow, recompute_layers);
  HAPMOE_H5_FIELD(c, ResumeStageRow, recompute_modules);
  return c;
}

// search/resume/closest: the closest miss of the search (one row, or none
// when nothing was short of memory), and the configuration it belongs to.
struct ResumeClosestRow {
  std::int64_t config = 0;
  double bytes = 0;
  std::int32_t pp = 0, tp = 0, cp = 0, ep = 0, tpe = 0, dp = 0, micro_batch = 0, vpp = 0;
  std::int32_t stage = 0;
  std::int32_t device_type = 0;
  std::int32_t layers = 0;
};

inline h5::Compound<ResumeClosestRow> resume_closest_row_type() {
  h5::Compound<ResumeClosestRow> c;
  HAPMOE_H5_FIELD(c, ResumeClosestRow, config);
  HAPMOE_H5_FIELD(c, ResumeClosestRow, bytes);
  HAPMOE_H5_FIELD(c, ResumeClosestRow, pp);
  HAPMOE_H5_FIELD(c, ResumeClosestRow, tp);
  HAPMOE_H5_FIELD(c, ResumeClosestRow, cp);
  HAPMOE_H5_FIELD(c, ResumeClosestRow, ep);
  HAPMOE_H5_FIELD(c, ResumeClosestRow, tpe);
  HAPMOE_H5_FIELD(c, ResumeClosestRow, dp);
  HAPMOE_H5_FIELD(c, ResumeClosestRow, micro_batch);
  HAPMOE_H5_FIELD(c, ResumeClosestRow, vpp);
  HAPMOE_H5_FIELD(c, ResumeClosestRow, stage);
  HAPMOE_H5_FIELD(c, ResumeClosestRow, device_type);
  HAPMOE_H5_FIELD(c, ResumeClosestRow, layers);
  return c;
}

// search/totals: the search's statistics, summed over Pi.
struct TotalsRow {
  std::int64_t configs = 0;            // |Pi|
  std::int64_t configs_evaluated = 0;  // searched by the DP
  std::int64_t configs_bounded = 0;    // skipped by branch and bound
  std::int64_t states = 0;
  std::int64_t transitions = 0;
  std::int64_t pruned_load_balance = 0;
  std::int64_t pruned_memory = 0;
  std::int64_t pruned_hetero_comm = 0;
  std::int64_t pruned_bound = 0;
  std::int64_t feasible = 0;
  std::int32_t rounds = 0;  // branch-and-bound rounds
  double seconds = 0;       // wall time of the whole search
};

inline h5::Compound<TotalsRow> totals_row_type() {
  h5::Compound<TotalsRow> c;
  HAPMOE_H5_FIELD(c, TotalsRow, configs);
  HAPMOE_H5_FIELD(c, TotalsRow, configs_evaluated);
  HAPMOE_H5_FIELD(c, TotalsRow, configs_bounded);
  HAPMOE_H5_FIELD(c, TotalsRow, states);
  HAPMOE_H5_FIELD(c, TotalsRow, transitions);
  HAPMOE_H5_FIELD(c, TotalsRow, pruned_load_balance);
  HAPMOE_H5_FIELD(c, TotalsRow, pruned_memory);
  HAPMOE_H5_FIELD(c, TotalsRow, pruned_hetero_comm);
  HAPMOE_H5_FIELD(c, TotalsRow, pruned_bound);
  HAPMOE_H5_FIELD(c, TotalsRow, feasible);
  HAPMOE_H5_FIELD(c, TotalsRow, rounds);
  HAPMOE_H5_FIELD(c, TotalsRow, seconds);
  return c;
}

// search/ranks: one row per MPI rank.
struct RankRow {
  std::int32_t rank = 0;
  std::int32_t threads = 0;
  std::int64_t configs = 0;      // configurations it searched
  std::int64_t transitions = 0;  // their transitions
  double work_estimate = 0;      // their summed estimate
  double busy_seconds = 0;       // computing
  double idle_seconds = 0;       // waiting for other ranks
};

inline h5::Compound<RankRow> rank_row_type() {
  h5::Compound<RankRow> c;
  HAPMOE_H5_FIELD(c, RankRow, rank);
  HAPMOE_H5_FIELD(c, RankRow, threads);
  HAPMOE_H5_FIELD(c, RankRow, configs);
  HAPMOE_H5_FIELD(c, RankRow, transitions);
  HAPMOE_H5_FIELD(c, RankRow, work_estimate);
  HAPMOE_H5_FIELD(c, RankRow, busy_seconds);
  HAPMOE_H5_FIELD(c, RankRow, idle_seconds);
  return c;
}

// search/units: one row per unit of work the search handed out (a
// configuration, or one part of it), in the order of the rounds.
struct UnitRow {
  std::int64_t config = 0;   // index in search/configs
  std::int32_t part = 0;     // which part (0 .. parts - 1)
  std::int32_t parts = 1;    // the configuration's parts
  std::int32_t round = 0;    // its round
  std::int32_t rank = 0;     // the rank that searched it
  double work_estimate = 0;  // its share of the configuration's estimate
  double seconds = 0;        // its search time
  std::int64_t transitions = 0;
  std::int32_t shares = 0;  // level shares of a shared configuration over the job, else 0
};

inline h5::Compound<UnitRow> unit_row_type() {
  h5::Compound<UnitRow> c;
  HAPMOE_H5_FIELD(c, UnitRow, config);
  HAPMOE_H5_FIELD(c, UnitRow, part);
  HAPMOE_H5_FIELD(c, UnitRow, parts);
  HAPMOE_H5_FIELD(c, UnitRow, round);
  HAPMOE_H5_FIELD(c, UnitRow, rank);
  HAPMOE_H5_FIELD(c, UnitRow, work_estimate);
  HAPMOE_H5_FIELD(c, UnitRow, seconds);
  HAPMOE_H5_FIELD(c, UnitRow, transitions);
  HAPMOE_H5_FIELD(c, UnitRow, shares);
  return c;
}

// inputs/profile/devices: per device type coefficients.
struct DeviceRow {
  std::int32_t device_type = 0;
  const char* name = "";
  double capacity_bytes = 0;
  double eta = 0;
  double hbm_bandwidth = 0;  // B/s
  double optimizer_s_per_param = 0;
  double activation_scale = 0;
  double overhead_bytes = 0;
};

inline h5::Compound<DeviceRow> device_row_type() {
  h5::Compound<DeviceRow> c;
  HAPMOE_H5_FIELD(c, DeviceRow, device_type);
  HAPMOE_H5_FIELD(c, DeviceRow, name);
  HAPMOE_H5_FIELD(c, DeviceRow, capacity_bytes);
  HAPMOE_H5_FIELD(c, DeviceRow, eta);
  HAPMOE_H5_FIELD(c, DeviceRow, hbm_bandwidth);
  HAPMOE_H5_FIELD(c, DeviceRow, optimizer_s_per_param);
  HAPMOE_H5_FIELD(c, DeviceRow, activation_scale);
  HAPMOE_H5_FIELD(c, DeviceRow, overhead_bytes);
  return c;
}

// inputs/profile/compute: t(h, TP, CP) per layer piece, one micro-batch,
// one device, seconds.
struct ComputeRow {
  std::int32_t device_type = 0, tp = 0, cp = 0;
  double attention_fwd = 0, core_attention_fwd = 0, dense_mlp_fwd = 0, dense_act_fwd = 0;
  double expert_fwd = 0, expert_act_fwd = 0, shared_fwd = 0, shared_act_fwd = 0;
  double router_fwd = 0, embedding_fwd = 0, output_fwd = 0;
  double attention_bwd = 0, dense_mlp_bwd = 0, expert_bwd = 0, shared_bwd = 0;
  double router_bwd = 0, embedding_bwd = 0, output_bwd = 0;
  double norm_fwd = 0, mla_up_fwd = 0, mtp_fwd = 0, mtp_bwd = 0;
  double core_attention_bwd = 0;
};

inline h5::Compound<ComputeRow> compute_row_type() {
  h5::Compound<ComputeRow> c;
  HAPMOE_H5_FIELD(c, ComputeRow, device_type);
  HAPMOE_H5_FIELD(c, ComputeRow, tp);
  HAPMOE_H5_FIELD(c, ComputeRow, cp);
  HAPMOE_H5_FIELD(c, ComputeRow, attention_fwd);
  HAPMOE_H5_FIELD(c, ComputeRow, core_attention_fwd);
  HAPMOE_H5_FIELD(c, ComputeRow, core_attention_bwd);
  HAPMOE_H5_FIELD(c, ComputeRow, dense_mlp_fwd);
  HAPMOE_H5_FIELD(c, ComputeRow, dense_act_fwd);
  HAPMOE_H5_FIELD(c, ComputeRow, expert_fwd);
  HAPMOE_H5_FIELD(c, ComputeRow, expert_act_fwd);
  HAPMOE_H5_FIELD(c, ComputeRow, shared_fwd);
  HAPMOE_H5_FIELD(c, ComputeRow, shared_act_fwd);
  HAPMOE_H5_FIELD(c, ComputeRow, router_fwd);
  HAPMOE_H5_FIELD(c, ComputeRow, embedding_fwd);
  HAPMOE_H5_FIELD(c, ComputeRow, output_fwd);
  HAPMOE_H5_FIELD(c, ComputeRow, attention_bwd);
  HAPMOE_H5_FIELD(c, ComputeRow, dense_mlp_bwd);
  HAPMOE_H5_FIELD(c, ComputeRow, expert_bwd);
  HAPMOE_H5_FIELD(c, ComputeRow, shared_bwd);
  HAPMOE_H5_FIELD(c, ComputeRow, router_bwd);
  HAPMOE_H5_FIELD(c, ComputeRow, embedding_bwd);
  HAPMOE_H5_FIELD(c, ComputeRow, output_bwd);
  HAPMOE_H5_FIELD(c, ComputeRow, norm_fwd);
  HAPMOE_H5_FIELD(c, ComputeRow, mla_up_fwd);
  HAPMOE_H5_FIELD(c, ComputeRow, mtp_fwd);
  HAPMOE_H5_FIELD(c, ComputeRow, mtp_bwd);
  return c;
}

// inputs/profile/comm: t = steps x latency + factor x bytes / bandwidth.
struct CommRow {
  const char* primitive = "";  // all_reduce, all_gather, ...
  const char* link = "";       // intra_node, inter_node, cross_type
  std::int32_t type_a = 0, type_b = 0;
  double bandwidth = 0;  // B/s per device per direction
  double latency = 0;    // s per step
};

inline h5::Compound<CommRow> comm_row_type() {
  h5::Compound<CommRow> c;
  HAPMOE_H5_FIELD(c, CommRow, primitive);
  HAPMOE_H5_FIELD(c, CommRow, link);
  HAPMOE_H5_FIELD(c, CommRow, type_a);
  HAPMOE_H5_FIELD(c, CommRow, type_b);
  HAPMOE_H5_FIELD(c, CommRow, bandwidth);
  HAPMOE_H5_FIELD(c, CommRow, latency);
  return c;
}

// The first value of a row that `hapmoe show` could not print as a
// figure: times, sizes, rates and counts must be finite and >= 0, the
// parallel degrees, micro-batches and device counts >= 1. `field` is empty
// when the row is valid. The writer checks every row with it before
// writing (io/archive/archive.cpp), `show` after reading
// (io/archive/archive_show.cpp), so neither passes NaN or infinity on.
struct RowIssue {
  std::string field;
  std::string what;
};
RowIssue check_row(const PlanRow& r);
RowIssue check_row(const StageRow& r);
RowIssue check_row(const TotalsRow& r);

// Throws H5Error naming `table`[row].field unless check_row(r) passes.
template <class Row>
void require_valid_row(const Row& r, const std::string& table, std::size_t row) {
  if (const RowIssue issue = check_row(r); !issue.field.empty()) {
    throw h5::H5Error(table + "[" + std::to_string(row) + "]." + issue.field + " " + issue.what);
  }
}

}  // namespace hapmoe::archive
