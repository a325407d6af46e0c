#include "partition/config_space.h"

#include <algorithm>
#include <numeric>
#include <tuple>

#include "costmodel/errors.h"

namespace hapmoe {

std::vector<int> divisors(int n) {
  std::vector<int> small;
  std::vector<int> large;
  for (int d = 1; static_cast<long long>(d) * d <= n; ++d) {
    if (n % d != 0) continue;
    small.push_back(d);
    if (d != n / d) large.push_back(n / d);
  }
  small.insert(small.end(), large.rbegin(), large.rend());
  return small;
}

int stage_capacity(const ClusterSpec& cluster, int type, const ParallelConfig& pi,
                   const ConstraintOptions& options) {
  const DevicePool& pool = cluster.pools[static_cast<std::size_t>(type)];
  if (!options.allow_cross_node_tp &&
      (pi.tp > pool.devices_per_node || pool.devices_per_node % pi.tp != 0)) {
    return 0;
  }
  return pool.devices() / pi.stage_devices();
}

std::vector<ParallelConfig> enumerate_configs(const Workload& w, const ClusterSpec& cluster,
                                              const SpaceOptions& options) {
  const ModelSpec& m = w.model;
  const TrainingSpec& t = w.training;
  std::vector<ParallelConfig> out;
  int max_devices = 0;
  int max_node = 0;
  for (const DevicePool& p : cluster.pools) {
    max_devices = std::max(max_devices, p.devices());
    max_node = std::max(max_node, p.devices_per_node);
  }
  const int total = cluster.total_devices();
  const int max_pp = options.max_pp > 0 ? std::min(options.max_pp, m.num_layers) : m.num_layers;

  std::vector<int> tps;
  for (int tp : divisors(std::gcd(m.num_heads, m.num_kv_heads))) {
    if (tp <= max_devices && (options.constraints.allow_cross_node_tp || tp <= max_node)) {
      tps.push_back(tp);
    }
  }
  std::vector<int> cps;
  for (int cp : divisors(t.seq_len)) {
    if (cp <= max_devices && (cp == 1 || t.seq_len % (2 * cp) == 0)) cps.push_back(cp);
  }
  if (t.global_batch % t.micro_batch != 0) return out;
  const std::vector<int> dps = divisors(t.global_batch / t.micro_batch);
  const std::vector<int> eps = m.is_moe() ? divisors(m.num_experts) : std::vector<int>{1};

  for (int pp = options.vpp > 1 ? 2 : 1; pp <= max_pp; ++pp) {
    for (int tp : tps) {
      for (int cp : cps) {
        if (static_cast<long long>(tp) * cp > max_devices) break;
        for (int ep : eps) {
          if (options.fixed_ep > 0 && ep != options.fixed_ep) continue;
          const std::size_t group = out.size();  // this (pp, tp, cp, ep)'s first
          for (int dp : dps) {
            const long long stage = static_cast<long long>(tp) * cp * dp;
            if (stage > max_devices) break;
            if (stage * pp > total) break;
            if (stage % ep != 0) continue;
            const int folded = static_cast<int>(stage / ep);
            for (int tpe : m.is_moe() ? divisors(folded) : std::vector<int>{1}) {
              if (options.fixed_tpe > 0 && tpe != options.fixed_tpe) continue;
              ParallelConfig pi{pp, tp, cp, ep, tpe, dp, t.micro_batch, options.vpp};
              if (!parallel_ok(pi, w)) continue;
              int groups = 0;
              for (int h = 0; h < cluster.num_types() && groups < pp; ++h) {
                groups += stage_capacity(cluster, h, pi, options.constraints);
              }
              if (groups >= pp) out.push_back(pi);
            }
          }
          // Canonical order: pp, tp, cp, ep, tpe, dp. The loops give every
          // degree but tpe and dp in increasing order already (divisors are
          // sorted), so sorting each (pp, tp, cp, ep) group is enough: 23 %
          // of the enumeration's instructions went to sorting all of it.
          std::sort(out.begin() + static_cast<std::ptrdiff_t>(group), out.end(),
                    [](const ParallelConfig& a, const ParallelConfig& b) {
                      return std::tie(a.tpe, a.dp) < std::tie(b.tpe, b.dp);
                    });
        }
      }
    }
  }
  return out;
}

std::vector<ParallelConfig> with_vpp(const std::vector<ParallelConfig>& known,
                                     const Workload& workload, int vpp) {
  const int micro_batch = workload.training.micro_batch;
  std::vector<ParallelConfig> out;
  out.reserve(known.size());
  for (ParallelConfig pi : known) {
    HAPMOE_REQUIRE(pi.vpp == 1 || vpp > 1,
                   "with_vpp: an interleaved Pi does not hold the plain one's");
    HAPMOE_REQUIRE(micro_batch % pi.micro_batch == 0,
                   "with_vpp: the Pi of a micro-batch that does not divide this one's");
    pi.vpp = vpp;
    pi.micro_batch = micro_batch;
    if (schedule_ok(pi, workload)) out.push_back(pi);
  }
  return out;
}

}  // namespace hapmoe
