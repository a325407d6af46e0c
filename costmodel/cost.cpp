// The MoE-aware cost model. docs/costmodel.md gives every formula with its
// units and source; the comments here name the section.
#include "costmodel/cost.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include "costmodel/analytic.h"
#include "costmodel/errors.h"

namespace hapmoe {

StepParts& StepParts::operator+=(const StepParts& o) {
  compute += o.compute;
  tp += o.tp;
  cp += o.cp;
  ep += o.ep;
  p2p += o.p2p;
  recompute += o.recompute;
  dp += o.dp;
  host += o.host;
  tp_hidden += o.tp_hidden;
  ep_hidden += o.ep_hidden;
  return *this;
}

StepParts operator*(double n, const StepParts& p) {
  StepParts out;
  out.compute = n * p.compute;
  out.tp = n * p.tp;
  out.cp = n * p.cp;
  out.ep = n * p.ep;
  out.p2p = n * p.p2p;
  out.recompute = n * p.recompute;
  out.dp = n * p.dp;
  out.host = n * p.host;
  out.tp_hidden = n * p.tp_hidden;
  out.ep_hidden = n * p.ep_hidden;
  return out;
}

namespace {

constexpr double kFp32 = 4.0;
// Optimizer CPU offload: host bytes per offloaded parameter (fp32 master,
// fp32 gradient, two fp32 Adam moments) and bytes a CPU Adam step streams
// per parameter (reads those four, writes master and moments).
constexpr double kHostOptimizerBytes = 16.0;
constexpr double kCpuAdamBytes = 28.0;
// Megatron-LM's gradient buckets: max(40M, 1M x DP) parameters
// (DistributedDataParallel's default bucket size).
constexpr double kMinBucketParams = 40e6;
constexpr double kBucketParamsPerDpRank = 1e6;
// SMs the MoE dispatcher's communication kernels occupy while they overlap
// compute: Megatron-LM's --moe-deepep-num-sms default (20); assumed for the
// NCCL all-to-all as well.
constexpr int kDispatchComputeUnits = 20;

// The link a group of `span` consecutive ranks of one device type uses:
// inside a node when it fits in one and nodes split evenly into such
// groups, else across nodes (docs/costmodel.md, "Placement").
Link span_link(const ClusterSpec& cluster, int type, int span) {
  const int per_node = cluster.pools[static_cast<std::size_t>(type)].devices_per_node;
  const bool intra = span <= per_node && per_node % span == 0;
  return {intra ? LinkKind::kIntraNode : LinkKind::kInterNode, type, type};
}

// How a group of `world` members at stride `stride` lies on the nodes of
// device type `type`: its link, and whether it spans whole nodes with q
// members on each (then its traffic goes partly over the node's link and
// partly over the NIC). A measured inter-node `prim` is taken as it was
// measured, over the whole group: the measurement already is NCCL's real
// collective, so the group is then treated as one link.
struct GroupPlacement {
  Link link;
  int q = 0;  // members per node, when `split`
  bool split = false;
};

GroupPlacement group_placement(const CommTable& comm, const ClusterSpec& cluster, int type,
                               int world, int stride, Primitive prim) {
  GroupPlacement p;
  p.link = span_link(cluster, type, world * stride);
  const int per_node = cluster.pools[static_cast<std::size_t>(type)].devices_per_node;
  p.q = per_node / stride;
  p.split = p.link.kind == LinkKind::kInterNode && per_node % stride == 0 && p.q >= 1 &&
            world % p.q == 0 && !comm.has_measured(prim, p.link);
  return p;
}

// A ring collective (all-reduce, all-gather, reduce-scatter) over such a
// group, e.g. the data-parallel gradient reduction (docs/costmodel.md,
// "Collectives over several nodes"). With q >= 2 members on each node NCCL
// runs q channels, each leaving the node through another member's NIC: of
// what a member sends, 1/q crosses its NIC and (q-1)/q moves over the
// node's link, at the same time; the steps and their latency are the ring's.
double group_collective(const CommTable& comm, const ClusterSpec& cluster, int type, Primitive prim,
                        double bytes, int world, int stride) {
  const GroupPlacement p = group_placement(comm, cluster, type, world, stride, prim);
  if (!p.split || p.q < 2) return comm.time(prim, bytes, world, p.link);
  const Link node{LinkKind::kIntraNode, type, type};
  return std::max(comm.time(prim, bytes / p.q, world, p.link),
                  comm.time(prim, bytes * (p.q - 1) / p.q, world, node));
}

// The in-node part of an EP exchange: the all-to-all among the q members
// on a node of the shares they send each other (`bytes` / world each).
double in_node_all_to_all(const CommTable& comm, int type, double bytes, int world, int q) {
  return comm.time(Primitive::kAllToAll, bytes / world * q, q, {LinkKind::kIntraNode, type, type});
}

// The all-to-all of an EP group (docs/costmodel.md, "Dispatch and
// combine"). NCCL's all-to-all is a group of sends and receives to every
// peer that progress independently: when the group spans nodes, the q - 1
// peers on the device's own node are reached over the node's link while
// the world - q others are reached over the NIC, so the exchange takes the
// longer of the two, not all of it over the NIC. `bytes` is what one device
// sends in all, its own share included.
double ep_all_to_all(const CommTable& comm, const ClusterSpec& cluster, int type, double bytes,
                     int world, int stride) {
  const GroupPlacement p =
      group_placement(comm, cluster, type, world, stride, Primitive::kAllToAll);
  if (!p.split) return comm.time(Primitive::kAllToAll, bytes, world, p.link);
  // world - q peers over the NIC: the one-link formula over world - q + 1
  // members with a buffer of (world - q + 1) shares sends exactly (world -
  // q) shares in world - q steps.
  const int remote = world - p.q + 1;
  const double nic = comm.time(Primitive::kAllToAll, bytes / world * remote, remote, p.link);
  return std::max(in_node_all_to_all(comm, type, bytes, world, p.q), nic);
}

// The expected number of other nodes that hold at least one of a token's
// k experts, when the E experts lie evenly on `nodes` nodes and the k are
// k distinct experts chosen uniformly: (nodes - 1) * (1 - P0), P0 the
// chance that none of the k lies on a given node.
double remote_nodes_per_token(int experts, int top_k, int nodes) {
  const double per_node = static_cast<double>(experts) / nodes;
  double none = 1.0;
  for (int i = 0; i < top_k; ++i) none *= std::max(0.0, (experts - per_node - i) / (experts - i));
  return (nodes - 1) * (1.0 - none);
}

// Megatron's flex dispatcher with DeepEP (docs/costmodel.md, "Dispatch and
// combine"). Inside one node it is the all-to-all. Across nodes DeepEP
// sends each token once over RDMA to every other node that holds one of its
// experts and forwards it there over NVLink; the two stages are pipelined,
// so one exchange takes the longer of the RDMA part (t_sp * H * beta per
// remote node, at the NIC's bandwidth) and the in-node part. `tokens` is
// t_sp, `token_bytes` H * beta, `routed` what the all-to-all sends
// (t_sp * k * H * beta).
double deepep_exchange(const CommTable& comm, const ClusterSpec& cluster, int type,
                       const ModelSpec& m, double tokens, double token_bytes, double routed,
                       int world, int stride) {
  const GroupPlacement p =
      group_placement(comm, cluster, type, world, stride, Primitive::kAllToAll);
  if (!p.split) return comm.time(Primitive::kAllToAll, routed, world, p.link);
  const double copies = remote_nodes_per_token(m.num_experts, m.top_k, world / p.q);
  const double rdma = comm.time(Primitive::kP2P, tokens * copies * token_bytes, 2, p.link);
  return std::max(in_node_all_to_all(comm, type, routed, world, p.q), rdma);
}

double bytes_per_element(const Workload& w) {
  (void)w;  // bf16 and fp16 are both two bytes
  return 2.0;
}

double imbalance_factor(const TrainingSpec& t) { return 1.0 + t.gamma * (t.imbalance - 1.0); }

// Numerical hygiene (docs/costmodel.md): every per-(pi, type) quantity the
// search and the reports read is checked once, where it is computed, to be
// finite and non-negative. The per-stage and per-iteration costs are sums
// and products of these with non-negative integer counts, so they are then
// finite and non-negative by construction (the input ranges of
// docs/models.md and docs/clusters.md keep them far from overflow), and
// the DP's inner loop needs no check.
[[noreturn]] void numeric_failure(const Workload& w, const ClusterSpec& cluster,
                                  const ParallelConfig& pi, int type, const char* field,
                                  double value) {
  std::ostringstream msg;
  msg << "the cost model computed " << field << " = " << value
      << " (must be finite and >= 0) for model '" << w.model.name << "' on device "
      << cluster.pools[static_cast<std::size_t>(type)].device.name << " with PP=" << pi.pp
      << " TP=" << pi.tp << " CP=" << pi.cp << " EP=" << pi.ep << " TPE=" << pi.tpe
      << " DP=" << pi.dp << " micro-batch " << pi.micro_batch
      << "; check the model, device and link figures";
  throw NumericError("cost model", msg.str());
}

void check_layer(const LayerCost& c, const char* kind, const Workload& w,
                 const ClusterSpec& cluster, const ParallelConfig& pi, int type) {
  const struct {
    const char* name;
    double value;
  } fields[] = {{"fwd_s", c.fwd_s},
                {"bwd_s", c.bwd_s},
                {"act_bytes", c.act_bytes},
                {"act_full_bytes", c.act_full_bytes},
                {"dense_params", c.dense_params},
                {"expert_params", c.expert_params},
                {"moe_buffer_bytes", c.moe_buffer_bytes},
                {"fwd_parts", c.fwd_parts.total()},
                {"bwd_parts", c.bwd_parts.total()}};
  for (const auto& f : fields) {
    if (!(std::isfinite(f.value) && f.value >= 0.0)) {
      numeric_failure(w, cluster, pi, type, (std::string(kind) + " layer " + f.name).c_str(),
                      f.value);
    }
  }
  for (int i = 0; i < kNumRecomputeModules; ++i) {
    const LayerCost::ModuleCost& mc = c.modules[static_cast<std::size_t>(i)];
    for (const double v : {mc.saved_bytes, mc.extra_s}) {
      if (!(std::isfinite(v) && v >= 0.0)) {
        numeric_failure(w, cluster, pi, type,
                        (std::string(kind) + " layer recompute module " +
                         to_string(static_cast<RecomputeModule>(i)))
                            .c_str(),
                        v);
      }
    }
  }
}

// The fields of t but its two layer costs (checked by check_layer when
// computed, before type_costs' memo keeps them).
void check_type_costs(const TypeCosts& t, const Workload& w, const ClusterSpec& cluster,
                      const ParallelConfig& pi) {
  const struct {
    const char* name;
    double value;
  } fields[] = {{"embedding_fwd_s", t.embedding_fwd_s},
                {"embedding_bwd_s", t.embedding_bwd_s},
                {"output_fwd_s", t.output_fwd_s},
                {"output_bwd_s", t.output_bwd_s},
                {"mtp_fwd_s", t.mtp_fwd_s},
                {"mtp_bwd_s", t.mtp_bwd_s},
                {"mtp_params", t.mtp_params},
                {"embedding_params", t.embedding_params},
                {"output_params", t.output_params},
                {"logits_bytes", t.logits_bytes},
                {"capacity_bytes", t.capacity_bytes},
                {"overhead_bytes", t.overhead_bytes},
                {"activation_scale", t.activation_scale},
                {"weight_bytes_per_param", t.weight_bytes_per_param},
                {"fp8_copy_bytes_per_param", t.fp8_copy_bytes_per_param},
                {"grad_bytes_per_param", t.grad_bytes_per_param},
                {"dense_opt_bytes_per_param", t.dense_opt_bytes_per_param},
                {"expert_opt_bytes_per_param", t.expert_opt_bytes_per_param},
                {"optimizer_s_per_param", t.optimizer_s_per_param},
                {"offload_fraction", t.offload_fraction},
                {"offload_memory_fraction", t.offload_memory_fraction},
                {"host_bytes_per_param", t.host_bytes_per_param},
                {"offload_s_per_param", t.offload_s_per_param},
                {"host_capacity_bytes", t.host_capacity_bytes},
                {"host_link_s_per_byte", t.host_link_s_per_byte},
                {"layer_unit_params", t.layer_unit_params},
                {"dp_reduce.latency_s", t.dp_reduce.latency_s},
                {"dp_reduce.s_per_param", t.dp_reduce.s_per_param},
                {"dp_gather.latency_s", t.dp_gather.latency_s},
                {"dp_gather.s_per_param", t.dp_gather.s_per_param},
                {"edp_reduce.latency_s", t.edp_reduce.latency_s},
                {"edp_reduce.s_per_param", t.edp_reduce.s_per_param},
                {"edp_gather.latency_s", t.edp_gather.latency_s},
                {"edp_gather.s_per_param", t.edp_gather.s_per_param}};
  for (const auto& f : fields) {
    if (!(std::isfinite(f.value) && f.value >= 0.0)) {
      numeric_failure(w, cluster, pi, t.type, f.name, f.value);
    }
  }
}

}  // namespace

// type_costs' memo: the dense and MoE layer costs, keyed by the fields of
// the configuration layer_cost reads and the type; and the gradient
// synchronisations' affine times, keyed by their group (world, stride),
// primitive, bytes per parameter and type. One per thread, for the cost
// model it last served (CostModel::id_; copies share it): the threads of
// a search take no lock.
struct CostModel::Memo {
  // The fields' bits, mixed: std::hash of a double hashes its bytes
  // (_Hash_bytes, a call per field). Equal keys hash alike (+0 and -0 are
  // one value).
  template <class Key>
  struct Hash {
    std::size_t operator()(const Key& k) const {
      std::uint64_t h = 0x9e3779b97f4a7c15u;
      for (const auto x : k) {
        std::uint64_t v = 0;
        if constexpr (std::is_floating_point_v<std::decay_t<decltype(x)>>) {
          v = x == 0 ? 0 : std::bit_cast<std::uint64_t>(static_cast<double>(x));
        } else {
          v = static_cast<std::uint64_t>(x);
        }
        h = (h ^ v) * 0xff51afd7ed558ccdu;
        h ^= h >> 32;
      }
      return static_cast<std::size_t>(h);
    }
  };
  using LayerKey = std::array<int, 6>;
  using SyncKey = std::array<double, 5>;
  std::uint64_t model = 0;  // the id_ the entries are for
  std::unordered_map<LayerKey, std::pair<LayerCost, LayerCost>, Hash<LayerKey>> layers;
  std::unordered_map<SyncKey, SyncCost, Hash<SyncKey>> syncs;
  static Memo& of(std::uint64_t id) {
    thread_local Memo memo;
    if (memo.model != id) {
      memo.model = id;
      memo.layers.clear();
      memo.syncs.clear();
    }
    return memo;
  }
};

namespace {
std::atomic<std::uint64_t> cost_models{0};
}  // namespace

CostModel::CostModel(const Workload& workload, const ClusterSpec& cluster,
                     const ProfileTables& tables)
    : workload_(workload), cluster_(cluster), tables_(tables), id_(++cost_models) {
  const int n = workload.model.num_layers;
  moe_prefix_.assign(static_cast<std::size_t>(n) + 1, 0);
  for (int l = 0; l < n; ++l) {
    moe_prefix_[static_cast<std::size_t>(l) + 1] =
        moe_prefix_[static_cast<std::size_t>(l)] + (workload.model.is_moe_layer(l) ? 1 : 0);
  }
  HAPMOE_REQUIRE(static_cast<int>(tables.devices.size()) == cluster.num_types(),
                 "CostModel: profile tables do not match the cluster's device types");
}

int CostModel::moe_layers_in(int first, int count) const {
  HAPMOE_REQUIRE(first >= 0 && count >= 0 && first + count <= workload_.model.num_layers,
                 "CostModel::moe_layers_in: layer range out of bounds");
  return moe_prefix_[static_cast<std::size_t>(first + count)] -
         moe_prefix_[static_cast<std::size_t>(first)];
}

int CostModel::num_microbatches(const ParallelConfig& pi) const {
  return workload_.training.global_batch / (pi.micro_batch * pi.dp);
}

LayerCost::ModuleCost LayerCost::selective(unsigned module_set) const {
  if ((module_set & module_bit(RecomputeModule::kMoe)) != 0) {
    module_set &=
        ~(module_bit(RecomputeModule::kMoeAct) | module_bit(RecomputeModule::kSharedExperts));
  }
  ModuleCost out;
  for (int i = 0; i < kNumRecomputeModules; ++i) {
    if ((module_set & module_bit(static_cast<RecomputeModule>(i))) == 0) continue;
    out.saved_bytes += modules[static_cast<std::size_t>(i)].saved_bytes;
    out.extra_s += modules[static_cast<std::size_t>(i)].extra_s;
  }
  return out;
}

// --- One layer (docs/costmodel.md, "Layer") --------------------------------
LayerCost CostModel::layer_cost(const ParallelConfig& pi, int type, bool moe) const {
  const ModelSpec& m = workload_.model;
  const TrainingSpec& tr = workload_.training;
  const DeviceSpec& dev = cluster_.pools[static_cast<std::size_t>(type)].device;
  const DeviceCoefficients& coef = tables_.devices[static_cast<std::size_t>(type)];
  const ComputeEntry& ce = tables_.compute_entry(type, pi.tp, pi.cp, dev.name);
  const CommTable& comm = tables_.comm;
  const double beta = bytes_per_element(workload_);
  const double h = m.hidden;
  const double seq_tokens = static_cast<double>(pi.micro_batch) * tr.seq_len / pi.cp;
  const double tdev = seq_tokens / pi.tp;  // tokens held per device under SP
  const bool gated = m.mlp == MlpKind::kSwiGlu;
  const double up_factor = gated ? 2.0 : 1.0;
  const double act_keep = gated ? 3.0 : 2.0;  // FC1 outputs + activation output

  LayerCost c;
  const LayerParams params = layer_params(m, moe);

  // Attention block: compute, TP (sequence-parallel) collectives, CP ring.
  const Link tp_link = span_link(cluster_, type, pi.tp);
  const double sp_tensor = seq_tokens * h * beta;  // gathered activation of the TP group
  const double tp_block = pi.tp > 1
                              ? comm.time(Primitive::kAllGather, sp_tensor, pi.tp, tp_link) +
                                    comm.time(Primitive::kReduceScatter, sp_tensor, pi.tp, tp_link)
                              : 0.0;
  double cp_fwd = 0.0;
  double cp_bwd = 0.0;
  if (pi.cp > 1) {
    const Link cp_link = span_link(cluster_, type, pi.tp * pi.cp);
    const double kv_width =
        m.mla.enabled() ? static_cast<double>(m.num_heads) / pi.tp *
                              (m.mla.qk_nope_head_dim + m.mla.qk_rope_head_dim + m.mla.v_head_dim)
                        : 2.0 * m.num_kv_heads / pi.tp * m.head_dim;
    const double chunk = seq_tokens * kv_width * beta;
    const double ring = (pi.cp - 1) * comm.time(Primitive::kP2P, chunk, 2, cp_link);
    // The ring overlaps with core attention; only the excess is exposed.
    cp_fwd = std::max(0.0, ring - ce.core_attention_fwd);
    cp_bwd = std::max(0.0, 2.0 * ring - ce.core_attention_bwd);
  }
  double compute_fwd = ce.attention_fwd;
  double compute_bwd = ce.attention_bwd;
  double tp_comm = tp_block + cp_fwd;
  double tp_comm_bwd = tp_block + cp_bwd;
  double moe_comm = 0.0;
  int tp_blocks = 1;  // attention, + the dense MLP or the shared experts
  // Selective recompute by module (docs/costmodel.md, "Recompute by module").
  auto module = [&c](RecomputeModule mod) -> LayerCost::ModuleCost& {
    return c.modules[static_cast<std::size_t>(mod)];
  };
  // Core attention keeps its inputs (Q, K, V) as the checkpoint's: with
  // flash attention nothing else is freed. The CP ring runs again.
  module(RecomputeModule::kCoreAttn).extra_s = ce.core_attention_fwd + cp_fwd;

  // Activations kept per micro-batch (bytes), attention block. In FP8 the
  // linear layers keep their inputs as their FP8 copies, one byte each
  // (docs/costmodel.md, "FP8"): `saved` is the byte less per such element.
  const double saved = tr.precision == Precision::kFp8 ? beta - 1.0 : 0.0;
  double act_attn = 0.0;
  if (m.mla.enabled()) {
    const double a = m.num_heads;
    act_attn = tdev *
                   (2.0 * h + m.mla.q_lora_rank + m.mla.kv_lora_rank +
                    2.0 * a * (m.mla.qk_nope_head_dim + m.mla.qk_rope_head_dim) +
                    2.0 * a * m.mla.v_head_dim) *
                   beta -
               tdev * (h + a * m.mla.v_head_dim) * saved;  // the QKV and output projections' inputs
  } else {
    act_attn = tdev *
                   (2.0 * h + 2.0 * m.num_heads * m.head_dim + 2.0 * m.num_kv_heads * m.head_dim) *
                   beta -
               tdev * (h + m.num_heads * m.head_dim) * saved;
  }
  double act = act_attn;
  if (m.mla.enabled()) {
    const double a = m.num_heads;
    // The up-projected Q, K and V are dropped, the latents kept.
    module(RecomputeModule::kMlaUpProj) = {
        tdev *
            (2.0 * a * (m.mla.qk_nope_head_dim + m.mla.qk_rope_head_dim) + a * m.mla.v_head_dim) *
            beta,
        ce.mla_up_fwd};
  }
  // Norms that are modules of their own (not fused into the next linear by
  // Transformer Engine): MLA's input norm and a MoE layer's pre-MoE norm.
  const int separate_norms = (m.mla.enabled() ? 1 : 0) + (moe ? 1 : 0);
  module(RecomputeModule::kLayernorm) = {separate_norms * tdev * h * (beta - saved),
                                         separate_norms * ce.norm_fwd};

  if (!moe) {
    compute_fwd += ce.dense_mlp_fwd;
    compute_bwd += ce.dense_mlp_bwd;
    tp_comm += tp_block;
    tp_comm_bwd += tp_block;
    ++tp_blocks;
    const double mlp_act =
        tdev * (2.0 * h + act_keep * m.ffn_hidden) * beta - tdev * (h + m.ffn_hidden) * saved;
    act += mlp_act;
    // The whole MLP (its norm fused into FC1) reruns from its input.
    module(RecomputeModule::kMlp) = {mlp_act - tdev * h * beta, ce.dense_mlp_fwd + tp_block};
    c.dense_params = (params.attention + params.mlp) / pi.tp;
    c.dispatcher = tr.dispatcher;
  } else {
    const double imb = imbalance_factor(tr);
    const double k = m.top_k;
    // Routed experts: the grouped GEMMs of the E/EP local experts over the
    // token copies the device receives, at kernel efficiency eta_h, bounded
    // below by streaming the local expert weights from HBM.
    const RoutedExpertTime experts =
        routed_expert_time(m, dev, tdev, pi.ep, pi.tpe, tr.precision, tr.fp8_recipe);
    const double local_expert_bytes = static_cast<double>(m.num_experts) / pi.ep *
                                      (up_factor + 1.0) * h * m.expert_ffn_hidden / pi.tpe * beta;
    const double expert_fwd = std::max(experts.fwd * ce.expert_scale_fwd * imb / coef.eta,
                                       local_expert_bytes / coef.hbm_bandwidth) +
                              experts.fixed_fwd;
    const double expert_bwd = std::max(experts.bwd * ce.expert_scale_bwd * imb / coef.eta,
                                       2.0 * local_expert_bytes / coef.hbm_bandwidth) +
                              experts.fixed_bwd;
    compute_fwd += ce.router_fwd + expert_fwd + ce.shared_fwd;
    compute_bwd += ce.router_bwd + expert_bwd + ce.shared_bwd;
    c.mlp_fwd_s = expert_fwd + ce.shared_fwd;
    c.mlp_bwd_s = expert_bwd + ce.shared_bwd;
    // Weight gradients: the routed experts' wgrad GEMMs at the share they
    // have of the experts' backward kernels, and half the shared experts'
    // backward (its data and weight gradients are GEMMs of equal FLOPs).
    c.mlp_wgrad_s =
        (expert_bwd - experts.fixed_bwd) * experts.wgrad / experts.bwd + 0.5 * ce.shared_bwd;
    if (m.shared_expert_ffn_hidden > 0) {
      tp_comm += tp_block;  // the shared expert is a TP-sharded MLP
      tp_comm_bwd += tp_block;
      ++tp_blocks;
    }

    // Dispatch and combine over the EP group (stride TPE, span EP*TPE),
    // then gathers inside the expert-TP group.
    const Link ep_link = span_link(cluster_, type, pi.ep * pi.tpe);
    const double routed = tdev * k * h * beta;  // what one device sends
    const double a2a = 2.0 * ep_all_to_all(comm, cluster_, type, routed, pi.ep, pi.tpe);
    const double flex =
        tr.dispatcher == Dispatcher::kFlex
            ? 2.0 * deepep_exchange(comm, cluster_, type, m, tdev, h * beta, routed, pi.ep, pi.tpe)
            : 0.0;
    const double ag = comm.time(Primitive::kAllGather, tdev * pi.ep * h * beta, pi.ep, ep_link) +
                      comm.time(Primitive::kReduceScatter, tdev * pi.ep * h * beta, pi.ep, ep_link);
    Dispatcher chosen = tr.dispatcher;
    if (chosen == Dispatcher::kAuto)
      chosen = ag < a2a ? Dispatcher::kAllGather : Dispatcher::kAllToAll;
    double exchange = chosen == Dispatcher::kAllGather ? ag
                      : chosen == Dispatcher::kFlex    ? flex
                                                       : a2a;
    if (pi.tpe > 1) {
      const Link etp_link = span_link(cluster_, type, pi.tpe);
      const double gathered = routed * imb * pi.tpe;
      exchange += comm.time(Primitive::kAllGather, gathered, pi.tpe, etp_link) +
                  comm.time(Primitive::kReduceScatter, gathered, pi.tpe, etp_link);
    }
    moe_comm = exchange;
    c.dispatcher = chosen;

    const double expert_act = tdev * k * imb *
                              ((pi.tpe * h + act_keep * m.expert_ffn_hidden) * beta -
                               (pi.tpe * h + m.expert_ffn_hidden) * saved);
    const double shared_act = tdev * m.shared_expert_ffn_hidden * (act_keep * beta - saved);
    const double router_act = tdev * m.num_experts * 2.0 * kFp32;  // logits + probabilities
    const double moe_act = tdev * 2.0 * h * beta + router_act + expert_act + shared_act;
    act += moe_act;
    // The routed experts' activation runs in the expert kernel on the
    // busiest device: eta_h and the imbalance apply as to the experts.
    module(RecomputeModule::kMoeAct) = {tdev * k * imb * m.expert_ffn_hidden * (beta - saved),
                                        experts.act_fwd * ce.expert_scale_fwd * imb / coef.eta};
    const double shared_tp = m.shared_expert_ffn_hidden > 0 ? tp_block : 0.0;
    module(RecomputeModule::kSharedExperts) = {shared_act, ce.shared_fwd + shared_tp};
    // The whole MoE block reruns from the pre-MoE norm's output: router,
    // dispatch, experts, combine, shared experts.
    module(RecomputeModule::kMoe) = {
        router_act + expert_act + shared_act,
        ce.router_fwd + expert_fwd + ce.shared_fwd + moe_comm + shared_tp};
    c.dense_params = (params.attention + params.mlp) / pi.tp;
    c.expert_params = params.experts / (pi.ep * pi.tpe);
    c.moe_buffer_bytes = chosen == Dispatcher::kAllGather ? tdev * pi.ep * pi.tpe * h * beta
                                                          : 2.0 * routed * imb * pi.tpe;
  }

  // Overlaps (docs/costmodel.md, "Overlap"). --tp-comm-overlap pipelines
  // each TP block's all-gather and reduce-scatter with the block's GEMMs:
  // only what exceeds them stays exposed.
  double tp_hidden_f = 0.0;
  double tp_hidden_b = 0.0;
  if (tr.overlap.tp_comm && pi.tp > 1) {
    auto block = [&](double gemms_f, double gemms_b) {
      tp_hidden_f += std::min(tp_block, gemms_f);
      tp_hidden_b += std::min(tp_block, gemms_b);
    };
    block(ce.attention_fwd - ce.core_attention_fwd, ce.attention_bwd - ce.core_attention_bwd);
    if (!moe) block(ce.dense_mlp_fwd, ce.dense_mlp_bwd);
    if (moe && m.shared_expert_ffn_hidden > 0) block(ce.shared_fwd, ce.shared_bwd);
  }
  // --overlap-moe-expert-parallel-comm: in the steady state Megatron runs
  // one micro-batch's layer forward beside another's layer backward, in
  // four phases, each an exchange on the communication stream beside the
  // compute it does not depend on (docs/costmodel.md, "Overlap"):
  //   combine bwd  | attention fwd
  //   dispatch fwd | experts bwd (data gradients; weight gradients too
  //                  unless --delay-wgrad-compute)
  //   dispatch bwd | the delayed weight gradients, experts fwd
  //   combine fwd  | attention bwd
  // Dispatch and combine are each half the exchange. The exchange's kernels
  // hold kDispatchComputeUnits SMs meanwhile, so the compute they hide
  // behind runs that much slower.
  double ep_hidden_f = 0.0;
  double ep_hidden_b = 0.0;
  if (moe && tr.overlap.moe_ep_comm) {
    const double half = 0.5 * moe_comm;
    const double delayed = tr.overlap.delay_wgrad ? c.mlp_wgrad_s : 0.0;
    ep_hidden_f = std::min(half, c.mlp_bwd_s - delayed) + std::min(half, compute_bwd - c.mlp_bwd_s);
    ep_hidden_b = std::min(half, compute_fwd - c.mlp_fwd_s) + std::min(half, delayed + c.mlp_fwd_s);
    const double units = dev.compute_units;
    const double steal = units > kDispatchComputeUnits
                             ? kDispatchComputeUnits / (units - kDispatchComputeUnits)
                             : 0.0;
    compute_bwd += steal * ep_hidden_f;  // the forward exchange hides behind backward compute
    compute_fwd += steal * ep_hidden_b;
  }
  c.fwd_parts.compute = compute_fwd;
  c.fwd_parts.tp = tp_blocks * tp_block - tp_hidden_f;
  c.fwd_parts.cp = cp_fwd;
  c.fwd_parts.ep = moe_comm - ep_hidden_f;
  c.fwd_parts.tp_hidden = tp_hidden_f;
  c.fwd_parts.ep_hidden = ep_hidden_f;
  c.bwd_parts.compute = compute_bwd;
  c.bwd_parts.tp = tp_blocks * tp_block - tp_hidden_b;
  c.bwd_parts.cp = cp_bwd;
  c.bwd_parts.ep = moe_comm - ep_hidden_b;
  c.bwd_parts.tp_hidden = tp_hidden_b;
  c.bwd_parts.ep_hidden = ep_hidden_b;
  c.fwd_s = compute_fwd + tp_comm - tp_hidden_f + moe_comm - ep_hidden_f;
  c.bwd_s = compute_bwd + tp_comm_bwd - tp_hidden_b + moe_comm - ep_hidden_b;
  c.act_bytes = act;
  c.act_full_bytes = tdev * h * beta;  // the layer input only
  return c;
}

namespace {

// The fewest activation bytes per micro-batch a layer can keep under any
// recomputation: its input alone (full), or what the selective
// recomputation of every module leaves (`moe` subsumes two of them,
// LayerCost::selective).
double least_layer_activations(const LayerCost& l) {
  constexpr unsigned kAll = (1u << kNumRecomputeModules) - 1;
  const double saved = std::max(l.selective(kAll).saved_bytes,
                                l.selective(kAll & ~module_bit(RecomputeModule::kMoe)).saved_bytes);
  return std::min(l.act_full_bytes, l.act_bytes - saved);
}

}  // namespace

// --- Per (pi, type) --------------------------------------------------------
ParallelConfig CostModel::type_costs_key(const ParallelConfig& pi) const {
  ParallelConfig key = pi;
  key.pp = workload_.model.tied_embeddings && pi.pp == 1 ? 1 : 2;
  key.vpp = 1;
  return key;
}

TypeCosts CostModel::type_costs(const ParallelConfig& pi, int type) const {
  const ModelSpec& m = workload_.model;
  const TrainingSpec& tr = workload_.training;
  const DeviceSpec& dev = cluster_.pools[static_cast<std::size_t>(type)].device;
  const DeviceCoefficients& coef = tables_.devices[static_cast<std::size_t>(type)];
  const ComputeEntry& ce = tables_.compute_entry(type, pi.tp, pi.cp, dev.name);
  TypeCosts t;
  t.type = type;
  const Memo::LayerKey key{pi.tp, pi.cp, pi.ep, pi.tpe, pi.micro_batch, type};
  Memo& memo = Memo::of(id_);
  if (const auto it = memo.layers.find(key); it != memo.layers.end()) {
    std::tie(t.dense, t.moe) = it->second;
  } else {
    t.dense = layer_cost(pi, type, false);
    if (m.is_moe()) t.moe = layer_cost(pi, type, true);
    check_layer(t.dense, "dense", workload_, cluster_, pi, type);
    check_layer(t.moe, "MoE", workload_, cluster_, pi, type);
    memo.layers.emplace(key, std::make_pair(t.dense, t.moe));
  }
  t.embedding_fwd_s = ce.embedding_fwd;
  t.embedding_bwd_s = ce.embedding_bwd;
  t.output_fwd_s = ce.output_fwd;
  t.output_bwd_s = ce.output_bwd;
  t.mtp_fwd_s = ce.mtp_fwd;
  t.mtp_bwd_s = ce.mtp_bwd;
  t.mtp_params = m.mtp_layers > 0 ? mtp_extra_params(m) / pi.tp : 0.0;
  // The embedding and output matrices have the padded vocabulary's rows.
  const double vocab = padded_vocab(m, pi.tp);
  const double padding = (vocab - m.vocab) * m.hidden;
  t.embedding_params = (embedding_params(m) + padding) / pi.tp;
  // The last stage holds the output matrix; with tied embeddings and PP > 1
  // it holds its own copy of the embedding (Megatron).
  const double out_matrix = vocab * m.hidden;
  t.output_params = (m.tied_embeddings && pi.pp == 1 ? 0.0 : out_matrix) / pi.tp;
  // Logits of one micro-batch in bf16 plus an fp32 softmax copy.
  t.logits_bytes =
      static_cast<double>(pi.micro_batch) * tr.seq_len / pi.cp * (vocab / pi.tp) * (2.0 + kFp32);
  t.capacity_bytes = coef.capacity_bytes;
  t.overhead_bytes = coef.overhead_bytes;
  t.activation_scale = coef.activation_scale;

  // Bytes per parameter (REFERENCE.md §3.1, distributed optimizer table):
  // bf16: 2 (param) + 4 (fp32 grad) + 12/d; fp16: 2 + 2 + 16/d.
  const bool fp16 = tr.precision == Precision::kFp16;
  t.weight_bytes_per_param = 2.0;
  t.fp8_copy_bytes_per_param = tr.precision == Precision::kFp8 ? 2.0 : 0.0;
  t.grad_bytes_per_param = fp16 || tr.grad_reduce_in_bf16 ? 2.0 : 4.0;
  const double opt = fp16 ? 16.0 : 12.0;
  const double d_dense = static_cast<double>(pi.dp) * pi.cp;  // DP x CP shares dense weights
  const double d_expert = pi.edp();
  t.dense_opt_bytes_per_param = tr.distributed_optimizer ? opt / d_dense : opt;
  t.expert_opt_bytes_per_param = tr.distributed_optimizer ? opt / d_expert : opt;
  t.optimizer_s_per_param = coef.optimizer_s_per_param;
  // Megatron-FSDP gathers and reduces one layer at a time.
  t.fsdp = tr.fsdp;
  t.layer_unit_params =
      std::max(t.dense.dense_params, m.is_moe() ? t.moe.dense_params + t.moe.expert_params : 0.0);
  // The host side: the device's share of its node's host memory and its
  // host link, for activation offload and optimizer CPU offload. The
  // latter is Megatron's hybrid device optimizer (core_v0.15.0
  // megatron/core/optimizer/cpu_offloading): the host keeps the fp32
  // master, a pinned fp32 gradient and both Adam moments, 16 B per
  // offloaded parameter; each step copies the gradient down and the fp32
  // master up (4 B each way on the host link) and runs Adam on the CPU,
  // which streams 28 B per parameter (read 16, write 12) through the
  // node's host memory, shared by the node's devices.
  t.offload_fraction = tr.optimizer_offload_fraction;
  t.offload_memory_fraction = std::max(tr.optimizer_offload_fraction, tr.offload_range_to);
  if (t.offload_memory_fraction > t.offload_fraction) {
    t.dense_least_act_bytes = least_layer_activations(t.dense);
    t.moe_least_act_bytes = least_layer_activations(t.moe);
  }
  t.activation_offload_layers = tr.activation_offload_layers;
  if (t.offload_memory_fraction > 0 || t.activation_offload_layers > 0) {
    const DevicePool& pool = cluster_.pools[static_cast<std::size_t>(type)];
    t.host_capacity_bytes = dev.host_memory_bytes / pool.devices_per_node;
    t.host_link_s_per_byte = 1.0 / dev.host_link_bandwidth;
    if (t.offload_memory_fraction > 0) {
      t.host_bytes_per_param = kHostOptimizerBytes;
      t.offload_s_per_param = 2.0 * kFp32 * t.host_link_s_per_byte +
                              kCpuAdamBytes * pool.devices_per_node / dev.host_memory_bandwidth;
    }
  }

  // Gradient synchronisation. Dense grads over DP x CP (stride TP in the
  // stage's tp-cp-dp order), expert grads over EDP (stride TPE x EP in its
  // tpe-ep-edp order). With the distributed optimizer: reduce-scatter of
  // grads + all-gather of params; without: an all-reduce of grads.
  // time(n params) = latency + n * slope.
  auto affine = [&](int world, int stride, Primitive prim, double bytes_per_param) {
    SyncCost c;
    if (world <= 1) return c;
    const Memo::SyncKey sync{static_cast<double>(world), static_cast<double>(stride),
                             static_cast<double>(prim), bytes_per_param, static_cast<double>(type)};
    if (const auto it = memo.syncs.find(sync); it != memo.syncs.end()) return it->second;
    const double probe = 1e9;
    auto time = [&](double bytes) {
      return group_collective(tables_.comm, cluster_, type, prim, bytes, world, stride);
    };
    c.latency_s = time(1e-300);
    c.s_per_param = (time(probe * bytes_per_param) - c.latency_s) / probe;
    memo.syncs.emplace(sync, c);
    return c;
  };
  const Primitive reduce =
      tr.distributed_optimizer ? Primitive::kReduceScatter : Primitive::kAllReduce;
  const auto dense_world = static_cast<int>(d_dense);
  const auto expert_world = static_cast<int>(d_expert);
  const int expert_stride = pi.tpe * pi.ep;
  t.dp_reduce = affine(dense_world, pi.tp, reduce, t.grad_bytes_per_param);
  t.edp_reduce = affine(expert_world, expert_stride, reduce, t.grad_bytes_per_param);
  if (tr.distributed_optimizer) {
    t.dp_gather = affine(dense_world, pi.tp, Primitive::kAllGather, t.weight_bytes_per_param);
    t.edp_gather =
        affine(expert_world, expert_stride, Primitive::kAllGather, t.weight_bytes_per_param);
  }
  check_type_costs(t, workload_, cluster_, pi);
  return t;
}

CostModel::Boundary CostModel::boundary(const ParallelConfig& pi, int prev_type, int type) const {
  if (prev_type < 0) return {};
  const TrainingSpec& tr = workload_.training;
  // Sequence-parallel scatter/gather: each device sends its 1/TP share.
  const double bytes = static_cast<double>(pi.micro_batch) * tr.seq_len / (pi.cp * pi.tp) *
                       workload_.model.hidden * bytes_per_element(workload_);
  Link link;
  if (prev_type != type) {
    link = {LinkKind::kCrossType, prev_type, type};
  } else {
    // Adjacent stages of one type share a node only if a stage is smaller
    // than a node.
    const int per_node = cluster_.pools[static_cast<std::size_t>(type)].devices_per_node;
    link = {pi.stage_devices() < per_node ? LinkKind::kIntraNode : LinkKind::kInterNode, type,
            type};
  }
  const double t = tables_.comm.time(Primitive::kP2P, bytes, 2, link);
  if (!(std::isfinite(t) && t >= 0.0)) {
    numeric_failure(workload_, cluster_, pi, type, "the stage-boundary transfer time", t);
  }
  return {t, t};
}

namespace {

// b received `times` times per step.
CostModel::Boundary wrap_boundary(CostModel::Boundary b, int times) {
  return {times * b.fwd_s, times * b.bwd_s};
}

}  // namespace

CostModel::Boundary CostModel::stage_boundary(const ParallelConfig& pi, int prev_type,
                                              int type) const {
  Boundary b = boundary(pi, prev_type, type);
  if (pi.vpp > 1) {
    const Boundary more = wrap_boundary(b, pi.vpp - 1);
    b.fwd_s += more.fwd_s;
    b.bwd_s += more.bwd_s;
  }
  return b;
}

// --- One stage (docs/costmodel.md, "Stage") ---------------------------------
// What a stage holds: its memory, its host memory and its recomputation
// time, all that StageCost::fits() and a choice of recomputation read, and
// the sizes stage_cost's times are made of. stage_cost takes them from
// here, so a choice among recomputations (least_recompute) tells the same
// stages fit.
CostModel::StageHold CostModel::stage_hold(const ParallelConfig& pi, const TypeCosts& tc,
                                           const StageShape& s) const {
  HAPMOE_REQUIRE(s.layers >= 0 && s.moe_layers >= 0 && s.moe_layers <= s.layers,
                 "CostModel::stage_cost: inconsistent layer counts");
  StageHold h;
  h.dense_layers = s.layers - s.moe_layers;
  const int dense_layers = h.dense_layers;
  h.first = s.position == 0;
  h.last = s.position == pi.pp - 1;
  const bool first = h.first;
  const bool last = h.last;
  // Multi-token prediction (docs/costmodel.md, "Multi-token prediction"):
  // each depth runs a layer of the model's last layer's kind, its
  // projection and another output pass on the last stage.
  h.mtp = last ? workload_.model.mtp_layers : 0;
  const int mtp = h.mtp;
  h.mtp_layer = workload_.model.is_moe_layer(workload_.model.num_layers - 1) ? &tc.moe : &tc.dense;
  const LayerCost& mtp_layer = *h.mtp_layer;
  // Activations without recomputation (the MTP layers are not recomputed).
  h.act_none = dense_layers * tc.dense.act_bytes + s.moe_layers * tc.moe.act_bytes +
               mtp * mtp_layer.act_bytes;
  // With MTP and PP > 1 the last stage also holds the embedding (the MTP
  // depths embed the shifted tokens), unless it already holds the output
  // matrix as the tied embedding's copy.
  const bool mtp_embedding = mtp > 0 && !first && !(workload_.model.tied_embeddings && pi.pp > 1);
  h.dense_params = dense_layers * tc.dense.dense_params + s.moe_layers * tc.moe.dense_params +
                   (first || mtp_embedding ? tc.embedding_params : 0.0) +
                   (last ? tc.output_params : 0.0) + mtp * (mtp_layer.dense_params + tc.mtp_params);
  h.expert_params = s.moe_layers * tc.moe.expert_params + mtp * mtp_layer.expert_params;
  const double dense_params = h.dense_params;
  const double expert_params = h.expert_params;
  const double params = dense_params + expert_params;
  // Activation offload (docs/costmodel.md, "Activation offload"): the first
  // min(K, n) layers' activations are copied to the host during the forward
  // and back before the backward (stage_cost charges what the compute does
  // not cover). They leave the device but for one layer's (the one in
  // transfer) and take host memory instead.
  double offloaded_act = 0.0;
  if (tc.activation_offload_layers > 0 && s.layers > 0) {
    const int k = std::min(tc.activation_offload_layers, s.layers);
    const int k_moe = moe_layers_in(s.first_layer, k);
    offloaded_act = (k - k_moe) * tc.dense.act_bytes + k_moe * tc.moe.act_bytes;
    h.offload_copy_bytes = offloaded_act;
    offloaded_act -= std::max(tc.dense.act_bytes, k_moe > 0 ? tc.moe.act_bytes : 0.0);
    offloaded_act = std::max(0.0, offloaded_act);
  }
  h.offloaded_act = offloaded_act;
  const int m = num_microbatches(pi);
  // Activations in flight (docs/costmodel.md, "Interleaved 1F1B"): plain
  // 1F1B keeps PP - i micro-batches at stage i; interleaved keeps
  // 2(PP - i - 1) + (v - 1)PP + 1 virtual-stage micro-batches, each 1/v of
  // the stage's layers (Megatron's warm-up count in schedules.py).
  const int chunks =
      pi.vpp > 1 ? 2 * (pi.pp - s.position - 1) + (pi.vpp - 1) * pi.pp + 1 : pi.pp - s.position;
  h.in_flight = std::max(1, std::min(chunks, m * pi.vpp));
  const double layer_params = dense_layers * tc.dense.dense_params +
                              s.moe_layers * (tc.moe.dense_params + tc.moe.expert_params) +
                              mtp * (mtp_layer.dense_params + mtp_layer.expert_params);
  MemoryBreakdown& mem = h.memory;
  mem.weights = params * tc.weight_bytes_per_param + layer_params * tc.fp8_copy_bytes_per_param;
  mem.gradients = params * tc.grad_bytes_per_param;
  if (tc.fsdp != Fsdp::kOff) {
    // Each group's shard, plus the layers in flight unsharded: one
    // gradient being reduced; with sharded parameters the layer computing
    // and the next, prefetched.
    const double sharded =
        dense_params / (static_cast<double>(pi.dp) * pi.cp) + expert_params / pi.edp();
    mem.gradients = (sharded + tc.layer_unit_params) * tc.grad_bytes_per_param;
    if (tc.fsdp == Fsdp::kOptimGradsParams) {
      mem.weights = (sharded + 2.0 * tc.layer_unit_params) * tc.weight_bytes_per_param +
                    layer_params * tc.fp8_copy_bytes_per_param;
    }
  }
  mem.optimizer =
      (1.0 - tc.offload_memory_fraction) *
      (dense_params * tc.dense_opt_bytes_per_param + expert_params * tc.expert_opt_bytes_per_param);
  double buffers = s.moe_layers > 0 ? tc.moe.moe_buffer_bytes : 0.0;
  if (last) buffers = std::max(buffers, tc.logits_bytes);
  mem.moe_buffers = buffers;
  mem.overhead = tc.overhead_bytes;
  h.shard = workload_.training.distributed_optimizer
                ? dense_params / (static_cast<double>(pi.dp) * pi.cp) + expert_params / pi.edp()
                : params;
  h.host_bytes = h.shard * tc.offload_fraction * tc.host_bytes_per_param +
                 offloaded_act * h.in_flight / pi.vpp * tc.activation_scale;
  recompute_hold(pi, tc, s, h);
  return h;
}

void CostModel::recompute_hold(const ParallelConfig& pi, const TypeCosts& tc, const StageShape& s,
                               StageHold& h) const {
  const int dense_layers = h.dense_layers;
  double act = h.act_none;
  h.recompute_s = 0.0;
  switch (s.recompute.kind) {
    case RecomputeKind::kNone:
      break;
    case RecomputeKind::kSelective: {
      const LayerCost::ModuleCost dense = tc.dense.selective(s.recompute.modules);
      const LayerCost::ModuleCost moe = tc.moe.selective(s.recompute.modules);
      h.recompute_s = dense_layers * dense.extra_s + s.moe_layers * moe.extra_s;
      act -= dense_layers * dense.saved_bytes + s.moe_layers * moe.saved_bytes;
      break;
    }
    case RecomputeKind::kFull: {
      HAPMOE_REQUIRE(s.recompute.layers >= 0 && s.recompute.layers <= s.layers &&
                         s.moe_in_first_recomputed <= s.recompute.layers &&
                         s.moe_in_first_recomputed <= s.moe_layers,
                     "CostModel::stage_cost: recomputed layer counts out of range");
      const int r_moe = s.moe_in_first_recomputed;
      const int r_dense = s.recompute.layers - r_moe;
      // A fully recomputed layer reruns its forward (collectives included)
      // during the backward and keeps only its input.
      h.recompute_s = r_dense * tc.dense.fwd_s + r_moe * tc.moe.fwd_s;
      act -= r_dense * (tc.dense.act_bytes - tc.dense.act_full_bytes) +
             r_moe * (tc.moe.act_bytes - tc.moe.act_full_bytes);
      break;
    }
  }
  h.act = act;
  h.memory.activations = (act - h.offloaded_act) * h.in_flight / pi.vpp * tc.activation_scale;
}

StageCost CostModel::stage_cost(const ParallelConfig& pi, const TypeCosts& tc,
                                const StageShape& s) const {
  return stage_cost(pi, tc, s, stage_hold(pi, tc, s));
}

StageCost CostModel::stage_cost(const ParallelConfig& pi, const TypeCosts& tc, const StageShape& s,
                                const StageHold& h) const {
  const int dense_layers = h.dense_layers;
  const int mtp = h.mtp;
  const LayerCost& mtp_layer = *h.mtp_layer;
  const double dense_params = h.dense_params;
  const double expert_params = h.expert_params;
  StageCost c;
  c.fwd_s = dense_layers * tc.dense.fwd_s + s.moe_layers * tc.moe.fwd_s;
  c.bwd_s = dense_layers * tc.dense.bwd_s + s.moe_layers * tc.moe.bwd_s;
  c.fwd_parts = dense_layers * tc.dense.fwd_parts;
  c.fwd_parts += s.moe_layers * tc.moe.fwd_parts;
  c.bwd_parts = dense_layers * tc.dense.bwd_parts;
  c.bwd_parts += s.moe_layers * tc.moe.bwd_parts;
  if (h.first) {
    c.fwd_s += tc.embedding_fwd_s;
    c.bwd_s += tc.embedding_bwd_s;
    c.fwd_parts.compute += tc.embedding_fwd_s;
    c.bwd_parts.compute += tc.embedding_bwd_s;
  }
  if (h.last) {
    c.fwd_s += tc.output_fwd_s;
    c.bwd_s += tc.output_bwd_s;
    c.fwd_parts.compute += tc.output_fwd_s;
    c.bwd_parts.compute += tc.output_bwd_s;
  }
  if (mtp > 0) {
    const double f = mtp_layer.fwd_s + tc.mtp_fwd_s + tc.output_fwd_s;
    const double b = mtp_layer.bwd_s + tc.mtp_bwd_s + tc.output_bwd_s;
    c.fwd_s += mtp * f;
    c.bwd_s += mtp * b;
    c.fwd_parts += static_cast<double>(mtp) * mtp_layer.fwd_parts;
    c.bwd_parts += static_cast<double>(mtp) * mtp_layer.bwd_parts;
    c.fwd_parts.compute += mtp * (tc.mtp_fwd_s + tc.output_fwd_s);
    c.bwd_parts.compute += mtp * (tc.mtp_bwd_s + tc.output_bwd_s);
  }
  c.recompute_s = h.recompute_s;
  c.bwd_s += c.recompute_s;
  c.bwd_parts.recompute = c.recompute_s;
  // Megatron-FSDP (docs/costmodel.md, "Sharded data parallelism"): with
  // sharded gradients each micro-batch's backward reduce-scatters them;
  // with sharded parameters each layer's are all-gathered before its
  // forward and again before its backward. One collective per layer and
  // group, prefetched beside the compute: what the stage's compute does not
  // cover stays exposed, and never less than one layer's (the first).
  if (tc.fsdp != Fsdp::kOff && s.layers > 0) {
    auto per_layer = [&](const SyncCost& dense, const SyncCost& expert) {
      return (dense_params > 0 ? s.layers * dense.latency_s + dense_params * dense.s_per_param
                               : 0.0) +
             (expert_params > 0
                  ? s.moe_layers * expert.latency_s + expert_params * expert.s_per_param
                  : 0.0);
    };
    const double rs = per_layer(tc.dp_reduce, tc.edp_reduce);
    const double ag =
        tc.fsdp == Fsdp::kOptimGradsParams ? per_layer(tc.dp_gather, tc.edp_gather) : 0.0;
    const double exposed_f = ag > 0 ? std::max(ag / s.layers, ag - c.fwd_s) : 0.0;
    const double exposed_b = std::max((ag + rs) / s.layers, ag + rs - c.bwd_s);
    c.fwd_s += exposed_f;
    c.bwd_s += exposed_b;
    c.fwd_parts.dp = exposed_f;
    c.bwd_parts.dp = exposed_b;
  }
  // Activation offload: the copies to the host and back beside the
  // compute (stage_hold); what the compute does not cover stays exposed.
  if (tc.activation_offload_layers > 0 && s.layers > 0) {
    const double copy = h.offload_copy_bytes * tc.host_link_s_per_byte;
    const double exposed_f = std::max(0.0, copy - c.fwd_s);
    const double exposed_b = std::max(0.0, copy - c.bwd_s);
    c.fwd_s += exposed_f;
    c.bwd_s += exposed_b;
    c.fwd_parts.host = exposed_f;
    c.bwd_parts.host = exposed_b;
  }
  // The boundary is added last, so a search can add it to a cached stage
  // cost with the very same rounding (engine/hsdp.cpp).
  // Interleaved 1F1B: a micro-batch enters each of the stage's v virtual
  // stages, so the stage receives v times per step (the first stage v - 1
  // times, from the last stage, costed on its own type's link).
  // A later stage with prev_type < 0 is the search's: it adds
  // stage_boundary() itself (engine/stage_memo.h).
  const Boundary b = s.position == 0 && pi.vpp > 1
                         ? wrap_boundary(boundary(pi, tc.type, tc.type), pi.vpp - 1)
                         : stage_boundary(pi, s.prev_type, tc.type);
  c.p2p_fwd_s = b.fwd_s;
  c.p2p_bwd_s = b.bwd_s;
  c.fwd_parts.p2p = b.fwd_s;
  c.bwd_parts.p2p = b.bwd_s;
  c.fwd_s += b.fwd_s;
  c.bwd_s += b.bwd_s;
  c.in_flight = h.in_flight;
  c.memory = h.memory;
  c.capacity_bytes = tc.capacity_bytes;

  // After the last micro-batch: gradient sync, then the optimizer step on
  // the local shard.
  // With --overlap-grad-reduce the reduction of each gradient bucket
  // starts in the last micro-batch's backward as soon as the bucket is
  // ready: only the last bucket, or what exceeds that backward, is
  // exposed. --overlap-param-gather does the same for the all-gather
  // against the next iteration's first forward (docs/costmodel.md,
  // "Overlap").
  const TrainingSpec& tr = workload_.training;
  const double bucket =
      std::max(kMinBucketParams, kBucketParamsPerDpRank * static_cast<double>(pi.dp));
  auto exposed = [&](const SyncCost& dense, const SyncCost& expert, bool overlap, double step) {
    const double whole = dense.time(dense_params) + expert.time(expert_params);
    if (!overlap) return whole;
    const double last_bucket = std::max(dense.time(std::min(bucket, dense_params)),
                                        expert.time(std::min(bucket, expert_params)));
    return std::max(last_bucket, whole - step);
  };
  const double reduce_all = tc.dp_reduce.time(dense_params) + tc.edp_reduce.time(expert_params);
  const double gather_all = tc.dp_gather.time(dense_params) + tc.edp_gather.time(expert_params);
  // Megatron-FSDP reduced the gradients in each backward already; with
  // sharded parameters there is no gather after the step either.
  c.dp_gather_s = tc.fsdp == Fsdp::kOptimGradsParams
                      ? 0.0
                      : exposed(tc.dp_gather, tc.edp_gather, tr.overlap.param_gather, c.fwd_s);
  c.dp_sync_s =
      (tc.fsdp == Fsdp::kOff ? exposed(tc.dp_reduce, tc.edp_reduce, tr.overlap.grad_reduce, c.bwd_s)
                             : 0.0) +
      c.dp_gather_s;
  c.dp_hidden_s = tc.fsdp == Fsdp::kOff          ? reduce_all + gather_all - c.dp_sync_s
                  : tc.fsdp == Fsdp::kOptimGrads ? gather_all - c.dp_sync_s
                                                 : 0.0;
  // With offload the GPU steps its share and the host the rest, one after
  // the other (Megatron's overlap of the copies, --overlap-cpu-optimizer-
  // d2h-h2d, is off by default and not modelled).
  const auto step = [&](double f) {
    return (1.0 - f) * tc.optimizer_s_per_param + f * tc.offload_s_per_param;
  };
  // Over a bound's range of fractions [lo, hi], the faster end of those at
  // which the stage can fit (the step is linear in the fraction): at a
  // fraction f the stage holds at least its least memory, that of the
  // recomputation that keeps the fewest activations, and the optimizer
  // state (1 - f) O; so f >= 1 - (capacity - rest) / O. A stage that
  // does not fit at hi even so does not fit at all.
  double from = tc.offload_fraction;
  if (tc.offload_step_at_fit && tc.offload_memory_fraction > from) {
    const double opt_bytes =
        dense_params * tc.dense_opt_bytes_per_param + expert_params * tc.expert_opt_bytes_per_param;
    const double rest =
        c.memory.total() - c.memory.optimizer - c.memory.activations +
        std::min(h.act - h.offloaded_act, dense_layers * tc.dense_least_act_bytes +
                                              s.moe_layers * tc.moe_least_act_bytes +
                                              mtp * mtp_layer.act_bytes) *
            c.in_flight / pi.vpp * tc.activation_scale;
    if (opt_bytes > 0) {
      from = std::clamp(1.0 - (tc.capacity_bytes - rest) / opt_bytes, from,
                        tc.offload_memory_fraction);
    }
  }
  c.optimizer_s = h.shard * std::min(step(from), step(tc.offload_memory_fraction));
  c.host_bytes = h.host_bytes;
  c.host_capacity_bytes = tc.host_capacity_bytes;
  // Once per evaluated stage (the search memoises stages): the parts are
  // finite and non-negative (checked in type_costs), but their sums over
  // many layers can still overflow with extreme table entries. A sum of
  // non-negative terms is finite iff every term is.
  if (!std::isfinite(c.fwd_s + c.bwd_s + c.dp_sync_s + c.optimizer_s + c.memory.total())) {
    const std::string what = "a stage cost (stage " + std::to_string(s.position) + ", " +
                             std::to_string(s.layers) + " layers: forward " +
                             std::to_string(c.fwd_s) + " s, backward " + std::to_string(c.bwd_s) +
                             " s, memory " + std::to_string(c.memory.total()) + " B)";
    numeric_failure(workload_, cluster_, pi, tc.type, what.c_str(),
                    c.fwd_s + c.bwd_s + c.memory.total());
  }
  return c;
}

unsigned default_selective_modules(const TrainingSpec& t) {
  if (t.precision == Precision::kFp8 && t.fp8_recipe == Fp8Recipe::kDelayed) {
    return module_bit(RecomputeModule::kCoreAttn);
  }
  return kDefaultRecomputeModules;
}

StageShape CostModel::recomputing(StageShape shape, const Recompute& r) const {
  shape.recompute = r;
  if (r.kind == RecomputeKind::kFull) {
    shape.moe_in_first_recomputed = moe_layers_in(shape.first_layer, r.layers);
  }
  return shape;
}

bool CostModel::fits_with_recompute(const ParallelConfig& pi, const TypeCosts& tc,
                                    const StageShape& shape) const {
  StageHold held = stage_hold(pi, tc, recomputing(shape, {RecomputeKind::kNone, 0}));
  const auto fits = [&](const Recompute& r) {
    recompute_hold(pi, tc, recomputing(shape, r), held);
    return held.fits(tc);
  };
  // The candidates of least_recompute: one of them fits.
  if (const auto& setting = workload_.training.recompute) {
    return fits(stage_recompute(*setting, shape.layers));
  }
  if (tc.activation_offload_layers > 0) return fits({RecomputeKind::kNone, 0});
  return (shape.layers > 0 && fits({RecomputeKind::kFull, shape.layers})) ||
         fits({RecomputeKind::kSelective, 0, default_selective_modules(workload_.training)}) ||
         fits({RecomputeKind::kNone, 0});
}

std::optional<Recompute> CostModel::least_recompute(const ParallelConfig& pi, const TypeCosts& tc,
                                                    StageShape shape) const {
  StageHold held = stage_hold(pi, tc, recomputing(shape, {RecomputeKind::kNone, 0}));
  return least_recompute(pi, tc, shape, held);
}

std::optional<Recompute> CostModel::least_recompute(const ParallelConfig& pi, const TypeCosts& tc,
                                                    const StageShape& shape,
                                                    StageHold& held) const {
  // Candidates in order of added time: none, selective, then full
  // recomputation of r = 1..n layers (Megatron's block method recomputes
  // the first r layers of the stage). Memory falls monotonically in r, so
  // the least feasible r is found by bisection. The candidates are
  // compared on what the stage holds (stage_hold), not costed.
  // One stage_hold; each candidate changes only what recomputation does.
  const auto hold = [&](const Recompute& r) -> const StageHold& {
    recompute_hold(pi, tc, recomputing(shape, r), held);
    return held;
  };
  std::optional<Recompute> best;
  // Under a job-wide setting the stage has no choice.
  if (const auto& setting = workload_.training.recompute) {
    const Recompute r = stage_recompute(*setting, shape.layers);
    if (hold(r).fits(tc)) best = r;
    return best;
  }
  double best_time = std::numeric_limits<double>::infinity();
  auto consider = [&](const Recompute& r) {
    const StageHold& h = hold(r);
    const bool fits = h.fits(tc);
    if (fits && h.recompute_s < best_time) {
      best = r;
      best_time = h.recompute_s;
    }
    return std::pair{fits, h.memory.total()};
  };
  const auto [none_fits, none_bytes] = consider({RecomputeKind::kNone, 0});
  if (none_fits) return best;
  // Megatron-Core refuses activation offload with any recomputation.
  if (tc.activation_offload_layers > 0) return best;
  consider({RecomputeKind::kSelective, 0, default_selective_modules(workload_.training)});
  if (shape.layers == 0) return best;
  const auto [all_fit, all_bytes] = consider({RecomputeKind::kFull, shape.layers});
  if (!all_fit) return best;
  int lo = 1;
  int hi = shape.layers;  // hi fits
  // The bisection's bracket, narrowed by a guess: memory falls by the same
  // bytes per recomputed layer when the layers are alike, so the least r
  // is where the line from none to all passes the capacity. The guess is
  // checked with its neighbour; the bisection finds the same r either way
  // (memory falls monotonically in r).
  const auto fits = [&](int layers) { return hold({RecomputeKind::kFull, layers}).fits(tc); };
  const double per_layer = (none_bytes - all_bytes) / shape.layers;
  if (per_layer > 0 && shape.layers > 2) {
    const double over = none_bytes - tc.capacity_bytes;
    const int guess = std::clamp(static_cast<int>(std::ceil(over / per_layer)), 1, shape.layers);
    if (guess < shape.layers) {  // (all layers are known to fit)
      if (fits(guess)) {
        hi = guess;
        if (guess > 1 && !fits(guess - 1)) lo = guess;
      } else {
        lo = guess + 1;
      }
    }
  }
  while (lo < hi) {
    const int mid = lo + (hi - lo) / 2;
    if (fits(mid)) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  consider({RecomputeKind::kFull, hi});
  return best;
}

CostModel::RecomputeChoice CostModel::least_recompute_cost(const ParallelConfig& pi,
                                                           const TypeCosts& tc,
                                                           StageShape shape) const {
  StageHold held = stage_hold(pi, tc, recomputing(shape, {RecomputeKind::kNone, 0}));
  const std::optional<Recompute> r = least_recompute(pi, tc, shape, held);
  const StageShape chosen =
      recomputing(shape, r.value_or(Recompute{RecomputeKind::kFull, shape.layers}));
  recompute_hold(pi, tc, chosen, held);
  return {r, stage_cost(pi, tc, chosen, held)};
}

// --- Iteration (docs/costmodel.md, "Iteration") ------------------------------
IterationBreakdown iteration_latency(const std::vector<StageCost>& stages, int num_microbatches,
                                     int vpp) {
  HAPMOE_REQUIRE(!stages.empty() && num_microbatches >= 1 && vpp >= 1,
                 "iteration_latency: need at least one stage, one micro-batch and vpp >= 1");
  IterationBreakdown it;
  double bottleneck = 0.0;
  double tail = -1.0;
  for (const StageCost& s : stages) {
    const double step = s.fwd_s + s.bwd_s;
    it.edge_s += step;
    bottleneck = std::max(bottleneck, step);
    if (s.dp_sync_s + s.optimizer_s > tail) {
      tail = s.dp_sync_s + s.optimizer_s;
      it.dp_sync_s = s.dp_sync_s;
      it.dp_gather_s = s.dp_gather_s;
      it.dp_hidden_s = s.dp_hidden_s;
      it.optimizer_s = s.optimizer_s;
    }
  }
  it.middle_s = (num_microbatches - 1) * bottleneck;
  it.step_s = bottleneck;
  // Interleaving fills and drains the pipeline in steps of 1/v stage: the
  // bubble, edge - step, shrinks v-fold.
  it.edge_s = pipeline_edge(it.edge_s, bottleneck, vpp);
  return it;
}

PlanReport CostModel::evaluate(const Plan& plan) const {
  const ParallelConfig& pi = plan.parallel;
  HAPMOE_REQUIRE(static_cast<int>(plan.stages.size()) == pi.pp,
                 "CostModel::evaluate: plan has a different number of stages than PP");
  PlanReport r;
  r.plan = plan;
  r.num_microbatches = num_microbatches(pi);
  r.overlap = workload_.training.overlap;
  std::vector<TypeCosts> per_type(static_cast<std::size_t>(cluster_.num_types()));
  std::vector<bool> have(per_type.size(), false);
  std::vector<StageCost> costs;
  int layer = 0;
  double peak_sum = 0.0;
  for (int i = 0; i < pi.pp; ++i) {
    const StagePlan& sp = plan.stages[static_cast<std::size_t>(i)];
    const auto t = static_cast<std::size_t>(sp.device_type);
    if (!have[t]) {
      per_type[t] = type_costs(pi, sp.device_type);
      have[t] = true;
    }
    StageShape shape;
    shape.position = i;
    shape.first_layer = layer;
    shape.layers = sp.layers;
    shape.moe_layers = moe_layers_in(layer, sp.layers);
    shape = recomputing(shape, sp.recompute);
    shape.prev_type = i == 0 ? -1 : plan.stages[static_cast<std::size_t>(i) - 1].device_type;
    StageCost c = stage_cost(pi, per_type[t], shape);
    costs.push_back(c);
    StageReport sr;
    sr.device_type = sp.device_type;
    sr.devices = pi.stage_devices();
    sr.first_layer = layer;
    sr.layers = sp.layers;
    sr.recompute = sp.recompute;
    sr.cost = c;
    r.stages.push_back(sr);
    r.fits = r.fits && c.fits();
    peak_sum += cluster_.pools[t].device.peak_flops * pi.stage_devices();
    layer += sp.layers;
  }
  r.breakdown = iteration_latency(costs, r.num_microbatches, pi.vpp);
  r.latency_s = r.breakdown.total();
  double worst = -1.0;
  for (int i = 0; i < pi.pp; ++i) {
    const double step =
        costs[static_cast<std::size_t>(i)].fwd_s + costs[static_cast<std::size_t>(i)].bwd_s;
    if (step > worst) {
      worst = step;
      r.bottleneck_stage = i;
    }
  }
  // Stage costs are finite and non-negative by construction (the
  // TypeCosts they are made of were checked); the iteration must also take
  // time, or the throughput below would be infinite.
  if (!(std::isfinite(r.latency_s) && r.latency_s > 0.0)) {
    numeric_failure(workload_, cluster_, pi, plan.stages.front().device_type,
                    "the iteration latency", r.latency_s);
  }
  const TrainingSpec& tr = workload_.training;
  const double flops = model_flops_per_iteration(workload_);
  r.throughput_tokens_per_s = static_cast<double>(tr.global_batch) * tr.seq_len / r.latency_s;
  r.tflops_per_device = flops / r.latency_s / pi.devices() / 1e12;
  r.mfu = flops / (r.latency_s * peak_sum);
  return r;
}

}  // namespace hapmoe
