// Reading a Megatron-LM launch script (or a bare argument list) as hapmoe
// inputs: the model and training settings (`--megatron-script` on plan and
// evaluate) and the script's own parallel configuration as a plan
// (`evaluate --megatron-script` without --plan). docs/megatron.md lists
// every flag read and the rules used where the script does not say.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "costmodel/cluster.h"
#include "costmodel/model.h"
#include "costmodel/plan.h"
#include "io/megatron/megatron_args.h"
#include "io/megatron/shell_script.h"

namespace hapmoe {

// One flag of the Megatron command line: --name [values...].
struct MegatronFlag {
  std::string name;               // with the leading dashes, e.g. "--num-layers"
  std::vector<ShellWord> values;  // words up to the next --flag; "--a=b" gives one
  int line = 0;
  std::string guard;  // the condition the script adds it under, if undecided (ShellWord::guard)
  bool launcher_only = false;  // kept for a launcher, not read (ShellWord::launcher_only)
  bool operator==(const MegatronFlag&) const = default;
};

struct MegatronScript {
  ShellScript shell;                 // the shell reading (launch command, variables)
  std::vector<MegatronFlag> flags;   // in order; a repeated flag keeps its last values
  std::vector<std::string> unknown;  // flags hapmoe does not know (kept as they are)
  std::vector<std::string> notes;    // approximations and defaults worth saying
  // The world the script runs on when the command line says it
  // (evaluate --nnodes x --gpus-per-node): wins over what the script says.
  std::optional<int> world_size;

  // The last flag `name` the script passes (launcher-only ones left out).
  const MegatronFlag* find(const std::string& name) const;
  bool has(const std::string& name) const { return find(name) != nullptr; }
  const std::string& origin() const { return shell.origin; }
};

// Reads the script `path` (or its `text`) with what the command line gives
// it: its environment and arguments (--megatron-env, --megatron-env-override,
// --megatron-script-args).
MegatronScript read_megatron_script(const std::string& path, const ShellInputs& inputs = {});
MegatronScript parse_megatron_script(const std::string& text, const std::string& origin,
                                     const ShellInputs& inputs = {});

// Settings the command line may give when the script does not.
struct MegatronDefaults {
  std::optional<int> vocab;            // --vocab-size of hapmoe
  std::optional<Precision> precision;  // --precision of hapmoe (fp32 scripts)
};

// The model and training settings. Throws InputError "file:line: --flag:
// what" for a missing required flag, a bad value or a contradiction
// between flags; the result is validated. Appends notes to `script.notes`.
Workload megatron_workload(MegatronScript& script, const MegatronDefaults& defaults = {});

// The world size the script launches and where it comes from.
struct MegatronWorld {
  std::optional<int> size;  // unknown when the script does not say or its value is unknown
  // What gave it, for messages: "--nnodes $NNODES = 2 (NNODES=
  // ${SLURM_NNODES:-1} on line 3) x --nproc-per-node 8", "WORLD_SIZE=16 on
  // line 4", "--nnodes x --gpus-per-node" (the command line); when the
  // size is unknown, what the script says (empty if nothing).
  std::string from;
};

// The world size: --nnodes x --gpus-per-node of evaluate (script.world_size),
// a WORLD_SIZE variable, torchrun --nnodes x --nproc-per-node, srun -n or
// -N x --ntasks-per-node. Throws InputError naming the variable for a world
// beyond 2^24 processes.
MegatronWorld megatron_world(const MegatronScript& script);
// megatron_world(script).size.
std::optional<int> megatron_world_size(const MegatronScript& script);

// The script's parallel settings as Megatron sees them (world size:
// megatron_world_size(), else `fallback_world_size`).
MegatronSettings megatron_settings(const MegatronScript& script, const Workload& workload,
                                   int fallback_world_size);

// The script's own configuration as a plan on `cluster`: the settings are
// checked against Megatron's constraints (violations are input errors that
// name the flags), layers per stage are Megatron's split, recomputation is
// the script's uniform setting, and device types follow the rank order:
// stage i holds ranks [i*S, (i+1)*S) with S = TP*CP*DP, and ranks fill the
// cluster's pools in the order listed (pool 0's devices first). A
// HAPMOE_STAGE_DEVICES=(H800 ...) array in the script (hapmoe's launchers
// write one) names the type of each stage instead.
Plan megatron_plan(MegatronScript& script, const Workload& workload, const ClusterSpec& cluster);

// The job's recompute setting in hapmoe's terms: full/block with K layers
// recomputes min(K, n_i) layers of every stage (none when K is 0);
// full/uniform recomputes them all; selective is selective, with
// Megatron's default module core_attn when none is listed.
RecomputeSetting megatron_recompute_setting(const MegatronSettings& s);
// stage_recompute(megatron_recompute_setting(s), stage_layers).
Recompute megatron_stage_recompute(const MegatronSettings& s, int stage_layers);
// Megatron's recompute flags for `r` (clears the others): the inverse of
// megatron_recompute_setting, with every module list cut to `modules`,
// the modules the model has.
void set_megatron_recompute(const RecomputeSetting& r, unsigned modules, MegatronSettings& s);

// True for the flags the launcher sets from the plan (parallel degrees,
// pipeline split, recomputation, micro/global batch).
bool is_parallel_flag(const std::string& name);

}  // namespace hapmoe
