#include "io/cli/megatron_cli.h"

#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "costmodel/errors.h"
#include "io/archive/version.h"
#include "io/cli/steps.h"
#include "io/inputs/files.h"
#include "io/inputs/json_strict.h"
#include "io/inputs/model_io.h"
#include "io/inputs/plan_io.h"
#include "io/megatron/megatron_launcher.h"
#include "io/report/report.h"

namespace hapmoe {

void add_megatron_options(cxxopts::Options& o) {
  o.add_options("Megatron-LM script in (docs/megatron.md)")(
      "megatron-script",
      "read the model and training settings from a Megatron-LM launch script, an argument "
      "list or a Megatron-MoE-ModelZoo YAML config (instead of --model); evaluate without "
      "--plan scores the script's own parallel settings",
      cxxopts::value<std::string>())(
      "megatron-env",
      "NAME=VALUE in the script's environment, as if exported before running it: it fills "
      "${NAME:-default} and names the script reads without setting, but the script's own "
      "NAME=... wins (comma-separated or repeated; values cannot contain commas)",
      cxxopts::value<std::vector<std::string>>())(
      "megatron-env-override",
      "NAME=VALUE that wins over the script's own assignments to NAME too (each one skipped, "
      "with a note)",
      cxxopts::value<std::vector<std::string>>())(
      "megatron-script-args",
      "the script's positional arguments $1 ... $N, exactly as typed after its name, e.g. "
      "\"dlc A3B 1 256\" (default: unknown)",
      cxxopts::value<std::string>())("vocab-size",
                                     "vocabulary size when the script does not give --vocab-size",
                                     cxxopts::value<std::string>())(
      "nnodes",
      "the nodes the script runs on (with --gpus-per-node; default: what the script "
      "says, e.g. torchrun --nnodes, WORLD_SIZE or srun -N)",
      cxxopts::value<std::string>())("gpus-per-node", "devices per node the script runs on",
                                     cxxopts::value<std::string>())(
      "megatron-stage-devices",
      "device type of each pipeline stage of the script's own plan, e.g. H800,H800,910B,910B "
      "(default: the script's HAPMOE_STAGE_DEVICES, else ranks fill the cluster's pools in "
      "order)",
      cxxopts::value<std::vector<std::string>>());
}

void add_launcher_options(cxxopts::Options& o) {
  o.add_options("Megatron-LM launcher out (docs/megatron.md)")(
      "launcher",
      std::string("write a Megatron-LM (") + kMegatronVersion +
          ") launcher for the plan to this file: the script's flags with the parallel ones "
          "replaced, and the node order that puts each stage on its device type (plan then "
          "searches only plans that launcher runs as predicted: stage orders its node order "
          "can place, the expert TP Megatron-LM accepts, one recompute setting for the job)",
      cxxopts::value<std::string>())(
      "launcher-hosts",
      "host list for the launcher's node table: one \"HOST DEVICE\" per line (device names "
      "as in the cluster or the catalog's aliases), used in order "
      "(default: placeholder names such as h800-node-000)",
      cxxopts::value<std::string>());
}

std::shared_ptr<MegatronScript> read_megatron_input(const cxxopts::ParseResult& r) {
  if (r.count("megatron-script") == 0) {
    for (const char* option : {"megatron-env", "megatron-env-override", "megatron-script-args",
                               "megatron-stage-devices", "nnodes", "gpus-per-node"}) {
      if (r.count(option)) {
        throw InputError(std::string("--") + option, "is only read with --megatron-script");
      }
    }
    return nullptr;
  }
  if (r.count("model")) {
    throw InputError("--megatron-script",
                     "give either --model or --megatron-script (the script is the model), not "
                     "both");
  }
  ShellInputs inputs;
  for (const char* option : {"megatron-env", "megatron-env-override"}) {
    if (!r.count(option)) continue;
    auto& into = std::string(option) == "megatron-env" ? inputs.env : inputs.overrides;
    for (const std::string& kv : r[option].as<std::vector<std::string>>()) {
      const auto eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) {
        throw InputError(std::string("--") + option, "\"" + kv + "\" is not NAME=VALUE");
      }
      into[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
  }
  if (r.count("megatron-script-args")) {
    inputs.args =
        split_shell_words(r["megatron-script-args"].as<std::string>(), "--megatron-script-args");
  }
  const std::string path = r["megatron-script"].as<std::string>();
  // A FIFO or a device is refused here, before read_megatron_script opens
  // it (an open of a FIFO with no writer waits forever).
  check_regular_file(path);
  auto script = std::make_shared<MegatronScript>(read_megatron_script(path, inputs));
  if (r.count("megatron-stage-devices")) {
    // Same place as a script's own HAPMOE_STAGE_DEVICES=(...), which it replaces.
    std::vector<ShellWord>& devices = script->shell.variables["HAPMOE_STAGE_DEVICES"];
    devices.clear();
    for (const std::string& d : r["megatron-stage-devices"].as<std::vector<std::string>>()) {
      ShellWord word;
      word.text = word.source = d;
      devices.push_back(word);
    }
  }
  if (r.count("nnodes") || r.count("gpus-per-node")) {
    if (!r.count("nnodes") || !r.count("gpus-per-node")) {
      throw InputError(r.count("nnodes") ? "--nnodes" : "--gpus-per-node",
                       "give both --nnodes and --gpus-per-node (the world the script runs on)");
    }
    const double nodes = parse_number_text(r["nnodes"].as<std::string>(), 1, 1 << 20, "--nnodes");
    const double per =
        parse_number_text(r["gpus-per-node"].as<std::string>(), 1, 1024, "--gpus-per-node");
    if (nodes != std::floor(nodes) || per != std::floor(per) || nodes * per > (1 << 24)) {
      throw InputError("--nnodes", "--nnodes x --gpus-per-node must be whole and at most 2^24");
    }
    const std::optional<int> own = megatron_world_size(*script);
    script->world_size = static_cast<int>(nodes * per);
    script->notes.push_back(
        "world size " + std::to_string(*script->world_size) + " from --nnodes " +
        std::to_string(static_cast<int>(nodes)) + " x --gpus-per-node " +
        std::to_string(static_cast<int>(per)) +
        (own ? " (the script says " + std::to_string(*own) + ")" : " (the script does not say)"));
  }
  return script;
}

Workload megatron_input_workload(const cxxopts::ParseResult& r, MegatronScript& script) {
  MegatronDefaults d;
  if (r.count("vocab-size")) {
    d.vocab = static_cast<int>(
        parse_int_text(r["vocab-size"].as<std::string>(), 1, 1 << 24, "--vocab-size"));
  }
  if (r.count("precision")) {
    d.precision = parse_precision(r["precision"].as<std::string>(), "--precision");
  }
  return megatron_workload(script, d);
}

void print_megatron_notes(std::ostream& out, const MegatronScript* script) {
  if (!script) return;
  for (const std::string& n : script->notes)
    out << "note: " << script->origin() << ": " << n << "\n";
  if (!script->notes.empty()) out << "\n";
}

HostsByDevice read_launcher_options(const cxxopts::ParseResult& r, const ClusterSpec& cluster,
                                    const MegatronScript* script) {
  if (r.count("launcher") == 0) {
    if (r.count("launcher-hosts")) {
      throw InputError("--launcher-hosts", "is only read with --launcher");
    }
    return {};
  }
  if (script != nullptr) check_launcher_flags(*script);
  HostsByDevice hosts;
  if (r.count("launcher-hosts")) {
    const std::string file = r["launcher-hosts"].as<std::string>();
    hosts = parse_launcher_hosts(read_regular_file(file, 16u << 20), file);
    check_launcher_hosts(hosts, cluster);
  }
  return hosts;
}

void write_launcher_if_requested(const cxxopts::ParseResult& r, std::ostream& out,
                                 const MegatronScript* script, const PlanReport* report,
                                 const CostModel& model, const HostsByDevice& hosts, Comm& comm) {
  if (r.count("launcher") == 0) return;
  const std::string path = r["launcher"].as<std::string>();
  if (!report) {
    out << "\nno launcher written to " << path << ": there is no plan\n";
    return;
  }
  const Launcher l = make_megatron_launcher(*report, model, script, kVersion, hosts);
  write_on_root(comm, "--launcher", path, [&] {
    write_file_atomic(path, l.text);
    std::error_code ec;
    std::filesystem::permissions(path,
                                 std::filesystem::perms::owner_exec |
                                     std::filesystem::perms::group_exec |
                                     std::filesystem::perms::others_exec,
                                 std::filesystem::perm_options::add, ec);
  });
  out << "\nMegatron-LM " << kMegatronVersion << " launcher: " << path << " (" << l.nodes.size()
      << " nodes, " << l.settings.world_size << " processes; predicted "
      << format_seconds(l.launched_latency_s) << " per iteration)\n";
  for (const std::string& n : l.notes) out << "  note: " << n << "\n";
}

}  // namespace hapmoe
