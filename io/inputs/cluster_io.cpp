// Cluster inputs: presets, inline specs and cluster JSON (docs/clusters.md).
#include "io/inputs/cluster_io.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "costmodel/errors.h"
#include "costmodel/text.h"
#include "io/inputs/files.h"
#include "io/inputs/json_strict.h"

namespace hapmoe {

namespace {

using OrderedJson = nlohmann::ordered_json;

constexpr std::int64_t kMaxDevices = 524288;  // as validate(ClusterSpec)
constexpr int kMaxDevicesPerNode = 1024;
constexpr std::size_t kMaxNameLength = 100;

// Upper bounds of the JSON device fields, generous but finite.
constexpr double kMaxTflops = 1e6;
constexpr double kMaxGb = 1e6;
constexpr double kMaxGbPerSecond = 1e6;
constexpr double kMaxMicroseconds = 1e6;

// ---------------------------------------------------------------- units

// A JSON unit: si = json * factor, or si = json / factor when `divide`
// (microseconds: dividing by the exact 1e6 keeps 5 us == 5e-6 exactly).
// Byte counts are whole bytes: a runtime's 81,559 MiB is 85.520809984 GB,
// which no double times 1e9 gives exactly.
struct Unit {
  double factor;
  bool divide;
  bool whole = false;
};
constexpr Unit kTeraUnit{1e12, false};
constexpr Unit kGigaUnit{1e9, false};
constexpr Unit kGigaBytesUnit{1e9, false, true};
constexpr Unit kMicroUnit{1e6, true};

double to_si(double value, Unit u) {
  const double si = u.divide ? value / u.factor : value * u.factor;
  return u.whole ? std::round(si) : si;
}

// The shortest decimal in the JSON unit that converts back to exactly `si`,
// so that cluster_to_json round-trips through parse_cluster_json.
double from_si(double si, Unit u) {
  const double y0 = u.divide ? si * u.factor : si / u.factor;
  for (int digits = 1; digits <= 17; ++digits) {
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, "%.*g", digits, y0);
    const double y = std::strtod(buffer, nullptr);
    if (to_si(y, u) == si) return y;
  }
  double up = y0;
  double down = y0;
  for (int step = 0; step < 16; ++step) {
    up = std::nextafter(up, std::numeric_limits<double>::infinity());
    down = std::nextafter(down, -std::numeric_limits<double>::infinity());
    if (to_si(up, u) == si) return up;
    if (to_si(down, u) == si) return down;
  }
  return y0;  // not representable exactly in this unit; off by an ulp
}

// ---------------------------------------------------------------- helpers

std::string trim(const std::string& s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  const auto last = s.find_last_not_of(" \t\r\n");
  return s.substr(first, last - first + 1);
}

std::string format_number(double v) {
  std::ostringstream out;
  out.precision(10);
  out << v;
  return out.str();
}

std::string catalog_names() {
  std::string list;
  for (const DeviceSpec& d : device_catalog()) list += (list.empty() ? "" : ", ") + d.name;
  return list;
}

std::string preset_names() {
  std::string list;
  for (const ClusterPreset& p : cluster_presets()) list += (list.empty() ? "" : ", ") + p.name;
  return list;
}

// At most this many characters of an inline spec, one of its items or a
// device name are echoed in a message (the catalog and the accepted forms
// follow, and the line stays under 300 characters).
constexpr std::size_t kEchoSpec = 40;

// Why a catalog lookup failed, for messages.
std::string unknown_device_message(const std::string& name) {
  std::string message = "unknown device type \"" + echo_value(name, kEchoSpec) + "\"";
  if (to_lower(name) == "a100") {
    return message + " (ambiguous: write A100-40GB or A100-80GB)";
  }
  return message + " (catalog: " + catalog_names() + ")";
}

// Nodes x devices-per-node for `count` devices of a type with `per_node`
// devices per node: one partial node, or whole nodes. nullopt otherwise.
std::optional<std::pair<int, int>> split_count(std::int64_t count, int per_node) {
  if (count <= per_node) return std::pair<int, int>{1, static_cast<int>(count)};
  if (count % per_node == 0) {
    return std::pair<int, int>{static_cast<int>(count / per_node), per_node};
  }
  return std::nullopt;
}

// A NODESxPER_NODE split of `count` to suggest when split_count fails: the
// fewest nodes whose equal share fits.
std::pair<std::int64_t, std::int64_t> suggest_split(std::int64_t count, int per_node) {
  for (std::int64_t nodes = (count + per_node - 1) / per_node; nodes < count; ++nodes) {
    if (count % nodes == 0 && count / nodes <= kMaxDevicesPerNode) return {nodes, count / nodes};
  }
  return {count, 1};
}

std::string describe_pools(const ClusterSpec& c) {
  std::string text;
  for (const DevicePool& p : c.pools) {
    text += (text.empty() ? "" : " + ") + p.device.name + " (" + std::to_string(p.nodes) + "x" +
            std::to_string(p.devices_per_node) + ")";
  }
  return text;
}

// ---------------------------------------------------------------- presets

ClusterPreset make_preset(const std::string& name,
                          std::initializer_list<std::pair<const char*, int>> pools,
                          const std::string& note = "") {
  ClusterPreset preset;
  preset.name = name;
  preset.cluster.name = name;
  for (const auto& [device, nodes] : pools) {
    const DeviceSpec* d = find_device(device);
    HAPMOE_REQUIRE(d != nullptr, "cluster_presets: catalog has no device " + std::string(device));
    preset.cluster.pools.push_back(DevicePool{*d, nodes, d->devices_per_node});
  }
  preset.description = describe_pools(preset.cluster) + note;
  return preset;
}

std::vector<ClusterPreset> make_presets() {
  return {
      // The paper's Table "Symbol definitions of clusters".
      make_preset("paper:16-1-h", {{"H800", 2}}),
      make_preset("paper:16-2-h", {{"910B", 2}}),
      make_preset("paper:16-3-h", {{"MI300X", 2}}),
      make_preset("paper:16-1", {{"H800", 1}, {"910B", 1}}),
      make_preset("paper:16-2", {{"H800", 1}, {"MI300X", 1}}),
      make_preset("paper:16-3", {{"910B", 1}, {"MI300X", 1}}),
      make_preset("paper:24-1", {{"H800", 1}, {"910B", 2}}),
      make_preset("paper:24-2", {{"H800", 1}, {"MI300X", 2}}),
      make_preset("paper:24-3", {{"910B", 2}, {"MI300X", 1}}),
      make_preset("paper:32-1", {{"H800", 2}, {"910B", 2}}),
      make_preset("paper:32-2", {{"H800", 2}, {"MI300X", 2}}),
      make_preset("paper:32-3", {{"910B", 2}, {"MI300X", 2}}),
      // The dense-model experiment (paper §"Results of Dense Model on
      // Heter. Clusters"): "2x8 A100 and 2x8 910B".
      make_preset("paper:dense", {{"A100-80GB", 2}, {"910B", 2}},
                  "; the paper's dense-model cluster, \"2x8 A100\" without a memory size: "
                  "the 80 GB A100 is assumed"),
  };
}

// ---------------------------------------------------------------- JSON

// The number fields of a JSON device, in the order cluster_to_json writes
// them ("devices_per_node", an integer, goes after the first five).
struct NumberField {
  const char* key;
  double hi;      // largest accepted JSON value
  bool positive;  // must be > 0; otherwise >= 0
  Unit unit;
  double DeviceSpec::*member;
};
constexpr Unit kOneUnit{1, false};
constexpr NumberField kNumberFields[] = {
    {"peak_tflops", kMaxTflops, true, kTeraUnit, &DeviceSpec::peak_flops},
    {"memory_gb", kMaxGb, true, kGigaBytesUnit, &DeviceSpec::memory_bytes},
    {"hbm_bandwidth_gb_s", kMaxGbPerSecond, true, kGigaUnit, &DeviceSpec::hbm_bandwidth},
    {"intra_node_bandwidth_gb_s", kMaxGbPerSecond, true, kGigaUnit,
     &DeviceSpec::intra_node_bandwidth},
    {"inter_node_bandwidth_gb_s", kMaxGbPerSecond, true, kGigaUnit,
     &DeviceSpec::inter_node_bandwidth},
    {"gemm_efficiency", 1.0, true, kOneUnit, &DeviceSpec::gemm_efficiency},
    {"intra_node_latency_us", kMaxMicroseconds, false, kMicroUnit, &DeviceSpec::intra_node_latency},
    {"inter_node_latency_us", kMaxMicroseconds, false, kMicroUnit, &DeviceSpec::inter_node_latency},
};
constexpr std::size_t kFieldsBeforePerNode = 5;
// Optional host-side figures, in GB or GB/s (0 = not known).
struct HostField {
  const char* key;
  double hi;
  Unit unit;
  double DeviceSpec::*member;
};
constexpr HostField kHostFields[] = {
    {"host_memory_gb", kMaxGb, kGigaBytesUnit, &DeviceSpec::host_memory_bytes},
    {"host_memory_bandwidth_gb_s", kMaxGbPerSecond, kGigaUnit, &DeviceSpec::host_memory_bandwidth},
    {"host_link_gb_s", kMaxGbPerSecond, kGigaUnit, &DeviceSpec::host_link_bandwidth},
};

// The least accepted value of a positive device or link figure, in the
// JSON's units (TFLOP/s, GB, GB/s, efficiency).
constexpr double kMinPositiveFigure = 1e-3;

// Reads a number in [0, hi], or [kMinPositiveFigure, hi] when `positive`. Absent (or null)
// gives nullopt unless `required`.
std::optional<double> read_number(ObjectReader& r, const std::string& key, double hi, bool positive,
                                  bool required) {
  const std::optional<double> v = required ? r.get_number(key, 0, hi) : r.opt_number(key, 0, hi);
  if (positive && v && *v <= 0) {
    r.fail(key, "value " + format_number(*v) +
                    " must be greater than 0 (expected a number in (0, " + format_number(hi) +
                    "])");
  }
  // A positive figure this small (1e-300 TFLOP/s, GB/s, GB) would make
  // every time astronomically large but finite: a confident, meaningless
  // plan. The floor is far below any real device (docs/clusters.md).
  if (positive && v && *v < kMinPositiveFigure) {
    r.fail(key, "value " + format_number(*v) + " is implausibly small (expected at least " +
                    format_number(kMinPositiveFigure) + ")");
  }
  return v;
}

// One entry of "devices": `name` is its key, `r` reads its object. With
// "base" every field is optional and starts from the catalog device;
// without it every field is required.
DeviceSpec read_device(const std::string& name, ObjectReader& r) {
  DeviceSpec d;
  const auto base = r.opt_string("base");
  if (base) {
    const DeviceSpec* b = find_device(*base);
    if (b == nullptr) {
      r.fail("base", unknown_device_message(*base) + "; \"base\" must name a catalog device");
    }
    d = *b;
  }
  const bool required = !base;
  std::string overridden;  // keys set on top of the base, for `source`
  auto note = [&](const char* key) {
    overridden += (overridden.empty() ? "" : ", ") + std::string(key);
  };
  for (const NumberField& f : kNumberFields) {
    if (const auto v = read_number(r, f.key, f.hi, f.positive, required)) {
      d.*f.member = to_si(*v, f.unit);
      note(f.key);
    }
  }
  const auto per_node =
      required ? std::optional<int>(r.get_int("devices_per_node", 1, kMaxDevicesPerNode))
               : r.opt_int("devices_per_node", 1, kMaxDevicesPerNode);
  if (per_node) {
    d.devices_per_node = *per_node;
    note("devices_per_node");
  }
  // Optional even without "base": a device file written before these
  // fields existed still reads, with no wave quantisation and the fitted
  // kernel overhead (docs/clusters.md).
  if (!base) d.kernel_overhead = kDefaultKernelOverhead;
  if (const auto fp8 = r.opt_number("fp8_peak_tflops", 0, kMaxTflops)) {
    // 0 means no FP8; a positive figure has the floor of the other peaks.
    if (*fp8 > 0 && *fp8 < kMinPositiveFigure) {
      r.fail("fp8_peak_tflops", "value " + format_number(*fp8) +
                                    " is implausibly small (expected 0 for no FP8, or at least " +
                                    format_number(kMinPositiveFigure) + ")");
    }
    d.fp8_peak_flops = to_si(*fp8, kTeraUnit);
    note("fp8_peak_tflops");
  }
  if (const auto units = r.opt_int("compute_units", 0, kMaxComputeUnits)) {
    d.compute_units = *units;
    note("compute_units");
  }
  if (const auto overhead = r.opt_number("kernel_overhead_us", 0, kMaxKernelOverhead * 1e6)) {
    d.kernel_overhead = to_si(*overhead, kMicroUnit);
    note("kernel_overhead_us");
  }
  // The host side (optimizer CPU offload); 0 = not known. Optional even
  // without "base": without one the host memory bandwidth is the default.
  if (!base) d.host_memory_bandwidth = kDefaultHostMemoryBandwidth;
  for (const HostField& f : kHostFields) {
    if (const auto v = r.opt_number(f.key, 0, f.hi)) {
      d.*f.member = to_si(*v, f.unit);
      note(f.key);
    }
  }
  const auto source = r.opt_string("source");
  r.finish();

  if (source) {
    d.source = *source;
  } else if (!base) {
    d.source = "user-defined in a cluster file";
  } else if (!overridden.empty()) {
    d.source =
        "catalog " + d.name + " (" + d.source + ") with " + overridden + " set in a cluster file";
  }
  d.name = name;
  return d;
}

// The devices a cluster file may name: its own "devices" first (they shadow
// catalog entries of the same name), then the catalog with its aliases.
class DeviceTable {
 public:
  void add(DeviceSpec d) { custom_.push_back(std::move(d)); }

  const DeviceSpec* find_custom(const std::string& name) const {
    const std::string key = to_lower(name);
    for (const DeviceSpec& d : custom_) {
      if (to_lower(d.name) == key) return &d;
    }
    return nullptr;
  }

  const DeviceSpec* find(const std::string& name) const {
    if (const DeviceSpec* d = find_custom(name)) return d;
    const DeviceSpec* d = find_device(name);
    if (d == nullptr) return nullptr;
    if (const DeviceSpec* shadow = find_custom(d->name)) return shadow;
    return d;
  }

  std::string unknown(const std::string& name) const {
    std::string message = unknown_device_message(name);
    if (custom_.empty()) return message + "; custom types can be defined under \"devices\"";
    std::string list;
    for (const DeviceSpec& d : custom_) list += (list.empty() ? "" : ", ") + d.name;
    return message + "; defined under \"devices\": " + list;
  }

 private:
  std::vector<DeviceSpec> custom_;
};

std::string where_of(const std::string& origin, const std::string& pointer) {
  return origin + ":" + pointer;
}

DevicePool read_pool(ObjectReader& r, const DeviceTable& table) {
  const std::string name = r.get_string("device");
  const DeviceSpec* device = table.find(name);
  if (device == nullptr) r.fail("device", table.unknown(name));
  DevicePool pool;
  pool.device = *device;
  const bool has_count = r.has("count");
  const bool has_nodes = r.has("nodes");
  if (has_count && has_nodes) {
    r.fail("count", "give either \"count\" or \"nodes\", not both");
  }
  if (!has_count && !has_nodes) {
    r.fail("nodes",
           "required field is missing (give \"nodes\", optionally with "
           "\"devices_per_node\", or \"count\")");
  }
  const auto per_node = r.opt_int("devices_per_node", 1, kMaxDevicesPerNode);
  if (has_nodes) {
    pool.nodes = r.get_int("nodes", 1, kMaxDevices);
    pool.devices_per_node = per_node.value_or(device->devices_per_node);
  } else {
    const int count = r.get_int("count", 1, kMaxDevices);
    if (per_node) {
      if (count % *per_node != 0) {
        r.fail("count", "count " + std::to_string(count) +
                            " is not a multiple of devices_per_node " + std::to_string(*per_node) +
                            " (give \"nodes\" and \"devices_per_node\" instead)");
      }
      pool.nodes = count / *per_node;
      pool.devices_per_node = *per_node;
    } else if (const auto split = split_count(count, device->devices_per_node)) {
      pool.nodes = split->first;
      pool.devices_per_node = split->second;
    } else {
      const auto [n, m] = suggest_split(count, device->devices_per_node);
      r.fail("count", "count " + std::to_string(count) + " of " + device->name +
                          " is more than one node (" + std::to_string(device->devices_per_node) +
                          " devices per node) and not a multiple of it; give \"nodes\" and "
                          "\"devices_per_node\" instead (e.g. \"nodes\": " +
                          std::to_string(n) + ", \"devices_per_node\": " + std::to_string(m) + ")");
    }
  }
  r.finish();
  return pool;
}

}  // namespace

// ------------------------------------------------------------------ presets

std::span<const ClusterPreset> cluster_presets() {
  static const std::vector<ClusterPreset> kPresets = make_presets();
  return kPresets;
}

const ClusterPreset* find_cluster_preset(const std::string& name) {
  const std::string key = to_lower(trim(name));
  for (const ClusterPreset& p : cluster_presets()) {
    if (to_lower(p.name) == key) return &p;
  }
  return nullptr;
}

// ------------------------------------------------------------------ inline

ClusterSpec parse_inline_cluster(const std::string& spec) {
  // The spec and its items are echoed cut (echo_value), so a message
  // stays one short line whatever was given (docs/testing.md).
  const std::string where = "--cluster \"" + echo_value(spec, kEchoSpec) + "\"";
  const std::string forms =
      "TYPE:COUNT (e.g. H800:16) or TYPE:NODESxPER_NODE (e.g. 910B:2x16), items separated by "
      "commas";
  if (trim(spec).empty()) throw InputError(where, "empty cluster spec; expected " + forms);
  if (has_control_character(spec)) {
    throw InputError("--cluster", check_name_text("cluster spec", spec));
  }

  // Parses one integer of `item`; `what` names it in messages.
  auto integer = [&](const std::string& item, const std::string& text, const std::string& what) {
    if (text.empty())
      throw InputError(
          where, echo_value(item, kEchoSpec) + ": " + what + " is missing; expected " + forms);
    try {
      return parse_int_text(text, std::numeric_limits<std::int64_t>::min(),
                            std::numeric_limits<std::int64_t>::max(), item);
    } catch (const InputError&) {
      throw InputError(where, echo_value(item, kEchoSpec) + ": " + what + " \"" +
                                  echo_value(text, kEchoSpec) + "\" is not an integer; expected " +
                                  forms);
    }
  };

  ClusterSpec cluster;
  cluster.name = trim(spec);
  std::vector<std::string> items;  // as written, for messages
  std::int64_t total = 0;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = spec.find(',', start);
    const std::string item =
        trim(spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    const std::string shown = echo_value(item, kEchoSpec);  // for messages
    const int index = static_cast<int>(items.size()) + 1;
    if (item.empty()) {
      throw InputError(
          where, "item " + std::to_string(index) + " is empty (a stray comma?); expected " + forms);
    }
    const std::size_t colon = item.find(':');
    if (colon == std::string::npos) {
      throw InputError(where, shown + ": missing ':' and a device count; expected " + forms);
    }
    const std::string type = trim(item.substr(0, colon));
    const std::string count_text = trim(item.substr(colon + 1));
    if (type.empty())
      throw InputError(where, shown + ": device type is missing; expected " + forms);
    const DeviceSpec* device = find_device(type);
    if (device == nullptr) {
      // The item is not repeated when the type is long (the type is most
      // of it), so the catalog still fits on the line.
      throw InputError(where, (item.size() > kEchoSpec ? "item " + std::to_string(index) : shown) +
                                  ": " + unknown_device_message(type));
    }

    DevicePool pool;
    pool.device = *device;
    const std::size_t x = count_text.find_first_of("xX");
    if (x == std::string::npos) {
      const std::int64_t count = integer(item, count_text, "device count");
      if (count < 1) throw InputError(where, shown + ": device count must be at least 1");
      if (count > kMaxDevices) {
        throw InputError(where, shown + ": device count " + echo_value(count_text, kEchoSpec) +
                                    " is more than " + std::to_string(kMaxDevices) +
                                    " devices (the limit)");
      }
      const auto split = split_count(count, device->devices_per_node);
      if (!split) {
        const auto [n, m] = suggest_split(count, device->devices_per_node);
        throw InputError(where, shown + ": " + std::to_string(count) +
                                    " devices is more than one " + device->name + " node (" +
                                    std::to_string(device->devices_per_node) +
                                    " devices per node) and not a multiple of " +
                                    std::to_string(device->devices_per_node) +
                                    "; use the NODESxPER_NODE form, e.g. " + device->name + ":" +
                                    std::to_string(n) + "x" + std::to_string(m));
      }
      pool.nodes = split->first;
      pool.devices_per_node = split->second;
    } else {
      const std::int64_t nodes = integer(item, trim(count_text.substr(0, x)), "number of nodes");
      const std::int64_t per_node =
          integer(item, trim(count_text.substr(x + 1)), "devices per node");
      if (nodes < 1) throw InputError(where, shown + ": number of nodes must be at least 1");
      if (per_node < 1) throw InputError(where, shown + ": devices per node must be at least 1");
      if (per_node > kMaxDevicesPerNode) {
        throw InputError(where, shown + ": devices per node " + std::to_string(per_node) +
                                    " is more than " + std::to_string(kMaxDevicesPerNode));
      }
      if (nodes > kMaxDevices || nodes * per_node > kMaxDevices) {
        throw InputError(where, shown + ": " + std::to_string(nodes) + " x " +
                                    std::to_string(per_node) + " devices is more than " +
                                    std::to_string(kMaxDevices) + " devices (the limit)");
      }
      pool.nodes = static_cast<int>(nodes);
      pool.devices_per_node = static_cast<int>(per_node);
    }
    for (std::size_t i = 0; i < cluster.pools.size(); ++i) {
      if (cluster.pools[i].device.name == device->name) {
        throw InputError(where, items[i] + " and " + shown + " both give device type " +
                                    device->name + "; give each type once (one pool per type)");
      }
    }
    total += pool.devices();
    if (total > kMaxDevices) {
      throw InputError(where, "the spec adds up to " + std::to_string(total) + " devices at " +
                                  shown + "; at most " + std::to_string(kMaxDevices) +
                                  " devices are supported");
    }
    cluster.pools.push_back(std::move(pool));
    items.push_back(shown);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (auto e = validate(cluster); !e.empty()) throw InputError(where, e);
  return cluster;
}

// ------------------------------------------------------------------ JSON

ClusterSpec parse_cluster_json(const std::string& text, const std::string& origin) {
  const Json doc = parse_json(text, origin);
  ObjectReader root(doc, origin, "");
  ClusterSpec cluster;
  cluster.name = root.opt_string("name").value_or("");
  if (auto e = check_name_text("name", cluster.name); !e.empty()) {
    throw InputError(origin + ":" + root.pointer("name"), e);
  }

  DeviceTable table;
  if (const Json* devices = root.opt_raw("devices")) {
    ObjectReader devs(*devices, origin, root.pointer("devices"));
    std::vector<std::string> seen;
    for (const auto& item : devices->items()) {
      const std::string& name = item.key();
      // Before any message shows the name (or a JSON pointer holds it).
      if (auto e = check_name_text("device type name", name); !e.empty()) {
        throw InputError(origin + ":" + root.pointer("devices"), e);
      }
      if (trim(name).empty()) devs.fail(name, "device type name must not be empty");
      if (trim(name) != name || name.size() > kMaxNameLength ||
          name.find_first_of(",:") != std::string::npos) {
        devs.fail(name, "device type name \"" + name + "\" must have at most " +
                            std::to_string(kMaxNameLength) +
                            " characters, no ',' or ':' and no surrounding spaces");
      }
      if (table.find_custom(name) != nullptr) {
        devs.fail(name, "device type \"" + name +
                            "\" is defined twice (names are compared case-insensitively)");
      }
      ObjectReader r(devs.get_raw(name), origin, devs.pointer(name));
      table.add(read_device(name, r));
    }
    devs.finish();
  }

  const Json& pools = root.get_raw("pools");
  const std::string pools_pointer = root.pointer("pools");
  if (!pools.is_array()) root.fail("pools", "must be an array of pools, got " + describe(pools));
  if (pools.empty()) root.fail("pools", "must list at least one pool, got []");
  std::int64_t total = 0;
  for (std::size_t i = 0; i < pools.size(); ++i) {
    const std::string pointer = pools_pointer + "/" + std::to_string(i);
    ObjectReader r(pools[i], origin, pointer);
    DevicePool pool = read_pool(r, table);
    for (std::size_t j = 0; j < cluster.pools.size(); ++j) {
      if (cluster.pools[j].device.name == pool.device.name) {
        throw InputError(where_of(origin, r.pointer("device")),
                         "device type " + pool.device.name + " already has a pool at " +
                             pools_pointer + "/" + std::to_string(j) +
                             " (one pool per device type)");
      }
    }
    const std::int64_t devices = static_cast<std::int64_t>(pool.nodes) * pool.devices_per_node;
    total += devices;
    if (total > kMaxDevices) {
      throw InputError(where_of(origin, pointer),
                       std::to_string(pool.nodes) + " nodes x " +
                           std::to_string(pool.devices_per_node) +
                           " devices per node = " + std::to_string(devices) + " devices (" +
                           std::to_string(total) + " in the cluster so far); at most " +
                           std::to_string(kMaxDevices) + " devices are supported");
    }
    cluster.pools.push_back(std::move(pool));
  }

  if (const Json* links = root.opt_raw("links")) {
    const std::string links_pointer = root.pointer("links");
    if (!links->is_array()) {
      root.fail("links", "must be an array of links, got " + describe(*links));
    }
    for (std::size_t i = 0; i < links->size(); ++i) {
      const std::string pointer = links_pointer + "/" + std::to_string(i);
      ObjectReader r((*links)[i], origin, pointer);
      const Json& between = r.get_raw("between");
      if (!between.is_array() || between.size() != 2) {
        r.fail("between", "must be an array of two device type names, got " + describe(between));
      }
      int types[2] = {-1, -1};
      for (std::size_t k = 0; k < 2; ++k) {
        const std::string element_where =
            where_of(origin, r.pointer("between") + "/" + std::to_string(k));
        if (!between[k].is_string()) {
          throw InputError(element_where,
                           "must be a device type name (a string), got " + describe(between[k]));
        }
        const std::string name = between[k].get<std::string>();
        const DeviceSpec* device = table.find(name);
        for (int t = 0; t < cluster.num_types() && device != nullptr; ++t) {
          if (cluster.pools[static_cast<std::size_t>(t)].device.name == device->name) types[k] = t;
        }
        if (types[k] < 0) {
          std::string list;
          for (const DevicePool& p : cluster.pools)
            list += (list.empty() ? "" : ", ") + p.device.name;
          throw InputError(
              element_where,
              "\"" + name + "\" is not the device type of any pool (pools: " + list + ")");
        }
      }
      if (types[0] == types[1]) {
        r.fail("between", "links device type " +
                              cluster.pools[static_cast<std::size_t>(types[0])].device.name +
                              " to itself, got " + describe(between) +
                              "; a link joins two different types");
      }
      CrossLink link;
      link.type_a = types[0];
      link.type_b = types[1];
      link.bandwidth =
          to_si(*read_number(r, "bandwidth_gb_s", kMaxGbPerSecond, true, true), kGigaUnit);
      const auto latency = r.opt_number("latency_us", 0, kMaxMicroseconds);
      link.latency =
          latency
              ? to_si(*latency, kMicroUnit)
              : std::max(
                    cluster.pools[static_cast<std::size_t>(types[0])].device.inter_node_latency,
                    cluster.pools[static_cast<std::size_t>(types[1])].device.inter_node_latency);
      r.finish();
      for (std::size_t j = 0; j < cluster.cross_links.size(); ++j) {
        const CrossLink& other = cluster.cross_links[j];
        if (std::minmax(other.type_a, other.type_b) == std::minmax(link.type_a, link.type_b)) {
          throw InputError(where_of(origin, r.pointer("between")),
                           "the pair " + describe(between) + " already has a link at " +
                               links_pointer + "/" + std::to_string(j));
        }
      }
      cluster.cross_links.push_back(link);
    }
  }
  root.finish();

  if (auto e = validate(cluster); !e.empty()) throw InputError(origin, e);
  return cluster;
}

// ------------------------------------------------------------------ load

ClusterSpec load_cluster(const std::string& spec) {
  if (const ClusterPreset* preset = find_cluster_preset(spec)) return preset->cluster;
  const std::string where = "--cluster \"" + echo_value(spec, kEchoSpec) + "\"";
  std::error_code ec;
  if (!spec.empty() && std::filesystem::exists(spec, ec)) {
    ClusterSpec cluster = parse_cluster_json(read_regular_file(spec), spec);
    if (cluster.name.empty()) cluster.name = spec;
    return cluster;
  }
  const std::string lowered = to_lower(trim(spec));
  if (lowered.rfind("paper:", 0) == 0) {
    throw InputError(where, "unknown cluster preset (presets: " + preset_names() + ")");
  }
  if (spec.find(':') != std::string::npos) return parse_inline_cluster(spec);
  if (lowered.empty()) {
    throw InputError(where, "empty cluster spec; give a preset (" + preset_names() +
                                "), a cluster JSON file or an inline spec (TYPE:COUNT or "
                                "TYPE:NODESxPER_NODE items separated by commas)");
  }
  if (const DeviceSpec* d = find_device(trim(spec))) {
    throw InputError(where, "\"" + echo_value(trim(spec), kEchoSpec) +
                                "\" is a device type, not a cluster; give a count, e.g. " +
                                d->name + ":" + std::to_string(d->devices_per_node) + " or " +
                                d->name + ":2x" + std::to_string(d->devices_per_node));
  }
  const bool looks_like_file = lowered.size() > 5 && lowered.substr(lowered.size() - 5) == ".json";
  throw InputError(where, std::string(looks_like_file ? "no such file; " : "") +
                              "not a cluster preset (" + preset_names() +
                              "), not an existing cluster JSON file and not an inline spec "
                              "(TYPE:COUNT or TYPE:NODESxPER_NODE items separated by commas, e.g. "
                              "\"H800:16,910B:16\" or \"910B:2x16\")");
}

// ------------------------------------------------------------------ write

std::string cluster_to_json(const ClusterSpec& cluster) {
  const std::string problem = validate(cluster);
  HAPMOE_REQUIRE(problem.empty(), "cluster_to_json: invalid cluster: " + problem);
  OrderedJson out;
  out["name"] = cluster.name;
  OrderedJson devices = OrderedJson::object();
  for (const DevicePool& pool : cluster.pools) {
    const DeviceSpec& d = pool.device;
    OrderedJson dev;
    for (std::size_t i = 0; i < std::size(kNumberFields); ++i) {
      if (i == kFieldsBeforePerNode) dev["devices_per_node"] = d.devices_per_node;
      dev[kNumberFields[i].key] = from_si(d.*kNumberFields[i].member, kNumberFields[i].unit);
    }
    dev["fp8_peak_tflops"] = from_si(d.fp8_peak_flops, kTeraUnit);
    dev["compute_units"] = d.compute_units;
    dev["kernel_overhead_us"] = from_si(d.kernel_overhead, kMicroUnit);
    for (const HostField& f : kHostFields) dev[f.key] = from_si(d.*f.member, f.unit);
    dev["source"] = d.source;
    devices[d.name] = std::move(dev);
  }
  out["devices"] = std::move(devices);
  OrderedJson pools = OrderedJson::array();
  for (const DevicePool& pool : cluster.pools) {
    OrderedJson p;
    p["device"] = pool.device.name;
    p["nodes"] = pool.nodes;
    p["devices_per_node"] = pool.devices_per_node;
    pools.push_back(std::move(p));
  }
  out["pools"] = std::move(pools);
  OrderedJson links = OrderedJson::array();
  for (const CrossLink& link : cluster.cross_links) {
    OrderedJson l;
    l["between"] = {cluster.pools[static_cast<std::size_t>(link.type_a)].device.name,
                    cluster.pools[static_cast<std::size_t>(link.type_b)].device.name};
    l["bandwidth_gb_s"] = from_si(link.bandwidth, kGigaUnit);
    l["latency_us"] = from_si(link.latency, kMicroUnit);
    links.push_back(std::move(l));
  }
  out["links"] = std::move(links);
  return out.dump(2) + "\n";
}

}  // namespace hapmoe
