// Megatron-LM training logs as measurements (io/profile/megatron_log.h):
// the lines core_v0.15.0 prints, with the prefixes launchers add.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "costmodel/errors.h"
#include "io/profile/megatron_log.h"
#include "io/profile/profile_h5.h"
#include "tests/io/cli_run.h"

namespace hapmoe {
namespace {

// The shapes of training.py's iteration line, timers.py's block and
// utils.py's memory report, as a torchrun job on 2 ranks prints them,
// with a banner, warnings and an Open MPI / torchrun prefix on some lines.
const char* const kLog =
    "using world size: 16, data-parallel size: 2, context-parallel size: 1\n"
    "WARNING: overriding default argument\n"
    "[rank0]: > building NullTokenizer tokenizer ...\n"
    "Theoretical memory footprints: weight and optimizer=21120.50 MB, activation=9000.25 MB, "
    "total=30120.75 MB\n"
    " [2026-11-20 10:00:01] iteration       10/     100 | consumed samples:          640 | "
    "elapsed time per iteration (ms): 5210.3 | throughput per GPU (TFLOP/s/GPU): 301.2 | "
    "learning rate: 1.000000E-04 | global batch size:    64 | lm loss: 1.054321E+01 | "
    "load_balancing_loss: 1.012000E+00 | loss scale: 1.0 | grad norm: 12.345 | "
    "number of skipped iterations:   0 | number of nan iterations:   0 |\n"
    "[Rank 0] (after 10 iterations) memory (MB) | allocated: 30000.5 | max allocated: 61234.0 | "
    "reserved: 65000.0 | max reserved: 65000.0\n"
    "[1,8]<stdout>: [Rank 8] (after 10 iterations) memory (MB) | allocated: 29000.0 | max "
    "allocated: 62345.5 | reserved: 66000.0 | max reserved: 66000.0\n"
    "(min, max) time across ranks (ms):\n"
    "    forward-backward ...............................: (5000.12, 5100.50)\n"
    "    optimizer ......................................: (80.00, 81.25)\n"
    "[default3]: [2026-11-20 10:00:53] iteration       20/     100 | consumed samples:     "
    "1280 | elapsed time per iteration (ms): 4800.0 | throughput per GPU (TFLOP/s/GPU): 327.0 | "
    "global batch size:    64 | lm loss: 9.5E+00 |\n"
    "max time across ranks (ms):\n"
    "    forward-backward ...............................: 4700.00\n"
    "3: [2026-11-20 10:01:41] iteration       30/     100 | elapsed time per iteration (ms): "
    "4900.0 | global batch size:    64 |\n"
    "[2026-11-20 10:02:30] iteration       40/     100 | elapsed time per iteration (ms): "
    "4700.0 |\n";

TEST(MegatronLog, ReadsIterationsTimersAndMemory) {
  const MegatronLog log = parse_megatron_log(kLog, "train.log");
  ASSERT_EQ(log.intervals.size(), 4u);
  const MegatronLogInterval& a = log.intervals[0];
  EXPECT_EQ(a.iteration, 10);
  EXPECT_EQ(a.train_iters, 100);
  EXPECT_DOUBLE_EQ(a.ms_per_iteration, 5210.3);
  ASSERT_TRUE(a.tflops_per_gpu);
  EXPECT_DOUBLE_EQ(*a.tflops_per_gpu, 301.2);
  ASSERT_TRUE(a.global_batch);
  EXPECT_EQ(*a.global_batch, 64);
  EXPECT_DOUBLE_EQ(a.values.at("lm loss"), 10.54321);
  EXPECT_DOUBLE_EQ(a.values.at("load_balancing_loss"), 1.012);
  EXPECT_EQ(a.line, 5);
  ASSERT_EQ(a.timers.size(), 2u);
  EXPECT_EQ(a.timers[0].name, "forward-backward");
  EXPECT_DOUBLE_EQ(a.timers[0].min_ms, 5000.12);
  EXPECT_DOUBLE_EQ(a.timers[0].max_ms, 5100.50);
  EXPECT_EQ(a.timers[1].name, "optimizer");
  // The prefixed line, and the max-only timer form.
  EXPECT_EQ(log.intervals[1].iteration, 20);
  ASSERT_EQ(log.intervals[1].timers.size(), 1u);
  EXPECT_DOUBLE_EQ(log.intervals[1].timers[0].min_ms, 4700.0);
  EXPECT_DOUBLE_EQ(log.intervals[1].timers[0].max_ms, 4700.0);
  EXPECT_EQ(log.intervals[2].iteration, 30);  // srun --label
  // Memory: both ranks, the Open MPI prefix stripped.
  ASSERT_EQ(log.memory.size(), 2u);
  EXPECT_EQ(log.memory[1].rank, 8);
  EXPECT_DOUBLE_EQ(log.memory[1].max_allocated_mb, 62345.5);
  EXPECT_DOUBLE_EQ(log.peak_allocated_bytes(), 62345.5 * 1024 * 1024);
  ASSERT_TRUE(log.theoretical_total_mb);
  EXPECT_DOUBLE_EQ(*log.theoretical_total_mb, 30120.75);
  // The median of the intervals after the first (warm-up): 4800, 4900,
  // 4700 -> 4800 ms.
  EXPECT_DOUBLE_EQ(log.seconds_per_iteration(), 4.8);
}

TEST(MegatronLog, OneIntervalIsItsOwnMeasurement) {
  const MegatronLog log = parse_megatron_log(
      "iteration        1/       2 | elapsed time per iteration (ms): 1234.5 |\n", "one.log");
  EXPECT_DOUBLE_EQ(log.seconds_per_iteration(), 1.2345);
  EXPECT_EQ(log.peak_allocated_bytes(), 0.0);
}

TEST(MegatronLog, BadInputNamesTheFileLineAndValue) {
  const auto message = [](const std::string& text) {
    try {
      parse_megatron_log(text, "bad.log");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("hello\nworld\n").find("bad.log: no \"iteration"), std::string::npos)
      << message("hello\nworld\n");
  const std::string t =
      message("x\n iteration       10/     100 | elapsed time per iteration (ms): fast |\n");
  EXPECT_NE(t.find("bad.log:2"), std::string::npos) << t;
  EXPECT_NE(t.find("\"fast\""), std::string::npos) << t;
  const std::string z = message(" iteration 10/ 100 | elapsed time per iteration (ms): 0.0 |\n");
  EXPECT_NE(z.find("not a positive number"), std::string::npos) << z;
  const std::string m = message(
      " iteration 10/ 100 | elapsed time per iteration (ms): 5.0 |\n"
      "[Rank 0] (after 10 iterations) memory (MB) | allocated: lots | max allocated: 1\n");
  EXPECT_NE(m.find("bad.log:2"), std::string::npos) << m;
  const std::string tm = message(
      " iteration 10/ 100 | elapsed time per iteration (ms): 5.0 |\n"
      "(min, max) time across ranks (ms):\n"
      "    optimizer ......: (1.0; 2.0)\n");
  EXPECT_NE(tm.find("bad.log:3"), std::string::npos) << tm;
  EXPECT_NE(tm.find("optimizer"), std::string::npos) << tm;
}

// End to end: a training log with timers and memory lines, and the script
// that ran it, become a measured run of `profile check`: measured against
// the script's own plan as `evaluate` prices it.
TEST(MegatronLog, ProfileCheckComparesTheLogWithTheScriptsPlan) {
  using test::CliRun;
  using test::run;
  using test::scratch_dir;
  const std::string data = std::string(HAPMOE_TEST_DATA);
  const std::string log = data + "/profile/megatron_train.log";
  const std::string script = data + "/megatron/mixtral_s.sh";
  const CliRun ev = run({"evaluate", "--megatron-script", script, "--cluster", "paper:32-2"});
  ASSERT_EQ(ev.code, 0) << ev.err;
  const std::size_t at = ev.out.find("iteration latency");
  ASSERT_NE(at, std::string::npos);
  const std::string predicted = ev.out.substr(at + 19, ev.out.find('\n', at) - at - 19);
  const CliRun r = run({"profile", "check", "--megatron-log", log, "--megatron-script", script,
                        "--cluster", "paper:32-2"});
  ASSERT_EQ(r.code, 0) << r.err;
  // Measured: the median of 12500 and 12600 ms (the first interval is the
  // warm-up); memory: the highest max allocated, 52345.5 MB.
  EXPECT_NE(r.out.find("megatron_train.log  12.550 s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(predicted), std::string::npos) << predicted << "\n" << r.out;
  EXPECT_NE(r.out.find("51.1 GiB"), std::string::npos) << r.out;
  // Timers beside the cost model's terms: forward-backward's median max
  // over ranks is 12.350 s (12300 and 12400 ms).
  const std::size_t fb = r.out.find("    forward-backward ");
  ASSERT_NE(fb, std::string::npos) << r.out;
  const std::string row = r.out.substr(fb, r.out.find('\n', fb) - fb);
  EXPECT_NE(row.find("12.350 s"), std::string::npos) << row;
  EXPECT_NE(row.find('%'), std::string::npos) << row;  // an error: a term was found
  EXPECT_NE(r.out.find("the first, the warm-up, left out"), std::string::npos) << r.out;

  // Without the script; with a log of another batch; with both inputs.
  const CliRun no_script =
      run({"profile", "check", "--megatron-log", log, "--cluster", "paper:32-2"});
  EXPECT_EQ(no_script.code, 2);
  EXPECT_NE(no_script.err.find("--megatron-script"), std::string::npos) << no_script.err;
  const std::filesystem::path d = scratch_dir("megatron_log_batch");
  std::ofstream(d / "other.log")
      << " iteration 10/ 50 | elapsed time per iteration (ms): 5000.0 | global batch size: 512 |\n";
  const CliRun other = run({"profile", "check", "--megatron-log", (d / "other.log").string(),
                            "--megatron-script", script, "--cluster", "paper:32-2"});
  EXPECT_EQ(other.code, 2);
  EXPECT_NE(other.err.find("other.log:1"), std::string::npos) << other.err;
  EXPECT_NE(other.err.find("global batch size 512"), std::string::npos) << other.err;
  const CliRun both = run({"profile", "check", "--megatron-log", log, "--measurements", log,
                           "--megatron-script", script, "--cluster", "paper:32-2"});
  EXPECT_EQ(both.code, 2);
  std::filesystem::remove_all(d);
}

// `profile import --megatron-log` stores the logged run in a profile; its
// stored runs are the measured runs of `profile check --profile` and the
// observations of `profile fit --runs`.
TEST(MegatronLog, ImportStoresTheRunForCheckAndFit) {
  using test::CliRun;
  using test::run;
  namespace fs = std::filesystem;
  const std::string data = std::string(HAPMOE_TEST_DATA);
  const std::string log = data + "/profile/megatron_train.log";
  const std::string script = data + "/megatron/mixtral_s.sh";
  const fs::path d = test::scratch_dir("megatron_log_import");
  const std::string p = (d / "p.h5").string();
  const CliRun imp = run({"profile", "import", "--megatron-log", log, "--megatron-script", script,
                          "--cluster", "paper:32-2", "--out", p});
  ASSERT_EQ(imp.code, 0) << imp.err;
  EXPECT_NE(imp.out.find("imported run 'megatron_train.log'"), std::string::npos) << imp.out;
  EXPECT_NE(imp.out.find("1 measured run"), std::string::npos) << imp.out;
  MeasuredProfile prof = read_profile(p);
  ASSERT_EQ(prof.runs.size(), 1u);
  const ProfileRun& stored = prof.runs[0];
  EXPECT_DOUBLE_EQ(stored.latency_s, 12.55);
  // Mixtral-S on paper:32-2 runs PP 2 x (TP 2, DP 4): rank 8 is stage 1.
  ASSERT_EQ(stored.peaks.size(), 2u);
  EXPECT_EQ(stored.peaks[0].rank, 0);
  EXPECT_EQ(stored.peaks[0].stage, 0);
  EXPECT_EQ(stored.peaks[1].rank, 8);
  EXPECT_EQ(stored.peaks[1].stage, 1);
  EXPECT_DOUBLE_EQ(stored.peaks[1].max_allocated_bytes, 52345.5 * 1024 * 1024);
  ASSERT_EQ(stored.timers.size(), 2u);
  EXPECT_EQ(stored.timers[0].name, "forward-backward");
  EXPECT_DOUBLE_EQ(stored.timers[0].seconds, 12.35);

  // The stored run is checked as the log itself is.
  const CliRun direct = run({"profile", "check", "--megatron-log", log, "--megatron-script", script,
                             "--cluster", "paper:32-2"});
  const CliRun from_profile = run({"profile", "check", "--profile", p});
  ASSERT_EQ(direct.code, 0) << direct.err;
  ASSERT_EQ(from_profile.code, 0) << from_profile.err;
  const auto row = [](const std::string& out) {
    const std::size_t at = out.find("  megatron_train.log");
    return at == std::string::npos ? std::string() : out.substr(at, out.find('\n', at) - at);
  };
  ASSERT_FALSE(row(direct.out).empty()) << direct.out;
  EXPECT_EQ(row(from_profile.out).substr(0, 50), row(direct.out).substr(0, 50)) << from_profile.out;
  EXPECT_NE(from_profile.out.find("    forward-backward "), std::string::npos) << from_profile.out;

  // A second run under another name; the same name again replaces.
  ASSERT_EQ(run({"profile", "import", "--megatron-log", log, "--megatron-script", script,
                 "--cluster", "paper:32-2", "--name", "second", "--profile", p, "--out", p})
                .code,
            0);
  const CliRun again = run({"profile", "import", "--megatron-log", log, "--megatron-script", script,
                            "--cluster", "paper:32-2", "--profile", p, "--out", p});
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_NE(again.out.find("replaces the profile's run 'megatron_train.log'"), std::string::npos)
      << again.out;
  EXPECT_EQ(read_profile(p).runs.size(), 2u);

  // Fit from the runs: both measured 12.55 s, so eta makes the profile's
  // prediction exact.
  const std::string f = (d / "f.h5").string();
  const CliRun fit = run({"profile", "fit", "--runs", "--profile", p, "--out", f});
  ASSERT_EQ(fit.code, 0) << fit.err;
  EXPECT_NE(fit.out.find("fit from 2 training runs"), std::string::npos) << fit.out;
  EXPECT_NE(fit.out.find("activation_scale  H800"), std::string::npos) << fit.out;
  EXPECT_NE(fit.out.find("eta               H800"), std::string::npos) << fit.out;
  prof = read_profile(f);
  ASSERT_EQ(prof.devices.size(), 1u);
  EXPECT_GT(prof.devices[0].eta, 0.05);
  EXPECT_LT(prof.devices[0].eta, 2.0);
  EXPECT_EQ(prof.runs.size(), 2u);  // the runs stay
  const CliRun fitted = run({"profile", "check", "--profile", f});
  ASSERT_EQ(fitted.code, 0) << fitted.err;
  EXPECT_NE(fitted.out.find("profile 0.0% (max 0.0%)"), std::string::npos) << fitted.out;

  // Refused: --runs without a profile, with a profile of no runs, with
  // layer inputs; a memory report of a rank the plan does not have.
  EXPECT_EQ(run({"profile", "fit", "--runs", "--out", f}).code, 2);
  const std::string empty = (d / "empty.h5").string();
  ASSERT_EQ(
      run({"profile", "import", "--layers", data + "/profile/layers.csv", "--out", empty}).code, 0);
  const CliRun none = run({"profile", "fit", "--runs", "--profile", empty, "--out", f});
  EXPECT_EQ(none.code, 2);
  EXPECT_NE(none.err.find("stores no training runs"), std::string::npos) << none.err;
  const CliRun mixed = run({"profile", "fit", "--runs", "--profile", p, "--layers",
                            data + "/profile/layers.csv", "--out", f});
  EXPECT_EQ(mixed.code, 2);
  EXPECT_NE(mixed.err.find("--layers"), std::string::npos) << mixed.err;
  std::ofstream(d / "far.log")
      << " iteration 10/ 50 | elapsed time per iteration (ms): 5000.0 |\n"
      << "[Rank 40] (after 10 iterations) memory (MB) | allocated: 1.0 | max allocated: 2.0 | "
         "reserved: 3.0 | max reserved: 3.0\n";
  const std::string q = (d / "q.h5").string();
  const CliRun far = run({"profile", "import", "--megatron-log", (d / "far.log").string(),
                          "--megatron-script", script, "--cluster", "paper:32-2", "--out", q});
  EXPECT_EQ(far.code, 2);
  EXPECT_NE(far.err.find("far.log:2"), std::string::npos) << far.err;
  EXPECT_NE(far.err.find("rank 40"), std::string::npos) << far.err;
  EXPECT_FALSE(fs::exists(q));
  fs::remove_all(d);
}

}  // namespace
// Each timer is compared with the term of the cost model that times the
// same work (the gradient sync inside forward-backward, the parameter
// all-gather inside optimizer); a timer without a term has none.
TEST(MegatronLog, TimersMapToTheCostModelsTerms) {
  PlanReport rep;
  rep.num_microbatches = 4;
  rep.breakdown.edge_s = 2.0;
  rep.breakdown.middle_s = 3.0;
  rep.breakdown.dp_sync_s = 0.5;
  rep.breakdown.dp_gather_s = 0.2;
  rep.breakdown.optimizer_s = 0.1;
  StageReport a, b;
  a.cost.fwd_s = 0.3;
  a.cost.p2p_fwd_s = 0.05;
  a.cost.bwd_s = 0.6;
  b.cost.fwd_s = 0.2;
  b.cost.bwd_s = 0.7;
  b.cost.p2p_bwd_s = 0.1;
  rep.stages = {a, b};
  EXPECT_DOUBLE_EQ(*megatron_timer_term("forward-backward", rep), 5.3);
  EXPECT_DOUBLE_EQ(*megatron_timer_term("all-grads-sync", rep), 0.3);
  EXPECT_DOUBLE_EQ(*megatron_timer_term("optimizer", rep), 0.3);
  EXPECT_DOUBLE_EQ(*megatron_timer_term("params-all-gather", rep), 0.2);
  EXPECT_DOUBLE_EQ(*megatron_timer_term("forward-compute", rep), 4 * 0.25);
  EXPECT_DOUBLE_EQ(*megatron_timer_term("backward-compute", rep), 4 * 0.6);
  EXPECT_FALSE(megatron_timer_term("batch-generator", rep));
}

}  // namespace hapmoe
