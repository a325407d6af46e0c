// Plan files in, plan reports out (the JSON schema every command shares;
// docs/cli.md, "Plan JSON").
#pragma once

#include <string>
#include <vector>

#include "costmodel/cluster.h"
#include "costmodel/cost.h"
#include "costmodel/model.h"
#include "costmodel/plan.h"
#include "io/inputs/json_strict.h"

namespace hapmoe {

// Reads a plan: either a plan object {"parallel":{...},"stages":[...]} or
// an output document {"plans":[...]} (then plan number `index` is taken, so
// an output fed back evaluates to the same figures). Device names are
// resolved against `cluster`; a missing micro_batch takes
// `default_micro_batch`. Throws InputError naming file, pointer and value.
Plan parse_plan_json(const std::string& text, const std::string& origin, const ClusterSpec& cluster,
                     int default_micro_batch, int index = 0);
Plan load_plan(const std::string& path, const ClusterSpec& cluster, int default_micro_batch,
               int index = 0);

// The training knobs a plan document from `plan --space` carries in
// "job"/"training" (precision, fp8_recipe, distributed_optimizer, fsdp,
// optimizer_offload_fraction, dispatcher), applied to `workload`; false
// (and `workload` untouched) when the document has none. Evaluating the
// plan then costs what the search costed.
bool apply_plan_job(const std::string& text, const std::string& origin, Workload& workload);
// The "job"/"training" object for `training`.
nlohmann::ordered_json job_training_json(const TrainingSpec& training);
// A training's overlaps as JSON ({"grad_reduce": ..., ...}, one key per
// Overlap field): in a plan file's plans and "job", and the model JSON's
// `training.overlap`.
nlohmann::ordered_json overlap_json(const Overlap& overlap);

// "none", "selective", "full", "full:K" -> Recompute (K checked against
// `stage_layers` by the plan checks, not here).
Recompute parse_recompute(const std::string& text, int stage_layers, const std::string& where);

// One plan report as the output schema's plan object.
nlohmann::ordered_json plan_report_json(const PlanReport& report, const ClusterSpec& cluster);

}  // namespace hapmoe
