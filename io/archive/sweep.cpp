// Sweep files (docs/archive.md, "Sweep file"): parsing and validation.
// Every case is resolved here, once, before anything runs; the runner
// (io/cli/sweep_run.cpp) only loads the models and clusters they name.
//
// A product's axes vary in the sorted order of their keys, the last
// fastest (JSON objects have no order that survives every tool), so the
// case list of a file is the same wherever it is read.
#include "io/archive/sweep.h"

#include "engine/baselines.h"

#include <algorithm>
#include <set>

#include "costmodel/errors.h"
#include "costmodel/text.h"
#include "io/inputs/files.h"
#include "io/inputs/json_strict.h"

namespace hapmoe {

namespace {

// Every field a case may set (in a case, in "defaults" or in a product).
constexpr const char* kCaseFields[] = {"name",
                                       "model",
                                       "cluster",
                                       "top_k",
                                       "prune",
                                       "delta",
                                       "eta",
                                       "uniform",
                                       "bound",
                                       "count_only",
                                       "bruteforce",
                                       "max_pp",
                                       "allow_cross_node_tp",
                                       "round",
                                       "seq_len",
                                       "global_batch",
                                       "micro_batch",
                                       "precision",
                                       "dispatcher",
                                       "imbalance",
                                       "gamma",
                                       "distributed_optimizer",
                                       "baseline",
                                       "fp8_recipe",
                                       "fsdp",
                                       "optimizer_offload_fraction",
                                       "activation_offload_layers",
                                       "space",
                                       "recompute_scope",
                                       "max_micro_batch",
                                       "max_vpp",
                                       "overlaps"};

bool is_case_field(const std::string& key) {
  for (const char* f : kCaseFields) {
    if (key == f) return true;
  }
  return false;
}

void check_fields(const Json& object, const std::string& origin, const std::string& pointer,
                  bool allow_name) {
  if (!object.is_object()) {
    throw InputError(origin + ":" + pointer, "must be an object, got " + describe(object));
  }
  for (const auto& item : object.items()) {
    if (!is_case_field(item.key())) {
      throw InputError(
          origin + ":" + pointer + "/" + item.key(),
          "unknown field (a case has: model, cluster, name, top_k, prune, delta, "
          "eta, uniform, bound, count_only, bruteforce, max_pp, allow_cross_node_tp, round, "
          "seq_len, global_batch, micro_batch, precision, dispatcher, imbalance, "
          "gamma, distributed_optimizer, baseline, fp8_recipe, fsdp, "
          "optimizer_offload_fraction, activation_offload_layers, space, recompute_scope, "
          "max_micro_batch, max_vpp, overlaps)");
    }
    if (!allow_name && item.key() == "name") {
      throw InputError(origin + ":" + pointer + "/name",
                       "names belong to single cases (generated for products)");
    }
  }
}

std::string render(const Json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// A merged case object (defaults, then the case's own fields) and where it
// came from.
struct RawCase {  // NOLINT(bugprone-exception-escape): nlohmann::json members, as elsewhere
  Json fields;
  Json own;             // the fields not from "defaults" (for the generated name)
  std::string pointer;  // for messages
};

SweepCase resolve(const RawCase& raw, const std::string& origin) {
  ObjectReader r(raw.fields, origin, raw.pointer);
  SweepCase c;
  c.model = r.get_string("model");
  c.cluster = r.get_string("cluster");
  SearchOptions& o = c.options;
  if (auto v = r.opt_int("top_k", 1, 1000)) o.top_k = *v;
  if (auto v = r.opt_string("prune"))
    o.prune = parse_prune_set(*v, origin + ":" + r.pointer("prune"));
  if (auto v = r.opt_number("delta", 0.0, 10.0)) o.delta = *v;
  if (auto v = r.opt_number("eta", 0.0, 1e6)) o.eta = *v;
  if (auto v = r.opt_bool("uniform")) o.uniform = *v;
  if (auto v = r.opt_bool("bound")) o.bound = *v;
  // Counting the plain DP (docs/search.md, "Counting the plain DP"): the
  // bound would be computed and never used.
  if (auto v = r.opt_bool("count_only")) o.count_only = *v;
  if (o.count_only) o.bound = false;
  if (auto v = r.opt_int("max_pp", 1, 100000)) o.space.max_pp = *v;
  if (auto v = r.opt_bool("allow_cross_node_tp")) o.space.constraints.allow_cross_node_tp = *v;
  c.bruteforce = r.opt_bool("bruteforce").value_or(false);
  if (auto v = r.opt_string("baseline")) {
    c.baseline = parse_baseline(*v, origin + ":" + r.pointer("baseline"));
    if (c.bruteforce && c.baseline != Baseline::kNone) {
      r.fail("baseline", "does not go with bruteforce");
    }
  }
  if (o.count_only && (c.bruteforce || c.baseline != Baseline::kNone)) {
    r.fail("count_only", "counts hapmoe's DP: not with bruteforce or a baseline");
  }
  c.round = r.opt_int("round", 1, 1 << 20).value_or(32);
  // The job-wide knobs (plan's --space, --max-micro-batch, --max-vpp,
  // --recompute-scope): searched by hapmoe's search only.
  if (auto v = r.opt_string("space"))
    c.job = parse_job_space(*v, origin + ":" + r.pointer("space"));
  if (auto v = r.opt_int("max_micro_batch", 1, 1 << 20)) c.job.max_micro_batch = *v;
  if (auto v = r.opt_int("max_vpp", 1, 1024)) c.job.max_vpp = *v;
  // As plan's --overlaps: recipe by default with a space.
  if (c.job.dims != 0) c.job.overlaps = JobOverlaps::kRecipe;
  if (auto v = r.opt_string("overlaps")) {
    if (c.job.dims == 0) r.fail("overlaps", "goes with space (the job-wide knobs)");
    c.job.overlaps = parse_job_overlaps(*v, origin + ":" + r.pointer("overlaps"));
  }
  if (auto v = r.opt_string("recompute_scope")) {
    if (*v != "stage" && *v != "job") {
      r.fail("recompute_scope", "expected stage or job, got \"" + *v + "\"");
    }
    c.job.job_recompute = *v == "job";
  }
  if (c.job.active() && (c.bruteforce || c.baseline != Baseline::kNone || o.count_only)) {
    r.fail(c.job.dims != 0 ? "space" : "recompute_scope",
           "the job-wide knobs are searched by hapmoe's search only: not with bruteforce, a "
           "baseline or count_only");
  }
  TrainingOverrides& t = c.overrides;
  t.seq_len = r.opt_int("seq_len", 1, 1 << 22);
  t.global_batch = r.opt_int("global_batch", 1, 1 << 30);
  t.micro_batch = r.opt_int("micro_batch", 1, 1 << 20);
  if (auto v = r.opt_string("precision")) {
    t.precision = parse_precision(*v, origin + ":" + r.pointer("precision"));
  }
  if (auto v = r.opt_string("dispatcher")) {
    t.dispatcher = parse_dispatcher(*v, origin + ":" + r.pointer("dispatcher"));
  }
  t.imbalance = r.opt_number("imbalance", 1.0, 1000.0);
  t.gamma = r.opt_number("gamma", 0.0, 1.0);
  t.no_distributed_optimizer = !r.opt_bool("distributed_optimizer").value_or(true);
  if (auto v = r.opt_string("fp8_recipe")) {
    t.fp8_recipe = parse_fp8_recipe(*v, origin + ":" + r.pointer("fp8_recipe"));
  }
  if (auto v = r.opt_string("fsdp")) t.fsdp = parse_fsdp(*v, origin + ":" + r.pointer("fsdp"));
  t.optimizer_offload_fraction = r.opt_number("optimizer_offload_fraction", 0.0, 1.0);
  t.activation_offload_layers = r.opt_int("activation_offload_layers", 0, 100000);
  if (auto v = r.opt_string("name")) {
    if (v->empty()) r.fail("name", "must not be empty");
    // The name becomes an HDF5 group name and a line of `show`.
    if (auto e = check_name_text("name", *v); !e.empty()) r.fail("name", e);
    c.name = *v;
  } else {
    c.name = c.model + " " + c.cluster;
    for (const auto& item : raw.own.items()) {
      if (item.key() == "model" || item.key() == "cluster") continue;
      c.name += " " + item.key() + "=" + render(item.value());
    }
  }
  r.finish();

  auto opt = [](const auto& v) { return v ? Json(*v) : Json(nullptr); };
  nlohmann::ordered_json j;
  j["name"] = c.name;
  j["model"] = c.model;
  j["cluster"] = c.cluster;
  j["top_k"] = o.top_k;
  j["prune"] = to_string(o.prune);
  j["delta"] = o.delta;
  j["eta"] = o.eta;
  j["uniform"] = o.uniform;
  j["bound"] = o.bound;
  // Only when set: the resolved cases of sweeps written before the field
  // existed stay the same (--resume compares them).
  if (o.count_only) j["count_only"] = true;
  j["bruteforce"] = c.bruteforce;
  j["baseline"] = to_string(c.baseline);
  j["max_pp"] = o.space.max_pp;
  j["allow_cross_node_tp"] = o.space.constraints.allow_cross_node_tp;
  j["round"] = c.round;
  j["seq_len"] = opt(t.seq_len);
  j["global_batch"] = opt(t.global_batch);
  j["micro_batch"] = opt(t.micro_batch);
  j["precision"] = t.precision ? Json(to_string(*t.precision)) : Json(nullptr);
  j["dispatcher"] = t.dispatcher ? Json(to_string(*t.dispatcher)) : Json(nullptr);
  j["imbalance"] = opt(t.imbalance);
  j["gamma"] = opt(t.gamma);
  j["distributed_optimizer"] = !t.no_distributed_optimizer;
  j["fp8_recipe"] = t.fp8_recipe ? Json(to_string(*t.fp8_recipe)) : Json(nullptr);
  j["fsdp"] = t.fsdp ? Json(to_string(*t.fsdp)) : Json(nullptr);
  j["optimizer_offload_fraction"] = opt(t.optimizer_offload_fraction);
  j["activation_offload_layers"] = opt(t.activation_offload_layers);
  // Only when searched: the resolved cases of earlier sweeps stay the same.
  if (c.job.active()) {
    j["space"] = to_string(c.job);
    j["recompute_scope"] = c.job.job_recompute ? "job" : "stage";
    j["max_micro_batch"] = c.job.max_micro_batch;
    j["max_vpp"] = c.job.max_vpp;
    if (c.job.dims != 0) j["overlaps"] = to_string(c.job.overlaps);
  }
  c.resolved = j;
  return c;
}

// At most this many cases in one sweep (docs/archive.md, "Sweeps"): each
// is a whole search, and the resolved cases are kept in memory.
constexpr std::size_t kMaxSweepCases = 10000;

[[noreturn]] void throw_too_many_cases(const std::string& origin, const std::string& pointer) {
  throw InputError(origin + ":" + pointer, "more than " + std::to_string(kMaxSweepCases) +
                                               " cases (the limit; split the sweep)");
}

void expand_product(const Json& product, const Json& defaults, const std::string& origin,
                    const std::string& pointer, std::vector<RawCase>& out) {
  check_fields(product, origin, pointer, false);
  std::vector<std::pair<std::string, const Json*>> axes;
  Json fixed = Json::object();
  for (const auto& item : product.items()) {
    if (item.value().is_array()) {
      if (item.value().empty()) {
        throw InputError(origin + ":" + pointer + "/" + item.key(), "is an empty axis");
      }
      axes.emplace_back(item.key(), &item.value());
    } else {
      fixed[item.key()] = item.value();
    }
  }
  // Count before expanding, so a product of many long axes is refused
  // in constant time and memory.
  std::size_t count = 1;
  for (const auto& axis : axes) count = std::min(count * axis.second->size(), kMaxSweepCases + 1);
  if (out.size() + count > kMaxSweepCases) throw_too_many_cases(origin, pointer);
  std::vector<std::size_t> at(axes.size(), 0);
  for (std::size_t n = 0;; ++n) {
    RawCase c;
    c.fields = defaults;
    c.own = fixed;
    for (std::size_t a = 0; a < axes.size(); ++a) c.own[axes[a].first] = (*axes[a].second)[at[a]];
    for (const auto& item : c.own.items()) c.fields[item.key()] = item.value();
    c.pointer = pointer + " (combination " + std::to_string(n) + ")";
    out.push_back(std::move(c));
    // Odometer: the last axis fastest.
    std::size_t a = axes.size();
    while (a > 0) {
      --a;
      if (++at[a] < axes[a].second->size()) break;
      at[a] = 0;
      if (a == 0) return;
    }
    if (axes.empty()) return;
  }
}

}  // namespace

std::string SweepDefinition::canonical() const {
  nlohmann::ordered_json a = nlohmann::ordered_json::array();
  for (const SweepCase& c : cases) a.push_back(c.resolved);
  return a.dump();
}

SweepDefinition parse_sweep_json(const std::string& text, const std::string& origin) {
  const Json doc = parse_json(text, origin);
  ObjectReader root(doc, origin, "");
  root.opt_string("description");
  Json defaults = Json::object();
  if (const Json* d = root.opt_raw("defaults")) {
    check_fields(*d, origin, "/defaults", false);
    defaults = *d;
  }
  std::vector<RawCase> raw;
  if (const Json* cases = root.opt_raw("cases")) {
    if (!cases->is_array()) {
      throw InputError(origin + ":/cases", "must be an array of cases, got " + describe(*cases));
    }
    if (cases->size() > kMaxSweepCases) throw_too_many_cases(origin, "/cases");
    for (std::size_t i = 0; i < cases->size(); ++i) {
      const std::string p = "/cases/" + std::to_string(i);
      check_fields((*cases)[i], origin, p, true);
      RawCase c;
      c.fields = defaults;
      c.own = (*cases)[i];
      for (const auto& item : c.own.items()) c.fields[item.key()] = item.value();
      c.pointer = p;
      raw.push_back(std::move(c));
    }
  }
  if (const Json* product = root.opt_raw("product")) {
    if (product->is_array()) {
      for (std::size_t i = 0; i < product->size(); ++i) {
        expand_product((*product)[i], defaults, origin, "/product/" + std::to_string(i), raw);
      }
    } else {
      expand_product(*product, defaults, origin, "/product", raw);
    }
  }
  root.finish();
  if (raw.empty()) {
    throw InputError(origin, "has no cases (give \"cases\": [...] and/or \"product\": {...})");
  }
  SweepDefinition def;
  def.origin = origin;
  def.text = text;
  std::set<std::string> names;
  for (const RawCase& r : raw) {
    SweepCase c = resolve(r, origin);
    if (!names.insert(c.name).second) {
      throw InputError(origin + ":" + r.pointer,
                       "case \"" + c.name + "\" appears twice (give distinct \"name\"s)");
    }
    def.cases.push_back(std::move(c));
  }
  return def;
}

SweepDefinition load_sweep(const std::string& path) {
  return parse_sweep_json(read_regular_file(path), path);
}

}  // namespace hapmoe
