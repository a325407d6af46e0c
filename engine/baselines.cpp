#include "engine/baselines.h"

#include <algorithm>
#include <numeric>
#include <set>
#include <utility>

#include "costmodel/errors.h"
#include "partition/config_space.h"
#include "partition/constraints.h"

namespace hapmoe {

Baseline parse_baseline(const std::string& text, const std::string& where) {
  for (const Baseline b : all_baselines()) {
    if (text == to_string(b)) return b;
  }
  throw InputError(where, "unknown baseline '" + text +
                              "' (hapmoe, uniform, mi, hetermoe-style, metis-style or "
                              "homogeneous-only)");
}

std::string to_string(Baseline b) {
  switch (b) {
    case Baseline::kNone:
      return "hapmoe";
    case Baseline::kUniform:
      return "uniform";
    case Baseline::kMi:
      return "mi";
    case Baseline::kHeterMoeStyle:
      return "hetermoe-style";
    case Baseline::kMetisStyle:
      return "metis-style";
    case Baseline::kHomogeneousOnly:
      return "homogeneous-only";
  }
  return "?";
}

std::vector<Baseline> all_baselines() {
  return {Baseline::kNone,          Baseline::kUniform,    Baseline::kMi,
          Baseline::kHeterMoeStyle, Baseline::kMetisStyle, Baseline::kHomogeneousOnly};
}

ClusterSpec single_type(const ClusterSpec& cluster, int type) {
  ClusterSpec one;
  one.name = cluster.name + "/" + cluster.pools[static_cast<std::size_t>(type)].device.name;
  one.pools.push_back(cluster.pools[static_cast<std::size_t>(type)]);
  return one;
}

namespace {

// Stages per device type for `pp` stages in proportion to the devices of
// each type (largest remainder, pool order on ties), at most cap[h] each,
// at least one for every type with room when pp allows. Empty if the
// stages do not fit.
std::vector<int> proportional_stages(const ClusterSpec& cluster, const std::vector<int>& cap,
                                     int pp) {
  const int types = cluster.num_types();
  std::vector<int> c(static_cast<std::size_t>(types), 0);
  double devices = 0.0;
  int usable = 0;
  for (int h = 0; h < types; ++h) {
    if (cap[static_cast<std::size_t>(h)] == 0) continue;
    devices += cluster.pools[static_cast<std::size_t>(h)].devices();
    ++usable;
  }
  if (usable == 0) return {};
  std::vector<std::pair<double, int>> remainders;  // (-fraction, type)
  int given = 0;
  for (int h = 0; h < types; ++h) {
    if (cap[static_cast<std::size_t>(h)] == 0) continue;
    const double share = pp * cluster.pools[static_cast<std::size_t>(h)].devices() / devices;
    c[static_cast<std::size_t>(h)] = static_cast<int>(share);
    given += c[static_cast<std::size_t>(h)];
    remainders.emplace_back(-(share - c[static_cast<std::size_t>(h)]), h);
  }
  std::sort(remainders.begin(), remainders.end());
  for (std::size_t k = 0; given < pp; k = (k + 1) % remainders.size(), ++given) {
    ++c[static_cast<std::size_t>(remainders[k].second)];
  }
  // Every usable type gets a stage when there are enough stages: from the
  // type with the most.
  if (pp >= usable) {
    for (int h = 0; h < types; ++h) {
      if (cap[static_cast<std::size_t>(h)] == 0 || c[static_cast<std::size_t>(h)] > 0) continue;
      const auto most = std::max_element(c.begin(), c.end());
      --*most;
      c[static_cast<std::size_t>(h)] = 1;
    }
  }
  // Capacity: the excess moves to types with room, in pool order.
  int excess = 0;
  for (int h = 0; h < types; ++h) {
    const int over = c[static_cast<std::size_t>(h)] - cap[static_cast<std::size_t>(h)];
    if (over > 0) {
      excess += over;
      c[static_cast<std::size_t>(h)] = cap[static_cast<std::size_t>(h)];
    }
  }
  for (int h = 0; h < types && excess > 0; ++h) {
    const int room = cap[static_cast<std::size_t>(h)] - c[static_cast<std::size_t>(h)];
    const int take = std::min(room, excess);
    c[static_cast<std::size_t>(h)] += take;
    excess -= take;
  }
  if (excess > 0) return {};
  return c;
}

// Appends `part` (a search on the cluster of type `type` alone) to
// `into`, its device types mapped back to the full cluster.
void append(SearchResult& into, SearchResult part, int type) {
  const auto remap = [&](std::optional<PlanCandidate>& c) {
    if (!c) return;
    for (StagePlan& s : c->plan.stages) s.device_type = type;
  };
  const std::size_t offset = into.configs.size();
  for (ConfigOutcome& o : part.outcomes) {
    remap(o.best);
    if (o.closest.known()) o.closest.device_type = type;
  }
  if (part.closest.known()) part.closest.device_type = type;
  if (part.closest.bytes < into.closest.bytes) into.closest = part.closest;
  for (PlanCandidate& c : part.top) {
    for (StagePlan& s : c.plan.stages) s.device_type = type;
    into.top.push_back(std::move(c));
  }
  const std::int64_t configs = into.stats.configs + part.stats.configs;
  into.stats += part.stats;
  into.stats.configs = configs;
  const auto extend = [](auto& a, auto& b) { a.insert(a.end(), b.begin(), b.end()); };
  extend(into.configs, part.configs);
  for (std::int32_t& k : part.outcome_of) {
    if (k >= 0) k += static_cast<std::int32_t>(into.outcomes.size());
  }
  extend(into.outcomes, part.outcomes);
  extend(into.outcome_of, part.outcome_of);
  into.stopped = std::max(into.stopped, part.stopped);
  into.not_searched += part.not_searched;
  extend(into.lower_bounds, part.lower_bounds);
  extend(into.estimates, part.estimates);
  extend(into.ran_on, part.ran_on);
  extend(into.parts, part.parts);
  for (int& r : part.round_of) r = r < 0 ? r : r + into.rounds;
  extend(into.round_of, part.round_of);
  for (UnitFigures& u : part.units) {
    u.config += offset;
    u.round += into.rounds;
  }
  extend(into.units, part.units);
  into.rounds += part.rounds;
  if (into.ranks.empty()) {
    into.ranks = part.ranks;
  } else {
    for (std::size_t k = 0; k < into.ranks.size() && k < part.ranks.size(); ++k) {
      RankFigures& a = into.ranks[k];
      const RankFigures& b = part.ranks[k];
      a.configs += b.configs;
      a.parts += b.parts;
      a.transitions += b.transitions;
      a.estimate += b.estimate;
      a.busy_s += b.busy_s;
      a.idle_s += b.idle_s;
    }
  }
}

// The best of the searches on each device type alone, merged.
SearchResult homogeneous_only(const Workload& w, const ClusterSpec& cluster,
                              const SearchOptions& opt, Comm& comm, const RunOptions& run) {
  SearchResult all;
  for (int h = 0; h < cluster.num_types(); ++h) {
    append(all, run_search(w, single_type(cluster, h), opt, false, comm, run), h);
  }
  std::stable_sort(all.top.begin(), all.top.end(), candidate_less);
  if (static_cast<int>(all.top.size()) > opt.top_k) {
    all.top.resize(static_cast<std::size_t>(opt.top_k));
  }
  return all;
}

// The two fixed rules (docs/baselines.md): MI's, and HeterMoE-style's,
// which is MI's parallel configuration with the layers split by each
// type's speed and selective recomputation tried before full.
enum class Rule { kMi, kHeterMoeStyle };

// A rule for one TP and CP: the smallest PP whose plan fits.
std::optional<PlanCandidate> rule_plan_with_cp(Rule rule, const Workload& w,
                                               const ClusterSpec& cluster,
                                               const ConstraintOptions& constraints,
                                               const CostModel& model, const ParallelConfig& base,
                                               const std::vector<int>& dps, int usable);

// A rule on every device type of `cluster`.
std::optional<PlanCandidate> rule_plan_all_types(Rule rule, const Workload& w,
                                                 const ClusterSpec& cluster,
                                                 const ConstraintOptions& constraints,
                                                 const MeasuredProfile* profile) {
  const ModelSpec& m = w.model;
  const TrainingSpec& t = w.training;
  if (t.global_batch % t.micro_batch != 0) return std::nullopt;
  // TP: within the smallest node, at most 8, dividing heads and KV groups.
  int node = 8;
  for (const DevicePool& p : cluster.pools) node = std::min(node, p.devices_per_node);
  int tp = 1;
  for (const int d : divisors(std::gcd(m.num_heads, m.num_kv_heads))) {
    if (d <= node) tp = d;
  }
  // CP: 1, or the smallest that lets a long sequence fit.
  std::vector<ParallelConfig> bases;
  for (const int cp : divisors(t.seq_len)) {
    if (cp == 1 || t.seq_len % (2 * cp) == 0) bases.push_back({1, tp, cp, 1, 1, 1, t.micro_batch});
  }
  const ProfileTables tables = tables_for(w, cluster, bases, profile);
  const CostModel model(w, cluster, tables);
  const std::vector<int> dps = divisors(t.global_batch / t.micro_batch);
  int usable = 0;
  for (const DevicePool& p : cluster.pools) usable += p.devices() >= tp ? 1 : 0;
  for (const ParallelConfig& base : bases) {
    if (base.tp * base.cp > cluster.total_devices()) break;
    if (auto plan = rule_plan_with_cp(rule, w, cluster, constraints, model, base, dps, usable)) {
      return plan;
    }
  }
  return std::nullopt;
}

// A rule's plan on every type, else without the types with the least
// memory (as mi_plan says).
std::optional<PlanCandidate> rule_plan(Rule rule, const Workload& w, const ClusterSpec& cluster,
                                       const ConstraintOptions& constraints,
                                       const MeasuredProfile* profile) {
  if (auto plan = rule_plan_all_types(rule, w, cluster, constraints, profile)) return plan;
  // What a practitioner does when the small devices cannot hold their
  // share: leave them out, the device types with the least memory first.
  std::vector<int> by_memory(static_cast<std::size_t>(cluster.num_types()));
  std::iota(by_memory.begin(), by_memory.end(), 0);
  std::stable_sort(by_memory.begin(), by_memory.end(), [&](int a, int b) {
    return cluster.pools[static_cast<std::size_t>(a)].device.memory_bytes >
           cluster.pools[static_cast<std::size_t>(b)].device.memory_bytes;
  });
  for (std::size_t keep = by_memory.size() - 1; keep >= 1; --keep) {
    std::vector<int> kept(by_memory.begin(), by_memory.begin() + static_cast<long>(keep));
    std::sort(kept.begin(), kept.end());  // pool order
    ClusterSpec sub = cluster;
    sub.pools.clear();
    sub.cross_links.clear();
    for (const int h : kept) sub.pools.push_back(cluster.pools[static_cast<std::size_t>(h)]);
    for (const CrossLink& l : cluster.cross_links) {
      const auto a = std::find(kept.begin(), kept.end(), l.type_a);
      const auto b = std::find(kept.begin(), kept.end(), l.type_b);
      if (a == kept.end() || b == kept.end()) continue;
      sub.cross_links.push_back({static_cast<int>(a - kept.begin()),
                                 static_cast<int>(b - kept.begin()), l.bandwidth, l.latency});
    }
    std::optional<PlanCandidate> plan = rule_plan_all_types(rule, w, sub, constraints, profile);
    if (!plan) continue;
    for (StagePlan& st : plan->plan.stages) {
      st.device_type = kept[static_cast<std::size_t>(st.device_type)];
    }
    // Scored on the whole cluster, like every other plan.
    const ProfileTables tables = tables_for(w, cluster, {plan->plan.parallel}, profile);
    plan->latency_s = CostModel(w, cluster, tables).evaluate(plan->plan).latency_s;
    return plan;
  }
  return std::nullopt;
}

// HeterMoE-style's asymmetric assignment: the N layers over the stages in
// proportion to each stage's speed on a layer (1 / its type's step of a
// MoE layer, of a dense one for a dense model), largest remainder first
// (ties: the earlier stage), at least one each.
void split_by_speed(const CostModel& model, Plan& plan) {
  const int n = model.workload().model.num_layers;
  const bool moe = model.workload().model.is_moe();
  std::vector<double> share;
  double total = 0.0;
  for (const StagePlan& s : plan.stages) {
    const TypeCosts tc = model.type_costs(plan.parallel, s.device_type);
    const LayerCost& layer = moe ? tc.moe : tc.dense;
    share.push_back(1.0 / (layer.fwd_s + layer.bwd_s));
    total += share.back();
  }
  std::vector<std::pair<double, std::size_t>> remainders;  // (-fraction, stage)
  int given = 0;
  for (std::size_t i = 0; i < plan.stages.size(); ++i) {
    const double exact = n * share[i] / total;
    plan.stages[i].layers = std::max(1, static_cast<int>(exact));
    given += plan.stages[i].layers;
    remainders.emplace_back(-(exact - static_cast<int>(exact)), i);
  }
  std::sort(remainders.begin(), remainders.end());
  for (std::size_t k = 0; given < n; k = (k + 1) % remainders.size(), ++given) {
    ++plan.stages[remainders[k].second].layers;
  }
  // Stages raised to one layer are paid back by the largest ones.
  while (given > n) {
    auto most = std::max_element(
        plan.stages.begin(), plan.stages.end(),
        [](const StagePlan& a, const StagePlan& b) { return a.layers < b.layers; });
    --most->layers;
    --given;
  }
}

// Each stage that does not fit recomputes more (none, selective, full)
// until it fits or recomputes everything; the plan's report.
PlanReport fit_stage_by_stage(const CostModel& model, Plan& plan) {
  PlanReport report = model.evaluate(plan);
  for (bool raised = true; !report.fits && raised;) {
    raised = false;
    for (std::size_t i = 0; i < plan.stages.size(); ++i) {
      if (report.stages[i].cost.fits()) continue;
      StagePlan& s = plan.stages[i];
      if (s.recompute.kind == RecomputeKind::kNone) {
        s.recompute = {RecomputeKind::kSelective};
      } else if (s.recompute.kind == RecomputeKind::kSelective) {
        s.recompute = {RecomputeKind::kFull, s.layers};
      } else {
        continue;
      }
      raised = true;
    }
    if (raised) report = model.evaluate(plan);
  }
  return report;
}

std::optional<PlanCandidate> rule_plan_with_cp(Rule rule, const Workload& w,
                                               const ClusterSpec& cluster,
                                               const ConstraintOptions& constraints,
                                               const CostModel& model, const ParallelConfig& base,
                                               const std::vector<int>& dps, int usable) {
  const ModelSpec& m = w.model;
  std::optional<PlanCandidate> best;
  for (int pp = std::max(1, usable); pp <= m.num_layers; ++pp) {
    for (std::size_t d = dps.size(); d-- > 0;) {  // the largest DP first
      ParallelConfig pi = base;
      pi.pp = pp;
      pi.dp = dps[d];
      if (m.is_moe()) {
        for (const int e : divisors(m.num_experts)) {
          if (pi.stage_devices() % e == 0) pi.ep = e;
        }
      }
      if (!check_parallel(pi, w).empty()) continue;
      std::vector<int> cap;
      cap.reserve(static_cast<std::size_t>(cluster.num_types()));
      for (int h = 0; h < cluster.num_types(); ++h) {
        cap.push_back(stage_capacity(cluster, h, pi, constraints));
      }
      const std::vector<int> per_type = proportional_stages(cluster, cap, pp);
      if (per_type.empty()) continue;  // the stages do not fit: a smaller DP
      // The largest DP that fits the cluster: this PP's plan, fitting in
      // memory or not (a smaller DP only needs more memory per device).
      Plan plan;
      plan.parallel = pi;
      for (int h = 0; h < cluster.num_types(); ++h) {
        for (int k = 0; k < per_type[static_cast<std::size_t>(h)]; ++k) {
          const int i = static_cast<int>(plan.stages.size());
          plan.stages.push_back({h, m.num_layers / pp + (i < m.num_layers % pp ? 1 : 0), {}});
        }
      }
      PlanReport report;
      if (rule == Rule::kMi) {
        // One recomputation for every stage: none, else full.
        report = model.evaluate(plan);
        if (!report.fits) {
          for (StagePlan& s : plan.stages) s.recompute = {RecomputeKind::kFull, s.layers};
          report = model.evaluate(plan);
        }
      } else {
        split_by_speed(model, plan);
        report = fit_stage_by_stage(model, plan);
      }
      if (report.fits) {
        // MI takes the smallest PP that fits; HeterMoE-style, scheduling
        // its layers itself, the fastest of every PP's plan.
        if (rule == Rule::kMi) return PlanCandidate{report.latency_s, plan};
        if (!best || report.latency_s < best->latency_s) best = {report.latency_s, plan};
      }
      break;  // next PP
    }
  }
  return best;
}

}  // namespace

std::optional<PlanCandidate> mi_plan(const Workload& w, const ClusterSpec& cluster,
                                     const ConstraintOptions& constraints,
                                     const MeasuredProfile* profile) {
  return rule_plan(Rule::kMi, w, cluster, constraints, profile);
}

std::optional<PlanCandidate> hetermoe_style_plan(const Workload& w, const ClusterSpec& cluster,
                                                 const ConstraintOptions& constraints,
                                                 const MeasuredProfile* profile) {
  return rule_plan(Rule::kHeterMoeStyle, w, cluster, constraints, profile);
}

SearchResult uniform_ablation(const Workload& w, const ClusterSpec& cluster,
                              const SearchOptions& options, bool bruteforce, Comm& comm,
                              const RunOptions& run) {
  SearchOptions free = options;
  free.uniform = false;
  free.top_k = 1;
  const SearchResult best = run_search(w, cluster, free, false, comm, run);
  SearchOptions even = options;
  even.uniform = true;
  if (!best.top.empty()) {
    const Plan& plan = best.top.front().plan;
    even.devices_per_type.assign(static_cast<std::size_t>(cluster.num_types()), 0);
    for (const StagePlan& s : plan.stages) {
      even.devices_per_type[static_cast<std::size_t>(s.device_type)] +=
          plan.parallel.stage_devices();
    }
  }
  return run_search(w, cluster, even, bruteforce, comm, run);
}

BaselineRun run_baseline(Baseline baseline, const Workload& w, const ClusterSpec& cluster,
                         const SearchOptions& options, Comm& comm, const RunOptions& run) {
  BaselineRun out;
  SearchOptions opt = options;
  switch (baseline) {
    case Baseline::kNone:
      out.result = opt.uniform ? uniform_ablation(w, cluster, opt, false, comm, run)
                               : run_search(w, cluster, opt, false, comm, run);
      break;
    case Baseline::kUniform:
      out.result = uniform_ablation(w, cluster, opt, false, comm, run);
      out.rule = "layers split evenly (N/PP) on the devices of hapmoe's best plan";
      break;
    case Baseline::kHomogeneousOnly:
      out.result = homogeneous_only(w, cluster, opt, comm, run);
      out.rule = "the best plan on one device type alone";
      break;
    case Baseline::kMetisStyle: {
      // EP and TPE from homogeneous profiling: those of the best plan on
      // one device type alone (else of its closest miss, else 1 and 1).
      const SearchResult homogeneous = homogeneous_only(w, cluster, opt, comm, run);
      std::string from;
      if (!homogeneous.top.empty()) {
        const Plan& best = homogeneous.top.front().plan;
        opt.space.fixed_ep = best.parallel.ep;
        opt.space.fixed_tpe = best.parallel.tpe;
        from =
            "the best plan on " +
            cluster.pools[static_cast<std::size_t>(best.stages.front().device_type)].device.name +
            " alone";
      } else if (homogeneous.closest.known()) {
        opt.space.fixed_ep = homogeneous.closest.parallel.ep;
        opt.space.fixed_tpe = homogeneous.closest.parallel.tpe;
        from = "the closest miss on one device type (nothing fits on one type alone)";
      } else {
        opt.space.fixed_ep = 1;
        opt.space.fixed_tpe = 1;
        from = "no homogeneous configuration at all";
      }
      out.result = run_search(w, cluster, opt, false, comm, run);
      // A limit that stopped the first search leaves EP and TPE unproven.
      out.result.stopped = std::max(out.result.stopped, homogeneous.stopped);
      out.rule = "EP=" + std::to_string(opt.space.fixed_ep) +
                 " TPE=" + std::to_string(opt.space.fixed_tpe) + " fixed from " + from;
      break;
    }
    case Baseline::kMi:
    case Baseline::kHeterMoeStyle: {
      const bool mi = baseline == Baseline::kMi;
      const std::optional<PlanCandidate> plan =
          mi ? mi_plan(w, cluster, opt.space.constraints, opt.profile.get())
             : hetermoe_style_plan(w, cluster, opt.space.constraints, opt.profile.get());
      SearchResult& r = out.result;
      r.stats.configs = 1;
      for (int k = 0; k < comm.size(); ++k) r.ranks.push_back({k, run.threads});
      out.rule = mi ? "Megatron-LM set by hand (docs/baselines.md)"
                    : "MI's configuration, layers split by each type's speed on a layer "
                      "(docs/baselines.md)";
      if (!plan) {
        out.rule += ": no PP fits in memory";
        break;
      }
      std::set<int> used;
      for (const StagePlan& st : plan->plan.stages) used.insert(st.device_type);
      if (static_cast<int>(used.size()) < cluster.num_types()) {
        out.rule += "; stages on every device type do not fit, so only on";
        for (const int h : used) {
          out.rule += " " + cluster.pools[static_cast<std::size_t>(h)].device.name;
        }
      }
      r.stats.configs_evaluated = 1;
      r.stats.feasible = 1;
      r.configs = {plan->plan.parallel};
      ConfigOutcome o;
      o.best = *plan;
      o.stats.configs_evaluated = 1;
      o.stats.feasible = 1;
      r.outcomes = {o};
      r.outcome_of = {0};
      r.lower_bounds = {0.0};
      r.estimates = {0.0};
      r.ran_on = {0};
      r.round_of = {0};
      r.parts = {1};
      r.rounds = 1;
      r.top = {*plan};
      break;
    }
  }
  return out;
}

}  // namespace hapmoe
