// `hapmoe profile`: measured tables in, calibrated cost model out
// (docs/profile.md). import reads nccl-tests logs and layer CSVs, comm
// times MPI collectives, fit calibrates eta, the router, the memory model
// and rho, check compares predictions with measured runs, show prints a
// profile file.
#include "io/cli/commands.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cxxopts.hpp>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "costmodel/errors.h"
#include "costmodel/measured.h"
#include "costmodel/text.h"
#include "engine/driver.h"
#include "io/archive/archive.h"
#include "io/cli/cli.h"
#include "io/cli/megatron_cli.h"
#include "io/cli/options.h"
#include "io/cli/steps.h"
#include "io/inputs/cluster_io.h"
#include "io/inputs/files.h"
#include "io/inputs/json_strict.h"
#include "io/inputs/model_io.h"
#include "io/inputs/plan_io.h"
#include "io/profile/megatron_log.h"
#include "io/profile/profile_h5.h"
#include "io/profile/profile_parse.h"
#include "io/report/report.h"
#include "partition/constraints.h"

namespace hapmoe {

namespace {

namespace fs = std::filesystem;

constexpr const char* kProfileUsage =
    "usage: hapmoe profile <subcommand> [options]   (docs/profile.md)\n"
    "\n"
    "subcommands:\n"
    "  import   nccl-tests/rccl-tests logs, layer timings (CSV) and Megatron-LM training logs\n"
    "           (as measured runs) into a profile file\n"
    "  comm     time all-reduce, all-gather, reduce-scatter, all-to-all and p2p with MPI\n"
    "           (run under mpiexec) into a profile file\n"
    "  fit      fit eta, the router coefficient, the memory calibration and rho by least\n"
    "           squares from layer timings and router statistics, or eta and the activation\n"
    "           scale from the stored training runs (--runs); print the residuals\n"
    "  check    predicted vs measured iteration latency and memory of measured runs\n"
    "  show     print the tables of a profile file\n"
    "\n"
    "`hapmoe profile <subcommand> --help` shows its options.\n";

// The profile to add to (--profile), or an empty one.
MeasuredProfile base_profile(const cxxopts::ParseResult& r) {
  return r.count("profile") ? read_profile(r["profile"].as<std::string>()) : MeasuredProfile{};
}

// --out against the command's input files, before anything is read. The
// profile it starts from (--profile) may be --out itself: that updates the
// profile in place (docs/profile.md), read whole before the atomic write.
void check_out_over_inputs(const cxxopts::ParseResult& r) {
  refuse_outputs_over_inputs(given_paths(r, {"out"}),
                             given_paths(r, {"nccl", "layers", "router", "model", "cluster",
                                             "megatron-log", "megatron-script"}));
}

void add_out(cxxopts::Options& o) {
  o.add_options()("out", "the profile file to write (required; written to a temporary and renamed)",
                  cxxopts::value<std::string>())(
      "profile", "start from this profile file: the new measurements are added to it",
      cxxopts::value<std::string>());
}

std::string g(double v, int digits = 4) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

// --- measured runs ----------------------------------------------------------------

struct Predicted {
  double latency_s = 0;
  double peak_bytes = 0;       // the largest stage's memory
  double allocated_bytes = 0;  // the same less the runtime reserve
  PlanReport report;

  double peak_as(const MeasuredRun& run) const {
    return run.peak_is_allocated ? allocated_bytes : peak_bytes;
  }
};

Predicted predict(const Workload& w, const ClusterSpec& c, const Plan& plan,
                  const MeasuredProfile* profile) {
  const ProfileTables t = plan_tables(w, c, plan.parallel, profile);
  const PlanReport rep = CostModel(w, c, t).evaluate(plan);
  Predicted p;
  p.latency_s = rep.latency_s;
  p.report = rep;
  for (const StageReport& s : rep.stages) {
    p.peak_bytes = std::max(p.peak_bytes, s.cost.memory.total());
    p.allocated_bytes = std::max(p.allocated_bytes, s.cost.memory.total() - s.cost.memory.overhead);
  }
  return p;
}

std::string pct(double pred, double meas) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.1f%%", 100.0 * (pred - meas) / meas);
  return buf;
}

// One measured run's inputs, resolved (files next to the CSV first).
struct RunInputs {
  Workload workload;
  ClusterSpec cluster;
  Plan plan;
  std::string model;               // the model file or preset, resolved
  std::vector<std::string> notes;  // what reading the model approximated
};

RunInputs read_run(const MeasuredRun& run, const std::string& csv) {
  const fs::path dir = fs::path(csv).parent_path();
  auto resolve = [&](const std::string& spec) {
    // A file next to the CSV, else the spec as given (a preset).
    const fs::path cand = dir / spec;
    return !dir.empty() && fs::exists(cand) ? cand.string() : spec;
  };
  RunInputs in;
  try {
    in.model = resolve(run.model);
    in.workload = load_workload(in.model, &in.notes);
    TrainingOverrides ov;
    if (run.global_batch > 0) ov.global_batch = run.global_batch;
    if (run.seq_len > 0) ov.seq_len = run.seq_len;
    apply_overrides(ov, in.workload);
    in.cluster = load_cluster(resolve(run.cluster));
    in.plan = load_plan(resolve(run.plan), in.cluster, in.workload.training.micro_batch, 0);
    if (auto e = check_plan(in.plan, in.workload, in.cluster, ConstraintOptions{}); !e.empty())
      throw InputError(run.plan, e);
  } catch (const InputError& e) {
    throw InputError(csv + ":" + std::to_string(run.line),
                     std::string("run '") + run.name + "': " + e.what());
  }
  return in;
}

// A Megatron-LM training log with the script that ran it, as one measured
// run: the script's model and plan on --cluster, the log's median
// iteration time after the first interval and its highest "max
// allocated". The timers the log holds are printed as measured.
struct LogRun {
  MeasuredRun run;
  RunInputs in;
  MegatronLog log;
};

LogRun read_log_run(const cxxopts::ParseResult& r) {
  const std::string path = r["megatron-log"].as<std::string>();
  if (r.count("measurements")) {
    throw InputError("--megatron-log", "give either --measurements or --megatron-log");
  }
  std::shared_ptr<MegatronScript> script = read_megatron_input(r);
  if (!script) {
    throw InputError("--megatron-log",
                     "needs --megatron-script, the script that ran it (its model and plan)");
  }
  LogRun out;
  out.log = parse_megatron_log(read_regular_file(path), path);
  out.in.workload = megatron_input_workload(r, *script);
  out.in.cluster = load_cluster(required(r, "cluster"));
  out.in.plan = megatron_plan(*script, out.in.workload, out.in.cluster);
  out.in.model = script->origin();
  out.in.notes = script->notes;
  for (const MegatronLogInterval& iv : out.log.intervals) {
    if (iv.global_batch && *iv.global_batch != out.in.workload.training.global_batch) {
      throw InputError(path + ":" + std::to_string(iv.line),
                       "global batch size " + std::to_string(*iv.global_batch) +
                           " is not the script's " +
                           std::to_string(out.in.workload.training.global_batch) + " (" +
                           script->origin() + "): the log is of another run");
    }
  }
  out.run.name = fs::path(path).filename().string();
  out.run.latency_s = out.log.seconds_per_iteration();
  if (out.log.peak_allocated_bytes() > 0) out.run.peak_bytes = out.log.peak_allocated_bytes();
  out.run.peak_is_allocated = true;
  return out;
}

// The timers of a run beside the cost model's term for each
// (`predicted`, the plan as priced): measured is the median over the
// logged intervals of each timer's max over ranks.
void print_timers(std::ostream& out, const std::vector<ProfileRun::Timer>& timers,
                  const PlanReport& predicted) {
  if (!timers.empty()) {
    out << "    timer (max over ranks, median)             measured   predicted    error\n";
  }
  for (const ProfileRun::Timer& t : timers) {
    const std::optional<double> model = megatron_timer_term(t.name, predicted);
    char line[200];
    if (model) {
      const std::string error = t.seconds > 0 ? pct(*model, t.seconds) : std::string("-");
      std::snprintf(line, sizeof line, "    %-42s %10s  %10s  %7s\n", t.name.c_str(),
                    format_seconds(t.seconds).c_str(), format_seconds(*model).c_str(),
                    error.c_str());
    } else {
      std::snprintf(line, sizeof line, "    %-42s %10s  %10s\n", t.name.c_str(),
                    format_seconds(t.seconds).c_str(), "(no term)");
    }
    out << line;
  }
}

std::vector<ProfileRun::Timer> log_timers(const MegatronLog& log) {
  std::vector<ProfileRun::Timer> timers;
  for (const auto& [name, seconds] : log.timer_medians()) timers.push_back({name, seconds});
  return timers;
}

// What the log measured besides the iteration time: the intervals used and
// the timers, each beside the cost model's term for it.
void print_log_summary(std::ostream& out, const LogRun& lr, const PlanReport& predicted) {
  const std::vector<MegatronLogInterval>& iv = lr.log.intervals;
  const std::size_t first = iv.size() > 1 ? 1 : 0;
  out << "\n  " << lr.run.name << ": " << iv.size() << " logged intervals (iterations up to "
      << iv.back().iteration << " of " << iv.back().train_iters << "); measured: the median of "
      << (iv.size() - first) << (first ? " (the first, the warm-up, left out)" : "") << "\n";
  print_timers(out, log_timers(lr.log), predicted);
  if (lr.log.theoretical_total_mb) {
    out << "    Megatron's theoretical memory: "
        << format_bytes(*lr.log.theoretical_total_mb * 1024.0 * 1024.0) << "\n";
  }
}

// The documents of a stored run read back; errors name the profile, the
// run and the document.
RunInputs stored_run_inputs(const ProfileRun& run, const std::string& profile) {
  const std::string at = profile + ":/runs['" + run.name + "']";
  RunInputs in;
  in.workload = parse_workload_json(run.workload, at + ".workload", &in.notes);
  in.cluster = parse_cluster_json(run.cluster, at + ".cluster");
  in.plan = parse_plan_json(run.plan, at + ".plan", in.cluster, in.workload.training.micro_batch);
  if (auto e = check_plan(in.plan, in.workload, in.cluster, ConstraintOptions{}); !e.empty()) {
    throw InputError(at + ".plan", e);
  }
  in.model = in.workload.model.name;
  return in;
}

// A logged run as the profile stores it (`profile import --megatron-log`):
// the script's workload, the cluster and the plan as hapmoe's JSON, the
// measured iteration time, each reporting rank's max allocated with its
// pipeline stage (Megatron's default rank order puts PP outermost: stage =
// rank / (TP x CP x DP)) and the timers. The documents are read back and
// priced before anything is stored: they must give the script's figures.
ProfileRun profile_run(const LogRun& lr, const std::string& name, const std::string& log_path) {
  ProfileRun run;
  run.name = name;
  run.source = log_path;
  run.workload = workload_to_json(lr.in.workload);
  run.cluster = cluster_to_json(lr.in.cluster);
  const Predicted direct = predict(lr.in.workload, lr.in.cluster, lr.in.plan, nullptr);
  run.plan = plan_report_json(direct.report, lr.in.cluster).dump(2) + "\n";
  run.latency_s = lr.run.latency_s;
  const int world = lr.in.plan.parallel.devices();
  const int per_stage = lr.in.plan.parallel.stage_devices();
  for (const MegatronLogMemory& m : lr.log.memory) {
    if (m.rank >= world) {
      throw InputError(log_path + ":" + std::to_string(m.line),
                       "rank " + std::to_string(m.rank) +
                           " reports its memory, but the script's "
                           "plan has " +
                           std::to_string(world) + " ranks: the log is of another run");
    }
    const double bytes = m.max_allocated_mb * 1024.0 * 1024.0;
    auto it = std::find_if(run.peaks.begin(), run.peaks.end(),
                           [&](const ProfileRun::StagePeak& k) { return k.rank == m.rank; });
    if (it == run.peaks.end()) {
      run.peaks.push_back({m.rank, m.rank / per_stage, bytes});
    } else {
      it->max_allocated_bytes = std::max(it->max_allocated_bytes, bytes);
    }
  }
  run.timers = log_timers(lr.log);
  const RunInputs back = stored_run_inputs(run, "(stored run)");
  const Predicted again = predict(back.workload, back.cluster, back.plan, nullptr);
  if (std::abs(again.latency_s - direct.latency_s) > 1e-9 * direct.latency_s ||
      std::abs(again.peak_bytes - direct.peak_bytes) > 1e-9 * direct.peak_bytes) {
    throw InputError(log_path, "the run's documents price it at " +
                                   format_seconds(again.latency_s) + ", the script at " +
                                   format_seconds(direct.latency_s) +
                                   ": not stored (a hapmoe bug: please report it)");
  }
  return run;
}

// A stored run as a measured run of `profile check`.
MeasuredRun measured_run(const ProfileRun& r) {
  MeasuredRun m;
  m.name = r.name;
  m.latency_s = r.latency_s;
  m.peak_is_allocated = true;
  for (const ProfileRun::StagePeak& k : r.peaks) {
    m.peak_bytes = is_set(m.peak_bytes) ? std::max(m.peak_bytes, k.max_allocated_bytes)
                                        : k.max_allocated_bytes;
  }
  return m;
}

// --- import --------------------------------------------------------------------

// The nccl-tests options of `profile import`, each unset when not given.
struct NcclOptions {
  std::optional<std::string> test;  // --primitive as given
  std::optional<Primitive> prim;
  std::optional<LinkKind> link;
  std::vector<std::string> devices;  // --device [, --device-b]
  std::optional<int> world;
  bool in_place = false;
};

NcclOptions nccl_options(const cxxopts::ParseResult& r) {
  NcclOptions o;
  if (r.count("primitive")) {
    o.test = r["primitive"].as<std::string>();
    o.prim = nccl_test_primitive(*o.test, "--primitive");
  }
  if (r.count("link")) o.link = parse_link_kind(r["link"].as<std::string>(), "--link");
  // The rule of a device type in the profile file (validate_profile).
  for (const char* option : {"device", "device-b"}) {
    if (r.count(option) == 0) continue;
    if (std::string e = check_name("device type", r[option].as<std::string>()); !e.empty()) {
      throw InputError(std::string("--") + option, e);
    }
  }
  if (r.count("device")) o.devices.push_back(r["device"].as<std::string>());
  if (r.count("device-b")) {
    if (o.devices.empty()) throw InputError("--device-b", "give --device too");
    if (o.link && *o.link != LinkKind::kCrossType) {
      throw InputError("--device-b", "only for --link cross-type");
    }
    o.devices.push_back(r["device-b"].as<std::string>());
    if (to_lower(o.devices[0]) == to_lower(o.devices[1])) {
      throw InputError("--device-b", "a cross-type link needs two device types");
    }
  }
  if (r.count("world")) {
    o.world = static_cast<int>(parse_int_text(r["world"].as<std::string>(), 1, 1 << 20, "--world"));
  }
  o.in_place = r.count("in-place") > 0;
  return o;
}

std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

std::string quoted(const std::vector<std::string>& v) {
  std::vector<std::string> q;
  q.reserve(v.size());
  for (const std::string& x : v) q.push_back("'" + x + "'");
  return join(q);
}

// What one table of a log measured, and where each part came from.
struct TableKey {
  Primitive prim = Primitive::kAllReduce;
  LinkKind link = LinkKind::kIntraNode;
  std::string a, b;
  int world = 2;
  std::string test_src, device_src, world_src, link_src;
};

// The device types of one table: the catalog names of its Rank lines'
// devices, else the options; a catalog device type in the options that
// the log contradicts is an error naming both.
// Returns how many device types the log itself shows (0: it does not tell).
std::size_t resolve_devices(const NcclLog& log, const NcclOptions& o, const std::string& where,
                            TableKey& key, std::vector<std::string>& types) {
  std::vector<std::string> mapped, unmapped;
  for (const std::string& d : log.devices) {
    const std::string c = catalog_device_name(d);
    if (c.empty()) {
      unmapped.push_back(d);
    } else if (std::find(mapped.begin(), mapped.end(), c) == mapped.end()) {
      mapped.push_back(c);
    }
  }
  if (mapped.size() > 2) {
    throw InputError(
        where, "the table's Rank lines show more than two device types: " + quoted(log.devices));
  }
  const std::string shown_devices = "the log's Rank lines show " + quoted(log.devices);
  if (!unmapped.empty() || mapped.empty()) {
    // The log does not tell: the options do.
    if (o.devices.empty()) {
      throw InputError(where, log.devices.empty()
                                  ? "the log prints no '# Rank ... device' lines for this table: "
                                    "give --device"
                                  : shown_devices + ", not a catalog device type: give --device");
    }
    types = o.devices;
    key.device_src =
        log.devices.empty() ? "--device" : "--device; " + shown_devices + ", not in the catalog";
    return 0;
  }
  if (o.devices.empty()) {
    types = mapped;
    key.device_src = "log: " + quoted(log.devices);
    return mapped.size();
  }
  const char* names[] = {"--device", "--device-b"};
  if (o.devices.size() != mapped.size()) {
    throw InputError(
        where, std::string(o.devices.size() == 1 ? "--device " : "--device/--device-b ") +
                   join(o.devices, "/") + ", but " + shown_devices + " (" + join(mapped, "/") +
                   ")");
  }
  bool custom = false;
  for (std::size_t k = 0; k < o.devices.size(); ++k) {
    const DeviceSpec* d = find_device(o.devices[k]);
    if (d == nullptr) {
      custom = true;  // a device type of the user's cluster file: the log cannot contradict it
      continue;
    }
    if (std::find(mapped.begin(), mapped.end(), d->name) == mapped.end()) {
      throw InputError(where, std::string(names[k]) + " " + o.devices[k] + ", but " +
                                  shown_devices + " (" + join(mapped, "/") + ")");
    }
  }
  types = o.devices;
  key.device_src = custom ? "--device (outside the catalog); " + shown_devices
                          : "--device, as the log: " + quoted(log.devices);
  return mapped.size();
}

// Resolves one table against the options (docs/profile.md, "profile
// import"): whatever the log says, with the options for what it does not;
// a log and an option that disagree is an error naming both.
TableKey resolve_table(const NcclLog& log, const NcclOptions& o, const std::string& where) {
  TableKey key;
  if (!log.test.empty()) {
    key.prim = nccl_test_primitive(log.test, where);
    if (o.prim && *o.prim != key.prim) {
      throw InputError(
          where, "--primitive " + *o.test + ", but the log names " + log.test + " for this table");
    }
    key.test_src = log.test + " (log)";
  } else if (o.prim) {
    key.prim = *o.prim;
    key.test_src = *o.test + " (--primitive)";
  } else {
    throw InputError(where, "the log does not name the test of this table: give --primitive");
  }
  std::vector<std::string> types;
  const std::size_t log_types = resolve_devices(log, o, where, key, types);
  // The link: two device types are a cross-type link, else one node is
  // intra-node and more are inter-node. --device-b means cross-type.
  std::optional<LinkKind> from_log;
  std::string why;
  if (log_types == 2) {
    from_log = LinkKind::kCrossType;
    why = "two device types";
  } else if (log.nodes == 1) {
    from_log = LinkKind::kIntraNode;
    why = "1 node";
  } else if (log.nodes > 1) {
    from_log = LinkKind::kInterNode;
    why = std::to_string(log.nodes) + " nodes";
  }
  std::optional<LinkKind> given = o.link;
  std::string given_src = "--link";
  if (!given && o.devices.size() == 2) {
    given = LinkKind::kCrossType;
    given_src = "--device-b";
  }
  if (given && from_log && *given != *from_log) {
    throw InputError(where, given_src + " " + to_string(*given) +
                                ", but the log's Rank lines show " + why + " (" +
                                to_string(*from_log) + ")");
  }
  if (given) {
    key.link = *given;
    key.link_src = from_log ? given_src + ", as the log: " + why : given_src;
  } else if (from_log) {
    key.link = *from_log;
    key.link_src = "log: " + why;
  } else {
    throw InputError(where,
                     "the log prints no '# Rank ... on HOST' lines for this table: give --link");
  }
  if (key.link == LinkKind::kCrossType && types.size() < 2) {
    throw InputError("--device-b", "--link cross-type needs the other device type");
  }
  if (key.link != LinkKind::kCrossType && types.size() == 2) {
    throw InputError("--device-b", "only for --link cross-type");
  }
  key.a = types[0];
  key.b = types.size() == 2 ? types[1] : types[0];
  // The world.
  if (o.world && log.ranks > 0 && *o.world != log.ranks) {
    throw InputError(where, "--world " + std::to_string(*o.world) +
                                ", but the log's Rank lines show " + std::to_string(log.ranks) +
                                " ranks");
  }
  key.world = o.world ? *o.world : log.ranks;
  key.world_src = !o.world ? "log: Rank lines" : log.ranks > 0 ? "--world, as the log" : "--world";
  if (key.world < 2 && key.prim != Primitive::kP2P) {
    throw InputError(
        where,
        o.world ? "--world " + std::to_string(*o.world) + ": a collective needs at least 2 ranks"
        : log.ranks == 0 ? std::string("the log prints no '# Rank ... device' lines for "
                                       "this table: give --world")
                         : "the log's Rank lines show 1 rank: a collective needs at least 2");
  }
  if (key.world < 2) {
    key.world = 2;
    key.world_src = "a pair";
  }
  return key;
}

// Imports every table of the --nccl log into `add`, saying for each what
// it measured and where that came from, and which plan terms the imported
// primitives affect.
void import_nccl(const cxxopts::ParseResult& r, MeasuredProfile& add, std::ostream& out) {
  const NcclOptions o = nccl_options(r);
  const std::string path = r["nccl"].as<std::string>();
  const auto logs = parse_nccl_tests_logs(read_regular_file(path), path, o.in_place);
  std::vector<Primitive> prims;
  std::map<std::tuple<int, int, std::string, std::string, int>, std::size_t> first_of;
  // Every table is resolved before anything is printed: an error in one
  // leaves no "imported" line behind.
  std::vector<std::optional<TableKey>> keys;
  for (const NcclLog& log : logs) {
    if (!log.test.empty() && nccl_test_unused(log.test)) {
      keys.emplace_back();
    } else {
      keys.emplace_back(resolve_table(log, o, path + ":" + std::to_string(log.header_line)));
    }
  }
  if (std::none_of(keys.begin(), keys.end(), [](const auto& k) { return k.has_value(); })) {
    throw InputError(path,
                     "no table of a test the cost model uses (all_reduce_perf, "
                     "all_gather_perf, reduce_scatter_perf, alltoall_perf, sendrecv_perf)");
  }
  for (std::size_t k = 0; k < logs.size(); ++k) {
    const NcclLog& log = logs[k];
    const std::string table = "table " + std::to_string(k + 1) + " of " +
                              std::to_string(logs.size()) + " (line " +
                              std::to_string(log.header_line) + ")";
    if (!keys[k]) {
      out << "skipped " << path << ", " << table << ": " << log.test
          << " measures a collective the cost model does not use\n";
      continue;
    }
    const TableKey& key = *keys[k];
    for (const NcclRow& row : log.rows) {
      add.comm.push_back({key.prim, key.link, key.a, key.b, key.world, row.bytes, row.seconds});
    }
    out << "imported " << log.rows.size() << " " << to_string(key.prim) << " points ("
        << g(log.rows.front().bytes) << " .. " << g(log.rows.back().bytes) << " bytes, world "
        << key.world << ") for " << to_string(key.link) << " " << key.a
        << (key.link == LinkKind::kCrossType ? "/" + key.b : "") << " from " << path << ", "
        << table << "\n";
    out << "  test " << key.test_src << ", device " << key.a
        << (key.link == LinkKind::kCrossType ? "/" + key.b : "") << " (" << key.device_src
        << "), world " << key.world << " (" << key.world_src << "), " << to_string(key.link) << " ("
        << key.link_src << ")" << (log.in_place ? ", in-place times" : "")
        << (log.in_place && !o.in_place ? " (the table has no out-of-place columns)" : "") << "\n";
    const auto id = std::make_tuple(static_cast<int>(key.prim), static_cast<int>(key.link),
                                    to_lower(key.a), to_lower(key.b), key.world);
    if (const auto [it, fresh] = first_of.emplace(id, k); !fresh) {
      out << "note: tables " << it->second + 1 << " and " << k + 1 << " both measure "
          << to_string(key.prim) << " " << to_string(key.link) << " " << key.a << " world "
          << key.world << ": the cost model takes the median of their times at each size\n";
    }
    if (std::find(prims.begin(), prims.end(), key.prim) == prims.end()) prims.push_back(key.prim);
  }
  for (const Primitive p : prims) out << "note: " << primitive_plan_terms(p) << ".\n";
}

// Stores the --megatron-log run in `add`, saying what was measured and
// whether it replaces a run of `base` of the same name.
void import_megatron_log(const cxxopts::ParseResult& r, const MeasuredProfile& base,
                         MeasuredProfile& add, std::ostream& out) {
  const std::string path = r["megatron-log"].as<std::string>();
  const LogRun lr = read_log_run(r);
  const std::string name = r.count("name") ? r["name"].as<std::string>() : lr.run.name;
  if (std::string e = check_name("--name", name); !e.empty()) throw InputError("--name", e);
  const ProfileRun run = profile_run(lr, name, path);
  const std::vector<MegatronLogInterval>& iv = lr.log.intervals;
  const std::size_t first = iv.size() > 1 ? 1 : 0;
  const ParallelConfig& pi = lr.in.plan.parallel;
  out << "imported run '" << name << "' from " << path << ": the plan of " << lr.in.model << " (PP "
      << pi.pp << " TP " << pi.tp << " CP " << pi.cp << " DP " << pi.dp << " EP " << pi.ep
      << " micro-batch " << pi.micro_batch << ")\n";
  out << "  iteration " << format_seconds(run.latency_s) << " (median of " << iv.size() - first
      << " logged interval" << (iv.size() - first == 1 ? "" : "s")
      << (first ? "; the first, the warm-up, left out" : "") << "), " << run.peaks.size() << " rank"
      << (run.peaks.size() == 1 ? "" : "s") << " with memory reports, " << run.timers.size()
      << " timer" << (run.timers.size() == 1 ? "" : "s") << "\n";
  if (std::any_of(base.runs.begin(), base.runs.end(),
                  [&](const ProfileRun& x) { return x.name == name; })) {
    out << "note: replaces the profile's run '" << name << "'\n";
  }
  for (const std::string& n : lr.in.notes) out << "note: " << lr.in.model << ": " << n << "\n";
  add.runs.push_back(run);
}

int cmd_import(int argc, const char* const* argv, std::ostream& out) {
  cxxopts::Options o(
      "hapmoe profile import",
      "Reads nccl-tests / rccl-tests logs (all_reduce_perf, all_gather_perf, "
      "reduce_scatter_perf, alltoall_perf, sendrecv_perf; every result table of the log, as "
      "its own measurement) and/or a CSV of measured dense-layer timings into a profile file. "
      "The test, device type, ranks and link of each table come from the log where it prints "
      "them (\"# Collective test starting\" or the command line, \"# Rank N ... on HOST device "
      "D ... NAME\" lines); the options below fill in what it does not, and an option the log "
      "contradicts is an error. It says which plan terms each imported primitive affects "
      "(docs/profile.md, \"Which tests to run\").");
  add_out(o);
  o.add_options("nccl-tests log")("nccl", "the log file (one job's output, as it is)",
                                  cxxopts::value<std::string>())(
      "primitive",
      "the test of the tables the log does not name: all_reduce_perf, all_gather_perf, "
      "reduce_scatter_perf, alltoall_perf or sendrecv_perf (or all-reduce ... p2p)",
      cxxopts::value<std::string>())(
      "device",
      "device type of the ranks (e.g. H800); default: the catalog type of the log's Rank lines",
      cxxopts::value<std::string>())("device-b", "cross-type link: the other device type",
                                     cxxopts::value<std::string>())(
      "link",
      "intra-node, inter-node or cross-type; default: from the log's Rank lines (one host: "
      "intra-node, more: inter-node, two device types: cross-type)",
      cxxopts::value<std::string>())(
      "world", "ranks of the test; default: the log's '# Rank N ... device' lines",
      cxxopts::value<std::string>())("in-place", "use the in-place time column");
  o.add_options("Layer timings")(
      "layers",
      "CSV: device,tp,cp,micro_batch,forward_ms,backward_ms[,ffn_forward_ms,...]; its dense "
      "layers fill the compute table (MoE layers are for `profile fit`)",
      cxxopts::value<std::string>());
  o.add_options("Megatron-LM training log")(
      "megatron-log",
      "a training log of --megatron-script on --cluster (elapsed time per iteration, timers, "
      "memory reports), stored as a measured run for `profile check` and `profile fit --runs`",
      cxxopts::value<std::string>())("cluster", "the cluster the logged run ran on",
                                     cxxopts::value<std::string>())(
      "name",
      "the stored run's name (default: the log's file name); a run of that name is replaced",
      cxxopts::value<std::string>());
  add_megatron_options(o);
  const auto parsed = parse(o, argc, argv, out);
  if (!parsed) return kExitOk;
  const auto& r = *parsed;
  const std::string target = required(r, "out");
  check_out_over_inputs(r);
  check_archive_path(target);
  if (r.count("nccl") == 0 && r.count("layers") == 0 && r.count("megatron-log") == 0) {
    throw InputError("--nccl", "give --nccl LOG, --layers CSV and/or --megatron-log LOG");
  }
  MeasuredProfile p = base_profile(r);
  MeasuredProfile add;
  if (r.count("nccl")) import_nccl(r, add, out);
  if (r.count("megatron-log")) import_megatron_log(r, p, add, out);
  if (r.count("layers")) {
    const std::string path = r["layers"].as<std::string>();
    const auto rows = parse_layer_csv(read_regular_file(path), path);
    int dense = 0;
    for (const LayerSample& s : rows) {
      if (s.moe) continue;
      add.compute.push_back(
          {s.device, s.tp, s.cp, s.micro_batch, s.fwd_s, s.bwd_s, s.ffn_fwd_s, s.ffn_bwd_s});
      ++dense;
    }
    out << "imported " << dense << " dense-layer timings from " << path;
    if (dense < static_cast<int>(rows.size())) {
      out << " (" << rows.size() - static_cast<std::size_t>(dense)
          << " MoE rows left for `profile fit`)";
    }
    out << "\n";
  }
  p.merge(add);
  write_profile_file(target, p);
  out << "wrote " << target << ": " << p.comm.size() << " communication points, "
      << p.compute.size() << " compute entries, " << p.devices.size() << " device calibrations, "
      << p.models.size() << " model calibrations, " << p.runs.size() << " measured run"
      << (p.runs.size() == 1 ? "" : "s") << "\n";
  return kExitOk;
}

// --- comm -------------------------------------------------------------------------

// Least-squares non-decreasing fit (pool adjacent violators): the noise
// handling of `profile comm` (docs/profile.md). Returns how many values
// changed.
int make_non_decreasing(std::vector<double>& v) {
  std::vector<double> sum;
  std::vector<int> count;
  for (double x : v) {
    sum.push_back(x);
    count.push_back(1);
    while (sum.size() > 1 &&
           sum[sum.size() - 2] / count[count.size() - 2] > sum.back() / count.back()) {
      sum[sum.size() - 2] += sum.back();
      count[count.size() - 2] += count.back();
      sum.pop_back();
      count.pop_back();
    }
  }
  int changed = 0;
  std::size_t k = 0;
  for (std::size_t b = 0; b < sum.size(); ++b) {
    const double mean = sum[b] / count[b];
    for (int i = 0; i < count[b]; ++i, ++k) {
      if (v[k] != mean) ++changed;
      v[k] = mean;
    }
  }
  return changed;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double parse_bytes(const std::string& text, const std::string& where) {
  std::string t = text;
  double mult = 1;
  if (!t.empty()) {
    const char u = static_cast<char>(std::toupper(static_cast<unsigned char>(t.back())));
    if (u == 'K' || u == 'M' || u == 'G') {
      mult = u == 'K' ? 1024.0 : u == 'M' ? 1024.0 * 1024 : 1024.0 * 1024 * 1024;
      t.pop_back();
    }
  }
  return parse_number_text(t, 1, 1e12, where) * mult;
}

// What `profile comm` measures: its options, read on every rank.
struct CommOptions {
  std::string target;  // --out
  double min_b = 1024;
  double max_b = 64.0 * 1024 * 1024;
  double factor = 4;
  int warmup = 5;
  int reps = 20;
  std::vector<Primitive> prims;
  std::string label = "host";  // this rank's device type
};

cxxopts::Options comm_options() {
  cxxopts::Options o(
      "hapmoe profile comm",
      "Times all-reduce, all-gather, reduce-scatter, all-to-all and p2p with MPI over message "
      "sizes and group shapes (inside a node, across nodes, across device types) and writes the "
      "medians as the primitive table. Run it under mpiexec on the real machines; label each rank "
      "with its device type (--device-type or HAPMOE_DEVICE_TYPE).");
  add_out(o);
  o.add_options("Measurement")("device-type",
                               "this rank's device type (default: $HAPMOE_DEVICE_TYPE, else "
                               "the first pool of --cluster, else 'host')",
                               cxxopts::value<std::string>())(
      "cluster", "a cluster spec whose first pool names the device type",
      cxxopts::value<std::string>())("min-bytes", "smallest message (default 1K)",
                                     cxxopts::value<std::string>())(
      "max-bytes", "largest message (default 64M)", cxxopts::value<std::string>())(
      "factor", "size step factor (default 4)", cxxopts::value<std::string>())(
      "warmup", "untimed runs per point (default 5)", cxxopts::value<std::string>())(
      "reps", "timed runs per point, the median is kept (default 20)",
      cxxopts::value<std::string>())(
      "primitives", "comma list (default all): all-reduce,all-gather,reduce-scatter,all-to-all,p2p",
      cxxopts::value<std::string>());
  return o;
}

CommOptions read_comm_options(const cxxopts::ParseResult& r, const Comm& comm) {
  CommOptions c;
  c.target = required(r, "out");
  if (comm.rank() == 0) check_archive_path(c.target);
  if (r.count("min-bytes")) c.min_b = parse_bytes(r["min-bytes"].as<std::string>(), "--min-bytes");
  if (r.count("max-bytes")) c.max_b = parse_bytes(r["max-bytes"].as<std::string>(), "--max-bytes");
  if (c.max_b < c.min_b) throw InputError("--max-bytes", "is below --min-bytes");
  if (r.count("factor"))
    c.factor = parse_number_text(r["factor"].as<std::string>(), 1.1, 1024, "--factor");
  if (r.count("warmup")) {
    c.warmup =
        static_cast<int>(parse_int_text(r["warmup"].as<std::string>(), 0, 100000, "--warmup"));
  }
  if (r.count("reps")) {
    c.reps = static_cast<int>(parse_int_text(r["reps"].as<std::string>(), 1, 100000, "--reps"));
  }
  if (r.count("primitives")) {
    std::string list = r["primitives"].as<std::string>();
    std::size_t start = 0;
    while (start <= list.size()) {
      const std::size_t k = list.find(',', start);
      const std::string one =
          list.substr(start, k == std::string::npos ? std::string::npos : k - start);
      c.prims.push_back(parse_primitive(one, "--primitives"));
      if (k == std::string::npos) break;
      start = k + 1;
    }
  } else {
    for (int k = 0; k < kNumPrimitives; ++k) c.prims.push_back(static_cast<Primitive>(k));
  }
  if (r.count("device-type")) {
    c.label = r["device-type"].as<std::string>();
  } else if (const char* env = std::getenv("HAPMOE_DEVICE_TYPE"); env != nullptr && *env) {
    c.label = env;
  } else if (r.count("cluster")) {
    c.label = load_cluster(r["cluster"].as<std::string>()).pools.front().device.name;
  }
  return c;
}

// A group of ranks to time: its link kind, its device types and its
// members in order.
struct Shape {
  LinkKind link;
  std::string a, b;
  std::vector<int> members;
};

// The groups to time, from every rank's device type and node (in rank
// order): per type, the ranks on the first node that has two of it and the
// first rank of it on each node; per pair of types, ranks of each
// alternating. `types` gets the device types in order of first rank.
std::vector<Shape> group_shapes(const std::vector<std::string>& labels,
                                const std::vector<int>& node, std::vector<std::string>& types) {
  for (const auto& l : labels) {
    if (std::find(types.begin(), types.end(), l) == types.end()) types.push_back(l);
  }
  std::vector<Shape> shapes;
  for (const std::string& t : types) {
    // Inside a node: the ranks of type t on the first node that has two.
    std::map<int, std::vector<int>> by_node;
    for (std::size_t i = 0; i < labels.size(); ++i) {
      if (labels[i] == t) by_node[node[i]].push_back(static_cast<int>(i));
    }
    for (const auto& [n, ranks] : by_node) {
      if (ranks.size() >= 2) {
        shapes.push_back({LinkKind::kIntraNode, t, t, ranks});
        break;
      }
    }
    // Across nodes: the first rank of type t on each node.
    if (by_node.size() >= 2) {
      std::vector<int> firsts;
      firsts.reserve(by_node.size());
      for (const auto& [n, ranks] : by_node) firsts.push_back(ranks.front());
      shapes.push_back({LinkKind::kInterNode, t, t, firsts});
    }
  }
  for (std::size_t i = 0; i < types.size(); ++i) {
    for (std::size_t j = i + 1; j < types.size(); ++j) {
      std::vector<int> ra, rb, both;
      for (std::size_t k = 0; k < labels.size(); ++k) {
        if (labels[k] == types[i]) ra.push_back(static_cast<int>(k));
        if (labels[k] == types[j]) rb.push_back(static_cast<int>(k));
      }
      const std::size_t m = std::min(ra.size(), rb.size());
      for (std::size_t k = 0; k < m; ++k) {
        both.push_back(ra[k]);
        both.push_back(rb[k]);
      }
      shapes.push_back({LinkKind::kCrossType, types[i], types[j], both});
    }
  }
  return shapes;
}

// The medians of every (shape, primitive, world, size), made non-decreasing
// in size; `points` and `adjusted` count what was kept and what the fit
// changed. Collective.
MeasuredProfile time_shapes(const std::vector<Shape>& shapes, const std::vector<double>& sizes,
                            const CommOptions& c, Comm& comm, int& points, int& adjusted) {
  MeasuredProfile add;
  for (const Shape& s : shapes) {
    // Worlds: 2, 4, 8, ... and the whole group.
    std::vector<int> worlds;
    for (int w = 2; w < static_cast<int>(s.members.size()); w *= 2) worlds.push_back(w);
    worlds.push_back(static_cast<int>(s.members.size()));
    for (const Primitive prim : c.prims) {
      for (const int w : prim == Primitive::kP2P ? std::vector<int>{2} : worlds) {
        // Cross-type p2p: one rank of each type (members alternate a, b).
        int color = -1;
        for (int k = 0; k < w; ++k) {
          if (s.members[static_cast<std::size_t>(k)] == comm.rank()) color = 0;
        }
        std::vector<double> medians;
        for (const double bytes : sizes) {
          const std::vector<double> t =
              comm.time_collective(prim, static_cast<std::size_t>(bytes), color, c.warmup, c.reps);
          // The group's first member reports its median to everyone.
          const std::string mine =
              comm.rank() == s.members.front() && !t.empty() ? g(median(t), 17) : "";
          const std::string got = first_error(comm, mine);
          medians.push_back(std::strtod(got.c_str(), nullptr));
        }
        adjusted += make_non_decreasing(medians);
        for (std::size_t k = 0; k < sizes.size(); ++k) {
          add.comm.push_back({prim, s.link, s.a, s.b, w, sizes[k], std::max(medians[k], 1e-9)});
          ++points;
        }
      }
    }
  }
  return add;
}

void print_comm_summary(std::ostream& out, std::ostream& err, const Comm& comm,
                        const std::vector<std::string>& types, const std::vector<Shape>& shapes,
                        const std::vector<double>& sizes, const CommOptions& c, int points,
                        int adjusted) {
  out << "profile comm: " << comm.size() << " ranks on " << comm.nodes() << " node"
      << (comm.nodes() == 1 ? "" : "s") << ", device types";
  for (const auto& t : types) out << " " << t;
  out << "\n";
  for (const Shape& s : shapes) {
    out << "  " << to_string(s.link) << " " << s.a
        << (s.link == LinkKind::kCrossType ? "/" + s.b : "") << ": " << s.members.size()
        << " ranks\n";
  }
  out << "  " << points << " points (" << sizes.size() << " sizes " << g(sizes.front()) << ".."
      << g(sizes.back()) << " B, median of " << c.reps << " after " << c.warmup << " warm-up), "
      << adjusted << " medians raised or lowered to keep time non-decreasing in size\n";
  if (shapes.empty()) {
    err << "hapmoe profile comm: no group of two ranks of one type or of two types\n";
  }
}

int cmd_comm(int argc, const char* const* argv, std::ostream& out, std::ostream& err, Comm& comm) {
  cxxopts::Options o = comm_options();
  const auto parsed = parse(o, argc, argv, out);
  if (!parsed) return kExitOk;
  const auto& r = *parsed;
  CommOptions c;
  MeasuredProfile p;
  read_on_every_rank(comm, [&] {
    c = read_comm_options(r, comm);
    if (comm.rank() == 0) p = base_profile(r);
  });
  if (comm.size() < 2) {
    throw InputError("profile comm", "needs at least 2 MPI ranks (run it under mpiexec -n N)");
  }
  std::vector<double> sizes;
  for (double b = c.min_b; b <= c.max_b * (1 + 1e-9); b *= c.factor) sizes.push_back(std::floor(b));
  // Every rank's device type and node, in rank order.
  const std::vector<std::string> labels = comm.allgather(c.label);
  const std::vector<std::string> nodes_s = comm.allgather(std::to_string(comm.node()));
  std::vector<int> node(labels.size());
  for (std::size_t i = 0; i < labels.size(); ++i) node[i] = std::atoi(nodes_s[i].c_str());
  std::vector<std::string> types;
  const std::vector<Shape> shapes = group_shapes(labels, node, types);
  int adjusted = 0, points = 0;
  const MeasuredProfile add = time_shapes(shapes, sizes, c, comm, points, adjusted);
  if (comm.rank() == 0) {
    print_comm_summary(out, err, comm, types, shapes, sizes, c, points, adjusted);
  }
  write_on_root(comm, "--out", c.target, [&] {
    p.merge(add);
    write_profile_file(c.target, p);
    out << "wrote " << c.target << "\n";
  });
  return kExitOk;
}

// --- fit ----------------------------------------------------------------------------

Workload fit_workload(const cxxopts::ParseResult& r, std::vector<std::string>& notes) {
  Workload w = load_workload(required(r, "model"), &notes);
  TrainingOverrides ov;
  if (r.count("seq-len")) {
    ov.seq_len =
        static_cast<int>(parse_int_text(r["seq-len"].as<std::string>(), 1, 1 << 22, "--seq-len"));
  }
  if (r.count("gamma")) ov.gamma = parse_number_text(r["gamma"].as<std::string>(), 0, 1, "--gamma");
  if (r.count("imbalance")) {
    ov.imbalance = parse_number_text(r["imbalance"].as<std::string>(), 1, 1000, "--imbalance");
  }
  apply_overrides(ov, w);
  return w;
}

// The fitted values with their residuals.
void print_fits(std::ostream& out, const std::vector<FitValue>& fits) {
  out << "fit (least squares; residual = measured - fitted)\n";
  out << "  value             device/model        fitted   samples  rms residual   max |rel|\n";
  for (const FitValue& f : fits) {
    std::string v = is_set(f.value) ? g(f.value) : "-";
    std::string rms = f.unit == "bytes" ? format_bytes(f.rms_residual)
                      : f.unit == "s"   ? format_seconds(f.rms_residual)
                                        : g(f.rms_residual, 3);
    if (f.name == "overhead" && is_set(f.value)) v = format_bytes(f.value);
    char line[200];
    std::snprintf(line, sizeof line, "  %-17s %-18s %9s %9d %13s %10.1f%%", f.name.c_str(),
                  f.device.c_str(), v.c_str(), f.samples, rms.c_str(), 100.0 * f.max_rel_residual);
    out << line << (f.note.empty() ? "" : "  (" + f.note + ")") << "\n";
  }
}

// `profile fit --runs`: the stored training runs of --profile.
int fit_from_runs(const cxxopts::ParseResult& r, const std::string& target, std::ostream& out) {
  for (const char* other :
       {"layers", "router", "model", "cluster", "imbalance", "seq-len", "gamma"}) {
    if (r.count(other)) {
      throw InputError(std::string("--") + other,
                       "not with --runs (each stored run carries its model, cluster and plan)");
    }
  }
  if (r.count("profile") == 0) {
    throw InputError("--runs", "needs --profile, the profile the runs are stored in");
  }
  const std::string source = r["profile"].as<std::string>();
  MeasuredProfile p = read_profile(source);
  if (p.runs.empty()) {
    throw InputError("--profile " + source,
                     "stores no training runs (profile import --megatron-log stores them)");
  }
  std::vector<FitRun> runs;
  for (const ProfileRun& run : p.runs) {
    RunInputs in = stored_run_inputs(run, source);
    runs.push_back({run.name, std::move(in.workload), std::move(in.cluster), std::move(in.plan),
                    run.latency_s, run.peaks});
  }
  const std::vector<FitValue> fits = fit_runs(runs, p);
  check_profile_to_write(target, p);
  out << "fit from " << runs.size() << " training run" << (runs.size() == 1 ? "" : "s") << " of "
      << source << " (eta: residuals are iteration times; activation_scale: max "
      << "allocated less the predicted parameter state)\n";
  print_fits(out, fits);
  write_profile_file(target, p);
  out << "wrote " << target << "\n";
  return kExitOk;
}

int cmd_fit(int argc, const char* const* argv, std::ostream& out) {
  cxxopts::Options o("hapmoe profile fit",
                     "Fits eta_h, the router coefficient, the memory calibration (activation "
                     "scale, overhead) per device type and the router imbalance rho of the model "
                     "by least squares, prints the residuals and stores the values in the "
                     "profile (docs/profile.md, \"Fit\").");
  add_out(o);
  o.add_options("Inputs")("model", "the model (preset, config.json or hapmoe JSON)",
                          cxxopts::value<std::string>())(
      "cluster", "a cluster with the measured device types", cxxopts::value<std::string>())(
      "layers", "layer timings CSV (dense and moe rows; router_ms, peak_memory_gib optional)",
      cxxopts::value<std::string>())("router",
                                     "router statistics CSV: iteration,layer,expert,tokens",
                                     cxxopts::value<std::string>())(
      "seq-len", "sequence length of the measurements", cxxopts::value<std::string>())(
      "gamma", "gamma of the imbalance term (default the model's)", cxxopts::value<std::string>())(
      "imbalance", "rho during the layer measurements when no --router is given",
      cxxopts::value<std::string>());
  o.add_options("Training runs")(
      "runs",
      "instead of --layers/--router: fit the activation scale and eta per device type from the "
      "training runs stored in --profile (profile import --megatron-log); --model and --cluster "
      "are not needed, each run carries its own");
  const auto parsed = parse(o, argc, argv, out);
  if (!parsed) return kExitOk;
  const auto& r = *parsed;
  const std::string target = required(r, "out");
  check_out_over_inputs(r);
  check_archive_path(target);
  if (r.count("runs")) return fit_from_runs(r, target, out);
  std::vector<std::string> model_notes;
  Workload w = fit_workload(r, model_notes);
  const ClusterSpec cluster = load_cluster(required(r, "cluster"));
  if (r.count("layers") == 0 && r.count("router") == 0) {
    throw InputError("--layers", "give --layers CSV and/or --router CSV");
  }
  MeasuredProfile p = base_profile(r);
  std::vector<FitValue> fits;
  if (r.count("router")) {
    const std::string path = r["router"].as<std::string>();
    const FitValue f =
        fit_imbalance(parse_router_csv(read_regular_file(path), path), w.model.name, p);
    if (is_set(f.value)) w.training.imbalance = f.value;
    fits.push_back(f);
  } else if (const double rho = profile_imbalance(p, w.model.name);
             is_set(rho) && !r.count("imbalance")) {
    w.training.imbalance = rho;
  }
  if (r.count("layers")) {
    const std::string path = r["layers"].as<std::string>();
    const auto rows = parse_layer_csv(read_regular_file(path), path);
    for (const LayerSample& s : rows) {
      if (s.moe) continue;
      p.compute.push_back(
          {s.device, s.tp, s.cp, s.micro_batch, s.fwd_s, s.bwd_s, s.ffn_fwd_s, s.ffn_bwd_s});
    }
    for (const LayerSample& s : rows) {
      bool known = false;
      for (const DevicePool& pool : cluster.pools)
        known = known || to_lower(pool.device.name) == to_lower(s.device);
      if (!known) {
        throw InputError(path + ":" + std::to_string(s.line),
                         "device '" + s.device + "' is not in --cluster");
      }
      if (s.moe && !w.model.is_moe()) {
        throw InputError(path + ":" + std::to_string(s.line),
                         "a moe layer, but " + w.model.name + " is dense");
      }
      if (s.moe && w.model.num_experts % s.ep != 0) {
        throw InputError(path + ":" + std::to_string(s.line),
                         "ep = " + std::to_string(s.ep) + " does not divide the " +
                             std::to_string(w.model.num_experts) + " experts of " + w.model.name);
      }
    }
    const auto more = fit_layers(rows, w, cluster, p);
    fits.insert(fits.end(), more.begin(), more.end());
  }
  // A fitted value the profile cannot hold (rho < 1, ...) is refused
  // before anything is printed.
  check_profile_to_write(target, p);
  print_model_notes(out, required(r, "model"), model_notes);
  print_fits(out, fits);
  write_profile_file(target, p);
  out << "wrote " << target << "\n";
  return kExitOk;
}

// --- check ----------------------------------------------------------------------------

// The errors of `profile check`, summed over the runs.
struct CheckTotals {
  double sum_c = 0, sum_p = 0, max_c = 0, max_p = 0;  // latency, catalog and profile
  double msum_c = 0, msum_p = 0;                      // memory
  int mem_runs = 0;
  bool allocated = false;  // some run measured PyTorch's max allocated
};

// One run's line: measured, catalog and (with a profile) profile
// predictions of latency and peak memory, with their errors.
void print_check_row(std::ostream& out, const MeasuredRun& run, const Predicted& cat,
                     const Predicted& pro, bool with_profile, CheckTotals& t) {
  const double ec = (cat.latency_s - run.latency_s) / run.latency_s;
  const double ep = (pro.latency_s - run.latency_s) / run.latency_s;
  t.sum_c += std::abs(ec);
  t.sum_p += std::abs(ep);
  t.max_c = std::max(t.max_c, std::abs(ec));
  t.max_p = std::max(t.max_p, std::abs(ep));
  char line[300];
  std::snprintf(line, sizeof line, "  %-18s %9s %10s %8s", run.name.substr(0, 18).c_str(),
                format_seconds(run.latency_s).c_str(), format_seconds(cat.latency_s).c_str(),
                pct(cat.latency_s, run.latency_s).c_str());
  out << line;
  if (with_profile) {
    std::snprintf(line, sizeof line, " %10s %8s", format_seconds(pro.latency_s).c_str(),
                  pct(pro.latency_s, run.latency_s).c_str());
    out << line;
  }
  if (is_set(run.peak_bytes)) {
    const double pc = cat.peak_as(run), pp = pro.peak_as(run);
    ++t.mem_runs;
    t.allocated = t.allocated || run.peak_is_allocated;
    t.msum_c += std::abs(pc - run.peak_bytes) / run.peak_bytes;
    t.msum_p += std::abs(pp - run.peak_bytes) / run.peak_bytes;
    std::snprintf(line, sizeof line, "   | %11s %9s %7s", format_bytes(run.peak_bytes).c_str(),
                  format_bytes(pc).c_str(), pct(pc, run.peak_bytes).c_str());
    out << line;
    if (with_profile) {
      std::snprintf(line, sizeof line, " %8s %7s", format_bytes(pp).c_str(),
                    pct(pp, run.peak_bytes).c_str());
      out << line;
    }
  }
  out << "\n";
}

void print_check_totals(std::ostream& out, const CheckTotals& t, std::size_t runs,
                        bool with_profile) {
  const double n = static_cast<double>(runs);
  char line[300];
  std::snprintf(line, sizeof line, "\n  latency error, mean |e|: catalog %.1f%% (max %.1f%%)",
                100 * t.sum_c / n, 100 * t.max_c);
  out << line;
  if (with_profile) {
    std::snprintf(line, sizeof line, ", profile %.1f%% (max %.1f%%)", 100 * t.sum_p / n,
                  100 * t.max_p);
    out << line;
  }
  out << "\n";
  if (t.mem_runs > 0) {
    std::snprintf(line, sizeof line, "  memory error, mean |e|: catalog %.1f%%",
                  100 * t.msum_c / t.mem_runs);
    out << line;
    if (with_profile) {
      std::snprintf(line, sizeof line, ", profile %.1f%%", 100 * t.msum_p / t.mem_runs);
      out << line;
    }
    out << "\n";
    if (t.allocated) {
      out << "  (a Megatron log's memory is PyTorch's max allocated: it is compared with the "
             "largest stage's predicted memory less the runtime reserve)\n";
    }
  }
}

int cmd_check(int argc, const char* const* argv, std::ostream& out) {
  cxxopts::Options o("hapmoe profile check",
                     "Compares predicted and measured iteration latency (and peak memory) of "
                     "measured runs, with the catalog alone and with the profile, per run and "
                     "overall (like the paper's profile-scaling table, Appendix D).");
  o.add_options()("profile",
                  "the profile file; without --measurements and --megatron-log, its stored runs "
                  "(profile import --megatron-log) are the measured runs",
                  cxxopts::value<std::string>())(
      "measurements",
      "CSV: name,model,cluster,plan,latency_ms[,peak_memory_gib,global_batch,seq_len]; paths "
      "relative to the CSV's folder",
      cxxopts::value<std::string>())(
      "megatron-log",
      "instead of --measurements: a Megatron-LM training log (elapsed time per iteration, "
      "timers, memory reports) of the run of --megatron-script on --cluster",
      cxxopts::value<std::string>())("cluster",
                                     "the cluster the logged run ran on (with "
                                     "--megatron-log)",
                                     cxxopts::value<std::string>());
  add_megatron_options(o);
  const auto parsed = parse(o, argc, argv, out);
  if (!parsed) return kExitOk;
  const auto& r = *parsed;
  std::shared_ptr<MeasuredProfile> profile;
  if (r.count("profile"))
    profile = std::make_shared<MeasuredProfile>(read_profile(r["profile"].as<std::string>()));
  std::optional<LogRun> logged;
  std::vector<MeasuredRun> runs;
  std::string csv;
  if (r.count("megatron-log")) {
    logged = read_log_run(r);
    runs.push_back(logged->run);
  } else if (r.count("measurements")) {
    csv = r["measurements"].as<std::string>();
    runs = parse_runs_csv(read_regular_file(csv), csv);
  } else if (profile && !profile->runs.empty()) {
    for (const ProfileRun& run : profile->runs) runs.push_back(measured_run(run));
  } else {
    throw InputError("--measurements",
                     profile ? "give --measurements CSV or --megatron-log LOG (the profile "
                               "stores no runs: profile import --megatron-log stores them)"
                             : "give --measurements CSV, --megatron-log LOG, or a --profile with "
                               "runs stored by profile import --megatron-log");
  }
  const bool stored = !logged && csv.empty();
  out << "profile check: " << runs.size() << " measured runs"
      << (profile ? ", profile " + r["profile"].as<std::string>() : ", no profile (catalog only)")
      << "\n\n";
  out << "  run                 measured    catalog    error"
      << (profile ? "    profile    error" : "") << "   | memory meas.  catalog   error"
      << (profile ? "  profile   error" : "") << "\n";
  CheckTotals totals;
  std::vector<PlanReport> reports;                              // each run's plan, as priced
  std::map<std::string, std::vector<std::string>> model_notes;  // printed after the table
  for (std::size_t k = 0; k < runs.size(); ++k) {
    const MeasuredRun& run = runs[k];
    const RunInputs in = logged ? logged->in
                         : stored
                             ? stored_run_inputs(profile->runs[k], r["profile"].as<std::string>())
                             : read_run(run, csv);
    if (!in.notes.empty()) model_notes[in.model] = in.notes;
    const Predicted cat = predict(in.workload, in.cluster, in.plan, nullptr);
    Workload wp = in.workload;
    if (profile) {
      const double rho = profile_imbalance(*profile, in.workload.model.name);
      if (is_set(rho)) wp.training.imbalance = rho;
    }
    const Predicted pro = profile ? predict(wp, in.cluster, in.plan, profile.get()) : cat;
    reports.push_back(pro.report);
    print_check_row(out, run, cat, pro, profile != nullptr, totals);
  }
  print_check_totals(out, totals, runs.size(), profile != nullptr);
  if (logged) print_log_summary(out, *logged, reports.front());
  for (std::size_t k = 0; stored && k < runs.size(); ++k) {
    const ProfileRun& run = profile->runs[k];
    if (run.timers.empty()) continue;
    out << "\n  " << run.name << " (" << run.source << ")\n";
    print_timers(out, run.timers, reports[k]);
  }
  if (!model_notes.empty()) out << "\n";
  for (const auto& [model, notes] : model_notes) {
    for (const std::string& n : notes) out << "note: " << model << ": " << n << "\n";
  }
  return kExitOk;
}

// --- show ---------------------------------------------------------------------------

int cmd_show(int argc, const char* const* argv, std::ostream& out) {
  cxxopts::Options o("hapmoe profile show", "Prints every table of a profile file.");
  o.add_options()("file", "the profile file", cxxopts::value<std::string>());
  o.parse_positional({"file"});
  o.positional_help("PROFILE.h5");
  const auto parsed = parse(o, argc, argv, out);
  if (!parsed) return kExitOk;
  const std::string path = required(*parsed, "file");
  const MeasuredProfile p = read_profile(path);
  out << "profile " << path << "\n";
  out << "comm (" << p.comm.size() << " points): primitive link types world bytes seconds\n";
  for (const CommSample& c : p.comm) {
    out << "  " << to_string(c.prim) << " " << to_string(c.link) << " " << c.type_a
        << (c.link == LinkKind::kCrossType ? "/" + c.type_b : "") << " " << c.world << " "
        << g(c.bytes, 12) << " " << g(c.seconds, 6) << "\n";
  }
  out << "compute (" << p.compute.size()
      << " entries): device tp cp micro_batch dense_fwd_s dense_bwd_s ffn_fwd_s ffn_bwd_s\n";
  for (const ComputeSample& c : p.compute) {
    out << "  " << c.device << " " << c.tp << " " << c.cp << " " << c.micro_batch << " "
        << g(c.dense_fwd_s) << " " << g(c.dense_bwd_s) << " " << g(c.ffn_fwd_s) << " "
        << g(c.ffn_bwd_s) << "\n";
  }
  out << "devices (" << p.devices.size()
      << "): device eta router_s_per_token activation_scale overhead_bytes (nan: catalog)\n";
  for (const DeviceCalibration& d : p.devices) {
    out << "  " << d.device << " " << g(d.eta) << " " << g(d.router_s_per_token) << " "
        << g(d.activation_scale) << " " << g(d.overhead_bytes) << "\n";
  }
  out << "models (" << p.models.size() << "): model rho\n";
  for (const ModelCalibration& m : p.models)
    out << "  " << m.model << " " << g(m.imbalance) << "\n";
  out << "runs (" << p.runs.size() << "): name latency_s ranks_with_memory timers source\n";
  for (const ProfileRun& r : p.runs) {
    out << "  " << r.name << " " << g(r.latency_s, 6) << " " << r.peaks.size() << " "
        << r.timers.size() << " " << r.source << "\n";
  }
  return kExitOk;
}

}  // namespace

int run_profile_command(int argc, const char* const* argv, std::ostream& out, std::ostream& err,
                        Comm& comm) {
  if (argc < 2) {
    err << kProfileUsage;
    return kExitInput;
  }
  const std::string sub = argv[1];
  if (sub == "--help" || sub == "-h" || sub == "help") {
    out << kProfileUsage;
    return kExitOk;
  }
  if (sub == "import") return cmd_import(argc - 1, argv + 1, out);
  if (sub == "comm") return cmd_comm(argc - 1, argv + 1, out, err, comm);
  if (sub == "fit") return cmd_fit(argc - 1, argv + 1, out);
  if (sub == "check") return cmd_check(argc - 1, argv + 1, out);
  if (sub == "show") return cmd_show(argc - 1, argv + 1, out);
  err << "hapmoe profile: unknown subcommand '" << echo_value(sub, 32) << "'\n" << kProfileUsage;
  return kExitInput;
}

}  // namespace hapmoe
