// The configuration space Pi: every parallel configuration
// pi = (PP, TP, CP, EP, TPE, DP) that Megatron-LM accepts for the model and
// batch (partition/constraints.h) and that has room on the cluster: at
// least PP stage groups of TP*CP*DP devices, each group of one device type
// whose nodes can hold the TP group.
#pragma once

#include <cstdint>
#include <vector>

#include "costmodel/cluster.h"
#include "costmodel/model.h"
#include "costmodel/plan.h"
#include "partition/constraints.h"

namespace hapmoe {

struct SpaceOptions {
  ConstraintOptions constraints;
  int max_pp = 0;  // 0: up to the number of layers
  // Only configurations with this EP / TPE (0: any): the Metis-style
  // baseline fixes them (engine/baselines.h).
  int fixed_ep = 0;
  int fixed_tpe = 0;
  // Virtual pipeline stages per rank of every configuration (1: plain
  // 1F1B); configurations Megatron cannot interleave are left out
  // (check_parallel). The job search (engine/job_space.h) tries several.
  int vpp = 1;
};

// Stage groups of `stage_devices` devices that type h can host under pi:
// floor(devices_h / stage_devices), or 0 if a TP group does not fit in its
// nodes (unless cross-node TP is allowed).
int stage_capacity(const ClusterSpec& cluster, int type, const ParallelConfig& pi,
                   const ConstraintOptions& options);

// Pi in a canonical order (pp, tp, cp, ep, tpe, dp ascending, lexicographic),
// identical on every rank for the same inputs. The micro-batch is the
// workload's, the virtual stages options.vpp.
std::vector<ParallelConfig> enumerate_configs(const Workload& workload, const ClusterSpec& cluster,
                                              const SpaceOptions& options = {});

// Pi of `workload` with `vpp` virtual stages from `known`, the Pi
// (enumerate_configs, the same cluster and options) of the workload with
// another number of them or a micro-batch that divides this one's: equal
// to enumerate_configs with options.vpp = vpp, in one pass over `known`.
// Interleaving only adds rules, the same for every vpp > 1 (PP >= 2, the
// micro-batches in groups of PP: partition/constraints.cpp), so `known`
// must be without interleaving or `vpp` interleaved; a larger micro-batch
// only adds divisibility (DP x micro-batch divides the global batch).
std::vector<ParallelConfig> with_vpp(const std::vector<ParallelConfig>& known,
                                     const Workload& workload, int vpp);

// Positive divisors of n in ascending order.
std::vector<int> divisors(int n);

}  // namespace hapmoe
