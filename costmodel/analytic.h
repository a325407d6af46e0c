// Fills the profile tables from the device catalog with a roofline model,
// so the planner works without measurements (docs/costmodel.md,
// "Analytic tables"). Measured profiles replace these values entry by entry.
#pragma once

#include <vector>

#include "costmodel/cluster.h"
#include "costmodel/model.h"
#include "costmodel/profile.h"

namespace hapmoe {

// Assumptions of the analytic generator, each documented and overridable.
struct AnalyticAssumptions {
  double memory_overhead_bytes = 2.0 * (1u << 30);  // context, NCCL, allocator
  double activation_scale = 1.0;                    // memory calibration
  double eta = 1.0;                                 // routed-expert kernel efficiency
  double elementwise_passes = 8.0;                  // tensor passes of norms/residuals per block
  double attention_bwd_factor = 2.5;                // flash-attention backward / forward
};

// Compute entries for every (tp, cp) pair given, at micro-batch size
// `micro_batch`; communication entries for every link kind of the cluster.
ProfileTables make_analytic_tables(const Workload& workload, const ClusterSpec& cluster,
                                   int micro_batch, const std::vector<int>& tp_values,
                                   const std::vector<int>& cp_values,
                                   const AnalyticAssumptions& assumptions = {});

// Roofline time of one GEMM (m x k) * (k x n) in `bytes_per_element`
// precision: max(compute at achievable peak, bytes moved at HBM bandwidth).
double gemm_time(double m, double n, double k, const DeviceSpec& device, double bytes_per_element);

}  // namespace hapmoe
