// Megatron-LM launchers from plans (`--launcher OUT.sh`, docs/megatron.md).
//
// The launcher is a bash script for one pinned Megatron-LM version: the
// user's flags (or flags written from the model) with the parallel ones
// replaced by the plan's, a node table whose order puts every pipeline stage
// on nodes of its device type, and the environment Megatron needs. What
// stock Megatron cannot express (per-stage recomputation, device types) is
// mapped to the closest expressible setting, priced with the cost model, and
// said in the script's header. The settings are checked against Megatron's
// constraints before anything is written; a violation is a bug in hapmoe
// (ContractError).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "costmodel/cost.h"
#include "io/megatron/megatron_args.h"
#include "io/megatron/megatron_script.h"

namespace hapmoe {

// The Megatron-LM version every launcher targets (REFERENCE.md §3.2-3.4:
// the constraints were read at this tag; it has --pipeline-model-parallel-
// layout, --expert-tensor-parallel-size and --recompute-modules).
inline constexpr const char* kMegatronVersion = "core_v0.15.0";

struct Launcher {
  std::string text;               // the script
  MegatronSettings settings;      // the parallel settings it passes (checked)
  Plan plan;                      // what Megatron will run (recomputation as expressed)
  double planned_latency_s = 0;   // the plan as searched
  double launched_latency_s = 0;  // `plan`, as launched
  bool launched_fits = true;
  std::vector<std::string> notes;  // approximations (also comments in `text`)
  // Node table: node names in torchrun --node-rank order and processes each.
  std::vector<std::string> nodes;
  std::vector<int> node_procs;
};

// The closest uniform recomputation Megatron can express for `plan`: the
// plan itself if one setting reproduces every stage, else the candidate
// (none, selective, full/block K) with the least predicted latency that
// fits, else the one that saves the most memory. Fills `settings`'
// recompute fields and returns the plan as Megatron will run it.
Plan express_recompute(const Plan& plan, const CostModel& model, MegatronSettings& settings);

// Builds the launcher for `report` (a plan evaluated by `model`). `script`
// is the user's Megatron script, or nullptr when the model came from
// --model (then model flags are written from the ModelSpec, with
// NullTokenizer and mock data). `hapmoe_version` goes in the header.
// Throws InputError when the plan cannot be placed on whole nodes in rank
// order or when a flag carried from `script` is not a flag of Megatron-LM
// kMegatronVersion (io/megatron/megatron_flags.h; the message names the
// flag and its line), ContractError when the settings it built break a
// Megatron rule or a flag it wrote itself is not in that list.
// Real host names per device type, in the order to use them
// (--launcher-hosts); a type without hosts gets placeholders such as
// "h800-node-000".
using HostsByDevice = std::map<std::string, std::vector<std::string>>;

Launcher make_megatron_launcher(const PlanReport& report, const CostModel& model,
                                const MegatronScript* script, const std::string& hapmoe_version,
                                const HostsByDevice& hosts = {});

// Whether the script runs an entry point other than Megatron-LM's
// pretrain_gpt.py (Pai-Megatron-Patch's pretrain_qwen.py, ...), whose own
// parser takes flags Megatron does not define.
bool has_own_entry_point(const MegatronScript& script);

// The launcher's check of the flags it carries from `script`, callable
// before a search: throws InputError "origin:line: --flag is not a flag of
// Megatron-LM ..." for the first that the pinned Megatron-LM does not
// define (none for a script with its own entry point).
void check_launcher_flags(const MegatronScript& script);

// Reads a host list: one "HOST DEVICE" per line (device names as in the
// cluster or the catalog's aliases such as Ascend910B, case-insensitive),
// '#' comments. `origin` names it in messages. Keys are lower case, an
// alias replaced by the catalog's name.
HostsByDevice parse_launcher_hosts(const std::string& text, const std::string& origin);

// Throws InputError("--launcher-hosts", ...) naming a host whose device
// type is not in `cluster`, or a device type of `cluster` with fewer hosts
// listed than it has nodes (a plan may use every node): checked before the
// search, so the launcher never refuses a plan for want of hosts.
void check_launcher_hosts(const HostsByDevice& hosts, const ClusterSpec& cluster);

// The expert tensor parallelism the pinned Megatron-LM can run for
// `script` and the model of `w`, known before any plan: 1 when the MoE
// model's linear layers have biases (no --disable-bias-linear; REFERENCE.md
// §3.2.13), else 0 (any). `plan --launcher` searches only such plans
// (SpaceOptions::fixed_tpe), and the launcher refuses the others.
int launcher_expert_tp(const MegatronScript* script, const Workload& w);

}  // namespace hapmoe
