// The HDF5 archive and sweeps through run_cli, in-process (issue 5):
// --out on plan and evaluate, hapmoe show, bad output paths found before
// any search, a failed write that leaves the old archive, sweep files and
// --resume. tests/io/archive/archive_plan.sh and sweep_kill.sh cover h5dump, h5py,
// MPI and kills.
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "costmodel/errors.h"
#include "io/archive/archive.h"
#include "io/archive/archive_lock.h"
#include "io/archive/archive_rows.h"
#include "io/archive/h5.h"
#include "io/archive/sweep.h"
#include "io/cli/cli.h"
#include "io/inputs/cluster_io.h"
#include "io/inputs/json_strict.h"
#include "io/inputs/model_io.h"
#include "tests/io/cli_run.h"

namespace hapmoe {
namespace {

namespace fs = std::filesystem;
using test::CliRun;
using test::run;
using test::scratch_dir;
using test::slurp;

void spit(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

bool has_temporaries(const fs::path& dir) {
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().find(".tmp.") != std::string::npos) return true;
  }
  return false;
}

std::string line_starting(const std::string& text, const std::string& prefix) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0) return line;
  }
  return "";
}

const std::vector<std::string> kPlanArgs = {"plan",       "--model",   "mixtral-s", "--cluster",
                                            "paper:16-1", "--threads", "1"};

std::vector<std::string> plan_to(const fs::path& out) {
  std::vector<std::string> a = kPlanArgs;
  a.emplace_back("--out");
  a.push_back(out.string());
  return a;
}

TEST(Archive, PlanOutThenShowPrintsTheSameBestPlan) {
  const fs::path d = scratch_dir("plan");
  const CliRun p = run(plan_to(d / "run.h5"));
  ASSERT_EQ(p.code, kExitOk) << p.err;
  EXPECT_FALSE(has_temporaries(d));
  const CliRun s = run({"show", (d / "run.h5").string()});
  ASSERT_EQ(s.code, kExitOk) << s.err;
  // "plan     PP=4 ..., 256 micro-batches, 16 devices in use" vs "best plan  PP=4 ..."
  std::string want = line_starting(p.out, "plan     ").substr(9);
  want = want.substr(0, want.find(" devices in use"));
  EXPECT_NE(s.out.find("best plan  " + want), std::string::npos) << s.out;
  EXPECT_EQ(line_starting(s.out, "iteration latency"), line_starting(p.out, "iteration latency"));
  for (const char* k : {"(plan, format 1)", "top 5", "configurations", "pruned: load balance",
                        "feasible plans", "command: hapmoe plan --model mixtral-s"}) {
    EXPECT_NE(s.out.find(k), std::string::npos) << k << "\n" << s.out;
  }
}

// Nothing fits: exit 3, and the archive is still written, with no plans
// but every configuration's statistics.
TEST(Archive, NoFitStillWritesTheArchive) {
  const fs::path d = scratch_dir("nofit");
  const CliRun p = run({"plan", "--model", "mixtral-l", "--cluster", "paper:16-1", "--threads", "1",
                        "--out", (d / "run.h5").string()});
  ASSERT_EQ(p.code, kExitNoFit) << p.err;
  const CliRun s = run({"show", (d / "run.h5").string()});
  ASSERT_EQ(s.code, kExitOk) << s.err;
  EXPECT_NE(s.out.find("no plan (nothing fits in memory)"), std::string::npos) << s.out;
  const h5::File f = h5::File::open_read((d / "run.h5").string());
  EXPECT_EQ(f.open_group("plans").extent("plans"), 0u);
  EXPECT_GT(f.open_group("search").extent("configs"), 0u);
}

TEST(Archive, TablesReadBackThroughTheWrapper) {
  const fs::path d = scratch_dir("tables");
  ASSERT_EQ(run(plan_to(d / "run.h5")).code, kExitOk);
  const h5::File f = h5::File::open_read((d / "run.h5").string());
  EXPECT_EQ(f.attrs().get_string("format"), kArchiveFormat);
  EXPECT_EQ(f.attrs().get_string("kind"), "plan");
  const h5::Group plans = f.open_group("plans");
  EXPECT_EQ(plans.extent("plans"), 5u);
  const auto offsets = plans.read_array<std::int64_t>("stage_offsets");
  ASSERT_EQ(offsets.size(), 6u);
  EXPECT_EQ(static_cast<std::size_t>(offsets.back()), plans.extent("stages"));
  const h5::Group search = f.open_group("search");
  EXPECT_GT(search.extent("configs"), 100u);
  EXPECT_EQ(search.extent("ranks"), 1u);
  EXPECT_EQ(search.extent("totals"), 1u);
  // Every unit of work handed out, with the rank that searched it: here
  // one per configuration searched.
  std::vector<archive::UnitRow> units;
  search.read_table<archive::UnitRow>("units", archive::unit_row_type(),
                                      [&](const archive::UnitRow& u) { units.push_back(u); });
  std::vector<archive::ConfigRow> configs;
  search.read_table<archive::ConfigRow>("configs", archive::config_row_type(),
                                        [&](const archive::ConfigRow& c) { configs.push_back(c); });
  std::int64_t searched = 0;
  for (const archive::ConfigRow& c : configs) searched += c.searched;
  ASSERT_EQ(static_cast<std::int64_t>(units.size()), searched);
  std::int64_t transitions = 0;
  for (const archive::UnitRow& u : units) {
    ASSERT_LT(static_cast<std::size_t>(u.config), configs.size());
    EXPECT_EQ(configs[static_cast<std::size_t>(u.config)].searched, 1);
    EXPECT_EQ(u.rank, 0);
    EXPECT_EQ(u.parts, 1);
    EXPECT_GT(u.work_estimate, 0.0);
    transitions += u.transitions;
  }
  std::int64_t total = -1;
  search.read_table<archive::TotalsRow>(
      "totals", archive::totals_row_type(),
      [&](const archive::TotalsRow& t) { total = t.transitions; });
  EXPECT_EQ(transitions, total);
  const h5::Group prov = f.open_group("provenance");
  EXPECT_EQ(prov.attrs().get_int("ranks"), 1);
  EXPECT_EQ(prov.attrs().get_int("threads"), 1);
  EXPECT_FALSE(prov.attrs().get_string("host").empty());
  EXPECT_EQ(prov.attrs().get_string("start_time").size(), 24u);  // 2026-11-22T19:02:03.123Z
}

// The seed incumbent goes with the search's attributes: a large Pi is
// seeded (DeepSeek-V3, 60,120 configurations), the paper's cases are not.
TEST(Archive, SeedIsRecordedWithTheSearch) {
  const fs::path d = scratch_dir("seed");
  const CliRun p = run({"plan", "--model", "deepseek-v3", "--cluster", "H800:512,910B:512",
                        "--threads", "1", "--out", (d / "seeded.h5").string()});
  ASSERT_EQ(p.code, kExitOk) << p.err;
  EXPECT_NE(p.out.find("seeded at"), std::string::npos) << p.out;
  const CliRun shown = run({"show", (d / "seeded.h5").string()});
  ASSERT_EQ(shown.code, kExitOk) << shown.err;
  EXPECT_NE(shown.out.find("  seeded at "), std::string::npos) << shown.out;
  {
    const h5::File f = h5::File::open_read((d / "seeded.h5").string());
    const h5::Attributes a = f.open_group("search").attrs();
    EXPECT_GT(a.get_int("seed_searches"), 0);
    double best = 0;
    f.open_group("plans").read_table<archive::PlanRow>(
        "plans", archive::plan_row_type(),
        [&](const archive::PlanRow& r) { best = best == 0 ? r.latency_s : best; });
    EXPECT_GE(a.get_double("seed_s"), best);
    EXPECT_GT(best, 0.0);
  }
  ASSERT_EQ(run(plan_to(d / "plain.h5")).code, kExitOk);
  const h5::File f = h5::File::open_read((d / "plain.h5").string());
  EXPECT_EQ(f.open_group("search").attrs().get_int("seed_searches"), 0);
  EXPECT_EQ(f.open_group("search").attrs().get_double("seed_s"), 0.0);
}

TEST(Archive, EvaluateOut) {
  const fs::path d = scratch_dir("evaluate");
  const std::string plan =
      std::string(HAPMOE_SOURCE_DIR) + "/examples/plans/mixtral-s-paper-16-1.json";
  const CliRun e = run({"evaluate", "--model", "mixtral-s", "--cluster", "paper:16-1", "--plan",
                        plan, "--out", (d / "e.h5").string()});
  ASSERT_EQ(e.code, kExitOk) << e.err;
  const CliRun s = run({"show", (d / "e.h5").string()});
  ASSERT_EQ(s.code, kExitOk) << s.err;
  EXPECT_NE(s.out.find("(evaluate, format 1)"), std::string::npos) << s.out;
  EXPECT_EQ(line_starting(s.out, "iteration latency"), line_starting(e.out, "iteration latency"));
  EXPECT_EQ(s.out.find("\nsearch\n"), std::string::npos);
  const h5::File f = h5::File::open_read((d / "e.h5").string());
  const h5::Group inputs = f.open_group("inputs");
  std::ifstream in(plan);
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  EXPECT_EQ(inputs.attrs().get_string("plan_file_text"), text);
}

// Bad --out paths: exit 2, a message naming --out and the path, and no
// search output (the check comes first).
void expect_bad_out(const fs::path& out, const std::string& why) {
  const CliRun r = run(plan_to(out));
  EXPECT_EQ(r.code, kExitInput) << r.out;
  EXPECT_NE(r.err.find("--out " + out.string()), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(why), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("iteration latency"), std::string::npos) << "searched first:\n" << r.out;
}

TEST(Archive, BadOutPathsFailBeforeTheSearch) {
  const fs::path d = scratch_dir("bad");
  expect_bad_out(d / "missing" / "run.h5", "does not exist");
  expect_bad_out("/proc/hapmoe-test.h5", "cannot create a file in /proc");
  fs::create_directories(d / "dir.h5");
  expect_bad_out(d / "dir.h5", "is a directory");
  spit(d / "notes.h5", "my notes\n");
  expect_bad_out(d / "notes.h5", "is not an HDF5 file");
  EXPECT_EQ(slurp(d / "notes.h5"), "my notes\n");
}

TEST(Archive, ReadOnlyDirectory) {
  if (::geteuid() == 0) GTEST_SKIP() << "root ignores permission bits (/proc covers this)";
  const fs::path d = scratch_dir("readonly");
  fs::permissions(d, fs::perms::owner_read | fs::perms::owner_exec);
  expect_bad_out(d / "run.h5", "cannot create a file");
  fs::permissions(d, fs::perms::owner_all);
}

TEST(Archive, FailedWriteLeavesTheOldArchive) {
  const fs::path d = scratch_dir("failed");
  ASSERT_EQ(run(plan_to(d / "run.h5")).code, kExitOk);
  const std::string before = slurp(d / "run.h5");
  g_archive_before_rename = [](const std::string&) {
    throw InputError("--out", "injected failure before the rename");
  };
  std::vector<std::string> args = plan_to(d / "run.h5");
  args.emplace_back("--top-k");
  args.emplace_back("2");
  const CliRun r = run(args);
  g_archive_before_rename = nullptr;
  EXPECT_EQ(r.code, kExitInput);
  EXPECT_NE(r.err.find("injected failure"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(d / "run.h5"), before);
  EXPECT_FALSE(has_temporaries(d));
  // And a successful write replaces it.
  ASSERT_EQ(run(args).code, kExitOk);
  EXPECT_NE(slurp(d / "run.h5"), before);
}

TEST(Archive, StaleTemporariesOfDeadWritersAreRemoved) {
  const fs::path d = scratch_dir("stale");
  spit(d / ".run.h5.tmp.999999999", "half");  // no such pid
  spit(d / ".run.h5.tmp.1", "init's");        // a live pid: left alone
  ASSERT_EQ(run(plan_to(d / "run.h5")).code, kExitOk);
  EXPECT_FALSE(fs::exists(d / ".run.h5.tmp.999999999"));
  EXPECT_TRUE(fs::exists(d / ".run.h5.tmp.1"));
}

// Hardening II, items 7 and 16: --out names up to NAME_MAX (255 bytes)
// work (the temporary's name once added 15 characters), and a symlink
// planted at the old predictable temporary name is neither followed nor
// in the way.
TEST(Archive, LongNamesAndPlantedSymlinks) {
  const fs::path d = scratch_dir("long");
  for (const std::size_t n : {248u, 255u}) {
    const fs::path out = d / (std::string(n - 3, 'r') + ".h5");
    const CliRun r = run(plan_to(out));
    EXPECT_EQ(r.code, kExitOk) << n << ": " << r.err;
    EXPECT_TRUE(h5::is_hdf5(out.string())) << n;
  }
  EXPECT_FALSE(has_temporaries(d));
  const fs::path victim = d / "victim.txt";
  spit(victim, "precious");
  fs::create_symlink(victim, d / (".run.h5.tmp." + std::to_string(::getpid())));
  const CliRun r = run(plan_to(d / "run.h5"));
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(slurp(victim), "precious");
  EXPECT_TRUE(h5::is_hdf5((d / "run.h5").string()));
}

TEST(Archive, StaleTemporariesInTheNewFormAreRemoved) {
  const fs::path d = scratch_dir("stale_new");
  spit(d / ".run.h5.tmp.999999999.a1B2c3", "half");  // no such pid
  spit(d / ".run.h5.tmp.1.a1B2c3", "init's");        // a live pid: left alone
  ASSERT_EQ(run(plan_to(d / "run.h5")).code, kExitOk);
  EXPECT_FALSE(fs::exists(d / ".run.h5.tmp.999999999.a1B2c3"));
  EXPECT_TRUE(fs::exists(d / ".run.h5.tmp.1.a1B2c3"));
}

// Issue 21: one run per archive. A second lock of the same archive (here
// in the same process: flock is per open file) is refused with the
// holder's pid, host and start, and so is a command given that --out;
// released, the lock file is gone and the next run goes ahead.
TEST(ArchiveLock, ExclusiveAndSaysWhoHoldsIt) {
  const fs::path d = scratch_dir("lock");
  const std::string out = (d / "run.h5").string();
  const std::string holder = "pid " + std::to_string(::getpid()) + " on host " + host_name();
  {
    const ArchiveLock lock(out);
    EXPECT_TRUE(lock.unsupported().empty());
    EXPECT_EQ(lock.lock_path(), out + ".lock");
    EXPECT_EQ(slurp(lock.lock_path()).rfind(holder + " since 20", 0), 0u);
    try {
      const ArchiveLock second(out);
      ADD_FAILURE() << "a second lock was taken";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("is being written by another run (" + holder),
                std::string::npos)
          << e.what();
    }
    const CliRun r = run(plan_to(d / "run.h5"));
    EXPECT_EQ(r.code, kExitInput);
    EXPECT_NE(r.err.find(holder), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out));
    const ArchiveLock moved = [&] {
      ArchiveLock other((d / "other.h5").string());
      return other;
    }();
    EXPECT_THROW(ArchiveLock((d / "other.h5").string()), InputError);
  }
  EXPECT_FALSE(fs::exists(out + ".lock"));
  EXPECT_FALSE(fs::exists(d / "other.h5.lock"));
  EXPECT_EQ(run(plan_to(d / "run.h5")).code, kExitOk);
}

// A lock file nobody holds (left by a killed run) blocks nothing; one that
// is a directory, a symlink or a FIFO is refused, never followed or waited
// on; the lock file of a 255-byte name still fits NAME_MAX.
TEST(ArchiveLock, LeftBehindAndHostileLockFiles) {
  const fs::path d = scratch_dir("lock_hostile");
  spit(d / "left.h5.lock", "pid 1 on host elsewhere since 2026-01-01T00:00:00.000Z\n");
  {
    const ArchiveLock lock((d / "left.h5").string());
    EXPECT_EQ(slurp(d / "left.h5.lock").find("elsewhere"), std::string::npos);
  }
  fs::create_directory(d / "dir.h5.lock");
  EXPECT_THROW(ArchiveLock((d / "dir.h5").string()), InputError);
  spit(d / "victim.txt", "precious");
  fs::create_symlink(d / "victim.txt", d / "link.h5.lock");
  EXPECT_THROW(ArchiveLock((d / "link.h5").string()), InputError);
  EXPECT_EQ(slurp(d / "victim.txt"), "precious");
  ASSERT_EQ(::mkfifo((d / "fifo.h5.lock").c_str(), 0644), 0);
  EXPECT_THROW(ArchiveLock((d / "fifo.h5").string()), InputError);
  const std::string longest = (d / std::string(255, 'r')).string();
  EXPECT_EQ(fs::path(archive_lock_path(longest)).filename().string().size(), 255u);
  const ArchiveLock lock(longest);
  EXPECT_TRUE(fs::exists(archive_lock_path(longest)));
}

// Hardening II, item 13: `show` of a FIFO with no writer fails at once
// (it once waited forever in the open).
TEST(Archive, ShowRefusesAFifo) {
  const fs::path d = scratch_dir("fifo");
  ASSERT_EQ(::mkfifo((d / "x.h5").c_str(), 0644), 0);
  const CliRun r = run({"show", (d / "x.h5").string()});
  EXPECT_EQ(r.code, kExitInput);
  EXPECT_NE(r.err.find("is a FIFO"), std::string::npos) << r.err;
}

TEST(Archive, ShowRejectsWhatIsNotAnArchive) {
  const fs::path d = scratch_dir("show");
  spit(d / "x.h5", "text");
  CliRun r = run({"show", (d / "x.h5").string()});
  EXPECT_EQ(r.code, kExitInput);
  EXPECT_NE(r.err.find("is not an HDF5 file"), std::string::npos) << r.err;
  r = run({"show", (d / "none.h5").string()});
  EXPECT_EQ(r.code, kExitInput);
  {
    h5::File f = h5::File::create((d / "other.h5").string());
    f.close();
  }
  r = run({"show", (d / "other.h5").string()});
  EXPECT_EQ(r.code, kExitInput);
  EXPECT_NE(r.err.find("not a hapmoe archive"), std::string::npos) << r.err;
  r = run({"show"});
  EXPECT_EQ(r.code, kExitInput);
}

TEST(Archive, AttributesOutliveTheirGroup) {
  // Regression: `show` read a sweep's attributes through a temporary Group,
  // whose handle closed before the read ("not a location").
  const fs::path d = scratch_dir("attrs");
  const std::string path = (d / "a.h5").string();
  {
    h5::File f = h5::File::create(path);
    f.create_group("g").attrs().set("x", "value");
    f.close();
  }
  const h5::File f = h5::File::open_read(path);
  EXPECT_EQ(f.open_group("g").attrs().get_string("x"), "value");
  const h5::Attributes kept = f.open_group("g").attrs();
  EXPECT_TRUE(kept.has("x"));
  fs::remove_all(d);
}

// --- Sweeps -----------------------------------------------------------------

TEST(SweepFile, ProductOrderDefaultsAndNames) {
  const SweepDefinition s = parse_sweep_json(R"({
    "defaults": {"top_k": 3, "delta": 0.3},
    "cases": [{"name": "first", "model": "mixtral-s", "cluster": "paper:16-1", "prune": "none"}],
    "product": {"model": "mixtral-s", "cluster": ["paper:16-1", "paper:24-3"],
                "eta": [1, 4], "uniform": true}
  })",
                                             "s.json");
  ASSERT_EQ(s.cases.size(), 5u);
  EXPECT_EQ(s.cases[0].name, "first");
  EXPECT_EQ(s.cases[0].options.prune, (PruneSet{false, false, false}));
  EXPECT_EQ(s.cases[0].options.top_k, 3);
  EXPECT_DOUBLE_EQ(s.cases[0].options.delta, 0.3);
  // Axes in key order, the last fastest: cluster, then eta.
  EXPECT_EQ(s.cases[1].name, "mixtral-s paper:16-1 eta=1 uniform=true");
  EXPECT_EQ(s.cases[2].name, "mixtral-s paper:16-1 eta=4 uniform=true");
  EXPECT_EQ(s.cases[3].cluster, "paper:24-3");
  EXPECT_DOUBLE_EQ(s.cases[4].options.eta, 4.0);
  EXPECT_TRUE(s.cases[4].options.uniform);
  EXPECT_EQ(s.cases[4].options.top_k, 3);
}

// Fidelity II's training knobs are sweep fields too: the paper's Mixtral-L
// cases with optimizer offload, FSDP levels, activation offload, the FP8
// recipe; resolved into the case's JSON.
TEST(SweepFile, ShardingOffloadAndRecipeFields) {
  const SweepDefinition s = parse_sweep_json(R"({
    "product": {"model": "mixtral-l", "cluster": ["paper:16-1-h", "paper:24-1"],
                "optimizer_offload_fraction": 1.0},
    "cases": [{"name": "z3", "model": "mixtral-s", "cluster": "paper:16-1",
               "fsdp": "optim_grads_params", "activation_offload_layers": 2},
              {"name": "f8", "model": "mixtral-s", "cluster": "H100:16",
               "precision": "fp8", "fp8_recipe": "blockwise"}]
  })",
                                             "s.json");
  ASSERT_EQ(s.cases.size(), 4u);
  EXPECT_EQ(s.cases[0].overrides.fsdp, Fsdp::kOptimGradsParams);
  EXPECT_EQ(s.cases[0].overrides.activation_offload_layers, 2);
  EXPECT_EQ(s.cases[0].resolved.at("fsdp"), "optim_grads_params");
  EXPECT_EQ(s.cases[1].overrides.fp8_recipe, Fp8Recipe::kBlockwise);
  EXPECT_EQ(s.cases[1].resolved.at("fp8_recipe"), "blockwise");
  EXPECT_EQ(s.cases[2].overrides.optimizer_offload_fraction, 1.0);
  EXPECT_EQ(s.cases[3].resolved.at("optimizer_offload_fraction"), 1.0);
  EXPECT_TRUE(s.cases[2].resolved.at("fsdp").is_null());
}

void expect_sweep_error(const std::string& text, const std::string& where) {
  try {
    parse_sweep_json(text, "s.json");
    ADD_FAILURE() << "accepted: " << text;
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(where), std::string::npos) << e.what();
  }
}

TEST(SweepFile, StrictErrorsNameTheField) {
  expect_sweep_error(R"({"cases": [{"model": "m", "cluster": "c", "bogus": 1}]})",
                     "s.json:/cases/0/bogus: unknown field");
  expect_sweep_error(R"({"product": {"model": "m", "cluster": []}})",
                     "s.json:/product/cluster: is an empty axis");
  expect_sweep_error(
      R"({"cases": [{"model": "m", "cluster": "c"}, {"model": "m", "cluster": "c"}]})",
      "appears twice");
  expect_sweep_error(R"({"description": "nothing"})", "has no cases");
  expect_sweep_error(R"({"case": []})", "s.json:/case: unknown field");
  expect_sweep_error(R"({"cases": [{"model": "m", "cluster": "c", "delta": -1}]})", "delta");
  expect_sweep_error(R"({"cases": [{"model": "m", "cluster": "c", "prune": "lb,x"}]})", "prune");
  expect_sweep_error(R"({"cases": [{"model": "m"}]})", "cluster");
  expect_sweep_error(R"({"product": {"name": "x", "model": "m", "cluster": "c"}})",
                     "/product/name");
  expect_sweep_error(R"({"defaults": {"top_k": 0}, "cases": [{"model": "m", "cluster": "c"}]})",
                     "top_k");
}

TEST(Sweep, BaselineCasesGiveGeometricMeansNormalisedToMi) {
  const fs::path d = scratch_dir("sweep_baselines");
  spit(d / "s.json", R"({"defaults": {"top_k": 1}, "product": {"model": "mixtral-s",
    "cluster": ["paper:16-2", "paper:32-2"], "baseline": ["hapmoe", "mi", "uniform"]}})");
  const std::string out = (d / "s.h5").string();
  CliRun r = run({"sweep", (d / "s.json").string(), "--out", out, "--threads", "1"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  r = run({"show", out});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_NE(r.out.find("baselines, normalised to mi"), std::string::npos) << r.out;
  // Per case, the same plans as `plan --baseline`; the mean is over both
  // clusters.
  double log_ratio = 0.0;
  for (const char* cluster : {"paper:16-2", "paper:32-2"}) {
    const std::string hj = (d / "h.json").string();
    const std::string mj = (d / "m.json").string();
    ASSERT_EQ(run({"plan", "--model", "mixtral-s", "--cluster", cluster, "--top-k", "1",
                   "--plan-json", hj})
                  .code,
              kExitOk);
    ASSERT_EQ(run({"plan", "--model", "mixtral-s", "--cluster", cluster, "--baseline", "mi",
                   "--plan-json", mj})
                  .code,
              kExitOk);
    const auto tokens = [](const std::string& path) {
      return parse_json(slurp(path), path)
          .at("plans")
          .at(0)
          .at("throughput_tokens_per_s")
          .get<double>();
    };
    log_ratio += std::log(tokens(hj) / tokens(mj));
  }
  char expected[64];
  std::snprintf(expected, sizeof expected, "hapmoe            %9.2fx", std::exp(log_ratio / 2));
  EXPECT_NE(r.out.find(expected), std::string::npos) << expected << "\n" << r.out;
  EXPECT_NE(r.out.find("mi                     1.00x    1.00x  2"), std::string::npos) << r.out;
  // A baseline name is checked like every field.
  spit(d / "bad.json", R"({"cases": [{"model": "m", "cluster": "c", "baseline": "alpa"}]})");
  r = run({"sweep", (d / "bad.json").string(), "--out", (d / "bad.h5").string()});
  EXPECT_EQ(r.code, kExitInput);
  EXPECT_NE(r.err.find("/cases/0/baseline"), std::string::npos) << r.err;
  fs::remove_all(d);
}

constexpr const char* kTwoCases = R"({
  "cases": [{"model": "mixtral-s", "cluster": "paper:16-1"},
            {"model": "mixtral-s", "cluster": "paper:16-2", "prune": "lb,mem", "top_k": 2}]
})";

TEST(Sweep, RunsResumesAndRefusesToOverwrite) {
  const fs::path d = scratch_dir("sweep");
  spit(d / "s.json", kTwoCases);
  const std::string out = (d / "s.h5").string();
  CliRun r = run({"sweep", (d / "s.json").string(), "--out", out, "--threads", "1"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_NE(r.err.find("hapmoe sweep: 2/2 cases"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("2 of 2 cases done (complete)"), std::string::npos) << r.out;
  const std::string first = slurp(out);
  // Without --resume an existing archive is never overwritten.
  r = run({"sweep", (d / "s.json").string(), "--out", out});
  EXPECT_EQ(r.code, kExitInput);
  EXPECT_NE(r.err.find("pass --resume"), std::string::npos) << r.err;
  // With it, nothing is left to do.
  r = run({"sweep", (d / "s.json").string(), "--out", out, "--resume"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_NE(r.err.find("2 of 2 cases already done"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(out), first);
  // show --case prints one case in full.
  r = run({"show", out, "--case", "mixtral-s paper:16-2 prune=lb,mem top_k=2"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_NE(r.out.find("top 2"), std::string::npos) << r.out;
  // Another sweep cannot resume this archive.
  spit(d / "t.json", R"({"cases": [{"model": "mixtral-s", "cluster": "paper:16-3"}]})");
  r = run({"sweep", (d / "t.json").string(), "--out", out, "--resume"});
  EXPECT_EQ(r.code, kExitInput);
  EXPECT_NE(r.err.find("holds another sweep"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(out), first);
}

TEST(Sweep, BadCaseInputFailsBeforeAnySearch) {
  const fs::path d = scratch_dir("sweep_bad");
  spit(d / "s.json", R"({"cases": [{"model": "mixtral-s", "cluster": "paper:16-1"},
                                  {"model": "no-such-model", "cluster": "paper:16-1"}]})");
  const CliRun r = run({"sweep", (d / "s.json").string(), "--out", (d / "s.h5").string()});
  EXPECT_EQ(r.code, kExitInput);
  EXPECT_NE(r.err.find("case 1 (no-such-model paper:16-1)"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(d / "s.h5"));
  EXPECT_EQ(r.err.find("cases,"), std::string::npos) << "a case ran:\n" << r.err;
}

// --checkpoint-every S: finished cases wait for the interval (here the end
// of the sweep) and are committed together.
TEST(Sweep, CheckpointEveryBatchesCommits) {
  const fs::path d = scratch_dir("sweep_interval");
  spit(d / "s.json", kTwoCases);
  const std::string out = (d / "s.h5").string();
  static int commits = 0;
  commits = 0;
  g_archive_before_rename = [](const std::string&) { ++commits; };
  const CliRun r = run({"sweep", (d / "s.json").string(), "--out", out, "--threads", "1",
                        "--checkpoint-every", "3600"});
  g_archive_before_rename = nullptr;
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(commits, 1);
  EXPECT_NE(r.out.find("2 of 2 cases done (complete)"), std::string::npos) << r.out;
}

// count_only (plan --count-only): the plain DP counted, bound off, in the
// resolved case only when set (older sweeps resume unchanged), refused
// with a baseline; the case is written with status "counted" and the
// plain DP's counters.
TEST(Sweep, CountOnlyCasesAreCountedNotSearched) {
  const SweepDefinition s = parse_sweep_json(R"({"cases": [
      {"name": "counted", "model": "mixtral-s", "cluster": "paper:16-1", "count_only": true},
      {"name": "searched", "model": "mixtral-s", "cluster": "paper:16-1"}]})",
                                             "s.json");
  ASSERT_EQ(s.cases.size(), 2u);
  EXPECT_TRUE(s.cases[0].options.count_only);
  EXPECT_FALSE(s.cases[0].options.bound);
  EXPECT_TRUE(s.cases[0].resolved.at("count_only").get<bool>());
  EXPECT_FALSE(s.cases[1].options.count_only);
  EXPECT_FALSE(s.cases[1].resolved.contains("count_only"));
  EXPECT_THROW(parse_sweep_json(R"({"cases": [{"model": "mixtral-s", "cluster": "paper:16-1",
                                    "count_only": true, "baseline": "mi"}]})",
                                "s.json"),
               InputError);
  const fs::path d = scratch_dir("sweep_count");
  spit(d / "s.json", R"({"cases": [{"name": "counted", "model": "mixtral-s",
                                    "cluster": "paper:16-1", "prune": "lb", "count_only": true}]})");
  const std::string out = (d / "s.h5").string();
  const CliRun r = run({"sweep", (d / "s.json").string(), "--out", out, "--threads", "1"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_NE(r.err.find("counted: "), std::string::npos) << r.err;
  const CliRun plain = run({"plan", "--model", "mixtral-s", "--cluster", "paper:16-1", "--prune",
                            "lb", "--no-bound", "--threads", "1"});
  const CliRun shown = run({"show", out, "--case", "counted"});
  ASSERT_EQ(shown.code, kExitOk) << shown.err;
  const auto at = plain.out.find("DP states");
  ASSERT_NE(at, std::string::npos);
  const std::string states = plain.out.substr(at, plain.out.find('\n', at) - at);
  EXPECT_NE(shown.out.find("counted"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find(states.substr(10)), std::string::npos) << states << "\n" << shown.out;
}

// A case may search the job-wide knobs as `plan --space` does; its archive
// holds the best plan with its knobs (VPP in the plan row, the others in
// the workload), the same plan as `plan --space` finds. (Over 2 ranks with
// --spread cases, where the knobs travel with the result:
// tests/data/sweeps/small.json's last case in archive.sweep_kill_resume_mpi*.)
TEST(Sweep, SpaceCasesSearchTheJobWideKnobsAsPlanDoes) {
  const SweepDefinition s = parse_sweep_json(R"({"cases": [
      {"name": "job", "model": "mixtral-s", "cluster": "paper:32-2", "space": "micro-batch,vpp",
       "max_vpp": 3},
      {"name": "plain", "model": "mixtral-s", "cluster": "paper:32-2"}]})",
                                             "s.json");
  ASSERT_EQ(s.cases.size(), 2u);
  EXPECT_TRUE(s.cases[0].job.has(JobDim::kVpp));
  EXPECT_EQ(s.cases[0].job.max_vpp, 3);
  EXPECT_EQ(s.cases[0].resolved.at("space"), "micro-batch,vpp");
  EXPECT_FALSE(s.cases[1].resolved.contains("space"));  // earlier sweeps resolve the same
  // Megatron's recipes' overlaps with a space, as plan --space (--overlaps).
  EXPECT_EQ(s.cases[0].job.overlaps, JobOverlaps::kRecipe);
  EXPECT_EQ(s.cases[0].resolved.at("overlaps"), "recipe");
  EXPECT_FALSE(s.cases[1].resolved.contains("overlaps"));
  EXPECT_EQ(parse_sweep_json(R"({"cases": [{"model": "mixtral-s", "cluster": "paper:16-1",
                                            "space": "vpp", "overlaps": "given"}]})",
                             "s.json")
                .cases[0]
                .job.overlaps,
            JobOverlaps::kGiven);
  expect_sweep_error(R"({"cases": [{"model": "mixtral-s", "cluster": "paper:16-1",
                                    "overlaps": "recipe"}]})",
                     "/cases/0/overlaps");
  expect_sweep_error(R"({"cases": [{"model": "mixtral-s", "cluster": "paper:16-1",
                                    "space": "vpp", "overlaps": "some"}]})",
                     "/cases/0/overlaps");
  expect_sweep_error(R"({"cases": [{"model": "mixtral-s", "cluster": "paper:16-1",
                                    "space": "vpp", "baseline": "mi"}]})",
                     "/cases/0/space");
  expect_sweep_error(R"({"cases": [{"model": "mixtral-s", "cluster": "paper:16-1",
                                    "recompute_scope": "all"}]})",
                     "/cases/0/recompute_scope");
  expect_sweep_error(R"({"cases": [{"model": "mixtral-s", "cluster": "paper:16-1",
                                    "space": "warp"}]})",
                     "/cases/0/space");
  const fs::path d = scratch_dir("sweep_space");
  spit(d / "s.json", R"({"cases": [{"name": "job", "model": "mixtral-s",
                                    "cluster": "paper:32-2", "space": "micro-batch,vpp"}]})");
  const CliRun plan = run({"plan", "--model", "mixtral-s", "--cluster", "paper:32-2", "--space",
                           "micro-batch,vpp", "--threads", "1"});
  ASSERT_EQ(plan.code, kExitOk) << plan.err;
  const auto at = plan.out.find("plan     PP=");
  ASSERT_NE(at, std::string::npos) << plan.out;
  const std::string line = plan.out.substr(at + 9, plan.out.find(", 32 devices", at) - at - 9);
  ASSERT_NE(line.find("VPP="), std::string::npos) << line;  // the case exercises VPP
  const std::string latency = plan.out.substr(plan.out.find("iteration latency"), 30);
  const std::string out = (d / "s.h5").string();
  const CliRun r = run({"sweep", (d / "s.json").string(), "--out", out, "--threads", "1"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_NE(r.err.find("vpp="), std::string::npos) << r.err;  // the knobs in the progress line
  const CliRun shown = run({"show", out, "--case", "job"});
  ASSERT_EQ(shown.code, kExitOk) << shown.err;
  EXPECT_NE(shown.out.find("best plan  " + line), std::string::npos) << line << "\n" << shown.out;
  EXPECT_NE(shown.out.find(latency), std::string::npos) << latency << "\n" << shown.out;
}

// A case that runs long gets progress lines while it runs (~0.3 s here,
// a line every 0.02 s; paper:16-1 with the load-balance pruning took
// 0.2 s before the plain DP got faster, and 24 ms after: no line came).
TEST(Sweep, ProgressWhileACaseRuns) {
  const fs::path d = scratch_dir("sweep_progress");
  spit(d / "s.json", R"({"cases": [{"name": "no bound", "model": "mixtral-s",
                                    "cluster": "paper:32-1", "prune": "none", "bound": false}]})");
  const CliRun r = run({"sweep", (d / "s.json").string(), "--out", (d / "s.h5").string(),
                        "--threads", "1", "--progress-every", "0.02"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_NE(r.err.find("hapmoe sweep: case 1/1 running for"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("no bound: "), std::string::npos) << r.err;  // where the search stands
  EXPECT_NE(r.err.find("of 1248 configurations"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("hapmoe sweep: 1/1 cases"), std::string::npos) << r.err;
}

// SIGUSR1 (what Slurm sends before the time limit), here raised inside the
// first commit: the sweep stops after that case with exit code 4 and a
// valid archive, and --resume finishes the rest.
TEST(Sweep, Sigusr1StopsAfterTheCaseInFlightAndResumeFinishes) {
  const fs::path d = scratch_dir("sweep_signal");
  spit(d / "s.json", kTwoCases);
  const std::string out = (d / "s.h5").string();
  static int raised = 0;
  raised = 0;
  g_archive_before_rename = [](const std::string&) {
    if (raised++ == 0) std::raise(SIGUSR1);
  };
  CliRun r = run({"sweep", (d / "s.json").string(), "--out", out, "--threads", "1"});
  g_archive_before_rename = nullptr;
  EXPECT_EQ(r.code, kExitStopped) << r.err;
  EXPECT_NE(r.err.find("1 of 2 cases committed"), std::string::npos) << r.err;
  r = run({"show", out});
  EXPECT_NE(r.out.find("1 of 2 cases done (incomplete"), std::string::npos) << r.out;
  r = run({"sweep", (d / "s.json").string(), "--out", out, "--resume", "--threads", "1"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_NE(r.out.find("2 of 2 cases done (complete)"), std::string::npos) << r.out;
}

// --time-limit: a search stopped by it exits 5 and says so in the text,
// the JSON, the archive and `show`; a time already up searches nothing.
TEST(Limits, PlanStoppedByTheTimeLimitIsMarkedEverywhere) {
  const fs::path d = scratch_dir("limit_plan");
  std::vector<std::string> a = plan_to(d / "p.h5");
  a.insert(a.end(), {"--plan-json", (d / "p.json").string(), "--time-limit", "1e-9"});
  CliRun r = run(a);
  EXPECT_EQ(r.code, kExitLimit) << r.err;
  EXPECT_NE(r.err.find("the time limit stopped the search: no plan found yet"), std::string::npos)
      << r.err;
  EXPECT_NE(r.out.find("NOT PROVEN OPTIMAL: the time limit stopped the search"), std::string::npos)
      << r.out;
  const auto doc = nlohmann::json::parse(slurp(d / "p.json"));
  EXPECT_EQ(doc["search"]["proven_optimal"], false);
  EXPECT_EQ(doc["search"]["stopped_by"], "time limit");
  EXPECT_GT(doc["search"]["configs_not_searched"].get<std::int64_t>(), 0);
  r = run({"show", (d / "p.h5").string()});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_NE(r.out.find("NOT PROVEN OPTIMAL: the time limit"), std::string::npos) << r.out;
  // Without a limit: proven optimal, in the JSON too.
  r = run({"plan", "--model", "mixtral-s", "--cluster", "paper:16-1", "--threads", "1",
           "--plan-json", (d / "q.json").string()});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.out.find("NOT PROVEN"), std::string::npos) << r.out;
  const auto whole = nlohmann::json::parse(slurp(d / "q.json"));
  EXPECT_EQ(whole["search"]["proven_optimal"], true);
  EXPECT_TRUE(whole["search"]["stopped_by"].is_null());
}

TEST(Limits, BadLimitValuesNameTheOption) {
  struct Bad {
    std::vector<std::string> args;
    std::string says;
  };
  for (const Bad& b :
       {Bad{{"--time-limit", "0"}, "--time-limit"}, Bad{{"--time-limit", "-5"}, "--time-limit"},
        Bad{{"--time-limit", "soon"}, "--time-limit"}, Bad{{"--max-memory", "12X"}, "--max-memory"},
        Bad{{"--max-memory", "0"}, "--max-memory"},
        Bad{{"--max-memory", "99999999T"}, "--max-memory"},
        Bad{{"--max-memory", "1M"}, "less than the search needs"}}) {
    std::vector<std::string> a = kPlanArgs;
    a.insert(a.end(), b.args.begin(), b.args.end());
    const CliRun r = run(a);
    EXPECT_EQ(r.code, kExitInput) << b.args[1] << ": " << r.err;
    EXPECT_NE(r.err.find(b.says), std::string::npos) << r.err;
    EXPECT_EQ(r.out.find("search ("), std::string::npos) << "searched anyway: " << b.args[1];
  }
}

// A sweep a limit stops commits the case in flight as "stopped", exits 5,
// and --resume runs that case again (replacing it) and finishes.
TEST(Limits, SweepStoppedByTheTimeLimitResumes) {
  const fs::path d = scratch_dir("limit_sweep");
  spit(d / "s.json", kTwoCases);
  const std::string out = (d / "s.h5").string();
  CliRun r = run(
      {"sweep", (d / "s.json").string(), "--out", out, "--threads", "1", "--time-limit", "1e-9"});
  EXPECT_EQ(r.code, kExitLimit) << r.err;
  EXPECT_NE(r.err.find("status \"stopped\""), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("0 of 2 cases done"), std::string::npos) << r.err;
  {
    const h5::File f = h5::File::open_read(out);
    const h5::Group cases = f.open_group("cases");
    ASSERT_EQ(cases.children().size(), 1u);
    const h5::Group c = cases.open_group(cases.children().front());
    EXPECT_EQ(c.attrs().get_string("status"), "stopped");
    EXPECT_EQ(c.open_group("search").attrs().get_int("proven_optimal"), 0);
  }
  r = run({"sweep", (d / "s.json").string(), "--out", out, "--resume", "--threads", "1"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_NE(r.out.find("2 of 2 cases done (complete)"), std::string::npos) << r.out;
  const h5::File f = h5::File::open_read(out);
  const h5::Group cases = f.open_group("cases");
  ASSERT_EQ(cases.children().size(), 2u);
  for (const std::string& n : cases.children()) {
    EXPECT_EQ(cases.open_group(n).attrs().get_string("status"), "ok") << n;
    EXPECT_EQ(cases.open_group(n).open_group("search").attrs().get_int("proven_optimal"), 1) << n;
  }
}

}  // namespace
}  // namespace hapmoe

namespace hapmoe {
namespace {

// The sweeps shipped in bench/ parse and every case's model and cluster
// load (running them is a benchmark, not a test).
TEST(SweepFile, BenchSweepsAreValid) {
  for (const char* name : {"paper_sweep.json", "large_sweep.json"}) {
    const std::string path = std::string(HAPMOE_SOURCE_DIR) + "/bench/" + name;
    const SweepDefinition s = load_sweep(path);
    for (const SweepCase& c : s.cases) {
      Workload w = load_workload(c.model);
      EXPECT_NO_THROW(apply_overrides(c.overrides, w)) << name << ": " << c.name;
      const ClusterSpec cl = load_cluster(c.cluster);
      EXPECT_GE(cl.total_devices(), 16) << c.name;
    }
    if (std::string(name) == "paper_sweep.json") {
      EXPECT_EQ(s.cases.size(), 24u);
    } else {
      EXPECT_EQ(s.cases.size(), 10u);
      EXPECT_EQ(load_cluster(s.cases.front().cluster).total_devices(), 1024);
      EXPECT_EQ(load_cluster(s.cases.back().cluster).total_devices(), 16384);
    }
  }
}

}  // namespace
}  // namespace hapmoe
