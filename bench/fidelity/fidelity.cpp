#include "bench/fidelity/fidelity.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>

#include "costmodel/errors.h"
#include "costmodel/measured.h"
#include "io/inputs/cluster_io.h"
#include "io/inputs/files.h"
#include "io/inputs/json_strict.h"
#include "io/inputs/plan_io.h"
#include "io/report/report.h"
#include "partition/constraints.h"

namespace hapmoe::fidelity {

namespace {

std::vector<std::string> string_list(ObjectReader& r, const std::string& key) {
  std::vector<std::string> out;
  const Json* list = r.opt_raw(key);
  if (list == nullptr) return out;
  if (!list->is_array()) r.fail(key, "expected a list of strings, got " + describe(*list));
  for (const Json& s : *list) {
    if (!s.is_string()) r.fail(key, "expected a list of strings, got " + describe(s));
    out.push_back(s.get<std::string>());
  }
  return out;
}

Case read_case(const Json& j, const std::string& origin, const std::string& pointer) {
  ObjectReader r(j, origin, pointer);
  Case c;
  c.id = r.get_string("id");
  c.group = r.opt_string("group").value_or("");
  c.model = r.get_string("model");
  c.cluster = r.get_string("cluster");
  c.overrides.seq_len = r.get_int("seq_len", 1, 1 << 22);
  c.overrides.global_batch = r.get_int("global_batch", 1, 1 << 30);
  c.overrides.micro_batch = r.get_int("micro_batch", 1, 1 << 20);
  c.overrides.imbalance = r.opt_number("imbalance", 1.0, 1000.0);
  if (const auto p = r.opt_string("precision")) {
    c.overrides.precision = parse_precision(*p, origin + ":" + r.pointer("precision"));
  }
  if (const auto f = r.opt_string("fp8_recipe")) {
    c.overrides.fp8_recipe = parse_fp8_recipe(*f, origin + ":" + r.pointer("fp8_recipe"));
  }
  if (const auto f = r.opt_string("fsdp")) {
    c.overrides.fsdp = parse_fsdp(*f, origin + ":" + r.pointer("fsdp"));
  }
  if (const auto g = r.opt_bool("grad_reduce_in_bf16")) c.overrides.grad_reduce_in_bf16 = *g;
  if (const auto d = r.opt_string("dispatcher")) {
    c.overrides.dispatcher = parse_dispatcher(*d, origin + ":" + r.pointer("dispatcher"));
  }
  for (const std::string& o : string_list(r, "overlap")) {
    if (o == "grad_reduce") {
      c.overrides.overlap.grad_reduce = true;
    } else if (o == "param_gather") {
      c.overrides.overlap.param_gather = true;
    } else if (o == "tp_comm") {
      c.overrides.overlap.tp_comm = true;
    } else if (o == "moe_ep_comm") {
      c.overrides.overlap.moe_ep_comm = true;
    } else if (o == "delay_wgrad") {
      c.overrides.overlap.delay_wgrad = true;
    } else {
      r.fail("overlap",
             "unknown overlap \"" + o +
                 "\" (expected grad_reduce, param_gather, tp_comm, moe_ep_comm or delay_wgrad)");
    }
  }
  const Json& plan = r.get_raw("plan");
  if (!plan.is_object()) r.fail("plan", "expected a plan object, got " + describe(plan));
  c.plan_text = plan.dump();
  c.measured_s = r.get_number("measured_s", 1e-6, 1e9);
  c.settings_from = r.opt_string("settings_from").value_or("");
  c.approximations = string_list(r, "approximations");
  c.outside_median = r.opt_string("outside_median").value_or("");
  r.finish();
  return c;
}

// A path relative to `root` when it names a file there, else the spec as
// given (a preset or an inline cluster).
std::string under(const std::string& root, const std::string& spec) {
  const std::filesystem::path p = std::filesystem::path(root) / spec;
  std::error_code ec;
  return std::filesystem::is_regular_file(p, ec) ? p.string() : spec;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  if (n == 0) return 0;
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// "qwen3-235b/h100x256/..." -> "qwen3_235b": the group's key in the
// summary line.
std::string group_key(const std::string& group) {
  std::string key = group.substr(0, group.find('/'));
  std::replace(key.begin(), key.end(), '-', '_');
  std::replace(key.begin(), key.end(), '.', '_');
  return key;
}

std::vector<GroupStats> groups_of(const std::vector<Outcome>& outcomes, bool inside_only) {
  std::map<std::string, std::vector<const Outcome*>> by_group;
  for (const Outcome& o : outcomes) {
    if (o.c.group.empty() || (inside_only && !o.inside())) continue;
    by_group[o.c.group].push_back(&o);
  }
  std::vector<GroupStats> out;
  out.reserve(by_group.size());
  for (const auto& [group, rows] : by_group) out.push_back(group_stats(group, rows));
  return out;
}

}  // namespace

std::vector<Case> load_cases(const std::string& path) {
  const Json doc = parse_json(read_regular_file(path), path);
  if (!doc.is_array() || doc.empty()) {
    throw InputError(path, "expected a non-empty list of cases, got " + describe(doc));
  }
  std::vector<Case> cases;
  for (std::size_t k = 0; k < doc.size(); ++k) {
    cases.push_back(read_case(doc[k], path, "/" + std::to_string(k)));
    for (std::size_t j = 0; j + 1 < cases.size(); ++j) {
      if (cases[j].id == cases.back().id) {
        throw InputError(path + ":/" + std::to_string(k) + "/id",
                         "'" + cases.back().id + "' is used twice");
      }
    }
  }
  return cases;
}

std::vector<Outcome> evaluate_cases(const std::vector<Case>& cases, const std::string& root,
                                    std::optional<double> kernel_overhead) {
  std::vector<Outcome> out;
  for (const Case& c : cases) {
    try {
      Workload w = load_workload(under(root, c.model));
      apply_overrides(c.overrides, w);
      ClusterSpec cluster = load_cluster(under(root, c.cluster));
      if (kernel_overhead) {
        for (DevicePool& pool : cluster.pools) pool.device.kernel_overhead = *kernel_overhead;
      }
      const Plan plan = parse_plan_json(c.plan_text, "plan", cluster, w.training.micro_batch);
      if (const std::string e = check_plan(plan, w, cluster, ConstraintOptions{}); !e.empty()) {
        throw InputError("plan", e);
      }
      const ProfileTables tables = plan_tables(w, cluster, plan.parallel, nullptr);
      const PlanReport report = CostModel(w, cluster, tables).evaluate(plan);
      Outcome o;
      o.c = c;
      o.predicted_s = report.latency_s;
      o.error = (report.latency_s - c.measured_s) / c.measured_s;
      o.fits = report.fits;
      o.mfu = report.mfu;
      o.report = report;
      out.push_back(std::move(o));
    } catch (const InputError& e) {
      throw InputError("case " + c.id, e.what());
    }
  }
  return out;
}

OverheadFit fit_kernel_overhead(const std::vector<Case>& cases, const std::string& root,
                                const std::vector<double>& grid) {
  OverheadFit fit;
  fit.grid = grid;
  // log(predicted / measured) of every row inside the median, per grid point.
  std::vector<std::vector<double>> logs;
  std::vector<std::string> ids;
  for (double tau : grid) {
    std::vector<double> row;
    for (const Outcome& o : evaluate_cases(cases, root, tau)) {
      if (!o.inside()) continue;
      row.push_back(std::log(o.predicted_s / o.c.measured_s));
      if (logs.empty()) ids.push_back(o.c.id);
    }
    logs.push_back(std::move(row));
  }
  // The grid point of least sum of squares, leaving out row `skip` (none
  // when skip is out of range).
  auto least = [&](std::size_t skip) {
    std::size_t best = 0;
    double best_sse = std::numeric_limits<double>::infinity();
    for (std::size_t g = 0; g < grid.size(); ++g) {
      double sse = 0;
      for (std::size_t r = 0; r < logs[g].size(); ++r) {
        if (r != skip) sse += logs[g][r] * logs[g][r];
      }
      if (skip >= logs[g].size()) fit.sse.push_back(sse);
      if (sse < best_sse) {
        best_sse = sse;
        best = g;
      }
    }
    return best;
  };
  if (grid.empty()) return fit;
  fit.best = grid[least(ids.size())];
  for (std::size_t r = 0; r < ids.size(); ++r) {
    const std::size_t g = least(r);
    fit.held_out.push_back({ids[r], grid[g], std::exp(logs[g][r]) - 1.0});
  }
  return fit;
}

GroupStats group_stats(const std::string& group, const std::vector<const Outcome*>& rows) {
  GroupStats g;
  g.group = group;
  g.rows = static_cast<int>(rows.size());
  double agree = 0;
  double concordant = 0;
  double discordant = 0;
  double tied_measured = 0;
  double tied_predicted = 0;
  double all_pairs = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    for (std::size_t j = i + 1; j < rows.size(); ++j) {
      const double dm = rows[i]->c.measured_s - rows[j]->c.measured_s;
      const double dp = rows[i]->predicted_s - rows[j]->predicted_s;
      all_pairs += 1;
      if (dm == 0) tied_measured += 1;
      if (dp == 0) tied_predicted += 1;
      if (dm == 0) continue;
      ++g.pairs;
      if (dp == 0) {
        agree += 0.5;
      } else if ((dm > 0) == (dp > 0)) {
        agree += 1;
        concordant += 1;
      } else {
        discordant += 1;
      }
    }
  }
  g.concordance = g.pairs > 0 ? agree / g.pairs : 0.0;
  const double denom = std::sqrt((all_pairs - tied_measured) * (all_pairs - tied_predicted));
  g.kendall_tau_b = denom > 0 ? (concordant - discordant) / denom : 0.0;
  if (!rows.empty()) {
    double best_measured = rows.front()->c.measured_s;
    double best_predicted = rows.front()->predicted_s;
    for (const Outcome* o : rows) {
      best_measured = std::min(best_measured, o->c.measured_s);
      best_predicted = std::min(best_predicted, o->predicted_s);
    }
    for (const Outcome* o : rows) {
      if (o->c.measured_s == best_measured && o->predicted_s == best_predicted) {
        g.best_predicted_best = true;
      }
    }
  }
  return g;
}

Summary summarise(const std::vector<Outcome>& outcomes) {
  Summary s;
  s.rows = static_cast<int>(outcomes.size());
  std::vector<double> abs_errors;
  for (const Outcome& o : outcomes) {
    if (!o.inside()) continue;
    ++s.expressible;
    abs_errors.push_back(std::abs(o.error));
  }
  s.median_abs_error = median(abs_errors);
  s.worst_abs_error =
      abs_errors.empty() ? 0.0 : *std::max_element(abs_errors.begin(), abs_errors.end());
  s.groups = groups_of(outcomes, true);
  s.groups_all = groups_of(outcomes, false);
  return s;
}

std::string summary_line(const Summary& s) {
  std::string line =
      fmt("calibration: rows=%d expressible=%d median_abs_error=%.3f "
          "worst_abs_error=%.3f",
          s.rows, s.expressible, s.median_abs_error, s.worst_abs_error);
  for (const GroupStats& g : s.groups) {
    const std::string key = group_key(g.group);
    line += fmt(" %s_concordance=%.2f %s_best=%s", key.c_str(), g.concordance, key.c_str(),
                g.best_predicted_best ? "yes" : "no");
  }
  return line;
}

void print_breakdown(std::ostream& out, const std::vector<Outcome>& outcomes) {
  out << "where the predicted time goes (s per iteration; the bottleneck stage's step of one "
         "micro-batch in ms):\n";
  out << fmt("  %-22s %5s %9s %8s %8s %8s %8s\n", "row", "M", "predicted", "step", "bubble",
             "dp sync", "optim");
  for (const Outcome& o : outcomes) {
    const IterationBreakdown& b = o.report.breakdown;
    out << fmt("  %-22s %5d %9.3f %8.2f %8.3f %8.3f %8.3f\n", o.c.id.c_str(),
               o.report.num_microbatches, o.predicted_s, b.step_s * 1e3, b.bubble_s(), b.dp_sync_s,
               b.optimizer_s);
  }
  out << fmt("\n  %-22s %4s %8s %7s %7s %7s %7s %7s %7s %7s | %7s %7s\n", "row", "pass", "compute",
             "tp", "cp", "ep", "pp", "recomp", "dp", "host", "tp hid", "ep hid");
  for (const Outcome& o : outcomes) {
    if (o.report.stages.empty()) continue;
    const StageCost& st = o.report.stages[static_cast<std::size_t>(o.report.bottleneck_stage)].cost;
    const auto row = [&](const char* pass, const StepParts& p) {
      out << fmt("  %-22s %4s %8.2f %7.2f %7.2f %7.2f %7.2f %7.2f %7.2f %7.2f | %7.2f %7.2f\n",
                 o.c.id.c_str(), pass, 1e3 * p.compute, 1e3 * p.tp, 1e3 * p.cp, 1e3 * p.ep,
                 1e3 * p.p2p, 1e3 * p.recompute, 1e3 * p.dp, 1e3 * p.host, 1e3 * p.tp_hidden,
                 1e3 * p.ep_hidden);
    };
    row("fwd", st.fwd_parts);
    row("bwd", st.bwd_parts);
  }
  out << "\n";
}

void print_report(std::ostream& out, const std::vector<Outcome>& outcomes, const Summary& s) {
  out << "calibration benchmark: " << s.rows << " published runs (shared/calibration), "
      << s.expressible << " inside the median\n\n";
  out << fmt("  %-22s %10s %10s %8s %6s  %s\n", "row", "measured", "predicted", "error", "MFU",
             "notes");
  for (const Outcome& o : outcomes) {
    std::string notes = o.inside() ? "" : "outside the median";
    if (!o.fits) notes += std::string(notes.empty() ? "" : "; ") + "predicted not to fit";
    out << fmt("  %-22s %9.3fs %9.3fs %+7.1f%% %5.1f%%  %s\n", o.c.id.c_str(), o.c.measured_s,
               o.predicted_s, 100 * o.error, 100 * o.mfu, notes.c_str());
  }
  out << "\nwhere the settings the rows do not print come from:\n";
  for (const Outcome& o : outcomes) {
    if (!o.c.settings_from.empty()) out << "  " << o.c.id << ": " << o.c.settings_from << "\n";
  }
  out << "\nwhat each row approximates or leaves out:\n";
  for (const Outcome& o : outcomes) {
    if (!o.inside())
      out << "  " << o.c.id << ": outside the median: " << o.c.outside_median << "\n";
    for (const std::string& a : o.c.approximations) out << "  " << o.c.id << ": " << a << "\n";
  }
  out << "\nsame-hardware groups (pairs of different measured time):\n";
  const auto print_group = [&](const GroupStats& g, const char* which) {
    out << fmt(
        "  %s (%s, %d rows, %d pairs): concordance %.2f, Kendall tau-b %+.2f, "
        "measured-fastest predicted fastest: %s\n",
        g.group.c_str(), which, g.rows, g.pairs, g.concordance, g.kendall_tau_b,
        g.best_predicted_best ? "yes" : "no");
  };
  for (const GroupStats& g : s.groups) print_group(g, "rows inside the median");
  for (const GroupStats& g : s.groups_all) print_group(g, "every row");
  for (const GroupStats& g : s.groups_all) {
    out << "  " << g.group << ", measured order:";
    std::vector<const Outcome*> rows;
    for (const Outcome& o : outcomes) {
      if (o.c.group == g.group) rows.push_back(&o);
    }
    std::sort(rows.begin(), rows.end(),
              [](const Outcome* a, const Outcome* b) { return a->c.measured_s < b->c.measured_s; });
    for (const Outcome* o : rows) {
      out << fmt(" %s %.1f/%.1f s", o->c.id.c_str(), o->c.measured_s, o->predicted_s);
    }
    out << " (measured/predicted)\n";
  }
  out << "\n" << summary_line(s) << "\n";
}

}  // namespace hapmoe::fidelity
