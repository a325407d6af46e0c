#include "io/inputs/plan_io.h"

#include <cstdio>

#include "costmodel/errors.h"
#include "io/inputs/files.h"
#include "io/inputs/model_io.h"

namespace hapmoe {

Recompute parse_recompute(const std::string& text, int stage_layers, const std::string& where) {
  const std::string t = to_lower(text);
  if (t == "none") return {RecomputeKind::kNone, 0};
  if (t == "selective") return {RecomputeKind::kSelective, 0};
  if (t.rfind("selective:", 0) == 0) {
    Recompute r{RecomputeKind::kSelective, 0, 0};
    std::size_t start = 10;
    while (start <= t.size()) {
      const std::size_t comma = std::min(t.find(',', start), t.size());
      const std::string name = t.substr(start, comma - start);
      const std::optional<RecomputeModule> mod = parse_recompute_module(name);
      if (!mod) {
        std::string known;
        for (const std::string& n : recompute_module_names(~0u))
          known += (known.empty() ? "" : ", ") + n;
        throw InputError(where, "unknown recompute module \"" + name + "\" in \"" + text +
                                    "\" (Megatron's modules: " + known + ")");
      }
      r.modules |= module_bit(*mod);
      start = comma + 1;
    }
    return r;
  }
  if (t == "full") return {RecomputeKind::kFull, stage_layers};
  if (t.rfind("full:", 0) == 0) {
    const auto k = parse_int_text(t.substr(5), 1, 1000000, where);
    return {RecomputeKind::kFull, static_cast<int>(k)};
  }
  throw InputError(
      where, "unknown recomputation \"" + text +
                 "\" (allowed: none, selective, selective:MODULE,..., full, full:K with K layers)");
}

namespace {

int resolve_device(const ClusterSpec& cluster, const std::string& name, const std::string& where) {
  for (int h = 0; h < cluster.num_types(); ++h) {
    if (to_lower(cluster.pools[static_cast<std::size_t>(h)].device.name) == to_lower(name))
      return h;
  }
  std::string known;
  for (const auto& p : cluster.pools) known += (known.empty() ? "" : ", ") + p.device.name;
  throw InputError(where, "device \"" + name + "\" is not in the cluster (it has: " + known + ")");
}

Plan read_plan_object(const Json& j, const std::string& origin, const std::string& pointer,
                      const ClusterSpec& cluster, int default_micro_batch) {
  ObjectReader root(j, origin, pointer);
  // Fields of an output plan object are accepted and ignored, so a plan
  // from `--plan-json` can be fed back.
  root.ignore({"latency_s", "throughput_tokens_per_s", "tflops_per_device", "mfu", "fits",
               "breakdown", "bottleneck_stage", "overlap"});
  Plan plan;
  {
    ObjectReader par(root.get_raw("parallel"), origin, root.pointer("parallel"));
    constexpr int kMaxDegree = 1 << 20;
    plan.parallel.pp = par.get_int("pp", 1, kMaxDegree);
    plan.parallel.tp = par.get_int("tp", 1, kMaxDegree);
    plan.parallel.cp = par.opt_int("cp", 1, kMaxDegree).value_or(1);
    plan.parallel.ep = par.opt_int("ep", 1, kMaxDegree).value_or(1);
    plan.parallel.tpe = par.opt_int("tpe", 1, kMaxDegree).value_or(1);
    plan.parallel.dp = par.get_int("dp", 1, kMaxDegree);
    plan.parallel.micro_batch =
        par.opt_int("micro_batch", 1, 1 << 20).value_or(default_micro_batch);
    plan.parallel.vpp = par.opt_int("vpp", 1, kMaxDegree).value_or(1);
    par.ignore({"num_microbatches"});
    par.finish();
  }
  const Json& stages = root.get_raw("stages");
  const std::string stages_ptr = root.pointer("stages");
  if (!stages.is_array()) {
    throw InputError(origin + ":" + stages_ptr,
                     "must be an array of stages, got " + describe(stages));
  }
  if (stages.empty()) throw InputError(origin + ":" + stages_ptr, "has no stages");
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const std::string sp = stages_ptr + "/" + std::to_string(i);
    ObjectReader st(stages[i], origin, sp);
    StagePlan s;
    s.device_type =
        resolve_device(cluster, st.get_string("device"), origin + ":" + st.pointer("device"));
    s.layers = st.get_int("layers", 1, 1000000);
    const auto rc = st.opt_string("recompute").value_or("none");
    s.recompute = parse_recompute(rc, s.layers, origin + ":" + st.pointer("recompute"));
    st.ignore({"devices", "first_layer", "forward_s", "backward_s", "memory_bytes",
               "host_memory_bytes", "capacity_bytes", "memory", "fits", "dp_sync_s", "optimizer_s",
               "step"});
    st.finish();
    plan.stages.push_back(s);
  }
  root.finish();
  return plan;
}

}  // namespace

Plan parse_plan_json(const std::string& text, const std::string& origin, const ClusterSpec& cluster,
                     int default_micro_batch, int index) {
  const Json j = parse_json(text, origin);
  if (j.is_object() && j.contains("plans")) {
    ObjectReader doc(j, origin, "");
    doc.ignore({"search", "run", "baseline", "model", "cluster", "hapmoe", "job"});
    const Json& plans = doc.get_raw("plans");
    doc.finish();
    if (!plans.is_array() || plans.empty()) {
      throw InputError(origin + ":/plans", "must be a non-empty array of plans");
    }
    if (index < 0 || static_cast<std::size_t>(index) >= plans.size()) {
      throw InputError(origin + ":/plans", "has " + std::to_string(plans.size()) +
                                               " plans, plan index " + std::to_string(index) +
                                               " does not exist");
    }
    return read_plan_object(plans[static_cast<std::size_t>(index)], origin,
                            "/plans/" + std::to_string(index), cluster, default_micro_batch);
  }
  if (index != 0) {
    throw InputError(origin, "holds one plan, not a \"plans\" list: plan index " +
                                 std::to_string(index) + " does not exist");
  }
  return read_plan_object(j, origin, "", cluster, default_micro_batch);
}

bool apply_plan_job(const std::string& text, const std::string& origin, Workload& workload) {
  const Json j = parse_json(text, origin);
  if (!j.is_object() || !j.contains("job")) return false;
  ObjectReader job(j.at("job"), origin, "/job");
  job.ignore({"space", "variants", "recompute_scope", "recompute", "overlaps"});
  const Json* training = job.opt_raw("training");
  job.finish();
  if (training == nullptr) return false;
  ObjectReader t(*training, origin, "/job/training");
  const auto where = [&](const char* key) { return origin + ":" + t.pointer(key); };
  TrainingSpec& out = workload.training;
  out.precision = parse_precision(t.get_string("precision"), where("precision"));
  if (const auto r = t.opt_string("fp8_recipe")) {
    out.fp8_recipe = parse_fp8_recipe(*r, where("fp8_recipe"));
  }
  out.distributed_optimizer = t.get_bool("distributed_optimizer");
  out.fsdp = parse_fsdp(t.get_string("fsdp"), where("fsdp"));
  out.optimizer_offload_fraction = t.get_number("optimizer_offload_fraction", 0.0, 1.0);
  out.dispatcher = parse_dispatcher(t.get_string("dispatcher"), where("dispatcher"));
  // The overlaps the plan was costed with (files of before 2026-12-01 have
  // none: the workload's stay).
  if (const Json* o = t.opt_raw("overlap")) {
    ObjectReader ov(*o, origin, "/job/training/overlap");
    out.overlap.grad_reduce = ov.get_bool("grad_reduce");
    out.overlap.param_gather = ov.get_bool("param_gather");
    out.overlap.tp_comm = ov.get_bool("tp_comm");
    out.overlap.moe_ep_comm = ov.get_bool("moe_ep_comm");
    out.overlap.delay_wgrad = ov.get_bool("delay_wgrad");
    ov.finish();
  }
  t.finish();
  return true;
}

nlohmann::ordered_json overlap_json(const Overlap& o) {
  return {{"grad_reduce", o.grad_reduce},
          {"param_gather", o.param_gather},
          {"tp_comm", o.tp_comm},
          {"moe_ep_comm", o.moe_ep_comm},
          {"delay_wgrad", o.delay_wgrad}};
}

nlohmann::ordered_json job_training_json(const TrainingSpec& t) {
  nlohmann::ordered_json j = {{"precision", to_string(t.precision)}};
  if (t.precision == Precision::kFp8) j["fp8_recipe"] = to_string(t.fp8_recipe);
  j["distributed_optimizer"] = t.distributed_optimizer;
  j["fsdp"] = to_string(t.fsdp);
  j["optimizer_offload_fraction"] = t.optimizer_offload_fraction;
  j["dispatcher"] = to_string(t.dispatcher);
  j["overlap"] = overlap_json(t.overlap);
  return j;
}

Plan load_plan(const std::string& path, const ClusterSpec& cluster, int default_micro_batch,
               int index) {
  return parse_plan_json(read_regular_file(path), path, cluster, default_micro_batch, index);
}

nlohmann::ordered_json plan_report_json(const PlanReport& r, const ClusterSpec& cluster) {
  using nlohmann::ordered_json;
  ordered_json p;
  p["latency_s"] = r.latency_s;
  p["throughput_tokens_per_s"] = r.throughput_tokens_per_s;
  p["tflops_per_device"] = r.tflops_per_device;
  p["mfu"] = r.mfu;
  p["fits"] = r.fits;
  const ParallelConfig& pi = r.plan.parallel;
  p["parallel"] = {{"pp", pi.pp},
                   {"tp", pi.tp},
                   {"cp", pi.cp},
                   {"ep", pi.ep},
                   {"tpe", pi.tpe},
                   {"dp", pi.dp},
                   {"micro_batch", pi.micro_batch},
                   {"num_microbatches", r.num_microbatches}};
  if (pi.vpp > 1) p["parallel"]["vpp"] = pi.vpp;  // absent: plain 1F1B
  ordered_json stages = ordered_json::array();
  for (const StageReport& s : r.stages) {
    ordered_json st;
    st["device"] = cluster.pools[static_cast<std::size_t>(s.device_type)].device.name;
    st["devices"] = s.devices;
    st["first_layer"] = s.first_layer;
    st["layers"] = s.layers;
    st["recompute"] = to_string(s.recompute, s.layers);
    st["forward_s"] = s.cost.fwd_s;
    st["backward_s"] = s.cost.bwd_s;
    st["dp_sync_s"] = s.cost.dp_sync_s;
    st["optimizer_s"] = s.cost.optimizer_s;
    st["memory_bytes"] = s.cost.memory.total();
    if (s.cost.host_bytes > 0) st["host_memory_bytes"] = s.cost.host_bytes;
    st["capacity_bytes"] = s.cost.capacity_bytes;
    st["memory"] = {
        {"weights", s.cost.memory.weights},         {"gradients", s.cost.memory.gradients},
        {"optimizer", s.cost.memory.optimizer},     {"activations", s.cost.memory.activations},
        {"moe_buffers", s.cost.memory.moe_buffers}, {"overhead", s.cost.memory.overhead}};
    st["fits"] = s.cost.fits();
    const auto parts = [](const StepParts& x) {
      return ordered_json{{"compute_s", x.compute},
                          {"tp_s", x.tp},
                          {"cp_s", x.cp},
                          {"ep_s", x.ep},
                          {"p2p_s", x.p2p},
                          {"recompute_s", x.recompute},
                          {"dp_s", x.dp},
                          {"host_s", x.host},
                          {"tp_hidden_s", x.tp_hidden},
                          {"ep_hidden_s", x.ep_hidden}};
    };
    st["step"] = {{"forward", parts(s.cost.fwd_parts)}, {"backward", parts(s.cost.bwd_parts)}};
    stages.push_back(st);
  }
  p["stages"] = stages;
  p["breakdown"] = {
      {"edge_s", r.breakdown.edge_s},          {"middle_s", r.breakdown.middle_s},
      {"step_s", r.breakdown.step_s},          {"bubble_s", r.breakdown.bubble_s()},
      {"dp_sync_s", r.breakdown.dp_sync_s},    {"optimizer_s", r.breakdown.optimizer_s},
      {"dp_hidden_s", r.breakdown.dp_hidden_s}};
  // Which of Megatron's overlaps the plan was costed with (docs/costmodel.md,
  // "Overlap").
  p["overlap"] = overlap_json(r.overlap);
  return p;
}

}  // namespace hapmoe
