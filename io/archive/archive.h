// The HDF5 archive of a run (docs/archive.md): inputs as given and as
// resolved, the top-K plans with their stage tables, one row per
// configuration and per rank, totals, provenance.
//
// Written by rank 0 only, after the search's reduction (every rank already
// holds the whole SearchResult after the engine's allgather), with serial
// HDF5: see docs/archive.md, "Why rank 0 and serial HDF5". Written to a
// temporary name in the same directory, flushed, closed, fsync'ed and
// renamed, so the final name is either the previous file or the whole new
// one.
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "costmodel/cluster.h"
#include "costmodel/cost.h"
#include "costmodel/model.h"
#include "costmodel/profile.h"
#include "engine/driver.h"
#include "io/archive/h5.h"

namespace hapmoe {

inline constexpr const char* kArchiveFormat = "hapmoe-archive";
inline constexpr int kArchiveVersion = 1;

// Who, when, where, how.
struct Provenance {
  std::string command_line;  // as typed, shell-quoted where needed
  int ranks = 1;
  int threads = 1;          // OpenMP threads per rank
  std::string start_time;   // ISO 8601 UTC
  std::string end_time;     // ISO 8601 UTC
  double wall_seconds = 0;  // start to end
  std::string host;         // rank 0's host name
};

// The current time as ISO 8601 UTC with milliseconds ("2026-11-22T19:02:03.123Z").
std::string utc_now();
std::string host_name();
// argv joined with spaces, arguments with shell-special characters quoted.
std::string command_line(int argc, const char* const* argv);

// Inputs of one search or evaluation.
struct ArchiveInputs {
  std::string model_given;        // --model as given (preset or path)
  std::string model_file_text;    // that file's text, "" for a preset
  std::string cluster_given;      // --cluster as given
  std::string cluster_file_text;  // that file's text, "" for a preset or inline spec
  std::string plan_file_text;     // evaluate: the --plan file's text (written when not "")
  nlohmann::ordered_json options_given = nlohmann::ordered_json::object();     // as typed
  nlohmann::ordered_json options_resolved = nlohmann::ordered_json::object();  // with defaults
  const Workload* workload = nullptr;  // resolved (after overrides)
  const ClusterSpec* cluster = nullptr;
  const ProfileTables* tables = nullptr;  // what the cost model read
};

// The text of `spec` when it names a readable file, else "".
std::string given_file_text(const std::string& spec);

// Fills a fresh group with one run's contents: inputs/, plans/ and (when
// `search` is given) search/. `reports` are the plans, best first.
void write_run(const h5::Group& group, const ArchiveInputs& inputs,
               const std::vector<PlanReport>& reports, const SearchResult* search);

void write_provenance(const h5::Group& group, const Provenance& provenance);

// Root attributes: format, format_version, kind ("plan", "evaluate",
// "sweep").
void write_header(const h5::File& file, const std::string& kind);

// Checks, before any work, that `path` can receive an archive: its
// directory exists and is writable, and `path` is absent, or an HDF5 file
// (replaced at the end), never a directory or some other file. Throws
// InputError naming `option` and the path.
void check_archive_path(const std::string& path, const std::string& option = "--out");

// Writes an archive to `path` safely: `fill` writes into a fresh file under
// a temporary name in the same directory (io/inputs/files.h: created
// exclusively, never through a symlink, short enough for any name), which
// is then flushed, closed, fsync'ed and renamed over `path` (and the
// directory fsync'ed); then the temporaries of killed writers of `path` are
// removed (remove_stale_temporaries). On any failure the temporary file is
// removed, `path` is left as it was, and InputError names `option` and the
// path with the cause.
void write_archive_atomic(const std::string& path, const std::function<void(h5::File&)>& fill,
                          const std::string& option = "--out");

// Test hook for crash tests: called between writing the temporary file
// and renaming it (nullptr: nothing).
extern void (*g_archive_before_rename)(const std::string& tmp_path);

// Prints the summary of an archive (best plan, top K, search statistics;
// for a sweep, one line per case, or one case in full with `case_name`).
// Throws InputError naming the file when it is not a hapmoe archive.
void print_archive_summary(std::ostream& out, const std::string& path,
                           const std::string& case_name = "");

}  // namespace hapmoe
