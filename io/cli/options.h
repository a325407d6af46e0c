// The command line's options: parsing, and the option groups several
// commands share with the readers of their values. Every reader throws
// InputError naming the option and the value.
#pragma once

#include <chrono>
#include <cxxopts.hpp>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "costmodel/cluster.h"
#include "costmodel/measured.h"
#include "costmodel/model.h"
#include "engine/comm.h"
#include "engine/driver.h"
#include "engine/job_space.h"
#include "engine/limits.h"
#include "engine/search.h"
#include "io/megatron/megatron_script.h"
#include "partition/constraints.h"

namespace hapmoe {

// Parses argv for one command, with -h/--help added; nullopt after printing
// the help to `out`. InputError naming an unexpected argument.
std::optional<cxxopts::ParseResult> parse(cxxopts::Options& o, int argc, const char* const* argv,
                                          std::ostream& out);

// The value of --name, or InputError("--name", "is required").
std::string required(const cxxopts::ParseResult& r, const char* name);

// --model, --cluster, the training overrides, --profile and the Megatron
// script options (plan, evaluate, compare).
void add_workload_options(cxxopts::Options& o);

// What add_workload_options' options name, read and resolved.
struct Inputs {
  Workload workload;
  ClusterSpec cluster;
  ConstraintOptions constraints;
  std::shared_ptr<MegatronScript> megatron;        // --megatron-script, if given
  std::shared_ptr<const MeasuredProfile> profile;  // --profile, if given
  std::string profile_path;
  // What reading --model approximated (load_workload's notes; docs/models.md).
  std::vector<std::string> model_notes;
  // --precision auto: the workload keeps its precision and `plan` searches
  // FP8 too (JobDim::kPrecision); other commands refuse it.
  bool precision_auto = false;
};
Inputs read_inputs(const cxxopts::ParseResult& r);

// "note: FILE: ..." lines for what reading the model (--model or
// --megatron-script) approximated, then a blank line; nothing when there
// is nothing to say.
void print_input_notes(std::ostream& out, const Inputs& in);
// The same for a model read by load_workload (`spec` as given).
void print_model_notes(std::ostream& out, const std::string& spec,
                       const std::vector<std::string>& notes);

// --out: the HDF5 archive of the run (docs/archive.md).
void add_out_option(cxxopts::Options& o);

// The search's options (plan, compare) and their values.
void add_search_options(cxxopts::Options& o);
void read_search_options(const cxxopts::ParseResult& r, const Inputs& in, Comm& comm,
                         SearchOptions& opt, RunOptions& run);
// The search options with their values after defaults, for the archive.
nlohmann::ordered_json resolved_search_options(const SearchOptions& opt, const RunOptions& run);

// --space, --max-micro-batch, --max-vpp (plan): the job-wide knobs
// searched (engine/job_space.h), with fp8 when --precision auto.
void add_job_space_options(cxxopts::Options& o);
JobSpace read_job_space(const cxxopts::ParseResult& r, const Inputs& in);
// InputError naming --precision when `command` cannot take auto.
void refuse_precision_auto(const Inputs& in, const std::string& command);
// --threads: OpenMP threads per rank (default_threads when absent).
int read_threads(const cxxopts::ParseResult& r, const Comm& comm);

// --time-limit and --max-memory (plan, sweep), the limit counted from
// `started`.
void add_limit_options(cxxopts::Options& o);
SearchLimits read_limit_options(const cxxopts::ParseResult& r, const Comm& comm,
                                std::chrono::steady_clock::time_point started);

}  // namespace hapmoe
