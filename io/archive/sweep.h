// Sweep files: many searches in one job, one archive (docs/archive.md,
// "Sweeps"). A sweep file lists cases and/or Cartesian products of case
// fields; every case is a full `hapmoe plan` (model, cluster, training
// overrides, search options). Running a sweep is io/cli/sweep_run.h.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/baselines.h"
#include "engine/job_space.h"
#include "engine/search.h"
#include "io/inputs/model_io.h"

namespace hapmoe {

// One case, resolved: every field has its value (defaults filled in).
struct SweepCase {
  std::string name;  // unique in the sweep
  std::string model;
  std::string cluster;
  TrainingOverrides overrides;
  SearchOptions options;
  bool bruteforce = false;
  Baseline baseline = Baseline::kNone;  // a baseline instead of the search (docs/baselines.md)
  int round = 32;  // RunOptions::round (changes the statistics, never the plans)
  JobSpace job;    // the job-wide knobs searched (plan's --space, --recompute-scope)
  // The case as canonical JSON (every field, sorted keys): what --resume
  // compares.
  nlohmann::ordered_json resolved;
};

struct SweepDefinition {
  std::string origin;  // the file
  std::string text;    // its text as given
  std::vector<SweepCase> cases;
  // The resolved cases as one JSON array: equal for equal sweeps.
  std::string canonical() const;
};

// Parses a sweep file. Unknown keys, wrong types, values out of range,
// empty products and duplicate case names are InputErrors naming the file
// and JSON pointer. Models and clusters are not loaded here.
SweepDefinition parse_sweep_json(const std::string& text, const std::string& origin);
SweepDefinition load_sweep(const std::string& path);

}  // namespace hapmoe
