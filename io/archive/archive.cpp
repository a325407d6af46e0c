// Writing the archive (docs/archive.md). The layout is fixed here and in
// io/archive/archive_rows.h; io/archive/archive_show.cpp reads it back.
//
// Why one writer on rank 0 with serial HDF5, not a collective parallel-HDF5
// write: after run_search every rank already holds the whole result (the
// engine's allgather), so a collective write would move no data that is not
// already in place; the archive is small (megabytes for thousands of
// configurations); and the serial library is thread-safe in Debian while
// the MPICH flavour is not, and needs no MPI-IO or file locking on the
// parallel file system. Parallel HDF5 stays out of the build.
#include "io/archive/archive.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <limits>
#include <optional>
#include <utility>

#include "costmodel/errors.h"
#include "io/archive/archive_rows.h"
#include "io/archive/version.h"
#include "io/inputs/cluster_io.h"
#include "io/inputs/files.h"
#include "io/inputs/json_strict.h"
#include "io/inputs/model_io.h"

namespace hapmoe {

void (*g_archive_before_rename)(const std::string&) = nullptr;

namespace fs = std::filesystem;

std::string utc_now() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof out, "%s.%03dZ", buf, static_cast<int>(ms));
  return out;
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

std::string command_line(int argc, const char* const* argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (!s.empty()) s += ' ';
    const bool plain = !a.empty() && a.find_first_not_of(
                                         "abcdefghijklmnopqrstuvwxyz"
                                         "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                         "0123456789-_=+:,./@%") == std::string::npos;
    if (plain) {
      s += a;
    } else {
      s += '\'';
      for (char c : a) s += c == '\'' ? std::string("'\\''") : std::string(1, c);
      s += '\'';
    }
  }
  return s;
}

std::string given_file_text(const std::string& spec) {
  std::error_code ec;
  if (!fs::is_regular_file(spec, ec)) return "";
  return read_regular_file(spec);
}

void write_header(const h5::File& file, const std::string& kind) {
  const h5::Attributes a = file.attrs();
  a.set("format", kArchiveFormat);
  a.set("format_version", kArchiveVersion);
  a.set("kind", kind);
}

void write_provenance(const h5::Group& group, const Provenance& p) {
  const h5::Group g = group.create_group("provenance");
  const h5::Attributes a = g.attrs();
  a.set("hapmoe_version", kVersion);
  a.set("git_revision", kGitRevision);
  a.set("command_line", p.command_line);
  a.set("ranks", p.ranks);
  a.set("threads", p.threads);
  a.set("start_time", p.start_time);
  a.set("end_time", p.end_time);
  a.set("wall_seconds", p.wall_seconds);
  a.set("host", p.host);
  a.set("hdf5_version", std::string(H5_VERS_INFO));
}

namespace {

using archive::CommRow;
using archive::ComputeRow;
using archive::ConfigRow;
using archive::DeviceRow;
using archive::PlanRow;
using archive::RankRow;
using archive::StageRow;
using archive::TotalsRow;

std::string snake(std::string s) {
  for (char& c : s) c = c == '-' || c == ' ' ? '_' : static_cast<char>(std::tolower(c));
  return s;
}

// --- Row checks (archive_rows.h) ----------------------------------------------

// Records the first field outside its range.
class RowChecker {
 public:
  archive::RowIssue issue;
  void figure(const char* field, double v) {
    if (issue.field.empty() && !(std::isfinite(v) && v >= 0)) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.6g", v);
      issue = {field, std::string("= ") + buf + " must be finite and >= 0"};
    }
  }
  void count(const char* field, std::int64_t v, std::int64_t lo = 0) {
    if (issue.field.empty() && v < lo) {
      issue = {field, "= " + std::to_string(v) + " must be >= " + std::to_string(lo)};
    }
  }
};

}  // namespace

namespace archive {

RowIssue check_row(const PlanRow& r) {
  RowChecker c;
  c.count("rank", r.rank);
  c.figure("latency_s", r.latency_s);
  c.figure("throughput_tokens_per_s", r.throughput_tokens_per_s);
  c.figure("tflops_per_device", r.tflops_per_device);
  c.figure("mfu", r.mfu);
  for (const auto& [field, v] : {std::pair<const char*, std::int32_t>{"pp", r.pp},
                                 {"tp", r.tp},
                                 {"cp", r.cp},
                                 {"ep", r.ep},
                                 {"tpe", r.tpe},
                                 {"dp", r.dp},
                                 {"micro_batch", r.micro_batch},
                                 {"num_microbatches", r.num_microbatches},
                                 {"vpp", r.vpp},
                                 {"devices", r.devices}}) {
    c.count(field, v, 1);
  }
  c.figure("edge_s", r.edge_s);
  c.figure("middle_s", r.middle_s);
  c.figure("dp_sync_s", r.dp_sync_s);
  c.figure("optimizer_s", r.optimizer_s);
  c.count("first_stage", r.first_stage);
  c.count("num_stages", r.num_stages);
  return c.issue;
}

RowIssue check_row(const StageRow& r) {
  RowChecker c;
  c.count("devices", r.devices, 1);
  c.count("layers", r.layers);
  for (const auto& [field, v] : {std::pair<const char*, double>{"forward_s", r.forward_s},
                                 {"backward_s", r.backward_s},
                                 {"p2p_forward_s", r.p2p_forward_s},
                                 {"p2p_backward_s", r.p2p_backward_s},
                                 {"recompute_s", r.recompute_s},
                                 {"dp_sync_s", r.dp_sync_s},
                                 {"optimizer_s", r.optimizer_s},
                                 {"memory_bytes", r.memory_bytes},
                                 {"capacity_bytes", r.capacity_bytes},
                                 {"weights_bytes", r.weights_bytes},
                                 {"gradients_bytes", r.gradients_bytes},
                                 {"optimizer_bytes", r.optimizer_bytes},
                                 {"activations_bytes", r.activations_bytes},
                                 {"moe_buffers_bytes", r.moe_buffers_bytes},
                                 {"overhead_bytes", r.overhead_bytes}}) {
    c.figure(field, v);
  }
  return c.issue;
}

RowIssue check_row(const TotalsRow& r) {
  RowChecker c;
  for (const auto& [field, v] : {std::pair<const char*, std::int64_t>{"configs", r.configs},
                                 {"configs_evaluated", r.configs_evaluated},
                                 {"configs_bounded", r.configs_bounded},
                                 {"states", r.states},
                                 {"transitions", r.transitions},
                                 {"pruned_load_balance", r.pruned_load_balance},
                                 {"pruned_memory", r.pruned_memory},
                                 {"pruned_hetero_comm", r.pruned_hetero_comm},
                                 {"pruned_bound", r.pruned_bound},
                                 {"feasible", r.feasible},
                                 {"rounds", r.rounds}}) {
    c.count(field, v);
  }
  c.figure("seconds", r.seconds);
  return c.issue;
}

}  // namespace archive

namespace {

void write_profile(const h5::Group& inputs, const ProfileTables& t, const ClusterSpec& cluster) {
  const h5::Group g = inputs.create_group("profile");
  std::vector<DeviceRow> devices;
  for (std::size_t h = 0; h < t.devices.size(); ++h) {
    const DeviceCoefficients& d = t.devices[h];
    DeviceRow r;
    r.device_type = static_cast<std::int32_t>(h);
    r.name = h < cluster.pools.size() ? cluster.pools[h].device.name.c_str() : "";
    r.capacity_bytes = d.capacity_bytes;
    r.eta = d.eta;
    r.hbm_bandwidth = d.hbm_bandwidth;
    r.optimizer_s_per_param = d.optimizer_s_per_param;
    r.activation_scale = d.activation_scale;
    r.overhead_bytes = d.overhead_bytes;
    devices.push_back(r);
  }
  g.write_table("devices", archive::device_row_type(), devices);

  std::vector<ComputeRow> compute;
  for (std::size_t h = 0; h < t.compute.size(); ++h) {
    for (const auto& [key, e] : t.compute[h]) {
      ComputeRow r;
      r.device_type = static_cast<std::int32_t>(h);
      r.tp = key.first;
      r.cp = key.second;
      r.attention_fwd = e.attention_fwd;
      r.core_attention_fwd = e.core_attention_fwd;
      r.core_attention_bwd = e.core_attention_bwd;
      r.dense_mlp_fwd = e.dense_mlp_fwd;
      r.dense_act_fwd = e.dense_act_fwd;
      r.expert_fwd = e.expert_fwd;
      r.expert_act_fwd = e.expert_act_fwd;
      r.shared_fwd = e.shared_fwd;
      r.shared_act_fwd = e.shared_act_fwd;
      r.router_fwd = e.router_fwd;
      r.embedding_fwd = e.embedding_fwd;
      r.output_fwd = e.output_fwd;
      r.attention_bwd = e.attention_bwd;
      r.dense_mlp_bwd = e.dense_mlp_bwd;
      r.expert_bwd = e.expert_bwd;
      r.shared_bwd = e.shared_bwd;
      r.router_bwd = e.router_bwd;
      r.embedding_bwd = e.embedding_bwd;
      r.output_bwd = e.output_bwd;
      r.norm_fwd = e.norm_fwd;
      r.mla_up_fwd = e.mla_up_fwd;
      r.mtp_fwd = e.mtp_fwd;
      r.mtp_bwd = e.mtp_bwd;
      compute.push_back(r);
    }
  }
  g.write_table("compute", archive::compute_row_type(), compute);

  // The comm table has no iterator: every (primitive, link kind, type
  // pair) is asked for, the absent ones skipped.
  std::vector<CommRow> comm;
  const int types = static_cast<int>(t.devices.size());
  std::vector<std::pair<std::string, std::string>> labels;
  for (int p = 0; p < kNumPrimitives; ++p) {
    for (LinkKind kind : {LinkKind::kIntraNode, LinkKind::kInterNode, LinkKind::kCrossType}) {
      for (int a = 0; a < types; ++a) {
        for (int b = a; b < types; ++b) {
          if ((kind == LinkKind::kCrossType) != (a != b)) continue;
          try {
            const PrimitiveEntry& e = t.comm.entry(static_cast<Primitive>(p), {kind, a, b});
            CommRow r;
            r.type_a = a;
            r.type_b = b;
            r.bandwidth = e.bandwidth;
            r.latency = e.latency;
            comm.push_back(r);
            labels.emplace_back(snake(to_string(static_cast<Primitive>(p))),
                                snake(to_string(kind)));
          } catch (const ContractError&) {
            // not in the table
          }
        }
      }
    }
  }
  for (std::size_t i = 0; i < comm.size(); ++i) {
    comm[i].primitive = labels[i].first.c_str();
    comm[i].link = labels[i].second.c_str();
  }
  g.write_table("comm", archive::comm_row_type(), comm);
}

void write_inputs(const h5::Group& group, const ArchiveInputs& in) {
  const h5::Group g = group.create_group("inputs");
  const h5::Attributes a = g.attrs();
  a.set("model_given", in.model_given);
  a.set("model_file_text", in.model_file_text);
  a.set("cluster_given", in.cluster_given);
  a.set("cluster_file_text", in.cluster_file_text);
  if (!in.plan_file_text.empty()) a.set("plan_file_text", in.plan_file_text);
  a.set("options_given", in.options_given.dump());
  a.set("options", in.options_resolved.dump());
  if (in.workload != nullptr) {
    a.set("model", in.workload->model.name);
    a.set("model_json", workload_to_json(*in.workload));
  }
  if (in.cluster != nullptr) {
    a.set("cluster", in.cluster->name);
    a.set("cluster_json", cluster_to_json(*in.cluster));
    a.set("devices", in.cluster->total_devices());
  }
  if (in.tables != nullptr && in.cluster != nullptr) write_profile(g, *in.tables, *in.cluster);
}

void write_plans(const h5::Group& group, const std::vector<PlanReport>& reports,
                 const ClusterSpec& cluster) {
  const h5::Group g = group.create_group("plans");
  g.attrs().set("count", static_cast<std::int64_t>(reports.size()));
  std::vector<PlanRow> plans;
  std::vector<StageRow> stages;
  std::vector<std::string> recompute;  // kept alive for the string pointers
  std::vector<std::int64_t> offsets{0};
  for (const PlanReport& r : reports) {
    for (const StageReport& s : r.stages) recompute.push_back(to_string(s.recompute, s.layers));
  }
  std::size_t next_text = 0;
  for (std::size_t k = 0; k < reports.size(); ++k) {
    const PlanReport& r = reports[k];
    const ParallelConfig& pi = r.plan.parallel;
    PlanRow p;
    p.rank = static_cast<std::int32_t>(k);
    p.latency_s = r.latency_s;
    p.throughput_tokens_per_s = r.throughput_tokens_per_s;
    p.tflops_per_device = r.tflops_per_device;
    p.mfu = r.mfu;
    p.fits = r.fits ? 1 : 0;
    p.pp = pi.pp;
    p.tp = pi.tp;
    p.cp = pi.cp;
    p.ep = pi.ep;
    p.tpe = pi.tpe;
    p.dp = pi.dp;
    p.micro_batch = pi.micro_batch;
    p.num_microbatches = r.num_microbatches;
    p.vpp = pi.vpp;
    p.devices = pi.devices();
    p.bottleneck_stage = r.bottleneck_stage;
    p.edge_s = r.breakdown.edge_s;
    p.middle_s = r.breakdown.middle_s;
    p.dp_sync_s = r.breakdown.dp_sync_s;
    p.optimizer_s = r.breakdown.optimizer_s;
    p.first_stage = static_cast<std::int64_t>(stages.size());
    p.num_stages = static_cast<std::int32_t>(r.stages.size());
    plans.push_back(p);
    for (std::size_t i = 0; i < r.stages.size(); ++i) {
      const StageReport& s = r.stages[i];
      StageRow st;
      st.plan = static_cast<std::int32_t>(k);
      st.stage = static_cast<std::int32_t>(i);
      st.device = cluster.pools[static_cast<std::size_t>(s.device_type)].device.name.c_str();
      st.device_type = s.device_type;
      st.devices = s.devices;
      st.first_layer = s.first_layer;
      st.layers = s.layers;
      st.recompute = recompute[next_text++].c_str();
      st.forward_s = s.cost.fwd_s;
      st.backward_s = s.cost.bwd_s;
      st.p2p_forward_s = s.cost.p2p_fwd_s;
      st.p2p_backward_s = s.cost.p2p_bwd_s;
      st.recompute_s = s.cost.recompute_s;
      st.dp_sync_s = s.cost.dp_sync_s;
      st.optimizer_s = s.cost.optimizer_s;
      st.in_flight = s.cost.in_flight;
      st.memory_bytes = s.cost.memory.total();
      st.capacity_bytes = s.cost.capacity_bytes;
      st.weights_bytes = s.cost.memory.weights;
      st.gradients_bytes = s.cost.memory.gradients;
      st.optimizer_bytes = s.cost.memory.optimizer;
      st.activations_bytes = s.cost.memory.activations;
      st.moe_buffers_bytes = s.cost.memory.moe_buffers;
      st.overhead_bytes = s.cost.memory.overhead;
      st.fits = s.cost.fits() ? 1 : 0;
      stages.push_back(st);
    }
    offsets.push_back(static_cast<std::int64_t>(stages.size()));
  }
  // Nothing show would refuse is written (a non-finite figure is a bug of
  // the cost model; the archive is not written, the previous one kept).
  for (std::size_t i = 0; i < plans.size(); ++i) {
    archive::require_valid_row(plans[i], g.path() + "/plans", i);
  }
  for (std::size_t i = 0; i < stages.size(); ++i) {
    archive::require_valid_row(stages[i], g.path() + "/stages", i);
  }
  g.write_table("plans", archive::plan_row_type(), plans);
  g.write_table("stages", archive::stage_row_type(), stages);
  g.write_array("stage_offsets", offsets);
}

// search/resume: what plan --resume needs beyond the tables above, exact
// (io/archive/resume.h): the top K plans as the engine holds them, and
// the closest miss with the configuration it came from.
void write_resume_group(const h5::Group& search, const SearchResult& s) {
  const h5::Group g = search.create_group("resume");
  g.attrs().set("rounds", s.rounds);
  std::vector<archive::ResumePlanRow> plans;
  std::vector<archive::ResumeStageRow> stages;
  for (const PlanCandidate& c : s.top) {
    archive::ResumePlanRow p;
    p.config = -1;  // not in Pi (a baseline's plan): never resumed from
    for (std::size_t i = 0; i < s.configs.size(); ++i) {
      if (s.configs[i] == c.plan.parallel) {
        p.config = static_cast<std::int64_t>(i);
        break;
      }
    }
    p.latency_s = c.latency_s;
    p.first_stage = static_cast<std::int64_t>(stages.size());
    p.num_stages = static_cast<std::int32_t>(c.plan.stages.size());
    plans.push_back(p);
    for (const StagePlan& st : c.plan.stages) {
      stages.push_back({st.device_type, st.layers, static_cast<std::int32_t>(st.recompute.kind),
                        st.recompute.layers, static_cast<std::int32_t>(st.recompute.modules)});
    }
  }
  g.write_table("plans", archive::resume_plan_row_type(), plans);
  g.write_table("stages", archive::resume_stage_row_type(), stages);
  // The closest miss: the first configuration (in Pi's order) with the
  // least shortfall, as the engine picks it.
  std::vector<archive::ResumeClosestRow> closest;
  double least = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < s.configs.size() && i < s.outcome_of.size(); ++i) {
    const ConfigOutcome* o = s.outcome(i);
    if (o == nullptr || !(o->closest.bytes < least)) continue;
    least = o->closest.bytes;
    const Shortfall& f = o->closest;
    const ParallelConfig& pi = f.parallel;
    closest.assign(1, {static_cast<std::int64_t>(i), f.bytes, pi.pp, pi.tp, pi.cp, pi.ep, pi.tpe,
                       pi.dp, pi.micro_batch, pi.vpp, f.stage, f.device_type, f.layers});
  }
  g.write_table("closest", archive::resume_closest_row_type(), closest);
}

void write_search(const h5::Group& group, const SearchResult& s) {
  const h5::Group g = group.create_group("search");
  std::vector<ConfigRow> configs;
  configs.reserve(s.configs.size());
  for (std::size_t i = 0; i < s.configs.size(); ++i) {
    const ParallelConfig& pi = s.configs[i];
    ConfigRow r;
    r.index = static_cast<std::int64_t>(i);
    r.pp = pi.pp;
    r.tp = pi.tp;
    r.cp = pi.cp;
    r.ep = pi.ep;
    r.tpe = pi.tpe;
    r.dp = pi.dp;
    r.micro_batch = pi.micro_batch;
    r.rank = i < s.ran_on.size() ? s.ran_on[i] : -1;
    r.round = i < s.round_of.size() ? s.round_of[i] : -1;
    r.work_estimate = i < s.estimates.size() ? s.estimates[i] : 0.0;
    r.best_latency_s = std::numeric_limits<double>::quiet_NaN();
    r.lower_bound_s = i < s.lower_bounds.size() ? s.lower_bounds[i] : 0.0;
    const ConfigOutcome* searched = i < s.outcome_of.size() ? s.outcome(i) : nullptr;
    r.skipped = i < s.outcome_of.size() && s.outcome_of[i] == SearchResult::kSkippedByBound ? 1 : 0;
    if (searched) {
      const ConfigOutcome& o = *searched;
      r.searched = o.stats.configs_evaluated > 0 ? 1 : 0;
      if (o.best) r.best_latency_s = o.best->latency_s;
      r.states = o.stats.states;
      r.transitions = o.stats.transitions;
      r.pruned_load_balance = o.stats.pruned_load_balance;
      r.pruned_memory = o.stats.pruned_memory;
      r.pruned_hetero_comm = o.stats.pruned_hetero_comm;
      r.pruned_bound = o.stats.pruned_bound;
      r.feasible = o.stats.feasible;
      r.seconds = o.stats.seconds;
      r.hetero_comm_ratio = o.stats.hetero_comm_ratio;
      r.parts = i < s.parts.size() ? s.parts[i] : 1;
    }
    configs.push_back(r);
  }
  g.write_table("configs", archive::config_row_type(), configs);
  write_resume_group(g, s);

  std::vector<RankRow> ranks;
  for (const RankFigures& f : s.ranks) {
    RankRow r;
    r.rank = f.rank;
    r.threads = f.threads;
    r.configs = f.configs;
    r.transitions = f.transitions;
    r.work_estimate = f.estimate;
    r.busy_seconds = f.busy_s;
    r.idle_seconds = f.idle_s;
    ranks.push_back(r);
  }
  g.write_table("ranks", archive::rank_row_type(), ranks);

  std::vector<archive::UnitRow> units;
  units.reserve(s.units.size());
  for (const UnitFigures& u : s.units) {
    units.push_back({static_cast<std::int64_t>(u.config), u.part.index, u.part.count, u.round,
                     u.rank, u.estimate, u.seconds, u.transitions, u.shares});
  }
  g.write_table("units", archive::unit_row_type(), units);

  TotalsRow t;
  t.configs = s.stats.configs;
  t.configs_evaluated = s.stats.configs_evaluated;
  t.configs_bounded = s.stats.configs_bounded;
  t.states = s.stats.states;
  t.transitions = s.stats.transitions;
  t.pruned_load_balance = s.stats.pruned_load_balance;
  t.pruned_memory = s.stats.pruned_memory;
  t.pruned_hetero_comm = s.stats.pruned_hetero_comm;
  t.pruned_bound = s.stats.pruned_bound;
  t.feasible = s.stats.feasible;
  t.rounds = s.rounds;
  t.seconds = s.stats.seconds;
  archive::require_valid_row(t, g.path() + "/totals", 0);
  g.write_table("totals", archive::totals_row_type(), std::vector<TotalsRow>{t});
  // Whether the search ran to its end (docs/archive.md).
  const h5::Attributes a = g.attrs();
  a.set("proven_optimal", s.stopped == StopReason::kNone ? 1 : 0);
  a.set("stopped_by", std::string(to_string(s.stopped)));
  a.set("configs_not_searched", s.not_searched);
  // The seed incumbent (docs/search.md), 0 and 0 when not seeded.
  a.set("seed_s", std::isfinite(s.seed) ? s.seed : 0.0);
  a.set("seed_searches", s.seed_searches);
}

}  // namespace

void write_run(const h5::Group& group, const ArchiveInputs& inputs,
               const std::vector<PlanReport>& reports, const SearchResult* search) {
  HAPMOE_REQUIRE(inputs.cluster != nullptr, "write_run: inputs.cluster is null");
  write_inputs(group, inputs);
  write_plans(group, reports, *inputs.cluster);
  if (search != nullptr) write_search(group, *search);
}

// --- Output paths -------------------------------------------------------------

void check_archive_path(const std::string& path, const std::string& option) {
  // The directory, the name's length, a directory or FIFO in the way, and
  // whether a file can be created there (io/inputs/files.h).
  check_file_writable(path, option);
  std::error_code ec;
  if (fs::exists(path, ec) && !h5::is_hdf5(path)) {
    throw InputError(option + " " + path,
                     "exists and is not an HDF5 file; refusing to replace it (remove it or "
                     "choose another name)");
  }
}

void write_archive_atomic(const std::string& path, const std::function<void(h5::File&)>& fill,
                          const std::string& option) {
  const std::string where = option + " " + path;
  std::string tmp;
  try {
    // A name already taken (even by a symlink) is skipped; H5F_ACC_EXCL
    // (O_CREAT|O_EXCL) makes the create fail rather than follow anything
    // that appears there meanwhile. `tmp` is set before the create, so a
    // file the failed create left behind is removed below.
    std::optional<h5::File> file;
    create_temporary(
        path,
        [&](const std::string& name) {
          struct stat st {};
          if (::lstat(name.c_str(), &st) == 0) return false;
          tmp = name;
          file.emplace(h5::File::create(name));
          return true;
        },
        where);
    fill(*file);
    file->close();
    // Durable before it takes the final name: data, then the rename.
    const int fd = ::open(tmp.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || ::fsync(fd) != 0) {
      const int e = errno;
      if (fd >= 0) ::close(fd);
      throw InputError(where, "cannot sync " + tmp + ": " + std::strerror(e));
    }
    ::close(fd);
    if (g_archive_before_rename != nullptr) g_archive_before_rename(tmp);
  } catch (const h5::H5Error& e) {
    if (!tmp.empty()) ::unlink(tmp.c_str());
    throw InputError(where, std::string("cannot write the archive: ") + e.what() +
                                "; the previous file, if any, is untouched");
  } catch (...) {
    if (!tmp.empty()) ::unlink(tmp.c_str());
    throw;
  }
  commit_temporary(tmp, path, where);
  remove_stale_temporaries(path);
}

}  // namespace hapmoe
