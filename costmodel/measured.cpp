// Measured profiles applied to the tables, and the least-squares fits of
// the calibration coefficients (docs/profile.md).
#include "costmodel/measured.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <tuple>

#include "costmodel/analytic.h"
#include "costmodel/cost.h"
#include "costmodel/errors.h"
#include "costmodel/text.h"

namespace hapmoe {

namespace {

bool same_name(const std::string& a, const std::string& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

int type_of(const ClusterSpec& cluster, const std::string& name) {
  for (int h = 0; h < cluster.num_types(); ++h) {
    if (same_name(cluster.pools[static_cast<std::size_t>(h)].device.name, name)) return h;
  }
  return -1;
}

void set_if(double& target, double value) {
  if (is_set(value)) target = value;
}

// The sample for (device, tp, cp) nearest to `micro_batch` (exact first,
// then the smallest ratio), or nullptr.
const ComputeSample* nearest_compute(const MeasuredProfile& p, const std::string& device, int tp,
                                     int cp, int micro_batch) {
  const ComputeSample* best = nullptr;
  double best_d = 0;
  for (const ComputeSample& s : p.compute) {
    if (s.tp != tp || s.cp != cp || !same_name(s.device, device)) continue;
    const double d = std::abs(std::log(static_cast<double>(s.micro_batch) / micro_batch));
    if (best == nullptr || d < best_d) {
      best = &s;
      best_d = d;
    }
  }
  return best;
}

// Scales the analytic entry to the measured dense-layer (and FFN) times.
void calibrate_entry(ComputeEntry& e, const ComputeSample& s, double tokens_ratio) {
  const double d_f = s.dense_fwd_s * tokens_ratio;
  const double d_b = s.dense_bwd_s * tokens_ratio;
  const double an_f = e.attention_fwd + e.dense_mlp_fwd;
  const double an_b = e.attention_bwd + e.dense_mlp_bwd;
  const double s_f = d_f / an_f;
  const double s_b = d_b / an_b;
  double sa_f = s_f, sm_f = s_f, sa_b = s_b, sm_b = s_b;
  if (is_set(s.ffn_fwd_s) && s.ffn_fwd_s < s.dense_fwd_s && e.dense_mlp_fwd > 0) {
    sa_f = (d_f - s.ffn_fwd_s * tokens_ratio) / e.attention_fwd;
    sm_f = s.ffn_fwd_s * tokens_ratio / e.dense_mlp_fwd;
  }
  if (is_set(s.ffn_bwd_s) && s.ffn_bwd_s < s.dense_bwd_s && e.dense_mlp_bwd > 0) {
    sa_b = (d_b - s.ffn_bwd_s * tokens_ratio) / e.attention_bwd;
    sm_b = s.ffn_bwd_s * tokens_ratio / e.dense_mlp_bwd;
  }
  e.attention_fwd *= sa_f;
  e.core_attention_fwd *= sa_f;
  e.norm_fwd *= sa_f;
  e.mla_up_fwd *= sa_f;
  e.dense_mlp_fwd *= sm_f;
  e.dense_act_fwd *= sm_f;
  e.expert_fwd *= sm_f;
  e.expert_act_fwd *= sm_f;
  e.expert_scale_fwd *= sm_f;
  e.shared_fwd *= sm_f;
  e.shared_act_fwd *= sm_f;
  e.embedding_fwd *= s_f;
  e.output_fwd *= s_f;
  e.mtp_fwd *= s_f;
  e.attention_bwd *= sa_b;
  e.core_attention_bwd *= sa_b;
  e.dense_mlp_bwd *= sm_b;
  e.expert_bwd *= sm_b;
  e.expert_scale_bwd *= sm_b;
  e.shared_bwd *= sm_b;
  e.embedding_bwd *= s_b;
  e.output_bwd *= s_b;
  e.mtp_bwd *= s_b;
}

double tokens_per_device(const Workload& w, int micro_batch, int tp, int cp) {
  return static_cast<double>(micro_batch) * w.training.seq_len / cp / tp;
}

}  // namespace

void MeasuredProfile::merge(const MeasuredProfile& o) {
  comm.insert(comm.end(), o.comm.begin(), o.comm.end());
  compute.insert(compute.end(), o.compute.begin(), o.compute.end());
  for (const DeviceCalibration& d : o.devices) {
    auto it = std::find_if(devices.begin(), devices.end(), [&](const DeviceCalibration& x) {
      return same_name(x.device, d.device);
    });
    if (it == devices.end()) {
      devices.push_back(d);
      continue;
    }
    set_if(it->eta, d.eta);
    set_if(it->router_s_per_token, d.router_s_per_token);
    set_if(it->activation_scale, d.activation_scale);
    set_if(it->overhead_bytes, d.overhead_bytes);
  }
  for (const ModelCalibration& m : o.models) {
    auto it = std::find_if(models.begin(), models.end(),
                           [&](const ModelCalibration& x) { return x.model == m.model; });
    if (it == models.end()) {
      models.push_back(m);
    } else {
      set_if(it->imbalance, m.imbalance);
    }
  }
  for (const ProfileRun& r : o.runs) {
    auto it = std::find_if(runs.begin(), runs.end(),
                           [&](const ProfileRun& x) { return x.name == r.name; });
    if (it == runs.end()) {
      runs.push_back(r);
    } else {
      *it = r;
    }
  }
}

namespace {

std::string shown(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// The checks of validate_profile, each recording the first issue only.
class ProfileChecker {
 public:
  bool ok() const { return issue_.field.empty(); }
  ProfileIssue issue() const { return issue_; }
  void at(const char* table, std::size_t row) {
    prefix_ = std::string(table) + "[" + std::to_string(row) + "].";
  }
  // A row of a run's own list: "runs[2].peaks[0]."
  void at(const char* table, std::size_t row, const char* list, std::size_t item) {
    at(table, row);
    prefix_ += std::string(list) + "[" + std::to_string(item) + "].";
  }
  void name(const char* field, const std::string& v) {
    if (!ok()) return;
    if (std::string e = check_name(field, v); !e.empty()) {
      // check_name's message starts with the field: the location names it.
      fail(field, e.substr(std::char_traits<char>::length(field) + 1));
    }
  }
  void degree(const char* field, int v, int lo) {
    if (ok() && (v < lo || v > kMaxProfileDegree)) {
      fail(field, "= " + std::to_string(v) + " must be in [" + std::to_string(lo) + ", " +
                      std::to_string(kMaxProfileDegree) + "]");
    }
  }
  // Finite and > 0 (or >= 0 when `zero`); NaN allowed when `optional`.
  void positive(const char* field, double v, bool zero = false, bool optional = false) {
    if (!ok() || (optional && std::isnan(v))) return;
    if (!std::isfinite(v) || v < 0 || (!zero && v == 0)) {
      fail(field, "= " + shown(v) + " must be finite and " + (zero ? ">= 0" : "> 0") +
                      (optional ? " (or NaN: not measured)" : ""));
    }
  }
  void fail(const char* field, const std::string& what) {
    if (ok()) issue_ = {prefix_ + field, what};
  }

 private:
  std::string prefix_;
  ProfileIssue issue_;
};

}  // namespace

ProfileIssue validate_profile(const MeasuredProfile& p) {
  ProfileChecker c;
  for (std::size_t i = 0; i < p.comm.size() && c.ok(); ++i) {
    const CommSample& s = p.comm[i];
    c.at("comm", i);
    c.name("type_a", s.type_a);
    c.name("type_b", s.type_b);
    if (c.ok() && s.world < (s.prim == Primitive::kP2P ? 1 : 2)) {
      c.fail("world", "= " + std::to_string(s.world) + " must be >= 2 (>= 1 for p2p)");
    }
    c.degree("world", s.world, 1);
    c.positive("bytes", s.bytes);
    c.positive("seconds", s.seconds);
  }
  for (std::size_t i = 0; i < p.compute.size() && c.ok(); ++i) {
    const ComputeSample& s = p.compute[i];
    c.at("compute", i);
    c.name("device", s.device);
    c.degree("tp", s.tp, 1);
    c.degree("cp", s.cp, 1);
    c.degree("micro_batch", s.micro_batch, 1);
    c.positive("dense_fwd_s", s.dense_fwd_s);
    c.positive("dense_bwd_s", s.dense_bwd_s);
    c.positive("ffn_fwd_s", s.ffn_fwd_s, false, true);
    c.positive("ffn_bwd_s", s.ffn_bwd_s, false, true);
  }
  for (std::size_t i = 0; i < p.devices.size() && c.ok(); ++i) {
    const DeviceCalibration& d = p.devices[i];
    c.at("devices", i);
    c.name("device", d.device);
    c.positive("eta", d.eta, false, true);
    c.positive("router_s_per_token", d.router_s_per_token, true, true);
    c.positive("activation_scale", d.activation_scale, false, true);
    c.positive("overhead_bytes", d.overhead_bytes, true, true);
  }
  for (std::size_t i = 0; i < p.models.size() && c.ok(); ++i) {
    const ModelCalibration& m = p.models[i];
    c.at("models", i);
    c.name("model", m.model);
    if (c.ok() && !(std::isfinite(m.imbalance) && m.imbalance >= 1.0)) {
      c.fail("imbalance", "= " + shown(m.imbalance) + " must be finite and >= 1");
    }
  }
  for (std::size_t i = 0; i < p.runs.size() && c.ok(); ++i) {
    const ProfileRun& r = p.runs[i];
    c.at("runs", i);
    c.name("name", r.name);
    for (std::size_t j = 0; j < i && c.ok(); ++j) {
      if (p.runs[j].name == r.name)
        c.fail("name",
               "'" + r.name + "' is also runs[" + std::to_string(j) + "]'s: names are unique");
    }
    c.name("source", r.source);
    for (const auto& [field, text] :
         {std::pair<const char*, const std::string&>{"workload", r.workload},
          {"cluster", r.cluster},
          {"plan", r.plan}}) {
      if (c.ok() && text.empty()) c.fail(field, "is empty");
      if (c.ok() && text.size() > kMaxProfileRunText) {
        c.fail(field, std::to_string(text.size()) + " bytes, more than a run's document holds (" +
                          std::to_string(kMaxProfileRunText) + ")");
      }
    }
    c.positive("latency_s", r.latency_s);
    for (std::size_t j = 0; j < r.peaks.size() && c.ok(); ++j) {
      const ProfileRun::StagePeak& k = r.peaks[j];
      c.at("runs", i, "peaks", j);
      if (c.ok() && (k.rank < 0 || k.rank >= kMaxProfileDegree)) {
        c.fail("rank", "= " + std::to_string(k.rank) + " must be in [0, 2^24)");
      }
      if (c.ok() && (k.stage < 0 || k.stage > k.rank)) {
        c.fail("stage", "= " + std::to_string(k.stage) + " must be in [0, its rank " +
                            std::to_string(k.rank) + "]");
      }
      c.positive("max_allocated_bytes", k.max_allocated_bytes);
    }
    for (std::size_t j = 0; j < r.timers.size() && c.ok(); ++j) {
      c.at("runs", i, "timers", j);
      c.name("name", r.timers[j].name);
      c.positive("seconds", r.timers[j].seconds, true);
    }
  }
  return c.issue();
}

ProfileTables plan_tables(const Workload& workload, const ClusterSpec& cluster,
                          const ParallelConfig& pi, const MeasuredProfile* profile,
                          ProfileSources* sources) {
  ProfileTables t = make_analytic_tables(workload, cluster, pi.micro_batch, {pi.tp}, {pi.cp});
  if (profile != nullptr) {
    ProfileSources s = apply_profile(t, *profile, workload, cluster, pi.micro_batch);
    if (sources != nullptr) *sources = std::move(s);
  }
  return t;
}

double profile_imbalance(const MeasuredProfile& profile, const std::string& model) {
  for (const ModelCalibration& m : profile.models) {
    if (m.model == model) return m.imbalance;
  }
  return kUnset;
}

std::string primitive_plan_terms(Primitive prim) {
  switch (prim) {
    case Primitive::kAllReduce:
      return "all-reduce is read only by the data-parallel gradient all-reduce (over DP x CP and "
             "expert DP) of plans without the distributed optimizer (--no-distributed-optimizer, "
             "or the dp sharding level of a job search). It does not affect the distributed "
             "optimizer's DP gradient/parameter sync (the default; also --fsdp), which is a "
             "reduce-scatter and an all-gather, nor TP, which hapmoe models with sequence "
             "parallelism (all-gather + reduce-scatter): for those, import reduce_scatter_perf "
             "and all_gather_perf";
    case Primitive::kAllGather:
      return "all-gather is read by TP with sequence parallelism (attention, dense MLP, shared "
             "experts), the distributed optimizer's parameter all-gather over DP x CP and expert "
             "DP (per layer with --fsdp optim_grads_params), the all-gather MoE dispatcher and "
             "the expert-TP gathers";
    case Primitive::kReduceScatter:
      return "reduce-scatter is read by TP with sequence parallelism (attention, dense MLP, "
             "shared experts), the distributed optimizer's gradient reduce-scatter over DP x CP "
             "and expert DP (per layer with --fsdp), the all-gather MoE dispatcher and the "
             "expert-TP reductions";
    case Primitive::kAllToAll:
      return "all-to-all is read by the EP dispatch and combine (the alltoall dispatcher, the "
             "flex/DeepEP dispatcher's all-to-all part); a measured inter-node all-to-all "
             "replaces the model's split of an EP group across nodes into an in-node and a NIC "
             "part";
    case Primitive::kP2P:
      return "p2p (sendrecv) is read by the pipeline-parallel stage boundaries, the "
             "context-parallel ring and the flex/DeepEP dispatcher's cross-node part";
  }
  return "";
}

ProfileSources apply_profile(ProfileTables& t, const MeasuredProfile& p, const Workload& w,
                             const ClusterSpec& cluster, int micro_batch) {
  ProfileSources src;
  const int types = cluster.num_types();
  HAPMOE_REQUIRE(static_cast<int>(t.devices.size()) == types,
                 "apply_profile: tables do not match the cluster");
  for (int h = 0; h < types; ++h) {
    const std::string& name = cluster.pools[static_cast<std::size_t>(h)].device.name;
    CoefficientSource cs;
    cs.type = h;
    const DeviceCalibration* cal = nullptr;
    for (const DeviceCalibration& d : p.devices) {
      if (same_name(d.device, name)) cal = &d;
    }
    DeviceCoefficients& coef = t.devices[static_cast<std::size_t>(h)];
    if (cal != nullptr) {
      cs.eta = is_set(cal->eta);
      set_if(coef.eta, cal->eta);
      cs.memory = is_set(cal->activation_scale) || is_set(cal->overhead_bytes);
      set_if(coef.activation_scale, cal->activation_scale);
      set_if(coef.overhead_bytes, cal->overhead_bytes);
      cs.router = is_set(cal->router_s_per_token);
    }
    for (auto& [key, e] : t.compute[static_cast<std::size_t>(h)]) {
      ComputeSource s;
      s.type = h;
      s.tp = key.first;
      s.cp = key.second;
      if (const ComputeSample* m = nearest_compute(p, name, key.first, key.second, micro_batch)) {
        const double ratio = static_cast<double>(micro_batch) / m->micro_batch;
        calibrate_entry(e, *m, ratio);
        s.kind = m->micro_batch == micro_batch ? ComputeSource::kMeasured
                                               : ComputeSource::kScaledMicroBatch;
        s.measured_micro_batch = m->micro_batch;
      }
      if (cs.router) {
        e.router_fwd = cal->router_s_per_token *
                       tokens_per_device(w, micro_batch, key.first, key.second) * w.model.hidden;
        e.router_bwd = 2.0 * e.router_fwd;
      }
      src.compute.push_back(s);
    }
    src.devices.push_back(cs);
  }
  // Communication: one curve per (primitive, link, types) key.
  std::map<std::tuple<int, int, int, int>, std::vector<CommPoint>> curves;
  for (const CommSample& s : p.comm) {
    const int a = type_of(cluster, s.type_a);
    const int b = s.link == LinkKind::kCrossType ? type_of(cluster, s.type_b) : a;
    if (a < 0 || b < 0 || (s.link == LinkKind::kCrossType && a == b)) {
      const std::string what = std::string(to_string(s.prim)) + " " + to_string(s.link) + " " +
                               s.type_a + (s.link == LinkKind::kCrossType ? "/" + s.type_b : "");
      if (std::find(src.unused.begin(), src.unused.end(), what) == src.unused.end()) {
        src.unused.push_back(what);
      }
      continue;
    }
    const int world = s.prim == Primitive::kP2P ? 2 : s.world;
    curves[{static_cast<int>(s.prim), static_cast<int>(s.link), std::min(a, b), std::max(a, b)}]
        .push_back({world, s.bytes, s.seconds});
  }
  for (auto& [k, points] : curves) {
    const auto [prim, kind, a, b] = k;
    t.comm.set_measured(static_cast<Primitive>(prim), {static_cast<LinkKind>(kind), a, b},
                        make_curve(std::move(points)));
    ++src.comm_keys;
  }
  src.imbalance = is_set(profile_imbalance(p, w.model.name));
  return src;
}

// --- Fits --------------------------------------------------------------------

namespace {

// y = a x through the origin: a = sum xy / sum xx.
double fit_origin(const std::vector<double>& x, const std::vector<double>& y) {
  double xy = 0, xx = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    xy += x[i] * y[i];
    xx += x[i] * x[i];
  }
  return xx > 0 ? xy / xx : kUnset;
}

void residuals(FitValue& f, const std::vector<double>& y, const std::vector<double>& pred) {
  double ss = 0;
  f.max_rel_residual = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    const double r = y[i] - pred[i];
    ss += r * r;
    if (y[i] != 0) f.max_rel_residual = std::max(f.max_rel_residual, std::abs(r / y[i]));
  }
  f.samples = static_cast<int>(y.size());
  f.rms_residual = y.empty() ? 0.0 : std::sqrt(ss / static_cast<double>(y.size()));
}

DeviceCalibration& calibration_for(MeasuredProfile& p, const std::string& device) {
  for (DeviceCalibration& d : p.devices) {
    if (same_name(d.device, device)) return d;
  }
  p.devices.push_back({});
  p.devices.back().device = device;
  return p.devices.back();
}

}  // namespace

std::vector<FitValue> fit_layers(const std::vector<LayerSample>& samples, const Workload& w,
                                 const ClusterSpec& cluster, MeasuredProfile& out) {
  std::vector<FitValue> fits;
  for (int h = 0; h < cluster.num_types(); ++h) {
    const std::string& name = cluster.pools[static_cast<std::size_t>(h)].device.name;
    std::vector<const LayerSample*> mine;
    for (const LayerSample& s : samples) {
      if (same_name(s.device, name)) mine.push_back(&s);
    }
    if (mine.empty()) continue;
    DeviceCalibration& cal = calibration_for(out, name);
    // The tables each sample's shape is predicted with: the catalog plus
    // the measured compute entries and the router fitted so far.
    auto type_costs_for = [&](const LayerSample& s) {
      const ProfileTables base = make_analytic_tables(w, cluster, s.micro_batch, {s.tp}, {s.cp});
      ProfileTables t = base;
      apply_profile(t, out, w, cluster, s.micro_batch);
      ParallelConfig pi;
      pi.tp = s.tp;
      pi.cp = s.cp;
      pi.ep = s.ep;
      pi.tpe = s.tpe;
      pi.dp = std::max(1, s.ep * s.tpe / (s.tp * s.cp));
      pi.micro_batch = s.micro_batch;
      return std::make_pair(t, pi);
    };
    // 1. Router coefficient: router time against tokens x hidden.
    {
      std::vector<double> x, y;
      for (const LayerSample* s : mine) {
        if (!s->moe || !is_set(s->router_fwd_s)) continue;
        x.push_back(tokens_per_device(w, s->micro_batch, s->tp, s->cp) * w.model.hidden);
        y.push_back(s->router_fwd_s);
      }
      if (!x.empty()) {
        FitValue f{"router", name, fit_origin(x, y), 0, 0, 0, "s", ""};
        std::vector<double> pred;
        pred.reserve(x.size());
        for (double xi : x) pred.push_back(f.value * xi);
        residuals(f, y, pred);
        cal.router_s_per_token = f.value;
        fits.push_back(f);
      }
    }
    // 2. eta: MoE layer time minus attention, shared experts and router,
    // against the cost model's routed-expert compute at eta = 1 (forward
    // and backward as separate observations).
    {
      std::vector<double> x, y;
      for (const LayerSample* s : mine) {
        if (!s->moe || !w.model.is_moe()) continue;
        const auto [t, pi] = type_costs_for(*s);
        const ComputeEntry& ce = t.compute_entry(h, s->tp, s->cp, name);
        const double imb = 1.0 + w.training.gamma * (w.training.imbalance - 1.0);
        const RoutedExpertTime routed =
            routed_expert_time(w.model, cluster.pools[static_cast<std::size_t>(h)].device,
                               tokens_per_device(w, s->micro_batch, s->tp, s->cp), s->ep, s->tpe,
                               w.training.precision, w.training.fp8_recipe);
        const double router_f = is_set(s->router_fwd_s) ? s->router_fwd_s : ce.router_fwd;
        const double router_b = is_set(s->router_fwd_s) ? 2.0 * s->router_fwd_s : ce.router_bwd;
        x.push_back(routed.fwd * ce.expert_scale_fwd * imb);
        y.push_back(s->fwd_s - ce.attention_fwd - ce.shared_fwd - router_f - routed.fixed_fwd);
        x.push_back(routed.bwd * ce.expert_scale_bwd * imb);
        y.push_back(s->bwd_s - ce.attention_bwd - ce.shared_bwd - router_b - routed.fixed_bwd);
      }
      if (!x.empty()) {
        const double inv = fit_origin(x, y);
        FitValue f{"eta", name, inv > 0 ? 1.0 / inv : kUnset, 0, 0, 0, "s", ""};
        std::vector<double> pred;
        pred.reserve(x.size());
        for (double xi : x) pred.push_back(inv * xi);
        residuals(f, y, pred);
        if (inv > 0) {
          cal.eta = f.value;
        } else {
          f.note = "not fitted: the MoE layers leave no time for the experts";
        }
        fits.push_back(f);
      }
    }
    // 3. Memory: peak = overhead + scale x activations + parameter state.
    {
      std::vector<double> x, y;
      for (const LayerSample* s : mine) {
        if (!is_set(s->peak_bytes)) continue;
        const auto [t, pi] = type_costs_for(*s);
        const CostModel model(w, cluster, t);
        const TypeCosts tc = model.type_costs(pi, h);
        const LayerCost& lc = s->moe ? tc.moe : tc.dense;
        // A one-layer benchmark keeps every state locally (no DP sharding).
        const double params = lc.dense_params + lc.expert_params;
        const double state = params * (tc.weight_bytes_per_param + tc.grad_bytes_per_param +
                                       (w.training.precision == Precision::kFp16 ? 16.0 : 12.0));
        x.push_back(lc.act_bytes);
        y.push_back(s->peak_bytes - state);
      }
      if (!x.empty()) {
        double sx = 0, sy = 0;
        for (std::size_t i = 0; i < x.size(); ++i) {
          sx += x[i];
          sy += y[i];
        }
        const double n = static_cast<double>(x.size());
        double sxx = 0, sxy = 0;
        for (std::size_t i = 0; i < x.size(); ++i) {
          sxx += (x[i] - sx / n) * (x[i] - sx / n);
          sxy += (x[i] - sx / n) * (y[i] - sy / n);
        }
        FitValue scale{"activation_scale", name, kUnset, 0, 0, 0, "bytes", ""};
        FitValue over{"overhead", name, kUnset, 0, 0, 0, "bytes", ""};
        if (x.size() >= 2 && sxx > 1e-12 * sx * sx / n) {
          scale.value = sxy / sxx;
          over.value = sy / n - scale.value * sx / n;
        }
        if (is_set(over.value) && over.value < 0) {
          // A negative overhead is not physical: the best fit with none.
          over.value = 0;
          scale.value = fit_origin(x, y);
          over.note = "clamped to 0 (the free fit was negative)";
        } else if (!is_set(over.value)) {
          // One activation size: the catalog's overhead, the scale alone.
          over.value = AnalyticAssumptions{}.memory_overhead_bytes;
          std::vector<double> yy;
          yy.reserve(y.size());
          for (double v : y) yy.push_back(v - over.value);
          scale.value = fit_origin(x, yy);
          over.note = "catalog value (every sample has the same activation size)";
        }
        std::vector<double> pred;
        pred.reserve(x.size());
        for (double xi : x) pred.push_back(over.value + scale.value * xi);
        residuals(scale, y, pred);
        residuals(over, y, pred);
        if (scale.value > 0) {
          cal.activation_scale = scale.value;
          cal.overhead_bytes = over.value;
        } else {
          scale.note = "not fitted: non-positive activation scale";
        }
        fits.push_back(scale);
        fits.push_back(over);
      }
    }
  }
  return fits;
}

namespace {

// A stored run priced with the tables of `profile` (its rho for the run's
// model, when it holds one).
struct PricedRun {
  PlanReport report;
  ProfileTables tables;
};
PricedRun price_run(const FitRun& r, const MeasuredProfile& profile) {
  Workload w = r.workload;
  if (const double rho = profile_imbalance(profile, w.model.name); is_set(rho)) {
    w.training.imbalance = rho;
  }
  PricedRun p;
  p.tables = plan_tables(w, r.cluster, r.plan.parallel, &profile);
  p.report = CostModel(w, r.cluster, p.tables).evaluate(r.plan);
  return p;
}

bool run_uses(const FitRun& r, const std::string& device) {
  return std::any_of(r.plan.stages.begin(), r.plan.stages.end(), [&](const StagePlan& s) {
    return same_name(r.cluster.pools[static_cast<std::size_t>(s.device_type)].device.name, device);
  });
}

// The activation scale of `device` from the runs' per-stage max allocated.
std::optional<FitValue> fit_run_memory(const std::vector<FitRun>& runs, const std::string& device,
                                       MeasuredProfile& out) {
  std::vector<double> x, y;
  for (const FitRun& r : runs) {
    if (r.peaks.empty() || !run_uses(r, device)) continue;
    const PricedRun p = price_run(r, out);
    for (const ProfileRun::StagePeak& k : r.peaks) {
      if (k.stage >= static_cast<int>(p.report.stages.size())) continue;
      const StageReport& st = p.report.stages[static_cast<std::size_t>(k.stage)];
      const std::size_t h = static_cast<std::size_t>(st.device_type);
      if (!same_name(r.cluster.pools[h].device.name, device)) continue;
      const MemoryBreakdown& m = st.cost.memory;
      x.push_back(m.activations / p.tables.devices[h].activation_scale);
      y.push_back(k.max_allocated_bytes - (m.weights + m.gradients + m.optimizer + m.moe_buffers));
    }
  }
  if (x.empty()) return std::nullopt;
  FitValue f{"activation_scale", device, fit_origin(x, y), 0, 0, 0, "bytes", ""};
  std::vector<double> pred;
  pred.reserve(x.size());
  for (double xi : x) pred.push_back(is_set(f.value) ? f.value * xi : 0.0);
  residuals(f, y, pred);
  if (is_set(f.value) && f.value > 0) {
    calibration_for(out, device).activation_scale = f.value;
  } else {
    f.note = "not fitted: the parameter state alone exceeds the measured peaks";
  }
  return f;
}

constexpr double kEtaLo = 0.05, kEtaHi = 2.0;

}  // namespace

std::vector<FitValue> fit_runs(const std::vector<FitRun>& runs, MeasuredProfile& out) {
  std::vector<std::string> devices;  // the types the runs use, first seen first
  for (const FitRun& r : runs) {
    for (const StagePlan& s : r.plan.stages) {
      const std::string& name =
          r.cluster.pools[static_cast<std::size_t>(s.device_type)].device.name;
      if (std::none_of(devices.begin(), devices.end(),
                       [&](const std::string& d) { return same_name(d, name); })) {
        devices.push_back(name);
      }
    }
  }
  std::vector<FitValue> fits;
  for (const std::string& d : devices) {
    if (std::optional<FitValue> f = fit_run_memory(runs, d, out)) fits.push_back(*f);
  }
  // eta: one type at a time, the others held at their current values.
  auto latency = [&](const FitRun& r) { return price_run(r, out).report.latency_s; };
  auto set_eta = [&](const std::string& d, double eta) { calibration_for(out, d).eta = eta; };
  auto eta_of = [&](const std::string& d) {
    const double e = calibration_for(out, d).eta;
    return is_set(e) ? e : AnalyticAssumptions{}.eta;
  };
  // Whether a run's time depends on d's eta at all (a dense model, or
  // experts hidden behind another stage, do not).
  auto sensitive = [&](const std::string& d) {
    const double e = eta_of(d);
    bool any = false;
    for (const FitRun& r : runs) {
      if (!run_uses(r, d)) continue;
      set_eta(d, e);
      const double a = latency(r);
      set_eta(d, e * 1.01);
      any = any || std::abs(latency(r) - a) > 1e-9 * a;
    }
    set_eta(d, e);
    return any;
  };
  std::vector<std::string> fitted;
  for (const std::string& d : devices) {
    if (sensitive(d)) {
      fitted.push_back(d);
    } else {
      fits.push_back({"eta", d, kUnset, 0, 0, 0, "s",
                      "not fitted: no run's iteration time depends on its routed experts"});
    }
  }
  auto objective = [&](const std::string& d, double u) {
    set_eta(d, std::exp(u));
    double sum = 0;
    for (const FitRun& r : runs) {
      if (!run_uses(r, d)) continue;
      const double e = std::log(latency(r) / r.latency_s);
      sum += e * e;
    }
    return sum;
  };
  const int sweeps = fitted.size() > 1 ? 3 : 1;
  for (int sweep = 0; sweep < sweeps; ++sweep) {
    for (const std::string& d : fitted) {
      // Golden-section search over u = ln eta.
      const double phi = 0.5 * (std::sqrt(5.0) - 1.0);
      double a = std::log(kEtaLo), b = std::log(kEtaHi);
      double c = b - phi * (b - a), e = a + phi * (b - a);
      double fc = objective(d, c), fe = objective(d, e);
      for (int it = 0; it < 48; ++it) {
        if (fc <= fe) {
          b = e;
          e = c;
          fe = fc;
          c = b - phi * (b - a);
          fc = objective(d, c);
        } else {
          a = c;
          c = e;
          fc = fe;
          e = a + phi * (b - a);
          fe = objective(d, e);
        }
      }
      set_eta(d, std::exp(0.5 * (a + b)));
    }
  }
  for (const std::string& d : fitted) {
    const double eta = eta_of(d);
    FitValue f{"eta", d, eta, 0, 0, 0, "s", ""};
    std::vector<double> y, pred;
    double lo = 1, hi = 0;  // the share of the iteration that scales with 1/eta
    for (const FitRun& r : runs) {
      if (!run_uses(r, d)) continue;
      const double t = latency(r);
      set_eta(d, eta / 1.01);
      const double share = std::log(latency(r) / t) / std::log(1.01);
      set_eta(d, eta);
      lo = std::min(lo, share);
      hi = std::max(hi, share);
      y.push_back(r.latency_s);
      pred.push_back(t);
    }
    residuals(f, y, pred);
    char share[64];
    if (hi - lo > 0.005) {
      std::snprintf(share, sizeof share, "%.0f-%.0f%%", 100 * lo, 100 * hi);
    } else {
      std::snprintf(share, sizeof share, "%.0f%%", 100 * lo);
    }
    f.note = std::string(share) + " of the iteration scales with 1/eta";
    if (eta <= kEtaLo * 1.001 || eta >= kEtaHi * 0.999) {
      f.note += "; at the search's bound: eta alone cannot explain the measured time";
    }
    fits.push_back(f);
  }
  return fits;
}

FitValue fit_imbalance(const std::vector<RouterSample>& samples, const std::string& model,
                       MeasuredProfile& out) {
  FitValue f{"rho", model, kUnset, 0, 0, 0, "", ""};
  std::vector<double> rho;
  for (const RouterSample& s : samples) {
    if (s.tokens.empty()) continue;
    double sum = 0, mx = 0;
    for (double v : s.tokens) {
      sum += v;
      mx = std::max(mx, v);
    }
    if (sum <= 0) continue;
    rho.push_back(mx / (sum / static_cast<double>(s.tokens.size())));
  }
  if (rho.empty()) {
    f.note = "no router samples with tokens";
    return f;
  }
  double mean = 0;
  for (double r : rho) mean += r;
  mean /= static_cast<double>(rho.size());
  f.value = mean;
  residuals(f, rho, std::vector<double>(rho.size(), mean));
  ModelCalibration m;
  m.model = model;
  m.imbalance = mean;
  MeasuredProfile add;
  add.models.push_back(m);
  out.merge(add);
  return f;
}

}  // namespace hapmoe
