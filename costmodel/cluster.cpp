#include "costmodel/cluster.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <utility>

#include "costmodel/errors.h"
#include "costmodel/text.h"

namespace hapmoe {

namespace {

constexpr std::int64_t kMaxDevices = 524288;
constexpr int kMaxDevicesPerNode = 1024;

std::string format_number(double v) {
  std::ostringstream out;
  out.precision(10);
  out << v;
  return out.str();
}

// "pools[1] (910B)": the prefix of every message about one pool.
std::string pool_label(int i, const DevicePool& pool) {
  return "pools[" + std::to_string(i) + "] (" + pool.device.name + ")";
}

const CrossLink* find_link(const ClusterSpec& c, int a, int b) {
  for (const CrossLink& link : c.cross_links) {
    if ((link.type_a == a && link.type_b == b) || (link.type_a == b && link.type_b == a)) {
      return &link;
    }
  }
  return nullptr;
}

void require_type_pair(const ClusterSpec& c, int a, int b, const char* function) {
  HAPMOE_REQUIRE(a >= 0 && a < c.num_types() && b >= 0 && b < c.num_types(),
                 std::string(function) + ": type index out of range (a = " + std::to_string(a) +
                     ", b = " + std::to_string(b) +
                     ", num_types = " + std::to_string(c.num_types()) + ")");
  HAPMOE_REQUIRE(
      a != b, std::string(function) +
                  ": a and b must be different device types (a = b = " + std::to_string(a) + ")");
}

// "" or a message about the first bad figure of `d`.
std::string validate_device(const DeviceSpec& d, const std::string& label) {
  if (d.name.empty()) return label + ": device name is empty";
  const std::pair<const char*, double> positive[] = {
      {"peak_flops", d.peak_flops},
      {"memory_bytes", d.memory_bytes},
      {"hbm_bandwidth", d.hbm_bandwidth},
      {"intra_node_bandwidth", d.intra_node_bandwidth},
      {"inter_node_bandwidth", d.inter_node_bandwidth},
  };
  for (const auto& [field, value] : positive) {
    if (!std::isfinite(value) || value <= 0) {
      return label + ": device " + field + " = " + format_number(value) +
             " must be positive and finite";
    }
  }
  // Floors far below any real device (1 GFLOP/s, 1 MB, 1 MB/s): a figure
  // like 1e-300 is positive and finite yet makes every time astronomically
  // large, a confident and meaningless plan (docs/costmodel.md, "Numerical
  // hygiene"). cluster JSON applies the same floors with the field named.
  const std::pair<const char*, double> floors[] = {
      {"peak_flops", 1e9},           {"memory_bytes", 1e6},         {"hbm_bandwidth", 1e6},
      {"intra_node_bandwidth", 1e6}, {"inter_node_bandwidth", 1e6},
  };
  for (std::size_t i = 0; i < std::size(floors); ++i) {
    if (positive[i].second < floors[i].second) {
      return label + ": device " + positive[i].first + " = " + format_number(positive[i].second) +
             " is implausibly small (at least " + format_number(floors[i].second) + ")";
    }
  }
  if (d.gemm_efficiency < 1e-3) {
    return label + ": device gemm_efficiency = " + format_number(d.gemm_efficiency) +
           " is implausibly small (at least 0.001)";
  }
  const std::pair<const char*, double> non_negative[] = {
      {"intra_node_latency", d.intra_node_latency},
      {"inter_node_latency", d.inter_node_latency},
      {"host_memory_bytes", d.host_memory_bytes},
      {"host_memory_bandwidth", d.host_memory_bandwidth},
      {"host_link_bandwidth", d.host_link_bandwidth},
  };
  for (const auto& [field, value] : non_negative) {
    if (!std::isfinite(value) || value < 0) {
      return label + ": device " + field + " = " + format_number(value) +
             " must be finite and at least 0";
    }
  }
  if (!(d.gemm_efficiency > 0 && d.gemm_efficiency <= 1)) {
    return label + ": device gemm_efficiency = " + format_number(d.gemm_efficiency) +
           " must be in (0, 1]";
  }
  if (!std::isfinite(d.fp8_peak_flops) || d.fp8_peak_flops < 0 ||
      (d.fp8_peak_flops > 0 && d.fp8_peak_flops < 1e9)) {
    return label + ": device fp8_peak_flops = " + format_number(d.fp8_peak_flops) +
           " must be 0 (no FP8) or at least 1e9 and finite";
  }
  if (d.compute_units < 0 || d.compute_units > kMaxComputeUnits) {
    return label + ": device compute_units = " + std::to_string(d.compute_units) +
           " must be in [0, " + std::to_string(kMaxComputeUnits) + "]";
  }
  if (!std::isfinite(d.kernel_overhead) || d.kernel_overhead < 0 ||
      d.kernel_overhead > kMaxKernelOverhead) {
    return label + ": device kernel_overhead = " + format_number(d.kernel_overhead) +
           " s must be in [0, " + format_number(kMaxKernelOverhead) + "]";
  }
  if (d.devices_per_node < 1 || d.devices_per_node > kMaxDevicesPerNode) {
    return label + ": device devices_per_node = " + std::to_string(d.devices_per_node) +
           " must be in [1, " + std::to_string(kMaxDevicesPerNode) + "]";
  }
  return "";
}

}  // namespace

int ClusterSpec::total_devices() const {
  int total = 0;
  for (const DevicePool& pool : pools) total += pool.devices();
  return total;
}

double ClusterSpec::cross_bandwidth(int a, int b) const {
  require_type_pair(*this, a, b, "ClusterSpec::cross_bandwidth");
  if (const CrossLink* link = find_link(*this, a, b)) return link->bandwidth;
  return std::min(pools[static_cast<std::size_t>(a)].device.inter_node_bandwidth,
                  pools[static_cast<std::size_t>(b)].device.inter_node_bandwidth);
}

double ClusterSpec::cross_latency(int a, int b) const {
  require_type_pair(*this, a, b, "ClusterSpec::cross_latency");
  if (const CrossLink* link = find_link(*this, a, b)) return link->latency;
  return std::max(pools[static_cast<std::size_t>(a)].device.inter_node_latency,
                  pools[static_cast<std::size_t>(b)].device.inter_node_latency);
}

std::string validate(const ClusterSpec& cluster) {
  if (cluster.pools.empty()) return "the cluster has no device pools (at least one is required)";
  // Names first: the messages below show them.
  if (auto e = check_name_text("name", cluster.name); !e.empty()) return e;
  for (std::size_t i = 0; i < cluster.pools.size(); ++i) {
    const std::string field = "pools[" + std::to_string(i) + "]: device type name";
    if (auto e = check_name_text(field, cluster.pools[i].device.name); !e.empty()) return e;
  }
  std::int64_t total = 0;
  std::set<std::string> names;
  for (int i = 0; i < cluster.num_types(); ++i) {
    const DevicePool& pool = cluster.pools[static_cast<std::size_t>(i)];
    const std::string label = pool_label(i, pool);
    if (auto e = validate_device(pool.device, label); !e.empty()) return e;
    if (!names.insert(pool.device.name).second) {
      return label + ": device type " + pool.device.name +
             " appears in more than one pool (one pool per device type)";
    }
    if (pool.nodes < 1) {
      return label + ": nodes = " + std::to_string(pool.nodes) + " must be at least 1";
    }
    if (pool.devices_per_node < 1 || pool.devices_per_node > kMaxDevicesPerNode) {
      return label + ": devices_per_node = " + std::to_string(pool.devices_per_node) +
             " must be in [1, " + std::to_string(kMaxDevicesPerNode) + "]";
    }
    total += static_cast<std::int64_t>(pool.nodes) * pool.devices_per_node;
    if (total > kMaxDevices) {
      return "the cluster has " + std::to_string(total) + " devices (up to " + label + ": " +
             std::to_string(pool.nodes) + " nodes x " + std::to_string(pool.devices_per_node) +
             "); at most " + std::to_string(kMaxDevices) + " devices are supported";
    }
  }
  std::set<std::pair<int, int>> pairs;
  for (std::size_t i = 0; i < cluster.cross_links.size(); ++i) {
    const CrossLink& link = cluster.cross_links[i];
    const std::string label = "cross_links[" + std::to_string(i) + "]";
    for (int t : {link.type_a, link.type_b}) {
      if (t < 0 || t >= cluster.num_types()) {
        return label + ": device type index " + std::to_string(t) + " does not name a pool (" +
               std::to_string(cluster.num_types()) + " pools)";
      }
    }
    if (link.type_a == link.type_b) {
      return label + ": links type " + std::to_string(link.type_a) +
             " to itself; a cross link joins two different device types";
    }
    if (!std::isfinite(link.bandwidth) || link.bandwidth <= 0) {
      return label + ": bandwidth = " + format_number(link.bandwidth) +
             " must be positive and finite";
    }
    if (link.bandwidth < 1e6) {
      return label + ": bandwidth = " + format_number(link.bandwidth) +
             " is implausibly small (at least 1e+06 B/s)";
    }
    if (!std::isfinite(link.latency) || link.latency < 0) {
      return label + ": latency = " + format_number(link.latency) +
             " must be finite and at least 0";
    }
    const auto key = std::minmax(link.type_a, link.type_b);
    if (!pairs.insert({key.first, key.second}).second) {
      return label + ": the pair " +
             cluster.pools[static_cast<std::size_t>(key.first)].device.name + " - " +
             cluster.pools[static_cast<std::size_t>(key.second)].device.name +
             " has more than one cross link";
    }
  }
  return "";
}

}  // namespace hapmoe
