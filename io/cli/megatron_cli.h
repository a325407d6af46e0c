// Command-line glue for the Megatron-LM integration (docs/megatron.md): the
// options and the few calls the commands make, kept out of io/cli/cli.cpp.
#pragma once

#include <memory>
#include <ostream>

#include <cxxopts.hpp>

#include "costmodel/cost.h"
#include "engine/comm.h"
#include "io/megatron/megatron_launcher.h"
#include "io/megatron/megatron_script.h"

namespace hapmoe {

// --megatron-script, --megatron-env, --vocab-size (script in).
void add_megatron_options(cxxopts::Options& options);
// --launcher (launcher out).
void add_launcher_options(cxxopts::Options& options);

// The script of --megatron-script, read; nullptr when the option is absent.
// Throws InputError when --model is given too.
std::shared_ptr<MegatronScript> read_megatron_input(const cxxopts::ParseResult& r);

// The model and training settings from the script (hapmoe's --vocab-size
// and --precision fill what it does not say).
Workload megatron_input_workload(const cxxopts::ParseResult& r, MegatronScript& script);

// "note: ..." lines for what the script reading approximated or kept.
void print_megatron_notes(std::ostream& out, const MegatronScript* script);

// --launcher and --launcher-hosts, checked before the search: the hosts
// file read and its device types found in `cluster` (--launcher-hosts
// without --launcher refused), and the flags the launcher would carry from
// `script` (check_launcher_flags). The hosts, for
// write_launcher_if_requested.
// The launcher's path is checked with the other outputs
// (check_outputs_on_root). Throws InputError.
HostsByDevice read_launcher_options(const cxxopts::ParseResult& r, const ClusterSpec& cluster,
                                    const MegatronScript* script);

// Writes --launcher for `report` when asked (rank 0 writes, write_on_root:
// a failure is every rank's) and says so on `out`. `report` may be null
// (no plan fits): then nothing is written and `out` says why. Collective
// when --launcher is given and `report` is not null.
void write_launcher_if_requested(const cxxopts::ParseResult& r, std::ostream& out,
                                 const MegatronScript* script, const PlanReport* report,
                                 const CostModel& model, const HostsByDevice& hosts, Comm& comm);

}  // namespace hapmoe
