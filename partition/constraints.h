// The constraints Megatron-LM enforces on a parallel configuration
// (REFERENCE.md §3.2), and the fit of a plan onto a cluster. Each check
// returns "" or a message that names the degree and the value.
#pragma once

#include <string>
#include <vector>

#include "costmodel/cluster.h"
#include "costmodel/model.h"
#include "costmodel/plan.h"

namespace hapmoe {

struct ConstraintOptions {
  bool allow_cross_node_tp = false;  // TP groups may span nodes
  // Only plans the launcher can place (place_stages): for `plan
  // --launcher`, so the launcher never refuses the plan after the search.
  bool launcher_placement = false;
};

// Where the launcher puts a plan's stages (docs/megatron.md, "Rank order
// and nodes"). Stage i holds ranks [i*S, (i+1)*S) (PP outermost in
// Megatron's rank order) and torchrun numbers ranks node by node, so nodes
// are listed in stage order, each holding ranks of one device type: a
// stage continues on the previous node while it has room and is of its
// type, and otherwise opens the next node of its type. A run of stages of
// one type thus starts on a fresh node, and the devices left on its last
// node stay idle.
struct Placement {
  struct Node {
    int type = 0;
    int index = 0;  // among the nodes of its type, in the cluster's order
    int procs = 0;  // ranks placed on it
  };
  std::vector<Node> nodes;               // in rank order
  std::vector<std::vector<int>> stages;  // per stage: its nodes (indices into `nodes`)
  int failed_stage = -1;                 // the first stage that found no node, or -1
  bool ok() const { return failed_stage < 0; }
};
Placement place_stages(const ClusterSpec& cluster, int stage_devices,
                       const std::vector<int>& stage_types);

// pi against the model and batch (device independent): why it is not a
// configuration Megatron-LM runs, "" if it is.
std::string check_parallel(const ParallelConfig& pi, const Workload& workload);
// check_parallel(pi, workload).empty(), without building a message.
bool parallel_ok(const ParallelConfig& pi, const Workload& workload);
// Of parallel_ok's rules, those the micro-batch and the virtual stages
// enter: DP x micro-batch divides the global batch, and interleaving needs
// PP >= 2 and the micro-batches in groups of PP. A configuration that
// passes parallel_ok with another micro-batch and vpp passes it with these
// iff it passes schedule_ok with them (with_vpp).
bool schedule_ok(const ParallelConfig& pi, const Workload& workload);

// The training precision against every device type of the cluster: FP8
// needs an FP8 peak on each (the cost tables are built for every type).
std::string check_precision(const Workload& workload, const ClusterSpec& cluster);

// Optimizer CPU offload against every device type: the host memory and the
// host link must be known (catalog or cluster file).
std::string check_offload(const Workload& workload, const ClusterSpec& cluster);

// A whole plan: pi, stage count and layers, device types present, enough
// devices of each type, TP inside a node; with `launcher_placement`, the
// stage order can be placed (place_stages).
std::string check_plan(const Plan& plan, const Workload& workload, const ClusterSpec& cluster,
                       const ConstraintOptions& options = {});

}  // namespace hapmoe
