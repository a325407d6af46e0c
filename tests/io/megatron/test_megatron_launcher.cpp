// Launchers: the round trip script -> plan -> launcher -> script, golden
// launchers for the paper's Mixtral-S and Mixtral-L on two heterogeneous
// clusters with a hand-checked reading of each parallel flag, and the
// per-stage recomputation that Megatron cannot express.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "costmodel/analytic.h"
#include "costmodel/errors.h"
#include "io/cli/cli.h"
#include "io/inputs/cluster_io.h"
#include "io/inputs/model_io.h"
#include "io/inputs/plan_io.h"
#include "io/megatron/megatron_flags.h"
#include "io/megatron/megatron_launcher.h"
#include "io/megatron/shell_script.h"
#include "tests/io/cli_run.h"

namespace hapmoe {
namespace {

namespace fs = std::filesystem;
using test::scratch_dir;
using test::slurp;

const std::string kData = std::string(HAPMOE_TEST_DATA) + "/megatron/";

int cli(std::vector<std::string> args, std::string* out_text = nullptr) {
  const test::CliRun r = test::run(std::move(args));
  if (out_text) *out_text = r.out + r.err;
  EXPECT_TRUE(r.code == kExitOk || r.code == kExitNoFit || r.code == kExitInput) << r.err;
  return r.code;
}

// Everything of a plan search run through the CLI, then read back.
struct RoundTrip {
  Workload workload;  // from the input script
  ClusterSpec cluster;
  Plan plan;             // the best plan (from --plan-json)
  std::string launcher;  // the text written by --launcher
  Workload workload2;    // the launcher read back
  Plan plan2;            // the launcher's own settings as a plan
  std::vector<std::string> notes2;
};

RoundTrip round_trip(const std::string& script_or_model, const std::string& cluster,
                     bool is_script = true, const std::vector<std::string>& extra = {},
                     const ShellInputs& inputs = {}) {
  RoundTrip r;
  const fs::path d = scratch_dir(fs::path(script_or_model).stem().string() + "_" +
                                 cluster.substr(cluster.find(':') + 1));
  const std::string launcher = (d / "launch.sh").string();
  const std::string json = (d / "plan.json").string();
  std::vector<std::string> args = {"plan",
                                   is_script ? "--megatron-script" : "--model",
                                   script_or_model,
                                   "--cluster",
                                   cluster,
                                   "--launcher",
                                   launcher,
                                   "--plan-json",
                                   json,
                                   "--top-k",
                                   "1"};
  args.insert(args.end(), extra.begin(), extra.end());
  cli(args);
  r.cluster = load_cluster(cluster);
  if (is_script) {
    MegatronScript s = read_megatron_script(script_or_model, inputs);
    r.workload = megatron_workload(s);
  } else {
    r.workload = load_workload(script_or_model);
  }
  r.plan = load_plan(json, r.cluster, r.workload.training.micro_batch);
  r.launcher = slurp(launcher);
  MegatronScript back = read_megatron_script(launcher);
  r.workload2 = megatron_workload(back);
  r.plan2 = megatron_plan(back, r.workload2, r.cluster);
  r.notes2 = back.notes;
  r.workload2.model.name = r.workload.model.name;
  return r;
}

// Read back, a launcher is exactly the plan it launches: the searched plan
// when stock Megatron-LM can express it, else the same plan with the
// closest uniform recomputation (the launcher says so and prices it; see
// PerStageRecomputationIsApproximatedAndPriced). Returns whether the round
// trip gave the searched plan itself. `script` is the input script (null
// for a preset).
bool expect_launched_plan_read_back(const RoundTrip& r, const MegatronScript* script,
                                    const std::string& what) {
  const ProfileTables tables =
      make_analytic_tables(r.workload, r.cluster, r.plan.parallel.micro_batch, {r.plan.parallel.tp},
                           {r.plan.parallel.cp});
  const CostModel model(r.workload, r.cluster, tables);
  MegatronScript copy = script != nullptr ? *script : MegatronScript{};
  const Launcher l =
      make_megatron_launcher(model.evaluate(r.plan), model, script ? &copy : nullptr, "test");
  EXPECT_EQ(r.plan2, l.plan) << what << "\n" << r.launcher;
  const bool approximated =
      r.launcher.find("as launched (the plan as searched:") != std::string::npos;
  if (!approximated) {
    EXPECT_EQ(r.plan2, r.plan) << what << "\n" << r.launcher;
  } else {
    // Only the recomputation differs.
    Plan same = r.plan2;
    for (std::size_t i = 0; i < same.stages.size() && i < r.plan.stages.size(); ++i) {
      same.stages[i].recompute = r.plan.stages[i].recompute;
    }
    EXPECT_EQ(same, r.plan) << what << "\n" << r.launcher;
  }
  // Reading back adds no note but the input's vocabulary (what its
  // tokenizer gives) and the conditions the input had too (the launcher
  // keeps them): recompute modules are costed as written.
  const auto undecided = [](const std::string& n) {
    return n.starts_with("the condition on line") || n.starts_with("the conditions on line") ||
           n.starts_with("the test on line") || n.starts_with("the tests on line") ||
           n.starts_with("tests of variables that neither the script nor --megatron-env");
  };
  const bool input_undecided =
      script != nullptr && std::any_of(script->notes.begin(), script->notes.end(), undecided);
  // A note the input had word for word (its entry point, its flags hapmoe
  // does not read) is the launcher's too.
  const auto inputs = [&](const std::string& n) {
    return script != nullptr &&
           std::find(script->notes.begin(), script->notes.end(), n) != script->notes.end();
  };
  for (const std::string& note : r.notes2) {
    if (!note.starts_with("vocabulary ") && !(input_undecided && undecided(note)) &&
        !inputs(note)) {
      ADD_FAILURE() << what << ": " << note;
    }
  }
  return !approximated && r.plan2 == r.plan;
}

TEST(MegatronLauncher, RoundTripGivesTheSameModelAndPlan) {
  int same_plan = 0;  // round trips that gave the searched plan itself
  for (const auto& [script, cluster] : std::vector<std::pair<std::string, std::string>>{
           {kData + "mixtral_s.sh", "paper:16-1"},
           {kData + "mixtral_s.sh", "paper:32-2"},
           {kData + "mixtral_l.sh", "paper:32-2"},
           {kData + "mixtral_8x7b.sh", "paper:32-1"}}) {
    const RoundTrip r = round_trip(script, cluster);
    EXPECT_EQ(r.workload2, r.workload) << script << " on " << cluster;
    const MegatronScript s = read_megatron_script(script);
    same_plan += expect_launched_plan_read_back(r, &s, script + " on " + cluster) ? 1 : 0;
  }
  // Mixtral-S on paper:32-2 has a plan Megatron expresses as it is (the
  // other three recompute per stage).
  EXPECT_GE(same_plan, 1);
  // From a preset (no script): the model flags are written from the model.
  const RoundTrip r = round_trip("mixtral-s", "paper:16-1", false);
  Workload expected = r.workload;
  EXPECT_EQ(r.workload2.model, expected.model);
  EXPECT_EQ(r.workload2.training, expected.training);
  expect_launched_plan_read_back(r, nullptr, "mixtral-s on paper:16-1");
}

// A script with the flex dispatcher (DeepEP) is planned with it and
// launched with it: the launcher writes flex and --moe-enable-deepep once
// each (the script's own copies are replaced), and reads back as flex.
TEST(MegatronLauncher, FlexDispatcherIsPlannedAndLaunchedAsWritten) {
  // The fixture without its --mystery-flag, which no launcher may carry
  // (CarriedFlagsNotOfMegatronAreRefused).
  std::string text = slurp(kData + "deepseek_v3_like.sh");
  const std::string mystery = " --mystery-flag 7";
  ASSERT_NE(text.find(mystery), std::string::npos);
  text.erase(text.find(mystery), mystery.size());
  const std::string script = (scratch_dir("flex") / "deepseek_v3_like.sh").string();
  std::ofstream(script) << text;
  const RoundTrip r = round_trip(script, "H800:64");
  EXPECT_EQ(r.workload.training.dispatcher, Dispatcher::kFlex);
  EXPECT_EQ(r.workload2.training.dispatcher, Dispatcher::kFlex);
  const auto count = [&](const std::string& needle) {
    std::size_t n = 0;
    for (std::size_t at = r.launcher.find(needle); at != std::string::npos;
         at = r.launcher.find(needle, at + 1)) {
      ++n;
    }
    return n;
  };
  EXPECT_EQ(count("--moe-token-dispatcher-type"), 1u) << r.launcher;
  EXPECT_EQ(count("--moe-token-dispatcher-type flex"), 1u) << r.launcher;
  EXPECT_EQ(count("--moe-enable-deepep"), 1u) << r.launcher;
}

// Every preset: the model flags written from the model read back as the
// same model and training settings.
TEST(MegatronLauncher, EveryPresetRoundTripsThroughModelFlags) {
  const ClusterSpec cluster = load_cluster("H800:8");
  for (const ModelPreset& p : model_presets()) {
    const Workload& w = p.workload;
    Plan plan;
    plan.parallel = {1, 1, 1, 1, 1, 8, w.training.micro_batch};
    plan.stages = {{0, w.model.num_layers, {}}};
    const ProfileTables tables = make_analytic_tables(w, cluster, w.training.micro_batch, {1}, {1});
    const CostModel model(w, cluster, tables);
    const Launcher l = make_megatron_launcher(model.evaluate(plan), model, nullptr, "test");
    MegatronScript back = parse_megatron_script(l.text, p.name + ".sh");
    Workload w2 = megatron_workload(back);
    w2.model.name = w.model.name;
    EXPECT_EQ(w2, w) << p.name << "\n" << l.text;
    EXPECT_EQ(megatron_plan(back, w2, cluster), l.plan) << p.name;
    EXPECT_TRUE(back.unknown.empty()) << p.name;
  }
}

// Hardening II, item 6: the input readers refuse names with control
// characters, and the launcher does not rely on that alone: a line break
// in the cluster's, the model's, a device's or a host's name stays inside
// its comment (escaped), so nothing after it runs as a command.
TEST(MegatronLauncher, NamesCannotEndAComment) {
  ClusterSpec cluster = load_cluster("H800:8");
  cluster.name = "c\ntouch PWNED1";
  cluster.pools[0].device.name = "X\ntouch PWNED2\n#";
  Workload w = find_model_preset("mixtral-s")->workload;
  w.model.name = "m\rtouch PWNED3\x0b";
  Plan plan;
  plan.parallel = {1, 1, 1, 1, 1, 8, w.training.micro_batch};
  plan.stages = {{0, w.model.num_layers, {}}};
  const ProfileTables tables = make_analytic_tables(w, cluster, w.training.micro_batch, {1}, {1});
  const CostModel model(w, cluster, tables);
  HostsByDevice hosts;
  hosts["x\ntouch pwned2\n#"] = {"h\ntouch PWNED4"};
  const Launcher l = make_megatron_launcher(model.evaluate(plan), model, nullptr, "test", hosts);
  // In comments the names are escaped; elsewhere they are single-quoted.
  EXPECT_NE(l.text.find("# Model: m\\rtouch PWNED3\\x0b\n"), std::string::npos) << l.text;
  EXPECT_NE(l.text.find("# Cluster: c\\ntouch PWNED1\n"), std::string::npos) << l.text;
  EXPECT_NE(l.text.find("#      0  X\\ntouch PWNED2\\n#  "), std::string::npos) << l.text;
  EXPECT_NE(l.text.find("--nodelist=h\\ntouch PWNED4 bash"), std::string::npos) << l.text;
  // Run under bash with a stand-in torchrun: torchrun runs, nothing else.
  if (std::system("bash -c true > /dev/null 2>&1") != 0) GTEST_SKIP() << "no bash";
  const fs::path d = scratch_dir("run");
  fs::create_directories(d / "bin");
  std::ofstream(d / "bin" / "torchrun") << "#!/bin/bash\necho ran > \"$RECORD\"\n";
  fs::permissions(d / "bin" / "torchrun", fs::perms::owner_all, fs::perm_options::add);
  std::ofstream(d / "launch.sh") << l.text;
  const std::string cmd = "cd '" + d.string() + "' && env -u SLURM_NODEID NODE_RANK=0 RECORD='" +
                          (d / "record").string() + "' PATH='" + (d / "bin").string() +
                          "':\"$PATH\" bash launch.sh > out.txt 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << slurp(d / "out.txt");
  EXPECT_EQ(slurp(d / "record"), "ran\n");
  for (const auto& e : fs::recursive_directory_iterator(d)) {
    EXPECT_EQ(e.path().filename().string().find("PWNED"), std::string::npos) << e.path();
  }
}

// The stage table keeps long host lists whole: a line cut at a fixed size
// lost its line break (the next comment line ran on).
TEST(MegatronLauncher, StageTableKeepsLongHostLists) {
  const ClusterSpec cluster = load_cluster("H800:64");
  Workload w = find_model_preset("mixtral-s")->workload;
  Plan plan;
  plan.parallel = {1, 1, 1, 1, 1, 64, w.training.micro_batch};
  plan.stages = {{0, w.model.num_layers, {}}};
  const ProfileTables tables = make_analytic_tables(w, cluster, w.training.micro_batch, {1}, {1});
  const CostModel model(w, cluster, tables);
  HostsByDevice hosts;
  for (int i = 0; i < 8; ++i) hosts["h800"].push_back(std::string(90, 'a') + std::to_string(i));
  const Launcher l = make_megatron_launcher(model.evaluate(plan), model, nullptr, "test", hosts);
  const std::string last = hosts["h800"].back();
  EXPECT_NE(l.text.find(last + "\n#\n# Rank order"), std::string::npos) << l.text;
}

// Stages whose device types alternate: the node table alternates too, each
// stage's S = TP*CP*DP ranks on a node of its type (a given plan, whatever
// the search would pick: Mixtral-S on paper:32-2, PP 4 x DP 8, 7+5+7+5).
TEST(MegatronLauncher, AlternatingStageTypesAlternateTheNodeTable) {
  const ClusterSpec cluster = load_cluster("paper:32-2");
  Workload w = find_model_preset("mixtral-s")->workload;
  const int mi300x = cluster.pools[0].device.name == "MI300X" ? 0 : 1;
  const int h800 = 1 - mi300x;
  Plan plan;
  plan.parallel = {4, 1, 1, 4, 1, 8, w.training.micro_batch};
  plan.stages = {{mi300x, 7, {}}, {h800, 5, {}}, {mi300x, 7, {}}, {h800, 5, {}}};
  const ProfileTables tables = make_analytic_tables(w, cluster, w.training.micro_batch, {1}, {1});
  const CostModel model(w, cluster, tables);
  const Launcher l = make_megatron_launcher(model.evaluate(plan), model, nullptr, "test");
  EXPECT_EQ(l.nodes, (std::vector<std::string>{"mi300x-node-000", "h800-node-000",
                                               "mi300x-node-001", "h800-node-001"}));
  EXPECT_EQ(l.node_procs, (std::vector<int>{8, 8, 8, 8}));
  EXPECT_NE(l.text.find("HAPMOE_STAGE_DEVICES=(MI300X H800 MI300X H800)"), std::string::npos)
      << l.text;
  EXPECT_NE(l.text.find("--pipeline-model-parallel-layout 'E,t*7|t*5|t*7|t*5,L'"),
            std::string::npos)
      << l.text;
  EXPECT_EQ(l.plan, plan);
}

// Host names: a control character is refused with the line and the name
// escaped (one line); shell syntax is kept, to be quoted where written.
TEST(MegatronLauncher, HostNamesWithControlCharactersAreRefused) {
  try {
    parse_launcher_hosts("a100 H800\nb\x1b]0;x H800\n", "hosts.txt");
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("hosts.txt:2"), std::string::npos) << what;
    EXPECT_NE(what.find("\"b\\x1b]0;x\""), std::string::npos) << what;
    EXPECT_NE(what.find("control character"), std::string::npos) << what;
    EXPECT_EQ(what.find('\x1b'), std::string::npos) << what;
  }
  EXPECT_THROW(parse_launcher_hosts("a100 H8\x01"
                                    "00\n",
                                    "hosts.txt"),
               InputError);
  EXPECT_EQ(parse_launcher_hosts("h$(touch${IFS}x) H800\n", "h").at("h800").front(),
            "h$(touch${IFS}x)");
}

// Mixtral-L on paper:32-1 with --recompute-scope stage: the best plan
// recomputes differently per stage (full:13 | full:12 | selective | none
// over two H800 and two 910B stages), which Megatron cannot say.
// The launcher takes the fastest uniform setting that fits, prices it and
// says so; read back, it is exactly the plan it launches. (The default
// with --launcher, job scope, searches such settings in the first place.)
TEST(MegatronLauncher, PerStageRecomputationIsApproximatedAndPriced) {
  const RoundTrip r =
      round_trip(kData + "mixtral_l.sh", "paper:32-1", true, {"--recompute-scope", "stage"});
  ASSERT_GE(r.plan.stages.size(), 2u);
  bool differ = false;
  for (const StagePlan& st : r.plan.stages) {
    differ = differ || !(st.recompute == r.plan.stages.front().recompute);
  }
  ASSERT_TRUE(differ);
  EXPECT_EQ(r.workload2, r.workload);
  EXPECT_NE(r.plan2, r.plan);
  // Only the recomputation differs, and it is one uniform Megatron setting.
  Plan same = r.plan2;
  for (std::size_t i = 0; i < same.stages.size(); ++i) {
    same.stages[i].recompute = r.plan.stages[i].recompute;
  }
  EXPECT_EQ(same, r.plan);
  EXPECT_NE(r.launcher.find("cannot be expressed in stock"), std::string::npos);
  EXPECT_NE(r.launcher.find("as launched (the plan as searched:"), std::string::npos);

  // The same in-process: the approximation is the fastest candidate that
  // fits, and its latency is the cost model's.
  const ProfileTables tables =
      make_analytic_tables(r.workload, r.cluster, r.plan.parallel.micro_batch, {r.plan.parallel.tp},
                           {r.plan.parallel.cp});
  const CostModel model(r.workload, r.cluster, tables);
  MegatronScript s = read_megatron_script(kData + "mixtral_l.sh");
  const Launcher l = make_megatron_launcher(model.evaluate(r.plan), model, &s, "test");
  EXPECT_EQ(l.plan, r.plan2);
  EXPECT_DOUBLE_EQ(l.launched_latency_s, model.evaluate(l.plan).latency_s);
  EXPECT_GE(l.launched_latency_s, l.planned_latency_s);
  EXPECT_TRUE(l.launched_fits);
  ASSERT_FALSE(l.notes.empty());
}

// The executable part of a launcher (every line but the comments) against a
// golden file; HAPMOE_UPDATE_GOLDEN=1 rewrites them.
std::string executable_lines(const std::string& text) {
  std::istringstream in(text);
  std::string line, out;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] == '#') continue;
    out += line + "\n";
  }
  return out;
}

std::map<std::string, std::string> parallel_flags(const std::string& text) {
  MegatronScript s = parse_megatron_script(text, "golden");
  std::map<std::string, std::string> out;
  for (const MegatronFlag& f : s.flags) {
    if (!is_parallel_flag(f.name)) continue;
    std::string v;
    for (const ShellWord& w : f.values) v += (v.empty() ? "" : " ") + w.text;
    out[f.name] = v;
  }
  return out;
}

struct Golden {
  const char* script;
  const char* cluster;
  const char* file;
};

TEST(MegatronLauncher, GoldenLaunchersForThePapersModels) {
  const std::vector<Golden> cases = {
      {"mixtral_s.sh", "paper:32-1", "mixtral_s_paper_32-1.sh"},
      {"mixtral_s.sh", "paper:32-2", "mixtral_s_paper_32-2.sh"},
      {"mixtral_l.sh", "paper:32-1", "mixtral_l_paper_32-1.sh"},
      {"mixtral_l.sh", "paper:32-2", "mixtral_l_paper_32-2.sh"},
  };
  const bool update = std::getenv("HAPMOE_UPDATE_GOLDEN") != nullptr;
  for (const Golden& g : cases) {
    const RoundTrip r = round_trip(kData + g.script, g.cluster);
    const fs::path golden = fs::path(kData) / "golden" / g.file;
    if (update) {
      fs::create_directories(golden.parent_path());
      std::ofstream(golden) << r.launcher;
    }
    ASSERT_TRUE(fs::exists(golden)) << golden;
    EXPECT_EQ(executable_lines(r.launcher), executable_lines(slurp(golden))) << g.file;
    // The header pins the version and states the prediction.
    EXPECT_NE(r.launcher.find("for Megatron-LM core_v0.15.0"), std::string::npos);
    EXPECT_NE(r.launcher.find("# Predicted iteration latency: "), std::string::npos);
  }
}

// The hand-checked reading of each golden launcher's parallel flags
// (docs/megatron.md, "Golden launchers", says how each was checked).
TEST(MegatronLauncher, GoldenLaunchersReadByHand) {
  struct Reading {
    const char* file;
    std::map<std::string, std::string> flags;
    std::vector<std::string> stage_devices;
    std::vector<std::string> nodes;
  };
  // Each reading was checked by hand against REFERENCE.md §3.2/§3.3:
  //  - world = TP*CP*DP*PP = 32 and ETP*EP*EDP = TP*CP*DP;
  //  - experts (8) divisible by EP, heads (32/48) and groups (8) by TP,
  //    4096 divisible by 2*CP; SP exactly when TP > 1 (MoE);
  //  - the layers per stage sum to --num-layers (24/48), E in the first
  //    stage, L in the last, stages = PP; first/last flags only where the
  //    middle stages are equal;
  //  - stage i holds ranks [i*S, (i+1)*S), S = TP*CP*DP, and the node table
  //    puts those ranks on nodes of the stage's device type.
  const std::vector<Reading> readings = {
      // PP2 x DP16 (S = 16, two nodes per stage), layers 7+17 = 24 (first
      // and last flags), the 910B stage first; ETP1 x EP4 x EDP4 = 16. No
      // recompute: no recompute flags.
      {"mixtral_s_paper_32-1.sh",
       {{"--tensor-model-parallel-size", "1"},
        {"--pipeline-model-parallel-size", "2"},
        {"--context-parallel-size", "1"},
        {"--expert-model-parallel-size", "4"},
        {"--expert-tensor-parallel-size", "1"},
        {"--decoder-first-pipeline-num-layers", "7"},
        {"--decoder-last-pipeline-num-layers", "17"},
        {"--micro-batch-size", "1"},
        {"--global-batch-size", "256"}},
       {"910B", "H800"},
       {"910b-node-000", "910b-node-001", "h800-node-000", "h800-node-001"}},
      // PP2 x DP16 (S = 16, two nodes per stage), 14+10 = 24 (first and
      // last flags), the MI300X stage first; ETP1 x EP2 x EDP8 = 16. No
      // recompute. (Alternating types: AlternatingStageTypesAlternateTheNodeTable.)
      {"mixtral_s_paper_32-2.sh",
       {{"--tensor-model-parallel-size", "1"},
        {"--pipeline-model-parallel-size", "2"},
        {"--context-parallel-size", "1"},
        {"--expert-model-parallel-size", "2"},
        {"--expert-tensor-parallel-size", "1"},
        {"--decoder-first-pipeline-num-layers", "14"},
        {"--decoder-last-pipeline-num-layers", "10"},
        {"--micro-batch-size", "1"},
        {"--global-batch-size", "256"}},
       {"MI300X", "H800"},
       {"mi300x-node-000", "mi300x-node-001", "h800-node-000", "h800-node-001"}},
      // PP4 x TP8 x DP1 (S = 8, one node per stage), 10+10+14+14 = 48 by a
      // layout, the 910B stages first; ETP1 x EP8 x EDP1 = 8; 48 heads and
      // 8 groups divide by TP 8; SP with TP 8. One job-wide setting (the
      // default with --launcher): every stage selective, so the header
      // states the plan as searched (no per-stage note).
      {"mixtral_l_paper_32-1.sh",
       {{"--tensor-model-parallel-size", "8"},
        {"--pipeline-model-parallel-size", "4"},
        {"--context-parallel-size", "1"},
        {"--expert-model-parallel-size", "8"},
        {"--expert-tensor-parallel-size", "1"},
        {"--sequence-parallel", ""},
        {"--pipeline-model-parallel-layout", "E,t*10|t*10|t*14|t*14,L"},
        {"--recompute-granularity", "selective"},
        {"--recompute-modules", "core_attn moe_act"},
        {"--micro-batch-size", "1"},
        {"--global-batch-size", "512"}},
       {"910B", "910B", "H800", "H800"},
       {"910b-node-000", "910b-node-001", "h800-node-000", "h800-node-001"}},
      // PP8 x DP4 (S = 4, two stages per node), 7+7+7+7+5+5+5+5 = 48 by a
      // layout; ETP1 x EP4 x EDP1 = 4. Every stage selective (core_attn
      // moe_act).
      {"mixtral_l_paper_32-2.sh",
       {{"--tensor-model-parallel-size", "1"},
        {"--pipeline-model-parallel-size", "8"},
        {"--context-parallel-size", "1"},
        {"--expert-model-parallel-size", "4"},
        {"--expert-tensor-parallel-size", "1"},
        {"--pipeline-model-parallel-layout", "E,t*7|t*7|t*7|t*7|t*5|t*5|t*5|t*5,L"},
        {"--recompute-granularity", "selective"},
        {"--recompute-modules", "core_attn moe_act"},
        {"--micro-batch-size", "1"},
        {"--global-batch-size", "512"}},
       {"MI300X", "MI300X", "MI300X", "MI300X", "H800", "H800", "H800", "H800"},
       {"mi300x-node-000", "mi300x-node-001", "h800-node-000", "h800-node-001"}},
  };
  for (const Reading& rd : readings) {
    const std::string text = slurp(fs::path(kData) / "golden" / rd.file);
    EXPECT_EQ(parallel_flags(text), rd.flags) << rd.file;
    MegatronScript s = parse_megatron_script(text, rd.file);
    std::vector<std::string> devices, nodes, gpus;
    for (const ShellWord& w : s.shell.variables.at("HAPMOE_STAGE_DEVICES"))
      devices.push_back(w.text);
    for (const ShellWord& w : s.shell.variables.at("NODE_HOSTS")) nodes.push_back(w.text);
    for (const ShellWord& w : s.shell.variables.at("NODE_GPUS")) gpus.push_back(w.text);
    EXPECT_EQ(devices, rd.stage_devices) << rd.file;
    EXPECT_EQ(nodes, rd.nodes) << rd.file;
    EXPECT_EQ(gpus, std::vector<std::string>(nodes.size(), "8")) << rd.file;
    EXPECT_EQ(s.shell.find("WORLD_SIZE")->text, "32") << rd.file;
  }
}

// The launcher really runs: bash executes it with a stand-in torchrun
// that records its arguments, on the node whose host name is NODE_HOSTS[2];
// the recorded command reads back as the same model and settings.
TEST(MegatronLauncher, LauncherRunsUnderBash) {
  if (std::system("bash -c true > /dev/null 2>&1") != 0) GTEST_SKIP() << "no bash";
  const fs::path d = scratch_dir("run");
  const fs::path bin = d / "bin";
  fs::create_directories(bin);
  std::ofstream(bin / "torchrun") << "#!/bin/bash\nprintf '%q ' torchrun \"$@\" > \"$RECORD\"\n";
  std::ofstream(bin / "hostname") << "#!/bin/sh\necho h800-node-000\n";
  for (const char* f : {"torchrun", "hostname"}) {
    fs::permissions(bin / f, fs::perms::owner_all, fs::perm_options::add);
  }
  const fs::path golden = fs::path(kData) / "golden" / "mixtral_s_paper_32-1.sh";
  const fs::path record = d / "record.txt";
  const std::string cmd = "env -u NODE_RANK -u SLURM_NODEID RECORD='" + record.string() +
                          "' PATH='" + bin.string() + "':\"$PATH\" bash '" + golden.string() +
                          "' > /dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const std::string recorded = slurp(record);
  MegatronScript ran = parse_megatron_script(recorded + "\n", "record");
  ASSERT_TRUE(ran.shell.has_command);
  std::vector<std::string> prefix;
  for (const ShellWord& w : ran.shell.launch.prefix) prefix.push_back(w.text);
  // h800-node-000 is the third node of the golden's table (910B, 910B |
  // H800, H800).
  EXPECT_EQ(prefix, (std::vector<std::string>{"torchrun", "--nnodes", "4", "--node-rank", "2",
                                              "--nproc-per-node", "8", "--master-addr",
                                              "910b-node-000", "--master-port", "6000"}));
  MegatronScript source = read_megatron_script(kData + "mixtral_s.sh");
  Workload expected = megatron_workload(source);
  Workload got = megatron_workload(ran);
  got.model.name = expected.model.name;
  EXPECT_EQ(got, expected);
  EXPECT_EQ(parallel_flags(recorded + "\n"), parallel_flags(slurp(golden)));
}

// The launcher keeps the script's MASTER_PORT as its default (Megatron's
// examples set one; 6000 only when the script does not).
TEST(MegatronLauncher, KeepsTheScriptsMasterPort) {
  const ClusterSpec cluster = load_cluster("paper:32-1");
  std::string text = slurp(kData + "mixtral_s.sh");
  MegatronScript golden = read_megatron_script(kData + "golden/mixtral_s_paper_32-1.sh");
  for (const auto& [assign, expect] : std::vector<std::pair<std::string, std::string>>{
           {"", "MASTER_PORT=${MASTER_PORT:-6000}\n"},
           {"MASTER_PORT=${MASTER_PORT:-29500}\n", "MASTER_PORT=${MASTER_PORT:-29500}\n"},
           {"MASTER_PORT=12355\n", "MASTER_PORT=${MASTER_PORT:-12355}\n"}}) {
    MegatronScript s = parse_megatron_script(assign + text, "port.sh");
    const Workload w = megatron_workload(s);
    const Plan plan = megatron_plan(golden, w, cluster);
    const ProfileTables tables =
        make_analytic_tables(w, cluster, 1, {plan.parallel.tp}, {plan.parallel.cp});
    const CostModel model(w, cluster, tables);
    const Launcher l = make_megatron_launcher(model.evaluate(plan), model, &s, "test");
    EXPECT_NE(l.text.find(expect), std::string::npos) << assign << l.text;
  }
}

TEST(MegatronLauncher, HostListNamesTheNodes) {
  const HostsByDevice hosts = parse_launcher_hosts(
      "# host device\na100 H800\nb200 910b  # case-insensitive\na101 H800\nb201 Ascend910B\n",
      "hosts");
  EXPECT_EQ(hosts.at("h800"), (std::vector<std::string>{"a100", "a101"}));
  // The catalog's aliases name the catalog's device.
  EXPECT_EQ(hosts.at("910b"), (std::vector<std::string>{"b200", "b201"}));
  EXPECT_THROW(parse_launcher_hosts("a100\n", "hosts"), InputError);
  EXPECT_THROW(parse_launcher_hosts("a100 H800\na100 910B\n", "hosts"), InputError);

  const ClusterSpec cluster = load_cluster("paper:32-1");
  MegatronScript s = read_megatron_script(kData + "mixtral_s.sh");
  const Workload w = megatron_workload(s);
  // The golden plan for this case: 910B x7 | H800 x17, two nodes each.
  MegatronScript golden = read_megatron_script(kData + "golden/mixtral_s_paper_32-1.sh");
  const Plan plan = megatron_plan(golden, w, cluster);
  const ProfileTables tables =
      make_analytic_tables(w, cluster, 1, {plan.parallel.tp}, {plan.parallel.cp});
  const CostModel model(w, cluster, tables);
  const Launcher l = make_megatron_launcher(model.evaluate(plan), model, &s, "test", hosts);
  EXPECT_EQ(l.nodes, (std::vector<std::string>{"b200", "b201", "a100", "a101"}));
  EXPECT_NE(l.text.find("MASTER_ADDR=${MASTER_ADDR:-b200}"), std::string::npos);
  // Too few hosts of a type, or a type the cluster lacks, is an input error.
  EXPECT_THROW(make_megatron_launcher(model.evaluate(plan), model, &s, "test",
                                      parse_launcher_hosts("a100 H800\nb200 910B\n", "h")),
               InputError);
  EXPECT_THROW(make_megatron_launcher(model.evaluate(plan), model, &s, "test",
                                      parse_launcher_hosts("a100 H800\nx MI300X\n", "h")),
               InputError);
}

// evaluate is told the world the script runs on without editing it:
// --nnodes x --gpus-per-node replace what the script says (16: torchrun
// --nnodes 2 --nproc-per-node 8), with a note; one without the other is
// an input error.
TEST(MegatronLauncher, EvaluateTakesTheWorldFromTheCommandLine) {
  std::string out;
  const int code = cli({"evaluate", "--megatron-script", kData + "mixtral_s.sh", "--cluster",
                        "paper:32-2", "--nnodes", "4", "--gpus-per-node", "8"},
                       &out);
  EXPECT_EQ(code, kExitOk) << out;
  EXPECT_NE(out.find("PP=2 TP=2 CP=1 EP=4 TPE=2 DP=8"), std::string::npos) << out;
  EXPECT_NE(out.find("world size 32 from --nnodes 4 x --gpus-per-node 8 (the script says 16)"),
            std::string::npos)
      << out;
  EXPECT_EQ(cli({"evaluate", "--megatron-script", kData + "mixtral_s.sh", "--cluster", "paper:32-2",
                 "--nnodes", "4"},
                &out),
            kExitInput);
  EXPECT_EQ(cli({"evaluate", "--model", "mixtral-s", "--cluster", "paper:32-2", "--nnodes", "4",
                 "--gpus-per-node", "8"},
                &out),
            kExitInput);
}

TEST(MegatronLauncher, EvaluateScoresTheScriptsOwnSettings) {
  std::string out;
  const int code =
      cli({"evaluate", "--megatron-script", kData + "deepseek_v3_like.sh", "--cluster", "H800:64"},
          &out);
  EXPECT_EQ(code, kExitNoFit);  // 16 DeepSeek-V3 layers over PP 4 do not fit 80 GB
  EXPECT_NE(out.find("PP=4 TP=2 CP=1 EP=8 TPE=1 DP=8"), std::string::npos) << out;
  EXPECT_NE(out.find("note: "), std::string::npos);
  EXPECT_NE(out.find("--mystery-flag"), std::string::npos);
  // --megatron-stage-devices names the stages' types for the script's own plan.
  const int placed = cli({"evaluate", "--megatron-script", kData + "mixtral_s.sh", "--cluster",
                          "paper:16-1", "--megatron-stage-devices", "910B,H800"},
                         &out);
  EXPECT_EQ(placed, kExitOk) << out;
  const auto first_910b = out.find("    0  910B");
  EXPECT_NE(first_910b, std::string::npos) << out;
  EXPECT_NE(out.find("    1  H800"), std::string::npos) << out;
  // A broken script is an input error (exit 2) naming the file and line.
  const fs::path d = scratch_dir("broken");
  std::ofstream(d / "broken.sh") << "A=(\n --num-layers 4\npython pretrain_gpt.py \"${A[@]}\n";
  std::string msg;
  EXPECT_EQ(
      cli({"plan", "--megatron-script", (d / "broken.sh").string(), "--cluster", "H800:8"}, &msg),
      kExitInput);
  EXPECT_NE(msg.find("broken.sh:3: unterminated double quote"), std::string::npos) << msg;
  // --model and --megatron-script together are an input error.
  const test::CliRun r = test::run(
      {"evaluate", "--model", "mixtral-s", "--megatron-script", "x.sh", "--cluster", "H800:8"});
  EXPECT_EQ(r.code, kExitInput);
  EXPECT_NE(r.err.find("not both"), std::string::npos) << r.err;
}

// How often `needle` occurs in the executable lines of a launcher (the
// header's comments may quote flags).
std::size_t count_in_command(const std::string& launcher, const std::string& needle) {
  const std::string text = executable_lines(launcher);
  std::size_t n = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

// The value(s) of one flag of a launcher, as Megatron reads them.
std::string flag_value(const std::string& launcher, const std::string& name) {
  MegatronScript s = parse_megatron_script(launcher, "launcher");
  const MegatronFlag* f = s.find(name);
  if (f == nullptr) return "(absent)";
  std::string v;
  for (const ShellWord& w : f->values) v += (v.empty() ? "" : " ") + w.text;
  return v;
}

// The Mixtral 8x7B example script with `extra` flag lines after its
// --overlap-grad-reduce line.
std::string mixtral_8x7b_with(const std::string& extra) {
  std::string text = slurp(kData + "mixtral_8x7b.sh");
  const std::string anchor = "    --overlap-grad-reduce\n";
  const auto at = text.find(anchor);
  EXPECT_NE(at, std::string::npos);
  if (at != std::string::npos) text.replace(at, anchor.size(), anchor + extra);
  return text;
}

// Runs `launcher` under bash with a stand-in torchrun that records its
// arguments (and a hostname that names no node), with `env` (NAME=VALUE
// words) and positional `args`; returns the recorded command line, or ""
// when bash is missing.
std::string run_launcher(const std::string& launcher, const std::string& env,
                         const std::string& args) {
  if (std::system("bash -c true > /dev/null 2>&1") != 0) return "";
  const fs::path d = scratch_dir("run");
  const fs::path bin = d / "bin";
  fs::create_directories(bin);
  std::ofstream(bin / "torchrun") << "#!/bin/bash\nprintf '%q ' torchrun \"$@\" > \"$RECORD\"\n";
  std::ofstream(bin / "hostname") << "#!/bin/sh\necho unknown-host\n";
  for (const char* f : {"torchrun", "hostname"}) {
    fs::permissions(bin / f, fs::perms::owner_all, fs::perm_options::add);
  }
  std::ofstream(d / "launch.sh") << launcher;
  const fs::path record = d / "record.txt";
  const std::string cmd = "env -u NODE_RANK -u SLURM_NODEID -u WANDB_API_KEY -u WANDB_PROJECT " +
                          env + " RECORD='" + record.string() + "' PATH='" + bin.string() +
                          "':\"$PATH\" bash '" + (d / "launch.sh").string() + "' " + args +
                          " > /dev/null 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return slurp(record) + "\n";
}

struct Launched {
  Launcher launcher;
  Workload workload2;
  Plan plan2;
  std::vector<std::string> notes2;
};

Launched launch(const Workload& w, const ClusterSpec& cluster, const Plan& plan,
                const MegatronScript* script) {
  const ProfileTables tables =
      make_analytic_tables(w, cluster, plan.parallel.micro_batch, {plan.parallel.tp}, {1});
  const CostModel model(w, cluster, tables);
  MegatronScript copy = script != nullptr ? *script : MegatronScript{};
  Launched r;
  r.launcher =
      make_megatron_launcher(model.evaluate(plan), model, script ? &copy : nullptr, "test");
  MegatronScript back = parse_megatron_script(r.launcher.text, "launcher.sh");
  r.workload2 = megatron_workload(back);
  r.workload2.model.name = w.model.name;
  r.plan2 = megatron_plan(back, r.workload2, cluster);
  r.notes2 = back.notes;
  return r;
}

// A plan with v virtual stages per rank: even stages divisible by v are
// launched with --num-virtual-stages-per-pipeline-rank v, others with an
// interleaved layout of PP·v stages; both read back as the same plan.
TEST(MegatronLauncher, InterleavedPlansAreLaunchedAndReadBack) {
  const Workload w = load_workload("mixtral-s");  // 24 layers
  const ClusterSpec cluster = load_cluster("H800:16");
  // PP 2 x TP 2 x DP 4, EP 4: M = 256/4 = 64.
  const ParallelConfig pi{2, 2, 1, 4, 1, 4, 1, 1};
  struct Case {
    int vpp;
    std::vector<int> layers;
    std::string vpp_flag;  // --num-virtual-stages-per-pipeline-rank
    std::string layout;    // --pipeline-model-parallel-layout
  };
  const std::vector<Case> cases = {
      {2, {12, 12}, "2", "(absent)"},
      {3, {12, 12}, "3", "(absent)"},
      {2, {13, 11}, "(absent)", "E,t*7|t*6|t*6|t*5,L"},
      {3, {13, 11}, "(absent)", "E,t*5|t*4|t*4|t*4|t*4|t*3,L"},
      {5, {12, 12}, "(absent)", "E,t*3|t*3|t*3|t*3|t*2|t*2|t*2|t*2|t*2|t*2,L"},  // 12 % 5 != 0
      {1, {13, 11}, "(absent)", "(absent)"},  // plain: first/last layers
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message()
                 << "vpp " << c.vpp << ", layers " << c.layers[0] << "+" << c.layers[1]);
    Plan plan;
    plan.parallel = pi;
    plan.parallel.vpp = c.vpp;
    plan.stages = {{0, c.layers[0], {}}, {0, c.layers[1], {}}};
    const Launched r = launch(w, cluster, plan, nullptr);
    const std::string& text = r.launcher.text;
    EXPECT_EQ(flag_value(text, "--num-virtual-stages-per-pipeline-rank"), c.vpp_flag) << text;
    EXPECT_EQ(flag_value(text, "--pipeline-model-parallel-layout"), c.layout) << text;
    EXPECT_EQ(flag_value(text, "--num-layers-per-virtual-pipeline-stage"), "(absent)");
    EXPECT_EQ(r.launcher.plan, plan);
    EXPECT_EQ(r.plan2, plan) << text;
    EXPECT_EQ(r.plan2.parallel.vpp, c.vpp);
    EXPECT_EQ(r.workload2, w);
    for (const std::string& note : r.notes2) {
      EXPECT_EQ(note.find("virtual"), std::string::npos) << note;
    }
  }
}

// The overlaps the plan was costed with are written once each, the
// script's own copies replaced; --tp-comm-overlap is dropped (with a note)
// when the plan has no TP, --overlap-moe-expert-parallel-comm when it has
// no EP.
// --grad-reduce-in-bf16 is written once from the training settings (the
// script's own copy replaced) and reads back.
TEST(MegatronLauncher, GradReduceInBf16IsWrittenOnce) {
  const std::string text = mixtral_8x7b_with("    --grad-reduce-in-bf16\n");
  MegatronScript script = parse_megatron_script(text, "mixtral_8x7b_bf16_grads.sh");
  const Workload w = megatron_workload(script);
  ASSERT_TRUE(w.training.grad_reduce_in_bf16);
  const ClusterSpec cluster = load_cluster("H800:32");
  const Plan plan = megatron_plan(script, w, cluster);
  const Launched r = launch(w, cluster, plan, &script);
  EXPECT_EQ(count_in_command(r.launcher.text, "--grad-reduce-in-bf16"), 1u) << r.launcher.text;
  EXPECT_EQ(r.workload2, w);
  Workload off = w;
  off.training.grad_reduce_in_bf16 = false;
  const Launched r2 = launch(off, cluster, plan, &script);
  EXPECT_EQ(count_in_command(r2.launcher.text, "--grad-reduce-in-bf16"), 0u);
}

// Optimizer CPU offload is read from Megatron's flags (the fraction
// defaults to 1.0), written once with the precision-aware optimizer it
// needs, and reads back; a fraction without the switch is noted.
TEST(MegatronLauncher, OptimizerOffloadIsReadWrittenAndReadBack) {
  MegatronScript script = parse_megatron_script(
      mixtral_8x7b_with("    --optimizer-cpu-offload --optimizer-offload-fraction 0.5\n"),
      "mixtral_8x7b_offload.sh");
  const Workload w = megatron_workload(script);
  EXPECT_EQ(w.training.optimizer_offload_fraction, 0.5);
  const ClusterSpec cluster = load_cluster("H800:32");
  const Plan plan = megatron_plan(script, w, cluster);
  const Launched r = launch(w, cluster, plan, &script);
  EXPECT_EQ(count_in_command(r.launcher.text, "--optimizer-cpu-offload"), 1u) << r.launcher.text;
  EXPECT_EQ(count_in_command(r.launcher.text, "--optimizer-offload-fraction 0.5"), 1u);
  EXPECT_EQ(count_in_command(r.launcher.text, "--use-precision-aware-optimizer"), 1u);
  EXPECT_EQ(r.workload2, w);

  MegatronScript all = parse_megatron_script(mixtral_8x7b_with("    --optimizer-cpu-offload\n"),
                                             "mixtral_8x7b_offload_all.sh");
  EXPECT_EQ(megatron_workload(all).training.optimizer_offload_fraction, 1.0);

  MegatronScript none = parse_megatron_script(
      mixtral_8x7b_with("    --optimizer-offload-fraction 0.5\n"), "mixtral_8x7b_stray.sh");
  EXPECT_EQ(megatron_workload(none).training.optimizer_offload_fraction, 0.0);
  bool noted = false;
  for (const std::string& n : none.notes) {
    noted = noted || n.find("--optimizer-offload-fraction has no effect") != std::string::npos;
  }
  EXPECT_TRUE(noted);
}

// Megatron-FSDP: the sharding strategy is read (no_shard is plain DP, optim
// the distributed optimizer), written with the checkpoint format it needs
// (the script's own replaced), and reads back.
TEST(MegatronLauncher, MegatronFsdpIsReadWrittenAndReadBack) {
  const auto with = mixtral_8x7b_with;
  const struct {
    const char* strategy;
    Fsdp fsdp;
    bool distributed;
  } cases[] = {{"optim_grads_params", Fsdp::kOptimGradsParams, true},
               {"optim_grads", Fsdp::kOptimGrads, true},
               {"optim", Fsdp::kOff, true}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.strategy);
    MegatronScript script = parse_megatron_script(
        with(std::string("    --use-megatron-fsdp --data-parallel-sharding-strategy ") +
             c.strategy + " --ckpt-format torch_dist\n"),
        "fsdp.sh");
    const Workload w = megatron_workload(script);
    EXPECT_EQ(w.training.fsdp, c.fsdp);
    EXPECT_EQ(w.training.distributed_optimizer, c.distributed);
    const ClusterSpec cluster = load_cluster("H800:32");
    const Launched r = launch(w, cluster, megatron_plan(script, w, cluster), &script);
    EXPECT_EQ(r.workload2, w);
    if (c.fsdp != Fsdp::kOff) {
      EXPECT_EQ(count_in_command(r.launcher.text, "--use-megatron-fsdp"), 1u) << r.launcher.text;
      EXPECT_EQ(count_in_command(r.launcher.text, "--ckpt-format fsdp_dtensor"), 1u);
      EXPECT_EQ(count_in_command(r.launcher.text, "--ckpt-format torch_dist"), 0u);
    }
  }
  MegatronScript plain = parse_megatron_script(with("    --use-megatron-fsdp\n"), "ns.sh");
  EXPECT_EQ(megatron_workload(plain).training.fsdp, Fsdp::kOff);  // no_shard, the default
  MegatronScript bad = parse_megatron_script(
      with("    --use-megatron-fsdp --data-parallel-sharding-strategy zero3\n"), "bad.sh");
  EXPECT_THROW(megatron_workload(bad), InputError);
}

// GPT-OSS's attention in Megatron's flags: --window-size 128,0
// --window-attn-skip-freq 2 --softmax-type learnable --add-qkv-bias are read,
// and a launcher for a model without a script writes them back.
TEST(MegatronLauncher, AttentionVariantsAreReadAndWritten) {
  const std::string text = mixtral_8x7b_with(
      "    --window-size 128,0 --window-attn-skip-freq 2 --softmax-type learnable "
      "--add-qkv-bias\n");
  MegatronScript script = parse_megatron_script(text, "swa.sh");
  Workload w = megatron_workload(script);
  EXPECT_EQ(w.model.sliding_window, 128);
  ASSERT_EQ(w.model.window_layers.size(), static_cast<std::size_t>(w.model.num_layers));
  EXPECT_EQ(w.model.window_layers[0], 1);
  EXPECT_EQ(w.model.window_layers[1], 0);
  EXPECT_TRUE(w.model.attention_sinks);
  EXPECT_TRUE(w.model.qkv_bias);
  const ClusterSpec cluster = load_cluster("H800:32");
  const Plan plan = megatron_plan(script, w, cluster);
  const Launched r = launch(w, cluster, plan, nullptr);
  EXPECT_NE(r.launcher.text.find("--window-size 128,0"), std::string::npos) << r.launcher.text;
  EXPECT_NE(r.launcher.text.find("--window-attn-skip-freq 2"), std::string::npos);
  EXPECT_NE(r.launcher.text.find("--softmax-type learnable"), std::string::npos);
  EXPECT_NE(r.launcher.text.find("--add-qkv-bias"), std::string::npos);
  EXPECT_EQ(r.workload2.model.window_layers, w.model.window_layers);
  EXPECT_EQ(r.workload2.model.sliding_window, 128);
}

// --mtp-num-layers is read into the model and kept or written by the
// launcher (Megatron puts the MTP layer on the last stage; a layout, when
// one is written, says so with "m").
TEST(MegatronLauncher, MtpLayersAreReadAndLaidOut) {
  const std::string text = mixtral_8x7b_with("    --mtp-num-layers 1\n");
  MegatronScript script = parse_megatron_script(text, "mtp.sh");
  const Workload w = megatron_workload(script);
  EXPECT_EQ(w.model.mtp_layers, 1);
  EXPECT_TRUE(script.notes.empty() || script.notes.front().find("mtp") == std::string::npos);
  const ClusterSpec cluster = load_cluster("H800:32");
  const Plan plan = megatron_plan(script, w, cluster);
  const Launched r = launch(w, cluster, plan, &script);
  EXPECT_EQ(count_in_command(r.launcher.text, "--mtp-num-layers 1"), 1u) << r.launcher.text;
  if (r.launcher.text.find("--pipeline-model-parallel-layout") != std::string::npos) {
    EXPECT_NE(r.launcher.text.find(",m,L"), std::string::npos) << r.launcher.text;
  }
  EXPECT_EQ(r.workload2.model.mtp_layers, 1);
  const Launched bare = launch(w, cluster, plan, nullptr);
  EXPECT_NE(bare.launcher.text.find("--mtp-num-layers 1"), std::string::npos);
}

// A plan's recompute modules are written as --recompute-modules (the
// script's own list replaced) and read back as the same plan; modules a
// dense model does not have (moe_act) are left out, as Megatron rejects
// moe_act without grouped experts.
TEST(MegatronLauncher, RecomputeModulesAreWrittenAndReadBack) {
  const std::string text =
      mixtral_8x7b_with("    --recompute-granularity selective --recompute-modules core_attn\n");
  MegatronScript script = parse_megatron_script(text, "mixtral_8x7b_modules.sh");
  const Workload w = megatron_workload(script);
  const ClusterSpec cluster = load_cluster("H800:32");
  Plan plan = megatron_plan(script, w, cluster);
  const unsigned set = module_bit(RecomputeModule::kLayernorm) | module_bit(RecomputeModule::kMoe);
  for (StagePlan& st : plan.stages) st.recompute = {RecomputeKind::kSelective, 0, set};
  const Launched r = launch(w, cluster, plan, &script);
  EXPECT_NE(r.launcher.text.find("--recompute-modules layernorm moe\n"), std::string::npos)
      << r.launcher.text;
  EXPECT_EQ(count_in_command(r.launcher.text, "--recompute-modules"), 1u);
  EXPECT_EQ(r.plan2, plan);
  EXPECT_EQ(r.launcher.text.find("cannot be expressed"), std::string::npos) << r.launcher.text;

  // FP8 delayed scaling: the search's selective is core_attn alone, which
  // Megatron accepts with that recipe; written so and read back.
  Workload fp8 = w;
  fp8.training.precision = Precision::kFp8;
  fp8.training.fp8_recipe = Fp8Recipe::kDelayed;
  Plan fp8_plan = plan;
  for (StagePlan& st : fp8_plan.stages) {
    st.recompute = {RecomputeKind::kSelective, 0, default_selective_modules(fp8.training)};
  }
  const Launched f = launch(fp8, cluster, fp8_plan, &script);
  EXPECT_NE(f.launcher.text.find("--recompute-modules core_attn\n"), std::string::npos)
      << f.launcher.text;
  EXPECT_EQ(f.plan2, fp8_plan);

  // A dense model with the default set: core_attn alone is written.
  const Workload dense = load_workload("llama2-7b");
  const ClusterSpec a100 = load_cluster("A100-80GB:16");
  Plan dp;
  dp.parallel = ParallelConfig{2, 2, 1, 1, 1, 4, 1};
  dp.stages = {{0, 16, {RecomputeKind::kSelective, 0}}, {0, 16, {RecomputeKind::kSelective, 0}}};
  const Launched d = launch(dense, a100, dp, nullptr);
  EXPECT_NE(d.launcher.text.find("--recompute-modules core_attn\n"), std::string::npos)
      << d.launcher.text;
  EXPECT_EQ(d.launcher.text.find("cannot be expressed"), std::string::npos) << d.launcher.text;
}

TEST(MegatronLauncher, OverlapFlagsAreWrittenOnceFromTheTrainingSettings) {
  const std::string text = mixtral_8x7b_with(
      "    --tp-comm-overlap\n    --overlap-moe-expert-parallel-comm\n"
      "    --delay-wgrad-compute\n");
  MegatronScript script = parse_megatron_script(text, "mixtral_8x7b_overlaps.sh");
  const Workload w = megatron_workload(script);
  ASSERT_EQ(w.training.overlap, (Overlap{true, true, true, true, true}));
  const ClusterSpec cluster = load_cluster("H800:32");
  const char* flags[] = {"--overlap-grad-reduce", "--overlap-param-gather", "--tp-comm-overlap",
                         "--overlap-moe-expert-parallel-comm", "--delay-wgrad-compute"};
  // The script's own plan (TP 1, so no sequence parallelism) is one
  // Megatron refuses with --tp-comm-overlap; the same plan without it:
  try {
    (void)megatron_plan(script, w, cluster);
    ADD_FAILURE() << "--tp-comm-overlap at TP 1 was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("mixtral_8x7b_overlaps.sh:61: --tp-comm-overlap needs "
                                         "sequence parallelism, which Megatron turns off"),
              std::string::npos)
        << e.what();
  }
  MegatronScript without =
      parse_megatron_script(mixtral_8x7b_with("    --overlap-moe-expert-parallel-comm\n"), "w.sh");
  const Plan own = megatron_plan(without, megatron_workload(without), cluster);
  {
    // TP 2, EP 8: all five, once each; read back, the same settings.
    Plan plan = own;
    plan.parallel.tp = 2;
    plan.parallel.dp = 4;
    const Launched r = launch(w, cluster, plan, &script);
    for (const char* f : flags) {
      EXPECT_EQ(count_in_command(r.launcher.text, f), 1u) << f << "\n" << r.launcher.text;
    }
    EXPECT_EQ(r.workload2, w);
    EXPECT_EQ(r.plan2, plan);
    for (const std::string& note : r.launcher.notes) {
      EXPECT_EQ(note.find("dropped"), std::string::npos) << note;
    }
  }
  {
    // A plan with TP 1: --tp-comm-overlap is dropped and said.
    const Plan plan = own;
    ASSERT_EQ(plan.parallel.tp, 1);
    const Launched r = launch(w, cluster, plan, &script);
    EXPECT_EQ(count_in_command(r.launcher.text, "--tp-comm-overlap"), 0u) << r.launcher.text;
    EXPECT_EQ(count_in_command(r.launcher.text, "--overlap-grad-reduce"), 1u);
    EXPECT_EQ(count_in_command(r.launcher.text, "--overlap-param-gather"), 1u);
    EXPECT_EQ(count_in_command(r.launcher.text, "--overlap-moe-expert-parallel-comm"), 1u);
    int said = 0;
    for (const std::string& note : r.launcher.notes) {
      said += note.find("--tp-comm-overlap is dropped") != std::string::npos;
    }
    EXPECT_EQ(said, 1);
    EXPECT_NE(r.launcher.text.find("--tp-comm-overlap is dropped"), std::string::npos);
    EXPECT_EQ(r.workload2.training.overlap, (Overlap{true, true, false, true, true}));
    EXPECT_EQ(r.plan2, plan);
  }
  {
    // EP 1: --overlap-moe-expert-parallel-comm is dropped and said.
    Plan plan = own;
    plan.parallel.ep = 1;
    const Launched r = launch(w, cluster, plan, &script);
    EXPECT_EQ(count_in_command(r.launcher.text, "--overlap-moe-expert-parallel-comm"), 0u);
    EXPECT_EQ(count_in_command(r.launcher.text, "--delay-wgrad-compute"), 0u);
    bool said = false;
    for (const std::string& note : r.launcher.notes) {
      said = said || note.find(
                         "--overlap-moe-expert-parallel-comm and --delay-wgrad-compute are "
                         "dropped") != std::string::npos;
    }
    EXPECT_TRUE(said);
  }
  {
    // Overlaps on in the workload but not in a script (a preset): written.
    Workload preset = load_workload("mixtral-s");
    preset.training.overlap = {true, false, true, false};
    Plan plan;
    plan.parallel = {2, 2, 1, 4, 1, 4, 1, 1};
    plan.stages = {{0, 12, {}}, {0, 12, {}}};
    const Launched r = launch(preset, load_cluster("H800:16"), plan, nullptr);
    EXPECT_EQ(count_in_command(r.launcher.text, "--overlap-grad-reduce"), 1u);
    EXPECT_EQ(count_in_command(r.launcher.text, "--tp-comm-overlap"), 1u);
    EXPECT_EQ(count_in_command(r.launcher.text, "--overlap-param-gather"), 0u);
    EXPECT_EQ(count_in_command(r.launcher.text, "--overlap-moe-expert-parallel-comm"), 0u);
    EXPECT_EQ(r.workload2, preset);
  }
}

// FP8: the launcher writes --fp8-format (hybrid for the tensor-scaled
// recipes, e4m3 for the block-scaled ones) and --fp8-recipe once each, the
// script's own replaced; read back, the same workload. A bf16 workload
// drops the script's FP8 flags.
TEST(MegatronLauncher, Fp8FlagsAreWrittenOnceFromTheTrainingSettings) {
  std::string text = slurp(kData + "mixtral_8x7b.sh");
  const std::string anchor = "    --bf16\n";
  ASSERT_NE(text.find(anchor), std::string::npos);
  text.replace(text.find(anchor), anchor.size(),
               anchor + "    --fp8-format e4m3\n    --fp8-recipe delayed\n");
  MegatronScript script = parse_megatron_script(text, "mixtral_8x7b_fp8.sh");
  const Workload read = megatron_workload(script);
  ASSERT_EQ(read.training.precision, Precision::kFp8);
  ASSERT_EQ(read.training.fp8_recipe, Fp8Recipe::kDelayed);
  const ClusterSpec cluster = load_cluster("H800:32");
  const Plan plan = megatron_plan(script, read, cluster);
  struct Case {
    Fp8Recipe recipe;
    const char* format;
  };
  for (const Case& c : {Case{Fp8Recipe::kDelayed, "hybrid"}, Case{Fp8Recipe::kTensorwise, "hybrid"},
                        Case{Fp8Recipe::kBlockwise, "e4m3"}, Case{Fp8Recipe::kMxfp8, "e4m3"}}) {
    SCOPED_TRACE(to_string(c.recipe));
    Workload w = read;
    w.training.fp8_recipe = c.recipe;
    for (const MegatronScript* s : {static_cast<const MegatronScript*>(&script),
                                    static_cast<const MegatronScript*>(nullptr)}) {
      SCOPED_TRACE(s ? "from the script" : "without a script");
      const Launched r = launch(w, cluster, plan, s);
      const std::string& l = r.launcher.text;
      EXPECT_EQ(count_in_command(l, "--fp8-format"), 1u) << l;
      EXPECT_EQ(count_in_command(l, "--fp8-recipe"), 1u) << l;
      EXPECT_EQ(flag_value(l, "--fp8-format"), c.format) << l;
      EXPECT_EQ(flag_value(l, "--fp8-recipe"), to_string(c.recipe)) << l;
      EXPECT_EQ(count_in_command(l, "--bf16"), 1u) << l;
      EXPECT_EQ(count_in_command(l, "--fp16"), 0u) << l;
      EXPECT_EQ(r.workload2.training, w.training);
      if (s) {
        EXPECT_EQ(r.workload2, w);
        EXPECT_EQ(r.plan2, plan);
      } else {
        EXPECT_EQ(r.workload2.model.moe_layers, w.model.moe_layers);
      }
    }
  }
  {
    // The same script planned in bf16 (hapmoe --precision bf16): no FP8 flag.
    Workload w = read;
    w.training.precision = Precision::kBf16;
    const Launched r = launch(w, cluster, plan, &script);
    EXPECT_EQ(count_in_command(r.launcher.text, "--fp8-format"), 0u) << r.launcher.text;
    EXPECT_EQ(count_in_command(r.launcher.text, "--fp8-recipe"), 0u) << r.launcher.text;
    EXPECT_EQ(count_in_command(r.launcher.text, "--bf16"), 1u) << r.launcher.text;
    EXPECT_EQ(r.workload2.training.precision, Precision::kBf16);
    EXPECT_EQ(r.workload2, w);
  }
}

// Through the command line: an FP8 script planned on H800s gives a
// launcher with the script's FP8 settings, which reads back as the same
// workload.
TEST(MegatronLauncher, Fp8ScriptRoundTripsThroughPlanAndLauncher) {
  const fs::path d = scratch_dir("fp8");
  std::string text = slurp(kData + "mixtral_s.sh");
  const std::string anchor = "--bf16";
  ASSERT_NE(text.find(anchor), std::string::npos);
  text.replace(text.find(anchor), anchor.size(),
               "--bf16 --fp8-format hybrid --fp8-recipe tensorwise");
  const std::string script = (d / "mixtral_s_fp8.sh").string();
  std::ofstream(script) << text;
  const RoundTrip r = round_trip(script, "H800:16");
  EXPECT_EQ(r.workload.training.precision, Precision::kFp8);
  EXPECT_EQ(r.workload.training.fp8_recipe, Fp8Recipe::kTensorwise);
  EXPECT_EQ(r.workload2, r.workload);
  EXPECT_EQ(count_in_command(r.launcher, "--fp8-format hybrid"), 1u) << r.launcher;
  EXPECT_EQ(count_in_command(r.launcher, "--fp8-recipe tensorwise"), 1u) << r.launcher;
  EXPECT_EQ(count_in_command(r.launcher, "--fp8-"), 2u) << r.launcher;
  fs::remove_all(d);
}

// Every flag a launcher writes, carried from the script or written by
// hapmoe, is a flag of Megatron-LM core_v0.15.0 (io/megatron/
// megatron_flags_core_v0.15.0.txt): the golden launchers', those written
// from every preset's model flags, interleaved plans' and scripts with each
// optional training setting.
TEST(MegatronLauncher, EveryWrittenFlagIsAFlagOfThePinnedMegatron) {
  std::set<std::string> seen;
  const auto expect_listed = [&](const std::string& text, const std::string& what) {
    const MegatronScript s = parse_megatron_script(text, what);
    EXPECT_GT(s.flags.size(), 10u) << what;
    for (const MegatronFlag& f : s.flags) {
      EXPECT_TRUE(is_megatron_flag(f.name)) << what << ": " << f.name;
      seen.insert(f.name);
    }
  };
  for (const char* g : {"mixtral_s_paper_32-1.sh", "mixtral_s_paper_32-2.sh",
                        "mixtral_l_paper_32-1.sh", "mixtral_l_paper_32-2.sh"}) {
    expect_listed(slurp(fs::path(kData) / "golden" / g), g);
  }
  const ClusterSpec h8 = load_cluster("H800:8");
  for (const ModelPreset& p : model_presets()) {
    const Workload& w = p.workload;
    Plan plan;
    plan.parallel = {1, 1, 1, 1, 1, 8, w.training.micro_batch};
    plan.stages = {{0, w.model.num_layers, {}}};
    expect_listed(launch(w, h8, plan, nullptr).launcher.text, p.name);
  }
  const Workload mixtral_s = load_workload("mixtral-s");
  for (const auto& [vpp, first, second] :
       std::vector<std::tuple<int, int, int>>{{2, 12, 12}, {2, 13, 11}, {1, 13, 11}, {1, 14, 10}}) {
    Plan plan;
    plan.parallel = {2, 2, 1, 4, 1, 4, 1, 1};
    plan.parallel.vpp = vpp;
    plan.stages = {{0, first, {}}, {0, second, {}}};
    expect_listed(launch(mixtral_s, load_cluster("H800:16"), plan, nullptr).launcher.text,
                  "mixtral-s vpp " + std::to_string(vpp));
  }
  const ClusterSpec h32 = load_cluster("H800:32");
  for (const char* extra : {
           "",
           "    --fp8-format e4m3 --fp8-recipe blockwise\n",
           "    --use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params\n",
           "    --optimizer-cpu-offload --optimizer-offload-fraction 0.5 --grad-reduce-in-bf16\n",
           "    --moe-token-dispatcher-type flex --moe-enable-deepep\n",
           "    --recompute-granularity selective --recompute-modules core_attn moe_act\n",
           "    --recompute-granularity full --recompute-method block --recompute-num-layers 2\n",
       }) {
    MegatronScript script = parse_megatron_script(mixtral_8x7b_with(extra), "variant.sh");
    const Workload w = megatron_workload(script);
    expect_listed(launch(w, h32, megatron_plan(script, w, h32), &script).launcher.text,
                  "mixtral_8x7b.sh with " + std::string(extra));
  }
  // The variants wrote hapmoe's optional flags.
  for (const char* f : {"--fp8-recipe", "--use-megatron-fsdp", "--optimizer-cpu-offload",
                        "--use-precision-aware-optimizer", "--grad-reduce-in-bf16",
                        "--moe-enable-deepep", "--num-virtual-stages-per-pipeline-rank",
                        "--pipeline-model-parallel-layout", "--decoder-first-pipeline-num-layers",
                        "--recompute-modules", "--recompute-num-layers", "--overlap-grad-reduce"}) {
    EXPECT_EQ(seen.count(f), 1u) << f;
  }
}

// A flag carried from the script that Megatron-LM core_v0.15.0 does not
// define (made up, misspelt, as --flag=value) stops the launcher with one
// line naming the flag and its line; the script is still read (the flag
// kept with a note), and plan/evaluate without --launcher still run.
TEST(MegatronLauncher, CarriedFlagsNotOfMegatronAreRefused) {
  const ClusterSpec cluster = load_cluster("H800:32");
  for (const auto& [extra, name, hint] : std::vector<std::tuple<std::string, std::string, bool>>{
           {"    --not-a-megatron-flag 3\n", "--not-a-megatron-flag", false},
           {"    --micro-batch-sizes 2\n", "--micro-batch-sizes", true},
           {"    --not-a-megatron-flag=3\n", "--not-a-megatron-flag", false}}) {
    SCOPED_TRACE(extra);
    const std::string text = mixtral_8x7b_with(extra);
    const auto line = 1 + std::count(text.begin(), text.begin() + text.find(extra), '\n');
    MegatronScript script = parse_megatron_script(text, "typo.sh");
    EXPECT_EQ(script.unknown, std::vector<std::string>{name});
    const Workload w = megatron_workload(script);
    const Plan plan = megatron_plan(script, w, cluster);
    try {
      launch(w, cluster, plan, &script);
      ADD_FAILURE() << name << " was written";
    } catch (const InputError& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
      EXPECT_EQ(msg.rfind("typo.sh:" + std::to_string(line) + ": " + name +
                              " is not a flag of Megatron-LM core_v0.15.0",
                          0),
                0u)
          << msg;
      EXPECT_EQ(msg.find("did you mean --micro-batch-size?") != std::string::npos, hint) << msg;
    }
  }
  // Through the command line: deepseek_v3_like.sh passes --mystery-flag 7
  // (line 51). plan --launcher fails with exit code 2 and writes no launcher.
  const fs::path d = scratch_dir("refused");
  const test::CliRun r =
      test::run({"plan", "--megatron-script", kData + "deepseek_v3_like.sh", "--cluster", "H800:64",
                 "--top-k", "1", "--launcher", (d / "launch.sh").string()});
  EXPECT_EQ(r.code, kExitInput) << r.err;
  EXPECT_NE(r.err.find("deepseek_v3_like.sh:51: --mystery-flag is not a flag of Megatron-LM "
                       "core_v0.15.0"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(d / "launch.sh"));
  // Refused before the search (the check needs no plan): nothing of a
  // search's output is printed, and check_launcher_flags says the same.
  EXPECT_EQ(r.out.find("iteration latency"), std::string::npos) << r.out;
  EXPECT_THROW(check_launcher_flags(read_megatron_script(kData + "deepseek_v3_like.sh")),
               InputError);
  const test::CliRun no_launcher = test::run(
      {"plan", "--megatron-script", kData + "deepseek_v3_like.sh", "--cluster", "H800:64"});
  EXPECT_NE(no_launcher.code, kExitInput) << no_launcher.err;
}

// Flags written as "--flag value" strings in an array that the script
// expands unquoted: bash splits them, and so does the reader, so the
// launcher passes each flag and its value as two arguments (a value the
// script does not define, DATA_PATH=$3, is written as its unquoted
// expansion, which bash splits the same way). Run under bash, the launcher
// gives Megatron the argv the script gave it.
TEST(MegatronLauncher, SplitArrayElementsAreWrittenAsSeparateArguments) {
  std::string text = slurp(kData + "mixtral_8x7b.sh");
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"    --tokenizer-type Llama2Tokenizer\n", "    \"--tokenizer-type NullTokenizer\"\n"},
           {"    --data-path $DATA_PATH\n", "    \"--data-path $DATA_PATH\"\n"}}) {
    const auto at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
  }
  MegatronScript script = parse_megatron_script(text, "split.sh");
  ASSERT_NE(script.find("--tokenizer-type"), nullptr);
  EXPECT_EQ(script.find("--tokenizer-type")->values.size(), 1u);
  EXPECT_EQ(script.find("--tokenizer-type")->values[0].text, "NullTokenizer");
  ASSERT_NE(script.find("--data-path"), nullptr);
  EXPECT_EQ(script.find("--data-path")->values[0].source, "$3");  // DATA_PATH=$3
  EXPECT_TRUE(script.unknown.empty());
  const Workload w = megatron_workload(script);
  const ClusterSpec cluster = load_cluster("H800:32");
  const Plan plan = megatron_plan(script, w, cluster);
  const Launched r = launch(w, cluster, plan, &script);
  const std::string& l = r.launcher.text;
  EXPECT_EQ(count_in_command(l, "    --tokenizer-type NullTokenizer\n"), 1u) << l;
  EXPECT_EQ(count_in_command(l, "    --data-path $3\n"), 1u) << l;
  EXPECT_EQ(count_in_command(l, "'--"), 0u) << l;

  // What torchrun got, as Megatron's argument parser would read it.
  const std::string ran = run_launcher(l, "", "/ckpt /tok '/data/a_text_document'");
  if (ran.empty()) GTEST_SKIP() << "no bash";
  EXPECT_EQ(flag_value(ran, "--tokenizer-type"), "NullTokenizer") << ran;
  EXPECT_EQ(flag_value(ran, "--data-path"), "/data/a_text_document") << ran;
  EXPECT_EQ(flag_value(ran, "--save"), "/ckpt") << ran;
  EXPECT_EQ(ran.find("'--tokenizer-type NullTokenizer'"), std::string::npos) << ran;
}

// The launcher does what the script did: flags the script adds inside an
// if that hapmoe decided only by assuming a variable unset stay inside that
// if, and ${VAR:-default} stays a default (the Mixtral example's wandb
// flags).
TEST(MegatronLauncher, UndecidedBranchesAndDefaultsStayAsWritten) {
  MegatronScript script = read_megatron_script(kData + "mixtral_8x7b.sh");
  // WANDB_API_KEY unset: the branch is not read, but kept for the launcher.
  EXPECT_EQ(script.find("--wandb-project"), nullptr);
  const auto project =
      std::find_if(script.flags.begin(), script.flags.end(),
                   [](const MegatronFlag& f) { return f.name == "--wandb-project"; });
  ASSERT_NE(project, script.flags.end());
  EXPECT_TRUE(project->launcher_only);
  EXPECT_EQ(project->guard, "[ -n \"${WANDB_API_KEY}\" ]");
  EXPECT_TRUE(project->values[0].defaulted);
  EXPECT_EQ(project->values[0].text, "Mixtral");
  // Given the key, the branch is read.
  const MegatronScript keyed =
      read_megatron_script(kData + "mixtral_8x7b.sh", {.env = {{"WANDB_API_KEY", "k"}}});
  ASSERT_NE(keyed.find("--wandb-project"), nullptr);
  EXPECT_EQ(keyed.find("--wandb-project")->guard, "");
  const Workload w = megatron_workload(script);
  const ClusterSpec cluster = load_cluster("H800:32");
  const Plan plan = megatron_plan(script, w, cluster);
  const std::string l = launch(w, cluster, plan, &script).launcher.text;
  EXPECT_NE(l.find("if [ -n \"${WANDB_API_KEY}\" ]; then\n    MEGATRON_ARGS+=(\n"
                   "        --wandb-project ${WANDB_PROJECT:-\"Mixtral\"}\n"
                   "        --wandb-exp-name ${WANDB_NAME:-\"Mixtral_8x7B\"}\n    )\nfi\n"),
            std::string::npos)
      << l;

  const std::string plain = run_launcher(l, "", "/ckpt /tok /data");
  if (plain.empty()) GTEST_SKIP() << "no bash";
  EXPECT_EQ(flag_value(plain, "--wandb-project"), "(absent)") << plain;
  const std::string wandb =
      run_launcher(l, "WANDB_API_KEY=k WANDB_PROJECT=mine", "/ckpt /tok /data");
  EXPECT_EQ(flag_value(wandb, "--wandb-project"), "mine") << wandb;
  EXPECT_EQ(flag_value(wandb, "--wandb-exp-name"), "Mixtral_8x7B") << wandb;
  EXPECT_EQ(flag_value(wandb, "--save"), "/ckpt") << wandb;
}

// Pai-Megatron-Patch's entry points: the vocabulary from
// --padded-vocab-size (as given) or --patch-tokenizer-type's family (the
// model's vocab_size, --extra-vocab-size included), and their own flags kept in the launcher with a
// note (they used to stop every Pai script: "vocabulary unknown", then "not a flag of
// Megatron-LM").
TEST(MegatronLauncher, PaiEntryPointsKeepTheirOwnFlags) {
  const std::string head =
      "torchrun --nnodes 1 --nproc_per_node 8 pretrain_qwen.py --num-layers 2 --hidden-size 256 "
      "--num-attention-heads 4 --seq-length 128 --max-position-embeddings 128 "
      "--micro-batch-size 1 --global-batch-size 8 --bf16 --max-padding-length 128 "
      "--patch-tokenizer-type Qwen3Tokenizer ";
  MegatronScript padded = parse_megatron_script(head + "--padded-vocab-size 151936\n", "pai.sh");
  EXPECT_EQ(megatron_workload(padded).model.vocab, 151936);
  // Pai's --extra-vocab-size brings the tokenizer's 151643 to the model's
  // 151936, the family's size.
  MegatronScript extra = parse_megatron_script(head + "--extra-vocab-size 293\n", "pai.sh");
  EXPECT_EQ(megatron_workload(extra).model.vocab, 151936);

  const Workload w = megatron_workload(padded);
  const ClusterSpec cluster = load_cluster("H800:8");
  const Plan plan = megatron_plan(padded, w, cluster);
  const Launcher l = launch(w, cluster, plan, &padded).launcher;
  EXPECT_EQ(count_in_command(l.text, "    --max-padding-length 128\n"), 1u) << l.text;
  EXPECT_NE(std::find(l.notes.begin(), l.notes.end(),
                      "--max-padding-length, --patch-tokenizer-type are not flags of Megatron-LM "
                      "core_v0.15.0; kept for pretrain_qwen.py, whose own parser takes them"),
            l.notes.end());
  // pretrain_gpt.py still refuses them.
  MegatronScript gpt = parse_megatron_script(
      "torchrun --nnodes 1 --nproc_per_node 8 pretrain_gpt.py --num-layers 2 --hidden-size 256 "
      "--num-attention-heads 4 --seq-length 128 --micro-batch-size 1 --global-batch-size 8 --bf16 "
      "--vocab-size 1000 --max-padding-length 128\n",
      "gpt.sh");
  const Workload wg = megatron_workload(gpt);
  EXPECT_THROW(launch(wg, cluster, megatron_plan(gpt, wg, cluster), &gpt), InputError);
}

// A plain variable set in a branch the reading decided only by an
// assumption (MODE=${MODE:-mock}) reaches the launcher under its condition
// (it used to be dropped: the launcher passed --mock-data and --lr 1e-4
// whatever MODE was at run time): flags it holds are appended under the
// branch's condition, a value it holds is written as the variable, defined
// as the script does. Run under bash, the launcher passes what the script
// would for each MODE.
TEST(MegatronLauncher, PlainVariablesOfOtherBranchesAreLaunchedUnderTheirConditions) {
  const std::string text =
      "MODE=${MODE:-mock}\n"
      "LR=1e-4\n"
      "if [ \"$MODE\" = mock ]; then\n"
      "  DATA=\"--mock-data\"\n"
      "else\n"
      "  DATA=\"--data-path ${DATA_PATH} --split 99,1,0\"\n"
      "  LR=3e-4\n"
      "fi\n"
      "torchrun --nnodes 1 --nproc_per_node 8 pretrain_gpt.py --num-layers 2 --hidden-size 256 "
      "--num-attention-heads 4 --seq-length 128 --max-position-embeddings 128 "
      "--micro-batch-size 1 --global-batch-size 8 --bf16 --tokenizer-type NullTokenizer "
      "--vocab-size 1000 $DATA --lr $LR\n";
  MegatronScript script = parse_megatron_script(text, "modes.sh");
  ASSERT_NE(script.find("--mock-data"), nullptr);
  EXPECT_EQ(script.find("--data-path"), nullptr);  // read: the branch selected
  EXPECT_EQ(script.find("--lr")->values[0].text, "1e-4");
  const Workload w = megatron_workload(script);
  const ClusterSpec cluster = load_cluster("H800:8");
  const Launched r = launch(w, cluster, megatron_plan(script, w, cluster), &script);
  const std::string& l = r.launcher.text;
  EXPECT_NE(l.find("MODE=${MODE:-mock}\n"), std::string::npos) << l;
  EXPECT_NE(l.find("if [ \"$MODE\" = mock ]; then LR=1e-4; fi\n"
                   "if ! [ \"$MODE\" = mock ]; then LR=3e-4; fi\n"),
            std::string::npos)
      << l;
  EXPECT_NE(l.find("    --lr $LR\n"), std::string::npos) << l;
  EXPECT_NE(l.find("if [ \"$MODE\" = mock ]; then\n    MEGATRON_ARGS+=(\n        --mock-data\n"
                   "    )\nfi\n"
                   "if ! [ \"$MODE\" = mock ]; then\n    MEGATRON_ARGS+=(\n"
                   "        --data-path ${DATA_PATH}\n        --split 99,1,0\n    )\nfi\n"),
            std::string::npos)
      << l;
  // Read back: the same model and plan, the same reading.
  EXPECT_EQ(r.workload2, w);

  const std::string mock = run_launcher(l, "", "");
  if (mock.empty()) GTEST_SKIP() << "no bash";
  EXPECT_EQ(flag_value(mock, "--lr"), "1e-4") << mock;
  EXPECT_EQ(flag_value(mock, "--mock-data"), "") << mock;
  EXPECT_EQ(flag_value(mock, "--data-path"), "(absent)") << mock;
  const std::string real = run_launcher(l, "MODE=real DATA_PATH=/d", "");
  EXPECT_EQ(flag_value(real, "--lr"), "3e-4") << real;
  EXPECT_EQ(flag_value(real, "--mock-data"), "(absent)") << real;
  EXPECT_EQ(flag_value(real, "--data-path"), "/d") << real;
  EXPECT_EQ(flag_value(real, "--split"), "99,1,0") << real;
}

// End to end, one test per family of real scripts (issue 20), each through
// the command line: `evaluate --megatron-script` scores the script's own
// plan (read as Megatron would run it), and `plan --megatron-script
// --launcher` writes a launcher that reads back as the same model and the
// plan it launches. The fixtures are written for hapmoe and name the
// constructs they reproduce.

// The settings `evaluate --megatron-script` scored (its --plan-json).
Plan evaluated_plan(const std::vector<std::string>& args, const ClusterSpec& cluster,
                    int micro_batch, std::string* out = nullptr) {
  const fs::path d = scratch_dir("evaluate");
  const std::string json = (d / "plan.json").string();
  std::vector<std::string> all = {"evaluate", "--plan-json", json};
  all.insert(all.end(), args.begin(), args.end());
  EXPECT_EQ(cli(all, out), kExitOk) << (out ? *out : "");
  return load_plan(json, cluster, micro_batch);
}

// Megatron-LM's examples: Slurm defaults for the world, arrays passed
// unquoted, an if on FP8 (unset: kept for the launcher under its test), a
// default deciding --mock-data against --data-path, positional paths.
TEST(MegatronFamilies, ExampleStyleScriptEvaluatesPlansAndLaunches) {
  const std::string script = kData + "example_style_moe.sh";
  const ClusterSpec h8 = load_cluster("H800:8");
  std::string out;
  const Plan own =
      evaluated_plan({"--megatron-script", script, "--cluster", "H800:8"}, h8, 1, &out);
  // The script's own plan: TP 2, PP 2, EP 2 (ETP = TP, Megatron's
  // default), SP, on SLURM_NNODES's default 1 node of 8.
  EXPECT_EQ(own.parallel.tp, 2);
  EXPECT_EQ(own.parallel.pp, 2);
  EXPECT_EQ(own.parallel.ep, 2);
  EXPECT_EQ(own.parallel.tpe, 2);
  EXPECT_EQ(own.parallel.dp, 2);
  EXPECT_NE(out.find("FP8 (line 90)"), std::string::npos) << out;
  MegatronScript s = read_megatron_script(script);
  const Workload w = megatron_workload(s);
  EXPECT_TRUE(megatron_settings(s, w, 8).sequence_parallel);
  EXPECT_EQ(w.model.num_layers, 16);
  EXPECT_EQ(w.model.num_experts, 16);
  EXPECT_EQ(w.model.num_kv_heads, 4);
  EXPECT_EQ(w.model.vocab, 32000);  // Llama2Tokenizer
  EXPECT_EQ(w.training.precision, Precision::kBf16);
  EXPECT_TRUE(s.has("--mock-data"));
  EXPECT_FALSE(s.has("--data-path"));
  // The world on two nodes: SLURM_NNODES=2.
  const ClusterSpec h16 = load_cluster("H800:16");
  const Plan two = evaluated_plan(
      {"--megatron-script", script, "--cluster", "H800:16", "--megatron-env", "SLURM_NNODES=2"},
      h16, 1);
  EXPECT_EQ(two.parallel.dp, 4);
  // FP8=1: the branch is read.
  MegatronScript fp8 = read_megatron_script(script, {.env = {{"FP8", "1"}}});
  EXPECT_EQ(megatron_workload(fp8).training.precision, Precision::kFp8);

  // plan --launcher: the launcher reads back as the same model and plan.
  const RoundTrip r = round_trip(script, "H800:16");
  EXPECT_EQ(r.workload2, r.workload);
  expect_launched_plan_read_back(r, &s, "example_style_moe.sh on H800:16");
  EXPECT_NE(r.launcher.find("if [ \"$FP8\" = 1 ]; then\n    MEGATRON_ARGS+=(\n"
                            "        --fp8-amax-history-len 1024\n"),
            std::string::npos)
      << r.launcher;
  EXPECT_NE(r.launcher.find("DATA_PATH=${3:-mock}\n"), std::string::npos) << r.launcher;
  // Run by bash with the script's arguments: the paths and the data the
  // script would pass.
  const std::string ran = run_launcher(r.launcher, "", "/ckpt /tok /data");
  if (ran.empty()) GTEST_SKIP() << "no bash";
  EXPECT_EQ(flag_value(ran, "--save"), "/ckpt") << ran;
  EXPECT_EQ(flag_value(ran, "--tokenizer-model"), "/tok") << ran;
  EXPECT_EQ(flag_value(ran, "--data-path"), "/data") << ran;
  EXPECT_EQ(flag_value(ran, "--mock-data"), "(absent)") << ran;
  const std::string mock = run_launcher(r.launcher, "", "/ckpt /tok");
  EXPECT_EQ(flag_value(mock, "--mock-data"), "") << mock;
  EXPECT_EQ(flag_value(mock, "--data-path"), "(absent)") << mock;
}

// The Megatron-MoE-ModelZoo: a flat argument list (no launch command),
// values from --megatron-env, MLA, --moe-layer-freq, a layout.
TEST(MegatronFamilies, ModelZooStyleArgumentListEvaluatesPlansAndLaunches) {
  const std::string list = kData + "modelzoo_style_flat_args.txt";
  const ClusterSpec h16 = load_cluster("H800:16");
  std::string out;
  const Plan own = evaluated_plan(
      {"--megatron-script", list, "--cluster", "H800:16", "--megatron-env", "PP=2,EP=8"}, h16, 1,
      &out);
  EXPECT_EQ(own.parallel.tp, 1);
  EXPECT_EQ(own.parallel.pp, 2);
  EXPECT_EQ(own.parallel.ep, 8);
  EXPECT_EQ(own.parallel.dp, 8);  // the whole cluster, with a note
  ASSERT_EQ(own.stages.size(), 2u);
  EXPECT_EQ(own.stages[0].layers, 4);
  EXPECT_EQ(own.stages[1].layers, 4);
  EXPECT_NE(out.find("the whole cluster, 16 devices, is assumed"), std::string::npos) << out;
  const ShellInputs env{.env = {{"PP", "2"}, {"EP", "8"}}};
  MegatronScript s = read_megatron_script(list, env);
  EXPECT_FALSE(s.shell.has_command);
  const Workload w = megatron_workload(s);
  EXPECT_TRUE(w.model.mla.enabled());
  EXPECT_EQ(w.model.num_moe_layers(), 7);
  EXPECT_EQ(w.model.vocab, 32768);  // NullTokenizer: --vocab-size + 1
  // Without ${PP}: the message names the line and the variable.
  std::string missing;
  EXPECT_EQ(cli({"evaluate", "--megatron-script", list, "--cluster", "H800:16"}, &missing),
            kExitInput);
  EXPECT_NE(missing.find("modelzoo_style_flat_args.txt:45: --pipeline-model-parallel-size"),
            std::string::npos)
      << missing;

  const RoundTrip r = round_trip(list, "H800:16", true, {"--megatron-env", "PP=2,EP=8"}, env);
  EXPECT_EQ(r.workload2, r.workload);
  expect_launched_plan_read_back(r, &s, "modelzoo_style_flat_args.txt on H800:16");
}

// Pai-Megatron-Patch's run_mcore_*.sh: positional arguments through
// --megatron-script-args, case on the model size and the precision,
// ternary arithmetic, a test of MP_VP that nothing sets, eval ${run_cmd}.
TEST(MegatronFamilies, PaiStyleScriptEvaluatesPlansAndLaunches) {
  const std::string script = kData + "pai_style_run_mcore.sh";
  const ClusterSpec h8 = load_cluster("H800:8");
  const std::string args = "dsw 30B 2 128 1e-5 bf16 4 1 2 2048 full /save";
  std::string out;
  const Plan own = evaluated_plan(
      {"--megatron-script", script, "--cluster", "H800:8", "--megatron-script-args", args}, h8, 2,
      &out);
  // case 30B) ...; ETP=$(( (EP > 1) ? 1 : TP )) = 1; SP from the ternary.
  EXPECT_EQ(own.parallel.tp, 4);
  EXPECT_EQ(own.parallel.pp, 1);
  EXPECT_EQ(own.parallel.ep, 2);
  EXPECT_EQ(own.parallel.tpe, 1);
  EXPECT_EQ(own.parallel.micro_batch, 2);
  EXPECT_EQ(out.find("case statement"), std::string::npos) << out;  // decided: no note
  const ShellInputs typed{.args = split_shell_words(args, "args")};
  MegatronScript s = read_megatron_script(script, typed);
  const Workload w = megatron_workload(s);
  EXPECT_EQ(w.model.num_layers, 12);
  EXPECT_EQ(w.model.hidden, 2048);
  EXPECT_EQ(w.model.num_experts, 32);
  EXPECT_EQ(w.model.top_k, 8);
  EXPECT_EQ(w.model.vocab, 151936);  // Qwen3Tokenizer, with --extra-vocab-size
  EXPECT_EQ(w.training.seq_len, 2048);
  EXPECT_EQ(w.training.precision, Precision::kBf16);
  EXPECT_EQ(s.find("--lr")->values[0].text, "1e-5");
  EXPECT_TRUE(megatron_settings(s, w, 8).sequence_parallel);
  // Without the arguments: the defaults decide (A3B, bf16, TP 2), each
  // test that read one named in a note; LR=$5 stays unknown.
  MegatronScript d = read_megatron_script(script);
  EXPECT_EQ(megatron_workload(d).model.num_layers, 8);
  EXPECT_EQ(d.find("--lr")->values[0].source, "$5");
  EXPECT_NE(std::find_if(d.notes.begin(), d.notes.end(),
                         [](const std::string& n) {
                           return n.starts_with("the tests on line 19, 45, 72, 102 read a default");
                         }),
            d.notes.end());
  // An unknown size: the case's *) branch, which sets no size, is the one
  // read (its exit is not modelled: hapmoe reads function bodies inline),
  // and the message names the variable no branch set.
  std::string none;
  EXPECT_EQ(cli({"evaluate", "--megatron-script", script, "--cluster", "H800:8",
                 "--megatron-script-args", "dsw 7B"},
                &none),
            kExitInput);
  EXPECT_NE(none.find("--num-layers: its value ${NUM_LAYERS} is not defined"), std::string::npos)
      << none;

  const RoundTrip r = round_trip(script, "H800:8", true, {"--megatron-script-args", args}, typed);
  EXPECT_EQ(r.workload2, r.workload);
  expect_launched_plan_read_back(r, &s, "pai_style_run_mcore.sh on H800:8");
  // MP_VP's option is kept for the launcher under its test... but hapmoe
  // sets the virtual pipeline itself (--num-layers-per-virtual-pipeline-stage
  // is the plan's), so only the plan's is written.
  EXPECT_EQ(r.launcher.find("--num-layers-per-virtual-pipeline-stage ${MP_VP}"), std::string::npos)
      << r.launcher;
  // The --load option of the branch not taken (PRETRAIN_CHECKPOINT_PATH
  // taken as unset) reaches the launcher through eval ${run_cmd}, under
  // its test.
  EXPECT_NE(r.launcher.find("if ! [ -z ${PRETRAIN_CHECKPOINT_PATH} ]; then\n"
                            "    MEGATRON_ARGS+=(\n"
                            "        --load ${PRETRAIN_CHECKPOINT_PATH}\n"),
            std::string::npos)
      << r.launcher;
  const std::string plain = run_launcher(r.launcher, "", "");
  if (plain.empty()) GTEST_SKIP() << "no bash";
  EXPECT_EQ(flag_value(plain, "--load"), "(absent)") << plain;
  const std::string loaded = run_launcher(r.launcher, "PRETRAIN_CHECKPOINT_PATH=/ck", "");
  EXPECT_EQ(flag_value(loaded, "--load"), "/ck") << loaded;
}

}  // namespace
}  // namespace hapmoe
