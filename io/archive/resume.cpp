#include "io/archive/resume.h"

#include <cmath>
#include <limits>
#include <vector>

#include "costmodel/errors.h"
#include "io/archive/archive.h"
#include "io/archive/archive_rows.h"
#include "io/archive/h5.h"

namespace hapmoe {

namespace {

// Configuration c's outcome as the archive's row gives it: the counters
// and the best latency (the plan itself only for the top K, below).
ConfigOutcome outcome_of_row(const archive::ConfigRow& row) {
  ConfigOutcome o;
  o.stats.configs_evaluated = 1;
  o.stats.states = row.states;
  o.stats.transitions = row.transitions;
  o.stats.pruned_load_balance = row.pruned_load_balance;
  o.stats.pruned_memory = row.pruned_memory;
  o.stats.pruned_hetero_comm = row.pruned_hetero_comm;
  o.stats.pruned_bound = row.pruned_bound;
  o.stats.feasible = row.feasible;
  o.stats.hetero_comm_ratio = row.hetero_comm_ratio;
  o.stats.seconds = row.seconds;
  if (!std::isnan(row.best_latency_s)) o.best = PlanCandidate{row.best_latency_s, Plan{}};
  return o;
}

}  // namespace

ResumeArchive read_resume_archive(const std::string& path, const std::string& where) {
  ResumeArchive a;
  try {
    h5::check_input_file(path);
    if (!h5::is_hdf5(path)) throw InputError(where, "is not an HDF5 file");
    const h5::File f = h5::File::open_read(path);
    const h5::Attributes root = f.attrs();
    if (!root.has("format") || root.get_string("format") != kArchiveFormat) {
      throw InputError(where, "is not a hapmoe archive");
    }
    if (root.get_int("format_version") != kArchiveVersion) {
      throw InputError(where, "is an archive of format version " +
                                  std::to_string(root.get_int("format_version")) +
                                  ", this hapmoe writes version " +
                                  std::to_string(kArchiveVersion));
    }
    if (const std::string kind = root.get_string("kind"); kind != "plan" || !f.has("search")) {
      throw InputError(where, "is a `" + kind + "` archive; --resume continues the search of a " +
                                  "`plan --out` archive");
    }
    const h5::Group inputs = f.open_group("inputs");
    a.model_json = inputs.attrs().get_string("model_json");
    a.cluster_json = inputs.attrs().get_string("cluster_json");
    a.options = inputs.attrs().get_string("options");
    a.options_given = inputs.attrs().get_string("options_given");
    const h5::Group search = f.open_group("search");
    a.stopped_by = search.attrs().get_string("stopped_by");
    if (a.stopped_by == to_string(StopReason::kTimeLimit) ||
        a.stopped_by == to_string(StopReason::kMemoryLimit)) {
      throw InputError(where, "was stopped by the " + a.stopped_by +
                                  ", which cuts the units in flight short, so it cannot be "
                                  "resumed exactly; run the search again without --resume");
    }
    if (!search.has("resume")) {
      throw InputError(where,
                       "has no resume data (/search/resume: written by an older hapmoe); run the "
                       "search again without --resume");
    }
    search.read_table<archive::TotalsRow>(
        "totals", archive::totals_row_type(),
        [&](const archive::TotalsRow& t) { a.configs = t.configs; });
    SearchResume& r = a.resume;
    r.configs = a.configs;
    const h5::Group resume = search.open_group("resume");
    r.rounds = static_cast<int>(resume.attrs().get_int("rounds"));
    std::vector<std::size_t> at(static_cast<std::size_t>(std::max<std::int64_t>(a.configs, 0)),
                                static_cast<std::size_t>(-1));  // config -> position in searched
    search.read_table<archive::ConfigRow>(
        "configs", archive::config_row_type(), [&](const archive::ConfigRow& row) {
          if (row.index < 0 || row.index >= a.configs) {
            throw InputError(where, "/search/configs: index " + std::to_string(row.index) +
                                        " outside the search's " + std::to_string(a.configs) +
                                        " configurations");
          }
          const auto c = static_cast<std::size_t>(row.index);
          if (row.skipped != 0) {
            r.skipped.push_back(c);
          } else if (row.searched != 0) {
            at[c] = r.searched.size();
            r.searched.push_back({c, outcome_of_row(row), row.rank, row.round,
                                  std::max(1, static_cast<int>(row.parts)), row.work_estimate});
          }
        });
    // The top K's plans, exact.
    std::vector<archive::ResumeStageRow> stages;
    resume.read_table<archive::ResumeStageRow>(
        "stages", archive::resume_stage_row_type(),
        [&](const archive::ResumeStageRow& s) { stages.push_back(s); });
    resume.read_table<archive::ResumePlanRow>(
        "plans", archive::resume_plan_row_type(), [&](const archive::ResumePlanRow& p) {
          if (p.config < 0 || p.config >= a.configs ||
              at[static_cast<std::size_t>(p.config)] == static_cast<std::size_t>(-1) ||
              p.first_stage < 0 || p.num_stages < 0 ||
              static_cast<std::size_t>(p.first_stage + p.num_stages) > stages.size()) {
            throw InputError(where, "/search/resume/plans: a plan of no committed configuration");
          }
          ConfigOutcome& o = r.searched[at[static_cast<std::size_t>(p.config)]].outcome;
          PlanCandidate c;
          c.latency_s = p.latency_s;
          for (std::int32_t k = 0; k < p.num_stages; ++k) {
            const archive::ResumeStageRow& s = stages[static_cast<std::size_t>(p.first_stage + k)];
            StagePlan st;
            st.device_type = s.device_type;
            st.layers = s.layers;
            st.recompute.kind = static_cast<RecomputeKind>(s.recompute_kind);
            st.recompute.layers = s.recompute_layers;
            st.recompute.modules = static_cast<unsigned>(s.recompute_modules);
            c.plan.stages.push_back(st);
          }
          o.best = std::move(c);
        });
    resume.read_table<archive::ResumeClosestRow>(
        "closest", archive::resume_closest_row_type(), [&](const archive::ResumeClosestRow& row) {
          if (row.config < 0 || row.config >= a.configs ||
              at[static_cast<std::size_t>(row.config)] == static_cast<std::size_t>(-1)) {
            throw InputError(where, "/search/resume/closest: of no committed configuration");
          }
          Shortfall& s = r.searched[at[static_cast<std::size_t>(row.config)]].outcome.closest;
          s.bytes = row.bytes;
          s.parallel = {row.pp, row.tp, row.cp, row.ep, row.tpe, row.dp, row.micro_batch, row.vpp};
          s.stage = row.stage;
          s.device_type = row.device_type;
          s.layers = row.layers;
        });
  } catch (const h5::H5Error& e) {
    throw InputError(where, std::string("cannot read it to resume: ") + e.what());
  }
  return a;
}

}  // namespace hapmoe
