// The flag list of the pinned Megatron-LM (io/megatron/megatron_flags.h):
// the compiled-in list is the data file, taken at the pinned tag, and holds
// the flags hapmoe writes and reads (aliases and --no-X forms included) but
// nothing made up, misspelt or abbreviated.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "io/megatron/megatron_flags.h"
#include "io/megatron/megatron_launcher.h"

namespace hapmoe {
namespace {

const std::string kFlagsFile = std::string(HAPMOE_SOURCE_DIR) + "/io/megatron/megatron_flags_" +
                               std::string(kMegatronVersion) + ".txt";

TEST(MegatronFlags, ListIsTheDataFileOfThePinnedVersion) {
  EXPECT_EQ(megatron_flags_version(), kMegatronVersion);
  std::ifstream in(kFlagsFile);
  ASSERT_TRUE(in) << kFlagsFile;
  std::string line, header;
  std::vector<std::string> listed;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line[0] == '#') {
      header += line + "\n";
    } else {
      listed.push_back(line);
    }
  }
  // The header says where the list came from and how to regenerate it.
  EXPECT_NE(header.find("https://github.com/NVIDIA/Megatron-LM, tag core_v0.15.0"),
            std::string::npos)
      << header;
  EXPECT_NE(header.find("megatron/training/arguments.py"), std::string::npos) << header;
  EXPECT_NE(header.find("io/megatron/megatron_flags.py"), std::string::npos) << header;
  // The file is sorted and unique, and compiled in as it is.
  EXPECT_TRUE(std::is_sorted(listed.begin(), listed.end()));
  EXPECT_EQ(std::adjacent_find(listed.begin(), listed.end()), listed.end());
  const auto flags = megatron_flags();
  EXPECT_EQ(std::vector<std::string>(flags.begin(), flags.end()), listed);
  // core_v0.15.0's parser: 592 option strings of add_argument (aliases and
  // the --no-X forms of BooleanOptionalAction included) and -h/--help.
  EXPECT_EQ(flags.size(), 594u);
}

TEST(MegatronFlags, KnownFlagsAreListedAndMadeUpOnesAreNot) {
  for (const char* f :
       {"--micro-batch-size", "--num-virtual-stages-per-pipeline-rank", "--use-megatron-fsdp",
        "--optimizer-cpu-offload", "--moe-token-dispatcher-type", "--fp8-recipe",
        "--recompute-modules", "--pipeline-model-parallel-layout", "--expert-tensor-parallel-size",
        "--moe-enable-deepep", "--ckpt-format",
        // An alias (add_argument('--save-interval', '--persistent-save-interval')),
        // store_false switches and a BooleanOptionalAction's --no-X form.
        "--persistent-save-interval", "--override-opt-param-scheduler",
        "--no-masked-softmax-fusion", "--disable-msc", "--no-rl-partial-rollouts"}) {
    EXPECT_TRUE(is_megatron_flag(f)) << f;
  }
  // Made up, misspelt, abbreviated (Megatron's parser has allow_abbrev=False),
  // without dashes, in the wrong case; and flags of other programs
  // (torchrun's).
  for (const char* f :
       {"--not-a-megatron-flag", "--micro-batch-sizes", "--micro-batch", "micro-batch-size",
        "--Micro-Batch-Size", "--mystery-flag", "", "--nproc-per-node", "--master-addr"}) {
    EXPECT_FALSE(is_megatron_flag(f)) << f;
  }
}

TEST(MegatronFlags, NearestFlagIsAHintForMisspellings) {
  EXPECT_EQ(nearest_megatron_flag("--micro-batch-sizes"), "--micro-batch-size");
  EXPECT_EQ(nearest_megatron_flag("--use-megatron-fdsp"), "--use-megatron-fsdp");
  EXPECT_EQ(nearest_megatron_flag("--not-a-megatron-flag"), "");
}

}  // namespace
}  // namespace hapmoe
