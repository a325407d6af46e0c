// Megatron-LM training logs as measurements (io/profile/megatron_log.h):
// the lines core_v0.15.0 prints, with the prefixes launchers add.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "costmodel/errors.h"
#include "io/profile/megatron_log.h"
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
