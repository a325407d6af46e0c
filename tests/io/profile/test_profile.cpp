// Issue 8: measured profiles. Parsers on the real nccl-tests format, the
// profile file, the fit recovering known coefficients, a measured slow
// cross-type link changing the plan, and profile check's accuracy figure
// on a synthetic "measured" cluster (docs/profile.md).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "costmodel/analytic.h"
#include "costmodel/cost.h"
#include "costmodel/errors.h"
#include "costmodel/measured.h"
#include "engine/driver.h"
#include "io/inputs/cluster_io.h"
#include "io/inputs/model_io.h"
#include "io/inputs/plan_io.h"
#include "io/profile/profile_h5.h"
#include "io/profile/profile_parse.h"
#include "io/report/report.h"
#include "tests/io/cli_run.h"

namespace hapmoe {
namespace {

namespace fs = std::filesystem;
using test::run;
using test::scratch_dir;
using test::slurp;

const std::string kData = std::string(HAPMOE_TEST_DATA) + "/profile/";

// --- nccl-tests logs ------------------------------------------------------------

// The one table of a log.
NcclLog one_table(const std::string& text, const std::string& origin, bool in_place = false) {
  const auto logs = parse_nccl_tests_logs(text, origin, in_place);
  EXPECT_EQ(logs.size(), 1u);
  return logs.at(0);
}

TEST(ProfileNcclLog, ReadsTheOutOfPlaceAndInPlaceColumns) {
  const std::string text = slurp(kData + "all_reduce_perf_h800_intra8.log");
  const NcclLog log = one_table(text, "ar.log");
  EXPECT_EQ(log.ranks, 8);
  EXPECT_EQ(log.nodes, 1);
  EXPECT_EQ(log.devices, std::vector<std::string>{"NVIDIA H800"});
  ASSERT_EQ(log.rows.size(), 25u);  // 8 B .. 128 MiB
  EXPECT_DOUBLE_EQ(log.rows.front().bytes, 8);
  EXPECT_NEAR(log.rows.front().seconds, 22.00e-6, 1e-12);
  EXPECT_DOUBLE_EQ(log.rows.back().bytes, 134217728);
  EXPECT_FALSE(log.in_place);
  const NcclLog in_place = one_table(text, "ar.log", true);
  EXPECT_NEAR(in_place.rows.front().seconds, 22.44e-6, 1e-12);
  EXPECT_TRUE(in_place.in_place);
  EXPECT_GT(log.rows.back().busbw_gbs, 100);
}

TEST(ProfileNcclLog, ReadsTheOlderLayoutWithoutRoot) {
  const NcclLog log = one_table(slurp(kData + "all_reduce_perf_mi300x_old_layout.log"), "old.log");
  EXPECT_EQ(log.ranks, 4);
  ASSERT_EQ(log.rows.size(), 18u);  // 8 B .. 1 MiB
  EXPECT_NEAR(log.rows.front().seconds, 30.00e-6, 1e-12);
}

TEST(ProfileNcclLog, RejectsLogsWithoutATableOrWithNegativeTimes) {
  try {
    parse_nccl_tests_logs(slurp(kData + "bad_no_table.log"), "none.log");
    FAIL() << "no table accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("none.log"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("no nccl-tests result table"), std::string::npos);
  }
  try {
    parse_nccl_tests_logs(slurp(kData + "bad_negative_time.log"), "neg.log");
    FAIL() << "negative time accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("neg.log:23"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("-21.88"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_nccl_tests_logs("", "empty"), InputError);
  EXPECT_THROW(parse_nccl_tests_logs("#  size count type redop root time algbw busbw\n1 2\n", "x"),
               InputError);
}

TEST(ProfileNcclLog, SkipsNcclDebugLines) {
  const std::string text =
      "node01:1:1 [0] NCCL INFO Bootstrap : Using eth0\n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong     "
      "time   algbw   busbw #wrong\n"
      "        1024           256     float     sum      -1    10.00    0.10    0.18      0    "
      "11.00    0.09    0.17      0\n"
      "node01:1:9 [0] NCCL INFO Channel 00/02 : 0 1 2 3\n"
      "node01:1:9 [0] NCCL WARN Cuda failure 'out of memory' (recovered)\n"
      "        4096          1024     float     sum      -1    12.00    0.34    0.60      0    "
      "12.50    0.33    0.57      0\n";
  const NcclLog log = one_table(text, "dbg.log");
  ASSERT_EQ(log.rows.size(), 2u);
  EXPECT_NEAR(log.rows[0].seconds, 10e-6, 1e-15);
  EXPECT_NEAR(log.rows[1].seconds, 12e-6, 1e-15);
  EXPECT_EQ(log.rows[1].line, 6);
}

// Issue 20: logs as real jobs write them. The fixtures below are written
// for these tests (made-up numbers in the tools' layouts).

const char* const kHeader =
    "#       size         count      type   redop    root     time   algbw   busbw #wrong     "
    "time   algbw   busbw #wrong\n";
const char* const kUnits =
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            "
    "(us)  (GB/s)  (GB/s)\n";
const char* const kGroups =
    "#                                                              out-of-place                 "
    "      in-place\n";

// A row of the usual layout: size, out-of-place and in-place times (us).
std::string row(long size, double oop_us, double ip_us, const char* wrong = "0") {
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "%12ld  %12ld     float     sum      -1  %7.2f    1.00    1.75  %5s  %7.2f    "
                "0.99    1.73  %5s\n",
                size, size / 4, oop_us, wrong, ip_us, wrong);
  return buf;
}

std::string rank_lines(int n, const std::string& host, const std::string& device, int first = 0) {
  std::string s;
  for (int r = first; r < first + n; ++r) {
    char buf[200];
    std::snprintf(buf, sizeof buf, "#  Rank %2d Group  0 Pid %6d on %10s device %2d [0x%02x] %s\n",
                  r, 4000 + r, host.c_str(), r % 8, 0x10 + r, device.c_str());
    s += buf;
  }
  return s;
}

TEST(ProfileNcclLog, SkipsBannersAndMessagesBeforeAndBetweenTables) {
  const std::string text =
      "srun: job 90211 queued and waiting for resources\n"
      "srun: job 90211 has been allocated resources\n"
      "MACHINEFILE=/tmp/hosts.90211\n"
      "Warning: Permanently added 'node02,10.0.0.2' (ED25519) to the list of known hosts.\n"
      "------------------------------------------------------------------\n"
      "WARNING: No preset parameters were found for the device that Open MPI\n"
      "detected:\n"
      "\n"
      "  Local host:            node01\n"
      "  Device name:           mlx5_0\n"
      "------------------------------------------------------------------\n"
      "[1700000000.125] [node01:4100:0]  ucp_context.c:1469 UCX  WARN  transport 'rc' is not "
      "available\n"
      "[proxy:0:0@node01] HYDU_create_process: using the default path\n"
      "# nccl-tests version 2.14.1 nccl-headers=22005 nccl-library=22005\n"
      "# Collective test starting: reduce_scatter_perf\n"
      "# nThread 1 nGpus 8 minBytes 1024 maxBytes 4096 step: 4(factor) warmup iters: 5 iters: 20 "
      "agg iters: 1 validation: 1 graph: 0\n"
      "#\n"
      "# Using devices\n" +
      rank_lines(8, "node01", "NVIDIA H800") +
      "NCCL version 2.20.5+cuda12.4\n"
      "node01:4100:4100 [0] NCCL INFO cudaDriverVersion 12040\n"
      "#\n" +
      kGroups + kHeader + kUnits + row(1024, 20, 21) + row(4096, 22, 23) +
      "# Out of bounds values : 0 OK\n"
      "# Avg bus bandwidth    : 1.75\n"
      "#\n"
      "#  Collective test concluded: reduce_scatter_perf\n"
      "\n"
      "slurmstepd: error: *** STEP 90211.1 ON node01 CANCELLED AT 2025-03-01T10:00:00 ***\n"
      "# nThread 1 nGpus 8 minBytes 1024 maxBytes 1024 step: 4(factor) warmup iters: 5 iters: 20 "
      "agg iters: 1 validation: 1 graph: 0\n"
      "#\n"
      "rccl-tests: Version develop:1f2e3d4\n"
      "# Using devices\n"
      "RCCL version 2.18.3+hip6.1\n" +
      kGroups + kHeader + kUnits + row(1024, 30, 31) + "# Avg bus bandwidth    : 0.5\n";
  const auto logs = parse_nccl_tests_logs(text, "job.out");
  ASSERT_EQ(logs.size(), 2u);
  EXPECT_EQ(logs[0].test, "reduce_scatter_perf");
  EXPECT_EQ(logs[0].ranks, 8);
  ASSERT_EQ(logs[0].rows.size(), 2u);
  EXPECT_NEAR(logs[0].rows[1].seconds, 22e-6, 1e-15);
  EXPECT_EQ(logs[1].test, "");  // the second run names nothing
  EXPECT_EQ(logs[1].ranks, 0);  // nor its ranks
  ASSERT_EQ(logs[1].rows.size(), 1u);
  EXPECT_NEAR(logs[1].rows[0].seconds, 30e-6, 1e-15);
}

TEST(ProfileNcclLog, StripsOpenMpiTagOutputFromHeaderAndRows) {
  // Open MPI 4 (`[1,0]<stdout>:`) and 5 (a space after the colon), stderr
  // lines of other ranks in between.
  for (const std::string sep : {"", " "}) {
    auto tag = [&](int rank, const std::string& line, const char* stream = "stdout") {
      std::string out;
      std::size_t start = 0;
      while (start < line.size()) {
        const std::size_t nl = line.find('\n', start);
        out += "[1," + std::to_string(rank) + "]<" + stream + ">:" + sep +
               line.substr(start, nl - start) + "\n";
        start = nl + 1;
      }
      return out;
    };
    const std::string text =
        tag(0, "# nThread 1 nGpus 1 minBytes 8 maxBytes 64 step: 8(factor)\n# Using devices\n") +
        tag(0, rank_lines(2, "node01", "NVIDIA A100-SXM4-80GB")) +
        tag(1, "node01:77:77 [1] NCCL INFO NET/IB : No device found.\n", "stderr") +
        tag(0, std::string(kGroups) + kHeader + kUnits) + tag(0, row(8, 15, 16)) +
        tag(1, "node01:77:80 [1] NCCL INFO comm 0x55 rank 1 nRanks 2 - Init COMPLETE\n") +
        tag(0, row(64, 16, 17)) + tag(0, "# Out of bounds values : 0 OK\n");
    const NcclLog log = one_table(text, "tagged.log");
    EXPECT_EQ(log.ranks, 2);
    EXPECT_EQ(log.devices, std::vector<std::string>{"NVIDIA A100-SXM4-80GB"});
    ASSERT_EQ(log.rows.size(), 2u) << "separator '" << sep << "'";
    EXPECT_NEAR(log.rows[1].seconds, 16e-6, 1e-15);
    EXPECT_EQ(log.rows[1].line, 11);
  }
}

TEST(ProfileNcclLog, StripsMpichPrependRankAndSrunLabels) {
  const std::string body = std::string("# Using devices\n") + rank_lines(1, "n1", "NVIDIA B200") +
                           rank_lines(1, "n2", "NVIDIA B200", 1) + kHeader + row(1024, 40, 41) +
                           row(2048, 41, 42);
  for (const std::string prefix : {"[0] ", "0: ", "   0: "}) {
    std::string text = prefix + "Warning: Permanently added 'n2' to the list of known hosts.\n";
    std::size_t start = 0;
    while (start < body.size()) {
      const std::size_t nl = body.find('\n', start);
      text += prefix + body.substr(start, nl - start) + "\n";
      start = nl + 1;
    }
    text += "[1] n2:99:99 [1] NCCL INFO Using network IB\n";
    const NcclLog log = one_table(text, "hydra.log");
    EXPECT_EQ(log.ranks, 2) << prefix;
    EXPECT_EQ(log.nodes, 2) << prefix;
    ASSERT_EQ(log.rows.size(), 2u) << prefix;
    EXPECT_NEAR(log.rows[0].seconds, 40e-6, 1e-15);
  }
}

TEST(ProfileNcclLog, SplitsRunsInsteadOfMergingThem) {
  // all_reduce_perf on one node, the same binary on two nodes, then
  // all_gather_perf (named only by the job script's echo), under Open MPI
  // --tag-output with Slurm, ssh, Open MPI and UCX messages around.
  const auto logs =
      parse_nccl_tests_logs(slurp(kData + "nccl_tests_h100_tagged_three_runs.log"), "three.log");
  ASSERT_EQ(logs.size(), 3u);
  const char* tests[] = {"all_reduce_perf", "all_reduce_perf", "all_gather_perf"};
  const int ranks[] = {8, 16, 16};
  const int nodes[] = {1, 2, 2};
  for (std::size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(logs[k].test, tests[k]) << k;
    EXPECT_EQ(logs[k].ranks, ranks[k]) << k;
    EXPECT_EQ(logs[k].nodes, nodes[k]) << k;
    EXPECT_EQ(logs[k].devices, std::vector<std::string>{"NVIDIA H100 80GB HBM3"});
    ASSERT_EQ(logs[k].rows.size(), 8u) << k;
    EXPECT_DOUBLE_EQ(logs[k].rows.front().bytes, 1024);
    EXPECT_DOUBLE_EQ(logs[k].rows.back().bytes, 16777216);
  }
  // Two runs of one binary stay apart: the two-node run is slower.
  EXPECT_GT(logs[1].rows.back().seconds, 2 * logs[0].rows.back().seconds);
  EXPECT_LT(logs[0].header_line, logs[1].header_line);
  // A table that follows another without a banner in between is its own.
  const std::string twice = std::string(kHeader) + row(8, 10, 11) + kHeader + row(8, 20, 21);
  const auto two = parse_nccl_tests_logs(twice, "twice.log");
  ASSERT_EQ(two.size(), 2u);
  EXPECT_NEAR(two[1].rows[0].seconds, 20e-6, 1e-15);
}

TEST(ProfileNcclLog, ReadsRcclTestsLayouts) {
  // rccl-tests as one job writes it, MPICH -prepend-rank, #wrong N/A.
  const NcclLog log = one_table(slurp(kData + "rccl_tests_mi300x_prepend_rank.log"), "rccl.log");
  EXPECT_EQ(log.test, "alltoall_perf");
  EXPECT_EQ(log.ranks, 8);
  EXPECT_EQ(log.nodes, 1);
  EXPECT_EQ(log.devices, std::vector<std::string>{"AMD Instinct MI300X"});
  ASSERT_EQ(log.rows.size(), 10u);
  EXPECT_NEAR(log.rows[0].seconds, 38e-6, 1e-12);
  // -O 0: in-place columns only, read as in-place whether asked or not.
  const std::string in_place_only =
      std::string("rccl-tests: Version develop:1f2e3d4\n# Using devices\n") +
      "#   Rank  0 Pid  10 on  mi01 device  0 [0000:0c:00.0] AMD Instinct MI250X / MI250\n"
      "#   Rank  1 Pid  11 on  mi01 device  1 [0000:22:00.0] AMD Instinct MI250X / MI250\n"
      "#                                                    in-place\n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong\n"
      "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)\n"
      "        1024           256     float     sum      -1    51.00    0.02    0.02    N/A\n";
  for (const bool ask : {false, true}) {
    const NcclLog ip = one_table(in_place_only, "ip.log", ask);
    EXPECT_TRUE(ip.in_place);
    EXPECT_EQ(ip.ranks, 2);
    ASSERT_EQ(ip.rows.size(), 1u);
    EXPECT_NEAR(ip.rows[0].seconds, 51e-6, 1e-15);
  }
  // Column positions come from the header: without redop and root, with
  // a copybw column (older nccl-tests), with cputime, with a timestamp.
  const std::string layouts =
      "#  size  count  type  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n"
      "   1024    256  float  60.00  0.02  0.02  N/A  61.00  0.02  0.02  N/A\n"
      "# Out of bounds values : 0 OK\n"
      "#  size count type redop root time algbw busbw copybw #wrong time algbw busbw copybw "
      "#wrong\n"
      "   1024  256 float sum -1 70.00 0.01 0.02 0.03 0 71.00 0.01 0.02 0.03 0\n"
      "#  size count type redop root cputime algbw busbw #wrong cputime algbw busbw #wrong "
      "timestamp\n"
      "   1024  256 float sum -1 80.00 0.01 0.02 0 81.00 0.01 0.02 0 2025-03-01 10:00:00\n";
  const auto several = parse_nccl_tests_logs(layouts, "layouts.log");
  ASSERT_EQ(several.size(), 3u);
  EXPECT_NEAR(several[0].rows[0].seconds, 60e-6, 1e-15);
  EXPECT_NEAR(several[1].rows[0].seconds, 70e-6, 1e-15);
  EXPECT_NEAR(several[1].rows[0].busbw_gbs, 0.02, 1e-15);
  EXPECT_NEAR(several[2].rows[0].seconds, 80e-6, 1e-15);
  const auto in_place = parse_nccl_tests_logs(layouts, "layouts.log", true);
  EXPECT_NEAR(in_place[0].rows[0].seconds, 61e-6, 1e-15);
  EXPECT_NEAR(in_place[1].rows[0].seconds, 71e-6, 1e-15);
  EXPECT_NEAR(in_place[2].rows[0].seconds, 81e-6, 1e-15);
}

TEST(ProfileNcclLog, ReadsRanksNodesAndDevicesFromRankLines) {
  // nccl-tests' split mask: two groups of 4, one communicator each; the
  // world is one group.
  std::string split = "# Using devices\n";
  for (int r = 0; r < 8; ++r) {
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "#  Rank %2d Group %2d Pid %6d on %10s device %2d [0000:%02x:00] NVIDIA H200\n",
                  r, r / 4, 100 + r, r < 4 ? "nodeA" : "nodeB", r % 4, r);
    split += buf;
  }
  split += std::string(kHeader) + row(1024, 9, 10);
  const NcclLog log = one_table(split, "split.log");
  EXPECT_EQ(log.ranks, 4);
  EXPECT_EQ(log.nodes, 1);
  // The oldest Rank lines (no Group, no Pid) and two device types.
  const std::string old = std::string("# Using devices\n") +
                          "#   Rank  0 on   n1 device  0 [0x1b] NVIDIA H100 80GB HBM3\n"
                          "#   Rank  1 on   n2 device  0 [0x1b] NVIDIA H800\n" +
                          kHeader + row(1024, 9, 10);
  const NcclLog mixed = one_table(old, "old.log");
  EXPECT_EQ(mixed.ranks, 2);
  EXPECT_EQ(mixed.nodes, 2);
  EXPECT_EQ(mixed.devices, (std::vector<std::string>{"NVIDIA H100 80GB HBM3", "NVIDIA H800"}));
}

TEST(ProfileNcclLog, MapsPrintedDeviceNamesToTheCatalog) {
  const std::vector<std::pair<std::string, std::string>> cases{
      {"NVIDIA H100 80GB HBM3", "H100"},
      {"NVIDIA H100 PCIe", "H100"},
      {"NVIDIA H800", "H800"},
      {"NVIDIA H200", "H200"},
      {"NVIDIA B200", "B200"},
      {"NVIDIA A100-SXM4-80GB", "A100-80GB"},
      {"NVIDIA A100-PCIE-40GB", "A100-40GB"},
      {"NVIDIA A100 80GB PCIe", "A100-80GB"},
      {"AMD Instinct MI300X", "MI300X"},
      {"AMD Instinct MI300X VF", "MI300X"},
      {"AMD Instinct MI325X", "MI325X"},
      {"AMD Instinct MI250X / MI250", "MI250X"},
      {"Ascend910B2", "910B"},
      // Not in the catalog, or ambiguous: the user says.
      {"NVIDIA A100-SXM4", ""},
      {"NVIDIA H20", ""},
      {"NVIDIA GH200 480GB", ""},
      {"Device 74a1", ""},
      {"", ""},
  };
  for (const auto& [printed, name] : cases) {
    EXPECT_EQ(catalog_device_name(printed), name) << printed;
  }
}

TEST(ProfileNcclLog, RefusesTablesOfSeveralMpiRanksAndRowsWithoutAHeader) {
  // nccl-tests built without MPI under mpirun: every rank prints a table.
  const std::string each = "[1,0]<stdout>:" + std::string(kHeader) +
                           "[1,0]<stdout>:" + row(8, 10, 11) + "[1,1]<stdout>:" + kHeader +
                           "[1,1]<stdout>:" + row(8, 10, 11);
  try {
    parse_nccl_tests_logs(each, "each.log");
    FAIL() << "tables of two ranks accepted";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("each.log:3"), std::string::npos) << m;
    EXPECT_NE(m.find("MPI rank 1"), std::string::npos) << m;
    EXPECT_NE(m.find("MPI=1"), std::string::npos) << m;
  }
  const std::string interleaved =
      "[0] " + std::string(kHeader) + "[0] " + row(8, 10, 11) + "[3] " + row(8, 12, 13);
  try {
    parse_nccl_tests_logs(interleaved, "mixed.log");
    FAIL() << "rows of two ranks accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("mixed.log:3"), std::string::npos) << e.what();
  }
  // The header was cut off (grep, head): say where the rows are.
  try {
    parse_nccl_tests_logs("NCCL version 2.21.5+cuda12.4\n" + row(8, 10, 11), "cut.log");
    FAIL() << "rows without a header accepted";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("cut.log:2"), std::string::npos) << m;
    EXPECT_NE(m.find("without a table header"), std::string::npos) << m;
  }
  // A row cut short inside a table is an error naming its line.
  try {
    parse_nccl_tests_logs(std::string(kHeader) + row(8, 10, 11) + "          16             4\n",
                          "short.log");
    FAIL() << "a short row accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("short.log:3"), std::string::npos) << e.what();
  }
}

// --- CSV --------------------------------------------------------------------------

TEST(LayerCsv, ParsesAndNamesMissingColumns) {
  const auto rows = parse_layer_csv(
      "# measured on node01\n"
      "device,tp,cp,micro_batch,forward_ms,backward_ms,layer,ep,router_ms\n"
      "H800,2,1,1,1.5,3.0,moe,8,0.05\n"
      "H800,2,1,2,2.5,5.0,dense,,\n",
      "l.csv");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_TRUE(rows[0].moe);
  EXPECT_EQ(rows[0].ep, 8);
  EXPECT_NEAR(rows[0].router_fwd_s, 5e-5, 1e-15);
  EXPECT_FALSE(rows[1].moe);
  EXPECT_EQ(rows[1].line, 4);
  try {
    parse_layer_csv("device,tp,cp,micro_batch,forward_ms\nH800,1,1,1,2\n", "l.csv");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("missing column 'backward_ms'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("l.csv:1"), std::string::npos);
  }
  try {
    parse_layer_csv("device,tp,cp,micro_batch,forward_ms,backward_ms\nH800,1,1,1,-2,3\n", "l.csv");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("l.csv:2: forward_ms '-2'"), std::string::npos)
        << e.what();
  }
}

TEST(RouterCsv, GroupsByIterationAndLayer) {
  const auto s = parse_router_csv(
      "iteration,layer,expert,tokens\n0,0,0,10\n0,0,1,30\n1,0,1,20\n1,0,0,20\n", "r.csv");
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].tokens, (std::vector<double>{10, 30}));
  EXPECT_THROW(parse_router_csv("iteration,layer,expert,tokens\n0,0,1,10\n", "r.csv"), InputError);
}

// --- The profile file --------------------------------------------------------------

TEST(ProfileFile, RoundTripsAndRejectsOtherLayouts) {
  const fs::path d = scratch_dir("file");
  MeasuredProfile p;
  p.comm.push_back({Primitive::kAllToAll, LinkKind::kCrossType, "H800", "MI300X", 16, 1e6, 3e-3});
  p.compute.push_back({"H800", 2, 1, 1, 1e-3, 2e-3, 4e-4, kUnset});
  DeviceCalibration dc;
  dc.device = "H800";
  dc.eta = 0.8;
  p.devices.push_back(dc);
  p.models.push_back({"mixtral-s", 1.3});
  ProfileRun stored;
  stored.name = "run a";
  stored.source = "train.log";
  stored.workload = "{\"w\": 1}";
  stored.cluster = "{\"c\": 1}";
  stored.plan = "{\"p\": 1}";
  stored.latency_s = 12.5;
  stored.peaks = {{0, 0, 5e10}, {8, 1, 5.2e10}};
  stored.timers = {{"forward-backward", 12.3}, {"optimizer", 0.17}};
  p.runs.push_back(stored);
  write_profile_file((d / "p.h5").string(), p);
  const MeasuredProfile back = read_profile((d / "p.h5").string());
  EXPECT_EQ(back.runs, p.runs);  // (the whole profile holds NaN, never equal)
  ASSERT_EQ(back.comm.size(), 1u);
  EXPECT_EQ(back.comm[0], p.comm[0]);
  EXPECT_EQ(back.compute[0].dense_fwd_s, 1e-3);
  EXPECT_TRUE(std::isnan(back.compute[0].ffn_bwd_s));
  EXPECT_EQ(back.devices[0].eta, 0.8);
  EXPECT_TRUE(std::isnan(back.devices[0].activation_scale));
  EXPECT_EQ(back.models[0].imbalance, 1.3);
  EXPECT_THROW(read_profile((d / "missing.h5").string()), InputError);
  // An archive is HDF5 but not a profile.
  const auto r = run({"plan", "--model", "tests/data/models/small-moe.json", "--cluster", "H800:8",
                      "--out", (d / "run.h5").string()});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto bad = run({"plan", "--model", "tests/data/models/small-moe.json", "--cluster",
                        "H800:8", "--profile", (d / "run.h5").string()});
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("not a hapmoe profile"), std::string::npos) << bad.err;
  fs::remove_all(d);
}

TEST(ProfileImport, BadInputExitsTwoAndWritesNothing) {
  const fs::path d = scratch_dir("import");
  const std::string out = (d / "p.h5").string();
  const auto r =
      run({"profile", "import", "--out", out, "--nccl", kData + "bad_no_table.log", "--primitive",
           "all_reduce_perf", "--device", "H800", "--link", "intra-node"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("bad_no_table.log"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
  for (const auto& e : fs::directory_iterator(d)) ADD_FAILURE() << "left " << e.path();
  const auto ok =
      run({"profile", "import", "--out", out, "--nccl", kData + "all_reduce_perf_h800_intra8.log",
           "--primitive", "all_reduce_perf", "--device", "H800", "--link", "intra-node"});
  ASSERT_EQ(ok.code, 0) << ok.err;
  EXPECT_EQ(read_profile(out).comm.size(), 25u);
  fs::remove_all(d);
}

// --- Fit ----------------------------------------------------------------------------

struct Truth {
  double eta, router, scale, overhead;
};

// Layer samples of `device` generated from known coefficients with the
// cost model's own terms; `noise` scales each time by 1 +- noise.
std::vector<LayerSample> synthetic_layers(const Workload& w, const ClusterSpec& c, int h,
                                          const Truth& t, double noise,
                                          const MeasuredProfile* compute = nullptr) {
  std::vector<LayerSample> out;
  const std::string name = c.pools[static_cast<std::size_t>(h)].device.name;
  int k = 0;
  for (const int tp : {1, 2, 4}) {
    for (const int mb : {1, 2}) {
      for (const int ep : {1, 8}) {
        ProfileTables tables = make_analytic_tables(w, c, mb, {tp}, {1});
        if (compute != nullptr) apply_profile(tables, *compute, w, c, mb);
        const ComputeEntry& e = tables.compute_entry(h, tp, 1, name);
        const double tokens = static_cast<double>(mb) * w.training.seq_len / tp;
        const double router = t.router * tokens * w.model.hidden;
        const double imb = 1.0 + w.training.gamma * (w.training.imbalance - 1.0);
        // The routed experts as the cost model times them: the grouped GEMMs
        // + activation of the E/EP local experts (at eta = 1), scaled by the
        // measured FFN ratio when `compute` measured one, the imbalance and
        // 1/eta; plus, unscaled, the token permutation and the experts'
        // kernel overhead (fixed_fwd, fixed_bwd).
        const RoutedExpertTime routed =
            routed_expert_time(w.model, c.pools[static_cast<std::size_t>(h)].device, tokens, ep, 1);
        const double sgn = (k++ % 2 == 0 ? 1.0 : -1.0) * noise;
        LayerSample s;
        s.device = name;
        s.moe = true;
        s.tp = tp;
        s.micro_batch = mb;
        s.ep = ep;
        s.fwd_s = (e.attention_fwd + e.shared_fwd + router +
                   routed.fwd * e.expert_scale_fwd * imb / t.eta + routed.fixed_fwd) *
                  (1 + sgn);
        s.bwd_s = (e.attention_bwd + e.shared_bwd + 2 * router +
                   routed.bwd * e.expert_scale_bwd * imb / t.eta + routed.fixed_bwd) *
                  (1 - sgn);
        s.router_fwd_s = router * (1 + sgn);
        ParallelConfig pi;
        pi.tp = tp;
        pi.ep = ep;
        pi.dp = std::max(1, ep / tp);
        pi.micro_batch = mb;
        const TypeCosts tc = CostModel(w, c, tables).type_costs(pi, h);
        const double params = tc.moe.dense_params + tc.moe.expert_params;
        s.peak_bytes =
            (t.overhead + t.scale * tc.moe.act_bytes + params * (2 + 4 + 12)) * (1 + sgn);
        out.push_back(s);
      }
    }
  }
  return out;
}

TEST(ProfileFit, RecoversKnownCoefficients) {
  const Workload w = load_workload("mixtral-s");
  const ClusterSpec c = load_cluster("H800:8,MI300X:8");
  const Truth t0{0.7, 3e-13, 1.2, 3.0 * (1u << 30)};
  const Truth t1{0.55, 5e-13, 1.1, 4.5 * (1u << 30)};
  for (const double noise : {0.0, 0.02}) {
    auto rows = synthetic_layers(w, c, 0, t0, noise);
    const auto more = synthetic_layers(w, c, 1, t1, noise);
    rows.insert(rows.end(), more.begin(), more.end());
    MeasuredProfile p;
    const auto fits = fit_layers(rows, w, c, p);
    EXPECT_EQ(fits.size(), 8u);  // router, eta, scale, overhead per device
    const double tol = noise == 0 ? 1e-6 : 0.06;
    ASSERT_EQ(p.devices.size(), 2u);
    for (const auto& [d, t] :
         {std::make_pair(p.devices[0], t0), std::make_pair(p.devices[1], t1)}) {
      EXPECT_NEAR(d.eta / t.eta, 1, tol) << d.device << " noise " << noise;
      EXPECT_NEAR(d.router_s_per_token / t.router, 1, tol) << d.device;
      EXPECT_NEAR(d.activation_scale / t.scale, 1, noise == 0 ? 1e-6 : 0.25) << d.device;
    }
    for (const FitValue& f : fits) {
      if (noise == 0) {
        EXPECT_LT(f.max_rel_residual, 1e-6) << f.name << " " << f.device;
      } else {
        EXPECT_GT(f.rms_residual, 0) << f.name << " " << f.device;
      }
    }
  }
  // rho from router statistics: max/mean = 1.5 and 2.5, mean 2.
  std::vector<RouterSample> router{{0, 0, {30, 10, 20, 20}}, {1, 0, {50, 10, 10, 10}}};
  MeasuredProfile p;
  const FitValue f = fit_imbalance(router, "mixtral-s", p);
  EXPECT_DOUBLE_EQ(f.value, 2.0);
  EXPECT_DOUBLE_EQ(f.rms_residual, 0.5);
  EXPECT_DOUBLE_EQ(profile_imbalance(p, "mixtral-s"), 2.0);
}

// Whole training runs (profile import --megatron-log) made from known
// coefficients with the cost model's own terms: fit_runs recovers eta and
// the activation scale per device type, exactly without noise and close
// with it. The runs are the catalog search's top plans on each pool alone
// and on both (so one device type's eta is fitted with the other's held).
TEST(ProfileFit, RecoversKnownCoefficientsFromTrainingRuns) {
  const Workload w = load_workload("mixtral-s");
  MeasuredProfile truth;
  truth.devices = {{"H800", 0.7, kUnset, 1.2, kUnset}, {"MI300X", 0.55, kUnset, 1.1, kUnset}};
  for (const double noise : {0.0, 0.02}) {
    std::vector<FitRun> runs;
    int k = 0;
    for (const char* cluster : {"H800:8", "MI300X:8", "H800:8,MI300X:8"}) {
      const ClusterSpec c = load_cluster(cluster);
      SearchOptions opt;
      opt.top_k = 3;
      const SearchResult sr = run_search(w, c, opt);
      ASSERT_GE(sr.top.size(), 2u) << cluster;
      for (const PlanCandidate& cand : sr.top) {
        const double sgn = (k++ % 2 == 0 ? 1.0 : -1.0) * noise;
        const ProfileTables t = plan_tables(w, c, cand.plan.parallel, &truth);
        const PlanReport rep = CostModel(w, c, t).evaluate(cand.plan);
        FitRun r{"run" + std::to_string(k), w, c, cand.plan, rep.latency_s * (1 + sgn), {}};
        for (std::size_t s = 0; s < rep.stages.size(); ++s) {
          const MemoryBreakdown& m = rep.stages[s].cost.memory;
          const int rank = static_cast<int>(s) * cand.plan.parallel.stage_devices();
          r.peaks.push_back({rank, static_cast<int>(s), (m.total() - m.overhead) * (1 - sgn)});
        }
        runs.push_back(r);
      }
    }
    MeasuredProfile p;
    const std::vector<FitValue> fits = fit_runs(runs, p);
    ASSERT_EQ(fits.size(), 4u);  // activation_scale, then eta, per device
    const double tol = noise == 0 ? 1e-6 : 0.08;
    for (const DeviceCalibration& truth_d : truth.devices) {
      const auto it = std::find_if(p.devices.begin(), p.devices.end(),
                                   [&](const auto& d) { return d.device == truth_d.device; });
      ASSERT_NE(it, p.devices.end()) << truth_d.device;
      EXPECT_NEAR(it->eta / truth_d.eta, 1, tol) << truth_d.device << " noise " << noise;
      EXPECT_NEAR(it->activation_scale / truth_d.activation_scale, 1, noise == 0 ? 1e-6 : 0.1)
          << truth_d.device << " noise " << noise;
      EXPECT_TRUE(std::isnan(it->overhead_bytes));  // max allocated holds no reserve
    }
    for (const FitValue& f : fits) {
      if (noise == 0) {
        EXPECT_LT(f.max_rel_residual, 1e-6) << f.name << " " << f.device;
      }
      if (f.name == "eta") {
        EXPECT_NE(f.note.find("of the iteration scales with 1/eta"), std::string::npos) << f.note;
      }
    }
  }
  // A dense model's runs have no routed experts: eta is not fitted.
  const Workload dense = load_workload("llama2-7b");
  const ClusterSpec c = load_cluster("H800:8");
  SearchOptions opt;
  opt.top_k = 1;
  const SearchResult sr = run_search(dense, c, opt);
  ASSERT_EQ(sr.top.size(), 1u);
  MeasuredProfile p;
  const auto fits = fit_runs({{"dense", dense, c, sr.top[0].plan, 1.0, {}}}, p);
  ASSERT_EQ(fits.size(), 1u);
  EXPECT_EQ(fits[0].name, "eta");
  EXPECT_TRUE(std::isnan(fits[0].value));
  EXPECT_NE(fits[0].note.find("not fitted"), std::string::npos) << fits[0].note;
}

// --- A measured slow cross-type link changes the plan --------------------------

int cross_type_boundaries(const std::string& plan_json) {
  const auto doc = nlohmann::json::parse(plan_json);
  const auto& stages = doc.at("plans").at(0).at("stages");
  int n = 0;
  for (std::size_t i = 1; i < stages.size(); ++i) {
    n += stages[i].at("device") != stages[i - 1].at("device") ? 1 : 0;
  }
  return n;
}

TEST(ProfilePlan, SlowMeasuredCrossTypeLinkMovesThePlanOffIt) {
  const fs::path d = scratch_dir("plan");
  const std::string prof = (d / "slow.h5").string();
  ASSERT_EQ(run({"profile", "import", "--out", prof, "--nccl",
                 kData + "sendrecv_perf_cross_slow.log", "--primitive", "sendrecv_perf", "--device",
                 "H800", "--device-b", "MI300X", "--link", "cross-type", "--world", "2"})
                .code,
            0);
  const std::vector<std::string> base{"plan", "--model", "tests/data/models/small-moe.json",
                                      "--cluster", "H800:8,MI300X:8"};
  auto with = base;
  with.insert(with.end(), {"--plan-json", (d / "catalog.json").string()});
  const auto cat = run(with);
  ASSERT_EQ(cat.code, 0) << cat.err;
  EXPECT_EQ(cat.out.find("profile "), std::string::npos);  // nothing about profiles
  with = base;
  with.insert(with.end(), {"--profile", prof, "--plan-json", (d / "measured.json").string()});
  const auto mea = run(with);
  ASSERT_EQ(mea.code, 0) << mea.err;
  // The catalog's cross link is fast enough for a mixed pipeline; the
  // measured one (0.05 GB/s, 2 ms latency) is not.
  EXPECT_GE(cross_type_boundaries(slurp(d / "catalog.json")), 1);
  EXPECT_EQ(cross_type_boundaries(slurp(d / "measured.json")), 0);
  EXPECT_NE(mea.out.find("catalog (no measurement)"), std::string::npos);
  const auto doc = nlohmann::json::parse(slurp(d / "measured.json"));
  EXPECT_EQ(doc.at("profile").at("file"), prof);
  // Forced onto the slow link (evaluate a mixed plan), the lookup is
  // reported as measured.
  const auto plan = nlohmann::json::parse(slurp(d / "catalog.json"));
  std::ofstream(d / "mixed.json") << plan.dump();
  const auto ev =
      run({"evaluate", "--model", "tests/data/models/small-moe.json", "--cluster",
           "H800:8,MI300X:8", "--plan", (d / "mixed.json").string(), "--profile", prof});
  ASSERT_EQ(ev.code, 0) << ev.err;
  EXPECT_NE(ev.out.find("p2p cross-type"), std::string::npos) << ev.out;
  // A sweep with the profile finds the same plan as `plan --profile`.
  std::ofstream(d / "s.json")
      << R"({"cases": [{"name": "measured", "model": "tests/data/models/small-moe.json",
                                               "cluster": "H800:8,MI300X:8"}]})";
  const auto sw = run({"sweep", (d / "s.json").string(), "--out", (d / "s.h5").string(),
                       "--profile", prof, "--threads", "1"});
  ASSERT_EQ(sw.code, 0) << sw.err;
  const auto measured = nlohmann::json::parse(slurp(d / "measured.json"));
  const double best = measured.at("plans").at(0).at("latency_s").get<double>();
  ASSERT_NE(format_seconds(best),
            format_seconds(plan.at("plans").at(0).at("latency_s").get<double>()));
  const auto shown = run({"show", (d / "s.h5").string(), "--case", "measured"});
  ASSERT_EQ(shown.code, 0) << shown.err;
  EXPECT_NE(shown.out.find(format_seconds(best)), std::string::npos) << format_seconds(best) << "\n"
                                                                     << shown.out;
  fs::remove_all(d);
}

// What `profile import` says a log affects is what the cost model reads
// (issue 20): an all_reduce_perf log changes the DP sync of a plan only
// without the distributed optimizer, a reduce_scatter_perf log only with
// it. TP = 1 here, so no sequence-parallel collective runs.
TEST(ProfilePlan, AnAllReduceLogChangesOnlyPlansWithoutTheDistributedOptimizer) {
  const fs::path d = scratch_dir("all_reduce");
  const std::string ar = (d / "ar.h5").string();
  const std::string rs = (d / "rs.h5").string();
  const auto imp =
      run({"profile", "import", "--out", ar, "--nccl", kData + "all_reduce_perf_h800_intra8.log",
           "--primitive", "all_reduce_perf"});
  ASSERT_EQ(imp.code, 0) << imp.err;
  EXPECT_NE(imp.out.find("It does not affect the distributed optimizer's DP gradient/parameter "
                         "sync"),
            std::string::npos)
      << imp.out;
  ASSERT_EQ(
      run({"profile", "import", "--out", rs, "--nccl",
           kData + "reduce_scatter_perf_h800_intra8.log", "--primitive", "reduce_scatter_perf"})
          .code,
      0);
  std::ofstream(d / "dp8.json")
      << R"({"parallel": {"pp": 1, "tp": 1, "cp": 1, "ep": 8, "tpe": 1, "dp": 8, "micro_batch": 2},
            "stages": [{"device": "H800", "layers": 12, "recompute": "none"}]})";
  auto dp_sync = [&](const std::string& profile, bool distributed_optimizer) {
    std::vector<std::string> args{
        "evaluate", "--model", "tests/data/models/small-moe.json", "--cluster",
        "H800:8",   "--plan",  (d / "dp8.json").string()};
    if (!profile.empty()) args.insert(args.end(), {"--profile", profile});
    if (!distributed_optimizer) args.push_back("--no-distributed-optimizer");
    const auto r = run(args);
    EXPECT_EQ(r.code, 0) << r.err;
    // The breakdown's line ("  dp sync   3.86 ms"), not the formula's.
    const auto at = r.out.find("\n  dp sync ");
    EXPECT_NE(at, std::string::npos) << r.out;
    if (at == std::string::npos) return std::string();
    return r.out.substr(at + 1, r.out.find('\n', at + 1) - at - 1);
  };
  // With the distributed optimizer (the default): reduce-scatter counts.
  EXPECT_EQ(dp_sync(ar, true), dp_sync("", true));
  EXPECT_NE(dp_sync(rs, true), dp_sync("", true));
  // Without it: all-reduce counts.
  EXPECT_NE(dp_sync(ar, false), dp_sync("", false));
  EXPECT_EQ(dp_sync(rs, false), dp_sync("", false));
  fs::remove_all(d);
}

// --- Accuracy on a synthetic "measured" cluster ---------------------------------
//
// The "real" cluster is the catalog with perturbed coefficients (slower
// links, slower kernels, eta < 1, more memory, a larger rho). Runs are
// "measured" by evaluating plans on it (with +-3% noise); the profile is
// built the way a user would: collectives measured at small worlds only
// (2 and 4 ranks), layer timings and router statistics with +-2% noise,
// then fitted. profile check must show the fitted profile closer to the
// measurements than the catalog. HAPMOE_KEEP_PROFILE_DEMO=DIR keeps the
// files (docs/profile.md quotes the output).

MeasuredProfile synthetic_truth(const Workload& w, const ClusterSpec& c, bool small_worlds,
                                double noise) {
  MeasuredProfile p;
  const std::vector<int> tps{1, 2, 4, 8};
  const std::vector<int> cps{1, 2};
  const ProfileTables cat = make_analytic_tables(w, c, w.training.micro_batch, tps, cps);
  const double slow_compute[2] = {1.25, 1.45};
  const double slow_ffn[2] = {1.15, 1.30};
  const double link_factor[3] = {1.6, 2.0, 3.0};  // intra, inter, cross
  int k = 0;
  auto jitter = [&] { return 1.0 + noise * std::sin(1.7 * k++); };
  for (int h = 0; h < 2; ++h) {
    const std::string name = c.pools[static_cast<std::size_t>(h)].device.name;
    for (const int tp : tps) {
      for (const int cp : cps) {
        const ComputeEntry& e = cat.compute_entry(h, tp, cp, name);
        p.compute.push_back(
            {name, tp, cp, w.training.micro_batch,
             (e.attention_fwd * slow_compute[h] + e.dense_mlp_fwd * slow_ffn[h]) * jitter(),
             (e.attention_bwd * slow_compute[h] + e.dense_mlp_bwd * slow_ffn[h]) * jitter(),
             e.dense_mlp_fwd * slow_ffn[h] * jitter(), e.dense_mlp_bwd * slow_ffn[h] * jitter()});
      }
    }
  }
  std::vector<std::pair<Link, int>> links{{{LinkKind::kIntraNode, 0, 0}, 0},
                                          {{LinkKind::kIntraNode, 1, 1}, 0},
                                          {{LinkKind::kInterNode, 0, 0}, 1},
                                          {{LinkKind::kInterNode, 1, 1}, 1},
                                          {{LinkKind::kCrossType, 0, 1}, 2}};
  const std::vector<int> worlds =
      small_worlds ? std::vector<int>{2, 4} : std::vector<int>{2, 4, 8, 16, 32};
  for (const auto& [link, kind] : links) {
    for (int prim = 0; prim < kNumPrimitives; ++prim) {
      for (const int world : worlds) {
        for (double bytes = 1024; bytes <= 4.0 * (1u << 30); bytes *= 4) {
          const auto pr = static_cast<Primitive>(prim);
          const double t = cat.comm.time(pr, bytes, world, link) * link_factor[kind] * jitter();
          p.comm.push_back(
              {pr, link.kind, c.pools[static_cast<std::size_t>(link.type_a)].device.name,
               c.pools[static_cast<std::size_t>(link.type_b)].device.name, world, bytes, t});
        }
      }
    }
  }
  return p;
}

TEST(ProfileCheck, FittedProfileBeatsTheCatalogOnSyntheticRuns) {
  const char* keep = std::getenv("HAPMOE_KEEP_PROFILE_DEMO");
  const fs::path d = keep != nullptr ? fs::path(keep) : scratch_dir("check");
  fs::create_directories(d);
  Workload w = load_workload("mixtral-s");
  const ClusterSpec c = load_cluster("H800:8,MI300X:8");
  const Truth t0{0.7, 3e-13, 1.15, 3.0 * (1u << 30)};
  const Truth t1{0.55, 5e-13, 1.10, 4.0 * (1u << 30)};
  const double true_rho = 1.8;
  // The "real" cluster.
  MeasuredProfile truth = synthetic_truth(w, c, false, 0.0);
  truth.devices = {{"H800", t0.eta, t0.router, t0.scale, t0.overhead},
                   {"MI300X", t1.eta, t1.router, t1.scale, t1.overhead}};
  Workload real = w;
  real.training.imbalance = true_rho;
  // What a user measures: small worlds, noisy layers, router statistics.
  MeasuredProfile prof = synthetic_truth(w, c, true, 0.02);
  std::vector<RouterSample> router;
  for (int i = 0; i < 8; ++i) {
    const double mx = true_rho * (1 + 0.05 * std::sin(i));
    router.push_back(
        {i, 0, {mx * 100, (4 - mx) * 100 / 3, (4 - mx) * 100 / 3, (4 - mx) * 100 / 3}});
  }
  fit_imbalance(router, w.model.name, prof);
  Workload fitted_w = w;
  fitted_w.training.imbalance = profile_imbalance(prof, w.model.name);
  MeasuredProfile truth_compute;
  truth_compute.compute = truth.compute;
  auto rows = synthetic_layers(real, c, 0, t0, 0.02, &truth_compute);
  const auto more = synthetic_layers(real, c, 1, t1, 0.02, &truth_compute);
  rows.insert(rows.end(), more.begin(), more.end());
  fit_layers(rows, fitted_w, c, prof);
  write_profile_file((d / "fitted.h5").string(), prof);
  // Measured runs: the catalog search's top plans, evaluated on the
  // "real" cluster.
  SearchOptions opt;
  opt.top_k = 6;
  const SearchResult sr = run_search(w, c, opt);
  ASSERT_GE(sr.top.size(), 4u);
  std::string csv = "name,model,cluster,plan,latency_ms,peak_memory_gib\n";
  for (std::size_t i = 0; i < sr.top.size(); ++i) {
    const Plan& plan = sr.top[i].plan;
    ProfileTables tt = make_analytic_tables(real, c, plan.parallel.micro_batch, {plan.parallel.tp},
                                            {plan.parallel.cp});
    apply_profile(tt, truth, real, c, plan.parallel.micro_batch);
    const PlanReport rep = CostModel(real, c, tt).evaluate(plan);
    double peak = 0;
    for (const StageReport& st : rep.stages) peak = std::max(peak, st.cost.memory.total());
    const double noise = 1 + 0.03 * std::sin(2.3 * static_cast<double>(i) + 1);
    nlohmann::ordered_json doc;
    doc["plans"] = nlohmann::ordered_json::array({plan_report_json(rep, c)});
    const std::string file = "plan" + std::to_string(i) + ".json";
    std::ofstream(d / file) << doc.dump(2);
    char line[256];
    std::snprintf(line, sizeof line, "run%zu,mixtral-s,\"H800:8,MI300X:8\",%s,%.4f,%.4f\n", i,
                  file.c_str(), rep.latency_s * 1e3 * noise, peak / (1u << 30) * noise);
    csv += line;
  }
  std::ofstream(d / "runs.csv") << csv;
  const auto r = run({"profile", "check", "--profile", (d / "fitted.h5").string(), "--measurements",
                      (d / "runs.csv").string()});
  ASSERT_EQ(r.code, 0) << r.err;
  std::cout << r.out;
  double cat_err = 0, prof_err = 0;
  const auto at = r.out.find("latency error, mean |e|: catalog ");
  ASSERT_NE(at, std::string::npos) << r.out;
  ASSERT_EQ(std::sscanf(r.out.c_str() + at,
                        "latency error, mean |e|: catalog %lf%% (max %*f%%), profile %lf%%",
                        &cat_err, &prof_err),
            2)
      << r.out;
  EXPECT_GT(cat_err, 20.0);   // the perturbation is large
  EXPECT_LT(prof_err, 10.0);  // the paper's ~10%
  EXPECT_LT(prof_err, cat_err / 3);
  if (keep == nullptr) fs::remove_all(d);
}

}  // namespace
}  // namespace hapmoe
