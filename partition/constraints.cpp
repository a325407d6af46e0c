#include "partition/constraints.h"

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

namespace hapmoe {

namespace {

std::string deg(const char* name, int v) { return std::string(name) + "=" + std::to_string(v); }

}  // namespace

namespace {

// The rules of check_parallel, in the order it checks them.
enum class ParallelRule {
  kOk,
  kDegreeBelowOne,
  kPpOverLayers,
  kPpWithActivationOffload,
  kTpHeads,
  kTpKvHeads,
  kDenseExperts,
  kEpExperts,
  kExpertFold,
  kEpFp16,
  kCpSeqLen,
  kBatch,
  kVppOnePp,
  kVppMicroBatches,
};

// The degrees every configuration has, each at least 1.
std::array<std::pair<const char*, int>, 8> degrees(const ParallelConfig& pi) {
  return {{{"pp", pi.pp},
           {"tp", pi.tp},
           {"cp", pi.cp},
           {"ep", pi.ep},
           {"tpe", pi.tpe},
           {"dp", pi.dp},
           {"micro_batch", pi.micro_batch},
           {"vpp", pi.vpp}}};
}

// The first of the rules the micro-batch and the virtual stages enter that
// pi breaks (kOk: none).
ParallelRule broken_schedule_rule(const ParallelConfig& pi, const Workload& w) {
  const TrainingSpec& t = w.training;
  if (pi.micro_batch < 1 || pi.vpp < 1 || pi.dp < 1 || pi.pp < 1) {
    return ParallelRule::kDegreeBelowOne;
  }
  if (t.global_batch % (pi.micro_batch * pi.dp) != 0) return ParallelRule::kBatch;
  if (pi.vpp > 1) {
    // Megatron-LM's interleaved schedule (REFERENCE.md 3.2.10; its
    // schedules.py asks for micro-batches in groups of PP).
    if (pi.pp < 2) return ParallelRule::kVppOnePp;
    if (t.global_batch / (pi.micro_batch * pi.dp) % pi.pp != 0) {
      return ParallelRule::kVppMicroBatches;
    }
  }
  return ParallelRule::kOk;
}

// The first rule pi breaks (kOk: none); no message is built, so the
// enumeration of Pi rejects its candidates cheaply.
ParallelRule broken_rule(const ParallelConfig& pi, const Workload& w) {
  const ModelSpec& m = w.model;
  const TrainingSpec& t = w.training;
  for (const auto& d : degrees(pi)) {
    if (d.second < 1) return ParallelRule::kDegreeBelowOne;
  }
  if (pi.pp > m.num_layers) return ParallelRule::kPpOverLayers;
  // Megatron-LM core_v0.15.0 transformer_config.py.
  if (t.activation_offload_layers > 0 && pi.pp > 1) return ParallelRule::kPpWithActivationOffload;
  if (m.num_heads % pi.tp != 0) return ParallelRule::kTpHeads;
  if (m.num_kv_heads % pi.tp != 0) return ParallelRule::kTpKvHeads;
  if (!m.is_moe() && (pi.ep != 1 || pi.tpe != 1)) return ParallelRule::kDenseExperts;
  if (m.is_moe() && m.num_experts % pi.ep != 0) return ParallelRule::kEpExperts;
  if (pi.stage_devices() % (pi.ep * pi.tpe) != 0) return ParallelRule::kExpertFold;
  if (pi.ep > 1 && t.precision == Precision::kFp16) return ParallelRule::kEpFp16;
  if (pi.cp > 1 && t.seq_len % (2 * pi.cp) != 0) return ParallelRule::kCpSeqLen;
  return broken_schedule_rule(pi, w);
}

}  // namespace

bool parallel_ok(const ParallelConfig& pi, const Workload& w) {
  return broken_rule(pi, w) == ParallelRule::kOk;
}

bool schedule_ok(const ParallelConfig& pi, const Workload& w) {
  return broken_schedule_rule(pi, w) == ParallelRule::kOk;
}

std::string check_parallel(const ParallelConfig& pi, const Workload& w) {
  const ModelSpec& m = w.model;
  const TrainingSpec& t = w.training;
  switch (broken_rule(pi, w)) {
    case ParallelRule::kOk:
      return "";
    case ParallelRule::kDegreeBelowOne:
      for (const auto& [name, v] : degrees(pi)) {
        if (v < 1) return deg(name, v) + " must be at least 1";
      }
      return "";
    case ParallelRule::kPpOverLayers:
      return deg("pp", pi.pp) + " exceeds the model's " + std::to_string(m.num_layers) + " layers";
    case ParallelRule::kPpWithActivationOffload:
      return deg("pp", pi.pp) +
             " with activation offload: Megatron-Core has no pipeline parallelism with CPU "
             "offloading";
    case ParallelRule::kTpHeads:
      return deg("tp", pi.tp) + " does not divide num_heads=" + std::to_string(m.num_heads);
    case ParallelRule::kTpKvHeads:
      return deg("tp", pi.tp) +
             " does not divide num_kv_heads (query groups)=" + std::to_string(m.num_kv_heads);
    case ParallelRule::kDenseExperts:
      return "ep and tpe must be 1 for a dense model (got " + deg("ep", pi.ep) + ", " +
             deg("tpe", pi.tpe) + ")";
    case ParallelRule::kEpExperts:
      return deg("ep", pi.ep) + " does not divide num_experts=" + std::to_string(m.num_experts);
    case ParallelRule::kExpertFold:
      return "ep*tpe=" + std::to_string(pi.ep * pi.tpe) +
             " does not divide tp*cp*dp=" + std::to_string(pi.stage_devices()) +
             " (the expert group must fold into the stage)";
    case ParallelRule::kEpFp16:
      return deg("ep", pi.ep) + " with fp16: Megatron-LM rejects expert parallelism with --fp16";
    case ParallelRule::kCpSeqLen:
      return deg("cp", pi.cp) + ": seq_len=" + std::to_string(t.seq_len) +
             " is not divisible by 2*cp=" + std::to_string(2 * pi.cp);
    case ParallelRule::kBatch:
      return "global_batch=" + std::to_string(t.global_batch) +
             " is not divisible by micro_batch*dp=" + std::to_string(pi.micro_batch * pi.dp);
    case ParallelRule::kVppOnePp:
      return deg("vpp", pi.vpp) + " needs pp > 1 (got " + deg("pp", pi.pp) + ")";
    case ParallelRule::kVppMicroBatches:
      return deg("vpp", pi.vpp) + ": the " +
             std::to_string(t.global_batch / (pi.micro_batch * pi.dp)) +
             " micro-batches per iteration are not a multiple of " + deg("pp", pi.pp) +
             ", as the interleaved schedule needs";
  }
  return "";
}

namespace {

std::string no_fp8(const DeviceSpec& d) {
  return d.name +
         " has no FP8 matrix math (its catalog entry gives no FP8 peak), so it cannot "
         "train in --precision fp8; use bf16, or a cluster file that gives \"fp8_peak_tflops\"";
}

}  // namespace

std::string check_precision(const Workload& w, const ClusterSpec& cluster) {
  if (w.training.precision != Precision::kFp8) return "";
  for (const DevicePool& pool : cluster.pools) {
    if (!(pool.device.fp8_peak_flops > 0)) return no_fp8(pool.device);
  }
  return "";
}

std::string check_offload(const Workload& w, const ClusterSpec& cluster) {
  if (!(w.training.optimizer_offload_fraction > 0) && w.training.activation_offload_layers == 0) {
    return "";
  }
  for (const DevicePool& pool : cluster.pools) {
    const DeviceSpec& d = pool.device;
    if (!(d.host_memory_bytes > 0) || !(d.host_link_bandwidth > 0) ||
        !(d.host_memory_bandwidth > 0)) {
      return "CPU offload needs the host side of device " + d.name +
             " (its host memory, host memory bandwidth and host link are not all known): set "
             "host_memory_gb, host_memory_bandwidth_gb_s and host_link_gb_s for it in a cluster "
             "file (docs/clusters.md)";
    }
  }
  return "";
}

Placement place_stages(const ClusterSpec& cluster, int stage_devices,
                       const std::vector<int>& stage_types) {
  Placement out;
  out.stages.resize(stage_types.size());
  std::vector<int> next(static_cast<std::size_t>(cluster.num_types()), 0);
  for (std::size_t i = 0; i < stage_types.size(); ++i) {
    const int h = stage_types[i];
    const DevicePool& pool = cluster.pools[static_cast<std::size_t>(h)];
    for (int need = stage_devices; need > 0;) {
      const bool reuse = !out.nodes.empty() && out.nodes.back().type == h &&
                         out.nodes.back().procs < pool.devices_per_node;
      if (!reuse) {
        int& k = next[static_cast<std::size_t>(h)];
        if (k >= pool.nodes) {
          out.failed_stage = static_cast<int>(i);
          return out;
        }
        out.nodes.push_back({h, k++, 0});
      }
      Placement::Node& node = out.nodes.back();
      const int take = std::min(need, pool.devices_per_node - node.procs);
      node.procs += take;
      need -= take;
      out.stages[i].push_back(static_cast<int>(out.nodes.size()) - 1);
    }
  }
  return out;
}

std::string check_plan(const Plan& plan, const Workload& w, const ClusterSpec& cluster,
                       const ConstraintOptions& options) {
  const ParallelConfig& pi = plan.parallel;
  if (auto e = check_parallel(pi, w); !e.empty()) return e;
  if (static_cast<int>(plan.stages.size()) != pi.pp) {
    return "the plan has " + std::to_string(plan.stages.size()) +
           " stages but pp=" + std::to_string(pi.pp);
  }
  int layers = 0;
  std::vector<int> stages_per_type(static_cast<std::size_t>(cluster.num_types()), 0);
  for (std::size_t i = 0; i < plan.stages.size(); ++i) {
    const StagePlan& s = plan.stages[i];
    const std::string where = "stage " + std::to_string(i) + ": ";
    if (s.device_type < 0 || s.device_type >= cluster.num_types()) {
      return where + "device type index " + std::to_string(s.device_type) +
             " is not in the cluster";
    }
    if (s.layers < 1) return where + "layers=" + std::to_string(s.layers) + " must be at least 1";
    if (s.recompute.kind == RecomputeKind::kSelective && w.training.precision == Precision::kFp8 &&
        w.training.fp8_recipe == Fp8Recipe::kDelayed) {
      const unsigned refused =
          (w.model.is_moe() ? module_bit(RecomputeModule::kMoeAct) : 0u) |
          (w.model.is_moe() || w.model.mla.enabled() ? module_bit(RecomputeModule::kLayernorm)
                                                     : 0u);
      if ((s.recompute.modules & refused) != 0) {
        return where + "recompute modules " + to_string(s.recompute, s.layers) +
               " with FP8 delayed scaling: Megatron-LM core_v0.15.0 refuses moe_act and "
               "layernorm recompute with it (use selective:core_attn, or another recipe)";
      }
    }
    if (w.training.activation_offload_layers > 0 && s.recompute.kind != RecomputeKind::kNone) {
      return where +
             "recomputation with activation offload: Megatron-Core refuses CPU "
             "offloading with activation recomputation";
    }
    if (s.recompute.kind == RecomputeKind::kFull &&
        (s.recompute.layers < 1 || s.recompute.layers > s.layers)) {
      return where + "full recomputation of " + std::to_string(s.recompute.layers) +
             " layers, but the stage has " + std::to_string(s.layers);
    }
    layers += s.layers;
    ++stages_per_type[static_cast<std::size_t>(s.device_type)];
  }
  if (layers != w.model.num_layers) {
    return "the stages hold " + std::to_string(layers) + " layers but the model has " +
           std::to_string(w.model.num_layers);
  }
  for (int h = 0; h < cluster.num_types(); ++h) {
    const DevicePool& pool = cluster.pools[static_cast<std::size_t>(h)];
    const int used = stages_per_type[static_cast<std::size_t>(h)];
    if (used == 0) continue;
    const long long need = static_cast<long long>(used) * pi.stage_devices();
    if (need > pool.devices()) {
      return std::to_string(used) + " stages of " + std::to_string(pi.stage_devices()) + " " +
             pool.device.name + " devices need " + std::to_string(need) + ", the cluster has " +
             std::to_string(pool.devices());
    }
    if (w.training.precision == Precision::kFp8 && !(pool.device.fp8_peak_flops > 0)) {
      return no_fp8(pool.device);
    }
    if (!options.allow_cross_node_tp &&
        (pi.tp > pool.devices_per_node || pool.devices_per_node % pi.tp != 0)) {
      return deg("tp", pi.tp) + " does not fit inside a " + pool.device.name + " node of " +
             std::to_string(pool.devices_per_node) +
             " devices (TP stays inside a node unless cross-node TP is allowed)";
    }
  }
  if (options.launcher_placement) {
    std::vector<int> types;
    for (const StagePlan& s : plan.stages) types.push_back(s.device_type);
    const Placement placed = place_stages(cluster, pi.stage_devices(), types);
    if (!placed.ok()) {
      const DevicePool& pool = cluster.pools[static_cast<std::size_t>(
          types[static_cast<std::size_t>(placed.failed_stage)])];
      return "stage " + std::to_string(placed.failed_stage) + " needs more " + pool.device.name +
             " nodes than the cluster has when every node holds consecutive ranks of one "
             "device type (torchrun numbers ranks node by node, and a run of stages of one type "
             "starts on a fresh node): this stage order cannot be launched";
    }
  }
  return "";
}

}  // namespace hapmoe
