// The profile file: one compound dataset per table (docs/profile.md).
#include "io/profile/profile_h5.h"

#include <cmath>
#include <cstdint>

#include "costmodel/errors.h"
#include "io/archive/archive.h"
#include "io/archive/h5.h"

namespace hapmoe {

namespace {

constexpr const char* kFormat = "hapmoe-profile";
constexpr std::int64_t kVersion = 1;

struct CommRow {
  const char* primitive = nullptr;
  const char* link = nullptr;
  const char* type_a = nullptr;
  const char* type_b = nullptr;
  std::int32_t world = 0;
  double bytes = 0;
  double seconds = 0;
};
h5::Compound<CommRow> comm_type() {
  h5::Compound<CommRow> c;
  HAPMOE_H5_FIELD(c, CommRow, primitive);
  HAPMOE_H5_FIELD(c, CommRow, link);
  HAPMOE_H5_FIELD(c, CommRow, type_a);
  HAPMOE_H5_FIELD(c, CommRow, type_b);
  HAPMOE_H5_FIELD(c, CommRow, world);
  HAPMOE_H5_FIELD(c, CommRow, bytes);
  HAPMOE_H5_FIELD(c, CommRow, seconds);
  return c;
}

struct ComputeRow {
  const char* device = nullptr;
  std::int32_t tp = 0, cp = 0, micro_batch = 0;
  double dense_fwd_s = 0, dense_bwd_s = 0, ffn_fwd_s = 0, ffn_bwd_s = 0;
};
h5::Compound<ComputeRow> compute_type() {
  h5::Compound<ComputeRow> c;
  HAPMOE_H5_FIELD(c, ComputeRow, device);
  HAPMOE_H5_FIELD(c, ComputeRow, tp);
  HAPMOE_H5_FIELD(c, ComputeRow, cp);
  HAPMOE_H5_FIELD(c, ComputeRow, micro_batch);
  HAPMOE_H5_FIELD(c, ComputeRow, dense_fwd_s);
  HAPMOE_H5_FIELD(c, ComputeRow, dense_bwd_s);
  HAPMOE_H5_FIELD(c, ComputeRow, ffn_fwd_s);
  HAPMOE_H5_FIELD(c, ComputeRow, ffn_bwd_s);
  return c;
}

struct DeviceRow {
  const char* device = nullptr;
  double eta = 0, router_s_per_token = 0, activation_scale = 0, overhead_bytes = 0;
};
h5::Compound<DeviceRow> device_type() {
  h5::Compound<DeviceRow> c;
  HAPMOE_H5_FIELD(c, DeviceRow, device);
  HAPMOE_H5_FIELD(c, DeviceRow, eta);
  HAPMOE_H5_FIELD(c, DeviceRow, router_s_per_token);
  HAPMOE_H5_FIELD(c, DeviceRow, activation_scale);
  HAPMOE_H5_FIELD(c, DeviceRow, overhead_bytes);
  return c;
}

struct ModelRow {
  const char* model = nullptr;
  double imbalance = 0;
};
h5::Compound<ModelRow> model_type() {
  h5::Compound<ModelRow> c;
  HAPMOE_H5_FIELD(c, ModelRow, model);
  HAPMOE_H5_FIELD(c, ModelRow, imbalance);
  return c;
}

std::string str(const char* s) { return s == nullptr ? "" : s; }

// A value of row `row` of dataset `set`: finite and above `lo` (or NaN =
// unset when `optional`).
void check(const std::string& where, const char* field, double v, double lo, bool optional) {
  if (optional && std::isnan(v)) return;
  if (!std::isfinite(v) || v <= lo) {
    throw InputError(where, std::string(field) + " = " + std::to_string(v) + " must be > " +
                                (lo == 0 ? "0" : std::to_string(lo)));
  }
}

}  // namespace

Primitive parse_primitive(const std::string& text, const std::string& where) {
  for (int p = 0; p < kNumPrimitives; ++p) {
    if (text == to_string(static_cast<Primitive>(p))) return static_cast<Primitive>(p);
  }
  throw InputError(where, "primitive '" + text +
                              "': expected all-reduce, all-gather, reduce-scatter, all-to-all or "
                              "p2p");
}

LinkKind parse_link_kind(const std::string& text, const std::string& where) {
  for (LinkKind k : {LinkKind::kIntraNode, LinkKind::kInterNode, LinkKind::kCrossType}) {
    if (text == to_string(k)) return k;
  }
  throw InputError(where, "link '" + text + "': expected intra-node, inter-node or cross-type");
}

MeasuredProfile read_profile(const std::string& path) {
  h5::check_input_file(path);
  if (!h5::is_hdf5(path)) throw InputError(path, "not an HDF5 file");
  MeasuredProfile p;
  std::string where = path;
  try {
    const h5::File f = h5::File::open_read(path);
    if (!f.attrs().has("format") || f.attrs().get_string("format") != kFormat) {
      throw InputError(path, "not a hapmoe profile (the root attribute format must be '" +
                                 std::string(kFormat) + "'; write one with hapmoe profile)");
    }
    const std::int64_t version = f.attrs().has("version") ? f.attrs().get_int("version") : 0;
    if (version != kVersion) {
      throw InputError(path, "profile version " + std::to_string(version) + ", this hapmoe reads " +
                                 std::to_string(kVersion));
    }
    for (const std::string& child : f.children()) {
      if (child != "comm" && child != "compute" && child != "devices" && child != "models") {
        throw InputError(path + ":/" + child,
                         "unknown dataset (a profile holds comm, compute, devices, models)");
      }
    }
    std::size_t row = 0;
    if (f.has("comm")) {
      where = path + ":/comm";
      row = 0;
      f.read_table<CommRow>("comm", comm_type(), [&](const CommRow& r) {
        const std::string at = where + "[" + std::to_string(row++) + "]";
        CommSample s;
        s.prim = parse_primitive(str(r.primitive), at + ".primitive");
        s.link = parse_link_kind(str(r.link), at + ".link");
        s.type_a = str(r.type_a);
        s.type_b = str(r.type_b).empty() ? s.type_a : str(r.type_b);
        if (s.type_a.empty()) throw InputError(at + ".type_a", "is empty");
        if (r.world < 1 || (s.prim != Primitive::kP2P && r.world < 2)) {
          throw InputError(at + ".world", std::to_string(r.world) + " must be >= 2 (>= 1 for p2p)");
        }
        s.world = r.world;
        check(at, "bytes", r.bytes, 0, false);
        check(at, "seconds", r.seconds, 0, false);
        s.bytes = r.bytes;
        s.seconds = r.seconds;
        p.comm.push_back(s);
      });
    }
    if (f.has("compute")) {
      where = path + ":/compute";
      row = 0;
      f.read_table<ComputeRow>("compute", compute_type(), [&](const ComputeRow& r) {
        const std::string at = where + "[" + std::to_string(row++) + "]";
        ComputeSample s;
        s.device = str(r.device);
        if (s.device.empty()) throw InputError(at + ".device", "is empty");
        if (r.tp < 1 || r.cp < 1 || r.micro_batch < 1) {
          throw InputError(at, "tp, cp and micro_batch must be >= 1");
        }
        s.tp = r.tp;
        s.cp = r.cp;
        s.micro_batch = r.micro_batch;
        check(at, "dense_fwd_s", r.dense_fwd_s, 0, false);
        check(at, "dense_bwd_s", r.dense_bwd_s, 0, false);
        check(at, "ffn_fwd_s", r.ffn_fwd_s, 0, true);
        check(at, "ffn_bwd_s", r.ffn_bwd_s, 0, true);
        s.dense_fwd_s = r.dense_fwd_s;
        s.dense_bwd_s = r.dense_bwd_s;
        s.ffn_fwd_s = r.ffn_fwd_s;
        s.ffn_bwd_s = r.ffn_bwd_s;
        p.compute.push_back(s);
      });
    }
    if (f.has("devices")) {
      where = path + ":/devices";
      row = 0;
      f.read_table<DeviceRow>("devices", device_type(), [&](const DeviceRow& r) {
        const std::string at = where + "[" + std::to_string(row++) + "]";
        DeviceCalibration d;
        d.device = str(r.device);
        if (d.device.empty()) throw InputError(at + ".device", "is empty");
        check(at, "eta", r.eta, 0, true);
        check(at, "router_s_per_token", r.router_s_per_token, -1e-300, true);
        check(at, "activation_scale", r.activation_scale, 0, true);
        check(at, "overhead_bytes", r.overhead_bytes, -1e-300, true);
        d.eta = r.eta;
        d.router_s_per_token = r.router_s_per_token;
        d.activation_scale = r.activation_scale;
        d.overhead_bytes = r.overhead_bytes;
        p.devices.push_back(d);
      });
    }
    if (f.has("models")) {
      where = path + ":/models";
      row = 0;
      f.read_table<ModelRow>("models", model_type(), [&](const ModelRow& r) {
        const std::string at = where + "[" + std::to_string(row++) + "]";
        ModelCalibration m;
        m.model = str(r.model);
        if (m.model.empty()) throw InputError(at + ".model", "is empty");
        if (!(r.imbalance >= 1.0) || !std::isfinite(r.imbalance)) {
          throw InputError(at + ".imbalance", std::to_string(r.imbalance) + " must be >= 1");
        }
        m.imbalance = r.imbalance;
        p.models.push_back(m);
      });
    }
  } catch (const h5::H5Error& e) {
    throw InputError(where, std::string("wrong layout for a hapmoe profile: ") + e.what());
  }
  return p;
}

void write_profile_file(const std::string& path, const MeasuredProfile& p,
                        const std::string& option) {
  write_archive_atomic(
      path,
      [&](h5::File& f) {
        f.attrs().set("format", kFormat);
        f.attrs().set("version", kVersion);
        f.attrs().set("units", "seconds, bytes; NaN = not measured");
        if (!p.comm.empty()) {
          std::vector<CommRow> rows;
          std::vector<std::string> names;  // kept alive for the pointers
          names.reserve(p.comm.size() * 4);
          for (const CommSample& s : p.comm) {
            CommRow r;
            names.emplace_back(to_string(s.prim));
            r.primitive = names.back().c_str();
            names.emplace_back(to_string(s.link));
            r.link = names.back().c_str();
            r.type_a = s.type_a.c_str();
            r.type_b = s.type_b.c_str();
            r.world = s.world;
            r.bytes = s.bytes;
            r.seconds = s.seconds;
            rows.push_back(r);
          }
          f.write_table("comm", comm_type(), rows);
        }
        if (!p.compute.empty()) {
          std::vector<ComputeRow> rows;
          for (const ComputeSample& s : p.compute) {
            rows.push_back({s.device.c_str(), s.tp, s.cp, s.micro_batch, s.dense_fwd_s,
                            s.dense_bwd_s, s.ffn_fwd_s, s.ffn_bwd_s});
          }
          f.write_table("compute", compute_type(), rows);
        }
        if (!p.devices.empty()) {
          std::vector<DeviceRow> rows;
          for (const DeviceCalibration& d : p.devices) {
            rows.push_back({d.device.c_str(), d.eta, d.router_s_per_token, d.activation_scale,
                            d.overhead_bytes});
          }
          f.write_table("devices", device_type(), rows);
        }
        if (!p.models.empty()) {
          std::vector<ModelRow> rows;
          for (const ModelCalibration& m : p.models) rows.push_back({m.model.c_str(), m.imbalance});
          f.write_table("models", model_type(), rows);
        }
      },
      option);
}

}  // namespace hapmoe
