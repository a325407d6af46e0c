// `hapmoe show FILE.h5`: the summary of an archive, read back from the
// tables io/archive/archive.cpp wrote, without re-running the cost model or the
// search.
#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "costmodel/errors.h"
#include "io/archive/archive.h"
#include "io/archive/archive_rows.h"
#include "io/inputs/json_strict.h"
#include "io/report/report.h"

namespace hapmoe {

namespace {

using archive::ConfigRow;
using archive::PlanRow;
using archive::StageRow;
using archive::TotalsRow;

struct Stage {
  std::string device;
  int devices = 0;
  int layers = 0;
  std::string recompute;
  double forward_s = 0;
  double backward_s = 0;
  double memory_bytes = 0;
  double capacity_bytes = 0;
  bool fits = true;
};

std::vector<PlanRow> read_plans(const h5::Group& run) {
  std::vector<PlanRow> plans;
  const h5::Group g = run.open_group("plans");
  g.read_table<PlanRow>("plans", archive::plan_row_type(), [&](const PlanRow& r) {
    archive::require_valid_row(r, g.path() + "/plans", plans.size());
    plans.push_back(r);
  });
  return plans;
}

std::vector<Stage> read_stages(const h5::Group& run) {
  std::vector<Stage> stages;
  const h5::Group g = run.open_group("plans");
  g.read_table<StageRow>("stages", archive::stage_row_type(), [&](const StageRow& r) {
    archive::require_valid_row(r, g.path() + "/stages", stages.size());
    Stage s;
    s.device = r.device != nullptr ? r.device : "";
    s.devices = r.devices;
    s.layers = r.layers;
    s.recompute = r.recompute != nullptr ? r.recompute : "";
    s.forward_s = r.forward_s;
    s.backward_s = r.backward_s;
    s.memory_bytes = r.memory_bytes;
    s.capacity_bytes = r.capacity_bytes;
    s.fits = r.fits != 0;
    stages.push_back(s);
  });
  return stages;
}

std::string plan_line(const PlanRow& p) {
  return fmt("PP=%d TP=%d CP=%d EP=%d TPE=%d DP=%d, ", p.pp, p.tp, p.cp, p.ep, p.tpe, p.dp) +
         (p.vpp > 1 ? fmt("VPP=%d (interleaved 1F1B), ", p.vpp) : std::string()) +
         fmt("micro-batch %d, %d micro-batches, %d devices", p.micro_batch, p.num_microbatches,
             p.devices);
}

std::string stages_line(const PlanRow& p, const std::vector<Stage>& stages) {
  std::string s;
  for (std::int64_t i = p.first_stage; i < p.first_stage + p.num_stages; ++i) {
    if (i < 0 || static_cast<std::size_t>(i) >= stages.size()) break;
    const Stage& st = stages[static_cast<std::size_t>(i)];
    if (!s.empty()) s += " | ";
    s += st.device + " x" + std::to_string(st.layers);
    if (st.recompute != "none") s += " " + st.recompute;
  }
  return s;
}

void print_provenance(std::ostream& out, const h5::Group& g, const std::string& indent) {
  if (!g.has("provenance")) return;
  const h5::Group p = g.open_group("provenance");
  const h5::Attributes a = p.attrs();
  out << indent << "hapmoe " << a.get_string("hapmoe_version") << " ("
      << a.get_string("git_revision") << ") on " << a.get_string("host") << ", "
      << a.get_int("ranks") << (a.get_int("ranks") == 1 ? " rank" : " ranks") << " x "
      << a.get_int("threads") << (a.get_int("threads") == 1 ? " thread" : " threads") << "\n";
  const double wall = a.get_double("wall_seconds");
  if (!(std::isfinite(wall) && wall >= 0)) {
    throw h5::H5Error(p.path() + " attribute wall_seconds = " + fmt("%.6g", wall) +
                      " must be finite and >= 0");
  }
  out << indent << a.get_string("start_time") << " to " << a.get_string("end_time") << " ("
      << format_seconds(wall) << ")\n";
  out << indent << "command: " << a.get_string("command_line") << "\n";
}

// One run (a plan, an evaluation, or a sweep's case).
void print_run(std::ostream& out, const h5::Group& run) {
  bool counted = false;
  if (run.has("inputs")) {
    const h5::Group inputs = run.open_group("inputs");
    const h5::Attributes in = inputs.attrs();
    out << "model    " << in.get_string("model") << " (given as " << in.get_string("model_given")
        << ")\n";
    out << "cluster  " << in.get_string("cluster_given") << " (" << in.get_int("devices")
        << " devices)\n";
    out << "options  " << in.get_string("options") << "\n";
    // plan --count-only (sweep field count_only): no plan was looked for.
    counted = in.get_string("options").find("\"count_only\":true") != std::string::npos;
  }
  const std::vector<PlanRow> plans = read_plans(run);
  const std::vector<Stage> stages = read_stages(run);
  if (!plans.empty()) {
    const PlanRow& b = plans.front();
    out << "\nbest plan  " << plan_line(b) << "\n";
    out << "iteration latency  " << format_seconds(b.latency_s) << "\n";
    out << "  edge             " << format_seconds(b.edge_s) << "\n";
    out << "  middle           " << format_seconds(b.middle_s)
        << fmt("   bottleneck stage %d\n", b.bottleneck_stage);
    out << "  dp sync          " << format_seconds(b.dp_sync_s) << "\n";
    out << "  optimizer        " << format_seconds(b.optimizer_s) << "\n";
    out << fmt("throughput         %.0f tokens/s, %.1f TFLOP/s per device, MFU %.1f%%\n",
               b.throughput_tokens_per_s, b.tflops_per_device, b.mfu * 100.0);
    out << "stage  device      devices  layers  recompute   forward    backward   memory / "
           "capacity\n";
    for (std::int64_t i = b.first_stage; i < b.first_stage + b.num_stages; ++i) {
      if (i < 0 || static_cast<std::size_t>(i) >= stages.size()) break;
      const Stage& s = stages[static_cast<std::size_t>(i)];
      out << fmt("%5lld  %-10s  %7d  %6d  %-10s  %-9s  %-9s  %s / %s%s\n",
                 static_cast<long long>(i - b.first_stage), s.device.c_str(), s.devices, s.layers,
                 s.recompute.c_str(), format_seconds(s.forward_s).c_str(),
                 format_seconds(s.backward_s).c_str(), format_bytes(s.memory_bytes).c_str(),
                 format_bytes(s.capacity_bytes).c_str(), s.fits ? "" : "  OUT OF MEMORY");
    }
    out << "\ntop " << plans.size() << "\n";
    out << "  rank  latency      PP  TP  CP  EP TPE  DP  stages (device x layers, recompute)\n";
    for (const PlanRow& p : plans) {
      out << fmt("  %4d  %-11s %3d %3d %3d %3d %3d %3d  ", p.rank + 1,
                 format_seconds(p.latency_s).c_str(), p.pp, p.tp, p.cp, p.ep, p.tpe, p.dp)
          << stages_line(p, stages) << "\n";
    }
  } else if (counted) {
    out << "\nno plan (counted, not searched: the plain DP's states and moves, no stage costed)\n";
  } else {
    out << "\nno plan (nothing fits in memory)\n";
  }
  if (run.has("search")) {
    const h5::Group s = run.open_group("search");
    std::vector<TotalsRow> totals;
    s.read_table<TotalsRow>("totals", archive::totals_row_type(), [&](const TotalsRow& r) {
      archive::require_valid_row(r, s.path() + "/totals", totals.size());
      totals.push_back(r);
    });
    if (!totals.empty()) {
      const TotalsRow& t = totals.front();
      const std::size_t ranks = s.extent("ranks");
      out << "\nsearch\n";
      out << "  configurations " << t.configs << ", evaluated " << t.configs_evaluated
          << ", skipped by their bound " << t.configs_bounded << ", rounds " << t.rounds << "\n";
      out << "  DP states " << t.states << ", transitions " << t.transitions << "\n";
      out << "  pruned: load balance " << t.pruned_load_balance << ", memory " << t.pruned_memory
          << ", hetero comm " << t.pruned_hetero_comm << ", bound " << t.pruned_bound << "\n";
      if (counted) {
        out << "  feasible plans not counted\n";
      } else {
        out << "  feasible plans " << t.feasible << "\n";
      }
      const h5::Attributes a = s.attrs();
      // Archives before the seed (docs/archive.md) have no such attribute.
      if (a.has("seed_searches") && a.get_int("seed_searches") > 0 && a.get_double("seed_s") > 0) {
        out << "  seeded at " << format_seconds(a.get_double("seed_s")) << " by "
            << a.get_int("seed_searches") << " configurations of a sample\n";
      }
      if (a.has("proven_optimal") && a.get_int("proven_optimal") == 0) {
        out << not_proven_line(a.get_string("stopped_by"), a.get_int("configs_not_searched"),
                               t.configs);
      }
      out << "  wall time " << format_seconds(t.seconds) << " on " << ranks
          << (ranks == 1 ? " rank" : " ranks") << "\n";
    }
  }
}

// The cases of a sweep that ran baselines (the case field "baseline"),
// grouped by everything else of the case (model, cluster, options): per
// model and baseline, the geometric mean over the groups where MI has a
// plan of throughput and latency relative to MI's (the paper's "normalized
// to MI" table). Nothing when the sweep has no MI case.
void print_baseline_means(std::ostream& out, const h5::Group& cases,
                          const std::vector<std::string>& names) {
  struct Result {
    double tokens = 0;
    double latency = 0;
  };
  // group key -> baseline -> result (absent: no plan); group key -> model
  std::map<std::string, std::map<std::string, std::optional<Result>>> groups;
  std::map<std::string, std::string> model_of;
  std::vector<std::string> order;  // baselines in first-seen order
  for (const std::string& n : names) {
    const h5::Group c = cases.open_group(n);
    nlohmann::json j = nlohmann::json::parse(c.attrs().get_string("case"), nullptr, false);
    if (!j.is_object()) continue;
    const std::string baseline = j.value("baseline", std::string("hapmoe"));
    j.erase("name");
    j.erase("baseline");
    const std::string key = j.dump();
    model_of[key] = j.value("model", std::string("?"));
    if (std::find(order.begin(), order.end(), baseline) == order.end()) order.push_back(baseline);
    const std::vector<PlanRow> plans = read_plans(c);
    groups[key][baseline] =
        plans.empty() ? std::nullopt
                      : std::optional<Result>(
                            Result{plans.front().throughput_tokens_per_s, plans.front().latency_s});
  }
  if (std::find(order.begin(), order.end(), "mi") == order.end() || order.size() < 2) return;
  std::map<std::string, std::map<std::string, std::vector<double>>> tokens;  // model, baseline
  std::map<std::string, std::map<std::string, std::vector<double>>> latency;
  std::map<std::string, int> without_mi;
  for (const auto& [key, results] : groups) {
    const auto mi = results.find("mi");
    if (mi == results.end() || !mi->second) {
      ++without_mi[model_of[key]];
      continue;
    }
    for (const auto& [baseline, r] : results) {
      if (!r) continue;
      tokens[model_of[key]][baseline].push_back(r->tokens / mi->second->tokens);
      latency[model_of[key]][baseline].push_back(r->latency / mi->second->latency);
    }
  }
  const auto geomean = [](const std::vector<double>& v) {
    double log_sum = 0.0;
    for (const double x : v) log_sum += std::log(x);
    return std::exp(log_sum / static_cast<double>(v.size()));
  };
  out << "\nbaselines, normalised to mi (geometric mean over the cases where mi has a plan)\n";
  out << "  model             baseline          throughput  latency  cases\n";
  for (const auto& [model, by] : tokens) {
    for (const std::string& b : order) {
      const auto t = by.find(b);
      if (t == by.end()) {
        out << fmt("  %-17s %-17s %10s %8s  0\n", model.c_str(), b.c_str(), "no plan", "");
        continue;
      }
      out << fmt("  %-17s %-17s %9.2fx %7.2fx  %zu\n", model.c_str(), b.c_str(), geomean(t->second),
                 geomean(latency.at(model).at(b)), t->second.size());
    }
    if (without_mi.count(model)) {
      out << fmt("  %-17s (%d more cases where mi has no plan)\n", model.c_str(),
                 without_mi.at(model));
    }
  }
}

// A sweep's cases, or a compare's baselines (one case each).
void print_sweep(std::ostream& out, const h5::File& f, const std::string& case_name) {
  const h5::Group cases = f.open_group("cases");
  const std::vector<std::string> names = cases.children();
  if (!case_name.empty()) {
    for (const std::string& n : names) {
      const h5::Group c = cases.open_group(n);
      if (n == case_name || c.attrs().get_string("name") == case_name) {
        out << "case " << n << ": " << c.attrs().get_string("name") << "\n";
        print_provenance(out, c, "  ");
        print_run(out, c);
        return;
      }
    }
    throw InputError("--case " + case_name, "no such case in " + f.file_path());
  }
  if (f.has("sweep")) {
    const h5::Group sweep = f.open_group("sweep");  // outlives its attributes
    const h5::Attributes a = sweep.attrs();
    out << "sweep " << a.get_string("file") << ": " << names.size() << " of "
        << a.get_int("cases_total") << " cases done"
        << (a.get_int("complete") != 0 ? " (complete)" : " (incomplete: run again with --resume)")
        << "\n\n";
  } else {
    out << "compare: " << names.size() << " baselines (docs/baselines.md)\n\n";
  }
  out << "  case  latency      PP  TP  CP  EP TPE  DP  configs   seconds  name\n";
  for (const std::string& n : names) {
    const h5::Group c = cases.open_group(n);
    const std::vector<PlanRow> plans = read_plans(c);
    std::vector<TotalsRow> totals;
    const h5::Group search = c.open_group("search");
    search.read_table<TotalsRow>("totals", archive::totals_row_type(), [&](const TotalsRow& r) {
      archive::require_valid_row(r, search.path() + "/totals", totals.size());
      totals.push_back(r);
    });
    const std::int64_t configs = totals.empty() ? 0 : totals.front().configs;
    const double seconds = totals.empty() ? 0.0 : totals.front().seconds;
    if (plans.empty()) {
      out << fmt("  %4s  %-11s %27s %7lld %9.3f  ", n.c_str(), "no fit", "",
                 static_cast<long long>(configs), seconds);
    } else {
      const PlanRow& p = plans.front();
      out << fmt("  %4s  %-11s %3d %3d %3d %3d %3d %3d %7lld %9.3f  ", n.c_str(),
                 format_seconds(p.latency_s).c_str(), p.pp, p.tp, p.cp, p.ep, p.tpe, p.dp,
                 static_cast<long long>(configs), seconds);
    }
    out << c.attrs().get_string("name") << "\n";
  }
  print_baseline_means(out, cases, names);
  out << "\n`hapmoe show " << f.file_path() << " --case NAME` prints one case in full.\n";
}

}  // namespace

void print_archive_summary(std::ostream& to, const std::string& path,
                           const std::string& case_name) {
  // The whole summary is read and checked before any of it is printed: an
  // archive refused half-way prints nothing but the error.
  std::ostringstream out;
  h5::check_input_file(path);
  if (!h5::is_hdf5(path)) throw InputError(path, "is not an HDF5 file (or cannot be read)");
  try {
    const h5::File f = h5::File::open_read(path);
    const h5::Attributes root = f.attrs();
    if (!root.has("format") || root.get_string("format") != kArchiveFormat) {
      throw InputError(path, "is an HDF5 file but not a hapmoe archive (no format attribute)");
    }
    const std::int64_t version = root.get_int("format_version");
    if (version != kArchiveVersion) {
      throw InputError(path, "format_version " + std::to_string(version) +
                                 ": this hapmoe reads archives of format_version " +
                                 std::to_string(kArchiveVersion));
    }
    const std::string kind = root.get_string("kind");
    if (kind != "plan" && kind != "evaluate" && kind != "sweep" && kind != "compare") {
      throw InputError(
          path, "kind \"" + echo_value(kind) + "\": expected plan, evaluate, sweep or compare");
    }
    // A sweep without its /sweep group would show as a compare.
    if (kind == "sweep" && !f.has("sweep")) {
      throw InputError(path, "a sweep archive (kind sweep) without its /sweep group");
    }
    out << "archive  " << path << " (" << kind << ", format " << version << ")\n";
    print_provenance(out, f, "         ");
    if (kind == "sweep" || kind == "compare") {
      print_sweep(out, f, case_name);
    } else {
      if (!case_name.empty()) {
        throw InputError("--case", "only sweep and compare archives have cases");
      }
      print_run(out, f);
    }
  } catch (const h5::H5Error& e) {
    throw InputError(path, std::string("cannot read the archive: ") + e.what());
  }
  to << out.str();
}

}  // namespace hapmoe
