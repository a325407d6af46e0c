// The fuzz target table (fuzz/targets.h). Each row calls one parser on the
// bytes as the command line would, then the checks the command line runs
// next, so that what a parser accepts is also fed to the code that trusts
// it.
#include "fuzz/targets.h"

#include <algorithm>
#include <string>
#include <vector>

#include "costmodel/analytic.h"
#include "costmodel/cost.h"
#include "costmodel/errors.h"
#include "io/archive/sweep.h"
#include "io/inputs/cluster_io.h"
#include "io/inputs/model_io.h"
#include "io/inputs/plan_io.h"
#include "io/megatron/megatron_args.h"
#include "io/megatron/megatron_script.h"
#include "io/profile/megatron_log.h"
#include "io/profile/profile_parse.h"
#include "partition/constraints.h"

namespace hapmoe::fuzz {

namespace {

const std::string kOrigin = "fuzz-input";

// A model file (the project's JSON or a Hugging Face config.json: the kind
// is recognised from the content), then what --model does next: written
// back and read again must give the same workload.
void model_json(std::string_view in) {
  const Workload w = parse_workload_json(std::string(in), kOrigin);
  const Workload again = parse_workload_json(workload_to_json(w), "round-trip");
  HAPMOE_REQUIRE(workload_to_json(again) == workload_to_json(w),
                 "fuzz model_json: workload_to_json does not round-trip");
}

void cluster_json(std::string_view in) {
  const ClusterSpec c = parse_cluster_json(std::string(in), kOrigin);
  (void)parse_cluster_json(cluster_to_json(c), "round-trip");
}

void cluster_inline(std::string_view in) { (void)parse_inline_cluster(std::string(in)); }

// A plan file on a fixed model and cluster, then what `evaluate` does:
// the constraint checks and, if they pass, the cost model (whose results
// must be finite and non-negative).
void plan_json(std::string_view in) {
  static const Workload kWorkload = find_model_preset("mixtral-s")->workload;
  static const ClusterSpec kCluster = find_cluster_preset("paper:32-2")->cluster;
  const Plan plan =
      parse_plan_json(std::string(in), kOrigin, kCluster, kWorkload.training.micro_batch);
  if (!check_plan(plan, kWorkload, kCluster, {}).empty()) return;
  const ProfileTables tables = make_analytic_tables(kWorkload, kCluster, plan.parallel.micro_batch,
                                                    {plan.parallel.tp}, {plan.parallel.cp});
  const CostModel model(kWorkload, kCluster, tables);
  const PlanReport r = model.evaluate(plan);
  HAPMOE_REQUIRE(r.latency_s > 0 && r.latency_s < 1e30, "fuzz plan_json: latency out of range");
}

void sweep_json(std::string_view in) { (void)parse_sweep_json(std::string(in), kOrigin); }

// A Megatron-LM launch script, then what --megatron-script does: the
// workload and, for `evaluate` without --plan, the script's own plan.
void megatron_script(std::string_view in) {
  MegatronScript s = parse_megatron_script(std::string(in), kOrigin);
  const Workload w = megatron_workload(s, {.vocab = 32000, .precision = std::nullopt});
  static const ClusterSpec kCluster = find_cluster_preset("paper:32-2")->cluster;
  (void)megatron_plan(s, w, kCluster);
}

// --pipeline-model-parallel-layout on its own (a small grammar with
// repeats).
void pipeline_layout(std::string_view in) {
  std::vector<LayoutStage> stages;
  if (const std::string e = parse_pipeline_layout(std::string(in), stages); !e.empty()) {
    throw InputError("--pipeline-model-parallel-layout", e);
  }
}

// A nccl-tests / rccl-tests log, both column groups (out-of-place, then
// in-place), as `profile import --nccl` reads it, and the catalog names of
// the devices its Rank lines print.
void nccl_log(std::string_view in) {
  for (const NcclLog& log : parse_nccl_tests_logs(in, kOrigin, false)) {
    for (const std::string& d : log.devices) (void)catalog_device_name(d);
  }
  (void)parse_nccl_tests_logs(in, kOrigin, true);
}

// The measurement CSVs of `profile import`, `fit` and `check`.
void layer_csv(std::string_view in) { (void)parse_layer_csv(in, kOrigin); }
void router_csv(std::string_view in) { (void)parse_router_csv(in, kOrigin); }
void runs_csv(std::string_view in) { (void)parse_runs_csv(in, kOrigin); }

// A Megatron-LM training log, as `profile check --megatron-log` reads it.
void megatron_log(std::string_view in) { (void)parse_megatron_log(in, kOrigin); }

constexpr Target kTargets[] = {
    {"model_json", model_json},
    {"hf_config", model_json},  // same reader, Hugging Face seeds
    {"cluster_json", cluster_json},
    {"cluster_inline", cluster_inline},
    {"plan_json", plan_json},
    {"sweep_json", sweep_json},
    {"megatron_script", megatron_script},
    {"pipeline_layout", pipeline_layout},
    {"nccl_log", nccl_log},
    {"layer_csv", layer_csv},
    {"router_csv", router_csv},
    {"runs_csv", runs_csv},
    {"megatron_log", megatron_log},
};

}  // namespace

std::span<const Target> targets() { return kTargets; }

const Target* find_target(std::string_view name) {
  const auto* it = std::find_if(std::begin(kTargets), std::end(kTargets),
                                [&](const Target& t) { return name == t.name; });
  return it == std::end(kTargets) ? nullptr : it;
}

bool run_one(const Target& target, std::string_view bytes) {
  try {
    target.run(bytes);
    return true;
  } catch (const InputError&) {
    return false;
  }
}

}  // namespace hapmoe::fuzz
