// Hardening II, items 9 and 14: hostile profile files and archives, and
// bad data that must never be written. The hostile HDF5 files are made
// here with HDF5's C API (links, numbers stored as floats, invalid UTF-8,
// huge names and extents), so the test needs no Python (docs/testing.md,
// "Hostile inputs").
#include <hdf5.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "costmodel/errors.h"
#include "costmodel/measured.h"
#include "io/archive/archive.h"
#include "io/archive/h5.h"
#include "io/profile/profile_h5.h"
#include "tests/io/cli_run.h"

namespace hapmoe {
namespace {

namespace fs = std::filesystem;
using test::run;
using test::scratch_dir;

const std::string kData = std::string(HAPMOE_TEST_DATA) + "/profile/";

// A comm row as a hostile writer may lay it out: `world` as a double.
struct FloatWorldRow {
  const char* primitive;
  const char* link;
  const char* type_a;
  const char* type_b;
  double world;
  double bytes;
  double seconds;
};

h5::Compound<FloatWorldRow> float_world_type() {
  h5::Compound<FloatWorldRow> c;
  HAPMOE_H5_FIELD(c, FloatWorldRow, primitive);
  HAPMOE_H5_FIELD(c, FloatWorldRow, link);
  HAPMOE_H5_FIELD(c, FloatWorldRow, type_a);
  HAPMOE_H5_FIELD(c, FloatWorldRow, type_b);
  HAPMOE_H5_FIELD(c, FloatWorldRow, world);
  HAPMOE_H5_FIELD(c, FloatWorldRow, bytes);
  HAPMOE_H5_FIELD(c, FloatWorldRow, seconds);
  return c;
}

// A profile file header, then whatever `fill` adds.
template <class Fill>
void write_hostile(const std::string& path, Fill fill) {
  h5::File f = h5::File::create(path);
  f.attrs().set("format", "hapmoe-profile");
  f.attrs().set("version", std::int64_t{1});
  fill(f);
  f.close();
}

// A profile with one comm row whose type_a is `name` and world `world`.
void write_comm(const std::string& path, const std::string& name, double world) {
  write_hostile(path, [&](h5::File& f) {
    const FloatWorldRow r{"all-reduce", "intra-node", name.c_str(), name.c_str(), world, 1e6, 1e-3};
    f.write_table("comm", float_world_type(), std::vector<FloatWorldRow>{r});
  });
}

std::string read_error(const std::string& path) {
  try {
    read_profile(path);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

// What writing `prof` to `path` throws ("(no error)" when it is written).
std::string write_error(const std::string& path, const MeasuredProfile& prof) {
  try {
    write_profile_file(path, prof);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

MeasuredProfile small_profile() {
  MeasuredProfile p;
  p.comm.push_back({Primitive::kAllReduce, LinkKind::kIntraNode, "H800", "H800", 8, 1e6, 1e-3});
  p.models.push_back({"mixtral-s", 1.2});
  return p;
}

TEST(ProfileFileHostile, RefusesExternalAndSoftLinks) {
  const fs::path d = scratch_dir("links");
  const std::string other = (d / "other.h5").string();
  write_profile_file(other, small_profile());
  const std::string ext = (d / "ext.h5").string();
  write_hostile(ext, [&](h5::File& f) {
    ASSERT_GE(H5Lcreate_external(other.c_str(), "/comm", f.id(), "comm", H5P_DEFAULT, H5P_DEFAULT),
              0);
  });
  std::string e = read_error(ext);
  EXPECT_NE(e.find("ext.h5:/comm"), std::string::npos) << e;
  EXPECT_NE(e.find("external link"), std::string::npos) << e;
  const std::string soft = (d / "soft.h5").string();
  write_hostile(soft, [&](h5::File& f) {
    f.write_table(
        "compute", float_world_type(),
        std::vector<FloatWorldRow>{{"all-reduce", "intra-node", "H800", "H800", 8, 1, 1}});
    ASSERT_GE(H5Lcreate_soft("/compute", f.id(), "comm", H5P_DEFAULT, H5P_DEFAULT), 0);
  });
  e = read_error(soft);
  EXPECT_NE(e.find("soft.h5:/comm"), std::string::npos) << e;
  EXPECT_NE(e.find("soft link"), std::string::npos) << e;
  fs::remove_all(d);
}

TEST(ProfileFileHostile, RefusesANonIntegralWorldAndReadsAnIntegralOne) {
  const fs::path d = scratch_dir("world");
  const std::string p = (d / "p.h5").string();
  write_comm(p, "H800", 2.5);
  const std::string e = read_error(p);
  EXPECT_NE(e.find("p.h5:/comm[0].world"), std::string::npos) << e;
  EXPECT_NE(e.find("2.5"), std::string::npos) << e;
  write_comm((d / "q.h5").string(), "H800", 4.0);
  EXPECT_EQ(read_profile((d / "q.h5").string()).comm.at(0).world, 4);
  write_comm((d / "r.h5").string(), "H800", 1e300);
  EXPECT_NE(read_error((d / "r.h5").string()).find("world"), std::string::npos);
  fs::remove_all(d);
}

TEST(ProfileFileHostile, RefusesBadNames) {
  const fs::path d = scratch_dir("names");
  const std::string p = (d / "p.h5").string();
  write_comm(p, "H\xff\xfe", 8);
  std::string e = read_error(p);
  EXPECT_NE(e.find("p.h5:/comm[0].type_a"), std::string::npos) << e;
  EXPECT_NE(e.find("UTF-8"), std::string::npos) << e;
  fs::remove(p);
  write_comm(p, std::string(10u << 20, 'x'), 8);
  e = read_error(p);
  EXPECT_NE(e.find("type_a"), std::string::npos) << e;
  EXPECT_NE(e.find("4096"), std::string::npos) << e;
  EXPECT_LT(e.size(), 300u) << e.size();
  fs::remove(p);
  write_comm(p, "a\nb", 8);
  e = read_error(p);
  EXPECT_NE(e.find("control character"), std::string::npos) << e;
  fs::remove_all(d);
}

// A text field stored as a number, and a field missing.
TEST(ProfileFileHostile, RefusesWrongFieldTypesAndMissingFields) {
  struct NumberName {
    double primitive;
  };
  const fs::path d = scratch_dir("types");
  const std::string p = (d / "p.h5").string();
  write_hostile(p, [](h5::File& f) {
    h5::Compound<NumberName> c;
    HAPMOE_H5_FIELD(c, NumberName, primitive);
    f.write_table("comm", c, std::vector<NumberName>{{1.0}});
  });
  std::string e = read_error(p);
  EXPECT_NE(e.find("p.h5:/comm"), std::string::npos) << e;
  EXPECT_NE(e.find("primitive"), std::string::npos) << e;
  EXPECT_NE(e.find("text"), std::string::npos) << e;
  // Every field but `world`: it used to be read as 0.
  struct NoWorld {
    const char* primitive;
    const char* link;
    const char* type_a;
    const char* type_b;
    double bytes;
    double seconds;
  };
  const std::string q = (d / "q.h5").string();
  write_hostile(q, [](h5::File& f) {
    h5::Compound<NoWorld> c;
    HAPMOE_H5_FIELD(c, NoWorld, primitive);
    HAPMOE_H5_FIELD(c, NoWorld, link);
    HAPMOE_H5_FIELD(c, NoWorld, type_a);
    HAPMOE_H5_FIELD(c, NoWorld, type_b);
    HAPMOE_H5_FIELD(c, NoWorld, bytes);
    HAPMOE_H5_FIELD(c, NoWorld, seconds);
    f.write_table("comm", c,
                  std::vector<NoWorld>{{"all-reduce", "intra-node", "H800", "H800", 1e6, 1e-3}});
  });
  e = read_error(q);
  EXPECT_NE(e.find("has no field world"), std::string::npos) << e;
  fs::remove_all(d);
}

TEST(ProfileFileHostile, RefusesAFileAboveTheSizeLimitBeforeReadingIt) {
  const fs::path d = scratch_dir("size");
  const std::string p = (d / "p.h5").string();
  write_profile_file(p, small_profile());
  // The same file, grown (sparse) beyond the limit.
  fs::resize_file(p, kMaxProfileBytes + 1);
  const std::string e = read_error(p);
  EXPECT_NE(e.find("p.h5"), std::string::npos) << e;
  EXPECT_NE(e.find(std::to_string(kMaxProfileBytes + 1)), std::string::npos) << e;
  fs::remove_all(d);
}

// Two million rows that take no room in the file (never written: the
// fill value), so the file is small and only the extent is hostile.
TEST(ProfileFileHostile, RefusesATableAboveTheRowLimit) {
  const fs::path d = scratch_dir("rows");
  const std::string p = (d / "p.h5").string();
  write_hostile(p, [](h5::File& f) {
    const h5::Compound<FloatWorldRow> t = float_world_type();
    const hsize_t dims[1] = {2000000};
    const hid_t space = H5Screate_simple(1, dims, nullptr);
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    const hsize_t chunk[1] = {1024};
    H5Pset_chunk(dcpl, 1, chunk);
    const hid_t ds = H5Dcreate2(f.id(), "comm", t.id(), space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    ASSERT_GE(ds, 0);
    H5Dclose(ds);
    H5Pclose(dcpl);
    H5Sclose(space);
  });
  EXPECT_LT(fs::file_size(p), 1u << 20);
  const std::string e = read_error(p);
  EXPECT_NE(e.find("p.h5:/comm"), std::string::npos) << e;
  EXPECT_NE(e.find("2000000 rows"), std::string::npos) << e;
  fs::remove_all(d);
}

// --- Item 14: nothing invalid is written -------------------------------------------

TEST(ProfileFileHostile, TheWriterRefusesWhatTheReaderWould) {
  const fs::path d = scratch_dir("writer");
  const std::string p = (d / "p.h5").string();
  MeasuredProfile bad = small_profile();
  bad.comm[0].type_a = "";
  std::string e = write_error(p, bad);
  EXPECT_NE(e.find("comm[0].type_a"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(p));
  bad = small_profile();
  bad.models[0].imbalance = 0;
  e = write_error(p, bad);
  EXPECT_NE(e.find("models[0].imbalance"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(p));
  bad = small_profile();
  bad.comm[0].seconds = std::nan("");
  e = write_error(p, bad);
  EXPECT_NE(e.find("comm[0].seconds"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(p));
  EXPECT_TRUE(fs::is_empty(d));
  fs::remove_all(d);
}

// Stored training runs: names unique, their rows naming a stored run,
// and their figures valid, on writing and on reading.
struct MemoryRow {
  const char* run;
  double rank, stage, max_allocated_bytes;
};
h5::Compound<MemoryRow> memory_row_type() {
  h5::Compound<MemoryRow> c;
  HAPMOE_H5_FIELD(c, MemoryRow, run);
  HAPMOE_H5_FIELD(c, MemoryRow, rank);
  HAPMOE_H5_FIELD(c, MemoryRow, stage);
  HAPMOE_H5_FIELD(c, MemoryRow, max_allocated_bytes);
  return c;
}

TEST(ProfileFileHostile, RefusesBadStoredRuns) {
  const fs::path d = scratch_dir("runs");
  const std::string p = (d / "p.h5").string();
  ProfileRun run;
  run.name = "a";
  run.source = "train.log";
  run.workload = run.cluster = run.plan = "{}";
  run.latency_s = 1.0;
  MeasuredProfile bad;
  bad.runs = {run, run};
  std::string e = write_error(p, bad);
  EXPECT_NE(e.find("runs[1].name"), std::string::npos) << e;
  EXPECT_NE(e.find("unique"), std::string::npos) << e;
  bad.runs = {run};
  bad.runs[0].latency_s = 0;
  e = write_error(p, bad);
  EXPECT_NE(e.find("runs[0].latency_s"), std::string::npos) << e;
  bad.runs = {run};
  bad.runs[0].peaks = {{3, 4, 1e9}};
  e = write_error(p, bad);
  EXPECT_NE(e.find("runs[0].peaks[0].stage"), std::string::npos) << e;
  bad.runs = {run};
  bad.runs[0].plan.clear();
  e = write_error(p, bad);
  EXPECT_NE(e.find("runs[0].plan"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(p));
  // merge replaces a run of the same name.
  MeasuredProfile a, b;
  a.runs = {run};
  run.latency_s = 2.0;
  b.runs = {run};
  a.merge(b);
  ASSERT_EQ(a.runs.size(), 1u);
  EXPECT_EQ(a.runs[0].latency_s, 2.0);
  // A memory row of a run the file does not store.
  write_hostile(p, [&](h5::File& f) {
    const MemoryRow r{"ghost", 0, 0, 1e9};
    f.write_table("run_memory", memory_row_type(), std::vector<MemoryRow>{r});
  });
  e = read_error(p);
  EXPECT_NE(e.find("run_memory[0].run"), std::string::npos) << e;
  EXPECT_NE(e.find("ghost"), std::string::npos) << e;
  fs::remove_all(d);
}

TEST(ProfileFileHostile, ImportWithAnEmptyDeviceWritesNothing) {
  const fs::path d = scratch_dir("import");
  const std::string out = (d / "p.h5").string();
  const auto r = run({"profile", "import", "--nccl", kData + "all_reduce_perf_h800_intra8.log",
                      "--device", "", "--link", "intra-node", "--out", out});
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("--device"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
  fs::remove_all(d);
}

TEST(ProfileFileHostile, FitWithHugeRouterTokensWritesNothing) {
  const fs::path d = scratch_dir("fit");
  const std::string out = (d / "p.h5").string();
  const std::string csv = (d / "router.csv").string();
  std::ofstream(csv) << "iteration,layer,expert,tokens\n0,0,0,1e308\n0,0,1,1e308\n0,0,2,1\n";
  const auto r = run({"profile", "fit", "--model", "mixtral-s", "--cluster", "H800:8", "--router",
                      csv, "--out", out});
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("tokens"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("nan"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(out));
  fs::remove_all(d);
}

// --- Item 14: show --------------------------------------------------------------------

// Opens `path` for writing with HDF5's C API (the hostile edits below).
struct RawFile {
  hid_t id;
  explicit RawFile(const std::string& path)
      : id(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT)) {}
  ~RawFile() { H5Fclose(id); }
};

void set_int_attribute(hid_t object, const char* name, std::int64_t v) {
  H5Adelete(object, name);
  const hid_t space = H5Screate(H5S_SCALAR);
  const hid_t a = H5Acreate2(object, name, H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(a, H5T_NATIVE_INT64, &v);
  H5Aclose(a);
  H5Sclose(space);
}

void set_string_attribute(hid_t object, const char* name, const char* v) {
  H5Adelete(object, name);
  const hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, H5T_VARIABLE);
  const hid_t space = H5Screate(H5S_SCALAR);
  const hid_t a = H5Acreate2(object, name, t, space, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(a, t, &v);
  H5Aclose(a);
  H5Sclose(space);
  H5Tclose(t);
}

std::string plan_archive(const fs::path& d, const std::string& name) {
  const std::string a = (d / name).string();
  const auto r = run({"plan", "--model", "tests/data/models/small-moe.json", "--cluster", "H800:8",
                      "--top-k", "2", "--out", a});
  EXPECT_EQ(r.code, 0) << r.err;
  return a;
}

TEST(ShowHostile, RefusesAnotherFormatVersion) {
  const fs::path d = scratch_dir("version");
  const std::string a = plan_archive(d, "a.h5");
  {
    RawFile f(a);
    set_int_attribute(f.id, "format_version", 99);
  }
  const auto r = run({"show", a});
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.err.find("format_version 99"), std::string::npos) << r.err;
  fs::remove_all(d);
}

TEST(ShowHostile, RefusesNonFiniteFigures) {
  const fs::path d = scratch_dir("figures");
  const std::string a = plan_archive(d, "a.h5");
  {
    RawFile f(a);
    // latency_s of every plan row: NaN (a partial compound write).
    struct Latency {
      double latency_s;
    };
    const hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(Latency));
    H5Tinsert(t, "latency_s", HOFFSET(Latency, latency_s), H5T_NATIVE_DOUBLE);
    const hid_t ds = H5Dopen2(f.id, "/plans/plans", H5P_DEFAULT);
    const hid_t space = H5Dget_space(ds);
    std::vector<Latency> rows(static_cast<std::size_t>(H5Sget_simple_extent_npoints(space)),
                              Latency{std::nan("")});
    ASSERT_GE(H5Dwrite(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows.data()), 0);
    H5Sclose(space);
    H5Dclose(ds);
    H5Tclose(t);
  }
  const auto r = run({"show", a});
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.err.find("/plans/plans[0].latency_s"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");  // nothing of the summary before the error
  fs::remove_all(d);
}

TEST(ShowHostile, RefusesASweepWithoutItsSweepGroupAndAnUnknownKind) {
  const fs::path d = scratch_dir("sweep");
  const std::string a = (d / "c.h5").string();
  const auto c = run({"compare", "--model", "tests/data/models/small-moe.json", "--cluster",
                      "H800:8", "--out", a});
  ASSERT_EQ(c.code, 0) << c.err;
  {
    RawFile f(a);
    set_string_attribute(f.id, "kind", "sweep");
  }
  auto r = run({"show", a});
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.err.find("/sweep"), std::string::npos) << r.err;
  {
    RawFile f(a);
    set_string_attribute(f.id, "kind", "mystery");
  }
  r = run({"show", a});
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.err.find("mystery"), std::string::npos) << r.err;
  fs::remove_all(d);
}

}  // namespace
}  // namespace hapmoe
