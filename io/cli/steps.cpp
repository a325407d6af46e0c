#include "io/cli/steps.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <initializer_list>

#include "costmodel/errors.h"
#include "io/cli/fault_hooks.h"
#include "io/inputs/files.h"
#include "io/inputs/plan_io.h"

namespace hapmoe {

Provenance provenance_since(const Started& started, const std::string& command_line, int ranks,
                            int threads) {
  Provenance p;
  p.command_line = command_line;
  p.ranks = ranks;
  p.threads = threads;
  p.start_time = started.utc;
  p.end_time = utc_now();
  p.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started.at).count();
  p.host = host_name();
  return p;
}

std::string hapmoe_command_line(int argc, const char* const* argv) {
  return "hapmoe " + command_line(argc, argv);
}

void agree(Comm& comm, const std::string& failed) {
  if (const std::string first = first_error(comm, failed); !first.empty()) {
    throw InputError("", first);
  }
}

std::vector<NamedPath> given_paths(const cxxopts::ParseResult& r,
                                   std::initializer_list<const char*> options) {
  std::vector<NamedPath> paths;
  for (const char* o : options) {
    if (r.count(o)) paths.push_back({std::string("--") + o, r[o].as<std::string>()});
  }
  return paths;
}

std::optional<ArchiveLock> check_outputs_on_root(const Comm& comm, const cxxopts::ParseResult& r,
                                                 const std::vector<NamedPath>& more_inputs) {
  if (comm.rank() != 0) return std::nullopt;
  const std::vector<NamedPath> outputs = given_paths(r, {"out", "plan-json", "launcher"});
  std::vector<NamedPath> inputs =
      given_paths(r, {"model", "cluster", "plan", "profile", "launcher-hosts", "megatron-script"});
  inputs.insert(inputs.end(), more_inputs.begin(), more_inputs.end());
  refuse_outputs_over_inputs(outputs, inputs);
  for (const NamedPath& o : outputs) {
    if (o.option == "--out") {
      check_archive_path(o.path);
    } else {
      check_file_writable(o.path, o.option);
    }
  }
  if (r.count("out") == 0) return std::nullopt;
  return std::optional<ArchiveLock>(std::in_place, r["out"].as<std::string>());
}

void warn_if_unlocked(std::ostream& err, const std::optional<ArchiveLock>& lock,
                      const std::string& command) {
  if (!lock || lock->unsupported().empty()) return;
  err << "hapmoe " << command << ": warning: " << lock->unsupported()
      << "; running unlocked: let no other run write --out meanwhile\n";
}

void write_on_root(Comm& comm, const std::string& option, const std::string& path,
                   const std::function<void()>& write) {
  const std::string where = option + " " + path;
  std::string failed;
  if (comm.rank() == 0) {
    try {
      if (injected_write_failure(comm)) {
        throw InputError(where, "write failed: " + std::string(std::strerror(ENOSPC)) +
                                    " (HAPMOE_TEST_FAIL=write, a test hook)");
      }
      write();
    } catch (const InputError& e) {
      // The writers name the path; the message names the option too.
      const std::string what = e.what();
      failed = what.rfind(where, 0) == 0  ? what
               : what.rfind(path, 0) == 0 ? option + " " + what
                                          : where + ": " + what;
    } catch (const std::exception& e) {  // any: the other ranks are waiting below
      failed = where + ": " + e.what();
    }
  }
  agree(comm, failed);
}

void write_out(Comm& comm, const std::string& path, const std::function<void(h5::File&)>& fill) {
  write_on_root(comm, "--out", path, [&] { write_archive_atomic(path, fill); });
}

void write_plan_json(const cxxopts::ParseResult& r, Comm& comm,
                     const std::function<nlohmann::ordered_json()>& doc) {
  if (r.count("plan-json") == 0) return;
  const std::string path = r["plan-json"].as<std::string>();
  write_on_root(comm, "--plan-json", path, [&] { write_file_atomic(path, doc().dump(2) + "\n"); });
}

ArchiveInputs given_inputs(const cxxopts::ParseResult& r, const Inputs& in) {
  ArchiveInputs a;
  for (const auto& kv : r.arguments()) a.options_given[kv.key()] = kv.value();
  a.model_given = r.count("model") ? r["model"].as<std::string>() : "";
  a.cluster_given = r.count("cluster") ? r["cluster"].as<std::string>() : "";
  a.model_file_text = given_file_text(a.model_given);
  a.cluster_file_text = given_file_text(a.cluster_given);
  a.workload = &in.workload;
  a.cluster = &in.cluster;
  return a;
}

BaselineRun run_one_search(Baseline baseline, bool bruteforce, const Workload& workload,
                           const ClusterSpec& cluster, const SearchOptions& options, Comm& comm,
                           const RunOptions& run) {
  if (baseline == Baseline::kNone && bruteforce) {
    return {options.uniform ? uniform_ablation(workload, cluster, options, true, comm, run)
                            : run_search(workload, cluster, options, true, comm, run),
            ""};
  }
  return run_baseline(baseline, workload, cluster, options, comm, run);
}

Scored score(const Workload& workload, const ClusterSpec& cluster, const SearchResult& result,
             const MeasuredProfile* profile, ProfileSources* sources) {
  Scored s;
  s.tables = tables_for(workload, cluster, result.configs, profile, sources);
  const CostModel model(workload, cluster, s.tables);
  for (const PlanCandidate& c : result.top) s.reports.push_back(model.evaluate(c.plan));
  return s;
}

std::string stages_text(const Plan& plan, const ClusterSpec& cluster) {
  std::string stages;
  const auto& st = plan.stages;
  for (std::size_t i = 0; i < st.size();) {
    std::size_t run = 1;
    while (i + run < st.size() && st[i + run] == st[i]) ++run;
    std::string one = cluster.pools[static_cast<std::size_t>(st[i].device_type)].device.name +
                      " x" + std::to_string(st[i].layers);
    if (st[i].recompute.kind != RecomputeKind::kNone) {
      one += " " + to_string(st[i].recompute, st[i].layers);
    }
    if (!stages.empty()) stages += " | ";
    stages += run == 1 ? one : "[" + one + "] *" + std::to_string(run);
    i += run;
  }
  return stages;
}

std::string case_group_name(std::size_t index, std::size_t total) {
  const int width = std::max(4, static_cast<int>(std::to_string(total).size()));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%0*zu", width, index);
  return buf;
}

}  // namespace hapmoe
