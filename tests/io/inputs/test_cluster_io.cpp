// Cluster inputs (io/inputs/cluster_io.cpp): presets, inline specs, cluster JSON,
// load_cluster and cluster_to_json.
#include <gtest/gtest.h>

#include <functional>

#include <cmath>
#include <initializer_list>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "costmodel/cluster.h"
#include "costmodel/errors.h"
#include "io/inputs/cluster_io.h"

namespace hapmoe {
namespace {

const std::string kData = HAPMOE_TEST_DATA;

std::string fixture(const std::string& name) { return kData + "/clusters/" + name; }

// Runs `f`, expects an InputError whose message contains every part.
template <typename F>
void expect_input_error(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no InputError; expected one mentioning " << *parts.begin();
  } catch (const InputError& e) {
    const std::string message = e.what();
    for (const std::string& part : parts) {
      EXPECT_NE(message.find(part), std::string::npos)
          << "message lacks \"" << part << "\": " << message;
    }
  }
}

void expect_json_error(const std::string& text, std::initializer_list<std::string> parts) {
  SCOPED_TRACE(text);
  expect_input_error([&] { parse_cluster_json(text, "c.json"); }, parts);
}

void expect_inline_error(const std::string& spec, std::initializer_list<std::string> parts) {
  SCOPED_TRACE(spec);
  expect_input_error([&] { parse_inline_cluster(spec); }, parts);
}

// (device, nodes, devices per node) per pool.
using Layout = std::vector<std::tuple<std::string, int, int>>;

Layout layout(const ClusterSpec& c) {
  Layout out;
  for (const DevicePool& p : c.pools) out.emplace_back(p.device.name, p.nodes, p.devices_per_node);
  return out;
}

// ------------------------------------------------------------------ presets

TEST(ClusterIo, PresetsMatchThePaperTable) {
  const std::map<std::string, Layout> expected = {
      {"paper:16-1-h", {{"H800", 2, 8}}},
      {"paper:16-2-h", {{"910B", 2, 8}}},
      {"paper:16-3-h", {{"MI300X", 2, 8}}},
      {"paper:16-1", {{"H800", 1, 8}, {"910B", 1, 8}}},
      {"paper:16-2", {{"H800", 1, 8}, {"MI300X", 1, 8}}},
      {"paper:16-3", {{"910B", 1, 8}, {"MI300X", 1, 8}}},
      {"paper:24-1", {{"H800", 1, 8}, {"910B", 2, 8}}},
      {"paper:24-2", {{"H800", 1, 8}, {"MI300X", 2, 8}}},
      {"paper:24-3", {{"910B", 2, 8}, {"MI300X", 1, 8}}},
      {"paper:32-1", {{"H800", 2, 8}, {"910B", 2, 8}}},
      {"paper:32-2", {{"H800", 2, 8}, {"MI300X", 2, 8}}},
      {"paper:32-3", {{"910B", 2, 8}, {"MI300X", 2, 8}}},
      {"paper:dense", {{"A100-80GB", 2, 8}, {"910B", 2, 8}}},
  };
  ASSERT_EQ(cluster_presets().size(), expected.size());
  for (const ClusterPreset& p : cluster_presets()) {
    SCOPED_TRACE(p.name);
    ASSERT_EQ(expected.count(p.name), 1u);
    EXPECT_EQ(layout(p.cluster), expected.at(p.name));
    EXPECT_EQ(validate(p.cluster), "");
    EXPECT_EQ(p.cluster.name, p.name);
    EXPECT_FALSE(p.description.empty());
    EXPECT_TRUE(p.cluster.cross_links.empty());
    // The symbol's first number is the device count.
    const int total = std::stoi(p.name.substr(6, 2) == "de" ? "32" : p.name.substr(6, 2));
    EXPECT_EQ(p.cluster.total_devices(), total);
    // Pools carry the catalog devices unchanged.
    for (const DevicePool& pool : p.cluster.pools) {
      EXPECT_EQ(pool.device, *find_device(pool.device.name));
    }
  }
}

TEST(ClusterIo, PresetDescriptions) {
  EXPECT_EQ(find_cluster_preset("paper:16-1")->description, "H800 (1x8) + 910B (1x8)");
  EXPECT_EQ(find_cluster_preset("paper:24-3")->description, "910B (2x8) + MI300X (1x8)");
  EXPECT_EQ(find_cluster_preset("paper:16-3-h")->description, "MI300X (2x8)");
  const std::string dense = find_cluster_preset("paper:dense")->description;
  EXPECT_NE(dense.find("A100-80GB (2x8) + 910B (2x8)"), std::string::npos) << dense;
  EXPECT_NE(dense.find("80 GB A100 is assumed"), std::string::npos) << dense;
}

TEST(ClusterIo, PresetLookupIsCaseInsensitive) {
  ASSERT_NE(find_cluster_preset("PAPER:32-2"), nullptr);
  EXPECT_EQ(find_cluster_preset("PAPER:32-2")->name, "paper:32-2");
  EXPECT_EQ(find_cluster_preset("paper:16-1-H")->name, "paper:16-1-h");
  EXPECT_EQ(find_cluster_preset("paper:64-1"), nullptr);
  EXPECT_EQ(find_cluster_preset("16-1"), nullptr);
}

TEST(ClusterIo, AllPresetsLoad) {
  for (const ClusterPreset& p : cluster_presets()) {
    SCOPED_TRACE(p.name);
    const ClusterSpec c = load_cluster(p.name);
    EXPECT_EQ(c, p.cluster);
    EXPECT_EQ(validate(c), "");
    EXPECT_EQ(c.num_types(), static_cast<int>(p.cluster.pools.size()));
  }
  EXPECT_EQ(load_cluster("Paper:24-2"), find_cluster_preset("paper:24-2")->cluster);
}

// ------------------------------------------------------------------ inline

TEST(ClusterIo, InlineCountsFillWholeNodes) {
  const ClusterSpec c = parse_inline_cluster("H800:16,910B:16");
  EXPECT_EQ(layout(c), (Layout{{"H800", 2, 8}, {"910B", 2, 8}}));
  EXPECT_EQ(c.pools[0].device, *find_device("H800"));
  EXPECT_EQ(c.total_devices(), 32);
  EXPECT_EQ(validate(c), "");
}

TEST(ClusterIo, InlineNodesTimesPerNode) {
  EXPECT_EQ(layout(parse_inline_cluster("910B:2x16")), (Layout{{"910B", 2, 16}}));
  EXPECT_EQ(layout(parse_inline_cluster("MI300X:3X4")), (Layout{{"MI300X", 3, 4}}));
}

TEST(ClusterIo, InlineSmallCountIsOnePartialNode) {
  EXPECT_EQ(layout(parse_inline_cluster("H800:4")), (Layout{{"H800", 1, 4}}));
  EXPECT_EQ(layout(parse_inline_cluster("H800:8")), (Layout{{"H800", 1, 8}}));
  EXPECT_EQ(layout(parse_inline_cluster("H800:1")), (Layout{{"H800", 1, 1}}));
}

TEST(ClusterIo, InlineToleratesWhitespaceCaseAndAliases) {
  const ClusterSpec c = parse_inline_cluster("  h800 : 8 ,  ascend910b:2 x 8 , gaudi-3:16 ");
  EXPECT_EQ(layout(c), (Layout{{"H800", 1, 8}, {"910B", 2, 8}, {"Gaudi3", 2, 8}}));
}

TEST(ClusterIo, InlineErrorsNameTheItem) {
  expect_inline_error("H800:12", {"--cluster \"H800:12\"", "H800:12", "not a multiple of 8",
                                  "NODESxPER_NODE", "H800:2x6"});
  expect_inline_error("H800:13", {"H800:13", "H800:13x1"});
  expect_inline_error("H800:0", {"H800:0: device count must be at least 1"});
  expect_inline_error("H800:-1", {"H800:-1: device count must be at least 1"});
  expect_inline_error("H800:abc", {"H800:abc", "\"abc\" is not an integer"});
  expect_inline_error("H800:8.5", {"H800:8.5", "\"8.5\" is not an integer"});
  expect_inline_error("H800:99999999999999999999", {"is not an integer"});
  expect_inline_error("FOO:8", {"FOO:8", "unknown device type \"FOO\"", "H800", "MI300X", "910B"});
  expect_inline_error("A100:8", {"A100:8", "ambiguous", "A100-40GB or A100-80GB"});
  expect_inline_error("H800:8,H800:8", {"H800:8 and H800:8", "device type H800", "once"});
  expect_inline_error("H800:8,h800:2x8", {"H800:8 and h800:2x8"});
  expect_inline_error("", {"empty cluster spec", "TYPE:COUNT", "TYPE:NODESxPER_NODE"});
  expect_inline_error("   ", {"empty cluster spec"});
  expect_inline_error("H800", {"H800: missing ':'", "TYPE:COUNT"});
  expect_inline_error("H800:8,", {"item 2 is empty"});
  expect_inline_error(",H800:8", {"item 1 is empty"});
  expect_inline_error(":8", {":8: device type is missing"});
  expect_inline_error("H800:", {"H800:: device count is missing"});
  expect_inline_error("H800:2x", {"H800:2x: devices per node is missing"});
  expect_inline_error("H800:x8", {"H800:x8: number of nodes is missing"});
  expect_inline_error("H800:0x8", {"H800:0x8: number of nodes must be at least 1"});
  expect_inline_error("H800:2x0", {"H800:2x0: devices per node must be at least 1"});
  expect_inline_error("H800:2x2000", {"H800:2x2000", "2000", "1024"});
  expect_inline_error("H800:125000x8", {"H800:125000x8", "524288"});
  expect_inline_error("H800:1000000", {"H800:1000000", "524288"});
  expect_inline_error("H800:65536x8,910B:8", {"524296", "910B:8", "at most 524288"});
}

// ------------------------------------------------------------------ JSON fixtures

TEST(ClusterIo, JsonCustomDeviceWithBase) {
  const ClusterSpec c = load_cluster(fixture("custom-base.json"));
  EXPECT_EQ(c.name, "h800-effective");
  EXPECT_EQ(layout(c), (Layout{{"H800-eff", 2, 8}, {"910B", 2, 8}}));
  const DeviceSpec& d = c.pools[0].device;
  const DeviceSpec& h800 = *find_device("H800");
  EXPECT_EQ(d.intra_node_bandwidth, 160e9);
  EXPECT_EQ(d.gemm_efficiency, 0.6);
  EXPECT_EQ(d.peak_flops, h800.peak_flops);
  EXPECT_EQ(d.memory_bytes, h800.memory_bytes);
  EXPECT_EQ(d.inter_node_bandwidth, h800.inter_node_bandwidth);
  EXPECT_EQ(d.inter_node_latency, h800.inter_node_latency);
  EXPECT_NE(d.source.find("catalog H800"), std::string::npos) << d.source;
  EXPECT_NE(d.source.find("intra_node_bandwidth_gb_s, gemm_efficiency"), std::string::npos)
      << d.source;
  EXPECT_EQ(c.pools[1].device, *find_device("910B"));
  EXPECT_EQ(c.cross_bandwidth(0, 1), 25e9);  // min(50, 25) GB/s
}

TEST(ClusterIo, JsonCustomDeviceWithoutBase) {
  const ClusterSpec c = load_cluster(fixture("custom-device.json"));
  EXPECT_EQ(layout(c), (Layout{{"MyGPU", 4, 4}, {"H100", 1, 8}}));
  const DeviceSpec& d = c.pools[0].device;
  EXPECT_EQ(d.peak_flops, 500e12);
  EXPECT_EQ(d.memory_bytes, 96e9);
  EXPECT_EQ(d.hbm_bandwidth, 3000e9);
  EXPECT_EQ(d.intra_node_bandwidth, 300e9);
  EXPECT_EQ(d.inter_node_bandwidth, 50e9);
  EXPECT_EQ(d.devices_per_node, 4);
  EXPECT_EQ(d.gemm_efficiency, 0.7);
  EXPECT_EQ(d.intra_node_latency, 5e-6);
  EXPECT_EQ(d.inter_node_latency, 12.5e-6);
  EXPECT_EQ(d.source, "user-defined in a cluster file");
  EXPECT_EQ(c.cross_bandwidth(0, 1), 50e9);
  EXPECT_EQ(c.cross_latency(0, 1), 12.5e-6);  // the larger inter-node latency
}

TEST(ClusterIo, JsonExplicitCrossLink) {
  const ClusterSpec c = load_cluster(fixture("cross-link.json"));
  EXPECT_EQ(layout(c), (Layout{{"H800", 2, 8}, {"MI300X", 1, 8}, {"910B", 1, 8}}));
  ASSERT_EQ(c.cross_links.size(), 1u);
  EXPECT_EQ(c.cross_links[0], (CrossLink{1, 0, 12.5e9, 15e-6}));
  // Explicit link, both orders.
  EXPECT_EQ(c.cross_bandwidth(0, 1), 12.5e9);
  EXPECT_EQ(c.cross_bandwidth(1, 0), 12.5e9);
  EXPECT_EQ(c.cross_latency(0, 1), 15e-6);
  // Default: the slower NIC and the larger latency.
  EXPECT_EQ(c.cross_bandwidth(0, 2), 25e9);
  EXPECT_EQ(c.cross_bandwidth(1, 2), 25e9);
  EXPECT_EQ(c.cross_latency(1, 2), 10e-6);
}

TEST(ClusterIo, JsonDeviceShadowsCatalogEntry) {
  const std::string path = fixture("override-catalog.json");
  const ClusterSpec c = load_cluster(path);
  EXPECT_EQ(c.name, path);  // no "name": the file path
  EXPECT_EQ(layout(c), (Layout{{"H800", 1, 8}}));
  EXPECT_EQ(c.pools[0].device.memory_bytes, 75e9);
  EXPECT_EQ(c.pools[0].device.peak_flops, 989e12);
  EXPECT_EQ(c.pools[0].device.source, "measured usable HBM on our nodes");
}

TEST(ClusterIo, JsonLinkDefaultsLatencyAndAcceptsAliases) {
  const ClusterSpec c = parse_cluster_json(R"({
    "pools": [{"device": "H800", "count": 8}, {"device": "910B", "count": 8}],
    "links": [{"between": ["h800", "Ascend910B"], "bandwidth_gb_s": 10}]})",
                                           "c.json");
  ASSERT_EQ(c.cross_links.size(), 1u);
  EXPECT_EQ(c.cross_links[0], (CrossLink{0, 1, 10e9, 10e-6}));
  EXPECT_EQ(c.name, "");
}

TEST(ClusterIo, JsonCountWithDevicesPerNode) {
  const ClusterSpec c = parse_cluster_json(
      R"({"pools": [{"device": "910B", "count": 32, "devices_per_node": 16},
                    {"device": "H100", "nodes": 3}]})",
      "c.json");
  EXPECT_EQ(layout(c), (Layout{{"910B", 2, 16}, {"H100", 3, 8}}));
}

TEST(ClusterIo, JsonDocsExampleLoads) {
  const ClusterSpec c = load_cluster(fixture("docs-example.json"));
  EXPECT_EQ(layout(c), (Layout{{"H800-eff", 2, 8}, {"910B", 2, 8}, {"MyGPU", 1, 8}}));
  EXPECT_EQ(c.pools[0].device.memory_bytes, 76e9);
  EXPECT_EQ(c.pools[2].device.source, "vendor sheet rev 3");
  EXPECT_EQ(c.cross_bandwidth(0, 1), 25e9);
  EXPECT_EQ(c.cross_latency(0, 1), 15e-6);
  EXPECT_EQ(c.cross_bandwidth(0, 2), 50e9);
}

// ------------------------------------------------------------------ JSON errors

const std::string kMyGpu =
    R"("MyGPU": {"peak_tflops": 500, "memory_gb": 96, "hbm_bandwidth_gb_s": 3000,
                 "intra_node_bandwidth_gb_s": 300, "inter_node_bandwidth_gb_s": 50,
                 "devices_per_node": 8, "gemm_efficiency": 0.7,
                 "intra_node_latency_us": 5, "inter_node_latency_us": 10})";

TEST(ClusterIo, JsonUnknownKeysAtEveryLevel) {
  expect_json_error(R"({"pools": [{"device": "H800", "nodes": 1}], "nmae": "x"})",
                    {"c.json:/nmae", "unknown field"});
  expect_json_error(R"({"pools": [{"device": "H800", "nodes": 1, "gpus": 8}]})",
                    {"c.json:/pools/0/gpus", "unknown field"});
  expect_json_error(R"({"devices": {"X": {"base": "H800", "tflops": 5}},
                        "pools": [{"device": "X", "nodes": 1}]})",
                    {"c.json:/devices/X/tflops", "unknown field"});
  expect_json_error(R"({"pools": [{"device": "H800", "nodes": 1}, {"device": "910B", "nodes": 1}],
                        "links": [{"between": ["H800", "910B"], "bandwidth_gb_s": 5, "bw": 1}]})",
                    {"c.json:/links/0/bw", "unknown field"});
}

TEST(ClusterIo, JsonWrongTypes) {
  expect_json_error(R"({"pools": [{"device": "H800", "nodes": "2"}]})",
                    {"c.json:/pools/0/nodes", "must be an integer", "\"2\""});
  expect_json_error(R"({"pools": [{"device": 800, "nodes": 2}]})",
                    {"c.json:/pools/0/device", "must be a string", "800"});
  expect_json_error(R"({"name": 5, "pools": [{"device": "H800", "nodes": 2}]})",
                    {"c.json:/name", "must be a string", "5"});
  expect_json_error(R"({"pools": {"device": "H800"}})",
                    {"c.json:/pools", "must be an array", "{\"device\":\"H800\"}"});
  expect_json_error(R"({"pools": []})", {"c.json:/pools", "at least one pool", "[]"});
  expect_json_error(R"({"pools": ["H800"]})", {"c.json:/pools/0", "JSON object", "\"H800\""});
  expect_json_error(R"({"devices": ["H800"], "pools": [{"device": "H800", "nodes": 1}]})",
                    {"c.json:/devices", "JSON object", "[\"H800\"]"});
  expect_json_error(R"({"devices": {"X": 5}, "pools": [{"device": "H800", "nodes": 1}]})",
                    {"c.json:/devices/X", "JSON object", "5"});
  expect_json_error(R"({"pools": [{"device": "H800", "nodes": 1}], "links": {"a": 1}})",
                    {"c.json:/links", "must be an array", "{\"a\":1}"});
  expect_json_error(R"([1, 2])", {"c.json:/", "JSON object", "[1,2]"});
  expect_json_error(R"({"devices": {"X": {"base": "H800", "peak_tflops": "NaN"}},
                        "pools": [{"device": "X", "nodes": 1}]})",
                    {"c.json:/devices/X/peak_tflops", "must be a number", "\"NaN\""});
  expect_json_error(
      R"({"devices": {"X": {"base": "H800", "memory_gb": null, "gemm_efficiency": [1]}},
                        "pools": [{"device": "X", "nodes": 1}]})",
      {"c.json:/devices/X/gemm_efficiency", "must be a number", "[1]"});
}

TEST(ClusterIo, JsonBadIntegers) {
  expect_json_error(R"({"pools": [{"device": "H800", "nodes": 32.7}]})",
                    {"c.json:/pools/0/nodes", "must be an integer", "32.7"});
  expect_json_error(R"({"pools": [{"device": "H800", "nodes": -2}]})",
                    {"c.json:/pools/0/nodes", "out of range", "-2"});
  expect_json_error(R"({"pools": [{"device": "H800", "count": true}]})",
                    {"c.json:/pools/0/count", "must be an integer", "true"});
  expect_json_error(R"({"pools": [{"device": "H800", "nodes": 0}]})",
                    {"c.json:/pools/0/nodes", "out of range", "0"});
  expect_json_error(R"({"pools": [{"device": "H800", "count": 0}]})",
                    {"c.json:/pools/0/count", "out of range", "0"});
  expect_json_error(R"({"pools": [{"device": "H800", "nodes": 1, "devices_per_node": 0}]})",
                    {"c.json:/pools/0/devices_per_node", "out of range", "0"});
  expect_json_error(R"({"pools": [{"device": "H800", "nodes": 1, "devices_per_node": 4096}]})",
                    {"c.json:/pools/0/devices_per_node", "out of range", "4096", "1024"});
}

TEST(ClusterIo, JsonBadNumbers) {
  expect_json_error(R"({"devices": {"X": {"base": "H800", "peak_tflops": -5}},
                        "pools": [{"device": "X", "nodes": 1}]})",
                    {"c.json:/devices/X/peak_tflops", "out of range", "-5"});
  expect_json_error(R"({"devices": {"X": {"base": "H800", "memory_gb": 0}},
                        "pools": [{"device": "X", "nodes": 1}]})",
                    {"c.json:/devices/X/memory_gb", "value 0", "greater than 0"});
  expect_json_error(R"({"devices": {"X": {"base": "H800", "gemm_efficiency": 1.5}},
                        "pools": [{"device": "X", "nodes": 1}]})",
                    {"c.json:/devices/X/gemm_efficiency", "out of range", "1.5"});
  expect_json_error(R"({"devices": {"X": {"base": "H800", "inter_node_latency_us": -1}},
                        "pools": [{"device": "X", "nodes": 1}]})",
                    {"c.json:/devices/X/inter_node_latency_us", "out of range", "-1"});
  expect_json_error(R"({"devices": {"X": {"base": "H800", "hbm_bandwidth_gb_s": 1e400}},
                        "pools": [{"device": "X", "nodes": 1}]})",
                    {"c.json", "invalid JSON", "1e400"});
}

TEST(ClusterIo, JsonDuplicateKey) {
  // The pointer counts array elements, primitives and containers alike.
  expect_json_error(R"({"pools": [{"device": "H800", "nodes": 1},
                                  {"device": "910B", "nodes": 1, "nodes": 1}]})",
                    {"c.json:/pools/1/nodes", "duplicate key \"nodes\""});
  expect_json_error(R"({"links": [{"between": ["a", ["b"], {}]}, 5,
                                  {"between": ["a", "b"], "x": 1, "x": 2}]})",
                    {"c.json:/links/2/x", "duplicate key \"x\""});
  expect_json_error(R"({"devices": {"a/b": {"base": "H800", "base": "H100"}}})",
                    {"c.json:/devices/a~1b/base", "duplicate key \"base\""});
  expect_json_error(R"({"pools": [{"device": "H800", "nodes": 1, "nodes": 2}]})",
                    {"c.json", "/pools/0/nodes", "duplicate key \"nodes\""});
  expect_json_error(R"({"pools": [{"device": "H800", "nodes": 1}], "pools": []})",
                    {"c.json", "/pools", "duplicate key \"pools\""});
}

TEST(ClusterIo, JsonMissingAndUnknownDevices) {
  expect_json_error(R"({"pools": [{"nodes": 1}]})",
                    {"c.json:/pools/0/device", "required field is missing"});
  expect_json_error(R"({"pools": [{"device": "H800"}]})",
                    {"c.json:/pools/0/nodes", "required field is missing", "count"});
  expect_json_error(R"({"name": "x"})", {"c.json:/pools", "required field is missing"});
  expect_json_error(R"({"pools": [{"device": "FOO", "nodes": 1}]})",
                    {"c.json:/pools/0/device", "unknown device type \"FOO\"", "H800"});
  expect_json_error(R"({"pools": [{"device": "A100", "nodes": 1}]})",
                    {"c.json:/pools/0/device", "\"A100\"", "A100-40GB or A100-80GB"});
  expect_json_error(
      R"({"devices": {"X": {"base": "H900"}}, "pools": [{"device": "X", "nodes": 1}]})",
      {"c.json:/devices/X/base", "\"H900\"", "catalog device"});
  expect_json_error(
      R"({"devices": {"X": {"peak_tflops": 100}}, "pools": [{"device": "X", "nodes": 1}]})",
      {"c.json:/devices/X/memory_gb", "required field is missing"});
  expect_json_error(
      R"({"devices": {)" + kMyGpu + R"(}, "pools": [{"device": "YourGPU", "nodes": 1}]})",
      {"c.json:/pools/0/device", "\"YourGPU\"", "MyGPU"});
}

TEST(ClusterIo, JsonBadLinks) {
  const std::string pools =
      R"("pools": [{"device": "H800", "nodes": 1}, {"device": "MI300X", "nodes": 1}])";
  expect_json_error(
      "{" + pools + R"(, "links": [{"between": ["H800", "910B"], "bandwidth_gb_s": 5}]})",
      {"c.json:/links/0/between/1", "\"910B\"", "not the device type of any pool", "H800, MI300X"});
  expect_json_error(
      "{" + pools + R"(, "links": [{"between": ["H800", "FOO"], "bandwidth_gb_s": 5}]})",
      {"c.json:/links/0/between/1", "\"FOO\""});
  expect_json_error("{" + pools + R"(, "links": [{"between": ["H800"], "bandwidth_gb_s": 5}]})",
                    {"c.json:/links/0/between", "two device type names", "[\"H800\"]"});
  expect_json_error("{" + pools + R"(, "links": [{"between": ["H800", 3], "bandwidth_gb_s": 5}]})",
                    {"c.json:/links/0/between/1", "must be a device type name", "3"});
  expect_json_error(
      "{" + pools + R"(, "links": [{"between": ["H800", "h800"], "bandwidth_gb_s": 5}]})",
      {"c.json:/links/0/between", "itself"});
  expect_json_error(
      "{" + pools + R"(, "links": [{"between": ["H800", "MI300X"], "bandwidth_gb_s": 0}]})",
      {"c.json:/links/0/bandwidth_gb_s", "value 0", "greater than 0"});
  expect_json_error("{" + pools + R"(, "links": [{"between": ["H800", "MI300X"]}]})",
                    {"c.json:/links/0/bandwidth_gb_s", "required field is missing"});
  expect_json_error("{" + pools + R"(, "links": [
      {"between": ["H800", "MI300X"], "bandwidth_gb_s": 5},
      {"between": ["MI300X", "H800"], "bandwidth_gb_s": 6}]})",
                    {"c.json:/links/1/between", "already has a link at /links/0"});
}

TEST(ClusterIo, JsonBadPools) {
  expect_json_error(R"({"pools": [{"device": "H800", "nodes": 125000, "devices_per_node": 8}]})",
                    {"c.json:/pools/0", "125000 nodes", "1000000 devices", "at most 524288"});
  expect_json_error(R"({"pools": [{"device": "H800", "nodes": 65536},
                                  {"device": "910B", "nodes": 1}]})",
                    {"c.json:/pools/1", "524296", "at most 524288"});
  expect_json_error(R"({"pools": [{"device": "H800", "nodes": 1000000}]})",
                    {"c.json:/pools/0/nodes", "1000000", "out of range"});
  expect_json_error(R"({"pools": [{"device": "H800", "count": 12}]})",
                    {"c.json:/pools/0/count", "count 12", "\"nodes\": 2, \"devices_per_node\": 6"});
  expect_json_error(R"({"pools": [{"device": "H800", "count": 12, "devices_per_node": 8}]})",
                    {"c.json:/pools/0/count", "count 12", "multiple of devices_per_node 8"});
  expect_json_error(R"({"pools": [{"device": "H800", "count": 16, "nodes": 2}]})",
                    {"c.json:/pools/0/count", "not both"});
  expect_json_error(
      R"({"pools": [{"device": "H800", "nodes": 1}, {"device": "h800", "nodes": 1}]})",
      {"c.json:/pools/1/device", "H800", "already has a pool at /pools/0"});
  expect_json_error(R"({"devices": {)" + kMyGpu + R"(, "mygpu": {"base": "H100"}},
                        "pools": [{"device": "MyGPU", "nodes": 1}]})",
                    {"c.json:/devices/mygpu", "defined twice"});
  expect_json_error(
      R"({"devices": {"": {"base": "H100"}}, "pools": [{"device": "H100", "nodes": 1}]})",
      {"c.json:/devices/", "must not be empty"});
  expect_json_error(
      R"({"devices": {"a,b": {"base": "H100"}}, "pools": [{"device": "H100", "nodes": 1}]})",
      {"c.json:/devices/a,b", "no ',' or ':'"});
}

TEST(ClusterIo, JsonSyntaxErrorsGiveLineAndColumn) {
  expect_json_error("{\n  \"pools\": [\n    {\"device\": \"H800\", \"nodes\": 1,}\n  ]\n}",
                    {"c.json:3:", "invalid JSON"});
}

// ------------------------------------------------------------------ load_cluster

TEST(ClusterIo, LoadClusterDispatches) {
  EXPECT_EQ(load_cluster("paper:16-1"), find_cluster_preset("paper:16-1")->cluster);
  EXPECT_EQ(layout(load_cluster("H800:16,910B:16")), (Layout{{"H800", 2, 8}, {"910B", 2, 8}}));
  EXPECT_EQ(load_cluster(fixture("cross-link.json")).name, "h800-mi300x-linked");
}

TEST(ClusterIo, LoadClusterErrors) {
  expect_input_error([] { load_cluster("nonsense"); },
                     {"--cluster \"nonsense\"", "not a cluster preset", "paper:16-1",
                      "not an existing cluster JSON file", "TYPE:COUNT", "TYPE:NODESxPER_NODE"});
  expect_input_error([] { load_cluster("missing-file.json"); },
                     {"missing-file.json", "no such file"});
  expect_input_error([] { load_cluster("paper:64-1"); },
                     {"paper:64-1", "unknown cluster preset", "paper:32-3", "paper:dense"});
  expect_input_error([] { load_cluster("H800:12"); }, {"H800:12", "NODESxPER_NODE"});
  expect_input_error([] { load_cluster(""); }, {"empty cluster spec", "paper:16-1"});
  expect_input_error([] { load_cluster("h800"); },
                     {"\"h800\" is a device type, not a cluster", "H800:8 or H800:2x8"});
  expect_input_error([] { load_cluster(kData + "/clusters"); }, {"is a directory"});
}

// ------------------------------------------------------------------ round trip

void expect_round_trip(const ClusterSpec& c) {
  const std::string text = cluster_to_json(c);
  const ClusterSpec back = parse_cluster_json(text, "round-trip.json");
  EXPECT_EQ(back, c) << text;
  EXPECT_EQ(cluster_to_json(back), text);
}

TEST(ClusterIo, RoundTripEveryPreset) {
  for (const ClusterPreset& p : cluster_presets()) {
    SCOPED_TRACE(p.name);
    expect_round_trip(p.cluster);
  }
}

TEST(ClusterIo, RoundTripFixtures) {
  for (const char* name : {"custom-base.json", "custom-device.json", "cross-link.json",
                           "override-catalog.json", "docs-example.json"}) {
    SCOPED_TRACE(name);
    expect_round_trip(load_cluster(fixture(name)));
  }
}

TEST(ClusterIo, RoundTripAwkwardNumbers) {
  ClusterSpec c = parse_inline_cluster("H800:8,MI250X:2x8");
  DeviceSpec& d = c.pools[0].device;
  d.peak_flops = 987.654321e12 / 3;
  d.memory_bytes = 80.0 * 1024 * 1024 * 1024;  // 80 GiB
  d.hbm_bandwidth = 1e12 / 7;
  d.intra_node_bandwidth = (0.1 + 0.2) * 1e9;  // (0.3 B/s before the 1 MB/s floor of issue 9)
  d.gemm_efficiency = 0.1 + 0.2;
  d.intra_node_latency = 3.3e-6;
  d.inter_node_latency = 0.1e-6 * 3;
  c.cross_links = {CrossLink{1, 0, 1e9 / 3, 7.7e-6}};
  expect_round_trip(c);
}

// "fp8_peak_tflops" (docs/clusters.md): optional with or without a base;
// 0 (or absent without a base) means no FP8; a base's FP8 peak is kept
// unless overridden; it round-trips.
TEST(ClusterIo, JsonFp8PeakTflops) {
  const ClusterSpec c = parse_cluster_json(R"({"devices": {
        "Own": {"peak_tflops": 500, "fp8_peak_tflops": 1000.5, "memory_gb": 96,
                "hbm_bandwidth_gb_s": 3000, "intra_node_bandwidth_gb_s": 300,
                "inter_node_bandwidth_gb_s": 50, "devices_per_node": 8, "gemm_efficiency": 0.7,
                "intra_node_latency_us": 5, "inter_node_latency_us": 10},
        "NoFp8": {"peak_tflops": 500, "memory_gb": 96, "hbm_bandwidth_gb_s": 3000,
                  "intra_node_bandwidth_gb_s": 300, "inter_node_bandwidth_gb_s": 50,
                  "devices_per_node": 8, "gemm_efficiency": 0.7, "intra_node_latency_us": 5,
                  "inter_node_latency_us": 10},
        "Ascend-FP8": {"base": "910B", "fp8_peak_tflops": 700},
        "H100-inherited": {"base": "H100", "memory_gb": 75},
        "H100-off": {"base": "H100", "fp8_peak_tflops": 0}},
      "pools": [{"device": "Own", "nodes": 1}, {"device": "NoFp8", "nodes": 1},
                {"device": "Ascend-FP8", "nodes": 1}, {"device": "H100-inherited", "nodes": 1},
                {"device": "H100-off", "nodes": 1}]})",
                                           "c.json");
  ASSERT_EQ(c.pools.size(), 5u);
  EXPECT_EQ(c.pools[0].device.fp8_peak_flops, 1000.5e12);
  EXPECT_EQ(c.pools[1].device.fp8_peak_flops, 0.0);
  EXPECT_EQ(c.pools[2].device.fp8_peak_flops, 700e12);
  EXPECT_EQ(c.pools[2].device.peak_flops, find_device("910B")->peak_flops);
  EXPECT_NE(c.pools[2].device.source.find("fp8_peak_tflops set in a cluster file"),
            std::string::npos)
      << c.pools[2].device.source;
  EXPECT_EQ(c.pools[3].device.fp8_peak_flops, 1979e12);  // from the base
  EXPECT_EQ(c.pools[3].device.source.find("fp8_peak_tflops"), std::string::npos)
      << c.pools[3].device.source;
  EXPECT_EQ(c.pools[4].device.fp8_peak_flops, 0.0);  // FP8 turned off
  // Written as TFLOP/s and read back the same.
  const std::string text = cluster_to_json(c);
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(text);
  EXPECT_EQ(j["devices"]["Own"]["fp8_peak_tflops"], 1000.5);
  EXPECT_EQ(j["devices"]["NoFp8"]["fp8_peak_tflops"], 0.0);
  EXPECT_EQ(j["devices"]["Ascend-FP8"]["fp8_peak_tflops"], 700.0);
  EXPECT_EQ(j["devices"]["H100-inherited"]["fp8_peak_tflops"], 1979.0);
  expect_round_trip(c);
  // The catalog figures round-trip too (presets hold no FP8 device file).
  ClusterSpec awkward = parse_inline_cluster("H800:8,910B:8");
  awkward.pools[0].device.fp8_peak_flops = 1979e12 / 3;
  awkward.pools[1].device.fp8_peak_flops = 0.1e12 + 0.2e12;
  expect_round_trip(awkward);
}

TEST(ClusterIo, JsonBadFp8PeakTflops) {
  expect_json_error(R"({"devices": {"X": {"base": "H800", "fp8_peak_tflops": -5}},
                        "pools": [{"device": "X", "nodes": 1}]})",
                    {"c.json:/devices/X/fp8_peak_tflops", "out of range", "-5"});
  expect_json_error(R"({"devices": {"X": {"base": "H800", "fp8_peak_tflops": 2e6}},
                        "pools": [{"device": "X", "nodes": 1}]})",
                    {"c.json:/devices/X/fp8_peak_tflops", "out of range"});
  expect_json_error(R"({"devices": {"X": {"base": "H800", "fp8_peak_tflops": "fast"}},
                        "pools": [{"device": "X", "nodes": 1}]})",
                    {"c.json:/devices/X/fp8_peak_tflops"});
  expect_json_error(R"({"devices": {"X": {"base": "H800", "fp8_peak_tflops": "NaN"}},
                        "pools": [{"device": "X", "nodes": 1}]})",
                    {"c.json:/devices/X/fp8_peak_tflops"});
  expect_json_error(R"({"devices": {"X": {"base": "H800", "fp8_peak_tflop": 100}},
                        "pools": [{"device": "X", "nodes": 1}]})",
                    {"c.json:/devices/X/fp8_peak_tflop", "unknown"});
}

// Found while writing the tests above: "fp8_peak_tflops" has no floor
// for positive values, unlike every other device figure (docs/testing.md:
// positive device figures >= 0.001): 1e-300 is accepted and an FP8 plan
// of Mixtral-S costs 8e306 s per iteration, the confident meaningless
// plan the floors exist to prevent. 0 (no FP8) must stay accepted.
// Enable once fixed.
TEST(ClusterIo, JsonImplausiblySmallFp8PeakIsRefused) {
  expect_json_error(R"({"devices": {"X": {"base": "H800", "fp8_peak_tflops": 1e-300}},
                        "pools": [{"device": "X", "nodes": 1}]})",
                    {"c.json:/devices/X/fp8_peak_tflops", "implausibly small"});
  EXPECT_NO_THROW(parse_cluster_json(R"({"devices": {"X": {"base": "H800", "fp8_peak_tflops": 0}},
                                         "pools": [{"device": "X", "nodes": 1}]})",
                                     "c.json"));
}

TEST(ClusterIo, ToJsonWritesTheDocumentedFormat) {
  const std::string text = cluster_to_json(load_cluster(fixture("cross-link.json")));
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(text);
  std::vector<std::string> keys;
  for (const auto& item : j.items()) keys.push_back(item.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"name", "devices", "pools", "links"}));
  std::vector<std::string> device_keys;
  for (const auto& item : j["devices"]["H800"].items()) device_keys.push_back(item.key());
  EXPECT_EQ(device_keys,
            (std::vector<std::string>{
                "peak_tflops", "memory_gb", "hbm_bandwidth_gb_s", "intra_node_bandwidth_gb_s",
                "inter_node_bandwidth_gb_s", "devices_per_node", "gemm_efficiency",
                "intra_node_latency_us", "inter_node_latency_us", "fp8_peak_tflops",
                "compute_units", "kernel_overhead_us", "host_memory_gb",
                "host_memory_bandwidth_gb_s", "host_link_gb_s", "source"}));
  EXPECT_EQ(j["devices"]["H800"]["peak_tflops"], 989.0);
  EXPECT_EQ(j["devices"]["H800"]["compute_units"], 132);
  EXPECT_EQ(j["devices"]["910B"]["compute_units"], 0);  // not known: no wave quantisation
  EXPECT_EQ(j["devices"]["H800"]["kernel_overhead_us"], 43.0);
  EXPECT_EQ(j["devices"]["MI300X"]["peak_tflops"], 1307.4);
  EXPECT_EQ(j["devices"]["H800"]["intra_node_latency_us"], 5.0);
  EXPECT_EQ(j["pools"][1],
            (nlohmann::ordered_json{{"device", "MI300X"}, {"nodes", 1}, {"devices_per_node", 8}}));
  EXPECT_EQ(j["links"][0]["between"], (nlohmann::ordered_json{"MI300X", "H800"}));
  EXPECT_EQ(j["links"][0]["bandwidth_gb_s"], 12.5);
  EXPECT_EQ(j["links"][0]["latency_us"], 15.0);
  EXPECT_EQ(text.find("\"base\""), std::string::npos);
  EXPECT_EQ(text.substr(0, 4), "{\n  ");  // two-space indent
}

TEST(ClusterIo, ToJsonRejectsInvalidClusters) {
  EXPECT_THROW(cluster_to_json(ClusterSpec{}), ContractError);
}

// Hardening II, item 6: a control character in a cluster's, a device
// type's or an inline spec's name is refused, the value escaped so the
// message stays one line.
TEST(ClusterIo, NamesWithControlCharactersAreRefused) {
  const auto one_line = [](const std::function<void()>& f, const std::string& part) {
    try {
      f();
      ADD_FAILURE() << "no error for " << part;
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(part), std::string::npos) << what;
      EXPECT_NE(what.find("contains a control character"), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  };
  one_line([] { parse_inline_cluster("H800:8\nx"); }, "cluster spec \"H800:8\\nx\"");
  one_line(
      [] {
        parse_cluster_json(R"({"name": "a\u001b[2J", "pools": [{"device": "H800", "count": 8}]})",
                           "c.json");
      },
      "c.json:/name: name \"a\\x1b[2J\"");
  one_line(
      [] {
        parse_cluster_json(
            R"({"devices": {"G\tPU": {"base": "H800"}}, "pools": [{"device": "G\tPU", "count": 8}]})",
            "c.json");
      },
      "c.json:/devices: device type name \"G\\tPU\"");
  // validate() too, for clusters built any other way.
  ClusterSpec c = parse_inline_cluster("H800:8");
  c.pools[0].device.name = "H\n800";
  EXPECT_NE(validate(c).find("pools[0]: device type name \"H\\n800\" contains a control character"),
            std::string::npos)
      << validate(c);
}

}  // namespace
}  // namespace hapmoe
