// The constraints Megatron-LM enforces on a parallel configuration
// (REFERENCE.md §3.2), and the fit of a plan onto a cluster. Each check
// returns "" or a message that names the degree and the value.
#pragma once

#include <string>

#include "costmodel/cluster.h"
#include "costmodel/model.h"
#include "costmodel/plan.h"

namespace hapmoe {

struct ConstraintOptions {
  bool allow_cross_node_tp = false;  // TP groups may span nodes
};

// pi against the model and batch (device independent).
std::string check_parallel(const ParallelConfig& pi, const Workload& workload);

// The training precision against every device type of the cluster: FP8
// needs an FP8 peak on each (the cost tables are built for every type).
std::string check_precision(const Workload& workload, const ClusterSpec& cluster);

// Optimizer CPU offload against every device type: the host memory and the
// host link must be known (catalog or cluster file).
std::string check_offload(const Workload& workload, const ClusterSpec& cluster);

// A whole plan: pi, stage count and layers, device types present, enough
// devices of each type, TP inside a node.
std::string check_plan(const Plan& plan, const Workload& workload, const ClusterSpec& cluster,
                       const ConstraintOptions& options = {});

}  // namespace hapmoe
