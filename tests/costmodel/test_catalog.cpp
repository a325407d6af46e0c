// The built-in device catalog (costmodel/catalog.cpp) and the ClusterSpec
// helpers (costmodel/cluster.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "costmodel/cluster.h"
#include "costmodel/errors.h"

namespace hapmoe {
namespace {

constexpr double kMiB = 1048576.0;

struct Expected {
  const char* name;
  double tflops;
  double memory_bytes;  // what the runtime reports (catalog.cpp's sources)
  double hbm_tb_s;
  double intra_gb_s;
  double nic_gb_s;
  int per_node;
};

// REFERENCE.md §1.1, per direction, per device (MI250X per GCD); memory as
// the device's runtime reports it (nvidia-smi, rocm-smi, npu-smi, hl-smi),
// less what an idle 910B or Gaudi already holds.
const std::vector<Expected> kExpected = {
    {"A100-40GB", 312, 40960 * kMiB, 1.555, 300, 25, 8},
    {"A100-80GB", 312, 81920 * kMiB, 2.039, 300, 25, 8},
    {"H100", 989, 81559 * kMiB, 3.35, 450, 50, 8},
    {"H800", 989, 81559 * kMiB, 3.35, 200, 50, 8},
    {"H200", 989, 143771 * kMiB, 4.8, 450, 50, 8},
    {"B200", 2250, 183359 * kMiB, 8.0, 900, 50, 8},
    {"MI250X", 191.5, 68702699520.0, 1.64, 100, 25, 8},
    {"MI300X", 1307.4, 205822885888.0, 5.3, 448, 50, 8},
    {"MI325X", 1307.4, 262144 * kMiB, 6.0, 448, 50, 8},
    {"910B", 353.9, (65536 - 3411) * kMiB, 1.6, 196, 25, 8},
    {"Gaudi2", 432, (98304 - 768) * kMiB, 2.46, 262.5, 37.5, 8},
    {"Gaudi3", 1835, 130400 * kMiB, 3.67, 525, 75, 8},
};

void expect_close(double actual, double expected, const std::string& what) {
  EXPECT_NEAR(actual, expected, 1e-9 * expected) << what;
}

TEST(Catalog, HasTwelveDevicesInOrder) {
  const auto catalog = device_catalog();
  ASSERT_EQ(catalog.size(), kExpected.size());
  for (std::size_t i = 0; i < kExpected.size(); ++i) {
    EXPECT_EQ(catalog[i].name, kExpected[i].name) << "position " << i;
  }
}

TEST(Catalog, FiguresMatchTheReference) {
  for (const Expected& e : kExpected) {
    SCOPED_TRACE(e.name);
    const DeviceSpec* d = find_device(e.name);
    ASSERT_NE(d, nullptr);
    expect_close(d->peak_flops, e.tflops * 1e12, "peak_flops");
    EXPECT_EQ(d->memory_bytes, e.memory_bytes);
    expect_close(d->hbm_bandwidth, e.hbm_tb_s * 1e12, "hbm_bandwidth");
    expect_close(d->intra_node_bandwidth, e.intra_gb_s * 1e9, "intra_node_bandwidth");
    expect_close(d->inter_node_bandwidth, e.nic_gb_s * 1e9, "inter_node_bandwidth");
    EXPECT_EQ(d->devices_per_node, e.per_node);
    EXPECT_DOUBLE_EQ(d->gemm_efficiency, 0.75);
    EXPECT_DOUBLE_EQ(d->intra_node_latency, 5e-6);
    EXPECT_DOUBLE_EQ(d->inter_node_latency, 10e-6);
  }
}

TEST(Catalog, SpotChecksExactValues) {
  // The figures are stored exactly (decimal literals, no unit arithmetic).
  EXPECT_EQ(find_device("H800")->peak_flops, 989e12);
  // H100/H800 80 GB: 81,559 MiB = 79.6 GiB as nvidia-smi reports, not 74.5.
  EXPECT_EQ(find_device("H800")->memory_bytes, 85520809984.0);
  EXPECT_EQ(find_device("H800")->intra_node_bandwidth, 200e9);
  EXPECT_EQ(find_device("910B")->peak_flops, 353.9e12);
  EXPECT_EQ(find_device("910B")->memory_bytes, 62125.0 * 1048576);
  EXPECT_EQ(find_device("MI300X")->peak_flops, 1307.4e12);
  EXPECT_EQ(find_device("MI300X")->memory_bytes, 205822885888.0);
  EXPECT_EQ(find_device("MI250X")->peak_flops, 191.5e12);
  EXPECT_EQ(find_device("A100-40GB")->hbm_bandwidth, 1.555e12);
  EXPECT_EQ(find_device("B200")->memory_bytes, 183359.0 * 1048576);
  EXPECT_EQ(find_device("Gaudi2")->inter_node_bandwidth, 37.5e9);
}

// The host side for optimizer CPU offload (costmodel/catalog.cpp's sources):
// host memory per node and the host link per device and direction.
TEST(Catalog, HostSideOfEveryDevice) {
  const double tib = 1099511627776.0;
  const std::vector<std::tuple<const char*, double, double>> host = {
      {"A100-40GB", 1e12, 31.5e9}, {"A100-80GB", 2e12, 31.5e9}, {"H100", 2e12, 63e9},
      {"H800", 2e12, 63e9},        {"H200", 2e12, 63e9},        {"B200", 2e12, 63e9},
      {"MI250X", 512e9, 36e9},     {"MI300X", 1.5 * tib, 63e9}, {"MI325X", 2e12, 63e9},
      {"910B", 1e12, 31.5e9},      {"Gaudi2", 1024e9, 31.5e9},  {"Gaudi3", 1e12, 63e9},
  };
  ASSERT_EQ(host.size(), device_catalog().size());
  for (const auto& [name, memory, link] : host) {
    const DeviceSpec* d = find_device(name);
    ASSERT_NE(d, nullptr) << name;
    EXPECT_EQ(d->host_memory_bytes, memory) << name;
    EXPECT_EQ(d->host_link_bandwidth, link) << name;
    EXPECT_EQ(d->host_memory_bandwidth, kDefaultHostMemoryBandwidth) << name;
  }
}

// Dense FP8 matrix FLOP/s (costmodel/catalog.cpp's sources); 0 where the
// device has no FP8 matrix math.
TEST(Catalog, Fp8PeaksExactly) {
  const std::vector<std::pair<const char*, double>> fp8 = {
      {"A100-40GB", 0},      {"A100-80GB", 0},  {"H100", 1979e12},  {"H800", 1979e12},
      {"H200", 1979e12},     {"B200", 4500e12}, {"MI250X", 0},      {"MI300X", 2614.9e12},
      {"MI325X", 2614.9e12}, {"910B", 0},       {"Gaudi2", 865e12}, {"Gaudi3", 1835e12},
  };
  ASSERT_EQ(fp8.size(), device_catalog().size());
  for (const auto& [name, flops] : fp8) {
    ASSERT_NE(find_device(name), nullptr) << name;
    EXPECT_EQ(find_device(name)->fp8_peak_flops, flops) << name;
  }
}

TEST(Catalog, EveryEntryIsValidAndCited) {
  std::set<std::string> names;
  for (const DeviceSpec& d : device_catalog()) {
    SCOPED_TRACE(d.name);
    EXPECT_FALSE(d.source.empty());
    EXPECT_NE(d.source.find('S'), std::string::npos) << "cites no S-number: " << d.source;
    EXPECT_TRUE(names.insert(d.name).second) << "duplicate name";
    EXPECT_GT(d.peak_flops, 0);
    EXPECT_GT(d.memory_bytes, 0);
    EXPECT_GT(d.hbm_bandwidth, 0);
    EXPECT_GT(d.intra_node_bandwidth, d.inter_node_bandwidth);
    ClusterSpec one{"one", {DevicePool{d, 1, d.devices_per_node}}, {}};
    EXPECT_EQ(validate(one), "");
  }
}

TEST(Catalog, UnverifiedAndThirdPartyFiguresAreMarked) {
  EXPECT_NE(find_device("H800")->source.find("[T]"), std::string::npos);
  EXPECT_NE(find_device("910B")->source.find("[U]"), std::string::npos);
  EXPECT_NE(find_device("A100-80GB")->source.find("[U]"), std::string::npos);
  EXPECT_NE(find_device("H100")->source.find("[V]"), std::string::npos);
}

TEST(Catalog, LookupIsCaseInsensitive) {
  EXPECT_EQ(find_device("h800"), find_device("H800"));
  EXPECT_EQ(find_device("mi300x"), find_device("MI300X"));
  EXPECT_EQ(find_device("a100-80gb"), find_device("A100-80GB"));
  EXPECT_EQ(find_device("GAUDI3"), find_device("Gaudi3"));
  EXPECT_EQ(find_device("910b"), find_device("910B"));
  EXPECT_NE(find_device("H800"), nullptr);
}

TEST(Catalog, Aliases) {
  EXPECT_EQ(find_device("Ascend910B")->name, "910B");
  EXPECT_EQ(find_device("ascend-910b")->name, "910B");
  EXPECT_EQ(find_device("910B2")->name, "910B");
  EXPECT_EQ(find_device("MI250X-GCD")->name, "MI250X");
  EXPECT_EQ(find_device("gaudi-2")->name, "Gaudi2");
  EXPECT_EQ(find_device("Gaudi-3")->name, "Gaudi3");
}

TEST(Catalog, UnknownAndAmbiguousNamesGiveNull) {
  EXPECT_EQ(find_device("A100"), nullptr);  // 40 GB or 80 GB?
  EXPECT_EQ(find_device("a100"), nullptr);
  EXPECT_EQ(find_device(""), nullptr);
  EXPECT_EQ(find_device("H900"), nullptr);
  EXPECT_EQ(find_device(" H800"), nullptr);
}

// ------------------------------------------------------------ ClusterSpec

DevicePool pool_of(const char* name, int nodes, int per_node = 8) {
  return DevicePool{*find_device(name), nodes, per_node};
}

ClusterSpec two_types() {
  ClusterSpec c;
  c.name = "test";
  c.pools = {pool_of("H800", 2), pool_of("910B", 1), pool_of("MI300X", 1, 4)};
  return c;
}

TEST(Catalog, TotalDevicesSumsPools) {
  EXPECT_EQ(two_types().total_devices(), 16 + 8 + 4);
  EXPECT_EQ(ClusterSpec{}.total_devices(), 0);
}

TEST(Catalog, CrossLinkDefaultsToSlowerNic) {
  const ClusterSpec c = two_types();
  EXPECT_EQ(c.cross_bandwidth(0, 1), 25e9);  // H800 50 GB/s, 910B 25 GB/s
  EXPECT_EQ(c.cross_bandwidth(1, 0), 25e9);
  EXPECT_EQ(c.cross_bandwidth(0, 2), 50e9);
  EXPECT_EQ(c.cross_latency(0, 1), 10e-6);
}

TEST(Catalog, CrossLatencyIsTheLargerOne) {
  ClusterSpec c = two_types();
  c.pools[1].device.inter_node_latency = 30e-6;
  EXPECT_EQ(c.cross_latency(0, 1), 30e-6);
  EXPECT_EQ(c.cross_latency(1, 0), 30e-6);
  EXPECT_EQ(c.cross_latency(0, 2), 10e-6);
}

TEST(Catalog, ExplicitCrossLinkWinsInEitherOrder) {
  ClusterSpec c = two_types();
  c.cross_links = {CrossLink{2, 0, 12.5e9, 20e-6}};
  EXPECT_EQ(c.cross_bandwidth(0, 2), 12.5e9);
  EXPECT_EQ(c.cross_bandwidth(2, 0), 12.5e9);
  EXPECT_EQ(c.cross_latency(0, 2), 20e-6);
  EXPECT_EQ(c.cross_bandwidth(0, 1), 25e9);  // other pairs keep the default
  EXPECT_EQ(validate(c), "");
}

TEST(Catalog, CrossLinkMisuseIsAContractError) {
  const ClusterSpec c = two_types();
  EXPECT_THROW(c.cross_bandwidth(1, 1), ContractError);
  EXPECT_THROW(c.cross_latency(0, 0), ContractError);
  EXPECT_THROW(c.cross_bandwidth(0, 3), ContractError);
  EXPECT_THROW(c.cross_latency(-1, 0), ContractError);
}

// validate() names the field and the value.
void expect_invalid(const ClusterSpec& c, std::initializer_list<const char*> parts) {
  const std::string e = validate(c);
  ASSERT_FALSE(e.empty());
  for (const char* part : parts) EXPECT_NE(e.find(part), std::string::npos) << e;
}

TEST(Catalog, ValidateAcceptsGoodClusters) {
  EXPECT_EQ(validate(two_types()), "");
  ClusterSpec big;
  big.pools = {pool_of("H100", 65536)};  // exactly 524288 devices
  EXPECT_EQ(validate(big), "");
}

TEST(Catalog, ValidateRejectsBadPools) {
  expect_invalid(ClusterSpec{}, {"no device pools"});
  ClusterSpec c = two_types();
  c.pools[1].nodes = 0;
  expect_invalid(c, {"pools[1]", "910B", "nodes = 0"});
  c = two_types();
  c.pools[0].devices_per_node = 0;
  expect_invalid(c, {"pools[0]", "devices_per_node = 0"});
  c = two_types();
  c.pools[0].devices_per_node = 1025;
  expect_invalid(c, {"devices_per_node = 1025", "1024"});
  c = two_types();
  c.pools[2] = pool_of("H800", 1);
  expect_invalid(c, {"H800", "more than one pool"});
  c = two_types();
  c.pools = {pool_of("H100", 65537)};
  expect_invalid(c, {"524296", "at most 524288 devices"});
  c.pools = {pool_of("H100", 2147483647 / 8)};  // the sum must not overflow
  expect_invalid(c, {"at most 524288 devices"});
}

TEST(Catalog, ValidateRejectsBadDeviceFigures) {
  auto with = [](auto change) {
    ClusterSpec c = two_types();
    change(c.pools[1].device);
    return c;
  };
  expect_invalid(with([](DeviceSpec& d) { d.peak_flops = 0; }), {"pools[1]", "peak_flops = 0"});
  expect_invalid(with([](DeviceSpec& d) { d.memory_bytes = -1; }), {"memory_bytes = -1"});
  expect_invalid(with([](DeviceSpec& d) { d.hbm_bandwidth = std::nan(""); }),
                 {"hbm_bandwidth = nan"});
  expect_invalid(
      with([](DeviceSpec& d) { d.inter_node_bandwidth = std::numeric_limits<double>::infinity(); }),
      {"inter_node_bandwidth = inf"});
  expect_invalid(with([](DeviceSpec& d) { d.intra_node_bandwidth = 0; }),
                 {"intra_node_bandwidth = 0"});
  expect_invalid(with([](DeviceSpec& d) { d.intra_node_latency = -1e-6; }),
                 {"intra_node_latency = -1e-06"});
  expect_invalid(with([](DeviceSpec& d) { d.inter_node_latency = std::nan(""); }),
                 {"inter_node_latency = nan"});
  expect_invalid(with([](DeviceSpec& d) { d.gemm_efficiency = 0; }), {"gemm_efficiency = 0"});
  expect_invalid(with([](DeviceSpec& d) { d.gemm_efficiency = 1.5; }),
                 {"gemm_efficiency = 1.5", "(0, 1]"});
  expect_invalid(with([](DeviceSpec& d) { d.name.clear(); }), {"name is empty"});
  // FP8 peak: finite and at least 0 (0: no FP8).
  expect_invalid(with([](DeviceSpec& d) { d.fp8_peak_flops = -1; }),
                 {"pools[1]", "910B", "fp8_peak_flops = -1", "0 (no FP8) or at least 1e9"});
  expect_invalid(with([](DeviceSpec& d) { d.fp8_peak_flops = 1e-300; }),
                 {"fp8_peak_flops = 1e-300", "0 (no FP8) or at least 1e9"});
  expect_invalid(with([](DeviceSpec& d) { d.fp8_peak_flops = std::nan(""); }),
                 {"fp8_peak_flops = nan"});
  expect_invalid(
      with([](DeviceSpec& d) { d.fp8_peak_flops = std::numeric_limits<double>::infinity(); }),
      {"fp8_peak_flops = inf"});
  EXPECT_EQ(validate(with([](DeviceSpec& d) { d.fp8_peak_flops = 0; })), "");
  EXPECT_EQ(validate(with([](DeviceSpec& d) { d.fp8_peak_flops = 700e12; })), "");
  // Zero latency is allowed, efficiency 1 is allowed.
  EXPECT_EQ(validate(with([](DeviceSpec& d) {
              d.intra_node_latency = 0;
              d.gemm_efficiency = 1;
            })),
            "");
}

TEST(Catalog, ValidateRejectsBadCrossLinks) {
  ClusterSpec c = two_types();
  c.cross_links = {CrossLink{0, 3, 1e9, 0}};
  expect_invalid(c, {"cross_links[0]", "index 3"});
  c.cross_links = {CrossLink{1, 1, 1e9, 0}};
  expect_invalid(c, {"cross_links[0]", "itself"});
  c.cross_links = {CrossLink{0, 1, 0, 0}};
  expect_invalid(c, {"bandwidth = 0"});
  c.cross_links = {CrossLink{0, 1, 1e9, -1}};
  expect_invalid(c, {"latency = -1"});
  c.cross_links = {CrossLink{0, 1, 1e9, 0}, CrossLink{1, 0, 2e9, 0}};
  expect_invalid(c, {"cross_links[1]", "H800 - 910B", "more than one"});
}

}  // namespace
}  // namespace hapmoe
