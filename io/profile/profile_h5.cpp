// The profile file: one compound dataset per table (docs/profile.md).
#include "io/profile/profile_h5.h"

#include <sys/stat.h>

#include <cmath>
#include <cstdint>
#include <cstdio>

#include "costmodel/errors.h"
#include "costmodel/text.h"
#include "io/archive/archive.h"
#include "io/archive/h5.h"

namespace hapmoe {

namespace {

constexpr const char* kFormat = "hapmoe-profile";
constexpr std::int64_t kVersion = 1;

// The rows as stored. Integer fields are `Int`: int32 when writing, double
// when reading, so a value a hostile file stores as a float (2.5) is seen
// as it is and refused, not truncated by HDF5's conversion.
template <class Int>
struct CommRow {
  const char* primitive = nullptr;
  const char* link = nullptr;
  const char* type_a = nullptr;
  const char* type_b = nullptr;
  Int world = 0;
  double bytes = 0;
  double seconds = 0;
};
template <class Int>
h5::Compound<CommRow<Int>> comm_type() {
  using Row = CommRow<Int>;
  h5::Compound<Row> c;
  HAPMOE_H5_FIELD(c, Row, primitive);
  HAPMOE_H5_FIELD(c, Row, link);
  HAPMOE_H5_FIELD(c, Row, type_a);
  HAPMOE_H5_FIELD(c, Row, type_b);
  HAPMOE_H5_FIELD(c, Row, world);
  HAPMOE_H5_FIELD(c, Row, bytes);
  HAPMOE_H5_FIELD(c, Row, seconds);
  return c;
}

template <class Int>
struct ComputeRow {
  const char* device = nullptr;
  Int tp = 0, cp = 0, micro_batch = 0;
  double dense_fwd_s = 0, dense_bwd_s = 0, ffn_fwd_s = 0, ffn_bwd_s = 0;
};
template <class Int>
h5::Compound<ComputeRow<Int>> compute_type() {
  using Row = ComputeRow<Int>;
  h5::Compound<Row> c;
  HAPMOE_H5_FIELD(c, Row, device);
  HAPMOE_H5_FIELD(c, Row, tp);
  HAPMOE_H5_FIELD(c, Row, cp);
  HAPMOE_H5_FIELD(c, Row, micro_batch);
  HAPMOE_H5_FIELD(c, Row, dense_fwd_s);
  HAPMOE_H5_FIELD(c, Row, dense_bwd_s);
  HAPMOE_H5_FIELD(c, Row, ffn_fwd_s);
  HAPMOE_H5_FIELD(c, Row, ffn_bwd_s);
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

// A stored training run; its per-stage peaks and timers are rows of
// run_memory and run_timers naming it.
struct RunRow {
  const char* name = nullptr;
  const char* source = nullptr;
  const char* workload = nullptr;
  const char* cluster = nullptr;
  const char* plan = nullptr;
  double latency_s = 0;
};
h5::Compound<RunRow> run_type() {
  h5::Compound<RunRow> c;
  HAPMOE_H5_FIELD(c, RunRow, name);
  HAPMOE_H5_FIELD(c, RunRow, source);
  HAPMOE_H5_FIELD(c, RunRow, workload);
  HAPMOE_H5_FIELD(c, RunRow, cluster);
  HAPMOE_H5_FIELD(c, RunRow, plan);
  HAPMOE_H5_FIELD(c, RunRow, latency_s);
  return c;
}

template <class Int>
struct RunMemoryRow {
  const char* run = nullptr;
  Int rank = 0, stage = 0;
  double max_allocated_bytes = 0;
};
template <class Int>
h5::Compound<RunMemoryRow<Int>> run_memory_type() {
  using Row = RunMemoryRow<Int>;
  h5::Compound<Row> c;
  HAPMOE_H5_FIELD(c, Row, run);
  HAPMOE_H5_FIELD(c, Row, rank);
  HAPMOE_H5_FIELD(c, Row, stage);
  HAPMOE_H5_FIELD(c, Row, max_allocated_bytes);
  return c;
}

struct RunTimerRow {
  const char* run = nullptr;
  const char* timer = nullptr;
  double seconds = 0;
};
h5::Compound<RunTimerRow> run_timer_type() {
  h5::Compound<RunTimerRow> c;
  HAPMOE_H5_FIELD(c, RunTimerRow, run);
  HAPMOE_H5_FIELD(c, RunTimerRow, timer);
  HAPMOE_H5_FIELD(c, RunTimerRow, seconds);
  return c;
}

std::string str(const char* s) { return s == nullptr ? "" : s; }

// An integer field read as a double: integral and within int's range
// (validate_profile checks the range the field allows).
int integral(const std::string& at, const char* field, double v) {
  if (!(v == std::floor(v)) || std::abs(v) > 2147483647.0) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", v);
    throw InputError(at + "." + field, std::string(buf) + " is not an integer");
  }
  return static_cast<int>(v);
}

// Checks a table before reading it: a hard link to a dataset of records
// with exactly the profile's fields, at most kMaxProfileRows of them.
template <class Row>
void check_table(const h5::File& f, const std::string& name, const h5::Compound<Row>& type,
                 const std::string& where) {
  f.check_table(name, type, true);
  const std::size_t rows = f.extent(name);
  if (rows > kMaxProfileRows) {
    throw InputError(where, std::to_string(rows) +
                                " rows, more than a profile table holds (at most " +
                                std::to_string(kMaxProfileRows) + ")");
  }
}

// The run a row of run_memory or run_timers names; InputError at `at`
// when the profile stores no run of that name.
ProfileRun& run_named(MeasuredProfile& p, const std::string& name, const std::string& at) {
  for (ProfileRun& r : p.runs) {
    if (r.name == name) return r;
  }
  throw InputError(at + ".run",
                   "'" + escape_control_characters(name.substr(0, 64)) + "' is not a run of /runs");
}

void read_runs(const h5::File& f, const std::string& path, std::string& where, MeasuredProfile& p) {
  std::size_t row = 0;
  if (f.has("runs")) {
    where = path + ":/runs";
    const auto type = run_type();
    check_table(f, "runs", type, where);
    f.read_table<RunRow>("runs", type, [&](const RunRow& r) {
      ProfileRun run;
      run.name = str(r.name);
      run.source = str(r.source);
      run.workload = str(r.workload);
      run.cluster = str(r.cluster);
      run.plan = str(r.plan);
      run.latency_s = r.latency_s;
      p.runs.push_back(std::move(run));
    });
  }
  if (f.has("run_memory")) {
    where = path + ":/run_memory";
    const auto type = run_memory_type<double>();
    check_table(f, "run_memory", type, where);
    f.read_table<RunMemoryRow<double>>("run_memory", type, [&](const RunMemoryRow<double>& r) {
      const std::string at = where + "[" + std::to_string(row++) + "]";
      ProfileRun& run = run_named(p, str(r.run), at);
      run.peaks.push_back(
          {integral(at, "rank", r.rank), integral(at, "stage", r.stage), r.max_allocated_bytes});
    });
  }
  if (f.has("run_timers")) {
    where = path + ":/run_timers";
    row = 0;
    const auto type = run_timer_type();
    check_table(f, "run_timers", type, where);
    f.read_table<RunTimerRow>("run_timers", type, [&](const RunTimerRow& r) {
      const std::string at = where + "[" + std::to_string(row++) + "]";
      run_named(p, str(r.run), at).timers.push_back({str(r.timer), r.seconds});
    });
  }
}

// Reads the tables of an open profile file, checking types and counts;
// validate_profile checks the values.
MeasuredProfile read_tables(const h5::File& f, const std::string& path, std::string& where) {
  MeasuredProfile p;
  std::size_t row = 0;
  if (f.has("comm")) {
    where = path + ":/comm";
    row = 0;
    const auto type = comm_type<double>();
    check_table(f, "comm", type, where);
    f.read_table<CommRow<double>>("comm", type, [&](const CommRow<double>& r) {
      const std::string at = where + "[" + std::to_string(row++) + "]";
      CommSample s;
      s.prim = parse_primitive(str(r.primitive), at + ".primitive");
      s.link = parse_link_kind(str(r.link), at + ".link");
      s.type_a = str(r.type_a);
      s.type_b = str(r.type_b).empty() ? s.type_a : str(r.type_b);
      s.world = integral(at, "world", r.world);
      s.bytes = r.bytes;
      s.seconds = r.seconds;
      p.comm.push_back(s);
    });
  }
  if (f.has("compute")) {
    where = path + ":/compute";
    row = 0;
    const auto type = compute_type<double>();
    check_table(f, "compute", type, where);
    f.read_table<ComputeRow<double>>("compute", type, [&](const ComputeRow<double>& r) {
      const std::string at = where + "[" + std::to_string(row++) + "]";
      ComputeSample s;
      s.device = str(r.device);
      s.tp = integral(at, "tp", r.tp);
      s.cp = integral(at, "cp", r.cp);
      s.micro_batch = integral(at, "micro_batch", r.micro_batch);
      s.dense_fwd_s = r.dense_fwd_s;
      s.dense_bwd_s = r.dense_bwd_s;
      s.ffn_fwd_s = r.ffn_fwd_s;
      s.ffn_bwd_s = r.ffn_bwd_s;
      p.compute.push_back(s);
    });
  }
  if (f.has("devices")) {
    where = path + ":/devices";
    const auto type = device_type();
    check_table(f, "devices", type, where);
    f.read_table<DeviceRow>("devices", type, [&](const DeviceRow& r) {
      p.devices.push_back(
          {str(r.device), r.eta, r.router_s_per_token, r.activation_scale, r.overhead_bytes});
    });
  }
  if (f.has("models")) {
    where = path + ":/models";
    const auto type = model_type();
    check_table(f, "models", type, where);
    f.read_table<ModelRow>("models", type, [&](const ModelRow& r) {
      p.models.push_back({str(r.model), r.imbalance});
    });
  }
  read_runs(f, path, where, p);
  return p;
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
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && static_cast<std::uint64_t>(st.st_size) > kMaxProfileBytes) {
    throw InputError(path, std::to_string(st.st_size) +
                               " bytes, more than a profile file holds (at most " +
                               std::to_string(kMaxProfileBytes) + " bytes, 64 MiB)");
  }
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
      if (child != "comm" && child != "compute" && child != "devices" && child != "models" &&
          child != "runs" && child != "run_memory" && child != "run_timers") {
        const std::string shown = escape_control_characters(child.substr(0, 64));
        throw InputError(path + ":/" + shown + (child.size() > 64 ? "..." : ""),
                         "unknown dataset (a profile holds comm, compute, devices, models, runs, "
                         "run_memory, run_timers)");
      }
    }
    p = read_tables(f, path, where);
  } catch (const h5::H5Error& e) {
    throw InputError(where, std::string("wrong layout for a hapmoe profile: ") + e.what());
  }
  if (const ProfileIssue issue = validate_profile(p); !issue.field.empty()) {
    throw InputError(path + ":/" + issue.field, issue.what);
  }
  return p;
}

void check_profile_to_write(const std::string& path, const MeasuredProfile& p,
                            const std::string& option) {
  // What the reader would refuse is never written.
  if (const ProfileIssue issue = validate_profile(p); !issue.field.empty()) {
    throw InputError(option + " " + path,
                     issue.field + " " + issue.what + "; the profile is not written");
  }
}

void write_profile_file(const std::string& path, const MeasuredProfile& p,
                        const std::string& option) {
  check_profile_to_write(path, p, option);
  write_archive_atomic(
      path,
      [&](h5::File& f) {
        f.attrs().set("format", kFormat);
        f.attrs().set("version", kVersion);
        f.attrs().set("units", "seconds, bytes; NaN = not measured");
        if (!p.comm.empty()) {
          std::vector<CommRow<std::int32_t>> rows;
          std::vector<std::string> names;  // kept alive for the pointers
          names.reserve(p.comm.size() * 4);
          for (const CommSample& s : p.comm) {
            CommRow<std::int32_t> r;
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
          f.write_table("comm", comm_type<std::int32_t>(), rows);
        }
        if (!p.compute.empty()) {
          std::vector<ComputeRow<std::int32_t>> rows;
          for (const ComputeSample& s : p.compute) {
            rows.push_back({s.device.c_str(), s.tp, s.cp, s.micro_batch, s.dense_fwd_s,
                            s.dense_bwd_s, s.ffn_fwd_s, s.ffn_bwd_s});
          }
          f.write_table("compute", compute_type<std::int32_t>(), rows);
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
        if (!p.runs.empty()) {
          std::vector<RunRow> runs;
          std::vector<RunMemoryRow<std::int32_t>> memory;
          std::vector<RunTimerRow> timers;
          for (const ProfileRun& r : p.runs) {
            runs.push_back({r.name.c_str(), r.source.c_str(), r.workload.c_str(), r.cluster.c_str(),
                            r.plan.c_str(), r.latency_s});
            for (const ProfileRun::StagePeak& k : r.peaks)
              memory.push_back({r.name.c_str(), k.rank, k.stage, k.max_allocated_bytes});
            for (const ProfileRun::Timer& t : r.timers)
              timers.push_back({r.name.c_str(), t.name.c_str(), t.seconds});
          }
          f.write_table("runs", run_type(), runs);
          if (!memory.empty()) f.write_table("run_memory", run_memory_type<std::int32_t>(), memory);
          if (!timers.empty()) f.write_table("run_timers", run_timer_type(), timers);
        }
      },
      option);
}

}  // namespace hapmoe
