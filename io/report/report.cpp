#include "io/report/report.h"

#include <cstdarg>
#include <cstdio>
#include <string>

#include "io/inputs/cluster_io.h"
#include "io/inputs/model_io.h"

namespace hapmoe {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string describe_cluster(const ClusterSpec& c) {
  std::string s;
  for (const DevicePool& p : c.pools) {
    if (!s.empty()) s += " + ";
    s += fmt("%s %dx%d", p.device.name.c_str(), p.nodes, p.devices_per_node);
  }
  return s;
}

// Each stage's forward and backward step of one micro-batch by part
// (StepParts), in ms.
void print_step_parts(std::ostream& out, const PlanReport& r) {
  out << "\nstep per micro-batch in ms: forward | backward; compute, TP, CP, EP (dispatch + "
         "combine), PP (p2p), recompute\n";
  out << fmt("stage %8s %7s %7s %7s %7s | %8s %7s %7s %7s %7s %9s\n", "compute", "TP", "CP", "EP",
             "PP", "compute", "TP", "CP", "EP", "PP", "recompute");
  for (std::size_t i = 0; i < r.stages.size(); ++i) {
    const StepParts& f = r.stages[i].cost.fwd_parts;
    const StepParts& b = r.stages[i].cost.bwd_parts;
    out << fmt("%5zu %8.3f %7.3f %7.3f %7.3f %7.3f | %8.3f %7.3f %7.3f %7.3f %7.3f %9.3f\n", i,
               1e3 * f.compute, 1e3 * f.tp, 1e3 * f.cp, 1e3 * f.ep, 1e3 * f.p2p, 1e3 * b.compute,
               1e3 * b.tp, 1e3 * b.cp, 1e3 * b.ep, 1e3 * b.p2p, 1e3 * b.recompute);
  }
  const Overlap& o = r.overlap;
  if (!(o.tp_comm || o.moe_ep_comm)) return;
  out << "hidden by the overlaps in ms (not in the step): forward | backward; TP "
         "(--tp-comm-overlap), EP (--overlap-moe-expert-parallel-comm)\n";
  out << fmt("stage %7s %7s | %7s %7s\n", "TP", "EP", "TP", "EP");
  for (std::size_t i = 0; i < r.stages.size(); ++i) {
    const StepParts& f = r.stages[i].cost.fwd_parts;
    const StepParts& b = r.stages[i].cost.bwd_parts;
    out << fmt("%5zu %7.3f %7.3f | %7.3f %7.3f\n", i, 1e3 * f.tp_hidden, 1e3 * f.ep_hidden,
               1e3 * b.tp_hidden, 1e3 * b.ep_hidden);
  }
}

// The overlaps the plan was costed with, by Megatron flag.
std::string overlap_list(const Overlap& o) {
  std::string s;
  auto add = [&](bool on, const char* flag) {
    if (on) s += (s.empty() ? "" : " ") + std::string(flag);
  };
  add(o.grad_reduce, "--overlap-grad-reduce");
  add(o.param_gather, "--overlap-param-gather");
  add(o.tp_comm, "--tp-comm-overlap");
  add(o.moe_ep_comm, "--overlap-moe-expert-parallel-comm");
  add(o.delay_wgrad, "--delay-wgrad-compute");
  return s.empty() ? "none (Megatron's defaults)" : s;
}

}  // namespace

std::string format_bytes(double bytes) { return fmt("%.1f GiB", bytes / kGiB); }

std::string format_seconds(double s) {
  if (s >= 1.0) return fmt("%.3f s", s);
  if (s >= 1e-3) return fmt("%.2f ms", s * 1e3);
  return fmt("%.1f us", s * 1e6);
}

std::string fmt(const char* format, ...) {
  char buffer[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buffer, sizeof buffer, format, args);
  va_end(args);
  return buffer;
}

std::string cluster_summary(const ClusterSpec& cluster) {
  return (cluster.name.empty() ? describe_cluster(cluster) : cluster.name) + " (" +
         describe_cluster(cluster) + fmt(", %d devices)", cluster.total_devices());
}

std::string format_params(double params) {
  if (params >= 1e9) return fmt("%.2fB", params / 1e9);
  if (params >= 1e6) return fmt("%.1fM", params / 1e6);
  return fmt("%.0f", params);
}

void print_model_summary(std::ostream& out, const Workload& w) {
  out << "model    " << w.model.name
      << fmt(" (%d layers, seq %d, global batch %d)\n", w.model.num_layers, w.training.seq_len,
             w.training.global_batch);
  out << "params   " << format_params(total_params(w.model)) << " total, "
      << format_params(active_params(w.model)) << " active per token\n";
}

void print_plan_report(std::ostream& out, const PlanReport& r, const Workload& w,
                       const ClusterSpec& cluster) {
  const ParallelConfig& pi = r.plan.parallel;
  print_model_summary(out, w);
  out << "cluster  " << cluster_summary(cluster) << "\n";
  out << fmt("plan     PP=%d TP=%d CP=%d EP=%d TPE=%d DP=%d", pi.pp, pi.tp, pi.cp, pi.ep, pi.tpe,
             pi.dp)
      << (pi.vpp > 1 ? fmt(", VPP=%d (interleaved 1F1B)", pi.vpp) : std::string())
      << fmt(", micro-batch %d, %d micro-batches, %d devices in use\n", pi.micro_batch,
             r.num_microbatches, pi.devices())
      << "overlaps " << overlap_list(r.overlap) << "\n\n";
  out << "iteration latency  " << format_seconds(r.latency_s) << "\n";
  out << "  edge             " << format_seconds(r.breakdown.edge_s) << "   sum of stage fwd+bwd\n";
  out << "  middle           " << format_seconds(r.breakdown.middle_s)
      << fmt("   (M-1) x bottleneck stage %d\n", r.bottleneck_stage);
  out << "  = " << r.num_microbatches << " x step " << format_seconds(r.breakdown.step_s)
      << " of stage " << r.bottleneck_stage << " + bubble "
      << format_seconds(r.breakdown.bubble_s()) << " + dp sync + optimizer\n";
  out << "  dp sync          " << format_seconds(r.breakdown.dp_sync_s)
      << (r.breakdown.dp_hidden_s > 0
              ? "   (" + format_seconds(r.breakdown.dp_hidden_s) + " more hidden by the overlaps)"
              : std::string())
      << "\n";
  out << "  optimizer        " << format_seconds(r.breakdown.optimizer_s) << "\n";
  out << fmt("throughput         %.0f tokens/s, %.1f TFLOP/s per device, MFU %.1f%%\n\n",
             r.throughput_tokens_per_s, r.tflops_per_device, r.mfu * 100.0);
  out << "stage  device      devices  layers  recompute   forward    backward   memory / "
         "capacity\n";
  for (std::size_t i = 0; i < r.stages.size(); ++i) {
    const StageReport& s = r.stages[i];
    const std::string dev = cluster.pools[static_cast<std::size_t>(s.device_type)].device.name;
    const double used = s.cost.memory.total();
    out << fmt("%5zu  %-10s  %7d  %6d  %-10s  %-9s  %-9s  %s / %s (%.0f%%)%s\n", i, dev.c_str(),
               s.devices, s.layers, to_string(s.recompute, s.layers).c_str(),
               format_seconds(s.cost.fwd_s).c_str(), format_seconds(s.cost.bwd_s).c_str(),
               format_bytes(used).c_str(), format_bytes(s.cost.capacity_bytes).c_str(),
               100.0 * used / s.cost.capacity_bytes, s.cost.fits() ? "" : "  OUT OF MEMORY");
  }
  for (std::size_t i = 0; i < r.stages.size(); ++i) {
    const StageCost& c = r.stages[i].cost;
    if (!(c.host_bytes > 0)) continue;
    out << fmt(
        "host   stage %zu: offloaded to host memory %s per device / host share %s (%.0f%%)%s\n", i,
        format_bytes(c.host_bytes).c_str(), format_bytes(c.host_capacity_bytes).c_str(),
        100.0 * c.host_bytes / c.host_capacity_bytes,
        c.host_bytes <= c.host_capacity_bytes ? "" : "  OUT OF HOST MEMORY");
  }
  for (std::size_t i = 0; i < r.stages.size(); ++i) {
    const StageCost& c = r.stages[i].cost;
    if (c.fwd_parts.dp > 0 || c.bwd_parts.dp > 0) {
      out << fmt(
          "fsdp   stage %zu: parameter gathers and gradient reduce-scatters not hidden by "
          "compute: %.3f ms forward, %.3f ms backward per micro-batch\n",
          i, 1e3 * c.fwd_parts.dp, 1e3 * c.bwd_parts.dp);
    }
    if (c.fwd_parts.host > 0 || c.bwd_parts.host > 0) {
      out << fmt(
          "host   stage %zu: activation copies to and from the host not hidden by compute: "
          "%.3f ms forward, %.3f ms backward per micro-batch\n",
          i, 1e3 * c.fwd_parts.host, 1e3 * c.bwd_parts.host);
    }
  }
  print_step_parts(out, r);
  bool warned = false;
  for (std::size_t i = 0; i < r.stages.size(); ++i) {
    const StageReport& s = r.stages[i];
    if (s.cost.fits()) continue;
    if (!warned) out << "\n";
    warned = true;
    if (s.cost.host_bytes > s.cost.host_capacity_bytes) {
      out << fmt(
          "WARNING: stage %zu's offloaded state does not fit in host memory: %s per device, its "
          "share of the node's host memory is %s (set host_memory_gb in a cluster file, or "
          "offload less: --optimizer-offload-fraction, --activation-offload-layers).\n",
          i, format_bytes(s.cost.host_bytes).c_str(),
          format_bytes(s.cost.host_capacity_bytes).c_str());
    }
    if (s.cost.memory.total() <= s.cost.capacity_bytes) continue;
    const MemoryBreakdown& m = s.cost.memory;
    out << fmt("WARNING: stage %zu does not fit in memory: needs %s, capacity %s (short by %s).\n",
               i, format_bytes(m.total()).c_str(), format_bytes(s.cost.capacity_bytes).c_str(),
               format_bytes(m.total() - s.cost.capacity_bytes).c_str());
    out << fmt(
        "         weights %s, gradients %s, optimizer %s, activations %s (%d micro-batches "
        "in flight), buffers %s, overhead %s\n",
        format_bytes(m.weights).c_str(), format_bytes(m.gradients).c_str(),
        format_bytes(m.optimizer).c_str(), format_bytes(m.activations).c_str(), s.cost.in_flight,
        format_bytes(m.moe_buffers).c_str(), format_bytes(m.overhead).c_str());
  }
}

void print_catalog(std::ostream& out) {
  out << "Devices (per device; bandwidths per direction)\n";
  out << fmt("  %-10s %10s %9s %9s %11s %11s %5s\n", "name", "TFLOP/s", "HBM GB", "HBM TB/s",
             "intra GB/s", "inter GB/s", "/node");
  for (const DeviceSpec& d : device_catalog()) {
    out << fmt("  %-10s %10.1f %9.0f %9.2f %11.1f %11.1f %5d\n", d.name.c_str(),
               d.peak_flops / 1e12, d.memory_bytes / 1e9, d.hbm_bandwidth / 1e12,
               d.intra_node_bandwidth / 1e9, d.inter_node_bandwidth / 1e9, d.devices_per_node);
  }
  out << "\nModel presets\n";
  out << fmt("  %-16s %6s %6s %6s %4s %7s %5s %8s %8s  %s\n", "name", "layers", "hidden", "heads",
             "kv", "experts", "top-k", "params", "active", "description");
  for (const ModelPreset& p : model_presets()) {
    const ModelSpec& m = p.workload.model;
    out << fmt("  %-16s %6d %6d %6d %4d %7d %5d %7.1fB %7.1fB  %s\n", p.name.c_str(), m.num_layers,
               m.hidden, m.num_heads, m.num_kv_heads, m.num_experts, m.top_k, total_params(m) / 1e9,
               active_params(m) / 1e9, p.description.c_str());
  }
  out << "\nCluster presets\n";
  for (const ClusterPreset& p : cluster_presets()) {
    out << fmt("  %-14s %5d devices  %s\n", p.name.c_str(), p.cluster.total_devices(),
               p.description.c_str());
  }
}

std::string not_proven_line(const std::string& reason, std::int64_t not_searched,
                            std::int64_t configs) {
  const std::string left = std::to_string(not_searched) + " of " + std::to_string(configs) +
                           " configurations were not searched";
  // A search plan --resume can finish (docs/archive.md, "Checkpoints of
  // one search").
  const std::string resume = " yet (plan --resume with the same options finishes it)";
  if (reason == "signal") {
    return "  NOT PROVEN OPTIMAL: SIGTERM/SIGUSR1 stopped the search; " + left + resume +
           "; the plans are the best found\n";
  }
  if (reason == "checkpoint") {
    return "  NOT PROVEN OPTIMAL: a checkpoint, written while the search ran (it went on, or "
           "was killed); " +
           left + resume + "; the plans are the best found so far\n";
  }
  return "  NOT PROVEN OPTIMAL: the " + reason + " stopped the search; " + left +
         "; the plans are the best found\n";
}

}  // namespace hapmoe
