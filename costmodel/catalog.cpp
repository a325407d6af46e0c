// The built-in device catalog. Every figure comes from REFERENCE.md §1
// (device table 1.1, notes N1-N7, sources S1-S20); the comment above each
// entry and its `source` field name the sources and their status:
//   [V] verified in a primary source, [T] third-party only, [U] unverified.
//
// Conventions (REFERENCE.md §1):
//   * peak_flops: dense (no 2:4 sparsity, N7) BF16 matrix FLOP/s.
//   * fp8_peak_flops: dense FP8 matrix FLOP/s, 0 where the device has no
//     FP8 matrix math (A100 [V] Ampere whitepaper: FP16/BF16/TF32/INT8 only;
//     MI250X [V] CDNA 2 whitepaper: no FP8; 910B [T]: no FP8 listed).
//     H100 SXM 1,979 (3,958 with sparsity) [V] NVIDIA H100 datasheet; H200
//     1,979 [V] NVIDIA H200 datasheet; H800 1,979 [T] (GH100 as H100); B200
//     4,500 [V] NVIDIA DGX B200 datasheet (72 PFLOPS FP8 training for 8
//     GPUs, with sparsity, halved); MI300X and MI325X 2,614.9 [V] AMD
//     datasheets; Gaudi2 865 [V] Intel Gaudi 2 whitepaper; Gaudi3 1,835
//     [V] Intel Gaudi 3 whitepaper (FP8 = BF16 on its MMEs).
//   * memory_bytes: the total the device's runtime reports (nvidia-smi,
//     rocm-smi, npu-smi, hl-smi), not the vendor's "GB" (REFERENCE.md N3),
//     less what the SMI shows used on an idle device where that is firmware
//     reserved (910B, Gaudi). H100 81,559 MiB [V], H200 143,771 MiB [V],
//     B200 183,359 MiB [V]: NVIDIA's MLPerf Training system descriptions
//     (mlcommons/training_results_v4.1, NVIDIA/systems/*.json,
//     "accelerator_memory_capacity"); H800 81,559 MiB [T] (nvidia-smi
//     pasted in a DCGM issue); A100-40GB 40,960 MiB [V] (nvidia-smi output in
//     bottlerocket-core-kit PR 834); A100-80GB 81,920 MiB [T]; MI250X
//     68,702,699,520 B per GCD [V] (ROCm rocm_smi_lib example, HPE runtime);
//     MI300X 205,822,885,888 B [T] (rocm-smi "VRAM Total Memory (B)");
//     MI325X 256 GiB [V] spec (ROCm gpu-arch-specs; runtime figure [U]);
//     910B 65,536 MiB less 3,411 used idle [T] (npu-smi, Project-HAMi/
//     HAMi-WebUI issue 47); Gaudi2 98,304 MiB less 768 used idle [T];
//     Gaudi3 130,400 MiB free of 131,072 [T] (hl-smi). The runtime reserve
//     (CUDA/ROCm context, NCCL buffers, allocator) is the cost model's
//     memory overhead (docs/costmodel.md, "Stage"), not taken off here.
//   * bandwidths: bytes per second per device and per direction (N1); vendor
//     headline NVLink/xGMI figures are bidirectional totals and are halved.
//   * intra_node_bandwidth: the per-direction bandwidth one device gets in a
//     collective (all-to-all / all-reduce) inside its node, not the
//     bandwidth of a single peer-to-peer pair (N5).
//   * inter_node_bandwidth: the scale-out NIC bandwidth of one device.
//
// Assumptions shared by every entry (not vendor figures):
//   * gemm_efficiency = 0.75: the share of peak a large BF16 GEMM achieves.
//     A planning default only; a measured profile replaces it.
//   * intra_node_latency = 5 us, inter_node_latency = 10 us per collective
//     step: round-number assumptions, neither sourced nor measured.
//   * kernel_overhead = kDefaultKernelOverhead (costmodel/cluster.h): one fit
//     over the calibration benchmark (docs/costmodel.md, "Kernel overhead").
//
// compute_units (SMs or CUs, for GEMM waves; docs/costmodel.md, "GEMM
// efficiency"): A100 108 SMs [V] (NVIDIA A100 Tensor Core GPU Architecture
// whitepaper, 2020); H100 SXM5 132 SMs [V] (NVIDIA H100 Tensor Core GPU
// Architecture whitepaper, 2022); H800 and H200 use the same GH100 SXM5
// configuration, 132 [T]; B200 148 SMs [T] (two dies of 74; no NVIDIA
// whitepaper figure found); MI250X 110 CUs per GCD [V] (AMD CDNA 2
// whitepaper: 220 per package); MI300X and MI325X 304 CUs [V] (AMD CDNA 3
// whitepaper; MI325X: same die [T]). Ascend 910B and Gaudi: 0, not known
// (no wave quantisation).
//
// Host side, for optimizer CPU offload (per node: host memory; per device:
// the host link per direction; docs/costmodel.md, "Optimizer CPU offload").
// Host memory from the vendors' MLPerf Training system descriptions
// (github.com/mlcommons/training_results_v2.1/v4.1/v5.0, <vendor>/systems/
// *.json, "host_memory_capacity"): DGX A100 80GB 2 TB, DGX H100 2.0 TB, DGX
// H200 2.0 TB, DGX B200 2.0 TB [V]; HLS-Gaudi2 1024 GB [V]; AMD MI300X
// (Supermicro AS-8125GS-TNMR2) 1.5 TiB [V]; A100-40GB 1 TB (Dell XE8545)
// [T]; Frontier (MI250X) 512 GB per node [V] (OLCF Frontier user guide).
// Not found [U], assumed: H800 2 TB (the HGX H100 chassis), MI325X 2 TB,
// 910B 1 TB, Gaudi3 1 TB. Host link per direction: PCIe Gen5 x16 63 GB/s
// [V] (NVIDIA's H200 MLPerf system: "GPU-PCIe: 504GB/s" for 8 GPUs) for
// H100/H800/H200/B200 and MI300X/MI325X (Gen5 x16 [V] ROCm mi300.md;
// MI325X [U]); PCIe Gen4 x16 31.5 GB/s (16 GT/s x 16 lanes, 128b/130b,
// derived) for A100 (Gen4 x16 [T] OEM), Gaudi2 ([V] "4x PCIe 4.0 x16" per
// node), 910B [U]; Gaudi3 Gen5 x16 [T]; MI250X 36 GB/s per GCD [V]
// (Frontier user guide, "36+36 GB/s"). Host memory bandwidth: no source,
// kDefaultHostMemoryBandwidth (costmodel/cluster.h) for every entry.
#include <algorithm>
#include <span>
#include <string>
#include <vector>

#include "costmodel/cluster.h"

namespace hapmoe {

namespace {

constexpr double kGemmEfficiency = 0.75;     // assumption, see above
constexpr double kIntraNodeLatency = 5e-6;   // s, assumption
constexpr double kInterNodeLatency = 10e-6;  // s, assumption

// One catalog entry in SI units. The figures are written as decimal
// literals (312e12, 1.555e12, ...) so that each is the exact integer the
// table gives, with no rounding from a unit conversion.
DeviceSpec device(const char* name, double peak_flops, double fp8_peak_flops, double memory_bytes,
                  double hbm_bandwidth, double intra_node_bandwidth, double inter_node_bandwidth,
                  int per_node, int compute_units, const char* source) {
  DeviceSpec d;
  d.name = name;
  d.peak_flops = peak_flops;
  d.fp8_peak_flops = fp8_peak_flops;
  d.memory_bytes = memory_bytes;
  d.hbm_bandwidth = hbm_bandwidth;
  d.intra_node_bandwidth = intra_node_bandwidth;
  d.inter_node_bandwidth = inter_node_bandwidth;
  d.devices_per_node = per_node;
  d.gemm_efficiency = kGemmEfficiency;
  d.intra_node_latency = kIntraNodeLatency;
  d.inter_node_latency = kInterNodeLatency;
  d.compute_units = compute_units;
  d.kernel_overhead = kDefaultKernelOverhead;
  d.host_memory_bandwidth = kDefaultHostMemoryBandwidth;
  d.source = source;
  return d;
}

// The host side of a catalog entry (see the comment at the top).
DeviceSpec with_host(DeviceSpec d, double host_memory_bytes, double host_link_bandwidth) {
  d.host_memory_bytes = host_memory_bytes;
  d.host_link_bandwidth = host_link_bandwidth;
  return d;
}

constexpr double kMiB = 1048576.0;
constexpr double kPcieGen4x16 = 31.5e9;  // B/s per direction, derived
constexpr double kPcieGen5x16 = 63e9;    // B/s per direction [V], see the top
constexpr double kTiB = 1099511627776.0;

std::vector<DeviceSpec> make_catalog() {
  return {
      // NVIDIA A100-40GB SXM4: 312 dense BF16 (624 sparse), 40 GB HBM2,
      // 1.555 TB/s, NVLink3 600 GB/s bidirectional = 300 per direction (N1),
      // 8 per HGX/DGX node [V] S1, S2, S3. NIC: 200 Gb/s HDR IB per GPU =
      // 25 GB/s [U] (commonly quoted, no source found).
      with_host(device("A100-40GB", 312e12, 0, 40960 * kMiB, 1.555e12, 300e9, 25e9, 8, 108,
                       "REFERENCE.md 1.1: S1, S2, S3 [V]; NIC 200 Gb/s HDR [U]"),
                1e12, kPcieGen4x16),

      // NVIDIA A100-80GB SXM4: as A100-40GB with 80 GB HBM2e at 2.039 TB/s
      // [V] S1, S2, S3. NIC 200 Gb/s HDR = 25 GB/s [U].
      with_host(device("A100-80GB", 312e12, 0, 81920 * kMiB, 2.039e12, 300e9, 25e9, 8, 108,
                       "REFERENCE.md 1.1: S1, S2, S3 [V]; NIC 200 Gb/s HDR [U]"),
                2e12, kPcieGen4x16),

      // NVIDIA H100 SXM5: 989 dense BF16 (1979 sparse, N7), 80 GB HBM3,
      // 3.35 TB/s, NVLink4 900 GB/s bidirectional = 450 per direction
      // [V] S2, S3, S4. NIC 400 Gb/s NDR ConnectX-7 per GPU = 50 GB/s [V] S5, S6.
      with_host(device("H100", 989e12, 1979e12, 81559 * kMiB, 3.35e12, 450e9, 50e9, 8, 132,
                       "REFERENCE.md 1.1: S2, S3, S4 [V]; NIC S5, S6 [V]"),
                2e12, kPcieGen5x16),

      // NVIDIA H800 SXM5: GH100 silicon as H100; 989 BF16, 80 GB, 3.35 TB/s
      // are third-party figures [T] S8, S9 (no NVIDIA datasheet found, §8).
      // NVLink cut to 400 GB/s bidirectional = 200 per direction [T] S8;
      // DeepEP measured ~160 GB/s effective intranode (N2) [V] S7.
      // NIC CX7 400 Gb/s per GPU = 50 GB/s [V] S7.
      with_host(device("H800", 989e12, 1979e12, 81559 * kMiB, 3.35e12, 200e9, 50e9, 8, 132,
                       "REFERENCE.md 1.1/N2: compute, HBM, NVLink S8, S9 [T]; NIC S7 [V]; "
                       "DeepEP measures ~160 GB/s NVLink (S7)"),
                2e12, kPcieGen5x16),

      // NVIDIA H200 SXM: 989 dense BF16, 141 GB HBM3e, 4.8 TB/s, NVLink4
      // 900 GB/s bidirectional = 450 per direction [V] S2, S3, S10.
      // NIC 400 Gb/s class = 50 GB/s [T].
      with_host(device("H200", 989e12, 1979e12, 143771 * kMiB, 4.8e12, 450e9, 50e9, 8, 132,
                       "REFERENCE.md 1.1: S2, S3 [V]; NVLink S10; NIC 400 Gb/s [T]"),
                2e12, kPcieGen5x16),

      // NVIDIA B200 (HGX/DGX, 1000 W): 2250 dense BF16, 180 GB HBM3e exposed
      // (192 physical, N3), 8.0 TB/s, NVLink5 1800 GB/s bidirectional = 900
      // per direction [V] S2, S3. NIC 400 Gb/s = 50 GB/s [T] S5.
      with_host(device("B200", 2250e12, 4500e12, 183359 * kMiB, 8.0e12, 900e9, 50e9, 8, 148,
                       "REFERENCE.md 1.1: S2, S3 [V]; NIC S5 [T]"),
                2e12, kPcieGen5x16),

      // AMD MI250X, one GCD (N4: a package is two devices): 383 BF16 and
      // 3.28 TB/s per package halved to 191.5 and 1.64, 64 GB per GCD
      // [V] S2, S11, S12. Intra-node: GCD pairs get 200 GB/s inside the
      // package and 50-100 GB/s across packages (S11); 100 GB/s is an average
      // (derived). 4 packages = 8 GCDs per node (Frontier). NIC: Slingshot
      // 200 Gb/s class = 25 GB/s per GCD [U].
      with_host(device("MI250X", 191.5e12, 0, 68702699520.0, 1.64e12, 100e9, 25e9, 8, 110,
                       "REFERENCE.md 1.1/N4: per GCD, S2, S11, S12 [V]; intra-node 100 GB/s "
                       "averaged (derived); NIC [U]"),
                512e9, 36e9),

      // AMD MI300X: 1307.4 BF16 (AMD; 1300 in S2) [T] S15, 192 GB HBM3,
      // 5.3 TB/s [V] S2, S14. xGMI 7 x 128 GB/s; read as duplex this is
      // 448 GB/s per direction all-to-all (S5, N5); one peer pair gets only
      // 64 GB/s. NIC 400 Gb/s NDR per GPU = 50 GB/s [V] S13.
      with_host(device("MI300X", 1307.4e12, 2614.9e12, 205822885888.0, 5.3e12, 448e9, 50e9, 8, 304,
                       "REFERENCE.md 1.1/N5: S2, S5, S13, S14 [V]; 1307.4 TFLOP/s S15 [T]"),
                1.5 * kTiB, kPcieGen5x16),

      // AMD MI325X: MI300X compute (1307.4 BF16) [T] S15, 256 GB HBM3E,
      // 6.0 TB/s [V] S2, same xGMI as MI300X (448 per direction, S5).
      // NIC 400 Gb/s class = 50 GB/s [U].
      with_host(device("MI325X", 1307.4e12, 2614.9e12, 262144 * kMiB, 6.0e12, 448e9, 50e9, 8, 304,
                       "REFERENCE.md 1.1: S2, S5 [V]; S15 [T]; NIC [U]"),
                2e12, kPcieGen5x16),

      // Huawei Ascend 910B (910B2 SKU): 353.9 cube BF16 (376 with vector;
      // other SKUs lower, S17 lists 280) [T] S16, 64 GB HBM2e, 1.6 TB/s
      // [T] S16, S17; 8 NPUs per Atlas 800T A2 with HCCS full mesh.
      // Intra-node: 392 GB/s aggregate is often quoted, halved for direction
      // = 196 [U]. NIC 200 GE RoCE per NPU = 25 GB/s [U].
      with_host(device("910B", 353.9e12, 0, (65536 - 3411) * kMiB, 1.6e12, 196e9, 25e9, 8, 0,
                       "REFERENCE.md 1.1: 910B2, S16, S17 [T]; HCCS 392 GB/s aggregate "
                       "halved [U]; NIC 200GE RoCE [U]"),
                1e12, kPcieGen4x16),

      // Intel Gaudi2 (HL-225): 432 BF16, 96 GB HBM2e, 2.46 TB/s [V] S18, S2.
      // Scale-up 21 x 100 GbE = 262.5 GB/s per direction (3 ports = 37.5 GB/s
      // per peer, N5); scale-out 3 x 100 GbE = 37.5 GB/s [V] S18, S5.
      with_host(device("Gaudi2", 432e12, 865e12, (98304 - 768) * kMiB, 2.46e12, 262.5e9, 37.5e9, 8,
                       0, "REFERENCE.md 1.1/N5: S18, S5, S2 [V]"),
                1024e9, kPcieGen4x16),

      // Intel Gaudi3: 1835 BF16 spec (1677 at the shipping 1600 MHz MME
      // clock, S2 [T]), 128 GB HBM2e, 3.67 TB/s [V] S18, S19. Scale-up
      // 21 x 200 GbE = 525 GB/s per direction; scale-out 3 x 200 GbE =
      // 75 GB/s per direction [V] S19 (N6).
      with_host(device("Gaudi3", 1835e12, 1835e12, 130400 * kMiB, 3.67e12, 525e9, 75e9, 8, 0,
                       "REFERENCE.md 1.1/N6: S18, S19 [V]; 1677 at shipping clock S2 [T]"),
                1e12, kPcieGen5x16),

  };
}

// Other spellings accepted by find_device. "A100" is deliberately absent: it
// is ambiguous between the 40 GB and 80 GB parts.
struct Alias {
  const char* alias;  // lower case
  const char* canonical;
};
constexpr Alias kAliases[] = {
    {"ascend910b", "910B"},   {"ascend-910b", "910B"}, {"910b2", "910B"},
    {"mi250x-gcd", "MI250X"}, {"gaudi-2", "Gaudi2"},   {"gaudi-3", "Gaudi3"},
};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) {
    return static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  });
  return s;
}

}  // namespace

std::span<const DeviceSpec> device_catalog() {
  static const std::vector<DeviceSpec> kCatalog = make_catalog();
  return kCatalog;
}

const DeviceSpec* find_device(const std::string& name) {
  std::string key = lower(name);
  for (const Alias& a : kAliases) {
    if (key == a.alias) {
      key = lower(a.canonical);
      break;
    }
  }
  for (const DeviceSpec& d : device_catalog()) {
    if (lower(d.name) == key) return &d;
  }
  return nullptr;
}

}  // namespace hapmoe
