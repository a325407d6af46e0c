// HS-DP: the exact search of one configuration pi (docs/search.md).
//
// Stages are placed first to last. A DP state is (u, j, h_prev): u the stage
// groups used per device type so far (so i = sum u stages are placed), j the
// layers covered, h_prev the type of the last stage (the next boundary
// depends on it). T_iter = sum + (M-1)*max + tail is not a sum, so a state
// keeps a Pareto front of labels (sum of stage steps, max stage step, max
// stage sync+optimizer): every completion adds to the sum and can only raise
// the maxima, so a label that is no better in any of the three can never
// lead to a better plan. That makes the DP exact (tests/engine: DP ==
// brute force).
//
// Each stage takes the least recomputation that fits (the choice with the
// least added time; it dominates every other choice for that stage). The
// prunings:
//   (1) load balance: the stage-type mix c (stages per type, sum = PP) is
//       enumerated; the balanced stage time T* = N / sum_h c_h / tau_h
//       gives each type its share n*_h = T* / tau_h of layers, and n_i must
//       lie in [floor((1-delta) n*), ceil((1+delta) n*)]. On a homogeneous
//       cluster n* = N/PP, so the even split is always inside.
//   (2) memory: a stage that does not fit even with full recomputation is
//       cut at once. With this pruning off it is carried, marked
//       infeasible, and dropped only when the plan is complete.
//   (3) hetero comm: a boundary between two device types whose transfer
//       (forward + backward) exceeds eta * T_comp is cut, T_comp the mean
//       stage step of a balanced split.
//
// The kernel, one file per technique (internal declarations in namespace
// hapmoe::hsdp; engine/search.h is the interface):
//   hsdp.cpp            this file: the DP over one configuration (run_dp),
//                       the windows of pruning (1) and the stage mixes they
//                       are built for, the search of a configuration and of
//                       its parts (search_config, max_parts, merge_part),
//                       the work estimates;
//   labels.h, .cpp      labels, dominance, the Pareto fronts, ranking a
//                       level, offering a complete plan;
//   stage_memo.h, .cpp  the stage memo: each stage's least recomputation and
//                       whether it fits at all (pruning 2);
//   bounds.h, .cpp      the lower bounds of branch and bound;
//   bruteforce.cpp      every plan without DP, the reference of the tests;
//   plan_order.cpp      the canonical order of plans.
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "costmodel/errors.h"
#include "engine/bounds.h"
#include "engine/count.h"
#include "engine/labels.h"
#include "engine/search.h"
#include "engine/stage_memo.h"

namespace hapmoe {

SearchStats& SearchStats::operator+=(const SearchStats& o) {
  configs += o.configs;
  configs_evaluated += o.configs_evaluated;
  states += o.states;
  transitions += o.transitions;
  pruned_load_balance += o.pruned_load_balance;
  pruned_memory += o.pruned_memory;
  pruned_hetero_comm += o.pruned_hetero_comm;
  pruned_bound += o.pruned_bound;
  configs_bounded += o.configs_bounded;
  feasible += o.feasible;
  hetero_comm_ratio = std::max(hetero_comm_ratio, o.hetero_comm_ratio);
  seconds += o.seconds;
  return *this;
}

namespace {

using hsdp::by_insertion;
using hsdp::Entry;
using hsdp::Evaluator;
using hsdp::FrontStore;
using hsdp::key_order;
using hsdp::Label;
using hsdp::low_key;
using hsdp::merge;
using hsdp::note_shortfall;
using hsdp::offer;
using hsdp::rank_level;
using hsdp::StageEval;
using hsdp::Step;
using hsdp::step_of;
using hsdp::tie_gap;
using hsdp::to_label;

using hsdp::Windows;  // layer windows per (stage position, type): [lo, hi] (count.h)

// The least sum, max and tail terms over a front (for the bound).
struct FrontFloor {
  double sum = std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  double tail_sync = std::numeric_limits<double>::infinity();
  double tail_opt = std::numeric_limits<double>::infinity();
  bool usable = false;  // the pre-check applies
};

// The labels of one state of a level: those numbered [begin, end) (their
// index in the trail, run_dp), in the order they
// entered the state's front.
struct StateRange {
  std::uint64_t key = 0;
  std::int32_t begin = 0;
  std::int32_t end = 0;
};

// The level share that builds a state (SearchPart::levels): its key,
// mixed (splitmix64's finalizer), reduced to [0, count). The states of a
// level spread evenly over the shares whatever their pattern of keys.
int share_of(std::uint64_t key, int count) {
  key ^= key >> 30;
  key *= 0xbf58476d1ce4e5b9ULL;
  key ^= key >> 27;
  key *= 0x94d049bb133111ebULL;
  key ^= key >> 31;
  // key * count / 2^64: the range reduction without a division.
  return static_cast<int>((static_cast<unsigned __int128>(key) * static_cast<unsigned>(count)) >>
                          64);
}

// What one level share built of a level, for the trade: whether it
// stopped (a limit), then its states in key order, each its key and its
// labels (a front, as run_dp stores it). Plain data as its bytes
// (engine/bytes.h).
template <class T>
void append_raw(std::string& to, const T* from, std::size_t count) {
  static_assert(std::is_trivially_copyable_v<T>);
  to.append(reinterpret_cast<const char*>(from), count * sizeof(T));
}

void encode_level(FrontStore<Entry>& store,
                  const std::vector<std::pair<std::uint64_t, std::size_t>>& order, bool stopped,
                  bool value_only, std::string& out) {
  thread_local std::vector<std::uint64_t> keys;
  thread_local std::vector<std::uint32_t> sizes;
  keys.clear();
  sizes.clear();
  std::size_t labels = 0;
  for (const auto& [key, k] : order) {
    const std::size_t size = store.front(k).size();
    if (size == 0) continue;
    keys.push_back(key);
    sizes.push_back(static_cast<std::uint32_t>(size));
    labels += size;
  }
  const char stop = stopped ? 1 : 0;
  const std::uint64_t states = keys.size();
  const std::size_t head =
      1 + sizeof states + states * (sizeof(std::uint64_t) + sizeof(std::uint32_t));
  // Grown geometrically: levels grow, and a buffer reallocated to each
  // level's exact size would take fresh pages every level.
  const std::size_t need = head + labels * sizeof(Label);
  if (need > out.capacity()) out.reserve(std::max(need, 2 * out.capacity()));
  out.clear();
  append_raw(out, &stop, 1);
  append_raw(out, &states, 1);
  append_raw(out, keys.data(), keys.size());
  append_raw(out, sizes.data(), sizes.size());
  for (const auto& [key, k] : order) {
    std::vector<Entry>& front = store.front(k);
    if (value_only) by_insertion(front);  // as run_dp stores it
    for (const Entry& c : front) {
      const Label l = to_label(c);
      append_raw(out, &l, 1);
    }
  }
}

// A level as the shares traded it: every share's states in key order,
// each its key and its labels, as bytes inside the traded buffers.
struct TradedState {
  std::uint64_t key = 0;
  const char* labels = nullptr;  // `count` Labels, unaligned
  std::uint32_t count = 0;
};
struct TradedLevel {
  std::vector<TradedState> states;
  std::size_t labels = 0;  // over all states
};

// Every share's part of a level (encode_level), merged in key order into
// `level`; false when a share stopped.
bool decode_levels(const std::vector<std::string_view>& built, TradedLevel& level) {
  level.states.clear();
  level.labels = 0;
  for (const std::string_view b : built) {
    if (b.empty() || b[0] != 0) return false;  // a share stopped (or failed: the caller's)
    std::uint64_t states = 0;
    HAPMOE_REQUIRE(b.size() >= 1 + sizeof states, "run_dp: a level share sent no level");
    std::memcpy(&states, b.data() + 1, sizeof states);
    const char* keys = b.data() + 1 + sizeof states;
    const char* sizes = keys + states * sizeof(std::uint64_t);
    const char* labels = sizes + states * sizeof(std::uint32_t);
    HAPMOE_REQUIRE(labels <= b.data() + b.size() &&
                       static_cast<std::size_t>(b.data() + b.size() - labels) % sizeof(Label) == 0,
                   "run_dp: a level share sent a truncated level");
    std::size_t count = 0;
    for (std::uint64_t k = 0; k < states; ++k) {
      TradedState state;
      std::memcpy(&state.key, keys + k * sizeof state.key, sizeof state.key);
      std::memcpy(&state.count, sizes + k * sizeof state.count, sizeof state.count);
      state.labels = labels + count * sizeof(Label);
      count += state.count;
      level.states.push_back(state);
    }
    HAPMOE_REQUIRE(labels + count * sizeof(Label) == b.data() + b.size(),
                   "run_dp: a level share sent labels its states do not hold");
    level.labels += count;
  }
  // Keys are distinct across the shares (each state is built by one).
  std::sort(level.states.begin(), level.states.end(),
            [](const TradedState& a, const TradedState& b) { return a.key < b.key; });
  return true;
}

// The DP over one set of per-type stage limits. With `exact_mix`, a
// complete plan must use exactly `limit[h]` stages of each type (the
// load-balance pruning enumerates mixes); otherwise at most.
//
// A usage vector u (u_h <= limit_h) is coded in mixed radix; a state key
// is (u code, j, h_prev). States are expanded level by level (i stages
// placed), in increasing key order so the run is deterministic.
//
// With `value_only`, labels dominate on (sum, max, tail) alone: the best
// latency is still exact, the plan among equal latencies is not canonical.
//
// `rooms`, if given, caps the layers a stage of each type holds (the rooms
// under the incumbent, Evaluator::most_under_cut): the moves above them
// are dropped as the bound drops them, and the floors of the stages left
// take them.
//
// `share`, a level share (SearchPart::levels), builds the states of each
// level that share_of gives it and trades them for the others' (below).
void run_dp(Evaluator& ev, const std::vector<int>& limit, bool exact_mix, const Windows& win,
            const SearchOptions& opt, double comp_threshold, double incumbent, bool value_only,
            const CancelCheck* cancel, ConfigOutcome& out, const std::vector<int>* rooms = nullptr,
            SearchPart share = {}) {
  if (opt.count_only) {  // the same DP counted, not costed (count.cpp)
    hsdp::count_dp(ev, limit, exact_mix, win, opt, comp_threshold, cancel, out);
    return;
  }
  const int pp = ev.pi().pp;
  const int n = ev.layers();
  const int types = ev.types();
  std::vector<std::uint64_t> stride(static_cast<std::size_t>(types));
  std::uint64_t full = 0;  // code of u = limit
  {
    std::uint64_t st = 1;
    for (int h = 0; h < types; ++h) {
      stride[static_cast<std::size_t>(h)] = st;
      full += st * static_cast<std::uint64_t>(limit[static_cast<std::size_t>(h)]);
      st *= static_cast<std::uint64_t>(limit[static_cast<std::size_t>(h)] + 1);
    }
  }
  const auto used_of = [&](std::uint64_t code, int h) {
    return static_cast<int>(code / stride[static_cast<std::size_t>(h)] %
                            static_cast<std::uint64_t>(limit[static_cast<std::size_t>(h)] + 1));
  };
  const std::uint64_t jspan = static_cast<std::uint64_t>(n + 1);
  const std::uint64_t hspan = static_cast<std::uint64_t>(types + 1);
  // With the launcher's placement (partition/constraints.h, place_stages):
  // a run of stages of one type starts on a fresh node, so a stage of
  // another type closes the run before it and the devices left on the
  // run's last node stay idle. The state then also holds idle_h, the idle
  // devices of type h so far, in units of unit_h = gcd(S, node size):
  // u_h S + idle_h unit_h devices of h are taken, and a plan that takes
  // more than the type has cannot be launched. Types whose stages fill
  // whole nodes never leave any idle. The code is u's + ucount * idle's.
  const bool placing = opt.space.constraints.launcher_placement;
  const int per_stage = ev.pi().stage_devices();
  const std::uint64_t ucount = full + 1;
  std::vector<int> unit(static_cast<std::size_t>(types), 1);
  std::vector<int> node_of(static_cast<std::size_t>(types), 0);
  std::vector<int> devices_of(static_cast<std::size_t>(types), 0);
  std::vector<int> idle_cap(static_cast<std::size_t>(types), 0);
  std::vector<std::uint64_t> idle_stride(static_cast<std::size_t>(types), 0);
  {
    long double span = static_cast<long double>(ucount) * jspan * hspan;
    std::uint64_t st = ucount;
    for (int h = 0; h < types && placing; ++h) {
      const auto u = static_cast<std::size_t>(h);
      const DevicePool& pool = ev.cluster().pools[u];
      if (limit[u] == 0 || per_stage % pool.devices_per_node == 0) continue;
      unit[u] = std::gcd(per_stage, pool.devices_per_node);
      node_of[u] = pool.devices_per_node;
      devices_of[u] = pool.devices();
      // With an exact mix the stages still to place must fit too. Each
      // closed run leaves less than a node idle, and there are fewer
      // closed runs than stages.
      const int slack = pool.devices() - (exact_mix ? limit[u] * per_stage : 0);
      idle_cap[u] = std::min(slack / unit[u], limit[u] * (node_of[u] / unit[u] - 1));
      idle_stride[u] = st;
      st *= static_cast<std::uint64_t>(idle_cap[u] + 1);
      span *= idle_cap[u] + 1;
    }
    if (span >= 1.8e19L) {
      throw InputError("--launcher",
                       "the stage orders the launcher can place are too many to search for PP=" +
                           std::to_string(ev.pi().pp) + " with stages of " +
                           std::to_string(per_stage) +
                           " devices; run without --launcher and write the launcher with "
                           "`evaluate --launcher`");
    }
  }
  const auto idle_of = [&](std::uint64_t code, int h) {
    const auto u = static_cast<std::size_t>(h);
    return idle_stride[u] == 0 ? 0
                               : static_cast<int>(code / idle_stride[u] %
                                                  static_cast<std::uint64_t>(idle_cap[u] + 1));
  };
  const auto make_key = [&](std::uint64_t code, int j, int hp) {
    return (code * jspan + static_cast<std::uint64_t>(j)) * hspan +
           static_cast<std::uint64_t>(hp + 1);
  };
  // For the bound: per type, the cheapest layer step (floor_of), the
  // cheapest boundary into a stage of it from a type of `limit` (entry_of)
  // and its output layer (out_of); every stage after the first pays its
  // entry, the last its output too.
  const double inf = std::numeric_limits<double>::infinity();
  double fastest = inf;
  std::vector<double> floor_of(static_cast<std::size_t>(types), 0.0);
  std::vector<double> entry_of(static_cast<std::size_t>(types), 0.0);
  std::vector<double> out_of(static_cast<std::size_t>(types), 0.0);
  double entry_any = inf;        // least entry_of
  double entry_per_floor = inf;  // least entry_of / floor_of
  double out_any = inf;          // least out_of
  double out_per_floor = inf;    // least out_of / floor_of
  for (int h = 0; h < types; ++h) {
    const auto u = static_cast<std::size_t>(h);
    if (limit[u] == 0) continue;
    floor_of[u] = ev.layer_floor(h);
    fastest = std::min(fastest, floor_of[u]);
    entry_of[u] = inf;
    for (int hp = 0; hp < types; ++hp) {
      if (limit[static_cast<std::size_t>(hp)] == 0) continue;
      const CostModel::Boundary& b = ev.boundary(hp, h);
      entry_of[u] = std::min(entry_of[u], b.fwd_s + b.bwd_s);
    }
    out_of[u] = ev.output_step(h);
    entry_any = std::min(entry_any, entry_of[u]);
    entry_per_floor = std::min(entry_per_floor, entry_of[u] / floor_of[u]);
    out_any = std::min(out_any, out_of[u]);
    out_per_floor = std::min(out_per_floor, out_of[u] / floor_of[u]);
  }

  // The fronts of the level being built, keyed by state. Their labels stay
  // inline (Entry) until the level is complete; only the survivors then
  // enter `next`, each state's labels contiguous and in insertion order,
  // and their steps the trail. Labels are numbered over the run (their
  // index in the trail); `sources` holds the level being expanded, whose
  // first label is number `base`.
  thread_local FrontStore<Entry> store;
  thread_local std::vector<Label> sources;
  thread_local std::vector<Label> next;
  thread_local std::vector<Step> trail;
  std::int32_t base = 0;
  thread_local std::vector<StateRange> current;
  thread_local std::vector<StateRange> upcoming;
  thread_local std::vector<std::pair<std::uint64_t, std::size_t>> order;
  thread_local std::vector<std::int32_t> bucket;
  thread_local std::vector<std::int32_t> ranked;
  thread_local std::vector<std::int32_t> by_low;
  thread_local TradedLevel traded;                // a level share's level, as traded
  thread_local std::array<std::string, 2> built;  // what it built of the last two levels
  store.clear();
  store.recycle_pool();
  sources.assign(1, Label{});  // the root: nothing placed
  trail.assign(1, step_of(sources[0]));
  current.clear();
  current.push_back({make_key(0, 0, -1), 0, 1});
  // Plans slower than this configuration's best so far cannot be its
  // result, nor slower than the incumbent (with the bound on: the K-th
  // best of the job): the latency that matters is at most U. Without the
  // bound, U is the probe's plan alone (search_config), the same for every
  // stage mix, so each mix's DP, and its counters, do not depend on the
  // mixes searched before it: parts of a configuration sum to the whole.
  const double best_so_far = out.best && opt.bound ? out.best->latency_s : inf;
  const double gap = value_only ? -inf : tie_gap(pp, std::min(incumbent, best_so_far));
  // The bound's threshold: out.best changes only when complete plans are
  // offered, after the last level.
  const double best = out.best ? std::min(incumbent, out.best->latency_s) : incumbent;
  const double threshold = best * (1.0 + 1e-12);
  const int m_less_one = ev.microbatches() - 1;
  const int vpp = ev.pi().vpp;
  // The cheapest step of the layers [j, N), per j (for the bound).
  const double* rem_floor = opt.bound ? ev.remaining_floors() : nullptr;
  // speed_of[speed_at[t] + left] = left / floor_of[t], the terms of
  // speed_left below, divided once per run.
  std::vector<std::size_t> speed_at(static_cast<std::size_t>(types), 0);
  std::vector<double> speed_of;
  for (int t = 0; t < types; ++t) {
    speed_at[static_cast<std::size_t>(t)] = speed_of.size();
    for (int left = 0; left <= limit[static_cast<std::size_t>(t)]; ++left) {
      speed_of.push_back(left / floor_of[static_cast<std::size_t>(t)]);
    }
  }
  // For the whole-layer floor of the stages still to place (exact mixes,
  // below): per type, the least and the most layers its windows let a
  // stage hold at any position after i (after_lo/after_hi[i * types + t]).
  // Its tables hold 3 (N + 1) values per usage vector: at most
  // kWholeLayerTableBytes in all (a model of thousands of layers over many
  // stages keeps the fractional floors alone).
  constexpr double kWholeLayerTableBytes = 64.0 * 1024 * 1024;
  const bool whole_layers =
      opt.bound && exact_mix && m_less_one > 0 &&
      3.0 * (n + 1) * static_cast<double>(full + 1) * sizeof(double) <= kWholeLayerTableBytes;
  std::vector<int> after_lo;
  std::vector<int> after_hi;
  if (whole_layers) {
    after_lo.assign(static_cast<std::size_t>(pp * types), std::numeric_limits<int>::max());
    after_hi.assign(static_cast<std::size_t>(pp * types), 0);
    for (int i = pp - 2; i >= 0; --i) {
      for (int t = 0; t < types; ++t) {
        const auto at = static_cast<std::size_t>(i * types + t);
        const auto next = static_cast<std::size_t>((i + 1) * types + t);
        const int lo_next = std::max(1, win.lo_at(i + 1, t));
        const int hi_next =
            rooms != nullptr ? std::min(win.hi_at(i + 1, t), (*rooms)[static_cast<std::size_t>(t)])
                             : win.hi_at(i + 1, t);
        after_lo[at] = std::min(i + 1 < pp - 1 ? after_lo[next] : lo_next, lo_next);
        after_hi[at] = std::max(i + 1 < pp - 1 ? after_hi[next] : hi_next, hi_next);
      }
    }
  }
  // Per usage vector after a stage (its u code), the floors of the stages
  // left, made at its first use (they depend on the stages left alone),
  // 3 (N + 1) values at left_at[code] in `left_floors`: the whole-layer
  // floor of their slowest step by layers left; the floor of the layers'
  // steps they add by first layer left; the whole-layer floor again where
  // only MoE layers are left, at the types' MoE layer steps.
  thread_local std::vector<std::int32_t> left_at;  // offset in left_floors, or -1
  thread_local std::vector<double> left_floors;
  // Per layer j: the MoE layers among [j, N).
  const int* moe_from = whole_layers ? ev.moe_layers_left() : nullptr;
  if (whole_layers) {
    left_at.assign(static_cast<std::size_t>(ucount), -1);
    left_floors.clear();
  }
  const auto floors_left = [&](std::uint64_t next_u, int i, const std::vector<int>& used_before,
                               int h) -> const double* {
    std::int32_t& at = left_at[static_cast<std::size_t>(next_u)];
    if (at >= 0) return left_floors.data() + at;
    thread_local std::vector<hsdp::StagesLeft> stages;
    thread_local std::vector<hsdp::LayersOnType> room;
    thread_local std::vector<double> one;
    stages.clear();
    room.clear();
    for (int t = 0; t < types; ++t) {
      const auto u = static_cast<std::size_t>(t);
      const auto w = static_cast<std::size_t>(i * types + t);
      const int left = limit[u] - used_before[u] - (t == h ? 1 : 0);
      stages.push_back({entry_of[u], floor_of[u], left, after_lo[w], after_hi[w]});
      if (left > 0) {
        room.push_back(
            {ev.dense_step(t), ev.moe_step(t), static_cast<long long>(left) * after_hi[w]});
      }
    }
    at = static_cast<std::int32_t>(left_floors.size());
    hsdp::whole_layer_floors(stages, n, one);
    left_floors.insert(left_floors.end(), one.begin(), one.end());
    thread_local std::vector<double> dense_sums;
    thread_local std::vector<double> moe_sums;
    hsdp::layer_sum_floors(room, n, dense_sums, moe_sums);
    for (int x = 0; x <= n; ++x) {
      const int moe = moe_from[x];
      const double sum = dense_sums[static_cast<std::size_t>(n - x - moe)] +
                         moe_sums[static_cast<std::size_t>(moe)];
      left_floors.push_back(std::max(rem_floor[x], sum * (1.0 - 1e-9)));
    }
    // With dense and MoE layers both in the model (else the same table).
    const int moe_layers = moe_from[0];
    if (moe_layers > 0 && moe_layers < n) {
      for (int t = 0; t < types; ++t) stages[static_cast<std::size_t>(t)].layer = ev.moe_step(t);
      hsdp::whole_layer_floors(stages, n, one);
    }
    left_floors.insert(left_floors.end(), one.begin(), one.end());
    return left_floors.data() + at;
  };
  std::vector<int> used(static_cast<std::size_t>(types), 0);
  // A level share expands every state of a level but makes only the moves
  // into the states it owns, and counts only the states it owns (their
  // expansion, and the complete plans), so that every count is made by
  // one share. It asks `cancel` between levels only, and every share
  // learns at the trade that one stopped: a share that left the DP alone
  // would leave the others waiting at the next trade.
  LevelExchange* const trade = share.count > 1 ? share.levels : nullptr;
  HAPMOE_REQUIRE(trade == nullptr || (!opt.bound && rooms == nullptr),
                 "run_dp: a level share of a bounded search");
  const auto owns = [&](std::uint64_t key) {
    return trade == nullptr || share_of(key, share.count) == share.index;
  };
  const CancelCheck* within_level = trade == nullptr ? cancel : nullptr;
  bool stop_next = false;  // a share's limit, passed at the next trade
  // Labels extended since the last ask of `cancel`: a level of a model
  // with thousands of layers can take seconds, so the search asks inside
  // it too, every kCancelEvery labels (one add and compare per
  // transition).
  std::int64_t extended = 0;
  for (int i = 0; i < pp && !current.empty(); ++i) {
    const bool stop = stop_next || (cancel != nullptr && (*cancel)(0));
    if (stop && trade == nullptr) {
      out.cancelled = true;
      return;
    }
    const int remaining_after = pp - i - 1;
    store.clear();
    store.recycle_pool();
    std::int32_t seq = 0;
    // Expand the states of level i in key order (`current` is sorted); a
    // share that stops builds nothing and says so at the trade.
    for (const StateRange& state : std::span(current).first(stop ? 0 : current.size())) {
      const std::uint64_t key = state.key;
      const int hp = static_cast<int>(key % hspan) - 1;
      const int j = static_cast<int>(key / hspan % jspan);
      const std::uint64_t code = key / hspan / jspan;
      const bool own_state = owns(key);
      if (own_state) ++out.stats.states;
      for (int t = 0; t < types; ++t) used[static_cast<std::size_t>(t)] = used_of(code, t);
      // The least any label of the front can carry into a candidate's
      // bound, for the pre-check below.
      FrontFloor low;
      low.usable = opt.bound && m_less_one > 0;  // 0 * inf would be NaN, never above
      if (low.usable) {
        for (std::int32_t from = state.begin; from < state.end; ++from) {
          const Label& f = sources[static_cast<std::size_t>(from - base)];
          low.sum = std::min(low.sum, f.sum);
          low.max = std::min(low.max, f.max);
          low.tail_sync = std::min(low.tail_sync, f.tail_sync);
          low.tail_opt = std::min(low.tail_opt, f.tail_opt);
          // A NaN (whose bound is never above the threshold) would be
          // skipped by min: no pre-check then.
          low.usable = low.usable && f.sum == f.sum && f.max == f.max &&
                       f.tail_sync == f.tail_sync && f.tail_opt == f.tail_opt;
        }
      }
      for (int h = 0; h < types; ++h) {
        if (used[static_cast<std::size_t>(h)] >= limit[static_cast<std::size_t>(h)]) continue;
        // Structural bounds: every later stage needs at least a layer.
        const int max_n = n - j - remaining_after;
        if (max_n < 1) continue;
        // The last stage takes all the remaining layers.
        const int min_n = remaining_after == 0 ? max_n : 1;
        const int lo = std::max(min_n, win.lo_at(i, h));
        int hi = std::min(max_n, win.hi_at(i, h));
        if (!opt.uniform && own_state) {  // with --uniform the window is the space itself
          out.stats.pruned_load_balance += (max_n - min_n + 1) - std::max(0, hi - lo + 1);
        }
        if (rooms != nullptr && hi > (*rooms)[static_cast<std::size_t>(h)]) {
          const int capped = std::max(lo - 1, (*rooms)[static_cast<std::size_t>(h)]);
          out.stats.pruned_bound +=
              static_cast<std::int64_t>(hi - capped) * (state.end - state.begin);
          hi = capped;
        }
        const CostModel::Boundary& b = ev.boundary(hp, h);
        if (hp >= 0 && hp != h && comp_threshold > 0) {
          const double t_comm = b.fwd_s + b.bwd_s;
          out.stats.hetero_comm_ratio =
              std::max(out.stats.hetero_comm_ratio, t_comm * opt.eta / comp_threshold);
          if (opt.prune.hetero_comm && t_comm > comp_threshold) {
            if (own_state) out.stats.pruned_hetero_comm += std::max(0, hi - lo + 1);
            continue;
          }
        }
        std::uint64_t next_code = code + stride[static_cast<std::size_t>(h)];
        if (placing) {
          // A stage of h must find devices of h beside the idle ones; one
          // after a run of hp closes that run at a node boundary.
          const auto uh = static_cast<std::size_t>(h);
          if (idle_stride[uh] != 0 && !exact_mix &&
              (used[uh] + 1) * per_stage + idle_of(code, h) * unit[uh] > devices_of[uh]) {
            continue;
          }
          const auto up = static_cast<std::size_t>(hp);
          if (hp >= 0 && hp != h && idle_stride[up] != 0) {
            const int idle = idle_of(code, hp);
            const int taken = used[up] * per_stage + idle * unit[up];
            const int rounded = (taken + node_of[up] - 1) / node_of[up] * node_of[up];
            const int closed = idle + (rounded - taken) / unit[up];
            if (closed > idle_cap[up]) continue;
            next_code += static_cast<std::uint64_t>(closed - idle) * idle_stride[up];
          }
        }
        // The stages still to place: speed_left, the sum of 1 / (cheapest
        // layer step of their type), and what their fixed steps add to the
        // sum (fixed_left) and to the layers the balanced split must hold
        // (held_left: each fixed step over its type's layer step), exact
        // types with a fixed mix, the cheapest otherwise. A stage of type t
        // holding n layers steps at least fixed + n floor_of[t], so a
        // slowest stage of T holds at most (T - fixed) / floor_of[t].
        double speed_left = 0.0;
        double fixed_left = 0.0;
        double held_left = 0.0;
        const double* slowest_left = nullptr;  // by layers left (whole_layers)
        const double* sum_left = rem_floor;    // by first layer left
        const double* slowest_moe = nullptr;   // by layers left, all of them MoE
        if (remaining_after > 0) {
          if (exact_mix) {
            double out_min = inf;
            double out_held = inf;
            for (int t = 0; t < types; ++t) {
              const auto u = static_cast<std::size_t>(t);
              const int left = limit[u] - used[u] - (t == h ? 1 : 0);
              if (left <= 0) continue;
              speed_left += speed_of[speed_at[u] + left];
              fixed_left += left * entry_of[u];
              held_left += left * (entry_of[u] / floor_of[u]);
              out_min = std::min(out_min, out_of[u]);
              out_held = std::min(out_held, out_of[u] / floor_of[u]);
            }
            fixed_left += out_min;
            held_left += out_held;
            if (whole_layers) {
              slowest_left =
                  floors_left(code % ucount + stride[static_cast<std::size_t>(h)], i, used, h);
              sum_left = slowest_left + n + 1;
              slowest_moe = sum_left + n + 1;
            }
          } else {
            speed_left = remaining_after / fastest;
            fixed_left = remaining_after * entry_any + out_any;
            held_left = remaining_after * entry_per_floor + out_per_floor;
          }
        }
        const Evaluator::Row stage_row = ev.row(h, i, j);
        for (int layers = lo; layers <= hi; ++layers) {
          if (trade != nullptr && !owns(make_key(next_code, j + layers, h))) continue;
          const StageEval& e = ev.stage(stage_row, layers);
          if (!e.feasible) {
            note_shortfall(out, e, ev.pi(), i, h, layers);
            if (opt.prune.memory) {
              ++out.stats.pruned_memory;
              continue;
            }
          }
          ++out.stats.transitions;
          if (within_level != nullptr && (extended += state.end - state.begin) >= kCancelEvery) {
            extended = 0;
            if ((*within_level)(0)) {
              out.cancelled = true;
              return;
            }
          }
          const double floor = opt.bound ? sum_left[j + layers] + fixed_left : 0.0;
          // The slowest stage is at least the balanced split of the layers
          // left over the stages left.
          double max_floor = speed_left > 0.0 ? ((n - j - layers) + held_left) / speed_left : 0.0;
          if (slowest_left != nullptr) {
            const int left = n - j - layers;
            const bool all_moe = moe_from[j + layers] == left;
            max_floor = std::max(max_floor, (all_moe ? slowest_moe : slowest_left)[left]);
          }
          // What the stage adds, with the arithmetic of extend().
          const double step = (e.fwd + b.fwd_s) + (e.bwd + b.bwd_s);
          const double stage_tail = e.sync + e.opt;
          const std::int64_t stage_key = low_key(h, layers);
          if (low.usable) {
            // The bound below, from the front's least values: + and max are
            // monotone in floating point too, so this is at most every
            // label's bound; above the threshold, every label is dropped.
            const double low_max = std::max(std::max(low.max, step), max_floor);
            const double lb = pipeline_edge(low.sum + step + floor, low_max, vpp) +
                              m_less_one * low_max + std::min(low.tail_sync, e.sync) +
                              std::min(low.tail_opt, e.opt);
            if (lb > threshold) {
              out.stats.pruned_bound += state.end - state.begin;
              continue;
            }
          }
          std::vector<Entry>* dest = nullptr;  // looked up at the first survivor
          for (std::int32_t from = state.begin; from < state.end; ++from) {
            const Label& f = sources[static_cast<std::size_t>(from - base)];
            Entry cand;
            cand.sum = f.sum + step;
            cand.max = std::max(f.max, step);
            if (stage_tail > f.tail) {
              cand.tail = stage_tail;
              cand.tail_sync = e.sync;
              cand.tail_opt = e.opt;
            } else {
              cand.tail = f.tail;
              cand.tail_sync = f.tail_sync;
              cand.tail_opt = f.tail_opt;
            }
            if (opt.bound) {
              // Every completion adds at least `floor` to the sum and keeps
              // the maxima; the margin keeps ties (equal latency, smaller
              // key) and rounding on the safe side.
              const double cand_max = std::max(cand.max, max_floor);
              const double lb = pipeline_edge(cand.sum + floor, cand_max, vpp) +
                                m_less_one * cand_max + cand.tail_sync + cand.tail_opt;
              if (lb > threshold) {
                ++out.stats.pruned_bound;
                continue;
              }
            }
            cand.key = (static_cast<std::int64_t>(f.rank) << 32) | stage_key;
            cand.parent = from;
            cand.seq = seq++;
            // Feasible and infeasible labels never dominate each other (an
            // infeasible one never completes).
            cand.feasible = f.feasible && e.feasible;
            if (dest == nullptr) {
              bool created = false;
              dest = &store.at(make_key(next_code, j + layers, h), created);
            }
            merge(*dest, cand, gap);
          }
        }
      }
    }
    // The level's survivors enter `next`, state by state in key order.
    const auto level_begin = static_cast<std::int32_t>(trail.size());
    const auto parents = static_cast<std::int32_t>(sources.size());
    key_order(store, order);
    if (trade != nullptr) {  // the shares trade what they built
      // Two buffers, a level each: the others may still read the last
      // level's while this share writes the next.
      std::string& mine = built[static_cast<std::size_t>(i % 2)];
      encode_level(store, order, stop, value_only, mine);
      if (!decode_levels(trade->trade(share.index, mine), traded)) {
        out.cancelled = true;
        return;
      }
    }
    // The survivors enter `next` and the trail: when one must grow, the
    // limits are asked first with the bytes of its new block (the old one
    // is still held while copied), so a memory limit stops the search
    // before the allocation that would pass it rather than after.
    next.clear();
    if (cancel != nullptr) {
      std::size_t survivors = trade != nullptr ? traded.labels : 0;
      for (const auto& entry : order) {
        if (trade == nullptr) survivors += store.front(entry.second).size();
      }
      // The vector's doubling (exactly `need` or 1.5x stopped the
      // 1,000-layer model at the same peak, bench/README.md "Limits":
      // growing a contiguous block needs its old and new blocks at once).
      const std::size_t need = trail.size() + survivors;
      const std::size_t trail_to =
          need > trail.capacity() ? std::max(need, 2 * trail.capacity()) : 0;
      const std::size_t next_to = survivors > next.capacity() ? survivors : 0;
      const double grow = static_cast<double>(trail_to * sizeof(Step) + next_to * sizeof(Label));
      if (grow > 0) {
        if ((*cancel)(static_cast<std::int64_t>(grow))) {
          if (trade == nullptr) {
            out.cancelled = true;
            return;
          }
          stop_next = true;  // the others are told at the next trade
        }
        if (trail_to > 0) trail.reserve(trail_to);
        if (next_to > 0) next.reserve(next_to);
      }
    }
    upcoming.clear();
    if (trade != nullptr) {  // every share's states, in key order
      for (const TradedState& state : traded.states) {
        const std::size_t begin = next.size();
        next.resize(begin + state.count);
        std::memcpy(static_cast<void*>(next.data() + begin), state.labels,
                    state.count * sizeof(Label));
        upcoming.push_back({state.key, level_begin + static_cast<std::int32_t>(begin),
                            level_begin + static_cast<std::int32_t>(next.size())});
      }
    } else {
      for (const auto& [state_key, k] : order) {
        std::vector<Entry>& front = store.front(k);
        if (front.empty()) continue;
        // Only value-only runs depend on the order a front is expanded in
        // (which of equal labels stays); otherwise a front is the set of
        // the non-dominated candidates, whatever their order (dominance is
        // then a strict partial order: transitive, and two labels at one
        // state never dominate each other, their keys differing).
        if (value_only) by_insertion(front);
        const auto begin = level_begin + static_cast<std::int32_t>(next.size());
        for (const Entry& c : front) next.push_back(to_label(c));
        upcoming.push_back(
            {state_key, begin, level_begin + static_cast<std::int32_t>(next.size())});
      }
    }
    for (const Label& l : next) trail.push_back(step_of(l));
    rank_level(next, parents, 0, types, n, bucket, by_low, ranked);
    std::swap(current, upcoming);
    std::swap(sources, next);
    base = level_begin;
  }
  // Complete plans: all PP stages, all N layers, the mix if required.
  for (const StateRange& state : current) {
    const std::uint64_t key = state.key;
    if (static_cast<int>(key / hspan % jspan) != n) continue;
    if (exact_mix && key / hspan / jspan % ucount != full) continue;
    if (!owns(key)) continue;
    ++out.stats.states;
    for (std::int32_t idx = state.begin; idx < state.end; ++idx) {
      offer(out, sources[static_cast<std::size_t>(idx - base)], trail, idx, ev);
    }
  }
}

Windows full_windows(const Evaluator& ev) {
  Windows w;
  w.types = ev.types();
  const std::size_t size = static_cast<std::size_t>(ev.pi().pp * ev.types());
  w.lo.assign(size, 1);
  w.hi.assign(size, ev.layers());
  return w;
}

// n_i = N/PP, the remainder spread over the first stages.
// N/PP layers at every stage (PP divides N: the caller checks).
void apply_uniform(const Evaluator& ev, Windows& w) {
  const int pp = ev.pi().pp;
  const int layers = ev.layers() / pp;
  for (int i = 0; i < pp; ++i) {
    for (int h = 0; h < ev.types(); ++h) {
      w.lo[static_cast<std::size_t>(i * ev.types() + h)] = layers;
      w.hi[static_cast<std::size_t>(i * ev.types() + h)] = layers;
    }
  }
}

// The stages per type that use exactly `devices` (per type) under pi, in
// `mix`; false when pi cannot (a count not a multiple of a stage's
// devices, more stages than the type holds, or not PP stages in all).
bool uniform_mix(const Evaluator& ev, const std::vector<int>& devices, std::vector<int>& mix) {
  const int size = ev.pi().stage_devices();
  if (static_cast<int>(devices.size()) != ev.types()) return false;
  int stages = 0;
  for (int h = 0; h < ev.types(); ++h) {
    const int d = devices[static_cast<std::size_t>(h)];
    if (d % size != 0 || d / size > ev.cap(h)) return false;
    mix[static_cast<std::size_t>(h)] = d / size;
    stages += d / size;
  }
  return stages == ev.pi().pp;
}

// The load-balance windows of a stage mix c (docs/search.md, pruning 1):
// per (position, type), the layers around the step-balanced and the
// tail-balanced shares, +-delta. Sets `t_star`, the balanced stage step.
Windows balanced_windows(const Evaluator& ev, const std::vector<int>& c,
                         const std::vector<double>& tau, const std::vector<int>& fit_max,
                         const std::vector<Evaluator::TailLine>& tail_lines, double delta,
                         double& t_star_out) {
  const int types = ev.types();
  const int n = ev.layers();
  const int pp = ev.pi().pp;
  // Balanced stage step T*: every stage i of type h takes
  // n_i = (T* - fixed_i,h) / tau_h layers and the n_i sum to N. The
  // types of the first and last stage are not known yet, so their
  // fixed costs enter weighted by the mix (exact when homogeneous).
  double speed = 0.0;  // sum_h c_h / tau_h
  double fixed = 0.0;  // sum_i fixed_i / tau_h(i), mix-weighted
  for (int t = 0; t < types; ++t) {
    const double ct = c[static_cast<std::size_t>(t)];
    if (ct == 0) continue;
    const double tt = tau[static_cast<std::size_t>(t)];
    const double share = ct / pp;  // chance of being first / last
    speed += ct / tt;
    if (pp == 1) {
      fixed += ev.fixed_step(t, true, true) / tt;
    } else {
      fixed += share * (ev.fixed_step(t, true, false) + ev.fixed_step(t, false, true)) / tt +
               (ct - 2.0 * share) * ev.fixed_step(t, false, false) / tt;
    }
  }
  double t_star = (n + fixed) / speed;
  // Memory: a type whose balanced share exceeds the most layers its stages
  // can hold takes that many, and the others take more (water-filling:
  // sum_t c_t * min((T - F_t) / tau_t, fit_t) = N, solved for T by
  // bisection). Not binding on a homogeneous cluster that fits.
  const auto share_of = [&](int t, double t_step) {
    const double raw = (t_step - ev.fixed_step(t, false, false)) / tau[static_cast<std::size_t>(t)];
    return std::clamp(raw, 0.0, static_cast<double>(fit_max[static_cast<std::size_t>(t)]));
  };
  bool binding = false;
  double capacity = 0.0;
  for (int t = 0; t < types; ++t) {
    if (c[static_cast<std::size_t>(t)] == 0) continue;
    capacity +=
        c[static_cast<std::size_t>(t)] * static_cast<double>(fit_max[static_cast<std::size_t>(t)]);
    const double raw = (t_star - ev.fixed_step(t, false, false)) / tau[static_cast<std::size_t>(t)];
    binding = binding || (fit_max[static_cast<std::size_t>(t)] < n &&
                          raw > fit_max[static_cast<std::size_t>(t)]);
  }
  if (binding && capacity >= n) {
    double lo_t = 0.0;
    double hi_t = t_star;
    const auto placed = [&](double t_step) {
      double sum = 0.0;
      for (int t = 0; t < types; ++t) sum += c[static_cast<std::size_t>(t)] * share_of(t, t_step);
      return sum;
    };
    while (placed(hi_t) < n) hi_t *= 2.0;
    for (int iter = 0; iter < 100; ++iter) {
      const double mid = 0.5 * (lo_t + hi_t);
      (placed(mid) < n ? lo_t : hi_t) = mid;
    }
    t_star = hi_t;
  } else {
    binding = false;
  }
  // The same balance for the tail (gradient sync + optimizer, which
  // grows with the parameters a stage holds): with few micro-batches
  // it can outweigh the step, so the window spans both shares.
  double tail_speed = 0.0;
  double tail_fixed = 0.0;
  for (int t = 0; t < types; ++t) {
    const double ct = c[static_cast<std::size_t>(t)];
    if (ct == 0) continue;
    const auto mid = tail_lines[static_cast<std::size_t>(3 * t)];
    const auto first = tail_lines[static_cast<std::size_t>(3 * t + 1)];
    const auto lastl = tail_lines[static_cast<std::size_t>(3 * t + 2)];
    if (mid.per_layer <= 0.0) continue;
    const double share = ct / pp;
    tail_speed += ct / mid.per_layer;
    tail_fixed += (pp == 1 ? first.fixed + lastl.fixed - mid.fixed
                           : share * (first.fixed + lastl.fixed) + (ct - 2.0 * share) * mid.fixed) /
                  mid.per_layer;
  }
  const double u_star = tail_speed > 0.0 ? (n + tail_fixed) / tail_speed : 0.0;
  Windows w;
  w.types = types;
  w.lo.resize(static_cast<std::size_t>(pp * types));
  w.hi.resize(w.lo.size());
  auto window = [&](double share, int& lo, int& hi) {
    // Never empty: a stage whose fixed costs alone exceed the
    // balanced time (an output layer with a large vocabulary)
    // takes one layer.
    share = std::max(0.0, share);
    lo = std::clamp(static_cast<int>(std::floor((1.0 - delta) * share)), 1, n);
    hi = std::clamp(static_cast<int>(std::ceil((1.0 + delta) * share)), lo, n);
  };
  for (int t = 0; t < types; ++t) {
    if (c[static_cast<std::size_t>(t)] == 0) continue;
    // A position's window depends on it only through first and last, so
    // the middle positions' is computed once (counting the plain DP
    // builds the windows of millions of mixes, docs/search.md).
    const auto position_window = [&](bool first, bool last, int& lo, int& hi) {
      double share = (t_star - ev.fixed_step(t, first, last)) / tau[static_cast<std::size_t>(t)];
      if (binding)
        share = std::min(share, static_cast<double>(fit_max[static_cast<std::size_t>(t)]));
      window(share, lo, hi);
      const auto mid = tail_lines[static_cast<std::size_t>(3 * t)];
      if (mid.per_layer > 0.0) {
        const auto line = first ? tail_lines[static_cast<std::size_t>(3 * t + 1)]
                                : (last ? tail_lines[static_cast<std::size_t>(3 * t + 2)] : mid);
        int tlo = 0;
        int thi = 0;
        window((u_star - line.fixed) / mid.per_layer, tlo, thi);
        lo = std::min(lo, tlo);
        hi = std::max(hi, thi);
      }
    };
    int mid_lo = 0;
    int mid_hi = 0;
    if (pp > 2) position_window(false, false, mid_lo, mid_hi);
    for (int i = 0; i < pp; ++i) {
      const bool first = i == 0;
      const bool last = i == pp - 1;
      int lo = mid_lo;
      int hi = mid_hi;
      if (first || last) position_window(first, last, lo, hi);
      w.lo[static_cast<std::size_t>(i * types + t)] = lo;
      w.hi[static_cast<std::size_t>(i * types + t)] = hi;
    }
  }
  t_star_out = t_star;
  return w;
}

// The stage mixes c of pi: stages per type, sum PP, c_h <= cap_h.
std::vector<std::vector<int>> stage_mixes(const Evaluator& ev) {
  const int types = ev.types();
  std::vector<std::vector<int>> all;
  std::vector<int> m(static_cast<std::size_t>(types), 0);
  std::function<void(int, int)> gen = [&](int h, int left) {
    if (h == types) {
      if (left == 0) all.push_back(m);
      return;
    }
    for (int k = 0; k <= std::min(ev.cap(h), left); ++k) {
      m[static_cast<std::size_t>(h)] = k;
      gen(h + 1, left - k);
    }
    m[static_cast<std::size_t>(h)] = 0;
  };
  gen(0, ev.pi().pp);
  return all;
}

// One search of pi with `ev`, an evaluator of pi (its stage memo is kept
// between the two passes of search_config); `part` of its stage mixes.
ConfigOutcome search_once(Evaluator& ev, const ParallelConfig& pi, const SearchOptions& opt,
                          double incumbent, bool value_only, SearchPart part,
                          const CancelCheck* cancel) {
  const auto start = std::chrono::steady_clock::now();
  ConfigOutcome out;
  out.stats.configs_evaluated = 1;
  const int types = ev.types();
  const int n = ev.layers();
  std::vector<int> usable;
  for (int h = 0; h < types; ++h) {
    if (ev.cap(h) > 0) usable.push_back(h);
  }
  // tau_h: the step of an average layer; T_comp: the mean stage step of a
  // balanced split over the usable types.
  std::vector<double> tau(static_cast<std::size_t>(types), 0.0);
  double inv_sum = 0.0;
  for (int h : usable) {
    tau[static_cast<std::size_t>(h)] = ev.layer_step(h);
    inv_sum += 1.0 / tau[static_cast<std::size_t>(h)];
  }
  const double mean_tau =
      usable.empty() ? 0.0 : static_cast<double>(usable.size()) / inv_sum;  // harmonic mean
  const double comp_threshold = opt.eta * n * mean_tau / pi.pp;

  if (!usable.empty()) {
    if (opt.prune.load_balance && !opt.uniform) {
      // The most layers a stage of each type can hold (memory).
      std::vector<int> fit_max(static_cast<std::size_t>(types), 0);
      for (int h : usable) fit_max[static_cast<std::size_t>(h)] = ev.max_fitting_layers(h);
      // With every layer alike, fit_max bounds a stage of its type
      // anywhere (Evaluator::max_fitting_layers): stages that cannot hold
      // the N layers between them have no plan that fits, and are skipped
      // with the memory pruning once a plan is known (before that, their
      // moves find the closest miss, if wanted). With the bound only: the
      // plain DP's counts stay count_only's.
      const bool skip_short = opt.bound && opt.prune.memory && !opt.count_only && ev.layers_alike();
      // The most layers a stage of each type holds in a plan under the
      // incumbent (memory, then the step; fit_max, which the windows take,
      // is memory alone).
      std::vector<int> room = fit_max;
      bool room_below_fit = false;
      if (skip_short && std::isfinite(incumbent)) {
        // The most layers a stage can hold in a plan under the incumbent
        // (Evaluator::most_under_cut).
        const double cut = incumbent * (1.0 + 1e-9);
        for (int h : usable) {
          room[static_cast<std::size_t>(h)] =
              ev.most_under_cut(h, fit_max[static_cast<std::size_t>(h)], cut);
          room_below_fit = room_below_fit ||
                           room[static_cast<std::size_t>(h)] < fit_max[static_cast<std::size_t>(h)];
        }
      }
      const auto short_of_layers = [&](const std::vector<int>& c) {
        long long held = 0;
        for (int h : usable) {
          held += static_cast<long long>(c[static_cast<std::size_t>(h)]) *
                  room[static_cast<std::size_t>(h)];
        }
        return held < n;
      };
      if (skip_short && (std::isfinite(incumbent) || !opt.closest_miss)) {
        std::vector<std::pair<int, int>> held;
        for (const int h : usable) held.emplace_back(room[static_cast<std::size_t>(h)], ev.cap(h));
        if (hsdp::stages_fall_short(std::move(held), pi.pp, n)) {
          out.stats.seconds =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          return out;
        }
      }
      // Tail lines per type: middle, first, last stage.
      std::vector<Evaluator::TailLine> tail_lines(static_cast<std::size_t>(3 * types));
      for (int h : usable) {
        tail_lines[static_cast<std::size_t>(3 * h)] = ev.tail_line(h, false, false);
        tail_lines[static_cast<std::size_t>(3 * h + 1)] = ev.tail_line(h, true, pi.pp == 1);
        tail_lines[static_cast<std::size_t>(3 * h + 2)] = ev.tail_line(h, pi.pp == 1, true);
      }
      // The mixes c (stages per type, sum PP, c_h <= cap_h), each with a
      // lower bound on the latency of its plans, searched best bound first.
      const std::vector<std::vector<int>> all_mixes = stage_mixes(ev);
      std::vector<double> mix_bound(all_mixes.size(), 0.0);
      std::vector<std::size_t> mix_order(all_mixes.size());
      // A mix above the incumbent is skipped whatever its bound: one test
      // of its floor settles most (Evaluator::mix_lower_bound's cut).
      const double mix_cut = incumbent * (1.0 + 1e-12);
      for (std::size_t k = 0; k < all_mixes.size(); ++k) {
        // With every layer alike, each type's stages hold at most fit_max.
        mix_bound[k] =
            opt.bound ? ev.mix_lower_bound(all_mixes[k], skip_short ? &fit_max : nullptr, mix_cut)
                      : 0.0;
        mix_order[k] = k;
      }
      std::stable_sort(mix_order.begin(), mix_order.end(),
                       [&](std::size_t a, std::size_t b) { return mix_bound[a] < mix_bound[b]; });
      for (std::size_t at = static_cast<std::size_t>(part.index); at < mix_order.size();
           at += static_cast<std::size_t>(part.count)) {
        if (out.cancelled) break;
        const std::size_t k = mix_order[at];
        const double best = out.best ? std::min(incumbent, out.best->latency_s) : incumbent;
        if (opt.bound && mix_bound[k] > best * (1.0 + 1e-12)) {
          ++out.stats.pruned_bound;
          continue;
        }
        const std::vector<int>& c = all_mixes[k];
        if (skip_short && (std::isfinite(best) || !opt.closest_miss) && short_of_layers(c)) {
          continue;
        }
        // The bound again with the rooms under the incumbent, where they
        // are tighter than memory alone (not in mix_bound: the order, and
        // so the parts, must not depend on the incumbent).
        if (room_below_fit && ev.mix_lower_bound(c, &room, mix_cut) > best * (1.0 + 1e-12)) {
          ++out.stats.pruned_bound;
          continue;
        }
        double t_star = 0.0;
        const Windows w = balanced_windows(ev, c, tau, fit_max, tail_lines, opt.delta, t_star);
        run_dp(ev, c, /*exact_mix=*/true, w, opt, opt.eta * t_star, incumbent, value_only, cancel,
               out, room_below_fit ? &room : nullptr);
      }
    } else if (part.index == 0 || part.levels != nullptr) {  // one part, or a level share
      std::vector<int> limit(static_cast<std::size_t>(types));
      for (int h = 0; h < types; ++h) limit[static_cast<std::size_t>(h)] = ev.cap(h);
      Windows w = full_windows(ev);
      bool exact_mix = false;
      bool possible = true;
      if (opt.uniform) {
        apply_uniform(ev, w);
        possible = n % pi.pp == 0;
        if (!opt.devices_per_type.empty()) {
          possible = possible && uniform_mix(ev, opt.devices_per_type, limit);
          exact_mix = true;
        }
      }
      if (possible) {
        run_dp(ev, limit, exact_mix, w, opt, comp_threshold, incumbent, value_only, cancel, out,
               nullptr, part);
      }
    }
  }
  out.stats.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

// A latency no better than pi's best plan under `opt`, for the plain DP
// (bound off): its answer is pi's exact best, and until a latency U bounds
// it, the canonical tie-break keeps its fronts large (docs/search.md,
// "Exactness"; 28 s against 0.3 s on a deep DeepSeek-V3 configuration).
// Any plan of the space searched gives one, and a pruning only removes
// plans: the best of the first few stage mixes (in the order of their
// lower bounds) under all three prunings, each one DP inside its windows,
// with dominance on the values alone; failing that, the exact best of
// opt's space with memory pruned (which loses no plan) and values alone.
// Its moves are not the plain DP's and are not counted; its time is in
// the configuration's seconds. +infinity when nothing fits.
double plain_upper_bound(Evaluator& ev, const ParallelConfig& pi, const SearchOptions& opt,
                         const CancelCheck* cancel) {
  constexpr int kProbeMixes = 4;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  SearchOptions pruned = opt;
  pruned.prune = PruneSet{};
  pruned.bound = true;
  if (!opt.uniform) {
    const int mixes = static_cast<int>(stage_mixes(ev).size());
    for (int k = 0; k < std::min(kProbeMixes, mixes); ++k) {
      const ConfigOutcome probe = search_once(ev, pi, pruned, kInf, true, {k, mixes}, cancel);
      if (probe.best) return probe.best->latency_s;
      if (probe.cancelled) return kInf;
    }
  }
  SearchOptions exact = opt;
  exact.prune.memory = true;
  exact.bound = true;
  const ConfigOutcome probe = search_once(ev, pi, exact, kInf, true, {}, cancel);
  return probe.best ? probe.best->latency_s : kInf;
}

}  // namespace

bool can_share_levels(const SearchOptions& opt) {
  return !opt.bound && !opt.count_only && (!opt.prune.load_balance || opt.uniform);
}

int max_parts(const CostModel& model, const ParallelConfig& pi, const SearchOptions& opt) {
  if (!opt.prune.load_balance || opt.uniform) return 1;
  const Evaluator ev(model, pi, opt);
  return std::max<int>(1, static_cast<int>(stage_mixes(ev).size()));
}

void merge_part(ConfigOutcome& into, const ConfigOutcome& part) {
  if (part.best && (!into.best || candidate_less(*part.best, *into.best))) into.best = part.best;
  if (part.closest.bytes < into.closest.bytes) into.closest = part.closest;
  into.cancelled = into.cancelled || part.cancelled;
  into.stats += part.stats;
  into.stats.configs_evaluated = 1;
}

// A configuration's evaluator as its work estimate left it.
struct ConfigFacts {
  ConfigFacts(const CostModel& model, const ParallelConfig& pi, const SearchOptions& opt)
      : ev(model, pi, opt) {}
  const Evaluator ev;
};

ConfigOutcome search_config(const CostModel& model, const ParallelConfig& pi,
                            const SearchOptions& opt, double incumbent, SearchPart part,
                            const CancelCheck* cancel, const ConfigFacts* facts) {
  HAPMOE_REQUIRE(facts == nullptr || facts->ev.pi() == pi,
                 "search_config: the facts of another configuration");
  HAPMOE_REQUIRE(part.count >= 1 && part.index >= 0 && part.index < part.count,
                 "search_config: part index out of range");
  HAPMOE_REQUIRE(part.levels == nullptr || can_share_levels(opt),
                 "search_config: level shares of a search with stage mixes or a bound");
  const auto start = std::chrono::steady_clock::now();
  // Every search's evaluator, made or taken from the estimate's.
  const auto evaluator = [&] {
    return facts != nullptr ? Evaluator(facts->ev, Evaluator::Fresh{}) : Evaluator(model, pi, opt);
  };
  if (!opt.bound && !opt.count_only) {
    Evaluator ev = evaluator();
    const double upper = plain_upper_bound(ev, pi, opt, cancel);
    ConfigOutcome out = search_once(ev, pi, opt, upper, false, part, cancel);
    out.stats.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return out;
  }
  Evaluator ev = evaluator();
  const double setup =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!opt.bound || std::isfinite(incumbent)) {
    ConfigOutcome out = search_once(ev, pi, opt, incumbent, false, part, cancel);
    out.stats.seconds += setup;
    return out;
  }
  // No incumbent yet: without a latency that bounds the answer, ties keep
  // fronts large (docs/search.md). A first pass with dominance on the
  // values alone finds the exact best latency; the second, bounded by it,
  // finds the canonical plan among the plans that reach it. Both passes
  // count in the statistics.
  // The second pass reuses the first's stage evaluations (same evaluator).
  ConfigOutcome probe = search_once(ev, pi, opt, incumbent, true, part, cancel);
  probe.stats.seconds += setup;
  // Nothing fits: the second pass finds nothing either. Cancelled: the
  // probe's best is a real plan, which is all a stopped search promises.
  if (!probe.best || probe.cancelled) return probe;
  ConfigOutcome out = search_once(ev, pi, opt, probe.best->latency_s, false, part, cancel);
  if (out.cancelled && !out.best) out.best = probe.best;  // the probe's is a real plan
  const double seconds = out.stats.seconds + probe.stats.seconds;
  out.stats += probe.stats;
  out.stats.configs_evaluated = 1;
  out.stats.seconds = seconds;
  return out;
}

double work_estimate(const CostModel& model, const ParallelConfig& pi, const SearchOptions& opt) {
  if (!opt.bound && !opt.count_only) {
    // The plain DP's own moves, counted (count_dp: exact, about 3 us per
    // configuration of the large case), plus what a configuration costs
    // before its first move (evaluator, probe: 0.1-0.2 ms, about as many
    // moves).
    SearchOptions counting = opt;
    counting.count_only = true;
    constexpr double kSetupMoves = 2000;
    return static_cast<double>(search_config(model, pi, counting).stats.transitions) + kSetupMoves;
  }
  const int n = model.workload().model.num_layers;
  // ways[s]: the mixes of the types so far with s stages (a convolution
  // with each type's box [0, cap]), or the usage vectors without the
  // load-balance pruning's mix enumeration.
  std::vector<double> ways(static_cast<std::size_t>(pi.pp) + 1, 0.0);
  ways[0] = 1.0;
  double vectors = 1.0;
  for (int h = 0; h < model.cluster().num_types(); ++h) {
    const int cap = std::min(stage_capacity(model.cluster(), h, pi, opt.space.constraints), pi.pp);
    if (cap == 0) continue;
    vectors *= cap + 1;
    std::vector<double> next(ways.size(), 0.0);
    double window = 0.0;  // sum of ways[s - cap .. s]
    for (std::size_t s = 0; s < ways.size(); ++s) {
      window += ways[s];
      if (s >= static_cast<std::size_t>(cap) + 1)
        window -= ways[s - static_cast<std::size_t>(cap) - 1];
      next[s] = window;
    }
    ways = std::move(next);
  }
  const bool mixes = opt.prune.load_balance && !opt.uniform;
  return static_cast<double>(pi.pp) * n * (mixes ? ways.back() : vectors);
}

double work_estimate(const CostModel& model, const ParallelConfig& pi, const SearchOptions& opt,
                     double incumbent, std::shared_ptr<const ConfigFacts>* facts) {
  if (!opt.prune.load_balance || opt.uniform) return work_estimate(model, pi, opt);
  auto made = std::make_shared<const ConfigFacts>(model, pi, opt);
  const Evaluator& ev = made->ev;
  if (facts != nullptr) *facts = made;
  double states = 0.0;  // usage vectors over the mixes the bound keeps
  const double cut = incumbent * (1.0 + 1e-12);
  for (const std::vector<int>& c : stage_mixes(ev)) {
    if (opt.bound && ev.mix_lower_bound(c, nullptr, cut) > cut) continue;
    double vectors = 1.0;
    for (const int k : c) vectors *= k + 1;
    states += vectors;
  }
  return static_cast<double>(pi.pp) * ev.layers() * std::max(states, 1.0);
}

}  // namespace hapmoe
