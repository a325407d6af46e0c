#include "engine/job_space.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <iterator>
#include <memory>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "costmodel/errors.h"
#include "engine/bytes.h"
#include "partition/config_space.h"
#include "partition/constraints.h"

namespace hapmoe {

namespace {

constexpr JobDim kDims[kNumJobDims] = {JobDim::kMicroBatch, JobDim::kVpp,
                                       JobDim::kSharding,   JobDim::kOffload,
                                       JobDim::kDispatcher, JobDim::kPrecision};

// DeepEP (the flex dispatcher's backend) builds for NVIDIA GPUs of compute
// capability 8.0 and newer (docs/search.md, "Job-wide knobs"): the
// catalog's A100, H100, H800, H200 and B200.
bool has_deepep(const DeviceSpec& d) {
  for (const char* name : {"A100-40GB", "A100-80GB", "H100", "H800", "H200", "B200"}) {
    if (d.name == name) return true;
  }
  return false;
}

// The sharding of a variant, as one value of the dimension.
enum class Sharding { kDp, kZero1, kZero2, kFsdp };

Sharding sharding_of(const JobVariant& v) {
  if (!v.distributed_optimizer) return Sharding::kDp;
  return v.fsdp == Fsdp::kOptimGradsParams ? Sharding::kFsdp
         : v.fsdp == Fsdp::kOptimGrads     ? Sharding::kZero2
                                           : Sharding::kZero1;
}

void set_sharding(JobVariant& v, Sharding s) {
  v.distributed_optimizer = s != Sharding::kDp;
  v.fsdp = s == Sharding::kFsdp    ? Fsdp::kOptimGradsParams
           : s == Sharding::kZero2 ? Fsdp::kOptimGrads
                                   : Fsdp::kOff;
}

// `base` first, then the others of `all` in their order.
template <class T>
std::vector<T> base_first(T base, const std::vector<T>& all) {
  std::vector<T> out{base};
  for (const T& v : all) {
    if (!(v == base)) out.push_back(v);
  }
  return out;
}

// The values of every dimension but offload, the workload's first.
struct Values {
  std::vector<int> micro_batch;
  std::vector<int> vpp;
  std::vector<Sharding> sharding;
  std::vector<Dispatcher> dispatcher;
  std::vector<Precision> precision;
};

Values values_of(const Workload& w, const ClusterSpec& cluster, const JobSpace& space,
                 const JobVariant& base) {
  Values v;
  v.micro_batch = {base.micro_batch};
  if (space.has(JobDim::kMicroBatch)) {
    std::vector<int> all;
    for (const int b : divisors(w.training.global_batch)) {
      if (b <= space.max_micro_batch) all.push_back(b);
    }
    v.micro_batch = base_first(base.micro_batch, all);
  }
  v.vpp = {1};
  if (space.has(JobDim::kVpp)) {
    std::vector<int> all;
    for (int k = 1; k <= space.max_vpp; ++k) all.push_back(k);
    v.vpp = base_first(1, all);
  }
  v.sharding = {sharding_of(base)};
  if (space.has(JobDim::kSharding)) {
    v.sharding =
        base_first(sharding_of(base), {Sharding::kZero1, Sharding::kZero2, Sharding::kFsdp});
  }
  v.dispatcher = {base.dispatcher};
  if (space.has(JobDim::kDispatcher) && w.model.is_moe()) {
    bool deepep = true;
    for (const DevicePool& p : cluster.pools) deepep = deepep && has_deepep(p.device);
    // auto already takes the cheaper of alltoall and allgather per plan.
    std::vector<Dispatcher> all =
        base.dispatcher == Dispatcher::kAuto
            ? std::vector<Dispatcher>{}
            : std::vector<Dispatcher>{Dispatcher::kAllToAll, Dispatcher::kAllGather};
    if (deepep) all.push_back(Dispatcher::kFlex);
    v.dispatcher = base_first(base.dispatcher, all);
  }
  v.precision = {base.precision};
  if (space.has(JobDim::kPrecision)) {
    bool fp8 = true;
    for (const DevicePool& p : cluster.pools) fp8 = fp8 && p.device.fp8_peak_flops > 0;
    if (fp8) v.precision = base_first(base.precision, {Precision::kBf16, Precision::kFp8});
  }
  return v;
}

// Why `w` cannot be searched on `cluster` ("" if it can).
std::string refusal(const Workload& w, const ClusterSpec& cluster) {
  if (auto e = validate(w.training, w.model); !e.empty()) return e;
  if (auto e = check_precision(w, cluster); !e.empty()) return e;
  return check_offload(w, cluster);
}

// A hash of the knobs (equality is JobVariant's own ==).
struct VariantHash {
  std::size_t operator()(const JobVariant& v) const {
    std::uint64_t h = 0x9e3779b97f4a7c15u;
    const auto mix = [&](std::uint64_t x) {
      h = (h ^ x) * 0xff51afd7ed558ccdu;
      h ^= h >> 32;
    };
    mix(static_cast<std::uint64_t>(v.micro_batch));
    mix(static_cast<std::uint64_t>(v.vpp));
    mix(static_cast<std::uint64_t>(v.distributed_optimizer));
    mix(static_cast<std::uint64_t>(v.fsdp));
    mix(std::bit_cast<std::uint64_t>(v.offload + 0.0));
    mix(std::bit_cast<std::uint64_t>(v.offload_to + 0.0));
    mix(static_cast<std::uint64_t>(v.dispatcher));
    mix(static_cast<std::uint64_t>(v.precision));
    if (v.recompute) {
      mix(static_cast<std::uint64_t>(v.recompute->kind) + 1);
      mix(static_cast<std::uint64_t>(v.recompute->block));
    }
    return static_cast<std::size_t>(h);
  }
};

// Which dimensions v differs in from base, as job_dim_bit()s.
unsigned differs(const JobVariant& v, const JobVariant& base) {
  unsigned d = 0;
  if (v.micro_batch != base.micro_batch) d |= job_dim_bit(JobDim::kMicroBatch);
  if (v.vpp != base.vpp) d |= job_dim_bit(JobDim::kVpp);
  if (sharding_of(v) != sharding_of(base)) d |= job_dim_bit(JobDim::kSharding);
  if (v.offload != base.offload || v.offload_to != base.offload_to) {
    d |= job_dim_bit(JobDim::kOffload);
  }
  if (v.dispatcher != base.dispatcher) d |= job_dim_bit(JobDim::kDispatcher);
  if (v.precision != base.precision) d |= job_dim_bit(JobDim::kPrecision);
  return d;
}

// Equal in every knob but the recompute setting and the offload fraction:
// a plan found under two such variants is one plan (the same stages and
// recomputation), slower where it offloads more.
bool same_but_recompute_and_offload(JobVariant a, JobVariant b) {
  a.recompute.reset();
  b.recompute.reset();
  a.offload = b.offload = 0;
  a.offload_to = b.offload_to = 0;
  return a == b;
}

// The recompute settings of a job-wide search, canonical order: none,
// selective (the modules per-stage selective takes), full, then full
// block K for K = 1..N-1. Interleaved, Megatron's block method counts
// per model chunk, which the stage costs do not split: full and none
// and selective only. Megatron-Core refuses activation offload with any.
std::vector<RecomputeSetting> recompute_settings(const Workload& w, int vpp) {
  if (w.training.activation_offload_layers > 0) return {RecomputeSetting{}};
  std::vector<RecomputeSetting> out = {
      {RecomputeKind::kNone},
      {RecomputeKind::kSelective, 0, default_selective_modules(w.training)},
      {RecomputeKind::kFull, 0}};
  for (int k = 1; vpp == 1 && k < w.model.num_layers; ++k) out.push_back({RecomputeKind::kFull, k});
  return out;
}

// The setting closest to a per-stage plan's recomputation: full block of
// its most recomputed layers if any stage recomputes whole layers, else
// selective if any stage does, else none.
RecomputeSetting setting_of(const Plan& plan, const std::vector<RecomputeSetting>& settings) {
  RecomputeSetting s;
  for (const StagePlan& st : plan.stages) {
    const Recompute& r = st.recompute;
    if (r.kind == RecomputeKind::kFull) {
      s.block = s.kind == RecomputeKind::kFull ? std::max(s.block, r.layers) : r.layers;
      s.kind = RecomputeKind::kFull;
    } else if (r.kind == RecomputeKind::kSelective && s.kind == RecomputeKind::kNone) {
      s = {RecomputeKind::kSelective, 0, r.modules};
    }
  }
  if (std::find(settings.begin(), settings.end(), s) != settings.end()) return s;
  return s.kind == RecomputeKind::kFull ? RecomputeSetting{RecomputeKind::kFull, 0} : settings[0];
}

// The floors a variant's search leaves (SearchResult::floors), for the
// searches of what it relaxes (RunOptions::floors). A search whose floors
// leave part of Pi open is run on that part alone, `sub` (ascending
// indices into Pi): every other configuration c is skipped by its floor,
// the larger of `steps`'s and `base`'s at c (the search's own step floors
// and floors; 0 where there are none), and keeps it. On the paper's and
// DeepSeek-V3's offloading clusters most of Pi is skipped so in most
// variants (bench/README.md, "Variants searched on their open part").
struct Floors {
  std::size_t n = 0;  // Pi's configurations
  std::shared_ptr<const Floors> base;
  std::shared_ptr<const std::vector<double>> steps;
  std::shared_ptr<const std::vector<std::uint32_t>> sub;  // null: all of Pi
  std::vector<double> at;                                 // the floors over sub
  // Every configuration outside sub has a floor above this: a search
  // whose cut is at most this one finds no open configuration there.
  double cut = std::numeric_limits<double>::infinity();

  std::vector<double> dense() const {
    if (!sub) return at;
    std::vector<double> out = base ? base->dense() : std::vector<double>(n, 0.0);
    if (steps) {
      for (std::size_t c = 0; c < n; ++c) out[c] = std::max(out[c], (*steps)[c]);
    }
    for (std::size_t k = 0; k < sub->size(); ++k) out[(*sub)[k]] = at[k];
    return out;
  }
};

// The result of a search of Pi, from that of its restriction to f.sub
// (whose floors were moved to f.at): the configurations outside it
// skipped by their floors, as run_search skips them. Its statistics and
// units are Pi's already.
void complete(SearchResult& r, const Floors& f) {
  r.floors = f.dense();
  if (!f.sub) return;
  const std::vector<std::uint32_t>& sub = *f.sub;
  // values over sub, over `rest` elsewhere.
  const auto spread = [&](auto& values, auto rest) {
    for (std::size_t k = 0; k < sub.size(); ++k) rest[sub[k]] = values[k];
    values = std::move(rest);
  };
  spread(r.outcome_of, std::vector<std::int32_t>(f.n, SearchResult::kSkippedByBound));
  spread(r.lower_bounds, r.floors);
  spread(r.step_bounds, f.steps ? *f.steps : std::vector<double>(f.n, 0.0));
  spread(r.estimates, std::vector<double>(f.n, 0.0));
  spread(r.ran_on, std::vector<int>(f.n, -1));
  spread(r.round_of, std::vector<int>(f.n, -1));
  spread(r.parts, std::vector<int>(f.n, 0));
}

// The merged top K over variants, and the search of the best one's. A
// plan found again under another recompute setting of the same knobs
// (full block K beyond every stage is full), or at another offload
// fraction, is kept once, at its fastest.
class Merger {
 public:
  Merger(int k, const std::vector<VariantOutcome>& variants) : k_(k), variants_(&variants) {}
  // A latency no better than the K-th best plan so far (+inf: fewer).
  double kth() const {
    return static_cast<int>(top_.size()) < k_ ? std::numeric_limits<double>::infinity()
                                              : top_.back().first.latency_s;
  }
  // `configs`: the variant's Pi (its search leaves SearchResult::configs
  // empty), put in the result kept.
  // `floors`: the floors the search left (its own are moved there).
  void add(SearchResult&& r, std::size_t variant,
           std::shared_ptr<const std::vector<ParallelConfig>> configs,
           std::shared_ptr<const Floors> floors) {
    bool best = false;
    for (const PlanCandidate& c : r.top) {
      const auto entry = std::make_pair(c, variant);
      const auto same = std::find_if(top_.begin(), top_.end(), [&](const auto& e) {
        return e.first.plan == c.plan &&
               same_but_recompute_and_offload((*variants_)[e.second].variant,
                                              (*variants_)[variant].variant);
      });
      if (same != top_.end()) {
        if (!less(entry, *same)) continue;
        top_.erase(same);
      }
      const auto at = std::upper_bound(top_.begin(), top_.end(), entry, less);
      best = best || at == top_.begin();
      top_.insert(at, {c, variant});
      if (static_cast<int>(top_.size()) > k_) top_.pop_back();
    }
    if (best || !have_) {
      result_ = std::move(r);
      configs_ = std::move(configs);
      floors_ = std::move(floors);
      best_variant_ = variant;
      have_ = true;
    }
  }
  bool any_plan() const { return !top_.empty(); }
  // A result is kept: the one reported if no plan is found anywhere.
  bool has_result() const { return have_; }
  double best() const {
    return top_.empty() ? std::numeric_limits<double>::infinity() : top_.front().first.latency_s;
  }
  std::size_t best_variant() const { return best_variant_; }
  SearchResult take() {
    if (configs_) result_.configs = *configs_;
    if (floors_) complete(result_, *floors_);
    return std::move(result_);
  }

 private:
  static bool less(const std::pair<PlanCandidate, std::size_t>& a,
                   const std::pair<PlanCandidate, std::size_t>& b) {
    if (candidate_less(a.first, b.first)) return true;
    if (candidate_less(b.first, a.first)) return false;
    return a.second < b.second;
  }
  int k_;
  const std::vector<VariantOutcome>* variants_;
  std::vector<std::pair<PlanCandidate, std::size_t>> top_;
  SearchResult result_;
  std::shared_ptr<const std::vector<ParallelConfig>> configs_;
  std::shared_ptr<const Floors> floors_;
  std::size_t best_variant_ = 0;
  bool have_ = false;
};

}  // namespace

const char* to_string(JobDim d) {
  switch (d) {
    case JobDim::kMicroBatch:
      return "micro-batch";
    case JobDim::kVpp:
      return "vpp";
    case JobDim::kSharding:
      return "sharding";
    case JobDim::kOffload:
      return "offload";
    case JobDim::kDispatcher:
      return "dispatcher";
    case JobDim::kPrecision:
      return "fp8";
  }
  return "?";
}

JobSpace parse_job_space(const std::string& text, const std::string& where) {
  JobSpace s;
  if (text == "none") return s;
  if (text == "all") {
    s.dims = (1u << kNumJobDims) - 1;
    return s;
  }
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    const std::string name = text.substr(at, comma - at);
    bool known = false;
    for (const JobDim d : kDims) {
      if (name == to_string(d)) {
        s.dims |= job_dim_bit(d);
        known = true;
      }
    }
    if (!known) {
      throw InputError(where, "unknown dimension \"" + name + "\" in \"" + text +
                                  "\" (use none, all, or a comma list of micro-batch, vpp, "
                                  "sharding, offload, dispatcher, fp8)");
    }
    at = comma + 1;
  }
  return s;
}

JobOverlaps parse_job_overlaps(const std::string& text, const std::string& where) {
  if (text == "given") return JobOverlaps::kGiven;
  if (text == "recipe") return JobOverlaps::kRecipe;
  throw InputError(where, "expected given or recipe, got \"" + text + "\"");
}

const char* to_string(JobOverlaps o) { return o == JobOverlaps::kRecipe ? "recipe" : "given"; }

Overlap recipe_overlap(Overlap given, bool distributed_optimizer) {
  given.grad_reduce = true;
  given.param_gather = given.param_gather || distributed_optimizer;
  return given;
}

std::string to_string(const JobSpace& s) {
  if (s.dims == 0) return "none";
  std::string out;
  for (const JobDim d : kDims) {
    if (s.has(d)) out += (out.empty() ? "" : ",") + std::string(to_string(d));
  }
  return out;
}

JobVariant base_variant(const Workload& w) {
  const TrainingSpec& t = w.training;
  JobVariant v;
  v.micro_batch = t.micro_batch;
  v.distributed_optimizer = t.distributed_optimizer;
  v.fsdp = t.fsdp;
  v.offload = t.optimizer_offload_fraction;
  v.offload_to = t.offload_range_to;
  v.dispatcher = t.dispatcher;
  v.precision = t.precision;
  v.recompute = t.recompute;
  v.overlap = t.overlap;
  return v;
}

Workload apply(const Workload& w, const JobVariant& v) {
  Workload out = w;
  TrainingSpec& t = out.training;
  t.micro_batch = v.micro_batch;
  t.distributed_optimizer = v.distributed_optimizer;
  t.fsdp = v.fsdp;
  t.optimizer_offload_fraction = v.offload;
  t.offload_range_to = v.offload_to;
  t.dispatcher = v.dispatcher;
  t.precision = v.precision;
  t.recompute = v.recompute;
  t.overlap = v.overlap;
  return out;
}

std::string sharding_name(const JobVariant& v) {
  switch (sharding_of(v)) {
    case Sharding::kDp:
      return "DP";
    case Sharding::kZero1:
      return "ZeRO-1";
    case Sharding::kZero2:
      return "ZeRO-2";
    case Sharding::kFsdp:
      return "FSDP";
  }
  return "?";
}

std::string to_string(const JobVariant& v, bool moe) {
  char offload[48];
  if (v.offload_to > 0) {
    std::snprintf(offload, sizeof offload, "%.3g..%.3g", v.offload, v.offload_to);
  } else {
    std::snprintf(offload, sizeof offload, "%.3g", v.offload);
  }
  std::string s = "b=" + std::to_string(v.micro_batch) + " vpp=" + std::to_string(v.vpp) + " " +
                  sharding_name(v) + " offload=" + offload;
  if (moe) s += std::string(" ") + to_string(v.dispatcher);
  s += std::string(" ") + to_string(v.precision);
  if (v.recompute) s += " recompute=" + to_string(*v.recompute);
  return s;
}

std::vector<std::size_t> plain_indices(const std::vector<ParallelConfig>& plain,
                                       const std::vector<ParallelConfig>& configs) {
  std::vector<std::size_t> out(configs.size(), kNotPlain);
  std::size_t j = 0;
  for (std::size_t c = 0; c < configs.size(); ++c) {
    ParallelConfig pi = configs[c];
    pi.vpp = 1;
    while (j < plain.size() && !(plain[j] == pi)) ++j;
    if (j == plain.size()) break;  // not in the plain Pi, nor any later one
    out[c] = j++;
  }
  return out;
}

std::vector<std::size_t> shape_order_within(const std::vector<std::size_t>& order,
                                            const std::vector<ParallelConfig>& known,
                                            const std::vector<ParallelConfig>& configs) {
  HAPMOE_REQUIRE(order.size() == known.size(), "shape_order_within: an order of another Pi");
  const auto degrees = [](const ParallelConfig& pi) {
    return std::array<int, 6>{pi.pp, pi.tp, pi.cp, pi.ep, pi.tpe, pi.dp};
  };
  constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  std::vector<std::size_t> at(known.size(), kNone);  // per configuration of known
  std::size_t j = 0;
  for (std::size_t c = 0; c < configs.size(); ++c, ++j) {
    while (j < known.size() && degrees(known[j]) != degrees(configs[c])) ++j;
    if (j == known.size()) return {};
    at[j] = c;
  }
  std::vector<std::size_t> out;
  out.reserve(configs.size());
  for (const std::size_t k : order) {
    if (at[k] != kNone) out.push_back(at[k]);
  }
  return out;
}

std::vector<bool> interleaved_no_plan(const std::vector<bool>& none,
                                      const std::vector<ParallelConfig>& plain,
                                      const std::vector<ParallelConfig>& configs) {
  HAPMOE_REQUIRE(none.size() == plain.size(),
                 "interleaved_no_plan: a flag per configuration of the plain Pi");
  const std::vector<std::size_t> at = plain_indices(plain, configs);
  std::vector<bool> out(configs.size(), false);
  for (std::size_t c = 0; c < configs.size(); ++c) out[c] = at[c] != kNotPlain && none[at[c]];
  return out;
}

std::vector<double> interleaved_step_floors(const std::vector<double>& floors,
                                            const std::vector<ParallelConfig>& plain,
                                            const std::vector<ParallelConfig>& configs,
                                            int global_batch) {
  HAPMOE_REQUIRE(floors.size() == plain.size(),
                 "interleaved_step_floors: a floor per configuration of the plain Pi");
  const std::vector<std::size_t> at = plain_indices(plain, configs);
  std::vector<double> out(configs.size(), 0.0);
  for (std::size_t c = 0; c < configs.size(); ++c) {
    if (at[c] == kNotPlain) continue;
    const ParallelConfig& pi = configs[c];
    const double v = pi.vpp;
    const int microbatches = global_batch / (pi.micro_batch * pi.dp);  // M, a whole number
    const double m = microbatches;
    out[c] = floors[at[c]] * (1.0 + (v - 1.0) * m / (pi.pp + m - 1.0)) / v * (1.0 - 1e-12);
  }
  return out;
}

void SparseBounds::add(std::uint32_t c, double v, double cut) {
  dense_.reset();
  under_.reset();
  if (v <= cut) {
    low_.emplace_back(c, v);
  } else {
    rest_ = std::min(rest_, v);
  }
}

void SparseBounds::reserve(std::size_t kept) { low_.reserve(kept); }

void SparseBounds::keep_under(double cut) {
  const std::vector<std::pair<std::uint32_t, double>> all = std::move(low_);
  low_.clear();
  for (const auto& [c, v] : all) add(c, v, cut);
}

const std::shared_ptr<const std::vector<double>>& SparseBounds::dense() const {
  if (!dense_) {
    auto out = std::make_shared<std::vector<double>>(n_, rest_);
    for (const auto& [c, v] : low_) (*out)[c] = v;
    dense_ = std::move(out);
  }
  return dense_;
}

std::vector<std::uint32_t> SparseBounds::under(double cut) const {
  const auto above = [&](const auto& e) { return !(e.second <= cut); };
  if (!under_ || cut > under_->first) {
    // Filtered while copied: a copy of all kept, then filtered, would hold
    // their room until the next rescan (the large case: 95 of its 620 MB
    // at the peak, for answers of about 50 each).
    under_.emplace(cut, decltype(low_){});
    std::remove_copy_if(low_.begin(), low_.end(), std::back_inserter(under_->second), above);
  }
  auto& [at, kept] = *under_;
  std::erase_if(kept, above);
  at = cut;
  std::vector<std::uint32_t> out;
  out.reserve(kept.size());
  for (const auto& e : kept) out.push_back(e.first);
  return out;
}

namespace {

std::string encode_job_result(const JobSearchResult& j) {
  Bytes b;
  b.put(encode_result(j.result));
  b.put(j.best);
  b.put(j.best_s);
  b.put(j.variants.size());
  for (const VariantOutcome& v : j.variants) {
    b.put(v.variant);
    b.put(v.best);
    b.put(v.bounded);
    b.put(v.refused);
    b.put(v.stats);
  }
  b.put(j.stats);
  b.put(j.dim_variants);
  b.put(j.dim_configs);
  b.put(j.dim_best);
  b.put(j.base_best);
  b.put(j.recompute_variants);
  b.put(j.recompute_configs);
  b.put(j.per_stage_best);
  b.put(j.units);
  b.put(j.rounds);
  b.put(j.floored_before);
  return b.take();
}

JobSearchResult decode_job_result(const std::string& bytes) {
  JobSearchResult j;
  Unbytes b(bytes);
  j.result = decode_result(b.get<std::string>());
  b.get(j.best);
  b.get(j.best_s);
  j.variants.resize(b.get<std::size_t>());
  for (VariantOutcome& v : j.variants) {
    b.get(v.variant);
    b.get(v.best);
    b.get(v.bounded);
    b.get(v.refused);
    b.get(v.stats);
  }
  b.get(j.stats);
  b.get(j.dim_variants);
  b.get(j.dim_configs);
  b.get(j.dim_best);
  b.get(j.base_best);
  b.get(j.recompute_variants);
  b.get(j.recompute_configs);
  b.get(j.per_stage_best);
  b.get(j.units);
  b.get(j.rounds);
  b.get(j.floored_before);
  HAPMOE_REQUIRE(b.done(), "decode_job_result: bytes left over");
  return j;
}

// Whether every variant's search is small (RunOptions::split_above), so
// that each would run whole on rank 0 anyway. Pi is widest at the least
// micro-batch without interleaving: a larger micro-batch only adds
// divisibility (DP x micro-batch divides the global batch) and
// interleaving only refuses configurations (partition/constraints.cpp).
bool every_variant_small(const Workload& w, const ClusterSpec& cluster,
                         const SearchOptions& options, const JobSpace& space,
                         const RunOptions& run) {
  const JobVariant base = base_variant(w);
  const Values values = values_of(w, cluster, space, base);
  JobVariant widest = base;
  widest.micro_batch = *std::min_element(values.micro_batch.begin(), values.micro_batch.end());
  widest.vpp = 1;
  SpaceOptions so = options.space;
  so.vpp = 1;
  const std::size_t n = enumerate_configs(apply(w, widest), cluster, so).size();
  return static_cast<double>(n) * w.model.num_layers <= run.split_above;
}

JobSearchResult search_variants(const Workload& w, const ClusterSpec& cluster,
                                const SearchOptions& options, const JobSpace& space, Comm& comm,
                                const RunOptions& run);

}  // namespace

JobSearchResult run_job_search(const Workload& w, const ClusterSpec& cluster,
                               const SearchOptions& options, const JobSpace& space, Comm& comm,
                               const RunOptions& run) {
  // Small variants run whole on rank 0 each (run_search); then the whole
  // job does, with one collective rather than one per variant (over a
  // thousand on the paper's offloading clusters).
  if (comm.size() == 1 || !options.bound || !every_variant_small(w, cluster, options, space, run)) {
    return search_variants(w, cluster, options, space, comm, run);
  }
  OnRank0 got = run_on_rank0(comm, run, [&](Comm& alone, const RunOptions& inner) {
    const JobSearchResult j = search_variants(w, cluster, options, space, alone, inner);
    return std::pair{encode_job_result(j),
                     j.result.ranks.empty() ? RankFigures{} : j.result.ranks.front()};
  });
  JobSearchResult j = decode_job_result(got.bytes);
  j.result.ranks = std::move(got.ranks);
  j.result.whole_on_rank0 = true;
  return j;
}

namespace {

JobSearchResult search_variants(const Workload& w, const ClusterSpec& cluster,
                                const SearchOptions& options, const JobSpace& space, Comm& comm,
                                const RunOptions& run) {
  const JobVariant base = base_variant(w);
  const Values values = values_of(w, cluster, space, base);
  // Every combination of the values but offload, in canonical order (the
  // workload's value first in each dimension).
  std::vector<JobVariant> combos;
  for (const int b : values.micro_batch) {
    for (const int v : values.vpp) {
      for (const Sharding s : values.sharding) {
        for (const Dispatcher d : values.dispatcher) {
          for (const Precision p : values.precision) {
            JobVariant x = base;
            x.micro_batch = b;
            x.vpp = v;
            set_sharding(x, s);
            x.dispatcher = d;
            x.precision = p;
            if (space.overlaps == JobOverlaps::kRecipe) {
              x.overlap = recipe_overlap(base.overlap, x.distributed_optimizer);
            }
            combos.push_back(x);
          }
        }
      }
    }
  }
  // The workload's values, then those one dimension away, then the rest.
  std::stable_sort(combos.begin(), combos.end(), [&](const JobVariant& a, const JobVariant& b) {
    return std::min(std::popcount(differs(a, base)), 2) <
           std::min(std::popcount(differs(b, base)), 2);
  });

  JobSearchResult out;
  Merger merged(options.top_k, out.variants);
  double base_kth = std::numeric_limits<double>::infinity();
  std::fill(std::begin(out.dim_best), std::end(out.dim_best),
            std::numeric_limits<double>::infinity());

  // Pi depends on a variant only through its micro-batch, its
  // interleaving and its precision (partition/config_space.h; fp16 refuses
  // EP): computed once for each, the last two kept (the variants come in
  // runs of one combination, precision innermost), and those the step
  // bounds below keep (space_of).
  // JobSpace.PiDependsOnlyOnMicroBatchVppAndPrecision checks the premise.
  using SpaceKey = std::tuple<int, int, Precision>;
  using Space = std::shared_ptr<const std::vector<ParallelConfig>>;
  std::vector<std::pair<SpaceKey, Space>> spaces;
  std::vector<std::pair<SpaceKey, Space>> roots;
  // Per key, Pi's summary (a few degrees) and the tables of the searches
  // (RunOptions::summary and tables), made once, and its shape order once
  // a search of all of it has made it (RunOptions::shape_order: a key's
  // first searches, one per dispatcher, are of all of Pi); never moved:
  // searches point into them.
  // JobSpace.TablesDependOnlyOnMicroBatchAndPrecision checks that no other
  // knob enters the tables.
  struct Facts {
    SpaceKey key;
    PiSummary summary;
    std::optional<ProfileTables> tables;
    std::shared_ptr<const std::vector<std::size_t>> shape_order;
  };
  std::deque<Facts> facts;

  // The step bounds (SearchResult::step_bounds) per (micro-batch, vpp,
  // precision, dispatcher): the layer steps, boundaries, embedding and
  // output depend on no other knob, so the first search of each gives
  // them to the others as RunOptions::step_floors. Kept sparse: only those
  // at most the cut of any later search (every later incumbent is at most
  // the K-th best after the workload's own combination, base_kth); the
  // others all as the least of them.
  struct StepFloors : SparseBounds {
    using SparseBounds::SparseBounds;
    Space configs;  // the Pi its indices refer to
  };
  bool base_done = false;  // base_kth is set
  using StepKey = std::tuple<int, int, Precision, Dispatcher>;
  std::vector<std::pair<StepKey, StepFloors>> step_floors;
  const auto step_key = [](const JobVariant& v) {
    return StepKey{v.micro_batch, v.vpp, v.precision, v.dispatcher};
  };
  const auto find_steps = [&](const StepKey& key) -> const StepFloors* {
    for (const auto& [k, f] : step_floors) {
      if (k == key) return &f;
    }
    return nullptr;
  };

  // Whether the Pi of key `from` gives that of `to` in a pass (with_vpp):
  // the same precision, without interleaving or interleaved like `to`, at
  // a micro-batch dividing to's.
  const auto derives = [](const SpaceKey& from, const SpaceKey& to) {
    return std::get<2>(from) == std::get<2>(to) && std::get<0>(to) % std::get<0>(from) == 0 &&
           (std::get<1>(from) == 1 || std::get<1>(to) > 1);
  };
  // Pi of a variant: the last two enumerated, or one a variant's step
  // bounds keep (a later pass over the combinations, offload's, comes back
  // to them), else enumerated.
  const auto space_of = [&](const Workload& vw, const JobVariant& v,
                            const SpaceOptions& so) -> Space {
    const SpaceKey key{v.micro_batch, v.vpp, v.precision};
    for (const auto& [k, configs] : spaces) {
      if (k == key) return configs;
    }
    for (const auto& [k, f] : step_floors) {
      if (SpaceKey{std::get<0>(k), std::get<1>(k), std::get<2>(k)} == key) return f.configs;
    }
    // A known Pi of the same precision, without interleaving or
    // interleaved like this one, at a micro-batch dividing this one's,
    // gives it in a pass (with_vpp), the smallest such; an enumeration
    // otherwise. The first enumerated of each precision is kept (roots):
    // the micro-batches come in increasing order, the least first.
    Space known;
    const auto offer = [&](const SpaceKey& k, const Space& configs) {
      if (derives(k, key) && (!known || configs->size() < known->size())) known = configs;
    };
    for (const auto& [k, configs] : roots) offer(k, configs);
    for (const auto& [k, configs] : spaces) offer(k, configs);
    for (const auto& [k, f] : step_floors) {
      offer(SpaceKey{std::get<0>(k), std::get<1>(k), std::get<2>(k)}, f.configs);
    }
    if (spaces.size() == 2) spaces.erase(spaces.begin());
    spaces.emplace_back(
        key, std::make_shared<const std::vector<ParallelConfig>>(
                 known ? with_vpp(*known, vw, v.vpp) : enumerate_configs(vw, cluster, so)));
    if (!known) roots.emplace_back(key, spaces.back().second);
    if (std::none_of(facts.begin(), facts.end(), [&](const Facts& f) { return f.key == key; })) {
      facts.push_back({key, summarize(*spaces.back().second), std::nullopt, nullptr});
    }
    return spaces.back().second;
  };
  // The facts of a variant's key, its tables made with its workload `vw`
  // the first time (space_of has made the facts).
  const auto facts_of = [&](const Workload& vw, const JobVariant& v) -> Facts& {
    const SpaceKey key{v.micro_batch, v.vpp, v.precision};
    const auto at =
        std::find_if(facts.begin(), facts.end(), [&](const Facts& e) { return e.key == key; });
    HAPMOE_REQUIRE(at != facts.end(), "search_variants: a variant's Pi without its facts");
    Facts& f = *at;
    if (!f.tables) f.tables = tables_for(vw, cluster, f.summary, options.profile.get());
    return f;
  };

  // Per variant without interleaving, the configurations of its Pi that
  // have no plan at all, for the same variant interleaved (docs/search.md,
  // "No plan without interleaving, none with it"): interleaving keeps no
  // fewer activations in flight at any stage (in_flight / v >= PP - i for
  // every micro-batch count) and changes no other memory, so a stage that
  // does not fit without it does not fit with it. Its Pi is the plain
  // one's less what interleaving refuses, in the same order. Kept only
  // where the space has interleaved variants.
  struct NoPlan {
    Space configs;
    std::vector<bool> none;
  };
  const bool will_interleave =
      std::any_of(values.vpp.begin(), values.vpp.end(), [](int v) { return v > 1; });
  std::unordered_map<JobVariant, NoPlan, VariantHash> no_plan;
  const auto no_plan_key = [](JobVariant v) {
    v.vpp = 1;
    return v;
  };
  const auto find_no_plan = [&](const JobVariant& v) -> const NoPlan* {
    const auto at = no_plan.find(no_plan_key(v));
    return at == no_plan.end() ? nullptr : &at->second;
  };

  // One variant's search against `incumbent` given the floors of one it
  // relaxes (null: none), its outcome recorded: its result (of Pi, or of
  // the part of Pi the floors leave open, Floors::sub) and the floors it
  // leaves; nullopt when a check refuses the variant.
  StopReason stopped = StopReason::kNone;
  SearchProgress* const progress = run.progress;
  struct Searched {
    SearchResult result;  // its floors moved to `floors`
    std::shared_ptr<const Floors> floors;
  };
  const auto search = [&](const JobVariant& v, double incumbent,
                          std::shared_ptr<const Floors> floors) -> std::optional<Searched> {
    if (progress != nullptr) progress->variants.fetch_add(1, std::memory_order_relaxed);
    VariantOutcome o;
    o.variant = v;
    const Workload vw = apply(w, v);
    o.refused = refusal(vw, cluster);
    if (!o.refused.empty()) {
      out.variants.push_back(std::move(o));
      return std::nullopt;
    }
    SearchOptions opt = options;
    opt.space.vpp = v.vpp;
    // Only the first result kept can be reported for its closest miss.
    opt.closest_miss = options.closest_miss && !merged.has_result();
    RunOptions r = run;
    r.incumbent = std::min(run.incumbent, incumbent);
    const Space configs = space_of(vw, v, opt.space);
    // Interleaved: no plan where the variant without interleaving has none
    // (NoPlan), an infinite floor on top of those given.
    if (const NoPlan* none = v.vpp > 1 ? find_no_plan(v) : nullptr) {
      auto both = std::make_shared<Floors>();
      both->n = configs->size();
      both->at = floors && (floors->sub || !floors->at.empty()) ? floors->dense()
                                                                : std::vector<double>(both->n, 0.0);
      const std::vector<bool> no = interleaved_no_plan(none->none, *none->configs, *configs);
      for (std::size_t c = 0; c < both->n; ++c) {
        if (no[c]) both->at[c] = std::numeric_limits<double>::infinity();
      }
      floors = std::move(both);
    }
    r.configs = configs.get();
    Facts& known_facts = facts_of(vw, v);
    r.summary = &known_facts.summary;
    r.tables = &*known_facts.tables;
    r.result_configs = false;  // the one result kept gets Pi (Merger)
    const bool floored = floors && (floors->sub || !floors->at.empty());
    const StepKey key = step_key(v);
    const StepFloors* known = find_steps(key);
    std::shared_ptr<const std::vector<double>> given_steps;
    if (known != nullptr) {
      given_steps = known->dense();
    } else if (v.vpp > 1) {
      StepKey uninterleaved = key;
      std::get<1>(uninterleaved) = 1;
      if (const StepFloors* one = find_steps(uninterleaved)) {
        given_steps = std::make_shared<const std::vector<double>>(interleaved_step_floors(
            *one->dense(), *one->configs, *configs, w.training.global_batch));
      }
    }
    r.step_floors = given_steps.get();
    // This search's step bounds are kept where a later search can skip by
    // them: in the workload's own combination (all of them, cut once
    // base_kth is known) or under a finite base_kth. Not from a search
    // given floors: those skip configurations without their step bound.
    const double later = std::min(run.incumbent, base_kth);
    const bool keep_steps = known == nullptr && !floored && (!base_done || std::isfinite(later));
    r.step_bounds_above_cut = keep_steps;

    // The configurations the floors leave open (their floor at most the
    // cut: run_search skips the others by it), found among those the
    // floors' search left open when its cut was no lower, else among the
    // step bounds kept under a cut, else over Pi. The search is of these
    // alone when they are not all of Pi.
    const std::size_t n = configs->size();
    const double cut = skip_above(r.incumbent);
    std::vector<double> dense_floors;  // the floors over Pi, when given over a part
    const std::vector<double>* floors_of = nullptr;
    if (floored && !floors->sub) {
      floors_of = &floors->at;
    } else if (floored && floors->cut < cut) {
      dense_floors = floors->dense();
      floors_of = &dense_floors;
    }
    std::vector<std::uint32_t> sub;
    std::vector<double> sub_floors;
    std::vector<double> sub_steps;
    const auto consider = [&](std::size_t c, double floor) {
      const double step = given_steps ? (*given_steps)[c] : 0.0;
      if (std::max(floor, step) > cut) return;
      sub.push_back(static_cast<std::uint32_t>(c));
      sub_floors.push_back(floor);
      sub_steps.push_back(step);
    };
    bool part = false;  // sub is not all of Pi
    if (run.open_part_only && options.bound && (floored || given_steps) && run.resume == nullptr &&
        !run.checkpoint) {
      if (floored && floors_of == nullptr) {
        for (std::size_t k = 0; k < floors->sub->size(); ++k) {
          consider((*floors->sub)[k], floors->at[k]);
        }
      } else if (!floored && known != nullptr && known->rest() > cut) {
        for (const std::uint32_t c : known->under(cut)) consider(c, 0.0);
      } else {
        for (std::size_t c = 0; c < n; ++c) consider(c, floors_of ? (*floors_of)[c] : 0.0);
      }
      part = sub.size() < n;
    }
    std::vector<ParallelConfig> sub_configs;
    if (part) {
      sub_configs.reserve(sub.size());
      for (const std::uint32_t c : sub) sub_configs.push_back((*configs)[c]);
      r.configs = &sub_configs;
      r.floors = floored ? &sub_floors : nullptr;
      r.step_floors = given_steps ? &sub_steps : nullptr;
      // Split over the ranks as the search of all of Pi would be: on
      // DeepSeek-V3's large case over 2 ranks, 4.66 s against 5.18 s
      // with each small part searched by rank 0 alone (bench/README.md).
      r.split_above = run.split_above * static_cast<double>(sub.size()) / static_cast<double>(n);
    } else {
      r.shape_order = &known_facts.shape_order;  // a search of all of Pi
      // A key's first such search takes the order from that of a root its
      // Pi derives from (shape_order_within), where that is made: on the
      // large case a pass of 2-4 ms, against 15-32 ms for its own.
      for (const auto& [root_key, root] : roots) {
        if (known_facts.shape_order) break;
        const SpaceKey k = root_key;  // a copy: a lambda cannot capture a binding (clang 14)
        if (k == known_facts.key || !derives(k, known_facts.key)) continue;
        const auto from = std::find_if(facts.begin(), facts.end(),
                                       [&](const Facts& e) { return e.key == k && e.shape_order; });
        if (from == facts.end()) continue;
        std::vector<std::size_t> order = shape_order_within(*from->shape_order, *root, *configs);
        if (order.size() == n) {
          known_facts.shape_order =
              std::make_shared<const std::vector<std::size_t>>(std::move(order));
        }
      }
      if (floored) {
        if (floors_of == nullptr) {
          dense_floors = floors->dense();
          floors_of = &dense_floors;
        }
        r.floors = floors_of;
      }
    }
    SearchResult res = run_search(vw, cluster, opt, false, comm, r);
    auto node = std::make_shared<Floors>();
    node->n = n;
    if (part) {
      const auto skipped = static_cast<std::int64_t>(n - sub.size());
      res.stats.configs += skipped;
      res.stats.configs_bounded += skipped;
      out.floored_before += skipped;
      for (UnitFigures& u : res.units) u.config = sub[u.config];
      node->base = floored ? floors : nullptr;
      node->steps = given_steps;
      node->sub = std::make_shared<const std::vector<std::uint32_t>>(std::move(sub));
      node->cut = cut;
    }
    node->at = std::move(res.floors);
    if (keep_steps && res.step_bounds.size() == r.configs->size() &&
        res.stopped == StopReason::kNone) {
      // Outside the part searched, a configuration's step bound is its
      // step floor (run_search's, where a floor skips it).
      StepFloors f(n);
      f.configs = configs;
      const double keep_cut = skip_above(later);
      const auto each = [&](auto&& take) {
        for (std::size_t c = 0, k = 0; c < n; ++c) {
          const bool searched = !part || (k < node->sub->size() && (*node->sub)[k] == c);
          take(c, searched ? res.step_bounds[part ? k++ : c] : (*given_steps)[c]);
        }
      };
      // Counted first, so that the kept ones take their room at once.
      std::size_t kept = 0;
      each([&](std::size_t, double bound) { kept += bound <= keep_cut ? 1 : 0; });
      f.reserve(kept);
      each([&](std::size_t c, double bound) {
        f.add(static_cast<std::uint32_t>(c), bound, keep_cut);
      });
      step_floors.emplace_back(key, std::move(f));
    }
    o.stats = res.stats;
    for (UnitFigures u : res.units) {
      u.round += out.rounds;
      out.units.push_back(u);
    }
    out.rounds += res.rounds;
    o.bounded = std::isfinite(r.incumbent) && res.stats.configs_bounded > 0;
    if (!res.top.empty()) o.best = res.top.front().latency_s;
    out.stats += res.stats;
    if (res.stopped != StopReason::kNone) stopped = res.stopped;
    out.variants.push_back(std::move(o));
    // The configurations this search proved to have no plan at all (an
    // infinite floor among those it searched or bounded: a bound of +inf,
    // or searched without a cut and nothing fit). Those it took from the
    // floors given reach the interleaved variant through its own floors.
    const auto infinite = [](double x) { return std::isinf(x); };
    if (v.vpp == 1 && res.stopped == StopReason::kNone && will_interleave &&
        std::any_of(node->at.begin(), node->at.end(), infinite)) {
      std::vector<bool> none(n, false);
      for (std::size_t k = 0; k < node->at.size(); ++k) {
        if (infinite(node->at[k])) none[node->sub ? (*node->sub)[k] : k] = true;
      }
      no_plan.emplace(no_plan_key(v), NoPlan{configs, std::move(none)});
    }
    return Searched{std::move(res), std::move(node)};
  };

  // One combination of the knobs against `incumbent`: its search, or with
  // job-wide recompute the per-stage lower bound and then each setting.
  // What it found, with the variants' indexes (a per-stage bound without
  // a plan too: its closest miss is what "no plan" reports); its
  // variants and configurations counted per dimension.
  struct Found {
    std::vector<std::pair<Searched, std::size_t>> results;
    Space configs;  // their Pi (the combination's)
    double best = std::numeric_limits<double>::infinity();
  };
  // Per variant searched under a job-wide setting: its combination's
  // per-stage floor.
  std::vector<double> floor_of;
  // The variants searched from index `first` on, counted for each
  // dimension `combo` differs in.
  const auto count_dims = [&](const JobVariant& combo, std::size_t first) {
    const unsigned diff = differs(combo, base);
    for (int d = 0; d < kNumJobDims; ++d) {
      if ((diff & (1u << d)) == 0) continue;
      ++out.dim_variants[d];
      for (std::size_t i = first; i < out.variants.size(); ++i) {
        out.dim_configs[d] += out.variants[i].stats.configs;
      }
    }
  };
  const auto search_combo = [&](const JobVariant& combo, double incumbent,
                                const std::shared_ptr<const Floors>& floors) -> Found {
    Found found;
    const std::size_t first = out.variants.size();
    const auto keep = [&](Searched&& res) {
      if (!res.result.top.empty()) {
        found.best = std::min(found.best, res.result.top.front().latency_s);
      }
      found.results.emplace_back(std::move(res), out.variants.size() - 1);
    };
    if (!space.job_recompute) {
      if (std::optional<Searched> res = search(combo, incumbent, floors)) {
        keep(std::move(*res));
      }
    } else {
      JobVariant per_stage = combo;
      per_stage.recompute.reset();
      std::optional<Searched> bound = search(per_stage, incumbent, floors);
      if (bound && bound->result.top.empty()) keep(std::move(*bound));
      if (bound && !bound->result.top.empty()) {
        const std::vector<RecomputeSetting> all = recompute_settings(apply(w, combo), combo.vpp);
        const double floor = bound->result.top.front().latency_s;
        const RecomputeSetting guess = setting_of(bound->result.top.front().plan, all);
        // Each setting after the first is searched only for a plan faster
        // than the combination's best so far, and none once that best is
        // the per-stage floor (up to rounding: the same stages summed in
        // another order).
        for (const RecomputeSetting& st : base_first(guess, all)) {
          if (stopped != StopReason::kNone || found.best <= floor * (1 + 1e-12)) break;
          JobVariant v = combo;
          v.recompute = st;
          // Per-stage recompute relaxes every setting: its floors hold.
          std::optional<Searched> res = search(v, std::min(incumbent, found.best), bound->floors);
          floor_of.resize(out.variants.size(), std::numeric_limits<double>::infinity());
          floor_of.back() = floor;
          if (res) keep(std::move(*res));
        }
        out.recompute_variants += static_cast<std::int64_t>(out.variants.size() - first) - 1;
        for (std::size_t i = first + 1; i < out.variants.size(); ++i) {
          out.recompute_configs += out.variants[i].stats.configs;
        }
      }
    }
    count_dims(combo, first);
    // Every variant of the combination has its Pi (space_of: kept from
    // its searches).
    if (!found.results.empty()) {
      SpaceOptions so = options.space;
      so.vpp = combo.vpp;
      found.configs = space_of(apply(w, combo), combo, so);
    }
    return found;
  };
  // The best of a combination as its dimensions' figure.
  const auto record_best = [&](const JobVariant& combo, double best) {
    const unsigned diff = differs(combo, base);
    if (diff == 0) out.base_best = std::min(out.base_best, best);
    if (std::popcount(diff) > 1) return;
    for (int d = 0; d < kNumJobDims; ++d) {
      if (diff == 0 || diff == (1u << d)) out.dim_best[d] = std::min(out.dim_best[d], best);
    }
  };

  // What a variant's search must find plans under: the K-th best so far,
  // and for a variant one dimension away, the best with that dimension
  // alone so far (dim_best, which holds the workload's own best), so that
  // dim_best is exact.
  const auto incumbent_for = [&](const JobVariant& v) {
    const unsigned diff = differs(v, base);
    if (std::popcount(diff) != 1) return merged.kth();
    return std::max(merged.kth(), out.dim_best[std::countr_zero(diff)]);
  };
  const auto plain = [&](const JobVariant& combo) {
    const int away = std::popcount(differs(combo, base));
    Found found = search_combo(combo, incumbent_for(combo), nullptr);
    record_best(combo, found.best);
    for (auto& [res, index] : found.results) {
      merged.add(std::move(res.result), index, found.configs, std::move(res.floors));
    }
    if (away != 0) return;
    // The workload's own combination is done: later incumbents are at
    // most base_kth.
    base_kth = merged.kth();
    base_done = true;
    const double later = std::min(run.incumbent, base_kth);
    std::erase_if(step_floors, [&](auto& e) {
      e.second.keep_under(skip_above(later));
      return !std::isfinite(later);
    });
  };
  // Offload, as a dimension (it can pay where plans fit without it, by
  // saving recomputation): per combination, branch and bound over ranges
  // of fractions k / steps (k = lo..hi). A range is searched at once, as a
  // bound (per stage: it bounds every recompute setting too), against the
  // variant's incumbent (incumbent_for); if it holds a plan under that,
  // it is halved, the lower half (the faster steps) first; a single
  // fraction is searched as the combination. A range relaxes each range
  // and fraction in it, so its search's floors (RunOptions::floors) carry
  // to theirs: only the configurations that held a plan under the K-th
  // best are searched again.
  const bool offload = space.has(JobDim::kOffload) && base.offload == 0;
  const int steps = std::max(1, static_cast<int>(std::lround(1.0 / space.offload_step)));
  const auto offloading = [&](const JobVariant& combo) {
    struct Range {
      int lo, hi;
      std::shared_ptr<const Floors> floors;  // of the range it halves
    };
    std::vector<Range> ranges = {{1, steps, nullptr}};
    while (!ranges.empty() && stopped == StopReason::kNone) {
      const auto [lo, hi, floors] = ranges.back();
      ranges.pop_back();
      JobVariant at = combo;
      at.offload = static_cast<double>(lo) / steps;
      const double incumbent = incumbent_for(at);
      if (lo == hi) {
        Found found = search_combo(at, incumbent, floors);
        record_best(at, found.best);
        for (auto& [res, index] : found.results) {
          merged.add(std::move(res.result), index, found.configs, std::move(res.floors));
        }
        continue;
      }
      at.offload_to = static_cast<double>(hi) / steps;
      at.recompute.reset();
      const std::size_t first = out.variants.size();
      std::optional<Searched> bound = search(at, incumbent, floors);
      count_dims(at, first);
      if (!bound || bound->result.top.empty()) continue;
      const int mid = (lo + hi) / 2;
      ranges.push_back({mid + 1, hi, bound->floors});
      ranges.push_back({lo, mid, bound->floors});
    }
  };
  // The combinations at most one dimension away and their offload first,
  // then the others and theirs: where nothing fits without offload, the
  // plans offload finds bound the searches of the others, which would
  // otherwise have no bound at all.
  std::size_t near = 0;
  while (near < combos.size() && std::popcount(differs(combos[near], base)) <= 1) ++near;
  // For the progress line: a step is a combination, or its offload.
  const auto step_done = [&] {
    if (progress == nullptr) return;
    progress->job_steps_done.fetch_add(1, std::memory_order_relaxed);
    progress->job_best.store(merged.best(), std::memory_order_relaxed);
  };
  if (progress != nullptr) {
    progress->job_steps.store(static_cast<std::int64_t>(combos.size()) * (offload ? 2 : 1),
                              std::memory_order_relaxed);
  }
  for (const auto& [from, to] : {std::pair{std::size_t{0}, near}, std::pair{near, combos.size()}}) {
    for (std::size_t c = from; c < to && stopped == StopReason::kNone; ++c) {
      plain(combos[c]);
      step_done();
    }
    for (std::size_t c = from; offload && c < to && stopped == StopReason::kNone; ++c) {
      offloading(combos[c]);
      step_done();
    }
  }
  // What per-stage recompute would give with the best plan's knobs, where
  // it is faster.
  if (merged.any_plan() && merged.best_variant() < floor_of.size() &&
      floor_of[merged.best_variant()] < merged.best()) {
    out.per_stage_best = floor_of[merged.best_variant()];
  }
  out.best_s = merged.best();
  out.result = merged.take();
  if (stopped != StopReason::kNone) out.result.stopped = stopped;
  out.best = merged.any_plan() ? out.variants[merged.best_variant()].variant : base;
  return out;
}

}  // namespace

}  // namespace hapmoe
