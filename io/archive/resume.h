// Reading a plan archive back to resume its search (plan --resume;
// docs/archive.md, "Checkpoints of one search"). A plan archive is its own
// checkpoint: /search/configs holds every committed configuration's
// counters, best latency, rank, round and estimate, and /search/resume
// what else the engine needs to carry on exactly (the top K plans as it
// holds them, the closest miss, the rounds). Nothing here prints or exits.
#pragma once

#include <cstdint>
#include <string>

#include "engine/driver.h"

namespace hapmoe {

struct ResumeArchive {
  SearchResume resume;
  // What the archive was searched with, for the caller to compare
  // (inputs@model_json, inputs@cluster_json, inputs@options).
  std::string model_json;
  std::string cluster_json;
  std::string options;        // JSON object text
  std::string options_given;  // inputs@options_given: JSON object text
  std::string stopped_by;     // search@stopped_by: "", "signal", "checkpoint", ...
  std::int64_t configs = 0;   // |Pi|
};

// Reads the search of the plan archive at `path`. Throws InputError naming
// `where` when it is not a hapmoe plan archive, has no search (an
// `evaluate` archive) or no resume data (written before 2026-11-24), or
// was stopped by --time-limit or --max-memory (its last units were cut
// short, not committed whole).
ResumeArchive read_resume_archive(const std::string& path, const std::string& where);

}  // namespace hapmoe
