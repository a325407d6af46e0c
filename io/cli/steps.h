// The steps the commands share (plan, evaluate, compare, sweep): where
// they do the same thing, they call the same function here. Every step that
// a rank may fail alone agrees on the failure over `comm`, so all ranks
// leave with the same exit code (docs/parallel.md).
#pragma once

#include <chrono>
#include <cxxopts.hpp>
#include <functional>
#include <initializer_list>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "costmodel/cost.h"
#include "costmodel/measured.h"
#include "costmodel/plan.h"
#include "engine/baselines.h"
#include "engine/comm.h"
#include "engine/driver.h"
#include "io/archive/archive.h"
#include "io/archive/archive_lock.h"
#include "io/cli/options.h"
#include "io/inputs/files.h"

namespace hapmoe {

// When a command (or a sweep's case) started, for the archive's provenance.
struct Started {
  std::string utc = utc_now();
  std::chrono::steady_clock::time_point at = std::chrono::steady_clock::now();
};

// Who ran it, from `started` to now.
Provenance provenance_since(const Started& started, const std::string& command_line, int ranks,
                            int threads);

// "hapmoe " and argv, quoted where needed: the command line as provenance.
std::string hapmoe_command_line(int argc, const char* const* argv);

// Throws InputError with the first rank's failure when any rank's `failed`
// is not empty. Collective.
void agree(Comm& comm, const std::string& failed);

// The options of `options` given in `r`, with their values ("--model",
// "m.json"), for refuse_outputs_over_inputs.
std::vector<NamedPath> given_paths(const cxxopts::ParseResult& r,
                                   std::initializer_list<const char*> options);

// The run's output files (--out, --plan-json, --launcher), checked on
// rank 0 before any search: none is one of the run's input files
// (--model, --cluster, --plan, --profile, --launcher-hosts,
// --megatron-script, and `more_inputs`) or another output
// (refuse_outputs_over_inputs), and each can be written; then --out's lock
// is taken (ArchiveLock: another run writing it is refused), returned to
// be held to the end of the command. Throws InputError on rank 0; call it
// inside read_on_every_rank, which agrees on it.
[[nodiscard]] std::optional<ArchiveLock> check_outputs_on_root(
    const Comm& comm, const cxxopts::ParseResult& r,
    const std::vector<NamedPath>& more_inputs = {});

// Rank 0 warns on `err` when `lock` could not be taken because the file
// system has no locks (ArchiveLock::unsupported); `command` names the
// command ("plan").
void warn_if_unlocked(std::ostream& err, const std::optional<ArchiveLock>& lock,
                      const std::string& command);

// Rank 0 runs `write`, the writing of the output file `path` of `option`
// after the search; a failure there (a full disk, say) is agreed on, so
// every rank leaves with the same InputError, naming the option and the
// path, and none waits in a collective for one that left. Collective.
void write_on_root(Comm& comm, const std::string& option, const std::string& path,
                   const std::function<void()>& write);

// Rank 0 writes the archive at `path` (write_archive_atomic), through
// write_on_root.
void write_out(Comm& comm, const std::string& path, const std::function<void(h5::File&)>& fill);

// Rank 0 writes `doc()` to --plan-json, when given, through write_on_root.
// Collective.
void write_plan_json(const cxxopts::ParseResult& r, Comm& comm,
                     const std::function<nlohmann::ordered_json()>& doc);

// The archive's record of the inputs as given: the option values as typed
// and the text of the model and cluster files.
ArchiveInputs given_inputs(const cxxopts::ParseResult& r, const Inputs& in);

// One search as plan and sweep run it: the baseline's when one is named,
// else brute force or hapmoe's HS-DP. Collective over `comm`.
BaselineRun run_one_search(Baseline baseline, bool bruteforce, const Workload& workload,
                           const ClusterSpec& cluster, const SearchOptions& options, Comm& comm,
                           const RunOptions& run);

// A search's plans scored by the cost model: the tables of its
// configurations (measured entries from `profile` where given) and the
// report of each top plan, best first.
struct Scored {
  ProfileTables tables;
  std::vector<PlanReport> reports;
};
Scored score(const Workload& workload, const ClusterSpec& cluster, const SearchResult& result,
             const MeasuredProfile* profile, ProfileSources* sources = nullptr);

// The archive group of case `index` of `total` under /cases (sweeps, and
// compare's baselines): zero-padded to at least 4 digits ("0007").
std::string case_group_name(std::size_t index, std::size_t total);

// "H800 x12 | MI300X x12 full | [910B x1] *8": the stages of a plan on one
// line (device x layers, recomputation), runs of equal stages folded.
std::string stages_text(const Plan& plan, const ClusterSpec& cluster);

}  // namespace hapmoe
