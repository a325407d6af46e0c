// Devices and clusters: the hardware a plan runs on.
#pragma once

#include <span>
#include <string>
#include <vector>

namespace hapmoe {

// One accelerator type. Figures are per device, in SI units (bytes, B/s,
// FLOP/s); bandwidths are per direction. See costmodel/catalog.cpp for the
// built-in values and their sources.
struct DeviceSpec {
  std::string name;                   // canonical name, e.g. "H800"
  double peak_flops = 0;              // dense BF16/FP16 matrix FLOP/s
  double fp8_peak_flops = 0;          // dense FP8 matrix FLOP/s; 0: no FP8
  double memory_bytes = 0;            // HBM capacity
  double hbm_bandwidth = 0;           // B/s
  double intra_node_bandwidth = 0;    // B/s per device per direction, collectives
  double inter_node_bandwidth = 0;    // B/s per device per direction (NIC)
  int devices_per_node = 8;           // typical node size
  double gemm_efficiency = 0.75;      // achievable share of peak for GEMMs
  double intra_node_latency = 5e-6;   // s per collective step inside a node
  double inter_node_latency = 10e-6;  // s per collective step across nodes
  // Streaming multiprocessors (NVIDIA) or compute units (AMD): the tiles of
  // a GEMM run in waves over them (docs/costmodel.md, "GEMM efficiency").
  // 0 = not known: no wave quantisation.
  int compute_units = 0;
  // Seconds each kernel of a layer adds beyond its own run time: the
  // framework's host-side dispatch and launch, exposed where the host
  // cannot run ahead of the device (docs/costmodel.md, "Kernel overhead").
  double kernel_overhead = 0;
  // The host side, for optimizer CPU offload (docs/costmodel.md, "Optimizer
  // CPU offload"): host memory of one node, the host memory bandwidth of
  // one node (the CPU optimizer streams its state), and the host-device
  // link of one device per direction. 0 = not known.
  double host_memory_bytes = 0;
  double host_memory_bandwidth = 0;
  double host_link_bandwidth = 0;
  std::string source;  // where the figures come from
  bool operator==(const DeviceSpec&) const = default;
};

// The kernel overhead of every catalog device and of a cluster-file device
// that does not set one: one fit over the calibration benchmark
// (docs/costmodel.md, "Kernel overhead"), a property of the software stack
// (PyTorch + Megatron-LM + Transformer Engine), not of one device.
inline constexpr double kDefaultKernelOverhead = 43e-6;
// Validation bounds (cluster files): no device has more compute units, and
// a kernel overhead above a millisecond is a unit mistake.
inline constexpr int kMaxComputeUnits = 100000;
// The host memory bandwidth of a node when a cluster file gives none: an
// assumption (no measured figure of a CPU optimizer step was found), about
// a two-socket DDR5 server's sustained stream bandwidth.
inline constexpr double kDefaultHostMemoryBandwidth = 200e9;
inline constexpr double kMaxKernelOverhead = 1e-3;

// The built-in device catalog, in a stable order.
std::span<const DeviceSpec> device_catalog();
// Case-insensitive lookup in the catalog; nullptr if unknown.
const DeviceSpec* find_device(const std::string& name);

// A set of identical nodes of one device type.
struct DevicePool {
  DeviceSpec device;
  int nodes = 0;
  int devices_per_node = 0;
  int devices() const { return nodes * devices_per_node; }
  bool operator==(const DevicePool&) const = default;
};

// Link between two device types (each pool sits on its own nodes): the
// per-device bandwidth and the latency of one step.
struct CrossLink {
  int type_a = 0;
  int type_b = 0;
  double bandwidth = 0;  // B/s per device per direction
  double latency = 0;    // s
  bool operator==(const CrossLink&) const = default;
};

struct ClusterSpec {
  std::string name;
  std::vector<DevicePool> pools;       // one per device type, no duplicates
  std::vector<CrossLink> cross_links;  // explicit overrides, any order

  int num_types() const { return static_cast<int>(pools.size()); }
  int total_devices() const;
  // Bandwidth and latency between two different device types: an explicit
  // cross link if given, else the slower NIC of the two and the larger
  // inter-node latency.
  double cross_bandwidth(int a, int b) const;
  double cross_latency(int a, int b) const;
  bool operator==(const ClusterSpec&) const = default;
};

// "" when consistent, else a message naming the field and value.
std::string validate(const ClusterSpec& cluster);

}  // namespace hapmoe
